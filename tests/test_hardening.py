"""Hardening (issue 18): what a hostile or unlucky environment does to a run.

The integrity cases are property tests where they fit: any cache content, any coding cookie,
any interruption point. Each test here failed before the fix it goes with.
"""

from __future__ import annotations

import ast
import contextlib
import encodings.aliases
import json
import os
import re
import signal
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npu_migrate import dispatch
from npu_migrate.cli import main
from npu_migrate.source import SourceError, decode_python, read_source, write_source

GPU = b"import torch\n\nmodel = model.cuda()\n"
NPU = b"import torch\nimport torch_npu  # noqa: F401\n\nmodel = model.npu()\n"
FEW = settings(max_examples=int(os.environ.get("NPU_MIGRATE_PROPERTY_EXAMPLES", "60")), deadline=None,
               suppress_health_check=list(HealthCheck))


def invoke(args, cache_dir, env=None):
    """The command line in this process (fast enough for property tests)."""
    full_env = {"NPU_MIGRATE_CACHE_DIR": str(cache_dir), "NO_COLOR": "1", **(env or {})}
    return CliRunner().invoke(main, [*args, "--color", "never", "-j", "1"], env=full_env)


def tree_state(folder: Path) -> dict:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# ------------------------------------------------------------------------------ 1. the cache


def _entry_files(cache_dir: Path):
    return sorted(p for p in cache_dir.rglob("*.json"))


def _hostile_entries():
    """Whatever an entry file may hold: garbage, or a well-formed entry whose result says
    something a fresh run would not (another text, files generated anywhere)."""
    text = st.text(max_size=60)
    outside = st.sampled_from(["/tmp/npu-migrate-pwned.py", "../escaped.py", "sub/inner.py", ".hidden.py",
                               "modelarts_entry_train.py", "/etc/passwd", "x.sh"])
    result = st.fixed_dictionaries({
        "edits": st.just([]), "findings": st.just([]), "error": st.none(), "skipped": st.none(),
        "new_text": st.one_of(st.none(), text, st.just("import os\nos.system('touch PWNED')\n"), st.integers()),
        "extra_files": st.dictionaries(outside, text, max_size=2),
    })
    mutated = st.tuples(st.sampled_from(["bound", "other-digest", "other-path", "other-settings"]), result)
    return st.one_of(st.binary(max_size=200).map(lambda b: ("raw", b)), mutated)


def _forge(kind_and_value, template: dict) -> bytes:
    kind, value = kind_and_value
    if kind == "raw":
        return value
    entry = dict(template, result=value)
    if kind == "other-digest":
        entry["digest"] = "0" * 64
    elif kind == "other-path":
        entry["path"] = "/elsewhere/train.py"
    elif kind == "other-settings":
        entry["settings"] = "0" * 20
    return json.dumps(entry).encode()


@contextlib.contextmanager
def _cwd(folder: Path):
    folder.mkdir()
    before = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


@FEW
@given(_hostile_entries())
def test_a_cache_hit_never_writes_what_a_fresh_run_would_not(forged):
    with tempfile.TemporaryDirectory() as tmp, _cwd(Path(tmp) / "work"):
        # (the current folder is work/: a relative path that leads out lands in tmp, and shows)
        tmp = Path(tmp)
        work = tmp / "work"
        tree, fresh, cache_dir = work / "tree", work / "fresh", tmp / "cache"
        for folder in (tree, fresh):
            folder.mkdir()
            (folder / "train.py").write_bytes(GPU)
            (folder / "clean.py").write_bytes(b"x = 1\n")
        assert invoke([str(tree), "--check"], cache_dir).exit_code == 1  # fills the cache
        entries = _entry_files(cache_dir)
        assert len(entries) == 2
        for entry in entries:
            template = json.loads(entry.read_bytes())
            entry.write_bytes(_forge(forged, template))

        invoke([str(fresh), "--write", "--no-cache"], cache_dir)
        r = invoke([str(tree), "--write"], cache_dir)

        assert r.exception is None or isinstance(r.exception, SystemExit), r.output
        # Each file as it was or as a fresh run writes it (an entry of the user's own, bound to
        # the file, may still say "nothing to do": the folder is private to the user for that).
        after, expected = tree_state(tree), tree_state(fresh)
        assert sorted(after) == sorted(expected)
        for name, data in after.items():
            assert data in (expected[name],
                            GPU if name == "train.py" else b"x = 1\n"), (name, data, r.output)
        if forged[0] != "bound":
            assert after == expected, r.output
        assert sorted(os.listdir(tmp)) == ["cache", "work"] and sorted(os.listdir(work)) == ["fresh", "tree"]
        assert not os.path.exists("/tmp/npu-migrate-pwned.py")


@FEW
@given(_hostile_entries())
def test_a_cache_entry_not_bound_to_the_file_is_never_used(forged):
    if forged[0] == "bound":
        forged = ("other-digest", forged[1])
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "train.py").write_bytes(GPU)
        cold = invoke([str(tmp / "train.py"), "--check", "--format", "json"], tmp / "cache")
        (entry,) = _entry_files(tmp / "cache")
        entry.write_bytes(_forge(forged, json.loads(entry.read_bytes())))

        warm = invoke([str(tmp / "train.py"), "--check", "--format", "json"], tmp / "cache")

        assert (warm.exit_code, warm.output) == (cold.exit_code, cold.output)
        assert (tmp / "train.py").read_bytes() == GPU


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "symlink", "huge"])
def test_a_cache_entry_that_is_not_a_small_regular_file_is_a_miss(tmp_path, kind):
    (tmp_path / "train.py").write_bytes(GPU)
    cache_dir = tmp_path / "cache"
    cold = invoke([str(tmp_path / "train.py"), "--check"], cache_dir)
    (entry,) = _entry_files(cache_dir)
    entry.unlink()
    if kind == "fifo":
        os.mkfifo(entry)
    elif kind == "dev-zero":
        entry.symlink_to("/dev/zero")
    elif kind == "symlink":
        good = tmp_path / "elsewhere.json"
        good.write_text("{}")
        entry.symlink_to(good)
    else:
        with open(entry, "wb") as f:
            f.truncate(512 * 2**20)  # sparse: 512 MB that take no disk

    # A hang or an exhausted memory would be the failure: bounded by the subprocess timeout.
    r = subprocess.run([sys.executable, "-m", "npu_migrate", str(tmp_path / "train.py"), "--check"],
                       env={**os.environ, "NPU_MIGRATE_CACHE_DIR": str(cache_dir)}, capture_output=True,
                       timeout=60)
    assert (r.returncode, r.stdout.decode() + r.stderr.decode()) == (1, cold.output)


def test_the_cache_folder_is_private_and_must_be_the_users(tmp_path):
    cache_dir = tmp_path / "a" / "cache"
    (tmp_path / "train.py").write_bytes(GPU)
    invoke([str(tmp_path / "train.py"), "--check"], cache_dir)
    assert stat.S_IMODE(cache_dir.stat().st_mode) == 0o700
    for folder in cache_dir.rglob("*"):
        if folder.is_dir():
            assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder

    cache_dir.chmod(0o777)  # opened up by someone: not used, and its mode is not ours to change (issue 30.4)
    r = invoke([str(tmp_path / "train.py"), "--check"], cache_dir)
    assert r.exit_code == 1
    assert (f"npu-migrate: warning: the cache folder {cache_dir} is writable by other users (mode 0777) and "
            "npu-migrate does not change the mode of a folder: make it private "
            f"(chmod 700 {cache_dir}) or set NPU_MIGRATE_CACHE_DIR to another folder; running without the cache\n"
            ) in r.output
    assert stat.S_IMODE(cache_dir.stat().st_mode) == 0o777


@pytest.mark.parametrize("mode", [0o1777, 0o755, 0o3775])
def test_an_existing_cache_folder_keeps_its_mode_and_the_cache_is_a_private_subfolder(tmp_path, mode):
    """Issue 30.4: NPU_MIGRATE_CACHE_DIR naming an existing shared folder (/tmp-like 1777, or one
    others may read) was chmodded to 0700. Its mode is kept; the cache is a private subfolder."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(mode)
    (tmp_path / "train.py").write_bytes(GPU)

    cold = invoke([str(tmp_path / "train.py"), "--check"], shared)
    warm = invoke([str(tmp_path / "train.py"), "--check"], shared)

    assert stat.S_IMODE(shared.stat().st_mode) == mode
    private = shared / f"npu-migrate-{os.geteuid()}"
    assert os.listdir(shared) == [private.name]
    assert stat.S_IMODE(private.stat().st_mode) & 0o777 == 0o700  # (setgid is inherited from a 2775 folder)
    assert len(_entry_files(private)) == 1
    assert cold.exit_code == warm.exit_code == 1 and cold.output == warm.output and "warning" not in cold.output


def test_a_cache_folder_others_may_write_without_the_sticky_bit_is_refused_and_left_alone(tmp_path):
    """Issue 30.4: in a group-writable folder without the sticky bit (2775) a member of the group
    could swap a private subfolder for their own: the cache is not used, the folder not touched."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o2775)
    (tmp_path / "train.py").write_bytes(GPU)

    r = invoke([str(tmp_path / "train.py"), "--write"], shared)

    assert r.exit_code == 0
    assert (f"npu-migrate: warning: the cache folder {shared} is writable by other users (mode 2775) and "
            "npu-migrate does not change the mode of a folder") in r.output
    assert (tmp_path / "train.py").read_bytes() == NPU
    assert stat.S_IMODE(shared.stat().st_mode) == 0o2775 and os.listdir(shared) == []


def test_a_cache_subfolder_that_is_not_private_is_refused_and_left_alone(tmp_path):
    shared = tmp_path / "shared"
    private = shared / f"npu-migrate-{os.geteuid()}"
    private.mkdir(parents=True)
    shared.chmod(0o1777)
    private.chmod(0o755)
    (tmp_path / "train.py").write_bytes(GPU)

    r = invoke([str(tmp_path / "train.py"), "--check"], shared)

    assert r.exit_code == 1
    assert (f"npu-migrate: warning: the cache folder {private} is open to other users (mode 0755) and npu-migrate "
            f"does not change the mode of a folder: make it private (chmod 700 {private}); running without the "
            "cache\n") in r.output
    assert stat.S_IMODE(private.stat().st_mode) == 0o755 and os.listdir(private) == []


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to make a folder another user's")
def test_a_cache_folder_of_another_user_is_not_used(tmp_path):
    cache_dir = tmp_path / "cache"
    cache_dir.mkdir(mode=0o777)
    os.chown(cache_dir, 1234, 1234)
    (tmp_path / "train.py").write_bytes(GPU)
    r = invoke([str(tmp_path / "train.py"), "--check"], cache_dir)
    assert r.exit_code == 1
    assert (f"npu-migrate: warning: the cache folder {cache_dir} belongs to another user (uid 1234); "
            "running without the cache") in r.output
    assert os.listdir(cache_dir) == []


# ------------------------------------------------------------------------------ 3. coding cookies

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


# ------------------------------------------------------------------------------ 4. setuid/setgid


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


# ------------------------------------------------------------------------------ 5. SIGTERM in-process


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


# ------------------------------------------------------------------------------ 8. long names


@pytest.mark.parametrize("name", ["a" * 252 + ".py", "训" * 84 + ".py"])
def test_a_file_with_a_name_of_the_longest_length_migrates_in_place(tmp_path, run_cli, name):
    assert len(os.fsencode(name)) == 255
    (tmp_path / name).write_bytes(GPU)
    r = run_cli(".", "--write", cwd=tmp_path)
    assert r.returncode == 0, r.stdout.decode() + r.stderr.decode()
    assert (tmp_path / name).read_bytes() == NPU
    assert sorted(os.listdir(tmp_path)) == sorted([".npu-migrate-test-cache", name])


# ------------------------------------------------------------------------------ 2. --output-dir copies


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


def test_an_unreadable_file_named_on_the_command_line_is_one_failed_file(tmp_path):
    (tmp_path / "secret.py").write_bytes(GPU)
    (tmp_path / "ok.py").write_bytes(GPU)
    r = run_as_other_user_if_root(["secret.py", "ok.py", "--write"], tmp_path,
                                  prepare=lambda: (tmp_path / "secret.py").chmod(0o000))
    assert r.returncode == 2, r.stdout + r.stderr
    assert "secret.py: cannot read: Permission denied" in r.stdout.splitlines(), r.stdout
    assert "2 files scanned, 1 migrated, 0 unchanged, 1 failed." in r.stdout.splitlines()
    assert (tmp_path / "ok.py").read_bytes() == NPU


# ------------------------------------------------------------------------------ 6. workers, stray files


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
def test_workers_die_when_the_main_process_is_killed(tmp_path):
    import time

    for i in range(300):
        (tmp_path / f"m{i:03d}.py").write_text("import torch\n" + "x = t.cuda()\n" * 400)
    proc = subprocess.Popen([sys.executable, "-m", "npu_migrate", str(tmp_path), "--check", "-j", "2", "--no-cache"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while len(_children(proc.pid)) < 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        workers = _children(proc.pid)
        assert len(workers) >= 2, "the workers never started"
        proc.kill()
        proc.wait()
        deadline = time.monotonic() + 10
        while any(map(_alive, workers)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(map(_alive, workers)), "workers outlived the main process"
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_stray_temporary_file_is_reported_and_removed_by_write(tmp_path, run_cli):
    (tmp_path / "train.py").write_bytes(GPU)
    stray = tmp_path / ".train.py.k3j2h1x0.npu-migrate.tmp"
    stray.write_bytes(GPU[:10])
    os.utime(stray, (1, 1))

    checked = run_cli(".", "--check", cwd=tmp_path)
    assert (f"npu-migrate: warning: ./.train.py.k3j2h1x0.npu-migrate.tmp: left by an interrupted npu-migrate run; "
            "`npu-migrate --write` removes it, or delete it") in checked.stderr.decode().splitlines()
    assert stray.exists()
    written = run_cli(".", "--write", cwd=tmp_path)
    assert ("npu-migrate: ./.train.py.k3j2h1x0.npu-migrate.tmp: removed (left by an interrupted npu-migrate run)"
            in written.stderr.decode().splitlines())
    assert not stray.exists()
    assert (tmp_path / "train.py").read_bytes() == NPU


# ------------------------------------------------------------------------------ 7. bounded reads


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
    r = subprocess.run([sys.executable, "-m", "npu_migrate", *args], capture_output=True, text=True, timeout=60,
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


# ------------------------------------------------------------------------------ 9. non-UTF-8, hostile names


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
def test_reports_with_a_file_name_that_is_not_utf8(tmp_path, fmt):
    folder = os.fsencode(tmp_path)
    with open(folder + b"/caf\xe9.py", "wb") as f:
        f.write(GPU + b"torch.cuda.nvtx.range_push('x')\n")
    args = [str(tmp_path), "--format", fmt, "-o", str(tmp_path / "report")]
    r = subprocess.run([sys.executable, "-m", "npu_migrate", *args], capture_output=True, timeout=60,
                       env={**os.environ, "NPU_MIGRATE_CACHE_DIR": str(tmp_path / "c")})
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


@pytest.mark.skipif(subprocess.run(["git", "--version"], capture_output=True).returncode != 0, reason="needs git")
def test_diff_of_files_with_newline_and_esc_in_their_names_applies_with_git(tmp_path, run_cli):
    names = ["new\nline.py", "esc\x1b[31mred.py", 'quote" and \\.py', "tab\there.py", "space here.py",
             "+++ b\nforged.py", "caf\udce9.py"]
    for name in names:
        with open(os.fsencode(tmp_path) + b"/" + os.fsencode(name), "wb") as f:
            f.write(GPU)
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    r = run_cli(".", "--diff", "--no-cache", cwd=tmp_path)
    assert r.returncode == 1, r.stderr.decode()
    patch = r.stdout
    headers = [line for line in patch.split(b"\n") if line.startswith((b"--- ", b"+++ "))]
    assert len(headers) == 2 * len(names), headers  # no header forged by a name
    (tmp_path / "p.diff").write_bytes(patch)
    applied = subprocess.run(["git", "apply", "p.diff"], cwd=tmp_path, capture_output=True)
    assert applied.returncode == 0, applied.stderr.decode()
    for name in names:
        with open(os.fsencode(tmp_path) + b"/" + os.fsencode(name), "rb") as f:
            assert f.read() == NPU, name


# ------------------------------------------------------------------------------ 11-16. a new user's surprises


@pytest.mark.parametrize("key", ["write", "diff", "check", "output-dir"])
def test_mode_keys_in_the_configuration_are_refused(tmp_path, run_cli, key):
    value = '"out"' if key == "output-dir" else "true"
    (tmp_path / "pyproject.toml").write_text(f"[tool.npu-migrate]\n{key} = {value}\n")
    (tmp_path / "train.py").write_bytes(GPU)
    for args in (["train.py"], ["train.py", "--check"]):
        r = run_cli(*args, cwd=tmp_path)
        assert r.returncode == 2
        assert r.stderr.decode() == (
            f"npu-migrate: error: {tmp_path / 'pyproject.toml'}: [tool.npu-migrate]: {key}: the mode (--write, "
            "--diff, --check, --output-dir) is chosen on the command line, not in configuration; remove this key\n")
        assert (tmp_path / "train.py").read_bytes() == GPU


def test_an_empty_or_mistyped_folder_is_said_and_can_fail(tmp_path, run_cli):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("x\n")
    r = run_cli("empty", "--check", cwd=tmp_path)
    assert r.returncode == 0
    assert r.stderr.decode() == "npu-migrate: warning: no files to migrate under empty\n"
    r = run_cli("empty", "--check", "--fail-on-empty", cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.decode() == "npu-migrate: error: no files to migrate under empty\n"
    (tmp_path / "pyproject.toml").write_text("[tool.npu-migrate]\nfail-on-empty = true\n")
    assert run_cli("empty", "--check", cwd=tmp_path).returncode == 2


def test_check_says_why_it_fails(tmp_path, run_cli):
    (tmp_path / "train.py").write_bytes(GPU)
    r = run_cli("train.py", "--check", cwd=tmp_path)
    assert r.returncode == 1
    assert r.stderr.decode() == (
        "npu-migrate: check failed: 1 file would be migrated (2 rewrites pending; run with --diff to see them)\n")
    (tmp_path / "train.py").write_bytes(NPU + b"torch.cuda.nvtx.range_push('x')\n")
    r = run_cli("train.py", "--check", "--fail-on", "warning", cwd=tmp_path)
    assert r.returncode == 1
    err = r.stderr.decode().splitlines()
    assert err[0].startswith("npu-migrate: check failed: 1 finding at or above warning:"), err
    assert err[1].startswith("  train.py:5:1: NPU"), err


def test_check_names_a_notebook_finding_by_its_cell(tmp_path, run_cli):
    import json

    cells = [{"cell_type": "markdown", "metadata": {}, "source": ["# notes"]},
             {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
              "source": ["import torch\n", "from apex import amp\n"]}]
    (tmp_path / "t.ipynb").write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    r = run_cli("t.ipynb", "--check", "--fail-on", "warning", "-q", cwd=tmp_path)
    assert r.returncode == 1
    assert r.stderr.decode() == (
        "npu-migrate: check failed: 1 finding at or above warning:\n"
        "  t.ipynb:cell 2:2:18: NPU303 [warning] `apex.amp` (NVIDIA apex mixed precision) needs apex built for CUDA\n")


def test_usage_errors_never_name_the_hidden_subcommand_and_have_one_style(tmp_path, run_cli):
    r = run_cli("--bogus", cwd=tmp_path)
    err = r.stderr.decode()
    assert r.returncode == 2
    assert "migrate migrate" not in err and "npu-migrate migrate" not in err
    assert err.startswith("npu-migrate: error: No such option '--bogus'"), err
    assert err.endswith("Try 'npu-migrate --help' for help.\n")
    assert "Error:" not in err and "Usage:" not in err
    helped = run_cli("--help", cwd=tmp_path).stdout.decode()
    assert helped.startswith("Usage: npu-migrate [OPTIONS] [PATHS]...\n"), helped[:200]
    r = run_cli("x.py", "--write", "--check", cwd=tmp_path)
    assert r.stderr.decode() == ("npu-migrate: error: --write cannot be combined with --diff or --check\n"
                                 "Try 'npu-migrate --help' for help.\n")


def test_csv_into_a_folder_says_what_it_wrote(tmp_path, run_cli):
    (tmp_path / "train.py").write_bytes(GPU)
    r = run_cli("train.py", "--format", "csv", "-o", "reports", cwd=tmp_path)
    assert r.returncode == 0
    assert r.stderr.decode().splitlines() == [
        f"npu-migrate: report written to {os.path.join('reports', name)}"
        for name in ("change_list.csv", "unsupported_api.csv")]


def test_stdin_summary_says_migrated(tmp_path, run_cli):
    r = run_cli("-", "--stdin-filename", "train.py", input=GPU, cwd=tmp_path)
    assert r.returncode == 0
    assert r.stdout == NPU
    assert "1 file scanned, 1 migrated, 0 unchanged, 0 failed." in r.stderr.decode().splitlines()


PATTERNS = ["(?i)/?(device:)?gpu(:[0-9]+)?", "cuda|gpu", "(?x) gpu : [0-9]+  # a comment", "(?i)(?s)a.b", "[^:]*:[0-9]?"]


@FEW
@given(st.sampled_from(PATTERNS), st.text(alphabet="gpuGPUcda:0123456789/\n xab#", max_size=120))
def test_a_bounded_pattern_matches_what_the_pattern_matches_up_to_the_subject_limit(pattern, subject):
    from npu_migrate.kinds.regex_bound import MAX_MATCHED_CHARS, bounded, check_pattern

    assert check_pattern(pattern) is None
    expected = re.fullmatch(pattern, subject) is not None and len(subject) <= MAX_MATCHED_CHARS
    assert (re.fullmatch(bounded(pattern), subject) is not None) == expected


def test_the_hooks_pass_dependency_lists_and_skip_other_text_files(tmp_path, run_cli):
    """What pre-commit hands the hooks (.pre-commit-hooks.yaml: python, jupyter, shell,
    pyproject, plain-text): requirements files and pyproject.toml are checked, README and
    notes are skipped, not parsed as Python (tests/test_precommit.py runs pre-commit itself)."""
    hooks = (Path(__file__).resolve().parent.parent / ".pre-commit-hooks.yaml").read_text()
    assert hooks.count("types_or: [python, jupyter, shell, pyproject, plain-text]") == 2
    assert hooks.count("--force-exclude --known-files-only\n") == 2
    (tmp_path / "requirements-gpu.txt").write_text("torch==2.1.0+cu118\n")
    (tmp_path / "README").write_text("Train with model.cuda() on the GPU.\n")
    (tmp_path / "notes.txt").write_text("model.cuda()\n")
    (tmp_path / "train.py").write_bytes(NPU)
    r = run_cli("--check", "--force-exclude", "--known-files-only", "--fail-on", "warning", "-v",
                "requirements-gpu.txt", "README", "notes.txt", "train.py", cwd=tmp_path)
    assert r.returncode == 1, r.stderr.decode()
    out, err = r.stdout.decode(), r.stderr.decode()
    assert "requirements-gpu.txt:1:1: NPU372 [warning] `torch==2.1.0+cu118` selects a CUDA build" in out, out
    assert "2 files scanned, 0 would be migrated, 2 unchanged, 0 failed." in out.splitlines(), out
    assert "README: skipped: not a kind of file npu-migrate migrates" in err.splitlines(), err
    assert "notes.txt: skipped: not a kind of file npu-migrate migrates" in err.splitlines(), err


# ------------------------------------------------------------------------------ issue 30: the cache decides no write


@pytest.mark.parametrize("neighbour", ["new", "user's"])
def test_a_cached_nothing_changed_result_with_generated_files_writes_nothing(tmp_path, neighbour):
    """Issue 30.1: an entry bound to the file (right path, digest and settings) whose result says
    "unchanged" but carries generated files is not a "nothing to do" result: on --write the file
    is migrated again, and what is written is what this run computes."""
    tree, cache_dir = tmp_path / "tree", tmp_path / "cache"
    tree.mkdir()
    (tree / "train.py").write_bytes(b"x = 1\n")  # nothing to do
    helper = tree / "helper.py"
    if neighbour == "user's":
        helper.write_bytes(b"# my helper\nkeep = True\n")
    assert invoke([str(tree), "--check"], cache_dir).exit_code == 0  # fills the cache
    (entry,) = [e for e in _entry_files(cache_dir) if json.loads(e.read_bytes())["path"] == str(tree / "train.py")]
    forged = json.loads(entry.read_bytes())
    forged["result"]["extra_files"] = {str(helper): "# my helper\nos.system('touch PWNED')\n"}
    entry.write_text(json.dumps(forged))
    before = tree_state(tree)

    r = invoke([str(tree), "--write"], cache_dir)

    assert r.exit_code == 0, r.output
    assert tree_state(tree) == before, r.output
    assert "helper.py" not in r.output


@pytest.mark.parametrize("value", ["keep.py", "../../x.json", "report.json"])
def test_the_report_file_is_named_only_on_the_command_line(tmp_path, value):
    """Issue 30.2: `output-file` in a shared pyproject.toml made a plain report run replace a source
    file or write outside the project. It is refused; `-o` on the command line still works."""
    project = tmp_path / "a" / "b"
    project.mkdir(parents=True)
    (project / "pyproject.toml").write_text(f'[tool.npu-migrate]\noutput-file = "{value}"\n')
    (project / "keep.py").write_bytes(b"x = 1\n")
    (project / "train.py").write_bytes(GPU)
    before = tree_state(project)

    r = invoke([str(project / "train.py")], tmp_path / "cache")

    assert r.exit_code == 2
    assert r.output == (f"npu-migrate: error: {project / 'pyproject.toml'}: [tool.npu-migrate]: output-file: the "
                        "report file is named on the command line (-o FILE), not in configuration, so that a plain "
                        "run never writes a file; remove this key\n")
    assert tree_state(project) == before and not (tmp_path / "x.json").exists()
    (project / "pyproject.toml").write_text("[tool.npu-migrate]\nfail-on = \"warning\"\n")
    r = invoke([str(project / "train.py"), "-o", str(project / "report.json"), "--format", "json"], tmp_path / "cache")
    assert r.exit_code == 0, r.output
    assert json.loads((project / "report.json").read_text())


def _xattrs(path: Path) -> dict:
    return {name: os.getxattr(path, name) for name in os.listxattr(path)}


def test_write_keeps_extended_attributes(tmp_path):
    """Issue 30.3: --write replaces the file by a new one, which keeps the old one's xattrs."""
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
    """Issue 30.3: with an ACL the group bits of the mode are the ACL's mask: copying the mode
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
