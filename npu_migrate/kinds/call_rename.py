"""`[[call_rename]]` (framework rules, kinds/calls.py): a call of one of `apis` becomes a call of
`to` with the same arguments when they fit `to`: at most `max_positional` positional ones,
keywords among `keywords`. With `npu_argument` (at `npu_argument_position`): only when that
argument is itself the result of a call_rename rewrite (or a variable assigned only such).

    [[call_rename]]
    code = "NPU402"
    framework = "tensorflow"
    apis = ["tensorflow.estimator.RunConfig"]
    to = "npu_bridge.estimator.npu.npu_config.NPURunConfig"
    message = "..."
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import FrozenSet, Optional

from .base import CallSpec, register, RuleError, Rule
from .calls import Entry, Ints, Lists, Written, call_kind, needs_apis, to_is_a_name, writes_code


def _check(entry: Entry, label: str, lists: Lists, ints: Ints) -> None:
    to_is_a_name(entry, label)
    needs_apis(entry, label, lists, ints)
    if ints["npu_argument_position"] is not None and "npu_argument" not in entry:
        raise RuleError(f"{label}: 'npu_argument_position' needs 'npu_argument'")


@dataclass(frozen=True)
class CallRenameSpec(CallSpec):
    """The keys of a `[[call_rename]]` rule (besides `apis` and `unknown_finding`, CallSpec's)."""

    to: str = ""
    max_positional: Optional[int] = None
    keywords: Optional[FrozenSet[str]] = None
    npu_argument: str = ""
    npu_argument_position: Optional[int] = None


def _writes(rule: Rule) -> Written:
    """The name `to` it writes, and its code."""
    to = rule.spec_of(CallRenameSpec).to
    return ((to,) if to else ()), writes_code(rule)[1]


KIND = register(call_kind(
    "call_rename",
    CallRenameSpec,
    ("apis", "to"),
    ("max_positional", "keywords", "npu_argument", "npu_argument_position", "unknown_finding"),
    "a call of an API becomes a call of another with the same arguments",
    _check,
    writes=_writes,
))
