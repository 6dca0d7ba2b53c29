"""Parsing a long module in pieces (pieces.py) gives libcst's tree of the whole text: the same
nodes, the same lines owned by each, the same module attributes -- on every fixture and on the
shapes where the lines between statements could go elsewhere, cut before every statement."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from npu_migrate import pieces
from npu_migrate.partial import partial_text, statement_filter
from npu_migrate.rules import default_rules
from npu_migrate.safe_parse import python_verdict

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def assert_same_tree(module: cst.Module, text: str) -> None:
    whole = cst.parse_module(text)
    assert module.deep_equals(whole)
    assert module.code == text
    for name in ("encoding", "default_indent", "default_newline", "has_trailing_newline"):
        assert getattr(module, name) == getattr(whole, name), name
    for name in ("body", "header", "footer"):  # (deep_equals compares the items, not the sequences)
        assert type(getattr(module, name)) is type(getattr(whole, name)), name
    for ours, its in zip(module.body, whole.body):
        assert type(ours.leading_lines) is type(its.leading_lines)


def in_pieces(text: str, runs=()) -> cst.Module:
    return pieces.parse(text, pieces.cuts(text, python_verdict(text).tree, runs))


SHAPES = [
    # comments and blank lines between statements, some indented as the block before them
    "import os\n# one\n\n# two\nx = 1\n",
    "def f():\n    pass\n    # the block's own\n\n# the next statement's\n\ndef g():\n    return 1\n",
    "class A:\n    def f(self):\n        pass\n        # deepest\n    # the class's\n# the module's\nY = 2\n",
    "if x:\n    pass\n        # over-indented\n\n\n\nelse_ = 3\n",
    # decorators, one-line compound statements, several statements on a line, continuations
    "@dec\n# between\n@other(1)\ndef f():\n    pass\n@dec\nclass B: pass\n",
    "a = 1; b = 2\nc = (1,\n     2)\nd = 3 \\\n    + 4\nif a: b = 5\nelse: b = 6\n",
    "try:\n    import torch\nexcept ImportError:\n    torch = None\nfinally:\n    pass\nwhile False:\n    break\n",
    # the first indent is in a later piece; tabs; CRLF; no newline at the end; a coding line
    "import os\nimport sys\nx = 1\ndef f():\n\treturn 1\ndef g():\n\treturn 2\n",
    "import os\r\n\r\ndef f():\r\n    return 1\r\n# end\r\n",
    "# -*- coding: utf-8 -*-\n\"\"\"Doc.\"\"\"\nimport os\nx = 1",
    "x = 1\ny = 2\n\n\n# trailing comment\n\n",
    # a string statement that spans lines, a form feed, async and match statements
    "s = '''\ncode = 1\n'''\n\x0c\ndef f():\n    pass\nasync def g():\n    await f()\n",
    "match x:\n    case 1:\n        pass\n    case _:\n        pass\ny = 2\n",
    # cut inside the body of a top-level class or function: comments at every indent between
    # its statements, decorators, nested blocks, one-line bodies (not cut), async bodies
    "class A:\n    x = 1\n    # c\n\n    def f(self):\n        pass\n        # deep\n    # mid\n# top\n    y = 2\nz = 3\n",
    "class A(\n    Base,\n):\n    \"\"\"Doc.\"\"\"\n\n    @property\n    # c\n    def f(self):\n        return 1\n\n    class B:\n"
    "        pass\n    \n  # odd\n\t\n    z = [\n1]\n",
    "def f(x):\n    y = x\n    if y:\n        return 1\n    # c\n    for i in y:\n        yield i\n    return 2\n\n\n"
    "async def g():\n    await f()\n    async with a:\n        pass\n    return 3\n",
    "class A: x = 1\nclass B:\n    pass\ndef f(): return 1\ndef g(x): y = x; return y\n",
    "@decorator\nclass A:\n    a = 1; b = 2\n    c = 3\n    # last\n\n# after\n",
    "if True:\n    x = 1\n    y = 2\nclass A:\n    x = 1\n    y = 2\n",
    # pieces that disagree on the indent or the newline: parsed whole
    "def f():\n    return 1\ndef g():\n  return 2\n",
    "x = 1\r\ny = 2\nz = 3\n",
]


@pytest.mark.parametrize("text", SHAPES)
def test_a_module_cut_wherever_it_may_be_is_the_whole_texts_tree(text, monkeypatch):
    monkeypatch.setattr(pieces, "PIECE", 1)
    assert_same_tree(in_pieces(text), text)


def test_cuts_are_at_statements_of_the_module_and_of_top_level_bodies_with_only_empty_lines_before():
    text = (
        "import os\n"  # 1
        "x = 1; y = 2\n"  # 2: cut
        "\n"
        "# owned by f\n"
        "def f():\n"  # 5: a comment before: no cut
        "    a = 1\n"
        "\n"
        "    b = 2\n"  # 8: cut, in f's body
        "    c = [\n"  # 9: cut
        "        3]\n"
        "  \n"
        "    d = 4\n"  # 12: a line of spaces before: no cut
        "\n"
        "\n"
        "class A: z = 5\n"  # 15: cut (its body is on its line: none in it)
        "async def g():\n"  # 16: cut
        "    await f()\n"
        "    return 6\n"  # 18: cut, in g's body
    )
    lines = text.splitlines(keepends=True)
    starts = [sum(map(len, lines[:n])) for n in range(len(lines))]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pieces, "PIECE", 1)
        cuts = pieces.cuts(text, python_verdict(text).tree)
        assert [(starts.index(at) + 1, header) for at, header in cuts] == [
            (2, ""), (8, "def _():\n"), (9, "def _():\n"), (15, ""), (16, ""), (18, "async def _():\n")]
        assert_same_tree(pieces.parse(text, cuts), text)
    # why not after a line of spaces or a comment at another indent: a piece ending there loses it
    for tail in ("\n\n  \n", "\n\n  # the next statement's\n"):
        assert cst.parse_module("def f():\n    pass" + tail).code != "def f():\n    pass" + tail


def test_every_fixture_cut_into_short_pieces_is_the_whole_texts_tree(monkeypatch):
    monkeypatch.setattr(pieces, "PIECE", 300)  # (1, before every statement: 11 s, over a fast test's 2)
    checked = 0
    for path in sorted(FIXTURES.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if ".expected" in path.name or len(text) < 3000 or python_verdict(text).tree is None:
            continue
        assert_same_tree(in_pieces(text), text)
        checked += 1
    assert checked >= 8


def test_a_partial_text_is_cut_only_where_a_statement_starts_outside_a_placeholder(monkeypatch):
    monkeypatch.setattr(pieces, "PIECE", 1)
    text = (
        "import torch\n"
        "\n"
        "def helper(x):\n"
        "    return x + 1\n"
        "\n"
        "\n"
        "# moves the model\n"
        "def to_device(model):\n"
        "    return model.cuda()\n"
        "HELPER = 2\n"
        "VALUE = 3\n"
        "def last(model):\n"
        "    return model.cuda()\n"
    )
    tree = python_verdict(text).tree
    partial = partial_text(text, tree, statement_filter(default_rules()))
    assert partial is not None and partial.runs == [(1, 4, ""), (9, 11, "")]  # (lines 2-4 and 10-11)
    cuts = pieces.cuts(partial.text, tree, partial.runs)
    lines = partial.text.splitlines(keepends=True)
    starts = [sum(map(len, lines[:n])) for n in range(len(lines))]
    # before the placeholder of HELPER and VALUE (10) and def last (12); not inside a
    # placeholder (lines 3 and 11 start statements of the file, left out), nor after a comment (8)
    assert [(starts.index(at) + 1, header) for at, header in cuts] == [(10, ""), (12, "")]
    assert_same_tree(pieces.parse(partial.text, cuts), partial.text)


def test_a_short_text_is_not_cut_and_pieces_are_piece_long():
    text = "import torch\n" + "x = torch.ones(1)\n" * 100
    assert len(text) < 2 * pieces.PIECE and pieces.cuts(text, python_verdict(text).tree) == []
    long = text * 5
    cuts = [at for at, _ in pieces.cuts(long, python_verdict(long).tree)]
    assert cuts and all(b - a >= pieces.PIECE for a, b in zip([0, *cuts], [*cuts, len(long)]))


def test_a_piece_libcst_refuses_makes_it_parse_the_whole_text():
    text = "x = 1\ny = 2\n"
    with pytest.raises(cst.ParserSyntaxError):  # the whole text's error, not a piece's
        pieces.parse(text + "def (\n", [(len(text), "")])
    assert_same_tree(pieces.parse(text, [(len("x = 1\n"), "")]), text)
