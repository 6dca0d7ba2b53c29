"""The rule kind is the unit of code: one module of npu_migrate/kinds/ per TOML array of tables,
owning its keys, checks, index and words, and naming the code that applies its rules."""

from __future__ import annotations

from pathlib import Path

import pytest

import npu_migrate
from npu_migrate.explain import explain
from npu_migrate.kinds import KINDS
from npu_migrate.prefilter import rule_requirements
from npu_migrate.rules import RuleError, build_ruleset, default_rules

ROOT = Path(npu_migrate.__file__).parent.parent
RULES = default_rules()


def test_each_kind_is_one_module_of_its_own_name():
    for name, kind in KINDS.items():
        assert kind.name == name
        assert (ROOT / "npu_migrate" / "kinds" / f"{name}.py").is_file()


def test_the_prefilter_knows_every_kind_through_its_module():
    for rule in RULES.rules:
        assert rule_requirements(rule) is not None, rule.source


@pytest.mark.parametrize("code, module, applied_by", [
    ("NPU105", "npu_migrate/kinds/device.py", "npu_migrate.codemods.torch.literals:LiteralRewrites:"),
    ("NPU101", "npu_migrate/kinds/method.py", "npu_migrate.codemods.torch.methods:MethodRewrites:"),
    ("NPU305", "npu_migrate/kinds/finding.py", "npu_migrate.codemods.findings:FindingVisitor:"),
])
def test_explain_names_the_kind_and_the_code_that_applies_it(code, module, applied_by):
    text = explain(RULES, code)
    assert f"kind: [[{module.rsplit('/', 1)[1][:-3]}]], {module}\n" in text
    emitted = text.split("Emitted by:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert [line for line in emitted if line.startswith(f"  {applied_by}")], emitted


def test_a_kind_checks_its_own_keys():
    with pytest.raises(RuleError, match=r"'from' and 'to' must be identifiers"):
        build_ruleset([("x.toml", {"method": [{"code": "NPU999", "message": "m", "from": "a.b", "to": "c",
                                               "examples": [{"before": "x.a()", "after": "x.c()"}]}]})])
    with pytest.raises(RuleError, match=r"unknown key 'members'"):
        build_ruleset([("x.toml", {"device": [{"code": "NPU999", "message": "m", "from": "cuda", "to": "npu",
                                               "members": ["a"], "examples": [{"before": "", "after": ""}]}]})])


_OUTSIDE = ("ascend-facts", "peer-tools", "shared/", "seeds/", "§")


def test_no_user_facing_text_cites_a_document_outside_the_repository():
    """Messages, suggestions and code docs say the fact itself or cite a public source."""
    texts = [(r.source, t) for r in RULES.rules for t in (r.message, r.suggestion)]
    texts += [(d.code, t) for d in RULES.docs.values() for t in (d.title, d.why, d.fix)]
    for path in (ROOT / "rules").glob("*.toml"):  # comments too: they ship in the wheel
        texts.append((path.name, path.read_text(encoding="utf-8")))
    for path in (ROOT / "npu_migrate").rglob("*.py"):
        texts.append((str(path), path.read_text(encoding="utf-8")))
    cited = [(where, word) for where, text in texts for word in _OUTSIDE if word in text]
    assert cited == []


def test_codes_reported_by_a_pass_are_data_with_examples():
    """ModelArts, notebook and NPU001 codes: a rule (severity, message, examples), not only a doc."""
    from npu_migrate.explain import code_kind

    for code in ["NPU001", "NPU201", "NPU204", "NPU210", "NPU216", "NPU375", "NPU376"]:
        assert code_kind(RULES, code) != "-", code
        assert all(r.examples for r in RULES.by_code(code))
    assert code_kind(RULES, "NPU204") == "rewrite"
    assert code_kind(RULES, "NPU211") == "warning"
    assert "Reported as: rewrite\n" in explain(RULES, "NPU204")
