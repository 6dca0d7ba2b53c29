#!/usr/bin/env python3
"""Speed benchmark: npu-migrate on a real code base nobody here wrote, next to baselines.

    python bench/run.py                         # transformers 4.46.3, -j 2
    python bench/run.py --jobs 4 --verify-prefilter
    python bench/run.py --sdist timm==1.0.11 --subdir timm

The source distribution is downloaded once with `pip download --no-deps --no-binary :all:` into
~/.cache/npu-migrate-bench (or $NPU_MIGRATE_BENCH_CACHE) and extracted there. One run times,
on the same files:

* `npu-migrate --check -j N`, cold (an empty cache folder), then warm (the same folder again),
  each twice, the faster kept (the memory target is judged on every run);
* `npu-migrate --check -j 1 --no-cache` (the output must be identical to the cold and warm runs);
* `npu-migrate --write -j N`, cold, on a fresh copy of the tree;
* one 500-line training script (bench/train_500.py) end to end, the whole process as a user
  starts it (the `npu-migrate` console script), best of 5;
* baselines: libcst parse-only of the same `.py` files (in N processes, like the tool), `ast.parse`
  of them (one process), and a plain regex scan for `cuda|nccl|gpu` (one process);
* a peer: PyTorch's own CUDA-to-HIP translator (`torch.utils.hipify`, regexes over the text) on a
  copy of the files, with the interpreter of `--hipify-python` (default: the tests' cached torch
  venv when there is one; no hipify-perl/hipify-clang package installs here);
* the floor of issue 24: libcst parse-only of just the files that mention cuda/nccl (N processes),
  a whole process tree of its own measured as the tool's runs are, twice, interleaved with the
  cold runs and the release before (`--release`, default ef68b1d, installed from git archive by
  bench/differential.py: its cold and warm `--check -j N` are rows of the table): cold, floor,
  release cold, release warm, floor, cold. Floor and cold: best of 2 each, both after every file
  was read once (the page cache holds them for either);
* the framework floor, a second baseline for TF 1.x and MindSpore projects (whose migration is
  about sessions, estimators and device targets, not the word cuda, so the floor above counts
  few files or none): libcst parse-only of the files that import TensorFlow, Keras, Horovod's
  TensorFlow/Keras bindings or MindSpore (FRAMEWORK_IMPORT: a line of the text, whatever the
  tool's prefilter says), measured as the floor and interleaved with it, when such files
  outnumber the cuda/nccl ones (`--framework-floor` always, `--no-framework-floor` never).

Every npu-migrate run is a separate process tree; its peak memory is the largest PSS of the
process and all its children (each page counted once, shared pages split between the processes
that map them), sampled from /proc every 10 ms, next to the largest sum of their resident
memory (RSS), which counts what the forked workers share with the main process once per process
(on systems without /proc: the largest single process, from getrusage). The memory target is
judged on the PSS. Prints a Markdown table with the
machine it ran on and checks the targets of issue 24. `--verify-prefilter` also migrates every
file once more with the prefilter off and checks that the results are identical.

Not a test: it takes minutes. Exit status 1 when an output differs (a missed target is only
reported: it depends on the machine).
"""

from __future__ import annotations

import argparse
import ast
import multiprocessing
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))  # differential.base_python installs the release before
SCRIPT_500 = REPO / "bench" / "train_500.py"
DEFAULT_SDIST = "transformers==4.46.3"
TARGETS = {  # issue 24, on a 2-core machine
    "script": 0.3,  # s, one 500-line script, whole process
    "cold": 1.0,  # x libcst parse-only (-j N) of the files that mention cuda/nccl, same run
    "warm": 0.05,  # x the cold run
    "memory": 150.0,  # MB, peak of the whole run
}
RELEASE = "ef68b1d"  # the last round's release: its cold and warm runs are rows of the table


def cache_dir() -> Path:
    return Path(os.environ.get("NPU_MIGRATE_BENCH_CACHE") or Path.home() / ".cache" / "npu-migrate-bench")


# --------------------------------------------------------------------------- the corpus


def fetch(requirement: str) -> Path:
    """The extracted sdist of `requirement` (name==version), downloaded on first use."""
    name, _, version = requirement.partition("==")
    stem = f"{name}-{version}"
    tree = cache_dir() / "src" / stem
    if (tree / ".complete").exists():
        return tree
    sdists = cache_dir() / "sdists"
    sdists.mkdir(parents=True, exist_ok=True)
    archives = [p for p in sdists.glob(f"{stem}.tar.gz")] or [p for p in sdists.glob(f"{name.replace('-', '_')}-{version}.tar.gz")]
    if not archives:
        print(f"downloading {requirement} ...", file=sys.stderr)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "--quiet",
             "-d", str(sdists), requirement],
            check=True,
        )
        archives = sorted(sdists.glob(f"*{version}.tar.gz"))
    if tree.exists():
        shutil.rmtree(tree)
    tree.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archives[0]) as tar:
        top = tar.getnames()[0].split("/")[0]
        tar.extractall(tree.parent, filter="data") if hasattr(tarfile, "data_filter") else tar.extractall(tree.parent)
    if (tree.parent / top) != tree:
        (tree.parent / top).rename(tree)
    (tree / ".complete").write_text("", encoding="utf-8")
    return tree


def python_files(root: Path) -> List[Path]:
    skip = {".git", "__pycache__", "build", "dist", ".venv", "venv"}
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in skip)
        found += [Path(folder) / f for f in sorted(files) if f.endswith(".py")]
    return found


# --------------------------------------------------------------------------- measuring


PSS_KNOWN = Path("/proc/self/smaps_rollup").exists()  # Linux 4.14 and later


def _pss_kb(pid: int) -> int:
    """The proportional set size of a process (each page it shares counted as its share), from
    /proc/PID/smaps_rollup; 0 for a process that ended meanwhile."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1])
    except (OSError, IndexError, ValueError):
        pass
    return 0


def _tree_memory_kb(root_pid: int) -> Tuple[int, Optional[int]]:
    """(resident memory summed over `root_pid` and all its descendants, their PSS summed), from
    /proc. The RSS sum counts a page the forked workers share with the main process once per
    process that maps it (it overstates); the PSS sum counts it once in all: the memory the
    run takes from the machine. None for the PSS where /proc has no smaps_rollup."""
    children: Dict[int, List[int]] = {}
    rss: Dict[int, int] = {}
    page_kb = os.sysconf("SC_PAGE_SIZE") // 1024
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
            with open(f"/proc/{entry}/statm", "rb") as f:
                resident = int(f.read().split()[1])
        except (OSError, IndexError, ValueError):
            continue
        ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
        pid = int(entry)
        children.setdefault(ppid, []).append(pid)
        rss[pid] = resident * page_kb
    total, pss, stack = 0, 0, [root_pid]
    while stack:
        pid = stack.pop()
        if pid in rss:
            total += rss[pid]
            pss += _pss_kb(pid) if PSS_KNOWN else 0
        stack += children.get(pid, [])
    return total, (pss if PSS_KNOWN else None)


@dataclass
class Run:
    name: str
    seconds: float
    peak_mb: float  # the largest RSS summed over the process tree
    returncode: int
    stdout: bytes = b""
    files: int = 0
    lines: int = 0
    peak_pss_mb: Optional[float] = None  # the largest PSS of the tree (None: not known here)
    cpu: float = 0.0  # CPU seconds of the tree (user + sys of the children waited for)


def run_process(name: str, argv: Sequence[str], env: Dict[str, str], cwd: Optional[Path] = None) -> Run:
    """Run a whole process tree; wall time and peak memory of the tree."""
    proc_fs = Path("/proc/self/statm").exists()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd)
    peak = [0]
    peak_pss: List[Optional[int]] = [0]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            rss, pss = _tree_memory_kb(proc.pid)
            peak[0] = max(peak[0], rss)
            peak_pss[0] = None if pss is None or peak_pss[0] is None else max(peak_pss[0], pss)
            stop.wait(0.01)

    sampler = threading.Thread(target=sample, daemon=True)
    if proc_fs:
        sampler.start()
    stdout, stderr = proc.communicate()
    seconds = time.perf_counter() - start
    stop.set()
    if proc_fs:
        sampler.join()
    else:
        peak[0] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        peak_pss[0] = None
    if proc.returncode not in (0, 1):
        sys.stderr.write(stderr.decode("utf-8", "replace"))
        raise SystemExit(f"{name}: npu-migrate exited with {proc.returncode}")
    pss_mb = peak_pss[0] / 1024 if peak_pss[0] else None
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Run(name, seconds, peak[0] / 1024, proc.returncode, stdout, peak_pss_mb=pss_mb, cpu=cpu)


def _parse_libcst(path: str) -> int:
    import libcst

    # A file libcst cannot parse (broken in the sdist itself) still costs its attempt, as it
    # does the tool, which reports it and goes on: count the attempt, never stop the bench.
    try:
        libcst.parse_module(Path(path).read_text(encoding="utf-8"))
    except (libcst.ParserSyntaxError, UnicodeDecodeError):
        return 1
    return 0


CUDA_WORDS = re.compile(r"cuda|nccl", re.IGNORECASE)
# The files the framework floor parses: those with a line importing a non-PyTorch framework whose
# rules the tool applies (TensorFlow 1.x and its Keras/Horovod bindings, MindSpore). Defined on the
# project's text alone, not by the tool: a prefilter that let more files through, or fewer, would
# move the tool's time and never this floor (bench/README.md, "The framework floor").
FRAMEWORK_IMPORT = re.compile(
    r"^[ \t]*(?:import|from)[ \t]+(?:tensorflow|keras|horovod\.(?:tensorflow|keras)|mindspore)\b", re.MULTILINE)


def parse_only(files: List[Path], jobs: int) -> float:
    """libcst parse-only of `files` in `jobs` processes forked from this one: wall seconds
    (the all-files baseline; the floor is `floor_process`)."""
    context = multiprocessing.get_context("fork" if sys.platform.startswith("linux") else None)
    start = time.perf_counter()
    with context.Pool(jobs) as pool:
        pool.map(_parse_libcst, [str(f) for f in files], chunksize=8)
    return time.perf_counter() - start


# The floor as a process of its own, measured as the tool's runs are (run_process: the whole
# process tree, from its start to its end, interpreter start-up and the libcst import included):
# a fresh interpreter that reads the list of files and parses them with libcst in N forked
# workers.
FLOOR = r"""
import multiprocessing, sys
def parse(path):
    import libcst
    try:
        with open(path, encoding="utf-8") as f:
            libcst.parse_module(f.read())
    except (libcst.ParserSyntaxError, UnicodeDecodeError):
        return 1  # broken in the project itself: the attempt is counted, as the tool's is
    return 0
if __name__ == "__main__":
    jobs, listing = int(sys.argv[1]), sys.argv[2]
    with open(listing, encoding="utf-8") as f:
        paths = f.read().splitlines()
    with multiprocessing.get_context("fork" if sys.platform.startswith("linux") else None).Pool(jobs) as pool:
        pool.map(parse, paths, chunksize=8)
"""


def floor_process(files: List[Path], jobs: int, listing: Path, env: Dict[str, str]) -> Run:
    """The floor of issue 24, libcst parse-only of `files` in `jobs` processes, run and measured
    like the tool's cold run (a whole process tree: wall time, peak memory)."""
    listing.write_text("".join(f"{f}\n" for f in files), encoding="utf-8")
    return run_process("floor", [sys.executable, "-c", FLOOR, str(jobs), str(listing)], env)


def baselines(files: List[Path], texts: List[str], jobs: int) -> Dict[str, float]:
    out: Dict[str, float] = {}
    out["libcst"] = parse_only(files, jobs)
    start = time.perf_counter()
    for text in texts:
        try:
            ast.parse(text)
        except SyntaxError:
            pass
    out["ast"] = time.perf_counter() - start
    pattern = re.compile(r"cuda|nccl|gpu", re.IGNORECASE)
    start = time.perf_counter()
    hits = sum(len(pattern.findall(text)) for text in texts)
    out["regex"] = time.perf_counter() - start
    out["regex_hits"] = hits
    return out


def verify_prefilter(files: List[Path], jobs: int) -> Tuple[int, List[str]]:
    """Migrate every file with the prefilter on and off (in this process's workers)."""
    from npu_migrate.options import Options
    from npu_migrate import prefilter
    from npu_migrate.rules import default_rules
    from npu_migrate.runner import run

    rules = default_rules()
    paths = [str(f) for f in files]
    filtered = run(paths, Options(), rules, jobs=jobs, keep_text=False)
    real = prefilter.may_need_work
    prefilter.may_need_work = lambda rules, text, framework="auto", words=None, frameworks=None, imports=None, written=None: True
    try:
        unfiltered = run(paths, Options(), rules, jobs=jobs, keep_text=False)
    finally:
        prefilter.may_need_work = real
    differ = [a.result.path for a, b in zip(filtered, unfiltered) if a.result.to_dict() != b.result.to_dict()]
    return len(paths), differ


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    mem = ""
    try:
        kb = int(re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text()).group(1))
        mem = f", {kb / 2**20:.0f} GB RAM"
    except (OSError, AttributeError):
        pass
    from importlib.metadata import version

    import npu_migrate

    package = Path(npu_migrate.__file__).resolve().parent
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=package, capture_output=True,
                                text=True).stdout.strip() or "not a git checkout"
    except OSError:
        commit = "not a git checkout"
    return (f"{cpu}, {cores} cores available{mem}; {platform.system()} {platform.release()}; "
            f"Python {platform.python_version()}, libcst {version('libcst')}; "
            f"npu-migrate {npu_migrate.__version__} ({commit})")


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b > 0 else "– (no CPU time)"


def _memory(r: Run) -> str:
    if r.peak_pss_mb is None:
        return f"({r.peak_mb:.0f})"
    return f"{r.peak_pss_mb:.0f} ({r.peak_mb:.0f})"


def _judged_memory(r: Run) -> float:
    """The memory a run takes from the machine: its tree's PSS, else (no smaps_rollup) the
    RSS sum, which overstates it."""
    return r.peak_pss_mb if r.peak_pss_mb is not None else r.peak_mb


HIPIFY = r"""
import os, sys, time
from torch.utils.hipify import hipify_python
import torch
root = sys.argv[1]
before = {}
for folder, _dirs, names in os.walk(root):
    for n in names:
        if n.endswith(".py"):
            with open(os.path.join(folder, n), "rb") as f:
                before[os.path.join(folder, n)] = f.read()
start = time.perf_counter()
hipify_python.hipify(project_directory=root, output_directory=root, extensions=(".py",), includes=["*"],
                     show_progress=False, show_detailed=False, is_pytorch_extension=True)
seconds = time.perf_counter() - start
changed = 0
for path, old in before.items():
    try:
        with open(path, "rb") as f:
            changed += f.read() != old
    except OSError:
        changed += 1
print(seconds, len(before), changed, torch.__version__)
"""


def find_hipify_python() -> str:
    """The interpreter of the tests' cached torch venv (tests/torch_env.py), if there is one."""
    for python in sorted((Path.home() / ".cache" / "npu-migrate-torch").glob("*/bin/python")):
        if list(python.parent.parent.glob("lib/python*/site-packages/torch/utils/hipify/hipify_python.py")):
            return str(python)
    return ""


def hipify_baseline(python: str, target: Path, copy: Path) -> Tuple[Optional[Tuple[float, int, int, str]], str]:
    """PyTorch's own CUDA-to-HIP source translator (torch.utils.hipify, regular expressions
    over the text) run over a copy of the tree: (seconds of the hipify call alone, not the
    interpreter nor the torch import; files; files it changed; what ran), or None and why."""
    shutil.copytree(target, copy)
    done = subprocess.run([python, "-c", HIPIFY, str(copy)], capture_output=True, text=True)
    if done.returncode != 0 or not done.stdout.strip():
        return None, f"{python} failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}"
    seconds, count, changed, torch_version = done.stdout.split()[-4:]
    return (float(seconds), int(count), int(changed), f"torch.utils.hipify of torch {torch_version}"), ""


# --------------------------------------------------------------------------- main


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sdist", default=DEFAULT_SDIST, help=f"name==version from PyPI (default {DEFAULT_SDIST})")
    ap.add_argument("--subdir", default="src", help="folder of the sdist to migrate (default: src; '' for all)")
    ap.add_argument("--jobs", "-j", type=int, default=2, help="worker processes for the parallel runs (default 2)")
    ap.add_argument("--verify-prefilter", action="store_true",
                    help="also migrate every file with the prefilter off and compare (slow)")
    ap.add_argument("--quick", action="store_true",
                    help="leave out the `-j 1 --no-cache` and `--write` runs (a loaded machine)")
    ap.add_argument("--release", default=RELEASE,
                    help=f"commit whose cold and warm runs are rows too, installed from git archive (default {RELEASE}; '' for none)")
    ap.add_argument("--hipify-python", default=None, metavar="PYTHON",
                    help="an interpreter with torch, whose torch.utils.hipify is the peer row (default: the tests' "
                         "cached torch venv, ~/.cache/npu-migrate-torch/*/bin/python, when there is one; '' for none)")
    framework_floor = ap.add_mutually_exclusive_group()
    framework_floor.add_argument("--framework-floor", dest="framework_floor", action="store_const", const=True,
                                 help="also measure the framework floor (default: when the files that import "
                                      "TensorFlow/MindSpore outnumber those that mention cuda/nccl)")
    framework_floor.add_argument("--no-framework-floor", dest="framework_floor", action="store_const", const=False)
    args = ap.parse_args(argv)

    tree = fetch(args.sdist)
    target = tree / args.subdir if args.subdir else tree
    files = python_files(target)
    texts = [f.read_text(encoding="utf-8", errors="replace") for f in files]
    lines = sum(t.count("\n") for t in texts)
    mb = sum(len(t.encode("utf-8", "replace")) for t in texts) / 1e6
    load_before = os.getloadavg() if hasattr(os, "getloadavg") else None
    print(f"{args.sdist} {target.relative_to(tree.parent)}: {len(files)} .py files, {lines:,} lines, {mb:.1f} MB",
          file=sys.stderr)

    console = Path(sys.executable).with_name("npu-migrate")
    tool = [str(console)] if console.exists() else [sys.executable, "-m", "npu_migrate"]
    work = Path(tempfile.mkdtemp(prefix="npu-migrate-bench-"))
    env = dict(os.environ, NPU_MIGRATE_CACHE_DIR=str(work / "cache"), NO_COLOR="1")
    # As after `pip install`, which compiles the tool's modules: an environment that forbids
    # bytecode (PYTHONDONTWRITEBYTECODE, set on some CI images) would make every run compile
    # them again (~0.1 s). One run first writes it.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run([*tool, str(SCRIPT_500), "--check", "--no-cache"], env=env, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=False)
    runs: List[Run] = []
    failures: List[str] = []
    try:
        def measure(name: str, *extra: str, cwd: Optional[Path] = None, path: Optional[Path] = None) -> Run:
            print(f"  {name} ...", file=sys.stderr)
            r = run_process(name, [*tool, str(path or target), "--color", "never", *extra], env, cwd)
            r.files, r.lines = len(files), lines
            runs.append(r)
            return r

        cuda_files = [f for f, t in zip(files, texts) if CUDA_WORDS.search(t)]
        # Cold runs and the floor (issue 24) are measured the same way: each a whole process tree
        # (run_process), each twice and the better one kept, interleaved so that both see the
        # same load -- cold, floor, the release before (cold, warm), floor, cold -- and both
        # after every file was read once above (the page cache holds them for either). Each
        # cold run has an empty cache folder of its own; the warm runs reuse the second one's.
        colds: List[Run] = []
        floors: List[Run] = []

        def cold_run(n: int) -> Run:
            env["NPU_MIGRATE_CACHE_DIR"] = str(work / f"cache-{n}")
            r = measure(f"`--check -j {args.jobs}`, cold (empty cache, best of 2)", "--check", "-j", str(args.jobs))
            runs.remove(r)
            colds.append(r)
            return r

        framework_files = [f for f, t in zip(files, texts) if FRAMEWORK_IMPORT.search(t)]
        with_framework_floor = (len(framework_files) > len(cuda_files) if args.framework_floor is None
                                else args.framework_floor) and bool(framework_files)
        framework_floors: List[Run] = []

        def floor_run() -> None:
            print("  floor: libcst parse-only of the cuda/nccl files ...", file=sys.stderr)
            floors.append(floor_process(cuda_files, args.jobs, work / "floor-files.txt", env))
            if with_framework_floor:
                print("  framework floor: libcst parse-only of the TensorFlow/MindSpore files ...", file=sys.stderr)
                framework_floors.append(floor_process(framework_files, args.jobs, work / "framework-files.txt", env))

        cold_run(1)
        floor_run()
        released: List[Run] = []
        if args.release:
            from differential import base_python

            old_tool = [str(base_python(args.release).with_name("npu-migrate"))]
            env_old = dict(env, NPU_MIGRATE_CACHE_DIR=str(work / "cache-release"))
            for label in ("cold (empty cache)", "warm (cached)"):
                print(f"  release {args.release}: {label} ...", file=sys.stderr)
                r = run_process(f"release before ({args.release}): `--check -j {args.jobs}`, {label}",
                                [*old_tool, str(target), "--color", "never", "--check", "-j", str(args.jobs)], env_old)
                r.files, r.lines = len(files), lines
                released.append(r)
        floor_run()
        cold_run(2)
        cold = min(colds, key=lambda r: r.seconds)
        floor = min(floors, key=lambda r: r.seconds)
        runs.append(cold)
        warms = [measure(f"`--check -j {args.jobs}`, warm (cached, best of 2)", "--check", "-j", str(args.jobs))
                 for _ in range(2)]
        for r in warms:
            runs.remove(r)
        warm = min(warms, key=lambda r: r.seconds)
        runs.append(warm)
        compared = [*colds, *warms]
        if not args.quick:
            compared.append(measure("`--check -j 1 --no-cache`", "--check", "-j", "1", "--no-cache"))
        for other in compared:
            if (other.returncode, other.stdout) != (cold.returncode, cold.stdout):
                failures.append(f"output of {other.name} differs from the cold run")
        if not args.quick:
            copy = work / "copy"
            shutil.copytree(target, copy)
            env["NPU_MIGRATE_CACHE_DIR"] = str(work / "cache-write")
            measure(f"`--write -j {args.jobs}`, cold, fresh copy", "--write", "-j", str(args.jobs), path=copy)
            env["NPU_MIGRATE_CACHE_DIR"] = str(work / "cache-2")

        script_lines = SCRIPT_500.read_text(encoding="utf-8").count("\n")
        single = []
        for _ in range(5):
            r = run_process("script", [*tool, str(SCRIPT_500), "--check", "--no-cache"], env)
            single.append(r)
        best = min(single, key=lambda r: r.seconds)
        best.name = f"one {script_lines}-line script, whole process (best of 5)"
        best.files, best.lines = 1, script_lines
        runs.append(best)
        runs.extend(released)

        print("  baselines ...", file=sys.stderr)
        base = baselines(files, texts, args.jobs)
        hipified, hipify_why = None, "no --hipify-python given and no torch found"
        hipify_python = args.hipify_python if args.hipify_python is not None else find_hipify_python()
        if hipify_python:
            print("  hipify ...", file=sys.stderr)
            hipified, hipify_why = hipify_baseline(hipify_python, target, work / "hipify")
        elif args.hipify_python == "":
            hipify_why = "--hipify-python ''"

        verified = None
        if args.verify_prefilter:
            print("  verifying the prefilter ...", file=sys.stderr)
            verified = verify_prefilter(files, args.jobs)
            if verified[1]:
                failures.append(f"prefilter changed the results of {len(verified[1])} files: {verified[1][:5]}")
    finally:
        shutil.rmtree(work, ignore_errors=True)

    load_after = os.getloadavg() if hasattr(os, "getloadavg") else None
    summary = cold.stdout.decode("utf-8", "replace").strip().splitlines()
    scanned = next((line for line in summary if "files scanned" in line), "")

    out = [f"**{args.sdist}** `{target.relative_to(tree.parent)}`: {len(files):,} `.py` files, {lines:,} lines, "
           f"{mb:.1f} MB. Machine: {machine()}."
           + (f" Load average {load_before[0]:.2f} before, {load_after[0]:.2f} after." if load_before else ""),
           "",
           f"| run | wall s | files/s | lines/s | peak MB: PSS (RSS sum) | × libcst parse (-j {args.jobs}) | × ast.parse | "
           "× regex scan |",
           "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in runs:
        ratios = [f"{r.seconds / base[b]:.2f}" if r.files > 1 else "–" for b in ("libcst", "ast", "regex")]
        out.append(f"| {r.name} | {r.seconds:.2f} | {r.files / r.seconds:,.0f} | {r.lines / r.seconds:,.0f} | "
                   f"{_memory(r)} | {' | '.join(ratios)} |")
    cuda_lines = sum(t.count("\n") for f, t in zip(files, texts) if CUDA_WORDS.search(t))
    out.append(f"| baseline: libcst parse only of the {len(cuda_files):,} files that mention cuda/nccl, "
               f"-j {args.jobs}, whole process (best of 2, measured as the cold run) | {floor.seconds:.2f} | "
               f"{len(cuda_files) / floor.seconds:,.0f} | {cuda_lines / floor.seconds:,.0f} | {_memory(floor)} | | | |")
    framework_floor_run = min(framework_floors, key=lambda r: r.seconds) if framework_floors else None
    if framework_floor_run is not None:
        framework_lines = sum(t.count("\n") for t in texts if FRAMEWORK_IMPORT.search(t))
        out.append(f"| baseline for TF 1.x / MindSpore projects: libcst parse only of the {len(framework_files):,} files "
                   f"that import TensorFlow/Keras/Horovod's TF bindings/MindSpore, -j {args.jobs}, whole process (best of "
                   f"2, measured as the cold run) | {framework_floor_run.seconds:.2f} | "
                   f"{len(framework_files) / framework_floor_run.seconds:,.0f} | "
                   f"{framework_lines / framework_floor_run.seconds:,.0f} | {_memory(framework_floor_run)} | | | |")
    for key, label in (("libcst", f"baseline: libcst parse only, -j {args.jobs}"), ("ast", "baseline: ast.parse, 1 process"),
                       ("regex", f"baseline: regex scan `cuda|nccl|gpu`, 1 process ({base['regex_hits']:,} hits)")):
        out.append(f"| {label} | {base[key]:.2f} | {len(files) / base[key]:,.0f} | {lines / base[key]:,.0f} | | | | |")
    if hipified is not None:
        h_seconds, h_files, h_changed, h_what = hipified
        out.append(f"| peer: hipify ({h_what}) over every `.py` file, 1 process, in place of a copy | {h_seconds:.2f} | "
                   f"{h_files / h_seconds:,.0f} | {lines / h_seconds:,.0f} | | | | |")
    out.append("")
    out.append(f"npu-migrate's summary of the cold run: {scanned}")
    if hipified is not None:
        out.append(f"hipify changed {hipified[2]:,} of {hipified[1]:,} files (it rewrites CUDA C++ API names; "
                   "PyTorch code keeps `cuda` on ROCm)")
    else:
        out.append(f"hipify: not run ({hipify_why})")
    if verified is not None:
        out.append(f"Prefilter check: {verified[0]:,} files migrated with the prefilter on and off, "
                   f"{len(verified[1])} differ.")
    out.append("Each run: cold " + ", ".join(f"{r.seconds:.2f}" for r in colds) + " s; floor "
               + ", ".join(f"{r.seconds:.2f}" for r in floors) + " s; warm " + ", ".join(f"{r.seconds:.2f}" for r in warms)
               + " s (in the order run).")
    out.append(f"Cold run / parse-only of the cuda/nccl files: {cold.seconds / floor.seconds:.2f}x"
               + "".join(f"; release {args.release} {r.name.rsplit(', ', 1)[1]}: {r.seconds:.2f} s "
                         f"({r.seconds / floor.seconds:.2f}x the floor)" for r in released[:1]))
    cold_cpu = min(r.cpu for r in colds)
    ratios = [f"cold ÷ floor ({len(cuda_files):,} cuda/nccl files) {_ratio(cold_cpu, min(r.cpu for r in floors))}"]
    if framework_floor_run is not None:
        ratios.append(f"cold ÷ framework floor ({len(framework_files):,} TF/MindSpore files) "
                      f"{_ratio(cold_cpu, min(r.cpu for r in framework_floors))}")
        out.append("Each framework floor run: " + ", ".join(f"{r.seconds:.2f}" for r in framework_floors) + " s.")
        out.append(f"Cold run / parse-only of the TF/MindSpore files: "
                   f"{cold.seconds / framework_floor_run.seconds:.2f}x")
    elif framework_files:
        out.append(f"Framework floor not measured: {len(framework_files):,} files import TensorFlow/MindSpore, "
                   f"{len(cuda_files):,} mention cuda/nccl (--framework-floor measures it)")
    if released:
        old_cpu = released[0].cpu
        ratios.append(f"release {args.release} cold {old_cpu:.2f} ({_ratio(old_cpu, min(r.cpu for r in floors))} the floor"
                      + (f", {_ratio(old_cpu, min(r.cpu for r in framework_floors))} the framework floor"
                         if framework_floor_run is not None else "") + ")")
    out.append(f"In CPU seconds of each process tree (best of 2 each; what to read on a loaded machine): cold "
               f"{cold_cpu:.2f}, " + "; ".join(ratios))
    ours = [r for r in runs if r not in released]
    checks = [
        (f"one 500-line script ≤ {TARGETS['script']} s", best.seconds <= TARGETS["script"]),
        ("cold --check ≤ libcst parse-only of the cuda/nccl files", cold.seconds <= TARGETS["cold"] * floor.seconds),
        *([("cold --check ≤ libcst parse-only of the TF/MindSpore files (framework floor)",
            cold.seconds <= TARGETS["cold"] * framework_floor_run.seconds)] if framework_floor_run is not None else []),
        (f"warm ≤ {TARGETS['warm']}x cold", warm.seconds <= TARGETS["warm"] * cold.seconds),
        (f"peak memory ≤ {TARGETS['memory']:.0f} MB (PSS of the process tree)",
         max(_judged_memory(r) for r in [*ours, *colds, *warms]) <= TARGETS["memory"]),
        (f"same output with {'' if args.quick else '-j 1, '}-j N, cold and warm", not any("differs" in f for f in failures)),
    ]
    out.append("Targets (issue 24, 2 cores): " + "; ".join(f"{label}: {'met' if ok else 'MISSED'}" for label, ok in checks))
    print("\n".join(out))
    for f in failures:
        print(f"FAILED: {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
