"""A table keyed by device types, looked up with the type of a device, moves its CUDA entry with
those readers (codemods/torch/literals.py: LiteralRewrites._typed_table), or stays and is said
(NPU327)."""

import pytest

from npu_migrate import Options, migrate_source
from helpers import assert_partial_as_whole

# spikingjelly 2.0.0 spikingjelly/timing_based/functional.py:14 (the table), :125 (its reader, in
# _Tempotron.forward) and :784 (_validate_events' device check, which moved already): on the NPU
# the check let NPU tensors through and the lookup raised KeyError: 'npu'.
SPIKINGJELLY_EVENT_BLOCK = """\
import math

import torch

__all__ = ["tempotron", "srm", "cubic_srm", "cubic_conv2d"]

_EVENT_BLOCK_SIZE = {"cpu": 128, "cuda": 512}
_BACKWARD_BLOCK_SIZE = 16384


def _event_blocks(times, max_groups):
    blocks = []
    block_size = _EVENT_BLOCK_SIZE[times.device.type]
    for start in range(0, max_groups, block_size):
        width = min(block_size, max_groups - start)
        blocks.append(width)
    return blocks


def _validate_events(
    spike_times, input_indices, batch_offsets, weight, in_features=None
):
    tensors = (spike_times, input_indices, batch_offsets, weight)
    if any(
        t.device != spike_times.device for t in tensors
    ) or spike_times.device.type not in ("cpu", "cuda"):
        raise ValueError("All tensors must be on the same CPU or CUDA device.")
"""

SPIKINGJELLY_MIGRATED = SPIKINGJELLY_EVENT_BLOCK.replace(
    '{"cpu": 128, "cuda": 512}', '{"cpu": 128, "npu": 512}').replace('("cpu", "cuda")', '("cpu", "npu")')


def test_a_table_looked_up_with_a_tensors_device_type_moves_its_cuda_entry():
    r = assert_partial_as_whole(SPIKINGJELLY_EVENT_BLOCK, "spikingjelly/timing_based/functional.py")
    assert r.new_text.startswith(SPIKINGJELLY_MIGRATED)
    r = migrate_source(SPIKINGJELLY_EVENT_BLOCK, "spikingjelly/timing_based/functional.py")
    assert r.new_text == SPIKINGJELLY_MIGRATED  # no import torch_npu: the key is an object's device type
    assert [(e.code, e.span.line, e.span.col) for e in r.edits] == [("NPU105", 7, 21), ("NPU105", 26, 42)]
    assert r.findings == []
    assert migrate_source(r.new_text, "functional.py").new_text is None  # a second run changes nothing


@pytest.mark.slow
def test_the_moved_table_is_read_on_the_npu(run_on_standin):
    # The stand-in keeps tensors on the CPU: an object on the device stands for a tensor there
    # (its `.device` is what an NPU tensor's is, torch.device("npu") with type "npu").
    source = SPIKINGJELLY_EVENT_BLOCK + (
        "\n\nclass OnDevice:\n    device = torch.device('cuda', 0)\n\n\n"
        "times = OnDevice()\n_validate_events(times, times, times, times)\nprint(_event_blocks(times, 1100))\n")
    done = run_on_standin(source)
    assert (done.returncode, done.stdout) == (0, "[512, 512, 76]\n"), done.stderr
    # as it was migrated before: the check moved, the table did not
    half = done.migrated.replace('"npu": 512', '"cuda": 512')
    done = run_on_standin(half, migrate=False)
    assert done.returncode != 0 and "KeyError: 'npu'" in done.stderr, done.stderr


@pytest.mark.parametrize("source, expected", [
    # a tuple tested for a device type; a name bound to one; `.get` with a default
    ("import torch\n_OK = ('cpu', 'cuda')\ndef f(x):\n    return x.device.type in _OK\n",
     "import torch\n_OK = ('cpu', 'npu')\ndef f(x):\n    return x.device.type in _OK\n"),
    ("import torch\ndef f(x):\n    sizes = {'cpu': 1, 'cuda': 2}\n    kind = x.device.type\n    return sizes[kind]\n",
     "import torch\ndef f(x):\n    sizes = {'cpu': 1, 'npu': 2}\n    kind = x.device.type\n    return sizes[kind]\n"),
    ("import torch\n_DT = {'cpu': torch.bfloat16, 'cuda': torch.float16}\n"
     "def f(x, device):\n    return _DT.get(device.type, torch.float32)\n",
     "import torch\nimport torch_npu  # noqa: F401\n_DT = {'cpu': torch.bfloat16, 'npu': torch.float16}\n"
     "def f(x, device):\n    return _DT.get(device.type, torch.float32)\n"),
    # its CUDA entry migrated with it (torch.cuda.manual_seed -> torch.npu.manual_seed)
    ("import torch\n_SEED = {'cpu': torch.manual_seed, 'cuda': torch.cuda.manual_seed}\n"
     "def f(x):\n    _SEED[x.device.type](0)\n",
     "import torch\nimport torch_npu  # noqa: F401\n_SEED = {'cpu': torch.manual_seed, 'npu': torch.npu.manual_seed}\n"
     "def f(x):\n    _SEED[x.device.type](0)\n"),
])
def test_tables_of_device_types_move_with_their_readers(source, expected):
    r = assert_partial_as_whole(source)
    assert r.new_text.startswith(expected)
    assert migrate_source(source, "m.py").new_text == expected
    assert [f.code for f in migrate_source(source, "m.py").findings] == []


@pytest.mark.parametrize("source, reason", [
    ("import torch\n_SIZE = {'cpu': 1, 'cuda': 2}\ndef f(x):\n    return _SIZE[x.device.type] + _SIZE['cuda']\n",
     "the module reads it otherwise too"),
    ("import torch\n_SIZE = {'cpu': 1, 'cuda': 2}\ndef f(x):\n    for k in _SIZE:\n        print(k)\n"
     "    return _SIZE[x.device.type]\n",
     "the module reads it otherwise too"),
    ("import torch\nSIZE = {'cpu': 1, 'cuda': 2}\ndef f(x):\n    return SIZE[x.device.type]\n",
     "it is a public name of the module, which other modules may read"),
    ("import torch\n_IMPL = {'cpu': _ref, \"cuda\": _fused_triton}\ndef f(x):\n    return _IMPL[x.device.type](x)\n",
     "its \"cuda\" entry, `_fused_triton`, is not known to run on the NPU"),
])
def test_a_table_whose_readers_cannot_all_move_stays_and_is_said(source, reason):
    r = migrate_source(source, "m.py")
    assert r.new_text is None
    assert [(f.code, f.span.line, f.message) for f in r.findings] == [(
        "NPU327", 2,
        f"`{source.split()[2]}` is looked up with a device type (`x.device.type`), \"npu\" on the NPU, where it has "
        f"no entry: it is left as it is because {reason}")]


@pytest.mark.parametrize("source", [
    # names the NPU already; looked up with no device type; a function's own parameter as the key
    "import torch\n_SIZE = {'cpu': 1, 'cuda': 2, 'npu': 2}\ndef f(x):\n    return _SIZE[x.device.type]\n",
    "import torch\n_SIZE = {'cpu': 1, 'cuda': 2}\ndef f(x):\n    return _SIZE[x.kind]\n",
    "import torch\n_SIZE = {'cpu': 1, 'cuda': 2}\ndef f(x, kind):\n    return _SIZE[kind]\n",
    # keyed by a device with an index, which no device type is
    "import torch\n_SIZE = {'cpu': 1, 'cuda:0': 2}\ndef f(x):\n    return _SIZE[x.device.type]\n",
])
def test_other_tables_stay_unsaid(source):
    r = migrate_source(source, "m.py", Options())
    assert (r.new_text, r.findings) == (None, [])
