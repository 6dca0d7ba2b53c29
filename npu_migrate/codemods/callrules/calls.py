"""The Planner's decisions on calls to a framework API, one group per kind: call_rename (the
NPU class takes the same arguments), call_replace (a start-up call and where its shut-down
goes), call_config (a config argument wrapped)."""

from __future__ import annotations

from typing import Dict, Optional, Set

import libcst as cst

from ...kinds.call_config import CallConfigSpec
from ...kinds.call_rename import CallRenameSpec
from ...kinds.call_replace import CallReplaceSpec
from ...rules import Rule
from ..syntax import find_argument, has_star, positional
from .apply import CallPlan, atexit_registration
from .state import PlannerState


class CallPlanning(PlannerState):
    """Mixed into Planner (planner.py), whose state these methods use."""

    # call_rename ----------------------------------------------------------------------------

    def fits(self, node: cst.Call, rule: Rule) -> bool:
        spec = rule.spec_of(CallRenameSpec)
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
            spec = rule.spec_of(CallRenameSpec)
            if ok and spec.npu_argument:
                index = find_argument(node, spec.npu_argument, spec.npu_argument_position)
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
        return self.assigned_only(value, self.holds_npu_object, seen)

    # call_replace ---------------------------------------------------------------------------

    def _plan_replace(self, node: cst.Call, rule: Rule, plan: CallPlan) -> None:
        spec = rule.spec_of(CallReplaceSpec)
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

    # call_config ----------------------------------------------------------------------------

    def _skip_config(self, rule: Rule) -> bool:
        marker = rule.spec_of(CallConfigSpec).unless_file_contains
        return bool(marker) and marker in self.ctx.text

    def _plan_config(self, node: cst.Call, rule: Rule, plan: CallPlan) -> None:
        spec = rule.spec_of(CallConfigSpec)
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
        return self.assigned_only(value, self.is_configured, seen)
