"""Security (issue 7): npu-migrate never imports or runs the code it reads; rule and config files
are data (TOML, validated); --output-dir never writes outside its folder; generated code never
runs a shell and cannot be made to run injected code; CSV reports are safe to open in a
spreadsheet. (bandit and pip-audit run in .ci/run.)
"""

from __future__ import annotations

import ast
import csv
import json
import os
import sys
from pathlib import Path

import pytest

from npu_migrate.discovery import FileFilter
from npu_migrate.modelarts import render_boot
from npu_migrate.output_dir import write_tree
from npu_migrate.source import read_source

GPU = b"import torch\n\nmodel = model.cuda()\n"
NPU = b"import torch\nimport torch_npu  # noqa: F401\n\nmodel = model.npu()\n"
ROOT = Path(__file__).resolve().parent.parent


def console_script() -> str:
    return str(Path(sys.executable).with_name("npu-migrate"))


def run_tool(*args, cwd):
    """The console script, as a user (or pre-commit) runs it: the current folder is not on
    sys.path, so a `click.py` in the tree cannot stand in for the real one."""
    import subprocess

    env = dict(os.environ, NPU_MIGRATE_CACHE_DIR=str(Path(cwd) / ".cache"))
    return subprocess.run([console_script(), *args], cwd=cwd, capture_output=True, env=env)


def booby_trap(marker: Path, what: str) -> str:
    """Python that leaves `marker` behind if anything ever runs (or imports) it."""
    return f"open({str(marker)!r}, 'a').write({what!r} + '\\n')\nraise SystemExit(99)\n"


def test_the_code_being_migrated_is_never_run_nor_imported(tmp_path):
    marker = tmp_path / "MARKER"
    tree = tmp_path / "proj"
    tree.mkdir()
    trap = booby_trap(marker, "module")
    (tree / "train.py").write_text(
        "import argparse\nimport torch\n" + trap.replace("raise SystemExit(99)\n", "")
        + "parser = argparse.ArgumentParser()\nparser.add_argument('--data', default='d')\n"
        "args = parser.parse_args()\nmodel = model.cuda()\nif __name__ == '__main__':\n"
        + "".join("    " + line + "\n" for line in trap.splitlines())
    )
    for name in ("setup.py", "conftest.py", "__init__.py", "sitecustomize.py", "usercustomize.py",
                 "click.py", "libcst.py", "rich.py", "black.py", "pathspec.py", "json.py", "torch.py"):
        (tree / name).write_text(booby_trap(marker, name) + "import torch\nx = t.cuda()\n")
    cell = {"cell_type": "code", "execution_count": None, "id": "c1", "metadata": {}, "outputs": [],
            "source": [booby_trap(marker, "notebook"), "import torch\n", "x = t.cuda()\n"]}
    notebook = {"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (tree / "nb.ipynb").write_text(json.dumps(notebook))
    (tree / "run.sh").write_text(f"#!/bin/sh\ntouch {marker}\nCUDA_VISIBLE_DEVICES=0 python train.py\n")
    (tree / "run.sh").chmod(0o755)

    r = run_tool(".", "--write", "--modelarts", "--modelarts-entry", "--entry", "train.py",
                 "--color", "never", cwd=tree)

    assert r.returncode in (0, 2), r.stderr.decode()
    assert b"Traceback" not in r.stderr, r.stderr.decode()
    assert not marker.exists(), marker.read_text()
    assert (tree / "modelarts_entry_train.py").exists()
    assert b"model.npu()" in (tree / "train.py").read_bytes()


def test_rule_and_config_files_are_parsed_as_data(tmp_path, run_cli):
    marker = tmp_path / "MARKER"
    (tmp_path / "train.py").write_bytes(GPU)
    (tmp_path / "evil.py").write_text(booby_trap(marker, "rules"))
    (tmp_path / "evil.toml").write_text(
        '[[method]]\ncode = "NPU199"\nfrom = "__import__(\\"os\\").system(\\"touch MARKER\\")"\n'
        'to = "npu"\nmessage = "{__import__}"\n')
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "train.py").write_bytes(GPU)
    (conf / "pyproject.toml").write_text('[tool.npu-migrate]\nrules = ["../evil.py"]\n')

    as_python = run_cli("train.py", "--rules", "evil.py", cwd=tmp_path)
    as_toml = run_cli("train.py", "--rules", "evil.toml", cwd=tmp_path)
    from_config = run_cli("train.py", cwd=conf)

    assert as_python.returncode == as_toml.returncode == from_config.returncode == 2
    assert as_python.stderr.decode().startswith("npu-migrate: error: evil.py: invalid TOML: ")
    assert "evil.toml: [[method]] #1 (NPU199): 'from' and 'to' must be identifiers" in as_toml.stderr.decode()
    assert "evil.py: invalid TOML: " in from_config.stderr.decode()
    assert not marker.exists()
    assert (tmp_path / "train.py").read_bytes() == GPU and (conf / "train.py").read_bytes() == GPU


# ------------------------------------------------------------------------------ --output-dir


def test_output_dir_never_follows_a_symlink_out_of_the_input(tmp_path, run_cli):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.py").write_bytes(GPU)
    src = tmp_path / "proj"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "train.py").write_bytes(GPU)
    (src / "ext").symlink_to(outside, target_is_directory=True)
    (src / "secret_link.py").symlink_to(outside / "secret.py")
    (src / "pkg" / "alias.py").symlink_to("train.py")

    r = run_cli("proj", "--output-dir", "out", "--color", "never", cwd=tmp_path)

    assert r.returncode == 0, r.stderr.decode()
    out = tmp_path / "out"
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == ["pkg", "pkg/alias.py", "pkg/train.py"]
    assert (out / "pkg" / "train.py").read_bytes() == NPU
    assert os.readlink(out / "pkg" / "alias.py") == "train.py"  # the copy's own file, not the input's
    assert "proj/secret_link.py: symlink not copied: it leads out of the input" in r.stderr.decode()
    assert sorted(os.listdir(outside)) == ["secret.py"] and (outside / "secret.py").read_bytes() == GPU
    assert (src / "pkg" / "train.py").read_bytes() == GPU


def test_output_dir_paths_with_dot_dot_stay_inside(tmp_path, run_cli):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "c").mkdir()
    (tmp_path / "a" / "b" / "x.py").write_bytes(GPU)
    (tmp_path / "c" / "y.py").write_bytes(GPU)

    r = run_cli("a/b/../b/x.py", "c/../c/y.py", "--output-dir", "out", cwd=tmp_path)

    assert r.returncode == 0, r.stderr.decode()
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.py"))
    assert written == ["a/b/x.py", "c/y.py", "out/a/b/x.py", "out/c/y.py"]


@pytest.mark.parametrize("planted", ["folder", "file"])
def test_output_dir_does_not_write_through_a_symlink_planted_during_the_run(tmp_path, planted):
    # The CLI refuses a non-empty --output-dir; this is what a symlink that appears in it while
    # the run works (another process) would do to the writer.
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "train.py").write_bytes(b"precious\n")
    src = tmp_path / "proj"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "train.py").write_bytes(GPU)
    (src / "pkg" / "notes.txt").write_text("notes\n")
    out = tmp_path / "out"
    if planted == "folder":
        out.mkdir()
        (out / "pkg").symlink_to(victim, target_is_directory=True)
    else:
        (out / "pkg").mkdir(parents=True)
        (out / "pkg" / "train.py").symlink_to(victim / "train.py")
        (out / "pkg" / "notes.txt").symlink_to(victim / "train.py")
    source = read_source(str(src / "pkg" / "train.py"))

    warnings, errors = write_tree([str(src)], str(out), FileFilter(root=str(tmp_path)),
                                  {str(src / "pkg" / "train.py"): (source, NPU.decode())})

    assert errors == {str(src / "pkg" / "train.py"): "not written: a symlink in --output-dir leads out of it"}
    assert warnings == [f"{src / 'pkg' / 'notes.txt'}: not written: a symlink in --output-dir leads out of it"]
    assert sorted(os.listdir(victim)) == ["train.py"]
    assert (victim / "train.py").read_bytes() == b"precious\n"


# ------------------------------------------------------------------------------ generated code

SHELL_CALLS = {"system", "popen", "getoutput", "getstatusoutput", "spawnl", "spawnlp", "execl", "execlp"}


def shell_uses(tree: ast.AST):
    """Calls that hand a string to a shell: os.system & co, or any call with shell=True."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        if isinstance(node.func, ast.Attribute) and node.func.attr in SHELL_CALLS:
            yield ast.unparse(node)
        for kw in node.keywords:
            if kw.arg == "shell" and not (isinstance(kw.value, ast.Constant) and kw.value.value is False):
                yield ast.unparse(node)


HOSTILE_NAMES = [
    'x"""; import os; os.system("touch PWNED"); """.py',
    "x'''; import os; os.system('touch PWNED'); '''.py",
    "back\\slash\\N{x}.py",
    "$(touch PWNED); `touch PWNED`.py",
    "spaces and ; semicolons && pipes | here.py",
    "ends in a quote\".py",
]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_boot_file_for_a_hostile_script_name_runs_exactly_that_file(name):
    text = render_boot(name)
    tree = ast.parse(text)
    benign = ast.parse(render_boot("train.py"))
    # Same code as for a benign name: only string constants differ (no statement injected).
    strip = ast.NodeTransformer()
    strip.visit_Constant = lambda node: ast.Constant(value=None)
    assert ast.dump(strip.visit(tree)) == ast.dump(strip.visit(ast.parse(render_boot("train.py"))))
    values = {n.targets[0].id: n.value.value for n in ast.parse(text).body
              if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name) and isinstance(n.value, ast.Constant)}
    assert values["TRAINING_SCRIPT"] == name
    assert list(shell_uses(tree)) == [] and list(shell_uses(benign)) == []


def test_generated_code_never_calls_a_shell(tmp_path, run_cli):
    src = tmp_path / "proj"
    src.mkdir()
    (src / "train.py").write_text(
        "import argparse\nimport torch\nparser = argparse.ArgumentParser()\n"
        "parser.add_argument('--data_dir', default='data')\nparser.add_argument('--output_dir', default='out')\n"
        "args = parser.parse_args()\nmodel = model.cuda()\n")
    r = run_cli("proj", "--write", "--modelarts", "--modelarts-entry", "--entry", "proj/train.py", cwd=tmp_path)
    assert r.returncode == 0, r.stderr.decode()
    for name in ("train.py", "modelarts_entry_train.py"):
        tree = ast.parse((src / name).read_text())
        assert list(shell_uses(tree)) == [], name
    template = ROOT / "npu_migrate" / "modelarts" / "boot_template.py"
    assert list(shell_uses(ast.parse(template.read_text()))) == []


# ------------------------------------------------------------------------------ CSV reports


def test_csv_report_cells_cannot_become_formulas(tmp_path, run_cli):
    src = tmp_path / "proj"
    src.mkdir()
    names = ['=HYPERLINK("evil.example").py', "+1+1.py", "-2.py", "@SUM(A1).py", "%x.py", "＝1.py"]
    for name in names:
        (src / name).write_bytes(GPU + b"torch.cuda.nvtx.range_push('x')\n")

    r = run_cli(".", "--format", "csv", "-o", "../reports", cwd=src)

    assert r.returncode == 0, r.stderr.decode()
    for report in ("change_list.csv", "unsupported_api.csv"):
        with open(tmp_path / "reports" / report, newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f))[1:]
        assert rows, report
        files = {row[0] for row in rows}
        assert files == {"'" + name for name in names}, (report, files)
        for row in rows:
            assert not str(row[0]).startswith(("=", "+", "-", "@", "%", "＝")), row
