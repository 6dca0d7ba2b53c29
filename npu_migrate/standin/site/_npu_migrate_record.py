"""What a process of a rehearsal did that the rehearsal's verdict depends on, recorded as it happens.

Installed by sitecustomize in every Python process of a rehearsal (with NPU_MIGRATE_REHEARSAL_RECORD
naming a folder), whatever the framework. Each process appends JSON lines to
`<rank>-<pid>.events` there (written when they happen: a process that SIGTERM ends runs no
atexit) and, at a normal exit, writes its summary `<rank>-<pid>.json`:

* `started`: the recorder ran in this process (a rank without it is a process rehearse knows
  nothing of, and says so rather than guess);
* `write`: each file opened for writing, wherever it is (`../outputs/model.bin`, `~/x`, an
  absolute path), through any Python API: `open`, `os.open`, `pathlib`, `np.save`, `shutil`,
  the target of `os.rename`/`os.replace` (an audit hook sees them all; torch.save of a path,
  whose C++ writer opens no Python file, is added by torch_npu/_record.py);
* `program`: a program the process started that is not Python (what it writes, or uploads,
  no record shows);
* `module`: a module whose writes or uploads no record shows: TensorFlow's and MindSpore's
  native savers, OBS/S3 clients that upload without MoXing;
* `distributed`: it joined a process group (torch_npu/_record.py).

The framework's recorders add what they know to the summary (`contribute`). A recorder, not
a check: `npu_migrate.rehearse` reads the records.
"""

import atexit
import json
import os
import sys

RECORD_VAR = "NPU_MIGRATE_REHEARSAL_RECORD"
# Modules whose writes (native savers) or uploads (OBS/S3 clients) the audit hook cannot see.
UNSEEN_MODULES = {"tensorflow", "mindspore", "obs", "boto3", "botocore", "s3fs", "obsutil", "oss2"}
# Programs that read (or compile) and upload nothing: starting them leaves the record whole.
QUIET_PROGRAMS = {"git", "nvidia-smi", "npu-smi", "rocm-smi", "hostname", "uname", "nproc", "lscpu", "whoami",
                  "id", "which", "ldconfig", "ldd", "free", "df", "ps", "date", "lsb_release", "fc-list", "fc-match",
                  "gcc", "g++", "cc", "c++", "clang", "clang++", "ld", "ninja", "nvcc", "ccache", "c++filt",
                  "addr2line"}
SHELLS = {"sh", "bash", "dash", "zsh"}

_writes = set()
_contributions = []  # functions returning a dict merged into the summary at exit
_skipped = []  # folders and files of the rehearsal itself (records, the MoXing log, the local OBS)
_busy = []  # set while the recorder writes its own files (the hook sees those opens too)
_pending = []  # modules of UNSEEN_MODULES being imported: recorded once the import succeeded
_rank = os.environ.get("RANK", os.environ.get("RANK_ID", "0"))
_summary = {"rank": int(_rank) if _rank.isdigit() else _rank, "pid": os.getpid(), "distributed": False,
            "writes": [], "programs": [], "modules": []}


def event(kind, value):
    """One JSON line in this process's events file."""
    folder = os.environ.get(RECORD_VAR)
    if not folder:
        return
    _busy.append(True)
    try:
        with open(os.path.join(folder, "%s-%d.events" % (_rank, os.getpid())), "a") as f:
            f.write(json.dumps({"rank": _summary["rank"], kind: value}) + "\n")
    finally:
        _busy.pop()


def written(file):
    """Record `file` (a path) as written by this process."""
    try:
        path = os.path.abspath(os.fsdecode(os.fspath(file)))
    except (TypeError, ValueError):
        return
    if path in _writes or any(path == s or path.startswith(s + os.sep) for s in _skipped):
        return
    if os.sep + "__pycache__" + os.sep in path:
        return  # the interpreter's own bytecode
    _writes.add(path)
    event("write", path)


def joined():
    if not _summary["distributed"]:
        _summary["distributed"] = True
        event("distributed", True)


def contribute(function):
    _contributions.append(function)


def _program(command, argv=()):
    """Record the program `command` names (a path, or a shell command line)."""
    if not isinstance(command, (str, bytes, os.PathLike)):
        return
    words = os.fsdecode(command).split() or [""]
    name = os.path.basename(words[0])
    if name in SHELLS:  # `sh -c "obsutil cp ..."`: the program is the command's first word
        argv = [os.fsdecode(a) for a in argv if isinstance(a, (str, bytes))]
        if "-c" in argv[:2] and argv.index("-c") + 1 < len(argv):
            return _program(argv[argv.index("-c") + 1])
    if not name or name in QUIET_PROGRAMS or name.startswith("python") or name in _summary["programs"]:
        return
    _summary["programs"].append(name)
    event("program", name)


_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC


def _imported():
    """Record the pending modules that are imported by now (an `import obs` in a `try` that
    fails, as MindSpore does, is no OBS client)."""
    for top in [m for m in _pending if m in sys.modules]:
        _pending.remove(top)
        _summary["modules"].append(top)
        event("module", top)


def _hook(name, args):
    if _busy:
        return
    try:
        if _pending:
            _imported()
        if name == "open":
            file, mode, flags = args
            if isinstance(file, int) or file is None:
                return
            if isinstance(mode, str):
                if any(c in mode for c in "wax+"):
                    written(file)
            elif isinstance(flags, int) and flags & _WRITE_FLAGS:
                written(file)
        elif name in ("os.rename", "os.link", "os.truncate"):
            written(args[1] if name != "os.truncate" else args[0])
        elif name == "subprocess.Popen":
            executable, argv = args[0], args[1]
            argv = [argv] if isinstance(argv, (str, bytes, os.PathLike)) else list(argv or [])
            _program(executable if executable is not None else (argv[0] if argv else ""), argv)
        elif name == "os.system":
            _program(os.fsdecode(args[0]))
        elif name in ("os.exec", "os.posix_spawn"):
            _program(args[0])
        elif name == "os.spawn":
            _program(args[1])
        elif name == "import":
            top = str(args[0]).split(".")[0]
            if top in UNSEEN_MODULES and top not in _summary["modules"] and top not in _pending:
                _pending.append(top)
    except Exception:  # noqa: BLE001  (the recorder never breaks the job it watches)
        return


def _wrap_open():
    """Python 3.7 has no audit hooks: `open` (and so pathlib, numpy, shutil) is recorded."""
    import builtins
    import functools

    original = builtins.open

    @functools.wraps(original)
    def recording_open(file, mode="r", *args, **kwargs):
        if not _busy and isinstance(mode, str) and any(c in mode for c in "wax+") \
                and isinstance(file, (str, bytes, os.PathLike)):
            written(file)
        return original(file, mode, *args, **kwargs)

    builtins.open = recording_open


def _save(folder):
    _imported()
    summary = dict(_summary, pid=os.getpid(), writes=sorted(_writes))
    for function in _contributions:
        try:
            summary.update(function())
        except Exception as exc:  # noqa: BLE001
            summary.setdefault("errors", []).append(repr(exc))
    path = os.path.join(folder, "%s-%d.json" % (_rank, os.getpid()))
    _busy.append(True)
    try:
        with open(path + ".tmp", "w") as f:
            json.dump(summary, f)
        os.replace(path + ".tmp", path)
    finally:
        _busy.pop()


def install():
    folder = os.environ.get(RECORD_VAR)
    if not folder or _skipped:
        return
    folder = os.path.abspath(folder)
    _skipped.append(folder)
    for var in ("NPU_MIGRATE_REHEARSAL_LOG", "NPU_MIGRATE_REHEARSAL_OBS"):
        if os.environ.get(var):
            _skipped.append(os.path.abspath(os.environ[var]))
    os.makedirs(folder, exist_ok=True)
    event("started", True)
    if hasattr(sys, "addaudithook"):
        sys.addaudithook(_hook)
    else:
        _wrap_open()
    atexit.register(_save, folder)
