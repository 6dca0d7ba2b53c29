"""Front ends for files that are not plain Python source: each turns its file into the same
FileResult (edits, findings, new text) the Python engine produces. Looked up by path."""

from __future__ import annotations

from typing import Callable, Dict, Optional

from ..model import FileResult, Options
from ..rules import RuleSet

Frontend = Callable[[str, str, Options, RuleSet], FileResult]

# suffix or predicate -> front end; filled by the modules of this package as they are added.
_BY_SUFFIX: Dict[str, Frontend] = {}


def register(suffix: str, frontend: Frontend) -> None:
    _BY_SUFFIX[suffix] = frontend


def frontend_for(path: str, text: str) -> Optional[Frontend]:
    for suffix, fe in _BY_SUFFIX.items():
        if path.endswith(suffix):
            return fe
    return None


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
