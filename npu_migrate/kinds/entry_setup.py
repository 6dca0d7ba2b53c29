"""`[[entry_setup]]` (framework rules, kinds/calls.py): in a file that uses `uses` and calls one
of `methods`, `setup` becomes the first and `teardown` the last statement of its
`if __name__ == "__main__":` block, unless it calls one of `skip_if_called`.
"""

from __future__ import annotations

from ..words import Requirement, Word
from .base import append, new_list, register, RuleError
from .calls import call_kind


def _check(entry, label, lists, ints):
    if not (lists["uses"] and lists["methods"]):
        raise RuleError(f"{label}: 'uses' and 'methods' must not be empty")


def _requirements(rule):
    """One of `uses` *and* a call of one of `methods`."""
    spec = rule.call
    return [
        Requirement(frozenset({Word(use.rsplit(".", 1)[-1]), Word(method)}), refs=frozenset({("attr", method)}))
        for use in spec.uses
        for method in spec.methods
    ]


KIND = register(call_kind(
    "entry_setup",
    ("uses", "methods", "setup", "teardown"),
    ("skip_if_called", "unknown_finding"),
    "setup and teardown statements in the script's main block",
    _check,
    _requirements,
    new_index=new_list,
    index=append,
))
