"""TensorFlow 1.15 -> Ascend NPU through the TF Adapter (`npu_bridge`), driven by
rules/tensorflow.toml (interpreted by codemods/callrules/).

What the rules do follows Huawei's convert_tf2npu tool and the helpers of npu_bridge/npu_init.py
(Ascend/tensorflow repository, tf_adapter/python/npu_bridge/npu_init.py): sessions get `config=npu_config_proto(...)` (the NpuOptimizer graph
optimizer, remapping off), `tf.estimator.RunConfig/Estimator/EstimatorSpec` become
`NPURunConfig/NPUEstimator/NPUEstimatorSpec` (or, when the estimator's config cannot be shown to
be an NPURunConfig, keep their name and get `config=npu_run_config_init(...)`), Keras scripts get
`set_keras_session_npu_config()`, Horovod calls their NPU counterparts, tf.data batches
`drop_remainder=True`, `tf.device('/gpu:0')` becomes `tf.device('/cpu:0')`; what has no NPU
path is reported. `from npu_bridge.npu_init import *` is added once, before the file's first
import, when a rewrite uses its names.

Only files that use TensorFlow (imports, or --framework tensorflow) are touched.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

import libcst as cst

from ..context import Context
from ..fast_visitor import walk
from ..frameworks import TF2_FINDING
from ..kinds.finding import match_kind_of
from ..rules import Rule
from .add_imports import add_rule_import
from .callrules import apply_framework_rules
from .npu_ops import OFFER_CODE, apply_npu_ops
from .strings import string_value
from .syntax import option_names
from ..codes import emits

# Spellings of the same API, mapped to the one the rules use. `tf.compat.v1.Session` and
# `import tensorflow.compat.v1 as tf` are TF 1.15's own API; Horovod's Keras bindings share the
# TensorFlow ones' names.
_CANONICAL_PREFIXES = (
    ("tensorflow.compat.v1.", "tensorflow."),
    ("tensorflow.compat.v2.", "tensorflow."),
    ("tensorflow.python.keras.", "tensorflow.keras."),
    ("horovod.tensorflow.keras.", "horovod.tensorflow."),
    ("horovod.keras.", "horovod.tensorflow."),
)
_CANONICAL_NAMES = {
    "tensorflow.compat.v1": "tensorflow",
    "tensorflow.python.keras": "tensorflow.keras",
    "horovod.tensorflow.keras": "horovod.tensorflow",
    "horovod.keras": "horovod.tensorflow",
}


def canonical_tensorflow(qualname: str) -> str:
    if qualname in _CANONICAL_NAMES:
        return _CANONICAL_NAMES[qualname]
    for prefix, replacement in _CANONICAL_PREFIXES:
        if qualname.startswith(prefix):
            return replacement + qualname[len(prefix) :]
    return qualname


# A GPU device name with a placeholder for its index: '/gpu:%d', '/device:GPU:{}', 'gpu:'.
_GPU_NAME_HEAD = re.compile(r"(?i)^/?(?:job:[^/]*/)?(?:replica:\d+/)?(?:task:\d+/)?(?:device:)?gpu:")
_GPU_DEFAULT = re.compile(r"(?i)^/?(?:device:)?gpu(?::\d+)?$")
_DEVICE_OPTIONS = {"device", "devices", "device_name", "gpu", "gpus", "worker_device", "ps_device"}


@emits("NPU340", "NPU353", "NPU355")
class GpuPatterns(cst.CSTVisitor):
    """What ties a TF script to GPUs at run time and has no rule of its own: device names built
    from an index ('/gpu:%d' % i, '/gpu:{}'.format(i), f'/gpu:{i}', '/gpu:' + str(i); NPU340),
    a `--device` option whose default is a GPU (NPU340), and `dataset.shard(...)` by a GPU
    count (NPU353). Reported only: the fix is one process per NPU, not a new string."""

    def __init__(self, ctx: Context, tree: Optional[cst.Module], findings: Dict[str, Rule]) -> None:
        super().__init__()
        self.ctx = ctx
        self.tree = tree
        self.findings = findings

    def report(self, code: str, node: cst.CSTNode, api: str, message: Optional[str] = None) -> None:
        rule = self.findings.get(code)
        if rule is not None and not self.ctx.suppressed(node, code):
            self.ctx.finding(rule, node, api=api, message=message, module=self.tree)

    def source(self, node: cst.CSTNode) -> str:
        return (self.tree or self.ctx.module).code_for_node(node)

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        head = string_value(node.left)
        if head is not None and isinstance(node.operator, (cst.Modulo, cst.Add)) and _GPU_NAME_HEAD.match(head):
            self.report("NPU340", node, self.source(node))

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute):
            return
        method = func.attr.value
        if method == "format":
            head = string_value(func.value)
            if head is not None and _GPU_NAME_HEAD.match(head):
                self.report("NPU340", node, self.source(node))
        elif method == "add_argument" and set(option_names(node)) & _DEVICE_OPTIONS:
            for arg in node.args:
                if arg.keyword is not None and arg.keyword.value == "default":
                    self._device_default(arg.value)
        elif method in ("DEFINE_string", "DEFINE_enum") and len(node.args) > 1 \
                and string_value(node.args[0].value) in _DEVICE_OPTIONS:  # absl / tf.app.flags
            default = next((a.value for a in node.args if a.keyword is not None and a.keyword.value == "default"),
                           node.args[1].value if node.args[1].keyword is None else None)
            if default is not None:
                self._device_default(default)
        elif method in ("DEFINE_bool", "DEFINE_boolean") and node.args:
            self._tpu_flag(node, string_value(node.args[0].value), 1)
        elif method == "add_argument" and "use_tpu" in option_names(node):
            self._tpu_flag(node, "use_tpu", None)
        elif method == "shard" and node.args:
            count = self.source(node.args[0].value)
            if "gpu" in count.lower():
                self.report("NPU353", node, f".shard({count}, ...)")

    def _device_default(self, value: cst.BaseExpression) -> None:
        text = string_value(value)
        if text is not None and _GPU_DEFAULT.match(text):
            self.report("NPU340", value, self.source(value),
                        f"the option's default `{self.source(value)}` is a GPU device: "
                        "there is no GPU device on the NPU machine.")

    def _tpu_flag(self, node: cst.Call, name: Optional[str], position: Optional[int]) -> None:
        """A `use_tpu` flag that defaults to True: the TPUEstimator runs without the TPU
        (NPU128), but the code that reads the flag would still take its TPU-only paths."""
        if name != "use_tpu":
            return
        default = next((a.value for a in node.args if a.keyword is not None and a.keyword.value == "default"), None)
        plain = [a for a in node.args if a.keyword is None]
        if default is None and position is not None and len(plain) > position:
            default = plain[position].value
        if isinstance(default, cst.Name) and default.value == "True":
            self.report("NPU355", default, "use_tpu",
                        "the flag `use_tpu` defaults to True: what reads it (the model_fn's `if use_tpu:`, "
                        "CrossShardOptimizer, TPUClusterResolver) takes TPU-only paths on the NPU machine.")

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        first = node.parts[0] if node.parts else None
        if isinstance(first, cst.FormattedStringText) and _GPU_NAME_HEAD.match(first.value) and len(node.parts) > 1:
            self.report("NPU340", node, self.source(node))


def migrate_tensorflow(module: cst.Module, ctx: Context) -> cst.Module:
    if "tensorflow" not in ctx.frameworks:
        return module
    if ctx.tensorflow2 is not None:
        return _tensorflow2(module, ctx)
    if _names_gpu_or_use_tpu(ctx.text):
        findings = {r.code: r for r in ctx.rules.framework_rules.get("tensorflow", ())
                    if match_kind_of(r) == "codemod"}
        walk(ctx.module, GpuPatterns(ctx, None, findings))
    rules = ctx.rules.framework_rules.get("tensorflow", ())
    npu_ops_used = False
    if re.search(r"dropout|gelu|max_pooling2d", ctx.text):
        offer = next((r for r in rules if r.kind == "finding" and r.code == OFFER_CODE), None)
        module, npu_ops_used = apply_npu_ops(module, ctx, canonical_tensorflow, offer)
    new = apply_framework_rules(module, ctx, "tensorflow", canonical_tensorflow)
    add_import = next((r for r in rules if r.kind == "add_import"), None)
    if npu_ops_used and add_import is not None and ctx.options.add_import and "npu_bridge.npu_init" not in new.code:
        new = add_rule_import(new, ctx, add_import)
    return new


_GPU_OR_USE_TPU = r"(?i)gpu|use_tpu"


def _names_gpu_or_use_tpu(text: str) -> bool:
    """Whether `re.search(_GPU_OR_USE_TPU, text)` finds a match, told from the text's ASCII bytes
    lowered (the regex tried every position: 9x slower on tensor2tensor's files). Only ASCII
    letters match `g`, `p`, `u`, `e`, `t` in any case; `s` also matches the long s (U+017F): where
    that is in the text, the regex decides."""
    lowered = text.encode("utf-8", "surrogatepass").lower()  # (only ASCII letters change)
    return (b"gpu" in lowered or b"use_tpu" in lowered
            or ("\u017f" in text and re.search(_GPU_OR_USE_TPU, text) is not None))


@emits(TF2_FINDING)
def _tensorflow2(module: cst.Module, ctx: Context) -> cst.Module:
    """TF 2 code: none of the TF 1.15 rules (their rewrites are for TF 1.x graphs); NPU356 at
    its first TensorFlow/Keras import says how TF 2 runs on Ascend (the pipeline keeps the
    first of the run's)."""
    rule = next((r for r in ctx.rules.framework_rules.get("tensorflow", ()) if r.code == TF2_FINDING), None)
    if rule is None:
        return module
    found = _first_tensorflow_import(module.body)
    if found is not None:
        ctx.finding(rule, found, api="tensorflow 2")
    return module


def _first_tensorflow_import(statements) -> Optional[cst.CSTNode]:
    """The first `import tensorflow…`/`keras…` among `statements` and the statements in their
    blocks (`try:`, `if:`, functions); statements only, not a walk of every node."""
    for statement in statements:
        if isinstance(statement, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
            for small in statement.body:
                if isinstance(small, (cst.Import, cst.ImportFrom)) and _imports_tensorflow(small):
                    return small
        elif isinstance(statement, cst.IndentedBlock):
            found = _first_tensorflow_import(statement.body)
            if found is not None:
                return found
        else:  # a compound statement, an except handler, an else/finally clause
            parts: List[Any] = []
            for name in ("body", "handlers", "orelse", "finalbody"):
                part = getattr(statement, name, None)
                parts.extend(part if isinstance(part, (tuple, list)) else [part] if part is not None else [])
            found = _first_tensorflow_import([p for p in parts if isinstance(p, cst.CSTNode)])
            if found is not None:
                return found
    return None


def _imports_tensorflow(node) -> bool:
    from ..imports import dotted_name

    if isinstance(node, cst.ImportFrom):
        names = [dotted_name(node.module)] if not node.relative else []
    else:
        names = [dotted_name(alias.name) for alias in node.names]
    return any(n is not None and n.split(".", 1)[0] in ("tensorflow", "keras") for n in names)
