"""Interrupt safety: Ctrl-C or SIGTERM at any moment of a `--write` run leaves every
file either fully old or fully new, no temporary file behind and no worker process alive, and
the exit code says the run was interrupted (130 for Ctrl-C, 143 for SIGTERM).

A real `npu-migrate --write -j 3` runs on a tree of a few hundred files and is interrupted at
random moments (fixed seed, printed on failure): while the workers migrate, and while the
files are being written (the moment the first temporary file appears in the tree).
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Dict, List

import pytest
from helpers import GPU, invoke

from npu_migrate import dispatch
from npu_migrate.dispatch import migrate_source
from npu_migrate.pipeline import in_process_up_to, workers_for
from npu_migrate.project_values import Workload, scan

# Each test runs a job or the command line in processes of its own (conftest.py: slow).
pytestmark = pytest.mark.slow

FILES = 160
FOLDERS = 4
SEED = 20241126
TEMP_SUFFIX = ".npu-migrate.tmp"


def training_script(i: int) -> str:
    body = "".join(
        f"def step_{k}(model, x, rank):\n"
        f"    x = x.cuda(non_blocking=True)\n"
        f"    torch.cuda.synchronize()\n"
        f"    y = model(x.to(f'cuda:{{rank}}'))  # step {k}\n"
        f"    return y.sum() * {i}\n\n"
        for k in range(4)
    )
    return f'"""Script {i}.\n\n{NOTES}"""\nimport torch\n\nmodel = Net().cuda()\n\n{body}'


# Lines of each script's docstring: enough bytes that the run's estimated work is more than a run
# does in its main process whatever -j says (pipeline.workers_for): these runs start workers. (With
# -j 2 a run shares files with one forked copy of itself up to pipeline.SHARED_UP_TO, 3 MB of such
# scripts: the runs here take -j 3, whose bound is IN_PROCESS_UP_TO, and start the worker pool.)
NOTES = "A training script of the interrupt test: its bytes make the run start worker processes.\n" * 40


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """The tree before the run, and what every file becomes after a full run."""
    root = tmp_path_factory.mktemp("interrupt") / "pristine"
    old: Dict[str, bytes] = {}
    new: Dict[str, bytes] = {}
    # The scripts differ only in their number: one is migrated, with a number found nowhere else,
    # and the others' migrations are that one's with their own number (a full run of the command
    # line must write exactly these: test_an_uninterrupted_run_writes_everything).
    sentinel = 987654321
    result = migrate_source(training_script(sentinel), "train.py")
    assert result.new_text is not None and result.error is None
    assert training_script(sentinel).count(str(sentinel)) == result.new_text.count(str(sentinel)) == 5
    for i in range(FILES):
        rel = f"pkg{i % FOLDERS}/train_{i:03d}.py"
        text = training_script(i)
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
        old[rel] = text.encode()
        new[rel] = result.new_text.replace(str(sentinel), str(i)).encode()
    workload = Workload(in_process_up_to(3))
    scan(sorted(str(root / rel) for rel in old), workload=workload)
    assert workers_for(3, workload) == 3  # (the runs of -j 3 start workers)
    return root, old, new


def start(tree: Path, cache: Path) -> subprocess.Popen:
    env = {**os.environ, "NPU_MIGRATE_CACHE_DIR": str(cache)}
    return subprocess.Popen(
        [sys.executable, "-m", "npu_migrate", str(tree), "--write", "-j", "3", "--color", "never", "-q"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
        start_new_session=True,  # its own process group, as a shell gives a foreground job
        # A background job of a non-interactive shell (CI) inherits SIGINT ignored, and Python then
        # installs no KeyboardInterrupt handler: the child gets the default back, as a terminal's
        # foreground job has it.
        preexec_fn=_default_sigint,
    )


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def processes_running_on(tree: Path) -> List[int]:
    """Pids whose command line names `tree` (the CLI and its forked workers)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
            with open(f"/proc/{entry}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if str(tree).encode() in cmdline and state != b"Z":
            found.append(int(entry))
    return found


def folder_times(tree: Path) -> Dict[Path, int]:
    """The tree's folders' times, taken before the run starts."""
    return {tree / f"pkg{k}": os.stat(tree / f"pkg{k}").st_mtime_ns for k in range(FOLDERS)}


def wait_for_first_write(before: Dict[Path, int], proc: subprocess.Popen, ceiling: float = 600) -> bool:
    """Block until a temporary file or a rewritten file shows up (the write phase began; a
    folder's time changes then and stays changed). True too when the run ended before this
    looked (a loaded machine may not run this loop for the whole write phase); False only
    when the run ended without writing, or after the ceiling (minutes: a hang, not a pace)."""
    folders = list(before)
    deadline = time.monotonic() + ceiling
    while time.monotonic() < deadline:
        ended = proc.poll() is not None
        if any(os.stat(f).st_mtime_ns != before[f] for f in folders):
            return True
        if ended:
            return False
        time.sleep(0.0005)
    return False


def check_tree(tree: Path, old: Dict[str, bytes], new: Dict[str, bytes]) -> Dict[str, int]:
    counts = {"old": 0, "new": 0}
    seen = set()
    for path in tree.rglob("*"):
        if path.is_dir():
            continue
        rel = path.relative_to(tree).as_posix()
        assert not rel.endswith(TEMP_SUFFIX), f"temporary file left behind: {rel}"
        assert rel in old, f"unexpected file: {rel}"
        data = path.read_bytes()
        assert data in (old[rel], new[rel]), f"{rel} is neither old nor new ({len(data)} bytes)"
        counts["old" if data == old[rel] else "new"] += 1
        seen.add(rel)
    assert seen == set(old), f"files missing: {sorted(set(old) - seen)[:5]}"
    return counts


# (signal, sent to the whole process group like a terminal's Ctrl-C?, phase)
CASES = [
    (signal.SIGINT, True, "migrating"),
    (signal.SIGINT, True, "writing"),
    (signal.SIGTERM, False, "migrating"),
    (signal.SIGTERM, False, "writing"),
    (signal.SIGINT, False, "writing"),
    (signal.SIGTERM, True, "writing"),
]


@pytest.fixture(scope="module")
def baseline(pristine, tmp_path_factory):
    """An uninterrupted run: it writes every file, and tells how long migrating takes here."""
    root, old, new = pristine
    work = tmp_path_factory.mktemp("baseline")
    tree = work / "tree"
    shutil.copytree(root, tree)
    before = folder_times(tree)
    started = time.monotonic()
    proc = start(tree, work / "cache")
    assert wait_for_first_write(before, proc)
    until_first_write = time.monotonic() - started
    _out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err.decode()
    return until_first_write, check_tree(tree, old, new)


def test_an_uninterrupted_run_writes_everything(baseline):
    assert baseline[1] == {"old": 0, "new": FILES}


@pytest.mark.parametrize("signum, to_group, phase", CASES,
                         ids=[f"{signal.Signals(s).name}-{'group' if g else 'main'}-{p}" for s, g, p in CASES])
def test_interrupted_write_leaves_every_file_old_or_new(pristine, baseline, tmp_path, signum, to_group, phase):
    root, old, new = pristine
    rng = random.Random(f"{SEED}-{signum}-{to_group}-{phase}")
    # While migrating: a random moment before the first write of the baseline run. A run can be
    # faster than the baseline (which paid for cold caches): if it finished first, try again
    # on a fresh copy, earlier.
    for attempt in range(4):
        tree = tmp_path / f"tree{attempt}"
        shutil.copytree(root, tree)
        before = folder_times(tree)
        proc = start(tree, tmp_path / f"cache{attempt}")
        try:
            if phase == "writing":
                assert wait_for_first_write(before, proc), "the run never started writing"
                time.sleep(rng.uniform(0, 0.05))
            else:
                time.sleep(rng.uniform(0.2, 0.6) * baseline[0] / 2**attempt)
            if to_group:
                os.killpg(proc.pid, signum)
            else:
                proc.send_signal(signum)
            _out, err = proc.communicate(timeout=600)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        if phase != "migrating" or proc.returncode != 0:
            break

    counts = check_tree(tree, old, new)
    expected = 130 if signum == signal.SIGINT else 143
    # 0: the run finished before the signal landed; -signum: it landed before the handlers
    # were installed (nothing written yet).
    assert proc.returncode in (expected, 0, -signum), (proc.returncode, err.decode()[-2000:])
    if phase == "migrating":
        assert proc.returncode != 0, "the signal came too late to interrupt anything"
    if proc.returncode == expected:
        word = "interrupted" if signum == signal.SIGINT else "terminated"
        assert err.decode().endswith(
            f"npu-migrate: {word}; every file is either unchanged or fully migrated\n"), err.decode()[-2000:]
        assert b"Traceback" not in err, err.decode()[-3000:]
    if proc.returncode == -signum:
        assert counts["new"] == 0
    # The workers were told to stop: wait until the kernel has reaped them (a ceiling, not a pace).
    deadline = time.monotonic() + 120
    while processes_running_on(tree) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_running_on(tree) == [], "worker processes outlived the run"


# ------------------------------------------------------------------------------ issue 30.10: Ctrl-C early or late

_INTERRUPT_AT = """
import builtins, os, signal, sys
# Ctrl-C as at a terminal: CI may start the suite with SIGINT ignored, which children inherit.
signal.signal(signal.SIGINT, signal.default_int_handler)
where, args = sys.argv[1], sys.argv[2:]
real = builtins.__import__

def hook(name, *rest, **kw):
    if name == where or name.endswith("." + where) or (rest and len(rest) > 2 and where in (rest[2] or ())):
        builtins.__import__ = real
        os.kill(os.getpid(), signal.SIGINT)  # a Ctrl-C while this import runs
    return real(name, *rest, **kw)

if where != "end":
    builtins.__import__ = hook
sys.argv = ["npu-migrate", *args]
from npu_migrate.__main__ import entry
try:
    entry()
finally:
    if where == "end":
        os.kill(os.getpid(), signal.SIGINT)  # after the run decided its exit code
"""


@pytest.mark.parametrize("where", ["click", "pipeline", "report"])
def test_ctrl_c_while_the_program_starts_is_one_line_and_exit_130(tmp_path, where):
    """a Ctrl-C in the first moments (while modules are imported) printed a Python
    traceback. The signal is sent by the process itself while a given module is imported
    (deterministic: no timing)."""
    (tmp_path / "train.py").write_bytes(b"import torch\nx = x.cuda()\n")
    r = subprocess.run([sys.executable, "-c", _INTERRUPT_AT, where, "train.py", "--check", "-j", "1", "--no-cache"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 130, (r.stdout, r.stderr)
    assert r.stderr.endswith("npu-migrate: interrupted\n") and "Traceback" not in r.stderr, r.stderr
    assert (tmp_path / "train.py").read_bytes() == b"import torch\nx = x.cuda()\n"


def test_ctrl_c_after_the_run_decided_its_exit_code_changes_nothing(tmp_path):
    """The other half of 30.10: a Ctrl-C at the very end printed `KeyboardInterrupt` and exited 0."""
    (tmp_path / "train.py").write_bytes(b"import torch\nx = x.cuda()\n")
    r = subprocess.run([sys.executable, "-c", _INTERRUPT_AT, "end", "train.py", "--check", "-j", "1", "--no-cache"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "KeyboardInterrupt" not in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert "check failed" in r.stderr


# ---------------------------------------------------------------------- signals in process, and workers of a killed run


def test_sigterm_during_an_in_process_parse_stops_the_run(tmp_path, monkeypatch):
    for name in ("a.py", "b.py", "c.py"):
        (tmp_path / name).write_bytes(GPU)
    real = dispatch.migrate_source

    def terminated_while_parsing(text, path, *args, **kwargs):
        if path.endswith("b.py"):
            os.kill(os.getpid(), signal.SIGTERM)  # the CLI's handler raises inside the parse
        return real(text, path, *args, **kwargs)

    monkeypatch.setattr(dispatch, "migrate_source", terminated_while_parsing)
    previous = signal.getsignal(signal.SIGTERM)
    try:
        r = invoke([str(tmp_path), "--write", "--no-cache"], tmp_path / "cache")
    finally:
        signal.signal(signal.SIGTERM, previous)

    assert r.exit_code == 143, r.output
    assert r.output.endswith("npu-migrate: terminated; every file is either unchanged or fully migrated\n")
    assert "cannot parse" not in r.output and "internal error" not in r.output
    assert [(tmp_path / n).read_bytes() for n in ("a.py", "b.py", "c.py")] == [GPU, GPU, GPU]


def _children(pid: int):
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry))
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="finds the workers through /proc")
@pytest.mark.parametrize("jobs, children", [("3", 2), ("2", 1)], ids=["pool", "shared"])
def test_workers_die_when_the_main_process_is_killed(tmp_path, jobs, children):
    """The pool's workers (-j 3) and, with -j 2 (an estimate under pipeline.SHARED_UP_TO), the
    forked copy that shares the files (runner._shared) die with the main process: the copy
    went on alone with every file left."""
    import time

    for i in range(300):
        (tmp_path / f"m{i:03d}.py").write_text("import torch\n" + "x = t.cuda()\n" * 400)
    proc = subprocess.Popen([sys.executable, "-m", "npu_migrate", str(tmp_path), "--check", "-j", jobs, "--no-cache"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 600
        while len(_children(proc.pid)) < children and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        workers = _children(proc.pid)
        assert len(workers) >= children, "the workers never started"
        proc.kill()
        proc.wait()
        deadline = time.monotonic() + 120
        while any(map(_alive, workers)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(map(_alive, workers)), "workers outlived the main process"
    finally:
        if proc.poll() is None:
            proc.kill()


def test_signals_wait_for_the_write_to_finish(tmp_path):
    import signal

    from npu_migrate.source import signals_deferred

    received = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: received.append(signum))
    try:
        with signals_deferred():
            # to this thread: the mask is per thread, and a test runner may have others (xdist's)
            # that would take a signal sent to the process
            signal.pthread_kill(threading.get_ident(), signal.SIGTERM)
            assert received == []  # held back while the block runs
        assert received == [signal.SIGTERM]  # and delivered right after
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="workers are forked on Linux only")
def test_a_worker_starts_with_ctrl_c_held_back_until_it_ignores_it(monkeypatch):
    """A Ctrl-C while a worker process starts (before it ignores SIGINT) printed the worker's
    KeyboardInterrupt traceback: the worker starts with SIGINT and SIGTERM blocked (the real
    worker unblocks them once SIGINT is ignored); the parent's signals are as they were."""
    import multiprocessing

    from npu_migrate import runner
    from npu_migrate.options import Options
    from npu_migrate.rules import RuleSet

    def probe(conn, *args):
        conn.send((sorted(signal.pthread_sigmask(signal.SIG_BLOCK, [])), signal.getsignal(signal.SIGINT)))

    monkeypatch.setattr(runner, "_worker", probe)
    before = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    worker = runner._Worker(multiprocessing.get_context("fork"), Options(), RuleSet(), True, None)
    try:
        blocked, _handler = worker.conn.recv()
    finally:
        worker.process.join(30)
    assert signal.SIGINT in blocked and signal.SIGTERM in blocked
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == before
    assert worker.process.exitcode == 0
