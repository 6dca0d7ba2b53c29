"""The PyTorch path of --distributed, executed: the converted smoke script runs with two
processes on the CPU stand-in of `npu-migrate rehearse` (npu_migrate/standin: hccl on gloo),
started by the generated launch script (torchrun of the cached torch==2.13.0 virtualenv). Both ranks train, each sees a disjoint half of the data in every epoch, the
weights agree, exactly one checkpoint is written (loadable without DDP's `module.` prefix) and
the loss is finite."""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
from pathlib import Path

import pytest

from npu_migrate import migrate_source
from npu_migrate.model import Options

ROOT = Path(__file__).resolve().parent.parent
SMOKE = ROOT / "fixtures" / "distributed" / "pytorch" / "smoke_train.py"

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_processes_train_on_disjoint_halves(tmp_path, torch_python):
    from torch_env import standin_env

    python = torch_python
    script = tmp_path / "smoke_train.py"
    result = migrate_source(SMOKE.read_text(encoding="utf-8"), str(script), Options(distributed=True))
    assert result.error is None and result.changed
    script.write_text(result.new_text, encoding="utf-8")
    assert sorted(Path(p).name for p in result.extra_files) == ["npu_migrate_distributed.py",
                                                               "run_distributed_smoke_train.sh"]
    for path, text in result.extra_files.items():
        Path(path).write_text(text, encoding="utf-8")
    launcher_path = str(tmp_path / "run_distributed_smoke_train.sh")
    assert subprocess.run(["bash", "-n", launcher_path]).returncode == 0

    env = standin_env(tmp_path, devices=2)
    env.update(NPROC="2", MASTER_PORT=str(_free_port()), OMP_NUM_THREADS="1",
               PATH=str(Path(python).parent) + os.pathsep + env.get("PATH", ""))
    run = subprocess.run(["bash", launcher_path], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]

    reports = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("report_*.json"))]
    assert len(reports) == 2  # both ranks trained
    for epoch in range(2):
        halves = [set(r["seen"][epoch]) for r in reports]
        assert all(len(h) == 32 for h in halves)
        assert halves[0].isdisjoint(halves[1]) and halves[0] | halves[1] == set(range(64))
    assert reports[0]["seen"][0] != reports[0]["seen"][1]  # set_epoch: another shuffle
    assert all(math.isfinite(r["loss"]) for r in reports)
    assert reports[0]["weight"] == reports[1]["weight"]  # gradients were averaged
    checkpoints = list(tmp_path.glob("*.pt"))
    assert [p.name for p in checkpoints] == ["checkpoint.pt"]
    keys = subprocess.run([python, "-c", "import torch; print(sorted(torch.load('checkpoint.pt')))"],
                          cwd=tmp_path, capture_output=True, text=True, env=env)
    assert keys.stdout.strip() == "['bias', 'weight']"
    assert run.stdout.count("epoch 0: loss") == 2  # print is left as it is: each rank prints (as under torchrun)


MODULE_LEVEL = ROOT / "fixtures" / "distributed" / "pytorch" / "smoke_module_level.py"


def test_module_level_script_with_model_methods_runs_on_two_processes(tmp_path, torch_python):
    """No main block: distributed_setup() runs before the script's own statements; the model's
    own method (init_hidden) and the whole-model torch.save go through unwrap_model(), so the
    converted script runs where the wrapper would raise AttributeError, and the saved model
    is the plain module, loadable without DDP."""
    from torch_env import standin_env

    script = tmp_path / MODULE_LEVEL.name
    result = migrate_source(MODULE_LEVEL.read_text(encoding="utf-8"), str(script), Options(distributed=True))
    assert result.error is None and result.changed
    assert "    state = unwrap_model(model).init_hidden(tokens.size(1))\n" in result.new_text
    assert "    torch.save(unwrap_model(model), \"model.pt\")\n" in result.new_text
    assert sorted(f.code for f in result.findings) == ["NPU304", "NPU387"]  # GRU: on the unsupported list
    script.write_text(result.new_text, encoding="utf-8")
    for path, text in result.extra_files.items():
        Path(path).write_text(text, encoding="utf-8")
    launcher_path = str(tmp_path / "run_distributed_smoke_module_level.sh")

    env = standin_env(tmp_path, devices=2)
    env.update(NPROC="2", MASTER_PORT=str(_free_port()), OMP_NUM_THREADS="1",
               PATH=str(Path(torch_python).parent) + os.pathsep + env.get("PATH", ""))
    run = subprocess.run(["bash", launcher_path], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    reports = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("report_*.json"))]
    assert len(reports) == 2 and reports[0]["bias"] == reports[1]["bias"]
    assert [p.name for p in tmp_path.glob("*.pt")] == ["model.pt"]
    import zipfile

    with zipfile.ZipFile(tmp_path / "model.pt") as saved:  # torch.save's format: a zip with the pickle
        pickle = saved.read(next(n for n in saved.namelist() if n.endswith("data.pkl")))
    assert b"TinyRNN" in pickle and b"DistributedDataParallel" not in pickle
