"""Load the migration rules (`rules/*.toml`) into a RuleSet: TOML, the checks every kind shares,
and the indexes the passes look rules up in.

Rules are data: every rename, device-string, backend and env-var rewrite and every finding the
engine knows lives in a TOML file with a stable code, a message and its own examples. A bad rule
file is a `RuleError` naming the file, the entry and the problem; the CLI turns it into exit 2.

Each TOML array of tables is one rule kind, and each kind is one module of kinds/ (`[[device]]`
-> kinds/device.py) that owns its keys, their checks, its index and its words; see
kinds/__init__.py for the list. ``[[code]]`` documents a code: title, why, what to do (shown by
``explain``). Every rule needs `code` (NPU123), `message` and at least one example:
``examples = [{ before = "…", after = "…" }]`` for rewrites, ``{ flagged = "…" }`` /
``{ not_flagged = "…" }`` for findings (`path` picks the front end, `add_import = true` lets the
rewrite add `import torch_npu`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, TypeVar

from .kinds import FRAMEWORKS, KINDS
from .kinds import add_import as _add_import
from .kinds import api as _api
from .kinds import attribute as _attribute
from .kinds import backend as _backend
from .kinds import command as _command
from .kinds import device as _device
from .kinds import edit as _edit
from .kinds import env as _env
from .kinds import finding as _finding
from .kinds import method as _method
from .kinds import module as _module
from .kinds.base import CODE_RE, GENERATION, CallSpec, CodeDoc, Example, Kind, Rule, RuleError
from .model import Severity
from .options import TARGET_OPTIONS, Options
from .project_files import toml_module
from .targets.tables import data_dir, shipped_toml

I = TypeVar("I")  # noqa: E741

_COMMON_REQUIRED = frozenset({"code", "message"})
_EXAMPLE_KEYS = {"before", "after", "flagged", "not_flagged", "add_import", "path", "options"}
# What an example's `options` may set (options.Options fields, with the type of their value; the
# targets by their options' names and a version string: Options.of makes the value).
_EXAMPLE_OPTIONS = {**{f.name: type(f.default) for f in dataclasses.fields(Options)
                       if isinstance(f.default, (bool, str, tuple))}, **{name: str for name in TARGET_OPTIONS}}
_STRING_KEYS = ("message", "suggestion", "from", "to", "api", "kind", "severity", "module", "after")
_STRING_LIST_KEYS = ("members", "keywords", "functions", "second_functions", "methods", "patterns", "apis", "unless", "suffixes")


# ----------------------------------------------------------------------------- the rule set


@dataclass
class RuleSet:
    """All loaded rules, plain data. Each kind owns its index (kinds/: `Kind.new_index`,
    `Kind.index`), one per framework ("" for rules without `framework`): `index_of(KIND)`."""

    rules: List[Rule] = field(default_factory=list)
    docs: Dict[str, CodeDoc] = field(default_factory=dict)
    fingerprint: str = ""
    # The (torch_npu, cann, mindspore) specs this set is the targets' view for
    # (targets/rule_view.py, derived once per run by the pipeline); () for the rules as loaded.
    targets: Tuple[str, ...] = ()
    # (framework, kind name) -> that kind's index of the rules of that framework (_index)
    indexes: Dict[Tuple[str, str], Any] = field(default_factory=dict)
    framework_rules: Dict[str, List[Rule]] = field(default_factory=dict)  # "tensorflow" -> its rules
    # The kinds with rules here that carry their own applier (Kind.apply), in registry order.
    applied_kinds: Tuple[Kind[Any], ...] = ()

    def index_of(self, kind: Kind[I], framework: str = "") -> I:
        """`kind`'s index of the rules of `framework` ("": the rules without one); an empty
        one when there are none."""
        index = self.indexes.get((framework, kind.name))
        return index if index is not None else kind.new_index()

    # -- the built-in kinds' indexes, as the passes that apply them read them
    # (cached: read per reference; a rule set is not changed once indexed) ---------------

    @cached_property
    def api(self) -> _api.ApiIndex:
        return self.index_of(_api.KIND)

    @cached_property
    def module(self) -> Dict[str, Rule]:
        return self.index_of(_module.KIND)

    @cached_property
    def method(self) -> Dict[str, Rule]:
        return self.index_of(_method.KIND)

    @cached_property
    def attribute(self) -> Dict[str, Rule]:
        return self.index_of(_attribute.KIND)

    @cached_property
    def device(self) -> Dict[str, Rule]:
        return self.index_of(_device.KIND)

    @cached_property
    def backend(self) -> Dict[str, Rule]:
        return self.index_of(_backend.KIND)

    @cached_property
    def env(self) -> Dict[str, Rule]:
        return self.index_of(_env.KIND)

    @cached_property
    def command(self) -> Dict[str, Rule]:  # shell: "nvidia-smi" -> rule
        return self.index_of(_command.KIND)

    @cached_property
    def add_import(self) -> Dict[str, Rule]:  # `after` (torch) -> rule
        return self.index_of(_add_import.KIND)

    @cached_property
    def edits(self) -> Dict[str, Rule]:  # code -> [[edit]]
        return self.index_of(_edit.KIND)

    @cached_property
    def finding_index(self) -> _finding.FindingIndex:
        return self.index_of(_finding.KIND)

    @cached_property
    def findings(self) -> Dict[str, List[Rule]]:  # by match kind
        return self.finding_index.by_match

    @cached_property
    def finding_api(self) -> Dict[str, Rule]:  # qualified name -> rule
        return self.finding_index.api

    @cached_property
    def finding_import(self) -> Dict[str, Rule]:  # module -> rule
        return self.finding_index.import_

    @cached_property
    def finding_call(self) -> Dict[str, List[Rule]]:  # called qualified name -> rules
        return self.finding_index.call

    @cached_property
    def finding_method(self) -> Dict[str, List[Rule]]:  # method name -> rules
        return self.finding_index.method

    @cached_property
    def analysis(self) -> Dict[str, Rule]:  # code -> finding of kind "analysis"
        return self.finding_index.analysis

    # -- lookups used by the codemods ---------------------------------------------------

    def rewrite_api(self, qualname: str) -> Optional[Tuple[str, str, Rule]]:
        """(matched prefix, replacement prefix, rule) for a qualified reference: kinds/api.py."""
        return _api.rewrite_api(self.api, qualname)

    def import_finding(self, module: str) -> Optional[Rule]:
        parts = module.split(".")
        for end in range(len(parts), 0, -1):
            rule = self.finding_import.get(".".join(parts[:end]))
            if rule is not None:
                return rule
        return None

    def reported(self, code: str) -> Rule:
        """The rule of a code a pass reports from its own analysis (an `analysis` finding or an
        [[edit]]): its severity, message and suggestion. A rule set loaded without the
        built-in rules gets a stand-in whose message is the code."""
        rule = self.analysis.get(code) or self.edits.get(code)
        if rule is None:
            rule = Rule(kind="finding", code=code, source="(not loaded)", message=code, severity=Severity.WARNING,
                        spec=_finding.FindingSpec(match_kind="analysis"))
        return rule

    def by_code(self, code: str) -> List[Rule]:
        return [r for r in self.rules if r.code == code]

    def codes(self) -> List[str]:
        return sorted({r.code for r in self.rules} | set(self.docs))


# ----------------------------------------------------------------------------- loading


def builtin_rules_dir() -> Path:
    """The `rules/` folder: inside the installed package, or at the source checkout's root
    (targets/tables.data_dir)."""
    try:
        return data_dir()
    except FileNotFoundError as exc:
        raise RuleError(str(exc)) from None


def builtin_rule_files() -> List[Path]:
    return sorted(builtin_rules_dir().glob("*.toml"))


MAX_RULE_FILE_BYTES = 4 * 2**20  # a rule file is data a person wrote: a few hundred KB at most


# Rule sets built in this process, by the names and bytes of their files: a program (or a test)
# that runs npu-migrate many times parses and checks the same files once (#27.7). The key is
# everything a rule set is made of, so a cached one is what a fresh load would build.
_LOADED: "OrderedDict[bytes, RuleSet]" = OrderedDict()
_LOADED_KEPT = 8


def load_rules(extra_files: Sequence[Path] = (), include_builtin: bool = True,
               parsed_cache: Optional[Path] = None) -> RuleSet:
    """The rule set of the built-in rule files and `extra_files`. `parsed_cache`: a folder
    where the parsed content of the files is kept between runs (ParsedRulesCache)."""
    files = list(builtin_rule_files()) if include_builtin else []
    files += [Path(f) for f in extra_files]
    texts: List[Tuple[str, Path, bytes]] = []
    from .source import SourceError, read_regular

    for path in files:
        try:
            # Only a regular file of bounded size: a FIFO or /dev/zero given as a rule file never ends.
            content = read_regular(str(path), MAX_RULE_FILE_BYTES)
        except FileNotFoundError:
            raise RuleError(f"{path}: rule file not found") from None
        except OSError as exc:
            raise RuleError(f"{path}: cannot read rule file: {exc.strerror or exc}") from None
        except SourceError as exc:
            raise RuleError(f"{path}: cannot read rule file: {exc}") from None
        name = path.name if include_builtin and path.parent == builtin_rules_dir() else str(path)
        texts.append((name, path, content))
    digest = hashlib.sha256()
    for name, _, content in texts:
        for part in (name.encode("utf-8", "surrogatepass"), content):
            digest.update(len(part).to_bytes(8, "big") + part)
    # what the files may contain depends on the kinds registered (a kind registered since is new)
    digest.update(GENERATION[0].to_bytes(8, "big"))
    key = digest.digest()
    cached = _LOADED.get(key)
    if cached is not None:
        _LOADED.move_to_end(key)
        return cached
    from . import startup

    # The command line keeps the built-in set between runs (startup.KeptRuleSet: read only when
    # built from the same files by the same code).
    kept = startup.KEPT_RULES if include_builtin and not extra_files else None
    if kept is not None:
        cached = kept.get(key)
        if isinstance(cached, RuleSet):
            _LOADED[key] = cached
            return cached
    stored = ParsedRulesCache(parsed_cache, key) if parsed_cache is not None else None
    raw = stored.get() if stored is not None else None
    if raw is None:
        raw = []
        for name, path, content in texts:
            # A built-in file's parse is shipped (targets/tables.shipped_toml, for these bytes only).
            data = shipped_toml(str(path), content)
            if data is not None:
                raw.append((name, data))
                continue
            try:
                data = parse_toml(content.decode("utf-8"))
            except UnicodeDecodeError as exc:
                raise RuleError(f"{path}: cannot read rule file: {exc}") from None
            except toml_module().TOMLDecodeError as exc:
                raise RuleError(f"{path}: invalid TOML: {exc}") from None
            raw.append((name, data))
        if stored is not None:
            stored.put(raw)
    # (the fingerprint is the key's: the same files by name and bytes, not their JSON once more)
    rules = _LOADED[key] = build_ruleset(raw, fingerprint=hashlib.sha256(key).hexdigest()[:16])
    if kept is not None:
        kept.put(key, rules)
    while len(_LOADED) > _LOADED_KEPT:
        _LOADED.popitem(last=False)
    return rules


def parse_toml(text: str) -> Dict[str, Any]:
    """One rule file's TOML (tests/test_startup.py counts the calls)."""
    return toml_module().loads(text)


class ParsedRulesCache:
    """The parsed content of the rule files, kept as JSON between runs: parsing TOML took most
    of the rule set's 0.07 s at every start (issue 24, one script). The built-in files' parse is
    also shipped (targets/tables.shipped_toml), so this serves the `--rules` files.

    The entry's name is the hash of every file's name and bytes (load_rules' key), in a folder
    named for the package version: any change to a rule file or the tool's version misses. It
    is written only when its JSON gives back exactly what tomllib gave (TOML dates, NaN: not
    kept), and read only when it names its
    own key; anything unreadable is a miss. Runs that write files parse the TOML themselves
    (cli.py, as the result cache serves them no changed result); --no-cache neither reads nor
    writes it. The newest KEPT entries are kept."""

    KEPT = 8

    def __init__(self, folder: Path, key: bytes) -> None:
        self.folder = folder  # the caller's, named for the package version (cli.py)
        self.key = hashlib.sha256(key).hexdigest()[:32]
        self.path = folder / f"{self.key}.json"

    def get(self) -> Optional[List[Tuple[str, Dict[str, Any]]]]:
        try:
            stored = json.loads(self.path.read_bytes())
            if stored["key"] != self.key:
                return None
            return [(name, data) for name, data in stored["files"]]
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, raw: List[Tuple[str, Dict[str, Any]]]) -> None:
        try:
            text = json.dumps({"key": self.key, "files": raw})
            if [tuple(pair) for pair in json.loads(text)["files"]] != raw or "NaN" in text:
                return
            from .source import atomic_write

            # private, as every folder of the cache (cache.private_root): mkdir(parents=True)
            # would give the missing parent the umask's mode (0o755 here, the results' are 0o700)
            for folder in (self.folder.parent, self.folder):
                folder.mkdir(mode=0o700, exist_ok=True)
            atomic_write(str(self.path), text.encode("utf-8"), 0o644, durable=False)
            for old in sorted(self.folder.glob("*.json"), key=lambda p: p.stat().st_mtime)[:-self.KEPT]:
                old.unlink()
        except (OSError, TypeError, ValueError):  # a read-only cache folder, a TOML date
            return


def build_ruleset(raw: Iterable[Tuple[str, Dict[str, Any]]], fingerprint: str = "") -> RuleSet:
    """The rule set of the parsed files `raw` ((name, data) in order). `fingerprint`: a digest
    of everything they are made of (load_rules': the files' names and bytes); without one, a
    digest of the names and data."""
    rs = RuleSet()
    digest = hashlib.sha256()
    for name, data in raw:
        if not fingerprint:
            digest.update(name.encode())
            digest.update(json.dumps(data, sort_keys=True, default=str).encode())
        for kind, entries in data.items():
            if kind == "code":
                for i, entry in enumerate(_as_list(entries, name, kind), 1):
                    doc = _parse_doc(entry, f"{name}: [[code]] #{i}")
                    rs.docs[doc.code] = doc
                continue
            if kind not in KINDS:
                raise RuleError(
                    f"{name}: unknown rule kind [[{kind}]] (expected one of: "
                    f"{', '.join(sorted(list(KINDS) + ['code']))})"
                )
            for i, entry in enumerate(_as_list(entries, name, kind), 1):
                rs.rules.append(_parse_rule(kind, entry, f"{name}: [[{kind}]] #{i}"))
    rs.fingerprint = fingerprint or digest.hexdigest()[:16]
    _index(rs)
    _check_framework_references(rs)
    return rs


def _as_list(entries: Any, name: str, kind: str) -> List[Dict[str, Any]]:
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise RuleError(f"{name}: '{kind}' must be an array of tables, written [[{kind}]]")
    return entries


def _parse_doc(entry: Dict[str, Any], where: str) -> CodeDoc:
    unknown = set(entry) - {"code", "title", "why", "fix", "reported_as"}
    if unknown:
        raise RuleError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    code = entry.get("code")
    if not isinstance(code, str) or not CODE_RE.match(code):
        raise RuleError(f"{where}: 'code' must look like NPU123, got {code!r}")
    if not isinstance(entry.get("title"), str):
        raise RuleError(f"{where} ({code}): missing key 'title'")
    reported = entry.get("reported_as", "")
    if reported and (not isinstance(reported, str) or not set(reported.split("/")) <= _REPORTED_AS):
        raise RuleError(f"{where} ({code}): 'reported_as' must be {', '.join(sorted(_REPORTED_AS))} "
                        f"or several joined by '/', got {reported!r}")
    return CodeDoc(code, entry["title"], str(entry.get("why", "")), str(entry.get("fix", "")), where, reported)


_REPORTED_AS = frozenset({"rewrite", "error", "warning", "info"})


def _parse_rule(kind_name: str, entry: Dict[str, Any], where: str) -> Rule:
    kind = KINDS[kind_name]
    required = kind.schema.required | _COMMON_REQUIRED | kind.also_required(entry)
    optional = kind.schema.optional
    code = entry.get("code")
    label = f"{where} ({code})" if isinstance(code, str) else where
    missing = sorted(required - set(entry))
    if missing:
        raise RuleError(f"{label}: missing key{'s' if len(missing) > 1 else ''} {', '.join(repr(m) for m in missing)}")
    unknown = sorted(set(entry) - required - optional)
    if unknown:
        raise RuleError(f"{label}: unknown key{'s' if len(unknown) > 1 else ''} {', '.join(repr(u) for u in unknown)}")
    if not isinstance(code, str) or not CODE_RE.match(code):
        raise RuleError(f"{where}: 'code' must look like NPU123, got {code!r}")
    for key in _STRING_KEYS:
        if key in entry and not isinstance(entry[key], str):
            raise RuleError(f"{label}: '{key}' must be a string")
    for key in _STRING_LIST_KEYS:
        if key in entry and (
            not isinstance(entry[key], list) or not all(isinstance(v, str) for v in entry[key])
        ):
            raise RuleError(f"{label}: '{key}' must be a list of strings")
    if "positions" in entry and (
        not isinstance(entry["positions"], list)
        or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in entry["positions"])
    ):
        raise RuleError(f"{label}: 'positions' must be a list of argument indexes (0, 1, …)")
    fields = kind.fields(entry, label)
    from_ = entry.get("from", entry.get("api", entry.get("after", ""))) or (entry.get("apis") or [""])[0]
    kind.check(entry, label, from_)
    framework = entry.get("framework", "")
    if "framework" in entry and framework not in FRAMEWORKS:
        raise RuleError(f"{label}: 'framework' must be one of {', '.join(FRAMEWORKS)}, got {framework!r}")
    spec = kind.spec(entry, label, framework)
    if isinstance(spec, CallSpec) and not from_:
        from_ = spec.subject()
    examples = tuple(_parse_examples(kind_name, entry.get("examples", []), label))
    if not examples:
        raise RuleError(f"{label}: every rule needs at least one example in 'examples'")
    return Rule(
        kind=kind_name,
        code=code,
        source=where,
        from_=from_,
        to=entry.get("to", entry.get("module", "")),
        message=entry["message"],
        suggestion=entry.get("suggestion", ""),
        severity=fields.get("severity", Severity.INFO),
        examples=examples,
        framework=framework,
        spec=spec,
    )


def _parse_examples(kind: str, examples: Any, label: str) -> Iterable[Example]:
    if not isinstance(examples, list):
        raise RuleError(f"{label}: 'examples' must be a list of tables")
    for j, ex in enumerate(examples, 1):
        if not isinstance(ex, dict):
            raise RuleError(f"{label}: example {j} must be a table like {{ before = \"…\", after = \"…\" }}")
        unknown = set(ex) - _EXAMPLE_KEYS
        if unknown:
            raise RuleError(f"{label}: example {j}: unknown key(s) {', '.join(sorted(unknown))}")
        if KINDS[kind].reports:
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
            options=_example_options(ex.get("options", {}), f"{label}: example {j}"),
        )


def _example_options(options: Any, label: str) -> Tuple[Tuple[str, Any], ...]:
    if not isinstance(options, dict):
        raise RuleError(f"{label}: 'options' must be a table like {{ modelarts = true }}")
    options = dict(options)
    for key, value in options.items():
        if key not in _EXAMPLE_OPTIONS:
            raise RuleError(f"{label}: unknown option {key!r} (one of: {', '.join(sorted(_EXAMPLE_OPTIONS))})")
        if _EXAMPLE_OPTIONS[key] is tuple and isinstance(value, list) and all(isinstance(v, str) for v in value):
            options[key] = value = tuple(value)  # data_args = ["images"]
        if type(value) is not _EXAMPLE_OPTIONS[key]:
            raise RuleError(f"{label}: option {key!r} must be a {_EXAMPLE_OPTIONS[key].__name__}")
    return tuple(sorted(options.items()))


def _index(rs: RuleSet) -> None:
    """Each rule into its kind's index for its framework (each kind's own `index`)."""
    for rule in rs.rules:
        kind = KINDS[rule.kind]
        if rule.framework:
            rs.framework_rules.setdefault(rule.framework, []).append(rule)
        index = rs.indexes.get((rule.framework, rule.kind))
        if index is None:
            index = rs.indexes[(rule.framework, rule.kind)] = kind.new_index()
        kind.index(index, rule)
    present = {rule.kind for rule in rs.rules}
    rs.applied_kinds = tuple(k for k in KINDS.values() if k.apply is not None and k.name in present)


def kind_of(rule: Rule) -> Optional[Kind]:
    return KINDS.get(rule.kind)


_DEFAULT: Optional[RuleSet] = None


def default_rules() -> RuleSet:
    """The built-in rules, loaded once per process."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = load_rules()
    return _DEFAULT


def _check_framework_references(rs: RuleSet) -> None:
    """`unknown_finding` codes must name a `codemod` finding of the same framework."""
    codemod_findings = {
        (r.framework, r.code) for r in rs.rules if _finding.match_kind_of(r) == "codemod"
    }
    for rule in rs.rules:
        code = rule.call_spec.unknown_finding if rule.call_spec is not None else ""
        if code and (rule.framework, code) not in codemod_findings:
            raise RuleError(
                f"{rule.source} ({rule.code}): 'unknown_finding' {code} is not a [[finding]] of kind"
                f" \"codemod\" for framework {rule.framework!r}"
            )
