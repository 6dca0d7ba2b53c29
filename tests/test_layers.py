"""The package is drawn in layers: no module imports one that (directly or not) imports it.

The import graph is built with `ast` from the package's own files, counting every import
statement wherever it is (a function-level import is still an edge: it only hides a loop) but
those under `if TYPE_CHECKING:`, which never run."""

from __future__ import annotations

import ast
import functools
from pathlib import Path
from typing import Dict, List, Set, Tuple

import pytest

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
    submodule `x` when there is one (else to the package, whose __init__ defines `x`). A copy of
    the graph built once per test process (parsing the package takes a second): a test may add
    edges to its copy."""
    return dict(_import_graph())


@functools.lru_cache(maxsize=None)
def _import_graph() -> Dict[str, Set[str]]:
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
        graph[name] = frozenset(edges)  # (shared by the copies: never changed in place)
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


@pytest.mark.slow
def test_the_text_front_ends_never_load_libcst():
    import subprocess
    import sys

    code = "import sys\n" + "".join(f"import {m}\n" for m in TEXT_MODULES) + \
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('libcst', 'torch', 'tensorflow')))\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out == "[]\n"


@pytest.mark.slow
def test_the_libcst_check_sees_libcst():
    import subprocess
    import sys

    code = "import sys\nimport npu_migrate.positions\nprint('libcst' in sys.modules)\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out == "True\n"


# -- the layer table (DESIGN.md's layers; CONTRIBUTING "Where the code of a code is") ---------
# Bottom up: a module imports only modules of its own layer or below, so an upward import fails
# here even when it closes no cycle. A module's layer is that of its longest prefix below.
LAYERS = [
    ("ground", ["model", "frameworks", "words", "codes", "source", "safe_parse", "diffs", "offsets", "positions",
                "imports", "fast_visitor", "work", "suppressions", "project_files", "local_modules", "project_values", "extra_files",
                "standin", "startup"]),
    ("rule data, targets and the run's options", ["kinds", "rules", "targets", "options"]),
    ("templates of generated code", ["modelarts", "distributed"]),
    ("reading less", ["logical_lines", "prefilter", "partial", "pieces"]),
    ("passes and kinds", ["context", "codemods", "passes"]),
    ("engine", ["engine"]),
    ("front ends", ["frontends"]),
    ("dispatch (and the package's public API)", ["dispatch", ""]),
    ("pipeline", ["runner", "cache", "pipeline", "output_dir", "settings", "config", "discovery", "report",
                  "rehearse"]),
    ("edge", ["cli", "__main__", "stdin", "console", "progress", "explain", "codedocs", "report.csv",
              "report.github", "report.html", "report.json", "report.markdown", "report.sarif", "report.text"]),
]

# Upward edges the code still has, each with why; the test fails when one goes away too (then
# delete it here) so the list only shrinks.
KNOWN_UPWARD = {
    ("npu_migrate.report", "npu_migrate.report.*"): "report/__init__.py holds both RunReport (the model the "
    "pipeline returns) and load_renderers(), which imports every renderer through importlib",
}


def layer_of(module: str) -> int:
    name = module[len("npu_migrate."):] if module.startswith("npu_migrate.") else ""
    best = None
    for number, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if name == prefix or (prefix and name.startswith(prefix + ".")):
                if best is None or len(prefix) > best[1]:
                    best = (number, len(prefix))
    assert best is not None, f"{module} is in no layer: add it to LAYERS"
    return best[0]


def dynamic_edges() -> Dict[str, Set[str]]:
    """Imports made through importlib: `import_module(f"{__name__}.{...}")` imports a submodule of
    the module's own package (any of them); `pkgutil.walk_packages`/`iter_modules` followed by
    `import_module` imports every module under the folder it walks (its own package)."""
    modules = _modules()
    found: Dict[str, Set[str]] = {}
    for name, path in modules.items():
        text = path.read_text(encoding="utf-8")
        if "import_module(" not in text:
            continue
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        if "walk_packages(" in text and "dirname" in text:  # the package folder this module is in, walked
            root = package.split(".")[0]
            found[name] = {m for m in modules if m.startswith(root + ".") and m != name}
        elif 'import_module(f"{__name__}.' in text or "iter_modules(__path__)" in text:
            found[name] = {m for m in modules if m.startswith(package + ".") and m != name}
    return found


def layer_violations(graph: Dict[str, Set[str]]) -> Set[Tuple[str, str]]:
    bad = set()
    for module, targets in graph.items():
        for target in targets:
            if layer_of(target) > layer_of(module):
                bad.add((module, target))
    return bad


def _known(edge: Tuple[str, str]) -> bool:
    return any(edge[0] == source and (edge[1] == target or (target.endswith(".*") and edge[1].startswith(target[:-1])))
               for source, target in KNOWN_UPWARD)


def full_graph() -> Dict[str, Set[str]]:
    graph = import_graph()
    for module, targets in dynamic_edges().items():
        graph[module] = graph[module] | targets
    return graph


def test_every_import_goes_down_the_layer_table():
    bad = layer_violations(full_graph())
    assert sorted(edge for edge in bad if not _known(edge)) == []
    assert all(any(_known(edge) and edge[0] == source for edge in bad) for source, _ in KNOWN_UPWARD), \
        "an upward import in KNOWN_UPWARD is gone: delete it there"


def test_an_upward_import_that_closes_no_cycle_fails():
    graph = full_graph()
    graph["npu_migrate.model"] = graph["npu_migrate.model"] | {"npu_migrate.codemods.strings"}
    assert not any("npu_migrate.model" in c for c in cycles(graph))  # no cycle: only the table sees it
    assert ("npu_migrate.model", "npu_migrate.codemods.strings") in layer_violations(graph)


# Cycles that exist only through importlib, each with why; any other cycle of the full graph
# (imports made through importlib counted) fails, e.g. #27.7's engine -> passes -> torch pass ->
# targets -> frontends.requirements -> frontends -> (importlib) notebook -> engine.
KNOWN_DYNAMIC_CYCLES = {
    frozenset({"npu_migrate.frontends", "npu_migrate.frontends.requirements"}):
        "frontends/__init__.py loads each front end through importlib; requirements.py reads is_pyproject back",
    frozenset({"npu_migrate.report", "npu_migrate.report.csv", "npu_migrate.report.github", "npu_migrate.report.html",
               "npu_migrate.report.json", "npu_migrate.report.markdown", "npu_migrate.report.sarif",
               "npu_migrate.report.text"}):
        "report/__init__.py loads every renderer through importlib; each reads RunReport back (KNOWN_UPWARD)",
    frozenset({"npu_migrate.__main__", "npu_migrate.cli", "npu_migrate.explain"}):
        "explain.load_emitters imports every module of the package for the codes they register",
}


def test_no_import_cycle_counting_imports_made_through_importlib():
    found = [c for c in cycles(full_graph()) if frozenset(c) not in KNOWN_DYNAMIC_CYCLES]
    assert found == []
    assert all(any(frozenset(c) == known for c in cycles(full_graph())) for known in KNOWN_DYNAMIC_CYCLES), \
        "a cycle in KNOWN_DYNAMIC_CYCLES is gone: delete it there"
    # the cycle #27.7 found: target resolution importing a front end's parser closes it
    graph = full_graph()
    graph["npu_migrate.targets.pins"] = graph["npu_migrate.targets.pins"] | {"npu_migrate.frontends.requirements"}
    assert any({"npu_migrate.engine", "npu_migrate.targets.pins"} <= set(c) for c in cycles(graph))


def test_the_table_sees_imports_made_through_importlib():
    dynamic = dynamic_edges()
    assert "npu_migrate.frontends.notebook" in dynamic["npu_migrate.frontends"]
    assert "npu_migrate.report.html" in dynamic["npu_migrate.report"]
    assert "npu_migrate.cli" in dynamic["npu_migrate.explain"]  # load_emitters walks the package
    assert ("npu_migrate.report", "npu_migrate.report.html") in layer_violations(full_graph())
