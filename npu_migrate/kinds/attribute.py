"""`[[attribute]]`: an attribute rename on any receiver (not a call): `x.is_cuda` -> `x.is_npu`.

    [[attribute]]
    code = "NPU104"
    from = "is_cuda"
    to = "is_npu"
    message = "..."
"""

from __future__ import annotations

from ..words import attribute
from .base import Kind, by_from, from_and_to_are_identifiers, schema


KIND = Kind(
    name="attribute",
    schema=schema(("from", "to"), ()),
    summary="an attribute `.from` on any receiver becomes `.to`",
    requirements=lambda rule: [attribute(rule.from_)],
    index=by_from("attribute"),
    check=from_and_to_are_identifiers,
)
