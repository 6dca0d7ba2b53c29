"""`[[remove_import]]` (framework rules, kinds/calls.py): imports of `modules` are removed once
every reference to them was rewritten. The rewrites of the calls into `modules` go together in a
file: while one reference stays, none is made, and each call that would have been rewritten is
reported with `unknown_finding` (callrules/program.py, _plan_whole_modules).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Tuple

from ..words import Requirement, plain_words
from .base import append, CallSpec, new_list, register, RuleError, Rule
from .calls import Entry, Ints, Lists, call_kind


def _check(entry: Entry, label: str, lists: Lists, ints: Ints) -> None:
    if not lists["modules"]:
        raise RuleError(f"{label}: 'modules' must name at least one module")


def _requirements(rule: Rule) -> List[Requirement]:
    # Never needed on its own: removed only after another rule rewrote every reference.
    # (The words of its `apis`/`uses`/`methods`/`options`, none of which it has.)
    return plain_words()


@dataclass(frozen=True)
class RemoveImportSpec(CallSpec):
    """The keys of a `[[remove_import]]` rule (besides `apis` and `unknown_finding`, CallSpec's)."""

    modules: Tuple[str, ...] = ()

    def subject(self) -> str:
        return self.modules[0] if self.modules else ""


KIND = register(call_kind(
    "remove_import",
    RemoveImportSpec,
    ("modules",),
    ("unknown_finding",),
    "an import removed once nothing uses it",
    _check,
    _requirements,
    new_index=new_list,
    index=append,
))
