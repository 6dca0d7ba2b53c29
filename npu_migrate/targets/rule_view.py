"""The rules as a run's targets see them: `rules_for_targets(rules, targets)`, derived once
per run by the pipeline (pipeline.py) and handed down to the engine, which applies the rules
it is given.

* A TensorFlow rule that would write a TF Adapter helper the CANN target lacks
  (cann.py: `npu_config_proto` for CANN 20.x) is not applied; in its place a finding
  (NPU321, the rule of that code in rules/tensorflow.toml) reports each call the rule would
  have rewritten, with the release that added the helper and what to write by hand instead.
* A finding's suggestion that names a helper the CANN target lacks, or a `torch.npu.X` /
  `torch_npu.X` name the torch_npu target lacks (torch_npu.py), is replaced by one that says so
  and what to do instead: a suggestion never tells the user to call a name the target lacks.

The derived rule set is built once per (rules, targets) and cached; with the newest targets and
no suggestion to change it shares the lists and indexes of `rules`.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from typing import TYPE_CHECKING, Dict, FrozenSet, Iterable, List, Optional, Set, Tuple

from ..kinds import KINDS
from ..kinds.base import Rule
from ..kinds.call_config import CallConfigSpec
from ..kinds.call_rename import CallRenameSpec
from ..kinds.entry_setup import EntrySetupSpec
from ..kinds.finding import FindingSpec, match_kind_of
from ..rules import RuleSet
from .cann import CannMissing, CannTarget, load_cann_table
from .mindspore import MsTarget, load_ms_table
from .tables import table_path
from .torch_npu import Target, describe

if TYPE_CHECKING:
    from . import RunTargets

TARGET_CODE = "NPU321"

_CACHE: Dict[Tuple[object, ...], Tuple[RuleSet, RuleSet]] = {}  # (id(rules), *specs) -> (rules, view)
_BY_FINGERPRINT: Dict[Tuple[str, ...], Tuple[RuleSet, RuleSet]] = {}  # (fingerprint, *specs) -> (rules, view)


def written_helpers(rule: Rule) -> List[str]:
    """The TF Adapter names (and `function:parameter`s, and facts) a TensorFlow rule writes."""
    kind = KINDS.get(rule.kind)
    if kind is None or rule.framework != "tensorflow":
        return []
    table = load_cann_table()
    names, codes = kind.writes(rule)  # what the rule writes, as its kind says
    out: List[str] = list(names)
    for code in codes:
        out += _names_in_code(code)
    seen: Set[str] = set()
    helpers = []
    for name in out:
        if name in seen or name not in table.names:
            continue
        seen.add(name)
        helpers.append(name)
        fact = next((f for f in table.facts if f.startswith(name + " ")), None)
        if fact is not None and ":" not in name:
            helpers.append(fact)
    return helpers


def _names_in_code(code: str) -> List[str]:
    if not code:
        return []
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return re.findall(r"[A-Za-z_]\w*", code)
    out: List[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            out.append(node.func.id)
            out += [f"{node.func.id}:{kw.arg}" for kw in node.keywords if kw.arg]
        elif isinstance(node, ast.Name):
            out.append(node.id)
    return out


# ----------------------------------------------------------------------------- names in texts

_DOTTED = re.compile(r"[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*")
# A torch_npu name followed by members of it: "torch_npu.npu.mstx (mark, range_push, range_pop)".
_MEMBER_LIST = re.compile(r"\b((?:torch\.npu|torch_npu)(?:\.\w+)*) \(([A-Za-z_]\w*(?:, [A-Za-z_]\w*)+)\)")


def _torch_members_missing(text: str, torch_spec: str) -> List[Tuple[Tuple[int, int], str, List[str], List[str]]]:
    """For each member list of a torch_npu name in `text`: (its span, the name, the members the
    torch_npu target has, why the others are missing)."""
    target = Target(torch_spec)
    out = []
    for m in _MEMBER_LIST.finditer(text):
        kept, why = [], []
        for member in m.group(2).split(", "):
            missing = target.missing(f"{m.group(1)}.{member}")
            if missing is None:
                kept.append(member)
            else:
                why.append(describe(missing))
        if why:
            out.append((m.span(), m.group(1), kept, why))
    return out


# npu_init's imports of TensorFlow and the standard library: in a text, `tf.X` or `os.X` is the
# user's own import, not the adapter's.
_GENERIC = {"tf", "os", "atexit", "session", "backend", "util", "config_pb2", "rewriter_config_pb2",
            "session_run_hook", "RewriterConfig", "experimental_options", "profiler"}


def variable_helpers() -> FrozenSet[str]:
    """TF Adapter names that some dated release lacks: the only ones a text can name wrongly.
    (Computed once per table: the view asks for every suggestion, ~300 a run.)"""
    table = load_cann_table()
    kept = _VARIABLE_HELPERS.get(id(table))
    if kept is None or kept[0] is not table:
        every = set(table.releases)
        kept = _VARIABLE_HELPERS[id(table)] = (table, frozenset(
            n for n, have in table.names.items()
            if ":" not in n and "." not in n and n not in _GENERIC and set(have) != every))
    return kept[1]


_VARIABLE_HELPERS: Dict[int, Tuple[object, FrozenSet[str]]] = {}  # id(table) -> (table, its names)
# What a text must contain for missing_in_text to find a name in it: one of these, or a word
# (the head of a dotted name is one) that is a variable TF Adapter helper. Most suggestions hold
# none: they are answered without walking their dotted names.
_MARKERS = ("torch.npu", "torch_npu", "mindspore.", "npu_bridge.")
_WORD = re.compile(r"[A-Za-z_]\w*")


def missing_in_text(text: str, cann: CannTarget, torch_spec: str, ms_spec: str = "") -> Optional[str]:
    """Why `text` names something the targets lack (the first such name), or None."""
    if not text:
        return None
    tf_names = variable_helpers()
    # (the text holds none of what the check below looks for: nor does it once mentions are cut)
    if not any(marker in text for marker in _MARKERS) and tf_names.isdisjoint(_WORD.findall(text)):
        return None
    # "… lacks `X`" and "… has no `X`" say that a release lacks X: a mention, not advice to call it.
    text = re.sub(r"(?:lacks|has no) `[^`]*`", "", text)
    if not any(marker in text for marker in _MARKERS) and tf_names.isdisjoint(_WORD.findall(text)):
        return None
    for _span, _name, _kept, why in _torch_members_missing(text, torch_spec):
        return why[0]
    torch_target = Target(torch_spec)
    for m in _DOTTED.finditer(text):
        token = m.group(0).rstrip(".")
        if token.startswith(("torch.npu.", "torch_npu.")) or token in ("torch.npu", "torch_npu"):
            missing = torch_target.missing(token)
            if missing is not None:
                return describe(missing)
            continue
        if token.startswith("mindspore.") and token in load_ms_table().names:
            ms = MsTarget(ms_spec)
            if not ms.has(token):
                table = load_ms_table()
                added = next((r for r in table.releases if r in table.names[token]), None)
                return (f"{ms.label()} has no `{token}`" + (f" (it came with MindSpore {added})" if added else ""))
            continue
        if token.startswith("npu_bridge."):
            modules = [n for n in load_cann_table().names if "." in n and (token + ".").startswith(n + ".")]
            lacking = cann.missing(modules)
        else:
            head = token.split(".", 1)[0]
            lacking = cann.missing([head]) if head in tf_names else None
        if lacking is not None:
            return lacking.describe()
    return None


# ----------------------------------------------------------------------------- the derived rules


def rules_for_targets(rules: RuleSet, targets: RunTargets) -> RuleSet:
    """The rules as `targets` (the run's, options.Options.targets) see them, marked with their
    specs (`RuleSet.targets`). Derived once per (rules, specs) and cached; a view is its own
    view. The pipeline calls this once per run and hands the view down."""
    key = targets.specs
    if rules.targets == key:
        return rules
    if rules.targets:
        raise ValueError(f"the rules are the view for the targets {rules.targets}, not {key}")
    torch_spec, _, ms_spec = key
    hit = _CACHE.get((id(rules),) + key)
    if hit is not None and hit[0] is rules:
        return hit[1]
    # The same rule files (fingerprint) give the same view: reuse it for an equal rule set.
    same = _BY_FINGERPRINT.get((rules.fingerprint,) + key) if rules.fingerprint else None
    if same is not None:
        derived = same[1]
    else:
        from .. import startup

        # The command line keeps the view with the built-in rule set it keeps (startup.KeptRuleSet).
        kept = startup.KEPT_RULES
        kept_key = (key, _tables_digest()) if kept is not None and kept.holds(rules) else None
        view = kept.view(rules, kept_key) if kept is not None and kept_key is not None else None
        if isinstance(view, RuleSet):
            derived = view
        else:
            derived = _derive(rules, targets.cann, torch_spec, ms_spec)
            # (a view with nothing changed shares the rules' lists and indexes)
            derived = dataclasses.replace(derived, targets=key)
            if kept is not None and kept_key is not None:
                kept.put_view(rules, kept_key, derived)
    if len(_CACHE) > 64:
        _CACHE.clear()
        _BY_FINGERPRINT.clear()
    _CACHE[(id(rules),) + key] = (rules, derived)  # (holding `rules` keeps its id from being reused)
    if rules.fingerprint:
        _BY_FINGERPRINT[(rules.fingerprint,) + key] = (rules, derived)
    return derived


def _tables_digest() -> str:
    """The names and bytes of the target tables (rules/targets/*.toml): what a view reads
    besides the rules and the code (load_cann_table, load_ms_table, torch_npu's table)."""
    import hashlib
    import os

    folder = os.path.dirname(table_path("torch_npu.toml"))
    digest = hashlib.sha256()
    for name in sorted(n for n in os.listdir(folder) if n.endswith(".toml")):
        with open(os.path.join(folder, name), "rb") as stream:
            content = stream.read()
        for part in (name.encode("utf-8", "surrogatepass"), content):
            digest.update(len(part).to_bytes(8, "big") + part)
    return digest.hexdigest()


def target_suggestion(text: str, cann: CannTarget, torch_spec: str, ms_spec: str = "") -> str:
    """`text` without the advice the targets cannot follow: of each sentence, the alternatives
    ("A or B") that name a missing name are dropped, and a last sentence says why; when nothing
    is left, a text that says to migrate by hand. Unchanged when it names nothing missing."""
    if missing_in_text(text, cann, torch_spec, ms_spec) is None:
        return text
    kept: List[str] = []
    reasons: List[str] = []
    # Of a list of members ("torch_npu.npu.mstx (mark, range_push)"), those the target lacks go.
    for (begin, stop), name, members, lacking in reversed(_torch_members_missing(text, torch_spec)):
        text = text[:begin] + name + (f" ({', '.join(members)})" if members else "") + text[stop:]
        reasons += [w for w in lacking if w not in reasons]
    for sentence in re.split(r"(?<=[.;])\s+", text.strip()):
        mark = sentence[-1] if sentence[-1:] in ".;" else ""
        body = sentence[:-1] if mark else sentence
        options = re.split(r",? or (?![^(]*\))", body)
        good: List[str] = []
        for option in options:
            why = missing_in_text(option, cann, torch_spec, ms_spec)
            if why is None:
                good.append(option)
            elif why not in reasons:
                reasons.append(why)
        if good:
            kept.append(" or ".join(good).strip() + (mark or "."))
    note = "Not for this target: " + "; ".join(reasons) + "."
    if not kept:
        note += (" Migrate this by hand as that release's documentation describes, or raise the target "
                 "(--cann-version / --torch-npu-version) if the machines run a newer release.")
    return _escape(" ".join(kept + [note]))


def _escape(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def _derive(rules: RuleSet, cann: CannTarget, torch_spec: str, ms_spec: str = "") -> RuleSet:
    template = next((r for r in rules.rules if r.code == TARGET_CODE and match_kind_of(r) == "codemod"
                     and "{why}" in r.message), None)
    new_rules: List[Rule] = []
    changed = False
    blocked = {id(r): cann.missing(written_helpers(r)) for r in rules.rules if r.framework == "tensorflow"}
    # Rules of the same code on the same APIs move together (TPUEstimator's use_tpu=False without
    # its NPU config would train on the CPU): they are dropped with the blocked one, which reports.
    held = {(r.code, api) for r in rules.rules if blocked.get(id(r)) is not None for api in (r.call_spec.apis if r.call_spec else ())}
    dropped = {id(r) for r in rules.rules if r.framework == "tensorflow" and blocked.get(id(r)) is None and r.call_spec
               is not None and any((r.code, api) in held for api in r.call_spec.apis)}
    # APIs an NPU class replaces where it can (NPUEstimator): a blocked fallback for them is
    # reported only where the class cannot be used (the rename's unknown_finding), not at every call.
    renamed = {api: r for r in rules.rules if isinstance(r.spec, CallRenameSpec) and blocked.get(id(r)) is None
               for api in (r.call_spec.apis if r.call_spec else ())}
    fallbacks: Dict[int, Rule] = {}
    late: List[Rule] = []
    for rule in rules.rules:
        lacking = blocked.get(id(rule))
        if id(rule) in dropped and template is not None:
            changed = True
            continue
        if lacking is not None and template is not None:
            clones = _blocked_findings(rule, lacking, template)
            covered = rule.call_spec is not None and rule.call_spec.apis and all(a in renamed for a in rule.call_spec.apis)
            if covered and isinstance(rule.spec, CallConfigSpec):
                clone = dataclasses.replace(clones[0], spec=dataclasses.replace(FindingSpec.of(clones[0]),
                                                                                 match_kind="codemod", patterns=()))
                late.append(clone)  # after the template: FrameworkRules keeps the last of a code
                for api in rule.call.apis:
                    fallbacks[id(renamed[api])] = clone
            else:
                new_rules += clones
            changed = True
            continue
        if rule.framework == "mindspore" and match_kind_of(rule) == "codemod" and rule.code == _DEPRECATED_CODE:
            words = _deprecated_set_context_words(ms_spec)
            if words != FindingSpec.of(rule).words:
                rule = dataclasses.replace(rule, spec=dataclasses.replace(FindingSpec.of(rule), words=words))
                changed = True
        if isinstance(rule.spec, FindingSpec) and rule.suggestion and rule is not template:
            text = target_suggestion(rule.suggestion, cann, torch_spec, ms_spec)
            if text != rule.suggestion:
                rule = dataclasses.replace(rule, suggestion=text)
                changed = True
        new_rules.append(rule)
    new_rules += late
    for i, rule in enumerate(new_rules):
        fallback = fallbacks.get(id(rule))
        if fallback is not None and rule.call_spec is not None and not rule.call_spec.unknown_finding:
            new_rules[i] = dataclasses.replace(rule, spec=dataclasses.replace(rule.call_spec, unknown_finding=TARGET_CODE))
    if not changed:
        return rules
    from ..rules import _index

    derived = RuleSet(rules=new_rules, docs=rules.docs,
                      fingerprint=f"{rules.fingerprint}:{cann.spec}:{torch_spec}:{ms_spec}")
    _index(derived)
    return derived


_DEPRECATED_CODE = "NPU322"  # set_context keys the MindSpore target deprecates (codemods/mindspore._Deprecated)
_SET_CONTEXT_KEY = re.compile(r"mindspore\.context\.set_context:([A-Za-z_][A-Za-z0-9_]*) deprecated")


def _deprecated_set_context_words(ms_spec: str) -> Tuple[str, ...]:
    """NPU322's prefilter words (words.codemod_words) as the MindSpore target sees them: it is
    reported only for a target the run was given or the project pins (codemods/mindspore.
    migrate_mindspore), at a `set_context(KEY=...)` keyword the target deprecates. So none
    without one (mindone 0.5.0: 488 of its test and model files let through by the word
    `set_context` alone, each a partial parse, a transform and a walk for nothing), and
    `set_context & KEY` for each such KEY with one."""
    if not ms_spec:
        return ()  # (the rule file's: none)
    target = MsTarget(ms_spec)
    keys = sorted({m.group(1) for fact in load_ms_table().facts for m in [_SET_CONTEXT_KEY.fullmatch(fact)]
                   if m is not None and target.deprecated(fact) is not None})
    return tuple(f"set_context & {key}" for key in keys)


def _blocked_findings(rule: Rule, lacking: CannMissing, template: Rule) -> List[Rule]:
    """NPU321 findings where `rule` would have matched."""
    spec = rule.call_spec
    assert spec is not None
    instead = lacking.instead or "migrate it by hand as the TF Adapter guide of that release describes"
    message = template.message.replace("{why}", _escape(lacking.describe()))
    suggestion = template.suggestion.replace("{instead}", _escape(instead[:1].upper() + instead[1:]))
    base = dataclasses.replace(template, message=message, suggestion=suggestion, examples=(),
                               source=f"{template.source} for {rule.source}", framework="tensorflow")
    if isinstance(spec, EntrySetupSpec):
        return [dataclasses.replace(base, from_=spec.uses[0], spec=dataclasses.replace(
            FindingSpec.of(base), match_kind="api", patterns=tuple(spec.uses), once_per_file=True))]
    if spec.apis:
        return [dataclasses.replace(base, from_=spec.apis[0], spec=dataclasses.replace(
            FindingSpec.of(base), match_kind="call", patterns=tuple(spec.apis)))]
    return []


def helpers_missing(cann_spec: str, names: Iterable[str]) -> Optional[CannMissing]:
    return CannTarget(cann_spec).missing(names)


def describe_cann_target(rules: RuleSet, target: CannTarget) -> str:
    """`npu-migrate rules --cann-version X`: which TensorFlow rewrites that release gets."""
    table = load_cann_table()
    rows = []
    for rule in rules.rules:
        helpers = [h for h in written_helpers(rule) if " " not in h and ":" not in h]
        if helpers and rule.call_spec is not None:
            rows.append((rule, helpers, target.missing(written_helpers(rule))))
    made = [r for r in rows if r[2] is None]
    lines = [f"{target.label()}: the TF Adapter of {' and '.join('CANN ' + r for r in target.bracket(table))}"
             + (f" ({target.reason})" if target.reason else ""),
             f"{len(made)} of {len(rows)} TensorFlow rewrites into TF Adapter helpers are made for this target:"]
    for rule, helpers, _ in made:
        lines.append(f"  {rule.code} {', '.join(_matched(rule))} -> {', '.join(helpers)}")
    held = [r for r in rows if r[2] is not None]
    if held:
        lines.append(f"{len(held)} are not (NPU321: the helper is missing in the target):")
        for rule, _helpers, lacking in held:
            assert lacking is not None
            came = f"came with CANN {lacking.added_in}" if lacking.added_in else "in no dated release"
            lines.append(f"  {rule.code} {', '.join(_matched(rule))} -> {lacking.name}  ({came})")
    return "\n".join(lines) + "\n"


def _matched(rule: Rule) -> Tuple[str, ...]:
    """What a TensorFlow rule matches, as `rules --cann-version` lists it: its APIs, or the
    modules an entry_setup rule's file must use."""
    spec = rule.call
    return spec.apis or (spec.uses if isinstance(spec, EntrySetupSpec) else ())
