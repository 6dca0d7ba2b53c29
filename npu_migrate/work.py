"""Counts of the expensive steps a run takes: a work budget tests can hold, unlike a timer.

Wall time depends on the machine; how many times a file is parsed or walked does not. The
engine counts, per file, the steps that cost about as much as a parse:

    parse        libcst parses of a whole file
    partial      libcst parses of a partial text (partial.py: only the statements that can need work)
    ast          Python's own parse of the file (safe_parse; also what the prefilter's code words use)
    walk         walks of a whole tree (fast_visitor.walk of a Module)
    transform    rewrites of a whole tree (fast_visitor.transform of a Module)
    codegen      code generations of a whole tree (module.code, positions)
    verify       Python's parse of the migrated text

and, where they happen, Python's parses of a migrated partial text instead (engine._verified),
and how often a partial attempt was not enough (a pass needed statements left out, partial.py
NeedsWholeModule):

    verify_partial  parses of the migrated partial text (what is put back parsed in the input)

    retry        partial attempts a pass found not enough (then made again with more statements)
    fallback     partial attempts given up for a whole parse (after three, or when nothing is left out)

`FileResult.work` carries a file's counts (in the worker processes too); `--stats` prints the
run's sums and the files with the most work; tests/test_work_budget.py holds them to a budget.
The project scan before the files (project_values.scan: Python's parse of the modules that
import a CUDA-only library, for the CUDA-only code other modules call) is counted apart: its own
line of `--stats`, its own budget.
A step is counted where it is taken: `count("walk")`. Counting costs a dict update.
"""

from __future__ import annotations

from collections import Counter
from contextlib import contextmanager
from typing import Dict, Iterator, List, Optional

STEPS = ("ast", "parse", "partial", "walk", "transform", "codegen", "verify")

_current: Optional[Counter] = None


def count(step: str, n: int = 1) -> None:
    """Note `n` steps of kind `step` for the file being migrated (nothing outside one)."""
    if _current is not None:
        _current[step] += n


@contextmanager
def counting() -> Iterator[Counter]:
    """Count the steps taken inside the block (the counts of a file being migrated). Nested
    blocks (a notebook's cells) add to the outer one as well."""
    global _current
    outer, _current = _current, Counter()
    try:
        yield _current
    finally:
        inner, _current = _current, outer
        if outer is not None:
            outer.update(inner)


@contextmanager
def apart() -> Iterator[None]:
    """Count nothing of the steps taken inside the block, whatever block it is in (work done
    for no file: runner.prepare, which may run during the project scan)."""
    global _current
    outer, _current = _current, None
    try:
        yield
    finally:
        _current = outer


def total(counts) -> Dict[str, int]:
    """The sums of many files' counts, every step named (0 when none)."""
    out: "Counter[str]" = Counter()
    for c in counts:
        out.update(c)
    return {step: out.get(step, 0) for step in STEPS} | {k: v for k, v in out.items() if k not in STEPS}


# What each step counts, in the singular and the plural ("1 tree walk", "2 tree walks").
_WORDS = {
    "ast": ("Python parse", "Python parses"),
    "parse": ("whole libcst parse", "whole libcst parses"),
    "partial": ("partial libcst parse", "partial libcst parses"),
    "walk": ("tree walk", "tree walks"),
    "transform": ("tree transform", "tree transforms"),
    "codegen": ("code generation", "code generations"),
    "verify": ("parse of migrated text", "parses of migrated text"),
    "verify_partial": ("parse of migrated partial text", "parses of migrated partial text"),
    "retry": ("partial attempt not enough", "partial attempts not enough"),
    "fallback": ("partial attempt given up for a whole parse", "partial attempts given up for a whole parse"),
}


def _counted(n: int, step: str) -> str:
    one, many = _WORDS.get(step, (step, step))
    return f"{n:,} {one if n == 1 else many}"


def summary(counts) -> str:
    """One line for --verbose: the run's work (files answered from the cache took none)."""
    counts = list(counts)
    sums = total(counts)
    busy = sum(1 for c in counts if c)
    parts = ", ".join(_counted(sums[step], step) for step in sums)
    return f"npu-migrate: work: {busy:,} of {len(counts):,} {'file' if len(counts) == 1 else 'files'} parsed; {parts}"


def scan_summary(counts) -> str:
    """One line for --verbose: the work of the project scan before the files are migrated
    (project_values.scan: Python's parse of the modules that import a CUDA-only library)."""
    parts = ", ".join(_counted(n, step) for step, n in total([counts]).items() if n)
    return f"npu-migrate: work: the project scan: {parts}"


MOST_WORK_SHOWN = 10


def most_work(files) -> List[str]:
    """Lines for --stats: the files that took the most steps (at most MOST_WORK_SHOWN), from
    (path as shown, counts) pairs; most first, then by path."""
    busy = sorted(((sum(c.values()), path, c) for path, c in files if c), key=lambda t: (-t[0], t[1]))
    lines = [f"npu-migrate: work: {path}: " + ", ".join(_counted(c[step], step) for step in total([c]) if c.get(step))
             for _, path, c in busy[:MOST_WORK_SHOWN]]
    if len(busy) > MOST_WORK_SHOWN:
        more = len(busy) - MOST_WORK_SHOWN
        lines.append(f"npu-migrate: work: ... and {more:,} more {'file' if more == 1 else 'files'} parsed")
    return lines
