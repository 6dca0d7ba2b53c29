"""What a rehearsal checks a distributed PyTorch job for (issue 26.12), recorded by each process.

The framework-independent part (files written, programs started, joining a group, the events
file and the summary at exit) is `_npu_migrate_record` (installed by sitecustomize); this adds,
to each process's summary `<rank>-<pid>.json`:

* `params`: for each model put in DistributedDataParallel, a sha256 of its parameters at exit
  (after training every rank must hold the same ones);
* `steps`: for each such model, its forward calls with gradients on (its training steps: each
  ends in collectives, so a rank that takes fewer leaves the others waiting in one);
* `samples`: for each DistributedSampler, the indexes this rank drew in each epoch and the data
  set's length (ranks must read disjoint parts, up to the sampler's padding);
* `shards`: for each call of the generated `rank_shard` (npu_migrate_distributed.py), the
  length of what it cut and the [start, stop) this rank kept (ranks must keep disjoint parts);
* `optimizer_steps`: the steps of every torch.optim optimizer, and `npu`: whether the process put
  anything on an npu device (one that trained and never did ran on the CPU);

and records a group joined and the paths given to torch.save (its C++ writer opens no Python
file, so the audit hook does not see them).
"""

import functools
import hashlib
import os
import sys

import torch

import _npu_migrate_record as record

_models = []  # the parameter lists of the wrapped models (kept: a model local to main() is gone at exit)
_steps = []  # per wrapped model, its forward calls with gradients on (counted as each starts)
_samplers = []  # [dataset length, [indexes of epoch 0], [indexes of epoch 1], ...] per sampler
_shards = []  # [length, start, stop] per rank_shard call
_optimizer_steps = [0]


def _digest(parameters):
    h = hashlib.sha256()
    for p in parameters:
        h.update(p.detach().to("cpu").contiguous().numpy().tobytes())
    return h.hexdigest()


def _wrap_ddp():
    ddp = torch.nn.parallel.DistributedDataParallel
    init = ddp.__init__

    forward = ddp.forward

    @functools.wraps(init)
    def wrapper(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self._npu_migrate_model = len(_models)
        _models.append(list(self.module.parameters()))
        _steps.append(0)

    @functools.wraps(forward)
    def counting_forward(self, *args, **kwargs):
        model = getattr(self, "_npu_migrate_model", None)
        if model is not None and torch.is_grad_enabled():
            _steps[model] += 1
        return forward(self, *args, **kwargs)

    wrapper._npu_migrate_standin = True
    counting_forward._npu_migrate_standin = True
    ddp.__init__ = wrapper
    ddp.forward = counting_forward


def _wrap_process_group():
    import torch.distributed as dist

    init = dist.init_process_group

    @functools.wraps(init)
    def wrapper(*args, **kwargs):
        record.joined()
        return init(*args, **kwargs)

    dist.init_process_group = wrapper


def _wrap_sampler():
    from torch.utils.data.distributed import DistributedSampler

    original = DistributedSampler.__iter__

    @functools.wraps(original)
    def iterate(self):
        indexes = list(original(self))
        drawn = getattr(self, "_npu_migrate_record", None)
        if drawn is None:
            drawn = self._npu_migrate_record = [len(self.dataset)]
            _samplers.append(drawn)
        drawn.append(indexes)
        return iter(indexes)

    DistributedSampler.__iter__ = iterate


def _wrap_save():
    save = torch.save

    @functools.wraps(save)
    def recording_save(obj, f, *args, **kwargs):
        if isinstance(f, (str, bytes, os.PathLike)):
            record.written(f)
        return save(obj, f, *args, **kwargs)

    torch.save = recording_save


def _count_optimizer_steps():
    from torch.optim.optimizer import register_optimizer_step_post_hook

    def counted(optimizer, args, kwargs):
        _optimizer_steps[0] += 1

    register_optimizer_step_post_hook(counted)


def wrap_rank_shard(module):
    """Record what the generated `rank_shard` kept (called when npu_migrate_distributed is
    imported, before the script's `from ... import rank_shard` binds it)."""
    original = getattr(module, "rank_shard", None)
    if original is None or getattr(original, "_npu_migrate_standin", False):
        return

    @functools.wraps(original)
    def recording_rank_shard(data, dim=0, *args, **kwargs):
        kept = original(data, dim, *args, **kwargs)
        if kept is not data and isinstance(data, torch.Tensor) and isinstance(kept, torch.Tensor) \
                and kept.untyped_storage().data_ptr() == data.untyped_storage().data_ptr():
            # narrow() shares storage: the offset of the kept part in the whole, along `dim`
            start = (kept.storage_offset() - data.storage_offset()) // max(data.stride(dim), 1)
            _shards.append([data.size(dim), start, start + kept.size(dim)])
        return kept

    recording_rank_shard._npu_migrate_standin = True
    module.rank_shard = recording_rank_shard


def install():
    record.install()
    if not os.environ.get(record.RECORD_VAR):
        return
    _wrap_process_group()
    _wrap_ddp()
    _wrap_sampler()
    _wrap_save()
    _count_optimizer_steps()
    from . import _patch

    record.contribute(lambda: {"torch": True, "params": [_digest(p) for p in _models], "steps": _steps,
                               "samples": _samplers, "shards": _shards, "optimizer_steps": _optimizer_steps[0],
                               "npu": _patch.used[0]})
    for name, module in list(sys.modules.items()):  # imported before torch_npu was
        if name.rpartition(".")[2] == "npu_migrate_distributed":
            wrap_rank_shard(module)
