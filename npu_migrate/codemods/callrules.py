"""The framework rules (rules.py, "framework rules") applied to a file: the call-level rewrites
and the findings that the TensorFlow and MindSpore codemods share.

`apply_framework_rules(module, ctx, framework, canonical)` runs two passes over the tree:

1. `Planner` (a `Bindings`) records what every variable is assigned (per function scope), so a
   value passed by name (`config=run_config`, `dataset.batch(...)`) can be traced to the call
   that built it; at the end of the module it decides, on the unchanged tree, what happens to
   each call, string literal, import and statement, and records the findings (so their
   positions are the file's own);
2. `Applier` carries the plans out (visiting only the statements that have one) and records
   the edits.

Deciding before changing anything keeps each decision a function of the original code: whether
`tf.estimator.Estimator(config=cfg)` may become `NPUEstimator` depends on the call that built
`cfg`, wherever it is in the file, and whether `import horovod.tensorflow as hvd` can go depends
on every use of `hvd` having been rewritten.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple, Union

import libcst as cst

from ..context import Context
from ..imports import dotted_name
from ..rules import Rule
from ..walk import own_leave, own_visit, walk
from .strings import string_value, with_body

Canonical = Callable[[str], str]
MODULE_SCOPE = 0
_MAIN_GUARD_VALUES = {"__main__"}


# ---------------------------------------------------------------------------- call arguments


def positional(call: cst.Call) -> List[Tuple[int, cst.Arg]]:
    """(index in call.args, arg) of the plain positional arguments."""
    return [(i, a) for i, a in enumerate(call.args) if a.keyword is None and a.star == ""]


def has_star(call: cst.Call) -> bool:
    return any(a.star for a in call.args)


def find_argument(call: cst.Call, keyword: str, position: Optional[int]) -> Optional[int]:
    """The index in call.args of the argument `keyword` (given by name or at `position`)."""
    for i, a in enumerate(call.args):
        if a.keyword is not None and a.keyword.value == keyword:
            return i
    if position is not None:
        plain = positional(call)
        if len(plain) > position and not any(a.star == "*" for _, a in plain[:position]):
            return plain[position][0]
    return None


def is_none(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def _keyword_equal(call: cst.Call) -> cst.AssignEqual:
    """The `=` style of the call's own keyword arguments (`a=1` or `a = 1`)."""
    for a in call.args:
        if a.keyword is not None and isinstance(a.equal, cst.AssignEqual):
            return a.equal
    return cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))


def add_keyword_argument(call: cst.Call, keyword: str, value: cst.BaseExpression) -> cst.Call:
    """`call` with `keyword=value` appended, in the call's own layout: one line stays one line,
    one argument per line (with or without a trailing comma) stays so."""
    new_arg = cst.Arg(value=value, keyword=cst.Name(keyword), equal=_keyword_equal(call))
    args = list(call.args)
    if not args:
        return call.with_changes(args=[new_arg])
    last = args[-1]
    separators = [a.comma for a in args[:-1]]
    one_per_line = bool(separators) and all(
        isinstance(c, cst.Comma) and isinstance(c.whitespace_after, cst.ParenthesizedWhitespace) for c in separators
    )
    if one_per_line:
        separator = separators[-1]
    elif not separators and isinstance(last.comma, cst.Comma) and isinstance(last.comma.whitespace_after, cst.ParenthesizedWhitespace):
        # f(\n    a,\n): the one argument sits on its own line after the parenthesis.
        separator = cst.Comma(whitespace_after=call.whitespace_before_args)
    else:
        separator = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    # The new argument takes the old last one's place before `)`: its trailing comma, and the
    # line break before the parenthesis.
    args[-1] = last.with_changes(comma=separator, whitespace_after_arg=cst.SimpleWhitespace(""))
    args.append(new_arg.with_changes(comma=last.comma, whitespace_after_arg=last.whitespace_after_arg))
    return call.with_changes(args=args)


def new_call(func: str, values: Sequence[cst.BaseExpression], keywords: Sequence[Tuple[str, cst.BaseExpression]] = ()) -> cst.Call:
    args = [cst.Arg(value=v) for v in values]
    args += [
        cst.Arg(
            value=v,
            keyword=cst.Name(k),
            equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
        )
        for k, v in keywords
    ]
    for i in range(len(args) - 1):
        args[i] = args[i].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    return cst.Call(func=cst.parse_expression(func), args=args)


def is_main_guard(node: cst.CSTNode) -> bool:
    """`if __name__ == "__main__":` (either operand order, any quotes)."""
    if not isinstance(node, cst.If) or not isinstance(node.test, cst.Comparison):
        return False
    test = node.test
    if len(test.comparisons) != 1 or not isinstance(test.comparisons[0].operator, cst.Equal):
        return False
    operands = [test.left, test.comparisons[0].comparator]
    names = [o for o in operands if isinstance(o, cst.Name) and o.value == "__name__"]
    values = [string_value(o) for o in operands if isinstance(o, cst.SimpleString)]
    return len(names) == 1 and any(v in _MAIN_GUARD_VALUES for v in values)


# ---------------------------------------------------------------------------- scopes and bindings


_STATEMENT_CLASSES: Dict[type, bool] = {}


def _is_statement(node: cst.CSTNode) -> bool:
    kind = type(node)
    known = _STATEMENT_CLASSES.get(kind)
    if known is None:
        known = _STATEMENT_CLASSES[kind] = isinstance(node, cst.BaseStatement)
    return known


class ScopeTracker(cst.CSTVisitor):
    """Keeps `self.scope`: the function (or lambda, or class body) the visit is in."""

    def __init__(self) -> None:
        super().__init__()
        self.scopes: List[int] = [MODULE_SCOPE]
        self.parents: Dict[int, int] = {}
        self.class_scopes: Set[int] = set()
        self.path: List[int] = []  # ids of the statements the visit is in, outermost first

    # Called on every node of the tree: hooks and statement classes are looked up in caches
    # (isinstance of libcst's abstract classes is slow), not through libcst's on_visit.
    def on_visit(self, node: cst.CSTNode) -> bool:
        if _is_statement(node):
            self.path.append(id(node))
        return own_visit(self, node)

    def on_leave(self, original_node: cst.CSTNode) -> None:
        own_leave(self, original_node)
        if _is_statement(original_node):
            self.path.pop()

    @property
    def scope(self) -> int:
        return self.scopes[-1]

    def _enter(self, node: cst.CSTNode, is_class: bool = False) -> None:
        self.parents[id(node)] = self.scope
        if is_class:
            self.class_scopes.add(id(node))
        self.scopes.append(id(node))

    def _leave(self) -> None:
        self.scopes.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> Optional[bool]:
        self.on_definition(node.name.value)
        self._enter(node)
        return None

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._leave()

    def visit_Lambda(self, node: cst.Lambda) -> Optional[bool]:
        self._enter(node)
        return None

    def leave_Lambda(self, original_node: cst.Lambda) -> None:
        self._leave()

    def visit_ClassDef(self, node: cst.ClassDef) -> Optional[bool]:
        self.on_definition(node.name.value)
        self._enter(node, is_class=True)
        return None

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._leave()

    def on_definition(self, name: str) -> None:
        """A `def`/`class` binds its name in the enclosing scope."""


class Bindings(ScopeTracker):
    """What each variable is bound to: (scope, name) -> the assigned expressions, None for a
    binding whose value is unknown (a parameter, a loop variable, an import, an augmented
    assignment, ...). Attributes (`self.dataset = ...`) are tracked file-wide by their text."""

    ATTRIBUTES = -1

    def __init__(self) -> None:
        super().__init__()
        self.values: Dict[Tuple[int, str], List[Optional[cst.BaseExpression]]] = {}
        self.value_paths: Dict[int, Tuple[int, ...]] = {}  # bound value -> its statement path
        # Options the file's argparse parsers define (`device_target` for --device-target):
        # `args.device_target` holds what the option's default says.
        self.argparse_options: Set[str] = set()

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "add_argument":
            from .torch import option_names  # the torch pass's reading of add_argument options

            self.argparse_options.update(option_names(node))

    def bind(self, name: str, value: Optional[cst.BaseExpression], scope: Optional[int] = None) -> None:
        self.values.setdefault((self.scope if scope is None else scope, name), []).append(value)
        if value is not None:
            self.value_paths[id(value)] = tuple(self.path)

    def bind_target(self, target: cst.BaseExpression, value: Optional[cst.BaseExpression]) -> None:
        if isinstance(target, cst.Name):
            self.bind(target.value, value)
        elif isinstance(target, cst.Attribute):
            key = dotted_name(target)
            if key is not None:
                self.bind(key, value, scope=self.ATTRIBUTES)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self.bind_target(element.value, None)
        elif isinstance(target, cst.StarredElement):
            self.bind_target(target.value, None)

    def on_definition(self, name: str) -> None:
        self.bind(name, None)

    def visit_Param(self, node: cst.Param) -> None:
        self.bind(node.name.value, None)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self.bind_target(target.target, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self.bind_target(node.target, node.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self.bind_target(node.target, None)

    def visit_For(self, node: cst.For) -> None:
        self.bind_target(node.target, None)

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self.bind_target(node.target, None)

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            self.bind_target(node.asname.name, None)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self.bind_target(node.target, None)

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        if node.name is not None:
            self.bind_target(node.name.name, None)

    def visit_Global(self, node: cst.Global) -> None:
        for item in node.names:
            self.bind(item.name.value, None)

    def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
        for item in node.names:
            self.bind(item.name.value, None)

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                self.bind(alias.asname.name.value, None)
            else:
                name = dotted_name(alias.name)
                if name:
                    self.bind(name.split(".", 1)[0], None)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if isinstance(node.names, cst.ImportStar):
            return
        for alias in node.names:
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                self.bind(alias.asname.name.value, None)
            elif isinstance(alias.name, cst.Name):
                self.bind(alias.name.value, None)

    def lookup(self, node: cst.BaseExpression, scope: int) -> Optional[List[Optional[cst.BaseExpression]]]:
        """The values bound to a Name (as Python resolves it from `scope`) or to an attribute
        chain; None when the variable is never bound in this file."""
        if isinstance(node, cst.Attribute):
            key = dotted_name(node)
            return self.values.get((self.ATTRIBUTES, key)) if key is not None else None
        if not isinstance(node, cst.Name):
            return None
        current: Optional[int] = scope
        first = True
        while current is not None:
            if first or current not in self.class_scopes:  # methods do not see class-body names
                found = self.values.get((current, node.value))
                if found is not None:
                    return found
            first = False
            current = self.parents.get(current) if current != MODULE_SCOPE else None
        return None


# ---------------------------------------------------------------------------- the rules, indexed


class FrameworkRules:
    """One framework's rules, indexed by what they match."""

    def __init__(self, rules: Iterable[Rule]) -> None:
        self.rename: Dict[str, Rule] = {}
        self.replace: Dict[str, Rule] = {}
        self.config: Dict[str, Rule] = {}
        self.arguments: Dict[str, List[Rule]] = {}
        self.add_keyword_api: Dict[str, List[Rule]] = {}
        self.add_keyword_method: Dict[str, Rule] = {}
        self.argparse_options: Dict[str, Rule] = {}
        self.finding_api: Dict[str, Rule] = {}
        self.finding_import: Dict[str, Rule] = {}
        self.finding_call: Dict[str, List[Rule]] = {}
        self.codemod_findings: Dict[str, Rule] = {}
        self.entry_setup: List[Rule] = []
        self.remove_import: List[Rule] = []
        self.add_import: Optional[Rule] = None
        for rule in rules:
            spec = rule.spec
            if rule.kind == "finding":
                names = rule.patterns or (rule.from_,)
                table = {"api": self.finding_api, "import": self.finding_import}.get(rule.match_kind)
                if table is not None:
                    for name in names:
                        table.setdefault(name, rule)
                elif rule.match_kind == "call":
                    for name in names:
                        self.finding_call.setdefault(name, []).append(rule)
                elif rule.match_kind == "codemod":
                    self.codemod_findings[rule.code] = rule
                continue
            if rule.kind == "add_import":
                self.add_import = rule
                continue
            assert spec is not None
            for api in spec.apis:
                if rule.kind == "call_rename":
                    self.rename.setdefault(api, rule)
                elif rule.kind == "call_replace":
                    self.replace.setdefault(api, rule)
                elif rule.kind == "call_config":
                    self.config.setdefault(api, rule)
                elif rule.kind == "argument":
                    self.arguments.setdefault(api, []).append(rule)
                elif rule.kind == "add_keyword":
                    self.add_keyword_api.setdefault(api, []).append(rule)
            if rule.kind == "add_keyword":
                for method in spec.methods:
                    self.add_keyword_method.setdefault(method, rule)
            elif rule.kind == "argument":
                for option in spec.options:
                    self.argparse_options.setdefault(option, rule)
            elif rule.kind == "entry_setup":
                self.entry_setup.append(rule)
            elif rule.kind == "remove_import":
                self.remove_import.append(rule)
        # Names that already hold an NPU object: what the call_rename / call_config rules produce.
        self.npu_callees = {r.spec.to for r in self.rename.values()}
        self.config_wrappers = {r.spec.to for r in self.config.values()}

    @staticmethod
    def by_prefix(table: Dict[str, Rule], qualname: str) -> Optional[Rule]:
        """The rule for `qualname` or for the closest of its parents."""
        found = FrameworkRules.listed_prefix(table, qualname)
        return found[1] if found is not None else None

    @staticmethod
    def listed_prefix(table: Dict[str, Rule], qualname: str) -> Optional[Tuple[str, Rule]]:
        """(the listed name, its rule) for `qualname` or the closest of its parents."""
        parts = qualname.split(".")
        for end in range(len(parts), 0, -1):
            name = ".".join(parts[:end])
            rule = table.get(name)
            if rule is not None:
                return name, rule
        return None


# ---------------------------------------------------------------------------- plans


@dataclass
class CallPlan:
    rename: Optional[Rule] = None
    replace: Optional[Rule] = None
    replace_args: Tuple[int, ...] = ()  # indexes into call.args, in `args` order
    config: Optional[Rule] = None
    config_arg: Optional[int] = None  # index of the argument to wrap (None: add the keyword)
    add_keywords: List[Rule] = field(default_factory=list)
    set_keywords: List[Tuple[Rule, int]] = field(default_factory=list)  # (rule, index of the argument to replace)


@dataclass
class Plans:
    calls: Dict[int, CallPlan] = field(default_factory=dict)
    literals: Dict[int, Tuple[Rule, str]] = field(default_factory=dict)  # SimpleString -> (rule, new body)
    statements: Dict[int, Rule] = field(default_factory=dict)  # Expr -> call_replace rule with assign_to
    cleanups: Dict[int, List[Tuple[Rule, cst.CSTNode]]] = field(default_factory=dict)  # block -> rules
    removed_imports: Dict[int, Tuple[Rule, Set[int]]] = field(default_factory=dict)  # Import -> alias indexes
    entry_setups: List[Tuple[Rule, cst.If]] = field(default_factory=list)
    # SimpleStatementLine -> (rule, statements to add after it): the atexit registrations of a
    # start-up call whose block does not last as long as the program.
    after_lines: Dict[int, Tuple[Rule, List[str]]] = field(default_factory=dict)
    needs_import: bool = False
    needs_atexit: Optional[Rule] = None
    hot: Set[int] = field(default_factory=set)  # statements with something planned inside


# ---------------------------------------------------------------------------- pass 2: plan


class Planner(Bindings):
    """Records the bindings while it visits; decides at the end of the module, when every
    binding is known (a config may be built below the estimator that uses it)."""

    def __init__(self, ctx: Context, tree: cst.Module, rules: FrameworkRules, canonical: Canonical,
                 report: bool = True) -> None:
        super().__init__()
        self.report = report  # record findings (False: only plan)
        self.ctx = ctx
        self.tree = tree
        self.rules = rules
        self.canonical = canonical
        self.plans = Plans()
        self._original_tree = tree is ctx.module
        self._not_references: Set[int] = set()
        self._inner: Set[int] = set()  # Name/Attribute nodes that are part of a longer reference
        self._rewritten_refs: Set[int] = set()  # callee references replaced by a rewrite
        self._reported_refs: Set[int] = set()  # callee references of calls already reported
        self._reported_once: Set[str] = set()  # listed names of once_per_file findings reported
        self._statement_calls: Dict[int, cst.Expr] = {}
        self._blocks: List[int] = [MODULE_SCOPE]
        self._renamable_cache: Dict[int, bool] = {}
        # remove_import bookkeeping: rule -> [references seen, references rewritten]
        self._module_refs: Dict[str, List[int]] = {}
        self._imports: List[Tuple[cst.CSTNode, str, Rule, Optional[int]]] = []
        # entry_setup bookkeeping
        self._used: Set[str] = set()  # canonical references seen
        self._called_methods: Dict[str, cst.Call] = {}
        self._called: Set[str] = set()  # canonical names and bare names called
        self._main_guard: Optional[cst.If] = None
        # Deferred to the end of the module: (call, scope, block, statement path), (reference, scope).
        self._calls: List[Tuple[cst.Call, int, int, Tuple[int, ...]]] = []
        self._references: List[Tuple[Union[cst.Name, cst.Attribute], int]] = []
        self._import_paths: Dict[int, Tuple[int, ...]] = {}
        self._block = MODULE_SCOPE  # the block and statement path of the call being planned
        self._call_path: Tuple[int, ...] = ()
        self.keep: Set[int] = set()  # statements whose call arguments stay (device_dispatch.py)
        self._compound: Dict[int, cst.CSTNode] = {}  # id -> compound statement (for lifetimes)
        self._statement_lines: Dict[int, cst.SimpleStatementLine] = {}
        self._main_functions: Set[str] = set()  # functions the main block runs (main(), app.run(main))

    # -- helpers -------------------------------------------------------------------------------

    def qual(self, node: cst.BaseExpression) -> Optional[str]:
        q = self.ctx.imports.resolve(node)
        return self.canonical(q) if q is not None else None

    def finding(self, rule: Rule, node: cst.CSTNode, api: str, message: Optional[str] = None) -> None:
        if not self.report:
            return
        self.ctx.finding(rule, node, api=api, message=message, module=None if self._original_tree else self.tree)

    def codemod_finding(self, code: str, node: cst.CSTNode, api: str, message: Optional[str] = None) -> None:
        rule = self.rules.codemod_findings.get(code) if code else None
        if rule is not None:
            self.finding(rule, node, api, message)

    def suppressed(self, node: cst.CSTNode, rule: Rule) -> bool:
        return self._original_tree and self.ctx.suppressed(node, rule.code)

    def source(self, node: cst.CSTNode) -> str:
        return self.tree.code_for_node(node)

    def values_of(self, node: cst.BaseExpression) -> Optional[List[Optional[cst.BaseExpression]]]:
        return self.lookup(node, self.scope)

    # -- imports ---------------------------------------------------------------------------------

    def visit_Import(self, node: cst.Import) -> bool:
        super().visit_Import(node)
        self._import_paths[id(node)] = tuple(self.path)
        for i, alias in enumerate(node.names):
            name = dotted_name(alias.name)
            if name is None:
                continue
            self._import_finding(self.canonical(name), alias)
            self._track_import(node, self.canonical(name), i)
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        super().visit_ImportFrom(node)
        self._import_paths[id(node)] = tuple(self.path)
        if node.relative or node.module is None:
            return False
        module = dotted_name(node.module)
        if module is None:
            return False
        module = self.canonical(module)
        if not self._import_finding(module, node) and not isinstance(node.names, cst.ImportStar):
            for alias in node.names:
                name = dotted_name(alias.name)
                if name is not None:
                    self._import_finding(f"{module}.{name}", alias)
        self._track_import(node, module, None)
        return False

    def _import_finding(self, module: str, node: cst.CSTNode) -> bool:
        rule = FrameworkRules.by_prefix(self.rules.finding_import, module)
        if rule is not None:
            self.finding(rule, node, api=module)
        return rule is not None

    def _track_import(self, node: cst.CSTNode, module: str, alias_index: Optional[int]) -> None:
        for rule in self.rules.remove_import:
            if any(module == m or module.startswith(m + ".") for m in rule.spec.modules):
                self._imports.append((node, module, rule, alias_index))

    # -- references ------------------------------------------------------------------------------

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._not_references.add(id(node.attr))
        self._inner.add(id(node.value))

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self._not_references.add(id(node.keyword))

    def visit_Param(self, node: cst.Param) -> None:
        super().visit_Param(node)
        self._not_references.add(id(node.name))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> Optional[bool]:
        self._not_references.add(id(node.name))
        return super().visit_FunctionDef(node)

    def visit_ClassDef(self, node: cst.ClassDef) -> Optional[bool]:
        self._not_references.add(id(node.name))
        return super().visit_ClassDef(node)

    def leave_Name(self, original_node: cst.Name) -> None:
        if id(original_node) not in self._not_references:
            self._references.append((original_node, self.scope))

    def leave_Attribute(self, original_node: cst.Attribute) -> None:
        self._references.append((original_node, self.scope))

    def _reference(self, node: Union[cst.Name, cst.Attribute]) -> None:
        if id(node) in self._inner:
            return
        qual = self.qual(node)
        if qual is None:
            return
        self._used.add(qual)
        for rule in self.rules.remove_import:
            for module in rule.spec.modules:
                if qual == module or qual.startswith(module + "."):
                    counts = self._module_refs.setdefault(module, [0, 0])
                    counts[0] += 1
                    counts[1] += id(node) in self._rewritten_refs
        if id(node) in self._rewritten_refs or id(node) in self._reported_refs:
            return
        found = FrameworkRules.listed_prefix(self.rules.finding_api, qual)
        if found is not None:
            listed, rule = found
            if rule.once_per_file:
                if listed in self._reported_once:
                    return
                self._reported_once.add(listed)
            self.finding(rule, node, api=qual)

    # -- statements and blocks -----------------------------------------------------------------

    def visit_Expr(self, node: cst.Expr) -> None:
        if isinstance(node.value, cst.Call):
            self._statement_calls[id(node.value)] = node

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, cst.BaseCompoundStatement):
            self._compound[id(node)] = node
        elif isinstance(node, cst.SimpleStatementLine):
            self._statement_lines[id(node)] = node
        return super().on_visit(node)

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._blocks.append(id(node))

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock) -> None:
        self._blocks.pop()

    def visit_If(self, node: cst.If) -> None:
        if self.scope == MODULE_SCOPE and len(self._blocks) == 1 and self._main_guard is None and is_main_guard(node):
            self._main_guard = node

    # -- calls -------------------------------------------------------------------------------------

    def visit_Call(self, node: cst.Call) -> None:
        super().visit_Call(node)
        func = node.func
        qual = self.qual(func)
        if isinstance(func, cst.Name):
            self._called.add(func.value)
        if qual is not None:
            self._called.add(qual)
        elif isinstance(func, cst.Attribute):
            self._called_methods.setdefault(func.attr.value, node)
        self._calls.append((node, self.scope, self._blocks[-1], tuple(self.path)))

    def _plan_call(self, node: cst.Call) -> None:
        func = node.func
        qual = self.qual(func)
        plan = CallPlan()
        if qual is not None:
            self._plan_api_call(node, qual, plan)
        elif isinstance(func, cst.Attribute):
            method = func.attr.value
            rule = self.rules.add_keyword_method.get(method)
            if rule is not None:
                self._plan_method_keyword(node, rule, plan)
            if method == "add_argument" and not (self.keep and any(i in self.keep for i in self._call_path)):
                self._plan_argparse(node)
        if plan.rename or plan.replace or plan.config or plan.add_keywords or plan.set_keywords:
            self.plans.calls[id(node)] = plan
            self.plans.hot.update(self._call_path)
            if plan.rename or plan.replace or plan.config:
                self.plans.needs_import = True

    def _plan_api_call(self, node: cst.Call, qual: str, plan: CallPlan) -> None:
        rules = self.rules
        replace = rules.replace.get(qual)
        if replace is not None and not self.suppressed(node, replace):
            self._plan_replace(node, replace, plan)
        rename = rules.rename.get(qual)
        config = rules.config.get(qual)
        if rename is not None and not self.suppressed(node, rename):
            if self.renamable(node, rename):
                plan.rename = rename
                self._rewritten_refs.add(id(node.func))
                config = None  # the NPU class configures itself
            elif config is None:
                self._unfit(node, rename, qual)
        if config is not None and not self.suppressed(node, config) and not self._skip_config(config):
            self._plan_config(node, config, plan)
        kept = bool(self.keep) and any(i in self.keep for i in self._call_path)
        for rule in rules.arguments.get(qual, ()):
            if not self.suppressed(node, rule) and not kept:
                self._plan_argument(node, rule)
        for keyword_rule in rules.add_keyword_api.get(qual, ()):
            if not self.suppressed(node, keyword_rule):
                self._plan_keyword(node, keyword_rule, plan, qual)
        for rule in rules.finding_call.get(qual, ()):
            given = {a.keyword.value for a in node.args if a.keyword is not None and not is_none(a.value)}
            if not rule.keywords or given & set(rule.keywords):
                self.finding(rule, node, api=qual)

    def _unfit(self, node: cst.Call, rule: Rule, qual: str, why: str = "") -> None:
        """Report a call the rule cannot rewrite (its arguments do not fit the NPU API)."""
        finding = self.rules.codemod_findings.get(rule.spec.unknown_finding)
        if finding is None:
            return
        self._reported_refs.add(id(node.func))
        self.finding(finding, node, qual, finding.render_message(api=qual, to=rule.spec.to) + why)

    # call_rename ----------------------------------------------------------------------------

    def fits(self, node: cst.Call, rule: Rule) -> bool:
        spec = rule.spec
        if has_star(node):
            return False
        if spec.max_positional is not None and len(positional(node)) > spec.max_positional:
            return False
        if spec.keywords is not None:
            if any(a.keyword is not None and a.keyword.value not in spec.keywords for a in node.args):
                return False
        return True

    def renamable(self, node: cst.Call, rule: Rule) -> bool:
        """Whether a call_rename rule rewrites this call (memoised: other calls' decisions ask)."""
        key = id(node)
        if key not in self._renamable_cache:
            self._renamable_cache[key] = False  # a call whose argument is the call itself: no
            ok = self.fits(node, rule)
            if ok and rule.spec.npu_argument:
                index = find_argument(node, rule.spec.npu_argument, rule.spec.npu_argument_position)
                ok = index is not None and self.holds_npu_object(node.args[index].value)
            self._renamable_cache[key] = ok
        return self._renamable_cache[key]

    def holds_npu_object(self, value: cst.BaseExpression, seen: Optional[Set[int]] = None) -> bool:
        """A call that a call_rename rule rewrites (or the NPU class itself), or a variable
        assigned nothing else."""
        if isinstance(value, cst.Call):
            if isinstance(value.func, cst.Name) and value.func.value in self.rules.npu_callees:
                return True
            qual = self.qual(value.func)
            rule = self.rules.rename.get(qual) if qual is not None else None
            return rule is not None and not self.suppressed(value, rule) and self.renamable(value, rule)
        values = self.values_of(value)
        if not values:
            return False
        seen = seen or set()
        if id(value) in seen:
            return False
        seen.add(id(value))
        return all(v is not None and self.holds_npu_object(v, seen) for v in values)

    # call_replace ---------------------------------------------------------------------------

    def _plan_replace(self, node: cst.Call, rule: Rule, plan: CallPlan) -> None:
        spec = rule.spec
        qual = self.qual(node.func) or ""
        given: Dict[str, int] = {}
        ok = not has_star(node)
        for i, arg in enumerate(node.args):
            if arg.keyword is not None:
                name = arg.keyword.value
            else:
                position = sum(1 for a in node.args[:i] if a.keyword is None)
                name = spec.args[position] if position < len(spec.args) else ""
            if not name or name not in spec.args or name in given:
                ok = False
            given[name] = i
        order = [given[name] for name in spec.args if name in given]
        if ok and len(order) != len(given):
            ok = False
        # Parameters are passed on by position: no gap before the last one given.
        if ok and any(name not in given for name in spec.args[: len(order)]):
            ok = False
        if spec.assign_to and id(node) not in self._statement_calls:
            self._unfit(node, rule, qual, " It is not a statement of its own, so it is left as it is.")
            return
        if not ok:
            self._unfit(node, rule, qual)
            return
        plan.replace = rule
        plan.replace_args = tuple(order)
        self._rewritten_refs.add(id(node.func))
        if spec.assign_to:
            statement = self._statement_calls[id(node)]
            where = self._lifetime() if spec.cleanup else "block"
            if where == "report":
                plan.replace = None
                self._rewritten_refs.discard(id(node.func))
                finding = self.rules.codemod_findings.get(spec.unknown_finding)
                if finding is not None:
                    self._reported_refs.add(id(node.func))
                    self.finding(finding, node, qual,
                                 f"`{qual}(...)` was not rewritten to `{spec.to}()`: it runs in a loop, so the NPU"
                                 " system would be started more than once; start it once where the program"
                                 " starts (the main block) and shut it down at the end.")
                return
            self.plans.statements[id(statement)] = rule
            if where == "block":
                self.plans.cleanups.setdefault(self._block, []).append((rule, statement))
            else:
                # The block ends before the program does (a helper, an `if`): shut down at exit.
                # atexit runs the last registration first, so the cleanups are registered reversed.
                line = self._call_path[-1]
                registrations = [_atexit_registration(c) for c in reversed(spec.cleanup)]
                self.plans.after_lines[line] = (rule, registrations)
                self.plans.needs_atexit = rule

    def _lifetime(self) -> str:
        """Where the cleanup of a start-up statement goes so that start-up and shut-down bracket
        the program: "block" (the end of its own block: the module, the main block, or the body
        of the function the main block runs), "atexit" (registered right after it), or "report"
        (it is in a loop)."""
        path = self._call_path
        owners = [self._compound[i] for i in path[:-1] if i in self._compound]
        innermost_function = max((i for i, o in enumerate(owners) if isinstance(o, (cst.FunctionDef, cst.ClassDef))),
                                 default=-1)
        if any(isinstance(o, (cst.For, cst.While)) for o in owners[innermost_function + 1:]):
            return "report"
        if not owners:
            return "block"  # module level
        if len(owners) == 1:
            owner = owners[0]
            if owner is self._main_guard:
                return "block"
            if (isinstance(owner, cst.FunctionDef) and owner.name.value in self._main_functions
                    and not _returns_early(owner)):
                return "block"
        return "atexit"

    def _find_main_functions(self) -> None:
        """Names of the functions the main block runs: `main()`, `tf.app.run(main)`,
        `app.run(main=main)`, `tf.app.run()` (which runs `main`)."""
        guard = self._main_guard
        if guard is None or not isinstance(guard.body, cst.IndentedBlock):
            return
        for stmt in guard.body.body:
            if not isinstance(stmt, cst.SimpleStatementLine):
                continue
            for small in stmt.body:
                value = small.value if isinstance(small, (cst.Expr, cst.Assign)) else None
                if not isinstance(value, cst.Call):
                    continue
                func = value.func
                if isinstance(func, cst.Name):
                    self._main_functions.add(func.value)
                if isinstance(func, (cst.Name, cst.Attribute)) and (dotted_name(func) or "").endswith("app.run"):
                    given = [a.value for a in value.args if a.keyword is None or a.keyword.value == "main"]
                    if not value.args:
                        self._main_functions.add("main")
                    for g in given[:1]:
                        if isinstance(g, cst.Name):
                            self._main_functions.add(g.value)

    # call_config ----------------------------------------------------------------------------

    def _skip_config(self, rule: Rule) -> bool:
        marker = rule.spec.unless_file_contains
        return bool(marker) and marker in self.ctx.text

    def _plan_config(self, node: cst.Call, rule: Rule, plan: CallPlan) -> None:
        spec = rule.spec
        index = find_argument(node, spec.keyword, spec.position)
        if index is None:
            if has_star(node) or (spec.position is not None and len(positional(node)) > spec.position):
                self._unfit(node, rule, self.qual(node.func) or "")
                return
        elif self.is_configured(node.args[index].value):
            return
        plan.config = rule
        plan.config_arg = index

    def is_configured(self, value: cst.BaseExpression, seen: Optional[Set[int]] = None) -> bool:
        """Already wrapped by one of the config rules' functions (here or where it was built)."""
        if isinstance(value, cst.Call):
            func = value.func
            return isinstance(func, cst.Name) and func.value in self.rules.config_wrappers
        values = self.values_of(value)
        if not values:
            return False
        seen = seen or set()
        if id(value) in seen:
            return False
        seen.add(id(value))
        return all(v is not None and self.is_configured(v, seen) for v in values)

    # argument -------------------------------------------------------------------------------

    def _literal_target(self, rule: Rule, node: cst.BaseExpression) -> Optional[List[cst.SimpleString]]:
        """The string literals an argument value consists of (through conditional expressions),
        or None when it is anything else."""
        if isinstance(node, cst.SimpleString):
            return [node] if string_value(node) is not None else None
        if isinstance(node, cst.IfExp):
            body = self._literal_target(rule, node.body)
            orelse = self._literal_target(rule, node.orelse)
            return body + orelse if body is not None and orelse is not None else None
        return None

    def _matches(self, rule: Rule, value: str) -> bool:
        spec = rule.spec
        if spec.pattern:
            return re.fullmatch(spec.pattern, value) is not None
        return value == spec.literal

    def _rewrite_literals(self, rule: Rule, literals: Iterable[cst.SimpleString],
                          path: Optional[Tuple[int, ...]] = None) -> None:
        """Plan the literals that match; `path`: their statements (default: the call's)."""
        for literal in literals:
            value = string_value(literal)
            if value is not None and self._matches(rule, value) and value != rule.spec.to:
                self.plans.literals[id(literal)] = (rule, rule.spec.to)
                self.plans.hot.update(self._call_path if path is None else path)

    def _plan_argument(self, node: cst.Call, rule: Rule) -> None:
        spec = rule.spec
        index = find_argument(node, spec.keyword, spec.position)
        if index is None:
            return
        value = node.args[index].value
        literals = self._literal_target(rule, value)
        if literals is not None:
            self._rewrite_literals(rule, literals)
            return
        bound = self.values_of(value)
        if bound and all(v is not None for v in bound):
            parts = [self._literal_target(rule, v) for v in bound]
            if all(p is not None for p in parts):
                for v, p in zip(bound, parts):
                    self._rewrite_literals(rule, p, self.value_paths.get(id(v), ()))
                return
        if (
            isinstance(value, cst.Attribute)
            and value.attr.value in spec.options
            and value.attr.value in self.argparse_options
        ):
            return  # `args.device_target`: its argparse default is rewritten
        if spec.unknown_finding:
            source = self.source(value)
            if spec.unknown_contains and spec.unknown_contains.lower() not in source.lower():
                return
            self.codemod_finding(spec.unknown_finding, value, api=source)

    def _plan_argparse(self, node: cst.Call) -> None:
        from .torch import option_names  # the torch pass's reading of add_argument options

        for name in option_names(node):
            rule = self.rules.argparse_options.get(name)
            if rule is None or self.suppressed(node, rule):
                continue
            for arg in node.args:
                if arg.keyword is not None and arg.keyword.value == "default":
                    literals = self._literal_target(rule, arg.value)
                    if literals is not None:
                        self._rewrite_literals(rule, literals)

    # add_keyword ----------------------------------------------------------------------------

    def _plan_keyword(self, node: cst.Call, rule: Rule, plan: CallPlan, api: str) -> None:
        spec = rule.spec
        index = find_argument(node, spec.keyword, spec.position)
        if index is None:
            if has_star(node):
                self.codemod_finding(spec.unknown_finding, node, api)
            else:
                plan.add_keywords.append(rule)
            return
        given = self.source(node.args[index].value)
        if given != spec.value and spec.replace and not has_star(node):
            plan.set_keywords.append((rule, index))
        elif given != spec.value:
            self.codemod_finding(
                spec.unknown_finding, node.args[index].value, api,
                f"`{api}` is called with `{spec.keyword}={given}` where the NPU needs `{spec.keyword}={spec.value}`;"
                " the value was chosen explicitly, so it is left to you.",
            )

    def _plan_method_keyword(self, node: cst.Call, rule: Rule, plan: CallPlan) -> None:
        method = node.func.attr.value  # type: ignore[union-attr]
        receiver = node.func.value  # type: ignore[union-attr]
        if self.is_receiver(receiver, rule):
            self._plan_keyword(node, rule, plan, f".{method}()")
        elif rule.spec.unknown_finding and not self.suppressed(node, rule):
            self.codemod_finding(rule.spec.unknown_finding, node, api=f"{self.source(receiver)}.{method}()")

    def is_receiver(self, node: cst.BaseExpression, rule: Rule, seen: Optional[Set[Tuple[int, str]]] = None) -> bool:
        """Whether `node` is certainly built by one of the rule's `receivers` (then any of its
        `receiver_methods`/`methods`), directly or through variables assigned nothing else."""
        spec = rule.spec
        if isinstance(node, cst.Call):
            qual = self.qual(node.func)
            if qual is not None:
                return qual in spec.receivers
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value in spec.receiver_methods + spec.methods:
                return self.is_receiver(func.value, rule, seen)
            return False
        values = self.values_of(node)
        if not values:
            return False
        key = (self.scope, self.source(node))
        seen = seen or set()
        if key in seen:
            return True  # `ds = ds.map(f)`: decided by its other assignments
        seen.add(key)
        return all(v is not None and self.is_receiver(v, rule, seen) for v in values)

    # -- the end -----------------------------------------------------------------------------------

    def leave_Module(self, original_node: cst.Module) -> None:
        self._find_main_functions()
        for node, scope, block, path in self._calls:
            self.scopes.append(scope)
            self._block, self._call_path = block, path
            self._plan_call(node)
            self.scopes.pop()
        for reference, scope in self._references:  # after the calls: which callees were rewritten
            self.scopes.append(scope)
            self._reference(reference)
            self.scopes.pop()
        self._plan_import_removals()
        self._plan_entry_setups()

    def _plan_import_removals(self) -> None:
        for node, module, rule, alias_index in self._imports:
            prefix = next(m for m in rule.spec.modules if module == m or module.startswith(m + "."))
            seen, rewritten = self._module_refs.get(prefix, [0, 0])
            if seen == 0 or seen != rewritten or self.suppressed(node, rule):
                continue
            self.plans.hot.update(self._import_paths.get(id(node), ()))
            _rule, aliases = self.plans.removed_imports.setdefault(id(node), (rule, set()))
            if alias_index is not None:
                aliases.add(alias_index)

    def _plan_entry_setups(self) -> None:
        for rule in self.rules.entry_setup:
            spec = rule.spec
            if not any(q == u or q.startswith(u + ".") for q in self._used for u in spec.uses):
                continue
            trigger = next((self._called_methods[m] for m in spec.methods if m in self._called_methods), None)
            if trigger is None:
                continue
            if any(name in self._called for name in spec.skip_if_called):
                continue
            if self._main_guard is None:
                self.codemod_finding(spec.unknown_finding, trigger, api=f".{trigger.func.attr.value}()")  # type: ignore[union-attr]
                continue
            if self.suppressed(self._main_guard, rule):
                continue
            self.plans.entry_setups.append((rule, self._main_guard))
            self.plans.needs_import = True


# ---------------------------------------------------------------------------- pass 3: apply


class Applier(cst.CSTTransformer):
    def __init__(self, ctx: Context, tree: cst.Module, plans: Plans) -> None:
        super().__init__()
        self.ctx = ctx
        self.tree = tree
        self.plans = plans
        self._module = None if tree is ctx.module else tree
        self._drop: Set[int] = set()  # ids of updated statement lines to drop
        self._after: Dict[int, Tuple[Rule, List[str]]] = {}  # updated statement line -> lines to add

    def on_visit(self, node: cst.CSTNode) -> bool:
        # Most statements need nothing: not visiting them keeps the pass cheap.
        if isinstance(node, cst.BaseStatement) and id(node) not in self.plans.hot:
            return False
        return super().on_visit(node)

    def edit(self, rule: Rule, node: cst.CSTNode, before: str, after: str, message: str = "") -> None:
        message = message or rule.render_message(before=before, after=after)
        self.ctx.edit(rule, node, message, before, after, module=self._module)

    def code(self, node: cst.CSTNode) -> str:
        return self.tree.code_for_node(node)

    # -- calls -------------------------------------------------------------------------------------

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        plan = self.plans.calls.get(id(original_node))
        if plan is None:
            return updated_node
        new = updated_node
        if plan.replace is not None:
            spec = plan.replace.spec
            values = [new.args[i].value for i in plan.replace_args]
            values += [cst.parse_expression(e) for e in spec.extra_args]
            replaced = new_call(spec.to, values)
            replaced = replaced.with_changes(lpar=new.lpar, rpar=new.rpar)
            after = _code(replaced)
            if plan.replace.spec.assign_to:
                after = f"{plan.replace.spec.assign_to} = {after}"
            self.edit(plan.replace, original_node, self.code(original_node), after)
            new = replaced
        if plan.rename is not None:
            func = cst.parse_expression(plan.rename.spec.to)
            self.edit(plan.rename, original_node.func, self.code(original_node.func), plan.rename.spec.to)
            new = new.with_changes(func=func)
        if plan.config is not None:
            new = self._configure(original_node, new, plan)
        for rule, index in plan.set_keywords:
            spec = rule.spec
            args = list(new.args)
            args[index] = args[index].with_changes(value=cst.parse_expression(spec.value))
            new = new.with_changes(args=args)
            arg = original_node.args[index]
            prefix = f"{spec.keyword}=" if arg.keyword is not None else ""
            self.edit(rule, arg.value, prefix + self.code(arg.value), prefix + spec.value)
        for rule in plan.add_keywords:
            spec = rule.spec
            new = add_keyword_argument(new, spec.keyword, cst.parse_expression(spec.value))
            self.edit(rule, original_node, self.code(original_node.func) + "(...)",
                      f"{self.code(original_node.func)}(..., {spec.keyword}={spec.value})")
        return new

    def _configure(self, original: cst.Call, call: cst.Call, plan: CallPlan) -> cst.Call:
        rule = plan.config
        spec = rule.spec
        index = plan.config_arg
        if index is None:
            added = new_call(spec.to, [])
            self.edit(rule, original, f"{self.code(original.func)}(...)",
                      f"{self.code(original.func)}(..., {spec.keyword}={_code(added)})")
            return add_keyword_argument(call, spec.keyword, added)
        arg = call.args[index]
        before = self.code(original.args[index].value)
        if is_none(arg.value):
            wrapped = new_call(spec.to, [])
            after = f"{spec.to}()"
        else:
            wrapped = new_call(spec.to, [], [(spec.wrap_keyword, arg.value)])
            after = f"{spec.to}({spec.wrap_keyword}={before})"
        self.edit(rule, original.args[index].value, before, after)
        args = list(call.args)
        args[index] = arg.with_changes(value=wrapped)
        return call.with_changes(args=args)

    def leave_SimpleString(self, original_node: cst.SimpleString, updated_node: cst.SimpleString) -> cst.SimpleString:
        planned = self.plans.literals.get(id(original_node))
        if planned is None:
            return updated_node
        rule, body = planned
        new = with_body(updated_node, body)
        self.edit(rule, original_node, self.code(original_node), _code(new))
        return new

    # -- statements --------------------------------------------------------------------------------

    def leave_Expr(self, original_node: cst.Expr, updated_node: cst.Expr) -> cst.BaseSmallStatement:
        rule = self.plans.statements.get(id(original_node))
        if rule is None:
            return updated_node
        target = cst.parse_expression(rule.spec.assign_to)
        return cst.Assign(
            targets=[cst.AssignTarget(target=target)],
            value=updated_node.value,
            semicolon=updated_node.semicolon,
        )

    def leave_Import(self, original_node: cst.Import, updated_node: cst.Import) -> cst.Import:
        planned = self.plans.removed_imports.get(id(original_node))
        if planned is None:
            return updated_node
        rule, aliases = planned
        for i in sorted(aliases):
            alias = original_node.names[i]
            self.edit(rule, alias, f"import {self.code(alias.with_changes(comma=cst.MaybeSentinel.DEFAULT))}", "")
        kept = [a for i, a in enumerate(updated_node.names) if i not in aliases]
        if not kept:
            return updated_node  # the whole statement goes: leave_SimpleStatementLine
        kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return updated_node.with_changes(names=kept)

    def leave_ImportFrom(self, original_node: cst.ImportFrom, updated_node: cst.ImportFrom) -> cst.ImportFrom:
        planned = self.plans.removed_imports.get(id(original_node))
        if planned is not None:
            self.edit(planned[0], original_node, self.code(original_node.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)), "")
        return updated_node

    def _removed(self, statement: cst.BaseSmallStatement) -> bool:
        """Whether a whole import statement of the original tree goes."""
        planned = self.plans.removed_imports.get(id(statement))
        if planned is None:
            return False
        if isinstance(statement, cst.Import):
            return len(planned[1]) == len(statement.names)
        return True

    def leave_SimpleStatementLine(self, original_node: cst.SimpleStatementLine,
                                  updated_node: cst.SimpleStatementLine) -> cst.SimpleStatementLine:
        after = self.plans.after_lines.get(id(original_node))
        if after is not None:
            self._after[id(updated_node)] = after
            self.edit(after[0], original_node, "", "; ".join(after[1]),
                      f"added `{'; '.join(after[1])}` after it: the NPU is shut down when the program exits,"
                      " not when this block ends")
        if not self.plans.removed_imports:
            return updated_node
        body = [u for o, u in zip(original_node.body, updated_node.body) if not self._removed(o)]
        if len(body) == len(updated_node.body):
            return updated_node
        if not body:
            self._drop.add(id(updated_node))
            return updated_node
        body[-1] = body[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
        return updated_node.with_changes(body=body)

    # -- blocks ------------------------------------------------------------------------------------

    def _finish_block(self, key: int, body: Sequence[cst.BaseStatement]) -> Tuple[List[cst.BaseStatement], List]:
        """The block's statements without the dropped lines (their comments move to the next
        statement), with planned cleanups at its end (before a final `return`)."""
        out: List[cst.BaseStatement] = []
        pending_lines: List[cst.EmptyLine] = []
        for stmt in body:
            if id(stmt) in self._drop:
                pending_lines.extend(stmt.leading_lines)
                continue
            if pending_lines:
                stmt = stmt.with_changes(leading_lines=[*pending_lines, *stmt.leading_lines])
                pending_lines = []
            out.append(stmt)
            if id(stmt) in self._after:
                out.extend(cst.parse_statement(line) for line in self._after[id(stmt)][1])
        for rule, anchor in self.plans.cleanups.get(key, ()):
            new_lines = [cst.parse_statement(s) for s in rule.spec.cleanup]
            insert_at = len(out)
            if out and isinstance(out[-1], cst.SimpleStatementLine) and isinstance(out[-1].body[0], cst.Return):
                insert_at -= 1
            out[insert_at:insert_at] = new_lines
            after = "; ".join(rule.spec.cleanup)
            self.edit(rule, anchor, "", after,
                      f"added `{after}` at the end of the block: it releases what `{rule.spec.to}()` set up")
        return out, pending_lines

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock) -> cst.IndentedBlock:
        if not self._drop and not self._after and id(original_node) not in self.plans.cleanups:
            return updated_node
        body, pending = self._finish_block(id(original_node), updated_node.body)
        if not body:
            body = [cst.SimpleStatementLine(body=[cst.Pass()], leading_lines=pending)]
            pending = []
        return updated_node.with_changes(body=body, footer=[*pending, *updated_node.footer])

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        body, pending = self._finish_block(MODULE_SCOPE, updated_node.body)
        new = updated_node.with_changes(body=body, footer=[*pending, *updated_node.footer])
        for rule, guard in self.plans.entry_setups:
            new = self._entry_setup(new, rule, guard)
        return new

    def _entry_setup(self, module: cst.Module, rule: Rule, original_guard: cst.If) -> cst.Module:
        spec = rule.spec
        body = list(module.body)
        for i, stmt in enumerate(body):
            if is_main_guard(stmt) and isinstance(stmt.body, cst.IndentedBlock):
                block = stmt.body
                lines = list(block.body)
                lines.insert(0, cst.parse_statement(spec.setup))
                lines.append(cst.parse_statement(spec.teardown))
                body[i] = stmt.with_changes(body=block.with_changes(body=lines))
                self.edit(rule, original_guard.test, "", f"{spec.setup} ... {spec.teardown}")
                return module.with_changes(body=body)
        return module


def _code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


def _atexit_registration(statement: str) -> str:
    """`f(a, b)` -> `atexit.register(f, a, b)`."""
    call = cst.parse_expression(statement)
    assert isinstance(call, cst.Call)
    parts = [_code(call.func)] + [_code(a.value) for a in call.args]
    return f"atexit.register({', '.join(parts)})"


def _returns_early(function: cst.FunctionDef) -> bool:
    """A `return` anywhere but as the last statement of the function's own body."""
    found: List[cst.Return] = []

    class Returns(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is function

        def visit_Lambda(self, node: cst.Lambda) -> bool:
            return False

        def visit_ClassDef(self, node: cst.ClassDef) -> bool:
            return False

        def visit_Return(self, node: cst.Return) -> None:
            found.append(node)

    function.visit(Returns())
    body = function.body.body if isinstance(function.body, cst.IndentedBlock) else ()
    last = body[-1] if body else None
    final = (last.body[0] if isinstance(last, cst.SimpleStatementLine) and isinstance(last.body[0], cst.Return)
             else None)
    return any(r is not final for r in found)


# ---------------------------------------------------------------------------- the import to add


def _imports_something(stmt: cst.BaseStatement) -> bool:
    """A top-level statement that imports (not `from __future__`), directly or in a try/if."""
    if isinstance(stmt, cst.SimpleStatementLine):
        for s in stmt.body:
            if isinstance(s, cst.Import):
                return True
            if isinstance(s, cst.ImportFrom) and not (s.module is not None and dotted_name(s.module) == "__future__"):
                return True
        return False
    if isinstance(stmt, (cst.Try, cst.If)) and isinstance(stmt.body, cst.IndentedBlock):
        return any(_imports_something(s) for s in stmt.body.body)
    return False


def _is_docstring_or_future(stmt: cst.BaseStatement) -> bool:
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return False
    s = stmt.body[0]
    if isinstance(s, cst.Expr) and isinstance(s.value, (cst.SimpleString, cst.ConcatenatedString)):
        return True
    return isinstance(s, cst.ImportFrom) and s.module is not None and dotted_name(s.module) == "__future__"


def already_imported(ctx: Context, module: str) -> bool:
    for node in ctx.imports.import_nodes:
        if isinstance(node, cst.ImportFrom) and node.module is not None and dotted_name(node.module) == module:
            return True
        if isinstance(node, cst.Import) and any(dotted_name(a.name) == module for a in node.names):
            return True
    return False


def add_framework_import(module: cst.Module, ctx: Context, rule: Rule) -> cst.Module:
    """Insert the rule's import before the first top-level import (after the docstring and the
    `from __future__` imports), so that names the file imports itself win over a star import's."""
    names = rule.spec.names if rule.spec is not None else ()
    statement = f"from {rule.to} import {', '.join(names)}" if names else f"import {rule.to}"
    new_line = cst.parse_statement(statement)
    body = list(module.body)
    index = next((i for i, s in enumerate(body) if _imports_something(s)), None)
    if index is None:
        index = 0
        while index < len(body) and _is_docstring_or_future(body[index]):
            index += 1
    if index < len(body):
        anchor = body[index]
        new_line = new_line.with_changes(leading_lines=anchor.leading_lines)
        body[index] = anchor.with_changes(leading_lines=())
    body.insert(index, new_line)
    new_module = module.with_changes(body=body)
    ctx.edit(rule, new_module.body[index], rule.render_message(), "", statement, module=new_module)
    return new_module


def add_plain_import(module: cst.Module, ctx: Context, rule: Rule, name: str) -> cst.Module:
    """`import <name>` after the leading `from npu_bridge...`/first import of the module."""
    statement = f"import {name}"
    body = list(module.body)
    index = next((i for i, s in enumerate(body) if _imports_something(s)), None)
    if index is None:
        index = 0
        while index < len(body) and _is_docstring_or_future(body[index]):
            index += 1
    elif isinstance(body[index], cst.SimpleStatementLine):
        index += 1  # after the first import line (the TF Adapter's, when it was just added)
    body.insert(index, cst.parse_statement(statement))
    new_module = module.with_changes(body=body)
    ctx.edit(rule, new_module.body[index], f"added `{statement}`: it registers the NPU shut-down at exit", "",
             statement, module=new_module)
    return new_module


# ---------------------------------------------------------------------------- entry point


def _plan(ctx: Context, tree: cst.Module, rules: FrameworkRules, canonical: Canonical, report: bool,
          keep: Optional[Set[int]] = None) -> Plans:
    planner = Planner(ctx, tree, rules, canonical, report)
    planner.keep = keep or set()
    walk(tree, planner)  # = tree.visit(planner), without copying the tree
    return planner.plans


def apply_framework_rules(module: cst.Module, ctx: Context, framework: str, canonical: Canonical,
                          keep: Optional[Set[int]] = None) -> cst.Module:
    """Apply `framework`'s rules to `module` (the tree as the earlier codemods left it).
    `keep`: ids of statements (of `module`) whose calls' arguments are left as they are."""
    if not ctx.framework_rules_may_apply(framework):
        return module  # no rule can match: spare the planner's walks
    rules = FrameworkRules(ctx.rules.framework_rules.get(framework, ()))
    if module is not ctx.module:
        # An earlier pass (torch, in a file that uses both) changed the tree, maybe its line
        # numbers: the findings come from the original tree, the plans from this one.
        _plan(ctx, ctx.module, rules, canonical, report=True, keep=keep)
    plans = _plan(ctx, module, rules, canonical, report=module is ctx.module, keep=keep)
    if not (plans.calls or plans.literals or plans.statements or plans.removed_imports or plans.entry_setups
            or plans.after_lines):
        return module
    new_module = module.visit(Applier(ctx, module, plans))
    add_import = rules.add_import
    if (
        plans.needs_import
        and add_import is not None
        and ctx.options.add_import
        and not already_imported(ctx, add_import.to)
    ):
        new_module = add_framework_import(new_module, ctx, add_import)
    if plans.needs_atexit is not None and ctx.options.add_import and not already_imported(ctx, "atexit"):
        new_module = add_plain_import(new_module, ctx, plans.needs_atexit, "atexit")
    return new_module
