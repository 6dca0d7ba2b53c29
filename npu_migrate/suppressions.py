"""`# npu-migrate: ignore[CODE,...]` comments: which lines they silence, and which silenced
nothing (NPU001). No libcst here: the shell and `.cu` front ends use it too, and a run whose
files are all cached never imports libcst."""

from __future__ import annotations

import io
import re
import tokenize
from typing import Dict, List, Mapping, Optional, Set, Tuple

from .model import Finding, Severity, Span
from .codes import check_emitter, emits

SUPPRESS_RE = re.compile(r"#\s*npu-migrate:\s*ignore(?:\[([A-Za-z0-9_,\s]*)\])?")


def suppressed_codes(match: "re.Match[str]") -> Optional[Set[str]]:
    """The codes a SUPPRESS_RE match names (`ignore[NPU105, npu301]`); None: every code."""
    codes = match.group(1)
    return None if codes is None else {c.strip().upper() for c in codes.split(",") if c.strip()}


def covers(suppressions: Mapping[int, Optional[Set[str]]], line: int, code: str) -> bool:
    """Whether a comment on `line` silences `code`."""
    if line not in suppressions:
        return False
    codes = suppressions[line]
    return codes is None or code in codes


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
            found[tok.start[0]] = suppressed_codes(m)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return found


UNUSED_SUPPRESSION_CODE = "NPU001"


@emits("NPU001")
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
        check_emitter(UNUSED_SUPPRESSION_CODE, None)
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
