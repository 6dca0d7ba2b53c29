"""Dependency lists: findings with exact positions, never an edit."""

from __future__ import annotations

from pathlib import Path

import pytest

from npu_migrate.dispatch import migrate_source
from npu_migrate.frontends import claims
from npu_migrate.options import Options
from npu_migrate.rules import default_rules

RULES = default_rules()
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "dependency_files"


def findings(text: str, path: str = "requirements.txt"):
    result = migrate_source(text, path, Options(), RULES)
    assert result.error is None and not result.changed and result.edits == []
    return [(f.code, f.span.line, f.span.col, f.api) for f in result.findings]


def test_requirements_fixture():
    text = (FIXTURES / "requirements.txt").read_text(encoding="utf-8")
    assert findings(text) == [
        ("NPU372", 2, 19, "https://download.pytorch.org/whl/cu118"),
        ("NPU371", 3, 1, "torch"),
        ("NPU372", 3, 1, "torch==2.1.0+cu118"),
        ("NPU372", 4, 1, "torchvision==0.16.0+cu118"),
        ("NPU370", 6, 1, "cupy-cuda11x"),
        ("NPU370", 7, 1, "flash-attn"),
        ("NPU370", 9, 1, "xformers"),
        ("NPU370", 10, 1, "bitsandbytes"),
        ("NPU370", 11, 1, "pynvml"),
        ("NPU370", 12, 1, "nvidia-ml-py"),
        ("NPU370", 13, 1, "triton"),
        ("NPU370", 14, 47, "apex"),
    ]


def test_pyproject_fixture():
    text = (FIXTURES / "pyproject.toml").read_text(encoding="utf-8")
    assert findings(text, "pyproject.toml") == [
        ("NPU371", 9, 6, "torch"),
        ("NPU370", 11, 6, "bitsandbytes"),
        ("NPU370", 15, 10, "flash-attn"),
        ("NPU370", 15, 29, "xformers"),
        ("NPU370", 16, 11, "onnxruntime-gpu"),
        ("NPU370", 20, 1, "cupy-cuda12x"),
    ]


@pytest.mark.parametrize(
    "text,suggestion_part",
    [
        ("torch==2.1.0\n", "Add `torch-npu==2.1.*` next to it"),
        ("torch~=2.3.1\n", "Add `torch-npu==2.3.*` next to it"),
        ("torch>=2.1\n", "Add `torch-npu` next to it: a torch-npu release only works with the torch release of the same major.minor version (X.Y)"),
    ],
)
def test_torch_npu_reminder_pins_the_minor_version(text, suggestion_part):
    result = migrate_source(text, "requirements.txt", Options(), RULES)
    (finding,) = result.findings
    assert finding.code == "NPU371" and suggestion_part in finding.suggestion


@pytest.mark.parametrize(
    "text",
    [
        "torch==2.1.0\ntorch-npu==2.1.0.post3\n",
        "Torch==2.1.0\nTORCH_NPU==2.1.0\n",
        "# torch==2.1.0+cu118 flash-attn\nnumpy\n",
        "torchvision\ntriton-ascend\nonnxruntime\n",
        "-r base.txt\n--index-url https://download.pytorch.org/whl/cpu\n./local/package\n",
    ],
)
def test_nothing_to_report(text):
    assert findings(text) == []


def test_invalid_pyproject_is_an_error():
    result = migrate_source("[project\n", "pyproject.toml", Options(), RULES)
    assert result.error and result.error.startswith("invalid pyproject.toml: ")


@pytest.mark.parametrize(
    "path,claimed",
    [
        ("requirements.txt", True),
        ("requirements-dev.txt", True),
        ("dev_requirements.txt", True),
        ("requirements/base.txt", True),
        ("sub/pyproject.toml", True),
        ("notes.txt", False),
        ("mypyproject.toml", False),
    ],
)
def test_which_files_are_dependency_lists(path, claimed):
    assert claims(path) is claimed


def test_the_rules_names_are_canonicalized_once_per_rule_set(monkeypatch):
    """Each dependency's name is canonicalized, the rules' names and `unless` names once for the
    rule set, not again for every dependency (mmocr 1.0.1's eight requirements files: 1,232
    calls); the findings are the same for a second file."""
    from npu_migrate.frontends import requirements
    from npu_migrate.project_files import read_requirements_txt

    text = (FIXTURES / "requirements.txt").read_text(encoding="utf-8")
    expected = findings(text)
    calls = []
    real = requirements.canonicalize_name
    monkeypatch.setattr(requirements, "canonicalize_name", lambda name: calls.append(name) or real(name))
    rules = default_rules()
    requirements._MATCHERS.clear()
    first = migrate_source(text, "requirements.txt", Options(), rules)
    once = len(calls)
    calls.clear()
    second = migrate_source(text, "requirements.txt", Options(), rules)
    deps = [d for d in read_requirements_txt(text)[0] if d.requirement is not None]
    assert [(f.code, f.span.line, f.span.col, f.api) for f in second.findings] == expected
    assert first.to_dict() == second.to_dict()
    assert len(calls) == 2 * len(deps) < once  # (each dependency's name: listed, then matched)
