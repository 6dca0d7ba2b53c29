import hashlib
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Recording a code from Python that no registration owns fails (npu_migrate/codes.py, tests/test_codes.py);
# the CLI run in process (run_cli) and in subprocesses (run_process) sees it.
os.environ["NPU_MIGRATE_STRICT_CODES"] = "1"
# One thread per program the tests start (as torchrun gives each worker): torch's OpenMP threads spin
# between the tiny ops of the training programs, on 2 cores shared by 2 test workers (the rehearse
# corpus: 38.5 -> 27.7 CPU-s); set here, at the start, so every program of a session, and so the fork
# server's zygotes (tests/zygote.py: one per environment), see the same environment.
os.environ.setdefault("OMP_NUM_THREADS", "1")

# The modules whose tests take 5-25 CPU-s each (corpora, pre-commit's environments, training
# programs on the stand-in), costliest first.
LONGEST_FIRST = ("test_corpus.py", "test_precommit.py", "test_rehearse_corpus.py", "test_distributed_run.py")


def pytest_configure(config):
    """In the process that starts the run (not in pytest-xdist's workers, which inherit what it sets): the
    run's folder for the fork servers (tests/zygote.py), so that the workers share each environment's zygote."""
    if hasattr(config, "workerinput") or os.environ.get("NPU_MIGRATE_TEST_ZYGOTES"):
        return  # a worker, or a run inside a test (tests/test_suite_rules.py's): the run's are set
    import zygote

    zygote.start_run()  # (an empty folder when the fork server is off: NPU_MIGRATE_TEST_ZYGOTE=0)
    _package_compiled_once(starts_processes=(config.option.markexpr or "").strip() != "not slow")


def _package_compiled_once(starts_processes: bool) -> None:
    """Each process of the package a test starts (`python -m npu_migrate`, its `-j N` workers) and each
    program run under the stand-in (its modules: npu_migrate/standin/site) compiles what it imports when
    no bytecode is kept, which PYTHONDONTWRITEBYTECODE (set on some machines) stops it keeping: a command
    line run 0.24 CPU-s, 0.17 with the package's .pyc, 0.11 with startup.py's kept dataclass code and rule
    set too. So the run keeps them once, here, where Python keeps the package's bytecode (its __pycache__
    folders, or PYTHONPYCACHEPREFIX), as any first run without the variable leaves them: the .pyc files
    (compileall), then, when the run starts processes (not the in-process `-m "not slow"` loop), one
    command line run without the variable (startup.py's files; the same conditions as theirs: a folder
    of the user's own). Only the package's: a program's own folder (a test's tmp_path, which tests list)
    gets no bytecode; the variable stays as it is for every process the tests start."""
    import compileall
    import subprocess
    import sys
    import tempfile

    compileall.compile_dir(str(ROOT / "npu_migrate"), quiet=2)  # (a .pyc up to date is left as it is)
    if not starts_processes:
        return
    with tempfile.TemporaryDirectory(prefix="npu-migrate-tests-") as folder:
        Path(folder, "train.py").write_bytes(b"import torch\n\nmodel = model.cuda()\n")
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["NPU_MIGRATE_CACHE_DIR"] = os.path.join(folder, "cache")
        subprocess.run([sys.executable, "-m", "npu_migrate", "train.py", "--check"], cwd=folder, env=env,
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=600)


def pytest_collection_modifyitems(config, items):
    """Long tests first, so that none starts last and leaves the other core idle: pytest-xdist's
    work stealing hands each worker a contiguous part of this order and an idle worker takes
    from the end of another's. Order: LONGEST_FIRST's modules, the other slow tests, then the
    fast ones; a module's tests stay together (its module-scoped fixtures are made once)."""
    def rank(item):
        name = item.path.name
        if name in LONGEST_FIRST:
            return LONGEST_FIRST.index(name)
        return len(LONGEST_FIRST) + (item.get_closest_marker("slow") is None)

    items.sort(key=rank)  # stable: collection order within each rank


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """NPU_MIGRATE_TEST_CPU=FILE appends each test's CPU seconds there: `total self children wall nodeid`
    (tab-separated; children: the processes it started and waited for, and those the fork server forked for
    it, tests/zygote.py; wall: its duration). Unlike durations, CPU
    time hardly grows with the machine's load: the measure to compare tests and runs by.
    `sort -gr FILE | head -20` lists the costliest."""
    listing = os.environ.get("NPU_MIGRATE_TEST_CPU")
    if not listing:
        yield
        return
    import resource
    import sys
    import time

    def cpu(who):
        usage = resource.getrusage(who)
        return usage.ru_utime + usage.ru_stime

    def children():  # with the programs the fork server forked (not this process's children) and its own start
        zygote = sys.modules.get("zygote")  # (imported by the fixtures that use it; a pytester run has none)
        return cpu(resource.RUSAGE_CHILDREN) + (zygote.cpu_seconds() if zygote else 0.0)

    before = cpu(resource.RUSAGE_SELF), children(), time.perf_counter()
    yield
    spent = (cpu(resource.RUSAGE_SELF) - before[0], children() - before[1])
    with open(listing, "a") as f:  # one short line per write: the workers' lines do not interleave
        f.write(f"{sum(spent):.2f}\t{spent[0]:.2f}\t{spent[1]:.2f}\t{time.perf_counter() - before[2]:.2f}\t{item.nodeid}\n")


@pytest.fixture
def run_cli():
    """Run the command line as a user would, in this process (tests/helpers.py `cli_in_process`:
    cwd chosen by the test, stdout/stderr bytes, the exit code); about 100 times cheaper than a
    new interpreter. For what only a real process shows, use `run_process`.
    NPU_MIGRATE_TEST_CLI=process runs them all in processes (to compare, or to bisect a difference)."""
    from helpers import cli_in_process, cli_process

    return cli_process if os.environ.get("NPU_MIGRATE_TEST_CLI") == "process" else cli_in_process


@pytest.fixture
def run_process():
    """Run `python -m npu_migrate` in a process of its own (signals, the interpreter's exit,
    the encodings of real streams, worker processes): same arguments and result as `run_cli`."""
    from helpers import cli_process

    return cli_process


# Programs that start in milliseconds and import nothing: a fast test may run them (a diff
# applied, an ACL set, a shell's syntax check `bash -n`; a shell running a script is a process),
# and libraries run them on first use (ctypes.util.find_library runs `ldconfig -p`: trio, which
# hypothesis's entry points import; platform.processor runs `uname -p`).
CHEAP_PROGRAMS = {"git", "patch", "setfacl", "getfacl", "ldconfig", "uname"}


@pytest.fixture(autouse=True)
def fast_tests_start_no_process(request, monkeypatch):
    """The fast subset (`-m "not slow"`, the per-change loop) runs in this process: a test that
    starts a process (a new interpreter, torch or MindSpore, pre-commit, pip, a shell script; not
    git, patch, setfacl or `bash -n`: CHEAP_PROGRAMS) is marked `slow`, and fails here when it is not, naming the command. A process costs ~1 s of CPU, the
    whole in-process test ~10-50 ms (CONTRIBUTING, "Writing tests"). Forked workers (`-j N` in
    process) are not processes started from a program file, and count as in-process.
    NPU_MIGRATE_TEST_PROCESSES=FILE only lists there what each test starts (to find the tests to mark)."""
    if request.node.get_closest_marker("slow") is not None or os.environ.get("NPU_MIGRATE_TEST_CLI") == "process":
        yield  # (NPU_MIGRATE_TEST_CLI=process: run_cli starts processes, on request)
        return
    import subprocess

    started: list = []
    real = subprocess.Popen._execute_child

    def execute_child(self, args, executable, *rest, **kwargs):
        words = [args] if isinstance(args, (str, bytes, os.PathLike)) else list(args)
        program = os.path.basename(str(executable or words[0]))
        if program not in CHEAP_PROGRAMS and not (program in ("bash", "sh") and words[1:2] == ["-n"]):
            started.append(" ".join(map(str, words)))
        return real(self, args, executable, *rest, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "_execute_child", execute_child)
    yield
    if not started:
        return
    listing = os.environ.get("NPU_MIGRATE_TEST_PROCESSES")
    if listing:
        with open(listing, "a") as f:
            f.write(f"{request.node.nodeid}\t{len(started)}\t{started[0][:200]}\n")
        return
    pytest.fail(f"this test is not marked slow but started {len(started)} process(es), the first: "
                f"{started[0][:300]}; mark it `@pytest.mark.slow` (the fast subset runs in process)",
                pytrace=False)


_PREFILTER_CHECKED: dict = {}


@pytest.fixture(autouse=True)
def prefilter_never_skips_work(monkeypatch):
    """Every test is also a test of the prefilter (npu_migrate/prefilter.py): whenever it says
    a text needs nothing, the engine runs on that text with the prefilter off and must indeed
    produce nothing. A codemod that starts acting on something no rule names fails here, in
    its own tests, instead of being silently skipped on real code.

    A "no work" for a file's known frameworks (`frameworks` given: engine.py asks so once it
    knows them, or to learn whether PyTorch's rules alone can match) says nothing of the file's
    other frameworks, so it is not checked where it is said: the engine's skips that rest on it
    (engine._nothing_needed after such a question) are, with the run's own options and rules."""
    from npu_migrate import engine, prefilter
    from npu_migrate.engine import migrate_python
    from npu_migrate.options import Options

    real = prefilter.may_need_work
    real_needs_nothing, real_nothing_needed = engine._needs_nothing, engine._nothing_needed
    checking = []
    asked: list = [None]  # the last engine._needs_nothing question: (text, options, rules, frameworks)

    def check(text, path, options, rules, key):
        if _PREFILTER_CHECKED.get(key) is rules:  # this text was checked with these rules already
            return
        checking.append(True)
        try:
            result = migrate_python(text, path, options, rules)
        finally:
            checking.pop()
        assert not (result.edits or result.findings or result.changed), (
            f"the prefilter skipped a text that needs work: {result.edits or result.findings}\n{text[:2000]}"
        )
        _PREFILTER_CHECKED[key] = rules  # (holding `rules` keeps its id from being reused)

    def checked(rules, text, framework="auto", words=None, frameworks=None, imports=None, written=None):
        if real(rules, text, framework, words, frameworks, imports, written) or checking:
            return True
        if frameworks is None:
            key = (id(rules), framework, len(text), hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest())
            check(text, "prefilter_check.py", Options(framework=framework), rules, key)
        return False

    def needs_nothing(text, options, rules, words, wants_modelarts, frameworks=None, imports=None, written=None):
        asked[0] = (text, options, rules, frameworks)
        return real_needs_nothing(text, options, rules, words, wants_modelarts, frameworks, imports, written)

    def nothing_needed(text, result):
        question = asked[0]
        if not checking and question is not None and question[0] is text and question[3] is not None:
            _text, options, rules, _frameworks = question
            key = (id(rules), repr(options), len(text), hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest())
            check(text, result.path, options, rules, key)
        return real_nothing_needed(text, result)

    monkeypatch.setattr(prefilter, "may_need_work", checked)
    monkeypatch.setattr(engine, "_needs_nothing", needs_nothing)
    monkeypatch.setattr(engine, "_nothing_needed", nothing_needed)


@pytest.fixture(autouse=True)
def partial_verify_is_the_whole_verify(monkeypatch):
    """engine._verified parses a partially parsed file's migrated partial text instead of the
    whole migrated text (its docstring says why that is enough): in every test, whenever that
    passes, the whole migrated text must parse too (Python's own parser, outside the work
    counts)."""
    import ast

    from npu_migrate import engine

    real = engine._verified

    def checked(result, input_parses, partial_text=None):
        out = real(result, input_parses, partial_text)
        if partial_text is not None and out.new_text is not None:
            try:
                ast.parse(out.new_text)
            except SyntaxError as exc:
                pytest.fail(f"the migrated partial text parses but the migrated text does not ({exc}):\n"
                            f"{out.new_text[:2000]}", pytrace=False)
        return out

    monkeypatch.setattr(engine, "_verified", checked)


def _free_bytes(folder: str) -> int:
    stat = os.statvfs(folder)
    return stat.f_bavail * stat.f_frsize


@pytest.fixture
def memory_tmp_path(tmp_path):
    """tmp_path, but in memory (a folder under /dev/shm, removed afterwards) where the machine has a
    tmpfs there: for a test whose subject is many files (tens of thousands of creations, each a disk
    journal entry), so that its time is its own and not the disk's under others' writes (the
    10,000-file test took 3.3 s in one closing CI run, 16 s in another). tmp_path where there is none."""
    import shutil
    import tempfile

    shm = "/dev/shm"
    if not (os.path.isdir(shm) and os.access(shm, os.W_OK)) or _free_bytes(shm) < 512 << 20:
        yield tmp_path  # (a container's default /dev/shm is 64 MB: 10,000 files and their cache fill it)
        return
    folder = Path(tempfile.mkdtemp(prefix="npu-migrate-test-", dir=shm))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(str(folder) + ".npu-migrate-test-cache", ignore_errors=True)  # (run_cli's, helpers._test_env)


@pytest.fixture(scope="session")
def torch_python():
    """A Python with torch==2.13.0 (CPU), from a virtualenv cached under ~/.cache/npu-migrate-torch;
    skips the test, with the reason, when it cannot be created. See tests/torch_env.py."""
    from torch_env import torch_python_or_skip

    return torch_python_or_skip()


@pytest.fixture
def run_on_standin(torch_python, tmp_path):
    """run_on_standin(source, *args, migrate=True, modelarts=False, ...) -> CompletedProcess:
    migrate a snippet and run it with `torch_python` under npu-migrate's CPU stand-in of torch_npu
    and MoXing (obs://bucket/key is tmp_path/obs/bucket/key). See tests/torch_env.py."""
    from torch_env import run_on_standin as run

    return lambda source, *args, **kwargs: run(torch_python, tmp_path, source, *args, **kwargs)


@pytest.fixture
def fifo():
    """fifo(path) makes a FIFO that fails the test, instead of hanging the suite, when the code
    under test opens it to read and blocks: once the test has run a minute (a ceiling, not a pace),
    a watcher looks every second whether a reader holds the FIFO open (a writer's non-blocking
    open succeeds only then; a reader that checks first holds it for microseconds) and, if so,
    opens and closes it, which ends the blocked open with an empty read, and the test fails."""
    import threading

    watchers = []

    def make(path, ceiling: float = 60.0):
        os.mkfifo(path)
        done = threading.Event()
        blocked = []

        def watch():
            if done.wait(ceiling):
                return
            while not done.wait(1.0):
                try:
                    fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
                except OSError:  # ENXIO: no reader (or the FIFO is gone)
                    continue
                blocked.append(path)
                os.close(fd)

        thread = threading.Thread(target=watch, daemon=True)
        thread.start()
        watchers.append((done, thread, blocked))
        return path

    yield make
    for done, thread, _ in watchers:
        done.set()
        thread.join()
    hung = [str(p) for _, _, blocked in watchers for p in blocked[:1]]
    assert not hung, f"the code under test blocked reading the FIFO {', '.join(hung)}"
