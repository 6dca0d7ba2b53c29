"""What many test files share: the smallest GPU script and its migration, the settings of the
property tests, and the command line run in this process."""

from __future__ import annotations

import ast
import contextlib
import hashlib
import os
import subprocess
import threading
import warnings
from pathlib import Path
from typing import Iterator, List, Optional, Tuple, Union

from click.testing import CliRunner
from hypothesis import HealthCheck, settings

GPU = b"import torch\n\nmodel = model.cuda()\n"
NPU = b"import torch\nimport torch_npu  # noqa: F401\n\nmodel = model.npu()\n"

# Property tests, as tests/test_properties.py's: the same examples every run and no database written (a
# run's inputs are no source of swing in its time or its verdict); NPU_MIGRATE_PROPERTY_RANDOM=1 for fresh
# ones, NPU_MIGRATE_PROPERTY_EXAMPLES=1000 for a long local run.
FEW = settings(max_examples=int(os.environ.get("NPU_MIGRATE_PROPERTY_EXAMPLES", "60")), deadline=None,
               derandomize=not os.environ.get("NPU_MIGRATE_PROPERTY_RANDOM"), database=None,
               suppress_health_check=list(HealthCheck))


# How long a test waits at most for a process's event (a line printed, its end). Processes end on
# events (a signal, their last step), so this is reached only when one hangs: it is no measure of
# speed, and generous for a machine at a load of 20.
CEILING = 600


def read_until(proc: subprocess.Popen, until: Union[str, int], stream: str = "stdout",
               ceiling: float = CEILING) -> List[str]:
    """The lines a started process writes to `stream` (a text pipe): up to the first that holds
    `until` (a str; another writer's output may share its line), or the first `until` lines (an
    int). An event, read in a thread and waited for with a ceiling of minutes: a process that ends
    without writing it fails the test at once, one that never writes it (a job holding for its
    hour, a read that never returns) is killed at the ceiling; either way the test fails with what
    it wrote instead of holding the suite. What follows stays in the pipe, for `communicate()`."""
    pipe = getattr(proc, stream)
    lines: List[str] = []
    done, ended = threading.Event(), threading.Event()

    def read() -> None:  # a byte at a time from the pipe: what follows stays there for communicate()
        try:
            while True:
                line = b""
                while not line.endswith(b"\n"):
                    byte = os.read(pipe.fileno(), 1)
                    if not byte:
                        break
                    line += byte
                if not line:
                    return  # the end of the stream: not found
                lines.append(line.decode(pipe.encoding, pipe.errors).replace("\r\n", "\n"))
                if (len(lines) == until) if isinstance(until, int) else (until in lines[-1]):
                    done.set()
                    return
        finally:
            ended.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    ended.wait(ceiling)
    if done.is_set():
        return lines
    why = "its stream ended first" if ended.is_set() else f"not in {ceiling:g} s"
    proc.kill()
    reader.join(ceiling)
    other = proc.stderr if stream == "stdout" else proc.stdout
    raise AssertionError(f"the process never wrote {until!r} to {stream} ({why}); it wrote: {''.join(lines)!r}; "
                         f"{'stderr' if stream == 'stdout' else 'stdout'}: {other.read() if other else None!r}")


def invoke(args, cache_dir, env=None):
    """The command line in this process, one worker, no colour: a click Result."""
    from npu_migrate.cli import main

    full_env = {"NPU_MIGRATE_CACHE_DIR": str(cache_dir), "NO_COLOR": "1", **(env or {})}
    with rules_loaded_once():
        return CliRunner().invoke(main, [*args, "--color", "never", "-j", "1"], env=full_env)


_LOADED: dict = {}


@contextlib.contextmanager
def rules_loaded_once():
    """The command line's rule sets, built once per test process for the same rule files with the
    same bytes (building one takes half a second; the property tests run the CLI hundreds of
    times). A rule file that is not a small regular file, or a set that fails to load, goes
    through load_rules every time: those runs test the loading itself."""
    from npu_migrate import cli

    real = cli.load_rules

    def once(rule_files=(), *args, **kwargs):
        paths = [Path(f) for f in rule_files]
        if args or kwargs or not all(p.is_file() and p.stat().st_size < 1 << 20 for p in paths):
            return real(rule_files, *args, **kwargs)
        key = tuple((str(p.resolve()), hashlib.sha256(p.read_bytes()).digest()) for p in paths)
        if key not in _LOADED:
            _LOADED[key] = real(rule_files)
        return _LOADED[key]

    cli.load_rules = once
    try:
        yield
    finally:
        cli.load_rules = real


def tree_state(folder: Path) -> dict:
    """Every file under `folder`, relative path -> bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def write_migrated(script, result) -> None:
    """A migration's result on disk, as --write leaves it: the script's new text and the files
    generated beside it (the ModelArts module, the distributed helpers, launch scripts)."""
    Path(script).write_text(result.new_text, encoding="utf-8")
    for path, text in result.extra_files.items():
        Path(path).write_text(text, encoding="utf-8")


class CliResult:
    """What a run of the command line gave: the fields of subprocess.CompletedProcess the tests read."""

    def __init__(self, args, returncode: int, stdout: bytes, stderr: bytes):
        self.args, self.returncode, self.stdout, self.stderr = args, returncode, stdout, stderr

    def __repr__(self) -> str:
        return f"CliResult(args={self.args!r}, returncode={self.returncode}, stdout={self.stdout[:400]!r}, " \
               f"stderr={self.stderr[:400]!r})"


def _test_env(cwd, env) -> dict:
    """The environment of a test's run: colour decided by the run's own streams (NO_COLOR unset),
    a cache of its own beside `cwd` (a test's tmp_path: `<tmp_path>.npu-migrate-test-cache`, so
    that what a run leaves in its folder is only what it wrote there), then the test's `env`."""
    folder = Path(cwd).resolve() if cwd is not None else None
    cache = folder.with_name(folder.name + ".npu-migrate-test-cache") if folder is not None and folder.name else \
        Path(".").resolve() / ".npu-migrate-test-cache"
    return {"NO_COLOR": None, "NPU_MIGRATE_CACHE_DIR": str(cache), **(env or {})}


def cli_in_process(*args, cwd=None, input=None, env=None) -> CliResult:
    """`npu-migrate ARGS` run in this process (click's CliRunner), as `python -m npu_migrate` runs
    it: the current folder is `cwd`, stdout and stderr are separate byte streams, the exit code is
    the process's would-be one, an unexpected exception is a traceback on stderr and exit 1.

    The one difference: the default number of workers is 1 (the file runs in this process, so the
    prefilter check of conftest.py sees it); a test that passes `-j N` gets up to N forked workers
    (none when the project scan estimates little work: pipeline.workers_for).
    Signal handlers the run installs are put back afterwards."""
    import signal
    import traceback

    from npu_migrate import runner
    from npu_migrate.cli import main

    full_env = _test_env(cwd, env)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    before, default_jobs = os.getcwd(), runner.default_jobs
    runner.default_jobs = lambda: 1
    try:
        if cwd is not None:
            os.chdir(cwd)
        with rules_loaded_once():
            result = CliRunner().invoke(main, [str(a) for a in args], input=input, env=full_env,
                                        prog_name="npu-migrate")
    finally:
        runner.default_jobs = default_jobs
        os.chdir(before)
        for s, h in handlers.items():
            signal.signal(s, h)
    stderr = result.stderr_bytes or b""
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(*result.exc_info)).encode()
    return CliResult(args, result.exit_code, result.stdout_bytes, stderr)


def cli_process(*args, cwd=None, input=None, env=None, timeout=600) -> CliResult:
    """`python -m npu_migrate ARGS` in a process of its own: for what only a process shows
    (signals, the interpreter's own exit, the encodings of real streams, worker processes)."""
    import subprocess
    import sys

    full_env = {k: v for k, v in {**os.environ, **_test_env(cwd, env)}.items() if v is not None}
    r = subprocess.run([sys.executable, "-m", "npu_migrate", *args], cwd=cwd, input=input, capture_output=True,
                       env=full_env, timeout=timeout)
    return CliResult(args, r.returncode, r.stdout, r.stderr)


# Thirty small functions after the text: partial.py leaves them out, so a migration of the padded
# text is parsed partially (the default) where a whole parse is the reference.
PARTIAL_PADDING = "".join(f"\n\ndef unrelated_{i}(x):\n    y = x + {i}\n    return y\n" for i in range(30))


def assert_partial_as_whole(text: str, path: str = "m.py", options=None):
    """Migrates `text` + PARTIAL_PADDING parsed partially and whole: the same new text and findings
    (code, place, message). Returns the partial result, for what the caller asserts of it."""
    from npu_migrate.dispatch import migrate_source
    from npu_migrate.options import Options

    padded = text + PARTIAL_PADDING
    partial = migrate_source(padded, path, options or Options())
    whole = migrate_source(padded, path, options or Options(), partial=False)
    assert (partial.new_text, [(f.code, f.span, f.message) for f in partial.findings]) == (
        whole.new_text, [(f.code, f.span, f.message) for f in whole.findings])
    return partial


def repository_python_texts() -> Iterator[Tuple[Path, str]]:
    """(path, text) of every .py file under fixtures/ and tests/, in order: the inputs the
    equivalence tests of a text scan against Python's tree run on."""
    root = Path(__file__).resolve().parent.parent
    for path in sorted([*root.glob("fixtures/**/*.py"), *root.glob("tests/**/*.py")]):
        yield path, path.read_text(encoding="utf-8", errors="replace")


def python_tree(text: str) -> Optional[ast.Module]:
    """Python's tree of `text`, or None where Python cannot read it (the scans' answers are
    compared only where there is a tree to compare with)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return None
