"""`[[device_dispatch]]` (framework rules, kinds/calls.py): the device-target value named by
`options` (argparse options, attributes and variables of those names) is migrated as one:
`from` -> `to` in its default, choices and comparisons, or only its default when `to` has a
branch already, or nothing (the finding `unknown_finding`). codemods/device_dispatch.py says how.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Tuple

from ..words import Requirement, options_with_literal
from .base import append, CallSpec, new_list, register, Rule
from .calls import Entry, Ints, Lists, call_kind


def _check(entry: Entry, label: str, lists: Lists, ints: Ints) -> None:
    return None


def _requirements(rule: Rule) -> List[Requirement]:
    # The option names (plain words: they are strings in `add_argument`), each with the literal
    # `from` ("GPU"): codemods/device_dispatch.analyse rewrites and reports only where a plain
    # string literal equal to it is written (a default, a choice, a comparison, a parameter's
    # default), and the pass runs only then.
    spec = rule.spec_of(DeviceDispatchSpec)
    return options_with_literal(spec.options, spec.literal)


@dataclass(frozen=True)
class DeviceDispatchSpec(CallSpec):
    """The keys of a `[[device_dispatch]]` rule (besides `apis` and `unknown_finding`, CallSpec's)."""

    options: Tuple[str, ...] = ()
    literal: str = ""  # `from`
    to: str = ""


KIND = register(call_kind(
    "device_dispatch",
    DeviceDispatchSpec,
    ("options", "from", "to"),
    ("unknown_finding",),
    "a device-target value moved as one (default, choices, comparisons) or reported",
    _check,
    _requirements,
    new_index=new_list,
    index=append,
))
