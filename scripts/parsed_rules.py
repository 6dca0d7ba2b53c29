"""Regenerate rules/parsed/: the parse of every built-in TOML file (rules/*.toml and
rules/targets/*.toml), as JSON, for the tool to load without tomllib (issue 24: tomllib took
0.05-0.08 s of every start; json ~2 ms).

    python scripts/parsed_rules.py            # write rules/parsed/<name>.json for each file
    python scripts/parsed_rules.py --check    # exit 1 if an entry is missing, stale or extra

Run it after editing a rule file or a target table, and commit rules/parsed/ with the edit
(tests/test_startup.py fails while an entry is not current). Each entry is
`{"sha256": <the TOML bytes' sha256>, "data": <tomllib.loads of them>}`; the tool takes it only
for exactly those bytes (npu_migrate/targets/tables.shipped_toml), so a stale entry costs time,
never a different rule. A file whose parse JSON cannot give back exactly (a TOML date, NaN) gets
no entry and is parsed at each start. Output is deterministic: the same files, the same bytes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Dict

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python < 3.11
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "rules"
PARSED = RULES / "parsed"  # npu_migrate/targets/tables.PARSED


def entries() -> Dict[Path, bytes]:
    """rules/parsed/<relative name>.json -> its content, for every built-in TOML file."""
    out: Dict[Path, bytes] = {}
    for toml in sorted([*RULES.glob("*.toml"), *(RULES / "targets").glob("*.toml")]):
        content = toml.read_bytes()
        data = tomllib.loads(content.decode("utf-8"))
        text = json.dumps({"sha256": hashlib.sha256(content).hexdigest(), "data": data},
                          ensure_ascii=False, separators=(",", ":"), allow_nan=False) + "\n"
        if json.loads(text)["data"] != data:
            print(f"{toml.relative_to(ROOT)}: its JSON is not its TOML (a date?); not shipped", file=sys.stderr)
            continue
        out[PARSED / f"{toml.relative_to(RULES)}.json"] = text.encode("utf-8")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if rules/parsed/ is not current")
    args = ap.parse_args()
    wanted = entries()
    present = set(PARSED.rglob("*.json")) if PARSED.is_dir() else set()
    stale = sorted(str(p.relative_to(ROOT)) for p, text in wanted.items() if not p.is_file() or p.read_bytes() != text)
    extra = sorted(str(p.relative_to(ROOT)) for p in present - set(wanted))
    if args.check:
        for name in stale:
            print(f"{name}: missing or stale (run python scripts/parsed_rules.py)", file=sys.stderr)
        for name in extra:
            print(f"{name}: names no rule file (run python scripts/parsed_rules.py)", file=sys.stderr)
        return 1 if stale or extra else 0
    for path, text in wanted.items():
        if not path.is_file() or path.read_bytes() != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(text)
    for name in extra:
        (ROOT / name).unlink()
    print(f"rules/parsed/: {len(wanted)} entries, {len(stale)} written, {len(extra)} removed", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
