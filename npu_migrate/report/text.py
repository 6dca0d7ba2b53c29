"""The default, human-readable report.

Plain (when not on a terminal, with NO_COLOR or --color never): one line per finding,
`path:line:col: CODE [severity] message -- suggestion`, which editors and grep understand,
then a summary. On a terminal (`report.color`): a table of findings per file and a table of
the findings by code, drawn with rich.
"""

from __future__ import annotations

import io
from collections import Counter
from typing import Dict, List, Tuple

from ..model import FileResult, Finding, Severity, WriteBack
from . import RunReport, in_cell, register

SEVERITY_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}


def location(report: RunReport, path: str, line: int, col: int, cell=None) -> str:
    return f"{report.display_path(path)}:{in_cell(f'{line}:{col}', cell)}"


def group_findings(findings: List[Finding]) -> List[List[Finding]]:
    """A file's findings grouped by code, API and text, in the order of their first location:
    the same finding repeated line after line is read once (JSON and SARIF keep each one)."""
    groups: Dict[Tuple, List[Finding]] = {}
    for f in findings:
        groups.setdefault((f.code, f.severity, f.api, f.message, f.suggestion), []).append(f)
    return list(groups.values())


def _where(f: Finding) -> str:
    return in_cell(f"{f.span.line}", f.cell)


def repeats(group: List[Finding]) -> str:
    """` (3 times: lines 4, 9, 17)` for a group of more than one finding, else ``."""
    if len(group) == 1:
        return ""
    return f" ({len(group)} times: lines {', '.join(_where(f) for f in group)})"


@register("text")
def render_text(report: RunReport) -> str:
    if report.color:
        return render_rich(report)
    out: List[str] = []
    for r in report.results:
        if r.error:
            out.append(f"{report.display_path(r.path)}: {r.error}")
            # ... and the findings it still has (a pass that failed does not hide the others')
        if report.verbose:
            for e in r.edits:
                out.append(f"{location(report, r.path, e.span.line, e.span.col, e.cell)}: {e.code} {e.message}")
        if report.quiet:
            continue
        for group in group_findings(r.findings):
            f = group[0]
            line = (f"{location(report, r.path, f.span.line, f.span.col, f.cell)}: {f.code} [{f.severity.value}] "
                    f"{f.message}{repeats(group)}")
            if f.suggestion:
                line += f" -- {f.suggestion}"
            out.append(line)
    if not report.quiet:
        out.append(summary(report))
    return "\n".join(out) + ("\n" if out else "")


def summary(report: RunReport) -> str:
    n = len(report.results)
    changed = len(report.changed)
    failed = len(report.failed)
    skipped = sum(1 for r in report.results if r.skipped)
    unchanged = n - changed - failed - skipped
    # stdin mode printed the migrated code: it was migrated, not "would be".
    verb = "migrated" if report.mode.writes or report.mode is WriteBack.STDIN else "would be migrated"
    parts = [
        f"{n} file{'s' if n != 1 else ''} scanned",
        f"{changed} {verb}",
        f"{unchanged} unchanged",
    ]
    if skipped:
        parts.append(f"{skipped} skipped")
    parts.append(f"{failed} failed")
    lines = [", ".join(parts) + "."]
    edits = report.edit_counts()
    if edits:
        lines.append(
            f"{sum(edits.values())} edit{'s' if sum(edits.values()) != 1 else ''}: "
            + ", ".join(f"{code} x{count}" for code, count in sorted(edits.items()))
            + _not_written(report)
        )
    findings = report.finding_counts()
    if report.targets is not None and (edits or findings):
        # which torch_npu release(s) the rewrites were checked against, and why (targets/)
        lines[1:1] = report.target_lines()
    if findings:
        lines.append(
            f"{sum(findings.values())} finding{'s' if sum(findings.values()) != 1 else ''}: "
            + ", ".join(f"{code} x{count}" for code, count in sorted(findings.items()))
        )
    return "\n".join(lines)


def _not_written(report: RunReport) -> str:
    """A run that writes counts the edits of a file whose write failed (a read-only file) too:
    say they are not in the file, or "0 migrated, 1 failed. 6 edits" reads as six made."""
    lost = sum(len(r.edits) for r in report.failed)
    if not (report.mode.writes and lost):
        return ""
    return f" ({lost} of them in failed files, not written)"


# ----------------------------------------------------------------------------- terminal


def render_rich(report: RunReport, width: int = 0) -> str:
    # rich (and shutil) is imported here only: the plain report (CI logs, pipes) does not pay for it.
    import shutil

    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    buffer = io.StringIO()
    console = Console(
        file=buffer,
        force_terminal=True,
        color_system="standard",
        width=width or shutil.get_terminal_size((100, 24)).columns,
        highlight=False,
        emoji=False,
    )
    for r in report.results:
        if r.error:
            console.print(Text.assemble((report.display_path(r.path), "bold"), ": ", (r.error, "red")))
        if report.verbose:
            for e in r.edits:
                console.print(
                    Text(f"{location(report, r.path, e.span.line, e.span.col, e.cell)}: {e.code} {e.message}", "dim")
                )
        if report.quiet or not r.findings:
            continue
        console.print(_file_table(report, r, Table, Text))
    if not report.quiet:
        console.print(summary(report))
        counts = report.finding_counts()
        if counts:
            console.print(_code_table(report, counts, Table, Text))
    return buffer.getvalue()


def _file_table(report: RunReport, r: FileResult, Table, Text):
    table = Table(title=report.display_path(r.path), title_justify="left", title_style="bold",
                  show_edge=False, pad_edge=False, expand=False)
    table.add_column("Line:Col", justify="right", no_wrap=True)
    table.add_column("Code", no_wrap=True)
    table.add_column("Severity", no_wrap=True)
    table.add_column("Finding")
    for group in group_findings(r.findings):
        f = group[0]
        where = in_cell(f"{f.span.line}:{f.span.col}", f.cell, " ")
        text = Text(f.message + repeats(group))
        if f.suggestion:
            text.append("\n" + f.suggestion, style="dim")
        table.add_row(where, f.code, Text(f.severity.value, SEVERITY_STYLE[f.severity]), text)
    return table


def _code_table(report: RunReport, counts: Counter, Table, Text):
    severities: Dict[str, Severity] = {}
    for r in report.results:
        for f in r.findings:
            if f.code not in severities or f.severity.rank > severities[f.code].rank:
                severities[f.code] = f.severity
    table = Table(title="Findings by code", title_justify="left", title_style="bold",
                  show_edge=False, pad_edge=False)
    table.add_column("Code", no_wrap=True)
    table.add_column("Count", justify="right")
    table.add_column("Worst", no_wrap=True)
    table.add_column("What")
    for code, count in sorted(counts.items()):
        doc = report.rules.docs.get(code)
        sev = severities[code]
        table.add_row(code, str(count), Text(sev.value, SEVERITY_STYLE[sev]), doc.title if doc else "")
    return table
