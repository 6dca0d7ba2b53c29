"""`[[device_dispatch]]` (framework rules, kinds/calls.py): the device-target value named by
`options` (argparse options, attributes and variables of those names) is migrated as one:
`from` -> `to` in its default, choices and comparisons, or only its default when `to` has a
branch already, or nothing (the finding `unknown_finding`). codemods/device_dispatch.py says how.
"""

from __future__ import annotations

from ..words import plain_words
from .base import append, new_list, register
from .calls import call_kind


def _check(entry, label, lists, ints):
    return None


def _requirements(rule):
    # The option names (plain words: they are strings in `add_argument`).
    return plain_words(*rule.call.options)


KIND = register(call_kind(
    "device_dispatch",
    ("options", "from", "to"),
    ("unknown_finding",),
    "a device-target value moved as one (default, choices, comparisons) or reported",
    _check,
    _requirements,
    new_index=new_list,
    index=append,
))
