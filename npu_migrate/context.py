"""What every codemod shares while one file is migrated: rules, options, imports, and the
recorder that collects edits and findings (with positions resolved once, at the end)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Set, Tuple

import libcst as cst
from libcst.metadata import CodeRange

from . import work
from .fast_visitor import children
from .codes import check_emitter
from .imports import ImportTable
from .model import Edit, Finding, Severity, Span
from .options import Options
from .positions import NodePositions
from .prefilter import framework_rules_may_apply, tree_facts
from .rules import Rule, RuleSet
from .suppressions import covers

# What a finding in code that runs only behind a device test kept on CUDA adds to its message.
DEAD_CODE_NOTE = (" (dead on the NPU: it runs only where {test}, a device test left as it is"
                  " on CUDA (NPU315), so the NPU never takes this path)")


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
    used_suppression_codes: Set[Tuple[int, str]] = field(default_factory=set)  # (line, code) silenced
    # Modules the rewrites need imported (ctx.require_import; codemods/add_imports.py).
    required_imports: Set[str] = field(default_factory=set)
    # Whether the torch pass moved device code that needs no torch_npu import of its own (a
    # comparison with the device an object is on: `x.device.type == "npu"`): the file still
    # handles NPU tensors, so the findings of a file that uses the device apply (findings.uses_device).
    moved_device_code: bool = False
    # Frameworks this file uses (from its imports, or --framework): "torch", "tensorflow", ...
    frameworks: List[str] = field(default_factory=list)
    # True/False when the caller knows whether this is an entry script (--entry, notebooks);
    # None lets the ModelArts codemod decide from the code.
    entry_script: Optional[bool] = None
    # Set when `module` holds only some of the file's statements (a partial.PartialText).
    partial: Optional[Any] = None
    # Names a pass needed to see everywhere but that are written in lines left out: the file
    # is migrated again with the statements that write them (engine._migrate_partially).
    partial_misses: Set[str] = field(default_factory=set)
    # ... and line ranges left out that a pass needed to see (PartialText.elided_in).
    partial_lines: Set[Tuple[int, int]] = field(default_factory=set)
    # The words of the file's code (a prefilter.LazyCodeWords; None when only libcst could
    # parse the file).
    code: Optional[Any] = None
    # Why this TensorFlow file is TF 2 code (frameworks.tensorflow2_reason): the TF 1.15 rules
    # do not apply to it; None for TF 1.x code and other files.
    tensorflow2: Optional[str] = None
    # Files a codemod generates next to this one (path -> text): FileResult.extra_files.
    extra_files: Dict[str, str] = field(default_factory=dict)
    # Ids of original nodes the rewrites must leave as they are (Context.keep): a guard that
    # sends tensors to a CUDA kernel, a line the tool itself would break (codemods/guards.py).
    kept: Set[int] = field(default_factory=set)
    # Ids of original nodes kept because they run only where a device test kept on CUDA is True
    # (codemods/guards.py: the side it opens) -> that test's code: dead on the NPU, so what is
    # found there is a note (Context.finding), as for an optional import.
    dead: Dict[int, str] = field(default_factory=dict)
    # Ids of original nodes whose findings are not reported, but those of the one code named
    # (Context.quiet: a CUDA class kept whole, whose NPU328 finding says why).
    quieted: Dict[int, str] = field(default_factory=dict)
    # Names through which this file reads a module another file of the run binds and keeps whole
    # (engine.whole_reads: `hvd` of `from ...config import hvd` -> ("horovod.tensorflow", its file)).
    whole_reads: Dict[str, Tuple[str, str]] = field(default_factory=dict)
    _pending: List[_Pending] = field(default_factory=list)
    _positions: Dict[int, NodePositions] = field(default_factory=dict)

    def framework_rules_may_apply(self, framework: str, rewrites_only: bool = False) -> bool:
        """Whether a rule of `framework` (tensorflow, mindspore; `rewrites_only`: a rule that is
        not a finding) can match in this file's code (prefilter.CodeWords); True when that
        cannot be told."""
        if self.code is None or (self.whole_reads and framework == "tensorflow"):
            return True  # (a reader of another module's Horovod: its words name no horovod)
        return framework_rules_may_apply(self.rules, self.code.get(), framework, rewrites_only,
                                         self.code.written_outside_bare_strings,
                                         tree_facts(self.code, self.options.mindspore_device_moves))

    # -- positions -------------------------------------------------------------------------

    def position(self, node: cst.CSTNode, module: Optional[cst.Module] = None) -> Optional[CodeRange]:
        module = module if module is not None else self.module
        key = id(module)
        if key not in self._positions:
            # Asked while the codemods run (suppression comments): every node of the tree.
            self._positions[key] = NodePositions(module)
        return self._positions[key].get(node)

    def keep(self, node: cst.CSTNode, behind: Optional[str] = None) -> None:
        """Leave `node` and everything in it as it is: no rewrite touches it (findings still
        are reported). `behind`: when `node` runs only behind a device test kept on CUDA (dead on
        the NPU: its findings are notes), that test as the note says it (`` `x.is_cuda` is True ``)."""
        stack = [node]
        while stack:
            n = stack.pop()
            self.kept.add(id(n))
            if behind is not None:
                self.dead.setdefault(id(n), behind)
            stack.extend(children(n))

    def quiet(self, node: cst.CSTNode, but: str) -> None:
        """Report nothing found in `node` but findings of the code `but` (which says why)."""
        stack = [node]
        while stack:
            n = stack.pop()
            self.quieted[id(n)] = but
            stack.extend(children(n))
        self._pending = [p for p in self._pending
                         if p.finding is None or self.quieted.get(id(p.node), p.finding.code) == p.finding.code]

    def suppressed(self, node: cst.CSTNode, code: str) -> bool:
        """Whether this node must not be rewritten: a `# npu-migrate: ignore` comment covers it
        (original tree only), or a pass decided to keep it (`keep`)."""
        if id(node) in self.kept:
            return True
        return self.comment_suppressed(node, code)

    def comment_suppressed(self, node: cst.CSTNode, code: str) -> bool:
        """Whether a `# npu-migrate: ignore` comment covers this node (original tree only)."""
        if not self.suppressions:
            return False
        rng = self.position(node)
        if rng is None:
            return False
        for line in {rng.start.line, rng.end.line}:
            if covers(self.suppressions, line, code):
                self.used_suppression_codes.add((line, code))
                return True
        return False

    # -- recording -------------------------------------------------------------------------

    def require_import(self, module: str) -> None:
        """A rewrite needs `module` imported (`torch_npu`): the pass that owns that import adds
        it once after its walk (codemods/add_imports.py)."""
        self.required_imports.add(module)

    def import_required(self, module: str) -> bool:
        return module in self.required_imports

    def code_for(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

    def code_of(self, module: cst.Module) -> str:
        """`module.code`, taken from the positions pass when `finish()` made one on that tree
        (it generated the whole module already)."""
        positions = self._positions.get(id(module))
        if positions is not None and positions.code is not None:
            return positions.code
        base = self._positions.get(id(self.module))
        if module is not self.module and base is not None:
            # (the migrated tree: the statements it shares with the file's are not generated again)
            spliced = NodePositions(module, (), base=base).code
            if spliced is not None:
                return spliced
        work.count("codegen")
        return module.code

    def edit(
        self,
        rule_or_code,
        node: cst.CSTNode,
        message: str,
        before: str = "",
        after: str = "",
        module: Optional[cst.Module] = None,
    ) -> None:
        if isinstance(rule_or_code, Rule):
            code = rule_or_code.code
            check_emitter(code, rule_or_code.applier_key())
        else:
            code = rule_or_code
            check_emitter(code, None)
        self._pending.append(
            _Pending(node, module or self.module, edit=Edit(code, Span(0, 0, 0, 0), message, before, after))
        )

    def edited_to(self) -> Iterator[str]:
        """What each edit recorded so far writes (`Edit.after`)."""
        return (p.edit.after for p in self._pending if p.edit is not None)

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
        check_emitter(rule.code, rule.applier_key())
        if (module is None or module is self.module) and self.comment_suppressed(node, rule.code):
            return
        if self.quieted.get(id(node), rule.code) != rule.code:
            return
        behind = self.dead.get(id(node)) if self.dead else None
        if behind is not None and (severity or rule.severity) is not Severity.INFO:
            # (pycuda imported behind `if torch.cuda.is_available():`, which stays: never run there)
            severity = Severity.INFO
            message = (message if message is not None else rule.render_message(api=api)) + DEAD_CODE_NOTE.format(test=behind)
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

    def mark(self) -> int:
        """Where the records stand now, for `rollback`."""
        return len(self._pending)

    def rollback(self, mark: int) -> None:
        """Forget what was recorded since `mark` (a pass that failed half-way)."""
        del self._pending[mark:]

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
        # (without an edit, no code of the module is asked for: the generation stops early)
        code = any(p.edit is not None for p in self._pending)
        # The file's own tree first: a migrated tree takes the statements it shares from it.
        for key, (module, nodes) in sorted(wanted.items(), key=lambda item: item[1][0] is not self.module):
            self._positions[key] = NodePositions(module, nodes, code=code, base=self._positions.get(id(self.module)),
                                                 nested=module is self.module)
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
                same = (p.finding.code, span, p.finding.api)
                if same in seen:
                    continue
                seen.add(same)
                p.finding.span = span
                findings.append(p.finding)
        edits.sort(key=lambda e: (e.span.line, e.span.col, e.code))
        findings.sort(key=lambda f: (f.span.line, f.span.col, f.code))
        return edits, findings
