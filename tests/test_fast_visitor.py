"""walk.walk / walk.transform must make exactly libcst's visitor calls, in the same order, and
give the same result; they only skip building copies of unchanged nodes."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from npu_migrate.fast_visitor import transform, walk

ROOT = Path(__file__).resolve().parent.parent
# Real code: the fixtures (every kind of statement the rules meet). Not the package's own source:
# each new module of it would add a test of libcst's visitor order, not of ours.
SOURCES = sorted((ROOT / "fixtures").rglob("*.py"))
EXTRA = [
    "from a import *\nfrom b import (c, d as e)\nimport f.g as h, i\n",
    "x = f'{a!r:>{w}}' + f'{b}'\nmatch p:\n    case [1, *rest] if rest:\n        pass\n",
    "@d\nasync def f(a, /, b=1, *c, d, **e) -> int:\n    async with x as y, z:\n        yield await y\n",
    "try:\n    pass\nexcept* E as e:\n    raise\nfinally:\n    del a[1:2, ::3]\n",
    "lambda: (yield)\nglobal a; nonlocal b\nx: int = 1\nwhile a: break\nelse: pass\n",
]


def _texts():
    for path in SOURCES:
        yield pytest.param(path.read_text(encoding="utf-8"), id=str(path.relative_to(ROOT)))
    for i, text in enumerate(EXTRA):
        yield pytest.param(text, id=f"extra-{i}")


class RecordingVisitor(cst.CSTVisitor):
    """Overrides on_visit/on_leave: the general path."""

    def __init__(self) -> None:
        super().__init__()
        self.log = []

    def on_visit(self, node):
        self.log.append(("visit", id(node)))
        return not isinstance(node, cst.Lambda)  # skipping children must work too

    def on_leave(self, node):
        self.log.append(("leave", id(node)))


class NameVisitor(cst.CSTVisitor):
    """Only visit_X/leave_X: the direct-dispatch path."""

    def __init__(self) -> None:
        super().__init__()
        self.log = []

    def visit_Name(self, node):
        self.log.append(("name", node.value))

    def visit_FunctionDef(self, node):
        self.log.append(("def", node.name.value))
        return False

    def leave_Call(self, node):
        self.log.append(("call", id(node)))


class Renamer(cst.CSTTransformer):
    """Renames, removes statements and flattens, like a real codemod."""

    def __init__(self) -> None:
        super().__init__()
        self.log = []

    def visit_Attribute(self, node):
        self.log.append(("attr", id(node)))

    def leave_Name(self, original, updated):
        self.log.append(("name", id(original), updated is original))
        return updated.with_changes(value="renamed") if updated.value == "cuda" else updated

    def leave_Pass(self, original, updated):
        return cst.RemoveFromParent()

    def leave_Expr(self, original, updated):
        if isinstance(updated.value, cst.Ellipsis):
            return cst.FlattenSentinel([updated, updated])
        return updated


class RecordingTransformer(cst.CSTTransformer):
    def __init__(self) -> None:
        super().__init__()
        self.log = []

    def on_visit(self, node):
        self.log.append(("visit", id(node)))
        return True

    def on_leave(self, original, updated):
        self.log.append(("leave", id(original), type(updated).__name__))
        return updated


@pytest.mark.parametrize("text", list(_texts()))
@pytest.mark.slow
def test_same_calls_and_result_as_libcst(text):
    module = cst.parse_module(text)
    for make in (RecordingVisitor, NameVisitor):
        theirs, ours = make(), make()
        module.visit(theirs)
        walk(module, ours)
        assert ours.log == theirs.log
    for make in (Renamer, RecordingTransformer):
        theirs, ours = make(), make()
        expected = module.visit(theirs)
        got = transform(module, ours)
        assert got.code == expected.code
        # `updated is original` may differ (ours does not copy unchanged nodes): compare ids.
        assert [entry[:2] for entry in ours.log] == [entry[:2] for entry in theirs.log]


def test_unchanged_tree_is_not_copied():
    module = cst.parse_module("import torch\nx = torch.zeros(2).float()\n")
    assert transform(module, RecordingTransformer()) is module
    changed = transform(cst.parse_module("a = cuda\nb = 1\n"), Renamer())
    assert changed.code == "a = renamed\nb = 1\n"


def test_visitors_with_field_hooks_use_libcst():
    class FieldHook(cst.CSTVisitor):
        def __init__(self) -> None:
            super().__init__()
            self.seen = []

        def visit_Call_func(self, node):
            self.seen.append(node.func.value)

    visitor = FieldHook()
    walk(cst.parse_module("f(1)\ng(2)\n"), visitor)
    assert visitor.seen == ["f", "g"]


def test_child_order_is_read_like_inspect_reads_it():
    """walk._function_source (cheap) finds the same `visit_*` calls as inspect.getsource."""
    import inspect

    from npu_migrate.fast_visitor import _CALL_RE, _function_source

    classes = [c for c in vars(cst).values()
               if isinstance(c, type) and issubclass(c, cst.CSTNode) and c is not cst.CSTNode]
    assert len(classes) > 150
    for cls in classes:
        method = cls._visit_and_replace_children
        assert _CALL_RE.findall(_function_source(method)) == _CALL_RE.findall(inspect.getsource(method)), cls


@pytest.mark.slow
def test_children_are_libcsts_children_in_order():
    from npu_migrate.fast_visitor import children

    seen = 0
    for path in sorted((Path(__file__).resolve().parent.parent / "fixtures").rglob("*.py"))[:40]:
        stack = [cst.parse_module(path.read_text(encoding="utf-8"))]
        while stack:
            node = stack.pop()
            found = children(node)
            assert found == list(node.children) and all(a is b for a, b in zip(found, node.children)), type(node)
            stack.extend(found)
            seen += 1
    assert seen > 10_000


class CommaCounter(cst.CSTVisitor):
    """A direct visitor with a hook on a layout node: it is walked through every field."""

    def __init__(self) -> None:
        super().__init__()
        self.log = []

    def visit_Comma(self, node):
        self.log.append(("comma", id(node)))

    def leave_Name(self, node):
        self.log.append(("name", id(node)))


class CodeOnly(RecordingVisitor):
    """Its on_visit/on_leave say they ignore layout (fast_visitor._blind_to_layout)."""

    LAYOUT_UNSEEN = True


class SeesLayout(CodeOnly):
    """Overrides on_visit again without saying so: it sees layout again."""

    def on_visit(self, node):
        return super().on_visit(node)


@pytest.mark.parametrize("text", list(_texts())[:6] + list(_texts())[-len(EXTRA):])
def test_walks_leave_out_layout_only_for_visitors_that_cannot_see_it(text):
    """Whitespace, comments and one-token nodes (two thirds of a tree) are not walked for a
    visitor that has no hook on them: the same calls as libcst's for every other node, in the
    same order; a visitor with a layout hook, or its own on_visit, still gets them all."""
    from npu_migrate.fast_visitor import _LAYOUT_BASES

    module = cst.parse_module(text)
    theirs, ours = RecordingVisitor(), CodeOnly()
    module.visit(theirs)
    walk(module, ours)
    nodes = {id(n): n for n in _all_nodes(module)}
    code = [entry for entry in theirs.log if not isinstance(nodes[entry[1]], _LAYOUT_BASES)]
    assert ours.log == code
    if text.strip():
        assert len(code) < len(theirs.log)  # (fails if nothing is left out)
    for make in (CommaCounter, SeesLayout):
        theirs, ours = make(), make()
        module.visit(theirs)
        walk(module, ours)
        assert ours.log == theirs.log


def _all_nodes(node):
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(n.children)


@pytest.mark.slow
def test_fields_left_out_of_walks_hold_only_layout():
    """fast_visitor._code_fields reads libcst's annotations: on real code, what the fields it
    leaves out hold is layout and nothing else, and code_children is children less those."""
    from npu_migrate.fast_visitor import _LAYOUT_BASES, _child_fields, _code_fields, children, code_children

    left_out = 0
    for path in SOURCES[:60]:
        for node in _all_nodes(cst.parse_module(path.read_text(encoding="utf-8"))):
            fields = _child_fields(type(node))
            kept = {name for name, _ in _code_fields(type(node), fields)}
            for name, _ in fields:
                if name in kept:
                    continue
                value = getattr(node, name)
                for held in (value if isinstance(value, (list, tuple)) else [value]):
                    if isinstance(held, cst.CSTNode):
                        assert all(isinstance(n, _LAYOUT_BASES) for n in _all_nodes(held)), (type(node), name)
                        left_out += 1
            assert code_children(node) == [c for c in children(node) if not isinstance(c, _LAYOUT_BASES)], type(node)
    assert left_out > 10_000


@pytest.mark.slow
def test_telling_layout_classes_fills_no_abc_cache():
    """fast_visitor tells layout classes by their MRO: issubclass() against libcst's abstract
    bases (ABCs) cached every class it was asked about in each base and its subclasses, 4 MB
    of every process (each worker's RSS) from the import on."""
    import subprocess
    import sys

    code = (
        "import _abc, libcst as cst\n"
        "from npu_migrate import fast_visitor as fv\n"
        "for c in vars(cst).values():\n"
        "    if isinstance(c, type) and cst.CSTNode in c.__mro__ and fv._child_fields(c):\n"
        "        fv._code_fields(c, fv._child_fields(c))\n"
        "bases = [b for b in fv._LAYOUT_BASES + (cst.CSTNode,) if hasattr(b, '_abc_impl')]\n"
        "print(sum(len(_abc._get_dump(b)[1]) + len(_abc._get_dump(b)[2]) for b in bases), len(bases))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout.split()
    assert out[0] == "0" and int(out[1]) > 5, out
