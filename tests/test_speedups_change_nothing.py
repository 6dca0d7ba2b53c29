"""Every speed-up of the engine changes nothing: the prefilter (skips files without parsing them)
and partial parsing (libcst parses only the statements that can need work) give, on every file of
fixtures/ -- inputs, expected outputs and generated files -- under each option set, exactly the
result of the engine with both off: the same text, edits, findings, errors and generated files.

The fast visitor and the position provider have their own oracles against libcst
(test_fast_visitor.py, test_positions.py); the real code bases go through the same comparison in
bench/corpus_check.py (tests/test_corpus.py) and bench/differential.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from npu_migrate import prefilter
from npu_migrate.dispatch import migrate_source
from npu_migrate.options import Options
from npu_migrate.rules import default_rules

ROOT = Path(__file__).resolve().parent.parent
RULES = default_rules()
OPTION_SETS = {
    "default": Options(),
    "no-import": Options(add_import=False),
    "tensorflow": Options(framework="tensorflow"),
    "modelarts": Options(modelarts=True),
}
FIXTURES = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "fixtures").rglob("*.py"))


@pytest.fixture(autouse=True)
def prefilter_never_skips_work():
    """This module compares the prefilter itself with no prefilter: conftest's check is off."""


def test_the_fixtures_are_all_here():
    assert len(FIXTURES) > 80
    assert {"pytorch", "tensorflow", "mindspore", "modelarts", "distributed"} <= {p.split("/")[1] for p in FIXTURES}


@pytest.mark.parametrize("path", FIXTURES, ids=str)
@pytest.mark.slow
def test_every_speedup_on_gives_the_result_of_every_speedup_off(monkeypatch, path):
    text = (ROOT / path).read_text(encoding="utf-8")
    for name, options in OPTION_SETS.items():
        fast = migrate_source(text, path, options, RULES).to_dict()
        with monkeypatch.context() as m:
            m.setattr(prefilter, "may_need_work", lambda rules, text, framework="auto", words=None, frameworks=None, imports=None, written=None: True)
            slow = migrate_source(text, path, options, RULES, partial=False).to_dict()
        assert fast == slow, (name, path)


def test_the_npu_word_regex_finds_what_the_plain_one_does():
    """guards.NPU_WORD_IN_TEXT starts with its literal (fast); it finds `npu` as a word where the
    plain alternation does, in any case, at either end of the text, and not in `input`."""
    import re

    from npu_migrate.codemods.guards import NPU_WORD_IN_TEXT
    from npu_migrate.prefilter import compiled

    plain = re.compile(r"(?<![A-Za-z0-9])npu|npu(?![A-Za-z0-9])", re.IGNORECASE)
    texts = ["npu", "NPU", "Npu2", "2npu", "torch_npu", "npu_format_cast", "x.npu()", "input", "inputs",
             "anpua", "npnpu", "npunpu", "npuNPU", "1npu1", "\u212anpu\u212a", "\u0131npu", "x = input  # npu",
             "snpux npux", "", "np u", "npU!"]
    found = [t for t in texts if compiled(NPU_WORD_IN_TEXT).search(t)]
    assert found == [t for t in texts if plain.search(t)]
    assert found == ["npu", "NPU", "Npu2", "2npu", "torch_npu", "npu_format_cast", "x.npu()", "npnpu", "npunpu",
                     "npuNPU", "\u0131npu", "x = input  # npu", "snpux npux", "npU!"]
    fixtures = [(ROOT / p).read_text(encoding="utf-8", errors="replace") for p in FIXTURES]
    assert [bool(compiled(NPU_WORD_IN_TEXT).search(t)) for t in fixtures] == [bool(plain.search(t)) for t in fixtures]


def test_the_words_findings_look_for_are_those_of_a_search_of_the_text():
    """codemods/findings.py decides whether to walk the tree from the prefilter's words of the
    text (words.words_of) instead of searching the text: the same identifiers (less leading
    digits, `2cuda` holds `cuda`; not split at a non-ASCII letter: `ñcuda` holds `cuda`)."""
    from npu_migrate.codemods.findings import _WORD_RE, _identifier_words
    from npu_migrate.words import words_of

    texts = [(ROOT / p).read_text(encoding="utf-8", errors="replace") for p in FIXTURES]
    texts.append("x = 2cuda + ñcuda + a9 + _b + 9_ + '\udc80c' + 12")
    for text in texts:
        made = {w for w in _identifier_words(words_of(text)) if w and not w[:1].isdigit()}
        assert made == {w.encode() for w in _WORD_RE.findall(text)}
    assert {b"cuda", b"a9", b"_b", b"_", b"c", b"x"} <= _identifier_words(words_of(texts[-1]))


def test_line_starts_are_those_of_a_scan_for_line_breaks():
    """offsets.line_starts sums the lengths of the lines split at `\\n` (C speed) when the text
    holds no `\\r`, and scans for `\\r\\n|\\r|\\n` otherwise: the same offsets as the scan, for
    str and UTF-8 bytes, on edge cases and every fixture."""
    import re

    from npu_migrate.offsets import line_starts

    def scanned(text):
        pattern = r"\r\n|\r|\n" if isinstance(text, str) else rb"\r\n|\r|\n"
        return [0] + [m.end() for m in re.finditer(pattern, text)]

    texts = ["", "\n", "\n\n", "a", "a\n", "a\nb", "a\r\nb\r\n", "a\rb\n\rc", "\r", "\r\n\r\n", "é\nñ\n\u2028x\n",
             "x = 1\x0c\ny = 2"] + [(ROOT / p).read_text(encoding="utf-8") for p in FIXTURES]
    for text in texts:
        for form in (text, text.encode("utf-8", "surrogatepass")):
            assert line_starts(form) == scanned(form), repr(form[:60])


def test_a_word_in_any_case_is_found_where_the_case_insensitive_search_finds_it():
    """guards._in_any_case (the gate words of NPU315's evidence) looks words up in the lower-cased
    text when both are ASCII: the answer of `re.search("(?i)w1|w2", text)`, which it replaces."""
    import re

    from npu_migrate.codemods.guards import _in_any_case

    words_sets = [["triton"], ["Triton", "cupy", "apex"], ["numba", "CuPy_"], ["ſ"], ["K"]]
    texts = ["", "import triton\n", "TritonKernel", "x = TRITON_OK", "tri ton", "import CUPY as c",
             "# apex", "numba", "cupy_x", "ſtriton", "s", "S", "k", "\u212a", "Kelvin \u212a triton",
             "caf\u00e9 cupy", "\u017f", "num\u00adba", "tr\u0130ton", "tr\u0131ton", "caf\u00e9 TRITON",
             "\u00e9 nuMBA \u00e9", "\u0130mport x", "cu\u017fpy", "caf\u00e9 \u212a"]
    texts += [p.read_text(encoding="utf-8") for p in sorted((ROOT / "fixtures" / "pytorch").glob("*.py"))[:20]]
    for words in words_sets:
        search = re.compile("(?i)" + "|".join(re.escape(w) for w in words))
        for text in texts:
            assert _in_any_case(words, text) == (search.search(text) is not None), (words, text[:40])


@pytest.mark.slow
def test_only_four_characters_outside_ascii_are_ascii_letters_in_any_case():
    """guards._in_any_case lower-cases a non-ASCII text for ASCII words unless it holds one of
    _ASCII_IN_ANY_CASE: over every code point, those are the characters `(?i)` takes for an
    ASCII letter, or whose lower case holds an ASCII character (~1 s)."""
    import re

    from npu_migrate.codemods.guards import _ASCII_IN_ANY_CASE

    letter = re.compile("(?i)[a-z]")
    found = [c for c in map(chr, range(128, 0x110000))
             if letter.fullmatch(c) or any(ch.isascii() for ch in c.lower())]
    assert "".join(found) == _ASCII_IN_ANY_CASE


def test_the_names_defined_are_those_of_a_word_led_search():
    """guards._defined_names (what lines left out may define) searches `def`/`class` from their
    letters and checks the word start itself: the names of `\\b(?:def|class)\\s+(NAME)`."""
    import re

    from npu_migrate.codemods.guards import _defined_names

    search = re.compile(r"\b(?:def|class)\s+([A-Za-z_][A-Za-z0-9_]*)")
    texts = ["def f(): pass", "undef x", "auto_class\n    def to_b(self):", "@dataclass\nclass A(B):",
             "xclass  Y", "éclass Z\nclass W", "class\tT", "def\n", "classdef  k", "_def k", "9def k",
             "a=1;def g(): pass", "class class_ x"]
    texts += [p.read_text(encoding="utf-8") for p in sorted((ROOT / "fixtures").rglob("*.py"))]
    for text in texts:
        assert _defined_names(text) == set(search.findall(text)), text[:40]


def test_a_comparison_with_cuda_is_found_where_the_search_finds_it():
    """guards._compared_with_cuda looks for _COMPARED_WITH_CUDA_RE's match from each quoted
    "cuda" (the part before it matched on the reversed text): the same answer as the search."""
    from npu_migrate.codemods.guards import _COMPARED_WITH_CUDA_RE, _compared_with_cuda
    from npu_migrate.prefilter import compiled

    texts = ["", "x == 'cuda'", "x=='cuda:0'", 'd in ("cpu", "cuda")', "d in ['cpu',\n 'cuda']", "'cuda' == x",
             "'cuda' in d", "'cuda' not in d", "'cuda'cuda' == x", "'cuda' + x", "x = 'cuda'", "within 'cuda'",
             "d in{'a', 'b' , 'cuda'}", "x != (\n  'cuda:12')", "'cuda:' == x", "\"cuda\" in'x'", "'cuda' inx",
             "begin 'cuda'", "x in 'a', 'cuda'", "'cuda:0\" notx", "a == 'x\n', 'cuda'", "in  [ 'cuda' ]"]
    texts += [p.read_text(encoding="utf-8") for p in sorted((ROOT / "fixtures").rglob("*.py"))]
    for text in texts:
        assert _compared_with_cuda(text) == (compiled(_COMPARED_WITH_CUDA_RE).search(text) is not None), text[:40]


def test_the_walks_on_every_node_tell_libcst_types_without_abcmeta(monkeypatch):
    """The checks made on every node (the kept-code planner's walk, imports' resolve, the device
    positions' literal rewriter) tell libcst's node types by identity: isinstance() on one goes
    through ABCMeta.__instancecheck__, a Python call (921,000 of them on transformers' models ->
    424,000). Identity gives isinstance()'s answer because those classes are final."""
    import abc

    import libcst as cst

    from npu_migrate.codemods import guards
    from npu_migrate.codemods.strings import _REWRITTEN_TYPES, LiteralRewriter
    from npu_migrate.context import Context
    from npu_migrate.imports import ImportTable

    told_by_identity = set(_REWRITTEN_TYPES) | {cst.Name, cst.Attribute, cst.Call, cst.FunctionDef, cst.ClassDef,
                                                cst.Import, cst.ImportFrom, cst.SimpleStatementLine}
    assert not [c for c in told_by_identity if c.__subclasses__()]
    text = "import torch\nfrom os import path\nclass A:\n    def f(self, x):\n        return torch.cuda.synchronize(x.y)\n"
    module = cst.parse_module(text)
    ctx = Context(path="t.py", text=text, options=Options(), rules=RULES, module=module,
                  imports=ImportTable.of(module))
    nodes = [(node, isinstance(node, cst.BaseExpression)) for node in guards.subtree(module)]
    table = ImportTable.of(module)
    planner = guards._Planner(ctx, set())
    rewriter = LiteralRewriter({"cuda": "npu"}, index=True)
    checks = []
    real = abc.ABCMeta.__instancecheck__
    monkeypatch.setattr(abc.ABCMeta, "__instancecheck__", lambda cls, inst: checks.append(cls) or real(cls, inst))
    for node, expression in nodes:
        planner.on_visit(node)
        planner.on_leave(node)
        list(guards._calls(node))
        if expression:
            table.resolve(node)
            if type(node) not in _REWRITTEN_TYPES:
                assert rewriter.rewrite(node) is None
    monkeypatch.undo()
    assert checks == []
    assert table.names == {"torch": "torch", "path": "os.path"}


def test_a_name_written_is_looked_for_in_the_words_first(monkeypatch):
    """guards._written (a CUDA-only call's name written, before `(` or not before a name
    character) and keep_cuda_interop's test for cupy, numba.cuda, ... answer from the words of the
    text (words.words_of) where the engine made them: the same answers and the same results as
    the searches of the text they stand for -- a name only inside a longer word (`cupyx_like`,
    `rmmod`, `bmm_fused`) is no name written."""
    from npu_migrate.codemods import guards
    from npu_migrate.words import words_of

    names = {"mm", "bmm", "addmm", "index_cpu_to_gpu", "GpuIndexFlat"}
    texts = ["", "mm(", "x = torch.bmm (a, b)", "bmm_fused(a)", "_mm(x)", "ébmm(x)", "mmé(x)", "2mm(x)", "mm", "mmmm(",
             "f = faiss.GpuIndexFlat", "GpuIndexFlatL2(r, d)", "# addmm\n", "a.addmm\n(b)", "mm\t\n("]
    texts += [p.read_text(encoding="utf-8") for p in sorted((ROOT / "fixtures").rglob("*.py"))]
    for text in texts:
        for after in (r"\s*\(", r"(?!\w)"):
            assert guards._written(text, names, after, words_of(text)) == guards._written(text, names, after), (text[:40], after)
    assert not guards._all_words({"GpuIndex*"}) and guards._all_words(names)

    interop = ("import torch\n{imports}\n\n\ndef alloc(size):\n    stream = torch.cuda.current_stream().cuda_stream\n"
               "    return {call}(size, stream)\n")
    cases = [interop.format(imports="import cupy", call="cupy.cuda.alloc"),
             interop.format(imports="from numba import cuda as nc", call="nc.to_device"),
             interop.format(imports="import cupyx_like as cl  # rmmod", call="cl.alloc"),
             interop.format(imports="from pycuda_helpers import alloc", call="alloc")]
    searched = [migrate_source(text, "alloc.py", Options(), RULES).to_dict() for text in cases]
    monkeypatch.setattr(guards, "_may_be_written", lambda ctx, roots: any(root in ctx.text for root in roots))
    assert [migrate_source(text, "alloc.py", Options(), RULES).to_dict() for text in cases] == searched
    assert [[f["code"] for f in r["findings"] if f["code"] == "NPU319"] for r in searched] == [["NPU319"], ["NPU319"], [], []]


def test_the_imports_are_found_without_entering_statements_whose_lines_hold_no_import():
    """prefilter._imported_modules enters a compound statement only when one of its lines holds
    `import` (prefilter._import_lines): the modules of the walk that enters every statement."""
    import ast

    from npu_migrate.prefilter import LazyCodeWords, _import_modules, _top_level_modules

    texts = ["import a\n", "def f():\n    import b\n", "def f():\n    x = 1\n\n\nclass C:\n    def g(self):\n        from c.d import e\n",
             "if x:import y\n", "from .import z\nfrom . import w\nfrom ..v import u\n", "try:\n    pass\nexcept E:\n    from t import s\n",
             "def f():\n    return (1,\n            2)\nimport late\n", "x = '''\nimport fake\n'''\ndef f():\n    pass\n",
             "match p:\n    case 1:\n        import m1\n    case _:\n        pass\n", "def f():\n    import r\r\n",
             "class A:\n    class B:\n        def c(self):\n            from deep.er import f; import g.h as i\n",
             "from a import (\n    b,\n    c)\nwith x:\n    for i in y:\n        while z:\n            import inner\n"]
    texts += [p.read_text(encoding="utf-8") for p in sorted((ROOT / "fixtures").rglob("*.py"))]
    for text in texts:
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        assert LazyCodeWords(tree, text=text).imports() == (
            frozenset(_import_modules(tree.body)), frozenset(_top_level_modules(tree.body))), text[:40]
