"""The framework rules' first pass: `Planner` records what every variable is assigned and every
reference, call and import, then decides at the end of the module, on the unchanged tree, what
happens to each (the decisions of each kind are in calls.py, arguments.py and program.py)."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Set, Tuple, Union, cast

import libcst as cst

from ...context import Context
from ...fast_visitor import hooks_of
from ...imports import dotted_name
from ...kinds.call_config import CallConfigSpec
from ...kinds.call_rename import CallRenameSpec
from ...kinds.call_replace import CallReplaceSpec
from ...kinds.finding import FindingSpec
from ...kinds.remove_import import RemoveImportSpec
from ...rules import Rule
from ..bindings import MODULE_SCOPE, Bindings
from ..strings import string_value
from ..syntax import is_main_guard, is_none
from .apply import CallPlan, Plans
from .arguments import ArgumentPlanning
from .calls import CallPlanning
from .index import FRAMEWORK_KIND_KEYS, Canonical, FrameworkRules
from .program import ProgramPlanning
from ...codes import applies
from ...model import Severity
from ..findings import OPTIONAL_IMPORT_NOTE, catches_import_error

# Planner class -> node class -> (1: a compound statement, 2: a simple statement line, 0: other;
# its visit_<Node>, its leave_<Node>): Planner.on_visit/on_leave, called on every node.
_NODE_PLANS: Dict[type, Dict[type, Tuple[int, Optional[Callable[..., Any]], Optional[Callable[..., Any]]]]] = {}


def _node_plan(planner_cls: type, node_cls: type) -> Tuple[int, Optional[Callable[..., Any]], Optional[Callable[..., Any]]]:
    kind = (1 if issubclass(node_cls, cst.BaseCompoundStatement)
            else 2 if issubclass(node_cls, cst.SimpleStatementLine) else 0)
    plan = _NODE_PLANS.setdefault(planner_cls, {})[node_cls] = (kind, *hooks_of(planner_cls, node_cls))
    return plan


@applies(*FRAMEWORK_KIND_KEYS)
class Planner(CallPlanning, ArgumentPlanning, ProgramPlanning, Bindings):
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
        self._named_calls: Dict[int, str] = {}  # callee reference -> the string its call's first argument is
        self._reported_once: Set[str] = set()  # listed names of once_per_file findings reported
        self._statement_calls: Dict[int, cst.Expr] = {}
        self._blocks: List[int] = [MODULE_SCOPE]
        self._renamable_cache: Dict[int, bool] = {}
        # remove_import bookkeeping: rule -> [references seen, references rewritten]
        self._module_refs: Dict[str, List[int]] = {}
        self._imports: List[Tuple[cst.CSTNode, str, Rule, Optional[int], int]] = []  # ... and its scope
        self._scope_refs: Dict[Tuple[str, int], List[int]] = {}  # (module, scope) -> [seen, rewritten]
        self._kept_refs: Dict[str, cst.CSTNode] = {}  # module -> its first reference not rewritten
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
        # the statements of `try:` bodies whose handlers catch ImportError: an import there is optional
        self._optional_statements: Set[int] = set()
        self._node_plans = _NODE_PLANS.setdefault(type(self), {})

    # -- helpers -------------------------------------------------------------------------------

    def qual(self, node: cst.BaseExpression) -> Optional[str]:
        q = self.ctx.imports.resolve(node)
        if q is None and isinstance(node, cst.Attribute):
            return self._instance_method(node)
        return self.canonical(q) if q is not None else None

    def _instance_method(self, node: cst.Attribute) -> Optional[str]:
        """`sv.managed_session` where every value of `sv` is a `tf.train.Supervisor(...)` call (or
        `tf.train.Supervisor(...).managed_session`): `tensorflow.train.Supervisor.managed_session`,
        for the methods a call_config rule names (a session's config is set where it is made)."""
        receiver = node.value
        calls = [receiver] if isinstance(receiver, cst.Call) else (
            self.values_of(receiver) or [] if isinstance(receiver, cst.Name) else [])
        classes = {self._imported(c.func) if isinstance(c, cst.Call) else None for c in calls}
        if len(classes) != 1 or None in classes:
            return None
        method = f"{classes.pop()}.{node.attr.value}"
        return method if method in self.rules.config else None

    def _imported(self, node: cst.BaseExpression) -> Optional[str]:
        q = self.ctx.imports.resolve(node)  # (not self.qual: `x = x.f()` would never end)
        return self.canonical(q) if q is not None else None

    def finding(self, rule: Rule, node: cst.CSTNode, api: str, message: Optional[str] = None,
                severity: Optional[Severity] = None) -> None:
        if not self.report:
            return
        self.ctx.finding(rule, node, api=api, message=message, severity=severity,
                         module=None if self._original_tree else self.tree)

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

    def assigned_only(self, variable: cst.BaseExpression,
                      test: Callable[[cst.BaseExpression, Optional[Set[int]]], bool],
                      seen: Optional[Set[int]] = None) -> bool:
        """Whether a variable is assigned only values that pass `test` (False when nothing known
        is assigned to it, or when the trace comes back to it)."""
        values = self.values_of(variable)
        if not values:
            return False
        seen = seen or set()
        if id(variable) in seen:
            return False
        seen.add(id(variable))
        return all(v is not None and test(v, seen) for v in values)

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

    def visit_Try(self, node: cst.Try) -> None:
        if any(catches_import_error(h) for h in node.handlers):
            self._optional_statements.update(id(s) for s in node.body.body)

    def _import_finding(self, module: str, node: cst.CSTNode) -> bool:
        rule = FrameworkRules.by_prefix(self.rules.finding_import, module)
        if rule is None:
            return False
        if self._optional_statements.isdisjoint(self.path):
            self.finding(rule, node, api=module)
        else:
            # `try: from keras import backend as K` / `except ImportError: have_keras = False`
            # (edward 1.3.5 util/graphs.py): the code runs without it, as findings.py reports an
            # optional import of a CUDA-only library
            self.finding(rule, node, api=module, message=rule.render_message(api=module) + OPTIONAL_IMPORT_NOTE,
                         severity=Severity.INFO)
        return True

    def _track_import(self, node: cst.CSTNode, module: str, alias_index: Optional[int]) -> None:
        for rule in self.rules.remove_import:
            if any(module == m or module.startswith(m + ".") for m in rule.spec_of(RemoveImportSpec).modules):
                self._imports.append((node, module, rule, alias_index, self.scope))

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
            for module in rule.spec_of(RemoveImportSpec).modules:
                if qual == module or qual.startswith(module + "."):
                    for counts in (self._module_refs.setdefault(module, [0, 0]),
                                   self._scope_refs.setdefault((module, self.scope), [0, 0])):
                        counts[0] += 1
                        counts[1] += id(node) in self._rewritten_refs
                    if id(node) not in self._rewritten_refs:
                        self._kept_refs.setdefault(module, node)
        if id(node) in self._rewritten_refs or id(node) in self._reported_refs:
            return
        found = FrameworkRules.listed_prefix(self.rules.finding_api, qual)
        if found is not None:
            listed, rule = found
            if id(node) in self._named_calls and self._named_calls[id(node)].startswith(FindingSpec.of(rule).unless_named or ("\0",)):
                return  # `ops.Custom("aclnnDenseLightningIndexerGradKLLoss", ...)`: Ascend's own operator
            if FindingSpec.of(rule).once_per_file:
                if listed in self._reported_once:
                    return
                self._reported_once.add(listed)
            self.finding(rule, node, api=qual)

    # -- statements and blocks -----------------------------------------------------------------

    def visit_Expr(self, node: cst.Expr) -> None:
        if isinstance(node.value, cst.Call):
            self._statement_calls[id(node.value)] = node

    # (its on_visit, and ScopeTracker's on_visit/on_leave, do nothing for whitespace, comments and
    # one-token nodes: fast_visitor need not walk those)
    LAYOUT_UNSEEN = True

    def on_visit(self, node: cst.CSTNode) -> bool:
        # Called on every node: what ScopeTracker.on_visit and fast_visitor.own_visit do (the
        # statement path, the hook), with the statement class and both hooks looked up once per
        # node class (isinstance of libcst's abstract classes goes through the ABC machinery;
        # the three calls per node that did it were a fifth of the walk).
        plan = self._node_plans.get(type(node)) or _node_plan(type(self), type(node))
        kind = plan[0]
        if kind:
            key = id(node)
            self.path.append(key)
            if kind == 1:
                self._compound[key] = cast(cst.BaseCompoundStatement, node)
            else:
                self._statement_lines[key] = cast(cst.SimpleStatementLine, node)
        visit = plan[1]
        return visit is None or visit(self, node) is not False

    def on_leave(self, original_node: cst.CSTNode) -> None:
        # (ScopeTracker.on_leave, as on_visit)
        plan = self._node_plans.get(type(original_node)) or _node_plan(type(self), type(original_node))
        leave = plan[2]
        if leave is not None:
            leave(self, original_node)
        if plan[0]:
            self.path.pop()

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
        if node.args and node.args[0].keyword is None and isinstance(node.args[0].value, cst.SimpleString):
            self._named_calls[id(func)] = string_value(node.args[0].value) or ""

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
            keywords = FindingSpec.of(rule).keywords
            if not keywords or given & set(keywords):
                self.finding(rule, node, api=qual)

    def _unfit(self, node: cst.Call, rule: Rule, qual: str, why: str = "") -> None:
        """Report a call the rule cannot rewrite (its arguments do not fit the NPU API)."""
        spec = rule.call
        finding = self.rules.codemod_findings.get(spec.unknown_finding)
        if finding is None:
            return
        self._reported_refs.add(id(node.func))
        # (a call_rename, call_replace or call_config rule: each has a `to`)
        to = spec.to if isinstance(spec, (CallRenameSpec, CallReplaceSpec, CallConfigSpec)) else ""
        self.finding(finding, node, qual, finding.render_message(api=qual, to=to) + why)

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
        self._plan_whole_modules()
        self._plan_import_removals()
        self._plan_entry_setups()
