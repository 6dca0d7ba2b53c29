"""yacs/detectron2-style configs (issue 25.5): the device key in a defaults module, in code that
sets it, and in `merge_from_list` overrides, in scripts and in notebooks."""

from __future__ import annotations

import json

from npu_migrate.dispatch import migrate_source

TRAIN = """\
import torch
from detectron2.config import get_cfg
from detectron2.engine import DefaultTrainer


def setup(args):
    cfg = get_cfg()
    cfg.merge_from_file(args.config_file)
    cfg.merge_from_list(args.opts + ["MODEL.DEVICE", "cuda", "SOLVER.IMS_PER_BATCH", 4])
    cfg.MODEL.DEVICE = "cuda:0"
    cfg.OUTPUT_DIR = "runs/cuda"
    return cfg
"""


def test_device_overrides_in_a_detectron2_script():
    r = migrate_source(TRAIN, "tools/train_net.py")
    assert r.new_text == TRAIN.replace("import torch\n", "import torch\nimport torch_npu  # noqa: F401\n").replace(
        '"MODEL.DEVICE", "cuda"', '"MODEL.DEVICE", "npu"').replace('= "cuda:0"', '= "npu:0"')
    assert [e.code for e in r.edits].count("NPU105") == 2


def test_device_overrides_in_a_notebook_cell():
    cell = 'cfg = get_cfg()\ncfg.merge_from_list(["MODEL.DEVICE", "cuda"])\ncfg.MODEL.DEVICE = "cuda"\n'
    nb = {"cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                     "source": ["import torch\n"]},
                    {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                     "source": cell.splitlines(keepends=True)}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    r = migrate_source(json.dumps(nb, indent=1) + "\n", "demo.ipynb")
    assert r.error is None
    cells = json.loads(r.new_text)["cells"]
    assert "".join(cells[1]["source"]) == cell.replace('"cuda"', '"npu"')
