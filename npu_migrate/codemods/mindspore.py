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
from ..fast_visitor import walk
from ..kinds.device_dispatch import DeviceDispatchSpec
from .callrules import apply_framework_rules
from .device_dispatch import apply_device_dispatch
from ..codes import emits

_CANONICAL_PREFIXES = (
    # `mindspore.communication.management` is the module `mindspore.communication` re-exports.
    ("mindspore.communication.management.", "mindspore.communication."),
)


def canonical_mindspore(qualname: str) -> str:
    for prefix, replacement in _CANONICAL_PREFIXES:
        if qualname.startswith(prefix):
            return replacement + qualname[len(prefix) :]
    return qualname


class _Deprecated(cst.CSTVisitor):
    """`set_context(KEY=...)` calls whose KEY the MindSpore target reports as deprecated (NPU322):
    MindSpore 2.7 and later take the device from mindspore.set_device(), the memory from
    mindspore.runtime.set_memory(), ... (rules/targets/mindspore.toml, from each release's
    own deprecation table). Reported only: the replacement is a different call."""

    def __init__(self, ctx: Context, rule) -> None:
        super().__init__()
        self.ctx = ctx
        self.rule = rule
        self.target = ctx.options.targets.mindspore

    def visit_Call(self, node: cst.Call) -> None:
        name = canonical_mindspore(self.ctx.imports.resolve(node.func) or "")
        if name not in ("mindspore.context.set_context", "mindspore.set_context"):
            return
        for arg in node.args:
            if arg.keyword is None:
                continue
            key = arg.keyword.value
            instead = self.target.deprecated(f"mindspore.context.set_context:{key} deprecated")
            if instead is not None:
                use = instead.replace("api ", "", 1) if instead.startswith("api ") else instead
                self.ctx.finding(self.rule, arg, f"set_context({key}=...)",
                                 message=self.rule.render_message(api=f"set_context({key}=...)",
                                                                  target=self.target.label()),
                                 suggestion=self.rule.render_suggestion(instead=use or "what its documentation names"))


@emits("NPU322")
def migrate_mindspore(module: cst.Module, ctx: Context) -> cst.Module:
    if "mindspore" not in ctx.frameworks:
        return module
    # Only for a target the user or the project chose: with none given, every script's
    # set_context(device_target=...) would be reported against the newest release.
    if ctx.options.targets.mindspore.spec and "set_context" in ctx.text:
        rule = next((r for r in ctx.rules.framework_rules.get("mindspore", ())
                     if r.code == "NPU322" and r.kind == "finding"), None)
        if rule is not None:
            walk(ctx.module, _Deprecated(ctx, rule))
    keep: set = set()
    rules = ctx.rules.framework_rules.get("mindspore", ())
    for rule in rules:
        if rule.kind == "device_dispatch" and rule.spec_of(DeviceDispatchSpec).literal in ctx.text:
            finding = next((r for r in rules if r.kind == "finding" and r.code == rule.call.unknown_finding), None)
            module, kept = apply_device_dispatch(module, ctx, rule, finding)
            keep |= kept
    return apply_framework_rules(module, ctx, "mindspore", canonical_mindspore, keep=keep)
