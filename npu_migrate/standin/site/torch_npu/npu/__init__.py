"""torch.npu (torch_npu.npu) in npu-migrate's CPU stand-in: the device API, run on the CPU.

There are `NPU_MIGRATE_STANDIN_DEVICES` devices (the rehearsal's process count; 1 without it).
Memory statistics are zero, streams and events are ordered (the CPU runs one op after the
other), seeds and RNG states are the CPU's. A name torch_npu has and this module has not raises
an AttributeError that says so.
"""

import contextlib
import os
import time
import types

import torch

from . import amp  # noqa: F401

__all__ = [
    "is_available", "device_count", "set_device", "current_device", "synchronize", "device", "device_of",
    "get_device_name", "get_device_properties", "get_device_capability", "is_initialized", "init",
    "manual_seed", "manual_seed_all", "seed", "seed_all", "initial_seed", "get_rng_state", "set_rng_state",
    "get_rng_state_all", "set_rng_state_all", "empty_cache", "memory_allocated", "max_memory_allocated",
    "memory_reserved", "max_memory_reserved", "memory_cached", "max_memory_cached", "reset_peak_memory_stats",
    "reset_max_memory_allocated", "reset_max_memory_cached", "reset_accumulated_memory_stats", "memory_stats",
    "memory_stats_as_nested_dict", "memory_summary", "mem_get_info", "set_per_process_memory_fraction",
    "utilization", "Event", "Stream", "stream", "current_stream", "default_stream", "set_stream",
    "is_bf16_supported", "amp", "set_compile_mode", "set_option", "is_jit_compile_false",
    "get_amp_supported_dtype", "is_autocast_enabled", "get_autocast_dtype", "set_autocast_enabled",
    "set_autocast_dtype", "matmul", "conv", "config", "can_device_access_peer",
    "FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor", "IntTensor", "ShortTensor",
    "CharTensor", "ByteTensor", "BoolTensor",
]

_state = {"device": 0}


def is_available():
    return True


def _installed():
    try:
        return max(int(os.environ.get("NPU_MIGRATE_STANDIN_DEVICES", "1")), 1)
    except ValueError:
        return 1


def device_count():
    """The NPUs this process sees: ASCEND_RT_VISIBLE_DEVICES (as on an NPU) narrows the
    machine's NPUs (NPU_MIGRATE_STANDIN_DEVICES) to those it lists."""
    visible = os.environ.get("ASCEND_RT_VISIBLE_DEVICES")
    if visible is None:
        return _installed()
    count = 0
    for item in visible.split(","):
        item = item.strip()
        if not item.isdigit() or int(item) >= _installed():
            break  # as the runtime does: the list ends at the first id that is not a device
        count += 1
    return count


def _index(device=None):
    if device is None:
        return _state["device"]
    if isinstance(device, int):
        return device
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type not in ("npu", "cpu"):
            raise ValueError("Expected an npu device, but got: %s" % device)
        return _state["device"] if device.index is None else device.index
    raise TypeError("not a device: %r" % (device,))


def set_device(device):
    index = _index(device)
    if not 0 <= index < device_count():
        visible = os.environ.get("ASCEND_RT_VISIBLE_DEVICES")
        raise RuntimeError(
            "set_device: invalid device id %d: this process sees %d NPU(s)%s (the CPU stand-in has as many as "
            "the rehearsal has processes)" % (index, device_count(), "" if visible is None else
                                              " (ASCEND_RT_VISIBLE_DEVICES=%s)" % visible)
        )
    _state["device"] = index


def current_device():
    return _state["device"]


def synchronize(device=None):
    pass


def is_initialized():
    return True


def init():
    pass


class device:
    """`with torch.npu.device(1):` selects a device for the block."""

    def __init__(self, device):
        self.index = _index(device) if device is not None else None
        self.previous = None

    def __enter__(self):
        self.previous = _state["device"]
        if self.index is not None and self.index >= 0:
            set_device(self.index)
        return self

    def __exit__(self, *exc):
        _state["device"] = self.previous
        return False


class device_of(device):
    def __init__(self, obj):
        super().__init__(None)


def get_device_name(device=None):
    return "Ascend910B (npu-migrate CPU stand-in)"


def get_device_properties(device=None):
    _index(device)
    return types.SimpleNamespace(
        name=get_device_name(device), total_memory=mem_get_info()[1], multi_processor_count=1, cube_core_num=1,
        vector_core_num=1, L2_cache_size=0, major=0, minor=0,
    )


def get_device_capability(device=None):
    return None  # torch_npu returns None too


def can_device_access_peer(device, peer):
    return True


def manual_seed(seed):
    # The NPU's generator is the CPU's here (not torch.manual_seed: it calls this function).
    torch.default_generator.manual_seed(int(seed))


manual_seed_all = manual_seed


def seed():
    torch.default_generator.seed()


seed_all = seed


def _is_in_bad_fork():
    return False


def initial_seed():
    return torch.initial_seed()


def get_rng_state(device="npu"):
    return torch.get_rng_state()


def set_rng_state(new_state, device="npu"):
    torch.set_rng_state(new_state)


def get_rng_state_all():
    return [torch.get_rng_state() for _ in range(device_count())]


def set_rng_state_all(new_states):
    if new_states:
        torch.set_rng_state(new_states[0])


def empty_cache():
    pass


def _zero(device=None):
    return 0


memory_allocated = max_memory_allocated = memory_reserved = max_memory_reserved = _zero
memory_cached = max_memory_cached = utilization = _zero


def reset_peak_memory_stats(device=None):
    pass


reset_max_memory_allocated = reset_max_memory_cached = reset_accumulated_memory_stats = reset_peak_memory_stats


def memory_stats(device=None):
    return {}


memory_stats_as_nested_dict = memory_stats


def memory_summary(device=None, abbreviated=False):
    return "npu-migrate CPU stand-in: no NPU memory statistics\n"


def mem_get_info(device=None):
    try:
        pages, free = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_AVPHYS_PAGES")
        size = os.sysconf("SC_PAGE_SIZE")
        return free * size, pages * size
    except (ValueError, OSError, AttributeError):
        return 32 << 30, 64 << 30


def set_per_process_memory_fraction(fraction, device=None):
    pass


def is_bf16_supported():
    return True


class Event:
    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        self.enable_timing = enable_timing
        self.time = None

    def record(self, stream=None):
        self.time = time.perf_counter()

    def wait(self, stream=None):
        pass

    def query(self):
        return True

    def synchronize(self):
        pass

    def elapsed_time(self, end_event):
        if self.time is None or end_event.time is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        return (end_event.time - self.time) * 1000.0


class Stream:
    def __init__(self, device=None, priority=0, **kwargs):
        self.device = torch.device("npu", _index(device))
        self.priority = priority

    def wait_event(self, event):
        pass

    def wait_stream(self, stream):
        pass

    def record_event(self, event=None):
        event = event or Event()
        event.record(self)
        return event

    def query(self):
        return True

    def synchronize(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


_default = {}


def current_stream(device=None):
    return _default.setdefault(_index(device), Stream(device))


default_stream = current_stream


def set_stream(stream):
    pass


@contextlib.contextmanager
def stream(stream):
    yield stream


def set_compile_mode(jit_compile=False):
    pass


def set_option(option):
    pass


def is_jit_compile_false():
    return True


def get_amp_supported_dtype():
    return [torch.float16, torch.bfloat16]


def is_autocast_enabled():
    return torch.is_autocast_enabled("cpu")


def set_autocast_enabled(enabled):
    torch.set_autocast_enabled("cpu", enabled)


def get_autocast_dtype():
    return torch.get_autocast_dtype("cpu")


def set_autocast_dtype(dtype):
    torch.set_autocast_dtype("cpu", dtype)


matmul = types.SimpleNamespace(allow_hf32=False)
conv = types.SimpleNamespace(allow_hf32=True)
config = types.SimpleNamespace(allow_internal_format=False)

FloatTensor, DoubleTensor, HalfTensor, BFloat16Tensor = (
    torch.FloatTensor, torch.DoubleTensor, torch.HalfTensor, torch.BFloat16Tensor)
LongTensor, IntTensor, ShortTensor, CharTensor, ByteTensor, BoolTensor = (
    torch.LongTensor, torch.IntTensor, torch.ShortTensor, torch.CharTensor, torch.ByteTensor, torch.BoolTensor)


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    raise AttributeError(
        "module 'torch.npu' has no attribute %r in npu-migrate's CPU stand-in (it provides: %s)"
        % (name, ", ".join(__all__[:12]) + ", ...")
    )
