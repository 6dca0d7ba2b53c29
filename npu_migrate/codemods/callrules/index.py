"""One framework's rules (kinds/calls.py and its kinds), as each kind indexed them."""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Tuple

from ...kinds import add_import, add_keyword, argument, call_config, call_rename, call_replace, entry_setup, finding
from ...kinds import FRAMEWORKS, remove_import
from ...rules import Rule, RuleSet

Canonical = Callable[[str], str]  # a framework's name for a resolved name (`tf.compat.v1.X` -> `tf.X`)


class FrameworkRules:
    """One framework's rules: each kind's index (RuleSet.index_of), under the names the
    Planner reads."""

    def __init__(self, rules: RuleSet, framework: str) -> None:
        self.rename: Dict[str, Rule] = rules.index_of(call_rename.KIND, framework)
        self.replace: Dict[str, Rule] = rules.index_of(call_replace.KIND, framework)
        self.config: Dict[str, Rule] = rules.index_of(call_config.KIND, framework)
        arguments = rules.index_of(argument.KIND, framework)
        self.arguments: Dict[str, List[Rule]] = arguments.by_api
        self.argparse_options: Dict[str, Rule] = arguments.options
        add_keywords = rules.index_of(add_keyword.KIND, framework)
        self.add_keyword_api: Dict[str, List[Rule]] = add_keywords.by_api
        self.add_keyword_method: Dict[str, Rule] = add_keywords.by_method
        findings = rules.index_of(finding.KIND, framework)
        self.finding_api: Dict[str, Rule] = findings.api
        self.finding_import: Dict[str, Rule] = findings.import_
        self.finding_call: Dict[str, List[Rule]] = findings.call
        self.codemod_findings: Dict[str, Rule] = findings.codemod
        self.entry_setup: List[Rule] = rules.index_of(entry_setup.KIND, framework)
        self.remove_import: List[Rule] = rules.index_of(remove_import.KIND, framework)
        self.add_import: Optional[Rule] = rules.index_of(add_import.KIND, framework).last
        # Names that already hold an NPU object: what the call_rename / call_config rules produce.
        self.npu_callees = {r.spec_of(call_rename.CallRenameSpec).to for r in self.rename.values()}
        self.config_wrappers = {r.spec_of(call_config.CallConfigSpec).to for r in self.config.values()}

    @staticmethod
    def by_prefix(table: Dict[str, Rule], qualname: str) -> Optional[Rule]:
        """The rule for `qualname` or for the closest of its parents."""
        found = FrameworkRules.listed_prefix(table, qualname)
        return found[1] if found is not None else None

    @staticmethod
    def listed_prefix(table: Dict[str, Rule], qualname: str) -> Optional[Tuple[str, Rule]]:
        """(the listed name, its rule) for `qualname` or the closest of its parents. Asked of
        every reference the Planner resolves (Huawei's support list: 1,639 names), so the answers
        are kept per table (a rule set's index is not changed once built: RuleSet.index_of)."""
        if not table:
            return None
        kept = _LISTED.get(id(table))
        if kept is None or kept[0] is not table:
            kept = _LISTED[id(table)] = (table, {})
        answers = kept[1]
        if qualname in answers:
            return answers[qualname]
        found: Optional[Tuple[str, Rule]] = None
        parts = qualname.split(".")
        for end in range(len(parts), 0, -1):
            name = ".".join(parts[:end])
            rule = table.get(name)
            if rule is not None:
                found = (name, rule)
                break
        answers[qualname] = found
        return found


# id of a table -> (the table, its answers by qualified name): FrameworkRules.listed_prefix
_LISTED: Dict[int, Tuple[Dict[str, Rule], Dict[str, Optional[Tuple[str, Rule]]]]] = {}


# The kinds FrameworkRules reads above (by their objects: a kind renamed or removed fails here,
# not in a string), whose rules the framework passes apply through callrules/, and the match
# kinds of the findings it reads; under every framework a rule may name (kinds.FRAMEWORKS).
# tests/test_codes.py holds that every kind of the rule files has a registered applier.
APPLIED_KINDS = (call_rename.KIND, call_replace.KIND, call_config.KIND, argument.KIND, add_keyword.KIND,
                 entry_setup.KIND, remove_import.KIND, add_import.KIND)
APPLIED_FINDINGS = ("api", "import", "call", "codemod")
FRAMEWORK_KIND_KEYS = tuple(
    f"{key}@{framework}" for framework in FRAMEWORKS
    for key in (*(kind.name for kind in APPLIED_KINDS), *(f"finding:{match}" for match in APPLIED_FINDINGS)))
