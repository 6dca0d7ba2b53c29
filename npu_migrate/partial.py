"""Partial parsing: libcst parses only the statements that can need work.

The prefilter skips files that cannot need anything, but the files it lets through are often
large (a 3,000-line `modeling_*.py` with one `torch.cuda.is_available()`; a 5,000-line
`class Trainer` with one `.cuda()`), and parsing is most of the cost. Python's own parser runs
first anyway (safe_parse) and is ~10x faster than libcst; its tree tells where each statement
ends. The file is cut into *chunks*: each top-level statement with the comments and blank lines
before it, and inside a class or a function, each statement of its body (the header staying
with it: a 200-line `forward` with one `.cuda()` is parsed as its `def` line and that
statement). A chunk is *kept* when its text holds the leaf word of some rule requirement
(prefilter.Requirement.leaf: the last part of a qualified name, a method, the word of a device
string -- the word the matched code itself contains, written as the requirement says), a name
the file's imports bind to something a rule names (`tc` after `import torch.cuda as tc`), or
the word `import` (the import table reads every import). Each run of other lines becomes one
string statement as many lines long, indented as the statements it stands for (one token for
libcst), so everything kept keeps its line and column. libcst parses that text, the codemods
run on it, and in the migrated text each placeholder is put back to the lines it stands for.

When it is not used, or given up for a whole parse (`engine.migrate_python`):

* files of other frameworks than PyTorch where one of that framework's rules can match the
  code (prefilter.CodeWords; transformers' TF2 models, with `model.fit()` only in their docs,
  have none): the TensorFlow/MindSpore codemods follow bindings from statement to statement --
  for TensorFlow only its rewrites: a TF 1.x file where only its findings can match (Huawei's
  support list, `tf.float64`) is parsed partially, its partial text keeping the statements
  with their words too (statement_filter(rules, "tensorflow")); and `--modelarts` (it plans
  around the whole script);
* a pass that needs statements left out: the device-variable pass (`DEV = "cuda:0"` is a
  device string because `x.to(DEV)` is written elsewhere) notes each variable whose name is
  written in a line left out (Context.partial_misses), and the file is migrated again with
  the chunks that write those names (NeedsWholeModule(words); after three tries, whole);
  likewise a pass that reads a function whole (does it `return "cpu"` somewhere?) asks for
  the lines left out of it (Context.partial_lines, PartialText.elided_in); the work counts
  say how often (`retry`, `fallback`: work.py);
* lone `\\r` line endings (line numbering), text that holds the marker itself, and a migrated
  text in which the placeholders do not come back exactly once each, whole and in order.

What libcst never parses is never rewritten either: those lines are copied from the input.
The one difference from a whole parse follows: a file libcst cannot give back exactly (it
drops a line holding only a `\\` continuation, for one) is refused only when the trouble is
in a line it parses.
tests/test_partial.py compares partial and whole results on the fixtures and on cases made to
cross statements, tests/test_properties.py on generated programs, and `bench/corpus_check.py`
on every file of the corpora.
"""

from __future__ import annotations

import ast
import re
from keyword import iskeyword
from dataclasses import dataclass, field
from typing import AbstractSet, Dict, Iterable, Iterator, List, Optional, Sequence, Set, Tuple, Type

from .frameworks import DEVICE_NAME_RE, FRAMEWORK_IMPORTS, JAX_IMPORTS, LIBRARY_CUDA_TESTS, RESOLVED_PACKAGES, TF2_FINDING
from .prefilter import Prefilter, compiled, link_found, link_regex, rule_requirements
from .words import Requirement, Word, words_of

MARKER = "npu-migrate-elided:"
_MATCH_CASE: Type[ast.AST] = getattr(ast, "match_case", ast.stmt)  # Python >= 3.10


class NeedsWholeModule(Exception):
    """Raised by a pass that must see more statements of the module: those that hold one of
    `words`, and those in the line ranges `lines` ((start, end), 0-based, end excluded: runs
    left out of a function a pass reads whole); then the partial text is made again with them.
    Without either, all of them."""

    def __init__(self, reason: str, words: Iterable[str] = (), lines: Iterable[Tuple[int, int]] = ()) -> None:
        super().__init__(reason)
        self.words = frozenset(words)
        self.lines = frozenset(lines)


@dataclass
class Chunk:
    """Lines [start, end) (0-based) of one statement (or several on one line) with the
    comments and blank lines before it. A class or function has `body(lines)`: the chunks of
    its statements (made when asked: most are never looked into); lines [start,
    body[0].start) are its header."""

    start: int
    end: int
    statements: List[ast.stmt]
    indent: str  # of its first statement
    block: Optional["ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef"] = None  # whose body can be cut
    _body: Optional[List["Chunk"]] = None

    def body(self, lines: List[str]) -> Optional[List["Chunk"]]:
        if self._body is None and self.block is not None:
            first = self.block.body[0]
            self._body = _chunks(self.block.body, _first_line(first) - 1, self.end, lines)
            self.block = None
        return self._body


# Refs (prefilter.Requirement) that hold in the statement holding the match: `.cuda`,
# `'cuda`, `nn.Transformer` -- the last except through an alias, which StatementFilter adds;
# `device(0)` (index_call); `import device as Device` (import_as: its uses hold the alias, which
# StatementFilter keeps as an alias word);
# `.image` or `import ... image` (a framework name: words.framework_name) -- except where the
# name is written alone, which resolves only where an import binds it (imports.ImportTable):
# in a file where one does, or a star import may, the word alone keeps a statement (left_out).
_STATEMENT_REFS = {"attr", "call_or_def", "quoted", "quoted_any_case", "cuda_pair", "link", "attr_or_import", "index_call",
                   "import_as"}


class StatementFilter:
    """Whether one chunk can hold a match of a rule: the file-level requirements (prefilter.py)
    cut down to what the matched code itself contains (its leaf word and the refs above); the
    imports the import table must see; and, per file, the names those imports bind to what a
    rule names."""

    def __init__(self, requirements: Sequence[Requirement], packages: Iterable[str],
                 renamed_members: Iterable[str] = (), literals: Iterable[str] = (),
                 env_literals: Iterable[str] = ()) -> None:
        """`packages`: those the codemods resolve names of besides the ones the rules name.
        `renamed_members`: the methods and attributes the PyTorch pass renames on any receiver
        that is not an imported name (`cuda`, `is_cuda`: codemods/torch/methods.py).
        `literals`: the device, backend and environment strings the PyTorch pass rewrites, as
        they may be spelled (a backend in any case), `env_literals` the last (literal_readers)."""
        self.literal_words = sorted(set(literals), key=lambda w: (-len(w), w))
        self.env_words = set(env_literals)
        self.literal_re: "Optional[re.Pattern[str]]" = (
            re.compile(r"""(['"])(""" + "|".join(re.escape(w) for w in self.literal_words) + r""")(?::[^'"\\\n]*)?\1""")
            if self.literal_words else None)
        per_statement = [
            Requirement(frozenset({r.leaf_word}), frozenset(ref for ref in r.refs if ref[0] in _STATEMENT_REFS))
            for r in requirements
            if r.leaf_word is not None and r.leaf_word != Word("import")
        ]
        self.prefilter = Prefilter(per_statement)
        # leaf words of `attr_or_import` refs: kept alone in a file whose imports bind them
        self.imported_leaves: Set[bytes] = {
            r.leaf_word.text.encode() for r in requirements
            if r.leaf_word is not None and any(kind == "attr_or_import" for kind, _ in r.refs)}
        self.names: Set[str] = {r.name for r in requirements if "." in r.name}
        self.children: Dict[str, Set[str]] = {}  # `torch.cuda` -> {`synchronize`, ...}
        for name in self.names:
            parent, last = name.rsplit(".", 1)
            self.children.setdefault(parent, set()).add(last)
        # Imports of these packages decide what the import table says about the file (its
        # frameworks, names a rule matches, imports a finding names).
        self.roots: Set[str] = {r.name.split(".", 1)[0] for r in requirements if r.name}
        self.roots.update(m.split(".", 1)[0] for m in packages)
        # `utils.cuda(batch)` after `from torchdrug import utils` calls the project's function, and
        # the method rules leave it because `utils` is imported: the import that binds such a
        # receiver is kept too, or the partial text would not bind it and `.cuda` moved.
        members = sorted(set(renamed_members))
        self.member_words: Set[bytes] = {m.encode() for m in members}
        self.member_re: "Optional[re.Pattern[str]]" = (
            re.compile(r"\.[ \t]*(?:" + "|".join(re.escape(m) for m in members) + r")\b") if members else None)

    def _literals(self, text: str, words: Optional[AbstractSet[bytes]]) -> List["re.Match[str]"]:
        """The quoted literals of literal_readers, in order: each word among the text's `words`
        (words_of, when made) found with str.find, then matched from the quote before it (a
        regex led by a quote tried every quote of the text: 0.08 s over transformers' files
        parsed partially, 0.021 s so)."""
        assert self.literal_re is not None
        found: List["re.Match[str]"] = []
        for word in self.literal_words:
            if words is not None and word.encode() not in words:
                continue
            at = text.find(word, 1)
            while at != -1:
                if text[at - 1] in "'\"":
                    match = self.literal_re.match(text, at - 1)
                    if match is not None and match.group(2) == word:
                        found.append(match)
                at = text.find(word, at + 1)
        found.sort(key=lambda match: match.start())
        return found

    def literal_readers(self, text: str, words: Optional[AbstractSet[bytes]] = None) -> Set[str]:
        """The names the PyTorch pass's literal analysis can ask every use of, told from the
        text around each quoted device, backend or environment literal (`"cuda"`, `'nccl'`,
        `"CUDA_VISIBLE_DEVICES"`) outside triple-quoted strings (by the parity of the triple
        quotes before it): a name assigned the literal or a list or tuple holding it (`backend =
        "nccl"`), or the parameter it is the default of (`def run(cfg, backend="nccl"):`),
        compared with it (`bnd in ("nccl", "gloo")`, `"gpu" not in data`), subscripted with an
        environment variable's name (`env["CUDA_VISIBLE_DEVICES"]`), and a function or class of
        the module called with it (`_test_spawn("nccl", device)`: its parameters are read; the
        call may open up to _LINES_UP lines above). The first partial text keeps the statements
        that hold them (partial_text's `also`): the analysis asks for them when a statement left out holds
        one (NeedsWholeModule(words): a second attempt), so this only saves that attempt (or
        costs a larger first text where it would not have asked). A name a device is told by
        (DEVICE_NAME_RE: `device`) is answered from the name, never asked. `words`: the text's
        words (words_of), when made."""
        if self.literal_re is None:
            return set()
        names: Set[str] = set()
        defined: Optional[Set[str]] = None
        counted, doubles, singles = 0, 0, 0  # triple quotes before `counted`
        for found in self._literals(text, words):
            at = found.start()
            doubles += text.count('"""', counted, at)
            singles += text.count("'''", counted, at)
            counted = at
            if doubles % 2 or singles % 2:
                continue  # (in a docstring, most likely: the analysis never sees it)
            start = text.rfind("\n", 0, at) + 1
            end = text.find("\n", found.end())
            before, after = text[start:at], text[found.end():len(text) if end == -1 else end]
            prefix = _PREFIX_RE.search(before)  # (f"cuda:{i}", r"nccl")
            if prefix is not None:
                before = before[:prefix.start()]
            for match in (_COMPARED_BEFORE_RE.search(before), _COMPARED_AFTER_RE.match(after),
                          _SUBSCRIPTED_BEFORE_RE.search(before) if found.group(2) in self.env_words else None):
                if match is not None:
                    names.add(match.group(1))
            opened, above = before, start
            for _ in range(_LINES_UP):  # (a call or a def whose arguments go on over lines)
                if not above or _CALL_OPEN_RE.search(opened):
                    break
                line_start = text.rfind("\n", 0, above - 1) + 1
                previous = text[line_start:above - 1]
                if "#" in previous and "'" not in previous and '"' not in previous:
                    previous = previous[:previous.index("#")]
                previous = previous.rstrip()
                if not previous.endswith(("(", ",")):
                    break
                opened, above = previous + " " + opened, line_start
            callee = _open_callee(opened)
            if callee is None:
                match = _ASSIGNED_RE.match(before)  # (inside a call's brackets, `name="gpu"` is its keyword)
                if match is not None:
                    names.add(match.group(1))
            elif callee and _DEF_RE.match(opened):  # a parameter's default: `def run(cfg, backend="nccl"):`
                match = _KEYWORD_BEFORE_RE.search(before)
                if match is not None:
                    names.add(match.group(1))
            elif callee:
                if defined is None:
                    defined = set(_DEFINED_RE.findall(text))
                if callee in defined:
                    names.add(callee)
        return {name for name in names
                if not iskeyword(name) and name not in _NOT_READERS and not DEVICE_NAME_RE.search(name)}

    def left_out(self, chunks: List[Chunk], lines: List[str], also: Set[bytes],
                 ranges: Iterable[Tuple[int, int]] = ()) -> List[Chunk]:
        """The chunks libcst need not parse, in order (a kept class or function may leave out
        some of its body). `also`: words whose chunks are kept too; `ranges`: line ranges
        ((start, end), 0-based) whose chunks are kept too."""
        forced = sorted(ranges)
        texts = ["".join(lines[c.start : c.end]) for c in chunks]
        words = [words_of(text) for text in texts]
        imports = [_chunk_imports(c, text, w) for c, text, w in zip(chunks, texts, words)]
        # The import table reads every import of a package in `roots` (and star imports);
        # another import matters only where it binds the same name as one of those.
        relevant_locals = {local for found in imports for local, qualified in found if self._relevant(qualified)}
        others = {local for found in imports for local, qualified in found if not self._relevant(qualified)}
        if others and self.member_re is not None:
            relevant_locals.update(self._receivers(texts, words, others))
        # A name imported as (or from) something a rule names stands for it wherever it is
        # used: after `import torch.cuda as tc`, `tc.synchronize()` holds no `cuda`.
        alias_words: Set[bytes] = set(also)
        bound = {local for found in imports for local, _ in found}  # the names imports bind ("*": a star import)
        alias_words.update(self.imported_leaves if "*" in bound else
                           (w for w in self.imported_leaves if w.decode() in bound))
        alias_links: List[Tuple[bytes, bytes, str]] = []  # (its words, the pattern: compiled when both are in a chunk)
        for local, qualified in (pair for found in imports for pair in found):
            parts = qualified.split(".")
            if any(".".join(parts[:i]) in self.names for i in range(1, len(parts) + 1)):
                alias_words.add(local.encode())
            for last in self.children.get(qualified, ()):
                if local != parts[-1]:  # else the rule's own `parent.last` link finds it
                    alias_links.append((local.encode(), last.encode(), link_regex(local, last)))

        def needed(chunk: Chunk, text: str, chunk_words: Set[bytes], chunk_imports) -> bool:
            if any(start < chunk.end and chunk.start < end for start, end in forced):
                return True
            if _only_strings(chunk.statements):  # a docstring: see _only_strings
                return not chunk_words.isdisjoint(also)
            return (
                any(local in relevant_locals for local, _ in chunk_imports)
                or self.prefilter.may_need_work(text, chunk_words)
                or not alias_words.isdisjoint(chunk_words)
                or any(a in chunk_words and b in chunk_words and link_found(compiled(p), text) for a, b, p in alias_links)
            )

        out: List[Chunk] = []

        def visit(chunk: Chunk, text: str, chunk_words: Set[bytes], chunk_imports) -> None:
            if not needed(chunk, text, chunk_words, chunk_imports):
                out.append(chunk)
            elif chunk.block is not None or chunk._body:
                for part in chunk.body(lines) or ():
                    part_text = "".join(lines[part.start : part.end])
                    part_words = words_of(part_text)
                    visit(part, part_text, part_words, _chunk_imports(part, part_text, part_words))

        for chunk, text, chunk_words, chunk_imports in zip(chunks, texts, words, imports):
            visit(chunk, text, chunk_words, chunk_imports)
        visit = None  # type: ignore[assignment]  # it refers to itself: a reference cycle holding the chunks' syntax trees
        return out

    def _receivers(self, texts: List[str], words: List[Set[bytes]], names: Set[str]) -> Set[str]:
        """Those of `names` that start the receiver of a renamed member in `texts` (`utils` of
        `utils.cuda(x)` and of `utils.mod.cuda(x)`), looked for in the chunks holding such a
        member and one of the names."""
        found: Set[str] = set()
        assert self.member_re is not None
        wanted = {name.encode() for name in names}
        for text, chunk_words in zip(texts, words):
            if chunk_words.isdisjoint(self.member_words) or chunk_words.isdisjoint(wanted):
                continue
            for m in self.member_re.finditer(text):
                line_start = text.rfind("\n", 0, m.start()) + 1
                root = _CHAIN_ROOT.search(text, line_start, m.start())
                if root is not None and root.group(1) in names:
                    found.add(root.group(1))
        return found

    def _relevant(self, qualified: str) -> bool:
        # (a library's CUDA test: the torch pass keeps the branches it opens, guards.file_cuda_tests)
        return qualified == "*" or qualified.split(".", 1)[0] in self.roots or qualified in LIBRARY_CUDA_TESTS


@dataclass
class PartialText:
    """The text libcst parses instead of the file, and how to put the file back together."""

    text: str
    lines: List[str]  # the file's lines, each with its line ending
    runs: List[Tuple[int, int, str]]  # (start, end, indent): line ranges left out, ascending
    # run start -> the statements (Python's ast) it leaves out, in order
    left_out: Dict[int, List[ast.stmt]] = field(default_factory=dict)
    migrated: Optional[str] = None  # the migrated partial text, once restored (engine._verified parses it)
    _elided_words: Optional[Set[bytes]] = None
    _run_words: Optional[List[Set[bytes]]] = None  # each run's words (elided_with)

    def elided_word(self, word: str) -> bool:
        """Whether `word` appears in a line left out (then some use of it is not parsed)."""
        return word.encode() in self._elided()

    def elided_word_matching(self, pattern: "re.Pattern[bytes]") -> bool:
        """Whether a word of the lines left out matches `pattern`."""
        return any(pattern.search(word) for word in self._elided())

    def _elided(self) -> Set[bytes]:
        if self._elided_words is None:
            self._elided_words = words_of("".join("".join(self.lines[a:b]) for a, b, _ in self.runs))
        return self._elided_words

    def elided_with(self, word: str, others: Iterable[str]) -> bool:
        """Whether a run of lines left out holds `word` and one of `others` (then a statement
        there may use both; a run holds whole statements)."""
        if not self.elided_word(word):
            return False
        if self._run_words is None:
            self._run_words = [words_of("".join(self.lines[a:b])) for a, b, _ in self.runs]
        found = word.encode()
        wanted = {other.encode() for other in others}
        return any(found in words and not wanted.isdisjoint(words) for words in self._run_words)

    def elided_in(self, block, word: str) -> List[Tuple[int, int]]:
        """The runs left out of `block` (a libcst suite: its own statements, not those of the
        blocks inside it) whose lines hold `word`, as (start, end) line ranges (0-based):
        what NeedsWholeModule(lines=...) asks to parse when a pass reads a function whole."""
        if not self.elided_word(word):
            return []
        return [run for run in self.runs_among(getattr(block, "body", ()))
                if word.encode() in words_of(self.text_of(run))]

    def keeps(self, lines: Iterable[Tuple[int, int]]) -> bool:
        """Whether every line of `lines` ((start, end) ranges of 0-based lines, end excluded)
        is in the partial text as it is in the file: no run left out holds one."""
        return not any(a < end and start < b for start, end in lines for a, b, _ in self.runs)

    @staticmethod
    def runs_among(statements) -> List[Tuple[int, int]]:
        """The runs left out that `statements` (libcst statements of one block) stand for:
        their placeholders' line ranges ((start, end), 0-based)."""
        found = []
        for stmt in statements:
            small = getattr(stmt, "body", None)
            value = getattr(small[0], "value", None) if isinstance(small, (list, tuple)) and len(small) == 1 else None
            text = getattr(value, "value", None)  # a placeholder's string (`return f().x` has a node there)
            label = _PLACEHOLDER_RE.match(text) if isinstance(text, str) else None
            if label is not None:
                found.append((int(label.group(1)) - 1, int(label.group(2))))
        return found

    def text_of(self, run: Tuple[int, int]) -> str:
        return "".join(self.lines[run[0]:run[1]])

    def statements_of(self, run: Tuple[int, int]) -> List[ast.stmt]:
        """The statements of a block that `run` (from runs_among) leaves out (Python's ast)."""
        return self.left_out.get(run[0], [])

    def restore(self, migrated: str) -> Optional[str]:
        """The migrated file: `migrated` (the migrated partial text) with each placeholder put
        back to the lines it stands for; None when the placeholders did not survive intact."""
        out: List[str] = []
        lines = _lines(migrated)
        runs = iter(self.runs)
        run = next(runs, None)
        i = 0
        while i < len(lines):
            line = lines[i]
            if MARKER not in line:
                out.append(line)
                i += 1
                continue
            if run is None:
                return None
            placeholder = _placeholder(self.lines, *run)
            if lines[i : i + len(placeholder)] != placeholder:
                return None
            out.extend(self.lines[run[0] : run[1]])
            i += len(placeholder)
            run = next(runs, None)
        return "".join(out) if run is None else None


def partial_text(text: str, tree: ast.Module, statements: StatementFilter,
                 also: Iterable[str] = (), ranges: Iterable[Tuple[int, int]] = ()) -> Optional[PartialText]:
    """The partial text of `text` (whose syntax tree is `tree`), or None when nothing would be
    left out or partial parsing cannot be used on it. `also`: words whose chunks are kept too;
    `ranges`: line ranges ((start, end), 0-based) whose chunks are kept too."""
    if MARKER in text or "\r" in text.replace("\r\n", ""):
        return None
    lines = _lines(text)
    chunks = _chunks(tree.body, 0, len(lines), lines)
    if chunks is None:
        return None
    if len(lines) > (chunks[-1].end if chunks else 0):  # comments after the last statement
        chunks.append(Chunk(chunks[-1].end if chunks else 0, len(lines), [], ""))
    runs: List[Tuple[int, int, str]] = []
    left_out: Dict[int, List[ast.stmt]] = {}
    for chunk in statements.left_out(chunks, lines, {w.encode() for w in also}, ranges):
        if chunk.start == chunk.end:
            continue
        if runs and runs[-1][1] == chunk.start and runs[-1][2] == chunk.indent:
            runs[-1] = (runs[-1][0], chunk.end, chunk.indent)
        else:
            runs.append((chunk.start, chunk.end, chunk.indent))
        left_out.setdefault(runs[-1][0], []).extend(chunk.statements)
    if not runs:
        return None
    parts: List[str] = []
    at = 0
    for start, end, indent in runs:
        parts.extend(lines[at:start])
        parts.extend(_placeholder(lines, start, end, indent))
        at = end
    parts.extend(lines[at:])
    return PartialText("".join(parts), lines, runs, left_out)


# A placeholder's string as libcst gives it: `"""npu-migrate-elided:3-6` (1-based, inclusive).
_PLACEHOLDER_RE = re.compile('"""' + re.escape(MARKER) + r"(\d+)-(\d+)")


def _placeholder(lines: List[str], start: int, end: int, indent: str) -> List[str]:
    """The lines standing for lines[start:end]: one string statement as many lines long (a
    single token, where as many lines of code or comments would cost libcst nodes), indented
    as the statements it replaces, each line with the line ending of the line it stands for."""
    if end - start > 2 and "\r" not in "".join(lines[start:end - 1]):  # (the usual case, without a look at each line)
        endings = ["\n"] * (end - start - 1) + [_ending(lines[end - 1])]
    else:
        endings = [_ending(line) for line in lines[start:end]]
    label = f"{indent}\"\"\"{MARKER}{start + 1}-{end}"
    if end - start == 1:
        return [f'{label}"""{endings[0]}']
    return [label + endings[0]] + endings[1:-1] + [f'"""{endings[-1]}']


def _chunks(body: Sequence[ast.stmt], start: int, stop: int, lines: List[str]) -> Optional[List[Chunk]]:
    """The chunks of a block whose statements lie in lines [start, stop); None when the tree
    does not say where they end."""
    chunks: List[Chunk] = []
    group: List[ast.stmt] = []
    firsts = [_first_line(stmt) for stmt in body]
    for i, stmt in enumerate(body):
        end = getattr(stmt, "end_lineno", None)
        if end is None or end > stop or end <= start:
            return None
        group.append(stmt)
        if i + 1 < len(body) and firsts[i + 1] <= end:
            continue  # `a = 1; b = 2`: one line, one chunk
        first_line = lines[firsts[i + 1 - len(group)] - 1]
        chunk = Chunk(start, end, group, first_line[: len(first_line) - len(first_line.lstrip(" \t"))])
        if len(group) == 1 and isinstance(stmt, _BLOCKS) and stmt.body and _starts_its_line(stmt.body[0], lines):
            chunk.block = stmt
        chunks.append(chunk)
        start, group = end, []
    return chunks


def _only_strings(statements: Sequence[ast.stmt]) -> bool:
    """Whether `statements` are all string statements (docstrings, `"text"` on its own line):
    no rule matches one (a literal is rewritten or reported where it is used: an argument, an
    assignment, a comparison, ...; one standing alone is used nowhere), so the words it holds
    (`memory` in "CUDA out of memory" of a docstring, `cuda` in '`"cuda"` or `"cpu"`') do not
    keep it. Not f-strings: their expressions are code."""
    return bool(statements) and all(
        type(stmt) is ast.Expr and type(stmt.value) is ast.Constant and type(stmt.value.value) is str
        for stmt in statements)


# Statements whose bodies are cut into chunks of their own: a 200-line `forward` with one
# `.cuda()` is parsed as its header, that statement and placeholders.
_BLOCKS = (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def _starts_its_line(stmt: ast.stmt, lines: List[str]) -> bool:
    """Whether only indentation comes before `stmt` (its first decorator) on its first line: the
    header of the block holding it ends on an earlier line (not `def f(\n  a): return a`)."""
    line = lines[_first_line(stmt) - 1]
    indent = len(line) - len(line.lstrip(" \t"))
    if getattr(stmt, "decorator_list", None):
        return line[indent:indent + 1] == "@"  # (a decorator starts a line)
    return stmt.col_offset == indent


# literal_readers: around a literal, on its line: a name assigned it (or a list or tuple holding
# it), compared with it (either side; `in (` a display), subscripted with it (an environment
# variable's name); a name called with it (_open_callee), or the parameter it is the default of.
_PREFIX_RE = re.compile(r"(?<![\w])[rRbBuUfF]{1,2}$")
_ASSIGNED_RE = re.compile(r"[ \t]*([A-Za-z_]\w*)[ \t]*(?::[^=\n]*)?=[ \t]*(?:[(\[][^()\[\]{}]*)?$")
_COMPARED_BEFORE_RE = re.compile(
    r"(?<![\w.])([A-Za-z_]\w*)[ \t]*(?:==|!=|\bnot[ \t]+in|\bin)[ \t]*(?:[(\[{][^()\[\]{}]*)?$")
_COMPARED_AFTER_RE = re.compile(r"[ \t]*(?:==|!=|not[ \t]+in\b|in\b)[ \t]*([A-Za-z_]\w*)(?![\w.(\[])")
_SUBSCRIPTED_BEFORE_RE = re.compile(r"(?<![\w.])([A-Za-z_]\w*)\[[ \t]*$")
_LINES_UP = 8
_CALLED_RE = re.compile(r"[\w)\]][ \t]*$")
_CALL_OPEN_RE = re.compile(r"[A-Za-z_]\w*[ \t]*\(")
_CALLEE_BEFORE_RE = re.compile(r"(?<![\w.])(?:(?:self|cls)[ \t]*\.[ \t]*)?([A-Za-z_]\w*)[ \t]*$")
_DEF_RE = re.compile(r"[ \t]*(?:async[ \t]+)?def[ \t]")
_KEYWORD_BEFORE_RE = re.compile(r"(?<![\w.])([A-Za-z_]\w*)[ \t]*(?::[^=,()]*)?=[ \t]*$")
_DEFINED_RE = re.compile(r"^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+([A-Za-z_]\w*)", re.MULTILINE)
_NOT_READERS = frozenset({"self", "cls", "print"})


def _open_callee(before: str) -> Optional[str]:
    """The name called by the innermost call left open in `before` (text up to a literal),
    through displays and parentheses (`f(a, [`, `self.f(x=g(1), `); "" when that call's callee
    is not a name (`obj.f(`), None when no call is open."""
    depth = 0
    for at in range(len(before) - 1, -1, -1):
        char = before[at]
        if char in ")]}":
            depth += 1
        elif char in "([{":
            if depth:
                depth -= 1
            elif char == "(" and _CALLED_RE.search(before, 0, at):
                match = _CALLEE_BEFORE_RE.search(before, 0, at)
                if match is not None and iskeyword(match.group(1)):
                    continue  # `in (`, `if (`: a parenthesis
                return match.group(1) if match else ""
    return None


# The name an attribute chain ending where the search ends starts with (`utils` of `utils.mod`;
# nothing for the attribute of a call's or a subscript's result, `f(x).mod`).
_CHAIN_ROOT = re.compile(r"(?<![\w.)\]])([A-Za-z_]\w*)(?:[ \t]*\.[ \t]*[A-Za-z_]\w*)*[ \t]*$")

# Where an import statement can start: a line (after its indentation, or after a `\` that
# continues the line before), after a `;`, or after the `:` of a block's header (`try: import x`).
_IMPORT_START = re.compile(r"(?:^|[;:])[ \t\f]*(?:import|from)\b", re.MULTILINE)


def _chunk_imports(chunk: Chunk, text: str, words: Set[bytes]) -> List[Tuple[str, str]]:
    """_imports of a chunk whose text is `text` and words `words`; its statements are walked
    only when the text can hold an import statement (not for `import` in a docstring)."""
    if b"import" not in words or not _IMPORT_START.search(text):
        return []
    return list(_imports(chunk.statements))


def _imports(stmts: Sequence[ast.stmt]) -> Iterator[Tuple[str, str]]:
    """(local name, qualified name) of every import in `stmts`, at any depth of blocks (as
    imports.ImportTable reads them); a star import gives ("*", "*"), a relative one nothing else."""
    todo: List[ast.AST] = list(stmts)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    yield alias.asname, alias.name
                else:  # `import torch.cuda` binds `torch`, which stands for `torch`
                    yield alias.name.split(".", 1)[0], alias.name.split(".", 1)[0]
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name == "*":
                    yield "*", "*"
                elif node.module and not node.level:
                    yield (alias.asname or alias.name), f"{node.module}.{alias.name}"
        else:
            for field in ("body", "orelse", "handlers", "finalbody", "cases"):
                children = getattr(node, field, None)
                if isinstance(children, list):
                    todo.extend(c for c in children if isinstance(c, (ast.stmt, ast.excepthandler, _MATCH_CASE)))


def _first_line(stmt: ast.stmt) -> int:
    decorators = getattr(stmt, "decorator_list", None)
    return min(stmt.lineno, *(d.lineno for d in decorators)) if decorators else stmt.lineno


def _lines(text: str) -> List[str]:
    """Lines with their endings (`\\n` or `\\r\\n`); unlike str.splitlines, only what Python
    counts as a line break ends a line (not form feeds or U+2028)."""
    parts = text.split("\n")
    out = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


def _ending(line: str) -> str:
    return "\r\n" if line.endswith("\r\n") else "\n" if line.endswith("\n") else ""


_FILTERS: Dict[Tuple[str, str], Optional[StatementFilter]] = {}  # (rule set fingerprint, framework) -> its filter


def statement_filter(rules, framework: str = "") -> Optional[StatementFilter]:
    """The StatementFilter of the rules the PyTorch pass and the findings apply (framework
    rules apply only to TensorFlow/MindSpore files, which are parsed whole); with `framework`
    (tensorflow), also of that framework's findings: a TF 1.x file where only findings can
    match (engine.py) keeps every statement where one of them can. None when a rule's
    requirements have no single leaf word (then every file is parsed whole)."""
    key = (rules.fingerprint, framework)
    if key in _FILTERS:
        return _FILTERS[key]
    requirements: List[Requirement] = []
    found: Optional[StatementFilter] = None
    for rule in rules.rules:
        if rule.framework and rule.framework == framework and rule.kind == "entry_setup":
            # (it only reports in a file it is let into partially: prefilter._fact_of)
            from .kinds.entry_setup import statement_requirements

            requirements.extend(statement_requirements(rule))
            continue
        if rule.framework and not (rule.framework == framework and rule.kind == "finding"
                                   and rule.code != TF2_FINDING):  # (a TF 1.x file's: never TF 2's)
            continue
        reqs = rule_requirements(rule, forced_framework=framework) if rule.framework else rule_requirements(rule)
        if reqs is None or any(r.leaf_word is None for r in reqs):
            break
        requirements.extend(reqs)
    else:
        packages = [module for module, _ in FRAMEWORK_IMPORTS] + [*JAX_IMPORTS, "torch_npu", *RESOLVED_PACKAGES]
        renamed = [rule.from_ for rule in rules.rules if not rule.framework and rule.kind in ("method", "attribute")]
        torch_rules = [rule for rule in rules.rules if not rule.framework and rule.from_]
        literals = [rule.from_ for rule in torch_rules if rule.kind in ("device", "env")]
        literals += [spelled for rule in torch_rules if rule.kind == "backend"  # (matched in any case)
                     for spelled in (rule.from_.lower(), rule.from_.upper(), rule.from_.capitalize())]
        env = [rule.from_ for rule in torch_rules if rule.kind == "env"]
        found = StatementFilter(requirements, packages, renamed, literals, env)
    _FILTERS[key] = found
    return found
