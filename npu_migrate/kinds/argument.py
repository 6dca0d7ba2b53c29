"""`[[argument]]` (framework rules, kinds/calls.py): a string-literal argument (`keyword`, or at
`position`) equal to `from`, or fully matching the regex `pattern` (its backtracking bounded:
kinds/regex_bound.py), becomes `to`; so do the literals assigned to a variable passed there and
the argparse defaults of the `options`. A value the pass cannot see is the finding
`unknown_finding` (only when its source contains `unknown_contains`, if given).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from .base import CallSpec, register, Rule, RuleError
from ..words import Requirement, Word, options_with_literal, plain_words
from .calls import Entry, Ints, Lists, call_kind, call_requirements, needs_apis
from .regex_bound import check_pattern


def _check(entry: Entry, label: str, lists: Lists, ints: Ints) -> None:
    needs_apis(entry, label, lists, ints)
    if ("from" in entry) == ("pattern" in entry):
        raise RuleError(f"{label}: an [[argument]] rule needs exactly one of 'from' (a literal) or 'pattern' (a regex)")
    if "pattern" in entry:
        why = check_pattern(entry["pattern"])  # a regular expression with bounded backtracking
        if why:
            raise RuleError(f"{label}: 'pattern' {why}")
    if "unknown_contains" in entry and "unknown_finding" not in entry:
        raise RuleError(f"{label}: 'unknown_contains' needs 'unknown_finding'")


@dataclass
class ArgumentIndex:
    by_api: Dict[str, List[Rule]] = field(default_factory=dict)  # API -> its rules
    options: Dict[str, Rule] = field(default_factory=dict)  # argparse option -> the first rule naming it


def _index(index: ArgumentIndex, rule: Rule) -> None:
    for api in rule.call.apis:
        index.by_api.setdefault(api, []).append(rule)
    for option in rule.spec_of(ArgumentSpec).options:
        index.options.setdefault(option, rule)


@dataclass(frozen=True)
class ArgumentSpec(CallSpec):
    """The keys of a `[[argument]]` rule (besides `apis` and `unknown_finding`, CallSpec's)."""

    keyword: str = ""
    to: str = ""
    literal: str = ""  # `from`
    pattern: str = ""
    position: Optional[int] = None
    options: Tuple[str, ...] = ()
    unknown_contains: str = ""


def _requirements(rule: Rule) -> List[Requirement]:
    """Calls of `apis`, and the argparse `options` (codemods/callrules/arguments.py
    `_plan_argparse`): a default is rewritten only where it is a string literal equal to
    `from` (or matching `pattern`), so with `from` an option needs that literal written too."""
    spec = rule.spec_of(ArgumentSpec)
    calls = call_requirements(rule)
    if spec.position is None and spec.keyword:
        # The argument is found only as `keyword=` (syntax.find_argument): a call without it is
        # left alone, rewritten or reported by no part of the rule (mindformers' set_context(mode=...)).
        calls = [Requirement(r.words | {Word(spec.keyword)}, r.refs, leaf=r.leaf, name=r.name, in_strings=r.in_strings)
                 for r in calls]
    literal = options_with_literal(("",), spec.literal)[0] if spec.literal and not spec.pattern else None
    if literal is not None and not spec.unknown_finding:
        # Nothing to report: the rule acts only where the literal is passed, written in the file
        # (directly, or assigned to the variable passed: Planner.values_of); `init("nccl")`
        calls = [Requirement(r.words | literal.words, r.refs | literal.refs, leaf=r.leaf, name=r.name, in_strings=True)
                 for r in calls]
    return calls + option_requirements(rule)


def option_requirements(rule: Rule) -> List[Requirement]:
    """The requirements of the rule's argparse `options` (what `_requirements` adds to its calls'):
    they serve only `add_argument(...)` calls (Planner._plan_argparse: the default of an option
    so named), which prefilter.framework_rules_may_apply lets a file's tree rule out."""
    spec = rule.spec_of(ArgumentSpec)
    if spec.pattern or not spec.literal:
        return plain_words(*spec.options)
    return options_with_literal(spec.options, spec.literal)


KIND = register(call_kind(
    "argument",
    ArgumentSpec,
    ("apis", "keyword", "to"),
    ("from", "pattern", "position", "options", "unknown_finding", "unknown_contains"),
    "a string argument of an API call becomes another",
    _check,
    _requirements,
    new_index=ArgumentIndex,
    index=_index,
))
