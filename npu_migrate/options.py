"""`Options`: what a run does to each file -- the one frozen value the engine, the passes and the
front ends read, built once per run by the pipeline (settings.Settings.options(), then the
project's values) and passed down, like black's `Mode`.

It holds the run's targets as resolved objects (targets.RunTargets: torch_npu, CANN, MindSpore,
each a release spec and why it was chosen), not version strings each pass resolves again. What
happens to the migrated files is model.WriteBack (settings.Settings.mode), kept out of this value
on purpose, as black keeps WriteBack out of Mode: a `--check` and a `--write` of the same tree
share their cache entries (cache.py: a run that writes takes only "nothing to do" from them).

The defaults live here: settings.Settings reads them for its fields of the same name, and the
command line reads Settings'. The cache key (cache.run_key) is derived from every field of this
value (`cache_key`), nested values by their own fields, plus every data file and the rules:
tests/test_cache.py changes each field in turn, enumerated from the fields, so a field added
later cannot be forgotten in the key.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Any, Dict, Tuple

from .model import MODELARTS_DATA_DIR, MODELARTS_OUTPUT_DIR
from .targets import RunTargets

# The targets by the names of their options (the command line's, the configuration's, the rule
# examples' `options = { torch_npu_version = "2.5" }`) -> the RunTargets field each sets.
TARGET_OPTIONS: Dict[str, str] = {"torch_npu_version": "torch", "cann_version": "cann",
                                  "mindspore_version": "mindspore"}


@dataclass(frozen=True)
class Options:
    """What to do to a file. Frozen and hashable; every field keys the cache (`cache_key`).

    The rule set itself travels separately (see dispatch.migrate_source) because it is large;
    its fingerprint is part of the cache key.
    """

    framework: str = "auto"  # auto | torch | tensorflow | mindspore
    modelarts: bool = False  # adapt entry scripts for ModelArts
    modelarts_entry_files: Tuple[str, ...] = ()  # --entry: files always treated as entry scripts
    modelarts_resume: bool = False
    modelarts_data_dir: str = MODELARTS_DATA_DIR  # where the job's input (--data_url) is copied to
    modelarts_output_dir: str = MODELARTS_OUTPUT_DIR  # the local folder copied to --train_url
    data_args: Tuple[str, ...] = ()  # --data-arg: the script's own data arguments, when not recognised
    output_args: Tuple[str, ...] = ()  # --output-arg
    modelarts_sync_every: float = 0  # minutes between uploads to train_url (0: at the end only)
    # .py files of the project that import moxing (an entry importing one is adapted already)
    modelarts_moxing_files: Tuple[str, ...] = ()
    # .py files run by hand beside an entry script (split/download helpers): not entry scripts
    modelarts_utility_files: Tuple[str, ...] = ()
    modelarts_boot: bool = False  # --modelarts-entry: also generate a ModelArts boot file per entry script
    add_import: bool = True  # add `import torch_npu` where NPU APIs are used
    npu_ops: bool = False  # --npu-ops: TF operators -> the TF Adapter's NPU operators (NPU129)
    # The run's targets (targets/): torch_npu for PyTorch code, CANN's TF Adapter for TensorFlow,
    # MindSpore; the passes ask them what a release lacks. The default: the newest of each.
    targets: RunTargets = field(default_factory=RunTargets)
    # The project's own packages/modules named like a library a rule reports (local_modules.py):
    # `import triton` finds the project's `triton/` folder, not OpenAI Triton.
    local_modules: Tuple[str, ...] = ()
    # Device settings a module importing no torch sets to a CUDA device string, which becomes
    # "npu" (`MODEL.DEVICE`, `settings.DEVICE`: project_values.py): a module that imports torch
    # and reads one gets `import torch_npu`.
    device_config_keys: Tuple[str, ...] = ()
    # MindSpore device targets passed from one module of the run to another that move together
    # ("<absolute path>::device_target" for each side: codemods/device_dispatch.crossing_moves).
    mindspore_device_moves: Tuple[str, ...] = ()
    # The project's CUDA-only code other modules may call ("<module path without .py>::<name>::<what>":
    # functions using numba.cuda/Triton/CuPy..., cpp_extension builds; project_values.py): a device
    # test in one module that opens such code of another stays CUDA (codemods/guards.py).
    cuda_only_code: Tuple[str, ...] = ()
    # Module-level names bound to a module whose rewrites go whole or not at all (a remove_import
    # rule's: `hvd` of `import horovod.tensorflow as hvd`) that another module of the run imports
    # ("<module path without .py>::<name>::<the reader's path>": project_values.py): the calls
    # through that name stay there, so the module's own stay too (callrules/program.py).
    exported_names: Tuple[str, ...] = ()
    # The files of the run that read such a name and the names they read it through
    # ("<absolute path>::<local name>::<module>::<the binding file>": `hvd` of `from ...config import
    # hvd`, `config.hvd`; project_values.exported_names): their uses are that module's, kept with the
    # binding module, and reported there (engine.py admits the file, callrules/program.py keeps them).
    whole_readers: Tuple[str, ...] = ()
    # Attributes the attribute rules rename (`is_cuda`) that a class of the run's files defines as
    # its own (torch_geometric's `Data.is_cuda` property; project_values.py): every module keeps
    # its reads, as the defining module does (codemods/torch/methods.py).
    own_attributes: Tuple[str, ...] = ()
    # The per-device class families a class of the run's files is the NPU member of
    # (`class NpuAccelerator`: "Accelerator"; project_values.npu_families): their CUDA member
    # (`class CudaAccelerator`) keeps its CUDA code (codemods/guards.keep_cuda_twin_of_npu_class).
    npu_families: Tuple[str, ...] = ()
    # The top-level functions of the run's files with a positional parameter named for a device
    # ("<module path without .py>::<name>::<position>::<parameter>"; project_values.py): a string
    # literal another module gives that parameter (torchtune's `get_device("cuda")`, imported from
    # torchtune.utils) moves as one given to the module's own function does (codemods/torch/literals.py).
    device_functions: Tuple[str, ...] = ()
    # The names of the run's top-level functions whose body is a CUDA availability test and that
    # have an NPU twin in the run (accelerate's `is_cuda_available` beside `is_npu_available`;
    # project_values.cuda_tests): the function and the branches it opens stay as they are
    # (codemods/guards.keep_behind_cuda_test): the project selects the NPU with its own test.
    cuda_tests: Tuple[str, ...] = ()
    # Why the project's TensorFlow is TensorFlow 2 (targets/pins.tensorflow2_required: its
    # requirements allow no TF 1.15), "" when they do not say: then no file gets the TF 1.15
    # rules (npu_bridge is not on a TF 2 install), tf.compat.v1 code included.
    tensorflow2_project: str = ""
    distributed: bool = False  # --distributed: one-device training scripts -> data-parallel on 8 NPUs

    @classmethod
    def of(cls, **values: Any) -> "Options":
        """Options from flat values, the targets given by their options' names and version strings
        (`Options.of(torch_npu_version="2.1", distributed=True)`), as the rule examples and the
        tests write them. A version is taken as given: not checked, no reason."""
        specs = {TARGET_OPTIONS[name]: values.pop(name) for name in list(values) if name in TARGET_OPTIONS}
        if specs:
            values["targets"] = RunTargets.of(**specs)
        return cls(**values)

    @property
    def target_specs(self) -> Tuple[str, str, str]:
        """(torch_npu, cann, mindspore): the specs of the run's targets, as RuleSet.targets
        names the targets a rule view was derived for."""
        return self.targets.specs

    def cache_key(self) -> str:
        """Every field of this value, a nested value (the targets) by its own fields: what the run
        does, as cache.run_key keys it. A field of a type `keyed` does not know raises."""
        import json

        return json.dumps(keyed(self), separators=(",", ":"))


def keyed(value: Any) -> Any:
    """`value` as plain JSON data, a dataclass as its type name and every field (repr=False or
    not), so that two values differ here when any field differs. Raises TypeError for a type it
    does not know: a new field must say how it keys the cache, never be left out silently."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [type(value).__name__, [[f.name, keyed(getattr(value, f.name))] for f in dataclasses.fields(value)]]
    if isinstance(value, enum.Enum):
        return [type(value).__name__, value.value]
    if isinstance(value, (tuple, list)):
        return [keyed(v) for v in value]
    if isinstance(value, (frozenset, set)):
        return sorted((keyed(v) for v in value), key=repr)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"options.keyed: no cache key for a {type(value).__name__} ({value!r})")
