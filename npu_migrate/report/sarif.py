"""SARIF 2.1.0, the format GitHub code scanning (and other CI dashboards) read.

One run; `tool.driver.rules` documents every code (title, why, what to do, the rules' examples);
one result per finding with ruleId, level, message and a region. Artifact URIs are relative to
the report's root (`%SRCROOT%`, the folder npu-migrate ran in), as GitHub wants them. Files that could not be processed become
tool execution notifications. Rewrites are not results: they are what the tool does, shown by
--diff and listed in the JSON and CSV reports.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List
from urllib.parse import quote

from .. import __version__
from ..model import Severity
from . import RunReport, in_cell, json_text, register, with_suggestion

SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
INFORMATION_URI = "https://pypi.org/project/npu-migrate/"
LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


def artifact_uri(report: RunReport, path: str) -> Dict[str, str]:
    """A relative URI under %SRCROOT% when the file is below the report root, else file://."""
    shown = report.display_path(path)
    if os.path.isabs(shown):
        return {"uri": "file://" + quote(shown.replace(os.sep, "/"), errors="surrogateescape")}
    # (a file name that is not UTF-8: its bytes, percent-encoded)
    return {"uri": quote(shown.replace(os.sep, "/"), errors="surrogateescape"), "uriBaseId": "%SRCROOT%"}


def _rule_descriptor(report: RunReport, code: str) -> Dict[str, Any]:
    doc = report.rules.docs.get(code)
    entries = [r for r in report.rules.by_code(code) if r.kind == "finding"]
    title = doc.title if doc else (entries[0].message if entries else code)
    why = doc.why if doc and doc.why else title
    fix = doc.fix if doc else ""
    examples = [ex.flagged for r in entries for ex in r.examples if ex.flagged][:3]
    markdown = f"**{_md(title)}**\n\n{_md(why)}"
    text = why
    if fix:
        markdown += f"\n\n**What to do:** {_md(fix)}"
        text += f"\n\nWhat to do: {fix}"
    for ex in examples:
        markdown += "\n\nFlagged:\n\n```python\n" + ex.rstrip("\n") + "\n```"
    severities = {r.severity for r in entries}
    level = LEVEL[max(severities, key=lambda s: s.rank)] if severities else "note"
    return {
        "id": code,
        "name": code,
        "shortDescription": {"text": title},
        "fullDescription": {"text": why},
        "help": {"text": text, "markdown": markdown},
        "defaultConfiguration": {"level": level},
        "properties": {"tags": ["npu-migrate", _category(code)]},
    }


def _category(code: str) -> str:
    return {"0": "tool", "1": "rewrite", "2": "modelarts", "3": "cannot-migrate", "4": "advice"}.get(code[3], "other")


def _md(text: str) -> str:
    return text.replace("\n", " ")


def _target_properties(report: RunReport) -> Dict[str, Any]:
    """The torch_npu target of the run (targets/), as invocation properties."""
    if report.targets is None:
        return {}
    return {"properties": {"target": report.targets.to_dict(),
                           "targets": report.targets.targets_dict()}}  # torch_npu, CANN, MindSpore


@register("sarif")
def render_sarif(report: RunReport) -> str:
    used = sorted({f.code for r in report.results for f in r.findings})
    codes = sorted(set(report.rules.docs) | set(used)) if report.rules else used
    rules = [_rule_descriptor(report, code) for code in codes]
    index = {code: i for i, code in enumerate(codes)}
    results: List[Dict[str, Any]] = []
    notifications: List[Dict[str, Any]] = []
    for r in report.results:
        location = {"artifactLocation": artifact_uri(report, r.path)}
        if r.error:
            notifications.append({
                "level": "error",
                "message": {"text": f"{report.display_path(r.path)}: {r.error}"},
                "locations": [{"physicalLocation": location}],
            })
            continue
        for f in r.findings:
            message = with_suggestion(f.message, f.suggestion)
            region: Dict[str, int] = {
                "startLine": f.span.line,
                "startColumn": f.span.col,
                "endLine": max(f.span.end_line, f.span.line),
                "endColumn": f.span.end_col if f.span.end_line > f.span.line else max(f.span.end_col, f.span.col + 1),
            }
            if f.cell is not None:
                # A notebook's lines count per cell, not in its JSON file: the region was a wrong
                # line of the .ipynb. Code scanning needs a startLine, so the file's first; the
                # message says where (as the github format's annotation does).
                message = f"{in_cell(f'line {f.span.line}', f.cell, ', ')}: {message}"
                region = {"startLine": 1}
            result: Dict[str, Any] = {
                "ruleId": f.code,
                "ruleIndex": index[f.code],
                "level": LEVEL[f.severity],
                "message": {"text": message},
                "locations": [{"physicalLocation": {**location, "region": region}}],
                "properties": {"api": f.api},
            }
            if f.cell is not None:
                result["properties"]["cell"] = f.cell
            results.append(result)
    doc = {
        "$schema": SCHEMA_URI,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "npu-migrate",
                        "version": __version__,
                        "semanticVersion": __version__,
                        "informationUri": INFORMATION_URI,
                        "rules": rules,
                    }
                },
                "invocations": [
                    {
                        "executionSuccessful": not notifications,
                        "toolExecutionNotifications": notifications,
                        **_target_properties(report),
                    }
                ],
                "columnKind": "unicodeCodePoints",
                "results": results,
            }
        ],
    }
    return json_text(doc)
