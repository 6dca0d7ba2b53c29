"""The test suite's own rules, which keep `-m "not slow"` a per-change loop that runs in this
process (CONTRIBUTING, "What runs when"): conftest.py fails a test that starts a process without
being marked slow, and names the command."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

CONFTEST = Path(__file__).resolve().parent / "conftest.py"

INNER = '''
import subprocess
import sys

import pytest


def test_starts_python_unmarked():
    subprocess.run([sys.executable, "-c", "pass"], check=True)


@pytest.mark.slow
def test_starts_python_marked():
    subprocess.run([sys.executable, "-c", "pass"], check=True)


def test_applies_a_patch_unmarked(tmp_path):
    subprocess.run(["git", "--version"], check=True, capture_output=True)


def test_in_process():
    assert True
'''


@pytest.mark.slow  # (it runs an inner pytest in a process: a fresh conftest, and its test starts one)
def test_a_test_that_starts_a_process_without_the_slow_mark_fails_naming_the_command(pytester):
    pytester.makeconftest(CONFTEST.read_text(encoding="utf-8"))
    pytester.makeini("[pytest]\nmarkers =\n    slow: slow\n")
    pytester.makepyfile(test_inner=INNER)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "0", "-q")
    result.assert_outcomes(passed=4, errors=1)
    result.stdout.fnmatch_lines(["*ERROR at teardown of test_starts_python_unmarked*",
                                 "*not marked slow but started 1 process(es), the first: *python* -c pass*"])


PACKAGE_PROBE = r"""
import json, sys
sys.argv = ["npu-migrate", *sys.argv[1:]]
from npu_migrate import __main__ as entry_point
try:
    entry_point.entry()
except SystemExit as exc:
    code = exc.code
from npu_migrate import startup
print(json.dumps({"exit": code, "compiled": startup.COMPILED.compiled, "kept rule sets": startup.KEPT_RULES.hits}))
"""


@pytest.mark.slow  # (it starts the command line)
def test_a_process_of_the_package_compiles_none_of_it(tmp_path):
    """conftest keeps the package's bytecode once per run (_package_compiled_once: PYTHONDONTWRITEBYTECODE
    stops a process keeping it, not reading it), so that each `python -m npu_migrate` a test starts, with the
    variable set, compiles none of it (0.24 -> 0.11 CPU-s): no module of the package from its source
    (`python -v` says where each code object came from), no dataclass method, the rule set read back."""
    import json
    import os
    import subprocess
    import sys

    import npu_migrate

    (tmp_path / "train.py").write_bytes(b"import torch\n\nmodel = model.cuda()\n")
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "NPU_MIGRATE_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-v", "-c", PACKAGE_PROBE, "train.py", "--check", "--no-cache"],
                          cwd=tmp_path, capture_output=True, text=True, env=env, timeout=600)
    seen = json.loads(done.stdout.splitlines()[-1])
    package = os.path.dirname(npu_migrate.__file__)
    loaded = [line for line in done.stderr.splitlines() if line.startswith("# code object from ")]
    assert seen == {"exit": 1, "compiled": 0, "kept rule sets": 1}, done.stderr[-2000:]
    assert len([line for line in loaded if package in line]) > 50  # (the command line, the engine, the passes)
    assert [line for line in loaded if package in line and line.endswith(".py'")] == []
