"""The Planner's decisions on the values passed to a framework API: argument (a string literal
passed to it, directly, through a variable or as an argparse default, e.g. MindSpore's
`device_target="GPU"`) and add_keyword (a keyword the NPU needs, on an API call or on a method
of an object one of the rule's receivers built)."""

from __future__ import annotations

import re
from typing import Iterable, List, Optional, Set, Tuple

import libcst as cst

from ...kinds.add_keyword import AddKeywordSpec
from ...kinds.argument import ArgumentSpec
from ...rules import Rule
from ..strings import string_value
from ..syntax import find_argument, has_star, option_names
from .apply import CallPlan
from .state import PlannerState


class ArgumentPlanning(PlannerState):
    """Mixed into Planner (planner.py), whose state these methods use."""

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
        spec = rule.spec_of(ArgumentSpec)
        if spec.pattern:
            return re.fullmatch(spec.pattern, value) is not None
        return value == spec.literal

    def _rewrite_literals(self, rule: Rule, literals: Iterable[cst.SimpleString],
                          path: Optional[Tuple[int, ...]] = None) -> None:
        """Plan the literals that match; `path`: their statements (default: the call's)."""
        for literal in literals:
            value = string_value(literal)
            to = rule.spec_of(ArgumentSpec).to
            if value is not None and self._matches(rule, value) and value != to:
                self.plans.literals[id(literal)] = (rule, to)
                self.plans.hot.update(self._call_path if path is None else path)

    def _plan_argument(self, node: cst.Call, rule: Rule) -> None:
        spec = rule.spec_of(ArgumentSpec)
        index = find_argument(node, spec.keyword, spec.position)
        if index is None:
            return
        value = node.args[index].value
        literals = self._literal_target(rule, value)
        if literals is not None:
            self._rewrite_literals(rule, literals)
            return
        values = self.values_of(value)
        bound = [v for v in values if v is not None] if values else []
        if bound and len(bound) == len(values or ()):
            parts = [self._literal_target(rule, v) for v in bound]
            targets = [p for p in parts if p is not None]
            if len(targets) == len(parts):
                for v, p in zip(bound, targets):
                    self._rewrite_literals(rule, p, self.value_paths.get(id(v), ()))
                return
        def read_option(node: Optional[cst.BaseExpression]) -> bool:
            return (isinstance(node, cst.Attribute) and node.attr.value in spec.options
                    and node.attr.value in self.argparse_options)

        if read_option(value) or (bound and len(bound) == len(values or ()) and all(map(read_option, bound))):
            # `args.device_target`, or `target = args.device_target` (MindsporeTrainer's
            # launcher): the option is this file's, and its argparse default is rewritten
            return
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
        spec = rule.spec_of(AddKeywordSpec)
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
        method = node.func.attr.value  # type: ignore[attr-defined]
        receiver = node.func.value  # type: ignore[attr-defined]
        if self.is_receiver(receiver, rule):
            self._plan_keyword(node, rule, plan, f".{method}()")
        elif rule.call.unknown_finding and not self.suppressed(node, rule):
            self.codemod_finding(rule.call.unknown_finding, node, api=f"{self.source(receiver)}.{method}()")

    def is_receiver(self, node: cst.BaseExpression, rule: Rule, seen: Optional[Set[Tuple[int, str]]] = None) -> bool:
        """Whether `node` is certainly built by one of the rule's `receivers` (then any of its
        `receiver_methods`/`methods`), directly or through variables assigned nothing else."""
        spec = rule.spec_of(AddKeywordSpec)
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
