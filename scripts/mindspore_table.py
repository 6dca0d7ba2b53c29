"""Regenerate rules/targets/mindspore.toml from the MindSpore wheels on PyPI.

    python scripts/mindspore_table.py            # download missing wheels, write the table
    python scripts/mindspore_table.py --check    # exit 1 if the committed table differs
    python scripts/mindspore_table.py --offline  # use only the wheels already cached

The index has MindSpore 1.x for Ascend as `mindspore-ascend` (1.5 - 1.10, Python 3.9 wheels)
and `mindspore` 1.0.0 (Python 3.7), 2.0.0 (Python 3.9) and 2.7 on (Python 3.11). Each wheel in
RELEASES is downloaded once (`pip download --no-deps`) into ~/.cache/npu-migrate-wheels/mindspore
(NPU_MIGRATE_WHEEL_CACHE/mindspore overrides) and read *statically* from the zip -- nothing is
installed, imported or run:

* the names `mindspore/__init__.py` exports at the top level (its imports, following `import *`
  to the `__all__` of the module imported), as `mindspore.X`;
* the functions of `mindspore/context.py` and of `mindspore/communication/management.py`;
* the `set_context` keywords that release reports as deprecated (the keys of the
  `deprecated_context_dict` of `_check_context_deprecated`, with the API it names instead), as
  `mindspore.context.set_context:KEY` facts;
* `mindspore.set_auto_parallel_context` documented as "will be deprecated" (its docstring).

The table maps each name to the releases that have it; output is sorted and has no
timestamps. Read by npu_migrate/targets/mindspore.py.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import re
import subprocess  # nosec B404 - runs pip only, with an argument list
import sys
import zipfile
from pathlib import Path
from typing import Dict, List, Optional, Set, Tuple

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "rules" / "targets" / "mindspore.toml"
# (package, version, python): every MindSpore release line an Ascend user can pin, as the index
# has it (the newest patch of each 1.x minor of mindspore-ascend).
RELEASES: Tuple[Tuple[str, str, str], ...] = (
    ("mindspore", "1.0.0", "3.7"),
    ("mindspore-ascend", "1.5.2", "3.9"),
    ("mindspore-ascend", "1.6.2", "3.9"),
    ("mindspore-ascend", "1.7.0", "3.9"),
    ("mindspore-ascend", "1.8.1", "3.9"),
    ("mindspore-ascend", "1.9.0", "3.9"),
    ("mindspore-ascend", "1.10.0", "3.9"),
    ("mindspore", "2.0.0", "3.9"),
    ("mindspore", "2.7.0", "3.11"),
    ("mindspore", "2.7.1", "3.11"),
    ("mindspore", "2.7.2", "3.11"),
    ("mindspore", "2.8.0", "3.11"),
    ("mindspore", "2.9.0", "3.11"),
    ("mindspore", "2.10.0", "3.11"),
)
PLATFORMS = ("manylinux1_x86_64", "manylinux2014_x86_64", "manylinux_2_17_x86_64")


def cache_dir() -> Path:
    base = os.environ.get("NPU_MIGRATE_WHEEL_CACHE")
    return (Path(base) if base else Path.home() / ".cache" / "npu-migrate-wheels") / "mindspore"


def cached_wheel(package: str, version: str, cache: Path) -> Optional[Path]:
    stem = package.replace("-", "_")
    hits = sorted(cache.glob(f"{stem}-{version}-*x86_64*.whl"))
    if not hits and package == "mindspore":  # an older download of the same wheel elsewhere
        hits = sorted((Path.home() / ".cache" / "npu-migrate-mindspore" / "wheels").glob(f"{stem}-{version}-*.whl"))
    return hits[0] if hits else None


def download(package: str, version: str, python: str, cache: Path) -> Path:
    wheel = cached_wheel(package, version, cache)
    if wheel is not None:
        return wheel
    cache.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
           "--python-version", python, "-d", str(cache), f"{package}=={version}"]
    for platform in PLATFORMS:
        cmd[-1:-1] = ["--platform", platform]
    subprocess.run(cmd, check=True)  # nosec B603 - fixed argument list
    wheel = cached_wheel(package, version, cache)
    if wheel is None:
        raise SystemExit(f"pip download {package}=={version} left no wheel in {cache}")
    return wheel


# ----------------------------------------------------------------------------- reading a wheel


def _parse(zf: zipfile.ZipFile, name: str) -> Optional[ast.Module]:
    try:
        return ast.parse(zf.read(name).decode("utf-8", "replace"))
    except KeyError:
        return None


def _module_file(zf: zipfile.ZipFile, module: str) -> Optional[str]:
    path = module.replace(".", "/")
    for candidate in (f"{path}.py", f"{path}/__init__.py"):
        try:
            zf.getinfo(candidate)
            return candidate
        except KeyError:
            continue
    return None


def _all_of(tree: ast.Module) -> Optional[List[str]]:
    names: Optional[List[str]] = None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            try:
                names = [n for n in ast.literal_eval(node.value) if isinstance(n, str)]
            except ValueError:
                names = []
    return names


def _public_defs(tree: ast.Module) -> Set[str]:
    return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and not n.name.startswith("_")}


def top_level(zf: zipfile.ZipFile) -> Set[str]:
    """What `import mindspore; mindspore.X` finds: the package's own imports."""
    tree = _parse(zf, "mindspore/__init__.py")
    names: Set[str] = set()
    for node in tree.body if tree else ():
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                module = "mindspore" + ("." + module if module else "")
            for alias in node.names:
                if alias.name != "*":
                    names.add(alias.asname or alias.name)
                    continue
                file = _module_file(zf, module)
                sub = _parse(zf, file) if file else None
                if sub is not None:
                    listed = _all_of(sub)
                    names.update(listed if listed is not None else _public_defs(sub))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("mindspore."):
                    names.add(alias.name.split(".")[1])
    return {f"mindspore.{n}" for n in names if not n.startswith("_")}


def surface(wheel: Path) -> Tuple[Set[str], Dict[str, str]]:
    """(names, facts) of one wheel: see the module docstring."""
    facts: Dict[str, str] = {}
    with zipfile.ZipFile(wheel) as zf:
        names = top_level(zf)
        context = _parse(zf, "mindspore/context.py")
        if context is not None:
            names.add("mindspore.context")
            names.update(f"mindspore.context.{n}" for n in _public_defs(context))
            for node in ast.walk(context):
                if isinstance(node, ast.FunctionDef) and node.name == "_check_context_deprecated":
                    for sub in ast.walk(node):
                        if (isinstance(sub, ast.Assign) and isinstance(sub.targets[0], ast.Name)
                                and sub.targets[0].id == "deprecated_context_dict" and isinstance(sub.value, ast.Dict)):
                            for k, v in zip(sub.value.keys, sub.value.values):
                                if isinstance(k, ast.Constant) and isinstance(v, ast.Constant):
                                    facts[f"mindspore.context.set_context:{k.value} deprecated"] = re.sub(
                                        r"\s+", " ", str(v.value)).strip()
                if isinstance(node, ast.FunctionDef) and node.name == "set_auto_parallel_context":
                    doc = ast.get_docstring(node) or ""
                    if re.search(r"will be deprecated", doc.split("\n\n", 1)[0]):
                        facts["mindspore.context.set_auto_parallel_context deprecated"] = ""
        management = _parse(zf, "mindspore/communication/management.py")
        if management is not None:
            names.add("mindspore.communication.management")
            names.update(f"mindspore.communication.management.{n}" for n in _public_defs(management))
    return names, facts


# ----------------------------------------------------------------------------- the table


def _q(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _ranges(present: List[str], releases: List[str]) -> List[str]:
    out: List[str] = []
    run: List[str] = []
    for r in releases + [""]:
        if r in present:
            run.append(r)
            continue
        if run:
            out.append(run[0] if len(run) == 1 else f"{run[0]}..{run[-1]}")
            run = []
    return out


# The names the tool's MindSpore output and rules use, and facts about them: the table keeps
# these (a whole release's surface is thousands of names).
KEEP = re.compile(
    r"^mindspore\.(set_context|get_context|set_device|get_current_device|set_auto_parallel_context|context|"
    r"context\.(set_context|get_context|set_auto_parallel_context|ParallelMode)|communication\.management"
    r"(\.(init|get_rank|get_group_size|release))?|ParallelMode)( |$)")


def render(surfaces: Dict[str, Tuple[Set[str], Dict[str, str]]], packages: Dict[str, str],
           digests: Dict[str, str]) -> str:
    releases = list(surfaces)
    lines = [
        "# MindSpore API surface per release, as far as npu-migrate's MindSpore output uses it.",
        "# GENERATED by scripts/mindspore_table.py from the wheels on PyPI (mindspore-ascend for 1.5 - 1.10),",
        "# read statically (zip + ast, nothing imported). Do not edit by hand: run `python scripts/mindspore_table.py`.",
        "# Read by npu_migrate/targets/mindspore.py.",
        "",
        "[releases]  # oldest first: the package each was read from",
    ]
    for r in releases:
        lines.append(f"{_q(r)} = {_q(packages[r])}")
    lines += ["", "[wheels]  # sha256 of the wheel each release was read from"]
    for r in releases:
        lines.append(f"{_q(r)} = {_q(digests[r])}")
    lines += ["", "[names]"]
    every = sorted({n for names, _ in surfaces.values() for n in names if KEEP.match(n)})
    for name in every:
        present = [r for r in releases if name in surfaces[r][0]]
        lines.append(f"{_q(name)} = [{', '.join(_q(x) for x in _ranges(present, releases))}]")
    lines += ["", "[facts]  # fact -> releases; the text is what the release says to use instead"]
    facts = sorted({f for _, fs in surfaces.values() for f in fs if KEEP.match(f.replace(":", " "))})
    for fact in facts:
        present = [r for r in releases if fact in surfaces[r][1]]
        instead = next((surfaces[r][1][fact] for r in reversed(releases) if fact in surfaces[r][1]), "")
        lines.append(f"{_q(fact)} = {{ releases = [{', '.join(_q(x) for x in _ranges(present, releases))}], "
                     f"instead = {_q(instead)} }}")
    return "\n".join(lines) + "\n"


def compute(fetch: bool) -> str:
    cache = cache_dir()
    surfaces: Dict[str, Tuple[Set[str], Dict[str, str]]] = {}
    packages: Dict[str, str] = {}
    digests: Dict[str, str] = {}
    for package, version, python in RELEASES:
        wheel = download(package, version, python, cache) if fetch else cached_wheel(package, version, cache)
        if wheel is None:
            raise FileNotFoundError(f"{package} {version}: no cached wheel in {cache}")
        surfaces[version] = surface(wheel)
        packages[version] = package
        digests[version] = hashlib.sha256(wheel.read_bytes()).hexdigest()
    return render(surfaces, packages, digests)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed table; exit 1 if it differs")
    parser.add_argument("--offline", action="store_true", help="no downloads: only cached wheels")
    args = parser.parse_args(argv)
    text = compute(fetch=not args.offline)
    if args.check:
        if TABLE.read_text(encoding="utf-8") != text:
            print(f"{TABLE.relative_to(ROOT)} is out of date: run python scripts/mindspore_table.py", file=sys.stderr)
            return 1
        print(f"{TABLE.relative_to(ROOT)} matches {len(RELEASES)} releases")
        return 0
    TABLE.write_text(text, encoding="utf-8")
    print(f"wrote {TABLE.relative_to(ROOT)} ({len(RELEASES)} releases)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
