# >>> npu-migrate: distributed >>>
# Data-parallel training on several NPUs (MindSpore's 8-card adaptation; the set-up of MindSpore
# 2.7 and later, which take the device from mindspore.set_device), added by
# `npu-migrate --distributed` (running it again updates this block). LAUNCH_SCRIPT (or
# ModelArts) starts one process per NPU and sets DEVICE_ID, RANK_ID, RANK_SIZE and
# RANK_TABLE_FILE; a plain `python SCRIPT` is one process.
def device_id():
    import os

    return int(os.getenv("DEVICE_ID", "0"))


def rank_id():
    import os

    return int(os.getenv("RANK_ID", "0"))


def rank_size():
    import os

    return int(os.getenv("RANK_SIZE", "1"))


def distributed_setup():
    """Take this process's NPU; with several processes, join HCCL and average the gradients."""
    import mindspore
    from mindspore.communication.management import init

    mindspore.set_device(mindspore.get_context("device_target"), device_id())
    if rank_size() > 1:
        init()
        mindspore.set_auto_parallel_context(
            device_num=rank_size(), parallel_mode="data_parallel", gradients_mean=True
        )
