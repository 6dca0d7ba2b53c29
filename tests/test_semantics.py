"""Migrated PyTorch code that still runs: guards that must stay, device strings only
where they are devices, and findings without noise. Exact outputs; the executed versions are in
tests/test_semantics_run.py."""

from __future__ import annotations

import textwrap

from npu_migrate.dispatch import migrate_source
from npu_migrate.report import RunReport
from npu_migrate.report.text import render_text
from npu_migrate.rules import default_rules

RULES = default_rules()


def migrate(source: str, path: str = "train.py"):
    result = migrate_source(textwrap.dedent(source), path, rules=RULES)
    assert result.error is None
    return result


def migrated(source: str) -> str:
    result = migrate(source)
    return result.new_text if result.changed else textwrap.dedent(source)


def codes(source: str):
    return [(f.code, f.span.line) for f in migrate(source).findings]


# ----------------------------------------------------------------------------- messages


def test_every_finding_suggestion_is_a_sentence():
    """No rule prints a suggestion like "-- torch": each is a sentence of its own."""
    for rule in RULES.rules:
        if rule.kind == "finding" and rule.suggestion:
            words = rule.suggestion.split()
            assert len(words) >= 4 and rule.suggestion.rstrip().endswith((".", ")")), rule.source
            assert rule.suggestion != rule.message, rule.source


def test_tensor_method_suggestion():
    (f,) = migrate("import torch\ny = x.to_sparse_csr()\n").findings
    assert f.code == "NPU304" and f.suggestion.startswith("Check the Ascend PyTorch API support list")


# ----------------------------------------------------------------------------- guards


def test_kernel_guard_stays_and_the_rest_is_migrated():
    source = """\
        import torch
        from maskrcnn_benchmark import _C

        def encode(boxes, anchors):
            if boxes.is_cuda and anchors.is_cuda:
                return _C.box_encode(boxes, anchors)
            return boxes - anchors

        def move(x):
            return x.cuda() if not x.is_cuda else x
        """
    assert migrated(source) == textwrap.dedent("""\
        import torch
        import torch_npu  # noqa: F401
        from maskrcnn_benchmark import _C

        def encode(boxes, anchors):
            if boxes.is_cuda and anchors.is_cuda:
                return _C.box_encode(boxes, anchors)
            return boxes - anchors

        def move(x):
            return x.npu() if not x.is_npu else x
        """)
    found = migrate(source).findings
    assert [(f.code, f.severity.value, f.span.line, f.api) for f in found] == [
        ("NPU302", "warning", 5, "boxes.is_cuda"), ("NPU302", "warning", 5, "anchors.is_cuda"),
    ]
    assert "`_C.box_encode`" in found[0].message


def test_kernel_guard_through_a_wrapper_and_a_relative_import_partial_and_whole():
    source = textwrap.dedent("""\
        import torch
        from torch.autograd import Function
        from .._ext import nms_ext

        class NMSop(Function):
            @staticmethod
            def forward(ctx, boxes):
                return nms_ext.nms(boxes)

        def nms(boxes):
            if boxes.is_cuda:
                return NMSop.apply(boxes)
            return boxes.cuda()
        """)
    for partial in (True, False):
        result = migrate_source(source, "ops.py", rules=RULES, partial=partial)
        assert result.new_text == source.replace("import torch\n", "import torch\nimport torch_npu  # noqa: F401\n") \
            .replace("boxes.cuda()", "boxes.npu()")
        assert [f.code for f in result.findings] == ["NPU302"]


def test_build_gate_stays():
    source = """\
        import torch
        from torch.utils.cpp_extension import CUDA_HOME, CppExtension, CUDAExtension
        if torch.cuda.is_available() and CUDA_HOME is not None:
            extension = CUDAExtension
        else:
            extension = CppExtension
        """
    result = migrate(source)
    assert not result.changed
    assert [(f.code, f.span.line) for f in result.findings] == [("NPU302", 3)]


def test_capability_that_would_raise_stays_and_printing_it_is_migrated():
    source = """\
        import torch
        BF16 = torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 8
        print(torch.cuda.get_device_capability())
        """
    assert migrated(source) == textwrap.dedent("""\
        import torch
        import torch_npu  # noqa: F401
        BF16 = torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 8
        print(torch.npu.get_device_capability())
        """)
    severities = [(f.code, f.severity.value, f.span.line) for f in migrate(source).findings]
    assert severities == [("NPU307", "error", 2), ("NPU307", "warning", 3)]


# ----------------------------------------------------------------------------- findings


def test_tf32_flag_only_logged_is_not_reported():
    assert codes("""\
        import torch
        print(torch.backends.cuda.matmul.allow_tf32)
        logger.info("tf32 %s", torch.backends.cudnn.allow_tf32)
        log.info(f"{torch.backends.cudnn.benchmark=}")
        torch.backends.cuda.matmul.allow_tf32 = True
        """) == [("NPU402", 5)]


def test_version_gate_and_oom_text():
    assert codes("""\
        import torch
        print(torch.version.cuda)
        if torch.version.cuda is not None:
            pass
        try:
            step()
        except RuntimeError as e:
            if "CUDA out of memory" in str(e) or str(e).startswith("CUDA error: out of memory"):
                pass
        """) == [("NPU311", 3), ("NPU312", 8), ("NPU312", 8)]


def test_nccl_variables_with_an_hccl_twin_python():
    assert migrated("""\
        import os
        os.environ["NCCL_ASYNC_ERROR_HANDLING"] = "1"
        os.environ.setdefault("TORCH_NCCL_BLOCKING_WAIT", "1")
        os.environ["NCCL_DEBUG"] = "INFO"
        """) == textwrap.dedent("""\
        import os
        os.environ["HCCL_ASYNC_ERROR_HANDLING"] = "1"
        os.environ.setdefault("HCCL_BLOCKING_WAIT", "1")
        os.environ["NCCL_DEBUG"] = "INFO"
        """)


# ----------------------------------------------------------------------------- text report


def test_text_report_groups_repeated_findings_json_keeps_each(tmp_path):
    source = "import torch\n" + "".join(f"y{i} = x.to_sparse_csr()\n" for i in range(3)) + "z = x.to_dense()\n"
    result = migrate_source(source, str(tmp_path / "m.py"), rules=RULES)
    assert len(result.findings) == 4
    report = RunReport(results=[result], mode="report", rules=RULES, root=str(tmp_path))
    lines = render_text(report).splitlines()
    assert lines[0].startswith("m.py:2:6: NPU304 [warning] `.to_sparse_csr()` is listed as unsupported")
    assert "(3 times: lines 2, 3, 4) -- Check the Ascend" in lines[0]
    assert lines[1].startswith("m.py:5:5: NPU304 [warning] `.to_dense()`") and "times" not in lines[1]
    assert lines[-1] == "4 findings: NPU304 x4"


# ----------------------------------------------------------------------------- device strings


def test_device_strings_of_other_libraries_stay():
    source = """\
        import torch
        from nvidia.dali import fn
        import cupy as cp
        images = fn.resize(images, device="gpu")
        crops = fn.crop(images, device="cuda")
        a = cp.asarray(x, device="cuda")
        y = foo(x, device="gpu")
        z = torch.zeros(2, device="cuda")
        """
    assert migrated(source) == textwrap.dedent(source).replace(
        'torch.zeros(2, device="cuda")', 'torch.zeros(2, device="npu")').replace(
        "import torch\n", "import torch\nimport torch_npu  # noqa: F401\n")


def test_map_location_keys_stay():
    assert migrated("""\
        import torch
        a = torch.load(f, map_location={"cuda:0": "cpu"})
        b = torch.load(f, map_location={"cuda:1": "cuda:0", "cuda:2": f"cuda:{rank}"})
        """) == textwrap.dedent("""\
        import torch
        import torch_npu  # noqa: F401
        a = torch.load(f, map_location={"cuda:0": "cpu"})
        b = torch.load(f, map_location={"cuda:1": "npu:0", "cuda:2": f"npu:{rank}"})
        """)


def test_flag_libraries_defaults():
    assert migrated("""\
        import torch
        import click
        from absl import flags
        flags.DEFINE_string("base_device", "cuda", "where to run")
        flags.DEFINE_enum("backend", "nccl", ["nccl", "gloo"], "backend")
        flags.DEFINE_string("data_dir", "cuda", "not a device")
        @click.command()
        @click.option("--device", default="cuda", type=click.Choice(["cpu", "cuda"]))
        def main(device):
            pass
        """) == textwrap.dedent("""\
        import torch
        import torch_npu  # noqa: F401
        import click
        from absl import flags
        flags.DEFINE_string("base_device", "npu", "where to run")
        flags.DEFINE_enum("backend", "hccl", ["hccl", "gloo"], "backend")
        flags.DEFINE_string("data_dir", "cuda", "not a device")
        @click.command()
        @click.option("--device", default="npu", type=click.Choice(["cpu", "npu"]))
        def main(device):
            pass
        """)


def test_device_strings_in_containers_parameters_and_returns():
    source = """\
        import torch
        import pytest
        for device in ["cpu", "cuda"]:
            pass
        @pytest.mark.parametrize("device", ["cpu", "cuda"])
        def test_a(device):
            pass
        @pytest.mark.parametrize("dtype,device", [(torch.half, "cuda"), pytest.param(torch.float, "cuda:0")])
        def test_b(dtype, device):
            pass
        args = ("cuda:0",) + args
        def pick(m):
            if next(m.parameters()).is_cuda:
                return "cuda"
            return "cpu"
        def get_device():
            return "cuda"
        name = "cuda" if torch.cuda.is_available() else "cpu"
        def kind():
            return "cuda"
        print(["cuda:0"])
        """
    assert migrated(source) == textwrap.dedent("""\
        import torch
        import torch_npu  # noqa: F401
        import pytest
        for device in ["cpu", "npu"]:
            pass
        @pytest.mark.parametrize("device", ["cpu", "npu"])
        def test_a(device):
            pass
        @pytest.mark.parametrize("dtype,device", [(torch.half, "npu"), pytest.param(torch.float, "npu:0")])
        def test_b(dtype, device):
            pass
        args = ("npu:0",) + args
        def pick(m):
            if next(m.parameters()).is_npu:
                return "npu"
            return "cpu"
        def get_device():
            return "npu"
        name = "npu" if torch.npu.is_available() else "cpu"
        def kind():
            return "cuda"
        print(["cuda:0"])
        """)


def test_tensor_type_names_compared_with_type():
    assert migrated("""\
        import torch
        if x.type() == "torch.cuda.HalfTensor" or x.type() in ("torch.cuda.FloatTensor", "torch.FloatTensor"):
            pass
        """) == textwrap.dedent("""\
        import torch
        import torch_npu  # noqa: F401
        if x.type() == "torch.npu.HalfTensor" or x.type() in ("torch.npu.FloatTensor", "torch.FloatTensor"):
            pass
        """)


def test_import_torch_npu_before_its_first_use_on_a_semicolon_line():
    assert migrated("import os; import torch; x = torch.zeros(1).cuda()\n") == (
        "import os; import torch; import torch_npu; x = torch.zeros(1).npu()  # noqa: F401\n")


# ----------------------------------------------------------------------------- project modules


def test_local_package_named_like_a_cuda_library_is_not_reported(tmp_path):
    from npu_migrate.cli import main
    from click.testing import CliRunner

    (tmp_path / "triton").mkdir()
    (tmp_path / "triton" / "__init__.py").write_text("")
    (tmp_path / "triton" / "client.py").write_text("import torch\nx = torch.zeros(1)\n")
    (tmp_path / "serve.py").write_text("import torch\nfrom triton.client import x\nimport cupy\n")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "kernels.py").write_text("import triton\n")
    result = CliRunner().invoke(main, [str(tmp_path), "--format", "json", "--no-cache"])
    import json

    report = json.loads(result.output)
    found = sorted((entry["path"].rsplit("/", 1)[-1], finding["api"])
                   for entry in report["files"] for finding in entry["findings"])
    assert found == [("serve.py", "cupy")]


def test_imports_of_one_library_read_as_one_line(tmp_path):
    source = "import torch\nfrom nvidia.dali import fn\nimport nvidia.dali.types as types\nfrom nvidia.dali.pipeline import Pipeline\n"
    result = migrate_source(source, str(tmp_path / "data.py"), rules=RULES)
    assert [(f.code, f.span.line, f.api) for f in result.findings] == [
        ("NPU303", 2, "nvidia.dali"), ("NPU303", 3, "nvidia.dali"), ("NPU303", 4, "nvidia.dali")]
    report = RunReport(results=[result], mode="report", rules=RULES, root=str(tmp_path))
    lines = render_text(report).splitlines()
    line = lines[0]
    assert lines[1].startswith("1 file scanned") and lines[-1] == "3 findings: NPU303 x3"
    assert line.startswith("data.py:2:1: NPU303 [error] `nvidia.dali` (DALI)") and "(3 times: lines 2, 3, 4)" in line
