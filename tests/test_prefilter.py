"""The prefilter skips files without parsing them; it must never skip one that needs work.

The main check compares, file by file, the engine's result with the prefilter on and off, on
every rule example and generated code that reaches the rules' names in every
way the import resolution allows (aliases, `from` imports, parenthesised lists with comments,
line continuations); test_speedups_change_nothing.py does it on every fixture.
bench/run.py --verify-prefilter does the same on a real code base.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Iterator, List, Set, Tuple

import pytest
from helpers import python_tree, repository_python_texts

from npu_migrate.dispatch import migrate_source
from npu_migrate.options import Options
from npu_migrate import prefilter as prefilter_module
from npu_migrate.prefilter import (Prefilter, Requirement, Word, link_found, link_regex, may_need_work, rule_requirements,
                                 unknown_kinds)
from npu_migrate.rules import Example, Rule, RuleSet, build_ruleset, default_rules, load_rules
from npu_migrate.kinds.finding import match_kind_of, names_of

ROOT = Path(__file__).resolve().parent.parent
RULES = default_rules()


@pytest.fixture(autouse=True)
def prefilter_never_skips_work():
    """This module checks the prefilter itself (and counts parses): conftest's check is off."""


def _unfiltered(monkeypatch, text: str, path: str, options: Options, rules: RuleSet):
    with monkeypatch.context() as m:
        m.setattr(prefilter_module, "may_need_work", lambda rules, text, framework="auto", words=None, frameworks=None, imports=None, written=None: True)
        return migrate_source(text, path, options, rules).to_dict()


def _assert_same_with_and_without(monkeypatch, text: str, path: str = "example.py", options: Options = Options(),
                                  rules: RuleSet = RULES) -> None:
    filtered = migrate_source(text, path, options, rules).to_dict()
    unfiltered = _unfiltered(monkeypatch, text, path, options, rules)
    assert filtered == unfiltered, text


# -- the rules' own examples and the fixtures ---------------------------------------------------


def _example_texts() -> Iterator[Tuple[str, str, Options]]:
    for rule in RULES.rules:
        for ex in rule.examples:
            for text in (ex.before, ex.after, ex.flagged, ex.not_flagged):
                if text and ex.path.endswith(".py"):
                    yield text, ex.path, Options(add_import=ex.add_import)


@pytest.mark.slow
def test_rule_examples_same_with_and_without_prefilter(monkeypatch):
    cases = list(_example_texts())
    assert len(cases) > 200
    for text, path, options in cases:
        _assert_same_with_and_without(monkeypatch, text, path, options)


# -- generated code: every way of reaching a qualified name -------------------------------------


def _reference_forms(qualname: str) -> List[str]:
    """Code that refers to `qualname` (a.b.c) through each kind of import the engine resolves."""
    parts = qualname.split(".")
    root, parent, name = parts[0], ".".join(parts[:-1]), parts[-1]
    if len(parts) == 1:  # a module: imported one way or another
        return [f"import {root}\n", f"import os, {root}.sub as s\n", f"from {root} import x\n",
                f"from {root}.sub import (\n    y,  # (z)\n)\n", f"def f():\n    import {root} \\\n        as r\n"]
    forms = [
        f"import {parent}\nv = {qualname}(1)\n",
        f"import {root} as q\nv = q.{'.'.join(parts[1:])}(1)\n" if len(parts) > 1 else f"import {root} as q\n",
        f"from {parent} import {name}\nv = {name}(1)\n" if len(parts) > 1 else f"import {root}\n",
        f"from {parent} import {name} as alias\nv = alias(1)\n" if len(parts) > 1 else f"import {root}.sub\n",
        f"from {parent} import (  # see (the docs)\n    other,\n    {name},\n)\nv = {name}(1)\n"
        if len(parts) > 1 else f"from {root} import x\n",
        f"import {parent} \\\n    as tail\nv = tail.{name}(1)\n" if len(parts) > 1 else f"import {root} as tail\n",
        f"import {parent}\nv = ({parent}  # comment (\n     .{name}(1))\n",
        f"import {parent}\nv = {parent} \\\n    .{name}(1)\n",
        f"def f():\n    from {parent} import {name}\n    return {name}\n" if len(parts) > 1 else f"def f():\n    import {root}\n",
    ]
    if len(parts) > 2:
        grand, mid = ".".join(parts[:-2]), parts[-2]
        forms.append(f"from {grand} import {mid}\nv = {mid}.{name}(1)\n")
        forms.append(f"from {grand} import {mid} as m\nv = m.{name}(1)\n")
    return forms


def _qualified_names(rules: RuleSet) -> List[str]:
    names = set()
    for rule in rules.rules:
        if getattr(rule, "framework", ""):
            continue
        if rule.kind in ("api", "module"):
            names.add(rule.from_)
            for member in sorted(getattr(rule.spec, "members", None) or ())[:3]:
                names.add(f"{rule.from_}.{member}")
        elif match_kind_of(rule) in ("api", "call", "call-kwarg", "import"):
            names.update(names_of(rule))
    ordered = sorted(names)
    # Every short list entry, and a fixed sample of the long unsupported-API list.
    return ordered if len(ordered) <= 120 else ordered[:60] + random.Random(6).sample(ordered[60:], 60)


@pytest.mark.slow
def test_generated_references_same_with_and_without_prefilter(monkeypatch):
    names = _qualified_names(RULES)
    assert names
    for qualname in names:
        for text in _reference_forms(qualname):
            _assert_same_with_and_without(monkeypatch, text)


WORD_FORMS = [
    "x = y.cuda()\n",
    "x = y.cuda(non_blocking=True).float()\n",
    "ok = tensor.is_cuda\n",
    "x = x.to('cuda:1')\n",
    "device = 'gpu:0'\n",
    "d = torch.device(f'cuda:{rank}')\n",
    "import torch.distributed as dist\ndist.init_process_group(backend='NCCL')\n",
    "import torch.distributed as dist\ndist.init_process_group('Nccl')\n",
    "import os\nos.environ['CUDA_VISIBLE_DEVICES'] = '0'\n",
    "import os\nv = os.getenv('CUDA_LAUNCH_BLOCKING')\n",
    "import torch\nx = torch.zeros(2).npu()\n",
    "import torch\ny = torch.npu_format_cast(x, 29)\n",
    "import torch as th\nth.npu.set_device(0)\n",
    "import torch\nx = t.double()\n",
    "class Rigid:\n    def cuda(self):\n        return Rigid()\n",  # renamed with its callers elsewhere
    # near misses: nothing to do, and the prefilter should say so
    "use_cuda = True\nprint(use_cuda)\n",
    "'''A Transformer model.'''\nfrom torch.nn import Linear\n",
    "import torch\nx = torch.zeros(2)  # runs on cuda later\n",
    "x = model_gpu(1)\n",
]


def test_generated_words_same_with_and_without_prefilter(monkeypatch):
    for text in WORD_FORMS:
        for options in (Options(), Options(add_import=False)):
            _assert_same_with_and_without(monkeypatch, text, options=options)


# -- selectivity: files that cannot need anything are skipped ---------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "import os\nprint('hello')\n",
        "use_cuda = True\nmodel_gpu = 3\n",
        # `torch.nn.Transformer` is in the unsupported list, but it is only named in a docstring
        "'''A Transformer.'''\nimport torch\nfrom torch.nn import Linear\nfrom torch import nn\n",
        "import torch\nx = torch.zeros(3)\n",
        "nccl_version = 2\n",  # a backend is a whole word only
        "import torch\nx = torch.zeros(2)  # runs on cuda later\n",  # device words count in strings only
        "double = 2\nprint(double)\n",  # a method finding needs `.double`
        '"""Uses cupy when installed."""\n',  # an import finding needs an import
    ],
)
def test_skips_files_that_cannot_need_work(text):
    assert not may_need_work(RULES, text)
    assert migrate_source(text, "x.py", Options(), RULES).to_dict() == migrate_source(
        text, "x.py", Options(), RULES).to_dict()


@pytest.mark.parametrize(
    "text",
    [
        "x.cuda()\n",
        "from torch.nn import (\n    Linear,  # (a comment)\n    Transformer,\n)\n",
        "import torch.nn as tnn\nm = tnn.Transformer()\n",
        "b = 'NCCL'\n",
        "import torch\nx.npu_format_cast(1)\n",
    ],
)
def test_lets_through_files_that_may_need_work(text):
    assert may_need_work(RULES, text)


def test_words_are_whole_words():
    prefilter = Prefilter([Requirement(frozenset({Word("cuda")}))])
    assert prefilter.may_need_work("x.cuda()")
    assert prefilter.may_need_work("'cuda:0'")
    assert not prefilter.may_need_work("use_cuda = cudax + cuda0")
    # Non-ASCII letters around a word count as separators: more files pass, never fewer.
    assert prefilter.may_need_work("ñcuda = 1")


def test_prefix_and_any_case_words():
    prefilter = Prefilter([Requirement(frozenset({Word("torch"), Word("npu", prefix=True)})),
                           Requirement(frozenset({Word("nccl", ignore_case=True)}))])
    assert prefilter.may_need_work("import torch\ntorch.npu_format_cast(x)")
    assert not prefilter.may_need_work("import torch\nx = input_npu")
    assert prefilter.may_need_work("backend = 'NcCl'")
    assert not prefilter.may_need_work("backend = 'ncclx'")


def test_any_case_words_short_and_long_with_other_words():
    # A short any-case word is looked up by its spellings, a long one in the lower-cased
    # words; both as whole words, as the anchor or beside another word, and with an exact
    # anchor of the same word.
    prefilter = Prefilter([Requirement(frozenset({Word("nccl", ignore_case=True)})),
                           Requirement(frozenset({Word("backend_name", ignore_case=True), Word("dist")})),
                           Requirement(frozenset({Word("gloo", ignore_case=True), Word("set_backend")})),
                           Requirement(frozenset({Word("gloo"), Word("x_y")}))])
    for text in ("NCCL", "x = 'nCcL'", "DIST.BACKEND_NAME = dist", "set_backend('GLOO')", "gloo(x_y)"):
        assert prefilter.may_need_work(text), text
    for text in ("nccl2", "_nccl", "backend_name = 1", "DIST = backend_names", "set_backend(gloox)",
                 "Gloo(x_y)", "gloo"):
        assert not prefilter.may_need_work(text), text


@pytest.mark.parametrize(
    "text,found",
    [
        ("nn.Transformer", True),
        ("nn . Transformer", True),
        ("(nn  # (comment\n .Transformer)", True),
        ("nn \\\n  .Transformer", True),
        ("from torch.nn import Linear, Transformer", True),
        ("from torch.nn import (Linear,  # a (b)\n    Transformer)", True),
        ("from torch.nn \\\n    import Transformer", True),
        ("import torch.nn as tnn", True),
        ("from torch.nn import Linear\nclass Transformer: pass", False),
        ("from torch import nn\nimport Transformer", False),
        ("rnn.Transformer", False),
        ("nn.TransformerX", False),
        ("from torch.nn import (Linear)\nTransformer = 1", False),
        ("x = 'nn' ## many # hashes # on ## one ### line\n" * 50 + "Transformer", False),
    ],
)
def test_link(text, found):
    import re

    assert link_found(re.compile(link_regex("nn", "Transformer")), text) is found


@pytest.mark.parametrize("kind, name, text, found", [
    ("quoted", "cuda", "x = 'cuda'", True), ("quoted", "cuda", 'x = "cuda:0"', True), ("quoted", "cuda", "x = 'cudax'", False),
    ("quoted", "cuda", "x = cuda'", False), ("quoted", "cuda", "'CUDA'", False), ("quoted", "cuda", "'cuda_'", False),
    ("quoted", "cuda", "'cudaé'", False), ("quoted", "cuda", "''cuda", True), ("quoted", "cuda", "'cudax' + \"cuda\"", True),
    ("quoted", "gpu", "f'gpus{i}' + 'gpux'", False), ("quoted", "gpu", "f'gpu{i}'", True),
    ("import_as", "device", "from torch import device as D", True),
    ("import_as", "device", "from torch import (\n  device  as D)", True),
    ("import_as", "device", "from torch import (x,  # c\n device as D)", True),
    ("import_as", "device", "import device\\\n as x", True),
    ("import_as", "device", "from x import ydevice as z", False), ("import_as", "device", "from torch import device\n as D", False),
    ("import_as", "device", "device as x", False), ("import_as", "device", "import a, device as_", False),
    ("import_as", "device", "from torch import device\nwith a as b: pass", False),
])
def test_refs_found_from_their_literals(kind, name, text, found):
    """A `quoted` ref's pattern (led by a character class) is tried only where `'cuda`/`"cuda`
    is, an `import_as` ref's only where `device as` is (prefilter._LEADS, _GATES): the answer
    is the regex's own, searched at every position (the corpora gave the same on 107,401
    texts; this session's replay of transformers: 0.078 -> 0.037 CPU-s for these refs)."""
    import re

    from npu_migrate.prefilter import _GATES, _LEADS, ref_regexes
    from npu_migrate.words import matches_at_word_start

    (pattern,) = ref_regexes(kind, name)
    assert pattern in (_LEADS if kind == "quoted" else _GATES)
    regex = re.compile(pattern)
    everywhere = (regex.search(text) is not None if kind == "quoted"
                  else next(matches_at_word_start(regex, text), None) is not None)
    assert link_found(regex, text) is everywhere is found


# -- rules decide the prefilter ---------------------------------------------------------------


def test_a_custom_rule_file_is_part_of_the_prefilter(tmp_path):
    extra = tmp_path / "mine.toml"
    extra.write_text(
        '[[method]]\ncode = "NPU199"\nfrom = "to_gpu_fast"\nto = "to_npu_fast"\nmessage = "m"\n'
        'examples = [{ before = "x.to_gpu_fast()\\n", after = "x.to_npu_fast()\\n" }]\n',
        encoding="utf-8",
    )
    rules = load_rules([extra])
    text = "y = x.to_gpu_fast()\n"
    assert not may_need_work(RULES, text)
    assert may_need_work(rules, text)
    result = migrate_source(text, "x.py", Options(), rules)
    assert result.new_text == "y = x.to_npu_fast()\n"


def test_builtin_rules_are_all_known_to_the_prefilter():
    assert unknown_kinds(RULES) == []
    assert not may_need_work(RULES, "import os\n")


def test_an_unknown_rule_kind_turns_the_prefilter_off():
    rules = build_ruleset([])
    rules.rules.append(Rule(kind="mystery", code="NPU999", source="x.toml", examples=(Example(before="a"),)))
    assert rule_requirements(rules.rules[0]) is None
    assert unknown_kinds(rules) == ["mystery"]
    assert may_need_work(rules, "import os\n")


def test_framework_rules_need_the_framework_unless_forced():
    names = sorted(
        # (not the support list's names, which need their middle parts too: tf.contrib.X)
        name for r in RULES.rules if getattr(r, "framework", "") == "tensorflow" and not getattr(r.spec, "once_per_file", False)
        for req in rule_requirements(r, "tensorflow") for kind, name in req.refs if kind == "attr_or_import"
    )
    if not names:
        pytest.skip("no TensorFlow rules loaded")
    text = f"x = tf.{names[0]}()\n"
    assert not may_need_work(RULES, text)
    assert may_need_work(RULES, f"import tensorflow as tf\n{text}")
    assert may_need_work(RULES, f"from helpers import *\n{text}")  # `tf` from a star import
    assert may_need_work(RULES, text, "tensorflow")
    # the name must be used as an attribute or imported, not just written
    assert not may_need_work(RULES, f"import tensorflow as tf\n# {names[0]}\n")


def _framework_api_names(framework: str) -> List[str]:
    """The qualified names `framework`'s rules match through the import table (the names of
    their framework_name/framework_path requirements): every one of the short lists, a fixed
    sample of Huawei's support list."""
    plain, listed = set(), set()
    for rule in RULES.rules:
        if getattr(rule, "framework", "") != framework:
            continue
        for req in rule_requirements(rule, framework) or ():
            if any(kind == "attr_or_import" for kind, _ in req.refs):
                (listed if getattr(rule.spec, "once_per_file", False) else plain).add(req.name)
    return sorted(plain) + random.Random(24).sample(sorted(listed), min(60, len(listed)))


def _other_words(qualname: str, framework: str) -> str:
    """A line that writes the words a requirement of `qualname` needs besides the name's own
    (an argument rule's keyword, `device_target`; the literal it acts on, "nccl"), as a keyword
    and as a string: `_ = dict(nccl='nccl')`."""
    words = set()
    for rule in RULES.rules:
        if getattr(rule, "framework", "") == framework:
            for req in rule_requirements(rule, framework) or ():
                if req.name == qualname:
                    words |= {w.text for w in req.words} - set(qualname.split("."))
    return "".join(f"_ = dict({w}='{w}')\n" for w in sorted(words))


def _framework_reference_forms(qualname: str) -> List[str]:
    """_reference_forms, and the spellings only the framework passes resolve: TF 1.15 through
    `tensorflow.compat.v1`, Horovod's Keras bindings, `tf` from a star import."""
    forms = _reference_forms(qualname)
    root, _, rest = qualname.partition(".")
    if root == "tensorflow":
        forms += [f"import tensorflow.compat.v1 as tf\nv = tf.{rest}(1)\n",
                  f"from helpers import *\nv = tf.{rest}(1)\n",
                  f"def f():\n    import tensorflow as tf\n    return tf.{rest}\n"]
    if qualname.startswith("horovod.tensorflow."):
        forms.append(f"import horovod.keras as hvd\nv = hvd.{qualname[len('horovod.tensorflow.'):]}(1)\n")
    return forms


@pytest.mark.parametrize("framework", ["tensorflow", "mindspore"])
def test_framework_rules_may_apply_wherever_a_rule_name_resolves(framework):
    """framework_rules_may_apply looks for a rule's name among the names the import table can
    resolve (CodeWords.resolved): every way of reaching the name must count, or the file would
    be parsed partially and the framework pass would miss it."""
    import ast

    from npu_migrate.prefilter import code_words, framework_rules_may_apply

    names = _framework_api_names(framework)
    assert len(names) >= 5
    called_only = _called_only_names(framework)
    for qualname in names:
        for text in _framework_reference_forms(qualname):
            text += _other_words(qualname, framework)
            # (a name only the call kinds' rules name counts where it is called, `(1)` in every
            # form that calls it: CodeWords.called)
            expected = qualname not in called_only or "(1)" in text
            assert framework_rules_may_apply(RULES, code_words(ast.parse(text)), framework) == expected, (qualname, text)


def _called_only_names(framework: str) -> Set[str]:
    """The names of `framework` that only rules of the kinds acting on calls name, nor any of
    their parents (a finding on `horovod.tensorflow` covers what is under it) (prefilter.
    _CALL_KINDS; not a Supervisor's method, prefilter.instance_methods_of)."""
    from npu_migrate.prefilter import _CALL_KINDS, instance_methods_of

    rules = [rule for rule in RULES.rules if getattr(rule, "framework", "") == framework]
    # (a requirement with other refs, `init` and a quoted "nccl", asks for the last word alone)
    called = {req.name for rule in rules if rule.kind in _CALL_KINDS for req in rule_requirements(rule, framework) or ()
              if req.name in rule.call.apis and req.refs == {("attr_or_import", req.name.rsplit(".", 1)[-1])}}
    called -= {req.name for rule in rules if rule.kind in _CALL_KINDS for req in rule_requirements(rule, framework) or ()
               if req.refs != {("attr_or_import", req.name.rsplit(".", 1)[-1])}}
    others = {req.name for rule in rules if rule.kind not in _CALL_KINDS
              for req in rule_requirements(rule, framework) or ()}
    parents = {".".join(name.split(".")[:end]) for name in called for end in range(1, name.count(".") + 2)}
    return {name for name in called - instance_methods_of(rules)
            if not any(parent in others for parent in parents if name == parent or name.startswith(parent + "."))}


@pytest.mark.parametrize("text", [
    # a TensorFlow rule's last word (`tensorflow.device`, NPU127) on another module or object
    "import tensorflow as tf\nimport torch\nd = torch.device('cpu')\n",
    "import tensorflow as tf\ndef f(x):\n    return x.device\n",
    "import tensorflow as tf\nfrom torch import device\n",
    # ... or only written in a docstring
    "'''Run it with tf.device.'''\nimport tensorflow as tf\n",
])
def test_a_framework_rule_word_without_a_resolvable_name_needs_no_framework_pass(monkeypatch, text):
    import ast

    from npu_migrate import prefilter
    from npu_migrate.prefilter import code_words, framework_rules_may_apply

    assert not framework_rules_may_apply(RULES, code_words(ast.parse(text)), "tensorflow")
    assert framework_rules_may_apply(RULES, code_words(ast.parse(text + "tf.device('/gpu:0')\n")), "tensorflow")
    got = migrate_source(text, "x.py", Options(), RULES).to_dict()
    monkeypatch.setattr(prefilter.RulePrefilter, "framework_rules_may_apply", lambda self, code, framework, rewrites_only=False, written=None, tree=None: True)
    assert got == migrate_source(text, "x.py", Options(), RULES).to_dict()


def test_modelarts_entry_scripts_are_parsed_even_without_rule_words(monkeypatch):
    from npu_migrate import engine

    parsed = []
    real = engine.parse_module
    monkeypatch.setattr(engine, "parse_module", lambda text, *a, **k: parsed.append(text) or real(text, *a, **k))
    text = "import argparse\nif __name__ == '__main__':\n    pass\n"
    migrate_source(text, "train.py", Options(), RULES)
    assert parsed == []
    migrate_source(text, "train.py", Options(modelarts=True), RULES)
    assert parsed == [text]


@pytest.mark.parametrize(
    "ref,text,found",
    [
        (("import", "cupy"), "import cupy\n", True),
        (("import", "cupy"), "import os, cupy.cuda as cc\n", True),
        (("import", "cupy"), "from cupy import asarray\n", True),
        (("import", "cupy"), "from cupy.cuda import Device\n", True),
        (("import", "cupy"), "import os \\\n    , cupy\n", True),
        (("import", "cupy"), "# needs cupy\nx = cupy\n", False),
        (("import", "cupy"), "from . import cupy\n", True),  # relative, resolves nothing: a harmless extra
        (("import", "cupy"), "import cupyx\n", False),
        (("attr", "double"), "y = x.double()\n", True),
        (("attr", "double"), "y = (x  # c\n     .double())\n", True),
        (("attr", "double"), "double = 2\nprint(double)\n", False),
        (("attr_or_import", "Session"), "s = tf.compat.v1.Session()\n", True),
        (("attr_or_import", "Session"), "from tensorflow.compat.v1 import (\n    Session,\n)\n", True),
        (("attr_or_import", "Session"), "# Session\nsession = Session\n", False),
        (("star_import", ""), "from utils import *\n", True),
        (("star_import", ""), "from utils import x  # *\n", False),
        (("attr_of", "tf"), "y = tf.constant(1)\n", True),
        (("attr_of", "tf"), "tf = 1\n", False),
    ],
)
def test_refs(ref, text, found):
    prefilter = Prefilter([Requirement(frozenset(), frozenset({ref}))])
    assert prefilter.may_need_work(text) is found


def test_keyword_ref():
    """`gpus=` (not `==`; spaces, newlines and comments between, as in a call) or `'gpus'` (a dict's
    key), at a word's start."""
    for text, found in [("f(gpus=1)", True), ("f(gpus  # n\n  = 1)", True), ("d = {'gpus': 1}", True),
                        ('d = {"gpus": 1}', True), ("if gpus == 1: pass", False), ("f(ngpus=1)", False),
                        ("# gpus: how many", False), ("d = {'gpus_': 1}", False), ("d = dict(gpus=1)", True)]:
        assert Prefilter([Requirement(frozenset(), frozenset({("keyword", "gpus")}))]).may_need_work(text) is found, text


@pytest.mark.parametrize("text, found", [
    ("a = 'gpu'\n", True), ('a = "my_gpu"\n', True), ("a = f'{x}gpu'\n", True), ('a = """gpu"""\n', True),
    ("a = 'g' 'pu'\n", True), ('a = "gp" f"u"\n', True), ("a = 'g' f'{x}pu'\n", True),  # pieces joined
    ("a = '\\x67pu'\n", True), ("a = 'gp\\165'\n", True), ("a = 'gp\\\nu'\n", True),  # escapes
    ("a = 'auto'\n", False), ("a = 'gpus'\n", False), ("a = gpu\n", False), ("a = 'GPU'\n", False),
    ("a = 'cpu'  # gpu\n", False), ("a = 'gpu\\n'\n", False),
])
def test_quoted_end_ref(text, found):
    """A string literal whose value ends with the word (what a call finding's `suffixes` read:
    codemods/findings.arguments_match), however the literal spells it."""
    import ast

    assert Prefilter([Requirement(frozenset(), frozenset({("quoted_end", "gpu")}))]).may_need_work(text) is found
    if "f'" not in text and 'f"' not in text and "= gpu" not in text:
        assert ast.literal_eval(text.split(" = ", 1)[1].split("  #")[0].strip()).endswith("gpu") is found


@pytest.mark.parametrize("text, found", [
    ("import lightning as L\ntrainer = L.Trainer(accelerator='gpu')\n", True),
    ("import lightning as L\nacc = 'cuda' if ok else 'cpu'\ntrainer = L.Trainer(accelerator=acc)\n", True),
    # pytorch-forecasting 1.8.0's examples and tests: a Lightning Trainer asked for no GPU
    ("import lightning.pytorch as pl\ntrainer = pl.Trainer(accelerator='auto', max_epochs=3)\n", False),
    ("import lightning.pytorch as pl\ntrainer = pl.Trainer(accelerator='cpu')  # no GPU here\n", False),
    # a keyword written as one (`gpus=`, a dict's `'gpus'`), not a word of a docstring (lightly 1.6.0)
    ("import pytorch_lightning as pl\ntrainer = pl.Trainer(gpus = 2)\n", True),
    ("import pytorch_lightning as pl\nkw = {'gpus': 2}\ntrainer = pl.Trainer(**kw)\n", True),
    ('import pytorch_lightning as pl\ndef fit(cfg):\n    """gpus: (int) Number of gpus to use"""\n'
     "    return pl.Trainer(**cfg)\n", False),
    ("import pytorch_lightning as pl\ntrainer = pl.Trainer()\nif gpus == 2:\n    pass\n", False),
    # Ray Tune asked for GPUs: the key quoted
    ("from ray import tune\ntune.run(train, resources_per_trial={'cpu': 1, 'gpu': 1})\n", True),
    ("from ray import tune\ntune.run(train, resources_per_trial={'cpu': 1})  # no gpu\n", False),
])
def test_call_findings_need_the_literal_their_arguments_must_hold(text, found):
    """A call finding with `suffixes` (NPU313's accelerator "gpu"/"cuda") or `keys` (NPU329's
    {"gpu": ...}) matches only where the file writes such a literal, one with `keywords` only
    where a keyword is written as an argument or a dict key: a file without it needs nothing
    from that rule, and is not parsed for it."""
    assert may_need_work(RULES, text) is found
    codes = {f["code"] for f in migrate_source(text, "x.py", Options(), RULES).to_dict()["findings"]}
    assert bool(codes & {"NPU313", "NPU329"}) is found


_TF2_CASES = [
    # (text, whether its statements and words decide it without the walk of every node)
    ("import tensorflow as tf\nclass B(tf.keras.layers.Layer):\n    pass\n", True),
    ("from tensorflow import keras\nclass M(keras.Model):\n    pass\n", True),
    ("import tensorflow as tf\n@tf.function\ndef f(x):\n    return x\n", True),
    ("from tensorflow import function\n@function()\ndef f(x):\n    return x\n", True),
    ("import tensorflow as tf\nclass B(tf.keras.layers.Layer):\n    pass\nsess = tf.Session()\n", False),
    ("import tensorflow.compat.v1 as tf\nclass N(tf.keras.Model):\n    pass\n", True),
    ("import tensorflow as tf\nclass B(tf.keras.layers.Layer):\n    pass  # not a Session\n", False),
    ('"""Uses tf.Session."""\nimport tensorflow as tf\nclass B(tf.keras.layers.Layer):\n    pass\n', False),
    ("import tensorflow as tf\ndef f(x):\n    with tf.GradientTape() as t:\n        return x\n", False),
    ("# GradientTape\nimport tensorflow as tf\nfrom m import Layer\nclass B(Layer):\n    pass\n", False),
    ("import tensorflow as tf\nfrom m import Layer\nclass B(Layer):\n    pass\n", True),
    ("import tensorflow as tf\ntry:\n    from tensorflow import keras\nexcept ImportError:\n    pass\n"
     "if tf:\n    class B(keras.layers.Layer):\n        @tf.function\n        def call(self):\n            pass\n", True),
    # `ｋeras` is `keras` to Python (NFKC), not a word of the text: the walk decides
    ("import tensorflow as tf\nfrom m import Layer\nclass B(Layer):\n    def f(self):\n        return ｋeras\n", False),
    ("import tensorflow as tf\nclass B(tf.keras.layers.Layer):\n    pass  # … é — ’\n", True),
]


@pytest.mark.parametrize("text, decided", _TF2_CASES)
def test_tensorflow2_reason_from_statements_is_the_walks(text, decided):
    import ast

    from npu_migrate.frameworks import tensorflow2_reason
    from npu_migrate.prefilter import LazyCodeWords, code_words
    from npu_migrate.words import words_of

    tree = ast.parse(text)
    lazy = LazyCodeWords(tree, words_of(text), text)
    assert lazy.tensorflow2_reason() == tensorflow2_reason(code_words(tree))
    assert (lazy._words is None) == decided


def test_tensorflow2_reason_from_statements_on_every_fixture():
    import ast

    from npu_migrate.frameworks import tensorflow2_reason
    from npu_migrate.prefilter import LazyCodeWords, code_words
    from npu_migrate.words import words_of

    seen = 0
    for path in sorted((Path(__file__).resolve().parent.parent / "fixtures").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        seen += 1
        reason = LazyCodeWords(tree, words_of(text), text).tensorflow2_reason()
        assert reason == tensorflow2_reason(code_words(tree)), path
    assert seen > 80


@pytest.mark.parametrize("text, written", [
    ('"""Moves it to "cuda" and back."""\nx = 1\n', False),
    ('def f():\n    """On \'CUDA\' only."""\n    return 1\n', False),
    ('class A:\n    r"""raw "cuda" """  # a comment\n\n\n    u\'\'\'"cuda\'\'\'\n', False),
    ('x = 1\n\n# a comment\n    \n"""\n"cuda"\n"""\n', False),
    ('x = "cuda"\n', True),
    ('x = 1; """"cuda" """\n', True),  # (not at the logical line's start: not told)
    ('"""a""" + "cuda"\n', True),
    ('"""a "cuda" """ + x\n', True),
    ('"""a "cuda" """; x = 1\n', True),
    ('"""a "cuda" """ \\\n    .strip()\n', True),
    ('f(\n"""\n"cuda"\n""")\n', True),
    ('x = \\\n"""\n"cuda"\n"""\n', True),
    ('# "cuda"\n', True),
    ('b"""\'cuda"""\n', True),
    ('f"""{x} "cuda" """\n', True),
    ('rb"""\'cuda"""\n', True),
    ('def f(): """ "cuda" """\n', True),
    ('return"""\'cuda"""\n', True),
    ('"""a\n\'cuda\n', True),  # (a quote left open)
    ('x = (\n"""\'cuda"""\n', True),
    ('"""\'cuda"""\r\n', True),
    ('\ufeff"""\'cuda"""\n', True),
    ('"""x""" "\'cuda"\n', True),
    ('"""cuda kernels."""\nx = 1\n', False),  # (the docstring's own opening quote is counted)
    ("\'\'\'CUDA\'\'\'\n", False),
    ('# """ in a comment\n"""Moves it to "cuda"."""\n', True),  # (a fooled count: a parse, never a skip)
])
def test_a_string_literal_word_only_in_docstrings_is_told_from_the_text(text, written):
    """prefilter.quoted_outside_docstrings: a quote and the word only inside strings standing
    alone on their logical lines, as the text shows them, is a word no rule can match (False);
    where the text does not show that, True. Its False is always the tree's."""
    import ast

    from npu_migrate.prefilter import LazyCodeWords, quoted_outside_docstrings

    assert quoted_outside_docstrings(text)("cuda") is written
    if not written:
        assert LazyCodeWords(ast.parse(text), None, text).quoted_outside_bare_strings("cuda") is False


def test_a_quoted_word_after_closed_triple_quotes_is_in_code_without_the_docstring_scan(monkeypatch):
    """A quote and the word after an even count of each triple quote is answered True before the
    whole text's scan (_docstring_spans): transformers' 51 files whose quoted "cuda" is in code paid
    74 ms for it, then were parsed anyway."""
    from npu_migrate import prefilter

    def no_scan(text):
        raise AssertionError("scanned")

    monkeypatch.setattr(prefilter, "_docstring_spans", no_scan)
    text = '"""Runs on "cuda" when there is one."""\nimport torch\n\ndevice = "cuda"\n'
    assert prefilter.quoted_outside_docstrings(text)("cuda") is True


def test_docstrings_told_from_the_text_are_the_trees_on_every_fixture_and_test():
    """Wherever the text says a string literal's word is only in docstrings, so does Python's
    tree (LazyCodeWords.quoted_outside_bare_strings), on every fixture and test input that
    parses (bench corpora and held-out projects, 46,000 files x 12 words: the same, by /tmp/mg/eqA.py)."""
    from npu_migrate.prefilter import LazyCodeWords, _docstring_spans, quoted_outside_docstrings

    read = 0
    for path, text in repository_python_texts():
        tree = python_tree(text)
        if tree is None:
            continue
        read += _docstring_spans(text) is not None
        written = quoted_outside_docstrings(text)
        for word in ("cuda", "nccl", "gpu"):
            if not written(word):
                assert LazyCodeWords(tree, None, text).quoted_outside_bare_strings(word) is False, (path, word)
    assert read > 150


def test_a_file_with_a_device_string_only_in_docstrings_takes_no_python_parse(monkeypatch):
    """A file whose only rule word is a device string in its docstrings (transformers 4.46.3:
    `"cuda"` in 9 files' docstrings: beam_search.py, peft.py, llava_next ...) needs nothing,
    which its text tells (prefilter.quoted_outside_docstrings): Python's parser does not run on
    it, and the result is the one the parse gives."""
    text = ('"""Generation helpers.\n\nExample: `model.to("cuda")` then `generate(...)`."""\nimport torch\n\n\n'
            'def f(x, device):\n    """Move `x` to `device` ("cuda" or "cpu")."""\n    return x.to(device)\n')
    result = migrate_source(text, "m.py")
    assert result.work == {} and not result.findings and result.new_text is None
    monkeypatch.setattr(prefilter_module, "quoted_outside_docstrings", lambda text: lambda word: True)
    parsed = migrate_source(text, "m.py")
    assert parsed.work == {"ast": 1} and parsed.to_dict() == result.to_dict()
