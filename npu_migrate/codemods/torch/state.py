"""What the PyTorch pass's walk (codemods/torch/__init__.TorchTransformer) hands each kind it
applies: `TorchState`, made once per file, and `TorchKind`, the base of each kind's applier
(references.py: api/module, methods.py: method/attribute, literals.py: device/backend/env).

A kind's applier is an object of its own: its state is its own fields (set up in its
`__init__`), what it shares with the other kinds is the `TorchState` it is given, and its
`visit_X`/`leave_X` handlers are called by the walk, which alone decides their order where two
kinds look at the same node. Nothing else is shared: mypy checks every use."""

from __future__ import annotations

from typing import Callable, List, Optional, Set, Type

import libcst as cst

from ...context import Context
from ...imports import ImportTable


class TorchState:
    """The one state every kind of the walk reads: the file's context and imports, and how
    deep the walk is in calls that only show their arguments or that take another library's
    device names. The walk updates the depths (visit_Call/leave_Call); kinds only read them."""

    __slots__ = ("ctx", "imports", "resolve", "shown", "foreign", "type_tests")

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.imports: ImportTable = ctx.imports
        # The qualified name a node refers to through the file's imports (None: not imported).
        self.resolve: Callable[[cst.BaseExpression], Optional[str]] = ctx.imports.resolve
        # > 0 inside a call that only shows its arguments (print, logging, str.format,
        # f-strings): no device rewrites there, and `skip_logged` api findings are not reported.
        self.shown = 0
        # > 0 inside a call of a library with device names of its own (device_context.py).
        self.foreign = 0
        # The classes an isinstance/issubclass test names (ids of the nodes): a type test is
        # no use of the class (`skip_type_tests` api findings are not reported there).
        self.type_tests: Set[int] = set()


class TorchKind:
    """The applier of one or more rule kinds in the PyTorch pass, built per file by the walk
    with the file's `TorchState`. `ctx` and `resolve` are the state's, at hand.

    A subclass registers itself (TORCH_KINDS, in the order defined): the walk builds one per
    file and calls its `visit_<Node>`/`leave_<Node>` hooks; a hook on a node another kind hooks
    too must be ordered by the walk (TorchTransformer defines that hook, or the walk refuses
    to be built)."""

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        TORCH_KINDS.append(cls)

    def __init__(self, state: TorchState) -> None:
        self.state = state
        self.ctx: Context = state.ctx
        self.resolve: Callable[[cst.BaseExpression], Optional[str]] = state.resolve


# Every TorchKind subclass, in the order defined (the walk builds them in this order).
TORCH_KINDS: List[Type[TorchKind]] = []
