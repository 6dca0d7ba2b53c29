"""What the ModelArts adaptation needs to know about the project around an entry script.

An entry script that imports a module of its project which copies from and to OBS with moxing
(a `moxing_adapter.py`, a `utils/obs.py`) is adapted already: adding the generated copier would
download the data twice. Which modules those are is found here, once per run, by a text search
(nothing is imported), and passed to the codemod in Options.modelarts_moxing_files.
"""

from __future__ import annotations

import os
import re
from typing import Iterable, Sequence, Tuple

from . import RUNTIME_MARKER

MOXING_IMPORT = re.compile(rb"^[ \t]*(import[ \t]+moxing\b|from[ \t]+moxing\b)", re.MULTILINE)
SKIPPED_FOLDERS = {".git", ".venv", "venv", "node_modules", "__pycache__", "build", "dist", "site-packages"}
MAX_FILES = 5000  # per folder walked around an explicitly named script


def _python_files_around(paths: Sequence[str]) -> Iterable[str]:
    """The .py files of the folders of explicitly named files (their helpers are not named)."""
    for path in paths:
        if not os.path.isfile(path):
            continue
        count = 0
        for folder, subfolders, files in os.walk(os.path.dirname(os.path.abspath(path))):
            subfolders[:] = [s for s in subfolders if s not in SKIPPED_FOLDERS and not s.startswith(".")]
            for name in files:
                if name.endswith(".py"):
                    count += 1
                    yield os.path.join(folder, name)
            if count > MAX_FILES:
                break


def files_importing_moxing(files: Sequence[str], paths: Sequence[str]) -> Tuple[str, ...]:
    """Absolute paths of the .py files (migrated ones and those around named scripts) that import moxing."""
    found = set()
    seen = set()
    for path in list(files) + list(_python_files_around(paths)):
        path = os.path.abspath(path)
        if not path.endswith(".py") or path in seen:
            continue
        seen.add(path)
        try:
            with open(path, "rb") as f:
                text = f.read(1 << 20)
        except OSError:
            continue
        if MOXING_IMPORT.search(text) and not text.startswith(RUNTIME_MARKER.encode()):
            found.add(path)  # (the generated module imports moxing too: not the project's)
    return tuple(sorted(found))
