"""Scripts in the styles real projects use (pytorch/examples imagenet, mnist, dcgan,
word_language_model; the DDP tutorial's torchrun script; a StarGAN-style solver with a config;
a MindSpore model-zoo project with a config module and moxing_wrapper), adapted with --modelarts
and run as a ModelArts job would run them: one process, two processes under the boot file,
stopped with SIGTERM, failing with an exception. What counts is what arrives in train_url.

Frameworks resolve to the stubs of tests/test_modelarts_run.py (the scripts do file I/O and
argparse); MoXing to tests/fake_moxing.
"""

from __future__ import annotations

import json
import shutil
import signal
import time
from pathlib import Path

import pytest

from npu_migrate.dispatch import migrate_source
from npu_migrate.options import Options
from helpers import CEILING, read_until, write_migrated
from test_modelarts_run import NEVER, Job

# Each test runs a job or the command line in processes of its own (conftest.py: slow).
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
PROJECTS = ROOT / "fixtures" / "modelarts" / "projects"
CODE = ["npu_migrate_modelarts.py"]


@pytest.fixture
def job(tmp_path):
    return Job(tmp_path)


def _wait_until(happened) -> None:
    """Until `happened()` (a file written by the job), looking again every 50 ms; CEILING only
    catches a job that never does it."""
    deadline = time.monotonic() + CEILING
    while not happened():
        assert time.monotonic() < deadline, "the job never did it"
        time.sleep(0.05)


# -- pytorch/examples imagenet: a positional data folder, checkpoints under fixed names ----------


IMAGENET = {"train/n01440764/a.JPEG": "", "train/n01443537/b.JPEG": ""}


def test_imagenet_checkpoints_saved_in_the_working_folder_reach_train_url(job):
    script = job.adapt("pt_imagenet.py")
    job.put("obs://bucket/imagenet", IMAGENET)
    done = job.run(script, "--data_url=obs://bucket/imagenet", "--train_url=obs://bucket/out", "--epochs=2")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("classes: n01440764,n01443537\n")
    # The checkpoints, not the code (the script and the module were there before the run).
    assert job.listing("obs://bucket/out") == ["checkpoint.pth.tar", "model_best.pth.tar"]
    assert (job.obs / "bucket/out/checkpoint.pth.tar").read_text() == repr(
        {"epoch": 2, "arch": "resnet18", "classes": ["n01440764", "n01443537"]})


def test_imagenet_stopped_with_sigterm(job):
    script = job.adapt("pt_imagenet.py")
    job.put("obs://bucket/imagenet", IMAGENET)
    proc = job.start(script, "--data_url=obs://bucket/imagenet", "--train_url=obs://bucket/out", f"--hold={NEVER}")
    read_until(proc, "epoch 0 saved")
    job.stop(proc)
    assert proc.returncode == -signal.SIGTERM
    assert job.listing("obs://bucket/out") == ["checkpoint.pth.tar", "model_best.pth.tar"]


def test_imagenet_failing_with_an_exception(job):
    script = job.adapt("pt_imagenet.py")
    job.put("obs://bucket/imagenet", IMAGENET)
    done = job.run(script, "--data_url=obs://bucket/imagenet", "--train_url=obs://bucket/out", "--crash")
    assert done.returncode == 1 and "RuntimeError: loss is nan" in done.stderr
    assert job.listing("obs://bucket/out") == ["checkpoint.pth.tar", "model_best.pth.tar"]


def test_imagenet_periodic_uploads_copy_only_what_changed(job):
    script = job.adapt("pt_imagenet.py", modelarts_sync_every=0.01)  # every 0.6 s
    job.put("obs://bucket/imagenet", IMAGENET)
    proc = job.start(script, "--data_url=obs://bucket/imagenet", "--train_url=obs://bucket/out", "--epochs=1",
                     f"--hold={NEVER}")
    read_until(proc, "epoch 0 saved")
    saved = [str(job.work / "checkpoint.pth.tar"), str(job.work / "model_best.pth.tar")]
    # While the job holds after its epoch, a periodic copy takes both files (the event waited for).
    _wait_until(lambda: sorted(row[2] for row in job.calls("copy")) == saved)
    job.stop(proc)
    # The copy at SIGTERM finds nothing changed since: never the same version twice.
    assert sorted(row[2] for row in job.calls("copy")) == saved
    assert job.listing("obs://bucket/out") == ["checkpoint.pth.tar", "model_best.pth.tar"]


# -- pytorch/examples mnist: downloads into ../data, saves mnist_cnn.pt -------------------------


def test_mnist_model_reaches_train_url_and_the_download_does_not(job):
    script = job.adapt("pt_mnist.py")
    done = job.run(script, "--save-model", "--train_url=obs://bucket/out")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "train on 60 samples\n"
    assert job.listing("obs://bucket/out") == ["mnist_cnn.pt"]
    assert (job.root / "data/MNIST/raw/train-images-idx3-ubyte").exists()


def test_an_upload_of_nothing_names_the_files_the_job_wrote(job):
    script = job.adapt("pt_mnist.py")
    done = job.run(script, "--train_url=obs://bucket/out")  # no --save-model: nothing saved here
    assert done.returncode == 0, done.stderr
    assert job.listing("obs://bucket/out") == []
    assert "[modelarts] warning: nothing was copied to obs://bucket/out" in done.stderr
    assert str(job.root / "data/MNIST/raw/train-images-idx3-ubyte") in done.stderr


# -- pytorch/examples dcgan: --dataset is a name, --dataroot the path, --outf '.' ----------------


def test_dcgan_dataset_name_stays_a_name_and_outf_dot_uploads_only_new_files(job):
    script = job.adapt("pt_dcgan.py")
    job.put("obs://bucket/faces", {"img1.png": "", "img2.png": ""})
    done = job.run(script, "--dataset=folder", "--data_url=obs://bucket/faces", "--train_url=obs://bucket/out")
    assert done.returncode == 0, done.stderr
    assert "dataset='folder'" in done.stdout and f"dataroot='{job.cache / 'data'}'" in done.stdout
    assert job.listing("obs://bucket/out") == [
        "netD_epoch_0.pth", "netD_epoch_1.pth", "netG_epoch_0.pth", "netG_epoch_1.pth", "real_samples.png"]
    assert (job.obs / "bucket/out/real_samples.png").read_text() == "img1.png img2.png"


# -- pytorch/examples word_language_model: --data ./data/wikitext-2, --save model.pt ------------


@pytest.mark.parametrize("layout", ["wikitext-2/", "data/wikitext-2/", ""])
def test_word_language_model_finds_its_corpus_in_the_copy(job, layout):
    script = job.adapt("pt_word_language_model.py")
    job.put("obs://bucket/corpus", {layout + "train.txt": "the cat sat on the mat", layout + "valid.txt": ""})
    done = job.run(script, "--data_url=obs://bucket/corpus", "--train_url=obs://bucket/out")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "| vocabulary 5 words\n"
    assert job.listing("obs://bucket/out") == ["model.pt"]


# -- StarGAN: a solver class, two relative data paths, four output folders -----------------------


def _adapt_project(job: Job, name: str, **options):
    for path in (PROJECTS / name).rglob("*.py"):
        target = job.work / path.relative_to(PROJECTS / name)
        target.parent.mkdir(parents=True, exist_ok=True)
        result = migrate_source(path.read_text(), str(target), Options(modelarts=True, **options))
        assert result.error is None
        target.write_text(result.new_text if result.changed else path.read_text())
        for extra, text in result.extra_files.items():
            Path(extra).write_text(text)
    return job.work


CELEBA = {"celeba/images/000001.jpg": "", "celeba/images/000002.jpg": "",
          "celeba/list_attr_celeba.txt": "Black_Hair Male"}


def test_stargan_reads_both_data_paths_from_the_copy_and_uploads_every_output_folder(job):
    work = _adapt_project(job, "stargan", modelarts_data_dir=str(job.cache / "data"), modelarts_output_dir=str(job.cache / "output"))
    assert sorted(p.name for p in work.iterdir()) == ["main.py", "npu_migrate_modelarts.py", "solver.py"]
    job.put("obs://bucket/celeba", CELEBA)
    done = job.run(work / "main.py", "--data_url=obs://bucket/celeba", "--train_url=obs://bucket/out")
    assert done.returncode == 0, done.stderr
    assert "2 images, attributes Black_Hair,Male\n" in done.stdout
    # The model folder is the output folder (its files at the top); the other folders keep their place.
    assert job.listing("obs://bucket/out") == [
        "1-G.ckpt", "2-G.ckpt", "stargan/logs/events.log", "stargan/samples/1-images.jpg",
        "stargan/samples/2-images.jpg"]


def test_stargan_failing_and_stopped(job):
    work = _adapt_project(job, "stargan", modelarts_data_dir=str(job.cache / "data"), modelarts_output_dir=str(job.cache / "output"))
    job.put("obs://bucket/celeba", CELEBA)
    done = job.run(work / "main.py", "--data_url=obs://bucket/celeba", "--train_url=obs://bucket/failed",
                   "--crash=true")
    assert done.returncode == 1 and "RuntimeError: D/loss_real is nan" in done.stderr
    assert job.listing("obs://bucket/failed") == ["1-G.ckpt", "stargan/logs/events.log", "stargan/samples/1-images.jpg"]
    proc = job.start(work / "main.py", "--data_url=obs://bucket/celeba", "--train_url=obs://bucket/stopped",
                     f"--hold={NEVER}")
    read_until(proc, "Saved model checkpoints into stargan/models...")
    job.stop(proc)
    assert proc.returncode == -signal.SIGTERM
    assert job.listing("obs://bucket/stopped") == [
        "1-G.ckpt", "stargan/logs/events.log", "stargan/samples/1-images.jpg"]


# -- the DDP tutorial under torchrun, started by the boot file ------------------------------------


def _boot(job: Job, name: str) -> Path:
    script = job.work / name
    options = Options(modelarts=True, modelarts_boot=True, modelarts_entry_files=(str(script),),
                      modelarts_data_dir=str(job.cache / "data"), modelarts_output_dir=str(job.cache / "output"))
    result = migrate_source((ROOT / "fixtures/modelarts/before" / name).read_text(), str(script), options)
    write_migrated(script, result)
    return job.work / ("modelarts_entry_" + name)


def test_torchrun_script_runs_one_process_per_npu_and_rank_0_uploads(job):
    boot = _boot(job, "pt_ddp_torchrun.py")
    log = job.root / "torchrun.log"
    done = job.run(boot, "--total_epochs=3", "--save_every=2", "--train_url=obs://bucket/out", cwd=job.root,
                   ASCEND_VISIBLE_DEVICES="0,1", FAKE_TORCHRUN_LOG=str(log))
    assert done.returncode == 0, done.stderr
    # Two processes; the positional arguments in their place.
    assert log.read_text() == f"--nproc_per_node=2 --standalone {job.work / 'pt_ddp_torchrun.py'} 3 2 " \
                              "--train_url=obs://bucket/out\n"
    assert done.stdout.count("Training snapshot saved at snapshot.pt") == 2  # epochs 0 and 2, rank 0
    assert job.listing("obs://bucket/out") == ["snapshot.pt"]
    assert {row[0] for row in job.calls("copy")} == {job.calls("copy")[0][0]}  # one process uploads
    assert (job.obs / "bucket/out/snapshot.pt").read_text() == repr({"EPOCHS_RUN": 2, "WORLD": "2"})


def test_torchrun_script_stopped_with_sigterm_through_the_boot_file(job):
    # One epoch that holds after its snapshot until the SIGTERM (was: 50 epochs of 1 s, each saving
    # the snapshot again: the signal could meet a save, or come after the 50 s on a loaded machine).
    boot = _boot(job, "pt_ddp_torchrun.py")
    proc = job.start(boot, "--total_epochs=1", "--save_every=1", f"--hold={NEVER}", "--train_url=obs://bucket/out",
                     RANK_SIZE="2", FAKE_TORCHRUN_LOG=str(job.root / "torchrun.log"))
    read_until(proc, "Epoch 0 | Training snapshot saved at snapshot.pt")
    stdout, _ = job.stop(proc)
    # The boot file passed the SIGTERM to torchrun, which passed it to both processes: each ended
    # by it (rank 0 after copying its snapshot), so torchrun failed, and the boot file with it.
    assert proc.returncode == 1, stdout
    assert "[modelarts-entry] pt_ddp_torchrun.py ended with status 1\n" in stdout
    assert job.listing("obs://bucket/out") == ["snapshot.pt"]
    assert (job.obs / "bucket/out/snapshot.pt").read_text() == repr({"EPOCHS_RUN": 0, "WORLD": "2"})


# -- a MindSpore model-zoo project: config module, moxing_wrapper, eval/export scripts ------------


def test_model_zoo_project_gets_no_second_copier_and_helper_scripts_are_not_entries(tmp_path, run_cli):
    project = tmp_path / "resnet"
    shutil.copytree(PROJECTS / "ms_modelzoo", project)
    before = {p: p.read_text() for p in project.rglob("*.py")}
    done = run_cli(".", "--modelarts", "--write", "--format", "json", cwd=project)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    found = {(Path(r["path"]).name, f["code"]) for r in report["files"] for f in r["findings"]}
    assert ("train.py", "NPU210") in found
    messages = [f["message"] for r in report["files"] for f in r.get("findings", []) if f["code"] == "NPU210"]
    assert messages == ["already adapted for ModelArts: it copies from and to OBS through "
                        "`src.model_utils.moxing_adapter`, so no second copier is added; its arguments "
                        "are parsed in `src.model_utils.config`: that parser must accept --data_url/--train_url and "
                        "the platform's other arguments (parse_known_args)"]
    assert not (project / "npu_migrate_modelarts.py").exists()
    after = {p: p.read_text() for p in project.rglob("*.py")}
    assert after[project / "train.py"] == before[project / "train.py"]
    assert after[project / "export.py"] == before[project / "export.py"]
    # eval.py only gets the device migration.
    assert after[project / "eval.py"] == before[project / "eval.py"].replace('device_target="GPU"',
                                                                             'device_target="Ascend"')


# -- an entry script and a data-preparation utility beside it ----------------------


def test_a_utility_run_by_hand_beside_the_entry_script_is_not_adapted(job, run_cli):
    shutil.copytree(PROJECTS / "imagenet_tools", job.work, dirs_exist_ok=True)
    utility = (job.work / "valprep.py").read_text()
    done = run_cli(".", "--modelarts", "--write", cwd=job.work)
    assert done.returncode == 0, done.stderr
    assert done.stderr.decode().startswith(
        "npu-migrate: note: valprep.py is not adapted for ModelArts: its main block trains nothing and a script "
        "beside it trains (a utility run by hand; --entry adapts it)\n")
    # valprep.py has argparse and a main block but trains nothing, and main.py beside it trains.
    assert (job.work / "valprep.py").read_text() == utility
    assert "from npu_migrate_modelarts import modelarts_setup" in (job.work / "main.py").read_text()
    # Run by hand, the utility works as it did; the entry script runs as a job.
    labels = job.work / "labels.csv"
    labels.write_text("a.JPEG,n01440764\nb.JPEG,n01443537\n")
    job.put(str(job.work / "imagenet/val"), {"a.JPEG": "", "b.JPEG": ""})
    prepared = job.run(job.work / "valprep.py", "--labels", str(labels))
    assert (prepared.returncode, prepared.stdout) == (0, "moved 2 images\n"), prepared.stderr
    shutil.move(str(job.work / "imagenet"), str(job.obs / "bucket" / "imagenet"))
    done = job.run(job.work / "main.py", "--data_url=obs://bucket/imagenet", "--train_url=obs://bucket/out")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "validation images: n01440764/a.JPEG,n01443537/b.JPEG\n"
    assert job.listing("obs://bucket/out") == ["checkpoint.pth.tar"]


def test_a_utility_is_an_entry_script_when_named_or_alone(tmp_path, run_cli):
    for case in ("named", "alone"):
        folder = tmp_path / case
        shutil.copytree(PROJECTS / "imagenet_tools", folder)
        if case == "alone":
            (folder / "main.py").unlink()  # no training script beside it: adapted as before
            done = run_cli(".", "--modelarts", "--write", cwd=folder)
        else:
            done = run_cli(".", "--modelarts", "--write", "--entry", "valprep.py", cwd=folder)
        assert done.returncode == 0, done.stderr
        assert "from npu_migrate_modelarts import modelarts_setup" in (folder / "valprep.py").read_text(), case
        assert "npu-migrate: note:" not in done.stderr.decode()


def test_a_script_importing_a_project_module_that_uses_moxing_is_adapted_already(tmp_path, run_cli):
    (tmp_path / "utils").mkdir()
    (tmp_path / "utils" / "__init__.py").write_text("")
    (tmp_path / "utils" / "obs.py").write_text(
        "import moxing as mox\n\n\ndef download(url, local):\n    mox.file.copy_parallel(url, local)\n")
    script = ("import argparse\nfrom utils.obs import download\n\n"
              "parser = argparse.ArgumentParser()\nparser.add_argument('--data_dir', default='data')\n"
              "args = parser.parse_args()\n")
    (tmp_path / "train.py").write_text(script)
    done = run_cli("train.py", "--modelarts", "--write", cwd=tmp_path)  # only the script is named
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "train.py").read_text() == script
    assert not (tmp_path / "npu_migrate_modelarts.py").exists()
    assert ("train.py:2:1: NPU210 [info] already adapted for ModelArts: it copies from and to OBS through "
            "`utils.obs`, so no second copier is added") in done.stdout.decode()


def test_an_output_folder_holding_the_code_is_never_emptied(job):
    script = job.adapt("pt_mnist.py", modelarts_output_dir=".")  # a mistake: the working folder
    done = job.run(script, "--save-model", "--train_url=obs://bucket/out")
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in job.work.iterdir()) == ["mnist_cnn.pt", "npu_migrate_modelarts.py", "pt_mnist.py"]
    assert job.listing("obs://bucket/out") == ["mnist_cnn.pt"]
