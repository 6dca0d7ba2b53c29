"""The `npu-migrate` command line: options -> Options -> run -> render -> exit code.

Exit codes (like black and ruff):
  0  nothing to do, or everything done;
  1  with --check: something would change, or a finding at/above --fail-on exists;
     with --diff: something would change;
  2  usage or configuration error, or a file that could not be processed (after all others);
  130 / 143  interrupted by Ctrl-C / SIGTERM (files are either fully old or fully new).
"""

from __future__ import annotations

import difflib
import os
import signal
import sys
from pathlib import Path
from typing import List, Optional, Sequence

import click

from . import __version__
from .model import FileResult, Options, Severity
from .rules import RuleError, RuleSet, load_rules

EXIT_OK, EXIT_CHANGES, EXIT_ERROR, EXIT_SIGINT, EXIT_SIGTERM = 0, 1, 2, 130, 143


class Interrupted(Exception):
    def __init__(self, code: int) -> None:
        self.code = code


class DefaultGroup(click.Group):
    """`npu-migrate PATH…` migrates; `npu-migrate rules` / `explain CODE` are subcommands."""

    def parse_args(self, ctx: click.Context, args: List[str]) -> List[str]:
        if not args or args[0] not in self.commands:
            args = ["migrate", *args]
        return super().parse_args(ctx, args)


@click.group(cls=DefaultGroup, context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """npu-migrate: migrate CUDA training code to Ascend NPUs."""


def unified_diff(path: str, before: str, after: str, display: str) -> str:
    a = before.splitlines(keepends=True)
    b = after.splitlines(keepends=True)
    lines = []
    for line in difflib.unified_diff(a, b, f"a/{display}", f"b/{display}", n=3):
        if not line.endswith("\n"):
            line += "\n\\ No newline at end of file\n"
        lines.append(line)
    return "".join(lines)


def colorize_diff(diff: str) -> str:
    out = []
    for line in diff.splitlines(keepends=True):
        if line.startswith(("+++", "---")):
            out.append(click.style(line, bold=True))
        elif line.startswith("@@"):
            out.append(click.style(line, fg="cyan"))
        elif line.startswith("+"):
            out.append(click.style(line, fg="green"))
        elif line.startswith("-"):
            out.append(click.style(line, fg="red"))
        else:
            out.append(line)
    return "".join(out)


def use_color(choice: str, stream) -> bool:
    if choice == "always":
        return True
    if choice == "never" or os.environ.get("NO_COLOR"):
        return False
    return hasattr(stream, "isatty") and stream.isatty()


def _install_signal_handlers() -> None:
    def on_term(signum, frame):  # pragma: no cover - exercised in a subprocess test
        raise Interrupted(EXIT_SIGTERM)

    try:
        signal.signal(signal.SIGTERM, on_term)
    except ValueError:  # not in the main thread
        pass


@main.command("migrate", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("paths", nargs=-1, type=click.Path(path_type=str))
@click.option("--write", "-w", is_flag=True, help="Rewrite the files in place.")
@click.option("--diff", "show_diff", is_flag=True, help="Print a unified diff; write nothing (exit 1 if anything would change).")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 if anything would change or a finding at --fail-on exists.")
@click.option("--fail-on", type=click.Choice(["error", "warning", "info"]), default="error", show_default=True,
              help="With --check: the lowest finding severity that fails.")
@click.option("--format", "fmt", default="text", show_default=True, help="Report format: text, json, sarif, github, markdown, csv.")
@click.option("--output-file", "-o", type=click.Path(dir_okay=False, path_type=str), help="Write the report to this file instead of stdout.")
@click.option("--rules", "rule_files", multiple=True, type=click.Path(dir_okay=False, path_type=str), help="An extra rule file (TOML); repeatable.")
@click.option("--framework", type=click.Choice(["auto", "torch", "tensorflow", "mindspore"]), default="auto", show_default=True,
              help="Which framework's rules to apply; auto decides per file from its imports.")
@click.option("--no-import", "no_import", is_flag=True, help="Do not add `import torch_npu`.")
@click.option("--modelarts", is_flag=True, help="Adapt entry scripts for ModelArts (--data_url/--train_url, OBS copies).")
@click.option("--entry", "entries", multiple=True, type=click.Path(path_type=str), help="With --modelarts: treat this file as an entry script; repeatable.")
@click.option("--modelarts-resume", is_flag=True, help="With --modelarts: copy checkpoints found under train_url back at start.")
@click.option("--modelarts-data-dir", default="/cache/data", show_default=True, help="Where OBS input data is copied to.")
@click.option("--modelarts-output-dir", default="/cache/output", show_default=True, help="Default local output folder copied to train_url.")
@click.option("--data-arg", default="", help="The script's own data-path argument (when not --data/--data_dir/…).")
@click.option("--output-arg", default="", help="The script's own output-folder argument (when not --output_dir/--save_dir/…).")
@click.option("--jobs", "-j", type=click.IntRange(min=0), default=0, help="Worker processes (default: all cores; 1 runs in-process).")
@click.option("--stdin-filename", help="With `-`: the name of the file read from stdin.")
@click.option("--color", type=click.Choice(["auto", "always", "never"]), default="auto", show_default=True)
@click.option("--quiet", "-q", is_flag=True, help="Print errors only.")
@click.option("--verbose", "-v", is_flag=True, help="Print every edit.")
@click.version_option(__version__, "--version", prog_name="npu-migrate")
def migrate_command(paths, write, show_diff, check, fail_on, fmt, output_file, rule_files, framework, no_import,
                    modelarts, entries, modelarts_resume, modelarts_data_dir, modelarts_output_dir, data_arg,
                    output_arg, jobs, stdin_filename, color, quiet, verbose) -> None:
    """Migrate CUDA (GPU) training code in PATHS to Ascend NPU.

    \b
    npu-migrate train.py              report what would change (writes nothing)
    npu-migrate src/ --diff           show the changes as a unified diff
    npu-migrate src/ --check          fail (exit 1) if anything is left to migrate
    npu-migrate src/ --write          rewrite the files in place
    npu-migrate - --stdin-filename train.py < train.py

    Other commands: `npu-migrate rules` lists every code; `npu-migrate explain NPU301`.
    """
    from .report import RENDERERS, RunReport, load_renderers

    load_renderers()
    if fmt not in RENDERERS:
        raise click.BadParameter(f"unknown format {fmt!r}; choose from {', '.join(sorted(RENDERERS))}", param_hint="--format")
    if not paths:
        raise click.UsageError("no paths given (use `-` to read from stdin)")
    if write and (show_diff or check):
        raise click.UsageError("--write cannot be combined with --diff or --check")
    try:
        rules = load_rules(rule_files)
    except RuleError as exc:
        click.echo(f"npu-migrate: error: {exc}", err=True)
        sys.exit(EXIT_ERROR)
    options = Options(
        framework=framework,
        modelarts=modelarts,
        modelarts_entry_files=tuple(os.path.abspath(e) for e in entries),
        modelarts_resume=modelarts_resume,
        data_dir=modelarts_data_dir,
        output_dir=modelarts_output_dir,
        data_arg=data_arg,
        output_arg=output_arg,
        add_import=not no_import,
    )
    if paths == ("-",):
        sys.exit(_run_stdin(stdin_filename or "stdin.py", options, rules, fmt, quiet))
    if "-" in paths:
        raise click.UsageError("`-` (stdin) cannot be mixed with other paths")

    from .discovery import discover
    from .runner import default_jobs, run
    from .source import SourceError, write_source

    files, errors = discover(paths)
    for e in errors:
        click.echo(f"npu-migrate: error: {e}", err=True)
    if errors and not files:
        sys.exit(EXIT_ERROR)
    mode = "write" if write else "diff" if show_diff else "check" if check else "report"
    _install_signal_handlers()
    try:
        outcomes = run(files, options, rules, rule_files, jobs=jobs or default_jobs())
        report = RunReport(results=[o.result for o in outcomes], rules=rules, mode=mode,
                           color=use_color(color, sys.stdout), verbose=verbose, quiet=quiet)
        if write:
            for o in outcomes:
                if o.result.changed and o.source is not None:
                    try:
                        write_source(o.source, o.result.new_text)
                    except SourceError as exc:
                        o.result.error = str(exc)
                        o.result.new_text = None
        for o in outcomes:
            if o.result.changed and o.original_text is not None:
                report.diffs[o.result.path] = unified_diff(
                    o.result.path, o.original_text, o.result.new_text,
                    Path(report.display_path(o.result.path)).as_posix().lstrip("/"),
                )
    except KeyboardInterrupt:
        click.echo("npu-migrate: interrupted; every file is either unchanged or fully migrated", err=True)
        sys.exit(EXIT_SIGINT)
    except Interrupted as exc:
        click.echo("npu-migrate: terminated; every file is either unchanged or fully migrated", err=True)
        sys.exit(exc.code)

    if show_diff and fmt == "text":
        text = "".join(report.diffs[r.path] for r in report.results if r.path in report.diffs)
        click.echo(colorize_diff(text) if report.color else text, nl=False, color=report.color)
        # Findings and the summary go to stderr so the diff stays applicable.
        click.echo(RENDERERS["text"](report), nl=False, err=True)
    else:
        rendered = RENDERERS[fmt](report)
        if output_file:
            Path(output_file).write_text(rendered, encoding="utf-8")
        else:
            click.echo(rendered, nl=False)
    sys.exit(exit_code(report, mode, Severity(fail_on)))


def exit_code(report, mode: str, fail_on: Severity) -> int:
    if report.failed:
        return EXIT_ERROR
    if mode == "diff" and report.changed:
        return EXIT_CHANGES
    if mode == "check" and (report.changed or report.findings_at_least(fail_on)):
        return EXIT_CHANGES
    return EXIT_OK


def _run_stdin(filename: str, options: Options, rules: RuleSet, fmt: str, quiet: bool) -> int:
    """Read one file from stdin, print the migrated text to stdout and findings to stderr."""
    from .engine import migrate_source
    from .report import RENDERERS, RunReport
    from .runner import decoder_for
    from .source import SourceError

    data = sys.stdin.buffer.read()
    try:
        text, encoding = decoder_for(filename)(data, filename)
    except SourceError as exc:
        click.echo(f"{filename}: {exc}", err=True)
        sys.stdout.buffer.write(data)
        return EXIT_ERROR
    result = migrate_source(text, filename, options, rules)
    out = result.new_text if result.changed else text
    sys.stdout.buffer.write(out.encode(encoding))
    sys.stdout.flush()
    report = RunReport(results=[result], rules=rules, mode="stdin", quiet=quiet)
    click.echo(RENDERERS["text"](report), nl=False, err=True)
    return EXIT_ERROR if result.error else EXIT_OK


@main.command("rules")
@click.option("--rules", "rule_files", multiple=True, type=click.Path(dir_okay=False, path_type=str))
def rules_command(rule_files) -> None:
    """List every code: what it reports (rewrite or severity) and its title."""
    from .explain import list_codes

    try:
        rules = load_rules(rule_files)
    except RuleError as exc:
        click.echo(f"npu-migrate: error: {exc}", err=True)
        sys.exit(EXIT_ERROR)
    click.echo(list_codes(rules), nl=False)


@main.command("explain")
@click.argument("code")
@click.option("--rules", "rule_files", multiple=True, type=click.Path(dir_okay=False, path_type=str))
def explain_command(code, rule_files) -> None:
    """Show the documentation of a rule code, with its examples."""
    try:
        rules = load_rules(rule_files)
    except RuleError as exc:
        click.echo(f"npu-migrate: error: {exc}", err=True)
        sys.exit(EXIT_ERROR)
    from .explain import explain

    text = explain(rules, code)
    if text is None:
        click.echo(f"npu-migrate: error: unknown code {code.upper()}; `npu-migrate rules` lists them", err=True)
        sys.exit(EXIT_ERROR)
    click.echo(text, nl=False)
