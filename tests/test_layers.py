"""The package is drawn in layers: no module imports one that (directly or not) imports it.

The import graph is built with `ast` from the package's own files, counting every import
statement wherever it is (a function-level import is still an edge: it only hides a loop) but
those under `if TYPE_CHECKING:`, which never run."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Set

import npu_migrate

PACKAGE = Path(npu_migrate.__file__).parent


def _modules() -> Dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def import_graph() -> Dict[str, Set[str]]:
    """module -> the package's modules it imports. `from . import x` is an edge to the
    submodule `x` when there is one (else to the package, whose __init__ defines `x`)."""
    modules = _modules()
    graph: Dict[str, Set[str]] = {}
    for name, path in modules.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        edges: Set[str] = set()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        typing_only = {id(n) for block in ast.walk(tree) if _is_type_checking_block(block)
                       for n in ast.walk(block)}
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                targets = []
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    targets.append(sub if sub in modules else base)
            else:
                continue
            for target in targets:
                # `import a.b.c` imports a, a.b and a.b.c; the innermost module of the package counts
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    edges.add(target)
        graph[name] = edges
    return graph


def _is_type_checking_block(node: ast.AST) -> bool:
    if not isinstance(node, ast.If):
        return False
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def cycles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    found: List[List[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle_inside_the_package():
    assert cycles(import_graph()) == []


def test_the_cycle_check_finds_a_cycle():
    graph = import_graph()
    graph["npu_migrate.model"] = graph["npu_migrate.model"] | {"npu_migrate.engine"}
    assert any("npu_migrate.model" in c and "npu_migrate.engine" in c for c in cycles(graph))


def test_the_graph_sees_function_level_and_relative_imports():
    graph = import_graph()
    assert "npu_migrate.codemods.tensorflow" in graph["npu_migrate.passes"]  # imported inside a function
    assert "npu_migrate.prefilter" in graph["npu_migrate.engine"]  # `from . import prefilter`
    assert "npu_migrate.frontends" in graph["npu_migrate.frontends.requirements"]  # `from . import is_pyproject`
    assert "npu_migrate.rules" not in graph["npu_migrate.kinds.base"]  # only under `if TYPE_CHECKING:`


# Shell scripts, dependency lists and `.cu` files are scanned as text: migrating them (and
# reading suppression comments and positions for them) never loads libcst, whose import costs
# more than scanning such a file.
TEXT_MODULES = ("npu_migrate.frontends.shell", "npu_migrate.frontends.requirements",
                "npu_migrate.frontends.cuda_sources", "npu_migrate.offsets", "npu_migrate.suppressions")


def test_the_text_front_ends_never_load_libcst():
    import subprocess
    import sys

    code = "import sys\n" + "".join(f"import {m}\n" for m in TEXT_MODULES) + \
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('libcst', 'torch', 'tensorflow')))\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out == "[]\n"


def test_the_libcst_check_sees_libcst():
    import subprocess
    import sys

    code = "import sys\nimport npu_migrate.positions\nprint('libcst' in sys.modules)\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out == "True\n"
