"""MindSpore scripts, migrated, run on MindSpore for the CPU: the stand-in of `rehearse`
(npu_migrate/standin, first on PYTHONPATH) runs `device_target="Ascend"` on the CPU, so a
migrated script that starts with its default arguments proves the device target moved as one
value -- and the half-migrated version (only the default moved) proves the test can fail.

MindSpore (the `mindspore` wheel from PyPI, ~800 MB for CPython 3.11 on x86_64 Linux) is installed
once into a virtualenv cached under ~/.cache/npu-migrate-mindspore ($NPU_MIGRATE_MINDSPORE_CACHE);
the tests are skipped, saying why, when it cannot be installed. MindSpore is never a dependency
of npu-migrate itself.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from npu_migrate.dispatch import migrate_source
from npu_migrate.standin import SITE

pytestmark = pytest.mark.slow

MINDSPORE = "mindspore==2.10.0"
# MindSpore 2.10's datasets call np.array(x, copy=False), which NumPy 2 refuses.
NUMPY = "numpy<2"
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "mindspore"
CACHE = Path(os.environ.get("NPU_MIGRATE_MINDSPORE_CACHE") or Path.home() / ".cache" / "npu-migrate-mindspore")


def _works(python: Path) -> bool:
    """Whether `python` imports MindSpore (and a NumPy before 2). The probe imports MindSpore (~2 CPU-s,
    and on a cold disk cache many seconds of reading its 2.8 GB): it runs once per virtualenv, which
    then holds a marker naming what it has, as tests/torch_env.py's does (every module and worker that
    asks again reads the marker)."""
    if not python.exists():
        return False
    ready = python.parent.parent / ".npu-migrate-ready"
    wanted = f"{MINDSPORE} {NUMPY}\n"
    if ready.exists() and ready.read_text() == wanted:
        return True
    probe = "import mindspore, numpy; assert numpy.__version__ < '2'"
    if subprocess.run([str(python), "-c", probe], capture_output=True, timeout=600).returncode != 0:
        return False
    ready.write_text(wanted)
    return True


@pytest.fixture(scope="module")
def mindspore_python() -> Path:
    folder = CACHE / f"venv-{MINDSPORE.split('==')[1]}"
    python = folder / "bin" / "python"
    if not _works(python):
        if sys.version_info[:2] != (3, 11) or sys.platform != "linux":
            pytest.skip(f"{MINDSPORE} is installed for CPython 3.11 on Linux only (this is {sys.version.split()[0]})")
        CACHE.mkdir(parents=True, exist_ok=True)
        with open(CACHE / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another test process (xdist) may be creating it
            python = _create(folder, python)
    import zygote  # `python SCRIPT` forked from a process that imported mindspore (tests/zygote.py)

    return Path(zygote.client(str(python), "mindspore")) if zygote.enabled() else python


def _create(folder: Path, python: Path) -> Path:
    if _works(python):  # made while this process waited for the lock
        return python
    venv.EnvBuilder(with_pip=True, clear=True).create(folder)
    done = subprocess.run([str(python), "-m", "pip", "install", "-q", MINDSPORE, NUMPY],
                          capture_output=True, text=True, timeout=3600)
    if done.returncode != 0 or not _works(python):
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        pytest.skip(f"cannot install {MINDSPORE} from PyPI into {folder}: {last}")
    return python


# MindSpore logs errors only; set for every MindSpore program of these tests (test_rehearse_mindspore_corpus's
# rehearsals too), as PYTHONUNBUFFERED is (rehearse sets it for its ranks): the fork server's zygote
# (tests/zygote.py) of that one environment forks them all.
QUIET = {"GLOG_v": "3", "PYTHONUNBUFFERED": "1"}


def _run(python: Path, script: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHONPATH", "RANK", "DEVICE_ID"))}
    env["PYTHONPATH"] = str(SITE)
    env.update(QUIET)
    return subprocess.run([str(python), str(script), *args], cwd=script.parent, env=env,
                          capture_output=True, text=True, timeout=900)


def test_a_migrated_argparse_dispatch_runs_with_its_default_arguments(mindspore_python, tmp_path):
    source = FIXTURES / "mlp_dispatch.py"
    result = migrate_source(source.read_text(encoding="utf-8"), str(source))
    script = tmp_path / "train.py"
    script.write_text(result.new_text, encoding="utf-8")
    done = _run(mindspore_python, script)
    assert done.returncode == 0, done.stderr[-3000:]
    # The stand-in ran device_target="Ascend" on the CPU; the (former GPU) branch was taken.
    assert done.stdout.splitlines()[-1] == "trained 4 steps on CPU", done.stdout[-2000:]


def test_a_half_migrated_dispatch_dies_at_start(mindspore_python, tmp_path):
    """What the tool produced before: only the default moved, so the default argument matches
    no branch of the dispatch."""
    text = (FIXTURES / "mlp_dispatch.py").read_text(encoding="utf-8")
    half = text.replace('default="GPU", choices=("GPU", "CPU")', 'default="Ascend", choices=("GPU", "CPU")')
    assert half != text
    script = tmp_path / "train.py"
    script.write_text(half, encoding="utf-8")
    done = _run(mindspore_python, script)
    assert done.returncode != 0
    assert "ValueError: Unsupported device_target." in done.stderr


CROSSING_TRAIN = """\
import argparse
from mindspore import context
from src.dataset import create_dataset

parser = argparse.ArgumentParser()
parser.add_argument("--device_target", type=str, default="GPU", choices=["GPU", "CPU"])
args = parser.parse_args()
context.set_context(mode=context.PYNATIVE_MODE, device_target=args.device_target)
ds = create_dataset(batch_size=2, device_target=args.device_target)
print("batches", ds.get_dataset_size(), "on", context.get_context("device_target"))
"""
CROSSING_DATASET = """\
import numpy as np
import mindspore.dataset as de


def create_dataset(batch_size=2, device_target="GPU"):
    if device_target == "GPU":
        data = de.NumpySlicesDataset({"x": np.arange(8, dtype=np.float32)}, shuffle=False)
    else:
        raise ValueError("Unsupported device_target.")
    return data.batch(batch_size)
"""


def test_a_device_target_crossing_two_modules_runs_once_both_moved(mindspore_python, tmp_path, run_cli):
    """#25.9: the option in train.py and the comparison in src/dataset.py move together (one
    run over both files); with its default arguments the project runs on "Ascend" (the CPU
    here). Only the default moved (what the tool did two rounds ago) dies at start."""
    (tmp_path / "src").mkdir()
    (tmp_path / "train.py").write_text(CROSSING_TRAIN, encoding="utf-8")
    (tmp_path / "src" / "dataset.py").write_text(CROSSING_DATASET, encoding="utf-8")
    r = run_cli(".", "--write", "--no-cache", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert 'default="Ascend"' in (tmp_path / "train.py").read_text(encoding="utf-8")
    assert 'if device_target == "Ascend":' in (tmp_path / "src" / "dataset.py").read_text(encoding="utf-8")
    done = _run(mindspore_python, tmp_path / "train.py")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines()[-1].startswith("batches 4 on "), done.stdout[-2000:]
    (tmp_path / "src" / "dataset.py").write_text(CROSSING_DATASET, encoding="utf-8")  # the callee left as it was
    half = _run(mindspore_python, tmp_path / "train.py")
    assert half.returncode != 0 and "ValueError: Unsupported device_target." in half.stderr, half.stderr[-2000:]
