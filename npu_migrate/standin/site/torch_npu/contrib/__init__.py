"""torch_npu.contrib in npu-migrate's CPU stand-in: only transfer_to_npu."""
