"""Jupyter notebooks (`.ipynb`): code cells migrated with the Python engine, nothing else touched.

How, and why this way:

* The code cells of a notebook share one namespace and run top to bottom, so they are migrated
  as ONE module: the cells are joined, separated by marker comments, and go through
  `engine.migrate_python(entry_script=False)` once. That is how `torch` imported in cell 1 is
  known when cell 5 calls `torch.cuda.synchronize()`, how `device = "cuda"` in cell 2 is known to
  be a device for `.to(device)` in cell 4, and why `import torch_npu` lands in the cell that
  imports torch. (nbQA and tf_upgrade_v2 join cells the same way.)
* IPython syntax is masked first: line magics (`%matplotlib inline`), shell escapes
  (`!nvidia-smi`, `x = !ls`), help (`torch.cuda?`) and the first line of Python cell magics
  (`%%time`) become placeholder statements, one per line, restored byte for byte afterwards.
  Shell escapes and `%env` lines then go through the shell front end, and `%%bash` cells too;
  a `%%writefile x.py` (or `.sh`) cell is migrated as the file it writes. Cells of other
  languages (`%%html`) and cells that are not valid Python once masked are left alone (the
  latter with a finding), like black does.
* The JSON is never re-serialised: only the `"source"` values of changed cells are replaced in
  the original text, in the notebook's own style (list or string, indent, `ensure_ascii`), so
  outputs, metadata, key order and the trailing newline survive byte for byte and the diff
  shows only the changed source lines.

Edits and findings carry `cell` (1-based position among all cells, as the notebook shows them)
and lines relative to that cell: `train.ipynb:cell 3:12:5`.
"""

from __future__ import annotations

import ast
import bisect
import json
import re
from dataclasses import dataclass, field
from json.decoder import scanstring  # type: ignore[attr-defined]  # json's own, not in typeshed
from typing import Any, Dict, Iterator, List, Optional, Tuple

from .. import prefilter
from ..model import FileResult, Finding, Span
from ..options import Options
from ..rules import RuleSet
from ..source import SourceError
from ..codes import check_rule_emitter, emits

# Cell magics whose body is Python run in the notebook's namespace.
PYTHON_CELL_MAGICS = {"time", "timeit", "capture", "prun", "debug"}
# Cell magics whose body is a shell script.
SHELL_CELL_MAGICS = {"bash", "sh", "script"}
_PLACEHOLDER = "__npu_migrate_ipython_{}_{}__"
_CELL_MARKER = "#__npu_migrate_cell_{}__"
_HELP_RE = re.compile(r"^(?:%{0,2}|\?{1,2})[A-Za-z_*][\w*]*(?:\.[A-Za-z_*][\w*]*)*(?:\(\))?\?{0,2}$")
_MAGIC_ASSIGN_RE = re.compile(r"^[A-Za-z_][\w.\[\], ]*?\s*=\s*[%!]")
_SHELL_ASSIGN_RE = re.compile(r"^([A-Za-z_][\w.\[\], ]*?\s*=\s*!{1,2})(.*)$", re.S)
_ENV_MAGIC_RE = re.compile(r"^%(env|set_env)[ \t]+(.*)$", re.S)

# The codes this front end reports (rules/notebook.toml gives their severity, message, suggestion).
MODELARTS_CODE = "NPU375"
BAD_CELL_CODE = "NPU376"


# ----------------------------------------------------------------------------- reading


def decode(data: bytes, path: str = "<bytes>") -> Tuple[str, str]:
    """Notebooks are UTF-8 JSON (nbformat); a BOM is kept if there is one."""
    encoding = "utf-8-sig" if data.startswith(b"\xef\xbb\xbf") else "utf-8"
    try:
        return data.decode(encoding), encoding
    except UnicodeDecodeError as exc:
        raise SourceError(f"invalid notebook: not UTF-8 (byte {exc.start}: {data[exc.start:exc.start + 1]!r})") from None


class InvalidNotebook(Exception):
    pass


_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


def _ws(text: str, i: int) -> int:
    return _WS.match(text, i).end()  # type: ignore[union-attr]  # `\s*` matches everywhere


def _members(text: str, i: int) -> Iterator[Tuple[str, int, int]]:
    """(key, value start, value end) of the JSON object starting at text[i] == "{"."""
    i = _ws(text, i + 1)
    if text[i] == "}":
        return
    while True:
        key, i = scanstring(text, i + 1)
        i = _ws(text, i) + 1  # the ":"
        start = _ws(text, i)
        _, end = _DECODER.raw_decode(text, start)
        yield key, start, end
        i = _ws(text, end)
        if text[i] != ",":
            return
        i = _ws(text, i + 1)


def _elements(text: str, i: int) -> Iterator[Tuple[int, int]]:
    """(start, end) of each element of the JSON array starting at text[i] == "["."""
    i = _ws(text, i + 1)
    if text[i] == "]":
        return
    while True:
        _, end = _DECODER.raw_decode(text, i)
        yield i, end
        i = _ws(text, end)
        if text[i] != ",":
            return
        i = _ws(text, i + 1)


@dataclass
class Cell:
    number: int  # 1-based, among all cells
    kind: str
    source: str
    source_span: Tuple[int, int]  # of the "source" value in the notebook text
    source_is_list: bool


@dataclass
class Notebook:
    text: str
    data: dict
    cells: List[Cell]
    ensure_ascii: bool

    @property
    def language(self) -> str:
        meta = self.data.get("metadata") or {}
        lang = (meta.get("kernelspec") or {}).get("language") or (meta.get("language_info") or {}).get("name")
        return str(lang or "python").lower()


def read_notebook(text: str) -> Notebook:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidNotebook(f"not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except RecursionError:
        raise InvalidNotebook("not JSON (too deeply nested)") from None
    except ValueError as exc:  # JSON Python will not read: a 5,000-digit integer (issue 30.9)
        raise InvalidNotebook(f"not JSON Python reads ({str(exc).split(':')[0]})") from None
    if not isinstance(data, dict):
        raise InvalidNotebook("the top level is not a JSON object")
    if "worksheets" in data and "cells" not in data:
        raise InvalidNotebook("nbformat 3 is not supported; upgrade it with `jupyter nbconvert --to notebook --nbformat 4`")
    if not isinstance(data.get("cells"), list):
        raise InvalidNotebook('no "cells" list')
    start = _ws(text, 0)
    cells_span = next(((s, e) for key, s, e in _members(text, start) if key == "cells"), None)
    assert cells_span is not None  # data has a "cells" list
    cells: List[Cell] = []
    for number, ((c_start, _c_end), cell) in enumerate(zip(_elements(text, cells_span[0]), data["cells"]), 1):
        if not isinstance(cell, dict):
            raise InvalidNotebook(f"cell {number} is not a JSON object")
        source = cell.get("source", "")
        is_list = isinstance(source, list)
        if is_list and all(isinstance(s, str) for s in source):
            source = "".join(source)
        elif not isinstance(source, str):
            raise InvalidNotebook(f'cell {number}: "source" is neither a string nor a list of strings')
        span = None
        for key, s, e in _members(text, c_start):
            if key == "source":
                span = (s, e)
        cells.append(Cell(number, str(cell.get("cell_type", "")), source, span or (0, 0), is_list))
    return Notebook(text, data, cells, ensure_ascii=_uses_ascii_escapes(text))


def _uses_ascii_escapes(text: str) -> bool:
    """Whether the file escapes non-ASCII characters (`\\u00e9`) rather than writing them."""
    if any(ord(c) > 127 for c in text):
        return False
    return re.search(r"\\u(?:00[89a-fA-F]|0[1-9a-fA-F]|[1-9a-fA-F])", text) is not None


# ----------------------------------------------------------------------------- writing


def _json_string(value: str, ensure_ascii: bool) -> str:
    return json.dumps(value, ensure_ascii=ensure_ascii)


def _split_source_lines(source: str) -> List[str]:
    # nbformat stores a source as its lines, each with its "\n" (the last one without).
    return re.findall(r"[^\n]*\n|[^\n]+$", source)


def render_source(nb: Notebook, cell: Cell, new_source: str) -> str:
    """The JSON text of a cell's new "source" value, in the notebook's own layout."""
    start, end = cell.source_span
    if not cell.source_is_list:
        return _json_string(new_source, nb.ensure_ascii)
    elements = list(_elements(nb.text, start))
    reuse: Dict[str, str] = {}
    for s, e in elements:
        reuse.setdefault(json.loads(nb.text[s:e]), nb.text[s:e])
    values = list(reuse)
    one_line_each = all("\n" not in v[:-1] for v in values)
    # nbformat writes one element per line; sphinx-gallery exports put a whole cell in one element.
    chunks = _split_source_lines(new_source) if one_line_each else [new_source]
    items = [reuse.get(chunk) or _json_string(chunk, nb.ensure_ascii) for chunk in chunks]
    if not elements:
        return "[" + ", ".join(items) + "]"
    opening = nb.text[start + 1:elements[0][0]]
    closing = nb.text[elements[-1][1]:end - 1]
    if len(elements) > 1:
        separator = nb.text[elements[0][1]:elements[1][0]]
    else:
        separator = "," + opening if "\n" in opening else ", "
    return "[" + opening + separator.join(items) + closing + "]"


# ----------------------------------------------------------------------------- IPython syntax


@dataclass
class Masked:
    """A cell's source with its IPython lines replaced by placeholder statements."""

    text: str
    originals: Dict[str, str] = field(default_factory=dict)  # placeholder -> line to restore (no newline)
    shell_lines: Dict[int, str] = field(default_factory=dict)  # 0-based line -> its placeholder, for
    # the single-line `!cmd`, `x = !cmd` and `%env` lines


def _logical_line_starts(source: str) -> List[bool]:
    """For each physical line: does a new Python statement start there? (Not inside a string,
    brackets or after a backslash continuation.) A small scanner, because `tokenize` rejects the
    IPython syntax this is used to find."""
    starts: List[bool] = []
    depth = 0
    quote: Optional[str] = None
    continued = False
    for line in source.splitlines(keepends=True):
        starts.append(depth == 0 and quote is None and not continued)
        stripped = line.lstrip()
        if starts[-1] and stripped[:1] in ("%", "!", "?") or (starts[-1] and _MAGIC_ASSIGN_RE.match(stripped)):
            continued = line.rstrip("\r\n").endswith("\\")
            continue
        i = 0
        n = len(line)
        continued = False
        while i < n:
            c = line[i]
            if quote is not None:
                if c == "\\":
                    i += 2
                    continue
                if line.startswith(quote, i):
                    i += len(quote)
                    quote = None
                    continue
                if len(quote) == 1 and c == "\n":
                    quote = None  # an unterminated one-line string: invalid, stop tracking
                i += 1
                continue
            if c == "#":
                break
            if c in "\"'":
                quote = line[i:i + 3] if line.startswith(c * 3, i) else c
                i += len(quote)
                continue
            if c in "([{":
                depth += 1
            elif c in ")]}":
                depth = max(0, depth - 1)
            elif c == "\\" and line[i + 1:i + 2] in ("\n", "\r"):
                continued = True
            i += 1
    return starts


def mask_ipython(source: str, cell_number: int, python_cell_magic: bool) -> Masked:
    lines = source.splitlines(keepends=True)
    starts = _logical_line_starts(source)
    masked = Masked("")
    out: List[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        body = line.rstrip("\r\n")
        ending = line[len(body):]
        stripped = body.lstrip()
        indent = body[: len(body) - len(stripped)]
        is_magic = starts[i] and stripped and (
            stripped[0] in "%!"
            or _MAGIC_ASSIGN_RE.match(stripped) is not None
            or _HELP_RE.match(stripped) is not None and "?" in stripped
        )
        if i == 0 and python_cell_magic:
            is_magic = True
        if not is_magic:
            out.append(line)
            i += 1
            continue
        if (stripped[:1] == "!" or _SHELL_ASSIGN_RE.match(stripped) or _ENV_MAGIC_RE.match(stripped)) and not body.endswith("\\"):
            masked.shell_lines[i] = _PLACEHOLDER.format(cell_number, i)
        # The magic and its backslash continuations: one placeholder statement per line.
        while True:
            placeholder = _PLACEHOLDER.format(cell_number, i)
            masked.originals[placeholder] = body
            out.append(indent + placeholder + ending)
            if not body.endswith("\\") or i + 1 >= len(lines):
                break
            i += 1
            body = lines[i].rstrip("\r\n")
            ending = lines[i][len(body):]
        i += 1
    masked.text = "".join(out)
    return masked


def unmask_ipython(text: str, masked: Masked) -> str:
    if not masked.originals:
        return text
    out = []
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        original = masked.originals.get(body.strip())
        out.append(original + line[len(body):] if original is not None else line)
    return "".join(out)


def _parses(text: str) -> bool:
    try:
        compile(text, "<cell>", "exec", flags=ast.PyCF_ONLY_AST | getattr(ast, "PyCF_ALLOW_TOP_LEVEL_AWAIT", 0),
                dont_inherit=True)
        return True
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False


# ----------------------------------------------------------------------------- migration


@dataclass
class _Part:
    cell: Cell
    masked: Masked
    first_line: int  # 1-based line of the cell's first line in the joined module
    line_count: int
    ends_with_newline: bool


def _locate(parts: List[_Part], line: int) -> Tuple[Optional[_Part], int]:
    """(part, line within its cell) for a line of the joined module."""
    firsts = [p.first_line for p in parts]
    k = bisect.bisect_right(firsts, line) - 1
    if k < 0:
        return None, line
    part = parts[k]
    local = line - part.first_line + 1
    # The marker line after a cell belongs to nobody; an insertion there is the cell's last line.
    return part, min(local, max(part.line_count, 1) + 1)


def _relocate(span: Span, line_offset: int, col_offset: int = 0) -> Span:
    return Span(
        span.line + line_offset,
        span.col + (col_offset if span.line == 1 else 0),
        span.end_line + line_offset,
        span.end_col + (col_offset if span.end_line == 1 else 0),
    )


def _cell_magic(source: str) -> Optional[Tuple[str, str]]:
    """("time", "%%time --flag") for a cell that starts with a cell magic."""
    if not source.startswith("%%"):
        return None
    first = source.split("\n", 1)[0].rstrip("\r")
    name = re.match(r"%%([\w.-]*)", first).group(1)  # type: ignore[union-attr]  # it starts with %%
    return name, first


@emits("NPU375", "NPU376")
def migrate_notebook(text: str, path: str, options: Options, rules: RuleSet) -> FileResult:
    from ..engine import migrate_python

    if text.startswith("\ufeff"):  # a BOM the caller did not decode away: keep it, parse the rest
        result = migrate_notebook(text[1:], path, options, rules)
        if result.new_text is not None:
            result.new_text = "\ufeff" + result.new_text
        return result
    result = FileResult(path=path)
    try:
        nb = read_notebook(text)
    except InvalidNotebook as exc:
        result.error = f"invalid notebook: {exc}"
        return result
    if nb.language != "python":
        result.skipped = f"not a Python notebook (language: {nb.language})"
        return result

    new_sources: Dict[int, str] = {}
    parts: List[_Part] = []
    joined: List[str] = []
    line = 1
    for cell in nb.cells:
        if cell.kind != "code" or not cell.source.strip():
            continue
        magic = _cell_magic(cell.source)
        if magic is not None and magic[0] in SHELL_CELL_MAGICS:
            _migrate_shell_cell(cell, magic[1], rules, result, new_sources)
            continue
        if magic is not None and magic[0] == "writefile":
            _migrate_written_file(cell, magic[1], options, rules, result, new_sources)
            continue
        if magic is not None and magic[0] not in PYTHON_CELL_MAGICS:
            continue  # %%html, %%writefile, %%javascript …: not this notebook's Python
        masked = mask_ipython(cell.source, cell.number, python_cell_magic=magic is not None)
        if not _parses(masked.text):
            if not prefilter.may_need_work(rules, cell.source):
                continue  # nothing to migrate in it anyway: no need to say it was skipped
            rule = rules.reported(BAD_CELL_CODE)
            check_rule_emitter(rule)
            result.findings.append(Finding(
                rule.code, rule.severity, Span(1, 1, 1, 1), "", rule.message, rule.suggestion, cell=cell.number,
            ))
            continue
        _migrate_shell_lines(masked, cell.number, rules, result)
        body = masked.text if masked.text.endswith("\n") else masked.text + "\n"
        count = body.count("\n")
        joined.append(_CELL_MARKER.format(cell.number) + "\n")
        line += 1
        parts.append(_Part(cell, masked, line, count, cell.source.endswith("\n")))
        joined.append(body)
        line += count

    if parts:
        module_text = "".join(joined)
        py = migrate_python(module_text, path, options, rules, entry_script=False)
        if py.error:
            result.error = py.error
            return result
        result.frameworks = py.frameworks
        pairs: List[Tuple[List[Any], List[Any]]] = [(py.edits, result.edits), (py.findings, result.findings)]
        for found, kept in pairs:
            for item in found:  # from a line of the joined cells to a line of one cell
                part, local = _locate(parts, item.span.line)
                if part is not None:
                    item.span = _relocate(item.span, local - item.span.line)
                    item.cell = part.cell.number
                    kept.append(item)
        migrated = _split_cells(py.new_text, parts) if py.new_text is not None else {}
        for part in parts:
            new = migrated.get(part.cell.number, part.masked.text)
            new = unmask_ipython(new, part.masked)
            if not part.ends_with_newline and new.endswith("\n"):
                new = new[:-1]
            if new != part.cell.source:
                new_sources[part.cell.number] = new

    if options.modelarts:
        rule = rules.reported(MODELARTS_CODE)
        check_rule_emitter(rule)
        result.findings.append(Finding(rule.code, rule.severity, Span(1, 1, 1, 1), "--modelarts", rule.message,
                                       rule.suggestion))
    result.edits.sort(key=lambda e: (e.cell or 0, e.span.line, e.span.col, e.code))
    result.findings.sort(key=lambda f: (f.cell or 0, f.span.line, f.span.col, f.code))
    if new_sources:
        result.new_text = _splice(nb, new_sources)
    return result


def _split_cells(new_text: str, parts: List[_Part]) -> Dict[int, str]:
    """The migrated joined module cut back into cells at the marker lines."""
    out: Dict[int, str] = {}
    markers = {_CELL_MARKER.format(p.cell.number): p.cell.number for p in parts}
    current: Optional[int] = None
    chunks: Dict[int, List[str]] = {}
    for line in new_text.splitlines(keepends=True):
        number = markers.get(line.rstrip("\r\n"))
        if number is not None:
            current = number
            chunks[current] = []
        elif current is not None:
            chunks[current].append(line)
        else:  # something inserted before the first cell: it belongs to the first cell
            chunks.setdefault(parts[0].cell.number, []).append(line)
    for number, lines in chunks.items():
        out[number] = "".join(lines)
    return out


def _shell_results(command: str, rules: RuleSet, prefix: str = "", suffix: str = ""):
    from .shell import migrate_shell_text

    new, edits, findings = migrate_shell_text(prefix + command + suffix, rules)
    if new is not None:
        if not (new.startswith(prefix) and new.endswith(suffix)):
            return None, [], findings
        new = new[len(prefix):len(new) - len(suffix)]
    return new, edits, findings


def _migrate_shell_lines(masked: Masked, cell_number: int, rules: RuleSet, result: FileResult) -> None:
    """`!cmd`, `x = !cmd` and `%env NAME=value` lines go through the shell front end; the
    migrated line is what `unmask_ipython` puts back."""
    for index, placeholder in masked.shell_lines.items():
        body = masked.originals[placeholder]
        stripped = body.lstrip()
        col = len(body) - len(stripped)
        env = _ENV_MAGIC_RE.match(stripped)
        assign = _SHELL_ASSIGN_RE.match(stripped)
        if env:
            head = "%" + env.group(1) + " "
            prefix, suffix = "export ", ""  # `%env NAME=value` / `%env NAME value` set NAME
        elif assign:
            head = assign.group(1)
            prefix, suffix = "_=$(", ")"  # its output is captured, as in $(…)
        else:
            head = "!!" if stripped.startswith("!!") else "!"
            prefix, suffix = "", ""
        new, edits, findings = _shell_results(stripped[len(head):], rules, prefix, suffix)
        offset = col + len(head) - len(prefix)
        for item in list(edits) + list(findings):
            item.span = _relocate(item.span, index, offset)
            item.cell = cell_number
        result.edits.extend(edits)
        result.findings.extend(findings)
        if new is not None:
            masked.originals[placeholder] = body[: col + len(head)] + new


def _add_body_results(cell: Cell, head: str, new: Optional[str], edits, findings, result: FileResult,
                      new_sources: Dict[int, str]) -> None:
    """The results of a cell magic's body (below its first line `head`): located in the cell,
    and its new text after `head`."""
    for item in list(edits) + list(findings):
        item.span = _relocate(item.span, 1)
        item.cell = cell.number
    result.edits.extend(edits)
    result.findings.extend(findings)
    if new is not None:
        new_sources[cell.number] = head + new


def _migrate_shell_cell(cell: Cell, first_line: str, rules: RuleSet, result: FileResult,
                        new_sources: Dict[int, str]) -> None:
    """A `%%bash` / `%%sh` cell: its body is a shell script."""
    if first_line.startswith("%%script") and not re.match(r"%%script\s+(?:\S*/)?(?:ba)?sh\b", first_line):
        return
    head, newline, body = cell.source.partition("\n")
    new, edits, findings = _shell_results(body, rules)
    _add_body_results(cell, head + newline, new, edits, findings, result, new_sources)


def _migrate_written_file(cell: Cell, first_line: str, options: Options, rules: RuleSet, result: FileResult,
                          new_sources: Dict[int, str]) -> None:
    """`%%writefile train.py`: the body is a file of its own (its own module, not the notebook's
    namespace), migrated as Python or as a shell script by the target's suffix."""
    from ..engine import migrate_python

    target = first_line.split()[-1] if len(first_line.split()) > 1 else ""
    head, newline, body = cell.source.partition("\n")
    if target.endswith(".py"):
        migrated = migrate_python(body, target, options, rules, entry_script=False)
        if migrated.error:
            return
        new, edits, findings = migrated.new_text, migrated.edits, migrated.findings
    elif target.endswith(".sh"):
        new, edits, findings = _shell_results(body, rules)
    else:
        return
    _add_body_results(cell, head + newline, new, edits, findings, result, new_sources)


def _splice(nb: Notebook, new_sources: Dict[int, str]) -> str:
    pieces = []
    last = 0
    for cell in nb.cells:
        if cell.number not in new_sources:
            continue
        start, end = cell.source_span
        pieces.append(nb.text[last:start])
        pieces.append(render_source(nb, cell, new_sources[cell.number]))
        last = end
    pieces.append(nb.text[last:])
    return "".join(pieces)


migrate = migrate_notebook  # the front end (frontends/__init__.py)
