"""Where a string literal is a device, beyond the argument positions of the device rules:
containers a device variable iterates over, pytest parameters named `device`, the returns of a
function that returns devices, conditional expressions that pick a device -- and where it is
not: the arguments of a library that is not torch (DALI's `device="gpu"`, cupy, TensorFlow,
JAX, numba...), whose device names are its own.

Pure functions over libcst nodes; codemods/torch/literals.py calls them from its leave_* methods.
"""

from __future__ import annotations

import re
from typing import Callable, Iterator, List, Optional, Set, Tuple

import libcst as cst

from ..fast_visitor import code_children, subtree
from .strings import string_value

Resolve = Callable[[cst.BaseExpression], Optional[str]]

# Libraries that take `device=` / device strings of their own: a device string passed to them is
# not torch's and stays (packages by their import name).
NON_TORCH_LIBRARIES = frozenset({
    "nvidia", "cupy", "cupyx", "tensorflow", "keras", "jax", "jaxlib", "flax", "numba", "pycuda",
    "tensorrt", "onnxruntime", "mxnet", "paddle", "mindspore", "cudf", "cuml", "cugraph", "cv2",
    "faiss", "spacy", "thinc", "xgboost", "lightgbm", "catboost", "sklearn", "tritonclient", "dali",
    "ctranslate2", "faster_whisper",  # CTranslate2: "cpu", "cuda", "auto" (NPU303 where it is built)
    "isaacgym", "isaacgymenvs",  # Isaac Gym's sim_device/rl_device/graphics_device_id (NPU303 at its import)
    "torchcule",  # NVIDIA CuLE's Atari environments: "cpu" or a CUDA device (NPU303 at its import)
})
# Values that name a device that is not CUDA: a function returning one of them returns devices.
OTHER_DEVICES = {"cpu", "mps", "xla", "meta", "npu", "xpu", "hpu", "ipu"}
PARAMETRIZE = {"pytest.mark.parametrize"}
# `cuda:0`, `cuda:{}`: with an index, a string is a device whatever it is passed to.
INDEXED_DEVICE_RE = re.compile(r"^cuda:(?:\d+|%d|%s|%i|\{\}|\{[A-Za-z_][A-Za-z0-9_.]*\}|\{\d+\})$")
# Tests that ask whether CUDA is there: what they guard is CUDA code (`return "cuda"`).
DEVICE_TESTS = {"torch.cuda.is_available", "torch.cuda.device_count", "torch.npu.is_available",
                "torch.npu.device_count"}


def is_foreign_callee(qual: Optional[str]) -> bool:
    """A call of a library that is not torch and has device names of its own."""
    return qual is not None and qual.split(".", 1)[0] in NON_TORCH_LIBRARIES


def is_indexed_device(node: cst.BaseExpression) -> bool:
    """`"cuda:0"`, `f"cuda:{rank}"`, `"cuda:%d" % i`: a device string by its form alone."""
    if isinstance(node, cst.SimpleString):
        value = string_value(node)
        return value is not None and bool(INDEXED_DEVICE_RE.match(value))
    if isinstance(node, cst.FormattedString):
        parts = node.parts
        return (len(parts) == 2 and isinstance(parts[0], cst.FormattedStringText) and parts[0].value == "cuda:"
                and isinstance(parts[1], cst.FormattedStringExpression))
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Modulo):
        return is_indexed_device(node.left)
    return False


def is_device_test(node: cst.BaseExpression, resolve: Resolve) -> bool:
    """A test that asks whether the code runs on CUDA: `x.is_cuda`, `torch.cuda.is_available()`,
    `torch.cuda.device_count() > 0` (also after migration: `is_npu`, `torch.npu...`)."""
    for n in subtree(node):
        if isinstance(n, cst.Attribute) and n.attr.value in ("is_cuda", "is_npu"):
            return True
        if isinstance(n, cst.Call) and resolve(n.func) in DEVICE_TESTS:
            return True
    return False


def names_a_device(node: Optional[cst.BaseExpression], resolve: Resolve) -> bool:
    """`"cpu"`, `"mps"`, `torch.device(...)`, `x.device`: an expression that is a device."""
    if node is None:
        return False
    if isinstance(node, cst.SimpleString):
        value = string_value(node)
        return value is not None and value.split(":", 1)[0] in OTHER_DEVICES
    if isinstance(node, cst.Call):
        return resolve(node.func) == "torch.device"
    if isinstance(node, cst.Attribute):
        return node.attr.value == "device"
    return False


def returns_devices(func: cst.FunctionDef, resolve: Resolve, device_name: "re.Pattern[str]") -> bool:
    """A function named like a device getter (`get_device`), or one of whose returns is a device
    that is not CUDA (`return "cpu"`, `return torch.device(...)`)."""
    if device_name.search(func.name.value) or func.name.value.endswith(("_device", "_devices")):
        return True
    return any(names_a_device(r.value, resolve) for r in _returns(func.body))


def parametrized_devices(call: cst.Call) -> Optional[Tuple[int, List[int], int]]:
    """For `pytest.mark.parametrize("dtype,device", [...])`: (index of the values argument,
    positions of the device-named parameters, number of parameters); None without any."""
    args = [a for a in call.args if a.star == ""]
    if len(args) < 2:
        return None
    names = string_value(args[0].value)
    if names is None:
        return None
    params = [n.strip() for n in names.split(",") if n.strip()]
    positions = [i for i, p in enumerate(params) if re.search(r"(?i)(?:^|_)devices?(?:$|_)|^dev$", p)]
    if not positions:
        return None
    return 1, positions, len(params)


def parametrize_elements(values: cst.BaseExpression, positions: List[int], count: int) -> Iterator[Tuple[int, int]]:
    """(element index, position) of each device value in the values list: the element itself
    for a single parameter, else the position in its tuple (also inside `pytest.param(...)`)."""
    if not isinstance(values, (cst.List, cst.Tuple)):
        return
    for i, el in enumerate(values.elements):
        if not isinstance(el, cst.Element):
            continue
        for pos in positions:
            yield i, pos


def _returns(body: cst.CSTNode) -> Iterator[cst.Return]:
    """The returns of a function body, not those of functions defined inside it."""
    stack: List[cst.CSTNode] = [body]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Return):
            yield n
        elif isinstance(n, (cst.FunctionDef, cst.Lambda, cst.ClassDef)) or isinstance(n, cst.BaseExpression):
            continue
        stack.extend(code_children(n))


def device_bodies(node: cst.If, resolve: Resolve) -> Set[int]:
    """Ids of the body of an `if` whose test asks for CUDA (not its else)."""
    return {id(node.body)} if is_device_test(node.test, resolve) else set()
