"""PyTorch GPU -> Ascend NPU rewrites, driven by the rules in `rules/`: the `torch` pass.

One walk over the tree does every PyTorch rewrite and the reference-based findings; the code
of each rule kind is in its own module, mixed into TorchTransformer:

* references.py -- kinds api and module: qualified-name rewrites (`torch.cuda.X` ->
  `torch.npu.X`) resolved through imports, import statements, tensor type strings, and the
  findings of kind `api` (imports, calls and methods are reported by codemods/findings.py);
* methods.py -- kinds method and attribute: `.cuda()`, `.is_cuda`, a class's own `def cuda`;
* literals.py -- kinds device, backend and env: device strings, backend names and env-var
  names where they certainly are what they look like (arguments, comparisons, assignments to
  device/backend variables, argparse defaults, returns and conditional expressions that pick
  a device, pytest parameters) -- never elsewhere (device_context.py says where);
* torch_npu_import.py -- kind add_import: `import torch_npu`, added after the walk.

Code the rewrites would break is kept as it is first (guards.py: kernel guards, build gates).
"""

from __future__ import annotations

import re

import libcst as cst

from ...context import Context
from ...fast_visitor import transform
from ...project_values import reads_device_key
from .. import device_context as dc
from ..guards import (NPU_WORD_IN_TEXT, is_display_call, keep_cuda_beside_npu, keep_cuda_patched_with_npu, keep_gpu_flag,
                      plan_kept_code)
from .literals import LiteralRewrites
from .methods import MethodRewrites
from .references import ReferenceRewrites
from .torch_npu_import import add_torch_npu_import, is_torch_npu_itself

_NPU_LETTERS = re.compile("npu", re.IGNORECASE)


# `resolve` (state.py) shadows libcst's MetadataDependent.resolve, unused here (no metadata wrapper).
class TorchTransformer(ReferenceRewrites, MethodRewrites, LiteralRewrites, cst.CSTTransformer):  # type: ignore[misc]
    """The PyTorch pass's transformer. Each hook belongs to one kind's module; the hooks several
    kinds share, and the state they share, are here."""

    def __init__(self, ctx: Context) -> None:
        super().__init__()
        self.ctx = ctx
        self.imports = ctx.imports
        self._init_literals()
        self._init_references()
        plan_kept_code(ctx)
        # > 0 inside a call that only shows its arguments (print, logging, str.format, f-strings):
        # no device rewrites there, and `skip_logged` api findings are not reported.
        self._shown = 0
        # > 0 inside a call of a library with device names of its own (device_context.py).
        self._foreign = 0
        # guards.keep_cuda_beside_npu: only in files that name the NPU; the `elif`s looked at.
        # (the plain search first: NPU_WORD_IN_TEXT's lookbehind makes it try every position of
        # a file without `npu`, ~5x slower; where it finds nothing the word cannot be there)
        self._names_npu = (_NPU_LETTERS.search(ctx.text) is not None
                           and NPU_WORD_IN_TEXT.search(ctx.text) is not None)
        self._elifs: set = set()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._not_references.add(id(node.name))  # references.py
        self._functions.append(node)  # literals.py: does it return devices?

    def visit_If(self, node: cst.If) -> None:
        if self._names_npu:
            keep_cuda_beside_npu(self.ctx, node, self._elifs)  # guards.py: a chain with an NPU branch
        LiteralRewrites.visit_If(self, node)

    def visit_Assign(self, node: cst.Assign) -> None:
        if self._names_npu:
            keep_cuda_patched_with_npu(self.ctx, node, self.resolve)  # torch.cuda.amp = npu.amp

    def visit_Dict(self, node: cst.Dict) -> None:
        if self._names_npu:
            keep_cuda_beside_npu(self.ctx, node, self._elifs)  # {"cuda": "nccl", "npu": "hccl"}

    def visit_Tuple(self, node: cst.Tuple) -> None:
        if self._names_npu:
            keep_cuda_beside_npu(self.ctx, node, self._elifs)  # ("xpu", "cuda", "npu")

    def visit_List(self, node: cst.List) -> None:
        if self._names_npu:
            keep_cuda_beside_npu(self.ctx, node, self._elifs)

    def visit_Set(self, node: cst.Set) -> None:
        if self._names_npu:
            keep_cuda_beside_npu(self.ctx, node, self._elifs)

    def visit_Arg(self, node: cst.Arg) -> None:
        keep_gpu_flag(self.ctx, node)  # guards.py: `gpu=x.device.type == "cuda"` stays
        ReferenceRewrites.visit_Arg(self, node)

    def visit_Call(self, node: cst.Call) -> None:
        if is_display_call(node):
            self._shown += 1
        if dc.is_foreign_callee(self.resolve(node.func)):
            self._foreign += 1

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        self._shown += 1

    def leave_FormattedString(self, original: cst.FormattedString, updated: cst.FormattedString):
        self._shown -= 1
        return updated

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        qual = self.resolve(original)
        if qual is None:
            return self._rename_attribute(original, updated)  # methods.py
        return self._rewrite_reference(original, updated, qual)  # references.py

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        qual = self.resolve(original.func)
        if is_display_call(original):
            self._shown -= 1
        if dc.is_foreign_callee(qual):
            self._foreign -= 1
        updated = self._parametrized_devices(original, updated)  # literals.py
        updated = self._rename_method(original, updated, qual)  # methods.py
        updated = self._literal_arguments(original, updated, qual)  # literals.py
        return self._type_string_argument(original, updated, qual)  # references.py


def migrate_torch(module: cst.Module, ctx: Context) -> cst.Module:
    """The PyTorch pass (passes.py): every rewrite in one walk, then `import torch_npu`."""
    if is_torch_npu_itself(ctx.path):
        return module  # torch_npu's own code (torch_npu_import.py)
    new_module = transform(module, TorchTransformer(ctx))  # = module.visit(...), faster
    if ctx.options.device_config_keys and reads_device_key(ctx.text, ctx.options.device_config_keys):
        # A device setting another module sets to "npu" is read here (project_values.py).
        ctx.require_import("torch_npu")
    return add_torch_npu_import(new_module, ctx, ctx.rules.add_import.get("torch"))
