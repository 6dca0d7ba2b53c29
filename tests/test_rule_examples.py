"""Every example of every rule, run through the engine: a rule cannot exist untested."""

from __future__ import annotations

import dataclasses
import re
import string

import pytest

from npu_migrate.dispatch import migrate_source
from npu_migrate.kinds import KINDS
from npu_migrate.options import Options
from npu_migrate.rules import default_rules
from npu_migrate.kinds.finding import match_kind_of

RULES = default_rules()


def message_pattern(rule, api: str) -> str:
    """The rule's message template as a pattern: its text literally, `{from}`/`{to}`/`{api}` as
    the rule's (and the finding's) values, any other field (what the analysis found) as some text."""
    known = {"from": rule.from_, "to": rule.to, "api": api}
    parts = []
    for literal, field, _spec, _conversion in string.Formatter().parse(rule.message):
        parts.append(re.escape(literal))
        if field is not None:
            parts.append(re.escape(known[field] or "") if field in known else ".+?")
    return "".join(parts)


def test_a_message_pattern_is_the_template():
    rule = next(r for r in RULES.rules if match_kind_of(r) == "analysis")
    templated = dataclasses.replace(rule, message="`{api}` moved {count} times: see {from}.")
    pattern = message_pattern(templated, "x.cuda")
    assert re.fullmatch(pattern, f"`x.cuda` moved 3 times: see {rule.from_}.")
    assert not re.fullmatch(pattern, f"`x.cuda` moved 3 times: see {rule.from_}")  # the final dot
    assert not re.fullmatch(pattern, f"`y.cuda` moved 3 times: see {rule.from_}.")


def _cases():
    for rule in RULES.rules:
        for i, ex in enumerate(rule.examples, 1):
            yield pytest.param(rule, ex, id=f"{rule.code}-{rule.kind}-{rule.from_ or rule.to}-{i}")


def test_examples_name_their_file_kind():
    """Examples of rules that only apply outside Python name a file of the right kind."""
    for rule in RULES.rules:
        if rule.kind == "command" or match_kind_of(rule) in ("env", "command"):
            assert all(ex.path.endswith(".sh") for ex in rule.examples), rule.source
        if match_kind_of(rule).startswith("requirement"):
            assert all(ex.path.endswith((".txt", ".toml")) for ex in rule.examples), rule.source


@pytest.mark.parametrize("rule,example", list(_cases()))
def test_rule_example(rule, example):
    check_example(RULES, rule, example)


def check_example(rules, rule, example):
    """Run one example of `rule` through the engine with `rules` (test_kinds.py runs a kind
    defined in a test through this too)."""
    options = Options.of(**{"add_import": example.add_import, **dict(example.options)})
    if rule.kind == "edit":  # made by a pass's own analysis: credited to the code, or not
        if example.flagged:
            result = migrate_source(example.flagged, example.path, options, rules)
            assert result.error is None and result.changed
            assert rule.code in {e.code for e in result.edits}, f"{rule.source}: no edit credited to its code"
            assert not migrate_source(result.new_text, example.path, options, rules).changed  # idempotent
        if example.not_flagged:
            result = migrate_source(example.not_flagged, example.path, options, rules)
            assert result.error is None
            assert rule.code not in {e.code for e in result.edits}
        return
    if not KINDS[rule.kind].reports:
        result = migrate_source(example.before, example.path, options, rules)
        assert result.error is None
        after = result.new_text if result.changed else example.before
        assert after == example.after
        if example.before != example.after:
            assert rule.code in {e.code for e in result.edits}, "the change must be credited to this rule's code"
        # Idempotent: the rewritten example needs nothing more.
        again = migrate_source(after, example.path, options, rules)
        assert not again.changed
        return
    if example.flagged:
        result = migrate_source(example.flagged, example.path, options, rules)
        assert result.error is None
        found = [f for f in result.findings + result.unused_ignores if f.code == rule.code]
        assert found, f"{rule.source} did not flag its example"
        if match_kind_of(rule) == "analysis":  # the code that reports it uses the rule's own words
            assert {f.severity for f in found} == {rule.severity}
            assert any(re.fullmatch(message_pattern(rule, f.api), f.message, re.S) for f in found), (
                f"{rule.source}: no message of {[f.message for f in found]} is the rule's {rule.message!r}")
    if example.not_flagged:
        result = migrate_source(example.not_flagged, example.path, options, rules)
        assert result.error is None
        flagged = [f for f in result.findings + result.unused_ignores if f.code == rule.code]
        assert not flagged, f"{rule.source} flagged code it must not flag: {flagged}"


def test_counts_in_the_readme_prose_are_the_tables_counts():
    """A number the README states about the rules ("the 92 names torch_npu provides") is
    computed from the table it describes; a new count in the prose fails here until it is tied
    to its table the same way (or left out)."""
    import re
    import sys
    from pathlib import Path

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib

    root = Path(__file__).resolve().parent.parent
    readme = (root / "README.md").read_text(encoding="utf-8")
    torch_rules = tomllib.loads((root / "rules" / "torch.toml").read_text(encoding="utf-8"))
    (npu102,) = [r for r in torch_rules["api"] if r.get("code") == "NPU102" and r.get("from") == "torch.cuda"]
    tied = {"names torch_npu provides": len(npu102["members"])}
    not_counts = {"the 2020 names"}  # a year: the names of the 2020 TF Adapter source
    found = re.findall(r"(\w+ )?\b(\d[\d,]*) (names|APIs|codes|rules|members)\b( \w+ \w+)?", readme)
    assert ("the ", "92", "names", " torch_npu provides") in found or any(f[3] == " torch_npu provides" for f in found)
    for before, number, noun, after in found:
        if f"{before}{number} {noun}" in not_counts:
            continue
        key = f"{noun}{after}"
        assert key in tied, f"README: {before}{number} {noun}{after}: a hand-kept count no test ties to its table"
        assert int(number.replace(",", "")) == tied[key], f"README says {number} {key}; the table has {tied[key]}"
