"""Front ends for files that are not plain Python source: each turns its file into the same
FileResult (edits, findings, new text) the Python engine produces. Looked up by path.

A front end claims files three ways, checked in this order:
- by suffix (`register(".ipynb", fn)`): also what discovery's `source_suffixes()` walks for;
- by file name (`register_name(predicate, fn)`): `requirements-dev.txt`, `pyproject.toml`;
- by shebang, for files without a suffix (`register_shebang(("sh", "bash"), fn)`): `#!/bin/bash`,
  `#!/usr/bin/env bash`. `claims(path)` answers "would a front end take this file?" for discovery.
"""

from __future__ import annotations

import os
import re
from typing import Callable, Dict, List, Optional, Tuple

from ..model import FileResult, Options
from ..rules import RuleSet

Frontend = Callable[[str, str, Options, RuleSet], FileResult]

# suffix or predicate -> front end; filled by the modules of this package as they are added.
_BY_SUFFIX: Dict[str, Frontend] = {}


def register(suffix: str, frontend: Frontend) -> None:
    _BY_SUFFIX[suffix] = frontend


# (predicate on the file's path, front end)
_BY_NAME: List[Tuple[Callable[[str], bool], Frontend]] = []
# interpreter name (`bash`, from `#!/bin/bash` or `#!/usr/bin/env bash`) -> front end
_BY_SHEBANG: Dict[str, Frontend] = {}
_SHEBANG_RE = re.compile(r"#![ \t]*(\S+)(?:[ \t]+(\S+))?")


def register_name(predicate: Callable[[str], bool], frontend: Frontend) -> None:
    _BY_NAME.append((predicate, frontend))


def register_shebang(interpreters: Tuple[str, ...], frontend: Frontend) -> None:
    for name in interpreters:
        _BY_SHEBANG[name] = frontend


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


def _by_name_or_suffix(path: str) -> Optional[Frontend]:
    for suffix, fe in _BY_SUFFIX.items():
        if path.endswith(suffix):
            return fe
    for predicate, fe in _BY_NAME:
        if predicate(path):
            return fe
    return None


def frontend_for(path: str, text: str) -> Optional[Frontend]:
    fe = _by_name_or_suffix(path)
    if fe is not None or _has_suffix(path):
        return fe
    return _BY_SHEBANG.get(shebang_interpreter(text[:256].split("\n", 1)[0]) or "")


def claims(path: str) -> bool:
    """Whether a front end takes this file (for folder walks). Reads the first line only of
    files without a suffix, to find a shebang."""
    if _by_name_or_suffix(path) is not None:
        return True
    if _has_suffix(path) or not _BY_SHEBANG:
        return False
    try:
        with open(path, "rb") as f:
            first = f.readline(256)
    except OSError:
        return False
    return _BY_SHEBANG.get(shebang_interpreter(first.decode("utf-8", "replace")) or "") is not None


# Decoders for non-Python files: bytes -> (text, encoding). Python files use the PEP 263 one.
_DECODERS: Dict[str, Callable] = {}


def register_decoder(suffix: str, decoder: Callable) -> None:
    _DECODERS[suffix] = decoder


def decoder_for(path: str) -> Optional[Callable]:
    for suffix, dec in _DECODERS.items():
        if path.endswith(suffix):
            return dec
    return None


def load_builtin_frontends() -> None:
    """Import the front-end modules so they register themselves."""
    import importlib
    import pkgutil

    for info in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{info.name}")


load_builtin_frontends()
