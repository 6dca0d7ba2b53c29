"""`from torch_npu.contrib import transfer_to_npu` in npu-migrate's CPU stand-in.

Huawei's module redirects torch.cuda to torch.npu at run time; here the CUDA names lead to the
stand-in's torch.npu (so to the CPU): torch.cuda.<name> for every name torch.npu has,
Tensor/Module.cuda(), `cuda` device strings and the `nccl` backend.
"""

import torch

import torch_npu  # noqa: F401
from torch_npu import _patch, npu

for _name in npu.__all__:
    setattr(torch.cuda, _name, getattr(npu, _name))
torch.cuda.amp = npu.amp
torch.Tensor.cuda = torch.Tensor.npu
torch.nn.Module.cuda = torch.nn.Module.npu
torch.Tensor.is_cuda = torch.Tensor.is_npu
_patch.map_cuda_too()
