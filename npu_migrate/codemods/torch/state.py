"""What the PyTorch pass's kind modules (literals.py, methods.py, references.py) share: the
state `TorchTransformer` (__init__.py) sets up, declared once here so each module says what it
relies on and mypy checks every use. Declarations only."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from ...context import Context
from ...imports import ImportTable


class TorchState:
    ctx: Context
    imports: ImportTable
    # > 0 inside a call that only shows its arguments (print, logging, str.format, f-strings).
    _shown: int
    # > 0 inside a call of a library with device names of its own (device_context.py).
    _foreign: int

    def resolve(self, node: cst.BaseExpression) -> Optional[str]:
        """The qualified name `node` refers to through the file's imports."""
        return self.imports.resolve(node)
