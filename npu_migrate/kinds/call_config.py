"""`[[call_config]]` (framework rules, kinds/calls.py): calls of `apis` get `keyword=to()`, or
`keyword=to(wrap_keyword=<value>)` around the value given (by keyword or at `position`); not in
files whose text contains `unless_file_contains`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .base import CallSpec, register, Rule
from .calls import Entry, Ints, Lists, Written, call_kind, needs_apis, to_is_a_name, writes_code


def _check(entry: Entry, label: str, lists: Lists, ints: Ints) -> None:
    to_is_a_name(entry, label)
    needs_apis(entry, label, lists, ints)


def _writes(rule: Rule) -> Written:
    """The config helper `to`, and `to:wrap_keyword` (the parameter it is given)."""
    spec = rule.spec_of(CallConfigSpec)
    to, wrap = spec.to, spec.wrap_keyword
    names = ((to,) + ((f"{to}:{wrap}",) if wrap else ())) if to else ()
    return names, writes_code(rule)[1]


@dataclass(frozen=True)
class CallConfigSpec(CallSpec):
    """The keys of a `[[call_config]]` rule (besides `apis` and `unknown_finding`, CallSpec's)."""

    keyword: str = ""
    to: str = ""
    wrap_keyword: str = ""
    position: Optional[int] = None
    unless_file_contains: str = ""


KIND = register(call_kind(
    "call_config",
    CallConfigSpec,
    ("apis", "keyword", "to", "wrap_keyword"),
    ("position", "unless_file_contains", "unknown_finding"),
    "calls of an API get an NPU configuration argument",
    _check,
    writes=_writes,
))
