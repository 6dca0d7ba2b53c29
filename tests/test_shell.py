"""Shell launch scripts: exact rewrites, everything else byte for byte, findings where unsafe."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from npu_migrate.dispatch import migrate_source
from npu_migrate.frontends import claims, frontend_for
from npu_migrate.frontends.shell import migrate_shell, scan_shell
from npu_migrate.options import Options
from npu_migrate.rules import default_rules

RULES = default_rules()
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "shell"


def migrate(text: str, path: str = "run.sh"):
    return migrate_source(text, path, Options(), RULES)


def new_text(text: str) -> str:
    result = migrate(text)
    assert result.error is None
    return result.new_text if result.changed else text


@pytest.mark.parametrize(
    "before,after",
    [
        ("export CUDA_VISIBLE_DEVICES=0,1\n", "export ASCEND_RT_VISIBLE_DEVICES=0,1\n"),
        ("export A=1 CUDA_VISIBLE_DEVICES=\"0\"\n", "export A=1 ASCEND_RT_VISIBLE_DEVICES=\"0\"\n"),
        ("CUDA_VISIBLE_DEVICES=0 python train.py\n", "ASCEND_RT_VISIBLE_DEVICES=0 python train.py\n"),
        ("CUDA_VISIBLE_DEVICES=0,1 \\\n  python train.py\n", "ASCEND_RT_VISIBLE_DEVICES=0,1 \\\n  python train.py\n"),
        ("env CUDA_VISIBLE_DEVICES=1 python x.py\n", "env ASCEND_RT_VISIBLE_DEVICES=1 python x.py\n"),
        ("env -u CUDA_VISIBLE_DEVICES python x.py\n", "env -u ASCEND_RT_VISIBLE_DEVICES python x.py\n"),
        ("nohup env CUDA_VISIBLE_DEVICES=1 python x.py &\n", "nohup env ASCEND_RT_VISIBLE_DEVICES=1 python x.py &\n"),
        ("echo $CUDA_VISIBLE_DEVICES\n", "echo $ASCEND_RT_VISIBLE_DEVICES\n"),
        ('echo "GPUs: ${CUDA_VISIBLE_DEVICES:-0} of CUDA_VISIBLE_DEVICES"\n',
         'echo "GPUs: ${ASCEND_RT_VISIBLE_DEVICES:-0} of CUDA_VISIBLE_DEVICES"\n'),
        ("n=${#CUDA_VISIBLE_DEVICES}\n", "n=${#ASCEND_RT_VISIBLE_DEVICES}\n"),
        ("for g in ${CUDA_VISIBLE_DEVICES//,/ }; do echo $g; done\n",
         "for g in ${ASCEND_RT_VISIBLE_DEVICES//,/ }; do echo $g; done\n"),
        ("N=$(echo $CUDA_VISIBLE_DEVICES | tr ',' ' ' | wc -w)\n",
         "N=$(echo $ASCEND_RT_VISIBLE_DEVICES | tr ',' ' ' | wc -w)\n"),
        ("N=`echo $CUDA_VISIBLE_DEVICES`\n", "N=`echo $ASCEND_RT_VISIBLE_DEVICES`\n"),
        ("x=$(( ${#CUDA_VISIBLE_DEVICES} + 1 ))\n", "x=$(( ${#ASCEND_RT_VISIBLE_DEVICES} + 1 ))\n"),
        ("if [[ -z \"$CUDA_VISIBLE_DEVICES\" && $N -gt 1 ]]; then exit 1; fi\n",
         "if [[ -z \"$ASCEND_RT_VISIBLE_DEVICES\" && $N -gt 1 ]]; then exit 1; fi\n"),
        ("f() { unset CUDA_VISIBLE_DEVICES; }\n", "f() { unset ASCEND_RT_VISIBLE_DEVICES; }\n"),
        ("local CUDA_VISIBLE_DEVICES=$1\n", "local ASCEND_RT_VISIBLE_DEVICES=$1\n"),
        ("export CUDA_LAUNCH_BLOCKING=1\n", "export ASCEND_LAUNCH_BLOCKING=1\n"),
        ("export NCCL_SOCKET_IFNAME=^docker0,lo\n", "export HCCL_SOCKET_IFNAME=^docker0,lo\n"),
        ("nvidia-smi\n", "npu-smi info\n"),
        ("  nvidia-smi -L\n", "  npu-smi info -l\n"),
        ("timeout 5 nvidia-smi\n", "timeout 5 npu-smi info\n"),
        ("case $1 in\n  gpu) nvidia-smi ;;\n  *) CUDA_VISIBLE_DEVICES=0 python x.py ;;\nesac\n",
         "case $1 in\n  gpu) npu-smi info ;;\n  *) ASCEND_RT_VISIBLE_DEVICES=0 python x.py ;;\nesac\n"),
    ],
)
def test_rewrites(before, after):
    assert new_text(before) == after
    assert new_text(after) == after  # idempotent


@pytest.mark.parametrize(
    "text",
    [
        "# export CUDA_VISIBLE_DEVICES=0\n",
        "echo 'export CUDA_VISIBLE_DEVICES=0 $CUDA_VISIBLE_DEVICES'\n",
        'echo "set CUDA_VISIBLE_DEVICES before running nvidia-smi"\n',
        "echo \\$CUDA_VISIBLE_DEVICES\n",
        "echo $CUDA_VISIBLE_DEVICES_EXTRA $MY_CUDA_VISIBLE_DEVICES\n",
        "cat <<EOF\nexport CUDA_VISIBLE_DEVICES=0\nnvidia-smi\nEOF\n",
        "cat <<-'END'\n\tCUDA_VISIBLE_DEVICES=0 python x.py\n\tEND\n",
        "python train.py CUDA_VISIBLE_DEVICES=0\n",
        "echo nvidia-smi\n",
        "/usr/bin/nvidia-smi\n",
        "N=$(nvidia-smi -L | wc -l)\n",
        "nvidia-smi | tee gpu.log\n",
        "GPUS=(0 1 2 3)\nfor ((i=0; i<${#GPUS[@]}; i++)); do echo ${GPUS[$i]}; done\n",
        "python -c 'import os; print(os.environ[\"CUDA_VISIBLE_DEVICES\"])'\n",
    ],
)
def test_left_alone(text):
    assert new_text(text) == text


def test_heredoc_is_data_and_the_text_after_it_is_code():
    text = "cat > w.sh <<EOF\nexport CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES\nEOF\nexport CUDA_VISIBLE_DEVICES=0\n"
    result = migrate(text)
    assert result.new_text == text.replace("export CUDA_VISIBLE_DEVICES=0\n", "export ASCEND_RT_VISIBLE_DEVICES=0\n")
    assert [(f.code, f.span.line, f.span.col) for f in result.findings] == [("NPU365", 2, 8), ("NPU365", 2, 30)]


def test_findings_with_positions():
    text = (
        "export NCCL_DEBUG=INFO\n"
        "COUNT=$(nvidia-smi --list-gpus | wc -l)\n"
        "sudo nvidia-smi -pm 1\n"
        "export NCCL_BUFFSIZE=8388608\n"
        "torchrun --nnodes=$NNODES --nproc_per_node=8 train.py\n"
    )
    result = migrate(text)
    assert not result.changed
    got = [(f.code, f.severity.value, f.span.line, f.span.col, f.api) for f in result.findings]
    assert got == [
        ("NPU362", "warning", 1, 8, "NCCL_DEBUG"),
        ("NPU360", "warning", 2, 9, "nvidia-smi"),
        ("NPU361", "warning", 3, 6, "nvidia-smi -pm"),
        ("NPU363", "warning", 4, 8, "NCCL_BUFFSIZE"),
        ("NPU366", "info", 5, 1, "torchrun"),
    ]


def test_edit_positions():
    result = migrate("#!/bin/bash\nset -e\nCUDA_VISIBLE_DEVICES=0 python a.py && nvidia-smi\n")
    assert [(e.code, e.span.line, e.span.col, e.span.end_col, e.before, e.after) for e in result.edits] == [
        ("NPU107", 3, 1, 21, "CUDA_VISIBLE_DEVICES", "ASCEND_RT_VISIBLE_DEVICES"),
        ("NPU151", 3, 39, 49, "nvidia-smi", "npu-smi info"),
    ]


def test_suppression_comment():
    text = "nvidia-smi  # npu-migrate: ignore\nexport NCCL_DEBUG=INFO  # npu-migrate: ignore[NPU362]\n"
    result = migrate(text)
    assert not result.changed and result.findings == []


def test_crlf_and_non_ascii_survive():
    text = "# 训练脚本\r\nexport CUDA_VISIBLE_DEVICES=0\r\necho \"完成\"\r\n"
    assert new_text(text) == text.replace("CUDA_VISIBLE", "ASCEND_RT_VISIBLE")


def test_shebang_files_without_suffix_are_shell(tmp_path):
    script = tmp_path / "train"
    script.write_text("#!/usr/bin/env bash\nnvidia-smi\n")
    assert claims(str(script))
    assert frontend_for(str(script), script.read_text()) is migrate_shell
    assert migrate_source(script.read_text(), str(script), Options(), RULES).new_text == "#!/usr/bin/env bash\nnpu-smi info\n"
    python_script = tmp_path / "tool"
    python_script.write_text("#!/usr/bin/env python3\nimport torch\n")
    assert not claims(str(python_script))
    assert frontend_for(str(python_script), python_script.read_text()) is None
    assert not claims(str(tmp_path / "notes.txt"))


def test_lexer_survives_unbalanced_input():
    for text in ["echo \"unterminated $CUDA_VISIBLE_DEVICES\n", "x=$(nvidia-smi\n", "cat <<EOF\nno end\n", ")))((("]:
        scan_shell(text)  # no exception, no endless loop
        migrate(text)


def _fixture_pairs():
    return sorted(p for p in FIXTURES.glob("*.sh") if not p.name.endswith(".expected.sh"))


@pytest.mark.parametrize("path", _fixture_pairs(), ids=lambda p: p.name)
def test_fixture_scripts(path):
    """Launch scripts in the style of public GPU projects: exact expected output, valid bash,
    and a second run changes nothing."""
    before = path.read_text(encoding="utf-8")
    expected = path.with_name(path.stem + ".expected.sh").read_text(encoding="utf-8")
    result = migrate(before, str(path))
    assert result.error is None
    assert result.new_text == expected
    assert not migrate(expected, str(path)).changed
    bash = "/bin/bash"
    if os.path.exists(bash):
        check = subprocess.run([bash, "-n"], input=expected, text=True, capture_output=True)
        assert check.returncode == 0, check.stderr


@pytest.mark.slow
def test_real_launch_scripts_from_pypi_wheels():
    """OpenMMLab and YOLOv5 scripts: unchanged as they are (launcher advice only); with
    `CUDA_VISIBLE_DEVICES=… ` injected before every `python`, exactly those names change outside
    comments and quotes, the result still parses (`bash -n`), and a second run changes nothing."""
    from corpus_wheels import corpus_files

    files = corpus_files(".sh")
    assert len(files) == 35
    codes = set()
    rewritten = 0
    for name, data in files:
        text = data.decode("utf-8")
        result = migrate(text, name)
        assert result.error is None and not result.changed, name
        codes |= {f.code for f in result.findings}
        injected = text.replace("python ", "CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES python ")
        result = migrate(injected, name)
        assert result.error is None, name
        new = result.new_text if result.changed else injected
        rewritten += len(result.edits)
        for x, y in zip(injected.splitlines(), new.splitlines()):
            if x.lstrip().startswith("#"):
                assert x == y, (name, x)
            else:
                # After `srun … \` the injected `VAR=…` is an argument, not an assignment: only
                # its `$CUDA_VISIBLE_DEVICES` expansion is renamed there.
                assert y in (
                    x,
                    x.replace("CUDA_VISIBLE_DEVICES", "ASCEND_RT_VISIBLE_DEVICES"),
                    x.replace("$CUDA_VISIBLE_DEVICES", "$ASCEND_RT_VISIBLE_DEVICES"),
                ), (name, x, y)
        assert len(injected.splitlines()) == len(new.splitlines())
        if os.path.exists("/bin/bash") and subprocess.run(["/bin/bash", "-n"], input=injected, text=True, capture_output=True).returncode == 0:
            check = subprocess.run(["/bin/bash", "-n"], input=new, text=True, capture_output=True)
            assert check.returncode == 0, (name, check.stderr)
        assert not migrate(new, name).changed, name
    assert codes == {"NPU366"}
    assert rewritten == 26  # 9 assignments (name + expansion) and 8 srun arguments (expansion only)
