"""`[[remove_import]]` (framework rules, kinds/calls.py): imports of `modules` are removed once
every reference to them was rewritten.
"""

from __future__ import annotations

from ..words import plain_words
from .base import append, new_list, register, RuleError
from .calls import call_kind


def _check(entry, label, lists, ints):
    if not lists["modules"]:
        raise RuleError(f"{label}: 'modules' must name at least one module")


def _requirements(rule):
    # Never needed on its own: removed only after another rule rewrote every reference.
    # (The words of its `apis`/`uses`/`methods`/`options`, none of which it has.)
    return plain_words()


KIND = register(call_kind(
    "remove_import",
    ("modules",),
    (),
    "an import removed once nothing uses it",
    _check,
    _requirements,
    new_index=new_list,
    index=append,
))
