"""`[[device]]`: the device type inside device strings, where they certainly are device
strings: `"cuda"`, `'cuda:0'`, `f"cuda:{i}"` passed as a device (`keywords`, the first argument
of `functions` and of `.methods(...)`, the second of `second_functions`), compared with or assigned to something named like a
device, argparse defaults of `--device` options, and variables passed where a device is.

    [[device]]
    code = "NPU105"
    from = "cuda"
    to = "npu"
    keywords = ["device", "map_location"]   # arguments that are devices
    functions = ["torch.device"]            # whose first argument is one
    second_functions = ["torch.cuda.set_rng_state"]  # whose second argument is one
    methods = ["to"]                        # `.to("cuda")`
    message = "..."
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Tuple

from ..words import quoted
from .base import Kind, by_from, new_dict, register, schema


@dataclass(frozen=True)
class Positions:
    """Where a [[device]] or [[backend]] literal certainly is one, besides the places every rule
    of the kind knows (codemods/torch/literals.py)."""

    keywords: Tuple[str, ...] = ()  # arguments that are devices / backends
    functions: Tuple[str, ...] = ()  # whose first argument is one
    methods: Tuple[str, ...] = ()  # `.to("cuda")`
    # whose second positional argument is one (`torch.cuda.set_rng_state(state, "cuda:0")`)
    second_functions: Tuple[str, ...] = ()

    @property
    def any(self) -> bool:
        return bool(self.keywords or self.functions or self.methods or self.second_functions)


def positions(entry: Dict[str, Any], label: str, framework: str) -> Positions:
    """(rules.py checked the keys are lists of strings.)"""
    return Positions(*(tuple(entry.get(key, ())) for key in ("keywords", "functions", "methods", "second_functions")))


KIND = register(Kind(
    name="device",
    schema=schema(("from", "to"), ("keywords", "functions", "methods", "second_functions")),
    summary="a device type in device strings (`\"cuda:0\"` -> `\"npu:0\"`)",
    # Rewritten only in string literals that start with the word: "cuda", 'cuda:0', f"cuda:{i}".
    requirements=lambda rule: [quoted(rule.from_)],
    new_index=new_dict,
    index=by_from,
    spec=positions,
))
