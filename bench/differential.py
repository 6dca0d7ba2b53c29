#!/usr/bin/env python3
"""Differential check: does the working tree give the same results as BASE, byte for byte?

    .venv/bin/python bench/differential.py BASE [DIR ...] [--option-set NAME ...] [-j N] [--show N]
    .venv/bin/python bench/differential.py 758a97f                      # fixtures/, tests/, bench/
    .venv/bin/python bench/differential.py ef68b1d ~/.cache/npu-migrate-bench/src/transformers-4.46.3/src
    .venv/bin/python bench/differential.py 758a97f --cli DIR            # also the CLI's JSON report

BASE is any commit of the project. It is installed as a user installs it (from `git archive`,
not editable) into a virtualenv kept under $TMPDIR/npu-migrate-differential/venv-<commit>
(reused while the commit is the same; a lock file beside it makes concurrent runs on one BASE
wait for a single install). The working tree runs from this checkout's sources.

For every file of the DIRs (default: the project's fixtures/, tests/ and bench/, i.e. every
fixture and test input) that is Python or that a front end claims, both sides call
`dispatch.migrate_source(text, path, options)` under each option set (default: all of them,
see OPTION_SETS) and the whole FileResult is compared: migrated text, edits, findings, error,
skipped, unused ignores and generated files. With `--cli`, both sides also run
`npu-migrate DIR --check --no-cache --format json` (-j 2) and the per-file JSON is compared.

Prints the files that differ (per option set, with the first field that differs; `--show N`
prints a diff of the first N), and exits 1 when anything differs, 0 when all is identical,
2 on bad use. It changes nothing in the project. Not a test: a corpus takes minutes; use
`nice -n 10` on a shared machine.
"""

from __future__ import annotations

import argparse
import difflib
import fcntl
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import tokenize
import io
from pathlib import Path
from typing import Dict, List, Tuple

REPO = Path(__file__).resolve().parent.parent
WORK = Path(os.environ.get("TMPDIR") or tempfile.gettempdir()) / "npu-migrate-differential"

# name -> Options fields. Fields a side's Options does not know are left out on that side (and
# reported), so an option added by the working tree can be compared against an older BASE.
OPTION_SETS: Dict[str, Dict[str, object]] = {
    "default": {},
    "modelarts": {"modelarts": True},
    "distributed": {"distributed": True},
    "all": {"modelarts": True, "distributed": True, "npu_ops": True},
    "tensorflow": {"framework": "tensorflow"},
    "mindspore": {"framework": "mindspore"},
    "torch": {"framework": "torch"},
}
SKIP_DIRS = {".git", "__pycache__", ".venv", "venv", "build", "dist", ".mypy_cache", ".pytest_cache"}
MAX_BYTES = 4_000_000

# Runs inside each side's interpreter: argv = [inputs.json, option_sets.json, out.jsonl, jobs].
WORKER = r'''
import dataclasses, json, sys
inputs, sets, out, jobs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
from npu_migrate.dispatch import migrate_source
try:
    from npu_migrate.options import Options
except ImportError:  # a BASE before options.py (Options was in model.py)
    from npu_migrate.model import Options
known = {f.name for f in dataclasses.fields(Options)}
files = json.load(open(inputs, encoding="utf-8"))
sets = json.load(open(sets, encoding="utf-8"))

def one(item):
    path, text = item
    rows = []
    for name, fields in sets.items():
        options = Options(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in fields.items() if k in known})
        try:
            d = migrate_source(text, path, options).to_dict()
        except BaseException as exc:  # a crash is a result too
            d = {"crash": f"{type(exc).__name__}: {exc}"}
        rows.append(json.dumps({"set": name, "path": path, "result": d}, sort_keys=True))
    return rows

if jobs > 1:
    import multiprocessing
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        results = pool.map(one, files, chunksize=4)
else:
    results = map(one, files)
with open(out, "w", encoding="utf-8") as f:
    for rows in results:
        for row in rows:
            f.write(row + "\n")
    f.write(json.dumps({"ignored_fields": sorted({k for s in sets.values() for k in s} - known)}) + "\n")
'''


def run(argv: List[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(argv, check=True, **kw)


def base_python(commit: str) -> Path:
    """The interpreter of a virtualenv with `commit` installed from git archive (kept per commit)."""
    sha = run(["git", "-C", str(REPO), "rev-parse", f"{commit}^{{commit}}"], capture_output=True, text=True).stdout.strip()
    venv = WORK / f"venv-{sha[:12]}"
    python = venv / "bin" / "python"
    if (venv / ".complete").exists():
        return python
    WORK.mkdir(parents=True, exist_ok=True)
    # Two runs installing the same BASE at once removed each other's half-built venv (tenth
    # session); the second one waits here, then finds the first one's finished install.
    with open(WORK / f"venv-{sha[:12]}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (venv / ".complete").exists():
            _install(sha, commit, venv, python)
    return python


def _install(sha: str, commit: str, venv: Path, python: Path) -> None:
    src = WORK / f"src-{sha[:12]}"
    for d in (venv, src):
        if d.exists():
            run(["rm", "-rf", str(d)])
    src.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", sha], check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(src)
    print(f"installing {commit} ({sha[:12]}) into {venv} ...", file=sys.stderr)
    run([sys.executable, "-m", "venv", str(venv)])
    run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(src)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    (venv / ".complete").write_text(sha, encoding="utf-8")


def _claims(name: str) -> bool:
    """The working tree's idea of which files a front end takes (the same list for both sides)."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from npu_migrate.frontends import claims

    return claims(name)


def wanted(path: Path) -> bool:
    name = str(path)
    if name.endswith((".py", ".pyi")):
        return True
    return _claims(name)


def decode(path: Path, data: bytes) -> str:
    if path.suffix in (".py", ".pyi", ""):
        try:
            encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
            return data.decode(encoding)
        except (SyntaxError, LookupError, UnicodeDecodeError):
            pass
    return data.decode("utf-8", "replace")


def collect(dirs: List[Path]) -> List[Tuple[str, str]]:
    found = []
    for root in dirs:
        paths = [root] if root.is_file() else []
        for folder, subdirs, files in os.walk(root):
            subdirs[:] = sorted(d for d in subdirs if d not in SKIP_DIRS and not d.startswith(".tox"))
            paths += [Path(folder) / f for f in sorted(files)]
        for path in paths:
            if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_BYTES or not wanted(path):
                continue
            try:
                rel = str(path.relative_to(REPO))
            except ValueError:
                rel = str(path)
            found.append((rel, decode(path, path.read_bytes())))
    return found


def results(python: Path, env: Dict[str, str], inputs: Path, sets: Dict, out: Path, jobs: int) -> Dict:
    sets_file = out.with_suffix(".sets.json")
    sets_file.write_text(json.dumps(sets), encoding="utf-8")
    run([str(python), "-c", WORKER, str(inputs), str(sets_file), str(out), str(jobs)], env=env, cwd=tempfile.gettempdir())
    table, ignored = {}, []
    for line in out.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if "ignored_fields" in row:
            ignored = row["ignored_fields"]
        else:
            # A field one side lacks and the other holds empty (a field added with an empty
            # default, e.g. FileResult.notes) is no difference.
            table[(row["set"], row["path"])] = {k: v for k, v in row["result"].items() if v not in (None, [], {}, "")}
    return {"table": table, "ignored": ignored}


def cli_reports(python: Path, env: Dict[str, str], folder: Path, out: Path) -> Dict[str, dict]:
    subprocess.run([str(python), "-m", "npu_migrate", str(folder), "--check", "--no-cache", "--format", "json",
                    "-j", "2", "-o", str(out)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   cwd=tempfile.gettempdir())
    report = json.loads(out.read_text(encoding="utf-8"))
    return {f["path"]: f for f in report.get("files", [])}


def first_difference(a: dict, b: dict) -> str:
    for key in sorted(set(a) | set(b)):
        if a.get(key) != b.get(key):
            return key
    return "?"


def show(path: str, a: dict, b: dict) -> None:
    key = first_difference(a, b)
    if key == "new_text":
        x, y = a.get(key) or "", b.get(key) or ""
        sys.stdout.writelines(difflib.unified_diff(x.splitlines(True), y.splitlines(True), "base", "head"))
    else:
        x = json.dumps(a.get(key), indent=1, sort_keys=True).splitlines(True)
        y = json.dumps(b.get(key), indent=1, sort_keys=True).splitlines(True)
        sys.stdout.writelines(difflib.unified_diff(x, y, f"base:{key}", f"head:{key}"))
    print()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("base", help="a commit of the project (e.g. the session's starting commit)")
    parser.add_argument("dirs", nargs="*", type=Path, help="folders/files (default: fixtures/ tests/ bench/)")
    parser.add_argument("--option-set", action="append", choices=sorted(OPTION_SETS),
                        help="compare under these option sets only (repeatable; default: all)")
    parser.add_argument("-j", "--jobs", type=int, default=2)
    parser.add_argument("--show", type=int, default=3, metavar="N", help="print the differences of the first N files")
    parser.add_argument("--cli", action="store_true", help="also compare `--check --format json` on each DIR")
    args = parser.parse_args()
    dirs = [d.resolve() for d in args.dirs] or [REPO / "fixtures", REPO / "tests", REPO / "bench"]
    sets = {name: OPTION_SETS[name] for name in (args.option_set or OPTION_SETS)}
    WORK.mkdir(parents=True, exist_ok=True)
    try:
        base = base_python(args.base)
    except subprocess.CalledProcessError as exc:
        print(f"differential: cannot install {args.base}: {exc}", file=sys.stderr)
        return 2
    files = collect(dirs)
    env_base = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env_head = dict(env_base, PYTHONPATH=str(REPO))
    with tempfile.TemporaryDirectory(dir=WORK) as tmp:
        t = Path(tmp)
        inputs = t / "inputs.json"
        inputs.write_text(json.dumps(files), encoding="utf-8")
        a = results(base, env_base, inputs, sets, t / "base.jsonl", args.jobs)
        b = results(Path(sys.executable), env_head, inputs, sets, t / "head.jsonl", args.jobs)
        differ = sorted(k for k in set(a["table"]) | set(b["table"]) if a["table"].get(k) != b["table"].get(k))
        cli_differ: List[Tuple[str, str]] = []
        if args.cli:
            for d in args.dirs:
                ra = cli_reports(base, env_base, d.resolve(), t / "cli-base.json")
                rb = cli_reports(Path(sys.executable), env_head, d.resolve(), t / "cli-head.json")
                cli_differ += [(str(d), p) for p in sorted(set(ra) | set(rb)) if ra.get(p) != rb.get(p)]
    for side, r in (("base", a), ("head", b)):
        if r["ignored"]:
            print(f"note: {side}'s Options has no {', '.join(r['ignored'])}: left out there")
    print(f"{len(files)} files x {len(sets)} option sets ({', '.join(sets)}): "
          f"{len(differ)} results differ between {args.base} and the working tree")
    by_path: Dict[str, List[str]] = {}
    for s, p in differ:
        by_path.setdefault(p, []).append(s)
    for p, names in sorted(by_path.items()):
        first = first_difference(a["table"].get((names[0], p), {}), b["table"].get((names[0], p), {}))
        print(f"  {p}  [{', '.join(names)}]  first field: {first}")
    for p, names in list(sorted(by_path.items()))[: args.show]:
        print(f"\n--- {p} [{names[0]}]")
        show(p, a["table"].get((names[0], p), {}), b["table"].get((names[0], p), {}))
    if args.cli:
        print(f"CLI JSON: {len(cli_differ)} files differ")
        for d, p in cli_differ[:50]:
            print(f"  {d}: {p}")
    return 1 if differ or cli_differ else 0


if __name__ == "__main__":
    sys.exit(main())
