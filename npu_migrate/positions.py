"""Line/column positions of a few nodes, without libcst's whole-module metadata pass.

`MetadataWrapper(...).resolve(PositionProvider)` computes a range for every node of the module:
it tracks line and column token by token (a regex split per token) and stores a `CodeRange`
per node, which costs several times a plain `module.code`. A file that needs anything has a
handful of edits and findings, so `NodePositions` runs one plain code generation that only
notes *token indexes* where the wanted nodes start and end, and turns those few indexes into
line/column afterwards. The ranges are exactly PositionProvider's (syntactic positions,
without the whitespace a node owns; tests/test_positions.py compares them on real code).
"""

from __future__ import annotations

from bisect import bisect_right
from contextlib import nullcontext
from dataclasses import dataclass
from itertools import accumulate
from typing import Any, Dict, Iterable, List, Optional, Set, Tuple

import libcst as cst
from libcst._nodes.internal import CodegenState
from libcst.metadata import CodePosition, CodeRange

from . import work
from .offsets import line_starts

_NOT_WANTED = nullcontext()


class _Syntactic:
    """The context manager `record_syntactic_position` returns for a wanted node."""

    __slots__ = ("state", "node", "start_node", "end_node", "start")

    def __init__(self, state: "_RecordingState", node, start_node, end_node) -> None:
        self.state, self.node, self.start_node, self.end_node = state, node, start_node, end_node

    def __enter__(self) -> None:
        self.start = len(self.state.tokens)

    def __exit__(self, *exc) -> None:
        ranges = self.state.ranges
        start = ranges[id(self.start_node)][0] if self.start_node is not None else self.start
        end = ranges[id(self.end_node)][1] if self.end_node is not None else len(self.state.tokens)
        ranges[id(self.node)] = (start, end)


class _AllFound(Exception):
    """Ends a code generation whose text is not wanted once every wanted node has its range."""


class _RecordingState(CodegenState):
    """Plain code generation that notes, for the wanted nodes (all nodes when `wanted` is None),
    the token indexes where they start and end; with `stop`, it raises _AllFound as soon as the
    last of them ends (the rest of the module is not generated)."""

    def __init__(self, module: cst.Module, wanted: Optional[Set[int]], stop: bool = False) -> None:
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline)
        self.wanted = wanted
        self.popped = False
        self.ranges: Dict[int, Tuple[int, int]] = {}  # node id -> (first token, end token)
        self._open: Dict[int, int] = {}
        # the wanted nodes not ended yet (not those record_syntactic_position adds: they end
        # inside the node that wants them)
        self._left: Optional[Set[int]] = set(wanted) if stop and wanted is not None else None
        # (top-level statement, first token, end token), once the whole module is generated
        self.statements: Optional[List[Tuple[cst.CSTNode, int, int]]] = None

    # before_codegen/after_codegen run for every node of the module: whether a node is wanted
    # is tested inline, and nothing is looked up while no wanted node is open.
    def before_codegen(self, node: cst.CSTNode) -> None:
        key = id(node)
        if self.wanted is None or key in self.wanted:
            self._open[key] = len(self.tokens)

    def after_codegen(self, node: cst.CSTNode) -> None:
        if not self._open:
            return
        key = id(node)
        if key in self._open:
            start = self._open.pop(key)
            # A syntactic position recorded while the node was generated wins (as in libcst).
            if key not in self.ranges:
                self.ranges[key] = (start, len(self.tokens))
            if self._left is not None:
                self._left.discard(key)
                if not self._left and not self._open:
                    raise _AllFound

    def record_syntactic_position(self, node, *, start_node=None, end_node=None):
        if self.wanted is not None and id(node) not in self.wanted:
            return _NOT_WANTED
        # The range is hoisted from these children: they are generated inside the `with`.
        if self.wanted is not None:
            for child in (start_node, end_node):
                if child is not None:
                    self.wanted.add(id(child))
        return _Syntactic(self, node, start_node, end_node)

    def pop_trailing_newline(self) -> None:
        # Positions are taken before the module drops its last newline: keep the token for
        # them, and leave it out of `NodePositions.code`.
        self.popped = True


_DEFINITIONS = (cst.ClassDef, cst.FunctionDef)
# a statement whose text a later generation may take: (it, the tokens, first and end token, the
# indentation it was generated at)
_Kept = Tuple[cst.CSTNode, List[str], int, int, Tuple[str, ...]]


class _MarkingState(_RecordingState):
    """_RecordingState that also notes where each statement of `marks` starts and ends and the
    indentation it was generated at (`marked`): the statements of the bodies of classes and
    functions, which a later generation may take (NodePositions' `base`)."""

    def __init__(self, module: cst.Module, wanted: Optional[Set[int]], marks: Dict[int, cst.CSTNode]) -> None:
        super().__init__(module, wanted)
        self.marks = marks
        self._marking: Dict[int, Tuple[int, Tuple[str, ...]]] = {}
        self.marked: Dict[int, Tuple[int, int, Tuple[str, ...]]] = {}

    def before_codegen(self, node: cst.CSTNode) -> None:
        key = id(node)
        if key in self.marks:
            self._marking[key] = (len(self.tokens), tuple(self.indent_tokens))
        if self.wanted is None or key in self.wanted:
            self._open[key] = len(self.tokens)

    def after_codegen(self, node: cst.CSTNode) -> None:
        if self._marking:
            found = self._marking.pop(id(node), None)
            if found is not None:
                self.marked[id(node)] = (found[0], len(self.tokens), found[1])
        super().after_codegen(node)


def _nested_statements(module: cst.Module) -> Dict[int, cst.CSTNode]:
    """The statements of the bodies of the module's classes and functions, and of the classes
    and functions among them, by id."""
    found: Dict[int, cst.CSTNode] = {}
    todo = [stmt for stmt in module.body if isinstance(stmt, _DEFINITIONS)]
    while todo:
        block = todo.pop().body
        if isinstance(block, cst.IndentedBlock):
            for stmt in block.body:
                found[id(stmt)] = stmt
                if isinstance(stmt, _DEFINITIONS):
                    todo.append(stmt)
    return found


@dataclass(frozen=True)
class _Taken(cst.BaseStatement):
    """A statement of the base generation in a block of a definition that changed
    (NodePositions._with_taken): its text, where the indentation is the one it was generated at;
    elsewhere the statement itself is generated."""

    node: cst.CSTNode
    kept: Tuple[Any, ...]

    def _visit_and_replace_children(self, visitor: Any) -> "_Taken":
        return self

    def _codegen_impl(self, state: CodegenState) -> None:
        _, source, first, end, indent = self.kept
        if tuple(state.indent_tokens) != indent:
            self.node._codegen(state)
            return
        if end - first > 1:
            state.tokens.append("".join(source[first:end - 1]))
        state.tokens.append(source[end - 1])


class NodePositions:
    """PositionProvider's ranges for `nodes` of `module` (for every node when `nodes` is None).
    `code`: the module's code, from the same generation; with `code=False` the generation stops
    after the last of `nodes` (a file with findings and no edit needs no code: engine.py), and
    `code` is None.

    `base`: the positions of another tree, generated whole, whose top-level statements this
    module may share (the file's own tree, when `module` is the migrated one): a statement of
    `module` that is one of them (the same object), and holds none of `nodes`, is not generated
    again, its text is the base's (a statement's text depends only on the module's default
    indent and newline, which must be the same). The migrated tree of a file keeps most of its
    statements: its code and the positions of the few nodes recorded on it (the import a
    rewrite adds) cost the statements that changed. The base made with `nested` has the text of
    the statements in the bodies of its classes and functions too: in a class or function of
    `module` that changed, those it shares are not generated again either (a rewrite in one method
    of a 1,000-line class), where they stand at the indentation they had. When one of `nodes` has
    no range so (it is in a statement taken from the base: a node of the file's own tree; or it is
    a class or function, or its body, that held one), the module is generated whole, as without
    `base`."""

    def __init__(self, module: cst.Module, nodes: Optional[Iterable[cst.CSTNode]] = None, code: bool = True,
                 base: Optional["NodePositions"] = None, nested: bool = False) -> None:
        work.count("codegen")
        wanted = None if nodes is None else {id(n) for n in nodes}
        reused = None
        if (base is not None and code and wanted is not None and base._statements is not None
                and base._defaults == (module.default_indent, module.default_newline)
                and wanted.isdisjoint(base._ranges)):
            reused = base._statements
        state = self._generate(module, wanted, code, reused, nested and code)
        if reused is not None and wanted and not wanted <= state.ranges.keys():
            state = self._generate(module, wanted, code, None)  # (a node of a statement taken from the base)
        self._ranges: Dict[int, Tuple[int, int]] = state.ranges
        self._offsets: List[int] = list(accumulate(map(len, state.tokens), initial=0))
        text = "".join(state.tokens)
        self._line_starts = line_starts(text)  # (what PositionProvider counts as a line break)
        self._cache: Dict[int, CodeRange] = {}
        statements = state.statements
        whole = statements is not None
        # The pass generated the whole module anyway: `module.code`, without another codegen.
        self.code: Optional[str] = (None if not whole else "".join(state.tokens[:-1]) if state.popped and state.tokens
                                    else text)
        # (what a later tree sharing statements with this one reuses: `base`)
        self._defaults: Tuple[str, str] = (module.default_indent, module.default_newline)
        self._statements: Optional[Dict[int, _Kept]] = None
        if statements is not None:
            self._statements = {id(stmt): (stmt, state.tokens, start, end, ()) for stmt, start, end in statements}
            if isinstance(state, _MarkingState):
                self._statements.update((key, (state.marks[key], state.tokens, start, end, indent))
                                        for key, (start, end, indent) in state.marked.items())

    @staticmethod
    def _generate(module: cst.Module, wanted: Optional[Set[int]], code: bool,
                  reused: Optional[Dict[int, _Kept]], nested: bool = False) -> "_RecordingState":
        """`module._codegen(state)` (libcst's Module._codegen_impl, written out), noting where
        each top-level statement's tokens start and end (state.statements; None when the
        generation stopped early), with `nested` those of the bodies of its definitions too
        (_MarkingState); a statement found in `reused` is its tokens there, joined (its last
        token, a newline, apart: pop_trailing_newline); in a definition not found there, its
        statements found there are (_with_taken)."""
        marks = _nested_statements(module) if nested else None
        state: _RecordingState
        if marks:
            state = _MarkingState(module, set(wanted) if wanted is not None else None, marks)
        else:
            state = _RecordingState(module, set(wanted) if wanted is not None else None, stop=not code)
        tokens = state.tokens
        statements: List[Tuple[cst.CSTNode, int, int]] = []
        try:
            state.before_codegen(module)
            for line in module.header:
                line._codegen(state)
            for stmt in module.body:
                start = len(tokens)
                found = reused.get(id(stmt)) if reused is not None else None
                if found is not None and found[0] is stmt and not found[4]:
                    _, source, first, end, _indent = found
                    if end - first > 1:
                        tokens.append("".join(source[first:end - 1]))
                    tokens.append(source[end - 1])
                elif reused is not None and isinstance(stmt, _DEFINITIONS):
                    try:
                        taken = NodePositions._with_taken(stmt, reused)
                    except Exception:  # (a node libcst's checks refuse when rebuilt: generated as it is)
                        taken = stmt
                    taken._codegen(state)
                else:
                    stmt._codegen(state)
                statements.append((stmt, start, len(tokens)))
            for line in module.footer:
                line._codegen(state)
            if module.has_trailing_newline:
                if not tokens:  # (nothing in the header, body or footer)
                    state.add_token(state.default_newline)
            else:
                state.pop_trailing_newline()
            state.after_codegen(module)
        except _AllFound:
            return state
        state.statements = statements
        return state

    @staticmethod
    def _with_taken(definition: cst.CSTNode, reused: Dict[int, _Kept]) -> cst.CSTNode:
        """`definition` (a class or function) with each statement of its body that `reused` has
        (the same object) standing for its text there (_Taken), and so in the definitions of its
        body; itself when it has none."""
        block = getattr(definition, "body", None)
        if not isinstance(block, cst.IndentedBlock):
            return definition
        body: List[cst.CSTNode] = []
        changed = False
        for stmt in block.body:
            found = reused.get(id(stmt))
            if found is not None and found[0] is stmt:
                body.append(_Taken(stmt, found))
                changed = True
            elif isinstance(stmt, _DEFINITIONS):
                taken = NodePositions._with_taken(stmt, reused)
                changed = changed or taken is not stmt
                body.append(taken)
            else:
                body.append(stmt)
        return definition.with_changes(body=block.with_changes(body=body)) if changed else definition

    def _position(self, token_index: int) -> CodePosition:
        offset = self._offsets[token_index]
        line = bisect_right(self._line_starts, offset)  # (1-based: the first line starts at 0)
        return CodePosition(line, offset - self._line_starts[line - 1])

    def get(self, node: cst.CSTNode) -> Optional[CodeRange]:
        key = id(node)
        found = self._cache.get(key)
        if found is None:
            tokens = self._ranges.get(key)
            if tokens is None:
                return None
            found = self._cache[key] = CodeRange(self._position(tokens[0]), self._position(tokens[1]))
        return found
