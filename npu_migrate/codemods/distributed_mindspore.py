"""`--distributed` for MindSpore: the 8-card adaptation of the "MindSpore on the cloud" guide.

A training script (one that builds a `Model` with an optimizer, or a `TrainOneStepCell`) gets
(codes in rules/distributed.toml):

* NPU164 `from npu_migrate_distributed_ms import <the helpers it calls>` after the imports: the
  module generated beside it (template npu_migrate/distributed/mindspore_helpers.py, or
  mindspore_device_helpers.py for MindSpore 2.7 and later:
  device_id(), rank_id(), rank_size() from DEVICE_ID/RANK_ID/RANK_SIZE, and distributed_setup():
  `set_context(device_id=...)`, and with several processes `init()` and
  `set_auto_parallel_context(device_num=..., parallel_mode=DATA_PARALLEL, gradients_mean=True)`),
  a `distributed_setup()` call right after the script's own `set_context(...)` that sets the
  device target (init needs it; else its first one) or first in the main block, and `run_8p.sh` with the rank table template
  `hccl_8p.json` beside it;
* NPU165 `num_shards=rank_size(), shard_id=rank_id()` for each data set it creates (other
  modules that create data sets get the same, with the helpers but not the setup);
* NPU163 `save_checkpoint(...)` on rank 0 only.

A script converted by an earlier run gets the generated files refreshed (and the helper block
earlier versions pasted into it replaced by the import).

Reported: scripts distributed already (NPU380), a GeneratorDataset whose source may be iterable
(NPU382), a training loop of the script's own (value_and_grad: it would need
nn.DistributedGradReducer; NPU390), a program (main block) that builds data sets but trains in a
way not recognised here, such as a library's model class (NPU390: its data is not sharded alone), ModelCheckpoint callbacks, which every rank runs (NPU389),
and the global batch size (NPU384).
"""

from __future__ import annotations

from typing import List, Optional, Set, Tuple

import libcst as cst

from ..context import Context
from ..distributed import MODULES
from ..imports import dotted_name
from . import distributed_common as common
from .mindspore import canonical_mindspore
from .syntax import is_main_guard, keyword_arg, leading_lines, sole_call
from ..codes import emits

MODELS = {"mindspore.Model", "mindspore.train.Model", "mindspore.train.model.Model"}
TRAIN_CELLS = {"mindspore.nn.TrainOneStepCell", "mindspore.nn.TrainOneStepWithLossScaleCell",
               "mindspore.nn.wrap.TrainOneStepCell", "mindspore.nn.wrap.cell_wrapper.TrainOneStepCell",
               "mindspore.boost.BoostTrainOneStepCell"}
OWN_LOOPS = {"mindspore.value_and_grad", "mindspore.ops.value_and_grad", "mindspore.grad", "mindspore.ops.grad",
             "mindspore.ops.GradOperation", "mindspore.ops.composite.GradOperation"}
DISTRIBUTED = {"mindspore.communication.init", "mindspore.communication.get_rank",
               "mindspore.communication.get_group_size", "mindspore.context.set_auto_parallel_context",
               "mindspore.set_auto_parallel_context", "mindspore.nn.DistributedGradReducer"}
SET_CONTEXT = {"mindspore.context.set_context", "mindspore.set_context", "mindspore.set_device"}
SAVE = {"mindspore.save_checkpoint", "mindspore.train.serialization.save_checkpoint",
        "mindspore.train.save_checkpoint"}
CHECKPOINT_CALLBACKS = {"mindspore.ModelCheckpoint", "mindspore.train.ModelCheckpoint",
                        "mindspore.train.callback.ModelCheckpoint"}


class MindSporeAnalysis(common.ModuleAnalysis):
    def __init__(self, module: cst.Module) -> None:
        super().__init__(module)
        self.training: List[cst.Call] = []
        self.own_loops: List[Tuple[cst.Call, str]] = []
        self.datasets: List[Tuple[cst.Call, str]] = []
        self.generators: List[Tuple[cst.Call, str]] = []
        self.set_context: List[cst.BaseStatement] = []
        self.checkpoints: List[Tuple[cst.Call, str]] = []
        self.batches: List[cst.Call] = []
        self.classes_with_getitem: Set[str] = set()
        from ..fast_visitor import walk

        walk(self.user_code(), self)
        self.main_guard = common.main_guard(module)

    def _name(self, node: cst.BaseExpression) -> str:
        return canonical_mindspore(self.imports.resolve(node) or "")

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        for stmt in node.body.body:
            if isinstance(stmt, cst.FunctionDef) and stmt.name.value == "__getitem__":
                self.classes_with_getitem.add(node.name.value)

    def visit_Call(self, node: cst.Call) -> None:
        name = self._name(node.func)
        if name in MODELS:
            positional = [a for a in node.args if a.keyword is None and not a.star]
            if keyword_arg(node, "optimizer") is not None or len(positional) >= 3:
                self.training.append(node)
        elif name in TRAIN_CELLS:
            self.training.append(node)
        elif name in OWN_LOOPS:
            self.own_loops.append((node, name))
        elif name in DISTRIBUTED:
            self.distributed.append((node, name))
        elif name in SET_CONTEXT:
            stmt, _ = self.statement()
            if stmt is not None and sole_call(stmt) is node:
                self.set_context.append(stmt)
        elif name in SAVE:
            stmt, _ = self.statement()
            if stmt is not None and sole_call(stmt) is node:
                self.saves.append(stmt)
        elif name in CHECKPOINT_CALLBACKS:
            self.checkpoints.append((node, name))
        elif name.startswith("mindspore.dataset.") and name.endswith("Dataset") \
                and name.rsplit(".", 1)[1][:1].isupper() and name.count(".") == 2:
            if keyword_arg(node, "num_shards") is not None:
                self.distributed.append((node, f"{name}(num_shards=...)"))
            elif name == "mindspore.dataset.GeneratorDataset":
                self.generators.append((node, name))
            elif not self._in_eval():
                self.datasets.append((node, name))
        elif isinstance(node.func, cst.Attribute) and node.func.attr.value == "batch" and node.args:
            self.batches.append(node)

    def _in_eval(self) -> bool:
        """In a function or assigned to a name that says test/val/eval."""
        for node in self.stack:
            if isinstance(node, cst.FunctionDef) and common.is_eval_name(node.name.value):
                return True
        parent = self.stack[-2] if len(self.stack) > 1 else None
        if isinstance(parent, cst.Assign) and any(common.is_eval_name(dotted_name(t.target) or "") for t in parent.targets):
            return True
        return False


def _random_access(a: MindSporeAnalysis, call: cst.Call) -> bool:
    """A GeneratorDataset whose source is an instance of a class of this file with __getitem__."""
    source = keyword_arg(call, "source") or next((arg for arg in call.args if arg.keyword is None), None)
    if source is None:
        return False
    value = source.value
    if isinstance(value, cst.Call):
        return (dotted_name(value.func) or "") in a.classes_with_getitem
    return False


class _Rewriter(common.StatementInserter):
    def __init__(self, a: MindSporeAnalysis, datasets: List[cst.Call], setup_after: Optional[cst.BaseStatement]):
        super().__init__()
        self.a = a
        self.datasets = {id(c) for c in datasets}
        self.saves = {id(s) for s in a.saves}
        if setup_after is not None:
            self.insert_after[id(setup_after)] = [cst.parse_statement("distributed_setup()\n")]

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if id(original) not in self.datasets:
            return updated
        args = list(updated.args)
        last = args[-1] if args else None
        extra = [cst.Arg(keyword=cst.Name("num_shards"), value=cst.parse_expression("rank_size()"),
                         equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))),
                 cst.Arg(keyword=cst.Name("shard_id"), value=cst.parse_expression("rank_id()"),
                         equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))]
        if last is not None:
            trailing = last.comma
            args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            extra[0] = extra[0].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            if isinstance(trailing, cst.Comma):
                extra[1] = extra[1].with_changes(comma=trailing)
        else:
            extra[0] = extra[0].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        return updated.with_changes(args=[*args, *extra])

    def leave_SimpleStatementLine(self, original, updated):
        if id(original) in self.saves:
            inner = updated.with_changes(leading_lines=[])
            return cst.If(test=cst.parse_expression("rank_id() == 0"), body=cst.IndentedBlock(body=[inner]),
                          leading_lines=updated.leading_lines)
        return updated


def _calls_set_device(a: MindSporeAnalysis, stmt: cst.BaseStatement) -> bool:
    call = sole_call(stmt)
    return call is not None and a._name(call.func) == "mindspore.set_device"


def _setup_first_in_main(module: cst.Module) -> Optional[cst.Module]:
    """distributed_setup() first in the main block; None without one."""
    body = list(module.body)
    setup = cst.parse_statement("distributed_setup()\n")
    for i, stmt in enumerate(body):
        if is_main_guard(stmt) and isinstance(stmt.body, cst.IndentedBlock):
            inner = list(stmt.body.body)
            first = inner[0]
            inner = [setup.with_changes(leading_lines=leading_lines(first)), first.with_changes(leading_lines=[]), *inner[1:]]
            body[i] = stmt.with_changes(body=stmt.body.with_changes(body=inner))
            return module.with_changes(body=body)
    return None


def _setup_anchor(a: MindSporeAnalysis) -> int:
    """Which of the script's set_context statements distributed_setup() follows: the first that
    sets the device target (`init()` needs it: a script may set `device_id` or `mode` first), else
    the first."""
    for i, stmt in enumerate(a.set_context):
        call = sole_call(stmt)
        if call is None:
            continue
        positional = [arg for arg in call.args if arg.keyword is None and not arg.star]
        if keyword_arg(call, "device_target") is not None or (
                a._name(call.func).endswith(".set_device") and positional):
            return i
    return 0


@emits("NPU163", "NPU164", "NPU165", "NPU382", "NPU384", "NPU389", "NPU390")
def distribute_mindspore(module: cst.Module, ctx: Context) -> cst.Module:
    if not common.wanted(ctx, "mindspore"):
        return module
    original = MindSporeAnalysis(ctx.module)
    # The set-up the MindSpore target has (targets/mindspore.py): 2.7 and later deprecate
    # set_context(device_id=...) for mindspore.set_device(), which older releases lack.
    device_form = ctx.options.targets.mindspore.block_form() == "set_device"
    form = "device" if device_form else ""
    prefix = common.import_prefix(original.imports, ctx.module, ctx.path)
    if original.block is not None or common.helpers_import_of(original.imports, "mindspore") is not None:
        # Converted by an earlier run: the generated files are brought up to date, and a helper
        # block of an earlier version becomes the import of the module.
        is_entry = common.calls_outside_block(ctx.module, "distributed_setup")
        new_module = module
        if original.block is not None:
            new_module = common.replace_block(module, original.block, "mindspore", prefix)
            common.edit(ctx, "NPU164", ctx.module.body[original.block[0]], "distributed block",
                        MODULES["mindspore"], change=f"moved to {MODULES['mindspore']}.py")
        common.add_helper_files(ctx, "mindspore", is_entry, form)
        return new_module
    if common.report_distributed_already(ctx, original.distributed):
        return module
    entry = bool(original.training)
    if not entry and original.own_loops:
        node, api = original.own_loops[0]
        common.report(ctx, "NPU390", node, api,
                      why="a training loop of its own needs nn.DistributedGradReducer to average the gradients")
        return module
    if device_form and entry:
        own = next((stmt for stmt in original.set_context if _calls_set_device(original, stmt)), None)
        if own is not None:
            # mindspore.set_device cannot be called again with another device id
            # ("The 'mindspore.set_device' can not be modified"): the script's own call must take it.
            common.report(ctx, "NPU390", own, "mindspore.set_device",
                          why="the script calls mindspore.set_device itself, which cannot be called again with "
                              "this process's device: pass device_id=int(os.getenv('DEVICE_ID', '0')) to it")
            return module
    if not entry and original.main_guard is not None and (original.datasets or original.generators):
        # A program (it has a main block) that builds its data but trains in a way not recognised
        # here (a library's model class, say): sharding its data without joining the process
        # group would train each NPU alone on a part of the data.
        node, api = (original.datasets or original.generators)[0]
        common.report(ctx, "NPU390", node, api,
                      why="a program whose training is not recognised (no `Model(..., optimizer)` or "
                          "`TrainOneStepCell`): its data set is not sharded without the process group")
        return module
    blocked = False
    for call, api in original.generators:
        if not _random_access(original, call):
            common.report(ctx, "NPU382", call, api)
            blocked = True
    if blocked or not (entry or original.datasets or original.generators):
        return module
    datasets = original.datasets + [g for g in original.generators]
    current = original if module is ctx.module else MindSporeAnalysis(module)
    if len(current.datasets) + len(current.generators) != len(datasets) or len(current.set_context) != len(original.set_context):
        return module
    anchor = _setup_anchor(original)
    setup_after = current.set_context[anchor] if (entry and current.set_context) else None
    rewriter = _Rewriter(current, [c for c, _ in current.datasets + current.generators], setup_after)
    if not entry:
        rewriter.saves = set()
    from ..fast_visitor import transform

    new_module = transform(module, rewriter)
    extra: List[cst.BaseStatement] = []
    if entry and setup_after is None:
        # first in the main block; without one, right after the import (the top level is the program)
        in_main = _setup_first_in_main(new_module)
        if in_main is not None:
            new_module = in_main
        else:
            extra = [common.statement("distributed_setup()\n", new_module)]
    new_module = common.install_helpers_import(new_module, "mindspore", prefix, extra)
    common.add_helper_files(ctx, "mindspore", entry, form)

    first = common.first_after_header(ctx.module)
    if entry:
        common.edit(ctx, "NPU164", original.set_context[anchor] if original.set_context else (original.main_guard or first),
                    "", "distributed_setup()", change="inserted")
        for stmt in original.saves:
            common.edit(ctx, "NPU163", stmt, "", "if rank_id() == 0:")
        for call, api in original.checkpoints:
            common.report(ctx, "NPU389", call, api)
    else:
        common.edit(ctx, "NPU164", first, "", "distributed helpers", change="inserted")
    for call, api in datasets:
        common.edit(ctx, "NPU165", call, api, f"{api}(..., num_shards=rank_size(), shard_id=rank_id())")
    for call in original.batches[:1] if entry or original.datasets else []:
        size = call.args[0].value
        common.report(ctx, "NPU384", call, ctx.module.code_for_node(size))
    return new_module
