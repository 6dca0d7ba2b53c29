"""What the PyTorch `--distributed` pass reads in a script (distributed_torch.py decides and
rewrites): its optimizers and the models they train, where each model is moved to the device and
what changes its parameters after, its DataLoaders (training or evaluation, their samplers),
epoch loops, the statements that write files and the loads of saved paths, device pins and
seeds, and what makes it distributed already or unfit (custom samplers, iterable data sets,
all-reduce; an import counts only when what it binds is used)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Set, Tuple

import libcst as cst

from ..distributed import HELPERS_MODULE
from ..imports import dotted_name, imported_names
from . import distributed_common as common
from .strings import string_value
from .syntax import keyword_arg, module_beside, sole_call
from ..codes import emits

DATALOADERS = {"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"}
DATA_PARALLEL = {"torch.nn.DataParallel", "torch.nn.parallel.DataParallel",
                 "torch.nn.parallel.data_parallel.DataParallel"}
ITERABLE_DATASETS = {"torch.utils.data.IterableDataset", "torch.utils.data.dataset.IterableDataset",
                     "torch.utils.data.datapipes.datapipe.IterDataPipe", "torchdata.datapipes.iter.IterDataPipe"}
FILE_HANDLERS = {"logging.FileHandler", "logging.handlers.RotatingFileHandler",
                 "logging.handlers.TimedRotatingFileHandler", "logging.handlers.WatchedFileHandler"}
# Calls that write a file the job outputs, as a statement of their own: on rank 0 only.
FILE_WRITERS = {"torch.save", "numpy.save", "numpy.savez", "numpy.savez_compressed", "numpy.savetxt",
                "torchvision.utils.save_image", "matplotlib.pyplot.savefig", "imageio.imwrite",
                "imageio.imsave", "cv2.imwrite", "PIL.Image.Image.save", "pandas.DataFrame.to_csv",
                # what finishes a save: the best model copied, an atomic rename of the file just written
                "shutil.copyfile", "shutil.copy", "shutil.copy2", "shutil.move", "os.replace", "os.rename"}
FILE_OPENERS = {"open", "io.open", "builtins.open", "codecs.open", "gzip.open", "bz2.open", "lzma.open"}
# Calls that change a model's parameters after it is built: DDP must wrap the model after them
# (it copies rank 0's parameters to every process once, when it wraps).
PARAMETER_CHANGES = {"apply", "load_state_dict", "init_weights", "reset_parameters", "_init_weights",
                     "initialize_weights", "init_params", "weights_init"}
# A seed drawn from these differs in every process; these then split the data differently per rank.
RANDOM_DRAWS = {"random.randint", "random.randrange", "random.random", "numpy.random.randint", "time.time",
                "time.time_ns", "os.getpid"}
RANDOM_SPLITS = {"torch.utils.data.random_split", "torch.utils.data.dataset.random_split", "torch.randperm",
                 "numpy.random.permutation", "numpy.random.shuffle", "random.shuffle", "sklearn.model_selection.train_test_split"}
# Already distributed: these (or anything under torch.distributed) in the file.
DISTRIBUTED_APIS = ("torch.distributed", "torch.nn.parallel.DistributedDataParallel",
                    "torch.nn.parallel.distributed", "torch.utils.data.distributed", "torch.utils.data.DistributedSampler",
                    "torch.multiprocessing.spawn", "torch.distributed.run")
DISTRIBUTED_LIBRARIES = ("accelerate", "deepspeed", "horovod.torch", "lightning", "pytorch_lightning",
                         "torch.distributed", "colossalai", "fairscale")
# What DistributedDataParallel has of a model's API (the rest is reached through `.module`).
MODULE_API = {
    "train", "eval", "parameters", "named_parameters", "buffers", "named_buffers", "children",
    "named_children", "modules", "named_modules", "state_dict", "load_state_dict", "zero_grad", "to",
    "npu", "cuda", "cpu", "half", "float", "double", "bfloat16", "apply", "requires_grad_", "training",
    "forward", "register_forward_hook", "register_forward_pre_hook", "register_full_backward_hook",
    "module", "no_sync", "type", "share_memory", "extra_repr", "add_module", "register_buffer",
    "register_parameter", "get_submodule", "get_parameter", "to_empty", "__class__", "join",
}


@dataclass
class Loader:
    call: cst.Call
    statement: cst.BaseStatement
    scope: cst.CSTNode
    target: Optional[str]  # the name it is assigned to
    dataset: Optional[cst.BaseExpression]
    training: bool = False
    problem: Optional[Tuple[str, str, str]] = None  # (code, api, why) that stops the conversion


@dataclass
class Move:
    statement: cst.BaseStatement  # the statement of the scope's body after which the model is wrapped
    name: str
    scope: cst.CSTNode


@emits("NPU381", "NPU385")
class TorchAnalysis(common.ModuleAnalysis):
    """What the PyTorch pass needs to know about one module (the original or the current tree)."""

    def __init__(self, module: cst.Module) -> None:
        super().__init__(module)
        self.optimizers: List[Tuple[cst.Call, cst.CSTNode]] = []
        self.model_names: List[str] = []
        self.loaders: List[Loader] = []
        self.data_parallel: List[cst.Call] = []
        self.log_configs: List[cst.BaseStatement] = []
        self.file_handlers: List[cst.Call] = []
        self.epoch_loops: List[Tuple[cst.For, cst.CSTNode]] = []
        self.all_reduce: List[Tuple[cst.CSTNode, str]] = []
        self.iterable: List[Tuple[cst.CSTNode, str]] = []
        self.iterable_classes: Set[str] = set()
        self.fixed_devices: List[Tuple[cst.CSTNode, str]] = []
        self.state_dict_calls: List[cst.Call] = []
        self.backward: List[Tuple[cst.Call, cst.CSTNode]] = []
        # (node, name, scope, statement of the scope's own body around it) for `name.attr`
        self.attributes: List[Tuple[cst.Attribute, str, cst.CSTNode, Optional[cst.BaseStatement]]] = []
        self.called_attributes: Set[int] = set()  # id(`x.attr`) called as `x.attr(...)`
        self.save_calls: List[cst.Call] = []  # torch.save(...)
        self.assignments: Dict[int, List[Tuple[str, cst.BaseStatement, cst.CSTNode, cst.BaseExpression]]] = {}
        self.expr_moves: List[Tuple[str, cst.BaseStatement, cst.CSTNode]] = []
        # Files written on every rank (issue 26.1): `with open(path, "w...")` statements, guarded
        # whole; those whose body binds names the rest of the script may read (not guarded,
        # reported); statements that consist of a call writing a file.
        self.write_withs: List[cst.With] = []
        self.unguarded_writes: List[Tuple[cst.CSTNode, str]] = []
        self.writes: List[cst.BaseStatement] = []
        # (the path's code, the statement to wait before, whether it sits in an `if`) of each
        # torch.load / `with open(path, "rb")` around one, and the paths torch.save writes.
        self.saved_paths: Set[str] = set()
        self.loads: List[Tuple[str, cst.BaseStatement, bool]] = []
        self.parameter_changes: List[Tuple[str, cst.CSTNode]] = []  # (model, node): model.apply(...) etc.
        self.visible_pins: List[Tuple[cst.CSTNode, str]] = []  # os.environ["..._VISIBLE_DEVICES"] = "0"
        self.functions: Dict[str, cst.FunctionDef] = {}
        # Seeds drawn afresh in each process (`seed = random.randint(1, 10000)`) and what a
        # per-rank seed makes differ between ranks where it matters: a random split of the data.
        self.random_draws: Dict[str, cst.CSTNode] = {}  # the code of the name or attribute assigned -> the draw
        self.seeds: List[Tuple[cst.Call, str]] = []  # torch.manual_seed(x), the code of x
        self.random_splits: List[Tuple[cst.Call, str]] = []
        # An import of a distributed library is a sign only when the code uses what it imports
        # (an unused `import torch.distributed as dist` is not a use): `_used` collects the
        # libraries the code refers to.
        imported = [(node, name, lib) for node in self.imports.import_nodes for name in imported_names(node)
                    for lib in DISTRIBUTED_LIBRARIES if name == lib or name.startswith(lib + ".")]
        self._used: Set[str] = set()
        from ..fast_visitor import walk

        user = self.user_code()
        self.user_module = user
        walk(user, self)
        self.distributed[:0] = [(node, name) for node, name, lib in imported if lib in self._used]
        self.main_guard = common.main_guard(module)
        # `from npu_migrate_distributed import ...`: converted by an earlier run
        self.helpers_import = next((n for n in self.imports.import_nodes if isinstance(n, cst.ImportFrom)
                                    and module_beside(dotted_name(n.module) or "", HELPERS_MODULE)), None)

    # -- visiting ----------------------------------------------------------------------------

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        for base in node.bases:
            name = self.imports.resolve(base.value) or ""
            if name in ITERABLE_DATASETS or (dotted_name(base.value) or "") in self.iterable_classes:
                self.iterable_classes.add(node.name.value)
                self.iterable.append((node, name or dotted_name(base.value) or "IterableDataset"))

    def visit_For(self, node: cst.For) -> None:
        outer = {id(loop) for loop, _ in self.epoch_loops}
        if any(id(n) in outer for n in self.stack[:-1]):
            return  # a loop inside the epoch loop (steps)
        if isinstance(node.target, cst.Name) and ("epoch" in node.target.value.lower() or (
                isinstance(node.iter, cst.Call) and dotted_name(node.iter.func) == "range"
                and "epoch" in self.module.code_for_node(node.iter).lower())):
            self.epoch_loops.append((node, self.scope()))

    def visit_Assign(self, node: cst.Assign) -> None:
        stmt, _ = self.statement()
        if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name) and stmt is not None:
            name = node.targets[0].target.value
            self.assignments.setdefault(id(self.scope()), []).append((name, stmt, self.scope(), node.value))
        path, mode = self._opened(node.value)
        if path is not None and any(c in mode for c in "wax+") and not _per_process(path):
            # `log = open("train.log", "w")`: the file object is used later, on every rank
            self.unguarded_writes.append((node, self.module.code_for_node(node).strip()))

    def visit_Expr(self, node: cst.Expr) -> None:
        # `model.to(device)` / `model.npu()` / `model.cuda()` as a statement
        value = node.value
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) \
                and value.func.attr.value in ("to", "npu", "cuda") and isinstance(value.func.value, cst.Name):
            stmt, _ = self.statement()
            self.expr_moves.append((value.func.value.value, stmt, self.scope()))  # type: ignore[arg-type]

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.functions.setdefault(node.name.value, node)

    def visit_With(self, node: cst.With) -> None:
        for item in node.items:
            path, mode = self._opened(item.item)
            if path is None:
                continue
            if any(c in mode for c in "wax+"):
                if _per_process(path):
                    continue
                if _binds_names(node.body):
                    self.unguarded_writes.append((node, f"with open({path}, {mode!r})"))
                elif not self._inside_write():
                    self.write_withs.append(node)
                if _calls(node.body, "save"):
                    self.saved_paths.add(path)
            elif _calls(node.body, "load"):
                self._load(path, node)

    def _opened(self, node: cst.BaseExpression) -> Tuple[Optional[str], str]:
        """(the path's code, the mode) of `open(path, mode)`; (None, "") for anything else."""
        if not isinstance(node, cst.Call) or (self.imports.resolve(node.func) or dotted_name(node.func)) \
                not in FILE_OPENERS or not node.args or node.args[0].keyword is not None:
            return None, ""
        mode_arg = keyword_arg(node, "mode") or (node.args[1] if len(node.args) > 1 and node.args[1].keyword is None
                                                 else None)
        mode = string_value(mode_arg.value) if mode_arg is not None else "r"
        if mode is None:
            return None, ""
        return self.module.code_for_node(node.args[0].value), mode

    def _inside_write(self) -> bool:
        guarded = {id(w) for w in self.write_withs}
        return any(id(n) in guarded for n in self.stack[:-1])

    def _load(self, path: str, node: cst.CSTNode) -> None:
        stmt = node if isinstance(node, cst.BaseStatement) else self.statement()[0]
        if stmt is None:
            return
        scope = self.scope()
        conditional = any(isinstance(n, (cst.If, cst.IfExp, cst.While)) for n in self.stack[self.stack.index(scope):])
        self.loads.append((path, stmt, conditional))

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        target = node.target
        parent = self.stack[-2] if len(self.stack) > 1 else None
        if isinstance(parent, cst.Assign) and isinstance(parent.value, cst.Call) \
                and (self.imports.resolve(parent.value.func) or "") in RANDOM_DRAWS:
            self.random_draws[self.module.code_for_node(target)] = parent.value
        if isinstance(target, cst.Subscript) and isinstance(parent, cst.Assign) \
                and self.imports.resolve(target.value) == "os.environ" and len(target.slice) == 1 \
                and isinstance(target.slice[0].slice, cst.Index):
            self._pin(target.slice[0].slice.value, parent.value, parent)

    def _pin(self, key: cst.BaseExpression, value: cst.BaseExpression, node: cst.CSTNode) -> None:
        """A *_VISIBLE_DEVICES variable set to one device: every process would see only it."""
        name, devices = string_value(key) or "", string_value(value)
        if name.endswith("VISIBLE_DEVICES") and devices is not None and "," not in devices:
            self.visible_pins.append((node, f"os.environ[{key.value}] = {value.value}"))  # type: ignore[attr-defined]

    def visit_Import(self, node: cst.Import) -> bool:
        return False  # the names an import binds are not uses of them

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return False

    def visit_Name(self, node: cst.Name) -> None:
        self._note_use(node)

    def _note_use(self, node: cst.BaseExpression) -> None:
        name = self.imports.resolve(node)
        if name:
            self._used.update(lib for lib in DISTRIBUTED_LIBRARIES if name == lib or name.startswith(lib + "."))

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._note_use(node)
        if isinstance(node.value, cst.Name):
            scope = self.scope()
            self.attributes.append((node, node.value.value, scope, self.top_statement(scope)))

    def visit_Call(self, node: cst.Call) -> None:
        name = self.imports.resolve(node.func) or ""
        if name.startswith("torch.optim.") and name.rsplit(".", 1)[1][:1].isupper() and ".lr_scheduler" not in name:
            self.optimizers.append((node, self.scope()))
            for arg in node.args[:1]:
                self.model_names.extend(n for n in parameters_of(arg.value) if n not in self.model_names)
        elif name in DATALOADERS:
            self._loader(node)
        elif name in DATA_PARALLEL:
            self.data_parallel.append(node)
        elif name == "torch.save":
            self.save_calls.append(node)
            stmt, _ = self.statement()
            if stmt is not None and sole_call(stmt) is node and not self._inside_write():
                self.saves.append(stmt)
            if len(node.args) > 1 and not self._inside_write():
                self.saved_paths.add(self.module.code_for_node(node.args[1].value))
        elif name == "torch.load" and node.args:
            self._load(self.module.code_for_node(node.args[0].value), node)
        elif name in FILE_WRITERS or (isinstance(node.func, cst.Attribute) and node.func.attr.value == "savefig") \
                or any(self._opened(a.value)[1].strip("rbt") for a in node.args):
            stmt, _ = self.statement()
            if stmt is not None and sole_call(stmt) is node and not self._inside_write() \
                    and not _per_process(self.module.code_for_node(node)):
                self.writes.append(stmt)
        elif name in ("torch.manual_seed", "torch.random.manual_seed") and node.args:
            self.seeds.append((node, self.module.code_for_node(node.args[0].value)))
        elif name in RANDOM_SPLITS and keyword_arg(node, "generator") is None:
            self.random_splits.append((node, name))
        elif name == "os.environ.setdefault" and len(node.args) == 2:
            self._pin(node.args[0].value, node.args[1].value, node)
        elif name == "logging.basicConfig" and keyword_arg(node, "filename") is not None:
            stmt, _ = self.statement()
            if stmt is not None and sole_call(stmt) is node:
                self.log_configs.append(stmt)
        elif name in FILE_HANDLERS:
            self.file_handlers.append(node)
        elif name.startswith("torch.distributed.all_reduce") or name.endswith(".all_reduce"):
            if name.startswith("torch."):
                self.all_reduce.append((node, name))
        elif name in ("torch.npu.set_device", "torch.cuda.set_device") and node.args:
            value = node.args[0].value
            if isinstance(value, cst.Integer) or (string_value(value) or "").count(":") == 1:
                self.fixed_devices.append((node, self.module.code_for_node(value)))
        if isinstance(node.func, cst.Attribute):
            self.called_attributes.add(id(node.func))
        if isinstance(node.func, cst.Attribute) and node.func.attr.value in PARAMETER_CHANGES:
            root = node.func.value
            if isinstance(root, cst.Name):
                self.parameter_changes.append((root.value, node))
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "backward":
            self.backward.append((node, self.scope()))
        if isinstance(node.func, cst.Attribute) and node.func.attr.value in ("state_dict", "load_state_dict") \
                and isinstance(node.func.value, cst.Name):
            self.state_dict_calls.append(node)
        if name and any(name == api or name.startswith(api + ".") for api in DISTRIBUTED_APIS):
            if name.startswith("torch.distributed.all_reduce"):
                return
            self.distributed.append((node, name))

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        value = string_value(node) or ""
        if re.match(r"^(cuda|npu|gpu):[0-9]+$", value):
            self.fixed_devices.append((node, node.value))

    def _loader(self, node: cst.Call) -> None:
        stmt, _ = self.statement()
        scope = self.scope()
        target = None
        parent = self.stack[-2] if len(self.stack) > 1 else None
        if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name):
            target = parent.targets[0].target.value
        positional = [a for a in node.args if a.keyword is None and not a.star]
        dataset_arg = keyword_arg(node, "dataset") or (positional[0] if positional else None)
        loader = Loader(node, stmt, scope, target, dataset_arg.value if dataset_arg is not None else None)  # type: ignore[arg-type]
        if stmt is None or loader.dataset is None:
            loader.problem = ("NPU385", "DataLoader", "a DataLoader whose data set cannot be named, for its DistributedSampler")
        for key in ("sampler", "batch_sampler"):
            arg = keyword_arg(node, key)
            if arg is not None and not (isinstance(arg.value, cst.Name) and arg.value.value == "None"):
                loader.problem = ("NPU381", f"DataLoader({key}=...)", "")
        if len(positional) > 2:  # DataLoader(dataset, batch_size, shuffle, sampler, ...)
            loader.problem = ("NPU381", "DataLoader(dataset, batch_size, shuffle, ...)", "")
        self.loaders.append(loader)


def parameters_of(node: cst.CSTNode) -> List[str]:
    """Names `m` of every `m.parameters()` (or `m.named_parameters()`) inside an expression."""
    found: List[str] = []

    class Finder(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> None:
            if isinstance(call.func, cst.Attribute) and call.func.attr.value in ("parameters", "named_parameters"):
                root = call.func.value
                while isinstance(root, cst.Attribute):
                    root = root.value
                if isinstance(root, cst.Name) and root.value not in found:
                    found.append(root.value)

    node.visit(Finder())
    return found


def moves_model(value: cst.BaseExpression, name: str) -> bool:
    """`<...>.to(...)`, `<...>.npu(...)`, `<...>.cuda(...)`: the value assigned to `name` is on the device."""
    return isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) \
        and value.func.attr.value in ("to", "npu", "cuda")


def _binds_names(body: cst.CSTNode) -> bool:
    """Whether a block assigns a name (the rest of the script may read it on every rank)."""
    found: List[cst.CSTNode] = []

    class Finder(cst.CSTVisitor):
        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            found.append(node)

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            found.append(node)

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            found.append(node)

        def visit_For(self, node: cst.For) -> None:
            found.append(node)

    body.visit(Finder())
    return bool(found)


def _calls(body: cst.CSTNode, attr: str) -> bool:
    """Whether a block calls `<x>.<attr>(...)` (torch.save, torch.load, pickle.dump ...)."""
    found = []

    class Finder(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            if isinstance(node.func, cst.Attribute) and node.func.attr.value == attr:
                found.append(node)

    body.visit(Finder())
    return bool(found)


def _per_process(code: str) -> bool:
    """A path made for each process (`f"report_{os.getpid()}.json"`, `log_rank{rank}.txt`): every
    rank writes its own file, so it stays on every rank."""
    return re.search(r"getpid|rank", code, re.IGNORECASE) is not None
