"""The `npu-migrate` command line: click options -> settings.Settings -> pipeline.run ->
render -> exit code (report.RunReport.return_code).

Exit codes (like black and ruff):
  0  nothing to do, or everything done;
  1  with --check: something would change, or a finding at/above --fail-on exists;
     with --diff: something would change;
  2  usage or configuration error, or a file that could not be processed (after all others);
  130 / 143  interrupted by Ctrl-C / SIGTERM (files are either fully old or fully new).
"""

from __future__ import annotations

import dataclasses
import os
import signal
import sys
from typing import Any, List, Sequence

import click

from . import __version__
from .diffs import colorize, use_color
from .console import EXIT_CHANGES, EXIT_ERROR, EXIT_SIGINT, EXIT_SIGTERM, emit_report
from .console import fail as _fail
from .model import MODELARTS_DATA_DIR, MODELARTS_OUTPUT_DIR, FileResult, Severity, WriteBack
from .settings import Settings
from .rules import RuleError, RuleSet, load_rules



class Interrupted(BaseException):
    """SIGTERM arrived (raised by its handler, wherever the run is). Like KeyboardInterrupt, not
    an Exception: the per-file `except Exception` handlers must let it through."""

    def __init__(self, code: int) -> None:
        self.code = code


class DefaultGroup(click.Group):
    """`npu-migrate PATH…` migrates; `npu-migrate rules` / `explain CODE` are subcommands.

    The `migrate` subcommand is implicit: usage lines and help never name it. Every error,
    click's usage errors included, comes in one style, `npu-migrate: error: …` (a usage error
    adds where to find help), exit code 2.
    """

    def parse_args(self, ctx: click.Context, args: List[str]) -> List[str]:
        ctx.meta["npu_migrate.argv"] = list(args)  # the command line as typed (the review page shows it)
        if not args or args[0] not in self.commands:
            _refuse_a_mistyped_command(args[0] if args else "", [c for c in self.commands if c != "migrate"])
            args = ["migrate", *args]
        return super().parse_args(ctx, args)

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        _tolerate_any_file_name()
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.UsageError as exc:
            command = exc.ctx.command_path if exc.ctx is not None else "npu-migrate"
            click.echo(f"npu-migrate: error: {exc.format_message()}", err=True)
            click.echo(f"Try '{command} --help' for help.", err=True)
            sys.exit(EXIT_ERROR)
        except click.ClickException as exc:
            click.echo(f"npu-migrate: error: {exc.format_message()}", err=True)
            sys.exit(exc.exit_code)
        except click.Abort:
            click.echo("npu-migrate: interrupted", err=True)
            sys.exit(EXIT_SIGINT)
        sys.exit(rv if isinstance(rv, int) else 0)


class _Count(click.IntRange):
    """A whole number with a lower bound. click names IntRange "integer range", so `-j abc` said
    "'abc' is not a valid integer range" and the help "INTEGER RANGE"; a count is an integer."""

    name = "integer"


def _refuse_a_mistyped_command(first: str, commands: List[str]) -> None:
    """`npu-migrate explian NPU301` would otherwise say only "explian: no such file or directory":
    a first word that is no path and is close to a command's name names the command."""
    if not first or first.startswith("-") or "/" in first or "." in first or os.path.lexists(first):
        return
    import difflib  # only here: a one-file run does not load it

    close = difflib.get_close_matches(first, commands, n=1, cutoff=0.75)
    if close:
        raise click.UsageError(f"{first}: no such file or directory, nor a command; "
                               f"did you mean `npu-migrate {close[0]}`?")


class _ImplicitContext(click.Context):
    """The context of the implicit `migrate` command: its path is the program's own."""

    @property
    def command_path(self) -> str:
        return self.parent.command_path if self.parent is not None else super().command_path


class _MigrateCommand(click.Command):
    context_class = _ImplicitContext

    def invoke(self, ctx: click.Context) -> Any:
        from .startup import run_scope

        with run_scope():  # (what the run froze is the collector's again when it ends: startup.py)
            return super().invoke(ctx)


def _tolerate_any_file_name() -> None:
    """A file name that is not UTF-8 (a lone surrogate once decoded) is printed as the bytes it
    is, instead of crashing the report."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="surrogateescape")  # type: ignore[union-attr]
        except (AttributeError, ValueError):  # not a TextIOWrapper (a test runner's buffer)
            pass


@click.group(cls=DefaultGroup, context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """npu-migrate: migrate CUDA training code to Ascend NPUs."""


def _install_signal_handlers() -> Any:
    """SIGTERM ends the run like Ctrl-C. Returns the handler it replaced, which the run puts
    back when it is over (`_restore_signal_handler`): a program that runs npu-migrate in its
    own process keeps its own handler. None when not in the main thread (nothing installed)."""
    def on_term(signum, frame):  # pragma: no cover - exercised in a subprocess test
        raise Interrupted(EXIT_SIGTERM)

    try:
        return signal.signal(signal.SIGTERM, on_term)
    except ValueError:  # not in the main thread
        return None


def _restore_signal_handler(previous: Any) -> None:
    if previous is not None:
        signal.signal(signal.SIGTERM, previous)


@main.command("migrate", cls=_MigrateCommand, context_settings={"help_option_names": ["-h", "--help"]})
# readable=False: a file that cannot be read is one failed file of the run, not a usage error.
@click.argument("paths", nargs=-1, type=click.Path(readable=False, path_type=str))
@click.option("--write", "-w", is_flag=True, help="Rewrite the files in place.")
@click.option("--diff", "show_diff", is_flag=True, help="Print a unified diff; write nothing (exit 1 if anything would change).")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 if anything would change or a finding at --fail-on exists.")
@click.option("--output-dir", type=click.Path(file_okay=False, path_type=str),
              help="Write a migrated copy of the input tree to this new or empty folder; the input is not touched.")
@click.option("--fail-on", type=click.Choice(["error", "warning", "info"]), default=Settings.fail_on, show_default=True,
              help="With --check: the lowest finding severity that fails.")
@click.option("--report-unused-ignores", is_flag=True,
              help="Report `# npu-migrate: ignore` comments that silence nothing (NPU001, a warning).")
@click.option("--format", "fmt", default=Settings.fmt, show_default=True, help="Report format: text, json, sarif, github, markdown, csv, html (one self-contained review page).")
@click.option("--output-file", "-o", type=click.Path(path_type=str),
              help="Write the report to this file instead of stdout (--format csv: into this folder, created if missing).")
@click.option("--rules", "rule_files", multiple=True, type=click.Path(dir_okay=False, path_type=str), help="An extra rule file (TOML); repeatable.")
@click.option("--framework", type=click.Choice(["auto", "torch", "tensorflow", "mindspore"]), default=Settings.framework, show_default=True,
              help="Which framework's rules to apply; auto decides per file from its imports.")
@click.option("--no-import", "no_import", is_flag=True, help="Do not add `import torch_npu`.")
@click.option("--torch-npu-version", default="", metavar="X.Y",
              help="The torch_npu release the code must run on (2.1, or 2.1.0.post17): rewrites into names it lacks "
                   "are not made. Default: read from the project's torch/torch-npu pin, else the newest.")
@click.option("--cann-version", default="", metavar="X.Y",
              help="The CANN release the TensorFlow code must run on (5.0, 8.0.RC2): rewrites into TF Adapter helpers "
                   "it lacks are not made. Default: the CANN install path of the project's launch scripts, else the newest.")
@click.option("--mindspore-version", default="", metavar="X.Y",
              help="The MindSpore release the code must run on (2.2.14, 1.10): --distributed writes the set-up it has. "
                   "Default: read from the project's mindspore pin, else the newest.")
@click.option("--npu-ops", is_flag=True,
              help="TensorFlow: replace tf.nn.dropout, a hand-written gelu and tf.layers.max_pooling2d by the NPU's "
                   "operators (NPU129); without it they are reported as advice (NPU351).")
@click.option("--distributed", is_flag=True,
              help="Turn one-device training scripts into data-parallel training on several NPUs (and write launch scripts).")
@click.option("--modelarts", is_flag=True, help="Adapt entry scripts for ModelArts (--data_url/--train_url, OBS copies).")
@click.option("--entry", "entries", multiple=True, type=click.Path(path_type=str), help="With --modelarts: treat this file as an entry script; repeatable.")
@click.option("--modelarts-entry", is_flag=True,
              help="Also write a ModelArts boot file (modelarts_entry_<script>.py) next to each --entry script; implies --modelarts.")
@click.option("--modelarts-resume", is_flag=True, help="With --modelarts: copy checkpoints found under train_url back at start.")
@click.option("--modelarts-data-dir", default=MODELARTS_DATA_DIR, show_default=True, metavar="DIR", help="Where OBS input data is copied to.")
@click.option("--modelarts-output-dir", default=MODELARTS_OUTPUT_DIR, show_default=True, metavar="DIR", help="Default local output folder copied to train_url.")
@click.option("--data-arg", "data_args", multiple=True, metavar="NAME",
              help="With --modelarts: a data argument of the script (instead of those found by name and help); repeatable.")
@click.option("--output-arg", "output_args", multiple=True, metavar="NAME",
              help="With --modelarts: an output argument (file or folder) of the script, copied to train_url; repeatable.")
@click.option("--modelarts-sync-every", type=click.FloatRange(min=0), default=0, metavar="MINUTES",
              help="With --modelarts: also copy new outputs to train_url every MINUTES (default: only at the end).")
@click.option("--exclude", multiple=True, metavar="GLOB",
              help="Skip files and folders matching this gitignore-style pattern; replaces the default excludes. Repeatable.")
@click.option("--extend-exclude", multiple=True, metavar="GLOB", help="Like --exclude, but keeps the default excludes. Repeatable.")
@click.option("--force-exclude", is_flag=True, help="Apply the excludes to files given explicitly too (pre-commit passes file names).")
@click.option("--known-files-only", is_flag=True,
              help="Skip files named on the command line that a folder walk would not take (README, LICENSE, "
                   "other .txt files); the pre-commit hooks pass it.")
@click.option("--respect-gitignore/--no-respect-gitignore", default=True, show_default=True,
              help="Skip what .gitignore files exclude.")
@click.option("--jobs", "-j", type=_Count(min=0), default=0,
              help="Worker processes at most (default 0: all cores; 1 runs in-process, and so does a run with "
                   "little work: the project scan estimates it).")
@click.option("--no-cache", is_flag=True,
              help="Neither read nor write the cache of results of unchanged files (folder: $NPU_MIGRATE_CACHE_DIR, else ~/.cache/npu-migrate on Linux).")
@click.option("--stdin-filename", metavar="PATH", help="With `-`: the name of the file read from stdin.")
@click.option("--config", "config_file", type=click.Path(exists=True, dir_okay=False, path_type=str),
              help="Read options from this TOML file instead of the nearest pyproject.toml.")
@click.option("--isolated", is_flag=True, help="Ignore all configuration files.")
@click.option("--color", type=click.Choice(["auto", "always", "never"]), default=Settings.color, show_default=True,
              help="Colour the diff; auto = on a terminal, unless NO_COLOR is set.")
@click.option("--fail-on-empty", is_flag=True,
              help="Fail (exit 2) when a folder given holds no file to migrate, instead of a warning (a mistyped path in CI).")
@click.option("--quiet", "-q", is_flag=True, help="Print errors only.")
@click.option("--verbose", "-v", is_flag=True, help="Print every edit, which files were skipped and why, and the run's work (--stats: per file too).")
@click.option("--stats", is_flag=True,
              help="Print the run's work (parses, tree walks, transforms: counts, not times) and the files that took the most.")
@click.version_option(__version__, "--version", prog_name="npu-migrate")
@click.pass_context
def migrate_command(ctx: click.Context, /, **params) -> None:
    """Migrate CUDA (GPU) training code in PATHS to Ascend NPU.

    \b
    npu-migrate train.py              report what would change (writes nothing)
    npu-migrate src/ --diff           show the changes as a unified diff
    npu-migrate src/ --check          fail (exit 1) if anything is left to migrate
    npu-migrate src/ --write          rewrite the files in place
    npu-migrate src/ --output-dir out write a migrated copy of src/ to out/
    npu-migrate - --stdin-filename train.py < train.py

    Every option can also be set in [tool.npu-migrate] of pyproject.toml (`fail-on = "warning"`).
    Other commands: `npu-migrate rules` lists every code; `npu-migrate explain NPU301`;
    `npu-migrate rehearse train.py` runs an adapted script as a ModelArts job would, on the CPU.
    """
    from .report import RENDERERS, load_renderers

    from .startup import long_lived

    # What the run is set up with lives as long as it does (startup.long_lived): no collection
    # while it is built (~16 young ones: the targets, the rule set), then out of the collector's reach.
    with long_lived():
        settings, config = _settings(ctx, params)
        from .discovery import FileFilter, InvalidPattern, discover, project_of

        try:
            file_filter = FileFilter(
                root=config.folder or ".",
                exclude=settings.exclude if _was_set(ctx, config, "exclude") else None,
                extend_exclude=settings.extend_exclude,
                respect_gitignore=settings.respect_gitignore,
            )
        except InvalidPattern as exc:
            raise click.UsageError(str(exc)) from None
        # The run's project: every walk of it (discovery, the targets' look at its scripts, the
        # ModelArts scan around an entry script) excludes what the run excludes.
        project = project_of([settings.stdin_filename or "."] if settings.stdin else list(settings.paths), file_filter)
        settings = dataclasses.replace(settings, targets=_targets(ctx, settings, config, project))
        if settings.quiet and settings.verbose:  # one in the file, the other typed: the command line wins
            if _from_config(ctx, config, "quiet") and not _from_config(ctx, config, "verbose"):
                settings = dataclasses.replace(settings, quiet=False)
            elif _from_config(ctx, config, "verbose") and not _from_config(ctx, config, "quiet"):
                settings = dataclasses.replace(settings, verbose=False)
        load_renderers(settings.fmt)
        if settings.fmt not in RENDERERS and _from_config(ctx, config, "fmt"):
            from .report import renderer_names

            _fail(config.error("format", f"unknown format {settings.fmt!r}; choose from {', '.join(renderer_names())}"))
        _check_usage(settings, RENDERERS)
        _check_modelarts_options(ctx, settings)
        # The parsed rule files are kept in the cache folder (rules.ParsedRulesCache); runs that
        # write parse them afresh, as they take no changed result from the result cache.
        rules = _load_rules_or_exit(settings.rule_files, parsed_cache=None if settings.no_cache or settings.mode.writes
                                    else _parsed_rules_folder())
        if not (settings.output_file or settings.output_dir) and writes_several_files(RENDERERS[settings.fmt], rules):
            raise click.UsageError(f"--format {settings.fmt} writes several files: name a folder with -o, or use --output-dir")
    if settings.verbose and config.path:
        click.echo(f"npu-migrate: configuration from {config.path}", err=True)
    if settings.stdin:
        from .stdin import run_stdin

        _refuse_report_over_input(settings, [settings.stdin_filename] if settings.stdin_filename else [])
        sys.exit(run_stdin(settings, rules, project, use_color(settings.color, sys.stdout)))

    if settings.output_dir:
        from .output_dir import OutputDirError, check

        try:
            check(settings.paths, settings.output_dir)
        except OutputDirError as exc:
            _fail(str(exc))
    with long_lived():
        selection = discover(settings.paths, file_filter, force_exclude=settings.force_exclude,
                             known_files_only=settings.known_files_only)
    if settings.fail_on_empty:
        selection.errors += [f"no files to migrate under {p}" for p in selection.empty]
    elif not settings.quiet:
        for p in selection.empty:
            click.echo(f"npu-migrate: warning: no files to migrate under {p}", err=True)
    for e in selection.errors:
        click.echo(f"npu-migrate: error: {e}", err=True)
    if settings.verbose:
        for path, why in selection.skipped:
            click.echo(f"{path}: skipped: {why}", err=True)
    from .source import stray_temp_files

    for line in stray_temp_files(selection.stray, remove=settings.write):
        click.echo(line, err=True)
    if selection.errors and not (selection.files or selection.unlistable):
        sys.exit(EXIT_ERROR)
    _refuse_report_over_input(settings, selection.files)
    if (settings.modelarts or settings.modelarts_entry) and not settings.quiet:
        _warn_entries_outside(ctx, selection.files)

    from .pipeline import run
    from .progress import ProgressBar, wanted
    from .runner import default_jobs

    previous_handler = _install_signal_handlers()
    try:
        with ProgressBar(len(selection.files), wanted(len(selection.files), settings.quiet)) as bar:
            report = run(settings, rules, selection.files, project, color=use_color(settings.color, sys.stdout),
                         jobs=settings.jobs or default_jobs(), on_done=bar.advance,
                         warn=lambda line: click.echo(line, err=True))
    except (KeyboardInterrupt, Interrupted) as exc:
        word = "interrupted" if isinstance(exc, KeyboardInterrupt) else "terminated"
        if settings.output_dir:
            click.echo(f"npu-migrate: {word}; {settings.output_dir} is incomplete (every file in it is whole); "
                       "the input is unchanged", err=True)
        else:
            click.echo(f"npu-migrate: {word}; every file is either unchanged or fully migrated", err=True)
        sys.exit(EXIT_SIGINT if isinstance(exc, KeyboardInterrupt) else exc.code)
    finally:
        _restore_signal_handler(previous_handler)
    report.path_errors = list(selection.errors)
    report.command = ["npu-migrate", *ctx.meta.get("npu_migrate.argv", [])]
    # A folder that cannot be listed is a failed entry of the run, never skipped quietly.
    report.results += [FileResult(path=path, error=why) for path, why in selection.unlistable]

    if settings.verbose:
        for r in report.results:
            if r.skipped:
                click.echo(f"{report.display_path(r.path)}: skipped: {r.skipped}", err=True)
            for note in r.notes:
                click.echo(f"{report.display_path(r.path)}: {note}", err=True)
    if settings.verbose or settings.stats:
        from .work import most_work, summary

        click.echo(summary(r.work for r in report.results), err=True)
        if settings.stats:
            for line in most_work([(report.display_path(r.path), r.work) for r in report.results]):
                click.echo(line, err=True)
    _render(settings, report, RENDERERS)
    for line in report.notes:
        if not settings.quiet or line.startswith("npu-migrate: warning"):
            click.echo(line, err=True)
    code = report.return_code(Severity(settings.fail_on))
    for line in report.check_failure(Severity(settings.fail_on)) if code == EXIT_CHANGES else ():
        click.echo(line, err=True)
    sys.exit(code)


def _settings(ctx: click.Context, params: dict):
    """The command line merged over the configuration file: (settings, config). Exits 2 on a bad file."""
    from .config import ConfigError, apply, load_config

    if params["config_file"] and params["isolated"]:
        raise click.UsageError("--config and --isolated cannot be used together")
    try:
        config = load_config(ctx.command, ctx, params["paths"], params["config_file"], params["isolated"],
                             params["stdin_filename"])
    except ConfigError as exc:
        _fail(str(exc))
    return Settings.from_params(apply(config, ctx, params)), config


def _targets(ctx: click.Context, settings, config, project):
    """The targets of this run (targets/): torch_npu, CANN and MindSpore, each from its
    option, the configuration, the project, or the newest release. Exits 2 on a version the
    tool does not know or cannot read."""
    from click.core import ParameterSource

    from .targets import TargetError, resolve, resolve_targets

    def source(param: str) -> str:
        if ctx.get_parameter_source(param) is ParameterSource.COMMANDLINE:
            return "--" + param.replace("_", "-")
        return f"{param.replace('_', '-')} in [tool.npu-migrate] of {config.path}"

    versions = {kind: (getattr(settings, f"{kind}_version"), source(f"{kind}_version"))
                for kind in ("torch_npu", "cann", "mindspore")}
    for kind, (version, where) in versions.items():
        if version and _from_config(ctx, config, f"{kind}_version"):
            try:  # a version from the configuration: the error names the file and the key
                resolve(kind, version, where, project.paths, project)
            except TargetError as exc:
                _fail(config.error(f"{kind.replace('_', '-')}-version", str(exc)))
    try:
        return resolve_targets(versions, project.paths, project)
    except TargetError as exc:
        _fail(str(exc))


def _refuse_report_over_input(settings: Settings, files: Sequence[str]) -> None:
    """-o names the report file: one the run migrates (`npu-migrate train.py -o train.py`, -o read
    as "the migrated code goes there") would be replaced by the report. Compared by basename first:
    a large tree is not resolved file by file."""
    if not settings.output_file:
        return
    report = os.path.abspath(settings.output_file)
    name = os.path.basename(report)
    if any(os.path.basename(f) == name and os.path.exists(f) and os.path.exists(report) and os.path.samefile(f, report)
           for f in files):
        raise click.UsageError(f"-o {settings.output_file} is a file this run migrates; -o names the report file "
                               "(the migrated code goes in place with --write, or into a folder with --output-dir)")


def _warn_entries_outside(ctx: click.Context, files: Sequence[str]) -> None:
    """An --entry typed on the command line that the run does not migrate is adapted by nobody:
    say so (the configuration's entries wait for the runs that include them)."""
    from click.core import ParameterSource

    if ctx.get_parameter_source("entries") is not ParameterSource.COMMANDLINE:
        return
    run_files = {os.path.abspath(f) for f in files}
    for entry in ctx.params.get("entries") or ():
        if os.path.abspath(entry) not in run_files:
            click.echo(f"npu-migrate: warning: --entry {entry} is not among the files of this run: it is not "
                       "adapted (give its folder, or the file itself)", err=True)


def _from_config(ctx: click.Context, config, name: str) -> bool:
    """The value of `name` is the configuration's (not overridden on the command line)."""
    from click.core import ParameterSource

    return name in config.values and ctx.get_parameter_source(name) is not ParameterSource.COMMANDLINE


def _was_set(ctx: click.Context, config, name: str) -> bool:
    """Given on the command line or in the configuration (even as an empty list)."""
    from click.core import ParameterSource

    return name in config.values or ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE


# Options that do something only with --modelarts (or --modelarts-entry, which implies it).
MODELARTS_ONLY = {"entries": "--entry", "data_args": "--data-arg", "output_args": "--output-arg",
                  "modelarts_resume": "--modelarts-resume", "modelarts_sync_every": "--modelarts-sync-every",
                  "modelarts_data_dir": "--modelarts-data-dir", "modelarts_output_dir": "--modelarts-output-dir"}


def _check_modelarts_options(ctx: click.Context, s: Settings) -> None:
    """An option that does something only with --modelarts, given on the command line without it, is
    a usage error (it was ignored in silence). The same option in the configuration is not: a project
    may keep its ModelArts settings there and still run plain migrations."""
    from click.core import ParameterSource

    # `--modelarts --entry eval_typo.py` adapted nothing and exited 0 (in the configuration an entry
    # waits for the runs that include it, as the pre-commit hook passes only the staged files).
    if ctx.get_parameter_source("entries") is ParameterSource.COMMANDLINE:
        for entry in ctx.params.get("entries") or ():
            if not os.path.isfile(entry):
                raise click.UsageError(f"--entry {entry}: no such file")
    if ctx.get_parameter_source("stdin_filename") is ParameterSource.COMMANDLINE and not s.stdin:
        raise click.UsageError("--stdin-filename only applies when the path is `-` (stdin)")
    # `npu-migrate src --fail-on warning` in CI exited 0 whatever it found (only --check reads it).
    if ctx.get_parameter_source("fail_on") is ParameterSource.COMMANDLINE and not s.check:
        raise click.UsageError("--fail-on only applies with --check")
    if s.modelarts or s.modelarts_entry:
        return
    given = [flag for name, flag in MODELARTS_ONLY.items()
             if ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE]
    if given:
        raise click.UsageError(f"{', '.join(given)} only {'applies' if len(given) == 1 else 'apply'} "
                               "with --modelarts (or --modelarts-entry)")


def _check_usage(s: Settings, renderers) -> None:
    if s.fmt not in renderers:
        from .report import renderer_names

        raise click.BadParameter(f"unknown format {s.fmt!r}; choose from {', '.join(renderer_names())}", param_hint="--format")
    if not s.paths:
        raise click.UsageError("no paths given (use `-` to read from stdin)")
    if "-" in s.paths and len(s.paths) > 1:
        raise click.UsageError("`-` (stdin) cannot be mixed with other paths")
    if s.write and (s.show_diff or s.check):
        raise click.UsageError("--write cannot be combined with --diff or --check")
    if s.output_dir and (s.write or s.show_diff or s.check):
        raise click.UsageError("--output-dir cannot be combined with --write, --diff or --check")
    if s.output_dir and s.paths == ("-",):
        raise click.UsageError("--output-dir needs paths, not stdin")
    if s.quiet and s.verbose:
        raise click.UsageError("--quiet and --verbose cannot be used together")
    if s.modelarts_entry and not s.entries:
        raise click.UsageError("--modelarts-entry needs --entry FILE: the boot file runs that script")


def _load_rules_or_exit(rule_files, parsed_cache=None) -> RuleSet:
    try:
        return load_rules(rule_files, parsed_cache=parsed_cache)
    except RuleError as exc:
        _fail(str(exc))


def _parsed_rules_folder():
    """The parsed rule files' folder in the user's private cache folder (cache.private_root:
    never one others may write); None when the cache folder cannot be used (the result cache
    says why)."""
    from .cache import cache_root, private_root

    root, problem = private_root(cache_root())
    return root / "parsed-rules" / f"v{__version__}" if problem is None else None


def _diff_header(report, result) -> str:
    """What a reviewer sees above each file's diff on a terminal."""
    edits, findings = len(result.edits), len(result.findings)
    parts = [f"{edits} edit{'s' if edits != 1 else ''}"]
    if findings:
        parts.append(f"{findings} finding{'s' if findings != 1 else ''}")
    return f"{report.display_path(result.path)}: {', '.join(parts)}"


def _render(settings, report, renderers) -> None:
    """stdout gets the diff (--diff) or the report; with --diff the report goes to stderr or -o.

    `--diff --format markdown` is the exception: one document with the diffs and the findings.
    With --output-dir, a report in a machine format is written into OUT unless -o says otherwise.
    """
    rendered = renderers[settings.fmt](report)
    if settings.show_diff and settings.fmt != "markdown":
        for r in report.results:
            diff = report.diffs.get(r.path)
            if diff:
                shown = colorize(diff, _diff_header(report, r)) if report.color else diff
                click.echo(shown, nl=False, color=report.color)
        # The report goes elsewhere, so that stdout stays a patch that applies.
        emit_report(rendered, settings.output_file, err=True)
        return
    output_file = settings.output_file
    if settings.output_dir and not output_file and settings.fmt != "text":
        several = isinstance(rendered, dict)
        names = list(rendered) if several else [f"npu-migrate-report.{settings.fmt}"]
        for name in names:
            if os.path.lexists(os.path.join(settings.output_dir, name)):
                _fail(f"the report file {name} would replace the input's own {name} in {settings.output_dir}; "
                      "write the report elsewhere with -o")
        output_file = settings.output_dir if several else os.path.join(settings.output_dir, names[0])
    emit_report(rendered, output_file, err=False)


def writes_several_files(renderer, rules: RuleSet) -> bool:
    """Whether a format is a set of files (csv), which need a folder (-o FOLDER or --output-dir)."""
    from .report import RunReport

    return isinstance(renderer(RunReport(results=[], rules=rules, mode=WriteBack.REPORT)), dict)


@main.command("rules")
@click.option("--rules", "rule_files", multiple=True, type=click.Path(dir_okay=False, path_type=str),
              help="An extra rule file (TOML), as for a run; repeatable.")
@click.option("--torch-npu-version", default="", metavar="X.Y",
              help="List instead which torch.cuda rewrites this torch_npu target gets (2.1, 2.1.0.post17).")
@click.option("--cann-version", default="", metavar="X.Y",
              help="List instead which TensorFlow rewrites this CANN release's TF Adapter gets (5.0, 20.1).")
def rules_command(rule_files, torch_npu_version, cann_version) -> None:
    """List every code: what it reports (rewrite or severity) and its title."""
    from .explain import list_codes

    try:
        rules = load_rules(rule_files)
    except RuleError as exc:
        click.echo(f"npu-migrate: error: {exc}", err=True)
        sys.exit(EXIT_ERROR)
    if cann_version:
        from .targets import TargetError
        from .targets.cann import CannTarget, cann_key
        from .targets.rule_view import describe_cann_target

        try:
            cann_key(cann_version)
        except TargetError as exc:
            _fail(str(exc))
        click.echo(describe_cann_target(rules, CannTarget(cann_version, "--cann-version")), nl=False)
        return
    if torch_npu_version:
        from .targets import TargetError
        from .targets.torch_npu import Target, describe_target, load_table, releases_for

        try:
            releases_for(torch_npu_version, load_table())
        except TargetError as exc:
            _fail(str(exc))
        click.echo(describe_target(rules, Target(torch_npu_version, "--torch-npu-version")), nl=False)
        return
    click.echo(list_codes(rules), nl=False)


@main.command("explain")
@click.argument("code")
@click.option("--rules", "rule_files", multiple=True, type=click.Path(dir_okay=False, path_type=str),
              help="An extra rule file (TOML), as for a run; repeatable.")
def explain_command(code, rule_files) -> None:
    """Show the documentation of a rule code, with its examples."""
    try:
        rules = load_rules(rule_files)
    except RuleError as exc:
        click.echo(f"npu-migrate: error: {exc}", err=True)
        sys.exit(EXIT_ERROR)
    from .explain import explain

    # `explain 301`: the number alone, as a report's `NPU301` is read aloud.
    text = explain(rules, code) or (explain(rules, f"NPU{code}") if code.isdigit() else None)
    if text is None:
        click.echo(f"npu-migrate: error: unknown code {code.upper()}; `npu-migrate rules` lists them", err=True)
        sys.exit(EXIT_ERROR)
    click.echo(text, nl=False)


@main.command("rehearse", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("script", type=str)
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED)
@click.option("--nproc", type=_Count(min=1), default=1, show_default=True,
              help="Processes to start, as on a node with that many NPUs.")
@click.option("--nodes", type=_Count(min=1), default=1, show_default=True,
              help="Nodes of the job: --nproc processes each, each node with its own working folder and /cache.")
@click.option("--data", type=str, help="A folder that becomes the job's input, obs://rehearsal/data/.")
@click.option("--obs", type=str, help="The local OBS folder (default: one in the job folder); obs://B/K is DIR/B/K.")
@click.option("--python", "python", type=str, default=sys.executable,
              help="The interpreter that runs the script (one with torch installed).  [default: this one]")
@click.option("--timeout", type=click.FloatRange(min=0), help="Stop the whole job after this many seconds.")
@click.option("--sigterm-after", type=click.FloatRange(min=0),
              help="Send SIGTERM to every process after this many seconds, as a preemption does.")
@click.option("--sigterm-on", type=str, metavar="FILE",
              help="Send SIGTERM to every process once FILE (a path in the job's working folder) exists.")
@click.option("--code", "code", type=str,
              help="The code folder ModelArts downloads, which holds SCRIPT (default: the script's folder).")
@click.option("--job-dir", type=str, help="Where to lay out the job (a new or empty folder; default: a temporary one).")
@click.option("--quiet", "-q", is_flag=True, help="Do not show the processes' output (it is still in the job's logs).")
def rehearse_command(script, script_args, nproc, nodes, data, obs, python, timeout, sigterm_after, sigterm_on, code,
                     job_dir, quiet) -> None:
    """Run an adapted entry script as a ModelArts job would, on the CPU.

    Copies the script's folder into a job folder, lays out a local OBS with --data at
    obs://rehearsal/data/, and starts --nproc processes with --data_url/--train_url, the
    arguments and variables ModelArts sets, and CPU stand-ins for torch_npu and MoXing.
    Arguments after `--` go to the script. This RUNS the script (migrating never does); your
    files are not modified. Exit 0 when every process succeeded and a file reached
    train_url, 1 when not (one line says why), 2 on bad input, 3 when the rehearsal cannot
    tell (the job uploads with a tool of its own).
    """
    from .rehearse import RehearsalOptions, run_rehearsal

    options = RehearsalOptions(script=script, nproc=nproc, nodes=nodes, data=data, obs=obs, python=python, timeout=timeout,
                               sigterm_after=sigterm_after, sigterm_on=sigterm_on, script_args=tuple(script_args),
                               job_dir=job_dir, code=code,
                               echo=None if quiet else sys.stderr)
    sys.exit(run_rehearsal(options))
