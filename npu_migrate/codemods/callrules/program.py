"""The Planner's decisions on the program around the calls: where it starts and ends (the main
block, the functions it runs, so a start-up call's shut-down brackets the program), the imports
that can go once every use is rewritten (remove_import), and the setup an entry script needs
(entry_setup)."""

from __future__ import annotations

import os
import re
from typing import List, Optional, Set, Tuple

import libcst as cst

from ...imports import dotted_name
from ...kinds.entry_setup import EntrySetupSpec
from ...kinds.remove_import import RemoveImportSpec
from ...project_values import module_path
from ...rules import Rule
from ..bindings import MODULE_SCOPE
from .apply import returns_early
from .state import PlannerState


class ProgramPlanning(PlannerState):
    """Mixed into Planner (planner.py), whose state these methods use."""

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

    def _plan_whole_modules(self) -> None:
        """The rewrites of what a remove_import rule's module provides go together in a file:
        all of them (and the import goes), or none. Horovod's `hvd.init()` -> `init_resource()`
        beside a kept `hvd.allreduce(t)` would start the NPU's collective communication and
        leave Horovod uninitialised for the call that still needs it (a value and the code that
        reads it move together). So when a reference to the module stays -- a call with no NPU
        counterpart, one whose arguments do not fit, a test of the name, or a module-level name
        another module of the run imports (Options.exported_names, project_values.py) -- every
        rewrite planned for the module's calls is dropped, and each dropped call is reported
        (the rule's `unknown_finding`) with why."""
        for rule in self.rules.remove_import:
            spec = rule.spec_of(RemoveImportSpec)
            for module in spec.modules:
                counts = self._module_refs.get(module)
                if counts is None or counts[1] == 0:
                    continue
                why = self._why_kept(module, counts)
                if why is not None:
                    self._drop_rewrites(module, rule, why)

    def _why_kept(self, module: str, counts: List[int]) -> Optional[str]:
        """Why `module`'s uses stay in this file (None: every one is rewritten). In a file that
        reads it through another module's name (ctx.whole_reads), that module keeps it."""
        for local, (bound_module, binding) in sorted(self.ctx.whole_reads.items()):
            if bound_module == module or bound_module.startswith(module + "."):
                where = os.path.relpath(binding, os.path.dirname(os.path.abspath(self.ctx.path)))
                return (f"`{local}` is {where}'s (from this file's folder), which keeps it on Horovod while"
                        " this file uses it")
        if counts[0] != counts[1]:
            kept = self._kept_refs[module]
            where = ""
            if self.report and self._original_tree:
                position = self.ctx.position(kept)
                where = f" at line {position.start.line}" if position is not None else ""
            return f"`{self.source(kept)}`{where} is kept"
        exported = {e.split("::", 2)[1]: e.split("::", 2)[2] for e in self.ctx.options.exported_names
                    if e.split("::", 1)[0] == self._module_path()}
        if not exported:
            return None
        for node, imported, _rule, alias_index, scope in self._imports:
            if scope != MODULE_SCOPE or not isinstance(node, cst.Import) or alias_index is None or not (
                    imported == module or imported.startswith(module + ".")):
                continue
            alias = node.names[alias_index]
            bound = (alias.asname.name.value if alias.asname is not None and isinstance(alias.asname.name, cst.Name)
                     else imported.split(".", 1)[0])
            if bound in exported:
                reader = os.path.relpath(exported[bound], os.path.dirname(os.path.abspath(self.ctx.path)))
                return f"{reader} (from this file's folder) imports its `{bound}` and uses it there"
        return None

    def _module_path(self) -> str:
        """This file's module as project_values names it: its absolute path without `.py` (a
        package's folder for its `__init__.py`)."""
        return module_path(self.ctx.path)

    def _drop_rewrites(self, module: str, rule: Rule, why: str) -> None:
        """Undo every rewrite planned for a call into `module` and report each (_plan_whole_modules)."""
        def into(q: Optional[str]) -> bool:
            return q is not None and (q == module or q.startswith(module + "."))

        def ours(r: Rule) -> bool:
            spec = r.call_spec
            return spec is not None and bool(spec.apis) and all(into(a) for a in spec.apis)

        plans = self.plans
        for node, scope, _block, _path in self._calls:
            plan = plans.calls.get(id(node))
            if plan is None:
                continue
            self.scopes.append(scope)
            qual = self.qual(node.func)
            self.scopes.pop()
            if not into(qual):
                continue
            del plans.calls[id(node)]
            self._rewritten_refs.discard(id(node.func))
            self._reported_refs.add(id(node.func))
            rewritten = next((r for r in (plan.replace, plan.rename, plan.config) if r is not None), None)
            to = getattr(rewritten.call_spec, "to", "") if rewritten is not None else ""
            self.codemod_finding(rule.call.unknown_finding, node, qual or "",
                                 f"`{qual}(...)` was not rewritten to `{to}`: `{module}` moves to the NPU whole or"
                                 f" not at all in a file, and {why}.")
        plans.statements = {k: r for k, r in plans.statements.items() if not ours(r)}
        plans.cleanups = {k: kept for k, v in plans.cleanups.items() if (kept := [e for e in v if not ours(e[0])])}
        plans.after_lines = {k: v for k, v in plans.after_lines.items() if not ours(v[0])}
        if plans.needs_atexit is not None and ours(plans.needs_atexit):
            plans.needs_atexit = None
        plans.needs_import = any(p.rename or p.replace or p.config for p in plans.calls.values())
        for (m, _scope), counts in self._scope_refs.items():
            if m == module:
                counts[1] = 0

    def _plan_import_removals(self) -> None:
        """An import goes when every use it binds was rewritten: the uses in its function (and
        the functions inside it) for an import in a function; for a module-level import, the
        uses outside the functions that import the module themselves."""
        local = {(self._prefix(rule, module), scope) for _n, module, rule, _a, scope in self._imports
                 if scope != MODULE_SCOPE}
        for node, module, rule, alias_index, scope in self._imports:
            prefix = self._prefix(rule, module)
            counts = [c for (m, s), c in self._scope_refs.items() if m == prefix and (
                self._within(s, scope) if scope != MODULE_SCOPE
                else not any(self._within(s, f) for p, f in local if p == prefix))]
            seen, rewritten = sum(c[0] for c in counts), sum(c[1] for c in counts)
            if seen == 0 or seen != rewritten or self.suppressed(node, rule):
                continue
            self.plans.hot.update(self._import_paths.get(id(node), ()))
            _rule, aliases = self.plans.removed_imports.setdefault(id(node), (rule, set()))
            if alias_index is not None:
                aliases.add(alias_index)

    @staticmethod
    def _prefix(rule: Rule, module: str) -> str:
        return next(m for m in rule.spec_of(RemoveImportSpec).modules if module == m or module.startswith(m + "."))

    def _within(self, scope: int, outer: int) -> bool:
        """Whether `scope` is `outer` or a scope inside it."""
        while True:
            if scope == outer:
                return True
            if scope == MODULE_SCOPE:
                return False
            scope = self.parents.get(scope, MODULE_SCOPE)

    def _plan_entry_setups(self) -> None:
        for rule in self.rules.entry_setup:
            spec = rule.spec_of(EntrySetupSpec)
            if not any(q == u or q.startswith(u + ".") for q in self._used for u in spec.uses):
                continue
            trigger = next((self._called_methods[m] for m in spec.methods if m in self._called_methods), None)
            if trigger is None:
                continue
            if any(name in self._called for name in spec.skip_if_called):
                continue
            if self._main_guard is None:
                # Only a report: where the receiver is certainly a model of `uses` (deepchem's own
                # KerasModel.fit is not Keras' fit).
                trigger = self._certain_trigger(spec)
                if trigger is not None:
                    self.codemod_finding(spec.unknown_finding, trigger, api=f".{trigger.func.attr.value}()")  # type: ignore[attr-defined]
                continue
            if self.suppressed(self._main_guard, rule):
                continue
            self.plans.entry_setups.append((rule, self._main_guard))
            self.plans.needs_import = True

    def _certain_trigger(self, spec: EntrySetupSpec) -> Optional[cst.Call]:
        """The first call of one of `methods` whose receiver is certainly built from `uses` in this
        file (`tf.keras.Sequential(...)`, through variables assigned nothing else, or `self` in a
        class whose base is one of its classes)."""
        for node, scope, _block, _path in self._calls:
            func = node.func
            if not (isinstance(func, cst.Attribute) and func.attr.value in spec.methods):
                continue
            self.scopes.append(scope)
            try:
                if self.qual(func) is None and self._built_from(func.value, spec.uses, scope, set()):
                    return node
            finally:
                self.scopes.pop()
        return None

    def _built_from(self, node: cst.BaseExpression, uses: Tuple[str, ...], scope: int, seen: Set[str]) -> bool:
        if isinstance(node, cst.Call):
            return self._under(self.qual(node.func), uses)
        if isinstance(node, cst.Name) and node.value == "self":
            owner = self._compound.get(self.parents.get(scope, MODULE_SCOPE))
            return isinstance(owner, cst.ClassDef) and any(
                self._under(self.qual(base.value), uses) for base in owner.bases if base.keyword is None)
        name = node.attr.value if isinstance(node, cst.Attribute) else node.value if isinstance(node, cst.Name) else ""
        partial = self.ctx.partial
        if name and partial is not None and partial.elided_word(name) and _assigned_in(
                "".join("".join(partial.lines[a:b]) for a, b, _ in partial.runs), name, isinstance(node, cst.Name)):
            self.ctx.partial_misses.add(name)  # it may be assigned in lines left out: parse them too
        values = self.values_of(node)
        key = self.source(node)
        if not values or key in seen:
            return False
        seen.add(key)
        return all(v is not None and self._built_from(v, uses, scope, seen) for v in values)

    @staticmethod
    def _under(qual: Optional[str], uses: Tuple[str, ...]) -> bool:
        return qual is not None and any(qual == u or qual.startswith(u + ".") for u in uses)


def _assigned_in(text: str, name: str, bare: bool) -> bool:
    """Whether `text` may bind `name` (`bare`: a variable, else an attribute `.name`): an
    assignment, augmented or annotated, a tuple target, `as name`, `for name`."""
    before = r"(?<![\w.])" if bare else r"\."
    return re.search(before + re.escape(name) + r"\s*(?:=(?!=)|[-+*/%&|^@]=|:[^=\n]*=|,|\))"
                     + (r"|\b(?:as|for)\s+(?:\w+\s*,\s*)*" + re.escape(name) + r"\b" if bare else ""), text) is not None
