# >>> npu-migrate: distributed >>>
# Data-parallel training on several NPUs, added by `npu-migrate --distributed` (running it again
# updates this block). Start one process per NPU with LAUNCH_SCRIPT (torchrun or
# torch_npu_run: they set RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT). Ascend's own
# launch scripts and ModelArts set RANK_ID, RANK_SIZE and DEVICE_ID instead: both work, and so
# does a plain `python SCRIPT` (one process).
def distributed_setup():
    """Join the HCCL process group on this process's NPU; only rank 0 prints from now on."""
    import builtins
    import os

    import torch
    import torch.distributed as dist

    env = os.environ
    env.setdefault("RANK", env.get("RANK_ID", "0"))
    env.setdefault("WORLD_SIZE", env.get("RANK_SIZE", "1"))
    env.setdefault("LOCAL_RANK", env.get("DEVICE_ID", env["RANK"]))
    env.setdefault("MASTER_ADDR", env.get("VC_WORKER_HOSTS", "127.0.0.1").split(",")[0])
    env.setdefault("MASTER_PORT", "29500")
    torch.npu.set_device(int(env["LOCAL_RANK"]))
    dist.init_process_group("hccl")
    if dist.get_rank() != 0:
        print_everywhere = builtins.print

        def print_on_rank0(*args, force=False, **kwargs):
            if force:
                print_everywhere(*args, **kwargs)

        builtins.print = print_on_rank0


def is_main_process():
    """Rank 0 (or no process group): the process that saves checkpoints and writes log files."""
    import torch.distributed as dist

    return not dist.is_initialized() or dist.get_rank() == 0


def distributed_model(model):
    """`model`, on this process's NPU, in DistributedDataParallel."""
    import os

    from torch.nn.parallel import DistributedDataParallel

    on_npu = any(p.device.type == "npu" for p in model.parameters())
    device_ids = [int(os.environ["LOCAL_RANK"])] if on_npu else None
    return DistributedDataParallel(model, device_ids=device_ids)


def unwrap_model(model):
    """The model inside DistributedDataParallel (its state_dict keys have no `module.`)."""
    from torch.nn.parallel import DistributedDataParallel

    return model.module if isinstance(model, DistributedDataParallel) else model


def distributed_sampler(dataset, shuffle):
    """Each process reads its own part of `dataset` (shuffled anew each epoch if `shuffle`)."""
    from torch.utils.data.distributed import DistributedSampler

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


def distributed_cleanup():
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()
