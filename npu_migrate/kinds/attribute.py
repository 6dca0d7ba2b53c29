"""`[[attribute]]`: an attribute rename on any receiver (not a call): `x.is_cuda` -> `x.is_npu`.

    [[attribute]]
    code = "NPU104"
    from = "is_cuda"
    to = "is_npu"
    message = "..."
"""

from __future__ import annotations

from ..words import attribute
from .base import new_dict, register, Kind, by_from, from_and_to_are_identifiers, schema


KIND = register(Kind(
    name="attribute",
    schema=schema(("from", "to"), ()),
    summary="an attribute `.from` on any receiver becomes `.to`",
    requirements=lambda rule: [attribute(rule.from_)],
    new_index=new_dict,
    index=by_from,
    check=from_and_to_are_identifiers,
))
