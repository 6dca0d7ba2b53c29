"""Bugs the real-corpus check (bench/corpus_check.py) found, each pinned by the smallest code
that shows it, with the exact expected output."""

from npu_migrate.dispatch import migrate_source

IMPORT_NPU = "import torch\nimport torch_npu  # noqa: F401\n"


def migrated(text: str) -> str:
    result = migrate_source(text, "example.py")
    assert result.error is None
    out = result.new_text if result.new_text is not None else text
    again = migrate_source(out, "example.py")
    assert again.new_text is None, "not idempotent"
    return out


def test_a_classs_own_cuda_method_follows_its_callers():
    # transformers 4.46.3, models/esm/openfold_utils/rigid_utils.py: `Rigid.cuda()` calls
    # `self._rots.cuda()` on a Rotation, which has only the `cuda` it defines itself.
    before = (
        "import torch\n\nclass Rotation:\n    def cuda(self):\n        return Rotation(self._rot_mats.cuda())\n\n"
        "class Rigid:\n    def cuda(self) -> 'Rigid':\n        return Rigid(self._rots.cuda(), self._trans.cuda())\n"
    )
    assert migrated(before) == (
        IMPORT_NPU + "\nclass Rotation:\n    def npu(self):\n        return Rotation(self._rot_mats.npu())\n\n"
        "class Rigid:\n    def npu(self) -> 'Rigid':\n        return Rigid(self._rots.npu(), self._trans.npu())\n"
    )


def test_an_override_of_module_cuda_becomes_an_override_of_npu():
    # transformers 4.46.3, modeling_utils.py: PreTrainedModel.cuda checks, then calls super().
    before = "import torch\n\nclass Model(torch.nn.Module):\n    def cuda(self, *args, **kwargs):\n        return super().cuda(*args, **kwargs)\n"
    assert migrated(before) == (
        IMPORT_NPU + "\nclass Model(torch.nn.Module):\n    def npu(self, *args, **kwargs):\n        return super().npu(*args, **kwargs)\n"
    )


def test_properties_and_classes_with_both_methods_keep_their_names():
    before = (
        "import torch\n\nclass Flag:\n    @property\n    def cuda(self):\n        return self._cuda\n\n"
        "class Both:\n    def cuda(self):\n        return self.npu()\n\n    def npu(self):\n        return self\n"
    )
    # (`.npu()` already there: torch_npu is imported for it)
    assert migrated(before) == before.replace("import torch\n", IMPORT_NPU)


def test_a_cuda_method_with_a_foreign_signature_is_not_torchs():
    # transformers 4.46.3, cache_utils.py: hqq's `quantizer.cuda(qtensor, meta=meta, device=...)`.
    before = "import torch\nquantizer.cuda(qtensor, meta=meta, device=self.device)\nq.cuda(a, b, c)\n"
    assert migrated(before) == before
    assert migrated("import torch\nx = x.cuda(0, non_blocking=True)\ny = y.cuda(device=d, memory_format=f)\n") == (
        IMPORT_NPU + "x = x.npu(0, non_blocking=True)\ny = y.npu(device=d, memory_format=f)\n"
    )
