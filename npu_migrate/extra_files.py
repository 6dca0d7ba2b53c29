"""Files a run generates next to the ones it migrates (FileResult.extra_files: the ModelArts boot
file): what to do with each, its diff, and writing it.

The engine only says what the file should contain; here the disk decides: a missing file is
created, a file with the same first line (the generator's marker) is updated when it differs, and
any other file of that name is the user's and is never overwritten (a warning says so).

A marker line may carry `checksum XXXXXXXXXXXX` (`stamp()`: a hash of the rest of the file as it
was generated). Such a file is updated only while it is as npu-migrate wrote it: one edited by
hand since (a launch script given its arguments, a rank table filled in) is kept, with a warning.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from typing import Callable, Dict, Iterable, List, Optional, Set, Tuple

from .model import FileResult, WriteBack


CHECKSUM_RE = re.compile(r"checksum [0-9a-f]{12}")
CHECKSUM_SLOT = "checksum 000000000000"


def _checksum(body: str) -> str:
    return "checksum " + hashlib.sha256(body.encode("utf-8")).hexdigest()[:12]


def _marker_and_body(text: str):
    """The marker (the first line; for a script, its `#!` line and the next) and the rest."""
    lines = text.split("\n", 2 if text.startswith("#!") else 1)
    head = "\n".join(lines[:-1]) if len(lines) > 1 else lines[0]
    return head, lines[-1] if len(lines) > 1 else ""


def stamp(text: str) -> str:
    """`text` with the CHECKSUM_SLOT of its marker filled in (a hash of the other lines)."""
    head, body = _marker_and_body(text)
    return text.replace(CHECKSUM_SLOT, _checksum(body), 1) if CHECKSUM_SLOT in head else text


def _split(text: str):
    """(marker without its checksum, the checksum or None, the rest)."""
    head, body = _marker_and_body(text)
    found = CHECKSUM_RE.search(head)
    return CHECKSUM_RE.sub(CHECKSUM_SLOT, head), found.group(0) if found else None, body


@dataclass
class ExtraFile:
    owner: str  # the path of the migrated file it belongs to
    path: str  # as the engine named it (next to `owner`)
    dest: str  # where it is written: `path`, or its place in the --output-dir copy
    text: str
    old: Optional[str]  # what is on disk now; None when there is no such file

    @property
    def action(self) -> str:
        """create | update | keep (a file of the user's is in the way) | edited (ours, changed by hand)."""
        if self.old is None:
            return "create"
        new_marker, _, _ = _split(self.text)
        old_marker, old_sum, old_body = _split(self.old)
        if old_marker != new_marker:
            return "keep"
        if old_sum is not None and old_sum != _checksum(old_body):
            return "edited"
        return "update"

    @property
    def warning(self) -> str:
        if self.action == "edited":
            return (f"{self.path}: not updated: it was edited after npu-migrate generated it "
                    "(delete it to have it generated again)")
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
    wanted: Dict[str, Set[str]] = {}  # dest -> the texts the files of the run want there
    for result in results:
        if not result.error:
            for path, text in result.extra_files.items():
                wanted.setdefault(where(path), set()).add(text)
    seen = set()
    for result in results:
        if result.error:
            continue
        for path, text in sorted(result.extra_files.items()):
            dest = where(path)
            if len(wanted[dest]) > 1 or dest in seen:
                continue  # several scripts want different files there (see conflicts()), or made it already
            seen.add(dest)
            old = _read(dest)
            if old != text:
                found.append(ExtraFile(result.path, path, dest, text, old))
    return found


def not_written_from_stdin(results: Iterable[FileResult]) -> List[str]:
    """A text read from stdin is printed, and nothing is written beside it: the files generated
    for it (the ModelArts or distributed module its new import names, a launch script) that are
    missing or out of date on disk are named, or the printed script imports a module that is not
    there (ModuleNotFoundError when the job starts)."""
    lines = []
    for extra in pending(results):
        if extra.action in ("keep", "edited"):  # a file of the user's, or edited: a write would keep it too
            lines.append(f"npu-migrate: warning: {extra.warning}")
            continue
        verb = "create" if extra.action == "create" else "update"
        lines.append(f"npu-migrate: warning: {extra.path} (generated beside {extra.owner}) is not written from "
                     f"stdin: run npu-migrate on {extra.owner} with these options and --write to {verb} it")
    return lines


def conflicts(results: Iterable[FileResult], where: Callable[[str], str] = lambda path: path) -> List[str]:
    """Generated files that several migrated files want with different contents (two TF scripts
    in one folder, each with its run_8p.sh): written for none of them."""
    owners: Dict[Tuple[str, str], Dict[str, List[str]]] = {}
    for result in results:
        if not result.error:
            for path, text in result.extra_files.items():
                owners.setdefault((where(path), path), {}).setdefault(text, []).append(result.path)
    return [f"{path}: not written: {' and '.join(sorted(p for paths in texts.values() for p in paths))} "
            "would each generate it differently (write it by hand, or run npu-migrate on one of them)"
            for (dest, path), texts in sorted(owners.items()) if len(texts) > 1]


def diff(extra: ExtraFile, display: str) -> str:
    """A unified diff that `git apply`/`patch -p1` take; a new file comes from /dev/null."""
    before = "" if extra.old is None else extra.old
    from .diffs import header_name

    old_name = "/dev/null" if extra.old is None else header_name(f"a/{display}")
    import difflib  # (only for a diff: a --check run does not load it)

    lines = difflib.unified_diff(before.splitlines(keepends=True), extra.text.splitlines(keepends=True),
                                 old_name, header_name(f"b/{display}"), n=3)
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


def write(extra: ExtraFile) -> None:
    """Write a created or updated file atomically (a new one with mode 0644, as editors make, or
    0755 for a script with a `#!` line)."""
    from .source import atomic_write, write_text_file

    if extra.old is None and extra.text.startswith("#!"):
        atomic_write(extra.dest, extra.text.encode("utf-8"), 0o755)
        return
    write_text_file(extra.dest, extra.text)


def apply(report, mode: WriteBack, output_dir: Optional[str] = None,
          input_root: Optional[str] = None) -> Tuple[List[str], bool]:
    """Do what `mode` says with the generated files of a run: (lines to tell the user, whether
    some are still to be written, which --check and --diff count as a change).

    write / output-dir: create or update them (one that cannot be written is a failed result in
    `report.results`); otherwise add their diffs to `report.diffs` (under the file they belong
    to, after its own diff).
    """
    from .diffs import patch_path

    def where(path: str) -> str:
        if output_dir is None:
            return path
        return os.path.join(output_dir, os.path.relpath(os.path.abspath(path), input_root or "."))

    lines: List[str] = [f"npu-migrate: warning: {line}" for line in conflicts(report.results, where)]
    writes = mode.writes
    waiting = False
    for extra in pending(report.results, where):
        shown = report.display_path(extra.path)
        if extra.action in ("keep", "edited"):
            lines.append(f"npu-migrate: warning: {extra.warning}")
            continue
        verb = "created" if extra.action == "create" else "updated"
        if writes:
            try:
                write(extra)
            except OSError as exc:  # a read-only folder, a full disk: a failed file, the run goes on
                report.results.append(FileResult(path=extra.dest, error=f"cannot write: {exc.strerror or exc}"))
                continue
            lines.append(f"{report.display_path(extra.dest)}: {verb}")
        else:
            waiting = True
            report.diffs[extra.owner] = report.diffs.get(extra.owner, "") + diff(extra, patch_path(shown))
            lines.append(f"{shown}: would be {verb}")
    return lines, waiting
