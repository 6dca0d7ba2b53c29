"""Regular expressions from rule files (`pattern` of [[argument]], kinds/argument.py), bounded.

They run on every matching string literal of every file, and a rule file may come from
anyone (`--rules`, `rules = [...]` in a shared pyproject.toml): a pattern like `(a+)+$` would
backtrack for longer than the universe lasts on a literal of forty `a`. So a pattern is taken
only when its backtracking is bounded:

* at most MAX_PATTERN_CHARS characters, no backreferences;
* whatever repeats more than once is a single character or class (`[0-9]+`, not `(a+)+` or
  `(a|aa)*`, the shapes that take exponential time);
* the number of ways to match it, counted as the product of the choices of every repetition
  (`x{m,n}`: n+1, `?`: 2, an unbounded one: MAX_MATCHED_CHARS+1) times the alternatives of
  every `|`, is at most MAX_MATCH_WAYS;

and it only ever sees literals of at most MAX_MATCHED_CHARS characters (`bounded()`: longer
literals are never device strings, and are not matched at all).
"""

from __future__ import annotations

import re
import sys
from typing import Any, Iterable, Optional

if sys.version_info >= (3, 11):  # typeshed has no stubs for these private modules
    from re import _parser as _sre_parse  # type: ignore[attr-defined,unused-ignore]
    from re._constants import MAXREPEAT as _MAXREPEAT  # type: ignore[import-not-found,unused-ignore]
else:  # pragma: no cover - Python < 3.11
    import sre_parse as _sre_parse
    from sre_constants import MAXREPEAT as _MAXREPEAT

MAX_PATTERN_CHARS = 200
MAX_MATCHED_CHARS = 100
MAX_MATCH_WAYS = 10**6

_REPEATS = ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT")
_ONE_CHARACTER = ("LITERAL", "NOT_LITERAL", "ANY", "IN", "CATEGORY")


class _Refused(Exception):
    pass


def check_pattern(pattern: str) -> Optional[str]:
    """Why `pattern` is not a regular expression or could run away (one phrase), or None."""
    if len(pattern) > MAX_PATTERN_CHARS:
        return f"refused: longer than {MAX_PATTERN_CHARS} characters"
    try:
        re.compile(pattern)
        parsed = _sre_parse.parse(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        return f"is not a regular expression: {exc}"
    try:
        ways = _ways(list(parsed))  # type: ignore[call-overload,unused-ignore]  # a SubPattern is a sequence
    except _Refused as exc:
        return f"refused: {exc}"
    if ways > MAX_MATCH_WAYS:
        return (f"refused: it can match in too many ways (about {ways:.1e}; at most {MAX_MATCH_WAYS:.0e}): "
                "fewer repetitions (`*`, `+`, `?`, `{m,n}`) or alternatives")
    return None


def _ways(items: Iterable[Any]) -> int:
    total = 1
    for op, av in items:
        name = str(op)
        if name in _REPEATS:
            _low, high, sub = av
            if high > 1 and not _one_character(sub):
                raise _Refused("only a single character or class may repeat (like `[0-9]+`); "
                               "`(a+)+` or `(a|aa)*` can take exponential time")
            choices = MAX_MATCHED_CHARS if high == _MAXREPEAT else min(high, MAX_MATCHED_CHARS)
            total *= (choices + 1) * _ways(list(sub))
        elif name in ("SUBPATTERN", "ATOMIC_GROUP"):
            total *= _ways(list(av[-1]))
        elif name == "BRANCH":
            total *= sum(_ways(list(alt)) for alt in av[1])
        elif name in ("ASSERT", "ASSERT_NOT"):
            total *= _ways(list(av[1]))
        elif name in ("GROUPREF", "GROUPREF_EXISTS"):
            raise _Refused("backreferences are not supported")
        if total > MAX_MATCH_WAYS * 10**6:  # no need to count further (and no huge numbers)
            return total
    return total


def _one_character(items: Iterable[Any]) -> bool:
    items = list(items)
    while len(items) == 1 and str(items[0][0]) == "SUBPATTERN":
        items = list(items[0][1][-1])
    return len(items) == 1 and str(items[0][0]) in _ONE_CHARACTER


_GLOBAL_FLAGS = re.compile(r"(?:\(\?[aiLmsux]+\))*")


def bounded(pattern: str) -> str:
    """`pattern` (checked) made to fail at once on a subject longer than MAX_MATCHED_CHARS:
    a lookahead first, after the global flags Python wants at the very start."""
    flags = _GLOBAL_FLAGS.match(pattern).group(0)  # type: ignore[union-attr]  # it matches "" too
    rest = pattern[len(flags):]
    end = "\n)" if "x" in flags else ")"  # (?x): a trailing `# comment` must not eat the `)`
    return f"{flags}(?=[\\s\\S]{{0,{MAX_MATCHED_CHARS}}}\\Z)(?:{rest}{end}"
