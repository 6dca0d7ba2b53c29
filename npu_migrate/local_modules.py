"""The project's own modules that are named like a library a rule reports (a `triton/` folder of
Triton Inference Server deployment scripts is not OpenAI Triton).

Python resolves `import triton` in `deploy/serve.py` to `deploy/triton/` (or `deploy/triton.py`)
when the script's folder, or a folder above it on sys.path, holds one. The CLI looks at the files
it was given (`shadowing_modules`, no extra I/O: the discovered paths say it) and passes what it
found in Options; the engine then asks `is_local_import` (pure: paths only).
"""

from __future__ import annotations

import os
from typing import Iterable, Set, Tuple


def shadowing_modules(files: Iterable[str], names: Set[str]) -> Tuple[str, ...]:
    """Absolute paths `<folder>/<name>` of the project's packages and modules whose `name` is in
    `names`: a folder holding a discovered Python file, or a discovered `<name>.py`."""
    found: Set[str] = set()
    for path in files:
        if not path.endswith(".py"):
            continue
        parts = os.path.abspath(path).split(os.sep)
        stem = parts[-1][: -len(".py")]
        if stem in names:
            found.add(os.sep.join(parts[:-1] + [stem]))
        for i, part in enumerate(parts[:-1]):
            if part in names and i > 0:
                found.add(os.sep.join(parts[: i + 1]))
    return tuple(sorted(found))


def is_local_import(path: str, module: str, local: Tuple[str, ...]) -> bool:
    """Whether `import <module>` in the file at `path` finds one of the project's own modules
    (`local`, from shadowing_modules): one named like its first part, in the file's folder or a
    folder above it."""
    if not local or not path:
        return False
    root = module.split(".", 1)[0]
    folder = os.path.dirname(os.path.abspath(path))
    while True:
        if os.path.join(folder, root) in local:
            return True
        parent = os.path.dirname(folder)
        if parent == folder:
            return False
        folder = parent
