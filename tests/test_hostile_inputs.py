"""Hostile inputs and environments: whatever a run is given -- broken or enormous files, odd
encodings and names, missing permissions, a full disk, booby-trapped code, symlinks pointing out
-- each problem is one clear line and an exit code, a file that cannot be migrated is left byte for
byte untouched and never affects another, the code being migrated is never run nor imported, and
nothing is ever written outside the place asked for.

Most input cases share one tree and one `--write` run (a subprocess, as a user runs it); the cases
that need their own set-up (read-only, changed on disk, 10 MB, 10,000 files, symlink loops) have
their own tests. The integrity cases are property tests where they fit (any coding cookie).
"""

from __future__ import annotations

import ast
import csv
import encodings.aliases
import json
import os
import re
import stat
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import FEW, invoke
from hypothesis import given
from hypothesis import strategies as st

from npu_migrate import dispatch
from npu_migrate import runner as runner_module
from npu_migrate.cli import main
from npu_migrate.discovery import FileFilter
from npu_migrate.dispatch import migrate_source
from npu_migrate.modelarts import render_boot
from npu_migrate.output_dir import write_tree
from npu_migrate.safe_parse import MAX_PARSE_CHARS
from npu_migrate.source import SourceError, decode_python, read_source, write_source

ROOT = Path(__file__).resolve().parent.parent

GPU = b"import torch\n\nmodel = model.cuda()\n"
NPU = b"import torch\nimport torch_npu  # noqa: F401\n\nmodel = model.npu()\n"


def python_error(source: bytes) -> str:
    """Python's own syntax error for `source`, as the report words it."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(source)
    except SyntaxError as exc:
        return f"line {exc.lineno}:{exc.offset}: {exc.msg}"
    raise AssertionError("expected a syntax error")


GBK_SOURCE = "# -*- coding: gbk -*-\n# 把模型放到显卡上 (cuda)\nimport torch\nmodel = model.cuda()  # 移到GPU\ns = '显卡 cuda'\n"
GB18030_SOURCE = "# coding: gb18030\n# 𠀀 is outside GBK: 4 bytes in GB18030\nimport torch\nx = t.cuda()\n"
LATIN1_SOURCE = "# -*- coding: latin-1 -*-\n# café\nimport torch\nx = t.cuda()  # déjà\n"
NOT_PYTHON = b"Hello! This is a README, not Python {\n  see: https://example.com\n}\nmodel.cuda()\n"
TRAILING_BACKSLASH = b"import torch\nx = a.cuda() + \\\n"
DEEP = {
    "deep_parens.py": "import torch\nx = " + "(" * 3000 + "a.cuda()" + ")" * 3000 + "\n",
    "deep_lists.py": "import torch\nx = " + "[" * 250 + "a.cuda()" + "]" * 250 + "\n",
    "deep_chain.py": "import torch\nx = a.cuda()" + " + a" * 20000 + "\n",
    "deep_attributes.py": "import torch\nx = a.cuda()" + ".b" * 5000 + "\n",
    "deep_blocks.py": "import torch\n" + "".join("    " * i + "if x:\n" for i in range(120)) + "    " * 120 + "a.cuda()\n",
}

# name -> (content, expected content after --write). Files that migrate.
MIGRATED = {
    "gbk.py": (GBK_SOURCE.encode("gbk"), GBK_SOURCE.replace("import torch\n", "import torch\nimport torch_npu  # noqa: F401\n")
               .replace("model.cuda()", "model.npu()").encode("gbk")),
    "gb18030.py": (GB18030_SOURCE.encode("gb18030"),
                   GB18030_SOURCE.replace("import torch\n", "import torch\nimport torch_npu  # noqa: F401\n")
                   .replace("t.cuda()", "t.npu()").encode("gb18030")),
    "latin1.py": (LATIN1_SOURCE.encode("latin-1"),
                  LATIN1_SOURCE.replace("import torch\n", "import torch\nimport torch_npu  # noqa: F401\n")
                  .replace("t.cuda()", "t.npu()").encode("latin-1")),
    "bom.py": (b"\xef\xbb\xbf" + GPU, b"\xef\xbb\xbf" + NPU),
    "crlf.py": (GPU.replace(b"\n", b"\r\n"), NPU.replace(b"\n", b"\r\n")),
    "mixed_newlines.py": (b"import torch\r\n\nmodel = model.cuda()\r\ny = 1\n",
                          b"import torch\r\nimport torch_npu  # noqa: F401\r\n\nmodel = model.npu()\r\ny = 1\n"),
    "tabs.py": (b"import torch\nif ok:\n\tmodel = model.cuda()\n\tname = 'cuda'\n",
                b"import torch\nimport torch_npu  # noqa: F401\nif ok:\n\tmodel = model.npu()\n\tname = 'cuda'\n"),
    "continued.py": (b"import torch\nx = a + \\\n    b.cuda()\n",
                     b"import torch\nimport torch_npu  # noqa: F401\nx = a + \\\n    b.npu()\n"),
    "no_final_newline.py": (b"import torch\nx = a.cuda()", b"import torch\nimport torch_npu  # noqa: F401\nx = a.npu()"),
}
# name -> content. Files with nothing to do: no message, not touched.
UNCHANGED = {
    "empty.py": b"",
    "only_comments.py": b"# move the model to cuda\n# torch.cuda.synchronize()\n",
    "only_blank.py": b"\n\n   \n",
}
# name -> (content, the message after "name: "). Files that cannot be migrated.
REFUSED = {
    "not_python.py": (NOT_PYTHON, f"cannot parse: {python_error(NOT_PYTHON)}"),
    "binary.py": (bytes(range(256)) * 8, "binary file (contains NUL bytes)"),
    "binary_no_nul.py": (bytes(range(128, 256)) * 8,
                         "cannot decode as utf-8 (line 1, byte b'\\x80'); declare the file's encoding with a "
                         "coding cookie such as `# -*- coding: gbk -*-`"),
    "bad_utf8.py": (b"import torch\nx = 'caf\xe9'\nmodel.cuda()\n",
                    "cannot decode as utf-8 (line 2, byte b'\\xe9'); declare the file's encoding with a "
                    "coding cookie such as `# -*- coding: gbk -*-`"),
    "unknown_cookie.py": (b"# -*- coding: klingon -*-\nimport torch\nx.cuda()\n",
                          "bad encoding declaration: unknown encoding: klingon"),
    "trailing_backslash.py": (TRAILING_BACKSLASH, f"cannot parse: {python_error(TRAILING_BACKSLASH)}"),
    # Where libcst 1.9 would not give the text back as it was, nothing is written.
    "cr_only.py": (b"import torch\rx = a.cuda()\r",
                   "cannot migrate faithfully: libcst would change line 2 besides the edits "
                   "(lone `\\r` line endings); file left unchanged"),
    # (The comments hold `.cuda()`, so libcst parses them: lines that cannot match a rule are
    # copied as they are, see partial.py, and then this file is migrated faithfully.)
    "uneven_trailing_comments.py": (b"import torch\nx = t.cuda()\n  # a.cuda()\n    # b\n",
                                    "cannot migrate faithfully: libcst would change line 3 besides the edits; "
                                    "file left unchanged"),
    "form_feed.py": (b"import torch\nx = 1\n\x0cy = t.cuda()\n",
                     "cannot migrate faithfully: libcst would change line 3 besides the edits; file left unchanged"),
}


def test_hostile_zoo_in_one_run(tmp_path, run_cli):
    for name, (before, _after) in MIGRATED.items():
        (tmp_path / name).write_bytes(before)
    for name, data in UNCHANGED.items():
        (tmp_path / name).write_bytes(data)
    for name, (data, _message) in REFUSED.items():
        (tmp_path / name).write_bytes(data)
    for name, text in DEEP.items():
        (tmp_path / name).write_text(text)

    r = run_cli(".", "--write", "--color", "never", cwd=tmp_path)

    assert r.returncode == 2, r.stderr
    assert b"Traceback" not in r.stderr
    lines = r.stdout.decode("utf-8").splitlines()
    for name, (_data, message) in REFUSED.items():
        assert f"{name}: {message}" in lines
    for name in DEEP:
        # The reason in brackets is the Python version's own wording.
        (message,) = [line for line in lines if line.startswith(f"{name}: ")]
        assert message == f"{name}: cannot parse: too deeply nested" or message.startswith(
            f"{name}: cannot parse: too deeply nested ("), message
    n = len(MIGRATED) + len(UNCHANGED) + len(REFUSED) + len(DEEP)
    failed = len(REFUSED) + len(DEEP)
    assert f"{n} files scanned, {len(MIGRATED)} migrated, {len(UNCHANGED)} unchanged, {failed} failed." in lines
    for name, (_before, after) in MIGRATED.items():
        assert (tmp_path / name).read_bytes() == after, name
    for name, data in UNCHANGED.items():
        assert (tmp_path / name).read_bytes() == data, name
    for name, (data, _message) in REFUSED.items():
        assert (tmp_path / name).read_bytes() == data, name
    for name, text in DEEP.items():
        assert (tmp_path / name).read_text() == text, name
    left = set(os.listdir(tmp_path))
    assert left == {*MIGRATED, *UNCHANGED, *REFUSED, *DEEP}  # nothing new, no temporary file


@pytest.mark.parametrize("name", sorted(DEEP))
def test_deep_nesting_is_refused_before_libcst_can_crash(name):
    # In-process: a native stack overflow here would kill pytest itself.
    result = migrate_source(DEEP[name], name)
    assert result.error is not None and result.error.startswith("cannot parse: too deeply nested"), result.error
    assert result.new_text is None


@pytest.mark.slow
def test_recursion_in_the_transformer_is_a_message_not_a_crash():
    # Nesting Python accepts, with the recursion limit of a deeper program's worth of frames
    # already used up: the codemods run out of stack, the file is reported, the run goes on.
    code = (
        "import sys\nfrom npu_migrate.dispatch import migrate_source\nsys.setrecursionlimit(150)\n"
        "text = 'import torch\\nx = ' + '[' * 60 + 'a.cuda()' + ']' * 60 + '\\n'\n"
        "r = migrate_source(text, 'x.py')\nprint(repr(r.error), r.new_text is None)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "'cannot migrate: too deeply nested' True\n"


def test_nesting_that_python_accepts_still_migrates():
    text = "import torch\nx = a.cuda()" + " + a" * 150 + "\n"
    result = migrate_source(text, "chain.py")
    assert result.error is None
    assert result.new_text == text.replace("import torch\n", "import torch\nimport torch_npu  # noqa: F401\n").replace(
        "a.cuda()", "a.npu()")


@pytest.mark.parametrize("partial", [True, False])
def test_a_migrated_text_that_does_not_parse_is_never_written(partial, monkeypatch):
    # A pass that breaks the code (here: it adds a line `class`) must leave the file unchanged
    # with an error, whether libcst parsed it whole or in part (the verify parse runs after
    # the file's trees are let go: engine._verified).
    import libcst as cst

    from npu_migrate import engine

    text = "import torch\n\n\ndef f(x):\n    return x + 1\n\n\ny = f(2)\nx = torch.ones(2).cuda()\n"
    def broken(step):
        def run(module, ctx):
            new = step.run(module, ctx)
            return new.with_changes(body=[*new.body, cst.SimpleStatementLine([cst.Expr(cst.Name("class"))])])
        return engine.PASSES[0].__class__(step.name, step.wanted, run)

    good = migrate_source(text, "a.py", partial=partial)
    assert good.error is None and good.new_text is not None and "x = torch.ones(2).npu()" in good.new_text
    # (partially parsed: Python parses the migrated partial text, not the whole: engine._verified)
    assert good.work.get("partial", 0) == int(partial)
    assert (good.work.get("verify_partial", 0), good.work.get("verify", 0)) == ((1, 0) if partial else (0, 1))
    monkeypatch.setattr(engine, "PASSES", tuple(broken(s) if s.name == "torch" else s for s in engine.PASSES))
    result = migrate_source(text, "a.py", partial=partial)
    assert result.new_text is None and result.edits == []
    assert result.error == "internal error: the migrated code does not parse; file left unchanged"
    # (the migrated partial text does not parse either: then the whole text decides)
    assert result.work.get("partial", 0) == int(partial)
    assert (result.work.get("verify_partial", 0), result.work["verify"]) == (int(partial), 1)


def test_ten_megabyte_file(tmp_path, run_cli):
    filler = b"x = [" + b"1, " * 100 + b"]\n"
    big = GPU + filler * (10_000_000 // len(filler))
    clean = b"import torch\n" + filler * (10_000_000 // len(filler))
    (tmp_path / "big.py").write_bytes(big)
    (tmp_path / "big_clean.py").write_bytes(clean)
    (tmp_path / "small.py").write_bytes(GPU)

    r = run_cli(".", "--write", "--color", "never", cwd=tmp_path)

    assert r.returncode == 2, r.stderr
    lines = r.stdout.decode().splitlines()
    assert (f"big.py: too large to migrate ({len(big) / 1e6:.1f} million characters; the limit is "
            f"{MAX_PARSE_CHARS / 1e6:.0f} million)") in lines
    assert "3 files scanned, 1 migrated, 1 unchanged, 1 failed." in lines
    assert (tmp_path / "big.py").read_bytes() == big
    assert (tmp_path / "big_clean.py").read_bytes() == clean
    assert (tmp_path / "small.py").read_bytes() == NPU


def test_read_only_file_is_reported_and_not_changed(tmp_path, run_cli):
    # Tests run as root, where os.access says every file is writable: the mode bits decide.
    ro = tmp_path / "ro.py"
    ro.write_bytes(GPU)
    ro.chmod(0o444)
    (tmp_path / "rw.py").write_bytes(GPU)

    r = run_cli(".", "--write", "--color", "never", cwd=tmp_path)

    assert r.returncode == 2
    lines = r.stdout.decode().splitlines()
    assert "ro.py: read-only file, not changed" in lines
    assert "2 files scanned, 1 migrated, 0 unchanged, 1 failed." in lines
    # The edits line counts both files' edits; it says the read-only file's half was not written.
    (edits_line,) = [line for line in lines if " edits: " in line]
    total = int(edits_line.split()[0])
    assert edits_line.endswith(f" ({total // 2} of them in failed files, not written)"), edits_line
    assert ro.read_bytes() == GPU
    assert stat.S_IMODE(ro.stat().st_mode) == 0o444
    assert (tmp_path / "rw.py").read_bytes() == NPU


def test_file_changed_on_disk_is_not_overwritten(tmp_path):
    path = tmp_path / "train.py"
    path.write_bytes(GPU)
    source = read_source(str(path))
    path.write_bytes(GPU + b"# edited by the user meanwhile\n")
    with pytest.raises(SourceError, match=r"^file changed on disk while npu-migrate ran, not overwritten$"):
        write_source(source, NPU.decode())
    assert path.read_bytes() == GPU + b"# edited by the user meanwhile\n"
    assert os.listdir(tmp_path) == ["train.py"]


def test_file_changed_during_a_cli_run_is_reported(tmp_path, monkeypatch):
    edited = GPU + b"# edited by the user meanwhile\n"
    (tmp_path / "a.py").write_bytes(GPU)
    (tmp_path / "b.py").write_bytes(GPU)
    real = dispatch.migrate_source

    def migrate_while_the_user_edits(text, path, *args, **kwargs):
        if path.endswith("a.py"):
            Path(path).write_bytes(edited)
        return real(text, path, *args, **kwargs)

    # The runner calls the engine between reading and writing (-j 1: in this process).
    monkeypatch.setattr(dispatch, "migrate_source", migrate_while_the_user_edits)
    monkeypatch.setattr(runner_module, "migrate_source", migrate_while_the_user_edits, raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NPU_MIGRATE_CACHE_DIR", str(tmp_path / ".cache"))
    result = CliRunner().invoke(main, [".", "--write", "-j", "1", "--color", "never"])

    assert result.exit_code == 2, result.output
    assert "a.py: file changed on disk while npu-migrate ran, not overwritten" in result.output.splitlines()
    assert (tmp_path / "a.py").read_bytes() == edited
    assert (tmp_path / "b.py").read_bytes() == NPU


def test_symlink_loops(tmp_path, run_cli):
    (tmp_path / "self.py").symlink_to("self.py")
    (tmp_path / "a.py").symlink_to("b.py")
    (tmp_path / "b.py").symlink_to("a.py")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "up").symlink_to("..")
    (tmp_path / "sub" / "train.py").write_bytes(GPU)

    walked = run_cli(".", "--write", "--color", "never", cwd=tmp_path)
    named = run_cli("self.py", "a.py", "--color", "never", cwd=tmp_path)

    assert walked.returncode in (0, 2) and b"Traceback" not in walked.stderr
    assert (tmp_path / "sub" / "train.py").read_bytes() == NPU
    assert named.returncode == 2
    lines = named.stdout.decode().splitlines()
    assert "self.py: cannot read: Too many levels of symbolic links" in lines
    assert "a.py: cannot read: Too many levels of symbolic links" in lines
    assert os.readlink(tmp_path / "self.py") == "self.py"


@pytest.mark.slow
def test_directory_with_ten_thousand_files(memory_tmp_path, run_cli):
    tmp_path = memory_tmp_path  # (30,000 file creations: in memory, conftest.py)
    tree = tmp_path / "many"
    tree.mkdir()
    # (one text for the 9,990 files without device code: conftest's prefilter check runs the engine
    # once per distinct skipped text, which made this test 3x as long)
    for i in range(10_000):
        (tree / f"m{i:05d}.py").write_bytes(GPU if i % 1000 == 0 else b"x = 1\n")

    r = run_cli("many", "--write", "--color", "never", cwd=tmp_path)

    assert r.returncode == 0, r.stderr
    assert "10000 files scanned, 10 migrated, 9990 unchanged, 0 failed." in r.stdout.decode().splitlines()
    for i in range(0, 10_000, 1000):
        assert (tree / f"m{i:05d}.py").read_bytes() == NPU
    assert (tree / "m00001.py").read_bytes() == b"x = 1\n"
    assert len(os.listdir(tree)) == 10_000


def test_path_with_spaces_and_non_ascii(tmp_path, run_cli):
    folder = tmp_path / "my project" / "训练 脚本"
    folder.mkdir(parents=True)
    target = folder / "train ü.py"
    target.write_bytes(GPU)

    r = run_cli("my project", "--write", "--verbose", "--color", "never", cwd=tmp_path)

    assert r.returncode == 0, r.stderr
    out = r.stdout.decode("utf-8")
    assert f"{Path('my project', '训练 脚本', 'train ü.py')}:3:15: NPU101" in out
    assert target.read_bytes() == NPU


def test_fifo_given_by_name_does_not_hang(tmp_path, run_cli, fifo):
    fifo(tmp_path / "pipe.py")
    (tmp_path / "ok.py").write_bytes(GPU)

    r = run_cli("pipe.py", "ok.py", "--write", "--color", "never", cwd=tmp_path)

    assert r.returncode == 2
    assert "pipe.py: not a regular file" in r.stdout.decode().splitlines()
    assert (tmp_path / "ok.py").read_bytes() == NPU


def test_too_large_to_read(tmp_path, monkeypatch):
    from npu_migrate import source as source_module

    monkeypatch.setattr(source_module, "MAX_READ_BYTES", 1024 * 1024)
    path = tmp_path / "data.py"
    path.write_bytes(b"x = 1\n" * 300_000)
    with pytest.raises(SourceError, match=r"^too large to read \(1\.7 MiB; the limit is 1 MiB\)$"):
        read_source(str(path))


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a file to another user")
def test_root_migrating_a_users_file_keeps_its_owner(tmp_path):
    path = tmp_path / "train.py"
    path.write_bytes(GPU)
    os.chown(path, 1234, 5678)
    write_source(read_source(str(path)), NPU.decode())
    st = path.stat()
    assert (st.st_uid, st.st_gid) == (1234, 5678)
    assert path.read_bytes() == NPU


def test_a_failing_write_is_a_message_not_a_crash(tmp_path, monkeypatch):
    import errno
    import tempfile

    def disk_full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    path = tmp_path / "train.py"
    path.write_bytes(GPU)
    source = read_source(str(path))
    monkeypatch.setattr(tempfile, "mkstemp", disk_full)
    with pytest.raises(SourceError, match=r"^cannot write: No space left on device$"):
        write_source(source, NPU.decode())
    assert path.read_bytes() == GPU


# ------------------------------------------------------------------------------ issue 30: hangs and unbounded reads


def _run(*args, cwd, stdin=subprocess.DEVNULL, env=None):
    """A real process (FIFOs and stdin need one); the timeout only turns a hang into a failure."""
    full_env = {**os.environ, "NPU_MIGRATE_CACHE_DIR": str(Path(cwd) / ".cache"), "NO_COLOR": "1", **(env or {})}
    return subprocess.run([sys.executable, "-m", "npu_migrate", *args, "--color", "never"], cwd=cwd, stdin=stdin,
                          capture_output=True, env=full_env, timeout=300)


@pytest.mark.slow
def test_a_fifo_without_a_suffix_named_on_the_command_line_does_not_hang(tmp_path):
    """a file without a suffix is opened to look for a shebang; a FIFO blocked that open."""
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "ok.py").write_bytes(GPU)

    r = _run("fifo", "ok.py", "--write", cwd=tmp_path)

    assert r.returncode == 2, r.stderr
    assert "fifo: not a regular file" in r.stdout.decode().splitlines()
    assert (tmp_path / "ok.py").read_bytes() == NPU


@pytest.mark.slow
@pytest.mark.parametrize("where", [".gitignore", ".git/info/exclude", "sub/.gitignore"])
@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_an_ignore_file_that_never_ends_fails_its_folder_and_does_not_hang(tmp_path, where, kind):
    """a .gitignore or .git/info/exclude that is a FIFO hung the walk; one linked to
    /dev/zero was read without limit. Its folder is not walked (what it would exclude is unknown),
    one line says why, the run exits 2, and the other folders are migrated."""
    project = tmp_path / "proj"
    (project / ".git" / "info").mkdir(parents=True)
    (project / "sub").mkdir()
    (project / "train.py").write_bytes(GPU)
    (project / "sub" / "train.py").write_bytes(GPU)
    bad = project / where
    if kind == "fifo":
        os.mkfifo(bad)
    else:
        bad.symlink_to("/dev/zero")
    why = "not a regular file"
    folder = "proj/sub" if where.startswith("sub/") else "proj"
    name = os.path.join(*where.split("/")[1 if where.startswith("sub/") else 0:])

    r = _run("proj", "--write", cwd=tmp_path)

    assert r.returncode == 2, r.stderr
    assert f"{folder}: cannot read {name}: {why}" in r.stdout.decode().splitlines(), r.stdout.decode()
    migrated = {p: (project / p).read_bytes() == NPU for p in ("train.py", "sub/train.py")}
    assert migrated == ({"train.py": True, "sub/train.py": False} if folder == "proj/sub"
                        else {"train.py": False, "sub/train.py": False})


@pytest.mark.slow
def test_stdin_is_bounded_like_files(tmp_path):
    """`npu-migrate - < /dev/zero` read without end (MemoryError)."""
    with open("/dev/zero", "rb") as zero:
        r = _run("-", cwd=tmp_path, stdin=zero)

    assert r.returncode == 2
    assert r.stdout == b""
    assert r.stderr.decode() == "stdin.py: too large to read (over the limit of 64 MiB)\n"


def test_diff_of_a_long_file_takes_work_linear_in_its_length(monkeypatch):
    """--diff of a 1.9 MB file took over 6 CPU-minutes against 35 s for --check:
    difflib's matching grows with the product of the lengths. Counted, not timed: the lines
    difflib may compare (the product of the ranges of every longest-match search) stay within a
    small factor of the file's length, and the patch gives the migrated text back."""
    import difflib
    import random

    from npu_migrate.diffs import unified_diff

    work = [0]
    real = difflib.SequenceMatcher.find_longest_match

    def counted(self, alo=0, ahi=None, blo=0, bhi=None):
        ahi, bhi = len(self.a) if ahi is None else ahi, len(self.b) if bhi is None else bhi
        work[0] += (ahi - alo) * (bhi - blo)
        return real(self, alo, ahi, blo, bhi)

    monkeypatch.setattr(difflib.SequenceMatcher, "find_longest_match", counted)
    pick = random.Random(30).choice
    lines = [pick(["\n", "    x = y\n", "    return x\n", f"    t{k} = t.cuda()\n", f"# {k}\n", "pass\n"])
             for k in range(40_000)]
    before = "".join(lines)
    after = before.replace(".cuda()", ".npu()")

    diff = unified_diff(before, after, "train.py")

    assert work[0] <= 10 * len(lines), work[0]
    assert diff.count("\n+    t") == before.count(".cuda()") > 5000
    assert _apply(before, diff) == after


class _CountedLine(str):
    """A line that counts how often it is compared (the work of matching lines)."""

    compared = 0

    def __eq__(self, other):
        _CountedLine.compared += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


@pytest.mark.parametrize("kind", ["some lines unique", "no line unique"])
def test_matching_the_lines_of_a_long_file_takes_comparisons_linear_in_its_length(kind, monkeypatch):
    """Every line comparison counted, and the ranges difflib searches, also where no line occurs
    once on each side (a file of repeated lines, where difflib took 15 CPU-s for 1.4 MB): at most
    a small number per line, and the diff is minimal (one -/+ pair per changed line)."""
    import difflib
    import random

    searched = [0]
    real = difflib.SequenceMatcher.find_longest_match

    def counted(self, alo=0, ahi=None, blo=0, bhi=None):
        ahi, bhi = len(self.a) if ahi is None else ahi, len(self.b) if bhi is None else bhi
        searched[0] += (ahi - alo) * (bhi - blo)
        return real(self, alo, ahi, blo, bhi)

    monkeypatch.setattr(difflib.SequenceMatcher, "find_longest_match", counted)

    from npu_migrate.diffs import matching_blocks, unified_diff

    rnd = random.Random(30)
    if kind == "some lines unique":
        lines = [rnd.choice(["\n", "    x = y\n", f"    t{k} = t.cuda()\n", f"# {k}\n"]) for k in range(30_000)]
    else:
        templates = [f"    v{i} = layer{i}(x){'.cuda()' if i % 3 == 0 else ''}\n" for i in range(150)]
        lines = [rnd.choice(templates) for _ in range(30_000)]
    before = "".join(lines)
    after = before.replace(".cuda()", ".npu()")
    a = [_CountedLine(line) for line in before.splitlines(True)]
    b = [_CountedLine(line) for line in after.splitlines(True)]
    _CountedLine.compared = 0

    blocks = matching_blocks(a, b)

    assert _CountedLine.compared <= 40 * len(lines), _CountedLine.compared
    assert searched[0] <= 10 * len(lines), searched[0]
    assert sum(n for _i, _j, n in blocks) == len(lines) - before.count(".cuda()")
    diff = unified_diff(before, after, "train.py")
    assert sum(1 for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")) == \
        before.count(".cuda()")
    assert _apply(before, diff) == after


def test_the_diff_of_a_short_file_is_difflibs(tmp_path):
    import difflib

    from npu_migrate.diffs import unified_diff

    before = "".join(f"x{k % 7} = t.cuda()\n" if k % 5 == 0 else f"y = {k % 3}\n" for k in range(600))
    after = before.replace("x3 = t.cuda()\n", "").replace(".cuda()", ".npu()") + "z = 1"
    expected = "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
                       for line in difflib.unified_diff(before.splitlines(True), after.splitlines(True),
                                                        "a/t.py", "b/t.py"))
    assert unified_diff(before, after, "t.py") == expected


def _apply(before: str, diff: str) -> str:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "train.py").write_text(before)
        subprocess.run(["git", "apply", "-"], cwd=tmp, input=diff.encode(), check=True, capture_output=True)
        return Path(tmp, "train.py").read_text()


def test_a_pyproject_toml_that_is_not_utf8_is_told_so_in_toml_terms(tmp_path):
    """it was told to add a Python coding cookie (TOML has none)."""
    (tmp_path / "pyproject.toml").write_bytes(b'[project]\nname = "x"\n# caf\xe9\ndependencies = ["torch"]\n')

    r = CliRunner().invoke(main, [str(tmp_path / "pyproject.toml"), "--color", "never", "--no-cache"])

    assert r.exit_code == 2
    assert (f"{tmp_path / 'pyproject.toml'}: not UTF-8 (line 3, byte b'\\xe9'), as TOML must be; save it as UTF-8"
            in r.output.splitlines()), r.output


@pytest.mark.parametrize("size, text", [(4 * 2**20, "4 MiB"), (4_300_000, "4.1 MiB"), (1536, "1.5 KiB"),
                                        (1023, "1023 bytes"), (2**30, "1 GiB")])
def test_sizes_are_said_in_binary_units_with_their_names(size, text):
    from npu_migrate.source import size_text

    assert size_text(size) == text


def test_a_rule_file_over_the_limit_says_its_size_in_the_right_unit(tmp_path):
    """a 4.1 MiB rule file was refused with "4 MB; the limit is 4 MB"."""
    rules = tmp_path / "big.toml"
    rules.write_bytes(b"#" * 4_300_000)
    (tmp_path / "train.py").write_bytes(GPU)

    r = CliRunner().invoke(main, [str(tmp_path / "train.py"), "--rules", str(rules), "--no-cache"])

    assert r.exit_code == 2
    assert f"{rules}: cannot read rule file: too large to read (4.1 MiB; the limit is 4 MiB)" in r.output, r.output


def test_hostile_nesting_in_a_script_and_a_huge_number_in_a_notebook_are_clear_messages(tmp_path):
    """"internal error: RecursionError" for a shell script with 250 nested `$(…)`,
    "internal error: ValueError" for a notebook holding a 5,000-digit integer. Each is one clear
    line, the file is left as it was, the other files are migrated, exit 2."""
    deep = "#!/bin/bash\necho " + "$(echo " * 250 + "x" + ")" * 250 + "\n"
    (tmp_path / "deep.sh").write_text(deep)
    notebook = ('{"cells": [{"cell_type": "code", "execution_count": ' + "9" * 5000 + ', "metadata": {}, '
                '"outputs": [], "source": ["import torch\\n", "x = x.cuda()\\n"]}], "metadata": {}, '
                '"nbformat": 4, "nbformat_minor": 5}\n')
    (tmp_path / "big.ipynb").write_text(notebook)
    (tmp_path / "train.py").write_bytes(GPU)

    r = CliRunner().invoke(main, [str(tmp_path), "--write", "--no-cache", "-j", "1", "--color", "never"])

    assert r.exit_code == 2, r.output
    lines = r.output.splitlines()
    assert f"{tmp_path / 'deep.sh'}: cannot migrate: too deeply nested" in lines, r.output
    if hasattr(sys, "get_int_max_str_digits"):  # (Pythons before the limit read the number)
        assert (f"{tmp_path / 'big.ipynb'}: invalid notebook: not JSON Python reads (Exceeds the limit (4300 "
                "digits) for integer string conversion)") in lines, r.output
        assert (tmp_path / "big.ipynb").read_text() == notebook
    assert "internal error" not in r.output
    assert (tmp_path / "deep.sh").read_text() == deep
    assert (tmp_path / "train.py").read_bytes() == NPU


# ------------------------------------------------------------------------------ hostile environments: encodings, permissions, full disks, long names


CODECS = sorted({*encodings.aliases.aliases.values(), *encodings.aliases.aliases, "unicode_escape",
                 "raw_unicode_escape", "utf-7", "hex", "base64", "rot13", "zlib", "bz2", "quopri", "uu",
                 "undefined", "punycode", "idna", "utf-8-sig", "klingon"})


@FEW
@given(st.sampled_from(CODECS), st.text(max_size=30))
def test_any_coding_cookie_reads_as_python_reads_it_or_is_refused_in_one_line(codec, value):
    body = f"x = {value!r}\n"
    head = f"# -*- coding: {codec} -*-\n"
    try:
        data = head.encode("ascii") + body.encode(codec)
    except Exception:
        data = (head + f"x = {value.encode('unicode_escape').decode('ascii')!r}\n").encode("ascii")
    try:
        text, encoding = decode_python(data)
    except SourceError as exc:
        assert "\n" not in str(exc)
        assert str(exc).startswith(("bad encoding declaration: ", "cannot decode as ", "binary file")), str(exc)
        return
    # Accepted: Python reads the same text, and writing it back gives the same bytes.
    assert text.encode(encoding) == data
    try:
        theirs = ast.literal_eval(ast.parse(data).body[0].value)
    except SyntaxError:
        # Not Python to Python either (a BOM after the cookie line, say): the text we read must
        # not parse, so the run reports "cannot parse" instead of migrating it.
        with pytest.raises(SyntaxError):
            ast.parse(text)
        return
    ours = ast.literal_eval(ast.parse(text).body[0].value)
    assert ours == theirs


NOT_SOURCE_ENCODINGS = ["unicode_escape", "raw_unicode_escape", "utf-7", "hex", "base64", "rot13", "zlib",
                        "bz2", "quopri", "uu", "undefined", "punycode", "idna"]


def test_coding_cookies_that_are_not_source_encodings_are_refused_one_line_each(tmp_path, run_cli):
    (tmp_path / "a_first.py").write_bytes(GPU)
    for codec in NOT_SOURCE_ENCODINGS:
        (tmp_path / f"cookie_{codec}.py").write_bytes(f"# -*- coding: {codec} -*-\n".encode() + GPU + b"s = '\\\\n+'\n")
    (tmp_path / "z_last.py").write_bytes(GPU)

    r = run_cli(".", "--write", cwd=tmp_path)

    assert r.returncode == 2, r.stderr.decode()
    assert b"Traceback" not in r.stderr
    lines = r.stdout.decode().splitlines()
    for codec in NOT_SOURCE_ENCODINGS:
        (line,) = [x for x in lines if x.startswith(f"cookie_{codec}.py: ")]
        assert line.startswith(f"cookie_{codec}.py: bad encoding declaration: '{codec}' is not "), line
        assert (tmp_path / f"cookie_{codec}.py").read_bytes() == f"# -*- coding: {codec} -*-\n".encode() + GPU + b"s = '\\\\n+'\n"
    n = len(NOT_SOURCE_ENCODINGS)
    assert f"{n + 2} files scanned, 2 migrated, 0 unchanged, {n} failed." in lines
    assert (tmp_path / "a_first.py").read_bytes() == NPU and (tmp_path / "z_last.py").read_bytes() == NPU


# ------------------------------------------------------------------------------ setuid/setgid


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="only root migrates another user's file")
def test_root_keeps_setuid_and_setgid_of_a_users_file(tmp_path):
    path = tmp_path / "tool.py"
    path.write_bytes(GPU)
    os.chown(path, 1234, 5678)
    path.chmod(0o6755)
    write_source(read_source(str(path)), NPU.decode())
    st_ = path.stat()
    assert (st_.st_uid, st_.st_gid, stat.S_IMODE(st_.st_mode)) == (1234, 5678, 0o6755)
    assert path.read_bytes() == NPU


# ------------------------------------------------------------------------------ long names


@pytest.mark.parametrize("name", ["a" * 252 + ".py", "训" * 84 + ".py"])
def test_a_file_with_a_name_of_the_longest_length_migrates_in_place(tmp_path, run_cli, name):
    assert len(os.fsencode(name)) == 255
    (tmp_path / name).write_bytes(GPU)
    r = run_cli(".", "--write", cwd=tmp_path)
    assert r.returncode == 0, r.stdout.decode() + r.stderr.decode()
    assert (tmp_path / name).read_bytes() == NPU
    assert os.listdir(tmp_path) == [name]


# ------------------------------------------------------------------------------ --output-dir copies


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, OSError(28, "No space left on device")])
@pytest.mark.parametrize("after_bytes", [0, 1, 100_000])
def test_an_interrupted_or_failed_copy_leaves_no_truncated_file(tmp_path, monkeypatch, interrupt, after_bytes):
    import shutil

    from npu_migrate import output_dir

    src = tmp_path / "proj"
    src.mkdir()
    (src / "data.bin").write_bytes(os.urandom(300_000))
    real = shutil.copyfileobj

    def copy_then_fail(fsrc, fdst, length=0):
        fdst.write(fsrc.read(after_bytes))
        raise interrupt

    monkeypatch.setattr(shutil, "copyfileobj", copy_then_fail)
    out = tmp_path / "out"
    out.mkdir()
    if isinstance(interrupt, OSError):
        warnings, errors = output_dir.write_tree([str(src)], str(out), output_dir.FileFilter(root=str(tmp_path)), {})
        assert errors == {str(src / "data.bin"): "cannot copy to --output-dir: No space left on device"}
    else:
        with pytest.raises(KeyboardInterrupt):
            output_dir.write_tree([str(src)], str(out), output_dir.FileFilter(root=str(tmp_path)), {})
    assert os.listdir(out) == []  # neither a truncated copy nor a temporary file
    monkeypatch.setattr(shutil, "copyfileobj", real)


def test_output_dir_on_a_full_disk_is_one_line_per_file_and_exit_2(tmp_path, monkeypatch):
    import errno

    from npu_migrate import source

    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "train.py").write_bytes(GPU)
    (tmp_path / "proj" / "notes.txt").write_text("notes\n")
    real = source.atomic_write

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(source, "atomic_write", full)
    import shutil
    monkeypatch.setattr(shutil, "copyfileobj", lambda *a, **k: full())
    r = invoke([str(tmp_path / "proj"), "--output-dir", str(tmp_path / "out")], tmp_path / "cache")
    monkeypatch.setattr(source, "atomic_write", real)

    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output
    lines = r.output.splitlines()
    assert f"{tmp_path / 'proj' / 'train.py'}: cannot write to --output-dir: No space left on device; copied unchanged" \
        in lines or any("train.py: cannot" in x for x in lines), r.output
    assert any(x.endswith("notes.txt: cannot copy to --output-dir: No space left on device") for x in lines), r.output
    assert [p.name for p in (tmp_path / "out").rglob("*") if p.is_file()] == []


def test_output_dir_with_the_longest_file_name(tmp_path, run_cli):
    name = "m" * 252 + ".py"
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / name).write_bytes(GPU)
    (tmp_path / "proj" / ("d" * 251 + ".txt")).write_text("data\n")
    r = run_cli("proj", "--output-dir", "out", cwd=tmp_path)
    assert r.returncode == 0, r.stderr.decode()
    assert (tmp_path / "out" / name).read_bytes() == NPU
    assert (tmp_path / "out" / ("d" * 251 + ".txt")).read_text() == "data\n"


@pytest.mark.slow
def test_the_boot_file_into_a_read_only_folder_is_one_line_and_exit_2(tmp_path, run_cli):
    src = tmp_path / "proj"
    src.mkdir()
    (src / "train.py").write_bytes(b"import argparse\nimport torch\nparser = argparse.ArgumentParser()\n"
                                   b"parser.add_argument('--data_dir', default='d')\nargs = parser.parse_args()\n"
                                   b"model = model.cuda()\n")
    args = ["proj", "--write", "--modelarts-entry", "--entry", "proj/train.py"]
    assert run_cli(*args, cwd=tmp_path).returncode == 0
    migrated = (src / "train.py").read_bytes()
    (src / "modelarts_entry_train.py").unlink()  # the script is migrated; its boot file is to be made again

    r = run_as_other_user_if_root(args, tmp_path, prepare=lambda: src.chmod(0o555))
    src.chmod(0o755)

    assert r.returncode == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    assert "proj/modelarts_entry_train.py: cannot write: Permission denied" in r.stdout.splitlines(), r.stdout
    assert "3 files scanned, 0 migrated, 2 unchanged, 1 failed." in r.stdout.splitlines(), r.stdout
    assert not (src / "modelarts_entry_train.py").exists()
    assert (src / "train.py").read_bytes() == migrated


# ------------------------------------------------------------------------------ permissions (non-root)


def run_as_other_user_if_root(args, tmp_path: Path, prepare=None):
    """The command line with permission bits in force. As root they decide nothing, so root
    runs it without the capabilities that override them (util-linux `setpriv`)."""
    import shutil

    env = {**os.environ, "NPU_MIGRATE_CACHE_DIR": str(tmp_path / "user-cache"), "NO_COLOR": "1"}
    prefix = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without `setpriv`: permission bits cannot be put in force")
        caps = "-dac_override,-dac_read_search"
        prefix = [setpriv, f"--bounding-set={caps}", f"--inh-caps={caps}", "--"]
    if prepare:
        prepare()
    return subprocess.run([*prefix, sys.executable, "-m", "npu_migrate", *args, "-j", "1"], capture_output=True,
                          text=True, env=env, cwd=str(tmp_path), timeout=120)


@pytest.mark.slow
def test_a_folder_that_cannot_be_listed_fails_the_run(tmp_path):
    (tmp_path / "proj" / "locked").mkdir(parents=True)
    (tmp_path / "proj" / "locked" / "train.py").write_bytes(GPU)
    (tmp_path / "proj" / "ok.py").write_bytes(GPU)
    r = run_as_other_user_if_root(["proj", "--check"], tmp_path,
                                  prepare=lambda: (tmp_path / "proj" / "locked").chmod(0o000))
    (tmp_path / "proj" / "locked").chmod(0o755)
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert "proj/locked: cannot list folder: Permission denied" in lines, r.stdout
    assert "2 files scanned, 1 would be migrated, 0 unchanged, 1 failed." in lines, r.stdout


@pytest.mark.slow
def test_an_unreadable_file_named_on_the_command_line_is_one_failed_file(tmp_path):
    (tmp_path / "secret.py").write_bytes(GPU)
    (tmp_path / "ok.py").write_bytes(GPU)
    r = run_as_other_user_if_root(["secret.py", "ok.py", "--write"], tmp_path,
                                  prepare=lambda: (tmp_path / "secret.py").chmod(0o000))
    assert r.returncode == 2, r.stdout + r.stderr
    assert "secret.py: cannot read: Permission denied" in r.stdout.splitlines(), r.stdout
    assert "2 files scanned, 1 migrated, 0 unchanged, 1 failed." in r.stdout.splitlines()
    assert (tmp_path / "ok.py").read_bytes() == NPU


# ------------------------------------------------------------------------------ workers, stray files


def test_a_stray_temporary_file_is_reported_and_removed_by_write(tmp_path, run_cli):
    (tmp_path / "train.py").write_bytes(GPU)
    stray = tmp_path / ".train.py.k3j2h1x0.npu-migrate.tmp"
    stray.write_bytes(GPU[:10])
    os.utime(stray, (1, 1))

    checked = run_cli(".", "--check", cwd=tmp_path)
    assert ("npu-migrate: warning: ./.train.py.k3j2h1x0.npu-migrate.tmp: left by an interrupted npu-migrate run; "
            "`npu-migrate --write` removes it, or delete it") in checked.stderr.decode().splitlines()
    assert stray.exists()
    written = run_cli(".", "--write", cwd=tmp_path)
    assert ("npu-migrate: ./.train.py.k3j2h1x0.npu-migrate.tmp: removed (left by an interrupted npu-migrate run)"
            in written.stderr.decode().splitlines())
    assert not stray.exists()
    assert (tmp_path / "train.py").read_bytes() == NPU


# ------------------------------------------------------------------------------ bounded reads


@pytest.mark.slow
@pytest.mark.parametrize("where", ["--rules", "config"])
@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_rule_files_that_never_end_are_refused(tmp_path, where, kind):
    (tmp_path / "train.py").write_bytes(GPU)
    target = tmp_path / "rules.toml"
    if kind == "fifo":
        os.mkfifo(target)
    else:
        target.symlink_to("/dev/zero")
    args = [str(tmp_path / "train.py")]
    if where == "--rules":
        args += ["--rules", str(target)]
    else:
        (tmp_path / "pyproject.toml").write_text('[tool.npu-migrate]\nrules = ["rules.toml"]\n')
    r = subprocess.run([sys.executable, "-m", "npu_migrate", *args], capture_output=True, text=True, timeout=600,
                       cwd=tmp_path, env={**os.environ, "NPU_MIGRATE_CACHE_DIR": str(tmp_path / "c")})
    assert r.returncode == 2
    assert r.stderr == f"npu-migrate: error: {target}: cannot read rule file: not a regular file\n", r.stderr


@pytest.mark.parametrize("pattern, why", [
    ("(a+)+$", "only a single character or class may repeat (like `[0-9]+`); `(a+)+` or `(a|aa)*` can take "
               "exponential time"),
    ("(a|aa)*b", "only a single character or class may repeat"),
    ("a*a*a*b", "it can match in too many ways (about 1.0e+06; at most 1e+06)"),
    ("a{0,16}" * 6, "it can match in too many ways (about 2.4e+07; at most 1e+06)"),
    ("(x)\\1", "backreferences are not supported"),
    ("x" * 201, "longer than 200 characters"),
])
def test_rule_patterns_that_could_backtrack_forever_are_refused(tmp_path, pattern, why):
    (tmp_path / "r.toml").write_text(
        f'[[argument]]\ncode = "NPU199"\nframework = "tensorflow"\napis = ["tensorflow.device"]\nkeyword = "device_name_or_function"\n'
        f'position = 0\npattern = {json.dumps(pattern)}\nto = "/cpu:0"\nmessage = "m"\n')
    (tmp_path / "train.py").write_bytes(GPU)
    r = invoke([str(tmp_path / "train.py"), "--rules", str(tmp_path / "r.toml")], tmp_path / "c")
    assert r.exit_code == 2
    assert r.output.startswith(f"npu-migrate: error: {tmp_path / 'r.toml'}: [[argument]] #1 (NPU199): 'pattern' "
                               "refused: "), r.output
    assert why in r.output and r.output.count("\n") == 1


# ------------------------------------------------------------------------------ non-UTF-8, hostile names


def test_a_pyproject_toml_that_is_not_utf8_above_the_path(tmp_path, run_cli):
    (tmp_path / "pyproject.toml").write_bytes(b"[project]\nname = 'caf\xe9'\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_bytes(GPU)
    r = run_cli("src", "--check", cwd=tmp_path)
    assert r.returncode == 1, r.stderr.decode()
    (tmp_path / "pyproject.toml").write_bytes(b"[tool.npu-migrate]\nexclude = ['caf\xe9']\n")
    r = run_cli("src", "--check", cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.decode() == f"npu-migrate: error: {tmp_path / 'pyproject.toml'}: not UTF-8 (line 2), as TOML must be\n"


@pytest.mark.parametrize("fmt", ["sarif", "csv", "json", "text", "github", "markdown"])
def test_reports_with_a_file_name_that_is_not_utf8(tmp_path, fmt, run_cli):
    folder = os.fsencode(tmp_path)
    with open(folder + b"/caf\xe9.py", "wb") as f:
        f.write(GPU + b"torch.cuda.nvtx.range_push('x')\n")
    # (in process: the report goes to a file, -o, not through a stream's encoding)
    r = run_cli(tmp_path, "--format", fmt, "-o", tmp_path / "report", env={"NPU_MIGRATE_CACHE_DIR": str(tmp_path / "c")})
    assert r.returncode == 0, r.stderr.decode()
    assert b"Traceback" not in r.stderr
    # The name is in the report as the file system has it: its bytes (percent-encoded in a URI,
    # escaped in JSON, which holds only Unicode).
    report = tmp_path / "report"
    written = b"".join(p.read_bytes() for p in sorted(report.iterdir())) if report.is_dir() else report.read_bytes()
    expected = {"sarif": b"caf%E9.py", "json": b"caf\\udce9.py"}.get(fmt, b"caf\xe9.py")
    assert expected in written, written[:2000]
    if fmt == "json":  # a valid UTF-8 document, whose path gives the file's bytes back
        (result,) = json.loads(written.decode("utf-8"))["files"]
        assert os.fsencode(result["path"]).endswith(b"/caf\xe9.py")


PATTERNS = ["(?i)/?(device:)?gpu(:[0-9]+)?", "cuda|gpu", "(?x) gpu : [0-9]+  # a comment", "(?i)(?s)a.b", "[^:]*:[0-9]?"]


@FEW
@given(st.sampled_from(PATTERNS), st.text(alphabet="gpuGPUcda:0123456789/\n xab#", max_size=120))
def test_a_bounded_pattern_matches_what_the_pattern_matches_up_to_the_subject_limit(pattern, subject):
    from npu_migrate.kinds.regex_bound import MAX_MATCHED_CHARS, bounded, check_pattern

    assert check_pattern(pattern) is None
    expected = re.fullmatch(pattern, subject) is not None and len(subject) <= MAX_MATCHED_CHARS
    assert (re.fullmatch(bounded(pattern), subject) is not None) == expected


def _xattrs(path: Path) -> dict:
    return {name: os.getxattr(path, name) for name in os.listxattr(path)}


def test_write_keeps_extended_attributes(tmp_path):
    """--write replaces the file by a new one, which keeps the old one's xattrs."""
    (tmp_path / "train.py").write_bytes(GPU)
    try:
        os.setxattr(tmp_path / "train.py", "user.origin", b"https://example.com/train.py")
        os.setxattr(tmp_path / "train.py", "user.empty", b"")
    except OSError as exc:
        pytest.skip(f"this file system refuses user extended attributes: {exc.strerror}")
    before = _xattrs(tmp_path / "train.py")

    r = invoke([str(tmp_path / "train.py"), "--write"], tmp_path / "cache")

    assert r.exit_code == 0, r.output
    assert (tmp_path / "train.py").read_bytes() == NPU
    assert _xattrs(tmp_path / "train.py") == before


def _getfacl(path: Path) -> str:
    return subprocess.run(["getfacl", "-c", "-p", str(path)], capture_output=True, check=True, text=True).stdout


@pytest.mark.parametrize("folder_default", [False, True])
def test_write_keeps_the_posix_acl_and_never_widens_access(tmp_path, folder_default):
    """with an ACL the group bits of the mode are the ACL's mask: copying the mode
    alone gave the owning group write access it did not have. The ACL is copied too (and one
    the folder's default ACL would give the new file, which the old one did not have, is not)."""
    import shutil

    if not shutil.which("setfacl"):
        pytest.skip("setfacl is not installed (apt-get install acl)")
    train = tmp_path / "train.py"
    train.write_bytes(GPU)
    train.chmod(0o640)
    r = subprocess.run(["setfacl", "-m", "u:nobody:rw,g::r", str(train)], capture_output=True, text=True)
    if r.returncode:
        pytest.skip(f"this file system refuses POSIX ACLs: {r.stderr.strip()}")
    if folder_default:
        (tmp_path / "plain.py").write_bytes(GPU)
        subprocess.run(["setfacl", "-d", "-m", "u:daemon:rwx", str(tmp_path)], check=True)
    assert stat.S_IMODE(train.stat().st_mode) == 0o660  # the group bits show the mask
    before, mode = _getfacl(train), train.stat().st_mode

    r = invoke([str(tmp_path), "--write", "--exclude", "cache"], tmp_path / "cache")

    assert r.exit_code == 0, r.output
    assert train.read_bytes() == NPU
    assert _getfacl(train) == before and "group::r--" in before and "user:nobody:rw-" in before
    assert train.stat().st_mode == mode
    if folder_default:
        assert "daemon" not in _getfacl(tmp_path / "plain.py")
        assert (tmp_path / "plain.py").read_bytes() == NPU


# ------------------------------------------------------------------------------ hostile code: never run, never imported; nothing written outside


def console_script() -> str:
    return str(Path(sys.executable).with_name("npu-migrate"))


def run_tool(*args, cwd):
    """The console script, as a user (or pre-commit) runs it: the current folder is not on
    sys.path, so a `click.py` in the tree cannot stand in for the real one."""
    import subprocess

    env = dict(os.environ, NPU_MIGRATE_CACHE_DIR=str(Path(cwd) / ".cache"))
    return subprocess.run([console_script(), *args], cwd=cwd, capture_output=True, env=env)


def booby_trap(marker: Path, what: str) -> str:
    """Python that leaves `marker` behind if anything ever runs (or imports) it."""
    return f"open({str(marker)!r}, 'a').write({what!r} + '\\n')\nraise SystemExit(99)\n"


@pytest.mark.slow
def test_the_code_being_migrated_is_never_run_nor_imported(tmp_path):
    marker = tmp_path / "MARKER"
    tree = tmp_path / "proj"
    tree.mkdir()
    trap = booby_trap(marker, "module")
    (tree / "train.py").write_text(
        "import argparse\nimport torch\n" + trap.replace("raise SystemExit(99)\n", "")
        + "parser = argparse.ArgumentParser()\nparser.add_argument('--data', default='d')\n"
        "args = parser.parse_args()\nmodel = model.cuda()\nif __name__ == '__main__':\n"
        + "".join("    " + line + "\n" for line in trap.splitlines())
    )
    for name in ("setup.py", "conftest.py", "__init__.py", "sitecustomize.py", "usercustomize.py",
                 "click.py", "libcst.py", "rich.py", "black.py", "pathspec.py", "json.py", "torch.py"):
        (tree / name).write_text(booby_trap(marker, name) + "import torch\nx = t.cuda()\n")
    cell = {"cell_type": "code", "execution_count": None, "id": "c1", "metadata": {}, "outputs": [],
            "source": [booby_trap(marker, "notebook"), "import torch\n", "x = t.cuda()\n"]}
    notebook = {"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (tree / "nb.ipynb").write_text(json.dumps(notebook))
    (tree / "run.sh").write_text(f"#!/bin/sh\ntouch {marker}\nCUDA_VISIBLE_DEVICES=0 python train.py\n")
    (tree / "run.sh").chmod(0o755)

    r = run_tool(".", "--write", "--modelarts", "--modelarts-entry", "--entry", "train.py",
                 "--color", "never", cwd=tree)

    assert r.returncode in (0, 2), r.stderr.decode()
    assert b"Traceback" not in r.stderr, r.stderr.decode()
    assert not marker.exists(), marker.read_text()
    assert (tree / "modelarts_entry_train.py").exists()
    assert b"model.npu()" in (tree / "train.py").read_bytes()


def test_rule_and_config_files_are_parsed_as_data(tmp_path, run_cli):
    marker = tmp_path / "MARKER"
    (tmp_path / "train.py").write_bytes(GPU)
    (tmp_path / "evil.py").write_text(booby_trap(marker, "rules"))
    (tmp_path / "evil.toml").write_text(
        '[[method]]\ncode = "NPU199"\nfrom = "__import__(\\"os\\").system(\\"touch MARKER\\")"\n'
        'to = "npu"\nmessage = "{__import__}"\n')
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "train.py").write_bytes(GPU)
    (conf / "pyproject.toml").write_text('[tool.npu-migrate]\nrules = ["../evil.py"]\n')

    as_python = run_cli("train.py", "--rules", "evil.py", cwd=tmp_path)
    as_toml = run_cli("train.py", "--rules", "evil.toml", cwd=tmp_path)
    from_config = run_cli("train.py", cwd=conf)

    assert as_python.returncode == as_toml.returncode == from_config.returncode == 2
    assert as_python.stderr.decode().startswith("npu-migrate: error: evil.py: invalid TOML: ")
    assert "evil.toml: [[method]] #1 (NPU199): 'from' and 'to' must be identifiers" in as_toml.stderr.decode()
    assert "evil.py: invalid TOML: " in from_config.stderr.decode()
    assert not marker.exists()
    assert (tmp_path / "train.py").read_bytes() == GPU and (conf / "train.py").read_bytes() == GPU


# ------------------------------------------------------------------------------ --output-dir


def test_output_dir_never_follows_a_symlink_out_of_the_input(tmp_path, run_cli):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.py").write_bytes(GPU)
    src = tmp_path / "proj"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "train.py").write_bytes(GPU)
    (src / "ext").symlink_to(outside, target_is_directory=True)
    (src / "secret_link.py").symlink_to(outside / "secret.py")
    (src / "pkg" / "alias.py").symlink_to("train.py")

    r = run_cli("proj", "--output-dir", "out", "--color", "never", cwd=tmp_path)

    assert r.returncode == 0, r.stderr.decode()
    out = tmp_path / "out"
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == ["pkg", "pkg/alias.py", "pkg/train.py"]
    assert (out / "pkg" / "train.py").read_bytes() == NPU
    assert os.readlink(out / "pkg" / "alias.py") == "train.py"  # the copy's own file, not the input's
    assert "proj/secret_link.py: symlink not copied: it leads out of the input" in r.stderr.decode()
    assert sorted(os.listdir(outside)) == ["secret.py"] and (outside / "secret.py").read_bytes() == GPU
    assert (src / "pkg" / "train.py").read_bytes() == GPU


def test_output_dir_paths_with_dot_dot_stay_inside(tmp_path, run_cli):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "c").mkdir()
    (tmp_path / "a" / "b" / "x.py").write_bytes(GPU)
    (tmp_path / "c" / "y.py").write_bytes(GPU)

    r = run_cli("a/b/../b/x.py", "c/../c/y.py", "--output-dir", "out", cwd=tmp_path)

    assert r.returncode == 0, r.stderr.decode()
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.py"))
    assert written == ["a/b/x.py", "c/y.py", "out/a/b/x.py", "out/c/y.py"]


@pytest.mark.parametrize("planted", ["folder", "file"])
def test_output_dir_does_not_write_through_a_symlink_planted_during_the_run(tmp_path, planted):
    # The CLI refuses a non-empty --output-dir; this is what a symlink that appears in it while
    # the run works (another process) would do to the writer.
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "train.py").write_bytes(b"precious\n")
    src = tmp_path / "proj"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "train.py").write_bytes(GPU)
    (src / "pkg" / "notes.txt").write_text("notes\n")
    out = tmp_path / "out"
    if planted == "folder":
        out.mkdir()
        (out / "pkg").symlink_to(victim, target_is_directory=True)
    else:
        (out / "pkg").mkdir(parents=True)
        (out / "pkg" / "train.py").symlink_to(victim / "train.py")
        (out / "pkg" / "notes.txt").symlink_to(victim / "train.py")
    source = read_source(str(src / "pkg" / "train.py"))

    warnings, errors = write_tree([str(src)], str(out), FileFilter(root=str(tmp_path)),
                                  {str(src / "pkg" / "train.py"): (source, NPU.decode())})

    assert errors == {str(src / "pkg" / "train.py"): "not written: a symlink in --output-dir leads out of it"}
    assert warnings == [f"{src / 'pkg' / 'notes.txt'}: not written: a symlink in --output-dir leads out of it"]
    assert sorted(os.listdir(victim)) == ["train.py"]
    assert (victim / "train.py").read_bytes() == b"precious\n"


# ------------------------------------------------------------------------------ generated code

SHELL_CALLS = {"system", "popen", "getoutput", "getstatusoutput", "spawnl", "spawnlp", "execl", "execlp"}


def shell_uses(tree: ast.AST):
    """Calls that hand a string to a shell: os.system & co, or any call with shell=True."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        if isinstance(node.func, ast.Attribute) and node.func.attr in SHELL_CALLS:
            yield ast.unparse(node)
        for kw in node.keywords:
            if kw.arg == "shell" and not (isinstance(kw.value, ast.Constant) and kw.value.value is False):
                yield ast.unparse(node)


HOSTILE_NAMES = [
    'x"""; import os; os.system("touch PWNED"); """.py',
    "x'''; import os; os.system('touch PWNED'); '''.py",
    "back\\slash\\N{x}.py",
    "$(touch PWNED); `touch PWNED`.py",
    "spaces and ; semicolons && pipes | here.py",
    "ends in a quote\".py",
]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_boot_file_for_a_hostile_script_name_runs_exactly_that_file(name):
    text = render_boot(name)
    tree = ast.parse(text)
    benign = ast.parse(render_boot("train.py"))
    # Same code as for a benign name: only string constants differ (no statement injected).
    strip = ast.NodeTransformer()
    strip.visit_Constant = lambda node: ast.Constant(value=None)
    assert ast.dump(strip.visit(tree)) == ast.dump(strip.visit(ast.parse(render_boot("train.py"))))
    values = {n.targets[0].id: n.value.value for n in ast.parse(text).body
              if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name) and isinstance(n.value, ast.Constant)}
    assert values["TRAINING_SCRIPT"] == name
    assert list(shell_uses(tree)) == [] and list(shell_uses(benign)) == []


def test_generated_code_never_calls_a_shell(tmp_path, run_cli):
    src = tmp_path / "proj"
    src.mkdir()
    (src / "train.py").write_text(
        "import argparse\nimport torch\nparser = argparse.ArgumentParser()\n"
        "parser.add_argument('--data_dir', default='data')\nparser.add_argument('--output_dir', default='out')\n"
        "args = parser.parse_args()\nmodel = model.cuda()\n")
    r = run_cli("proj", "--write", "--modelarts", "--modelarts-entry", "--entry", "proj/train.py", cwd=tmp_path)
    assert r.returncode == 0, r.stderr.decode()
    for name in ("train.py", "modelarts_entry_train.py"):
        tree = ast.parse((src / name).read_text())
        assert list(shell_uses(tree)) == [], name
    template = ROOT / "npu_migrate" / "modelarts" / "boot_template.py"
    assert list(shell_uses(ast.parse(template.read_text()))) == []


# ------------------------------------------------------------------------------ CSV reports


def test_csv_report_cells_cannot_become_formulas(tmp_path, run_cli):
    src = tmp_path / "proj"
    src.mkdir()
    names = ['=HYPERLINK("evil.example").py', "+1+1.py", "-2.py", "@SUM(A1).py", "%x.py", "＝1.py"]
    for name in names:
        (src / name).write_bytes(GPU + b"torch.cuda.nvtx.range_push('x')\n")

    r = run_cli(".", "--format", "csv", "-o", "../reports", cwd=src)

    assert r.returncode == 0, r.stderr.decode()
    for report in ("change_list.csv", "unsupported_api.csv"):
        with open(tmp_path / "reports" / report, newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f))[1:]
        assert rows, report
        files = {row[0] for row in rows}
        assert files == {"'" + name for name in names}, (report, files)
        for row in rows:
            assert not str(row[0]).startswith(("=", "+", "-", "@", "%", "＝")), row


# ------------------------------------------------------------------------------ .ci/run runs every stage


def test_ci_runs_the_readmes_test_command_and_every_line_is_a_stage():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    command = readme.split("Install with the test dependencies and run the test suite", 1)[1]
    command = command.split("```sh\n", 1)[1].split("\n", 1)[0]
    assert command == "python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' && .venv/bin/python -m pytest"
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert f'stage tests bash -c "{command}"' in script.splitlines()
    steps = [line for line in script.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert steps[:3] == ["set -uo pipefail", 'cd "$(dirname "$0")/.."', ". .ci/stages.sh"]  # no `set -e`
    assert steps[-1] == "ci_summary"
    assert all(line.startswith("stage ") for line in steps[3:-1]), steps  # a bare command would not be counted


def _ignore_sigint():
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.slow
@pytest.mark.parametrize("stages, code", [(["false", "true", "bash -c 'exit 3'"], 1), (["true", "true"], 0)])
def test_ci_stages_all_run_and_the_summary_fails_at_the_end(tmp_path, stages, code):
    """Every stage runs and the run fails at the end (`set -e` stopped at the first failing stage,
    so a flaky test hid the security stage). Run as CI runs it: no terminal, SIGINT ignored, CI=true."""
    script = ". .ci/stages.sh\n" + "".join(f"stage s{i} {cmd}\n" for i, cmd in enumerate(stages)) + "ci_summary\n"
    r = subprocess.run(["bash", "-c", script], cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       env={**os.environ, "CI": "true"}, timeout=120,
                       preexec_fn=_ignore_sigint)
    assert r.returncode == code, r.stdout + r.stderr
    summary = r.stdout.split("=== .ci/run: summary\n", 1)[1].splitlines()
    expected = [f"  passed  s{i}" if cmd == "true" else f"  FAILED  s{i} (exit code {1 if cmd == 'false' else 3})"
                for i, cmd in enumerate(stages)]
    failed = sum(cmd != "true" for cmd in stages)
    expected.append(f"=== .ci/run: {failed} of {len(stages)} stages failed" if failed
                    else f"=== .ci/run: all {len(stages)} stages passed")
    assert summary == expected


def test_an_acl_that_cannot_be_copied_fails_the_write_and_keeps_the_file(tmp_path, monkeypatch):
    """Never widen access: when the ACL cannot be given to the new file, the file is not replaced
    (the mode alone would give the owning group the ACL mask's access)."""
    import errno
    import shutil

    from npu_migrate import source as source_module

    if not shutil.which("setfacl"):
        pytest.skip("setfacl is not installed (apt-get install acl)")
    train = tmp_path / "train.py"
    train.write_bytes(GPU)
    r = subprocess.run(["setfacl", "-m", "u:nobody:rw", str(train)], capture_output=True, text=True)
    if r.returncode:
        pytest.skip(f"this file system refuses POSIX ACLs: {r.stderr.strip()}")
    before = _getfacl(train)
    real = os.setxattr

    def refuse_acl(path, name, value, *rest, **kw):
        if name == source_module.ACL_ACCESS:
            raise OSError(errno.EPERM, os.strerror(errno.EPERM))
        return real(path, name, value, *rest, **kw)

    monkeypatch.setattr(source_module.os, "setxattr", refuse_acl)
    with pytest.raises(SourceError, match=r"^cannot write: cannot keep the file's ACL: Operation not permitted$"):
        write_source(read_source(str(train)), NPU.decode())
    assert train.read_bytes() == GPU and _getfacl(train) == before
    assert sorted(os.listdir(tmp_path)) == ["train.py"]


@pytest.mark.slow
def test_an_ignore_file_above_the_folder_given_that_never_ends_fails_it(tmp_path):
    """The .gitignore of the repository top applies to a folder given below it: when it cannot
    be read, that folder is not walked either (one line, exit 2)."""
    project = tmp_path / "proj"
    (project / ".git").mkdir(parents=True)
    (project / "src").mkdir()
    (project / "src" / "train.py").write_bytes(GPU)
    os.mkfifo(project / ".gitignore")

    r = _run("src", "--write", cwd=project)

    assert r.returncode == 2, r.stderr
    assert "src: cannot read ../.gitignore: not a regular file" in r.stdout.decode().splitlines(), r.stdout
    assert (project / "src" / "train.py").read_bytes() == GPU


def _deeper_than_entering_every_statement(tree: ast.AST, text: str, limit: int) -> bool:
    """safe_parse.deeper_than before it skipped short statements: only short expressions skipped."""
    from npu_migrate.safe_parse import _byte_span, _line_starts, child_nodes

    starts = _line_starts(text)
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        for child in child_nodes(node):
            if isinstance(child, ast.expr) and _byte_span(child, starts) + 2 <= limit - depth:
                continue
            stack.append((child, depth + 1))
    return False


def _depth_of(tree: ast.AST) -> int:
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


DEPTH_CASES = {
    "chain_299": "x = a" + " + a" * 297 + "\n",
    "chain_301": "x = a" + " + a" * 299 + "\n",
    "attributes": "x = a" + ".b" * 310 + "\n",
    "calls": "x = f" + "()" * 305 + "\n",
    "blocks": "".join(" " * i + "if x:\n" for i in range(95)) + " " * 95 + "y = (a + a + a + a)\n",
    "handlers": "".join(" " * i + "try:\n" + " " * (i + 1) + "pass\n" + " " * i + "except E:\n" for i in range(0, 180, 2))
                + " " * 180 + "y = a.b.c\n",
    "defaults": "def f(a=lambda: lambda: lambda: (b, (c, (d,)))):\n    return a\n",
    "comprehensions": "x = [[[[y for y in z if y] for z in w] for w in v] for v in u]\n",
    "lambdas": "f = " + "lambda: " * 150 + "0\n",
}
if sys.version_info >= (3, 10):
    DEPTH_CASES["patterns"] = "match x:\n    case " + "[" * 90 + "a" + "]" * 90 + " if a.b.c:\n        pass\n"


@pytest.mark.slow
def test_the_depth_check_skips_only_what_cannot_reach_the_limit():
    """safe_parse.deeper_than does not enter a statement (or argument, keyword, handler...)
    shorter than half the levels left: at every limit from 3 to past the tree's depth, its
    verdict is that of the walk that enters every statement, on the fixtures, the test inputs
    and texts built to nest statements, handlers, patterns and expressions deeply."""
    from npu_migrate.safe_parse import MAX_NESTING, deeper_than

    root = Path(__file__).resolve().parent.parent
    texts = dict(DEPTH_CASES)
    for folder in ("fixtures", "tests", "bench"):
        for path in sorted((root / folder).rglob("*.py")):
            texts[str(path)] = path.read_text(encoding="utf-8", errors="replace")
    compared = 0
    for name, text in texts.items():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError):
            continue
        for limit in [*range(3, _depth_of(tree) + 3), MAX_NESTING]:
            assert deeper_than(tree, text, limit) == _deeper_than_entering_every_statement(tree, text, limit), (
                name, limit)
            compared += 1
    assert compared > 3000
