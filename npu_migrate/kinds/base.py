"""What every rule kind shares: the typed rule (`Rule`), its examples, the documentation of a
code (`CodeDoc`), the error a bad rule file raises, and `Kind` -- what one kind module declares.

A kind module (kinds/device.py, kinds/finding.py, ...) owns one TOML array of tables
(`[[device]]`): its keys (`Schema`), the checks of their values, the index the passes look its
rules up in, and the words a file must contain for one of its rules to apply (the input of the
prefilter and of partial parsing). The code that applies a kind's rules registers itself with
`@codes.applies` (npu_migrate/codes.py); `npu-migrate explain CODE` prints it from there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, FrozenSet, List, Mapping, Optional, Tuple

from ..model import Severity

if TYPE_CHECKING:  # pragma: no cover
    from ..rules import RuleSet
    from ..words import Requirement

CODE_RE = re.compile(r"^NPU[0-9]{3}$")
QUALNAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
ENV_PATTERN_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\*?$")
COMMAND_RE = re.compile(r"^[A-Za-z0-9_./+-]+(?: [A-Za-z0-9_./=+-]+)*$")
REQUIREMENT_PATTERN_RE = re.compile(r"^[A-Za-z0-9*](?:[A-Za-z0-9._*-]*[A-Za-z0-9*])?$")


class RuleError(Exception):
    """A rule file is malformed. The message names the file, the entry and the problem."""


@dataclass(frozen=True)
class Example:
    before: str = ""
    after: str = ""  # for rewrites: the exact expected output
    flagged: str = ""  # for findings: code that must produce the finding
    not_flagged: str = ""  # for findings: code that must not
    add_import: bool = False  # run the example with `import torch_npu` insertion on
    path: str = "example.py"  # the file name the example is migrated as (picks the front end)
    # Options the example runs with, as (field, value) pairs of model.Options: (("modelarts", True),)
    options: Tuple[Tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class CallSpec:
    """The parameters of a framework rule (kinds/calls.py); unused fields stay empty."""

    apis: Tuple[str, ...] = ()
    methods: Tuple[str, ...] = ()
    to: str = ""
    keyword: str = ""
    position: Optional[int] = None
    max_positional: Optional[int] = None
    keywords: Optional[FrozenSet[str]] = None
    npu_argument: str = ""
    npu_argument_position: Optional[int] = None
    args: Tuple[str, ...] = ()
    extra_args: Tuple[str, ...] = ()
    assign_to: str = ""
    cleanup: Tuple[str, ...] = ()
    wrap_keyword: str = ""
    unless_file_contains: str = ""
    literal: str = ""  # [[argument]] `from`
    pattern: str = ""
    options: Tuple[str, ...] = ()
    unknown_finding: str = ""
    unknown_contains: str = ""
    value: str = ""
    receivers: Tuple[str, ...] = ()
    receiver_methods: Tuple[str, ...] = ()
    uses: Tuple[str, ...] = ()
    setup: str = ""
    teardown: str = ""
    skip_if_called: Tuple[str, ...] = ()
    modules: Tuple[str, ...] = ()
    names: Tuple[str, ...] = ()  # [[add_import]]
    replace: bool = False  # [[add_keyword]]: an argument given with another value is replaced


@dataclass(frozen=True)
class Rule:
    kind: str
    code: str
    source: str  # "file.toml: [[kind]] #n" -- for error messages and `explain`
    from_: str = ""
    to: str = ""
    message: str = ""
    suggestion: str = ""
    severity: Severity = Severity.INFO
    members: Optional[FrozenSet[str]] = None
    match_kind: str = ""  # for findings: api | import | method | call | call-kwarg | file | …
    keywords: Tuple[str, ...] = ()
    unless: Tuple[str, ...] = ()  # requirement findings: not when one of these is listed too
    functions: Tuple[str, ...] = ()
    methods: Tuple[str, ...] = ()
    patterns: Tuple[str, ...] = ()
    positions: Tuple[int, ...] = ()  # call findings: positional argument indexes to inspect
    suffixes: Tuple[str, ...] = ()  # call findings: string literals ending so; file findings: file names
    context: str = "any"  # findings: any | torch (the file imports torch) | device (it uses the device)
    skip_logged: bool = False  # api findings: not where the value is only printed, logged or formatted
    examples: Tuple[Example, ...] = ()
    framework: str = ""  # "tensorflow" / "mindspore": applied only by that framework's codemod
    spec: Optional[CallSpec] = None  # the parameters of a framework rule (see CallSpec)
    once_per_file: bool = False  # framework api findings: report each listed name once per file
    words: Tuple[str, ...] = ()  # codemod findings a codemod raises by its own scan: prefilter words (any case)

    @property
    def call(self) -> CallSpec:
        """The CallSpec of a framework rule, for code that handles only those rules."""
        assert self.spec is not None, f"{self.source} has no call spec"
        return self.spec

    def render_message(self, **values: str) -> str:
        return _render(self.message, self, values)

    def render_suggestion(self, **values: str) -> str:
        return _render(self.suggestion, self, values)


def _render(template: str, rule: Rule, values: Mapping[str, str]) -> str:
    fields = {"from": rule.from_, "to": rule.to, "api": rule.from_}
    fields.update(values)
    try:
        return template.format(**fields)
    except (KeyError, IndexError, ValueError):
        return template


@dataclass(frozen=True)
class CodeDoc:
    code: str
    title: str
    why: str = ""
    fix: str = ""
    source: str = ""  # "codes.toml: [[code]] #3": where it is documented (codedocs.py files it by that)


@dataclass(frozen=True)
class Schema:
    """The keys of one kind's TOML tables besides `code` and `message` (always required)."""

    required: FrozenSet[str]
    optional: FrozenSet[str]


def schema(required: Tuple[str, ...], optional: Tuple[str, ...]) -> Schema:
    return Schema(frozenset(required), frozenset(optional) | {"examples", "suggestion"})


def _no_check(entry: Dict[str, Any], label: str, from_: str) -> None:
    return None


def _no_spec(entry: Dict[str, Any], label: str, framework: str) -> Optional[CallSpec]:
    return None


@dataclass(frozen=True)
class Kind:
    """One rule kind, as its module declares it (see the module docstring)."""

    name: str
    schema: Schema
    summary: str  # one line: what a rule of this kind does
    # Rule -> the prefilter requirements one of which a Python file must meet for the rule to
    # apply ([] when it never applies to Python files); framework rules: before the
    # framework's import is added to each (prefilter.rule_requirements does that).
    requirements: Callable[[Rule], List["Requirement"]]
    # Puts a rule without `framework` into the rule set's index for this kind.
    index: Callable[["RuleSet", Rule], None]
    # (entry, label, from_): raises RuleError for what this kind does not accept.
    check: Callable[[Dict[str, Any], str, str], None] = _no_check
    # (entry, label, framework): the CallSpec of a rule (framework kinds), else None.
    spec: Callable[[Dict[str, Any], str, str], Optional[CallSpec]] = _no_spec
    # (entry) -> keys required besides the schema's, depending on the entry ([[finding]]: `api`
    # or `apis`).
    also_required: Callable[[Dict[str, Any]], FrozenSet[str]] = lambda entry: frozenset()
    # (entry, label) -> Rule fields this kind reads itself (a finding's severity and match kind).
    fields: Callable[[Dict[str, Any], str], Dict[str, Any]] = lambda entry, label: {}
    # Whether its rules report (examples `flagged`/`not_flagged`) rather than rewrite
    # (examples `before`/`after`).
    reports: bool = False


def by_from(field: str) -> Callable[[Any, "Rule"], None]:
    """An `index` that files each rule under its `from` in `RuleSet.<field>` (a later rule with
    the same `from` wins)."""
    def index(rs: Any, rule: "Rule") -> None:
        getattr(rs, field)[rule.from_] = rule

    return index


def from_is_a_dotted_name(entry: Dict[str, Any], label: str, from_: str) -> None:
    if not QUALNAME_RE.match(from_):
        raise RuleError(f"{label}: {from_!r} is not a dotted Python name")


def from_and_to_are_identifiers(entry: Dict[str, Any], label: str, from_: str) -> None:
    if not (IDENT_RE.match(from_) and IDENT_RE.match(entry["to"])):
        raise RuleError(f"{label}: 'from' and 'to' must be identifiers")
