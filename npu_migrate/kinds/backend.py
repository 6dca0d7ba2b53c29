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

from ..words import quoted
from .base import new_dict, register, Kind, by_from, schema


KIND = register(Kind(
    name="backend",
    schema=schema(("from", "to"), ("keywords", "functions")),
    summary="a distributed backend name in strings (`\"nccl\"` -> `\"hccl\"`)",
    requirements=lambda rule: [quoted(rule.from_, ignore_case=True)],
    new_index=new_dict,
    index=by_from,
))
