"""`[[add_keyword]]` (framework rules, kinds/calls.py): `keyword=<value>` is added to calls of
`apis`, or to `.<methods>(...)` calls on receivers built by a call of `receivers` (then
`receiver_methods`), unless the argument is given (by keyword or at `position`). Other
receivers of those methods: the finding `unknown_finding`; so is an argument given with another
value, unless `replace = true` (then that value becomes `<value>`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List

from .base import Rule, RuleError, register
from .calls import call_kind


def _check(entry, label, lists, ints):
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
    for method in rule.call.methods:
        index.by_method.setdefault(method, rule)


KIND = register(call_kind(
    "add_keyword",
    ("keyword", "value"),
    ("apis", "methods", "position", "receivers", "receiver_methods", "replace", "unknown_finding"),
    "a keyword argument added to calls of an API or method",
    _check,
    new_index=AddKeywordIndex,
    index=_index,
))
