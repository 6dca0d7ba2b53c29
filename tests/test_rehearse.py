"""`npu-migrate rehearse`: adapted scripts run as ModelArts jobs on the CPU, and each way a job
goes wrong on the platform is caught (nothing uploaded, a crash on the platform's arguments, one
rank failing, the data copied twice on one node, a hang), with one line that says why.

Scripts that import no framework run with this interpreter; the PyTorch ones with the
`torch_python` fixture (tests/torch_env.py). TensorFlow and MindSpore are a few stub lines.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import sys
from pathlib import Path
from typing import Dict

import pytest

from npu_migrate.modelarts import render_runtime

ROOT = Path(__file__).resolve().parent.parent
BEFORE = ROOT / "fixtures" / "modelarts" / "before"
AFTER = ROOT / "fixtures" / "modelarts" / "after"

pytestmark = pytest.mark.slow

STUBS = {
    "tensorflow/__init__.py": (
        "class Session:\n"
        "    def __init__(self, config=None):\n        pass\n"
        "    def __enter__(self):\n        return self\n"
        "    def __exit__(self, *exc):\n        return False\n"
        "    def run(self, value):\n        return value\n\n\n"
        "def ConfigProto(**kwargs):\n    return kwargs\n"
    ),
    "npu_bridge/__init__.py": "",
    "npu_bridge/npu_init.py": "def npu_config_proto(config_proto=None):\n    return config_proto\n",
    "mindspore/__init__.py": "",
    "mindspore/context.py": (
        "class ParallelMode:\n    DATA_PARALLEL = 'data_parallel'\n\n\n"
        "def set_auto_parallel_context(**kwargs):\n    pass\n"
    ),
}


def tree(root: Path) -> Dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def world(tmp_path, run_process):
    """A user's code folder, a data folder and stubs; `rehearse(...)` runs the command."""
    # (rehearse in a process of its own: run_rehearsal's default streams are bound when it is
    # imported, so a second in-process rehearsal would print into the first one's capture)
    run_cli = run_process

    class World:
        code = tmp_path / "project"
        data = tmp_path / "dataset"
        stubs = tmp_path / "stubs"
        jobs = 0

        def script(self, name: str, text: str) -> Path:
            self.code.mkdir(exist_ok=True)
            (self.code / name).write_text(text)
            return self.code / name

        def adapted_fixture(self, name: str) -> Path:
            self.script("npu_migrate_modelarts.py", render_runtime())  # generated beside the script
            return self.script(name, (AFTER / name).read_text())

        def rehearse(self, script: str, *args: str, env=None):
            self.jobs += 1
            self.job = tmp_path / f"job{self.jobs}"
            extra = {"PYTHONPATH": str(self.stubs)}
            extra.update(env or {})
            return run_cli("rehearse", script, "--job-dir", str(self.job), *args, cwd=self.code, env=extra)

    w = World()
    for name, text in STUBS.items():
        (w.stubs / name).parent.mkdir(parents=True, exist_ok=True)
        (w.stubs / name).write_text(text)
    w.data.mkdir()
    (w.data / "a.txt").write_text("one two three")
    (w.data / "b.txt").write_text("four")
    return w


def report(done) -> str:
    return done.stdout.decode()


def verdict(done) -> str:
    return report(done).rstrip("\n").splitlines()[-1]


def uploaded(done):
    lines = report(done).splitlines()
    start = next(i for i, line in enumerate(lines) if "files that reached train_url" in line)
    found = []
    for line in lines[start + 1:]:
        match = re.match(r"^    (\S+)  ([\d,]+) bytes$", line)
        if not match:
            break
        found.append(match.group(1))
    return found


def copies(done) -> int:
    match = re.search(r"copies of OBS input into /cache on node 0: (\d+)", report(done))
    return int(match.group(1))


# ---------------------------------------------------------------- the bundled fixtures pass

@pytest.mark.parametrize("nproc", [1, 2])
def test_module_level_fixture_passes_with_one_and_two_processes(world, nproc):
    world.adapted_fixture("train_module_level.py")
    before = tree(world.code)
    done = world.rehearse("train_module_level.py", "--data", str(world.data), "--nproc", str(nproc),
                          "--", "--epochs", "2")
    assert done.returncode == 0, report(done) + done.stderr.decode()
    assert verdict(done) == "OK: every rank succeeded and 2 files reached train_url"
    assert uploaded(done) == ["epoch0.ckpt", "epoch1.ckpt"]
    assert copies(done) == 1  # once per node, whatever the number of processes
    assert (world.job / "obs/rehearsal/out/epoch1.ckpt").read_text() == "words=4\n"
    assert tree(world.code) == before  # the user's folder is as it was
    ranks = re.findall(r"^  (\d+) +0 +[\d.]+s  logs/rank\d\.log$", report(done), re.MULTILINE)
    assert ranks == [str(r) for r in range(nproc)]


def test_preemption_sigterm_still_delivers_the_outputs(world):
    # SIGTERM at an event, not a time: once both ranks have saved (each marks it with a folder,
    # rank 0 then marks the job's moment for --sigterm-on), while they hold. A timer
    # (--sigterm-after 5) came before the saves when the machine was loaded; --timeout is the
    # ceiling when the moment never comes.
    script = world.adapted_fixture("train_module_level.py")
    saved = 'print("checkpoint saved", flush=True)\n'
    text = script.read_text()
    assert text.count(saved) == 1 and "\nimport time\n" in text, text
    script.write_text(text.replace(saved, saved + (
        'os.mkdir("saved-rank%s" % os.environ["RANK"])\n'
        'if os.environ["RANK"] == "0":\n'
        '    while not all(os.path.isdir("saved-rank%d" % r) for r in range(int(os.environ["WORLD_SIZE"]))):\n'
        '        time.sleep(0.05)\n'
        '    os.mkdir("preempt-now")\n')))
    done = world.rehearse("train_module_level.py", "--data", str(world.data), "--nproc", "2", "--timeout", "300",
                          "--sigterm-on", "preempt-now", "--", "--hold", "3600")
    assert done.returncode == 0, report(done) + done.stderr.decode()
    assert uploaded(done) == ["epoch0.ckpt"]
    assert (world.job / "obs/rehearsal/out/epoch0.ckpt").read_text() == "words=4\n"
    assert report(done).count("-15 (SIGTERM) after SIGTERM") == 2
    assert verdict(done) == "OK: every rank succeeded and 1 file reached train_url"


def test_sigterm_after_a_time_is_a_preemption_too(world):
    # --sigterm-after S is a time by nature: 2 s is ample on a quiet machine for both ranks to
    # have saved (each prints "checkpoint saved" after its save, then holds); when a rank had not
    # printed it by then (a loaded machine), the rehearsal is run again with 4 times the time, so
    # the test neither races nor sleeps 20 s.
    world.adapted_fixture("train_module_level.py")
    for seconds in (2, 8, 32, 128):
        done = world.rehearse("train_module_level.py", "--data", str(world.data), "--nproc", "2", "--timeout", "300",
                              "--sigterm-after", str(seconds), "--", "--hold", "3600")
        logs = [(world.job / "logs" / f"rank{r}.log").read_text() for r in range(2)]
        if all("checkpoint saved\n" in log for log in logs):
            break
    assert done.returncode == 0, report(done) + done.stderr.decode()
    assert uploaded(done) == ["epoch0.ckpt"]
    assert report(done).count("-15 (SIGTERM) after SIGTERM") == 2
    assert verdict(done) == "OK: every rank succeeded and 1 file reached train_url"


@pytest.mark.parametrize("nproc", [1, 2])
def test_helper_and_mindspore_and_tensorflow_fixtures_pass(world, nproc):
    # Two ranks save under the same name in the node's shared folder; rank 0 uploads at its exit
    # once the other has ended (the generated runtime waits for it), so the file is whole.
    for name in ("train_helper.py", "mindspore_8card.py", "tf115_biggan.py"):
        world.adapted_fixture(name)
    (world.code / "dataset" / "celebA").mkdir(parents=True)  # BigGAN reads ./dataset/<name>
    (world.code / "dataset" / "celebA" / "img0.png").write_text("")
    shards = world.data.parent / "shards"  # MindSpore's 8-card layout: a folder per device
    for device in range(nproc):
        (shards / str(device)).mkdir(parents=True)
        (shards / str(device) / f"batch{device}.bin").write_text("")
    expected = {
        "train_helper.py": ["step000.ckpt"],
        # Only global rank 0 uploads, at its exit, after rank 1's: rank 1's checkpoint too.
        "mindspore_8card.py": [f"resnet-{device}.ckpt" for device in range(nproc)],
        "tf115_biggan.py": ["BigGAN.model-1"],
    }
    for name, files in expected.items():
        data = shards if name.startswith("mindspore") else world.data
        done = world.rehearse(name, "--data", str(data), "--nproc", str(nproc))
        assert done.returncode == 0, name + "\n" + report(done) + done.stderr.decode()
        assert uploaded(done) == files, name


def test_pytorch_fixture_passes_on_the_standin(world, torch_python):
    world.adapted_fixture("train_in_main.py")
    done = world.rehearse("train_in_main.py", "--data", str(world.data), "--nproc", "2", "--python", torch_python)
    assert done.returncode == 0, report(done) + done.stderr.decode()
    # Both ranks write metrics.json (the fixture is that simple): rank 0 copies it at its exit once
    # rank 1 has ended, whole and under its own name, however the two were scheduled.
    assert uploaded(done) == ["metrics.json"]
    assert ".incomplete" not in done.stderr.decode()
    assert '"device": "npu"' in (world.job / "obs/rehearsal/out/metrics.json").read_text()


def test_an_output_that_arrives_only_as_incomplete_without_a_preemption_fails_the_job(world):
    # Rank 1 still writes late.bin when rank 0 ends, and rank 0 does not wait for it (a bound of 0 s):
    # late.bin reaches train_url only as late.bin.incomplete. Both ranks succeed and nothing was
    # stopped, so the job did not deliver it. The ranks meet at events (folders), not times.
    script = world.adapted_fixture("train_helper.py")
    text = script.read_text()
    end = "    return 0\n"
    assert text.count(end) == 1 and "import os\n" in text
    script.write_text(text.replace(end, (
        "    import time\n"
        "    if os.environ['RANK'] == '1':\n"
        "        late = open('late.bin', 'w')\n"
        "        late.write('x')\n"
        "        late.flush()\n"
        "        os.mkdir('late-open')\n"
        "        sent = os.path.join(os.environ['NPU_MIGRATE_REHEARSAL_OBS'], 'rehearsal/out/late.bin.incomplete')\n"
        "        while not os.path.exists(sent):\n"
        "            time.sleep(0.05)\n"
        "        late.close()\n"
        "    else:\n"
        "        while not os.path.isdir('late-open'):\n"
        "            time.sleep(0.05)\n") + end))
    done = world.rehearse("train_helper.py", "--data", str(world.data), "--nproc", "2", "--timeout", "300",
                          env={"NPU_MIGRATE_MODELARTS_WAIT": "0"})
    assert done.returncode == 1, report(done) + done.stderr.decode()
    assert uploaded(done) == ["late.bin.incomplete", "step000.ckpt"]
    assert re.match(r"FAILED: `late\.bin` reached train_url only as NAME\.incomplete: a process was still writing it "
                    r"at rank 0's final copy \(see \S+rank0\.log\)$", verdict(done)), verdict(done)
    assert "did not end within 0 s" in (world.job / "logs/rank0.log").read_text()


@pytest.mark.parametrize("name", ["train_no_data_arg.py", "train_no_parser.py"])
def test_fixtures_without_an_output_argument_upload_their_outputs(world, name):
    world.adapted_fixture(name)
    shutil.copytree(world.data, world.code / "dataset")
    done = world.rehearse(name, "--data", str(world.data))
    assert done.returncode == 0, report(done)


def test_a_script_that_saves_nothing_is_told_so(world):
    world.adapted_fixture("train_seed002.py")
    (world.data / "vgg16-397923af.pth").write_text("weights")
    done = world.rehearse("train_seed002.py", "--data", str(world.data))
    assert done.returncode == 1
    assert verdict(done) == "FAILED: nothing reached train_url: the script wrote no file at all"
    assert "loaded 7 bytes of weights" in done.stderr.decode()  # the processes' output, shown live


# ---------------------------------------------------------------- each failure class is caught

def test_nothing_uploaded_names_the_files_the_script_saved(world):
    world.script("train.py", (
        "import argparse\n"
        "parser = argparse.ArgumentParser()\n"
        "parser.add_argument('--data_url')\n"
        "parser.add_argument('--train_url')\n"
        "args, _ = parser.parse_known_args()\n"
        "open('checkpoint.pth.tar', 'w').write('weights')\n"
    ))
    done = world.rehearse("train.py")
    assert done.returncode == 1
    assert verdict(done) == ("FAILED: nothing reached train_url: the script saved `checkpoint.pth.tar` in its "
                             "working folder, never uploaded")
    assert not (world.code / "checkpoint.pth.tar").exists()  # it ran in the copy


ADAPTED_HEAD = (
    "import argparse, os, pathlib, shutil, subprocess, sys\n"
    "parser = argparse.ArgumentParser()\n"
    "parser.add_argument('--data_url')\n"
    "parser.add_argument('--train_url')\n"
    "args, _ = parser.parse_known_args()\n"
)


def not_uploaded(done):
    lines = report(done).splitlines()
    start = next((i for i, line in enumerate(lines) if "files the job wrote that did not reach" in line), None)
    return [] if start is None else [line.strip() for line in lines[start + 1:] if line.startswith("    ")]


@pytest.mark.parametrize("save, name", [
    # the case that was "the script wrote no file at all": a folder beside the working folder
    ("os.makedirs('../outputs', exist_ok=True)\nopen('../outputs/model.bin', 'wb').write(b'w')\n",
     "../outputs/model.bin"),
    ("pathlib.Path('../../runs').mkdir()\npathlib.Path('../../runs/model.bin').write_bytes(b'w')\n",
     "../../runs/model.bin"),
    # outside the job folder: the home folder and an absolute path (HOME and ELSEWHERE are the test's)
    ("p = os.path.expanduser('~/model.bin')\nfd = os.open(p, os.O_WRONLY | os.O_CREAT)\nos.write(fd, b'w')\n"
     "os.close(fd)\n", "~/model.bin"),
    ("open('tmp.bin', 'w').write('w')\nshutil.copy('tmp.bin', os.environ['ELSEWHERE'] + '/model.bin')\n"
     "os.remove('tmp.bin')\n", "{elsewhere}/model.bin"),
    ("open(os.environ['ELSEWHERE'] + '/m.tmp', 'w').write('w')\n"
     "os.replace(os.environ['ELSEWHERE'] + '/m.tmp', os.environ['ELSEWHERE'] + '/model.bin')\n",
     "{elsewhere}/model.bin"),
])
def test_files_written_outside_the_working_folder_are_named_not_missed(world, tmp_path, save, name):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "home").mkdir()
    world.script("train.py", ADAPTED_HEAD + save)
    done = world.rehearse("train.py", env={"HOME": str(tmp_path / "home"), "ELSEWHERE": str(elsewhere)})
    assert done.returncode == 1, report(done) + done.stderr.decode()
    name = name.format(elsewhere=elsewhere.resolve())
    assert not_uploaded(done) == [name]
    assert verdict(done) == (f"FAILED: nothing reached train_url: the script saved `{name}` outside its working "
                             "folder, never uploaded")



@pytest.mark.parametrize("chosen", [True, False])
def test_torch_compiles_cache_is_no_output_of_the_job(world, tmp_path, chosen):
    """torch.compile keeps its kernels and graphs in TORCHINDUCTOR_CACHE_DIR, else in
    torchinductor_<user> of the temporary folder: a rehearsal of rl_games (which compiles by
    default) listed 26 of them as files that did not reach train_url. What the job saves is
    still named (../outputs/model.bin)."""
    import getpass
    import shutil
    import tempfile
    import uuid

    env = {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")} if chosen else {}
    default = os.path.join(tempfile.gettempdir(), "torchinductor_" + getpass.getuser())
    sub = "npu-migrate-test-" + uuid.uuid4().hex  # (the default folder is shared: a folder of the test's own)
    world.script("train.py", ADAPTED_HEAD + (
        f"cache = os.environ.get('TORCHINDUCTOR_CACHE_DIR') or {default!r}\n"
        f"os.makedirs(os.path.join(cache, {sub!r}, 'fxgraph'), exist_ok=True)\n"
        f"open(os.path.join(cache, {sub!r}, 'fxgraph', 'graph.bin'), 'wb').write(b'g')\n"
        "os.makedirs('../outputs', exist_ok=True)\n"
        "open('../outputs/model.bin', 'wb').write(b'w')\n"))
    try:
        done = world.rehearse("train.py", env=env)
    finally:
        shutil.rmtree(os.path.join(default, sub), ignore_errors=True)
    assert done.returncode == 1, report(done) + done.stderr.decode()
    assert not_uploaded(done) == ["../outputs/model.bin"]

def test_what_a_torch_job_saves_outside_its_folder_with_torch_and_numpy_is_seen(world, torch_python):
    world.script("train.py", ADAPTED_HEAD + (
        "import numpy as np, torch\n"
        "os.makedirs('../out', exist_ok=True)\n"
        "torch.save({'w': torch.ones(2)}, '../out/model.pt')\n"  # torch's C++ writer: no Python open()
        "np.save('../out/features.npy', np.zeros(3))\n"
    ))
    done = world.rehearse("train.py", "--python", torch_python)
    assert done.returncode == 1, report(done) + done.stderr.decode()
    assert not_uploaded(done) == ["../out/features.npy", "../out/model.pt"]


@pytest.mark.parametrize("uploader, why", [
    ("subprocess.run(['obsutil', 'cp', 'model.bin', args.train_url])\n", "ran `obsutil` (rank 0)"),
    ("os.system('obsutil cp model.bin ' + args.train_url)\n", "ran `obsutil` (rank 0)"),
    ("import boto3\n", "used `boto3` (rank 0)"),
])
def test_an_upload_the_rehearsal_cannot_see_is_neither_ok_nor_failed(world, tmp_path, uploader, why):
    """A job that uploads with its own tool may deliver its outputs on the platform: the
    rehearsal says it cannot tell (exit 3), not FAILED (and never OK)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "obsutil").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "obsutil").chmod(0o755)
    (world.stubs / "boto3").mkdir()
    (world.stubs / "boto3" / "__init__.py").write_text("")
    world.script("train.py", ADAPTED_HEAD + "open('model.bin', 'w').write('w')\n" + uploader)
    done = world.rehearse("train.py", env={"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
    assert done.returncode == 3, report(done) + done.stderr.decode()
    assert verdict(done) == (f"CANNOT TELL: nothing reached train_url through MoXing, but the job {why}, which may "
                             "upload its outputs in a way the rehearsal does not see")


def test_outputs_copied_to_another_obs_place_are_named_not_called_never_uploaded(world):
    world.script("train.py", ADAPTED_HEAD + (
        "import moxing as mox\n"
        "os.makedirs('out')\n"
        "open('out/model.bin', 'w').write('w')\n"
        "mox.file.copy_parallel('out', 'obs://mybucket/results/')\n"
    ))
    done = world.rehearse("train.py")
    assert done.returncode == 1, report(done) + done.stderr.decode()
    assert "  copies to OBS outside train_url: `obs://mybucket/results/`\n" in report(done)
    assert verdict(done) == ("FAILED: nothing reached train_url: the job copied its outputs to "
                             "`obs://mybucket/results/` instead (the job's output path stays empty)")


def test_programs_that_upload_nothing_leave_the_verdict_certain(world):
    world.script("train.py", ADAPTED_HEAD + "subprocess.run(['git', '--version'], stdout=subprocess.DEVNULL)\n"
                                            "open('model.bin', 'w').write('w')\n")
    done = world.rehearse("train.py")
    assert done.returncode == 1
    assert verdict(done) == ("FAILED: nothing reached train_url: the script saved `model.bin` in its working "
                             "folder, never uploaded")


def test_an_output_written_before_the_uploader_set_up_still_reaches_train_url(world):
    """Another process of the node (or this one, before its modelarts_setup) may write an output
    between this process's start and its set-up, where the files already there are noted: those
    are the job's, not what an earlier job left (a file's time has a coarse clock, so one that
    another rank rewrote with the same size in the same tick looked unchanged, and the README's
    two-process transcript at times uploaded nothing)."""
    world.script("npu_migrate_modelarts.py", render_runtime())
    world.script("train.py", (
        "import argparse, subprocess, sys\n"
        "from npu_migrate_modelarts import modelarts_setup\n"
        # another process of the node writes an output (after this one imported the module)
        "subprocess.run([sys.executable, '-c', \"import os; os.makedirs('checkpoints'); \"\n"
        "                \"open('checkpoints/epoch0.ckpt', 'w').write('words=4')\"], check=True)\n"
        "parser = argparse.ArgumentParser()\n"
        "parser.add_argument('--save_dir', default='checkpoints')\n"
        "parser.add_argument('--data_url')\n"
        "parser.add_argument('--train_url')\n"
        "args = modelarts_setup(parser.parse_known_args()[0], outputs=['save_dir'])\n"
    ))
    done = world.rehearse("train.py")
    assert done.returncode == 0, report(done) + done.stderr.decode()
    assert uploaded(done) == ["epoch0.ckpt"]


def test_a_crash_on_the_arguments_the_platform_adds(world):
    world.script("train.py", (
        "import argparse\n"
        "parser = argparse.ArgumentParser()\n"
        "parser.add_argument('--data_url')\n"
        "parser.add_argument('--train_url')\n"
        "args = parser.parse_args()\n"
    ))
    done = world.rehearse("train.py")
    assert done.returncode == 1
    line = verdict(done)
    assert line.startswith("FAILED: rank 0 failed (exit status 2; see ")
    assert re.search(r"train\.py: error: unrecognized arguments: --init_method=tcp://127\.0\.0\.1:\d+ --num_gpus=1; "
                     r"nothing reached train_url", line), line


def test_one_rank_failing_fails_the_job(world):
    world.adapted_fixture("train_module_level.py")
    # Rank 1 fails before it saves (rank 0 waits at its exit for it to end either way).
    text = (world.code / "train_module_level.py").read_text().replace(
        "if args.crash:", "if False:").replace(
        "os.makedirs(args.save_dir", "if args.crash and os.environ['RANK'] == '1':\n"
        "    raise RuntimeError('diverged')\nos.makedirs(args.save_dir", 1)
    world.script("train_module_level.py", text)
    done = world.rehearse("train_module_level.py", "--data", str(world.data), "--nproc", "2", "--", "--crash")
    assert done.returncode == 1
    assert re.match(r"FAILED: rank 1 failed \(exit status 1; see \S+rank1\.log\): RuntimeError: diverged$", verdict(done))
    assert uploaded(done) == ["epoch0.ckpt"]  # rank 0 still uploaded: the failure is rank 1's alone


def _step_checks(tmp_path, ranks, checks=None):
    """rehearse's distributed checks on the records of ranks given as (exit status, training steps
    through DistributedDataParallel), every rank with the same parameters: the problems (no process
    runs); `checks`, a list, gets the checks that held."""
    from npu_migrate.rehearse import RankResult, RehearsalOptions, RehearsalResult, _distributed_checks

    records = {rank: {"rank": rank, "pid": rank, "distributed": True, "params": ["a" * 64], "steps": [steps]}
               for rank, (_, steps) in enumerate(ranks)}
    result = RehearsalResult(options=RehearsalOptions(script="train.py", nproc=len(ranks)), job_dir=tmp_path,
                             command=[], ranks=[RankResult(rank=rank, pid=rank, returncode=status)
                                                for rank, (status, _) in enumerate(ranks)],
                             copies_in=[], uploaded=[], not_uploaded=[], seconds=0, timed_out=False, calls=0)
    problems = _distributed_checks(result, tmp_path, records, [])
    if checks is not None:
        checks.extend(result.checks)
    return problems


def test_a_rank_that_left_after_fewer_steps_is_named_as_why_another_failed(tmp_path):
    # The Opacus char-LSTM on two processes (tests/test_rehearse_corpus.py, CHAR_LSTM_EMPTY_BATCH_SEED): rank 1's
    # second Poisson batch was empty and skipped, it ended well after one step; rank 0 died in its second.
    assert _step_checks(tmp_path, [(1, 2), (0, 1)]) == [
        "the ranks took different numbers of training steps through DistributedDataParallel (rank 0: 2, failed; "
        "rank 1: 1, exit status 0): a rank that ends after fewer steps leaves the others waiting in a collective "
        "until it fails them (every rank's data loader must give the same number of batches)"]
    # Not when every rank ended well (uneven inputs under DDP's join() do), nor when the rank that failed took
    # fewer steps (it failed of its own: the others then wait for it, not the other way round), nor equal steps.
    assert _step_checks(tmp_path, [(0, 2), (0, 1)]) == []
    assert _step_checks(tmp_path, [(1, 1), (0, 2)]) == []
    assert _step_checks(tmp_path, [(1, 2), (0, 2)]) == []


def test_a_job_whose_ranks_never_trained_through_distributeddataparallel_fails(tmp_path):
    # cleanrl's ppo.py taken to two NPUs (tests/test_rehearse_corpus.py): its loss comes from
    # `unwrap_model(agent).get_action_and_value(...)`, so no forward with gradients on goes through the
    # wrapper, DDP never averages a gradient, and the ranks agree only because each did the same work.
    assert _step_checks(tmp_path, [(0, 0), (0, 0)]) == [
        "no rank took a training step through DistributedDataParallel (rank 0: 0, rank 1: 0 forward passes with "
        "gradients on): the gradients were never averaged, each rank trained its copy of the model alone (a loss "
        "computed by another method of the model, `unwrap_model(model).method(...)`, bypasses the wrapper: NPU387)"]
    # Not when one rank took a step, nor when a rank failed (it may have failed before its first step).
    assert _step_checks(tmp_path, [(0, 0), (0, 1)]) == []
    assert _step_checks(tmp_path, [(1, 0), (0, 0)]) == []


def _cpu_problems(tmp_path, *ranks):
    """rehearse's problems for ranks given as (optimizer steps, put anything on the NPU) records, every rank
    ended well and a file reached train_url (no process runs)."""
    from npu_migrate.rehearse import RankResult, RehearsalOptions, RehearsalResult, _problems

    records = {rank: {"rank": rank, "pid": rank, "torch": True, "optimizer_steps": steps, "npu": npu}
               for rank, (steps, npu) in enumerate(ranks)}
    result = RehearsalResult(options=RehearsalOptions(script="train.py", nproc=len(ranks)), job_dir=tmp_path,
                             command=[], ranks=[RankResult(rank=rank, pid=rank, returncode=0) for rank in records],
                             copies_in=[], uploaded=[("model.pt", 8)], not_uploaded=[], seconds=0, timed_out=False,
                             calls=0)
    return _problems(result, 1, records)


def test_a_rank_that_trained_without_ever_using_the_npu_fails_the_job(tmp_path):
    # cleanrl's ppo.py rehearsed with `--cuda False` (tests/test_rehearse_corpus.py): it trains, and on the CPU.
    assert _cpu_problems(tmp_path, (32, False)) == [
        "rank 0 trained on the CPU (32 optimizer steps, nothing put on the NPU): the script chose the CPU, as it "
        "would on the NPU machine (a device test left on CUDA, such as `torch.cuda.is_available()`, is False there "
        "too, or an option of the script's own)"]
    assert _cpu_problems(tmp_path, (2, False), (1, True), (2, False)) == [
        "ranks 0, 2 trained on the CPU (rank 0: 2 optimizer steps, nothing put on the NPU): the script chose the "
        "CPU, as it would on the NPU machine (a device test left on CUDA, such as `torch.cuda.is_available()`, is "
        "False there too, or an option of the script's own)"]
    # On the NPU, or without an optimizer step (a job that evaluates, prepares data), nothing to say.
    assert _cpu_problems(tmp_path, (32, True)) == []
    assert _cpu_problems(tmp_path, (0, False)) == []


def test_ranks_that_hold_the_same_parameters_are_said_to_only_when_every_rank_ended_well(tmp_path):
    # The char-LSTM flake's failing rehearsal said "the 2 ranks hold the same parameters at exit" among the
    # checks that held, under its FAILED verdict: the ranks held what they had when rank 0 died, not the
    # trained model's parameters.
    checks = []
    _step_checks(tmp_path, [(1, 2), (0, 1)], checks)
    assert checks == []
    _step_checks(tmp_path, [(0, 2), (0, 2)], checks)
    assert checks == ["the 2 ranks hold the same parameters at exit (1 model in DistributedDataParallel)"]


@pytest.mark.parametrize("module, why", [
    ("no_such_package_npu_migrate.models", "(no_such_package_npu_migrate is not installed in {python}: "
                                           "install the script's dependencies there)"),
    # a release without the module: MindSpore 1.x scripts import mindspore.dataset.vision.c_transforms
    ("click.c_transforms", "(click {version} in {python} has no module click.c_transforms: "
                           "the script was written for another release of click)"),
])
def test_a_module_the_interpreter_lacks_says_whether_the_package_or_the_release_is_wrong(world, module, why):
    from importlib.metadata import version

    world.adapted_fixture("train_module_level.py")
    text = (world.code / "train_module_level.py").read_text()
    world.script("train_module_level.py", text.replace("import argparse\n", f"import argparse\nimport {module}\n", 1))
    done = world.rehearse("train_module_level.py", "--data", str(world.data))
    assert done.returncode == 1
    named = module.split(".")[0] if module.startswith("no_such") else module  # Python names the missing part
    expected = (f"ModuleNotFoundError: No module named '{named}' "
                + why.format(python=sys.executable, version=version("click")))
    assert expected + "; nothing reached train_url: the script wrote no file at all" in verdict(done)


def test_a_job_of_two_nodes_delivers_every_node_s_outputs(world):
    """--nodes 2: two groups of two processes, each node with its own working folder and /cache
    (ModelArts' VC_TASK_INDEX and torchrun's GROUP_RANK say which), one OBS. Every rank saves
    its shard and metrics.json: node 0's reach train_url, node 1's train_url/node-1/ (the
    runtime's first process of each node copies its node's files), the data is copied once per
    node, and no file is reported as written by several ranks across the nodes."""
    world.script("npu_migrate_modelarts.py", render_runtime())
    world.script("train.py", (
        "import argparse, os\n"
        "from npu_migrate_modelarts import modelarts_setup\n"
        "parser = argparse.ArgumentParser()\n"
        "parser.add_argument('--data', default='data')\n"
        "parser.add_argument('--output_dir', default='out')\n"
        "parser.add_argument('--data_url')\n"
        "parser.add_argument('--train_url')\n"
        "args = modelarts_setup(parser.parse_known_args()[0], data=['data'], outputs=['output_dir'])\n"
        "os.makedirs(args.output_dir, exist_ok=True)\n"
        "with open(os.path.join(args.output_dir, 'shard%s.pt' % os.environ['RANK']), 'w') as f:\n"
        "    f.write(','.join(sorted(os.listdir(args.data))))\n"
        "with open(os.path.join(args.output_dir, 'metrics.json'), 'w') as f:\n"
        "    f.write(os.environ['GROUP_RANK'])\n"
    ))
    done = world.rehearse("train.py", "--data", str(world.data), "--nproc", "2", "--nodes", "2")
    assert done.returncode == 0, report(done) + done.stderr.decode()
    assert report(done).startswith("rehearsal of train.py: 2 processes on each of 2 nodes, job folder ")
    assert uploaded(done) == ["metrics.json", "node-1/metrics.json", "node-1/shard2.pt", "node-1/shard3.pt",
                              "shard0.pt", "shard1.pt"]
    assert (world.job / "obs/rehearsal/out/node-1/metrics.json").read_text() == "1"
    assert (world.job / "obs/rehearsal/out/node-1/shard3.pt").read_text() == "a.txt,b.txt"
    assert re.findall(r"copies of OBS input into /cache on node (\d): (\d)", report(done)) == [("0", "1"), ("1", "1")]
    assert "<job>/node1/cache/data" in report(done)
    assert verdict(done) == "OK: every rank succeeded and 6 files reached train_url"


def test_data_copied_twice_on_one_node(world):
    # The MindSpore tutorial's pattern: every device copies the whole input for itself.
    world.script("train.py", (
        "import argparse, os\n"
        "import moxing as mox\n"
        "parser = argparse.ArgumentParser()\n"
        "parser.add_argument('--data_url')\n"
        "parser.add_argument('--train_url')\n"
        "args, _ = parser.parse_known_args()\n"
        "local = 'data_%s' % os.environ['DEVICE_ID']\n"
        "mox.file.copy_parallel(src_url=args.data_url, dst_url=local)\n"
        "os.makedirs('out', exist_ok=True)\n"
        "open('out/model.ckpt', 'w').write(','.join(sorted(os.listdir(local))))\n"
        "if os.environ['RANK_ID'] == '0':\n"
        "    mox.file.copy_parallel(src_url='out', dst_url=args.train_url)\n"
    ))
    done = world.rehearse("train.py", "--data", str(world.data), "--nproc", "2")
    assert done.returncode == 1
    assert copies(done) == 2
    assert re.match(r"FAILED: obs://rehearsal/data was copied 2 times on one node \(rank [01] to data_[01], "
                    r"rank [01] to data_[01]\): copy once per node$", verdict(done)), verdict(done)
    assert uploaded(done) == ["model.ckpt"]


def test_timeout_stops_every_process_and_names_the_ranks_still_running(world):
    world.script("train.py", (
        "import argparse, os, subprocess, sys, time\n"
        "parser = argparse.ArgumentParser()\n"
        "parser.add_argument('--data_url')\n"
        "parser.add_argument('--train_url')\n"
        "args, _ = parser.parse_known_args()\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(3600)'])\n"
        "with open('child%s.tmp' % os.environ['RANK'], 'w') as f:\n"
        "    f.write(str(child.pid))\n"
        "os.replace('child%s.tmp' % os.environ['RANK'], 'child%s.pid' % os.environ['RANK'])\n"
        "if os.environ['RANK'] == '0':\n"
        "    while not os.path.exists('child1.pid'):  # rank 1 and its child are running\n"
        "        time.sleep(0.05)\n"
        "    sys.exit(0)\n"
        "time.sleep(3600)\n"
    ))
    # A timeout is a time by nature, and rank 0 must have exited before it, once rank 1 had
    # started its child: 4 s is ample on a quiet machine; when rank 0 was still running then too
    # (a loaded machine), the rehearsal is run again with 4 times the time, so the test neither
    # races nor sleeps 20 s. Rank 1 never ends by itself, whatever the timeout.
    for timeout in (4, 16, 64, 256):
        done = world.rehearse("train.py", "--nproc", "2", "--timeout", str(timeout))
        if not verdict(done).startswith(f"FAILED: timed out after {timeout} s: ranks 0, 1 still running"):
            break
    assert done.returncode == 1
    assert verdict(done).startswith(f"FAILED: timed out after {timeout} s: rank 1 still running (stopped); ")
    child = int((world.job / "code/project/child1.pid").read_text())
    assert _gone(child), "the process group of rank 1 was not stopped"


def _gone(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True
    return "State:\tZ" in status  # a zombie that nobody reaps in this container: dead all the same


# ---------------------------------------------------------------- bad input: one line

@pytest.mark.parametrize("name, why", [("nope.py", "no such file"), ("folder", "not a file")])
def test_missing_script(world, name, why):
    (world.code / "folder").mkdir(parents=True)
    done = world.rehearse(name)
    assert done.returncode == 2
    assert done.stdout == b""
    assert done.stderr.decode() == f"npu-migrate rehearse: error: {name}: {why}\n"


def test_script_not_adapted_suggests_the_command(world):
    world.script("train_module_level.py", (BEFORE / "train_module_level.py").read_text())
    done = world.rehearse("train_module_level.py")
    assert done.returncode == 2
    assert done.stderr.decode() == (
        "npu-migrate rehearse: error: train_module_level.py is not adapted for ModelArts (it takes no "
        "--data_url/--train_url): run `npu-migrate train_module_level.py --modelarts --write` first\n")


def test_torch_missing_in_the_interpreter_names_it(world):
    world.adapted_fixture("train_in_main.py")
    python = sys.executable  # npu-migrate's own environment: no torch in it
    done = world.rehearse("train_in_main.py", "--python", python)
    assert done.returncode == 2
    assert done.stderr.decode() == (
        f"npu-migrate rehearse: error: torch is not installed in {python}: install it there (for the CPU: pip "
        "install torch) or name an interpreter that has it with --python\n")


def test_data_that_is_not_a_folder_is_bad_input(world):
    world.adapted_fixture("train_module_level.py")
    done = world.rehearse("train_module_level.py", "--data", "nowhere")
    assert done.returncode == 2
    assert done.stderr.decode() == "npu-migrate rehearse: error: --data nowhere: not a folder\n"
    assert not world.job.exists()


DDP_TRAINING = '''\
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data_dir", default="data")
    parser.add_argument("--output_dir", default="out")
    parser.add_argument("--local_rank", type=int, default=int(os.environ.get("LOCAL_RANK", 0)))
    args = parser.parse_args()
    dist.init_process_group(backend="nccl")
    torch.cuda.set_device(args.local_rank)
    device = torch.device("cuda:%d" % args.local_rank)
    model = DDP(nn.Linear(4, 2).cuda(), device_ids=[args.local_rank], output_device=args.local_rank)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    samples = len(os.listdir(args.data_dir))
    x = torch.full((8, 4), float(samples), device=device)
    loss = model(x).pow(2).mean()
    loss.backward()
    optimizer.step()
    total = torch.tensor([1.0]).cuda()
    dist.all_reduce(total)
    dist.barrier()
    if dist.get_rank() == 0:
        os.makedirs(args.output_dir, exist_ok=True)
        torch.save(model.module.state_dict(), os.path.join(args.output_dir, "model.pt"))
        print("world", int(total.item()), "backend", dist.get_backend())
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
'''


def test_migrated_ddp_script_trains_on_two_processes(world, torch_python, run_cli):
    world.script("train_ddp.py", DDP_TRAINING)
    migrated = run_cli("train_ddp.py", "--modelarts", "--write", cwd=world.code)
    assert migrated.returncode == 0, migrated.stderr.decode()
    text = (world.code / "train_ddp.py").read_text()
    assert '"hccl"' in text and "cuda" not in text
    done = world.rehearse("train_ddp.py", "--data", str(world.data), "--nproc", "2", "--python", torch_python)
    assert done.returncode == 0, report(done) + done.stderr.decode()
    assert uploaded(done) == ["model.pt"]
    assert "[rank 0] world 2 backend hccl" in done.stderr.decode()  # hccl ran (on gloo)


def test_a_local_obs_folder_of_your_own_is_used_and_only_new_uploads_count(world, tmp_path):
    world.adapted_fixture("train_module_level.py")
    obs = tmp_path / "my-obs"
    (obs / "rehearsal" / "data").mkdir(parents=True)
    (obs / "rehearsal" / "data" / "words.txt").write_text("a b c")
    (obs / "rehearsal" / "out").mkdir()
    (obs / "rehearsal" / "out" / "old.ckpt").write_text("from an earlier job")
    done = world.rehearse("train_module_level.py", "--obs", str(obs))
    assert done.returncode == 0, report(done) + done.stderr.decode()
    assert uploaded(done) == ["epoch0.ckpt"]  # not old.ckpt, which was there before
    assert (obs / "rehearsal" / "out" / "epoch0.ckpt").read_text() == "words=3\n"
    assert "read 3 words from" in done.stderr.decode()


def test_code_folder_above_the_script_is_copied_whole(world, tmp_path):
    world.script("helpers.py", "def save(path):\n    open(path, 'w').write('ok')\n")
    (world.code / "tools").mkdir()
    (world.code / "tools" / "train.py").write_text(
        "import argparse, os, sys\n"
        "sys.path.insert(0, os.getcwd())\n"  # the code folder is the working folder
        "import helpers\n"
        "parser = argparse.ArgumentParser()\n"
        "parser.add_argument('--data_url')\n"
        "parser.add_argument('--train_url')\n"
        "args, _ = parser.parse_known_args()\n"
        "import moxing as mox\n"
        "os.makedirs('out')\n"
        "helpers.save('out/done.txt')\n"
        "mox.file.copy_parallel('out', args.train_url)\n")
    done = world.rehearse("tools/train.py", "--code", ".")
    assert done.returncode == 0, report(done) + done.stderr.decode()
    assert uploaded(done) == ["done.txt"]
    assert "  command: python code/project/tools/train.py " in report(done).replace("python3", "python")


def test_job_folder_inside_the_code_folder_is_refused_before_anything_is_written(world, run_process):
    run_cli = run_process
    world.adapted_fixture("train_module_level.py")
    before = tree(world.code)
    done = run_cli("rehearse", "train_module_level.py", "--job-dir", "job", cwd=world.code)
    assert done.returncode == 2
    assert done.stderr.decode().startswith("npu-migrate rehearse: error: --job-dir job lies inside the code folder ")
    assert tree(world.code) == before and not (world.code / "job").exists()


# ---------------------------------------------------------------- README's transcripts are what the commands print

def _readme_transcripts():
    """Each ```console block of README.md that runs `npu-migrate rehearse`: its commands and the
    lines it shows after them."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```console\n(.*?)```", text, re.S)
    found = []
    for block in blocks:
        lines = block.splitlines()
        if not any(line.startswith("$ npu-migrate rehearse ") for line in lines):
            continue
        commands = [line[2:] for line in lines if line.startswith("$ ")]
        found.append((commands, [line for line in lines if not line.startswith("$ ")]))
    return found


def _normalised(lines, tmp: str):
    """Up to what changes from run to run: ports, process ids, times, the temporary folder."""
    out = []
    for line in lines:
        line = line.replace(tmp, "/tmp")
        line = re.sub(r"npu-migrate-rehearsal-\w+", "npu-migrate-rehearsal-X", line)
        line = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:PORT", line)
        line = re.sub(r"rank \d+ \(pid \d+\)", "rank R (pid N)", line)
        line = re.sub(r" +\d+\.\ds  ", " T  ", line)
        line = re.sub(r"wall time \d+\.\d s", "wall time T", line)
        line = re.sub(r"MoXing calls: \d+", "MoXing calls: N", line)
        line = re.sub(r"command: python3? ", "command: python ", line)
        out.append(line)
    return out


# What the generated code prints depending on when each process gets where: the input is copied
# by whichever process of the node comes first (the others wait); a checkpoint written during a
# periodic upload is copied again (another "copying" line, another MoXing call).
RACES = re.compile(r"\[modelarts\] (waiting for another process|\S+ changed while it was copied|copying \d+ file"
                   r"|copying obs://)")


def _by_rank(lines):
    """Each rank's lines in order, but the racy ones; and what the racy ones said, whoever printed
    them (the input copied once; outputs copied)."""
    ranks: Dict[str, list] = {}
    said = set()
    copies_in = 0
    for line in lines:
        race = RACES.search(line)
        if race:
            copies_in += race.group(1) == "copying obs://"
            said.add(race.group(1) if race.group(1).startswith("copying") else "")
            continue
        ranks.setdefault(line.split("]", 1)[0], []).append(line)
    return ranks, copies_in, said - {""}


@pytest.mark.parametrize("commands, shown", _readme_transcripts(), ids=lambda v: v[-1] if isinstance(v, list)
                         and v and v[0].startswith("npu-migrate") else "")
def test_readme_rehearse_transcripts_are_what_the_commands_print(tmp_path, run_process, commands, shown):
    project, corpus = tmp_path / "project", tmp_path / "corpus"
    project.mkdir()
    corpus.mkdir()
    (corpus / "a.txt").write_text("one two three")
    (corpus / "b.txt").write_text("four")
    shutil.copy(BEFORE / "train_module_level.py", project / "train.py")
    shutil.copy(ROOT / "fixtures" / "modelarts" / "readme" / "finetune.py", project / "finetune.py")
    env = {"TMPDIR": str(tmp_path)}
    for command in commands:
        args = [a.replace("/tmp/", f"{tmp_path}/") for a in shlex.split(command)[1:]]
        done = run_process(*args, cwd=project, env=env)
    expected = _normalised(shown, "/tmp")
    stderr = _normalised(done.stderr.decode().splitlines(), str(tmp_path))
    stdout = _normalised(done.stdout.decode().splitlines(), str(tmp_path))
    # the ranks' lines come as the processes print them: in order within a rank
    assert _by_rank(stderr) == _by_rank([line for line in expected if line.startswith("[rank ")])
    assert stdout == [line for line in expected if not line.startswith("[rank ")]
    assert done.returncode == (0 if expected[-1].startswith("OK:") else 1)
