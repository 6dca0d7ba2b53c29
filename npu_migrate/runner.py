"""Migrating many files: read, look up the cache, migrate what is left (in worker processes
when asked), and hand back one Outcome per file, in the order the files were given.

One file's failure never stops the others: an exception is that file's error, and so is a
worker that dies under it (a crash of native code, the out-of-memory killer, MemoryError):
the runner knows which file each worker is on, reports that one, starts a new worker and
carries on. `jobs=1` (or a single file to do) runs everything in this process, which is what
a debugger wants.

The workers are plain `multiprocessing` processes fed one small batch at a time through a
pipe each, rather than a ProcessPoolExecutor: an executor whose worker dies fails every
pending file with BrokenProcessPool and cannot say which file killed it.
"""

from __future__ import annotations

import functools
import gc
import os
import signal
import sys
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable, Deque, Dict, Iterator, List, Optional, Sequence, Tuple

from .model import FileResult
from .options import Options
if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from .cache import Cache
from .rules import RuleSet
from .source import Source, SourceError, decode_python, is_generated, read_source
from .startup import long_lived, patterns_forked

# Files handed to a worker at a time: big enough to keep pipes quiet, small enough that the
# two workers finish together and a crash requeues little.
BATCH = 4


@dataclass
class Outcome:
    """A migrated file plus what is needed to write it back (its Source without the text)."""

    result: FileResult
    source: Optional[Source] = None
    original_text: Optional[str] = None  # kept only when a diff needs it (keep_text)


def decoder_for(path: str):
    from .frontends import decoder_for as frontend_decoder

    return frontend_decoder(path) or decode_python


def read(path: str) -> Tuple[Optional[Source], Optional[Outcome]]:
    """(source, None), or (None, the outcome of a file that cannot be read)."""
    try:
        return read_source(path, decoder_for(path)), None
    except SourceError as exc:
        return None, Outcome(FileResult(path=path, error=str(exc)))


def migrate_text(source: Source, options: Options, rules: RuleSet, keep_text: bool = True) -> Outcome:
    """Migrate a file already read. Never raises for a bad file: errors land in the result."""
    from .dispatch import migrate_source

    path = source.path
    if is_generated(source.text):
        return Outcome(FileResult(path=path, skipped="generated"), replace(source, text=""))
    try:
        result = migrate_source(source.text, path, options, rules)
    except RecursionError:  # hostile nesting any front end may meet (250 nested `$(…)` in a script)
        result = FileResult(path=path, error="cannot migrate: too deeply nested")
    except Exception as exc:  # a bug in a codemod must not stop the run
        result = FileResult(path=path, error=f"internal error: {type(exc).__name__}: {exc}")
    original = source.text if (keep_text and result.changed) else None
    return Outcome(result, replace(source, text=""), original)


def migrate_file(path: str, options: Options, rules: RuleSet, keep_text: bool = True,
                 cache: Optional[Cache] = None) -> Outcome:
    """Read and migrate one file; with `cache`, look the result up there first and store a
    new one (the workers do both, in parallel)."""
    source, failed = read(path)
    if failed is not None:
        return failed
    assert source is not None  # read() returns one of the two
    if cache is not None:
        hit = recall(cache, source, keep_text)
        if hit is not None:
            return hit
    outcome = migrate_text(source, options, rules, keep_text)
    if cache is not None:
        cache.put(path, source.digest, outcome.result)
    return outcome


def recall(cache: Cache, source: Source, keep_text: bool) -> Optional[Outcome]:
    """The cached outcome for these bytes, or None."""
    hit = cache.get(source.path, source.digest, source.size)
    if hit is None:
        return None
    original = source.text if (keep_text and hit.changed) else None
    return Outcome(hit, replace(source, text=""), original)


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)


def run(
    paths: Sequence[str],
    options: Options,
    rules: RuleSet,
    jobs: int = 1,
    on_done: Optional[Callable[[Outcome], None]] = None,
    keep_text: bool = True,
    cache: Optional[Cache] = None,  # cache.Cache, imported only when used
    seen: Optional[Dict[str, Source]] = None,
    prepared: bool = False,
    in_process_up_to: int = -1,
    in_two: bool = False,
) -> List[Outcome]:
    """Migrate `paths`; outcomes come back in the same order whatever `jobs` is.

    `keep_text`: keep the original text of changed files (for diffs); without it workers send
    back only the migrated text. `cache`: look results up there first and store new ones.
    `seen`: path -> the Source (digest, no text) of the bytes the project scan already read
    (project_values.scan): a file the cache's index answers for that digest is not read again.
    `prepared`: prepare(options, rules) ran already (pipeline.py: during the project scan).
    `in_process_up_to`: with `jobs` above 1, the files left to migrate (a warm run's misses) are
    migrated in this process when their sizes add up to this many bytes or fewer (pipeline.py).
    `in_two`: with `jobs` 1 (the run's -j was above 1, its estimated work too little for workers:
    pipeline.workers_for), a forked copy of this process shares the files once libcst is
    imported (_shared).
    """
    outcomes: List[Optional[Outcome]] = [None] * len(paths)

    def done(index: int, outcome: Outcome) -> None:
        outcomes[index] = outcome
        if on_done:
            on_done(outcome)

    # The cache's index is read once here, before the workers fork: they share it (and it lives
    # as long as the run: startup.long_lived).
    with long_lived():
        warm = cache if cache is not None and cache.index() else None
    if cache is not None:
        cache.index_later = True  # (saved below, whatever happens: a result that writes nothing goes there)
    try:
        _run(paths, options, rules, jobs, done, keep_text, cache, seen, warm, prepared, in_process_up_to, in_two)
    finally:
        finished = [o for o in outcomes if o is not None]
        if cache is not None:
            cache.save_index((o.result, o.source.digest if o.source is not None else None) for o in finished)
    return finished


def _run(paths: Sequence[str], options: Options, rules: RuleSet, jobs: int, done: Callable[[int, Outcome], None],
         keep_text: bool, cache: Optional[Cache], seen: Optional[Dict[str, Source]], warm: Optional[Cache],
         prepared: bool = False, in_process_up_to: int = -1, in_two: bool = False) -> None:
    with collecting_rarely():
        if jobs <= 1 and in_two and len(paths) >= 2:
            _shared(paths, [i for i, path in enumerate(paths)
                            if not (warm and seen and (_indexed(i, path, warm, seen, done)
                                                       or _recalled(i, path, warm, keep_text, done, seen)))],
                    options, rules, keep_text, cache, done)
        elif jobs <= 1 or len(paths) < 2:
            for i, path in enumerate(paths):
                if not (warm and seen and (_indexed(i, path, warm, seen, done)
                                           or _recalled(i, path, warm, keep_text, done, seen))):
                    done(i, migrate_file(path, options, rules, keep_text, cache))
        else:
            # The workers read, look up the cache, migrate and store: a cold run does nothing file
            # by file here (it would wait for every file to be read and hashed before starting).
            # A warm one (an index to ask) looks every file up here first and starts workers only
            # for the misses: most runs then start none (forking and feeding them cost more than
            # the lookups).
            todo = [i for i, path in enumerate(paths)
                    if not (warm and ((seen and _indexed(i, path, warm, seen, done))
                                      or _answered(i, path, warm, keep_text, done, seen)))]
            sizes = {i: _size(paths[i]) for i in todo}
            if todo and sum(sizes.values()) <= in_process_up_to:
                # Little left (a warm run's few misses): no worker is worth its start. A file's
                # weight (project_values.weight, what the bound is of) is at most its size.
                for i in todo:
                    done(i, migrate_file(paths[i], options, rules, keep_text, cache))
                return
            # Sorted by size, biggest first; half the workers take from the other end (next_batch).
            todo.sort(key=lambda i: -sizes[i])
            if todo:
                _Pool(min(jobs, len(todo)), options, rules, keep_text, cache).run([(i, paths[i]) for i in todo], done,
                                                                                  prepared)


def _shared(paths: Sequence[str], todo: List[int], options: Options, rules: RuleSet, keep_text: bool,
            cache: Optional[Cache], done: Callable[[int, Outcome], None]) -> None:
    """Migrate the files `todo` (indexes of `paths`) in this process until one has imported
    libcst (the first that a pass parses), then the rest shared with a forked copy of this
    process (project_values._in_two: each takes the next file when free; the same outcomes, in
    the same order). The run's estimated work was too little for worker processes
    (pipeline.workers_for: their start, runner.prepare's eager build and each worker's own,
    costs about what the second core saves), yet its parses are most of its time, done one
    after the other on one core (gpytorch 1.15.2: 26 partial parses and their passes, ~0.3 of
    its ~0.5 CPU-s): one fork after libcst is imported (~65 ms of the start, then shared
    copy-on-write, not imported twice) puts them on both cores. A run that parses nothing never
    forks; nor does one whose last file is the first parsed. The forked copy dies with this
    process, as a worker does (_die_with_parent): it would otherwise go on alone with every file
    left, up to pipeline.SHARED_UP_TO's ~3 CPU-s of work, after this one was killed."""
    from .project_values import _in_two

    left = iter(todo)
    for i in left:
        done(i, migrate_file(paths[i], options, rules, keep_text, cache))
        if "libcst" in sys.modules:
            break
    rest = list(left)
    gc.freeze()  # (what this process made since, libcst's modules: the child's collections leave it alone, _Pool._start)
    outcomes = _in_two([paths[i] for i in rest], lambda path: migrate_file(path, options, rules, keep_text, cache),
                       split_from=2, in_child=functools.partial(_die_with_parent, os.getpid()))
    for i, outcome in zip(rest, outcomes):
        done(i, outcome)


def _indexed(index: int, path: str, cache: Cache, seen: Dict[str, Source], done: Callable[[int, Outcome], None]) -> bool:
    """Hand on the index's result for the bytes the project scan read of `path` (`seen`), if it
    has one: a result that writes nothing, so the Source needs no text (nor its encoding)."""
    source = seen.get(path)
    hit = cache.indexed(path, source.digest) if source is not None else None
    if hit is None:
        return False
    done(index, Outcome(hit, source))
    return True


def _recalled(index: int, path: str, cache: Cache, keep_text: bool, done: Callable[[int, Outcome], None],
              seen: Dict[str, Source]) -> bool:
    """Hand on the stored result for the bytes the project scan read of `path` (`seen`) when
    its text is not wanted (no diff): a result that changes the file, which the index does not
    hold (_indexed), is asked for by that digest without reading the file again (119 files of
    transformers, 28 of diffusers). False: the file is read as before."""
    scanned = seen.get(path) if not keep_text else None
    hit = recall(cache, scanned, keep_text) if scanned is not None else None
    if hit is None:
        return False
    done(index, hit)
    return True


def _answered(index: int, path: str, cache: Cache, keep_text: bool, done: Callable[[int, Outcome], None],
              seen: Optional[Dict[str, Source]] = None) -> bool:
    """Read `path` and hand on its outcome when that needs no migration (a cache hit, or a file
    that cannot be read); False leaves the file to the workers. A file the scan read whose
    stored result is not found by its digest is left to them at once (they read it)."""
    if seen and not keep_text and path in seen:
        return _recalled(index, path, cache, keep_text, done, seen)
    source, failed = read(path)
    outcome = failed if failed is not None else recall(cache, source, keep_text) if source is not None else None
    if outcome is None:
        return False
    done(index, outcome)
    return True


# Objects allocated (less those freed) between two young collections of the garbage collector,
# while files are migrated: Python's default, 700, starts one in the middle of every few libcst
# nodes, and with them the older generations, which go through the whole tree being built.
GC_YOUNG = 10_000


@contextmanager
def collecting_rarely() -> Iterator[None]:
    """While files are migrated: what is alive now (modules, the rules) is frozen out of the
    garbage collector's reach (it never becomes garbage during the run), and collections are
    rarer. A file's trees hold no reference cycle (tests/test_runner.py), so they are freed as
    soon as the file is done, without a collection; what a collection finds is small. Took a
    fifth of the CPU time (transformers, `-j 1`); the worker processes inherit both settings."""
    threshold = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(GC_YOUNG, threshold[1], threshold[2])
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


# -- worker processes -----------------------------------------------------------------------


PR_SET_PDEATHSIG = 1  # linux/prctl.h
_LIBC: list = []  # the C library, once loaded (_libc)


def _libc():
    """The C library through ctypes (prctl, malloc_trim), loaded once a process; OSError where
    it cannot be. prepare() loads it before the workers fork, so they share it: imported in
    each worker, ctypes took 15-54 ms of its start (a -j 2 cold run of transformers forks ~25
    workers: they retire, heap_trimmer) and 1.3 MB of memory of its own."""
    if not _LIBC:
        import ctypes

        _LIBC.append(ctypes.CDLL(None, use_errno=True))
    return _LIBC[0]



def _die_with_parent(parent: int) -> None:
    """A worker never outlives the main process (killed with -9, it cannot stop them; a worker
    blocked in `send`, the pipe full and nobody reading, would wait forever). On Linux the
    kernel sends SIGKILL when the parent dies (PR_SET_PDEATHSIG); everywhere, a thread checks
    once a second that the parent is still there."""
    if sys.platform.startswith("linux"):
        try:
            _libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):  # pragma: no cover - a libc without prctl
            pass
    if os.getppid() != parent:  # it died before prctl took effect
        os._exit(1)
    import threading
    import time

    def watch() -> None:
        while True:
            time.sleep(1)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, name="npu-migrate-parent-watch", daemon=True).start()


def _worker(conn: Connection, options: Options, rules: RuleSet, keep_text: bool, cache, parent: int,
            retire: bool = False) -> None:
    """Loop: receive a batch of (index, path), send back (index, Outcome) for each. `retire`:
    end after a file that left the heap too big (heap_trimmer), sending (index, Outcome, RETIRED)."""
    # Ctrl-C and SIGTERM are the main process's business: it stops the workers itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if hasattr(signal, "pthread_sigmask"):  # held back by _Worker until now (see there)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    _die_with_parent(parent)
    give_back = heap_trimmer()
    keep_patterns = patterns_forked()  # (at its end: the next workers' starts)
    while True:
        try:
            batch = conn.recv()
        except EOFError:
            break
        if batch is None:
            break
        for index, path in batch:
            outcome = migrate_file(path, options, rules, keep_text, cache)
            if give_back() and retire:
                # Its last answer says so: the main process gives the rest of the batch to others
                # and kills it at once (_Pool._retire): the patterns are kept before, not after.
                keep_patterns()
                conn.send((index, outcome, RETIRED))
                return
            conn.send((index, outcome))
    keep_patterns()


TRIM_ABOVE = 12 << 20  # bytes a worker may grow past its size at start before it trims its heap
# Bytes a worker may keep past its size at start, after a trim, before it makes way for a new
# one (at the end of its batch; heap_trimmer says why). 16 MB rather than 8 since PRIVATE_ABOVE
# bounds what a worker holds: the worker on the big files retired after nearly every big file
# (a cold -j 2 run of transformers forked 30-33 workers, 23-25 now; a new one re-does what the
# old one had built: 44 regexes, the TF statement filter, ~0.28 G instructions more than a warm
# one over 200 small files).
RETIRE_ABOVE = 16 << 20
# Private bytes (USS: its own pages and those of the main process it wrote to) a worker may hold
# before it makes way for a new one, looked at every CHECK_EVERY files and after each trim
# (reading smaps_rollup takes ~0.3 ms; heap_trimmer says why). 32 MB rather than 24, now that
# libcst parses long texts in pieces (pieces.py) and the peak has room: a worker on small files
# reached 24 MB after 48-80 of them, ~15 of it pages of the main process it had written to,
# which its successor copies again within as many files; each re-fork cost ~0.09 CPU-s (the
# fork and those copies, ~33 ms of system time; the TF statement filter and the rest rebuilt).
# Cold -j 2, 3 rounds side by side at load 6-14, CPU-s / peak PSS MB medians: transformers 4.46.3
# src 15.00 / 117.0 -> 13.63 / 125.6, tensor2tensor 10.51 / 111.7 -> 9.68 / 114.2, mindnlp
# 0.5.1 5.92 / 131.0 -> 5.61 / 135.3.
PRIVATE_ABOVE = 32 << 20
CHECK_EVERY = 16
RETIRED = "retired"  # added to a worker's last answer


def _resident_bytes() -> int:
    with open("/proc/self/statm", "rb") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _private_bytes() -> int:
    """The pages of this process no other maps (smaps_rollup's Private_Clean + Private_Dirty):
    ~0.3 ms to read (the kernel walks the page tables), so not after every file."""
    with open("/proc/self/smaps_rollup", "rb") as f:
        return sum(int(line.split()[1]) for line in f if line.startswith(b"Private_")) << 10


def heap_trimmer(resident: Optional[Callable[[], int]] = None,
                 trim: Optional[Callable[[], object]] = None,
                 private: Optional[Callable[[], int]] = None) -> Callable[[], bool]:
    """What a worker calls after each file: when it has grown more than TRIM_ABOVE past its
    size at start (or after its last trim), glibc's malloc_trim gives the free memory of the C heap back to the system.
    libcst's parser (native code) takes ~65 MB for a 270 KB file and frees it, but the heap
    keeps it: without this every worker stays at the size of its biggest file for the rest of
    the run, and the two workers' peaks add up. (A trim costs a few ms, so not after every file;
    12 MB rather than 32: the worker on the small files no longer sits on up to 32 MB of freed
    heap while the other parses the big ones, -j 2 transformers peak PSS 155 -> 151 MB, and the
    worker on the big half trims 11 times instead of 4, 0.03 s in all.)
    What the heap cannot give back stays: Python's arenas that a few objects made during a big
    file keep alive (transformers: the worker on the big files stays ~20 MB above its start
    after them). So give_back() is True when, after a trim, the worker is still more than
    RETIRE_ABOVE past its start: it then ends after its batch and the pool forks a new one,
    which starts from the main process's pages (runner.prepare made what it needs).
    The resident size misses what a worker copies of the main process's pages by writing to
    them (reference counts, the parent's free heap reused: those pages were resident already),
    most of what the worker on the small files holds: its private memory grew from 2 to 30 MB in
    the first 7 s and 44 MB by the end while its resident size grew 11 MB, and it never trimmed
    (transformers, -j 2; a trim gives back ~1 MB of it: it is live). So every CHECK_EVERY files
    and after a trim, give_back() is also True when the worker's private memory is more than
    PRIVATE_ABOVE. (A worker's share of what it touches is ~20 MB whatever it does first: a
    bound much lower makes the worker on the small files retire every hundred files.)
    Does nothing where there is no /proc or no glibc (nor the private check without smaps_rollup)."""
    if resident is None or trim is None:
        try:
            trim = trim or functools.partial(_libc().malloc_trim, 0)
            resident = resident or _resident_bytes
            start = resident()
        except (OSError, AttributeError, ValueError):
            return lambda: False
        if private is None:
            try:
                _private_bytes()
                private = _private_bytes
            except (OSError, ValueError, IndexError):
                private = None
    else:
        start = resident()
    measure, release, own = resident, trim, private
    floor = [start]  # the size after the last trim: what the heap could not give back stays
    files = [0]  # since the private memory was last looked at

    def give_back() -> bool:
        files[0] += 1
        if measure() > floor[0] + TRIM_ABOVE:
            release()
            floor[0] = measure()
            if floor[0] > start + RETIRE_ABOVE:
                return True
            files[0] = CHECK_EVERY
        if own is None or files[0] < CHECK_EVERY:
            return False
        files[0] = 0
        return own() > PRIVATE_ABOVE

    return give_back


# Files to do from which the workers' common start is made before they fork (prepare).
PREPARE_FROM = 64

# Code that takes the engine through what every worker builds on its first files (below).
_PREPARE = (("prepare_torch.py", "import torch\nx = torch.ones(1).cuda()\n"),
            ("prepare_tensorflow.py", "import tensorflow as tf\nsession = tf.Session()\n"))
# Not prepared: the TF findings' statement filter (partial.statement_filter(rules, "tensorflow"),
# 3 MB), which only a worker that meets such a file builds: made here, the workers' reference
# counting copied its pages into each of them (transformers, -j 2: peak PSS 125.7 -> 130-132 MB).


def prepare(options: Options, rules: RuleSet) -> None:
    """Before the workers fork: migrate two lines of PyTorch and two of TensorFlow here and
    throw the results away, so that what each worker made on its first files -- libcst and
    the codemods imported, the prefilters, the statement filter, the checks of the 1,758
    TensorFlow rules (4 MB), ctypes and the C library (_libc) -- is made once and shared by
    all of them (copy-on-write).
    migrate_source is a pure function: only its caches and imports stay. 0.3 s here, which
    each worker no longer spends (transformers, -j 2: peak PSS about 6 MB lower). Only for a
    run with PREPARE_FROM files or more: a smaller one may parse nothing at all (a pre-commit
    hook on files without device code never imports libcst)."""
    from . import work
    from .dispatch import migrate_source

    with work.apart():  # (for no file: not the project scan's work either, pipeline.py)
        for path, text in _PREPARE:
            migrate_source(text, path, options, rules)
    try:
        _libc()  # (what every worker calls at its start)
    except OSError:  # pragma: no cover - no C library to load: the workers do without
        pass
    gc.collect()  # what a cycle held is not frozen into the workers (_start)


def warm_up(options: Options, rules: RuleSet) -> None:
    """What the first file a pass parses would do (libcst and the PyTorch pass imported, the
    prefilter and the statement filter of the PyTorch rules built), done by migrating two lines
    of PyTorch and throwing the result away: a smaller cold run's part of prepare, while the
    project scan's forked child reads the files (pipeline.warms_early). migrate_source is a
    pure function: only its caches and imports stay."""
    from . import work
    from .dispatch import migrate_source

    path, text = _PREPARE[0]
    with work.apart():
        migrate_source(text, path, options, rules)


class _Worker:
    def __init__(self, context, options: Options, rules: RuleSet, keep_text: bool, cache, retire: bool = False) -> None:
        self.conn, child = context.Pipe()
        self.process = context.Process(target=_worker, args=(child, options, rules, keep_text, cache, os.getpid(), retire),
                                       daemon=True)
        # The child inherits the blocked signals and unblocks them once it ignores Ctrl-C: a Ctrl-C
        # while it starts printed a worker's KeyboardInterrupt traceback (issue 30.10). The
        # parent gets its own right after the start.
        from .source import signals_deferred

        with signals_deferred():
            self.process.start()
        child.close()
        self.pending: Deque[Tuple[int, str]] = deque()  # sent, not answered; [0] is in progress
        self.retired = False  # it sent its last answer and ends (heap_trimmer): start another

    def receive(self, done: Callable[[int, Outcome], None]) -> bool:
        """Take every answer that arrived; False when the pipe broke (the worker died)."""
        try:
            while self.pending and not self.retired and self.conn.poll():
                index, outcome, *retired = self.conn.recv()
                self.pending.popleft()
                done(index, outcome)
                self.retired = bool(retired)
        except (EOFError, OSError):
            return False
        return True


def next_batch(queue: Deque[Tuple[int, str]], worker: int) -> List[Tuple[int, str]]:
    """The next files for worker number `worker`, from `queue` (biggest first): the even
    workers take from the big end, the odd ones from the small end. The two ends meet in the
    middle, so the workers still finish together (no big file left for the end), and with two
    workers the big files are parsed one after the other rather than side by side: libcst takes
    ~65 MB of memory for a 270 KB file (transformers, -j 2: peak PSS 188 -> 169 MB)."""
    take = queue.popleft if worker % 2 == 0 else queue.pop
    return [take() for _ in range(min(BATCH, len(queue)))]


class _Pool:
    def __init__(self, jobs: int, options: Options, rules: RuleSet, keep_text: bool, cache=None) -> None:
        self.jobs = jobs
        self.args = (options, rules, keep_text, cache)
        self.prepared = False
        # A prepared pool keeps one worker forked ahead, idle, to take over from one that retires
        # or dies: a new one cost a join, a fork in this process and its own start, which the
        # retiring worker's core sat idle for (transformers 4.46.3 src, -j 2 cold: 19-33 retire,
        # 67-71 ms idle each at load 15-18, 9-12 ms with the spare). An idle spare holds ~4.5 MB
        # of its own (peak PSS +5 MB).
        self.spare: Optional[_Worker] = None
        # fork: the workers start at once, with everything imported and the rules loaded.
        # (multiprocessing is imported here: a run of one file or -j 1 starts no process)
        import multiprocessing

        method = "fork" if sys.platform.startswith("linux") else None
        self.context = multiprocessing.get_context(method)

    def _start(self) -> _Worker:
        # The parent's objects are frozen while it forks (collecting_rarely): a worker's garbage
        # collections then leave them alone instead of writing into each (which copies the
        # parent's pages into every worker).
        gc.freeze()
        return _Worker(self.context, *self.args, retire=self.prepared)

    def _successor(self) -> _Worker:
        """The worker that takes over from one that retired or died: the spare, when there is one."""
        spare, self.spare = self.spare, None
        if spare is not None and spare.process.is_alive():
            return spare
        if spare is not None:  # died while idle (the out-of-memory killer): nothing of ours lost
            self._stop(spare, graceful=False)
        return self._start()

    def run(self, tasks: List[Tuple[int, str]], done: Callable[[int, Outcome], None], prepared: bool = False) -> None:
        """`prepared`: prepare() ran already, for these options and rules."""
        from multiprocessing import connection

        # Prepared, a new worker costs a fork: one whose heap stays big after a file makes way
        # for a new one (heap_trimmer); unprepared, it would import and build all again.
        # (Only where workers fork: a spawned one, macOS and Windows, starts from nothing.)
        self.prepared = (prepared or len(tasks) >= PREPARE_FROM) and self.context.get_start_method() == "fork"
        if self.prepared and not prepared:
            prepare(*self.args[:2])
        queue = deque(tasks)
        workers = [self._start() for _ in range(self.jobs)]
        finished = False
        try:
            while True:
                for n, w in enumerate(workers):
                    if w.retired:  # the rest of its batch goes back to the queue, at its end
                        if n % 2 == 0:
                            queue.extendleft(reversed(w.pending))
                        else:
                            queue.extend(w.pending)
                        w.pending.clear()
                        self._retire(w)
                        w = workers[n] = self._successor()
                    if w.pending or not queue:
                        continue
                    if not w.process.is_alive():  # died while idle: nothing of ours lost
                        self._stop(w, graceful=False)
                        w = workers[n] = self._successor()
                    batch = next_batch(queue, n)
                    w.pending.extend(batch)
                    try:
                        w.conn.send(batch)
                    except OSError:
                        pass  # it died just now: its sentinel says so below
                busy = [w for w in workers if w.pending]
                if not busy:
                    break
                if self.prepared and self.spare is None and queue:  # (after the batches went out)
                    self.spare = self._start()
                ready = set(connection.wait([w.conn for w in busy] + [w.process.sentinel for w in busy]))
                for w in busy:
                    if w.conn not in ready and w.process.sentinel not in ready:
                        continue
                    if w.receive(done) and (w.retired or w.process.is_alive()):
                        continue  # (a retired one is replaced above)
                    # Dead: whatever it answered was taken above; the file it was on fails.
                    w.receive(done)
                    self._lost(w, queue, done)
                    workers[workers.index(w)] = self._successor()
            finished = True
        finally:
            for w in workers + ([self.spare] if self.spare is not None else []):
                self._stop(w, graceful=finished)
            self.spare = None

    @staticmethod
    def _retire(w: _Worker) -> None:
        """A retired worker sent its last answer (after keeping its patterns: _worker) and has
        nothing left to do: killed and waited for here, before its successor gets a batch, so
        that its memory is given back first. Left to exit by itself while its successor worked,
        on a loaded machine it could still be there at the successor's next one's start
        (transformers, -j 2 cold at load 22: two retirees not yet gone, their two successors and
        the spare, 142 MB)."""
        w.process.kill()
        w.process.join()
        w.conn.close()

    @staticmethod
    def _lost(w: _Worker, queue: Deque[Tuple[int, str]], done: Callable[[int, Outcome], None]) -> None:
        """A worker died: the file it was on fails, the rest of its batch goes back in the queue."""
        w.process.join()
        code = w.process.exitcode
        if w.pending:
            index, path = w.pending.popleft()
            why = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
            done(index, Outcome(FileResult(path=path, error=f"internal error: the worker process died ({why})")))
        queue.extendleft(reversed(w.pending))
        w.pending.clear()
        w.conn.close()

    @staticmethod
    def _stop(w: _Worker, graceful: bool) -> None:
        if graceful:
            try:
                w.conn.send(None)
            except (OSError, ValueError):
                pass
            w.process.join(timeout=2)
        if w.process.is_alive():
            w.process.terminate()
            w.process.join()
        w.conn.close()
