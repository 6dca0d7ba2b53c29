# >>> npu-migrate: distributed >>>
# Data-parallel training on several NPUs (TF Adapter, HCCL), added by `npu-migrate
# --distributed` (running it again updates this block). LAUNCH_SCRIPT (or ModelArts) starts one
# process per NPU and sets DEVICE_ID, RANK_ID, RANK_SIZE and RANK_TABLE_FILE (hccl_8p.json); a
# plain `python SCRIPT` is one process.
def rank_id():
    import os

    return int(os.getenv("RANK_ID", "0"))


def rank_size():
    import os

    return int(os.getenv("RANK_SIZE", "1"))


def broadcast_global_variables(root_rank=0):
    """An op giving every process the variables of rank `root_rank` (run it after initialising)."""
    import tensorflow as tf

    if rank_size() <= 1:
        return tf.no_op()
    from npu_bridge.hccl import hccl_ops

    assigns = []
    for var in tf.global_variables():
        if var.dtype.base_dtype.is_floating:
            value = hccl_ops.broadcast(tensor=[var], root_rank=root_rank)[0]
            assigns.append(tf.assign(var, value))
    return tf.group(assigns)
