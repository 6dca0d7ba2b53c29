"""JSON report: a stable, documented schema (see README "JSON output")."""

from __future__ import annotations

from .. import __version__
from . import RunReport, json_text, register

SCHEMA_VERSION = 1


@register("json")
def render_json(report: RunReport) -> str:
    files = []
    for r in report.results:
        files.append(
            {
                "path": report.display_path(r.path),
                "changed": r.changed,
                "error": r.error,
                "skipped": r.skipped,
                "edits": [
                    {
                        "code": e.code,
                        "line": e.span.line,
                        "column": e.span.col,
                        "end_line": e.span.end_line,
                        "end_column": e.span.end_col,
                        "cell": e.cell,
                        "message": e.message,
                        "before": e.before,
                        "after": e.after,
                    }
                    for e in r.edits
                ],
                "findings": [
                    {
                        "code": f.code,
                        "severity": f.severity.value,
                        "line": f.span.line,
                        "column": f.span.col,
                        "end_line": f.span.end_line,
                        "end_column": f.span.end_col,
                        "cell": f.cell,
                        "api": f.api,
                        "message": f.message,
                        "suggestion": f.suggestion,
                    }
                    for f in r.findings
                ],
            }
        )
    doc = {
        "tool": "npu-migrate",
        "version": __version__,
        "schema_version": SCHEMA_VERSION,
        "mode": report.mode,
        "summary": {
            "files": len(report.results),
            "changed": len(report.changed),
            "failed": len(report.failed),
            "edits": sum(len(r.edits) for r in report.results),
            "findings": sum(len(r.findings) for r in report.results),
        },
        "files": files,
    }
    if report.targets is not None:
        # which torch_npu release(s) the rewrites were checked against, and why (targets/)
        doc["target"] = report.targets.to_dict()
        doc["targets"] = report.targets.targets_dict()  # torch_npu, CANN, MindSpore
    return json_text(doc)
