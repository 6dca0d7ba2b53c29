"""CUDA sources (`.cu`, `.cuh`): nothing to rewrite, one finding per file.

A custom CUDA kernel cannot run on an Ascend NPU; it has to be rewritten (Ascend C, or torch
ops). The finding comes from the `[[finding]]` rules of kind `file` whose `suffixes` match the
file name, and points at the first `__global__` function (line 1 when there is none). A
`// npu-migrate: ignore` (or `ignore[NPU302]`) comment on that line silences it.

The file is only read, never written, so undecodable bytes are replaced rather than refused.
"""

from __future__ import annotations

import re
from typing import List, Tuple

from ..offsets import LineIndex
from ..suppressions import SUPPRESS_RE, covers, suppressed_codes
from ..model import FileResult, Finding, Span
from ..options import Options
from ..rules import RuleSet
from ..kinds.finding import FindingSpec
from ..codes import applies, check_rule_emitter

_SHOWN_KERNELS = 5

# Comments are blanked (newlines kept, so line numbers hold) before kernels are looked for.
_COMMENT_RE = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
# `__global__ void add(`, `template <typename T> __global__ static void k(`, `extern "C" __global__ …`
_KERNEL_RE = re.compile(r"\b__global__\s+(?:[A-Za-z_][\w:<>,]*[\s*&]+)*?([A-Za-z_]\w*)\s*\(")


def decode(data: bytes, path: str = "<bytes>") -> Tuple[str, str]:
    return data.decode("utf-8", errors="replace"), "utf-8"


def kernels(text: str) -> List[Tuple[str, int, int]]:
    """(name, line, column) of every `__global__` function, 1-based."""
    code = _COMMENT_RE.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), text)
    lines = LineIndex(code)
    return [(m.group(1), *lines.position(m.start())) for m in _KERNEL_RE.finditer(code)]


def _suppressed(text: str, line: int, code: str) -> bool:
    lines = text.splitlines()
    if not 1 <= line <= len(lines):
        return False
    comment = lines[line - 1].partition("//")[2]
    m = SUPPRESS_RE.search("#" + comment) if comment else None
    return m is not None and covers({line: suppressed_codes(m)}, line, code)


@applies("finding:file")
def migrate_cuda_source(text: str, path: str, options: Options, rules: RuleSet) -> FileResult:
    result = FileResult(path=path)
    found = kernels(text)
    if found:
        names = [name for name, _, _ in found]
        shown = ", ".join(names[:_SHOWN_KERNELS]) + (", …" if len(names) > _SHOWN_KERNELS else "")
        detail = f"{len(names)} `__global__` kernel{'s' if len(names) != 1 else ''}: {shown}"
        api, line, col = shown, found[0][1], found[0][2]
    else:
        detail, api, line, col = "CUDA host code, no `__global__` kernel", "CUDA source", 1, 1
    end_col = col + len("__global__") if found else 1
    for rule in rules.findings.get("file", ()):
        if not path.endswith(FindingSpec.of(rule).suffixes) or _suppressed(text, line, rule.code):
            continue
        check_rule_emitter(rule)
        result.findings.append(
            Finding(
                code=rule.code,
                severity=rule.severity,
                span=Span(line, col, line, end_col),
                api=api,
                message=rule.render_message(api=api, detail=detail),
                suggestion=rule.render_suggestion(api=api, detail=detail),
            )
        )
    return result


migrate = migrate_cuda_source  # the front end (frontends/__init__.py)
