"""`[[method]]`: a method-call rename on any receiver that is not an imported module:
`x.cuda(...)` -> `x.npu(...)`. A class's own `def cuda(self)` is renamed with its callers.
Calls that do not fit torch's own signature of the method (codemods/torch/methods.py)
are some other object's method and stay as they are.

    [[method]]
    code = "NPU101"
    from = "cuda"
    to = "npu"
    message = "..."
"""

from __future__ import annotations

from ..words import method_or_def
from .base import new_dict, register, Kind, by_from, from_and_to_are_identifiers, schema


KIND = register(Kind(
    name="method",
    schema=schema(("from", "to"), ()),
    summary="a method call `.from(...)` on any receiver becomes `.to(...)`",
    # `.cuda()`, and a class's own `def cuda(self)` (renamed with its callers)
    requirements=lambda rule: [method_or_def(rule.from_)],
    new_index=new_dict,
    index=by_from,
    check=from_and_to_are_identifiers,
))
