"""`[[api]]`: a qualified-name rewrite, resolved through imports.

A reference to `from` (or, with `members`, to `from.<member>` for a listed member) becomes
`to`: `torch.cuda.synchronize()` -> `torch.npu.synchronize()`, also as `th.cuda`, `from torch
import cuda` and `from torch.cuda.amp import GradScaler`. The longest matching `from` wins
(RuleSet.rewrite_api), so `torch.cuda.CUDAGraph` (renamed) beats the `torch.cuda` member rule.

    [[api]]
    code = "NPU102"
    from = "torch.cuda"
    to = "torch.npu"
    members = ["synchronize", "device_count"]   # optional: only these members
    message = "..."
"""

from __future__ import annotations

from ..words import components
from .base import Kind, from_is_a_dotted_name, schema


def _index(rs, rule):
    rs.api.setdefault(rule.from_, []).append(rule)


KIND = Kind(
    name="api",
    schema=schema(("from", "to"), ("members",)),
    summary="a qualified name (resolved through imports) becomes another",
    requirements=lambda rule: [components(rule.from_)],
    index=_index,
    check=from_is_a_dotted_name,
)
