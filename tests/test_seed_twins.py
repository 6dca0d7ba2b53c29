"""A CUDA seed call whose NPU twin is in a sibling `if` that tests the NPU's availability stays
(guards._keep_cuda_seed_beside_npu_branch): the code seeds the NPU already."""

import pytest

from npu_migrate import migrate_source
from helpers import assert_partial_as_whole

# transformers 4.46.3 src/transformers/trainer_utils.py:92-117 (set_seed; the docstring shortened)
TRANSFORMERS_SET_SEED = '''\
import random

import numpy as np

from .utils import is_torch_available, is_torch_npu_available, is_torch_xpu_available

if is_torch_available():
    import torch


def set_seed(seed: int, deterministic: bool = False):
    """Helper function for reproducible behavior to set the seed in `random`, `numpy`, `torch`."""
    random.seed(seed)
    np.random.seed(seed)
    if is_torch_available():
        torch.manual_seed(seed)
        torch.cuda.manual_seed_all(seed)
        # ^^ safe to call this function even if cuda is not available
        if deterministic:
            torch.use_deterministic_algorithms(True)
    if is_torch_npu_available():
        torch.npu.manual_seed_all(seed)
    if is_torch_xpu_available():
        torch.xpu.manual_seed_all(seed)
'''


def test_the_cuda_seed_beside_an_npu_branch_seeding_the_npu_stays():
    assert_partial_as_whole(TRANSFORMERS_SET_SEED, "transformers/trainer_utils.py")
    r = migrate_source(TRANSFORMERS_SET_SEED, "transformers/trainer_utils.py")
    # only the import its existing torch.npu call needs (NPU108); the CUDA seed call is left as it is
    assert r.new_text == TRANSFORMERS_SET_SEED.replace(
        "    import torch\n", "    import torch\n    import torch_npu  # noqa: F401\n")
    assert [e.code for e in r.edits] == ["NPU108"]


@pytest.mark.parametrize("change", [
    # another seed; the twin under a test that is not the NPU's availability; the seed rebound
    ("torch.npu.manual_seed_all(seed)", "torch.npu.manual_seed_all(seed + 1)"),
    ("if is_torch_npu_available():", "if use_npu:"),
    ("        torch.manual_seed(seed)\n", "        seed = seed % 2**32\n        torch.manual_seed(seed)\n"),
])
def test_the_cuda_seed_moves_otherwise(change):
    source = TRANSFORMERS_SET_SEED.replace(*change)
    r = migrate_source(source, "transformers/trainer_utils.py")
    assert "        torch.npu.manual_seed_all(seed)\n        # ^^ safe" in r.new_text
