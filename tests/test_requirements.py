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
    twice = len(calls)
    deps = read_requirements_txt(text)[0]
    read = [d for d in deps if requirements._may_report(d, requirements._matchers(rules)) and d.requirement is not None]
    assert [(f.code, f.span.line, f.span.col, f.api) for f in second.findings] == expected
    assert first.to_dict() == second.to_dict()
    # the name of each dependency but a CUDA build's (`+`, `@`) once (does it matter?), then that
    # of each one read twice (listed, matched)
    builds = [d for d in deps if "+" in d.text or "@" in d.text]
    assert twice == len(deps) - len(builds) + 2 * len(read) < once
    assert 0 < len(read) < len(deps)


# Lines near the edges of what project_files.plain_requirement reads without packaging, and of what
# the front end leaves unread (_may_report): names, separators, operators, versions, blanks, markers.
EDGE_LINES = [
    "torch", " torch ", "torch==2.1.0", "torch == 2.1.0", " torch>=1.9 , <2 ", "torch<2,>=1.9", "Torch_NPU == 2.1.0",
    "torch==2.1.0+cpu", "torch==2.1.0+cu118", "torch>=2.1.0+cpu", "torch!=1.5.*", "torch==1.*", "torch>=1.*",
    "torch~=1", "torch~=1.13", "torch~=2.3.1", "torch==1!2.0", "torch==2.0a1", "torch==1.0.post1.dev2",
    "torch===1.0", "torch=1.0", "torch==", "torch>=1.0,", "torch>1.0 <2.0", "torch-==1.0", "torch.==1.0",
    "torch_ ==1", "_torch==1.0", "torch[cuda]==2.1", "torch==2.1 ; python_version > '3'", "torch @ https://x/torch.whl",
    "torch (==2.1)", "torch==2.1.0-1", "torch==v2.1", "torch==01.02", "torch==2.1.0,~=2.1", "torch==2.1,==2.1.*",
    "torch >=2.0.0,!=2.0.1,<3.0.0", "torch-npu==2.1.0.post3", "torch_npu", "TORCH.NPU>=2.1", "torchvision",
    "torch vision", "torché==1", "cupy-cuda11x==12.2.0", "cupy_cuda12x", "Nvidia.ML.Py>=12", "flash_attn==2.5",
    "flash-attn==2.3.6", "xformers==0.0.23 ; platform_system == \"Linux\"", "triton>=2; sys_platform=='linux'",
    "apex", "onnxruntime-gpu>=1.16", "numpy>=1.24,<2", "mmdet>=3.0.0rc5,<3.2.0", "black[jupyter]",
    "opencv-python >=4.2.0.32, != 4.5.5.*", "-e", "", "=1", "torch>=2.1 --hash=sha256:00",
]


@pytest.mark.parametrize("line", EDGE_LINES)
def test_a_plain_requirement_reads_as_packagings_requirement_parser_reads_it(line):
    """A line read without packaging (project_files.plain_requirement) is valid for packaging,
    with the same name and clauses; the order of the clauses too with packaging 25 or later."""
    from packaging.requirements import InvalidRequirement, Requirement

    from npu_migrate.project_files import plain_requirement

    plain = plain_requirement(line)
    if plain is None:
        return
    try:
        req = Requirement(line)
    except InvalidRequirement:  # pragma: no cover - the failure this test is for
        pytest.fail(f"{line!r} read as plain, invalid for packaging")
    assert (plain.name, plain.url) == (req.name, req.url)
    assert sorted((c.operator, c.version) for c in plain.specifier) == sorted(
        (s.operator, s.version) for s in req.specifier)
    assert not req.extras and req.marker is None


def test_which_edge_lines_are_read_without_packaging():
    from npu_migrate.project_files import plain_requirement

    assert [line for line in EDGE_LINES if plain_requirement(line) is not None] == [
        "torch", " torch ", "torch==2.1.0", "torch == 2.1.0", " torch>=1.9 , <2 ", "torch<2,>=1.9",
        "Torch_NPU == 2.1.0", "torch~=1.13", "torch~=2.3.1", "torch==01.02", "torch==2.1.0,~=2.1",
        "torch >=2.0.0,!=2.0.1,<3.0.0", "torch_npu", "TORCH.NPU>=2.1", "torchvision",
        "cupy-cuda11x==12.2.0", "cupy_cuda12x", "Nvidia.ML.Py>=12", "flash_attn==2.5", "flash-attn==2.3.6",
        "apex", "onnxruntime-gpu>=1.16", "numpy>=1.24,<2"]


@pytest.mark.parametrize("name", ["torch", "Torch_NPU", "TORCH.NPU", "torch--npu", "torch-_.npu", "Nvidia.ML.Py",
                                  "cupy-cuda*", "flash_attn", "a", "A_._B", "torch_"])
def test_names_are_canonicalized_as_packaging_canonicalizes_them(name):
    from packaging.utils import canonicalize_name

    from npu_migrate.project_files import canonicalize_name as ours

    assert ours(name) == canonicalize_name(name)


def test_the_findings_are_those_of_every_line_parsed_by_packaging(monkeypatch):
    """The lines left unread (_may_report) and those read without packaging (_read) change no
    finding: every line of the fixtures and of EDGE_LINES, alone and together with torch-npu
    (which silences NPU371), gives what it gives when every line is parsed by packaging."""
    from npu_migrate.frontends import requirements

    texts = [(FIXTURES / "requirements.txt").read_text(encoding="utf-8"), "\n".join(EDGE_LINES) + "\n",
             *(f"{line}\n" for line in EDGE_LINES), *(f"{line}\ntorch-npu\n" for line in EDGE_LINES)]
    pyproject = (FIXTURES / "pyproject.toml").read_text(encoding="utf-8")

    def results():
        return ([migrate_source(text, "requirements.txt", Options(), RULES).to_dict() for text in texts]
                + [migrate_source(pyproject, "pyproject.toml", Options(), RULES).to_dict()])

    ours = results()
    monkeypatch.setattr(requirements, "_may_report", lambda dep, matchers: True)
    monkeypatch.setattr(requirements, "_read", lambda dep: dep.requirement)
    every_line_parsed = results()
    assert ours == every_line_parsed
    assert sum(len(r["findings"]) for r in ours) > 40  # (the lines do give findings)
