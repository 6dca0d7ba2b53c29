"""CSV files in the layout of Huawei's msFmkTransplt, so its users' spreadsheets keep working.

* change_list.csv -- `File, Start Line, End Line, Operation Type, Message`: every rewrite
  (INSERT for added code such as `import torch_npu`, DELETE for removed code, MODIFY otherwise).
* unsupported_api.csv -- `File, Start Line, End Line, OP, Tips`: every finding, i.e. what is
  left to do by hand; Tips starts with the code and severity (`NPU301 error: …`) so a filter
  separates errors from advice.

The renderer returns {file name: content}; the CLI writes the files into a folder
(report.write_report_files). Every text cell is sanitised against spreadsheet formula injection: a value
starting with = + - @ % (or their full-width forms), a tab or a CR gets a leading apostrophe.
"""

from __future__ import annotations

import csv
import io
from typing import Dict, Iterable, List, Sequence

from . import RunReport, in_cell, register, with_suggestion

CHANGE_LIST = "change_list.csv"
UNSUPPORTED_API = "unsupported_api.csv"
CHANGE_HEADER = ("File", "Start Line", "End Line", "Operation Type", "Message")
UNSUPPORTED_HEADER = ("File", "Start Line", "End Line", "OP", "Tips")
_FORMULA_STARTS = ("=", "+", "-", "@", "%", "\t", "\r", "＝", "＋", "－", "＠", "％")


def sanitize(value: object) -> object:
    if isinstance(value, str) and value.startswith(_FORMULA_STARTS):
        return "'" + value
    return value


def _table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    for row in rows:
        writer.writerow([sanitize(v) for v in row])
    return buffer.getvalue()


def _file(report: RunReport, result, cell) -> str:
    shown = report.display_path(result.path)
    return shown if cell is None else f"{shown}:{in_cell('', cell)}"


def operation(edit) -> str:
    if not edit.before and edit.after:
        return "INSERT"
    if edit.before and not edit.after:
        return "DELETE"
    return "MODIFY"


@register("csv")
def render_csv(report: RunReport) -> Dict[str, str]:
    changes: List[Sequence[object]] = []
    unsupported: List[Sequence[object]] = []
    for r in report.results:
        for e in r.edits:
            changes.append((_file(report, r, e.cell), e.span.line, e.span.end_line, operation(e), e.message))
        for f in r.findings:
            tips = f"{f.code} {f.severity.value}: {with_suggestion(f.message, f.suggestion)}"
            unsupported.append((_file(report, r, f.cell), f.span.line, f.span.end_line, f.api, tips))
    return {
        CHANGE_LIST: _table(CHANGE_HEADER, changes),
        UNSUPPORTED_API: _table(UNSUPPORTED_HEADER, unsupported),
    }

