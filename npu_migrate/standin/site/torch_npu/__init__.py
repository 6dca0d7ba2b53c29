"""npu-migrate's CPU stand-in for torch_npu: NOT Huawei's torch_npu.

`npu-migrate rehearse` puts this folder on PYTHONPATH so a migrated script runs on a machine
without an NPU: `import torch_npu` registers the `npu` device name and the `torch.npu` namespace,
and every `npu`/`npu:N` device becomes the CPU (see `_patch.py`). Anything of torch_npu this
stand-in does not provide raises an AttributeError that says so, rather than pretending.
"""

import torch

from . import _patch, npu  # noqa: F401  (npu: torch_npu.npu, also registered as torch.npu)

_patch.install(npu)

from . import _record  # noqa: E402

_record.install()  # in a rehearsal: what the job's distributed checks compare (see _record.py)

from . import optim  # noqa: E402,F401

__version__ = torch.__version__.split("+")[0] + "+npu_migrate_standin"
STANDIN = True  # lets a script or a test tell the stand-in from the real package


def npu_format_cast(tensor, acl_format):
    """Internal formats do not exist on the CPU: the tensor is returned as it is."""
    return tensor


def npu_format_cast_(tensor, acl_format):
    return tensor


def get_npu_format(tensor):
    return 2  # ACL_FORMAT_ND


def __getattr__(name):
    raise AttributeError(
        "module 'torch_npu' has no attribute %r in npu-migrate's CPU stand-in (rehearse runs "
        "torch_npu's device API on the CPU, not its NPU-only operators)" % name
    )
