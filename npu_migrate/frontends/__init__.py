"""Front ends for files that are not plain Python source: each turns its file into the same
FileResult (edits, findings, new text) the Python engine produces. Looked up by path.

A front end claims files three ways, checked in this order (the tables below):
- by suffix (`.ipynb`, `.sh`, `.cu`, `.yaml`): also what discovery walks folders for;
- by file name (`requirements-dev.txt`, `pyproject.toml`);
- by shebang, for files without a suffix: `#!/bin/bash`, `#!/usr/bin/env bash`.
`claims(path)` answers "would a front end take this file?" for discovery.

Each front end is a module of this package with a `migrate(text, path, options, rules)`
function (and, for files that are not text in the file's own encoding, `decode(data, path)`);
it is imported only when a file needs it.
"""

from __future__ import annotations

import importlib
import os
import re
from typing import Callable, Dict, List, Optional, Tuple

from ..model import FileResult
from ..options import Options
from ..rules import RuleSet

Frontend = Callable[[str, str, Options, RuleSet], FileResult]


def is_requirements_file(path: str) -> bool:
    name = os.path.basename(path).lower()
    parent = os.path.basename(os.path.dirname(path)).lower()
    return name.endswith(".txt") and ("requirements" in name or parent == "requirements")


def is_pyproject(path: str) -> bool:
    return os.path.basename(path) == "pyproject.toml"


# suffix -> front-end module
_BY_SUFFIX: Dict[str, str] = {
    ".cu": "cuda_sources",
    ".cuh": "cuda_sources",
    ".ipynb": "notebook",
    ".sh": "shell",
    ".bash": "shell",
    ".yaml": "yaml_config",
    ".yml": "yaml_config",
}
# (predicate on the file's path, front-end module)
_BY_NAME: List[Tuple[Callable[[str], bool], str]] = [
    (is_requirements_file, "requirements"),
    (is_pyproject, "requirements"),
]
# interpreter name (`bash`, from `#!/bin/bash` or `#!/usr/bin/env bash`) -> front-end module
_BY_SHEBANG: Dict[str, str] = {name: "shell" for name in ("sh", "bash", "dash", "ksh", "zsh")}
# Front ends whose files are not text in their own encoding (JSON notebooks, CUDA sources).
_DECODES = {"notebook", "cuda_sources"}
_SHEBANG_RE = re.compile(r"#![ \t]*(\S+)(?:[ \t]+(\S+))?")


def _load(module: str):
    return importlib.import_module(f"{__name__}.{module}")


def shebang_interpreter(first_line: str) -> Optional[str]:
    """`bash` for `#!/bin/bash -e` and `#!/usr/bin/env bash`; None without a shebang."""
    m = _SHEBANG_RE.match(first_line)
    if m is None:
        return None
    program = m.group(1).rsplit("/", 1)[-1]
    if program == "env" and m.group(2):
        program = m.group(2).rsplit("/", 1)[-1]
    return program


def _has_suffix(path: str) -> bool:
    return "." in os.path.basename(path).lstrip(".")


def _by_name_or_suffix(path: str) -> Optional[str]:
    for suffix, module in _BY_SUFFIX.items():
        if path.endswith(suffix):
            return module
    for predicate, module in _BY_NAME:
        if predicate(path):
            return module
    return None


def frontend_for(path: str, text: str) -> Optional[Frontend]:
    module = _by_name_or_suffix(path)
    if module is None and not _has_suffix(path):
        module = _BY_SHEBANG.get(shebang_interpreter(text[:256].split("\n", 1)[0]) or "")
    return _load(module).migrate if module is not None else None


def claims(path: str) -> bool:
    """Whether a front end takes this file (for folder walks). Reads the first line only of
    files without a suffix, to find a shebang."""
    if _by_name_or_suffix(path) is not None:
        return True
    if _has_suffix(path):
        return False
    try:
        from ..source import first_line

        first = first_line(path)
    except OSError:
        return False
    return _BY_SHEBANG.get(shebang_interpreter(first.decode("utf-8", "replace")) or "") is not None


def decoder_for(path: str) -> Optional[Callable]:
    """bytes -> (text, encoding) for files a front end reads its own way; None: PEP 263 (Python)."""
    for suffix, module in _BY_SUFFIX.items():
        if path.endswith(suffix) and module in _DECODES:
            return _load(module).decode
    if is_pyproject(path):
        return decode_toml
    return None


def decode_toml(data: bytes, path: str = "<bytes>") -> Tuple[str, str]:
    """TOML is UTF-8 and has no coding cookie: a pyproject.toml that is not UTF-8 is told so
    (it was told to add a Python coding cookie, issue 30.12)."""
    from ..source import SourceError

    encoding = "utf-8-sig" if data.startswith(b"\xef\xbb\xbf") else "utf-8"
    try:
        return data.decode(encoding), encoding
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise SourceError(f"not UTF-8 (line {line}, byte {data[exc.start:exc.start + 1]!r}), as TOML must be; "
                          "save it as UTF-8") from None
