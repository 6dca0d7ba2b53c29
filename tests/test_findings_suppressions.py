"""`# npu-migrate: ignore[...]` silences findings and rewrites on its line; comments that silence
nothing become NPU001 findings in FileResult.unused_ignores (reported with --report-unused-ignores)."""

from __future__ import annotations

from npu_migrate.dispatch import migrate_source
from npu_migrate.model import FileResult, Severity
from npu_migrate.rules import default_rules

RULES = default_rules()


def run(source: str) -> FileResult:
    result = migrate_source(source, "t.py", rules=RULES)
    assert result.error is None
    return result


def unused(result: FileResult):
    return [(f.code, f.severity, f.span.line, f.span.col, f.span.end_col, f.api, f.message, f.suggestion)
            for f in result.unused_ignores]


def test_ignore_with_codes_silences_only_those_codes():
    result = run("import torch\nimport cupy; torch.cuda.nvtx.mark('x')  # npu-migrate: ignore[NPU301]\n")
    assert [(f.code, f.span.line) for f in result.findings] == [("NPU303", 2)]
    assert result.unused_ignores == []


def test_bare_ignore_silences_findings_and_rewrites():
    source = "import torch\nimport cupy  # npu-migrate: ignore\nx = x.cuda()  # npu-migrate: ignore\n"
    result = run(source)
    assert result.findings == [] and result.edits == [] and not result.changed
    assert result.unused_ignores == []


def test_ignore_on_the_last_line_of_a_multiline_call():
    result = run("import torch\nm = torch.nn.DataParallel(\n    model,\n)  # npu-migrate: ignore[NPU305]\n")
    assert result.findings == [] and result.unused_ignores == []


def test_unused_bare_ignore():
    assert unused(run("import torch\nx = 1  # npu-migrate: ignore\nx = x.cuda()\n")) == [
        ("NPU001", Severity.WARNING, 2, 8, 29, "npu-migrate: ignore",
         "unused `# npu-migrate: ignore`: nothing is reported on this line", "Remove the comment."),
    ]


def test_partly_unused_code_list():
    assert unused(run("import cupy  # npu-migrate: ignore[NPU303, npu301]\n")) == [
        ("NPU001", Severity.WARNING, 1, 14, 51, "npu-migrate: ignore[NPU301]",
         "unused code NPU301 in `# npu-migrate: ignore[NPU301,NPU303]`: not reported on this line",
         "Remove NPU301 from the list."),
    ]


def test_wholly_unused_code_list():
    [u] = unused(run("import cupy\nx = 1  # npu-migrate: ignore[NPU303]\n"))
    assert u[2:3] + u[6:] == (2, "unused code NPU303 in `# npu-migrate: ignore[NPU303]`: not reported on this line",
                              "Remove the comment.")


def test_unused_ignores_in_a_file_the_prefilter_skips():
    # Nothing here can need work, so the file is not even parsed; the comment is still unused.
    assert [u[:4] for u in unused(run("total = 1  # npu-migrate: ignore\n"))] == [("NPU001", Severity.WARNING, 1, 12)]


def test_the_marker_in_a_string_is_not_a_suppression():
    result = run("import cupy; s = '# npu-migrate: ignore'\n")
    assert [f.code for f in result.findings] == ["NPU303"]
    assert result.unused_ignores == []


def test_unused_ignores_survive_the_cache_round_trip():
    result = run("x = 1  # npu-migrate: ignore\n")
    assert FileResult.from_dict(result.to_dict()).unused_ignores == result.unused_ignores
