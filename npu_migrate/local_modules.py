"""The project's own modules that are named like a library a rule reports (a `triton/` folder of
Triton Inference Server deployment scripts is not OpenAI Triton).

A project module shadows `import triton` only where Python 3 would resolve that import to it:
a `triton/` (or `triton.py`) in a folder that is on sys.path for the importing file -- the
script's own folder, or a folder above it that roots the project's packages. The children of a
package (a folder with `__init__.py`) never do: `pkg/tensorrt.py` is `pkg.tensorrt`, and
`import tensorrt` in `pkg/export.py` still means the library (implicit relative imports ended
with Python 2). The CLI looks at the files it was given (`shadowing_modules`: the discovered
paths, and a stat of `__init__.py` beside each folder named like a library) and passes what it
found in Options; the engine then asks `is_local_import` (pure: paths only).
"""

from __future__ import annotations

import os
from typing import AbstractSet, Iterable, List, Set, Tuple


def shadowing_modules(files: Iterable[str], names: Set[str]) -> Tuple[str, ...]:
    """Absolute paths `<folder>/<name>` of the project's packages and modules whose `name` is in
    `names` and whose `<folder>` is not itself a package (a discovered `<folder>/__init__.py`, or
    one on disk):
    a folder holding a discovered Python file, or a discovered `<name>.py`."""
    paths = [os.path.abspath(p).split(os.sep) for p in files if p.endswith(".py")]
    packages = {os.sep.join(parts[:-1]) for parts in paths if parts[-1] == "__init__.py"}
    found: Set[str] = set()
    for parts in paths:
        stem = parts[-1][: -len(".py")]
        if stem in names:
            found.add(os.sep.join(parts[:-1] + [stem]))
        for i, part in enumerate(parts[:-1]):
            if part in names and i > 0:
                found.add(os.sep.join(parts[: i + 1]))
    # A folder whose parent is a package on disk is that package's child too, when the parent's
    # __init__.py is not among the files given (a run on speechbrain/integrations/numba/ alone):
    # one stat per candidate, and candidates are folders named like a library, rare.
    return tuple(sorted(f for f in found if os.path.dirname(f) not in packages
                        and not os.path.isfile(os.path.join(os.path.dirname(f), "__init__.py"))))


def is_local_import(path: str, module: str, local: Tuple[str, ...], submodules: AbstractSet[str] = frozenset()) -> bool:
    """Whether `import <module>` in the file at `path` finds one of the project's own modules
    (`local`, from shadowing_modules): one named like its first part, in the file's folder or a
    folder above it. `submodules`: the `parent.name` pairs the file imports absolutely
    (`from utils.tensorrt import build` gives `utils.tensorrt`): a local module the file itself
    reaches as a submodule of its folder is not what its plain `import tensorrt` finds (a
    namespace package that uses absolute imports)."""
    if not local or not path:
        return False
    root = module.split(".", 1)[0]
    folder = os.path.dirname(os.path.abspath(path))
    while True:
        if os.path.join(folder, root) in local:
            return f"{os.path.basename(folder)}.{root}" not in submodules
        parent = os.path.dirname(folder)
        if parent == folder:
            return False
        folder = parent


def submodule_pairs(modules: Iterable[str]) -> Set[str]:
    """`a.b.c` -> {`a.b`, `b.c`}: every `parent.name` pair of absolute module names."""
    pairs: Set[str] = set()
    for m in modules:
        parts = m.split(".")
        pairs.update(f"{a}.{b}" for a, b in zip(parts, parts[1:]))
    return pairs


def absolute_imports(text: str) -> List[str]:
    """Every module a Python text imports absolutely (`from a.b import c` gives `a.b`, `a.b.c`)."""
    import ast

    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    out: List[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            out.append(node.module)
            out.extend(f"{node.module}.{alias.name}" for alias in node.names if alias.name != "*")
    return out
