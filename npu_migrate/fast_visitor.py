"""A fast CST visitor: tree walks that make the same visitor calls as libcst's
`node.visit(visitor)`, 3-5x faster.

libcst runs every visitor through `_visit_and_replace_children`, which builds and validates a
new copy of every node of the tree -- also for a read-only `CSTVisitor`, and also where a
transformer changed nothing -- and asks the visitor for `visit_<Node>_<field>` hooks around
every field. On the files this tool migrates, that machinery costs about as much as parsing.

* `walk(node, visitor)`: a `CSTVisitor` gets the same `on_visit`/`on_leave` calls (so the same
  `visit_X`/`leave_X` calls) for the same nodes in the same order; nothing is built.
* `transform(node, transformer)`: a `CSTTransformer` gets the same calls in the same order, and
  a node is rebuilt (`with_changes`) only when one of its children changed; otherwise its
  `leave_X` gets the original node as `updated_node` (as libcst does for a node whose
  children it did not visit). Removal and flatten sentinels behave as in libcst.

Both read the order of a node's children, and how each field is visited, from the `visit_*`
calls in its class's `_visit_and_replace_children` (once per class); tests/test_fast_visitor.py
compares the calls and the results with libcst's on real code. Visitors with per-field hooks,
and node classes whose order cannot be read, go through libcst's own `visit`.
"""

from __future__ import annotations

import dataclasses
import linecache
import re
import typing
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, Union

import libcst as cst

from . import work

_CALL_RE = re.compile(r'(visit_\w+)\(\s*self,\s*"(\w+)"')
_FIELD_HOOK_RE = re.compile(r"(visit|leave)_[A-Z][A-Za-z]*_\w+$")
# node class -> ((field, how libcst visits it: visit_required/visit_optional/...), ...) or None
_FIELDS: Dict[type, Optional[Tuple[Tuple[str, str], ...]]] = {}
_PLAIN: Dict[type, bool] = {}
# type -> whether its instances are nodes. `isinstance(x, cst.CSTNode)` goes through the ABC
# machinery (CSTNode is abstract): a dict lookup per child is several times cheaper.
_IS_NODE: Dict[type, bool] = {}


def _is_node(value: Any) -> bool:
    kind = type(value)
    known = _IS_NODE.get(kind)
    if known is None:
        known = _IS_NODE[kind] = isinstance(value, cst.CSTNode)
    return known


def _child_fields(cls: Any) -> Optional[Tuple[Tuple[str, str], ...]]:
    """The fields of `cls` libcst visits, in its order, each with its `visit_*` function name;
    None if that cannot be read (then libcst's own `visit` is used for such nodes)."""
    try:
        return _FIELDS[cls]
    except KeyError:
        pass
    found: Optional[Tuple[Tuple[str, str], ...]]
    try:
        calls = _CALL_RE.findall(_function_source(cls._visit_and_replace_children))
        fields = {f.name for f in dataclasses.fields(cls)}
        order: Dict[str, str] = {}
        for function, name in calls:
            # A field visited two ways (`ImportFrom.names`: star or list) is told apart by
            # its value; keep the first spelling.
            order.setdefault(name, function)
        found = tuple(order.items()) if set(order) <= fields else None
    except (OSError, TypeError):  # no source to read (a compiled build of libcst)
        found = None
    _FIELDS[cls] = found
    return found


def _function_source(fn: Callable) -> str:
    """The source lines of a function, from its `def` to its last line of code (enough for the
    `visit_*` calls). `inspect.getsource` tokenizes the file for each class: 40 ms of a
    one-file run."""
    code = fn.__code__
    lines = linecache.getlines(code.co_filename)
    if not lines or not hasattr(code, "co_lines"):  # (Python 3.9 has no co_lines)
        import inspect

        return inspect.getsource(fn)
    last = max(line for _start, _end, line in code.co_lines() if line is not None)
    return "".join(lines[code.co_firstlineno - 1 : last])


def _own_hook(cls: type, name: str) -> Optional[Callable]:
    """`cls.<name>` if one of our classes defines it (libcst's bases declare no-op hooks)."""
    for c in cls.__mro__:
        if name in vars(c):
            return None if c.__module__.startswith("libcst") else vars(c)[name]
    return None


def _supported(visitor: Union[cst.CSTVisitor, cst.CSTTransformer]) -> bool:
    """No `visit_<Node>_<field>` / `leave_<Node>_<field>` / attribute hooks of our own."""
    cls = type(visitor)
    plain = _PLAIN.get(cls)
    if plain is None:
        own = [vars(c) for c in cls.__mro__ if not c.__module__.startswith("libcst")]
        plain = not any(
            name in ("on_visit_attribute", "on_leave_attribute") or _FIELD_HOOK_RE.match(name)
            for names in own
            for name in names
        )
        _PLAIN[cls] = plain
    return plain


class _Hooks:
    """How to call one visitor: its own `visit_X`/`leave_X` straight away when it keeps
    libcst's `on_visit`/`on_leave` (which only look those up), else its `on_visit`/`on_leave`.
    `plans`: per node class, what a walk needs of it (shared by every visitor of that class).
    A direct visitor (or one whose on_visit/on_leave ignore them: _blind_to_layout) with no
    hook for any layout class (whitespace, comments, one-token nodes: _LAYOUT_BASES) is not walked through the fields that hold only those (_code_fields): nothing of
    it would be called there, and they are about two thirds of a tree's nodes."""

    def __init__(self, visitor: Any, base: Any) -> None:
        self.visitor = visitor
        self.cls: Any = type(visitor)
        self.direct = self.cls.on_visit is base.on_visit and self.cls.on_leave is base.on_leave
        plans = _PLANS.get(self.cls)
        if plans is None:
            plans = _PLANS[self.cls] = {}
        self.plans: Dict[type, _Plan] = plans
        self.code_only = (self.direct or _blind_to_layout(self.cls)) and not _hooks_layout(self.cls)

    def plan(self, node_cls: type) -> "_Plan":
        """(its field names or None when libcst must visit it, its fields with how libcst
        visits each, visit_<Node>, leave_<Node>)."""
        fields = _child_fields(node_cls)
        if fields is not None and self.code_only:
            fields = _code_fields(node_cls, fields)
        visit, leave = hooks_of(self.cls, node_cls)
        found = self.plans[node_cls] = (None if fields is None else tuple(n for n, _ in fields), fields, visit, leave)
        return found


# Layout: the nodes that hold no code, only how it is written: whitespace, comments, newlines,
# and the one-token nodes (operators, commas, dots, colons, `=`, brackets), whose only children
# are whitespace. A walk for a visitor with no hook on any of them need not enter them.
_LAYOUT_BASES: Tuple[type, ...] = (
    cst.BaseParenthesizableWhitespace, cst.TrailingWhitespace, cst.EmptyLine, cst.Newline, cst.Comment,
    cst.BaseUnaryOp, cst.BaseBooleanOp, cst.BaseBinaryOp, cst.BaseCompOp, cst.BaseAugOp,
    cst.Semicolon, cst.Colon, cst.Comma, cst.Dot, cst.AssignEqual,
    cst.LeftParen, cst.RightParen, cst.LeftSquareBracket, cst.RightSquareBracket,
    cst.LeftCurlyBrace, cst.RightCurlyBrace,
)
_LAYOUT_SET = frozenset(_LAYOUT_BASES)


def _is_layout_class(cls: type) -> bool:
    """issubclass(cls, _LAYOUT_BASES), read from its MRO: most of those bases are ABCs, whose
    subclass checks cache every class asked about in each base and its subclasses (asking it of
    libcst's classes at import took 4 MB of every process)."""
    return any(base in _LAYOUT_SET for base in cls.__mro__)


_LAYOUT_NAMES = frozenset(
    c.__name__ for c in vars(cst).values() if isinstance(c, type) and _is_layout_class(c))
_CODE_FIELDS: Dict[type, Tuple[Tuple[str, str], ...]] = {}
_HOOKS_LAYOUT: Dict[type, bool] = {}


def _blind_to_layout(visitor_cls: type) -> bool:
    """Whether a visitor with its own `on_visit`/`on_leave` does nothing in them for a layout
    node: it says so with `LAYOUT_UNSEEN = True` in the class that overrides one of them last
    (or a class derived from it); a class that overrides them without saying so sees layout."""
    for c in visitor_cls.__mro__:
        names = vars(c)
        if "LAYOUT_UNSEEN" in names:
            return bool(names["LAYOUT_UNSEEN"])
        if "on_visit" in names or "on_leave" in names:
            return False
    return False


def _hooks_layout(visitor_cls: type) -> bool:
    """Whether one of our classes in `visitor_cls`'s bases defines a hook for a layout class."""
    found = _HOOKS_LAYOUT.get(visitor_cls)
    if found is None:
        found = _HOOKS_LAYOUT[visitor_cls] = any(
            _own_hook(visitor_cls, f"{hook}_{name}") is not None for name in _LAYOUT_NAMES for hook in ("visit", "leave"))
    return found


def _code_fields(node_cls: type, fields: Tuple[Tuple[str, str], ...]) -> Tuple[Tuple[str, str], ...]:
    """`fields` less those whose declared type holds layout nodes only (`Arg.comma`,
    `Name.lpar`, `Call.whitespace_after_func`, `ComparisonTarget.operator`); all of them when
    the types cannot be read."""
    found = _CODE_FIELDS.get(node_cls)
    if found is None:
        try:
            hints = typing.get_type_hints(node_cls)
            found = tuple((name, how) for name, how in fields if not _layout_only(hints[name]))
        except Exception:  # (an annotation that cannot be resolved: walk every field)
            found = fields
        _CODE_FIELDS[node_cls] = found
    return found


def _layout_only(hint: Any) -> bool:
    """Whether a field of type `hint` can hold nodes, all of them layout (MaybeSentinel, None
    and other values are no nodes)."""
    nodes: List[type] = []
    stack = [hint]
    while stack:
        t = stack.pop()
        if isinstance(t, type):
            if cst.CSTNode in t.__mro__:  # (not issubclass: an ABC, see _is_layout_class)
                nodes.append(t)
            continue
        args = typing.get_args(t)
        if not args:
            return False  # (not a class nor a Union/Sequence/Optional of them: unknown)
        stack.extend(args)
    return bool(nodes) and all(_is_layout_class(t) for t in nodes)


_Plan = Tuple[Optional[Tuple[str, ...]], Optional[Tuple[Tuple[str, str], ...]], Optional[Callable], Optional[Callable]]
_PLANS: Dict[type, Dict[type, _Plan]] = {}  # visitor class -> node class -> plan


def hooks_of(visitor_cls: type, node_cls: type) -> Tuple[Optional[Callable], Optional[Callable]]:
    """(visit_<Node>, leave_<Node>) of `visitor_cls` where one of our classes defines them."""
    key = (visitor_cls, node_cls)
    hooks = _HOOKS.get(key)
    if hooks is None:
        name = node_cls.__name__
        hooks = _HOOKS[key] = (_own_hook(visitor_cls, f"visit_{name}"), _own_hook(visitor_cls, f"leave_{name}"))
    return hooks


_HOOKS: Dict[Tuple[type, type], Tuple[Optional[Callable], Optional[Callable]]] = {}


def own_visit(visitor: cst.CSTVisitor, node: cst.CSTNode) -> bool:
    """What libcst's `CSTVisitor.on_visit` does (call `visit_<Node>`; go on unless it returned
    False) with the hook looked up once per pair of classes: for visitors that override
    `on_visit`, which the walks call on every node (libcst's builds a name for each)."""
    visit = hooks_of(type(visitor), type(node))[0]
    return visit is None or visit(visitor, node) is not False


def own_leave(visitor: cst.CSTVisitor, node: cst.CSTNode) -> None:
    """libcst's `CSTVisitor.on_leave` (call `leave_<Node>`), see own_visit."""
    leave = hooks_of(type(visitor), type(node))[1]
    if leave is not None:
        leave(visitor, node)


# ----------------------------------------------------------------------------- read-only


def children(node: cst.CSTNode) -> List[cst.CSTNode]:
    """`node.children`, in the same order: libcst collects them by visiting the node (which
    builds a copy of it), several times the cost of reading its fields. For the analyses that
    walk a subtree with a stack (device tests, kernel guards)."""
    node_cls = type(node)
    fields = _FIELDS.get(node_cls) or _child_fields(node_cls)
    if fields is None:
        return list(node.children)
    out: List[cst.CSTNode] = []
    for name, _how in fields:
        child = getattr(node, name)
        if _is_node(child):
            out.append(child)
        elif type(child) is tuple or type(child) is list:
            out.extend(child)
    return out


def code_children(node: cst.CSTNode) -> List[cst.CSTNode]:
    """children(node) less the layout nodes of its fields that hold only those (_code_fields:
    whitespace, comments, commas, operators, brackets): for the analyses that look for code
    (names, calls, tests, statements), about a third of the nodes to go through."""
    node_cls = type(node)
    fields = _CODE_FIELDS.get(node_cls)
    if fields is None:
        every = _FIELDS.get(node_cls) or _child_fields(node_cls)
        if every is None:
            return list(node.children)
        fields = _code_fields(node_cls, every)
    # (children's loop, written out again: a shared helper's extra call per node made the stack
    # walks 10-15% slower, 3.0 -> 3.4 ms over modeling_bert.py's 10,560 code nodes)
    out: List[cst.CSTNode] = []
    for name, _how in fields:
        child = getattr(node, name)
        if _is_node(child):
            out.append(child)
        elif type(child) is tuple or type(child) is list:
            out.extend(child)
    return out


def subtree(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """`node` and every node of code under it (depth first, each child's subtree from the last
    child back; no layout: code_children): for the analyses that only ask whether something is
    there."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(code_children(n))


def walk(node: cst.CSTNode, visitor: cst.CSTVisitor) -> None:
    """`node.visit(visitor)` for a read-only visitor, without copying the tree."""
    if type(node) is cst.Module:
        work.count("walk")
    if not isinstance(visitor, cst.CSTVisitor) or not _supported(visitor):
        node.visit(visitor)
        return
    _walk(node, _Hooks(visitor, cst.CSTVisitor))


def _walk(root: cst.CSTNode, hooks: _Hooks) -> None:
    # One closure per walk: the visitor, its plans and the node-type cache are local names, and a
    # node costs one dict lookup for its plan (this loop runs for every node of every tree).
    plans, visitor, direct, is_node = hooks.plans, hooks.visitor, hooks.direct, _IS_NODE

    def go(node: cst.CSTNode) -> None:
        node_cls = type(node)
        plan = plans.get(node_cls) or hooks.plan(node_cls)
        names = plan[0]
        if names is None:
            node.visit(visitor)
            return
        if direct:
            visit = plan[2]
            go_on = visit is None or visit(visitor, node) is not False
        else:
            go_on = visitor.on_visit(node)
        if go_on:
            for name in names:
                child = getattr(node, name)
                kind = type(child)
                if kind is tuple or kind is list:
                    for item in child:
                        go(item)
                else:
                    known = is_node.get(kind)
                    if known is None:
                        known = _is_node(child)
                    if known:
                        go(child)
        if not direct:
            visitor.on_leave(node)
        elif plan[3] is not None:
            plan[3](visitor, node)

    try:
        go(root)
    finally:
        # `go` refers to itself through its closure: a reference cycle that would hold the
        # visitor (and its Context, the whole tree) until a full gc; break it now.
        go = None  # type: ignore[assignment]


# ----------------------------------------------------------------------------- transforming


def transform(node: cst.CSTNode, transformer: cst.CSTTransformer) -> Any:
    """`node.visit(transformer)`, rebuilding only the nodes whose children changed."""
    if type(node) is cst.Module:
        work.count("transform")
    if not isinstance(transformer, cst.CSTTransformer) or not _supported(transformer):
        return node.visit(transformer)
    return _transform(node, _Hooks(transformer, cst.CSTTransformer))


def _transform(root: cst.CSTNode, hooks: _Hooks) -> Any:
    # As _walk: one closure per transform, one dict lookup per node for its plan.
    plans, visitor, direct, is_node = hooks.plans, hooks.visitor, hooks.direct, _IS_NODE

    def go(node: cst.CSTNode) -> Any:
        node_cls = type(node)
        plan = plans.get(node_cls) or hooks.plan(node_cls)
        fields = plan[1]
        if fields is None:
            return node.visit(visitor)
        if direct:
            visit = plan[2]
            go_on = visit is None or visit(visitor, node) is not False
        else:
            go_on = visitor.on_visit(node)
        updated = node
        if go_on:
            changes: Optional[Dict[str, Any]] = None
            for name, how in fields:
                value = getattr(node, name)
                kind = type(value)
                if kind is tuple or kind is list:
                    new = many(value, how == "visit_body_sequence")
                else:
                    known = is_node.get(kind)
                    if known is None:
                        known = _is_node(value)
                    if not known:  # None, MaybeSentinel: nothing to visit
                        continue
                    new = one(value, how)
                if new is not value:
                    if changes is None:
                        changes = {}
                    changes[name] = new
            if changes:
                updated = node.with_changes(**changes)
        if direct:
            leave = plan[3]
            result = updated if leave is None else leave(visitor, node, updated)
        else:
            result = visitor.on_leave(node, updated)
        if result is not updated and not _is_node(result) and not isinstance(
                result, (cst.RemovalSentinel, cst.FlattenSentinel)):
            raise cst.CSTValidationError(
                "Expected a node of type CSTNode or a RemovalSentinel, "
                + f"but got a return value of {type(result).__name__}"
            )
        return result

    def one(child: cst.CSTNode, how: str) -> Any:
        new = go(child)
        if new is child or _is_node(new):
            return new
        if isinstance(new, cst.RemovalSentinel):
            if how == "visit_optional":
                return None
            if how == "visit_sentinel":
                return cst.MaybeSentinel.DEFAULT
        if isinstance(new, (cst.RemovalSentinel, cst.FlattenSentinel)):
            raise TypeError(
                f"We got a {type(new).__name__} while visiting a {type(child).__name__}. This "
                "node's parent does not allow it to be removed or replaced with a sequence."
            )
        return new

    def many(children: Any, body: bool) -> Any:
        """A sequence field: the original sequence when nothing in it changed, else a tuple (as
        libcst's `visit_sequence` / `visit_body_sequence` build it)."""
        out: Optional[List[cst.CSTNode]] = None
        for i, child in enumerate(children):
            new = go(child)
            if new is child:
                if out is not None:
                    out.append(new)
                continue
            if out is None:
                out = list(children[:i])
            if isinstance(new, cst.RemovalSentinel):
                continue
            items = list(new) if isinstance(new, cst.FlattenSentinel) else [new]
            for item in items:
                # A statement line emptied by removals is dropped (visit_body_iterable).
                if body and not child._is_removable() and item._is_removable():
                    continue
                out.append(item)
        return tuple(out) if out is not None else children

    try:
        return go(root)
    finally:
        go = one = many = None  # type: ignore[assignment]  # the closures' reference cycle (see _walk)
