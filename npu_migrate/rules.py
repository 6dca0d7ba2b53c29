"""Load and validate the migration rules (`rules/*.toml`) into a typed, queryable RuleSet.

Rules are data: every rename, device-string, backend and env-var rewrite and every finding the
engine knows lives in a TOML file with a stable code, a message and its own examples. A bad rule
file is a `RuleError` naming the file, the entry and the problem; the CLI turns it into exit 2.

Rule kinds (one TOML array of tables each):

``[[api]]``        qualified-name rewrite, resolved through imports: a reference to ``from`` (or to
                   ``from.<member>`` for a listed member) becomes ``to``.
``[[module]]``     import-path rewrite: ``from torch.cuda.amp import X`` / ``import torch.cuda``.
``[[method]]``     method-call rename on any receiver: ``x.cuda(...)`` -> ``x.npu(...)``.
``[[attribute]]``  attribute rename on any receiver (not a call): ``x.is_cuda`` -> ``x.is_npu``.
``[[device]]``     device type inside device strings, where they are device strings.
``[[backend]]``    distributed backend names (``"nccl"`` -> ``"hccl"``).
``[[env]]``        environment variable names (``CUDA_VISIBLE_DEVICES``).
``[[add_import]]`` an import to add after the framework's import where NPU APIs are used.
``[[command]]``    shell command rewrite (launch scripts): ``from`` is a command with its exact
                   arguments (``nvidia-smi``), ``to`` its replacement (``npu-smi info``).
``[[finding]]``    something that cannot be migrated (or advice); ``kind`` says how it matches.
``[[code]]``       documentation of a code: title, why, what to do (shown by ``explain``).

TensorFlow and MindSpore rules carry ``framework = "..."`` and have call-level kinds of their own
(``[[call_rename]]``, ``[[call_config]]``, ``[[argument]]``, ...): see "framework rules" below.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, FrozenSet, Iterable, List, Mapping, Optional, Sequence, Tuple

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python < 3.11 only
    import tomli as tomllib

from .model import Severity

CODE_RE = re.compile(r"^NPU[0-9]{3}$")
QUALNAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class RuleError(Exception):
    """A rule file is malformed. The message names the file, the entry and the problem."""


# ----------------------------------------------------------------------------- typed rules


@dataclass(frozen=True)
class Example:
    before: str = ""
    after: str = ""  # for rewrites: the exact expected output
    flagged: str = ""  # for findings: code that must produce the finding
    not_flagged: str = ""  # for findings: code that must not
    add_import: bool = False  # run the example with `import torch_npu` insertion on
    path: str = "example.py"  # the file name the example is migrated as (picks the front end)


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
    spec: Optional["CallSpec"] = None  # the parameters of a framework rule (see CallSpec)
    once_per_file: bool = False  # framework api findings: report each listed name once per file
    words: Tuple[str, ...] = ()  # codemod findings a codemod raises by its own scan: prefilter words (any case)

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


# What each kind accepts: required keys, optional keys.
_COMMON_REQUIRED = {"code", "message"}
_SCHEMA: Dict[str, Tuple[set, set]] = {
    "api": ({"from", "to"}, {"members", "examples", "suggestion"}),
    "module": ({"from", "to"}, {"examples", "suggestion"}),
    "method": ({"from", "to"}, {"examples", "suggestion"}),
    "attribute": ({"from", "to"}, {"examples", "suggestion"}),
    "device": ({"from", "to"}, {"keywords", "functions", "methods", "examples", "suggestion"}),
    "backend": ({"from", "to"}, {"keywords", "functions", "examples", "suggestion"}),
    "env": ({"from", "to"}, {"examples", "suggestion"}),
    "add_import": ({"module", "after"}, {"examples", "suggestion"}),
    "command": ({"from", "to"}, {"examples", "suggestion"}),
    "finding": (
        {"kind", "severity"},
        {"api", "apis", "suggestion", "examples", "keywords", "patterns", "methods", "unless", "positions",
         "suffixes", "context", "skip_logged"},
    ),
}
# How Python findings match (codemods/torch.py does `api`, codemods/findings.py the rest):
#   api         any reference to the qualified name(s), resolved through imports
#   import      an import of the module(s) or of one of their submodules
#   method      a call `.name(...)` on any receiver that is not an imported module
#   call        a call of the qualified name(s); with `keywords`/`positions`, only when one of
#               those arguments is given and not None/False/empty (with `suffixes`: only when it
#               holds a string literal ending in one of them)
#   call-kwarg  `call` with `keywords` (the older name)
#   file        a whole file whose name ends with one of `suffixes` (CUDA sources)
# `context` narrows any of them to files that import torch, or that use the device.
FINDING_CONTEXTS = ("any", "torch", "device")
# Finding kinds for files that are not Python: `env` (a shell variable set; names, `NCCL_*`
# globs), `command` (a shell command: its name and leading words, `python -m torch.distributed.launch`),
# `requirement` (a dependency name, `cupy-cuda*` globs; `unless`: not when one of these is listed
# too), `requirement-build` (a CUDA build: local version label `cu*`, or a wheel index URL glob),
# `heredoc` (a word, `NAME` or `PREFIX*`, in a shell heredoc body, which is never rewritten).
# `config-key` (a `key: value` line of a YAML config, `device_target=GPU`; the value's quotes do not matter),
# `install-path` (a shell script's path into an Ascend install, `ascend-toolkit/20.*`: product/version glob).
NON_PYTHON_FINDING_KINDS = {"env", "command", "requirement", "requirement-build", "heredoc", "config-key",
                            "install-path"}
# Kind `guard`: device code the torch pass leaves as it is because the rewrite would break it
# (codemods/guards.py); `api` names which guard, and the word a file must contain for it.
GUARD_TRIGGERS = {
    "kernel-guard": "is_cuda",  # `x.is_cuda` deciding whether a compiled CUDA extension runs
    "cuda-only-guard": "is_cuda",  # `assert x.is_cuda, "CUDA only"`
    "build-gate": "CUDA_HOME",  # `if torch.cuda.is_available() and CUDA_HOME is not None:`
    "capability": "get_device_capability",  # `torch.cuda.get_device_capability()[0]`
}
# Kind `string`: a string literal holding one of `apis` that the code matches text against (a
# comparison operand, `re.search(...)`, `.startswith(...)`): an error message of CUDA's.
FINDING_KINDS = {"api", "import", "method", "call-kwarg", "file", "call", "guard", "string"} | NON_PYTHON_FINDING_KINDS
_EXAMPLE_KEYS = {"before", "after", "flagged", "not_flagged", "add_import", "path"}
ENV_PATTERN_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\*?$")
COMMAND_RE = re.compile(r"^[A-Za-z0-9_./+-]+(?: [A-Za-z0-9_./=+-]+)*$")
REQUIREMENT_PATTERN_RE = re.compile(r"^[A-Za-z0-9*](?:[A-Za-z0-9._*-]*[A-Za-z0-9*])?$")


# ----------------------------------------------------------------------------- the rule set


@dataclass
class RuleSet:
    """All loaded rules, indexed for the engine's lookups."""

    rules: List[Rule] = field(default_factory=list)
    docs: Dict[str, CodeDoc] = field(default_factory=dict)
    fingerprint: str = ""
    # indexes
    api: Dict[str, List[Rule]] = field(default_factory=dict)
    module: Dict[str, Rule] = field(default_factory=dict)
    method: Dict[str, Rule] = field(default_factory=dict)
    attribute: Dict[str, Rule] = field(default_factory=dict)
    device: Dict[str, Rule] = field(default_factory=dict)
    backend: Dict[str, Rule] = field(default_factory=dict)
    env: Dict[str, Rule] = field(default_factory=dict)
    command: Dict[str, Rule] = field(default_factory=dict)  # shell: "nvidia-smi" -> rule
    findings: Dict[str, List[Rule]] = field(default_factory=dict)  # by match kind
    finding_api: Dict[str, Rule] = field(default_factory=dict)  # qualified name -> rule
    finding_import: Dict[str, Rule] = field(default_factory=dict)  # module -> rule
    finding_call: Dict[str, List[Rule]] = field(default_factory=dict)  # called qualified name -> rules
    finding_method: Dict[str, List[Rule]] = field(default_factory=dict)  # method name -> rules
    add_import: Dict[str, Rule] = field(default_factory=dict)  # framework module -> rule
    framework_rules: Dict[str, List[Rule]] = field(default_factory=dict)  # "tensorflow" -> its rules
    _prefilter: Optional[Any] = None  # prefilter.RulePrefilter, built on first use

    # -- lookups used by the codemods ---------------------------------------------------

    def rewrite_api(self, qualname: str) -> Optional[Tuple[str, str, Rule]]:
        """For a qualified reference, return (matched prefix, replacement prefix, rule).

        The longest matching ``from`` wins, so ``torch.cuda.CUDAGraph`` (renamed) beats the
        generic ``torch.cuda`` member rule.
        """
        parts = qualname.split(".")
        for end in range(len(parts), 0, -1):
            prefix = ".".join(parts[:end])
            for rule in self.api.get(prefix, ()):
                if rule.members is None:
                    return prefix, rule.to, rule
                if end < len(parts) and parts[end] in rule.members:
                    return prefix, rule.to, rule
        return None

    def api_finding(self, qualname: str) -> Optional[Rule]:
        """The finding for a qualified name or any of its parents (``torch.cuda.nvtx.mark``)."""
        parts = qualname.split(".")
        for end in range(len(parts), 0, -1):
            rule = self.finding_api.get(".".join(parts[:end]))
            if rule is not None:
                return rule
        return None

    def import_finding(self, module: str) -> Optional[Rule]:
        parts = module.split(".")
        for end in range(len(parts), 0, -1):
            rule = self.finding_import.get(".".join(parts[:end]))
            if rule is not None:
                return rule
        return None

    def by_code_first(self, code: str) -> Optional[Rule]:
        return next((r for r in self.rules if r.code == code), None)

    def by_code(self, code: str) -> List[Rule]:
        return [r for r in self.rules if r.code == code]

    def codes(self) -> List[str]:
        return sorted({r.code for r in self.rules} | set(self.docs))

    # -- prefilter -------------------------------------------------------------------------

    def may_need_work(self, text: str, framework: str = "auto") -> bool:
        """Whether a Python file can need anything at all (prefilter.py: words derived from
        the rules); False means it is skipped without being parsed. `framework`: --framework."""
        return self._prefilters().may_need_work(text, framework)

    def framework_rules_may_apply(self, code: Any, framework: str) -> bool:
        """Whether one of `framework`'s rules can match in a file using it, whose
        prefilter.CodeWords are `code`."""
        return self._prefilters().framework_rules_may_apply(code, framework)

    def _prefilters(self) -> Any:
        if self._prefilter is None:
            from .prefilter import RulePrefilter

            self._prefilter = RulePrefilter(self)
        return self._prefilter

    def __getstate__(self) -> Dict[str, Any]:
        state = dict(self.__dict__)
        state["_prefilter"] = None
        return state


# ----------------------------------------------------------------------------- loading


def builtin_rules_dir() -> Path:
    """The `rules/` folder: inside the installed package, or at the source checkout's root."""
    packaged = Path(__file__).resolve().parent / "rules"
    if packaged.is_dir():
        return packaged
    checkout = Path(__file__).resolve().parent.parent / "rules"
    if checkout.is_dir():
        return checkout
    raise RuleError(f"built-in rules not found (looked in {packaged} and {checkout})")


def builtin_rule_files() -> List[Path]:
    return sorted(builtin_rules_dir().glob("*.toml"))


def load_rules(extra_files: Sequence[Path] = (), include_builtin: bool = True) -> RuleSet:
    files = list(builtin_rule_files()) if include_builtin else []
    files += [Path(f) for f in extra_files]
    raw: List[Tuple[str, Dict[str, Any]]] = []
    for path in files:
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise RuleError(f"{path}: rule file not found") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise RuleError(f"{path}: cannot read rule file: {exc}") from None
        except tomllib.TOMLDecodeError as exc:
            raise RuleError(f"{path}: invalid TOML: {exc}") from None
        raw.append((path.name if include_builtin and path.parent == builtin_rules_dir() else str(path), data))
    return build_ruleset(raw)


def build_ruleset(raw: Iterable[Tuple[str, Dict[str, Any]]]) -> RuleSet:
    rs = RuleSet()
    digest = hashlib.sha256()
    for name, data in raw:
        digest.update(name.encode())
        digest.update(json.dumps(data, sort_keys=True, default=str).encode())
        for kind, entries in data.items():
            if kind == "code":
                for i, entry in enumerate(_as_list(entries, name, kind), 1):
                    doc = _parse_doc(entry, f"{name}: [[code]] #{i}")
                    rs.docs[doc.code] = doc
                continue
            if kind not in _SCHEMA:
                raise RuleError(
                    f"{name}: unknown rule kind [[{kind}]] (expected one of: "
                    f"{', '.join(sorted(list(_SCHEMA) + ['code']))})"
                )
            for i, entry in enumerate(_as_list(entries, name, kind), 1):
                rs.rules.append(_parse_rule(kind, entry, f"{name}: [[{kind}]] #{i}"))
    rs.fingerprint = digest.hexdigest()[:16]
    _index(rs)
    _check_framework_references(rs)
    return rs


def _as_list(entries: Any, name: str, kind: str) -> List[Dict[str, Any]]:
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise RuleError(f"{name}: '{kind}' must be an array of tables, written [[{kind}]]")
    return entries


def _parse_doc(entry: Dict[str, Any], where: str) -> CodeDoc:
    unknown = set(entry) - {"code", "title", "why", "fix"}
    if unknown:
        raise RuleError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    code = entry.get("code")
    if not isinstance(code, str) or not CODE_RE.match(code):
        raise RuleError(f"{where}: 'code' must look like NPU123, got {code!r}")
    if not isinstance(entry.get("title"), str):
        raise RuleError(f"{where} ({code}): missing key 'title'")
    return CodeDoc(code, entry["title"], str(entry.get("why", "")), str(entry.get("fix", "")))


def _parse_rule(kind: str, entry: Dict[str, Any], where: str) -> Rule:
    required, optional = _SCHEMA[kind]
    required = required | _COMMON_REQUIRED
    code = entry.get("code")
    label = f"{where} ({code})" if isinstance(code, str) else where
    if kind == "finding":
        required = required | {"api"} if "apis" not in entry else (required | {"apis"})
    missing = sorted(required - set(entry))
    if missing:
        raise RuleError(f"{label}: missing key{'s' if len(missing) > 1 else ''} {', '.join(repr(m) for m in missing)}")
    unknown = sorted(set(entry) - required - optional)
    if unknown:
        raise RuleError(f"{label}: unknown key{'s' if len(unknown) > 1 else ''} {', '.join(repr(u) for u in unknown)}")
    if not isinstance(code, str) or not CODE_RE.match(code):
        raise RuleError(f"{where}: 'code' must look like NPU123, got {code!r}")
    for key in ("message", "suggestion", "from", "to", "api", "kind", "severity", "module", "after"):
        if key in entry and not isinstance(entry[key], str):
            raise RuleError(f"{label}: '{key}' must be a string")
    for key in ("members", "keywords", "functions", "methods", "patterns", "apis", "unless", "suffixes"):
        if key in entry and (
            not isinstance(entry[key], list) or not all(isinstance(v, str) for v in entry[key])
        ):
            raise RuleError(f"{label}: '{key}' must be a list of strings")
    if "positions" in entry and (
        not isinstance(entry["positions"], list)
        or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in entry["positions"])
    ):
        raise RuleError(f"{label}: 'positions' must be a list of argument indexes (0, 1, …)")

    severity = Severity.INFO
    match_kind = ""
    if kind == "finding":
        try:
            severity = Severity(entry["severity"])
        except ValueError:
            raise RuleError(f"{label}: 'severity' must be error, warning or info, got {entry['severity']!r}") from None
        match_kind = entry["kind"]
        if match_kind not in FINDING_KINDS:
            raise RuleError(f"{label}: 'kind' must be one of {', '.join(sorted(FINDING_KINDS))}, got {match_kind!r}")
    from_ = entry.get("from", entry.get("api", entry.get("after", ""))) or (entry.get("apis") or [""])[0]
    if kind in ("api", "module") or (kind == "finding" and match_kind in ("api", "import", "call", "call-kwarg")):
        names = entry.get("apis", [from_]) if kind == "finding" else [from_]
        for n in names:
            if not QUALNAME_RE.match(n):
                raise RuleError(f"{label}: {n!r} is not a dotted Python name")
    if kind == "finding" and match_kind in NON_PYTHON_FINDING_KINDS:
        _check_non_python_patterns(match_kind, entry.get("apis", [from_]) + entry.get("unless", []), label)
    elif "unless" in entry:
        raise RuleError(f"{label}: 'unless' is only for kind = \"requirement\" findings")
    if kind == "command":
        for key in ("from", "to"):
            if not COMMAND_RE.match(entry[key]):
                raise RuleError(f"{label}: '{key}' must be a command and its arguments separated by single spaces, got {entry[key]!r}")
    if kind == "env":
        for key in ("from", "to"):
            if not ENV_PATTERN_RE.match(entry[key]) or entry[key].endswith("*"):
                raise RuleError(f"{label}: '{key}' must be an environment variable name, got {entry[key]!r}")
    if kind == "finding" and "skip_logged" in entry and (
        match_kind != "api" or not isinstance(entry["skip_logged"], bool)
    ):
        raise RuleError(f"{label}: 'skip_logged' must be true or false, and only for kind = \"api\" findings")
    if kind == "finding" and match_kind == "guard" and from_ not in GUARD_TRIGGERS:
        raise RuleError(f"{label}: a \"guard\" finding's 'api' must be one of {', '.join(sorted(GUARD_TRIGGERS))}")
    if kind == "finding":
        _check_python_finding(match_kind, entry, from_, label)
    if kind in ("method", "attribute") and not (IDENT_RE.match(from_) and IDENT_RE.match(entry["to"])):
        raise RuleError(f"{label}: 'from' and 'to' must be identifiers")

    framework, spec = _parse_framework_rule(kind, entry, label)
    if spec is not None and not from_:
        from_ = (spec.methods + spec.modules + spec.uses + ("",))[0]
    examples = tuple(_parse_examples(kind, entry.get("examples", []), label))
    if not examples:
        raise RuleError(f"{label}: every rule needs at least one example in 'examples'")
    members = entry.get("members")
    return Rule(
        kind=kind,
        code=code,
        source=where,
        from_=from_,
        to=entry.get("to", entry.get("module", "")),
        message=entry["message"],
        suggestion=entry.get("suggestion", ""),
        severity=severity,
        members=frozenset(members) if members is not None else None,
        match_kind=match_kind,
        keywords=tuple(entry.get("keywords", ())),
        unless=tuple(entry.get("unless", ())),
        functions=tuple(entry.get("functions", ())),
        methods=tuple(entry.get("methods", ())),
        patterns=tuple(entry.get("patterns", entry.get("apis", ()))),
        positions=tuple(entry.get("positions", ())),
        suffixes=tuple(entry.get("suffixes", ())),
        context=entry.get("context", "any"),
        skip_logged=entry.get("skip_logged", False),
        examples=examples,
        framework=framework,
        spec=spec,
        once_per_file=bool(entry.get("once_per_file", False)),
        words=tuple(entry.get("words", ())),
    )


def _check_python_finding(match_kind: str, entry: Dict[str, Any], from_: str, label: str) -> None:
    """The keys that only some finding kinds take, and what they must hold."""
    context = entry.get("context", "any")
    if context not in FINDING_CONTEXTS:
        raise RuleError(f"{label}: 'context' must be one of {', '.join(FINDING_CONTEXTS)}, got {context!r}")
    if match_kind == "method":
        for n in entry.get("apis", [from_]):
            if not IDENT_RE.match(n):
                raise RuleError(f"{label}: {n!r} is not a method name")
    if match_kind in NON_PYTHON_FINDING_KINDS:  # shell/requirements kinds have keys of their own
        return
    arguments = ("keywords", "positions")
    if match_kind not in ("call", "call-kwarg"):
        for key in arguments:
            if key in entry:
                raise RuleError(f"{label}: '{key}' is only for kind = \"call\" findings")
    if match_kind == "call-kwarg" and not entry.get("keywords"):
        raise RuleError(f"{label}: a \"call-kwarg\" finding needs 'keywords'")
    if match_kind == "file":
        if not entry.get("suffixes"):
            raise RuleError(f"{label}: a \"file\" finding needs 'suffixes' (file name endings such as \".cu\")")
    elif "suffixes" in entry:
        if match_kind not in ("call", "call-kwarg"):
            raise RuleError(f"{label}: 'suffixes' is only for kind = \"call\" or \"file\" findings")
        if not any(entry.get(key) for key in arguments):
            raise RuleError(f"{label}: 'suffixes' needs 'keywords' or 'positions' (the arguments to look in)")


def _check_non_python_patterns(match_kind: str, names: List[str], label: str) -> None:
    if match_kind == "env":
        pattern, what = ENV_PATTERN_RE, "an environment variable name (optionally ending in *)"
    elif match_kind == "command":
        pattern, what = COMMAND_RE, "a command and its leading arguments separated by single spaces"
    elif match_kind == "requirement":
        pattern, what = REQUIREMENT_PATTERN_RE, "a package name (globs with * allowed)"
    elif match_kind == "heredoc":
        pattern, what = re.compile(r"^[A-Za-z0-9_.-]+\*?$"), "a word, optionally ending in *"
    elif match_kind == "install-path":
        pattern, what = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*/[0-9*][0-9A-Za-z.*_-]*$"), "product/version glob"
    elif match_kind == "config-key":
        pattern, what = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*=[^\s=]+$"), "key=value"
    else:  # requirement-build: a local version label glob ("cu*") or an index URL glob
        pattern, what = re.compile(r"^\S+$"), "a version label or URL glob without spaces"
    for n in names:
        if not isinstance(n, str) or not pattern.match(n):
            raise RuleError(f"{label}: {n!r} is not {what}")


def _parse_examples(kind: str, examples: Any, label: str) -> Iterable[Example]:
    if not isinstance(examples, list):
        raise RuleError(f"{label}: 'examples' must be a list of tables")
    for j, ex in enumerate(examples, 1):
        if not isinstance(ex, dict):
            raise RuleError(f"{label}: example {j} must be a table like {{ before = \"…\", after = \"…\" }}")
        unknown = set(ex) - _EXAMPLE_KEYS
        if unknown:
            raise RuleError(f"{label}: example {j}: unknown key(s) {', '.join(sorted(unknown))}")
        if kind == "finding":
            if not ("flagged" in ex or "not_flagged" in ex):
                raise RuleError(f"{label}: example {j}: a finding example needs 'flagged' or 'not_flagged'")
        elif not ("before" in ex and "after" in ex):
            raise RuleError(f"{label}: example {j}: a rewrite example needs 'before' and 'after'")
        for key in ("before", "after", "flagged", "not_flagged", "path"):
            if key in ex and not isinstance(ex[key], str):
                raise RuleError(f"{label}: example {j}: '{key}' must be a string")
        yield Example(
            before=ex.get("before", ""),
            after=ex.get("after", ""),
            flagged=ex.get("flagged", ""),
            not_flagged=ex.get("not_flagged", ""),
            add_import=bool(ex.get("add_import", False)),
            path=ex.get("path", "example.py"),
        )


def _index(rs: RuleSet) -> None:
    for rule in rs.rules:
        if rule.framework:
            rs.framework_rules.setdefault(rule.framework, []).append(rule)
        elif rule.kind == "api":
            rs.api.setdefault(rule.from_, []).append(rule)
        elif rule.kind == "add_import":
            rs.add_import[rule.from_] = rule
        elif rule.kind in ("module", "method", "attribute", "device", "backend", "env", "command"):
            getattr(rs, rule.kind)[rule.from_] = rule
        elif rule.kind == "finding":
            rs.findings.setdefault(rule.match_kind, []).append(rule)
            names = rule.patterns or (rule.from_,)
            if rule.match_kind == "api":
                for n in names:
                    rs.finding_api.setdefault(n, rule)
            elif rule.match_kind in ("call", "call-kwarg"):
                for n in names:
                    rs.finding_call.setdefault(n, []).append(rule)
            elif rule.match_kind == "method":
                for n in names:
                    rs.finding_method.setdefault(n, []).append(rule)
            elif rule.match_kind == "import":
                for n in names:
                    rs.finding_import.setdefault(n, rule)


_DEFAULT: Optional[RuleSet] = None


def default_rules() -> RuleSet:
    """The built-in rules, loaded once per process."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = load_rules()
    return _DEFAULT


# ----------------------------------------------------------------------------- framework rules
#
# A rule with `framework = "tensorflow"` or `"mindspore"` belongs to that framework's codemod
# (codemods/tensorflow.py, codemods/mindspore.py, both built on codemods/callrules.py) and is
# applied only to files that use the framework (their imports, or --framework). Such rules stay
# out of the indexes the torch pass and codemods/findings.py read (RuleSet.framework_rules holds
# them). Besides `[[add_import]]` (optional `names`: `names = ["*"]` adds `from module import *`)
# and `[[finding]]` (kinds api | import | call, and `codemod`: raised by the codemod's own
# analysis, found by its code), they use these call-level kinds. Names in `apis`, `receivers` and
# `uses` are qualified as the codemod canonicalises them (`tensorflow.compat.v1.Session` and
# `tf.compat.v1.Session` are both `tensorflow.Session`).
#
# [[call_rename]]   a call of one of `apis` becomes a call of `to` with the same arguments when they
#                   fit `to`: at most `max_positional` positional ones, keywords among `keywords`.
#                   With `npu_argument` (at `npu_argument_position`): only when that argument is
#                   itself the result of a call_rename rewrite (or a variable assigned only such).
# [[call_replace]]  a call of one of `apis` becomes `to(<args>, <extra_args>)`: `args` are the
#                   parameters kept, given by position or keyword and passed on by position; any
#                   other argument leaves the call alone (a codemod finding). With `assign_to` the
#                   call must be a statement and becomes `<assign_to> = to(...)`; `cleanup`
#                   statements are then added at the end of its block.
# [[call_config]]   calls of `apis` get `keyword=to()`, or `keyword=to(wrap_keyword=<value>)` around
#                   the value given (by keyword or at `position`); not in files whose text contains
#                   `unless_file_contains`.
# [[argument]]      a string-literal argument (`keyword`, or at `position`) equal to `from`, or fully
#                   matching the regex `pattern`, becomes `to`; so do the literals assigned to a
#                   variable passed there and the argparse defaults of the `options`. A value the
#                   codemod cannot see is the finding `unknown_finding` (only when its source
#                   contains `unknown_contains`, if given).
# [[add_keyword]]   `keyword=<value>` is added to calls of `apis`, or to `.<methods>(...)` calls on
#                   receivers built by a call of `receivers` (then `receiver_methods`), unless the
#                   argument is given (by keyword or at `position`). Other receivers of those
#                   methods: the finding `unknown_finding`; so is an argument given with another
#                   value, unless `replace = true` (then that value becomes `<value>`).
# [[entry_setup]]   in a file that uses `uses` and calls one of `methods`: `setup` becomes the first
#                   and `teardown` the last statement of its `if __name__ == "__main__":` block,
#                   unless it calls one of `skip_if_called`.
# [[remove_import]] imports of `modules` are removed once every reference to them was rewritten.
# [[device_dispatch]] the device-target value named by `options` (argparse options, attributes and
#                   variables of those names) is migrated as one: `from` -> `to` in its default,
#                   choices and comparisons, or only its default when `to` has a branch already,
#                   or nothing (the finding `unknown_finding`); codemods/device_dispatch.py.

FRAMEWORKS = ("tensorflow", "mindspore")
_FRAMEWORK_FINDING_KINDS = {"api", "import", "call", "codemod"}


@dataclass(frozen=True)
class CallSpec:
    """The parameters of a framework rule (see the kinds above); unused fields stay empty."""

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


# kind -> (required keys, optional keys); `framework`, `code`, `message` are required for all.
# `unknown_finding` names the codemod finding for what the rule cannot do: arguments that do not
# fit (call_rename without a call_config fallback, call_replace, call_config), a value the codemod
# cannot see ([[argument]]), a receiver it cannot identify or an explicit other value
# ([[add_keyword]]), a file with no `if __name__ == "__main__":` block ([[entry_setup]]).
_CALL_KINDS: Dict[str, Tuple[set, set]] = {
    "call_rename": ({"apis", "to"}, {"max_positional", "keywords", "npu_argument", "npu_argument_position",
                                     "unknown_finding"}),
    "call_replace": ({"apis", "to"}, {"args", "extra_args", "assign_to", "cleanup", "unknown_finding"}),
    "call_config": ({"apis", "keyword", "to", "wrap_keyword"}, {"position", "unless_file_contains",
                                                               "unknown_finding"}),
    "argument": ({"apis", "keyword", "to"}, {"from", "pattern", "position", "options", "unknown_finding",
                                            "unknown_contains"}),
    "add_keyword": ({"keyword", "value"}, {"apis", "methods", "position", "receivers", "receiver_methods", "replace",
                                           "unknown_finding"}),
    "entry_setup": ({"uses", "methods", "setup", "teardown"}, {"skip_if_called", "unknown_finding"}),
    "remove_import": ({"modules"}, set()),
    "device_dispatch": ({"options", "from", "to"}, {"unknown_finding"}),
}
for _kind, (_required, _optional) in _CALL_KINDS.items():
    _SCHEMA[_kind] = (_required | {"framework"}, _optional | {"examples", "suggestion"})
_SCHEMA["add_import"][1].update({"framework", "names"})
_SCHEMA["finding"][1].update({"framework", "once_per_file", "words"})
FINDING_KINDS.add("codemod")

# key -> what it must hold, for the keys of the kinds above.
_QUALNAMES = ("apis", "receivers", "uses", "modules", "skip_if_called")
_IDENTIFIERS = ("methods", "keywords", "args", "receiver_methods", "options")
_IDENTIFIER = ("keyword", "wrap_keyword", "npu_argument")
_INDEXES = ("position", "max_positional", "npu_argument_position")
_EXPRESSIONS = ("extra_args",)
_STATEMENTS = ("cleanup",)


def _check_python(source: str, mode: str, label: str, key: str) -> None:
    import ast
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(source, mode=mode)
    except SyntaxError:
        what = "a Python expression" if mode == "eval" else "a Python statement"
        raise RuleError(f"{label}: '{key}' must be {what}, got {source!r}") from None


def _parse_framework_rule(kind: str, entry: Dict[str, Any], label: str) -> Tuple[str, Optional[CallSpec]]:
    """Validate what a framework rule adds to its kind; return (framework, spec or None)."""
    framework = entry.get("framework", "")
    if "framework" in entry and framework not in FRAMEWORKS:
        raise RuleError(f"{label}: 'framework' must be one of {', '.join(FRAMEWORKS)}, got {framework!r}")
    if kind == "finding":
        match_kind = entry.get("kind")
        if match_kind == "codemod" and not framework:
            raise RuleError(f"{label}: a \"codemod\" finding needs 'framework' (the codemod that raises it)")
        if framework:
            if match_kind not in _FRAMEWORK_FINDING_KINDS:
                raise RuleError(
                    f"{label}: a finding with 'framework' must be of kind {', '.join(sorted(_FRAMEWORK_FINDING_KINDS))}"
                    f", got {match_kind!r}"
                )
            for key in ("context", "positions", "suffixes", "methods", "unless"):
                if key in entry:
                    raise RuleError(f"{label}: '{key}' is not used by findings with 'framework'")
        if "words" in entry and (match_kind != "codemod" or not isinstance(entry["words"], list)
                                 or not all(isinstance(w, str) and IDENT_RE.match(w) for w in entry["words"])):
            raise RuleError(f"{label}: 'words' must be a list of words, for kind = \"codemod\" findings")
        if "once_per_file" in entry and (not isinstance(entry["once_per_file"], bool) or not framework
                                         or match_kind != "api"):
            raise RuleError(f"{label}: 'once_per_file' must be true or false, for kind = \"api\" findings with 'framework'")
        return framework, None
    if kind == "add_import":
        names = entry.get("names", [])
        if "names" in entry and not framework:
            raise RuleError(f"{label}: 'names' is only for [[add_import]] with 'framework'")
        if not isinstance(names, list) or not all(isinstance(n, str) and (n == "*" or IDENT_RE.match(n)) for n in names):
            raise RuleError(f"{label}: 'names' must be a list of identifiers, or [\"*\"]")
        if not QUALNAME_RE.match(entry["module"]):
            raise RuleError(f"{label}: {entry['module']!r} is not a dotted Python name")
        return framework, (CallSpec(names=tuple(names)) if framework else None)
    if kind not in _CALL_KINDS:
        return framework, None

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
            _check_python(v, "eval" if key in _EXPRESSIONS else "exec", label, key)
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
            _check_python(entry[key], "eval", label, key)
    for key in ("setup", "teardown"):
        if key in entry:
            _check_python(entry[key], "exec", label, key)
    if "assign_to" in entry:
        _check_python(f"{entry['assign_to']} = None", "exec", label, "assign_to")
    if "unknown_finding" in entry and not CODE_RE.match(entry["unknown_finding"]):
        raise RuleError(f"{label}: 'unknown_finding' must be a code like NPU123, got {entry['unknown_finding']!r}")
    if kind in ("call_rename", "call_replace", "call_config") and not QUALNAME_RE.match(entry["to"]):
        raise RuleError(f"{label}: 'to' must be a dotted Python name, got {entry['to']!r}")
    if not lists["apis"] and kind not in ("add_keyword", "entry_setup", "remove_import", "device_dispatch"):
        raise RuleError(f"{label}: 'apis' must name at least one API")
    if kind == "call_rename" and ints["npu_argument_position"] is not None and "npu_argument" not in entry:
        raise RuleError(f"{label}: 'npu_argument_position' needs 'npu_argument'")
    if kind == "call_replace" and lists["cleanup"] and "assign_to" not in entry:
        raise RuleError(f"{label}: 'cleanup' needs 'assign_to' (the call must be a statement)")
    if kind == "argument":
        if ("from" in entry) == ("pattern" in entry):
            raise RuleError(f"{label}: an [[argument]] rule needs exactly one of 'from' (a literal) or 'pattern' (a regex)")
        if "pattern" in entry:
            try:
                re.compile(entry["pattern"])
            except re.error as exc:
                raise RuleError(f"{label}: 'pattern' is not a regular expression: {exc}") from None
        if "unknown_contains" in entry and "unknown_finding" not in entry:
            raise RuleError(f"{label}: 'unknown_contains' needs 'unknown_finding'")
    if kind == "add_keyword":
        if not (lists["apis"] or lists["methods"]):
            raise RuleError(f"{label}: an [[add_keyword]] rule needs 'apis' or 'methods'")
        if lists["methods"] and not lists["receivers"]:
            raise RuleError(f"{label}: 'methods' needs 'receivers' (the calls that build what they are called on)")
        if (lists["receivers"] or lists["receiver_methods"]) and not lists["methods"]:
            raise RuleError(f"{label}: 'receivers' and 'receiver_methods' are only for 'methods'")
    if "replace" in entry and not isinstance(entry["replace"], bool):
        raise RuleError(f"{label}: 'replace' must be true or false")
    if kind == "entry_setup" and not (lists["uses"] and lists["methods"]):
        raise RuleError(f"{label}: 'uses' and 'methods' must not be empty")
    if kind == "remove_import" and not lists["modules"]:
        raise RuleError(f"{label}: 'modules' must name at least one module")
    keywords = entry.get("keywords")
    return framework, CallSpec(
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
        pattern=entry.get("pattern", ""),
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


def _framework_tokens(rule: Rule) -> Iterable[str]:
    """Prefilter words for a framework rule: a file needing it contains one of them."""
    spec = rule.spec
    if rule.kind == "finding":
        for name in rule.patterns or (rule.from_,):
            yield name.split(".", 1)[0] if rule.match_kind == "import" else name.rsplit(".", 1)[-1]
    elif spec is not None:
        for name in spec.apis + spec.uses:
            yield name.rsplit(".", 1)[-1]
        yield from spec.methods
        yield from spec.options


def _check_framework_references(rs: RuleSet) -> None:
    """`unknown_finding` codes must name a `codemod` finding of the same framework."""
    codemod_findings = {
        (r.framework, r.code) for r in rs.rules if r.kind == "finding" and r.match_kind == "codemod"
    }
    for rule in rs.rules:
        code = rule.spec.unknown_finding if rule.spec is not None else ""
        if code and (rule.framework, code) not in codemod_findings:
            raise RuleError(
                f"{rule.source} ({rule.code}): 'unknown_finding' {code} is not a [[finding]] of kind"
                f" \"codemod\" for framework {rule.framework!r}"
            )
