"""The project's own files read as data: the project of a run (`Project`: its paths and the one
walk every look around them goes through), the folder a run's paths share (`common_folder`, where
the configuration and the project's pins are looked for), and dependency lists
(`requirements*.txt` lines, `pyproject.toml` dependency tables), each requirement with the
offset where it is written.

Ground level: the configuration (config.py) and the targets (targets/pins.py) start from
`common_folder`; the requirements front end (frontends/requirements.py) reports from the
dependency lists and the targets read the project's pins from them; none imports another.
Requirement lines are parsed with `packaging` when a reader asks (`Dependency.requirement`);
lines it cannot parse (editable VCS URLs, local paths) give `requirement=None`. A plain line
(a name and clauses of plain release numbers) is read without packaging (`plain_requirement`).
"""

from __future__ import annotations

import functools
import os
import re
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator, List, Optional, Sequence, Tuple

if TYPE_CHECKING:
    from packaging.requirements import Requirement



def toml_module() -> Any:
    """tomllib (tomli before 3.11), imported when a TOML text is parsed: a run that reads the
    shipped parses only imports none (~2 ms of a one-script run: its regexes; test_startup)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on Python < 3.11 only
        import tomli as tomllib
    return tomllib


def __getattr__(name: str) -> Any:
    # `TOMLDecodeError`: tomllib's, imported when looked up (`except project_files.TOMLDecodeError`
    # looks it up only when something was raised)
    if name == "TOMLDecodeError":
        return toml_module().TOMLDecodeError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# A project's walk: (folder, max_depth, wanted) -> the regular files below `folder` a run may read,
# depth first, each folder's files sorted before its subfolders; max_depth: how many folder levels
# below `folder` (None: all); wanted: which file names the caller reads (None: all). A file it does
# not want is not looked at further (the run's excludes and .gitignore files are matched only
# against those it wants: most of a project's files are no shell script the CANN target reads).
Walk = Callable[[str, Optional[int], Optional["NameFilter"]], Iterator[str]]
NameFilter = Callable[[str], bool]

# Folders a walk enters in no run (and, for a call that names no Project, the only ones it
# skips besides hidden folders): version control, virtualenvs, build output, caches.
_SKIPPED = {".git", ".venv", "venv", "node_modules", "__pycache__", "build", "dist", "site-packages", ".tox"}


def _plain_walk(folder: str, max_depth: Optional[int] = None, wanted: Optional[NameFilter] = None) -> Iterator[str]:
    base = folder.rstrip(os.sep).count(os.sep)
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in _SKIPPED and not d.startswith("."))
        if max_depth is not None and root.count(os.sep) - base >= max_depth:
            dirs[:] = []
        for name in sorted(files):
            if wanted is None or wanted(name):
                yield os.path.join(root, name)


@dataclass(frozen=True)
class Project:
    """The project of one run: the paths given, and the walk that every look at files around
    them goes through (the ModelArts scan of an entry script's folder, the CANN versions its
    scripts name), so none reads a file the run excludes. The CLI builds one per run from its
    file filter (discovery.project_of: the default excludes, --exclude, --extend-exclude,
    .gitignore); a library call without one walks as `_plain_walk` does."""

    paths: Tuple[str, ...] = ()
    walk: Walk = _plain_walk
    file_filter: Any = None  # the run's discovery.FileFilter (the output-dir copy, stdin's --force-exclude)

    def files(self, folder: str, max_depth: Optional[int] = None, wanted: Optional[NameFilter] = None) -> Iterator[str]:
        return self.walk(folder, max_depth, wanted)


def common_folder(paths: Sequence[str], stdin_filename: Optional[str] = None) -> str:
    """The folder the configuration search starts from."""
    if not paths or list(paths) == ["-"]:
        start = os.path.dirname(os.path.abspath(stdin_filename)) if stdin_filename else os.getcwd()
        return start
    folders = []
    for p in paths:
        full = os.path.abspath(p)
        folders.append(full if os.path.isdir(full) else os.path.dirname(full))
    try:
        return os.path.commonpath(folders)
    except ValueError:  # different drives (Windows)
        return os.getcwd()

_INDEX_OPTIONS = ("-i", "--index-url", "--extra-index-url", "-f", "--find-links")


@dataclass
class Dependency:
    """One requirement, where it is (offsets of the text it was read from)."""

    text: str  # the requirement as written: "torch==2.1.0+cu118"
    start: int  # offset of its name in the file

    @functools.cached_property
    def requirement(self) -> Optional[Requirement]:
        """`text` parsed by packaging (None: a line it cannot parse), when first asked: the
        targets read only the lines that name their packages (targets/pins.py), and a run
        whose project pins none of them never imports packaging (~0.03 s)."""
        return _parse(self.text)


# A requirement that is a name and at most comma-separated clauses of a comparison and a plain
# release number (`torch`, `torch>=2.1`, `scipy >=1.8,<2.0`): packaging's requirement parser takes
# every such line (each of these operators takes any release number, `~=` one of two parts or
# more, checked below) and reads it as its name and its clauses as written (in their order since
# packaging 25; earlier ones keep them in a set: a reader whose answer depends on the order falls
# back to packaging when two clauses could give it, frontends/requirements._read).
_PLAIN_CLAUSE = r"(~=|==|!=|<=|>=|<|>)\s*([0-9]+(?:\.[0-9]+)*)"
_PLAIN_CLAUSES = re.compile(_PLAIN_CLAUSE)
_PLAIN = re.compile(r"\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*"
                    r"((?:~=|==|!=|<=|>=|<|>)\s*[0-9]+(?:\.[0-9]+)*(?:\s*,\s*(?:~=|==|!=|<=|>=|<|>)\s*[0-9]+(?:\.[0-9]+)*)*)?\s*")


@dataclass(frozen=True)
class PlainClause:
    """One clause of a plain requirement, as packaging's Specifier gives it (`operator`, `version`)."""

    operator: str
    version: str


@dataclass(frozen=True)
class PlainRequirement:
    """A plain requirement line read without packaging: what its Requirement gives of it (the
    name as written, the clauses as written, no URL). tests/test_requirements.py compares."""

    name: str
    specifier: Tuple[PlainClause, ...]
    url: None = None


def plain_requirement(text: str) -> Optional[PlainRequirement]:
    """`text` read as packaging's requirement parser reads it, when it is plain (_PLAIN), without
    importing packaging (its requirement parser, markers and wheel tags: ~0.05 s); None for any
    other line (packaging reads it: Dependency.requirement)."""
    m = _PLAIN.fullmatch(text)
    if m is None:
        return None
    clauses = tuple(PlainClause(op, version) for op, version in _PLAIN_CLAUSES.findall(m.group(2) or ""))
    if any(c.operator == "~=" and "." not in c.version for c in clauses):
        return None  # (`~=1`: invalid for packaging)
    return PlainRequirement(m.group(1), clauses)


@dataclass
class IndexOption:
    url: str
    start: int


def _logical_lines(text: str) -> Iterator[Tuple[int, str]]:
    """(offset, line) with backslash continuations joined (pip's rules) and comments removed.
    A joined line keeps the offset of its first part; its text stays aligned up to the first
    continuation, which is where the name of a requirement is."""
    offset = 0
    pending: Optional[Tuple[int, str]] = None
    for raw in text.splitlines(keepends=True):
        line = raw.rstrip("\r\n")
        start = offset
        offset += len(raw)
        line = re.sub(r"(^|\s)#.*$", "", line)
        if pending is not None:
            start, line = pending[0], pending[1] + line
            pending = None
        if line.endswith("\\"):
            pending = (start, line[:-1])
            continue
        yield start, line
    if pending is not None:
        yield pending


def read_requirements_txt(text: str) -> Tuple[List[Dependency], List[IndexOption]]:
    deps: List[Dependency] = []
    options: List[IndexOption] = []
    for start, line in _logical_lines(text):
        stripped = line.strip()
        if not stripped:
            continue
        lead = len(line) - len(line.lstrip())
        egg = re.match(r"(?:-e|--editable)\s+\S*#egg=([A-Za-z0-9][A-Za-z0-9._-]*)", stripped)
        if egg:  # `-e git+https://github.com/NVIDIA/apex.git#egg=apex`: the name is all we know
            deps.append(Dependency(egg.group(1), start + lead + egg.start(1)))
            continue
        if stripped.startswith("-"):
            m = re.match(r"(%s)(?:\s*=\s*|\s+)(\S+)" % "|".join(map(re.escape, _INDEX_OPTIONS)), stripped)
            if m:
                options.append(IndexOption(m.group(2), start + lead + m.start(2)))
            continue
        # Per-requirement options (`--hash=…`) follow the requirement.
        spec = re.split(r"\s+--?[A-Za-z]", stripped, maxsplit=1)[0].strip()
        deps.append(Dependency(spec, start + lead))
    return deps, options


def _parse(spec: str) -> Optional[Requirement]:
    # (packaging is imported here: this module is loaded for any requirements file, few need it)
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        return Requirement(spec)
    except InvalidRequirement:
        return None


_SEPARATORS = re.compile(r"[-_.]+")


def canonicalize_name(name: str) -> str:
    """PEP 503's normal form of a package name (runs of `-_.` are one `-`, lower case), as
    packaging.utils.canonicalize_name gives it (tests/test_requirements.py compares), without
    importing packaging.utils, which imports its wheel tags (~0.02 s)."""
    return _SEPARATORS.sub("-", name).lower()


@functools.lru_cache(maxsize=4)
def toml_data(text: str) -> Any:
    """tomllib's parse of `text`, once a process for the same text: the configuration
    (config.py) and the targets' pins read the same pyproject.toml (~2 ms a parse). Shared: its
    readers never change it. A TOMLDecodeError is raised again each time (not cached)."""
    return toml_module().loads(text)


def read_pyproject(text: str) -> List[Dependency]:
    data = toml_data(text)
    specs: List[str] = []
    project = data.get("project") or {}
    specs += _strings(project.get("dependencies"))
    for group in (project.get("optional-dependencies") or {}).values():
        specs += _strings(group)
    for group in (data.get("dependency-groups") or {}).values():
        specs += _strings(group)
    poetry = (data.get("tool") or {}).get("poetry") or {}
    poetry_tables = [poetry.get("dependencies"), poetry.get("dev-dependencies")]
    poetry_tables += [(g or {}).get("dependencies") for g in (poetry.get("group") or {}).values() if isinstance(g, dict)]
    deps: List[Dependency] = []
    cursor = 0
    for spec in specs:
        start = _find_string(text, spec, cursor)
        if start >= 0:
            cursor = start
        deps.append(Dependency(spec, max(start, 0)))
    for table in poetry_tables:
        if not isinstance(table, dict):
            continue
        for name, value in table.items():
            if name == "python":
                continue
            version = value if isinstance(value, str) else (value.get("version", "") if isinstance(value, dict) else "")
            spec = name + _poetry_specifier(version)
            m = re.search(r"(?m)^[ \t]*[\"']?%s[\"']?[ \t]*=" % re.escape(name), text)
            deps.append(Dependency(spec, m.start() + len(m.group()) - len(m.group().lstrip()) if m else 0))
    return deps


def _strings(value: Any) -> List[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _poetry_specifier(version: str) -> str:
    """Poetry's `2.1.0` means ==2.1.0; carets and tildes are ranges we only keep the base of."""
    version = version.strip()
    if re.fullmatch(r"[0-9][0-9A-Za-z.+*]*", version):
        return "==" + version
    return ""


def _find_string(text: str, value: str, start: int) -> int:
    """Offset of `value` written as a TOML string at or after `start` (else anywhere), or -1."""
    for quote in ('"', "'"):
        for origin in (start, 0):
            i = text.find(quote + value + quote, origin)
            if i >= 0:
                return i + 1
    return -1
