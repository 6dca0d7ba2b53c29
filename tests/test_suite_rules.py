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
