"""Real MindSpore training programs nobody here wrote, migrated with `--modelarts --distributed`
and rehearsed on MindSpore for the CPU (the cached venv of tests/test_mindspore_run.py).

The pinned packages on PyPI that ship MindSpore entry scripts -- mindarmour 2.0.0's `examples/`
(its wheel), MindsporeTrainer 0.2.0's `launcher.py`, mindvision 0.1.0's `tools/train.py` -- were
written for MindSpore 1.x/2.0: they import `mindspore.dataset.vision.c_transforms` (or
`mindspore.nn.metrics.accuracy`, `ms_function`), which the only MindSpore that installs here
(2.10.0, CPython 3.11) no longer has; mindcv, mindyolo and mindocr ship no `train.py` in their
sdists or wheels. So these programs cannot train here, and the rehearsal must say why before a
job is paid for; what the migration does to them is asserted statically. mindarmour 2.0.0
(Apache-2.0, py3-none-any wheel) is downloaded once by tests/corpus_wheels.py's `download`,
sha256-checked, cached in ~/.cache/npu-migrate-corpus/rehearse; without the package index or
MindSpore the tests are skipped and say so.
"""

from __future__ import annotations

import subprocess
import zipfile
from pathlib import Path

import pytest

from corpus_wheels import download
from helpers import cli_in_process
from test_mindspore_run import QUIET, mindspore_python  # noqa: F401  (the cached MindSpore 2.10.0 venv)

pytestmark = pytest.mark.slow

MINDARMOUR = ("mindarmour==2.0.0", "mindarmour-2.0.0-py3-none-any.whl",
              "6371fdb5168ec11ed1f1fe33b0964234f39d077d7d169f1aa63ac46b4c5e3f1e")
MEMBERSHIP = "examples/privacy/membership_inference/train.py"
DP = "examples/privacy/diff_privacy/lenet5_dp.py"


def _examples(root: Path) -> Path:
    """The wheel's examples/ folder (the code folder a user would upload)."""
    requirement, filename, sha256 = MINDARMOUR
    wheel = download(requirement, filename, sha256, kind="rehearse")
    code = root / "code"
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if name.startswith("examples/"):
                z.extract(name, code)
    return code


def _migrate(code: Path, entry: str) -> subprocess.CompletedProcess:
    """The migration, in this process (the MindSpore runs are processes of their own), its output as text."""
    done = cli_in_process(".", "--modelarts", "--distributed", "--entry", entry, "--write", "--no-cache", cwd=code)
    assert done.returncode == 0, done
    return subprocess.CompletedProcess(done.args, 0, done.stdout.decode(), done.stderr.decode())


@pytest.fixture(scope="module")
def migrated(tmp_path_factory):
    """entry -> (code folder migrated for it, the migration's output, the entry's original text)."""
    found = {}

    def get(entry: str):
        if entry not in found:
            code = _examples(tmp_path_factory.mktemp("mindarmour"))
            original = (code / entry).read_text(encoding="utf-8")
            found[entry] = (code, _migrate(code, entry), original)
        return found[entry]

    return get


def test_membership_inference_train_gets_the_platform_arguments_and_its_setup_after_the_device_target(migrated):
    """`--device_target` (default Ascend), `parse_args()`, `--data_path`, checkpoints under
    `--ckpt_path`, and `set_context(device_id=...)` before `set_context(device_target=...)`."""
    code, _, _ = migrated(MEMBERSHIP)
    text = (code / MEMBERSHIP).read_text(encoding="utf-8")
    assert ("    args_opt = modelarts_setup(parser.parse_known_args()[0], data=['data_path'], "
            "outputs=['ckpt_path'])\n") in text
    # init() needs the device target: the set-up follows the set_context that sets it.
    assert ("    context.set_context(device_id=args.device_id)\n"
            "    context.set_context(mode=context.GRAPH_MODE, device_target=args.device_target)\n"
            "    distributed_setup()\n") in text


def test_a_program_that_trains_with_dpmodel_is_reported_and_its_data_left_whole(migrated):
    """lenet5_dp.py trains through mindarmour's DPModel, which --distributed does not recognise:
    sharding its MnistDataset alone would train each NPU on a part of the data, unsynchronised."""
    code, done, original = migrated(DP)
    assert (f"{DP}:50:11: NPU390 [warning] not made distributed: a program whose training is not recognised "
            "(no `Model(..., optimizer)` or `TrainOneStepCell`): its data set is not sharded without the process "
            "group (`mindspore.dataset.MnistDataset`)") in done.stdout
    text = (code / DP).read_text(encoding="utf-8")
    assert "num_shards" not in text and "distributed_setup" not in text
    # --modelarts still adapts it (what it reads and writes is reported: NPU211, NPU214)
    assert text.replace("from npu_migrate_modelarts import modelarts_setup  # npu-migrate: ModelArts\n", "") \
        .replace("    modelarts_setup()\n", "") == original
    assert f"{DP}:88:1: NPU211 [warning]" in done.stdout and f"{DP}:88:1: NPU214 [warning]" in done.stdout


@pytest.mark.parametrize("nproc", [1, 2])
def test_a_program_written_for_mindspore_1_is_stopped_with_the_reason(mindspore_python, migrated, tmp_path,  # noqa: F811
                                                                      nproc):
    """Rehearsed with 1 and 2 processes, the migrated lenet5_dp.py dies at start on MindSpore
    2.10.0 (its `c_transforms` import): the rehearsal fails and says it is the MindSpore release,
    not a missing package. (A preemption rehearsal would show the same: it never starts.)"""
    code, _, _ = migrated(DP)
    data = tmp_path / "data"
    data.mkdir()
    (data / "placeholder.txt").write_text("MNIST would go here\n")
    ran = cli_in_process("rehearse", DP, "--code", str(code), "--nproc", str(nproc), "--python", str(mindspore_python),
                         "--data", str(data), "--job-dir", str(tmp_path / "job"), "--timeout", "300", cwd=code,
                         env=QUIET)
    assert ran.returncode == 1, ran
    done = subprocess.CompletedProcess(ran.args, 1, ran.stdout.decode(), ran.stderr.decode())
    ranks = "rank 0" if nproc == 1 else "ranks 0, 1"
    missing = "mindspore.dataset.vision.c_transforms"
    verdict = done.stdout.rstrip("\n").splitlines()[-1]
    assert verdict.startswith(f"FAILED: {ranks} failed (exit status 1; see "), verdict
    assert verdict.endswith(
        f"ModuleNotFoundError: No module named '{missing}' (mindspore 2.10.0 in {mindspore_python} has no module "
        f"{missing}: the script was written for another release of mindspore); "
        # (MindSpore's savers write from C++, which the stand-in's record of Python writes cannot see)
        "nothing reached train_url: the job wrote no file the rehearsal sees (MindSpore's own writers are seen only "
        "in the job folder)"), verdict
