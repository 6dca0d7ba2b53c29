"""`[[backend]]`: a distributed backend name (`"nccl"` -> `"hccl"`, in any case) where it is
certainly one: `init_process_group("nccl")`, `backend=` and `keywords`, comparisons with and
assignments to something named like a backend, argparse defaults of `--backend` options.

    [[backend]]
    code = "NPU106"
    from = "nccl"
    to = "hccl"
    keywords = ["dist_backend"]   # more arguments that are backends
    message = "..."
"""

from __future__ import annotations

from ..words import cuda_pair, quoted
from .base import Kind, by_from, new_dict, register, schema
from .device import positions


KIND = register(Kind(
    name="backend",
    # (`functions` was accepted and never applied: it is an unknown key now)
    schema=schema(("from", "to"), ("keywords",)),
    summary="a distributed backend name in strings (`\"nccl\"` -> `\"hccl\"`)",
    requirements=lambda rule: [quoted(rule.from_, ignore_case=True), cuda_pair(rule.from_)],
    new_index=new_dict,
    index=by_from,
    spec=positions,
))
