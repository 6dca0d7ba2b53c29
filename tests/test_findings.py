"""Findings for what cannot be migrated: each family flagged at the right line and column, through
aliases too, with its code, severity, API and suggestion -- and nothing where the code is fine."""

from __future__ import annotations

import textwrap

import pytest

from npu_migrate.dispatch import migrate_source
from npu_migrate.model import Severity
from npu_migrate.rules import default_rules

RULES = default_rules()


def findings(source: str, path: str = "train.py"):
    result = migrate_source(textwrap.dedent(source), path, rules=RULES)
    assert result.error is None
    return [(f.code, f.span.line, f.span.col, f.api) for f in result.findings]


def finding_objects(source: str, path: str = "train.py"):
    return migrate_source(textwrap.dedent(source), path, rules=RULES).findings


# ----------------------------------------------------------------------------- NPU301 torch.cuda


def test_torch_cuda_without_twin_through_every_spelling():
    assert findings(
        """\
        import torch
        import torch as th
        from torch import cuda
        from torch.cuda import nvtx
        import torch.cuda.nvtx as nv
        torch.cuda.nvtx.range_push("a")
        th.cuda.nvtx.mark("b")
        cuda.nvtx.range_pop()
        nvtx.mark("c")
        nv.mark("d")
        th.cuda.get_arch_list()
        x = torch.cuda.jiterator
        """
    ) == [
        ("NPU301", 4, 24, "torch.cuda.nvtx"),
        ("NPU301", 5, 8, "torch.cuda.nvtx"),  # the import itself (kind "import")
        ("NPU301", 6, 1, "torch.cuda.nvtx"),
        ("NPU301", 7, 1, "torch.cuda.nvtx"),
        ("NPU301", 8, 1, "torch.cuda.nvtx"),
        ("NPU301", 9, 1, "torch.cuda.nvtx"),
        ("NPU301", 10, 1, "torch.cuda.nvtx"),
        ("NPU301", 11, 1, "torch.cuda.get_arch_list"),
        ("NPU301", 12, 5, "torch.cuda.jiterator"),
    ]


def test_torch_cuda_specific_suggestions():
    by_api = {f.api: f for f in finding_objects(
        "import torch\ntorch.cuda.nvtx.mark('x')\ntorch.cuda.profiler.start()\nrt = torch.cuda.cudart()\n"
        "t = torch.cuda.temperature()\nok = torch.cuda.is_tf32_supported()\n"
    )}
    assert by_api["torch.cuda.nvtx"].suggestion.startswith("Use torch_npu.npu.mstx")
    assert "torch_npu.profiler" in by_api["torch.cuda.profiler"].suggestion
    assert "torch_npu.npu.npurt()" in by_api["torch.cuda.cudart"].suggestion
    assert "npu-smi info" in by_api["torch.cuda.temperature"].suggestion
    assert "torch.npu.matmul.allow_hf32" in by_api["torch.cuda.is_tf32_supported"].suggestion
    assert {f.severity for f in by_api.values()} == {Severity.ERROR}


def test_torch_cuda_names_with_a_twin_are_not_findings():
    assert findings(
        """\
        import torch
        torch.cuda.synchronize()
        n = torch.cuda.device_count()
        torch.cuda.set_device(0)
        with torch.cuda.stream(s):
            pass
        """
    ) == []


def test_names_imported_from_torch_cuda_with_a_twin_are_not_findings_where_used():
    # The import becomes `from torch.npu import synchronize`; its uses are fine as they are.
    assert findings(
        """        from torch.cuda import synchronize
        synchronize()
        """
    ) == []


def test_a_misspelt_torch_cuda_name_is_told_as_a_typo():
    # A newcomer's `is_avaliable` was told to remove the call, as a CUDA-only API would be; a
    # real member with no twin (caching_allocator_enable, close to caching_allocator_delete but
    # four letters away) keeps that advice, and one with a finding of its own keeps its own.
    by_api = {f.api: f for f in finding_objects(
        "import torch\nif torch.cuda.is_avaliable():\n    n = torch.cuda.device_cont()\n"
        "j = torch.cuda.jiterator\ntorch.cuda.caching_allocator_enable(True)\n"
    )}
    assert by_api["torch.cuda.is_avaliable"].message == "`torch.cuda.is_avaliable` has no NPU equivalent in torch_npu"
    assert by_api["torch.cuda.is_avaliable"].suggestion == (
        "A typo for `torch.cuda.is_available`? It is the name torch.cuda has; correct it and run npu-migrate again.")
    assert by_api["torch.cuda.device_cont"].suggestion.startswith("A typo for `torch.cuda.device_count`?")
    remove = "Remove or replace this call; check the torch_npu API list for an alternative."
    assert not by_api["torch.cuda.jiterator"].suggestion.startswith("A typo")
    assert by_api["torch.cuda.caching_allocator_enable"].suggestion == remove


def test_a_name_kept_on_cuda_by_its_import_is_reported_where_used():
    # get_arch_list has no twin, so the whole import stays, and synchronize() with it (NPU323).
    assert findings(
        """        from torch.cuda import synchronize, get_arch_list
        synchronize()
        get_arch_list()
        """
    ) == [("NPU301", 1, 37, "torch.cuda.get_arch_list"), ("NPU323", 2, 1, "torch.cuda.synchronize"),
          ("NPU301", 3, 1, "torch.cuda.get_arch_list")]


# ----------------------------------------------------------------------------- NPU302 kernels


def test_custom_cuda_kernels_in_python():
    assert findings(
        """\
        from torch.utils.cpp_extension import CUDAExtension, CppExtension, load, load_inline
        import torch.utils.cpp_extension as ext
        a = CUDAExtension("a", ["a.cpp", "a_kernel.cu"])
        b = CppExtension("b", ["b.cpp"])
        c = load("c", ["c.cpp", "c.cu"])
        d = load("d", sources=["d.cpp"])
        e = ext.load(name="e", sources=["e.cpp"], with_cuda=True)
        f = load_inline("f", cpp_src, cuda_src)
        g = load_inline("g", cpp_sources=cpp_src)
        h = ext.load_inline("h", cpp_src, cuda_sources=None)
        i = load("i", [f"{root}/k.cuh"])
        """
    ) == [
        ("NPU302", 3, 5, "torch.utils.cpp_extension.CUDAExtension"),
        ("NPU302", 5, 5, "torch.utils.cpp_extension.load"),
        ("NPU302", 7, 5, "torch.utils.cpp_extension.load"),
        ("NPU302", 8, 5, "torch.utils.cpp_extension.load_inline"),
        ("NPU302", 11, 5, "torch.utils.cpp_extension.load"),
    ]


def test_arguments_passed_through_star_args_are_unknown_and_not_flagged():
    assert findings("from torch.utils.cpp_extension import load\nm = load(*args, **kwargs)\n") == []


def test_cuda_source_file_points_at_its_first_kernel():
    source = (
        "#include <cuda_runtime.h>\n"
        "// __global__ void commented_out(float *x) {}\n"
        "template <typename T>\n"
        "  __global__ static void add_kernel(T *x, int n) { x[threadIdx.x] += 1; }\n"
        "extern \"C\" __global__ void mul_kernel(float *x) {}\n"
    )
    [f] = finding_objects(source, "ops/kernels.cu")
    assert (f.code, f.severity, f.span.line, f.span.col, f.span.end_col) == ("NPU302", Severity.ERROR, 4, 3, 13)
    assert f.api == "add_kernel, mul_kernel"
    assert f.message == "custom CUDA code (2 `__global__` kernels: add_kernel, mul_kernel) cannot run on the NPU"


def test_a_kernel_a_macro_defines_is_named_by_the_macro():
    """spikingjelly 2.0.0 ops/spike_linear/kernels.cuh (shortened): three kernels are defined by
    function-like macros under their `name` parameter; the finding listed them as "name, name, name"."""
    source = (
        '#include <cuda_fp16.h>\n'
        '\n'
        'extern "C" __global__ void pack_kernel(const void *__restrict__ S,\n'
        '                                       unsigned char *__restrict__ out) {}\n'
        '\n'
        '#define DEFINE_V3_KERNEL(name, scalar_t)                                               \\\n'
        '    extern "C" __global__ void name(const unsigned char *S_packed, const scalar_t *W,  \\\n'
        '                                    scalar_t *Y) {}\n'
        'DEFINE_V3_KERNEL(spike_linear_v3_f32, float)\n'
        '#define DEFINE_INDEX_KERNEL(name, scalar_t) \\\n'
        '    /* one row per block */ \\\n'
        '    extern "C" __global__ void name(const scalar_t *S, int *row_counts) {}\n'
        '#define GRID 128\n'
        '__global__ void name(float *x) {}\n'
    )
    [f] = finding_objects(source, "ops/spike_linear/kernels.cuh")
    assert f.api == "pack_kernel, DEFINE_V3_KERNEL(...), DEFINE_INDEX_KERNEL(...), name"
    assert (f.span.line, f.span.col) == (3, 12)


def test_cuda_header_without_kernels_is_flagged_at_line_one():
    [f] = finding_objects("#pragma once\ninline int div_up(int a, int b) { return (a + b - 1) / b; }\n", "ops/util.cuh")
    assert (f.span.line, f.span.col, f.api) == (1, 1, "CUDA source")
    assert "no `__global__` kernel" in f.message


def test_cuda_source_suppression_and_undecodable_bytes():
    assert finding_objects("__global__ void k() {}  // npu-migrate: ignore[NPU302]\n", "k.cu") == []
    assert len(finding_objects("__global__ void k() {}  // npu-migrate: ignore[NPU301]\n", "k.cu")) == 1
    from npu_migrate.frontends.cuda_sources import decode

    assert decode(b"// caf\xe9\n__global__ void k() {}\n") == ("// caf\ufffd\n__global__ void k() {}\n", "utf-8")


# ----------------------------------------------------------------------------- NPU303 libraries


def test_cuda_only_libraries_through_every_import_form():
    assert findings(
        """\
        import cupy as cp
        from numba import cuda, jit
        import numba.cuda as nc
        from flash_attn import flash_attn_func
        import xformers.ops as xops
        from apex import amp
        from apex.optimizers import FusedAdam
        import amp_C
        import pynvml, os
        import tensorrt as trt
        import triton.language as tl
        from nvidia.dali import fn
        from cuda import cudart
        import numba
        """
    ) == [
        ("NPU303", 1, 8, "cupy"),
        ("NPU303", 2, 19, "numba.cuda"),
        ("NPU303", 3, 8, "numba.cuda"),
        ("NPU303", 4, 1, "flash_attn"),
        ("NPU303", 5, 8, "xformers"),  # reported under the library's name as its rule gives it
        ("NPU303", 6, 18, "apex.amp"),
        ("NPU303", 7, 1, "apex.optimizers"),
        ("NPU303", 8, 8, "amp_C"),
        ("NPU303", 9, 8, "pynvml"),
        ("NPU303", 10, 8, "tensorrt"),
        ("NPU303", 11, 8, "triton"),
        ("NPU303", 12, 1, "nvidia.dali"),
        ("NPU303", 13, 18, "cuda.cudart"),
    ]


def test_library_severities_and_suggestions():
    by_api = {f.api: f for f in finding_objects(
        "import triton\nfrom flash_attn import flash_attn_func\nfrom apex import amp\nimport nvtx\n"
        "from apex.optimizers import FusedLAMB\n"
    )}
    assert by_api["triton"].severity is Severity.WARNING and "triton-ascend" in by_api["triton"].suggestion
    assert by_api["flash_attn"].severity is Severity.ERROR
    assert "torch_npu.npu_fusion_attention" in by_api["flash_attn"].suggestion
    assert by_api["apex.amp"].severity is Severity.WARNING
    assert by_api["nvtx"].severity is Severity.INFO
    assert "torch_npu.optim.NpuFused" in by_api["apex.optimizers"].suggestion


def test_optional_import_is_advice_not_an_error():
    [f] = finding_objects(
        """\
        try:
            from flash_attn import flash_attn_func
        except ImportError:
            flash_attn_func = None
        """
    )
    assert (f.code, f.severity, f.span.line) == ("NPU303", Severity.INFO, 2)
    assert f.message.endswith("check that the fallback is what runs on the NPU)")


@pytest.mark.parametrize("guarded", [
    "if _is_package_available('transformer_engine'):\n    import transformer_engine\n",
    "if is_bnb_available():\n    import bitsandbytes\n",
    "if not is_bnb_available():\n    raise ImportError('pip install bitsandbytes')\nimport bitsandbytes.optim as bnb_opt\n",
    "def f():\n    if not is_bnb_available():\n        return False\n    import bitsandbytes as bnb\n",
    "def f():\n    if not is_pynvml_available():\n        raise ImportError('pip install nvidia-ml-py')\n"
    "    import pynvml\n",
    "if importlib.util.find_spec('cupy') is not None:\n    import cupy\n",
])
def test_an_import_behind_an_availability_check_is_advice_not_an_error(guarded):
    """Found on accelerate 1.15.0: `if is_bnb_available(): import bitsandbytes` (or an early
    `return`/`raise ImportError` when it is not) is an optional import like `try: ... except
    ImportError`: info, not an error. Unguarded, the same import stays an error."""
    [f] = finding_objects(guarded)
    assert (f.code, f.severity) == ("NPU303", Severity.INFO), f
    assert "where a check says it is installed" in f.message
    plain = "\n".join(line.strip() for line in guarded.splitlines() if "import " in line and "importlib" not in line)
    [g] = finding_objects(plain + "\n")
    assert g.severity is not Severity.INFO


@pytest.mark.parametrize("text", [
    "def f():\n    if not is_bnb_available():\n        log('slow')\n    import bitsandbytes\n",
    # accelerate's transformer_engine.py: the check is about the HPU, the import runs everywhere else.
    "if is_hpu_available():\n    import intel_transformer_engine as te\nelse:\n    import transformer_engine.pytorch as te\n",
])
def test_an_import_after_a_check_that_does_not_leave_or_names_another_thing_is_not_optional(text):
    found = [f for f in finding_objects(text) if f.api != "intel_transformer_engine"]
    assert [(f.api, f.severity) for f in found] == [(found[0].api, Severity.ERROR)], found


def test_import_in_the_except_branch_is_not_optional():
    [f] = finding_objects(
        """\
        try:
            import fast_path
        except ImportError:
            import cupy
        """
    )
    assert (f.api, f.severity) == ("cupy", Severity.ERROR)


def test_libraries_are_reported_in_files_of_every_framework():
    assert findings("import tensorflow as tf\nimport cupy\n") == [("NPU303", 2, 8, "cupy")]


def test_lookalike_and_relative_imports_are_not_flagged():
    assert findings(
        """\
        import tritonclient.http
        from .cuda import kernels
        from . import cupy
        import numba
        from apex_utils import helpers
        import apex
        """
    ) == []


# ----------------------------------------------------------------------------- behaviour


def test_data_parallel_calls_but_not_isinstance_checks():
    assert findings(
        """\
        import torch.nn as nn
        from torch.nn.parallel import data_parallel
        model = nn.DataParallel(model)
        y = data_parallel(model, x)
        if isinstance(model, nn.DataParallel):
            model = model.module
        """
    ) == [("NPU305", 3, 9, "torch.nn.DataParallel"), ("NPU305", 4, 5, "torch.nn.parallel.data_parallel")]


def test_double_only_in_files_that_use_the_device():
    device_file = findings("import torch\nx = torch.ones(2).cuda()\ny = x.double()\n")
    assert ("NPU306", 3, 5, ".double()") in device_file
    assert findings("import torch\ny = torch.ones(2).double()\n") == []
    # Already-migrated code uses the device too.
    assert findings("import torch\nimport torch_npu\ny = t.double()\n") == [("NPU306", 3, 5, ".double()")]


def test_double_tensor_is_rewritten_and_flagged():
    result = migrate_source("import torch\nx = torch.cuda.DoubleTensor(3)\n", "t.py", rules=RULES)
    assert "torch.npu.DoubleTensor" in result.new_text
    assert [(f.code, f.span.line, f.span.col) for f in result.findings] == [("NPU306", 2, 5)]


def test_behaviour_differences():
    assert findings(
        """\
        import torch
        from torch.backends import cudnn
        cap = torch.cuda.get_device_capability()
        @torch.jit.script
        def f(x):
            return x
        m = m.to(memory_format=torch.channels_last)
        cudnn.benchmark = True
        torch.backends.cudnn.deterministic = True
        torch.backends.cuda.matmul.allow_tf32 = True
        cudnn.allow_tf32 = True
        """
    ) == [
        ("NPU307", 3, 7, "torch.cuda.get_device_capability"),
        ("NPU308", 4, 2, "torch.jit.script"),
        ("NPU309", 7, 24, "torch.channels_last"),
        ("NPU401", 8, 1, "torch.backends.cudnn.benchmark"),
        ("NPU403", 9, 1, "torch.backends.cudnn.deterministic"),
        ("NPU402", 10, 1, "torch.backends.cuda.matmul.allow_tf32"),
        ("NPU402", 11, 1, "torch.backends.cudnn.allow_tf32"),
    ]


def test_severities_of_behaviour_findings():
    got = {f.code: f.severity for f in finding_objects(
        "import torch\ntorch.backends.cudnn.benchmark = True\ntorch.backends.cuda.matmul.allow_tf32 = True\n"
        "model = torch.nn.DataParallel(model)\n"
    )}
    assert got == {"NPU401": Severity.INFO, "NPU402": Severity.WARNING, "NPU305": Severity.ERROR}


def test_hf32_suggestions():
    by_api = {f.api: f.suggestion for f in finding_objects(
        "import torch\ntorch.backends.cuda.matmul.allow_tf32 = True\ntorch.backends.cudnn.allow_tf32 = True\n"
    )}
    assert by_api["torch.backends.cuda.matmul.allow_tf32"].startswith("Set torch.npu.matmul.allow_hf32")
    assert by_api["torch.backends.cudnn.allow_tf32"].startswith("Set torch.npu.conv.allow_hf32")


# ----------------------------------------------------------------------------- NPU304 Huawei's list


def test_unsupported_apis_through_aliases():
    assert findings(
        """\
        import torch as th
        from torch import nn
        from torch.nn import functional as F
        from torch.func import vmap
        rnn = nn.GRU(4, 8)
        y = F.max_pool1d(x, 2)
        s, m = th.std_mean(x)
        g = vmap(f)
        z = x.to_sparse_csr()
        """
    ) == [
        ("NPU304", 4, 24, "torch.func.vmap"),
        ("NPU304", 5, 7, "torch.nn.GRU"),
        ("NPU304", 6, 5, "torch.nn.functional.max_pool1d"),
        ("NPU304", 7, 8, "torch.std_mean"),
        ("NPU304", 8, 5, "torch.func.vmap"),
        ("NPU304", 9, 5, ".to_sparse_csr()"),
    ]


def test_unsupported_list_is_a_warning_and_names_its_source():
    [f] = finding_objects("import torch\ny = torch.heaviside(x, v)\n")
    assert f.severity is Severity.WARNING
    assert f.message == "`torch.heaviside` is listed as unsupported on Ascend NPUs (Huawei's API support list for PyTorch 2.8)"


def test_supported_neighbours_are_not_flagged():
    assert findings(
        """\
        import torch
        import torch.nn as nn
        rnn = nn.LSTM(4, 8)
        pool = nn.MaxPool2d(2)
        s = torch.std(x)
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        m = x.mode()
        """
    ) == []


def test_tensor_methods_need_a_torch_file():
    assert findings("import pandas as pd\nd = s.to_dense()\n") == []
    assert findings("import torch\nd = s.to_dense()\n") == [("NPU304", 2, 5, ".to_dense()")]


# ----------------------------------------------------------------------------- precision


@pytest.mark.parametrize(
    "source",
    [
        "# torch.cuda.nvtx.range_push('x') in a comment\nimport torch\n",
        "import torch\ndoc = 'import cupy; torch.nn.DataParallel(m)'\n",
        "import torch\ndef f():\n    '''Uses torch.cuda.nvtx and flash_attn.'''\n",
        "class DataParallel:\n    pass\nm = DataParallel()\n",
        "from mylib import nvtx\nnvtx.range_push('x')\n",
        "import torch\nx = torch.ones(3).float().to('cpu')\n",
    ],
)
def test_nothing_reported_for_code_that_is_fine(source):
    assert findings(source) == []


def test_findings_are_on_the_original_lines_when_rewrites_add_an_import():
    result = migrate_source("import torch\nx = torch.ones(2).cuda()\nimport cupy\n", "t.py", rules=RULES)
    assert "import torch_npu" in result.new_text
    assert [(f.code, f.span.line, f.span.col) for f in result.findings] == [("NPU303", 3, 8)]
