"""Every code npu-migrate can report is documented by a [[code]] entry (title, why, fix), whoever
added it: rules in rules/*.toml and codes written in the Python sources (ModelArts, NPU001, ...)."""

from __future__ import annotations

import re
from pathlib import Path

from npu_migrate.rules import CODE_RE, default_rules

ROOT = Path(__file__).resolve().parent.parent
RULES = default_rules()
# A code as a Python string literal: "NPU201". Prose like "a code like NPU123" is not one.
CODE_LITERAL_RE = re.compile(r"""["'](NPU[0-9]{3})["']""")


def codes_in_python_sources():
    found = {}
    for path in sorted((ROOT / "npu_migrate").rglob("*.py")):
        for code in CODE_LITERAL_RE.findall(path.read_text(encoding="utf-8")):
            found.setdefault(code, path.relative_to(ROOT).as_posix())
    return found


def test_every_code_used_by_a_rule_is_documented():
    undocumented = sorted({f"{r.code} ({r.source})" for r in RULES.rules if r.code not in RULES.docs})
    assert undocumented == []


def test_every_code_in_the_python_sources_is_documented():
    undocumented = sorted(f"{code} ({where})" for code, where in codes_in_python_sources().items()
                          if code not in RULES.docs)
    assert undocumented == []


def test_the_source_scan_finds_codes():
    # The scan above must see the codes that live in Python, or it proves nothing.
    assert codes_in_python_sources()["NPU001"] == "npu_migrate/suppressions.py"


def test_every_doc_is_complete():
    for code, doc in RULES.docs.items():
        assert CODE_RE.match(code)
        assert doc.title and doc.why and doc.fix, code
        assert "\n" not in doc.title, code


def test_cannot_migrate_codes_are_findings_and_rewrite_codes_are_rewrites():
    for rule in RULES.rules:
        if rule.code.startswith("NPU3"):
            assert rule.kind == "finding", rule.source
        if rule.code.startswith("NPU16"):
            assert rule.kind == "edit", rule.source
        if rule.code.startswith("NPU10"):
            assert rule.kind != "finding" or rule.framework, rule.source
