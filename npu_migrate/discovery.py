"""Which files a run looks at: files given explicitly, and the files below given folders.

The rules, like ruff's and black's:
- folders are walked without following symlinks (to folders or to files), so a run never leaves
  the tree it was given and a symlink loop cannot hang it; the target of an in-tree link is found
  on its own anyway;
- excluded: the default folders (version control, virtualenvs, build output, caches; `--exclude`
  replaces this list, `--extend-exclude` adds to it), and whatever `.gitignore` files say, nested
  ones included, with git's precedence (the deepest file decides; nothing below an ignored folder
  comes back) plus `.git/info/exclude`;
- a file given explicitly is always taken, unless `force_exclude` is set (pre-commit passes file
  names one by one; black and ruff call this `--force-exclude`);
- every file once (by real path), in a stable order.

Exclude patterns are gitignore-style globs matched against paths relative to `root` (the folder of
the configuration file in use, else the current folder): `legacy/` or `*_pb2.py` match at any depth,
`/legacy` only at the root.
"""

from __future__ import annotations

import os
import re
import warnings
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, Iterator, List, NamedTuple, Optional, Sequence, Set, Tuple

from .project_files import NameFilter, Project

DEFAULT_EXCLUDES = (
    ".git/", ".hg/", ".svn/", ".bzr/", ".venv/", "venv/", ".tox/", ".nox/", ".eggs/", "*.egg-info/",
    "build/", "dist/", "_build/", "buck-out/", "node_modules/", ".ipynb_checkpoints/", "site-packages/",
    "__pycache__/", ".mypy_cache/", ".pytest_cache/", ".ruff_cache/", ".pytype/", ".direnv/",
)
PYTHON_SUFFIXES = (".py",)
MAX_IGNORE_FILE_BYTES = 4 * 2**20
KNOWN_PYTHON_SUFFIXES = (".py", ".pyi", ".pyw")


def is_source(path: str) -> bool:
    """Whether a folder walk picks this file up: Python, or a file a front end claims
    (`.ipynb`, `requirements.txt`, a `#!/bin/bash` script without a suffix, ...)."""
    from .frontends import claims

    return path.endswith(PYTHON_SUFFIXES) or claims(path)


@dataclass
class Selection:
    files: List[str] = field(default_factory=list)  # to migrate: each once, sorted below each path given
    errors: List[str] = field(default_factory=list)  # one line each: "PATH: no such file or directory"
    skipped: List[Tuple[str, str]] = field(default_factory=list)  # explicit files left out, and why
    unlistable: List[Tuple[str, str]] = field(default_factory=list)  # folders that cannot be listed, and why
    empty: List[str] = field(default_factory=list)  # folders given in which there is nothing to migrate
    stray: List[str] = field(default_factory=list)  # temporary files of atomic writes killed with -9


class InvalidPattern(ValueError):
    """An exclude pattern (--exclude, --extend-exclude, config) that is no gitignore pattern."""

    def __init__(self, pattern: str) -> None:
        super().__init__(f"invalid exclude pattern {pattern!r}: not a gitignore pattern "
                         "(a trailing backslash, or '!' alone)")
        self.pattern = pattern


def _valid_pattern(line: str) -> bool:
    try:
        GlobSpec.of([line])
    except ValueError:
        return False
    return True


# The gitignore patterns matched here without regular expressions (SimpleSpec): a name, or `*`
# and the end of a name, matching a path component at any depth (`build/`, `*.egg-info/`,
# `*.pyc`); a path of names anchored at the spec's folder (`/build`, `bench/.cache/`). A trailing
# `/`: folders only. Blank lines and comments. A spec with any other line (other wildcards, `!`,
# escapes, spaces) is a GlobSpec, whole. tests/test_discovery.py compares both with pathspec's
# GitIgnoreSpec (a test dependency only) on every pattern and path it lists.
_NAME = r"(?!\.+(?:/|$))[A-Za-z0-9._+-]+"
_UNANCHORED = re.compile(rf"(\*?)({_NAME})(/?)")
_ANCHORED = re.compile(rf"/?((?:{_NAME}/)*{_NAME})(/?)")


class _Include(NamedTuple):
    include: Optional[bool]  # as pathspec's CheckResult: True when a pattern matches, else None


class SimpleSpec:
    """A gitignore spec of the simple patterns above, matched as git does; `of` gives None for
    any other spec."""

    def __init__(self, names: Sequence[Tuple[str, bool, bool]], paths: Sequence[Tuple[str, bool]]) -> None:
        # names: (name, a suffix after `*`, folders only). A folder is excluded with all below
        # it, so every pattern applies to each folder of a path, and those that are not for
        # folders only to its last part too when that is a file.
        self.folder_names = frozenset(name for name, suffix, _ in names if not suffix)
        self.folder_suffixes = tuple(name for name, suffix, _ in names if suffix)
        self.file_names = frozenset(name for name, suffix, dirs_only in names if not suffix and not dirs_only)
        self.file_suffixes = tuple(name for name, suffix, dirs_only in names if suffix and not dirs_only)
        self.paths = paths  # (path relative to the spec's folder, folders only)

    @classmethod
    def of(cls, lines: Sequence[str]) -> "Optional[SimpleSpec]":
        names, paths = [], []
        for line in lines:
            if not line or line.startswith("#"):
                continue
            m = _UNANCHORED.fullmatch(line)
            if m:
                names.append((m.group(2), bool(m.group(1)), bool(m.group(3))))
                continue
            m = _ANCHORED.fullmatch(line)
            if m:
                paths.append((m.group(1), bool(m.group(2))))
                continue
            return None
        return cls(names, paths)

    def match_file(self, rel: str) -> bool:
        """`rel`: relative to the spec's folder, with a trailing `/` for a folder (as pathspec)."""
        is_dir = rel.endswith("/")
        plain = rel[:-1] if is_dir else rel
        parts = plain.split("/")
        last = parts[-1]
        if not is_dir:
            if last in self.file_names or (self.file_suffixes and last.endswith(self.file_suffixes)):
                return True
            parts.pop()
        for part in parts:
            if part in self.folder_names or (self.folder_suffixes and part.endswith(self.folder_suffixes)):
                return True
        for path, dirs_only in self.paths:
            if plain.startswith(path + "/") or (plain == path and (is_dir or not dirs_only)):
                return True
        return False

    def check_file(self, rel: str) -> _Include:
        return _Include(True if self.match_file(rel) else None)


class GlobSpec:
    """Any gitignore spec, matched as pathspec's GitIgnoreSpec (1.1, its default "simple" backend)
    matches it, which replicates git: each line is one regular expression (`_pattern_regex`); of
    the patterns that match a path, the last that matches it itself decides, else the last that
    matches a folder above it. pathspec was imported for this (~0.01 s of a warm run: its import
    probes optional backends), then compiled every line and searched them one by one for each
    path; here one expression of every line answers first whether any matches (most paths: none),
    and a line's own expression is compiled only when one does. tests/test_discovery.py compares
    the verdicts with pathspec's on every pattern and path it lists, and on generated ones."""

    def __init__(self, patterns: Sequence[Tuple[str, bool]]) -> None:
        # (regex, include, [its compiled expression, once needed]), the last line first
        self._patterns: List[Tuple[str, bool, List[Optional["re.Pattern[str]"]]]] = [
            (regex, include, [None]) for regex, include in reversed(patterns)]
        self._any = _quietly_compiled("|".join(r.replace(_DIR_MARK, "/") for r, _ in patterns)) if patterns else None

    @classmethod
    def of(cls, lines: Sequence[str]) -> "GlobSpec":
        """Raises ValueError for a line that is no pattern: a trailing backslash, `!` alone (as
        pathspec), or a range that is no regular expression (`[z-a]`: pathspec raised re.error)."""
        patterns = [p for p in map(_pattern_regex, lines) if p is not None]
        try:
            return cls(patterns)
        except re.error:
            raise ValueError("a range that is no regular expression") from None

    def check_file(self, rel: str) -> _Include:
        """`rel`: relative to the spec's folder, with a trailing `/` for a folder (as pathspec)."""
        if os.sep != "/":
            rel = rel.replace(os.sep, "/")
        if rel.startswith("/"):
            rel = rel[1:]
        elif rel.startswith("./"):
            rel = rel[2:]
        if self._any is None or self._any.search(rel) is None:
            return _Include(None)
        folder_verdict = None
        for regex, include, compiled in self._patterns:
            expression = compiled[0]
            if expression is None:
                expression = compiled[0] = _quietly_compiled(regex)
            m = expression.search(rel)
            if m is not None:
                if not m.groupdict().get("d"):
                    return _Include(include)  # the path itself matched: the last such line decides
                if folder_verdict is None:
                    folder_verdict = include  # (a folder above it matched: the last such line)
        return _Include(folder_verdict)

    def match_file(self, rel: str) -> bool:
        return bool(self.check_file(rel).include)


def _quietly_compiled(regex: str) -> "re.Pattern[str]":
    with warnings.catch_warnings():  # ("[[:alpha:]]": `re` warns of a nested set; pathspec printed it)
        warnings.simplefilter("ignore")
        return re.compile(regex)


# pathspec's GitIgnoreSpecPattern.pattern_to_regex, ported (1.1.1; its `_DIR_MARK` group is `d`).
_DIR_MARK = "(?P<d>/)"


def _pattern_regex(line: str) -> Optional[Tuple[str, bool]]:
    """(the regular expression of a gitignore line, whether it excludes: False for `!...`), or
    None for a line that matches nothing (blank, comment, `/`, a range with no closing `]`).
    Raises ValueError for a line that is no pattern."""
    if not line.endswith("\\ "):  # an escaped space ends it; other trailing whitespace is cut
        line = line.rstrip()
    if not line or line.startswith("#") or line == "/":
        return None
    include = not line.startswith("!")
    segs = (line if include else line[1:]).split("/")
    is_dir = not segs[-1]
    if not segs[0]:
        del segs[0]  # `/x`: relative to the spec's folder
    elif len(segs) == 1 or (len(segs) == 2 and not segs[1]):
        if segs[0] != "**":
            segs.insert(0, "**")  # one name: at any depth
    if not segs:
        raise ValueError("no pattern")  # `!` alone
    if not segs[-1]:
        segs[-1] = "**"  # `x/`: everything below the folder
    for i in range(len(segs) - 1, 0, -1):
        if segs[i - 1] == "**" and segs[i] == "**":
            del segs[i]
    if segs == ["**"]:
        return (_DIR_MARK if is_dir else ".", include)
    if segs == ["**", "*"]:
        return (".", include)
    if segs == ["**", "*", "**"]:
        return (_DIR_MARK if is_dir else "/", include)
    out: List[str] = []
    need_slash = False
    end = len(segs) - 1
    for i, seg in enumerate(segs):
        if seg == "**":
            if i == 0:
                out.append("^(?:.+/)?")
            elif i < end:
                out.append("(?:/.+)?")
                need_slash = True
            else:
                out.append(_DIR_MARK if is_dir else "/")
            continue
        if i == 0:
            out.append("^")
        if need_slash:
            out.append("/")
        if seg == "*":
            out.append("[^/]+")
        else:
            glob = _glob_regex(seg)
            if glob is None:
                return None  # git discards a line with a range it cannot read
            out.append(glob)
        if i == end:
            out.append(f"(?:{_DIR_MARK}|$)")  # `x`: the file x, or the folder x and all below it
        need_slash = True
    return ("".join(out), include)


def _glob_regex(seg: str) -> Optional[str]:
    """One path segment's glob as a regular expression (pathspec's _translate_segment_glob,
    ranges raising): None for a `[` with no closing `]`; ValueError for a trailing backslash."""
    regex = ""
    escape = False
    i, end = 0, len(seg)
    while i < end:
        char = seg[i]
        i += 1
        if escape:
            escape = False
            regex += re.escape(char)
        elif char == "\\":
            escape = True
        elif char == "*":
            regex += "[^/]*"
        elif char == "?":
            regex += "[^/]"
        elif char == "[":
            j = i
            if j < end and seg[j] in "!^":
                j += 1
            if j < end and seg[j] == "]":
                j += 1
            while j < end and seg[j] != "]":
                j += 1
            if j >= end:
                return None
            j += 1
            expr = "["
            if seg[i] in "!^":
                expr += "^"
                i += 1
            regex += expr + seg[i:j].replace("\\", "\\\\")
            i = j
        else:
            regex += re.escape(char)
    if escape:
        raise ValueError("a trailing backslash")
    return regex


def _spec(lines: Sequence[str]) -> Any:
    """The gitignore spec of `lines`: a SimpleSpec when it can be, else a GlobSpec. Raises
    ValueError for a line that is no pattern."""
    simple = SimpleSpec.of(lines)
    return simple if simple is not None else GlobSpec.of(lines)


class FileFilter:
    """Decides whether a path is excluded, by the exclude patterns and by `.gitignore` files."""

    def __init__(self, root: str = ".", exclude: Optional[Sequence[str]] = None,
                 extend_exclude: Sequence[str] = (), respect_gitignore: bool = True) -> None:
        self.root = os.path.abspath(root)
        patterns = list(DEFAULT_EXCLUDES if exclude is None else exclude) + list(extend_exclude)
        try:
            self.exclude = _spec(patterns)
        except ValueError:  # a line that is no pattern: a usage error (cli.py), not a traceback
            raise InvalidPattern(next(p for p in patterns if not _valid_pattern(p))) from None
        self.respect_gitignore = respect_gitignore
        self._ignore_files: Dict[str, list] = {}  # folder -> its gitignore specs (cached)
        # folder -> the names of its ignore files' first parts (".gitignore", ".git") its listing
        # does not hold, in any case: not looked for (note_listing)
        self._absent: Dict[str, Set[str]] = {}
        self._repo_tops: Dict[str, Optional[str]] = {}
        self._chains: Dict[tuple, list] = {}
        self.unreadable: Dict[str, Tuple[str, str]] = {}  # folder -> (its ignore file that cannot be read, why)

    # -- the two questions discovery asks -------------------------------------------------------

    def excluded_entry(self, path: str, is_dir: bool, base: Optional[str] = None) -> Optional[str]:
        """Why `path` itself is excluded (its folders are known not to be), or None.

        `base`: a folder the user asked for although it is excluded itself; below it, patterns
        are matched relative to it and .gitignore files above it are not consulted, so that
        `npu-migrate build/` does migrate what is in build/.
        """
        return self._excluded(os.path.abspath(path), is_dir, os.path.abspath(base) if base else None)

    def excluded_path(self, path: str) -> Optional[str]:
        """Like `excluded_entry`, also looking at every folder above `path` (for explicit files)."""
        path = os.path.abspath(path)
        top = self._repo_top(os.path.dirname(path)) or self.root
        folders = []
        parent = os.path.dirname(path)
        while _is_within(parent, top) and parent != top:
            folders.append(parent)
            parent = os.path.dirname(parent)
        for folder in reversed(folders):
            why = self._excluded(folder, True, None)
            if why:
                return why
        return self._excluded(path, os.path.isdir(path), None)

    # -- internals (absolute, normalised paths) ---------------------------------------------------

    def _excluded(self, path: str, is_dir: bool, base: Optional[str]) -> Optional[str]:
        rel = _relative(path, base or self.root)
        if rel and self.exclude.match_file(rel + "/" if is_dir else rel):
            return "excluded"
        if self.respect_gitignore and self._gitignored(path, is_dir, base):
            return "ignored by .gitignore"
        return None

    def _repo_top(self, folder: str) -> Optional[str]:
        """The nearest folder at or above `folder` that holds `.git`, or None."""
        seen = []
        current = folder
        while True:
            if current in self._repo_tops:
                found = self._repo_tops[current]
                break
            seen.append(current)
            if os.path.exists(os.path.join(current, ".git")):
                found = current
                break
            parent = os.path.dirname(current)
            if parent == current:
                found = None
                break
            current = parent
        for f in seen:
            self._repo_tops[f] = found
        return found

    def note_listing(self, folder: str, names: Iterable[str]) -> None:
        """The names in `folder`, as a walk listed them: an ignore file its listing does not
        hold is not looked for (a walk tried two opens in every folder, nearly all failing)."""
        if folder not in self._ignore_files:
            dotted = {name.lower() for name in names if name[:1] == "."}  # (any case: macOS opens .GitIgnore)
            self._absent[folder] = {first for first in (".gitignore", ".git") if first not in dotted}

    def _specs_of(self, folder: str) -> list:
        """The gitignore specs that live in `folder` (.gitignore, and .git/info/exclude at a repo top)."""
        if folder not in self._ignore_files:
            from .source import SourceError, read_regular

            specs = []
            absent = self._absent.pop(folder, set())
            for name in (".gitignore", os.path.join(".git", "info", "exclude")):
                if name.split(os.sep, 1)[0] in absent:
                    continue
                full = os.path.join(folder, name)
                try:
                    # bounded, and never a FIFO (which hung the walk) nor /dev/zero (issue 30.6)
                    lines = read_regular(full, MAX_IGNORE_FILE_BYTES).decode("utf-8", "replace").splitlines()
                except FileNotFoundError:
                    continue
                except (OSError, SourceError) as exc:
                    if os.path.lexists(full):
                        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                        self.unreadable[folder] = (name, why)
                    continue
                try:
                    specs.append(_spec(lines))
                except ValueError:  # git skips a line that is no pattern ('a\\', '!'); so does the walk
                    specs.append(_spec([line for line in lines if _valid_pattern(line)]))
            self._ignore_files[folder] = specs
        return self._ignore_files[folder]

    def unreadable_ignore_file(self, folder: str, base: Optional[str] = None, above: bool = False) -> Optional[str]:
        """Why an ignore file of `folder` (with `above`: also of the folders above it whose ignore
        files apply to it) could not be read (a FIFO, a device, too large), or None: such a folder
        is not walked (what it would exclude is unknown) and fails the run."""
        if not self.respect_gitignore:
            return None
        for where in self._chain_folders(folder, base) if above else [folder]:
            self._specs_of(where)
            if where in self.unreadable:
                name, why = self.unreadable[where]
                shown = name if where == folder else os.path.join(os.path.relpath(where, folder), name)
                return f"cannot read {shown}: {why}"
        return None

    def _chain_folders(self, parent: str, base: Optional[str]) -> List[str]:
        """The folders whose ignore files apply to entries of `parent`, deepest first: from
        `parent` up to the repository top (outside a repository: up to the root)."""
        top = base or self._repo_top(parent)
        if top is None and _is_within(parent, self.root):
            top = self.root
        folders, folder = [], parent
        while top is not None and _is_within(folder, top):
            folders.append(folder)
            if folder == top:
                break
            folder = os.path.dirname(folder)
        return folders

    def _ignore_chain(self, parent: str, base: Optional[str]) -> list:
        """(folder, spec) of every gitignore that applies to entries of `parent`, deepest first:
        from `parent` up to the repository top (outside a repository: up to the root)."""
        key = (parent, base)
        chain = self._chains.get(key)
        if chain is None:
            chain = [(folder, spec) for folder in self._chain_folders(parent, base) for spec in self._specs_of(folder)]
            self._chains[key] = chain
        return chain

    def _gitignored(self, path: str, is_dir: bool, base: Optional[str]) -> bool:
        # The deepest .gitignore with a matching pattern decides; within a file, the last match.
        for folder, spec in self._ignore_chain(os.path.dirname(path), base):
            rel = _relative(path, folder)
            result = spec.check_file(rel + "/" if is_dir else rel)
            if result.include is not None:
                return bool(result.include)
        return False


def _is_within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _relative(path: str, folder: str) -> str:
    """`path` below `folder`, with forward slashes; "" for the folder itself. Outside `folder`,
    the whole path without its leading slash, so unanchored patterns still apply."""
    prefix = folder.rstrip(os.sep) + os.sep
    rel = path[len(prefix):] if path.startswith(prefix) else ("" if path == folder else path.lstrip(os.sep))
    return rel.replace(os.sep, "/") if os.sep != "/" else rel


def discover(paths: Sequence[str], file_filter: Optional[FileFilter] = None, force_exclude: bool = False,
             known_files_only: bool = False) -> Selection:
    """The files to migrate for `paths`. A path that does not exist is an error message, not an
    exception; a folder that cannot be listed is one entry of `unlistable` (never skipped
    quietly); a folder given with nothing to migrate in it is one of `empty`.

    `known_files_only`: a file named explicitly is taken only when a folder walk would take it
    (or it is Python by its suffix or shebang): pre-commit passes every file of the types the
    hooks ask for, README and LICENSE included."""
    file_filter = file_filter or FileFilter()
    selection = Selection()
    seen = set()
    for p in paths:
        if not os.path.lexists(p):
            selection.errors.append(f"{p}: no such file or directory")
            continue
        if os.path.isdir(p):
            if force_exclude:
                why = file_filter.excluded_path(p)
                if why:
                    selection.skipped.append((p, why))
                    continue
            # Nothing below a folder is reached through a link, so its real path is the
            # folder's real path plus the rest: one realpath() per folder given, not per file.
            abs_top, real_top = os.path.abspath(p), os.path.realpath(p)
            found = []
            for f, full, regular in _walk(p, file_filter, selection.unlistable):
                if regular and is_source(f):
                    found.append((f, real_top + full[len(abs_top):]))
                elif regular and is_temp_file(os.path.basename(f)):
                    selection.stray.append(f)
            found.sort()
            if not found and p not in (u for u, _why in selection.unlistable):
                selection.empty.append(p)
        else:
            why = file_filter.excluded_path(p) if force_exclude else None
            if why is None and not is_source(p):
                why = not_python_reason(p)
                if why is None and known_files_only and not _python_by_name_or_shebang(p):
                    why = "not a kind of file npu-migrate migrates"
            if why:
                selection.skipped.append((p, why))
                continue
            found = [(p, os.path.realpath(p))]
        for f, key in found:
            if key not in seen:
                seen.add(key)
                selection.files.append(f)
    return selection


def walk(top: str, file_filter: FileFilter, max_depth: Optional[int] = None,
         wanted: Optional[NameFilter] = None) -> Iterator[Tuple[str, bool]]:
    """(path, is_regular_file) for everything below `top` that is not excluded (`max_depth`:
    folder levels below `top`, None: all; `wanted`: which names of what is not a folder to yield,
    the others are not matched against the excludes, None: all).

    Symlinks (to files or folders) are yielded with is_regular_file False and never followed.
    """
    for user_path, _full, regular in _walk(top, file_filter, max_depth=max_depth, wanted=wanted):
        yield user_path, regular


def project_of(paths: Sequence[str], file_filter: FileFilter) -> Project:
    """The run's Project (project_files.py): every walk around its files excludes what
    discovery excludes."""
    def files(folder: str, max_depth: Optional[int] = None, wanted: Optional[NameFilter] = None) -> Iterator[str]:
        for path, regular in walk(folder, file_filter, max_depth, wanted):
            if regular:
                yield path

    return Project(tuple(paths), files, file_filter)


def _walk(top: str, file_filter: FileFilter, unlistable: Optional[List[Tuple[str, str]]] = None,
          max_depth: Optional[int] = None, wanted: Optional[NameFilter] = None) -> Iterator[Tuple[str, str, bool]]:
    """(path as the user would spell it, absolute path, is_regular_file), depth first, sorted.
    A folder that cannot be listed is added to `unlistable` as (path, why)."""
    abs_top = os.path.abspath(top)
    base = abs_top if file_filter.excluded_path(top) else None
    why = file_filter.unreadable_ignore_file(abs_top, base, above=True)
    if why is not None:  # an ignore file above the folder given (at the repository top, say)
        if unlistable is not None:
            unlistable.append((top, why))
        return
    stack = [(top, abs_top, 0)]
    while stack:
        shown_dir, abs_dir, depth = stack.pop()
        try:
            with os.scandir(abs_dir) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            if unlistable is not None:
                unlistable.append((shown_dir, f"cannot list folder: {exc.strerror or exc}"))
            continue
        file_filter.note_listing(abs_dir, (entry.name for entry in entries))
        why = file_filter.unreadable_ignore_file(abs_dir)
        if why is not None:
            if unlistable is not None:
                unlistable.append((shown_dir, why))
            continue
        subdirs = []
        for entry in entries:
            full = os.path.join(abs_dir, entry.name)
            shown = os.path.join(shown_dir, entry.name)
            try:
                is_link = entry.is_symlink()
                is_dir = not is_link and entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if not is_dir and wanted is not None and not wanted(entry.name):
                continue  # (before the excludes: matching them is most of a walk's time)
            if file_filter._excluded(full, is_dir, base):
                continue
            if is_dir:
                if max_depth is None or depth < max_depth:
                    subdirs.append((shown, full, depth + 1))
            elif is_link:
                yield shown, full, False
            elif entry.is_file(follow_symlinks=False):  # not a FIFO, socket or device
                yield shown, full, True
        stack.extend(reversed(subdirs))


def is_temp_file(name: str) -> bool:
    from .source import is_temp_file as temp

    return temp(name)


def _python_by_name_or_shebang(path: str) -> bool:
    if path.endswith(KNOWN_PYTHON_SUFFIXES):
        return True
    if os.path.splitext(os.path.basename(path))[1]:
        return False
    from .frontends import shebang_interpreter

    try:
        from .source import first_line

        first = first_line(path).decode("utf-8", "replace")
    except OSError:
        return True  # the reader reports it
    return (shebang_interpreter(first) or "").startswith("python")


def not_python_reason(path: str) -> Optional[str]:
    """For an explicit file nobody claims: why it is not Python (a non-Python shebang), or None.

    Like black, a file given by name is taken as Python whatever its suffix; but pre-commit also
    selects files by shebang (`types_or: [shell]` matches a `#!/bin/bash` script without a suffix),
    and such a file must be skipped, not reported as Python that does not parse.
    """
    from .frontends import shebang_interpreter

    try:
        from .source import first_line

        first = first_line(path).decode("utf-8", "replace")
    except OSError:
        return None  # the reader reports it
    interpreter = shebang_interpreter(first)
    if interpreter is None:
        return None
    if interpreter.startswith("python"):
        return None
    return f"not a Python file (#!{interpreter})"
