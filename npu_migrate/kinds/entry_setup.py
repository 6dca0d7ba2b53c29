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


# The other spellings of a module `uses` names that the TensorFlow pass takes for it
# (codemods/tensorflow.py canonical_tensorflow; tests/test_work_budget.py holds them equal).
SPELLINGS = {"tensorflow.keras": ("tensorflow.python.keras", "tensorflow.compat.v1.keras", "tensorflow.compat.v2.keras")}


def statement_requirements(rule: Rule) -> List[Requirement]:
    """What the partial text of a file without a main block keeps for the rule, which can then
    only report (`unknown_finding` at the first call of one of `methods` whose receiver is certainly
    built from `uses` -- a variable assigned only such calls, `self` of a subclass of one of its
    classes -- when the file calls none of `skip_if_called`: callrules/program.py; an assignment of
    the receiver in lines left out asks for them, Context.partial_misses): every statement with a
    call of one of `methods` (`.fit`), with the last name of one of `skip_if_called`, or with a
    reference that can resolve to `uses` (its last name; a name an import binds to it or below:
    partial.StatementFilter's names). So the Planner decides there as on the whole module."""
    spec = rule.spec_of(EntrySetupSpec)
    out = [Requirement(frozenset({Word(method)}), refs=frozenset({("attr", method)})) for method in spec.methods]
    out += [Requirement(frozenset({Word(name.rsplit(".", 1)[-1])}), name=name if "." in name else "")
            for name in spec.skip_if_called]
    out += [Requirement(frozenset({Word(name.rsplit(".", 1)[-1])}), name=name)
            for use in spec.uses for name in (use, *SPELLINGS.get(use, ()))]
    return out


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
