"""Offsets in a text -> 1-based line and column (columns count characters), for the front ends
that scan text instead of parsing it (shell scripts, dependency lists, `.cu` files). Python
files get theirs from the tree (positions.py); no libcst here."""

from __future__ import annotations

import re
from bisect import bisect_right
from itertools import accumulate, count
from operator import add
from typing import Any, List, Tuple, Union

from .model import Span

_NEWLINE_RE = re.compile("\n")
_ANY_NEWLINE = re.compile("\r\n|\r|\n")
_ANY_NEWLINE_BYTES = re.compile(b"\r\n|\r|\n")


def line_starts(text: Union[str, bytes]) -> List[int]:
    r"""Where each line of `text` (str or UTF-8 bytes) starts (index 0: line 1, at 0), a line
    ending at `\r\n`, `\r` or `\n` as Python and libcst count them. Without `\r`, the text is
    split at `\n` and the lengths summed at C speed: a third of a regex scan's cost (what
    safe_parse.deeper_than and positions.NodePositions take for every file they look at)."""
    if isinstance(text, str):
        if "\r" in text:
            return [0] + [m.end() for m in _ANY_NEWLINE.finditer(text)]
        lines: List[Any] = text.split("\n")
    else:
        if b"\r" in text:
            return [0] + [m.end() for m in _ANY_NEWLINE_BYTES.finditer(text)]
        lines = text.split(b"\n")
    return list(map(add, accumulate(map(len, lines[:-1]), initial=0), count()))


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
