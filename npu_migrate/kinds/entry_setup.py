"""`[[entry_setup]]` (framework rules, kinds/calls.py): in a file that uses `uses` and calls one
of `methods`, `setup` becomes the first and `teardown` the last statement of its
`if __name__ == "__main__":` block, unless it calls one of `skip_if_called`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Tuple

from ..words import Requirement, Word
from .base import append, CallSpec, new_list, register, RuleError, Rule
from .calls import Entry, Ints, Lists, call_kind


def _check(entry: Entry, label: str, lists: Lists, ints: Ints) -> None:
    if not (lists["uses"] and lists["methods"]):
        raise RuleError(f"{label}: 'uses' and 'methods' must not be empty")


def _requirements(rule: Rule) -> List[Requirement]:
    """One of `uses` *and* a call of one of `methods`."""
    spec = rule.spec_of(EntrySetupSpec)
    return [
        Requirement(frozenset({Word(use.rsplit(".", 1)[-1]), Word(method)}), refs=frozenset({("attr", method)}))
        for use in spec.uses
        for method in spec.methods
    ]


@dataclass(frozen=True)
class EntrySetupSpec(CallSpec):
    """The keys of a `[[entry_setup]]` rule (besides `apis` and `unknown_finding`, CallSpec's)."""

    uses: Tuple[str, ...] = ()
    methods: Tuple[str, ...] = ()
    setup: str = ""
    teardown: str = ""
    skip_if_called: Tuple[str, ...] = ()

    def code(self) -> Tuple[str, ...]:
        return (self.setup, self.teardown)

    def subject(self) -> str:
        return self.methods[0] if self.methods else ""


KIND = register(call_kind(
    "entry_setup",
    EntrySetupSpec,
    ("uses", "methods", "setup", "teardown"),
    ("skip_if_called", "unknown_finding"),
    "setup and teardown statements in the script's main block",
    _check,
    _requirements,
    new_index=new_list,
    index=append,
))
