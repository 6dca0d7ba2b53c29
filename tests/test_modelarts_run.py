"""Adapted entry scripts, executed as a ModelArts job would run them.

Each test adapts a fixture from fixtures/modelarts/before/ with `--modelarts` options pointing the
local folders into tmp_path, then runs it in a subprocess (sys.executable) with the fake MoXing of
tests/fake_moxing on PYTHONPATH: `obs://bucket/...` is the folder tmp_path/obs/bucket/..., and
every MoXing call lands in a log the tests count. Framework imports (torch, tensorflow, mindspore)
resolve to a few stub lines written into tmp_path: the scripts only do file I/O and argparse.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from helpers import CEILING, read_until
from npu_migrate.dispatch import migrate_source
from npu_migrate.options import Options

# Each test runs a job or the command line in processes of its own (conftest.py: slow).
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
BEFORE = ROOT / "fixtures" / "modelarts" / "before"
FAKE_MOXING = Path(__file__).resolve().parent / "fake_moxing"
PYTHON37 = Path("/root/.pyenv/versions/3.7.16/bin/python3.7")
NEVER = "3600"  # --hold for a job that is stopped with SIGTERM: it does not end by itself first

# Environment a launcher sets; cleared so the tests' own environment cannot leak in.
LAUNCHER_VARS = ("RANK", "RANK_ID", "OMPI_COMM_WORLD_RANK", "WORLD_SIZE", "RANK_SIZE", "LOCAL_RANK", "DEVICE_ID",
                 "VC_TASK_INDEX", "VC_WORKER_NUM", "MA_NUM_HOSTS", "GROUP_RANK", "MS_ROLE", "MS_NODE_ID", "MS_WORKER_NUM",
                 "MA_VJ_NAME", "TORCHELASTIC_RUN_ID", "NPU_MIGRATE_MODELARTS_CACHE", "PYTHONPATH")

STUBS = {
    # torch.save: with FAKE_TORCH_SAVE_STALL=N, the Nth save to a path stops halfway through the
    # file, says so and waits (for the SIGTERM of a test).
    "torch/__init__.py": (
        "import os, time\n"
        "from . import distributed\n\n_saves = []\n\n\n"
        "def manual_seed(seed):\n    pass\n\n\n"
        "def save(obj, f):\n"
        "    if not isinstance(f, str):\n        f.write(repr(obj).encode())\n        return\n"
        "    _saves.append(f)\n"
        "    with open(f, 'w') as out:\n"
        "        if str(len(_saves)) == os.environ.get('FAKE_TORCH_SAVE_STALL'):\n"
        "            out.write(repr(obj)[:10])\n            out.flush()\n"
        "            print('torch.save: writing ' + f, flush=True)\n"
        "            for _ in range(3600):\n                time.sleep(1)\n"
        "        out.write(repr(obj))\n\n\n"
        "class cuda:\n    is_available = staticmethod(lambda: False)\n    set_device = staticmethod(lambda d: None)\n\n\n"
        "class npu:\n    is_available = staticmethod(lambda: False)\n    set_device = staticmethod(lambda d: None)\n"
    ),
    "torch/distributed/__init__.py": (
        "def init_process_group(backend=None, **kwargs):\n    pass\n\n\n"
        "def destroy_process_group():\n    pass\n"
    ),
    # torchrun: --nproc_per_node processes with the variables it sets; SIGTERM passed on.
    "torch/distributed/run.py": (
        "import os, signal, subprocess, sys, uuid\n"
        "args = sys.argv[1:]\n"
        "options = [a for a in args[:args.index(next(a for a in args if not a.startswith('--')))]]\n"
        "rest = args[len(options):]\n"
        "n = int(next(a.split('=')[1] for a in options if a.startswith('--nproc_per_node=')))\n"
        "with open(os.environ['FAKE_TORCHRUN_LOG'], 'a') as log:\n"
        "    log.write(' '.join(args) + '\\n')\n"
        "run_id = uuid.uuid4().hex\n"
        "procs = []\n"
        "signal.signal(signal.SIGTERM, lambda s, f: [p.send_signal(s) for p in procs])  # before any starts\n"
        "for r in range(n):\n"
        "    procs.append(subprocess.Popen([sys.executable] + rest, env=dict(os.environ, LOCAL_RANK=str(r), RANK=str(r),\n"
        "                 WORLD_SIZE=str(n), LOCAL_WORLD_SIZE=str(n), TORCHELASTIC_RUN_ID=run_id)))\n"
        "codes = [p.wait() for p in procs]\n"
        "sys.exit(1 if any(codes) else 0)\n"
    ),
    "torchvision/__init__.py": "",
    "torchvision/datasets.py": (
        "import os\n\n\n"
        "def MNIST(root, train=True, download=False, transform=None):\n"
        "    os.makedirs(os.path.join(root, 'MNIST', 'raw'), exist_ok=True)\n"
        "    with open(os.path.join(root, 'MNIST', 'raw', 'train-images-idx3-ubyte'), 'w') as f:\n"
        "        f.write('60000')\n"
        "    return list(range(60))\n"
    ),
    "torch_npu/__init__.py": "",
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
    "mindspore/communication/__init__.py": "",
    "mindspore/communication/management.py": "def init():\n    pass\n\n\ndef get_rank():\n    return 0\n",
    "mindspore/context.py": (
        "class ParallelMode:\n    DATA_PARALLEL = 'data_parallel'\n\n\n"
        "def set_auto_parallel_context(**kwargs):\n    pass\n\n\n"
        "def set_context(**kwargs):\n    pass\n\n\nGRAPH_MODE = 0\n"
    ),
}


class Job:
    """One tmp_path world: an OBS bucket folder, the node's /cache, a working folder."""

    def __init__(self, tmp_path: Path, moxing: bool = True) -> None:
        self.root = tmp_path
        self.obs = tmp_path / "obs"
        self.log = tmp_path / "obs.log"
        self.cache = tmp_path / "cache"
        self.work = tmp_path / "work"
        self.work.mkdir(parents=True)
        stubs = tmp_path / "stubs"
        for name, text in STUBS.items():
            (stubs / name).parent.mkdir(parents=True, exist_ok=True)
            (stubs / name).write_text(text)
        self.path = [str(FAKE_MOXING)] if moxing else []
        self.path.append(str(stubs))

    def adapt(self, name: str, **options) -> Path:
        """The fixture adapted with --modelarts (folders in tmp_path unless given), in work/."""
        options.setdefault("modelarts_data_dir", str(self.cache / "data"))
        options.setdefault("modelarts_output_dir", str(self.cache / "output"))
        text = (BEFORE / name).read_text()
        result = migrate_source(text, name, Options(modelarts=True, **options))
        assert result.error is None and result.changed
        script = self.work / name
        script.write_text(result.new_text)
        for path, generated in result.extra_files.items():  # the runtime module beside it
            (self.work / path).write_text(generated)
        return script

    def original(self, name: str) -> Path:
        script = self.work / ("original_" + name)
        shutil.copy(BEFORE / name, script)
        return script

    def put(self, url: str, files: Dict[str, str]) -> None:
        """Upload files under obs://bucket/... (or write them to a local folder)."""
        folder = self.obs / url[len("obs://"):] if url.startswith("obs://") else Path(url)
        for name, text in files.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(text)

    def listing(self, url: str) -> List[str]:
        folder = self.obs / url[len("obs://"):] if url.startswith("obs://") else Path(url)
        if not folder.is_dir():
            return []
        return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())

    def env(self, **extra: str) -> Dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS}
        env.update(PYTHONPATH=os.pathsep.join(self.path), FAKE_OBS_ROOT=str(self.obs), FAKE_OBS_LOG=str(self.log),
                   PYTHONDONTWRITEBYTECODE="1", PYTHONFAULTHANDLER="1")  # (stacks on SIGABRT: Job.stop)
        env.update(extra)
        return env

    def command(self, script: Path, *args: str, python: str = sys.executable) -> List[str]:
        return [python, str(script), *args]

    def run(self, script: Path, *args: str, python: str = sys.executable, cwd: Path = None, **env: str):
        return subprocess.run(self.command(script, *args, python=python), cwd=cwd or self.work,
                              env=self.env(**env), capture_output=True, text=True, timeout=CEILING)

    def start(self, script: Path, *args: str, **env: str) -> subprocess.Popen:
        # A session of its own: what the job started (torchrun's processes) can be stopped with it.
        return subprocess.Popen(self.command(script, *args), cwd=self.work, env=self.env(**env),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)

    def stop(self, proc: subprocess.Popen) -> Tuple[str, str]:
        """SIGTERM to a started job; its output once it has ended (on its own, after its handlers)
        and every process it started has let go of its output. A job still running CEILING after
        SIGTERM (or processes it left holding its output: a SIGTERM not passed on) fails the test
        with where each of their threads was (SIGABRT to the job's session: the job runs with
        PYTHONFAULTHANDLER) and what it printed."""
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.communicate(timeout=CEILING)
        except subprocess.TimeoutExpired:
            self._signal_session(proc, signal.SIGABRT)
            try:
                stdout, stderr = proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                self._signal_session(proc, signal.SIGKILL)
                stdout, stderr = proc.communicate()
            raise AssertionError(f"the job was still running {CEILING} s after SIGTERM; stdout: {stdout!r}; "
                                 f"stderr (with its threads' stacks): {stderr!r}") from None

    @staticmethod
    def _signal_session(proc: subprocess.Popen, signum: int) -> None:
        try:
            os.killpg(proc.pid, signum)  # the job's session is its process group (start_new_session)
        except ProcessLookupError:
            pass

    def calls(self, function: str = "copy_parallel") -> List[List[str]]:
        """MoXing calls logged: [pid, function, args...] rows of one function."""
        if not self.log.exists():
            return []
        rows = [line.split() for line in self.log.read_text().splitlines()]
        return [row for row in rows if row[1] == function]


@pytest.fixture
def job(tmp_path):
    return Job(tmp_path)


def test_module_level_parser_copies_data_in_and_outputs_out(job):
    script = job.adapt("train_module_level.py")
    job.put("obs://bucket/corpus", {"a.txt": "one two three", "b.txt": "four"})
    done = job.run(script, "--data_url=obs://bucket/corpus", "--train_url=obs://bucket/out",
                   "--epochs", "2", "--init_method=tcp://10.0.0.1:6000")  # an argument the platform adds
    assert done.returncode == 0, done.stderr
    assert f"read 4 words from {job.cache / 'data'}" in done.stdout
    assert job.listing("obs://bucket/out") == ["epoch0.ckpt", "epoch1.ckpt"]
    assert (job.obs / "bucket/out/epoch1.ckpt").read_text() == "words=4\n"
    pid = _pid(job, 0)
    # Copied into a new folder, then switched into place; the outputs file by file.
    assert job.calls() == [[pid, "copy_parallel", "obs://bucket/corpus", f"{job.cache / 'data'}.modelarts-new-{pid}"]]
    assert job.calls("copy") == [
        [pid, "copy", str(job.work / "checkpoints" / name), f"obs://bucket/out/{name}"]
        for name in ("epoch0.ckpt", "epoch1.ckpt")
    ]
    assert sorted(p.name for p in job.cache.iterdir()) == [
        ".data.modelarts-data-run-" + _only(job.cache, ".data.modelarts-data-run-"),
        ".data.modelarts-data.lock",
        ".output.modelarts-output-run-" + _only(job.cache, ".output.modelarts-output-run-"),
        ".output.modelarts-output.lock",
        "data", "data.modelarts-source", "output",
    ]


def _only(folder: Path, prefix: str) -> str:
    names = [p.name[len(prefix):] for p in folder.iterdir() if p.name.startswith(prefix)]
    assert len(names) == 1, names
    return names[0]


def _pid(job: Job, row: int) -> str:
    return job.calls()[row][0]


@pytest.mark.parametrize("name, args, files", [
    ("train_module_level.py", ["--data", "corpus", "--epochs", "1"], {"corpus/x.txt": "a b"}),
    ("train_in_main.py", ["--data-dir", "corpus", "--lr", "0.5"], {"corpus/x.png": ""}),
    ("train_helper.py", ["--data_path", "corpus"], {"corpus/x": "", "corpus/y": ""}),
    ("train_no_data_arg.py", ["--epochs", "2"], {"dataset/x": ""}),
    ("train_no_parser.py", [], {"dataset/x": ""}),
    ("mindspore_8card.py", ["--data_path", "corpus"], {"corpus/x.bin": ""}),
])
def test_without_the_urls_the_script_behaves_as_before(tmp_path, name, args, files):
    outcomes = []
    for which in ("original", "adapted"):
        job = Job(tmp_path / which)
        job.put(str(job.work), files)
        script = job.original(name) if which == "original" else job.adapt(name)
        script = script.rename(job.work / name)
        done = job.run(script, *args)
        produced = sorted(p.relative_to(job.work).as_posix() for p in job.work.rglob("*") if p.is_file())
        contents = {p: (job.work / p).read_text() for p in produced if p not in (name, "npu_migrate_modelarts.py")}
        outcomes.append((done.returncode, done.stdout, done.stderr, contents))
        assert not job.log.exists()  # MoXing never called
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][0] == 0, outcomes[0][2]


def test_outputs_are_copied_when_the_job_is_stopped_with_sigterm(job):
    script = job.adapt("train_module_level.py")
    job.put("obs://bucket/corpus", {"a.txt": "x"})
    proc = job.start(script, "--data_url", "obs://bucket/corpus", "--train_url", "obs://bucket/out", "--hold", NEVER)
    assert read_until(proc, 2) == [f"read 1 words from {job.cache / 'data'}\n", "checkpoint saved\n"]
    stdout, stderr = job.stop(proc)
    assert proc.returncode == -signal.SIGTERM  # ended by SIGTERM, as it was before the adaptation
    assert job.listing("obs://bucket/out") == ["epoch0.ckpt"]
    assert "[modelarts] copying 1 file(s) to obs://bucket/out" in stderr


def test_the_previous_sigterm_handler_still_runs(job):
    # A script with its own SIGTERM handler (installed first) keeps it: ours copies, then calls it.
    script = job.adapt("train_module_level.py")
    text = script.read_text().replace(
        "import time\n", "import time\nimport signal\nimport sys\n"
        "signal.signal(signal.SIGTERM, lambda s, f: (print('own handler', flush=True), sys.exit(3)))\n", 1)
    script.write_text(text)
    job.put("obs://bucket/corpus", {"a.txt": "x"})
    proc = job.start(script, "--data_url", "obs://bucket/corpus", "--train_url", "obs://bucket/out", "--hold", NEVER)
    read_until(proc, 2)
    stdout, stderr = job.stop(proc)
    assert (proc.returncode, stdout) == (3, "own handler\n")
    assert job.listing("obs://bucket/out") == ["epoch0.ckpt"]


def test_outputs_are_copied_when_the_script_fails(job):
    script = job.adapt("train_module_level.py")
    job.put("obs://bucket/corpus", {"a.txt": "x"})
    done = job.run(script, "--data_url", "obs://bucket/corpus", "--train_url", "obs://bucket/out", "--crash")
    assert done.returncode == 1
    assert "RuntimeError: diverged" in done.stderr
    assert job.listing("obs://bucket/out") == ["epoch0.ckpt"]


def test_data_is_copied_once_per_node_and_only_rank_0_copies_outputs(job):
    script = job.adapt("train_helper.py")
    job.put("obs://bucket/data", {"s1": "", "s2": ""})
    copied = job.root / "copied"  # the copy in lasts until this file exists
    procs = [job.start(script, "--data_url=obs://bucket/data", "--train_url=obs://bucket/out",
                       RANK=str(rank), WORLD_SIZE="3", LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE="3",
                       FAKE_OBS_HOLD=str(copied))
             for rank in range(3)]
    # Each process says what it does first: one copies (and holds), the other two wait for it.
    first = sorted(read_until(p, 1, "stderr")[0] for p in procs)
    copied.write_text("")
    assert first == [f"[modelarts] copying obs://bucket/data to {job.cache / 'data'}\n"] + 2 * [
        f"[modelarts] waiting for another process of this job ({job.cache / '.data.modelarts-data'})\n"]
    results = [p.communicate(timeout=CEILING) + (p.returncode,) for p in procs]
    assert [r[2] for r in results] == [0, 0, 0], results
    copies_in = [row for row in job.calls() if row[2] == "obs://bucket/data"]
    copies_out = [row for row in job.calls("copy") if row[3].startswith("obs://bucket/out")]
    assert len(copies_in) == 1
    assert [row[0] for row in copies_out] == [str(procs[0].pid)]
    # Every rank writes this file (the fixture is that simple): rank 0 copies it at its exit once
    # ranks 1 and 2 have ended, whole and under its own name, however the three were scheduled.
    assert job.listing("obs://bucket/out") == ["step000.ckpt"]
    assert ".incomplete" not in results[0][1]
    # Each read the whole copy.
    assert (job.work / "ckpt/step000.ckpt").read_text() == "s1,s2"


@pytest.mark.parametrize("rank1, rank0", [("closes", "waits"), ("is killed", "waits"), ("closes", "gets SIGTERM"),
                                          ("closes", "has no time to wait"), ("closes", "fails"),
                                          ("closes", "exits with sys.exit(3)"), ("closes", "exits with exit('stop')"),
                                          ("closes", "waits, a thread of it having called sys.exit(1)"),
                                          ("closes", "gets SIGTERM past a handler of its own")])
def test_rank_0_copies_a_shared_output_once_the_rank_writing_it_has_ended(job, rank1, rank0):
    """The race of a shared output, forced: rank 1 holds step000.ckpt open, half written, until the
    test tells it (a line on its stdin); rank 0 wrote it too and ends. Rank 0 waits for rank 1 and
    then copies the whole file under its own name; when rank 1 is killed instead, the file it was
    writing may be cut short, and goes as NAME.incomplete (train_url keeps its last complete copy
    under NAME). SIGTERM while it waits, or a bound of 0 s, make it copy at once, and the file
    still being written goes as NAME.incomplete (also past a SIGTERM handler the script set since,
    one that only notes it: waiting on would end in SIGKILL). So does an exception of rank 0's
    own: the others may be waiting for it (a collective), and its launcher stops them once it
    has ended; and so does its sys.exit() or exit() with a failing status (an argparse error, the
    script's own `sys.exit(3)`: the exit handlers cannot see that status, the runtime notes it)."""
    script = job.adapt("train_helper.py")
    text = script.read_text()
    write = "        f.write(','.join(samples))\n"
    assert text.count(write) == 1
    script.write_text(text.replace(write, (
        "        if os.environ['RANK'] == '1':\n"
        "            f.write(','.join(samples)[:3])\n"
        "            f.flush()\n"
        "            print('writing', flush=True)\n"
        "            sys.stdin.readline()\n"
        "            f.write(','.join(samples)[3:])\n"
        "        else:\n" + "    " + write + (
        "    if os.environ['RANK'] == '0' and os.environ.get('FAIL'):\n"
        "        exec(os.environ['FAIL'])\n"
        "    if os.environ.get('OWN_HANDLER'):\n"
        "        import signal\n"
        "        signal.signal(signal.SIGTERM, lambda signum, frame: print('noted', flush=True))\n"))))
    job.put("obs://bucket/data", {"s1": "", "s2": ""})

    def start(rank, **env):
        return subprocess.Popen(job.command(script, "--data_url=obs://bucket/data", "--train_url=obs://bucket/out"),
                                cwd=job.work, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=job.env(RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank),
                                                       LOCAL_WORLD_SIZE="2", **env))

    one = start(1)
    assert read_until(one, "writing") == ["writing\n"]  # step000.ckpt open, 3 of its 5 bytes written
    ends = {"fails": "raise RuntimeError('diverged')", "exits with sys.exit(3)": "sys.exit(3)",
            "exits with exit('stop')": "exit('stop')"}
    zero = start(0, **{"has no time to wait": {"NPU_MIGRATE_MODELARTS_WAIT": "0"},
                       "gets SIGTERM past a handler of its own": {"OWN_HANDLER": "1"},
                       # (a SystemExit ends only its thread: the process ends as it would have)
                       "waits, a thread of it having called sys.exit(1)": {
                           "FAIL": "import threading\nthread = threading.Thread(target=sys.exit, args=(1,))\n"
                                   "thread.start()\nthread.join()"}}.get(rank0, {}),
                 **({"FAIL": ends[rank0]} if rank0 in ends else {}))
    if rank0 in ("has no time to wait", *ends):
        out0, err0 = zero.communicate(timeout=CEILING)
    else:
        waiting = read_until(zero, "[modelarts] waiting up to 300 s for 1 other process of the job on this node "
                                   "to end before the final copy", "stderr")
        assert waiting[-1] == "[modelarts] waiting up to 300 s for 1 other process of the job on this node to end " \
                              f"before the final copy (pid {one.pid})\n"
        assert zero.poll() is None
        if rank0.startswith("gets SIGTERM"):
            zero.send_signal(signal.SIGTERM)
            out0, err0 = zero.communicate(timeout=CEILING)
    if rank1 == "is killed":
        one.kill()
    else:
        one.stdin.write("\n")
        one.stdin.flush()
    out1, err1 = one.communicate(timeout=CEILING)
    if rank0.startswith("waits"):
        out0, err0 = zero.communicate(timeout=CEILING)
    assert zero.returncode == {"fails": 1, "exits with sys.exit(3)": 3, "exits with exit('stop')": 1}.get(rank0, 0), err0
    assert one.returncode == (-signal.SIGKILL if rank1 == "is killed" else 0), err1
    if rank0.startswith("waits") and rank1 == "closes":  # whole, under its own name
        assert job.listing("obs://bucket/out") == ["step000.ckpt"]
        assert (job.obs / "bucket/out/step000.ckpt").read_text() == "s1,s2"
        assert ".incomplete" not in err0
    else:
        assert job.listing("obs://bucket/out") == ["step000.ckpt.incomplete"]
        assert f"[modelarts] {job.work / 'ckpt/step000.ckpt'} was being written when the job ended: copied as " \
               "step000.ckpt.incomplete, not under its own name\n" in err0
        said = {"waits": f"[modelarts] pid {one.pid} ended without its exit handlers (killed, or it crashed) while it "
                         f"was writing {job.work / 'ckpt/step000.ckpt'}\n",
                "gets SIGTERM": "[modelarts] SIGTERM: the final copy starts now, without waiting any longer\n",
                "gets SIGTERM past a handler of its own": "[modelarts] SIGTERM: the final copy starts now, without "
                                                          "waiting any longer\n",
                "has no time to wait": f"[modelarts] 1 other process of the job on this node did not end within 0 s "
                                       f"(pid {one.pid}): the final copy starts now (a file one of them still writes "
                                       "goes as NAME.incomplete; NPU_MIGRATE_MODELARTS_WAIT sets the bound in "
                                       "seconds)\n",
                "fails": "[modelarts] this process failed: the final copy starts now, without waiting for 1 other "
                         "process of the job on this node\n",
                "exits with sys.exit(3)": "[modelarts] this process exits with 3: the final copy starts now, without "
                                          "waiting for 1 other process of the job on this node\n",
                "exits with exit('stop')": "[modelarts] this process exits with 'stop': the final copy starts now, "
                                           "without waiting for 1 other process of the job on this node\n"}
        assert said[rank0] in err0
    assert (job.work / "ckpt/step000.ckpt").read_text() == "s1,s2"


def test_a_rank_killed_before_rank_0_ends_is_named_in_its_log(job):
    # Rank 1 dies while writing, before rank 0 ends: rank 0 has nothing to wait for, and cannot know
    # what rank 1 was writing; its log says a file may be cut short (rank 0's own whole copy of the
    # shared checkpoint goes under its name).
    script = job.adapt("train_helper.py")
    text = script.read_text()
    write = "        f.write(','.join(samples))\n"
    script.write_text(text.replace(write, (
        "        f.write(','.join(samples)[:3])\n"
        "        if os.environ['RANK'] == '1':\n"
        "            f.flush()\n"
        "            print('writing', flush=True)\n"
        "            sys.stdin.readline()\n"
        "        f.write(','.join(samples)[3:])\n")))
    job.put("obs://bucket/data", {"s1": "", "s2": ""})
    env = dict(WORLD_SIZE="2", LOCAL_WORLD_SIZE="2")
    one = subprocess.Popen(job.command(script, "--data_url=obs://bucket/data", "--train_url=obs://bucket/out"),
                           cwd=job.work, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, env=job.env(RANK="1", LOCAL_RANK="1", **env))
    assert read_until(one, "writing") == ["writing\n"]
    one.kill()
    one.communicate(timeout=CEILING)
    done = job.run(script, "--data_url=obs://bucket/data", "--train_url=obs://bucket/out", RANK="0", LOCAL_RANK="0",
                   **env)
    assert done.returncode == 0, done.stderr
    assert f"[modelarts] pid {one.pid} of the job ended without its exit handlers (killed, or it crashed): a file " \
           "it was writing then may be cut short\n" in done.stderr
    assert "waiting" not in done.stderr
    assert job.listing("obs://bucket/out") == ["step000.ckpt"]


# A launcher that says N processes run on the node (torchrun's variables) and starts the first M.
LAUNCHER = (
    "import os, subprocess, sys\n"
    "n, started = int(sys.argv[1]), int(sys.argv[2])\n"
    "procs = [subprocess.Popen([sys.executable] + sys.argv[3:], env=dict(os.environ, RANK=str(r), LOCAL_RANK=str(r),\n"
    "                          WORLD_SIZE=str(n), LOCAL_WORLD_SIZE=str(n))) for r in range(started)]\n"
    "sys.exit(max(p.wait() for p in procs))\n"
)


class _Session(subprocess.Popen):
    """A launcher started in a session of its own, which kill() ends whole: a worker it started that still
    holds the pipes (one waiting for a line on its stdin) cannot keep read_until's failure from being reported."""

    def kill(self) -> None:
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def launch_two_ranks(job, held: str, started: str = "2") -> subprocess.Popen:
    """train_helper.py through LAUNCHER (the node: 2 processes; `started` of them started), each
    rank writing rank<N>.txt beside its checkpoint and saying so on stdout; rank `held` first
    waits for a line on its stdin, before its imports."""
    script = job.adapt("train_helper.py")
    text = script.read_text()
    end = "    return 0\n"
    assert text.count(end) == 1
    script.write_text(f"import os, sys\nif os.environ['RANK'] == '{held}':\n    sys.stdin.readline()\n" + text.replace(
        end, "    with open(os.path.join(args.checkpoint_dir, 'rank%s.txt' % os.environ['RANK']), 'w') as f:\n"
             "        f.write('done')\n"
             "    print('rank %s wrote its file' % os.environ['RANK'], flush=True)\n" + end))
    (job.work / "launch.py").write_text(LAUNCHER)
    job.put("obs://bucket/data", {"s1": ""})
    return _Session(
        [sys.executable, str(job.work / "launch.py"), "2", started, str(script),
         "--data_url=obs://bucket/data", "--train_url=obs://bucket/out"],
        cwd=job.work, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=job.env(),
        start_new_session=True)


@pytest.mark.parametrize("late", [False, True])
def test_rank_0_waits_for_a_rank_that_has_not_started_only_while_it_may_still(job, late):
    """The launcher says two processes run on the node. With `late`, it starts both, and rank 1
    has not reached modelarts_setup() when rank 0 ends (it waits for a line on its stdin first):
    rank 0 waits for it, and rank 1's own file reaches train_url. Without, it starts only rank 0
    (as a script that starts its workers itself, torch.multiprocessing.spawn, looks): rank 0
    does not wait for a process that cannot come."""
    launcher = launch_two_ranks(job, held="1", started="2" if late else "1")
    if late:
        waiting = read_until(launcher, "[modelarts] waiting up to", "stderr")
        assert waiting[-1] == "[modelarts] waiting up to 300 s for 1 other process of the job on this node to end " \
                              "before the final copy (1 not started yet)\n"
        launcher.stdin.write("\n")
        launcher.stdin.flush()
    out, err = launcher.communicate(timeout=CEILING)
    assert launcher.returncode == 0, err
    assert "waiting" not in err  # (when late, read above)
    expected = ["rank0.txt", "rank1.txt", "step000.ckpt"] if late else ["rank0.txt", "step000.ckpt"]
    assert job.listing("obs://bucket/out") == expected


# MindSpore's msrun as MindSpore 2.10.0 sets each process's variables (mindspore/parallel/cluster/
# process_entity/_api.py, _ProcessManager.run / start_scheduler / _start_single_worker and _get_node_id_and_log_path,
# _ComputeGraphNode.run): in its own os.environ, which each process it starts inherits. On the node it is the
# master of, the script runs once more as its scheduler first (RANK_ID=0, MS_ROLE=MS_SCHED); each worker gets
# DEVICE_ID (its index on the node), RANK_SIZE and MS_WORKER_NUM (the job's), MS_ROLE=MS_WORKER and, when its
# global rank is known (one node, or --node_rank), RANK_ID and MS_NODE_ID; else RANK_ID stays as it was.
MSRUN = (
    "import os, subprocess, sys\n"
    "workers, local, node_rank, master = (int(a) for a in sys.argv[1:5])\n"
    "os.environ.update(RANK_SIZE=str(workers), MS_WORKER_NUM=str(workers))\n"
    "procs = []\n"
    "if master:\n"
    "    os.environ.update(RANK_ID='0', MS_ROLE='MS_SCHED')\n"
    "    procs.append(subprocess.Popen([sys.executable] + sys.argv[5:]))\n"
    "for i in range(local):\n"
    "    os.environ['DEVICE_ID'] = str(i)\n"
    "    node_id = i if local == workers else node_rank * local + i if node_rank >= 0 else None\n"
    "    if node_id is not None:\n"
    "        os.environ.update(RANK_ID=str(node_id), MS_NODE_ID=str(node_id))\n"
    "    os.environ['MS_ROLE'] = 'MS_WORKER'\n"
    "    procs.append(subprocess.Popen([sys.executable] + sys.argv[5:]))\n"
    "sys.exit(max(p.wait() for p in procs))\n"
)


@pytest.mark.parametrize("nodes, node_rank", [(1, -1), (2, -1), (2, 0)])
def test_msrun_s_scheduler_and_workers_copy_the_outputs_from_one_process(job, nodes, node_rank):
    """msrun's processes on the node of global rank 0 (its master), two workers there: one node;
    two nodes without --node_rank (every worker's RANK_ID is the scheduler's 0: each took itself
    for rank 0 and copied the outputs, and so did the scheduler); two nodes with it. Only the
    first worker (DEVICE_ID 0) copies the outputs, once, and never msrun's scheduler (which
    trains nothing and outlives the workers: no worker waits for it)."""
    script = job.adapt("train_helper.py")
    script.write_text("import os\nos.write(1, ('role %s %s %s\\n' % (os.environ['MS_ROLE'], os.environ.get('DEVICE_ID'), "
                      "os.getpid())).encode())  # one write: the three share the pipe\n" + script.read_text())
    (job.work / "msrun.py").write_text(MSRUN)
    job.put("obs://bucket/data", {"s1": ""})
    env = {"VC_WORKER_NUM": "2", "VC_TASK_INDEX": "0"} if nodes == 2 else {}
    done = subprocess.run([sys.executable, str(job.work / "msrun.py"), str(2 * nodes), "2", str(node_rank), "1",
                           str(script), "--data_url=obs://bucket/data", "--train_url=obs://bucket/out"],
                          cwd=job.work, env=job.env(**env), capture_output=True, text=True, timeout=CEILING)
    assert done.returncode == 0, done.stderr
    roles = {fields[3]: fields[1:3] for fields in (line.split() for line in done.stdout.splitlines())
             if fields[0] == "role"}
    assert sorted(roles.values()) == [["MS_SCHED", "None"], ["MS_WORKER", "0"], ["MS_WORKER", "1"]], done.stdout + done.stderr
    copies_out = [row for row in job.calls("copy") if row[3].startswith("obs://bucket/out")]
    assert [roles[row[0]] for row in copies_out] == [["MS_WORKER", "0"]]
    assert job.listing("obs://bucket/out") == ["step000.ckpt"]
    # The worker waited for the other worker at most (it may have ended first), never for the scheduler.
    assert "other processes" not in done.stderr and "did not end" not in done.stderr


# One node of a job of several: `per_node` processes with torchrun's variables, global ranks node * per_node + r.
NODE_LAUNCHER = (
    "import os, subprocess, sys\n"
    "nodes, per_node, node = (int(a) for a in sys.argv[1:4])\n"
    "procs = [subprocess.Popen([sys.executable] + sys.argv[4:], env=dict(os.environ, RANK=str(node * per_node + r),\n"
    "                          LOCAL_RANK=str(r), WORLD_SIZE=str(nodes * per_node), LOCAL_WORLD_SIZE=str(per_node)))\n"
    "         for r in range(per_node)]\n"
    "sys.exit(max(p.wait() for p in procs))\n"
)


@pytest.mark.parametrize("says, resume", [("VC_TASK_INDEX", False), ("GROUP_RANK", False), ("VC_TASK_INDEX", True)])
def test_each_node_of_a_job_of_two_copies_its_own_outputs_without_overwriting_the_other_s(job, says, resume):
    """Two nodes of two processes each, as two launchers with a working folder and a /cache of
    their own (a node's disks are its own; train_url is shared). Every rank writes its shard and
    node.txt (the same name on both nodes, not the same text): the first node's files reach
    train_url as before, the second node's its folder node-1, so no shard is lost (only node 0's
    reached train_url before) and neither node.txt replaces the other. ModelArts says which node
    a container is with VC_TASK_INDEX (ascend-facts.md 6.1), torchrun with GROUP_RANK. With
    --modelarts-resume each node gets back what it copied, and the first node, which gets the
    whole of train_url back, never copies the other node's folder to train_url again (a download's
    files are new: an older copy of node 1's checkpoints would replace what node 1 copies)."""
    script = job.adapt("train_helper.py", modelarts_data_dir="/cache/data", modelarts_output_dir="/cache/output",
                       modelarts_resume=resume)
    text = script.read_text()
    end = "    return 0\n"
    assert text.count(end) == 1
    script.write_text(text.replace(end, (
        "    for name, value in (('shard%s.txt' % os.environ['RANK'], os.environ['RANK']), ('node.txt', os.environ['NODE'])):\n"
        "        with open(os.path.join(args.checkpoint_dir, name), 'w') as f:\n"
        "            f.write(value)\n" + end)))
    (job.work / "launch.py").write_text(NODE_LAUNCHER)
    job.put("obs://bucket/data", {"s1": ""})
    if resume:
        job.put("obs://bucket/out", {"step002.ckpt": "node 0", "node-1/step004.ckpt": "node 1"})
    launchers = []
    for node in (0, 1):
        work = job.root / f"node{node}" / "work"
        shutil.copytree(job.work, work)
        env = {"NODE": str(node), "NPU_MIGRATE_MODELARTS_CACHE": str(job.root / f"node{node}" / "cache"), says: str(node)}
        env.update({"VC_TASK_INDEX": {"VC_WORKER_NUM": "2"}, "GROUP_RANK": {"GROUP_WORLD_SIZE": "2"}}[says])
        env.update({"FAKE_OBS_NEW_TIMES": "1"} if resume else {})
        launchers.append(subprocess.Popen(
            [sys.executable, str(work / "launch.py"), "2", "2", str(node), str(work / script.name),
             "--data_url=obs://bucket/data", "--train_url=obs://bucket/out"],
            cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=job.env(**env)))
    results = [launcher.communicate(timeout=CEILING) for launcher in launchers]
    assert [launcher.returncode for launcher in launchers] == [0, 0], results
    steps = [["step000.ckpt", "step002.ckpt"], ["step000.ckpt", "step004.ckpt"]] if resume else [["step000.ckpt"]] * 2
    assert job.listing("obs://bucket/out") == [
        "node-1/node.txt", "node-1/shard2.txt", "node-1/shard3.txt", *("node-1/" + s for s in steps[1]),
        "node.txt", "shard0.txt", "shard1.txt", *steps[0]]
    assert (job.obs / "bucket/out/node.txt").read_text() == "0"
    assert (job.obs / "bucket/out/node-1/node.txt").read_text() == "1"
    # (with resume, each copies its restored checkpoint again, whose time is new; never the other's)
    assert f"[modelarts] copying {5 if resume else 4} file(s) to obs://bucket/out\n" in results[0][1]
    assert f"[modelarts] copying {5 if resume else 4} file(s) to obs://bucket/out/node-1\n" in results[1][1]
    if resume:  # each node got its own checkpoints back
        assert (job.root / "node1/work/ckpt/step004.ckpt").read_text() == "node 1"
        assert not (job.root / "node1/work/ckpt/step002.ckpt").exists()
        assert (job.root / "node0/work/ckpt/step002.ckpt").read_text() == "node 0"
        # and the first node only its own: not node 1's folder, which is node 1's to restore
        assert not (job.root / "node0/work/ckpt/node-1").exists()
        assert [row[2:] for row in job.calls() if row[2] == "obs://bucket/out"] == []
    assert "warning" not in results[0][1] + results[1][1]


# MindSpore 2.10's msrun (mindspore/parallel/cluster/run.py, process_entity/_api.py) with its own option syntax,
# run as `python msrun --worker_num=4 ... script args`: on its master node (here: --master_addr 127.0.0.1) it
# starts the script as the scheduler (RANK_ID=0, MS_ROLE=MS_SCHED) first; each worker gets DEVICE_ID, and RANK_ID
# and MS_NODE_ID only when its global rank is known (one node, or --node_rank given); nothing exports --node_rank.
MSRUN_CLI = (
    "import os, subprocess, sys\n"
    "args, options = sys.argv[1:], {}\n"
    "while args[0].startswith('--'):  # --name=value or --name value\n"
    "    name, _, value = args.pop(0)[2:].partition('=')\n"
    "    options[name] = value or args.pop(0)\n"
    "workers, local = int(options.get('worker_num', 8)), int(options.get('local_worker_num', 8))\n"
    "node_rank = int(options.get('node_rank', -1))\n"
    "os.environ.update(RANK_SIZE=str(workers), MS_WORKER_NUM=str(workers))\n"
    "procs = []\n"
    "if options.get('master_addr', '127.0.0.1') == '127.0.0.1':\n"
    "    os.environ.update(RANK_ID='0', MS_ROLE='MS_SCHED')\n"
    "    procs.append(subprocess.Popen(['python'] + args, executable=sys.executable))\n"
    "for i in range(local):\n"
    "    os.environ['DEVICE_ID'] = str(i)\n"
    "    node_id = i if local == workers else node_rank * local + i if node_rank >= 0 else None\n"
    "    if node_id is not None:\n"
    "        os.environ.update(RANK_ID=str(node_id), MS_NODE_ID=str(node_id))\n"
    "    os.environ['MS_ROLE'] = 'MS_WORKER'\n"
    "    procs.append(subprocess.Popen(['python'] + args, executable=sys.executable))\n"
    "sys.exit(max(p.wait() for p in procs))\n"
)


@pytest.mark.parametrize("node_rank", [True, False])
def test_each_node_of_an_msrun_job_outside_modelarts_copies_its_own_outputs(job, node_rank):
    """msrun on two nodes of two workers each, outside ModelArts (no VC_TASK_INDEX): as two msrun launchers
    with a working folder and a /cache of their own. msrun exports no node index: with --node_rank the second
    node's workers have global RANK_IDs 2 and 3 (it copied nothing: node 1's files were lost), without it no
    RANK_ID at all (its first worker copied to train_url itself, over the first node's node.txt). The first
    worker of each node copies its node's files: the second node's to node-1/ (msrun's --node_rank, read from
    msrun's command line) or, without it, to a folder named after its host, which the log says."""
    script = job.adapt("train_helper.py", modelarts_data_dir="/cache/data", modelarts_output_dir="/cache/output")
    text = script.read_text()
    end = "    return 0\n"
    assert text.count(end) == 1
    script.write_text(text.replace(end, (
        "    if os.environ['MS_ROLE'] == 'MS_WORKER':  # (the scheduler trains nothing)\n"
        "        for name, value in (('shard%s%s.txt' % (os.environ['NODE'], os.environ['DEVICE_ID']), 'w'),\n"
        "                            ('node.txt', os.environ['NODE'])):\n"
        "            with open(os.path.join(args.checkpoint_dir, name), 'w') as f:\n"
        "                f.write(value)\n" + end)))
    (job.work / "msrun").write_text(MSRUN_CLI)
    job.put("obs://bucket/data", {"s1": ""})
    launchers = []
    for node in (0, 1):
        work = job.root / f"node{node}" / "work"
        shutil.copytree(job.work, work)
        options = ["--worker_num=4", "--local_worker_num=2", "--master_addr=" + ("127.0.0.1", "10.0.0.1")[node]]
        options += [f"--node_rank={node}"] if node_rank else []
        env = {"NODE": str(node), "NPU_MIGRATE_MODELARTS_CACHE": str(job.root / f"node{node}" / "cache")}
        launchers.append(subprocess.Popen(
            [sys.executable, str(work / "msrun"), *options, str(work / script.name),
             "--data_url=obs://bucket/data", "--train_url=obs://bucket/out"],
            cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=job.env(**env)))
    results = [launcher.communicate(timeout=CEILING) for launcher in launchers]
    assert [launcher.returncode for launcher in launchers] == [0, 0], results
    folder = "node-1" if node_rank else "node-" + os.uname().nodename
    assert job.listing("obs://bucket/out") == sorted([
        "node.txt", "shard00.txt", "shard01.txt", "step000.ckpt",
        *(f"{folder}/{name}" for name in ("node.txt", "shard10.txt", "shard11.txt", "step000.ckpt"))])
    assert (job.obs / "bucket/out/node.txt").read_text() == "0"
    assert (job.obs / f"bucket/out/{folder}/node.txt").read_text() == "1"
    named = (f"[modelarts] msrun started this node's workers without --node_rank: which node of the job this is, "
             f"nothing says; its outputs go to obs://bucket/out/{folder}, named after its host (msrun --node_rank N "
             "names the folder node-N)\n")
    assert (named in results[1][1]) is not node_rank and named not in results[0][1]
    assert "warning" not in results[0][1] + results[1][1]


def test_msrun_s_first_worker_waits_for_a_worker_of_its_node_that_has_not_started(job):
    """msrun exports no LOCAL_WORLD_SIZE: the node's size is its --local_worker_num, read from msrun's command
    line. Worker 1 has not reached modelarts_setup() when worker 0 ends (it waits for a line on its stdin
    first): worker 0 waits for it, never for the scheduler, and worker 1's file reaches train_url (before,
    worker 0 copied at once and worker 1's file was never copied)."""
    script = job.adapt("train_helper.py")
    text = script.read_text()
    end = "    return 0\n"
    assert text.count(end) == 1
    script.write_text(
        "import os, sys\nif os.environ['MS_ROLE'] == 'MS_WORKER' and os.environ['DEVICE_ID'] == '1':\n"
        "    sys.stdin.readline()\n" + text.replace(end, (
            "    if os.environ['MS_ROLE'] == 'MS_WORKER':\n"
            "        with open(os.path.join(args.checkpoint_dir, 'worker%s.txt' % os.environ['DEVICE_ID']), 'w') as f:\n"
            "            f.write('done')\n" + end)))
    (job.work / "msrun").write_text(MSRUN_CLI)
    job.put("obs://bucket/data", {"s1": ""})
    launcher = _Session(
        [sys.executable, str(job.work / "msrun"), "--worker_num", "2", "--local_worker_num=2", str(script),
         "--data_url=obs://bucket/data", "--train_url=obs://bucket/out"],
        cwd=job.work, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=job.env(),
        start_new_session=True)
    waiting = read_until(launcher, "[modelarts] waiting up to", "stderr")
    assert waiting[-1] == ("[modelarts] waiting up to 300 s for 1 other process of the job on this node to end "
                           "before the final copy (1 not started yet)\n")
    launcher.stdin.write("\n")
    launcher.stdin.flush()
    out, err = launcher.communicate(timeout=CEILING)
    assert launcher.returncode == 0, err
    assert job.listing("obs://bucket/out") == ["step000.ckpt", "worker0.txt", "worker1.txt"]


def test_a_file_a_quicker_rank_wrote_before_rank_0_started_is_this_job_s(job):
    """Rank 1 runs whole, its own file written, before rank 0 even imports the runtime (rank 0
    waits for a line on its stdin first): that file is this job's output, not one an earlier run
    left (the node's start is its first process's, not rank 0's), so it reaches train_url. Before,
    rank 0 took it for an earlier run's and left it (mindspore_8card.py's resnet-1.ckpt, a CI
    flake in one run of ten)."""
    launcher = launch_two_ranks(job, held="0")
    assert read_until(launcher, "rank 1 wrote its file")[-1] == "rank 1 wrote its file\n"
    launcher.stdin.write("\n")
    launcher.stdin.flush()
    out, err = launcher.communicate(timeout=CEILING)
    assert launcher.returncode == 0, err
    assert job.listing("obs://bucket/out") == ["rank0.txt", "rank1.txt", "step000.ckpt"]


def test_the_copy_is_fresh_for_every_job_and_every_change_of_the_data(job):
    script = job.adapt("train_helper.py")
    job.put("obs://bucket/data", {"old": "", "gone": ""})
    args = ["--data_url=obs://bucket/data", "--train_url=obs://bucket/out"]

    def run(name):
        done = job.run(script, *args, MA_VJ_NAME=name)
        assert done.returncode == 0, done.stderr
        return (job.obs / "bucket/out/step000.ckpt").read_text(), len(job.calls())

    assert run("ma-job-1") == ("gone,old", 1)
    # The same job again, the same data on OBS: the copy in /cache is used.
    assert run("ma-job-1") == ("gone,old", 1)
    # The data changed on OBS: copied again, into a new folder (nothing of the old copy survives).
    (job.obs / "bucket/data/gone").unlink()
    job.put("obs://bucket/data", {"new": ""})
    assert run("ma-job-1") == ("new,old", 2)
    # Another job on the same /cache: copied again.
    assert run("ma-job-2") == ("new,old", 3)
    assert sorted(p.name for p in job.cache.iterdir() if "modelarts-new" in p.name or "modelarts-old" in p.name) == []


def test_the_same_job_in_the_same_container_copies_again_a_file_replaced_under_its_name(job):
    # No MA_VJ_NAME and the same container: only the OBS listing, with each file's size
    # and time, tells the input of the last run from one replaced under the same names.
    script = job.adapt("train_module_level.py")
    job.put("obs://bucket/corpus", {"a.txt": "one two"})
    copy = job.cache / "data" / "a.txt"

    def run():
        done = job.run(script, "--data_url=obs://bucket/corpus", "--train_url=obs://bucket/out")
        assert done.returncode == 0, done.stderr
        return done.stdout.split(" from ")[0], len(job.calls()), copy.read_text()

    assert run() == ("read 2 words", 1, "one two")
    assert run() == ("read 2 words", 1, "one two")  # unchanged: the copy in /cache is used
    job.put("obs://bucket/corpus", {"a.txt": "one two three"})  # another size
    assert run() == ("read 3 words", 2, "one two three")
    # The same size, a later time.
    source = job.obs / "bucket/corpus/a.txt"
    before = source.stat().st_mtime_ns
    job.put("obs://bucket/corpus", {"a.txt": "six ten seven"})
    os.utime(source, ns=(before + 10**9, before + 10**9))
    assert run() == ("read 3 words", 3, "six ten seven")


def test_an_input_whose_listing_cannot_be_read_is_copied_again_each_run(job):
    script = job.adapt("train_module_level.py")
    job.put("obs://bucket/corpus", {"a.txt": "one two"})
    for run in (1, 2):
        done = job.run(script, "--data_url=obs://bucket/corpus", "--train_url=obs://bucket/out", FAKE_OBS_NO_STAT="1")
        assert done.returncode == 0, done.stderr
        assert "[modelarts] obs://bucket/corpus is copied again: its listing could not be read (MoxFileNotExists" \
            "Exception: obs://bucket/corpus/a.txt)\n" in done.stderr
        assert len(job.calls()) == run


def test_a_checkpoint_cut_short_by_sigterm_is_never_uploaded_under_its_name(job):
    # pytorch/examples imagenet: torch.save(state, 'checkpoint.pth.tar') straight into the file. The
    # second save is stopped halfway by SIGTERM: train_url gets the complete best model
    # of the first epoch, and what was written of the checkpoint only under a name that says so.
    script = job.adapt("pt_imagenet.py")
    job.put("obs://bucket/imagenet", {"train/n01440764/a.JPEG": ""})
    proc = job.start(script, "--data_url=obs://bucket/imagenet", "--train_url=obs://bucket/out", "--epochs=3",
                     FAKE_TORCH_SAVE_STALL="2")
    read_until(proc, "torch.save: writing checkpoint.pth.tar\n")
    stdout, stderr = job.stop(proc)
    assert proc.returncode == -signal.SIGTERM
    assert len((job.work / "checkpoint.pth.tar").read_text()) == 10  # what was written of it
    assert job.listing("obs://bucket/out") == ["checkpoint.pth.tar.incomplete", "model_best.pth.tar"]
    assert (job.obs / "bucket/out/model_best.pth.tar").read_text() == repr(
        {"epoch": 1, "arch": "resnet18", "classes": ["n01440764"]})
    assert (job.obs / "bucket/out/checkpoint.pth.tar.incomplete").read_text() == "{'epoch': "
    assert f"[modelarts] {job.work / 'checkpoint.pth.tar'} was being written when the job ended: copied as " \
           "checkpoint.pth.tar.incomplete, not under its own name\n" in stderr


def _runtime_module(tmp_path: Path):
    """The generated runtime, imported in this process under a name of its own."""
    import importlib.util

    from npu_migrate.modelarts import render_runtime

    path = tmp_path / "npu_migrate_modelarts.py"
    path.write_text(render_runtime())
    spec = importlib.util.spec_from_file_location("npu_migrate_modelarts_under_test", path)
    runtime = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(runtime)
    return runtime


def test_a_file_rewritten_while_it_is_copied_does_not_make_the_job_say_nothing_was_copied(tmp_path, capsys):
    """Two processes that write the same file (a script every rank runs whole): the uploader's
    copy races the other's rewrite. It was copied, and the log says it changed meanwhile; it
    said "nothing was copied" (the README's two-process rehearsal showed it at times)."""
    runtime = _runtime_module(tmp_path)
    work, out = tmp_path / "work", tmp_path / "out"
    work.mkdir()
    (work / "model.pt").write_text("x")
    job = runtime.Job(cwd=str(work))
    job.train_url, job.watched, job.sent = str(out), [(str(work), "")], {}
    stamps = [(1.0, 1), (2.0, 1)]  # as listed; after the copy (another process wrote it meanwhile)
    runtime._stamp = lambda p: stamps.pop(0) if stamps else (2.0, 1)
    job.upload(final=True)
    err = capsys.readouterr().err
    assert f"[modelarts] {work / 'model.pt'} changed while it was copied" in err
    assert "nothing was copied" not in err
    assert (out / "model.pt").read_text() == "x"


@pytest.mark.parametrize("obs", [False, True])
def test_the_first_node_restores_what_train_url_holds_but_the_other_nodes_folders(tmp_path, monkeypatch, obs):
    """--modelarts-resume on the first node of a job of three: train_url's files and folders come back,
    not node-1/ and node-2/ (the other nodes', which they restore themselves: on the first node's
    disk they only took room). A local train_url, and one on OBS (the fake MoXing)."""
    runtime = _runtime_module(tmp_path)
    for name, text in {"step002.ckpt": "0", "logs/train.log": "0", "node-1/a.ckpt": "1", "node-2/a.ckpt": "2"}.items():
        (tmp_path / "obs/bucket/out" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "obs/bucket/out" / name).write_text(text)
    monkeypatch.syspath_prepend(str(FAKE_MOXING))
    monkeypatch.setenv("FAKE_OBS_ROOT", str(tmp_path / "obs"))
    try:
        runtime._restore("obs://bucket/out" if obs else str(tmp_path / "obs/bucket/out"), str(tmp_path / "output"),
                         ["node-1", "node-2"])
    finally:
        for name in ("moxing", "moxing.file"):
            sys.modules.pop(name, None)
    restored = sorted(p.relative_to(tmp_path / "output").as_posix() for p in (tmp_path / "output").rglob("*"))
    assert restored == ["logs", "logs/train.log", "step002.ckpt"]


def test_a_checkpoint_saved_by_atomic_rename_keeps_its_last_complete_version(job):
    # The same script saving as careful projects do (a temporary file, then os.replace): stopped in
    # the middle of the second save, train_url gets the first epoch's complete checkpoint, not the
    # temporary file.
    script = job.adapt("pt_imagenet.py")
    text = script.read_text().replace(
        "    torch.save(state, filename)\n",
        "    torch.save(state, filename + '.tmp')\n    os.replace(filename + '.tmp', filename)\n")
    script.write_text(text)
    job.put("obs://bucket/imagenet", {"train/n01440764/a.JPEG": ""})
    proc = job.start(script, "--data_url=obs://bucket/imagenet", "--train_url=obs://bucket/out", "--epochs=3",
                     FAKE_TORCH_SAVE_STALL="2")
    read_until(proc, "torch.save: writing checkpoint.pth.tar.tmp\n")
    job.stop(proc)
    assert proc.returncode == -signal.SIGTERM
    assert job.listing("obs://bucket/out") == ["checkpoint.pth.tar", "checkpoint.pth.tar.tmp.incomplete",
                                                "model_best.pth.tar"]
    first = repr({"epoch": 1, "arch": "resnet18", "classes": ["n01440764"]})
    assert (job.obs / "bucket/out/checkpoint.pth.tar").read_text() == first


@pytest.mark.parametrize("stopped", [False, True])
def test_logs_kept_open_reach_train_url(job, stopped):
    # A CSV log opened with "w" and a logging file (appended to) that the script never closes.
    script = job.adapt("train_module_level.py")
    text = script.read_text().replace('os.makedirs(args.save_dir, exist_ok=True)\n', (
        'os.makedirs(args.save_dir, exist_ok=True)\n'
        'import logging\n'
        'logging.basicConfig(filename=os.path.join(args.save_dir, "train.log"), level=logging.INFO)\n'
        'progress = open(os.path.join(args.save_dir, "progress.csv"), "w")\n'
        'progress.write("epoch,words\\n")\nprogress.flush()\nlogging.info("started")\n'), 1)
    script.write_text(text)
    job.put("obs://bucket/corpus", {"a.txt": "x"})
    proc = job.start(script, "--data_url=obs://bucket/corpus", "--train_url=obs://bucket/out",
                     f"--hold={NEVER if stopped else 0}")
    read, saved = read_until(proc, 2)
    assert read.startswith("read 1 words") and saved == "checkpoint saved\n"
    if stopped:  # SIGTERM may have stopped the script halfway through a write to the CSV file
        stdout, stderr = job.stop(proc)
        csv = "progress.csv.incomplete"
    else:  # a plain exit: this process writes nothing any more, what it left open is whole
        stdout, stderr = proc.communicate(timeout=CEILING)
        csv = "progress.csv"
    assert job.listing("obs://bucket/out") == ["epoch0.ckpt", csv, "train.log"], stderr
    assert (job.obs / "bucket/out" / csv).read_text() == "epoch,words\n"
    assert (job.obs / "bucket/out/train.log").read_text() == "INFO:root:started\n"


def test_a_leftover_output_folder_is_not_uploaded_to_the_next_job(job):
    script = job.adapt("train_no_data_arg.py", modelarts_output_dir=str(job.cache / "output"))
    job.put(str(job.cache / "output"), {"other_jobs_model.ckpt": "theirs"})
    job.put(str(job.work / "dataset"), {"x": ""})
    done = job.run(script, "--train_url=obs://bucket/out")
    assert done.returncode == 0, done.stderr
    assert "other_jobs_model.ckpt" not in job.listing("obs://bucket/out")
    assert not (job.cache / "output" / "other_jobs_model.ckpt").exists()


def test_resume_copies_the_checkpoints_at_train_url_back_first(job):
    script = job.adapt("train_helper.py", modelarts_resume=True)
    job.put("obs://bucket/data", {"s": ""})
    job.put("obs://bucket/out", {"step004.ckpt": "s"})
    done = job.run(script, "--data_url=obs://bucket/data", "--train_url=obs://bucket/out", "--resume")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "resumed at step 5\n"
    assert job.listing("obs://bucket/out") == ["step004.ckpt", "step005.ckpt"]


def test_local_paths_work_without_moxing(tmp_path):
    job = Job(tmp_path, moxing=False)
    script = job.adapt("train_in_main.py")
    job.put(str(tmp_path / "inputs"), {"cat.png": "", "dog.png": ""})
    done = job.run(script, "--data_url", str(tmp_path / "inputs"), "--train_url", str(tmp_path / "outputs"))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "trained on 2 files\n"
    assert job.listing(str(tmp_path / "outputs")) == ["metrics.json"]
    assert (tmp_path / "outputs/metrics.json").read_text() == '{"files": ["cat.png", "dog.png"], "device": "cpu", "lr": 0.1}'
    assert not (job.cache / "data").exists()  # a local input is used where it is


MOXING_NEEDED = (
    "modelarts: obs://bucket/data is an OBS URL: copying it needs Huawei MoXing, which ModelArts training "
    "images include but this Python does not (the PyPI package named moxing is a different project). "
    "Pass a local path instead.\n"
)


def test_an_obs_url_without_moxing_is_a_clear_error(tmp_path):
    job = Job(tmp_path, moxing=False)
    script = job.adapt("train_in_main.py")
    done = job.run(script, "--data_url", "obs://bucket/data", "--train_url", str(tmp_path / "outputs"))
    assert (done.returncode, done.stdout, done.stderr) == (1, "", MOXING_NEEDED)


def test_the_unrelated_pypi_moxing_is_not_taken_for_huaweis(tmp_path):
    job = Job(tmp_path, moxing=False)
    impostor = tmp_path / "pypi" / "moxing"
    impostor.mkdir(parents=True)
    (impostor / "__init__.py").write_text("def serve():\n    pass\n")  # an LLM server, not OBS
    job.path.insert(0, str(impostor.parent))
    script = job.adapt("train_in_main.py")
    done = job.run(script, "--data_url", "obs://bucket/data")
    assert (done.returncode, done.stdout, done.stderr) == (1, "", MOXING_NEEDED)


def test_mindspore_8_card_job_keeps_its_per_device_data_folders(job):
    script = job.adapt("mindspore_8card.py")
    job.put("obs://bucket/cifar", {"0/batch_1.bin": "", "1/batch_2.bin": ""})
    procs = [job.start(script, "--data_url", "obs://bucket/cifar", "--train_url", "obs://bucket/out",
                       "--epoch_size", "1", DEVICE_ID=str(d), RANK_ID=str(d), RANK_SIZE="2", FAKE_OBS_DELAY="0.3")
             for d in (0, 1)]
    outputs = [p.communicate(timeout=CEILING) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    assert outputs[0][0] == "device 0 trained on ['batch_1.bin']\n"
    assert outputs[1][0] == "device 1 trained on ['batch_2.bin']\n"
    assert len([row for row in job.calls() if row[2] == "obs://bucket/cifar"]) == 1
    uploads = [row for row in job.calls("copy") if row[3].startswith("obs://bucket/out/")]
    assert {row[0] for row in uploads} == {str(procs[0].pid)}  # RANK_ID 0 only
    assert "resnet-0.ckpt" in job.listing("obs://bucket/out")


def test_tensorflow_script_reading_a_relative_dataset_folder(job):
    # BigGAN reads ./dataset/<name>: the input is copied there with --modelarts-data-dir dataset.
    script = job.adapt("tf115_biggan.py", modelarts_data_dir="dataset")
    job.put("obs://bucket/gan", {"celebA/1.jpg": "", "celebA/2.jpg": ""})
    done = job.run(script, "--data_url=obs://bucket/gan", "--train_url=obs://bucket/log", "--epoch=3")
    assert done.returncode == 0, done.stderr
    assert done.stdout == " [*] Training finished!\n"
    assert job.listing("obs://bucket/log") == ["BigGAN.model-1"]
    assert (job.obs / "bucket/log/BigGAN.model-1").read_text() == "2 3"


def test_script_without_a_parser_gets_a_minimal_one(job):
    script = job.adapt("train_no_parser.py", modelarts_data_dir="dataset", modelarts_output_dir="outputs")
    job.put("obs://bucket/ft", {"x": "", "y": ""})
    done = job.run(script, "--data_url=obs://bucket/ft", "--train_url=obs://bucket/out", "--num_gpus=1")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "saved\n"
    assert (job.obs / "bucket/out/model.bin").read_text() == "x y"


def test_a_one_line_main_block_gets_its_setup_call_on_that_line(job):
    """`if __name__ == "__main__": main()` on one line: the import was added but no
    modelarts_setup() call (only an indented main block got one), so the job copied nothing in
    and nothing out: its model was lost with the container, with no finding. The call now goes
    first on that line; a second run finds it and changes nothing."""
    text = (BEFORE / "train_no_parser.py").read_text()
    one_line = text.replace('if __name__ == "__main__":\n    main()\n', 'if __name__ == "__main__": main()\n')
    assert one_line != text
    options = Options(modelarts=True, modelarts_data_dir="dataset", modelarts_output_dir="outputs")
    result = migrate_source(one_line, "train_no_parser.py", options)
    script = job.work / "train_no_parser.py"
    script.write_text(result.new_text)
    for path, generated in result.extra_files.items():
        (job.work / path).write_text(generated)
    job.put("obs://bucket/ft", {"x": "", "y": ""})
    done = job.run(script, "--data_url=obs://bucket/ft", "--train_url=obs://bucket/out")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "saved\n"
    assert job.listing("obs://bucket/out") == ["model.bin"]  # before: [] (nothing copied out)
    assert (job.obs / "bucket/out/model.bin").read_text() == "x y"
    assert result.new_text.endswith(
        'if __name__ == "__main__": modelarts_setup(data_dir="dataset", output_dir="outputs"); main()\n')
    assert sorted(e.code for e in result.edits) == ["NPU203", "NPU204"]
    again = migrate_source(result.new_text, "train_no_parser.py", options)
    assert not again.changed and again.edits == []


# OpenNMT-py's onmt/bin/average_models.py, its shape: a list of input files (nargs="+"), named as
# the data argument with --data-arg as NPU211 suggests, and one output file.
AVERAGE_MODELS = """\
import argparse


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("-models", "-m", nargs="+", required=True, help="List of models")
    parser.add_argument("-extra", action="append", default=[], help="more checkpoints")
    parser.add_argument("-output", "-o", required=True, help="Output file")
    opt = parser.parse_args()
    texts = [open(path).read() for path in opt.models + opt.extra]
    with open(opt.output, "w") as out:
        out.write(" ".join(texts))
    print(len(texts), "averaged")


if __name__ == "__main__":
    main()
"""


def test_a_data_argument_that_takes_a_list_of_paths_gets_each_one_in_the_local_copy(job):
    """modelarts_setup() replaced a list-valued data argument with the local folder itself, a
    string, so `for path in opt.models` read '/', 'c', ... (IsADirectoryError: '/'; nothing reached
    train_url). Each path of the list is now rebased like a single one, and a list stays a list."""
    options = Options(modelarts=True, data_args=("models", "extra"), modelarts_data_dir=str(job.cache / "data"),
                      modelarts_output_dir=str(job.cache / "output"))
    result = migrate_source(AVERAGE_MODELS, "average_models.py", options)
    assert 'data=["models", "extra"], outputs=["output"]' in result.new_text
    script = job.work / "average_models.py"
    script.write_text(result.new_text)
    for path, generated in result.extra_files.items():
        (job.work / path).write_text(generated)
    job.put("obs://bucket/ckpt", {"run1/a.pt": "1", "run1/b.pt": "3", "c.pt": "5"})
    done = job.run(script, "--data_url=obs://bucket/ckpt", "--train_url=obs://bucket/avg",
                   "-models", "run1/a.pt", "run1/b.pt", "-extra", "c.pt", "-output", "avg.pt")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "3 averaged\n"
    assert job.listing("obs://bucket/avg") == ["avg.pt"]
    assert (job.obs / "bucket/avg/avg.pt").read_text() == "1 3 5"


def test_script_that_reads_its_own_data_url_gets_the_local_copy(job):
    script = job.adapt("train_seed002.py")
    job.put("obs://bucket/weights", {"vgg16-397923af.pth": "12345"})
    done = job.run(script, "--data_url=obs://bucket/weights")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"loaded 5 bytes of weights from {job.cache / 'data'}/vgg16-397923af.pth\n"


@pytest.mark.skipif(not PYTHON37.exists(), reason="needs a Python 3.7 interpreter (ModelArts images)")
def test_the_generated_code_runs_on_python_3_7(job):
    script = job.adapt("train_module_level.py")
    job.put("obs://bucket/corpus", {"a.txt": "one two"})
    done = job.run(script, "--data_url=obs://bucket/corpus", "--train_url=obs://bucket/out", python=str(PYTHON37))
    assert done.returncode == 0, done.stderr
    assert job.listing("obs://bucket/out") == ["epoch0.ckpt"]
