"""Device values that cross the modules of a project, found once per run before its files are
migrated (pipeline.migrate_files) and handed to every file in Options: a value and the code that
reads it move together, across files too (the way Options.local_modules hands every file the
project's own modules).

* `device_config_keys`: the device settings a module that imports no torch sets to a CUDA
  device string, which the torch pass rewrites to "npu" (`_C.MODEL.DEVICE = "cuda"` in a yacs
  defaults module is key `MODEL.DEVICE`; `DEVICE = "cuda"` in `settings.py` is `settings.DEVICE`;
  `SUPPORTED_DEVICES = ["cpu", "cuda"]` is `settings.SUPPORTED_DEVICES`;
  `device = "cuda"` in `class Config:` of `config.py`, or `self.device = "cuda"` in its methods,
  is `config.Config`, and so is an argparse `--device` defaulting to "cuda" in its `def
  get_args():` `opts.get_args`: the class or function a reader imports).
  That module cannot load torch_npu (it imports no torch), so a module that imports torch and
  reads the setting (`torch.device(cfg.MODEL.DEVICE)`) gets `import torch_npu`: without it torch
  does not know the "npu" device the setting now names (`reads_device_key`).

A run given files rather than the project's folder (the pre-commit hook passes the staged
files only) may not hold every reader of a setting it would move: `readers_outside` finds
the torch modules of the project, outside the run, that read one without `import torch_npu`;
the run leaves the setting's module as it is and reports it (NPU324, pipeline.py), or that
reader would stay on a device torch does not know, and a later run of the whole project would
find no CUDA setting left to follow.

* `cuda_only_code` (`code=`): the top-level functions and classes of the project's modules
  that use a CUDA-only library (a module the guard rule's `gates` report: numba.cuda, Triton,
  CuPy...), and names bound to a cpp_extension.load build at module level, as "<the module's
  absolute path without .py>::<name>::<what makes it CUDA-only>". A device test in another
  module whose CUDA branch calls one (espnet's `rnnt.rnnt_loss_gpu if is_cuda else
  rnnt.rnnt_loss_cpu`, rnnt.py launching numba.cuda kernels) stays CUDA (codemods/guards.py):
  rewritten, the NPU would enter the CUDA-only function. Only files whose text imports such a
  library are parsed (Python's ast; a function that tests the device itself dispatches and
  is not one).

* `exported_names`: the names a module binds at module level to a module whose rewrites go
  whole or not at all (`hvd` of `import horovod.tensorflow as hvd` in deepxde's config.py) that
  another module reads (`from ...config import hvd`, `config.hvd.broadcast_global_variables(0)`):
  the calls there stay Horovod's, so the binding module's stay too (callrules/program.py, NPU357).

* `own_attributes`: the attributes the attribute rules rename on any receiver (`x.is_cuda`) that
  a class of the project defines as its own (`def is_cuda(self)`, torch_geometric's
  `Data.is_cuda` property): a module keeps its `.is_cuda` reads when it declares the attribute
  (codemods/torch/methods.declares_attribute), and so does every module of the run when one of
  them defines it (loader/utils.py's `data.is_cuda` of a Data object; renamed, it was an
  AttributeError there).

* `npu_families`: the families of per-device classes the project already has an NPU member of
  (`class NpuAccelerator`, `class NPU_Accelerator`: "Accelerator", "_Accelerator"): the CUDA
  member of such a family (colossalai's CudaAccelerator, deepspeed's CUDA_Accelerator), which
  the project picks on CUDA and its own NPU class on the NPU, keeps its CUDA code
  (guards.keep_cuda_twin_of_npu_class); migrated, it became a second NPU class that
  colossalai's registry (`OrderedDict(cuda=CudaAccelerator, npu=NpuAccelerator)`, the first
  available wins) chose on the NPU, named "cuda".

* `device_functions`: the top-level functions of the project's modules with a positional parameter
  named for a device (`def get_device(device: Optional[str] = None)` in torchtune's
  utils/_device.py, "<module path>::get_device::0::device"): a string literal another module
  gives that parameter (`tensor.to(get_device("cuda"))` in training/_distributed.py, through
  `from torchtune.utils import get_device`) moves as one given to the module's own function
  does (codemods/torch/literals.py): the function's readers of the parameter move by its name.
  Moved alone, the comparison beside it (`dist.get_backend() == "nccl"` -> "hccl") opened a
  branch that asked for CUDA on the NPU.

Read statically: bytes and regular expressions (Python's ast for the few files importing a
CUDA-only library), each file read once, nothing imported.
"""

from __future__ import annotations

import ast
import hashlib
import os
import re
import stat
import sys
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Set, Tuple, TypeVar

from . import work
from .codes import emits
from .model import Finding, Severity, Span
from .source import Source

_TORCH_IMPORT = re.compile(rb"^[ \t]*(?:import[ \t]+torch\b|from[ \t]+torch\b)", re.MULTILINE)
# `_C.MODEL.DEVICE = "cuda"`, `DEVICE = 'cuda:0'` (the device strings the torch pass rewrites
# when they are assigned to a name that says device).
# `SUPPORTED_DEVICES = ["cpu", "cuda"]` too: a list or tuple of them on one line; and a lookup
# with a CUDA default, `DEVICE = os.environ.get("DEVICE", "cuda")`, or an `or "cuda"` fallback
# (codemods/torch/literals.py moves those defaults as it moves the literal).
_DEVICE_ASSIGNMENT = re.compile(
    rb"^([ \t]*)([A-Za-z_]\w*(?:[ \t]*\.[ \t]*[A-Za-z_]\w*)*)(?:[ \t]*:[^=\n]*)?[ \t]*=[ \t]*"
    rb"(?:[rRuU]?(['\"])cuda(?::\d+)?\3|[\[(][^\n]*?(['\"])cuda(?::\d+)?\4[^\n]*?[\])]"
    rb"|[^\n=]*?\b(?:get|pop|setdefault|getenv|getattr)[ \t]*\([^\n]*?,[ \t]*(?:default[ \t]*=[ \t]*)?"
    rb"[rRuU]?(['\"])cuda(?::\d+)?\5[ \t]*\)[^\n#]*?"
    rb"|[^\n=#]*?\bor[ \t]+[rRuU]?(['\"])cuda(?::\d+)?\6)"
    rb"[ \t]*(?:#.*)?$",
    re.MULTILINE)
# `parser.add_argument("--device", default="cuda")` (open_clip's params.py imports no torch).
_DEVICE_OPTION = re.compile(
    rb"add_argument\(\s*[rRuU]?['\"]-[-\w]*device[-\w]*['\"][^()]*?\bdefault[ \t]*=[ \t]*[rRuU]?(['\"])cuda(?::\d+)?\1",
    re.IGNORECASE)
# A top-level class or function, and a line of top-level code (which ends the one before).
_TOP_DEFINITION = re.compile(rb"^(?:class|def|async[ \t]+def)[ \t]+([A-Za-z_]\w*)", re.MULTILINE)
_TOP_CODE = re.compile(rb"^[^ \t\r\n#@)\]}]", re.MULTILINE)
_DEVICE_WORD = re.compile(r"device", re.IGNORECASE)
_T = TypeVar("_T")
_LIMIT = 1 << 20  # a settings module is small; a larger file is read this far
_TORCH_NPU_IMPORT = re.compile(rb"^[ \t]*(?:import[ \t]+torch_npu\b|from[ \t]+torch_npu\b)", re.MULTILINE)


def device_config_keys(files: Sequence[str]) -> Tuple[str, ...]:
    """The device settings (see the module docstring) set by the .py files among `files` that
    import no torch, sorted."""
    return scan(files)[0]


@dataclass
class Workload:
    """What migrating the files of a run will cost, as `scan` estimates it from the bytes it
    reads anyway: `micros`, about the microseconds of CPU (weight() of each file), counted
    exactly up to `enough`. Past it a process stops weighing (the searches cost ~0.07 CPU-s on
    transformers' 44 MB), so `micros > enough` says only that the run has more work than
    `enough` (pipeline.workers_for: whether forked workers pay for themselves)."""

    enough: int
    micros: int = 0


# A file that mentions CUDA (cuda, cudnn), NCCL, TensorFlow or MindSpore may be parsed and
# rewritten by the passes: 0.4-2 us of CPU per byte (-j 1, seven projects from rl_games to
# diffusers; most of it libcst); any other file is read and prefiltered, 0.02-0.1 us per byte
# (a twentieth is counted). An estimate within about 2x on those projects, for a decision.
_BUSY = (b"cud", b"nccl", b"tensorflow", b"mindspore")
_IDLE_SHARE = 20


def weight(text: bytes) -> int:
    """The estimated microseconds of CPU migrating a file of these bytes takes (Workload)."""
    if any(word in text for word in _BUSY):
        return len(text)
    return len(text) // _IDLE_SHARE


def scan(files: Sequence[str], seen: Optional[Dict[str, Source]] = None, known: Optional[Dict[str, Any]] = None,
         found: Optional[Dict[str, Any]] = None, gates: Sequence[str] = (),
         code: Optional[List[str]] = None, jobs: int = 1, meanwhile: "Optional[Callable[[], object]]" = None,
         workload: Optional[Workload] = None, bound: Optional[Dict[str, Tuple[str, ...]]] = None,
         own: Optional[Set[str]] = None, families: Optional[Set[str]] = None,
         split_from: Optional[int] = None, device_functions: Optional[Set[str]] = None,
         device_tests: Optional[Set[str]] = None) -> Tuple[Tuple[str, ...], Tuple[str, ...]]:
    """(device_config_keys(files), the .py files among them that may pass a MindSpore device
    option to another module), reading each file once: the run looks for MindSpore's crossing
    values (device_dispatch.crossing_moves, which imports libcst and parses) only when one of
    these may (`_may_cross`, then `may_pass_on` with the rule's words). A file longer than what
    is read here may.

    `seen`: filled with path -> the Source of each file read whole, without its text (the
    sha256 of the bytes read, their size, the file's mtime and mode; not decoded): a warm run
    answers those files from the cache index by that digest and never reads them again
    (runner.run). The digest is of the very bytes this scan read, so a result found by it
    belongs to the same bytes as the device settings found here.

    `gates`: the CUDA-only libraries (the modules the guard rule's gate codes report); `code`,
    when given, gets the project's CUDA-only code that uses them (`cuda_only_code`, sorted).

    `known` / `found`: absolute path -> [sha256, may pass a MindSpore option on, its device keys,
    its CUDA-only code ([name, what] pairs)] of files read whole. What `known` holds for a file
    with exactly these bytes is taken instead of searching them again (`facts_key` names this
    code and `gates`: pipeline.py keeps the facts in the cache
    folder, for runs that write nothing); `found` gets every such file's facts.

    `jobs` (the run's -j): above 1, a forked process shares the files (_in_two: from SPLIT_FROM
    of them, or `split_from`). `meanwhile`: what this process does while the child starts on
    them (with jobs 1, first).

    `workload`: gets the files' estimated cost (Workload: each process weighs its files until
    its own total passes `workload.enough`).

    `bound`, when given, gets path -> the names each file binds at module level to a module
    whose rewrites go whole or not at all (WHOLE_MODULES: `hvd` of `import horovod.tensorflow
    as hvd`), for the files that bind one (exported_names then looks for their readers).

    `own`, when given, gets the attributes of OWN_ATTRIBUTES a class of the files defines;
    `families`, the families a class of the files is the NPU member of (npu_families);
    `device_functions`, "<module path>::<name>::<position>::<parameter>" of each top-level function
    of the files with a parameter named for a device (_device_functions); `device_tests`, the
    files' top-level functions named for a device (_device_tests: cuda_tests reads them)."""
    keys: Set[str] = set()
    crossing: List[str] = []
    gates_re = _gates_re(gates)
    cuda_code: Set[str] = set()
    want_digest = seen is not None or found is not None or bool(known)
    weighed = [0]  # by this process (a forked child has its own)

    def one(path: str) -> "Optional[Tuple[str, Optional[str], Optional[Source], _Facts, int]]":
        scanned = _scan_file(path, want_digest, seen is not None, known, gates, gates_re,
                             workload is not None and weighed[0] <= workload.enough)
        if scanned is not None:
            weighed[0] += scanned[4]
        return scanned

    if meanwhile is not None and jobs <= 1:
        meanwhile()
    # Only .py files are read (_read_with_stat): the others are not handed out, so that whether
    # a forked process shares the scan (_in_two, SPLIT_FROM) depends on the files it reads
    # (rl_games 1.6.5: 227 files given, 70 .py: the fork cost more than it shared).
    python_files = [path for path in files if path.endswith(".py")]
    for scanned in _in_two(python_files, one, meanwhile, split_from) if jobs > 1 else map(one, python_files):
        if scanned is None:
            continue
        path, digest, source, facts, cost = scanned
        if workload is not None:
            workload.micros += cost
        if source is not None and seen is not None:
            seen[path] = source
        if digest is not None and found is not None:
            found[os.path.abspath(path)] = [digest, facts[0], list(facts[1]), [list(c) for c in facts[2]],
                                            list(facts[3]), list(facts[4]), list(facts[5]), list(facts[6]),
                                            list(facts[7])]
        if facts[0]:
            crossing.append(path)
        if bound is not None and facts[3]:
            bound[path] = facts[3]
        if own is not None:
            own.update(facts[4])
        if families is not None:
            families.update(facts[5])
        if device_functions is not None and facts[6]:
            device_functions.update(f"{module_path(path)}::{entry}" for entry in facts[6])
        if device_tests is not None:
            device_tests.update(facts[7])
        keys.update(facts[1])
        if code is not None and facts[2]:
            module = module_path(path)
            cuda_code.update(f"{module}::{name}::{what}" for name, what in facts[2])
    if code is not None:
        code.extend(sorted(cuda_code))
    return tuple(sorted(keys)), tuple(crossing)


def module_path(path: str) -> str:
    """How the cross-module entries of Options name a file's module: its absolute path without
    `.py`, a package's folder for its `__init__.py` (cuda_only_code, exported_names)."""
    module = os.path.splitext(os.path.abspath(path))[0]
    return os.path.dirname(module) if os.path.basename(module) == "__init__" else module


_Facts = Tuple[bool, Tuple[str, ...], Tuple[Tuple[str, str], ...], Tuple[str, ...], Tuple[str, ...], Tuple[str, ...],
               Tuple[str, ...], Tuple[str, ...]]


def _scan_file(path: str, want_digest: bool, want_source: bool, known: Optional[Dict[str, Any]],
               gates: Sequence[str], gates_re: "Optional[re.Pattern[bytes]]", weigh: bool = False
               ) -> "Optional[Tuple[str, Optional[str], Optional[Source], _Facts, int]]":
    """(path, the sha256 of its bytes when read whole and wanted, its Source when wanted too,
    its facts, its weight() when `weigh`, else 0) of one file of `scan`, or None when it is not
    a .py file that can be read."""
    read = _read_with_stat(path)
    if read is None:
        return None
    text, st = read
    digest = source = None
    if len(text) < _LIMIT and want_digest:  # read whole: less than asked
        digest = hashlib.sha256(text).hexdigest()
        if want_source:
            source = Source(path, "", "", digest, len(text), st.st_mtime_ns, stat.S_IMODE(st.st_mode))
    facts = None
    if digest is not None and known:
        facts = _known_facts(known.get(os.path.abspath(path)), digest)
    if facts is None:
        facts = _facts(text, path) + (_cuda_only_code(text, gates, gates_re), _whole_bindings(text),
                                      _own_attributes(text), npu_families(text), _device_functions(text),
                                      _device_tests(text))
    return path, digest, source, facts, weight(text) if weigh else 0


# Files from which `scan` shares them with a forked process: it runs serially before any worker
# starts, so its wall time is the run's (transformers 4.46.3 src, 1,825 files: ~0.5 CPU-s of
# reading, hashing, import-line searches and 20 parses). Below, a fork costs more than it saves.
SPLIT_FROM = 200
# The items are handed out in at most this many runs of consecutive ones, each claimed by one
# 4-byte record read from a pipe: the records fit in the smallest pipe Linux makes (one page).
CLAIMS = 1024
_RECORD = 4


def _in_two(items: Sequence[str], one: "Callable[[str], _T]", meanwhile: "Optional[Callable[[], object]]" = None,
            split_from: Optional[int] = None, in_child: "Optional[Callable[[], object]]" = None) -> List[_T]:
    """[one(item) for item in items], shared with a forked process (Linux, SPLIT_FROM items or
    more, or `split_from` (runner.py); pipeline.py passes -j): the same list, in the same order, and the child's work counts
    (its parses) counted here. `meanwhile`: what this process does first, while the child
    starts on the items (runner.prepare: the workers' common start, pipeline.py).
    The items are claimed a run of consecutive ones at a time, by whichever process is free
    (each run's number is a record in a pipe both read: a read takes a whole record, and no
    other process gets it), so both finish together however long `meanwhile` and each item
    take (every other item to the child left the parent 0.30 CPU-s against its 0.19 on
    transformers, and the parent idle). Items a child that fails (killed, an error) claimed,
    or that nobody claimed, are done here. Ctrl-C is the parent's: the child ignores it and is
    killed. `in_child`: what the child does first (runner._shared: it dies with this process)."""
    if len(items) < max(2, SPLIT_FROM if split_from is None else split_from) or not sys.platform.startswith("linux"):
        if meanwhile is not None:
            meanwhile()
        return [one(item) for item in items]
    import pickle  # noqa: F401  # nosec B403 (imported before the fork: the child and _answer only look it up)
    import signal

    from .source import signals_deferred

    size = -(-len(items) // CLAIMS)  # items per run
    runs = -(-len(items) // size)
    claims, write_claims = os.pipe()
    try:
        os.write(write_claims, b"".join(n.to_bytes(_RECORD, "little") for n in range(runs)))  # (< one page: never blocks)
    finally:
        os.close(write_claims)  # (before the fork: a read finds the end once every run is claimed)
    read_end, write_end = os.pipe()
    pid = 0
    answer = None

    def claimed() -> Iterator[int]:
        while True:
            record = os.read(claims, _RECORD)
            if len(record) != _RECORD:  # the end (or a record cut short: nobody's, done below)
                return
            yield int.from_bytes(record, "little")

    def do(numbers: Iterable[int]) -> Dict[int, List[_T]]:
        return {n: [one(item) for item in items[n * size:(n + 1) * size]] for n in numbers}

    try:
        try:
            with signals_deferred():  # (no Ctrl-C between the fork and the child ignoring it)
                pid = os.fork()
                if pid == 0:
                    _child(lambda: do(claimed()), read_end, write_end, in_child)
        except OSError:  # no second process to be had (EAGAIN, ENOMEM): all of them here
            pid = 0
        os.close(write_end)
        write_end = -1
        if meanwhile is not None:
            meanwhile()
        done = do(claimed())
        if pid:
            with os.fdopen(read_end, "rb") as pipe:
                read_end = -1
                data = pipe.read()
            try:
                _, status = os.waitpid(pid, 0)
            except ChildProcessError:  # reaped already (SIGCHLD ignored): a whole answer says it finished
                status = 0
            pid = 0
            answer = _answer(data, [len(items[n * size:(n + 1) * size]) for n in range(runs)], set(done)) \
                if status == 0 else None
    finally:
        for fd in (read_end, write_end, claims):
            if fd >= 0:
                os.close(fd)
        if pid:
            os.kill(pid, signal.SIGKILL)
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
    theirs, counts = answer if answer is not None else ({}, {})
    for step, n in counts.items():
        work.count(step, n)
    done.update(theirs)
    done.update(do(n for n in range(runs) if n not in done))  # (the child's, when it failed)
    return [found for n in range(runs) for found in done[n]]


def _answer(data: bytes, sizes: List[int], mine: Set[int]) -> "Optional[Tuple[Dict[int, list], Dict[str, int]]]":
    """The child's (run number -> its results, work counts) from what it sent, or None when
    that is not whole: runs of `sizes` (each run's number of items), each with its number of
    results, none of them one this process did (`mine`)."""
    import pickle  # nosec B403 (bytes from this process's own forked child, over a pipe only they hold)

    try:
        answer = pickle.loads(data)  # nosec B301
    except Exception:  # noqa: BLE001 (cut short: the parent does the items itself)
        return None
    if not (isinstance(answer, tuple) and len(answer) == 2 and isinstance(answer[0], dict)
            and isinstance(answer[1], dict) and all(isinstance(n, int) and 0 <= n < len(sizes) and n not in mine
                                                    and isinstance(found, list) and len(found) == sizes[n]
                                                    for n, found in answer[0].items())):
        return None
    return answer


def _child(job: "Callable[[], object]", read_end: int, write_end: int,
           first: "Optional[Callable[[], object]]" = None) -> None:
    """The forked half of _in_two: do `first`, then `job`, send its result and work counts, exit;
    never return."""
    try:
        import pickle  # nosec B403 (it pickles its own results for the parent: _answer)
        import signal

        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if hasattr(signal, "pthread_sigmask"):
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
        os.close(read_end)
        if first is not None:
            first()
        from .startup import patterns_forked

        keep_patterns = patterns_forked()
        with work.counting() as counts:
            result = job()
        data = pickle.dumps((result, dict(counts)), pickle.HIGHEST_PROTOCOL)
        with os.fdopen(write_end, "wb") as pipe:
            pipe.write(data)
        keep_patterns()  # (after its answer: the parent reads it meanwhile)
    except BaseException:  # noqa: BLE001 (the parent does the items itself)
        os._exit(1)
    os._exit(0)


def _facts(text: bytes, path: str) -> Tuple[bool, Tuple[str, ...]]:
    """What the scan finds in one file: (whether it may pass a MindSpore device option on, its
    device keys)."""
    mindspore = len(text) == _LIMIT or _may_cross(text)
    if b"cuda" not in text or _TORCH_IMPORT.search(text):
        return mindspore, ()
    return mindspore, tuple(sorted({key for key, _at in _keys_in(text, _module_name(path))}))


def _may_cross(text: bytes) -> bool:
    """Whether the file may hold the side of a MindSpore value crossing modules that the other
    side needs (device_dispatch.crossing_moves): a value moves only from an argparse option
    (`add_argument(...)`, its _Analysis.visit_Call) of a file that mentions mindspore (its
    needles). A project whose MindSpore modules define no option (mindaudio 0.3.0, a library)
    has none, and a warm run of it needs neither libcst nor a parse (0.28 s, 41 MB)."""
    return b"mindspore" in text and b"add_argument" in text


def quoted(literal: str) -> "re.Pattern[bytes]":
    """The bytes of a string literal whose value is `literal` as codemods.strings.string_value
    reads one (no escapes): `literal` between quotes ('GPU', "GPU", r"GPU", '''GPU'''). Only
    such a literal can be an option's default or a comparison's side (device_dispatch); the
    word alone is in comments and docstrings: mindone 0.5.0 names "GPU" in 104 of its MindSpore
    files with a device word, quoted in 2."""
    return re.compile(rb"[\"']" + re.escape(literal.encode("utf-8")) + rb"[\"']")


def may_pass_on(paths: Sequence[str], literal: str, options: Sequence[str]) -> bool:
    """Whether one of `paths` (scan's) may pass a MindSpore device option whose default is
    `literal` to another module: its bytes hold `literal` quoted and an option's name too, as
    device_dispatch.crossing_moves' candidates do (a `[[device_dispatch]]` rule's `from` and
    `options`). mindaudio's one file with an option (utils/average_model.py) names no "GPU"."""
    value, words = quoted(literal), [o.encode("utf-8") for o in options]
    for path in paths:
        text = _read(path)
        if text is None:
            continue
        if len(text) == _LIMIT or (value.search(text) and any(o in text for o in words)):
            return True
    return False


def _known_facts(entry: Any, digest: str) -> Optional[_Facts]:
    """The facts of a `known` entry when it is one, for exactly these bytes; else None."""
    if not (isinstance(entry, list) and len(entry) == 9 and entry[0] == digest and isinstance(entry[1], bool)
            and isinstance(entry[2], list) and all(isinstance(k, str) for k in entry[2])
            and isinstance(entry[3], list) and all(isinstance(c, list) and len(c) == 2
                                                   and all(isinstance(p, str) for p in c) for c in entry[3])
            and isinstance(entry[4], list) and all(isinstance(n, str) for n in entry[4])
            and isinstance(entry[5], list) and all(isinstance(n, str) for n in entry[5])
            and isinstance(entry[6], list) and all(isinstance(n, str) for n in entry[6])
            and isinstance(entry[7], list) and all(isinstance(n, str) for n in entry[7])
            and isinstance(entry[8], list) and all(isinstance(n, str) for n in entry[8])):
        return None
    return (entry[1], tuple(entry[2]), tuple((c[0], c[1]) for c in entry[3]), tuple(entry[4]), tuple(entry[5]),
            tuple(entry[6]), tuple(entry[7]), tuple(entry[8]))


# -- attributes a class of the project defines --------------------------------------------------

# The attributes the attribute rules rename on any receiver (rules/torch.toml's [[attribute]]:
# `x.is_cuda`; tests/test_heldout.py holds them equal), and a method of a class that defines one
# (`def is_cuda(self)` under `@property`): torch_geometric's public `Data.is_cuda`.
OWN_ATTRIBUTES = ("is_cuda",)
_OWN_DEFINITION = re.compile(rb"^[ \t]+def[ \t]+(" + b"|".join(a.encode() for a in OWN_ATTRIBUTES) + rb")[ \t]*\(",
                             re.MULTILINE)


def _own_attributes(text: bytes) -> Tuple[str, ...]:
    """The attributes of OWN_ATTRIBUTES a class of the file defines (a method or property), sorted."""
    if not any(a.encode() in text for a in OWN_ATTRIBUTES):
        return ()
    return tuple(sorted({m.group(1).decode("ascii") for m in _OWN_DEFINITION.finditer(text)}))


# -- functions of the project that take a device --------------------------------------------------

# A top-level `def name(...)` and its parameters up to the first `)` (an annotation or default
# holding a call cuts the list short: its later parameters are not known, never wrongly placed).
_TOP_LEVEL_DEF = re.compile(rb"def[ \t]+(\w+)[ \t]*\(([^)]*)\)")  # matched where a line starts with `def`
# A parameter named for a device (frameworks.DEVICE_NAME_RE's names but `devices`, a list of them).
_DEVICE_PARAMETER = re.compile(r"(?i)(?:^|_)(?:device|device_type|dev_type)(?:$|_)|^dev$")


def _device_functions(text: bytes) -> Tuple[str, ...]:
    """The file's top-level functions with a positional parameter named for a device, as
    "<name>::<position>::<parameter>" (torchtune 0.6.1 utils/_device.py `def get_device(device:
    Optional[str] = None)`: "get_device::0::device"), sorted: a string another module gives that
    parameter (`get_device("cuda")`) is a device as it is in the function's own module
    (codemods/torch/literals.py LiteralRewrites._project_parameter_args)."""
    if b"dev" not in text:
        return ()
    found: Set[str] = set()
    starts = [0] if text.startswith(b"def") else []
    at = text.find(b"\ndef")
    while at >= 0:  # (found by bytes.find: a regex starting `^` tries every position, 0.3 ms a file)
        starts.append(at + 1)
        at = text.find(b"\ndef", at + 1)
    for start in starts:
        m = _TOP_LEVEL_DEF.match(text, start)
        if m is None or b"dev" not in m.group(2):
            continue
        depth = 0
        piece: List[str] = []
        pieces: List[str] = []
        for ch in m.group(2).decode("utf-8", "replace"):
            depth += ch in "[{(" and 1 or (-1 if ch in "]})" else 0)
            if ch == "," and depth == 0:
                pieces.append("".join(piece))
                piece = []
            else:
                piece.append(ch)
        pieces.append("".join(piece))
        position = 0
        for raw in pieces:
            text_ = raw.strip()
            if not text_ or text_.startswith("*") or text_ == "/":
                break  # keyword-only parameters (or none) from here
            name = re.match(r"\w+", text_)
            if name is None:
                break
            if name.group(0) not in ("self", "cls") and _DEVICE_PARAMETER.search(name.group(0)):
                found.add(f"{m.group(1).decode('ascii', 'replace')}::{position}::{name.group(0)}")
            position += 1
    return tuple(sorted(found))


# -- availability tests of the project: a CUDA one beside the project's NPU one ------------------

# A top-level `def` named for CUDA or for the NPU (`def is_cuda_available(`, `def is_torch_npu_available(`),
# matched at each line start bytes.find gives for "def" (_top_level_defs): a pattern led by
# `(?:\n|^)` has no literal prefix, so the regex engine tried every position (0.5 CPU-s on
# transformers' 44 MB, the scan's largest cost).
_DEVICE_TEST_DEF = re.compile(rb"def[ \t]+(\w*(?:[Cc][Uu][Dd][Aa]|[Nn][Pp][Uu])\w*)[ \t]*\(")
_CUDA_WORD = re.compile(r"(?i)cuda")
_TOP_LINE = re.compile(rb"^[^ \t\r\n#)\]}]", re.MULTILINE)  # what ends a function: top-level code, a decorator


def _device_tests(text: bytes) -> Tuple[str, ...]:
    """The file's top-level functions named for a device, sorted: "npu:<name>" for one named for
    the NPU (`is_npu_available`), "cuda:<name>" for one named for CUDA whose body is a CUDA
    availability test and nothing more (_is_cuda_test: accelerate 1.15.0 utils/imports.py
    `is_cuda_available()`, transformers' `is_torch_cuda_available()`), "other:<name>" for one named
    for CUDA that is something else. The project's CUDA test with an NPU twin (`is_npu_available`)
    keeps its body, and the branches it opens stay as they are (codemods/guards.py
    keep_behind_cuda_test): the project selects the NPU with its own test."""
    found: Set[str] = set()
    for m in _top_level_defs(text):
        start = m.start()
        name = m.group(1).decode("ascii", "replace")
        if not _CUDA_WORD.search(name):
            found.add(f"npu:{name}")
            continue
        end = _TOP_LINE.search(text, m.end())
        part = text[start:end.start() if end is not None else len(text)]
        found.add(f"{'cuda' if b'cuda.is_available()' in part and _is_cuda_test(part) else 'other'}:{name}")
    return tuple(sorted(found))


def _top_level_defs(text: bytes) -> Iterator["re.Match[bytes]"]:
    """_DEVICE_TEST_DEF's matches at the start of the text or of a line."""
    at = 0 if text.startswith(b"def") else text.find(b"\ndef") + 1 or -1  # (the "def"; -1: none)
    while at >= 0:
        m = _DEVICE_TEST_DEF.match(text, at)
        if m is not None:
            yield m
        after = text.find(b"\ndef", at + 3)
        at = after + 1 if after >= 0 else -1


def _is_cuda_test(part: bytes) -> bool:
    """Whether the function `part` holds (its text) only returns `torch.cuda.is_available()`
    (directly, or through a local variable assigned only that) or a bool constant, and calls no
    other torch.cuda function: `with patch_environment(...): available = torch.cuda.is_available()`
    then `return available`; `if is_torch_available(): import torch; return
    torch.cuda.is_available() else: return False`."""
    work.count("ast")  # (a function's lines only; the run's project scan)
    try:
        tree = ast.parse(part)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.FunctionDef):
        return False

    def is_test(node: Optional[ast.AST]) -> bool:
        return isinstance(node, ast.Call) and not node.args and not node.keywords \
            and _dotted(node.func) == "torch.cuda.is_available"

    nodes = list(ast.walk(tree.body[0]))[1:]
    assigned: Dict[str, List[ast.AST]] = {}
    for n in nodes:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.Yield, ast.YieldFrom,
                          ast.Global, ast.Nonlocal, ast.AugAssign, ast.AnnAssign, ast.NamedExpr)):
            return False
        if isinstance(n, ast.Call) and "cuda" in (_dotted(n.func) or "").split(".") and not is_test(n):
            return False  # torch.cuda.device_count(): more than a test
        if isinstance(n, ast.Assign):
            for target in n.targets:
                if not isinstance(target, ast.Name):
                    return False
                assigned.setdefault(target.id, []).append(n.value)

    def is_bool(node: Optional[ast.AST]) -> bool:
        return isinstance(node, ast.Constant) and isinstance(node.value, bool)

    returns = [n.value for n in nodes if isinstance(n, ast.Return)]
    tests = 0
    for value in returns:
        if isinstance(value, ast.Name) and value.id in assigned \
                and all(is_test(v) or is_bool(v) for v in assigned[value.id]):
            tests += any(is_test(v) for v in assigned[value.id])
        elif is_test(value):
            tests += 1
        elif not is_bool(value):
            return False
    return tests > 0


def _dotted(node: ast.AST) -> Optional[str]:
    parts: List[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return ".".join([node.id, *reversed(parts)]) if isinstance(node, ast.Name) else None


def cuda_tests(entries: Iterable[str]) -> Tuple[str, ...]:
    """The names of the project's CUDA tests (_device_tests' "cuda:<name>") that every module
    defining the name defines so, and whose NPU twin (the name with "npu" for "cuda") the project
    defines too: `is_cuda_available` beside `is_npu_available`. Sorted."""
    by_kind: Dict[str, Set[str]] = {"cuda": set(), "other": set(), "npu": set()}
    for entry in entries:
        kind, _, name = entry.partition(":")
        by_kind.setdefault(kind, set()).add(name)
    return tuple(sorted(name for name in by_kind["cuda"] - by_kind["other"]
                        if _CUDA_WORD.sub(lambda m: "NPU" if m.group(0).isupper() else "npu", name) in by_kind["npu"]))


# -- per-device class families the project has an NPU member of ----------------------------------

# `class NpuAccelerator(`, `class NPU_Accelerator:`: the family is what follows the device's name
# (a capital or `_` next: `class Npus` or `class NPUtils` names no device). CUDA_FAMILY_CLASS is
# its CUDA member (guards.keep_cuda_twin_of_npu_class).
_NPU_FAMILY_CLASS = re.compile(rb"^[ \t]*class[ \t]+(?:Npu|NPU)(_?[A-Z][A-Za-z0-9_]*)[ \t]*[(:]", re.MULTILINE)
CUDA_FAMILY_CLASS = r"^(?:Cuda|CUDA)(_?[A-Z][A-Za-z0-9_]*)$"


def npu_families(text: bytes) -> Tuple[str, ...]:
    """The families a class of the file is the NPU member of (NpuAccelerator: "Accelerator"), sorted."""
    if b"class Npu" not in text and b"class NPU" not in text:
        return ()
    return tuple(sorted({m.group(1).decode("ascii") for m in _NPU_FAMILY_CLASS.finditer(text)}))


# -- modules that move whole: their module-level names read by other modules ---------------------

# The modules whose rewrites go whole or not at all in a file (the `[[remove_import]]` rules'
# modules, rules/tensorflow.toml; a test of tests/test_tensorflow.py holds them equal), and a line that binds
# one to a name: `import horovod.tensorflow as hvd`, `import horovod.tensorflow.keras as hvd`.
WHOLE_MODULES = ("horovod.tensorflow",)
_WHOLE_WORDS = tuple(m.split(".", 1)[0].encode() for m in WHOLE_MODULES)
_WHOLE_BINDING = re.compile(
    rb"^[ \t]*import[ \t]+(?:" + b"|".join(re.escape(m.encode()) for m in WHOLE_MODULES)
    + rb")(?:\.[\w.]+)?[ \t]+as[ \t]+([A-Za-z_]\w*)[ \t]*(?:#.*)?$", re.MULTILINE)


def _whole_bindings(text: bytes) -> Tuple[str, ...]:
    """The names the module binds at module level (in its `if`/`try` blocks too, not in a
    function or class) to one of WHOLE_MODULES, sorted."""
    if not any(w in text for w in _WHOLE_WORDS):
        return ()
    return tuple(sorted({m.group(1).decode("ascii") for m in _WHOLE_BINDING.finditer(text)
                         if not any(True for _ in _enclosing(text, m.start(), ""))}))


def exported_names(bound: Dict[str, Tuple[str, ...]], files: Iterable[str],
                   readers: Optional[List[str]] = None) -> Tuple[str, ...]:
    """"<module path without .py>::<name>::<reader>" for each name of `bound` (scan's) that
    another of the .py `files` reads (`from ...config import hvd`, `config.hvd`), sorted: the
    calls made through it there are not rewritten, so the module's own must not be either
    (callrules/program.py). Reads the files again, only when some file binds such a name.

    `readers`, when given, gets "<reader's absolute path>::<local name>::<module>::<binding
    file's path>" for every reader and each name it reads the bound module through (`hvd` of
    `from ...config import hvd`, `config.hvd` of `from . import config`): the reader's uses are
    that module's and stay with the binding module (Options.whole_readers; every file is then read)."""
    if not bound:
        return ()
    keys = {f"{_module_name(path)}.{name}": (path, name) for path, names in bound.items() for name in names}
    found: Dict[Tuple[str, str], str] = {}
    for reader in files:
        if len(found) == len(keys) and readers is None:
            break
        text = _read(reader)
        if text is None:
            continue
        for key, (path, name) in keys.items():
            if ((path, name) in found and readers is None) or os.path.abspath(reader) == os.path.abspath(path) \
                    or name.encode() not in text:
                continue
            decoded = text.decode("utf-8", "replace")
            if reads_device_key(decoded, (key,)):
                found.setdefault((path, name), reader)
                if readers is not None:
                    readers.extend(f"{os.path.abspath(reader)}::{local}::{WHOLE_MODULES[0]}::{path}"
                                   for local in _local_names(decoded, key))
    out = []
    for (path, name), reader in found.items():
        out.append(f"{module_path(path)}::{name}::{reader}")
    if readers is not None:
        readers.sort()
    return tuple(sorted(out))


def _local_names(text: str, key: str) -> List[str]:
    """The names through which `text` reads the module-level name `key` ("config.hvd"): the
    name a `from ...config import hvd [as h]` binds, and `config.hvd` where the text writes it
    (`from . import config`), sorted. (WHOLE_MODULES has one module: what such a name binds.)"""
    module, name = key.rsplit(".", 1)
    found = set()
    for m in re.finditer(rf"^[ \t]*from[ \t]+[\w.]*\b{re.escape(module)}[ \t]+import[ \t]+(\([^)]*\)|[^\n#]*)",
                         text, re.MULTILINE):
        for part in m.group(1).strip("()").split(","):
            words = part.split()
            if words[:1] == [name]:
                found.add(words[2] if len(words) == 3 and words[1] == "as" else name)
    if re.search(rf"(?<![\w.]){re.escape(module)}\s*\.\s*{re.escape(name)}\b", text):
        found.add(key)
    return sorted(found)


def facts_key(gates: Sequence[str] = ()) -> str:
    """What the facts of a file depend on besides its bytes and path: this module's code (its
    patterns, _LIMIT), the CUDA-only libraries looked for (`gates`: the rules') and the Python
    that runs it."""
    with open(__file__, "rb") as f:
        code = f.read()
    return hashlib.sha256(code + repr((sys.version_info[:2], sorted(gates))).encode()).hexdigest()[:32]


# -- CUDA-only code ---------------------------------------------------------------------------

_BUILDERS = ("torch.utils.cpp_extension.load", "torch.utils.cpp_extension.load_inline")
# A CUDA source file named in a string (`'k_kernel.cu'`), or load_inline's CUDA sources.
_CUDA_SOURCE = re.compile(rb"\.cuh?['\"]|\bcuda_sources\b")


def _gates_re(gates: Sequence[str]) -> "Optional[re.Pattern[bytes]]":
    """An import line that may name one of `gates` (by its first part; _imports_gate then checks
    the modules it names), or a module-level `name = load(...)` (a cpp_extension build): the
    files worth parsing."""
    roots = sorted({g.split(".", 1)[0] for g in gates})
    if not roots:
        return None
    words = b"|".join(re.escape(r.encode()) for r in roots)
    return re.compile(rb"^[ \t]*(?:from[ \t]+((?:" + words + rb")\b[\w.]*)[ \t]+import[ \t]+([^\n#]*)"
                      rb"|import[ \t]+([^\n#]*\b(?:" + words + rb")\b[^\n#]*))"
                      rb"|^[A-Za-z_]\w*[ \t]*=[ \t]*[\w.]*\bload(?:_inline)?\(", re.MULTILINE)


# What every line `_gates_re` matches holds: an import's keyword, or the `load(` call.
_IMPORT_KEYWORD = re.compile(rb"import[ \t]")
_LOAD_CALL = re.compile(rb"load(?:_inline)?\(")


def _gate_lines(text: bytes, gates_re: "re.Pattern[bytes]") -> Iterable["re.Match[bytes]"]:
    """`gates_re.finditer(text)`, tried only at the start of the lines that hold `import ` or
    `load(`: anchored at a line's start (`^`, MULTILINE), it is otherwise tried at every byte
    of every file of the run (0.31 of transformers 4.46.3's ~0.85 CPU-s of project scan,
    serial before any worker starts; ~0.07 this way: a literal search, then one match per such
    line). Its matches never span a line, so one per line start, in order, as finditer's."""
    starts = {text.rfind(b"\n", 0, m.start()) + 1 for found in (_IMPORT_KEYWORD, _LOAD_CALL) for m in found.finditer(text)}
    for start in sorted(starts):
        m = gates_re.match(text, start)
        if m is not None:
            yield m


def _imports_gate(text: bytes, gates: Sequence[str], gates_re: "re.Pattern[bytes]") -> bool:
    """Whether an import line of `text` names one of `gates` (`from numba import cuda`: numba.cuda;
    `import triton.language as tl`), or a module-level line binds a `load(...)` result: not
    `from torch.cuda import amp` (torch's), nor `from mamba_ssm.ops.triton import ...`."""
    def gate(module: str) -> bool:
        return any(module == g or module.startswith(g + ".") for g in gates)

    for m in _gate_lines(text, gates_re):
        if m.group(1) is not None:
            module = m.group(1).decode("ascii", "replace")
            names = re.findall(r"[A-Za-z_]\w*", m.group(2).decode("utf-8", "replace").split(" as ")[0])
            if gate(module) or any(gate(f"{module}.{n}") for n in names):
                return True
        elif m.group(3) is not None:
            if any(gate(part.split()[0]) for part in m.group(3).decode("utf-8", "replace").split(",") if part.split()):
                return True
        else:
            return True  # `ext = load(...)` at module level
    return False


def _cuda_only_code(text: bytes, gates: Sequence[str], gates_re: "Optional[re.Pattern[bytes]]") -> Tuple[Tuple[str, str], ...]:
    """(name, what) of the module's top-level functions and classes that use one of `gates`
    (read through its imports: `from numba import cuda` ... `cuda.jit`), or that use such a
    function of the module (up to three rounds: wrappers of wrappers), and of its module-level
    names bound to `cpp_extension.load(...)`; not a function that tests the device itself (it
    dispatches: `if x.is_cuda: ... else: ...`)."""
    # (a definition that builds CUDA sources itself: parlai's NGramRepeatBlock loads its .cu in
    # __init__; a substring search first, at C speed)
    builds = b"cpp_extension" in text and _LOAD_CALL.search(text) is not None and _CUDA_SOURCE.search(text) is not None
    if gates_re is None or not (builds or _imports_gate(text, gates, gates_re)):
        return ()
    work.count("ast")  # (the run's project scan: pipeline.py prints it with --stats; test_work_budget holds it)
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ()
    imported: Dict[str, str] = {}
    _imports_of(tree.body, imported)

    def library(qual: Optional[str]) -> Optional[str]:
        if qual is None:
            return None
        return next((g for g in gates if qual == g or qual.startswith(g + ".")), None)

    found: Dict[str, str] = {}
    definitions: Dict[str, ast.stmt] = {}
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            definitions[stmt.name] = stmt
        elif isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call) and _qual(stmt.value.func, imported) in _BUILDERS:
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    found[target.id] = "torch.utils.cpp_extension"
    uses: Dict[str, List[str]] = {}

    def look(name: str, node: ast.AST) -> None:
        nodes = list(ast.walk(node))
        names = dict(imported)
        local: Dict[str, str] = {}
        _imports_of([n for n in nodes if isinstance(n, (ast.Import, ast.ImportFrom))], local)
        names.update(local)
        what = None
        reads: List[str] = []
        for n in nodes:
            if isinstance(n, (ast.Name, ast.Attribute)):
                if isinstance(n, ast.Attribute) and n.attr == "is_cuda":
                    return  # it tests the device itself: a dispatcher
                if what is None:
                    what = library(_qual(n, names))
                if isinstance(n, ast.Name):
                    reads.append(n.id)
            elif isinstance(n, ast.Compare) and any(
                    isinstance(c, ast.Constant) and isinstance(c.value, str) and c.value.split(":")[0] == "cuda"
                    for c in [n.left, *n.comparators]):
                return
            elif isinstance(n, ast.Call):
                called = _qual(n.func, names)
                if called == "torch.cuda.is_available":
                    return
                if called in _BUILDERS and what is None and _builds_cuda(n):
                    what = "torch.utils.cpp_extension"
        if what is not None:
            found[name] = what
        else:
            uses[name] = reads

    # A definition is walked only when its lines may name a gate (`what`: a name an import binds
    # to one's module, the library's own name for an import inside it; `import` too, for that
    # case) or, later, code found so far (a wrapper's `reads`); else it can be neither: on
    # transformers' modeling_utils.py, trainer.py... most classes and functions are not walked.
    # Lines not ASCII are walked: a name there may be written otherwise (NFKC).
    lines = text.splitlines()  # (as Python's tokenizer counts lines: \n, \r\n, \r)
    roots = {g.split(".", 1)[0].encode() for g in gates}
    bound = [n.encode() for n, qual in imported.items() if qual.split(".", 1)[0].encode() in roots
             or builds and (qual in _BUILDERS or qual == "torch.utils.cpp_extension")]
    later: Dict[str, bytes] = {}
    for name, node in definitions.items():
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])
        part = b"\n".join(lines[first - 1:node.end_lineno or len(lines)])
        if part.isascii() and not any(w in part for w in bound) and not (
                b"import" in part and any(r in part for r in roots)):
            later[name] = part
        else:
            look(name, node)
    for _ in range(3):  # the module's wrappers of those (a Function whose forward calls the launcher)
        named = [n.encode() for n in found]
        for name in [n for n, part in later.items() if any(w in part for w in named)]:
            look(name, definitions[name])
            del later[name]
        more = {name: next(found[r] for r in reads if r in found) for name, reads in uses.items()
                if name not in found and any(r in found for r in reads)}
        if not more:
            break
        found.update(more)
    return tuple(sorted(found.items()))


def _builds_cuda(call: ast.Call) -> bool:
    """Whether a cpp_extension load()/load_inline() call is given CUDA sources: a `.cu`/`.cuh`
    file named in it, or load_inline's `cuda_sources=` (a C++-only extension builds and runs
    on the NPU's host)."""
    if any(k.arg == "cuda_sources" for k in call.keywords):
        return True
    return any(isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.endswith((".cu", ".cuh"))
               for n in ast.walk(call))


def _imports_of(statements: Iterable[ast.AST], names: Dict[str, str]) -> None:
    """Local name -> the qualified name it is imported as, for the imports among `statements`
    and in the blocks of their module-level `if`/`try`/`with` (not in functions or classes);
    relative imports resolve nothing."""
    for stmt in statements:
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.asname:
                    names[alias.asname] = alias.name
                else:
                    top = alias.name.split(".", 1)[0]
                    names.setdefault(top, top)
        elif isinstance(stmt, ast.ImportFrom):
            if stmt.level or not stmt.module:
                continue
            for alias in stmt.names:
                if alias.name != "*":
                    names[alias.asname or alias.name] = f"{stmt.module}.{alias.name}"
        elif isinstance(stmt, (ast.If, ast.Try, ast.With)) or type(stmt).__name__ == "TryStar":
            for block in ("body", "orelse", "finalbody"):
                _imports_of(getattr(stmt, block, ()), names)
            for handler in getattr(stmt, "handlers", ()):
                _imports_of(handler.body, names)


def _qual(node: ast.AST, names: Dict[str, str]) -> Optional[str]:
    """The qualified name a Name or Attribute chain refers to through `names`, or None."""
    parts: List[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in names:
        return None
    return ".".join([names[node.id], *reversed(parts)])


def _read(path: str) -> Optional[bytes]:
    read = _read_with_stat(path)
    return read[0] if read is not None else None


def _read_with_stat(path: str) -> Optional[Tuple[bytes, os.stat_result]]:
    """(the first _LIMIT bytes of the .py file `path`, its stat), or None."""
    if not path.endswith(".py"):
        return None
    try:
        # Not blocking, and regular files only: a FIFO named on the command line would block
        # the run forever (as in source.read_regular). Plain os.read: no file object per file.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        chunks = []
        left = _LIMIT
        while left > 0:
            chunk = os.read(fd, left)
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return (chunks[0] if len(chunks) == 1 else b"".join(chunks)), st
    except OSError:
        return None
    finally:
        os.close(fd)


def readers_outside(keys: Sequence[str], others: Iterable[str]) -> Dict[str, str]:
    """key -> the first of the .py files `others` (the project's files not in the run) that
    imports torch, not torch_npu, and reads that device setting."""
    found: Dict[str, str] = {}
    for path in others:
        text = _read(path)
        if text is None or not _TORCH_IMPORT.search(text) or _TORCH_NPU_IMPORT.search(text):
            continue
        decoded = text.decode("utf-8", "replace")
        for key in keys:
            if key not in found and reads_device_key(decoded, (key,)):
                found[key] = path
    return found


@emits("NPU324")
def left_settings(files: Sequence[str], readers: Dict[str, str]) -> Dict[str, List[Finding]]:
    """path -> an NPU324 finding at each place a module among `files` sets a setting that
    `readers` (readers_outside) names a reader of outside the run: that module is left as it is."""
    left: Dict[str, List[Finding]] = {}
    for path in files:
        for key, line, col in settings_in(path, tuple(readers)):
            reader = os.path.relpath(readers[key])
            left.setdefault(path, []).append(Finding(
                "NPU324", Severity.WARNING, Span(line, col, line, col), key,
                f"the device setting `{key}` is read by {reader}, which is not in this run and would need "
                "`import torch_npu` once the setting names the NPU; this file was left as it is",
                f"Run npu-migrate on the project's folder, or give {reader} too (stage it, for the pre-commit hook)."))
    return left


def settings_in(path: str, keys: Sequence[str]) -> List[Tuple[str, int, int]]:
    """(key, line, column) of each place the torch-less module `path` sets one of `keys`,
    1-based, in order."""
    text = _read(path)
    if text is None or _TORCH_IMPORT.search(text):
        return []
    out = []
    for key, at in _keys_in(text, _module_name(path)):
        if key in keys:
            start = text.rfind(b"\n", 0, at) + 1
            out.append((key, text.count(b"\n", 0, at) + 1, len(text[start:at].decode("utf-8", "replace")) + 1))
    return sorted(set(out), key=lambda k: (k[1], k[2]))


def _module_name(path: str) -> str:
    stem = os.path.splitext(os.path.basename(path))[0]
    return os.path.basename(os.path.dirname(os.path.abspath(path))) if stem == "__init__" else stem


def _keys_in(text: bytes, module: str) -> Iterable[Tuple[str, int]]:
    """(key, offset of the code that sets it)."""
    for m in _DEVICE_ASSIGNMENT.finditer(text):
        at = m.start(2)
        parts = [p.strip() for p in m.group(2).decode("ascii", "replace").split(".")]
        if not _DEVICE_WORD.search(parts[-1]):
            continue
        if len(parts) >= 3:  # `_C.MODEL.DEVICE`: read as `cfg.MODEL.DEVICE` through any root
            yield ".".join(parts[1:]), at
        elif len(parts) == 1 and not m.group(1):  # `DEVICE = "cuda"` at module level
            yield f"{module}.{parts[0]}", at
        elif m.group(1) and (len(parts) == 1 or parts[0] == "self"):
            # `device = "cuda"` in `class Config:`, `self.device = "cuda"` in its methods: read
            # as `cfg.device` of an instance, too common a name to follow; the class is followed
            # instead (`from config import Config`, `config.Config`)
            yield from ((key, at) for key in _enclosing(text, m.start(), module))
        # `cfg.device = ...` (two parts) at module level: too common a name to follow
    for m in _DEVICE_OPTION.finditer(text):
        # `def get_args():` -> `from opts import get_args`
        yield from ((key, m.start()) for key in _enclosing(text, m.start(), module))


def _enclosing(text: bytes, at: int, module: str) -> Iterable[str]:
    """`module.Name` of the top-level class or function whose body holds offset `at`, if any."""
    definitions = list(_TOP_DEFINITION.finditer(text, 0, at))
    if not definitions:
        return
    definition = definitions[-1]
    body = text.find(b"\n", definition.start()) + 1
    if 0 < body < at and _TOP_CODE.search(text, body, at):
        return  # top-level code after the definition: `at` is outside it
    yield f"{module}.{definition.group(1).decode('ascii', 'replace')}"


def reads_device_key(text: str, keys: Sequence[str]) -> bool:
    """Whether `text` reads one of the device settings `keys` (`cfg.MODEL.DEVICE`,
    `settings.DEVICE`, `from settings import DEVICE`)."""
    for key in keys:
        last = key.rsplit(".", 1)[-1]
        if last not in text:
            continue
        if re.search(r"(?<![\w])" + r"\s*\.\s*".join(map(re.escape, key.split("."))) + r"\b", text):
            return True
        module = key.rsplit(".", 1)[0]
        if "." not in module and re.search(
                rf"^[ \t]*from[ \t]+[\w.]*\b{re.escape(module)}[ \t]+import\b(?:[^\n(]*|[ \t]*\([^)]*)\b{re.escape(last)}\b", text,
                re.MULTILINE):
            return True
    return False
