"""`--distributed` for TensorFlow 1.15 (TF Adapter): the 8-NPU setup of Ascend's TF guides.

A training script (one that builds a `tf.train.*Optimizer`) gets (codes in rules/distributed.toml):

* NPU164 `from npu_migrate_distributed_tf import <the helpers it calls>` after the imports: the
  module generated beside it (template npu_migrate/distributed/tensorflow_helpers.py: rank_id(),
  rank_size() from RANK_ID/RANK_SIZE, broadcast_global_variables() with hccl_ops.broadcast),
  and beside it `run_8p.sh` (one process per NPU with DEVICE_ID, RANK_ID, RANK_SIZE,
  RANK_TABLE_FILE) and the rank table template `hccl_8p.json`;
* NPU166 the optimizer wrapped in `NPUDistributedOptimizer(...)` (the gradients are averaged
  over the NPUs with HCCL);
* NPU165 `.shard(rank_size(), rank_id())` on each tf.data source it creates (other modules that
  create data sets get the same, with the helpers);
* NPU167 the initial variables broadcast from rank 0: `sess.run(broadcast_global_variables())`
  after the session's `sess.run(<global variables initializer>)`; `hooks=npu_hooks_append(...)`
  (NPUBroadcastGlobalVariablesHook) for `Estimator.train`, `TrainSpec` and
  `MonitoredTrainingSession`.

A script converted by an earlier run gets the generated files refreshed (and the helper block
earlier versions pasted into it replaced by the import). Reported: scripts distributed already (Horovod, the TF Adapter's distributed optimizer, tf.distribute;
NPU380), `from_generator` data sets (NPU382), Keras optimizers and scripts with no place to
broadcast the initial variables (NPU390: not converted).
"""

from __future__ import annotations

from typing import List, Set, Tuple

import libcst as cst

from ..context import Context
from ..kinds.finding import match_kind_of
from ..distributed import MODULES
from ..imports import dotted_name, imported_names
from ..targets.cann import CannMissing
from . import distributed_common as common
from .add_imports import add_rule_import, imported_from
from .syntax import keyword_arg, sole_call
from .tensorflow import canonical_tensorflow
from ..codes import emits

SOURCES = {"tensorflow.data.TFRecordDataset", "tensorflow.data.TextLineDataset",
           "tensorflow.data.FixedLengthRecordDataset", "tensorflow.data.Dataset.from_tensor_slices",
           "tensorflow.data.Dataset.range"}
GENERATORS = {"tensorflow.data.Dataset.from_generator"}
INITIALIZERS = {"tensorflow.global_variables_initializer", "tensorflow.initializers.global_variables",
                "tensorflow.initialize_all_variables"}
MONITORED = {"tensorflow.train.MonitoredTrainingSession"}
TRAIN_SPECS = {"tensorflow.estimator.TrainSpec"}
ALREADY = ("horovod", "npu_bridge.hccl", "tensorflow.distribute", "tensorflow.contrib.distribute")
ALREADY_NAMES = {"NPUDistributedOptimizer", "npu_distributed_optimizer_wrapper", "hccl_ops",
                 "NPUBroadcastGlobalVariablesHook", "broadcast_global_variables"}
NPU_INIT = "npu_bridge.npu_init"
# Calls that start training (last name part): in a script with no tf.train optimizer of its own,
# the optimizer is built where they go (baselines' ppo2/run_atari.py: `ppo2.learn(...)`).
TRAINING_CALLS = {"train", "learn", "fit", "fit_generator", "train_and_evaluate", "train_on_batch"}
KERAS_TRAINING = {"fit", "fit_generator", "train_on_batch"}


def _estimator_class(name: str, local: str) -> bool:
    return (name.startswith("tensorflow.estimator.") and name.endswith("Estimator")) or local in (
        "NPUEstimator", "Estimator") or name.endswith(".NPUEstimator")


class TFAnalysis(common.ModuleAnalysis):
    def __init__(self, module: cst.Module) -> None:
        super().__init__(module)
        self.optimizers: List[cst.Call] = []
        self.keras_optimizers: List[Tuple[cst.Call, str]] = []
        self.sources: List[Tuple[cst.Call, str]] = []
        self.generators: List[Tuple[cst.Call, str]] = []
        self.init_names: Set[str] = set()
        self.init_runs: List[Tuple[cst.BaseStatement, str]] = []  # (statement, session expression)
        self.estimators: Set[str] = set()
        self.hooks_calls: List[cst.Call] = []  # calls that get hooks=npu_hooks_append(...)
        self.batches: List[cst.Call] = []
        self.savers: Set[str] = set()
        self.training_calls: List[Tuple[cst.Call, str, cst.CSTNode]] = []  # (call, its callee, scope): TRAINING_CALLS
        for node in self.imports.import_nodes:
            for name in imported_names(node):
                if any(name == m or name.startswith(m + ".") for m in ALREADY):
                    self.distributed.append((node, name))
        from ..fast_visitor import walk

        walk(self.user_code(), self)

    def _name(self, node: cst.BaseExpression) -> str:
        return canonical_tensorflow(self.imports.resolve(node) or "")

    def visit_Assign(self, node: cst.Assign) -> None:
        if isinstance(node.value, cst.Call) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            name = self._name(node.value.func)
            target = node.targets[0].target.value
            if name in INITIALIZERS:
                self.init_names.add(target)
            if _estimator_class(name, dotted_name(node.value.func) or ""):
                self.estimators.add(target)
            if name == "tensorflow.train.Saver":
                self.savers.add(target)

    def visit_Name(self, node: cst.Name) -> None:
        if node.value in ALREADY_NAMES:
            self.distributed.append((node, node.value))

    def visit_Call(self, node: cst.Call) -> None:
        name = self._name(node.func)
        last = name.rsplit(".", 1)[-1]
        func = node.func
        called = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        if called in TRAINING_CALLS:
            self.training_calls.append((node, dotted_name(func) or called, self.scope()))
        if name.startswith("tensorflow.train.") and last.endswith("Optimizer") and last not in (
                "Optimizer", "SyncReplicasOptimizer"):
            self.optimizers.append(node)
        elif name.startswith("tensorflow.keras.optimizers.") and last[:1].isupper():
            self.keras_optimizers.append((node, name))
        elif name in SOURCES and not self._in_eval():
            self.sources.append((node, name))
        elif name in GENERATORS:
            self.generators.append((node, name))
        elif name in MONITORED or name in TRAIN_SPECS:
            self.hooks_calls.append(node)
            self.training_calls.append((node, dotted_name(func) or last, self.scope()))
        elif isinstance(node.func, cst.Attribute):
            method = node.func.attr.value
            if method == "run" and node.args:
                value = node.args[0].value
                init = (isinstance(value, cst.Call) and self._name(value.func) in INITIALIZERS) or (
                    isinstance(value, cst.Name) and value.value in self.init_names)
                stmt, _ = self.statement()
                if init and stmt is not None and sole_call(stmt) is node:
                    self.init_runs.append((stmt, self.module.code_for_node(node.func.value)))
            elif method == "train" and isinstance(node.func.value, cst.Name) and node.func.value.value in self.estimators:
                self.hooks_calls.append(node)
            elif method == "save" and isinstance(node.func.value, cst.Name) and node.func.value.value in self.savers:
                stmt, _ = self.statement()
                if stmt is not None and sole_call(stmt) is node:
                    self.saves.append(stmt)
            elif method == "batch" and node.args:
                self.batches.append(node)
            elif method == "shard":
                self.distributed.append((node, ".shard(...)"))

    def _in_eval(self) -> bool:
        for node in self.stack:
            if isinstance(node, cst.FunctionDef) and common.is_eval_name(node.name.value):
                return True
        return False


def _with_hooks(call: cst.Call) -> cst.Call:
    """`hooks=npu_hooks_append(hooks_list=<the hooks it had>)`."""
    hooks = keyword_arg(call, "hooks")
    if hooks is not None:
        value = cst.Call(func=cst.Name("npu_hooks_append"),
                         args=[cst.Arg(keyword=cst.Name("hooks_list"), value=hooks.value,
                                       equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))])
        return call.with_changes(args=[a.with_changes(value=value) if a is hooks else a for a in call.args])
    args = list(call.args)
    new = cst.Arg(keyword=cst.Name("hooks"), value=cst.parse_expression("npu_hooks_append()"),
                  equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))
    if args:
        trailing = args[-1].comma
        args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        if isinstance(trailing, cst.Comma):
            new = new.with_changes(comma=trailing)
    return call.with_changes(args=[*args, new])


class _Rewriter(common.StatementInserter):
    def __init__(self, a: TFAnalysis, entry: bool) -> None:
        super().__init__()
        self.sources = {id(c) for c, _ in a.sources}
        self.optimizers = {id(c) for c in a.optimizers} if entry else set()
        self.hooks = {id(c) for c in a.hooks_calls} if entry else set()
        if entry:
            for stmt, sess in a.init_runs:
                self.insert_after[id(stmt)] = [cst.parse_statement(f"{sess}.run(broadcast_global_variables())\n")]
        self.saves = {id(s) for s in a.saves} if entry else set()

    def leave_SimpleStatementLine(self, original, updated):
        if id(original) in self.saves:
            inner = updated.with_changes(leading_lines=[])
            return cst.If(test=cst.parse_expression("rank_id() == 0"), body=cst.IndentedBlock(body=[inner]),
                          leading_lines=updated.leading_lines)
        return updated

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        key = id(original)
        if key in self.sources:
            return cst.Call(func=cst.Attribute(value=updated, attr=cst.Name("shard")),
                            args=[cst.Arg(cst.parse_expression("rank_size()"),
                                          comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                                  cst.Arg(cst.parse_expression("rank_id()"))])
        if key in self.optimizers:
            return cst.Call(func=cst.Name("NPUDistributedOptimizer"), args=[cst.Arg(updated)])
        if key in self.hooks:
            return _with_hooks(updated)
        return updated


def _report_training_elsewhere(ctx: Context, a: TFAnalysis) -> None:
    """NPU390 for an entry script (a main block) that starts training (`ppo2.learn(...)`,
    `estimator.train(...)`, MonitoredTrainingSession, Keras `model.fit(...)`) with no optimizer
    class of its own: the optimizer to wrap and the variables to broadcast are built where that
    call goes (or named by a string), so the script is left one process per job, and says so (a
    script with neither is not training: nothing is said)."""
    guard = common.main_guard(ctx.module)
    if not a.training_calls or guard is None:
        return
    run = common.run_scopes(ctx.module, guard)
    # (the first the main block runs, in the file's order: the walk visits in source order; the
    # module of the walk is a copy of ctx.module's, its functions the same nodes)
    started = [(call, api) for call, api, scope in a.training_calls
               if isinstance(scope, cst.Module) or any(scope is r for r in run)]
    if not started:
        return  # (a test's `rlt.train(...)` under `tf.test.main()`: nothing the script runs)
    call, api = started[0]
    if api.rsplit(".", 1)[-1] in KERAS_TRAINING:
        why = ("a Keras model trained with an optimizer it names (`compile(optimizer='adam')`) or gets from "
               "elsewhere: build the tf.keras optimizer here, wrap it with npu_distributed_optimizer_wrapper and add "
               "NPUBroadcastGlobalVariablesCallback(0) to the callbacks")
    else:
        why = ("no tf.train optimizer in this script to wrap with NPUDistributedOptimizer: the training it starts "
               "builds its optimizer elsewhere (give --distributed the module that builds it, or the project's folder)")
    common.report(ctx, "NPU390", call, api, why=why)


def _add_npu_init(module: cst.Module, ctx: Context) -> cst.Module:
    """`from npu_bridge.npu_init import *` (NPU120): NPUDistributedOptimizer, npu_hooks_append."""
    if imported_from(module, NPU_INIT):
        return module
    rule = next((r for r in ctx.rules.framework_rules.get("tensorflow", ()) if r.kind == "add_import"), None)
    return add_rule_import(module, ctx, rule) if rule is not None else module


@emits("NPU163", "NPU164", "NPU165", "NPU166", "NPU167", "NPU321", "NPU382", "NPU384", "NPU390")
def distribute_tensorflow(module: cst.Module, ctx: Context) -> cst.Module:
    if not common.wanted(ctx, "tensorflow"):
        return module
    original = TFAnalysis(ctx.module)
    prefix = common.import_prefix(original.imports, ctx.module, ctx.path)
    if original.block is not None or common.helpers_import_of(original.imports, "tensorflow") is not None:
        # Converted by an earlier run: the generated files are brought up to date, and a helper
        # block of an earlier version becomes the import of the module.
        is_entry = common.calls_outside_block(ctx.module, "broadcast_global_variables") or any(
            isinstance(n, cst.Name) and n.value == "NPUDistributedOptimizer" for n, _ in original.distributed)
        new_module = module
        if original.block is not None:
            new_module = common.replace_block(module, original.block, "tensorflow", prefix)
            common.edit(ctx, "NPU164", ctx.module.body[original.block[0]], "distributed block",
                        MODULES["tensorflow"], change=f"moved to {MODULES['tensorflow']}.py")
        common.add_helper_files(ctx, "tensorflow", is_entry)
        return new_module
    if common.report_distributed_already(ctx, original.distributed):
        return module
    entry = bool(original.optimizers)
    if original.keras_optimizers and not entry:
        node, api = original.keras_optimizers[0]
        common.report(ctx, "NPU390", node, api, why="a Keras optimizer (wrap it with npu_distributed_optimizer_wrapper "
                      "and add NPUBroadcastGlobalVariablesCallback(0) to the callbacks)")
        return module
    if entry and not (original.init_runs or original.hooks_calls):
        common.report(ctx, "NPU390", original.optimizers[0], "tf.train optimizer",
                      why="no place found to broadcast the initial variables (sess.run of the variables "
                      "initializer, Estimator.train, MonitoredTrainingSession)")
        return module
    for call, api in original.generators:
        common.report(ctx, "NPU382", call, api)
    if not (entry or original.sources or original.generators):
        _report_training_elsewhere(ctx, original)
    if original.generators or not (entry or original.sources):
        return module
    if entry and original.hooks_calls:
        # npu_hooks_append came with the adapters of 2021 (targets/cann.py): without it the hooks
        # cannot broadcast the initial variables, and half a conversion is worse than none.
        lacking = ctx.options.targets.cann.missing(["npu_hooks_append", "npu_hooks_append:hooks_list"])
        if lacking is not None and _report_missing_helper(ctx, original.hooks_calls[0], "hooks=npu_hooks_append(...)",
                                                         lacking):
            return module
    current = original if module is ctx.module else TFAnalysis(module)
    if (len(current.sources), len(current.optimizers), len(current.init_runs), len(current.hooks_calls),
            len(current.saves)) != (len(original.sources), len(original.optimizers), len(original.init_runs),
                                    len(original.hooks_calls), len(original.saves)):
        return module
    from ..fast_visitor import transform

    new_module = transform(module, _Rewriter(current, entry))
    if entry:
        new_module = _add_npu_init(new_module, ctx)
    new_module = common.install_helpers_import(new_module, "tensorflow", prefix)
    common.add_helper_files(ctx, "tensorflow", entry)
    first = common.first_after_header(ctx.module)
    if entry:
        common.edit(ctx, "NPU164", first, "", "distributed helpers", change="inserted")
        for call in original.optimizers:
            common.edit(ctx, "NPU166", call, "", "NPUDistributedOptimizer(...)")
        for stmt, sess in original.init_runs:
            common.edit(ctx, "NPU167", stmt, "", f"{sess}.run(broadcast_global_variables())")
        for call in original.hooks_calls:
            common.edit(ctx, "NPU167", call, "", "hooks=npu_hooks_append(...)")
        for stmt in original.saves:
            common.edit(ctx, "NPU163", stmt, "", "if rank_id() == 0:")
    else:
        common.edit(ctx, "NPU164", first, "", "distributed helpers", change="inserted")
    for call, api in original.sources:
        common.edit(ctx, "NPU165", call, api, ".shard(rank_size(), rank_id())")
    for call in original.batches[:1]:
        common.report(ctx, "NPU384", call, ctx.module.code_for_node(call.args[0].value))
    return new_module


def _report_missing_helper(ctx: Context, node: cst.CSTNode, api: str, lacking: CannMissing) -> bool:
    """Report NPU321 for a rewrite a codemod of its own (not a rule) does not make because the
    CANN target lacks `lacking`; False when the rule set has no NPU321."""
    template = next((r for r in ctx.rules.rules if r.code == "NPU321" and match_kind_of(r) == "codemod"
                     and "{why}" in r.message), None)
    if template is None:
        return False
    instead = lacking.instead or "migrate it by hand as the TF Adapter guide of that release describes"
    ctx.finding(template, node, api, message=template.render_message(api=api, why=lacking.describe()),
                suggestion=template.render_suggestion(api=api, instead=instead[:1].upper() + instead[1:]))
    return True
