"""Which frameworks a file uses, and the names of framework APIs the passes resolve.

The lowest layer of the engine: the prefilter, partial parsing, the engine and the passes all
read these tables, and this module imports nothing of theirs.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, AbstractSet, Callable, List, Optional, Sequence

if TYPE_CHECKING:  # pragma: no cover
    from .imports import ImportTable

# Imported module (or package) -> the framework it means. Standalone Keras and Horovod's
# TensorFlow bindings are TensorFlow code: their files get the TensorFlow rules (and findings).
FRAMEWORK_IMPORTS = (
    ("torch", "torch"),
    ("tensorflow", "tensorflow"),
    ("keras", "tensorflow"),
    ("horovod.tensorflow", "tensorflow"),
    ("horovod.keras", "tensorflow"),
    ("mindspore", "mindspore"),
    # PyTorch's API written on MindSpore (mindnlp's mindtorch, MSAdapter): its code runs on
    # MindSpore, whose Ascend backend it targets itself (mindtorch maps "cuda" to the NPU);
    # the PyTorch pass would rename its own `def cuda(self)` and its device tests.
    ("mindtorch", "mindspore"),
    ("msadapter", "mindspore"),
)

# Modules that make a file JAX code, whose TensorFlow import is its input pipeline.
JAX_IMPORTS = ("jax", "flax")

# The name a framework is always imported as, for files that get it through a star import:
# BigGAN-Tensorflow's main.py (seed 000) uses `tf.Session` with `tf` from `from utils import *`;
# fastai 2.8.12's torch_core.py and distributed.py use `torch.cuda.set_device` with `torch` from
# `from .torch_imports import *` (left as it was beside a migrated `backend='hccl'`).
STAR_IMPORTED_ALIASES = (  # (local name, module, framework)
    ("tf", "tensorflow", "tensorflow"),
    ("torch", "torch", "torch"),
)

# ----------------------------------------------------------------------------- PyTorch names
# Where the PyTorch pass knows a device string, a backend name or an environment variable name
# is what it looks like (kinds/device.py, kinds/backend.py, kinds/env.py).

# Functions taking an environment variable name (argument index).
ENV_FUNCS = {
    "os.getenv": 0,
    "os.putenv": 0,
    "os.unsetenv": 0,
    "os.environ.get": 0,
    "os.environ.setdefault": 0,
    "os.environ.pop": 0,
    "os.environ.__getitem__": 0,
}
# Functions taking a distributed backend (argument index, or None: by keyword only).
BACKEND_FUNCS = {"torch.distributed.init_process_group": 0, "torch.distributed.new_group": None}
BACKEND_GETTERS = {"torch.distributed.get_backend"}
# Functions whose single argument may name a tensor type as a string ("torch.cuda.FloatTensor").
TYPE_STRING_FUNCS = {"torch.set_default_tensor_type"}
# A name that holds a device by its name alone (`device`, `train_device`, `dev`): the PyTorch
# pass's literal analysis (codemods/torch/literals.py) and partial.literal_readers read it so.
DEVICE_NAME_RE = re.compile(r"(?i)(?:^|_)(?:device|devices|device_type|dev_type)(?:$|_)|^dev$")
# Keyword arguments that are devices for one function only: torch.device(type="cuda", index=0).
DEVICE_KEYWORDS_OF = {"torch.device": {"type"}}
# Packages the PyTorch pass resolves names of besides those the rules name: partial.py keeps
# every import of them (`import os` makes `os.environ["CUDA_VISIBLE_DEVICES"]` an env var;
# `from functools import partial` makes `partial(autocast, "cuda")` a device argument).
# CUDA availability tests of libraries that pair them with an NPU twin (`is_torch_npu_available`,
# `is_npu_available`) and whose own runs keep them (project_values.cuda_tests): False on the NPU
# wherever a module imports them from there, as unmigrated (llamafactory 0.9.5's extras/env.py
# `from transformers.utils import is_torch_cuda_available`): the branches they open stay with them
# (codemods/guards.file_cuda_tests), and partial parsing keeps the imports that bind them.
LIBRARY_CUDA_TESTS = frozenset({
    "transformers.is_torch_cuda_available", "transformers.utils.is_torch_cuda_available",
    "transformers.utils.import_utils.is_torch_cuda_available",
    "accelerate.utils.is_cuda_available", "accelerate.utils.imports.is_cuda_available",
})

RESOLVED_PACKAGES = {"os", "re", "absl", "click", "pytest", "functools"} | {  # re: codemods/findings.py matches re.search(...) texts
    name.split(".", 1)[0]
    for name in [*ENV_FUNCS, *BACKEND_FUNCS, *BACKEND_GETTERS, *TYPE_STRING_FUNCS, *DEVICE_KEYWORDS_OF]
}


def detect_frameworks(imports: "ImportTable") -> List[str]:
    found: List[str] = []
    for root, name in FRAMEWORK_IMPORTS:
        if name not in found and imports.imports_module(root):
            found.append(name)
    if "tensorflow" in found and any(imports.imports_module_at_top_level(root) for root in JAX_IMPORTS):
        # A JAX module (d2l's jax.py, Flax examples) feeds on tf.data / tfds (`tfds.as_numpy`):
        # nothing of TensorFlow runs on the NPU there, and NPU126's `drop_remainder=True` would
        # only drop the last batch of every epoch.
        found.remove("tensorflow")
    if "torch" in found:
        # A PyTorch module that imports another framework only inside a function (a weight
        # converter such as transformers' load_tf_weights) is not written for that framework:
        # giving it `from npu_bridge.npu_init import *` would break its import.
        found = [
            name
            for name in found
            if name == "torch"
            or any(imports.imports_module_at_top_level(root) for root, n in FRAMEWORK_IMPORTS if n == name)
        ]
    return found


# TensorFlow 1.15 and TensorFlow 2 need different things on Ascend: TF 1.x graphs go through the
# TF Adapter's npu_bridge (the TensorFlow rules and Huawei's 1.15 API support list), TF 2 code
# through its `npu_device` (NPU356, once per run). tf.keras scripts are TF 1.15 code too (the
# adapter has Keras helpers), so Keras alone says nothing: a file is TF 2 code when it records
# gradients with GradientTape, compiles with `@tf.function` or subclasses Keras' Layer/Model
# (eager code), and uses nothing only TF 1.x has (sessions, placeholders, variable scopes,
# estimators, contrib, `import tensorflow.compat.v1`). Anything else keeps the 1.15 rules.
TF2_FINDING = "NPU356"  # raised only on TF 2 code: it says nothing of whether a TF 1.x file needs the pass
TF1_WORDS = frozenset({
    b"Session", b"InteractiveSession", b"MonitoredTrainingSession", b"placeholder", b"placeholder_with_default",
    b"variable_scope", b"get_variable", b"global_variables_initializer", b"estimator", b"contrib",
    b"ConfigProto", b"disable_v2_behavior", b"disable_eager_execution",
})
TF1_MODULES = frozenset({"tensorflow.compat.v1", "tensorflow.contrib", "tensorflow.estimator"})


def tensorflow2_reason(code) -> Optional[str]:
    """Why a TensorFlow file is TF 2 code (from its prefilter.CodeWords), or None: the TF 1.15
    rules apply."""
    ids = code.identifiers
    return tensorflow2_reason_of(ids.__contains__, code.decorators, code.bases, code.modules)


class Undecided(Exception):
    """tensorflow2_reason_of: the answer depends on a word not known to be an identifier or not."""


def tensorflow2_reason_of(has: Callable[[bytes], Optional[bool]], decorators: AbstractSet[bytes],
                          bases: AbstractSet[bytes], modules: AbstractSet[str]) -> Optional[str]:
    """tensorflow2_reason, with `has(word)` telling whether a word is an identifier of the code:
    True, False, or None when not known (prefilter.LazyCodeWords, before the walk of every
    node): then Undecided is raised, unless the answer does not depend on it."""
    def known(word: bytes) -> bool:
        found = has(word)
        if found is None:
            raise Undecided(word.decode())
        return found

    used = []
    if known(b"GradientTape"):
        used.append("GradientTape")
    if b"function" in decorators and known(b"function"):
        used.append("@tf.function")
    if bases & {b"Layer", b"Model"} and known(b"keras"):
        used.append("Keras subclassing")
    if not used or TF1_MODULES & modules:
        return None
    found = [has(word) for word in TF1_WORDS]
    if any(found):
        return None
    if None in found:
        raise Undecided("a TensorFlow 1.x word")
    return f"TensorFlow 2 code ({', '.join(used)}; no TensorFlow 1.x API)"


def star_imported_frameworks(text: str, imports: "ImportTable", wanted: Sequence[str]) -> List[str]:
    """For a file with a star import that uses `tf.` without binding `tf` itself: make `tf`
    resolve to tensorflow (in `imports`) and return ["tensorflow"] -- when `wanted` (the
    frameworks detected or forced) is empty or includes tensorflow."""
    if not imports.has_star_import():
        return []
    found: List[str] = []
    for alias, module, framework in STAR_IMPORTED_ALIASES:
        if wanted and framework not in wanted:
            continue
        if alias in imports.names or re.search(rf"^[ \t]*{alias}\s*=[^=]", text, re.MULTILINE):
            continue
        if re.search(rf"(?<![\w.]){alias}\.[A-Za-z_]", text):
            imports.names[alias] = module
            imports.star_bound.add(alias)
            found.append(framework)
    return found
