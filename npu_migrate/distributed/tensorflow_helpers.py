# npu-migrate: distributed helpers (generated, checksum 000000000000: a later run of npu-migrate updates this file unless you edit it)
"""Data-parallel training on several NPUs (TF Adapter, HCCL), for the TF 1.15 scripts
`npu-migrate --distributed` converted.

run_8p.sh (or ModelArts) starts one process per NPU and sets DEVICE_ID, RANK_ID, RANK_SIZE and
RANK_TABLE_FILE (hccl_8p.json); a plain `python train.py` is one process.
"""

import os

import tensorflow as tf

VERSION = 1


def rank_id():
    return int(os.getenv("RANK_ID", "0"))


def rank_size():
    return int(os.getenv("RANK_SIZE", "1"))


def broadcast_global_variables(root_rank=0):
    """An op giving every process the variables of rank `root_rank` (run it after initialising)."""
    if rank_size() <= 1:
        return tf.no_op()
    # imported here: one process runs without npu_bridge's collective operations
    from npu_bridge.hccl import hccl_ops

    assigns = []
    for var in tf.global_variables():
        if var.dtype.base_dtype.is_floating:
            value = hccl_ops.broadcast(tensor=[var], root_rank=root_rank)[0]
            assigns.append(tf.assign(var, value))
    return tf.group(assigns)
