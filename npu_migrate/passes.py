"""The passes a parsed Python file goes through, in this order: one explicit list.

Each pass is `(module, ctx) -> module` and runs when `wanted(ctx)` says the file needs it; its
module is imported only then, so a run over PyTorch code never loads the TensorFlow, MindSpore
or ModelArts code (nor the other way round).

    torch       codemods/torch/: every PyTorch rewrite (one module per group of kinds), `import torch_npu`
    tensorflow  codemods/tensorflow.py: TensorFlow 1.x rules (codemods/callrules/)
    mindspore   codemods/mindspore.py: MindSpore rules (codemods/callrules/)
    kinds       the appliers of rule kinds no built-in pass applies (kinds/base.py `Kind.apply`),
                in registry order, where the rule set has rules of theirs
    findings    codemods/findings.py: findings no rewrite depends on (imports, calls, methods)
    distributed codemods/distributed_torch.py, distributed_mindspore.py, distributed_tf.py:
                `--distributed` (data-parallel training on several NPUs, launch scripts)
    modelarts   codemods/modelarts/: `--modelarts` adaptation of entry scripts

The findings pass reads the original tree; ModelArts plans around the migrated script, so it
comes last.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:  # pragma: no cover
    import libcst as cst

    from .context import Context

PassFunction = Callable[["cst.Module", "Context"], "cst.Module"]


def _torch(module: "cst.Module", ctx: "Context") -> "cst.Module":
    from .codemods.torch import migrate_torch

    return migrate_torch(module, ctx)


def _tensorflow(module: "cst.Module", ctx: "Context") -> "cst.Module":
    from .codemods.tensorflow import migrate_tensorflow

    return migrate_tensorflow(module, ctx)


def _mindspore(module: "cst.Module", ctx: "Context") -> "cst.Module":
    from .codemods.mindspore import migrate_mindspore

    return migrate_mindspore(module, ctx)


def _kinds(module: "cst.Module", ctx: "Context") -> "cst.Module":
    for kind in ctx.rules.applied_kinds:
        assert kind.apply is not None
        module = kind.apply(module, ctx)
    return module


def _findings(module: "cst.Module", ctx: "Context") -> "cst.Module":
    from .codemods.findings import report_findings

    return report_findings(module, ctx)


def _distributed(module: "cst.Module", ctx: "Context") -> "cst.Module":
    from .codemods.distributed_mindspore import distribute_mindspore
    from .codemods.distributed_tf import distribute_tensorflow
    from .codemods.distributed_torch import distribute_torch

    for run in (distribute_torch, distribute_mindspore, distribute_tensorflow):
        module = run(module, ctx)
    return module


def _modelarts(module: "cst.Module", ctx: "Context") -> "cst.Module":
    from .codemods.modelarts import adapt_for_modelarts

    return adapt_for_modelarts(module, ctx)


@dataclass(frozen=True)
class Pass:
    name: str
    wanted: Callable[["Context"], bool]
    run: PassFunction


PASSES = (
    Pass("torch", lambda ctx: "torch" in ctx.frameworks or not ctx.frameworks, _torch),
    Pass("tensorflow", lambda ctx: "tensorflow" in ctx.frameworks, _tensorflow),
    Pass("mindspore", lambda ctx: "mindspore" in ctx.frameworks, _mindspore),
    Pass("kinds", lambda ctx: bool(ctx.rules.applied_kinds), _kinds),
    Pass("findings", lambda ctx: True, _findings),
    Pass("distributed", lambda ctx: bool(ctx.options.distributed) and ctx.entry_script is not False, _distributed),
    Pass("modelarts", lambda ctx: bool(ctx.options.modelarts) and ctx.entry_script is not False, _modelarts),
)
