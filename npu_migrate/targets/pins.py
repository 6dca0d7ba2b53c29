"""The project's pins, read statically (nothing is run): which versions of a package the
dependency files of the project folder allow.

The project folder is the nearest folder, at or above the folder the run's paths share, that
has a dependency file (`requirements*.txt`, `requirements/*.txt`, `pyproject.toml`, `setup.py`'s
`install_requires`, `setup.cfg`, `environment.yml`) or is a git repository's root. The torch_npu
and MindSpore targets read their pins here (torch_npu.py, mindspore.py); the CANN target starts
its search for install paths from the same folder (cann.py).
"""

from __future__ import annotations

import ast
import functools
import os
import re
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from .. import project_files
from ..project_files import canonicalize_name, common_folder, read_pyproject, read_requirements_txt

PIN_FILES = ("pyproject.toml", "setup.py", "setup.cfg", "environment.yml", "environment.yaml")
# The operators that bound a version from above: a specifier without one (torch>=2.1) is no pin.
UPPER = ("==", "===", "~=", "<", "<=")


@dataclass
class Pin:
    package: str  # the package it stands for: "torch", "torch-npu", "mindspore"
    spec: str  # "==2.1.0"
    where: str  # file it was read from (relative to the project folder)
    name: str = ""  # as written (conda's "pytorch", "torch_npu", "mindspore-ascend")


def project_folder(paths: Sequence[str]) -> Optional[str]:
    """The nearest folder, at or above the common folder of `paths`, that has a dependency file
    (or is a git repository's root); None when there is none up to the file system's root."""
    folder = common_folder([p for p in paths if p != "-"] or ["."])
    while True:
        if dependency_files(folder) or os.path.isdir(os.path.join(folder, ".git")):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def find_pins(paths: Sequence[str], packages: Dict[str, str]) -> List[Pin]:
    """The pins of `packages` (canonical name -> the package it stands for) in the project
    folder of `paths`."""
    folder = project_folder(paths)
    return read_pins(folder, packages) if folder is not None else []


def dependency_files(folder: str) -> List[str]:
    try:
        entries = sorted(os.listdir(folder))
    except OSError:
        return []
    files = [e for e in PIN_FILES if e in entries]
    files += [e for e in entries if e.lower().startswith("requirements") and e.lower().endswith(".txt")]
    sub = os.path.join(folder, "requirements")
    if os.path.isdir(sub):
        files += [os.path.join("requirements", e) for e in sorted(os.listdir(sub)) if e.endswith(".txt")]
    return [f for f in files if os.path.isfile(os.path.join(folder, f))]


def dependency_texts(folder: str) -> Iterator[Tuple[str, str]]:
    """(path relative to `folder`, text) of each dependency file of `folder` that can be read."""
    for rel in dependency_files(folder):
        try:
            with open(os.path.join(folder, rel), encoding="utf-8", errors="replace") as fh:
                yield rel, fh.read()
        except OSError:
            continue


def read_pins(folder: str, packages: Dict[str, str]) -> List[Pin]:
    pins: List[Pin] = []
    for rel, text in dependency_texts(folder):
        for requirement in _requirements_of(rel, text):
            pin = _pin(requirement, rel, packages)
            if pin is not None:
                pins.append(pin)
    return pins



# TensorFlow's packages (PEP 503 names): their requirements tell TensorFlow 2 projects apart.
TENSORFLOW_PACKAGES = ("tensorflow", "tensorflow-gpu", "tensorflow-cpu", "tensorflow-macos", "intel-tensorflow",
                       "tf-nightly")
# Versions of TensorFlow 1 and 2, as samples of what a requirement allows (a SpecifierSet is
# tested on versions, not compared as sets): every x.y.0-x.y.9 of 1.0-1.15 and 2.0-2.40.
_TF1_VERSIONS = tuple(f"1.{minor}.{patch}" for minor in range(16) for patch in range(10))
_TF2_VERSIONS = tuple(f"2.{minor}.{patch}" for minor in range(41) for patch in range(10))


def tensorflow2_required(paths: Sequence[str]) -> str:
    """Why the project's TensorFlow is TensorFlow 2 ("" when it may be 1.15): a requirement of
    its dependency files allows no TF 1.x release (`tensorflow>=2.2`), and none allows only
    TF 1.x (`tensorflow<2`: the files may be alternatives). The TF Adapter for TensorFlow 1.15,
    npu_bridge, is not there on a TensorFlow 2 install: no file of the project gets its rules,
    tf.compat.v1 code included (frameworks.tensorflow2_reason decides per file otherwise)."""
    folder = project_folder(paths)
    if folder is None:
        return ""
    without_tf1: List[str] = []
    for rel, text in dependency_texts(folder):
        if "tensorflow" not in text and "tf-nightly" not in text and "tf_nightly" not in text:
            continue  # (most projects: no packaging import, no parse)
        for requirement in _requirements_of(rel, text):
            normalised = canonicalize_name(requirement)
            if "tensorflow" not in normalised and "tf-nightly" not in normalised:
                continue  # (as _pin: packaging, 0.03 s to import, only for a line that may name it)
            parsed = _parsed_requirement(requirement)
            if parsed is None or canonicalize_name(parsed[0]) not in TENSORFLOW_PACKAGES:
                continue
            specifiers = parsed[1]
            if not any(specifiers.contains(v) for v in _TF2_VERSIONS):
                return ""  # TF 1.x only: the project is not (only) TF 2
            if not any(specifiers.contains(v) for v in _TF1_VERSIONS):
                without_tf1.append(f"{requirement.strip()} in {rel}")
    return f"the project requires TensorFlow 2 ({without_tf1[0]})" if without_tf1 else ""


# `name`, or `name op version, op version ...`, and nothing else (no extras, markers, URL,
# parentheses): how most pins are written. packaging's requirement parser reads each clause of such a line with
# the specifier's own pattern, so the line is valid exactly when SpecifierSet takes its clauses,
# and the parser (0.03 s to import: markers, tags) is left out for it (_parsed_requirement).
_OPERATOR = r"(?:~=|==|!=|<=|>=|<|>)"
_PLAIN_REQUIREMENT = re.compile(
    rf"\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*"
    rf"({_OPERATOR}\s*[A-Za-z0-9.*+!]+(?:\s*,\s*{_OPERATOR}\s*[A-Za-z0-9.*+!]+)*)?\s*")


def _pin(requirement: str, where: str, packages: Dict[str, str]) -> Optional[Pin]:
    # A line whose text, normalised as names are (PEP 503: runs of -_. are one -, lower case),
    # holds none of the packages' names cannot name one of them: packaging (0.03 s to import,
    # most runs pin no torch) is left out for it.
    normalised = canonicalize_name(requirement)
    if not any(name in normalised for name in packages):
        return None
    plain = _PLAIN_REQUIREMENT.fullmatch(requirement)
    if plain is not None and not any(op in UPPER for op in re.findall(_OPERATOR, plain.group(2) or "")):
        # Lower bounds and exclusions only (torch>=2.1, the commonest torch line) are no pin for
        # any target (torch_npu's, MindSpore's: `UPPER`), valid or not: no packaging for them.
        return None
    parsed = _parsed_requirement(requirement)
    if parsed is None:
        return None
    name, specifiers, marker = parsed
    package = packages.get(canonicalize_name(name))
    if package is None:
        return None
    if never_on_linux(marker):
        return None  # (demucs 4.1.0's `torch>=2.1,<2.3; sys_platform == 'darwin' and ...`: Intel Macs only)
    # as written (packaging sorts the clauses); a local label (torch==2.1.0+cpu) does not
    # change which torch_npu fits
    m = re.match(r"\s*[A-Za-z0-9][A-Za-z0-9._-]*\s*(?:\[[^\]]*\])?\s*\(?([^;@)]*)", requirement)
    spec = re.sub(r"\+[A-Za-z0-9.]+", "", (m.group(1) if m else "").replace(" ", "")).rstrip(",")
    if not spec:
        return None
    try:
        from packaging.specifiers import SpecifierSet

        SpecifierSet(spec)
    except Exception:
        spec = ",".join(f"{s.operator}{s.version.split('+', 1)[0]}" for s in specifiers)
    return Pin(package, spec, where, name)


# What an Ascend machine's Python reports for the markers that name the platform (PEP 508): Linux,
# on x86_64 or aarch64 servers. Every other marker (python_version, extra, ...) may hold or not.
_LINUX = {"sys_platform": "linux", "platform_system": "Linux", "os_name": "posix"}
_ASCEND_MACHINES = ("x86_64", "aarch64")


def never_on_linux(marker: Any) -> bool:
    """Whether a requirement's environment marker (packaging's Marker; None: the line has none)
    is false on every Linux machine an Ascend NPU is in (x86_64, aarch64), whatever its other
    clauses say: a requirement for another platform (demucs 4.1.0's pyproject.toml:
    `torch>=2.1,<2.3; sys_platform == 'darwin' and platform_machine == 'x86_64'`, since torch has
    no Intel-Mac wheels after 2.2) pins no torch the Ascend machine installs. False when it may
    hold, or cannot be read."""
    if marker is None:
        return False
    try:
        return all(_marker_value(marker._markers, machine) is False for machine in _ASCEND_MACHINES)
    except (AttributeError, TypeError, ValueError):
        return False  # (a marker tree packaging builds otherwise: read as "may hold")


def _marker_value(markers: Any, machine: str) -> Optional[bool]:
    """True, False, or None (not known) for packaging's parsed marker list `markers` (clauses,
    nested lists, "and"/"or" between them: `Marker._markers` since packaging 22) on Linux on
    `machine`."""
    alternatives: List[List[Optional[bool]]] = [[]]
    for item in markers:
        if isinstance(item, str):
            if item == "or":
                alternatives.append([])
            elif item != "and":
                raise ValueError(item)
        elif isinstance(item, list):
            alternatives[-1].append(_marker_value(item, machine))
        else:
            alternatives[-1].append(_clause_value(item, machine))
    values: List[Optional[bool]] = []
    for clauses in alternatives:
        values.append(False if False in clauses else True if all(c is True for c in clauses) else None)
    return True if True in values else False if all(v is False for v in values) else None


def _clause_value(clause: Any, machine: str) -> Optional[bool]:
    left, op, right = clause
    platform = dict(_LINUX, platform_machine=machine)

    def side(node: Any) -> Optional[str]:
        if type(node).__name__ == "Variable":
            return platform.get(node.value)
        return str(node.value)

    a, b = side(left), side(right)
    if a is None or b is None:
        return None  # (a variable other than the platform's)
    operator = str(op.value)
    if operator == "==":
        return a == b
    if operator == "!=":
        return a != b
    if operator == "in":
        return a in b
    if operator == "not in":
        return a not in b
    return None


def _parsed_requirement(requirement: str, plain_allowed: bool = True) -> Optional[Tuple[str, Any, Any]]:
    """(name as written, its SpecifierSet, its Marker or None) of a requirement line, None when packaging finds it
    invalid: a plain line (_PLAIN_REQUIREMENT) by its clauses, any other by packaging's
    requirement parser (`plain_allowed=False`: every line, as tests compare)."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    plain = _PLAIN_REQUIREMENT.fullmatch(requirement) if plain_allowed else None
    if plain is not None:
        try:
            return plain.group(1), SpecifierSet(plain.group(2) or ""), None
        except InvalidSpecifier:
            pass  # (packaging's parser decides, as for any other line)
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        req = Requirement(requirement)
    except InvalidRequirement:
        return None
    return req.name, req.specifier, req.marker


@functools.lru_cache(maxsize=16)
def _requirements_of(rel: str, text: str) -> Tuple[str, ...]:
    """The requirement strings of the dependency file `rel` with content `text` (a function of
    both only: kept for the run's second target, which reads the same files; a big setup.py's
    ast is built once)."""
    name = os.path.basename(rel)
    if name.endswith(".txt"):
        return tuple(d.text for d in read_requirements_txt(text)[0])
    if name == "pyproject.toml":
        try:
            return tuple(d.text for d in read_pyproject(text))
        except project_files.TOMLDecodeError:
            return ()
    if name == "setup.py":
        return tuple(_setup_py_requirements(text))
    if name == "setup.cfg":
        import configparser  # (here: most projects have no setup.cfg)

        parser = configparser.ConfigParser(interpolation=None)
        try:
            parser.read_string(text)
            raw = parser.get("options", "install_requires", fallback="")
        except configparser.Error:
            return ()
        return tuple(line.strip() for line in raw.splitlines() if line.strip() and not line.strip().startswith("#"))
    return tuple(_environment_yml_requirements(text))


def _setup_py_requirements(text: str) -> List[str]:
    """String literals of `install_requires=[...]` in setup.py (also through a module-level
    variable), read with ast: setup.py is never run."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    variables: Dict[str, ast.AST] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            variables[stmt.targets[0].id] = stmt.value
    out: List[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg in ("install_requires", "requires"):
                    value = variables.get(kw.value.id, kw.value) if isinstance(kw.value, ast.Name) else kw.value
                    out += _literal_strings(value)
    return out


def _literal_strings(node: ast.AST) -> List[str]:
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _literal_strings(node.left) + _literal_strings(node.right)
    return []


_YML_ITEM = re.compile(r"^\s*-\s*['\"]?([A-Za-z0-9_.\-]+)\s*((?:[=<>~!]=?|===)[^#'\"]*)?['\"]?\s*(?:#.*)?$")


def _environment_yml_requirements(text: str) -> List[str]:
    """`- pytorch=2.1.0` (conda: one `=` is a prefix match) and `- torch==2.1.0` (its pip list)."""
    out: List[str] = []
    for line in text.splitlines():
        m = _YML_ITEM.match(line)
        if not m or not m.group(2):
            continue
        name, spec = m.group(1), m.group(2).strip()
        if re.fullmatch(r"=[^=].*", spec):  # conda's `=2.1` / `=2.1.0`: that version prefix
            spec = "==" + spec[1:].split("=", 1)[0].rstrip(".*") + ".*"
        out.append(name + spec)
    return out
