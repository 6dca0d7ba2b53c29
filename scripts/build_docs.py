"""Write the code documentation, docs/codes/: one page per code and an index by area and severity,
from the rule files (npu_migrate/codedocs.py; `npu-migrate explain CODE` prints the same page).

    python scripts/build_docs.py           # (re)write docs/codes/
    python scripts/build_docs.py --check   # exit 1 when docs/codes/ is not what the rules say

tests/test_review_page.py runs the check, so a rule change that is not followed by the pages
fails CI.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Dict

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from npu_migrate import codedocs  # noqa: E402
from npu_migrate.rules import load_rules  # noqa: E402

DOCS = ROOT / "docs" / "codes"


def pages() -> Dict[str, str]:
    """file name -> content of every page of docs/codes/."""
    all_pages = codedocs.pages(load_rules())
    out = {f"{p.code}.md": codedocs.markdown(p) for p in all_pages}
    out["README.md"] = codedocs.index_markdown(all_pages)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 when a page differs")
    args = parser.parse_args()
    wanted = pages()
    present = {p.name: p.read_text(encoding="utf-8") for p in DOCS.glob("*.md")} if DOCS.is_dir() else {}
    stale = sorted(name for name in wanted if present.get(name) != wanted[name])
    extra = sorted(set(present) - set(wanted))
    if args.check:
        for name in stale:
            print(f"docs/codes/{name}: out of date (python scripts/build_docs.py)")
        for name in extra:
            print(f"docs/codes/{name}: no code has this page")
        return 1 if stale or extra else 0
    DOCS.mkdir(parents=True, exist_ok=True)
    for name in stale:
        (DOCS / name).write_text(wanted[name], encoding="utf-8")
    for name in extra:
        (DOCS / name).unlink()
    print(f"docs/codes/: {len(wanted)} pages, {len(stale)} written, {len(extra)} removed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
