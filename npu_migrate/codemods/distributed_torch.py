"""`--distributed` for PyTorch: a one-NPU training script becomes data-parallel training with
one process per NPU (DistributedDataParallel over HCCL), started by a generated launch script.

What a training script (one that builds a `torch.optim` optimizer, and has a main block or runs
at module level) gets, each an edit with a code of rules/distributed.toml:

* NPU160 `from npu_migrate_distributed import <the helpers it calls>` after the imports (the
  module is generated beside the script from npu_migrate/distributed/torch_helpers.py), a
  `distributed_setup()` call first in the main block (process group from the launcher's
  environment, `torch.npu.set_device(local_rank)`) and `distributed_cleanup()`
  (destroy_process_group) last;
* NPU161 the model wrapped with `distributed_model(...)` (DistributedDataParallel) after the
  statement that moves it to the NPU and after the last change to its parameters before the
  first loop (`model.apply(weights_init)`, a checkpoint loaded: DDP copies rank 0's parameters
  only when it wraps); `nn.DataParallel(model)` unwrapped; `state_dict()` /
  `load_state_dict()` of the model go through `unwrap_model(...)`;
* NPU162 a DistributedSampler for each training DataLoader (its `shuffle` moved into it) and
  `set_sampler_epoch(loader, epoch)` at the top of the epoch loop; without a training loader, a
  tensor batchified by the script's own function gets `rank_shard(...)`;
* NPU163 whatever writes a job output on rank 0 only, the whole statement (`torch.save`,
  `np.save`, `savefig`, a `with open(path, "w")` block, logging.basicConfig(filename=...),
  logging.FileHandler, the copy or rename that finishes a save), and
  `wait_for_main_process()` before a load of what rank 0 saved, where every rank reaches it;
* the launch script `run_distributed_<script>.sh` (torchrun / torch_npu_run) beside it.

Reported instead of guessed: scripts that are distributed already (NPU380), custom samplers
(NPU381), iterable data sets (NPU382), manual all-reduce (NPU383), no place to wrap the model
(NPU385), a writing block that sets names (NPU391), a load inside a condition (NPU392);
advice: the global batch grows with the number of NPUs (NPU384), a fixed device index or a
one-device *_VISIBLE_DEVICES pin puts every process on one NPU (NPU386), model attributes DDP
does not have (NPU387), data no rank splits (NPU393), a per-process seed that splits the data
(NPU394), a library writer made on every rank (NPU395: ppe's LogReport, TensorBoard's SummaryWriter), Opacus' make_private sampling each
rank's batches and skipping an empty draw (NPU396). A script that imports the helpers already only gets the generated files refreshed,
so a second run changes nothing; one with the helper block of version 1 gets the import in its
place. What the pass reads in the script is in distributed_torch_analysis.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Set, Tuple

import libcst as cst

from ..context import Context
from ..distributed import HELPERS_MODULE, launch_script_name, render_helpers, render_torch_launcher
from ..imports import dotted_name
from . import distributed_common as common
from .distributed_torch_analysis import MODULE_API, Loader, Move, TorchAnalysis, moves_model, parameters_of
from .syntax import is_main_guard, keyword_arg, leading_lines, sole_call
from ..codes import emits
from ..fast_visitor import subtree

# ----------------------------------------------------------------------------- decisions


@dataclass
class Plan:
    moves: List[Move]  # one per model an optimizer trains

    @property
    def models(self) -> List[str]:
        return [m.name for m in self.moves]
    loaders: List[Loader] = field(default_factory=list)  # training loaders to give a sampler
    epoch_loops: List[Tuple[cst.For, List[str]]] = field(default_factory=list)  # loop, loader names
    hoist: Dict[int, str] = field(default_factory=dict)  # id(loader call) -> dataset variable to make
    unwrap: Dict[int, str] = field(default_factory=dict)  # id(`model.attr` DDP lacks) -> model
    shards: List[Tuple[cst.BaseStatement, str]] = field(default_factory=list)  # `x = batchify(...)`, x
    barriers: List[cst.BaseStatement] = field(default_factory=list)  # wait_for_main_process() before these


def _training_loaders(a: TorchAnalysis) -> List[Loader]:
    loaders = a.loaders
    for loader in loaders:
        text = " ".join(filter(None, [loader.target or "", a.module.code_for_node(loader.dataset)
                                      if loader.dataset is not None else ""]))
        shuffle = keyword_arg(loader.call, "shuffle")
        if common.is_eval_name(text):
            loader.training = False
        elif "train" in text.lower() or (shuffle is not None and not _false(shuffle.value)) or len(loaders) == 1:
            loader.training = True
    return [loader for loader in loaders if loader.training]


def _false(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value in ("False", "None")


def _run_scopes(a: TorchAnalysis) -> Optional[List[cst.CSTNode]]:
    """The scopes a script's main block runs (common.run_scopes); None without a main block (a
    module: its caller decides)."""
    return common.run_scopes(a.module, a.main_guard) if a.main_guard is not None else None


def _find_move(a: TorchAnalysis, model: str) -> Optional[Move]:
    """The last statement that puts `model` on the device, in the scope that builds the optimizer
    (or, when the optimizer is built elsewhere, anywhere): as a statement of that scope's body."""
    scopes = [scope for call, scope in a.optimizers if any(model in parameters_of(arg.value) for arg in call.args[:1])]
    run = _run_scopes(a)
    if run is not None and any(any(s is r for r in run) for s in scopes):
        # e3nn's examples/tetris.py: main() trains `f` on the CPU, profile() (which nothing
        # runs) moves its own `f` to "cuda": the model to wrap is the one the script runs, and
        # a move only the other function makes is none (NPU385).
        scopes = [s for s in scopes if any(s is r for r in run)]
    candidates: List[Tuple[cst.BaseStatement, cst.CSTNode]] = []
    for assigned in a.assignments.values():
        for name, stmt, scope, value in assigned:
            if name == model and moves_model(value, model):
                candidates.append((stmt, scope))
    for name, stmt, scope in a.expr_moves:
        if name == model and stmt is not None:
            candidates.append((stmt, scope))
    if run is not None and any(any(s is r for r in run) for s in scopes):
        candidates = [c for c in candidates if any(c[1] is r for r in run)]
    in_scope = [c for c in candidates if any(c[1] is s for s in scopes)]
    chosen = in_scope or (candidates if len({id(c[1]) for c in candidates}) == 1 else [])
    if not chosen:
        return None
    scope = chosen[0][1]
    body = list(scope.body if isinstance(scope, cst.Module) else scope.body.body)  # type: ignore[attr-defined]
    # The statements of the scope's own body that hold a move (a move inside `if use_cuda:`
    # is wrapped after that `if`).
    positions = []
    for stmt, _ in chosen:
        top = _top_of(body, stmt)
        if top is not None:
            positions.append(top)
    # A script whose whole body is under `if __name__ == "__main__":` (cleanrl's): the scope is
    # the module, but the wrap goes inside that block, after the move and before its training
    # loop, not after the block (then DDP would wrap the model only once training is over).
    while positions and len(set(positions)) == 1 and is_main_guard(body[positions[0]]):
        body = list(body[positions[0]].body.body)
        positions = [top for top in (_top_of(body, stmt) for stmt, _ in chosen) if top is not None]
    if not positions:
        return None
    at = max(positions)
    # DDP copies rank 0's parameters to every process once, when it wraps: after the last change
    # to them (`model.apply(weights_init)` with an unseeded RNG, a checkpoint loaded), before
    # the first loop (training).
    loops = [i for i in range(at + 1, len(body)) if isinstance(body[i], (cst.For, cst.While))]
    end = loops[0] if loops else len(body)
    first = at + 1
    for name, node in a.parameter_changes:
        top = _top_of(body[first:end], node) if name == model else None
        if top is not None:
            at = max(at, first + top)
    return Move(body[at], model, scope)


def _top_of(body: List[cst.BaseStatement], stmt: cst.CSTNode) -> Optional[int]:
    for i, top in enumerate(body):
        if top is stmt or _contains(top, stmt):
            return i
    return None


def _contains(tree: cst.CSTNode, node: cst.CSTNode) -> bool:
    found = []

    class Finder(cst.CSTVisitor):
        def on_visit(self, n: cst.CSTNode) -> bool:
            if n is node:
                found.append(n)
            return not found

    tree.visit(Finder())
    return bool(found)


@emits("NPU380", "NPU381", "NPU382", "NPU383", "NPU385")
def plan(ctx: Context, a: TorchAnalysis, report: bool) -> Optional[Plan]:
    """What to do, or None (reported when `report`)."""
    def say(code: str, node: cst.CSTNode, api: str, **values: str) -> None:
        if report:
            common.report(ctx, code, node, api, **values)  # type: ignore[arg-type]

    if a.all_reduce:
        for node, api in a.all_reduce:
            say("NPU383", node, api)
        return None
    if a.distributed:
        node, api = a.distributed[0]
        say("NPU380", node, api)
        return None
    if not a.optimizers:
        if a.backward and (a.main_guard is not None or _module_level_call(a)
                           or any(isinstance(scope, cst.Module) for _, scope in a.backward)):
            say("NPU385", a.backward[0][0], "backward()", why="a training step without a torch.optim optimizer, so no model known to train")
        return None  # not a training script
    if not a.model_names:
        say("NPU385", a.optimizers[0][0], "optimizer", why="the optimizer's parameters are not read from a model here")
        return None
    if a.main_guard is None and not any(isinstance(scope, cst.Module) for _, scope in a.optimizers) \
            and not _module_level_call(a):
        return None  # a library module: its caller is the script to convert
    blocked = False
    training = _training_loaders(a)
    for loader in training:
        if loader.problem is not None:
            code, api, why = loader.problem
            say(code, loader.call, api, why=why)
            blocked = True
        elif isinstance(loader.dataset, cst.Name) and loader.dataset.value in _iterable_values(a):
            say("NPU382", loader.call, loader.dataset.value)
            blocked = True
    for node, api in a.iterable:
        say("NPU382", node, api)
        blocked = True
    moves = []
    for model in a.model_names:
        move = _find_move(a, model)
        if move is None:
            say("NPU385", a.optimizers[0][0], f"{model}.parameters()", why=f"no statement found that puts `{model}` on the NPU")
            blocked = True
        else:
            # CleanRL's agents: `agent` itself is never called, its forward passes are its methods
            # (`agent.get_action_and_value(...)`), which the wrapper would not average: wrapping it
            # would make no rank's training distributed.
            methods = [node for node, _ in _wrapped_attributes(a, [move]) if id(node) in a.called_attributes]
            if methods and _only_attributes_of(a.module, model):
                method = methods[0].attr.value
                say("NPU385", methods[0], f"{model}.{method}(...)",
                    why=f"`{model}` is never called, only its methods are: DistributedDataParallel averages the "
                        f"gradients of its own forward passes only, so wrapping it would average none")
                blocked = True
        moves.append(move)
    if blocked:
        return None
    result = Plan(moves=moves, loaders=training)  # type: ignore[arg-type]
    names = [loader.target for loader in training if loader.target]
    for loop, scope in a.epoch_loops:
        used = [n for n in names if _uses_name(loop, n) or _assigned_in(a, scope, n)]
        if used:
            result.epoch_loops.append((loop, used))
    for loader in training:
        if not isinstance(loader.dataset, (cst.Name, cst.Attribute)):
            result.hoist[id(loader.call)] = _dataset_name(a, loader)
    for node, move in _wrapped_attributes(a, moves):  # type: ignore[arg-type]
        result.unwrap[id(node)] = move.name
    if not training:
        result.shards = _tensor_shards(a)
    result.barriers = [stmt for path, stmt, conditional in a.loads if path in a.saved_paths and not conditional]
    return result


def _tensor_shards(a: TorchAnalysis) -> List[Tuple[cst.BaseStatement, str]]:
    """Training data batchified from one long tensor (a language model's `train_data =
    batchify(corpus.train, bsz)`): each rank takes its contiguous slice of the batches. The
    function must be the script's own and cut the tensor itself (`.narrow`/`.view`)."""
    found = []
    for assigned in a.assignments.values():
        for name, stmt, _, value in assigned:
            if "train" not in name.lower() or common.is_eval_name(name) or not isinstance(value, cst.Call) \
                    or not isinstance(value.func, cst.Name):
                continue
            function = a.functions.get(value.func.value)
            if function is not None and _cuts_tensor(function):
                found.append((stmt, name))
    return found


def _cuts_tensor(function: cst.FunctionDef) -> bool:
    found = []

    class Finder(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> None:
            if isinstance(call.func, cst.Attribute) and call.func.attr.value in ("narrow", "view", "reshape"):
                found.append(call)

    function.visit(Finder())
    return bool(found)


def _whole_model_saves(a: TorchAnalysis, p: Plan) -> List[cst.Call]:
    """torch.save(model, ...) of a whole model that is wrapped: pickling the wrapper would tie the
    file to DistributedDataParallel and its `module.` keys."""
    return [c for c in a.save_calls if c.args and c.args[0].keyword is None and not c.args[0].star
            and isinstance(c.args[0].value, cst.Name) and c.args[0].value.value in p.models]


def _wrapped_attributes(a: TorchAnalysis, moves: List[Move]) -> List[Tuple[cst.Attribute, Move]]:
    """`model.attr` that DistributedDataParallel lacks (model.init_hidden, model.config) where
    `model` may be the wrapper: after the wrapping statement in its scope, and anywhere in other
    scopes (a function given the model). They go through unwrap_model(), a no-op on anything
    that is not the wrapper."""
    found = []
    for move in moves:
        body = list(move.scope.body if isinstance(move.scope, cst.Module) else move.scope.body.body)  # type: ignore[attr-defined]
        for node, name, scope, _ in a.attributes:
            attr = node.attr.value
            if name != move.name or attr in MODULE_API or attr.startswith("__"):
                continue
            if scope is move.scope and not _after_wrap(body, move.statement, node):
                continue  # before the model is wrapped: still the model itself
            found.append((node, move))
    return found


def _only_attributes_of(module: cst.Module, name: str) -> bool:
    """Every use of the name `name` in the module is `name.attr` or an assignment to it: the object
    it names is never called, passed, returned or kept elsewhere (a parameter of that name is a use)."""
    allowed: Set[int] = set()
    uses: List[cst.Name] = []

    class Finder(cst.CSTVisitor):
        def visit_Attribute(self, node: cst.Attribute) -> None:
            allowed.add(id(node.attr))  # (`args.agent` names no variable)
            if isinstance(node.value, cst.Name):
                allowed.add(id(node.value))

        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            if isinstance(node.target, cst.Name):
                allowed.add(id(node.target))

        def visit_Name(self, node: cst.Name) -> None:
            if node.value == name:
                uses.append(node)

    module.visit(Finder())
    return all(id(use) in allowed for use in uses)


def _after_wrap(body: List[cst.BaseStatement], wrap: cst.BaseStatement, node: cst.CSTNode) -> bool:
    """`node` is in a statement of `body` after the one the model is wrapped after, looking inside
    the `if __name__ == "__main__":` block that holds both, as _find_move puts the wrap there (a
    script that trains in its main block, cleanrl's: its `agent.get_value(...)` there follows the wrap)."""
    while True:
        wrapped_at, at = _top_of(body, wrap), _top_of(body, node)
        if wrapped_at is None or at is None:
            return False
        if at != wrapped_at:
            return at > wrapped_at
        holder = body[at]
        if holder is wrap or not is_main_guard(holder) or not isinstance(holder.body, cst.IndentedBlock):
            return False  # in the wrapping statement itself, or in a block the wrap follows
        body = list(holder.body.body)


def _module_level_call(a: TorchAnalysis) -> bool:
    return any(isinstance(s, cst.SimpleStatementLine) and sole_call(s) is not None
               for s in a.user_module.body)


def _iterable_values(a: TorchAnalysis) -> Set[str]:
    names = set()
    for assigned in a.assignments.values():
        for name, _, _, value in assigned:
            if isinstance(value, cst.Call) and (dotted_name(value.func) or "") in a.iterable_classes:
                names.add(name)
    return names


def _uses_name(tree: cst.CSTNode, name: str) -> bool:
    found = []

    class Finder(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            if n.value == name:
                found.append(n)

    tree.visit(Finder())
    return bool(found)


def _assigned_in(a: TorchAnalysis, scope: cst.CSTNode, name: str) -> bool:
    return any(n == name for n, _, _, _ in a.assignments.get(id(scope), ()))


def _dataset_name(a: TorchAnalysis, loader: Loader) -> str:
    base = loader.target or "train_loader"
    stem = base[: -len("loader")].rstrip("_") if base.endswith("loader") else base
    candidate = f"{stem}_dataset" if stem else "train_dataset"
    taken = {n for assigned in a.assignments.values() for n, _, _, _ in assigned}
    while candidate in taken or _uses_name(a.module, candidate):
        candidate += "_"
    return candidate


# ----------------------------------------------------------------------------- rewriting


def _parse_expr(code: str) -> cst.BaseExpression:
    return cst.parse_expression(code)


def _if_main(stmt: cst.BaseStatement, module: cst.Module) -> cst.If:
    """`if is_main_process():` around a statement (its comments stay above the `if`)."""
    inner = stmt.with_changes(leading_lines=[])
    return cst.If(test=_parse_expr("is_main_process()"),
                  body=cst.IndentedBlock(body=[inner]),
                  leading_lines=leading_lines(stmt))


def _unwrapped(model: cst.BaseExpression) -> cst.Call:
    """`unwrap_model(model)`: the model inside DistributedDataParallel (a no-op on a plain model)."""
    return cst.Call(func=cst.Name("unwrap_model"), args=[cst.Arg(model)])


class _Rewriter(common.StatementInserter):
    def __init__(self, ctx: Context, a: TorchAnalysis, p: Plan) -> None:
        super().__init__()
        self.ctx, self.a, self.p = ctx, a, p
        self.module = a.module
        self.loader_calls = {id(loader.call): loader for loader in p.loaders}
        self.data_parallel = {id(c) for c in a.data_parallel}
        self.wrap = {id(s) for s in a.saves + a.log_configs + a.writes + a.write_withs}
        self.handlers = {id(c) for c in a.file_handlers}
        self.state_calls = {id(c) for c in a.state_dict_calls if c.func.value.value in p.models}  # type: ignore[attr-defined]
        self.whole_model_saves = {id(c) for c in _whole_model_saves(a, p)}
        self.loops = {id(loop): names for loop, names in p.epoch_loops}
        for move in p.moves:
            self.insert_after.setdefault(id(move.statement), []).append(
                common.statement(f"{move.name} = distributed_model({move.name})\n", self.module))
        for loader in p.loaders:
            name = p.hoist.get(id(loader.call))
            if name is not None:
                code = f"{name} = {self.module.code_for_node(loader.dataset)}\n"  # type: ignore[arg-type]
                self.insert_before.setdefault(id(loader.statement), []).append(common.statement(code, self.module))
        for stmt, name in p.shards:
            self.insert_after.setdefault(id(stmt), []).append(common.statement(f"{name} = rank_shard({name})\n", self.module))
        for stmt in p.barriers:
            self.insert_before.setdefault(id(stmt), []).append(common.statement("wait_for_main_process()\n", self.module))
        self.removed_data_parallel: List[cst.Call] = []
        self.guards: Set[int] = set()  # id() of the `if is_main_process():` statements made here

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.Attribute:
        model = self.p.unwrap.get(id(original))
        if model is None:
            return updated
        return updated.with_changes(value=_unwrapped(updated.value))

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        key = id(original)
        if key in self.data_parallel:
            positional = [a for a in updated.args if a.keyword is None and not a.star]
            inner = keyword_arg(updated, "module") or (positional[0] if positional else None)
            if inner is not None:
                self.removed_data_parallel.append(original)
                return inner.value
        if key in self.loader_calls:
            return self._loader(self.loader_calls[key], updated)
        if key in self.handlers:
            return cst.IfExp(test=_parse_expr("is_main_process()"), body=updated,
                             orelse=_parse_expr("logging.NullHandler()"),
                             lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        if key in self.whole_model_saves:  # torch.save(model, f): the model, not its wrapper
            first = updated.args[0]
            return updated.with_changes(args=[
                first.with_changes(value=_unwrapped(first.value)),
                *updated.args[1:]])
        if key in self.state_calls:
            func = updated.func
            return updated.with_changes(func=func.with_changes(
                value=_unwrapped(func.value)))  # type: ignore[attr-defined]
        return updated

    def _loader(self, loader: Loader, call: cst.Call) -> cst.Call:
        dataset_name = self.p.hoist.get(id(loader.call))
        args = list(call.args)
        if dataset_name is not None:
            at = next(i for i, a in enumerate(args) if (a.keyword is None and not a.star) or
                      (a.keyword is not None and a.keyword.value == "dataset"))
            args[at] = args[at].with_changes(value=cst.Name(dataset_name))
        dataset = dataset_name or self.module.code_for_node(loader.dataset)  # type: ignore[arg-type]
        shuffle = next((i for i, a in enumerate(args) if a.keyword is not None and a.keyword.value == "shuffle"), None)
        double_star = next((i for i, a in enumerate(args) if a.star == "**"), None)
        if shuffle is not None:
            value = self.module.code_for_node(args[shuffle].value)
            args[shuffle] = args[shuffle].with_changes(
                keyword=cst.Name("sampler"),
                value=_parse_expr(f"distributed_sampler({dataset}, shuffle={value})"))
        elif double_star is not None:
            value = self.module.code_for_node(args[double_star].value)
            args[double_star] = args[double_star].with_changes(
                value=_parse_expr(f"distributed_loader_args({dataset}, {value})"))
        else:
            last = args[-1]
            comma = last.comma if last.comma is not cst.MaybeSentinel.DEFAULT else cst.MaybeSentinel.DEFAULT
            args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            args.append(cst.Arg(keyword=cst.Name("sampler"), value=_parse_expr(f"distributed_sampler({dataset}, shuffle=False)"),
                                equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                                      whitespace_after=cst.SimpleWhitespace("")),
                                comma=comma if isinstance(comma, cst.Comma) else cst.MaybeSentinel.DEFAULT))
        return call.with_changes(args=args)

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine):
        if id(original) in self.wrap:
            return self._guard(updated)
        return updated

    def leave_With(self, original: cst.With, updated: cst.With):
        if id(original) in self.wrap:
            return self._guard(updated)
        return updated

    def _guard(self, stmt: cst.BaseStatement) -> cst.If:
        guard = _if_main(stmt, self.module)
        self.guards.add(id(guard))
        return guard

    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock) -> cst.IndentedBlock:
        updated = super().leave_IndentedBlock(original, updated)
        return updated.with_changes(body=self._merge_guards(updated.body))

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        updated = super().leave_Module(original, updated)
        return updated.with_changes(body=self._merge_guards(updated.body))

    def _merge_guards(self, body: Sequence[cst.BaseStatement]) -> List[cst.BaseStatement]:
        """Writes that follow each other share one `if is_main_process():`."""
        merged: List[cst.BaseStatement] = []
        for stmt in body:
            last = merged[-1] if merged else None
            if id(stmt) in self.guards and last is not None and id(last) in self.guards and not leading_lines(stmt):
                # both are the `if is_main_process():` blocks this pass made
                joined = last.with_changes(body=last.body.with_changes(body=[*last.body.body, *stmt.body.body]))  # type: ignore[attr-defined]
                self.guards.add(id(joined))
                merged[-1] = joined
            else:
                merged.append(stmt)
        return merged

    def leave_For(self, original: cst.For, updated: cst.For) -> cst.For:
        names = self.loops.get(id(original))
        if not names or not isinstance(updated.body, cst.IndentedBlock):
            return updated
        epoch = original.target.value  # type: ignore[attr-defined]
        calls = [common.statement(f"set_sampler_epoch({n}, {epoch})\n", self.module) for n in names]
        return updated.with_changes(body=updated.body.with_changes(body=[*calls, *updated.body.body]))


def _add_setup_and_cleanup(module: cst.Module) -> cst.Module:
    """`distributed_setup()` first in the main block and `distributed_cleanup()` last in it; a
    script without one (its setup call is already after the helper block) gets the cleanup at
    the end."""
    setup = common.statement("distributed_setup()\n", module)
    cleanup = common.statement("distributed_cleanup()\n", module)
    body = list(module.body)
    for i, stmt in enumerate(body):
        if is_main_guard(stmt) and isinstance(stmt.body, cst.IndentedBlock):
            inner = list(stmt.body.body)
            first = inner[0]
            inner[0] = first.with_changes(leading_lines=[])
            inner = [setup.with_changes(leading_lines=leading_lines(first)), *inner, cleanup]
            body[i] = stmt.with_changes(body=stmt.body.with_changes(body=inner))
            return module.with_changes(body=body)
        if is_main_guard(stmt) and isinstance(stmt.body, cst.SimpleStatementSuite):
            # `if __name__ == "__main__": main()` on one line: both calls on that line (the
            # cleanup appended after the block would run on import, and no setup ran at all).
            semicolon = cst.Semicolon(whitespace_after=cst.SimpleWhitespace(" "))
            *others, last = stmt.body.body
            smalls = [cst.Expr(cst.Call(cst.Name("distributed_setup")), semicolon=semicolon), *others,
                      last.with_changes(semicolon=semicolon), cst.Expr(cst.Call(cst.Name("distributed_cleanup")))]
            body[i] = stmt.with_changes(body=stmt.body.with_changes(body=smalls))
            return module.with_changes(body=body)
    return module.with_changes(body=[*body, cleanup])


@emits("NPU161", "NPU387")
def _attribute_findings(ctx: Context, a: TorchAnalysis, p: Plan) -> None:
    """Each `model.attr` that now goes through unwrap_model() is an edit; a method called that
    way (`model.init_hidden(...)`) also gets NPU387, in case it runs a training forward pass."""
    called = set()
    for node, _name, _, _ in a.attributes:
        model = p.unwrap.get(id(node))
        if model is None:
            continue
        attr = node.attr.value
        common.edit(ctx, "NPU161", node, f"{model}.{attr}", f"unwrap_model({model}).{attr}", model=model)
        if id(node) in a.called_attributes and attr not in called:
            called.add(attr)
            common.report(ctx, "NPU387", node, f"{model}.{attr}(...)", model=model, attr=attr)


# Library objects that write files on every process they are made in (the keyword that makes
# one rank the writer, if the library has one): pytorch-pfn-extras' LogReport writes `<out>/log`
# on every rank (found by a 2-process rehearsal of ppe's MNIST example after --distributed: "files
# written by more than one rank: result/log"); TensorBoard's SummaryWriter an events file of its
# own per process (CleanRL 1.2.0's ddpg/td3 scripts: N copies of every scalar in the run's folder,
# N runs in TensorBoard).
_LIBRARY_WRITERS = {
    "pytorch_pfn_extras.training.extensions.LogReport": None,
    "pytorch_pfn_extras.training.extensions.PlotReport": None,
    "pytorch_pfn_extras.training.extensions.snapshot": "saver_rank",
    "pytorch_pfn_extras.training.extensions.snapshot_object": "saver_rank",
    "torch.utils.tensorboard.SummaryWriter": None,
    "torch.utils.tensorboard.writer.SummaryWriter": None,
    "tensorboardX.SummaryWriter": None,
    "tensorboardX.writer.SummaryWriter": None,
}
_LIBRARY_WRITER_WORDS = ("pytorch_pfn_extras", "SummaryWriter")


def _library_writers(ctx: Context) -> List[Tuple[cst.Call, str]]:
    """The library writers the script makes (NPU395): the rewrite puts the script's own writes
    under is_main_process() (NPU163), but a writer a library makes writes from inside it."""
    if not any(word in ctx.text for word in _LIBRARY_WRITER_WORDS):
        return []
    found = []
    for node in subtree(ctx.module):
        if isinstance(node, cst.Call):
            qual = ctx.imports.resolve(node.func)
            if qual in _LIBRARY_WRITERS and not any(
                    a.keyword is not None and a.keyword.value == _LIBRARY_WRITERS[qual] for a in node.args):
                found.append((node, qual.rsplit(".", 1)[-1]))
    return found


# Opacus' PrivacyEngine methods that swap the training DataLoader for Poisson sampling; with the
# model in DistributedDataParallel (opacus 1.6.0 privacy_engine.py: `distributed = isinstance(module,
# (DPDDP, DDP, FSDPModule))`) each rank draws its own batches and skips an empty draw
# (utils/uniform_sampler.py, DistributedUniformWithReplacementSampler), so the ranks can take
# different numbers of steps (found by a 2-process rehearsal of opacus' char-lstm example, -b 8).
_OPACUS_POISSON = ("make_private", "make_private_with_epsilon")


def _opacus_poisson_calls(ctx: Context) -> List[cst.Call]:
    """The make_private calls of an Opacus script that sample per rank once it is distributed
    (NPU396): not one given `poisson_sampling=False` (it keeps the loader's DistributedSampler)."""
    if "make_private" not in ctx.text or not ctx.imports.imports_module("opacus"):
        return []
    found = []
    for node in subtree(ctx.module):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
                and node.func.attr.value in _OPACUS_POISSON:
            sampling = keyword_arg(node, "poisson_sampling")
            if sampling is None or not (isinstance(sampling.value, cst.Name) and sampling.value.value == "False"):
                found.append(node)
    return found


@emits("NPU160", "NPU161", "NPU162", "NPU163", "NPU384", "NPU386", "NPU388", "NPU391", "NPU392", "NPU393", "NPU394",
       "NPU395", "NPU396")
def distribute_torch(module: cst.Module, ctx: Context) -> cst.Module:
    if not common.wanted(ctx, "torch"):
        return module
    original = TorchAnalysis(ctx.module)
    script = common.script_name(ctx)
    if original.block is not None or original.helpers_import is not None:
        # Converted by an earlier run: the generated files are brought up to date, and a helper
        # block of an earlier version becomes the import of the module.
        new_module = module
        if original.block is not None:
            new_module = common.replace_block(module, original.block, "torch", common.import_prefix(original.imports, ctx.module, ctx.path))
            common.edit(ctx, "NPU160", ctx.module.body[original.block[0]], "distributed block",
                        HELPERS_MODULE, launcher=launch_script_name("torch", script), change="replaced")
        _add_generated_files(ctx, script)
        return new_module
    p = plan(ctx, original, report=True)
    if p is None:
        return module
    current = original if module is ctx.module else TorchAnalysis(module)
    cp = plan(ctx, current, report=False)
    if cp is None or cp.models != p.models or len(cp.loaders) != len(p.loaders):
        return module  # (the torch pass changed what the plan rests on: cannot happen today)
    rewriter = _Rewriter(ctx, current, cp)
    from ..fast_visitor import transform

    new_module = transform(module, rewriter)
    # Without a main block the script's top level is the program: it joins the process group
    # right after the import, before any of its own statements runs.
    setup = [] if common.main_guard(new_module) is not None else [common.statement("distributed_setup()\n", new_module)]
    new_module = _add_setup_and_cleanup(new_module)
    new_module = common.install_helpers_import(new_module, "torch", common.import_prefix(original.imports, ctx.module, ctx.path), setup)
    _add_generated_files(ctx, script)

    # Report on the original tree (its line numbers).
    common.edit(ctx, "NPU160", original.main_guard or common.first_after_header(ctx.module), "", "distributed_setup()",
                launcher=launch_script_name("torch", script), change="inserted")
    for move in p.moves:
        common.edit(ctx, "NPU161", move.statement, "", f"{move.name} = distributed_model({move.name})", model=move.name)
    for call in original.data_parallel:
        common.edit(ctx, "NPU161", call, "DataParallel(...)", "", model=", ".join(p.models))
    for loader in p.loaders:
        common.edit(ctx, "NPU162", loader.call, "DataLoader(...)", "DataLoader(..., sampler=distributed_sampler(...))")
        size = keyword_arg(loader.call, "batch_size")
        api = ctx.module.code_for_node(size.value) if size is not None else "batch_size"
        common.report(ctx, "NPU384", loader.call, api)
    for loop, names in p.epoch_loops:
        common.edit(ctx, "NPU162", loop, "", f"set_sampler_epoch({names[0]}, ...)")
    if not p.epoch_loops and p.loaders:
        common.report(ctx, "NPU388", p.loaders[0].call, p.loaders[0].target or "DataLoader")
    for call in _whole_model_saves(original, p):
        model = call.args[0].value.value  # type: ignore[attr-defined]
        common.edit(ctx, "NPU161", call, f"torch.save({model}, ...)", f"torch.save(unwrap_model({model}), ...)", model=model)
    for stmt in original.saves + original.log_configs + original.writes + original.write_withs:
        common.edit(ctx, "NPU163", stmt, "", "if is_main_process():")
    for node, api in original.unguarded_writes:
        common.report(ctx, "NPU391", node, api)
    for call, api in _library_writers(ctx):
        common.report(ctx, "NPU395", call, api)
    for call in _opacus_poisson_calls(ctx):
        common.report(ctx, "NPU396", call, ctx.module.code_for_node(call.func))
    for stmt, name in p.shards:
        common.edit(ctx, "NPU162", stmt, "", f"{name} = rank_shard({name})")
    if not p.loaders and not p.shards:
        common.report(ctx, "NPU393", original.optimizers[0][0], "torch.optim")
    for stmt in p.barriers:
        common.edit(ctx, "NPU163", stmt, "", "wait_for_main_process()")
    for path, stmt, conditional in original.loads:
        if conditional and path in original.saved_paths:
            common.report(ctx, "NPU392", stmt, path)
    for node, api in original.visible_pins:
        common.report(ctx, "NPU386", node, api)
    per_rank = [(call, seed) for call, seed in original.seeds if seed in original.random_draws]
    if per_rank and original.random_splits:
        call, seed = per_rank[0]
        split, name = original.random_splits[0]
        common.report(ctx, "NPU394", call, f"torch.manual_seed({seed})", split=ctx.module.code_for_node(split.func))
    for call in original.file_handlers:
        common.edit(ctx, "NPU163", call, "", "... if is_main_process() else logging.NullHandler()")
    for node, api in original.fixed_devices:
        common.report(ctx, "NPU386", node, api)
    _attribute_findings(ctx, original, p)
    _drop_data_parallel_findings(ctx, original)
    return new_module


def _add_generated_files(ctx: Context, script: str) -> None:
    common.add_extra(ctx, HELPERS_MODULE + ".py", render_helpers())
    common.add_extra(ctx, launch_script_name("torch", script), render_torch_launcher(script))


def _drop_data_parallel_findings(ctx: Context, a: TorchAnalysis) -> None:
    """nn.DataParallel was replaced: its NPU305 finding (use DDP) is done with."""
    if not a.data_parallel:
        return
    ctx._pending = [p for p in ctx._pending if not (p.finding is not None and p.finding.code == "NPU305")]
