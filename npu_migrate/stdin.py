"""`npu-migrate - --stdin-filename train.py`: one file through stdin, for editors and pipes.

stdout carries the code (or, with --diff, the diff; with --check, nothing); the report goes to
stderr (or --output-file), so `npu-migrate - < a.py > b.py` works. `--stdin-filename` names the
file: it picks the front end (.ipynb, .sh, ...), is the path shown in findings and diffs, is where
the configuration search starts, and is what --force-exclude matches against. A file that is
excluded or marked @generated comes out exactly as it went in.

Exit codes as for files: 0, or 1 with --diff/--check when something would change (--check also
for findings at --fail-on), 2 when the input cannot be read or parsed. Plain `-` exits 0 when it
changed the code, as black does, so editors do not mistake a rewrite for a failure.

The text goes through the same run as files (pipeline.run with a StdinSource); this module
reads stdin, decodes it and prints what the run hands back.
"""

from __future__ import annotations

import hashlib
import sys
from typing import Any, List, Optional

import click

from .model import Severity, WriteBack
from .rules import RuleSet
from .settings import Settings


def run_stdin(settings: Settings, rules: RuleSet, project: Any, use_color: bool) -> int:
    from .console import EXIT_ERROR, emit_report
    from .diffs import colorize
    from .pipeline import StdinSource, run
    from .report import RENDERERS
    from .runner import decoder_for
    from .source import Source, SourceError

    name: Optional[str] = settings.stdin_filename
    shown = name or "stdin.py"
    mode = settings.mode
    try:
        data = read_bounded(sys.stdin.buffer)
    except SourceError as exc:  # nothing is printed in its place: the caller keeps its buffer
        click.echo(f"{shown}: {exc}", err=True)
        return EXIT_ERROR

    def passthrough() -> int:
        if mode is WriteBack.STDIN:
            _write_stdout(data)
        return 0

    file_filter = project.file_filter
    if name and settings.force_exclude and file_filter.excluded_path(name):
        if settings.verbose:
            click.echo(f"{name}: skipped: {file_filter.excluded_path(name)}", err=True)
        return passthrough()
    try:
        text, encoding = decoder_for(shown)(data, shown)
    except SourceError as exc:
        click.echo(f"{shown}: {exc}", err=True)
        if mode is WriteBack.STDIN:
            _write_stdout(data)  # never eat the user's buffer
        return EXIT_ERROR
    source = Source(shown, text, encoding, hashlib.sha256(data).hexdigest(), len(data), 0, 0)
    report = run(settings, rules, StdinSource(source), project, color=use_color)
    result = report.results[0]
    if settings.stats:
        from .work import most_work, summary

        for line in [summary([result.work]), *most_work([(shown, result.work)])]:
            click.echo(line, err=True)

    if settings.show_diff and settings.fmt == "markdown":
        emit_report(RENDERERS["markdown"](report), settings.output_file, err=False)
    else:
        if mode is WriteBack.STDIN:
            _write_stdout((result.new_text if result.new_text is not None else text).encode(encoding))
        elif mode is WriteBack.DIFF:
            diff = report.diffs.get(shown, "")
            click.echo(colorize(diff) if use_color else diff, nl=False, color=use_color)
        emit_report(RENDERERS[settings.fmt](report), settings.output_file, err=True)
    for line in report.notes:
        click.echo(line, err=True)

    for line in report.check_failure(Severity(settings.fail_on)):
        click.echo(line, err=True)
    return report.return_code(Severity(settings.fail_on))


def read_bounded(stream) -> bytes:
    """All of `stream`, refused past the limit files have (source.MAX_READ_BYTES): `npu-migrate -
    < /dev/zero` read without end and died of MemoryError (issue 30.7)."""
    from .source import MAX_READ_BYTES, SourceError, size_text

    chunks: List[bytes] = []
    total = 0
    while True:
        chunk = stream.read(min(1 << 20, MAX_READ_BYTES + 1 - total))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if total > MAX_READ_BYTES:
            raise SourceError(f"too large to read (over the limit of {size_text(MAX_READ_BYTES)})")


def _write_stdout(data: bytes) -> None:
    sys.stdout.buffer.write(data)
    sys.stdout.flush()
