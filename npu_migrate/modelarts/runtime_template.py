# npu-migrate: ModelArts runtime (generated; a later run of npu-migrate updates it in place)
"""What `npu-migrate --modelarts` adds to a training job on ModelArts.

ModelArts starts the job with --data_url (the input) and --train_url (where results go): OBS
URLs (obs://bucket/path) or local paths. The entry script calls modelarts_setup() once, with
what its parser returned, and names its own data and output arguments:

* the input at an OBS --data_url is copied to local disk (/cache/data) once per node: the
  first process copies into a new folder that then replaces the old one, the others wait;
  the copy is redone when the job or the data's OBS listing (names, sizes, times) changed;
  the data arguments then point into the local copy (relative defaults such as
  data/celeba/images are looked up inside it);
* global rank 0 copies to --train_url what the job produced: the files created or changed
  during the run in the working folder, in the output arguments' files and folders and in
  the local output folder (/cache/output, emptied at start); at exit, after an exception,
  on SIGTERM and, if asked, every few minutes; each file only when it changed, and never
  under its own name while a process is writing it (a checkpoint cut short by SIGTERM
  goes as NAME.incomplete; train_url keeps the last complete copy under NAME);
* at its plain exit, rank 0 first waits for the job's other processes on its node to end
  (each holds a lock of its own in the node's cache folder from modelarts_setup() to its
  end, however it ends: an exception, a crash, SIGKILL), so that an output several ranks
  write reaches train_url whole and under its own name; at most WAIT_FOR_OTHERS seconds
  (NPU_MIGRATE_MODELARTS_WAIT), after which, or on SIGTERM, it copies at once and a file
  still being written goes as NAME.incomplete, with a log line saying so; so does a file
  one of them was writing when it was killed (it ended without its exit handlers: a
  crash, SIGKILL, os._exit). It does not wait in a single-process job, nor after an
  exception of its own or a sys.exit(), exit() or quit() with a failing status (the others
  may be waiting for it in a collective: it ends, and the launcher stops them; the status
  of a `raise SystemExit(1)` is not seen, and a SystemExit the script caught still counts).

Global rank 0 is RANK, RANK_ID or OMPI_COMM_WORLD_RANK 0; without them (and under MindSpore's
msrun across nodes without --node_rank, which leaves every worker of its node the scheduler's
RANK_ID=0) the first device (LOCAL_RANK or DEVICE_ID 0) of the first node (VC_TASK_INDEX 0).
msrun's scheduler (MS_ROLE=MS_SCHED) runs the script too: it copies nothing, and no process
waits for it. In a job of several nodes, whose disks are their own, each node does the same
for its own processes and outputs: the first process of node N (VC_TASK_INDEX, torchrun's
GROUP_RANK or msrun's --node_rank, read from msrun's command line, says N; without it, a node
other than msrun's master is named after its host) copies what that node's processes wrote to
the folder node-N of --train_url, so that no rank's file is lost and a file every node writes under one name is
never overwritten; --train_url itself holds the first node's, as in a job of one node. With
resume, each node gets its own back (the first node all of --train_url but the other nodes'
folders, which it never copies either).

Without --data_url and --train_url nothing changes. Standard library only (Huawei's MoXing
for OBS URLs), Python 3.7, no shell. NPU_MIGRATE_MODELARTS_CACHE names a folder to use
instead of /cache (to rehearse a job on a laptop).
"""

import argparse
import atexit
import builtins
import fnmatch
import hashlib
import json
import multiprocessing
import os
import select
import shutil
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

try:
    import fcntl
except ImportError:  # Windows: no file locks, and no multi-process jobs to guard there
    fcntl = None

VERSION = 5
# When the script imported this module: with its other imports, before any of its own work (and
# before the other processes of the node, which start with it, have written an output).
IMPORTED = time.time()
CACHE = "/cache"
# Not copied to train_url: the code's own caches and the platform's and tools' hidden folders.
SKIPPED_FOLDERS = ("__pycache__", ".git", ".ipynb_checkpoints")
SKIPPED_SUFFIXES = (".pyc", ".pyo")
MAX_FILES = 200000  # files looked at per folder when comparing before and after
# Input files whose size and time are compared before an earlier copy is reused.
MAX_LISTED = 5000
# Set by a generated boot file: where the script leaves what it watches, for the boot file to
# copy if the script dies without running its exit handlers.
BOOT_FILE_OUTPUTS = "NPU_MIGRATE_MODELARTS_OUTPUTS"
# Seconds global rank 0 waits at its exit for the job's other processes on its node to end
# before its final copy (a file one of them still writes then goes as NAME.incomplete);
# NPU_MIGRATE_MODELARTS_WAIT sets another bound.
WAIT_FOR_OTHERS = 300
WAIT_VARIABLE = "NPU_MIGRATE_MODELARTS_WAIT"


def modelarts_setup(
    parsed=None,
    data=(),
    outputs=(),
    ignore=(),
    data_dir="/cache/data",
    output_dir="/cache/output",
    resume=False,
    sync_every=0,
):
    """Make --data_url local and arrange for the outputs to reach --train_url.

    `parsed` is what the script's parser returned (a namespace, or the pair that
    parse_known_args() returns) and is returned as it came, with the `data` arguments
    pointing into the local copy. With None, the two URLs are read from the command line.
    `outputs` are the script's output arguments (files or folders), `ignore` folders the
    script downloads into; `sync_every` is in minutes (0: only at the end).
    """
    if parsed is None:
        parsed = _parse_urls()
    args = parsed[0] if isinstance(parsed, tuple) else parsed
    data_url = getattr(args, "data_url", None)
    train_url = getattr(args, "train_url", None)
    if not data_url and not train_url:
        return parsed
    job = Job.current(data_url, train_url, data_dir)
    if job.data is not None:
        for name in data:
            value = getattr(args, name, None)
            setattr(args, name, _rebase(value, job.data, data_url, len(data)))
    if train_url and job.train_url is None:
        # A node other than the first copies its own outputs to a folder of its own.
        job.node = _node_index()
        job.train_url = _node_url(train_url, job.node)
        job.watch(args, outputs, ignore, data, output_dir, resume)
        if _is_uploader():
            if isinstance(job.node, str):
                log(
                    "msrun started this node's workers without --node_rank: which node of "
                    f"the job this is, nothing says; its outputs go to {job.train_url}, "
                    "named after its host (msrun --node_rank N names the folder node-N)"
                )
            job.upload_at_exit(sync_every)
        elif job.others is not None:
            job.others.join()  # rank 0 waits for this process to end before its final copy
    return parsed


def _parse_urls():
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--data_url")
    parser.add_argument("--train_url")
    return parser.parse_known_args()[0]


def is_obs(url):
    return str(url).lower().startswith(("obs://", "s3://"))


def _moxing(url):
    try:
        import moxing
    except ImportError:
        moxing = None
    # Huawei's MoXing has moxing.file; the PyPI package called moxing is unrelated.
    if not hasattr(getattr(moxing, "file", None), "copy_parallel"):
        raise SystemExit(
            f"modelarts: {url} is an OBS URL: copying it needs Huawei MoXing, which ModelArts "
            "training images include but this Python does not (the PyPI package named "
            "moxing is a different project). Pass a local path instead."
        )
    return moxing


def log(message):
    print(f"[modelarts] {message}", file=sys.stderr, flush=True)


def _cache_path(path):
    """/cache/... moved under $NPU_MIGRATE_MODELARTS_CACHE when that is set."""
    override = os.environ.get("NPU_MIGRATE_MODELARTS_CACHE")
    if override and (path == CACHE or path.startswith(CACHE + "/")):
        path = override + path[len(CACHE) :]
    return os.path.abspath(path)


class Job:
    """What modelarts_setup() arranged in this process: the input's local copy, and what is
    copied to --train_url (`sent` is None in a process that copies nothing)."""

    _current = None  # the Job of this process (a forked child makes its own)

    def __init__(self, start=None, cwd=None):
        self.pid = os.getpid()
        self.start = time.time() if start is None else start
        self.cwd = cwd or os.getcwd()
        self.data = None  # the local copy of --data_url
        self.train_url = None  # where this node's outputs go
        self.node = 0  # the node's index in a job of several nodes
        self.watched = []  # (file or folder, its name under train_url)
        self.skipped = []  # folders inside the watched ones that are not outputs
        self.before = {}  # path: (mtime, size) when the job started
        # when the node's first process of the job imported this module
        self.started = IMPORTED
        self.sent = None  # path: (mtime, size) when it was copied
        self.copies = 0  # files copied (also those that changed while they were copied)
        self.finished = False
        self.copying = None  # the thread copying now
        self.previous_sigterm = None
        self.others = None  # the other processes of the job on this node (_Others)
        self.cut_short = set()  # files one of them was writing when it was killed
        self.lock = threading.Lock()

    @classmethod
    def current(cls, data_url, train_url, data_dir):
        job = cls._current
        if job is None or job.pid != os.getpid():
            job = cls._current = cls()
            for url in (data_url, train_url):
                if url and is_obs(url):
                    _moxing(url)  # fail now, not after hours of training
            if data_url:
                job.data = _local_input(data_url, data_dir)
        return job

    # -- what is watched ------------------------------------------------------------------

    def watch(self, args, outputs, ignore, data, output_dir, resume):
        """Decide what is watched and empty the local output folder (once per node and run)."""
        local = _cache_path(output_dir)
        roots = []  # the output arguments' files and folders
        for name in outputs:
            value = _path_value(args, name)
            if (not value or is_obs(value)) and _folder_argument(name):
                # The script writes locally, the copy goes to OBS.
                setattr(args, name, local)
                value = local
            if value and not is_obs(value):
                roots.append(os.path.abspath(value))
        folders = [r for r in roots if _looks_like_folder(r)]
        # The folder of an output file (--save output/model.pt, a prefix such as
        # output/bert.model) when it is the job's own: the working folder or /cache.
        cache = _cache_path(CACHE)
        near = [
            os.path.dirname(r)
            for r in roots
            if r not in folders and (_inside(r, self.cwd) or _inside(r, cache))
        ]
        main = folders[0] if folders else near[0] if near else local
        if not is_obs(self.train_url) and _inside(main, self.train_url):
            main = local  # the script writes straight into --train_url
        self.watched = [(main, "")]
        for root in [local, self.cwd] + roots + near:
            real = os.path.realpath(root)
            if any(real == os.path.realpath(w) for w, _ in self.watched):
                continue
            # Named as in the output folder, else as in the working folder, else by its name.
            if _inside(root, main):
                name = os.path.relpath(root, main)
            elif _inside(root, self.cwd):
                name = os.path.relpath(root, self.cwd)
            else:
                name = os.path.basename(root.rstrip("/\\")) or "output"
            self.watched.append((root, "" if name == "." else name))
        skipped = [os.path.abspath(p) for p in ignore]
        skipped += [self.data] if self.data is not None else []
        paths = [_path_value(args, n) for n in data]
        skipped += [os.path.abspath(p) for p in paths if p and not is_obs(p)]
        skipped += [] if is_obs(self.train_url) else [os.path.abspath(self.train_url)]
        # The other nodes' folders of train_url: theirs, not this node's (never restored here, and
        # never copied again from here).
        others = _other_nodes() if not self.node else []
        skipped += [os.path.join(main, name) for name in others if "*" not in name]
        self.skipped = [
            s for s in skipped if not any(_inside(w, s) for w, _ in self.watched)
        ]
        script = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else self.cwd
        if _world_size() > 1 and fcntl is not None and _is_main_process():
            # (msrun's scheduler outlives the ranks: none of them waits for it)
            if not _is_msrun_scheduler():
                self.others = _Others(local)
        with _Once(local, "output") as once:
            if not once.done():
                if not _inside(self.cwd, local) and not _inside(script, local):
                    _remove(local)  # what an earlier job left there is not this job's
                os.makedirs(local, exist_ok=True)
                if resume:
                    _restore(self.train_url, main, others)
                if self.others is not None:
                    self.others.forget_earlier_runs()
                once.mark()
            # The node's first process here imported this module before any process of the
            # node wrote an output (each writes after its own setup): a file older than that
            # is an earlier run's, even when another rank, quicker than this one, wrote it
            # before this process started.
            self.started = min(IMPORTED, once.started())

    def files(self):
        """(path, name under train_url) of each file in the watched places, the most specific
        place first: a file in the output folder is named as in the output folder."""
        seen = set()
        places = sorted(self.watched, key=lambda w: -len(os.path.realpath(w[0])))
        for root, prefix in places:
            if os.path.isdir(root):
                found = self._folder_files(root, prefix)
            else:
                found = _files_named_after(root, prefix)
            for path, name in found:
                if path not in seen:
                    seen.add(path)
                    yield path, name

    def _folder_files(self, root, prefix):
        count = 0
        for folder, subfolders, files in os.walk(root):
            subfolders[:] = [
                s
                for s in sorted(subfolders)
                if s not in SKIPPED_FOLDERS
                and ".modelarts-" not in s  # this code's own (an input copy, the locks)
                and not any(_inside(os.path.join(folder, s), x) for x in self.skipped)
            ]
            for name in sorted(files):
                if not name.endswith(SKIPPED_SUFFIXES) and ".modelarts-" not in name:
                    path = os.path.join(folder, name)
                    yield path, os.path.join(prefix, os.path.relpath(path, root))
            count += len(files)
            if count > MAX_FILES:
                break

    # -- copying the outputs ---------------------------------------------------------------

    def upload_at_exit(self, sync_every):
        # What was there before: not what any process of the node's job wrote since the first
        # of them started (a quicker rank may have saved its checkpoint before this process
        # imported this module; and a file's time has a coarse clock: a rewrite of the same size
        # in the same tick would look unchanged).
        self.before = {}
        for path, _ in self.files():
            stamp = _stamp(path)
            if stamp is not None and stamp[0] < self.started:
                self.before[path] = stamp
        self.sent = {}
        atexit.register(self.upload, True)
        if self.others is not None:
            _note_exit_status()
        # A boot file generated by npu-migrate that started this script copies the outputs
        # itself if the script dies without running its exit handlers (a crash, SIGKILL).
        boot_file = os.environ.get(BOOT_FILE_OUTPUTS)
        if boot_file:
            with open(boot_file, "w") as f:
                json.dump(self.saved(), f)
        if sync_every and float(sync_every) > 0:
            seconds = float(sync_every) * 60
            threading.Thread(target=self._sync, args=(seconds,), daemon=True).start()
        try:
            self.previous_sigterm = signal.signal(signal.SIGTERM, self._on_sigterm)
        except ValueError:  # not the main thread: SIGTERM keeps its handler
            pass

    def saved(self):
        """What the boot file needs to copy the outputs after this process is gone."""
        keys = ("train_url", "node", "watched", "skipped", "cwd", "start", "data")
        saved = {k: getattr(self, k) for k in keys}
        saved["before"] = sorted(self.before.items())
        return saved

    @classmethod
    def from_saved(cls, saved):
        job = cls(saved["start"], saved["cwd"])
        job.train_url, job.data = saved["train_url"], saved["data"]
        job.node = saved.get("node", 0)
        job.watched = [tuple(w) for w in saved["watched"]]
        job.skipped = saved["skipped"]
        job.before = {p: tuple(s) if s else s for p, s in saved["before"]}
        job.sent = {}
        return job

    def _sync(self, seconds):
        while True:
            time.sleep(seconds)
            self.upload()

    def _on_sigterm(self, signum, frame):
        if self.copying is threading.current_thread():
            return  # the process is already ending and copying: let the copy finish
        self.upload(final=True, interrupted=True)
        previous = self.previous_sigterm
        if callable(previous):
            previous(signum, frame)
        elif previous != signal.SIG_IGN:
            # What SIGTERM did before: end the process.
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    def upload(self, final=False, interrupted=False):
        """Copy the files created or changed since the start (and since the last copy) to
        --train_url; at the end, warn when nothing at all was copied. `interrupted`: by a
        signal, which may have stopped this process in the middle of writing a file."""
        if self.pid != os.getpid() or self.sent is None:
            return  # a forked child, or a process that copies nothing
        if final and not interrupted and self.others is not None and not self.finished:
            try:
                self._wait_for_others()
            # Ctrl-C, or a SIGTERM handler of the script's own that raised
            except BaseException as exc:
                log(f"the wait for the other processes ended with {exc!r}: copying now")
        with self.lock:
            if self.finished:
                return
            self.copying = threading.current_thread()
            try:
                self._upload(final, interrupted)
            except Exception as exc:
                # At exit or in a signal handler: report, do not raise.
                log(f"copying the outputs to {self.train_url} failed: {exc}")
            finally:
                self.copying = None
            if final:
                self.finished = True
                if not self.copies and self.node:
                    log(f"no file of node {self.node} to copy to {self.train_url}")
                elif not self.copies:
                    self._nothing_copied()
                boot_file = os.environ.get(BOOT_FILE_OUTPUTS)
                if boot_file and self is Job._current and os.path.exists(boot_file):
                    # Copied: nothing left for the boot file to do.
                    open(boot_file, "w").close()

    def _wait_for_others(self):
        """At a plain exit, before the final copy: wait until the job's other processes on
        this node have ended (their files are then whole), at most WAIT_FOR_OTHERS seconds;
        not after an exception or a failing sys.exit() of this process (the others may be
        waiting for it)."""
        others, self.others = self.others, None
        running = others.running()
        # Ended already, without its exit handlers: what it was writing is not known.
        for pid in sorted(others.killed):
            log(
                f"pid {pid} of the job ended without its exit handlers (killed, or it "
                "crashed): a file it was writing then may be cut short"
            )
        if not running:
            others.forget()
            return
        # An uncaught exception, or sys.exit() with a failing status: end now. The others
        # may be waiting for this process, and its launcher stops them once it has ended.
        if getattr(sys, "last_value", None) is not None:
            failed = "this process failed"
        elif _EXIT_STATUS and _failing(_EXIT_STATUS[-1]):
            failed = f"this process exits with {_EXIT_STATUS[-1]!r}"
        else:
            failed = None
        if failed:
            log(
                f"{failed}: the final copy starts now, without waiting for "
                f"{_count(running, 'other process')} of the job on this node"
            )
            return
        bound = _wait_bound()
        read, write = os.pipe()
        stopped = []

        def on_sigterm(signum, frame):
            stopped.append(signum)
            os.write(write, b"x")

        # From here on, SIGTERM ends the wait, whatever handler the script has set since (one
        # that only notes it would leave this process waiting until SIGKILL, copying nothing).
        try:
            previous = signal.signal(signal.SIGTERM, on_sigterm)
        except ValueError:  # not the main thread: SIGTERM keeps its handler
            previous = None
        waiter = threading.Thread(target=others.wait, args=(write,), daemon=True)
        waiter.start()
        # What each of them is writing now: cut short if it is killed before it ends.
        writing = _writers([path for path, _ in self.files()], False, others.names())
        log(
            f"waiting up to {bound:g} s for {_count(running, 'other process')} of the job "
            f"on this node to end before the final copy ({', '.join(running)})"
        )
        try:
            ready = select.select([read], [], [], bound)[0]
        finally:
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)
        for path, pids in writing.items():
            if pids & others.killed:
                self.cut_short.add(path)
        for pid in sorted(others.killed):
            files = sorted(p for p, pids in writing.items() if pid in pids)
            if files:
                log(
                    f"pid {pid} ended without its exit handlers (killed, or it crashed) "
                    f"while it was writing {', '.join(files)}"
                )
        if stopped:
            log("SIGTERM: the final copy starts now, without waiting any longer")
        elif not ready:
            running = others.running(block=False)
            log(
                f"{_count(running, 'other process')} of the job on this node did not end "
                f"within {bound:g} s ({', '.join(running)}): the final copy starts now (a "
                f"file one of them still writes goes as NAME.incomplete; {WAIT_VARIABLE} "
                "sets the bound in seconds)"
            )
        if others.ended_all:
            waiter.join()  # it has written to the pipe: both ends can be closed
            os.close(read)
            os.close(write)
            others.forget()
        # else the waiting thread may still write to the pipe: it stays open to the end

    def _upload(self, final, interrupted):
        changed = []
        for path, name in self.files():
            stamp = _stamp(path)
            known = (self.before.get(path), self.sent.get(path))
            if stamp is not None and stamp not in known:
                changed.append((path, name, stamp))
        # A file a process is writing (a save in progress, one that SIGTERM cut short) never
        # goes to train_url under its own name, where its last complete copy stays: it waits
        # for a later copy or, at the end, goes as NAME.incomplete. At a plain exit this
        # process writes nothing any more: the files it left open are whole.
        own = interrupted or not final
        busy = _open_for_writing((path for path, _, _ in changed), own)
        if final:  # and those another process of the job was writing when it was killed
            busy |= self.cut_short
        if not final:
            changed = [c for c in changed if c[0] not in busy]
        for i, (path, name, stamp) in enumerate(changed):
            if path in busy:
                changed[i] = (path, name + ".incomplete", stamp)
                log(
                    f"{path} was being written when the job ended: copied as "
                    f"{os.path.basename(name)}.incomplete, not under its own name"
                )
        if not changed:
            return
        log(f"copying {len(changed)} file(s) to {self.train_url}")
        mox = _moxing(self.train_url).file if is_obs(self.train_url) else None
        for path, name, stamp in changed:
            target = self.train_url.rstrip("/") + "/" + name.replace(os.sep, "/")
            if mox is not None:
                mox.copy(path, target)
            else:
                os.makedirs(os.path.dirname(target), exist_ok=True)
                shutil.copy2(path, target)
            self.copies += 1
            if _stamp(path) == stamp:
                self.sent[path] = stamp
            else:  # written to while it was copied: copied again at the next look
                log(f"{path} changed while it was copied")

    def _nothing_copied(self):
        """Name the files the job wrote outside the watched places (a bounded look around)."""
        found, looked = [], 0
        for place in (os.path.dirname(self.cwd), _cache_path(CACHE)):
            for folder, subfolders, files in os.walk(place):
                subfolders[:] = [
                    s
                    for s in subfolders
                    if s not in SKIPPED_FOLDERS
                    and not (self.data and _inside(os.path.join(folder, s), self.data))
                    and os.path.join(folder, s) not in ("/proc", "/sys", "/dev")
                ]
                looked += len(files)
                for name in files:
                    path = os.path.join(folder, name)
                    stamp = _stamp(path)
                    if stamp and stamp[0] >= self.start and ".modelarts-" not in path:
                        found.append(path)
                if len(found) > 20 or looked > 20000:
                    break
        watched = ", ".join(w for w, _ in self.watched)
        if found:
            wrote = "it wrote " + ", ".join(sorted(set(found))[:10])
        else:
            wrote = "no file it wrote was found"
        log(
            f"warning: nothing was copied to {self.train_url}: no file in {watched} was "
            f"created or changed by the job; {wrote} (save them under the working folder, "
            "or name the script's output argument with npu-migrate --output-arg)"
        )


def upload_saved(path):
    """For the boot file: copy what a script that died without its exit handlers left."""
    with open(path) as f:
        Job.from_saved(json.load(f)).upload()


# -- the input --------------------------------------------------------------------------


def _local_input(data_url, data_dir):
    if not is_obs(data_url):
        return os.path.abspath(data_url)  # a local path (newer jobs download the input)
    local = _cache_path(data_dir)
    _copy_in(data_url, local)
    return local


def _rebase(value, local, data_url, count):
    """Where the script's data argument points once the input is at `local`."""
    if hasattr(value, "__fspath__") and not isinstance(value, str):
        return type(value)(_rebase(os.fspath(value), local, data_url, count))  # a Path
    if isinstance(value, (list, tuple)):
        # nargs="+" / action="append" (OpenNMT-py's `-models a.pt b.pt`): each path is rebased,
        # and the script still gets a list (the folder's name alone would be read letter by letter)
        items = value or [None]
        return type(value)(
            _rebase(v, local, data_url, max(count, len(items))) for v in items
        )
    if not value or not isinstance(value, str) or is_obs(value) or value == data_url:
        return local
    if os.path.isabs(value) and os.path.exists(value):
        return value  # a path on this machine, given on purpose
    parts = [p for p in value.replace("\\", "/").split("/") if p not in ("", ".", "..")]
    # data/celeba/images: <local>/data/celeba/images, <local>/celeba/images, ...
    for i in range(len(parts)):
        candidate = os.path.join(local, *parts[i:])
        if os.path.exists(candidate):
            return candidate
    return local if count == 1 or not parts else os.path.join(local, parts[-1])


def _job_id():
    """What tells this job from an earlier one that used the same /cache folders."""
    parts = [os.environ.get(name, "") for name in ("MA_VJ_NAME", "TORCHELASTIC_RUN_ID")]
    try:
        with open("/proc/sys/kernel/random/boot_id") as boot_id:
            parts.append(boot_id.read().strip())
    except OSError:
        pass
    parts.append(_started(1))  # changes whenever the container starts again
    return _digest("\n".join(parts))


def _run_id():
    """This job, and the launcher that started the processes of this run of it."""
    pid = os.getppid() if _world_size() > 1 else os.getpid()
    return _digest(f"{_job_id()} {pid} {_started(pid)}")


def _digest(text):
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:16]


def _started(pid):
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


class _Once:
    """A lock shared by the processes of a node, and a marker saying this run did `what`."""

    def __init__(self, folder, what):
        parent, name = os.path.split(folder.rstrip("/\\"))
        os.makedirs(parent, exist_ok=True)
        self.prefix = os.path.join(parent, f".{name}.modelarts-{what}")
        self.marker = f"{self.prefix}-run-{_run_id()}"

    def __enter__(self):
        self.file = open(self.prefix + ".lock", "a")
        if fcntl is not None:
            try:
                fcntl.flock(self.file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                log(f"waiting for another process of this job ({self.prefix})")
                fcntl.flock(self.file.fileno(), fcntl.LOCK_EX)
        return self

    def done(self):
        return os.path.exists(self.marker)

    def mark(self):
        parent = os.path.dirname(self.prefix)
        base = os.path.basename(self.prefix) + "-run-"
        for name in os.listdir(parent):
            if name.startswith(base):
                os.remove(os.path.join(parent, name))
        with open(self.marker, "w") as marker:
            marker.write(repr(IMPORTED))

    def started(self):
        """When the process that did `what` for this run imported this module."""
        try:
            with open(self.marker) as marker:
                return float(marker.read())
        except (OSError, ValueError):
            return IMPORTED

    def __exit__(self, *exc):
        self.file.close()  # releases the lock (so does the end of a process that dies)


def _listing(url):
    """The input's OBS listing, each file with its size and time: copied again when it
    changes (a file replaced under the same name too). None, and copied again, for more
    files than are worth a look each or an entry that cannot be looked at."""
    mox = _moxing(url).file
    try:
        if not mox.is_directory(url):
            return [url, _file_stamp(mox, url)]
        names = sorted(str(n) for n in mox.list_directory(url, recursive=True))
        if len(names) > MAX_LISTED:
            return None
        folder = url.rstrip("/")
        # One request per file: in parallel, as copy_parallel copies.
        with ThreadPoolExecutor(16) as pool:
            stamps = pool.map(lambda n: _file_stamp(mox, f"{folder}/{n}"), names)
            return [url] + [f"{n} {stamp}" for n, stamp in zip(names, stamps)]
    except Exception as exc:  # MoXing's own exceptions (a folder that is only a prefix)
        log(f"{url} is copied again: its listing could not be read ({exc})")
        return None


def _file_stamp(mox, url):
    stat = mox.stat(url)
    return "" if stat.is_directory else f"{stat.length} {stat.mtime_nsec}"


def _copy_in(url, local):
    """Copy url to local once per node and run: not again when this job already copied
    the same listing, always when the job or the listing changed."""
    with _Once(local, "data") as once:
        if once.done() and os.path.isdir(local):
            return
        source = local + ".modelarts-source"
        listing = _listing(url)
        key = listing and _job_id() + " " + _digest("\n".join(listing))
        old = None
        if os.path.isfile(source):
            with open(source) as f:
                old = f.read().strip()
        if key and old == key and os.path.isdir(local):
            log(f"{url} is already in {local} (same job, same listing)")
        else:
            # A new folder, switched into place: nothing of an earlier copy survives.
            fresh = f"{local}.modelarts-new-{os.getpid()}"
            _remove(fresh)
            log(f"copying {url} to {local}")
            _copy(url, fresh)
            if os.path.lexists(source):
                os.remove(source)
            if os.path.lexists(local):
                stale = f"{local}.modelarts-old-{os.getpid()}"
                os.rename(local, stale)
                _remove(stale)
            os.rename(fresh, local)
            if key:
                with open(source, "w") as f:
                    f.write(key + "\n")
        once.mark()


def _remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        os.remove(path)


def _copy(src, dst):
    """Copy folder (or file) src to dst; either may be an OBS URL."""
    if is_obs(src) or is_obs(dst):
        mox = _moxing(src if is_obs(src) else dst).file
        if is_obs(src) and not mox.is_directory(src):
            os.makedirs(dst, exist_ok=True)
            mox.copy(src, os.path.join(dst, src.rstrip("/").rsplit("/", 1)[-1]))
        else:
            mox.copy_parallel(src_url=src, dst_url=dst)
        return
    for folder, subfolders, files in os.walk(src):
        target = os.path.join(dst, os.path.relpath(folder, src))
        os.makedirs(target, exist_ok=True)
        for name in files:
            shutil.copy2(os.path.join(folder, name), os.path.join(target, name))


# -- the outputs ------------------------------------------------------------------------


def _path_value(args, name):
    """The argument's value as a str path ('' when it is none)."""
    value = getattr(args, name, None)
    value = os.fspath(value) if hasattr(value, "__fspath__") else value
    return value if isinstance(value, str) else ""


def _looks_like_folder(path):
    name = os.path.basename(path.rstrip("/\\"))
    return name in ("", ".", "..") or "." not in name or os.path.isdir(path)


def _folder_argument(name):
    return name == "train_url" or name.endswith(("dir", "folder", "outf"))


def _inside(path, folder):
    path, folder = os.path.realpath(path), os.path.realpath(folder)
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _restore(train_url, folder, others=()):
    """Copy what is at train_url into `folder`, but for its folders named in `others` (the
    other nodes' outputs)."""
    if is_obs(train_url):
        found = _moxing(train_url).file.exists(train_url)
    else:
        found = os.path.isdir(train_url) and not _inside(folder, train_url)
    if not found:
        return
    log(f"copying {train_url} to {folder} (to resume)")
    if not others:
        _copy(train_url, folder)
        return
    # Entry by entry, but for the other nodes' folders.
    os.makedirs(folder, exist_ok=True)
    local = not is_obs(train_url)
    mox = None if local else _moxing(train_url).file
    if local:
        names = sorted(os.listdir(train_url))
    else:
        names = [str(n).rstrip("/") for n in mox.list_directory(train_url)]
    for name in names:
        if any(fnmatch.fnmatchcase(name, other) for other in others):
            continue
        source = train_url.rstrip("/") + "/" + name
        target = os.path.join(folder, name)
        if os.path.isdir(source) if local else mox.is_directory(source):
            _copy(source, target)
        elif local:
            shutil.copy2(source, target)
        else:
            mox.copy(source, target)


def _files_named_after(output_file, prefix):
    """An output file and those named after it (model.pt.ep1), named as under `prefix`."""
    folder, base = os.path.split(output_file)
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        names = []
    for name in names:
        path = os.path.join(folder, name)
        named_after = name == base or name.startswith(tuple(base + c for c in "._-"))
        if named_after and os.path.isfile(path):
            yield path, os.path.join(os.path.dirname(prefix), name)


def _open_for_writing(paths, own=True):
    """Those of `paths` that a process of this machine (this one too if `own`) has open for
    writing other than appending (a log's lines so far are whole); /proc tells, and where
    there is none, no file is."""
    return set(_writers(paths, own))


def _writers(paths, own=True, among=None):
    """{path: the pids that have it open for writing} for those of `paths` open so, by any
    process of this machine or by those `among` (pids)."""
    wanted = {os.path.realpath(p): p for p in paths}
    busy = {}
    try:
        pids = [pid for pid in os.listdir("/proc") if pid.isdigit()]
    except OSError:
        return busy
    if not own:
        pids = [pid for pid in pids if pid != str(os.getpid())]
    if among is not None:
        pids = [pid for pid in pids if pid in among]
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue  # ended, or another user's
        for fd in fds:
            try:
                path = wanted.get(os.readlink(f"/proc/{pid}/fd/{fd}"))
                if path is not None and _writable(f"/proc/{pid}/fdinfo/{fd}"):
                    busy.setdefault(path, set()).add(pid)
            except OSError:
                continue
    return busy


def _writable(fdinfo):
    with open(fdinfo) as info:
        for line in info:
            if line.startswith("flags:"):
                flags = int(line.split()[1], 8)
                writing = flags & (os.O_WRONLY | os.O_RDWR)
                return bool(writing) and not flags & os.O_APPEND
    return False


def _stamp(path):
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return (stat.st_mtime, stat.st_size)


def _is_main_process():
    # not a worker started by the script itself (multiprocessing, a data loader's)
    return multiprocessing.current_process().name == "MainProcess"


def _world_size():
    """How many processes the job has (torchrun, Ascend launchers, mpirun)."""
    for name in ("WORLD_SIZE", "RANK_SIZE", "OMPI_COMM_WORLD_SIZE"):
        value = os.environ.get(name, "").strip()
        if value.isdigit():
            return int(value)
    return 1


def _node_size():
    """How many of them run on this node, when the launcher says (None when it does not)."""
    env = os.environ
    for name in ("LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"):
        value = env.get(name, "").strip()
        if value.isdigit():
            return int(value)
    size = _world_size()
    for name in ("VC_WORKER_NUM", "MA_NUM_HOSTS"):  # ModelArts: the nodes of the job
        nodes = env.get(name, "").strip()
        if nodes.isdigit() and int(nodes) > 0 and size % int(nodes) == 0:
            return size // int(nodes)
    msrun = _msrun_options()  # (which exports no such variable)
    if msrun:
        return min(_number(msrun.get("local_worker_num"), 8), _world_size())
    return None


# The statuses the script's main thread asked to exit with, the last one last
# (_note_exit_status; in another thread a SystemExit ends only that thread).
_EXIT_STATUS = []


def _note_exit_status():
    """Have sys.exit(), exit() and quit() note the status they are given: the exit handlers
    cannot see the status a process ends with (an uncaught exception leaves sys.last_value,
    a SystemExit nothing), and a failing one must not wait for the other processes."""

    def noting(original):
        def exit(*status):
            if threading.current_thread() is threading.main_thread():
                _EXIT_STATUS.append(status[0] if status else None)
            return original(*status)

        exit.npu_migrate_noting = True
        exit.__doc__ = getattr(original, "__doc__", None)
        return exit

    if not getattr(sys.exit, "npu_migrate_noting", False):
        sys.exit = noting(sys.exit)
    # and the site module's exit() and quit(), which raise SystemExit themselves
    for name in ("exit", "quit"):
        original = getattr(builtins, name, None)
        if callable(original) and not getattr(original, "npu_migrate_noting", False):
            setattr(builtins, name, noting(original))


def _failing(status):
    """Whether exiting with `status` (as sys.exit takes it) fails: None and 0 do not, another
    number is the exit status (modulo 256), anything else is printed and gives 1."""
    if status is None:
        return False
    return not isinstance(status, int) or status & 0xFF != 0


def _wait_bound():
    value = os.environ.get(WAIT_VARIABLE, "").strip()
    try:
        return max(0.0, float(value)) if value else float(WAIT_FOR_OTHERS)
    except ValueError:
        log(f"{WAIT_VARIABLE}={value}: not seconds ({WAIT_FOR_OTHERS} used)")
        return float(WAIT_FOR_OTHERS)


def _count(items, what):
    return f"{len(items)} {what}" + ("" if len(items) == 1 else "es")


class _Others:
    """The processes of this job on this node, as global rank 0 waits for them at its exit.

    Each process other than rank 0 holds a lock on a file of its own (named by its pid) in a
    folder of this run beside the local output folder, from modelarts_setup() to its end: the
    system lets go of the lock however the process ends (its exit, an exception, a crash,
    SIGKILL), after it has closed its files. Rank 0 waits for each lock, and for as many
    processes as the launcher says run on the node while one that may still join is alive
    (started by the same launcher, running this interpreter, and not joined yet: looked for
    again every 50 ms). A process started by the script itself (torch.multiprocessing.spawn,
    a data loader's worker) is none of them: it ends before the script does."""

    def __init__(self, folder):
        parent, name = os.path.split(folder.rstrip("/\\"))
        self.base = os.path.join(parent, f".{name}.modelarts-ranks-")
        self.folder = self.base + _run_id()
        self.expected = None if _node_size() is None else _node_size() - 1
        self.ended = set()
        self.killed = set()  # of those ended: without running their exit handlers
        self.ended_all = False
        self.held = None
        self.pid = None  # the process that joined

    def forget_earlier_runs(self):
        parent, prefix = os.path.split(self.base)
        for name in os.listdir(parent):
            path = os.path.join(parent, name)
            if name.startswith(prefix) and path != self.folder:
                _remove(path)  # only this run's processes are waited for

    def join(self):
        """This process is one of them: hold its lock until it ends."""
        self.pid = os.getpid()
        path = os.path.join(self.folder, str(self.pid))
        try:
            os.makedirs(self.folder, exist_ok=True)
            # Locked before it gets its name: rank 0 never finds it unlocked while this runs.
            self.held = open(path + ".new", "w")
            fcntl.flock(self.held.fileno(), fcntl.LOCK_EX)
            os.replace(path + ".new", path)
        except OSError as exc:
            log(f"rank 0 will not wait for this process at its end: {path}: {exc}")
            return
        atexit.register(self._ended)  # registered early: it runs after the script's own

    def _ended(self):
        """At exit: say that this process ended normally (not killed while writing)."""
        if os.getpid() != self.pid:
            return  # a child forked from it
        try:
            self.held.write("ended\n")
            self.held.flush()
        except (OSError, ValueError):
            pass

    def names(self):
        """The pids of those that joined and have not been seen to end."""
        return {n for n in self._names() if n not in self.ended}

    def _names(self):
        try:
            names = os.listdir(self.folder)
        except OSError:
            return []
        return sorted(n for n in names if n.isdigit() and n != str(os.getpid()))

    def _end(self, name, block):
        """Whether the process `name` has ended (with `block`, wait until it has)."""
        if name in self.ended:
            return True
        try:
            with open(os.path.join(self.folder, name)) as lock:
                flags = fcntl.LOCK_SH | (0 if block else fcntl.LOCK_NB)
                fcntl.flock(lock.fileno(), flags)
                if lock.read() != "ended\n":
                    self.killed.add(name)
        except OSError:
            if not block and os.path.exists(os.path.join(self.folder, name)):
                return False
        self.ended.add(name)
        return True

    def _missing(self):
        """How many of the processes the launcher said have not joined yet, and may still."""
        names = self._names()
        missing = 0 if self.expected is None else self.expected - len(names)
        return min(missing, len(_siblings(names))) if missing > 0 else 0

    def running(self, block=False):
        """What is still running: 'pid N' each, and how many have not started yet."""
        names = [n for n in self._names() if not self._end(n, block)]
        missing = self._missing()
        running = [f"pid {n}" for n in names]
        return running + ([f"{missing} not started yet"] if missing else [])

    def wait(self, done):
        """In a thread: until every other process has ended; then a byte to `done`."""
        while True:
            names = self._names()
            for name in names:
                self._end(name, True)
            if len(self._names()) == len(names) and not self._missing():
                break
            time.sleep(0.05)  # a process that has not reached modelarts_setup() yet
        self.ended_all = True
        os.write(done, b"x")

    def forget(self):
        _remove(self.folder)


def _siblings(joined):
    """Other processes started by this one's launcher that run this interpreter, alive, not
    among `joined` (pids)."""
    found = []
    try:
        exe, pids = os.path.realpath("/proc/self/exe"), os.listdir("/proc")
    except OSError:
        return found
    parent, me = os.getppid(), str(os.getpid())
    for pid in pids:
        if not pid.isdigit() or pid == me or pid in joined:
            continue
        try:
            with open(f"/proc/{pid}/stat") as stat:
                ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
            if ppid == parent and os.path.realpath(f"/proc/{pid}/exe") == exe:
                with open(f"/proc/{pid}/environ", "rb") as environ:
                    if b"\0MS_ROLE=MS_SCHED\0" not in b"\0" + environ.read():
                        found.append(pid)  # (msrun's scheduler is never one of them)
        except (OSError, IndexError, ValueError):
            continue  # ended, another user's, or a zombie (no exe)
    return found


def _node_index():
    """This node's index in a job of several nodes (ModelArts' VC_TASK_INDEX, torchrun's
    GROUP_RANK, msrun's --node_rank); 0 for the first node, and when nothing says. A node of
    an msrun job started without --node_rank, other than the one running its scheduler, is
    named by its host instead (a str: which node it is, msrun does not say)."""
    for name in ("VC_TASK_INDEX", "GROUP_RANK"):
        value = os.environ.get(name, "").strip()
        if value.isdigit():
            return int(value)
    msrun = _msrun_options()
    workers = _number(msrun.get("worker_num"), 8)
    local = _number(msrun.get("local_worker_num"), 8)
    node = _number(msrun.get("node_rank"), -1)
    if not msrun or local <= 0 or local >= workers:
        return 0  # (msrun on one node ignores --node_rank)
    if node >= 0:
        return node
    if os.environ.get("RANK_ID", "").strip() == "0":
        return 0  # msrun's master node: its workers inherit the scheduler's RANK_ID=0
    return os.uname().nodename or "unnamed-host"


def _node_count():
    """How many nodes the job has (ModelArts' VC_WORKER_NUM or MA_NUM_HOSTS, torchrun's
    GROUP_WORLD_SIZE, msrun's --worker_num / --local_worker_num); 1 if nothing says."""
    for name in ("VC_WORKER_NUM", "MA_NUM_HOSTS", "GROUP_WORLD_SIZE"):
        value = os.environ.get(name, "").strip()
        if value.isdigit() and int(value) > 0:
            return int(value)
    msrun = _msrun_options()
    workers = _number(msrun.get("worker_num"), 8)
    local = _number(msrun.get("local_worker_num"), 8)
    if msrun and 0 < local < workers and workers % local == 0:
        return workers // local
    return 1


def _other_nodes():
    """On the first node, the names in train_url of the other nodes' folders (fnmatch
    patterns): node-1 .. node-N; with msrun's nodes named by their hosts, any node-*."""
    names = [f"node-{n}" for n in range(1, _node_count())]
    msrun = _msrun_options()
    if msrun and _number(msrun.get("node_rank"), -1) < 0 and _node_count() > 1:
        names.append("node-*")
    return names


def _number(text, default):
    text = str(text or "").strip()
    return int(text) if text.lstrip("-").isdigit() else default


# msrun's options (MindSpore's mindspore/parallel/cluster/run.py, get_args), each taking a value.
MSRUN_OPTIONS = (
    "worker_num",
    "local_worker_num",
    "master_addr",
    "master_port",
    "node_rank",
    "log_dir",
    "join",
    "cluster_time_out",
    "bind_core",
    "bind_numa",
    "sim_level",
    "sim_rank_id",
    "rank_table_file",
    "worker_log_name",
    "tail_worker_log",
)


def _msrun_options():
    """The options of the msrun that started this worker, read from its command line (msrun
    exports neither --node_rank nor --local_worker_num to its workers); {} for a process that
    msrun did not start as a worker."""
    if os.environ.get("MS_ROLE", "").strip() != "MS_WORKER":
        return {}
    try:
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as cmdline:
            words = cmdline.read().decode("utf-8", "replace").split("\0")
    except OSError:
        return {}
    programs = ("msrun", "mindspore.parallel.cluster.run")
    starts = [i for i, w in enumerate(words) if os.path.basename(w) in programs]
    if not starts:
        return {}
    options, words = {}, words[starts[0] + 1 :]
    while words and words[0].startswith("--"):  # up to the script: msrun's own options
        word = words.pop(0)[2:]
        if "=" in word:
            name, value = word.split("=", 1)
        else:
            name, value = word, words.pop(0) if words else ""
        # argparse takes a name's unique prefix too
        names = [o for o in MSRUN_OPTIONS if o == name] or [
            o for o in MSRUN_OPTIONS if name and o.startswith(name)
        ]
        if len(names) == 1:
            options[names[0]] = value
    options.setdefault("msrun", "")
    return options


def _node_url(train_url, node):
    """Where node `node` copies its outputs: train_url for the first node, its folder node-N
    for node N (a file several nodes write under one name is never overwritten)."""
    return train_url if not node else f"{train_url.rstrip('/')}/node-{node}"


def _local_rank():
    """This process's index on its node, when the launcher says (None when it does not)."""
    for name in ("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "DEVICE_ID"):
        value = os.environ.get(name, "").strip()
        if value.isdigit():
            return int(value)
    return None


def _is_msrun_scheduler():
    """MindSpore's msrun starts the script once more as its scheduler (MS_ROLE=MS_SCHED): it
    trains nothing, copies no output, and ends after the ranks."""
    return os.environ.get("MS_ROLE", "").strip() == "MS_SCHED"


def _is_uploader():
    """One process per node copies the outputs: global rank 0 on the first node, the first
    process of each other node when the job says which node this is (_node_index)."""
    if not _is_main_process() or _is_msrun_scheduler():
        return False  # a worker started by the script itself, or msrun's scheduler
    env = os.environ
    # torchrun; Ascend launchers (MindSpore, HCCL); mpirun (Horovod)
    names = ("RANK", "RANK_ID", "OMPI_COMM_WORLD_RANK")
    if env.get("MS_ROLE", "").strip() == "MS_WORKER" and "MS_NODE_ID" not in env:
        # msrun across nodes without --node_rank: the rank is known only after init(), and
        # RANK_ID is the scheduler's 0, left to every worker of the node that runs it.
        names = ("RANK", "OMPI_COMM_WORLD_RANK")
    for name in names:
        if env.get(name, "").strip().isdigit():
            if int(env[name]) == 0 or not _node_index():
                return int(env[name]) == 0
            local, size = _local_rank(), _node_size()
            if local is None:
                return size is not None and int(env[name]) % size == 0
            return local == 0
    size = env.get("WORLD_SIZE", env.get("RANK_SIZE", "1")).strip()
    if not size.isdigit() or int(size) <= 1:
        return True
    # Launchers that give only per-node ids: the first device of each node.
    return _local_rank() in (None, 0)
