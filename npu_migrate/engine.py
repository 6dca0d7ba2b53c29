"""The Python engine: `migrate_python(text, path, options, rules) -> FileResult`, a pure function.

No I/O and no global state besides the (read-only) rule set, so it can be tested directly,
cached by content hash and run in a process pool. `dispatch.migrate_source` sends plain `.py`
text here; other kinds of file (notebooks, shell scripts, requirements) have their own front
ends (frontends/), some of which reuse this.

`migrate_python`: prefilter (prefilter.py) -> Python's parser (safe_parse.py) -> libcst on the
statements that can need work (partial.py; the whole file when that cannot be done faithfully)
-> the passes of passes.py, in order -> positions, the migrated text, and the check that it
parses.
"""

from __future__ import annotations

import ast
import os
import re
import warnings
from bisect import bisect_right
from typing import TYPE_CHECKING, AbstractSet, Callable, Dict, FrozenSet, List, Optional, Sequence, Set, Tuple, Union

from .frameworks import FRAMEWORK_IMPORTS, TF2_FINDING, JAX_IMPORTS, STAR_IMPORTED_ALIASES, detect_frameworks, star_imported_frameworks
from .codes import check_emitter, emits
from .suppressions import parse_suppressions, unused_suppressions
from .model import FileResult, Finding, Span
from .options import Options
from .rules import RuleSet
from .passes import PASSES
from . import pieces, prefilter, work
from .logical_lines import Unreadable, logical_lines
from .prefilter import LazyCodeWords, tree_facts
from .words import words_of
from .project_values import reads_device_key
from .safe_parse import MAX_PARSE_CHARS, TooDeep, Verdict, python_verdict

if TYPE_CHECKING:
    import libcst as cst

    from .partial import PartialText

# libcst and what is built on it (context, imports, partial) are imported where a file is parsed:
# a run whose files the prefilter skips (a pre-commit hook on files without device code) never
# imports them (0.15 s; tests/test_startup.py holds it).

class CannotParse(Exception):
    """The input is not Python this tool can parse."""


def python_verdict_of(text: str) -> Verdict:
    """safe_parse.python_verdict, with input libcst must not see raised as CannotParse."""
    work.count("ast")
    try:
        return python_verdict(text)
    except TooDeep as exc:
        raise CannotParse(str(exc)) from None


def parse_module(text: str, verdict: Optional[Verdict] = None, cuts: Sequence[Tuple[int, str]] = ()) -> Tuple[cst.Module, bool]:
    """Parse with libcst, after Python's parser made sure libcst can take it (safe_parse;
    `verdict` when the caller has it already). `cuts`: parse it in those pieces (pieces.py).

    Also returns whether Python's own parser accepted the text, which the verify step needs
    (the output must parse whenever the input did) and so need not parse the input again."""
    import libcst as cst

    if verdict is None:
        verdict = python_verdict_of(text)
    work.count("parse")
    try:
        return pieces.parse(text, cuts), verdict.error is None
    except cst.ParserSyntaxError as exc:
        # Python's own message ("line 3:7: invalid syntax") is the one users know.
        raise CannotParse(verdict.error or f"line {exc.raw_line}:{exc.raw_column + 1}: {_first_line(exc.message)}") from None
    except RecursionError:
        raise CannotParse("too deeply nested") from None
    except Exception as exc:  # the native parser reports some failures as other errors
        raise CannotParse(verdict.error or _first_line(str(exc)) or type(exc).__name__) from None


def _first_difference(a: str, b: str) -> int:
    """The line (1-based, as Python counts lines) where two texts first differ."""
    n = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return len(re.findall(r"\r\n|\r|\n", a[:n])) + 1


def _first_line(message: str) -> str:
    return message.strip().splitlines()[0] if message.strip() else ""


def python_parses(text: str, step: str = "verify") -> bool:
    work.count(step)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(text)
        return True
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False


def migrate_python(text: str, path: str, options: Options, rules: RuleSet,
                   entry_script: Optional[bool] = None, partial: bool = False) -> FileResult:
    """Migrate Python source. `partial`: libcst may parse only the statements that can need
    work (partial.py); whenever that cannot be done faithfully the file is parsed whole, so the
    result is the same either way (but for what partial.py says of lines libcst would drop).
    `rules`: the rules as the targets of `options` see them (dispatch.py)."""
    result = FileResult(path=path)
    # ModelArts and --distributed look at every entry script, not only at files with CUDA code.
    wants_modelarts = (options.modelarts or options.distributed) and entry_script is not False
    words = None if wants_modelarts else words_of(text)  # (the passes look for words too: LazyCodeWords)
    reads_whole = bool(options.whole_readers) and bool(whole_reads(options, path))
    if not reads_whole and _needs_nothing(text, options, rules, words, wants_modelarts,
                                          imports=lambda: _text_imports(text),
                                          written=prefilter.quoted_outside_docstrings(text)
                                          if len(text) <= MAX_PARSE_CHARS else None):
        # (a method finding's `unless` met by an import the text tells; a string literal's word
        # only in docstrings, as the text tells: the tree's answers)
        return _nothing_needed(text, result)
    if len(text) > MAX_PARSE_CHARS:
        result.error = (
            f"too large to migrate ({len(text) / 1e6:.1f} million characters; the limit is "
            f"{MAX_PARSE_CHARS / 1e6:.0f} million)"
        )
        return result
    if (not reads_whole and words is not None and options.framework == "auto"
            and _needs_nothing_as_pytorch(text, options, rules, words)):
        # (a PyTorch file that imports another framework only in functions, as its text shows:
        # what Python's tree would tell below, without the parse; 37 of transformers' files)
        return _nothing_needed(text, result)
    try:
        verdict = python_verdict_of(text)
        code = (LazyCodeWords(verdict.tree, words, text, options.tensorflow2_project)
                if verdict.tree is not None else None)
        if code is not None and not reads_whole and _needs_nothing(text, options, rules, words, wants_modelarts,
                                                                   _used_frameworks(code, options.framework, rules),
                                                                   lambda: code.imports()[0],
                                                                   code.quoted_outside_bare_strings):
            # (a PyTorch file let through by TensorFlow's rules: it imports TensorFlow only in
            # a function, which its text cannot tell; 31 of transformers' files)
            return _nothing_needed(text, result)
        if verdict.tree is not None and code is not None and not reads_whole and not wants_modelarts:
            found = _tensorflow2_only(text, options, rules, words, verdict.tree, code)
            if found is not None:
                # (TF 2 code and nothing else: NPU356 at its first TensorFlow import, told from
                # Python's tree; no libcst parse: transformers' 71 modeling_tf_*.py files)
                result.findings, result.notes = found
                return result
        if (partial and not wants_modelarts and options.framework in ("auto", "torch") and code is not None
                and not reads_whole
                and not _framework_rules_apply(code, rules, tree_facts(code, options.mindspore_device_moves))):
            done = _migrate_partially(text, path, options, rules, entry_script, verdict.tree, code,
                                      _partial_framework(code, rules) if options.framework == "auto" else "")
            if done is not None:
                del verdict, code  # (Python's tree: gone before the verify parse)
                result, partial_text = done
                return _with_applied_frameworks(_verified(result, True, partial_text))
        # Python's tree is let go before libcst parses the file whole: the two side by side made
        # a worker's peak (transformers' modeling_tf_utils.py: 4-9 MB of the 47 its parse takes).
        # The words of the code, which the passes may still ask for, are made from it first.
        if code is not None:
            code.settle()
        cuts = pieces.cuts(text, verdict.tree) if verdict.tree is not None else []
        verdict = Verdict(verdict.error)
        module, input_parses = parse_module(text, verdict, cuts)
    except CannotParse as exc:
        result.error = f"cannot parse: {exc}{_read_as_python(path)}"
        return result
    try:
        done = _migrate_module(text, path, module, options, rules, result, entry_script, code=code)
    except RecursionError:
        result.error = "cannot migrate: too deeply nested"
        return result
    del module  # (libcst's tree: gone before the verify parse)
    return _with_applied_frameworks(_verified(done, input_parses))


def whole_reads(options: Options, path: str) -> Dict[str, Tuple[str, str]]:
    """The names through which the file at `path` reads a module another file binds and keeps
    whole (Options.whole_readers: `hvd` -> ("horovod.tensorflow", ".../config.py"))."""
    here = os.path.abspath(path)
    found: Dict[str, Tuple[str, str]] = {}
    for entry in options.whole_readers:
        reader, local, module, binding = entry.split("::", 3)
        if reader == here:
            found[local] = (module, binding)
    return found


def _needs_nothing(text: str, options: Options, rules: RuleSet, words, wants_modelarts: bool,
                   frameworks: Optional[FrozenSet[str]] = None,
                   imports: Optional[Callable[[], AbstractSet[str]]] = None,
                   written: Optional[Callable[[str], bool]] = None) -> bool:
    """Whether the file needs nothing, as the prefilter tells from its text (prefilter.py) and
    `frameworks`, those it uses (when known: _used_frameworks), `imports()`, the modules it
    imports anywhere (LazyCodeWords.imports: what the finding pass's _imports_any reads too),
    and `written(word)`, whether a string literal starting with a word may be written outside
    its docstrings (LazyCodeWords.quoted_outside_bare_strings).
    ModelArts and --distributed look at every entry script; a file that reads a device key of
    --device-config-keys needs work."""
    return (not wants_modelarts
            and not prefilter.may_need_work(rules, text, options.framework, words, frameworks, imports, written)
            and not (options.device_config_keys and reads_device_key(text, options.device_config_keys)))


@emits(TF2_FINDING)
def _tensorflow2_only(text: str, options: Options, rules: RuleSet, words, tree: "ast.Module",
                      code: LazyCodeWords) -> Optional[Tuple[List[Finding], List[str]]]:
    """The findings and notes of a TF 2 file where nothing but NPU356 can be reported, as
    _migrate_module gives them, told from Python's tree without libcst; None when that is not
    certain (then the file goes the usual way).

    So it is when the file uses TensorFlow alone (_detected_frameworks: what detect_frameworks
    tells from libcst's imports), is TF 2 code (LazyCodeWords.tensorflow2_reason: the pass then
    runs only codemods/tensorflow._tensorflow2), and no rule outside the frameworks' can match
    (the prefilter with no framework's rules: the torch pass does not run on it, the findings
    pass finds nothing); with no `npu-migrate:` comment (nothing suppressed, no unused
    suppression), no `\r` and no BOM (Python and libcst count lines and columns alike), and
    the first TensorFlow import's line ASCII up to its end (Python's columns are bytes,
    libcst's characters). NPU356 is at that import (_first_tensorflow_import's order: the
    statements and their blocks in order), spanning it as libcst's node does."""
    if (options.framework != "auto" or options.modelarts or options.distributed or rules.applied_kinds
            or "npu-migrate:" in text or "\r" in text or text.startswith("\ufeff")):
        return None
    rule = next((r for r in rules.framework_rules.get("tensorflow", ()) if r.code == TF2_FINDING), None)
    if rule is None or _detected_frameworks(code) != {"tensorflow"}:
        return None
    reason = code.tensorflow2_reason()
    if (reason is None
            or prefilter.own_rules_may_apply(rules, text, words, lambda: code.imports()[0],
                                             code.quoted_outside_bare_strings)
            or (options.device_config_keys and reads_device_key(text, options.device_config_keys))):
        return None
    node = _first_tensorflow_import(tree.body)
    if node is None or node.end_lineno is None or node.end_col_offset is None:
        return None
    lines = text.split("\n", node.end_lineno)
    first, last = lines[node.lineno - 1], lines[node.end_lineno - 1]
    if not (first[:node.col_offset].isascii() and last[:node.end_col_offset].isascii()):
        return None
    check_emitter(rule.code, rule.applier_key())
    api = "tensorflow 2"
    finding = Finding(code=rule.code, severity=rule.severity,
                      span=Span(node.lineno, node.col_offset + 1, node.end_lineno, node.end_col_offset + 1),
                      api=api, message=rule.render_message(api=api), suggestion=rule.render_suggestion(api=api))
    return [finding], [f"TensorFlow 1.15 rules not applied: {reason}"]


def _first_tensorflow_import(statements) -> Optional[Union[ast.Import, ast.ImportFrom]]:
    """codemods/tensorflow._first_tensorflow_import in Python's tree: the first `import
    tensorflow…`/`keras…` among `statements` and the statements of their blocks (bodies,
    handlers, else and finally clauses; not a match statement's cases), in that order."""
    for statement in statements:
        kind = type(statement)
        if kind is ast.Import:
            if any(alias.name.split(".", 1)[0] in ("tensorflow", "keras") for alias in statement.names):
                return statement
        elif kind is ast.ImportFrom:
            if not statement.level and (statement.module or "").split(".", 1)[0] in ("tensorflow", "keras"):
                return statement
        else:
            for name in ("body", "handlers", "orelse", "finalbody"):
                block = getattr(statement, name, None)
                if type(block) is list:
                    found = _first_tensorflow_import(block)
                    if found is not None:
                        return found
    return None


def _needs_nothing_as_pytorch(text: str, options: Options, rules: RuleSet, words) -> bool:
    """Whether a file the prefilter let through needs nothing once its frameworks are known, as
    the check after Python's parse finds (_used_frameworks), told from its text: a file that
    imports torch, where no rule of PyTorch's can match, and that imports no other framework
    outside a function or class (_outside_definitions_frameworks). The frameworks told so are
    the tree's or more (an import anywhere in such a line counts), so the answer is the tree's,
    or "parse it"."""
    if rules.applied_kinds or b"torch" not in words or b"import" not in words:
        return False
    if not _needs_nothing(text, options, rules, words, False, frozenset({"torch"})):
        return False  # (PyTorch's own rules can match: Python's tree is wanted anyway)
    found = _outside_definitions_frameworks(text)
    return found is not None and _needs_nothing(text, options, rules, words, False, found)


_DEFINITION_RE = re.compile(r"(?:async[ ]+)?(?:def|class)\b")
# What the scan needs, as a quick look tells: a line that starts with an import of torch, and
# none that starts unindented with an import of another framework (at module level, or in a string).
_TORCH_LINE_RE = re.compile(r"[ ]*(?:import|from)[ ]+torch(?!\w)")
_TORCH_LINES_RE = re.compile(r"\n" + _TORCH_LINE_RE.pattern)
# The other frameworks, by the first part of the modules that make a file theirs
# (frameworks.FRAMEWORK_IMPORTS).
_OTHER_FRAMEWORKS = {root.split(".")[0].encode(): name for root, name in FRAMEWORK_IMPORTS if name != "torch"}
_OTHER_IMPORT_LINE_RE = re.compile(
    r"(?:import|from)[ ]+(?:%s)(?!\w)" % "|".join(sorted(root.decode() for root in _OTHER_FRAMEWORKS)))
_OTHER_IMPORT_LINES_RE = re.compile(r"\n" + _OTHER_IMPORT_LINE_RE.pattern)
# A logical line that is an import of JAX (frameworks.JAX_IMPORTS): `import jax...`, `from flax... import`.
_JAX_IMPORT_LINE_RE = re.compile(r"(?:import|from)[ ]+(?:%s)(?!\w)" % "|".join(JAX_IMPORTS))


def _outside_definitions_frameworks(text: str) -> Optional[FrozenSet[str]]:
    """The frameworks _detected_frameworks finds in a text that imports torch (the other
    frameworks imported outside function and class bodies), or more: every logical line
    outside those bodies that holds `import` counts with the frameworks whose first module part
    it holds (in a string or a comment too), but TensorFlow where one of those lines is an
    import of JAX (`import jax.numpy as jnp`: JAX imported outside them, which drops TensorFlow
    there too). None when no logical line starts with an import of torch, or the text cannot be
    read so (logical_lines.Unreadable), a tab, form feed or `\\r`, a line that starts unindented
    with an import of another framework.

    Where each logical line starts is found as Python's tokenizer finds it
    (logical_lines.logical_lines); the statement that holds a logical line is the nearest one
    before it indented less, and a line is in a definition when it or one of those holding it
    starts with `def`, `async def` or `class`."""
    if "\r" in text or "\t" in text or "\f" in text:
        return None
    if not (_TORCH_LINE_RE.match(text) or _TORCH_LINES_RE.search(text)):
        return None  # (no line starts with an import of torch)
    if _OTHER_IMPORT_LINE_RE.match(text) or _OTHER_IMPORT_LINES_RE.search(text):
        return None  # (one starts unindented with another framework's: imported at module level)
    torch = jax = False
    starts: List[int] = []  # where each logical line starts
    ends: List[int] = []  # ... and ends
    stack: List[Tuple[int, bool]] = []  # (indentation, in a definition) of the lines holding the next one
    outside: List[int] = []  # where the logical lines outside definitions start
    try:
        for start, end, _, _ in logical_lines(text):
            starts.append(start)
            ends.append(end)
            line = text[start:end]
            code = line.lstrip(" ")
            if not code or code[0] in "#\n":
                continue  # (blank, or a comment alone)
            indent = len(line) - len(code)
            while stack and stack[-1][0] >= indent:
                stack.pop()
            inside = bool(stack and stack[-1][1]) or _DEFINITION_RE.match(code) is not None
            stack.append((indent, inside))
            if not inside:
                outside.append(start)
                if not jax and _JAX_IMPORT_LINE_RE.match(code):
                    jax = True
            if not torch and _TORCH_LINE_RE.match(code):
                torch = True
    except Unreadable:
        return None
    if not torch:
        return None
    found = {"torch"}
    at = text.find("import")
    while at >= 0:
        i = bisect_right(starts, at) - 1
        start, end = starts[i], ends[i]
        if outside and outside[max(0, bisect_right(outside, start) - 1)] == start:
            line_words = words_of(text[start:end])
            found.update(name for root, name in _OTHER_FRAMEWORKS.items() if root in line_words)
        at = text.find("import", end)
    if jax:  # (as _detected_frameworks: a JAX module's tf.data input pipeline; transformers'
        found.discard("tensorflow")  # tokenizers and image transforms import all three under an `if`)
    return frozenset(found)


# An import statement of an absolute module that starts a line unindented: `import a.b [as c]...`,
# `from a.b import ...` (what Python's tree lists as `a.b`: prefilter._imported_modules).
_IMPORT_LINE_RE = re.compile(
    r"^(?:import[ ]+([A-Za-z_][\w.]*)(?=[ ]*(?:[,;#\n]|as[ ]|\Z))|from[ ]+([A-Za-z_][\w.]*)[ ]+import(?!\w))", re.M)


def _text_imports(text: str) -> FrozenSet[str]:
    """Some of the modules the file imports anywhere (LazyCodeWords.imports()[0]), told from its
    text: those of the import statements that start a logical line unindented (`from
    linear_operator import to_dense`), as Python's tokenizer finds where logical lines start
    (logical_lines.logical_lines, read up to the last such line, or to where the text cannot be
    read so). A subset of the tree's: a method finding's `unless` (prefilter.Prefilter.may_need_work)
    then leaves out no requirement the tree would keep, and a file whose every requirement met is
    left out so needs no Python parse (16 of gpytorch 1.15.2's modules: `.to_dense()` of
    linear_operator). Empty where the text cannot be read so (a `\r`)."""
    candidates = list(_IMPORT_LINE_RE.finditer(text))
    if not candidates or "\r" in text:
        return frozenset()
    found: Set[str] = set()
    pending = iter(candidates)
    candidate: Optional["re.Match[str]"] = next(pending)
    try:
        for start, _, _, _ in logical_lines(text):
            while candidate is not None and candidate.start() < start:  # (in a string, a bracket, a comment)
                candidate = next(pending, None)
            if candidate is None:
                break
            if candidate.start() == start:
                found.add(candidate.group(1) or candidate.group(2))
                candidate = next(pending, None)
    except Unreadable as stop:  # (the line where the scan stopped starts as told)
        while candidate is not None and candidate.start() < stop.line:
            candidate = next(pending, None)
        if candidate is not None and candidate.start() == stop.line:
            found.add(candidate.group(1) or candidate.group(2))
    return frozenset(found)


def _nothing_needed(text: str, result: FileResult) -> FileResult:
    """The result of a file that needs nothing: nothing to report, so any `# npu-migrate: ignore`
    here silences nothing."""
    result.unused_ignores = unused_suppressions(text, parse_suppressions(text), set())
    return result


def _verified(result: FileResult, input_parses: bool, partial_text: Optional[str] = None) -> FileResult:
    """`result`, its migrated text checked before anything can be written: the output must
    parse whenever the input did. Checked here, once the file's trees are gone (the verify
    parse of a 270 KB file takes 10 MB; beside them it made a worker's peak).

    `partial_text`: the migrated partial text whose placeholders were put back to make the
    migrated text (PartialText.restore), of an input that parses. When it parses, so does the
    migrated text, which Python need not parse whole: each placeholder is one string statement
    standing, at the indentation of its first line (restore checks each came back unchanged),
    for whole statements of one block that parsed in that block of the input; put back, they
    are tokenized as in the input (a statement starts no bracket or string that outlives it),
    and Python's grammar takes any statements where a statement stands (`ast.parse` reads
    no future import that would change it). When the partial text does not parse, the whole
    one decides."""
    if result.new_text is None or not input_parses:
        return result
    if partial_text is not None and python_parses(partial_text, "verify_partial"):
        return result
    if not python_parses(result.new_text):
        result.new_text = None
        result.edits = []
        result.error = "internal error: the migrated code does not parse; file left unchanged"
    return result


def _read_as_python(path: str) -> str:
    """A file named on the command line that no front end takes (a README.md, notes.txt) is read
    as Python; say so after its parse error, which alone reads like a bug of the tool."""
    suffix = os.path.splitext(os.path.basename(path))[1]
    if suffix in ("", ".py", ".pyi", ".pyw"):
        return ""
    return f" (a {suffix} file named on the command line is read as Python; --known-files-only skips it)"


def _with_applied_frameworks(result: FileResult) -> FileResult:
    """A file's frameworks say whose targets applied to it: none where nothing was rewritten or
    reported (as for a file the prefilter skips, so the result is the same with it on or off)."""
    if not (result.edits or result.findings or result.extra_files):
        result.frameworks = []
    return result


def _detected_frameworks(code: LazyCodeWords) -> Set[str]:
    """What frameworks.detect_frameworks tells from the import table, here from Python's tree
    (the import statements: LazyCodeWords.imports)."""
    def imports(root: str, modules) -> bool:
        return any(m == root or m.startswith(root + ".") for m in modules)

    import_modules, top_level_modules = code.imports()
    found = {name for root, name in FRAMEWORK_IMPORTS if imports(root, import_modules)}
    if "tensorflow" in found and any(imports(root, top_level_modules) for root in JAX_IMPORTS):
        found.discard("tensorflow")  # as detect_frameworks: a JAX module's tf.data input pipeline
    if "torch" in found:  # as detect_frameworks: another framework imported in a function only
        found = {name for name in found
                 if name == "torch" or any(imports(root, top_level_modules)
                                           for root, n in FRAMEWORK_IMPORTS if n == name)}
    return found


def _frameworks_of(code: LazyCodeWords) -> Set[str]:
    """The frameworks a file uses, as _migrate_module tells them from the parsed imports, here
    from Python's tree; TF 2 code does not count as TensorFlow (no TF 1.15 rule applies)."""
    return {name for name in _detected_frameworks(code) if not (name == "tensorflow" and code.tensorflow2_reason())}


def _used_frameworks(code: LazyCodeWords, framework: str, rules: RuleSet) -> Optional[FrozenSet[str]]:
    """The frameworks whose passes _migrate_module runs on the file (ctx.frameworks), or more:
    --framework's; else those detect_frameworks finds, and where it finds none, those a star
    import may bring (frameworks.star_imported_frameworks: `tf.` after `from x import *`).
    None (not known) when a rule kind of the rule set brings its own applier (Kind.apply: the
    `kinds` pass runs it whatever the frameworks)."""
    if rules.applied_kinds:
        return None
    if framework != "auto":
        return frozenset({framework})
    found = _detected_frameworks(code)
    return frozenset(found or {name for _alias, _module, name in STAR_IMPORTED_ALIASES})


# The frameworks whose findings each hold in the statement they point at, so a file of one of
# them where only findings can match is parsed partially (_partial_framework): TensorFlow's
# (Huawei's support list, `tf.float64`, computed GPU names) and MindSpore's (GPU-only operators
# and ops.Custom: calls resolved through the imports, which a partial text keeps; set_context
# keys its target deprecates).
_FINDINGS_HOLD_IN_STATEMENTS = ("tensorflow", "mindspore")


def _framework_rules_apply(code: LazyCodeWords, rules, tree: Optional[Callable[[str], bool]] = None) -> bool:
    """Whether a TensorFlow/MindSpore pass will want the whole module (as _migrate_module decides
    from the parsed imports, here from Python's tree): then a partial parse would be thrown
    away. Only saves work: a partial parse that needs the whole module asks for it anyway.
    The words of the whole code are collected only for a file of such a framework.

    TensorFlow's and MindSpore's rewrites follow bindings from statement to statement (a config
    built above the session that takes it; a device target's option, its comparisons and the
    branches they select); their findings each hold in the statement they point at, so a file
    where only the findings of one of them can match is parsed partially (_partial_framework).
    A file where the findings of both can match is parsed whole (a partial text keeps the
    statements of one framework's findings)."""
    frameworks = [name for name in _frameworks_of(code) if name != "torch"]
    written = code.written_outside_bare_strings
    if any(prefilter.framework_rules_may_apply(rules, code.get(), name,
                                               rewrites_only=name in _FINDINGS_HOLD_IN_STATEMENTS, written=written,
                                               tree=tree)
           for name in frameworks):
        return True
    return sum(prefilter.framework_rules_may_apply(rules, code.get(), name, written=written) for name in frameworks) > 1


def _partial_framework(code: LazyCodeWords, rules) -> str:
    """The framework ("tensorflow" for a TF 1.x file, "mindspore") whose findings can match in
    the file (its partial text keeps the statements where they can: partial.statement_filter),
    else ""."""
    for name in _FINDINGS_HOLD_IN_STATEMENTS:
        if name in _frameworks_of(code) and prefilter.framework_rules_may_apply(
                rules, code.get(), name, written=code.written_outside_bare_strings):
            return name
    return ""


# A device test kept in a variable, `use_cuda = torch.cuda.is_available() and not args.cpu`: the
# guards read every use of it (in its function, or in the module: guards._Chains._variable), and
# a partial text that left the readers out was made again with them (fairseq 0.12.2's
# generate.py, validate.py, ...: 6 of its 11 second attempts). Not a value chosen by the test
# (`device = "cuda" if torch.cuda.is_available() else "cpu"`): its uses are asked for only where
# a rule reads them, and `device` is written everywhere (pytorch-ignite 0.5.5: 7,894 -> 12,322
# lines parsed with them, one attempt more). Only the lines holding the test are read (one
# regex over the whole text took 1.7 ms on bench/train_500.py).
_ASSIGNED_NAME_RE = re.compile(r"[ \t]*([A-Za-z_]\w*)[ \t]*=")
_DEVICE_TEST_RE = re.compile(r"\bcuda\.is_available\(\)")
_IF_RE = re.compile(r"\bif\b")


def _device_test_variables(text: str) -> Set[str]:
    """The names assigned a CUDA device test alone on one line (no `if`, no comment): the
    statements that hold them are in the first partial text (partial_text's `also`)."""
    names: Set[str] = set()
    at = text.find("cuda.is_available()")
    while at != -1:
        start = text.rfind("\n", 0, at) + 1
        end = text.find("\n", at)
        end = len(text) if end == -1 else end
        line = text[start:end]
        assigned = _ASSIGNED_NAME_RE.match(line)
        if assigned is not None and "#" not in line and _DEVICE_TEST_RE.search(line, assigned.end()) \
                and not _IF_RE.search(line, assigned.end()):
            names.add(assigned.group(1))
        at = text.find("cuda.is_available()", end)
    return names


def _migrate_partially(text, path, options, rules, entry_script, tree, code,
                       framework: str = "") -> Optional[Tuple[FileResult, Optional[str]]]:
    """The result of migrating the partial text of `text` and the migrated partial text (what
    _verified parses), or None: parse the file whole.
    `framework`: whose findings the partial text keeps statements for too (_partial_framework)."""
    from .partial import NeedsWholeModule, partial_text, statement_filter

    statements = statement_filter(rules, framework)
    if statements is None:
        return None
    ranges: Set[Tuple[int, int]] = set()
    if framework == "tensorflow":
        from .codemods.npu_ops import gelu_lines

        gelu = gelu_lines(code)  # (a hand-written gelu is read whole: its lines are kept)
        if gelu is None or (gelu and options.npu_ops):  # (--npu-ops rewrites it: the whole module)
            return None
        ranges |= gelu
    also: Set[str] = _device_test_variables(text) | statements.literal_readers(text, code.text_words if code else None)
    for attempt in range(3):
        partial = partial_text(text, tree, statements, also, ranges)
        if partial is not None and not attempt:
            from .codemods.findings import asked_names

            # (what the call findings would ask of the lines left out: kept now, not a second attempt)
            asked = {name for name in asked_names(partial, tree, rules) if name not in also and partial.elided_word(name)}
            if asked:
                also |= asked
                partial = partial_text(text, tree, statements, also, ranges)
        if partial is None:
            if attempt:
                work.count("fallback")  # (what is to be kept is the whole file)
            return None
        try:
            work.count("partial")
            module = pieces.parse(partial.text, pieces.cuts(partial.text, tree, partial.runs))
            result = _migrate_module(text, path, module, options, rules, FileResult(path=path), entry_script,
                                     partial=partial, code=code, partial_framework=framework)
            return result, partial.migrated
        except NeedsWholeModule as exc:
            work.count("retry")
            if not (exc.words or exc.lines) or (exc.words <= also and exc.lines <= ranges):
                work.count("fallback")
                return None
            also |= exc.words  # parse the statements that use these names too
            ranges |= exc.lines  # and these lines
        except Exception:  # libcst refused the partial text (the whole file will say why), RecursionError
            work.count("fallback")
            return None
    work.count("fallback")
    return None


def _migrate_module(text, path, module, options, rules, result, entry_script,
                    partial: Optional[PartialText] = None, code: Optional[LazyCodeWords] = None,
                    partial_framework: str = ""):
    """`module` is the parsed `text`, or with `partial` the parsed partial text: then
    NeedsWholeModule is raised wherever a whole parse could give another result. The migrated
    text it sets is not verified yet (the caller does: _verified). `partial_framework`: the
    framework whose findings the partial text was made for (its rewrites still need the whole
    module)."""
    from .context import Context
    from .imports import ImportTable
    from .partial import NeedsWholeModule

    imports = ImportTable.of(module)
    ctx = Context(
        path=path,
        text=text,
        options=options,
        rules=rules,
        module=module,
        imports=imports,
        suppressions=parse_suppressions(text),
        entry_script=entry_script,
        partial=partial,
        code=code,
    )
    frameworks = [options.framework] if options.framework != "auto" else detect_frameworks(imports)
    implied = star_imported_frameworks(text, imports, frameworks)
    frameworks = frameworks + [f for f in implied if f not in frameworks]
    reads = whole_reads(options, path) if options.whole_readers and options.framework in ("auto", "tensorflow") else {}
    if reads:
        # Horovod's TF bindings read through another module's name (deepxde's `from ...config
        # import hvd`): the name is that module's, and the file is TensorFlow code.
        for local, (bound, _binding) in reads.items():
            if "." in local:
                imports.aliases[local] = bound
            else:
                imports.names.setdefault(local, bound)
        ctx.whole_reads = reads
        frameworks = frameworks + ["tensorflow"] if "tensorflow" not in frameworks else frameworks
    ctx.frameworks = frameworks
    if "tensorflow" in frameworks and code is not None:
        # TF 2 code gets no TF 1.15 rule (frameworks.tensorflow2_reason), only NPU356.
        ctx.tensorflow2 = code.tensorflow2_reason()
        if ctx.tensorflow2 is not None:
            result.notes = [f"TensorFlow 1.15 rules not applied: {ctx.tensorflow2}"]
    # whose targets applied (the summary names them); no CANN target for TF 2 code
    result.frameworks = [f for f in frameworks if not (f == "tensorflow" and ctx.tensorflow2)]
    if partial is not None and any(f != "torch" and ctx.framework_rules_may_apply(f, rewrites_only=f == partial_framework)
                                   for f in frameworks if not (f == "tensorflow" and ctx.tensorflow2)):
        raise NeedsWholeModule("framework")  # TensorFlow/MindSpore rewrites follow bindings

    new_module = module
    failed = []
    for step in PASSES:
        if step.wanted(ctx):
            mark = ctx.mark()
            try:
                new_module = step.run(new_module, ctx)
            except (NeedsWholeModule, RecursionError):
                raise
            except Exception as exc:  # a bug in one pass: the others' findings are still reported
                ctx.rollback(mark)
                failed.append(f"{step.name} pass: {type(exc).__name__}: {exc}")
    if ctx.partial_misses or ctx.partial_lines:
        raise NeedsWholeModule("statements left out", ctx.partial_misses, ctx.partial_lines)

    if ctx.has_records:
        result.edits, result.findings = ctx.finish()
    result.unused_ignores = unused_suppressions(text, ctx.suppressions, ctx.used_suppression_codes)
    if failed:
        # Never half-migrated: nothing is written (no edit, no generated file), and the error
        # says so, next to the findings of the passes that ran.
        result.edits = []
        result.error = f"internal error in the {'; '.join(failed)}; file left unchanged"
        return result
    result.extra_files = dict(ctx.extra_files)
    if new_module is module or not result.edits:
        return result
    new_text = ctx.code_of(new_module)
    if new_text == text:
        return result
    # libcst reproduces nearly every file exactly; where it does not, its output would change
    # more than the edits (libcst 1.9 drops the last of lone-`\r` line endings, a form feed
    # before a statement, comment lines indented unevenly after the last statement).
    reproduced = ctx.code_of(module)  # the positions pass generated it already
    if partial is not None:
        restored = partial.restore(new_text) if reproduced == partial.text else None
        if restored is None:
            raise NeedsWholeModule("markers")
        partial.migrated = new_text  # (what _verified parses)
        new_text = restored  # (the whole parse reports what libcst changes)
        if new_text == text:
            return result
    elif reproduced != text:
        result.edits = []
        why = " (lone `\\r` line endings)" if re.search(r"\r(?!\n)", text) else ""
        result.error = (f"cannot migrate faithfully: libcst would change line {_first_difference(text, reproduced)} "
                        f"besides the edits{why}; file left unchanged")
        return result
    result.new_text = new_text  # (verified by the caller: _verified)
    return result
