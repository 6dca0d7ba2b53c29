"""Regenerate rules/tensorflow_api_support.toml from Huawei's TF 1.15 API support list.

    python scripts/gen_tf_api_support.py [--csv PATH] [--check]

The CSV (`../shared/reference/tf1.15_api_support.csv`: module, api, support, support_zh,
advice_zh) is Huawei's `tf1.15_api_support_list.xlsx` of convert_tf2npu. Every API it marks
unsupported, deprecated or "analysing" becomes a TensorFlow finding (NPU342, NPU343, NPU344),
one [[finding]] per support level and module, with English advice written here (Huawei's advice
is one stock sentence per level, in Chinese). Left out, each for a reason the test
tests/test_tf_api_support.py checks:

* the `tf.compat.v1`/`tf.compat.v2` aliases whose only advice is "use the official API": the
  codemod reads `tf.compat.v1.X` as `tf.X`, so the official name's row decides;
* the names a hand-written rule of rules/tensorflow.toml covers (it says something more precise:
  the queue pipeline NPU332, cuDNN/NCCL NPU333, distribution strategies NPU334, mixed precision
  NPU336, the TPUEstimator rewrite NPU128, ...);
* a listed module with a member Huawei marks supported or a hand-written rule covers (the lookup
  goes by prefix, so the module's entry would report that member): `tf.keras.datasets`,
  `tf.contrib.tpu` (its listed members are still reported by their own rows), ...

`--check` exits 1 when the committed table differs from what the CSV gives (the test runs it).
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections import defaultdict
from pathlib import Path
from typing import Dict, Iterable, List, Set, Tuple

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CSV = ROOT.parent / "shared" / "reference" / "tf1.15_api_support.csv"
TABLE = ROOT / "rules" / "tensorflow_api_support.toml"

# Huawei's stock advice for a compat alias: "TensorFlow has an official API; do not use the compat one".
COMPAT_ADVICE_PREFIX = "TensorFlow有正式API"

LEVELS = {
    # support -> (code, severity, message, suggestion)
    "unsupported": (
        "NPU342",
        "warning",
        "`{api}` is marked unsupported on Ascend in Huawei's TensorFlow 1.15 API support list",
        "Huawei advises against using it: the migrated network may fail to compile or run. Use another"
        " TensorFlow API (often the tf.* or tf.nn.* name of the same operation), write it with supported"
        " operations, or keep this part on the CPU.",
    ),
    "deprecated": (
        "NPU343",
        "warning",
        "`{api}` is deprecated in TensorFlow 1.15 and listed as such in Huawei's API support list",
        "Huawei advises against using it: the migration may fail. Use its replacement in the TF 1.15 core"
        " API (tf.contrib modules moved to tf.*, tf.data, tf.estimator or TF Addons).",
    ),
    "analysing": (
        "NPU344",
        "info",
        "`{api}` is still being analysed for Ascend in Huawei's TensorFlow 1.15 API support list:"
        " support is not guaranteed",
        "If the migrated network fails where this API is used, replace it with a supported one.",
    ),
}

# Names a hand-written rule in rules/tensorflow.toml reports or rewrites (canonical TF names:
# `tf.` = `tensorflow.`). A row equal to one of these, or under one, is left to that rule.
COVERED_BY_RULES = {
    "tf.contrib.cudnn_rnn": "NPU333 (cuDNN RNN runs only on NVIDIA GPUs)",
    "tf.contrib.nccl": "NPU333 (NCCL runs only on NVIDIA GPUs)",
    "tf.contrib.distribute.MirroredStrategy": "NPU334 (GPU distribution strategy)",
    "tf.contrib.distribute.CollectiveAllReduceStrategy": "NPU334 (GPU distribution strategy)",
    "tf.distribute.MirroredStrategy": "NPU334 (GPU distribution strategy)",
    "tf.distribute.experimental.MultiWorkerMirroredStrategy": "NPU334 (GPU distribution strategy)",
    "tf.contrib.mixed_precision": "NPU336 (GPU mixed precision)",
    "tf.train.experimental.enable_mixed_precision_graph_rewrite": "NPU336 (GPU mixed precision)",
    "tf.train.experimental.MixedPrecisionLossScaleOptimizer": "NPU336 (GPU mixed precision)",
    "tf.contrib.data.prefetch_to_device": "NPU333 (stages data on a GPU)",
    "tf.contrib.data.copy_to_device": "NPU333 (stages data on a GPU)",
    "tf.data.experimental.prefetch_to_device": "NPU333 (stages data on a GPU)",
    "tf.data.experimental.copy_to_device": "NPU333 (stages data on a GPU)",
    "tf.contrib.data.map_and_batch": "NPU126 (gets drop_remainder=True)",
    "tf.train.string_input_producer": "NPU332 (queue input pipeline)",
    "tf.train.slice_input_producer": "NPU332 (queue input pipeline)",
    "tf.train.input_producer": "NPU332 (queue input pipeline)",
    "tf.train.range_input_producer": "NPU332 (queue input pipeline)",
    "tf.train.batch": "NPU332 (queue input pipeline)",
    "tf.train.shuffle_batch": "NPU332 (queue input pipeline)",
    "tf.train.batch_join": "NPU332 (queue input pipeline)",
    "tf.train.shuffle_batch_join": "NPU332 (queue input pipeline)",
    "tf.train.maybe_batch": "NPU332 (queue input pipeline)",
    "tf.train.maybe_batch_join": "NPU332 (queue input pipeline)",
    "tf.train.maybe_shuffle_batch": "NPU332 (queue input pipeline)",
    "tf.train.maybe_shuffle_batch_join": "NPU332 (queue input pipeline)",
    "tf.train.QueueRunner": "NPU332 (queue input pipeline)",
    "tf.train.add_queue_runner": "NPU332 (queue input pipeline)",
    "tf.contrib.tpu.TPUEstimator": "NPU128 (the TPUEstimator runs without TPU, on the NPU session config)",
    "tf.contrib.tpu.TPUEstimatorSpec": "NPU128 (works unchanged once the TPUEstimator runs without TPU)",
    "tf.contrib.tpu.RunConfig": "NPU128 (the TPUEstimator's config, wrapped by npu_run_config_init)",
    "tf.contrib.tpu.TPUConfig": "NPU128 (part of the TPUEstimator's config, unused without TPU)",
    "tf.contrib.tpu.InputPipelineConfig": "NPU128 (part of the TPUEstimator's config, unused without TPU)",
    "tf.estimator.tpu.TPUEstimator": "NPU128 (the TPUEstimator runs without TPU, on the NPU session config)",
    "tf.estimator.tpu.TPUEstimatorSpec": "NPU128 (works unchanged once the TPUEstimator runs without TPU)",
    "tf.estimator.tpu.RunConfig": "NPU128 (the TPUEstimator's config, wrapped by npu_run_config_init)",
    "tf.estimator.tpu.TPUConfig": "NPU128 (part of the TPUEstimator's config, unused without TPU)",
    "tf.estimator.tpu.InputPipelineConfig": "NPU128 (part of the TPUEstimator's config, unused without TPU)",
    "tf.contrib.compiler.xla": "NPU352 (XLA JIT, off on the NPU)",
    "tf.xla.experimental.jit_scope": "NPU352 (XLA JIT, off on the NPU)",
    "tf.config.experimental.set_memory_growth": "NPU352 (GPU memory setting)",
    "tf.config.experimental.VirtualDeviceConfiguration": "NPU352 (GPU memory setting)",
    "tf.config.experimental.set_virtual_device_configuration": "NPU352 (GPU memory setting)",
    "tf.ConfigProto": "NPU121 (the session config goes through npu_config_proto)",
    # Marked "analysing", but the TF Adapter documents tf.data as the NPU's input pipeline (and
    # getting its batches static is NPU126): reporting every dataset would be noise.
    "tf.data.Dataset": "NPU126 (tf.data is the TF Adapter's documented input pipeline)",
    "tf.data.Iterator": "NPU126 (tf.data is the TF Adapter's documented input pipeline)",
}


def load(csv_path: Path) -> List[Dict[str, str]]:
    with csv_path.open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def is_compat_alias(row: Dict[str, str]) -> bool:
    return row["advice_zh"].startswith(COMPAT_ADVICE_PREFIX)


def covered_by(api: str) -> str:
    parts = api.split(".")
    for end in range(len(parts), 0, -1):
        reason = COVERED_BY_RULES.get(".".join(parts[:end]))
        if reason is not None:
            return reason
    return ""


def with_supported_members(rows: Iterable[Dict[str, str]]) -> Set[str]:
    """Listed (not supported) names with a member that Huawei marks supported, or that a
    hand-written rule covers."""
    support = {r["api"]: r["support"] for r in rows}
    parents: Set[str] = set()
    for api, level in list(support.items()) + [(name, "supported") for name in COVERED_BY_RULES]:
        if not level.startswith("supported"):
            continue
        parts = api.split(".")
        for end in range(len(parts) - 1, 1, -1):
            parent = ".".join(parts[:end])
            if support.get(parent) in LEVELS:
                parents.add(parent)
    return parents


def select(rows: List[Dict[str, str]]) -> Tuple[Dict[str, List[str]], Dict[str, str]]:
    """(support level -> the APIs reported, left-out API -> why)."""
    parents = with_supported_members(rows)
    chosen: Dict[str, List[str]] = defaultdict(list)
    left_out: Dict[str, str] = {}
    for row in rows:
        api, level = row["api"], row["support"]
        if level not in LEVELS:
            continue
        if level == "unsupported" and is_compat_alias(row):
            left_out[api] = "compat alias: the official name's row decides"
        elif covered_by(api):
            left_out[api] = covered_by(api)
        elif api in parents:
            left_out[api] = "a member is marked supported or covered by a hand-written rule"
        else:
            chosen[level].append(api)
    return chosen, left_out


def group_of(api: str) -> str:
    parts = api.split(".")
    return ".".join(parts[:3]) if parts[1] == "contrib" and len(parts) > 3 else ".".join(parts[:2])


def _toml_string(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _reference(api: str) -> str:
    """An expression that refers to `api` with `import tensorflow as tf`."""
    return api


def render(rows: List[Dict[str, str]]) -> str:
    chosen, left_out = select(rows)
    supported = sorted(r["api"] for r in rows if r["support"] == "supported")
    out = [
        "# GENERATED by scripts/gen_tf_api_support.py from Huawei's TensorFlow 1.15 API support list",
        "# (tf1.15_api_support_list.xlsx of convert_tf2npu, in the Ascend/tensorflow repository).",
        "# Do not edit: change the script and run it again (tests/test_tf_api_support.py checks they agree).",
        "#",
        f"# {sum(len(v) for v in chosen.values())} APIs reported:"
        + ",".join(f" {len(chosen[level])} {level} ({LEVELS[level][0]})" for level in LEVELS)
        + f"; {len(left_out)} left out (compat aliases, names a hand-written rule covers, modules with a supported or covered member).",
        "# One entry per support level and module; a name also covers what is under it (`tf.contrib.slim`",
        "# covers `tf.contrib.slim.conv2d`). Each API is reported once per file, where it is first used.",
        "",
    ]
    for level, (code, severity, message, suggestion) in LEVELS.items():
        groups: Dict[str, List[str]] = defaultdict(list)
        for api in chosen[level]:
            groups[group_of(api)].append(api)
        out.append(f"# ----------------------------------------------------------------------------- {level}")
        out.append("")
        for group in sorted(groups):
            apis = sorted(groups[group])
            names = ", ".join(_toml_string("tensorflow" + a[2:]) for a in apis)
            flagged = f"import tensorflow as tf\nx = {_reference(apis[0])}\n"
            near = next((s for s in supported if group_of(s) == group and not covered_by(s)), None)
            out.append("[[finding]]")
            out.append('framework = "tensorflow"')
            out.append(f'code = "{code}"')
            out.append('kind = "api"')
            out.append(f'severity = "{severity}"')
            out.append(f"apis = [{names}]")
            out.append("once_per_file = true")
            out.append(f"message = {_toml_string(message)}")
            out.append(f"suggestion = {_toml_string(suggestion)}")
            examples = [f"{{ flagged = {_toml_string(flagged)} }}"]
            if near is not None:
                examples.append(f"{{ not_flagged = {_toml_string(f'import tensorflow as tf{chr(10)}x = {near}{chr(10)}')} }}")
            out.append(f"examples = [{', '.join(examples)}]")
            out.append("")
    return "\n".join(out)


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", type=Path, default=DEFAULT_CSV)
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed table is out of date")
    args = parser.parse_args(argv)
    text = render(load(args.csv))
    if args.check:
        current = TABLE.read_text(encoding="utf-8") if TABLE.exists() else ""
        if current != text:
            print(f"{TABLE} is out of date: run python scripts/gen_tf_api_support.py", file=sys.stderr)
            return 1
        return 0
    TABLE.write_text(text, encoding="utf-8")
    print(f"wrote {TABLE}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
