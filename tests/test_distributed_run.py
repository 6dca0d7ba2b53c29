"""The PyTorch path of --distributed, executed: the converted smoke script runs with two
processes on the CPU stand-in of `npu-migrate rehearse` (npu_migrate/standin: hccl on gloo),
started by the generated launch script (torchrun of the cached torch==2.13.0 virtualenv). Both ranks train, each sees a disjoint half of the data in every epoch, the
weights agree, exactly one checkpoint is written (loadable without DDP's `module.` prefix) and
the loss is finite."""

from __future__ import annotations

import json
import math
import os
import re
import socket
import subprocess
from pathlib import Path

import pytest

from helpers import cli_in_process, write_migrated
from npu_migrate import migrate_source
from npu_migrate.options import Options

ROOT = Path(__file__).resolve().parent.parent
SMOKE = ROOT / "fixtures" / "distributed" / "pytorch" / "smoke_train.py"

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _torchrun_env(tmp_path: Path, python: str) -> dict:
    """The environment of the generated launch script, two processes: `torchrun` on PATH is the one of
    `python`'s folder. PYTHON_EXEC: the interpreter torchrun starts its workers with (sys.executable
    without it): `python`, so that with the fork server (tests/zygote.py) the agent and its workers
    all fork (its folder's torchrun is started by its client)."""
    from torch_env import standin_env

    env = standin_env(tmp_path, devices=2)
    env.update(NPROC="2", MASTER_PORT=str(_free_port()), OMP_NUM_THREADS="1", PYTHON_EXEC=python,
               PATH=str(Path(python).parent) + os.pathsep + env.get("PATH", ""))
    return env


def test_two_processes_train_on_disjoint_halves(tmp_path, torch_python):
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

    env = _torchrun_env(tmp_path, python)
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
    (tmp_path / "load_checkpoint.py").write_text("import torch\n\nprint(sorted(torch.load('checkpoint.pt')))\n")
    keys = subprocess.run([python, "load_checkpoint.py"], cwd=tmp_path, capture_output=True, text=True, env=env,
                          timeout=300)  # (a file, not -c: the fork server forks it)
    assert keys.stdout.strip() == "['bias', 'weight']"
    assert run.stdout.count("epoch 0: loss") == 2  # print is left as it is: each rank prints (as under torchrun)


def test_a_one_line_main_block_joins_the_process_group_and_leaves_it(tmp_path, torch_python):
    """`if __name__ == "__main__": main()` on one line: --distributed inserted no
    distributed_setup() (only an indented main block got one; with a main block the top level
    gets none) and appended distributed_cleanup() after the block, at module level: each rank
    raised "Default process group has not been initialized" at DistributedDataParallel. Both
    calls now go on that line, and both ranks train as with an indented block."""
    text = SMOKE.read_text(encoding="utf-8")
    one_line = text.replace('if __name__ == "__main__":\n    main()\n', 'if __name__ == "__main__": main()\n')
    assert one_line != text
    script = tmp_path / "smoke_train.py"
    result = migrate_source(one_line, str(script), Options(distributed=True))
    assert result.error is None and result.changed
    write_migrated(script, result)
    run = subprocess.run(["bash", str(tmp_path / "run_distributed_smoke_train.sh")], cwd=tmp_path,
                         env=_torchrun_env(tmp_path, torch_python), capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    reports = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("report_*.json"))]
    assert len(reports) == 2 and reports[0]["weight"] == reports[1]["weight"]
    assert result.new_text.endswith(
        'if __name__ == "__main__": distributed_setup(); main(); distributed_cleanup()\n')
    assert "    distributed_setup,\n" in result.new_text
    again = migrate_source(result.new_text, str(script), Options(distributed=True))
    assert again.error is None and not again.changed


MODULE_LEVEL = ROOT / "fixtures" / "distributed" / "pytorch" / "smoke_module_level.py"


def test_module_level_script_with_model_methods_runs_on_two_processes(tmp_path, torch_python):
    """No main block: distributed_setup() runs before the script's own statements; the model's
    own method (init_hidden) and the whole-model torch.save go through unwrap_model(), so the
    converted script runs where the wrapper would raise AttributeError, and the saved model
    is the plain module, loadable without DDP."""
    script = tmp_path / MODULE_LEVEL.name
    result = migrate_source(MODULE_LEVEL.read_text(encoding="utf-8"), str(script), Options(distributed=True))
    assert result.error is None and result.changed
    assert "    state = unwrap_model(model).init_hidden(tokens.size(1))\n" in result.new_text
    assert "    torch.save(unwrap_model(model), \"model.pt\")\n" in result.new_text
    # GRU: on the unsupported list; one random batch, no DataLoader: every rank trains on all of it (NPU393)
    assert sorted(f.code for f in result.findings) == ["NPU304", "NPU387", "NPU393"]
    write_migrated(script, result)
    launcher_path = str(tmp_path / "run_distributed_smoke_module_level.sh")

    env = _torchrun_env(tmp_path, torch_python)
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


# ---------------------------------------------------------------- converted with --modelarts --distributed, rehearsed
# Scripts in the manner of pytorch/examples' word_language_model and dcgan (fixtures/distributed/pytorch),
# converted as a user would and run by `npu-migrate rehearse` with 1 and 2 processes: the verdict
# states what a distributed job must hold, and the run shows it.

WORDS = "the cat sat on a mat and dog ran far away from home with blue red green small big".split()


def _convert(folder: Path, script: str) -> None:
    folder.mkdir(parents=True)
    (folder / script).write_text((ROOT / "fixtures" / "distributed" / "pytorch" / script).read_text(encoding="utf-8"),
                                 encoding="utf-8")
    done = cli_in_process(".", "--modelarts", "--distributed", "--entry", script, "--write", "--no-cache", cwd=folder)
    assert done.returncode == 0, done


def _rehearse(folder: Path, script: str, job: Path, python: str, nproc: int, *options: str) -> str:
    """`npu-migrate rehearse` run in this process (its ranks are processes of their own): the report."""
    done = cli_in_process("rehearse", script, "--python", python, "--nproc", str(nproc), "--job-dir", str(job),
                          "--timeout", "600", *options, cwd=folder, env={"OMP_NUM_THREADS": "1"})
    assert done.returncode in (0, 1), done
    return done.stdout.decode()


def _rank_statuses(report: str) -> list[str]:
    """The exit status column of a rehearsal report's two ranks, in rank order."""
    return re.findall(r"^  [01] +(.+?) +[\d.]+s  logs/rank\d\.log$", report, re.MULTILINE)


def _uploaded(report: str) -> list[str]:
    """The names of the files a rehearsal report lists as having reached train_url."""
    return re.findall(r"^    (\S+)  [\d,]+ bytes$", report, re.MULTILINE)


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    root = tmp_path_factory.mktemp("converted")
    _convert(root / "lm", "word_lm_train.py")
    _convert(root / "dcgan", "dcgan_train.py")
    data = root / "data"
    data.mkdir()
    for name, lines in (("train.txt", 60), ("valid.txt", 10)):
        (data / name).write_text("".join(" ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(8)) + "\n"
                                         for i in range(lines)), encoding="utf-8")
    return root


@pytest.mark.parametrize("nproc", [1, 2])
def test_word_language_model_shards_its_tensor_saves_once_and_loads_after_the_barrier(converted, torch_python,
                                                                                       tmp_path, nproc):
    report = _rehearse(converted / "lm", "word_lm_train.py", tmp_path / "job", torch_python, nproc,
                       "--data", str(converted / "data"), "--", "--cuda")  # (its device: the NPU, as on ModelArts)
    verdict = report.rstrip("\n").splitlines()[-1]
    logs = [(tmp_path / "job" / "logs" / f"rank{r}.log").read_text() for r in range(nproc)]
    firsts = [re.search(r"train data: (\d+) rows from token (\d+)", log).groups() for log in logs]
    ids: dict = {}
    stream = [ids.setdefault(w, len(ids)) for line in (converted / "data" / "train.txt").read_text().splitlines()
              for w in line.split() + ["<eos>"]]
    rows = len(stream) // 4  # batchify(corpus.train, 4): row r starts with token r
    if nproc == 1:
        assert verdict == "OK: every rank succeeded and 1 file reached train_url", report
        assert firsts == [(str(rows), "0")]
        return
    assert verdict == "OK: every rank succeeded, the ranks agree and 1 file reached train_url", report
    assert ("  distributed: the 2 ranks hold the same parameters at exit (1 model in DistributedDataParallel); "
            "the ranks kept disjoint parts of the data rank_shard cut; the output file had one writer; "
            "no uploaded file is truncated\n") in report
    # rank_shard: each rank a contiguous half of the batchified corpus (as its record says, and the script prints)
    assert firsts == [(str(rows // 2), "0"), (str(rows // 2), str(stream[rows // 2]))] and stream[rows // 2] != 0
    # the best model, written by rank 0 under `with open(...)`, read back whole by both ranks
    assert all("| end of training | best valid loss" in log and "EOFError" not in log for log in logs)
    assert re.search(r"^    model\.pt  [\d,]+ bytes$", report, re.MULTILINE)


def test_dcgan_ranks_agree_because_ddp_wraps_after_weights_init(converted, torch_python, tmp_path):
    report = _rehearse(converted / "dcgan", "dcgan_train.py", tmp_path / "job", torch_python, 2, "--", "--cuda")
    assert report.rstrip("\n").splitlines()[-1] == (
        "OK: every rank succeeded, the ranks agree and 7 files reached train_url"), report
    assert ("  distributed: the 2 ranks hold the same parameters at exit (2 models in DistributedDataParallel); "
            "the ranks' DistributedSamplers drew disjoint parts of the data; each of the 7 output files had one "
            "writer; no uploaded file is truncated\n") in report
    losses = [line.split()[:2] for line in (tmp_path / "job" / "code" / "dcgan" / "out" / "losses.txt").read_text(
        ).splitlines()]
    assert losses == [[str(e), str(i)] for e in range(2) for i in range(4)]  # one writer: 64 samples / 2 ranks / 8


def test_dcgan_wrapped_before_its_weights_init_fails_the_rehearsal(converted, torch_python, tmp_path):
    """What the conversion did before (DDP right after `.to(device)`, then `apply(weights_init)`
    with each rank's own random seed): the ranks train different models, and rehearse says so."""
    code = tmp_path / "dcgan"
    import shutil

    shutil.copytree(converted / "dcgan", code)
    script = code / "dcgan_train.py"
    text = script.read_text(encoding="utf-8")
    for net in ("netG", "netD"):
        text = text.replace(f"{net} = distributed_model({net})\n", "")
        text = text.replace(f"{net} = {net[3]}{'enerator' if net == 'netG' else 'iscriminator'}().to(device)\n",
                            f"{net} = {net[3]}{'enerator' if net == 'netG' else 'iscriminator'}().to(device)\n"
                            f"{net} = distributed_model({net})\n")
    assert text.count("= distributed_model(") == 2 and "netG = distributed_model(netG)\nnetG.apply" in text
    script.write_text(text, encoding="utf-8")
    report = _rehearse(code, "dcgan_train.py", tmp_path / "job", torch_python, 2, "--", "--cuda")
    assert re.search(r"^FAILED: the ranks hold different parameters at exit \(rank 0: [0-9a-f]{12}, "
                     r"rank 1: [0-9a-f]{12}\): they trained different models$", report, re.MULTILINE), report


def test_the_boot_file_starts_a_converted_script_through_torchrun_one_process_per_npu(tmp_path, torch_python):
    """`--modelarts --distributed --modelarts-entry` in one run: the boot file starts the script
    with torch.distributed.run, one process per NPU of the node (RANK_SIZE=2 here), where a plain
    `python` would have left one process waiting in init_process_group for a peer that never comes
   . Both ranks train in one group; rank 0's checkpoint reaches train_url."""
    folder = tmp_path / "code"
    folder.mkdir()
    script = folder / "smoke_train.py"
    options = Options(distributed=True, modelarts=True, modelarts_boot=True, modelarts_entry_files=(str(script),))
    result = migrate_source(SMOKE.read_text(encoding="utf-8"), str(script), options)
    assert result.error is None
    write_migrated(script, result)
    boot = folder / "modelarts_entry_smoke_train.py"
    assert "\nTORCHRUN = True\n" in boot.read_text(encoding="utf-8")
    (tmp_path / "obs" / "bucket" / "data").mkdir(parents=True)
    (tmp_path / "obs" / "bucket" / "data" / "README").write_text("input\n")
    # the launch script's environment (the fork server's plain zygote serves it, as it serves the other
    # torchrun tests; the boot file reads none of NPROC, MASTER_PORT, PATH), RANK_SIZE as ModelArts sets it
    env = _torchrun_env(tmp_path, torch_python)
    env.update(RANK_SIZE="2", NPU_MIGRATE_MODELARTS_CACHE=str(tmp_path / "cache"))
    run = subprocess.run([torch_python, str(boot), "--data_url=obs://bucket/data/", "--train_url=obs://bucket/out/"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "-m torch.distributed.run --nproc_per_node=2 --standalone " in run.stdout
    reports = [json.loads(p.read_text()) for p in sorted(folder.glob("report_*.json"))]
    assert len(reports) == 2 and reports[0]["weight"] == reports[1]["weight"]
    assert (tmp_path / "obs" / "bucket" / "out" / "checkpoint.pt").is_file()


def test_dcgan_preempted_after_its_second_checkpoint_delivers_whole_files(converted, torch_python, tmp_path):
    """Preemption (SIGTERM to both ranks) once the second epoch's checkpoints are saved, an event,
    not a time: rank 0 marks it with a folder (`--sigterm-on`), and both ranks wait there for the
    signal. (The job once trained on while rehearse noticed the checkpoint file: an epoch takes
    milliseconds, so the signal met a later save or a collective as the machine's load decided.)
    What reached train_url is exactly what was saved, whole, each file with one writer."""
    import shutil

    code = tmp_path / "dcgan"
    shutil.copytree(converted / "dcgan", code)
    script = code / "dcgan_train.py"
    text = script.read_text(encoding="utf-8")
    last_save = '        torch.save(unwrap_model(netD).state_dict(), "%s/netD_epoch_%d.pth" % (opt.outf, epoch))\n'
    assert text.count(last_save) == 1, text
    script.write_text(text.replace(last_save, last_save + (
        "    if epoch == 1:  # preempted here: wait for the SIGTERM\n"
        "        import time\n\n"
        "        if is_main_process():\n"
        "            os.mkdir('preempt-now')\n"
        "        while True:\n"
        "            time.sleep(1)\n")), encoding="utf-8")
    report = _rehearse(code, "dcgan_train.py", tmp_path / "job", torch_python, 2,
                       "--sigterm-on", "preempt-now", "--", "--cuda", "--niter", "100000")
    assert _rank_statuses(report) == ["-15 (SIGTERM) after SIGTERM"] * 2, report
    assert report.rstrip("\n").splitlines()[-1] == "OK: every rank succeeded and 7 files reached train_url", report
    names = _uploaded(report)
    assert sorted(names) == ["fake_samples_epoch_000.npy", "fake_samples_epoch_001.npy", "losses.txt",
                             "netD_epoch_0.pth", "netD_epoch_1.pth", "netG_epoch_0.pth", "netG_epoch_1.pth"], report
    out, saved = tmp_path / "job/obs/rehearsal/out", tmp_path / "job/code/dcgan/out"
    assert all((out / name).read_bytes() == (saved / name).read_bytes() for name in names)
    assert re.search(r"^  distributed: .*had one writer; no uploaded file is truncated$", report, re.MULTILINE), report
    assert "the ranks hold" not in report  # stopped by a signal: no claim about the parameters


def test_a_checkpoint_cut_short_by_the_preemption_goes_as_incomplete_and_fails_nothing(converted, torch_python,
                                                                                      tmp_path):
    """Rank 0 is preempted halfway through writing its second epoch's netD checkpoint: the job's
    runtime uploads what was written as netD_epoch_1.pth.incomplete (by design: train_url keeps
    nothing under the name but whole files). The rehearsal counted that file as an uploaded
    truncated checkpoint and failed a job that did what it should."""
    import shutil

    code = tmp_path / "dcgan"
    shutil.copytree(converted / "dcgan", code)
    script = code / "dcgan_train.py"
    text = script.read_text(encoding="utf-8")
    save = '        torch.save(unwrap_model(netD).state_dict(), "%s/netD_epoch_%d.pth" % (opt.outf, epoch))\n'
    assert text.count(save) == 1, text
    script.write_text(text.replace(save, (
        "        if epoch == 1:  # half of the checkpoint written when the SIGTERM comes\n"
        "            import io\n            import time\n\n"
        "            whole = io.BytesIO()\n"
        "            torch.save(unwrap_model(netD).state_dict(), whole)\n"
        "            with open(\"%s/netD_epoch_%d.pth\" % (opt.outf, epoch), \"wb\") as half:\n"
        "                half.write(whole.getvalue()[:len(whole.getvalue()) // 2])\n"
        "                half.flush()\n"
        "                os.mkdir('preempt-now')\n"
        "                while True:\n"
        "                    time.sleep(1)\n"
        + save + "    if epoch == 1:  # the other rank waits for the SIGTERM here\n"
        "        import time\n\n"
        "        while True:\n"
        "            time.sleep(1)\n")), encoding="utf-8")
    report = _rehearse(code, "dcgan_train.py", tmp_path / "job", torch_python, 2,
                       "--sigterm-on", "preempt-now", "--", "--cuda", "--niter", "100000")
    assert _rank_statuses(report) == ["-15 (SIGTERM) after SIGTERM"] * 2, report
    names = _uploaded(report)
    assert sorted(names) == ["fake_samples_epoch_000.npy", "fake_samples_epoch_001.npy", "losses.txt",
                             "netD_epoch_0.pth", "netD_epoch_1.pth.incomplete", "netG_epoch_0.pth",
                             "netG_epoch_1.pth"], report
    out, saved = tmp_path / "job/obs/rehearsal/out", tmp_path / "job/code/dcgan/out"
    assert (out / "netD_epoch_1.pth.incomplete").read_bytes() == (saved / "netD_epoch_1.pth").read_bytes()
    assert report.rstrip("\n").splitlines()[-1] == "OK: every rank succeeded and 7 files reached train_url", report
    assert "uploaded truncated" not in report
    assert re.search(r"^  distributed: .*had one writer; no file uploaded under its own name is truncated "
                     r"\(netD_epoch_1\.pth\.incomplete was cut short and is named so\)$", report, re.MULTILINE), report
