"""MindSpore GPU -> Ascend, driven by rules/mindspore.toml (interpreted by codemods/callrules/).

MindSpore runs the same script on GPUs and NPUs; what ties a script to the GPU is where it says
so: `context.set_context(device_target="GPU")` / `ms.set_context(...)` / `ms.set_device("GPU")`
(and the argparse default or the variable that feeds them) become "Ascend", and
`init("nccl")` becomes `init("hccl")`. Operators that only have GPU kernels are reported. The
device target is migrated as one value first (device_dispatch.py): its option's default and
choices, the comparisons that read it and the branch they select, or nothing of it.

Only files that use MindSpore (imports, or --framework mindspore) are touched.
"""

from __future__ import annotations

import libcst as cst

from ..context import Context
from .callrules import apply_framework_rules
from .device_dispatch import apply_device_dispatch

_CANONICAL_PREFIXES = (
    # `mindspore.communication.management` is the module `mindspore.communication` re-exports.
    ("mindspore.communication.management.", "mindspore.communication."),
)


def canonical_mindspore(qualname: str) -> str:
    for prefix, replacement in _CANONICAL_PREFIXES:
        if qualname.startswith(prefix):
            return replacement + qualname[len(prefix) :]
    return qualname


def migrate_mindspore(module: cst.Module, ctx: Context) -> cst.Module:
    if "mindspore" not in ctx.frameworks:
        return module
    keep: set = set()
    rules = ctx.rules.framework_rules.get("mindspore", ())
    for rule in rules:
        if rule.kind == "device_dispatch" and rule.spec is not None and rule.spec.literal in ctx.text:
            finding = next((r for r in rules if r.kind == "finding" and r.code == rule.spec.unknown_finding), None)
            module, kept = apply_device_dispatch(module, ctx, rule, finding)
            keep |= kept
    return apply_framework_rules(module, ctx, "mindspore", canonical_mindspore, keep=keep)
