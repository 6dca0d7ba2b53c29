"""Dependency lists: `requirements*.txt` (also `requirements/*.txt`) and `pyproject.toml`.

Nothing is ever edited here: which packages to install on an Ascend machine is the user's call.
The findings come from `[[finding]]` rules of kind

* `requirement`: a package name or glob (`cupy-cuda*`), compared after PEP 503 normalisation;
  `unless` lists packages whose presence silences it (torch without torch-npu);
* `requirement-build`: a CUDA build, either a local version label glob (`torch==2.1.0+cu118`
  matches `cu*`) or a URL glob containing `/` (`--index-url https://download.pytorch.org/whl/cu118`).

The lines are read by project_files.py (which the targets' pin reading shares); requirements
`packaging` cannot parse (editable VCS URLs, local paths) are skipped. Only the lines that can give
or silence a finding are parsed (_may_report), a plain one without packaging (_read).
"""

from __future__ import annotations

import fnmatch
import re
from typing import TYPE_CHECKING, FrozenSet, List, Optional, Tuple, Union

from ..model import FileResult, Finding, Span
from ..options import Options
from ..offsets import LineIndex
from ..project_files import (Dependency, IndexOption, PlainRequirement, TOMLDecodeError, canonicalize_name,
                             plain_requirement, read_pyproject, read_requirements_txt)
from ..rules import Rule, RuleSet
from ..kinds.finding import FindingSpec, names_of
from . import is_pyproject
from ..codes import applies, check_rule_emitter

if TYPE_CHECKING:
    from packaging.requirements import Requirement


_PINNED_OPERATORS = ("==", "===", "~=")


# ----------------------------------------------------------------------------- checking


# The `requirement` rules of the last rule set checked, each with its `unless` names and its
# patterns canonicalized (`*` survives normalisation), once a rule set: a dependency was matched
# against every pattern canonicalized again (mmocr 1.0.1's eight requirements files: 1,232 calls).
_MATCHERS: List[Tuple[RuleSet, List[Tuple[Rule, FrozenSet[str], List[Tuple[str, str]]]]]] = []


def _matchers(rules: RuleSet) -> List[Tuple[Rule, FrozenSet[str], List[Tuple[str, str]]]]:
    """[(rule, its `unless` names canonicalized, [(pattern, canonicalized)])] of `rules`'
    `requirement` rules, in their order."""
    if _MATCHERS and _MATCHERS[0][0] is rules:
        return _MATCHERS[0][1]
    made = [(rule, frozenset(canonicalize_name(u) for u in FindingSpec.of(rule).unless),
             [(pattern, canonicalize_name(pattern)) for pattern in names_of(rule)])
            for rule in rules.findings.get("requirement", ())]
    _MATCHERS[:] = [(rules, made)]  # (the rule set held: its id is not reused while kept)
    return made


def _pinned_minor(req: Union[Requirement, PlainRequirement]) -> str:
    """"2.1" for torch==2.1.0 / ~=2.1.2 / ==2.1.*; "" when the version is not pinned."""
    for spec in req.specifier:
        if spec.operator in _PINNED_OPERATORS:
            m = re.match(r"(\d+)\.(\d+)", spec.version)
            if m:
                return f"{m.group(1)}.{m.group(2)}"
    return ""


def _local_labels(req: Union[Requirement, PlainRequirement]) -> List[str]:
    return [spec.version.split("+", 1)[1] for spec in req.specifier if "+" in spec.version]


# The name a requirement line starts with (after blanks): packaging's name of any line it can
# parse (its name token, then a blank, `[`, `(`, `;`, `@`, a comparison or the end).
_LEAD = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _may_report(dep: Dependency, matchers: List[Tuple[Rule, FrozenSet[str], List[Tuple[str, str]]]]) -> bool:
    """Whether `dep` can give a finding or silence one: its name matches a `requirement` rule or
    is one of their `unless` names, or its text can hold a CUDA build (a local label `+`, a URL
    `@`: `requirement-build`). Any other line gives nothing, however packaging would read it, so
    it is not read (its name, taken from the text, is canonicalized as is, and without the `-_.`
    it may end with, which packaging's name never does)."""
    if "+" in dep.text or "@" in dep.text:
        return True
    lead = _LEAD.match(dep.text)
    if lead is None:  # (no name: packaging cannot read it either)
        return False
    name = lead.group(1)
    names = {canonicalize_name(name)} if name[-1].isalnum() else {canonicalize_name(name), canonicalize_name(name.rstrip("-_."))}
    return any(not names.isdisjoint(unless) or any(fnmatch.fnmatchcase(name, canonical)
                                                      for name in names for _, canonical in patterns)
               for _, unless, patterns in matchers)


def _read(dep: Dependency) -> Optional[Union[Requirement, PlainRequirement]]:
    """`dep` as packaging reads it: a plain line without packaging (project_files.plain_requirement)
    unless two of its clauses pin (_pinned_minor takes the first, and packaging before 25 keeps
    the clauses in a set), any other by packaging (None: invalid)."""
    plain = plain_requirement(dep.text)
    if plain is not None and sum(c.operator in _PINNED_OPERATORS for c in plain.specifier) <= 1:
        return plain
    return dep.requirement


@applies("finding:requirement", "finding:requirement-build")
def check(deps: List[Dependency], options: List[IndexOption], rules: RuleSet) -> List[Tuple[int, int, Finding]]:
    out: List[Tuple[int, int, Finding]] = []
    matchers = _matchers(rules)
    read = [(dep, req) for dep in deps if _may_report(dep, matchers) for req in [_read(dep)] if req is not None]
    listed = {canonicalize_name(req.name) for _, req in read}

    def report(rule: Rule, start: int, end: int, api: str, **values: str) -> None:
        check_rule_emitter(rule)
        out.append((start, end, Finding(
            code=rule.code, severity=rule.severity, span=Span(0, 0, 0, 0), api=api,
            message=rule.render_message(api=api, **values), suggestion=rule.render_suggestion(api=api, **values),
        )))

    for dep, req in read:
        name = canonicalize_name(req.name)
        end = dep.start + len(req.name)
        best: Optional[Tuple[Tuple[int, int], Rule]] = None
        for rule, unless, patterns in matchers:
            if not unless.isdisjoint(listed):
                continue
            for pattern, canonical in patterns:
                if fnmatch.fnmatchcase(name, canonical):
                    key = (0 if "*" in pattern else 1, len(pattern))
                    if best is None or key > best[0]:
                        best = (key, rule)
        if best is not None:
            minor = _pinned_minor(req)
            report(best[1], dep.start, end, req.name, minor=minor or "X.Y", pin=f"=={minor}.*" if minor else "")
        for rule in rules.findings.get("requirement-build", ()):
            labels = _local_labels(req)
            hit = any(fnmatch.fnmatchcase(label, p) for label in labels for p in FindingSpec.of(rule).patterns if "/" not in p)
            hit = hit or bool(req.url and any(fnmatch.fnmatchcase(req.url, p) for p in FindingSpec.of(rule).patterns if "/" in p))
            if hit:
                report(rule, dep.start, dep.start + len(dep.text), dep.text)
                break
    for option in options:
        for rule in rules.findings.get("requirement-build", ()):
            if any(fnmatch.fnmatchcase(option.url, p) for p in FindingSpec.of(rule).patterns if "/" in p):
                report(rule, option.start, option.start + len(option.url), option.url)
                break
    return out


def migrate_requirements(text: str, path: str, options: Options, rules: RuleSet) -> FileResult:
    result = FileResult(path=path)
    index_options: List[IndexOption] = []
    if is_pyproject(path):
        try:
            deps = read_pyproject(text)
        except TOMLDecodeError as exc:
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
