"""The patterns of test_semantics.py, migrated and run on the CPU stand-in of `npu-migrate rehearse` (torch 2.13
CPU, the stand-in torch_npu): the migrated program takes the path it should -- the pure-PyTorch
fallback, not the CUDA kernel -- and its default run uses an NPU device."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow

# In the stand-in tensors live on the CPU and `is_npu` is False; on an Ascend machine they are
# NPU tensors. The snippets say so after the migration's `import torch_npu`, so that a guard
# rewritten to `is_npu` would take the kernel path as it would on the NPU.
ON_THE_NPU = "torch.Tensor.is_npu = property(lambda self: True)\n"


def test_kernel_guard_sends_npu_tensors_to_the_fallback(run_on_standin, tmp_path):
    (tmp_path / "box_cuda.py").write_text(
        "def encode(boxes, anchors):\n    raise RuntimeError('the CUDA kernel was called')\n")
    done = run_on_standin("""\
        import torch
        import box_cuda

        def encode(boxes, anchors):
            if boxes.is_cuda and anchors.is_cuda:
                return box_cuda.encode(boxes, anchors)
            return boxes - anchors

        def check(x):
            assert x.is_cuda, "roi_align is CUDA only"

        """ + ON_THE_NPU + """
        boxes = torch.ones(2).cuda()
        print(encode(boxes, torch.zeros(2).cuda()).tolist())
        try:
            check(boxes)
        except AssertionError as exc:
            print("refused:", exc)
        """)
    assert done.returncode == 0, done.stderr
    assert "if boxes.is_cuda and anchors.is_cuda:" in done.migrated and "torch.ones(2).npu()" in done.migrated
    assert done.stdout.splitlines() == ["[1.0, 1.0]", "refused: roi_align is CUDA only"]


def test_capability_gate_and_device_pickers_run(run_on_standin):
    done = run_on_standin("""\
        import torch
        BF16 = torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 8
        print(torch.cuda.get_device_capability())

        def get_device():
            if torch.cuda.is_available():
                return "cuda"
            return "cpu"

        name = "cuda" if torch.cuda.is_available() else "cpu"
        for device in ["cpu", "cuda"]:
            torch.ones(1, device=device)
        args = ("cuda:0",)
        x = torch.zeros(2, device=get_device()).to(*args)
        print(BF16, torch.device(get_device()).type, name, torch.device(args[0]).type)
        """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["None", "False npu npu npu"]


def test_torch_npu_imported_before_its_first_use_on_one_line(run_on_standin):
    done = run_on_standin("import os; import torch; x = torch.zeros(1).cuda(); print(x.tolist())\n")
    assert done.returncode == 0, done.stderr
    assert done.migrated.startswith("import os; import torch; import torch_npu; x = torch.zeros(1).npu();")
    assert done.stdout == "[0.0]\n"


def test_device_settings_looked_up_with_a_cuda_default_run_on_the_npu(run_on_standin):
    """rl-games 1.6.5's `self.ppo_device = config.get('device', 'cuda:0')`: the default moves with
    the code that reads the setting (a device argument, a comparison), so the program runs on the
    NPU when the setting is not given, and takes the same branches as on CUDA."""
    done = run_on_standin("""\
        import os
        import torch

        class Agent:
            def __init__(self, config, **kwargs):
                self.ppo_device = config.get('device', 'cuda:0')
                self.mixed = config.get('device', 'cuda') == 'cuda'
                self.env_device = kwargs.pop('device', 'cuda:0')

        agent = Agent({}, seed=1)
        x = torch.zeros(2).to(agent.ppo_device)
        y = torch.ones(2, device=os.environ.get('TRAIN_DEVICE', 'cuda'))
        state = torch.cuda.get_rng_state('cuda')
        torch.cuda.set_rng_state(state, 'cuda:0')
        print(torch.device(agent.ppo_device).type, torch.device(agent.env_device).type, agent.mixed, (x + y).tolist())
        """)
    assert done.returncode == 0, done.stderr
    assert "config.get('device', 'npu:0')" in done.migrated and "torch.npu.set_rng_state(state, 'npu:0')" in done.migrated
    assert done.stdout.splitlines() == ["npu npu True [1.0, 1.0]"]


def test_nnunet_ddp_behind_an_assertion_saying_cuda_only_trains_on_two_npus(run_on_standin):
    """nnU-Net 2.8.1 run_training.py's shape: `assert device.type == 'cuda', "DDP training ... is only
    implemented for cuda devices"` before `mp.spawn(run_ddp, ...)`, whose process group and set_device
    the migration moves to hccl and torch.npu. Kept on CUDA (before), the migrated program raised at
    the assertion; moved with the code it protects, two NPU processes all-reduce. Over 1 CPU-s: two
    spawned processes each import torch (~2 CPU-s each)."""
    done = run_on_standin("""\
        import os
        import socket

        import torch
        import torch.distributed as dist
        import torch.multiprocessing as mp


        def find_free_network_port() -> int:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("", 0))
            port = s.getsockname()[1]
            s.close()
            return port


        def setup_ddp(rank, world_size):
            dist.init_process_group("nccl", rank=rank, world_size=world_size)


        def run_ddp(rank, world_size):
            setup_ddp(rank, world_size)
            torch.cuda.set_device(torch.device('cuda', dist.get_rank()))
            t = torch.ones(1, device=torch.device('cuda', rank))
            dist.all_reduce(t)
            if rank == 0:
                print(dist.get_world_size(), dist.get_backend(), t.item(), flush=True)
            dist.destroy_process_group()


        def run_training(num_gpus: int = 1, device: torch.device = torch.device('cuda')):
            if num_gpus > 1:
                assert device.type == 'cuda', f"DDP training (triggered by num_gpus > 1) is only implemented for cuda devices. Your device: {device}"
                os.environ['MASTER_ADDR'] = 'localhost'
                os.environ['MASTER_PORT'] = str(find_free_network_port())
                mp.spawn(run_ddp, args=(num_gpus,), nprocs=num_gpus, join=True)


        if __name__ == "__main__":
            run_training(2)
        """, devices=2)
    assert "assert device.type == 'npu'" in done.migrated
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["2 hccl 2.0"]
