"""What must be true of a text before libcst may parse it.

libcst's native parser is fast and faithful on real code, but on pathological input it does
worse than raise: 5,000 nested brackets overflow the C stack (a segfault that kills the whole
run, no `except` can catch it), and a few thousand chained operators (`a + a + ...`,
`a.b.b.b...`) take minutes. So Python's own parser looks first: it refuses what it cannot
nest itself (200 brackets, 100 indented blocks), and the syntax tree it builds tells how deep
the expressions go. Real code stays below 60 levels; 300 is refused.

The check costs about a tenth of a libcst parse (`ast.parse` is ~10x faster than libcst; the
depth walk only enters long expressions).
"""

from __future__ import annotations

import ast
import re
import warnings
from dataclasses import dataclass
from typing import List, Optional

from .offsets import line_starts

MAX_NESTING = 300  # levels of syntax tree
MAX_PARSE_CHARS = 2_000_000  # libcst needs ~250 bytes of memory per character of source
MAX_BRACKETS = 200  # Python's own limit (the tokenizer's MAXLEVEL)
_NESTING_ERROR_RE = re.compile(r"too many (?:nested|levels)|too deeply nested|too complex|stack overflow")


class TooDeep(Exception):
    """Input nested too deeply for libcst; the message says why (one line)."""


@dataclass(frozen=True)
class Verdict:
    """Python's opinion of a text: `error` is None when it parses, else its one-line message."""

    error: Optional[str] = None
    tree: Optional[ast.Module] = None  # when it parses (engine.migrate_python reuses it)

    @property
    def parses(self) -> bool:
        return self.error is None


def python_verdict(text: str) -> Verdict:
    """Parse `text` with Python's own parser. Raises TooDeep for input libcst must not see;
    other syntax errors come back in the verdict (libcst still gets its chance: it knows newer
    syntax than an old interpreter)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarning: invalid escape sequence, ...
            tree = ast.parse(text)
    except SyntaxError as exc:
        where = f"line {exc.lineno}:{exc.offset}" if exc.offset else f"line {exc.lineno or 1}"
        reason = f"{where}: {exc.msg}"
        if _NESTING_ERROR_RE.search(exc.msg or "") or bracket_depth(text) >= MAX_BRACKETS:
            raise TooDeep(f"too deeply nested ({reason})") from None
        return Verdict(reason)
    except (RecursionError, MemoryError):
        raise TooDeep("too deeply nested") from None
    except ValueError as exc:  # NUL bytes (the reader refuses those first)
        return Verdict(str(exc).strip().splitlines()[0] if str(exc).strip() else "ValueError")
    if deeper_than(tree, text, MAX_NESTING):
        raise TooDeep(f"too deeply nested (more than {MAX_NESTING} levels of syntax)")
    return Verdict(tree=tree)


def deeper_than(tree: ast.AST, text: str, limit: int) -> bool:
    """Whether `tree` nests more than `limit` levels deep.

    Statements nest at most ~100 deep (Python's indentation limit); only expressions can go
    further, and each level of an expression takes at least one byte of source (plus two
    leaves: a context and an operator). So the walk goes through the statements and only
    enters an expression whose source is longer than the levels left: a full walk would cost
    half as much again as `ast.parse`.
    The same holds, with room to spare, for the other nodes with a position (statements,
    handlers, arguments, keywords, aliases, patterns): a level of them takes a byte too, and
    at most one node without a position (`arguments`, `withitem`, `comprehension`,
    `match_case`) sits between two that have one; so a statement shorter than half the levels
    left is not entered either (most of a file's statements: the walk then costs a third
    less). tests/test_hostile_inputs.py compares the verdicts with the walk that enters every
    statement, at every limit from 3 up, on the fixtures and the test inputs.
    """
    # (child_nodes and _byte_span written inline: this loop runs for every node it enters,
    # 0.48 -> 0.40 CPU-s on transformers' 308 parsed files)
    starts = _line_starts(text)
    lines = len(starts)
    stack = [(tree, 1)]
    expr, node_class = ast.expr, ast.AST
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        room = limit - depth
        for name in node._fields:
            value = getattr(node, name, None)
            if type(value) is list:
                found = value
            elif isinstance(value, node_class):
                found = [value]
            else:
                continue
            for child in found:
                if not isinstance(child, node_class):
                    continue
                line = getattr(child, "lineno", None)
                if line is not None:  # (a node with a position: its span, as _byte_span)
                    end_line, end_col = getattr(child, "end_lineno", None), getattr(child, "end_col_offset", None)
                    if end_line is None or end_col is None or line > lines or end_line > lines:
                        span = 1 << 30
                    elif end_line == line:
                        span = end_col - getattr(child, "col_offset", 0)
                    else:
                        span = (starts[end_line - 1] + end_col) - (starts[line - 1] + getattr(child, "col_offset", 0))
                    if isinstance(child, expr):
                        if span + 2 <= room:
                            continue  # too short to reach the limit
                    elif hasattr(child, "end_col_offset") and 2 * span + 4 <= room:
                        continue
                stack.append((child, depth + 1))  # (no position: walked, as _byte_span's unknown span)
    return False


def child_nodes(node: ast.AST) -> List[ast.AST]:
    """`list(ast.iter_child_nodes(node))`, for half its cost (the walks over every node of a
    file's tree: this depth check, prefilter.code_words)."""
    out: List[ast.AST] = []
    for name in node._fields:
        value = getattr(node, name, None)
        if type(value) is list:
            out.extend([item for item in value if isinstance(item, ast.AST)])
        elif isinstance(value, ast.AST):
            out.append(value)
    return out


def _line_starts(text: str) -> List[int]:
    """Byte offset (UTF-8, as `col_offset` counts) of the start of each line; index 0 is line 1."""
    return line_starts(text.encode("utf-8", "surrogatepass"))


def _byte_span(node: ast.AST, starts: List[int]) -> int:
    end_line = getattr(node, "end_lineno", None)
    end_col = getattr(node, "end_col_offset", None)
    line: int = getattr(node, "lineno", 0)
    if end_line is None or end_col is None or line > len(starts) or end_line > len(starts):
        return 1 << 30  # unknown: walk it
    col: int = getattr(node, "col_offset", 0)
    return (starts[end_line - 1] + end_col) - (starts[line - 1] + col)


def bracket_depth(text: str) -> int:
    """Deepest bracket nesting, counting brackets in strings and comments too (only used on
    text Python cannot parse, where no syntax tree is available)."""
    depth = deepest = 0
    for m in re.finditer(r"[][(){}]", text):
        depth += 1 if m.group() in "([{" else -1
        if depth > deepest:
            deepest = depth
    return deepest
