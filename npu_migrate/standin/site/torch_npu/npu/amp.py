"""torch.npu.amp / torch_npu.npu.amp in npu-migrate's CPU stand-in: CPU autocast and scaler."""

import torch

__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd"]


class autocast(torch.autocast):
    """torch_npu's autocast (float16 by default), run by the CPU's autocast."""

    def __init__(self, enabled=True, dtype=torch.float16, cache_enabled=True):
        super().__init__("cpu", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(torch.amp.GradScaler):
    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000,
                 enabled=True, dynamic=True):
        super().__init__("cpu", init_scale=init_scale, growth_factor=growth_factor,
                         backoff_factor=backoff_factor, growth_interval=growth_interval, enabled=enabled)


def custom_fwd(fwd=None, *, cast_inputs=None):
    return torch.amp.custom_fwd(fwd, device_type="cpu", cast_inputs=cast_inputs)


def custom_bwd(bwd=None):
    return torch.amp.custom_bwd(bwd, device_type="cpu")
