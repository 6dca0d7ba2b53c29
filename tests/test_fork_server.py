"""The fork server the program-running tests use (tests/zygote.py): a program forked from a zygote that
imported torch behaves as the same program started fresh. A probe reports what a program can see of
its start (argv, environment, cwd, sys.path, __main__, signals, mask, umask, session, standard
streams, the stand-in loaded on `import torch`), its end (exit status, the traceback of an uncaught
exception, atexit, a SIGTERM) and it runs fresh and forked: the reports must be equal, but for the
parent's pid (the one known difference the probe shows; the module's docstring lists the others)."""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest
from helpers import CEILING, read_until
from torch_env import standin_env

pytestmark = pytest.mark.slow

PROBE = r'''
import atexit, builtins, json, os, signal, sys, threading
frame = sys._getframe()
out = {"argv": sys.argv, "orig_argv": sys.orig_argv, "executable": sys.executable, "path": sys.path,
       "flags": list(sys.flags), "cwd": os.getcwd(), "env": dict(os.environ), "globals": sorted(globals()),
       "file": __file__, "loader": [type(__loader__).__name__, __loader__.name, __loader__.path],
       "spec": repr(__spec__), "code": frame.f_code.co_filename, "builtins": __builtins__ is builtins,
       "signals": {s.name: repr(signal.getsignal(s)) for s in signal.valid_signals()
                   if s not in (signal.SIGKILL, signal.SIGSTOP) and isinstance(s, signal.Signals)},
       "mask": sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])),
       "umask": os.umask(0o22), "leader": os.getpgrp() == os.getpid(), "session": os.getsid(0) == os.getpid(),
       "threads": threading.active_count(), "main": threading.current_thread() is threading.main_thread(),
       "std": [[s.name, s.encoding, s.errors, s.line_buffering, s.write_through, s.isatty(), s.fileno(), s.mode,
                type(s.buffer).__name__, s is d] for s, d in ((sys.stdin, sys.__stdin__), (sys.stdout, sys.__stdout__),
                                                            (sys.stderr, sys.__stderr__))],
       "stdin": sys.stdin.read(), "excepthook": sys.excepthook is sys.__excepthook__,
       "dont_write_bytecode": sys.dont_write_bytecode, "sitecustomize": sys.modules["sitecustomize"].__file__,
       "ppid": os.getppid()}
print(json.dumps(out), flush=True)
print("to stderr", file=sys.stderr, flush=True)
atexit.register(print, "atexit", flush=True)
mode = sys.argv[1]
if mode == "torch":  # what import torch does in a fresh process: the stand-in's torch_npu loaded, after torch's
    import torch
    import torch_npu
    print(str(torch.device("npu:1")), torch.npu.device_count(), torch_npu.STANDIN, torch.ones(1).npu().device,
          atexit._ncallbacks(), flush=True)
    sys.exit(3)
if mode == "random":  # the global generators a program draws from unseeded: each process its own draws
    import random
    import numpy
    import torch
    print(torch.initial_seed(), torch.rand(1).item(), numpy.random.random(), random.random(), flush=True)
if mode == "c-stdio":  # C's stdio: unbuffered under -u, so its line comes before Python's next one
    import ctypes
    ctypes.CDLL(None).printf(b"from C\n")
    print("from Python", flush=True)
if mode == "raise":
    def fails():
        raise ValueError("the probe fails")
    fails()
if mode == "sigterm":
    if sys.argv[2] == "handled":
        signal.signal(signal.SIGTERM, lambda *a: (print("SIGTERM handled", flush=True), sys.exit(0)))
    print("waiting", flush=True)
    threading.Event().wait()
'''


@pytest.fixture(scope="module")
def real_python(torch_python):
    from torch_env import real_torch_python, zygote_folder

    if zygote_folder() is None:
        pytest.skip("the fork server is off (NPU_MIGRATE_TEST_ZYGOTE=0)")
    return real_torch_python()


def _start(python, tmp_path, *args, env, stdin: bytes = b"", session=True, options=()):
    (tmp_path / "stdin").write_bytes(stdin)
    with open(tmp_path / "stdin", "rb") as f:
        return subprocess.Popen([python, *options, "sub/probe.py", *args], cwd=tmp_path, env=env, stdin=f,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=session, text=True)


def _run(python, tmp_path, *args, env, stdin=b"", session=True, options=()):
    proc = _start(python, tmp_path, *args, env=env, stdin=stdin, session=session, options=options)
    out, err = proc.communicate(timeout=CEILING)
    return proc.returncode, out, err


def _report(out: str) -> dict:
    report = json.loads(out.splitlines()[0])
    report.pop("ppid")
    return report


def _forked(python, tmp_path, env) -> int:
    """Have the zygote of `env` serve (an environment's first run starts it and waits for it): its pid."""
    zygote = json.loads(_run(python, tmp_path, "warm-up", env=env)[1].splitlines()[0])["ppid"]
    assert zygote != os.getpid(), "the zygote never started: the warm-up ran fresh"
    return zygote


def _probe(tmp_path, env_extra=None):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "probe.py").write_text(PROBE)
    env = standin_env(tmp_path, devices=3, extra=env_extra)
    env["PYTHONPATH"] += os.pathsep + "relative/folder"
    return env


def test_a_forked_program_starts_and_ends_as_a_fresh_one(real_python, torch_python, tmp_path):
    """As rehearse starts a rank: a session of its own, unbuffered; then as it ends: sys.exit, an exception."""
    env = _probe(tmp_path, {"PYTHONUNBUFFERED": "1"})
    _forked(torch_python, tmp_path, env)
    for mode in ("torch", "raise"):
        fresh = _run(real_python, tmp_path, mode, env=env, stdin=b"input\xff")
        forked = _run(torch_python, tmp_path, mode, env=env, stdin=b"input\xff")
        assert json.loads(forked[1].splitlines()[0])["ppid"] != os.getpid(), "not forked: it ran fresh"
        assert _report(forked[1]) == _report(fresh[1])
        assert (forked[0], forked[1].splitlines()[1:], forked[2]) == (fresh[0], fresh[1].splitlines()[1:], fresh[2])
        if mode == "torch":
            assert fresh[0] == 3 and fresh[1].splitlines()[1:] == ["npu:1 3 True cpu 7", "atexit"]
        else:
            assert fresh[0] == 1 and fresh[1].splitlines()[1:] == ["atexit"]
            assert fresh[2].startswith("to stderr\nTraceback (most recent call last):\n  File \"")
            assert fresh[2].endswith("ValueError: the probe fails\n")


def test_forked_programs_draw_random_numbers_of_their_own_as_fresh_ones_do(real_python, torch_python, tmp_path):
    """A fresh process seeds torch's global generator at `import torch` (from the OS: no two runs alike), and
    NumPy's at `import numpy.random`; a fork would share the zygote's torch generator (Python's random reseeds
    at a fork, torch's does not): every program of a test run drew the same numbers, and the two ranks of a
    rehearsal the same Opacus Poisson batches (both char-lstm tests failed in one run, notes/flake.md).
    Each fork reseeds it as a fresh start does: two forked runs differ in every generator, as two fresh ones."""
    env = _probe(tmp_path)
    _forked(torch_python, tmp_path, env)
    for python in (real_python, torch_python):
        runs = [_run(python, tmp_path, "random", env=env) for _ in range(2)]
        for code, out, err in runs:
            assert code == 0, err
            assert (json.loads(out.splitlines()[0])["ppid"] != os.getpid()) == (python == torch_python)
        first, second = (out.splitlines()[1].split() for _, out, _ in runs)
        assert len(first) == 4 and [a != b for a, b in zip(first, second)] == [True] * 4, (python, first, second)


def test_a_forked_program_without_a_session_sees_the_ignored_signals(real_python, torch_python, tmp_path):
    """As run_on_standin starts a program (no session of its own), with buffered streams and SIGINT
    ignored (as CI runs)."""
    env = _probe(tmp_path)
    env.pop("PYTHONUNBUFFERED", None)
    _forked(torch_python, tmp_path, env)
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        fresh = _run(real_python, tmp_path, "torch", env=env, session=False)
        forked = _run(torch_python, tmp_path, "torch", env=env, session=False)
    finally:
        signal.signal(signal.SIGINT, old)
    fresh_report, forked_report = _report(fresh[1]), _report(forked[1])
    assert fresh_report["signals"]["SIGINT"] == "<Handlers.SIG_IGN: 1>"
    assert fresh_report["std"][1][3:5] == [False, False]  # stdout: block-buffered (a pipe)
    assert (fresh_report.pop("leader"), fresh_report.pop("session")) == (False, False)
    assert (forked_report.pop("leader"), forked_report.pop("session")) == (True, True)  # a known difference
    assert forked_report == fresh_report
    assert (forked[0], forked[1].splitlines()[1:], forked[2]) == (fresh[0], fresh[1].splitlines()[1:], fresh[2])


def test_a_torchrun_worker_forks_as_a_fresh_one(real_python, torch_python, tmp_path):
    """As torchrun's agent starts a worker (`PYTHON_EXEC -u SCRIPT`, tests/test_distributed_run.py): -u
    without PYTHONUNBUFFERED (Python's streams and C's stdio unbuffered), the variables the agent adds,
    a shell's and Ascend's visible devices, the launch script's PATH naming the client's folder, forked by
    the zygote of the plain environment; a file without a suffix beside the
    script (torchrun's neighbours in the client's folder: tqdm) shadows no module."""
    env = _probe(tmp_path)
    env.pop("PYTHONUNBUFFERED", None)
    zygote = _forked(torch_python, tmp_path, env)
    (tmp_path / "sub" / "typing_extensions").write_text("a console script, not a module\n")
    worker = {**env, "ROLE_RANK": "1", "ROLE_NAME": "default", "GROUP_WORLD_SIZE": "1", "ROLE_WORLD_SIZE": "2",
              "TORCHELASTIC_RUN_ID": "none", "TORCHELASTIC_RESTART_COUNT": "0", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
              "PWD": str(tmp_path), "SHLVL": "7", "_": "/usr/bin/torchrun", "ASCEND_RT_VISIBLE_DEVICES": "0",
              # the launch script's (tests/test_distributed_run.py _torchrun_env): torchrun from the client's folder
              "NPROC": "2", "PYTHON_EXEC": torch_python,
              "PATH": os.path.dirname(torch_python) + os.pathsep + env.get("PATH", "")}
    fresh = _run(real_python, tmp_path, "c-stdio", env=worker, options=("-u",))
    forked = _run(torch_python, tmp_path, "c-stdio", env=worker, options=("-u",))
    assert json.loads(forked[1].splitlines()[0])["ppid"] == zygote, "not forked by the zygote of the environment without the launcher's variables"
    assert _report(forked[1]) == _report(fresh[1])
    assert (forked[0], forked[1].splitlines()[1:], forked[2]) == (fresh[0], fresh[1].splitlines()[1:], fresh[2])
    assert fresh[1].splitlines()[1:] == ["from C", "from Python", "atexit"]  # C's line first: unbuffered
    assert _report(fresh[1])["std"][1][3:5] == [False, True]  # stdout: not line-buffered, written through
    assert _report(fresh[1])["orig_argv"][1:3] == ["-u", "sub/probe.py"]


def test_sigterm_reaches_a_forked_program_as_a_fresh_one(real_python, torch_python, tmp_path):
    """As rehearse stops a rank: SIGTERM to the process group of the process it started; the program's
    handler runs (a preempted job saving its checkpoint), or SIGTERM ends it."""
    env = _probe(tmp_path, {"PYTHONUNBUFFERED": "1"})
    _forked(torch_python, tmp_path, env)
    for handled in ("handled", "default"):
        results = []
        for python in (real_python, torch_python):
            proc = _start(python, tmp_path, "sigterm", handled, env=env)
            read_until(proc, "waiting")
            os.killpg(proc.pid, signal.SIGTERM)
            out, err = proc.communicate(timeout=CEILING)
            results.append((proc.returncode, out.splitlines(), err))
        assert results[0] == results[1]
        assert results[0][:2] == ((0, ["SIGTERM handled", "atexit"]) if handled == "handled" else (-signal.SIGTERM, []))


def test_what_the_fork_server_cannot_serve_runs_fresh(real_python, torch_python, tmp_path):
    """A file beside the script that shadows a module torch imported; `python -c`."""
    env = _probe(tmp_path, {"PYTHONUNBUFFERED": "1"})
    _forked(torch_python, tmp_path, env)
    (tmp_path / "sub" / "typing_extensions.py").write_text("raise SystemExit('the shadowing module ran')\n")
    shadowed = _run(torch_python, tmp_path, "torch", env=env)
    assert shadowed[0] == 1 and shadowed[2].endswith("the shadowing module ran\n")  # a fresh `import torch` ran it
    command = subprocess.run([torch_python, "-c", "import sys; print(sys.argv, sys.executable)", "x"],
                             capture_output=True, text=True, env=env, timeout=CEILING)
    assert command.stdout == f"['-c', 'x'] {real_python}\n"


def test_the_workers_of_a_run_share_its_zygotes(real_python, torch_python, tmp_path):
    """pytest-xdist's workers (another worker here: its own process asking for the client, then its program's
    PYTEST_XDIST_WORKER) fork from the run's one zygote per environment, so that each environment imports
    torch once per run; each worker's CPU seconds of the zygotes are its own (conftest's NPU_MIGRATE_TEST_CPU)."""
    import zygote as fork_server
    from torch_env import zygote_folder

    tests = os.path.dirname(os.path.abspath(fork_server.__file__))
    other_worker = {**os.environ, "PYTEST_XDIST_WORKER": "gw99"}
    asked = subprocess.run([real_python, "-c", f"import sys; sys.path.insert(0, {tests!r}); import zygote; "
                            f"print(zygote.client({real_python!r}))"],
                           capture_output=True, text=True, env=other_worker, timeout=CEILING)
    assert (asked.returncode, asked.stdout, asked.stderr) == (0, torch_python + "\n", "")
    env = _probe(tmp_path, {"PYTHONUNBUFFERED": "1"})
    zygote = _forked(torch_python, tmp_path, env)
    mine = fork_server.cpu_seconds()
    theirs = [n for n in os.listdir(zygote_folder()) if n.endswith(".gw99.cpu")]
    assert theirs == []
    forked = _run(torch_python, tmp_path, "raise", env={**env, "PYTEST_XDIST_WORKER": "gw99"})
    report = json.loads(forked[1].splitlines()[0])
    assert (report["ppid"], report["env"]["PYTEST_XDIST_WORKER"]) == (zygote, "gw99"), "not forked by the same zygote"
    assert fork_server.cpu_seconds() == mine  # the other worker's program is not this worker's CPU
    theirs = [n for n in os.listdir(zygote_folder()) if n.endswith(".gw99.cpu")]
    assert len(theirs) == 1
    with open(os.path.join(zygote_folder(), theirs[0])) as f:
        assert len(f.read().split()) == 1  # its one program (the zygote's start was the worker's that asked first)
    _run(torch_python, tmp_path, "raise", env=env)
    assert fork_server.cpu_seconds() > mine


def test_a_lost_zygote_costs_a_fresh_run_not_a_test(real_python, torch_python, tmp_path):
    """The zygote of the environment is killed; the next run still runs, with the same report. (Only that
    zygote, of an environment of this test's own: the run's others serve both workers' programs, some running now.)"""
    from torch_env import zygote_folder

    env = _probe(tmp_path, {"PYTHONUNBUFFERED": "1", "LOST_ZYGOTE": "1"})
    zygote = _forked(torch_python, tmp_path, env)
    assert json.loads(_run(torch_python, tmp_path, "raise", env=env)[1].splitlines()[0])["ppid"] == zygote
    assert "_npu_migrate_zygote" in _cmdline(str(zygote)), "not forked by a zygote"
    assert zygote_folder() in _cmdline(str(zygote))
    os.kill(zygote, signal.SIGKILL)
    fresh = _run(real_python, tmp_path, "raise", env=env)
    after = _run(torch_python, tmp_path, "raise", env=env)
    assert (after[0], _report(after[1]), after[2]) == (fresh[0], _report(fresh[1]), fresh[2])


def _cmdline(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""
