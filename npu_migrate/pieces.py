"""Parsing a long module in pieces: the same libcst tree for a fraction of the memory.

libcst's native parser holds, while it parses, its tokens and its own tree of the whole text
besides the tree it hands back: ~300 bytes a character (tensor2tensor's common_attention.py,
246 KB: 75 MB more resident during the parse, for a tree of 7 MB), which the C heap keeps until
a trim. That parse was a worker's peak, and with two workers the run's (tensor2tensor 1.15.7,
-j 2: 155-183 MB PSS). Parsed in pieces of about PIECE characters, each a run of whole
statements, and the pieces' statements put into one Module, the parse holds one piece's worth
at a time (that file: 12 MB more, and 0.36 CPU-s instead of 0.57). A piece is a run of
top-level statements, or of the statements of a top-level class's or function's body (one
class is most of transformers' trainer.py and modeling_tf_utils.py), parsed after a header of
that kind (`class _:`), whose block's statements go into the definition begun in the piece
before.

The tree is the whole text's: a statement owns the lines before it, which the parse of a piece
gives to the piece before (its footer, after what the last indented block there owns) and
to its own (its header): they go back in front of the statement's leading lines, as lines of
the block the statement is in (EmptyLine.indent). A piece starts only after empty lines: at the
end of a text libcst drops some lines of spaces, and comments indented between two blocks',
which a statement after them owns (cuts()). The module's header and encoding are the first
piece's, its footer and final newline the last's. Its default indent and newline are what every
piece says (libcst takes the first indent and the first newline of the text; a piece without an
indented block says four spaces): where the pieces disagree, or a piece cannot be parsed, the
text is parsed whole (libcst's error is then the whole text's). tests/test_pieces.py compares
the trees, cut wherever they may be, on shapes of lines between statements and on the fixtures
(bench/differential.py compares the results on the corpora).
"""

from __future__ import annotations

import ast
import re
from itertools import accumulate
from typing import TYPE_CHECKING, Any, Iterable, List, Sequence, Set, Tuple

if TYPE_CHECKING:
    import libcst as cst

# Characters of text a piece holds at least (the last one may be shorter): a text shorter than
# twice this is parsed whole. 4 KB: the parse's own memory is then a few MB whatever the file
# (common_attention.py: 16 KB pieces 14 MB more resident, 4 KB 12, 1 KB 10; the tree alone 7).
PIECE = 4096

_NEWLINE = re.compile(r"\r\n|\r|\n")  # Python's line ends (as ast's line numbers count them)


# What a piece inside the body of a top-level definition is parsed after: a header of that kind.
_HEADERS = {ast.ClassDef: "class _:\n", ast.FunctionDef: "def _():\n", ast.AsyncFunctionDef: "async def _():\n"}
_OTHER_LINE_ENDS = re.compile("[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")  # (str.splitlines's, not Python's)


def _line_starts(text: str) -> List[int]:
    """The offset of each line of `text` (Python's lines: \\r\\n, \\r or \\n end one)."""
    if _OTHER_LINE_ENDS.search(text) is None:
        return [0, *accumulate(map(len, text.splitlines(keepends=True)))]
    return [0, *(match.end() for match in _NEWLINE.finditer(text))]


def _first(stmt: ast.stmt) -> int:
    decorators = getattr(stmt, "decorator_list", None)
    return min(stmt.lineno, *(d.lineno for d in decorators)) if decorators else stmt.lineno


def cuts(text: str, tree: ast.Module, runs: Iterable[Tuple[int, int, str]] = ()) -> List[Tuple[int, str]]:
    """Where to cut `text`, ascending: (offset, header). At the start of a line where a statement
    starts, the first on its line, PIECE or more characters after the cut before: a top-level
    statement of `tree` (Python's tree of `text`; header "") or one of the body of a top-level
    class or function after its first (the header its piece is parsed after: _HEADERS).
    `runs`: (start, end, indent) ranges of 0-based lines the text replaced by a placeholder
    (partial.PartialText: the partial text has the file's lines, and `tree` is the file's): no
    cut inside one. Empty for a short text."""
    if len(text) < 2 * PIECE:
        return []
    inside: Set[int] = set()
    for start, end, _indent in runs:
        inside.update(range(start + 1, end))
    starts = _line_starts(text)

    def may_cut(first: int, last: int) -> bool:
        """Whether a piece may start at line `first` (1-based) after a statement ending on line
        `last`: a statement of its own line, not in a placeholder, and only empty lines between
        (at the end of a text libcst drops some lines of spaces, and comments at an indent
        between two blocks' that a statement after them owns: the piece would lose them)."""
        return (last < first <= len(starts) and first - 1 not in inside
                and not text[starts[last]:starts[first - 1]].strip("\r\n"))

    wanted: List[Tuple[int, str]] = []  # (0-based line, header) where a statement starts its line
    last = 0
    for stmt in tree.body:
        first = _first(stmt)
        if last and may_cut(first, last):
            wanted.append((first - 1, ""))
        last = max(last, stmt.end_lineno or stmt.lineno)
        header = _HEADERS.get(type(stmt))
        body: Sequence[ast.stmt] = getattr(stmt, "body", ())
        if header is None or len(body) < 2 or body[0].lineno - 1 >= len(starts):
            continue
        line = starts[body[0].lineno - 1]
        if text[line:line + body[0].col_offset].strip(" \t"):  # (`class A: x = 1`: no block of lines)
            continue
        inner = body[0].end_lineno or body[0].lineno
        for child in body[1:]:
            first = _first(child)
            if may_cut(first, inner):
                wanted.append((first - 1, header))
            inner = max(inner, child.end_lineno or child.lineno)
    found: List[Tuple[int, str]] = []
    at = 0
    for line, header in wanted:
        if line >= len(starts):
            break
        offset = starts[line]
        if offset - at >= PIECE and len(text) - offset >= PIECE:
            found.append((offset, header))
            at = offset
    return found


def _in_block(lines: Sequence, indent: str) -> Tuple:
    """Empty lines of the module (a piece's footer) as those of a block indented `indent`
    (libcst's EmptyLine.indent: whether the line starts with the block's indent, then left out
    of its whitespace)."""
    import libcst as cst

    return tuple(line.with_changes(indent=True, whitespace=cst.SimpleWhitespace(line.whitespace.value[len(indent):]))
                 if line.whitespace.value.startswith(indent) else line.with_changes(indent=False)
                 for line in lines)


def parse(text: str, at: Sequence[Tuple[int, str]]) -> "cst.Module":
    """libcst's tree of `text`, parsed in the pieces that begin at the cuts `at` (cuts())."""
    import libcst as cst

    if not at:
        return cst.parse_module(text)
    bounds = [(0, ""), *at, (len(text), "")]
    try:
        parts = [(cst.parse_module(header + text[a:b]), bool(header))
                 for (a, header), (b, _) in zip(bounds, bounds[1:])]
    except Exception:  # the whole text's parse says what is wrong (or parses it)
        return cst.parse_module(text)
    first = parts[0][0]
    if any(p.default_indent != first.default_indent or p.default_newline != first.default_newline
           or not p.body for p, _ in parts):
        return cst.parse_module(text)
    body: List[Any] = []  # the module's statements
    opened: Any = None  # the top-level definition whose body goes on in the next piece
    inner: List[Any] = []  # its body's statements so far
    owned: Sequence[Any] = ()  # the lines before the next piece's first statement
    for n, (part, wrapped) in enumerate(parts):
        statements: List[Any] = list(part.body)
        lines = (*owned, *part.header)
        block: Any = None
        if wrapped:  # the body of `opened` goes on
            block = statements.pop(0).body
            head = block.body[0]
            inner += [head.with_changes(leading_lines=(*lines, *head.leading_lines)), *block.body[1:]]
        elif n:  # (the first piece's header is the module's)
            statements[0] = statements[0].with_changes(leading_lines=(*lines, *statements[0].leading_lines))
        goes_on = n + 1 < len(parts) and parts[n + 1][1]
        if opened is not None and block is not None and (statements or not goes_on):  # it ends here
            body.append(opened.with_changes(body=opened.body.with_changes(body=tuple(inner), footer=block.footer)))
            opened = None
        if goes_on and opened is None:
            opened = statements.pop()
            inner = list(opened.body.body)
            block = opened.body
        body += statements
        if goes_on and block is not None:  # (the module's lines as the body's: _in_block)
            owned = (*block.footer, *_in_block(part.footer, block.indent or first.default_indent))
        else:
            owned = part.footer
    return first.with_changes(body=tuple(body), footer=owned, has_trailing_newline=parts[-1][0].has_trailing_newline)
