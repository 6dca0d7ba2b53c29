"""Variables and what they are assigned, per function scope: what the framework rules
(codemods/callrules/) follow to trace a value passed by name (`config=run_config`) to the call
that built it."""

from __future__ import annotations

from typing import Dict, List, Optional, Set, Tuple

import libcst as cst

from ..imports import dotted_name
from ..fast_visitor import own_leave, own_visit
from .syntax import option_names

MODULE_SCOPE = 0


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

    def visit_Import(self, node: cst.Import) -> Optional[bool]:
        for alias in node.names:
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                self.bind(alias.asname.name.value, None)
            else:
                name = dotted_name(alias.name)
                if name:
                    self.bind(name.split(".", 1)[0], None)
        return None

    def visit_ImportFrom(self, node: cst.ImportFrom) -> Optional[bool]:
        if isinstance(node.names, cst.ImportStar):
            return None
        for alias in node.names:
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                self.bind(alias.asname.name.value, None)
            elif isinstance(alias.name, cst.Name):
                self.bind(alias.name.value, None)
        return None

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


