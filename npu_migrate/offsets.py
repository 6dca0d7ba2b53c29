"""Offsets in a text -> 1-based line and column (columns count characters), for the front ends
that scan text instead of parsing it (shell scripts, dependency lists, `.cu` files). Python
files get theirs from the tree (positions.py); no libcst here."""

from __future__ import annotations

import re
from bisect import bisect_right
from typing import List, Tuple

from .model import Span

_NEWLINE_RE = re.compile("\n")


class LineIndex:
    """Where each line of `text` starts, to turn offsets into positions."""

    def __init__(self, text: str) -> None:
        self.starts: List[int] = [0] + [m.end() for m in _NEWLINE_RE.finditer(text)]

    def position(self, offset: int) -> Tuple[int, int]:
        """(line, column) of an offset, both 1-based."""
        line = bisect_right(self.starts, offset)
        return line, offset - self.starts[line - 1] + 1

    def line(self, offset: int) -> int:
        return bisect_right(self.starts, offset)

    def span(self, start: int, end: int) -> Span:
        (l1, c1), (l2, c2) = self.position(start), self.position(end)
        return Span(l1, c1, l2, c2)
