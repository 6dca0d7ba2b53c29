"""Partial parsing (partial.py): libcst parses only the statements that can need work, and the
result is the same as when it parses the whole file -- byte for byte, edits, findings, errors
(on every fixture: test_speedups_change_nothing.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import libcst as cst
import pytest

from npu_migrate.dispatch import migrate_source
from npu_migrate.options import Options
from npu_migrate.partial import MARKER, partial_text, statement_filter
from npu_migrate.rules import default_rules
from npu_migrate.safe_parse import python_verdict

RULES = default_rules()
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def outcome(result):
    return (
        result.new_text,
        [(e.code, e.span, e.message, e.before, e.after) for e in result.edits],
        [(f.code, f.span, f.api, f.message, f.suggestion, f.severity) for f in result.findings],
        result.error,
        [(f.code, f.span, f.message) for f in result.unused_ignores],
        result.extra_files,
    )


def assert_same_as_whole(text: str, path: str = "train.py", options: Options = Options()):
    partial = migrate_source(text, path, options, RULES)
    whole = migrate_source(text, path, options, RULES, partial=False)
    assert outcome(partial) == outcome(whole)
    return partial


@pytest.fixture
def parsed(monkeypatch):
    """The texts libcst parses."""
    seen = []
    real = cst.parse_module

    def spy(text, *args, **kwargs):
        seen.append(text)
        return real(text, *args, **kwargs)

    monkeypatch.setattr(cst, "parse_module", spy)  # the module engine.py imports where it parses
    return seen


def partial_of(text: str) -> str:
    found = partial_text(text, python_verdict(text).tree, statement_filter(RULES))
    return found.text if found is not None else None


# ------------------------------------------------------------------------ what is left out


def test_statements_without_rule_words_become_one_string_placeholder_each_run():
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
        "\n"
        "VALUE = 3\n"
    )
    # (the comments and blank lines before a statement go with it)
    assert partial_of(text) == (
        "import torch\n"
        '"""npu-migrate-elided:2-4\n'
        "\n"
        '"""\n'
        "\n"
        "\n"
        "# moves the model\n"
        "def to_device(model):\n"
        "    return model.cuda()\n"
        '"""npu-migrate-elided:10-11\n'
        '"""\n'
    )


def test_a_class_keeps_its_header_and_the_methods_that_need_work():
    text = (
        "import torch\n"
        "class Trainer(object):\n"
        '    """Docs."""\n'
        "\n"
        "    def log(self, x):\n"
        "        print(x)\n"
        "\n"
        "    def move(self):\n"
        "        self.model.cuda()\n"
        "    def save(self):\n"
        "        pass\n"
    )
    assert partial_of(text) == (
        "import torch\n"
        "class Trainer(object):\n"
        '    """npu-migrate-elided:3-6\n'
        "\n"
        "\n"
        '"""\n'
        "\n"
        "    def move(self):\n"
        "        self.model.cuda()\n"
        '    """npu-migrate-elided:10-11\n'
        '"""\n'
    )


def test_string_statements_are_left_out_whatever_words_they_hold():
    text = (
        '"""Runs on "cuda" when torch.cuda.is_available()."""\n'
        "import torch\n"
        "def move(x):\n"
        "    '''Move x to cuda; CUDA out of memory is raised when it does not fit.'''\n"
        "    return x.cuda()\n"
    )
    assert partial_of(text) == (
        '"""npu-migrate-elided:1-1"""\n'
        "import torch\n"
        "def move(x):\n"
        '    """npu-migrate-elided:4-4"""\n'
        "    return x.cuda()\n"
    )


def test_placeholders_keep_crlf_line_endings_and_restore_gives_the_file_back():
    text = "import torch\r\ndef f():\r\n    return 1\r\nx = y.cuda()\r\n"
    found = partial_text(text, python_verdict(text).tree, statement_filter(RULES))
    assert found.text == 'import torch\r\n"""npu-migrate-elided:2-3\r\n"""\r\nx = y.cuda()\r\n'
    assert found.restore(found.text) == text


def test_restore_refuses_placeholders_that_did_not_survive():
    text = "import torch\ndef f():\n    return 1\nx = y.cuda()\n"
    found = partial_text(text, python_verdict(text).tree, statement_filter(RULES))
    lines = found.text.splitlines(keepends=True)
    assert found.restore("".join(lines[:1] + lines[3:])) is None  # removed
    assert found.restore("".join(lines[:3] + lines[1:])) is None  # doubled
    assert found.restore(found.text.replace('"""\nx', '"""  # hi\nx')) is None  # changed
    assert found.restore(found.text.replace("y.cuda()", "y.npu()")) == text.replace("y.cuda()", "y.npu()")


@pytest.mark.parametrize("text", [
    "import torch\rdef f():\r    return 1\rx = y.cuda()\r",  # lone CRs: line numbers differ
    "import torch\ndef f():\n    return 'npu-migrate-elided:1-2'\nx = y.cuda()\n",  # the marker itself
    "import torch\nx = y.cuda()\n",  # nothing to leave out
])
def test_no_partial_text(text):
    assert partial_of(text) is None


def test_imports_of_packages_the_rules_name_are_kept_and_others_left_out():
    text = (
        "import os\n"
        "import numpy as np\n"
        "def f():\n"
        "    import torch.cuda as tc\n"
        "    return 1\n"
        "def g():\n"
        "    import json\n"
        "    return 2\n"
        "def h():\n"
        "    tc.synchronize()\n"
        "    os.environ['CUDA_VISIBLE_DEVICES'] = '0'\n"
    )
    kept = [line for line in partial_of(text).splitlines() if MARKER not in line and line not in ('"""', "")]
    assert kept == [
        "import os",
        "def f():",
        "    import torch.cuda as tc",
        "def h():",
        "    tc.synchronize()",
        "    os.environ['CUDA_VISIBLE_DEVICES'] = '0'",
    ]


# --------------------------------------------------------------- same result as a whole parse


def test_a_large_file_is_parsed_partially_with_the_same_result(parsed):
    helpers = "".join(f"def helper_{i}(x):\n    return x * {i}\n\n\n" for i in range(200))
    text = f"import torch\n\n\n{helpers}def main():\n    model = Net().cuda()\n    torch.cuda.synchronize()\n"
    result = assert_same_as_whole(text)
    assert [e.code for e in result.edits] == ["NPU108", "NPU101", "NPU102"]
    partial = parsed[0]
    assert MARKER in partial and "helper_" not in partial


@pytest.mark.parametrize("text", [
    # aliases: the use does not hold the rule's word
    "import torch.cuda as tc\ndef f():\n    pass\ndef g():\n    tc.synchronize()\n",
    "from torch.cuda import get_arch_list as arch\ndef f():\n    pass\ndef g():\n    return arch()\n",
    "import torch.nn as tnn\ndef f():\n    pass\ndef g():\n    return tnn.DataParallel(m)\n",
    "from torch import cuda as C\ndef f():\n    pass\ndef g():\n    return C.get_arch_list()\n",
    # an import inside a function binds a name for the whole file (the import table is flat)
    "import torch\ndef f():\n    from torch import cuda\n    return 1\ndef g():\n    cuda.synchronize()\n",
    "from torch import cuda\ndef f():\n    from foo import cuda\n    return 1\ndef g():\n    cuda.synchronize()\n",
    # os.environ through `import os` at the top
    "import os\nimport torch\ndef f():\n    pass\ndef g():\n    os.environ['CUDA_VISIBLE_DEVICES'] = '0'\n",
    # a device variable used in a function left out: made again with that function
    "import torch\nDEV = 'gpu:0'\nif DEV == 'cuda':\n    pass\ndef f(x):\n    return x.to(DEV)\ndef g():\n    pass\n",
    "import torch\nname = 'cuda'\nif name == 'cuda':\n    pass\ndef f(x):\n    return torch.device(name)\n",
    # a class's own `def cuda` renamed with its callers
    "import torch\nclass M:\n    def cuda(self):\n        return self\n    def other(self):\n        pass\nm = M().cuda()\n",
    # suppressions, unused suppressions in lines left out
    "import torch\ndef f():\n    pass  # npu-migrate: ignore\nx = t.cuda()  # npu-migrate: ignore[NPU101]\n",
    # TensorFlow files are parsed whole
    "import tensorflow as tf\nimport torch\ndef f():\n    pass\nsess = tf.Session()\nx = t.cuda()\n",
    # a star import
    "from utils import *\ndef f():\n    pass\nsess = tf.Session()\n",
    # text after the last statement, a file without a final newline
    "import torch\nx = t.cuda()\n\n# the end\n# npu-migrate: ignore\n",
    "import torch\nx = t.cuda()\ndef f():\n    pass",
    # statements sharing a line; a decorated function; a nested class
    "import torch; x = 1\ndef f(): pass\n@decorate\ndef g():\n    return t.cuda()\n",
    "import torch\nclass A:\n    class B:\n        def f(self):\n            pass\n        def g(self):\n            return t.cuda()\n",
    # a class body in one line, tabs
    "import torch\nclass A: pass\nclass B:\n\tdef f(self):\n\t\tpass\n\tdef g(self):\n\t\treturn t.cuda()\n",
    # function bodies are cut into statements too: what a pass reads across them
    # a local device variable, assigned in a statement of its own
    "import torch\ndef f(x):\n    dev = 'gpu:0'\n    y = 1\n    return x.to(dev)\n",
    # a device attribute passed to a library with device names of its own in a statement left
    # out (the library imported at the top, or in a function): asked for, stays as it is
    "import torch\nimport ctranslate2\n\n\nclass Engine:\n    def __init__(self):\n        self.first_device = 'cuda:0'\n\n"
    "    def load(self, path):\n        y = 1\n        return ctranslate2.Translator(path, self.first_device)\n",
    "import torch\n\n\ndef load_tf(path):\n    import tensorflow as tf\n    return tf.train.list_variables(path)\n\n\n"
    "class Stack:\n    def parallelize(self):\n        self.first_device = 'cuda:0'\n\n    def first(self):\n"
    "        return tf.identity(self.first_device)\n",
    # "gpu" compared with a parameter used in a statement left out: whether it is a device
    # variable the module assigns "gpu" to decides (asked: a second attempt)
    "import torch\n\n\ndef check(dev):\n    if dev == 'gpu':\n        return 1\n\n\ndef other(dev):\n"
    "    return torch.zeros(1, device=dev)\n",
    "import torch\nDEV = 'gpu:0'\n\n\ndef check():\n    return DEV == 'gpu:0'\n\n\ndef other(x):\n    return x.to(DEV)\n",
    # a lookup's CUDA default, moved with the device variable it is assigned to (or reported)
    "import torch\nd = cfg.get('device', 'cuda')\ndef f():\n    pass\ndef g(x):\n    return x.to(d)\n",
    "import torch\nd = cfg.get('device', 'cuda')\ndef f():\n    pass\ndef g(x):\n    return d == 'cpu'\n",
    # Lightning's accelerator from an option whose default is declared in a statement left out
    "import argparse\nimport pytorch_lightning as pl\ndef opts():\n    p = argparse.ArgumentParser()\n"
    "    p.add_argument('--accelerator', default='gpu')\n    return p.parse_args()\n"
    "def main(args):\n    return pl.Trainer(accelerator=args.accelerator)\n",
    # a function that returns devices: its `return 'cpu'` is in a statement left out
    "import torch\ndef pick(flag):\n    if flag:\n        return 'cuda'\n    x = 1\n    return 'cpu'\n",
    "import torch\ndef pick(flag):\n    def inner():\n        return 'cpu'\n    if flag:\n        return 'cuda'\n",
    # a kernel guard whose kernel call is in another statement (a relative import left out)
    "import torch\nfrom . import _C\ndef nms(b):\n    ok = b.is_cuda\n    out = _C.nms(b)\n    return out if ok else b\n",
    "import torch\nfrom . import _C\ndef run(b):\n    return _C.run(b)\ndef nms(b):\n    if b.is_cuda:\n        pass\n"
    "    return run(b)\n",
    # an optional import guarded by an availability check in another statement
    "import torch\ndef f():\n    if not is_apex_available():\n        raise ImportError('apex')\n    from apex import amp\n"
    "    x = torch.cuda.current_device()\n",
    "import torch\nif not is_apex_available():\n    raise ImportError('apex')\nclass A:\n    def f(self):\n"
    "        y = 1\n        from apex import amp\n        x = torch.cuda.current_device()\n",
    # (the first such check of a block is the one that counts)
    "import torch\ndef f():\n    if not is_bnb_available():\n        raise ImportError('bnb')\n    y = 1\n"
    "    if not is_apex_available():\n        raise ImportError('apex')\n    from apex import amp\n"
    "    x = torch.cuda.current_device()\n",
    # a body on the line that ends a header of several lines; async, nested and decorated functions
    "import torch\ndef f(\n    a): return a.cuda()\ndef g(\n    a): b = 1; return a.cuda()\n",
    "import torch\nasync def f(a):\n    b = 1\n    await a.cuda()\n",
    "import torch\ndef f(a):\n    '''Docs.'''\n    @wraps(a)\n    def g():\n        y = 2\n        return a.cuda()\n    # note\n"
    "    z = 3\n    return g\n",
    # string statements holding rule words, left out (a docstring is never a use)
    "import torch\ndef f(a):\n    '''Runs out of memory (CUDA out of memory) on \"cuda\".'''\n    b = 1\n    return a.cuda()\n",
    "'''Use \"cuda\" or torch.cuda.synchronize().'''\nimport torch\nx = t.cuda()\n",
    "import torch\nDEV = 'cuda'\ndef f(x):\n    '''Moves x to DEV ('cuda').'''\n    return x.to(DEV)\ndef g():\n    'DEV'\n",
    "import torch\ndef pick(flag):\n    '''Or return 'cpu'.'''\n    if flag:\n        return 'cuda'\n    return 'cpu'\n",
    "import torch.cuda as tc\ndef f():\n    'tc.synchronize()'\n    x = 1; 'cuda'\n    tc.synchronize()\n",
    # (an f-string statement is code)
    "import torch\ndef f(x):\n    f'{x.cuda()}'\n    return 1\n",
    # a docstring kept, a comment indented unevenly after the last statement
    "import torch\ndef f(a):\n    '''Move a to cuda.'''\n    b = 1\n    return a.cuda()\n        # odd\nx = 1\n",
])
def test_cross_statement_cases_give_the_whole_parse_result(text):
    assert_same_as_whole(text)


def test_the_device_variable_retry_parses_the_function_that_uses_it(parsed):
    text = "import torch\nDEV = 'gpu:0'\nif DEV == 'cuda':\n    pass\ndef f(x):\n    return x.to(DEV)\ndef g():\n    pass\n"
    result = assert_same_as_whole(text)
    assert parsed[:2] == [
        "import torch\nDEV = 'gpu:0'\nif DEV == 'cuda':\n    pass\n"
        '"""npu-migrate-elided:5-8\n\n\n"""\n',
        "import torch\nDEV = 'gpu:0'\nif DEV == 'cuda':\n    pass\ndef f(x):\n    return x.to(DEV)\n"
        '"""npu-migrate-elided:7-8\n"""\n',
    ]
    assert result.new_text == text.replace("'gpu:0'", "'npu:0'").replace("== 'cuda'", "== 'npu'").replace(
        "import torch\n", "import torch\nimport torch_npu  # noqa: F401\n")


@pytest.mark.parametrize("text, expected", [
    # a lone backslash line (found by the property tests): libcst drops it
    ("from torch.cuda.amp import GradScaler, autocast\n\\\n0",
     "from torch_npu.npu.amp import GradScaler, autocast\n\\\n0"),
])
def test_lines_libcst_would_drop_are_copied_when_left_out(text, expected):
    assert migrate_source(text, "a.py", Options(), RULES).new_text == expected
    assert "cannot migrate faithfully" in migrate_source(text, "a.py", Options(), RULES, partial=False).error


def test_a_file_libcst_cannot_reproduce_is_migrated_when_the_trouble_is_left_out():
    # libcst 1.9 changes unevenly indented comments after the last statement; left out, they
    # are copied as they are.
    text = "import torch\nx = t.cuda()\n  # a\n    # b\n"
    result = migrate_source(text, "a.py", Options(), RULES)
    assert result.error is None
    assert result.new_text == "import torch\nimport torch_npu  # noqa: F401\nx = t.npu()\n  # a\n    # b\n"
    whole = migrate_source(text, "a.py", Options(), RULES, partial=False)
    assert whole.new_text is None and "cannot migrate faithfully" in whole.error


# ------------------------------------------------------- framework rules judged on the code


def test_code_words_are_identifiers_strings_and_imported_packages():
    from npu_migrate.prefilter import code_words

    text = (
        "import os.path as osp\nfrom .utils import keras\nfrom tensorflow.compat import v1\n"
        "def fit(model, *, epochs=1):\n    '''Call model.fit() first.'''\n    return model.compile(loss='mse')\n"
    )
    words = code_words(python_verdict(text).tree)
    assert words.imported == {"os", "tensorflow"}  # not the relative import
    assert {b"osp", b"keras", b"fit", b"epochs", b"compile", b"loss", b"import", b"v1"} <= words.identifiers
    assert b"first" not in words.identifiers and {b"first", b"mse", b"Call"} <= words.strings


@pytest.mark.parametrize("text, planned", [
    # `model.fit()` and `keras` only in a docstring, keras imported relatively: no rule can match
    ("import tensorflow as tf\nfrom .utils import keras\nimport torch\n"
     "def f():\n    '''Train with model.fit().'''\n    return tf.zeros(1)\nx = t.cuda()\n", False),
    ("import tensorflow as tf\nmodel = tf.keras.Sequential()\nmodel.fit(x)\n", True),
    ("import tensorflow as tf\nimport keras\n", True),  # NPU330 on the import
    ("import mindspore\nparser.add_argument('--device_target', default='GPU')\n", True),  # in a string
])
def test_the_framework_pass_runs_only_where_one_of_its_rules_can_match(monkeypatch, text, planned):
    from npu_migrate.codemods import callrules

    calls = []
    real = callrules._plan
    monkeypatch.setattr(callrules, "_plan", lambda *a, **k: calls.append(1) or real(*a, **k))
    assert_same_as_whole(text)
    assert bool(calls) is planned


def test_code_words_are_made_once_when_a_partial_attempt_falls_back(monkeypatch):
    from npu_migrate import prefilter

    calls = []
    real = prefilter.code_words
    monkeypatch.setattr(prefilter, "code_words", lambda tree: calls.append(1) or real(tree))
    text = "import tensorflow as tf\nimport torch\ndef f():\n    pass\nsess = tf.Session()\nx = t.cuda()\n"
    assert_same_as_whole(text)  # the partial attempt gives way to a whole parse: TF rules apply
    assert len(calls) == 2  # once for the partial call of migrate_source, once for the whole one


def test_a_pytorch_file_needs_only_its_imports_read_to_be_parsed_partially(monkeypatch):
    """The frameworks of a file come from a walk of its statements; the words of every expression
    (code_words, a walk as long as the parse) are collected only for a TensorFlow/MindSpore file."""
    from npu_migrate import prefilter

    calls = []
    real = prefilter.code_words
    monkeypatch.setattr(prefilter, "code_words", lambda tree: calls.append(1) or real(tree))
    result = migrate_source("import torch\n\n\ndef f(x):\n    return x.cuda()\n\n\ny = 1\n", "a.py", Options(), RULES)
    assert result.work.get("partial") == 1 and result.new_text is not None
    assert calls == []


def test_the_imports_read_from_statements_are_those_the_words_hold():
    from npu_migrate.prefilter import LazyCodeWords, code_words

    text = (
        "import os.path as osp, torch\nfrom .utils import keras\nfrom tensorflow.compat import v1\n"
        "try:\n    import cupy\nexcept ImportError:\n    from numba import cuda\nelse:\n    import apex.amp\n"
        "finally:\n    import a.b\nclass C:\n    def f(self):\n        import mindspore as ms\n"
        "        with x:\n            if y:\n                pass\n            elif z:\n                import b\n"
        "        for i in j:\n            pass\n        else:\n            from c.d import e\n"
        "        while w:\n            import f\n"
    ) + ("match v:\n    case 1:\n        import g\n" if sys.version_info >= (3, 10) else "")
    tree = python_verdict(text).tree
    words = code_words(tree)
    assert LazyCodeWords(tree).imports() == (words.import_modules, words.top_level_modules)
    assert {"os.path", "torch", "tensorflow.compat", "cupy", "numba", "apex.amp", "a.b", "mindspore", "b", "c.d",
            "f"} <= words.import_modules


def test_child_nodes_are_asts_children_in_order_and_code_words_see_every_node():
    import ast

    from npu_migrate.prefilter import code_words
    from npu_migrate.safe_parse import child_nodes
    from npu_migrate.words import words_of

    seen = 0
    for path in sorted((Path(__file__).resolve().parent.parent / "fixtures").rglob("*.py"))[:60]:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names, strings = set(), []
        for node in ast.walk(tree):
            assert child_nodes(node) == list(ast.iter_child_nodes(node))
            seen += 1
            if isinstance(node, ast.Name):
                names.add(node.id.encode())
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                strings.append(node.value)
        words = code_words(tree)
        assert names <= words.identifiers
        assert words.strings == frozenset(words_of("\n".join(strings)))
    assert seen > 10_000


@pytest.mark.parametrize("text", [
    "import a\n", "from a import b\n", "from.a import *\n", "from . import *\n", "import a.b as c, d\n",
    "if x: import a\n", "if x:\n    pass\nelse : import a\n", "try: import a\nexcept ImportError: a = None\n",
    "x = 1; import a\n", "x = 1; \\\n    import a\n", "\fimport a\n", "class A: import os\n",
    "def f():\n    '''Docs.'''\n    if y:\n        from a.b import (c,\n            d as e)\n",
    "with x as y: from a import *\n", "for i in x: import a\n", "while x: import a;import b\n",
])
def test_every_import_statement_is_read(text):
    """partial._chunk_imports walks a chunk's statements only where its text can hold an import
    statement: it must find every import _imports finds."""
    import ast

    from npu_migrate.partial import Chunk, _chunk_imports, _imports
    from npu_migrate.words import words_of

    tree = ast.parse(text)
    expected = list(_imports(tree.body))
    assert expected
    assert _chunk_imports(Chunk(0, text.count("\n"), tree.body, ""), text, words_of(text)) == expected


@pytest.mark.parametrize("text", [
    "'''Run it once, then import this module.'''\n",
    "def f():\n    '''>>> from a import b'''\n    return important\n",
])
def test_import_only_in_a_docstring_is_not_walked_for(text, monkeypatch):
    import ast

    from npu_migrate import partial
    from npu_migrate.words import words_of

    monkeypatch.setattr(partial, "_imports", lambda statements: pytest.fail("walked"))
    tree = ast.parse(text)
    assert partial._chunk_imports(partial.Chunk(0, text.count("\n"), tree.body, ""), text, words_of(text)) == []


_FRAMEWORK_NAME_CASES = [
    # `image` a local variable only: the function that holds it is left out
    ("import tensorflow as tf\n\n\ndef load(path):\n    image = read(path)\n    return image\n\n\n"
     "def augment(x):\n    return tf.contrib.image.rotate(x, 0.5)\n", True),
    # `image` bound by an import, or maybe by a star import: the word alone keeps a statement
    ("import tensorflow as tf\nfrom tensorflow.contrib import image\n\n\ndef load(path):\n    image = read(path)\n"
     "    return image\n\n\ndef augment(x):\n    return image.rotate(x, 0.5)\n", False),
    ("import tensorflow as tf\nfrom tensorflow.contrib import *\n\n\ndef load(path):\n    image = read(path)\n"
     "    return image\n\n\ndef augment(x):\n    return image.rotate(x, 0.5)\n", False),
]


@pytest.mark.parametrize("text, left_out", _FRAMEWORK_NAME_CASES)
def test_a_framework_name_keeps_a_statement_where_written_as_an_attribute_or_imported(text, left_out):
    """A TensorFlow finding's name (`tensorflow.contrib.image`, NPU343) is in a statement as
    `.image`, or as `image` where an import binds it: a local variable `image` (sam's image
    processor: 483 lines kept for nothing) does not keep its function."""
    found = partial_text(text, python_verdict(text).tree, statement_filter(RULES, "tensorflow"))
    kept = found.text if found is not None else text  # (None: nothing left out)
    assert "rotate(x, 0.5)" in kept
    assert ("image = read(path)" not in kept) == left_out
    result = assert_same_as_whole(text)
    assert {f.code for f in result.findings} == ({"NPU343"} if "*" not in text else set())
