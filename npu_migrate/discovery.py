"""Which files a run looks at: files given explicitly, and the files below given folders.

Folders are walked without following symlinks; version-control, virtualenv, build and cache
folders are skipped. Files are returned sorted, each once.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Iterator, List, Sequence, Tuple

DEFAULT_EXCLUDES = (
    ".git", ".hg", ".svn", ".venv", "venv", ".tox", ".nox", ".eggs", "build", "dist",
    "node_modules", ".ipynb_checkpoints", "site-packages", "__pycache__", ".mypy_cache",
    ".pytest_cache", ".ruff_cache",
)
PYTHON_SUFFIXES = (".py",)


def source_suffixes() -> Tuple[str, ...]:
    from .frontends import _BY_SUFFIX

    return PYTHON_SUFFIXES + tuple(_BY_SUFFIX)


def discover(paths: Sequence[str], excludes: Sequence[str] = DEFAULT_EXCLUDES) -> Tuple[List[str], List[str]]:
    """(files, errors). A path that does not exist is an error message, not an exception."""
    files: List[str] = []
    errors: List[str] = []
    seen = set()
    suffixes = source_suffixes()
    for p in paths:
        if not os.path.lexists(p):
            errors.append(f"{p}: no such file or directory")
            continue
        if os.path.isdir(p):
            found = sorted(_walk(p, set(excludes), suffixes))
        else:
            found = [p]
        for f in found:
            key = os.path.normpath(f)
            if key not in seen:
                seen.add(key)
                files.append(f)
    return files, errors


def _walk(root: str, excludes: set, suffixes: Tuple[str, ...]) -> Iterator[str]:
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in excludes)
        for name in sorted(filenames):
            if name.endswith(suffixes):
                yield os.path.join(dirpath, name)
