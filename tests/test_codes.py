"""A code is an object (#27.1): the function or class that emits a code is registered against it
(npu_migrate/codes.py), `explain` prints every emitting site from the registry, and recording a
code that no registration owns fails (the suite runs with NPU_MIGRATE_STRICT_CODES=1, conftest)."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import textwrap

import libcst as cst
import pytest

from npu_migrate import codes
from npu_migrate.context import Context
from npu_migrate.explain import emitting_sites, explain, load_emitters
from npu_migrate.imports import ImportTable
from npu_migrate.options import Options
from npu_migrate.rules import default_rules

RULES = default_rules()
load_emitters()

# Documented codes that no Python code reports (yet): each with why, so the list cannot grow quietly.
DOCUMENTED_ONLY = {
    "NPU205": "the ModelArts boot file (--modelarts-entry) is written without an edit that names it",
}


def _context(text: str = "x = 1\n") -> Context:
    module = cst.parse_module(text)
    return Context(path="t.py", text=text, options=Options(), rules=RULES, module=module, imports=ImportTable())


def test_the_suite_checks_every_recorded_code():
    import os

    assert os.environ.get(codes.STRICT_ENV) == "1"


def test_recording_a_code_from_unregistered_code_fails():
    ctx = _context()
    with pytest.raises(codes.UnownedCode, match=r"NPU160 recorded by code no registration owns .*"
                                                r"codes.emits"):
        ctx.edit("NPU160", ctx.module.body[0], "m")
    with pytest.raises(codes.UnownedCode, match="NPU380"):
        ctx.finding(RULES.reported("NPU380"), ctx.module.body[0], api="x")
    assert not ctx.has_records
    codes.VIOLATIONS.clear()


def test_a_registered_function_may_record_its_code_and_only_its_code():
    ctx = _context()

    @codes.emits("NPU160")
    def decides(code):
        ctx.edit(code, ctx.module.body[0], "m")

    decides("NPU160")
    assert [e.code for e in ctx.finish()[0]] == ["NPU160"]
    with pytest.raises(codes.UnownedCode, match="NPU161"):
        decides("NPU161")
    codes.VIOLATIONS.clear()


def test_every_code_the_rules_document_has_an_emitting_site():
    missing = {code for code in RULES.codes() if not emitting_sites(RULES, code)}
    assert missing == set(DOCUMENTED_ONLY)


def test_every_rules_kind_has_a_registered_applier():
    keys = {r.applier_key() for r in RULES.rules} - {None}
    assert keys - set(codes.registered_kinds()) == set()


def _literal_codes(obj) -> set:
    """The NPU codes a function's or class's source names: literals, or module constants."""
    module = importlib.import_module(obj.__module__)
    constants = {name: value for name, value in vars(module).items()
                 if isinstance(value, str) and re.fullmatch(r"NPU\d{3}", value)}
    tree = ast.parse(textwrap.dedent(inspect.getsource(obj)))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and re.fullmatch(r"NPU\d{3}", node.value):
            found.add(node.value)
        elif isinstance(node, ast.Name) and node.id in constants:
            found.add(constants[node.id])
    return found


def test_every_registered_site_exists_and_names_the_codes_it_registers():
    known = set(RULES.codes())
    for code, sites in codes.registered_codes().items():
        assert code in known, f"{code} is registered but documented nowhere ({sites})"
        for site in (s for s in sites if s.module.startswith("npu_migrate.")):  # (not this file's own)
            obj = importlib.import_module(site.module)
            for part in site.function.split("."):
                obj = getattr(obj, part)
            source, first = inspect.getsourcelines(obj)
            assert site.line in range(first, first + len(source)), site
            assert code in _literal_codes(obj), f"{site} is registered for {code} but never names it"


def test_explain_names_both_modules_that_report_npu385():
    text = explain(RULES, "NPU385")
    emitted = text.split("Emitted by:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert [line.strip().rsplit(":", 1)[0] for line in emitted] == [
        "npu_migrate.codemods.distributed_torch_analysis:TorchAnalysis",
        "npu_migrate.codemods.distributed_torch:plan",
    ]
    for line in emitted:  # module:function:line, the line of its def/class
        module, function, line_no = line.strip().split(":")
        source = inspect.getsource(importlib.import_module(module)).splitlines()
        assert source[int(line_no) - 1].lstrip().startswith(("def " + function, "class " + function))


def test_a_code_only_python_reports_says_how_it_is_reported():
    """`explain` and the code pages say how a code is reported; for a code with no
    [[edit]]/[[finding]] entry only its [[code]] entry can say it (else "Reported as: -")."""
    from npu_migrate.codedocs import reported_as

    python_only = {code for code in RULES.docs if not RULES.by_code(code)}
    assert python_only - set(DOCUMENTED_ONLY) == {"NPU129", "NPU324"}
    assert {code: reported_as(RULES, code) for code in python_only} == {
        "NPU129": "rewrite", "NPU324": "warning", "NPU205": "-"}
    assert "Reported as: warning\n" in explain(RULES, "NPU324")


def test_npu324_is_reported_as_its_code_entry_says(tmp_path):
    from npu_migrate.project_values import left_settings

    setting = tmp_path / "config.py"
    setting.write_text('DEVICE = "cuda"\n')
    found = left_settings([str(setting)], {"config.DEVICE": str(tmp_path / "train.py")})
    assert [(f.code, f.severity.value) for f in found[str(setting)]] == [("NPU324", RULES.docs["NPU324"].reported_as)]


def test_a_code_entry_with_an_unknown_reported_as_is_refused():
    from npu_migrate.rules import RuleError, build_ruleset

    entry = {"code": "NPU399", "title": "t", "reported_as": "fatal"}
    with pytest.raises(RuleError, match=r"^x.toml: \[\[code\]\] #1 \(NPU399\): 'reported_as' must be error, info, "
                                        r"rewrite, warning or several joined by '/', got 'fatal'$"):
        build_ruleset([("x.toml", {"code": [entry]})])
    assert build_ruleset([("x.toml", {"code": [dict(entry, reported_as="error/warning")]})]).docs["NPU399"].reported_as \
        == "error/warning"
