"""How the stand-in maps the `npu` device to the CPU.

1. `torch.utils.rename_privateuse1_backend("npu")` makes `torch.device("npu:0")` and the string
   `"npu"` valid device values, with `.type == "npu"` as on an NPU, so the script takes its NPU
   code paths. Alone it is a trap: every allocation on that device then fails.
2. So a torch function mode (active from `import torch_npu` on, in the main thread and, through
   torch's thread-local state, in autograd's threads) replaces every `npu` device given to a
   torch function or tensor method by the CPU: factories' `device=`, `Tensor.to`, `new_*`, ...
   `Module.to` and `.npu()` end in `Tensor.to`, so they are covered too.
3. What is not a torch function is wrapped: `torch.load(map_location=...)`, `torch.Generator`,
   `torch.autocast`, `torch.amp.GradScaler`, DDP (its `device_ids` are dropped for a CPU module),
   `init_process_group`/`new_group` (`hccl` runs on gloo, and `get_backend()` still says `hccl`)
   and `barrier(device_ids=...)`.
"""

import functools
import re

import sys

import torch
import torch.amp
import torch.amp.autocast_mode
import torch.distributed as dist
import torch.nn.parallel
import torch.overrides
from torch._utils import _get_available_device_type

_DEVICE_NAMES = ["npu"]
_cuda_too = False
_CPU = torch.device("cpu")
# Whether this process has put anything on an npu device (rehearse: a job that trained without
# ever doing so ran on the CPU, as it would on the NPU machine, which it bills for nothing)
used = [False]


def _is_npu_text(value):
    pattern = r"^(%s)(:\d+)?$" % "|".join(_DEVICE_NAMES)
    return isinstance(value, str) and re.match(pattern, value.strip()) is not None


def cpu(value):
    """`value` with any npu device (a torch.device, "npu", "npu:1") replaced by the CPU."""
    if isinstance(value, torch.device):
        if value.type in _DEVICE_NAMES:
            used[0] = True
            return _CPU
        return value
    if _is_npu_text(value):
        used[0] = True
        return "cpu"
    return value


def _is_index(value):
    """A bare device index (`x.to(1)`, `device=0`): the current accelerator's device, an NPU here."""
    return isinstance(value, int) and not isinstance(value, bool)


def cpu_or_index(value):
    """cpu(), and a bare device index is the CPU too."""
    if _is_index(value):
        used[0] = True
        return _CPU
    return cpu(value)


def _device_type(value):
    if isinstance(value, torch.device):
        value = value.type
    if isinstance(value, str) and _is_npu_text(value):
        return "cpu"
    return value


class NpuOnCpu(torch.overrides.TorchFunctionMode):
    """Every npu device handed to a torch function becomes the CPU."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name == "pin_memory" and args and isinstance(args[0], torch.Tensor):
            return args[0]  # page-locked host memory serves copies to an NPU; here there is none to serve
        if "device" in kwargs:
            kwargs["device"] = cpu_or_index(kwargs["device"])
        if args and name in ("to", "to_empty"):
            # x.to("npu:0"), x.to(1): a string or an int is a device only here (args[0] is the tensor)
            args = args[:1] + tuple(cpu_or_index(arg) for arg in args[1:])
        elif any(isinstance(arg, torch.device) for arg in args):
            args = tuple(cpu(arg) if isinstance(arg, torch.device) else arg for arg in args)
        return func(*args, **kwargs)


def _wrap(owner, name, change):
    original = getattr(owner, name)
    if getattr(original, "_npu_migrate_standin", False):
        return

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        args, kwargs = change(args, kwargs)
        return original(*args, **kwargs)

    wrapper._npu_migrate_standin = True
    setattr(owner, name, wrapper)


def _map_location(location):
    if isinstance(location, dict):
        return {key: cpu(value) for key, value in location.items()}
    return cpu(location)


def _load_args(args, kwargs):
    if "map_location" in kwargs:
        kwargs["map_location"] = _map_location(kwargs["map_location"])
    elif len(args) > 1:
        args = (args[0], _map_location(args[1])) + tuple(args[2:])
    return args, kwargs


_asked = {}  # the backend name the script asked for, which dist.get_backend() gives back


def _backend(value):
    if not isinstance(value, str):
        return value
    names = ("hccl", "nccl") if _cuda_too else ("hccl",)
    parts = [part.split(":")[-1].strip().lower() for part in value.split(",")]
    for part in parts:
        if part in names:
            _asked["backend"] = part
            return "gloo"  # "hccl", "npu:hccl,cpu:gloo"
    return value


def _wrap_get_backend(owner):
    original = getattr(owner, "get_backend", None)
    if original is None or getattr(original, "_npu_migrate_standin", False):
        return

    @functools.wraps(original)
    def get_backend(*args, **kwargs):
        found = original(*args, **kwargs)
        return _asked.get("backend", found) if found == "gloo" else found

    get_backend._npu_migrate_standin = True
    owner.get_backend = get_backend


def _process_group_args(args, kwargs):
    if "backend" in kwargs:
        kwargs["backend"] = _backend(kwargs["backend"])
    elif args:
        args = (_backend(args[0]),) + tuple(args[1:])
    if "device_id" in kwargs:
        kwargs["device_id"] = None  # bound to an accelerator; gloo on the CPU has none
    return args, kwargs


def _new_group_args(args, kwargs):
    if "backend" in kwargs:
        kwargs["backend"] = _backend(kwargs["backend"])
    elif len(args) > 2:
        args = tuple(args[:2]) + (_backend(args[2]),) + tuple(args[3:])
    return args, kwargs


def _barrier_args(args, kwargs):
    kwargs.pop("device_ids", None)
    return args, kwargs


def _ddp_args(args, kwargs):
    module = args[1] if len(args) > 1 else kwargs.get("module")
    on_cpu = module is not None and all(p.device.type == "cpu" for p in module.parameters())
    if on_cpu:
        for position, name in ((2, "device_ids"), (3, "output_device")):
            if len(args) > position:
                args = tuple(args[:position]) + (None,) + tuple(args[position + 1:])
            kwargs.pop(name, None)
    return args, kwargs


def _data_parallel_args(args, kwargs):
    """torch_npu has no nn.DataParallel: over several NPUs it fails on the NPU, so here too."""
    device_ids = args[2] if len(args) > 2 else kwargs.get("device_ids")
    count = len(device_ids) if device_ids is not None else torch.npu.device_count()
    if count > 1 and not _cuda_too and _get_available_device_type() == "npu":
        raise RuntimeError(
            "torch.nn.DataParallel over %d NPUs: not supported on Ascend NPUs (npu-migrate reports it as NPU305); "
            "use DistributedDataParallel with one process per NPU" % count
        )
    return args, kwargs


def _single_device_data_parallel():
    """On one NPU, DataParallel just runs the module there; here it runs it on the CPU."""
    init = torch.nn.DataParallel.__init__
    if getattr(init, "_npu_migrate_single", False):
        return

    @functools.wraps(init)
    def wrapper(self, *args, **kwargs):
        init(self, *args, **kwargs)
        if self.device_ids and _get_available_device_type() == "npu":
            self.device_ids = []  # forward() then calls the module as it is

    wrapper._npu_migrate_single = True
    wrapper._npu_migrate_standin = True
    torch.nn.DataParallel.__init__ = wrapper


def _accelerator_api(npu_module):
    """torch.accelerator sees the registered npu backend; its device and stream functions are
    torch.npu's (torch's own ask the C++ backend, which the stand-in has not: torch.compile's
    tracing asks for the current stream, and every compiled model failed in a rehearsal)."""
    acc = getattr(torch, "accelerator", None)
    if acc is None:
        return
    for name, function in (("current_device_index", npu_module.current_device),
                           ("current_device_idx", npu_module.current_device),
                           ("set_device_index", npu_module.set_device), ("set_device_idx", npu_module.set_device),
                           ("synchronize", npu_module.synchronize),
                           ("current_stream", npu_module.current_stream), ("set_stream", npu_module.set_stream),
                           ("device_index", _device_index(npu_module))):
        if hasattr(acc, name):
            setattr(acc, name, function)


def _device_index(npu_module):
    """torch.accelerator.device_index(i): torch.npu's current device is i inside the block."""
    import contextlib

    @contextlib.contextmanager
    def device_index(device, /):
        if device is None:
            yield
            return
        before = npu_module.current_device()
        npu_module.set_device(device)
        try:
            yield
        finally:
            npu_module.set_device(before)

    return device_index


def _autocast_args(args, kwargs):
    if "device_type" in kwargs:
        kwargs["device_type"] = _device_type(kwargs["device_type"])
    elif len(args) > 1:
        args = (args[0], _device_type(args[1])) + tuple(args[2:])
    return args, kwargs


def _scaler_args(args, kwargs):
    if "device" in kwargs:
        kwargs["device"] = _device_type(kwargs["device"])
    elif len(args) > 1 and isinstance(args[1], (str, torch.device)):
        args = (args[0], _device_type(args[1])) + tuple(args[2:])
    return args, kwargs


def _first_device_type(args, kwargs):
    if "device_type" in kwargs:
        kwargs["device_type"] = _device_type(kwargs["device_type"])
    elif args and isinstance(args[0], (str, torch.device)):
        args = (_device_type(args[0]),) + tuple(args[1:])
    return args, kwargs


class _GeneratorMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, _REAL_GENERATOR)

    def __subclasscheck__(cls, sub):
        return issubclass(sub, _REAL_GENERATOR)


_REAL_GENERATOR = torch.Generator


class Generator(metaclass=_GeneratorMeta):
    """torch.Generator(device="npu") makes a CPU generator (isinstance still works)."""

    def __new__(cls, device="cpu"):
        return _REAL_GENERATOR(device=cpu(device))


def _push_mode():
    if not any(isinstance(mode, NpuOnCpu) for mode in torch.overrides._get_current_function_mode_stack()):
        torch.overrides._push_mode(NpuOnCpu())


def _every_new_thread_too():
    """Torch function modes are per thread: each thread started from now on gets the mode."""
    import threading

    original = threading.Thread._bootstrap_inner
    if getattr(original, "_npu_migrate_standin", False):
        return

    def bootstrap_inner(self):
        _push_mode()
        original(self)

    bootstrap_inner._npu_migrate_standin = True
    threading.Thread._bootstrap_inner = bootstrap_inner


def _register_hooks():
    """Without hooks for the renamed backend, torch code that asks which accelerator the machine
    has (dist.barrier(), FSDP) fails. These say: built, but not available, so torch uses the CPU."""
    acc = getattr(torch._C, "_acc", None)
    if acc is None or not hasattr(acc, "PrivateUse1Hooks"):
        return

    class Hooks(acc.PrivateUse1Hooks):
        def is_available(self):
            return False

        def has_primary_context(self, dev_id):
            return False

        def is_built(self):
            return True

    try:
        acc.register_python_privateuseone_hook(Hooks())
    except RuntimeError:
        pass  # registered already


def install(npu_module):
    if torch._C._get_privateuse1_backend_name() == "privateuseone":
        torch.utils.rename_privateuse1_backend("npu")
    if getattr(torch, "npu", None) is not npu_module:
        torch._register_device_module("npu", npu_module)
        _register_hooks()
    sys.modules["torch.npu.amp"] = npu_module.amp
    if not hasattr(torch.Tensor, "npu"):
        _tensor_and_module_methods()
    _push_mode()
    _every_new_thread_too()
    _accelerator_api(npu_module)

    _wrap(torch, "load", _load_args)
    if hasattr(torch, "set_default_device"):  # its device context sits below the mode: map first
        _wrap(torch, "set_default_device", lambda args, kwargs: (tuple(cpu(a) for a in args),
                                                                 {k: cpu(v) for k, v in kwargs.items()}))
    torch.Generator = Generator
    _wrap(torch.amp.autocast_mode.autocast, "__init__", _autocast_args)
    _wrap(torch.amp.GradScaler, "__init__", _scaler_args)
    for name in ("is_autocast_enabled", "get_autocast_dtype", "set_autocast_enabled", "set_autocast_dtype"):
        if hasattr(torch, name):
            _wrap(torch, name, _first_device_type)
    if dist.is_available():
        import torch.distributed.distributed_c10d as c10d

        for owner in (dist, c10d):
            _wrap(owner, "init_process_group", _process_group_args)
            _wrap(owner, "new_group", _new_group_args)
            _wrap(owner, "barrier", _barrier_args)
            _wrap_get_backend(owner)
        dist.is_hccl_available = lambda: True
        if not hasattr(dist.Backend, "HCCL"):
            dist.Backend.HCCL = "hccl"
        _wrap(torch.nn.parallel.DistributedDataParallel, "__init__", _ddp_args)
    _wrap(torch.nn.DataParallel, "__init__", _data_parallel_args)
    _single_device_data_parallel()


def _tensor_and_module_methods():
    def tensor_npu(self, device=None, non_blocking=False, memory_format=torch.preserve_format):
        used[0] = True
        return self.to(_CPU, non_blocking=non_blocking, memory_format=memory_format)

    def module_npu(self, device=None):
        used[0] = True
        return self.to(_CPU)

    def is_npu(self):
        return False  # the tensor lives on the CPU, the NPU's stand-in

    def storage_npu(self, device=None, non_blocking=False):
        used[0] = True
        return self  # storages stay where they are: on the CPU

    torch.Tensor.npu = tensor_npu
    torch.Tensor.is_npu = property(is_npu)
    torch.nn.Module.npu = module_npu
    for storage in (torch.UntypedStorage, torch.TypedStorage):
        storage.npu = storage_npu
        storage.is_npu = property(is_npu)


def map_cuda_too():
    """For transfer_to_npu: `cuda` devices and the `nccl` backend are the stand-in's too."""
    global _cuda_too
    _cuda_too = True
    if "cuda" not in _DEVICE_NAMES:
        _DEVICE_NAMES.append("cuda")
