"""yacs/detectron2-style configs (issue 25.5): the device key in a defaults module, in code that
sets it, and in `merge_from_list` overrides, in scripts and in notebooks."""

from __future__ import annotations

import json

import pytest

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


# A detectron2-like project: the defaults module imports no torch; the model builder reads the
# device setting and hands it to torch; the entry script imports neither torch nor the setting.
PROJECT = {
    "maskrcnn/config/__init__.py": "from .defaults import _C as cfg\n",
    "maskrcnn/config/defaults.py": (
        "from yacs.config import CfgNode as CN\n\n"
        "_C = CN()\n_C.MODEL = CN()\n_C.MODEL.DEVICE = \"cuda\"\n_C.MODEL.WIDTH = 4\n"
    ),
    "maskrcnn/modeling/build.py": (
        "import torch\nfrom torch import nn\n\n\n"
        "def build_model(cfg):\n"
        "    model = nn.Linear(cfg.MODEL.WIDTH, 2)\n"
        "    return model.to(torch.device(cfg.MODEL.DEVICE))\n"
    ),
    "maskrcnn/utils/logger.py": "import torch\n\n\ndef log(x):\n    print(torch.__version__, x)\n",
    "tools/train_net.py": (
        "import sys\n\nsys.path.insert(0, '.')\n\n"
        "from maskrcnn.config import cfg\nfrom maskrcnn.modeling.build import build_model\n\n"
        "model = build_model(cfg)\nprint(next(model.parameters()).device.type)\n"
    ),
}
YACS_STUB = ("class CfgNode(dict):\n"
             "    def __getattr__(self, name):\n        return self[name]\n"
             "    def __setattr__(self, name, value):\n        self[name] = value\n")


def _write_project(root):
    for name, text in PROJECT.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_a_module_reading_a_device_setting_another_module_moves_gets_torch_npu(tmp_path, run_cli):
    """#25 (left over from 25.5): `_C.MODEL.DEVICE = "npu"` in a defaults module that imports no
    torch cannot load torch_npu; the module that reads the setting and imports torch gets
    `import torch_npu`; a torch module that does not read it is left as it is."""
    _write_project(tmp_path)
    r = run_cli("--write", "--no-cache", ".", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "maskrcnn/config/defaults.py").read_text() == PROJECT["maskrcnn/config/defaults.py"].replace(
        '"cuda"', '"npu"')
    assert (tmp_path / "maskrcnn/modeling/build.py").read_text() == PROJECT["maskrcnn/modeling/build.py"].replace(
        "import torch\n", "import torch\nimport torch_npu  # noqa: F401\n", 1)
    for name in ("maskrcnn/utils/logger.py", "tools/train_net.py", "maskrcnn/config/__init__.py"):
        assert (tmp_path / name).read_text() == PROJECT[name], name
    again = run_cli("--check", "--no-cache", ".", cwd=tmp_path)
    assert again.returncode == 0, again.stdout  # idempotent
    # Migrating the readers alone (the defaults module not among the files) changes nothing.
    (tmp_path / "alone").mkdir()
    _write_project(tmp_path / "alone")
    r = run_cli("--diff", "--no-cache", "maskrcnn/modeling", cwd=tmp_path / "alone")
    assert r.returncode == 0 and r.stdout == b"", r.stdout


@pytest.mark.slow
def test_the_migrated_project_runs_with_its_device_setting_on_the_standin(tmp_path, run_cli, torch_python):
    """The migrated project runs on the stand-in with torch's device autoload off (torch_npu
    before 2.5 has none): before, the builder handed torch "npu" without torch_npu loaded."""
    import subprocess

    from torch_env import standin_env

    _write_project(tmp_path)
    (tmp_path / "yacs").mkdir()
    (tmp_path / "yacs/__init__.py").write_text("")
    (tmp_path / "yacs/config.py").write_text(YACS_STUB)
    assert run_cli("--write", "--no-cache", "maskrcnn", "tools", cwd=tmp_path).returncode == 0
    env = standin_env(tmp_path, extra={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})

    def run():
        return subprocess.run([torch_python, "tools/train_net.py"], cwd=tmp_path, capture_output=True, text=True,
                              env=env, timeout=300)

    done = run()
    assert done.returncode == 0 and done.stdout.splitlines()[-1] == "cpu", done.stderr  # the stand-in's npu
    # The same project with the builder's import taken out fails: the test can fail.
    build = tmp_path / "maskrcnn/modeling/build.py"
    build.write_text(build.read_text().replace("import torch_npu  # noqa: F401\n", ""))
    failed = run()
    assert failed.returncode != 0 and "npu" in failed.stderr, failed.stderr


# Settings in the classes and functions of a module that imports no torch, read elsewhere as
# `cfg.device` / `args.device`: the reader is found by the class or function it imports.
CONFIG_PROJECTS = {
    "class attribute": ("class Config:\n    device = \"cuda\"\n    lr = 0.1\n", "from config import Config\ncfg = Config()\n"),
    "dataclass field": ("from dataclasses import dataclass\n\n\n@dataclass\nclass Config:\n    lr: float = 0.1\n"
                        "    device: str = \"cuda:0\"\n", "import config\ncfg = config.Config()\n"),
    "set in __init__": ("class Config:\n    def __init__(self):\n        self.lr = 0.1\n        self.device = \"cuda\"\n",
                        "from .config import (\n    Config,\n)\ncfg = Config()\n"),
    # a lookup with a CUDA default moves as the literal does (its readers with it)
    "environment default": ("import os\n\n\nclass Config:\n    device = os.environ.get(\"DEVICE\", \"cuda\")\n",
                            "from config import Config\ncfg = Config()\n"),
    "argparse default": ("import argparse\n\n\ndef get_args():\n    p = argparse.ArgumentParser()\n"
                         "    p.add_argument(\n        \"--device\", default=\"cuda\", help=\"where\")\n    return p.parse_args()\n",
                         "from config import get_args\ncfg = get_args()\n"),
}


@pytest.mark.parametrize("kind", sorted(CONFIG_PROJECTS))
def test_a_module_reading_a_device_setting_of_a_class_or_function_of_another_module_gets_torch_npu(
        tmp_path, run_cli, kind):
    """Seventh session, item 6: `class Config: device = "cuda"` in a module without torch moves
    to "npu"; the module that imports Config (or the function that parses `--device`) and
    hands `cfg.device` to torch gets `import torch_npu` with it -- it did not, and on a
    torch_npu without autoload `.to("npu")` failed there. A torch module that imports neither
    is left as it is."""
    config, head = CONFIG_PROJECTS[kind]
    train = "import torch\n" + head + "model = torch.nn.Linear(2, 2).to(cfg.device)\n"
    other = "import torch\nfrom config import OTHER\nx = torch.zeros(OTHER)\n"
    for name, text in (("config.py", config), ("train.py", train), ("other.py", other)):
        (tmp_path / name).write_text(text)
    r = run_cli("--write", "--no-cache", ".", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "config.py").read_text() == config.replace('"cuda', '"npu')
    assert (tmp_path / "train.py").read_text() == train.replace("import torch\n", "import torch\nimport torch_npu  # noqa: F401\n")
    assert (tmp_path / "other.py").read_text() == other
    again = run_cli("--check", "--no-cache", ".", cwd=tmp_path)
    assert again.returncode == 0, again.stdout  # idempotent


def test_a_module_reading_a_list_of_devices_another_module_moves_gets_torch_npu(tmp_path, run_cli):
    """`SUPPORTED_DEVICES = ["cpu", "cuda"]` in a module without torch moves to "npu" (a
    collection named for devices); the torch module that picks its device from it gets
    `import torch_npu` too."""
    constants = 'SUPPORTED_DEVICES = ["cpu", "cuda"]\nNAMES = ["cuda"]\n'
    train = ("import torch\nfrom constants import SUPPORTED_DEVICES\n"
             "model = torch.nn.Linear(2, 2).to(SUPPORTED_DEVICES[-1])\n")
    (tmp_path / "constants.py").write_text(constants)
    (tmp_path / "train.py").write_text(train)
    r = run_cli("--write", "--no-cache", ".", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "constants.py").read_text() == 'SUPPORTED_DEVICES = ["cpu", "npu"]\nNAMES = ["cuda"]\n'
    assert (tmp_path / "train.py").read_text() == train.replace("import torch\n", "import torch\nimport torch_npu  # noqa: F401\n")


SETTING_AND_READER = {
    "module": ('DEVICE = "cuda"\nBATCH = 8\n', "from config import DEVICE\n", "DEVICE", "config.DEVICE", "1:1"),
    "class": ('class Config:\n    device = "cuda"\n    lr = 0.1\n', "from config import Config\ncfg = Config()\n",
              "cfg.device", "config.Config", "2:5"),
}


@pytest.mark.parametrize("form", sorted(SETTING_AND_READER))
def test_a_setting_read_by_a_module_not_in_the_run_is_left_and_reported(tmp_path, run_cli, form):
    """principle 1 across modules and runs: `npu-migrate config.py --write` alone (what the
    pre-commit hook does with the staged files) moved config.py's setting to "npu" while its
    reader train.py, not in the run, got no `import torch_npu`; and a later run of the project
    found no CUDA setting left to follow, so train.py stayed broken. Now the setting's module is
    left as it is and reported at the setting (NPU324); given with its reader, or with a reader
    that loads torch_npu already, it moves."""
    config, head, value, key, where = SETTING_AND_READER[form]
    train = "import torch\n" + head + f"\nx = torch.zeros(2).to({value})\n"
    (tmp_path / "config.py").write_text(config)
    (tmp_path / "train.py").write_text(train)
    r = run_cli("--write", "--no-cache", "config.py", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "config.py").read_text() == config
    assert (tmp_path / "train.py").read_text() == train
    assert f"config.py:{where}: NPU324 [warning] the device setting `{key}` is read by train.py, which is not in " \
           "this run and would need `import torch_npu` once the setting names the NPU; this file was left as it " \
           "is -- Run npu-migrate on the project's folder, or give train.py too (stage it, for the pre-commit " \
           "hook)." in r.stdout.decode().splitlines()
    # With its reader, both move.
    r = run_cli("--write", "--no-cache", "config.py", "train.py", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "config.py").read_text() == config.replace('"cuda"', '"npu"')
    migrated = train.replace("import torch\n", "import torch\nimport torch_npu  # noqa: F401\n")
    assert (tmp_path / "train.py").read_text() == migrated
    # A reader outside the run that loads torch_npu already needs nothing: the setting moves.
    (tmp_path / "config.py").write_text(config)
    r = run_cli("--write", "--no-cache", "config.py", cwd=tmp_path)
    assert r.returncode == 0 and b"NPU324" not in r.stdout, r.stdout
    assert (tmp_path / "config.py").read_text() == config.replace('"cuda"', '"npu"')
    assert (tmp_path / "train.py").read_text() == migrated


def test_the_pre_commit_hook_leaves_a_setting_whose_reader_is_not_staged(tmp_path, run_cli):
    """The hook's command (.pre-commit-hooks.yaml) at the repository's root, given the staged
    src/config.py only: its reader train.py sits above src/, in the repository; the setting
    stays until the reader is given too, and then both move."""
    import subprocess

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "src").mkdir()
    config = 'DEVICE = "cuda:0"\n'
    train = "import torch\nfrom src import config\n\nx = torch.zeros(2).to(config.DEVICE)\n"
    (tmp_path / "src/config.py").write_text(config)
    (tmp_path / "train.py").write_text(train)
    hook = ("--write", "--force-exclude", "--known-files-only", "--no-cache")
    r = run_cli(*hook, "src/config.py", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "src/config.py").read_text() == config
    assert r.stdout.decode().splitlines()[0].startswith(
        "src/config.py:1:1: NPU324 [warning] the device setting `config.DEVICE` is read by train.py, ")
    r = run_cli(*hook, "src/config.py", "train.py", cwd=tmp_path)
    assert r.returncode == 0, r.stderr  # (pre-commit fails the commit: the files changed)
    assert (tmp_path / "src/config.py").read_text() == 'DEVICE = "npu:0"\n'
    assert (tmp_path / "train.py").read_text() == train.replace("import torch\n", "import torch\nimport torch_npu  # noqa: F401\n")
