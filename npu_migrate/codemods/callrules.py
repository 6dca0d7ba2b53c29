"""The framework rules (kinds/calls.py and its kinds) applied to a file: the call-level rewrites
and the findings that the TensorFlow and MindSpore codemods share.

`apply_framework_rules(module, ctx, framework, canonical)` runs two passes over the tree:

1. `Planner` (a `bindings.Bindings`) records what every variable is assigned (per function scope), so a
   value passed by name (`config=run_config`, `dataset.batch(...)`) can be traced to the call
   that built it; at the end of the module it decides, on the unchanged tree, what happens to
   each call, string literal, import and statement, and records the findings (so their
   positions are the file's own);
2. `Applier` (callrules_apply.py) carries the plans out (visiting only the statements that
   have one) and records the edits.

Deciding before changing anything keeps each decision a function of the original code: whether
`tf.estimator.Estimator(config=cfg)` may become `NPUEstimator` depends on the call that built
`cfg`, wherever it is in the file, and whether `import horovod.tensorflow as hvd` can go depends
on every use of `hvd` having been rewritten.
"""

from __future__ import annotations

import re
from typing import Callable, Dict, Iterable, List, Optional, Set, Tuple, Union

import libcst as cst

from ..context import Context
from ..imports import dotted_name
from ..rules import Rule
from ..walk import walk
from .strings import string_value
from .bindings import MODULE_SCOPE, Bindings
from .callrules_apply import (Applier, CallPlan, Plans, add_framework_import, add_plain_import, already_imported,
                              atexit_registration, returns_early)
from .syntax import find_argument, has_star, is_main_guard, is_none, option_names, positional

Canonical = Callable[[str], str]


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
                registrations = [atexit_registration(c) for c in reversed(spec.cleanup)]
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
                    and not returns_early(owner)):
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
