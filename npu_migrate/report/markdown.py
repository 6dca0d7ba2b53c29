"""Markdown for a pull-request comment: a summary, the findings as one table per file, and --
when the run computed diffs (`--diff --format markdown`) -- each file's diff in a ```diff block,
so one document shows what the tool changes and what is left to do by hand.
"""

from __future__ import annotations

import re
from typing import List

from ..model import Severity
from . import RunReport, in_cell, register

ICON = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "info"}


def cell(text: str) -> str:
    """Text safe inside a table cell: no pipes or line breaks, no stray HTML."""
    text = text.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
    return re.sub(r"\s*\n\s*", "<br>", text.strip())


def fence_for(text: str) -> str:
    """A backtick fence longer than any backtick run in `text`."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


@register("markdown")
def render_markdown(report: RunReport) -> str:
    out: List[str] = ["## npu-migrate report", ""]
    n = len(report.results)
    changed = len(report.changed)
    findings = sum(len(r.findings) for r in report.results)
    by_severity = {s: sum(1 for r in report.results for f in r.findings if f.severity is s) for s in Severity}
    verb = "migrated" if report.mode.writes else "to migrate"
    out.append(
        f"**{n}** file{'s' if n != 1 else ''} scanned, **{changed}** {verb}, "
        f"**{len(report.failed)}** failed; **{findings}** finding{'s' if findings != 1 else ''} "
        f"({by_severity[Severity.ERROR]} error, {by_severity[Severity.WARNING]} warning, "
        f"{by_severity[Severity.INFO]} info)."
    )
    counts = report.finding_counts()
    if counts:
        out += ["", "| Code | Count | What |", "|---|---:|---|"]
        for code, count in sorted(counts.items()):
            doc = report.rules.docs.get(code)
            out.append(f"| {code} | {count} | {cell(doc.title) if doc else ''} |")
    failed = [r for r in report.results if r.error]
    if failed:
        out += ["", "### Files not processed", ""]
        out += [f"- `{report.display_path(r.path)}`: {cell(r.error or '')}" for r in failed]
    with_findings = [r for r in report.results if r.findings]
    if with_findings:
        out += ["", "### Findings"]
        for r in with_findings:
            out += ["", f"#### `{report.display_path(r.path)}`", "",
                    "| Line | Code | Severity | Finding | Suggestion |", "|---:|---|---|---|---|"]
            for f in r.findings:
                where = in_cell(f"{f.span.line}:{f.span.col}", f.cell, ", ")
                out.append(f"| {where} | {f.code} | {ICON[f.severity]} | {cell(f.message)} | {cell(f.suggestion)} |")
    diffs = [(r, report.diffs[r.path]) for r in report.results if report.diffs.get(r.path)]
    if diffs:
        out += ["", "### Changes"]
        for r, diff in diffs:
            fence = fence_for(diff)
            edits = len(r.edits)
            out += ["", f"<details open><summary><code>{cell(report.display_path(r.path))}</code>: "
                        f"{edits} edit{'s' if edits != 1 else ''}</summary>", "",
                    f"{fence}diff", diff.rstrip("\n"), fence, "", "</details>"]
    return "\n".join(out) + "\n"
