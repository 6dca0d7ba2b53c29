"""An interpreter with PyTorch for the tests that run migrated programs, and how to run them.

torch is never a dependency of npu-migrate. Tests that execute a migrated program use the session
fixture `torch_python` (tests/conftest.py): the path of a Python in a virtualenv with
torch==2.13.0 (the CPU build; this machine's pip finds it on disk) and numpy, created once under
~/.cache/npu-migrate-torch/ (or $NPU_MIGRATE_TORCH_CACHE) and reused by every later run. Set
$NPU_MIGRATE_TEST_TORCH_PYTHON to use an interpreter you already have. When the virtualenv cannot
be made, the tests that need it are skipped with the reason (pytest -rs shows it).

The fixture `run_on_standin` runs a (migrated) snippet or script under the CPU stand-in of
torch_npu and MoXing (npu_migrate/standin) with that interpreter; `npu-migrate rehearse
--python <torch_python>` runs a whole job.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict, Optional

import pytest

TORCH_VERSION = "2.13.0"
# What the real training programs of tests/test_rehearse_corpus.py import besides torch: numpy,
# tqdm and einops (tqdm and einops pure Python); opacus (pure Python; it brings scipy and
# opt_einsum); pyyaml and sacrebleu for Sockeye (sacrebleu brings regex, lxml, portalocker, ...); gym
# 0.23.1 (its CartPole imports pygame) and tensorboard for CleanRL's ppo.py.
PACKAGES = (f"torch=={TORCH_VERSION}", "numpy", "tqdm", "einops", "opacus==1.6.0", "pyyaml", "sacrebleu==2.6.0",
            "gym==0.23.1", "pygame==2.6.1", "tensorboard==2.21.0")


def venv_dir() -> Path:
    root = Path(os.environ.get("NPU_MIGRATE_TORCH_CACHE") or Path.home() / ".cache" / "npu-migrate-torch")
    return root / f"py{sys.version_info[0]}.{sys.version_info[1]}-torch{TORCH_VERSION}"


def _python_in(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def make_torch_python() -> str:
    """The interpreter's path; raises RuntimeError with the reason when there cannot be one."""
    given = os.environ.get("NPU_MIGRATE_TEST_TORCH_PYTHON")
    if given:
        return given
    venv = venv_dir()
    python = _python_in(venv)
    ready = venv / ".npu-migrate-ready"
    wanted = " ".join(PACKAGES) + "\n"
    if ready.exists() and python.exists() and ready.read_text() == wanted:
        return str(python)
    venv.parent.mkdir(parents=True, exist_ok=True)
    import fcntl

    with open(venv.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another test run (or engineer) may be creating it
        if ready.exists() and python.exists() and ready.read_text() == wanted:
            return str(python)
        steps = [[str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *PACKAGES]]
        if not (ready.exists() and python.exists()):  # else only what the list gained is installed
            if venv.exists():
                import shutil

                shutil.rmtree(venv)  # a half-made one from an interrupted run
            steps.insert(0, [sys.executable, "-m", "venv", str(venv)])
        for step in steps:
            done = subprocess.run(step, capture_output=True, text=True, timeout=1800)
            if done.returncode != 0:
                lines = [line for line in (done.stderr or done.stdout).splitlines()
                         if line.strip() and "is ignored" not in line]
                raise RuntimeError(f"`{' '.join(step[2:5])}` failed: {lines[-1] if lines else done.returncode}")
        ready.write_text(wanted)
    return str(python)


_cached: Dict[str, str] = {}


def real_torch_python() -> str:
    """The interpreter itself (skips the test when there is none)."""
    if "python" not in _cached:
        try:
            _cached["python"] = make_torch_python()
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
            _cached["error"] = str(exc)
            _cached["python"] = ""
    if not _cached["python"]:
        pytest.skip(f"no Python with torch=={TORCH_VERSION} for running migrated programs: {_cached['error']}")
    return _cached["python"]


def torch_python_or_skip() -> str:
    """What the tests run programs with: the fork server's client for the interpreter (tests/zygote.py:
    `python SCRIPT ARGS` forked from a process that imported torch, anything else run by the
    interpreter itself), or with NPU_MIGRATE_TEST_ZYGOTE=0 the interpreter."""
    import zygote

    real = real_torch_python()
    return zygote.client(real) if zygote.enabled() else real


def zygote_folder() -> Optional[str]:
    """Where the fork server's client for torch_python, its sockets, logs and CPU seconds are (None: not in use)."""
    import zygote

    return zygote.folder_of(_cached.get("python", ""))


def standin_env(tmp_path: Path, devices: int = 1, extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """The environment of a process run under the stand-in, with a local OBS in tmp_path/obs."""
    from npu_migrate.rehearse import LAUNCHER_VARIABLES
    from npu_migrate.standin import DEVICES_VAR, LOG_VAR, OBS_ROOT_VAR, SITE

    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARIABLES and k != "PYTHONPATH"}
    env.update({"PYTHONPATH": str(SITE), OBS_ROOT_VAR: str(tmp_path / "obs"), LOG_VAR: str(tmp_path / "moxing.jsonl"),
                DEVICES_VAR: str(devices), "PYTHONDONTWRITEBYTECODE": "1",
                "PYTHONUNBUFFERED": "1"})  # as rehearse runs a rank: one fork server environment for both
    env.update(extra or {})
    return env


def run_on_standin(python: str, tmp_path: Path, source: str, *args: str, migrate: bool = True,
                   modelarts: bool = False, name: str = "snippet.py", env: Optional[Dict[str, str]] = None,
                   devices: int = 1, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run `source` (dedented; migrated first unless migrate=False) with `python` under the
    stand-in, in tmp_path. The result has `.migrated` (the text that ran) besides stdout/stderr."""
    from npu_migrate.dispatch import migrate_source
    from npu_migrate.options import Options

    text = textwrap.dedent(source)
    if migrate:
        result = migrate_source(text, name, Options(modelarts=modelarts))
        assert result.error is None, result.error
        text = result.new_text
    script = tmp_path / name
    script.write_text(text)
    done = subprocess.run([python, str(script), *args], cwd=tmp_path, capture_output=True, text=True,
                          env=standin_env(tmp_path, devices, env), timeout=timeout)
    done.migrated = text
    return done
