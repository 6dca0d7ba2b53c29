"""A fork server ("zygote") for the programs the tests run with torch_python: `import torch` once per
environment, then each run of `python SCRIPT ARGS` is a fork of that process, made to be what a fresh
`python SCRIPT ARGS` would be. `import torch` is ~2 CPU-s per process, most of a short stand-in run.

`install(real_python, folder)` writes `folder/python`, a client that tests use as the interpreter
(tests/torch_env.py: the `torch_python` fixture; NPU_MIGRATE_TEST_ZYGOTE=0 turns it off). The client
(a Python started with -IS, ~20 ms) asks the zygote of its environment over a Unix socket to fork a
child, passes it its stdin/stdout/stderr, forwards the signals it gets to the child and ends as the
child ended (exit code, or killed by the same signal). Whatever it cannot serve exactly runs the real
interpreter instead (exec, the same process): `python -c/-m/-X...` (of the options only a leading -u
is served: torchrun starts its workers with `PYTHON_EXEC -u`), a script that is not a file,
more open descriptors than 0-2, a variable that decides the interpreter's start-up or torch's import
(anything but the launcher's and the stand-in's, LATE) that differs from the zygote's, a file beside
the script or on PYTHONPATH that shadows a module the zygote imported. So do a script without the
word "torch" (a fork costs ~0.25 CPU-s, a fresh Python without torch ~0.05). An environment's first
run starts its zygote and waits for it (~1.6 CPU-s and the time of `import torch`, about what a fresh
`import torch` costs; its fork ~0.25 more): every later run of that environment forks. The client's
folder is also a copy of the interpreter's bin folder whose console scripts (torchrun) start with the
client: a test's PATH naming it forks torchrun's agent, and PYTHON_EXEC=client its workers.

The child, after the fork (`_become`), is set up as the interpreter sets up a fresh one, in that order:
descriptors 0-2 are the client's, a session of its own, signal dispositions (the client's ignored ones
ignored, SIGINT Python's handler, SIGPIPE/SIGXFSZ ignored, the rest default) and signal mask, umask,
cwd, environment, sys.argv/orig_argv, sys.stdin/stdout/stderr made as Python makes them (encoding,
errors, buffering from -u or PYTHONUNBUFFERED and isatty; -u: C's stdio unbuffered too), sys.path (PYTHONPATH entries made absolute, then
the zygote's own), sitecustomize (the stand-in's: the recorder, the import hooks), the script's folder
first on sys.path; then what `import torch` does in a fresh process when the script imports it: torch's
atexit callbacks (recorded when the zygote imported torch) registered now, after sitecustomize's, and
the stand-in's hook on the torch import (it loads torch_npu) run. The script runs as the interpreter
runs a file (PyRun_SimpleFileExFlags: __main__'s __file__/__loader__, the traceback of an uncaught
exception, SystemExit), and exits through the interpreter's finalization (threads, atexit, flush).
tests/test_fork_server.py proves it: the same probe run fresh and forked reports the same state.

Its global random generators are its own, as a fresh process's: Python's random reseeds itself at a fork,
torch's (and NumPy's, when the zygote imported numpy.random) the child reseeds from the OS, as their import
does in a fresh process (otherwise every program of a run, each rank of a rehearsal, drew the same numbers).

Known differences (none read by the tests' programs): the child's parent is the zygote; it starts with
torch (and what torch imports) already in sys.modules and Python's hash seed shared with its siblings;
its stack below the script's module frame holds the zygote's frames; the objects torch made on import
are never garbage-collected (gc.freeze, so that the children share their pages: Python promises no
finalizer of them at exit anyway); it always leads a session of its
own (rehearse starts ranks so anyway); what it leaves running when it ends is not signalled through the
client; a console script run from the client's folder has that path in sys.argv[0] (torchrun's agent
reads it only to strip a `.exe`). The zygotes are the test run's (start_run: a folder per run, shared by
pytest-xdist's workers; the worker's name is no part of an environment's key): each ends when the process that
started the run ends, and each test worker's share of their CPU seconds is in files of its own (cpu_seconds).
"""

from __future__ import annotations

import json
import os
import sys

# Read only after start-up, by the launcher (torchrun's, Ascend's, ModelArts') and the stand-in, and
# npu-migrate's own (NPU_MIGRATE_*: the stand-in's, the test cache's): they may differ between a zygote
# and its children. Any other variable must be the same.
LATE_PREFIXES = ("NPU_MIGRATE_", "MA_", "VC_", "TORCHELASTIC_")
LATE = frozenset({
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT",
    # what torchrun's agent adds for its workers (read by torch.distributed's launcher and process groups)
    "ROLE_RANK", "ROLE_NAME", "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE", "TORCH_NCCL_ASYNC_ERROR_HANDLING",
    "RANK_ID", "RANK_SIZE", "DEVICE_ID", "ASCEND_DEVICE_ID", "RANK_TABLE_FILE", "HCCL_WHITELIST_DISABLE",
    "ASCEND_RT_VISIBLE_DEVICES",  # (the stand-in's torch_npu reads it when asked for its devices)
    "PYTHONPATH",  # made into sys.path by the child, as the interpreter does
    "PYTEST_CURRENT_TEST",  # pytest's, per test (read by torch.testing only, when called)
    "PYTEST_XDIST_WORKER",  # pytest-xdist's, per worker (the workers of a run share its zygotes; read by no import)
    "PWD", "OLDPWD", "SHLVL", "_",  # a shell's (a launch script's), read by no interpreter's start-up
    "NPROC",  # the generated launch script's (tests/test_distributed_run.py)
    "PYTHON_EXEC",  # torchrun's, read when its agent starts the workers
    # read by no start-up of an interpreter named by its path (the client's REAL) and by `import torch` only on
    # Windows (its DLL search); a program reads it when it runs one (shutil.which, subprocess): the child's own.
    # So torchrun's agent and workers, whose PATH names the client's folder, fork from the plain zygote.
    "PATH",
})

_CLIENT = r'''
import os, signal, socket, sys

ALARM = signal.getsignal(signal.SIGALRM)  # as inherited (SIG_IGN stays ignored across exec)


def fresh():
    signal.alarm(0)
    signal.signal(signal.SIGALRM, ALARM)
    os.execv(REAL, [REAL] + sys.argv[1:])

args = sys.argv[1:]
options = args[:1] if args[:1] == ["-u"] else []  # (torchrun starts its workers with -u)
args = args[len(options):]
if not args or args[0].startswith("-") or not os.path.isfile(args[0]) or \
        sorted(os.listdir("/proc/self/fd")) != ["0", "1", "2", "3"]:
    fresh()
with open(args[0], "rb") as script:  # a fork costs ~0.25 CPU-s (its exit), a fresh Python without torch ~0.05
    if PRELOAD.encode() not in script.read(1 << 20):
        fresh()
env = dict(os.environ)
early = {k: v for k, v in env.items() if k not in LATE and not k.startswith(LATE_PREFIXES)}
import hashlib, json
key = hashlib.sha256(json.dumps([REAL, sorted(early.items())]).encode("utf-8", "surrogateescape")).hexdigest()[:20]
path = os.path.join(FOLDER, key)

def connect():
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path + ".sock")
    except OSError:
        conn.close()
        return None
    return conn

conn = connect()
if conn is None:  # an environment's first run (or one that came while it started): start it, or wait
    if os.path.exists(path + ".failed"):
        fresh()
    import fcntl, subprocess
    lock = os.open(path + ".lock", os.O_CREAT | os.O_WRONLY, 0o600)

    def give_up(*_):
        raise TimeoutError

    signal.signal(signal.SIGALRM, give_up)
    signal.alarm(600)  # a ceiling, not a pace: a zygote stuck in its import leaves the runs waiting fresh
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # held by whoever starts it, then by the zygote until it listens
    except TimeoutError:
        fresh()
    conn = connect()
    if conn is None and not os.path.exists(path + ".failed"):
        with open(path + ".log", "ab") as log:
            subprocess.Popen([REAL, "-c", BOOT, FOLDER, path, str(OWNER), str(lock), PRELOAD,
                              env.get("PYTEST_XDIST_WORKER", "")], env=early, cwd=FOLDER,
                             stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                             pass_fds=(lock,))
        os.close(lock)
        lock = os.open(path + ".lock", os.O_CREAT | os.O_WRONLY, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)  # an event: the zygote listens, or it ended
        except TimeoutError:
            fresh()
        conn = connect()
    signal.alarm(0)
    signal.signal(signal.SIGALRM, ALARM)
    os.close(lock)
    if conn is None:
        fresh()

catchable = set(signal.valid_signals()) - {signal.SIGKILL, signal.SIGSTOP, signal.SIGPIPE, signal.SIGXFSZ}
ignored = sorted(int(s) for s in catchable if signal.getsignal(s) == signal.SIG_IGN)
mask = sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, []))
umask = os.umask(0o22)
os.umask(umask)
leader = os.getpgrp() == os.getpid()
request = json.dumps({"argv": args, "options": options, "env": env, "cwd": os.getcwd(), "umask": umask, "ignored": ignored,
                      "mask": mask, "leader": leader}).encode("utf-8", "surrogateescape")
child = []
pending = []

def forward(signum, frame):
    if not child:
        pending.append(signum)
        return
    try:
        (os.killpg if leader else os.kill)(child[0], signum)
    except OSError:
        pass

for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2,
          signal.SIGALRM, signal.SIGCONT, signal.SIGWINCH):
    if int(s) not in ignored:
        signal.signal(s, forward)
socket.send_fds(conn, [len(request).to_bytes(8, "big") + request], [0, 1, 2])
answer = b""
while not answer.endswith(b"\n"):
    try:
        more = conn.recv(4096)
    except OSError:
        more = b""
    if not more:  # the zygote went away before its child could start the script (it waits for the
        conn.close()  # zygote's word, sent once we have its pid): run the script fresh instead
        fresh()
    answer += more
reply = json.loads(answer.splitlines()[0])
if "fresh" in reply:
    conn.close()
    fresh()
child.append(reply["pid"])
for s in pending:
    forward(s, None)
while answer.count(b"\n") < 2:
    try:
        more = conn.recv(4096)
    except OSError:
        more = b""
    if not more:  # the zygote went away with the child running: wait for the child, its status is lost
        try:
            import select
            select.select([os.pidfd_open(child[0])], [], [])
        except OSError:
            pass
        sys.stderr.write("npu-migrate tests: the fork server went away; the program's exit status is lost\n")
        os._exit(70)
    answer += more
status = json.loads(answer.splitlines()[1])["status"]
if os.WIFSIGNALED(status):
    sig = os.WTERMSIG(status)
    signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
    os.kill(os.getpid(), sig)
os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 70)
'''

_BOOT = ("import importlib.util as u, sys\n"
         "s = u.spec_from_file_location('_npu_migrate_zygote', {here!r})\n"
         "m = u.module_from_spec(s)\n"
         "s.loader.exec_module(m)\n"
         "m.serve(sys.argv[1:])\n")


def enabled() -> bool:
    """NPU_MIGRATE_TEST_ZYGOTE=0 turns the fork server off (=keep keeps its folders: the zygotes' logs say
    which runs went fresh, and why); it needs Linux (os.pidfd_open)."""
    return os.environ.get("NPU_MIGRATE_TEST_ZYGOTE", "1") != "0" and hasattr(os, "pidfd_open")


RUN = "NPU_MIGRATE_TEST_ZYGOTES"  # "OWNER_PID:FOLDER": the test run's fork servers (start_run)


def start_run() -> None:
    """Called once by the process that starts a test run (conftest.py's pytest_configure: pytest's own,
    before pytest-xdist starts its workers, which inherit the variable): the run's folder for its fork
    servers, shared by its workers, so that each environment imports torch once per run, not once per
    worker (~2 CPU-s and a start's wait each). Its zygotes end with this process; it removes the folder.
    A run inside a test (pytester, `python -m pytest`) uses the outer run's."""
    if RUN in os.environ:
        return
    import atexit
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix="npu-migrate-zygote-")
    if os.environ.get("NPU_MIGRATE_TEST_ZYGOTE") != "keep":
        atexit.register(shutil.rmtree, folder, True)
    os.environ[RUN] = f"{os.getpid()}:{folder}"  # (NPU_MIGRATE_*: LATE, no part of an environment's key)


_clients: dict = {}  # (interpreter, preload) -> (client, folder)


def client(real_python: str, preload: str = "torch") -> str:
    """The client for `real_python` whose zygotes import `preload`: the run's (start_run), installed by
    whichever worker asks first, under a lock; else (no run started) one of this process's own."""
    if (real_python, preload) not in _clients:
        owner, _, run = os.environ.get(RUN, "").partition(":")
        if run and os.path.isdir(run):
            import fcntl
            import hashlib

            folder = os.path.join(run, hashlib.sha256(f"{real_python}\0{preload}".encode()).hexdigest()[:16])
            with open(folder + ".lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)  # the other worker may be installing it
                if not os.path.exists(os.path.join(folder, "python")):  # (written last)
                    os.makedirs(folder, exist_ok=True)
                    install(real_python, folder, preload, int(owner))
        else:
            import atexit
            import shutil
            import tempfile

            folder = tempfile.mkdtemp(prefix="npu-migrate-zygote-")
            if os.environ.get("NPU_MIGRATE_TEST_ZYGOTE") != "keep":
                atexit.register(shutil.rmtree, folder, True)  # its zygotes end with this process
            install(real_python, folder, preload)
        _clients[real_python, preload] = (os.path.join(folder, "python"), folder)
    return _clients[real_python, preload][0]


def folder_of(real_python: str, preload: str = "torch"):
    """Where that client, its sockets, logs and CPU seconds are (None: none made)."""
    return _clients.get((real_python, preload), (None, None))[1]


def install(real_python: str, folder: os.PathLike, preload: str = "torch", owner: int = 0) -> str:
    """Write the client `folder/python` for `real_python`, whose zygotes import `preload`; they end with
    the process `owner` (default: this one). The folder is also a copy of the interpreter's bin folder, for a PATH naming it: links,
    but the scripts started by `real_python` (`#!real_python`: console scripts such as torchrun) are
    copies started by the client, so that they fork too (Linux runs a script named by a shebang)."""
    path = os.path.join(folder, "python")
    bin_folder = os.path.dirname(real_python)
    shebang = f"#!{real_python}\n".encode()
    for name in os.listdir(bin_folder):
        if name == "python":
            continue
        copy = os.path.join(folder, name)
        if os.path.lexists(copy):  # (an install that died half-way)
            os.unlink(copy)
        if name.startswith("python"):
            os.symlink("python", copy)
            continue
        original = os.path.join(bin_folder, name)
        text = b""
        if os.path.isfile(original):
            with open(original, "rb") as f:
                text = f.read()
        if not text.startswith(shebang):
            os.symlink(original, copy)
            continue
        with open(copy, "wb") as f:
            f.write(f"#!{path}\n".encode() + text[len(shebang):])
        os.chmod(copy, os.stat(original).st_mode & 0o777)
    boot = _BOOT.format(here=os.path.abspath(__file__))
    text = (f"#!{real_python} -IS\nREAL = {real_python!r}\nFOLDER = {os.fspath(folder)!r}\nOWNER = {owner or os.getpid()}\n"
            f"LATE = {set(LATE)!r}\nLATE_PREFIXES = {LATE_PREFIXES!r}\nBOOT = {boot!r}\nPRELOAD = {preload!r}\n" + _CLIENT)
    with open(path + ".part", "w") as f:
        f.write(text)
    os.chmod(path + ".part", 0o755)
    os.replace(path + ".part", path)  # last: a client there is a whole install
    return path


def cpu_seconds() -> float:
    """The CPU seconds the zygotes used for this test worker so far: the starts it asked for, the programs
    it ran (the zygotes are the run's: the other worker's are in files of its own)."""
    suffix = os.path.basename(_cpu_file("", os.environ.get("PYTEST_XDIST_WORKER", "")))
    total = 0.0
    for _, folder in _clients.values():
        for name in os.listdir(folder):
            if name.endswith(suffix) and name[:-len(suffix)].isalnum():
                with open(os.path.join(folder, name)) as f:
                    total += sum(float(line) for line in f if line.strip())
    return total


# --- the zygote (runs in the torch interpreter, started by a client) ---------------------------

def _cpu_line(path: str, worker: str, seconds: float) -> None:
    """The CPU seconds of a start or a child, in the file of the test worker it was for (cpu_seconds)."""
    with open(_cpu_file(path, worker), "a") as f:
        f.write(f"{seconds:.3f}\n")


def _cpu_file(path: str, worker: str) -> str:
    return f"{path}.{''.join(c for c in worker if c.isalnum())}.cpu"


def serve(argv) -> None:
    """Import torch, listen, fork a child per request; returns only in a child, about to run its script."""
    import atexit
    import importlib
    import resource
    import select
    import signal
    import socket

    folder, path, owner, lock, preload, starter = argv[0], argv[1], int(argv[2]), int(argv[3]), argv[4], argv[5]
    try:
        owner_fd = os.pidfd_open(owner)
        base = [p for p in sys.path if p not in ("", folder)]
        sys.path[:] = base
        captured = []
        register = atexit.register

        def capture(func, *args, **kwargs):
            captured.append((func, args, kwargs))
            return func

        atexit.register = capture  # torch's callbacks: registered again in each child, in a fresh one's order
        before = dict(os.environ)
        try:
            importlib.import_module(preload)
        finally:
            atexit.register = register
        set_by_torch = {k: v for k, v in os.environ.items() if before.get(k) != v}
        os.environ.clear()
        os.environ.update(before)
        if atexit._ncallbacks():  # registered some other way: the order cannot be a fresh process's
            raise RuntimeError("atexit callbacks registered around atexit.register")
        imported = {name.partition(".")[0] for name in sys.modules}
        import gc
        gc.collect()
        gc.freeze()  # what torch made is never traversed again: its pages stay shared (a child: 0.7 -> 0.25 CPU-s)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path + ".part")
        listener.listen(64)
        os.rename(path + ".part", path + ".sock")
        os.close(lock)  # the clients waiting for it connect
    except BaseException as exc:
        with open(path + ".failed", "w") as f:
            f.write(f"{type(exc).__name__}: {exc}\n")
        raise
    usage = resource.getrusage(resource.RUSAGE_SELF)
    _cpu_line(path, starter, usage.ru_utime + usage.ru_stime)
    print("environment:", json.dumps(dict(os.environ), sort_keys=True), file=sys.stderr, flush=True)
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    signal.signal(signal.SIGCHLD, lambda *a: None)
    children = {}  # pid -> (conn, leader, the test worker that asked)
    by_conn = {}  # conn -> pid
    request = None
    while request is None:
        ready = select.select([listener, owner_fd, wake_r, *by_conn], [], [])[0]
        if owner_fd in ready:
            try:
                os.unlink(path + ".sock")
            except OSError:  # (the run removed its folder first)
                pass
            os._exit(0)
        if wake_r in ready:
            try:
                while os.read(wake_r, 512):
                    pass
            except BlockingIOError:
                pass
        while children:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            conn, _, worker = children.pop(pid)
            by_conn.pop(conn, None)
            _cpu_line(path, worker, usage.ru_utime + usage.ru_stime)
            try:
                conn.sendall(json.dumps({"status": status}).encode() + b"\n")
            except OSError:
                pass
            conn.close()
        for conn in [c for c in ready if c in by_conn]:
            try:
                gone = not conn.recv(1)
            except OSError:
                gone = True
            if gone:  # the client went away (killed): so does its child
                pid = by_conn.pop(conn)
                try:
                    (os.killpg if children[pid][1] else os.kill)(pid, signal.SIGKILL)
                except OSError:
                    pass
        if listener in ready:
            try:
                conn = listener.accept()[0]
            except OSError:
                continue
            got = _receive(conn)
            if got is None:
                conn.close()
                continue
            message, fds = got
            why = _unlike_a_fresh_start(message, imported)
            if why:
                print(f"fresh: {why}: {message['argv'][0]}", file=sys.stderr, flush=True)
                try:
                    conn.sendall(json.dumps({"fresh": why}).encode() + b"\n")
                except OSError:
                    pass
                conn.close()
                for fd in fds:
                    os.close(fd)
                continue
            go_r, go_w = os.pipe()
            pid = os.fork()
            if pid == 0:
                signal.set_wakeup_fd(-1)
                os.close(wake_r)
                os.close(wake_w)
                os.close(owner_fd)
                listener.close()
                for other in by_conn:
                    other.close()
                conn.close()
                os.close(go_w)
                if os.read(go_r, 1) != b"g":  # the client never learnt of this child: it runs the script fresh
                    os._exit(0)
                os.close(go_r)
                request = (message, fds, base, captured, set_by_torch, preload)
                continue
            for fd in fds:
                os.close(fd)
            os.close(go_r)
            try:
                conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
                os.write(go_w, b"g")
            except OSError:  # the client is gone: the child ends without running anything
                pass
            os.close(go_w)
            children[pid] = (conn, message["leader"], message["env"].get("PYTEST_XDIST_WORKER", ""))
            by_conn[conn] = pid
    _become(*request)


def _receive(conn):
    import socket

    conn.settimeout(60)
    try:
        data, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)
        if len(data) < 8:
            return None
        size = int.from_bytes(data[:8], "big")
        data = data[8:]
        while len(data) < size:
            more = conn.recv(1 << 16)
            if not more:
                return None
            data += more
        message = json.loads(data.decode("utf-8", "surrogateescape"))
    except (OSError, ValueError):
        return None
    conn.settimeout(None)
    return message, fds


def _early(env) -> dict:
    return {k: v for k, v in env.items() if k not in LATE and not k.startswith(LATE_PREFIXES)}


def _unlike_a_fresh_start(message, imported) -> str:
    env = message["env"]
    if _early(env) != _early(os.environ):
        return "environment"
    script = os.path.join(message["cwd"], message["argv"][0])
    folders = [os.path.dirname(os.path.realpath(script))]
    folders += [os.path.join(message["cwd"], p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    for folder in folders:
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            stem = name[:-3] if name.endswith(".py") else name.partition(".")[0]
            if "." not in name and not os.path.isdir(os.path.join(folder, name)):
                continue  # a file without a suffix is no module (a console script beside torchrun)
            if stem in imported and stem != "sitecustomize":
                return f"{os.path.join(folder, name)} shadows the module {stem}"
    return ""


def _std_stream(fd: int, name: str, write: bool, encoding: str, errors: str, unbuffered: bool):
    """A standard stream as the interpreter makes one (Python/pylifecycle.c, create_stdio); `unbuffered`:
    -u or PYTHONUNBUFFERED (config.buffered_stdio)."""
    import io

    buffering = 0 if (unbuffered and write) else -1
    buf = io.open(fd, "wb" if write else "rb", buffering=buffering, closefd=False)
    raw = buf.raw if buffering else buf
    raw.name = name
    line_buffering = not unbuffered and (raw.isatty() or fd == 2)
    stream = io.TextIOWrapper(buf, encoding, errors, "\n", line_buffering, unbuffered)
    stream.mode = "w" if write else "r"
    return stream


def _become(message, fds, base, captured, set_by_torch, preload):
    """In the forked child: become what `python SCRIPT ARGS` is on its first line, run it, exit."""
    import atexit
    import ctypes
    import importlib
    import signal
    import site

    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    os.setsid()
    for s in set(signal.valid_signals()) - {signal.SIGKILL, signal.SIGSTOP}:
        if int(s) in message["ignored"] or s in (signal.SIGPIPE, signal.SIGXFSZ):
            handler = signal.SIG_IGN
        else:
            handler = signal.default_int_handler if s == signal.SIGINT else signal.SIG_DFL
        try:
            signal.signal(s, handler)
        except (OSError, ValueError):
            pass
    signal.pthread_sigmask(signal.SIG_SETMASK, message["mask"])
    os.umask(message["umask"])
    os.chdir(message["cwd"])
    os.environ.clear()
    os.environ.update(message["env"])
    argv = message["argv"]
    sys.argv[:] = argv
    sys.orig_argv[:] = [sys.executable, *message["options"], *argv]
    # PYTHONUNBUFFERED is the zygote's too (its C stdio set so at its start); -u is the child's own
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED")) or "-u" in message["options"]
    if unbuffered and not os.environ.get("PYTHONUNBUFFERED"):
        libc = ctypes.CDLL(None)  # as config_init_stdio does for -u: C's stdio unbuffered too
        for name in ("stdin", "stdout", "stderr"):
            libc.setvbuf(ctypes.c_void_p.in_dll(libc, name), None, 2, 8192)  # _IONBF, BUFSIZ
    old = (sys.stdin, sys.stdout, sys.stderr)
    sys.stdin = sys.__stdin__ = _std_stream(0, "<stdin>", False, old[0].encoding, old[0].errors, unbuffered)
    sys.stdout = sys.__stdout__ = _std_stream(1, "<stdout>", True, old[1].encoding, old[1].errors, unbuffered)
    sys.stderr = sys.__stderr__ = _std_stream(2, "<stderr>", True, old[2].encoding, old[2].errors, unbuffered)
    cwd = os.getcwd()
    sys.path[:] = [os.path.join(cwd, p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p] + base
    sys.path_importer_cache.clear()
    importlib.invalidate_caches()
    main = sys.modules["__main__"]
    main.__dict__.clear()
    main.__dict__.update({"__name__": "__main__", "__doc__": None, "__package__": None, "__loader__": None,
                          "__spec__": None, "__annotations__": {}, "__builtins__": sys.modules["builtins"]})
    main.__loader__ = sys.modules["importlib"]._bootstrap.BuiltinImporter  # as in a fresh __main__
    sys.modules.pop("_npu_migrate_zygote", None)
    sys.modules.pop("sitecustomize", None)
    site.execsitecustomize()
    script = os.path.join(cwd, argv[0])
    sys.path.insert(0, os.path.dirname(os.path.realpath(script)))
    # what `import torch` does in a fresh process, where the script imports it
    os.environ.update(set_by_torch)
    # torch's global generator is seeded on import from the OS (NumPy's legacy one on `import numpy.random`),
    # unlike every other process's: a fork shares the zygote's (Python's random reseeds itself at a fork)
    if "torch" in sys.modules:
        sys.modules["torch"].default_generator.seed()
    if "numpy.random" in sys.modules:
        sys.modules["numpy.random"].seed()
    for func, args, kwargs in captured:
        atexit.register(func, *args, **kwargs)
    for finder in list(sys.meta_path):
        hooks = getattr(finder, "hooks", None)
        if isinstance(hooks, dict) and callable(hooks.get(preload)):
            hooks.pop(preload)()
    libc = ctypes.CDLL(None)
    libc.fopen.restype = ctypes.c_void_p
    libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    run = ctypes.pythonapi.PyRun_SimpleFileExFlags
    run.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p]
    run.restype = ctypes.c_int
    del ctypes, importlib, signal, site
    handle = libc.fopen(os.fsencode(script), b"rb")
    if not handle:
        sys.stderr.write(f"{sys.executable}: can't open file {script!r}\n")
        sys.exit(2)
    if run(handle, os.fsencode(script), 1, None) != 0:
        if isinstance(getattr(sys, "last_value", None), KeyboardInterrupt):
            _exit_by_sigint()
        sys.exit(1)


def _exit_by_sigint():
    """An uncaught KeyboardInterrupt: the interpreter finalizes, then kills itself with SIGINT."""
    import atexit
    import signal

    def die():
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)

    atexit.register(die)  # (runs first, not last, of the callbacks: a known difference)
