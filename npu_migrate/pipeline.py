"""One run over files: migrate them (runner.py), write back what the mode says, and hand back
the RunReport the renderers and the exit code read. The way black separates its WriteBack from
its Report: this module decides nothing about printing; cli.py renders the report and exits
with `report.return_code(...)`.

The files come from paths, or from stdin (`npu-migrate -`: a StdinSource, one text already
read and decoded, whose migrated text stdin.py prints): the same run, without what only a
folder of files has (the cache, the project's modules, the files generated beside them).

Every write of a run goes through here, and each through `source.atomic_write`: the migrated
files in place (`--write`, source.write_source), the migrated copy (`--output-dir`,
output_dir.write_tree) and the files generated next to migrated ones (extra_files.apply; the
ModelArts boot file). Report files (console.emit_report) and cache entries (cache.Cache.put)
use the same function.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Set, Tuple, Union

from .diffs import patch_path, unified_diff
from .model import ONCE_PER_RUN_CODES, FileResult, WriteBack
from .options import Options
from .project_files import Project
from .report import RunReport
from .rules import RuleSet
from .runner import Outcome
from .settings import Settings
from .source import Source
from .startup import long_lived

if TYPE_CHECKING:
    from .project_values import Workload


@dataclass(frozen=True)
class StdinSource:
    """The file `npu-migrate -` read from stdin, decoded (its path: --stdin-filename, or
    stdin.py). Its diff is headed by that name as given."""

    source: Source


def run(settings: Settings, rules: RuleSet, files: Union[Sequence[str], StdinSource], project: Project, *,
        color: bool = False, jobs: int = 1, on_done: Optional[Callable[[Outcome], None]] = None,
        warn: Callable[[str], None] = lambda line: None) -> RunReport:
    """Migrate `files` as `settings` say and write back what the mode says. `warn` gets the
    warnings of the output-dir copy as they happen; the lines about generated files are in
    `report.notes`. `project`: the run's (discovery.project_of), whose walks exclude what the
    run excludes."""
    from .targets.rule_view import rules_for_targets

    # What the run does to each file (options.Options: the resolved targets included), built
    # once here and handed down; a folder of files adds the project's values (migrate_files).
    options = settings.options()
    # The rules as the run's targets see them, derived once here and handed down: the engine
    # applies the rules it is given. (The report describes codes from the rules as loaded.)
    with long_lived():
        view = rules_for_targets(rules, options.targets)
    if isinstance(files, StdinSource):
        from .runner import migrate_text

        outcomes = [migrate_text(files.source, options, view, keep_text=True)]
    else:
        outcomes = migrate_files(settings, options, view, files, project, jobs, on_done, warn)
    report = RunReport(results=[o.result for o in outcomes], rules=rules, mode=settings.mode,
                       color=color, verbose=settings.verbose, quiet=settings.quiet, targets=settings.targets)
    once_per_run(report)
    if settings.report_unused_ignores:
        report_unused_ignores(report)
    if settings.mode is WriteBack.WRITE:  # never the stdin text (`npu-migrate - --write` prints it)
        write_in_place(outcomes)
    if settings.mode is WriteBack.OUTPUT_DIR:
        # Files copied as they are (data, configuration) that could not be: failures of the run too.
        report.results.extend(write_output_dir(settings, project.file_filter, outcomes, warn))
    if isinstance(files, StdinSource):
        from .extra_files import not_written_from_stdin

        add_diffs(report, outcomes, shown=lambda path: path)
        report.notes = not_written_from_stdin(report.results)
        return report
    if settings.keeps_original_text:
        add_diffs(report, outcomes, shown=report.display_path)
    report.notes, report.files_waiting = write_generated_files(settings, report)
    if settings.distributed:
        report.notes += distributed_silence(report)
    return report


def migrate_files(settings: Settings, options: Options, rules: RuleSet, files: Sequence[str], project: Project,
                  jobs: int, on_done: Optional[Callable[[Outcome], None]], warn: Callable[[str], None]) -> List[Outcome]:
    """The files' outcomes, in their order: in worker processes, through the cache, with the
    options a folder of files adds (the project's own modules, its modules importing moxing)."""
    import functools

    from .runner import prepare as runner_prepare, run as run_files, warm_up as runner_warm_up

    given = list(files)
    # The project scan reads every .py file: with a cache that has an index, it keeps what it
    # read (the digest) so that a file the index answers is not read a second time (runner.run).
    seen: Optional[dict] = None
    facts = None
    fingerprint: Optional[Callable[[], str]] = None
    if not settings.no_cache:
        from .cache import ScanFacts, code_fingerprint, index_somewhere

        # (computed once a run, when first asked: the crossing facts' key and the cache's settings
        # both name it; ~4 ms of stat calls and hashing each time)
        fingerprint = functools.lru_cache(maxsize=None)(code_fingerprint)
        seen = {} if index_somewhere() else None
        if not settings.mode.writes:  # (the facts decide options: never what a run writes)
            from .project_files import common_folder
            from .kinds.finding import cuda_only_libraries
            from .project_values import facts_key

            # (the folder the paths given share: one stat each, not one per file found in them)
            facts_folder = common_folder(project.paths or given)
            facts = ScanFacts(facts_key(cuda_only_libraries(rules.findings)), facts_folder)
    found: Optional[dict] = {} if facts is not None else None
    from . import work

    with long_lived():
        options = with_local_modules(options, files, rules)
    if options.framework in ("auto", "tensorflow"):
        from .targets.pins import tensorflow2_required

        tensorflow2 = tensorflow2_required(project.paths or given)  # (the dependency files: a few reads)
        if tensorflow2:
            from dataclasses import replace

            options = replace(options, tensorflow2_project=tensorflow2)
    # A cold run of enough files for forked workers prepares their common start (runner.prepare)
    # while the scan's forked child reads files, not after the scan with one core idle.
    cold = settings.no_cache or seen is None
    prepared = prepares_early(jobs, len(given), cold)
    # A smaller cold one imports libcst and the PyTorch pass (runner.warm_up) while the scan's
    # forked child reads the files: the first file a pass parses would do it, after the scan.
    warmed = not prepared and warms_early(jobs, len(given), cold)
    meanwhile = (functools.partial(runner_prepare, options, rules) if prepared
                 else functools.partial(runner_warm_up, options, rules) if warmed else None)
    from .project_values import Workload

    workload = Workload(in_process_up_to(jobs)) if jobs > 1 else None
    with long_lived(), work.counting() as scan_work:  # (the project's values and the digests it read: the run's, startup.py)
        options = with_project_values(options, files, rules, seen,
                                      facts.load() if facts is not None else None, found,
                                      crossing_facts=(lambda key: ScanFacts(key, facts_folder))
                                      if facts is not None else None, jobs=jobs, fingerprint=fingerprint,
                                      meanwhile=meanwhile, workload=workload, split_from=WARM_FROM if warmed else None,
                                      outside=None if all(os.path.isdir(p) for p in project.paths)
                                      else lambda: other_files(files, project))
    requested, jobs = jobs, workers_for(jobs, workload)
    if (settings.verbose or settings.stats) and +scan_work:
        warn(work.scan_summary(scan_work))  # (the files' own work: cli.py, after the run)
    if facts is not None and found:
        facts.save(found)
    kept: dict = {}
    if options.device_config_keys and not all(os.path.isdir(p) for p in project.paths):
        kept, options = settings_read_outside(files, project, options)
        files = [f for f in files if f not in kept]
    if options.modelarts:
        from dataclasses import replace

        from .modelarts.project import scan_project

        moxing_files, utility_files = scan_project(files, project)
        options = replace(options, modelarts_moxing_files=moxing_files, modelarts_utility_files=utility_files)
        entries = {os.path.abspath(p) for p in options.modelarts_entry_files}
        for path in utility_files if not settings.quiet else ():
            if path not in entries:  # a script --entry names is adapted whatever it looks like
                warn(f"npu-migrate: note: {os.path.relpath(path)} is not adapted for ModelArts: its main block "
                     "trains nothing and a script beside it trains (a utility run by hand; --entry adapts it)")
    cache = None
    if not settings.no_cache:
        from .cache import Cache

        # Runs that write take no changed result from the cache: what they write is always fresh.
        cache = Cache(rules.fingerprint, options, reuse_changed=not settings.mode.writes,
                      code=fingerprint() if fingerprint is not None else None)
        if cache.problem and not settings.quiet:
            warn(f"npu-migrate: warning: {cache.problem}; running without the cache")
    outcomes = run_files(files, options, rules, jobs=jobs, on_done=on_done,
                         keep_text=settings.keeps_original_text, cache=cache, seen=seen, prepared=prepared,
                         in_process_up_to=IN_PROCESS_UP_TO, in_two=shares(requested, jobs, workload))
    if not kept:
        return outcomes
    for result in kept.values():
        if on_done is not None:
            on_done(Outcome(result))
    by_path = {o.result.path: o for o in outcomes}
    return [Outcome(kept[f]) if f in kept else by_path[f] for f in given]


# The estimated work (project_values.Workload: about microseconds of CPU at -j 1) up to which a
# run migrates its files in this process whatever -j says: there the workers' start (runner.
# prepare's eager build for them, the forks, the pipes, each worker's start) costs about what
# the second core saves. Measured side by side on a quiet 2-core machine (load 0.3-1.5), cold
# --check, -j 1 against -j 2 (before this bound), wall medians of 5: lightly 1.6.0 (estimate
# 0.07 s) 0.27 / 0.36 s, rl_games 1.6.5 (0.22) 0.44 / 0.48, avalanche-lib 0.6.0 (0.26) 0.47 /
# 0.49, diffusers 0.31.0's models/ (0.36) 0.78 / 0.80, kornia 0.9.0's geometry/ (0.66) 1.04 /
# 1.03, kornia (1.83) 1.82 / 1.29, diffusers (6.8) 2.77 / 1.72. On a loaded machine -j 2 is
# the slower still past 1 s (load 7-12: rl_games 1.25 / 2.04 s, kornia's geometry/ 2.81 / 3.28).
IN_PROCESS_UP_TO = 600_000
# With -j 2, the estimated work up to which the run starts no worker pool either: it shares its
# files with one forked copy of itself (runner._shared: forked once libcst is imported, each of
# the two takes the next file when free), which is what the pool's two workers would do, without
# the pool's start: runner.prepare's eager build (the TensorFlow rules' checks too), a spare
# worker, three forks, each worker's own start, a pickled answer per file. IN_PROCESS_UP_TO was
# measured against the pool, before _shared existed. bench/ab.py side by side, --check -j 2
# --no-cache, the pool against _shared, CPU-s of the process tree (load 6-11, 3-4 rounds each):
# allennlp 2.10.1 (estimate 0.67 s) 0.99-1.14 / 0.82-0.86, torchtune 0.6.1 (0.83) 1.19-1.31 /
# 1.03-1.41 (median 1.08), speechbrain 1.1.2 (0.77) 1.20-1.30 / 1.07-1.17, pytorch-ignite 0.5.5
# (1.66) 3.55-3.65 / 3.26-3.41, kornia 0.9.0 (1.83) 2.15-2.54 / 2.01-2.24, diffusers 0.31.0's
# src (6.8) 3.16-3.20 / 2.91-2.97; peak PSS lower in each (torchtune 84 -> 57 MB, ignite 101 ->
# 82). Past this bound the pool's heap trims and retiring workers (runner.heap_trimmer) keep a
# long run's memory down (transformers). With more than two jobs the pool spreads the work wider.
SHARED_UP_TO = 3_000_000


# The estimated work up to which a run that starts no worker pool (workers_for) does not share its
# files with a forked copy either (runner._shared): every file is migrated in this process, as
# with -j 1. Below it the copy's start (the fork, its copy-on-write faults, the answers' pickles)
# costs more CPU than the half of the parses it takes, and no wall time is won: CPU-s of each
# process after the fork (mmocr 1.0.1, estimate 86k: the main process 0.09-0.11, the copy
# 0.09-0.11, against ~0.12 for both halves in one process). bench/ab.py-style interleaved rounds,
# --check -j 2 --no-cache, CPU-s medians, sharing / not (load 8-9, 6-8 rounds): mmocr 0.457 /
# 0.401, torchdistill 1.1.5 (107k) 0.427 / 0.400, gpytorch 1.15.2 (99k) 0.464 / 0.416, tianshou
# 2.0.1 (143k) 0.393 / 0.323; past it the copy wins wall time: rl_games 1.6.5 (222k) wall medians
# 1.58 / 1.68 s, flair 0.15.1 (316k) 1.69 / 1.80 s.
SHARE_FROM = 150_000


def shares(requested: int, jobs: int, workload: "Optional[Workload]") -> bool:
    """Whether a run of -j `requested` that starts `jobs` workers (workers_for) shares its files
    with one forked copy of itself (runner._shared): when it starts none (jobs 1) though -j is
    above 1, and the scan estimates more than SHARE_FROM of work."""
    return jobs < requested and workload is not None and workload.micros > SHARE_FROM


def in_process_up_to(jobs: int) -> int:
    """The estimated work (Workload.enough) up to which a run with -j `jobs` starts no worker
    pool (workers_for): SHARED_UP_TO with -j 2, else IN_PROCESS_UP_TO."""
    return SHARED_UP_TO if jobs == 2 else IN_PROCESS_UP_TO


def workers_for(jobs: int, workload: "Optional[Workload]") -> int:
    """The worker processes a run starts, at most `jobs` (-j): none (1, this process) when the
    project scan's estimate of the files' work (`workload`) is its `enough`, in_process_up_to(jobs),
    or less. The output is the same either way (runner.run); only the time differs."""
    if jobs > 1 and workload is not None and workload.micros <= workload.enough:
        return 1
    return jobs


# Files from which a cold run with -j above 1 prepares its workers' start during the project scan,
# before the scan's estimate says whether it starts any (workers_for): the scan of fewer takes
# less time than runner.prepare (~0.27 CPU-s; the scan ~0.27 ms a file, transformers 4.46.3's
# 1,825 files ~0.5 CPU-s), so the overlap saves at most half the scan (~0.03 s for 500 files),
# while a run of few busy files among many others (rl_games 1.6.5: 70 .py files among ~250,
# estimate 0.22 s) would prepare for workers it never starts: the TensorFlow rules' checks and
# what only a forked worker shares (+0.09 CPU-s against -j 1, 5 runs each, load 12).
PREPARE_EARLY_FROM = 1000


def prepares_early(jobs: int, files: int, cold: bool) -> bool:
    """Whether the run prepares its workers' common start (runner.prepare) during the project
    scan: a run of `files` (PREPARE_EARLY_FROM or more: fewer are scanned sooner than prepared,
    and their run may start no worker at all, workers_for) with -j above 1 on Linux (forked
    workers), `cold` (no cache, or no index anywhere: every file goes to the workers). The
    others prepare when they start workers (runner.run)."""
    import sys

    from .project_values import SPLIT_FROM
    from .runner import PREPARE_FROM

    return (cold and jobs > 1 and files >= max(2, PREPARE_FROM, SPLIT_FROM, PREPARE_EARLY_FROM)
            and sys.platform.startswith("linux"))


# Files from which a cold run with -j above 1 that does not prepare early (prepares_early) imports
# libcst and the PyTorch pass (runner.warm_up) while the scan's forked child reads its .py files
# (the scan then shares them from this many, not SPLIT_FROM: the child reads nearly all of them).
# Fewer are a pre-commit hook's few staged files, or a script: they may parse nothing at all,
# and their scan is short. mmocr 1.0.1 (419 .py files, 9 of them parsed), gpytorch 1.15.2 (170).
WARM_FROM = 64


def warms_early(jobs: int, files: int, cold: bool) -> bool:
    """Whether a run of `files` with -j `jobs` imports libcst during the project scan
    (runner.warm_up; WARM_FROM): `cold` (no cache, or no index anywhere: every file is migrated),
    -j above 1, Linux (the scan's child is forked). A run that then parses nothing imported it
    for nothing (~0.07 CPU-s, on the other core than the scan's child)."""
    import sys

    return cold and jobs > 1 and files >= WARM_FROM and sys.platform.startswith("linux")


def settings_read_outside(files: Sequence[str], project: Project, options: Options) -> "tuple[dict, Options]":
    """A run given files, not the project's folder (the pre-commit hook passes the staged files):
    a device setting it would move to "npu" that a torch module of the project outside the run
    reads (project_values.readers_outside) is left as it is with its whole module, reported at
    its line (NPU324): moved alone, that reader would name a device torch does not know without
    `import torch_npu`, and no later run would find a CUDA setting to follow to it. Returns
    (path -> the result of each module left, the options without those settings). The project's
    other files are looked at only here: a run with no device setting reads nothing more."""
    from dataclasses import replace

    from .project_values import left_settings, readers_outside

    readers = readers_outside(options.device_config_keys, other_files(files, project))
    kept = {path: FileResult(path=path, findings=findings) for path, findings in left_settings(files, readers).items()}
    keys = tuple(k for k in options.device_config_keys if k not in readers)
    return kept, replace(options, device_config_keys=keys)


def other_files(files: Sequence[str], project: Project) -> Iterator[str]:
    """The project's .py files that are not among `files` (a run given files: below the files'
    common folder, or the git repository the run starts in, with the run's excludes)."""
    from .project_files import common_folder

    folder = common_folder(project.paths)
    here = os.getcwd()
    if os.path.isdir(os.path.join(here, ".git")) and (folder + os.sep).startswith(here.rstrip(os.sep) + os.sep):
        folder = here  # pre-commit runs at the repository's root and names files below it
    run = {os.path.realpath(f) for f in files}
    return (p for p in project.files(folder, wanted=_is_py) if os.path.realpath(p) not in run)


def _is_py(name: str) -> bool:
    return name.endswith(".py")


def distributed_silence(report: RunReport) -> List[str]:
    """--distributed that neither converted nor reported anything says so: a project whose
    training loop the passes do not recognise would otherwise get a summary that looks like
    success and a job that still trains on one NPU."""
    from .codes import sites_of
    from .kinds.base import Rule

    def distributed(code: str) -> bool:
        rule: Rule = report.rules.reported(code)
        return (any(site.module.startswith("npu_migrate.codemods.distributed") for site in sites_of(code))
                or os.path.basename(rule.source).startswith("distributed.toml"))

    codes = (c for r in report.results for c in [*(e.code for e in r.edits), *(f.code for f in r.findings)])
    if any(distributed(code) for code in codes) or any(map(converted_already, report.results)):
        return []
    scanned = sum(1 for r in report.results if not r.error and not r.skipped)
    # A notebook's training cells are not converted (only scripts are started as processes):
    # one with an optimizer was told none was found.
    notebooks = sum(1 for r in report.results if not r.error and not r.skipped and r.path.endswith(".ipynb"))
    return [f"npu-migrate: warning: --distributed made nothing distributed in the {scanned} "
            f"file{'s' if scanned != 1 else ''} scanned: no training script it can convert was found "
            "(a torch.optim optimizer, a MindSpore Model or TrainOneStepCell, or a tf.train optimizer, "
            "built where the script runs); a training loop in a module not given, or an optimizer "
            "built by a library, is converted by hand"
            + (f"; notebooks ({notebooks} scanned) are not converted: export one to a script "
               "(`jupyter nbconvert --to script`) and run --distributed on that" if notebooks else "")]


def converted_already(result: FileResult) -> bool:
    """A script an earlier --distributed run converted changes nothing and reports nothing the
    next time, but its helper module is refreshed beside it: it is distributed, not silent."""
    from .distributed import MODULES

    helpers = {f"{name}.py" for name in MODULES.values()}
    return any(os.path.basename(path) in helpers for path in result.extra_files)


def with_local_modules(options: Options, files: Sequence[str], rules: RuleSet) -> Options:
    """Options naming the project's own modules that a library finding would mistake for the
    library (a `triton/` folder of deployment scripts)."""
    from dataclasses import replace

    from .local_modules import shadowing_modules

    roots = {name.split(".", 1)[0] for name in rules.finding_import}
    local = shadowing_modules(files, roots)
    return replace(options, local_modules=local) if local else options


def with_project_values(options: Options, files: Sequence[str], rules: RuleSet,
                        seen: Optional[dict] = None, known: Optional[dict] = None,
                        found: Optional[dict] = None, crossing_facts: Optional[Callable[[str], Any]] = None,
                        jobs: int = 1, fingerprint: Optional[Callable[[], str]] = None,
                        meanwhile: Optional[Callable[[], object]] = None,
                        workload: "Optional[Workload]" = None,
                        outside: Optional[Callable[[], Iterable[str]]] = None,
                        split_from: Optional[int] = None) -> Options:
    """Options naming the device values that cross the project's modules: torch's device
    settings and the CUDA-only code other modules may call (project_values.py), MindSpore's
    device targets (device_dispatch.crossing_moves).
    `seen`, `known`, `found`: project_values.scan's. `crossing_facts(key)`: the cache.ScanFacts
    that keeps crossing_moves' facts of the files (runs that write nothing). `jobs`: the run's -j
    (above 1 the scan takes a second process: it runs before any worker starts). `fingerprint`:
    the run's cache.code_fingerprint (computed once). `meanwhile`: what this process does
    while the scan's forked child reads files (project_values.scan). `workload`: gets the
    scan's estimate of the files' work (workers_for). `outside`: the project's other .py files, for
    a run given files (other_files): a module-level Horovod name one of them imports keeps the
    module that binds it on Horovod (project_values.exported_names). `split_from`: the .py files
    from which the scan takes its forked child (project_values.SPLIT_FROM when None)."""
    import hashlib
    from dataclasses import replace

    from .kinds.device_dispatch import DeviceDispatchSpec
    from .project_values import cuda_tests, may_pass_on, scan

    from .kinds.finding import cuda_only_libraries

    code: List[str] = []
    bound: Dict[str, Tuple[str, ...]] = {}
    own: Set[str] = set()
    families: Set[str] = set()
    device_functions: Set[str] = set()
    device_tests: Set[str] = set()
    keys, crossing = scan(files, seen, known, found, cuda_only_libraries(rules.findings), code, jobs,  # one read each
                          meanwhile, workload, bound, own, families, split_from, device_functions, device_tests)
    if keys and options.framework in ("auto", "torch"):
        options = replace(options, device_config_keys=keys)
    if own and options.framework in ("auto", "torch"):
        options = replace(options, own_attributes=tuple(sorted(own)))
    if families and options.framework in ("auto", "torch"):
        options = replace(options, npu_families=tuple(sorted(families)))
    if device_functions and options.framework in ("auto", "torch"):
        options = replace(options, device_functions=tuple(sorted(device_functions)))
    kept_tests = cuda_tests(device_tests)
    if kept_tests and options.framework in ("auto", "torch"):
        options = replace(options, cuda_tests=kept_tests)
    if bound and options.framework in ("auto", "tensorflow"):
        from .project_values import exported_names

        readers: List[str] = []
        exported = exported_names(bound, itertools.chain(files, outside() if outside is not None else ()), readers)
        if exported:
            options = replace(options, exported_names=exported)
        run = {os.path.abspath(f) for f in files}
        readers = [r for r in readers if r.split("::", 1)[0] in run]  # (only the run's files are migrated)
        if readers:
            options = replace(options, whole_readers=tuple(readers))
    if code and options.framework in ("auto", "torch"):
        options = replace(options, cuda_only_code=tuple(code))
    dispatch = [rule for rule in rules.framework_rules.get("mindspore", ()) if rule.kind == "device_dispatch"
                and rule.call_spec is not None] if crossing and options.framework in ("auto", "mindspore") else []
    # (a rule whose `from` and options no such file names moves nothing: no libcst, no parse)
    dispatch = [rule for rule in dispatch if may_pass_on(crossing, rule.spec_of(DeviceDispatchSpec).literal,
                                                         rule.spec_of(DeviceDispatchSpec).options)]
    if not dispatch:
        return options
    kept = None
    if crossing_facts is not None and found is not None:
        # What crossing_moves found in each file, kept for runs that write nothing (as the scan's
        # facts): by this code and data (cache.code_fingerprint: libcst's version too) and rules.
        from .cache import code_fingerprint

        specs = repr([(rule.code, rule.spec_of(DeviceDispatchSpec)) for rule in dispatch])
        this_code = (fingerprint or code_fingerprint)()
        kept = crossing_facts(hashlib.sha256(f"{this_code}\0{specs}".encode()).hexdigest()[:32])
        if _no_caller(crossing, found, kept.load()):
            return options  # (libcst, 0.1-0.3 s, is not imported)
    from .codemods.device_dispatch import crossing_moves

    facts: Dict[str, Any] = {}
    moves = tuple(m for rule in dispatch for m in crossing_moves(files, rule, facts if kept is not None else None))
    if kept is not None:
        kept.save(facts)
    if moves:
        options = replace(options, mindspore_device_moves=moves)
    return options


def _no_caller(paths: Sequence[str], scanned: Dict[str, Any], known: Dict[str, Any]) -> bool:
    """Whether crossing_moves found no caller whose value may move in any of `paths` (the only
    files that may hold one: project_values.scan), each for exactly the bytes the scan read
    now (its digest in `scanned`): then nothing moves."""
    for path in paths:
        path = os.path.abspath(path)
        scan, fact = scanned.get(path), known.get(path)
        if not (isinstance(scan, list) and isinstance(fact, list) and len(fact) == 2 and isinstance(scan[0], str)
                and fact[0] == scan[0] and fact[1] is False):
            return False
    return True


def once_per_run(report: RunReport) -> None:
    """Findings of ONCE_PER_RUN_CODES stay only in the first file that has them (each file's
    own result, cached, keeps its own)."""
    seen: set = set()
    for r in report.results:
        kept = []
        for f in r.findings:
            if f.code in ONCE_PER_RUN_CODES:
                if f.code in seen:
                    continue
                seen.add(f.code)
            kept.append(f)
        if len(kept) != len(r.findings):
            r.findings = kept


def report_unused_ignores(report: RunReport) -> None:
    """--report-unused-ignores: the NPU001 findings the engine set aside join the findings."""
    for r in report.results:
        if r.unused_ignores:
            r.findings = sorted(r.findings + r.unused_ignores, key=lambda f: (f.span.line, f.span.col, f.code))


def write_in_place(outcomes: List[Outcome]) -> None:
    from .source import SourceError, write_source

    for o in outcomes:
        if o.result.new_text is not None and o.source is not None:
            try:
                write_source(o.source, o.result.new_text)
            except SourceError as exc:
                o.result.error = str(exc)
                o.result.new_text = None


def write_output_dir(settings: Settings, file_filter, outcomes: List[Outcome],
                     warn: Callable[[str], None]) -> List[FileResult]:
    """Write the --output-dir copy. A migrated file that cannot be written fails in its own
    result; the failed results of the other files (copied unchanged, or not at all) come back."""
    from .output_dir import write_tree

    assert settings.output_dir is not None

    migrated = {o.result.path: (o.source, o.result.new_text)
                for o in outcomes if o.result.new_text is not None and o.source is not None}
    warnings, errors = write_tree(settings.paths, settings.output_dir, file_filter, migrated)
    if not settings.quiet:
        for w in warnings:
            warn(f"npu-migrate: warning: {w}")
    for o in outcomes:
        if o.result.path in errors:
            o.result.error = errors.pop(o.result.path)
            o.result.new_text = None
    return [FileResult(path=path, error=why) for path, why in errors.items()]


def add_diffs(report: RunReport, outcomes: List[Outcome], shown: Callable[[str], str]) -> None:
    """The diff of each changed file, headed by `shown(path)`."""
    for o in outcomes:
        if o.result.new_text is not None and o.original_text is not None:
            report.diffs[o.result.path] = unified_diff(
                o.original_text, o.result.new_text, patch_path(shown(o.result.path)))


def write_generated_files(settings: Settings, report: RunReport):
    """Files generated next to migrated ones (the ModelArts boot file): written, or diffed.
    (lines to tell the user, whether some are still to be written)"""
    from .extra_files import apply
    from .output_dir import input_root

    root = input_root(settings.paths) if settings.output_dir else None
    return apply(report, settings.mode, settings.output_dir, root)
