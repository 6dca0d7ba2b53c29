"""What every rule kind shares: the typed rule (`Rule`), its examples, the documentation of a
code (`CodeDoc`), the error a bad rule file raises, `Kind` -- what one kind module declares --
and the registry of kinds (`register`).

A kind module (kinds/device.py, kinds/finding.py, ...) owns one TOML array of tables
(`[[device]]`): its keys (`Schema`), the checks of their values, its own index (an object of
its choosing, filled by its `index`, that its applier reads through `RuleSet.index_of`), and
the words a file must contain for one of its rules to apply (the input of the prefilter and of
partial parsing). It registers itself: `KIND = register(Kind(...))` at import, so nothing lists
the kinds by hand (kinds/__init__.py imports every module of the package; a kind defined
elsewhere registers when its module is imported). The code that applies a kind's rules
registers itself with `@codes.applies` (npu_migrate/codes.py); `npu-migrate explain CODE`
prints it from there. A kind that no built-in pass applies carries its applier (`Kind.apply`),
which the engine's `kinds` pass (passes.py) runs.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, FrozenSet, Generic, List, Mapping, Optional, Tuple, Type, TypeVar

from ..codes import kind_key
from ..model import Severity

if TYPE_CHECKING:  # pragma: no cover
    import libcst as cst

    from ..context import Context
    from ..words import Requirement

I = TypeVar("I")  # a kind's index  # noqa: E741
S = TypeVar("S")  # a kind's spec

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
    # Options the example runs with, as (field, value) pairs for options.Options.of: (("modelarts", True),)
    options: Tuple[Tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class CallSpec:
    """What the spec of every framework (call-level) rule has (kinds/calls.py): the APIs it
    matches (none for a kind that matches otherwise: entry_setup, remove_import,
    device_dispatch) and the `codemod` finding for what it cannot do. Each call kind extends it
    with exactly its own keys (call_rename.CallRenameSpec, argument.ArgumentSpec, ...; a test
    holds them to the kind's schema); code that applies a kind reads `rule.spec_of(ItsSpec)`."""

    apis: Tuple[str, ...] = ()
    unknown_finding: str = ""

    def code(self) -> Tuple[str, ...]:
        """The Python code the rule writes (its statements and values: Kind.writes)."""
        return ()

    def subject(self) -> str:
        """What the rule is about when it names no `from` and no `apis` (its Rule.from_)."""
        return ""


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
    examples: Tuple[Example, ...] = ()
    framework: str = ""  # "tensorflow" / "mindspore": applied only by that framework's codemod
    # The kind's own spec (Kind.spec made it): a CallSpec for framework rules, the dataclass of
    # its own of a kind that declares one; None for kinds whose keys are the fields above.
    spec: Any = None

    @property
    def call(self) -> CallSpec:
        """The CallSpec of a framework rule, for code that handles only those rules."""
        assert isinstance(self.spec, CallSpec), f"{self.source} has no call spec"
        return self.spec

    @property
    def call_spec(self) -> Optional[CallSpec]:
        """The CallSpec of a framework rule, None for other rules."""
        return self.spec if isinstance(self.spec, CallSpec) else None

    def applier_key(self) -> Optional[str]:
        """The key under which the code that applies this rule registers (codes.kind_key), as
        its kind says (Kind.key: a finding's depends on what it matches)."""
        return REGISTRY[self.kind].key(self)

    def spec_of(self, kind_spec: Type[S]) -> S:
        """The rule's spec, of its kind's own type (a kind's applier reads it so, typed)."""
        assert isinstance(self.spec, kind_spec), f"{self.source}: its spec is not a {kind_spec.__name__}"
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
    # how a code that no [[edit]]/[[finding]] entry names is reported ("warning", "rewrite"):
    # its Python decides, so the page says it here (codedocs.reported_as)
    reported_as: str = ""


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
class Kind(Generic[I]):
    """One rule kind, as its module declares it (see the module docstring)."""

    name: str
    schema: Schema
    summary: str  # one line: what a rule of this kind does
    # Rule -> the prefilter requirements one of which a Python file must meet for the rule to
    # apply ([] when it never applies to Python files); framework rules: before the
    # framework's import is added to each (prefilter.rule_requirements does that).
    requirements: Callable[[Rule], List["Requirement"]]
    # An empty index of this kind (its own type: a dict by `from`, FindingIndex, ...); the rule
    # set holds one per framework ("" for rules without `framework`): RuleSet.index_of.
    new_index: Callable[[], I]
    # Files one rule into an index of this kind.
    index: Callable[[I, Rule], None]
    # (entry, label, from_): raises RuleError for what this kind does not accept.
    check: Callable[[Dict[str, Any], str, str], None] = _no_check
    # (entry, label, framework) -> the rule's spec: the kind's own typed parameters (a CallSpec
    # for the framework kinds, a dataclass of its own for others), or None (Rule.spec).
    spec: Callable[[Dict[str, Any], str, str], Any] = _no_spec
    # (entry) -> keys required besides the schema's, depending on the entry ([[finding]]: `api`
    # or `apis`).
    also_required: Callable[[Dict[str, Any]], FrozenSet[str]] = lambda entry: frozenset()
    # (entry, label) -> Rule fields this kind reads itself (a finding's severity and match kind).
    fields: Callable[[Dict[str, Any], str], Dict[str, Any]] = lambda entry, label: {}
    # Whether its rules report (examples `flagged`/`not_flagged`) rather than rewrite
    # (examples `before`/`after`).
    reports: bool = False
    # (module, ctx) -> module: the applier of a kind no built-in pass applies (the engine's
    # `kinds` pass runs it where the rule set has rules of the kind); None for the built-in
    # kinds, whose passes (codemods/) apply them.
    apply: Optional[Callable[["cst.Module", "Context"], "cst.Module"]] = None
    # Rule -> (the names, the Python code) the rule writes into a file: what targets/rule_view.py
    # checks against the CANN target's TF Adapter (a rule writing a name the target lacks is
    # not applied). Nothing for kinds that write no helper.
    writes: Callable[[Rule], Tuple[Tuple[str, ...], Tuple[str, ...]]] = lambda rule: ((), ())
    # Rule -> the key its appliers register under (codes.kind_key; Rule.applier_key); None for a
    # rule whose code the emitting module decides itself ([[edit]], `analysis` findings).
    key: Callable[[Rule], Optional[str]] = lambda rule: kind_key(rule.kind, rule.framework)
    # The module that declares it (set by `register`): `explain` names it.
    module: str = ""


# name -> the registered kind; KINDS (kinds/__init__.py) is this dict.
REGISTRY: Dict[str, Kind[Any]] = {}
# Bumped by every (un)registration: rules.py's cache of loaded rule sets keys on it, as what a
# rule file may contain depends on the kinds registered.
GENERATION = [0]

K = TypeVar("K", bound=Kind[Any])


def register(kind: K, module: str = "") -> K:
    """Register `kind` (under its name) as declared by `module` (default: the caller's module);
    return it with `module` set. `KIND = register(Kind(...))` in the kind's module. Registering a
    name again from the same module replaces it (a module imported again); from another module
    it is an error."""
    module = module or sys._getframe(1).f_globals.get("__name__", "")
    old = REGISTRY.get(kind.name)
    if old is not None and old.module != module:
        raise ValueError(f"rule kind [[{kind.name}]] is declared by {old.module} already, not by {module}")
    kind = dataclasses.replace(kind, module=module)
    REGISTRY[kind.name] = kind
    GENERATION[0] += 1
    return kind


def unregister(name: str) -> None:
    """Forget a kind (a test that registered one of its own)."""
    if REGISTRY.pop(name, None) is not None:
        GENERATION[0] += 1


def new_dict() -> Dict[str, Rule]:
    return {}


def new_list() -> List[Rule]:
    return []


def by_from(index: Dict[str, Rule], rule: Rule) -> None:
    """An `index` (of `new_index=new_dict`) that files each rule under its `from` (a later rule with
    the same `from` wins)."""
    index[rule.from_] = rule


def append(index: List[Rule], rule: Rule) -> None:
    """An `index` (of `new_index=new_list`): the rules in their files' order."""
    index.append(rule)


def from_is_a_dotted_name(entry: Dict[str, Any], label: str, from_: str) -> None:
    if not QUALNAME_RE.match(from_):
        raise RuleError(f"{label}: {from_!r} is not a dotted Python name")


def from_and_to_are_identifiers(entry: Dict[str, Any], label: str, from_: str) -> None:
    if not (IDENT_RE.match(from_) and IDENT_RE.match(entry["to"])):
        raise RuleError(f"{label}: 'from' and 'to' must be identifiers")
