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
from typing import Dict, List

from .base import Kind, Rule, from_is_a_dotted_name, register, schema

ApiIndex = Dict[str, List[Rule]]  # `from` -> its rules (several: with different `members`)


def _new_index() -> ApiIndex:
    return {}


def _index(index: ApiIndex, rule: Rule) -> None:
    index.setdefault(rule.from_, []).append(rule)


def rewrite_api(index: ApiIndex, qualname: str):
    """For a qualified reference, return (matched prefix, replacement prefix, rule).

    The longest matching ``from`` wins, so ``torch.cuda.CUDAGraph`` (renamed) beats the
    generic ``torch.cuda`` member rule.
    """
    parts = qualname.split(".")
    for end in range(len(parts), 0, -1):
        prefix = ".".join(parts[:end])
        for rule in index.get(prefix, ()):
            if rule.members is None:
                return prefix, rule.to, rule
            if end < len(parts) and parts[end] in rule.members:
                return prefix, rule.to, rule
    return None


KIND = register(Kind(
    name="api",
    schema=schema(("from", "to"), ("members",)),
    summary="a qualified name (resolved through imports) becomes another",
    requirements=lambda rule: [components(rule.from_)],
    new_index=_new_index,
    index=_index,
    check=from_is_a_dotted_name,
))
