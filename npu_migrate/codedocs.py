"""The documentation of a code, built from the rule data: one `CodePage` per code (what, why,
what to do, an example before/after from the rules' own examples, where it applies), the way
ruff documents each rule. Three outputs read it: `npu-migrate explain CODE` (text), the pages of
`docs/codes/` (Markdown, written by `scripts/build_docs.py`) and the HTML review report, which
bundles the pages of the codes it shows. Nothing here is written by hand twice: a page is the
`[[code]]` entry of its code plus the rules that use it.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Dict, FrozenSet, List, Optional, Tuple

from .rules import Rule, RuleSet

# What a code is about, from the rule file its rules (or its [[code]] entry) live in: the index
# of the documentation groups the pages by it. The first match of the file name wins.
_AREAS: Tuple[Tuple[str, str], ...] = (
    ("tensorflow", "TensorFlow 1.15"),
    ("mindspore", "MindSpore"),
    ("modelarts", "ModelArts"),
    ("distributed", "Multi-device (--distributed)"),
    ("shell", "Shell scripts"),
    ("requirements", "Dependency files"),
    ("notebook", "Notebooks"),
    ("torch", "PyTorch"),
    ("findings", "PyTorch"),
)
AREA_ORDER = ("PyTorch", "TensorFlow 1.15", "MindSpore", "ModelArts", "Multi-device (--distributed)",
              "Shell scripts", "Dependency files", "Notebooks", "The tool itself")

# The release tables a code's rules are checked against (rules/targets/); `--torch-npu-version`,
# `--cann-version` and `--mindspore-version` pick the release.
_TARGETS = {
    "PyTorch": "torch_npu (--torch-npu-version)",
    "Multi-device (--distributed)": "torch_npu (--torch-npu-version), MindSpore (--mindspore-version)",
    "TensorFlow 1.15": "CANN's TF Adapter (--cann-version)",
    "MindSpore": "MindSpore (--mindspore-version)",
}

_SHOWN_EXAMPLES = 2


@dataclass(frozen=True)
class ExampleText:
    label: str  # before / after / flagged / not flagged
    text: str
    path: str = ""  # the file name it runs as, when not a plain .py


@dataclass(frozen=True)
class CodePage:
    code: str
    title: str
    reported_as: str  # rewrite, or the severities of its findings
    area: str
    why: str = ""
    fix: str = ""
    messages: Tuple[str, ...] = ()  # the distinct messages its rules print (templates)
    examples: Tuple[Tuple[ExampleText, ...], ...] = ()  # a few (before, after) or (flagged, not flagged) groups
    targets: str = ""  # the release tables its rules are checked against
    rules: Tuple[str, ...] = field(default=())  # where its rules live: "torch.toml: [[device]] #1"
    builtin: bool = True  # a code of npu-migrate's own rules (it has a page in docs/codes/), not of --rules files

    @property
    def doc_path(self) -> str:
        """Where its page is in npu-migrate's source repository, or "" for a code of the user's rules."""
        return f"docs/codes/{self.code}.md" if self.builtin else ""

    @property
    def is_rewrite(self) -> bool:
        return self.reported_as.startswith("rewrite")

    @property
    def severity(self) -> str:
        """The highest severity it is reported with, or `rewrite`."""
        return self.reported_as.split("/")[0]


def reported_as(rules: RuleSet, code: str) -> str:
    """`rewrite`, the severities of its findings (`error/warning`); for a code with no
    `[[edit]]`/`[[finding]]` entry (NPU129, NPU324: their message and severity are in their
    Python) what its [[code]] entry says; `-` when nothing reports it (NPU205, the boot file)."""
    entries = rules.by_code(code)
    severities = sorted({r.severity for r in entries if r.kind == "finding"}, key=lambda s: -s.rank)
    if severities:
        kinds = [s.value for s in severities]
        if any(r.kind != "finding" for r in entries):
            kinds.insert(0, "rewrite")
        return "/".join(kinds)
    if entries:
        return "rewrite"
    doc = rules.docs.get(code)
    return doc.reported_as if doc is not None and doc.reported_as else "-"


def area_of(code: str, entries: List[Rule], documented_in: str = "") -> str:
    files = [r.source.split(":", 1)[0] for r in entries] or [documented_in.split(":", 1)[0]]
    for word, area in _AREAS:
        if any(word in f for f in files):
            return area
    if code.startswith("NPU2"):
        return "ModelArts"
    if code.startswith("NPU0"):
        return "The tool itself"
    return "PyTorch"


def page(rules: RuleSet, code: str) -> Optional[CodePage]:
    """The page of `code`, or None when no rule or [[code]] entry knows it."""
    code = code.upper()
    entries = rules.by_code(code)
    doc = rules.docs.get(code)
    if not entries and doc is None:
        return None
    area = area_of(code, entries, doc.source if doc else "")
    messages: List[str] = []
    for r in entries:
        if r.message and r.message not in messages:
            messages.append(r.message)
    return CodePage(
        code=code,
        title=title_of(rules, code),
        reported_as=reported_as(rules, code),
        area=area,
        why=doc.why if doc else "",
        fix=doc.fix if doc else (entries[0].suggestion if entries else ""),
        messages=tuple(messages),
        examples=tuple(_examples(entries)),
        targets=_TARGETS.get(area, "") if _checked_against_targets(code, entries) else "",
        rules=tuple(r.source for r in entries),
        builtin=all(_is_builtin(source) for source in [r.source for r in entries] + ([doc.source] if doc else [])),
    )


# A message template's fields (`{api}`) shown as what they stand for (`<api>`) in a title.
_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def title_of(rules: RuleSet, code: str) -> str:
    """A code's title, as `explain`, `rules`, docs/codes/ and the review page show it: its
    [[code]] entry's, else its first rule's message with `{field}` shown as `<field>`."""
    doc = rules.docs.get(code)
    if doc is not None:
        return doc.title
    entries = rules.by_code(code)
    return _PLACEHOLDER.sub(r"<\1>", entries[0].message) if entries else ""


def _is_builtin(source: str) -> bool:
    """Built-in rules are named by their file name alone ("torch.toml: [[device]] #1"); a user's
    --rules file by the path given."""
    name = source.split(": ", 1)[0]
    return "/" not in name and "\\" not in name and name in _builtin_names()


@functools.lru_cache(maxsize=None)
def _builtin_names() -> FrozenSet[str]:
    from .rules import builtin_rule_files

    return frozenset(p.name for p in builtin_rule_files())


def _checked_against_targets(code: str, entries: List[Rule]) -> bool:
    """Rewrites are made only into names the target release has (else NPU320/NPU321); the codes
    of those target checks are about the target themselves."""
    return code in ("NPU320", "NPU321", "NPU322") or any(r.kind != "finding" for r in entries)


def pages(rules: RuleSet) -> List[CodePage]:
    return [p for p in (page(rules, code) for code in rules.codes()) if p is not None]


def _examples(entries: List[Rule]) -> List[Tuple[ExampleText, ...]]:
    """A few examples from the code's rules: rewrites as (before, after), up to _SHOWN_EXAMPLES;
    findings as the first flagged example and the first look-alike not flagged."""
    rewrites: List[Tuple[ExampleText, ...]] = []
    flagged: List[ExampleText] = []
    not_flagged: List[ExampleText] = []
    for rule in entries:
        for ex in rule.examples:
            path = ex.path if ex.path and ex.path != "example.py" else ""
            if ex.before and ex.after and ex.before != ex.after:
                rewrites.append((ExampleText("before", ex.before, path), ExampleText("after", ex.after, path)))
            if ex.flagged:
                flagged.append(ExampleText("flagged", ex.flagged, path))
            if ex.not_flagged:
                not_flagged.append(ExampleText("not flagged", ex.not_flagged, path))
    findings = tuple(group[0] for group in (flagged, not_flagged) if group)
    return rewrites[:_SHOWN_EXAMPLES] + ([findings] if findings else [])


# ----------------------------------------------------------------------------- Markdown pages


def markdown(p: CodePage) -> str:
    """The page of one code as `docs/codes/<CODE>.md` holds it."""
    out = [f"# {p.code}: {_md_inline(p.title)}", "", f"**Reported as:** {p.reported_as} · **Area:** {p.area}"]
    if p.targets:
        out[-1] += f" · **Checked against:** {p.targets}"
    if p.why:
        out += ["", "## Why", "", p.why]
    if p.fix:
        out += ["", "## What to do", "", p.fix]
    if p.messages:
        out += ["", "## What it says", ""] + [f"- {_md_inline(m)}" for m in p.messages]
    if p.examples:
        out += ["", "## Examples"]
        for group in p.examples:
            for ex in group:
                where = f" (`{ex.path}`)" if ex.path else ""
                fence = "```" + _language(ex.path)
                out += ["", f"{ex.label.capitalize()}{where}:", "", fence, ex.text.rstrip("\n"), "```"]
    out += ["", "## Where the rules are", "", "Suppress one line with `# npu-migrate: ignore[" + p.code + "]`."]
    if p.rules:
        out += [""] + [f"- `rules/{src}`" for src in p.rules]
    out += ["", "[All codes](README.md)"]
    return "\n".join(out) + "\n"


def index_markdown(all_pages: List[CodePage]) -> str:
    """`docs/codes/README.md`: every code, by area and then by severity."""
    out = ["# npu-migrate codes", "",
           "Every code npu-migrate reports, generated from the rule files by `scripts/build_docs.py`",
           "(do not edit by hand). `npu-migrate explain CODE` prints the same page in a terminal.", ""]
    by_area: Dict[str, List[CodePage]] = {}
    for p in all_pages:
        by_area.setdefault(p.area, []).append(p)
    order = {"rewrite": 0, "error": 1, "warning": 2, "info": 3}
    for area in AREA_ORDER:
        group = by_area.get(area)
        if not group:
            continue
        out += [f"## {area}", "", "| Code | Reported as | What |", "|---|---|---|"]
        for p in sorted(group, key=lambda p: (order.get(p.severity, 4), p.code)):
            out.append(f"| [{p.code}]({p.code}.md) | {p.reported_as} | {_md_inline(p.title)} |")
        out.append("")
    return "\n".join(out)


def _md_inline(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _language(path: str) -> str:
    if path.endswith((".sh", ".bash")):
        return "sh"
    if path.endswith(".txt"):
        return "text"
    if path.endswith(".toml"):
        return "toml"
    if path.endswith(".ipynb"):
        return "json"
    return "python"
