"""Real training programs nobody here wrote, migrated with `--modelarts` and rehearsed.

Each program comes from a pinned wheel or sdist on PyPI (downloaded once by
tests/corpus_wheels.py's `download`, sha256-checked, cached in ~/.cache/npu-migrate-corpus/rehearse
or $NPU_MIGRATE_CORPUS_CACHE/rehearse); the test makes a tiny data set, migrates the program as a
user would (`npu-migrate . --modelarts [--distributed] --entry ... --write`) and runs `npu-migrate
rehearse` with 1 and 2 processes for an epoch of a few steps, and once preempted (SIGTERM), with
torch==2.13.0 on the CPU stand-in (`torch_python`; the libraries the programs import are in
tests/torch_env.py's PACKAGES). Without the package index the tests are skipped and say so.

The programs:
- BERT pre-training, bert-pytorch 0.0.1a4 (wheel): `.cuda` devices, nn.DataParallel over every
  visible GPU, a checkpoint per epoch;
- the differentially private name classifier of opacus 1.6.0 (sdist,
  examples/char-lstm-classification.py): `--device cuda`, `parse_args()`, a required data
  argument, one result file saved in the working folder at the end; a one-device script, taken to
  two NPUs with `--distributed`, seeded in the rehearsed copy (its Poisson batches are random: see
  CHAR_LSTM_SEED);
- Sockeye 3.1.34's trainer (wheel), started as ModelArts starts a code folder, by a boot file that
  calls `sockeye.train.main()`: its own parser stops the job on the platform's arguments, which
  npu-migrate reports (NPU219); with the fix the report suggests it trains on two NPUs with its
  torchrun-style `--dist` and, preempted, delivers its checkpoints;
- CleanRL 1.2.0's PPO (wheel, cleanrl/ppo.py): a script that trains in its main block and computes
  its loss with a method of the model (`agent.get_action_and_value(...)`); on one NPU its TensorBoard
  log reaches train_url (told `--cuda False`, it trains on the CPU and the rehearsal fails it); with
  --distributed it is reported, not wrapped (DDP would average none of its forward passes), and its two
  processes each train alone.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tarfile
import zipfile
from pathlib import Path
from typing import Dict, Tuple

import pytest

from corpus_wheels import download as download_pinned
from helpers import cli_in_process

pytestmark = pytest.mark.slow

# name==version -> (file name, sha256)
PROGRAMS: Dict[str, Tuple[str, str]] = {
    # BERT pre-training (codertimo/BERT-pytorch): `bert` console script = bert_pytorch.__main__:train,
    # .cuda devices, nn.DataParallel over every visible GPU; torch, numpy and tqdm only.
    "bert-pytorch==0.0.1a4": ("bert_pytorch-0.0.1a4-py3-none-any.whl",
                              "1bdb6ff4f5ab922b1e9877914f4804331f8770ed08f0ebbb406fcee57d3951fa"),
    # Opacus (differential privacy for PyTorch): its examples ship only in the sdist; the library
    # itself (opacus==1.6.0, with scipy and opt_einsum) is in the torch test environment.
    "opacus==1.6.0": ("opacus-1.6.0.tar.gz", "20d77252c1e8528cd5826fbaba345cd39ed5c3edb841707eafb6403fe276140a"),
    # Sockeye (neural machine translation): `sockeye-train` = sockeye.train:main, a parser of its own
    # (parse_args()), `cuda` devices and NCCL, torchrun-style --dist, checkpoints in its -o folder;
    # it needs pyyaml and sacrebleu besides torch and numpy.
    "sockeye==3.1.34": ("sockeye-3.1.34-py3-none-any.whl",
                        "0bc9eeabb8d5ff2af8246299e701d7675a2b6c9101b66704347b72b76921d5e2"),
    # CleanRL (single-file deep RL): cleanrl/ppo.py trains PPO on gym's CartPole in its main block, `--cuda`,
    # `parse_args()`, TensorBoard logs in runs/<run name>/; it needs gym 0.23.1 (whose CartPole imports
    # pygame) and tensorboard besides torch and numpy.
    "cleanrl==1.2.0": ("cleanrl-1.2.0-py3-none-any.whl",
                       "002f6dac6cd0efb5889cd9096a252da1b4bc98a8f52ccb1f47a7215c18b30369"),
}


def download(requirement: str) -> Path:
    filename, sha256 = PROGRAMS[requirement]
    return download_pinned(requirement, filename, sha256, kind="rehearse", sdist=filename.endswith(".tar.gz"))


def migrate(code: Path, entry: str, *options: str) -> subprocess.CompletedProcess:
    """`npu-migrate . --modelarts OPTIONS --entry ENTRY --write` in `code`, in this process (the
    migration; the rehearsal runs in processes of its own), its output as text."""
    done = cli_in_process(".", "--modelarts", *options, "--entry", entry, "--write", "--no-cache", cwd=code)
    assert done.returncode == 0, done
    return subprocess.CompletedProcess(done.args, 0, done.stdout.decode(), done.stderr.decode())


def rehearse(code: Path, script: str, job: Path, torch_python: str, *options: str,
             args: Tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """`npu-migrate rehearse` run in this process (its ranks are processes of their own), its output as text."""
    ran = cli_in_process("rehearse", script, "--python", torch_python, "--job-dir", str(job), "--timeout", "300",
                         *options, "--", *args, cwd=code)
    done = subprocess.CompletedProcess(ran.args, ran.returncode, ran.stdout.decode(), ran.stderr.decode())
    done.job = job
    return done


def _helper_env() -> Dict[str, str]:
    """The environment of a program that prepares a test's data: the package's own folder only on sys.path,
    unbuffered as rehearse's ranks are (so the fork server's zygote of the ranks forks it too)."""
    return {**os.environ, "PYTHONPATH": "", "PYTHONUNBUFFERED": "1"}


def ranks(report: str) -> Dict[int, str]:
    """rank -> exit status column of the rehearsal report."""
    found = {}
    for match in re.finditer(r"^  (\d+) +(.+?) +[\d.]+s  logs/rank\d+\.log$", report, re.MULTILINE):
        found[int(match.group(1))] = match.group(2).strip()
    return found


def uploaded(report: str):
    return re.findall(r"^    (\S+)  [\d,]+ bytes$", report, re.MULTILINE)


# ---------------------------------------------------------------- BERT-pytorch

WORDS = "the cat sat on a mat and dog ran far away from home with blue red green small big".split()


@pytest.fixture(scope="module")
def bert_project(tmp_path_factory, torch_python):
    """The wheel's package, migrated with --modelarts, a launcher for its console script, and a
    corpus with the vocabulary the package's own WordVocab builds from it."""
    wheel = download("bert-pytorch==0.0.1a4")
    root = tmp_path_factory.mktemp("bert")
    code = root / "bert"
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if name.startswith("bert_pytorch/"):
                z.extract(name, code)
    # ModelArts starts a file: the console script `bert` is bert_pytorch.__main__:train.
    (code / "run_bert.py").write_text(
        "from bert_pytorch.__main__ import train\n\nif __name__ == \"__main__\":\n    train()\n")
    (code / "output").mkdir()  # its README's `-o output/bert.model` expects the folder
    migrated = migrate(code, "bert_pytorch/__main__.py")
    trainer = (code / "bert_pytorch/trainer/pretrain.py").read_text()
    assert 'torch.device("npu:0" if cuda_condition else "cpu")' in trainer
    assert "NPU305" in migrated.stdout  # nn.DataParallel: reported, left as it is
    data = root / "data"
    data.mkdir()
    lines = []
    for i in range(16):
        first = " ".join(WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(5))
        second = " ".join(WORDS[(i * 5 + k * 2) % len(WORDS)] for k in range(4))
        lines.append(first + "\t" + second + "\n")
    (data / "corpus.txt").write_text("".join(lines))
    (root / "make_vocab.py").write_text(  # (bert_pytorch imports torch: a file, which the fork server forks)
        "import sys\n\nsys.path.insert(0, sys.argv[1])\n"
        "from bert_pytorch.dataset.vocab import WordVocab  # noqa: E402\n\n"
        "WordVocab(open(sys.argv[2]), max_size=None, min_freq=1).save_vocab(sys.argv[3])\n")
    vocab = subprocess.run([torch_python, str(root / "make_vocab.py"), str(code), str(data / "corpus.txt"),
                            str(data / "vocab.small")], capture_output=True, text=True, env=_helper_env(),
                           timeout=600)
    assert vocab.returncode == 0, vocab.stderr
    return code, data


BERT_ARGS = ("-c", "/cache/data/corpus.txt", "-v", "/cache/data/vocab.small", "-o", "output/bert.model",
             "-hs", "16", "-l", "1", "-a", "2", "-s", "8", "-b", "8", "-e", "1", "-w", "0")

_bert_runs: Dict[int, subprocess.CompletedProcess] = {}


def rehearse_bert(project, torch_python, tmp_path_factory, nproc: int) -> subprocess.CompletedProcess:
    if nproc not in _bert_runs:
        code, data = project
        job = tmp_path_factory.mktemp(f"bert-job{nproc}")
        _bert_runs[nproc] = rehearse(code, "run_bert.py", job / "job", torch_python, "--nproc", str(nproc),
                                     "--data", str(data), args=BERT_ARGS)
    return _bert_runs[nproc]


def test_bert_trains_an_epoch_on_one_npu(bert_project, torch_python, tmp_path_factory):
    done = rehearse_bert(bert_project, torch_python, tmp_path_factory, 1)
    assert ranks(done.stdout) == {0: "0"}, done.stdout + done.stderr
    log = (done.job / "logs/rank0.log").read_text()
    assert "EP0_train, avg_loss=" in log and "EP:0 Model Saved on: output/bert.model.ep0" in log
    assert "copies of OBS input into /cache on node 0: 1 " in done.stdout
    assert "    bert.model.ep0  " in done.stdout  # uploaded (-o output/bert.model: its folder is the output)


def test_bert_checkpoint_reaches_train_url(bert_project, torch_python, tmp_path_factory):
    done = rehearse_bert(bert_project, torch_python, tmp_path_factory, 1)
    assert done.returncode == 0, done.stdout
    assert uploaded(done.stdout) == ["bert.model.ep0"]


def test_bert_on_two_npus_does_not_enter_dataparallel(bert_project, torch_python, tmp_path_factory):
    # BERTTrainer wraps the model in nn.DataParallel when `torch.cuda.device_count() > 1`, which
    # torch_npu does not support: npu-migrate reports the call (NPU305) and leaves that count CUDA
    # (NPU315 data-parallel-count, 4508756), so on the NPU it is 0 and each process trains on its
    # own NPU, as before the migration (before 4508756 the count became the NPUs' and both ranks
    # failed in DataParallel). Both save output/bert.model.ep0: rank 0 copies it whole.
    done = rehearse_bert(bert_project, torch_python, tmp_path_factory, 2)
    assert done.returncode == 0, done.stdout + done.stderr
    assert ranks(done.stdout) == {0: "0", 1: "0"}, done.stdout + done.stderr
    trainer = (bert_project[0] / "bert_pytorch/trainer/pretrain.py").read_text()
    assert "torch.cuda.device_count() > 1" in trainer
    assert uploaded(done.stdout) == ["bert.model.ep0"]
    verdict = done.stdout.rstrip("\n").splitlines()[-1]
    assert verdict == "OK: every rank succeeded and 1 file reached train_url", done.stdout
    assert "copies of OBS input into /cache on node 0: 1 " in done.stdout  # the node copied its input once


# The preemption comes at an event, not a time: the job's launcher marks the moment with an empty
# folder (no file: not an output, not in the report), and `rehearse --sigterm-on` sends SIGTERM once
# it exists. The job then waits for that SIGTERM where it marked it: an epoch of these tiny models
# takes milliseconds, so a job that trained on would be stopped wherever the machine's load let it
# get (CI saw the SIGTERM land two epochs later, in the middle of a save). rehearse's --timeout
# (300 s) is the ceiling when the signal never comes.
PREEMPT_NOW = "preempt-now"


def test_bert_preempted_during_training_still_delivers_its_checkpoints(bert_project, torch_python, tmp_path):
    # Epochs without end; SIGTERM once the third checkpoint is whole, at the start of the fourth
    # epoch, which waits for it.
    code, data = bert_project
    marked = tmp_path / "bert"
    shutil.copytree(code, marked, symlinks=True)
    launcher = (marked / "run_bert.py").read_text()
    main = 'if __name__ == "__main__":\n'
    assert launcher.count(main) == 1, launcher
    (marked / "run_bert.py").write_text(launcher.replace(main, (
        "import os\nimport time\nfrom bert_pytorch.trainer import BERTTrainer\n\n_train = BERTTrainer.train\n\n\n"
        "def train_or_wait(self, epoch):\n"
        f"    if epoch == 3:  # ep0..ep2 saved\n        os.mkdir({PREEMPT_NOW!r})\n"
        "        while True:  # until the SIGTERM\n            time.sleep(1)\n"
        "    return _train(self, epoch)\n\n\n"
        "BERTTrainer.train = train_or_wait\n\n") + main))
    args = tuple("100000" if a == "1" and BERT_ARGS[i - 1] == "-e" else a for i, a in enumerate(BERT_ARGS))
    done = rehearse(marked, "run_bert.py", tmp_path / "job", torch_python, "--data", str(data),
                    "--sigterm-on", PREEMPT_NOW, args=args)
    assert done.returncode == 0, done.stdout + done.stderr
    assert ranks(done.stdout) == {0: "-15 (SIGTERM) after SIGTERM"}
    checkpoints = ["bert.model.ep0", "bert.model.ep1", "bert.model.ep2"]
    assert sorted(p.name for p in (done.job / "code/bert/output").iterdir()) == checkpoints
    # Every checkpoint saved before the preemption reached train_url, whole, under its own name.
    out = done.job / "obs/rehearsal/out"
    assert sorted(p.name for p in out.iterdir()) == checkpoints
    assert all((out / name).read_bytes() == (done.job / "code/bert/output" / name).read_bytes()
               for name in checkpoints)
    assert uploaded(done.stdout) == checkpoints
    assert "files that reached train_url (obs://rehearsal/out/): 3\n" in done.stdout
    assert "did not reach train_url" not in done.stdout


# ---------------------------------------------------------------- opacus: examples/char-lstm-classification.py

NAMES = {
    "English": ["Smith", "Jones", "Taylor", "Brown", "Wilson", "Evans", "Thomas", "Roberts"],
    "French": ["Dubois", "Lefevre", "Moreau", "Laurent", "Simon", "Michel", "Garnier", "Faure"],
    "Italian": ["Rossi", "Russo", "Ferrari", "Esposito", "Bianchi", "Romano", "Colombo", "Ricci"],
}
# --data-root is required: relative, it is looked up in the job's copy of the input (/cache/data/names).
CHAR_LSTM_ARGS = ("--data-root", "names", "-b", "8", "--epochs", "1", "--embedding-size", "8", "--hidden-size", "8")
CHAR_LSTM = "char-lstm-classification.py"
CHAR_LSTM_RESULT = "run_results_chr_lstm_classification.pt"
# Opacus' make_private replaces the training DataLoader with Poisson sampling, drawn from torch's global
# generator, which the script never seeds: with these 19 names and -b 8 each batch may come out empty. One
# process yields an empty batch (the script then divides by len(y) == 0: (2/3)**19 a step); on two ranks
# (the model in DistributedDataParallel) Opacus' DistributedUniformWithReplacementSampler draws each rank's
# batches from its own 10 or 9 names with sample rate 1/2 and *skips* an empty one, so that rank runs one
# step fewer and leaves the other waiting in its next step's collective (about 0.4-0.6 % of runs; every
# program forked by the test run's zygote shares one torch seed, so one run's char-lstm rehearsals fail
# together, as CI saw once). The rehearsed copy seeds torch at the start of main() on every rank, with a
# seed whose draws are non-empty: rank 0 takes 4 and 6 names, rank 1 4 and 4, one process 6, 7 and 8
# (torch 2.13.0, opacus 1.6.0). CHAR_LSTM_EMPTY_BATCH_SEED gives rank 1 4 and 0 (skipped), rank 0 4 and 1.
CHAR_LSTM_SEED = 0
CHAR_LSTM_EMPTY_BATCH_SEED = 218
CHAR_LSTM_ARGS_LINE = '    args = modelarts_setup(parser.parse_known_args()[0], data=["data_root"])\n'


@pytest.fixture(scope="module")
def opacus_example(tmp_path_factory):
    """The example script of the sdist, and a data folder with a names/<language>.txt layout."""
    sdist = download("opacus==1.6.0")
    root = tmp_path_factory.mktemp("opacus")
    with tarfile.open(sdist) as tar:
        script = tar.extractfile(f"opacus-1.6.0/examples/{CHAR_LSTM}").read()
    data = root / "data" / "names"
    data.mkdir(parents=True)
    for language, names in NAMES.items():
        (data / f"{language}.txt").write_text("\n".join(names) + "\n")
    return script, data.parent


def _char_lstm_project(example, folder: Path, *options: str) -> subprocess.CompletedProcess:
    script, _ = example
    folder.mkdir()
    (folder / CHAR_LSTM).write_bytes(script)
    migrated = migrate(folder, CHAR_LSTM, *options)
    assert "NPU212" in migrated.stdout  # the required --data-root: reported (ModelArts passes only --data_url)
    text = (folder / CHAR_LSTM).read_text()
    assert 'default="npu",' in text and 'device="npu:0",' in text
    assert text.count(CHAR_LSTM_ARGS_LINE) == 1, text
    (folder / CHAR_LSTM).write_text(seeded(text, CHAR_LSTM_SEED))
    return migrated


def seeded(text: str, seed: int) -> str:
    """The migrated script with torch seeded at the start of main(), alike on every rank (CHAR_LSTM_SEED)."""
    return text.replace(CHAR_LSTM_ARGS_LINE, f"{CHAR_LSTM_ARGS_LINE}    torch.manual_seed({seed})\n")


def test_char_lstm_trains_on_one_npu_and_its_result_reaches_train_url(opacus_example, torch_python, tmp_path):
    migrated = _char_lstm_project(opacus_example, tmp_path / "code")
    assert "NPU396" not in migrated.stdout  # one process: every Poisson batch is yielded, an empty one too
    done = rehearse(tmp_path / "code", CHAR_LSTM, tmp_path / "job", torch_python, "--data", str(opacus_example[1]),
                    args=CHAR_LSTM_ARGS)
    assert done.returncode == 0, done.stdout + done.stderr
    assert ranks(done.stdout) == {0: "0"}
    assert uploaded(done.stdout) == [CHAR_LSTM_RESULT]  # saved in the working folder, uploaded from there
    log = (done.job / "logs/rank0.log").read_text()
    assert "19 samples for training, 5 for testing" in log and "Test Accuracy: " in log
    assert "| 3/3 [" in log  # the three Poisson batches of CHAR_LSTM_SEED (6, 7, 8 names), each trained on
    assert "copies of OBS input into /cache on node 0: 1 " in done.stdout
    assert done.stdout.rstrip("\n").splitlines()[-1] == "OK: every rank succeeded and 1 file reached train_url"


@pytest.fixture(scope="module")
def char_lstm_distributed(opacus_example, tmp_path_factory):
    code = tmp_path_factory.mktemp("char-lstm-distributed") / "code"
    migrated = _char_lstm_project(opacus_example, code, "--distributed")
    assert "NPU386" in migrated.stdout  # the fixed "cuda:0" defaults of train()/test(): reported
    # What the empty-Poisson-batch test below shows, reported where the script calls make_private (sdist line).
    assert [line.split(" -- ")[0] for line in migrated.stdout.splitlines() if ": NPU396 " in line] == [
        f"{CHAR_LSTM}:439:42: NPU396 [warning] `privacy_engine.make_private` samples each rank's batches on its own "
        "once the model is in DistributedDataParallel (Opacus' DistributedUniformWithReplacementSampler), and a rank "
        "whose Poisson draw is empty skips that step: the other ranks then wait for it in a collective until the job "
        "fails or hangs"]
    text = (code / CHAR_LSTM).read_text()
    assert "    distributed_setup()\n" in text and "    model = distributed_model(model)\n" in text
    return code


def test_char_lstm_taken_to_two_npus_with_distributed(char_lstm_distributed, opacus_example, torch_python, tmp_path):
    done = rehearse(char_lstm_distributed, CHAR_LSTM, tmp_path / "job", torch_python, "--nproc", "2",
                    "--data", str(opacus_example[1]), args=CHAR_LSTM_ARGS)
    assert done.returncode == 0, done.stdout + done.stderr
    assert ranks(done.stdout) == {0: "0", 1: "0"}
    assert uploaded(done.stdout) == [CHAR_LSTM_RESULT]  # saved by rank 0 only
    # What a distributed job must hold, checked by rehearse from each rank's record.
    # (Opacus' make_private swaps the DistributedSampler for its own Poisson sampler, which
    # rehearse does not record: no claim about the data.)
    assert ("  distributed: the 2 ranks hold the same parameters at exit (1 model in DistributedDataParallel); "
            "the output file had one writer; no uploaded file is truncated\n") in done.stdout, done.stdout
    assert done.stdout.rstrip("\n").splitlines()[-1] == (
        "OK: every rank succeeded, the ranks agree and 1 file reached train_url")
    assert "copies of OBS input into /cache on node 0: 1 " in done.stdout  # once for the node
    rank0 = (done.job / "logs/rank0.log").read_text()
    rank1 = (done.job / "logs/rank1.log").read_text()
    # Both trained in one process group, and each prints its own progress (print is not patched).
    assert "Epoch 0. Accuracy: " in rank0 and "Test Accuracy: " in rank0
    assert "Epoch 0. Accuracy: " in rank1 and "Traceback" not in rank1
    assert "| 2/2 [" in rank0 and "| 2/2 [" in rank1  # both steps of CHAR_LSTM_SEED's draws, on both ranks


def test_char_lstm_on_two_npus_a_rank_with_an_empty_poisson_batch_leaves_the_other_in_a_collective(
        char_lstm_distributed, opacus_example, torch_python, tmp_path):
    # What CI once saw unseeded, pinned by its draw: rank 1's second batch is empty, Opacus' distributed
    # sampler skips it, so rank 1 trains one step, tests, saves nothing (not rank 0) and ends well; rank 0,
    # in its second step, waits in DistributedDataParallel's forward for a rank that has left, and gloo
    # fails it. A genuine failure of the script on more than one process (npu-migrate's --distributed puts
    # the model in DistributedDataParallel, which makes make_private sample per rank): rehearse says so, and
    # why (from the stand-in's count of each rank's training forwards through DistributedDataParallel).
    code = tmp_path / "code"
    shutil.copytree(char_lstm_distributed, code, symlinks=True)
    text = (code / CHAR_LSTM).read_text()
    seed_line = f"    torch.manual_seed({CHAR_LSTM_SEED})\n"
    assert text.count(seed_line) == 1, text
    (code / CHAR_LSTM).write_text(text.replace(seed_line, f"    torch.manual_seed({CHAR_LSTM_EMPTY_BATCH_SEED})\n"))
    done = rehearse(code, CHAR_LSTM, tmp_path / "job", torch_python, "--nproc", "2",
                    "--data", str(opacus_example[1]), args=CHAR_LSTM_ARGS)
    assert done.returncode == 1, done.stdout + done.stderr
    assert ranks(done.stdout) == {0: "1", 1: "0"}, done.stdout
    rank0 = (done.job / "logs/rank0.log").read_text()
    rank1 = (done.job / "logs/rank1.log").read_text()
    assert "| 1/2 [" in rank1 and "| 2/2 [" not in rank1 and "Test Accuracy: " in rank1, rank1
    assert "| 2/2 [" not in rank0 and "Epoch 0. Accuracy: " not in rank0, rank0
    assert "    logits = model(x)\n" in rank0 and "in _pre_forward\n" in rank0, rank0
    verdict = done.stdout.rstrip("\n").splitlines()[-1]
    assert re.fullmatch(r"FAILED: rank 0 failed \(exit status 1; see \S+/logs/rank0\.log\): \[rank0\]: RuntimeError: "
                        r"\[\S+/gloo/transport/tcp/pair\.cc:\d+\] Connection closed by peer .*; nothing reached "
                        r"train_url: the script wrote no file at all; the ranks took different numbers of training "
                        r"steps through DistributedDataParallel \(rank 0: 2, failed; rank 1: 1, exit status 0\): a "
                        r"rank that ends after fewer steps leaves the others waiting in a collective until it fails "
                        r"them \(every rank's data loader must give the same number of batches\)", verdict), verdict


def test_char_lstm_with_npu396s_fix_takes_the_same_steps_on_every_rank(char_lstm_distributed, opacus_example,
                                                                        torch_python, tmp_path):
    # What NPU396 suggests, made to the failing draw of the test above: make_private(..., poisson_sampling=False)
    # keeps the loader's DistributedSampler (2 batches on every rank), so no rank leaves early.
    code = tmp_path / "code"
    shutil.copytree(char_lstm_distributed, code, symlinks=True)
    text = (code / CHAR_LSTM).read_text()
    seed_line = f"    torch.manual_seed({CHAR_LSTM_SEED})\n"
    norm_line = "            max_grad_norm=args.max_per_sample_grad_norm,\n"
    assert text.count(seed_line) == 1 and text.count(norm_line) == 1, text
    text = text.replace(seed_line, f"    torch.manual_seed({CHAR_LSTM_EMPTY_BATCH_SEED})\n")
    (code / CHAR_LSTM).write_text(text.replace(norm_line, f"{norm_line}            poisson_sampling=False,\n"))
    done = rehearse(code, CHAR_LSTM, tmp_path / "job", torch_python, "--nproc", "2",
                    "--data", str(opacus_example[1]), args=CHAR_LSTM_ARGS)
    assert done.returncode == 0, done.stdout + done.stderr
    assert ranks(done.stdout) == {0: "0", 1: "0"}
    assert "| 2/2 [" in (done.job / "logs/rank0.log").read_text() and "| 2/2 [" in (done.job / "logs/rank1.log").read_text()
    assert done.stdout.rstrip("\n").splitlines()[-1] == (
        "OK: every rank succeeded, the ranks agree and 1 file reached train_url")


def test_char_lstm_preempted_loses_everything_and_the_rehearsal_says_so(char_lstm_distributed, opacus_example,
                                                                         torch_python, tmp_path):
    # The script saves its one result at the very end: a job preempted in the middle of training
    # (epochs without end) leaves nothing for train_url, and the rehearsal says so, as a real
    # preemption would have shown after the hours were paid. Each rank, once it has printed its
    # first epoch's accuracy, waits there for the SIGTERM (rank 0 marks the moment): a rank left
    # training would meet the signal inside a collective or not, as the machine's load decides
    # (CI once saw rank 0 end with "1 (had SIGTERM)", dead of the other's broken collective).
    code = tmp_path / "code"
    shutil.copytree(char_lstm_distributed, code, symlinks=True)
    text = (code / CHAR_LSTM).read_text()
    epoch_end = "    print(printstr)\n    return\n"
    assert text.count(epoch_end) == 1, text
    (code / CHAR_LSTM).write_text(text.replace(epoch_end, (
        "    print(printstr)\n"
        "    if epoch == 0:  # preempted here: wait for the SIGTERM\n"
        "        import os\n        import time\n\n"
        f"        if os.environ[\"RANK\"] == \"0\":\n            os.mkdir({PREEMPT_NOW!r})\n"
        "        while True:\n            time.sleep(1)\n"
        "    return\n")))
    args = tuple("100000" if a == "1" else a for a in CHAR_LSTM_ARGS)
    done = rehearse(code, CHAR_LSTM, tmp_path / "job", torch_python, "--nproc", "2",
                    "--data", str(opacus_example[1]), "--sigterm-on", PREEMPT_NOW, args=args)
    assert "Epoch 0. Accuracy: " in (done.job / "logs/rank0.log").read_text()
    assert done.returncode == 1, done.stdout + done.stderr
    assert ranks(done.stdout) == {0: "-15 (SIGTERM) after SIGTERM", 1: "-15 (SIGTERM) after SIGTERM"}, done.stdout
    verdict = done.stdout.rstrip("\n").splitlines()[-1]
    assert verdict == "FAILED: nothing reached train_url: the script wrote no file at all", verdict


# ---------------------------------------------------------------- Sockeye: sockeye-train from a boot file

SOCKEYE_LAUNCHER = "from sockeye.train import main\n\nif __name__ == \"__main__\":\n    main()\n"
# A transformer of one tiny layer; the data prepared beforehand (--dist needs it), on the node's copy.
SOCKEYE_ARGS = ("--prepared-data", "/cache/data/prepared", "-vs", "/cache/data/dev.src", "-vt", "/cache/data/dev.trg",
                "-o", "model", "--num-layers", "1", "--num-embed", "16", "--transformer-model-size", "16",
                "--transformer-attention-heads", "2", "--transformer-feed-forward-num-hidden", "32",
                "--batch-type", "sentence", "--batch-size", "8", "--decode-and-evaluate", "0")


@pytest.fixture(scope="module")
def sockeye_project(tmp_path_factory, torch_python):
    """The wheel's package with a boot file for its `sockeye-train`, migrated with --modelarts, and
    a tiny parallel corpus prepared by the package's own sockeye.prepare_data."""
    wheel = download("sockeye==3.1.34")
    root = tmp_path_factory.mktemp("sockeye")
    code, original = root / "code", root / "original"
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if name.startswith(("sockeye/", "sockeye_contrib/")):  # the wheel's two packages
                z.extract(name, code)
                z.extract(name, original)
    (code / "train.py").write_text(SOCKEYE_LAUNCHER)
    data = root / "data"
    data.mkdir()
    for name, count in (("train", 64), ("dev", 8)):
        source = [" ".join(WORDS[(i * 7 + k * 5) % len(WORDS)] for k in range(3 + i % 6)) for i in range(count)]
        (data / f"{name}.src").write_text("\n".join(source) + "\n")
        (data / f"{name}.trg").write_text("\n".join(" ".join(reversed(line.split())) for line in source) + "\n")
    # `python -m sockeye.prepare_data` in the package's folder, as a file beside it (sockeye imports torch: the
    # fork server forks a file, not -m)
    (original / "prepare_data.py").write_text("from sockeye.prepare_data import main  # (it imports torch)\n\nmain()\n")
    prepared = subprocess.run(
        [torch_python, "prepare_data.py", "-s", str(data / "train.src"), "-t", str(data / "train.trg"),
         "-o", str(data / "prepared"), "--shared-vocab", "--max-seq-len", "10", "--quiet"],
        cwd=original, capture_output=True, text=True, env=_helper_env(), timeout=600)
    assert prepared.returncode == 0, prepared.stderr
    migrated = migrate(code, "train.py")
    # sockeye.train.main() parses sys.argv with a parser npu-migrate cannot see: reported.
    assert re.search(r"^train\.py:4:5: NPU219 \[warning\] the script has no parser of its own and hands the run "
                     r"to `main\(\)` of another module", migrated.stdout, re.MULTILINE), migrated.stdout
    utils = (code / "sockeye/utils.py").read_text()
    assert "device = pt.device('npu', get_local_rank() if is_distributed() else args.device_id)" in utils
    assert "else torch.distributed.Backend.HCCL)" in (code / "sockeye/train.py").read_text()
    return code, data


def test_sockeye_stops_at_start_on_the_platform_arguments_as_npu219_warned(sockeye_project, torch_python, tmp_path):
    code, data = sockeye_project
    done = rehearse(code, "train.py", tmp_path / "job", torch_python, "--data", str(data),
                    args=SOCKEYE_ARGS + ("--max-updates", "2"))
    assert done.returncode == 1
    assert ranks(done.stdout) == {0: "2"}
    verdict = done.stdout.rstrip("\n").splitlines()[-1]
    assert re.fullmatch(r"FAILED: rank 0 failed \(exit status 2; see \S+/logs/rank0\.log\): train\.py: error: "
                        r"unrecognized arguments: --data_url=obs://rehearsal/data/ --train_url=obs://rehearsal/out/ "
                        r"--init_method=tcp://127\.0\.0\.1:\d+ --num_gpus=1; nothing reached train_url: the script "
                        r"wrote no file at all", verdict), verdict
    # The boot file's modelarts_setup() ran first: the node's input was copied once.
    assert "copies of OBS input into /cache on node 0: 1 " in done.stdout


def test_sockeye_with_the_reported_fix_trains_on_two_npus_and_survives_preemption(sockeye_project, torch_python,
                                                                                tmp_path):
    # What NPU219 suggests: the boot file removes the job's arguments sockeye does not know.
    code, data = sockeye_project
    fixed = tmp_path / "code"
    subprocess.run(["cp", "-a", str(code), str(fixed)], check=True)
    launcher = (fixed / "train.py").read_text()
    assert "    modelarts_setup()\n    main()\n" in launcher
    launcher = "import sys\n" + launcher.replace("    modelarts_setup()\n", (
        "    modelarts_setup()\n"
        "    platform = (\"--data_url\", \"--train_url\", \"--init_method\", \"--num_gpus\")\n"
        "    sys.argv[1:] = [a for a in sys.argv[1:] if a.split(\"=\")[0] not in platform]\n"))
    # Updates without end (a checkpoint every 2): SIGTERM once the second checkpoint is whole (rank 0
    # marks it, as PREEMPT_NOW says); both ranks wait for it there, before training towards the
    # third (a rank that trained on would meet the signal in a collective or in a save, as the
    # machine's load decides).
    launcher = launcher.replace("import sys\n", (
        "import os\nimport sys\nimport time\n\nimport sockeye.training\nimport sockeye.utils\n\n"
        "_checkpoint = sockeye.training.EarlyStoppingTrainer._create_checkpoint\n\n\n"
        "def _create_checkpoint(self, *args, **kwargs):\n"
        "    _checkpoint(self, *args, **kwargs)\n"
        "    if self.state.checkpoint == 2:\n"
        f"        if sockeye.utils.is_primary_worker():\n            os.mkdir({PREEMPT_NOW!r})\n"
        "        while True:  # until the SIGTERM\n            time.sleep(1)\n\n\n"
        "sockeye.training.EarlyStoppingTrainer._create_checkpoint = _create_checkpoint\n"), 1)
    (fixed / "train.py").write_text(launcher)
    done = rehearse(fixed, "train.py", tmp_path / "job", torch_python, "--nproc", "2", "--data", str(data),
                    "--sigterm-on", PREEMPT_NOW,
                    args=SOCKEYE_ARGS + ("--dist", "--max-updates", "1000000", "--checkpoint-interval", "2"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert ranks(done.stdout) == {0: "-15 (SIGTERM) after SIGTERM", 1: "-15 (SIGTERM) after SIGTERM"}
    log = (done.job / "logs/rank0.log").read_text()
    assert "Training Device: npu:0" in log and "Training started." in log
    assert "Training Device: npu:1" in (done.job / "logs/rank1.log").read_text()
    saved = sorted(str(p.relative_to(done.job / "code/code")) for p in (done.job / "code/code/model").rglob("*")
                   if p.is_file())
    out = done.job / "obs/rehearsal/out"
    delivered = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert {"model/params.00000", "model/params.00001", "model/params.00002", "model/config"} <= set(saved), saved
    assert "model/params.00003" not in saved, saved
    assert delivered == saved  # everything rank 0 wrote before the preemption, whole, under its own name
    assert "copies of OBS input into /cache on node 0: 1 " in done.stdout


# ---------------------------------------------------------------- CleanRL: cleanrl/ppo.py

# Two PPO updates of 32 steps of one CartPole environment (the rollout, then 4 epochs of 4 minibatches).
PPO_ARGS = ("--total-timesteps", "64", "--num-envs", "1", "--num-steps", "32")
PPO_LOG = re.compile(r"runs/CartPole-v1__ppo__1__\d+/events\.out\.tfevents\.\d+\.\S+\.\d+\.0")


@pytest.fixture(scope="module")
def cleanrl_ppo(tmp_path_factory):
    """cleanrl/ppo.py of the wheel, and a data folder (the script reads none: NPU211)."""
    wheel = download("cleanrl==1.2.0")
    root = tmp_path_factory.mktemp("cleanrl")
    with zipfile.ZipFile(wheel) as z:
        script = z.read("cleanrl/ppo.py")
    (root / "data").mkdir()
    (root / "data" / "README").write_text("CartPole needs no data\n")
    return script, root / "data"


def _ppo_project(cleanrl_ppo, folder: Path, *options: str) -> subprocess.CompletedProcess:
    folder.mkdir()
    (folder / "ppo.py").write_bytes(cleanrl_ppo[0])
    migrated = migrate(folder, "ppo.py", *options)
    text = (folder / "ppo.py").read_text()
    assert '    device = torch.device("npu" if torch.npu.is_available() and args.cuda else "cpu")\n' in text
    assert "    args = modelarts_setup(parser.parse_known_args()[0])\n" in text
    return migrated


def test_cleanrl_ppo_trains_on_one_npu_and_its_tensorboard_log_reaches_train_url(cleanrl_ppo, torch_python,
                                                                                tmp_path):
    """One rehearsal of one process (~4 CPU-s, most of it gym's, pygame's and TensorBoard's imports in the fork)."""
    _ppo_project(cleanrl_ppo, tmp_path / "code")
    done = rehearse(tmp_path / "code", "ppo.py", tmp_path / "job", torch_python, "--data", str(cleanrl_ppo[1]),
                    args=PPO_ARGS)
    assert done.returncode == 0, done.stdout + done.stderr
    assert ranks(done.stdout) == {0: "0"}
    [log] = uploaded(done.stdout)  # SummaryWriter's file under the working folder, uploaded from there
    assert PPO_LOG.fullmatch(log), log
    assert "global_step=64, " in (done.job / "logs/rank0.log").read_text()
    assert done.stdout.rstrip("\n").splitlines()[-1] == "OK: every rank succeeded and 1 file reached train_url"


def test_cleanrl_ppo_is_not_made_distributed_and_its_two_processes_each_train_alone(cleanrl_ppo, torch_python,
                                                                                   tmp_path):
    """ppo.py trains in its main block and never calls `agent` itself: its loss comes from
    `agent.get_action_and_value(...)`. Wrapped in DistributedDataParallel (as --distributed did), the
    methods went through unwrap_model(), no forward pass went through the wrapper and no gradient was
    averaged: both ranks ended well with the same parameters, each having trained the same CartPole seeds
    alone, and the rehearsal said OK. Now the script is left as it is and reported (NPU385); rehearsed
    with two processes, each trains alone and the rehearsal says so. One rehearsal of two processes (~7 CPU-s)."""
    migrated = _ppo_project(cleanrl_ppo, tmp_path / "code", "--distributed")
    assert [line.split(" (`")[0] for line in migrated.stdout.splitlines() if ": NPU38" in line] == [
        "ppo.py:196:45: NPU385 [warning] not made distributed: `agent` is never called, only its methods are: "
        "DistributedDataParallel averages the gradients of its own forward passes only, so wrapping it would "
        "average none"]
    text = (tmp_path / "code" / "ppo.py").read_text()
    assert "distributed_model(" not in text and "unwrap_model(" not in text and "distributed_setup" not in text
    done = rehearse(tmp_path / "code", "ppo.py", tmp_path / "job", torch_python, "--nproc", "2",
                    "--data", str(cleanrl_ppo[1]), args=PPO_ARGS)
    assert done.returncode == 0, done.stdout + done.stderr
    assert ranks(done.stdout) == {0: "0", 1: "0"}, done.stdout
    for rank in (0, 1):
        assert "global_step=64, " in (done.job / f"logs/rank{rank}.log").read_text()
    assert ("  distributed: none of the 2 processes joined a process group: each ran the whole job alone, on all "
            "of its data\n") in done.stdout
    assert done.stdout.rstrip("\n").splitlines()[-1] == "OK: every rank succeeded and 2 files reached train_url"


def test_cleanrl_ppo_told_to_train_on_the_cpu_fails_the_rehearsal(cleanrl_ppo, torch_python, tmp_path):
    """`--cuda False`: ppo.py's own option keeps it on the CPU, migrated or not; on the NPU machine it would
    train there all the same, billed for the NPUs. Every rank ended well and its log reached train_url:
    what fails the job is the stand-in's record (optimizer steps, nothing ever put on an npu device). One
    rehearsal of one process (~3 CPU-s)."""
    _ppo_project(cleanrl_ppo, tmp_path / "code")
    done = rehearse(tmp_path / "code", "ppo.py", tmp_path / "job", torch_python, "--data", str(cleanrl_ppo[1]),
                    args=PPO_ARGS + ("--cuda", "False"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert ranks(done.stdout) == {0: "0"}
    assert len(uploaded(done.stdout)) == 1
    assert done.stdout.rstrip("\n").splitlines()[-1] == (
        "FAILED: rank 0 trained on the CPU (32 optimizer steps, nothing put on the NPU): the script chose the CPU, "
        "as it would on the NPU machine (a device test left on CUDA, such as `torch.cuda.is_available()`, is False "
        "there too, or an option of the script's own)")
