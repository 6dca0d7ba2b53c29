#!/usr/bin/env python3
"""A/B of two checkouts on a shared machine: CPU seconds and peak memory, run interleaved.

    .venv/bin/python bench/ab.py 2 /tmp/npu-migrate-differential/src-336b8d3f1841 /work/main
    .venv/bin/python bench/ab.py 5 A B -- bench/train_500.py --check --no-cache
    .venv/bin/python bench/ab.py 2 A B --cold       # bench/run.py's cold row: --check -j 2, empty cache

Each round runs `python -m npu_migrate ARGS` once from each checkout (PYTHONPATH, cwd), A then B
in odd rounds and B then A in even ones (a load that drifts during a run then favours neither), and prints its wall time, CPU seconds of the whole process tree (user + sys, from the children's
rusage) and peak PSS / RSS sum (bench/run.py's sampler). Default ARGS: transformers 4.46.3
`src/` (bench/run.py's cached sdist), `--check -j 2 --no-cache`; with `--cold`, `--check -j 2` with the cache on, in an empty cache
folder for each run (NPU_MIGRATE_CACHE_DIR): what bench/run.py's cold row runs, the workers
storing their results too. On a loaded machine read the
CPU and memory columns: wall time follows the load. `bench/differential.py` installs a commit's
sources under $TMPDIR/npu-migrate-differential/src-<commit>, which serve as a checkout here.
"""

from __future__ import annotations

import os
import resource
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run as bench  # noqa: E402  (bench/run.py: the corpus and the memory sampler)


def main(argv) -> int:
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    rounds, checkouts, args = int(argv[0]), argv[1:3], argv[4:] if argv[3:4] == ["--"] else argv[3:]
    cold = args == ["--cold"]
    if not args or cold:
        src = bench.fetch(bench.DEFAULT_SDIST) / "src"
        args = [str(src), "--check", "-j", "2"] + ([] if cold else ["--no-cache"])
    for round_number in range(rounds):
        for checkout in checkouts if round_number % 2 == 0 else checkouts[::-1]:
            env = dict(os.environ, PYTHONPATH=checkout)
            # As bench/run.py: with PYTHONDONTWRITEBYTECODE (set on some machines) a checkout that
            # has no .pyc yet (differential.py's src-<commit>) compiled every module on every run.
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            if cold:
                env["NPU_MIGRATE_CACHE_DIR"] = tempfile.mkdtemp(prefix="npu-migrate-ab-cache-")
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            run = bench.run_process(checkout, [sys.executable, "-m", "npu_migrate", *args], env, cwd=Path(checkout))
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            pss = f"{run.peak_pss_mb:6.1f}" if run.peak_pss_mb is not None else "     -"
            print(f"{checkout}  wall {run.seconds:6.2f}  cpu {cpu:6.2f}  pss {pss}  rss {run.peak_mb:6.1f}"
                  f"  load {os.getloadavg()[0]:.1f}", flush=True)
            if cold:
                shutil.rmtree(env["NPU_MIGRATE_CACHE_DIR"], ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
