"""Findings that no rewrite depends on: imports of CUDA-only libraries, calls of APIs (with
particular arguments), and method calls.

Runs after the framework passes, for every framework, and visits `ctx.module` -- the ORIGINAL
tree -- so positions are the file's own. The rules are `[[finding]]` entries of kind `import`,
`call`, `call-kwarg` and `method` (see kinds/finding.py); kind `api` is reported by the torch pass,
which knows which `torch.cuda` names it rewrites, and kind `file` by the front end for the
file's suffix (frontends/cuda_sources.py).
"""

from __future__ import annotations

import ast
import functools
import re
from typing import TYPE_CHECKING, AbstractSet, Any, Callable, Dict, FrozenSet, Iterator, List, Optional, Set, Tuple, Union

import libcst as cst

from ..context import Context
from ..imports import dotted_name
from ..kinds.finding import FindingSpec, names_of
from .strings import string_value
from .syntax import option_names
from ..kinds.finding import call_words
from ..local_modules import absolute_imports, is_local_import, submodule_pairs
from ..model import Severity
from ..fast_visitor import children, walk
from ..rules import Rule
from ..codes import applies
from ..words import words_of

if TYPE_CHECKING:
    from ..partial import PartialText
    from ..rules import RuleSet

# Exceptions whose handler makes an import optional: `try: import cupy except ImportError: …`.
_IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}
_WORD_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
OPTIONAL_IMPORT_NOTE = (
    " (optional: imported in `try: … except ImportError` or where a check says it is installed, so"
    " the code has a fallback; check that the fallback is what runs on the NPU)"
)
# A call asking whether a library is installed: `is_bnb_available()`, `_is_package_available("x")`,
# `importlib.util.find_spec("x")`, `is_apex_installed()`. An import it guards is optional.
_AVAILABILITY_RE = re.compile(r"(?:^|_)(?:available|installed)$|^find_spec$|^find_loader$", re.IGNORECASE)
_AVAILABILITY_WORDS = ("try", "available", "installed", "find_spec", "find_loader")

def report_findings(module: cst.Module, ctx: Context) -> cst.Module:
    """Record the findings; the tree itself is returned unchanged.

    Imports come from the import table (no traversal); the tree is only walked for calls when
    the file contains every word of some call/method rule, which most files do not."""
    finder = FindingVisitor(ctx)
    if ctx.rules.finding_import:
        finder.report_imports()
    if call_words(ctx.rules):
        made = getattr(ctx.code, "text_words", None)  # the prefilter's words_of(text), when kept
        if made is None:
            words: AbstractSet[Any] = set(_WORD_RE.findall(ctx.text))
            needed: List[FrozenSet[Any]] = call_words(ctx.rules)
        else:
            words, needed = _identifier_words(made), call_words(ctx.rules, encoded=True)
        if any(n <= words for n in needed):
            walk(ctx.module, finder)  # = ctx.module.visit(finder), without copying the tree
    return module


def asked_names(partial: "PartialText", tree: ast.Module, rules: "RuleSet") -> Set[str]:
    """The names this pass would ask partial parsing for (Context.partial_misses: NeedsWholeModule's
    words, a second attempt), told from Python's tree of the statements `partial` keeps: a
    variable or an option given to an argument of a `suffixes` rule (_held:
    `Trainer(accelerator=device)` asks `device`, `accelerator=args.accelerator` asks
    `accelerator`) and a dict given as `**name` to a rule with keywords (_mapping:
    `Trainer(**trainer_kwargs)` asks `trainer_kwargs`). engine._migrate_partially keeps the
    statements holding those the first text leaves out in it: the attempt that would ask for
    them is saved (pytorch-forecasting 1.8.0's test_metrics.py and
    test_temporal_fusion_transformer.py, flair 0.15.1's transformer.py). A call is matched by
    its name as the module's imports resolve it (any import of the name: more than the import
    table's one binding), a method rule by its name alone; a name asked that the pass would not
    ask only makes the first text larger (a superset of what it parses, with the same result),
    and one it asks that is not here is asked as before. Mirrors _held, _mapping and
    _selected_arguments: a change there must be made here too."""
    calls, methods, pattern = _askers(rules)
    if pattern is None or not pattern.search(partial.text):
        return set()
    from ..partial import _imports

    bound: Dict[str, Set[str]] = {}
    for local, qualified in _imports(tree.body):
        bound.setdefault(local, set()).add(qualified)
    star = "*" in bound
    elided = {id(stmt) for stmts in partial.left_out.values() for stmt in stmts}
    asked: Set[str] = set()
    todo: List[ast.AST] = [stmt for stmt in tree.body if id(stmt) not in elided]
    while todo:
        node = todo.pop()
        for child in ast.iter_child_nodes(node):
            if not (isinstance(child, ast.stmt) and id(child) in elided):
                todo.append(child)
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        leaf = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        if leaf is None:
            continue
        specs: List[FindingSpec] = list(methods.get(leaf, ())) if isinstance(func, ast.Attribute) else []
        named = calls.get(leaf)
        if named:
            dotted = _ast_dotted(func)
            if dotted is not None:
                first, _, rest = dotted.partition(".")
                quals = {q + ("." + rest if rest else "") for q in bound.get(first, ())}
                specs += [spec for qual, spec in named if star or qual in quals]
        for spec in specs:
            positional: List[ast.expr] = []
            for arg in node.args:
                if isinstance(arg, ast.Starred):
                    break  # positions after a *args are unknown
                positional.append(arg)
            values = [positional[i] for i in spec.positions if i < len(positional)]
            for keyword in node.keywords:
                if keyword.arg is None:
                    if isinstance(keyword.value, ast.Name) and spec.keywords:
                        asked.add(keyword.value.id)  # (_mapping)
                elif keyword.arg in spec.keywords:
                    values.append(keyword.value)
            if spec.suffixes:  # (_held)
                asked.update(v.id if isinstance(v, ast.Name) else v.attr for v in values
                             if isinstance(v, (ast.Name, ast.Attribute)))
    return asked


def _ast_dotted(node: ast.expr) -> Optional[str]:
    parts: List[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


# rule-set fingerprint -> (call leaf -> [(qualified name, spec)], method name -> [spec], a
# pattern of `leaf(` for both): the call and method rules whose arguments the pass asks about
_ASKERS: Dict[str, Tuple[Dict[str, List[Tuple[str, FindingSpec]]], Dict[str, List[FindingSpec]],
                         Optional["re.Pattern[str]"]]] = {}


def _askers(rules: "RuleSet") -> Tuple[Dict[str, List[Tuple[str, FindingSpec]]], Dict[str, List[FindingSpec]],
                                       Optional["re.Pattern[str]"]]:
    found = _ASKERS.get(rules.fingerprint)
    if found is None:
        calls: Dict[str, List[Tuple[str, FindingSpec]]] = {}
        for qual, named in rules.finding_call.items():
            for rule in named:
                spec = FindingSpec.of(rule)
                if spec.keywords or (spec.suffixes and spec.positions):
                    calls.setdefault(qual.rsplit(".", 1)[-1], []).append((qual, spec))
        methods: Dict[str, List[FindingSpec]] = {}
        for name, named in rules.finding_method.items():
            for rule in named:
                spec = FindingSpec.of(rule)
                if spec.keywords:  # (method calls hold nothing back: only _mapping asks)
                    methods.setdefault(name, []).append(spec)
        leaves = sorted(set(calls) | set(methods))
        pattern = re.compile(r"\b(?:%s)\s*\(" % "|".join(map(re.escape, leaves))) if leaves else None
        found = _ASKERS[rules.fingerprint] = (calls, methods, pattern)
    return found


def _identifier_words(made: AbstractSet[bytes]) -> FrozenSet[bytes]:
    """What _WORD_RE finds in a text (as bytes, and more), from its words.words_of: the same
    runs of ASCII letters, digits and `_`, each also less its leading digits (`2cuda` holds
    `cuda`); a search of the text cost ten times more."""
    return frozenset(made).union([w.lstrip(_DIGITS) for w in made if w[:1] in _DIGIT_BYTES])


_DIGITS = b"0123456789"
_DIGIT_BYTES = frozenset(bytes([d]) for d in _DIGITS)


def uses_device(ctx: Context) -> bool:
    """Whether the file itself puts work on the accelerator: the torch pass migrated something
    to the NPU (or found NPU code already), or the file imports torch_npu."""
    return ctx.import_required("torch_npu") or ctx.moved_device_code or ctx.imports.imports_module("torch_npu")


@applies("finding:import", "finding:method", "finding:call", "finding:call-kwarg", "finding:string")
class FindingVisitor(cst.CSTVisitor):
    """Calls and method calls, found by walking the tree; imports, from the import table."""

    def __init__(self, ctx: Context) -> None:
        super().__init__()
        self.ctx = ctx
        self.rules = ctx.rules
        self._mappings: Optional[Dict[str, Optional[List[Tuple[str, cst.BaseExpression]]]]] = None
        self._commands: Optional[Dict[str, Optional[List[cst.BaseExpression]]]] = None
        self._options: Dict[str, Optional[cst.BaseExpression]] = {}  # argparse option -> its default
        # What this walk has seen assigned (and declared as argparse options) so far, for the
        # calls of `suffixes` rules given a variable or an option, decided when the walk ends
        # (_held, leave_Module): no walk of their own.
        self._seen = _MappingAssignments()
        self._held_back: List[Tuple[Rule, cst.Call, str]] = []
        # (the commands of each call rule with `commands`, and the last words of its calls)
        self._command_calls: List[Tuple[Tuple[str, ...], FrozenSet[bytes]]] = []
        if ctx.partial is not None:
            for rule in {id(r): r for rs in self.rules.finding_call.values() for r in rs}.values():
                commands = FindingSpec.of(rule).commands
                if commands and any(c in ctx.text for c in commands):
                    self._command_calls.append((commands, frozenset(n.rsplit(".", 1)[-1].encode() for n in names_of(rule))))
        self._all_imports: Optional[FrozenSet[str]] = None  # (_imports_any)
        self._in_context = {
            "any": True,
            "torch": "torch" in ctx.frameworks or ctx.imports.imports_module("torch"),
            "device": uses_device(ctx),
        }

    def applies(self, rule: Rule) -> bool:
        return self._in_context.get(FindingSpec.of(rule).context, False)

    # -- imports ---------------------------------------------------------------------------

    def report_imports(self) -> None:
        found: List[Tuple[Rule, str, cst.CSTNode, Union[cst.Import, cst.ImportFrom]]] = []  # (rule, module, node, statement)
        for stmt in self.ctx.imports.import_nodes:
            if isinstance(stmt, cst.Import):
                for alias in stmt.names:
                    module = dotted_name(alias.name)
                    rule = self.rules.import_finding(module) if module else None
                    if rule is not None and module:
                        found.append((rule, module, alias, stmt))
            elif not stmt.relative and stmt.module is not None:
                module = dotted_name(stmt.module)
                rule = self.rules.import_finding(module) if module else None
                if rule is not None and module:
                    found.append((rule, module, stmt, stmt))
                elif module and not isinstance(stmt.names, cst.ImportStar):
                    for alias in stmt.names:  # `from numba import cuda`: the submodule is flagged
                        name = dotted_name(alias.name)
                        sub = f"{module}.{name}"
                        rule = self.rules.import_finding(sub) if name else None
                        if rule is not None:
                            found.append((rule, sub, alias, stmt))
        found = [f for f in found if self.applies(f[0]) and not self._imports_local_module(f[1])]
        optional: Set[int] = set()
        if found and any(w in self.ctx.text for w in _AVAILABILITY_WORDS):
            visitor = _OptionalImports(self.ctx.partial)
            walk(self.ctx.module, visitor)
            optional = visitor.found
            partial = self.ctx.partial
            if partial is not None:
                # `if not is_bnb_available(): raise ...` before the import (in its block or one
                # around it), in lines left out: the engine parses them too.
                for _rule, _module, _node, stmt in found:
                    for block, index in visitor.enclosing.get(id(stmt), ()):
                        self.ctx.partial_lines.update(
                            run for run in partial.runs_among(block.body[:index])
                            if any(_may_leave_unless_available(s) for s in partial.statements_of(run)))
        for rule, module, node, stmt in found:
            # Reported under the library's name as the rule gives it (`nvidia.dali` for
            # `import nvidia.dali.types`), so that a file's imports of one library read as one.
            module = _library_of(rule, module)
            if id(stmt) in optional:
                self.ctx.finding(rule, node, api=module, severity=Severity.INFO,
                                 message=rule.render_message(api=module) + OPTIONAL_IMPORT_NOTE)
            else:
                self.ctx.finding(rule, node, api=module)

    def _mapping(self, name: str) -> Optional[List[Tuple[str, cst.BaseExpression]]]:
        """The (key, value) entries of `name` when every assignment of it in the file is a dict
        display or a `dict(...)` call (`params = {"gpus": 2}`, `kw = dict(accelerator="gpu")`):
        what `Trainer(**params)` passes. None when unknown."""
        if self._mappings is None:
            collector = _MappingAssignments()
            walk(self.ctx.module, collector)
            self._mappings, self._commands = collector.entries, collector.commands
            self._options = collector.options
        entries = self._mappings.get(name)
        if entries is None and self.ctx.partial is not None and self.ctx.partial.elided_word(name):
            self.ctx.partial_misses.add(name)  # assigned in lines partial parsing left out
        return entries

    def _command_values(self, name: str, commands: Tuple[str, ...]) -> Optional[List[cst.BaseExpression]]:
        """The values assigned to `name` when every assignment of it in the file is a command
        (a string, a list display, `'a' if c else 'b'`): what `subprocess.run(cmd, shell=True)`
        runs. None when unknown. With partial parsing, the lines left out that assign it a
        text naming one of `commands` are asked for (others cannot make it run one)."""
        if self._commands is None:
            collector = _MappingAssignments()
            walk(self.ctx.module, collector)
            self._mappings, self._commands = collector.entries, collector.commands
            self._options = collector.options
        partial = self.ctx.partial
        if partial is not None and partial.elided_word(name):
            self.ctx.partial_lines.update(
                run for run in ((start, end) for start, end, _indent in partial.runs)
                if any(c in partial.text_of(run) for c in commands) and name.encode() in words_of(partial.text_of(run)))
        return self._commands.get(name)

    def _held(self, node: cst.BaseExpression) -> List[cst.BaseExpression]:
        """What the file gives a variable or an option passed as an argument: the values every
        assignment of `name` in it makes (strings, `'a' if c else 'b'`, displays; none when
        anything else is assigned), or for `args.name` the default of the argparse option
        `--name` it declares (`Trainer(accelerator=args.accelerator)` with `default="gpu"`).
        Asked when the walk has ended (leave_Module), of what it saw (`_seen`)."""
        if isinstance(node, cst.Name):
            name = node.value
        elif isinstance(node, cst.Attribute):
            name = node.attr.value
        else:
            return []
        if self.ctx.partial is not None and self.ctx.partial.elided_word(name):
            self.ctx.partial_misses.add(name)  # assigned or declared in lines partial parsing left out
        if isinstance(node, cst.Name):
            return list(self._seen.commands.get(name) or ())
        default = self._seen.options.get(name)
        return [default] if default is not None else []

    def leave_Module(self, original_node: cst.Module) -> None:
        for rule, node, qual in self._held_back:
            if arguments_match(rule, node, self._mapping, given=self._held):
                self.ctx.finding(rule, node, api=qual)

    def _imports_local_module(self, module: str) -> bool:
        local = self.ctx.options.local_modules
        if not is_local_import(self.ctx.path, module, local):
            return False
        # Rare (a project module named like the library): what else the file imports decides,
        # read from the whole text, which partial parsing may have left out.
        return is_local_import(self.ctx.path, module, local, submodule_pairs(absolute_imports(self.ctx.text)))

    # -- calls -----------------------------------------------------------------------------

    def visit_Call(self, node: cst.Call) -> None:
        self._seen.visit_Call(node)
        qual = self.ctx.imports.resolve(node.func)
        _text_argument(self, node, qual)
        if qual is not None:
            for rule in self.rules.finding_call.get(qual, ()):
                if not self.applies(rule):
                    continue
                if arguments_match(rule, node, self._mapping, functools.partial(
                        self._command_values, commands=FindingSpec.of(rule).commands)):
                    self.ctx.finding(rule, node, api=qual)
                elif FindingSpec.of(rule).suffixes and any(
                        isinstance(v, (cst.Name, cst.Attribute)) for v in _selected_arguments(rule, node, self._mapping)):
                    self._held_back.append((rule, node, qual))  # a variable's values: known at the end
        elif isinstance(node.func, cst.Attribute):
            name = node.func.attr.value
            for rule in self.rules.finding_method.get(name, ()):
                if self.applies(rule) and not self._imports_any(FindingSpec.of(rule).unless) \
                        and arguments_match(rule, node, self._mapping):
                    self.ctx.finding(rule, node, api=f".{name}()")


    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        # `class MultiDeviceKernel(DataParallel, Kernel)` (gpytorch): each instance is built by the
        # base's __init__, as a call would build it; only rules that flag every call (no argument
        # condition) apply, reported at the base.
        for base in node.bases:
            if base.keyword is not None or base.star:
                continue
            qual = self.ctx.imports.resolve(base.value)
            if qual is None:
                continue
            for rule in self.rules.finding_call.get(qual, ()):
                spec = FindingSpec.of(rule)
                if not spec.keywords and not spec.positions and self.applies(rule):
                    self.ctx.finding(rule, base.value, api=qual)

    def _imports_any(self, modules: Tuple[str, ...]) -> bool:
        """Whether the file imports one of `modules` (or a submodule), anywhere: from the
        statements of the whole file (a partial parse's import table has only those it kept)."""
        if not modules:
            return False
        if self._all_imports is None:
            found = set(self.ctx.imports.modules)
            if self.ctx.code is not None:
                found.update(self.ctx.code.imports()[0])
            self._all_imports = frozenset(found)
        return any(m == root or m.startswith(root + ".") for m in self._all_imports for root in modules)

    # -- error texts (kind "string") -----------------------------------------------------------

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._seen.visit_AnnAssign(node)

    def visit_Assign(self, node: cst.Assign) -> None:
        self._seen.visit_Assign(node)
        # With partial parsing: `cmd = "nvidia-smi -L | wc -l"` is kept (it holds the command's
        # words), the `subprocess.run(cmd, shell=True)` that runs it may not be: ask for the
        # lines left out that use the name and a called name of a rule with `commands`.
        partial = self.ctx.partial
        if partial is None or not self._command_calls:
            return
        for commands, leaves in self._command_calls:
            if _runs(node.value, commands):
                for target in node.targets:
                    if isinstance(target.target, cst.Name) and partial.elided_word(target.target.value):
                        name = target.target.value.encode()
                        self.ctx.partial_lines.update(
                            run for run in ((start, end) for start, end, _indent in partial.runs)
                            for words in [words_of(partial.text_of(run))] if name in words and leaves & words)

    def visit_Comparison(self, node: cst.Comparison) -> None:
        if self.rules.findings.get("string"):
            for operand in [node.left] + [c.comparator for c in node.comparisons]:
                self._matched_text(operand)

    def _matched_text(self, node: cst.BaseExpression) -> None:
        if not isinstance(node, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
            return
        text = "".join(_string_literals(node))
        for rule in self.rules.findings.get("string", ()):
            for pattern in names_of(rule):
                if pattern in text and self.applies(rule):
                    self.ctx.finding(rule, node, api=pattern)
                    return


# Calls that match text against their string argument: re.search("CUDA out of memory", msg),
# msg.startswith("CUDA out of memory").
_TEXT_MATCHERS = {"re.search", "re.match", "re.fullmatch", "re.findall", "re.compile", "re.finditer"}
_TEXT_METHODS = {"startswith", "endswith", "find", "rfind", "index", "count", "__contains__"}


def _text_argument(visitor: "FindingVisitor", node: cst.Call, qual) -> None:
    if not node.args or not visitor.rules.findings.get("string"):
        return
    if qual in _TEXT_MATCHERS or (
        qual is None and isinstance(node.func, cst.Attribute) and node.func.attr.value in _TEXT_METHODS
    ):
        visitor._matched_text(node.args[0].value)


def _library_of(rule: Rule, module: str) -> str:
    names = [n for n in names_of(rule) if module == n or module.startswith(n + ".")]
    return max(names, key=len) if names else module


class _OptionalImports(cst.CSTVisitor):
    """Ids of the import statements inside `try:` bodies whose handlers catch ImportError, in
    the branches of an `if` that asks whether that library is installed (`if
    is_bnb_available(): import bitsandbytes as bnb`), or after a statement that leaves the block
    when it is not (`if not is_pynvml_available(): raise ImportError(...)`). The check must name
    the library (or the import's alias): `if is_hpu_available(): ... else: import
    transformer_engine` imports it wherever there is no HPU. Walks statements only."""

    def __init__(self, partial=None) -> None:
        """`partial`: the file's partial.PartialText, if any: then `enclosing` gives, for each
        import statement, the blocks around it and its place in each (where statements left
        out could guard it)."""
        super().__init__()
        self.found: Set[int] = set()
        self._guards: Dict[int, Optional[str]] = {}  # block id -> None (try) or the check's text
        self._active: List[Optional[str]] = []
        self._partial = partial is not None
        self._slots: Dict[int, Tuple[Union[cst.IndentedBlock, cst.Module], int]] = {}  # statement -> (block, index)
        self._path: List[cst.CSTNode] = []  # the statements being visited
        self.enclosing: Dict[int, List[Tuple[Union[cst.IndentedBlock, cst.Module], int]]] = {}

    LAYOUT_UNSEEN = True  # (on_visit/on_leave do nothing for whitespace or one-token nodes: fast_visitor)

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, cst.BaseExpression):
            return False
        if self._partial:
            if isinstance(node, (cst.IndentedBlock, cst.Module)):
                self._slots.update((id(stmt), (node, i)) for i, stmt in enumerate(node.body))
            elif isinstance(node, (cst.Import, cst.ImportFrom)):
                self.enclosing[id(node)] = [self._slots[id(s)] for s in self._path if id(s) in self._slots]
            if isinstance(node, cst.BaseStatement):
                self._path.append(node)
        if isinstance(node, cst.Try) and any(catches_import_error(h) for h in node.handlers):
            self._guards[id(node.body)] = None
        elif isinstance(node, cst.If):
            check = _availability_check(node.test)
            if check:
                self._guards.update((id(b), check) for b in (node.body, node.orelse) if b is not None)
        elif isinstance(node, (cst.IndentedBlock, cst.Module)):
            check = ""
            for stmt in node.body:
                if check:
                    self._guards[id(stmt)] = check
                elif isinstance(stmt, cst.If) and stmt.orelse is None and _leaves(stmt.body):
                    check = _availability_check(stmt.test)
        if id(node) in self._guards:
            self._active.append(self._guards[id(node)])
        if self._active and isinstance(node, (cst.Import, cst.ImportFrom)) and any(
                check is None or _names_library(check, node) for check in self._active):
            self.found.add(id(node))
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        if id(original_node) in self._guards:
            self._active.pop()
        if self._partial and isinstance(original_node, cst.BaseStatement):
            self._path.pop()


def _may_leave_unless_available(stmt: ast.stmt) -> bool:
    """In Python's tree of a statement partial parsing left out: whether it may be an `if` that
    leaves the block unless a library is installed (what _OptionalImports reads from libcst's
    tree; this says yes to more)."""
    return (isinstance(stmt, ast.If) and not stmt.orelse and isinstance(stmt.body[-1], (ast.Return, ast.Raise))
            and any(isinstance(n, ast.Call) and _AVAILABILITY_RE.search(
                n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", ""))
                for n in ast.walk(stmt.test)))


def _availability_check(test: cst.CSTNode) -> str:
    """The names and string arguments of the availability calls in `test`, lowercased ("" for
    none): `is_bnb_available`, `_is_package_available transformer_engine`."""
    parts: List[str] = []
    stack = [test]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Call):
            name = dotted_name(n.func)
            last = name.rsplit(".", 1)[-1] if name else ""
            if _AVAILABILITY_RE.search(last):
                parts.append(last)
                parts += [v for a in n.args for v in [string_value(a.value)] if v]
        stack.extend(children(n))
    return " ".join(parts).lower()


def _names_library(check: str, node: Union[cst.Import, cst.ImportFrom]) -> bool:
    """Whether an availability check names the library an import brings (or its alias)."""
    names: List[str] = []
    if isinstance(node, cst.Import):
        for alias in node.names:
            names.append((dotted_name(alias.name) or "").split(".")[0])
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                names.append(alias.asname.name.value.split("_")[0])
    elif node.module is not None:
        names.append((dotted_name(node.module) or "").split(".")[0])
    flat = check.replace("_", "")
    words = set(re.split(r"[^a-z0-9]+", check.replace("_", " "))) - _CHECK_WORDS
    return any(n and (n.lower().replace("_", "") in flat or any(_abbreviates(w, n.lower()) for w in words))
               for n in names)


_CHECK_WORDS = {"", "is", "available", "installed", "package", "find", "spec", "loader", "torch", "has"}


def _abbreviates(word: str, name: str) -> bool:
    """`bnb` of bitsandbytes, `te` of transformer_engine: the word's letters in order in the
    name, starting with its first."""
    if len(word) < 2 or word[0] != name[0]:
        return False
    rest = iter(name)
    return all(ch in rest for ch in word)


def _leaves(body: cst.BaseSuite) -> bool:
    """Whether a block ends by leaving: `return ...` or `raise ...` as its last statement."""
    last = body.body[-1] if body.body else None
    if isinstance(last, cst.SimpleStatementLine):
        last = last.body[-1] if last.body else None
    return isinstance(last, (cst.Return, cst.Raise))


def catches_import_error(handler: cst.ExceptHandler) -> bool:
    if handler.type is None:  # bare `except:`
        return True
    types = handler.type.elements if isinstance(handler.type, cst.Tuple) else [handler.type]
    for t in types:
        expr = t.value if isinstance(t, cst.BaseElement) else t
        name = dotted_name(expr)
        if name is not None and name.rsplit(".", 1)[-1] in _IMPORT_ERRORS:
            return True
    return False


# ----------------------------------------------------------------------------- arguments


class _MappingAssignments(cst.CSTVisitor):
    """name -> the entries of the dicts assigned to it (None once anything else is); and the
    command values (strings, conditional expressions of them, list displays) assigned to it
    (None once anything else is)."""

    def __init__(self) -> None:
        super().__init__()
        self.entries: Dict[str, Optional[List[Tuple[str, cst.BaseExpression]]]] = {}
        self.commands: Dict[str, Optional[List[cst.BaseExpression]]] = {}
        # argparse option (`--accelerator`, its dest) -> its default; None when declared twice
        self.options: Dict[str, Optional[cst.BaseExpression]] = {}

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "add_argument":
            default = next((a.value for a in node.args if a.keyword is not None and a.keyword.value == "default"), None)
            for name in option_names(node):
                self.options[name] = default if name not in self.options else None

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            if isinstance(target.target, cst.Name):
                self._bind(target.target.value, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if isinstance(node.target, cst.Name) and node.value is not None:
            self._bind(node.target.value, node.value)

    def _bind(self, name: str, value: cst.BaseExpression) -> None:
        entries = _mapping_entries(value)
        known = self.entries.get(name, [])
        self.entries[name] = None if entries is None or known is None else known + entries
        commands = self.commands.get(name, [])
        self.commands[name] = commands + [value] if commands is not None and _is_command_value(value) else None


def _is_command_value(value: cst.BaseExpression) -> bool:
    if isinstance(value, cst.IfExp):
        return _is_command_value(value.body) and _is_command_value(value.orelse)
    return isinstance(value, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString, cst.List, cst.Tuple))


def _mapping_entries(value: cst.BaseExpression) -> Optional[List[Tuple[str, cst.BaseExpression]]]:
    if isinstance(value, cst.Dict):
        return [(key, e.value) for e in value.elements
                if isinstance(e, cst.DictElement) for key in [string_value(e.key)] if key is not None]
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "dict":
        return [(a.keyword.value, a.value) for a in value.args if a.keyword is not None]
    return None


def arguments_match(rule: Rule, call: cst.Call,
                    mapping: Optional[Callable[[str], Optional[List[Tuple[str, cst.BaseExpression]]]]] = None,
                    values: Optional[Callable[[str], Optional[List[cst.BaseExpression]]]] = None,
                    given: Optional[Callable[[cst.BaseExpression], List[cst.BaseExpression]]] = None) -> bool:
    """Whether a call rule's argument condition holds for `call`.

    No `keywords`/`positions`: every call matches. Otherwise one of those arguments must be
    given and not an empty literal (None, False, "", [], ...); with `suffixes` it must also
    contain a string literal that ends with one of them (`sources=["k.cu"]`; a shared
    library's version does not count: `libcudart.so.11.0` ends in `libcudart.so`).
    Arguments passed through `*args` are unknown, so they never match; so are those of
    `**kwargs`, unless `mapping` knows the dict (`params = {"gpus": 2}`; `Trainer(**params)`).
    With `keys`, a variable given there counts with the entries `mapping` knows it holds.
    With `commands`, the argument must run one of those programs (_runs), written there or in
    the values `values` knows a variable is assigned (`cmd = 'nvidia-smi -L | wc -l'`). With
    `suffixes`, a variable or an option's value counts with what `given` knows it holds
    (`accelerator = "gpu"`, `args.accelerator` of an option whose default is "gpu").
    """
    spec = FindingSpec.of(rule)
    if not spec.keywords and not spec.positions:
        return True
    for value in _selected_arguments(rule, call, mapping):
        if spec.commands:
            assigned = values(value.value) if isinstance(value, cst.Name) and values is not None else None
            if any(_runs(v, spec.commands) for v in assigned or [value]):
                return True
        elif spec.keys:
            if _holds_key(value, spec.keys):
                return True
            # `device_dict = {"gpu": gpus}` ... `tune.with_resources(fn, device_dict)` (neuralforecast
            # 1.7.5's BaseAuto._tune_model): a variable the file assigns only dict displays.
            if isinstance(value, cst.Name) and mapping is not None and any(
                    key in spec.keys and not _is_empty_literal(held) for key, held in mapping(value.value) or ()):
                return True
        elif spec.suffixes:
            held = given(value) if given is not None and isinstance(value, (cst.Name, cst.Attribute)) else []
            if any(_VERSION_TAIL_RE.sub("", s).endswith(spec.suffixes)
                   for v in [value, *held] for s in _string_literals(v)):
                return True
        elif not _is_empty_literal(value):
            return True
    return False


def _selected_arguments(rule: Rule, call: cst.Call, mapping=None) -> Iterator[cst.BaseExpression]:
    positional = []
    for arg in call.args:
        if arg.star:
            break  # positions after a *args are unknown
        if arg.keyword is None:
            positional.append(arg.value)
    spec = FindingSpec.of(rule)
    for index in spec.positions:
        if index < len(positional):
            yield positional[index]
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value in spec.keywords:
            yield arg.value
        elif arg.star == "**" and isinstance(arg.value, cst.Name) and mapping is not None and spec.keywords:
            for key, value in mapping(arg.value.value) or ():
                if key in spec.keywords:
                    yield value


def _runs(value: cst.BaseExpression, commands: Tuple[str, ...]) -> bool:
    """Whether the command `value` runs one of `commands`: a list's first element (its file
    name: `/usr/bin/nvidia-smi`), or a command line's programs (the first word, and the first
    after `|`, `;`, `&`, `(`, a backquote: `nvidia-smi -L | wc -l`); either branch of `a if c
    else b`. `["echo", "nvidia-smi"]` runs echo."""
    if isinstance(value, cst.IfExp):
        return _runs(value.body, commands) or _runs(value.orelse, commands)
    if isinstance(value, (cst.List, cst.Tuple)):
        first = value.elements[0].value if value.elements and not isinstance(value.elements[0], cst.StarredElement) else None
        return first is not None and any(text.strip().rsplit("/", 1)[-1] in commands for text in _string_literals(first))
    for text in _string_literals(value):
        for part in _COMMAND_SEPARATOR_RE.split(text):
            words = part.split()
            if words and words[0].strip("'\"").rsplit("/", 1)[-1] in commands:
                return True
    return False


_COMMAND_SEPARATOR_RE = re.compile(r"[|;&(`]|\$\(")
# A shared library's version after `.so` (`libcudart.so.11.0`): suffixes name the library.
_VERSION_TAIL_RE = re.compile(r"(?<=\.so)(?:\.\d+)+$")


def _string_literals(node: cst.CSTNode) -> Iterator[str]:
    """The text of every string literal in an expression (the literal parts of f-strings)."""
    if isinstance(node, cst.SimpleString):
        try:
            value = node.evaluated_value
        except Exception:  # an escape libcst cannot evaluate
            return
        if isinstance(value, str):
            yield value
        return
    if isinstance(node, cst.FormattedString):
        last = node.parts[-1] if node.parts else None
        if isinstance(last, cst.FormattedStringText):
            yield last.value
        return
    if isinstance(node, cst.ConcatenatedString):
        yield "".join(_string_literals(node.left)) + "".join(_string_literals(node.right))
        return
    for child in children(node):
        yield from _string_literals(child)


def _holds_key(node: cst.BaseExpression, keys: Tuple[str, ...]) -> bool:
    """Whether `node` is a dict literal (or a list or tuple of them: placement-group bundles)
    with one of `keys` as a string key whose value is not an empty literal (`{"gpu": 1}`,
    not `{"gpu": 0}`)."""
    dicts = [e.value for e in node.elements] if isinstance(node, (cst.List, cst.Tuple)) else [node]
    return any(isinstance(d, cst.Dict) and any(
        isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString) and not _is_empty_literal(e.value)
        and string_value(e.key) in keys for e in d.elements) for d in dicts)


def _is_empty_literal(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.Name):
        return node.value in ("None", "False")
    if isinstance(node, (cst.List, cst.Tuple, cst.Set)):
        return not node.elements
    if isinstance(node, cst.Dict):
        return not node.elements
    if isinstance(node, cst.SimpleString):
        try:
            return node.evaluated_value in ("", b"")
        except Exception:
            return False
    if isinstance(node, cst.Integer):
        return node.value == "0"
    return False
