# npu-migrate: distributed helpers (generated, checksum 000000000000: a later run of npu-migrate updates this file unless you edit it)
"""Data-parallel training on several NPUs, for the scripts `npu-migrate --distributed` converted.

Start one process per NPU with the launch script written beside the training script
(run_distributed_<script>.sh: torchrun or torch_npu_run, which set RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR and MASTER_PORT). Ascend's own launch scripts and ModelArts set RANK_ID, RANK_SIZE
and DEVICE_ID instead: both work, and so does a plain `python train.py` (one process).
"""

import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch_npu  # noqa: F401  (torch.npu)
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data.distributed import DistributedSampler

VERSION = 2  # of these helpers: 1 was a block pasted into each script
# How long a process waits for the others to join (a launcher that started too few ends with an
# error instead of a hang); NPU_MIGRATE_JOIN_TIMEOUT in seconds overrides it.
JOIN_TIMEOUT = timedelta(seconds=float(os.environ.get("NPU_MIGRATE_JOIN_TIMEOUT", 600)))


def distributed_setup():
    """Join the HCCL process group on this process's NPU."""
    env = os.environ
    env.setdefault("RANK", env.get("RANK_ID", "0"))
    env.setdefault("WORLD_SIZE", env.get("RANK_SIZE", "1"))
    env.setdefault("LOCAL_RANK", env.get("DEVICE_ID", env["RANK"]))
    env.setdefault("MASTER_ADDR", env.get("VC_WORKER_HOSTS", "127.0.0.1").split(",")[0])
    env.setdefault("MASTER_PORT", "29500")
    torch.npu.set_device(int(env["LOCAL_RANK"]))
    dist.init_process_group("hccl", timeout=JOIN_TIMEOUT)


def distributed_cleanup():
    if dist.is_initialized():
        dist.destroy_process_group()


def is_main_process():
    """Rank 0 (or no process group): the process that writes checkpoints, logs and samples."""
    return not dist.is_initialized() or dist.get_rank() == 0


def wait_for_main_process():
    """Every process waits here until all have arrived (a file rank 0 wrote is complete then)."""
    if dist.is_initialized():
        dist.barrier()


def distributed_model(model):
    """`model`, on this process's NPU, in DistributedDataParallel (which copies rank 0's
    parameters and buffers to every process)."""
    on_npu = any(p.device.type == "npu" for p in model.parameters())
    device_ids = [int(os.environ["LOCAL_RANK"])] if on_npu else None
    return DistributedDataParallel(model, device_ids=device_ids)


def unwrap_model(model):
    """The model inside DistributedDataParallel (its state_dict keys have no `module.`)."""
    return model.module if isinstance(model, DistributedDataParallel) else model


def distributed_sampler(dataset, shuffle):
    """Each process reads its own part of `dataset` (shuffled anew each epoch if `shuffle`)."""
    return DistributedSampler(dataset, shuffle=bool(shuffle))


def distributed_loader_args(dataset, kwargs):
    """DataLoader keyword arguments with their `shuffle` moved to a DistributedSampler."""
    kwargs = dict(kwargs)
    kwargs["sampler"] = distributed_sampler(dataset, kwargs.pop("shuffle", False))
    return kwargs


def set_sampler_epoch(loader, epoch):
    """DistributedSampler.set_epoch: another shuffle in each epoch."""
    sampler = getattr(loader, "sampler", None)
    if hasattr(sampler, "set_epoch"):
        sampler.set_epoch(epoch)


def rank_shard(data, dim=0):
    """This process's contiguous part of a tensor batched along `dim` (a language model's
    batchified corpus): world_size equal parts, the remainder dropped."""
    if not dist.is_initialized():
        return data
    size = data.size(dim) // dist.get_world_size()
    return data.narrow(dim, dist.get_rank() * size, size)
