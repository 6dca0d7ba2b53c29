# npu-migrate: distributed helpers (generated, checksum 000000000000: a later run of npu-migrate updates this file unless you edit it)
"""Data-parallel training on several NPUs (MindSpore's 8-card adaptation), for the scripts
`npu-migrate --distributed` converted.

run_8p.sh (or ModelArts) starts one process per NPU and sets DEVICE_ID, RANK_ID, RANK_SIZE and
RANK_TABLE_FILE (hccl_8p.json); a plain `python train.py` is one process.
"""

import os

from mindspore import context
from mindspore.communication.management import init

VERSION = 1


def device_id():
    return int(os.getenv("DEVICE_ID", "0"))


def rank_id():
    return int(os.getenv("RANK_ID", "0"))


def rank_size():
    return int(os.getenv("RANK_SIZE", "1"))


def distributed_setup():
    """Take this process's NPU; with several processes, join HCCL and average the gradients."""
    context.set_context(device_id=device_id())
    if rank_size() > 1:
        init()
        context.set_auto_parallel_context(
            device_num=rank_size(), parallel_mode="data_parallel", gradients_mean=True
        )
