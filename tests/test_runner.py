"""The runner: same results in the same order whatever -j is; one file's failure -- even a
worker process that dies under it -- never stops the others."""

from __future__ import annotations

import os
import shutil
import signal
import sys
from pathlib import Path

import pytest

from npu_migrate import dispatch
from npu_migrate.options import Options
from npu_migrate.rules import default_rules
from npu_migrate.runner import BATCH, run

ROOT = Path(__file__).resolve().parent.parent
RULES = default_rules()
GPU = "import torch\nx = torch.zeros(2).cuda()\n"
PLAIN = "import os\nprint(os.sep)\n"


@pytest.fixture
def tree(tmp_path):
    """The PyTorch fixtures plus small files: some migrate, some need nothing."""
    for src in sorted((ROOT / "fixtures" / "pytorch").glob("*.py")):
        if not src.name.endswith(".expected.py"):
            shutil.copy(src, tmp_path / src.name)
    for i in range(7):
        (tmp_path / f"gpu_{i}.py").write_text(GPU.replace("2", str(i + 2)), encoding="utf-8")
        (tmp_path / f"plain_{i}.py").write_text(PLAIN, encoding="utf-8")
    return sorted(str(p) for p in tmp_path.glob("*.py"))


def _dicts(outcomes):
    return [o.result.to_dict() for o in outcomes]


def _tag_with_process(monkeypatch):
    """Each result says which process migrated it (its pid, in `skipped`)."""
    real = dispatch.migrate_source

    def tagged(text, path, options, rules):
        result = real(text, path, options, rules)
        result.skipped = str(os.getpid())
        return result

    monkeypatch.setattr(dispatch, "migrate_source", tagged)


def _untagged(outcomes):
    """_dicts of tagged outcomes, the tags taken off."""
    for outcome in outcomes:
        outcome.result.skipped = None
    return _dicts(outcomes)


def test_same_results_in_the_same_order_for_any_jobs(tree):
    one = run(tree, Options(), RULES, jobs=1)
    assert [o.result.path for o in one] == tree
    assert sum(o.result.changed for o in one) >= 7
    for jobs in (2, 3):
        many = run(tree, Options(), RULES, jobs=jobs)
        assert _dicts(many) == _dicts(one)
        assert [o.original_text for o in many] == [o.original_text for o in one]


def test_jobs_1_runs_in_this_process(tree, monkeypatch):
    _tag_with_process(monkeypatch)
    assert {o.result.skipped for o in run(tree, Options(), RULES, jobs=1)} == {str(os.getpid())}
    workers = {o.result.skipped for o in run(tree, Options(), RULES, jobs=2)}
    assert len(workers) == 2 and str(os.getpid()) not in workers


def _crashing(how):
    real = dispatch.migrate_source

    def migrate(text, path, options, rules):
        if "CRASH" in text:
            if how == "killed":  # the out-of-memory killer, or a crash in native code
                os.kill(os.getpid(), signal.SIGKILL)
            elif how == "exit":
                os._exit(3)
            elif how == "memory":
                raise MemoryError()
        return real(text, path, options, rules)

    return migrate


@pytest.mark.parametrize(
    "how,error",
    [
        ("killed", "internal error: the worker process died (killed by signal 9)"),
        ("exit", "internal error: the worker process died (exit code 3)"),
        ("memory", "internal error: MemoryError: "),
    ],
)
def test_a_worker_that_dies_fails_only_its_file(tree, monkeypatch, tmp_path, how, error):
    expected = {o.result.path: o.result.to_dict() for o in run(tree, Options(), RULES, jobs=1)}
    # Two bad files, placed so that each lands inside a batch with good files after it.
    bad = [str(tmp_path / "a_crash.py"), str(tmp_path / "zz_crash.py")]
    for path in bad:
        Path(path).write_text(GPU + "# CRASH\n", encoding="utf-8")
    paths = sorted(tree + bad)
    assert len(paths) > 3 * BATCH
    monkeypatch.setattr(dispatch, "migrate_source", _crashing(how))
    done = []
    outcomes = run(paths, Options(), RULES, jobs=2, on_done=done.append)
    assert [o.result.path for o in outcomes] == paths
    assert len(done) == len(paths)
    for o in outcomes:
        if o.result.path in bad:
            assert o.result.error == error
            assert not o.result.changed
        else:
            assert o.result.to_dict() == expected[o.result.path]


def test_unreadable_and_generated_files(tmp_path):
    good = tmp_path / "good.py"
    good.write_text(GPU, encoding="utf-8")
    binary = tmp_path / "binary.py"
    binary.write_bytes(b"x = 1\x00\n")
    generated = tmp_path / "gen.py"
    generated.write_text("# @generated\n" + GPU, encoding="utf-8")
    paths = [str(binary), str(tmp_path / "missing.py"), str(generated), str(good)]
    for jobs in (1, 2):
        outcomes = run(paths, Options(), RULES, jobs=jobs)
        assert [o.result.error for o in outcomes] == [
            "binary file (contains NUL bytes)", "no such file", None, None]
        assert outcomes[2].result.skipped == "generated"
        assert outcomes[3].result.changed


def test_original_text_is_kept_only_when_asked(tree):
    for jobs in (1, 2):
        with_text = run(tree, Options(), RULES, jobs=jobs, keep_text=True)
        without = run(tree, Options(), RULES, jobs=jobs, keep_text=False)
        for a, b in zip(with_text, without):
            assert a.result.to_dict() == b.result.to_dict()
            assert b.original_text is None
            if a.result.changed:
                assert a.original_text == Path(a.result.path).read_text(encoding="utf-8")
            assert a.source.text == "" and b.source.text == ""  # never sent back twice


def test_a_worker_gives_its_heap_back_after_a_file_that_grew_it():
    """runner.heap_trimmer: a trim when the worker grew more than TRIM_ABOVE past its size at
    start or after its last trim, never for small growth (a trim costs 10-20 ms)."""
    from npu_migrate.runner import TRIM_ABOVE, heap_trimmer

    sizes = [100 << 20]  # the worker's resident bytes, as /proc would say
    trims = []

    def trim():
        trims.append(sizes[0])
        sizes[0] -= 40 << 20  # what the heap gave back

    give_back = heap_trimmer(resident=lambda: sizes[0], trim=trim)
    sizes[0] += TRIM_ABOVE  # grown by exactly the allowance: no trim
    give_back()
    assert trims == []
    sizes[0] += 1
    give_back()
    assert trims == [(100 << 20) + TRIM_ABOVE + 1]
    after = sizes[0]
    sizes[0] = after + TRIM_ABOVE  # measured from the size after that trim
    give_back()
    assert len(trims) == 1
    sizes[0] += 1
    give_back()
    assert len(trims) == 2


def test_heap_trimmer_runs_here():
    """On this machine (Linux and glibc in CI) the real trimmer is built and callable."""
    from npu_migrate.runner import heap_trimmer

    assert heap_trimmer()() is False  # (it has not grown since it was made)


def _cyclic_garbage_of(migrate) -> list:
    """What `migrate()` leaves that only the garbage collector could free (reference cycles)."""
    import gc

    gc.collect()
    was_enabled, flags = gc.isenabled(), gc.get_debug()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        migrate()
        gc.collect()
        return list(gc.garbage)
    finally:
        gc.garbage.clear()
        gc.set_debug(flags)
        if was_enabled:
            gc.enable()


def test_no_reference_cycle_keeps_a_files_trees():
    """A file's whole syntax trees (libcst's and Python's) and its Context are freed as soon as
    the file is done, by reference counting: no reference cycle holds them until a full garbage
    collection. Such cycles (a recursive closure of the fast visitor holding the visitor, a
    visitor and the pass that made it referring to each other) kept every tree alive until the
    collector went through it: a fifth of the CPU time in the collector (transformers), and a
    worker holding the trees of files it had finished while it parsed the next (memory).
    (Not held for --modelarts/--distributed entry scripts: codemods/modelarts' Parser and its
    Arguments refer to each other; a few scripts a run, collected at the next collection.)"""
    import ast

    import libcst as cst

    from npu_migrate.context import Context

    inputs = [p for p in sorted((ROOT / "fixtures").rglob("*.py")) if p.is_file() and not p.is_symlink()]
    assert len(inputs) > 50

    def migrate_all():
        for path in inputs:
            dispatch.migrate_source(path.read_text(encoding="utf-8"), str(path), Options())

    held = [type(o).__name__ for o in _cyclic_garbage_of(migrate_all)
            if isinstance(o, (cst.Module, ast.Module, Context))]
    assert held == []


def test_collection_is_rare_while_files_are_migrated_and_restored_after(tree):
    """runner.collecting_rarely: during the run what was alive before is frozen and the young
    generation is collected every GC_YOUNG allocations; after it, both as they were."""
    import gc

    from npu_migrate import runner

    before = gc.get_threshold()
    seen = []
    real = runner.migrate_file

    def noting(*args, **kwargs):
        seen.append((gc.get_threshold()[0], gc.get_freeze_count() > 0))
        return real(*args, **kwargs)

    import unittest.mock

    with unittest.mock.patch.object(runner, "migrate_file", noting):
        run(tree[:3], Options(), RULES, jobs=1)
    assert seen == [(runner.GC_YOUNG, True)] * 3
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_workers_take_files_from_both_ends_of_the_size_order():
    """runner.next_batch: with the files sorted biggest first, worker 0 (and every even one)
    takes the biggest that are left, worker 1 (every odd one) the smallest, BATCH at a time,
    until the two ends meet: two workers do not parse the biggest files at the same time."""
    from collections import deque

    from npu_migrate.runner import next_batch

    queue = deque((i, f"f{i}.py") for i in range(2 * BATCH + 3))  # index 0 is the biggest
    assert next_batch(queue, 0) == [(i, f"f{i}.py") for i in range(BATCH)]
    assert next_batch(queue, 1) == [(i, f"f{i}.py") for i in range(2 * BATCH + 2, BATCH + 2, -1)]
    assert next_batch(queue, 2) == [(BATCH, f"f{BATCH}.py"), (BATCH + 1, f"f{BATCH + 1}.py"),
                                    (BATCH + 2, f"f{BATCH + 2}.py")]
    assert not queue and next_batch(queue, 3) == []


@pytest.mark.parametrize("prepared", [True, False])
def test_workers_start_from_what_the_main_process_prepared(tree, monkeypatch, prepared):
    """runner.prepare: with PREPARE_FROM files to do or more, the main process migrates two
    snippets before the workers fork, so each worker starts with libcst imported and the
    TensorFlow rules' checks built (shared, not made once per worker); the results are the
    same as in one process. Below PREPARE_FROM nothing is prepared."""
    from npu_migrate import prefilter, runner

    monkeypatch.setattr(runner, "PREPARE_FROM", len(tree) if prepared else len(tree) + 1)
    calls = []
    real_prepare = runner.prepare
    monkeypatch.setattr(runner, "prepare", lambda *args: calls.append(1) or real_prepare(*args))
    real = dispatch.migrate_source
    main = os.getpid()

    def tagged(text, path, options, rules):
        # in a worker: whether the TensorFlow checks were built before its first file
        if os.getpid() != main and not hasattr(tagged, "found"):
            tagged.found = any("tensorflow" in p._of_framework for p in prefilter._RULE_PREFILTERS.values())
        result = real(text, path, options, rules)
        result.skipped = repr(getattr(tagged, "found", None))
        return result

    one = [o.result.to_dict() for o in run(tree, Options(), RULES, jobs=1)]
    monkeypatch.setattr(prefilter, "_RULE_PREFILTERS", {})  # as in a new process
    monkeypatch.setattr(dispatch, "migrate_source", tagged)
    many = run(tree, Options(), RULES, jobs=2)
    assert calls == ([1] if prepared else [])
    assert {o.result.skipped for o in many} == {repr(prepared)}
    for outcome, expected in zip(many, one):
        outcome.result.skipped = expected.get("skipped")  # (the tag above)
    assert _dicts(many) == one


def test_prepared_workers_share_the_c_library_the_main_process_loaded(tree, monkeypatch):
    """runner.prepare loads the C library through ctypes (runner._libc: prctl, malloc_trim)
    before the workers fork, so each worker uses that handle instead of importing ctypes and
    loading its own at its start (15-54 ms and 1.3 MB of its own, for every re-forked worker)."""
    from npu_migrate import runner

    monkeypatch.setattr(runner, "PREPARE_FROM", 1)
    monkeypatch.setattr(runner, "_LIBC", [])
    real = dispatch.migrate_source

    def tagged(text, path, options, rules):
        result = real(text, path, options, rules)
        result.skipped = repr([id(handle) for handle in runner._LIBC])  # (in a worker: after its start)
        return result

    monkeypatch.setattr(dispatch, "migrate_source", tagged)
    many = run(tree, Options(), RULES, jobs=2)
    assert len(runner._LIBC) == 1
    assert {o.result.skipped for o in many} == {repr([id(runner._LIBC[0])])}


def test_a_worker_whose_heap_stays_big_makes_way_for_a_new_one(tree, monkeypatch):
    """heap_trimmer's give_back() is True when a trim left the worker more than RETIRE_ABOVE
    past its start: a prepared worker then sends its answer marked RETIRED and ends, the rest
    of its batch goes back to the queue and a new worker takes over. Here every file does it:
    each worker migrates one file, none fails, and the results are those of -j 1."""
    from npu_migrate import runner

    one = run(tree, Options(), RULES, jobs=1)
    monkeypatch.setattr(runner, "PREPARE_FROM", 1)
    monkeypatch.setattr(runner, "heap_trimmer", lambda: lambda: True)
    _tag_with_process(monkeypatch)
    many = run(tree, Options(), RULES, jobs=2)
    assert len({o.result.skipped for o in many}) == len(tree)  # one process per file
    assert _untagged(many) == _dicts(one)


def test_a_retired_worker_is_gone_before_its_successor_gets_a_batch_and_kept_its_patterns(tree, monkeypatch, tmp_path):
    """A worker that retires has nothing left to do once its last answer is in: the main process
    kills it and waits for it (_Pool._retire) before the next batch goes out, so a retiree never
    holds its memory beside its successor's. It keeps the patterns it compiled (_worker:
    startup.patterns_forked) before that answer, so the kill loses none of them. Every file
    retires its worker here: each batch after the first two is a successor's."""
    from npu_migrate import runner

    one = run(tree, Options(), RULES, jobs=1)
    monkeypatch.setattr(runner, "PREPARE_FROM", 1)
    monkeypatch.setattr(runner, "heap_trimmer", lambda: lambda: True)
    kept = tmp_path / "kept"
    kept.mkdir()
    monkeypatch.setattr(runner, "patterns_forked", lambda: lambda: (kept / str(os.getpid())).touch())
    _tag_with_process(monkeypatch)
    retired, events = [], []
    real_retire, real_next = runner._Pool._retire, runner.next_batch

    def retire(w):
        real_retire(w)
        retired.append(w.process)

    def next_batch(queue, worker):
        events.append([p.exitcode for p in retired])  # (None: still running)
        return real_next(queue, worker)

    monkeypatch.setattr(runner._Pool, "_retire", staticmethod(retire))
    monkeypatch.setattr(runner, "next_batch", next_batch)
    many = run(tree, Options(), RULES, jobs=2)
    workers = {o.result.skipped for o in many}
    assert len(workers) == len(tree) and len(retired) >= len(tree) - 2  # one process per file
    assert len(events) == len(tree) and all(None not in codes for codes in events)
    assert {code for codes in events for code in codes} <= {0, -signal.SIGKILL}  # (0: it ended first)
    assert workers <= {p.name for p in kept.iterdir()}  # every worker kept its patterns, the killed ones too
    assert _untagged(many) == _dicts(one)


def test_heap_trimmer_says_when_the_heap_stays_big():
    """give_back() is True only after a trim that left the worker more than RETIRE_ABOVE past
    its size at start."""
    from npu_migrate.runner import RETIRE_ABOVE, TRIM_ABOVE, heap_trimmer

    start = 100 << 20
    sizes, after = [start], [0]

    def trim():
        sizes[0] = after[0]

    give_back = heap_trimmer(lambda: sizes[0], trim)
    sizes[0] = start + TRIM_ABOVE  # not more than TRIM_ABOVE: no trim
    assert give_back() is False and sizes[0] == start + TRIM_ABOVE
    sizes[0], after[0] = start + TRIM_ABOVE + 1, start + RETIRE_ABOVE  # all but RETIRE_ABOVE given back
    assert give_back() is False and sizes[0] == start + RETIRE_ABOVE
    sizes[0], after[0] = start + RETIRE_ABOVE + TRIM_ABOVE + 1, start + RETIRE_ABOVE + 1
    assert give_back() is True



def test_heap_trimmer_retires_a_worker_whose_private_memory_passed_the_bound():
    """give_back() also looks at the worker's private memory (USS: what it copied of the main
    process's pages by writing to them, which its resident size does not show), every
    CHECK_EVERY files and after a trim, and is True once that is more than PRIVATE_ABOVE."""
    from npu_migrate.runner import CHECK_EVERY, PRIVATE_ABOVE, TRIM_ABOVE, heap_trimmer

    start = 100 << 20
    sizes, own, looked = [start], [PRIVATE_ABOVE + 1], []

    def private():
        looked.append(sizes[0])
        return own[0]

    def trim():
        sizes[0] = start + 1  # all given back

    give_back = heap_trimmer(lambda: sizes[0], trim, private)
    assert [give_back() for _ in range(CHECK_EVERY - 1)] == [False] * (CHECK_EVERY - 1) and looked == []
    assert give_back() is True and len(looked) == 1  # the CHECK_EVERY-th file
    own[0] = PRIVATE_ABOVE  # not more than the bound
    assert [give_back() for _ in range(CHECK_EVERY)] == [False] * CHECK_EVERY and len(looked) == 2
    own[0] = PRIVATE_ABOVE + 1
    give_back()  # the count starts again after each look ...
    assert len(looked) == 2
    sizes[0] = start + TRIM_ABOVE + 1  # ... and a trim that leaves the heap small looks at once
    assert give_back() is True and looked == [start, start, start + 1]


def test_heap_trimmer_reads_this_process_private_memory():
    """On this machine (Linux with smaps_rollup in CI) the private memory is read, and it is
    the kind of number the bound speaks of: more than nothing, less than the resident size."""
    from npu_migrate.runner import _private_bytes, _resident_bytes

    assert 0 < _private_bytes() <= _resident_bytes()


def test_a_worker_retires_once_its_private_memory_passes_the_bound(tree, monkeypatch):
    """The real measure in real workers: with the bound at 0 and a look after every file, each
    prepared worker retires after its first file (its private memory is never 0), the pool
    forks one per file, and the results are those of -j 1."""
    from npu_migrate import runner

    one = run(tree, Options(), RULES, jobs=1)
    monkeypatch.setattr(runner, "PREPARE_FROM", 1)
    monkeypatch.setattr(runner, "PRIVATE_ABOVE", 0)
    monkeypatch.setattr(runner, "CHECK_EVERY", 1)
    _tag_with_process(monkeypatch)
    many = run(tree, Options(), RULES, jobs=2)
    assert len({o.result.skipped for o in many}) == len(tree)  # one process per file
    assert _untagged(many) == _dicts(one)
    monkeypatch.setattr(runner, "PRIVATE_ABOVE", 1 << 40)  # a bound never reached: two workers
    monkeypatch.setattr(runner, "TRIM_ABOVE", 1 << 40)
    assert len({o.result.skipped for o in run(tree, Options(), RULES, jobs=2)}) == 2

def test_prepare_leaves_the_tensorflow_findings_filter_to_the_workers_that_need_it(monkeypatch):
    """runner.prepare builds what every worker needs before they fork; not the TF findings'
    statement filter (3 MB, partial.statement_filter(rules, "tensorflow")): built there, each
    worker's reference counting copied its pages (transformers -j 2: peak PSS +5-7 MB)."""
    from npu_migrate import partial, runner

    monkeypatch.setattr(partial, "_FILTERS", {})
    runner.prepare(Options(), RULES)
    assert (RULES.fingerprint, "") in partial._FILTERS
    assert (RULES.fingerprint, "tensorflow") not in partial._FILTERS


# -- how many workers a run starts: by the work the project scan estimates (pipeline.workers_for) --


def test_the_scan_estimates_the_work_and_stops_weighing_past_enough(tmp_path, monkeypatch):
    """project_values.Workload: the scan adds weight() of every .py file it reads (its length when
    it mentions CUDA (cudnn too), NCCL, TensorFlow or MindSpore, a twentieth of it otherwise),
    exactly up to `enough`; past it a process weighs no more (so `micros > enough` is all it
    says), in one process as with the forked child sharing the files (each weighs its own)."""
    from npu_migrate import project_values as pv

    texts = {"gpu.py": "import torch\nx = t.cuda()\n", "dnn.py": "torch.backends.cudnn.benchmark = True\n",
             "tf.py": "import tensorflow as tf\n", "ms.py": "import mindspore\n", "nccl.py": "b = 'nccl'\n",
             "plain.py": "import os\n" * 40, "notes.txt": "cuda " * 100}
    for name, text in texts.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    files = sorted(str(tmp_path / n) for n in texts)
    busy = sum(len(t) for n, t in texts.items() if n not in ("plain.py", "notes.txt"))
    exact = busy + len(texts["plain.py"]) // 20
    assert pv.weight(texts["plain.py"].encode()) == len(texts["plain.py"]) // 20 and pv.weight(b"x.cuda()") == 8
    for jobs, split in ((1, pv.SPLIT_FROM), (2, 2)):
        monkeypatch.setattr(pv, "SPLIT_FROM", split)
        plain = pv.scan(files, jobs=jobs)
        workload = pv.Workload(exact)
        assert pv.scan(files, jobs=jobs, workload=workload) == plain  # (the facts as without it)
        assert workload.micros == exact  # all of it, up to enough
        weighed = []
        real = pv.weight
        monkeypatch.setattr(pv, "weight", lambda text: weighed.append(text) or real(text))
        small = pv.Workload(0)
        pv.scan(files, workload=small)  # one process: the first file passes 0, no file is weighed after it
        assert small.micros > 0 and len(weighed) == 1
        monkeypatch.setattr(pv, "weight", real)


def test_a_run_with_little_work_starts_no_worker_whatever_j_says(tmp_path, monkeypatch):
    """pipeline.workers_for: -j 2 on a project whose estimated work is IN_PROCESS_UP_TO or less
    migrates in this process (no pool, nothing prepared), with exactly -j 1's output; with more,
    it starts the workers (here: the bound set to 0). Cold and warm alike."""
    from helpers import cli_in_process

    from npu_migrate import pipeline, runner

    for i in range(3):
        (tmp_path / f"gpu_{i}.py").write_text(GPU.replace("2", str(i + 2)), encoding="utf-8")
        (tmp_path / f"plain_{i}.py").write_text(PLAIN, encoding="utf-8")
    pools = []
    real_pool = runner._Pool

    def pool(jobs, *args, **kwargs):
        pools.append(jobs)
        return real_pool(jobs, *args, **kwargs)

    monkeypatch.setattr(runner, "_Pool", pool)
    one = cli_in_process(".", "--check", "-j", "1", "--no-cache", cwd=tmp_path)
    assert one.returncode == 1 and pools == []
    for cache in ("--no-cache", None, None):  # (without a cache, cold, warm)
        two = cli_in_process(".", "--check", "-j", "2", *([cache] if cache else []), cwd=tmp_path)
        assert (two.returncode, two.stdout, two.stderr) == (one.returncode, one.stdout, one.stderr)
    assert pools == []
    monkeypatch.setattr(pipeline, "IN_PROCESS_UP_TO", 0)
    monkeypatch.setattr(pipeline, "SHARED_UP_TO", 0)  # (the bound of -j 2)
    two = cli_in_process(".", "--check", "-j", "2", "--no-cache", cwd=tmp_path)
    assert (two.returncode, two.stdout, two.stderr) == (one.returncode, one.stdout, one.stderr)
    assert pools == [2]


def test_a_run_with_little_work_shares_its_files_with_one_forked_process_once_libcst_is_imported(tmp_path, monkeypatch):
    """runner._shared: -j 2 on a project too small for workers (pipeline.workers_for), yet with
    more work than pipeline.SHARE_FROM, migrates here until a file has imported libcst, then
    shares the rest with one forked process (project_values._in_two): -j 1's output exactly, cold
    and warm; -j 1 never forks, nor -j 2 with less work."""
    import os
    import sys

    from helpers import cli_in_process

    from npu_migrate import pipeline, project_values as pv, runner

    names = []
    for i in range(3):
        for name, text in ((f"gpu_{i}.py", GPU.replace("2", str(i + 2))), (f"plain_{i}.py", PLAIN)):
            (tmp_path / name).write_text(text, encoding="utf-8")
            names.append(name)
    shared, forks = [], []
    real_in_two, real_fork = pv._in_two, os.fork

    def in_two(items, one, meanwhile=None, split_from=None, **kw):
        if split_from is not None:  # (not the project scan's: project_values.scan)
            shared.append([os.path.basename(p) for p in items])
            # the forked copy dies with this process, as a pool's worker does
            assert (kw["in_child"].func, kw["in_child"].args) == (runner._die_with_parent, (os.getpid(),))
        return real_in_two(items, one, meanwhile, split_from, **kw)

    def fork():
        pid = real_fork()
        if pid:
            forks.append(pid)
        return pid

    monkeypatch.setattr(pv, "_in_two", in_two)
    monkeypatch.setattr(os, "fork", fork)
    one = cli_in_process(".", "--check", "-j", "1", "--no-cache", cwd=tmp_path)
    assert one.returncode == 1 and shared == [] and forks == []
    # an estimate of pipeline.SHARE_FROM or less (these few lines): no copy either, as -j 1
    two = cli_in_process(".", "--check", "-j", "2", "--no-cache", cwd=tmp_path)
    assert (two.returncode, two.stdout, two.stderr) == (one.returncode, one.stdout, one.stderr)
    assert shared == [] and forks == []
    monkeypatch.setattr(pipeline, "SHARE_FROM", 0)
    assert "libcst" in sys.modules  # (imported in this process: the first file is done here, the rest shared)
    for cache in ("--no-cache", None, None):  # (without a cache, cold, warm)
        two = cli_in_process(".", "--check", "-j", "2", *([cache] if cache else []), cwd=tmp_path)
        assert (two.returncode, two.stdout, two.stderr) == (one.returncode, one.stdout, one.stderr)
    cold = sorted(names)[1:]  # (the first file done here: libcst is imported already)
    assert shared[:2] == [cold, cold] and len(forks) == 2  # (the warm run: every file from the cache, no fork)
    assert shared[2:] in ([], [[]]) and len(forks) == 2
    outcomes = runner.run([str(tmp_path / n) for n in sorted(names)], Options(), RULES, in_two=True)
    assert [o.result.to_dict() for o in outcomes] == [
        runner.migrate_file(str(tmp_path / n), Options(), RULES).result.to_dict() for n in sorted(names)]
    assert len(forks) == 3


def test_a_warm_run_migrates_few_misses_in_this_process_whatever_the_projects_estimate(tmp_path, monkeypatch):
    """runner.run: with -j 2 on a project big enough for workers, a warm run whose misses add up to
    IN_PROCESS_UP_TO bytes or less (one file edited) migrates them here, with -j 1's output; more
    misses start the workers, as a cold run does."""
    from helpers import cli_in_process

    from npu_migrate import pipeline, runner

    for i in range(3):
        (tmp_path / f"gpu_{i}.py").write_text(GPU.replace("2", str(i + 2)), encoding="utf-8")
        (tmp_path / f"plain_{i}.py").write_text(PLAIN, encoding="utf-8")
    # the scan's estimate of the three GPU files is past the bound; one file's size is not
    monkeypatch.setattr(pipeline, "IN_PROCESS_UP_TO", len(GPU.encode()) + 40)
    monkeypatch.setattr(pipeline, "SHARED_UP_TO", len(GPU.encode()) + 40)  # (the bound of -j 2)
    pools = []
    real_pool = runner._Pool

    def pool(jobs, *args, **kwargs):
        pools.append(jobs)
        return real_pool(jobs, *args, **kwargs)

    monkeypatch.setattr(runner, "_Pool", pool)

    def same_as_one_process() -> None:
        two = cli_in_process(".", "--check", "-j", "2", cwd=tmp_path)
        one = cli_in_process(".", "--check", "-j", "1", "--no-cache", cwd=tmp_path)
        assert (two.returncode, two.stdout, two.stderr) == (one.returncode, one.stdout, one.stderr)

    same_as_one_process()  # cold: every file to the workers
    assert pools == [2]
    (tmp_path / "gpu_1.py").write_text(GPU.replace("2", "7") + "x = 1\n", encoding="utf-8")
    same_as_one_process()  # one miss
    assert pools == [2]
    for i in range(3):
        (tmp_path / f"gpu_{i}.py").write_text(GPU.replace("2", str(i + 8)), encoding="utf-8")
    same_as_one_process()  # three misses: past the bound
    assert pools == [2, 2]


def test_workers_for():
    from npu_migrate.pipeline import IN_PROCESS_UP_TO, SHARED_UP_TO, in_process_up_to, workers_for
    from npu_migrate.project_values import Workload

    assert workers_for(2, Workload(100, 100)) == 1
    assert workers_for(4, Workload(100, 101)) == 4
    assert workers_for(1, Workload(100, 10**9)) == 1
    assert workers_for(3, None) == 3  # (no estimate: -j as given)
    # -j 2: no pool up to SHARED_UP_TO (runner._shared's two processes do what its two workers would)
    assert in_process_up_to(2) == SHARED_UP_TO > in_process_up_to(3) == in_process_up_to(4) == IN_PROCESS_UP_TO


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="workers are forked on Linux only")
def test_only_a_cold_run_of_many_files_prepares_before_it_knows_whether_it_starts_workers():
    """pipeline.prepares_early: during the scan only from PREPARE_EARLY_FROM files (a smaller
    project is scanned sooner than prepared, and may start no worker: workers_for)."""
    from npu_migrate.pipeline import PREPARE_EARLY_FROM, prepares_early

    assert prepares_early(2, PREPARE_EARLY_FROM, cold=True)
    assert not prepares_early(2, PREPARE_EARLY_FROM - 1, cold=True)
    assert not prepares_early(1, PREPARE_EARLY_FROM, cold=True) and not prepares_early(2, PREPARE_EARLY_FROM, cold=False)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the scan's child is forked on Linux only")
def test_a_smaller_cold_run_imports_libcst_while_the_scans_child_reads_the_files(tmp_path, monkeypatch):
    """pipeline.warms_early: a cold run with -j above 1 of WARM_FROM files or more, too few to
    prepare early, warms up (runner.warm_up: libcst and the PyTorch pass) while the project
    scan's forked child reads the files (the scan shares them from WARM_FROM .py files); the
    output is -j 1's, and a run with a cache index (warm) does not warm up."""
    from helpers import cli_in_process

    from npu_migrate import project_values as pv, runner
    from npu_migrate.pipeline import PREPARE_EARLY_FROM, WARM_FROM, warms_early

    assert warms_early(2, WARM_FROM, cold=True) and not warms_early(2, WARM_FROM - 1, cold=True)
    assert not warms_early(1, WARM_FROM, cold=True) and not warms_early(2, WARM_FROM, cold=False)
    assert WARM_FROM < PREPARE_EARLY_FROM
    for i in range(WARM_FROM):
        (tmp_path / f"m{i:02d}.py").write_text(GPU if i in (5, 40) else PLAIN, encoding="utf-8")
    warmed, splits = [], []
    real_warm_up, real_in_two = runner.warm_up, pv._in_two

    def warm_up(options, rules):
        warmed.append(1)
        real_warm_up(options, rules)

    def in_two(items, one, meanwhile=None, split_from=None, **kw):
        splits.append((len(items), split_from, meanwhile is not None))
        return real_in_two(items, one, meanwhile, split_from, **kw)

    monkeypatch.setattr(runner, "warm_up", warm_up)
    monkeypatch.setattr(pv, "_in_two", in_two)
    one = cli_in_process(".", "--check", "-j", "1", "--no-cache", cwd=tmp_path)
    assert one.returncode == 1 and warmed == [] and splits == []
    monkeypatch.setenv("NPU_MIGRATE_CACHE_DIR", str(tmp_path.parent / f"{tmp_path.name}-cache"))
    for cache in ("--no-cache", None, None):  # (without a cache, cold, warm)
        two = cli_in_process(".", "--check", "-j", "2", *([cache] if cache else []), cwd=tmp_path)
        assert (two.returncode, two.stdout, two.stderr) == (one.returncode, one.stdout, one.stderr)
    assert warmed == [1, 1]  # (not the warm run: its files come from the cache)
    scans = [s for s in splits if s[1] != 2]  # (not runner._shared's: none under pipeline.SHARE_FROM)
    assert scans[0] == (WARM_FROM, WARM_FROM, True) and scans[1] == (WARM_FROM, WARM_FROM, True)
