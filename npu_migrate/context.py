"""What every codemod shares while one file is migrated: rules, options, imports, and the
recorder that collects edits and findings (with positions resolved once, at the end)."""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Set, Tuple

import libcst as cst
from libcst.metadata import CodeRange

from .imports import ImportTable
from .model import Edit, Finding, Options, Severity, Span
from .positions import NodePositions
from .rules import Rule, RuleSet

SUPPRESS_RE = re.compile(r"#\s*npu-migrate:\s*ignore(?:\[([A-Za-z0-9_,\s]*)\])?")


def parse_suppressions(text: str) -> Dict[int, Optional[Set[str]]]:
    """Line -> suppressed codes (None = every code), from `# npu-migrate: ignore[...]` comments.

    Uses the tokenizer, so the marker inside a string literal is not a suppression.
    """
    if "npu-migrate:" not in text:
        return {}
    found: Dict[int, Optional[Set[str]]] = {}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type != tokenize.COMMENT:
                continue
            m = SUPPRESS_RE.search(tok.string)
            if not m:
                continue
            codes = m.group(1)
            found[tok.start[0]] = (
                None if codes is None else {c.strip().upper() for c in codes.split(",") if c.strip()}
            )
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return found


UNUSED_SUPPRESSION_CODE = "NPU001"


def unused_suppressions(
    text: str,
    suppressions: Mapping[int, Optional[Set[str]]],
    used: Set[Tuple[int, str]],
) -> List[Finding]:
    """An NPU001 finding for every `# npu-migrate: ignore` comment that silenced nothing, and
    for every code in `ignore[...]` that was not reported on its line. `used` holds the
    (line, code) pairs that were silenced (Context.used_suppression_codes)."""
    if not suppressions:
        return []
    used_lines = {line for line, _ in used}
    columns = _comment_columns(text)
    found = []
    for line in sorted(suppressions):
        codes = suppressions[line]
        if codes is None:
            if line in used_lines:
                continue
            message = "unused `# npu-migrate: ignore`: nothing is reported on this line"
            api = "npu-migrate: ignore"
        else:
            unused = sorted(c for c in codes if (line, c) not in used)
            if not unused:
                continue
            message = (
                f"unused code{'s' if len(unused) > 1 else ''} {', '.join(unused)} in "
                f"`# npu-migrate: ignore[{','.join(sorted(codes))}]`: not reported on this line"
            )
            api = f"npu-migrate: ignore[{','.join(unused)}]"
        col, end_col = columns.get(line, (1, 1))
        found.append(
            Finding(
                code=UNUSED_SUPPRESSION_CODE,
                severity=Severity.WARNING,
                span=Span(line, col, line, end_col),
                api=api,
                message=message,
                suggestion="Remove the comment." if codes is None or len(unused) == len(codes)
                else f"Remove {', '.join(unused)} from the list.",
            )
        )
    return found


def _comment_columns(text: str) -> Dict[int, Tuple[int, int]]:
    """Line -> (start, end) columns (1-based) of the suppression marker in its comment."""
    columns: Dict[int, Tuple[int, int]] = {}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                m = SUPPRESS_RE.search(tok.string)
                if m:
                    start = tok.start[1] + m.start()
                    columns[tok.start[0]] = (start + 1, tok.start[1] + m.end() + 1)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return columns


@dataclass
class _Pending:
    node: cst.CSTNode
    module: cst.Module  # the tree the node belongs to (positions are resolved against it)
    edit: Optional[Edit] = None
    finding: Optional[Finding] = None


@dataclass
class Context:
    """Per-file state. Codemods record edits and findings against nodes; `finish()` turns the
    nodes into line/column spans, computing positions only when something was recorded."""

    path: str
    text: str
    options: Options
    rules: RuleSet
    module: cst.Module
    imports: ImportTable
    suppressions: Dict[int, Optional[Set[str]]] = field(default_factory=dict)
    used_suppressions: Set[int] = field(default_factory=set)
    used_suppression_codes: Set[Tuple[int, str]] = field(default_factory=set)  # (line, code) silenced
    needs_torch_npu: bool = False
    # Frameworks this file uses (from its imports, or --framework): "torch", "tensorflow", ...
    frameworks: List[str] = field(default_factory=list)
    # True/False when the caller knows whether this is an entry script (--entry, notebooks);
    # None lets the ModelArts codemod decide from the code.
    entry_script: Optional[bool] = None
    # Set when `module` holds only some of the file's top-level statements (a
    # partial.PartialText): a pass that needs the others raises partial.NeedsWholeModule.
    partial: Optional[Any] = None
    # The file's tree from Python's parser (None when only libcst could parse it).
    python_tree: Optional[Any] = None
    _code_words: Optional[Any] = None
    # Files a codemod generates next to this one (path -> text): FileResult.extra_files.
    extra_files: Dict[str, str] = field(default_factory=dict)
    _pending: List[_Pending] = field(default_factory=list)
    _positions: Dict[int, NodePositions] = field(default_factory=dict)

    def framework_rules_may_apply(self, framework: str) -> bool:
        """Whether a rule of `framework` (tensorflow, mindspore) can match in this file's code
        (prefilter.CodeWords); True when that cannot be told."""
        if self.python_tree is None:
            return True
        if self._code_words is None:
            from .prefilter import code_words

            self._code_words = code_words(self.python_tree)
        return self.rules.framework_rules_may_apply(self._code_words, framework)

    # -- positions -------------------------------------------------------------------------

    def position(self, node: cst.CSTNode, module: Optional[cst.Module] = None) -> Optional[CodeRange]:
        module = module if module is not None else self.module
        key = id(module)
        if key not in self._positions:
            # Asked while the codemods run (suppression comments): every node of the tree.
            self._positions[key] = NodePositions(module)
        return self._positions[key].get(node)

    def suppressed(self, node: cst.CSTNode, code: str) -> bool:
        """Whether a `# npu-migrate: ignore` comment covers this node (original tree only)."""
        if not self.suppressions:
            return False
        rng = self.position(node)
        if rng is None:
            return False
        for line in {rng.start.line, rng.end.line}:
            if line in self.suppressions:
                codes = self.suppressions[line]
                if codes is None or code in codes:
                    self.used_suppressions.add(line)
                    self.used_suppression_codes.add((line, code))
                    return True
        return False

    # -- recording -------------------------------------------------------------------------

    def code_for(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

    def code_of(self, module: cst.Module) -> str:
        """`module.code`, taken from the positions pass when `finish()` made one on that tree
        (it generated the whole module already)."""
        positions = self._positions.get(id(module))
        return positions.code if positions is not None else module.code

    def edit(
        self,
        rule_or_code,
        node: cst.CSTNode,
        message: str,
        before: str = "",
        after: str = "",
        module: Optional[cst.Module] = None,
    ) -> None:
        code = rule_or_code.code if isinstance(rule_or_code, Rule) else rule_or_code
        self._pending.append(
            _Pending(node, module or self.module, edit=Edit(code, Span(0, 0, 0, 0), message, before, after))
        )

    def finding(
        self,
        rule: Rule,
        node: cst.CSTNode,
        api: str,
        message: Optional[str] = None,
        suggestion: Optional[str] = None,
        severity: Optional[Severity] = None,
        module: Optional[cst.Module] = None,
    ) -> None:
        if (module is None or module is self.module) and self.suppressed(node, rule.code):
            return
        self._pending.append(
            _Pending(
                node,
                module or self.module,
                finding=Finding(
                    code=rule.code,
                    severity=severity or rule.severity,
                    span=Span(0, 0, 0, 0),
                    api=api,
                    message=message if message is not None else rule.render_message(api=api),
                    suggestion=suggestion if suggestion is not None else rule.render_suggestion(api=api),
                ),
            )
        )

    @property
    def has_records(self) -> bool:
        return bool(self._pending)

    def finish(self) -> Tuple[List[Edit], List[Finding]]:
        edits: List[Edit] = []
        findings: List[Finding] = []
        seen: Set[Tuple] = set()
        # One cheap pass per tree for just the recorded nodes (positions.py says why).
        wanted: Dict[int, Tuple[cst.Module, List[cst.CSTNode]]] = {}
        for p in self._pending:
            if id(p.module) not in self._positions:
                wanted.setdefault(id(p.module), (p.module, []))[1].append(p.node)
        for key, (module, nodes) in wanted.items():
            self._positions[key] = NodePositions(module, nodes)
        for p in self._pending:
            rng = self.position(p.node, p.module)
            span = (
                Span(rng.start.line, rng.start.column + 1, rng.end.line, rng.end.column + 1)
                if rng is not None
                else Span(1, 1, 1, 1)
            )
            if p.edit is not None:
                p.edit.span = span
                edits.append(p.edit)
            elif p.finding is not None:
                key = (p.finding.code, span, p.finding.api)
                if key in seen:
                    continue
                seen.add(key)
                p.finding.span = span
                findings.append(p.finding)
        edits.sort(key=lambda e: (e.span.line, e.span.col, e.code))
        findings.sort(key=lambda f: (f.span.line, f.span.col, f.code))
        return edits, findings
