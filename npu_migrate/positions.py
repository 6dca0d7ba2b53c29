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
from itertools import accumulate
from typing import Dict, Iterable, List, Optional, Set, Tuple

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


class NodePositions:
    """PositionProvider's ranges for `nodes` of `module` (for every node when `nodes` is None).
    `code`: the module's code, from the same generation; with `code=False` the generation stops
    after the last of `nodes` (a file with findings and no edit needs no code: engine.py), and
    `code` is None."""

    def __init__(self, module: cst.Module, nodes: Optional[Iterable[cst.CSTNode]] = None, code: bool = True) -> None:
        work.count("codegen")
        wanted = None if nodes is None else {id(n) for n in nodes}
        state = _RecordingState(module, wanted, stop=not code)
        whole = True
        try:
            module._codegen(state)
        except _AllFound:
            whole = False
        self._ranges = state.ranges
        self._offsets: List[int] = list(accumulate(map(len, state.tokens), initial=0))
        text = "".join(state.tokens)
        self._line_starts = line_starts(text)  # (what PositionProvider counts as a line break)
        self._cache: Dict[int, CodeRange] = {}
        # The pass generated the whole module anyway: `module.code`, without another codegen.
        self.code: Optional[str] = (None if not whole else "".join(state.tokens[:-1]) if state.popped and state.tokens
                                    else text)

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
