"""The default, human-readable report: one line per finding (`path:line:col: CODE …`), then a
summary of what was (or would be) changed."""

from __future__ import annotations

from typing import List

from . import RunReport, register


def location(report: RunReport, path: str, line: int, col: int, cell=None) -> str:
    shown = report.display_path(path)
    if cell is not None:
        return f"{shown}:cell {cell}:{line}:{col}"
    return f"{shown}:{line}:{col}"


@register("text")
def render_text(report: RunReport) -> str:
    out: List[str] = []
    for r in report.results:
        if r.error:
            out.append(f"{report.display_path(r.path)}: {r.error}")
            continue
        if report.verbose:
            for e in r.edits:
                out.append(f"{location(report, r.path, e.span.line, e.span.col, e.cell)}: {e.code} {e.message}")
        if report.quiet:
            continue
        for f in r.findings:
            line = f"{location(report, r.path, f.span.line, f.span.col, f.cell)}: {f.code} [{f.severity.value}] {f.message}"
            if f.suggestion:
                line += f" -- {f.suggestion}"
            out.append(line)
    for u in report.unused_ignores:
        out.append(u)
    if not report.quiet:
        out.append(summary(report))
    return "\n".join(out) + ("\n" if out else "")


def summary(report: RunReport) -> str:
    n = len(report.results)
    changed = len(report.changed)
    failed = len(report.failed)
    skipped = sum(1 for r in report.results if r.skipped)
    unchanged = n - changed - failed - skipped
    verb = {"write": "migrated", "output-dir": "migrated"}.get(report.mode, "would be migrated")
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
        )
    findings = report.finding_counts()
    if findings:
        lines.append(
            f"{sum(findings.values())} finding{'s' if sum(findings.values()) != 1 else ''}: "
            + ", ".join(f"{code} x{count}" for code, count in sorted(findings.items()))
        )
    return "\n".join(lines)
