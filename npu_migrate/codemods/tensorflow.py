"""TensorFlow 1.15 -> Ascend NPU through the TF Adapter (`npu_bridge`), driven by
rules/tensorflow.toml (interpreted by codemods/callrules.py).

What the rules do follows Huawei's convert_tf2npu tool and the helpers of npu_bridge/npu_init.py
(ascend-facts.md §4): sessions get `config=npu_config_proto(...)` (the NpuOptimizer graph
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

import libcst as cst

from ..context import Context
from ..engine import register_codemod
from .callrules import apply_framework_rules

# Spellings of the same API, mapped to the one the rules use. `tf.compat.v1.Session` and
# `import tensorflow.compat.v1 as tf` are TF 1.15's own API; Horovod's Keras bindings share the
# TensorFlow ones' names.
_CANONICAL_PREFIXES = (
    ("tensorflow.compat.v1.", "tensorflow."),
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


@register_codemod(120)
def migrate_tensorflow(module: cst.Module, ctx: Context) -> cst.Module:
    if "tensorflow" not in ctx.frameworks:
        return module
    return apply_framework_rules(module, ctx, "tensorflow", canonical_tensorflow)
