"""YAML configs (`*.yaml`, `*.yml`) that a training script reads its settings from (MindSpore's
model zoo: `default_config.yaml` with `device_target: "GPU"`). Nothing is edited: the value and
the code that compares it must change together (codemods/device_dispatch.py says when the code
cannot do that alone), so a GPU setting is reported where it is, by the `[[finding]]` rules of
kind `config-key` (`apis = ["device_target=GPU"]`).

Lines are read as `key: value` at any indentation (quotes and a trailing comment ignored); no
YAML library is needed, and a file that is not YAML simply matches nothing.
"""

from __future__ import annotations

import re
from typing import Dict, List, Tuple

from ..model import FileResult, Finding, Span
from ..options import Options
from ..kinds.finding import names_of
from ..rules import Rule, RuleSet
from ..codes import applies, check_rule_emitter

_LINE_RE = re.compile(r"""^(?P<indent>[ \t]*)(?P<key>[A-Za-z_][A-Za-z0-9_.-]*)[ \t]*:[ \t]*"""
                      r"""(?P<value>"[^"\n]*"|'[^'\n]*'|[^\s#'"][^#\n]*?)[ \t]*(?:#.*)?$""")


def _wanted(rules: RuleSet) -> Dict[Tuple[str, str], Rule]:
    wanted: Dict[Tuple[str, str], Rule] = {}
    for rule in rules.findings.get("config-key", ()):
        for pair in names_of(rule):
            key, value = pair.split("=", 1)
            wanted.setdefault((key, value), rule)
    return wanted


@applies("finding:config-key")
def migrate_yaml(text: str, path: str, options: Options, rules: RuleSet) -> FileResult:
    result = FileResult(path=path)
    wanted = _wanted(rules)
    if not wanted or not any(key in text for key, _ in wanted):
        return result
    findings: List[Finding] = []
    for number, line in enumerate(text.splitlines(), 1):
        m = _LINE_RE.match(line)
        if m is None:
            continue
        value = m.group("value")
        if value[:1] in "'\"":
            value = value[1:-1]
        rule = wanted.get((m.group("key"), value.strip()))
        if rule is None or "npu-migrate: ignore" in line:
            continue
        col = m.start("value") + 1
        api = f"{m.group('key')}: {m.group('value')}"
        check_rule_emitter(rule)
        findings.append(Finding(
            code=rule.code, severity=rule.severity, span=Span(number, col, number, m.end("value") + 1), api=api,
            message=rule.render_message(api=api), suggestion=rule.render_suggestion(api=api),
        ))
    result.findings = findings
    return result


migrate = migrate_yaml  # the front end (frontends/__init__.py)
