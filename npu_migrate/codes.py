"""Which Python code emits which NPU code: the registry behind `npu-migrate explain`.

A function or class that records an edit or a finding registers against what it emits:

    @emits("NPU385", "NPU386")          # codes its own analysis decides (an [[edit]], an
    def _report_problems(ctx, a): ...   # `analysis` or `codemod` finding)

    @applies("device", "backend")       # the rules of a kind, whatever their codes
    class LiteralRewrites: ...

`explain` prints every registered site (loading every module that can emit: explain.load_emitters) of a code (`module:function:line`, read from the object
itself), so a pointer cannot go stale. `Context.edit` and `Context.finding` call `check_emitter`:
when NPU_MIGRATE_STRICT_CODES=1 (the test suite sets it) an edit or finding recorded outside
every registered site of its code (or of its rule's kind) raises `UnownedCode`.

Kinds are keyed by name, with the framework of framework rules (`call_rename@tensorflow`) and the
match kind of findings (`finding:api`, `finding:api@tensorflow`): see `kind_key`.
"""

from __future__ import annotations

import inspect
import os
import sys
from dataclasses import dataclass, field
from functools import cached_property
from types import CodeType
from typing import Any, Callable, Dict, FrozenSet, Iterable, List, Optional, Set, TypeVar

T = TypeVar("T")

STRICT_ENV = "NPU_MIGRATE_STRICT_CODES"


class UnownedCode(AssertionError):
    """An edit or finding recorded by code that no registration owns (a bug of the package)."""


@dataclass(frozen=True)
class Site:
    module: str  # npu_migrate.codemods.distributed_torch
    function: str  # its qualified name in the module: _report_problems, LiteralRewrites
    code_objects: FrozenSet[CodeType] = field(default=frozenset(), compare=False, repr=False)
    target: Any = field(default=None, compare=False, repr=False)  # the registered function or class

    @cached_property
    def line(self) -> int:
        """The line of its `def` or `class`, below its decorators. Read from the source when
        asked (explain), not at registration: finding a class's source parses its module,
        which cost a one-file run 0.1-0.2 s of start-up."""
        try:
            source, first = inspect.getsourcelines(self.target)
            return first + next(i for i, text in enumerate(source)
                                if text.lstrip().startswith(("def ", "class ", "async def ")))
        except (OSError, TypeError, StopIteration):  # pragma: no cover - no source (a frozen build)
            return getattr(getattr(self.target, "__code__", None), "co_firstlineno", 0)

    def __str__(self) -> str:
        return f"{self.module}:{self.function}:{self.line}"


VIOLATIONS: List[str] = []  # what check_emitter raised in this process (strict mode)
_BY_CODE: Dict[str, List[Site]] = {}
_BY_KIND: Dict[str, List[Site]] = {}
_OWNERS_OF_CODE: Dict[str, Set[CodeType]] = {}
_OWNERS_OF_KIND: Dict[str, Set[CodeType]] = {}


def _code_objects(obj: Any) -> FrozenSet[CodeType]:
    """The code objects a frame of `obj` can run in: a function's own, or every method's of a
    class (and of its nested functions' frames, which the stack walk passes through anyway)."""
    if inspect.isclass(obj):
        found = set()
        for value in vars(obj).values():
            func = getattr(value, "__func__", value)  # staticmethod / classmethod
            if isinstance(value, property):
                func = value.fget
            code = getattr(func, "__code__", None)
            if code is not None:
                found.add(code)
        return frozenset(found)
    return frozenset({obj.__code__})


def _site(obj: Any) -> Site:
    target = inspect.unwrap(obj)
    return Site(target.__module__, target.__qualname__, _code_objects(target), target)


def _register(table: Dict[str, List[Site]], owners: Dict[str, Set[CodeType]], keys: Iterable[str], obj: Any) -> None:
    site = _site(obj)
    for key in keys:
        sites = table.setdefault(key, [])
        if site not in sites:
            sites.append(site)
        owners.setdefault(key, set()).update(site.code_objects)


def emits(*codes: str) -> Callable[[T], T]:
    """Register the decorated function or class as a site that emits `codes`."""
    def register(obj: T) -> T:
        _register(_BY_CODE, _OWNERS_OF_CODE, codes, obj)
        return obj

    return register


def applies(*kinds: str) -> Callable[[T], T]:
    """Register the decorated function or class as the applier of the rules of `kinds` (keys
    as `kind_key` makes them)."""
    def register(obj: T) -> T:
        _register(_BY_KIND, _OWNERS_OF_KIND, kinds, obj)
        return obj

    return register


def kind_key(kind: str, framework: str = "", match_kind: str = "") -> Optional[str]:
    """The key under which a rule's appliers register; None for the rules whose code the
    emitting module decides itself ([[edit]], `analysis` findings): those are `emits` only."""
    if kind == "edit" or (kind == "finding" and match_kind == "analysis"):
        return None
    key = f"finding:{match_kind}" if kind == "finding" else kind
    return f"{key}@{framework}" if framework else key


def sites_of(code: str) -> List[Site]:
    return list(_BY_CODE.get(code, ()))


def appliers_of(key: Optional[str]) -> List[Site]:
    return list(_BY_KIND.get(key, ())) if key is not None else []


def registered_codes() -> Dict[str, List[Site]]:
    return {code: list(sites) for code, sites in _BY_CODE.items()}


def registered_kinds() -> Dict[str, List[Site]]:
    return {key: list(sites) for key, sites in _BY_KIND.items()}


def check_rule_emitter(rule: Any) -> None:
    """check_emitter for a rule (kinds.base.Rule) about to be recorded."""
    check_emitter(rule.code, rule.applier_key())


def check_emitter(code: str, key: Optional[str]) -> None:
    """With NPU_MIGRATE_STRICT_CODES=1: raise UnownedCode unless a frame on the stack runs in a
    registered site of `code`, or of the kind `key` of the rule being recorded."""
    if os.environ.get(STRICT_ENV) != "1":
        return
    owners = _OWNERS_OF_CODE.get(code, set())
    kind_owners = _OWNERS_OF_KIND.get(key, set()) if key is not None else set()
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code in owners or frame.f_code in kind_owners:
            return
        frame = frame.f_back  # type: ignore[assignment]
    stack = []
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if name.startswith("npu_migrate.") and name not in (__name__, "npu_migrate.context"):
            stack.append(f"{name}:{frame.f_code.co_name}:{frame.f_code.co_firstlineno}")
        frame = frame.f_back
    message = (f"{code} recorded by code no registration owns (kind {key}): register the function "
                      "that decides it with @codes.emits(...) or its kind's applier with @codes.applies(...); "
               f"stack: {' <- '.join(stack[:8])}")
    VIOLATIONS.append(message)  # also seen when a caller catches the error (the engine does)
    raise UnownedCode(message)
