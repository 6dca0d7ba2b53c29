"""The cache of results: a warm run gives exactly the cold run's results without migrating
anything; a change to the file, the rules or the options is never answered from the cache."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import multiprocessing
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from helpers import FEW, NPU, invoke, tree_state
from helpers import GPU as GPU_SCRIPT
from hypothesis import given
from hypothesis import strategies as st

from npu_migrate import dispatch
from npu_migrate.cache import Cache, cache_root
from npu_migrate.model import Edit, FileResult, Finding, Severity, Span
from npu_migrate.options import Options
from npu_migrate.rules import default_rules, load_rules
from npu_migrate.runner import run

ROOT = Path(__file__).resolve().parent.parent
RULES = default_rules()
GPU = "import torch\nx = torch.zeros(2).cuda()\n"


def _result(path="a.py"):
    return FileResult(
        path=path,
        edits=[Edit("NPU102", Span(2, 5, 2, 20), "m", "a", "b")],
        findings=[Finding("NPU301", Severity.ERROR, Span(1, 1, 1, 4), "torch.cuda.x", "msg", "fix", cell=2)],
        new_text="new\n",
        unused_ignores=[Finding("NPU001", Severity.INFO, Span(3, 1, 3, 9), "", "unused")],
        extra_files={"boot.py": "print(1)\n"},
    )


def test_every_field_of_a_result_is_stored():
    # A field added to FileResult but not to to_dict/from_dict would come back empty from the cache.
    # (`work`, the steps migrating took, must: a cached result took none.)
    assert set(FileResult.__dataclass_fields__) - {"work"} == set(FileResult(path="x").to_dict())
    result = _result()
    assert FileResult.from_dict(result.to_dict()) == result


def test_round_trip(tmp_path):
    cache = Cache("rules", Options(), root=tmp_path)
    cache.put("a.py", "d1", _result())
    assert cache.get("a.py", "d1") == _result()
    assert cache.get("a.py", "d2") is None  # other content
    assert cache.get("b.py", "d1") is None  # other file
    assert cache.get(os.path.abspath("a.py"), "d1") == _result(os.path.abspath("a.py"))  # same file


def test_settings_make_separate_caches(tmp_path):
    Cache("rules", Options(), root=tmp_path).put("a.py", "d", _result())
    assert Cache("rules", Options(), root=tmp_path).get("a.py", "d") == _result()
    assert Cache("other-rules", Options(), root=tmp_path).get("a.py", "d") is None
    assert Cache("rules", Options(add_import=False), root=tmp_path).get("a.py", "d") is None
    assert Cache("rules", Options(modelarts=True), root=tmp_path).get("a.py", "d") is None


def _changed(value):
    """(field path, a copy of `value` with that one field changed) for every field, a nested
    value (the targets) field by field. A type not handled here fails: a new field of a new type
    must say how it changes, and so cannot be left out of the key unnoticed."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            for path, changed in _changed(getattr(value, f.name)):
                yield ".".join(filter(None, (f.name, path))), dataclasses.replace(value, **{f.name: changed})
    elif isinstance(value, bool):
        yield "", not value
    elif isinstance(value, (int, float)):
        yield "", value + 1
    elif isinstance(value, str):
        yield "", value + "1"
    elif isinstance(value, tuple):
        yield "", value + ("x",)
    else:
        raise AssertionError(f"no change for a {type(value).__name__} ({value!r}): add one to _changed")


def test_changing_any_field_of_the_run_value_changes_the_cache_key():
    """#27.4: the key is derived from every field of options.Options (the resolved targets field
    by field: spec and reason of torch_npu, CANN and MindSpore), enumerated from the fields."""
    from npu_migrate.cache import run_key

    base = Options()
    variants = dict(_changed(base))
    assert {"framework", "targets.torch.spec", "targets.cann.reason", "targets.mindspore.spec",
            "distributed", "local_modules"} <= set(variants)
    assert len(variants) == len(dataclasses.fields(Options)) - 1 + 6  # targets: 3 targets x (spec, reason)
    keys = {path: run_key(options, "rules") for path, options in variants.items()}
    assert run_key(base, "rules") not in keys.values()
    assert len(set(keys.values())) == len(keys)  # and no two changes give one key
    assert run_key(base, "other rules") != run_key(base, "rules")


def test_a_field_the_key_cannot_encode_is_an_error_not_left_out():
    from npu_migrate.options import keyed

    with pytest.raises(TypeError, match="no cache key for a object"):
        keyed(dataclasses.replace(Options(), framework=object()))


def test_changing_any_data_file_changes_the_cache_key(tmp_path, monkeypatch):
    """#27.4: every file under the built-in rules/ (the rule files and the target tables) keys
    the cache by its content (cache.data_fingerprint); changed one at a time, each gives a new key."""
    from npu_migrate import rules as rules_module
    from npu_migrate.cache import run_key

    copy = tmp_path / "rules"
    shutil.copytree(rules_module.builtin_rules_dir(), copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(rules_module, "builtin_rules_dir", lambda: copy)
    files = sorted(p for p in copy.rglob("*") if p.is_file())
    assert {"torch.toml", "tensorflow.toml", "targets/torch_npu.toml", "targets/tf_adapter.toml",
            "targets/mindspore.toml"} <= {p.relative_to(copy).as_posix() for p in files}
    base = run_key(Options(), "rules")
    keys = set()
    for path in files:
        content = path.read_bytes()
        path.write_bytes(content[:-1] + bytes([content[-1] ^ 1]))  # one bit of the last byte, same size
        keys.add(run_key(Options(), "rules"))
        path.write_bytes(content)
    assert base not in keys and len(keys) == len(files)
    assert run_key(Options(), "rules") == base


def test_errors_are_not_stored(tmp_path):
    cache = Cache("rules", Options(), root=tmp_path)
    cache.put("a.py", "d", FileResult(path="a.py", error="internal error: the worker process died"))
    assert cache.get("a.py", "d") is None


def test_damaged_entries_and_unusable_folders_are_misses(tmp_path):
    cache = Cache("rules", Options(), root=tmp_path)
    cache.put("a.py", "d", _result())
    (entry,) = [p for p in cache.folder.rglob("*.json")]
    entry.write_text('{"digest": "d", "result": {"edits": [', encoding="utf-8")
    assert cache.get("a.py", "d") is None
    blocked = tmp_path / "file-not-folder"
    blocked.write_text("", encoding="utf-8")
    unusable = Cache("rules", Options(), root=blocked)
    unusable.put("a.py", "d", _result())  # no exception
    assert unusable.get("a.py", "d") is None


def test_folder_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("NPU_MIGRATE_CACHE_DIR", str(tmp_path / "here"))
    assert cache_root() == tmp_path / "here"
    monkeypatch.delenv("NPU_MIGRATE_CACHE_DIR")
    assert cache_root().name == "npu-migrate"


def _writer(root, n, flip):
    cache = Cache("rules", Options(), root=Path(root))
    for i in range(n):
        result = _result()
        result.new_text = ("x" * 5000) if (i + flip) % 2 else "y\n"
        cache.put("a.py", "d", result)


def test_concurrent_writers_never_leave_half_an_entry(tmp_path):
    context = multiprocessing.get_context("fork")
    writers = [context.Process(target=_writer, args=(str(tmp_path), 300, k)) for k in range(2)]
    for w in writers:
        w.start()
    cache = Cache("rules", Options(), root=tmp_path)
    seen = set()
    while any(w.is_alive() for w in writers):
        got = cache.get("a.py", "d")
        if got is not None:
            seen.add(got.new_text[:1])
    for w in writers:
        w.join()
        assert w.exitcode == 0
    assert cache.get("a.py", "d").new_text[:1] in ("x", "y")
    assert not [p for p in cache.folder.rglob("*") if p.name.endswith(".tmp")]  # no leftovers


# -- through the runner -----------------------------------------------------------------------


@pytest.fixture
def tree(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for path in sorted((ROOT / "fixtures" / "pytorch").glob("*.py")):
        if not path.name.endswith(".expected.py"):
            shutil.copy(path, src / path.name)
    (src / "plain.py").write_text("import os\n", encoding="utf-8")
    (src / "gpu.py").write_text(GPU, encoding="utf-8")
    return sorted(str(p) for p in src.glob("*.py"))


def _no_migration(monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("migrated although cached")

    monkeypatch.setattr(dispatch, "migrate_source", fail)


@pytest.mark.parametrize("jobs", [1, 2])
def test_warm_run_equals_cold_run_without_migrating(tree, tmp_path, monkeypatch, jobs):
    cold = run(tree, Options(), RULES, jobs=jobs, cache=Cache(RULES.fingerprint, Options(), root=tmp_path / "c"))
    with monkeypatch.context() as m:
        _no_migration(m)
        warm = run(tree, Options(), RULES, jobs=jobs, cache=Cache(RULES.fingerprint, Options(), root=tmp_path / "c"))
    assert [o.result.to_dict() for o in warm] == [o.result.to_dict() for o in cold]
    assert [o.original_text for o in warm] == [o.original_text for o in cold]
    assert [dataclasses.replace(o.source, mtime_ns=0) for o in warm] == [
        dataclasses.replace(o.source, mtime_ns=0) for o in cold]
    assert any(o.result.changed for o in warm) and any(not o.result.changed for o in warm)


def test_a_changed_file_is_migrated_again(tree, tmp_path, monkeypatch):
    cache = Cache(RULES.fingerprint, Options(), root=tmp_path / "c")
    run(tree, Options(), RULES, cache=cache)
    gpu = [p for p in tree if p.endswith("gpu.py")][0]
    Path(gpu).write_text(GPU + "y = torch.zeros(1).cuda()\n", encoding="utf-8")
    seen = []
    real = dispatch.migrate_source
    monkeypatch.setattr(dispatch, "migrate_source", lambda t, p, o, r: seen.append(p) or real(t, p, o, r))
    outcomes = run(tree, Options(), RULES, cache=Cache(RULES.fingerprint, Options(), root=tmp_path / "c"))
    assert seen == [gpu]
    assert outcomes[tree.index(gpu)].result.new_text.count(".npu()") == 2


def test_a_rule_change_is_never_answered_from_the_cache(tree, tmp_path):
    extra = tmp_path / "mine.toml"
    extra.write_text(
        '[[method]]\ncode = "NPU199"\nfrom = "half"\nto = "bfloat16"\nmessage = "m"\n'
        'examples = [{ before = "x.half()\\n", after = "x.bfloat16()\\n" }]\n',
        encoding="utf-8",
    )
    Path(tree[0]).with_name("half.py").write_text("y = t.half()\n", encoding="utf-8")
    tree = sorted(tree + [str(Path(tree[0]).with_name("half.py"))])
    root = tmp_path / "c"
    first = run(tree, Options(), RULES, cache=Cache(RULES.fingerprint, Options(), root=root))
    assert not [o for o in first if o.result.path.endswith("half.py")][0].result.changed
    rules = load_rules([extra])
    outcomes = run(tree, Options(), rules, cache=Cache(rules.fingerprint, Options(), root=root))
    half = [o for o in outcomes if o.result.path.endswith("half.py")][0]
    assert half.result.new_text == "y = t.bfloat16()\n"
    # and a changed rule file is another rule set
    extra.write_text(extra.read_text(encoding="utf-8").replace('to = "bfloat16"', 'to = "float"'), encoding="utf-8")
    assert load_rules([extra]).fingerprint != rules.fingerprint


# -- the command line -------------------------------------------------------------------------


@pytest.mark.slow
def test_cli_warm_output_is_identical_and_no_cache_writes_nothing(run_cli, run_process, tmp_path):
    """(-j 2 forks workers: those runs in real processes, the others in this one.)"""
    src = tmp_path / "proj"
    shutil.copytree(ROOT / "fixtures" / "pytorch", src)
    cache_dir = tmp_path / "cache"
    env = {"NPU_MIGRATE_CACHE_DIR": str(cache_dir)}
    outputs = []
    for args in (["--check", "-j", "1"], ["--check", "-j", "2"], ["--check", "-j", "2"], ["--diff"],
                 ["--diff"], ["--format", "json"], ["--format", "json"]):
        proc = (run_process if "2" in args else run_cli)("proj", *args, "--color", "never", cwd=tmp_path, env=env)
        outputs.append((proc.returncode, proc.stdout, proc.stderr))
    assert cache_dir.is_dir()
    assert outputs[0] == outputs[1] == outputs[2]
    assert outputs[0][0] == 1 and b"would be migrated" in outputs[0][1]
    assert outputs[3] == outputs[4] and outputs[3][1].startswith(b"--- a/")
    assert outputs[5] == outputs[6]
    shutil.rmtree(cache_dir)
    proc = run_cli("proj", "--check", "--no-cache", "--color", "never", cwd=tmp_path, env=env)
    assert (proc.returncode, proc.stdout, proc.stderr) == outputs[0]
    assert not cache_dir.exists()


def test_cli_write_then_warm_check(run_cli, tmp_path):
    src = tmp_path / "proj"
    src.mkdir()
    (src / "train.py").write_text(GPU, encoding="utf-8")
    env = {"NPU_MIGRATE_CACHE_DIR": str(tmp_path / "cache")}
    assert run_cli("proj", "--check", cwd=tmp_path, env=env).returncode == 1
    assert run_cli("proj", "--write", cwd=tmp_path, env=env).returncode == 0
    assert "torch_npu" in (src / "train.py").read_text(encoding="utf-8")
    # The written file is new content: checked for real, and found clean.
    for _ in range(2):
        assert run_cli("proj", "--check", cwd=tmp_path, env=env).returncode == 0
    # Its clean result is in the index, for its new bytes; the entry of the old bytes (their
    # migrated text) is gone: a result that writes nothing has no entry of its own.
    assert list((tmp_path / "cache").rglob("*.json")) == []
    (index,) = (tmp_path / "cache").rglob("index")
    entries = json.loads(index.read_bytes())["entries"]
    train = os.path.abspath(src / "train.py")
    assert list(entries) == [train] and entries[train][0] == hashlib.sha256((src / "train.py").read_bytes()).hexdigest()
    assert entries[train][1]["new_text"] is None


def test_settings_folders_unused_for_a_month_are_pruned_and_only_ours(tmp_path):
    import os
    import time

    from npu_migrate.cache import PRUNE_AFTER_DAYS

    used = Cache("rules-a", Options(), tmp_path)
    used.put("/x/a.py", "d1", FileResult(path="/x/a.py"))
    old = Cache("rules-b", Options(), tmp_path)
    old.put("/x/a.py", "d1", FileResult(path="/x/a.py"))
    foreign = old.folder.parent / "not-a-cache"
    foreign.mkdir()
    month_ago = time.time() - (PRUNE_AFTER_DAYS + 1) * 86400
    for folder in (old.folder, foreign):
        os.utime(folder, (month_ago, month_ago))
    recent = time.time() - 86400
    os.utime(used.folder, (recent, recent))

    again = Cache("rules-a", Options(), tmp_path)  # a run with the first settings
    assert again.folder == used.folder and again.folder.exists()
    assert again.get("/x/a.py", "d1") is not None
    assert not old.folder.exists()  # unused for a month: removed
    assert foreign.exists()  # no CACHEDIR.TAG: not ours, never removed
    assert (used.folder / "CACHEDIR.TAG").read_text().startswith("Signature: 8a477f597d28d172789f06886806bc55")
    assert used.folder.stat().st_mtime > recent  # touched by the run


# Each data file a result depends on, an edit of it in a source checkout, and a file whose warm
# output must change with it. (rules/ lies outside the package in a checkout, so the package's own
# fingerprint does not see it.)
DATA_EDITS = [
    ("targets/torch_npu.toml", '"torch_npu.npu.synchronize" = ["2.1.0.post8..2.14.0"]\n', "",
     "t.py", "import torch\ntorch.cuda.synchronize()\n"),
    ("targets/tf_adapter.toml", '"npu_config_proto" = ["5.0", "9.0"]\n', '"npu_config_proto" = ["5.0"]\n', "tf1.py", "import tensorflow as tf\nsess = tf.Session(config=tf.ConfigProto())\n"),
    ("targets/mindspore.toml",
     '"mindspore.context.set_context:device_target deprecated" = { releases = ["2.7.0..2.10.0"], '
     'instead = "api mindspore.set_device()" }\n', "", "ms1.py",
     'from mindspore import context\ncontext.set_context(mode=context.GRAPH_MODE, device_target="GPU")\n'),
    ("torch.toml", '"stream", "streams", "synchronize",', '"stream", "streams",', "t2.py",
     "import torch\ntorch.cuda.synchronize()\n"),
]


@pytest.mark.slow
def test_editing_any_data_file_of_a_checkout_changes_the_warm_run(tmp_path):
    """the key holds every file under rules/ (rule files and the three target tables): in one
    source checkout, each table is edited in turn (the others as shipped) and the warm run after
    the edit must give its file another result than the first run; a key without that table would
    give the first run's, from the cache. One checkout and one process per edit (5 in all)."""
    import json
    import subprocess
    import sys

    checkout = tmp_path / "checkout"
    shutil.copytree(ROOT / "npu_migrate", checkout / "npu_migrate", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "rules", checkout / "rules")
    for _, _, _, name, text in DATA_EDITS:
        (tmp_path / name).write_text(text)
    env = {**os.environ, "PYTHONPATH": str(checkout), "NPU_MIGRATE_CACHE_DIR": str(tmp_path / "cache"),
           "NO_COLOR": "1"}

    def results() -> dict:
        """Each file's edits and findings, from a warm run of the checkout."""
        done = subprocess.run([sys.executable, "-m", "npu_migrate", *(d[3] for d in DATA_EDITS), "--format", "json",
                               "-j", "1", "--mindspore-version", "2.7"], cwd=tmp_path, env=env, capture_output=True,
                              text=True)
        assert done.returncode in (0, 1), done.stderr
        return {f["path"]: (f["edits"], f["findings"]) for f in json.loads(done.stdout)["files"]}

    first = results()  # fills the cache
    assert sorted(first) == sorted(d[3] for d in DATA_EDITS)
    for table, old, new, name, _ in DATA_EDITS:
        data = checkout / "rules" / table
        content = data.read_text(encoding="utf-8")
        assert content.count(old) == 1
        data.write_text(content.replace(old, new), encoding="utf-8")
        assert results()[name] != first[name], table  # the warm run sees the edit
        data.write_text(content, encoding="utf-8")


# ---------------------------------------------------------------------- a cache entry is data: whatever it holds, nothing is written that a fresh run would not write


def _entry_files(cache_dir: Path):
    return sorted(p for p in cache_dir.rglob("*.json"))


def _entry_from_index(cache_dir: Path, path: str) -> Path:
    """The entry `path`'s result would have (cache.Cache._entry), made from the index, which
    holds it (a result that writes nothing has no entry of its own); the index is removed, so
    that the entry is what the next run looks up."""
    (index,) = cache_dir.rglob("index")
    data = json.loads(index.read_bytes())
    digest, result = data["entries"][os.path.abspath(path)]
    key = hashlib.sha256(os.path.abspath(path).encode()).hexdigest()
    entry = index.parent / key[:2] / f"{key[2:]}.json"
    entry.parent.mkdir(exist_ok=True)
    entry.write_text(json.dumps({"digest": digest, "settings": data["settings"], "path": os.path.abspath(path),
                                 "result": result}), encoding="utf-8")
    index.unlink()
    return entry


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
@pytest.mark.slow
def test_a_cache_hit_never_writes_what_a_fresh_run_would_not(forged):
    with tempfile.TemporaryDirectory() as tmp, _cwd(Path(tmp) / "work"):
        # (the current folder is work/: a relative path that leads out lands in tmp, and shows)
        tmp = Path(tmp)
        work = tmp / "work"
        tree, fresh, cache_dir = work / "tree", work / "fresh", tmp / "cache"
        for folder in (tree, fresh):
            folder.mkdir()
            (folder / "train.py").write_bytes(GPU_SCRIPT)
            (folder / "clean.py").write_bytes(b"x = 1\n")
        assert invoke([str(tree), "--check"], cache_dir).exit_code == 1  # fills the cache
        entries = _entry_files(cache_dir)
        # train.py's entry; clean.py's result is in the index (it writes nothing). That result
        # becomes an entry of its own, the index goes: each file's lookup reads its forged entry.
        assert len(entries) == 1
        entries.append(_entry_from_index(cache_dir, str(tree / "clean.py")))
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
                            GPU_SCRIPT if name == "train.py" else b"x = 1\n"), (name, data, r.output)
        if forged[0] != "bound":
            assert after == expected, r.output
        assert sorted(os.listdir(tmp)) == ["cache", "work"] and sorted(os.listdir(work)) == ["fresh", "tree"]
        assert not os.path.exists("/tmp/npu-migrate-pwned.py")


@FEW
@given(_hostile_entries())
@pytest.mark.slow
def test_a_cache_entry_not_bound_to_the_file_is_never_used(forged):
    if forged[0] == "bound":
        forged = ("other-digest", forged[1])
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "train.py").write_bytes(GPU_SCRIPT)
        cold = invoke([str(tmp / "train.py"), "--check", "--format", "json"], tmp / "cache")
        (entry,) = _entry_files(tmp / "cache")
        entry.write_bytes(_forge(forged, json.loads(entry.read_bytes())))

        warm = invoke([str(tmp / "train.py"), "--check", "--format", "json"], tmp / "cache")

        assert (warm.exit_code, warm.output) == (cold.exit_code, cold.output)
        assert (tmp / "train.py").read_bytes() == GPU_SCRIPT


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "symlink", "huge"])
def test_a_cache_entry_that_is_not_a_small_regular_file_is_a_miss(tmp_path, kind, fifo):
    (tmp_path / "train.py").write_bytes(GPU_SCRIPT)
    cache_dir = tmp_path / "cache"
    cold = invoke([str(tmp_path / "train.py"), "--check"], cache_dir)
    (entry,) = _entry_files(cache_dir)
    entry.unlink()
    if kind == "fifo":
        fifo(entry)
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
                       timeout=600)
    assert (r.returncode, r.stdout.decode() + r.stderr.decode()) == (1, cold.output)


@pytest.mark.parametrize("neighbour", ["new", "user's"])
def test_a_cached_nothing_changed_result_with_generated_files_writes_nothing(tmp_path, neighbour):
    """an entry bound to the file (right path, digest and settings) whose result says
    "unchanged" but carries generated files is not a "nothing to do" result: on --write the file
    is migrated again, and what is written is what this run computes."""
    tree, cache_dir = tmp_path / "tree", tmp_path / "cache"
    tree.mkdir()
    (tree / "train.py").write_bytes(b"x = 1\n")  # nothing to do
    helper = tree / "helper.py"
    if neighbour == "user's":
        helper.write_bytes(b"# my helper\nkeep = True\n")
    assert invoke([str(tree), "--check"], cache_dir).exit_code == 0  # fills the cache
    entry = _entry_from_index(cache_dir, str(tree / "train.py"))
    forged = json.loads(entry.read_bytes())
    forged["result"]["extra_files"] = {str(helper): "# my helper\nos.system('touch PWNED')\n"}
    entry.write_text(json.dumps(forged))
    before = tree_state(tree)

    r = invoke([str(tree), "--write"], cache_dir)

    assert r.exit_code == 0, r.output
    assert tree_state(tree) == before, r.output
    assert "helper.py" not in r.output


def test_the_cache_folder_is_private_and_must_be_the_users(tmp_path):
    cache_dir = tmp_path / "a" / "cache"
    (tmp_path / "train.py").write_bytes(GPU_SCRIPT)
    invoke([str(tmp_path / "train.py"), "--check"], cache_dir)
    assert stat.S_IMODE(cache_dir.stat().st_mode) == 0o700
    for folder in cache_dir.rglob("*"):
        if folder.is_dir():
            assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder

    cache_dir.chmod(0o777)  # opened up by someone: not used, and its mode is not ours to change
    r = invoke([str(tmp_path / "train.py"), "--check"], cache_dir)
    assert r.exit_code == 1
    assert (f"npu-migrate: warning: the cache folder {cache_dir} is writable by other users (mode 0777) and "
            "npu-migrate does not change the mode of a folder: make it private "
            f"(chmod 700 {cache_dir}) or set NPU_MIGRATE_CACHE_DIR to another folder; running without the cache\n"
            ) in r.output
    assert stat.S_IMODE(cache_dir.stat().st_mode) == 0o777


@pytest.mark.parametrize("mode", [0o1777, 0o755, 0o3775])
def test_an_existing_cache_folder_keeps_its_mode_and_the_cache_is_a_private_subfolder(tmp_path, mode):
    """NPU_MIGRATE_CACHE_DIR naming an existing shared folder (/tmp-like 1777, or one
    others may read) was chmodded to 0700. Its mode is kept; the cache is a private subfolder."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(mode)
    (tmp_path / "train.py").write_bytes(GPU_SCRIPT)

    cold = invoke([str(tmp_path / "train.py"), "--check"], shared)
    warm = invoke([str(tmp_path / "train.py"), "--check"], shared)

    assert stat.S_IMODE(shared.stat().st_mode) == mode
    private = shared / f"npu-migrate-{os.geteuid()}"
    assert os.listdir(shared) == [private.name]
    assert stat.S_IMODE(private.stat().st_mode) & 0o777 == 0o700  # (setgid is inherited from a 2775 folder)
    assert len(_entry_files(private)) == 1
    assert cold.exit_code == warm.exit_code == 1 and cold.output == warm.output and "warning" not in cold.output


def test_a_cache_folder_others_may_write_without_the_sticky_bit_is_refused_and_left_alone(tmp_path):
    """in a group-writable folder without the sticky bit (2775) a member of the group
    could swap a private subfolder for their own: the cache is not used, the folder not touched."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o2775)
    (tmp_path / "train.py").write_bytes(GPU_SCRIPT)

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
    (tmp_path / "train.py").write_bytes(GPU_SCRIPT)

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
    (tmp_path / "train.py").write_bytes(GPU_SCRIPT)
    r = invoke([str(tmp_path / "train.py"), "--check"], cache_dir)
    assert r.exit_code == 1
    assert (f"npu-migrate: warning: the cache folder {cache_dir} belongs to another user (uid 1234); "
            "running without the cache") in r.output
    assert os.listdir(cache_dir) == []


# -- the index: one read answers the files whose result writes nothing ------------------------


@pytest.fixture
def mostly_clean(tree):
    """The pytorch fixtures (most change) plus files with nothing to do (most of a real tree)."""
    folder = Path(tree[0]).parent
    for n in range(12):
        (folder / f"clean{n:02}.py").write_text(f"import os\nx = {n}\n", encoding="utf-8")
    return sorted(str(p) for p in folder.glob("*.py"))


def _fresh_cache(root, rules=RULES, options=None):
    return Cache(rules.fingerprint, options or Options(), root=root)


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_warm_run_reads_one_index_and_an_entry_only_per_file_with_something_to_do(mostly_clean, tmp_path,
                                                                                      monkeypatch, jobs):
    cold = run(mostly_clean, Options(), RULES, jobs=jobs, cache=_fresh_cache(tmp_path / "c"))
    changed = [o.result.path for o in cold if o.result.changed]
    assert 0 < len(changed) < len(mostly_clean) - 12
    # The cold run made an entry only for each file with something to write: the index holds the rest.
    assert sorted(json.loads(e.read_bytes())["path"] for e in _entry_files(tmp_path / "c")) == sorted(changed)
    warm_cache = _fresh_cache(tmp_path / "c")
    index = warm_cache.folder / "index"
    written = index.stat().st_mtime_ns
    with monkeypatch.context() as m:
        _no_migration(m)  # (-j 2: no worker is started either, or it would fail there)
        warm = run(mostly_clean, Options(), RULES, jobs=jobs, cache=warm_cache)
    assert [o.result.to_dict() for o in warm] == [o.result.to_dict() for o in cold]
    assert [o.original_text for o in warm] == [o.original_text for o in cold]
    # One read of the index; an entry of its own only for each file with something to write.
    assert (warm_cache.index_reads, warm_cache.entries_read, warm_cache.hits) == (1, len(changed), len(mostly_clean))
    assert index.stat().st_mtime_ns == written  # a warm run writes no index


def test_an_interrupted_run_keeps_the_results_it_finished(mostly_clean, tmp_path):
    """runner.run saves the index when the run is interrupted too: the results that write
    nothing have no entry of their own, and the next run takes those it finished from it."""
    finished = []

    def on_done(outcome):
        finished.append(outcome.result.path)
        if len(finished) == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run(mostly_clean, Options(), RULES, jobs=1, on_done=on_done, cache=_fresh_cache(tmp_path / "c"))
    warm_cache = _fresh_cache(tmp_path / "c")
    run(mostly_clean, Options(), RULES, jobs=1, cache=warm_cache)
    assert warm_cache.hits == 5 and warm_cache.misses == len(mostly_clean) - 5


def test_the_index_holds_only_results_that_write_nothing(mostly_clean, tmp_path):
    cold = run(mostly_clean, Options(), RULES, cache=_fresh_cache(tmp_path / "c"))
    data = json.loads((_fresh_cache(tmp_path / "c").folder / "index").read_bytes())
    assert sorted(data["entries"]) == sorted(os.path.abspath(o.result.path) for o in cold if not o.result.changed)
    assert all(entry[1]["new_text"] is None and not entry[1]["edits"] and not entry[1]["extra_files"]
               for entry in data["entries"].values())


def _forge_index(kind: str, index: Path, clean: str) -> None:
    """Damage the index, or forge it, so that if it were used the clean file's result would not
    be a fresh run's (`skipped` says "generated": a result that writes nothing, but another one)."""
    data = json.loads(index.read_bytes())
    key = os.path.abspath(clean)
    result = data["entries"][key][1]
    result["skipped"] = "generated"
    if kind == "other-settings":
        data["settings"] = "0" * 20
    elif kind == "other-format":
        data["format"] = 999
    elif kind == "entries-not-a-dict":
        data["entries"] = list(data["entries"].items())
    elif kind == "other-digest":
        data["entries"][key][0] = "0" * 64
    elif kind == "other-path":
        data["entries"][os.path.join(os.path.dirname(key), "elsewhere.py")] = data["entries"].pop(key)
    elif kind == "bad-shape":
        data["entries"][key] = {"digest": data["entries"][key][0], "result": result}
    elif kind == "new-text":  # bound to the file, but saying something to write: the index never answers that
        result["new_text"] = "import os\nos.system('touch PWNED')\n"
    elif kind == "edits":
        result["edits"] = _result().to_dict()["edits"]
    elif kind == "extra-files":
        result["extra_files"] = {os.path.join(os.path.dirname(key), "boot.py"): "print('PWNED')\n"}
    raw = json.dumps(data).encode()
    if kind == "truncated":
        raw = raw[:-2]
    index.write_bytes(raw)


@pytest.mark.parametrize("kind", ["bound", "truncated", "other-settings", "other-format", "entries-not-a-dict",
                                  "other-digest", "other-path", "bad-shape", "new-text", "edits", "extra-files"])
def test_a_damaged_foreign_or_forged_index_is_not_used(mostly_clean, tmp_path, kind):
    cold = run(mostly_clean, Options(), RULES, cache=_fresh_cache(tmp_path / "c"))
    clean = [p for p in mostly_clean if p.endswith("clean03.py")][0]
    index = _fresh_cache(tmp_path / "c").folder / "index"
    _forge_index(kind, index, clean)
    forged = index.read_bytes()
    for writes in (False, True):  # a report run, and a run that writes (it takes "nothing to do" only)
        index.write_bytes(forged)  # (a run that finds it unusable writes a new one)
        cache = Cache(RULES.fingerprint, Options(), root=tmp_path / "c", reuse_changed=not writes)
        warm = [o.result.to_dict() for o in run(mostly_clean, Options(), RULES, cache=cache)]
        expected = [o.result.to_dict() for o in cold]
        if kind == "bound":
            # the control: an entry bound to the file is used (the folder is the user's own, like
            # the entries), so the forgeries above would show
            expected[mostly_clean.index(clean)]["skipped"] = "generated"
        assert warm == expected, kind


def test_an_indexed_file_that_changed_is_migrated_again(mostly_clean, tmp_path, monkeypatch):
    run(mostly_clean, Options(), RULES, cache=_fresh_cache(tmp_path / "c"))
    clean = [p for p in mostly_clean if p.endswith("clean05.py")][0]
    Path(clean).write_text(GPU, encoding="utf-8")
    seen = []
    real = dispatch.migrate_source
    monkeypatch.setattr(dispatch, "migrate_source", lambda t, p, o, r: seen.append(p) or real(t, p, o, r))
    outcomes = run(mostly_clean, Options(), RULES, cache=_fresh_cache(tmp_path / "c"))
    assert seen == [clean]
    assert outcomes[mostly_clean.index(clean)].result.new_text.count(".npu()") == 1


def test_an_index_is_never_shared_by_other_rules_or_options(mostly_clean, tmp_path):
    half = Path(mostly_clean[0]).with_name("half.py")
    half.write_text("y = t.half()\n", encoding="utf-8")
    files = sorted(mostly_clean + [str(half)])
    run(files, Options(), RULES, cache=_fresh_cache(tmp_path / "c"))
    assert os.path.abspath(half) in _fresh_cache(tmp_path / "c").index()  # nothing to do for it, indexed
    extra = tmp_path / "mine.toml"
    extra.write_text(
        '[[method]]\ncode = "NPU199"\nfrom = "half"\nto = "bfloat16"\nmessage = "m"\n'
        'examples = [{ before = "x.half()\\n", after = "x.bfloat16()\\n" }]\n',
        encoding="utf-8",
    )
    rules = load_rules([extra])
    assert _fresh_cache(tmp_path / "c", rules).index() == {}
    outcomes = run(files, Options(), rules, cache=_fresh_cache(tmp_path / "c", rules))
    assert outcomes[files.index(str(half))].result.new_text == "y = t.bfloat16()\n"
    # a changed option is another settings folder: no index there, and a copied one names other settings
    other = Options(add_import=False)
    assert _fresh_cache(tmp_path / "c", options=other).index() == {}
    copied = _fresh_cache(tmp_path / "c", options=other)
    copied.folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(_fresh_cache(tmp_path / "c").folder / "index", copied.folder / "index")
    assert _fresh_cache(tmp_path / "c", options=other).index() == {}


# -- the project scan's read serves the index (project_values.scan `seen`, runner.run) ----------


def _scanned(files):
    from npu_migrate.project_values import scan

    seen: dict = {}
    scan(files, seen)
    return seen


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_warm_run_reads_the_files_the_index_answers_once_in_the_project_scan(mostly_clean, tmp_path, monkeypatch,
                                                                                 jobs):
    """The scan reads every .py file before the run (its device settings are part of the cache
    key); a file the index answers for the digest of those bytes is not read again."""
    import npu_migrate.runner as runner_module

    cold = run(mostly_clean, Options(), RULES, jobs=jobs, cache=_fresh_cache(tmp_path / "c"))
    changed = [o.result.path for o in cold if o.result.changed]
    read = []
    real_read = runner_module.read_source
    monkeypatch.setattr(runner_module, "read_source", lambda path, *a: read.append(path) or real_read(path, *a))
    warm_cache = _fresh_cache(tmp_path / "c")
    with monkeypatch.context() as m:
        _no_migration(m)
        warm = run(mostly_clean, Options(), RULES, jobs=jobs, cache=warm_cache, seen=_scanned(mostly_clean))
    assert [o.result.to_dict() for o in warm] == [o.result.to_dict() for o in cold]
    assert [o.original_text for o in warm] == [o.original_text for o in cold]
    assert sorted(read) == sorted(changed)  # read (again) only for what the index does not hold
    assert (warm_cache.index_reads, warm_cache.entries_read, warm_cache.hits) == (1, len(changed), len(mostly_clean))
    # the digest the index is asked with is that of the file's bytes, as a read gives it
    assert [o.source.digest for o in warm] == [o.source.digest for o in cold]


def test_a_file_changed_since_the_index_is_migrated_again_when_the_scan_read_it(mostly_clean, tmp_path, monkeypatch):
    run(mostly_clean, Options(), RULES, cache=_fresh_cache(tmp_path / "c"))
    clean = [p for p in mostly_clean if p.endswith("clean05.py")][0]
    Path(clean).write_text(GPU, encoding="utf-8")
    migrated = []
    real = dispatch.migrate_source
    monkeypatch.setattr(dispatch, "migrate_source", lambda t, p, o, r: migrated.append(p) or real(t, p, o, r))
    cache = _fresh_cache(tmp_path / "c")
    outcomes = run(mostly_clean, Options(), RULES, cache=cache, seen=_scanned(mostly_clean))
    assert migrated == [clean]
    assert outcomes[mostly_clean.index(clean)].result.new_text.count(".npu()") == 1
    # it has something to write now: the index no longer holds it, the others stay
    index = _fresh_cache(tmp_path / "c").index()
    assert os.path.abspath(clean) not in index
    assert [p for p in mostly_clean if os.path.abspath(p) in index] == [
        p for p in mostly_clean if ("clean" in p or p.endswith("plain.py")) and p != clean]
    # A file that changes between the scan and the lookup gets the result of the bytes scanned
    # (whose device settings made the run's options): one snapshot, as a file changed just after
    # a run is; the next run sees the new bytes.
    seen = _scanned(mostly_clean)
    other = [p for p in mostly_clean if p.endswith("clean07.py")][0]
    Path(other).write_text(GPU, encoding="utf-8")
    outcomes = run(mostly_clean, Options(), RULES, cache=_fresh_cache(tmp_path / "c"), seen=seen)
    assert outcomes[mostly_clean.index(other)].result.new_text is None
    outcomes = run(mostly_clean, Options(), RULES, cache=_fresh_cache(tmp_path / "c"), seen=_scanned(mostly_clean))
    assert outcomes[mostly_clean.index(other)].result.new_text.count(".npu()") == 1


def test_the_scan_hands_on_only_files_it_read_whole(tmp_path):
    from npu_migrate.project_values import _LIMIT
    from npu_migrate.source import read_source

    small, big, other = tmp_path / "small.py", tmp_path / "big.py", tmp_path / "run.sh"
    small.write_bytes(b"# -*- coding: latin-1 -*-\nx = '\xe9'\n")
    big.write_bytes(b"x = 1\n" * (_LIMIT // 6 + 1))
    other.write_text("python train.py\n", encoding="utf-8")
    seen = _scanned([str(small), str(big), str(other)])
    assert list(seen) == [str(small)]
    fresh = read_source(str(small))
    assert dataclasses.replace(seen[str(small)], text="", encoding="") == dataclasses.replace(fresh, text="", encoding="")


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_warm_cli_run_reads_only_the_files_the_index_does_not_answer(tmp_path, monkeypatch, jobs):
    """Through the command line: the pipeline hands the project scan's reads to the runner."""
    from helpers import cli_in_process

    import npu_migrate.runner as runner_module

    src = tmp_path / "proj"
    src.mkdir()
    for n in range(5):
        (src / f"clean{n}.py").write_text(f"import os\nx = {n}\n", encoding="utf-8")
    (src / "train.py").write_text(GPU, encoding="utf-8")
    env = {"NPU_MIGRATE_CACHE_DIR": str(tmp_path / "cache")}
    import npu_migrate.pipeline as pipeline
    import npu_migrate.project_values as project_values

    monkeypatch.setattr(pipeline, "IN_PROCESS_UP_TO", -1)  # -j 2 starts workers, however little the work
    monkeypatch.setattr(pipeline, "SHARED_UP_TO", -1)

    kept = []
    real_scan = project_values.scan
    monkeypatch.setattr(project_values, "scan",
                        lambda files, seen=None, *rest: kept.append(seen) or real_scan(files, seen, *rest))
    cold = cli_in_process("proj", "--check", "-j", jobs, cwd=tmp_path, env=env)
    assert kept == [None]  # no index anywhere yet: a cold run keeps no digests (it would hash every file twice)
    read = []
    real = runner_module.read_source
    monkeypatch.setattr(runner_module, "read_source", lambda p, *a: read.append(os.path.basename(p)) or real(p, *a))
    warm = cli_in_process("proj", "--check", "-j", jobs, cwd=tmp_path, env=env)
    assert (warm.returncode, warm.stdout, warm.stderr) == (cold.returncode, cold.stdout, cold.stderr)
    assert cold.returncode == 1
    # train.py has something to write: not in the index; its entry is found by the digest the
    # scan took, without reading it again (a text report wants no diff)
    assert read == []
    assert len(kept) == 2 and kept[1] is not None and len(kept[1]) == 6
    (src / "clean3.py").write_text("import torch\nx = torch.ones(1).cuda()\n", encoding="utf-8")
    read.clear()
    again = cli_in_process("proj", "--check", "-j", jobs, "--format", "json", cwd=tmp_path, env=env)
    assert sorted(read) == ["clean3.py", "train.py"]  # (a JSON report holds the diffs: their texts are read)
    assert [f["path"] for f in json.loads(again.stdout)["files"] if f["edits"]] == ["proj/clean3.py", "proj/train.py"]
    read.clear()
    (src / "clean4.py").write_text("import torch\nx = torch.ones(1).cuda()\n", encoding="utf-8")
    last = cli_in_process("proj", "--check", "-j", jobs, cwd=tmp_path, env=env)
    # changed since: no stored result for the scanned bytes, so read and migrated (by a worker
    # process with -j 2, whose reads this process does not see)
    assert read == (["clean4.py"] if jobs == "1" else [])
    assert last.returncode == 1 and "3 files would be migrated" in last.stderr.decode(), last.stderr


# -- the project scan's facts, kept between runs that write nothing (cache.ScanFacts) -------------


@pytest.fixture
def settings_tree(tmp_path):
    """A torch-less settings module whose device setting a torch module reads, and files without one."""
    src = tmp_path / "proj"
    src.mkdir()
    (src / "settings.py").write_text('DEVICE = "cuda"\n', encoding="utf-8")
    (src / "train.py").write_text("import torch\nimport settings\nx = torch.ones(1).to(settings.DEVICE)\n",
                                  encoding="utf-8")
    for n in range(3):
        (src / f"util{n}.py").write_text(f"x = {n}\n", encoding="utf-8")
    return src


def test_the_scan_takes_a_files_facts_only_for_its_own_bytes(settings_tree, monkeypatch):
    import npu_migrate.project_values as pv

    files = sorted(str(p) for p in settings_tree.glob("*.py"))
    found: dict = {}
    fresh = pv.scan(files, found=found)
    assert fresh == (("settings.DEVICE",), ()) and len(found) == 5
    searched = []
    real = pv._facts
    monkeypatch.setattr(pv, "_facts", lambda text, path: searched.append(os.path.basename(path)) or real(text, path))
    assert pv.scan(files, known=found) == fresh and searched == []
    # a file whose bytes changed is searched again, and its new facts count
    (settings_tree / "util1.py").write_text('import os\nSUPPORTED_DEVICES = ["cpu", "cuda"]\n', encoding="utf-8")
    again: dict = {}
    assert pv.scan(files, known=found, found=again) == (("settings.DEVICE", "util1.SUPPORTED_DEVICES"), ())
    assert searched == ["util1.py"] and again != found
    # a setting removed is gone too
    (settings_tree / "settings.py").write_text('DEVICE = "cpu"\n', encoding="utf-8")
    assert pv.scan(files, known=again) == (("util1.SUPPORTED_DEVICES",), ())
    # entries that are not facts of these bytes are not taken
    key = os.path.abspath(files[files.index(str(settings_tree / "util0.py"))])
    for forged in (["0" * 64, True, ["x.DEVICE"]], [again[key][0], "yes", []], [again[key][0], False, [1]],
                   {"digest": again[key][0]}, [again[key][0], True]):
        assert pv.scan(files, known={**again, key: forged}) == pv.scan(files), forged


def _facts_file(cache_dir):
    found = list(Path(cache_dir).rglob("scan-facts/*"))
    assert len(found) == 1
    return found[0]


def test_scan_facts_are_kept_by_runs_that_write_nothing_and_never_read_by_runs_that_write(settings_tree, tmp_path):
    from helpers import cli_in_process

    env = {"NPU_MIGRATE_CACHE_DIR": str(tmp_path / "cache")}
    cold = cli_in_process("proj", "--diff", cwd=tmp_path, env=env)
    # the setting moves to the NPU, and its reader loads torch_npu (the key the scan found)
    assert b"+DEVICE = \"npu\"" in cold.stdout and b"+import torch_npu" in cold.stdout
    facts = _facts_file(tmp_path / "cache")
    stored = json.loads(facts.read_bytes())
    settings_py = os.path.abspath(settings_tree / "settings.py")
    assert stored["files"][settings_py][1:] == [False, ["settings.DEVICE"], [], [], [], [], [], []]
    assert cli_in_process("proj", "--diff", cwd=tmp_path, env=env).stdout == cold.stdout
    # Forged (bound to the bytes, naming no setting): a report run believes its own private cache
    # folder (the control: the forgery would show), a run that writes reads no facts.
    stored["files"][settings_py][2] = []
    facts.write_text(json.dumps(stored), encoding="utf-8")
    forged = cli_in_process("proj", "--diff", "--no-cache", cwd=tmp_path, env=env)
    assert forged.stdout == cold.stdout
    believed = cli_in_process("proj", "--diff", "-j", "1", cwd=tmp_path, env=env)
    assert b"+import torch_npu" not in believed.stdout  # (other options, another settings folder)
    copy = tmp_path / "copy"
    shutil.copytree(settings_tree, copy / "proj")
    assert cli_in_process("proj", "--write", cwd=copy, env={"NPU_MIGRATE_CACHE_DIR": str(tmp_path / "fresh")}
                          ).returncode == 0
    facts.write_text(json.dumps(stored), encoding="utf-8")
    assert cli_in_process("proj", "--write", cwd=tmp_path, env=env).returncode == 0
    assert tree_state(settings_tree) == tree_state(copy / "proj")
    assert "import torch_npu" in (settings_tree / "train.py").read_text(encoding="utf-8")


def test_scan_facts_of_other_code_or_damaged_are_not_used(tmp_path):
    from npu_migrate.cache import ScanFacts

    facts = ScanFacts("a" * 32, "/p", root=tmp_path / "c")
    facts.load()
    facts.save({"/p/a.py": ["0" * 64, False, []]})
    assert ScanFacts("a" * 32, "/p", root=tmp_path / "c").load() == {"/p/a.py": ["0" * 64, False, []]}
    assert ScanFacts("b" * 32, "/p", root=tmp_path / "c").load() == {}  # another project_values.py
    assert ScanFacts("a" * 32, "/q", root=tmp_path / "c").load() == {}  # another project: its own file
    path = _facts_file(tmp_path / "c")
    path.write_text(json.dumps({"key": "b" * 32, "files": {"/p/a.py": ["0" * 64, True, []]}}), encoding="utf-8")
    assert ScanFacts("a" * 32, "/p", root=tmp_path / "c").load() == {}  # a file that names another key
    path.write_text('{"key": "' + "a" * 32 + '", "files": {', encoding="utf-8")
    assert ScanFacts("a" * 32, "/p", root=tmp_path / "c").load() == {}  # truncated
    # the facts of a project no run wrote for a month go when another project's are written
    month_ago = path.stat().st_mtime - 31 * 86400
    os.utime(path, (month_ago, month_ago))
    other = ScanFacts("a" * 32, "/q", root=tmp_path / "c")
    other.load()
    other.save({"/q/b.py": ["1" * 64, False, []]})
    assert [p.name for p in path.parent.iterdir()] == [other.name]
