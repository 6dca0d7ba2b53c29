#!/usr/bin/env python3
"""pip-audit of npu-migrate's runtime dependencies (and theirs), as installed in this venv.

Fails (exit 1) when a known vulnerability is reported. pip-audit needs its vulnerability
database (PyPI's JSON API); where that cannot be reached (an offline CI, a mirror that only
serves packages) every package comes back "not found" and nothing is audited. A canary tells
the two apart: `requests==2.19.0` has known vulnerabilities (PYSEC-2018-28), so when pip-audit
does not report it, the database is not there, and this script says so and exits 0 rather than
failing the build or, worse, passing it silently as "no vulnerabilities found".
"""

from __future__ import annotations

import json
import re
import subprocess  # nosec B404 - runs pip-audit with a fixed argv, no shell
import sys
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Dict, List

ROOT = Path(__file__).resolve().parent.parent
CANARY = ("requests", "2.19.0")


def runtime_closure() -> Dict[str, str]:
    """name -> installed version of every runtime dependency, transitively (extras ignored)."""
    from packaging.requirements import Requirement

    todo: List[str] = [str(r) for r in _project_requirements()]
    found: Dict[str, str] = {}
    while todo:
        req = Requirement(todo.pop())
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        name = re.sub(r"[-_.]+", "-", req.name).lower()
        if name in found:
            continue
        try:
            dist = metadata.distribution(req.name)
        except metadata.PackageNotFoundError:
            continue  # not needed on this Python (a marker we could not evaluate)
        found[name] = dist.version
        todo.extend(dist.requires or [])
    return found


def _project_requirements() -> List[str]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python < 3.11
        import tomli as tomllib
    with open(ROOT / "pyproject.toml", "rb") as f:
        return list(tomllib.load(f)["project"]["dependencies"])


def audit(pins: Dict[str, str]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        req = Path(tmp) / "requirements.txt"
        req.write_text("".join(f"{n}=={v}\n" for n, v in sorted(pins.items())))
        out = Path(tmp) / "audit.json"
        proc = subprocess.run(  # nosec B603 - fixed argv, no shell
            [sys.executable, "-m", "pip_audit", "-r", str(req), "--no-deps", "--disable-pip",
             "--progress-spinner", "off", "-f", "json", "-o", str(out)],
            capture_output=True, text=True,
        )
        if not out.exists():
            return {"error": (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]}
        return json.loads(out.read_text())


def main() -> int:
    pins = runtime_closure()
    pins[CANARY[0]] = CANARY[1]
    report = audit(pins)
    if "error" in report:
        print(f"pip-audit: NOT RUN: {report['error']}; the runtime dependencies were not audited")
        return 0
    deps = {d["name"].lower(): d for d in report["dependencies"]}
    canary = deps.get(CANARY[0], {})
    if not canary.get("vulns"):
        why = canary.get("skip_reason", "the canary came back clean")
        print(f"pip-audit: the vulnerability database is not reachable from here ({why}); "
              f"the {len(pins) - 1} runtime dependencies were NOT audited")
        return 0
    vulnerable = [d for name, d in deps.items() if name != CANARY[0] and d.get("vulns")]
    skipped = [name for name, d in deps.items() if d.get("skip_reason")]
    for d in vulnerable:
        for v in d["vulns"]:
            print(f"pip-audit: {d['name']} {d['version']}: {v['id']} (fixed in {', '.join(v['fix_versions']) or 'no release'})")
    print(f"pip-audit: {len(pins) - 1} runtime dependencies audited, {len(vulnerable)} vulnerable"
          + (f", not audited: {', '.join(skipped)}" if skipped else ""))
    return 1 if vulnerable else 0


if __name__ == "__main__":
    sys.exit(main())
