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
import time
from pathlib import Path
from typing import Dict, List

import pytest

from npu_migrate.dispatch import migrate_source
from npu_migrate.model import Options

ROOT = Path(__file__).resolve().parent.parent
BEFORE = ROOT / "fixtures" / "modelarts" / "before"
FAKE_MOXING = Path(__file__).resolve().parent / "fake_moxing"
PYTHON37 = Path("/root/.pyenv/versions/3.7.16/bin/python3.7")

# Environment a launcher sets; cleared so the tests' own environment cannot leak in.
LAUNCHER_VARS = ("RANK", "RANK_ID", "OMPI_COMM_WORLD_RANK", "WORLD_SIZE", "RANK_SIZE", "LOCAL_RANK", "DEVICE_ID",
                 "VC_TASK_INDEX", "MA_VJ_NAME", "TORCHELASTIC_RUN_ID", "PYTHONPATH")

STUBS = {
    "torch/__init__.py": (
        "def manual_seed(seed):\n    pass\n\n\n"
        "class cuda:\n    is_available = staticmethod(lambda: False)\n\n\n"
        "class npu:\n    is_available = staticmethod(lambda: False)\n"
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
    "mindspore/context.py": (
        "class ParallelMode:\n    DATA_PARALLEL = 'data_parallel'\n\n\n"
        "def set_auto_parallel_context(**kwargs):\n    pass\n"
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
                   PYTHONDONTWRITEBYTECODE="1")
        env.update(extra)
        return env

    def command(self, script: Path, *args: str, python: str = sys.executable) -> List[str]:
        return [python, str(script), *args]

    def run(self, script: Path, *args: str, python: str = sys.executable, cwd: Path = None, **env: str):
        return subprocess.run(self.command(script, *args, python=python), cwd=cwd or self.work,
                              env=self.env(**env), capture_output=True, text=True, timeout=60)

    def start(self, script: Path, *args: str, **env: str) -> subprocess.Popen:
        return subprocess.Popen(self.command(script, *args), cwd=self.work, env=self.env(**env),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

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
    assert job.calls() == [
        [str(_pid(job, 0)), "copy_parallel", "obs://bucket/corpus", str(job.cache / "data")],
        [str(_pid(job, 0)), "copy_parallel", str(job.work / "checkpoints"), "obs://bucket/out"],
    ]


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
        contents = {p: (job.work / p).read_text() for p in produced if p != name}
        outcomes.append((done.returncode, done.stdout, done.stderr, contents))
        assert not job.log.exists()  # MoXing never called
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][0] == 0, outcomes[0][2]


def test_outputs_are_copied_when_the_job_is_stopped_with_sigterm(job):
    script = job.adapt("train_module_level.py")
    job.put("obs://bucket/corpus", {"a.txt": "x"})
    proc = job.start(script, "--data_url", "obs://bucket/corpus", "--train_url", "obs://bucket/out", "--hold", "60")
    assert proc.stdout.readline() == f"read 1 words from {job.cache / 'data'}\n"
    assert proc.stdout.readline() == "checkpoint saved\n"
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGTERM  # ended by SIGTERM, as it was before the adaptation
    assert job.listing("obs://bucket/out") == ["epoch0.ckpt"]
    assert f"[modelarts] copying {job.work / 'checkpoints'} to obs://bucket/out" in stderr


def test_the_previous_sigterm_handler_still_runs(job):
    # A script with its own SIGTERM handler (installed first) keeps it: ours copies, then calls it.
    script = job.adapt("train_module_level.py")
    text = script.read_text().replace(
        "import time\n", "import time\nimport signal\nimport sys\n"
        "signal.signal(signal.SIGTERM, lambda s, f: (print('own handler', flush=True), sys.exit(3)))\n", 1)
    script.write_text(text)
    job.put("obs://bucket/corpus", {"a.txt": "x"})
    proc = job.start(script, "--data_url", "obs://bucket/corpus", "--train_url", "obs://bucket/out", "--hold", "60")
    proc.stdout.readline(), proc.stdout.readline()
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=30)
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
    procs = [job.start(script, "--data_url=obs://bucket/data", "--train_url=obs://bucket/out",
                       RANK=str(rank), WORLD_SIZE="3", LOCAL_RANK=str(rank), FAKE_OBS_DELAY="0.5")
             for rank in range(3)]
    results = [p.communicate(timeout=60) + (p.returncode,) for p in procs]
    assert [r[2] for r in results] == [0, 0, 0], results
    copies_in = [row for row in job.calls() if row[2] == "obs://bucket/data"]
    copies_out = [row for row in job.calls() if row[3] == "obs://bucket/out"]
    assert len(copies_in) == 1
    assert [row[0] for row in copies_out] == [str(procs[0].pid)]
    waiting = [r for r in results if "[modelarts] waiting for another process to copy obs://bucket/data" in r[1]]
    assert len(waiting) == 2  # the other two waited instead of copying
    assert job.listing("obs://bucket/out") == ["step000.ckpt"]
    assert (job.obs / "bucket/out/step000.ckpt").read_text() == "s1,s2"


def test_a_marker_left_by_an_earlier_job_does_not_skip_the_copy(job):
    script = job.adapt("train_helper.py")
    job.put("obs://bucket/data", {"old": ""})
    args = ["--data_url=obs://bucket/data", "--train_url=obs://bucket/out"]
    assert job.run(script, *args, MA_VJ_NAME="ma-job-1").returncode == 0
    job.put("obs://bucket/data", {"new": ""})
    # The same job started again (a second process of it): the copy is there, no second copy.
    assert job.run(script, *args, MA_VJ_NAME="ma-job-1").returncode == 0
    assert len([row for row in job.calls() if row[2] == "obs://bucket/data"]) == 1
    # A new job on the same /cache copies again and sees the new file.
    assert job.run(script, *args, MA_VJ_NAME="ma-job-2").returncode == 0
    assert len([row for row in job.calls() if row[2] == "obs://bucket/data"]) == 2
    assert (job.obs / "bucket/out/step000.ckpt").read_text() == "new,old"


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
    outputs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    assert outputs[0][0] == "device 0 trained on ['batch_1.bin']\n"
    assert outputs[1][0] == "device 1 trained on ['batch_2.bin']\n"
    assert len([row for row in job.calls() if row[2] == "obs://bucket/cifar"]) == 1
    uploads = [row for row in job.calls() if row[3] == "obs://bucket/out"]
    assert [row[0] for row in uploads] == [str(procs[0].pid)]  # RANK_ID 0 only
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
