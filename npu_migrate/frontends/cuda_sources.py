"""CUDA sources (`.cu`, `.cuh`): nothing to rewrite, one finding per file.

A custom CUDA kernel cannot run on an Ascend NPU; it has to be rewritten (Ascend C, or torch
ops). The finding comes from the `[[finding]]` rules of kind `file` whose `suffixes` match the
file name, and points at the first `__global__` function (line 1 when there is none). A
`// npu-migrate: ignore` (or `ignore[NPU302]`) comment on that line silences it.

The file is only read, never written, so undecodable bytes are replaced rather than refused.
"""

from __future__ import annotations

import re
from typing import List, Optional, Tuple

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


# `#define DEFINE_V3_KERNEL(name, scalar_t) \`: a function-like macro and its parameters.
_DEFINE_RE = re.compile(r"[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)\(([^)]*)\)")


def kernels(text: str) -> List[Tuple[str, int, int]]:
    """(name, line, column) of every `__global__` function, 1-based. A kernel a function-like
    macro defines under one of its parameters is named by the macro (spikingjelly 2.0.0's
    ops/spike_linear/kernels.cuh: `#define DEFINE_V3_KERNEL(name, scalar_t) extern "C" __global__
    void name(...)` is `DEFINE_V3_KERNEL(...)`, not "name")."""
    code = _COMMENT_RE.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), text)
    lines = LineIndex(code)
    found = []
    for m in _KERNEL_RE.finditer(code):
        name = m.group(1)
        macro = _macro_around(code, m.start())
        if macro is not None and name in (p.strip() for p in macro.group(2).split(",")):
            name = f"{macro.group(1)}(...)"
        found.append((name, *lines.position(m.start())))
    return found


def _macro_around(code: str, at: int) -> Optional["re.Match[str]"]:
    """The `#define NAME(...)` whose body, continued by backslashes, holds offset `at`."""
    start = code.rfind("\n", 0, at) + 1
    while True:
        define = _DEFINE_RE.match(code, start)
        if define is not None:
            return define
        if start == 0:
            return None
        before = code.rfind("\n", 0, start - 1) + 1
        if not code[before:start - 1].rstrip().endswith("\\"):
            return None
        start = before


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
