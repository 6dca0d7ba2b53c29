"""`[[env]]`: an environment variable name (`CUDA_VISIBLE_DEVICES` -> `ASCEND_RT_VISIBLE_DEVICES`)
in Python where it is certainly one (`os.environ[...]`, `os.getenv(...)`, `... in os.environ`),
and in shell scripts (frontends/shell.py).

    [[env]]
    code = "NPU107"
    from = "CUDA_VISIBLE_DEVICES"
    to = "ASCEND_RT_VISIBLE_DEVICES"
    message = "..."
"""

from __future__ import annotations

from typing import Any, Dict

from ..words import quoted
from .base import new_dict, register, ENV_PATTERN_RE, Kind, RuleError, by_from, schema


def _check(entry: Dict[str, Any], label: str, from_: str) -> None:
    for key in ("from", "to"):
        if not ENV_PATTERN_RE.match(entry[key]) or entry[key].endswith("*"):
            raise RuleError(f"{label}: '{key}' must be an environment variable name, got {entry[key]!r}")


KIND = register(Kind(
    name="env",
    schema=schema(("from", "to"), ()),
    summary="an environment variable name (Python strings and shell scripts)",
    requirements=lambda rule: [quoted(rule.from_)],
    new_index=new_dict,
    index=by_from,
    check=_check,
))
