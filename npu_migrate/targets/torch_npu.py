"""The torch_npu target: which torch_npu release(s) the migrated code must run on, and what
they provide.

Data: `rules/targets/torch_npu.toml`, generated from the wheels of every torch-npu release on
PyPI by `scripts/target_tables.py` (a name -> the releases it exists in). A target is a set of
releases: `2.1` is every 2.1.0.postN release, `2.1.0.post17` that one release; a name exists in a
target when every release of it has the name, so code migrated for `2.1` runs on any 2.1 release.

Where the target comes from (targets/__init__.py `resolve`, first hit wins): the option
`--torch-npu-version X.Y` (or `X.Y.Z.postN`), `torch-npu-version` in `[tool.npu-migrate]`;
else the project's pins (`from_project`, read by pins.py): a `torch-npu`/`torch_npu` pin, else
a `torch` pin (`torch==2.1.0`, `torch~=2.1`, `torch>=2.1,<2.2`); a specifier that allows several
minor versions targets the oldest of them (the code must run there too), one with only a lower
bound (`torch>=2.1`) is not a pin; else the newest minor version in the table.

The codemods ask `Target.missing(qualname)` before writing a `torch.npu.`/`torch_npu.` name; a
name the target lacks is left as it is and reported (NPU320) with the release that added it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Dict, FrozenSet, Iterable, List, Optional, Sequence, Tuple

from ..project_files import Project
from ..kinds import KINDS
from ..kinds import module as module_kind
from ..kinds.api import ApiSpec, members as api_members
from .pins import UPPER, Pin, find_pins
from .tables import TargetError, expand_spans, load_toml, table_path

NAME = "torch_npu"
PACKAGES = {"torch": "torch", "pytorch": "torch", "torch-npu": "torch-npu"}  # canonical name -> package

# Namespaces whose members the table lists completely: a name directly under one of them exists
# only if the table says so. Names elsewhere (deeper attributes, other modules) are not checked.
CHECKED_NAMESPACES = (
    "torch_npu.npu",
    "torch_npu.npu.amp",
    "torch_npu.npu.random",
    "torch_npu.npu.graphs",
    "torch_npu.npu.memory",
    "torch_npu.npu.streams",
    "torch_npu.npu.mstx",
    "torch_npu.profiler",
)
# Single names outside those namespaces that the table tracks (torch_npu patches them into torch).
CHECKED_NAMES = ("torch.distributed.is_hccl_available", "torch.distributed.Backend.HCCL")


@lru_cache(maxsize=1024)  # (a Version is immutable; the table's ~60 releases are parsed once, not ~360 times a run)
def _version(text: str):
    from packaging.version import Version

    return Version(text)


_PLAIN_RELEASE = re.compile(r"([0-9]+(?:\.[0-9]+)*)(?:\.post([0-9]+))?")


def _order(texts: Iterable[str]) -> Callable[[str], Any]:
    """A sort key for `texts` that orders them as packaging's Version does. The table's releases
    and minors are plain (`2.1`, `2.7.1.post11`): those are ordered by (release without trailing
    zeros, post or -1), PEP 440's order for them, without importing packaging (~2 ms of every
    run; tests/test_targets.py compares both on every release of the table); any other text
    makes it Version."""
    if all(_PLAIN_RELEASE.fullmatch(text) for text in texts):
        return _plain_key
    return _version


def _plain_key(text: str) -> Tuple[Tuple[int, ...], int]:
    match = _PLAIN_RELEASE.fullmatch(text)
    assert match is not None
    release = [int(part) for part in match.group(1).split(".")]
    while release and release[-1] == 0:
        release.pop()
    return tuple(release), int(match.group(2)) if match.group(2) is not None else -1


@dataclass(frozen=True)
class Table:
    """rules/targets/torch_npu.toml, read."""

    releases: Tuple[str, ...]  # every release, oldest first
    minors: Dict[str, Tuple[str, ...]]  # "2.1" -> its releases
    names: Dict[str, FrozenSet[str]]  # qualified name -> releases it exists in

    def minor_of(self, release: str) -> str:
        v = _version(release)
        return f"{v.major}.{v.minor}"

    def newest_minor(self) -> str:
        return max(self.minors, key=_order(self.minors))

    def first_release_with(self, name: str, within: Iterable[str] = ()) -> Optional[str]:
        """The oldest release that has `name`: within `within` if one of those has it, else any."""
        have = self.names.get(name, frozenset())
        for pool in (list(within), list(self.releases)):
            hits = [r for r in pool if r in have]
            if hits:
                return min(hits, key=_version)
        return None

    def minors_with(self, name: str) -> List[str]:
        """The minor versions every release of which has `name`."""
        have = self.names.get(name, frozenset())
        return [m for m, rs in self.minors.items() if all(r in have for r in rs)]


@lru_cache(maxsize=None)
def load_table(path: str = "") -> Table:
    data = load_toml(path or table_path("torch_npu.toml"))
    minors = {m: tuple(rs) for m, rs in data["releases"].items()}
    every = [r for rs in minors.values() for r in rs]
    releases = tuple(sorted(every, key=_order(every)))
    names = {name: expand_spans(spans, releases) for name, spans in data["names"].items()}
    return Table(releases, minors, names)


def canonical(qualname: str) -> str:
    """`torch.npu.X` is `torch_npu.npu.X` (torch_npu registers its module under that name)."""
    if qualname == "torch.npu" or qualname.startswith("torch.npu."):
        return "torch_npu.npu" + qualname[len("torch.npu"):]
    return qualname


@dataclass(frozen=True)
class Missing:
    """A name the target lacks: what to tell the user."""

    name: str  # as the tool would have written it (torch.npu.NPUGraph)
    target: str  # "torch_npu 2.1"
    lacking: Tuple[str, ...]  # the target's releases that lack it
    added_in: Optional[str]  # the oldest release that has it (of the target's minor if any)
    minors: Tuple[str, ...]  # minor versions all of whose releases have it


@dataclass(frozen=True)
class Target:
    """Which torch_npu releases the migrated code must run on (`spec` as given: "2.1",
    "2.1.0.post17"; "" means the newest minor version) and why."""

    spec: str = ""
    reason: str = ""

    def label(self, table: Optional[Table] = None) -> str:
        table = table or load_table()
        return f"torch_npu {self.spec or table.newest_minor()}"

    def releases(self, table: Optional[Table] = None) -> Tuple[str, ...]:
        table = table or load_table()
        return releases_for(self.spec or table.newest_minor(), table)

    def missing(self, qualname: str) -> Optional[Missing]:
        return _missing(self.spec, qualname)

    def to_dict(self) -> Dict[str, object]:
        table = load_table()
        return {"torch_npu": self.spec or table.newest_minor(), "releases": list(self.releases(table)),
                "reason": self.reason or "newest"}


def releases_for(spec: str, table: Table) -> Tuple[str, ...]:
    """"2.1" (or "2.1.*") -> its releases; "2.1.0.post17" -> that one; "2.9.0.*" (or "2.1.0"
    when no release is called that) -> the releases of that base version (2.9.0, 2.9.0.postN)."""
    if spec.endswith(".*") and spec[:-2] in table.minors:
        spec = spec[:-2]
    if spec in table.minors:
        return table.minors[spec]
    if spec in table.releases:
        return (spec,)
    try:
        base = _version(spec[:-2] if spec.endswith(".*") else spec)
    except Exception:
        base = None
    if base is not None and not base.is_postrelease:
        hits = tuple(r for r in table.releases if _version(r).base_version == base.base_version)
        if hits:
            return hits
    known = ", ".join(sorted(table.minors, key=_version))
    raise TargetError(f"torch_npu {spec} is not a release on PyPI that npu-migrate knows (known: {known}, "
                      "or a full release such as 2.1.0.post17)")


@lru_cache(maxsize=4096)
def _missing(spec: str, qualname: str) -> Optional[Missing]:
    name = canonical(qualname)
    table = load_table()
    parts = name.split(".")
    checked = None
    for end in range(len(parts), 0, -1):
        parent = ".".join(parts[: end - 1])
        candidate = ".".join(parts[:end])
        if candidate in CHECKED_NAMES or (parent in CHECKED_NAMESPACES and end >= 2):
            checked = candidate
            break
    if checked is None:
        return None
    releases = releases_for(spec or table.newest_minor(), table)
    have = table.names.get(checked, frozenset())
    lacking = tuple(r for r in releases if r not in have)
    if not lacking:
        return None
    shown = qualname if checked == name else _shown(qualname, checked)
    return Missing(
        name=shown,
        target=f"torch_npu {spec or table.newest_minor()}",
        lacking=lacking,
        added_in=table.first_release_with(checked, releases),
        minors=tuple(table.minors_with(checked)),
    )


def _shown(qualname: str, checked: str) -> str:
    """The checked part of `qualname`, spelled as the user will see it (torch.npu.X)."""
    if qualname.startswith("torch.npu"):
        return "torch.npu" + checked[len("torch_npu.npu"):]
    return checked


def describe(missing: Missing) -> str:
    """"torch_npu 2.1.0.post8 and 2.1.0.post10 lack it; it came with 2.1.0.post12" ..."""
    lacking = missing.lacking
    shown = lacking[0] if len(lacking) == 1 else f"{', '.join(lacking[:-1])} and {lacking[-1]}"
    if len(lacking) > 3:
        shown = f"{lacking[0]} … {lacking[-1]} ({len(lacking)} releases)"
    text = f"{missing.target} ({shown}) lacks `{missing.name}`"
    if missing.added_in:
        text += f"; it came with torch_npu {missing.added_in}"
    return text


# ----------------------------------------------------------------------------- from the project

def check(spec: str) -> None:
    """Raises TargetError for a version given explicitly that is no torch_npu release known."""
    releases_for(spec, load_table())


def from_project(paths: Sequence[str], project: Optional[Project] = None) -> Optional[Tuple[str, str]]:
    """(spec, why) from the project's torch-npu pin, else its torch pin; None without one."""
    table = load_table()
    pins = find_pins(paths, PACKAGES)
    for package in ("torch-npu", "torch"):
        chosen = _target_from_pins([p for p in pins if p.package == package], table)
        if chosen is not None:
            spec, pin = chosen
            return spec, f"{pin.name or pin.package}{pin.spec} in {pin.where}"
    return None


def newest_reason() -> str:
    return "the newest release: no torch or torch-npu pin found; a lower bound alone is none"


def _target_from_pins(pins: List[Pin], table: Table) -> Optional[Tuple[str, Pin]]:
    if not pins:
        return None  # (packaging is imported only when there is a pin to read)
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    best: Optional[Tuple[str, Pin]] = None
    for pin in pins:
        try:
            spec = SpecifierSet(pin.spec)
        except InvalidSpecifier:
            continue
        if not any(s.operator in UPPER for s in spec):
            continue  # a lower bound only: not a pin
        if pin.package == "torch-npu":
            allowed = [r for r in table.releases if spec.contains(r, prereleases=True)]
        else:
            allowed = [r for r in table.releases if spec.contains(_version(r).base_version, prereleases=True)]
        if not allowed:
            continue
        target = _spec_for(allowed, table)
        if best is None or _version(_first(target, table)) < _version(_first(best[0], table)):
            best = (target, pin)
    return best


def _spec_for(allowed: List[str], table: Table) -> str:
    """The target spec for the oldest minor version among `allowed` releases: the minor when
    all its releases are allowed, else their common base version (torch==2.9.0 allows the
    2.9.0.postN releases, not 2.9.1), else the oldest allowed release of it."""
    minor = table.minor_of(allowed[0])
    in_minor = tuple(r for r in allowed if table.minor_of(r) == minor)
    if in_minor == table.minors[minor]:
        return minor
    base = _version(in_minor[0]).base_version
    if in_minor == tuple(r for r in table.minors[minor] if _version(r).base_version == base):
        return base + ".*"
    return in_minor[0]


def _first(spec: str, table: Table) -> str:
    return releases_for(spec, table)[0]



# ----------------------------------------------------------------------------- listing


def supported_rewrites(rules, target: Target) -> List[Tuple[str, str, Optional[Missing]]]:
    """(from, to, missing) for every torch.cuda name the rules rewrite, under `target`."""
    out = []
    for rule in rules.rules:
        if not isinstance(rule.spec, ApiSpec):  # the api kind's rules
            continue
        listed = api_members(rule)
        if listed is None:
            pairs = [(rule.from_, rule.to)]
        else:
            pairs = [(f"{rule.from_}.{m}", f"{rule.to}.{m}") for m in sorted(listed, key=lambda m: (m.lower(), m))]
        for before, after in pairs:
            if before != after:  # (a name an [[api]] rule keeps as it is: no rewrite to list)
                out.append((before, after, target.missing(after)))
    for rule in rules.rules:
        if KINDS.get(rule.kind) is module_kind.KIND:
            out.append((rule.from_, rule.to, target.missing(rule.to)))
    return out


def describe_target(rules, target: Target) -> str:
    """`npu-migrate rules --torch-npu-version X`: which torch.cuda rewrites the target gets."""
    table = load_table()
    releases = target.releases(table)
    rows = supported_rewrites(rules, target)
    ok = [(b, a) for b, a, m in rows if m is None]
    held = [(b, a, m) for b, a, m in rows if m is not None]
    lines = [
        f"{target.label(table)}: torch-npu {', '.join(releases)}"
        + (f" ({target.reason})" if target.reason else ""),
        f"{len(ok)} of {len(rows)} rewrites into torch.npu / torch_npu names are made for this target:",
    ]
    lines += [f"  {b} -> {a}" for b, a in ok]
    if held:
        lines.append(f"{len(held)} are not (NPU320: the name is missing in the target):")
        for b, a, m in held:
            came = f"came with torch_npu {m.added_in}" if m.added_in else "in no release"
            lines.append(f"  {b} -> {a}  ({came}; lacking in {', '.join(m.lacking)})")
    return "\n".join(lines) + "\n"
