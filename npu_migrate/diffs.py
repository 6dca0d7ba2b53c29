"""Unified diffs for review: they apply with `git apply` and `patch -p1`, and read well on a terminal.

Lines are split on "\\n" only (as git and patch do): a CRLF line keeps its "\\r" inside the diff,
and form feeds or U+2028 inside a line do not split it (str.splitlines would, and the patch would
no longer apply). A last line without a newline gets git's "\\ No newline at end of file" marker.
"""

from __future__ import annotations

import os
import re
from typing import IO, TYPE_CHECKING, List, Optional, Tuple

import click

if TYPE_CHECKING:
    import difflib

_LINE = re.compile(r"[^\n]*\n|[^\n]+\Z")


def split_lines(text: str) -> List[str]:
    return _LINE.findall(text)


_GIT_ESCAPES = {0x07: "\\a", 0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0B: "\\v", 0x0C: "\\f", 0x0D: "\\r",
                0x22: '\\"', 0x5C: "\\\\"}


def header_name(name: str) -> str:
    """A file name as a patch header carries it: as it is, or quoted the way git quotes it (C
    escapes, octal bytes) when it holds a control character (a newline, ESC), a quote, a
    backslash or bytes that are not UTF-8. Quoted, a newline cannot end the header and start a
    forged one, and `git apply` reads the name back exactly. An unquoted name with a space gets
    a tab after it, or `patch` stops reading the name at the space."""
    raw = name.encode("utf-8", "surrogateescape")
    needs = any(b < 0x20 or b == 0x7F or b in (0x22, 0x5C) for b in raw) or any(
        0xDC80 <= ord(c) <= 0xDCFF for c in name)
    if not needs:
        return name + ("\t" if any(c.isspace() for c in name) else "")
    out = []
    for b in raw:
        if b in _GIT_ESCAPES:
            out.append(_GIT_ESCAPES[b])
        elif b < 0x20 or b >= 0x7F:
            out.append(f"\\{b:03o}")
        else:
            out.append(chr(b))
    return '"' + "".join(out) + '"'


def unified_diff(before: str, after: str, display: str, context: int = 3) -> str:
    """The diff of one file, with `a/<display>` and `b/<display>` names (for -p1), quoted as
    git quotes them when they need it (header_name). Lines are matched by `matching_blocks`
    (difflib's for files of up to a few thousand lines, with the lines between two matches
    matched again on their own: the diff is difflib's where its autojunk heuristic hides no
    match)."""
    import difflib  # (a run that shows no diff does not load it)

    a, b = split_lines(before), split_lines(after)
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)  # (only its b index is built: linear)
    matcher.matching_blocks = matching_blocks(a, b)  # type: ignore[attr-defined]  # difflib's cache of them
    out: List[str] = []
    for group in matcher.get_grouped_opcodes(context):
        if not out:
            out += [f"--- {header_name(f'a/{display}')}\n", f"+++ {header_name(f'b/{display}')}\n"]
        first, last = group[0], group[-1]
        out.append(f"@@ -{_range(first[1], last[2])} +{_range(first[3], last[4])} @@\n")
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out += [" " + line for line in a[i1:i2]]
                continue
            if tag in ("replace", "delete"):
                out += ["-" + line for line in a[i1:i2]]
            if tag in ("replace", "insert"):
                out += ["+" + line for line in b[j1:j2]]
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in out)


def _range(start: int, stop: int) -> str:
    """A hunk's range as unified diffs write it (difflib's _format_range_unified)."""
    length = stop - start
    beginning = start + 1 if length else start  # an empty range names the line before it
    return f"{beginning}" if length == 1 else f"{beginning},{length}"


# difflib matches lines in time that grows with the product of the two lengths, and worse: the
# --diff of a 1.9 MB file took over 6 CPU-minutes against 35 s for --check (issue 30.8). Up to
# this product it is used as it is; above, lines are first matched by patience anchors (lines
# that occur once on each side, in order), which splits the file into small gaps for difflib.
DIFFLIB_LIMIT = 4_000_000


def matching_blocks(a: List[str], b: List[str]) -> List[difflib.Match]:
    """difflib's matching blocks of `a` and `b` ((i, j, n): a[i:i+n] == b[j:j+n], increasing,
    ending with (len(a), len(b), 0)), found in near-linear time for long texts."""
    import difflib  # (a run that shows no diff does not load it)

    found: List[Tuple[int, int, int]] = []
    if len(a) * len(b) <= DIFFLIB_LIMIT:
        found = [(m.a, m.b, m.size) for m in difflib.SequenceMatcher(None, a, b).get_matching_blocks()]
    else:
        _match(a, 0, len(a), b, 0, len(b), found)
    found = _matched_in_gaps(a, b, found)
    blocks: List[Tuple[int, int, int]] = []
    for i, j, n in found:  # adjacent blocks become one, as difflib's are
        if blocks and blocks[-1][0] + blocks[-1][2] == i and blocks[-1][1] + blocks[-1][2] == j:
            blocks[-1] = (blocks[-1][0], blocks[-1][1], blocks[-1][2] + n)
        elif n:
            blocks.append((i, j, n))
    return [difflib.Match(*block) for block in blocks] + [difflib.Match(len(a), len(b), 0)]


def _matched_in_gaps(a: List[str], b: List[str], found: List[Tuple[int, int, int]]) -> List[Tuple[int, int, int]]:
    """`found` with the lines between two blocks matched too, where they can be. In a file of 200
    lines or more difflib junks every line that makes up over 1% of it (autojunk: blank lines,
    `)`, a repeated argument) and never starts a match on one, so a changed region's own
    repeated lines showed as removed and added again (poutyne's test_multi_gpu.py: 59 lines
    where git shows 31). Matched within the gap alone, they are not popular any more."""
    import difflib  # (a run that shows no diff does not load it)

    out: List[Tuple[int, int, int]] = []
    i0 = j0 = 0
    for i, j, n in found + [(len(a), len(b), 0)]:
        if i > i0 and j > j0 and (i - i0) * (j - j0) <= DIFFLIB_LIMIT:
            out += [(i0 + gi, j0 + gj, gn)
                    for gi, gj, gn in difflib.SequenceMatcher(None, a[i0:i], b[j0:j]).get_matching_blocks() if gn]
        if n:
            out.append((i, j, n))
        i0, j0 = max(i0, i + n), max(j0, j + n)
    return out


def _match(a: List[str], alo: int, ahi: int, b: List[str], blo: int, bhi: int,
           out: List[Tuple[int, int, int]]) -> None:
    """Append the matching blocks of a[alo:ahi] and b[blo:bhi] to `out`, in order."""
    import difflib  # (a run that shows no diff does not load it)

    start = alo
    while alo < ahi and blo < bhi and a[alo] == b[blo]:  # common head
        alo, blo = alo + 1, blo + 1
    if alo > start:
        out.append((start, blo - (alo - start), alo - start))
    tail = 0
    while alo < ahi - tail and blo < bhi - tail and a[ahi - tail - 1] == b[bhi - tail - 1]:
        tail += 1
    ahi, bhi = ahi - tail, bhi - tail
    if (ahi - alo) * (bhi - blo) <= DIFFLIB_LIMIT:
        if alo < ahi and blo < bhi:
            matcher = difflib.SequenceMatcher(None, a[alo:ahi], b[blo:bhi])
            out += [(alo + i, blo + j, n) for i, j, n in matcher.get_matching_blocks() if n]
    else:
        i0, j0 = alo, blo
        for i, j in _anchors(a, alo, ahi, b, blo, bhi):
            _match(a, i0, i, b, j0, j, out)
            out.append((i, j, 1))
            i0, j0 = i + 1, j + 1
        if (i0, j0) != (alo, blo):
            _match(a, i0, ahi, b, j0, bhi, out)
        else:  # no line occurs once on each side (a file of repeated lines): match nearby lines
            _match_nearby(a, alo, ahi, b, blo, bhi, out)
    if tail:
        out.append((ahi, bhi, tail))


NEARBY = 16  # how far _match_nearby looks ahead on each side for the line that follows a change


def _match_nearby(a: List[str], alo: int, ahi: int, b: List[str], blo: int, bhi: int,
                  out: List[Tuple[int, int, int]]) -> None:
    """Walk both sides together: equal lines match; after a difference, the nearest pair of equal
    lines within NEARBY lines on each side (fewest lines skipped first) starts the next match,
    else one line of each side counts as replaced. At most NEARBY**2 comparisons per line: the
    edits of a migration are local (a line changed, a few added), which this finds."""
    i, j = alo, blo
    while i < ahi and j < bhi:
        if a[i] == b[j]:
            out.append((i, j, 1))
            i, j = i + 1, j + 1
            continue
        step = None
        for skipped in range(1, 2 * NEARBY - 1):
            for di in range(max(0, skipped - NEARBY + 1), min(skipped, NEARBY - 1) + 1):
                dj = skipped - di
                if i + di < ahi and j + dj < bhi and a[i + di] == b[j + dj]:
                    step = (di, dj)
                    break
            if step is not None:
                break
        i, j = (i + step[0], j + step[1]) if step is not None else (i + 1, j + 1)


def _anchors(a: List[str], alo: int, ahi: int, b: List[str], blo: int, bhi: int) -> List[Tuple[int, int]]:
    """Lines that occur exactly once in a[alo:ahi] and once in b[blo:bhi], as (i, j), the longest
    chain increasing in both (patience diff); O(n log n)."""
    count: dict = {}
    for i in range(alo, ahi):
        count[a[i]] = count.get(a[i], 0) + 1
    in_b: dict = {}
    for j in range(blo, bhi):
        line = b[j]
        if count.get(line) == 1:
            in_b[line] = -1 if line in in_b else j
    pairs = [(i, in_b[a[i]]) for i in range(alo, ahi) if in_b.get(a[i], -1) >= 0 and count[a[i]] == 1]
    # longest increasing subsequence of the j's (pairs are in increasing i)
    tails: List[int] = []  # tails[k]: index in pairs of the smallest last j of a chain of length k+1
    back = [-1] * len(pairs)
    for k, (_i, j) in enumerate(pairs):
        pos = _bisect(pairs, tails, j)
        if pos:
            back[k] = tails[pos - 1]
        if pos == len(tails):
            tails.append(k)
        else:
            tails[pos] = k
    chain = []
    k = tails[-1] if tails else -1
    while k >= 0:
        chain.append(pairs[k])
        k = back[k]
    return chain[::-1]


def _bisect(pairs: List[Tuple[int, int]], tails: List[int], j: int) -> int:
    """The first position in `tails` whose chain ends at a j not below `j`."""
    lo, hi = 0, len(tails)
    while lo < hi:
        mid = (lo + hi) // 2
        if pairs[tails[mid]][1] < j:
            lo = mid + 1
        else:
            hi = mid
    return lo


def patch_path(shown: str) -> str:
    """The path a patch names: forward slashes, never absolute."""
    return shown.replace(os.sep, "/").lstrip("/")


def colorize(diff: str, header: Optional[str] = None) -> str:
    """Terminal colours, git's palette; `header` (a file's summary) goes on top, bold."""
    out = [click.style(header, bold=True) + "\n"] if header else []
    for line in split_lines(diff):
        body, newline = (line[:-1], "\n") if line.endswith("\n") else (line, "")
        if line.startswith(("+++", "---")):
            body = click.style(body, bold=True)
        elif line.startswith("@@"):
            body = click.style(body, fg="cyan")
        elif line.startswith("+"):
            body = click.style(body, fg="green")
        elif line.startswith("-"):
            body = click.style(body, fg="red")
        out.append(body + newline)
    return "".join(out)


def use_color(choice: str, stream: IO) -> bool:
    """--color always|never|auto; auto = a terminal, unless NO_COLOR is set (https://no-color.org) or TERM=dumb."""
    if choice == "always":
        return True
    if choice == "never" or os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())
