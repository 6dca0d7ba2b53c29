"""What the command line prints besides the report, where reports go, and its exit codes.

Shared by cli.py (files) and stdin.py (one file through stdin); both sit above this module.
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn, Optional

import click

from .model import EXIT_CHANGES, EXIT_ERROR, EXIT_OK, EXIT_SIGINT, EXIT_SIGTERM  # noqa: F401 (for cli, stdin)


def fail(message: str) -> NoReturn:
    """`npu-migrate: error: <message>` on stderr, exit 2."""
    click.echo(f"npu-migrate: error: {message}", err=True)
    sys.exit(EXIT_ERROR)


def emit_report(rendered, output_file: Optional[str], err: bool) -> None:
    """A report to stdout/stderr or -o; a multi-file report (a dict) into the folder -o names."""
    if isinstance(rendered, dict):
        from .report import write_report_files

        assert output_file, "checked by writes_several_files before the run"
        try:
            written = write_report_files(rendered, output_file)
        except OSError as exc:
            fail(f"{output_file}: cannot write the report: {exc.strerror or exc}")
        for path in written:  # several files: say which (one -o FILE is where the user said)
            click.echo(f"npu-migrate: report written to {path}", err=True)
    elif output_file:
        if os.path.isdir(output_file):
            fail(f"{output_file}: is a folder; -o names the report file for this format")
        from .source import write_text_file

        try:
            write_text_file(output_file, rendered)
        except OSError as exc:
            fail(f"{output_file}: cannot write the report: {exc.strerror or exc}")
    else:
        click.echo(rendered, nl=False, err=err)
