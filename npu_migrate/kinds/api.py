"""`[[api]]`: a qualified-name rewrite, resolved through imports.

A reference to `from` (or, with `members`, to `from.<member>` for a listed member) becomes
`to`: `torch.cuda.synchronize()` -> `torch.npu.synchronize()`, also as `th.cuda`, `from torch
import cuda` and `from torch.cuda.amp import GradScaler`. The longest matching `from` wins
(RuleSet.rewrite_api), so `torch.cuda.CUDAGraph` (renamed) beats the `torch.cuda` member rule.
A rule whose `to` is its `from` keeps those names as they are, with no finding: a torch.cuda
name that is no device code (`torch.cuda.amp.grad_scaler.OptState`), held whole by
codemods/torch/references.py instead of falling to the `torch.cuda` rule's `amp` member.

    [[api]]
    code = "NPU102"
    from = "torch.cuda"
    to = "torch.npu"
    members = ["synchronize", "device_count"]   # optional: only these members
    message = "..."
"""

from __future__ import annotations

from ..words import components
from dataclasses import dataclass
from typing import Any, Dict, FrozenSet, List, Optional, Tuple

from .base import Kind, Rule, from_is_a_dotted_name, register, schema

ApiIndex = Dict[str, List[Rule]]  # `from` -> its rules (several: with different `members`)


@dataclass(frozen=True)
class ApiSpec:
    members: Optional[FrozenSet[str]] = None  # only `from.<member>` for these; None: `from` itself


def _spec(entry: Dict[str, Any], label: str, framework: str) -> ApiSpec:
    members = entry.get("members")  # (rules.py checked it is a list of strings)
    return ApiSpec(frozenset(members) if members is not None else None)


def members(rule: Rule) -> Optional[FrozenSet[str]]:
    """The members an [[api]] rule rewrites one by one; None when it rewrites `from` itself."""
    return rule.spec_of(ApiSpec).members


def _new_index() -> ApiIndex:
    return {}


def _index(index: ApiIndex, rule: Rule) -> None:
    index.setdefault(rule.from_, []).append(rule)


def rewrite_api(index: ApiIndex, qualname: str) -> Optional[Tuple[str, str, Rule]]:
    """For a qualified reference, return (matched prefix, replacement prefix, rule).

    The longest matching ``from`` wins, so ``torch.cuda.CUDAGraph`` (renamed) beats the
    generic ``torch.cuda`` member rule.
    """
    parts = qualname.split(".")
    for end in range(len(parts), 0, -1):
        prefix = ".".join(parts[:end])
        for rule in index.get(prefix, ()):
            listed = members(rule)
            if listed is None:
                return prefix, rule.to, rule
            if end < len(parts) and parts[end] in listed:
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
    spec=_spec,
))
