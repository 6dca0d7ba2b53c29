"""What the call-level kinds of the framework rules share (kinds/call_rename.py,
call_replace.py, call_config.py, argument.py, add_keyword.py, entry_setup.py,
remove_import.py): their keys' checks, their CallSpec, their index, their words.

A rule of these kinds carries `framework = "tensorflow"` or `"mindspore"` and is applied only
by that framework's pass (codemods/tensorflow.py, codemods/mindspore.py, both built on
codemods/callrules/), to files that use the framework (their imports, or --framework). Such
rules stay out of the indexes the PyTorch pass and codemods/findings.py read
(RuleSet.framework_rules holds them). Names in `apis`, `receivers` and `uses` are qualified as
the pass canonicalises them (`tensorflow.compat.v1.Session` and `tf.compat.v1.Session` are
both `tensorflow.Session`).

`unknown_finding` names the `codemod` finding (kinds/finding.py) for what the rule cannot do:
arguments that do not fit (call_rename without a call_config fallback, call_replace,
call_config), a value the pass cannot see ([[argument]]), a receiver it cannot identify or an
explicit other value ([[add_keyword]]), a file with no `if __name__ == "__main__":` block
([[entry_setup]]).
"""

from __future__ import annotations

import ast
import dataclasses
import re
import warnings
from typing import Any, Callable, Dict, List, Optional, Tuple, Type, TypeVar

from ..words import Requirement, framework_name
from .base import CODE_RE, IDENT_RE, QUALNAME_RE, CallSpec, Kind, Rule, RuleError, Schema, new_dict
from .regex_bound import bounded


C = TypeVar("C", bound=CallSpec)

# key -> what it must hold, for the keys of these kinds.
_QUALNAMES = ("apis", "receivers", "uses", "modules", "skip_if_called")
_IDENTIFIERS = ("methods", "keywords", "args", "receiver_methods", "options")
_IDENTIFIER = ("keyword", "wrap_keyword", "npu_argument")
_INDEXES = ("position", "max_positional", "npu_argument_position")
_EXPRESSIONS = ("extra_args",)
_STATEMENTS = ("cleanup",)


def call_schema(required: Tuple[str, ...], optional: Tuple[str, ...]) -> Schema:
    return Schema(frozenset(required) | {"framework"}, frozenset(optional) | {"examples", "suggestion"})


def check_python(source: str, mode: str, label: str, key: str) -> None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(source, mode=mode)
    except SyntaxError:
        what = "a Python expression" if mode == "eval" else "a Python statement"
        raise RuleError(f"{label}: '{key}' must be {what}, got {source!r}") from None


# (entry, label, lists, ints): the checks one kind adds to the common ones below.
Entry = Dict[str, Any]  # one TOML table, as read
Lists = Dict[str, Tuple[str, ...]]  # its list-valued keys, checked
Ints = Dict[str, Optional[int]]  # its int-valued keys, checked
KindCheck = Callable[[Entry, str, Lists, Ints], None]


def parse_spec(entry: Entry, label: str, kind_check: KindCheck, spec_type: Type[C]) -> C:
    """Check the keys every call-level kind may have, then the kind's own (`kind_check`);
    return the rule's spec, of its kind's own type (`spec_type`: its fields are the kind's keys,
    `literal` for `from`)."""

    def strings(key: str, pattern: "re.Pattern[str]", what: str) -> Tuple[str, ...]:
        values = entry.get(key, [])
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise RuleError(f"{label}: '{key}' must be a list of strings")
        for v in values:
            if not pattern.match(v):
                raise RuleError(f"{label}: '{key}': {v!r} is not {what}")
        return tuple(values)

    lists: Dict[str, Tuple[str, ...]] = {}
    for key in _QUALNAMES:
        lists[key] = strings(key, QUALNAME_RE, "a dotted Python name")
    for key in _IDENTIFIERS:
        lists[key] = strings(key, IDENT_RE, "an identifier")
    for key in _EXPRESSIONS + _STATEMENTS:
        lists[key] = strings(key, re.compile(r"."), "a non-empty string")
        for v in lists[key]:
            check_python(v, "eval" if key in _EXPRESSIONS else "exec", label, key)
    for key in _IDENTIFIER:
        if key in entry and not (isinstance(entry[key], str) and IDENT_RE.match(entry[key])):
            raise RuleError(f"{label}: '{key}' must be an identifier, got {entry[key]!r}")
    ints: Dict[str, Optional[int]] = {}
    for key in _INDEXES:
        value = entry.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            raise RuleError(f"{label}: '{key}' must be an argument index (0, 1, …), got {value!r}")
        ints[key] = value
    for key in ("unless_file_contains", "pattern", "unknown_finding", "unknown_contains", "value", "setup",
                "teardown", "assign_to", "from", "to"):
        if key in entry and not isinstance(entry[key], str):
            raise RuleError(f"{label}: '{key}' must be a string")
    for key in ("value",):
        if key in entry:
            check_python(entry[key], "eval", label, key)
    for key in ("setup", "teardown"):
        if key in entry:
            check_python(entry[key], "exec", label, key)
    if "assign_to" in entry:
        check_python(f"{entry['assign_to']} = None", "exec", label, "assign_to")
    if "unknown_finding" in entry and not CODE_RE.match(entry["unknown_finding"]):
        raise RuleError(f"{label}: 'unknown_finding' must be a code like NPU123, got {entry['unknown_finding']!r}")
    kind_check(entry, label, lists, ints)
    keywords = entry.get("keywords")
    values = dict(
        apis=lists["apis"],
        methods=lists["methods"],
        to=entry.get("to", ""),
        keyword=entry.get("keyword", ""),
        position=ints["position"],
        max_positional=ints["max_positional"],
        keywords=frozenset(keywords) if keywords is not None else None,
        npu_argument=entry.get("npu_argument", ""),
        npu_argument_position=ints["npu_argument_position"],
        args=lists["args"],
        extra_args=lists["extra_args"],
        assign_to=entry.get("assign_to", ""),
        cleanup=lists["cleanup"],
        wrap_keyword=entry.get("wrap_keyword", ""),
        unless_file_contains=entry.get("unless_file_contains", ""),
        literal=entry.get("from", ""),
        pattern=bounded(entry["pattern"]) if entry.get("pattern") else "",
        options=lists["options"],
        unknown_finding=entry.get("unknown_finding", ""),
        unknown_contains=entry.get("unknown_contains", ""),
        value=entry.get("value", ""),
        receivers=lists["receivers"],
        receiver_methods=lists["receiver_methods"],
        uses=lists["uses"],
        setup=entry.get("setup", ""),
        teardown=entry.get("teardown", ""),
        skip_if_called=lists["skip_if_called"],
        modules=lists["modules"],
        replace=bool(entry.get("replace", False)),
    )
    return spec_type(**{f.name: values[f.name] for f in dataclasses.fields(spec_type)})


def needs_apis(entry: Entry, label: str, lists: Lists, ints: Ints) -> None:
    if not lists["apis"]:
        raise RuleError(f"{label}: 'apis' must name at least one API")


def to_is_a_name(entry: Entry, label: str) -> None:
    if not QUALNAME_RE.match(entry["to"]):
        raise RuleError(f"{label}: 'to' must be a dotted Python name, got {entry['to']!r}")


def call_requirements(rule: Rule) -> List[Requirement]:
    """What call-level kinds match: calls of `apis` (a kind matching more adds its own words:
    add_keyword's `.methods(...)` calls, argument's argparse `options`)."""
    return [framework_name(name, rule.framework) for name in rule.call.apis]


def by_api(index: Dict[str, Rule], rule: Rule) -> None:
    """The default index of a call-level kind: each of `apis` -> the first rule naming it."""
    for api in rule.call.apis:
        index.setdefault(api, rule)


Written = Tuple[Tuple[str, ...], Tuple[str, ...]]  # Kind.writes: (names, Python code)


def writes_code(rule: Rule) -> Written:
    """What every call-level rule writes: the code of its statements and values (CallSpec.code)."""
    return (), rule.call.code()


def call_kind(name: str, spec_type: Type[CallSpec], required: Tuple[str, ...], optional: Tuple[str, ...], summary: str,
              check: KindCheck, requirements: Callable[[Rule], List[Requirement]] = call_requirements,
              new_index: Callable[[], Any] = new_dict, index: Callable[[Any, Rule], None] = by_api,
              writes: Callable[[Rule], Written] = writes_code) -> Kind[Any]:
    """A call-level kind (its module registers it: `KIND = register(call_kind(...))`). Its rules
    all have `framework`: RuleSet.index_of(KIND, framework) is its index for that framework."""
    return Kind(
        name=name,
        schema=call_schema(required, optional),
        summary=summary,
        requirements=requirements,
        new_index=new_index,
        index=index,
        spec=lambda entry, label, framework: parse_spec(entry, label, check, spec_type),
        writes=writes,
    )
