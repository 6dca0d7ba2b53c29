"""`[[call_replace]]` (framework rules, kinds/calls.py): a call of one of `apis` becomes
`to(<args>, <extra_args>)`: `args` are the parameters kept, given by position or keyword and
passed on by position; any other argument leaves the call alone (a codemod finding). With
`assign_to` the call must be a statement and becomes `<assign_to> = to(...)`; `cleanup`
statements are then added at the end of its block.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

from .base import CallSpec, register, RuleError, Rule
from .calls import Entry, Ints, Lists, Written, call_kind, needs_apis, to_is_a_name, writes_code


def _check(entry: Entry, label: str, lists: Lists, ints: Ints) -> None:
    to_is_a_name(entry, label)
    needs_apis(entry, label, lists, ints)
    if lists["cleanup"] and "assign_to" not in entry:
        raise RuleError(f"{label}: 'cleanup' needs 'assign_to' (the call must be a statement)")


def _writes(rule: Rule) -> Written:
    """`to` is code here (the call it becomes), before the statements' code."""
    return (), (rule.spec_of(CallReplaceSpec).to,) + writes_code(rule)[1]


@dataclass(frozen=True)
class CallReplaceSpec(CallSpec):
    """The keys of a `[[call_replace]]` rule (besides `apis` and `unknown_finding`, CallSpec's)."""

    to: str = ""
    args: Tuple[str, ...] = ()
    extra_args: Tuple[str, ...] = ()
    assign_to: str = ""
    cleanup: Tuple[str, ...] = ()

    def code(self) -> Tuple[str, ...]:
        return self.cleanup + self.extra_args


KIND = register(call_kind(
    "call_replace",
    CallReplaceSpec,
    ("apis", "to"),
    ("args", "extra_args", "assign_to", "cleanup", "unknown_finding"),
    "a call of an API becomes a call of another with chosen arguments",
    _check,
    writes=_writes,
))
