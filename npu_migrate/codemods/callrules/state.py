"""What the Planner's mixins (calls.py, arguments.py, program.py) share: the state and helpers
`Planner` (planner.py) sets up and defines, declared once here so each mixin says what it relies
on and mypy checks every use. Declarations only: nothing here exists at run time but the class."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Set, Tuple

import libcst as cst

from ...context import Context
from ...model import Severity
from ...rules import Rule
from ..bindings import Bindings
from .apply import Plans
from .index import Canonical, FrameworkRules


class PlannerState(Bindings):
    ctx: Context
    tree: cst.Module
    rules: FrameworkRules
    canonical: Canonical
    plans: Plans
    report: bool
    _original_tree: bool
    _rewritten_refs: Set[int]
    _reported_refs: Set[int]
    _reported_once: Set[str]
    _statement_calls: Dict[int, cst.Expr]
    _renamable_cache: Dict[int, bool]
    _module_refs: Dict[str, List[int]]
    _imports: List[Tuple[cst.CSTNode, str, Rule, Optional[int], int]]
    _scope_refs: Dict[Tuple[str, int], List[int]]
    _kept_refs: Dict[str, cst.CSTNode]
    _calls: List[Tuple[cst.Call, int, int, Tuple[int, ...]]]
    _used: Set[str]
    _called_methods: Dict[str, cst.Call]
    _called: Set[str]
    _main_guard: Optional[cst.If]
    _import_paths: Dict[int, Tuple[int, ...]]
    _block: int
    _call_path: Tuple[int, ...]
    _compound: Dict[int, cst.CSTNode]
    _main_functions: Set[str]

    if TYPE_CHECKING:  # defined by Planner and the mixins
        def qual(self, node: cst.BaseExpression) -> Optional[str]: ...

        def finding(self, rule: Rule, node: cst.CSTNode, api: str, message: Optional[str] = None,
                    severity: Optional[Severity] = None) -> None: ...

        def codemod_finding(self, code: str, node: cst.CSTNode, api: str,
                            message: Optional[str] = None) -> None: ...

        def suppressed(self, node: cst.CSTNode, rule: Rule) -> bool: ...

        def source(self, node: cst.CSTNode) -> str: ...

        def values_of(self, node: cst.BaseExpression) -> Optional[List[Optional[cst.BaseExpression]]]: ...

        def assigned_only(self, variable: cst.BaseExpression,
                          test: Callable[[cst.BaseExpression, Optional[Set[int]]], bool],
                          seen: Optional[Set[int]] = None) -> bool: ...

        def _unfit(self, node: cst.Call, rule: Rule, qual: str, why: str = "") -> None: ...

        def _lifetime(self) -> str: ...
