"""`[[command]]`: a shell command rewrite in launch scripts: `from` is a command with its exact
arguments (`nvidia-smi`), `to` its replacement (`npu-smi info`). Never applies to Python files.

    [[command]]
    code = "NPU151"
    from = "nvidia-smi"
    to = "npu-smi info"
    message = "..."
"""

from __future__ import annotations

from typing import Any, Dict

from .base import new_dict, register, COMMAND_RE, Kind, RuleError, by_from, schema


def _check(entry: Dict[str, Any], label: str, from_: str) -> None:
    for key in ("from", "to"):
        if not COMMAND_RE.match(entry[key]):
            raise RuleError(f"{label}: '{key}' must be a command and its arguments separated by single spaces, "
                            f"got {entry[key]!r}")


KIND = register(Kind(
    name="command",
    schema=schema(("from", "to"), ()),
    summary="a shell command and its arguments become another command",
    requirements=lambda rule: [],
    new_index=new_dict,
    index=by_from,
    check=_check,
))
