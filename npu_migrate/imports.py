"""A small import table: which local names stand for which qualified names.

libcst's QualifiedNameProvider (full scope analysis) costs several parses per file; this tool
only needs to know what `th`, `cuda` or `GradScaler` were imported as, so one cheap pass over
the import statements does. Imports anywhere in the module count (function-level imports are
common in training scripts); relative and star imports resolve nothing.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Set, Union

import libcst as cst


def dotted_name(node: Union[cst.BaseExpression, cst.ImportFrom, None]) -> Optional[str]:
    """`a.b.c` for a Name/Attribute chain, else None."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted_name(node.value)
        return f"{base}.{node.attr.value}" if base is not None else None
    return None


def imported_names(node: Union[cst.Import, cst.ImportFrom]) -> List[str]:
    """The dotted names an absolute import statement imports: `import a.b` -> a.b;
    `from a import b, c` -> a, a.b, a.c (b may be a module); relative imports: none."""
    if isinstance(node, cst.Import):
        return [dotted_name(a.name) or "" for a in node.names]
    if node.module is not None and not node.relative:
        base = dotted_name(node.module) or ""
        if isinstance(node.names, cst.ImportStar):
            return [base]
        return [base] + [f"{base}.{dotted_name(a.name)}" for a in node.names]
    return []


class ImportTable(cst.CSTVisitor):
    """Maps local names to the qualified names they were imported as."""

    def __init__(self) -> None:
        super().__init__()
        self.names: Dict[str, str] = {}
        self.modules: List[str] = []  # every module imported, in order (for framework detection)
        self.import_nodes: List[Union[cst.Import, cst.ImportFrom]] = []
        # Modules imported outside any function or class body (module level, also inside
        # module-level `try:`/`if` blocks): what a file is written for, not what one helper uses.
        self.top_level_modules: Set[str] = set()
        # Names bound as a framework's module because a star import must bring them
        # (frameworks.star_imported_frameworks: `torch` after `from .torch_imports import *`).
        self.star_bound: Set[str] = set()
        # Every name a `from` import binds a local name to (`names` keeps the last): nnU-Net's
        # `try: from torch import GradScaler / except ImportError: from torch.cuda.amp import GradScaler`.
        self.from_bindings: Dict[str, Set[str]] = {}
        # Dotted names that stand for a module another module of the run binds (engine.py:
        # `config.hvd` of `from . import config` -> horovod.tensorflow, Options.whole_readers).
        self.aliases: Dict[str, str] = {}
        self._nested = 0

    @classmethod
    def of(cls, module: cst.Module) -> "ImportTable":
        table = cls()
        table._collect(module.body)
        return table

    # Only statements can be imports, so the walk goes from block to block and never into
    # expressions: a few percent of a parse, where a libcst visitor pass costs most of one.
    _BLOCKS = ("body", "handlers", "orelse", "finalbody", "cases")  # in source order

    def _collect(self, nodes: Sequence[cst.CSTNode]) -> None:
        node: Any
        for node in nodes:
            kind = type(node)  # (by identity, as resolve)
            if kind is cst.Import:
                self.visit_Import(node)
            elif kind is cst.ImportFrom:
                self.visit_ImportFrom(node)
            elif kind is cst.SimpleStatementLine:
                self._collect(node.body)
            elif not isinstance(node, cst.BaseSmallStatement):
                nested = kind is cst.FunctionDef or kind is cst.ClassDef
                self._nested += nested
                for name in self._BLOCKS:
                    child = getattr(node, name, None)
                    if isinstance(child, cst.CSTNode):
                        self._collect([child])
                    elif isinstance(child, (list, tuple)):
                        self._collect(child)
                self._nested -= nested

    # Also usable as a visitor: expressions hold no import statements.
    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> bool:
        return any(isinstance(s, (cst.Import, cst.ImportFrom)) for s in node.body)

    def visit_Import(self, node: cst.Import) -> bool:
        self.import_nodes.append(node)
        for alias in node.names:
            full = dotted_name(alias.name)
            if full is None:
                continue
            self.modules.append(full)
            if not self._nested:
                self.top_level_modules.add(full)
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                self.names[alias.asname.name.value] = full
            else:
                top = full.split(".", 1)[0]
                self.names.setdefault(top, top)
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        self.import_nodes.append(node)
        if node.relative or node.module is None:
            return False
        module = dotted_name(node.module)
        if module is None:
            return False
        self.modules.append(module)
        if not self._nested:
            self.top_level_modules.add(module)
        if isinstance(node.names, cst.ImportStar):
            return False
        for alias in node.names:
            name = dotted_name(alias.name)
            if name is None:
                continue
            local = alias.asname.name.value if alias.asname and isinstance(alias.asname.name, cst.Name) else name
            self.names[local] = f"{module}.{name}"
            self.from_bindings.setdefault(local, set()).add(f"{module}.{name}")
        return False

    # -- queries ---------------------------------------------------------------------------

    def resolve(self, node: cst.BaseExpression) -> Optional[str]:  # type: ignore[override]  # not libcst's metadata resolve
        """The qualified name an expression refers to, when it starts at an imported name."""
        n: Any = node  # (told by identity: libcst's node classes are final, and isinstance() goes through ABCMeta)
        kind = type(n)
        if kind is cst.Name:
            return self.names.get(n.value)
        if kind is cst.Attribute:
            base = self.resolve(n.value)
            if base is None and self.aliases:
                return self.aliases.get(dotted_name(n) or "")
            return f"{base}.{n.attr.value}" if base is not None else None
        return None

    def imports_module(self, root: str) -> bool:
        """Whether `root` or one of its submodules is imported anywhere."""
        return any(m == root or m.startswith(root + ".") for m in self.modules)

    def imports_module_at_top_level(self, root: str) -> bool:
        return any(m == root or m.startswith(root + ".") for m in self.top_level_modules)

    def has_star_import(self) -> bool:
        return any(isinstance(n, cst.ImportFrom) and isinstance(n.names, cst.ImportStar) for n in self.import_nodes)
