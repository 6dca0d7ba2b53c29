"""Guards the torch pass keeps (codemods/guards.py) on the shapes real code gives them, and the
engine's promise that a bug in one pass never silently loses what the other passes found."""

from __future__ import annotations

import ast
import dataclasses
import itertools
import os
import textwrap

import pytest

from npu_migrate import codes, engine
from npu_migrate.dispatch import migrate_source
from npu_migrate.options import Options
from npu_migrate.passes import PASSES
from npu_migrate.rules import default_rules

from helpers import PARTIAL_PADDING, assert_partial_as_whole

RULES = default_rules()


def test_a_nested_block_in_an_is_cuda_guard_is_migrated_and_reported():
    """this crashed with `'IndentedBlock' object is not iterable`."""
    source = textwrap.dedent("""\
        import torch
        from . import _ext

        class FusedOp(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, w):
                if x.is_cuda:
                    if not _ops_built():
                        raise RuntimeError("the extension was not built")
                    _ext.fused_forward(x, w)
                else:
                    raise NotImplementedError("no CPU version")
                return x.cuda()
        """)
    r = migrate_source(source, "ops/fused.py")
    assert r.error is None
    assert r.new_text == source.replace("import torch\n", "import torch\nimport torch_npu  # noqa: F401\n", 1).replace(
        "return x.cuda()", "return x.npu()")
    assert [(f.code, f.span.line, f.api) for f in r.findings] == [("NPU302", 7, "x.is_cuda")]
    assert "`_ext.fused_forward`" in r.findings[0].message


def test_an_else_that_raises_not_implemented_makes_the_guard_cuda_only():
    source = ("import torch\ndef f(x):\n    if x.is_cuda:\n        y = x * 2\n"
              "    else:\n        raise NotImplementedError('no CPU version')\n    return y\n")
    r = migrate_source(source, "f.py")
    assert r.new_text is None
    assert [(f.code, f.severity.value, f.api) for f in r.findings] == [("NPU302", "error", "x.is_cuda")]


def test_a_one_line_guard_that_raises_is_cuda_only():
    source = "import torch\ndef f(x):\n    if not x.is_cuda: raise NotImplementedError\n    return x\n"
    r = migrate_source(source, "f.py")
    assert (r.error, r.new_text, [f.api for f in r.findings]) == (None, None, ["x.is_cuda"])


# Every way a guard and the blocks under it can be written: each combination must migrate
# without an error, into code that parses, with the guard either kept and reported or rewritten.
_TESTS = ["x.is_cuda", "not x.is_cuda", "x.is_cuda and w.is_cuda", "(x.is_cuda)"]
_BLOCKS = [
    "pass",
    "y = x.cuda()",
    "if ready():\n    raise RuntimeError('not built')",
    "if ready(): raise RuntimeError('not built')",
    "with lock:\n    y = x.cuda()",
    "for i in range(2):\n    y = x.cuda()\nelse:\n    pass",
    "while ready():\n    break",
    "try:\n    y = x.cuda()\nexcept ImportError:\n    raise NotImplementedError('CUDA only')\nfinally:\n    pass",
    "def g():\n    raise NotImplementedError\ny = g",
    "class K:\n    pass",
    "if ready():\n    pass\nelif other():\n    pass\nelse:\n    raise NotImplementedError",
    "raise NotImplementedError('only CUDA is supported')",
    "raise",
    "y = x; raise NotImplementedError",
    "async def g():\n    async with lock:\n        pass",
]


def _guards(test: str, body: str, other: str):
    def block(text, depth):
        return textwrap.indent(text, "    " * depth)

    yield f"if {test}:\n{block(body, 1)}\n"
    yield f"if {test}:\n{block(body, 1)}\nelse:\n{block(other, 1)}\n"
    yield f"if ready():\n    pass\nelif {test}:\n{block(body, 1)}\nelse:\n{block(other, 1)}\n"
    yield f"while {test}:\n{block(body, 1)}\n    break\n"
    if "\n" not in body and ":" not in body:
        yield f"if {test}: {body}\n"
        yield f"if {test}: {body}\nelse: {other}\n" if "\n" not in other and ":" not in other else f"if {test}: {body}\n"


@pytest.mark.parametrize("test", _TESTS)
@pytest.mark.parametrize("kernel", [False, True], ids=["plain", "kernel"])
@pytest.mark.slow
def test_every_guard_shape_migrates_without_an_error(test, kernel):
    failures = []
    seen = set()  # the shapes without an else give the same source for every `other`: once each
    for body, other in itertools.product(_BLOCKS, _BLOCKS[:4] + _BLOCKS[10:13]):
        for guard in _guards(test, body, other):
            if guard in seen:
                continue
            seen.add(guard)
            head = "import torch\nfrom . import _C\n" if kernel else "import torch\n"
            call = "    _C.op(x)\n" if kernel else ""
            source = head + "def f(x, w):\n" + call + textwrap.indent(guard, "    ") + "    return x.cuda()\n"
            ast.parse(source)  # the shape itself is valid Python
            r = migrate_source(source, "pkg/op.py")
            if r.error is not None or (r.new_text is not None and not _parses(r.new_text)):
                failures.append((source, r.error))
                continue
            is_cuda_left = (r.new_text or source).count("is_cuda")
            reported = [f for f in r.findings if f.code == "NPU302"]
            if is_cuda_left and not reported:
                failures.append((source, "is_cuda kept without a finding"))
            if kernel and not reported:
                failures.append((source, "a kernel guard was not reported"))
    assert failures == []


def _parses(text: str) -> bool:
    try:
        ast.parse(text)
        return True
    except SyntaxError:
        return False


# ----------------------------------------------------------------------------- passes


def _with_failing_pass(monkeypatch, name):
    @codes.applies("finding:import")  # it records an import finding as the findings pass would
    def boom(module, ctx):
        from npu_migrate.codemods.findings import report_findings

        report_findings(module, ctx)  # records its findings (NPU303 here) ... then fails
        raise TypeError("boom")

    monkeypatch.setattr(engine, "PASSES", tuple(
        dataclasses.replace(p, run=boom) if p.name == name else p for p in PASSES))


def test_a_failing_pass_leaves_the_file_unchanged_and_keeps_the_other_passes_findings(monkeypatch):
    _with_failing_pass(monkeypatch, "torch")
    r = migrate_source("import torch\nimport cupy\nx = torch.zeros(1).cuda()\n", "train.py")
    assert r.error == "internal error in the torch pass: TypeError: boom; file left unchanged"
    assert (r.new_text, r.edits, r.extra_files) == (None, [], {})
    assert [(f.code, f.api, f.span.line) for f in r.findings] == [("NPU303", "cupy", 2)]


def test_a_failing_findings_pass_keeps_nothing_half_done(monkeypatch):
    _with_failing_pass(monkeypatch, "findings")
    r = migrate_source("import torch\nimport cupy\nx = torch.zeros(1).cuda()\n", "train.py")
    assert r.error == "internal error in the findings pass: TypeError: boom; file left unchanged"
    assert (r.new_text, r.edits, r.findings) == (None, [], [])


def test_the_report_prints_the_error_and_the_findings_of_a_failed_file(monkeypatch, tmp_path):
    from click.testing import CliRunner

    from npu_migrate.cli import main

    _with_failing_pass(monkeypatch, "torch")
    (tmp_path / "train.py").write_text("import torch\nimport cupy\nx = torch.zeros(1).cuda()\n", encoding="utf-8")
    r = CliRunner().invoke(main, [str(tmp_path / "train.py"), "-j", "1", "--no-cache", "--color", "never"])
    path = str(tmp_path / "train.py")
    assert r.exit_code == 2
    lines = r.output.splitlines()
    assert lines[0] == f"{path}: internal error in the torch pass: TypeError: boom; file left unchanged"
    assert lines[1].startswith(f"{path}:2:8: NPU303 [error] `cupy` (CuPy) runs only on NVIDIA GPUs")


# ----------------------------------------------------------------------------- build gates

ENV_REPORT = '''\
import os.path as osp
import subprocess

import torch
from torch.utils.cpp_extension import CUDA_HOME


def collect_env():
    env_info = {}
    cuda_available = torch.cuda.is_available()
    env_info['CUDA available'] = cuda_available
    if cuda_available:
        env_info['CUDA_HOME'] = CUDA_HOME
        if CUDA_HOME is not None and osp.isdir(CUDA_HOME):
            try:
                nvcc = osp.join(CUDA_HOME, 'bin/nvcc')
                nvcc = subprocess.check_output(f'"{nvcc}" -V | tail -n1', shell=True)
                nvcc = nvcc.decode('utf-8').strip()
            except subprocess.SubprocessError:
                nvcc = 'Not Available'
            env_info['NVCC'] = nvcc
    print(f'CUDA_HOME={CUDA_HOME}', 'found' if CUDA_HOME else 'missing')
    return env_info
'''


def test_an_environment_report_that_prints_cuda_home_is_no_build_gate():
    """nine lines of a collect_env read CUDA_HOME; none decides a build."""
    r = migrate_source(ENV_REPORT, "utils/env.py")
    assert [f.code for f in r.findings] == []
    assert r.new_text == ENV_REPORT.replace("import torch\n", "import torch\nimport torch_npu  # noqa: F401\n").replace(
        "torch.cuda.is_available()", "torch.npu.is_available()")


SETUP = '''\
import os
import torch
from setuptools import setup
from torch.utils.cpp_extension import CUDA_HOME, CppExtension, CUDAExtension


def get_extensions():
    extension, sources, define_macros = CppExtension, ['csrc/vision.cpp'], []
    if torch.cuda.is_available() or os.getenv('FORCE_CUDA', '0') == '1':
        extension = CUDAExtension
        sources += ['csrc/cuda/nms.cu']
        define_macros += [('WITH_CUDA', None)]
    print('building with', CUDA_HOME)
    return [extension('ext._C', sources, define_macros=define_macros)]


setup(name='ext', ext_modules=get_extensions())
'''


def test_a_setup_that_compiles_cuda_when_cuda_is_available_keeps_its_test():
    """As torch.npu.is_available() the test would compile the .cu sources on an NPU machine."""
    r = migrate_source(SETUP, "setup.py")
    assert r.new_text is None
    assert [(f.code, f.span.line, f.api) for f in r.findings] == [("NPU302", 9, "torch.cuda.is_available()")]
    assert r.findings[0].message.startswith("`torch.cuda.is_available()` decides whether CUDA sources are compiled")


# -- code that selects the NPU already (found on open_clip 3.3.0 and accelerate 1.15.0) --------

BESIDE_NPU = '''\
import torch


def is_device_available(device):
    device_type = torch.device(device).type
    if device_type == 'cuda':
        is_avail = torch.cuda.is_available()
    elif device_type == 'npu':
        is_avail = torch.npu.is_available()
    return is_avail


def set_device(device):
    if device.startswith('cuda:'):
        torch.cuda.set_device(device)
    elif device.startswith('npu:'):
        torch.npu.set_device(device)


def default_device():
    if is_npu_available():
        return torch.device("npu")
    elif torch.cuda.is_available():
        return torch.device("cuda")
    return torch.device("cpu")


def init(model, device='cuda'):
    backends = {"cuda": "nccl", "hpu": "hccl", "npu": "hccl"}
    supported = ("xpu", "cuda", "npu")
    if torch.cuda.is_available():
        model = model.cuda()
    elif device == "npu" and torch.npu.is_available():
        model = model.npu()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return backends.get(device, "gloo"), supported
'''


def test_code_that_selects_the_npu_already_keeps_its_cuda_branches():
    """An if/elif chain with an NPU branch keeps its CUDA branch (rewritten it became a second NPU
    branch behind the first), a collection of device names with "npu" keeps its "cuda" entry (a
    dict got two "npu" keys); the rest of the file -- a default, a lone CUDA `if` -- migrates."""
    r = migrate_source(BESIDE_NPU, "open_clip_train/distributed.py")
    assert r.new_text == BESIDE_NPU.replace("import torch\n", "import torch\nimport torch_npu  # noqa: F401\n", 1).replace(
        "def init(model, device='cuda'):", "def init(model, device='npu'):").replace(
        "    if torch.cuda.is_available():\n        torch.cuda.synchronize()",
        "    if torch.npu.is_available():\n        torch.npu.synchronize()")
    assert r.findings == []


@pytest.mark.parametrize("npu_test", ["device == 'npu'", "torch.npu.is_available()", "is_npu_available()",
                                      "args.use_npu", "dev.startswith('npu:')", "hasattr(torch, 'npu') and x"])
@pytest.mark.parametrize("cuda_test", ["device == 'cuda'", "torch.cuda.is_available()", "x.is_cuda",
                                       "device == 'gpu'"])
@pytest.mark.parametrize("order", ["cuda first", "npu first"])
def test_no_chain_gets_two_npu_branches(npu_test, cuda_test, order):
    branches = [(cuda_test, "x = x.cuda()\n        torch.cuda.synchronize()"), (npu_test, "x = x.npu()")]
    if order == "npu first":
        branches.reverse()
    text = "import torch\n\n\ndef f(x, device, dev, args):\n"
    for i, (test, body) in enumerate(branches):
        text += f"    {'if' if i == 0 else 'elif'} {test}:\n        {body}\n"
    text += "    return x\n"
    r = migrate_source(text, "m.py")
    # Only `import torch_npu` is added (the NPU branch uses it); both branches stay as they are.
    assert (r.new_text or text).replace("import torch_npu  # noqa: F401\n", "") == text, r.new_text
    # Without the NPU branch, the CUDA branch migrates as before.
    alone = text.replace(f"elif {npu_test}:\n        x = x.npu()\n", "").replace(
        f"    if {npu_test}:\n        x = x.npu()\n    elif", "    if")
    assert migrate_source(alone, "m.py").new_text is not None, alone


@pytest.mark.parametrize("flag", ["gpu", "use_gpu", "on_cuda", "cuda"])
@pytest.mark.parametrize("test", ['self.device.type == "cuda"', "x.is_cuda", 'not dev.type != "cuda" and ok'])
def test_a_gpu_flag_given_a_device_test_stays(flag, test):
    """Found on pytorch-metric-learning 2.9.0: `FaissKMeans(gpu=self.device.type == "cuda")` asks
    faiss for its GPU (CUDA) index; as `== "npu"` faiss-gpu would be asked for on the NPU. The
    flag's test stays (False there); a device argument beside it still migrates."""
    text = f'import torch\nkm = FaissKMeans({flag}={test}, device=torch.device("cuda"))\n'
    r = migrate_source(text, "m.py")
    assert r.new_text == text.replace('torch.device("cuda")', 'torch.device("npu")').replace(
        "import torch\n", "import torch\nimport torch_npu  # noqa: F401\n"), r.new_text


# trl 1.16.0 experimental/merge_model_callback.py:283-288 (mergekit) and mmsegmentation 1.2.2's
# visualization_cam.py:118 (pytorch-grad-cam), trimmed, beside the module's own function.
LIBRARY_GPU_FLAGS = """\
import torch
from mergekit.config import MergeOptions
from pytorch_grad_cam import GradCAM


def train(model, use_cuda=False):
    if use_cuda:
        model.cuda()


def merge(model, target):
    merge_options = MergeOptions(
        device="auto",
        cuda=torch.cuda.is_available(),
        trust_remote_code=True,
    )
    with GradCAM(model=model, target_layers=[target], use_cuda=torch.cuda.is_available()) as cam:
        cam(torch.zeros(1, device="cuda"))
    train(model, use_cuda=torch.cuda.is_available())
    return merge_options
"""


def test_a_gpu_flag_of_another_library_given_cudas_availability_stays():
    """trl's `MergeOptions(device="auto", cuda=torch.cuda.is_available())`: moved to torch.npu,
    mergekit did its math on "cuda" on the Ascend machine (heldout21); as written it is False there
    and mergekit computes on the CPU, as unmigrated. The module's own `train(use_cuda=...)` moves
    (its `.cuda()` does too), and so does every other device call. Parsed partially (its imports
    asked for) as whole. The flags kept are reported: the user decides whether the CPU will do."""
    expected = LIBRARY_GPU_FLAGS.replace("import torch\n", "import torch\nimport torch_npu  # noqa: F401\n", 1).replace(
        "model.cuda()", "model.npu()").replace('device="cuda"', 'device="npu"').replace(
        "train(model, use_cuda=torch.cuda.is_available())", "train(model, use_cuda=torch.npu.is_available())")
    for partial in (True, False):
        r = migrate_source(LIBRARY_GPU_FLAGS, "trl/experimental/merge_model_callback.py", partial=partial)
        assert r.new_text == expected, partial
        # each kept flag is reported (NPU315), where it is given
        assert [(f.code, f.severity.value, f.span.line, f.span.col, f.api) for f in r.findings] == [
            ("NPU315", "warning", 14, 14, "torch.cuda.is_available()"),
            ("NPU315", "warning", 17, 64, "torch.cuda.is_available()")], partial
        assert r.findings[0].message.startswith(
            "`torch.cuda.is_available()` is given to `mergekit.config.MergeOptions` as its `cuda` flag (another "
            "library's); it is left as it is, so on the NPU it is False and that library runs on the CPU there"), partial


ENV_REPORT_WITH_NPU = '''\
import torch


def environment():
    info = {}
    pt_cuda_available = torch.cuda.is_available()
    pt_npu_available = is_torch_npu_available()
    if pt_cuda_available:
        info["GPU type"] = torch.cuda.get_device_name()
    elif pt_npu_available:
        info["NPU type"] = torch.npu.get_device_name()
    return info
'''


def test_a_cuda_branch_behind_a_variable_migrates_with_the_variable():
    """transformers' commands/env.py: the chain has an NPU branch, but its CUDA test is a variable
    whose value migrates (`torch.npu.is_available()`); a CUDA branch kept behind it would call
    torch.cuda on the NPU. The value and its reader move together."""
    r = migrate_source(ENV_REPORT_WITH_NPU, "commands/env.py")
    assert r.new_text == ENV_REPORT_WITH_NPU.replace(
        "import torch\n", "import torch\nimport torch_npu  # noqa: F401\n", 1).replace(
        "torch.cuda.is_available()", "torch.npu.is_available()").replace(
        "torch.cuda.get_device_name()", "torch.npu.get_device_name()")


@pytest.mark.parametrize("cuda_test", ["is_torch_cuda_available()", "use_cuda", "args.cuda and use_cuda()"])
def test_a_cuda_branch_behind_code_that_migrates_elsewhere_migrates(cuda_test):
    """transformers' pipelines/base.py: `elif is_torch_cuda_available(): torch.device(f"cuda:{d}")`
    beside an NPU branch; utils/import_utils.py's `return torch.cuda.is_available()` migrates, so the
    test is True on the NPU and a kept CUDA branch would make a CUDA device there. It migrates: a
    second NPU branch is redundant, not wrong."""
    text = (f"import torch\n\n\ndef f(d, args):\n    if {cuda_test}:\n        return torch.device(f\"cuda:{{d}}\")\n"
            "    elif is_torch_npu_available():\n        return torch.device(f\"npu:{d}\")\n")
    r = migrate_source(text, "pipelines/base.py")
    assert r.new_text == text.replace('f"cuda:{d}"', 'f"npu:{d}"').replace(
        "import torch\n", "import torch\nimport torch_npu  # noqa: F401\n", 1), r.new_text


# ---------------------------------------------------------------- device tests that open CUDA-only code (NPU315)

TRL_KERNELS = '''\
import torch
from transformers.utils import is_triton_available

if is_triton_available():
    import triton

_MM_OUT_DTYPE = True
_TRITON_AVAILABLE = is_triton_available()


def _jit(fn):
    return triton.jit(fn) if is_triton_available() else fn


def _use_triton(device: torch.device) -> bool:
    return _TRITON_AVAILABLE and device.type in ("cuda", "xpu")


def _addmm_fp32(acc, a, b):
    if _MM_OUT_DTYPE and acc.device.type == "cuda" and a.dtype in (torch.float16, torch.bfloat16):
        torch.addmm(acc, a, b, out_dtype=torch.float32, out=acc)
    else:
        acc.addmm_(a.float(), b.float())


@_jit
def _forward_kernel(tile, n):
    pass


def _forward_tile(tile, n):
    return tile.logsumexp(-1)


def _supports_kernel(logits):
    supported = (
        logits.device.type in ("cuda", "xpu")
        and logits.dtype in (torch.float16, torch.bfloat16, torch.float32)
    )
    return supported


def fold(tile, device, n):
    fold = _forward_kernel[(n,)] if _use_triton(device) else _forward_tile
    if is_triton_available() and _supports_kernel(tile):
        return fold(tile, n)
    if tile.device.type == "cuda":
        torch.cuda.synchronize()
    return _forward_tile(tile, n)
'''

TRL_CLIENT = '''\
import torch
from vllm.distributed.weight_transfer.nccl_engine import NCCLWeightTransferEngine


def init_communicator(device=0):
    device = torch.device("cuda", device) if isinstance(device, int) else torch.device(device)
    if device.type != "cuda":
        raise NotImplementedError(
            f"Weight synchronization runs on vLLM's NCCL weight-transfer engine, which needs a CUDA device, got "
            f"'{device}'."
        )
    if device.index is not None:
        torch.cuda.set_device(device)
    return NCCLWeightTransferEngine.trainer_init({})
'''


def _npu315(result):
    return [(f.code, f.severity.value, f.span.line, f.span.col, f.api) for f in result.findings if f.code == "NPU315"]


def test_device_tests_that_open_triton_kernels_or_a_cuda_only_overload_stay_cuda():
    """Found on trl 1.16.0 (held out): `_use_triton` gated Triton kernels with `device.type in
    ("cuda", "xpu")`; as ("npu", "xpu") the NPU launched them. Likewise a test whose branch calls
    `torch.addmm(..., out_dtype=...)` (CUDA's overload alone) and a predicate whose caller tests it
    with `is_triton_available()`. Those stay "cuda" (False on the NPU: the portable path runs) and
    are reported at their comparison; the ordinary synchronize guard still migrates."""
    r = migrate_source(TRL_KERNELS, "trl/kernels/chunked_logprob.py")
    assert r.error is None
    assert r.new_text == TRL_KERNELS.replace(
        "import torch\n", "import torch\nimport torch_npu  # noqa: F401\n", 1).replace(
        '    if tile.device.type == "cuda":\n        torch.cuda.synchronize()',
        '    if tile.device.type == "npu":\n        torch.npu.synchronize()')
    assert _npu315(r) == [
        ("NPU315", "warning", 16, 34, 'device.type in ("cuda", "xpu")'),
        ("NPU315", "warning", 20, 26, 'acc.device.type == "cuda"'),
        ("NPU315", "warning", 37, 9, 'logits.device.type in ("cuda", "xpu")'),
    ]
    messages = [f.message for f in r.findings if f.code == "NPU315"]
    assert messages[0] == ('`device.type in ("cuda", "xpu")` opens CUDA-only code (the test asks for `_TRITON_AVAILABLE`); '
                           "it is left as it is, so on the NPU it is False and the code takes its other path")
    assert "(`torch.addmm(..., out_dtype=...)`)" in messages[1]
    assert "(it is the result of `_supports_kernel()`, where the test asks for `is_triton_available`)" in messages[2]
    assert [(f.code, f.span.line) for f in r.findings if f.code == "NPU316"] == [("NPU316", 21)]
    assert not migrate_source(r.new_text, "trl/kernels/chunked_logprob.py").changed  # idempotent


def test_a_guard_that_refuses_non_cuda_devices_before_nccl_code_stays_and_is_an_error():
    """trl's vLLM client: `if device.type != "cuda": raise NotImplementedError(...)` before vLLM's
    NCCL weight-transfer engine. As `!= "npu"` the NPU got past it into NCCL; kept, the NPU raises
    the error as written. The device it tests still becomes "npu" (value and test agree: the
    guard raises). The set_device behind it runs on CUDA only now and stays as it is (it became
    `torch.npu.set_device` before: NPU code behind a CUDA-only refusal)."""
    r = migrate_source(TRL_CLIENT, "trl/generation/vllm_client.py")
    assert r.new_text == TRL_CLIENT.replace(
        "import torch\n", "import torch\nimport torch_npu  # noqa: F401\n", 1).replace(
        'torch.device("cuda", device)', 'torch.device("npu", device)')
    assert _npu315(r) == [("NPU315", "error", 7, 8, 'device.type != "cuda"')]
    assert "before CUDA-only code (`NCCLWeightTransferEngine` from vllm.distributed.weight_transfer.nccl_engine)" in (
        next(f.message for f in r.findings if f.code == "NPU315"))
    assert [(f.code, f.span.line, f.api) for f in r.findings if f.code == "NPU303"] == [
        ("NPU303", 2, "vllm.distributed.weight_transfer.nccl_engine")]


@pytest.mark.parametrize("text", [TRL_KERNELS, TRL_CLIENT] + [
    ex.flagged or ex.not_flagged for rule in RULES.rules if rule.code == "NPU315" for ex in rule.examples])
def test_kept_device_tests_are_the_same_parsed_partially_as_whole(text):
    """The analysis reads callers, callees and the rest of a block: with partial parsing it asks
    for the lines it needs (Context.partial_misses/partial_lines), so the result is the whole
    parse's. The file is padded so that partial parsing leaves lines out."""
    assert_partial_as_whole(text)


# transformers' zamba/jamba/mamba2: the test reads a module-level variable that partial parsing
# leaves out (`is_fast_path_available = all(...)` over names a CUDA-only import binds)
FAST_PATH_VARIABLE = (
    "import torch\nfrom torch import nn\n\nif is_mamba_ssm_available():\n"
    "    from mamba_ssm.ops.selective_scan_interface import selective_scan_fn\nelse:\n    selective_scan_fn = None\n\n"
    "is_fast_path_available = all((selective_scan_fn,))\n\n\nclass Mixer(nn.Module):\n    def forward(self, x):\n"
    "        if not is_fast_path_available or 'cuda' not in x.device.type:\n"
    "            raise ValueError('Fast kernels are not available')\n        return self.fast(x)\n")
# the CUDA side calls a function left out, which imports a Triton module inside its body
IMPORT_IN_A_FUNCTION_LEFT_OUT = (
    "import torch\n\n\ndef fused(x):\n    from .triton_ops import fused_norm\n    return fused_norm(x)\n\n\n"
    "def norm(x):\n    if x.device.type == 'cuda':\n        return fused(x)\n    return x\n")


@pytest.mark.parametrize("text, line", [(FAST_PATH_VARIABLE, 14), (IMPORT_IN_A_FUNCTION_LEFT_OUT, 10)])
def test_what_a_device_test_reaches_in_lines_left_out_is_asked_for(text, line):
    """The analysis reads only what a device test reaches, and asks for the lines left out that
    define what it reads (a module-level variable, a function whose import is CUDA-only): kept
    and reported as a whole parse does, and only then a second partial attempt."""
    assert_partial_as_whole(text)
    result = migrate_source(text + "".join(f"\n\ndef unrelated_{i}(x):\n    return x + {i}\n" for i in range(30)),
                            "m.py", Options(), RULES)
    assert [(f.code, f.span.line) for f in result.findings if f.code == "NPU315"] == [("NPU315", line)]
    assert result.work["retry"] == 1 and "parse" not in result.work


# speechbrain 1.1.2 integrations/numba/transducer_loss.py (held out): the test is inside
# `all(...)`, the CUDA side calls an attribute the class assigns an autograd Function launching
# numba.cuda kernels
NUMBA_TRANSDUCER = (
    "import torch\nfrom numba import cuda\nfrom torch.autograd import Function\nfrom torch.nn import Module\n\n\n"
    "@cuda.jit()\ndef cu_kernel_forward(log_probs, out):\n    out[0] = log_probs[0]\n\n\n"
    "class Transducer(Function):\n    @staticmethod\n    def forward(ctx, log_probs):\n"
    "        out = torch.zeros(1)\n        cu_kernel_forward[1, 1](log_probs, out)\n        return out\n\n\n"
    "class TransducerLoss(Module):\n    def __init__(self):\n        super().__init__()\n"
    "        self.loss = Transducer.apply\n\n    def forward(self, logits, labels):\n"
    "        if all(t.is_cuda for t in (logits, labels)):\n            return self.loss(logits.log_softmax(-1))\n"
    "        else:\n            raise ValueError(\"needed to be on a 'cuda' device\")\n")


def test_a_test_inside_all_before_an_attribute_holding_cuda_only_code_stays():
    """speechbrain's TransducerLoss.forward: `if all(t.is_cuda for t in (...)): return
    self.loss(...)` with `self.loss = Transducer.apply`, whose forward launches numba.cuda
    kernels. As `t.is_npu` the NPU's tensors would go into numba.cuda; kept, the NPU takes the
    error branch, as written (NPU315). Parsed partially as whole."""
    result = migrate_source(NUMBA_TRANSDUCER, "transducer_loss.py", Options(), RULES)
    assert result.new_text is None or "t.is_cuda for t in" in result.new_text
    found = [(f.code, f.span.line, f.span.col) for f in result.findings if f.code == "NPU315"]
    assert found == [("NPU315", 26, 16)]
    assert "`self.loss`, which is `Transducer`, which uses `cu_kernel_forward`" in next(
        f.message for f in result.findings if f.code == "NPU315")
    assert_partial_as_whole(NUMBA_TRANSDUCER)


# pytorch-metric-learning 2.9.0 utils/inference.py (held out): the test's value goes into a
# function by position, whose parameter gates faiss's GPU index (NPU303: no Ascend build)
FAISS_FLAG_PASSED = (
    "import faiss\nimport torch\n\n\ndef convert_to_gpu_index(index, gpus):\n    if gpus is None:\n"
    "        return faiss.index_cpu_to_all_gpus(index)\n    return faiss.index_cpu_to_gpus_list(index, gpus=gpus)\n\n\n"
    "def try_gpu(index, query, k, is_cuda, gpus):\n    gpu_condition = (is_cuda or (gpus is not None)) and faiss.get_num_gpus() > 0\n"
    "    if gpu_condition:\n        index = convert_to_gpu_index(index, gpus)\n    return index.search(query.float().cpu(), k)\n\n\n"
    "def knn(index, query, k, gpus=None):\n    is_cuda = query.is_cuda\n    return try_gpu(index, query, k, is_cuda, gpus)\n")


def test_a_test_passed_by_position_into_a_gate_of_faiss_gpu_stays():
    """pytorch-metric-learning's FaissKNN: `is_cuda = query.is_cuda` passed positionally to
    try_gpu(), which moves the index to faiss's GPUs when it is set. As `query.is_npu` an NPU
    query would ask faiss for GPUs; kept, it is False there and the CPU index runs (NPU315).
    Parsed partially as whole."""
    result = migrate_source(FAISS_FLAG_PASSED, "inference.py", Options(), RULES)
    assert result.new_text is None or "query.is_cuda" in result.new_text
    message = next(f.message for f in result.findings if f.code == "NPU315")
    assert [(f.span.line, f.span.col) for f in result.findings if f.code == "NPU315"] == [(19, 15)]
    assert "it is passed to `try_gpu()`, where `convert_to_gpu_index`, which uses `faiss.index_cpu_to_" in message
    assert_partial_as_whole(FAISS_FLAG_PASSED)


ORDINARY = [
    ("if x.device.type == 'cuda':\n        torch.cuda.synchronize()",
     "if x.device.type == 'npu':\n        torch.npu.synchronize()"),
    ("if x.device.type == 'cuda':\n        print(torch.cuda.max_memory_allocated())",
     "if x.device.type == 'npu':\n        print(torch.npu.max_memory_allocated())"),
    ("amp = torch.cuda.amp if x.device.type == 'cuda' else torch.cpu.amp",
     "amp = torch.npu.amp if x.device.type == 'npu' else torch.cpu.amp"),
    ("loader = DataLoader(ds, pin_memory=x.device.type == 'cuda')",
     "loader = DataLoader(ds, pin_memory=x.device.type == 'npu')"),
    ("with torch.autocast(x.device.type, enabled=x.device.type in ('cuda', 'xpu')):\n        pass",
     "with torch.autocast(x.device.type, enabled=x.device.type in ('npu', 'xpu')):\n        pass"),
    ("if x.device.type != 'cuda':\n        return x.cpu()",
     "if x.device.type != 'npu':\n        return x.cpu()"),
]


@pytest.mark.parametrize("before,after", ORDINARY)
def test_ordinary_device_tests_migrate_in_a_file_that_uses_triton(before, after):
    """The analysis looks only where CUDA-only code is: in a file with Triton kernels, a test that
    opens synchronize, memory stats, AMP, pin_memory (or returns early) still becomes an NPU test.
    (`import torch_npu` only where torch.npu is called: a comparison with `x.device.type` asks for
    none, since x is on the NPU only where torch_npu is loaded.)"""
    head = "import torch\nimport triton\n\n\n@triton.jit\ndef _k(x):\n    pass\n\n\ndef f(x, ds):\n    "
    r = migrate_source(head + before + "\n    return x\n", "m.py")
    expected = head + after + "\n    return x\n"
    if "torch.npu" in after:
        expected = expected.replace("import torch\n", "import torch\nimport torch_npu  # noqa: F401\n", 1)
    assert r.new_text == expected
    assert _npu315(r) == []


@pytest.mark.parametrize("text,kept", [
    # a predicate that answers the device test by an early `return False`, named for a library
    ("import torch\n\n\ndef can_use_triton(x):\n    if x.device.type != 'cuda':\n        return False\n"
     "    return True\n", "x.device.type != 'cuda'"),
    # ... or whose caller tests it with the library's availability
    ("import torch\n\n\ndef _fits(x):\n    if x.device.type != 'cuda':\n        return False\n    return x.ndim == 2\n\n\n"
     "def f(x):\n    if HAS_FLASH_ATTN and _fits(x):\n        return x\n    return x\n", "x.device.type != 'cuda'"),
    # a capability check the planner keeps on CUDA (NPU307) behind an early return (liger-kernel 0.8.5)
    ("import torch\n\n\ndef _sm100(t):\n    if t.device.type != 'cuda':\n        return False\n"
     "    return torch.cuda.get_device_capability(t.device) == (10, 0)\n", "t.device.type != 'cuda'"),
    # a refusal in a module that imports a CUDA-only library unconditionally (a CuTe DSL file)
    ("import torch\nimport cutlass.cute as cute\n\n\ndef check(device):\n    if device.type != 'cuda':\n"
     "        raise ValueError('must be a CUDA tensor')\n    return device\n", "device.type != 'cuda'"),
    # the rest of the block after a refusal holds `return f().x` (partial.py's runs_among crashed on it)
    ("import torch\nimport triton\n\n\ndef f(x):\n    if x.device.type != 'cuda':\n        raise NotImplementedError\n"
     "    y = triton.cdiv(x.numel(), 4)\n    return g(y).shape\n", "x.device.type != 'cuda'"),
    # a flag named for the library (monai 1.6.1's `use_cucim`)
    ("import torch\n\n\ndef f(x):\n    use_cucim = has_cucim and x.device.type == 'cuda'\n    if use_cucim:\n"
     "        return erode(x)\n    return x\n", "x.device.type == 'cuda'"),
    # an assert refuses like a raise (torchao 0.18's CuTe DSL kernels: `assert x.is_cuda, "Input tensor must be CUDA"`)
    ("import torch\nimport triton\n\n\ndef f(x):\n    assert x.device.type == 'cuda', 'Input tensor must be CUDA'\n"
     "    return triton.cdiv(x.numel(), 4)\n", "x.device.type == 'cuda'"),
    ("import torch\n\n\ndef gptq(device):\n    assert device.type == 'cuda', 'GPTQ only supports CUDA currently'\n"
     "    return device\n", "device.type == 'cuda'"),
    # a module's own wrapper of a kernel: the branch calls it
    ("import torch\nfrom .triton_ops import fused_norm\n\n\ndef norm(x):\n    return fused_norm(x)\n\n\n"
     "def f(x):\n    if x.device.type == 'cuda':\n        return norm(x)\n    return x / x.norm()\n", "x.device.type == 'cuda'"),
])
def test_device_tests_reached_through_predicates_wrappers_and_modules_stay(text, kept):
    """Shapes found on liger-kernel 0.8.5 and generalised: the CUDA-only code is reached through a
    function of the module, a predicate's callers, a statement kept on CUDA, or the module itself."""
    r = migrate_source(text, "m.py")
    assert (r.new_text or text).replace("import torch_npu  # noqa: F401\n", "") == text, r.new_text
    assert [f.api for f in r.findings if f.code == "NPU315"] == [kept]
    assert_partial_as_whole(text)


@pytest.mark.parametrize("text", [
    # a function that tests the device itself dispatches: calling it is no CUDA-only code
    "import torch\nimport triton\n\n\ndef norm(x):\n    if x.device.type == 'cuda':\n        return triton_norm(x)\n"
    "    return x\n\n\ndef f(x):\n    if x.device.type == 'cuda':\n        torch.cuda.synchronize()\n        return norm(x)\n"
    "    return x\n",
    # an early `return False` predicate whose callers use plain PyTorch (liger-kernel's _can_use_mm_out)
    "import torch\nimport triton\n\n\ndef _can_use_out(x):\n    if x.device.type != 'cuda':\n        return False\n"
    "    return True\n\n\ndef f(x, w, y):\n    if _can_use_out(x):\n        torch.mm(x, w, out=y)\n    return y\n",
    # a refusal whose error says nothing CUDA-only, in a file without CUDA-only imports at its top
    "import torch\n\n\ndef f(x):\n    if x.device.type != 'cuda':\n        raise ValueError('Device should be CUDA')\n"
    "    return x\n",
])
def test_device_tests_that_open_portable_code_migrate(text):
    r = migrate_source(text, "m.py")
    assert r.new_text is not None and "'cuda'" not in r.new_text, r.new_text
    assert [f.api for f in r.findings if f.code == "NPU315"] == []
    assert_partial_as_whole(text)


def test_an_is_cuda_test_that_opens_triton_kernels_stays():
    """`x.is_cuda` in front of Triton code is the same gate as `x.device.type == "cuda"`."""
    text = ("import torch\nimport triton\n\n\n@triton.jit\ndef _k(x):\n    pass\n\n\n"
            "def f(x):\n    if x.is_cuda and x.ndim == 2:\n        _k[(1,)](x)\n        return x\n    return x.sum()\n")
    r = migrate_source(text, "m.py")
    assert r.new_text is None
    assert _npu315(r) == [("NPU315", "warning", 11, 8, "x.is_cuda")]


@pytest.mark.parametrize("text,kept,migrated", [
    # transformers' is_flash_attn_2_available(): a function named for the library
    ("import torch\n\n\ndef is_flash_attn_2_available():\n    if not torch.cuda.is_available():\n        return False\n"
     "    return True\n", "torch.cuda.is_available()", None),
    # a branch that launches a Triton kernel; the synchronize beside it still migrates
    ("import torch\nimport triton\n\n\n@triton.jit\ndef _k(x):\n    pass\n\n\ndef f(x):\n"
     "    if torch.cuda.is_available():\n        _k[(1,)](x)\n    if torch.cuda.is_available():\n        torch.cuda.synchronize()\n",
     "torch.cuda.is_available()", "    if torch.npu.is_available():\n        torch.npu.synchronize()\n"),
])
def test_cuda_availability_that_opens_cuda_only_code_stays(text, kept, migrated):
    """`torch.cuda.is_available()` in front of CUDA-only code is the same gate as a device-type
    test: kept, it is False on the NPU."""
    r = migrate_source(text, "m.py")
    assert [f.api for f in r.findings if f.code == "NPU315"] == [kept]
    if migrated is None:
        assert r.new_text is None
    else:
        assert r.new_text == text.replace("import torch\n", "import torch\nimport torch_npu  # noqa: F401\n", 1).replace(
            "    if torch.cuda.is_available():\n        torch.cuda.synchronize()\n", migrated)
    assert_partial_as_whole(text)


def test_an_attribute_named_like_a_cuda_only_import_is_not_that_import():
    """liger-kernel's CuTe files `from cuda.bindings import driver as cuda`: the `cuda` of
    `torch.cuda.is_available()` is an attribute, not that name; the test migrates."""
    text = ("import torch\nfrom cuda.bindings import driver as cuda\n\n\ndef f(x):\n"
            "    if torch.cuda.is_available():\n        x = x.cuda()\n    return x\n")
    r = migrate_source(text, "m.py")
    assert r.new_text == text.replace("import torch\n", "import torch\nimport torch_npu  # noqa: F401\n", 1).replace(
        "torch.cuda.is_available()", "torch.npu.is_available()").replace("x.cuda()", "x.npu()")
    assert _npu315(r) == []


# fairseq 0.12.2 (held out): ngram_repeat_block.py:20-30 and utils.py:320-340. The tests stay
# CUDA (NPU315); the code they open is dead on the NPU and stays as it is with them.
FAIRSEQ_KEPT_TESTS_OPEN = '''\
import torch

try:
    from fairseq import ngram_repeat_block_cuda

    EXTENSION_BUILT = True
except ImportError:
    EXTENSION_BUILT = False

try:
    from amp_C import multi_tensor_l2norm
except ImportError:
    multi_tensor_l2norm = None


def is_cuda_extension_usable() -> bool:
    if not EXTENSION_BUILT or not torch.cuda.is_available():
        return False
    tokens = torch.tensor([[4, 4, 3, 2], [1, 2, 3, 4]], dtype=torch.long, device="cuda")
    lprobs = torch.rand((8, 12), device="cuda")
    outputs = ngram_repeat_block_cuda.forward(tokens, lprobs, 2, 3, 4, 3)
    return outputs is not None


def multi_tensor_total_norm(per_device_grads, chunk_size=2048 * 32):
    norms = []
    for device in per_device_grads.keys():
        cur_device_grads = per_device_grads[device]
        if device.type == "cuda":
            has_inf = torch.zeros((1, 1), dtype=torch.int, device=device)
            with torch.cuda.device(device):
                norm = multi_tensor_l2norm(chunk_size, has_inf, [cur_device_grads], False)
            norms.append(norm[0].to(torch.cuda.current_device()))
        else:
            norms += [torch.norm(g, p=2, dtype=torch.float32) for g in cur_device_grads]
    return torch.norm(torch.stack(norms)).to(torch.cuda.current_device())
'''


def test_the_code_a_kept_test_opens_stays_with_it():
    """fairseq: `if not EXTENSION_BUILT or not torch.cuda.is_available(): return False` then
    `device="cuda"` tensors for ngram_repeat_block_cuda; `if device.type == "cuda": with
    torch.cuda.device(device): multi_tensor_l2norm(...)`. The tests stay CUDA (NPU315), so the
    NPU never runs the code under them: rewritten to "npu" it was a half-migrated block in the
    diff (NPU code behind a CUDA test). Code after the branch still migrates."""
    result = migrate_source(FAIRSEQ_KEPT_TESTS_OPEN, "fairseq/utils.py", Options(), RULES)
    assert [(f.code, f.span.line) for f in result.findings if f.code == "NPU315"] == [("NPU315", 17), ("NPU315", 29)]
    assert result.new_text == FAIRSEQ_KEPT_TESTS_OPEN.replace("import torch\n", "import torch\nimport torch_npu  # noqa: F401\n", 1).replace(
        "torch.stack(norms)).to(torch.cuda.current_device())", "torch.stack(norms)).to(torch.npu.current_device())")
    assert_partial_as_whole(FAIRSEQ_KEPT_TESTS_OPEN)


@pytest.mark.parametrize("test", ["x.is_cuda or force", "not (x.is_cuda and HAS_TRITON) and force"])
def test_the_code_a_kept_test_does_not_decide_alone_migrates(test):
    """`if x.is_cuda or force:` runs its body on the NPU too when `force` is set: the test stays
    (its body launches Triton), the body's device code migrates as before."""
    text = (f"import torch\nimport triton\n\n\n@triton.jit\ndef kernel(x):\n    pass\n\n\n"
            f"def run(x, force, HAS_TRITON):\n    if {test}:\n        torch.cuda.synchronize()\n        kernel(x)\n")
    result = migrate_source(text, "k.py", Options(), RULES)
    assert "torch.npu.synchronize()" in result.new_text


ATTRIBUTE_LAUNCH = '''\
import torch
import triton


@triton.jit
def _add_kernel(x_ptr, n):
    pass


class Adder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.kernel = _add_kernel

    def forward(self, x):
        if x.is_cuda:
            self.kernel[(1,)](x, x.numel())
            torch.cuda.synchronize()
            return x
        return x + 1
'''


def test_a_test_before_a_triton_launch_through_an_attribute_stays():
    """`self.kernel[grid](...)` with `self.kernel = <@triton.jit function>`: the launch goes
    through the instance's attribute, subscripted by the grid. As `x.is_npu` the NPU launched
    the CUDA Triton kernel; kept (NPU315), with the code it opens. Parsed partially as whole."""
    result = migrate_source(ATTRIBUTE_LAUNCH, "adder.py", Options(), RULES)
    assert result.new_text is None
    assert [(f.code, f.span.line, f.span.col) for f in result.findings if f.code == "NPU315"] == [("NPU315", 16, 12)]
    assert "(`self.kernel`, which is `_add_kernel`, which uses `triton`)" in next(
        f.message for f in result.findings if f.code == "NPU315")
    assert_partial_as_whole(ATTRIBUTE_LAUNCH)


def test_a_refusal_that_admits_the_npu_already_is_not_kept_and_its_block_migrates():
    """NPU315's suggestion: port the CUDA-only code, then add "npu" to the test. After that
    (`if device.type not in ("cuda", "npu"): raise`), a rerun reported NPU315 again on a test
    the torch pass leaves alone anyway, and kept the `torch.cuda.set_device` behind it (the
    CUDA side of a kept test stays with it): now the test is not judged and the block moves."""
    ported = TRL_CLIENT.replace('if device.type != "cuda":', 'if device.type not in ("cuda", "npu"):').replace(
        'torch.device("cuda", device)', 'torch.device("npu", device)')
    r = migrate_source(ported, "trl/generation/vllm_client.py")
    assert r.new_text == ported.replace("import torch\n", "import torch\nimport torch_npu  # noqa: F401\n", 1).replace(
        "torch.cuda.set_device(device)", "torch.npu.set_device(device)")
    assert [(f.code, f.span.line) for f in r.findings] == [("NPU303", 2)]


# OpenNMT-py 3.5.1 (held out): onmt/modules/sru.py:55 tests `torch.cuda.is_available() is False`
# before cupy and NVRTC kernels; the comparison with a bool is the test's negation.
SRU_REFUSAL = '''\
import torch


def load_sru(abort=False):
    if torch.cuda.is_available() {compared}:
        raise AssertionError("Using SRU requires pytorch built with cuda.")
    from cupy.cuda import function
    device = torch.device("cuda")
    return function.Module(), device
'''


@pytest.mark.parametrize("compared", ["is False", "== False", "is not True", "!= True"])
def test_a_device_test_compared_with_false_is_judged_as_its_negation(compared):
    """`if torch.cuda.is_available() is False: raise` refuses non-CUDA devices as `if not ...`
    does: it stays CUDA (NPU315) with the cupy code after it. Read as a positive test, it was
    rewritten to `torch.npu.is_available() is False` with `torch.device("npu")` before cupy."""
    text = SRU_REFUSAL.format(compared=compared)
    result = migrate_source(text, "onmt/modules/sru.py", Options(), RULES)
    assert [(f.code, f.span.line, f.api) for f in result.findings if f.code == "NPU315"] == [
        ("NPU315", 5, "torch.cuda.is_available()")]
    assert result.new_text is None
    assert_partial_as_whole(text)


@pytest.mark.parametrize("compared,kept", [("is True", True), ("== True", True), ("is False", False)])
def test_a_device_test_compared_with_true_is_the_test_itself(compared, kept):
    """`if torch.cuda.is_available() is True:` opens its body on CUDA: a cupy body keeps it;
    `is False` opens the body on every other device, so the test migrates; the body, which
    imports cupy itself, is CUDA interop code and stays whole (NPU319)."""
    text = ("import torch\n\n\ndef load():\n"
            f"    if torch.cuda.is_available() {compared}:\n"
            "        from cupy.cuda import function\n        return function.Module(), torch.device(\"cuda\")\n"
            "    return None\n")
    result = migrate_source(text, "m.py", Options(), RULES)
    assert [f.code for f in result.findings if f.code == "NPU315"] == (["NPU315"] if kept else [])
    if kept:
        assert result.new_text is None
    else:
        assert result.new_text == text.replace("import torch\n", "import torch\nimport torch_npu  # noqa: F401\n", 1).replace(
            "torch.cuda.is_available()", "torch.npu.is_available()")
        assert [(f.code, f.api) for f in result.findings if f.code == "NPU319"] == [
            ("NPU319", "if torch.cuda.is_available() is False:")]


# espnet 202511 espnet2/asr/transducer/rnnt_multi_blank (held out): the CUDA-only code is in
# ANOTHER module (rnnt.py launches numba.cuda kernels); the loss module imports no CUDA library
RNNT_LAUNCHERS = '''\
import torch
from numba import cuda


def rnnt_loss_gpu(acts, costs):
    stream = cuda.external_stream(torch.cuda.current_stream(acts.device).cuda_stream)
    cuda.select_device(acts.device.index)
    return costs


def rnnt_loss_cpu(acts, costs):
    costs.copy_(acts.sum())
    return costs
'''
RNNT_LOSS = '''\
import torch
from torch.autograd import Function
from torch.nn import Module

from {import_rnnt}


class _RNNTNumba(Function):
    @staticmethod
    def forward(ctx, acts, labels):
        is_cuda = acts.is_cuda
        loss_func = rnnt.rnnt_loss_gpu if is_cuda else rnnt.rnnt_loss_cpu
        costs = torch.zeros(acts.size(0), device=acts.device)
        return loss_func(acts, costs)


def rnnt_loss(acts, labels, clamp=0.0):
    if not acts.is_cuda:
        # log_softmax is computed within GPU version
        acts = torch.nn.functional.log_softmax(acts, -1)
    return _RNNTNumba.apply(acts, labels)


class RNNTLossNumba(Module):
    def __init__(self):
        super().__init__()
        self.loss = _RNNTNumba.apply

    def forward(self, acts, labels):
        if not acts.is_cuda:
            acts = torch.nn.functional.log_softmax(acts, -1)
        return self.loss(acts, labels)


def to_device(x):
    return x.cuda() if x.is_cuda else x
'''


def _detail(finding):
    return finding.message.split(" opens CUDA-only code (", 1)[1].rsplit("); it is left", 1)[0]


def _rnnt_project(root, import_rnnt="espnet2.asr.rnnt_multi_blank import rnnt", launchers=RNNT_LAUNCHERS):
    package = root / "espnet2" / "asr" / "rnnt_multi_blank"
    package.mkdir(parents=True)
    for folder in (root / "espnet2", root / "espnet2" / "asr", package):
        (folder / "__init__.py").write_text("", encoding="utf-8")
    (package / "rnnt.py").write_text(launchers, encoding="utf-8")
    (package / "rnnt_multi_blank.py").write_text(RNNT_LOSS.format(import_rnnt=import_rnnt), encoding="utf-8")
    return package


def _project_options(folder):
    from npu_migrate.pipeline import with_project_values

    files = sorted(str(p) for p in folder.rglob("*.py"))
    return with_project_values(Options(), files, RULES)


@pytest.mark.parametrize("import_rnnt", ["espnet2.asr.rnnt_multi_blank import rnnt", ". import rnnt",
                                         "espnet2.asr.rnnt_multi_blank import rnnt as rnnt"])
def test_device_tests_before_cuda_only_code_of_another_module_stay_with_the_tests_that_pair_with_them(
        tmp_path, import_rnnt):
    """espnet's rnnt_multi_blank.py: `rnnt.rnnt_loss_gpu if is_cuda else rnnt.rnnt_loss_cpu`,
    rnnt_loss_gpu in rnnt.py launching numba.cuda kernels. As `acts.is_npu` the NPU entered
    numba.cuda; and the wrappers' `if not acts.is_cuda: acts = log_softmax(acts)` (the CPU loss
    needs it, the GPU one computes it) must stay with it, or NPU tensors reach the CPU loss
    without their log_softmax: a silently wrong loss. All stay (NPU315), the module is unchanged;
    `x.cuda() if x.is_cuda` beside them still moves. Found by the project scan (Options), the
    same parsed partially as whole."""
    package = _rnnt_project(tmp_path, import_rnnt)
    options = _project_options(tmp_path)
    module = os.path.join(str(package), "rnnt")
    assert options.cuda_only_code == (f"{module}::rnnt_loss_gpu::numba.cuda",)
    path = str(package / "rnnt_multi_blank.py")
    text = (package / "rnnt_multi_blank.py").read_text(encoding="utf-8")
    for partial in (True, False):
        r = migrate_source(text, path, options, RULES, partial=partial)
        assert r.new_text == text.replace("import torch\n", "import torch\nimport torch_npu  # noqa: F401\n", 1).replace(
            "return x.cuda() if x.is_cuda else x", "return x.npu() if x.is_npu else x")
        assert [(f.code, f.span.line, f.api, _detail(f)) for f in r.findings] == [
            ("NPU315", 11, "acts.is_cuda", "`rnnt.rnnt_loss_gpu` of rnnt.py, which uses numba.cuda"),
            ("NPU315", 18, "acts.is_cuda", "the same tensor goes on to `_RNNTNumba.apply()`, whose device test stays CUDA"),
            ("NPU315", 30, "acts.is_cuda", "the same tensor goes on to `_RNNTNumba.apply()`, whose device test stays CUDA"),
        ]
    # without the project's facts (rnnt.py not in the run) it migrates, as before
    assert "acts.is_npu" in migrate_source(text, path, Options(), RULES).new_text


def test_a_function_imported_by_name_from_another_module_is_cuda_only_code(tmp_path):
    package = _rnnt_project(tmp_path, ".rnnt import rnnt_loss_gpu, rnnt_loss_cpu")
    path = package / "rnnt_multi_blank.py"
    text = path.read_text(encoding="utf-8").replace("rnnt.rnnt_loss_", "rnnt_loss_")
    r = migrate_source(text, str(path), _project_options(tmp_path), RULES)
    assert [(f.code, f.span.line) for f in r.findings] == [("NPU315", 11), ("NPU315", 18), ("NPU315", 30)]
    assert "(`rnnt_loss_gpu` of rnnt.py, which uses numba.cuda)" in r.findings[0].message


# parlai 1.7.2 parlai/ops/ngram_repeat_block.py and core/torch_generator_agent.py, trimmed.
NGRAM_BLOCK = """\
import torch
from torch import nn

import os
from torch.utils.cpp_extension import load


class NGramRepeatBlock(nn.Module):
    def __init__(self):
        super(NGramRepeatBlock, self).__init__()
        try:
            self.ngram_repeat_block_cuda = load(
                name='ngram_repeat_block_cuda',
                sources=[
                    '../clib/cuda/ngram_repeat_block_cuda.cpp',
                    '../clib/cuda/ngram_repeat_block_cuda_kernel.cu',
                ],
            )
        except Exception as e:
            self.ngram_repeat_block_cuda = None

    def forward(self, hypothesis, context, lprobs, bsz, step, beam_size, no_repeat_ngram_size):
        return self.ngram_repeat_block_cuda.forward(hypothesis, context, lprobs, bsz, step, beam_size,
                                                    no_repeat_ngram_size)
"""
TREE_SEARCH = """\
import torch
{import_block}


class TreeSearch(object):
    def __init__(self, beam_size, gpu_beam_blocking=False):
        self.beam_size = beam_size
        self.gpu_beam_blocking = gpu_beam_blocking and torch.cuda.is_available()
        self.partial_hyps = torch.tensor([[self.bos] for i in range(beam_size)])
        if self.gpu_beam_blocking:
            self.partial_hyps = self.partial_hyps.cuda()
            self.no_repeat_ngram_op = NGramRepeatBlock()

    def select_paths(self, logprobs, prior_scores, current_length):
        if self.gpu_beam_blocking:
            logprobs = self.no_repeat_ngram_op(self.partial_hyps, self.context, logprobs, 1, current_length,
                                               self.beam_size, 3)
        return logprobs


def cleanup(x):
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return x
"""


@pytest.mark.parametrize("import_block", [
    "from parlai.ops.ngram_repeat_block import NGramRepeatBlock",
    "from ..ops.ngram_repeat_block import NGramRepeatBlock",
    # (parlai's own: the import behind an availability test of its own, which stays with its reader)
    "\nif torch.cuda.is_available():\n    from parlai.ops.ngram_repeat_block import NGramRepeatBlock",
])
def test_a_device_test_held_in_an_attribute_that_opens_another_modules_cuda_extension_stays(tmp_path, import_block):
    """parlai 1.7.2's TreeSearch: `self.gpu_beam_blocking = gpu_beam_blocking and
    torch.cuda.is_available()`, then `if self.gpu_beam_blocking:` builds NGramRepeatBlock, whose
    __init__ loads a .cu extension with cpp_extension.load (caught: None) and whose forward calls
    it. Moved, the NPU built it and crashed at forward; kept, it is False on the NPU and the
    CPU blocking runs (NPU315). The project scan finds the class (a definition that builds CUDA
    sources), the test follows the attribute to the reader in __init__. The code of the branches
    that `self.gpu_beam_blocking` opens stays as written too (`self.partial_hyps.cuda()`: on the NPU
    the attribute is False and it never runs; rewritten, it was NPU code behind a CUDA test); the
    other test moves (plain). Parsed partially as whole."""
    ops = tmp_path / "parlai" / "ops"
    core = tmp_path / "parlai" / "core"
    for folder in (ops, core):
        folder.mkdir(parents=True)
        (folder / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "parlai" / "__init__.py").write_text("", encoding="utf-8")
    (ops / "ngram_repeat_block.py").write_text(NGRAM_BLOCK, encoding="utf-8")
    text = TREE_SEARCH.format(import_block=import_block)
    (core / "torch_generator_agent.py").write_text(text, encoding="utf-8")
    options = _project_options(tmp_path)
    assert options.cuda_only_code == (f"{ops / 'ngram_repeat_block'}::NGramRepeatBlock::torch.utils.cpp_extension",)
    line = text.splitlines().index("        self.gpu_beam_blocking = gpu_beam_blocking and torch.cuda.is_available()") + 1
    for partial in (True, False):
        r = migrate_source(text, str(core / "torch_generator_agent.py"), options, RULES, partial=partial)
        assert r.new_text == text.replace("import torch\n", "import torch\nimport torch_npu  # noqa: F401\n", 1).replace(
            "    if torch.cuda.is_available():\n        torch.cuda.empty_cache()", "    if torch.npu.is_available():\n"
            "        torch.npu.empty_cache()"), partial
        imported = [("NPU315", 3, "torch.cuda.is_available()", "it imports `NGramRepeatBlock` of ngram_repeat_block.py,"
                     " which uses torch.utils.cpp_extension")] if "if torch" in import_block else []
        assert [(f.code, f.span.line, f.api, _detail(f)) for f in r.findings] == imported + [
            ("NPU315", line, "torch.cuda.is_available()", "it is kept in `self.gpu_beam_blocking`, where `NGramRepeatBlock`"
             " of ngram_repeat_block.py, which uses torch.utils.cpp_extension")]
    # a C++-only extension builds and runs on the host: the test moves
    (ops / "ngram_repeat_block.py").write_text(NGRAM_BLOCK.replace(
        "                    '../clib/cuda/ngram_repeat_block_cuda_kernel.cu',\n", ""), encoding="utf-8")
    options = _project_options(tmp_path)
    assert options.cuda_only_code == ()
    r = migrate_source(text, str(core / "torch_generator_agent.py"), options, RULES)
    assert "gpu_beam_blocking and torch.npu.is_available()" in r.new_text and r.findings == []


# A kept device test held in a function's variable: the branches its readers open run only on CUDA.
HELD_KERNEL_TEST = """\
import torch
import triton


@triton.jit
def _kernel(x):
    pass


def fold(x, fast):
    use_kernel = fast and x.device.type == "cuda"
    if use_kernel:
        x = x.contiguous().cuda()
        _kernel[(1,)](x)
    else:
        x = x.to("cuda")
    return x
"""


@pytest.mark.parametrize("change, stays", [("", True), ("False", True), ("or", False), ("True", False)])
def test_the_branches_a_variable_holding_a_kept_test_opens_stay_as_written(change, stays):
    """`use_kernel = fast and x.device.type == "cuda"` stays (its reader launches a Triton kernel,
    NPU315), so on the NPU `use_kernel` is False and `if use_kernel:` never runs: its `.cuda()`
    stays as written (moved, it was NPU code behind a CUDA test), its `else` moves. Not where the
    variable can be True without the test (`fast or <test>`, another assignment but False/None)."""
    text = HELD_KERNEL_TEST
    if change == "or":
        text = text.replace("fast and x.device", "fast or x.device")
    elif change:  # another assignment after the readers
        text = text.replace("    return x\n", f"    use_kernel = {change}\n    return x\n")
    r = assert_partial_as_whole(text, "ops.py")
    moved = 'x = x.to("npu")' in r.new_text and 'x.device.type == "cuda"' in r.new_text
    assert moved and ("x.contiguous().cuda()" in r.new_text) == stays, r.new_text
    assert [f.code for f in r.findings] == ["NPU303", "NPU315"]


# composer 0.32.1 callbacks/oom_observer.py:118-194 and memory_snapshot.py:98-150, trimmed.
OOM_OBSERVER = """\
import warnings

import torch.cuda


class OOMObserver:
    def __init__(self, max_entries=100000):
        self.max_entries = max_entries
        self._enabled = True

    def init(self, state, logger):
        if not self._enabled:
            return
        # Not relying on `torch.cuda.is_available()` since the model could be on CPU.
        model_device = next(state.model.parameters()).device

        if model_device.type not in ('cuda', 'meta'):
            warnings.warn(f'OOMObserver only works on CUDA devices, but the model is on {model_device.type}.')
            self._enabled = False
        else:
            self.folder_name = 'oom'

        def oom_observer(device: int, alloc: int, device_alloc: int, device_free: int):
            snapshot = torch.cuda.memory._snapshot()
            return snapshot

        if self._enabled:
            torch.cuda.memory._record_memory_history(
                True,  # type: ignore
                trace_alloc_max_entries=self.max_entries,
                trace_alloc_record_context=True,
            )
            torch._C._cuda_attach_out_of_memory_observer(oom_observer)  # type: ignore
"""
MEMORY_SNAPSHOT = """\
import warnings

import torch.cuda


class MemorySnapshot:
    def init(self, state, logger):
        if not self._enabled:
            return
        model_device = next(state.model.parameters()).device

        if model_device.type not in ('cuda', 'meta'):
            warnings.warn(f'The memory snapshot only works on CUDA devices, but the model is on {model_device.type}.')
            self._enabled = False
        else:
            self.folder_name = 'snapshots'

    def batch_start(self, state, logger):
        if self._enabled and self._start_time is None and self.batches_left_to_skip == 0:
            self.start_record_memory_history()

    def batch_end(self, state, logger):
        if not self._enabled:
            return
        torch.cuda.empty_cache()

    def start_record_memory_history(self):
        torch.cuda.memory._record_memory_history(
            'all',  # type: ignore
            max_entries=self.max_entries,
        )
"""


@pytest.mark.parametrize("text,detail", [
    (OOM_OBSERVER, "it is cleared in `self._enabled`, where `torch.cuda.memory._snapshot`, which has no NPU twin in the"
     " target and stays as it is"),
    (MEMORY_SNAPSHOT, "it is cleared in `self._enabled`, where `self.start_record_memory_history()`, which calls"
     " `torch.cuda.memory._record_memory_history`, which has no NPU twin in the target and stays as it is"),
])
def test_a_device_test_that_clears_a_flag_opening_cuda_calls_left_as_they_are_stays(text, detail):
    """composer 0.32.1's OOMObserver/MemorySnapshot: `if model_device.type not in ('cuda', 'meta'):
    ... self._enabled = False`, and `self._enabled` opens torch.cuda.memory._record_memory_history,
    _snapshot, _memory_viz (NPU320/NPU301: not rewritten; torch_npu 2.14's own
    _record_memory_history has no legacy `(True, trace_alloc_max_entries=...)` form). Moved, the
    callback stayed enabled on the NPU and called them (AttributeError on a torch without CUDA);
    kept, it disables itself with its warning, as unmigrated. The calls that move still do."""
    for partial in (True, False):
        r = migrate_source(text, "composer/callbacks/cb.py", partial=partial)
        assert r.new_text == text.replace("import torch.cuda\n", "import torch_npu  # noqa: F401\nimport torch.npu\n").replace(
            "torch.cuda.empty_cache()", "torch.npu.empty_cache()"), partial
        line = text.splitlines().index("        if model_device.type not in ('cuda', 'meta'):") + 1
        assert [(f.span.line, f.api, _detail(f)) for f in r.findings if f.code == "NPU315"] == [
            (line, "model_device.type not in ('cuda', 'meta')", detail)], partial
    # the flag opening only calls that move: the test moves with them
    moved = MEMORY_SNAPSHOT.replace("torch.cuda.memory._record_memory_history(", "torch.cuda.reset_peak_memory_stats(")
    r = migrate_source(moved, "composer/callbacks/cb.py")
    assert "model_device.type not in ('npu', 'meta')" in r.new_text
    assert [f for f in r.findings if f.code == "NPU315"] == []


# torchtune 0.6.1 recipes/full_finetune_distributed.py:126-211, 447-511, 755-880, trimmed (the
# loop's memory-history calls, behind their own device tests, left out; a torch.cuda.synchronize()
# put in their place) and torchtune/training/_profiler.py's `torch.cuda.memory._dump_snapshot`.
TORCHTUNE_RECIPE = '''\
import torch
from torchtune import training, utils

log = utils.get_logger("DEBUG")


class FullFinetuneRecipeDistributed:
    def __init__(self, cfg):
        device_type = cfg.device
        self._device = utils.get_device(device=device_type)

        # Logging attributes
        self._output_dir = cfg.output_dir
        self._log_every_n_steps = cfg.get("log_every_n_steps", 1)
        self._log_peak_memory_stats = cfg.get("log_peak_memory_stats", False)
        if self._log_peak_memory_stats and device_type != "cuda":
            log.info(
                "log_peak_memory_stats was set to True, however, training does not use cuda. Setting log_peak_memory_stats=False."
            )
            self._log_peak_memory_stats = False

        self._enable_activation_offloading = cfg.get(
            "enable_activation_offloading", False
        )
        if self._enable_activation_offloading:
            if device_type != "cuda":
                raise RuntimeError(
                    "enable_activation_offloading should only be True when training on CUDA"
                )

    def _setup_profiler(self, cfg_profiler=None):
        """
        Parses the `profiler` section of top-level `cfg` and sets up profiler

        Returns:
            profiler: Union[TorchProfiler, DummyProfiler] - DummyProfiler is a nullcontext with no-op methods
            for `start`, `stop`, and `step` that can be used in place of `torch.profiler.profile` if profiler is not enabled such
            that the instrumented training loop does not need to be changed profiling is disabled.

            The profiler config can be provided in configs under the `profiler` key with the following layout:

            .. code-block:: yaml
                profiler:
                    enabled: bool

                    #Output directory of trace artifacts
                    output_dir: str

                    #`torch.profiler.ProfilerActivity` types to trace
                    cpu: bool
                    cuda: bool
        """
        profiler, profiler_cfg = config.instantiate(cfg_profiler)
        return profiler

    def train(self):
        for idx, batch in enumerate(self._dataloader):
            loss = self._loss_step(batch)
            torch.cuda.synchronize()
            log_dict = {"loss": loss}
            if self._log_peak_memory_stats:
                log_dict.update(
                    training.get_memory_stats(device=self._device)
                )
            self._metric_logger.log_dict(log_dict, step=self.global_step)

    def save_snapshot(self, path):
        torch.cuda.memory._dump_snapshot(path)
'''


def test_a_cleared_flag_whose_readers_open_nothing_cuda_only_moves_without_a_second_partial_parse():
    """torchtune 0.6.1's recipes: `if self._log_peak_memory_stats and device_type != "cuda": ...
    self._log_peak_memory_stats = False`, its one reader opening training.get_memory_stats (which
    moves): the test moves. Partial parsing asked for the lines left out that only assign the flag
    (`= cfg.get(...)`) and for a docstring naming `cuda: bool` (dc43130): a second partial parse in
    each of 8 recipes, for nothing; only lines that read the flag or call a torch.cuda name are
    asked for now (composer's readers above still are)."""
    r = assert_partial_as_whole(TORCHTUNE_RECIPE, "recipes/full_finetune_distributed.py")
    assert r.new_text == (TORCHTUNE_RECIPE + PARTIAL_PADDING).replace(
        "import torch\n", "import torch\nimport torch_npu  # noqa: F401\n", 1).replace(
        'device_type != "cuda":\n            log.info(', 'device_type != "npu":\n            log.info(').replace(
        "torch.cuda.synchronize()", "torch.npu.synchronize()")
    assert [(f.code, f.span.line) for f in r.findings] == [("NPU315", 26), ("NPU320", 68)]
    assert r.work.get("partial") == 1 and "retry" not in r.work, dict(r.work)


def test_a_default_of_false_beside_a_cuda_call_left_as_it_is_runs_no_flag_analysis():
    """The text _flag_cleared needs is a flag of the instance set False and read: `= False` alone
    (a parameter's default: torchtune 0.6.1 training/_distributed.py's `offload_ops_to_cpu: bool =
    False`) beside a torch.cuda name that stays runs no flag analysis. The device-test analysis
    walks the file once (a torch.cuda call left as it is can be what a device test opens: torchtune's
    `_record_memory_history` above), and nothing more."""
    text = ('import torch\n\n\ndef get_distributed_backend(device_type: str, offload_ops_to_cpu: bool = False) -> str:\n'
            '    if device_type == "cuda":\n        return "nccl"\n    return "gloo"\n\n\n'
            'def dump(path):\n    torch.cuda.memory._dump_snapshot(path)\n')
    r = migrate_source(text, "training/_distributed.py")
    assert r.new_text == text.replace("import torch\n", "import torch\nimport torch_npu  # noqa: F401\n").replace(
        '"cuda"', '"npu"')
    assert [(f.code, f.span.line) for f in r.findings] == [("NPU320", 11)]
    assert r.work.get("walk") == 1 and "retry" not in r.work, dict(r.work)
    # a flag set False and read: analysed (the readers open nothing CUDA-only here: it moves)
    flagged = text + "\n\nclass C:\n    def f(self):\n        if self.on:\n            return 1\n        self.on = False\n"
    r = migrate_source(flagged, "training/_distributed.py")
    assert r.work.get("walk") == 1, dict(r.work)


# torchtune 0.6.1 recipes/full_finetune_distributed.py:765-772 and 889-899 (the training loop's
# memory-history window, trimmed to its two device tests) and torchtune/training/_profiler.py:115-125.
TORCHTUNE_MEMORY_HISTORY = '''\
import torch
from torchtune import utils


class FullFinetuneRecipeDistributed:
    def __init__(self, cfg):
        self._device = utils.get_device(device=cfg.device)

    def train(self):
        for curr_epoch in range(self.epochs_run, self.total_epochs):
            for idx, batch in enumerate(self._dataloader):
                # Start tracking CUDA memory for active steps for just the first epoch
                if (
                    self._is_rank_zero
                    and curr_epoch == 0
                    and self.profiler_profile_memory
                    and idx == self.profiler_wait_steps + self.profiler_warmup_steps
                    and self._device.type == "cuda"
                ):
                    torch.cuda.memory._record_memory_history()
                utils.batch_to_device(batch, self._device)

                # Stop tracking CUDA memory now that active steps are complete
                if (
                    self._is_rank_zero
                    and curr_epoch == 0
                    and self.profiler_profile_memory
                    and idx
                    == self.profiler_wait_steps
                    + self.profiler_warmup_steps
                    + self.profiler_active_steps
                    and self._device.type == "cuda"
                ):
                    torch.cuda.memory._record_memory_history(enabled=None)


def trace_handler(prof, curr_trace_dir, rank):
    # Memory timeline sometimes fails to export
    if prof.profile_memory and torch.cuda.is_available():
        if rank == 0:
            try:
                prof.export_memory_timeline(
                    f"{curr_trace_dir}/rank{rank}_memory-timeline.html"
                )
            except Exception as e:
                log.warn(f" Failed to export memory timeline: {e}")

            torch.cuda.memory._dump_snapshot(
                f"{curr_trace_dir}/rank{rank}_memory_snapshot.pickle"
            )
'''


def test_a_device_test_opening_torch_cuda_calls_left_as_they_are_stays_cuda():
    """torchtune 0.6.1's recipes: `if (... and self._device.type == "cuda"):
    torch.cuda.memory._record_memory_history()`, and its profiler's `if prof.profile_memory and
    torch.cuda.is_available(): ... torch.cuda.memory._dump_snapshot(...)`: the torch pass leaves
    those calls as they are (NPU320: torch_npu lacks the private names). The tests became "npu"
    and torch.npu before, so with profiler memory on the recipe called the CUDA API on the NPU;
    now the test stays CUDA (NPU315) and what it opens is dead on the NPU, as any CUDA-only code
    behind a device test (the whole side stays: the memory timeline's export with it)."""
    r = assert_partial_as_whole(TORCHTUNE_MEMORY_HISTORY, "recipes/full_finetune_distributed.py")
    assert r.new_text is None and r.edits == []  # (unchanged)
    lines = TORCHTUNE_MEMORY_HISTORY.splitlines()
    tests = [i + 1 for i, line in enumerate(lines) if 'self._device.type == "cuda"' in line or "torch.cuda.is_available()" in line]
    calls = [i + 1 for i, line in enumerate(lines) if "torch.cuda.memory._" in line]
    assert [(f.code, f.span.line) for f in r.findings] == sorted(
        [("NPU315", tests[0]), ("NPU320", calls[0]), ("NPU315", tests[1]), ("NPU320", calls[1]),
         ("NPU315", tests[2]), ("NPU320", calls[2])], key=lambda f: f[1])
    assert [_detail(f) for f in r.findings if f.code == "NPU315"] == [
        "`torch.cuda.memory._record_memory_history`, which has no NPU twin in the target and stays as it is"] * 2 + [
        "`torch.cuda.memory._dump_snapshot`, which has no NPU twin in the target and stays as it is"]
    # the same tests opening calls that move, move with them
    moved = TORCHTUNE_MEMORY_HISTORY.replace("torch.cuda.memory._record_memory_history(", "torch.cuda.reset_peak_memory_stats(").replace(
        "torch.cuda.memory._dump_snapshot(", "torch.cuda.synchronize(")
    r = migrate_source(moved, "recipes/full_finetune_distributed.py")
    assert r.new_text.count('self._device.type == "npu"') == 2 and "torch.npu.is_available()" in r.new_text
    assert [f.code for f in r.findings if f.code == "NPU315"] == []


# pytorch-ignite 0.5.5 tests/ignite/engine/test_create_supervised.py:50-84, trimmed: apex's amp
# imported behind the device test that opens it.
IGNITE_APEX = '''\
import torch
from torch.optim import SGD


def _default_create_supervised_trainer(model, amp_mode=None, model_device=None, trainer_device=None):
    if model_device:
        model.to(model_device)
    optimizer = SGD(model.parameters(), 0.1)

    if amp_mode == "apex" and model_device == trainer_device == "cuda":
        from apex import amp

        model, optimizer = amp.initialize(model, optimizer, opt_level="O2")
    return model, optimizer
'''


def test_a_cuda_only_import_behind_a_device_test_that_stays_is_a_note():
    """pytorch-ignite 0.5.5's `if amp_mode == "apex" and model_device == trainer_device == "cuda":
    from apex import amp`, and `if torch.cuda.is_available(): import pycuda.autoinit`: the test stays
    CUDA (NPU315), so the import never runs on the NPU; its NPU303 (warning for apex, error for
    pycuda) is a note there, saying why, as for an optional import. So is what else the kept side
    reports (NPU320 at torchtune's _record_memory_history). The same import unguarded keeps its
    severity."""
    r = migrate_source(IGNITE_APEX, "tests/ignite/engine/test_create_supervised.py")
    assert r.new_text is None
    line = IGNITE_APEX.splitlines().index("        from apex import amp") + 1
    assert [(f.code, f.severity.value, f.span.line) for f in r.findings] == [
        ("NPU315", "warning", line - 1), ("NPU303", "info", line)]
    note = (' (dead on the NPU: it runs only where `model_device == trainer_device == "cuda"` is True, a device'
            ' test left as it is on CUDA (NPU315), so the NPU never takes this path)')
    assert r.findings[1].message.endswith(note)
    # behind a test False on CUDA: the rest of the block after its refusal
    refusal = ("import torch\ndef f(x):\n    if x.device.type != 'cuda':\n        raise NotImplementedError('CUDA only')\n"
               "    from flash_attn import flash_attn_func\n    return flash_attn_func(x, x, x)\n")
    r = migrate_source(refusal, "m.py")
    assert [(f.code, f.severity.value) for f in r.findings] == [("NPU315", "error"), ("NPU303", "info")]
    assert "it runs only where `x.device.type != 'cuda'` is False," in r.findings[1].message
    toy = "import torch\nif torch.cuda.is_available():\n    import pycuda.autoinit\n"
    r = migrate_source(toy, "m.py")
    assert [(f.code, f.severity.value) for f in r.findings] == [("NPU315", "warning"), ("NPU303", "info")]
    unguarded = migrate_source("import torch\nimport pycuda.autoinit\n", "m.py")
    assert [(f.code, f.severity.value) for f in unguarded.findings] == [("NPU303", "error")]
    r = migrate_source(TORCHTUNE_MEMORY_HISTORY, "recipes/full_finetune_distributed.py")
    assert {(f.code, f.severity.value) for f in r.findings} == {("NPU315", "warning"), ("NPU320", "info")}


# mindone 0.5.0 tests/transformers_tests/integrations/test_flash_attention.py:1-18, 31-75 and 81-106,
# trimmed: each test makes the PyTorch reference on a CUDA machine and runs the MindSpore code under
# test on Ascend.
MINDONE_FLASH_ATTENTION = '''\
import os
from math import sqrt
from typing import Optional

import numpy as np
import pytest
import torch
from transformers.integrations.flash_attention import flash_attention_forward as flash_attention_forward_transformers

from mindspore import grad, jit, mint, set_seed, tensor

from mindone.transformers.integrations.flash_attention import flash_attention_forward
from tests.modeling_test_utils import MS_DTYPE_MAPPING, PT_DTYPE_MAPPING

flash_attention_forward_jit = jit(flash_attention_forward, jit_level="O1")


def cast_inputs(q, k, v, target, dtype, device: Optional[str] = None):
    q, k, v, target = q.to(dtype), k.to(dtype), v.to(dtype), target.to(dtype)
    if device is not None:
        q, k, v, target = q.to(device), k.to(device), v.to(device), target.to(device)
    return q, k, v, target


def test_fa_attention_forward(q_k_v_target, dtype: str, causal: bool, jit_compile):
    module = MockAttentionModule(is_causal=causal, attn_implementation="flash_attention_2")

    if torch.cuda.is_available():  # CUDA device
        if jit_compile:
            pytest.skip("Generate PyTorch outputs only for eager mode.")
        q_pt, k_pt, v_pt, _ = cast_inputs(*q_k_v_target["pt"], dtype=PT_DTYPE_MAPPING[dtype], device="cuda")
        output_pt = flash_attention_forward_transformers(module, q_pt, k_pt, v_pt, None)[0]

        torch.save(output_pt.cpu(), f"fa_attn_fwd_{dtype}_{causal}.pt")
        assert os.path.exists(f"fa_attn_fwd_{dtype}_{causal}.pt"), "Failed to save PyTorch outputs."

    else:  # Ascend device
        q, k, v, _ = cast_inputs(*q_k_v_target["ms"], dtype=MS_DTYPE_MAPPING[dtype])
        scaling = 1 / sqrt(q.shape[-1])

        fa_forward = flash_attention_forward_jit if jit_compile else flash_attention_forward
        output = fa_forward(module, q, k, v, None, scaling=scaling)[0]
        output_pt = torch.load(f"fa_attn_fwd_{dtype}_{causal}.pt")

        assert output.shape == output_pt.shape, f"Shape mismatch: {output.shape} vs {output_pt.shape}"


def test_fa_attention_backward(q_k_v_target, dtype: str, causal: bool, jit_compile):
    module = MockAttentionModule(is_causal=causal, attn_implementation="flash_attention_2")

    if torch.cuda.is_available():  # CUDA device
        q_pt, k_pt, v_pt, target = cast_inputs(*q_k_v_target["pt"], dtype=PT_DTYPE_MAPPING[dtype], device="cuda")
        output_pt = flash_attention_forward_transformers(module, q_pt, k_pt, v_pt, None)[0]
        loss = torch.nn.functional.mse_loss(output_pt, target)
        loss.backward()

    else:  # Ascend device
        q, k, v, target = cast_inputs(*q_k_v_target["ms"], dtype=MS_DTYPE_MAPPING[dtype])

        def _forward(q_, k_, v_, target_):
            output = flash_attention_forward(module, q_, k_, v_, None)[0]
            return mint.nn.functional.mse_loss(output, target_)

        grad_out = grad(_forward, grad_position=(0, 1, 2))(q, k, v, target)
'''


def test_a_cuda_test_whose_other_side_is_the_mindspore_code_stays_cuda():
    """mindone 0.5.0's flash-attention tests: `if torch.cuda.is_available(): <the PyTorch reference,
    on CUDA, saved> else: <the MindSpore code under test, on Ascend>`. Moved to torch.npu, the test
    was True on Ascend (with torch_npu) and the MindSpore side never ran there. In a module that
    imports MindSpore, a CUDA test whose other side reads MindSpore (a name imported from it, or a
    module variable it makes: `flash_attention_forward_jit = jit(...)`) stays, and so does its CUDA
    side; nothing else changes, so no `import torch_npu`. A plain PyTorch other side still moves."""
    r = assert_partial_as_whole(MINDONE_FLASH_ATTENTION, "tests/transformers_tests/integrations/test_flash_attention.py")
    assert r.new_text is None and r.edits == []
    lines = [i + 1 for i, line in enumerate(MINDONE_FLASH_ATTENTION.splitlines()) if "torch.cuda.is_available()" in line]
    assert [(f.code, f.span.line, _detail(f)) for f in r.findings] == [
        ("NPU315", lines[0], "its other side is the MindSpore code, `flash_attention_forward_jit`, made by MindSpore"),
        ("NPU315", lines[1], "its other side is the MindSpore code, `grad` from mindspore")]
    # without MindSpore on the other side (its CPU reference in PyTorch), the test moves
    plain = MINDONE_FLASH_ATTENTION.replace("from mindspore import grad, jit, mint, set_seed, tensor\n", "")
    r = migrate_source(plain, "tests/test_flash_attention.py")
    assert r.new_text is not None and r.new_text.count("torch.npu.is_available()") == 2
    assert [f for f in r.findings if f.code == "NPU315"] == []


def test_the_project_scan_finds_functions_using_a_cuda_only_library_and_their_wrappers_not_dispatchers(tmp_path):
    import npu_migrate.project_values as pv
    from npu_migrate.kinds.finding import cuda_only_libraries

    (tmp_path / "k.py").write_text(
        "import torch\nimport triton.language as tl\nfrom torch.utils.cpp_extension import load\n"
        "ext = load('ext', ['ext.cu'])\n\n"
        "def kernel(x):\n    return tl.sum(x)\n\n"
        "def wrapper(x):\n    return kernel(x) + 1\n\n"
        "class Op(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n        return wrapper(x)\n\n"
        "def dispatch(x):\n    return kernel(x) if x.is_cuda else x\n\n"
        "def plain(x):\n    return x + 1\n\n"
        "def inner():\n    from cupy import asarray\n    return asarray\n", encoding="utf-8")
    (tmp_path / "plain.py").write_text("import torch\ndef kernel(x):\n    return x\n", encoding="utf-8")
    code: list = []
    gates = cuda_only_libraries(RULES.findings)
    assert pv.scan([str(tmp_path / "k.py"), str(tmp_path / "plain.py")], gates=gates, code=code) == ((), ())
    module = os.path.join(str(tmp_path), "k")
    assert code == [f"{module}::{name}::{what}" for name, what in [
        ("Op", "triton"), ("ext", "torch.utils.cpp_extension"), ("inner", "cupy"), ("kernel", "triton"),
        ("wrapper", "triton")]]


def test_a_result_that_depends_on_another_modules_cuda_only_code_follows_that_module(tmp_path):
    """Principle 4: the loss module's result depends on rnnt.py's content (through the project
    scan's facts, part of the options and so of the cache key). rnnt.py rewritten without
    numba: the next run, cache warm, migrates the loss module; numba back: it stays again."""
    from helpers import cli_in_process

    _rnnt_project(tmp_path / "proj")
    env = {"NPU_MIGRATE_CACHE_DIR": str(tmp_path / "cache")}
    rnnt = tmp_path / "proj" / "espnet2" / "asr" / "rnnt_multi_blank" / "rnnt.py"

    def loss_edits():
        run = cli_in_process("proj", "--diff", cwd=tmp_path, env=env)
        assert b"Traceback" not in run.stderr and b"failed" not in run.stderr.replace(b"0 failed", b""), run.stderr
        return [line for line in run.stdout.decode().splitlines() if "is_npu" in line and line.startswith("+")]

    kept = loss_edits()
    assert kept == ["+    return x.npu() if x.is_npu else x"]
    assert loss_edits() == kept  # warm
    rnnt.write_text(RNNT_LAUNCHERS.replace("from numba import cuda\n", "").replace(
        "    stream = cuda.external_stream(torch.cuda.current_stream(acts.device).cuda_stream)\n"
        "    cuda.select_device(acts.device.index)\n", ""), encoding="utf-8")
    assert loss_edits() == ["+        is_cuda = acts.is_npu", "+    if not acts.is_npu:", "+        if not acts.is_npu:",
                            "+    return x.npu() if x.is_npu else x"]
    rnnt.write_text(RNNT_LAUNCHERS, encoding="utf-8")
    assert loss_edits() == kept


# Lines of the shapes the scan's import search meets (the first line, indented and commented
# imports, `from X import` of a gate and of a module named like one, `load(` at module level and
# not, CRLF, a tab): every combination of up to six, joined.
_GATE_LINE_PIECES = ["import cupy as cp", "  import triton.language as tl", "from numba import cuda",
                     "from torch.cuda.amp import autocast", "# import cupy", "x = 1  # import cupy",
                     "ext = load('e', ['e.cu'])", "    ext = load('e')", "ext = cpp_extension.load_inline(",
                     "\timport apex.amp", "from apex import amp, optimizers", "import os, pynvml",
                     "def load(x):", "importlib.import_module('cupy')", "s = 'import cupy'", "", "\r"]


@pytest.mark.parametrize("size", [1, 2, 3])
def test_the_project_scans_import_search_tried_at_import_lines_finds_what_it_finds_tried_everywhere(size):
    """project_values._gate_lines tries the import-line pattern only at the start of lines that
    hold `import ` or `load(` (0.31 -> ~0.07 CPU-s on transformers, serial): the same matches,
    in the same order, as trying it at every byte (10,146 files of the corpora: 0 differ)."""
    import npu_migrate.project_values as pv
    from npu_migrate.kinds.finding import cuda_only_libraries

    pattern = pv._gates_re(cuda_only_libraries(RULES.findings))
    assert pattern is not None
    texts = 0
    for lines in itertools.product(_GATE_LINE_PIECES, repeat=size):
        for end in ("\n", "\r\n", ""):
            text = end.join(lines).encode()
            assert [(m.span(), m.groups()) for m in pv._gate_lines(text, pattern)] == [
                (m.span(), m.groups()) for m in pattern.finditer(text)], text
            texts += 1
    assert texts == 3 * len(_GATE_LINE_PIECES) ** size
    whole = "\n".join(_GATE_LINE_PIECES).encode()
    assert [m.group(1) or m.group(3) or m.group(0) for m in pv._gate_lines(whole, pattern)] == [
        b"cupy as cp", b"triton.language as tl", b"numba", b"ext = load(", b"ext = cpp_extension.load_inline(",
        b"apex.amp", b"apex", b"os, pynvml"]


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_the_project_scan_walks_only_definitions_that_may_name_a_gate_and_finds_what_a_whole_walk_finds(
        tmp_path, newline, monkeypatch):
    """_cuda_only_code walks a definition only when its lines name what an import binds to a
    gate's module, or import one, or (later) name code found: decorators count (`@cuda.jit`), a
    name written otherwise (NFKC: `ｋｅｒｎ` is kern) makes the lines walked, lines are counted
    as Python counts them (CR, CRLF). The same facts as walking every definition."""
    import npu_migrate.project_values as pv
    from npu_migrate.kinds.finding import cuda_only_libraries

    text = newline.join([
        "from numba import cuda", "import numba as nb", "import torch", "", "",
        "@cuda.jit", "def kern(a):", "    a[0] = 1", "", "",
        "def launch(a):", "    kern[1, 1](a)", "", "",
        "def g(a):", "    return \uff4b\uff45\uff52\uff4e(a)", "", "",
        "class Op(torch.autograd.Function):", "    @staticmethod", "    def forward(ctx, a):",
        "        return g(a)", "", "",
        "def h(a):", "    return nb.cuda.to_device(a)", "", "",
        "def plain(a):", "    return a + 1", "",
        "def dispatch(a):", "    return launch(a) if a.is_cuda else a", ""])
    (tmp_path / "k.py").write_bytes(text.encode())
    walked: list = []
    real = pv.ast.walk
    monkeypatch.setattr(pv.ast, "walk", lambda node: walked.append(getattr(node, "name", None)) or real(node))
    code: list = []
    pv.scan([str(tmp_path / "k.py")], gates=cuda_only_libraries(RULES.findings), code=code)
    assert [c.split("::", 1)[1] for c in code] == [
        "Op::numba.cuda", "g::numba.cuda", "h::numba.cuda", "kern::numba.cuda", "launch::numba.cuda"]
    assert sorted(walked) == ["Op", "dispatch", "g", "h", "kern", "launch"]  # not plain


def _scan_in(files, jobs, meanwhile=None):
    import npu_migrate.project_values as pv
    from npu_migrate import work
    from npu_migrate.kinds.finding import cuda_only_libraries

    seen: dict = {}
    found: dict = {}
    code: list = []
    with work.counting() as counts:
        values = pv.scan(files, seen, None, found, cuda_only_libraries(RULES.findings), code, jobs, meanwhile)
    return values, code, list(seen.items()), list(found.items()), dict(counts)


def test_the_project_scan_in_two_processes_finds_what_it_finds_in_one(tmp_path, monkeypatch):
    """-j 2: the scan (before any worker starts, so wall time) shares the files with a forked
    process (project_values._in_two), each taking the next ones when free: the same device
    keys, crossing files, CUDA-only code, Sources and per-file facts, in the same order, the
    child's parses counted (--stats, the budget), and each file read once. What the parent does
    meanwhile (runner.prepare) first, the child's files go on; a child that fails, or cannot be
    forked, is replaced by the parent; a child the system reaps (SIGCHLD ignored) still answers.
    Only the .py files are handed out (the others are not read), and only their number decides
    whether to fork (rl_games 1.6.5: 227 files given, 70 .py)."""
    import pickle
    import signal
    import time

    import npu_migrate.project_values as pv

    _rnnt_project(tmp_path)
    (tmp_path / "settings.py").write_text('DEVICE = "cuda"\n', encoding="utf-8")
    (tmp_path / "train_ms.py").write_text("import mindspore\nimport argparse\np = argparse.ArgumentParser()\n"
                                          "p.add_argument('--device_target', default='GPU')\n", encoding="utf-8")
    (tmp_path / "kernels.py").write_text("import cupy\ndef k(x):\n    return cupy.asarray(x)\n", encoding="utf-8")
    (tmp_path / "notes.txt").write_text("import cupy\n", encoding="utf-8")
    files = sorted(str(p) for p in tmp_path.rglob("*") if p.is_file())
    assert len(files) == 9
    serial = _scan_in(files, 1)
    assert serial[0] == (("settings.DEVICE",), (str(tmp_path / "train_ms.py"),))
    assert [c.split("::", 1)[1] for c in serial[1]] == ["rnnt_loss_gpu::numba.cuda", "k::cupy"]
    assert serial[4] == {"ast": 2} and len(serial[2]) == len(serial[3]) == 8
    assert _scan_in(files, 2) == serial  # fewer than SPLIT_FROM files: one process
    python_files = [f for f in files if f.endswith(".py")]
    assert len(python_files) == 8
    log = tmp_path.parent / f"{tmp_path.name}-read.log"  # (pid, file) of each file read, by either process
    real = pv._scan_file

    def logged(path, *args):
        with open(log, "a", encoding="utf-8") as f:
            f.write(f"{os.getpid()} {path}\n")
        return real(path, *args)

    def read() -> dict:  # pid -> the files it read; the log starts again
        by: dict = {}
        for line in log.read_text(encoding="utf-8").splitlines() if log.exists() else ():
            pid, path = line.split(" ", 1)
            by.setdefault(int(pid), []).append(path)
        log.unlink(missing_ok=True)
        return by

    monkeypatch.setattr(pv, "_scan_file", logged)
    monkeypatch.setattr(pv, "SPLIT_FROM", 9)  # 9 files given, 8 of them .py: one process
    assert _scan_in(files, 2) == serial
    assert read() == {os.getpid(): python_files}
    monkeypatch.setattr(pv, "SPLIT_FROM", 2)
    assert _scan_in(files, 2) == serial
    by = read()
    assert sorted(p for paths in by.values() for p in paths) == python_files and len(by) <= 2  # each file once

    def child_reads_all() -> None:  # the parent busy until the child read every file
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (log.exists() and len(log.read_text().splitlines()) == 8):
            time.sleep(0.01)
        done.append(1)

    done: list = []
    assert _scan_in(files, 2, child_reads_all) == serial and done == [1]
    by = read()
    assert list(by) != [os.getpid()] and sorted(by[next(iter(by))]) == python_files  # the child, alone
    previous = signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children reaped by the system
    try:
        assert _scan_in(files, 2) == serial
    finally:
        signal.signal(signal.SIGCHLD, previous)
    by = read()
    assert sorted(p for paths in by.values() for p in paths) == python_files
    with monkeypatch.context() as patch:  # no process to be had: all of them here
        patch.setattr(os, "fork", lambda: (_ for _ in ()).throw(BlockingIOError(11, "Resource temporarily unavailable")))
        assert _scan_in(files, 2, lambda: done.append(2)) == serial and done == [1, 2]
    assert read() == {os.getpid(): python_files}
    monkeypatch.setattr(pickle, "dumps", lambda *a, **k: 1 / 0)  # the child fails before it answers
    assert _scan_in(files, 2) == serial
    assert sorted(read()[os.getpid()]) == python_files  # the parent read its own and the child's again


# transformers 4.46.3 models/yoso/modeling_yoso.py: the extension is built by name and imported
# under another (`load("fast_lsh_cumulation", ...)`, `import fast_lsh_cumulation as lsh_cumulation`)
YOSO = '''\
import torch

lsh_cumulation = None


def load_cuda_kernels():
    global lsh_cumulation
    from torch.utils.cpp_extension import load

    load("fast_lsh_cumulation", ["fast_lsh_cumulation.cu"], verbose=True)

    import fast_lsh_cumulation as lsh_cumulation


class YosoLSHCumulation(torch.autograd.Function):
    @staticmethod
    def forward(ctx, query_mask, key_mask, value):
        use_cuda = query_mask.is_cuda
        return lsh_cumulation.lsh_cumulation(query_mask, key_mask, value, use_cuda, 1)
'''


def test_a_flag_given_to_an_extension_built_by_name_and_imported_under_another_stays():
    """yoso: `use_cuda = query_mask.is_cuda` is the kernel's own device flag; as is_npu it told
    the CUDA extension that NPU tensors are CUDA ones. Kept (NPU302), partial as whole."""
    r = migrate_source(YOSO, "models/yoso/modeling_yoso.py", Options(), RULES)
    assert r.new_text is None
    assert [(f.code, f.span.line, f.api) for f in r.findings] == [
        ("NPU302", 10, "torch.utils.cpp_extension.load"), ("NPU302", 18, "query_mask.is_cuda")]
    assert_partial_as_whole(YOSO)


# ESPnet 202511 espnet/bin/asr_train.py:586-598 (held out)
NVIDIA_SMI_COUNT = '''\
import logging
import os
import subprocess


def count(args):
    if args.ngpu is None:
        cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
        if cvd is not None:
            ngpu = len(cvd.split(","))
        else:
            logging.warning("CUDA_VISIBLE_DEVICES is not set.")
            try:
                p = subprocess.run(
                    ["nvidia-smi", "-L"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
                )
            except (subprocess.CalledProcessError, FileNotFoundError):
                ngpu = 0
            else:
                ngpu = len(p.stderr.decode().split("\\n")) - 1
    return ngpu
'''


def test_a_device_count_made_with_nvidia_smi_is_reported():
    """ESPnet without --ngpu counts GPUs from the lines of `nvidia-smi -L`: on an NPU machine
    the command is missing, ngpu = 0 and the job trained on the CPU with nothing reported
    (the shell's nvidia-smi lines were; Python's were not). The variable still moves."""
    result = migrate_source(NVIDIA_SMI_COUNT, "espnet/bin/asr_train.py", Options(), RULES)
    assert result.new_text == NVIDIA_SMI_COUNT.replace('"CUDA_VISIBLE_DEVICES")', '"ASCEND_RT_VISIBLE_DEVICES")')
    assert [(f.code, f.severity.value, f.span.line, f.span.col, f.api, f.message) for f in result.findings] == [
        ("NPU317", "warning", 14, 21, "subprocess.run",
         "`subprocess.run` runs `nvidia-smi`, which an Ascend machine does not have: devices counted or checked "
         "with it are none there (a GPU count of 0 trains on the CPU)")]


# yolov5 7.0.14 utils/torch_utils.py:98-105 (the corpus of tests/test_work_budget.py)
YOLOV5_DEVICE_COUNT = '''\
import platform
import subprocess


def device_count():
    # Returns number of CUDA devices available. Safe version of torch.cuda.device_count(). Supports Linux and Windows
    assert platform.system() in ('Linux', 'Windows'), 'device_count() only supported on Linux or Windows'
    try:
        cmd = 'nvidia-smi -L | wc -l' if platform.system() == 'Linux' else 'nvidia-smi -L | find /c /v ""'  # Windows
        return int(subprocess.run(cmd, shell=True, capture_output=True, check=True).stdout.decode().split()[-1])
    except Exception:
        return 0
'''


def test_a_device_count_piped_from_nvidia_smi_through_a_variable_is_reported():
    """yolov5 counts its devices with `nvidia-smi -L | wc -l` run through a variable (0 on an NPU
    machine: its batch-size checks then think there is no device). The command is a pipeline,
    not a string ending in nvidia-smi; read through the variable the function assigns. Parsed
    partially as whole (the assignment has none of the call's words)."""
    result = migrate_source(YOLOV5_DEVICE_COUNT, "yolov5/utils/torch_utils.py", Options(), RULES)
    assert result.new_text is None
    assert [(f.code, f.span.line, f.span.col, f.api) for f in result.findings] == [
        ("NPU317", 10, 20, "subprocess.run")]
    assert_partial_as_whole(YOLOV5_DEVICE_COUNT)
    # what runs is echo, or a command built from it: not reported
    for other in ("cmd = ['echo', 'nvidia-smi -L']", "cmd = 'echo nvidia-smi -L'", "cmd = build('nvidia-smi -L')"):
        text = YOLOV5_DEVICE_COUNT.replace(YOLOV5_DEVICE_COUNT.splitlines()[8].strip(), other)
        assert [f.code for f in migrate_source(text, "u.py", Options(), RULES).findings] == [], other


# allennlp 2.10.1 training/gradient_descent_trainer.py (held out) and the module forms
AMP_SUBMODULES = '''\
import torch
from torch.cuda.amp.grad_scaler import GradScaler
from torch.cuda.amp import grad_scaler
scaler = GradScaler()
s2 = grad_scaler.GradScaler()
x = torch.cuda.amp.grad_scaler.GradScaler()
'''


@pytest.mark.parametrize("target", ["2.14", "2.1"])
def test_amp_names_through_their_submodules_move_to_torch_npu_amp_and_module_forms_get_a_true_reason(target):
    """`from torch.cuda.amp.grad_scaler import GradScaler` got NPU320 'no torch_npu release has
    it on every build': the target table lists torch_npu.npu.amp's exports, not its submodules.
    The class is the one torch.cuda.amp exports, so it moves to torch.npu.amp (every release
    has GradScaler there), the import as a whole; the module itself (`grad_scaler.X`) stays,
    reported with what is known: the table does not list it."""
    r = migrate_source(AMP_SUBMODULES, "trainer.py", Options.of(torch_npu_version=target), RULES)
    assert r.new_text == AMP_SUBMODULES.replace("import torch\n", "import torch\nimport torch_npu  # noqa: F401\n", 1).replace(
        "from torch.cuda.amp.grad_scaler import GradScaler", "from torch.npu.amp import GradScaler").replace(
        "torch.cuda.amp.grad_scaler.GradScaler()", "torch.npu.amp.GradScaler()")
    message = ("`torch.cuda.amp.grad_scaler` is not rewritten: the target table does not list "
               "`torch.npu.amp.grad_scaler` (it lists what `torch.npu.amp` exports)")
    suggestion = ("Use what `torch.npu.amp` exports where it has the name (`from torch.npu.amp import ...`), else "
                  "check the submodule in your torch_npu release and rewrite by hand; keep the CUDA call out of NPU "
                  "runs until then.")
    assert [(f.code, f.span.line, f.api, f.message, f.suggestion) for f in r.findings] == [
        ("NPU320", line, "torch.cuda.amp.grad_scaler", message, suggestion) for line in (3, 5)]


def test_the_project_scan_parses_only_files_that_import_a_cuda_only_library(tmp_path, monkeypatch):
    """The scan reads every file of a run: Python's parser runs only on a file whose import
    lines name a CUDA-only library (or that binds a cpp_extension build at module level), not on
    `from torch.cuda.amp import autocast` (torch's `cuda`) nor `from mamba_ssm.ops.triton import
    f` (a module named triton inside another library)."""
    import npu_migrate.project_values as pv
    from npu_migrate.kinds.finding import cuda_only_libraries

    texts = {"a.py": "from torch.cuda.amp import autocast\ndef f():\n    return autocast()\n",
             "b.py": "try:\n    from mamba_ssm.ops.triton.layernorm import rms_norm\nexcept ImportError:\n    pass\n"
                     "def g(x):\n    return rms_norm(x)\n",
             "c.py": "import torch\nfrom torch.utils.cpp_extension import load\ndef build():\n    return load('k', ['k.cpp'])\n",
             "d.py": "try:\n    import cupy as cp\nexcept ImportError:\n    cp = None\ndef h(x):\n    return cp.asarray(x)\n"}
    for name, text in texts.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    parsed = []
    real = pv.ast.parse
    monkeypatch.setattr(pv.ast, "parse", lambda text, *a, **k: parsed.append(text) or real(text, *a, **k))
    code: list = []
    pv.scan(sorted(str(tmp_path / n) for n in texts), gates=cuda_only_libraries(RULES.findings), code=code)
    assert code == [f"{os.path.join(str(tmp_path), 'd')}::h::cupy"]
    assert parsed == [texts["d.py"].encode()]


# pytorch-pfn-extras 0.9.0 _tensor.py (held out): get_xp sets `devtype = "cuda"` for a cupy array and
# reads it in `elif devtype == "cuda": return cupy`, a test the CUDA-only cupy keeps
PPE_GET_XP = '''import numpy
import torch
from pytorch_pfn_extras._cupy import cupy, ensure_cupy


def get_xp(obj):
    if isinstance(obj, torch.Tensor):
        devtype = obj.device.type
    elif isinstance(obj, numpy.ndarray):
        devtype = "cpu"
    elif isinstance(obj, cupy.ndarray):
        devtype: str = "cuda"
    else:
        raise TypeError(type(obj).__name__)

    if devtype == "cpu":
        return numpy
    elif devtype == "cuda":
        ensure_cupy()
        return cupy
    raise ValueError(devtype)


XP_DEVICE = "cuda:0" if cupy.is_available() else "cpu"


def xp_of_kind():
    if XP_DEVICE == "cuda:0":
        return cupy
    return numpy


def zeros():
    devtype = "cuda"
    return torch.zeros(1, device=devtype)
'''


def test_the_values_a_kept_device_test_reads_stay_with_it():
    """A kept `devtype == "cuda"` (NPU315: it opens cupy) reads a variable the code sets to "cuda"
    itself: that value stays too, in its function (get_xp) or at module level (XP_DEVICE, an expression
    holding the string), or `get_xp(cupy_array)` would set "npu" and reach the ValueError. A
    variable of the same name in another function that assigns it is another variable: it moves."""
    assert_partial_as_whole(PPE_GET_XP, "pytorch_pfn_extras/_tensor.py")
    r = migrate_source(PPE_GET_XP, "pytorch_pfn_extras/_tensor.py")
    assert r.new_text == PPE_GET_XP.replace("import torch\n", "import torch\nimport torch_npu  # noqa: F401\n", 1).replace(
        '    devtype = "cuda"\n    return torch.zeros', '    devtype = "npu"\n    return torch.zeros')
    assert _npu315(r) == [("NPU315", "warning", 18, 10, 'devtype == "cuda"'), ("NPU315", "warning", 28, 8, 'XP_DEVICE == "cuda:0"')]
    assert not migrate_source(r.new_text, "pytorch_pfn_extras/_tensor.py").changed  # idempotent


# pytorch-pfn-extras 0.9.0 cuda/_allocator.py (held out), shortened: cupy's allocator callbacks
PPE_ALLOCATOR = '''import torch
from pytorch_pfn_extras._cupy import cupy, ensure_cupy, is_available


def stream(stream):
    with torch.cuda.stream(stream):
        if is_available():
            with cupy.cuda.ExternalStream(stream.cuda_stream, device_id=stream.device.index):
                yield
        else:
            yield


def use_torch_mempool_in_cupy():
    ensure_cupy()
    allocator = cupy.cuda.memory.PythonFunctionAllocator(_torch_alloc, _torch_free)
    cupy.cuda.set_allocator(allocator.malloc)


def _torch_alloc(size, device_id):
    torch_stream_ptr = torch.cuda.current_stream().cuda_stream
    cupy_stream_ptr = cupy.cuda.get_current_stream().ptr
    if torch_stream_ptr != cupy_stream_ptr:
        raise RuntimeError("The current stream set in PyTorch and CuPy must be same.")
    return torch.cuda.caching_allocator_alloc(size, device_id, torch_stream_ptr)


def _torch_free(mem_ptr, device_id):
    torch.cuda.caching_allocator_delete(mem_ptr)


def synchronize():
    torch.cuda.synchronize()
'''


def test_cuda_interop_functions_stay_whole_and_are_reported():
    """ppe's cupy allocator callbacks: `_torch_alloc` uses cupy outside any test and `_torch_free`
    is given to cupy's PythonFunctionAllocator; rewritten, `torch.npu.current_stream().cuda_stream`
    met cupy's stream (half-migrated: no `.cuda_stream` on an NPU stream). Both stay whole, NPU319.
    `stream()` uses cupy only behind cupy's own availability test: its torch stream moves (the NPU
    path), as does the plain function beside them."""
    assert_partial_as_whole(PPE_ALLOCATOR, "pytorch_pfn_extras/cuda/_allocator.py")
    r = migrate_source(PPE_ALLOCATOR, "pytorch_pfn_extras/cuda/_allocator.py")
    assert r.new_text == PPE_ALLOCATOR.replace("import torch\n", "import torch\nimport torch_npu  # noqa: F401\n", 1).replace(
        "with torch.cuda.stream(", "with torch.npu.stream(").replace("    torch.cuda.synchronize()", "    torch.npu.synchronize()")
    assert [(f.code, f.severity.value, f.span.line, f.span.col, f.api) for f in r.findings] == [
        ("NPU319", "warning", 20, 5, "_torch_alloc"), ("NPU319", "warning", 28, 5, "_torch_free")]
    assert [f.message for f in r.findings] == [
        "`_torch_alloc` is CUDA interop code (it uses `cupy` from pytorch_pfn_extras._cupy outside any test): the CUDA "
        "streams, memory and devices it exchanges have no NPU form there, so its CUDA calls are left as they are",
        "`_torch_free` is CUDA interop code (it is given to `cupy.cuda.memory.PythonFunctionAllocator`): the CUDA "
        "streams, memory and devices it exchanges have no NPU form there, so its CUDA calls are left as they are"]
    assert not migrate_source(r.new_text, "pytorch_pfn_extras/cuda/_allocator.py").changed  # idempotent


# cleanrl 1.2.0 ppo_atari_multigpu.py (held out), shortened
CLEANRL_GLOO = '''import argparse

import torch
import torch.distributed as dist


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", type=str, default="gloo", choices=["gloo", "nccl", "mpi"],
        help="the id of the environment")
    return parser.parse_args()


if __name__ == "__main__":
    args = parse_args()
    dist.init_process_group(args.backend, rank=0, world_size=2)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    all_grads = torch.zeros(4).to(device)
    dist.all_reduce(all_grads, op=dist.ReduceOp.SUM)
'''


def test_a_gloo_process_group_for_tensors_moved_to_the_npu_is_reported():
    """cleanrl's `--backend` default "gloo" given to init_process_group, then all_reduce of
    tensors on the device: gloo reduced them on CUDA, it has no NPU collectives. "gloo" stays
    (the script's CPU mode) and is reported at the default (NPU325); "nccl" among the choices
    moves as before."""
    assert_partial_as_whole(CLEANRL_GLOO, "cleanrl/ppo_atari_multigpu.py")
    r = migrate_source(CLEANRL_GLOO, "cleanrl/ppo_atari_multigpu.py")
    assert r.new_text == CLEANRL_GLOO.replace(
        "as dist\n", "as dist\nimport torch_npu  # noqa: F401\n", 1).replace(
        '"gloo", "nccl", "mpi"', '"gloo", "hccl", "mpi"').replace(
        'torch.device("cuda" if torch.cuda.is_available()', 'torch.device("npu" if torch.npu.is_available()')
    assert [(f.code, f.severity.value, f.span.line, f.span.col, f.api, f.message) for f in r.findings] == [
        ("NPU325", "warning", 9, 56, '"gloo"',
         '`"gloo"` is the default process group\'s backend, and the file runs `all_reduce` of tensors the migration '
         "puts on the NPU: gloo has no NPU collectives, so on the NPU those calls fail")]
    # a script that stays on the CPU is no case
    cpu_only = CLEANRL_GLOO.replace('torch.device("cuda" if torch.cuda.is_available() else "cpu")', 'torch.device("cpu")')
    assert [f.code for f in migrate_source(cpu_only, "cleanrl/ppo_atari_multigpu.py").findings] == []


LOAD_IF_FORM = '''import torch


def load(path, model):
    if torch.cuda.is_available():
        state = torch.load(path)
    else:
        state = torch.load(path, map_location="cpu")
    model.load_state_dict(state)
    if not torch.cuda.is_available():
        ckpt = torch.load(path, map_location=lambda s, loc: s)
    else:
        ckpt = torch.load(path, map_location=None)
    if torch.cuda.is_available():
        best = torch.load(path)
        model.cuda()
    else:
        best = torch.load(path, map_location="cpu")
    return ckpt, best
'''


def test_an_if_whose_branches_differ_in_map_location_alone_stays_cuda():
    """NPU318's If form: as an NPU test, the NPU machine took `torch.load(path)` (no map_location)
    and a CUDA-saved checkpoint failed there; kept, it loads to the CPU as written. Either way
    round (`not`, map_location=None). The third test's branch also places the model: keeping it
    would keep the model on the CPU, so it migrates as before."""
    assert_partial_as_whole(LOAD_IF_FORM)
    r = migrate_source(LOAD_IF_FORM, "m.py")
    assert r.new_text == LOAD_IF_FORM.replace("import torch\n", "import torch\nimport torch_npu  # noqa: F401\n", 1).replace(
        "    if torch.cuda.is_available():\n        best", "    if torch.npu.is_available():\n        best").replace(
        "model.cuda()", "model.npu()")
    assert [(f.code, f.severity.value, f.span.line, f.span.col) for f in r.findings] == [
        ("NPU318", "info", 5, 8), ("NPU318", "info", 10, 12)]
    assert not migrate_source(r.new_text, "m.py").changed  # idempotent


# OpenNMT-py 3.5.1 onmt/modules/sru.py (held out), shortened: load_sru_mod compiles SRU's CUDA source
# with NVRTC and runs it through cupy on torch's CUDA stream
ONMT_SRU = '''import torch
from collections import namedtuple


def check_sru_requirement(abort=False):
    if torch.cuda.is_available() is False:
        if not abort:
            return False
        raise AssertionError("Using SRU requires pytorch built with cuda.")
    return True


def load_sru_mod():
    global SRU_STREAM
    if check_sru_requirement():
        from cupy.cuda import function
        from pynvrtc.compiler import Program

        device = torch.device("cuda")
        tmp_ = torch.rand(1, 1).to(device)
        sru_mod = function.Module()
        stream = namedtuple("Stream", ["ptr"])
        SRU_STREAM = stream(ptr=torch.cuda.current_stream().cuda_stream)
'''


def test_a_branch_that_imports_a_cuda_interop_library_stays_whole():
    """load_sru_mod's branch imports cupy itself and hands it torch's CUDA stream: rewritten,
    `torch.device("npu")` and `torch.npu.current_stream().cuda_stream` met cupy's kernels (the
    half-migration the predicate's callers showed). The branch stays whole (NPU319 at its test);
    the predicate's own availability test migrates: on the NPU the branch is not taken."""
    assert_partial_as_whole(ONMT_SRU, "onmt/modules/sru.py")
    r = migrate_source(ONMT_SRU, "onmt/modules/sru.py")
    assert r.new_text == ONMT_SRU.replace("import torch\n", "import torch\nimport torch_npu  # noqa: F401\n", 1).replace(
        "if torch.cuda.is_available() is False", "if torch.npu.is_available() is False")
    assert [(f.code, f.span.line, f.span.col, f.api) for f in r.findings if f.code == "NPU319"] == [
        ("NPU319", 15, 8, "if check_sru_requirement():")]
    assert "(its branch uses `function` from cupy.cuda)" in next(f.message for f in r.findings if f.code == "NPU319")


# nnU-Net 2.8.1 nnunetv2/run/run_training.py (held out, trimmed): the assertion's message says
# "only implemented for cuda devices", and what it protects is DDP through a function of the
# module, whose process group and set_device the migration moves to hccl and torch.npu.
NNUNET_DDP = (
    "import os\n\nimport torch\nimport torch.distributed as dist\nimport torch.multiprocessing as mp\n\n\n"
    "def setup_ddp(rank, world_size):\n    dist.init_process_group(\"nccl\", rank=rank, world_size=world_size)\n\n\n"
    "def run_ddp(rank, world_size):\n    setup_ddp(rank, world_size)\n"
    "    torch.cuda.set_device(torch.device('cuda', dist.get_rank()))\n    dist.destroy_process_group()\n\n\n"
    "def run_training(num_gpus: int = 1, device: torch.device = torch.device('cuda')):\n"
    "    if num_gpus > 1:\n"
    "        assert device.type == 'cuda', f\"DDP training (triggered by num_gpus > 1) is only implemented for cuda"
    " devices. Your device: {device}\"\n"
    "        os.environ['MASTER_ADDR'] = 'localhost'\n"
    "        mp.spawn(run_ddp, args=(num_gpus,), nprocs=num_gpus, join=True)\n")


def test_an_assertion_saying_cuda_only_before_code_the_migration_ports_moves_with_it():
    """nnU-Net: the assertion was kept (NPU315 error, "port the CUDA-only code it protects")
    while the DDP path it protects was migrated whole and the device default became "npu":
    multi-NPU training raised at the assertion. Its message speaks of the code before the
    migration; the test moves with the code (the message, a string, stays as written)."""
    result = migrate_source(NNUNET_DDP, "run_training.py", Options(), RULES)
    assert result.new_text == NNUNET_DDP.replace("as mp\n", "as mp\nimport torch_npu  # noqa: F401\n").replace(
        '"nccl"', '"hccl"').replace("torch.cuda.set_device(torch.device('cuda',", "torch.npu.set_device(torch.device('npu',").replace(
        "torch.device('cuda'))", "torch.device('npu'))").replace("assert device.type == 'cuda'", "assert device.type == 'npu'")
    assert [f.code for f in result.findings] == []
    assert not migrate_source(result.new_text, "run_training.py", Options(), RULES).changed
    assert_partial_as_whole(NNUNET_DDP)


def test_an_assertion_saying_cuda_only_before_code_it_cannot_see_stays():
    """The same message before code the migration does not touch (a call into another module):
    nothing says the code was ported, so the refusal stays, as its message says (NPU315)."""
    text = NNUNET_DDP.replace("mp.spawn(run_ddp, args=(num_gpus,), nprocs=num_gpus, join=True)", "launch_ddp(num_gpus)")
    result = migrate_source(text, "run_training.py", Options(), RULES)
    assert "assert device.type == 'cuda'" in result.new_text
    assert _npu315(result) == [("NPU315", "error", 20, 16, "device.type == 'cuda'")]


def test_a_refusal_saying_cuda_only_before_code_the_migration_ports_moves_with_it():
    """The `if ...: raise` form of the nnU-Net assertion: the error says CUDA only, the code after
    it is the DDP path the migration moves to hccl/torch.npu, so the test moves with it; before a
    call into code it cannot see, the refusal stays (NPU315)."""
    text = (
        "import torch\nimport torch.distributed as dist\nimport torch.multiprocessing as mp\n\n\n"
        "def run_ddp(rank, world_size):\n    dist.init_process_group(\"nccl\", rank=rank, world_size=world_size)\n"
        "    torch.cuda.set_device(rank)\n\n\n"
        "def run_training(num_gpus, device):\n    if num_gpus > 1:\n        if device.type != 'cuda':\n"
        "            raise NotImplementedError(f\"DDP training is only implemented for cuda devices. Your device: {device}\")\n"
        "        mp.spawn(run_ddp, args=(num_gpus,), nprocs=num_gpus, join=True)\n\n\n"
        "def other(x):\n    if x.device.type != 'cuda':\n"
        "        raise ValueError(\"x must be a CUDA tensor: the kernel is CUDA only\")\n    return launch(x)\n")
    result = migrate_source(text, "run_training.py", Options(), RULES)
    assert result.new_text == text.replace("as mp\n", "as mp\nimport torch_npu  # noqa: F401\n").replace(
        '"nccl"', '"hccl"').replace("torch.cuda.set_device", "torch.npu.set_device").replace(
        "if device.type != 'cuda'", "if device.type != 'npu'")
    assert _npu315(result) == [("NPU315", "error", 19, 8, "x.device.type != 'cuda'")]
    assert_partial_as_whole(text)


ATTEND = '''\
from collections import namedtuple

import torch
from torch import nn
import torch.nn.functional as F

AttentionConfig = namedtuple('AttentionConfig', ['enable_flash', 'enable_math', 'enable_mem_efficient'])


class Attend(nn.Module):
    def __init__(self, flash = False):
        super().__init__()
        self.cpu_config = AttentionConfig(True, True, True)
        self.cuda_config = None

        if not torch.cuda.is_available() or not flash:
            return

        device_properties = torch.cuda.get_device_properties(torch.device('cuda'))

        if device_properties.major == 8 and device_properties.minor == 0:
            self.cuda_config = AttentionConfig(True, False, False)
        else:
            self.cuda_config = AttentionConfig(False, True, True)

    def flash_attn(self, q, k, v):
        _, heads, q_len, _, k_len, is_cuda, device = *q.shape, k.shape[-2], q.is_cuda, q.device

        config = self.cuda_config if is_cuda else self.cpu_config

        with torch.backends.cuda.sdp_kernel(**config._asdict()):
            out = F.scaled_dot_product_attention(q, k, v)
        return out


class Plain(nn.Module):
    def __init__(self):
        super().__init__()
        self.cpu_config = AttentionConfig(True, True, True)
        self.cuda_config = AttentionConfig(True, False, False)

    def config(self, q):
        is_cuda = q.is_cuda
        return self.cuda_config if is_cuda else self.cpu_config
'''


def test_an_is_cuda_test_selecting_what_only_a_kept_cuda_gate_builds_stays_cuda():
    """lucidrains' Attend (denoising-diffusion-pytorch 2.3.4 attend.py; x-transformers < 2,
    imagen-pytorch, ...): `self.cuda_config` is built only after `if not torch.cuda.is_available()
    ...: return`, which stays CUDA (it opens a compute-capability check, NPU307). `q.is_cuda` as
    `q.is_npu` selected it on the NPU: `None._asdict()`, AttributeError (shown on the stand-in
    with is_npu True). The test that selects it stays CUDA too (the NPU takes cpu_config) and is
    reported; a class that builds its cuda_config unconditionally (Plain) still migrates."""
    r = migrate_source(ATTEND, "denoising_diffusion_pytorch/attend.py")
    assert r.error is None
    assert r.new_text == ATTEND.replace("import torch\n", "import torch\nimport torch_npu  # noqa: F401\n", 1).replace(
        "        is_cuda = q.is_cuda\n", "        is_cuda = q.is_npu\n")
    assert _npu315(r) == [("NPU315", "warning", 16, 16, "torch.cuda.is_available()"),
                          ("NPU315", "warning", 27, 77, "q.is_cuda")]
    assert [f.message for f in r.findings if f.code == "NPU315"][1] == (
        "`q.is_cuda` opens CUDA-only code (`self.cuda_config`, which only code kept on CUDA assigns (line 22): "
        "None on the NPU); it is left as it is, so on the NPU it is False and the code takes its other path")
    assert not migrate_source(r.new_text, "denoising_diffusion_pytorch/attend.py").changed  # idempotent
    assert_partial_as_whole(ATTEND, "attend.py")


# torchrl 0.14.1 sota-implementations/dreamer_v3/dreamer_v3_utils.py (held out, session 16): the
# refusal's message says "requires a CUDA training device" (an article before CUDA), and the flag
# it refuses is on by default when the device test above it says CUDA.
DREAMER_V3 = (
    "import torch\n"
    "\n"
    "\n"
    "def _compile_settings(cfg, device):\n"
    "    strategy = cfg.optimization.compile\n"
    "    fast = strategy == \"auto\" and device.type == \"cuda\"\n"
    "    train_step = cfg.optimization.compile_train_step\n"
    "    train_step = fast if train_step is None else bool(train_step)\n"
    "    cudagraph = cfg.optimization.cudagraph_train_step\n"
    "    cudagraph = fast if cudagraph is None else bool(cudagraph)\n"
    "    if cudagraph and device.type != \"cuda\":\n"
    "        raise ValueError(\n"
    "            \"optimization.cudagraph_train_step requires a CUDA training device.\"\n"
    "        )\n"
    "    return train_step, cudagraph\n"
)


def test_a_refusal_that_requires_a_cuda_device_and_the_flag_it_refuses_stay_cuda():
    """Migrated before, `device.type != "npu"` let cudagraph through on the NPU (tensordict's
    CudaGraphModule, torch.cuda graphs, failed deep inside) and `fast` turned it on by default.
    Now the refusal stays (its message says CUDA only) and so does the test that sets the flag
    it refuses: on the NPU `fast` is False (no CUDA graphs), the file is unchanged, both reported."""
    r = migrate_source(DREAMER_V3, "dreamer_v3_utils.py")
    assert r.error is None
    assert not r.changed
    assert _npu315(r) == [("NPU315", "warning", 6, 35, 'device.type == "cuda"'),
                          ("NPU315", "error", 11, 22, 'device.type != "cuda"')]
    assert [f.message for f in r.findings if f.code == "NPU315"][0] == (
        "`device.type == \"cuda\"` opens CUDA-only code (when it is on, the check at line 11 refuses every "
        "device but CUDA); it is left as it is, so on the NPU it is False and the code takes its other path")
    assert_partial_as_whole(DREAMER_V3, "dreamer_v3_utils.py")
    # without the refusal, the flag is plain device code and moves
    plain = DREAMER_V3.replace("requires a CUDA training device", "is not available")
    assert migrate_source(plain, "dreamer_v3_utils.py").new_text == plain.replace(
        "import torch\n", "import torch\nimport torch_npu  # noqa: F401\n", 1).replace('"cuda"', '"npu"')


def test_cuda_only_messages_with_an_article_or_a_gpu_are_refusals_and_either_device_is_not():
    from npu_migrate.codemods import guards
    says = guards.compiled(guards._CUDA_ONLY_RE).search
    for text in ("requires a CUDA training device.", "needs an NVIDIA GPU", "requires CUDA", "Requires the CUDA runtime",
                 "only supported on CUDA", "this op needs a GPU", "need GPUs"):
        assert says(text), text
    for text in ("need a GPU or a TPU", "requires GPU-based processing", "x must be on the GPU", "requires cudnn",
                 "needs gpustat"):
        assert not says(text), text


# torchrl 0.14.1 benchmarks/test_rnn_reset_backends_benchmark.py:340: pytest.skip refuses like a raise
RNN_BENCH = (
    "import pytest\n"
    "import torch\n"
    "\n"
    "\n"
    "def _sync(device):\n"
    "    if device.type == \"cuda\":\n"
    "        torch.cuda.synchronize(device)\n"
    "\n"
    "\n"
    "def test_rnn_rollout(backend, rnn_shape):\n"
    "    device = torch.device(\"cuda:0\" if torch.cuda.device_count() else \"cpu\")\n"
    "    if backend == \"triton\" and device.type != \"cuda\":\n"
    "        pytest.skip(\"triton recurrent backend requires CUDA\")\n"
    "    module = _make_module(backend, device, rnn_shape)\n"
    "    module(torch.zeros(rnn_shape, device=device))\n"
    "    _sync(device)\n"
)


def test_a_pytest_skip_that_names_a_cuda_only_library_stays_cuda():
    """Migrated, `device.type != "npu"` ran the Triton backend on the NPU instead of skipping it;
    the rest of the test (other backends, synchronize) moves as before."""
    r = migrate_source(RNN_BENCH, "benchmarks/test_rnn_reset_backends_benchmark.py")
    assert r.error is None
    assert r.new_text == RNN_BENCH.replace("import torch\n", "import torch\nimport torch_npu  # noqa: F401\n", 1).replace(
        '    if device.type == "cuda":\n        torch.cuda.synchronize', '    if device.type == "npu":\n        torch.npu.synchronize').replace(
        '"cuda:0" if torch.cuda.device_count()', '"npu:0" if torch.npu.device_count()')
    assert _npu315(r) == [("NPU315", "error", 12, 32, 'device.type != "cuda"')]
    assert "(the error it raises names `triton`, a CUDA-only library)" in r.findings[0].message
    assert not migrate_source(r.new_text, "benchmarks/test_rnn_reset_backends_benchmark.py").changed
    assert_partial_as_whole(RNN_BENCH, "test_rnn_reset_backends_benchmark.py")
    # a skip whose message says CUDA only, before code nothing moves: the same refusal
    skip = ("import pytest\nimport torch\n\n\ndef test_kernel(x):\n    if x.device.type != 'cuda':\n"
            "        pytest.skip('the fused kernel requires a GPU')\n    run_fused(x)\n")
    r = migrate_source(skip, "test_kernel.py")
    assert (r.changed, _npu315(r)) == (False, [("NPU315", "error", 6, 8, "x.device.type != 'cuda'")])


def test_a_ray_gpu_count_chosen_by_a_device_test_stays_and_is_reported():
    """torchrl 0.14.1 benchmarks/ecosystem/vmas_rllib_vs_torchrl_sampling_performance.py:109:
    `num_gpus` is what Ray reserves; as "npu" Ray asked for 0.5 GPU on a machine with none and
    the trial never started. The torch device passed elsewhere still moves."""
    source = ("import torch\nfrom ray import tune\n\n\ndef run(device):\n"
              "    num_gpus = 0.5 if device == \"cuda\" else 0\n"
              "    tune.run(\"PPO\", config={\"num_gpus\": num_gpus, \"num_gpus_per_worker\": 0.5 if device == \"cuda\" else 0})\n"
              "\n\nrun(device=\"cuda\")\n")
    r = migrate_source(source, "vmas_rllib_vs_torchrl_sampling_performance.py")
    assert r.error is None
    assert r.new_text == source.replace('run(device="cuda")', 'run(device="npu")').replace(
        "import torch\n", "import torch\nimport torch_npu  # noqa: F401\n", 1)
    assert _npu315(r) == [("NPU315", "warning", 6, 23, 'device == "cuda"'),
                          ("NPU315", "warning", 7, 81, 'device == "cuda"')]
    assert (r.findings[0].message, r.findings[0].suggestion) == (
        "`device == \"cuda\"` picks a GPU count for Ray's scheduler (`num_gpus`); it is left as it is, so on the NPU"
        " it asks Ray for no GPU (asked for one, Ray would wait for a GPU the machine does not have)",
        "If the Ray task or actor should hold an NPU, ask for it as a custom resource (`resources={\"NPU\": 1}`;"
        " start Ray with `--resources='{\"NPU\": 8}'`) where the GPU count was.")


# pytorch-lightning 1.9.5 lightning_fabric/accelerators/cuda.py:175: the test is a branch of a
# conditional expression whose other branch reads NVML through ctypes (CUDA-only code).
LIGHTNING_IS_CUDA_AVAILABLE = (
    "import torch\n\n\ndef _raw_device_count_nvml():\n    from ctypes import byref, c_int, CDLL\n\n"
    "    nvml_h = CDLL(\"libnvidia-ml.so.1\")\n    return nvml_h.nvmlInit()\n\n\n"
    "def num_cuda_devices():\n    return _raw_device_count_nvml()\n\n\n"
    "def is_cuda_available():\n    return torch.cuda.is_available() if _TORCH_GREATER_EQUAL_2_0 else num_cuda_devices() > 0\n")


def test_a_device_test_in_a_returned_conditional_is_judged_by_itself_not_by_the_other_branch():
    """ef24058 followed a test through a conditional expression and then read the whole
    expression, the NVML branch too: a whole parse kept `torch.cuda.is_available()` (NPU315), a
    partial parse (which leaves the NVML functions out) rewrote it. Only an assignment carries the
    test on to its variable's readers; returned, it migrates as it did before."""
    r = assert_partial_as_whole(LIGHTNING_IS_CUDA_AVAILABLE, "lightning_fabric/accelerators/cuda.py")
    assert "    return torch.npu.is_available() if _TORCH_GREATER_EQUAL_2_0 else" in r.new_text
    assert _npu315(r) == []


# accelerate 1.15.0 state.py:937: `elif torch.cuda.is_available() and not check_cuda_fp8_capability():`
# (the project's own CUDA check: nvidia-smi, then torch.cuda.get_device_capability(), kept by NPU307).
# Migrated, the NPU passed the availability test and ran the CUDA check, which raised there with fp8
# asked for; unmigrated the branch was skipped. Test and branch stay as they are.
FP8_STATE = '''\
import torch

from .utils import check_cuda_fp8_capability, is_fp8_available


def precision(mixed_precision):
    if mixed_precision == "fp8":
        if not is_fp8_available():
            raise ValueError("fp8 needs transformer_engine")
        elif torch.cuda.is_available() and not check_cuda_fp8_capability():
            logger.warning(f"compute capability {torch.cuda.get_device_capability()} is too low")
            mixed_precision = "fp16"
    return mixed_precision, torch.zeros(1).cuda()
'''


def test_a_cuda_check_of_the_project_behind_a_cuda_availability_test_stays_with_it():
    r = assert_partial_as_whole(FP8_STATE, "state.py")
    assert r.new_text == FP8_STATE.replace("import torch\n", "import torch\nimport torch_npu  # noqa: F401\n", 1).replace(
        "torch.zeros(1).cuda()", "torch.zeros(1).npu()") + PARTIAL_PADDING


@pytest.mark.parametrize("test", ["torch.cuda.is_available() and use_cuda_graphs()",
                                  "torch.cuda.is_available() and not torch.cuda.is_bf16_supported()",
                                  "torch.cuda.is_available() or not check_cuda_fp8_capability()"])
def test_an_availability_test_beside_anything_else_migrates_as_before(test):
    text = f"import torch\n\n\ndef f(x):\n    if {test}:\n        x = x.cuda()\n    return x\n"
    r = migrate_source(text, "m.py")
    assert "torch.npu.is_available()" in r.new_text and "x.npu()" in r.new_text


# Lightning's accelerator chosen into a variable (heldout21's note on 089152e, which kept the
# keyword form `Trainer(accelerator="cuda" if torch.cuda.is_available() else "cpu")`): moved, the
# variable held "npu", an accelerator Lightning does not have, and a GPU count the NPU count; as
# written Lightning gets "cpu" (0 GPUs) on the Ascend machine and trains there.
LIGHTNING_VARIABLES = '''\
import lightning as L
import torch


def fit(model, loader):
    accelerator = "cuda" if torch.cuda.is_available() else "cpu"
    gpus = torch.cuda.device_count()
    trainer = L.Trainer(accelerator=accelerator, devices=gpus, max_epochs=1)
    trainer.fit(model, loader)


def evaluate(model, loader):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    trainer = L.Trainer(accelerator=device)
    return trainer.validate(model.to(device), loader)
'''


def test_a_variable_read_only_as_lightnings_device_arguments_stays_as_written():
    r = assert_partial_as_whole(LIGHTNING_VARIABLES, "train.py")
    # `device` is also a torch device (`model.to(device)`): it moves with that reader, as before
    # (Lightning then gets "npu": NPU313 says so)
    assert r.new_text == LIGHTNING_VARIABLES.replace("import torch\n", "import torch\nimport torch_npu  # noqa: F401\n").replace(
        '    device = "cuda" if torch.cuda.is_available() else "cpu"',
        '    device = "npu" if torch.npu.is_available() else "cpu"') + PARTIAL_PADDING
    assert [(f.code, f.span.line) for f in r.findings] == [("NPU313", 8), ("NPU313", 14)]
    # read only by Lightning: nothing moves
    alone = LIGHTNING_VARIABLES.split("\n\n\ndef evaluate")[0] + "\n"
    result = migrate_source(alone, "train.py")
    assert (result.new_text, result.edits) == (None, [])
    assert [f.code for f in result.findings] == ["NPU313"]
    # the name also read otherwise (every read the text may hold is counted): it moves
    noted = alone.replace("    trainer.fit(", "    print(gpus)\n    trainer.fit(")
    assert "gpus = torch.npu.device_count()" in migrate_source(noted, "train.py").new_text


# trl 1.16.0 trl/generation/vllm_client.py:725-789 and 897-900, trimmed: the trainer's device for
# vLLM's NCCL weight transfer, refused unless CUDA.
VLLM_CLIENT = '''\
import atexit
from concurrent.futures import ThreadPoolExecutor

import torch

from ..import_utils import is_vllm_available


_HAS_STATEFUL_TRAINER_ENGINE = is_vllm_available(min_version="0.28.0")
if _HAS_STATEFUL_TRAINER_ENGINE:
    from vllm.distributed.weight_transfer.nccl_common import trainer_init as open_trainer_endpoint
elif is_vllm_available():
    from vllm.distributed.weight_transfer.nccl_engine import NCCLTrainerSendWeightsArgs, NCCLWeightTransferEngine


class VLLMClient:
    def init_communicator(self, device: torch.device | str | int = 0):
        init_info = {"master_port": self.group_port, "rank_offset": 1}

        # vLLM builds the trainer side of the group on the current device, so point it at the requested one. A device
        # without an index (e.g. `torch.device("cuda")`) means the current device, which is already the right one.
        device = torch.device("cuda", device) if isinstance(device, int) else torch.device(device)
        if device.type != "cuda":
            raise NotImplementedError(
                f"Weight synchronization runs on vLLM's NCCL weight-transfer engine, which needs a CUDA device, got "
                f"'{device}'. Generation through the server is unaffected."
            )
        if device.index is not None:
            torch.cuda.set_device(device)

        with ThreadPoolExecutor(max_workers=1) as executor:
            future = executor.submit(self._post, f"{self.base_url}/init_weight_transfer_engine", json={"init_info": init_info})
            if _HAS_STATEFUL_TRAINER_ENGINE:
                self.communicator = open_trainer_endpoint(init_info)
            else:
                self.communicator = NCCLWeightTransferEngine.trainer_init(init_info)
            future.result()

        atexit.register(self.close_communicator)


# Example usage
if __name__ == "__main__":
    client = VLLMClient()
    client.init_communicator(device="cuda")
'''


def test_a_device_given_to_a_kept_refusal_moves_so_the_refusal_refuses_the_npu():
    """heldout21 called it half-migrated: `torch.device("cuda", device)` becomes "npu" while the
    `device.type != "cuda"` that reads it stays (NPU315: it refuses before vLLM's NCCL engine).
    Both are right together: the refusal reads whatever device it is given, and on the Ascend
    machine the NPU device is refused with trl's own NotImplementedError, before
    `torch.cuda.set_device` (kept) and the NCCL engine. Kept as "cuda", the value would pass the
    refusal there and fail in torch.cuda.set_device or in vLLM; moved with its value, the test
    would send the NPU into the NCCL engine. The example's `device="cuda"` moves and is refused alike."""
    r = assert_partial_as_whole(VLLM_CLIENT, "trl/generation/vllm_client.py")
    assert r.new_text == VLLM_CLIENT.replace("import torch\n", "import torch\nimport torch_npu  # noqa: F401\n").replace(
        'torch.device("cuda", device) if', 'torch.device("npu", device) if').replace(
        'init_communicator(device="cuda")', 'init_communicator(device="npu")') + PARTIAL_PADDING
    assert 'if device.type != "cuda":' in r.new_text and "torch.cuda.set_device(device)" in r.new_text
    assert [(f.code, f.severity.value, f.span.line) for f in r.findings] == [
        ("NPU303", "error", 11), ("NPU303", "info", 13), ("NPU315", "error", 23)]
    assert "on the NPU it raises as written" in next(f.message for f in r.findings if f.code == "NPU315")


# xtuner 0.2.0 (wheel) xtuner/_lite/device.py:1-31, whole but for get_torch_device_module.
XTUNER_DEVICE = '''\
# Copyright (c) OpenMMLab. All rights reserved.
import torch


def get_device():
    device = None
    if torch.cuda.is_available():
        device = "cuda"
    else:
        try:
            import torch_npu  # noqa: F401

            device = "npu"
        except ImportError:
            pass
    try:
        import torch_mlu  # noqa: F401

        device = "mlu"
    except ImportError:
        pass

    if device is None:
        raise NotImplementedError(
            "Supports only CUDA or NPU. If your device is CUDA or NPU, "
            "please make sure that your environmental settings are "
            "configured correctly."
        )

    return device
'''


def test_a_cuda_test_whose_else_selects_the_npu_stays_with_its_cuda_arm():
    """xtuner 0.2.0 _lite/device.py: `if torch.cuda.is_available(): device = "cuda"` / `else:
    import torch_npu; device = "npu"` selects the NPU already. Moved, the test called torch.npu
    before the `else` imported torch_npu (AttributeError on the NPU), and the NPU arm never ran.
    Kept whole, as a chain with an NPU test is; an `else` that does not select the NPU moves."""
    r = assert_partial_as_whole(XTUNER_DEVICE, "xtuner/_lite/device.py")
    assert r.new_text is None and r.edits == [] and r.findings == []
    cpu = XTUNER_DEVICE.replace('''        try:
            import torch_npu  # noqa: F401

            device = "npu"
        except ImportError:
            pass
    try:''', '''        device = "cpu"
    try:''')
    r = migrate_source(cpu, "xtuner/_lite/device.py")
    assert r.new_text == cpu.replace("import torch\n", "import torch\nimport torch_npu  # noqa: F401\n").replace(
        "torch.cuda.is_available():\n        device = 'cuda'".replace("'", '"'),
        "torch.npu.is_available():\n        device = 'npu'".replace("'", '"'))


# llamafactory 0.9.5 (sdist) src/llamafactory/v1/core/utils/checkpoint.py:20-28 and 88-114.
LLAMAFACTORY_CHECKPOINT = '''\
import numpy as np
import torch
from safetensors.torch import load_file

from ...accelerator.helper import DeviceType, get_current_accelerator


def _get_accelerator_rng_state():
    """Get RNG state for the current accelerator, device-agnostic."""
    device_type = get_current_accelerator().type
    if device_type == DeviceType.CUDA:
        return torch.cuda.get_rng_state_all()
    elif device_type == DeviceType.NPU:
        return torch.npu.get_rng_state_all()
    elif device_type == DeviceType.XPU:
        return torch.xpu.get_rng_state_all()
    return None


def _set_accelerator_rng_state(state) -> None:
    """Set RNG state for the current accelerator, device-agnostic."""
    if state is None:
        return

    device_type = get_current_accelerator().type
    if device_type == DeviceType.CUDA:
        torch.cuda.set_rng_state_all(state)
    elif device_type == DeviceType.NPU:
        torch.npu.set_rng_state_all(state)
    elif device_type == DeviceType.XPU:
        torch.xpu.set_rng_state_all(state)
'''


def test_a_chain_on_a_device_enumeration_with_an_npu_member_keeps_its_cuda_arm():
    """llamafactory 0.9.5's `if device_type == DeviceType.CUDA: torch.cuda...` / `elif device_type
    == DeviceType.NPU: torch.npu...`: the enumeration's CUDA member keeps its value ("cuda"), so
    that arm never runs on the NPU; migrated it became a second torch.npu arm (torch.npu called on
    a CUDA machine). Only `import torch_npu` is added, for the NPU arm's torch.npu (NPU108). Without
    the NPU member's arm, the CUDA arm moves as before."""
    r = assert_partial_as_whole(LLAMAFACTORY_CHECKPOINT, "src/llamafactory/v1/core/utils/checkpoint.py")
    assert r.new_text == (LLAMAFACTORY_CHECKPOINT + PARTIAL_PADDING).replace(
        "import torch\n", "import torch\nimport torch_npu  # noqa: F401\n", 1)
    assert [e.code for e in r.edits] == ["NPU108"]
    alone = LLAMAFACTORY_CHECKPOINT.replace('''    elif device_type == DeviceType.NPU:
        return torch.npu.get_rng_state_all()
''', "")
    r = migrate_source(alone, "checkpoint.py")
    assert r.new_text is not None and "return torch.npu.get_rng_state_all()" in r.new_text
    assert "torch.cuda.set_rng_state_all" in r.new_text  # (the second chain keeps its NPU arm)


# llamafactory 0.9.5 (sdist) src/llamafactory/extras/env.py:25-35 and 47-56, trimmed.
LLAMAFACTORY_ENV = '''\
def print_env() -> None:
    import os
    import platform

    import torch
    import transformers
    from transformers.utils import is_torch_cuda_available, is_torch_npu_available

    info = {"PyTorch version": torch.__version__}

    if is_torch_cuda_available():
        info["PyTorch version"] += " (GPU)"
        info["GPU type"] = torch.cuda.get_device_name()
        info["GPU number"] = torch.cuda.device_count()
        info["GPU memory"] = f"{torch.cuda.mem_get_info()[1] / (1024**3):.2f}GB"

    if is_torch_npu_available():
        info["PyTorch version"] += " (NPU)"
        info["NPU type"] = torch.npu.get_device_name()
        info["CANN version"] = torch.version.cann
'''


def test_a_branch_behind_a_librarys_cuda_test_stays():
    """llamafactory 0.9.5 extras/env.py: `if is_torch_cuda_available():` imported from
    transformers, which pairs it with is_torch_npu_available and whose own run keeps it
    (project_values.cuda_tests): False on the NPU, so its branch is dead there; migrated, it called
    torch.npu on a CUDA machine. The branch stays (partial parsing keeps the import that binds the
    name); only the NPU arm's `import torch_npu` is added. The project's own function of that name
    (not a CUDA test with an NPU twin) still migrates what it opens (4f56f66)."""
    r = assert_partial_as_whole(LLAMAFACTORY_ENV, "src/llamafactory/extras/env.py")
    assert r.new_text == (LLAMAFACTORY_ENV + PARTIAL_PADDING).replace(
        "    import torch\n", "    import torch\n    import torch_npu  # noqa: F401\n", 1)
    own = LLAMAFACTORY_ENV.replace("from transformers.utils import", "from .misc import")
    r = migrate_source(own, "src/llamafactory/extras/env.py")
    assert r.new_text is not None and r.new_text.count("torch.npu.") == 4


# mindone 0.5.0 (sdist) mindone/comfyui/main.py:131-155, with the imports it uses.
COMFYUI_MAIN = '''\
import logging
import os

from comfy.cli_args import args

if __name__ == "__main__":
    os.environ["TORCH_ROCM_AOTRITON_ENABLE_EXPERIMENTAL"] = "1"
    if args.default_device is not None:
        default_dev = args.default_device
        devices = list(range(32))
        devices.remove(default_dev)
        devices.insert(0, default_dev)
        devices = ",".join(map(str, devices))
        os.environ["CUDA_VISIBLE_DEVICES"] = str(devices)
        os.environ["HIP_VISIBLE_DEVICES"] = str(devices)

    if args.cuda_device is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = str(args.cuda_device)
        os.environ["HIP_VISIBLE_DEVICES"] = str(args.cuda_device)
        os.environ["ASCEND_RT_VISIBLE_DEVICES"] = str(args.cuda_device)
        logging.info("Set cuda device to: {}".format(args.cuda_device))

    if args.oneapi_device_selector is not None:
        os.environ["ONEAPI_DEVICE_SELECTOR"] = args.oneapi_device_selector
        logging.info("Set oneapi device selector to: {}".format(args.oneapi_device_selector))

    if args.deterministic:
        if "CUBLAS_WORKSPACE_CONFIG" not in os.environ:
            os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
'''


def test_an_env_var_set_beside_its_ascend_twin_stays():
    """mindone 0.5.0 comfyui/main.py sets CUDA_VISIBLE_DEVICES and ASCEND_RT_VISIBLE_DEVICES to
    the same value in one block: the CUDA line, rewritten, set the Ascend variable twice. It
    stays (harmless on the NPU), unreported; the block that sets only the CUDA variable moves."""
    r = assert_partial_as_whole(COMFYUI_MAIN, "mindone/comfyui/main.py")
    assert r.new_text == (COMFYUI_MAIN + PARTIAL_PADDING).replace(
        'os.environ["CUDA_VISIBLE_DEVICES"] = str(devices)', 'os.environ["ASCEND_RT_VISIBLE_DEVICES"] = str(devices)')
    assert [(e.code, e.span.line) for e in r.edits] == [("NPU107", 14)]
    assert r.findings == []
    assert migrate_source(r.new_text, "mindone/comfyui/main.py").new_text is None  # (a second run: nothing)


def _twins(cuda: str, between: str, npu: str) -> str:
    return ("import os\nimport torch\nimport torch_npu\n\n\ndef setup(args, seed):\n"
            f"    {cuda}\n" + "".join(f"    {line}\n" for line in between.splitlines()) + f"    {npu}\n")


@pytest.mark.parametrize("cuda, between, npu", [
    # the same value as code: other quotes, spaces, parentheses
    ("os.environ['CUDA_VISIBLE_DEVICES'] = str( args.gpu )", "", 'os.environ["ASCEND_RT_VISIBLE_DEVICES"] = (str(args.gpu))'),
    ('os.environ["CUDA_LAUNCH_BLOCKING"] = "1"', "print(seed)", "os.environ['ASCEND_LAUNCH_BLOCKING'] = '1'"),
    # the Ascend statement first
    ('os.environ["ASCEND_RT_VISIBLE_DEVICES"] = args.gpu', "", 'os.environ["CUDA_VISIBLE_DEVICES"] = args.gpu'),
    # seed calls: queued until CUDA initializes, which it never does on the NPU (torch/cuda/random.py)
    ("torch.cuda.manual_seed_all(seed)", "", "torch.npu.manual_seed_all(seed)"),
    ("torch.cuda.manual_seed(seed)", "torch.manual_seed(seed)", "torch.npu.manual_seed(seed)"),
])
def test_a_harmless_cuda_statement_beside_its_rewrite_stays(cuda, between, npu):
    text = _twins(cuda, between, npu)
    r = assert_partial_as_whole(text)
    assert r.new_text is None and r.edits == [] and r.findings == []


@pytest.mark.parametrize("cuda, between, npu, moved", [
    # another value
    ('os.environ["CUDA_VISIBLE_DEVICES"] = args.gpu', "", 'os.environ["ASCEND_RT_VISIBLE_DEVICES"] = args.npu',
     'os.environ["ASCEND_RT_VISIBLE_DEVICES"] = args.gpu'),
    ("torch.cuda.manual_seed(seed)", "", "torch.npu.manual_seed(seed + 1)", "torch.npu.manual_seed(seed)"),
    # a name the value reads is bound (or its attribute set) between the two
    ('os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu)', "gpu = 1", 'os.environ["ASCEND_RT_VISIBLE_DEVICES"] = str(gpu)',
     'os.environ["ASCEND_RT_VISIBLE_DEVICES"] = str(gpu)'),
    ('os.environ["CUDA_VISIBLE_DEVICES"] = args.gpu', "args.gpu = '1'", 'os.environ["ASCEND_RT_VISIBLE_DEVICES"] = args.gpu',
     'os.environ["ASCEND_RT_VISIBLE_DEVICES"] = args.gpu'),
    ("torch.cuda.manual_seed(seed)", "for seed in range(2):\n    pass", "torch.npu.manual_seed(seed)",
     "torch.npu.manual_seed(seed)"),
    # not harmless on the NPU: torch.cuda.set_device raises without CUDA
    ("torch.cuda.set_device(args.gpu)", "", "torch.npu.set_device(args.gpu)", "torch.npu.set_device(args.gpu)"),
])
def test_a_cuda_statement_beside_another_npu_statement_moves(cuda, between, npu, moved):
    text = _twins(cuda, between, npu)
    r = migrate_source(text, "m.py")
    assert r.new_text == text.replace(cuda, moved, 1)


def test_a_cuda_statement_in_another_block_than_its_rewrite_moves():
    """Only the same block: an Ascend statement in an `if` elsewhere may not run."""
    text = ('import os\n\nif args.npu:\n    os.environ["ASCEND_RT_VISIBLE_DEVICES"] = args.gpu\n'
            'os.environ["CUDA_VISIBLE_DEVICES"] = args.gpu\n')
    r = migrate_source(text, "m.py")
    assert r.new_text == text.replace('"CUDA_VISIBLE_DEVICES"', '"ASCEND_RT_VISIBLE_DEVICES"')
