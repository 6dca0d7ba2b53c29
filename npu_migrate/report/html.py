"""The review page: one self-contained HTML file (`--format html -o review.html`).

What a reviewer of a migration wants first is the summary (files, edits and findings by code and
severity, the targets, the command), then each file's diff with its findings at their lines, and
the documentation of every code shown (codedocs.py) -- in one file that opens offline, from a
mail attachment or a CI artifact: no network, no external script, style or font.

Without JavaScript the page is complete and static (every file, table and diff is in the HTML;
files are collapsed `<details>`). The embedded script adds the filters (code, severity, folder,
search), the side-by-side view of a diff (built from the unified rows when asked) and opening the
file a link points at. Every row of a file's table has a stable anchor, `#file=<path>&line=<n>`
(`&cell=<n>` in notebooks), the id itself, so a review comment can link to a finding with or
without the script.
"""

from __future__ import annotations

import html
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Tuple
from urllib.parse import quote

from .. import __version__
from ..diffs import patch_path
from ..model import FileResult
from . import RunReport, in_cell, register

_KINDS = ("error", "warning", "info", "rewrite")  # the "severity" of a row; edits are rewrites
# Files whose diff is longer than this many lines start with the diff hidden behind a button
# (its rows are still in the page): a browser lays out only what is open.
_LONG_DIFF = 400


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


_TICKS = re.compile(r"`([^`\n]+)`")


def prose(text: str) -> str:
    """A message, suggestion or doc text: escaped, with its `code spans` as <code>."""
    return _TICKS.sub(r"<code>\1</code>", esc(text))


def anchor(path: str, line: int, cell: Optional[int] = None) -> str:
    """The id (and link fragment) of a row: `file=<path>&line=<n>`, `&cell=<n>` before the line
    in a notebook. The path is percent-encoded but for `/`, so the id holds no space."""
    where = f"&cell={cell}" if cell is not None else ""
    return f"file={quote(path, safe='/')}{where}&line={line}"


def file_anchor(path: str) -> str:
    return f"file={quote(path, safe='/')}"


@dataclass
class Row:
    """One edit or finding in a file's table."""

    kind: str  # error | warning | info | rewrite
    code: str
    line: int
    col: int
    cell: Optional[int]
    message: str
    suggestion: str = ""
    before: str = ""
    after: str = ""

    @property
    def sort_key(self) -> Tuple[int, int, int, int]:
        return (self.cell or 0, self.line, self.col, _KINDS.index(self.kind))


def _rows(result: FileResult) -> List[Row]:
    rows = [Row("rewrite", e.code, e.span.line, e.span.col, e.cell, e.message, before=e.before, after=e.after)
            for e in result.edits]
    rows += [Row(f.severity.value, f.code, f.span.line, f.span.col, f.cell, f.message, f.suggestion)
             for f in result.findings]
    return sorted(rows, key=lambda r: r.sort_key)


# ----------------------------------------------------------------------------- diffs


@dataclass
class DiffLine:
    kind: str  # context | add | del | hunk | note
    text: str
    old: Optional[int] = None
    new: Optional[int] = None


@dataclass
class FileDiff:
    name: str  # the b/ name of the patch (or the a/ name of a deletion)
    created: bool = False
    lines: List[DiffLine] = field(default_factory=list)


_HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@")


def parse_diff(text: str) -> List[FileDiff]:
    """The unified diff of a file (and of the files generated beside it) as rows with their line
    numbers in the old and the new text."""
    out: List[FileDiff] = []
    old = new = 0
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            created = line[4:].split("\t")[0] == "/dev/null"
            name = lines[i + 1][4:].split("\t")[0]
            out.append(FileDiff(_strip_prefix(name), created))
            i += 2
            continue
        if not out:
            i += 1
            continue
        current = out[-1]
        m = _HUNK.match(line)
        if m:
            old, new = int(m.group(1)), int(m.group(2))
            current.lines.append(DiffLine("hunk", line))
        elif line.startswith("+"):
            current.lines.append(DiffLine("add", line[1:], new=new))
            new += 1
        elif line.startswith("-"):
            current.lines.append(DiffLine("del", line[1:], old=old))
            old += 1
        elif line.startswith(" "):
            current.lines.append(DiffLine("context", line[1:], old=old, new=new))
            old += 1
            new += 1
        elif line.startswith("\\"):
            current.lines.append(DiffLine("note", line))
        i += 1
    return out


def _strip_prefix(name: str) -> str:
    if name.startswith('"') and name.endswith('"'):
        name = name[1:-1]
    return name[2:] if name.startswith(("a/", "b/")) else name


# ----------------------------------------------------------------------------- the page


@register("html")
def render_html(report: RunReport) -> str:
    shown = [r for r in report.results if r.changed or r.findings or r.edits or r.error or r.extra_files
             or report.diffs.get(r.path)]
    quiet = [r for r in report.results if r not in shown]
    codes = sorted(set(report.edit_counts()) | set(report.finding_counts()))
    parts = [_HEAD.replace("{title}", esc(_title(report))), _header(report), _summary(report),
             _filters(report, shown, codes), '<section aria-labelledby="files-h"><h2 id="files-h">Files</h2>',
             '<p id="none-shown" hidden>No file matches the filters.</p>']
    for r in shown:
        parts.append(_file(report, r))
    if quiet:
        parts.append(_quiet(report, quiet))
    parts.append("</section>")
    parts.append(_code_pages(report, codes))
    parts.append(f'<footer><p>Made by npu-migrate {esc(__version__)}. This page works offline; its filters need '
                 'JavaScript, everything else is plain HTML.</p></footer></main>')
    parts.append(f"<script>{_SCRIPT}</script></body></html>\n")
    return "\n".join(parts)


def _title(report: RunReport) -> str:
    return f"npu-migrate review: {len(report.changed)} of {len(report.results)} files to migrate"


def _verb(report: RunReport) -> str:
    return "migrated" if report.mode.writes else "to migrate"


def _header(report: RunReport) -> str:
    out = ['<header>', '<h1>npu-migrate review</h1>', '<dl class="meta">']
    command = " ".join(_shell_word(a) for a in report.command) if report.command else ""
    if command:
        out.append(f"<dt>Command</dt><dd><code>{esc(command)}</code></dd>")
    out.append(f"<dt>Mode</dt><dd>{esc(report.mode)}</dd>")
    for line in report.target_lines():
        label, _, rest = line.partition(": ")
        out.append(f"<dt>{esc(label or 'Target')}</dt><dd>{esc(rest.rstrip('.') or line)}</dd>")
    out.append(f"<dt>Tool</dt><dd>npu-migrate {esc(__version__)}</dd>")
    out.append("</dl></header>")
    out.append("<main>")
    return "\n".join(out)


def _shell_word(word: str) -> str:
    return word if re.fullmatch(r"[\w@%+=:,./-]+", word) else "'" + word.replace("'", "'\\''") + "'"


def _summary(report: RunReport) -> str:
    results = report.results
    edits = report.edit_counts()
    findings = report.finding_counts()
    by_severity = Counter(f.severity.value for r in results for f in r.findings)
    generated = sum(len(r.extra_files) for r in results)
    cards = [("files scanned", len(results)), (f"files {_verb(report)}", len(report.changed)),
             ("files failed", len(report.failed)), ("edits", sum(edits.values())),
             ("findings", sum(findings.values()))]
    if generated:
        cards.append(("files generated", generated))
    out = ['<section aria-labelledby="summary-h"><h2 id="summary-h">Summary</h2>', '<ul class="cards">']
    out += [f'<li><span class="num">{n:,}</span> {esc(label)}</li>' for label, n in cards]
    out.append("</ul>")
    out.append('<div class="charts">')
    if findings:
        out.append(_chart("Findings by severity", [(s, by_severity.get(s, 0), None) for s in ("error", "warning",
                                                                                                  "info")]))
    if findings:
        out.append(_chart("Findings by code", [(c, n, _kind_of_code(report, c)) for c, n in findings.most_common()],
                          link=True, titles=report))
    if edits:
        out.append(_chart("Edits by code", [(c, n, "rewrite") for c, n in edits.most_common()], link=True,
                          titles=report))
    out.append("</div>")
    failed = report.failed
    if failed or report.path_errors:
        out.append('<h3>Not processed</h3><ul class="errors">')
        out += [f'<li><a href="#{esc(file_anchor(report.display_path(r.path)))}">'
                f'{esc(report.display_path(r.path))}</a>: {esc(r.error)}</li>' for r in failed]
        out += [f"<li>{esc(e)}</li>" for e in report.path_errors]
        out.append("</ul>")
    if report.notes:
        out.append('<h3>Generated files and notes</h3><ul class="notes">')
        out += [f"<li>{esc(n)}</li>" for n in report.notes]
        out.append("</ul>")
    out.append("</section>")
    return "\n".join(out)


def _kind_of_code(report: RunReport, code: str) -> str:
    ranks = [f.severity for r in report.results for f in r.findings if f.code == code]
    return max(ranks, key=lambda s: s.rank).value if ranks else "info"


def _chart(title: str, bars: Sequence[Tuple[str, int, Optional[str]]], link: bool = False,
           titles: Optional[RunReport] = None) -> str:
    """A small bar chart as a table: the numbers are text, the bars are CSS (aria-hidden)."""
    top = max((n for _, n, _ in bars), default=0) or 1
    slug = re.sub(r"\W+", "-", title.lower())
    out = [f'<table class="chart" aria-labelledby="{slug}"><caption id="{slug}">{esc(title)}</caption>',
           '<thead><tr><th scope="col">What</th><th scope="col">Count</th><th scope="col">'
           '<span class="visually-hidden">Bar</span></th></tr></thead><tbody>']
    for name, n, kind in bars:
        label = f'<a href="#code-{esc(name)}">{esc(name)}</a>' if link else esc(name)
        if link and titles is not None:
            doc = titles.rules.docs.get(name)
            if doc is not None:
                label += f' <span class="title">{prose(doc.title)}</span>'
        css = kind or name
        width = max(1, round(100 * n / top)) if n else 0
        out.append(f'<tr><th scope="row">{label}</th><td class="n">{n:,}</td><td class="bar-cell" aria-hidden="true">'
                   f'<span class="bar k-{esc(css)}" style="width:{width}%"></span></td></tr>')
    out.append("</tbody></table>")
    return "\n".join(out)


def _folders(report: RunReport, results: Iterable[FileResult]) -> List[str]:
    folders = set()
    for r in results:
        parts = report.display_path(r.path).replace(os.sep, "/").split("/")[:-1]
        for i in range(1, min(len(parts), 3) + 1):
            folders.add("/".join(parts[:i]))
    return sorted(folders)


def _filters(report: RunReport, shown: List[FileResult], codes: List[str]) -> str:
    """The filter form; hidden until the script shows it (it does nothing without the script)."""
    folders = _folders(report, shown)
    out = ['<form id="filters" class="filters" hidden aria-label="Filters" onsubmit="return false">',
           '<fieldset><legend>Show</legend>']
    for kind in _KINDS:
        label = "edits" if kind == "rewrite" else kind
        out.append(f'<label><input type="checkbox" name="kind" value="{kind}" checked> {label}</label>')
    out.append("</fieldset>")
    out.append('<label for="f-code">Code</label><select id="f-code"><option value="">all codes</option>')
    out += [f'<option value="{esc(c)}">{esc(c)}</option>' for c in codes]
    out.append("</select>")
    out.append('<label for="f-folder">Folder</label><select id="f-folder"><option value="">all folders</option>')
    out += [f'<option value="{esc(f)}/">{esc(f)}/</option>' for f in folders]
    out.append("</select>")
    out.append('<label for="f-search">Search</label><input id="f-search" type="search" '
               'placeholder="path, message, API…">')
    out.append('<fieldset><legend>Diffs</legend>'
               '<label><input type="radio" name="view" value="unified" checked> unified</label>'
               '<label><input type="radio" name="view" value="split"> side by side</label></fieldset>')
    out.append('<p id="shown-count" role="status" aria-live="polite"></p></form>')
    return "\n".join(out)


def _file(report: RunReport, r: FileResult) -> str:
    path = report.display_path(r.path).replace(os.sep, "/")
    rows = _rows(r)
    kinds = Counter(row.kind for row in rows)
    codes = sorted({row.code for row in rows})
    badges = []
    if r.error:
        badges.append('<span class="badge k-error">failed</span>')
    for kind in _KINDS:
        if kinds.get(kind):
            word = "edit" if kind == "rewrite" else kind
            badges.append(f'<span class="badge k-{kind}">{kinds[kind]} {word}{"s" if kinds[kind] != 1 else ""}</span>')
    if r.extra_files:
        badges.append(f'<span class="badge k-generated">{len(r.extra_files)} generated</span>')
    is_open = " open" if len(report.results) <= 20 else ""
    out = [f'<section class="file" id="{esc(file_anchor(path))}" data-path="{esc(path)}" '
           f'data-codes="{esc(" ".join(codes))}" data-kinds="{esc(" ".join(sorted(kinds)))}">',
           f'<details{is_open}><summary><h3>{esc(path)}</h3> {" ".join(badges)}</summary>']
    if r.error:
        out.append(f'<p class="error-text">Not processed: {esc(r.error)}</p>')
    if r.extra_files:
        out.append("<p>Generated beside it:</p><ul>")
        out += [f"<li><code>{esc(report.display_path(p))}</code> (generated by npu-migrate)</li>"
                for p in sorted(r.extra_files)]
        out.append("</ul>")
    if rows:
        out.append(_table(path, rows))
    diff = report.diffs.get(r.path)
    if diff:
        out.append(_diff(path, diff, [row for row in rows if row.cell is None]))
    out.append("</details></section>")
    return "\n".join(out)


def _table(path: str, rows: List[Row]) -> str:
    out = ['<table class="rows"><caption class="visually-hidden">Edits and findings</caption>',
           '<thead><tr><th scope="col">Where</th><th scope="col">Code</th><th scope="col">Kind</th>'
           '<th scope="col">What</th></tr></thead><tbody>']
    seen = set()
    for row in rows:
        key = anchor(path, row.line, row.cell)
        ident = f' id="{esc(key)}"' if key not in seen else ""
        seen.add(key)
        where = in_cell(f"{row.line}:{row.col}", row.cell, ", ")
        what = prose(row.message)
        if row.kind == "rewrite" and row.after:
            change = f'<code class="del">{esc(row.before)}</code> → ' if row.before else ""
            what += f'<br>{change}<code class="add">{esc(row.after)}</code>'
        if row.suggestion:
            what += f'<br><span class="suggestion">{prose(row.suggestion)}</span>'
        word = "edit" if row.kind == "rewrite" else row.kind
        out.append(f'<tr{ident} class="row" data-kind="{row.kind}" data-code="{esc(row.code)}">'
                   f'<td><a href="#{esc(key)}">{esc(where)}</a></td>'
                   f'<td><a href="#code-{esc(row.code)}">{esc(row.code)}</a></td>'
                   f'<td><span class="badge k-{row.kind}">{word}</span></td><td>{what}</td></tr>')
    out.append("</tbody></table>")
    return "\n".join(out)


def _diff(path: str, text: str, rows: List[Row]) -> str:
    at_line: Dict[int, List[Row]] = {}
    for row in rows:
        at_line.setdefault(row.line, []).append(row)
    out = []
    for fd in parse_diff(text):
        own = fd.name == patch_path(path)
        label = f"Diff of {path}" if own else f"Diff of {fd.name} (generated by npu-migrate)"
        long = len(fd.lines) > _LONG_DIFF
        out.append(f'<div class="diff" data-long="{int(long)}"><h4>{esc(label)}</h4>')
        if long:
            out.append(f'<details class="long"><summary>{len(fd.lines):,} lines: show</summary>')
        out.append('<table class="unified"><caption class="visually-hidden">' + esc(label) + '</caption>'
                   '<thead class="visually-hidden"><tr><th scope="col">Old line</th><th scope="col">New line</th>'
                   '<th scope="col">Text</th></tr></thead><tbody>')
        for line in fd.lines:
            if line.kind == "hunk" or line.kind == "note":
                out.append(f'<tr class="d-{line.kind}"><td colspan="3">{esc(line.text)}</td></tr>')
                continue
            sign = {"add": "+", "del": "-", "context": " "}[line.kind]
            out.append(f'<tr class="d-{line.kind}"><td class="ln">{line.old or ""}</td><td class="ln">'
                       f'{line.new or ""}</td><td class="code"><span class="sign" aria-hidden="true">{sign}</span>'
                       f'{esc(line.text)}</td></tr>')
            if own and line.old is not None and line.kind != "add":
                for row in at_line.pop(line.old, []):
                    if row.kind == "rewrite":
                        continue
                    out.append(f'<tr class="d-finding row" data-kind="{row.kind}" data-code="{esc(row.code)}">'
                               f'<td colspan="3"><a href="#{esc(anchor(path, row.line, row.cell))}">'
                               f'{esc(row.code)}</a> <span class="badge k-{row.kind}">{row.kind}</span> '
                               f'{prose(row.message)}</td></tr>')
        out.append("</tbody></table>")
        if long:
            out.append("</details>")
        out.append("</div>")
    return "\n".join(out)


def _quiet(report: RunReport, quiet: List[FileResult]) -> str:
    n = len(quiet)
    out = [f'<details class="quiet"><summary>{n:,} file{"s" if n != 1 else ""} with nothing to migrate or '
           'report</summary><ul>']
    for r in quiet:
        why = f" (skipped: {esc(r.skipped)})" if r.skipped else ""
        out.append(f"<li>{esc(report.display_path(r.path))}{why}</li>")
    out.append("</ul></details>")
    return "\n".join(out)


def _code_pages(report: RunReport, codes: List[str]) -> str:
    from ..codedocs import page

    out = ['<section aria-labelledby="codes-h" id="codes"><h2 id="codes-h">The codes on this page</h2>']
    for code in codes:
        p = page(report.rules, code)
        if p is None:
            out.append(f'<article id="code-{esc(code)}"><h3>{esc(code)}</h3><p>Not documented.</p></article>')
            continue
        out.append(f'<article id="code-{esc(p.code)}"><h3>{esc(p.code)}: {prose(p.title)}</h3>')
        out.append(f"<p>Reported as {esc(p.reported_as)}; {esc(p.area)}"
                   + (f"; checked against {esc(p.targets)}" if p.targets else "") + ".</p>")
        if p.why:
            out.append(f"<p><strong>Why:</strong> {prose(p.why)}</p>")
        if p.fix:
            out.append(f"<p><strong>What to do:</strong> {prose(p.fix)}</p>")
        for group in p.examples[:1]:
            out.append('<div class="examples">')
            for ex in group:
                out.append(f"<p>{esc(ex.label.capitalize())}:</p><pre><code>{esc(ex.text.rstrip())}</code></pre>")
            out.append("</div>")
        where = f" · {esc(p.doc_path)} in npu-migrate's source repository" if p.doc_path else " (your own rules)"
        out.append(f'<p class="docs">npu-migrate explain {esc(p.code)}{where}</p></article>')
    out.append("</section>")
    return "\n".join(out)


_HEAD = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>
:root{--fg:#1f2328;--muted:#57606a;--bg:#fff;--line:#d0d7de;--add:#dafbe1;--del:#ffebe9;--err:#b42318;
--warn:#7a4d00;--warnbg:#fff4d6;--info:#0b5394;--rw:#1a7f37;--gen:#6639ba}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:var(--fg);background:var(--bg);margin:0 auto;
max-width:1200px;padding:0 16px 40px}
a{color:#0550ae;text-decoration:underline}
h1{font-size:24px;margin:20px 0 8px}h2{font-size:19px;margin:28px 0 8px;border-bottom:1px solid var(--line)}
h3{font-size:15px;margin:0;display:inline}h4{font-size:13px;margin:12px 0 4px;color:var(--muted)}
code,pre,.code{font:12.5px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
pre{background:#f6f8fa;padding:8px;overflow:auto;border-radius:4px}
.meta{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:0}.meta dt{font-weight:600}
.meta dd{margin:0;overflow-wrap:anywhere}
.cards{display:flex;flex-wrap:wrap;gap:8px;list-style:none;padding:0}
.cards li{border:1px solid var(--line);border-radius:6px;padding:8px 12px}.num{font-size:20px;font-weight:700}
table{border-collapse:collapse}caption{text-align:left;font-weight:600;padding:6px 0}
.charts{display:flex;flex-wrap:wrap;gap:0 32px;align-items:flex-start}.chart{margin:8px 0 12px}.chart th,.chart td{padding:2px 8px;text-align:left;font-weight:normal}
.chart .n{text-align:right}.bar-cell{width:160px}.bar{display:inline-block;height:10px;border-radius:2px}
.title{color:var(--muted)}
.k-error{background:var(--err);color:#fff}.k-warning{background:var(--warnbg);color:var(--warn)}
.k-info{background:var(--info);color:#fff}.k-rewrite{background:var(--rw);color:#fff}
.k-generated{background:var(--gen);color:#fff}
.bar.k-warning{background:#d4a72c}
.badge{display:inline-block;border-radius:10px;padding:0 8px;font-size:12px;font-weight:600;margin-left:4px}
.filters{position:sticky;top:0;background:var(--bg);border-bottom:1px solid var(--line);padding:8px 0;z-index:2;
display:flex;flex-wrap:wrap;gap:6px 14px;align-items:center}
.filters fieldset{border:0;margin:0;padding:0;display:inline-flex;gap:8px}.filters legend{float:left;margin-right:6px;
font-weight:600}
.file{border:1px solid var(--line);border-radius:6px;margin:8px 0}.file>details>summary{padding:8px 12px;cursor:pointer}
.file>details>*:not(summary){margin-left:12px;margin-right:12px}
.rows{width:calc(100% - 24px);margin-bottom:8px}.rows th,.rows td{border-top:1px solid var(--line);padding:4px 6px;
text-align:left;vertical-align:top}.rows td:first-child{white-space:nowrap}
.suggestion{color:var(--muted)}
.diff{overflow-x:auto}.diff table{width:100%}.diff td{padding:0 6px;vertical-align:top}
.diff thead th{font-size:12px;color:var(--muted);text-align:left;font-weight:normal}
.ln{color:var(--muted);text-align:right;width:1%;white-space:nowrap;user-select:none}
.code{white-space:pre-wrap;overflow-wrap:anywhere}
.d-add .code{background:var(--add)}.d-del .code{background:var(--del)}.d-hunk td{color:var(--muted);background:#f6f8fa}
.d-finding td{background:#fff8c5;font-size:13px}.sign{color:var(--muted);margin-right:4px}
.split td.code{width:50%}
:target{outline:3px solid #0969da;outline-offset:-3px}
.visually-hidden{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap}
code.add{background:var(--add)}code.del{background:var(--del)}
.examples p{margin:4px 0}.docs{color:var(--muted)}footer{color:var(--muted);margin-top:30px}
[hidden]{display:none!important}
</style></head><body>"""

_SCRIPT = r"""
(function(){
"use strict";
var form=document.getElementById("filters");form.hidden=false;
var files=Array.prototype.slice.call(document.querySelectorAll("section.file"));
var search=document.getElementById("f-search"),code=document.getElementById("f-code"),
    folder=document.getElementById("f-folder"),count=document.getElementById("shown-count"),
    none=document.getElementById("none-shown");
function kinds(){var k={};form.querySelectorAll('input[name=kind]').forEach(function(i){k[i.value]=i.checked;});return k;}
function apply(){
  var k=kinds(),c=code.value,f=folder.value,q=search.value.trim().toLowerCase(),shown=0;
  files.forEach(function(sec){
    var path=sec.getAttribute("data-path"),any=false;
    var inFolder=!f||path.indexOf(f)===0;
    sec.querySelectorAll("tr.row").forEach(function(tr){
      var ok=inFolder&&k[tr.getAttribute("data-kind")]&&(!c||tr.getAttribute("data-code")===c)&&
        (!q||path.toLowerCase().indexOf(q)>=0||tr.textContent.toLowerCase().indexOf(q)>=0);
      tr.hidden=!ok;if(ok&&tr.parentNode.parentNode.classList.contains("rows"))any=true;});
    var rows=sec.querySelectorAll("table.rows tr.row").length;
    var plain=!rows&&inFolder&&!c&&(!q||path.toLowerCase().indexOf(q)>=0);
    sec.hidden=!(any||plain);if(!sec.hidden)shown++;});
  count.textContent=shown+" of "+files.length+" files shown";none.hidden=shown>0;
}
form.addEventListener("input",apply);form.addEventListener("change",apply);
function split(table){
  var t=document.createElement("table");t.className="split";
  t.innerHTML='<caption class="visually-hidden">Side by side</caption><thead><tr><th scope="col">Old</th>'+
    '<th scope="col">Before</th><th scope="col">New</th><th scope="col">After</th></tr></thead>';
  var body=document.createElement("tbody");t.appendChild(body);
  var rows=Array.prototype.slice.call(table.tBodies[0].rows),dels=[],adds=[];
  function cell(tr,cls){var c=document.createElement("td");if(tr){c.textContent=tr.cells[2].textContent.slice(1);}
    c.className="code";return c;}
  function num(tr,i){var c=document.createElement("td");c.className="ln";if(tr)c.textContent=tr.cells[i].textContent;return c;}
  function flush(){var n=Math.max(dels.length,adds.length);for(var i=0;i<n;i++){var r=document.createElement("tr");
    var d=dels[i],a=adds[i];r.appendChild(num(d,0));var cd=cell(d);if(d)r.className="";if(d)cd.style.background="var(--del)";
    r.appendChild(cd);r.appendChild(num(a,1));var ca=cell(a);if(a)ca.style.background="var(--add)";r.appendChild(ca);
    body.appendChild(r);}dels=[];adds=[];}
  rows.forEach(function(tr){
    if(tr.classList.contains("d-del")){if(adds.length)flush();dels.push(tr);return;}
    if(tr.classList.contains("d-add")){adds.push(tr);return;}
    flush();var r=tr.cloneNode(true);
    if(tr.classList.contains("d-context")){r=document.createElement("tr");r.appendChild(num(tr,0));r.appendChild(cell(tr));
      r.appendChild(num(tr,1));r.appendChild(cell(tr));}else{r.cells[0].colSpan=4;}
    body.appendChild(r);});
  flush();return t;
}
function view(v){document.querySelectorAll("table.unified").forEach(function(u){
  var s=u.nextElementSibling&&u.nextElementSibling.classList.contains("split")?u.nextElementSibling:null;
  if(v==="split"&&!s){s=split(u);u.parentNode.insertBefore(s,u.nextSibling);}
  u.hidden=v==="split";if(s)s.hidden=v!=="split";});}
form.querySelectorAll("input[name=view]").forEach(function(i){i.addEventListener("change",function(){view(i.value);});});
function reveal(){
  var id=decodeURIComponent(location.hash.slice(1));if(!id)return;
  var el=document.getElementById(location.hash.slice(1))||document.getElementById(id);
  if(!el){var m=/^file=([^&]*)/.exec(location.hash.slice(1));if(m)el=document.getElementById("file="+m[1]);}
  if(!el)return;
  for(var p=el;p;p=p.parentElement){if(p.tagName==="DETAILS")p.open=true;if(p.hidden)p.hidden=false;}
  el.scrollIntoView({block:"center"});
}
window.addEventListener("hashchange",reveal);apply();reveal();
})();
"""

