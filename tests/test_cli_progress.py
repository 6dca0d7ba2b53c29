"""Progress and verbosity: a bar on a terminal for long runs only, --quiet, --verbose,
and a lean start-up (rich and black are not imported for a one-file run)."""

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from npu_migrate.progress import MIN_FILES

GPU = b"import torch\n\nmodel = model.cuda()\n"


def many_files(root: Path, n: int) -> None:
    for i in range(n):
        (root / f"m{i:03d}.py").write_bytes(GPU)


def run_with_stderr_on_terminal(args, cwd):
    """(exit code, stdout, what the terminal on stderr got)."""
    env = dict(os.environ, TERM="xterm-256color", COLUMNS="100")
    env.pop("NO_COLOR", None)
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "npu_migrate", *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    out = proc.stdout.read()
    proc.stdout.close()
    return proc.wait(), out, b"".join(chunks).decode("utf-8", "replace")


@pytest.mark.slow
def test_progress_bar_on_a_terminal_for_long_runs(tmp_path):
    many_files(tmp_path, MIN_FILES + 5)
    code, out, term = run_with_stderr_on_terminal([".", "-j", "1"], tmp_path)
    assert code == 0
    assert "migrating" in term and f"{MIN_FILES + 5}/{MIN_FILES + 5}" in term
    # the report on stdout is untouched by the bar
    assert out.decode().startswith(f"{MIN_FILES + 5} files scanned")


@pytest.mark.slow
def test_no_bar_for_short_runs_or_when_quiet(tmp_path):
    many_files(tmp_path, MIN_FILES - 1)
    code, _, term = run_with_stderr_on_terminal([".", "-j", "1"], tmp_path)
    assert code == 0 and term == ""
    many_files(tmp_path, MIN_FILES + 5)
    code, _, term = run_with_stderr_on_terminal([".", "-j", "1", "-q"], tmp_path)
    assert code == 0 and term == ""


def test_nothing_animated_when_not_a_terminal(tmp_path, run_cli):
    many_files(tmp_path, MIN_FILES + 5)
    r = run_cli(".", "-j", "1", cwd=tmp_path)
    assert r.returncode == 0 and r.stderr == b""
    assert b"\x1b[" not in r.stdout and b"\r" not in r.stdout


def test_quiet_prints_errors_only(tmp_path, run_cli):
    (tmp_path / "a.py").write_bytes(GPU)
    (tmp_path / "b.py").write_bytes(b"import torch\nprint 'py2'\nx = t.cuda()\n")
    r = run_cli(".", "--write", "-q", cwd=tmp_path)
    assert r.returncode == 2
    lines = r.stdout.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("b.py: cannot parse: ")
    assert r.stderr == b""
    assert run_cli("a.py", "-q", "-v", cwd=tmp_path).returncode == 2


def test_verbose_prints_each_edit(tmp_path, run_cli):
    (tmp_path / "a.py").write_bytes(GPU)
    r = run_cli("a.py", "-v", cwd=tmp_path)
    assert r.stdout.decode().splitlines()[:2] == [
        "a.py:2:1: NPU108 added `import torch_npu`: it registers the NPU device with PyTorch",
        "a.py:3:15: NPU101 `.cuda()` -> `.npu()`: move to the NPU",
    ]


@pytest.mark.slow
def test_one_file_run_does_not_import_rich_or_black(tmp_path):
    (tmp_path / "a.py").write_bytes(GPU)
    code = (
        "import sys\n"
        "from npu_migrate.cli import main\n"
        "try:\n"
        "    main(['a.py', '--diff'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = sorted(m for m in ('rich', 'black', 'pathspec') if m in sys.modules)\n"
        "print('HEAVY', heavy, file=sys.stderr)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert b"+model = model.npu()" in r.stdout.encode()
    # none of them (pathspec: a test dependency only; discovery.GlobSpec, tests/test_discovery.py)
    assert "HEAVY []" in r.stderr.splitlines(), r.stderr
