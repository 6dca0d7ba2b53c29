"""Start-up (issue 24: one 500-line script, whole process, <= 0.3 s): what a run of one file
does before and besides migrating it, held deterministically (no timer). A one-file run in a
fresh interpreter imports none of the modules below, builds the rule set and its prefilter once
and starts no worker process; `--stats` prints the run's work counts."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest

from npu_migrate.report import RENDERERS, load_renderers, renderer_names
from npu_migrate.rules import ParsedRulesCache, builtin_rule_files, load_rules

RULE_FILES = len(builtin_rule_files())

# Never imported by `npu-migrate train.py --check` (text report, one PyTorch file), with why.
FORBIDDEN = {
    "multiprocessing": "one file runs in the process: runner imports multiprocessing only to start workers",
    "npu_migrate.report.html": "only the run's own format's renderer is imported (report.load_renderers)",
    "npu_migrate.report.sarif": "only the run's own format's renderer",
    "npu_migrate.report.csv": "only the run's own format's renderer",
    "npu_migrate.report.markdown": "only the run's own format's renderer",
    "npu_migrate.report.json": "only the run's own format's renderer",
    "npu_migrate.report.github": "only the run's own format's renderer",
    "rich": "the text report and the progress bar import rich only on a terminal / for a table",
    "black": "never needed to migrate",
    "pkgutil": "the kinds' modules are listed by startup.package_modules (pkgutil: 1.3 ms a listing)",
    # (click imports it for a short option, `-j 2`: it tries it as a long one first and suggests)
    "difflib": "only to show a diff (diffs.py, extra_files.py), or to suggest a name (config.py, cli.py)",
    "pathspec": "never: a test dependency only (discovery.GlobSpec matches any gitignore spec)",
    "configparser": "only for a setup.cfg's install_requires (targets/pins.py; none here)",
    "packaging.requirements": "only for a dependency line that names a pinned package (targets/pins.py)",
    "packaging.version": "only for a target version given or pinned (torch_npu._order sorts the table's releases)",
    "npu_migrate.rehearse": "the rehearse command only",
    "npu_migrate.standin": "the rehearse command only",
    "npu_migrate.explain": "the explain and rules commands only",
    "npu_migrate.codemods.tensorflow": "a PyTorch file needs no TensorFlow pass",
    "npu_migrate.codemods.mindspore": "a PyTorch file needs no MindSpore pass",
    "npu_migrate.codemods.npu_ops": "TensorFlow only",
    "npu_migrate.codemods.distributed_torch": "--distributed only",
    "npu_migrate.modelarts": "--modelarts only",
}

# Runs in a fresh interpreter: counts what the run builds, then prints what it imported.
# The modules the interpreter had before the probe imports the tool are not the tool's: under
# `coverage run` (patch = ["subprocess"]) coverage starts first in every Python and imports
# multiprocessing itself, which made this test fail only under coverage.
PROBE = r"""
import json, sys
before = set(sys.modules)
from npu_migrate import cache, prefilter, rules, runner

built = {"rule sets": 0, "prefilters": 0, "worker pools": 0, "rule files parsed": 0, "code fingerprints": 0}

def counted(module, name, key):
    real = getattr(module, name)
    def wrapper(*args, **kwargs):
        built[key] += 1
        return real(*args, **kwargs)
    setattr(module, name, wrapper)

counted(rules, "build_ruleset", "rule sets")
counted(prefilter, "build_prefilter", "prefilters")
counted(runner, "_Pool", "worker pools")
counted(rules, "parse_toml", "rule files parsed")
counted(cache, "code_fingerprint", "code fingerprints")
import tomllib
real_loads = tomllib.loads
def loads(*args, **kwargs):
    built["TOML parses"] += 1
    return real_loads(*args, **kwargs)
tomllib.loads = loads
built["TOML parses"] = 0
# the requirements of a TensorFlow/MindSpore rule: computed only for a file that imports the framework
built["framework rules' requirements"] = 0
real_own = prefilter.own_requirements
def own(kind, rule):
    built["framework rules' requirements"] += bool(rule.framework)
    return real_own(kind, rule)
prefilter.own_requirements = own
from npu_migrate.cli import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
print(json.dumps({"exit": code, "built": built, "modules": sorted(set(sys.modules) - before)}))
"""

SCRIPT = """\
import argparse

import torch


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float, default=0.1)
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = torch.nn.Linear(4, 2).cuda()
    torch.cuda.synchronize()
    print(args.lr, device, model)


if __name__ == "__main__":
    main()
"""


def _probe(tmp_path, *args):
    env = {**os.environ, "NPU_MIGRATE_CACHE_DIR": str(tmp_path / "cache"), "NO_COLOR": "1"}
    done = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=tmp_path, capture_output=True, env=env,
                          timeout=600)
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(done.stdout.decode().splitlines()[-1])


@pytest.mark.slow
def test_a_one_file_run_imports_only_what_it_needs_and_builds_each_thing_once(tmp_path):
    (tmp_path / "train.py").write_text(SCRIPT, encoding="utf-8")
    seen = _probe(tmp_path, "train.py", "--check")
    assert seen["exit"] == 1  # it would be migrated: the run did migrate the file
    # no TOML at all: the rule files and the target tables are loaded from their shipped parse
    assert seen["built"] == {"rule sets": 1, "prefilters": 1, "worker pools": 0, "rule files parsed": 0,
                             "code fingerprints": 1, "TOML parses": 0, "framework rules' requirements": 0}
    imported = {m: FORBIDDEN[m] for m in seen["modules"] if m in FORBIDDEN}
    assert imported == {}, "a one-file run imported modules it does not need: " + json.dumps(imported, indent=1)


@pytest.mark.slow
def test_a_pyproject_read_by_the_configuration_and_the_pins_is_parsed_once(tmp_path):
    """config.py (its [tool.npu-migrate]) and the torch_npu target (its dependencies) read the same
    pyproject.toml: one TOML parse (project_files.toml_data), and both read it (the configured
    format is used, the pin decides the target)."""
    (tmp_path / "train.py").write_text(SCRIPT, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "p"\ndependencies = ["torch-npu==2.1.0.post8"]\n\n'
        '[tool.npu-migrate]\nformat = "json"\n', encoding="utf-8")
    seen = _probe(tmp_path, "train.py", "--check", "--no-cache", "-o", "report.json")
    assert seen["built"]["TOML parses"] == 1
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert report["targets"]["torch_npu"]["reason"] == "torch-npu==2.1.0.post8 in pyproject.toml"


@pytest.mark.slow
def test_a_run_of_several_files_builds_the_rule_set_once_and_imports_its_format_only(tmp_path):
    for name in ("a.py", "b.py", "c.py"):
        (tmp_path / name).write_text(SCRIPT, encoding="utf-8")
    seen = _probe(tmp_path, ".", "--check", "-j", "1", "--format", "json", "--no-cache")
    assert seen["built"] == {"rule sets": 1, "prefilters": 1, "worker pools": 0, "rule files parsed": 0,
                             "code fingerprints": 0, "TOML parses": 0, "framework rules' requirements": 0}
    reports = {m for m in seen["modules"] if m.startswith("npu_migrate.report.")}
    assert reports == {"npu_migrate.report.json"}


@pytest.mark.slow
def test_a_run_answered_from_the_cache_never_imports_libcst(tmp_path):
    """A warm run (a pre-commit hook on unchanged files) reads results; parsing, and libcst's
    import (0.1-0.15 s), is for files that need it. The project-wide scans before the files
    (pipeline.with_project_values) must not import it either when no file can need it."""
    for name in ("a.py", "b.py"):
        (tmp_path / name).write_text(SCRIPT, encoding="utf-8")
    cold = _probe(tmp_path, ".", "--check", "-j", "1")
    assert "libcst" in cold["modules"]  # the probe sees imports: the cold run parsed
    warm = _probe(tmp_path, ".", "--check", "-j", "1")
    assert warm["exit"] == cold["exit"] == 1
    assert [m for m in warm["modules"] if m.split(".")[0] == "libcst"] == []
    assert [m for m in warm["modules"] if m.startswith("npu_migrate.codemods")] == []
    # it writes nothing, so nothing of writing either (tempfile, shutil, random: ~5 ms)
    assert [m for m in warm["modules"] if m in ("tempfile", "shutil", "random")] == []
    assert "tempfile" in cold["modules"]  # (the control: the cold run stored its results)


MINDSPORE_LIBRARY = """\
import mindspore as ms
from .ops import stft


def spectrum(x, device_target="GPU"):
    if device_target == "GPU":
        return stft(x)
    return ms.ops.abs(x)
"""


@pytest.mark.slow
def test_a_warm_run_of_mindspore_modules_that_define_no_option_never_imports_libcst(tmp_path):
    """mindaudio 0.3.0 (a library: device targets compared, no argparse option) imported libcst
    and parsed on every warm run for the values crossing its modules (0.28 s, 41 MB): a value
    crosses only from an option whose default is "GPU" (project_values._may_cross, may_pass_on).
    The control: a script beside them that defines one makes the warm run look again."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "spectrum.py").write_text(MINDSPORE_LIBRARY, encoding="utf-8")
    (pkg / "ops.py").write_text("import mindspore\n\n\ndef stft(x):\n    return x\n", encoding="utf-8")
    # (mindaudio's utils/average_model.py: an option, no "GPU")
    (pkg / "average.py").write_text("import argparse\nimport mindspore\nfrom .ops import stft\n\n"
                                    "parser = argparse.ArgumentParser()\nparser.add_argument('--device_target')\n"
                                    "stft(parser.parse_args().device_target)\n", encoding="utf-8")
    cold = _probe(tmp_path, "pkg", "--check", "-j", "1")
    warm = _probe(tmp_path, "pkg", "--check", "-j", "1")
    assert warm["exit"] == cold["exit"]
    assert [m for m in warm["modules"] if m.split(".")[0] == "libcst" or m.startswith("npu_migrate.codemods")] == []
    (pkg / "train.py").write_text(
        "import argparse\nimport mindspore\nfrom pkg.spectrum import spectrum\n\n"
        "parser = argparse.ArgumentParser()\nparser.add_argument('--device_target', default='GPU')\n"
        "args = parser.parse_args()\nspectrum(1, device_target=args.device_target)\n", encoding="utf-8")
    _probe(tmp_path, "pkg", "--check", "-j", "1")
    assert "npu_migrate.codemods.device_dispatch" in _probe(tmp_path, "pkg", "--check", "-j", "1")["modules"]


TRAIN_ASCEND = (
    "import argparse\nimport mindspore\nfrom pkg.data import create_dataset\n\n"
    "parser = argparse.ArgumentParser()\n"
    "parser.add_argument('--device_target', default='Ascend', choices=['Ascend', 'GPU'])\n"
    "args = parser.parse_args()\nds = create_dataset('/data', device_target=args.device_target)\n")
DATA_GPU = ("import mindspore.dataset as de\n\n\ndef create_dataset(path, device_target='GPU'):\n"
            "    if device_target == 'GPU':\n        return de.ImageFolderDataset(path)\n"
            "    raise ValueError('Unsupported device_target.')\n")


@pytest.mark.slow
def test_a_warm_run_keeps_what_the_values_crossing_mindspore_modules_depend_on(tmp_path):
    """A MindSpore project whose script passes its option to another module (the model zoo's
    train.py) looked for crossing values with libcst on every warm run: crossing_moves' facts of
    each file are kept by its bytes (pipeline._no_caller). A changed file is looked at again,
    and a run with the facts answers what a run without them does (principle 4)."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "train.py").write_text(TRAIN_ASCEND, encoding="utf-8")
    (pkg / "data.py").write_text(DATA_GPU, encoding="utf-8")
    cold = _probe(tmp_path, "pkg", "--check", "-j", "1")
    assert "npu_migrate.codemods.device_dispatch" in cold["modules"]
    warm = _probe(tmp_path, "pkg", "--check", "-j", "1")
    assert warm["exit"] == cold["exit"]
    assert [m for m in warm["modules"] if m.split(".")[0] == "libcst" or m.startswith("npu_migrate.codemods")] == []
    # (the crossing facts' key and the cache's settings name one code fingerprint: computed once)
    assert warm["built"]["code fingerprints"] == cold["built"]["code fingerprints"] == 1
    # GPU by default now: a caller whose value moves with create_dataset's comparison
    (pkg / "train.py").write_text(TRAIN_ASCEND.replace("default='Ascend', choices=['Ascend', 'GPU']",
                                                       "default='GPU', choices=['GPU', 'CPU']"), encoding="utf-8")
    env = {**os.environ, "NPU_MIGRATE_CACHE_DIR": str(tmp_path / "cache"), "NO_COLOR": "1"}

    def diff(*more):
        done = subprocess.run([sys.executable, "-m", "npu_migrate", "pkg", "--diff", "-j", "1", *more], cwd=tmp_path,
                              capture_output=True, env=env, timeout=600)
        return done.returncode, done.stdout.decode()

    fresh = diff("--no-cache")
    assert "+    if device_target == 'Ascend':" in fresh[1] and "default='Ascend', choices=['Ascend', 'CPU']" in fresh[1]
    assert diff() == diff() == fresh
    assert "npu_migrate.codemods.device_dispatch" in _probe(tmp_path, "pkg", "--check", "-j", "1")["modules"]


@pytest.mark.slow
def test_a_run_of_files_the_prefilter_skips_never_imports_libcst(tmp_path):
    """A pre-commit hook on files without device code: the prefilter answers, nothing is parsed,
    and libcst (0.15 s of imports) is not loaded (engine.py imports it where it parses)."""
    (tmp_path / "utils.py").write_text("def add(a, b):\n    return a + b\n", encoding="utf-8")
    seen = _probe(tmp_path, "utils.py", "--check", "--no-cache")
    assert seen["exit"] == 0
    assert [m for m in seen["modules"] if m.split(".")[0] == "libcst"] == []


def test_every_format_is_the_module_of_its_name():
    """load_renderers(fmt) imports report/<fmt>.py only, so each module must register its own name."""
    names = renderer_names()
    assert names == ["csv", "github", "html", "json", "markdown", "sarif", "text"]
    for name in names:
        load_renderers(name)
        assert name in RENDERERS, name
    assert set(RENDERERS) == set(names)


def test_an_unknown_format_lists_every_format(run_cli, tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n", encoding="utf-8")
    done = run_cli("a.py", "--format", "yaml", cwd=tmp_path)
    assert done.returncode == 2
    assert ("Invalid value for --format: unknown format 'yaml'; choose from csv, github, html, json, markdown, "
            "sarif, text") in done.stderr.decode()


@pytest.fixture(autouse=True)
def prefilter_never_skips_work():
    """conftest's check migrates every text the prefilter skips once more, inside the work
    count: here the counts must be those of a real run."""


STATS = ("npu-migrate: work: 1 of 2 files parsed; 1 Python parse, 1 whole libcst parse, 0 partial libcst parses, "
         "0 tree walks, 1 tree transform, 2 code generations, 1 parse of migrated text")


def test_stats_prints_the_work_of_the_run_and_of_the_busiest_files(run_cli, tmp_path):
    (tmp_path / "a.py").write_text("import torch\nx = torch.ones(2).cuda()\n", encoding="utf-8")
    (tmp_path / "b.py").write_text("x = 1\n", encoding="utf-8")
    done = run_cli(".", "--stats", "--no-cache", "--check", cwd=tmp_path)
    assert done.returncode == 1
    lines = done.stderr.decode().splitlines()
    assert lines[:2] == [
        STATS,
        "npu-migrate: work: a.py: 1 Python parse, 1 whole libcst parse, 1 tree transform, 2 code generations, "
        "1 parse of migrated text",
    ], lines
    # -v prints the run's line too, but not the files'
    verbose = run_cli(".", "-v", "--no-cache", "--check", cwd=tmp_path).stderr.decode().splitlines()
    assert STATS in verbose and not any(line.startswith("npu-migrate: work: a.py") for line in verbose)
    # without either, nothing of it
    assert "work:" not in run_cli(".", "--no-cache", "--check", cwd=tmp_path).stderr.decode()


def test_stats_prints_the_project_scans_work_apart(run_cli, tmp_path):
    """The project scan parses a module whose imports name a CUDA-only library (the CUDA-only
    code other modules call) before any file is migrated: its own line, before the files'."""
    (tmp_path / "kernels.py").write_text("import triton\n\n\n@triton.jit\ndef add(x):\n    pass\n", encoding="utf-8")
    (tmp_path / "a.py").write_text("import torch\nx = torch.ones(2).cuda()\n", encoding="utf-8")
    lines = run_cli(".", "--stats", "--no-cache", "--check", cwd=tmp_path).stderr.decode().splitlines()
    assert lines[0] == "npu-migrate: work: the project scan: 1 Python parse", lines
    assert lines[1].startswith("npu-migrate: work: 2 of 2 files parsed; 2 Python parses"), lines


def test_stats_shows_ten_files_at_most_the_busiest_first(run_cli, tmp_path):
    for i in range(12):
        lines = "".join(f"x{j} = torch.ones(2).cuda()\n" for j in range(1 + i % 3))
        (tmp_path / f"f{i:02}.py").write_text("import torch\n" + lines, encoding="utf-8")
    done = run_cli(".", "--stats", "--no-cache", cwd=tmp_path)
    lines = [line for line in done.stderr.decode().splitlines() if line.startswith("npu-migrate: work:")]
    assert len(lines) == 12 and lines[-1] == "npu-migrate: work: ... and 2 more files parsed"
    # every file takes the same steps here, so the order is by path
    assert [line.split(": ")[2] for line in lines[1:11]] == [f"f{i:02}.py" for i in range(10)]
    # one file more than shown is one file
    (tmp_path / "f00.py").unlink()
    lines = run_cli(".", "--stats", "--no-cache", cwd=tmp_path).stderr.decode().splitlines()
    assert "npu-migrate: work: ... and 1 more file parsed" in lines, lines


def test_stats_on_stdin(run_cli, tmp_path):
    done = run_cli("-", "--stats", "--stdin-filename", "t.py", cwd=tmp_path,
                   input=b"import torch\nx = torch.ones(2).cuda()\n")
    assert done.returncode == 0
    assert done.stderr.decode().splitlines()[:2] == [
        STATS.replace("1 of 2 files", "1 of 1 file"),
        "npu-migrate: work: t.py: 1 Python parse, 1 whole libcst parse, 1 tree transform, 2 code generations, "
        "1 parse of migrated text",
    ]


@pytest.mark.slow
def test_no_run_parses_the_toml_of_a_built_in_file_it_has_the_shipped_parse_of(tmp_path):
    """The built-in rule files' and target tables' TOML (0.05-0.08 s of every start) is parsed at
    build time (rules/parsed/, scripts/parsed_rules.py): a run with or without the cache, one
    that writes included, parses none. A --rules file is parsed (and kept in the cache folder,
    rules.ParsedRulesCache, by runs that read the cache)."""
    (tmp_path / "train.py").write_text(SCRIPT, encoding="utf-8")
    for args in (["--check"], ["--check", "--no-cache"], ["--diff"], ["--write"]):
        seen = _probe(tmp_path, "train.py", *args)
        assert (seen["built"]["rule files parsed"], seen["built"]["TOML parses"]) == (0, 0), args
    (tmp_path / "mine.toml").write_text(
        '[[finding]]\ncode = "NPU399"\nkind = "api"\nseverity = "info"\napi = "torch.cuda.nvtx"\nmessage = "m"\n'
        'examples = [{ flagged = "import torch\\ntorch.cuda.nvtx.range_push(1)\\n" }]\n', encoding="utf-8")
    (tmp_path / "train.py").write_text(SCRIPT.replace("0.1", "0.2"), encoding="utf-8")  # no cached result
    assert _probe(tmp_path, "train.py", "--check", "--rules", "mine.toml")["built"]["rule files parsed"] == 1
    assert _probe(tmp_path, "train.py", "--check", "--rules", "mine.toml")["built"]["rule files parsed"] == 0
    assert _probe(tmp_path, "train.py", "--check", "--rules", "mine.toml", "--no-cache")["built"]["rule files parsed"] == 1


def test_the_shipped_parse_of_every_built_in_toml_file_is_current():
    """rules/parsed/<name>.json is tomllib's parse of rules/<name>, for its bytes: after an edit of
    a rule file or a target table, run `python scripts/parsed_rules.py` and commit rules/parsed/."""
    import hashlib
    import tomllib

    from npu_migrate.targets.tables import data_dir, shipped_path

    root = data_dir()
    files = sorted([*root.glob("*.toml"), *(root / "targets").glob("*.toml")])
    assert len(files) >= RULE_FILES + 3
    stale = []
    for path in files:
        content = path.read_bytes()
        where = shipped_path(str(path))
        entry = json.loads(open(where, "rb").read()) if where and os.path.isfile(where) else {}
        if entry.get("sha256") != hashlib.sha256(content).hexdigest() or entry.get("data") != tomllib.loads(content.decode()):
            stale.append(str(path.relative_to(root)))
    assert stale == [], "stale or missing in rules/parsed/ (run python scripts/parsed_rules.py): " + ", ".join(stale)
    shipped = sorted(p.relative_to(root / "parsed") for p in (root / "parsed").rglob("*.json"))
    assert shipped == sorted(p.relative_to(root).with_name(p.name + ".json") for p in files)


def test_an_edited_built_in_file_is_parsed_as_it_is_the_others_come_from_their_shipped_parse(tmp_path, monkeypatch):
    """A shipped parse is taken for exactly the bytes it was made from: a rule file or a target
    table edited in place (an installed copy, a checkout before scripts/parsed_rules.py) is
    parsed, and the run sees the edit."""
    import shutil

    import npu_migrate.rules as rules_module
    from npu_migrate.targets import tables

    copy = tmp_path / "rules"
    shutil.copytree(tables.data_dir(), copy)
    monkeypatch.setattr(tables, "data_dir", lambda: copy)
    monkeypatch.setattr(rules_module, "data_dir", lambda: copy)
    monkeypatch.setattr(rules_module, "_LOADED", type(rules_module._LOADED)())
    parsed = []
    monkeypatch.setattr(rules_module, "parse_toml", lambda text: parsed.append(text) or tomllib_loads(text))
    shipped = load_rules()
    assert parsed == []  # the control: every built-in file from its shipped parse
    torch_toml = copy / "torch.toml"
    text = torch_toml.read_text(encoding="utf-8")
    rule = next(r for r in shipped.rules if r.source.startswith("torch.toml"))
    assert text.count(f'"{rule.message}"') >= 1
    torch_toml.write_text(text.replace(f'"{rule.message}"', '"edited in place"', 1), encoding="utf-8")
    edited = load_rules()
    assert len(parsed) == 1 and parsed[0] == torch_toml.read_text(encoding="utf-8")
    assert [r.message for r in edited.rules if r.source == rule.source] == ["edited in place"]
    assert edited.fingerprint != shipped.fingerprint
    # the target tables the same way
    table = copy / "targets" / "torch_npu.toml"
    content = table.read_text(encoding="utf-8")
    line = '"torch_npu.npu.synchronize" = ["2.1.0.post8..2.14.0"]\n'
    assert content.count(line) == 1
    assert "torch_npu.npu.synchronize" in tables.load_toml(str(table))["names"]
    table.write_text(content.replace(line, ""), encoding="utf-8")
    assert "torch_npu.npu.synchronize" not in tables.load_toml(str(table))["names"]


def tomllib_loads(text):
    import tomllib

    return tomllib.loads(text)


def test_a_shipped_parse_is_read_only_for_the_bytes_it_names(tmp_path):
    import hashlib

    from npu_migrate.targets.tables import read_shipped

    content = b'x = 1\n'
    where = tmp_path / "a.toml.json"
    where.write_text(json.dumps({"sha256": hashlib.sha256(content).hexdigest(), "data": {"x": 2}}), encoding="utf-8")
    assert read_shipped(str(where), content) == {"x": 2}  # (the control: its data, not a parse)
    assert read_shipped(str(where), b'x = 2\n') is None
    for broken in ("{not json", '{"sha256": 1}', '{"data": {}}', "[]",
                   json.dumps({"sha256": hashlib.sha256(content).hexdigest(), "data": [1]})):
        where.write_text(broken, encoding="utf-8")
        assert read_shipped(str(where), content) is None, broken
    assert read_shipped(str(tmp_path / "missing.json"), content) is None


def test_parsed_rules_from_the_cache_build_the_same_rule_set(tmp_path):
    fresh = load_rules(include_builtin=True)
    load_rules.__globals__["_LOADED"].clear()
    stored = load_rules(parsed_cache=tmp_path)
    assert len(list(tmp_path.glob("*.json"))) == 1
    load_rules.__globals__["_LOADED"].clear()
    import npu_migrate.rules as rules_module

    real, rules_module.parse_toml = rules_module.parse_toml, None  # a parse would fail
    try:
        cached = load_rules(parsed_cache=tmp_path)
    finally:
        rules_module.parse_toml = real
    assert cached.fingerprint == stored.fingerprint == fresh.fingerprint
    assert cached.rules == fresh.rules


def test_a_parsed_rules_entry_that_is_not_its_own_is_a_miss(tmp_path):
    key = b"the files' names and bytes"
    entry = ParsedRulesCache(tmp_path, key)
    raw = [("torch.toml", {"rule": [{"code": "NPU101", "weight": 1.5, "on": True}]})]
    entry.put(raw)
    assert ParsedRulesCache(tmp_path, key).get() == raw
    assert ParsedRulesCache(tmp_path, key + b"!").get() is None  # another content
    entry.path.write_text('{"key": "someone else", "files": []}', encoding="utf-8")
    assert entry.get() is None
    entry.path.write_text("{not json", encoding="utf-8")
    assert entry.get() is None
    entry.path.unlink()
    import datetime

    ParsedRulesCache(tmp_path, key).put([("a.toml", {"when": datetime.date(2026, 1, 1)})])  # JSON has no dates
    ParsedRulesCache(tmp_path, key).put([("a.toml", {"x": float("nan")})])
    assert list(tmp_path.glob("*.json")) == []


def test_parsed_rules_live_in_the_private_cache_folder_only(tmp_path, monkeypatch):
    """In a folder others may write (NPU_MIGRATE_CACHE_DIR=/tmp), the parsed rules go to the
    user's private subfolder, as the results do; in a folder the cache refuses, nowhere."""
    from npu_migrate.cli import _parsed_rules_folder

    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    monkeypatch.setenv("NPU_MIGRATE_CACHE_DIR", str(shared))
    from npu_migrate import __version__

    assert _parsed_rules_folder() == shared / f"npu-migrate-{os.geteuid()}" / "parsed-rules" / f"v{__version__}"
    unsafe = tmp_path / "unsafe"
    unsafe.mkdir()
    unsafe.chmod(0o777)
    monkeypatch.setenv("NPU_MIGRATE_CACHE_DIR", str(unsafe))
    assert _parsed_rules_folder() is None


def test_the_pins_are_parsed_with_packaging_only_on_lines_that_may_name_a_pinned_package(tmp_path, monkeypatch):
    """packaging costs ~0.03 s to import and most projects pin no torch: targets/pins.py hands
    it only the lines whose text, normalised as package names are, holds a pinned package's
    name; every spelling of those still pins."""
    import packaging.requirements

    from npu_migrate.targets import pins, torch_npu

    (tmp_path / "requirements.txt").write_text(
        "numpy==1.26\nTorch_NPU == 2.1.0.post3\nclick>=8\nPyTorch==2.1.0 ; python_version > '3'\n"
        "-e git+https://example.com/vision.git#egg=torchvision\nlibcst>=1.1\n", encoding="utf-8")
    parsed = []
    real = packaging.requirements.Requirement
    monkeypatch.setattr(packaging.requirements, "Requirement", lambda text: parsed.append(text) or real(text))
    found = pins.read_pins(str(tmp_path), torch_npu.PACKAGES)
    assert [(p.package, p.spec, p.name) for p in found] == [("torch-npu", "==2.1.0.post3", "Torch_NPU"),
                                                            ("torch", "==2.1.0", "PyTorch")]
    # a plain line (`name`, `name op version`) is read by its clauses (SpecifierSet); the others by packaging
    assert parsed == ["PyTorch==2.1.0 ; python_version > '3'"]



def test_the_tensorflow_requirement_is_parsed_only_on_lines_that_may_name_tensorflow(tmp_path, monkeypatch):
    """targets/pins.tensorflow2_required reads a dependency file that mentions TensorFlow anywhere
    (npu-migrate's own pyproject.toml names it in mypy's overrides): only its lines that may name
    a TensorFlow package go to packaging (the first version parsed every line, and a one-script
    run of bench/train_500.py imported packaging: 1,336 M -> 1,416 M instructions)."""
    from npu_migrate.targets import pins

    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\ndependencies = ["libcst>=1.1", "click>=8", "Tensorflow_GPU >= 2.4"]\n'
        '[[tool.mypy.overrides]]\nmodule = ["tensorflow"]\n', encoding="utf-8")
    parsed = []
    real = pins._parsed_requirement
    monkeypatch.setattr(pins, "_parsed_requirement", lambda text, *a: parsed.append(text) or real(text, *a))
    assert pins.tensorflow2_required([str(tmp_path)]) == (
        "the project requires TensorFlow 2 (Tensorflow_GPU >= 2.4 in pyproject.toml)")
    assert parsed == ["Tensorflow_GPU >= 2.4"]

# Requirement lines near the edge of what _PLAIN_REQUIREMENT takes: each must read the same as
# packaging's requirement parser reads it (name as written and clauses), or be invalid for both.
PIN_LINES = [
    "torch==2.1.0", "torch == 2.1.0", " torch>=1.9 , <2 ", "torch<2,>=1.9", "Torch_NPU == 2.1.0.post3",
    "torch==2.1.0+cpu", "torch>=2.1.0+cpu", "torch!=1.5.*", "torch==1.*", "torch>=1.*", "torch~=1",
    "torch~=1.13", "torch==1!2.0", "torch==2.0a1", "torch==1.0.post1.dev2", "torch===1.0", "torch=1.0",
    "torch==", "torch>=1.0,", "torch>1.0 <2.0", "torch-==1.0", "torch.==1.0", "_torch==1.0", "torch",
    "torch[cuda]==2.1", "torch==2.1 ; python_version > '3'", "torch @ https://x/torch.whl", "torch (==2.1)",
    "mindspore-ascend==2.2.0", "mindspore_ascend>=2.2,<2.4", "torch==2.1.0-1", "torch==v2.1", "torch==2.1 #x",
    "torchvision", " torch ", "torch-npu", "torch_", "torch vision",
]


@pytest.mark.parametrize("line", [*PIN_LINES, "torch>=2.5.1", "torch > 2.0, != 2.3.1", "torch!=2.0", "torch>=2.1,",
                                  "mindspore>=2.2", "torch >= 1!2.0", "torch>=2.1,<=2.3", "torch>2,~=2.1"])
def test_a_line_read_without_packaging_pins_nothing_packaging_would_pin(line):
    """A plain line with lower bounds and exclusions only is no pin (targets: a pin needs one of
    `UPPER`) and is left out before packaging reads it: packaging finds no `UPPER` clause in it."""
    from npu_migrate.targets import mindspore, torch_npu
    from npu_migrate.targets.pins import UPPER, _parsed_requirement, _pin

    packages = {**torch_npu.PACKAGES, **mindspore.PACKAGES}
    parsed = _parsed_requirement(line, plain_allowed=False)
    pins = parsed is not None and any(s.operator in UPPER for s in parsed[1])
    if _pin(line, "requirements.txt", packages) is None and pins:
        assert parsed is not None and parsed[0].lower().replace("_", "-") not in packages, line


@pytest.mark.parametrize("line", PIN_LINES)
def test_a_plain_pin_reads_as_packagings_requirement_parser_reads_it(line):
    from npu_migrate.targets import pins

    def shown(parsed):
        return None if parsed is None else (parsed[0], sorted(str(s) for s in parsed[1]))

    assert shown(pins._parsed_requirement(line)) == shown(pins._parsed_requirement(line, plain_allowed=False))


@pytest.mark.slow
def test_a_run_in_a_project_that_pins_no_torch_never_imports_packagings_requirement_parser(tmp_path):
    (tmp_path / "train.py").write_text(SCRIPT, encoding="utf-8")
    (tmp_path / "requirements.txt").write_text("numpy==1.26\nclick>=8\n", encoding="utf-8")
    # a lower bound is no pin (the commonest torch line): read without packaging too
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "p"\ndependencies = ["libcst>=1.1", "torch>=2.1"]\n',
                                             encoding="utf-8")
    seen = _probe(tmp_path, "train.py", "--check", "--no-cache")
    assert seen["exit"] == 1
    assert [m for m in seen["modules"] if m.startswith(("packaging.requirements", "packaging.specifiers"))] == []
    # a plain pin is read without the requirement parser (SpecifierSet only) ...
    (tmp_path / "requirements.txt").write_text("numpy==1.26\ntorch==2.1.0\n", encoding="utf-8")
    seen = _probe(tmp_path, "train.py", "--check", "--no-cache")
    assert "packaging.specifiers" in seen["modules"]  # (the probe sees it when a pin is read)
    assert [m for m in seen["modules"] if m.startswith("packaging.requirements")] == []
    # ... a pin with a marker is the parser's
    (tmp_path / "requirements.txt").write_text("numpy==1.26\ntorch==2.1.0 ; python_version > '3'\n",
                                               encoding="utf-8")
    seen = _probe(tmp_path, "train.py", "--check", "--no-cache")
    assert "packaging.requirements" in seen["modules"]


@pytest.mark.slow
def test_a_run_over_a_project_whose_dependency_lists_are_plain_never_imports_packaging(tmp_path):
    """The requirements front end reads only the lines that can give or silence a finding, a plain
    one without packaging (mmocr 1.0.1's requirements files: ~0.05 s of a 0.3 s run): the torch
    line gets its NPU371, the other lines (extras, a pre-release, a marker) are not parsed."""
    (tmp_path / "train.py").write_text(SCRIPT, encoding="utf-8")
    (tmp_path / "requirements.txt").write_text(
        "numpy\ntorch>=1.1\nmmdet>=3.0.0rc5,<3.2.0\nblack[jupyter]\nscipy ; python_version > '3'\n", encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "p"\ndependencies = ["torch", "opencv-python != 4.5.5.*"]\n',
                                             encoding="utf-8")
    seen = _probe(tmp_path, ".", "--check", "--no-cache", "-j", "1", "--format", "json", "-o", "report.json")
    assert seen["exit"] == 1
    assert [m for m in seen["modules"] if m.startswith("packaging")] == []
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert sorted((os.path.basename(r["path"]), f["line"], f["code"]) for r in report["files"] for f in r["findings"]
                  if f["code"].startswith("NPU37")) == [("pyproject.toml", 3, "NPU371"), ("requirements.txt", 2, "NPU371")]


def test_the_rule_view_walks_only_the_suggestions_that_may_name_a_target_dependent_name(monkeypatch):
    """rules_for_targets runs once per run over every finding's suggestion (~300): a text that
    names no torch_npu/MindSpore/npu_bridge name and no TF Adapter helper some release lacks is
    answered without walking its dotted names (0.016 -> 0.005 s). The answer is the walk's for
    every text of the rules, for old and new targets alike."""
    from npu_migrate.targets import rule_view
    from npu_migrate.targets.cann import CannTarget

    rules = load_rules()
    texts = sorted({t for r in rules.rules for t in (r.suggestion, r.message) if t})
    walked = []
    real = rule_view._torch_members_missing
    monkeypatch.setattr(rule_view, "_torch_members_missing", lambda text, spec: walked.append(text) or real(text, spec))
    rule_view._derive(rules, CannTarget(""), "", "")
    suggestions = sum(1 for r in rules.rules if r.suggestion)
    assert 0 < len(walked) < suggestions / 3, (len(walked), suggestions)
    markers = rule_view._MARKERS
    monkeypatch.setattr(rule_view, "_MARKERS", ("",))  # every text walked: the answer without the shortcut
    for cann, torch_spec, ms_spec in (("", "", ""), ("20.0", "2.1", "1.10"), ("5.0", "2.1.0.post8", "2.2")):
        target = CannTarget(cann)
        walk = [rule_view.missing_in_text(t, target, torch_spec, ms_spec) for t in texts]
        monkeypatch.setattr(rule_view, "_MARKERS", markers)
        fast = [rule_view.missing_in_text(t, target, torch_spec, ms_spec) for t in texts]
        monkeypatch.setattr(rule_view, "_MARKERS", ("",))
        assert fast == walk, (cann, torch_spec, ms_spec)
        assert any(walk) == bool(cann)  # (the control: the old targets lack names the texts give)


def test_a_loaded_rule_set_is_fingerprinted_by_its_files_bytes_not_by_dumping_its_data(monkeypatch, tmp_path):
    """load_rules already hashed every file's name and bytes (its key): that digest is the
    fingerprint; dumping the data as JSON to hash it again took ~3 ms a run."""
    import npu_migrate.rules as rules_module

    monkeypatch.setattr(rules_module, "_LOADED", type(rules_module._LOADED)())
    dumped = []
    real = rules_module.json.dumps
    monkeypatch.setattr(rules_module.json, "dumps", lambda *a, **k: dumped.append(a) or real(*a, **k))
    builtin = load_rules()
    assert dumped == []
    extra = tmp_path / "mine.toml"
    extra.write_text('[[code]]\ncode = "NPU998"\ntitle = "t"\n', encoding="utf-8")
    first = load_rules([extra]).fingerprint
    extra.write_text('[[code]]\ncode = "NPU998"\ntitle = "t" \n', encoding="utf-8")  # other bytes, the same data
    again = load_rules([extra]).fingerprint
    assert dumped == []
    # (other bytes of the same data: another fingerprint, at worst a cache miss, never a wrong hit)
    assert len({builtin.fingerprint, first, again, ""}) == 4


def test_the_parsed_rules_folders_are_private_like_the_rest_of_the_cache(tmp_path):
    """The cache folder's subfolders are 0700 (test_cache: the results'); the parsed rules'
    were made with the umask's mode (0755) by mkdir(parents=True), which gives a missing parent
    the default mode whatever `mode` says."""
    import stat

    root = tmp_path / "cache"
    root.mkdir(mode=0o700)
    raw = [("torch.toml", {"rule": [{"code": "NPU101"}]})]
    ParsedRulesCache(root / "parsed-rules" / "v1", b"key").put(raw)
    assert ParsedRulesCache(root / "parsed-rules" / "v1", b"key").get() == raw
    for folder in (root / "parsed-rules", root / "parsed-rules" / "v1"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder


GC_PROBE = r"""
import gc, json, sys
collections, outside = [], []  # outside: not while files are migrated (runner.collecting_rarely)
def count(phase, info):
    if phase == "start":
        collections.append(info["generation"])
        if gc.get_threshold()[0] != 10_000:  # runner.GC_YOUNG
            outside.append(info["generation"])
gc.callbacks.append(count)
sys.argv = ["npu-migrate", *(sys.argv[1:] or ["--version"])]
from npu_migrate.__main__ import entry
try:
    entry()
except SystemExit as exc:
    code = exc.code
print(json.dumps({"exit": code, "collections": collections, "outside": outside, "frozen": gc.get_freeze_count(),
                  "enabled": gc.isenabled()}))
"""


@pytest.mark.slow
def test_the_command_line_is_imported_without_garbage_collections_and_frozen(tmp_path):
    """`npu-migrate --version` does nothing but import the command line: the collector, off while
    it is imported (__main__.entry), collects nothing then, and what was imported is frozen out of its
    reach (30 young collections before; 4-6 % of a warm run's CPU). It is on again for the run."""
    done = subprocess.run([sys.executable, "-c", GC_PROBE], cwd=tmp_path, capture_output=True, timeout=600)
    assert done.returncode == 0, done.stderr.decode()
    seen = json.loads(done.stdout.decode().splitlines()[-1])
    assert seen["exit"] == 0
    # (two young ones come after, from click's work for --version; 31 when the import was collected)
    assert len(seen["collections"]) <= 3, seen["collections"]
    assert seen["frozen"] > 10_000  # the modules' objects, out of the collector's reach
    assert seen["enabled"] is True


def test_a_walk_looks_only_for_the_ignore_files_its_folders_hold(tmp_path, monkeypatch):
    """discovery's walk tried to open .gitignore and .git/info/exclude in every folder (654 opens,
    nearly all failing, on transformers' src/); a folder's listing now says which are there. The
    files found, and what the ignore files exclude, are the same."""
    from npu_migrate import source
    from npu_migrate.discovery import FileFilter, discover

    for folder in ("a/b/c", "a/d", "e"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "x.py").write_text("x = 1\n", encoding="utf-8")
        (tmp_path / folder / "skip.py").write_text("x = 1\n", encoding="utf-8")
    (tmp_path / ".gitignore").write_text("skip.py\n", encoding="utf-8")
    (tmp_path / "a" / "d" / ".gitignore").write_text("!skip.py\n", encoding="utf-8")
    read = []
    real = source.read_regular
    monkeypatch.setattr(source, "read_regular", lambda path, *a, **k: read.append(path) or real(path, *a, **k))
    selection = discover([str(tmp_path)], FileFilter(root=str(tmp_path)))
    assert sorted(os.path.relpath(f, tmp_path) for f in selection.files) == [
        "a/b/c/x.py", "a/d/skip.py", "a/d/x.py", "e/x.py"]
    # (the folder given is looked at before it is listed: both of its own are tried)
    assert sorted(os.path.relpath(p, tmp_path) for p in read) == [".git/info/exclude", ".gitignore", "a/d/.gitignore"]


# Runs the program's entry point as `python -m npu_migrate ARGS` does, then says what startup.py compiled.
ENTRY_PROBE = r"""
import json, sys
# (under `coverage run` its start-up in this process reads pyproject.toml with tomllib first)
TOMLLIB_BEFORE = "tomllib" in sys.modules
from npu_migrate import __main__ as entry_point
sys.argv = ["npu-migrate", *sys.argv[1:]]
try:
    entry_point.entry()
except SystemExit as exc:
    code = exc.code
from npu_migrate import startup
print(json.dumps({"exit": code, "compiled": startup.COMPILED.compiled, "path": startup.COMPILED.path,
                  "kept rule sets": startup.KEPT_RULES.hits, "rule set path": startup.KEPT_RULES.path,
                  "kept views": startup.KEPT_RULES.view_hits, "tomllib": "tomllib" in sys.modules and not TOMLLIB_BEFORE,
                  "libcst texts": startup.COMPILED.libcst is not None, "libcst path": startup.COMPILED.libcst_path,
                  "patterns compiled": startup.PATTERNS.compiled, "patterns path": startup.PATTERNS.path}))
"""



def _untraced(env):
    """`env` without coverage's subprocess measurement (`coverage run -m pytest` with patch =
    subprocess): a traced process keeps its heap's teardown (__main__.console's rule for a tracer)
    and compiles coverage's own patterns before ours, which these probes count. What they probe is
    the process a user runs, untraced."""
    return {k: v for k, v in env.items() if k not in ("COVERAGE_PROCESS_CONFIG", "COVERAGE_PROCESS_START")}


def _entry(tmp_path, *args, write_bytecode=True):
    env = {**os.environ, "PYTHONPYCACHEPREFIX": str(tmp_path / "pycache"), "NO_COLOR": "1",
           "NPU_MIGRATE_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if not write_bytecode:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    done = subprocess.run([sys.executable, "-c", ENTRY_PROBE, *args], cwd=tmp_path, capture_output=True,
                          env=_untraced(env), timeout=600)
    lines = done.stdout.decode().splitlines()
    seen = json.loads(lines[-1])
    return seen, "\n".join(lines[:-1]), done.stderr.decode()


@pytest.mark.slow
def test_the_dataclasses_methods_are_compiled_by_the_first_run_only(tmp_path):
    """@dataclass compiles the text of each class's methods at every import: libcst's ~620 and
    ours were half of importing libcst and the command line (0.21 -> 0.10 CPU-s). The first run
    keeps their code where Python keeps the package's bytecode (startup.py); the next compiles
    none, and does the same."""
    (tmp_path / "train.py").write_text(SCRIPT, encoding="utf-8")
    first, out, err = _entry(tmp_path, "train.py", "--check", "--no-cache")
    assert first["exit"] == 1
    assert first["compiled"] > 600  # libcst's nodes' methods and ours
    assert first["path"].startswith(str(tmp_path / "pycache"))  # (PYTHONPYCACHEPREFIX, as for the .pyc files)
    assert os.path.isfile(first["path"])
    second, out2, err2 = _entry(tmp_path, "train.py", "--check", "--no-cache")
    assert (second["exit"], second["compiled"], out2, err2) == (1, 0, out, err)
    # a run that imports less (the command line, not libcst) keeps what the file had
    assert _entry(tmp_path, "--version")[0]["compiled"] == 0
    assert _entry(tmp_path, "train.py", "--check", "--no-cache")[0]["compiled"] == 0


@pytest.mark.slow
def test_the_regular_expressions_are_compiled_by_the_first_run_only(tmp_path):
    """`re` parses each pattern in Python at every start: the ~170 of a run (the rules', the
    prefilter's, tomllib's, libcst's) were ~25 ms of a one-script run. The first run keeps their
    compiled form beside the dataclasses' code (startup.CompiledPatterns); the next compiles none
    and answers the same."""
    (tmp_path / "train.py").write_text(SCRIPT, encoding="utf-8")
    first, out, err = _entry(tmp_path, "train.py", "--check", "--no-cache")
    assert first["exit"] == 1 and first["patterns compiled"] > 100
    assert first["patterns path"].startswith(str(tmp_path / "pycache")) and os.path.isfile(first["patterns path"])
    second, out2, err2 = _entry(tmp_path, "train.py", "--check", "--no-cache")
    # (a later run compiles only the few patterns no run before it needed: which of the prefilter's
    # patterns a run compiles, lazily, follows the order of sets, so the hash seed)
    assert (second["exit"], second["patterns compiled"] <= 5, out2, err2) == (1, True, out, err)
    third, out3, err3 = _entry(tmp_path, "train.py", "--check", "--no-cache")
    assert (third["exit"], third["patterns compiled"] <= 5, out3, err3) == (1, True, out, err)
    assert _entry(tmp_path, "--version")[0]["patterns compiled"] == 0
    # with PYTHONDONTWRITEBYTECODE the patterns are compiled and not written, as the .pyc files
    os.unlink(first["patterns path"])
    fourth, out4, err4 = _entry(tmp_path, "train.py", "--check", "--no-cache", write_bytecode=False)
    assert (fourth["patterns compiled"] > 100, out4, err4) == (True, out, err)
    assert not os.path.exists(first["patterns path"])


PATTERNS = [  # (pattern, flags): what re's parser and compiler each make something of
    ("", 0), ("a|b|cd", 0), (r"(?P<name>\w+)\s*=\s*(?P<value>[^#\n]*)(?:#.*)?$", 0), (r"(?i)cuda:\d+", 0),
    (r"\b(?:cuda|nccl|cudnn)\b", 2 | 64), (r"(?<=x)y(?=z)(?!q)", 0), (r"[^\W\d_]+\u00e9\U0001f600", 0),
    (rb"\x00[\x80-\xff]+(?P<tail>.)", 0), (r"(a)(b)?(?(2)c|d)\1", 0), (r"x{2,5}?y*+z++", 0),
    ("|".join(f"name{i}" for i in range(300)), 0), (r"\d+(?#comment)", 8 | 16), (r"ß|ǅ|ſ", 2), (r"(?a)\w", 0),
]


def _compiled_patterns(monkeypatch, path):
    """A CompiledPatterns on `path`, installed into `re` for the test only."""
    import re

    from npu_migrate.startup import CompiledPatterns

    module = getattr(re, "_compiler", None) or __import__("sre_compile")
    monkeypatch.setattr(module, "compile", module.compile)
    monkeypatch.setattr(module, "_sre", module._sre)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)  # (as a run of the command line that keeps them)
    kept = CompiledPatterns(str(path))
    kept.install()
    assert module.compile == kept.compile
    return kept


def test_a_kept_pattern_is_the_pattern_re_compiles(tmp_path, monkeypatch):
    """A pattern built from its kept arguments is the one `re` compiles from its text: equal (a
    Pattern compares its text, flags and code), with the same groups, and matching the same."""
    path = tmp_path / "regex_code.marshal"
    first = _compiled_patterns(monkeypatch, path)
    made = [first.compile(p, flags) for p, flags in PATTERNS]
    assert first.compiled == len(PATTERNS)
    first.save()
    monkeypatch.undo()
    second = _compiled_patterns(monkeypatch, path)
    assert len(second.known) == len(PATTERNS)
    for (p, flags), before in zip(PATTERNS, made):
        kept = second.compile(p, flags)
        fresh = second.original(p, flags)
        assert kept == fresh == before, p
        assert (kept.flags, kept.groups, kept.groupindex, kept.pattern) == (fresh.flags, fresh.groups, fresh.groupindex, p)
        sample = p if isinstance(p, str) else p.decode("latin-1")
        for text in ("", "abcd", "x = 1 # c", "CUDA:0 nccl", "xyz", "Straße ǅ", "name299 name7", "aabc", sample):
            data = text if isinstance(p, str) else text.encode("latin-1", "replace")
            assert [m.span() for m in kept.finditer(data)] == [m.span() for m in fresh.finditer(data)]
    assert second.compiled == 0  # (every one from the file)
    second.save()  # (nothing new: not written again)


def test_a_pattern_whose_compilation_warns_is_not_kept_and_warns_each_time(tmp_path, monkeypatch):
    """A hit would skip the parse that warns: such a pattern is compiled by `re` every time."""
    kept = _compiled_patterns(monkeypatch, tmp_path / "regex_code.marshal")
    for _ in range(2):
        with pytest.warns(FutureWarning, match="nested set"):
            kept.compile("[[a]", 0)
    assert ("[[a]", 0) not in kept.new and ("[[a]", 0) not in kept.known


def test_kept_patterns_past_the_bound_are_the_newest(tmp_path, monkeypatch):
    """The file holds what it had and what the run compiled up to MAX_PATTERNS; past it, the oldest
    go first, those the run used last (a run over many projects keeps no megabytes of others'
    gitignore lines)."""
    from npu_migrate.startup import CompiledPatterns

    path = tmp_path / "regex_code.marshal"
    kept = _compiled_patterns(monkeypatch, path)
    for text in ("a1", "a2", "a3"):
        kept.compile(text, 0)
    kept.save()
    monkeypatch.undo()
    kept = _compiled_patterns(monkeypatch, path)
    kept.compile("a1", 0)  # (from the file)
    kept.compile("b1", 0)  # (compiled)
    kept.save()
    monkeypatch.undo()
    assert set(_compiled_patterns(monkeypatch, path).known) == {("a1", 0), ("a2", 0), ("a3", 0), ("b1", 0)}
    monkeypatch.undo()
    monkeypatch.setattr(CompiledPatterns, "MAX_PATTERNS", 3)
    kept = _compiled_patterns(monkeypatch, path)
    kept.compile("a2", 0)
    kept.compile("c1", 0)
    kept.save()
    monkeypatch.undo()
    assert list(_compiled_patterns(monkeypatch, path).known) == [("b1", 0), ("a2", 0), ("c1", 0)]


def test_patterns_a_forked_process_compiled_are_kept_beside_the_main_processs(tmp_path, monkeypatch):
    """CompiledPatterns.forked: a worker keeps what it compiled (added to what the file holds
    then), and the main process's save keeps what workers added since it read the file; past
    MAX_PATTERNS the oldest go, what the process used or compiled and what others added last: a
    pattern only the workers use stays in a full file while newer ones come."""
    from npu_migrate.startup import CompiledPatterns

    path = tmp_path / "regex_code.marshal"
    kept = _compiled_patterns(monkeypatch, path)
    kept.compile("a1", 0)

    def in_child(*patterns):
        pid = os.fork()
        if pid == 0:
            try:
                kept.forked()
                for text in patterns:
                    kept.compile(text, 0)
                kept.save()
            finally:
                os._exit(0)
        assert os.waitpid(pid, 0)[1] == 0

    in_child("a1", "w1")  # (a1: the main process's, not yet kept; the child keeps it too)
    in_child("w2")
    monkeypatch.undo()
    assert set(_compiled_patterns(monkeypatch, path).known) == {("a1", 0), ("w1", 0), ("w2", 0)}
    monkeypatch.undo()
    kept = _compiled_patterns(monkeypatch, path)
    assert kept.compiled == 0 and kept.save() is None  # (nothing new here: not written)
    kept.compile("b1", 0)
    in_child("w3")
    kept.save()
    monkeypatch.undo()
    assert set(_compiled_patterns(monkeypatch, path).known) == {("a1", 0), ("w1", 0), ("w2", 0), ("w3", 0), ("b1", 0)}
    monkeypatch.undo()
    monkeypatch.setattr(CompiledPatterns, "MAX_PATTERNS", 6)
    kept = _compiled_patterns(monkeypatch, path)
    kept.compile("a1", 0)  # (from the file: used)
    in_child("w4", "w5")  # past the bound: the oldest goes (w1); a1, used, goes last
    assert list(CompiledPatterns(str(path)).known) == [(p, 0) for p in ("w2", "b1", "w3", "a1", "w4", "w5")]
    kept.compile("c1", 0)
    kept.save()  # past it: the oldest of what it read go; what it used and compiled and what a worker added last
    assert list(CompiledPatterns(str(path)).known) == [(p, 0) for p in ("b1", "w3", "a1", "w4", "w5", "c1")]


def test_a_workers_patterns_are_not_compiled_again_by_the_next_run(tmp_path, monkeypatch):
    """runner._worker keeps the patterns it compiled (startup.patterns_forked): the prefilter's
    patterns of the files a worker migrates, which the main process never compiles, were compiled
    again by every worker of every run (transformers, -j 2: ~1,600 compiles, ~0.5 CPU-s a run)."""
    import re

    from npu_migrate import prefilter, startup
    from npu_migrate.options import Options
    from npu_migrate.rules import default_rules
    from npu_migrate.runner import migrate_file, run

    path = tmp_path / "regex_code.marshal"
    files = []
    for i in range(4):
        script = tmp_path / f"train_{i}.py"
        script.write_text(f"import torch\nx = torch.zeros({i}).cuda()\ntorch.cuda.synchronize()\n", encoding="utf-8")
        files.append(str(script))
    rules = default_rules()
    outcomes = [migrate_file(f, Options(), rules).result for f in files]
    kept = _compiled_patterns(monkeypatch, path)
    monkeypatch.setattr(startup, "PATTERNS", kept)
    monkeypatch.setattr(prefilter, "_COMPILED", {})
    re.purge()
    assert [o.result for o in run(files, Options(), rules, jobs=2)] == outcomes
    assert not prefilter._COMPILED and os.path.isfile(path)  # (compiled in the workers only)
    monkeypatch.undo()
    second = _compiled_patterns(monkeypatch, path)
    monkeypatch.setattr(prefilter, "_COMPILED", {})
    re.purge()
    assert [migrate_file(f, Options(), rules).result for f in files] == outcomes
    assert prefilter._COMPILED and second.compiled == 0  # (each one from the file)


def test_kept_patterns_of_another_interpreter_or_not_ours_are_not_read(tmp_path, monkeypatch):
    """Another Python's (its version, its `_sre`), a broken file, one of another shape or one
    others may write is not read: every pattern is compiled by `re`."""
    import marshal
    from importlib.util import MAGIC_NUMBER

    path = tmp_path / "regex_code.marshal"
    kept = _compiled_patterns(monkeypatch, path)
    kept.compile("abc", 0)
    kept.save()
    data = path.read_bytes()
    stamp, patterns = marshal.loads(data[len(MAGIC_NUMBER):])
    assert len(patterns) == 1 and stamp == kept.stamp
    for content in (MAGIC_NUMBER + marshal.dumps((("3.0.0", stamp[1]), patterns)),
                    MAGIC_NUMBER + marshal.dumps(((stamp[0], stamp[1] + 1), patterns)),
                    b"\x00\x00\x00\x00" + data[len(MAGIC_NUMBER):], MAGIC_NUMBER + b"garbage", MAGIC_NUMBER + marshal.dumps([1])):
        path.write_bytes(content)
        monkeypatch.undo()
        assert not _compiled_patterns(monkeypatch, path).known, content
    path.write_bytes(data)
    monkeypatch.undo()
    assert _compiled_patterns(monkeypatch, path).known
    os.chmod(path, 0o666)  # (others may write it)
    monkeypatch.undo()
    assert not _compiled_patterns(monkeypatch, path).known


@pytest.mark.slow
def test_libcsts_kept_code_is_read_only_by_a_run_that_makes_libcsts_classes(tmp_path):
    """libcst's texts (~700) are kept in their own file, read only when libcst's dataclasses are
    made: a warm run answered from the cache, or `--version`, never reads it; the others' file
    holds none of them (a run that imports no libcst compiles nothing after a run that did)."""
    import marshal
    from importlib.util import MAGIC_NUMBER

    (tmp_path / "train.py").write_text(SCRIPT, encoding="utf-8")
    first, out, err = _entry(tmp_path, "train.py", "--check")
    assert first["libcst texts"] and os.path.isfile(first["libcst path"])

    def count(path):
        with open(path, "rb") as stream:
            return len(marshal.loads(stream.read()[len(MAGIC_NUMBER):]))

    assert count(first["libcst path"]) > 500 and count(first["path"]) < 400
    warm, out2, err2 = _entry(tmp_path, "train.py", "--check")  # (answered from the cache)
    assert (warm["libcst texts"], warm["compiled"], out2, err2) == (False, 0, out, err)
    assert _entry(tmp_path, "--version")[0]["libcst texts"] is False


@pytest.mark.slow
def test_compiled_dataclass_code_that_is_not_ours_is_compiled_again_and_replaced(tmp_path):
    """Another interpreter's file, a broken one, one of other types or one others may write is
    not read: the run compiles, answers the same and leaves a good file; with
    PYTHONDONTWRITEBYTECODE, or in a folder others may write, it writes none."""
    import marshal
    from importlib.util import MAGIC_NUMBER

    first, out, err = _entry(tmp_path, "--version", write_bytecode=False)
    assert first["compiled"] > 100 and not os.path.exists(first["path"])
    path = first["path"]
    os.makedirs(os.path.dirname(path))
    for content in (b"", b"garbage", b"\x00\x00\x00\x00" + marshal.dumps({}), MAGIC_NUMBER + b"\xff\x00",
                    MAGIC_NUMBER + marshal.dumps(["text"]), MAGIC_NUMBER + marshal.dumps({"text": 1, 2: "x"})):
        with open(path, "wb") as stream:
            stream.write(content)
        seen, out2, err2 = _entry(tmp_path, "--version")
        assert (seen["compiled"], out2, err2) == (first["compiled"], out, err), content
        with open(path, "rb") as stream:  # replaced by the texts it compiled
            data = stream.read()
        assert data.startswith(MAGIC_NUMBER) and len(marshal.loads(data[len(MAGIC_NUMBER):])) == first["compiled"]
    assert _entry(tmp_path, "--version")[0]["compiled"] == 0
    # a file others may write is not run (compiled again, and replaced by one of the user's)
    os.chmod(path, 0o666)
    assert _entry(tmp_path, "--version")[0]["compiled"] == first["compiled"]
    assert _entry(tmp_path, "--version")[0]["compiled"] == 0
    # nor written into a folder others may write (a shared install's)
    os.unlink(path)
    os.chmod(os.path.dirname(path), 0o777)
    assert _entry(tmp_path, "--version")[0]["compiled"] == first["compiled"]
    assert not os.path.exists(path)


def test_a_dataclass_made_from_kept_code_is_the_dataclass_made_from_its_text(tmp_path, monkeypatch):
    """What runs is the compilation of the text dataclasses wrote now: a text seen before gets its
    kept code object, any other is compiled."""
    import dataclasses

    from npu_migrate import startup
    from npu_migrate.startup import CompiledTexts

    def make():
        @dataclasses.dataclass(frozen=True)
        class Point:
            x: int
            y: int = 2

        return Point

    plain = make()
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    texts = CompiledTexts(str(tmp_path / "code.marshal"))
    monkeypatch.setattr(dataclasses, "exec", texts.exec, raising=False)
    made = make()
    assert texts.compiled == len(texts.new) == len(texts.used) >= 4  # __init__, __repr__, __eq__, __setattr__, ...
    compiled = set(texts.new)
    texts.save()
    again = CompiledTexts(str(tmp_path / "code.marshal"))
    assert set(again.known) == compiled
    monkeypatch.setattr(dataclasses, "exec", again.exec, raising=False)
    kept = make()
    assert again.compiled == 0
    # a file grown past MAX_TEXTS (old libcst's and Python's texts) keeps only what a run used
    again.known["def __create_fn__():\n return None"] = compile("x = 1", "<string>", "exec")
    monkeypatch.setattr(startup, "MAX_TEXTS", 1)

    @dataclasses.dataclass
    class Other:
        z: str

    assert again.compiled > 0
    other = set(again.new)
    again.save()
    assert set(CompiledTexts(str(tmp_path / "code.marshal")).known) == compiled | other  # not the stale one
    for cls in (made, kept):
        point = cls(1)
        assert (repr(point), point == cls(1, 2), hash(point) == hash(plain(1))) == (repr(plain(1)), True, True)
        assert repr(point).endswith("make.<locals>.Point(x=1, y=2)")
        with pytest.raises(dataclasses.FrozenInstanceError):
            point.x = 3  # type: ignore[misc]


def test_the_cann_targets_walk_matches_the_excludes_only_against_folders_and_scripts(tmp_path, monkeypatch):
    """The CANN version is looked for in shell scripts and Dockerfiles, three levels deep: the
    walk matched every file of those levels against the excludes and .gitignore files first
    (1,043 matches, pathspec's, on kornia), then dropped all but the scripts. It now asks only
    of the folders and of the files it reads; what it reads, and what it leaves out, is the same."""
    from npu_migrate.discovery import FileFilter, project_of
    from npu_migrate.targets.cann import project_cann_versions

    for folder in ("pkg/sub", "docker", "ignored", "build"):
        (tmp_path / folder).mkdir(parents=True)
        for i in range(5):
            (tmp_path / folder / f"m{i}.py").write_text("x = 1\n", encoding="utf-8")
    install = "source /usr/local/Ascend/ascend-toolkit/{}/set_env.sh\n"
    (tmp_path / "run.sh").write_text(install.format("7.0.0"), encoding="utf-8")
    (tmp_path / "docker" / "Dockerfile").write_text("RUN " + install.format("6.3.RC2"), encoding="utf-8")
    (tmp_path / "ignored" / "old.sh").write_text(install.format("5.0.4"), encoding="utf-8")  # .gitignore'd
    (tmp_path / "build" / "old.sh").write_text(install.format("5.1.RC1"), encoding="utf-8")  # a default exclude
    (tmp_path / "pkg" / "sub" / "skip.sh").write_text(install.format("5.1.RC2"), encoding="utf-8")
    (tmp_path / ".gitignore").write_text("ignored/\n*.py[cod]\nskip.sh\n", encoding="utf-8")
    asked = []
    real = FileFilter._excluded
    monkeypatch.setattr(FileFilter, "_excluded", lambda self, path, *a: asked.append(path) or real(self, path, *a))
    project = project_of([str(tmp_path)], FileFilter(root=str(tmp_path)))
    assert sorted(project_cann_versions(str(tmp_path), project=project)) == [
        ("6.3.RC2", "docker/Dockerfile"), ("7.0.0", "run.sh")]
    # the folder given, its folders, the scripts; not the 20 modules nor .gitignore (30 asked before)
    assert sorted(os.path.relpath(p, tmp_path) for p in asked) == [
        ".", "build", "docker", "docker/Dockerfile", "ignored", "pkg", "pkg/sub", "pkg/sub/skip.sh", "run.sh"]


def _collections(tmp_path, *args):
    env = {**os.environ, "NPU_MIGRATE_CACHE_DIR": str(tmp_path / "cache"), "NO_COLOR": "1"}
    done = subprocess.run([sys.executable, "-c", GC_PROBE, *args], cwd=tmp_path, capture_output=True, env=env,
                          timeout=600)
    seen = json.loads(done.stdout.decode().splitlines()[-1])
    assert seen["exit"] == 1 and seen["enabled"] is True, done.stderr.decode()
    return seen["collections"], seen["outside"]


@pytest.mark.slow
def test_a_run_sets_itself_up_without_garbage_collections(tmp_path):
    """What a run is set up with lives as long as it does (the settings, the targets, the rule
    set and its view, the project scan, the cache's index: startup.long_lived): built with the
    collector off, then frozen. A warm run of two files collected 12 times, a one-file run 13
    times besides migrating the file (5-8 % of a warm run's CPU); what is left: click's parse of
    the command line, the files' migration (libcst's import)."""
    for name in ("a.py", "b.py"):
        (tmp_path / name).write_text(SCRIPT, encoding="utf-8")
    cold, _ = _collections(tmp_path, ".", "--check", "-j", "1")
    warm, _ = _collections(tmp_path, ".", "--check", "-j", "1")
    assert len(warm) <= 3, warm
    assert len(cold) > len(warm)  # (the control: migrating collects)
    # (while the file is migrated the count depends on what is imported then, from .pyc or not)
    _, one = _collections(tmp_path, "a.py", "--check", "--no-cache")
    assert len(one) <= 4, one


def test_a_run_gives_back_to_the_collector_what_it_froze_however_it_ends(run_cli, tmp_path, monkeypatch):
    """long_lived freezes what a run is set up with; in a program (or a test) that runs
    npu-migrate in its own process, the run's end, whichever path it takes (stdin, a missing
    path, a usage error, a folder), gives it back to the collector (cli.py's run_scope): nothing
    of it stays frozen. A library call of pipeline.run freezes nothing."""
    import gc

    from npu_migrate import startup

    frozen = []

    class Counting:
        def __getattr__(self, name):
            return getattr(gc, name)

        def freeze(self):
            gc.freeze()
            frozen.append(gc.get_freeze_count())

    monkeypatch.setattr(startup, "gc", Counting())
    (tmp_path / "a.py").write_text(SCRIPT, encoding="utf-8")
    before = gc.get_freeze_count()
    runs = {"stdin": (["-", "--stdin-filename", "t.py", "--no-cache"], 0), "missing": (["nowhere.py"], 2),
            "usage": (["a.py", "--format", "yaml"], 2), "folder": ([".", "--check", "-j", "1"], 1)}
    for name, (args, code) in runs.items():
        frozen.clear()
        done = run_cli(*args, cwd=tmp_path, input=SCRIPT.encode())
        assert done.returncode == code, (name, done.stderr.decode())
        assert frozen and max(frozen) > before, name  # (the control: the run froze its set-up)
        assert gc.get_freeze_count() == before, name
    from npu_migrate.pipeline import run
    from npu_migrate.rules import load_rules
    from npu_migrate.settings import Settings
    from npu_migrate.discovery import FileFilter, project_of

    frozen.clear()
    run(Settings(paths=(str(tmp_path),)), load_rules(), [str(tmp_path / "a.py")],
        project_of([str(tmp_path)], FileFilter(root=str(tmp_path))))
    assert frozen == [] and gc.get_freeze_count() == before


def test_the_modules_of_a_package_are_those_pkgutil_lists(tmp_path):
    """kinds/ and codemods/torch/ register their kinds by importing every module in them, listed
    by startup.package_modules as pkgutil.iter_modules lists them (in its order: the registry's)."""
    import pkgutil

    import npu_migrate.codemods
    from npu_migrate import frontends, kinds, report
    from npu_migrate.codemods import torch as torch_pass
    from npu_migrate.startup import package_modules

    def listed(folder):
        return [info.name for info in pkgutil.iter_modules([str(folder)])]

    for package in (kinds, torch_pass, report, frontends, npu_migrate.codemods):
        assert package_modules(package.__path__[0]) == listed(package.__path__[0]), package.__name__
    for name in ("b.py", "a.py", "a.pyc", "c.cpython-311-x86_64-linux-gnu.so", "d.txt", "e.x.py", "__init__.py"):
        (tmp_path / name).write_text("", encoding="utf-8")
    for folder, inside in (("pkg", "__init__.py"), ("compiled", "__init__.pyc"), ("data", "x.py"), ("dot.ted", "__init__.py"),
                           ("__pycache__", "__init__.cpython-311.pyc")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / inside).write_text("", encoding="utf-8")
    assert package_modules(str(tmp_path)) == listed(tmp_path) == ["a", "b", "c", "compiled", "pkg"]
    assert package_modules(str(tmp_path / "missing")) == listed(tmp_path / "missing") == []


# The code of every dataclass method in libcst and npu_migrate, as a structure (marshal's bytes
# depend on reference counts): what runs, whether it was compiled now or kept.
METHODS_PROBE = r"""
import dataclasses, hashlib, json, sys, types
if sys.argv[1] == "kept":
    from npu_migrate.startup import compile_dataclasses_once
    texts = compile_dataclasses_once()
import libcst, npu_migrate.cli, npu_migrate.codemods.torch
def shape(value):
    if isinstance(value, types.CodeType):
        return ("code", value.co_code, value.co_names, value.co_varnames, value.co_freevars, value.co_cellvars,
                value.co_argcount, value.co_kwonlyargcount, value.co_posonlyargcount, value.co_flags,
                value.co_name, value.co_qualname if hasattr(value, "co_qualname") else "", value.co_firstlineno,
                value.co_stacksize, value.co_filename, getattr(value, "co_linetable", getattr(value, "co_lnotab", b"")),
                tuple(shape(c) for c in value.co_consts))
    return repr(value)
seen = {}
for name, module in sorted(sys.modules.items()):
    if not name.startswith(("libcst", "npu_migrate")):
        continue
    for value in list(vars(module).values()):
        if isinstance(value, type) and dataclasses.is_dataclass(value) and value.__module__ == name:
            for method in ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__", "__lt__"):
                function = value.__dict__.get(method)
                if isinstance(function, types.FunctionType):
                    key = f"{name}.{value.__qualname__}.{method}"
                    seen[key] = hashlib.sha256(repr(shape(function.__code__)).encode()).hexdigest()
print(json.dumps({"methods": seen, "compiled": texts.compiled if sys.argv[1] == "kept" else None}))
if sys.argv[1] == "kept":
    texts.save()  # (as __main__.entry does when the run ends)
"""


@pytest.mark.slow
def test_every_dataclass_method_of_libcst_and_ours_is_the_same_code_kept_or_compiled(tmp_path):
    """startup.py's kept code runs exactly what @dataclass would compile now: every generated
    method of every dataclass in libcst and npu_migrate (~850: __init__, __repr__, __eq__,
    __hash__, frozen __setattr__/__delattr__) has the same bytecode, constants, names and
    positions whether compiled in the process, by the run that kept it, or read back."""
    env = {**os.environ, "PYTHONPYCACHEPREFIX": str(tmp_path / "pycache")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)

    def methods(how):
        done = subprocess.run([sys.executable, "-c", METHODS_PROBE, how], cwd=tmp_path, capture_output=True,
                              env=env, timeout=600)
        assert done.returncode == 0, done.stderr.decode()
        return json.loads(done.stdout.decode())

    fresh = methods("fresh")["methods"]
    assert len(fresh) > 600 and any(k.startswith("libcst._nodes.expression.Name.") for k in fresh)
    first, kept = methods("kept"), methods("kept")
    assert first["compiled"] > 600 and kept["compiled"] == 0  # (compiled, then read back)
    assert first["methods"] == kept["methods"] == fresh


# -- the built-in rule set, kept between runs (startup.KeptRuleSet) -----------------------------


@pytest.fixture
def kept_rules(tmp_path, monkeypatch):
    """A KeptRuleSet in tmp_path that load_rules asks, with no rule set loaded in this process."""
    from collections import OrderedDict

    from npu_migrate import rules, startup

    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    kept = startup.KeptRuleSet(str(tmp_path / "rule_set.pickle"))
    monkeypatch.setattr(startup, "KEPT_RULES", kept)
    monkeypatch.setattr(rules, "_LOADED", OrderedDict())
    built = []
    real = rules.build_ruleset
    monkeypatch.setattr(rules, "build_ruleset", lambda *a, **k: built.append(1) or real(*a, **k))
    return kept, built


def test_a_kept_rule_set_is_the_rule_set_the_build_gives(kept_rules, monkeypatch):
    """The second load reads what the first built and kept: no build, and the same rule set, field
    by field (every rule, doc and index), as a build from the shipped parse of the same files."""
    from collections import OrderedDict

    from npu_migrate import rules
    from npu_migrate.kinds import KINDS
    from npu_migrate.targets.tables import shipped_toml

    kept, built = kept_rules
    first = rules.load_rules()
    assert built == [1] and kept.pending is not None and kept.hits == 0
    kept.save()
    assert os.path.isfile(kept.path) and kept.pending is None
    monkeypatch.setattr(rules, "_LOADED", OrderedDict())
    again = rules.load_rules()
    assert built == [1] and kept.hits == 1 and again is not first
    raw = [(p.name, shipped_toml(str(p), p.read_bytes())) for p in builtin_rule_files()]
    fresh = rules.build_ruleset(raw, fingerprint=first.fingerprint)
    for field in dataclasses.fields(rules.RuleSet):
        assert getattr(again, field.name) == getattr(fresh, field.name), field.name
    assert again == fresh and again.codes() == fresh.codes()
    assert all(kind is KINDS[kind.name] for kind in again.applied_kinds)
    assert {rule.severity for rule in again.rules} <= set(rules.Severity)  # (the enum's own members)


def test_a_rule_set_is_kept_only_for_the_same_files_code_and_interpreter(kept_rules, tmp_path, monkeypatch):
    """An entry is read only when its key (the rule files' names and bytes), the interpreter's
    version and every module it names (path, mtime, size) are the same now, and from a file of
    the user's own no one else may write; anything else, damaged entries too, is a miss. With
    PYTHONDONTWRITEBYTECODE, or with a --rules file, nothing is kept."""
    import marshal
    import pickle
    from importlib.util import MAGIC_NUMBER

    from npu_migrate import rules

    from npu_migrate import startup

    kept, _ = kept_rules
    rule_set = rules.load_rules()
    assert kept.pending is not None
    kept.pending = None
    package = tmp_path / "package"
    package.mkdir()
    module = package / "module.py"
    module.write_text("x = 1\n")
    kept = startup.KeptRuleSet(kept.path, package=str(package))  # (its modules: those of `package`)
    monkeypatch.setattr(startup, "KEPT_RULES", kept)

    def entry(key=b"key", version=sys.version, modules=None, body=None):
        status = os.stat(module)
        modules = ((str(module), status.st_mtime_ns, status.st_size),) if modules is None else modules
        body = pickle.dumps((rule_set, {})) if body is None else body
        with open(kept.path, "wb") as stream:
            stream.write(MAGIC_NUMBER + marshal.dumps((key, version, modules, body)))
        os.chmod(kept.path, 0o644)

    entry()
    assert kept.get(b"key") == rule_set
    assert kept.get(b"other key") is None
    entry(version=sys.version + "+")
    assert kept.get(b"key") is None
    entry(modules=((str(package / "gone.py"), 1, 1),))
    assert kept.get(b"key") is None
    entry()  # a copy of the package: the kept file names the modules of the one it was copied from
    assert startup.KeptRuleSet(kept.path, package=str(tmp_path / "copy")).get(b"key") is None
    entry()
    module.write_text("x = 22\n")  # another size
    assert kept.get(b"key") is None
    entry()
    os.utime(module, ns=(1, 1))  # another mtime
    assert kept.get(b"key") is None
    entry()
    os.chmod(kept.path, 0o666)  # others may write it
    assert kept.get(b"key") is None
    for content in (b"", b"garbage", b"\x00\x00\x00\x00" + marshal.dumps((b"key", sys.version, (), b"")),
                    MAGIC_NUMBER + b"\xff", MAGIC_NUMBER + marshal.dumps([b"key"]),
                    MAGIC_NUMBER + marshal.dumps((b"key", sys.version, (), b"not a pickle")),
                    MAGIC_NUMBER + marshal.dumps((b"key", sys.version, (), pickle.dumps(rule_set))),  # no views
                    MAGIC_NUMBER + marshal.dumps((b"key", sys.version, (), pickle.dumps((rule_set, []))))):
        with open(kept.path, "wb") as stream:
            stream.write(content)
        assert kept.get(b"key") is None, content
    # what is written: nothing under PYTHONDONTWRITEBYTECODE, nothing for a set with --rules files
    monkeypatch.setattr(rules, "_LOADED", type(rules._LOADED)())
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    rules.load_rules()
    assert kept.pending is None
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    extra = tmp_path / "extra.toml"
    extra.write_text('[[device]]\ncode = "NPU901"\nmessage = "m"\nfrom = "xpu"\nto = "npu"\n'
                     'examples = [{ before = "x = \'xpu\'", after = "x = \'npu\'" }]\n')
    rules.load_rules([extra])
    assert kept.pending is None and kept.hits == 1
    # a set built here names its package's modules only (none loaded from `package`), each as it is now
    kept.put(b"key", rule_set)
    assert marshal.loads(kept.pending[len(MAGIC_NUMBER):])[2] == ()
    package_folder = os.path.dirname(os.path.abspath(startup.__file__))
    real = startup.KeptRuleSet(kept.path)
    real.put(b"key", rule_set)
    modules = marshal.loads(real.pending[len(MAGIC_NUMBER):])[2]
    assert {os.path.join(package_folder, "rules.py"), os.path.join(package_folder, "kinds", "base.py")} <= {
        m[0] for m in modules}
    assert all(m[0].startswith(package_folder + os.sep) and (os.stat(m[0]).st_mtime_ns, os.stat(m[0]).st_size)
               == m[1:] for m in modules)


def test_the_targets_view_is_kept_with_the_rule_set_for_the_same_targets_and_tables(kept_rules, tmp_path,
                                                                                      monkeypatch):
    """rules_for_targets (~5 ms of every run) derives the view once: the next run reads it with
    the rule set, the same view field by field, still sharing the rules' lists (pickled together).
    Other targets' specs, or another byte in a target table, derive it again."""
    import shutil
    from collections import OrderedDict

    from npu_migrate import rules
    from npu_migrate.targets import RunTargets, rule_view, tables

    kept, built = kept_rules
    derived = []
    real_derive = rule_view._derive
    monkeypatch.setattr(rule_view, "_derive", lambda *a: derived.append(a[2:]) or real_derive(*a))

    def fresh_run(*targets):
        monkeypatch.setattr(rules, "_LOADED", OrderedDict())
        monkeypatch.setattr(rule_view, "_CACHE", {})
        monkeypatch.setattr(rule_view, "_BY_FINGERPRINT", {})
        loaded = rules.load_rules()
        view = rule_view.rules_for_targets(loaded, RunTargets.of(*targets))
        kept.save()
        return loaded, view

    first, first_view = fresh_run()
    assert (built, derived, kept.view_hits) == ([1], [("", "")], 0)
    again, view = fresh_run()
    assert (built, derived, kept.hits, kept.view_hits) == ([1], [("", "")], 1, 1)
    assert view is not first_view and view.targets == ("", "", "")
    for field in dataclasses.fields(rules.RuleSet):
        assert getattr(view, field.name) == getattr(first_view, field.name), field.name
    assert first_view.rules is first.rules and view.rules is again.rules  # (shared, as derived)
    fresh_run("2.1.0.post8")  # other targets: derived, and kept beside the first
    assert derived == [("", ""), ("2.1.0.post8", "")] and kept.view_hits == 1
    fresh_run()
    fresh_run("2.1.0.post8")
    assert len(derived) == 2 and kept.view_hits == 3
    copy = tmp_path / "rules"
    shutil.copytree(tables.data_dir(), copy)
    monkeypatch.setattr(rule_view, "table_path", lambda name: str(copy / "targets" / name))
    fresh_run()  # the same tables elsewhere: the same view
    assert len(derived) == 2 and kept.view_hits == 4
    table = copy / "targets" / "mindspore.toml"
    table.write_bytes(table.read_bytes() + b"\n")
    fresh_run()
    assert derived[2:] == [("", "")] and kept.view_hits == 4 and built == [1]


def test_the_rule_sets_build_reads_no_file():
    """A kept rule set is named by its rule files' bytes and the package's modules: the build of
    a set from their parse must read nothing else (a data file it read would be a dependency the
    kept file does not name)."""
    from npu_migrate import rules
    from npu_migrate.targets.tables import shipped_toml

    raw = [(p.name, shipped_toml(str(p), p.read_bytes())) for p in builtin_rule_files()]
    opened = []
    hook_on = [True]

    def hook(event, args):
        if hook_on[0] and event == "open":
            opened.append(args[0])

    sys.addaudithook(hook)
    try:
        rules.build_ruleset(raw, fingerprint="x")
    finally:
        hook_on[0] = False
    assert [p for p in opened if not str(p).endswith(".pyc")] == []


@pytest.mark.slow
def test_the_command_line_builds_the_built_in_rule_set_once(tmp_path):
    """The first run builds the rule set and keeps it beside the compiled dataclass code; the next
    reads it and answers the same; with PYTHONDONTWRITEBYTECODE nothing is written."""
    (tmp_path / "train.py").write_text(SCRIPT, encoding="utf-8")
    first, out, err = _entry(tmp_path, "train.py", "--check", "--no-cache")
    assert first["exit"] == 1 and first["kept rule sets"] == 0
    assert first["rule set path"].startswith(str(tmp_path / "pycache")) and os.path.isfile(first["rule set path"])
    second, out2, err2 = _entry(tmp_path, "train.py", "--check", "--no-cache")
    assert (second["exit"], second["kept rule sets"], out2, err2) == (1, 1, out, err)
    assert (first["kept views"], second["kept views"]) == (0, 1)  # (the targets' view, kept with it)
    # no TOML parsed (the shipped parses, then the kept set): tomllib is not imported (~2 ms)
    assert (first["tomllib"], second["tomllib"]) == (False, False)
    os.unlink(first["rule set path"])
    third, out3, err3 = _entry(tmp_path, "train.py", "--check", "--no-cache", write_bytecode=False)
    assert (third["kept rule sets"], out3, err3) == (0, out, err) and not os.path.exists(first["rule set path"])


def test_the_project_scan_parses_no_file_whose_imports_name_no_cuda_only_library_at_their_start(monkeypatch):
    """The scan parses a file for its CUDA-only code (project_values._cuda_only_code) only when an
    import names such a library's module (`cupy`, `numba.cuda`, `cuda.bindings`):
    `from torch.cuda.amp import autocast` (`cuda` after a dot: not the module cuda) made nearly
    every PyTorch script be parsed (c85c946: +91 M instructions, +6%, on bench/train_500.py)."""
    from npu_migrate import project_values
    from npu_migrate.kinds.finding import cuda_only_libraries

    gates = cuda_only_libraries(load_rules().findings)
    assert {"cupy", "numba.cuda", "cuda.bindings"} <= set(gates)
    worth = project_values._gates_re(gates)
    assert worth is not None
    script = SCRIPT.replace("import torch\n", "import torch\nimport torch.cuda.nvtx\n"
                            "from torch.cuda.amp import autocast, GradScaler\n").encode()
    parsed = []
    real = project_values.ast.parse
    monkeypatch.setattr(project_values.ast, "parse", lambda *a, **k: parsed.append(1) or real(*a, **k))
    assert project_values._cuda_only_code(script, gates, worth) == () and parsed == []
    for line in (b"import cupy\n", b"from numba import cuda\n", b"import cuda.bindings\n"):
        project_values._cuda_only_code(line + script, gates, worth)
    assert parsed == [1, 1, 1]


CONSOLE_PROBE = r"""
import atexit, os, sys, threading, time
mode = sys.argv.pop(1)

class Teardown:  # (its __del__ runs only when Python takes the modules apart; stdout is flushed by then)
    def __del__(self, write=os.write):  # (the module's globals may be gone by then)
        write(1, b"teardown\n")

kept = Teardown()
atexit.register(lambda: sys.stdout.write("atexit\n"))
if mode == "thread":  # a thread that is not a daemon, still running when the run ends: Python waits for it
    import npu_migrate.cli as cli
    ended, real_main = threading.Event(), cli.main
    def main(*args, **kwargs):
        try:
            return real_main(*args, **kwargs)
        finally:
            ended.set()
    cli.main = main
    threading.Thread(target=lambda: (ended.wait(), time.sleep(1), sys.stdout.write("thread done\n"))).start()
if mode == "traced":
    sys.settrace(lambda *args: None)
from npu_migrate.__main__ import console
sys.argv = ["npu-migrate", *sys.argv[1:]]
console()
"""


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["plain", "thread", "traced"])
def test_the_console_script_ends_after_pythons_exit_steps_without_the_teardown(tmp_path, mode):
    """`npu-migrate` (__main__.console) ends the process once Python's exit has run the atexit
    functions and flushed the output, without taking the heap apart; with a thread still running
    that is not a daemon, or a tracer or profiler on, Python ends it as usual. The output and the
    exit code are the run's either way."""
    (tmp_path / "train.py").write_text(SCRIPT, encoding="utf-8")
    env = {**os.environ, "NPU_MIGRATE_CACHE_DIR": str(tmp_path / "cache"), "NO_COLOR": "1"}
    done = subprocess.run([sys.executable, "-c", CONSOLE_PROBE, mode, "train.py", "--check"], cwd=tmp_path,
                          capture_output=True, env=_untraced(env), timeout=600)
    plain = subprocess.run([sys.executable, "-c", "import sys; from npu_migrate.__main__ import entry; "
                            "sys.argv = ['npu-migrate', *sys.argv[1:]]; entry()", "train.py", "--check"],
                           cwd=tmp_path, capture_output=True, env=_untraced(env), timeout=600)
    assert (done.returncode, done.stderr) == (plain.returncode, plain.stderr) == (1, plain.stderr)
    lines = done.stdout.decode().splitlines()
    assert "\n".join(line for line in lines if line not in ("atexit", "teardown", "thread done")) == \
        plain.stdout.decode().rstrip("\n")
    ends = [line for line in lines if line in ("atexit", "teardown", "thread done")]
    assert ends == {"plain": ["atexit"], "thread": ["thread done", "atexit", "teardown"],
                    "traced": ["atexit", "teardown"]}[mode]


@pytest.mark.slow
def test_the_console_scripts_exit_code_is_the_runs(tmp_path):
    (tmp_path / "clean.py").write_text("print('hello')\n", encoding="utf-8")
    (tmp_path / "train.py").write_text(SCRIPT, encoding="utf-8")
    env = {**os.environ, "NPU_MIGRATE_CACHE_DIR": str(tmp_path / "cache"), "NO_COLOR": "1"}
    for args, code in ((["clean.py", "--check"], 0), (["train.py", "--check"], 1), (["missing.py"], 2),
                       (["--bogus-option"], 2), (["--version"], 0)):
        done = subprocess.run([sys.executable, "-m", "npu_migrate", *args], cwd=tmp_path, capture_output=True,
                              env=env, timeout=600)
        assert done.returncode == code, (args, done.stderr)
