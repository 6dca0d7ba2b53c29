"""PyTorch GPU -> Ascend NPU rewrites, driven by the rules in `rules/`: the `torch` pass.

One walk over the tree (TorchTransformer) does every PyTorch rewrite and the reference-based
findings. The code of each rule kind is an object of its own (a `TorchKind`, state.py), which
registers itself; the walk builds each one per file, hands it the file's typed `TorchState`
(context, imports, the display/foreign-call depths) and calls its hooks -- a hook only one
kind has goes to it with no line here (walk_class), a node several kinds look at is ordered in
TorchTransformer. A new kind of the pass is one module here with a TorchKind subclass (the
package imports every module in it) and its kind module in kinds/ (spec, index, words):

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

import importlib
import re
from typing import Any, Callable, Dict, List, Sequence, Set, Tuple, Type, TypeVar

import libcst as cst

from ...context import Context
from ...fast_visitor import transform
from ...prefilter import compiled
from ...project_values import reads_device_key
from ...startup import package_modules
from .. import device_context as dc
from ..guards import (NPU_WORD_IN_TEXT, is_display_call, CUDA_CHECK_AFTER_AVAILABLE, keep_behind_cuda_test, keep_cuda_beside_npu,
                      keep_cuda_beside_its_rewrite, keep_cuda_capability_test, keep_cuda_patched_with_npu,
                      keep_cuda_tests, keep_foreign_device_tests, keep_lightning_device_arguments, keep_lightning_device_variables,
                      lightning_device_calls, keep_test_choosing_gpu, keep_test_choosing_kept_name,
                      egl_device_choices, keep_cuda_test_choosing_egl_device,
                      keep_cuda_twin_of_npu_class,
                      keep_cuda_interop, keep_gpu_flag, report_float64_reductions, report_gloo_for_device_tensors,
                      keep_library_gpu_flag, keep_library_gpu_flag_variables, cuda_library_calls, keep_cuda_library_flags, library_gpu_flag_variables, library_gpu_flags,
                      keep_is_available_over_cuda_versions,
                      plan_kept_code, twins_possible)
from .literals import LiteralRewrites
from .methods import MethodRewrites
from .references import ReferenceRewrites
from .state import TORCH_KINDS, TorchKind, TorchState
from .torch_npu_import import add_torch_npu_import, is_torch_npu_itself

for _name in package_modules(__path__[0]):
    importlib.import_module(f"{__name__}.{_name}")  # a TorchKind in any module here registers

K = TypeVar("K", bound=TorchKind)


class TorchTransformer(cst.CSTTransformer):
    """The PyTorch pass's one walk. It makes the file's `TorchState` (state.py), hands it to
    each kind's applier, and calls their handlers: a hook of one kind goes to that kind, and
    where several kinds look at the same node (leave_Call, leave_Attribute, visit_If, ...) the
    walk calls them in the order written here. The walk's own work: the depths in TorchState
    (calls that only show their arguments, foreign libraries) and the kept-code guards."""

    KINDS: Tuple[Type[TorchKind], ...] = ()  # the kinds whose hooks this class calls (walk_class)
    HOOKS: Tuple[Tuple[str, Type[TorchKind]], ...] = ()  # (hook, its kind) for the hooks of one kind

    def __init__(self, ctx: Context) -> None:
        super().__init__()
        self.ctx = ctx
        self.state = state = TorchState(ctx)
        self._resolve = state.resolve
        self.kinds: Dict[type, TorchKind] = {kind: kind(state) for kind in self.KINDS}
        # The kinds whose handlers the shared hooks below call.
        self.literals = self._kind(LiteralRewrites)
        self.methods = self._kind(MethodRewrites)
        self.references = self._kind(ReferenceRewrites)
        # The hooks of one kind (walk_class makes a method of the walk for each, calling this).
        self.hooks: Dict[str, Callable[..., Any]] = {name: getattr(self.kinds[kind], name) for name, kind in self.HOOKS}
        plan_kept_code(ctx, self.literals.is_device_expr)
        keep_is_available_over_cuda_versions(ctx)
        keep_cuda_interop(ctx)
        keep_cuda_twin_of_npu_class(ctx)  # guards.py: CudaAccelerator beside the project's NpuAccelerator
        self._cuda_tests = keep_cuda_tests(ctx)  # guards.py: is_cuda_available() beside the project's is_npu_available()
        self._cuda_checks = "and not" in ctx.text and compiled(CUDA_CHECK_AFTER_AVAILABLE).search(ctx.text) is not None
        # guards.keep_cuda_beside_npu: only in files that name the NPU; the `elif`s looked at.
        # (the plain search first: NPU_WORD_IN_TEXT's lookbehind makes it try every position of
        # a file without `npu`, ~5x slower; where it finds nothing the word cannot be there)
        self._names_npu = (compiled("(?i)npu").search(ctx.text) is not None
                           and compiled(NPU_WORD_IN_TEXT).search(ctx.text) is not None)
        self._elifs: Set[int] = set()
        # guards.py: `os.environ["CUDA_VISIBLE_DEVICES"] = v` beside `os.environ["ASCEND_RT_VISIBLE_DEVICES"] = v`
        self._twins = twins_possible(ctx)
        if self._twins:
            keep_cuda_beside_its_rewrite(ctx, ctx.module, self._resolve)
        self._lightning = lightning_device_calls(ctx)  # guards.py: Trainer(accelerator=...) stays
        if self._lightning:  # guards.py: `accel = "cuda" if ...`, read only as Trainer(accelerator=accel)
            keep_lightning_device_variables(ctx, self._resolve, self._lightning)
        self._library_flags = library_gpu_flags(ctx)  # guards.py: MergeOptions(cuda=torch.cuda.is_available())
        self._egl = egl_device_choices(ctx)  # guards.py: MuJoCo's EGL device chosen by the CUDA count
        self._cuda_libraries = cuda_library_calls(ctx)  # guards.py: CuEquivarianceConfig(conv_fusion=device == "cuda")
        flag_variables = library_gpu_flag_variables(ctx)
        if flag_variables:  # guards.py: `use_cuda = "cuda" in str(device)` ... `faiss.Kmeans(gpu=use_cuda)`
            keep_library_gpu_flag_variables(ctx, self._resolve, flag_variables)

    def _kind(self, kind: Type[K]) -> K:
        found = self.kinds[kind]
        assert isinstance(found, kind)
        return found

    # ---- hooks several kinds (or the walk's guards) share: the order is decided here

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.references.visit_FunctionDef(node)
        self.literals.visit_FunctionDef(node)

    def visit_If(self, node: cst.If) -> None:
        if self._names_npu:
            keep_cuda_beside_npu(self.ctx, node, self._elifs)  # guards.py: a chain with an NPU branch
        if self._cuda_tests:
            keep_behind_cuda_test(self.ctx, node, self._cuda_tests)  # `if is_cuda_available():`
        if self._cuda_checks:  # guards.py: `elif torch.cuda.is_available() and not check_cuda_fp8_capability():`
            keep_cuda_capability_test(self.ctx, node, self._resolve)
        # guards.py: `if torch.cuda.is_available(): accelerator = "cuda"`, a name the literals keep
        keep_test_choosing_kept_name(self.ctx, node, self._resolve, self.literals.assigned_literal_moves)
        if self._egl:  # guards.py: `if torch.cuda.device_count() > 1: os.environ["EGL_DEVICE_ID"] = ...`
            keep_cuda_test_choosing_egl_device(self.ctx, node, self._resolve)
        self.literals.visit_If(node)

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        if self._twins:  # guards.py: a CUDA statement whose rewrite the block has already
            keep_cuda_beside_its_rewrite(self.ctx, node, self._resolve)
        self.literals.visit_IndentedBlock(node)

    def visit_Assign(self, node: cst.Assign) -> None:
        if self._names_npu:
            keep_cuda_patched_with_npu(self.ctx, node, self._resolve)  # torch.cuda.amp = npu.amp
        if self.literals.foreign_libraries and type(node.value) is cst.Dict:
            self.literals.note_dict(node)  # `args = {"device": ...}` given to CTranslate2

    def visit_IfExp(self, node: cst.IfExp) -> None:
        keep_test_choosing_gpu(self.ctx, node, self._resolve)  # guards.py: `"gpu" if torch.cuda... else "cpu"`

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
        self.references.visit_Arg(node)

    def visit_Call(self, node: cst.Call) -> None:
        if is_display_call(node):
            self.state.shown += 1
        if (isinstance(node.func, cst.Name) and node.func.value in ("isinstance", "issubclass") and len(node.args) == 2
                and node.args[1].keyword is None and not node.args[1].star):
            classes = node.args[1].value  # a class, or a tuple of them
            named = [e.value for e in classes.elements] if isinstance(classes, cst.Tuple) else [classes]
            self.state.type_tests.update(id(n) for n in named)
        qual = self._resolve(node.func)
        if dc.is_foreign_callee(qual):
            self.state.foreign += 1
            keep_foreign_device_tests(self.ctx, node, self._resolve)
        if self._lightning:
            keep_lightning_device_arguments(self.ctx, node, qual, self._lightning)
        if self._library_flags and node.args:
            keep_library_gpu_flag(self.ctx, node, qual, self._resolve)  # guards.py: MergeOptions(cuda=...)
        if self._cuda_libraries and node.args:
            keep_cuda_library_flags(self.ctx, node, qual)  # guards.py: CuEquivarianceConfig(conv_fusion=...)

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        self.state.shown += 1

    def leave_FormattedString(self, original: cst.FormattedString,
                              updated: cst.FormattedString) -> cst.FormattedString:
        self.state.shown -= 1
        return updated

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        qual = self._resolve(original)
        if qual is None:
            return self.methods._rename_attribute(original, updated)
        return self.references._rewrite_reference(original, updated, qual)

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        qual = self._resolve(original.func)
        if is_display_call(original):
            self.state.shown -= 1
        if dc.is_foreign_callee(qual):
            self.state.foreign -= 1
        if qual == "torch.device" and _device_index_only(original) and not self.ctx.suppressed(original, "NPU108"):
            # `torch.device(0)` / `device(0)`: an index alone names the accelerator, which is the
            # NPU only where torch_npu is loaded (before 2.5 it patches torch.device: without it,
            # cuda:0); `import torch_npu` goes before `from torch import device`
            # (torch_npu_import.py).
            self.ctx.require_import("torch_npu")
        updated = self.literals._parametrized_devices(original, updated)
        updated = self.methods._rename_method(original, updated, qual)
        updated = self.methods._member_test(original, updated, qual)
        updated = self.literals._literal_arguments(original, updated, qual)
        return self.references._type_string_argument(original, updated, qual)


def _device_index_only(call: cst.Call) -> bool:
    """`device(0)`, `torch.device(1)`, `Device(0)` after `from torch import device as Device`
    (the caller resolved it to torch.device): one positional argument, an integer literal. The
    prefilter lets such a file through by the import (`link torch.device`), partial parsing keeps
    the alias's statements (partial.StatementFilter's alias words)."""
    return (len(call.args) == 1 and call.args[0].keyword is None and not call.args[0].star
            and isinstance(call.args[0].value, cst.Integer))


_HOOK = re.compile(r"(visit|leave)_[A-Z][A-Za-z]*$")


def _own_hooks(kinds: Sequence[Type[TorchKind]]) -> List[Tuple[str, Type[TorchKind]]]:
    """(hook name, its kind) for each `visit_<Node>`/`leave_<Node>` a kind defines that the
    walk does not define itself. A hook two kinds define is the walk's to order: an error."""
    owner: Dict[str, Type[TorchKind]] = {}
    for kind in kinds:
        for cls in kind.__mro__[:kind.__mro__.index(TorchKind)]:
            for name in vars(cls):
                if not _HOOK.match(name) or name in vars(TorchTransformer):
                    continue
                if owner.setdefault(name, kind) is not kind:
                    raise TypeError(f"{owner[name].__name__} and {kind.__name__} both define {name}: "
                                    f"TorchTransformer must define it and call them in order")
    return list(owner.items())


def _delegate(name: str) -> Callable[..., Any]:
    if name.startswith("visit_"):
        def visit(self: TorchTransformer, node: cst.CSTNode) -> Any:
            return self.hooks[name](node)
        visit.__name__ = name
        return visit

    def leave(self: TorchTransformer, original: cst.CSTNode, updated: cst.CSTNode) -> Any:
        return self.hooks[name](original, updated)
    leave.__name__ = name
    return leave


_WALKS: Dict[Tuple[Type[TorchKind], ...], Type[TorchTransformer]] = {}


def walk_class() -> Type[TorchTransformer]:
    """The walk over every registered kind: TorchTransformer with a method for each hook of
    one kind (which the fast walk, fast_visitor.py, looks up on the class). One class per set
    of kinds: a kind registered later (a test's) gets a walk of its own."""
    kinds = tuple(TORCH_KINDS)
    found = _WALKS.get(kinds)
    if found is None:
        hooks = tuple(_own_hooks(kinds))
        methods: Dict[str, Any] = {name: _delegate(name) for name, _kind in hooks}
        methods.update(KINDS=kinds, HOOKS=hooks, __module__=__name__, __doc__=TorchTransformer.__doc__)
        found = _WALKS[kinds] = type("TorchTransformer", (TorchTransformer,), methods)
    return found


def migrate_torch(module: cst.Module, ctx: Context) -> cst.Module:
    """The PyTorch pass (passes.py): every rewrite in one walk, then `import torch_npu`."""
    if is_torch_npu_itself(ctx.path):
        return module  # torch_npu's own code (torch_npu_import.py)
    new_module = transform(module, walk_class()(ctx))  # = module.visit(...), faster
    if ctx.options.device_config_keys and reads_device_key(ctx.text, ctx.options.device_config_keys):
        # A device setting another module sets to "npu" is read here (project_values.py).
        ctx.require_import("torch_npu")
    report_gloo_for_device_tensors(ctx)  # (after the rewrites: whether the file moves to the NPU)
    report_float64_reductions(ctx)  # (likewise)
    return add_torch_npu_import(new_module, ctx, ctx.rules.add_import.get("torch"))
