"""A CPU stand-in for the Ascend stack, for `npu-migrate rehearse` only.

`SITE` is a folder that is put first on `PYTHONPATH` of a rehearsed script (never installed,
never imported by npu-migrate itself). It holds:

* `torch_npu` — `import torch_npu` registers the device name `npu`, a `torch.npu` namespace whose
  functions work on the CPU, and maps every `npu`/`npu:N` device to the CPU: in `torch.device`
  values passed to torch functions and tensor methods (factories' `device=`, `Tensor.to`,
  `Module.to`, `.npu()`), `torch.load(map_location=...)`, `torch.autocast`/`GradScaler`,
  `torch.Generator`; the `hccl` backend runs on gloo and DDP drops `device_ids` for CPU modules.
  `torch.npu.device_count()` is the rehearsal's process count (`NPU_MIGRATE_STANDIN_DEVICES`).
* `moxing` — `mox.file` over a local folder: `obs://bucket/key` is
  `$NPU_MIGRATE_REHEARSAL_OBS/bucket/key`; each call is appended to
  `$NPU_MIGRATE_REHEARSAL_LOG` (one JSON object a line) for the rehearsal's report.
* `_npu_migrate_record.py` — with `NPU_MIGRATE_REHEARSAL_RECORD` set, each process records (an
  audit hook) every file it opens for writing anywhere, the programs it starts and the modules
  whose writes or uploads no record shows, for the rehearsal's verdict.
* `torch_npu/_record.py` — adds, per process, a hash of each DDP model's parameters at exit, the
  indexes its DistributedSamplers drew, the parts `rank_shard` kept, and torch.save's paths, for
  the rehearsal's distributed checks.
* `sitecustomize` — installs the recorder in a rehearsal, loads `torch_npu` whenever torch is
  imported (as torch_npu's own autoload entry point does) and, when MindSpore is installed, runs
  `device_target="Ascend"` on the CPU.
"""

from pathlib import Path

SITE = Path(__file__).resolve().parent / "site"

#: Environment variables the stand-in reads (set by `npu_migrate.rehearse`).
OBS_ROOT_VAR = "NPU_MIGRATE_REHEARSAL_OBS"
LOG_VAR = "NPU_MIGRATE_REHEARSAL_LOG"
DEVICES_VAR = "NPU_MIGRATE_STANDIN_DEVICES"
RECORD_VAR = "NPU_MIGRATE_REHEARSAL_RECORD"  # where each process records parameters, samples, writes
