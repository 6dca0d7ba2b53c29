"""positions.NodePositions must give exactly libcst's PositionProvider ranges, for every node
(all-nodes mode) and for a few chosen nodes (the mode the engine uses), on real code."""

from __future__ import annotations

import random
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

from npu_migrate.positions import NodePositions

ROOT = Path(__file__).resolve().parent.parent

# Layouts that move positions around: CRLF and lone CR, tabs, backslash continuations,
# comments inside brackets, multi-line strings, decorators, semicolons, an empty file's
# trailing newline handling, a file without a final newline.
TRICKY = [
    "import torch\r\nx = torch.cuda.is_available()\r\nif x:\r\n\ty = 'cuda:0'\r\n",
    "a = 1\rb = (a +\r     2)\r",
    "x = torch \\\n    .cuda \\\n    .synchronize()\n",
    "y = (torch  # comment\n     .cuda  # another\n     .current_device())\n",
    's = """multi\nline\n"""; t = f"cuda:{i}"  ;  u = 3\n',
    "@decorator(\n    arg='cuda',\n)\nclass A(B, metaclass=M):\n    def f(self, d='cuda'):\n        return d  # trailing\n",
    "def f():\n    pass",
    "",
    "\n\n# only a comment\n",
    "try:\n    import cupy\nexcept ImportError:\n    cupy = None\nelse:\n    pass\nfinally:\n    pass\n",
    "with a as b, c as d:\n    for i in range(3):\n        while i:\n            break\n    else:\n        pass\n",
    "match x:\n    case {'device': 'cuda'}:\n        pass\n    case _:\n        pass\n",
]


class _AllNodes(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.nodes = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.nodes.append(node)
        return True


def _reference(module: cst.Module):
    return MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)


def _sources():
    yield from (pytest.param(text, id=f"tricky-{i}") for i, text in enumerate(TRICKY))
    for path in sorted((ROOT / "fixtures").rglob("*.py")):
        yield pytest.param(path.read_text(encoding="utf-8"), id=str(path.relative_to(ROOT)))


@pytest.mark.parametrize("text", list(_sources()))
@pytest.mark.slow
def test_same_ranges_as_position_provider(text):
    module = cst.parse_module(text)
    reference = _reference(module)
    collector = _AllNodes()
    module.visit(collector)
    every = NodePositions(module)
    for node in collector.nodes:
        assert every.get(node) == reference.get(node), (type(node).__name__, module.code_for_node(node))
    rng = random.Random(len(text))
    chosen = rng.sample(collector.nodes, min(15, len(collector.nodes)))
    few = NodePositions(module, chosen)
    early = NodePositions(module, chosen, code=False)  # (stops after the last of them)
    for node in chosen:
        assert few.get(node) == reference.get(node), (type(node).__name__, module.code_for_node(node))
        assert early.get(node) == reference.get(node), (type(node).__name__, module.code_for_node(node))


def test_a_node_of_another_tree_has_no_position():
    module = cst.parse_module("x = 1\n")
    stranger = cst.parse_module("y = 2\n").body[0]
    assert NodePositions(module).get(stranger) is None
    assert NodePositions(module, [stranger]).get(stranger) is None


def test_hoisted_ranges_of_a_wanted_block():
    # An IndentedBlock's range is hoisted from its first and last statements, which were
    # not asked for: they must be recorded on the way.
    module = cst.parse_module("if x:\n    a = 1\n    b = 2\nc = 3\n")
    block = module.body[0].body
    assert NodePositions(module, [block]).get(block) == CodeRange((2, 4), (3, 9))
    assert _reference(module)[block] == CodeRange((2, 4), (3, 9))


@pytest.mark.parametrize("text", list(_sources()))
@pytest.mark.slow
def test_code_is_the_modules_code(text):
    module = cst.parse_module(text)
    assert NodePositions(module).code == module.code
    assert NodePositions(module, []).code == module.code


def test_positions_without_the_code_stop_after_the_last_wanted_node():
    """A file with findings and no edit needs no code of its module (engine.py), only the
    findings' positions: the generation stops once the last wanted node (a block's, hoisted from
    its statements, too) has its range, and gives no code; with the code asked for, all of it."""
    text = "import cupy\n" + "".join(f"x{i} = f({i})\n" for i in range(200)) + "if y:\n    a = 1\n    b = 2\n"
    module = cst.parse_module(text)
    first = module.body[0]
    early = NodePositions(module, [first], code=False)
    assert early.get(first) == CodeRange((1, 0), (1, 11)) and early.code is None
    assert len(early._offsets) < 10  # tokens generated: the first line's, not the 1,400 after it
    block = module.body[-1].body
    late = NodePositions(module, [first, block], code=False)
    assert late.get(first) == CodeRange((1, 0), (1, 11)) and late.get(block) == CodeRange((203, 4), (204, 9))
    assert NodePositions(module, [first]).code == text
