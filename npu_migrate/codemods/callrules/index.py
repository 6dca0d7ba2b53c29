"""One framework's rules (kinds/calls.py and its kinds), indexed by what they match."""

from __future__ import annotations

from typing import Callable, Dict, Iterable, List, Optional, Tuple

from ...rules import Rule

Canonical = Callable[[str], str]  # a framework's name for a resolved name (`tf.compat.v1.X` -> `tf.X`)


class FrameworkRules:
    """One framework's rules, indexed by what they match."""

    def __init__(self, rules: Iterable[Rule]) -> None:
        self.rename: Dict[str, Rule] = {}
        self.replace: Dict[str, Rule] = {}
        self.config: Dict[str, Rule] = {}
        self.arguments: Dict[str, List[Rule]] = {}
        self.add_keyword_api: Dict[str, List[Rule]] = {}
        self.add_keyword_method: Dict[str, Rule] = {}
        self.argparse_options: Dict[str, Rule] = {}
        self.finding_api: Dict[str, Rule] = {}
        self.finding_import: Dict[str, Rule] = {}
        self.finding_call: Dict[str, List[Rule]] = {}
        self.codemod_findings: Dict[str, Rule] = {}
        self.entry_setup: List[Rule] = []
        self.remove_import: List[Rule] = []
        self.add_import: Optional[Rule] = None
        for rule in rules:
            spec = rule.spec
            if rule.kind == "finding":
                names = rule.patterns or (rule.from_,)
                table = {"api": self.finding_api, "import": self.finding_import}.get(rule.match_kind)
                if table is not None:
                    for name in names:
                        table.setdefault(name, rule)
                elif rule.match_kind == "call":
                    for name in names:
                        self.finding_call.setdefault(name, []).append(rule)
                elif rule.match_kind == "codemod":
                    self.codemod_findings[rule.code] = rule
                continue
            if rule.kind == "add_import":
                self.add_import = rule
                continue
            assert spec is not None
            for api in spec.apis:
                if rule.kind == "call_rename":
                    self.rename.setdefault(api, rule)
                elif rule.kind == "call_replace":
                    self.replace.setdefault(api, rule)
                elif rule.kind == "call_config":
                    self.config.setdefault(api, rule)
                elif rule.kind == "argument":
                    self.arguments.setdefault(api, []).append(rule)
                elif rule.kind == "add_keyword":
                    self.add_keyword_api.setdefault(api, []).append(rule)
            if rule.kind == "add_keyword":
                for method in spec.methods:
                    self.add_keyword_method.setdefault(method, rule)
            elif rule.kind == "argument":
                for option in spec.options:
                    self.argparse_options.setdefault(option, rule)
            elif rule.kind == "entry_setup":
                self.entry_setup.append(rule)
            elif rule.kind == "remove_import":
                self.remove_import.append(rule)
        # Names that already hold an NPU object: what the call_rename / call_config rules produce.
        self.npu_callees = {r.call.to for r in self.rename.values()}
        self.config_wrappers = {r.call.to for r in self.config.values()}

    @staticmethod
    def by_prefix(table: Dict[str, Rule], qualname: str) -> Optional[Rule]:
        """The rule for `qualname` or for the closest of its parents."""
        found = FrameworkRules.listed_prefix(table, qualname)
        return found[1] if found is not None else None

    @staticmethod
    def listed_prefix(table: Dict[str, Rule], qualname: str) -> Optional[Tuple[str, Rule]]:
        """(the listed name, its rule) for `qualname` or the closest of its parents."""
        parts = qualname.split(".")
        for end in range(len(parts), 0, -1):
            name = ".".join(parts[:end])
            rule = table.get(name)
            if rule is not None:
                return name, rule
        return None


# The kinds the framework passes apply through callrules/ (codes.kind_key of their rules).
FRAMEWORK_KIND_KEYS = tuple(
    f"{kind}@{framework}" for framework in ("tensorflow", "mindspore")
    for kind in ("call_rename", "call_replace", "call_config", "argument", "add_keyword", "entry_setup",
                 "remove_import", "add_import", "finding:api", "finding:import", "finding:call",
                 "finding:codemod"))
