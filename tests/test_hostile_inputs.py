"""Hostile inputs (issue 7): each gets a clear one-line message and exit code, is left
byte-for-byte untouched when it cannot be migrated, and never affects another file.

Most cases share one tree and one `--write` run (a subprocess, as a user runs it); the cases
that need their own set-up (read-only, changed on disk, 10 MB, 10,000 files, symlink loops)
have their own tests.
"""

from __future__ import annotations

import ast
import os
import stat
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from click.testing import CliRunner

from npu_migrate import dispatch
from npu_migrate import runner as runner_module
from npu_migrate.cli import main
from npu_migrate.dispatch import migrate_source
from npu_migrate.safe_parse import MAX_PARSE_CHARS
from npu_migrate.source import SourceError, read_source, write_source

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
    left = set(os.listdir(tmp_path)) - {".npu-migrate-test-cache"}
    assert left == {*MIGRATED, *UNCHANGED, *REFUSED, *DEEP}  # nothing new, no temporary file


@pytest.mark.parametrize("name", sorted(DEEP))
def test_deep_nesting_is_refused_before_libcst_can_crash(name):
    # In-process: a native stack overflow here would kill pytest itself.
    result = migrate_source(DEEP[name], name)
    assert result.error is not None and result.error.startswith("cannot parse: too deeply nested"), result.error
    assert result.new_text is None


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


def test_directory_with_ten_thousand_files(tmp_path, run_cli):
    tree = tmp_path / "many"
    tree.mkdir()
    for i in range(10_000):
        (tree / f"m{i:05d}.py").write_bytes(GPU if i % 1000 == 0 else b"x = %d\n" % i)

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


def test_fifo_given_by_name_does_not_hang(tmp_path, run_cli):
    os.mkfifo(tmp_path / "pipe.py")
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


def test_signals_wait_for_the_write_to_finish(tmp_path):
    import signal

    from npu_migrate.source import signals_deferred

    received = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: received.append(signum))
    try:
        with signals_deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            assert received == []  # held back while the block runs
        assert received == [signal.SIGTERM]  # and delivered right after
    finally:
        signal.signal(signal.SIGTERM, previous)


# ------------------------------------------------------------------------------ issue 30: hangs and unbounded reads


def _run(*args, cwd, stdin=subprocess.DEVNULL, env=None):
    """A real process (FIFOs and stdin need one); the timeout only turns a hang into a failure."""
    full_env = {**os.environ, "NPU_MIGRATE_CACHE_DIR": str(Path(cwd) / ".cache"), "NO_COLOR": "1", **(env or {})}
    return subprocess.run([sys.executable, "-m", "npu_migrate", *args, "--color", "never"], cwd=cwd, stdin=stdin,
                          capture_output=True, env=full_env, timeout=300)


def test_a_fifo_without_a_suffix_named_on_the_command_line_does_not_hang(tmp_path):
    """Issue 30.5: a file without a suffix is opened to look for a shebang; a FIFO blocked that open."""
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "ok.py").write_bytes(GPU)

    r = _run("fifo", "ok.py", "--write", cwd=tmp_path)

    assert r.returncode == 2, r.stderr
    assert "fifo: not a regular file" in r.stdout.decode().splitlines()
    assert (tmp_path / "ok.py").read_bytes() == NPU


@pytest.mark.parametrize("where", [".gitignore", ".git/info/exclude", "sub/.gitignore"])
@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_an_ignore_file_that_never_ends_fails_its_folder_and_does_not_hang(tmp_path, where, kind):
    """Issue 30.6: a .gitignore or .git/info/exclude that is a FIFO hung the walk; one linked to
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


def test_stdin_is_bounded_like_files(tmp_path):
    """Issue 30.7: `npu-migrate - < /dev/zero` read without end (MemoryError)."""
    with open("/dev/zero", "rb") as zero:
        r = _run("-", cwd=tmp_path, stdin=zero)

    assert r.returncode == 2
    assert r.stdout == b""
    assert r.stderr.decode() == "stdin.py: too large to read (over the limit of 64 MiB)\n"


def test_diff_of_a_long_file_takes_work_linear_in_its_length(monkeypatch):
    """Issue 30.8: --diff of a 1.9 MB file took over 6 CPU-minutes against 35 s for --check:
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
    """Issue 30.12: it was told to add a Python coding cookie (TOML has none)."""
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
    """Issue 30.12: a 4.1 MiB rule file was refused with "4 MB; the limit is 4 MB"."""
    rules = tmp_path / "big.toml"
    rules.write_bytes(b"#" * 4_300_000)
    (tmp_path / "train.py").write_bytes(GPU)

    r = CliRunner().invoke(main, [str(tmp_path / "train.py"), "--rules", str(rules), "--no-cache"])

    assert r.exit_code == 2
    assert f"{rules}: cannot read rule file: too large to read (4.1 MiB; the limit is 4 MiB)" in r.output, r.output


def test_hostile_nesting_in_a_script_and_a_huge_number_in_a_notebook_are_clear_messages(tmp_path):
    """Issue 30.9: "internal error: RecursionError" for a shell script with 250 nested `$(…)`,
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
