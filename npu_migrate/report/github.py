"""GitHub Actions workflow commands: one annotation per finding, shown on the pull request's diff.

`::error file=F,line=L,col=C,endLine=L2,endColumn=C2,title=T::message` (warning / notice for the
other severities). Values are escaped as the workflow-command rules require: `%`, CR and LF in
the message; additionally `:` and `,` in property values.
"""

from __future__ import annotations

from typing import List

from ..model import Severity
from . import RunReport, in_cell, register

COMMAND = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(command: str, message: str, **properties) -> str:
    props = ",".join(f"{key}={escape_property(str(value))}" for key, value in properties.items() if value is not None)
    return f"::{command} {props}::{escape_data(message)}" if props else f"::{command}::{escape_data(message)}"


@register("github")
def render_github(report: RunReport) -> str:
    out: List[str] = []
    for r in report.results:
        path = report.display_path(r.path)
        if r.error:
            out.append(annotation("error", r.error, file=path, title="npu-migrate: file not processed"))
            continue
        for f in r.findings:
            message = f.message + (f"\n{f.suggestion}" if f.suggestion else "")
            if f.cell is not None:
                message = f"{in_cell(f'line {f.span.line}', f.cell, ', ')}: {message}"
            out.append(
                annotation(
                    COMMAND[f.severity],
                    message,
                    file=path,
                    # A notebook's lines are per cell: annotate the file, not a wrong line.
                    line=f.span.line if f.cell is None else None,
                    col=f.span.col if f.cell is None else None,
                    endLine=f.span.end_line if f.cell is None else None,
                    endColumn=f.span.end_col if f.cell is None else None,
                    title=f"npu-migrate {f.code}",
                )
            )
    return "\n".join(out) + ("\n" if out else "")
