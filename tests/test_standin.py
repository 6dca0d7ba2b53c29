"""The CPU stand-in of torch_npu and MoXing (npu_migrate/standin): migrated GPU code runs on it.

Each test writes GPU code, migrates it with npu-migrate and runs the result with torch==2.13.0
(the `torch_python` fixture) under the stand-in, asserting what it printed.
"""

from __future__ import annotations

import json
import os

import pytest

pytestmark = pytest.mark.slow

GPU_TRAINING = """
import os
import threading

import torch
import torch.nn as nn
from torch.cuda.amp import GradScaler, autocast

assert torch.cuda.is_available()
torch.manual_seed(0)
torch.cuda.manual_seed_all(0)
torch.cuda.set_device(0)
device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).cuda()
model.to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = GradScaler()
x = torch.randn(16, 4).cuda(non_blocking=True)
y = torch.zeros(16, dtype=torch.long, device="cuda")
start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
start.record()
for step in range(3):
    optimizer.zero_grad()
    with autocast():
        loss = nn.functional.cross_entropy(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
end.record()
torch.cuda.synchronize()
assert start.elapsed_time(end) >= 0
torch.save(model.state_dict(), "model.pt")
state = torch.load("model.pt", map_location="cuda:0")
state = torch.load("model.pt", map_location={"cuda:1": "cuda:0"})
state = torch.load("model.pt", map_location=device)
state = torch.load("model.pt", map_location=lambda storage, loc: storage.cuda(0))
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=8, pin_memory=True,
                                     num_workers=1)
print([inputs.to(device, non_blocking=True).device.type for inputs, _ in loader])
model.load_state_dict(state)
with torch.autocast(device_type="cuda", dtype=torch.float16):
    pass
g = torch.Generator(device="cuda")
g.manual_seed(1)
assert isinstance(g, torch.Generator)
print(torch.rand(2, generator=g, device="cuda").device.type)
print(x.is_cuda, torch.cuda.device_count(), torch.cuda.current_device())
print(torch.cuda.memory_allocated(), torch.cuda.max_memory_allocated(0))
print(torch.ones(2).to("cuda").device, x.new_zeros(3, device=device).device)
seen = []
t = threading.Thread(target=lambda: seen.append(torch.zeros(1, device="cuda:0").device))
t.start()
t.join()
print(seen)
with torch.device("cuda"):
    print(torch.empty(1).device)
print("trained", type(torch.cuda.get_device_name(0)).__name__)
"""


def test_migrated_gpu_training_runs_on_the_standin(run_on_standin):
    done = run_on_standin(GPU_TRAINING)
    assert "import torch_npu" in done.migrated and ".cuda" not in done.migrated.replace("torch.cuda.amp", "")
    assert done.returncode == 0, done.stderr
    assert "does not take effect" not in done.stderr  # torch.manual_seed reached the npu module
    assert done.stdout.splitlines() == [
        "['cpu', 'cpu']",
        "cpu",
        "False 1 0",
        "0 0",
        "cpu cpu",
        "[device(type='cpu')]",
        "cpu",
        "trained str",
    ]


def test_device_count_follows_the_process_count_and_set_device_checks_it(run_on_standin):
    code = """
    import torch
    import torch_npu
    print(torch.npu.device_count(), torch.device("npu:1").type)
    torch.npu.set_device("npu:1")
    print(torch.npu.current_device())
    torch.npu.set_device(2)
    """
    done = run_on_standin(code, migrate=False, devices=2)
    assert done.stdout.splitlines() == ["2 npu", "1"]
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "RuntimeError: set_device: invalid device id 2: this process sees 2 NPU(s) (the CPU stand-in has as many "
        "as the rehearsal has processes)")


# Every form in which torch_npu takes a device (a form the stand-in refused made a
# rehearsal fail where the NPU would have run): (expression, what it must give on the stand-in).
DEVICE_FORMS = [
    ("x.to(1)", "cpu"),  # the torchrun tutorial's `.to(self.gpu_id)`
    ("x.to(0, non_blocking=True)", "cpu"),
    ("x.to(device=1)", "cpu"),
    ("x.to(1, torch.float64).dtype", "torch.float64"),
    ("x.to(torch.float16).dtype", "torch.float16"),  # a dtype is not a device
    ("x.to('npu:1')", "cpu"),
    ("x.to('npu', non_blocking=True)", "cpu"),
    ("x.to(torch.device('npu', 1))", "cpu"),
    ("x.to(torch.device('npu:1'))", "cpu"),
    ("x.to(torch.device(type='npu', index=0))", "cpu"),
    ("x.npu()", "cpu"),
    ("x.npu(1)", "cpu"),
    ("x.npu(1, non_blocking=True)", "cpu"),
    ("x.npu(torch.device('npu:1'))", "cpu"),
    ("x.npu(device=1)", "cpu"),
    ("torch.zeros(2, device=1)", "cpu"),
    ("torch.zeros(2, device='npu:1')", "cpu"),
    ("torch.ones(2, device=torch.device('npu', 1))", "cpu"),
    ("torch.randn(2, device=0)", "cpu"),
    ("torch.arange(3, device=1)", "cpu"),
    ("torch.tensor([1.0], device=1)", "cpu"),
    ("torch.empty(2, device='npu')", "cpu"),
    ("torch.full((2,), 1.0, device=1)", "cpu"),
    ("torch.zeros_like(x, device=1)", "cpu"),
    ("x.new_zeros(2, device=1)", "cpu"),
    ("torch.nn.Linear(2, 2).to(1).weight", "cpu"),
    ("torch.nn.Linear(2, 2).to(torch.device('npu', 1)).weight", "cpu"),
    ("torch.nn.Linear(2, 2).to('npu:1', non_blocking=True).weight", "cpu"),
    ("torch.nn.Linear(2, 2).npu(1).weight", "cpu"),
    ("torch.nn.Linear(2, 2).npu().weight", "cpu"),
    ("x.pin_memory().to(1, non_blocking=True)", "cpu"),
]


def test_every_device_form_torch_npu_accepts_runs_on_the_standin(run_on_standin):
    lines = ["import torch", "import torch_npu", "torch.npu.set_device(1)", "x = torch.ones(2)"]
    for i, (expr, _) in enumerate(DEVICE_FORMS):
        # Each form on its own: one refused form must not hide the others.
        lines += ["try:", f"    v = {expr}", "    print(%d, getattr(v, 'device', v))" % i,
                  "except Exception as exc:", "    print(%d, 'FAILED', type(exc).__name__, str(exc)[:200])" % i]
    done = run_on_standin("\n".join(lines) + "\n", migrate=False, devices=2)
    assert done.returncode == 0, done.stderr
    got = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert {DEVICE_FORMS[int(i)][0]: v for i, v in got.items()} == dict(DEVICE_FORMS)


def test_visible_devices_narrow_what_a_process_sees(run_on_standin):
    """ASCEND_RT_VISIBLE_DEVICES="0" (a CUDA_VISIBLE_DEVICES pin migrated) leaves one NPU: the
    second process of a distributed job cannot take NPU 1, on the NPU and on the stand-in."""
    code = """
    import torch
    import torch_npu
    print(torch.npu.device_count())
    torch.npu.set_device(1)
    """
    done = run_on_standin(code, migrate=False, devices=2, env={"ASCEND_RT_VISIBLE_DEVICES": "0"})
    assert done.stdout.splitlines() == ["1"]
    assert done.stderr.strip().splitlines()[-1] == (
        "RuntimeError: set_device: invalid device id 1: this process sees 1 NPU(s) (ASCEND_RT_VISIBLE_DEVICES=0) "
        "(the CPU stand-in has as many as the rehearsal has processes)")
    both = run_on_standin(code, migrate=False, devices=2, env={"ASCEND_RT_VISIBLE_DEVICES": "0,1"})
    assert both.returncode == 0 and both.stdout == "2\n", both.stderr


def test_plain_import_torch_loads_the_standin_like_torch_npus_autoload(run_on_standin):
    code = """
    import torch
    print(torch.zeros(1, device='npu').device)
    torch.set_default_device('npu')
    print(torch.empty(2).device)
    """
    done = run_on_standin(code, migrate=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "cpu\ncpu\n"


def test_what_the_standin_lacks_is_said_not_faked(run_on_standin):
    done = run_on_standin("import torch, torch_npu\ntorch.npu.nvtx\n", migrate=False)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1].startswith(
        "AttributeError: module 'torch.npu' has no attribute 'nvtx' in npu-migrate's CPU stand-in")


def test_moxing_maps_obs_to_a_folder_and_records_every_call(run_on_standin, tmp_path):
    (tmp_path / "obs" / "bucket" / "in" / "sub").mkdir(parents=True)
    (tmp_path / "obs" / "bucket" / "in" / "sub" / "a.txt").write_text("data")
    code = """
    import moxing as mox
    mox.file.copy_parallel("obs://bucket/in", "local")
    print(open("local/sub/a.txt").read())
    mox.file.make_dirs("obs://bucket/out")
    mox.file.copy("local/sub/a.txt", "obs://bucket/out/a.txt")
    print(mox.file.exists("obs://bucket/out/a.txt"), mox.file.is_directory("obs://bucket/out"))
    print(mox.file.list_directory("obs://bucket", recursive=True))
    mox.file.remove("obs://bucket/out", recursive=True)
    print(mox.file.exists("obs://bucket/out"))
    """
    done = run_on_standin(code, migrate=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "data", "True True", "['in', 'in/sub', 'in/sub/a.txt', 'out', 'out/a.txt']", "False"]
    calls = [json.loads(line) for line in (tmp_path / "moxing.jsonl").read_text().splitlines()]
    assert [(c["call"], c["args"]) for c in calls] == [
        ("copy_parallel", ["obs://bucket/in", "local"]),
        ("make_dirs", ["obs://bucket/out"]),
        ("copy", ["local/sub/a.txt", "obs://bucket/out/a.txt"]),
        ("exists", ["obs://bucket/out/a.txt"]),
        ("is_directory", ["obs://bucket/out"]),
        ("list_directory", ["obs://bucket"]),
        ("remove", ["obs://bucket/out"]),
        ("exists", ["obs://bucket/out"]),
    ]
    assert calls[0]["files"] == 1


def test_transfer_to_npu_runs_unmigrated_cuda_code_on_the_standin(run_on_standin):
    code = """
    import torch
    import torch_npu
    from torch_npu.contrib import transfer_to_npu
    model = torch.nn.Linear(2, 2).cuda()
    x = torch.ones(1, 2, device="cuda:0")
    print(model(x).device, torch.cuda.device_count(), x.is_cuda)
    """
    done = run_on_standin(code, migrate=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "cpu 1 False\n"


def test_mindspore_ascend_target_runs_on_the_cpu(tmp_path):
    # MindSpore itself is not installed here: a stub records what set_context received.
    import subprocess
    import sys

    from torch_env import standin_env

    stub = tmp_path / "stub" / "mindspore"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text("def set_context(**kwargs):\n    print('set_context', kwargs)\n")
    (stub / "context.py").write_text("def set_context(**kwargs):\n    print('context.set_context', kwargs)\n")
    script = tmp_path / "train.py"
    script.write_text("import mindspore as ms\nfrom mindspore import context\n"
                      "ms.set_context(device_target='Ascend', mode=0)\ncontext.set_context(device_target='Ascend')\n")
    env = standin_env(tmp_path)
    env["PYTHONPATH"] += os.pathsep + str(tmp_path / "stub")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["set_context {'device_target': 'CPU', 'mode': 0}",
                                        "context.set_context {'device_target': 'CPU'}"]


def test_the_reviewed_golden_migrations_run(run_on_standin, tmp_path):
    """fixtures/pytorch/*.expected.py, the migrated scripts the golden tests compare byte for byte,
    executed: the tutorial script as a program, the AMP loop and the DDP helper as libraries."""
    import shutil
    from pathlib import Path

    fixtures = Path(__file__).resolve().parent.parent / "fixtures" / "pytorch"
    for name in ("seed002_train", "amp_train", "alias_script"):
        shutil.copy(fixtures / f"{name}.expected.py", tmp_path / f"{name}.py")
    driver = """
    import os, runpy, sys, types
    import torch
    port = sys.argv[1]
    sys.argv = ["seed002_train.py", "--epochs", "1"]
    runpy.run_path("seed002_train.py", run_name="__main__")
    print(sorted(torch.load("model_cuda.pt", map_location="npu:0")))

    import amp_train
    data = [(torch.randn(4, 3), torch.tensor([0, 1, 0, 1])) for _ in range(2)]
    model = amp_train.train(torch.nn.Linear(3, 2), data, epochs=1)
    print("accuracy", 0 <= amp_train.evaluate(model, data) <= 1)

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port, WORLD_SIZE="1")
    import alias_script
    trainer = alias_script.Trainer(types.SimpleNamespace(cuda=True))
    trainer.setup()
    print(trainer.move(torch.ones(1)).device, trainer.device)
    trainer.sync()
    print(trainer.save(torch.nn.Linear(1, 1))["path"], sorted(alias_script.load("model_cuda.pt", 0)))
    """
    from npu_migrate.rehearse import _free_port

    done = run_on_standin(driver, str(_free_port()), migrate=False, name="driver.py")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("epoch 0: loss ") and lines[0].endswith(" on cuda, mask 2")
    assert lines[1] == "['0.bias', '0.weight', '2.bias', '2.weight']"
    assert lines[2].startswith("epoch 0: ") and lines[2].endswith(" MiB (cuda)")
    assert lines[3:] == ["accuracy True", "visible cuda devices: ''", "using nccl", "cpu npu:0",
                         "model_cuda.pt ['bias', 'weight']"]


def test_a_compiled_model_runs_on_the_standin(run_on_standin):
    """torch.compile's tracing asks torch.accelerator for the current stream (torch >= 2.9's
    dynamo streams.py); torch's own function asks the C++ backend, which the stand-in has not, so
    every compiled model failed in a rehearsal (rl_games compiles by default): "PyTorch is not
    linked with support for npu devices". The stand-in's torch.accelerator is torch.npu's.
    (backend="eager": the tracing without a C++ compiler.)"""
    code = """
    import torch

    model = torch.compile(torch.nn.Linear(4, 2).cuda(), backend="eager")
    print(model(torch.ones(3, 4).cuda()).device)
    with torch.accelerator.device_index(1):
        print(torch.accelerator.current_device_index(), torch.accelerator.current_stream().device)
    print(torch.accelerator.current_device_index())
    """
    done = run_on_standin(code, devices=2)
    assert "torch.compile(torch.nn.Linear(4, 2).npu()" in done.migrated
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["cpu", "1 npu:1", "0"]
