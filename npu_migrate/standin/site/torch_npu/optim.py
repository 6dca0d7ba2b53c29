"""torch_npu's fused optimizers, as the plain torch optimizers they fuse (CPU stand-in)."""

import torch

NpuFusedSGD = torch.optim.SGD
NpuFusedAdam = torch.optim.Adam
NpuFusedAdamW = torch.optim.AdamW
NpuFusedAdadelta = torch.optim.Adadelta
NpuFusedRMSprop = torch.optim.RMSprop
