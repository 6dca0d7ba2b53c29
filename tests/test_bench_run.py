"""bench/run.py's baselines on a project with a file libcst cannot parse (torch-geometric-temporal
0.56.2 ships dataset/download.py broken): the attempt is counted and the bench goes on, as the tool
reports such a file and goes on."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _bench_run():
    spec = importlib.util.spec_from_file_location("bench_run", REPO / "bench" / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_run", module)  # its dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


# The shape of torch-geometric-temporal 0.56.2's dataset/download.py: a Python 2 print statement.
BROKEN = 'import os\n\n\ndef fetch(url):\n    if not url:\n        print "no url"\n'


def test_parse_only_counts_a_broken_file_and_goes_on(tmp_path: Path) -> None:
    bench_run = _bench_run()
    broken, good = tmp_path / "download.py", tmp_path / "model.py"
    broken.write_text(BROKEN, encoding="utf-8")
    good.write_text("import torch\nx = torch.zeros(1).cuda()\n", encoding="utf-8")
    assert bench_run._parse_libcst(str(broken)) == 1
    assert bench_run._parse_libcst(str(good)) == 0


@pytest.mark.slow  # a fresh interpreter, as bench/run.py measures the floor
def test_floor_process_parses_past_a_broken_file(tmp_path: Path) -> None:
    bench_run = _bench_run()
    broken, good = tmp_path / "download.py", tmp_path / "model.py"
    broken.write_text(BROKEN, encoding="utf-8")
    good.write_text("import torch\n", encoding="utf-8")
    listing = tmp_path / "files.txt"
    listing.write_text(f"{broken}\n{good}\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-c", bench_run.FLOOR, "1", str(listing)],
                          capture_output=True, text=True, check=False)
    assert (proc.returncode, proc.stderr) == (0, "")
