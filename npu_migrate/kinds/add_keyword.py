"""`[[add_keyword]]` (framework rules, kinds/calls.py): `keyword=<value>` is added to calls of
`apis`, or to `.<methods>(...)` calls on receivers built by a call of `receivers` (then
`receiver_methods`), unless the argument is given (by keyword or at `position`). Other
receivers of those methods: the finding `unknown_finding`; so is an argument given with another
value, unless `replace = true` (then that value becomes `<value>`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from .base import CallSpec, register, Rule, RuleError
from ..words import attribute
from .calls import Entry, Ints, Lists, call_kind, call_requirements


def _check(entry: Entry, label: str, lists: Lists, ints: Ints) -> None:
    if not (lists["apis"] or lists["methods"]):
        raise RuleError(f"{label}: an [[add_keyword]] rule needs 'apis' or 'methods'")
    if lists["methods"] and not lists["receivers"]:
        raise RuleError(f"{label}: 'methods' needs 'receivers' (the calls that build what they are called on)")
    if (lists["receivers"] or lists["receiver_methods"]) and not lists["methods"]:
        raise RuleError(f"{label}: 'receivers' and 'receiver_methods' are only for 'methods'")
    if "replace" in entry and not isinstance(entry["replace"], bool):
        raise RuleError(f"{label}: 'replace' must be true or false")


@dataclass
class AddKeywordIndex:
    by_api: Dict[str, List[Rule]] = field(default_factory=dict)  # API -> its rules
    by_method: Dict[str, Rule] = field(default_factory=dict)  # method -> the first rule naming it


def _index(index: AddKeywordIndex, rule: Rule) -> None:
    for api in rule.call.apis:
        index.by_api.setdefault(api, []).append(rule)
    for method in rule.spec_of(AddKeywordSpec).methods:
        index.by_method.setdefault(method, rule)


@dataclass(frozen=True)
class AddKeywordSpec(CallSpec):
    """The keys of a `[[add_keyword]]` rule (besides `apis` and `unknown_finding`, CallSpec's)."""

    keyword: str = ""
    value: str = ""
    methods: Tuple[str, ...] = ()
    position: Optional[int] = None
    receivers: Tuple[str, ...] = ()
    receiver_methods: Tuple[str, ...] = ()
    replace: bool = False  # an argument given with another value is replaced

    def code(self) -> Tuple[str, ...]:
        return (self.value,)

    def subject(self) -> str:
        return self.methods[0] if self.methods else ""


KIND = register(call_kind(
    "add_keyword",
    AddKeywordSpec,
    ("keyword", "value"),
    ("apis", "methods", "position", "receivers", "receiver_methods", "replace", "unknown_finding"),
    "a keyword argument added to calls of an API or method",
    _check,
    lambda rule: call_requirements(rule) + [attribute(m) for m in rule.spec_of(AddKeywordSpec).methods],
    new_index=AddKeywordIndex,
    index=_index,
))
