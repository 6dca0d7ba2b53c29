"""`npu-migrate rehearse SCRIPT`: run an adapted entry script as a ModelArts job would, on the CPU.

This is the one part of npu-migrate that runs the user's code (migrating never does), and it
runs it in a copy: the script's folder is copied into a job folder, and nothing of the user's
tree is written. The job folder holds

    code/<folder>/   the copy of the code folder (the working folder of every process)
    obs/             the local OBS: obs://rehearsal/data/ (the --data folder) and obs://rehearsal/out/
    cache/           what the generated code uses instead of the node's /cache
    logs/rankN.log   what each process printed
    moxing.jsonl     every MoXing call (the stand-in's record)
    rank_table.json  the HCCL rank table ModelArts provides (RANK_TABLE_FILE)
    nodeK/           with --nodes: node K's own code/ and cache/ (node 0's are the ones above)

With --nodes M, M groups of N processes run as the nodes of one job would (each with its own
working folder and /cache, the global ranks node * N + local rank, ModelArts' VC_TASK_INDEX and
torchrun's GROUP_RANK saying the node), all on this machine and one shared OBS. N processes start with `--data_url=obs://rehearsal/data/ --train_url=obs://rehearsal/out/`, the
arguments the platform adds, ModelArts' job variables and the per-process ones of torchrun and
of Ascend's launchers, with the CPU stand-in of torch_npu and MoXing (npu_migrate/standin) first
on PYTHONPATH. The verdict: every process succeeded and at least one file reached train_url;
and what a distributed job must hold (from each process's record, records/): every rank ends
with the same parameters in its DistributedDataParallel models, the ranks' DistributedSamplers
drew (and rank_shard kept) disjoint parts of the data, each output file had one writer, and no
uploaded file is truncated (NAME.incomplete, what a preemption cut short, says so: not a failure; without a
preemption or a failed rank, an output that arrived only so was not delivered, and fails the job).
When a rank failed while a rank that took fewer training steps through DistributedDataParallel (its
forward calls with gradients on) ended well, the verdict says so: the failed rank waited in a
collective for one that had left; when every rank ended well without a training step through it (a loss
computed by another method of the model), that no gradient was averaged, which fails the job.
The files the job wrote are known from the job folder (before and
after) and from each process's record of the files it opened for writing anywhere (`../x`,
`~/x`, `/abs/x`). Where the records cannot show whether outputs reached train_url (a program or
an OBS client that uploads without MoXing), the verdict says it cannot tell (exit 3), never OK
or FAILED on a guess.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import stat
# Running the user's script, on request, is this module's job (argument lists, never a shell).
import subprocess  # nosec B404
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, TextIO, Tuple

from .standin import DEVICES_VAR, LOG_VAR, OBS_ROOT_VAR, RECORD_VAR, SITE

BUCKET = "rehearsal"
DATA_URL = f"obs://{BUCKET}/data/"
TRAIN_URL = f"obs://{BUCKET}/out/"
CACHE_VAR = "NPU_MIGRATE_MODELARTS_CACHE"  # honoured by the generated ModelArts code
# Arguments ModelArts adds to the job's command line besides --data_url/--train_url (old-style
# PyTorch/GPU engines pass the rendezvous address and the accelerator count); scripts that parse
# their arguments with parse_args() die on them.
PLATFORM_ARGUMENTS = ("--init_method=tcp://{master_addr}:{master_port}", "--num_gpus={nproc}")
# Variables a launcher or an earlier job may have left in our own environment.
LAUNCHER_VARIABLES = (
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT",
    "RANK_ID", "RANK_SIZE", "DEVICE_ID", "ASCEND_DEVICE_ID", "RANK_TABLE_FILE", "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE", "TORCHELASTIC_RUN_ID", "CUDA_VISIBLE_DEVICES", "ASCEND_RT_VISIBLE_DEVICES",
    "NPU_MIGRATE_MODELARTS_OUTPUTS",
    # what else the generated code reads to tell a process's node and role (another launcher's, msrun's)
    "GROUP_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "MS_ROLE", "MS_NODE_ID",
)
SKIPPED_FOLDERS = {".git", ".hg", ".svn", "__pycache__", ".venv", "venv", ".tox", ".mypy_cache", ".pytest_cache",
                   "node_modules", ".ipynb_checkpoints"}
MODELARTS_MAX_CODE_FILES = 1000  # ModelArts refuses a code folder with more files
GRACE_SECONDS = 20.0  # after SIGTERM (a preemption or a timeout), before SIGKILL
# What the generated runtime (modelarts/runtime_template.py, Job._upload) appends to the name of a
# file a process was writing when the job ended: what was written, marked as cut short (the
# file's last complete copy keeps its name). Never a truncated upload, and never a lost file.
INCOMPLETE = ".incomplete"
# What the rehearsal itself keeps in the job folder (not the job's files).
JOB_OWN = ("obs", "logs", "records", "moxing.jsonl", "rank_table.json")
# Modules recorded by the stand-in (_npu_migrate_record.UNSEEN_MODULES) that upload without MoXing,
# and those whose native writers the records do not see.
UPLOADING_MODULES = ("obs", "boto3", "botocore", "s3fs", "obsutil", "oss2")
NATIVE_WRITERS = {"tensorflow": "TensorFlow", "mindspore": "MindSpore"}
EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_CANNOT_TELL = 0, 1, 2, 3


class RehearsalError(Exception):
    """Bad input: one line for the user, exit 2."""


@dataclass
class RehearsalOptions:
    script: str
    nproc: int = 1  # per node
    nodes: int = 1
    data: Optional[str] = None
    obs: Optional[str] = None
    python: str = sys.executable
    timeout: Optional[float] = None
    sigterm_after: Optional[float] = None
    sigterm_on: Optional[str] = None  # SIGTERM once this file (in the working folder) exists: an event, not a time
    script_args: Tuple[str, ...] = ()
    job_dir: Optional[str] = None
    code: Optional[str] = None  # the code folder ModelArts downloads (default: the script's folder)
    echo: Optional[TextIO] = None  # where the processes' output is shown live (None: only logged)


@dataclass
class RankResult:
    rank: int
    pid: int
    returncode: Optional[int] = None  # None: still running when the rehearsal ended it
    seconds: float = 0.0
    log: str = ""
    sigterm: bool = False  # received the preemption SIGTERM while running
    killed: bool = False  # still running at the timeout


@dataclass
class Copy:
    rank: str
    pid: int
    call: str
    src: str
    dst: str
    files: int


@dataclass
class RehearsalResult:
    options: RehearsalOptions
    job_dir: Path
    command: List[str]
    ranks: List[RankResult]
    copies_in: List[Copy]
    uploaded: List[Tuple[str, int]]  # (path under train_url, size)
    # files the job wrote that did not reach train_url: `name` in the working folder, `/cache/name`,
    # `../name` elsewhere in the job folder, `~/name` or an absolute path outside it
    not_uploaded: List[str]
    seconds: float
    timed_out: bool
    calls: int
    problems: List[str] = field(default_factory=list)
    checks: List[str] = field(default_factory=list)  # what held of a distributed job's checks
    unknown: List[str] = field(default_factory=list)  # what the records cannot tell (never a guess either way)
    copied_elsewhere: List[str] = field(default_factory=list)  # OBS places outside train_url the job copied to

    @property
    def ok(self) -> bool:
        return not self.problems and not self.unknown


def _skip(name: str) -> bool:
    return name in SKIPPED_FOLDERS or name.endswith(".egg-info")


def _copy_code(src: Path, dst: Path) -> int:
    def ignore(folder, names):
        return [n for n in names if _skip(n) and os.path.isdir(os.path.join(folder, n))]

    shutil.copytree(src, dst, symlinks=True, ignore=ignore)
    return sum(len(files) for _, _, files in os.walk(dst))


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _snapshot(root: Path, skip: Tuple[str, ...] = ()) -> Dict[str, Tuple[int, int]]:
    """Each file under `root` (not in its top-level entries `skip`): its size and mtime."""
    found: Dict[str, Tuple[int, int]] = {}
    if not root.is_dir():
        return found
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != "__pycache__" and not (folder == str(root) and d in skip)]
        for name in files:
            if folder == str(root) and name in skip:
                continue
            path = Path(folder, name)
            try:
                st = path.stat()
            except OSError:
                continue
            found[path.relative_to(root).as_posix()] = (st.st_size, st.st_mtime_ns)
    return found


def _is_adapted(text: str, folder: Path, limit: int = 5000) -> bool:
    """The script takes --data_url/--train_url, itself or through a module of its folder (a
    launcher that calls an adapted package's main function)."""
    if "data_url" in text and "train_url" in text:
        return True
    seen = 0
    for parent, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not _skip(d)]
        for name in files:
            if not name.endswith(".py"):
                continue
            seen += 1
            if seen > limit:
                return False
            try:
                other = Path(parent, name).read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            if "data_url" in other and "train_url" in other:
                return True
    return False


def _cache_arguments(args: Tuple[str, ...], cache: Path) -> List[str]:
    """`/cache/...` in the script's arguments (`-c /cache/data/x`, `--data=/cache/data`) is the
    job's stand-in for the node's /cache, as for the generated code."""
    mapped = []
    for arg in args:
        head, eq, value = arg.partition("=") if arg.startswith("-") else ("", "", arg)
        if value == "/cache" or value.startswith("/cache/"):
            value = str(cache) + value[len("/cache"):]
        mapped.append(head + eq + value)
    return mapped


def _needs_torch(script_text: str) -> bool:
    return "import torch" in script_text or "from torch" in script_text


def check_python(python: str, needs_torch: bool) -> None:
    """One line naming the interpreter when it cannot run the script."""
    probe = "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec('torch') else 3)"
    try:
        done = subprocess.run([python, "-c", probe], capture_output=True, timeout=60)  # nosec B603
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RehearsalError(f"cannot run the interpreter {python}: {exc}") from None
    if done.returncode == 3 and needs_torch:
        raise RehearsalError(
            f"torch is not installed in {python}: install it there (for the CPU: pip install torch) "
            "or name an interpreter that has it with --python"
        )
    if done.returncode not in (0, 3):
        raise RehearsalError(f"cannot run the interpreter {python} (exit status {done.returncode})")


def _rank_table(nproc: int, nodes: int = 1) -> dict:
    servers = [{"server_id": "127.0.0.1", "device": [
        {"device_id": str(i), "device_ip": f"192.168.{100 + node}.{101 + i}", "rank_id": str(node * nproc + i)}
        for i in range(nproc)]} for node in range(nodes)]
    return {"version": "1.0", "server_count": str(nodes), "status": "completed", "server_list": servers}


def _node_folder(job: Path, node: int) -> Path:
    """Where node `node` keeps its code/ and cache/: the job folder for the first node."""
    return job if not node else job / f"node{node}"


def _environment(job: Path, code: Path, options: RehearsalOptions, rank: int, port: int,
                 node: int = 0) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARIABLES}
    path = [str(SITE)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    n = str(options.nproc)
    total, local = str(options.nproc * options.nodes), rank - node * options.nproc
    env.update({
        "PYTHONPATH": os.pathsep.join(path),
        "PYTHONUNBUFFERED": "1",
        # the stand-in
        OBS_ROOT_VAR: str(job / "obs"), LOG_VAR: str(job / "moxing.jsonl"), DEVICES_VAR: n,
        CACHE_VAR: str(_node_folder(job, node) / "cache"), RECORD_VAR: str(job / "records"),
        # ModelArts' job variables (node `node` of --nodes)
        "MA_JOB_DIR": str(code.parent), "MA_LOG_DIR": str(job / "logs"), "MA_MOUNT_PATH": str(job),
        "MA_CURRENT_IP": "127.0.0.1", "MA_NUM_GPUS": n, "MA_NUM_HOSTS": str(options.nodes), "MA_TASK_NAME": "worker",
        "MA_VJ_NAME": "rehearsal-" + job.name, "VC_TASK_INDEX": str(node), "VC_WORKER_NUM": str(options.nodes),
        "VC_WORKER_HOSTS": ",".join(["127.0.0.1"] * options.nodes),
        # torchrun's
        "RANK": str(rank), "LOCAL_RANK": str(local), "WORLD_SIZE": total, "LOCAL_WORLD_SIZE": n,
        "GROUP_RANK": str(node), "GROUP_WORLD_SIZE": str(options.nodes),
        "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
        # Ascend's launchers (MindSpore, TensorFlow, HCCL)
        "RANK_ID": str(rank), "RANK_SIZE": total, "DEVICE_ID": str(local), "ASCEND_DEVICE_ID": str(local),
        "RANK_TABLE_FILE": str(job / "rank_table.json"), "HCCL_WHITELIST_DISABLE": "1",
    })
    return env


class _Process:
    def __init__(self, rank: int, command: List[str], cwd: Path, env: Dict[str, str], log: Path,
                 echo: Optional[TextIO]) -> None:
        self.rank = rank
        self.log_path = log
        self.start = time.monotonic()
        self.end: Optional[float] = None
        self.sigterm = False
        self.killed = False
        self.popen = subprocess.Popen(  # nosec B603
            command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, start_new_session=True,
        )
        self.reader = threading.Thread(target=self._read, args=(echo,), daemon=True)
        self.reader.start()

    def _read(self, echo: Optional[TextIO]) -> None:
        stdout = self.popen.stdout
        assert stdout is not None  # started with stdout=PIPE
        with open(self.log_path, "wb") as log:
            for line in iter(stdout.readline, b""):
                log.write(line)
                log.flush()
                if echo is not None:
                    echo.write(f"[rank {self.rank}] " + line.decode("utf-8", "replace").rstrip("\n") + "\n")
                    echo.flush()
        stdout.close()

    def poll(self) -> Optional[int]:
        code = self.popen.poll()
        if code is not None and self.end is None:
            self.end = time.monotonic()
        return code

    def signal(self, signum: int) -> None:
        try:
            os.killpg(self.popen.pid, signum)  # the script's own children (data loader workers) too
        except (ProcessLookupError, PermissionError):
            pass


def rehearse(options: RehearsalOptions) -> RehearsalResult:
    script = Path(options.script)
    if not script.is_file():
        raise RehearsalError(f"{options.script}: " + ("not a file" if script.exists() else "no such file"))
    if options.nproc < 1:
        raise RehearsalError("--nproc must be at least 1")
    if options.nodes < 1:
        raise RehearsalError("--nodes must be at least 1")
    if options.data and not Path(options.data).is_dir():
        raise RehearsalError(f"--data {options.data}: not a folder")
    try:
        text = script.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise RehearsalError(f"{options.script}: cannot read: {exc.strerror}") from None
    source = Path(options.code).resolve() if options.code else script.resolve().parent
    if not source.is_dir():
        raise RehearsalError(f"--code {options.code}: not a folder")
    if source not in script.resolve().parents:
        raise RehearsalError(f"{options.script} is not inside the code folder {options.code}")
    if not _is_adapted(text, source):
        raise RehearsalError(
            f"{options.script} is not adapted for ModelArts (it takes no --data_url/--train_url): "
            f"run `npu-migrate {options.script} --modelarts --write` first"
        )
    check_python(options.python, _needs_torch(text))

    if options.job_dir:
        job = Path(options.job_dir).resolve()
        if job == source or source in job.parents:
            # the copy would contain itself, and the user's tree must stay as it is
            raise RehearsalError(f"--job-dir {options.job_dir} lies inside the code folder {source}")
        if job.exists() and (not job.is_dir() or any(job.iterdir())):
            raise RehearsalError(f"--job-dir {options.job_dir}: not an empty folder")
        job.mkdir(parents=True, exist_ok=True)
    else:
        parent = Path(tempfile.gettempdir()).resolve()
        if parent == source or source in parent.parents:
            parent = source.parent  # the code lies in the temporary folder: the job goes next to it
        job = Path(tempfile.mkdtemp(prefix="npu-migrate-rehearsal-", dir=parent)).resolve()
    code = job / "code" / (source.name or "code")
    code_files = _copy_code(source, code)
    codes = [code] + [_node_folder(job, k) / "code" / code.name for k in range(1, options.nodes)]
    for other in codes[1:]:
        _copy_code(source, other)
        (other.parent.parent / "cache").mkdir()
    obs = Path(options.obs).resolve() if options.obs else job / "obs"
    data = obs / BUCKET / "data"
    data.mkdir(parents=True, exist_ok=True)
    if options.data:
        shutil.copytree(options.data, data, dirs_exist_ok=True)
    out = obs / BUCKET / "out"
    if options.obs and obs != job / "obs":
        (job / "obs").symlink_to(obs, target_is_directory=True)
    (job / "cache").mkdir()
    (job / "logs").mkdir()
    (job / "rank_table.json").write_text(json.dumps(_rank_table(options.nproc, options.nodes), indent=2) + "\n")
    before_out = _snapshot(out)
    before_job = _snapshot(job, JOB_OWN)
    started_ns = time.time_ns()

    port = _free_port()
    extra = [a.format(master_addr="127.0.0.1", master_port=port, nproc=options.nproc) for a in PLATFORM_ARGUMENTS]

    def command_of(node: int) -> List[str]:
        return [options.python, str(codes[node] / script.resolve().relative_to(source)), f"--data_url={DATA_URL}",
                f"--train_url={TRAIN_URL}", *extra,
                *_cache_arguments(options.script_args, _node_folder(job, node) / "cache")]

    command = command_of(0)
    started = time.monotonic()
    processes = [
        _Process(rank, command_of(node), codes[node], _environment(job, codes[node], options, rank, port, node),
                 job / "logs" / f"rank{rank}.log", options.echo)
        for node in range(options.nodes) for rank in range(node * options.nproc, (node + 1) * options.nproc)
    ]
    try:
        timed_out = _supervise(processes, options, started, code / options.sigterm_on if options.sigterm_on else None)
    except BaseException:  # Ctrl-C or SIGTERM of npu-migrate itself: stop the job first
        for p in processes:
            p.signal(signal.SIGKILL)
        raise
    for p in processes:
        p.signal(signal.SIGKILL)  # what a rank left running (it holds the output pipe open); the job is over
        p.reader.join(timeout=10)
    seconds = time.monotonic() - started

    ranks = [RankResult(rank=p.rank, pid=p.popen.pid, returncode=None if p.killed else p.popen.returncode,
                        seconds=((p.end or time.monotonic()) - p.start), log=str(p.log_path), sigterm=p.sigterm,
                        killed=p.killed) for p in processes]
    calls = _read_calls(job / "moxing.jsonl")
    copies_in = [_copy(c) for c in calls if c.get("call") in ("copy_parallel", "copy") and len(c.get("args", [])) == 2
                 and _is_obs(c["args"][0]) and not _is_obs(c["args"][1]) and "error" not in c]
    after_out = _snapshot(out)
    uploaded = sorted((name, size) for name, (size, mtime) in after_out.items() if before_out.get(name) != (size, mtime))
    places = _Places(job, code, obs, copies_in, codes)
    records = _by_rank(_read_records(job / "records"), ranks)
    written = _written(places, before_job, records, started_ns)
    uploaded_names = {(_without_incomplete(Path(n).name), s) for n, s in uploaded}
    not_uploaded = [name for name, size in written if (Path(name).name, size) not in uploaded_names]
    result = RehearsalResult(options=options, job_dir=job, command=command, ranks=ranks, copies_in=copies_in,
                             uploaded=uploaded, not_uploaded=not_uploaded, seconds=seconds, timed_out=timed_out,
                             calls=len(calls))
    result.copied_elsewhere = sorted({
        c["args"][1] for c in calls if c.get("call") in ("copy_parallel", "copy") and len(c.get("args", [])) == 2
        and not _is_obs(c["args"][0]) and _is_obs(c["args"][1]) and "error" not in c
        and not (c["args"][1].rstrip("/") + "/").startswith(TRAIN_URL)})
    result.problems = _problems(result, code_files, records)
    result.problems += _distributed_checks(result, code, records, written, places)
    return result


def _supervise(processes: List[_Process], options: RehearsalOptions, started: float,
               trigger: Optional[Path] = None) -> bool:
    """Wait for every process; SIGTERM at --sigterm-after or once `trigger` exists (--sigterm-on),
    stop everything at --timeout."""
    sigterm_sent = False
    deadline_kill: Optional[float] = None
    timed_out = False
    while True:
        running = [p for p in processes if p.poll() is None]
        if not running:
            return timed_out
        now = time.monotonic() - started
        if not sigterm_sent and ((options.sigterm_after is not None and now >= options.sigterm_after)
                                 or (trigger is not None and trigger.exists())):
            sigterm_sent = True
            for p in running:
                p.sigterm = True
                p.signal(signal.SIGTERM)
            deadline_kill = now + GRACE_SECONDS
        if options.timeout is not None and not timed_out and now >= options.timeout:
            timed_out = True
            for p in running:
                p.killed = True
                p.signal(signal.SIGTERM)
            deadline_kill = now + min(GRACE_SECONDS, 5.0)
        if deadline_kill is not None and now >= deadline_kill:
            for p in running:
                p.killed = True
                p.signal(signal.SIGKILL)
            deadline_kill = None
        time.sleep(0.05)


def _read_calls(log: Path) -> List[dict]:
    if not log.exists():
        return []
    calls = []
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            calls.append(json.loads(line))
        except ValueError:
            continue
    return calls


def _is_obs(url: str) -> bool:
    return url.lower().startswith(("obs://", "s3://"))


def _copy(call: dict) -> Copy:
    # The generated code copies into DIR.modelarts-new-PID, then switches it into place as DIR:
    # DIR is where the input is.
    dst = re.sub(r"\.modelarts-new-\d+$", "", call["args"][1].rstrip("/"))
    return Copy(rank=str(call.get("rank", "")), pid=int(call.get("pid", 0)), call=call["call"], src=call["args"][0],
                dst=dst, files=int(call.get("files", 0)))


class _Places:
    """How a file the job wrote is named in the report: `name` (in the working folder),
    `/cache/name`, `../name` (elsewhere in the job folder), `~/name` or an absolute path; None for
    what is not the job's output (the rehearsal's own files, the OBS, the input copied into
    /cache, bytecode, the generated code's markers, caches under ~/.cache, torch.compile's cache)."""

    def __init__(self, job: Path, code: Path, obs: Path, copies_in: List[Copy],
                 codes: Optional[List[Path]] = None) -> None:
        self.job, self.code = job, code
        # with --nodes: each node's working folder and cache, named as the first node's are
        self.codes = codes or [code]
        self.caches_of_nodes = [c.parent.parent / "cache" for c in self.codes]
        self.own = [job / name for name in JOB_OWN] + [obs]
        self.inputs = [Path(c.dst).resolve() for c in copies_in]
        home = Path.home()
        self.home = home
        self.caches = [Path(os.environ.get("XDG_CACHE_HOME") or home / ".cache"), _inductor_cache()]

    def name(self, file: str) -> Optional[str]:
        path = Path(os.path.abspath(file))
        if "__pycache__" in path.parts or any(".modelarts-" in part for part in path.parts):
            return None  # bytecode; the generated code's markers and the input it copies in
        resolved = path.resolve()
        for p in {path, resolved}:
            if any(p == d or d in p.parents for d in self.own + self.inputs):
                return None
        for code in self.codes:
            if code == path or code in path.parents:
                return path.relative_to(code).as_posix()
        for cache in self.caches_of_nodes:
            if cache in path.parents:
                return "/cache/" + path.relative_to(cache).as_posix()
        if self.job in path.parents:
            return os.path.relpath(path, self.code).replace(os.sep, "/")
        if any(c in path.parents for c in self.caches):
            return None
        if self.home in path.parents:
            return "~/" + path.relative_to(self.home).as_posix()
        return str(path)


def _inductor_cache() -> Path:
    """Where torch.compile keeps what it compiles (torch/_inductor/runtime/cache_dir_utils.py:
    TORCHINDUCTOR_CACHE_DIR, else torchinductor_<user> in the temporary folder): a compiled
    model's kernels and graphs, no output of the job's (rl_games compiles by default: 26 of its
    files were listed as not reaching train_url)."""
    import getpass

    chosen = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if chosen:
        return Path(os.path.abspath(chosen))
    try:
        user = getpass.getuser()
    except (KeyError, ModuleNotFoundError, OSError):
        user = f"uid_{os.getuid()}" if hasattr(os, "getuid") else "unknown_user"
    return Path(tempfile.gettempdir()) / ("torchinductor_" + re.sub(r'[\\/:*?"<>|]', "_", user))


def _written(places: _Places, before: Dict[str, Tuple[int, int]], records: Dict[int, dict],
             started_ns: int) -> List[Tuple[str, int]]:
    """Files the job wrote (named by `places`): what changed in the job folder, and what the
    processes recorded writing outside it that is still there, written since the job started."""
    found: Dict[str, int] = {}
    for rel, (size, mtime) in sorted(_snapshot(places.job, JOB_OWN).items()):
        name = places.name(str(places.job / rel))
        if name is not None and before.get(rel) != (size, mtime):
            found[name] = size
    for record in records.values():
        for path in record.get("writes", []):
            if places.job in Path(path).parents:
                continue  # seen above (what the job folder holds now)
            name = places.name(path)
            try:
                st = os.stat(path)
            except OSError:
                continue
            if name is not None and name not in found and stat.S_ISREG(st.st_mode) and st.st_mtime_ns >= started_ns:
                found[name] = st.st_size
    return sorted(found.items())


def _read_records(folder: Path) -> List[dict]:
    """One record per process: its summary at exit (`<rank>-<pid>.json`), else (ended by a
    signal) what its events say (`<rank>-<pid>.events`: writes, programs, modules, joining a group)."""
    records: Dict[str, dict] = {}
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            records[path.stem] = json.loads(path.read_text(encoding="utf-8"))
            records[path.stem]["started"] = True
        except (OSError, ValueError):
            continue
    for path in sorted(folder.glob("*.events")) if folder.is_dir() else []:
        if path.stem in records:
            continue
        record: dict = {"params": [], "samples": [], "writes": [], "programs": [], "modules": []}
        pid = path.stem.rpartition("-")[2]
        record["pid"] = int(pid) if pid.isdigit() else None
        for event in _read_calls(path):
            record["rank"] = event.get("rank")
            record["distributed"] = record.get("distributed") or bool(event.get("distributed"))
            record["started"] = record.get("started") or bool(event.get("started"))
            for key, field_ in (("write", "writes"), ("program", "programs"), ("module", "modules")):
                if key in event:
                    record[field_].append(event[key])
        records[path.stem] = record
    return list(records.values())


def _by_rank(records: List[dict], ranks: List[RankResult]) -> Dict[int, dict]:
    """The records of each rank's processes as one: its main process's parameters, samples and
    shards; every process's writes, programs and modules (data loader workers, children)."""
    main: Dict[object, int] = {r.rank: r.pid for r in ranks}
    merged: Dict[int, dict] = {}
    for r in sorted(records, key=lambda r: (r.get("pid") != main.get(r.get("rank")), r.get("pid") or 0)):
        rank = r.get("rank")
        if not isinstance(rank, int):
            continue
        into = merged.setdefault(rank, {"rank": rank, "pid": r.get("pid"), "writes": [], "programs": [],
                                        "modules": []})
        into["distributed"] = bool(into.get("distributed") or r.get("distributed"))
        into["started"] = bool(into.get("started") or r.get("started"))
        into["torch"] = bool(into.get("torch") or r.get("torch"))
        for key in ("params", "steps", "samples", "shards"):
            if r.get(key) and not into.get(key):
                into[key] = r[key]
        if "npu" in r:  # (a PyTorch process's summary: any of the rank's processes on the NPU, their steps)
            into["npu"] = bool(into.get("npu") or r["npu"])
            into["optimizer_steps"] = into.get("optimizer_steps", 0) + (r.get("optimizer_steps") or 0)
        for key in ("writes", "programs", "modules"):
            into[key] += [v for v in r.get(key) or [] if v not in into[key]]
    return merged


def _distributed_checks(result: RehearsalResult, code: Path, records: Dict[int, dict],
                        written: List[Tuple[str, int]], places: Optional[_Places] = None) -> List[str]:
    """What a distributed job must hold (issue 26.12); fills result.checks with what held and
    returns the problems."""
    problems: List[str] = []
    ranks = records
    places = places or _Places(result.job_dir, code, result.job_dir / "obs", result.copies_in)
    if not any(r.get("distributed") for r in ranks.values()):
        # N copies of a one-process script: not what these checks are about; said when the
        # record can tell (a PyTorch job joins a group through init_process_group, which it records)
        if len(ranks) > 1 and all(r.get("torch") for r in ranks.values()):
            result.checks.append(f"none of the {len(ranks)} processes joined a process group: each ran the whole "
                                 "job alone, on all of its data")
        return problems
    # 1. the same parameters on every rank at exit; not after a SIGTERM or a kill, which stops
    # the ranks wherever each is (one past its optimizer step, one before it)
    stopped = any(r.sigterm or r.killed for r in result.ranks)
    hashes = {rank: r["params"] for rank, r in ranks.items() if r.get("params")}
    # (said as a check that held only when every rank ended well: where one failed, the job did
    # not train to its end, whatever the ranks held when they stopped)
    any_failed = any(r.returncode != 0 for r in result.ranks)
    if len(hashes) > 1 and not stopped:
        if len({tuple(h) for h in hashes.values()}) == 1:
            if not any_failed:
                models = len(next(iter(hashes.values())))
                result.checks.append(f"the {len(hashes)} ranks hold the same parameters at exit "
                                     f"({models} model{'s' if models != 1 else ''} in DistributedDataParallel)")
        else:
            shown = ", ".join(f"rank {rank}: {h[0][:12] if h else '-'}" for rank, h in sorted(hashes.items()))
            problems.append(f"the ranks hold different parameters at exit ({shown}): they trained different models")
    # ... and, when a rank failed while one that took fewer training steps ended well, that this is
    # why: the failed rank waited in a step's collective for a rank that had left (a data loader
    # that gives the ranks different numbers of batches; Opacus' Poisson sampling skips an empty one)
    steps = {rank: sum(r["steps"]) for rank, r in ranks.items() if r.get("steps")}
    ended = {r.rank: r.returncode for r in result.ranks if not (r.sigterm or r.killed)}
    ok = [rank for rank, code in ended.items() if code == 0 and rank in steps]
    failed = [rank for rank, code in ended.items() if code != 0 and rank in steps]
    if ok and failed and min(steps[rank] for rank in ok) < max(steps[rank] for rank in failed):
        shown = "; ".join(f"rank {rank}: {steps[rank]}, {'exit status 0' if rank in ok else 'failed'}"
                          for rank in sorted(ok + failed))
        problems.append(f"the ranks took different numbers of training steps through DistributedDataParallel "
                        f"({shown}): a rank that ends after fewer steps leaves the others waiting in a collective "
                        f"until it fails them (every rank's data loader must give the same number of batches)")
    # ... and that the model in DistributedDataParallel trained through it: DDP averages the gradients
    # of a forward pass through the wrapper only, so a job whose every rank ended well having run no
    # forward with gradients on through it (its loss computed by another method of the model,
    # `unwrap_model(agent).get_action_and_value(...)`, NPU387) trained each rank's copy alone
    if len(steps) == len(ranks) > 1 and not any(steps.values()) and not stopped and not any_failed:
        shown = ", ".join(f"rank {rank}: 0" for rank in sorted(ranks))
        problems.append(f"no rank took a training step through DistributedDataParallel ({shown} forward passes "
                        f"with gradients on): the gradients were never averaged, each rank trained its copy of the "
                        f"model alone (a loss computed by another method of the model, `unwrap_model(model).method"
                        f"(...)`, bypasses the wrapper: NPU387)")
    # 2. disjoint samples where the script shards with a DistributedSampler
    samplers = [r.get("samples") or [] for _, r in sorted(ranks.items())]
    # Compared sampler by sampler only when every rank made the same ones (same count, same data
    # set lengths): a sampler one rank alone makes (rank 0's evaluation) would pair wrongly.
    same = len({tuple(s[0] for s in rank) for rank in samplers}) == 1
    if len(samplers) > 1 and all(samplers) and same:
        overlapping = []
        for i in range(min(len(s) for s in samplers)):
            length = samplers[0][i][0]
            for epoch in range(1, min(len(s[i]) for s in samplers)):
                drawn = [s[i][epoch] for s in samplers]
                total = sum(len(d) for d in drawn)
                union = set().union(*map(set, drawn))
                if total - len(union) > max(total - length, 0):  # more repeats than the padding
                    overlapping.append(f"sampler {i + 1}, epoch {epoch}")
        if overlapping:
            problems.append("the ranks read the same samples (" + ", ".join(overlapping[:3]) + ")")
        else:
            result.checks.append("the ranks' DistributedSamplers drew disjoint parts of the data")
    # ... and where it cuts a tensor with rank_shard (a contiguous part per rank)
    shards = [r.get("shards") or [] for _, r in sorted(ranks.items())]
    if len(shards) > 1 and all(shards) and len({tuple(s[0] for s in rank) for rank in shards}) == 1:
        overlapping = []
        for i in range(min(len(s) for s in shards)):
            parts = sorted((s[i][1], s[i][2], rank) for rank, s in zip(sorted(ranks), shards))
            if any(a[1] > b[0] for a, b in zip(parts, parts[1:])):
                overlapping.append(f"cut {i + 1}: " + ", ".join(f"rank {k[2]} [{k[0]}, {k[1]})" for k in
                                                                sorted(parts, key=lambda k: k[2])))
        if overlapping:
            problems.append("the ranks kept overlapping parts of the data rank_shard cut (" + "; ".join(overlapping[:2])
                            + ")")
        else:
            result.checks.append("the ranks kept disjoint parts of the data rank_shard cut")
    # 3. one writer per output file (the job's working folder and /cache)
    if len(ranks) > 1:
        # The output files: in the working folder or /cache, where the generated code uploads from
        # (what a job writes elsewhere, compiler caches in /tmp say, is never uploaded), still there
        # at the end (not a temporary file, not a rendezvous file the ranks share on purpose), not a
        # lock file every process takes in turn.
        writers: Dict[str, List[int]] = {}
        for rank, r in sorted(ranks.items()):
            for path in r.get("writes", []):
                name = places.name(path)  # (the input copied into /cache is written once, by the copying rank)
                if name is None or name.startswith(("../", "~/", "/")) and not name.startswith("/cache/"):
                    continue
                if name.endswith(".lock") or not os.path.isfile(path):
                    continue
                if result.options.nodes > 1:  # each node's disks are its own: one writer per node
                    name += f"` on node `{rank // result.options.nproc}"
                if rank not in writers.get(name, []):
                    writers.setdefault(name, []).append(rank)
        kept = set(writers)
        shared = {name: who for name, who in writers.items() if len(who) > 1}
        if shared:
            problems.append("files written by more than one rank: " + ", ".join(
                f"`{name}` (ranks {', '.join(map(str, who))})" for name, who in sorted(shared.items())[:4]))
        elif kept:
            result.checks.append(f"each of the {len(kept)} output files had one writer" if len(kept) > 1
                                 else "the output file had one writer")
    # 4. nothing uploaded truncated
    truncated = _truncated(result, written)
    marked = [name for name, _ in result.uploaded if name.endswith(INCOMPLETE)]
    if truncated:
        problems.append("uploaded truncated: " + ", ".join(truncated[:4]))
    elif result.uploaded and len(ranks) > 1 and marked:
        one = len(marked) == 1
        result.checks.append(f"no file uploaded under its own name is truncated ({', '.join(marked[:4])} "
                             f"{'was' if one else 'were'} cut short and {'is' if one else 'are'} named so)")
    elif result.uploaded and len(ranks) > 1:
        result.checks.append("no uploaded file is truncated")
    return problems


def _without_incomplete(name: str) -> str:
    return name[:-len(INCOMPLETE)] if name.endswith(INCOMPLETE) else name


def _truncated(result: RehearsalResult, written: List[Tuple[str, int]]) -> List[str]:
    """Uploaded files that are smaller than the job's final file of that name, or not a whole
    zip archive (torch.save's format) although they start as one."""
    import zipfile

    by_name: Dict[str, List[int]] = {}
    for name, size in written:
        by_name.setdefault(Path(name).name, []).append(size)
    # Only a name the job wrote once is compared: two files of one name (a/model.pt, b/model.pt)
    # cannot be told apart here, and a false failure is the worst result.
    final = {name: sizes[0] for name, sizes in by_name.items() if len(sizes) == 1}
    out = result.job_dir / "obs" / BUCKET / "out" if not result.options.obs else Path(result.options.obs) / BUCKET / "out"
    found = []
    for name, size in result.uploaded:
        if name.endswith(INCOMPLETE):
            continue  # cut short by the end of the job, and named so: what the runtime does by design
        if size < final.get(Path(name).name, 0):
            found.append(f"`{name}` ({size:,} of {final[Path(name).name]:,} bytes)")
            continue
        path = out / name
        try:
            with open(path, "rb") as f:
                zipped = f.read(4) == b"PK\x03\x04"
            if zipped:
                with zipfile.ZipFile(path) as z:
                    z.testzip()
        except (OSError, zipfile.BadZipFile, EOFError):
            found.append(f"`{name}` (not a whole archive)")
    return found


def _problems(result: RehearsalResult, code_files: int, records: Dict[int, dict]) -> List[str]:
    """What failed the job (certain); what the records cannot tell goes to result.unknown."""
    problems = []
    if result.timed_out:
        running = [str(r.rank) for r in result.ranks if r.killed]
        problems.append(f"timed out after {result.options.timeout:g} s: rank{'s' if len(running) > 1 else ''} "
                        f"{', '.join(running)} still running (stopped)")
    failed = [r for r in result.ranks if not r.killed and r.returncode != 0 and not (r.sigterm and r.returncode in
                                                                                         (-signal.SIGTERM, 143))]
    if failed:
        first = failed[0]
        problems.append(f"rank{'s' if len(failed) > 1 else ''} {', '.join(str(r.rank) for r in failed)} failed "
                        f"(exit status {_status(first.returncode)}; see {first.log}): "
                        + _explain_missing(_last_error(first.log), result.options.python))
    # An output that reached train_url only as NAME.incomplete although no process was stopped and
    # none failed: rank 0's final copy found another process still writing it (the runtime's wait
    # for the other ranks ran out, or a process it does not wait for held it). Not delivered.
    cut = [_without_incomplete(name) for name, _ in result.uploaded if name.endswith(INCOMPLETE)]
    if cut and not failed and not any(r.sigterm or r.killed for r in result.ranks):
        problems.append(_names(cut) + " reached train_url only as NAME" + INCOMPLETE + ": a process was still "
                        f"writing {'it' if len(cut) == 1 else 'them'} at rank 0's final copy (see "
                        f"{result.ranks[0].log})")
    per_source: Dict[Tuple[str, int], List[Copy]] = {}
    for c in result.copies_in:
        per_source.setdefault((c.src.rstrip("/"), _node_of(c.dst, result)), []).append(c)
    for (src, _), copies in per_source.items():
        if len(copies) > 1:
            who = ", ".join(f"rank {c.rank or '?'} to {c.dst}" for c in copies)
            problems.append(f"{src} was copied {len(copies)} times on one node ({who}): copy once per node")
    if not result.uploaded:
        uploaders = _uploaders(records)
        if result.copied_elsewhere:
            problems.append("nothing reached train_url: the job copied its outputs to " + _names(result.copied_elsewhere)
                            + " instead (the job's output path stays empty)")
        elif uploaders:
            # the platform may get the outputs another way: neither FAILED nor OK is known
            result.unknown.append(f"nothing reached train_url through MoXing, but the job {uploaders}, which may "
                                  "upload its outputs in a way the rehearsal does not see")
        elif result.not_uploaded:
            here = [n for n in result.not_uploaded if not n.startswith(("/cache/", "../", "~/", "/"))]
            cache = [n for n in result.not_uploaded if n.startswith("/cache/")]
            away = [n for n in result.not_uploaded if n not in here and n not in cache]
            parts = [_names(here) + " in its working folder"] if here else []
            parts += [_names(cache)] if cache else []
            parts += [_names(away) + " outside its working folder"] if away else []
            problems.append("nothing reached train_url: the script saved " + " and ".join(parts) + ", never uploaded")
        else:
            unseen = _unseen_writers(records, [r.rank for r in result.ranks])
            problems.append("nothing reached train_url: " + (
                f"the job wrote no file the rehearsal sees ({unseen})" if unseen else "the script wrote no file at all"))
    # A rank that trained (its optimizers stepped) and never put anything on an npu device ran on the
    # CPU: so would it on the NPU machine, where a device test the migration left (`torch.cuda.is_available()`
    # is False there too) or the script's own CPU option chose it, billed for NPUs it never used.
    on_cpu = [rank for rank, r in sorted(records.items()) if r.get("optimizer_steps") and r.get("npu") is False]
    if on_cpu:
        steps = records[on_cpu[0]]["optimizer_steps"]
        steps_of = (f"rank {on_cpu[0]}: " if len(on_cpu) > 1 else "") + f"{steps} optimizer step{'s' * (steps != 1)}"
        problems.append(f"rank{'s' if len(on_cpu) > 1 else ''} {', '.join(map(str, on_cpu))} trained on the CPU "
                        f"({steps_of}, nothing put on the NPU): the script chose the CPU, as it would on the NPU "
                        "machine (a device test left on CUDA, such as `torch.cuda.is_available()`, is False there "
                        "too, or an option of the script's own)")
    if code_files > MODELARTS_MAX_CODE_FILES:
        problems.append(f"the code folder has {code_files} files: ModelArts takes at most {MODELARTS_MAX_CODE_FILES}")
    return problems


def _node_of(path: str, result: RehearsalResult) -> int:
    """Which node of --nodes a path of the job folder is on (0 for what is not a node's own)."""
    for node in range(result.options.nodes - 1, 0, -1):
        folder = _node_folder(result.job_dir, node)
        if folder in Path(path).resolve().parents:
            return node
    return 0


def _uploaders(records: Dict[int, dict]) -> str:
    """What the job used that may upload without MoXing: `ran `obsutil` (rank 0)`, `used boto3 (rank 1)`."""
    programs: Dict[str, List[int]] = {}
    modules: Dict[str, List[int]] = {}
    for rank, r in sorted(records.items()):
        for name in r.get("programs") or []:
            programs.setdefault(name, []).append(rank)
        for name in r.get("modules") or []:
            if name in UPLOADING_MODULES:
                modules.setdefault(name, []).append(rank)

    def who(found: Dict[str, List[int]]) -> str:
        return ", ".join(f"`{name}` (rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))})"
                         for name, ranks in sorted(found.items())[:3])

    parts = ([f"ran {who(programs)}"] if programs else []) + ([f"used {who(modules)}"] if modules else [])
    return " and ".join(parts)


def _unseen_writers(records: Dict[int, dict], ranks: List[int]) -> str:
    """Why the records may not show every file the job wrote outside its job folder ('' when they do)."""
    why = []
    missing = [rank for rank in ranks if not (records.get(rank) or {}).get("started")]
    if missing:
        why.append(f"rank{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))} kept no record of "
                   "its writes")
    native = sorted({NATIVE_WRITERS[m] for r in records.values() for m in r.get("modules") or []
                     if m in NATIVE_WRITERS})
    if native:
        why.append(" and ".join(native) + "'s own writers are seen only in the job folder")
    return "; ".join(why)


def _names(names: List[str], shown: int = 4) -> str:
    text = ", ".join(f"`{n}`" for n in names[:shown])
    return text + (f" and {len(names) - shown} more" if len(names) > shown else "")


def _status(code: Optional[int]) -> str:
    if code is None:
        return "none"
    if code < 0:
        try:
            return f"{code} ({signal.Signals(-code).name})"
        except ValueError:
            return str(code)
    return str(code)


_MISSING = re.compile(r"^ModuleNotFoundError: No module named '([\w.]+)'$")

# Asks the interpreter about the top-level package of a missing module without importing it:
# "installed", then the distribution's name and version when it has one; nothing when absent.
_PROBE = """import importlib.metadata as m, importlib.util as u, sys
top = sys.argv[1]
if u.find_spec(top) is not None:
    names = m.packages_distributions().get(top) or [top]
    try:
        print("installed", names[0], m.version(names[0]))
    except m.PackageNotFoundError:
        print("installed")
"""


def _explain_missing(error: str, python: str) -> str:
    """A module the script imports that the interpreter lacks: whether the package is not
    installed there, or is installed in a release without that module (a script written for
    another release of its framework: MindSpore 1.x's `mindspore.dataset.vision.c_transforms`
    is gone from MindSpore 2.x, for example)."""
    match = _MISSING.match(error)
    if not match:
        return error
    module = match.group(1)
    top = module.split(".")[0]
    try:
        done = subprocess.run([python, "-c", _PROBE, top], capture_output=True, text=True, timeout=60)  # nosec B603
    except (OSError, subprocess.TimeoutExpired):
        return error
    found = done.stdout.split()
    if done.returncode != 0:
        return error
    if not found:
        return f"{error} ({top} is not installed in {python}: install the script's dependencies there)"
    if module == top or len(found) != 3:
        return error
    _, name, version = found
    return (f"{error} ({name} {version} in {python} has no module {module}: "
            f"the script was written for another release of {name})")


def _last_error(log: str) -> str:
    """What killed the process: the exception line of the last traceback, else argparse's error
    line, else the last line printed (not the generated code's own [modelarts] lines)."""
    try:
        lines = Path(log).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return "no output"
    lines = [line.rstrip() for line in lines if line.strip()]
    tracebacks = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")]
    if tracebacks:
        for line in lines[tracebacks[-1] + 1:]:
            if not line[:1].isspace():
                return line[:300]
    errors = [line for line in lines if ": error: " in line]
    if errors:
        return errors[-1][:300]
    own = [line for line in lines if not line.startswith("[modelarts] ")]
    return (own or lines or ["no output"])[-1][:300]


def render(result: RehearsalResult) -> str:
    """The report printed after the rehearsal."""
    o = result.options
    where = "on one node" if o.nodes == 1 else f"on each of {o.nodes} nodes"
    lines = [f"rehearsal of {o.script}: {o.nproc} process{'es' if o.nproc > 1 else ''} {where}, "
             f"job folder {result.job_dir}"]
    shown = [Path(result.command[0]).name, os.path.relpath(result.command[1], result.job_dir)] + result.command[2:]
    lines.append("  command: " + " ".join(shown))
    lines.append("  rank  exit status                    time  log")
    for r in result.ranks:
        if r.killed:
            status = "stopped at the timeout"
        elif r.sigterm and r.returncode in (-signal.SIGTERM, 143):
            status = f"{_status(r.returncode)} after SIGTERM"
        else:
            status = _status(r.returncode) + (" (had SIGTERM)" if r.sigterm else "")
        lines.append(f"  {r.rank:<4}  {status:<27} {r.seconds:6.1f}s  {os.path.relpath(r.log, result.job_dir)}")
    for node in range(o.nodes):
        copies = [c for c in result.copies_in if _node_of(c.dst, result) == node]
        lines.append(f"  copies of OBS input into /cache on node {node}: {len(copies)} (expected: 1"
                     f"{', or none when the script reads no OBS input' if not copies else ''})")
        for c in copies:
            lines.append(f"    rank {c.rank or '?'} (pid {c.pid}): mox.file.{c.call} {c.src} -> "
                         f"{_under(c.dst, result.job_dir)} ({c.files} file{'s' if c.files != 1 else ''})")
    lines.append(f"  files that reached train_url ({TRAIN_URL}): {len(result.uploaded)}")
    for name, size in result.uploaded[:50]:
        lines.append(f"    {name}  {size:,} bytes")
    if len(result.uploaded) > 50:
        lines.append(f"    ... and {len(result.uploaded) - 50} more")
    if result.not_uploaded:
        lines.append(f"  files the job wrote that did not reach train_url: {len(result.not_uploaded)}")
        for name in result.not_uploaded[:20]:
            lines.append(f"    {name}")
    if result.copied_elsewhere:
        lines.append(f"  copies to OBS outside train_url: {_names(result.copied_elsewhere, 10)}")
    lines.append(f"  MoXing calls: {result.calls}; wall time {result.seconds:.1f} s")
    if result.checks:
        lines.append("  distributed: " + "; ".join(result.checks))
    if result.problems:
        lines.append("FAILED: " + "; ".join(result.problems))
    elif result.unknown:
        lines.append("CANNOT TELL: " + "; ".join(result.unknown))
    else:
        lost = (f" (but {_names(result.not_uploaded)} did not)") if result.not_uploaded else ""
        agree = ", the ranks agree" if any("same parameters" in c for c in result.checks) else ""
        lines.append(f"OK: every rank succeeded{agree} and {len(result.uploaded)} file"
                     f"{'s' if len(result.uploaded) != 1 else ''} reached train_url{lost}")
    return "\n".join(lines) + "\n"


def _under(path: str, job: Path) -> str:
    try:
        return "<job>/" + Path(path).resolve().relative_to(job).as_posix()
    except ValueError:
        return path


def run_rehearsal(options: RehearsalOptions, out: Optional[TextIO] = None, err: Optional[TextIO] = None) -> int:
    """The command: 0 when the rehearsal passed, 1 when it failed, 2 on bad input, 3 when the
    records cannot tell whether the outputs reached train_url. The streams
    are looked up when it runs (a caller that swaps sys.stdout, as click's test runner does,
    gets the report)."""
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        result = rehearse(options)
    except RehearsalError as exc:
        err.write(f"npu-migrate rehearse: error: {exc}\n")
        return EXIT_BAD_INPUT
    out.write(render(result))
    return EXIT_FAILED if result.problems else EXIT_CANNOT_TELL if result.unknown else EXIT_OK

