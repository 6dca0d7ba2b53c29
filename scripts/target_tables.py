"""Regenerate rules/targets/torch_npu.toml from the torch-npu wheels on PyPI.

    python scripts/target_tables.py            # list releases, download missing wheels, write the table
    python scripts/target_tables.py --check    # exit 1 if the committed table differs (CI-style)
    python scripts/target_tables.py --offline  # use only the wheels already cached

For every torch-npu release from 2.1 on (`pip index versions torch-npu`), the cp311 manylinux
x86_64 wheel is downloaded once (`pip download --no-deps`) into ~/.cache/npu-migrate-wheels
(NPU_MIGRATE_WHEEL_CACHE overrides) and read *statically* from the zip -- nothing of it is
imported or run:

* `torch_npu/npu/__init__.py`: its `__all__`, its public module-level assignments
  (`default_generators`) and the public submodules beside it (`amp`, `random`, `graphs`, ...),
  all under `torch_npu.npu.` (torch_npu registers that module as `torch.npu`);
* the `__all__` of `torch_npu.npu.amp`, `random`, `graphs`, `memory`, `streams`, and of
  `torch_npu.profiler`; the public methods of the `torch_npu.npu.mstx` class;
* `torch.distributed.is_hccl_available` when some module of torch_npu assigns it, and
  `torch.distributed.Backend.HCCL` when it registers the "hccl" backend (`register_backend`
  sets that attribute).

The table maps each name to the releases it exists in, as ranges over the ordered release list
(`"2.1.0.post10..2.1.0.post17"`); `[releases]` lists the releases of each minor version. Output is
sorted and has no timestamps: regenerating changes nothing unless PyPI has new releases.
The tool reads it through npu_migrate/targets/torch_npu.py; tests/test_targets.py checks the committed
table against the cached wheels.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import os
import re
import subprocess  # nosec B404 - runs pip only, with an argument list
import sys
import zipfile
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Set

from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "rules" / "targets" / "torch_npu.toml"
PACKAGE = "torch-npu"
OLDEST = Version("2.1")
PLATFORMS = ("manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64")
SUBMODULE_ALLS = ("amp", "random", "graphs", "memory", "streams")


def cache_dir() -> Path:
    return Path(os.environ.get("NPU_MIGRATE_WHEEL_CACHE") or Path.home() / ".cache" / "npu-migrate-wheels")


# ----------------------------------------------------------------------------- the index


def index_versions() -> List[str]:
    """The releases of torch-npu on the package index, >= 2.1, oldest first."""
    out = subprocess.run(  # nosec B603 - fixed argument list
        [sys.executable, "-m", "pip", "index", "versions", PACKAGE],
        capture_output=True, text=True, check=True,
    ).stdout
    m = re.search(r"Available versions:\s*(.+)", out)
    if not m:
        raise SystemExit(f"pip index versions {PACKAGE}: no version list in its output")
    versions = [v.strip() for v in m.group(1).split(",") if v.strip()]
    return sorted((v for v in versions if Version(v) >= OLDEST and not Version(v).is_prerelease), key=Version)


def cached_wheel(version: str, cache: Path) -> Optional[Path]:
    hits = sorted(cache.glob(f"torch_npu-{version}-cp311-cp311-*x86_64*.whl"))
    return hits[0] if hits else None


def download(version: str, cache: Path) -> Path:
    wheel = cached_wheel(version, cache)
    if wheel is not None:
        return wheel
    cache.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
           "--python-version", "3.11", "-d", str(cache), f"{PACKAGE}=={version}"]
    for platform in PLATFORMS:
        cmd[-1:-1] = ["--platform", platform]
    subprocess.run(cmd, check=True)  # nosec B603 - fixed argument list
    wheel = cached_wheel(version, cache)
    if wheel is None:
        raise SystemExit(f"pip download {PACKAGE}=={version} left no cp311 x86_64 wheel in {cache}")
    return wheel


# ----------------------------------------------------------------------------- reading a wheel


def _module_all(tree: ast.Module) -> List[str]:
    names: List[str] = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            names = list(_strings(node.value))
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and node.target.id == "__all__":
            names += _strings(node.value)
        elif (
            isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Attribute) and node.value.func.attr in ("extend", "append")
            and isinstance(node.value.func.value, ast.Name) and node.value.func.value.id == "__all__"
        ):
            for arg in node.value.args:
                names += _strings(arg) if not isinstance(arg, ast.Constant) else [arg.value]
    return [n for n in names if isinstance(n, str)]


def _strings(node: ast.AST) -> Iterable[str]:
    if isinstance(node, (ast.List, ast.Tuple)):
        for el in node.elts:
            if isinstance(el, ast.Constant) and isinstance(el.value, str):
                yield el.value
    elif isinstance(node, ast.BinOp):
        yield from _strings(node.left)
        yield from _strings(node.right)


def _parse(zf: zipfile.ZipFile, name: str) -> Optional[ast.Module]:
    try:
        return ast.parse(zf.read(name).decode("utf-8"))
    except KeyError:
        return None


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""


def surface(wheel: Path) -> Set[str]:
    """The qualified names one torch_npu wheel provides (see the module docstring)."""
    names: Set[str] = set()
    with zipfile.ZipFile(wheel) as zf:
        files = set(zf.namelist())
        init = _parse(zf, "torch_npu/npu/__init__.py")
        if init is None:
            raise SystemExit(f"{wheel.name}: no torch_npu/npu/__init__.py")
        names.update(f"torch_npu.npu.{n}" for n in _module_all(init))
        for node in init.body:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
            for t in targets:
                if isinstance(t, ast.Name) and not t.id.startswith("_"):
                    names.add(f"torch_npu.npu.{t.id}")
        for f in files:
            m = re.fullmatch(r"torch_npu/npu/([a-z][a-z0-9_]*)(?:\.py|/__init__\.py)", f)
            if m:
                names.add(f"torch_npu.npu.{m.group(1)}")
        for sub in SUBMODULE_ALLS:
            tree = _parse(zf, f"torch_npu/npu/{sub}.py") or _parse(zf, f"torch_npu/npu/{sub}/__init__.py")
            if tree is not None:
                names.update(f"torch_npu.npu.{sub}.{n}" for n in _module_all(tree))
        mstx = _parse(zf, "torch_npu/npu/mstx.py")
        for node in mstx.body if mstx else ():
            if isinstance(node, ast.ClassDef) and node.name == "mstx":
                names.update(
                    f"torch_npu.npu.mstx.{f.name}" for f in node.body
                    if isinstance(f, ast.FunctionDef) and not f.name.startswith("_")
                )
        profiler = _parse(zf, "torch_npu/profiler/__init__.py")
        if profiler is not None:
            names.add("torch_npu.profiler")
            names.update(f"torch_npu.profiler.{n}" for n in _module_all(profiler) if not n.startswith("_"))
        for f in sorted(files):
            # transfer_to_npu's patches apply only when the user imports it: not the plain surface.
            if not f.startswith("torch_npu/") or not f.endswith(".py") or f.endswith("transfer_to_npu.py"):
                continue
            text = zf.read(f).decode("utf-8", "replace")
            if "is_hccl_available" not in text and not ("register_backend" in text and "hccl" in text):
                continue  # (a cheap test first: parsing every module of a wheel takes seconds)
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, ast.Assign):
                    for t in node.targets:
                        if _dotted(t) == "torch.distributed.is_hccl_available":
                            names.add("torch.distributed.is_hccl_available")
                elif isinstance(node, ast.Call) and _dotted(node.func).endswith("_apply_patches") and node.args:
                    # _apply_patches([["distributed", torch_npu.distributed]]) copies that module's
                    # __all__ onto torch.distributed (torch_npu 2.1 - 2.x).
                    pairs = node.args[0].elts if isinstance(node.args[0], (ast.List, ast.Tuple)) else []
                    for pair in pairs:
                        if (
                            isinstance(pair, (ast.List, ast.Tuple)) and len(pair.elts) == 2
                            and isinstance(pair.elts[0], ast.Constant) and pair.elts[0].value == "distributed"
                            and _dotted(pair.elts[1]) == "torch_npu.distributed"
                        ):
                            tree = _parse(zf, "torch_npu/distributed/__init__.py")
                            exported = _module_all(tree) if tree is not None else []
                            if "is_hccl_available" in exported:
                                names.add("torch.distributed.is_hccl_available")
                elif (
                    isinstance(node, ast.Tuple) and f.startswith("torch_npu/_init/patches/") and node.elts
                    and isinstance(node.elts[0], ast.Constant) and node.elts[0].value == "distributed.is_hccl_available"
                ):
                    # ("distributed.is_hccl_available", <torch_npu path>): a PatchManager alias of
                    # torch.<first> (torch_npu 2.7.1.post8 on)
                    names.add("torch.distributed.is_hccl_available")
                elif isinstance(node, ast.Call) and _dotted(node.func).endswith("Backend.register_backend"):
                    first = node.args[0] if node.args else None
                    if isinstance(first, ast.Constant) and first.value == "hccl":
                        names.add("torch.distributed.Backend.HCCL")
    return names


# ----------------------------------------------------------------------------- the table


def minor(version: str) -> str:
    v = Version(version)
    return f"{v.major}.{v.minor}"


def ranges(present: List[str], releases: List[str]) -> List[str]:
    """["2.1.0.post10..2.1.0.post17", "2.5.1"]: runs of consecutive releases in `releases`."""
    out: List[str] = []
    run: List[str] = []
    have = set(present)
    for r in releases + [""]:
        if r in have:
            run.append(r)
            continue
        if run:
            out.append(run[0] if len(run) == 1 else f"{run[0]}..{run[-1]}")
            run = []
    return out


def render(surfaces: Dict[str, Set[str]], digests: Dict[str, str]) -> str:
    releases = sorted(surfaces, key=Version)
    lines = [
        "# torch_npu API surface per release: which names exist in which torch-npu release on PyPI.",
        "# GENERATED by scripts/target_tables.py from the cp311 manylinux x86_64 wheels, read statically",
        "# (zip + ast, nothing imported). Do not edit by hand: run `python scripts/target_tables.py`.",
        "# Read by npu_migrate/targets/torch_npu.py: a name exists in target X.Y when every X.Y release has it.",
        "",
        "[releases]",
    ]
    by_minor: Dict[str, List[str]] = {}
    for r in releases:
        by_minor.setdefault(minor(r), []).append(r)
    for m, rs in by_minor.items():
        lines.append(f'"{m}" = [{", ".join(chr(34) + r + chr(34) for r in rs)}]')
    lines += ["", "[wheels]  # sha256 of the wheel each release was read from"]
    for r in releases:
        lines.append(f'"{r}" = "{digests[r]}"')
    lines += ["", "[names]"]
    everything = sorted(set().union(*surfaces.values()))
    for name in everything:
        present = [r for r in releases if name in surfaces[r]]
        lines.append(f'"{name}" = [{", ".join(chr(34) + x + chr(34) for x in ranges(present, releases))}]')
    return "\n".join(lines) + "\n"


def committed_releases() -> List[str]:
    if not TABLE.exists():
        return []
    text = TABLE.read_text(encoding="utf-8")
    section = text.split("[wheels]", 1)[1].split("[names]", 1)[0] if "[wheels]" in text else ""
    return re.findall(r'^"([^"]+)" =', section, flags=re.M)


def compute(versions: List[str], cache: Path, fetch: bool) -> str:
    surfaces: Dict[str, Set[str]] = {}
    digests: Dict[str, str] = {}
    for v in versions:
        wheel = download(v, cache) if fetch else cached_wheel(v, cache)
        if wheel is None:
            raise FileNotFoundError(f"torch-npu {v}: no cached wheel in {cache}")
        surfaces[v] = surface(wheel)
        digests[v] = hashlib.sha256(wheel.read_bytes()).hexdigest()
    return render(surfaces, digests)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed table; exit 1 if it differs")
    parser.add_argument("--offline", action="store_true", help="no index or downloads: the committed table's releases, cached wheels")
    args = parser.parse_args(argv)
    versions = committed_releases() if args.offline else index_versions()
    text = compute(versions, cache_dir(), fetch=not args.offline)
    if args.check:
        if TABLE.read_text(encoding="utf-8") != text:
            print(f"{TABLE.relative_to(ROOT)} is out of date: run python scripts/target_tables.py", file=sys.stderr)
            return 1
        print(f"{TABLE.relative_to(ROOT)} matches {len(versions)} releases")
        return 0
    TABLE.parent.mkdir(parents=True, exist_ok=True)
    TABLE.write_text(text, encoding="utf-8")
    print(f"wrote {TABLE.relative_to(ROOT)} ({len(versions)} releases)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
