"""`--output-dir OUT`: a migrated copy of the input tree, the input left as it was.

Layout: one folder given -> its contents land in OUT (`npu-migrate src --output-dir out` gives
`out/train.py`); several paths, or files -> they keep their places relative to their common folder.
Every file the run selects (same excludes and .gitignore as a migration) is copied: migrated files
get their new text, every other file its bytes, all with their file modes. Symlinks are never
followed: a link to something inside the input becomes the same (relative) link in OUT; a link
that leads out of the input is left out, with a warning. OUT must not be inside an input, must
not contain one, and must be empty or not exist yet: nothing already there is overwritten.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Dict, Iterable, List, Sequence, Tuple

from .discovery import FileFilter, walk

if TYPE_CHECKING:
    from .source import Source


class OutputDirError(Exception):
    """OUT cannot be used; the message says why."""


def input_root(paths: Sequence[str]) -> str:
    """The folder whose layout OUT mirrors."""
    if len(paths) == 1 and os.path.isdir(paths[0]):
        return os.path.abspath(paths[0])
    folders = [os.path.abspath(p) if os.path.isdir(p) else os.path.dirname(os.path.abspath(p)) for p in paths]
    return os.path.commonpath(folders)


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _stays_inside(dest: str, real_out: str) -> bool:
    """Whether writing `dest` lands in OUT. OUT was empty when the run began, but something may
    have planted a symlink in it since (a folder leading out, or `dest` itself): never follow one."""
    return _within(os.path.realpath(os.path.dirname(dest)), real_out) and not os.path.islink(dest)


def check(paths: Sequence[str], out: str) -> None:
    """Refuse an OUT that overlaps an input or already holds files, or cannot be created
    (before anything is migrated); create it."""
    real_out = os.path.realpath(out)
    for p in paths:
        real_in = os.path.realpath(p)
        if os.path.isdir(real_in) and _within(real_out, real_in):
            raise OutputDirError(f"--output-dir {out} is inside the input {p}; choose a folder outside it")
        if _within(real_in, real_out):
            raise OutputDirError(f"the input {p} is inside --output-dir {out}; choose another folder")
    if os.path.lexists(out):
        if not os.path.isdir(out):
            raise OutputDirError(f"--output-dir {out} exists and is not a folder")
        if os.listdir(out):
            raise OutputDirError(f"--output-dir {out} is not empty; nothing there is overwritten, choose an empty or new folder")
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as exc:
        raise OutputDirError(f"--output-dir {out}: cannot create it: {exc.strerror or exc}") from None


def plan(paths: Sequence[str], file_filter: FileFilter) -> Tuple[List[str], List[str]]:
    """(regular files, symlinks) to reproduce in OUT, each once, in a stable order."""
    files: List[str] = []
    links: List[str] = []
    seen = set()
    for p in paths:
        if os.path.isdir(p):
            entries: Iterable[Tuple[str, bool]] = walk(p, file_filter)
        else:
            entries = [(p, True)]
        for path, regular in entries:
            key = os.path.abspath(path)
            if key in seen:
                continue
            seen.add(key)
            (files if regular else links).append(path)
    return files, links


def write_tree(
    paths: Sequence[str],
    out: str,
    file_filter: FileFilter,
    migrated: Dict[str, Tuple[Source, str]],
) -> Tuple[List[str], Dict[str, str]]:
    """Copy the selected tree into OUT; `migrated` maps a path to (Source, new text).

    Returns (warnings, errors by path): a migrated file that cannot be written is copied as it
    was; a file that cannot be copied either (a full disk, a name too long) is an error, and the
    others are still copied. Every copy is atomic (source.atomic_copy): an interruption leaves
    OUT incomplete, never a truncated file in it.
    """
    from .source import SourceError, atomic_copy, atomic_write, encode

    root = input_root(paths)
    real_root = os.path.realpath(root)
    files, links = plan(paths, file_filter)
    warnings: List[str] = []
    errors: Dict[str, str] = {}
    os.makedirs(out, exist_ok=True)
    real_out = os.path.realpath(out)
    # Two names given for one file (`link.py a.py`, a symlink and its target) are migrated once
    # (the runner keys files by their real path), under one of the names: the copy under the
    # other name is the same migrated text, never the original beside it.
    by_real = {os.path.realpath(p): entry for p, entry in migrated.items()}
    for path in files:
        dest = os.path.join(out, os.path.relpath(os.path.abspath(path), root))
        entry = migrated.get(path) or by_real.get(os.path.realpath(path))
        try:
            os.makedirs(os.path.dirname(dest), exist_ok=True)
        except OSError as exc:
            errors[path] = f"cannot write to --output-dir: {exc.strerror or exc}"
            continue
        if not _stays_inside(dest, real_out):
            why = "not written: a symlink in --output-dir leads out of it"
            if entry is not None:
                errors[path] = why
            else:
                warnings.append(f"{path}: {why}")
            continue
        if entry is not None:
            source, new_text = entry
            try:
                atomic_write(dest, encode(new_text, source.encoding), source.mode)
                continue
            except SourceError as exc:
                errors[path] = f"{exc}; copied unchanged"
            except OSError as exc:  # a full disk, a name too long, ...
                errors[path] = f"cannot write to --output-dir: {exc.strerror or exc}; copied unchanged"
        try:
            atomic_copy(path, dest)
        except OSError as exc:
            errors[path] = f"cannot copy to --output-dir: {exc.strerror or exc}"
    for link in links:
        target = os.path.realpath(link)
        rel_link = os.path.relpath(os.path.abspath(link), root)
        dest = os.path.join(out, rel_link)
        copied_target = os.path.join(out, os.path.relpath(target, real_root))
        if not os.path.exists(target):
            warnings.append(f"{link}: symlink not copied: it is dangling")
        elif not _within(target, real_root):
            warnings.append(f"{link}: symlink not copied: it leads out of the input")
        elif not os.path.lexists(copied_target):
            warnings.append(f"{link}: symlink not copied: its target is not part of the copy")
        else:
            try:
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                if not _stays_inside(dest, real_out):
                    warnings.append(f"{link}: symlink not copied: a symlink in --output-dir leads out of it")
                    continue
                # Relative, so the copy points into OUT, never back into the input.
                os.symlink(os.path.relpath(copied_target, os.path.dirname(dest)), dest)
            except OSError as exc:
                errors[link] = f"cannot write to --output-dir: {exc.strerror or exc}"
    return warnings, errors
