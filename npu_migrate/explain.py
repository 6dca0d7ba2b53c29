"""The text of `npu-migrate rules` (every code, one line each) and `npu-migrate explain CODE` (its
documentation and the rules that use it, with their examples)."""

from __future__ import annotations

import importlib
import os
import pkgutil
from typing import List, Optional

from .codedocs import page, reported_as, title_of
from .codes import Site, appliers_of, sites_of
from .kinds.finding import FindingSpec
from .rules import Rule, RuleSet, kind_of

_SHOWN_NAMES = 8

# Modules never imported to fill the registry: templates of generated code (they import the
# user's frameworks), the stand-in (runs inside the rehearsed job), `python -m npu_migrate`.
_NOT_EMITTERS = ("npu_migrate.__main__", "npu_migrate.standin", "npu_migrate.distributed.",
                 "npu_migrate.modelarts.runtime_template", "npu_migrate.modelarts.boot_template")


def load_emitters() -> None:
    """Import every module of the package that can emit a code, so the registry is complete
    (`explain`, tests). Migrating imports only the passes a file needs."""
    for info in pkgutil.walk_packages([os.path.dirname(os.path.abspath(__file__))], "npu_migrate."):
        if not info.name.startswith(_NOT_EMITTERS) and not info.name.endswith("_template"):
            importlib.import_module(info.name)


# `rewrite`, the severities of its findings, or `-` (codedocs.reported_as)
code_kind = reported_as


def list_codes(rules: RuleSet) -> str:
    lines = []
    for code in rules.codes():
        lines.append(f"{code}  {code_kind(rules, code):<21} {title_of(rules, code)}")
    return "\n".join(lines) + "\n"


def emitting_sites(rules: RuleSet, code: str) -> List[Site]:
    """Every function or class registered as emitting `code` (codes.py): its own `emits`, and
    the appliers of the kinds of the rules that use it, in that order, each once."""
    load_emitters()
    found = sites_of(code)
    for rule in rules.by_code(code):
        found += appliers_of(rule.applier_key())
    return list(dict.fromkeys(found))


def explain(rules: RuleSet, code: str) -> Optional[str]:
    """The documentation of `code`, or None when no rule or doc knows it."""
    p = page(rules, code)
    if p is None:
        return None
    code = p.code
    entries = rules.by_code(code)
    # The head is the code's page (codedocs.py), as docs/codes/<CODE>.md and the review page show it.
    out: List[str] = [f"{code}: {p.title}", f"Reported as: {p.reported_as}"]
    if p.why:
        out += ["", f"Why: {p.why}"]
    if p.fix:
        out += ["", f"What to do: {p.fix}"]
    out += ["", f"Area: {p.area}" + (f"; checked against {p.targets}" if p.targets else "")
            + (f". Documentation: {p.doc_path} in npu-migrate's source repository" if p.doc_path else
               ". A code of your own rule files")]
    sites = emitting_sites(rules, code)
    if sites:
        out += ["", "Emitted by:"] + [f"  {site}" for site in sites]
    if entries:
        out += ["", f"Rules ({len(entries)}):"]
    for rule in entries:
        out += [""] + _describe(rule)
    return "\n".join(out) + "\n"


def _describe(rule: Rule) -> List[str]:
    spec = rule.spec if isinstance(rule.spec, FindingSpec) else FindingSpec()
    if rule.kind == "finding":
        head = f"  {rule.source}: {rule.severity.value}, matches {spec.match_kind}"
        if spec.context != "any":
            head += f" (in files that {'import torch' if spec.context == 'torch' else 'use the device'})"
    else:
        head = f"  {rule.source}"
    lines = [head]
    kind = kind_of(rule)
    if kind is not None:
        lines.append(f"    kind: [[{rule.kind}]], {kind.module.replace('.', '/')}.py")
    names = list(spec.patterns or ((rule.from_,) if rule.from_ else ()))
    if rule.kind == "finding" and names:
        shown = ", ".join(names[:_SHOWN_NAMES])
        if len(names) > _SHOWN_NAMES:
            shown += f", … ({len(names) - _SHOWN_NAMES} more)"
        lines.append(f"    names: {shown}")
        if spec.keywords or spec.positions:
            where = [f"{k}=" for k in spec.keywords] + [f"argument {p + 1}" for p in spec.positions]
            cond = f"    when given: {' or '.join(where)}"
            if spec.suffixes:
                cond += f", holding a string ending in {' or '.join(spec.suffixes)}"
            if spec.keys:
                cond += f", a dict holding {' or '.join(repr(k) for k in spec.keys)}"
            lines.append(cond)
        elif spec.suffixes:
            lines.append(f"    files: {', '.join('*' + s for s in spec.suffixes)}")
    elif rule.from_ or rule.to:
        lines.append(f"    {rule.from_} -> {rule.to}")
    lines.append(f"    message: {rule.message}")
    if rule.suggestion:
        lines.append(f"    suggestion: {rule.suggestion}")
    for ex in rule.examples:
        for label, text in (("before", ex.before), ("after", ex.after), ("flagged", ex.flagged),
                            ("not flagged", ex.not_flagged)):
            if text:
                named = f" ({ex.path})" if ex.path and ex.path != "example.py" else ""
                lines.append(f"    {label}{named}:")
                lines += [f"      {line}" for line in text.splitlines()]
    return lines
