"""Files a run generates next to the ones it migrates (FileResult.extra_files: the ModelArts boot
file): what to do with each, its diff, and writing it.

The engine only says what the file should contain; here the disk decides: a missing file is
created, a file with the same first line (the generator's marker) is updated when it differs, and
any other file of that name is the user's and is never overwritten (a warning says so).
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from typing import Callable, Iterable, List, Optional, Tuple

from .model import FileResult


@dataclass
class ExtraFile:
    owner: str  # the path of the migrated file it belongs to
    path: str  # as the engine named it (next to `owner`)
    dest: str  # where it is written: `path`, or its place in the --output-dir copy
    text: str
    old: Optional[str]  # what is on disk now; None when there is no such file

    @property
    def action(self) -> str:
        """create | update | keep (a file of the user's is in the way)."""
        if self.old is None:
            return "create"
        first = self.text.split("\n", 1)[0]
        return "update" if self.old.split("\n", 1)[0] == first else "keep"

    @property
    def warning(self) -> str:
        return f"{self.path}: not written: a file of that name exists and npu-migrate did not generate it"


def _read(path: str) -> Optional[str]:
    try:
        with open(path, encoding="utf-8", newline="") as f:
            return f.read()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError):
        return ""  # unreadable: not ours, so never overwritten


def pending(results: Iterable[FileResult], where: Callable[[str], str] = lambda path: path) -> List[ExtraFile]:
    """The generated files that differ from what is on disk at `where(path)`."""
    found = []
    for result in results:
        if result.error:
            continue
        for path, text in sorted(result.extra_files.items()):
            dest = where(path)
            old = _read(dest)
            if old != text:
                found.append(ExtraFile(result.path, path, dest, text, old))
    return found


def diff(extra: ExtraFile, display: str) -> str:
    """A unified diff that `git apply`/`patch -p1` take; a new file comes from /dev/null."""
    before = "" if extra.old is None else extra.old
    old_name = "/dev/null" if extra.old is None else f"a/{display}"
    lines = difflib.unified_diff(before.splitlines(keepends=True), extra.text.splitlines(keepends=True),
                                 old_name, f"b/{display}", n=3)
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


def write(extra: ExtraFile) -> None:
    """Write a created or updated file atomically (a new one with mode 0644, as editors make)."""
    from .source import write_text_file

    write_text_file(extra.dest, extra.text)


def apply(report, mode: str, output_dir: Optional[str] = None,
          input_root: Optional[str] = None) -> Tuple[List[str], bool]:
    """Do what `mode` says with the generated files of a run: (lines to tell the user, whether
    some are still to be written, which --check and --diff count as a change).

    write / output-dir: create or update them; otherwise add their diffs to `report.diffs` (under
    the file they belong to, after its own diff).
    """
    from .diffs import patch_path

    def where(path: str) -> str:
        if output_dir is None:
            return path
        return os.path.join(output_dir, os.path.relpath(os.path.abspath(path), input_root or "."))

    lines: List[str] = []
    writes = mode in ("write", "output-dir")
    waiting = False
    for extra in pending(report.results, where):
        shown = report.display_path(extra.path)
        if extra.action == "keep":
            lines.append(f"npu-migrate: warning: {extra.warning}")
            continue
        verb = "created" if extra.action == "create" else "updated"
        if writes:
            write(extra)
            lines.append(f"{report.display_path(extra.dest)}: {verb}")
        else:
            waiting = True
            report.diffs[extra.owner] = report.diffs.get(extra.owner, "") + diff(extra, patch_path(shown))
            lines.append(f"{shown}: would be {verb}")
    return lines, waiting
