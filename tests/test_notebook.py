"""Jupyter notebooks: code cells migrated as one module, IPython syntax kept, JSON layout kept."""

from __future__ import annotations

import difflib
import json
from pathlib import Path

import nbformat
import pytest

from npu_migrate.dispatch import migrate_source
from npu_migrate.frontends.notebook import mask_ipython, unmask_ipython
from npu_migrate.options import Options
from npu_migrate.rules import default_rules

RULES = default_rules()
ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "notebooks"


def notebook(*sources, kinds=None, **dump) -> str:
    """A notebook written like Jupyter (nbformat.writes), or with json.dumps options."""
    kinds = kinds or ["code"] * len(sources)
    cells = []
    for i, (kind, src) in enumerate(zip(kinds, sources)):
        cell = nbformat.v4.new_code_cell(src) if kind == "code" else nbformat.v4.new_markdown_cell(src)
        cell["id"] = f"cell{i}"
        cells.append(cell)
    nb = nbformat.v4.new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3"}})
    if dump:
        return json.dumps(nb, **dump)
    return nbformat.writes(nb)


def sources(text: str):
    return ["".join(c["source"]) if isinstance(c["source"], list) else c["source"] for c in json.loads(text)["cells"]]


def migrate(text: str, options: Options = Options(), path: str = "nb.ipynb"):
    result = migrate_source(text, path, options, RULES)
    assert result.error is None, result.error
    return result


def test_fixture_golden_outputs_survive_and_second_run_is_a_no_op():
    before = (FIXTURES / "cifar10_train.ipynb").read_text(encoding="utf-8")
    expected = (FIXTURES / "cifar10_train.expected.ipynb").read_text(encoding="utf-8")
    result = migrate(before)
    assert result.new_text == expected
    nbformat.validate(nbformat.reads(expected, as_version=4))
    old, new = json.loads(before), json.loads(expected)
    for a, b in zip(old["cells"], new["cells"]):
        assert {k: v for k, v in a.items() if k != "source"} == {k: v for k, v in b.items() if k != "source"}
    assert old["metadata"] == new["metadata"]
    # Only source lines differ, each changed line is one JSON string element.
    a, b = before.splitlines(), expected.splitlines()
    changed = [
        line
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
        if tag != "equal"
        for line in a[i1:i2] + b[j1:j2]
    ]
    assert len(changed) == 25 and all(line.startswith('    "') for line in changed)
    assert not migrate(expected).changed


def test_torch_imported_in_one_cell_used_in_later_cells():
    text = notebook(
        "import torch\nimport torch.nn as nn",
        "model = nn.Linear(2, 2).cuda()",
        "%%time\ntorch.cuda.synchronize()\nx = torch.zeros(2, device='cuda:0')",
    )
    result = migrate(text)
    assert sources(result.new_text) == [
        "import torch\nimport torch.nn as nn\nimport torch_npu  # noqa: F401",
        "model = nn.Linear(2, 2).npu()",
        "%%time\ntorch.npu.synchronize()\nx = torch.zeros(2, device='npu:0')",
    ]
    assert [(e.code, e.cell, e.span.line, e.span.col) for e in result.edits] == [
        ("NPU108", 1, 3, 1),
        ("NPU101", 2, 1, 25),
        ("NPU102", 3, 2, 1),
        ("NPU105", 3, 3, 27),
    ]


def test_device_variable_defined_in_an_earlier_cell():
    text = notebook("import torch\nDEV = 'cuda:0'", "x = torch.ones(3).to(DEV)")
    assert sources(migrate(text).new_text) == ["import torch\nimport torch_npu  # noqa: F401\nDEV = 'npu:0'", "x = torch.ones(3).to(DEV)"]


def test_ipython_syntax_is_kept_and_shell_lines_migrated():
    cells = [
        "%matplotlib inline\n%load_ext autoreload",
        "import torch\n!nvidia-smi\ngpus = !nvidia-smi -L\n%env CUDA_VISIBLE_DEVICES=1",
        "torch.cuda.memory_summary?\n??torch.cuda",
        "for i in range(2):\n    !echo $CUDA_VISIBLE_DEVICES\n    print(torch.cuda.device_count())",
        "s = '''\n!nvidia-smi\n%time\n'''\nx = (1\n%2)",
        "%%html\n<b>torch.cuda</b>",
        "%%writefile train.py\nimport torch\nx = torch.zeros(1).cuda()",
        "%%bash\nexport CUDA_VISIBLE_DEVICES=0\nnvidia-smi",
    ]
    result = migrate(notebook(*cells))
    assert sources(result.new_text) == [
        "%matplotlib inline\n%load_ext autoreload",
        "import torch\nimport torch_npu  # noqa: F401\n!npu-smi info\ngpus = !nvidia-smi -L\n%env ASCEND_RT_VISIBLE_DEVICES=1",
        "torch.cuda.memory_summary?\n??torch.cuda",
        "for i in range(2):\n    !echo $ASCEND_RT_VISIBLE_DEVICES\n    print(torch.npu.device_count())",
        "s = '''\n!nvidia-smi\n%time\n'''\nx = (1\n%2)",
        "%%html\n<b>torch.cuda</b>",
        "%%writefile train.py\nimport torch\nimport torch_npu  # noqa: F401\nx = torch.zeros(1).npu()",
        "%%bash\nexport ASCEND_RT_VISIBLE_DEVICES=0\nnpu-smi info",
    ]
    got = {(e.code, e.cell, e.span.line, e.span.col) for e in result.edits}
    assert ("NPU151", 2, 2, 2) in got  # `!nvidia-smi`: the command starts at column 2
    assert ("NPU107", 2, 4, 6) in got  # `%env CUDA_VISIBLE_DEVICES=1`
    assert ("NPU107", 4, 2, 12) in got
    assert ("NPU107", 8, 2, 8) in got and ("NPU151", 8, 3, 1) in got
    assert ("NPU101", 7, 3, 20) in got  # %%writefile train.py: the written file, migrated on its own
    # `x = !nvidia-smi -L` reads the output: a finding, not a rewrite.
    assert [(f.code, f.cell, f.span.line, f.span.col) for f in result.findings] == [("NPU360", 2, 3, 9)]
    assert not migrate(result.new_text).changed


def test_mask_and_unmask_round_trip():
    src = "%%time\nx = 1\n  !ls \\\n   -l\nx?\nz = %time f()\n"
    masked = mask_ipython(src, 1, python_cell_magic=True)
    assert "%" not in masked.text and "!" not in masked.text and "?" not in masked.text
    assert masked.text.count("\n") == src.count("\n")
    assert unmask_ipython(masked.text, masked) == src


def test_layout_of_the_file_is_kept():
    """indent 2, ASCII escapes, string sources, no trailing newline, keys in the writer's order."""
    nb = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {"language_info": {"name": "python"}},
        "cells": [
            {"source": "# é\nimport torch\nx = torch.ones(1).cuda()", "cell_type": "code", "metadata": {},
             "outputs": [{"output_type": "stream", "name": "stdout", "text": "tensor([1.], device='cuda:0')\n"}],
             "execution_count": 3, "id": "a"},
        ],
    }
    text = json.dumps(nb, indent=2, ensure_ascii=True)
    result = migrate(text)
    expected = text.replace(
        '"# \\u00e9\\nimport torch\\nx = torch.ones(1).cuda()"',
        '"# \\u00e9\\nimport torch\\nimport torch_npu  # noqa: F401\\nx = torch.ones(1).npu()"',
    )
    assert expected != text
    assert result.new_text == expected


def test_list_sources_keep_their_layout_and_unchanged_lines_keep_their_escapes():
    text = (
        '{"cells": [{"cell_type": "code", "execution_count": null, "metadata": {}, "outputs": [],\n'
        '  "source": ["import torch  # \\u00e9t\\u00e9\\n",\n             "y = torch.zeros(1).cuda()"]}],\n'
        ' "metadata": {}, "nbformat": 4, "nbformat_minor": 5}\r\n'
    )
    result = migrate(text)
    assert result.new_text == (
        '{"cells": [{"cell_type": "code", "execution_count": null, "metadata": {}, "outputs": [],\n'
        '  "source": ["import torch  # \\u00e9t\\u00e9\\n",\n             "import torch_npu  # noqa: F401\\n",'
        '\n             "y = torch.zeros(1).npu()"]}],\n'
        ' "metadata": {}, "nbformat": 4, "nbformat_minor": 5}\r\n'
    )


def test_markdown_and_outputs_are_not_migrated():
    text = notebook("Call `x.cuda()` and `torch.cuda.synchronize()`.", "print('ok')", kinds=["markdown", "code"])
    result = migrate(text)
    assert not result.changed and result.edits == [] and result.findings == []


@pytest.mark.parametrize(
    "text,error",
    [
        ("{not json", "invalid notebook: not JSON (Expecting property name enclosed in double quotes at line 1 column 2)"),
        ("[]", "invalid notebook: the top level is not a JSON object"),
        ('{"metadata": {}}', 'invalid notebook: no "cells" list'),
        ('{"worksheets": [], "nbformat": 3}',
         "invalid notebook: nbformat 3 is not supported; upgrade it with `jupyter nbconvert --to notebook --nbformat 4`"),
        ('{"cells": [{"cell_type": "code", "source": 3}]}',
         'invalid notebook: cell 1: "source" is neither a string nor a list of strings'),
    ],
)
def test_invalid_notebooks_are_errors(text, error):
    result = migrate_source(text, "bad.ipynb", Options(), RULES)
    assert result.error == error and not result.changed


def test_other_languages_are_skipped():
    nb = {"cells": [{"cell_type": "code", "source": "x <- cuda()", "metadata": {}, "outputs": []}],
          "metadata": {"kernelspec": {"language": "R", "name": "ir"}}, "nbformat": 4, "nbformat_minor": 5}
    result = migrate(json.dumps(nb))
    assert result.skipped == "not a Python notebook (language: r)"


def test_a_cell_that_does_not_parse_is_left_alone_with_a_finding():
    text = notebook("import torch", "cd data\nmodel.cuda()", "x = torch.ones(1).cuda()", "cd data\nls")
    result = migrate(text)
    assert sources(result.new_text) == [
        "import torch\nimport torch_npu  # noqa: F401", "cd data\nmodel.cuda()", "x = torch.ones(1).npu()", "cd data\nls",
    ]
    # Cell 4 does not parse either, but has nothing to migrate: no finding for it.
    assert [(f.code, f.cell) for f in result.findings] == [("NPU376", 2)]


def test_modelarts_does_not_apply():
    result = migrate(notebook("import torch\nx = torch.ones(1).cuda()"), Options(modelarts=True))
    assert [(f.code, f.severity.value, f.cell) for f in result.findings] == [("NPU375", "info", None)]
    assert sources(result.new_text) == ["import torch\nimport torch_npu  # noqa: F401\nx = torch.ones(1).npu()"]


def test_suppression_comment_in_a_cell():
    text = notebook("import torch", "x = torch.ones(1).cuda()  # npu-migrate: ignore")
    assert not migrate(text).changed


def test_cli_write_diff_and_report(tmp_path, run_cli):
    path = tmp_path / "train.ipynb"
    original = notebook("import torch", "%time y = 1\nx = torch.ones(1).cuda()\nv = torch.cuda.get_arch_list()")
    path.write_text(original, encoding="utf-8")

    def cli(*args):  # in process: nothing here needs a real one
        done = run_cli(*args, cwd=tmp_path)
        done.stdout, done.stderr = done.stdout.decode(), done.stderr.decode()
        return done

    report = cli(path)
    assert "train.ipynb:cell 2:3:5: NPU301 [error]" in report.stdout
    diff = cli(path, "--diff")
    assert diff.returncode == 1
    assert [line for line in diff.stdout.splitlines() if line[:1] in "+-@"] == [
        "--- a/train.ipynb",
        "+++ b/train.ipynb",
        "@@ -7,7 +7,8 @@",
        '-    "import torch"',
        '+    "import torch\\n",',
        '+    "import torch_npu  # noqa: F401"',
        "@@ -18,7 +19,7 @@",
        '-    "x = torch.ones(1).cuda()\\n",',
        '+    "x = torch.ones(1).npu()\\n",',
    ]
    write = cli(path, "--write")
    assert write.returncode == 0, write.stderr
    nbformat.validate(nbformat.read(str(path), as_version=4))
    assert sources(path.read_text(encoding="utf-8")) == [
        "import torch\nimport torch_npu  # noqa: F401",
        "%time y = 1\nx = torch.ones(1).npu()\nv = torch.cuda.get_arch_list()",
    ]
    again = cli(path, "--check", "--fail-on", "error")
    assert again.returncode == 1  # the NPU301 error is still there
    assert "1 file scanned, 0 would be migrated, 1 unchanged, 0 failed." in again.stdout


def test_a_whole_cell_in_one_list_element_stays_one_element():
    """Exports such as sphinx-gallery's write each source as a one-element list, indent 2."""
    nb = {"cells": [{"cell_type": "code", "execution_count": None, "metadata": {"collapsed": False}, "outputs": [],
                     "source": ["import torch\n\ndef f():\n    torch.cuda.synchronize()\n    return torch.zeros(1).cuda()"]}],
          "metadata": {"kernelspec": {"language": "python", "name": "python3"}}, "nbformat": 4, "nbformat_minor": 0}
    text = json.dumps(nb, indent=2)
    result = migrate(text)
    assert result.new_text == text.replace(
        '"import torch\\n\\ndef f():\\n    torch.cuda.synchronize()\\n    return torch.zeros(1).cuda()"',
        '"import torch\\nimport torch_npu  # noqa: F401\\n\\ndef f():\\n    torch.npu.synchronize()\\n    return torch.zeros(1).npu()"',
    )


def test_bom_and_crlf_are_kept():
    nb = {"cells": [{"cell_type": "code", "source": ["import torch\n", "x = torch.ones(1).cuda()"], "metadata": {},
                     "outputs": [], "execution_count": None}], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    text = "\ufeff" + json.dumps(nb, indent=1).replace("\n", "\r\n")
    assert migrate(text).new_text == text.replace(
        '"import torch\\n",\r\n', '"import torch\\n",\r\n    "import torch_npu  # noqa: F401\\n",\r\n'
    ).replace(".cuda()", ".npu()")


@pytest.mark.slow
def test_real_notebooks_from_pypi_wheels():
    """83 notebooks written by many tools (papermill's and nbdime's test notebooks): untouched
    when there is nothing to migrate; with `.cuda()` injected into their code (a text-level edit
    that keeps each file's own layout), only those lines change, everything else byte for byte."""
    from corpus_wheels import corpus_files

    files = corpus_files(".ipynb")
    assert len(files) >= 80
    errors = injected_count = 0
    for name, data in files:
        text = data.decode("utf-8")
        result = migrate_source(text, name, Options(), RULES)
        if result.error:
            assert result.error.startswith("invalid notebook: "), (name, result.error)
            errors += 1
            continue
        assert not result.changed, name
        if result.skipped:
            continue
        injected = text.replace("print(", "print(x.cuda(), ")
        if injected == text:
            continue
        result = migrate_source(injected, name, Options(), RULES)
        assert result.error is None, (name, result.error)
        old_cells = json.loads(injected)["cells"]
        if not result.changed:
            continue
        injected_count += 1
        new = result.new_text
        new_cells = json.loads(new)["cells"]
        for a, b in zip(old_cells, new_cells):
            src_a = "".join(a["source"]) if isinstance(a["source"], list) else a["source"]
            src_b = "".join(b["source"]) if isinstance(b["source"], list) else b["source"]
            assert src_b in (src_a, src_a.replace("x.cuda()", "x.npu()")), name
            assert {k: v for k, v in a.items() if k != "source"} == {k: v for k, v in b.items() if k != "source"}, name
        a_lines, b_lines = injected.splitlines(keepends=True), new.splitlines(keepends=True)
        assert len(a_lines) == len(b_lines), name
        for x, y in zip(a_lines, b_lines):
            assert x == y or (y == x.replace("x.cuda()", "x.npu()")), (name, x, y)
        try:
            valid = nbformat.validate(nbformat.reads(injected, as_version=4)) is None
        except Exception:
            valid = False
        if valid:
            nbformat.validate(nbformat.reads(new, as_version=4))
        assert not migrate_source(new, name, Options(), RULES).changed, name
    assert (errors, injected_count) == (0, 44)
