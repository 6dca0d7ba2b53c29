"""Dependency lists: `requirements*.txt` (also `requirements/*.txt`) and `pyproject.toml`.

Nothing is ever edited here: which packages to install on an Ascend machine is the user's call.
The findings come from `[[finding]]` rules of kind

* `requirement`: a package name or glob (`cupy-cuda*`), compared after PEP 503 normalisation;
  `unless` lists packages whose presence silences it (torch without torch-npu);
* `requirement-build`: a CUDA build, either a local version label glob (`torch==2.1.0+cu118`
  matches `cu*`) or a URL glob containing `/` (`--index-url https://download.pytorch.org/whl/cu118`).

Requirement lines are parsed with `packaging` (already a dependency of black, declared directly
since this module imports it); lines it cannot parse (editable VCS URLs, local paths) are skipped.
"""

from __future__ import annotations

import fnmatch
import re
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, List, Optional, Tuple

from ..model import FileResult, Finding, Options, Span
from ..offsets import LineIndex
from ..rules import Rule, RuleSet
from . import is_pyproject

if TYPE_CHECKING:
    from packaging.requirements import Requirement


if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python < 3.11 only
    import tomli as tomllib

_INDEX_OPTIONS = ("-i", "--index-url", "--extra-index-url", "-f", "--find-links")
_PINNED_OPERATORS = ("==", "===", "~=")


@dataclass
class Dependency:
    """One requirement, where it is (offsets of the text it was read from)."""

    text: str  # the requirement as written: "torch==2.1.0+cu118"
    start: int  # offset of its name in the file
    requirement: Optional[Requirement]


@dataclass
class IndexOption:
    url: str
    start: int


# ----------------------------------------------------------------------------- reading


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
            deps.append(Dependency(egg.group(1), start + lead + egg.start(1), _parse(egg.group(1))))
            continue
        if stripped.startswith("-"):
            m = re.match(r"(%s)(?:\s*=\s*|\s+)(\S+)" % "|".join(map(re.escape, _INDEX_OPTIONS)), stripped)
            if m:
                options.append(IndexOption(m.group(2), start + lead + m.start(2)))
            continue
        # Per-requirement options (`--hash=…`) follow the requirement.
        spec = re.split(r"\s+--?[A-Za-z]", stripped, maxsplit=1)[0].strip()
        deps.append(Dependency(spec, start + lead, _parse(spec)))
    return deps, options


def _parse(spec: str) -> Optional[Requirement]:
    # (packaging is imported here: this module is loaded for any requirements file, few need it)
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        return Requirement(spec)
    except InvalidRequirement:
        return None


def canonicalize_name(name: str) -> str:
    from packaging.utils import canonicalize_name as canonical

    return canonical(name)


def read_pyproject(text: str) -> List[Dependency]:
    data = tomllib.loads(text)
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
        deps.append(Dependency(spec, max(start, 0), _parse(spec)))
    for table in poetry_tables:
        if not isinstance(table, dict):
            continue
        for name, value in table.items():
            if name == "python":
                continue
            version = value if isinstance(value, str) else (value.get("version", "") if isinstance(value, dict) else "")
            spec = name + _poetry_specifier(version)
            m = re.search(r"(?m)^[ \t]*[\"']?%s[\"']?[ \t]*=" % re.escape(name), text)
            deps.append(Dependency(spec, m.start() + len(m.group()) - len(m.group().lstrip()) if m else 0, _parse(spec)))
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


# ----------------------------------------------------------------------------- checking


def _name_matches(name: str, pattern: str) -> bool:
    return fnmatch.fnmatchcase(name, canonicalize_name(pattern))  # `*` survives normalisation


def _pinned_minor(req: Requirement) -> str:
    """"2.1" for torch==2.1.0 / ~=2.1.2 / ==2.1.*; "" when the version is not pinned."""
    for spec in req.specifier:
        if spec.operator in _PINNED_OPERATORS:
            m = re.match(r"(\d+)\.(\d+)", spec.version)
            if m:
                return f"{m.group(1)}.{m.group(2)}"
    return ""


def _local_labels(req: Requirement) -> List[str]:
    return [spec.version.split("+", 1)[1] for spec in req.specifier if "+" in spec.version]


def check(deps: List[Dependency], options: List[IndexOption], rules: RuleSet) -> List[Tuple[int, int, Finding]]:
    out: List[Tuple[int, int, Finding]] = []
    listed = {canonicalize_name(d.requirement.name) for d in deps if d.requirement is not None}

    def report(rule: Rule, start: int, end: int, api: str, **values: str) -> None:
        out.append((start, end, Finding(
            code=rule.code, severity=rule.severity, span=Span(0, 0, 0, 0), api=api,
            message=rule.render_message(api=api, **values), suggestion=rule.render_suggestion(api=api, **values),
        )))

    for dep in deps:
        req = dep.requirement
        if req is None:
            continue
        name = canonicalize_name(req.name)
        end = dep.start + len(req.name)
        best: Optional[Tuple[Tuple[int, int], Rule]] = None
        for rule in rules.findings.get("requirement", ()):
            if any(canonicalize_name(u) in listed for u in rule.unless):
                continue
            for pattern in rule.patterns or (rule.from_,):
                if _name_matches(name, pattern):
                    key = (0 if "*" in pattern else 1, len(pattern))
                    if best is None or key > best[0]:
                        best = (key, rule)
        if best is not None:
            minor = _pinned_minor(req)
            report(best[1], dep.start, end, req.name, minor=minor or "X.Y", pin=f"=={minor}.*" if minor else "")
        for rule in rules.findings.get("requirement-build", ()):
            labels = _local_labels(req)
            hit = any(fnmatch.fnmatchcase(label, p) for label in labels for p in rule.patterns if "/" not in p)
            hit = hit or bool(req.url and any(fnmatch.fnmatchcase(req.url, p) for p in rule.patterns if "/" in p))
            if hit:
                report(rule, dep.start, dep.start + len(dep.text), dep.text)
                break
    for option in options:
        for rule in rules.findings.get("requirement-build", ()):
            if any(fnmatch.fnmatchcase(option.url, p) for p in rule.patterns if "/" in p):
                report(rule, option.start, option.start + len(option.url), option.url)
                break
    return out


def migrate_requirements(text: str, path: str, options: Options, rules: RuleSet) -> FileResult:
    result = FileResult(path=path)
    if is_pyproject(path):
        try:
            deps, index_options = read_pyproject(text), []
        except tomllib.TOMLDecodeError as exc:
            result.error = f"invalid pyproject.toml: {exc}"
            return result
    else:
        deps, index_options = read_requirements_txt(text)
    lines = LineIndex(text)
    seen = set()
    for start, end, finding in sorted(check(deps, index_options, rules), key=lambda f: (f[0], f[2].code)):
        finding.span = lines.span(start, end)
        key = (finding.code, finding.span, finding.api)
        if key not in seen:
            seen.add(key)
            result.findings.append(finding)
    return result


migrate = migrate_requirements  # the front end (frontends/__init__.py)
