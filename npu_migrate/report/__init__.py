"""Renderers: results of a run -> text in one of the output formats.

Each renderer is `render(report: RunReport) -> str`, registered by name in RENDERERS. The
CLI picks one with `--format` and writes it to stdout or `--output-file`. A format made of
several files (csv) returns {file name: content} instead; `write_report_files` puts them in a
folder.
"""

from __future__ import annotations

import json as _json  # (`json` is this package's json.py once loaded)
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Union

from ..model import EXIT_CHANGES, EXIT_ERROR, EXIT_OK, FileResult, Severity, WriteBack
from ..rules import RuleSet

if TYPE_CHECKING:
    from ..targets import RunTargets


@dataclass
class RunReport:
    results: List[FileResult]
    rules: RuleSet
    mode: WriteBack  # what happened to the files (a value string is taken too: "check")
    diffs: Dict[str, str] = field(default_factory=dict)  # path -> unified diff (when computed)
    color: bool = False
    verbose: bool = False
    quiet: bool = False
    root: str = "."  # paths are shown relative to this folder
    targets: Optional[RunTargets] = None  # the releases the run migrated for
    # Paths given that could not be used (discovery): the run exits 2 after doing the others.
    path_errors: List[str] = field(default_factory=list)
    # Files still to be generated next to migrated ones (--diff/--check: a change), and the
    # lines that say what happened to them (printed after the report).
    files_waiting: bool = False
    notes: List[str] = field(default_factory=list)
    # The command line of the run, as the review page shows it (argv, empty when not from the CLI).
    command: List[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.mode = WriteBack(self.mode)

    def display_path(self, path: str) -> str:
        try:
            rel = os.path.relpath(path, self.root)
        except ValueError:
            return path
        return path if rel.startswith("..") else rel

    @property
    def changed(self) -> List[FileResult]:
        return [r for r in self.results if r.changed]

    @property
    def failed(self) -> List[FileResult]:
        return [r for r in self.results if r.error]

    def edit_counts(self) -> Counter:
        return Counter(e.code for r in self.results for e in r.edits)

    def finding_counts(self) -> Counter:
        return Counter(f.code for r in self.results for f in r.findings)

    def target_lines(self) -> List[str]:
        """`Target: …` lines for the targets that applied: torch_npu for PyTorch files, CANN for
        TensorFlow, MindSpore for MindSpore (from the frameworks of the files with results)."""
        if self.targets is None:
            return []
        return self.targets.summary_lines({f for r in self.results for f in r.frameworks})

    def findings_at_least(self, level: Severity) -> int:
        return sum(1 for r in self.results for f in r.findings if f.severity.rank >= level.rank)

    def return_code(self, fail_on: Severity) -> int:
        """The exit code of the run (model.EXIT_*): 2 when a path or a file failed; with --diff
        1 when something would change; with --check also when a finding is at `fail_on` or above."""
        if self.failed or self.path_errors:
            return EXIT_ERROR
        changes = bool(self.changed) or self.files_waiting
        if self.mode is WriteBack.DIFF and changes:
            return EXIT_CHANGES
        if self.mode is WriteBack.CHECK and (changes or self.findings_at_least(fail_on)):
            return EXIT_CHANGES
        return EXIT_OK


    def check_failure(self, fail_on: Severity, shown: int = 5) -> List[str]:
        """Why --check fails, in lines a CI log (or pre-commit) shows: the rewrites pending, and
        the findings at `fail_on` or above (the first `shown` of them by name). Empty when
        --check passes."""
        if self.mode is not WriteBack.CHECK or self.return_code(fail_on) != EXIT_CHANGES:
            return []
        lines = []
        changed = self.changed
        if changed:
            rewrites = sum(len(r.edits) for r in changed)
            files = f"{len(changed)} file{'s' if len(changed) != 1 else ''}"
            lines.append(f"npu-migrate: check failed: {files} would be migrated "
                         f"({rewrites} rewrite{'s' if rewrites != 1 else ''} pending; run with --diff to see them)")
        elif self.files_waiting:
            lines.append("npu-migrate: check failed: a generated file (a ModelArts boot file) is missing or out "
                         "of date; run with --diff to see it")
        failing = [(r, f) for r in self.results for f in r.findings if f.severity.rank >= fail_on.rank]
        if failing:
            n = len(failing)
            lines.append(f"npu-migrate: check failed: {n} finding{'s' if n != 1 else ''} at or above "
                         f"{fail_on.value}:")
            for r, f in failing[:shown]:
                where = f"{self.display_path(r.path)}:{in_cell(f'{f.span.line}:{f.span.col}', f.cell)}"
                lines.append(f"  {where}: {f.code} [{f.severity.value}] {f.message}")
            if n > shown:
                lines.append(f"  ... and {n - shown} more")
        return lines


def in_cell(position: str, cell: Optional[int], sep: str = ":") -> str:
    """A position in a file (`12:5`, `line 12`, or nothing) where a notebook's lines count per
    cell: `cell 3<sep>12:5`; outside a notebook, `position` itself. Every format writes notebook
    locations through this (each with its own separator)."""
    if cell is None:
        return position
    return f"cell {cell}{sep}{position}" if position else f"cell {cell}"


_SURROGATE = re.compile("[\ud800-\udfff]")


def json_text(doc: Any) -> str:
    """`doc` as JSON, UTF-8-safe: a file name that is not UTF-8 (bytes Python decoded as lone
    surrogates) is written as a `\\udcXX` escape, which json.loads and os.fsencode turn back
    into the same bytes, instead of bytes no JSON reader takes."""
    text = _json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def with_suggestion(message: str, suggestion: str) -> str:
    """One text for formats with a single message field: `message. suggestion`."""
    if not suggestion:
        return message
    return f"{message}{'' if message.endswith(('.', '!', '?')) else '.'} {suggestion}"


Renderer = Callable[[RunReport], Union[str, Dict[str, str]]]
RENDERERS: Dict[str, Renderer] = {}


def register(name: str) -> Callable[[Renderer], Renderer]:
    def deco(fn: Renderer) -> Renderer:
        RENDERERS[name] = fn
        return fn

    return deco


def write_report_files(files: Dict[str, str], folder: str) -> List[str]:
    """Write a multi-file report into `folder` (created if missing); return the paths written.
    Raises NotADirectoryError when `folder` exists and is not a folder."""
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise NotADirectoryError(f"{folder}: exists and is not a folder (this format writes several files)")
    from ..source import write_text_file

    os.makedirs(folder, exist_ok=True)
    written = []
    for name, content in files.items():
        path = os.path.join(folder, name)
        write_text_file(path, content)
        written.append(path)
    return written


def renderer_names() -> List[str]:
    """Every format: one module of this package each, named as the format it registers
    (text.py registers "text"; tests/test_startup.py holds that)."""
    from ..startup import package_modules

    return sorted(package_modules(__path__[0]))


def load_renderers(*names: str) -> None:
    """Register the renderers of the formats `names` (every one when none is named): a run
    imports only its own format's (html and sarif are not a text run's start-up)."""
    import importlib

    known = renderer_names()
    for name in names or known:
        if name in known:
            importlib.import_module(f"{__name__}.{name}")
