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
    assert (r.returncode, r.stdout.decode()) == (1, cold.output)


def test_the_cache_folder_is_private_and_must_be_the_users(tmp_path):
    cache_dir = tmp_path / "a" / "cache"
    (tmp_path / "train.py").write_bytes(GPU)
    invoke([str(tmp_path / "train.py"), "--check"], cache_dir)
    assert stat.S_IMODE(cache_dir.stat().st_mode) == 0o700
    for folder in cache_dir.rglob("*"):
        if folder.is_dir():
            assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder

    cache_dir.chmod(0o777)  # opened up by someone: made private again before use
    invoke([str(tmp_path / "train.py"), "--check"], cache_dir)
    assert stat.S_IMODE(cache_dir.stat().st_mode) == 0o700


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
