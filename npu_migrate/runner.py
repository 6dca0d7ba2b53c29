"""Migrating many files: read, migrate (in a process pool when asked), and hand back results
in the order the files were given. One file's failure never stops the others."""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from typing import Callable, Iterable, List, Optional, Sequence, Tuple

from .engine import migrate_source
from .model import FileResult, Options
from .rules import RuleSet, load_rules
from .source import Source, SourceError, decode_python, is_generated, read_source


@dataclass
class Outcome:
    """A migrated file plus what is needed to write it back (its Source without the text)."""

    result: FileResult
    source: Optional[Source] = None
    original_text: Optional[str] = None  # kept only when a diff or report needs it


def decoder_for(path: str):
    from .frontends import decoder_for as frontend_decoder

    return frontend_decoder(path) or decode_python


def migrate_file(path: str, options: Options, rules: RuleSet, keep_text: bool = True) -> Outcome:
    try:
        source = read_source(path, decoder_for(path))
    except SourceError as exc:
        return Outcome(FileResult(path=path, error=str(exc)))
    if is_generated(source.text):
        return Outcome(FileResult(path=path, skipped="generated"), replace(source, text=""))
    try:
        result = migrate_source(source.text, path, options, rules)
    except Exception as exc:  # a bug in a codemod must not stop the run
        result = FileResult(path=path, error=f"internal error: {type(exc).__name__}: {exc}")
    original = source.text if (keep_text and result.changed) else None
    return Outcome(result, replace(source, text=""), original)


# -- process pool -----------------------------------------------------------------------------

_WORKER: Optional[Tuple[Options, RuleSet]] = None


def _init_worker(options: Options, rule_files: Tuple[str, ...]) -> None:
    global _WORKER
    _WORKER = (options, load_rules([*rule_files]))


def _work(path: str) -> Outcome:
    assert _WORKER is not None
    options, rules = _WORKER
    return migrate_file(path, options, rules)


def run(
    paths: Sequence[str],
    options: Options,
    rules: RuleSet,
    rule_files: Sequence[str] = (),
    jobs: int = 1,
    on_done: Optional[Callable[[Outcome], None]] = None,
) -> List[Outcome]:
    """Migrate `paths`; results come back in the same order whatever `jobs` is."""
    if jobs <= 1 or len(paths) < 2:
        outcomes = []
        for p in paths:
            o = migrate_file(p, options, rules)
            outcomes.append(o)
            if on_done:
                on_done(o)
        return outcomes
    jobs = min(jobs, len(paths))
    chunk = max(1, min(32, len(paths) // (jobs * 8) or 1))
    with ProcessPoolExecutor(
        max_workers=jobs, initializer=_init_worker, initargs=(options, tuple(str(f) for f in rule_files))
    ) as pool:
        outcomes = []
        for o in pool.map(_work, paths, chunksize=chunk):
            outcomes.append(o)
            if on_done:
                on_done(o)
        return outcomes


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)
