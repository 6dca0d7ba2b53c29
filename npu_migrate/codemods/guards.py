"""Device code the torch pass leaves as it is, because the rewrite would break the program.

Planned once per file, before the torch pass (`plan_kept_code`; the last item below as the
torch pass walks); what is kept is recorded with
`Context.keep` (no rewrite touches it) and reported:

* **kernel guards** -- an `x.is_cuda` test in a function that calls a compiled CUDA extension
  (`_C.box_encode(...)`, a `*_cuda`/`*_ext` module, a module built by cpp_extension.load, or a
  local function or autograd Function that calls one), or whose assert/raise says the code is
  CUDA only: as `is_npu` it would send NPU tensors into the CUDA kernel instead of the
  pure-PyTorch fallback. Left as `is_cuda`, NPU tensors take the fallback (NPU302).
* **build gates** -- a test that reads `CUDA_HOME` (or `torch.cuda.is_available()`, in a test
  whose branch builds an extension) decides whether `.cu` sources are compiled;
  `torch.cuda.is_available()` in it stays too, so no CUDA build is attempted on the NPU (NPU302).
  Only where the branch builds or loads an extension (or the file does, for a condition kept in a
  variable): an environment report that prints CUDA_HOME is neither kept nor reported.
* **version reports** (`keep_is_available_over_cuda_versions`, called by the torch pass) -- a
  `torch.cuda.is_available()` test whose branch reads `torch.version.cuda`/`.hip` (None with
  torch_npu) stays; NPU311 is reported where the version is read.
* **capability checks** -- `torch.cuda.get_device_capability()` returns None on the NPU, so a
  statement that indexes, unpacks or compares its result would raise TypeError once migrated
  (and `get_device_properties(d).major`/`.minor`: the NPU's properties have neither);
  the whole statement stays (`torch.cuda.is_available() and ...` then short-circuits) and is
  reported as an error (NPU307). Printing or logging the value is migrated.

* **device tests that open CUDA-only code** (`_DeviceGates`, NPU315) -- `x.device.type ==
  "cuda"`, `device.type in ("cuda", "xpu")`, `device.type != "cuda"` (and `x.is_cuda`,
  `torch.cuda.is_available()` that no rule above keeps) whose branch runs code a
  CUDA-only library finding reports (Triton kernels, FlashAttention, vLLM's NCCL bindings), a
  CUDA-only overload (`torch.addmm(..., out_dtype=...)`, NPU316) or a module function using one;
  whose test asks for a library (`_TRITON_AVAILABLE and ...`); that a function named for one
  returns (`_use_triton`), or whose callers test it so; or that refuses non-CUDA devices before
  such code (`raise NotImplementedError`). Rewritten to "npu", the NPU would enter that code;
  left as "cuda", the test is False there and the portable path runs (or the refusal raises).
  What counts as CUDA-only is the rule's data (`gates`, `words` in rules/findings_kernels.toml).

* **code that selects the NPU already** (`keep_cuda_beside_npu`, called by the torch pass's own
  walk, top-down, in files that name the NPU) -- an `if`/`elif` chain with a branch for the NPU
  (`device_type == "npu"`, `torch.npu.is_available()`, `is_npu_available()`, an `else:` that
  imports torch_npu or picks "npu"; `DeviceType.CUDA` beside `DeviceType.NPU`: cuda_arms_beside_npu)
  keeps its CUDA branch as it is: rewritten, it would become a second NPU branch the first one shadows (the GPU
  branch stays the GPU branch, as for MindSpore's device targets); likewise a tuple, list or set
  of device names that holds "npu" keeps its "cuda"/"gpu" entry, and a dict keyed by device
  names that has an "npu" key keeps its "cuda" entry (`{"cuda": "nccl", "npu": "hccl"}` would
  get two "npu" keys). Not reported: the code runs on the NPU as it is. Likewise an assignment
  that points a `torch.cuda` name at the NPU (`torch.cuda.amp = torch_npu.npu.amp`, as
  transfer_to_npu does for code written for CUDA) keeps its target: as `torch.npu.amp = ...` it
  would assign the NPU its own value and the CUDA name, which code the run does not migrate
  still calls, would no longer lead to the NPU (`keep_cuda_patched_with_npu`). And a CUDA
  statement whose rewrite its block has already, where it is harmless on the NPU (an env var set,
  a CUDA seed call): `os.environ["CUDA_VISIBLE_DEVICES"] = v` beside
  `os.environ["ASCEND_RT_VISIBLE_DEVICES"] = v` (`keep_cuda_beside_its_rewrite`).

Everything here looks at one file; names are resolved through its imports (relative imports
too: `from . import _C`).
"""

from __future__ import annotations

import ast
import os
import re
import textwrap
from typing import AbstractSet, Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Set, Tuple

import libcst as cst
from libcst.helpers import get_full_name_for_node

from ..context import Context
from ..frameworks import LIBRARY_CUDA_TESTS
from ..local_modules import is_local_import
from ..imports import dotted_name, imported_names
from ..fast_visitor import code_children, subtree, walk
from .. import work
from . import device_context as dc
from ..codes import applies, emits
from ..kinds.finding import FindingSpec, cuda_only_libraries, names_of
from ..prefilter import compiled
from ..words import matches_at_word_start, words_of
from ..rules import Rule
from .findings import arguments_match
from .strings import string_value
from .syntax import option_names, self_attribute

# The regular expressions here (the *_RE, _NPU_WORD, _GPU_FLAG, NPU_WORD_IN_TEXT patterns) are
# compiled where first searched for (prefilter.compiled): compiling all of them at import took
# ~3 ms of every start, and a run over a script or two uses few of them.

# Words that make the test cheap: a file without any of them has nothing to plan.
_TRIGGERS = ("is_cuda", "CUDA_HOME", "get_device_capability")
# `None if torch.cuda.is_available() else "cpu"` (either way round): a map_location choice
# (_Planner._map_location_choice)
_NONE_ON_AVAILABILITY_RE = r"None\s+if\s+(?:not\s+)?[\w.]*is_available\(\)|is_available\(\)\s+else\s+None\b"
# `if torch.cuda.is_available():` then, in the next lines, an `else:` and a map_location: the If
# form (_Planner._map_location_branches; _if_map_location)
_IF_AVAILABLE_RE = r"is_available\(\)\s*:"
_ELSE_RE = r"\n[ \t]*else\s*:"
# A module (or a name imported from one) that is a compiled extension: `_C`, `deform_conv_cuda`,
# `nms_ext`, `_ext`, `box_cuda_ext`, `roi_align_kernel_cuda`; not a helper that moves its
# arguments to the device (`to_cuda`, `list_to_cuda`: mmsegmentation 1.2.2's tests, whose
# `.cuda()` calls the run migrates).
_EXTENSION_PART_RE = r"^_C$|^_ext$|(?<!^to)(?<!_to)_cuda$|_ext$|_cuda_ext|_cuda_kernels?$|^_?cuda_kernels?$"
_BUILDERS = {"torch.utils.cpp_extension.load", "torch.utils.cpp_extension.load_inline"}
# A call of a torch.cuda function (what _flag_cleared looks for).
_TORCH_CUDA_CALL_RE = r"\bcuda\.[\w.]+\s*\("
_TORCH_CUDA_NAME_RE = r"\btorch\.cuda\.[\w.]*\w"
# A flag of the instance cleared (`self._enabled = False`: _flag_cleared), and `self.<name>` read
# (not the target of a plain assignment; `self.x += 1`, `self.x[i] = v` read it).
_FLAG_CLEARED_RE = r"\bself[ \t]*\.[ \t]*(\w+)[ \t]*=[ \t]*False\b"
_SELF_READ_RE = r"\bself\s*\.\s*(\w+)\b(?!\s*=(?!=))"
# A CUDA source file named in a string (`'k_kernel.cu'`), or load_inline's CUDA sources.
_CUDA_SOURCE_RE = r"\.cuh?['\"]|\bcuda_sources\b"
# An assert/raise/skip message that says the code runs on CUDA only: "CUDA only", "only
# supported on CUDA", "requires CUDA", "requires a CUDA training device" (torchrl 0.14.1
# dreamer_v3), "needs an NVIDIA GPU", "requires a GPU" (not "needs a GPU or a TPU": either will do).
_CUDA_ONLY_RE = (r"(?is)\bcuda\b.*\bonly\b|\bonly\b.*\bcuda\b|\bcuda[-_ ]only\b"
                 r"|\b(?:requires?|needs?)\s+(?:an?\s+|the\s+)?(?:cuda|nvidia)\b"
                 r"|\b(?:requires?|needs?)\s+(?:an?\s+|the\s+)?gpus?\b(?![-\w]|\s+or\b)")
# A call that ends a test like `raise`: pytest's skip, unittest's skipTest (its message read alike).
_SKIPS = {"pytest.skip", "self.skipTest"}
# What builds or loads a compiled extension (a CUDA_HOME test is a build gate only around these).
# (and cpp_extension.load's compile flags: torchdrug 0.2.1's load_extension sets extra_cuda_cflags
# and -DCUDA_OP where torch.cuda.is_available(), else drops the .cu sources)
_BUILD_WORDS = {"CUDAExtension", "CppExtension", "BuildExtension", "NpuExtension", "cythonize", "ext_modules",
                "define_macros", "extra_compile_args", "load_inline", "load_ext", "get_extensions", "load_library",
                "extra_cflags", "extra_cuda_cflags"}
_BUILD_WORD_BYTES = {w.encode() for w in _BUILD_WORDS}
_BUILD_CALLS = {"torch.utils.cpp_extension.load", "setuptools.setup", "setuptools.Extension",
                "distutils.core.setup", "distutils.core.Extension", "distutils.extension.Extension"}
_CAPABILITY = {"torch.cuda.get_device_capability", "torch.npu.get_device_capability"}
_PROPERTIES = {"torch.cuda.get_device_properties"}  # `.major`, `.multi_processor_count` of it: _properties_version
# CUDA device properties with no NPU value. torch_npu 2.8's `_NPUDeviceProperties` (the pybind
# class in torch_npu/csrc/npu/Module.cpp; its names are in the wheel's libtorch_npu.so) defines
# name, total_memory, cube_core_num, vector_core_num, L2_cache_size and uuid with values, and the
# rest as std::optional fields it never sets, None in Python; older releases define only name and
# total_memory. The shared-memory sizes are not defined at all (AttributeError).
_PROPERTY_WITHOUT_NPU_VALUE = {
    "major": "a CUDA compute-capability version",
    "minor": "a CUDA compute-capability version",
    "multi_processor_count": "the number of CUDA streaming multiprocessors",  # NPU: vector_core_num
    "max_threads_per_multi_processor": "a CUDA streaming-multiprocessor limit",
    "regs_per_multiprocessor": "a CUDA streaming-multiprocessor limit",
    "warp_size": "the CUDA warp size",
    "is_integrated": "a CUDA board property",
    "is_multi_gpu_board": "a CUDA board property",
    "gcnArchName": "a ROCm architecture name",
    "shared_memory_per_block": "a CUDA shared-memory size",
    "shared_memory_per_block_optin": "a CUDA shared-memory size",
    "shared_memory_per_multiprocessor": "a CUDA shared-memory size",
}
# The text test for it (a file that only prints the properties is not walked for them).
_PROPERTIES_VERSION_RE = (
    r"get_device_properties\([^()]*\)\s*\.\s*(?:" + "|".join(sorted(_PROPERTY_WITHOUT_NPU_VALUE)) + r")\b"
    # ... or read through a variable (`prop = ...get_device_properties(d)` ... `prop.major`)
    r"|\b(\w+)\s*=\s*[\w.]*get_device_properties\((?s:.*?)\b\1\s*\.\s*(?:"
    + "|".join(sorted(_PROPERTY_WITHOUT_NPU_VALUE)) + r")\b")
# Calls whose arguments are only shown: the value may be None there.
_SHOWN = {"print", "str", "repr", "format"}
# A device count compared where it is written (`torch.cuda.device_count() > 1`), or held in a
# variable first (`n_gpu = torch.cuda.device_count()` ... `if n_gpu > 1:`): the text test for
# _gated_data_parallel (_count_compared).
_COUNT_COMPARED_RE = re.compile(r"device_count\(\)\s*(?:>|!=)")
_COUNT_ASSIGNED_RE = r"[ \t]*(\w+)[ \t]*=[ \t]*[\w.]*device_count\(\)[ \t]*(?:#.*)?$"  # (a line)
# torch's single-process multi-device wrapper, which Ascend does not support (NPU305).
_DATA_PARALLEL = {"torch.nn.DataParallel", "torch.nn.parallel.DataParallel", "torch.nn.parallel.data_parallel.DataParallel"}
_LOG_METHODS = {"debug", "info", "warning", "warn", "error", "critical", "exception", "log"}


def plan_kept_code(ctx: Context, is_device_expr=None) -> None:
    """`is_device_expr`: the torch pass's test of what a device string is compared with
    (LiteralRewrites.is_device_expr); with it, device-type tests that open CUDA-only code are
    kept too (_DeviceGates)."""
    _plan_kept_code(ctx)
    if is_device_expr is not None and "cuda" in ctx.text and (
            "is_cuda" in ctx.text or "is_available" in ctx.text or _compared_with_cuda(ctx.text)
            or (ctx.kept and "device_count" in ctx.text)  # (a loop over a kept capability check)
            or ("DataParallel" in ctx.text and _count_compared(ctx.text))):  # (_gated_data_parallel)
        # after the planner: a capability check it keeps on CUDA is CUDA-only code for these
        gates = _DeviceGates(ctx, is_device_expr)
        if gates.evidence():
            gates.plan()


def _cleared_flag_read(text: str) -> bool:
    """Whether the text sets a flag of the instance False (`self._enabled = False`) and reads
    that flag somewhere (`if self._enabled:`): what _flag_cleared needs to judge anything (not
    `= False` alone, a parameter's default: torchtune 0.6.1's `offload_ops_to_cpu: bool = False`)."""
    flags = set(compiled(_FLAG_CLEARED_RE).findall(text))
    return bool(flags) and not flags.isdisjoint(compiled(_SELF_READ_RE).findall(text))


def _count_compared(text: str) -> bool:
    """Whether a device count is compared (`device_count() > 1`), where it is written or through
    the variable it is assigned to (`n_gpu = torch.cuda.device_count()`, `n_gpu > 1`)."""
    if _COUNT_COMPARED_RE.search(text):
        return True
    at = text.find("device_count()")
    while at >= 0:  # (found by its call, then its line read: a regex starting `(\w+)` tries every position)
        end = text.find("\n", at)
        assigned = compiled(_COUNT_ASSIGNED_RE).match(text[text.rfind("\n", 0, at) + 1:end if end >= 0 else len(text)])
        if assigned is not None and _name_compared(assigned.group(1), text):
            return True
        at = text.find("device_count()", at + 1)
    return False


def _name_compared(name: str, text: str) -> bool:
    """Whether `name` is written compared with `>` or `!=` (`n_gpu > 1`)."""
    return next(matches_at_word_start(re.compile(rf"{re.escape(name)}\s*(?:>|!=)"), text), None) is not None


def _if_map_location(text: str) -> bool:
    """Whether an `is_available():` has an `else:` and a map_location in its next eight lines."""
    for found in compiled(_IF_AVAILABLE_RE).finditer(text):
        end = found.end()
        for _ in range(8):
            end = text.find("\n", end + 1)
            if end < 0:
                end = len(text)
                break
        window = text[found.end():end]
        if "map_location" in window and compiled(_ELSE_RE).search(window):
            return True
    return False


def _torch_cuda_names(text: str) -> Set[str]:
    """The `torch.cuda.<name>` written in `text` (found by the literal first: a regex starting
    with `\b` tries every position of the text, ~2 ms on a 500-line file)."""
    found: Set[str] = set()
    at = text.find("torch.cuda.")
    while at >= 0:
        name = compiled(_TORCH_CUDA_NAME_RE).match(text, at)
        if name is not None:
            found.add(name.group())
        at = text.find("torch.cuda.", at + 11)
    return found


def _kept_cuda_members(ctx: Context) -> Tuple[str, ...]:
    """torch.cuda members with no NPU twin, left as they are with an NPU301 error (torch.cuda.nccl,
    get_arch_list, ...; not the catch-all `torch.cuda` itself). Once per rule set (kept with it, so
    its id is not reused while the entry lives)."""
    findings = ctx.rules.findings
    held = _KEPT_MEMBERS.get(id(findings))
    if held is None or held[0] is not findings:
        held = (findings, tuple(sorted({n for r in findings.get("api", ()) if r.code == "NPU301"
                                        for n in names_of(r) if n.startswith("torch.cuda.")})))
        if len(_KEPT_MEMBERS) > 8:
            _KEPT_MEMBERS.clear()
        _KEPT_MEMBERS[id(findings)] = held
    return held[1]


_KEPT_MEMBERS: Dict[int, Tuple[Any, Tuple[str, ...]]] = {}


def _kept_in_chain_re(ctx: Context) -> str:
    """`... and torch.cuda.nccl.version()`: a torch.cuda member with no NPU twin (NPU301) after
    an `and` (_Planner._kept_operand)."""
    leaves = [n[len("torch.cuda."):] for n in _kept_cuda_members(ctx)]
    return r"\band\s+(?:not\s+)?[\w.]*\bcuda\.(?:%s)\b" % "|".join(re.escape(n) for n in leaves) if leaves else r"(?!)"


def _plan_kept_code(ctx: Context) -> None:
    if not any(word in ctx.text for word in _TRIGGERS) and not (
            "cuda." in ctx.text and " and" in ctx.text and compiled(_kept_in_chain_re(ctx)).search(ctx.text)) and not (
            "is_available" in ctx.text and any(word in ctx.text for word in _BUILD_WORDS)) and not (
            "get_device_properties" in ctx.text and compiled(_PROPERTIES_VERSION_RE).search(ctx.text)) and not (
            "map_location" in ctx.text and (compiled(_NONE_ON_AVAILABILITY_RE).search(ctx.text)
                                            or _if_map_location(ctx.text))):
        return
    kernels = _kernel_names(ctx)
    planner = _Planner(ctx, kernels)
    walk(ctx.module, planner)


# ----------------------------------------------------------------------------- extensions


def _kernel_names(ctx: Context) -> Set[str]:
    """Local names that stand for compiled extensions, and for the file's own functions and
    classes that call them."""
    names: Set[str] = set()
    for stmt in ctx.imports.import_nodes:
        if isinstance(stmt, cst.Import):
            for alias in stmt.names:
                full = dotted_name(alias.name) or ""
                if any(compiled(_EXTENSION_PART_RE).search(p) for p in full.split(".")) and not _is_torch(full):
                    names.add(_local_name(alias, full.split(".", 1)[0]))
        elif not isinstance(stmt.names, cst.ImportStar):
            module = dotted_name(stmt.module) if stmt.module is not None else ""
            module = module or ""
            in_module = any(compiled(_EXTENSION_PART_RE).search(p) for p in module.split(".") if p)
            if not stmt.relative and _is_torch(module):
                continue
            for alias in stmt.names:
                name = dotted_name(alias.name) or ""
                if in_module or compiled(_EXTENSION_PART_RE).search(name):
                    names.add(_local_name(alias, name))
    if not names and "cpp_extension" not in ctx.text:
        # No extension imported, and none built (_BUILDERS: a name resolves to one only through
        # an import or an attribute naming `cpp_extension`): no definition can call one.
        return names
    collector = _Definitions(ctx)
    walk(ctx.module, collector)
    names |= collector.built
    for stmt in ctx.imports.import_nodes if collector.built_modules else ():
        if isinstance(stmt, cst.Import):
            for alias in stmt.names:
                full = dotted_name(alias.name) or ""
                if full in collector.built_modules:
                    names.add(_local_name(alias, full))
    # The file's own functions and classes that call an extension count as one (a wrapper
    # `def nms(...)`, an autograd Function whose forward calls `_C`); a few rounds reach
    # wrappers of wrappers. (None when there is no extension: nothing can call one. Each
    # definition's calls are gone through once, in its first round, not once a round.)
    called: Dict[str, Set[Optional[str]]] = {}
    for _ in range(3 if names else 0):
        more = {name for name, body in collector.definitions.items()
                if name not in names and not _called_roots(called, name, body).isdisjoint(names)}
        if not more:
            break
        names |= more
    return names


def _called_roots(called: Dict[str, Set[Optional[str]]], name: str, body: cst.CSTNode) -> Set[Optional[str]]:
    """The roots (_root) of what `body` calls, once for `name` (kept in `called`)."""
    roots = called.get(name)
    if roots is None:
        roots = called[name] = {_root(call.func) for call in _calls(body)}
    return roots


def _imports_extension(stmt: cst.CSTNode) -> bool:
    """`from . import _C`, `import box_cuda_ext`: an import of a compiled extension."""
    names: List[str] = []
    if isinstance(stmt, cst.Import):
        names = [dotted_name(a.name) or "" for a in stmt.names]
    elif isinstance(stmt, cst.ImportFrom):
        names = [dotted_name(stmt.module) or ""] if stmt.module is not None else []
        if not isinstance(stmt.names, cst.ImportStar):
            names += [dotted_name(a.name) or "" for a in stmt.names]
    return any(compiled(_EXTENSION_PART_RE).search(part) for n in names if not _is_torch(n) for part in n.split(".") if part)


def _is_torch(module: str) -> bool:
    return module == "torch" or module.startswith(("torch.", "torch_npu"))


def _local_name(alias: cst.ImportAlias, default: str) -> str:
    if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
        return alias.asname.name.value
    return default


class _Definitions(cst.CSTVisitor):
    """Top-level and class-level functions and classes by name, and names bound to
    `cpp_extension.load(...)`."""

    def __init__(self, ctx: Context) -> None:
        super().__init__()
        self.ctx = ctx
        self.definitions: Dict[str, cst.CSTNode] = {}
        self.built: Set[str] = set()
        self.built_modules: Set[str] = set()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.definitions.setdefault(node.name.value, node)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.definitions.setdefault(node.name.value, node)

    def visit_Assign(self, node: cst.Assign) -> None:
        if isinstance(node.value, cst.Call) and self.ctx.imports.resolve(node.value.func) in _BUILDERS:
            for target in node.targets:
                if isinstance(target.target, cst.Name):
                    self.built.add(target.target.value)

    def visit_Call(self, node: cst.Call) -> None:
        # `load("fast_lsh_cumulation", sources)` then `import fast_lsh_cumulation as lsh_cumulation`
        # (transformers' yoso): the module the build names, imported by that name
        if self.ctx.imports.resolve(node.func) in _BUILDERS:
            name = next((a.value for a in node.args if a.keyword is not None and a.keyword.value == "name"),
                        node.args[0].value if node.args and node.args[0].keyword is None else None)
            built = string_value(name) if name is not None else None
            if built:
                self.built_modules.add(built)


def _root(node: cst.BaseExpression) -> Optional[str]:
    while isinstance(node, (cst.Attribute, cst.Subscript, cst.Call)):
        node = node.func if isinstance(node, cst.Call) else node.value
    return node.value if isinstance(node, cst.Name) else None


def _calls(node: cst.CSTNode) -> Iterator[cst.Call]:
    stack = [node]
    call = cst.Call
    n: Any
    while stack:
        n = stack.pop()
        if type(n) is call:  # (by identity: libcst's node classes are final; isinstance() goes through ABCMeta)
            yield n
        stack.extend(code_children(n))


# ----------------------------------------------------------------------------- planning


@applies("finding:guard")
class _Planner(cst.CSTVisitor):
    def __init__(self, ctx: Context, kernels: Set[str]) -> None:
        super().__init__()
        self.ctx = ctx
        self.kernels = kernels
        self.parents: List[cst.CSTNode] = []
        self.functions: List[cst.CSTNode] = [ctx.module]
        self.kernel_call: Dict[int, Optional[cst.Call]] = {}
        self._kernel_words_elided: Optional[bool] = None  # (_kernels_may_be_elided)
        self.guard_rules = {r.from_: r for r in ctx.rules.findings.get("guard", ())}
        self.file_builds: Optional[bool] = None
        self.kept_apis = _kept_cuda_members(ctx)

    def on_visit(self, node: cst.CSTNode) -> bool:
        n: Any = node
        kind = type(n)  # (by identity, on every node: see _calls)
        if kind is cst.FunctionDef:
            self.functions.append(n)
        elif kind is cst.Attribute and n.attr.value == "is_cuda":
            self._is_cuda(n)
        elif kind is cst.Name and n.value == "CUDA_HOME":
            self._build_gate(n)
        elif kind is cst.Call:
            qual = self.ctx.imports.resolve(n.func)
            if qual in _CAPABILITY:
                self._capability(n)
            elif qual in _PROPERTIES:
                self._properties_version(n)
            elif qual == "torch.cuda.is_available":
                self._availability_gate(n)
            elif qual is not None and qual.startswith("torch.cuda.") and any(
                    qual == k or qual.startswith(k + ".") for k in self.kept_apis):
                self._kept_operand(n)
        self.parents.append(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.parents.pop()
        if type(original_node) is cst.FunctionDef:
            self.functions.pop()

    # -- a kept torch.cuda call in an `and` chain -------------------------------------------

    def _kept_operand(self, call: cst.Call) -> None:
        """`torch.cuda.is_available() and torch.cuda.is_bf16_supported() and
        torch.distributed.is_nccl_available() and torch.cuda.nccl.version() >= (2, 10)` (torchtune
        0.6.1 training/precision.py:63, verify_bf16_support, which every bf16 recipe calls): the
        last call has no NPU twin and stays (NPU301). Migrated alone, the tests before it were
        true on the NPU and the chain reached it (AttributeError: torch._C has no _nccl_version
        on a build without CUDA), where unmigrated it stopped at the first test. The whole `and`
        chain that holds it and a CUDA device test stays as it is: False on the NPU, as before."""
        chain = None
        for parent in reversed(self.parents):
            if isinstance(parent, cst.BooleanOperation):
                if not isinstance(parent.operator, cst.And):
                    break
                chain = parent
            elif isinstance(parent, (cst.BaseStatement, cst.BaseSmallStatement, cst.Lambda, cst.IfExp,
                                     cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)):
                break
        if chain is not None and dc.is_device_test(chain, self.ctx.imports.resolve):
            self.ctx.keep(chain)

    # -- is_cuda ---------------------------------------------------------------------------

    def _kernel_in_function(self) -> Optional[cst.Call]:
        function = self.functions[-1]
        if id(function) not in self.kernel_call:
            body = function.body if isinstance(function, cst.FunctionDef) else function
            found = None
            if self.kernels:
                found = next((c for c in _calls(body) if _root(c.func) in self.kernels), None)
            self.kernel_call[id(function)] = found
        return self.kernel_call[id(function)]

    def _is_cuda(self, node: cst.Attribute) -> None:
        guard = self._guard_of(node)
        kernel = self._kernel_in_function()
        cuda_only = guard is not None and _says_cuda_only(guard, self._positive_in(node, guard))
        if kernel is None:
            self._note_elided_callees()  # (a kernel in lines left out makes it a kernel guard)
            if not cuda_only:
                return
        kept = _test_of(guard) if guard is not None else node
        self.ctx.keep(kept)
        receiver = self.ctx.code_for(node)
        if kernel is not None:
            self._report("kernel-guard", node, receiver, self.ctx.code_for(kernel.func))
        else:
            self._report("cuda-only-guard", node, receiver)

    def _report(self, guard: str, node: cst.CSTNode, api: str, detail: str = "") -> None:
        rule = self.guard_rules.get(guard)
        if rule is not None:
            self.ctx.finding(rule, node, api=api, message=rule.render_message(api=api, detail=detail),
                             suggestion=rule.render_suggestion(api=api, detail=detail))

    def _note_elided_callees(self) -> None:
        """With partial parsing, a function the guard's function calls may be defined in a line
        left out (an autograd Function calling `_C`): the engine then parses those lines too.
        Not when no line left out can give the file a kernel name (_kernels_may_be_elided)."""
        partial = self.ctx.partial
        if partial is None or not self._kernels_may_be_elided(partial):
            return
        function = self.functions[-1]
        for call in _calls(function):
            root = _root(call.func)
            if root is not None and partial.elided_word(root):
                self.ctx.partial_misses.add(root)
        # ... the uses of the extensions themselves (a method of that Function), and relative
        # imports (`from . import _C`), which partial.py leaves out as they resolve nothing.
        self.ctx.partial_misses.update(name for name in self.kernels if partial.elided_word(name))
        if partial.elided_word("import"):
            self.ctx.partial_misses.add("import")

    def _kernels_may_be_elided(self, partial) -> bool:
        """Whether the file may have kernel names (_kernel_names) that its parsed lines do not
        show. They all stem from an import of a compiled extension (a name part matching
        _EXTENSION_PART_RE) or a name bound to a cpp_extension build (`load`, `load_inline`, or
        a name an import binds to one: imports that bind torch's names are parsed): with none
        among the parsed lines' kernel names and no such word left out, the whole file has no
        kernel name either, and no call of the guard's function is a kernel's, parsed or not
        (speechbrain 1.1.2's decoders/scorer.py: `self`, `torch`, `float` asked, the file
        parsed three times). Nor may the file name the project's CUDA-only code of another
        module (Options.cuda_only_code: the analysis of device tests follows those callees,
        _Chains._bind_project_code): a file that reaches such a function names it."""
        if self.kernels:
            return True
        if self._kernel_words_elided is None:
            words = getattr(self.ctx.code, "text_words", None) or words_of(self.ctx.text)
            self._kernel_words_elided = (
                any(entry.split("::", 2)[1].encode() in words for entry in self.ctx.options.cuda_only_code)
                or partial.elided_word("load") or partial.elided_word("load_inline")
                or any(qualified in _BUILDERS for qualified in self.ctx.imports.names.values())
                or partial.elided_word_matching(re.compile(_EXTENSION_PART_RE.encode())))  # (words: bytes)
        return self._kernel_words_elided

    def _positive_in(self, node: cst.CSTNode, guard: cst.CSTNode) -> Optional[bool]:
        """Whether the guard's test is true when `node` is (`x.is_cuda`, `x.is_cuda and ok`: True;
        `not x.is_cuda`: False), or None when that is not plain (a comparison, `x.is_cuda == False`)."""
        test = _test_of(guard)
        test = test.test if isinstance(test, cst.Assert) else test
        positive = True
        child = node
        for parent in reversed(self.parents):
            if child is test:
                return positive
            if isinstance(parent, cst.UnaryOperation) and isinstance(parent.operator, cst.Not):
                positive = not positive
            elif not isinstance(parent, cst.BooleanOperation):
                return None
            child = parent
        return None

    def _guard_of(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:
        """The if/while/assert/conditional expression whose test holds `node`."""
        child = node
        for parent in reversed(self.parents):
            if isinstance(parent, (cst.If, cst.While, cst.IfExp)) and parent.test is child:
                return parent
            if isinstance(parent, cst.Assert) and parent.test is child:
                return parent
            if isinstance(parent, (cst.BaseStatement, cst.BaseSmallStatement)):
                return None
            child = parent
        return None

    # -- CUDA_HOME -------------------------------------------------------------------------

    def _build_gate(self, node: cst.Name) -> None:
        """Only a test that decides a build or a load is a gate: the branch of an if/while/
        conditional expression that builds or loads an extension, or a condition stored in a
        variable (`with_cuda = ... CUDA_HOME is not None`) in a file that builds one. Printing
        CUDA_HOME, or joining paths with it, decides nothing (an environment report)."""
        child: cst.CSTNode = node
        condition = False  # inside a comparison, `and`/`or`, `not`
        for parent in reversed(self.parents):
            if isinstance(parent, (cst.If, cst.While)) and parent.test is child:
                branches = [parent.body] + ([parent.orelse] if parent.orelse is not None else [])
                if any(self._builds(b) for b in branches):
                    self._keep_gate(child, node)
                return
            if isinstance(parent, cst.IfExp) and parent.test is child:
                if self._builds(parent.body) or self._builds(parent.orelse) or self._file_builds():
                    statement = self._statement_part(node)
                    if statement is not None:
                        self._keep_gate(statement, node)
                return
            if isinstance(parent, (cst.Comparison, cst.BooleanOperation)) or (
                    isinstance(parent, cst.UnaryOperation) and isinstance(parent.operator, cst.Not)):
                condition = True
            if isinstance(parent, cst.BaseSmallStatement):
                if condition and not isinstance(parent, (cst.Import, cst.ImportFrom)) and self._file_builds():
                    self._keep_gate(parent, node)
                return
            if isinstance(parent, cst.BaseStatement):
                return
            child = parent

    def _availability_gate(self, node: cst.Call) -> None:
        """`if torch.cuda.is_available() or FORCE_CUDA:` around `CUDAExtension` and `.cu`
        sources (a setup.py): as torch.npu.is_available() it would compile CUDA on the NPU. And
        `map_location = None if torch.cuda.is_available() else "cpu"` (_map_location_choice)."""
        child: cst.CSTNode = node
        negative, direct = False, True  # (the call itself, or `not` of it)
        for parent in reversed(self.parents):
            if isinstance(parent, cst.IfExp) and parent.test is child and direct:
                self._map_location_choice(parent, negative, node)
                return
            tested_alone = direct  # (the test is the call itself, or `not` of it)
            if isinstance(parent, cst.UnaryOperation) and isinstance(parent.operator, cst.Not):
                negative = not negative
            else:
                direct = False
            if isinstance(parent, (cst.If, cst.While)) and parent.test is child:
                branches = [parent.body] + ([parent.orelse] if parent.orelse is not None else [])
                if any(self._builds(b) for b in branches):
                    self._keep_gate(child, node.func, "torch.cuda.is_available()")
                elif tested_alone and isinstance(parent, cst.If):
                    self._map_location_branches(parent, negative, node)
                return
            if isinstance(parent, (cst.BaseStatement, cst.BaseSmallStatement)):
                return
            child = parent

    def _map_location_choice(self, choice: cst.IfExp, negative: bool, test: cst.Call) -> None:
        """`torch.load(f, map_location=None if torch.cuda.is_available() else "cpu")`, also through
        a variable read as `map_location=` in the same function (torchreid's load_checkpoint): None
        restores each tensor to the device it was saved on. As torch.npu.is_available() the NPU
        machine would get None, and a checkpoint saved on CUDA fails there ("Attempting to
        deserialize object on a CUDA device"); kept, the test is False there and the checkpoint
        loads to the CPU, as it did on any machine without CUDA (load_state_dict then copies it
        into the NPU model)."""
        on_cuda, other = (choice.orelse, choice.body) if negative else (choice.body, choice.orelse)
        if not _is_none(on_cuda) or _is_none(other):
            return
        index = next((i for i in range(len(self.parents) - 1, -1, -1) if self.parents[i] is choice), 0)
        holder = self.parents[index - 1] if index > 0 else None
        if isinstance(holder, cst.Arg):
            if holder.keyword is None or holder.keyword.value != "map_location":
                return
        elif isinstance(holder, cst.Assign) and len(holder.targets) == 1 and isinstance(holder.targets[0].target, cst.Name):
            name = holder.targets[0].target.value
            if not any(isinstance(n, cst.Arg) and n.keyword is not None and n.keyword.value == "map_location"
                       and isinstance(n.value, cst.Name) and n.value.value == name for n in subtree(self.functions[-1])):
                if self.ctx.partial is not None and self.ctx.partial.elided_word(name):
                    self.ctx.partial_misses.add(name)  # its reader may be in lines left out
                return
        else:
            return
        self.ctx.keep(choice)
        self._report("map-location-none", test, "torch.cuda.is_available()")

    def _map_location_branches(self, test: cst.If, negative: bool, call: cst.Call) -> None:
        """The If form of _map_location_choice: `if torch.cuda.is_available(): x = torch.load(f)
        else: x = torch.load(f, map_location="cpu")`, branches that differ in torch.load's
        map_location alone (None or absent where CUDA is). Kept, the NPU machine loads to the CPU
        as written. Where the branches differ otherwise (`model.cuda()` in one), keeping the test
        would keep that placement on the CPU too: the test migrates as before."""
        if not isinstance(test.orelse, cst.Else):
            return
        on_cuda, other = (test.orelse.body, test.body) if negative else (test.body, test.orelse.body)
        resolve = self.ctx.imports.resolve
        loads = [[n for n in subtree(branch) if isinstance(n, cst.Call) and resolve(n.func) == "torch.load"]
                 for branch in (on_cuda, other)]
        if not loads[0] or not loads[1] or len(loads[0]) != len(loads[1]):
            return
        if not all(_restores_in_place(c) for c in loads[0]) or any(_restores_in_place(c) for c in loads[1]):
            return
        if _without_map_location(on_cuda, resolve) != _without_map_location(other, resolve):
            return
        self.ctx.keep(call)
        self._report("map-location-none", call, "torch.cuda.is_available()")

    def _keep_gate(self, kept: cst.CSTNode, node: cst.CSTNode, api: str = "CUDA_HOME") -> None:
        if id(kept) in self.ctx.kept:
            return  # one gate, one finding (`torch.cuda.is_available() and CUDA_HOME`)
        self.ctx.keep(kept)
        self._report("build-gate", node, api)

    def _builds(self, node: cst.CSTNode) -> bool:
        """Whether `node` builds or loads a compiled extension: names an extension class or
        build argument, calls a builder or loader, or imports a compiled module."""
        stack = [node]
        while stack:
            n = stack.pop()
            if isinstance(n, cst.Name) and n.value in _BUILD_WORDS:
                return True
            if isinstance(n, cst.Call) and self.ctx.imports.resolve(n.func) in _BUILD_CALLS:
                return True
            if isinstance(n, (cst.Import, cst.ImportFrom)) and _imports_extension(n):
                return True
            stack.extend(code_children(n))
        return False

    def _file_builds(self) -> bool:
        """Whether the file builds or loads an extension anywhere (from the words of its code
        when known: partial parsing may have left those lines out)."""
        if self.file_builds is None:
            if self.ctx.code is not None:
                words = self.ctx.code.get()
                self.file_builds = bool(words.identifiers & _BUILD_WORD_BYTES) or (
                    {b"cpp_extension", b"load"} <= words.identifiers) or (
                    b"setup" in words.identifiers and bool({"setuptools", "distutils"} & words.imported))
            else:
                self.file_builds = self._builds(self.ctx.module)
        return self.file_builds

    def _statement_part(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:
        """The test of the compound statement holding `node`, or its small statement."""
        child = node
        for parent in reversed(self.parents):
            if isinstance(parent, (cst.If, cst.While)) and parent.test is child:
                return child
            if isinstance(parent, cst.BaseSmallStatement):
                return parent
            if isinstance(parent, cst.BaseStatement):
                return None
            child = parent
        return None

    # -- get_device_capability -------------------------------------------------------------

    def _capability(self, call: cst.Call) -> None:
        if self._only_shown(call) or self._beside_npu_branch():
            return
        statement = self._statement_part(call)
        if statement is None:
            return
        self.ctx.keep(statement)
        api = self.ctx.imports.resolve(call.func) or "get_device_capability"
        self._report("capability", call.func, api)

    def _properties_version(self, call: cst.Call) -> None:
        """`torch.cuda.get_device_properties(d).major` (`.minor`, `.multi_processor_count`, ...:
        _PROPERTY_WITHOUT_NPU_VALUE): the NPU's properties have no value for it (None, or no such
        attribute), so the migrated statement would fail, or hand None on (liger-kernel's
        `_get_sm_count` sizes its grids with it); it stays as it is (the `torch.cuda` call with
        it) and is reported like a capability check. Showing the value is migrated."""
        parent = self.parents[-1] if self.parents else None
        if isinstance(parent, cst.Attribute) and parent.value is call and parent.attr.value in _PROPERTY_WITHOUT_NPU_VALUE:
            if self._only_shown(parent, len(self.parents) - 1):
                return
            field = parent.attr.value
        else:
            field = self._field_read_later(call)
            if not field:
                return
        if self._beside_npu_branch():
            return
        statement = self._statement_part(call)
        if statement is None:
            return
        self.ctx.keep(statement)
        api = self.ctx.imports.resolve(call.func) or "get_device_properties"
        rule = self.guard_rules.get("device-properties")
        if rule is not None:  # the finding's api is the function (reports group by it), its text names the field
            shown = f"{api}(...).{field}"
            detail = _PROPERTY_WITHOUT_NPU_VALUE[field]
            self.ctx.finding(rule, call.func, api=api, message=rule.render_message(api=shown, detail=detail),
                             suggestion=rule.render_suggestion(api=shown, detail=detail))

    def _field_read_later(self, call: cst.Call) -> str:
        """`prop = torch.cuda.get_device_properties(d)` then `prop.major` in the same function
        (fairseq's utils.CudaEnvironment, built by every Trainer that trains on the device): the
        first such field read there, else "". Not a field only shown: any read of the variable's."""
        parent = self.parents[-1] if self.parents else None
        if not (isinstance(parent, cst.Assign) and parent.value is call and len(parent.targets) == 1
                and isinstance(parent.targets[0].target, cst.Name)):
            return ""
        name = parent.targets[0].target.value
        reads = [n.attr.value for n in subtree(self.functions[-1])
                 if isinstance(n, cst.Attribute) and n.attr.value in _PROPERTY_WITHOUT_NPU_VALUE
                 and isinstance(n.value, cst.Name) and n.value.value == name]
        if reads:
            return reads[-1]  # (subtree goes from the last child back: the first read in the file)
        if self.ctx.partial is not None and self.ctx.partial.elided_word(name):
            self.ctx.partial_misses.add(name)  # its reads may be in lines left out: parse them too
        return ""

    def _beside_npu_branch(self) -> bool:
        """Whether the node being visited is in the CUDA branch of an if/elif chain that has an
        NPU branch (liger-kernel: `if X.device.type == "cuda": sm_count = ...multi_processor_count
        ... elif X.device.type == "npu": sm_count = get_npu_core_count()`): the NPU never runs
        it, and keep_cuda_beside_npu keeps that branch as it is; nothing to keep or report."""
        for i in range(len(self.parents) - 1, 0, -1):
            block, branch = self.parents[i], self.parents[i - 1]
            if not (isinstance(branch, cst.If) and branch.body is block):
                continue
            first = i - 1  # the chain's `if`: an `elif` is the `orelse` of the branch before it
            while first > 0 and isinstance(self.parents[first - 1], cst.If) \
                    and self.parents[first - 1].orelse is self.parents[first]:  # type: ignore[attr-defined]
                first -= 1
            chain: List[cst.If] = []
            node: Optional[cst.CSTNode] = self.parents[first]
            while isinstance(node, cst.If):
                chain.append(node)
                node = node.orelse
            if any(b is branch for b in cuda_arms_beside_npu(chain, file_cuda_tests(self.ctx))):
                return True
        return False

    def _only_shown(self, call: cst.BaseExpression, depth: Optional[int] = None) -> bool:
        """Whether the value is only printed, logged or formatted (None shows as None). `depth`:
        how many of `self.parents` lead to `call` (all of them by default; one fewer for the
        attribute of a call being visited)."""
        parents = self.parents if depth is None else self.parents[:depth]
        parent = parents[-1] if parents else None
        if isinstance(parent, cst.Arg) and len(parents) > 1:
            outer = parents[-2]
            return isinstance(outer, cst.Call) and is_display_call(outer)
        if isinstance(parent, cst.FormattedStringExpression):
            return True
        if isinstance(parent, cst.Comparison):
            return all(isinstance(t.operator, (cst.Is, cst.IsNot)) for t in parent.comparisons)
        return False


def is_display_call(call: cst.Call) -> bool:
    """`print(...)`, `str(...)`, `logger.info(...)`, `"...".format(...)`: calls that only show
    their arguments."""
    func = call.func
    if isinstance(func, cst.Name):
        return func.value in _SHOWN
    if isinstance(func, cst.Attribute):
        return func.attr.value in _LOG_METHODS or func.attr.value == "format"
    return False


def _compared_with_bool(parent: Optional[cst.CSTNode], child: cst.CSTNode) -> Optional[bool]:
    """Whether `parent` compares the test `child` with a bool literal and is True when the test
    is False (`<test> is False`, `<test> != True`: a negation), False when it is the same test
    (`<test> is True`, `<test> == True`); None when `parent` is something else."""
    if not (isinstance(parent, cst.Comparison) and parent.left is child and len(parent.comparisons) == 1):
        return None
    target = parent.comparisons[0]
    if not (isinstance(target.comparator, cst.Name) and target.comparator.value in ("True", "False")):
        return None
    if isinstance(target.operator, (cst.Is, cst.Equal)):
        return target.comparator.value == "False"
    if isinstance(target.operator, (cst.IsNot, cst.NotEqual)):
        return target.comparator.value == "True"
    return None


def _map_location(call: cst.Call) -> Optional[cst.BaseExpression]:
    return next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "map_location"), None)


def _restores_in_place(load: cst.Call) -> bool:
    """torch.load without map_location, or with None: each tensor to the device it was saved on."""
    where = _map_location(load)
    return where is None or _is_none(where)


class _NoMapLocation(cst.CSTTransformer):
    def __init__(self, resolve) -> None:
        super().__init__()
        self.resolve_name = resolve

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        if self.resolve_name(original.func) != "torch.load":
            return updated
        args = [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in updated.args
                if a.keyword is None or a.keyword.value != "map_location"]
        return updated.with_changes(args=args)


def _without_map_location(block: cst.BaseSuite, resolve) -> str:
    """The code of `block` with torch.load's map_location arguments left out (and the commas
    between arguments written alike)."""
    visited = block.visit(_NoMapLocation(resolve))
    return cst.Module(body=[]).code_for_node(visited) if isinstance(visited, cst.CSTNode) else ""


def _is_none(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def _test_of(guard: cst.CSTNode) -> cst.CSTNode:
    return guard if isinstance(guard, cst.Assert) else guard.test  # type: ignore[attr-defined]


def _says_cuda_only(guard: cst.CSTNode, positive: Optional[bool] = None) -> bool:
    """An assert whose message says CUDA only, or an `if` whose body raises such an error or
    NotImplementedError (`if not x.is_cuda: raise ...`), or whose `else:` does
    (`if x.is_cuda: ... else: raise NotImplementedError`). A body that raises under a test true on
    CUDA (`positive`) refuses CUDA instead (pyro's SpanningTree: `if edge_logits.is_cuda: raise
    NotImplementedError("... does not support cuda tensors")`): as `is_npu` it refuses the NPU alike."""
    if isinstance(guard, cst.Assert):
        return guard.msg is not None and _cuda_only_text(guard.msg)
    if isinstance(guard, cst.If):
        branches: List[cst.BaseSuite] = [] if positive else [guard.body]
        negated = isinstance(guard.test, cst.UnaryOperation) and isinstance(guard.test.operator, cst.Not)
        if not negated and positive is not False and isinstance(guard.orelse, cst.Else):
            branches.append(guard.orelse.body)
        return any(_raises_cuda_only(small) for branch in branches for small in suite_small_statements(branch))
    return False


def suite_small_statements(suite: cst.BaseSuite) -> Iterator[cst.BaseSmallStatement]:
    """The small statements a block runs unconditionally, in order: those of its simple
    statement lines (`raise ...`), or of a one-line suite (`if c: raise ...`). Compound
    statements inside (a nested `if`, `with`, `for`) run their bodies under other conditions and
    are not entered. Every libcst suite shape is handled, so no guard shape can crash this."""
    if isinstance(suite, cst.SimpleStatementSuite):
        yield from suite.body
        return
    for stmt in suite.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            yield from stmt.body


def _skip_call(small: cst.CSTNode) -> Optional[cst.Call]:
    """`pytest.skip("... requires CUDA")` as a statement: it raises (the test stops there)."""
    value = small.value if isinstance(small, cst.Expr) else None
    return value if isinstance(value, cst.Call) and dotted_name(value.func) in _SKIPS else None


def _raises_cuda_only(small: cst.BaseSmallStatement) -> bool:
    skip = _skip_call(small)
    if skip is not None:
        return any(_cuda_only_text(a.value) for a in skip.args if a.keyword is None or a.keyword.value in ("reason", "msg"))
    if not isinstance(small, cst.Raise) or small.exc is None:
        return False
    exc = small.exc
    name = dotted_name(exc.func if isinstance(exc, cst.Call) else exc) or ""
    return name.rsplit(".", 1)[-1] == "NotImplementedError" or _cuda_only_text(exc)


def _cuda_only_text(node: cst.CSTNode) -> bool:
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.SimpleString):
            if compiled(_CUDA_ONLY_RE).search(n.value):
                return True
        elif isinstance(n, cst.FormattedStringText):
            if compiled(_CUDA_ONLY_RE).search(n.value):
                return True
        stack.extend(code_children(n))
    return False


_NPU_WORD = r"(?i)(?:^|_)npu(?:_|$)"  # torch.npu, is_npu_available, torch_npu


def _is_npu_name(value: str) -> bool:
    return value == "npu" or value.startswith("npu:")


def _is_cuda_name(value: str) -> bool:
    return value in ("cuda", "gpu") or value.startswith("cuda:")


def _names_device(test: cst.CSTNode, word: "re.Pattern[str]", is_name) -> bool:
    """Whether `test` names the device: a name or attribute with the word (`torch.npu`,
    `is_npu_available()`), or a device string (`== "npu"`, `.startswith("npu:")`)."""
    stack = [test]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Name) and word.search(n.value):
            return True
        if isinstance(n, cst.SimpleString):
            value = string_value(n)
            if value is not None and is_name(value):
                return True
        stack.extend(code_children(n))
    return False


def _tests_cuda_itself(test: cst.CSTNode, kept: Sequence[str] = ()) -> bool:
    """Whether `test` checks CUDA itself, so that it stays False on the NPU once kept:
    `torch.cuda.is_available()`, `x.is_cuda`, `device == "cuda"`, `dev.startswith("cuda:")`, or
    calls one of `kept` (Options.cuda_tests: the project's CUDA tests beside its NPU tests, which
    keep their bodies: keep_cuda_tests). Not a variable or another function computed elsewhere
    (`if pt_cuda_available:`, `use_cuda()`): that code migrates where it is (`return
    torch.npu.is_available()`), and a branch kept on CUDA behind it would run on the NPU. Such a
    branch migrates; a second NPU branch is redundant, not wrong."""
    stack = [test]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.SimpleString):
            value = string_value(n)
            if value is not None and _is_cuda_name(value):
                return True
            continue
        if isinstance(n, cst.Attribute):
            dotted = get_full_name_for_node(n) or ""
            if dotted.startswith("torch.cuda.") or n.attr.value == "is_cuda":
                return True
            stack.append(n.value)  # `torch.cuda.is_available().real`, `x.device.type == "cuda"`
            continue
        if isinstance(n, cst.Call):
            if kept and _calls_kept_test(n, kept):
                return True
            stack.append(n.func)
            stack.extend(a.value for a in n.args)
            continue
        if isinstance(n, cst.Name):
            continue  # a variable, or a function defined elsewhere
        stack.extend(code_children(n))
    return False


# Files that name the NPU as a word (not the "npu" of "input"): only they can select it already.
# `npu` not followed by a letter or digit, or not preceded by one (the lookbehind checks the
# character before the `npu` just matched). The literal first: the regex engine jumps between
# the `npu`s of the text (`(?<!...)npu|...` tried every position: 5x slower on transformers,
# where "input" puts `npu` in almost every file).
NPU_WORD_IN_TEXT = r"(?i)npu(?:(?![A-Za-z0-9])|(?<![A-Za-z0-9]npu))"


def keep_cuda_beside_npu(ctx: Context, node: cst.CSTNode, elifs: Set[int]) -> None:
    """Code that selects the NPU already (see the module docstring): keep the CUDA branches of an
    if/elif chain with an NPU branch (`node` an If, before its branches are visited; `elifs`
    collects the ids of the `elif`s of chains already looked at), and a collection of device
    names with an "npu" entry and a "cuda" one."""
    if isinstance(node, cst.If):
        if id(node) in elifs:
            return
        chain: List[cst.If] = []
        branch: Optional[cst.CSTNode] = node
        while isinstance(branch, cst.If):
            chain.append(branch)
            elifs.add(id(branch))
            branch = branch.orelse
        for b in cuda_arms_beside_npu(chain, file_cuda_tests(ctx)):
            ctx.keep(b.test)
            ctx.keep(b.body)
        # After an arm whose test is the NPU's availability itself (`elif is_npu_available():`),
        # the later arms and the `else:` never run on the NPU (accelerate's utils/modeling.py
        # `else: expected_device_type = "cuda"`): edited, they were noise in the diff.
        at = next((i for i, b in enumerate(chain) if _tests_npu_availability(b.test)), None)
        if at is not None:
            for b in chain[at + 1:]:
                ctx.keep(b.test)
                ctx.keep(b.body)
            if isinstance(chain[-1].orelse, cst.Else):
                ctx.keep(chain[-1].orelse)
        return
    if isinstance(node, cst.Dict):
        values = [e.key for e in node.elements if isinstance(e, cst.DictElement)]
    elif isinstance(node, (cst.Tuple, cst.List, cst.Set)):
        values = [e.value for e in node.elements if isinstance(e, cst.Element)]
    else:
        return
    names = [string_value(v) for v in values if isinstance(v, cst.SimpleString)]
    if any(n is not None and _is_npu_name(n) for n in names) and any(n is not None and _is_cuda_name(n) for n in names):
        ctx.keep(node)  # whole: a rewrite of a dict as a backend table changes its values too


def cuda_arms_beside_npu(chain: Sequence[cst.If], tests: Sequence[str]) -> List[cst.If]:
    """The CUDA arms of an if/elif chain that selects the NPU already: the arms whose test checks
    CUDA itself (_tests_cuda_itself, stays False on the NPU) in a chain with an arm for the NPU,
    which is a test naming it (`elif device_type == "npu":`, `elif torch.npu.is_available():`) or
    an `else:` that selects it (xtuner 0.2.0 _lite/device.py: `if torch.cuda.is_available(): device
    = "cuda"` / `else: import torch_npu; device = "npu"`: moved, the test called torch.npu before
    the `else` imported torch_npu, and the NPU arm never ran). A test comparing with a member of a
    per-device enumeration counts as checking CUDA where the chain tests the enumeration's NPU
    member (llamafactory 0.9.5's `device_type == DeviceType.CUDA` / `elif device_type ==
    DeviceType.NPU`): the member keeps its value, "cuda"."""
    npu = compiled(_NPU_WORD)
    npu_arms = [b for b in chain if _names_device(b.test, npu, _is_npu_name)]
    last = chain[-1].orelse if chain else None
    if not npu_arms and not (isinstance(last, cst.Else) and _names_device(last.body, npu, _is_npu_name)):
        return []
    owners = {owner for b in npu_arms for owner in _members_of(b.test, ("npu",))}
    npu_ids = {id(b) for b in npu_arms}
    return [b for b in chain if id(b) not in npu_ids and (
        _tests_cuda_itself(b.test, tests) or bool(owners & set(_members_of(b.test, ("cuda", "gpu")))))]


def _members_of(test: cst.CSTNode, members: Sequence[str]) -> Iterator[str]:
    """The owners of the `Owner.MEMBER` attributes in `test` whose member is one of `members`
    (any case): `DeviceType.NPU` gives "DeviceType"."""
    for n in subtree(test):
        if isinstance(n, cst.Attribute) and n.attr.value.lower() in members:
            owner = get_full_name_for_node(n.value)
            if owner is not None:
                yield owner


def file_cuda_tests(ctx: Context) -> Tuple[str, ...]:
    """The CUDA tests whose calls the file's device code keeps as they are: the project's
    (Options.cuda_tests) and a library's it imports (_library_cuda_tests)."""
    library = _library_cuda_tests(ctx)
    return ctx.options.cuda_tests + library if library else ctx.options.cuda_tests


def _library_cuda_tests(ctx: Context) -> Tuple[str, ...]:
    """The local names of a library's CUDA tests the file imports (frameworks.LIBRARY_CUDA_TESTS:
    False on the NPU wherever they come from there)."""
    return tuple(local for local, qual in ctx.imports.names.items() if qual in LIBRARY_CUDA_TESTS)


# The NPU's own availability tests: `torch.npu.is_available()`, the project's `is_npu_available()`,
# `is_torch_npu_available(check_device=True)` (the last part of the name called).
_NPU_AVAILABILITY = {"torch.npu.is_available", "torch_npu.npu.is_available"}
_NPU_AVAILABILITY_NAME = r"^is_(?:torch_)?npu_available$"


def _tests_npu_availability(test: cst.BaseExpression) -> bool:
    """Whether `test` is a call of the NPU's availability test and nothing more: True on the NPU."""
    if not isinstance(test, cst.Call):
        return False
    name = get_full_name_for_node(test.func) or ""
    return name in _NPU_AVAILABILITY or compiled(_NPU_AVAILABILITY_NAME).match(name.rsplit(".", 1)[-1]) is not None


def _calls_kept_test(call: cst.Call, kept: Sequence[str]) -> bool:
    """`is_cuda_available()`, `imports.is_cuda_available()`: a call of one of the project's CUDA
    tests that keep their bodies (Options.cuda_tests), with no arguments."""
    func = call.func
    name = func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else None
    return name is not None and name in kept and not call.args and (get_full_name_for_node(func) or "").split(".", 1)[0] != "torch"


def keep_cuda_tests(ctx: Context) -> Tuple[str, ...]:
    """The project's CUDA availability tests that have an NPU twin in it (Options.cuda_tests:
    accelerate 1.15.0 utils/imports.py `def is_cuda_available(): ... return
    torch.cuda.is_available()` beside `def is_npu_available()`) are code that selects the NPU
    already: the project tests the NPU with its own function, and its chains have an NPU arm
    (`elif is_cuda_available(): return "cuda", torch.cuda.device_count(), ... elif
    is_npu_available(): return "npu", ...`). Migrated, the CUDA test became a second NPU test that
    such a chain took first, with its "cuda" strings kept: `return "cuda", torch.npu.device_count()`.
    The module's definition of one stays as it is (a top-level function), and so does every branch
    it opens in any module (keep_behind_cuda_test: False on the NPU, as unmigrated). Returns the
    tests the file's text names (nothing to look for when none)."""
    tests = tuple(t for t in ctx.options.cuda_tests if t in ctx.text)
    for node in ctx.module.body if tests else ():
        if isinstance(node, cst.FunctionDef) and node.name.value in tests:
            ctx.keep(node)
    return tests + _library_cuda_tests(ctx)  # (a library's: imported, not defined)


def keep_behind_cuda_test(ctx: Context, node: cst.If, tests: Sequence[str]) -> None:
    """An `if`/`elif` whose test is one of the project's kept CUDA tests (keep_cuda_tests), alone or
    in an `and` (`if is_cuda_available() and not is_torch_xla_available():`): False on the NPU, so
    its test and branch stay as they are (accelerate's checkpointing.py `if is_cuda_available():
    states["torch_cuda_manual_seed"] = torch.cuda.get_rng_state_all()`: dead code on the NPU,
    edited it was noise in the diff)."""
    if _opens_on_cuda_test(node.test, tests):
        ctx.keep(node.test)
        ctx.keep(node.body)


def _opens_on_cuda_test(test: cst.BaseExpression, tests: Sequence[str]) -> bool:
    if isinstance(test, cst.Call):
        return _calls_kept_test(test, tests)
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _opens_on_cuda_test(test.left, tests) or _opens_on_cuda_test(test.right, tests)
    return False


# `torch.cuda.is_available() and not check_cuda_fp8_capability()`: the text test for
# keep_cuda_capability_test (a file without it has nothing for it).
CUDA_CHECK_AFTER_AVAILABLE = r"is_available\(\)\s+and\s+not\s+[\w.]*cuda"
_CUDA_NAMED = r"(?i)(?:^|_)cuda(?:_|$)"


def keep_cuda_capability_test(ctx: Context, node: cst.If, resolve) -> None:
    """`elif torch.cuda.is_available() and not check_cuda_fp8_capability():` (accelerate 1.15.0
    state.py:937, test_utils/testing.py:247): the project's own check of a CUDA device, named for
    CUDA, which reads nvidia-smi or the CUDA compute capability (kept on CUDA: NPU307), behind the
    CUDA availability test. Migrated, the NPU passed the test and ran the CUDA check (with fp8
    asked for, the capability call raised there, where unmigrated the branch was skipped). The
    test and its branch stay as they are: False on the NPU, the branch says what CUDA lacks."""
    operands: List[cst.BaseExpression] = []
    stack: List[cst.BaseExpression] = [node.test]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.BooleanOperation) and isinstance(n.operator, cst.And):
            stack.extend((n.left, n.right))
        else:
            operands.append(n)
    available = any(isinstance(o, cst.Call) and resolve(o.func) == "torch.cuda.is_available" for o in operands)
    if available and any(_negated_cuda_check(o, resolve) for o in operands):
        ctx.keep(node.test)
        ctx.keep(node.body)


def _negated_cuda_check(operand: cst.BaseExpression, resolve) -> bool:
    """`not check_cuda_fp8_capability()`: a call of a function named for CUDA, not torch's."""
    if not (isinstance(operand, cst.UnaryOperation) and isinstance(operand.operator, cst.Not)
            and isinstance(operand.expression, cst.Call)):
        return False
    func = operand.expression.func
    name = func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else ""
    qual = resolve(func) or get_full_name_for_node(func) or ""
    return compiled(_CUDA_NAMED).search(name) is not None and qual.split(".", 1)[0] != "torch"


TWIN_OF_NPU_CLASS = "NPU328"
_CUDA_CLASS_LINE = r"(?m)^class[ \t]+(?:Cuda|CUDA)_?[A-Z]"


@emits(TWIN_OF_NPU_CLASS)
def keep_cuda_twin_of_npu_class(ctx: Context) -> None:
    """The CUDA member of a per-device class family the project already has an NPU member of
    (colossalai's CudaAccelerator beside its NpuAccelerator, deepspeed's CUDA_Accelerator beside
    NPU_Accelerator: a class of the run's files, Options.npu_families, or of this file) is code
    that selects the NPU already: the project picks that NPU class on the NPU. Migrated, it
    became a second NPU class, and colossalai's registry (`OrderedDict(cuda=CudaAccelerator,
    npu=NpuAccelerator)`, the first available wins) took it, named "cuda", on the NPU. The class
    (module level) is kept whole and reported (info)."""
    if compiled(_CUDA_CLASS_LINE).search(ctx.text) is None:
        return
    from ..project_values import CUDA_FAMILY_CLASS, npu_families

    families = set(ctx.options.npu_families) | set(npu_families(ctx.text.encode("utf-8", "surrogateescape")))
    if not families:
        return
    rule = ctx.rules.analysis.get(TWIN_OF_NPU_CLASS)
    kept = False
    for node in ctx.module.body:
        if not isinstance(node, cst.ClassDef):
            continue
        found = compiled(CUDA_FAMILY_CLASS).match(node.name.value)
        if found is None or found.group(1) not in families:
            continue
        ctx.keep(node)
        kept = True
        if rule is not None:
            ctx.quiet(node, but=rule.code)  # (code that never runs on the NPU: NPU328 says so)
            api = node.name.value
            detail = ("NPU" if api.startswith("CUDA") else "Npu") + found.group(1)
            ctx.finding(rule, node.name, api=api, message=rule.render_message(api=api, detail=detail),
                        suggestion=rule.render_suggestion(api=api, detail=detail))
    if kept:
        # deepspeed's cuda_accelerator.py `try: import torch.cuda` (module level, for the class):
        # an import of torch.cuda works on the NPU too; rewritten, the file gained `import
        # torch_npu` and `import torch.npu` for a class that never runs there.
        for statement in _module_level(ctx.module.body):
            for small in statement.body if isinstance(statement, cst.SimpleStatementLine) else ():
                if isinstance(small, cst.Import) and all(
                        a.asname is None and (dotted_name(a.name) or "").split(".")[:2] == ["torch", "cuda"]
                        for a in small.names):
                    ctx.keep(statement)


def _module_level(body: Sequence[cst.CSTNode]) -> Iterator[cst.CSTNode]:
    """The statements run at module level: those of `try`/`if` blocks too, not of a def/class."""
    for statement in body:
        yield statement
        if isinstance(statement, (cst.Try, cst.If)):
            blocks = [statement.body, getattr(statement, "orelse", None), getattr(statement, "finalbody", None)]
            blocks += [h.body for h in getattr(statement, "handlers", ())]
            for block in blocks:
                if isinstance(block, (cst.Else, cst.Finally)):
                    block = block.body
                elif isinstance(block, cst.If):  # elif
                    yield from _module_level([block])
                    continue
                if isinstance(block, cst.IndentedBlock):
                    yield from _module_level(block.body)


def keep_cuda_patched_with_npu(ctx: Context, node: cst.Assign, resolve) -> None:
    """`torch.cuda.amp = npu.amp`, `torch.cuda.is_available = torch.npu.is_available`: an
    assignment to a `torch.cuda` name of a value that names the NPU keeps its target (see the
    module docstring). An assignment of anything else to a `torch.cuda` name moves, as the
    project's readers of that name do."""
    targets = [t.target for t in node.targets
               if isinstance(t.target, cst.Attribute) and (resolve(t.target) or "").startswith("torch.cuda.")]
    if targets and _names_device(node.value, compiled(_NPU_WORD), _is_npu_name):
        for target in targets:
            ctx.keep(target)


_GPU_FLAG = r"(?i)(?:^|_)(?:gpu|gpus|cuda)(?:_|$)"


def keep_gpu_flag(ctx: Context, arg: cst.Arg) -> None:
    """`FaissKMeans(gpu=self.device.type == "cuda")`: a keyword that says GPU or CUDA given a test
    of the device asks the callee for its CUDA path (faiss-gpu, cupy); rewritten to "npu" the
    callee would take that path on the NPU. The argument stays as it is (False on the NPU)."""
    if arg.keyword is None or not compiled(_GPU_FLAG).search(arg.keyword.value):
        return
    stack: List[cst.CSTNode] = [arg.value]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Comparison) or (isinstance(n, cst.Attribute) and n.attr.value == "is_cuda"):
            ctx.keep(arg.value)
            return
        if isinstance(n, (cst.BooleanOperation, cst.UnaryOperation)):
            stack.extend(n.children)


def keep_foreign_device_tests(ctx: Context, call: cst.Call, resolve) -> None:
    """`ctranslate2.Generator(p, device="cuda" if torch.cuda.is_available() else "cpu")`: in a
    call of a library with device names of its own (device_context.NON_TORCH_LIBRARIES) the
    "cuda" stays, so the test that picks it stays too: rewritten to torch.npu.is_available() it
    would hand that library "cuda" on the Ascend machine, where as written it gets "cpu"."""
    for arg in call.args:
        if dc.is_device_test(arg.value, resolve):
            ctx.keep(arg.value)


# Lightning's own device arguments: a Trainer or Fabric takes accelerator names ("gpu", "cuda",
# "cpu", "auto"), GPU counts and device indices there, never a torch device, and has no NPU
# accelerator (NPU313 reports the CUDA request).
LIGHTNING_DEVICE_KEYWORDS = ("accelerator", "gpus", "devices")


def lightning_device_calls(ctx: Context) -> AbstractSet[str]:
    """The calls NPU313 reports a CUDA request in (Lightning's Trainer and Fabric): qualified
    names, from the rules. Empty in a file that does not name Lightning."""
    if "lightning" not in ctx.text:
        return frozenset()
    return frozenset(n for r in ctx.rules.findings.get("call", ()) if r.code == "NPU313" for n in names_of(r))


def keep_lightning_device_arguments(ctx: Context, call: cst.Call, qual: Optional[str],
                                    calls: AbstractSet[str]) -> None:
    """`pl.Trainer(accelerator="gpu" if torch.cuda.is_available() else "cpu")` (pytorch-forecasting
    1.8.0's TFT test), `gpus=torch.cuda.device_count()`: Lightning's device arguments stay as
    written. Moved, the test hands Lightning "gpu" (or a GPU count) on the Ascend machine, where
    Lightning finds no CUDA device and stops, and `"cuda" if ... else "cpu"` would become "npu", an
    accelerator Lightning does not have; as written it gets "cpu" and trains there (NPU313 says how
    to run it on the NPU)."""
    if qual not in calls:
        return
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value in LIGHTNING_DEVICE_KEYWORDS:
            ctx.keep(arg.value)


# `accelerator=accel`, `gpus=n`: one of Lightning's device arguments given a variable (the text
# test for keep_lightning_device_variables), and a line assigning that variable something CUDA.
_LIGHTNING_VARIABLE_RE = r"\b(?:%s)\s*=\s*([A-Za-z_]\w*)\s*[,)]" % "|".join(LIGHTNING_DEVICE_KEYWORDS)
_ASSIGNED_CUDA_RE = r"(?m)^[ \t]*(%s)[ \t]*=(?!=)[^\n]*cuda"


def keep_lightning_device_variables(ctx: Context, resolve, calls: AbstractSet[str]) -> None:
    """`accel = "cuda" if torch.cuda.is_available() else "cpu"; L.Trainer(accelerator=accel)`,
    `n = torch.cuda.device_count(); Trainer(gpus=n)`: a variable that the module reads only as
    Lightning's device arguments (keep_lightning_device_arguments: accelerator names and GPU
    counts, never a torch device) stays as written with them. Moved, Lightning got "npu" (an
    accelerator it does not have) or the NPU count as a GPU count on the Ascend machine and
    stopped; as written it gets "cpu" there (NPU313 says how to run it on the NPU). A variable also
    read otherwise (`model.to(accel)`, a comment naming it: the text's reads are counted) moves
    as before. One walk, in files that name Lightning, give it a variable so and assign that
    variable on a line naming CUDA."""
    text = ctx.text
    names = set(compiled(_LIGHTNING_VARIABLE_RE).findall(text))
    if not names or re.search(_ASSIGNED_CUDA_RE % "|".join(map(re.escape, sorted(names))), text) is None:
        return  # (no such variable assigned on a line naming CUDA: nothing the torch pass would move)
    work.count("walk")
    given: Dict[str, int] = {}
    assigned: Dict[str, List[cst.BaseExpression]] = {}
    for node in subtree(ctx.module):
        if type(node) is cst.Call:
            if resolve(node.func) in calls:
                for arg in node.args:
                    if (arg.keyword is not None and arg.keyword.value in LIGHTNING_DEVICE_KEYWORDS
                            and isinstance(arg.value, cst.Name)):
                        given[arg.value.value] = given.get(arg.value.value, 0) + 1
        elif type(node) is cst.Assign:
            for target in node.targets:
                if isinstance(target.target, cst.Name):
                    assigned.setdefault(target.target.value, []).append(node.value)
    for name, count in given.items():
        if name not in assigned:
            continue
        # every read of the name the text may hold (comments and strings too: never fewer)
        reads = len(compiled(r"(?<![\w.])%s\b(?!\s*=(?!=))" % re.escape(name)).findall(text))
        if reads == count:
            for value in assigned[name]:
                ctx.keep(value)
        elif ctx.partial is not None and ctx.partial.elided_word(name):
            ctx.partial_misses.add(name)  # (a Lightning call left out may read it: asked for)


def keep_test_choosing_gpu(ctx: Context, node: cst.IfExp, resolve) -> None:
    """`accelerator = "gpu" if torch.cuda.is_available() else "cpu"` (lightly 1.6.0's train_cli,
    handed to Lightning's Trainer through a dict): "gpu" is no torch device (it stays), but a
    framework's name for a CUDA GPU (Lightning's accelerator, catboost's task_type, LightGBM's
    device). Moved to torch.npu, the test would pick "gpu" on the Ascend machine, where that
    framework finds no GPU and stops; as written it picks the other literal ("cpu") and runs.
    Only a choice between two string literals: an arm that computes something (ultralytics'
    `torch.cuda.get_device_name(0) if torch.cuda.is_available() else "GPU"`) moves with its test.
    Only a test of the machine (`torch.cuda.is_available()`, `device_count()`), the way a
    framework's accelerator is chosen: a test of where a tensor is (classy-vision 0.7.0's
    distributed_util.py: `orig_device = "cpu" if not tensor.is_cuda else "gpu"`, read back as
    `if tensor.is_cuda and orig_device == "cpu": tensor = tensor.cpu()`) records the tensor's
    place in the module's own label and moves with the module's other placement tests: kept, it
    said "cpu" for every NPU tensor, and the moved reader sent the reduced tensor to the CPU."""
    arms = (node.body, node.orelse)
    if not all(isinstance(arm, cst.SimpleString) for arm in arms):
        return
    if any((string_value(arm) or "").lower() == "gpu" for arm in arms) and any(
            type(n) is cst.Call and resolve(n.func) in dc.DEVICE_TESTS for n in subtree(node.test)):
        ctx.keep(node.test)


def keep_test_choosing_kept_name(ctx: Context, node: cst.If, resolve, moves) -> None:
    """`if torch.cuda.is_available(): accelerator = "cuda"` / `elif ...: accelerator = "mps"` /
    `else: accelerator = "cpu"` (litgpt 0.5.13's LLM.load and LLM.distribute, whose `accelerator`
    goes to Lightning's Fabric): the statement form of keep_test_choosing_gpu. The arm only names
    CUDA in strings the pass leaves as they are (`moves(assign)` is False: `accelerator` is no
    device variable, "gpu" no torch device), so the test stays with them. Moved to torch.npu, the
    test would pick "cuda" on the Ascend machine, where Lightning finds no CUDA device and stops;
    as written it picks the arm below ("cpu") and runs. Only an arm that does nothing but assign
    such strings to names: one that also moves a model (`model.cuda()`) moves with its test.
    The string may be a member of the module's own class (pyannote-audio 4.0.7's __main__.py:
    `device = Device.CUDA`, `class Device(str, Enum): CUDA = "cuda"`, read as
    `torch.device(device.value)`): the member keeps its value, so the test stays with it.
    The name may be a key of a dict or an attribute (neuralforecast 1.7.5's BaseModel: `if
    torch.cuda.is_available(): trainer_kwargs["accelerator"] = "gpu"`, the dict later
    `pl.Trainer(**trainer_kwargs)`), and in a file that names Lightning an arm may give one of
    Lightning's device keys a number (the next test's `trainer_kwargs["devices"] = -1`: moved
    alone, Lightning's CPU accelerator on the Ascend machine refuses -1, "should be an int > 0").
    A CUDA name so handed to Lightning through a dict's key or an attribute `accelerator` is
    reported at the assignment (NPU313: as written, on the Ascend machine it trains on the CPU)."""
    body = node.body
    if not isinstance(body, cst.IndentedBlock) or not body.body:
        return
    lightning: Optional[AbstractSet[str]] = None
    requests: List[cst.Assign] = []
    for statement in body.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            return
        for small in statement.body:
            if type(small) is not cst.Assign:
                return
            keys = [_assigned_key(t.target) for t in small.targets]
            if None in keys:
                return
            assign = small if type(small.value) is cst.SimpleString else _class_member_assignment(ctx, small.value)
            if assign is not None and type(assign.value) is cst.SimpleString:
                value = (string_value(assign.value) or "").lower()
                if value.split(":", 1)[0] not in ("cuda", "gpu") or moves(assign):
                    return
                if "accelerator" in keys and any(type(t.target) is not cst.Name for t in small.targets):
                    requests.append(small)
                continue
            if lightning is None:
                lightning = lightning_device_calls(ctx)
            if not (lightning and _is_number(small.value) and all(k in LIGHTNING_DEVICE_KEYWORDS for k in keys)):
                return
    if dc.is_device_test(node.test, resolve):
        ctx.keep(node.test)
        if requests:
            _report_lightning_request(ctx, requests)


# The environment variables that choose the EGL device MuJoCo (dm_control, mujoco) renders on: an
# index among the EGL devices of NVIDIA's driver, a GPU's, never an NPU's.
EGL_DEVICE_VARIABLES = ("MUJOCO_EGL_DEVICE_ID", "EGL_DEVICE_ID")


def egl_device_choices(ctx: Context) -> bool:
    """Whether the file may choose an EGL device (keep_cuda_test_choosing_egl_device): a text test."""
    return "EGL_DEVICE_ID" in ctx.text


def keep_cuda_test_choosing_egl_device(ctx: Context, node: cst.If, resolve) -> None:
    """torchrl 0.6.0 torchrl/__init__.py:18-20 and torchrl/envs/libs/dm_control.py:31-35: `if
    torch.cuda.device_count() > 1: n = torch.cuda.device_count() - 1;
    os.environ["MUJOCO_EGL_DEVICE_ID"] = str(1 + (os.getpid() % n))` spreads MuJoCo's rendering
    over the GPUs but the first. An EGL device is a GPU of NVIDIA's EGL driver, which an Ascend
    machine does not have: moved, the NPU count chose an EGL index there (dm_control refuses one
    past its EGL devices); as written the test is False there and MuJoCo renders on its default.
    The statement stays whole when CUDA appears in it only as the device count or availability."""
    if not dc.is_device_test(node.test, resolve):
        return
    chooses = False
    for n in subtree(node.body):
        if type(n) is cst.Assign:
            chooses = chooses or any(_environ_key(t.target, resolve) in EGL_DEVICE_VARIABLES for t in n.targets)
        elif type(n) is cst.Call:
            qual = resolve(n.func) or ""
            if qual.startswith("torch.cuda.") and qual not in dc.DEVICE_TESTS:
                return
            if type(n.func) is cst.Attribute and n.func.attr.value == "cuda":
                return  # (`model.cuda()`: device code of its own)
        elif type(n) is cst.SimpleString and "cuda" in (string_value(n) or ""):
            return
    if chooses:
        ctx.keep(node)


def _assigned_key(target: cst.BaseAssignTargetExpression) -> Optional[str]:
    """The name an assignment gives its value under: `accelerator`, `cfg.accelerator`,
    `kwargs["accelerator"]` (a string key); None for any other target."""
    if type(target) is cst.Name:
        return target.value
    if type(target) is cst.Attribute:
        return target.attr.value
    if type(target) is cst.Subscript and len(target.slice) == 1:
        index = target.slice[0].slice
        if type(index) is cst.Index and type(index.value) is cst.SimpleString:
            return string_value(index.value)
    return None


def _is_number(node: cst.BaseExpression) -> bool:
    """`2`, `-1`: an integer literal, negated or not."""
    if type(node) is cst.UnaryOperation and type(node.operator) is cst.Minus:
        node = node.expression
    return type(node) is cst.Integer


@emits("NPU313")
def _report_lightning_request(ctx: Context, assigns: Sequence[cst.Assign]) -> None:
    """NPU313 at `trainer_kwargs["accelerator"] = "gpu"` (keep_test_choosing_kept_name): the CUDA
    accelerator handed to Lightning through a dict or an attribute (a plain name given to the
    Trainer is reported at the call: NPU313's rule follows it there)."""
    rule = next((r for r in ctx.rules.findings.get("call", ()) if r.code == "NPU313"), None)
    if rule is None:
        return
    for assign in assigns:
        api = ctx.code_for(assign).strip()
        message = (f"`{api}` under a CUDA test asks Lightning for CUDA devices, which an Ascend machine does not "
                   "have: the test stays on CUDA, so there the project trains on the CPU")
        ctx.finding(rule, assign, api=api, message=message)


def _class_member_assignment(ctx: Context, value: cst.BaseExpression) -> Optional[cst.Assign]:
    """`Device.CUDA`: the assignment `CUDA = ...` in the body of the module-level `class Device`
    (the last one, as Python binds it); None for anything else."""
    if not (type(value) is cst.Attribute and type(value.value) is cst.Name):
        return None
    owner, member = value.value.value, value.attr.value
    found: Optional[cst.Assign] = None
    for statement in ctx.module.body:
        if type(statement) is cst.ClassDef and statement.name.value == owner:
            found = None
            for line in statement.body.body if isinstance(statement.body, cst.IndentedBlock) else ():
                if type(line) is cst.SimpleStatementLine:
                    for small in line.body:
                        if type(small) is cst.Assign and any(
                                type(t.target) is cst.Name and t.target.value == member for t in small.targets):
                            found = small
    return found


# `cuda=torch.cuda.is_available()`, `use_gpu=not x and torch.cuda.is_available()`: a flag keyword
# given CUDA's availability (the text test for library_gpu_flags).
_GPU_FLAG_AVAILABILITY = r"(?i)\b\w*(?:gpu|cuda)\w*\s*=\s*[^=\n][^\n]*?\bis_available\(\)"


def library_gpu_flags(ctx: Context) -> bool:
    """Whether the file may give another library's callable a GPU flag set from CUDA's
    availability (keep_library_gpu_flag): a text test, per file, tried only on the lines that
    hold `is_available()` (a literal search first: the pattern tried at every word of the file
    cost ~1 % of bench/train_500.py's instructions)."""
    text = ctx.text
    at = text.find("is_available()")
    while at != -1:
        start = text.rfind("\n", 0, at) + 1
        if compiled(_GPU_FLAG_AVAILABILITY).search(text, start, at + len("is_available()")) is not None:
            return True
        at = text.find("is_available()", at + 1)
    return False


@applies("finding:guard")
def keep_library_gpu_flag(ctx: Context, call: cst.Call, qual: Optional[str], resolve) -> None:
    """trl 1.16.0 experimental/merge_model_callback.py:286 `MergeOptions(device="auto",
    cuda=torch.cuda.is_available())` (mergekit), mmsegmentation 1.2.2's `GradCAM(...,
    use_cuda=torch.cuda.is_available())` (pytorch-grad-cam): a keyword of another library's
    callable that says GPU or CUDA, given CUDA's availability, asks that library for its CUDA path.
    Moved to torch.npu, the library takes it on the Ascend machine (mergekit computes on "cuda",
    grad-cam calls `.cuda()`); as written it is False there and the library runs on the CPU, as
    unmigrated. A callable of torch, of the module or of the project moves as before (its CUDA
    calls move with it)."""
    flags = [arg for arg in call.args if arg.keyword is not None and compiled(_GPU_FLAG).search(arg.keyword.value)
             and any(type(n) is cst.Call and resolve(n.func) == "torch.cuda.is_available" for n in subtree(arg.value))]
    if not flags:
        return
    if qual is None:
        root = _root(call.func)
        if ctx.partial is not None and root is not None and re.search(
                r"(?m)^[ \t]*(?:from[ \t]+[\w.]+[ \t]+)?import\b[^\n]*\b%s\b" % re.escape(root), ctx.text):
            ctx.partial_misses.add("import")  # (bound by an import partial parsing left out)
        return
    if qual.startswith(".") or qual.split(".", 1)[0] in ("torch", "torch_npu"):
        return
    module = qual.rsplit(".", 1)[0] if "." in qual else qual
    if qual not in ctx.imports.names.values() and module not in ctx.imports.modules:
        return  # (not bound by an import: the module's own)
    if is_local_import(ctx.path, module, ctx.options.local_modules):
        return
    rule = next((r for r in ctx.rules.findings.get("guard", ()) if r.from_ == "library-gpu-flag"), None)
    if qual in lightning_device_calls(ctx):
        rule = None  # (Lightning's Trainer(gpus=...): NPU313 reports the call)
    for arg in flags:
        ctx.keep(arg.value)
        if rule is not None and arg.keyword is not None:
            api = ctx.code_for(arg.value)
            detail = f"given to `{qual}` as its `{arg.keyword.value}` flag (another library's)"
            ctx.finding(rule, arg.value, api=api, message=rule.render_message(api=api, detail=detail),
                        suggestion=rule.render_suggestion(api=api, detail=detail))


# A callable named for one of NVIDIA's CUDA libraries: a class named `Cu<Name>`
# (`CuEquivarianceConfig`, mace-torch's), or a part of its dotted name that is one of them
# (`cuequivariance_torch.*`, cuDNN, cuBLAS, cuGraph, cuML, cuDF, CuPy, CUTLASS, cuSPARSE, cuFFT...).
_CUDA_LIBRARY_NAME = (r"^Cu[A-Z]|^cu(?:equivariance|dnn|blas|blaslt|graph|ml|df|py|pyx|tlass|sparse|fft|rand|solver)"
                      r"(?:_|$)")
# The text tests for keep_cuda_library_flags: such a name called (its words first, literally),
# and a comparison with "cuda".
_CUDA_LIBRARY_WORDS = ("Cu", "cuequivariance", "cudnn", "cublas", "cugraph", "cuml", "cudf", "cupy", "cutlass",
                       "cusparse", "cufft")
_CUDA_LIBRARY_CALL = r"\bCu[A-Z]\w*\s*\(|\bcu(?:equivariance|dnn|blas|graph|ml|df|py|tlass|sparse|fft)"


def cuda_library_calls(ctx: Context) -> bool:
    """Whether the file may give a callable named for a CUDA library a device test
    (keep_cuda_library_flags): its text calls such a name and compares something with "cuda" (or
    reads `is_cuda`)."""
    text = ctx.text
    return any(word in text for word in _CUDA_LIBRARY_WORDS) and compiled(_CUDA_LIBRARY_CALL).search(text) is not None \
        and ("is_cuda" in text or _compared_with_cuda(text))


@applies("finding:guard")
def keep_cuda_library_flags(ctx: Context, call: cst.Call, qual: Optional[str]) -> None:
    """mace-torch 0.3.16 mace/cli/convert_e3nn_cueq.py:220, mace/tools/model_script_utils.py:181,
    tests/test_compile.py:31: `CuEquivarianceConfig(..., conv_fusion=(device == "cuda"))`. A
    callable named for one of NVIDIA's CUDA libraries (cuEquivariance here: the config mace hands
    to cuequivariance_torch, whose fused convolution is in cuequivariance_ops_torch, CUDA kernels
    alone) configures that library's CUDA path, and a device test given to it as any keyword
    (`conv_fusion`, whatever its name) turns one of its CUDA kernels on where the device is CUDA.
    Moved to "npu", the kernel was asked for on the Ascend machine; as written the flag is False
    there and the library takes its other path, as unmigrated. The test stays, reported (NPU315
    cuda-library-flag). The callable is told by its name only (`Cu<Name>`, or a dotted
    part `cuequivariance*`, `cudnn`, `cupy`, ...): the comparisons given to any other callable
    move as before (`torch.autocast(enabled=device == "cuda")` turns AMP on on the NPU)."""
    name = qual or get_full_name_for_node(call.func)
    if name is not None and qual is None:
        # (the import table holds the frameworks' names only: `import cuequivariance_torch as
        # cuet` read from the text, `cuet.Linear` as cuequivariance_torch.Linear)
        root = name.split(".", 1)[0]
        bound = re.search(rf"(?m)^[ \t]*import[ \t]+([\w.]+)[ \t]+as[ \t]+{re.escape(root)}\b", ctx.text) \
            or re.search(rf"(?m)^[ \t]*from[ \t]+([\w.]+)[ \t]+import\b[^\n#]*\b{re.escape(root)}\b", ctx.text)
        if bound is not None:
            name = f"{bound.group(1)}.{name}"
    if name is None or not any(compiled(_CUDA_LIBRARY_NAME).search(part) for part in name.split(".")):
        return
    rule = next((r for r in ctx.rules.findings.get("guard", ()) if r.from_ == "cuda-library-flag"), None)
    for arg in call.args:
        if arg.keyword is None or not _device_test_value(arg.value):
            continue
        ctx.keep(arg.value)
        if rule is not None:
            api = ctx.code_for(arg.value)
            callee = name.rsplit(".", 1)[-1]
            detail = f"given to `{callee}`, named for a CUDA library, as its `{arg.keyword.value}` option"
            ctx.finding(rule, arg.value, api=api, message=rule.render_message(api=api, detail=detail),
                        suggestion=rule.render_suggestion(api=api, detail=detail))


def _device_test_value(value: cst.BaseExpression) -> bool:
    """A flag's value made of device tests: a comparison with "cuda" (`device == "cuda"`, `"cuda"
    in str(device)`), `x.is_cuda`, in `and`/`or`/`not` (as keep_gpu_flag reads one)."""
    stack: List[cst.CSTNode] = [value]
    while stack:
        n = stack.pop()
        if type(n) is cst.Comparison and (_is_cuda_string(n.left)
                                         or any(_is_cuda_string(t.comparator) for t in n.comparisons)):
            return True
        if type(n) is cst.Attribute and n.attr.value == "is_cuda":
            return True
        if isinstance(n, (cst.BooleanOperation, cst.UnaryOperation)):
            stack.extend(n.children)
    return False


# A keyword that says GPU or CUDA given a name (`gpu=use_cuda`), and that name assigned on a line
# that tests CUDA (`use_cuda = True if "cuda" in str(device) else False`, `use_gpu =
# torch.cuda.is_available()`): the text tests for keep_library_gpu_flag_variables.
_GPU_FLAG_NAME = r"(?i)(?:gpu|cuda)\w*[ \t]*=[ \t]*([A-Za-z_]\w*)[ \t]*[,)\r\n]"
_CUDA_TEST_WORDS = ("cuda", "is_available")


def library_gpu_flag_variables(ctx: Context) -> AbstractSet[str]:
    """The names that may carry a CUDA test into another library's GPU flag
    (keep_library_gpu_flag_variables): given as a GPU/CUDA keyword (`gpu=use_cuda`) and assigned
    on a line that names CUDA or its availability. Empty (no walk) in most files."""
    text = ctx.text
    if "cuda" not in text:
        return frozenset()
    found: Set[str] = set()
    for m in compiled(_GPU_FLAG_NAME).finditer(text):
        name = m.group(1)
        if name in found or name in ("True", "False", "None"):
            continue
        for line in re.finditer(rf"(?m)^[ \t]*{re.escape(name)}[ \t]*=(?!=)([^\n]*)", text):
            value = line.group(1)
            # (a line ending in a comma is a parameter's default or a call's keyword, not the
            # simple assignment the keep looks for: neuralforecast 1.7.5's 33 models'
            # `gpus=torch.cuda.device_count(),` made the keep walk auto.py and ask for its elided lines)
            if value.rstrip().endswith(","):
                continue
            if any(word in value for word in _CUDA_TEST_WORDS):
                found.add(name)
                break
    return frozenset(found)


class _FlagVariables(cst.CSTVisitor):
    """For keep_library_gpu_flag_variables, per function (or the module) and name: its simple
    assignments (`name = value`), the GPU/CUDA keyword arguments given it (with their calls), and
    how many Name nodes spell it there (reads, targets, parameters, attributes named so: any other
    is a reader of another kind)."""

    def __init__(self, names: AbstractSet[str]) -> None:
        super().__init__()
        self.names = names
        self.scope = 0  # id() of the function the walk is in (0: the module)
        self._scopes: List[int] = []
        self.assigned: Dict[Tuple[int, str], List[cst.Assign]] = {}
        self.flags: Dict[Tuple[int, str], List[Tuple[cst.Call, cst.Arg]]] = {}
        self.spelled: Dict[Tuple[int, str], int] = {}

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._scopes.append(self.scope)
        self.scope = id(node)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.scope = self._scopes.pop()

    def visit_Assign(self, node: cst.Assign) -> None:
        target = node.targets[0].target
        if len(node.targets) == 1 and type(target) is cst.Name and target.value in self.names:
            self.assigned.setdefault((self.scope, target.value), []).append(node)

    def visit_Call(self, node: cst.Call) -> None:
        for arg in node.args:
            if arg.keyword is not None and type(arg.value) is cst.Name and arg.value.value in self.names \
                    and compiled(_GPU_FLAG).search(arg.keyword.value):
                self.flags.setdefault((self.scope, arg.value.value), []).append((node, arg))

    def visit_Name(self, node: cst.Name) -> None:
        if node.value in self.names:
            key = (self.scope, node.value)
            self.spelled[key] = self.spelled.get(key, 0) + 1


def _tests_cuda(value: cst.BaseExpression, resolve) -> bool:
    """Whether `value` holds a test of CUDA: `torch.cuda.is_available()`, a comparison with
    "cuda" (`"cuda" in str(device)`, `device.type == "cuda"`), `x.is_cuda`."""
    for n in subtree(value):
        if type(n) is cst.Call and resolve(n.func) == "torch.cuda.is_available":
            return True
        if type(n) is cst.Attribute and n.attr.value == "is_cuda":
            return True
        if type(n) is cst.Comparison and (_is_cuda_string(n.left)
                                         or any(_is_cuda_string(t.comparator) for t in n.comparisons)):
            return True
    return False


@applies("finding:guard")
def keep_library_gpu_flag_variables(ctx: Context, resolve, names: AbstractSet[str]) -> None:
    """simpletransformers 0.70.8 retrieval/retrieval_utils.py:1611 and :2715: `use_cuda = True if
    "cuda" in str(device) else False`, then `faiss.Kmeans(d, k, ..., gpu=use_cuda)`: the CUDA test
    carried by a variable into another library's GPU flag (what keep_gpu_flag and
    keep_library_gpu_flag keep where it is written in the call). Moved to "npu", faiss was asked
    for its CUDA GPUs on the Ascend machine; as written the flag is False there and faiss runs on
    the CPU. The value stays where every Name that spells the variable in the module is one of
    its simple assignments or such a flag of another library's callable (a callable an import
    binds to a library that is neither torch nor the project's, or one named by a library with
    device names of its own that nothing binds: simpletransformers calls `faiss.Kmeans` with
    faiss imported in another function), and is reported (NPU315 library-gpu-flag). A variable
    read anywhere else (`if use_cuda: model.cuda()`, the module's own function) moves as before:
    the value moves with those readers."""
    if ctx.partial is not None:
        elided = {name for name in names if ctx.partial.elided_word(name)}
        ctx.partial_misses.update(elided)  # (its other readers may be in lines left out)
        names = names - elided
        if not names:
            return
    found = _FlagVariables(names)
    walk(ctx.module, found)
    # a name spelled in a function that does not assign it (a closure's, a global's) may be read
    # there: its values move with that reader
    free = {name for (scope, name) in found.spelled if (scope, name) not in found.assigned}
    rule = next((r for r in ctx.rules.findings.get("guard", ()) if r.from_ == "library-gpu-flag"), None)
    for key in sorted(found.flags, key=lambda k: k[1]):
        name = key[1]
        assigned, flags = found.assigned.get(key, []), found.flags[key]
        tests = [a for a in assigned if _tests_cuda(a.value, resolve)]
        if name in free or not tests or found.spelled.get(key, 0) != len(assigned) + len(flags):
            continue
        callees = [_library_callee(ctx, call, resolve) for call, _arg in flags]
        if any(c is None for c in callees):
            continue
        for assign in tests:
            ctx.keep(assign.value)
        for (_call, arg), callee in zip(flags, callees):
            ctx.keep(arg.value)
            if rule is None or arg.keyword is None:
                continue
            value = " or ".join(dict.fromkeys(f"`{ctx.code_for(a.value)}`" for a in tests))
            detail = f"set from {value} and given to `{callee}` as its `{arg.keyword.value}` flag (another library's)"
            ctx.finding(rule, arg.value, api=name, message=rule.render_message(api=name, detail=detail),
                        suggestion=rule.render_suggestion(api=name, detail=detail))


def _library_callee(ctx: Context, call: cst.Call, resolve) -> Optional[str]:
    """The name of `call`'s callee when it is another library's (keep_library_gpu_flag_variables),
    None otherwise: the module's own, the project's, torch's, or not known."""
    qual = resolve(call.func)
    if qual is None:
        root = _root(call.func)
        if root is None or root not in dc.NON_TORCH_LIBRARIES:
            return None
        if ctx.partial is not None and re.search(
                r"(?m)^[ \t]*(?:from[ \t]+[\w.]+[ \t]+)?import\b[^\n]*\b%s\b" % re.escape(root), ctx.text):
            ctx.partial_misses.add("import")  # (bound by an import partial parsing left out)
        return get_full_name_for_node(call.func)
    if qual.startswith(".") or qual.split(".", 1)[0] in ("torch", "torch_npu"):
        return None
    module = qual.rsplit(".", 1)[0] if "." in qual else qual
    if qual not in ctx.imports.names.values() and module not in ctx.imports.modules:
        return None  # (not bound by an import: the module's own)
    if is_local_import(ctx.path, module, ctx.options.local_modules):
        return None
    return qual


# ----------------------------------------------------------------------------- device gates


def _is_cuda_string(node: cst.CSTNode) -> bool:
    """`"cuda"`, `"cuda:0"`, or a tuple/list/set that holds one (`("cuda", "xpu")`)."""
    if isinstance(node, (cst.Tuple, cst.List, cst.Set)):
        return any(isinstance(e, cst.Element) and _is_cuda_string(e.value) for e in node.elements)
    value = string_value(node) if isinstance(node, cst.SimpleString) else None
    return value is not None and (value == "cuda" or compiled(_CUDA_INDEX_RE).fullmatch(value) is not None)


_CUDA_INDEX_RE = r"cuda:\d+"


def _names_npu(node: cst.CSTNode) -> bool:
    """A tuple/list/set of device names that holds "npu" (`("cuda", "npu")`)."""
    return isinstance(node, (cst.Tuple, cst.List, cst.Set)) and any(
        isinstance(e, cst.Element) and isinstance(e.value, cst.SimpleString)
        and (string_value(e.value) or "").split(":")[0] == "npu" for e in node.elements)
# The text test for a comparison with "cuda" (`== "cuda"`, `in ("cuda", "xpu")`, `"cuda" != x`).
_COMPARED_WITH_CUDA_RE = (r"""(?:==|!=|\bin)\s*[(\[{]?\s*(?:(?:'[^'\n]*'|"[^"\n]*")\s*,\s*)*['"]cuda(?::\d+)?['"]"""
                                    r"""|['"]cuda(?::\d+)?['"]\s*(?:==|!=|in\b|not\b)""")
# _COMPARED_WITH_CUDA_RE in parts, for _compared_with_cuda: the quoted "cuda"; what may follow
# it; and what may come before it, reversed (matched on the reversed text)
_QUOTED_CUDA_RE = r"""['"]cuda(?::\d+)?['"]"""
_COMPARED_AFTER_RE = r"""\s*(?:==|!=|in\b|not\b)"""
_COMPARED_BEFORE_REVERSED_RE = r"""(?:\s*,\s*(?:'[^'\n]*'|"[^"\n]*"))*\s*[(\[{]?\s*(?:==|=!|ni\b)"""


def _compared_with_cuda(text: str) -> bool:
    """Whether `_COMPARED_WITH_CUDA_RE` finds a match in `text`, looked for from each quoted
    "cuda" (found by its letters): the operator after it, or the operator (and the other strings
    of a tuple) before it, matched backwards on the reversed text. The search itself tried every
    position of the file (no literal leads it): py-spy 1.5% of transformers' CPU."""
    reversed_text = ""
    at = 0
    while True:
        found = compiled(_QUOTED_CUDA_RE).search(text, at)
        if found is None:
            return False
        if compiled(_COMPARED_AFTER_RE).match(text, found.end()):
            return True
        reversed_text = reversed_text or text[::-1]
        if compiled(_COMPARED_BEFORE_REVERSED_RE).match(reversed_text, len(text) - found.start()):
            return True
        at = found.start() + 1  # (the closing quote may open the next one: `'cuda'cuda'`)


_CAMEL_RE = r"(?<=[a-z0-9])(?=[A-Z])"
# Nodes whose Name children are not references to a value (`x.attr`'s attr, a keyword's name, ...).
_NOT_REFERENCES = (cst.Import, cst.ImportFrom)


def _paths(root: cst.CSTNode, children: Callable[[cst.CSTNode], Sequence[cst.CSTNode]] = code_children,
           in_file_order: bool = True) -> Iterator[Tuple[cst.CSTNode, List[cst.CSTNode]]]:
    """Each node under `root`, `root` first, before the nodes below it (pre-order), with its
    path: the nodes from `root` down to it, itself last (one list the walk changes as it goes:
    read it, or `_record` it, before the next step). The walk goes below a node into
    `children(node)` (a node's code: code_children), in the file's order, or last first where
    `in_file_order` is False (the order the walks of references and calls always had)."""
    path: List[cst.CSTNode] = []
    stack: List[Tuple[cst.CSTNode, int]] = [(root, 0)]
    while stack:
        node, depth = stack.pop()
        del path[depth:]
        path.append(node)
        yield node, path
        depth += 1
        below = children(node)
        stack.extend([(c, depth) for c in (reversed(below) if in_file_order else below)])


def _reference_children(node: cst.CSTNode) -> Sequence[cst.CSTNode]:
    """Where a reference to a name may be below `node`, as _references reads them: nowhere below
    a name or an import, only the value of an attribute or an argument, a definition's code but
    its name, a parameter's default."""
    if isinstance(node, cst.Name) or isinstance(node, _NOT_REFERENCES):
        return ()
    if isinstance(node, (cst.Attribute, cst.Arg)):
        return (node.value,)
    if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
        return [c for c in code_children(node) if c is not node.name]
    if isinstance(node, cst.Param):
        return () if node.default is None else (node.default,)
    return code_children(node)


def _exits(suite: cst.BaseSuite) -> bool:
    """Whether a block ends by raising or returning (`if x.device.type != "cuda": raise ...`)."""
    last = list(suite_small_statements(suite))
    if isinstance(suite, cst.IndentedBlock) and suite.body and not isinstance(suite.body[-1], cst.SimpleStatementLine):
        return False
    return bool(last) and (isinstance(last[-1], (cst.Raise, cst.Return)) or _skip_call(last[-1]) is not None)


def _raises(suite: cst.BaseSuite) -> bool:
    last = list(suite_small_statements(suite))
    return _exits(suite) and not isinstance(last[-1], cst.Return)


@applies("finding:guard")
class _DeviceGates:
    """Device-type tests that stay "cuda" because what they open is CUDA-only code (NPU315).

    A comparison of a device type with "cuda" (`x.device.type == "cuda"`, `device.type in
    ("cuda", "xpu")`, `device.type != "cuda"`), `x.is_cuda` or `torch.cuda.is_available()`
    normally becomes an NPU test. It stays when its
    test, followed up through `and`/`or`/`not` (and `is False`, `== True`, ...):

    * names a CUDA-only library itself (`_TRITON_AVAILABLE and device.type in (...)`: an
      identifier holding one of the guard rule's `words`, or a name bound to CUDA-only code);
    * opens CUDA-only code: the branch taken when the device is CUDA (the `if` body for `==`/`in`;
      for `!=`/`not in` the `else`, and the rest of the block when the body raises or returns)
      uses a name bound to a module an import finding of the rule's `gates` codes reports
      (`triton`, `flash_attn`, vLLM's NCCL bindings), a compiled extension, a call such a call
      finding reports (`torch.addmm(..., out_dtype=...)`), a torch.cuda call the torch pass leaves
      as it is (NPU320/NPU301: torchtune's `torch.cuda.memory._record_memory_history()`), or a
      function, class or variable of the module that uses one of those (a `@triton.jit` kernel; not
      one that tests the device itself: it dispatches);
    * refuses non-CUDA devices: `if device.type != "cuda": raise ...` where the error is
      NotImplementedError or says CUDA only, or the code after it is CUDA-only (the error stays,
      `cuda-library-refusal`);
    * is the result of a function (returned, directly or through a variable) that is named for a
      library (`_use_triton`) or whose callers in the module are such tests; or is kept in a
      variable that such tests read.

    Left as "cuda" the test is False on the NPU, so the code takes its other path (or raises, as
    written): principle 1. The device the tested value comes from still migrates, so value and
    test agree. Only files that show CUDA-only code at all (an import, a library word, such a call)
    are analysed."""

    def __init__(self, ctx: Context, is_device_expr) -> None:
        self.ctx = ctx
        self.is_device_expr = is_device_expr
        rules = {r.from_: r for r in ctx.rules.findings.get("guard", ())}
        self.gate_rule = rules.get("cuda-library-gate")
        self.refusal_rule = rules.get("cuda-library-refusal")
        self.ray_rule = rules.get("ray-gpu-count")
        self.data_parallel_rule = rules.get("data-parallel-count")
        spec = FindingSpec.of(self.gate_rule) if self.gate_rule is not None else FindingSpec()
        self.gate_words = spec.words
        words = sorted(spec.words, key=len, reverse=True)
        self.word_re = re.compile(r"(?i)(?:^|_)(?:%s)(?:_|\d|$)" % "|".join(re.escape(w) for w in words)) if words else None
        codes = set(spec.gates)
        self.modules = cuda_only_libraries(ctx.rules.findings)
        self.calls: Dict[str, List[Rule]] = {}
        # (and the references an api finding of those codes reports: faiss's GPU index calls)
        for r in list(ctx.rules.findings.get("call", ())) + list(ctx.rules.findings.get("api", ())):
            if r.code in codes and not r.framework:
                for n in names_of(r):
                    self.calls.setdefault(n, []).append(r)
        # local name -> what makes it CUDA-only (for the finding's detail): the names the module's
        # imports bind (evidence()); its own definitions are judged only when a device test
        # reaches them (_cuda_name)
        self.cuda_names: Dict[str, str] = {}
        # parents of the nodes the analysis reaches (the device tests, the calls of a predicate,
        # the readers of a variable) and of their ancestors: recorded by the walk that finds them
        self.parent: Dict[int, cst.CSTNode] = {}
        self.definitions: Dict[str, cst.CSTNode] = {}
        # per definition (id of its node): what it reads, in order, and what else in it is
        # CUDA-only (_fixed_reads); whether it tests the device itself
        self._reads: Dict[int, Tuple[List[str], Optional[str]]] = {}
        self._tests: Dict[int, bool] = {}
        self._within_rounds: Dict[Tuple[str, int], bool] = {}
        self._entries: Dict[str, str] = {}
        # the definitions whose reads were looked at: the bodies of those they read are asked for
        # (partial parsing, _settle_asks)
        self._evaluated: List[str] = []
        self._evaluated_set: Set[str] = set()
        self._elided_names: Optional[Set[str]] = None
        # False when the file shows no CUDA-only code but an error that says CUDA only (evidence())
        self.names_matter = True
        self._elided_defined: Optional[Dict[str, List[Tuple[int, int, str]]]] = None
        self._definitions_asked: Dict[str, bool] = {}
        self._call_leaves = {n.rsplit(".", 1)[-1] for n in self.calls}
        # partial parsing: the words of a run left out, the runs of a definition's body, whether a
        # word names CUDA-only code
        self._run_words: Dict[Tuple[int, int], Set[bytes]] = {}
        self._body_runs: Dict[int, List[Tuple[int, int]]] = {}
        self._cuda_word_memo: Dict[bytes, bool] = {}
        # the project's CUDA-only code in other modules (Options.cuda_only_code: "<module
        # path>::<name>::<what>"), as "<module path>/<name>" -> what; the local names that may
        # lead to it (an import of such a module or of such a name) -> the path they stand for
        self.project_code: Dict[str, str] = {}
        for entry in ctx.options.cuda_only_code:
            module, name, what = entry.split("::", 2)
            self.project_code[f"{module.replace(os.sep, '/')}/{name}"] = what
        self.project_locals: Dict[str, str] = {}
        # the functions holding a device test kept here (by name; `forward` for a Function's)
        self.holders: Set[str] = set()
        self._builds_here = False
        # while the readers of a flag a device test clears are judged (_flag_cleared): torch.cuda
        # calls left as they are count as CUDA-only code there
        self._flagged = False
        # whether the text names a torch.cuda member the torch pass leaves as it is (_names_staying);
        # whether the module imports MindSpore (evidence(): _mindspore_side)
        self._staying: Optional[bool] = None
        self._mindspore = False
        # whether a name can stand for CUDA-only code (evidence(): an import or definition that
        # is, a library's word), not only a call's name or an error's words
        self._names_code = False

    # -- what is CUDA-only ------------------------------------------------------------------

    def _library_word(self, name: str) -> bool:
        return self.word_re is not None and self.word_re.search(compiled(_CAMEL_RE).sub("_", name)) is not None

    def _cuda_module(self, qual: str) -> bool:
        return any(qual == m or qual.startswith(m + ".") for m in self.modules)

    def evidence(self) -> bool:
        """Binds the names imports make CUDA-only; whether the file shows CUDA-only code at all."""
        if self.gate_rule is None:
            return False
        for local, qual in self.ctx.imports.names.items():
            if self._cuda_module(qual):
                self.cuda_names[local] = (f"`{local}`" if qual == local else f"`{local}` from {qual[:-len(local) - 1]}"
                                          if qual.endswith("." + local) else f"`{local}` ({qual})")
        for stmt in self.ctx.imports.import_nodes:
            # `from .triton_ops import fused_norm`, `from . import _C`: a module named for a
            # library, or a compiled extension (the names it imports are CUDA-only)
            if isinstance(stmt, cst.ImportFrom) and not isinstance(stmt.names, cst.ImportStar):
                module = dotted_name(stmt.module) if stmt.module is not None else ""
                if any(self._library_word(p) for p in (module or "").split(".") if p) or _imports_extension(stmt):
                    for alias in stmt.names:
                        name = _local_name(alias, dotted_name(alias.name) or "")
                        self.cuda_names.setdefault(name, f"`{name}` from {'.' * len(stmt.relative)}{module}")
            elif isinstance(stmt, cst.Import):
                for alias in stmt.names:
                    full = dotted_name(alias.name) or ""
                    if _imports_extension(cst.Import(names=[alias.with_changes(comma=cst.MaybeSentinel.DEFAULT)])) or any(self._library_word(p) for p in full.split(".")):
                        name = _local_name(alias, full.split(".", 1)[0])
                        self.cuda_names.setdefault(name, f"`{name}`" if name == full else f"`{name}` ({full})")
        if self.project_code:
            self._bind_project_code()
        text = self.ctx.text
        # (a definition of the file that builds a CUDA extension at run time: _fixed_reads)
        self._builds_here = any(q in _BUILDERS for q in self.ctx.imports.names.values()) and bool(
            compiled(_CUDA_SOURCE_RE).search(text))
        # MindSpore imported: a CUDA test's other side may be the MindSpore code (_mindspore_side)
        self._mindspore = any(q == "mindspore" or q.startswith("mindspore.") for q in self.ctx.imports.names.values())
        if self.cuda_names or self.project_locals or self.ctx.kept or self._builds_here:
            self._names_code = True
            return True  # (kept: what the planner left on CUDA, a capability check among it)
        words = self.gate_words
        if words and _in_any_case(words, text):
            self._names_code = True
            return True  # (in any case: `TritonKernel`; the analysis reads identifiers word by word)
        if _written(text, self._call_leaves, r"\s*\(", getattr(self.ctx.code, "text_words", None)):
            return True
        if self._elided_imports():
            return True  # (a compiled extension imported in lines left out)
        if "num_gpus" in text:
            return True  # (a GPU count a device test picks: _gpu_count)
        if "DataParallel" in text and _count_compared(text):
            return True  # (a count opening DataParallel: _gated_data_parallel)
        if ("raise" in text or "assert" in text or "skip" in text) and (
                "NotImplementedError" in text or compiled(_CUDA_ONLY_RE).search(text) or _starts_word(compiled(_CUDA_KERNEL_TEXT_RE), text)):
            # A refusal whose error says CUDA only (the commonest evidence: transformers' abstract
            # methods raise NotImplementedError): nothing else in the file is CUDA-only code, so
            # no name can be (_cuda_name) and no line left out can change a verdict (_ask_for)
            # (a CUDA-only call's name written, imported under another: `from torch import mm as f`)
            self.names_matter = _written(text, self._call_leaves, r"(?!\w)", getattr(self.ctx.code, "text_words", None))
            return True
        if self._names_staying() or (self._mindspore and "else" in text):
            self.names_matter = False  # (only torch.cuda calls left as they are, or MindSpore's side)
            return True
        return False

    def _names_staying(self) -> bool:
        """Whether the text names a torch.cuda member the torch pass leaves as it is (NPU320/NPU301:
        torchtune's `torch.cuda.memory._record_memory_history()`): CUDA-only code in the side of a
        device test that runs on CUDA (_fixed_reads), so the test stays and that side is dead on
        the NPU. Asked only when needed (the target's tables are looked up per name)."""
        if self._staying is None:
            self._staying = any(self._stays_cuda(q) for q in _torch_cuda_names(self.ctx.text))
        return self._staying

    def _elided_imports(self) -> Set[str]:
        """Partial parsing leaves out imports no rule names (`from .triton_ops import k`, `from .
        import _C`, often inside a function): the names those of them bind that evidence() would
        bind to CUDA-only code after a whole parse. When the analysis reads one of these names
        (_cuda_name, _cuda_word), the engine parses the imports too (Context.partial_misses)."""
        if self._elided_names is None:
            found: Set[str] = set()
            partial = self.ctx.partial
            if partial is not None and partial.elided_word("import"):
                for start, end, _indent in partial.runs:
                    text = partial.text_of((start, end))
                    # (an import statement holds the word: a substring test first, at C speed)
                    if "import" not in text or not compiled(_IMPORT_TEXT_RE).search(text):
                        continue
                    for node in _statements_in(partial.left_out.get(start, [])):
                        if isinstance(node, ast.ImportFrom) and node.names[0].name != "*":
                            module = node.module or ""
                            names = [module] + [a.name for a in node.names]
                            if any(self._library_word(p) for p in module.split(".") if p) or any(
                                    compiled(_EXTENSION_PART_RE).search(part) for n in names if not _is_torch(n)
                                    for part in n.split(".") if part):
                                found.update(a.asname or a.name for a in node.names)
                            elif self.project_code:
                                # the project's CUDA-only code of another module, imported by name
                                # (parlai's `from parlai.ops.ngram_repeat_block import NGramRepeatBlock`)
                                base = self._import_base(module, node.level)
                                found.update(a.asname or a.name for a in node.names
                                             if any(p.endswith(f"{base}/{a.name}") for p in self.project_code))
                        elif isinstance(node, ast.Import):
                            for alias in node.names:
                                parts = alias.name.split(".")
                                if (not _is_torch(alias.name) and any(compiled(_EXTENSION_PART_RE).search(p) for p in parts if p)
                                        or any(self._library_word(p) for p in parts)):
                                    found.add(alias.asname or parts[0])
            self._elided_names = found
        return self._elided_names

    def _import_base(self, module: str, level: int) -> str:
        """Where `from <level dots><module> import ...` looks, as _bind_project_code matches it
        (an absolute import by the end of a module's path, a relative one by the path itself)."""
        if not level:
            return "/" + module.replace(".", "/")
        base = os.path.dirname(os.path.abspath(self.ctx.path)).replace(os.sep, "/")
        for _ in range(level - 1):
            base = base.rsplit("/", 1)[0]
        return base + "/" + module.replace(".", "/") if module else base

    def _bind_project_code(self) -> None:
        """The names this file's imports bind to the project's CUDA-only code in other modules
        (project_values.py: espnet's `from ...rnnt_multi_blank import rnnt`, whose
        `rnnt_loss_gpu` launches numba.cuda kernels): a function imported by name is a CUDA-only
        name (self.cuda_names); a module that holds some is looked through by attribute
        (_project_attribute). An absolute import is matched by the end of the module's path
        (the run may start below the package's root), a relative one by the path itself."""
        places: Dict[str, str] = {local: "/" + qual.replace(".", "/") for local, qual in self.ctx.imports.names.items()}
        here = os.path.dirname(os.path.abspath(self.ctx.path)).replace(os.sep, "/")
        for stmt in self.ctx.imports.import_nodes:
            if isinstance(stmt, cst.ImportFrom) and stmt.relative and not isinstance(stmt.names, cst.ImportStar):
                base = here
                for _ in range(len(stmt.relative) - 1):
                    base = base.rsplit("/", 1)[0]
                module = dotted_name(stmt.module) if stmt.module is not None else ""
                if module:
                    base += "/" + module.replace(".", "/")
                for alias in stmt.names:
                    name = dotted_name(alias.name) or ""
                    places[_local_name(alias, name)] = f"{base}/{name}"
        paths = list(self.project_code)
        for local, place in places.items():
            what = next((w for p, w in self.project_code.items() if p.endswith(place)), None)
            if what is not None:
                self.cuda_names.setdefault(local, f"`{local}` of {_module_file(place)}, which uses {what}")
            elif any(place + "/" in p for p in paths):
                self.project_locals[local] = place

    def _project_attribute(self, node: cst.CSTNode) -> Optional[str]:
        """`rnnt.rnnt_loss_gpu` in `node`, where `rnnt` is a project module whose function is
        CUDA-only code (_bind_project_code): the finding's detail, or None."""
        if not self.project_locals:
            return None
        stack = [node]
        while stack:
            n = stack.pop()
            if isinstance(n, cst.Attribute):
                parts = [n.attr.value]
                value = n.value
                while isinstance(value, cst.Attribute):
                    parts.append(value.attr.value)
                    value = value.value
                if isinstance(value, cst.Name) and value.value in self.project_locals:
                    place = "/".join([self.project_locals[value.value], *reversed(parts)])
                    what = next((w for p, w in self.project_code.items() if p.endswith(place)), None)
                    if what is not None:
                        code = ".".join([value.value, *reversed(parts)])
                        return f"`{code}` of {_module_file(place)}, which uses {what}"
            stack.extend(code_children(n))
        return None

    def _cuda_name(self, name: str, rounds: int = 3) -> Optional[str]:
        """What makes the name `name` CUDA-only code (the finding's detail), or None: an import
        (evidence()), or a definition of the module that is within `rounds` (_within)."""
        if not self.names_matter:
            return None
        found = self.cuda_names.get(name)
        if found is not None:
            return found
        return self._entry(name) if self._cuda_only_name(name, rounds) else None

    def _cuda_only_name(self, name: str, rounds: int = 3) -> bool:
        if name in self.cuda_names:
            return True
        if not self.names_matter:
            return False
        if self.ctx.partial is not None:
            if name in self._elided_imports():
                self.ctx.partial_misses.add("import")  # bound by an import left out: parse the imports
            if name not in self.definitions and name in self._elided_definitions():
                self._ask_for_definition(name)  # (a `@triton.jit` kernel, `is_fast_path_available = ...`)
        return name in self.definitions and self._within(name, rounds)

    def _elided_definitions(self) -> Dict[str, List[Tuple[int, int, str]]]:
        """The names lines left out may define as self.definitions holds them (`def k`, `class
        K`, at any depth; `name = ...` at module level), each with the runs that may: a cheap
        superset, read from their text."""
        if self._elided_defined is None:
            partial = self.ctx.partial
            found: Dict[str, List[Tuple[int, int, str]]] = {}
            if partial is not None:
                for start, end, indent in partial.runs:
                    text = partial.text_of((start, end))
                    names = _defined_names(text)
                    if not indent:
                        names.update(compiled(_ASSIGNED_RE).findall(text))
                    for name in names:
                        found.setdefault(name, []).append((start, end, indent))
            self._elided_defined = found
        return self._elided_defined

    def _within(self, name: str, rounds: int) -> bool:
        """Whether the module's definition `name` (a function, a class, a module-level variable)
        is CUDA-only code: it uses CUDA-only code (a name its imports bind, a capability check
        kept on CUDA, a CUDA-only call) or, with one round less, a definition that does -- up to
        three rounds reach wrappers of wrappers -- and does not test the device itself (a
        function with its own test dispatches). Judged only for the definitions a device test
        reaches; what each reads is read from its tree once."""
        if rounds <= 0 or name in self.cuda_names:
            return False
        key = (name, rounds)
        known = self._within_rounds.get(key)
        if known is not None:
            return known
        self._within_rounds[key] = False
        node = self.definitions[name]
        result = False
        if not self._tests_device_of(node):
            if name not in self._evaluated_set:
                self._evaluated_set.add(name)
                self._evaluated.append(name)
            names, fixed = self._reads_of(node)
            result = fixed is not None or any(self._cuda_only_name(read, rounds - 1) for read in names)
        self._within_rounds[key] = result
        return result

    def _entry(self, name: str) -> str:
        """The detail of a CUDA-only definition: the first name it reads that is CUDA-only one
        round earlier, else its own CUDA-only code (as rounds over every definition find it)."""
        entry = self._entries.get(name)
        if entry is None:
            rounds = next(k for k in (1, 2, 3) if self._within(name, k))
            names, fixed = self._reads_of(self.definitions[name])
            found = fixed
            for read in names:
                if read in self.cuda_names:
                    found = self.cuda_names[read]
                    break
                if read in self.definitions and self._within(read, rounds - 1):
                    found = self._entry(read)
                    break
            entry = self._entries[name] = f"`{name}`, which uses {found}"
        return entry

    def _reads_of(self, node: cst.CSTNode) -> Tuple[List[str], Optional[str]]:
        reads = self._reads.get(id(node))
        if reads is None:
            reads = self._reads[id(node)] = self._fixed_reads(node)
        return reads

    def _tests_device_of(self, node: cst.CSTNode) -> bool:
        tests = self._tests.get(id(node))
        if tests is None:
            tests = self._tests[id(node)] = self._tests_device(node)
        return tests

    def _tests_device(self, node: cst.CSTNode) -> bool:
        stack = [node]
        while stack:
            n = stack.pop()
            if isinstance(n, cst.Comparison) and any(_is_cuda_string(o) for o in self._operands(n)):
                return True
            if isinstance(n, cst.Attribute) and n.attr.value == "is_cuda":
                return True
            if isinstance(n, cst.Call) and self.ctx.imports.resolve(n.func) == "torch.cuda.is_available":
                return True
            stack.extend(code_children(n))
        return False

    @staticmethod
    def _operands(node: cst.Comparison) -> List[cst.BaseExpression]:
        return [node.left] + [t.comparator for t in node.comparisons]

    def _references(self, node: cst.CSTNode) -> Iterator[cst.Name]:
        """The names `node` reads (not an attribute's name, a keyword, a definition's name)."""
        stack = [node]
        while stack:
            n = stack.pop()
            if isinstance(n, cst.Name):
                yield n
                continue
            if isinstance(n, _NOT_REFERENCES):
                continue
            if isinstance(n, cst.Attribute):
                stack.append(n.value)
                continue
            if isinstance(n, cst.Arg):
                stack.append(n.value)
                continue
            if isinstance(n, (cst.FunctionDef, cst.ClassDef)):
                stack.extend(c for c in code_children(n) if c is not n.name)
                continue
            if isinstance(n, cst.Param):
                if n.default is not None:
                    stack.append(n.default)
                continue
            stack.extend(code_children(n))

    def _cuda_only_in(self, node: cst.CSTNode) -> Optional[str]:
        """What in `node` is CUDA-only code, as the finding's detail; None if nothing is."""
        names, fixed = self._fixed_reads(node)
        for name in names:
            found = self._cuda_name(name)
            if found is not None:
                return found
            self._ask_body(name)
        if fixed is not None:
            return fixed
        return self._project_attribute(node) or self._cuda_only_attribute(node)

    def _enclosing_class(self, node: cst.CSTNode) -> Optional[cst.ClassDef]:
        """The class whose body holds `node`, at any depth (None outside any class)."""
        owner = self.parent.get(id(node))
        while owner is not None and not isinstance(owner, cst.ClassDef):
            owner = self.parent.get(id(owner))
        return owner

    def _cuda_only_attribute(self, node: cst.CSTNode) -> Optional[str]:
        """`self.loss(...)` where the class assigns `self.loss = Transducer.apply` (an autograd
        Function launching numba.cuda kernels), or `self.kernel[grid](...)` where it assigns a
        `@triton.jit` function: a method called through an attribute of the instance is what
        the class's methods assign to it."""
        if not self.names_matter and not self._flagged:
            return None
        # (`self.kernel[grid](...)`: a Triton launch through the attribute)
        funcs = [call.func.value if isinstance(call.func, cst.Subscript) else call.func for call in _calls(node)]
        attributes = [a for a in map(self_attribute, funcs) if a is not None]
        if not attributes:
            return None
        owner = self._enclosing_class(node)
        if owner is None:
            return None
        for attribute in dict.fromkeys(attributes):
            for value in self._assigned_to_self(owner, attribute) if self.names_matter else ():
                found = self._cuda_only_in(value)
                if found is not None:
                    return f"`self.{attribute}`, which is {found}"
            if self._flagged:
                # a method of the class (MemorySnapshot's `self.start_record_memory_history()`),
                # its own calls only (_fixed_reads: not the methods it calls in turn)
                for method in owner.body.body:
                    if isinstance(method, cst.FunctionDef) and method.name.value == attribute:
                        found = self._fixed_reads(method.body)[1]
                        if found is not None:
                            return f"`self.{attribute}()`, which calls {found}"
        return None

    def _kept_attribute(self, node: cst.CSTNode) -> Optional[str]:
        """`self.cuda_config` read in `node` (the side of a device test that runs on CUDA) where
        the class assigns that attribute a value other than None only in code kept on CUDA
        (lucidrains' Attend: `self.cuda_config = None`, then after the kept `if not
        torch.cuda.is_available() or not flash: return` the configs; `config = self.cuda_config
        if is_cuda else self.cpu_config`): on the NPU the attribute stays None, so the test that
        selects it stays CUDA too (a value and the code that reads it move together). Decided
        when the kept code's gate comes first in the file (a class's __init__)."""
        if not self.ctx.kept:
            return None
        attributes = [a for a in map(self_attribute, subtree(node)) if a is not None]
        if not attributes:
            return None
        owner = self._enclosing_class(node)
        if owner is None:
            return None
        wanted = set(attributes)
        partial = self.ctx.partial
        kept = self.ctx.kept
        elsewhere: Set[str] = set()
        if partial is not None:
            # assignments of them left out of the class's methods: inside kept code, parsed first,
            # then judged; outside it, assigned elsewhere (a value but None: read from Python's
            # tree of the lines, as the whole parse would judge them)
            assigns = re.compile(r"\bself\s*\.\s*(%s)\s*(?::[^=\n]*)?[-+*/@%%&|^<>]*=(?!=)"
                                 % "|".join(re.escape(a) for a in sorted(wanted)))
            for stmt in subtree(owner):
                if not isinstance(stmt, cst.SimpleStatementLine):
                    continue
                for run in partial.runs_among((stmt,)):
                    if run in self.ctx.partial_lines:
                        continue
                    left_out = set(assigns.findall(partial.text_of(run)))
                    if not left_out:
                        continue
                    statements = partial.statements_of(run)
                    if id(stmt) in kept or not statements:
                        self.ctx.partial_lines.add(run)
                        wanted -= left_out
                    else:
                        elsewhere.update(_self_assigned(statements) & left_out)
        work.count("walk")
        inside: Dict[str, List[cst.CSTNode]] = {}
        for n in subtree(owner.body):
            if isinstance(n, cst.Assign):
                targets = [t.target for t in n.targets]
            elif isinstance(n, (cst.AnnAssign, cst.AugAssign)):
                targets = [n.target]
            else:
                continue
            for t in targets:
                name = self_attribute(t)
                if name is None or name not in wanted:
                    continue
                if id(n) in kept:
                    inside.setdefault(name, []).append(n)
                elif not (isinstance(n, (cst.Assign, cst.AnnAssign)) and isinstance(n.value, cst.Name)
                          and n.value.value == "None"):
                    elsewhere.add(name)
        for attribute in dict.fromkeys(attributes):
            if attribute in inside and attribute not in elsewhere and attribute in wanted:
                lines = [r.start.line for r in map(self.ctx.position, inside[attribute]) if r is not None]
                where = f" (line {min(lines)})" if lines else ""
                return f"`self.{attribute}`, which only code kept on CUDA assigns{where}: None on the NPU"
        return None

    def _assigned_to_self(self, owner: cst.ClassDef, attribute: str) -> List[cst.BaseExpression]:
        """The values the methods of `owner` assign to `self.<attribute>`; with partial parsing,
        the lines left out of them that assign it and hold CUDA-only code are asked for."""
        values: List[cst.BaseExpression] = []
        for method in owner.body.body:
            if not isinstance(method, cst.FunctionDef):
                continue
            for n in subtree(method.body):
                if isinstance(n, cst.Assign) and any(self_attribute(t.target) == attribute for t in n.targets):
                    values.append(n.value)
        partial = self.ctx.partial
        if partial is not None:
            # an assignment left out whose value is CUDA-only code, or a definition of the module
            # that may be (judged once parsed)
            assigns = re.compile(r"\bself\s*\.\s*%s\s*=(?!=)([^\n]*)" % re.escape(attribute))
            for run in self._runs_in(owner):
                if run in self.ctx.partial_lines:
                    continue
                for value in assigns.findall(partial.text_of(run)):
                    names = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", value)
                    if any(self._cuda_word(n.encode()) or n in self.definitions or n in self._elided_definitions()
                           for n in names):
                        self.ctx.partial_lines.add(run)
                        break
        return values

    def _ask_body(self, name: str) -> None:
        """With partial parsing: the statements left out of the function or class `name` that
        hold CUDA-only code (`return fused_norm(x)`): read, they may make it CUDA-only."""
        definition = self.definitions.get(name)
        if self.ctx.partial is not None and self.names_matter and isinstance(definition, (cst.FunctionDef, cst.ClassDef)):
            if id(definition) not in self._body_runs:
                self._body_runs[id(definition)] = self._runs_in(definition.body)
            self._ask_for(self._body_runs[id(definition)])

    def _runs_in(self, node: cst.CSTNode) -> List[Tuple[int, int]]:
        """The runs left out anywhere inside `node` (the bodies of a class's methods too)."""
        assert self.ctx.partial is not None
        return self.ctx.partial.runs_among(n for n in subtree(node) if isinstance(n, cst.SimpleStatementLine))

    def _settle_asks(self) -> None:
        """With partial parsing: for each definition judged, the bodies of the functions and
        classes it reads before the first name its imports make CUDA-only (_ask_body). Judging
        the words of what is asked for may judge more definitions: until none is left."""
        i = 0
        while i < len(self._evaluated):
            names, _fixed = self._reads_of(self.definitions[self._evaluated[i]])
            i += 1
            for name in names:
                if name in self.cuda_names:
                    break
                self._ask_body(name)

    def _fixed_reads(self, node: cst.CSTNode) -> Tuple[List[str], Optional[str]]:
        """The names `node` reads, in order, and what else in it is CUDA-only code whatever the
        names (a capability check kept on CUDA, a CUDA-only call): the detail, or None."""
        names = [n.value for n in self._references(node)]
        calls = list(_calls(node))
        for call in calls:
            if id(call) in self.ctx.kept and self.ctx.imports.resolve(call.func) in _CAPABILITY | _PROPERTIES:
                return names, f"`{self.ctx.code_for(call.func)}()`, kept on CUDA (NPU307)"
        if self._builds_here:
            for call in calls:
                qual = self.ctx.imports.resolve(call.func)
                if qual in _BUILDERS and _builds_cuda(call):
                    return names, f"`{qual}` of CUDA sources"  # (parlai's NGramRepeatBlock)
        if self._flagged or (calls and self._names_staying()):
            for call in calls:
                qual = self.ctx.imports.resolve(call.func)
                if qual is not None and qual.startswith("torch.cuda.") and self._stays_cuda(qual):
                    return names, f"`{qual}`, which has no NPU twin in the target and stays as it is"
        if self.calls:
            for call in calls:
                qual = self.ctx.imports.resolve(call.func)
                for rule in self.calls.get(qual or "", ()):
                    if arguments_match(rule, call):
                        return names, (f"`{qual}(..., out_dtype=...)`" if "out_dtype" in FindingSpec.of(rule).keywords
                                       else f"`{qual}`")
        return names, None

    def _names_library(self, test: cst.CSTNode) -> Optional[str]:
        """An identifier in the test that asks for a library (`_TRITON_AVAILABLE`,
        `is_flash_attn_2_available()`, `self.use_triton`), or a name bound to CUDA-only code."""
        stack = [test]
        while stack:
            n = stack.pop()
            if isinstance(n, cst.Name):
                found = self._cuda_name(n.value)
                if found is not None:
                    return f"the test reads {found}"
                if self._library_word(n.value):
                    return f"the test asks for `{n.value}`"
            elif isinstance(n, cst.Attribute):
                # `self.use_triton` asks by its name; `torch.cuda`'s `cuda` is no local name
                if self._library_word(n.attr.value):
                    return f"the test asks for `{n.attr.value}`"
                stack.append(n.value)
                continue
            elif isinstance(n, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)):
                continue
            stack.extend(code_children(n))
        return None

    # -- the walk -----------------------------------------------------------------------------

    def plan(self) -> None:
        candidates = self._candidates()
        left = []
        for node in candidates:
            if type(node) is cst.Call and self.ctx.imports.resolve(node.func) == "torch.cuda.device_count":
                if not self._gated_data_parallel(node):
                    self._counted_loop(node)
                continue
            if isinstance(node, (cst.Attribute, cst.Call)):  # `x.is_cuda`, `torch.cuda.is_available()`
                negative = False
            elif isinstance(node, cst.Comparison):
                negative = any(isinstance(t.operator, (cst.NotEqual, cst.NotIn)) for t in node.comparisons)
                operands = self._operands(node)
                if not any(_is_cuda_string(o) for o in operands) or any(_names_npu(o) for o in operands):
                    continue  # (`not in ("cuda", "npu")`: admits the NPU already; the torch pass keeps it)
            verdict = self._judge(node, negative, depth=0, seen=set())
            if verdict is None or (isinstance(node, cst.Comparison) and not self._tests_a_device(node)):
                if verdict is None:
                    left.append((node, negative))
                continue  # (asked last: is_device_expr may walk the module for a variable's uses)
            self._keep(node, negative, verdict)
        # A test of the same tensor as a kept one moves with it, whichever comes first in the file
        # (espnet's `if not acts.is_cuda: acts = log_softmax(acts)` before `_RNNTNumba.apply(acts,
        # ...)`, whose `acts.is_cuda` stays: the CPU loss needs that log_softmax; migrated alone,
        # NPU tensors would reach it without): until no more is kept.
        while left and self.holders:
            paired = [(node, negative, verdict) for node, negative in left
                      for verdict in [self._paired(node)] if verdict is not None]
            if not paired:
                break
            for node, negative, verdict in paired:
                self._keep(node, negative, verdict)
            left = [(node, negative) for node, negative in left if id(node) not in self.ctx.kept]
        if self.ctx.partial is not None:
            self._settle_asks()

    def _gated_data_parallel(self, count: cst.Call) -> bool:
        """`if torch.cuda.device_count() > 1: model = nn.DataParallel(model)` (the PyTorch
        tutorial's; pytorch-ignite 0.5.5 ignite/distributed/auto.py:231): as
        torch.npu.device_count() the branch would wrap the model in DataParallel on a machine of
        several NPUs, which Ascend does not support (NPU305); left as it is, the count is 0 there
        and the process trains on its one NPU, as before the migration. The count and the branch
        stay (NPU315 data-parallel-count); True when it is such a gate."""
        rule = self.data_parallel_rule
        if rule is None:
            return False
        assign = self.parent.get(id(count))
        if isinstance(assign, cst.Assign):
            gates = self._data_parallel_readers(count, assign)  # `n_gpu = torch.cuda.device_count()`
        else:
            inline = self._data_parallel_gate(count)  # `if torch.cuda.device_count() > 1:`
            gates = [inline] if inline is not None else []
        if not gates:
            return False
        self.ctx.keep(count)
        for branch, _ in gates:
            self.ctx.keep(branch.body)  # dead on the NPU: rewritten, it would be NPU code behind a CUDA count
        wrapper = gates[0][1]
        api = self.ctx.code_for(count)
        detail = f"`{self.ctx.code_for(wrapper)}`"
        self.ctx.finding(rule, count, api=api, message=rule.render_message(api=api, detail=detail),
                         suggestion=rule.render_suggestion(api=api, detail=detail))
        return True

    def _data_parallel_gate(self, node: cst.CSTNode,
                            parents: Optional[Dict[int, cst.CSTNode]] = None) -> Optional[Tuple[cst.If, cst.BaseExpression]]:
        """(the `if`, the DataParallel it calls) when `node` is (part of) the test of an `if`/`elif`
        whose branch wraps a model in DataParallel; None otherwise. `parents`: node id -> its
        parent (default: self.parent, the candidates' ancestors)."""
        parents = self.parent if parents is None else parents
        parent = parents.get(id(node))
        while isinstance(parent, (cst.Comparison, cst.ComparisonTarget, cst.BooleanOperation, cst.UnaryOperation)):
            node, parent = parent, parents.get(id(parent))
        if not isinstance(parent, cst.If) or parent.test is not node:
            return None
        wrapper = next((n.func for n in subtree(parent.body) if isinstance(n, cst.Call)
                        and self.ctx.imports.resolve(n.func) in _DATA_PARALLEL), None)
        return (parent, wrapper) if wrapper is not None else None

    def _data_parallel_readers(self, count: cst.Call,
                               assign: cst.Assign) -> List[Tuple[cst.If, cst.BaseExpression]]:
        """The DataParallel gates (_data_parallel_gate) that read `n` when `assign` is `n =
        torch.cuda.device_count()` and every other read of `n` in its function (or module) is in
        one of their tests or branches: kept, the count is 0 on the NPU for every reader of `n`,
        so a count read anywhere else (`batch_size * n_gpu`) moves as before. Empty otherwise."""
        if assign.value is not count or len(assign.targets) != 1 or not isinstance(assign.targets[0].target, cst.Name):
            return []
        target = assign.targets[0].target
        name = target.value
        if "DataParallel" not in self.ctx.text or not _name_compared(name, self.ctx.text):
            return []  # (never compared: no walk)
        owner: Optional[cst.CSTNode] = self.parent.get(id(assign))
        while owner is not None and not isinstance(owner, (cst.FunctionDef, cst.Module)):
            owner = self.parent.get(id(owner))
        if owner is None:
            return []
        work.count("walk")  # (the count's function, or module: in a file that compares a count and names DataParallel)
        parents: Dict[int, cst.CSTNode] = {}
        reads: List[cst.Name] = []
        stack: List[cst.CSTNode] = [owner]
        while stack:
            n = stack.pop()
            if type(n) is cst.Name and n.value == name and n is not target:
                reads.append(n)
            for child in code_children(n):
                parents[id(child)] = n
                stack.append(child)
        gates: Dict[int, Tuple[cst.If, cst.BaseExpression]] = {}
        outside = []
        for read in reads:
            gate = self._data_parallel_gate(read, parents)
            if gate is not None:
                gates.setdefault(id(gate[0]), gate)
            else:
                outside.append(read)
        if not gates:
            return []
        inside = {id(n) for gate, _ in gates.values() for n in subtree(gate.body)}
        if any(id(read) not in inside for read in outside):
            return []  # read elsewhere (or assigned again): the value moves with those readers
        partial = self.ctx.partial
        if partial is not None and partial.elided_word(name):
            self.ctx.partial_misses.add(name)  # its reads may be in lines left out: parse them too
            return []
        return list(gates.values())

    def _loop_over_variable(self, count: cst.Call, assign: cst.Assign) -> Optional[cst.For]:
        """The loop `for i in range(n):` when `assign` is `n = torch.cuda.device_count()` and
        `n` is read nowhere else in its function (or module): kept, the count is 0 on the NPU
        for every reader of `n`, so only a count the loop alone reads is kept with it."""
        if assign.value is not count or len(assign.targets) != 1 or not isinstance(assign.targets[0].target, cst.Name):
            return None
        name = assign.targets[0].target.value
        owner: Optional[cst.CSTNode] = self.parent.get(id(assign))
        while owner is not None and not isinstance(owner, (cst.FunctionDef, cst.Module)):
            owner = self.parent.get(id(owner))
        if owner is None:
            return None
        uses = [n for n in subtree(owner) if isinstance(n, cst.Name) and n.value == name]
        loops = [n for n in subtree(owner) if isinstance(n, cst.For) and isinstance(n.iter, cst.Call)
                 and isinstance(n.iter.func, cst.Name) and n.iter.func.value == "range" and len(n.iter.args) == 1
                 and isinstance(n.iter.args[0].value, cst.Name) and n.iter.args[0].value.value == name]
        return loops[0] if len(uses) == 2 and len(loops) == 1 else None

    def _read_in_lines_left_out(self, assign: cst.Assign) -> bool:
        """Whether the count's name is also written in lines partial parsing left out: then it
        may have other readers there, and the file is parsed again with them (asked only for a
        loop that would be kept, so a count no such loop reads costs no second parse)."""
        name = cst.ensure_type(assign.targets[0].target, cst.Name).value
        partial = self.ctx.partial
        if partial is None or not partial.elided_word(name):
            return False
        self.ctx.partial_misses.add(name)
        return True

    def _counted_loop(self, count: cst.Call) -> None:
        """`for i in range(torch.cuda.device_count()):` around code kept on CUDA (fairscale
        0.4.13 optim/oss.py: `major, minor = torch.cuda.get_device_capability(f"cuda:{i}")`, kept
        whole, NPU307). As torch.npu.device_count() the loop would run on the NPU and call CUDA
        there (a crash); left as it is, the count is 0 there and the loop does not run, as before
        the migration. The count and the loop's body stay (NPU315)."""
        arg = self.parent.get(id(count))
        ranged = self.parent.get(id(arg))
        loop = self.parent.get(id(ranged))
        if isinstance(arg, cst.Assign):
            loop = self._loop_over_variable(count, arg)  # `n = torch.cuda.device_count()`, then `range(n)`
            if loop is None:
                return
        elif not (isinstance(arg, cst.Arg) and arg.keyword is None and not arg.star and arg.value is count
                  and isinstance(ranged, cst.Call) and isinstance(ranged.func, cst.Name) and ranged.func.value == "range"
                  and isinstance(loop, cst.For) and loop.iter is ranged):
            return
        found = self._cuda_only_in(loop.body)
        if found is None or self.gate_rule is None:
            return
        if isinstance(arg, cst.Assign) and self._read_in_lines_left_out(arg):
            return
        self.ctx.keep(count)
        self.ctx.keep(loop.body)  # dead on the NPU: rewritten, it would be NPU code behind a CUDA count
        api = self.ctx.code_for(count)
        detail = f"the loop it counts runs {found}"
        message = self.gate_rule.render_message(api=api, detail=detail).replace(
            "it is False and the code takes its other path", "it is 0 and the loop does not run")
        suggestion = self.gate_rule.render_suggestion(api=api, detail=detail).replace(
            'then add "npu" to this test', "then count the NPUs here (torch.npu.device_count())")
        self.ctx.finding(self.gate_rule, count, api=api, message=message, suggestion=suggestion)

    def _keep(self, node: cst.CSTNode, negative: bool, verdict: Tuple[str, str]) -> None:
        guard, detail = verdict
        self.ctx.keep(node)
        function = self._function_of(node)
        if function is not None:
            self.holders.add(function.name.value)
        test = f"`{self.ctx.code_for(node)}` is {'False' if negative else 'True'}"
        for side in self._cuda_side(node, negative):
            self.ctx.keep(side, behind=test)  # dead on the NPU now: rewritten, it would be half-migrated code
        for side in self._held_sides(node, negative):
            self.ctx.keep(side, behind=test)  # (so are the branches the variable or attribute holding it opens)
        if isinstance(node, cst.Comparison):
            self._keep_assigned_values(node, function)
        rule = {"gate": self.gate_rule, "refusal": self.refusal_rule, "ray": self.ray_rule}[guard]
        if rule is not None:
            api = self.ctx.code_for(node)
            self.ctx.finding(rule, node, api=api, message=rule.render_message(api=api, detail=detail),
                             suggestion=rule.render_suggestion(api=api, detail=detail))

    def _keep_assigned_values(self, test: cst.Comparison, function: Optional[cst.FunctionDef]) -> None:
        """The kept test compares a variable with "cuda": the CUDA strings the code assigns to
        that variable stay too (pytorch-pfn-extras get_xp: `elif isinstance(obj, cupy.ndarray):
        devtype = "cuda"` read by the kept `elif devtype == "cuda": return cupy`). Moved alone,
        "npu" would reach a test that still asks for "cuda": a value and its reader move together
        or not at all. The variable's scope is the function when it assigns the name there, else
        the module."""
        for operand in self._operands(test):
            if not isinstance(operand, cst.Name) or _is_cuda_string(operand):
                continue
            name = operand.value
            scope: cst.CSTNode = self.ctx.module
            if function is not None:
                self.parent[id(function.body)] = function
                if any(self._is_target(ref) for ref in self._uses(function.body, name)):
                    scope = function.body
            if scope is self.ctx.module:
                work.count("walk")
            for ref in self._uses(scope, name):
                if not self._is_target(ref):
                    continue
                target = self.parent.get(id(ref))
                assign = target if isinstance(target, cst.AnnAssign) else self.parent.get(id(target))
                value = getattr(assign, "value", None)
                if isinstance(value, cst.BaseExpression) and any(
                        _is_cuda_string(s) for s in _strings_in(value)):
                    self.ctx.keep(value)

    def _paired(self, node: cst.CSTNode) -> Optional[Tuple[str, str]]:
        """("gate", detail) when the device test `node` tests a tensor that its function then
        passes to a function of the module (or an autograd Function's `apply`, or a callable the
        class keeps in `self.<name>`) whose test of that parameter's device stays CUDA: both
        must give the same answer on the NPU (a value and its readers move together)."""
        tested = _tested_tensor(node)
        function = self._function_of(node) if tested is not None else None
        if function is None or tested is None or not self._prepares(node, tested):
            return None
        partial = self.ctx.partial
        if partial is not None:
            # the calls left out of the function that pass the tensor to a holder of a kept
            # test, directly or through `self.<name>` (`return self.loss(acts, ...)`)
            holders = {h.encode() for h in self.holders} | {b"self", b"apply"}
            for run in partial.elided_in(function.body, tested):
                if run not in self.ctx.partial_lines and holders & self._words_of_run(run):
                    self.ctx.partial_lines.add(run)
        for call in _calls(function.body):
            position, keyword = None, None
            for i, arg in enumerate(call.args):
                if arg.star:
                    break
                if isinstance(arg.value, cst.Name) and arg.value.value == tested:
                    position, keyword = (None, arg.keyword.value) if arg.keyword is not None else (i, None)
                    break
            if position is None and keyword is None:
                continue
            for callee, skip, shown in self._callees(call.func, function):
                params = list(callee.params.posonly_params) + list(callee.params.params)
                if keyword is not None:
                    param = keyword
                elif position is not None and position + skip < len(params):
                    param = params[position + skip].name.value
                else:
                    continue
                if self._kept_test_of(callee, param):
                    return ("gate", f"the same tensor goes on to `{shown}()`, whose device test stays CUDA")
        return None

    def _prepares(self, node: cst.CSTNode, tested: str) -> bool:
        """Whether the `if` that the device test `node` decides (through `not`/`and`/`or`)
        assigns the tested tensor in one of its branches (`if not acts.is_cuda: acts =
        log_softmax(acts)`): it prepares that tensor for what the device test of its callee
        chooses. A test that only does something beside the tensor (`if x.device.type ==
        "cuda": torch.cuda.synchronize()`) need not agree with another."""
        child, parent = node, self.parent.get(id(node))
        while isinstance(parent, (cst.UnaryOperation, cst.BooleanOperation)):
            child, parent = parent, self.parent.get(id(parent))
        if not isinstance(parent, cst.If) or parent.test is not child:
            return False
        for block in (parent.body, parent.orelse):
            for n in subtree(block) if block is not None else ():
                if isinstance(n, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign)) and isinstance(
                        n.target, cst.Name) and n.target.value == tested:
                    return True
        return False

    def _callees(self, func: cst.BaseExpression, caller: cst.FunctionDef) -> Iterator[Tuple[cst.FunctionDef, int, str]]:
        """(the function a call runs, how many of its parameters come before the call's
        arguments, the callee as written) for a function of the module, `<Function>.apply`
        (its `forward`, after `ctx`) and `self.<name>` where the class assigns one of those."""
        if isinstance(func, cst.Name):
            definition = self.definitions.get(func.value)
            if isinstance(definition, cst.FunctionDef):
                yield definition, 0, func.value
        elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
            owner_name, attribute = func.value.value, func.attr.value
            if owner_name == "self":
                owner = self.parent.get(id(caller))
                while owner is not None and not isinstance(owner, cst.ClassDef):
                    owner = self.parent.get(id(owner))
                if owner is not None:
                    for value in self._assigned_to_self(owner, attribute):
                        if isinstance(value, (cst.Name, cst.Attribute)):
                            for callee, skip, shown in self._callees(value, caller):
                                yield callee, skip, shown
                return
            definition = self.definitions.get(owner_name)
            if attribute == "apply" and isinstance(definition, cst.ClassDef):
                forward = next((m for m in definition.body.body if isinstance(m, cst.FunctionDef)
                                and m.name.value == "forward"), None)
                if forward is not None:
                    yield forward, 1, f"{owner_name}.apply"

    def _kept_test_of(self, function: cst.FunctionDef, param: str) -> bool:
        """Whether `function` holds a device test of its parameter `param` that stays CUDA."""
        kept = self.ctx.kept
        stack: List[cst.CSTNode] = [function.body]
        while stack:
            n = stack.pop()
            if id(n) in kept and _tested_tensor(n) == param:
                return True
            stack.extend(code_children(n))
        return False

    def _cuda_side(self, node: cst.CSTNode, negative: bool) -> List[cst.CSTNode]:
        """The code that runs only when the kept test `node` is True on CUDA (False when
        `negative`): the branch of the if/while/conditional expression it decides (for a test
        False on CUDA: the `else`, and the rest of the block when the `if` body raises or
        returns). The test stays CUDA, so the NPU never runs that code: rewritten, it would be
        NPU code behind a CUDA test (fairseq's `if device.type == "cuda": with
        torch.cuda.device(device): multi_tensor_l2norm(...)`). Only where the test is needed
        for that code (`a and <test>`, not `a or <test>`), directly (not through a variable or
        a function's result)."""
        child, parent = node, self.parent.get(id(node))
        while True:
            if isinstance(parent, cst.UnaryOperation):
                if not isinstance(parent.operator, cst.Not):
                    return []
                negative = not negative
            elif isinstance(parent, cst.BooleanOperation):
                if isinstance(parent.operator, cst.Or) != negative:
                    return []  # `a or <test>`: the code runs without the test's answer too
            elif parent is not None and (flips := _compared_with_bool(parent, child)) is not None:
                negative = negative != flips  # `<test> is False`
            else:
                call = self._all_or_any(parent, child)
                if call is None:
                    break
                parent = call
            child, parent = parent, self.parent.get(id(parent))
        if not isinstance(parent, (cst.If, cst.While, cst.IfExp)) or parent.test is not child:
            return []
        if not negative:
            return [parent.body]
        if isinstance(parent, cst.While):
            return []  # (its `else` runs after the loop too)
        side: List[cst.CSTNode] = [parent.orelse] if parent.orelse is not None else []
        if isinstance(parent, cst.If) and _exits(parent.body):
            side += self._rest_of_block(parent)
        return side

    def _imports_cuda_only(self, body: cst.BaseSuite) -> Optional[str]:
        """A branch that only imports, binding a name of CUDA-only code (parlai 1.7.2
        torch_generator_agent.py:47 `if torch.cuda.is_available(): from parlai.ops.ngram_repeat_block
        import NGramRepeatBlock`, a class building CUDA sources, read only in code kept on CUDA):
        the name and its readers stay together on CUDA. The detail, or None."""
        if not self.names_matter or not isinstance(body, cst.IndentedBlock) or not all(
                isinstance(stmt, cst.SimpleStatementLine) for stmt in body.body):
            return None
        smalls = list(suite_small_statements(body))
        if not smalls or not all(isinstance(small, (cst.Import, cst.ImportFrom)) for small in smalls):
            return None
        for small in smalls:
            names = small.names if isinstance(small, (cst.Import, cst.ImportFrom)) else ()
            if isinstance(names, cst.ImportStar):
                continue
            for alias in names:
                bound: cst.BaseExpression = alias.asname.name if alias.asname is not None else alias.name
                while isinstance(bound, cst.Attribute):  # (`import a.b` binds `a`)
                    bound = bound.value
                found = self._cuda_name(bound.value) if isinstance(bound, cst.Name) else None
                if found is not None:
                    return f"it imports {found}"
        return None

    def _held_sides(self, node: cst.CSTNode, negative: bool) -> List[cst.CSTNode]:
        """The code that runs only when a variable or an attribute of the instance holding the kept
        test `node` is True (`self.x = flag and <test>`: its `if self.x:` bodies): the test stays
        CUDA, so on the NPU the holder is False and that code never runs there; rewritten, it would
        be NPU code behind a CUDA test (parlai 1.7.2's TreeSearch: `self.gpu_beam_blocking =
        gpu_beam_blocking and torch.cuda.is_available()`, then `if self.gpu_beam_blocking:
        self.partial_hyps = self.partial_hyps.cuda()`). As _cuda_side, for each reader that is a
        test itself; only where the holder is True only when the test is (`a and <test>`, not `a or
        <test>`) and every other assignment of it is False or None."""
        child, parent = node, self.parent.get(id(node))
        while True:
            if isinstance(parent, cst.UnaryOperation) and isinstance(parent.operator, cst.Not):
                negative = not negative
            elif isinstance(parent, cst.BooleanOperation):
                if isinstance(parent.operator, cst.Or) != negative:
                    return []  # `a or <test>`: True without the test's answer too
            elif parent is not None and (flips := _compared_with_bool(parent, child)) is not None:
                negative = negative != flips
            else:
                break
            child, parent = parent, self.parent.get(id(parent))
        if not isinstance(parent, (cst.Assign, cst.AnnAssign)) or parent.value is not child:
            return []
        assign = parent
        targets = [t.target for t in assign.targets] if isinstance(assign, cst.Assign) else [assign.target]
        if len(targets) != 1:
            return []
        attribute = self_attribute(targets[0])
        if attribute is not None:
            owner = self._enclosing_class(assign)
            if owner is None:
                return []
            if self.ctx.partial is not None:
                # its other assignments and readers in the lines left out of the class: parsed too
                written = re.compile(r"\bself\s*\.\s*%s\b" % re.escape(attribute))
                self.ctx.partial_lines.update(run for run in self._runs_in(owner) if run not in self.ctx.partial_lines
                                              and written.search(self.ctx.partial.text_of(run)))
            work.count("walk")
            holders = self._attribute_uses(owner, attribute)
        elif isinstance(targets[0], cst.Name):
            name = targets[0].value
            function = self._function_of(assign)
            if function is None:
                return []  # (a module's variable: read anywhere, by other modules too)
            self.parent[id(function.body)] = function
            if self.ctx.partial is not None:
                self.ctx.partial_lines.update(self.ctx.partial.elided_in(function.body, name))
            holders = list(self._uses(function.body, name))
        else:
            return []
        sides: List[cst.CSTNode] = []
        for holder in holders:
            target = self.parent.get(id(holder))
            if isinstance(target, (cst.AssignTarget, cst.AnnAssign, cst.AugAssign)) and target.target is holder:
                other = self.parent.get(id(target)) if isinstance(target, cst.AssignTarget) else target
                value = getattr(other, "value", None)
                if other is not assign and not (isinstance(value, cst.Name) and value.value in ("False", "None")):
                    return []  # (set otherwise elsewhere: its readers may run on the NPU)
                continue
            sides += self._cuda_side(holder, negative)
        return sides

    def _attribute_uses(self, owner: cst.ClassDef, attribute: str) -> List[cst.CSTNode]:
        """The nodes `self.<attribute>` in the class, in source order, their ancestors recorded."""
        found: List[cst.CSTNode] = []
        for n, path in _paths(owner):  # (below one: `self` and the name alone)
            if self_attribute(n) == attribute:
                self._record(path)
                found.append(n)
        return found

    def _tests_a_device(self, node: cst.Comparison) -> bool:
        """Whether the torch pass would rewrite the comparison: "cuda" compared with a device."""
        operands = self._operands(node)
        return any(_is_cuda_string(o) and any(self.is_device_expr(other) for other in operands if other is not o)
                   for o in operands)

    def _candidates(self) -> List[cst.CSTNode]:
        """Comparisons (==, !=, in, not in), `.is_cuda` tests and `torch.cuda.is_available()`
        calls, in the order of the file, their ancestors recorded (self.parent); and the
        module's definitions by name (functions and classes at any depth, as the last one in the
        file that is not inside another of the same name; then names assigned at module level)."""
        work.count("walk")
        found: List[cst.CSTNode] = []
        definitions = self.definitions
        kept = self.ctx.kept
        resolve = self.ctx.imports.resolve
        # (node types by identity: libcst's are final classes, and isinstance() on them goes
        # through ABCMeta, a fifth of this walk)
        definition_types = (cst.FunctionDef, cst.ClassDef)
        comparison, attribute, call = cst.Comparison, cst.Attribute, cst.Call
        n: Any  # narrowed by `kind is ...`, which mypy cannot follow

        def below(node: cst.CSTNode) -> Sequence[cst.CSTNode]:
            return () if id(node) in kept else code_children(node)

        for n, path in _paths(self.ctx.module, below):
            if id(n) in kept:
                continue  # the planner keeps it already (a capability check's whole statement)
            kind = type(n)
            if kind in definition_types:
                held = definitions.get(n.name.value)
                if held is None or not any(p is held for p in path):
                    definitions[n.name.value] = n
            elif kind is comparison and any(
                    isinstance(t.operator, (cst.Equal, cst.NotEqual, cst.In, cst.NotIn)) for t in n.comparisons):
                found.append(n)
                self._record(path)
            elif kind is attribute and n.attr.value == "is_cuda":
                found.append(n)
                self._record(path)
            elif kind is call and not n.args and resolve(n.func) in ("torch.cuda.is_available", "torch.cuda.device_count"):
                found.append(n)  # `torch.cuda.is_available() and HAS_TRITON`: the same gate;
                self._record(path)  # `for i in range(torch.cuda.device_count()):` (_counted_loop)
        for stmt in self.ctx.module.body:
            if isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if isinstance(small, cst.Assign):
                        for t in small.targets:
                            if isinstance(t.target, cst.Name):
                                definitions.setdefault(t.target.value, small.value)
        return found

    def _record(self, path: List[cst.CSTNode]) -> None:
        """The parents along `path` (a node and its ancestors, from the walk's root down)."""
        parent = self.parent
        for i in range(len(path) - 1, 0, -1):
            if id(path[i]) in parent:
                break  # (and so are its ancestors)
            parent[id(path[i])] = path[i - 1]

    def _judge(self, node: cst.CSTNode, negative: bool, depth: int, seen: Set[int]) -> Optional[Tuple[str, str]]:
        """("gate"|"refusal", detail) when the device test `node` (True on CUDA, or False on CUDA
        when `negative`) must stay CUDA; None when it migrates."""
        if id(node) in seen or depth > 3:
            return None
        seen.add(id(node))
        child: cst.CSTNode = node
        parent = self.parent.get(id(child))
        while True:
            if isinstance(parent, (cst.BooleanOperation, cst.UnaryOperation)):
                if isinstance(parent, cst.UnaryOperation):
                    if not isinstance(parent.operator, cst.Not):
                        return None
                    negative = not negative
                child, parent = parent, self.parent.get(id(parent))
                continue
            flips = _compared_with_bool(parent, child)
            if flips is not None and parent is not None:  # `torch.cuda.is_available() is False`: `not <test>`
                negative = negative != flips
                child, parent = parent, self.parent.get(id(parent))
                continue
            if isinstance(parent, cst.IfExp) and parent.test is not child:
                # `cudagraph = fast if cudagraph is None else bool(cudagraph)`: the value goes on
                # into the variable, whose readers decide (only there: what the other branch
                # holds says nothing of this test)
                return self._chosen(parent, negative, depth, seen)
            call = self._all_or_any(parent, child)
            if call is None:
                break
            child, parent = call, self.parent.get(id(call))  # `all(t.is_cuda for t in (a, b))`: the same test
        if parent is None:
            return None
        test = child
        if isinstance(parent, (cst.If, cst.While, cst.IfExp)) and parent.test is test:
            named = self._names_library(test)
            if named is not None:
                refusal = negative and isinstance(parent, cst.If) and _raises(parent.body)
                return ("refusal" if refusal else "gate", named)
            return self._branches(parent, negative) or self._early_answer(parent, negative, depth, seen)
        if isinstance(parent, cst.Assert) and parent.test is test:
            return None if negative else self._asserted(parent, test)
        if isinstance(parent, cst.Return) and parent.value is test:
            return self._returned(parent, negative, depth, seen, test)
        if isinstance(parent, cst.Arg) and parent.value is test:
            return self._argument(parent, negative, depth, seen)
        if isinstance(parent, cst.Element) and parent.value is test:
            return self._unpacked(parent, negative, depth, seen)
        if isinstance(parent, (cst.Assign, cst.AnnAssign)) and parent.value is test:
            named = self._names_library(test)
            targets = ([t.target for t in parent.targets] if isinstance(parent, cst.Assign) else [parent.target])
            names = [t.value for t in targets if isinstance(t, cst.Name)]
            if named is not None and any(self._library_word(n) for n in names):
                return ("gate", named)  # `use_triton = HAS_TRITON and x.device.type == "cuda"`
            for name in names:
                verdict = self._variable(parent, name, negative, depth, seen)
                if verdict is not None:
                    return verdict
            for target in targets:
                attribute = self_attribute(target)
                if attribute is not None:
                    verdict = self._instance_attribute(parent, attribute, negative, depth, seen)
                    if verdict is not None:
                        return verdict
            return None
        return None

    def _chosen(self, choice: cst.IfExp, negative: bool, depth: int, seen: Set[int]) -> Optional[Tuple[str, str]]:
        """A device test that is a branch of a conditional expression assigned to a variable
        (`cudagraph = fast if cudagraph is None else bool(cudagraph)`): the variable decides,
        as for `cudagraph = fast`. Elsewhere (returned, passed) it migrates, as before."""
        assign = self.parent.get(id(choice))
        if not isinstance(assign, cst.Assign) or assign.value is not choice:
            return None
        for target in assign.targets:
            if isinstance(target.target, cst.Name):
                verdict = self._variable(assign, target.target.value, negative, depth, seen)
                if verdict is not None:
                    return verdict
        return None

    def _unpacked(self, element: cst.Element, negative: bool, depth: int,
                  seen: Set[int]) -> Optional[Tuple[str, str]]:
        """A device test unpacked into a variable (`_, heads, is_cuda, device = *q.shape,
        q.is_cuda, q.device`): the variable at the same place, counted from the end after a
        starred element, decides as for `is_cuda = q.is_cuda`."""
        values = self.parent.get(id(element))
        assign = self.parent.get(id(values)) if isinstance(values, (cst.Tuple, cst.List)) else None
        if not (isinstance(assign, cst.Assign) and assign.value is values and len(assign.targets) == 1
                and isinstance(assign.targets[0].target, (cst.Tuple, cst.List))):
            return None
        assert isinstance(values, (cst.Tuple, cst.List))
        sources, targets = list(values.elements), list(assign.targets[0].target.elements)
        i = next(k for k, e in enumerate(sources) if e is element)
        starred = (cst.StarredElement,)
        if not any(isinstance(e, starred) for e in sources[:i] + targets[:i + 1]) and i < len(targets):
            target = targets[i]
        elif (not any(isinstance(e, starred) for e in sources[i:] + targets[len(targets) - (len(sources) - i):])
              and len(sources) - i <= len(targets)):
            target = targets[len(targets) - (len(sources) - i)]
        else:
            return None
        if not isinstance(target, cst.Element) or not isinstance(target.value, cst.Name):
            return None
        return self._variable(assign, target.value.value, negative, depth, seen)

    def _all_or_any(self, comprehension: Optional[cst.CSTNode], element: cst.CSTNode) -> Optional[cst.Call]:
        """`all(<element> for ...)` / `any(...)` (the builtins: not a name of the module) around a
        device test: True on CUDA when the test is, as the test itself."""
        if not isinstance(comprehension, (cst.GeneratorExp, cst.ListComp, cst.SetComp)) or comprehension.elt is not element:
            return None
        arg = self.parent.get(id(comprehension))
        call = self.parent.get(id(arg)) if isinstance(arg, cst.Arg) else comprehension
        if not (isinstance(call, cst.Call) and len(call.args) == 1 and call.args[0].value is comprehension
                and isinstance(call.func, cst.Name) and call.func.value in ("all", "any")
                and call.func.value not in self.definitions and call.func.value not in self.ctx.imports.names):
            return None
        return call

    def _branches(self, statement: cst.CSTNode, negative: bool) -> Optional[Tuple[str, str]]:
        """The code an if/while/conditional expression runs when the device is CUDA."""
        for part in (getattr(statement, "body", None), getattr(statement, "orelse", None)):
            if part is not None:
                self.parent[id(part)] = statement  # (_cuda_only_attribute looks for the class)
        if isinstance(statement, cst.IfExp):
            counted = self._gpu_count(statement)
            if counted is not None:
                return ("ray", f"`{counted}`")
            side: List[cst.CSTNode] = [statement.orelse if negative else statement.body]
            found = self._cuda_only_in(side[0]) or self._kept_attribute(side[0])
            return ("gate", found) if found is not None else None
        assert isinstance(statement, (cst.If, cst.While))
        if not negative:
            found = (self._cuda_only_in(statement.body) or self._kept_attribute(statement.body)
                     or self._refused_elsewhere(statement) or self._imports_cuda_only(statement.body))
            self._note_elided(statement.body)
            if found is None and isinstance(statement, cst.If):
                found = self._mindspore_side(statement.orelse)
                if found is not None:
                    return ("gate", found)
                return self._flag_cleared(statement, negative, 0, set())  # `else: self._enabled = False`
            return ("gate", found) if found is not None else None
        side = [statement.orelse] if statement.orelse is not None else []
        early = isinstance(statement, cst.If) and _exits(statement.body)  # raise or return
        refusal = early and _raises(statement.body)
        if early:
            side += self._rest_of_block(statement)
        for part in side:
            found = self._cuda_only_in(part)
            if found is not None:
                return ("refusal" if refusal else "gate", found)
            self._note_elided(part)
        if refusal and isinstance(statement, cst.If):
            named = next((w for s in suite_small_statements(statement.body) for w in self._library_in_message(s)), None)
            if named is not None:
                # (torchrl 0.14.1's `if backend == "triton" and device.type != "cuda":
                # pytest.skip("triton recurrent backend requires CUDA")`: whatever else the rest
                # of the block moves, the library it names stays CUDA-only)
                return ("refusal", f"the error it raises names `{named}`, a CUDA-only library")
            if any(self._raises_cuda_only(s) for s in suite_small_statements(statement.body)) and not self._ported(side):
                return ("refusal", "the error it raises says the code is CUDA-only")
        needs = self._module_needs() if refusal else None
        if needs is not None:
            return ("refusal", f"the module imports {needs} unconditionally")
        if not early and isinstance(statement, cst.If):
            found = self._mindspore_side(statement.body)
            if found is not None:
                return ("gate", found)
            return self._flag_cleared(statement, negative, 0, set())
        return None

    def _mindspore_side(self, side: Optional[cst.CSTNode]) -> Optional[str]:
        """The side of a CUDA test that runs without CUDA, when it is MindSpore code in a file that
        imports MindSpore (mindone 0.5.0's tests: `if torch.cuda.is_available(): <the PyTorch
        reference, saved> else: <the MindSpore code under test, on Ascend>`): it reads a name
        imported from MindSpore, or a module variable made by one (`f_jit = jit(f)`). Moved, the
        test is True on the NPU, so the MindSpore side never runs there. The detail, or None."""
        if not self._mindspore or side is None or isinstance(side, cst.If):
            return None
        block = side.body if isinstance(side, cst.Else) else side
        names = self.ctx.imports.names
        local = {n for n, q in names.items() if q == "mindspore" or q.startswith("mindspore.")}
        unknown = []
        for ref in self._references(block):
            name = ref.value
            if name in local:
                return f"its other side is the MindSpore code, `{name}` from {names[name].rsplit('.', 1)[0] if '.' in names[name] else names[name]}"
            value = self.definitions.get(name)
            if isinstance(value, cst.BaseExpression) and any(r.value in local for r in self._references(value)):
                return f"its other side is the MindSpore code, `{name}`, made by MindSpore"
            if value is None and name not in names:
                unknown.append(name)
        partial = self.ctx.partial
        if partial is not None:
            # its statements left out, and the module's that write a name it reads: parsed too,
            # then judged as a whole parse is
            self.ctx.partial_lines.update(partial.runs_among(getattr(block, "body", ())))
            self.ctx.partial_misses.update(name for name in unknown if partial.elided_word(name))
        return None

    def _refused_elsewhere(self, statement: cst.CSTNode) -> Optional[str]:
        """`if cudagraph and device.type != "cuda": raise ValueError("... requires a CUDA
        training device.")` (torchrl 0.14.1 dreamer_v3): the flag tested beside a refusal that
        stays CUDA must be off on every other device, or the refusal fires there."""
        if not (isinstance(statement, cst.If) and isinstance(statement.test, cst.BooleanOperation)
                and _raises(statement.body)
                and any(self._raises_cuda_only(s) for s in suite_small_statements(statement.body))):
            return None
        operands: List[cst.BaseExpression] = []
        stack: List[cst.BaseExpression] = [statement.test]
        while stack:
            n = stack.pop()
            if isinstance(n, cst.BooleanOperation) and isinstance(n.operator, cst.And):
                stack += [n.right, n.left]
            else:
                operands.append(n)
        for test in operands:
            if (isinstance(test, cst.Comparison) and len(test.comparisons) == 1
                    and isinstance(test.comparisons[0].operator, (cst.NotEqual, cst.NotIn))
                    and any(_is_cuda_string(o) for o in self._operands(test)) and self._tests_a_device(test)
                    and self._judge(test, True, 3, set()) is not None):
                where = self.ctx.position(test)
                at = f" at line {where.start.line}" if where is not None else ""
                return f"when it is on, the check{at} refuses every device but CUDA"
        return None

    def _gpu_count(self, choice: cst.IfExp) -> Optional[str]:
        """The name of the GPU count a conditional expression gives, assigned or passed
        (`num_gpus = 0.5 if device == "cuda" else 0`, `num_gpus_per_worker=...`, `{"num_gpus": ...}`):
        Ray asks its scheduler for GPUs by that number; on an NPU machine it has none, and the
        trial never starts (Ray names NPUs `resources={"NPU": n}`)."""
        holder = self.parent.get(id(choice))
        names: List[str] = []
        if isinstance(holder, cst.Assign) and holder.value is choice:
            names = [t.target.value for t in holder.targets if isinstance(t.target, cst.Name)]
        elif isinstance(holder, cst.Arg) and holder.value is choice and holder.keyword is not None:
            names = [holder.keyword.value]
        elif isinstance(holder, cst.DictElement) and holder.value is choice and isinstance(holder.key, cst.SimpleString):
            names = [string_value(holder.key) or ""]  # `config={"num_gpus": ...}`
        return next((n for n in names if n.startswith("num_gpus")), None)

    def _module_needs(self) -> Optional[str]:
        """A CUDA-only library the module imports at its top level, outside any `try`/`if`: the
        whole module is CUDA-only code (a CuTe DSL or Triton kernel file), so a refusal in it
        guards that code."""
        for stmt in self.ctx.module.body:
            if isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if isinstance(small, (cst.Import, cst.ImportFrom)):
                        for name in imported_names(small):
                            if name and self._cuda_module(name):
                                return f"`{name}`"
        return None

    def _early_answer(self, statement: cst.CSTNode, negative: bool, depth: int,
                      seen: Set[int]) -> Optional[Tuple[str, str]]:
        """`if x.device.type != "cuda": return False` in a function: the function answers the
        device test (True only on CUDA), so it is judged as a predicate returning it."""
        if not isinstance(statement, cst.If) or not _exits(statement.body):
            return None
        last = list(suite_small_statements(statement.body))[-1]
        value = last.value if isinstance(last, cst.Return) else None
        if not (isinstance(value, cst.Name) and value.value in ("True", "False")):
            return None
        # the function returns True when the device is CUDA iff `negative` and False, or not
        # `negative` and True (`if x.device.type == "cuda": return True`)
        answers_cuda = negative == (value.value == "False")
        return self._predicate(statement, not answers_cuda, depth, seen)

    def _asserted(self, assertion: cst.Assert, test: cst.CSTNode) -> Optional[Tuple[str, str]]:
        """`assert x.is_cuda, "Input tensor must be CUDA"` refuses non-CUDA devices like `if not
        ...: raise`: kept when the test names a library, the message says CUDA only, the code
        after it in the block is CUDA-only, or the module imports a CUDA-only library."""
        named = self._names_library(test)
        if named is not None:
            return ("refusal", named)
        line = self.parent.get(id(assertion))
        rest = self._rest_of_block(line) if line is not None else []
        for part in rest:
            found = self._cuda_only_in(part)
            if found is not None:
                return ("refusal", found)
            self._note_elided(part)
        if assertion.msg is not None and (_cuda_only_text(assertion.msg) or any(
                compiled(_CUDA_KERNEL_RE).search(t) or any(self._library_word(w) for w in re.findall(r"[A-Za-z_]+", t))
                for t in _texts(assertion.msg))) and not self._ported(rest):
            return ("refusal", "its message says the code is CUDA-only")
        needs = self._module_needs()
        if needs is not None:
            return ("refusal", f"the module imports {needs} unconditionally")
        return None

    def _ported(self, parts: List[cst.CSTNode]) -> bool:
        """Whether the code an assertion or a refusal protects (the rest of its block; nothing
        CUDA-only in it) is device code this migration moves to the NPU -- a `torch.cuda` name, an "nccl"
        backend, a `.cuda()` call -- there or in the module's functions it names (two levels
        down): nnU-Net's `assert device.type == 'cuda', "DDP training ... is only implemented
        for cuda devices"` before `mp.spawn(run_ddp, ...)`, whose process group and
        `torch.cuda.set_device` become hccl and torch.npu. The message then speaks of the code
        as it was: kept on CUDA, the assertion would refuse the NPU the very path migrated for
        it (a value and the code that reads it move together), so the test moves too."""
        todo, seen = list(parts), set()
        for _level in range(3):
            names: List[cst.CSTNode] = []
            for node in todo:
                for n in subtree(node):
                    if type(n) is cst.Attribute:
                        if (self.ctx.imports.resolve(n) or "").startswith("torch.cuda."):
                            return True
                    elif type(n) is cst.Call and isinstance(n.func, cst.Attribute) and n.func.attr.value == "cuda":
                        return True
                    elif type(n) is cst.SimpleString and (string_value(n) or "").lower() == "nccl":
                        return True
                    elif type(n) is cst.Name and n.value in self.definitions and n.value not in seen:
                        seen.add(n.value)
                        names.append(self.definitions[n.value])
            if not names:
                return False
            todo = names
        return False

    def _library_in_message(self, small: cst.BaseSmallStatement) -> Iterator[str]:
        """The CUDA-only libraries a CUDA-only message of a raise or skip names ("triton
        recurrent backend requires CUDA")."""
        if not _raises_cuda_only(small):
            return
        message = small.exc if isinstance(small, cst.Raise) else _skip_call(small)
        for text in _texts(message) if message is not None else ():
            for word in re.findall(r"[A-Za-z_]+", text):
                if self._library_word(word):
                    yield word

    def _raises_cuda_only(self, small: cst.BaseSmallStatement) -> bool:
        if _raises_cuda_only(small):
            return True
        message = small.exc if isinstance(small, cst.Raise) else _skip_call(small)
        if message is None:
            return False
        return any(compiled(_CUDA_KERNEL_RE).search(text) or any(self._library_word(w) for w in re.findall(r"[A-Za-z_]+", text))
                   for text in _texts(message))

    def _rest_of_block(self, statement: cst.CSTNode) -> List[cst.CSTNode]:
        block = self.parent.get(id(statement))
        body = getattr(block, "body", None)
        if not isinstance(body, (list, tuple)):
            return []
        index = next((i for i, s in enumerate(body) if s is statement), None)
        if index is None:
            return []
        rest = list(body[index + 1:])
        for part in rest:
            self.parent[id(part)] = statement if block is None else block
        if self.ctx.partial is not None:
            self._ask_for(self.ctx.partial.runs_among(rest))
        return rest

    def _ask_for(self, runs, name: str = "") -> None:
        """With partial parsing: parse those of `runs` (lines left out) that hold CUDA-only code
        (a CUDA-only name, a library word, a CUDA-only call's name) -- and `name`, when given:
        only they can change a verdict."""
        partial = self.ctx.partial
        if partial is None or not self.names_matter:
            return
        for run in runs:
            if run in self.ctx.partial_lines:
                continue  # (asked already)
            words = self._words_of_run(run)
            if name and name.encode() not in words:
                continue
            if any(self._cuda_word(w) for w in words):
                self.ctx.partial_lines.add(run)

    def _words_of_run(self, run: Tuple[int, int]) -> Set[bytes]:
        words = self._run_words.get(run)
        if words is None:
            assert self.ctx.partial is not None
            words = self._run_words[run] = words_of(self.ctx.partial.text_of(run))
        return words

    def _cuda_word(self, word: bytes) -> bool:
        """Whether a word of a line left out names CUDA-only code: a name the imports bind to it
        (or imports left out would), a CUDA-only definition of the module, a library word, a
        CUDA-only call's name."""
        known = self._cuda_word_memo.get(word)
        if known is None:
            self._cuda_word_memo[word] = False
            name = word.decode("utf-8", "replace")
            known = (name in self.cuda_names or name in self.project_locals or name in self._call_leaves
                     or self._library_word(name)
                     or name in self.definitions and self._within(name, 3) or name in self._elided_imports()
                     # (a function or class left out that may be: `self.loss = Transducer.apply`)
                     or name not in self.definitions and name in self._elided_definitions()
                     and self._ask_for_definition(name))
            self._cuda_word_memo[word] = known
        return known

    def _ask_for_uses(self, name: str) -> None:
        """The lines left out that use `name` (a predicate's callers, a variable's readers) and
        hold CUDA-only code."""
        partial = self.ctx.partial
        if partial is not None and partial.elided_word(name):
            self._ask_for([(start, end) for start, end, _indent in partial.runs], name)

    def _note_elided(self, node: cst.CSTNode) -> None:
        """With partial parsing, a function the CUDA side calls may be defined in lines left out
        (a `@triton.jit` kernel): the engine then parses those too (as _note_elided_callees)."""
        partial = self.ctx.partial
        if partial is None:
            return
        for call in _calls(node):
            root = _root(call.func)
            if root is not None and root not in self.definitions and root not in self.ctx.imports.names:
                self._ask_for_definition(root)

    def _ask_for_definition(self, name: str) -> bool:
        """The lines left out that define `name` as self.definitions would hold it (a function or
        class at any depth, a name assigned at module level) where that definition holds
        CUDA-only code; lines that only use the name (`value_states.contiguous()`: a local
        variable), or define something else, cannot change a verdict. Whether there are any."""
        partial = self.ctx.partial
        if partial is None or not self.names_matter:
            return False
        known = self._definitions_asked.get(name)
        if known is not None:
            return known
        self._definitions_asked[name] = False
        found = False
        for start, end, indent in self._elided_definitions().get(name, ()):
            for node in _definitions_in(partial.statements_of((start, end)), name, not indent):
                first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", ())])
                words = words_of("".join(partial.lines[first - 1:node.end_lineno]))
                if any(self._cuda_word(w) for w in words):
                    # its own lines, not the whole run (a 370-line run of mamba's module-level
                    # code for `is_fast_path_available = ...`), and the imports left out when
                    # it uses a name they bind (as _cuda_only_name would ask once it is parsed)
                    self.ctx.partial_lines.add((first - 1, node.end_lineno or first))
                    elided = self._elided_imports()
                    if any(w.decode("utf-8", "replace") in elided for w in words):
                        self.ctx.partial_misses.add("import")
                    found = True
                    break
        self._definitions_asked[name] = found
        return found

    def _function_of(self, node: cst.CSTNode) -> Optional[cst.FunctionDef]:
        parent = self.parent.get(id(node))
        while parent is not None and not isinstance(parent, cst.FunctionDef):
            parent = self.parent.get(id(parent))
        return parent

    def _returned(self, ret: cst.Return, negative: bool, depth: int, seen: Set[int],
                  test: cst.CSTNode) -> Optional[Tuple[str, str]]:
        """A device test returned by a function: the function is a predicate; it stays CUDA when
        the function is named for a library, the test names one, or a caller in the module uses
        the result as such a gate."""
        named = self._names_library(test)
        if named is not None:
            return ("gate", named)
        return self._predicate(ret, negative, depth, seen)

    def _predicate(self, node: cst.CSTNode, negative: bool, depth: int, seen: Set[int]) -> Optional[Tuple[str, str]]:
        """The function holding `node` answers the device test (its result is True on CUDA, or
        False when `negative`): named for a library, or tested so by a caller in the module."""
        function = self._function_of(node)
        if function is None:
            return None
        name = function.name.value
        if self._library_word(name):
            return ("gate", f"it is the result of `{name}()`, named for a CUDA-only library")
        self._ask_for_uses(name)
        for call in self._calls_of(name):
            verdict = self._judge(call, negative, depth + 1, seen)
            if verdict is not None:
                return verdict[0], f"it is the result of `{name}()`, where {verdict[1]}"
        return None

    def _calls_of(self, name: str) -> Iterator[cst.Call]:
        work.count("walk")
        for n, path in _paths(self.ctx.module, in_file_order=False):
            if isinstance(n, cst.Call) and (
                    (isinstance(n.func, cst.Name) and n.func.value == name)
                    or (isinstance(n.func, cst.Attribute) and n.func.attr.value == name)):
                self._record(path)
                yield n

    def _variable(self, assign: cst.CSTNode, name: str, negative: bool, depth: int,
                  seen: Set[int]) -> Optional[Tuple[str, str]]:
        """A device test kept in a variable: the tests that read it decide (in the same function,
        or the module for a module-level variable)."""
        function = self._function_of(assign)
        scope: cst.CSTNode = function or self.ctx.module
        partial = self.ctx.partial
        if partial is not None and function is not None:
            # its readers left out of the function (`return supported`), whatever they hold
            self.ctx.partial_lines.update(partial.elided_in(function.body, name))
        elif partial is not None and partial.elided_word(name):
            self.ctx.partial_misses.add(name)
        if function is None:
            work.count("walk")
        for ref in self._uses(scope, name):
            if self._is_target(ref):
                continue
            verdict = self._judge(ref, negative, depth + 1, seen)
            if verdict is not None:
                return verdict
        return None

    def _stays_cuda(self, qual: str) -> bool:
        """Whether the torch pass leaves the torch.cuda name `qual` as it is: no rewrite, or one
        into a name the target lacks (NPU320: composer's `torch.cuda.memory._record_memory_history`),
        or a member with no NPU twin (NPU301: `torch.cuda._memory_viz`)."""
        if any(qual == m or qual.startswith(m + ".") for m in _kept_cuda_members(self.ctx)):
            return True
        hit = self.ctx.rules.rewrite_api(qual)
        if hit is None:
            return False  # (not device code the rules know: nothing said of it)
        prefix, to, _rule = hit
        return prefix != to and self.ctx.options.targets.torch.missing(to + qual[len(prefix):]) is not None

    def _flag_cleared(self, statement: cst.CSTNode, negative: bool, depth: int,
                      seen: Set[int]) -> Optional[Tuple[str, str]]:
        """A device test whose other side clears a flag of the instance (composer 0.32.1's
        OOMObserver/MemorySnapshot: `if model_device.type not in ('cuda', 'meta'): warnings.warn(
        ...); self._enabled = False`), whose readers then open torch.cuda calls the torch pass
        leaves as they are (`torch.cuda.memory._record_memory_history`): moved, the callback
        stayed enabled on the NPU and called them (AttributeError); kept, it disables itself
        there as it did unmigrated."""
        if not isinstance(statement, cst.If):
            return None
        side = statement.body if negative else statement.orelse
        if side is None or isinstance(side, cst.If):
            return None
        suite = side.body if isinstance(side, cst.Else) else side
        flags = [flag for small in suite_small_statements(suite)
                 if isinstance(small, cst.Assign) and isinstance(small.value, cst.Name) and small.value.value == "False"
                 for flag in map(self_attribute, (t.target for t in small.targets)) if flag is not None]
        if not flags or not compiled(_TORCH_CUDA_CALL_RE).search(self.ctx.text):
            return None
        owner = self._enclosing_class(statement)
        if owner is None:
            return None
        partial = self.ctx.partial
        if partial is not None:
            # the class's lines left out that read a flag (not those that only assign it: the
            # readers decide) or call a torch.cuda name: parsed too, then judged as a whole parse
            # is (not a line where "cuda" is a word of a docstring, nor `self.X = cfg.get(...)`:
            # torchtune 0.6.1's recipes retried for those)
            words = {flag.encode() for flag in flags}
            reads, calls = compiled(_SELF_READ_RE), compiled(_TORCH_CUDA_CALL_RE)
            for run in self._runs_in(owner):
                if run in self.ctx.partial_lines:
                    continue
                run_words = self._words_of_run(run)
                if b"cuda" in run_words and calls.search(partial.text_of(run)) or (
                        not words.isdisjoint(run_words) and not set(flags).isdisjoint(reads.findall(partial.text_of(run)))):
                    self.ctx.partial_lines.add(run)
        self._flagged = True
        try:
            for flag in flags:
                verdict = self._instance_attribute(statement, flag, False, depth, seen, cleared=True)
                if verdict is not None:
                    return verdict
        finally:
            self._flagged = False
        return None

    def _instance_attribute(self, assign: cst.CSTNode, attribute: str, negative: bool, depth: int,
                            seen: Set[int], cleared: bool = False) -> Optional[Tuple[str, str]]:
        """A device test kept in an attribute of the instance (parlai 1.7.2's TreeSearch:
        `self.gpu_beam_blocking = gpu_beam_blocking and torch.cuda.is_available()`, then `if
        self.gpu_beam_blocking: ... NGramRepeatBlock()`, a module building a CUDA extension): the
        tests of the class's methods that read `self.<attribute>` decide, as a variable's readers
        do. Moved alone, the NPU would build and enter the CUDA-only code."""
        owner = self._enclosing_class(assign)
        if owner is None or not (cleared or self._names_code or self._elided_imports()):
            return None  # (no name of the file can be CUDA-only code: the class is not walked)
        partial = self.ctx.partial
        if partial is not None:
            # its readers left out of the class's methods, where they hold CUDA-only code
            for run in self._runs_in(owner):
                if run not in self.ctx.partial_lines:
                    words = self._words_of_run(run)
                    if attribute.encode() in words and any(self._cuda_word(w) for w in words):
                        self.ctx.partial_lines.add(run)
        work.count("walk")
        for n, path in _paths(owner):  # (below one: `self` and the name alone)
            if self_attribute(n) == attribute:
                self._record(path)
                parent = self.parent.get(id(n))
                if not (isinstance(parent, (cst.AssignTarget, cst.AnnAssign, cst.AugAssign))
                        and getattr(parent, "target", None) is n):
                    verdict = self._judge(n, negative, depth + 1, seen)
                    if verdict is not None:
                        kept = "cleared in" if cleared else "kept in"
                        return verdict[0], f"it is {kept} `self.{attribute}`, where {verdict[1]}"
        return None

    def _uses(self, scope: cst.CSTNode, name: str) -> Iterator[cst.Name]:
        """The references to `name` under `scope` (as _references reads them, in its order),
        their ancestors recorded."""
        for n, path in _paths(scope, _reference_children, in_file_order=False):
            if isinstance(n, cst.Name) and n.value == name:
                self._record(path)
                yield n

    def _argument(self, arg: cst.Arg, negative: bool, depth: int, seen: Set[int]) -> Optional[Tuple[str, str]]:
        """A device test passed to a function of the module (`try_gpu(index, query, is_cuda,
        gpus)`, by position or keyword): the tests that read its parameter there decide."""
        call = self.parent.get(id(arg))
        if not isinstance(call, cst.Call) or not isinstance(call.func, cst.Name) or arg.star:
            return None
        function = self.definitions.get(call.func.value)
        if not isinstance(function, cst.FunctionDef):
            return None
        params = function.params
        if arg.keyword is not None:
            name = arg.keyword.value
            if name not in {p.name.value for p in list(params.posonly_params) + list(params.params)
                            + list(params.kwonly_params)}:
                return None
        else:
            positional = []
            for a in call.args:
                if a.star:
                    return None  # (positions after a *args are unknown)
                if a is arg:
                    break
                if a.keyword is None:
                    positional.append(a)
            ordered = list(params.posonly_params) + list(params.params)
            if len(positional) >= len(ordered):
                return None
            name = ordered[len(positional)].name.value
        self.parent[id(function.body)] = function
        partial = self.ctx.partial
        if partial is not None:
            self.ctx.partial_lines.update(partial.elided_in(function.body, name))  # its readers left out
        for ref in self._uses(function.body, name):
            if self._is_target(ref):
                continue
            verdict = self._judge(ref, negative, depth + 1, seen)
            if verdict is not None:
                return verdict[0], f"it is passed to `{function.name.value}()`, where {verdict[1]}"
        return None

    def _is_target(self, name: cst.Name) -> bool:
        parent = self.parent.get(id(name))
        return isinstance(parent, (cst.AssignTarget, cst.AnnAssign)) and getattr(parent, "target", None) is name


def _builds_cuda(call: cst.Call) -> bool:
    """Whether a cpp_extension load()/load_inline() call is given CUDA sources (a `.cu`/`.cuh`
    file named in it, or load_inline's `cuda_sources=`), as project_values._builds_cuda."""
    if any(a.keyword is not None and a.keyword.value == "cuda_sources" for a in call.args):
        return True
    return any((string_value(s) or "").endswith((".cu", ".cuh")) for s in _strings_in(call))


def _strings_in(node: cst.CSTNode) -> Iterator[cst.SimpleString]:
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.SimpleString):
            yield n
        else:
            stack.extend(code_children(n))


def _tested_tensor(node: cst.CSTNode) -> Optional[str]:
    """The variable whose device `node` tests: `x.is_cuda`, `x.device.type == "cuda"` -> x."""
    if isinstance(node, cst.Attribute) and node.attr.value == "is_cuda":
        return node.value.value if isinstance(node.value, cst.Name) else None
    if isinstance(node, cst.Comparison):
        for operand in [node.left] + [t.comparator for t in node.comparisons]:
            if (isinstance(operand, cst.Attribute) and operand.attr.value == "type"
                    and isinstance(operand.value, cst.Attribute) and operand.value.attr.value == "device"
                    and isinstance(operand.value.value, cst.Name)):
                return operand.value.value.value
    return None


def _module_file(place: str) -> str:
    """The file of the module in `place` ("<module path>/<name>"), as a finding names it."""
    return place.rsplit("/", 2)[-2] + ".py"


_CUDA_KERNEL_RE = r"(?i)\bcuda kernels?\b"
# The same, led by its letters (a leading `\\b` makes Python's regex engine try every position of a
# whole file: 7.8 -> ~1 ms on modeling_utils.py); _starts_word checks the start
_CUDA_KERNEL_TEXT_RE = r"(?i)cuda kernels?(?!\w)"


def _starts_word(pattern: "re.Pattern[str]", text: str) -> bool:
    """Whether `pattern` matches in `text` at the start of a word (as a leading `\\b` would)."""
    for found in pattern.finditer(text):
        start = found.start()
        if start == 0 or not (text[start - 1].isalnum() or text[start - 1] == "_"):
            return True
    return False


# The characters outside ASCII that `(?i)` takes for an ASCII letter, or whose lower case holds
# one: `İ` (lower: `i` and a combining dot), `ı`, `ſ` (an `s`), the Kelvin sign (a `k`).
# tests/test_guards.py computes them over every code point.
_ASCII_IN_ANY_CASE = "\u0130\u0131\u017f\u212a"


def _in_any_case(words: Iterable[str], text: str) -> bool:
    """Whether one of `words` is in `text` in any case: `re.search("(?i)w1|w2|...", text)`. With
    ASCII words, the text is lower-cased once and each word looked for in it (the
    case-insensitive alternation tried every position of the file: py-spy 2.2% of transformers'
    CPU): the same answer wherever the text holds none of _ASCII_IN_ANY_CASE (a run of ASCII
    letters lowers to one of the same length, and nothing else lowers to ASCII); a text that
    holds one takes the search (`ſ` is an `s` to it). (Non-ASCII text took the search too: a
    third of transformers' files that the analysis reaches, ~3 ms each.)"""
    words = list(words)
    if all(w.isascii() for w in words) and (text.isascii() or not any(c in text for c in _ASCII_IN_ANY_CASE)):
        lowered = text.lower()
        return any(w.lower() in lowered for w in words)
    return re.search("(?i)" + "|".join(re.escape(w) for w in words), text) is not None


def _defined_names(text: str) -> Set[str]:
    """The names `def name` and `class name` define in `text`: `re.findall(r"\\b(?:def|class)\\s+(NAME)")`,
    searched from their letters (a leading `\\b` makes the regex engine try every position: 19 ->
    4 ms on modeling_utils.py), each match checked to start a word (else looked for again from
    its next character: `auto_class` then `def f` on the next line holds `def f`)."""
    return {match.group(1) for match in matches_at_word_start(compiled(_DEFINED_RE), text)}


def _written(text: str, names: Set[str], after: str, words: Optional[AbstractSet[bytes]] = None) -> bool:
    """Whether one of `names` is written in `text` as a word followed by `after` (`\\s*\\(`: a
    call; `(?!\\w)`). One search for all of them, starting with their letters (a leading `\\b` makes
    Python's regex engine try every position: 90 ms on modeling_utils.py for 16 names).
    `words`: words.words_of(text), when the caller has it: a name written so (a run of ASCII
    letters, digits and `_` with no such character before it or after it) is one of them, so
    where none is, the text is not searched (transformers' device-test files: ~1 ms each)."""
    if not names or (words is not None and _all_words(names) and not any(name.encode() in words for name in names)):
        return False
    for found in re.finditer(r"(?:%s)%s" % ("|".join(map(re.escape, sorted(names))), after), text):
        start = found.start()
        if start == 0 or not (text[start - 1].isalnum() or text[start - 1] == "_"):
            return True
    return False
# Where an import statement can start in a run of lines left out (as partial._IMPORT_START)
# What may define a name in lines left out (_DeviceGates._elided_definitions): a function or a
# class at any depth; at module level, an assignment (`a = b = ...`, `x = 1; name = ...`)
_DEFINED_RE = r"(?:def|class)\s+([A-Za-z_][A-Za-z0-9_]*)"  # (a word before: _defined_names)
_ASSIGNED_RE = r"(?m)(?:^|[;=][ \t]*)([A-Za-z_][A-Za-z0-9_]*)[ \t]*=(?!=)"
_IMPORT_TEXT_RE = r"(?m)(?:^|[;:])[ \t\f]*(?:import|from)\b"


def _texts(node: cst.CSTNode) -> Iterator[str]:
    """The text of the string literals in `node` (an error message), f-strings' too."""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.SimpleString):
            yield n.value
        elif isinstance(n, cst.FormattedStringText):
            yield n.value
        stack.extend(code_children(n))


_MATCH_CASE = getattr(ast, "match_case", ast.stmt)  # Python >= 3.10


def _self_assigned(statements: List[ast.stmt]) -> Set[str]:
    """The attributes of `self` that `statements` (Python's tree of lines left out) assign a value
    other than None (`self.x = f()`, `self.x: T = v`, `self.x += 1`; not `self.x = None`)."""
    found: Set[str] = set()
    targets: List[ast.expr]
    value: Optional[ast.expr]
    for node in (n for s in statements for n in ast.walk(s)):
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets, value = [node.target], node.value
        else:
            continue
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(value, ast.Constant) and value.value is None:
            continue
        for target in targets:
            for t in ast.walk(target):
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                    found.add(t.attr)
    return found


def _statements_in(statements: List[ast.stmt]) -> Iterator[ast.AST]:
    """Every statement in `statements` (Python's ast) and in their blocks, at any depth (imports
    are statements: no expression is entered)."""
    todo: List[ast.AST] = list(statements)
    while todo:
        node = todo.pop()
        yield node
        for field in ("body", "orelse", "handlers", "finalbody", "cases"):
            for child in getattr(node, field, None) or ():
                if isinstance(child, (ast.stmt, ast.excepthandler, _MATCH_CASE)):
                    todo.append(child)


def _definitions_in(statements: List[ast.stmt], name: str, module_level: bool) -> Iterator[ast.stmt]:
    """The functions and classes named `name` in `statements` (Python's ast), at any depth, and
    when they are at module level the assignments of `name` (`name = ...`)."""
    todo: List[Tuple[ast.AST, bool]] = [(s, module_level) for s in statements]
    while todo:
        node, top = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            yield node
        elif top and isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            yield node
        for field in ("body", "orelse", "handlers", "finalbody", "cases"):
            for child in getattr(node, field, None) or ():
                if isinstance(child, (ast.stmt, ast.excepthandler, _MATCH_CASE)):
                    todo.append((child, False))


_CUDA_VERSION_FACTS = {"torch.version.cuda", "torch.version.hip"}
_CUDA_VERSION_RE = r"version\.(?:cuda|hip)\b"  # the text test (most files never read them)


def keep_is_available_over_cuda_versions(ctx: Context) -> None:
    """`if torch.cuda.is_available(): ... torch.version.cuda ... torch.version.hip ...`: the
    branch reads the CUDA or ROCm version, both None with torch_npu (NPU311 is reported where they
    are read). As `torch.npu.is_available()` the NPU would enter a branch written for a CUDA or
    ROCm build, where the None fails (SpeechBrain's get_environment_description(), which every
    experiment calls: `"ROCm version:\\n" + torch.version.hip`, a TypeError). The test stays: False
    on the NPU, which takes the other branch, as it did before the migration."""
    if "is_available" not in ctx.text or not compiled(_CUDA_VERSION_RE).search(ctx.text):
        return
    resolve = ctx.imports.resolve
    stack: List[cst.CSTNode] = [ctx.module]
    while stack:
        node = stack.pop()
        stack.extend(code_children(node))
        if not isinstance(node, cst.If):
            continue
        tests = [n for n in subtree(node.test)
                 if isinstance(n, cst.Call) and resolve(n.func) == "torch.cuda.is_available"]
        if tests and any(isinstance(n, cst.Attribute) and resolve(n) in _CUDA_VERSION_FACTS
                         for n in subtree(node.body)):
            for call in tests:
                ctx.keep(call)


# ----------------------------------------------------------------------------- CUDA interop


@applies("finding:guard")
def keep_cuda_interop(ctx: Context) -> None:
    """A function that hands torch's CUDA handles to a library working on CUDA's raw streams,
    pointers and devices (cupy, pycuda, numba.cuda, RMM: the NPU319 rule's `words`) cannot run
    on the NPU. pytorch-pfn-extras' cupy allocator callbacks compare
    `torch.cuda.current_stream().cuda_stream` with cupy's stream and allocate with
    `torch.cuda.caching_allocator_alloc`: rewritten, `torch.npu.current_stream().cuda_stream`
    met cupy (an NPU stream has no such attribute) -- half-migrated code. Such a function is left
    whole and reported (NPU319) where it would have changed: one that uses the library outside
    any test (at its top level, in `with`/`for`/`while`/`try` blocks: not behind an `if`, which
    may be the library's own availability test with the NPU's path beside it), or one the module
    gives to such a library by name (a callback)."""
    rule = next((r for r in ctx.rules.findings.get("guard", ()) if r.from_ == "cuda-interop"), None)
    if rule is None:
        return
    libraries = FindingSpec.of(rule).words
    if not _may_be_written(ctx, {library.split(".")[0] for library in libraries}):
        return
    local = {name for name, qual in ctx.imports.names.items() if _interop_module(qual, libraries)}
    if ctx.partial is not None:
        # their uses in lines left out decide too: the engine parses those lines as well
        ctx.partial_misses.update(name for name in local | {lib.split(".")[0] for lib in libraries}
                                  if ctx.partial.elided_word(name))
    resolve = ctx.imports.resolve
    functions: Dict[str, cst.FunctionDef] = {}
    for statement in ctx.module.body:
        if isinstance(statement, cst.FunctionDef):
            functions[statement.name.value] = statement
    # id of the code kept -> (it, where reported, api, detail)
    interop: Dict[int, Tuple[cst.CSTNode, cst.CSTNode, str, str]] = {}
    for node in subtree(ctx.module):
        if isinstance(node, cst.FunctionDef):
            used = _uses_unconditionally(node.body, local, libraries, ctx.imports.names)
            if used is not None:
                interop.setdefault(id(node), (node, node.name, node.name.value, f"it uses {used} outside any test"))
        elif isinstance(node, cst.If):
            # OpenNMT-py sru.py load_sru_mod: `if check_sru_requirement(): from cupy.cuda import
            # function ... torch.device("cuda") ... torch.cuda.current_stream().cuda_stream`
            for branch in (node.body, node.orelse.body if isinstance(node.orelse, cst.Else) else None):
                used = _uses_unconditionally(branch, local, libraries, ctx.imports.names) if branch else None
                if branch is not None and used is not None:
                    api = f"if {ctx.code_for(node.test)}" + (":" if branch is node.body else ": ... else:")
                    interop.setdefault(id(branch), (branch, node.test, api, f"its branch uses {used}"))
        elif isinstance(node, cst.Call) and local and _root(node.func) in local:
            for arg in node.args:
                function = functions.get(arg.value.value) if isinstance(arg.value, cst.Name) else None
                if function is not None:
                    interop.setdefault(id(function), (function, function.name, function.name.value,
                                                      f"it is given to `{get_full_name_for_node(node.func)}`"))
    for code, where, api, detail in interop.values():
        if id(code) in ctx.kept or not _names_cuda(code, local, resolve):
            continue
        ctx.keep(code)
        ctx.finding(rule, where, api=api, message=rule.render_message(api=api, detail=detail),
                    suggestion=rule.render_suggestion(api=api, detail=detail))


def _may_be_written(ctx: Context, roots: Set[str]) -> bool:
    """Whether one of `roots` (first parts of module names) is in the text: a substring of it,
    as the check was written; from the words of the text (words.words_of) where the engine made
    them. Every way keep_cuda_interop finds a library goes through a name of it written in the
    code -- an import of `cupy` or `numba.cuda`, a dotted name one of whose parts is the root --
    and such a part is a word of the text; with none of the roots a word, it finds nothing (and
    the lines left out hold none of them either: PartialText.elided_word). Five substring
    searches of every file the torch pass looked at took ~1% of transformers' CPU."""
    words = getattr(ctx.code, "text_words", None)
    if words is None or not _all_words(roots):
        return any(root in ctx.text for root in roots)
    return any(root.encode() in words for root in roots)


def _all_words(names: Iterable[str]) -> bool:
    """Whether each of `names` is one word as words.words_of makes them (ASCII letters, digits
    and `_`): then where it is written as a name, it is one of the words of the text."""
    return all(words_of(name) == {name.encode()} for name in names)


def _interop_module(qual: str, libraries: Iterable[str]) -> bool:
    """`cupy`, `numba.cuda`, and a re-export of one (ppe's `from pytorch_pfn_extras._cupy import cupy`)."""
    return any(qual == m or qual.startswith(m + ".") or (
        "." not in m and m in qual.split(".")[1:] and m != "cuda") for m in libraries)


def _uses_unconditionally(block: cst.BaseSuite, local: Set[str], libraries: Iterable[str],
                          names: Dict[str, str]) -> Optional[str]:
    """What of the libraries the block uses outside an `if` (and outside the functions and
    classes defined in it): a name of `local` (bound by the module's imports: `names`), or an
    import of one in the block itself (`from cupy.cuda import function`)."""
    stack: List[cst.CSTNode] = [block]
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.If, cst.IfExp, cst.FunctionDef, cst.ClassDef, cst.Lambda, cst.BooleanOperation)):
            continue
        if isinstance(node, cst.Name) and node.value in local:
            qual = names[node.value]
            return f"`{node.value}` from {qual[:-len(node.value) - 1]}" if qual.endswith("." + node.value) else f"`{qual}`"
        if isinstance(node, (cst.Import, cst.ImportFrom)):
            modules = [dotted_name(a.name) or "" for a in node.names] if isinstance(node, cst.Import) else (
                [dotted_name(node)] if node.relative == () else [])
            found = next((m for m in modules if m and _interop_module(m, libraries)), None)
            if found is not None:
                return f"`{found}`"
            continue
        if isinstance(node, cst.Attribute):
            stack.append(node.value)  # (`torch.cuda`'s `cuda` is no use of a name `cuda`)
            continue
        stack.extend(reversed(code_children(node)))
    return None


def _names_cuda(code: cst.CSTNode, local: Set[str], resolve) -> bool:
    """Whether the torch pass would change something in `code`: a `torch.cuda` name, a
    `.cuda()`/`.is_cuda` of a tensor, a "cuda" device string."""
    for node in subtree(code):
        if isinstance(node, cst.Attribute):
            qual = resolve(node)
            if qual is not None and (qual == "torch.cuda" or qual.startswith("torch.cuda.")):
                return True
            if node.attr.value in ("cuda", "is_cuda") and _root(node.value) not in local:
                return True
        elif isinstance(node, cst.SimpleString) and _is_cuda_string(node):
            return True
    return False


# ----------------------------------------------------------------------------- gloo on the NPU

# Collectives of tensors (and DDP, which all-reduces gradients): on NPU tensors they need hccl.
_COLLECTIVES = {"all_reduce", "all_gather", "all_gather_into_tensor", "broadcast", "reduce", "reduce_scatter",
                "reduce_scatter_tensor", "all_to_all", "all_to_all_single", "scatter", "gather"}
_DDP = "torch.nn.parallel.DistributedDataParallel"
_NPU_WORD_RE = r"\bnpu\b"  # `torch.npu.x`, `"npu:0"`, `.npu()`: an edit that moves to the NPU


@applies("finding:guard")
def report_gloo_for_device_tensors(ctx: Context) -> None:
    """The default process group is made with "gloo" (`init_process_group("gloo")`, through a
    variable assigned only "gloo", or an argparse option whose default is "gloo" and whose
    value it is given: cleanrl's ppo_atari_multigpu `--backend` default "gloo") in a file whose
    tensors the migration moves to the NPU and that runs collectives on them (dist.all_reduce,
    DDP). On CUDA, gloo reduces CUDA tensors; it has no NPU collectives, so on the NPU those
    calls fail. Not rewritten: "gloo" is also how the same script runs on the CPU, where hccl
    cannot; reported at the value (NPU325), after the pass's rewrites (their edits say
    whether the file moves something to the NPU). `new_group(backend="gloo")` (a CPU group
    beside the default one) is not this."""
    if "gloo" not in ctx.text or not any(compiled(_NPU_WORD_RE).search(after) for after in ctx.edited_to()):
        return  # (a backend's edit, "nccl" -> "hccl", moves no tensor)
    rule = next((r for r in ctx.rules.findings.get("guard", ()) if r.from_ == "gloo-device-collectives"), None)
    if rule is None:
        return
    partial = ctx.partial
    resolve = ctx.imports.resolve
    inits: List[cst.Call] = []
    collective: Optional[str] = None
    options: Dict[str, cst.BaseExpression] = {}  # option name -> its default
    assigned: Dict[str, List[cst.BaseExpression]] = {}  # variable -> its values
    without_npu: Set[int] = set()  # the calls of a side that runs only where there is no NPU
    for node in subtree(ctx.module):
        if isinstance(node, cst.Call):
            qual = resolve(node.func) or ""
            if qual == "torch.distributed.init_process_group":
                if id(node) not in without_npu:
                    inits.append(node)
            elif collective is None and (qual == _DDP or (qual.startswith("torch.distributed.")
                                                           and qual.rsplit(".", 1)[-1] in _COLLECTIVES)):
                collective = qual
            elif isinstance(node.func, cst.Attribute) and node.func.attr.value == "add_argument":
                default = next((a.value for a in node.args if a.keyword is not None and a.keyword.value == "default"), None)
                if default is not None:
                    for name in option_names(node):
                        options[name] = default
        elif isinstance(node, cst.Assign):
            for target in node.targets:
                if isinstance(target.target, cst.Name):
                    assigned.setdefault(target.target.value, []).append(node.value)
        elif isinstance(node, cst.If):
            side = _side_without_the_device(ctx, node)
            if side is not None:
                without_npu.update(id(n) for n in subtree(side) if isinstance(n, cst.Call))
    if not inits and partial is not None and partial.elided_word("init_process_group"):
        ctx.partial_misses.add("init_process_group")  # (`init_process_group(backend)`: no "gloo" there)
    found: List[cst.SimpleString] = []
    for init in inits:
        arg = next((a for a in init.args if a.keyword is not None and a.keyword.value == "backend"), None)
        if arg is None:
            arg = next((a for a in init.args if a.keyword is None and not a.star), None)
        value = arg.value if arg is not None else None
        key = value.value if isinstance(value, cst.Name) else value.attr.value if isinstance(value, cst.Attribute) else None
        if key is not None and partial is not None and partial.elided_word(key):
            ctx.partial_misses.add(key)  # its assignment or option may be in lines left out
        if isinstance(value, cst.Name):
            values = assigned.get(value.value, [])
            value = values[0] if values and all(_is_gloo(v) for v in values) else None
        elif isinstance(value, cst.Attribute):
            value = options.get(value.attr.value)  # `args.backend` of `--backend`
        if isinstance(value, cst.SimpleString) and _is_gloo(value):
            found.append(value)
    if found and collective is None and partial is not None:
        # the collectives may be in lines left out
        ctx.partial_misses.update(w for w in ("DistributedDataParallel", *_COLLECTIVES) if partial.elided_word(w))
    if collective is None:
        return
    for gloo in found:
        if ctx.suppressed(gloo, rule.code):
            continue
        api = ctx.code_for(gloo)
        detail = f"`{collective.rsplit('.', 1)[-1]}` of tensors the migration puts on the NPU"
        ctx.finding(rule, gloo, api=api, message=rule.render_message(api=api, detail=detail),
                    suggestion=rule.render_suggestion(api=api, detail=detail))


def _side_without_the_device(ctx: Context, node: cst.If) -> Optional[cst.CSTNode]:
    """The side of `if torch.cuda.is_available(): ... else: ...` (or of `if not ...:`) that runs
    where there is no CUDA device, when the test moves to the NPU's: then it runs only where there
    is no NPU either (peft 0.21.2 tests/test_gpu_examples.py:6767 `_setup_dist`: "nccl", which
    becomes "hccl", on the device, "gloo" on the CPU)."""
    test, negative = node.test, False
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test, negative = test.expression, True
    if not (isinstance(test, cst.Call) and ctx.imports.resolve(test.func) == "torch.cuda.is_available") \
            or id(test) in ctx.kept:
        return None
    return node.body if negative else node.orelse


def _is_gloo(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.SimpleString) and (string_value(node) or "").lower() == "gloo"


# HCCL's reductions whose data types exclude float64 on Atlas training, A2 and A3 products (CANN 8.5
# HCCL API reference: HcclAllReduce, hcclcpp_07_0020; HcclReduceScatter, hcclcpp_07_0024: int8, int16,
# int32, int64, float16, float32, bfp16 on A2/A3; int8, int32, int64, float16, float32 on Atlas
# training; float64 only on the Atlas 350 card, within a node): the torch.distributed calls that run them.
_HCCL_REDUCTIONS = {"torch.distributed.all_reduce", "torch.distributed.reduce_scatter",
                    "torch.distributed.reduce_scatter_tensor"}
_FLOAT64 = {"torch.float64", "torch.double"}
_MOVES = {"cuda", "npu", "to"}  # `torch.tensor(..., dtype=torch.float64).cuda()`


@emits("NPU306")
def report_float64_reductions(ctx: Context) -> None:
    """A float64 tensor made on the device and reduced across ranks (the torchvision reference
    scripts' SmoothedValue, copied into torchdistill misc/log.py:281 and LAVIS common/logger.py:43:
    `t = torch.tensor([self.count, self.total], dtype=torch.float64, device="cuda")` then
    `dist.all_reduce(t)`): NCCL reduces float64, HCCL's AllReduce and ReduceScatter do not on
    Atlas training, A2 and A3 products (_HCCL_REDUCTIONS). Reported at the reduction (NPU306,
    warning), in a file the migration moves to the NPU; the dtype is the user's choice (float32
    loses integer counts past 2**24), so nothing is rewritten. Read in source order within each
    function: the variable's latest assignment before the call decides."""
    # (a reduction of _HCCL_REDUCTIONS is named in the text, through any import: `all_reduce`,
    # `reduce_scatter`; so is any that lines left out may hold: einops' `reduce` is none)
    if "float64" not in ctx.text and "double" not in ctx.text or (
            "all_reduce" not in ctx.text and "reduce_scatter" not in ctx.text):
        return
    if not any(compiled(_NPU_WORD_RE).search(after) for after in ctx.edited_to()):
        return
    rule = next((r for r in ctx.rules.findings.get("guard", ()) if r.from_ == "float64-reduction"), None)
    if rule is None:
        return
    resolve = ctx.imports.resolve
    float64: Set[str] = set()  # the variables holding a float64 device tensor
    made_any = reduced = False
    for node in _in_order(ctx.module):
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            float64 = set()  # (a function's variables are its own; a nested one resets what is known: conservative)
        elif isinstance(node, cst.Assign):
            made = _float64_on_device(node.value, resolve)
            made_any = made_any or made
            for target in node.targets:
                if isinstance(target.target, cst.Name):
                    if made:
                        float64.add(target.target.value)
                    else:
                        float64.discard(target.target.value)
        elif isinstance(node, cst.Call) and (resolve(node.func) or "") in _HCCL_REDUCTIONS:
            reduced = True
            arg = next((a.value for a in node.args if a.keyword is None and not a.star), None) \
                or next((a.value for a in node.args if a.keyword is not None and a.keyword.value in ("tensor", "input")), None)
            held = arg.value in float64 if isinstance(arg, cst.Name) else (
                arg is not None and _float64_on_device(arg, resolve))
            if not held or ctx.suppressed(node, rule.code):
                continue
            if isinstance(arg, cst.Name) and ctx.partial is not None and ctx.partial.elided_word(arg.value):
                ctx.partial_misses.add(arg.value)  # assigned again in lines left out, maybe: parse them too
                continue
            api = resolve(node.func) or ctx.code_for(node.func)
            detail = "a float64 tensor made on the device"
            ctx.finding(rule, node, api=api, message=rule.render_message(api=api, detail=detail),
                        suggestion=rule.render_suggestion(api=api, detail=detail))
    partial = ctx.partial
    if made_any and not reduced and partial is not None:  # the reduction may be in lines left out
        ctx.partial_misses.update(w for w in ("all_reduce", "reduce_scatter", "reduce_scatter_tensor")
                                  if partial.elided_word(w))


def _float64_on_device(value: cst.BaseExpression, resolve) -> bool:
    """`torch.tensor([...], dtype=torch.float64, device=...)`, `torch.zeros(2, dtype=torch.double).cuda()`."""
    moved = False
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in _MOVES \
            and isinstance(value.func.value, cst.Call):
        moved, value = True, value.func.value
    if not isinstance(value, cst.Call) or not (resolve(value.func) or "").startswith("torch."):
        return False
    keywords = {a.keyword.value: a.value for a in value.args if a.keyword is not None}
    dtype = keywords.get("dtype")
    return dtype is not None and (resolve(dtype) or "") in _FLOAT64 and (moved or "device" in keywords)


def _in_order(root: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """The nodes under `root` in source order (a statement before the next one's)."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(code_children(node)))


# CUDA statements harmless on an Ascend machine, by the NPU statement their rewrite is:
# `torch.cuda.manual_seed(_all)(s)` is queued until CUDA initializes, which it never does there
# (torch/cuda/random.py: "safe to call this function if CUDA is not available"); an environment
# variable named for CUDA is read by nothing there. (`torch.cuda.set_device` is not: it raises
# without CUDA.)
_HARMLESS_CUDA_CALLS = {"torch.cuda.manual_seed": "npu.manual_seed", "torch.cuda.manual_seed_all": "npu.manual_seed_all"}
_NPU_CALLS = {f"{prefix}.{name}": f"npu.{name}" for prefix in ("torch.npu", "torch_npu.npu")
              for name in ("manual_seed", "manual_seed_all")}


def twins_possible(ctx: Context) -> bool:
    """The text test for keep_cuda_beside_its_rewrite: the file names an env rule's target (or
    an NPU seed call) at all."""
    return "npu.manual_seed" in ctx.text or any(rule.to in ctx.text for rule in ctx.rules.env.values())


def keep_cuda_beside_its_rewrite(ctx: Context, block: Any, resolve) -> None:
    """A CUDA statement whose rewrite the same block already has (mindone 0.5.0 comfyui/main.py:
    `os.environ["CUDA_VISIBLE_DEVICES"] = str(args.cuda_device)` beside
    `os.environ["ASCEND_RT_VISIBLE_DEVICES"] = str(args.cuda_device)`; `torch.cuda.manual_seed_all(s)`
    beside `torch.npu.manual_seed_all(s)`) is code that supports the NPU already: rewritten, the
    block made the same statement twice. It stays as it is, where it is harmless on the NPU: an
    `os.environ[...] =` of a CUDA variable, a CUDA seed call (_HARMLESS_CUDA_CALLS). Same target,
    same value compared as code (not as text), and no name the value reads is bound between the
    two statements. Not reported: the code runs on the NPU as it is. `block`: the Module or an
    IndentedBlock (partial parsing: the runs left out of it that name the twin are asked for)."""
    body: Sequence[cst.BaseStatement] = block.body
    keys: List[Optional[Tuple[str, str, str]]] = [None] * len(body)
    migrated: List[Optional[Tuple[str, str, str]]] = [None] * len(body)
    envs = ctx.rules.env
    for i, statement in enumerate(body):
        small = _only_small(statement)
        if isinstance(small, cst.Assign) and len(small.targets) == 1:
            # (a value is read as code, Python's parse of it, only for an `os.environ[...] =`)
            name = _environ_key(small.targets[0].target, resolve)
            value = _as_code(ctx, small.value) if name is not None else None
            if name is not None and value is not None:
                keys[i] = ("env", name, value)
                if name in envs:
                    migrated[i] = ("env", envs[name].to, value)
        elif isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            qual = resolve(small.value.func) or ""
            if qual not in _NPU_CALLS and qual not in _HARMLESS_CUDA_CALLS:
                continue  # (the arguments are read as code only for a seed call)
            arguments = _as_code(ctx, small.value.with_changes(func=cst.Name("f")))
            if arguments is not None and qual in _NPU_CALLS:
                keys[i] = ("call", _NPU_CALLS[qual], arguments)
            elif arguments is not None:
                migrated[i] = ("call", _HARMLESS_CUDA_CALLS[qual], arguments)
    for i, want in enumerate(migrated):
        if want is None:
            continue
        if ctx.partial is not None:  # a twin in lines left out: parsed in another attempt
            ctx.partial_lines.update(ctx.partial.elided_in(block, want[1].rsplit(".", 1)[-1]))
        for j, key in enumerate(keys):
            if key == want and not _binds_between(ctx, body, i, j, _small_reads(body[i])):
                ctx.keep(body[i])
                break
    if "npu.manual_seed" in ctx.text:
        _keep_cuda_seed_beside_npu_branch(ctx, body, resolve)


def _seed_calls(ctx: Context, block: cst.CSTNode, resolve, calls: Dict[str, str]) -> List[Tuple[cst.BaseStatement, Tuple[str, str]]]:
    """The statements of an `if`'s body that call one of `calls` (qualified name -> its NPU
    name), each with (that NPU name, its arguments as code)."""
    found = []
    for statement in getattr(block, "body", ()):
        small = _only_small(statement)
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            name = calls.get(resolve(small.value.func) or "")
            arguments = _as_code(ctx, small.value.with_changes(func=cst.Name("f"))) if name is not None else None
            if name is not None and arguments is not None:
                found.append((statement, (name, arguments)))
    return found


def _keep_cuda_seed_beside_npu_branch(ctx: Context, body: Sequence[cst.BaseStatement], resolve) -> None:
    """transformers 4.46.3 trainer_utils.py set_seed: `if is_torch_available(): ...
    torch.cuda.manual_seed_all(seed)` and, in a later `if is_torch_npu_available():`,
    `torch.npu.manual_seed_all(seed)`. The CUDA seed call's twin is not in its block but in the
    body of a sibling `if` that tests the NPU's availability (True wherever there is an NPU):
    the code seeds the NPU already, and rewritten the NPU was seeded twice. The CUDA call stays
    (harmless on the NPU: _HARMLESS_CUDA_CALLS), with the same arguments as code and no name
    they read bound in or between the two `if`s."""
    npu_arms = [i for i, statement in enumerate(body)
                if isinstance(statement, cst.If) and _tests_npu_availability(statement.test)]
    if not npu_arms:
        return
    twins = {key: i for i in npu_arms
             for _statement, key in _seed_calls(ctx, cst.ensure_type(body[i], cst.If).body, resolve, _NPU_CALLS)}
    if not twins:
        return
    for i, statement in enumerate(body):
        if not isinstance(statement, cst.If) or i in npu_arms:
            continue
        for call, key in _seed_calls(ctx, statement.body, resolve, _HARMLESS_CUDA_CALLS):
            j = twins.get(key)
            if j is None:
                continue
            reads = _small_reads(call)
            if not _binds_between(ctx, body, min(i, j) - 1, max(i, j) + 1, reads):
                ctx.keep(call)


def _only_small(statement: cst.BaseStatement) -> Optional[cst.BaseSmallStatement]:
    if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1:
        return statement.body[0]
    return None


def _environ_key(target: cst.BaseExpression, resolve) -> Optional[str]:
    """"X" of `os.environ["X"]` (the target of an assignment)."""
    if not (isinstance(target, cst.Subscript) and len(target.slice) == 1
            and isinstance(target.slice[0].slice, cst.Index) and resolve(target.value) == "os.environ"):
        return None
    return string_value(target.slice[0].slice.value)


def _as_code(ctx: Context, node: cst.BaseExpression) -> Optional[str]:
    """The expression as Python's own parser sees it: the same code whatever its quotes,
    spaces, parentheses or line breaks."""
    try:
        return ast.dump(ast.parse("(" + ctx.module.code_for_node(node) + "\n)", mode="eval"))
    except SyntaxError:
        return None


def _small_reads(statement: cst.BaseStatement) -> Set[str]:
    """The names a simple statement's value reads (`args` of `str(args.cuda_device)`)."""
    small = _only_small(statement)
    value = small.value if isinstance(small, (cst.Assign, cst.Expr)) else None
    return {n.value for n in subtree(value) if isinstance(n, cst.Name)} if value is not None else set()


def _binds_between(ctx: Context, body: Sequence[cst.BaseStatement], i: int, j: int, names: Set[str]) -> bool:
    """Whether a statement between body[i] and body[j] binds (or sets an attribute or item of)
    one of `names`: then the two statements' values may differ."""
    for statement in body[min(i, j) + 1:max(i, j)]:
        runs = ctx.partial.runs_among([statement]) if ctx.partial is not None else []
        try:  # (lines partial parsing left out: Python's statements of them)
            trees = [s for run in runs for s in ctx.partial.statements_of(run)] if runs and ctx.partial \
                else [ast.parse(textwrap.dedent(ctx.module.code_for_node(statement)))]
        except SyntaxError:
            return True
        for n in (n for tree in trees for n in ast.walk(tree)):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name in names:
                return True
            if isinstance(n, ast.alias) and (n.asname or n.name).split(".")[0] in names:
                return True
            if isinstance(n, (ast.Global, ast.Nonlocal)) and set(n.names) & names:
                return True
            if isinstance(getattr(n, "ctx", None), (ast.Store, ast.Del)):
                root = n
                while isinstance(root, (ast.Attribute, ast.Subscript)):
                    root = root.value
                if isinstance(root, ast.Name) and root.id in names:
                    return True
    return False
