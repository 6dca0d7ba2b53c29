"""What a rehearsal checks a distributed job for (issue 26.12), recorded by each process.

With NPU_MIGRATE_REHEARSAL_RECORD naming a folder, each process writes there, at exit,
`<rank>-<pid>.json` (and, as they happen, its writes and joining a group to
`<rank>-<pid>.events`, which a process ended by SIGTERM leaves too):

* `params`: for each model put in DistributedDataParallel, a sha256 of its parameters at exit
  (after training every rank must hold the same ones);
* `samples`: for each DistributedSampler, the indexes this rank drew in each epoch and the data
  set's length (ranks must read disjoint parts, up to the sampler's padding);
* `distributed`: whether it joined a process group (the checks are for distributed jobs);
* `writes`: the files this process opened for writing or gave torch.save (each output file must
  have one writer).

A recorder, not a check: `npu_migrate.rehearse` compares the processes' records.
"""

import atexit
import builtins
import functools
import hashlib
import json
import os

import torch

RECORD_VAR = "NPU_MIGRATE_REHEARSAL_RECORD"
_models = []  # the parameter lists of the wrapped models (kept: a model local to main() is gone at exit)
_samplers = []  # [dataset length, [indexes of epoch 0], [indexes of epoch 1], ...] per sampler
_writes = set()
_joined = []  # [True] once the process joined a process group: a distributed job
_open = builtins.open  # the real one (the recorder's own files are not the job's)


def _event(kind, value):
    """Written as it happens, one JSON line: a process that SIGTERM ends (the default action,
    after the job's own handler) runs no atexit, and its writes still count."""
    folder = os.environ.get(RECORD_VAR)
    rank = os.environ.get("RANK", "0")
    with _open(os.path.join(folder, "%s-%d.events" % (rank, os.getpid())), "a") as f:
        f.write(json.dumps({"rank": int(rank) if rank.isdigit() else rank, kind: value}) + "\n")


def _digest(parameters):
    h = hashlib.sha256()
    for p in parameters:
        h.update(p.detach().to("cpu").contiguous().numpy().tobytes())
    return h.hexdigest()


def _wrap_ddp():
    ddp = torch.nn.parallel.DistributedDataParallel
    init = ddp.__init__

    @functools.wraps(init)
    def wrapper(self, *args, **kwargs):
        init(self, *args, **kwargs)
        _models.append(list(self.module.parameters()))

    wrapper._npu_migrate_standin = True
    ddp.__init__ = wrapper


def _wrap_process_group():
    import torch.distributed as dist

    init = dist.init_process_group

    @functools.wraps(init)
    def wrapper(*args, **kwargs):
        _joined.append(True)
        _event("distributed", True)
        return init(*args, **kwargs)

    dist.init_process_group = wrapper


def _wrap_sampler():
    from torch.utils.data.distributed import DistributedSampler

    original = DistributedSampler.__iter__

    @functools.wraps(original)
    def iterate(self):
        indexes = list(original(self))
        record = getattr(self, "_npu_migrate_record", None)
        if record is None:
            record = self._npu_migrate_record = [len(self.dataset)]
            _samplers.append(record)
        record.append(indexes)
        return iter(indexes)

    DistributedSampler.__iter__ = iterate


def _wrap_open():
    original = builtins.open

    @functools.wraps(original)
    def recording_open(file, mode="r", *args, **kwargs):
        if isinstance(mode, str) and any(c in mode for c in "wax+") and isinstance(file, (str, bytes, os.PathLike)):
            _written(file)
        return original(file, mode, *args, **kwargs)

    builtins.open = recording_open

    save = torch.save  # a path given to torch.save is opened by torch's C++ zip writer, not open()

    @functools.wraps(save)
    def recording_save(obj, f, *args, **kwargs):
        if isinstance(f, (str, bytes, os.PathLike)):
            _written(f)
        return save(obj, f, *args, **kwargs)

    torch.save = recording_save


def _written(file):
    path = os.path.abspath(os.fsdecode(file))
    if path not in _writes:
        _writes.add(path)
        _event("write", path)


def _save(folder):
    rank = os.environ.get("RANK", "0")
    record = {"rank": int(rank) if rank.isdigit() else rank, "pid": os.getpid(), "distributed": bool(_joined),
              "params": [_digest(p) for p in _models], "samples": _samplers, "writes": sorted(_writes)}
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "%s-%d.json" % (rank, os.getpid()))
    with _open(path + ".tmp", "w") as f:
        json.dump(record, f)
    os.replace(path + ".tmp", path)


def install():
    folder = os.environ.get(RECORD_VAR)
    if not folder:
        return
    os.makedirs(folder, exist_ok=True)
    _wrap_process_group()
    _wrap_ddp()
    _wrap_sampler()
    _wrap_open()
    atexit.register(_save, folder)
