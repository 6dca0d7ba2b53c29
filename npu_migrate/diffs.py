"""Unified diffs for review: they apply with `git apply` and `patch -p1`, and read well on a terminal.

Lines are split on "\\n" only (as git and patch do): a CRLF line keeps its "\\r" inside the diff,
and form feeds or U+2028 inside a line do not split it (str.splitlines would, and the patch would
no longer apply). A last line without a newline gets git's "\\ No newline at end of file" marker.
"""

from __future__ import annotations

import difflib
import os
import re
from typing import IO, List, Optional

import click

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
    git quotes them when they need it (header_name)."""
    out = []
    for line in difflib.unified_diff(split_lines(before), split_lines(after), header_name(f"a/{display}"),
                                     header_name(f"b/{display}"), n=context):
        if not line.endswith("\n"):
            line += "\n\\ No newline at end of file\n"
        out.append(line)
    return "".join(out)


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
