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


def _migrated(module: cst.Module) -> cst.Module:
    """`module` as a pass leaves it: an import added after its first statement, a statement in the
    middle made anew (a copy: no longer the file's object), the others the file's own."""
    body = list(module.body)
    middle = len(body) // 2
    if body:
        body[middle] = body[middle].deep_clone()
    for i, stmt in enumerate(body):  # (and the last statement of the first class or function's body)
        if i != middle and isinstance(stmt, (cst.ClassDef, cst.FunctionDef)) and isinstance(stmt.body, cst.IndentedBlock):
            inner = list(stmt.body.body)
            inner[-1] = inner[-1].deep_clone()
            body[i] = stmt.with_changes(body=stmt.body.with_changes(body=inner))
            break
    body.insert(1 if body else 0, cst.parse_statement("import torch_npu\n"))
    return module.with_changes(body=body)


def test_a_migrated_tree_takes_the_statements_it_shares_from_the_files():
    """The migrated tree's code and positions (engine: Context.finish, code_of) are generated only
    for the statements it does not share with the file's tree (`base`): the same code and ranges
    as a whole generation, PositionProvider's; a node of a shared statement (its range is not
    generated) makes the generation whole."""
    for newline in ("\n", "\r\n"):
        text = ("import tensorflow as tf\n" + "".join(f"x{i} = tf.constant({i})\n" for i in range(100))
                + "def f(a):\n    return tf.Session(config=a)\n" + "y = f(x0)").replace("\n", newline)
        module = cst.parse_module(text)
        call = module.body[101].body.body[0].body[0].value  # (tf.Session(...) of the file's tree)
        base = NodePositions(module, [call])
        assert base.get(call) == CodeRange((103, 11), (103, 31)) and base.code == text
        migrated = _migrated(module)
        added, copied = migrated.body[1], migrated.body[52]  # (`x50 = ...`, a copy)
        spliced = NodePositions(migrated, [added, copied], base=base)
        whole = NodePositions(migrated, [added, copied])
        reference = _reference(migrated)
        assert spliced.code == whole.code == migrated.code
        assert spliced.get(added) == whole.get(added) == reference[added] == CodeRange((2, 0), (2, 16))
        assert spliced.get(copied) == whole.get(copied) == reference[copied] == CodeRange((53, 0), (53, 21))
        # (tokens: the three statements', and two for each of the 101 shared: its text, its newline)
        assert len(spliced._offsets) < 300 and len(whole._offsets) > 1900
        shared = migrated.body[-1]  # (the file's `y = f(x0)`: its range only a whole generation gives)
        again = NodePositions(migrated, [added, shared], base=base)
        assert again.get(shared) == reference[shared] == CodeRange((105, 0), (105, 9)) and again.code == migrated.code
        assert len(again._offsets) > 1900
    # the same statements in a module of another default newline (the last base's is "\r\n"):
    # their text is not the base's, so nothing is taken from it
    other = cst.parse_module("x = 1\n").with_changes(body=module.body, has_trailing_newline=False)
    assert NodePositions(other, [], base=base).code == other.code == text.replace("\r\n", "\n") != base.code


@pytest.mark.parametrize("text", list(_sources()))
@pytest.mark.slow
def test_a_migrated_tree_has_the_ranges_and_code_of_a_whole_generation(text):
    module = cst.parse_module(text)
    collector = _AllNodes()
    module.visit(collector)
    base = NodePositions(module, random.Random(len(text)).sample(collector.nodes, min(5, len(collector.nodes))),
                         nested=True)
    migrated = _migrated(module)
    reference = _reference(migrated)
    collector = _AllNodes()
    migrated.visit(collector)
    made = {id(migrated.body[1 if module.body else 0])}  # (the import, and the copy: _migrated)
    if module.body:
        made.add(id(migrated.body[len(module.body) // 2 + (len(module.body) // 2 >= 1)]))
    own = {id(stmt) for stmt in module.body}
    made.update(id(stmt.body.body[-1]) for stmt in migrated.body  # (the definition's copied statement)
                if id(stmt) not in own and isinstance(stmt, (cst.ClassDef, cst.FunctionDef))
                and isinstance(stmt.body, cst.IndentedBlock))
    chosen = []
    for node in collector.nodes:  # (the two statements and the nodes in them)
        if id(node) in made:
            inside = _AllNodes()
            node.visit(inside)
            chosen += inside.nodes
    spliced = NodePositions(migrated, chosen, base=base)
    assert spliced.code == migrated.code
    for node in chosen:
        assert spliced.get(node) == reference.get(node), (type(node).__name__, migrated.code_for_node(node))


def test_a_changed_class_takes_its_other_methods_from_the_files_tree():
    """A rewrite in one method of a big class (tensorforce's `class Model`): with `nested`, the
    file's generation keeps the text of the statements of its classes' and functions' bodies,
    and the migrated tree generates the method that changed, not the others; a statement taken
    where it stands at another indentation is generated."""
    methods = "".join(f"    def m{i}(self, x):\n        y = tf.add(x, {i})\n        return y\n\n" for i in range(60))
    text = "import tensorflow as tf\n\n\nclass Model(object):\n" + methods + "    def run(self):\n        return tf.Session()\n"
    module = cst.parse_module(text)
    base = NodePositions(module, [module.body[0]], nested=True)
    assert base.code == text
    cls = module.body[1]
    run = cls.body.body[-1]
    new_run = run.with_changes(body=run.body.with_changes(body=[cst.parse_statement("return tf.Session(config=c)\n")]))
    migrated = module.with_changes(body=[module.body[0], cst.parse_statement("import npu_bridge\n"),
                                         cls.with_changes(body=cls.body.with_changes(body=[*cls.body.body[:-1], new_run]))])
    added, call = migrated.body[1], new_run.body.body[0]
    spliced = NodePositions(migrated, [added, call], base=base)
    whole = NodePositions(migrated, [added, call])
    reference = _reference(migrated)
    assert spliced.code == whole.code == migrated.code
    assert spliced.get(added) == whole.get(added) == reference[added] == CodeRange((2, 0), (2, 17))
    assert spliced.get(call) == whole.get(call) == reference[call] == CodeRange((247, 8), (247, 35))
    assert len(spliced._offsets) < 200 and len(whole._offsets) > 2000  # (two tokens for each of the 60 methods)
    assert len(NodePositions(migrated, [added, call], base=NodePositions(module, [module.body[0]]))._offsets) > 2000
    # two methods moved into a class inside the class: another indentation, generated again
    inner = cst.ClassDef(name=cst.Name("Inner"), body=cst.IndentedBlock(body=cls.body.body[:2]))
    moved = module.with_changes(body=[module.body[0], cls.with_changes(body=cls.body.with_changes(body=[
        inner, *cls.body.body[2:]]))])
    assert NodePositions(moved, [], base=base).code == moved.code != text
