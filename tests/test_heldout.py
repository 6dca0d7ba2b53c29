"""What reviewing the tool's output on held-out real projects found, as small fixtures shaped like
the real code (not copied from it), with the exact expected output."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from npu_migrate.dispatch import migrate_source
from npu_migrate.options import Options

from helpers import PARTIAL_PADDING, assert_partial_as_whole, write_migrated


def with_torch_npu(text: str) -> str:
    """`text` with `import torch_npu` added below its `import torch`, as the migration adds it."""
    return text.replace("import torch\n", "import torch\nimport torch_npu  # noqa: F401\n")

# An entry script that is also a module of its package (BasicSR's basicsr/train.py: run as
# `python basicsr/train.py`, importing its own package absolutely, while basicsr/__init__.py
# does `from .train import *`, so every `import basicsr` imports it too).
PACKAGE_ENTRY = """\
from os import path as osp

from deblur.data import build_loader


def train_pipeline(root):
    build_loader(root)


if __name__ == '__main__':
    train_pipeline(osp.dirname(__file__))
"""
PACKAGE_ENTRY_ADAPTED = """\
from os import path as osp

from deblur.data import build_loader
try:  # npu-migrate: ModelArts
    from deblur.npu_migrate_modelarts import modelarts_setup
except ImportError:  # run from its folder, its package installed without it
    from npu_migrate_modelarts import modelarts_setup


def train_pipeline(root):
    build_loader(root)


if __name__ == '__main__':
    modelarts_setup()
    train_pipeline(osp.dirname(__file__))
"""


@pytest.mark.slow
def test_an_entry_script_imported_by_its_package_imports_the_runtime_through_the_package(tmp_path):
    package = tmp_path / "deblur"
    package.mkdir()
    (package / "__init__.py").write_text("from .train import *\n")
    (package / "data.py").write_text("def build_loader(root):\n    print('loader', bool(root))\n")
    script = package / "train.py"
    options = Options(modelarts=True)
    result = migrate_source(PACKAGE_ENTRY, str(script), options)
    assert result.error is None
    assert result.new_text == PACKAGE_ENTRY_ADAPTED
    again = migrate_source(result.new_text, str(script), options)
    assert again.error is None and not again.changed and again.edits == []

    write_migrated(script, result)
    # Imported as a package from elsewhere (the way `from npu_migrate_modelarts import` fails:
    # the script's folder is not on sys.path then) and run as a script.
    other = tmp_path / "elsewhere"
    other.mkdir()
    env = {"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"}
    imported = subprocess.run([sys.executable, "-c", "import deblur.train; print('imported')"], cwd=other,
                              env=env, capture_output=True, text=True)
    assert (imported.returncode, imported.stdout, imported.stderr) == (0, "imported\n", "")
    ran = subprocess.run([sys.executable, str(script)], cwd=other, env=env, capture_output=True, text=True)
    assert (ran.returncode, ran.stdout, ran.stderr) == (0, "loader True\n", "")


# The same for --distributed: the helper module beside a package's training script.
PACKAGE_TRAINER = """\
import torch
from deblur.data import batches


def main():
    model = torch.nn.Linear(2, 2).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x in batches():
        opt.zero_grad()
        model(x.cuda()).sum().backward()
        opt.step()


if __name__ == "__main__":
    main()
"""


DISTRIBUTED_PACKAGE_IMPORT = """\
try:  # npu-migrate: distributed
    from deblur.npu_migrate_distributed import (
        distributed_cleanup,
        distributed_model,
        distributed_setup,
    )
except ImportError:  # run from its folder, its package installed without it
    from npu_migrate_distributed import (
        distributed_cleanup,
        distributed_model,
        distributed_setup,
    )
"""


@pytest.mark.slow
def test_a_package_training_script_imports_the_distributed_helpers_through_the_package(tmp_path):
    package = tmp_path / "deblur"
    package.mkdir()
    (package / "__init__.py").write_text("")
    script = str(package / "train.py")
    options = Options(distributed=True)
    result = migrate_source(PACKAGE_TRAINER, script, options)
    assert result.error is None
    assert DISTRIBUTED_PACKAGE_IMPORT in result.new_text, result.new_text
    assert str(package / "npu_migrate_distributed.py") in result.extra_files
    again = migrate_source(result.new_text, script, options)
    assert again.error is None and not again.changed
    # Run from the checkout while an older copy of the package (without the helper module) is
    # what `import deblur` finds: the bare import beside the script serves (as for ModelArts,
    # d7e98a6). torch is not the subject here: empty modules stand in for it.
    write_migrated(script, result)
    installed = tmp_path / "site" / "deblur"
    installed.mkdir(parents=True)
    (installed / "__init__.py").write_text("")
    (installed / "data.py").write_text("def batches():\n    return []\n")
    probe = (
        "import runpy, sys, types\n"
        "for name in ('torch', 'torch.distributed', 'torch_npu', 'torch.nn', 'torch.nn.parallel', 'torch.utils',\n"
        "             'torch.utils.data', 'torch.utils.data.distributed'):\n"
        "    sys.modules[name] = types.ModuleType(name)\n"
        "sys.modules['torch.nn.parallel'].DistributedDataParallel = object\n"
        "sys.modules['torch.utils.data.distributed'].DistributedSampler = object\n"
        "sys.path[0] = sys.argv[1].rpartition('/')[0]  # as `python train.py` puts the script's folder\n"
        "found = runpy.run_path(sys.argv[1], run_name='probe')\n"
        "print(found['distributed_setup'].__module__, sys.modules['deblur'].__file__)\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    ran = subprocess.run([sys.executable, "-c", probe, script], cwd=elsewhere,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path / "site")}, capture_output=True, text=True)
    assert (ran.returncode, ran.stderr) == (0, ""), ran.stderr
    assert ran.stdout == f"npu_migrate_distributed {installed / '__init__.py'}\n"
    # Outside a package (or in one it imports relatively) nothing changes: the bare import.
    flat = migrate_source(PACKAGE_TRAINER, str(tmp_path / "train.py"), options)
    assert [line for line in flat.new_text.splitlines() if "npu_migrate_distributed" in line] == [
        "from npu_migrate_distributed import (  # npu-migrate: distributed"]


def test_a_library_named_folder_inside_a_package_hides_nothing_when_given_alone(tmp_path, monkeypatch):
    """SpeechBrain's speechbrain/integrations/numba/ is `speechbrain.integrations.numba`: run on
    that folder (or one file of it) alone, `from numba import cuda` there is still numba's CUDA
    compiler, as in a run on the whole project (the package's __init__.py files above the folder
    are not among the files given)."""
    import json

    from click.testing import CliRunner

    from npu_migrate.cli import main

    files = {
        "audio/__init__.py": "",
        "audio/integrations/__init__.py": "",
        "audio/integrations/numba/__init__.py": "",
        "audio/integrations/numba/loss.py": "import torch\nfrom numba import cuda\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    for given in (".", "audio/integrations/numba", "audio/integrations/numba/loss.py"):
        result = CliRunner().invoke(main, [given, "--format", "json", "--no-cache", "-j", "1"])
        found = [(e["path"], f["line"], f["code"], f["api"])
                 for e in json.loads(result.output)["files"] for f in e["findings"]]
        assert found == [("audio/integrations/numba/loss.py", 2, "NPU303", "numba.cuda")], given


def test_a_replaced_gelu_body_keeps_the_lines_above_it():
    """tflearn's activations.gelu: a blank line (and a comment) between the docstring and the
    formula; --npu-ops replaces the formula, not the lines above it."""
    source = ('import numpy as np\nimport tensorflow as tf\n\n\ndef gelu(x):\n    """Gaussian Error Linear Units."""\n'
              '\n    # tanh approximation\n'
              '    return 0.5 * x * (1 + tf.tanh(tf.sqrt(2 / np.pi) * (x + 0.044715 * tf.pow(x, 3))))\n')
    result = migrate_source(source, "activations.py", Options(npu_ops=True))
    assert result.error is None
    assert result.new_text == ('from npu_bridge.npu_init import *\nimport numpy as np\nimport tensorflow as tf\n\n\n'
                               'def gelu(x):\n    """Gaussian Error Linear Units."""\n\n    # tanh approximation\n'
                               '    return npu_unary_ops.gelu(x)\n')
    again = migrate_source(result.new_text, "activations.py", Options(npu_ops=True))
    assert again.error is None and not again.changed


# SpeechBrain's utils/logger.py get_environment_description(), which every experiment calls: the
# branch under torch.cuda.is_available() reads the CUDA/ROCm version, None with torch_npu.
VERSION_REPORT = """\
import torch


def describe():
    if torch.cuda.is_available():
        if torch.version.cuda is None:
            text = "ROCm " + torch.version.hip
        else:
            text = "CUDA " + torch.version.cuda
    else:
        text = "no GPU"
    torch.cuda.manual_seed_all(0)
    return text
"""


def test_is_available_over_the_cuda_version_stays_cuda():
    result = migrate_source(VERSION_REPORT, "logger.py", Options())
    assert result.error is None
    assert result.new_text == with_torch_npu(VERSION_REPORT).replace(
        "torch.cuda.manual_seed_all", "torch.npu.manual_seed_all")
    assert sorted((f.code, f.span.line) for f in result.findings) == [("NPU311", 6), ("NPU311", 9)]


# pyro-ppl 1.9.2 distributions/spanning_tree.py:58: a guard that refuses CUDA tensors (the code
# after it is CPU-only). It was taken for a CUDA-only guard (NPU302 error, `is_cuda` kept), so
# NPU tensors passed into the CPU-only code; as `is_npu` the NPU is refused as CUDA was. The
# negated form and the raising `else:` still guard CUDA-only code.
REFUSES_CUDA = """\
import torch


def tree(edge_logits):
    if edge_logits.is_cuda:
        raise NotImplementedError("SpanningTree does not support cuda tensors")
    return edge_logits.exp()


def fused(x):
    if not x.is_cuda:
        raise NotImplementedError("CUDA only")
    return x


def fused2(x, w):
    if x.is_cuda and w.is_cuda:
        y = x * w
    else:
        raise NotImplementedError("no CPU version")
    return y
"""


def test_a_guard_that_refuses_cuda_tensors_refuses_npu_tensors():
    result = migrate_source(REFUSES_CUDA, "spanning_tree.py", Options())
    assert result.error is None
    assert result.new_text == with_torch_npu(REFUSES_CUDA).replace(
        "if edge_logits.is_cuda:", "if edge_logits.is_npu:")
    assert [(f.code, f.span.line, f.api) for f in result.findings] == [
        ("NPU302", 11, "x.is_cuda"), ("NPU302", 17, "x.is_cuda"), ("NPU302", 17, "w.is_cuda")]


PACKAGE_IMPORT = (
    "try:  # npu-migrate: ModelArts\n"
    "    from {}.npu_migrate_modelarts import modelarts_setup\n"
    "except ImportError:  # run from its folder, its package installed without it\n"
    "    from npu_migrate_modelarts import modelarts_setup\n")


# fairseq 0.12.2 fairseq_cli/train.py: a script in a package folder (fairseq_cli/__init__.py)
# that imports the package beside its own (`from fairseq import options`). It is run as
# `python fairseq_cli/train.py` and imported as `fairseq_cli.train` (the `fairseq-train` console
# script, fairseq_cli/hydra_train.py): the bare `from npu_migrate_modelarts import` failed there.
CLI_ENTRY = """\
import sys

from fairseq import options


def cli_main():
    print(options.NAME, sys.argv[1:])


if __name__ == "__main__":
    cli_main()
"""


@pytest.mark.slow
def test_a_script_importing_a_package_beside_its_own_imports_the_runtime_through_its_package(tmp_path):
    for name, text in (("fairseq/__init__.py", ""), ("fairseq/options.py", "NAME = 'options'\n"),
                       ("fairseq_cli/__init__.py", "")):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    script = tmp_path / "fairseq_cli" / "train.py"
    options = Options(modelarts=True, modelarts_boot=True, modelarts_entry_files=(str(script),))
    result = migrate_source(CLI_ENTRY, str(script), options)
    assert result.error is None
    assert result.new_text == CLI_ENTRY.replace(
        "from fairseq import options\n", "from fairseq import options\n"
        + PACKAGE_IMPORT.format("fairseq_cli")).replace(
        "    cli_main()", "    modelarts_setup()\n    cli_main()")
    boot = result.extra_files[str(tmp_path / "fairseq_cli" / "modelarts_entry_train.py")]
    assert 'IMPORT_ROOT = ".."' in boot
    again = migrate_source(result.new_text, str(script), options)
    assert again.error is None and not again.changed
    # Outside a package, or importing nothing beside it: the bare import, as before.
    flat = migrate_source(CLI_ENTRY, str(tmp_path / "train.py"), Options(modelarts=True))
    assert "from npu_migrate_modelarts import modelarts_setup" in flat.new_text

    write_migrated(script, result)
    env = {"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"}
    imported = subprocess.run([sys.executable, "-c", "from fairseq_cli.train import cli_main; cli_main()"],
                              cwd=tmp_path / "fairseq", env=env, capture_output=True, text=True)
    assert (imported.returncode, imported.stdout, imported.stderr) == (0, "options []\n", "")
    ran = subprocess.run([sys.executable, str(script), "x"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert (ran.returncode, ran.stdout, ran.stderr) == (0, "options ['x']\n", "")

    # A non-editable install is a copy of the packages in site-packages. Installed from the
    # migrated checkout (it holds the generated module): the console script imports
    # `fairseq_cli.train` from there. Installed before the migration (without it), a script run
    # from the checkout finds the module beside itself (sys.path[0]); the package form alone
    # raised ModuleNotFoundError there, the bare form alone in the first case.
    (tmp_path / "elsewhere").mkdir()
    for site, migrated in ((tmp_path / "site-new", True), (tmp_path / "site-old", False)):
        for package in ("fairseq", "fairseq_cli"):
            shutil.copytree(tmp_path / package, site / package)
        if not migrated:
            (site / "fairseq_cli" / "train.py").write_text(CLI_ENTRY)
            for path in result.extra_files:
                (site / "fairseq_cli" / Path(path).name).unlink()
    console = subprocess.run([sys.executable, "-c", "import sys; from fairseq_cli.train import cli_main; sys.exit(cli_main())"],
                             cwd=tmp_path / "elsewhere", env={**env, "PYTHONPATH": str(tmp_path / "site-new")},
                             capture_output=True, text=True)
    assert (console.returncode, console.stdout, console.stderr) == (0, "options []\n", "")
    checkout = subprocess.run([sys.executable, str(script), "y"], cwd=tmp_path / "elsewhere",
                              env={**env, "PYTHONPATH": str(tmp_path / "site-old")}, capture_output=True, text=True)
    assert (checkout.returncode, checkout.stdout, checkout.stderr) == (0, "options ['y']\n", "")


# fairseq_cli/train.py parses with `options.parse_args_and_arch(parser)` (fairseq/options.py):
# the job's --data_url/--train_url reach that parser, which refuses them, with nothing reported.
def test_arguments_parsed_by_another_modules_parse_args_function_are_reported():
    text = CLI_ENTRY.replace("    print(options.NAME, sys.argv[1:])\n",
                             "    args = options.parse_args_and_arch(options.get_training_parser())\n")
    result = migrate_source(text, "cli/train.py", Options(modelarts=True))
    assert result.error is None
    assert [(f.code, f.span.line, f.span.col) for f in result.findings if f.code == "NPU216"] == [("NPU216", 7, 12)]


# A class that keeps its own `is_cuda` flag (a shape from the code index: a relation model whose
# own cuda()/cpu() set it). `self.is_cuda = True` became `self.is_npu = True` and
# `if self.is_cuda:` `if self.is_npu:`, but the class's default stayed `is_cuda = False`: an
# instance used before `.npu()` raised AttributeError.
OWN_FLAG = """\
import torch


class RelationModel(torch.nn.Module):
    is_cuda = False

    def cuda(self, device=None):
        super().cuda(device=device)
        self.is_cuda = True

    def forward(self, x):
        if self.is_cuda:
            x = x.cuda()
        return x
"""


def test_a_class_default_flag_stays_with_its_readers():
    """dff70f3 renamed the class default with its readers (is_npu everywhere in the file). The
    class assigns `self.is_cuda` (a tensor's is_cuda is read-only), so it is the user's own
    attribute: it keeps its name in the file, as for the readers outside it (guard, session 12)."""
    result = migrate_source(OWN_FLAG, "relation.py", Options())
    assert result.error is None
    assert result.new_text == with_torch_npu(OWN_FLAG).replace("cuda(", "npu(")
    again = migrate_source(result.new_text, "relation.py", Options())
    assert again.error is None and not again.changed


# espnet 202511 espnet2/bin/asr_train.py: a script two packages deep that imports its top
# package (`from espnet2.tasks.asr import ASRTask`), run as `python -m espnet2.bin.asr_train` by
# ESPnet's recipes: the bare `from npu_migrate_modelarts import` raised ModuleNotFoundError there.
NESTED_ENTRY = """\
from espnet2.tasks.asr import NAME


def main(cmd=None):
    print(NAME)


if __name__ == "__main__":
    main()
"""


@pytest.mark.slow
def test_a_script_deep_in_its_package_imports_the_runtime_through_its_dotted_package(tmp_path):
    for name, text in (("espnet2/__init__.py", ""), ("espnet2/bin/__init__.py", ""),
                       ("espnet2/tasks/__init__.py", ""), ("espnet2/tasks/asr.py", "NAME = 'asr'\n")):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    script = tmp_path / "espnet2" / "bin" / "asr_train.py"
    options = Options(modelarts=True, modelarts_boot=True, modelarts_entry_files=(str(script),))
    result = migrate_source(NESTED_ENTRY, str(script), options)
    assert result.error is None
    assert result.new_text == NESTED_ENTRY.replace(
        "import NAME\n", "import NAME\n"
        + PACKAGE_IMPORT.format("espnet2.bin")).replace(
        "    main()", "    modelarts_setup()\n    main()")
    assert 'IMPORT_ROOT = "../.."' in result.extra_files[str(script.parent / "modelarts_entry_asr_train.py")]
    again = migrate_source(result.new_text, str(script), options)
    assert again.error is None and not again.changed

    write_migrated(script, result)
    env = {"PATH": "/usr/bin:/bin"}
    ran = subprocess.run([sys.executable, "-m", "espnet2.bin.asr_train"], cwd=tmp_path, env=env,
                         capture_output=True, text=True)
    assert (ran.returncode, ran.stdout, ran.stderr) == (0, "asr\n", "")


def test_a_scripts_own_main_handing_the_run_to_another_module_is_reported():
    """ESPnet's espnet2/bin/asr_train.py: `main()` calls `ASRTask.main(cmd=cmd)`, whose parser
    (espnet2/tasks/abs_task.py) refuses the job's --data_url; nothing was reported."""
    text = NESTED_ENTRY.replace("import NAME", "import ASRTask").replace("print(NAME)", "ASRTask.main(cmd=cmd)")
    result = migrate_source(text, "bin/asr_train.py", Options(modelarts=True))
    assert result.error is None
    assert [(f.code, f.span.line, f.api) for f in result.findings if f.code == "NPU219"] == [
        ("NPU219", 5, "ASRTask.main()")]


# `parser.add_argument('--is_cuda', ...)` is a common flag in training scripts (ten in the code
# index); `args.is_cuda` became `args.is_npu`, an AttributeError at the first read. The flag's
# readers stay; a tensor's is_cuda in the same script still moves.
FLAG_SCRIPT = """\
import argparse

import torch


def train(args, x):
    if args.is_cuda and not x.is_cuda:
        x = x.cuda()
    return x


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("-c", "--is-cuda", action="store_true")
    args, _ = parser.parse_known_args()
    train(args, torch.zeros(1))
"""


def test_a_command_line_flag_named_is_cuda_keeps_its_name():
    result = migrate_source(FLAG_SCRIPT, "train.py", Options())
    assert result.error is None
    assert result.new_text == with_torch_npu(FLAG_SCRIPT).replace(
        "not x.is_cuda", "not x.is_npu").replace("x.cuda()", "x.npu()")


# pytorch-ignite 0.5.5 tests/ignite/conftest.py:73-84 (the `available_device` fixture most of its
# tests take) and tests/ignite/distributed/test_launcher.py:111 (four launcher tests): a value
# offered only where its mark's test finds CUDA. The mark's test moved to torch.npu and the value
# stayed: on the NPU the tests then ran on "cuda" (Torch not compiled with CUDA enabled) or with
# the NCCL backend, where unmigrated they were skipped. Now the value moves with the mark's test.
GATED_PARAMS = """\
import pytest
import torch
import torch.distributed as dist

available_devices_list = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="Skip if no CUDA support")),
    pytest.param("cuda:1", marks=[pytest.mark.skipif(torch.cuda.device_count() < 2, reason="Skip if less than 2 GPUs")]),
    pytest.param("cuda", marks=pytest.mark.slow),
    pytest.param("mps", marks=pytest.mark.skipif(not torch.backends.mps.is_available(), reason="Skip if no MPS support")),
]


@pytest.fixture(params=available_devices_list)
def available_device(request):
    return request.param


@pytest.mark.parametrize(
    "backend",
    ["gloo", pytest.param("nccl", marks=pytest.mark.skipif(torch.cuda.device_count() < 1, reason="Skip if no GPU"))],
)
def test_idist_parallel(backend):
    dist.init_process_group(backend=backend)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", id="gpu")])
def test_zeros(device):
    assert torch.zeros(1, device=device).sum() == 0
"""


def test_a_value_offered_under_a_cuda_mark_moves_with_the_marks_test():
    result = assert_partial_as_whole(GATED_PARAMS, "conftest.py")
    assert result.error is None
    migrated = with_torch_npu(GATED_PARAMS.replace("import torch.distributed as dist\n", "")).replace(
        "import torch_npu  # noqa: F401\n", "import torch.distributed as dist\nimport torch_npu  # noqa: F401\n")
    for before, after in [
        ('pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available()',
         'pytest.param("npu", marks=pytest.mark.skipif(not torch.npu.is_available()'),
        ('pytest.param("cuda:1", marks=[pytest.mark.skipif(torch.cuda.device_count()',
         'pytest.param("npu:1", marks=[pytest.mark.skipif(torch.npu.device_count()'),
        ('pytest.param("nccl", marks=pytest.mark.skipif(torch.cuda.device_count()',
         'pytest.param("hccl", marks=pytest.mark.skipif(torch.npu.device_count()'),
        # a device-named parameter's value, with or without marks, as its plain strings
        ('pytest.param("cuda", id="gpu")', 'pytest.param("npu", id="gpu")'),
    ]:
        assert before in migrated
        migrated = migrated.replace(before, after)
    # a mark that does not ask for CUDA says nothing of its value: `pytest.param("cuda",
    # marks=pytest.mark.slow)` stays, as a plain "cuda" in a list does
    assert 'pytest.param("cuda", marks=pytest.mark.slow)' in migrated
    assert result.new_text == migrated + PARTIAL_PADDING
    assert sorted(e.code for e in result.edits) == [
        "NPU102", "NPU102", "NPU102", "NPU105", "NPU105", "NPU105", "NPU106", "NPU108"]


# ... but a value the module also tests as a label keeps its name, whatever its branch moves to:
# main's output (the branch's backend becomes "hccl"), which moving the label alone would skip.
GATED_LABEL = """\
import pytest
import torch
import torch.distributed as dist


@pytest.fixture(params=["gloo", pytest.param("nccl", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="x"))])
def backend(request):
    if request.param == "nccl":
        dist.init_process_group("nccl")
    return request.param
"""


def test_a_value_offered_under_a_cuda_mark_and_tested_as_a_label_keeps_its_name():
    result = assert_partial_as_whole(GATED_LABEL, "conftest.py")
    assert result.error is None
    migrated = GATED_LABEL.replace(
        "import torch.distributed as dist\n", "import torch.distributed as dist\nimport torch_npu  # noqa: F401\n").replace(
        "not torch.cuda.is_available()", "not torch.npu.is_available()").replace(
        'dist.init_process_group("nccl")', 'dist.init_process_group("hccl")')
    assert 'pytest.param("nccl", marks=' in migrated
    assert result.new_text == migrated + PARTIAL_PADDING


# pytorch-ignite 0.5.5 examples/mnist: ten scripts train through ignite's engine
# (`trainer = create_supervised_trainer(...)`, `trainer.run(train_loader, max_epochs=epochs)`)
# and one, mnist_save_resume_engine.py, through its own update function (loss.backward()): with
# --modelarts the ten, mnist.py included, were taken for utilities run by hand beside it and not
# adapted. An engine's run trains.
IGNITE_MNIST = """\
from argparse import ArgumentParser

from ignite.engine import create_supervised_trainer


def run(epochs):
    trainer = create_supervised_trainer(model, optimizer, criterion, device=device)
    trainer.run(train_loader, max_epochs=epochs)


if __name__ == "__main__":
    parser = ArgumentParser()
    parser.add_argument("--epochs", type=int, default=10)
    run(parser.parse_args().epochs)
"""
IGNITE_RESUME = """\
def train_step(engine, batch):
    loss = criterion(model(batch[0]), batch[1])
    loss.backward()


if __name__ == "__main__":
    run()
"""
DATA_PREP = """\
import argparse

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", default=".")
    download(parser.parse_args().root)
"""


def test_a_script_that_trains_through_an_engines_run_is_no_utility(tmp_path):
    from npu_migrate.modelarts.project import utility_scripts

    for name, text in [("mnist.py", IGNITE_MNIST), ("mnist_save_resume_engine.py", IGNITE_RESUME),
                       ("prepare.py", DATA_PREP)]:
        (tmp_path / name).write_text(text)
    texts = {str(p): p.read_bytes() for p in sorted(tmp_path.iterdir())}
    assert utility_scripts(texts) == (str(tmp_path / "prepare.py"),)


# torchtune 0.6.1 training/precision.py:63-71 (verify_bf16_support, which every bf16 recipe
# calls) with utils/_device.py:37-47's is_npu_available: the last test of the `and` chain has no
# NPU twin and stays (NPU301). Main moved the three tests before it: on the NPU the chain then
# reached torch.cuda.nccl.version() and raised, where unmigrated it stopped at the first test and
# npu_support answered. The chain now stays CUDA as a whole.
TORCHTUNE_BF16 = """\
import torch


def is_torch_npu_available() -> bool:
    try:
        import torch_npu  # noqa: F401
    except ImportError:
        return False
    return torch.npu.is_available()


is_npu_available = is_torch_npu_available()


def verify_bf16_support() -> bool:
    cuda_support = (
        torch.cuda.is_available()
        and torch.cuda.is_bf16_supported()
        and torch.distributed.is_nccl_available()
        and torch.cuda.nccl.version() >= (2, 10)
    )
    npu_support = is_npu_available and torch.npu.is_bf16_supported()
    return cuda_support or npu_support


if torch.cuda.is_available() and torch.cuda.get_arch_list():
    print("arch", torch.cuda.get_arch_list())
"""


def test_an_and_chain_ending_in_a_call_without_npu_twin_stays_cuda():
    result = assert_partial_as_whole(TORCHTUNE_BF16, "precision.py")
    assert result.error is None
    assert (result.new_text, result.edits) == (None, [])  # unchanged: nothing else in it moves
    assert [(f.code, f.span.line) for f in result.findings] == [("NPU301", 20), ("NPU301", 26), ("NPU301", 27)]


@pytest.mark.slow
def test_bf16_support_is_answered_on_the_npu_instead_of_raising(run_on_standin):
    source = TORCHTUNE_BF16.split("\n\n\nif torch.cuda")[0] + "\n\n\nprint(verify_bf16_support())\n"
    assert migrate_source(source, "precision.py", Options()).new_text is None  # left as it is
    done = run_on_standin(source, migrate=False)
    assert (done.returncode, done.stdout) == (0, "True\n"), done.stderr
    # as main migrated it: the three tests moved, the chain reached the CUDA-only call
    half = done.migrated.replace("torch.cuda.is_available()\n        and torch.cuda.is_bf16_supported()\n"
                                 "        and torch.distributed.is_nccl_available()",
                                 "torch.npu.is_available()\n        and torch.npu.is_bf16_supported()\n"
                                 "        and torch.distributed.is_hccl_available()")
    half = half.replace("import torch\n", "import torch\nimport torch_npu  # noqa: F401\n", 1)
    done = run_on_standin(half, migrate=False)
    assert done.returncode != 0 and "_nccl_version" in done.stderr, done.stderr


# torchtune 0.6.1 recipes/lora_finetune_distributed.py:918 (and full_dpo, knowledge_distillation,
# lora_dpo distributed, qat_distributed, dev/lora_finetune_distributed_multi_dataset): torch's
# per-device backend form. The recipes' tensors moved to the NPU and the process group kept NCCL
# for CUDA only (no backend for the NPU's tensors), with nothing reported. Now the CUDA pair
# becomes the NPU's; the other pairs stay. (With the CUDA pair first only: see BackendRewriter.)
PER_DEVICE_BACKEND = """\
import torch
from torch.distributed import init_process_group


def recipe_main():
    init_process_group("cuda:nccl,cpu:gloo")
    x = torch.zeros(1).cuda()


def other():
    init_process_group(backend="cuda:gloo")
    init_process_group("cpu:gloo")
"""


def test_a_per_device_backend_string_moves_its_cuda_pair():
    result = assert_partial_as_whole(PER_DEVICE_BACKEND, "lora_finetune_distributed.py")
    assert result.error is None
    migrated = with_torch_npu(PER_DEVICE_BACKEND).replace(
        'init_process_group("cuda:nccl,cpu:gloo")', 'init_process_group("npu:hccl,cpu:gloo")').replace(
        "torch.zeros(1).cuda()", "torch.zeros(1).npu()")
    assert result.new_text == migrated + PARTIAL_PADDING
    assert sorted(e.code for e in result.edits) == ["NPU101", "NPU106", "NPU108"]


# ... with the CUDA pair anywhere (torch's docs write "cpu:gloo,cuda:nccl"), in any case, spaces kept
# (torch splits at "," and ":" without stripping), in a file where nothing else names CUDA: the
# prefilter and partial parsing find the pair (words.cuda_pair), not only a string's first word.
PER_DEVICE_BACKEND_CUDA_SECOND = """\
import torch.distributed as dist


def setup(args):
    dist.init_process_group("cpu:gloo,cuda:nccl")
    dist.init_process_group(backend="cpu:gloo, cuda:nccl")
    dist.init_process_group(backend="mps:gloo,CUDA:NCCL,cpu:gloo")
    dist.init_process_group(backend="cpu:gloo,cuda:gloo")
    print("cpu:gloo,cuda:nccl")
"""


def test_a_per_device_backend_string_moves_its_cuda_pair_wherever_it_stands():
    result = assert_partial_as_whole(PER_DEVICE_BACKEND_CUDA_SECOND, "train.py")
    assert result.error is None
    assert result.new_text == PER_DEVICE_BACKEND_CUDA_SECOND.replace(
        "import torch.distributed as dist\n", "import torch.distributed as dist\nimport torch_npu  # noqa: F401\n").replace(
        'group("cpu:gloo,cuda:nccl")', 'group("cpu:gloo,npu:hccl")').replace(
        '"cpu:gloo, cuda:nccl"', '"cpu:gloo, npu:hccl"').replace(
        '"mps:gloo,CUDA:NCCL,cpu:gloo"', '"mps:gloo,NPU:HCCL,cpu:gloo"') + PARTIAL_PADDING
    assert sorted((e.code, e.span.line) for e in result.edits) == [("NPU106", 5), ("NPU106", 6), ("NPU106", 7),
                                                              ("NPU108", 2)]


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["cuda:nccl,cpu:gloo", "cpu:gloo,cuda:nccl"])
def test_the_per_device_process_group_reduces_npu_tensors(run_on_standin, backend):
    import socket

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        env = {"MASTER_PORT": str(free.getsockname()[1])}
    source = """\
import os
import torch
import torch.distributed as dist
from torch.distributed import init_process_group

os.environ.update(MASTER_ADDR="127.0.0.1", RANK="0", WORLD_SIZE="1")
init_process_group("cuda:nccl,cpu:gloo")
t = torch.ones(2).cuda()
dist.all_reduce(t)
print(t.tolist())
dist.destroy_process_group()
""".replace("cuda:nccl,cpu:gloo", backend)
    moved = backend.replace("cuda:nccl", "npu:hccl")
    done = run_on_standin(source, env=env)
    assert f'init_process_group("{moved}")' in done.migrated
    assert (done.returncode, done.stdout) == (0, "[1.0, 1.0]\n"), done.stderr
    # as main migrated it: the tensors moved, the process group kept NCCL for CUDA only
    half = done.migrated.replace(f'"{moved}"', f'"{backend}"')
    done = run_on_standin(half, migrate=False, env=env)
    assert done.returncode != 0 and "NCCL" in done.stderr, done.stderr


# What pytest does with a fixture's params, for the stand-in (which has no pytest): a value runs
# its test unless a skipif mark's condition holds.
PYTEST_SHIM = """\
class _Param:
    def __init__(self, *values, marks=(), id=None):
        self.values, self.marks = values, marks if isinstance(marks, (list, tuple)) else [marks]


class _Mark:
    def __init__(self, name, args):
        self.name, self.args = name, args


class mark:
    slow = _Mark("slow", ())

    @staticmethod
    def skipif(condition, reason=""):
        return _Mark("skipif", (condition,))


def param(*values, marks=(), id=None):
    return _Param(*values, marks=marks, id=id)


def fixture(params=()):
    return lambda f: f
"""


@pytest.mark.slow
def test_the_device_fixture_runs_its_tests_on_the_npu(run_on_standin, tmp_path):
    (tmp_path / "pytest.py").write_text(PYTEST_SHIM)
    run = """\

for p in available_devices_list[:2]:
    value = p if isinstance(p, str) else p.values[0]
    if any(m.name == "skipif" and m.args[0] for m in getattr(p, "marks", ())):
        print(value, "skipped")
        continue
    torch.zeros(1, device=value)
    print(value, "ran")
"""
    source = GATED_PARAMS.split("\n\n\n@pytest.fixture")[0].replace("import torch.distributed as dist\n", "") + run
    done = run_on_standin(source)
    assert (done.returncode, done.stdout) == (0, "cpu ran\nnpu ran\n"), done.stderr
    # as main migrated it before: the mark's test moved alone, and the test ran on CUDA
    half = done.migrated.replace('pytest.param("npu", marks', 'pytest.param("cuda", marks')
    done = run_on_standin(half, migrate=False)
    assert done.returncode != 0 and "Torch not compiled with CUDA enabled" in done.stderr, done.stderr
    # unmigrated, the NPU machine skipped it
    done = run_on_standin(source, migrate=False)
    assert (done.returncode, done.stdout) == (0, "cpu ran\ncuda skipped\n"), done.stderr


# fairseq 0.12.2 utils.py:755-760, built by every Trainer that trains on the device
# (trainer.py:157): the compute-capability version read through a variable. Migrated, it raised
# AttributeError at the start of every training run, with nothing reported; now the statement
# stays CUDA and NPU307 says why, as for `get_device_properties(d).major`.
CUDA_ENVIRONMENT = """\
import torch


class CudaEnvironment(object):
    def __init__(self):
        cur_device = torch.cuda.current_device()
        prop = torch.cuda.get_device_properties("cuda:{}".format(cur_device))
        self.name = prop.name
        self.major = prop.major
        self.minor = prop.minor
"""


def test_a_device_properties_version_read_through_a_variable_is_kept_and_reported():
    result = migrate_source(CUDA_ENVIRONMENT, "utils.py", Options())
    assert result.error is None
    assert result.new_text == with_torch_npu(CUDA_ENVIRONMENT).replace(
        "torch.cuda.current_device()", "torch.npu.current_device()")
    assert [(f.code, f.span.line, f.api) for f in result.findings] == [
        ("NPU307", 7, "torch.cuda.get_device_properties")]
    assert "(...).major`" in result.findings[0].message


# OpenNMT-py 3.5.1 onmt/opts.py:468: every option is declared with configargparse's `add` (its
# alias of add_argument), in a module that imports no torch; onmt/utils/distributed.py:28 passes
# `opt.gpu_backend` to init_process_group while its set_device moved to the NPU, so multi-device
# training asked for NCCL on the NPU machine, unreported. A set's `add` stays.
ONMT_OPTS = """\
import configargparse


def distributed_opts(parser):
    group = parser.add_argument_group("Distributed")
    group.add(
        "--gpu_backend",
        "-gpu_backend",
        default="nccl",
        type=str,
        help="Type of torch distributed backend",
    )
    group.add_arg("--dist_backend", default="nccl")
    group.add("--gpu_verbose_level", "-gpu_verbose_level", default=0, type=int)
    seen = set()
    seen.add("nccl")
"""


def test_configargparse_add_declares_a_backend_option_like_add_argument():
    result = migrate_source(ONMT_OPTS, "opts.py", Options())
    assert result.error is None
    assert result.new_text == ONMT_OPTS.replace('        default="nccl",', '        default="hccl",').replace(
        '"--dist_backend", default="nccl"', '"--dist_backend", default="hccl"')
    assert [(e.code, e.span.line) for e in result.edits] == [("NPU106", 9), ("NPU106", 13)]
    assert result.findings == []


# poutyne 1.19.0 poutyne/framework/model.py:1776 (`Model.to("all")`): the device count moved to
# the NPU while the comprehension kept naming CUDA devices ("cuda:0".. then `network.to`), where a
# list display of the same strings moves.
POUTYNE_TO = """\
import torch


class Model:
    def to(self, device):
        if isinstance(device, list) or device == "all":
            if device == "all":
                device = [f"cuda:{device}" for device in range(torch.cuda.device_count())]
            self.device = device[0]
        else:
            self.device = device
        return self


def names():
    devices = (f"cuda:{i}" for i in range(torch.cuda.device_count()))
    labels = [f"cuda:{i}" for i in range(2)]
    return devices, labels
"""


def test_a_comprehension_of_device_strings_moves_with_the_device_count():
    result = migrate_source(POUTYNE_TO, "model.py", Options())
    assert result.error is None
    assert result.new_text == with_torch_npu(POUTYNE_TO).replace(
        "torch.cuda.device_count", "torch.npu.device_count").replace(
        'device = [f"cuda:{device}"', 'device = [f"npu:{device}"').replace(
        'devices = (f"cuda:{i}"', 'devices = (f"npu:{i}"')


# d2l 1.0.3 d2l/jax.py:278, 529: a JAX module whose input pipeline is tf.data (`tfds.as_numpy`
# hands NumPy batches to JAX). NPU126 added `drop_remainder=True` (a TF 1.15 rule for graphs on
# the NPU): nothing of it runs on the NPU, and the last batch of every epoch, the validation set's
# too, was silently dropped.
D2L_JAX = """\
import jax
from flax import linen as nn
import tensorflow as tf
import tensorflow_datasets as tfds


def get_tensorloader(tensors, train, batch_size):
    shuffle_buffer = tensors[0].shape[0] if train else 1
    return tfds.as_numpy(
        tf.data.Dataset.from_tensor_slices(tensors).shuffle(
            buffer_size=shuffle_buffer).batch(batch_size))
"""


def test_a_jax_module_feeding_on_tf_data_is_not_tensorflow_code():
    result = migrate_source(D2L_JAX, "jax.py", Options())
    assert result.error is None
    assert result.new_text is None  # unchanged
    assert (result.edits, result.findings) == ([], [])
    assert "parse" not in result.work  # the engine knows it before parsing: no whole libcst parse
    tf_module = D2L_JAX.replace("import jax\nfrom flax import linen as nn\n", "")
    result = migrate_source(tf_module, "data.py", Options())
    assert result.new_text == tf_module.replace(".batch(batch_size))", ".batch(batch_size, drop_remainder=True))")


# OpenNMT-py 3.5.1 onmt/utils/loss.py:113-127: the LM prior runs either as a PyTorch model
# (moves to the NPU) or through CTranslate2, whose devices are "cpu", "cuda" and "auto": its
# "cuda" became "npu", which CTranslate2 refuses (ValueError). It stays, and NPU303 says why.
ONMT_LM_PRIOR = """\
import torch


def lm_prior(opt, lm_prior_model, model_path):
    if opt.lm_prior_model[-3:] == ".pt":
        lm_prior_model.to(torch.device("cuda", opt.gpu))
        return lm_prior_model
    import ctranslate2

    return ctranslate2.Generator(model_path, device="cuda", compute_type="float16")
"""


def test_a_ctranslate2_device_is_not_torchs_and_is_reported():
    result = migrate_source(ONMT_LM_PRIOR, "loss.py", Options())
    assert result.error is None
    assert result.new_text == with_torch_npu(ONMT_LM_PRIOR).replace(
        'torch.device("cuda", opt.gpu)', 'torch.device("npu", opt.gpu)')
    assert [(f.code, f.span.line, f.api) for f in result.findings] == [
        ("NPU303", 8, "ctranslate2")]


# tinyms 0.3.2 tinyms/optimizers/bert_optimizer.py:378 (the ModelZoo BERT optimizer): "GPU"
# selects a GPU variant of the optimizer and the `else` is the Ascend path, so the code runs on
# Ascend as written. NPU348 advised making the GPU branch the Ascend one: wrong there. A "GPU"
# branch that sets the device up (set_context, init("nccl")) is still reported.
TINYMS_OPTIMIZER = """\
from mindspore import context
from mindspore.nn import AdamWeightDecay


def get_optimizer(args_opt, group_params, lr_schedule, eps):
    if args_opt.enable_lossscale == "true" and args_opt.device_target == 'GPU':
        optimizer = AdamWeightDecayForBert(group_params, learning_rate=lr_schedule, eps=eps)
    elif context.get_context("mode") == context.PYNATIVE_MODE and args_opt.device_target == 'GPU':
        optimizer = AdamWeightDecayOp(group_params, learning_rate=lr_schedule, eps=eps)
    else:
        optimizer = AdamWeightDecay(group_params, learning_rate=lr_schedule, eps=eps)
    return optimizer
"""


def test_a_gpu_variant_beside_the_ascend_path_gets_no_device_target_advice():
    result = migrate_source(TINYMS_OPTIMIZER, "bert_optimizer.py", Options())
    assert result.error is None
    assert (result.new_text, result.findings) == (None, [])
    setup = TINYMS_OPTIMIZER.replace(
        "        optimizer = AdamWeightDecayOp(", "        context.set_context(device_target='GPU')\n"
        "        optimizer = AdamWeightDecayOp(")
    result = migrate_source(setup, "bert_optimizer.py", Options())
    assert [(f.code, f.span.line) for f in result.findings] == [("NPU348", 6)]


# allennlp 2.10.1 allennlp/training/gradient_descent_trainer.py:15,366: the trainer reads the
# scaler's per-optimizer stage with the enum torch_npu's own GradScaler compares it with (`is`):
# torch_npu imports that very OptState from torch (torch.cuda.amp.grad_scaler in 2.1, torch.amp's,
# which torch.cuda.amp.grad_scaler re-exports, in 2.14). It was an NPU320 error ("torch_npu lacks
# torch.npu.amp.grad_scaler"); it stays, unreported, under every target, while GradScaler moves.
ALLENNLP_TRAINER = """\
import torch
from torch.cuda.amp.grad_scaler import OptState
from torch.cuda import amp


class Trainer:
    def __init__(self, use_amp):
        self._scaler = amp.GradScaler() if use_amp else None

    def _unscale(self, optimizer):
        if self._scaler._per_optimizer_states[id(optimizer)]["stage"] is not OptState.UNSCALED:
            self._scaler.unscale_(optimizer)
        ready = torch.cuda.amp.grad_scaler.OptState.READY
        return ready
"""


@pytest.mark.parametrize("target", ["", "2.1"])
def test_the_grad_scalers_stage_enum_is_no_device_code_and_stays(target):
    result = migrate_source(ALLENNLP_TRAINER, "gradient_descent_trainer.py", Options.of(torch_npu_version=target))
    assert result.error is None
    assert result.new_text == with_torch_npu(ALLENNLP_TRAINER).replace(
        "from torch.cuda import amp", "from torch.npu import amp")
    assert result.findings == []


# OpenNMT-py 3.5.1 onmt/inference_engine.py:221-246: the CTranslate2 engine keeps its device in
# an attribute that only CTranslate2 reads; "cuda" there is CTranslate2's device name ("npu" is
# refused: ValueError). The PyTorch engine's device in the same file still moves.
ONMT_CT2_ENGINE = """\
import torch


class InferenceEnginePY:
    def __init__(self, opt):
        self.model = torch.nn.Linear(2, 2).to("cuda")


class InferenceEngineCT2:
    def __init__(self, opt):
        import ctranslate2

        if opt.world_size == 1:
            self.device_index = opt.gpu_ranks
            self.device = "cuda"
        else:
            self.device_index = 0
            self.device = "cpu"
        self.translator = ctranslate2.Translator(
            opt.models[0], device=self.device, device_index=self.device_index
        )
"""


@pytest.mark.parametrize("read_elsewhere", [
    "",
    # a reader that is not CTranslate2: the value is torch's there too, and moves as before
    "        self.buffer = torch.zeros(1, device=self.device)\n",
    "        print(getattr(self, 'device'))\n",
    "\n\ndef run(engine):\n    return torch.ones(1).to(engine.device)\n",
])
def test_a_device_attribute_only_ctranslate2_reads_stays(read_elsewhere):
    text = ONMT_CT2_ENGINE + read_elsewhere
    result = migrate_source(text, "onmt/inference_engine.py", Options())
    expected = with_torch_npu(text).replace('.to("cuda")', '.to("npu")')
    if read_elsewhere:
        expected = expected.replace('self.device = "cuda"', 'self.device = "npu"')
    assert result.new_text == expected
    assert [(f.code, f.span.line, f.api) for f in result.findings] == [("NPU303", 11, "ctranslate2")]
    # the same answer when libcst parses only the statements that matter (partial.py)
    assert assert_partial_as_whole(text, "onmt/inference_engine.py").new_text == expected + PARTIAL_PADDING


# OpenNMT-py 3.5.1 onmt/translate/translation_server.py:99-143 (trimmed): the CTranslate2 engine's
# arguments are a dict display whose entries are set into `ct2_translator_args`, given as
# `ctranslate2.Translator(model_path, **ct2_translator_args)` in another class of the module.
# Its "cuda" became "npu", which CTranslate2 refuses ("cpu", "cuda", "auto"); it stays (NPU303
# at the import says to give it "cpu"); the PyTorch model's calls in the module still move.
ONMT_CT2_SERVER = """\
import torch


class CTranslate2Translator(object):
    def __init__(self, model_path, ct2_translator_args, ct2_translate_batch_args):
        import ctranslate2

        self.translator = ctranslate2.Translator(model_path, **ct2_translator_args)
        self.ct2_translate_batch_args = ct2_translate_batch_args

    @staticmethod
    def convert_onmt_to_ct2_opts(ct2_translator_args, ct2_translate_batch_args, opt):
        def setdefault_if_exists_must_match(obj, name, value):
            if name in obj:
                assert value == obj[name]
            else:
                obj.setdefault(name, value)

        default_for_translator = {
            "inter_threads": 1,
            "intra_threads": torch.get_num_threads(),
            "compute_type": "default",
        }
        for name, value in default_for_translator.items():
            ct2_translator_args.setdefault(name, value)

        onmt_for_translator = {
            "device": "cuda" if opt.cuda else "cpu",
            "device_index": opt.gpu if opt.cuda else 0,
        }
        for name, value in onmt_for_translator.items():
            setdefault_if_exists_must_match(ct2_translator_args, name, value)


class ServerModel(object):
    def to_gpu(self):
        torch.cuda.set_device(self.opt.gpu)
        self.translator.model.cuda()
"""


@pytest.mark.parametrize("read_elsewhere", [
    "",
    # read by torch too: its device moves by its key, as before
    "\n\ndef probe(opt):\n    args = {\"device\": \"cuda\"}\n    return torch.zeros(1, **args)\n",
    "\n\ndef probe(onmt_for_translator):\n    return torch.zeros(1, **onmt_for_translator)\n",
])
def test_a_device_dict_only_ctranslate2_is_given_stays(read_elsewhere):
    text = ONMT_CT2_SERVER + read_elsewhere
    result = migrate_source(text, "onmt/translate/translation_server.py", Options())
    expected = with_torch_npu(text).replace("torch.cuda.set_device", "torch.npu.set_device").replace(
        "model.cuda()", "model.npu()").replace('args = {"device": "cuda"}', 'args = {"device": "npu"}')
    if "onmt_for_translator" in read_elsewhere:
        expected = expected.replace('"device": "cuda" if', '"device": "npu" if')
    assert result.new_text == expected
    assert [(f.code, f.span.line, f.api) for f in result.findings] == [("NPU303", 6, "ctranslate2")]
    assert assert_partial_as_whole(text, "onmt/translate/translation_server.py").new_text == expected + PARTIAL_PADDING


# mindnlp 0.5.1 mindtorch/ (PyTorch's API written on MindSpore): mindtorch/dispatcher.py:46 maps
# "cuda" to the NPU itself on Ascend, nn/functional.py:50 takes a GPU workaround for "cuda", and
# its Tensor/Module define `def cuda(self, ...)`. A file importing only mindtorch had no
# framework, so it got the PyTorch pass: `== "cuda"` -> "npu" (the mapping became a no-op, the
# GPU workaround ran on Ascend), `def cuda(` -> `def npu(`, 100+ edits in an Ascend-ready library.
MINDTORCH_DISPATCH = """\
import mindtorch
from .configs import DEVICE_TARGET


def dispatch(device, input):
    if DEVICE_TARGET == "Ascend" and device.type == "cuda":
        device.type = "npu"
    if input.device.type == 'cuda':
        x, y = input.chunk(2, -1)
        return x * y
    return mindtorch.zeros(2, device="cuda")


class Tensor:
    def cuda(self, device=None, non_blocking=False):
        return self.to("cuda")
"""


@pytest.mark.parametrize("imported", ["import mindtorch\n", "import msadapter.pytorch as torch\n"])
def test_pytorchs_api_written_on_mindspore_is_not_pytorch_code(imported):
    text = MINDTORCH_DISPATCH.replace("import mindtorch\n", imported)
    result = migrate_source(text, "dispatcher.py", Options())
    assert result.error is None
    assert (result.new_text, result.edits, result.findings) == (None, [], [])
    assert result.frameworks == []


# pykeen 1.11.1 src/pykeen/utils.py:135 resolve_device: `"gpu"` is an alias the callers may pass
# (`--device gpu`), normalised to "cuda". The variable-only "gpu" rule (for the seed's
# `CALCULATE_DEVICE = "gpu:0"`) made the test `device == "npu"`: "gpu" then reached
# torch.device("gpu") (RuntimeError). Only a module that assigns such a literal moves its tests.
PYKEEN_RESOLVE = """\
import torch


def resolve_device(device=None):
    if device is None or device == "gpu":
        device = "cuda"
    if isinstance(device, str):
        device = torch.device(device)
    if not torch.cuda.is_available() and device.type == "cuda":
        device = torch.device("cpu")
    return device
"""


def test_a_gpu_alias_the_callers_pass_stays_in_its_test():
    result = migrate_source(PYKEEN_RESOLVE, "utils.py", Options())
    assert result.error is None
    assert result.new_text == with_torch_npu(PYKEEN_RESOLVE).replace(
        'device = "cuda"', 'device = "npu"').replace(
        'torch.cuda.is_available() and device.type == "cuda"', 'torch.npu.is_available() and device.type == "npu"')
    assigned = "import torch\nDEVICE = 'gpu:0'\nif DEVICE == 'gpu:0':\n    torch.cuda.set_device(DEVICE)\n"
    result = migrate_source(assigned, "seed.py", Options())
    assert result.new_text == with_torch_npu(assigned).replace("'gpu:0'", "'npu:0'").replace("torch.cuda", "torch.npu")


# The CUDA test that picks another library's device stays with the "cuda" it picks: CTranslate2
# (OpenNMT-py's engine: cpu/cuda/auto) got `device="cuda" if torch.npu.is_available() else "cpu"`,
# i.e. "cuda" on the Ascend machine (ValueError), where as written it gets "cpu". cleanrl 1.2.0
# ppo_continuous_action_isaacgym.py:221-229: Isaac Gym (CUDA/CPU simulation, NVIDIA rendering) got
# sim_device/rl_device "npu:0" and, on an NPU machine, graphics_device_id=0 and headless=False.
FOREIGN_DEVICES = """\
import torch
import ctranslate2
import isaacgymenvs

device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")
generator = ctranslate2.Generator(path, device="cuda" if torch.cuda.is_available() else "cpu")
envs = isaacgymenvs.make(
    seed=args.seed,
    sim_device="cuda:0" if torch.cuda.is_available() and args.cuda else "cpu",
    rl_device="cuda:0" if torch.cuda.is_available() and args.cuda else "cpu",
    graphics_device_id=0 if torch.cuda.is_available() and args.cuda else -1,
    headless=False if torch.cuda.is_available() and args.cuda else True,
)
"""


def test_a_cuda_test_picking_another_librarys_device_stays_with_it():
    result = migrate_source(FOREIGN_DEVICES, "ppo.py", Options())
    assert result.error is None
    assert result.new_text == with_torch_npu(FOREIGN_DEVICES).replace(
        'torch.device("cuda" if torch.cuda.is_available()', 'torch.device("npu" if torch.npu.is_available()')
    assert [(f.code, f.span.line, f.api) for f in result.findings] == [
        ("NPU303", 2, "ctranslate2"), ("NPU303", 3, "isaacgymenvs")]


# mindnlp 0.5.1 mindtorch/distributed/__init__.py:34-60: an import list of names commented out
# one per line. The prefilter's import-list regex could split each comment many ways, so the
# search for a MindSpore rule's imported name (NPU347's `Custom`, a word of a comment there)
# backtracked exponentially:
# the run never ended (a MindSpore module; the same with `import mindtorch` once that is
# MindSpore code). A comment now matches only whole: this returns at once.
COMMENTED_IMPORTS = "import mindspore\n\n# Custom Runtime Errors\nDistError = RuntimeError\n\nif is_available():\n    from .c10d import (\n" + "".join(
    f"        # _commented_out_name_{i},\n" for i in range(24)) + "        PrefixStore,\n        Store,\n    )\n"


def test_an_import_list_of_commented_out_names_does_not_hang_the_prefilter():
    result = migrate_source(COMMENTED_IMPORTS, "__init__.py", Options())
    assert result.error is None
    assert (result.new_text, result.edits, result.findings) == (None, [], [])


# pytorch-pfn-extras 0.9.0 runtime/_autocast.py:6-10: `import torch.cuda.amp` is the module's only
# import of torch (it binds `torch` too). It became `import torch_npu.npu.amp`, which binds
# torch_npu only: `torch.npu.is_available()` below raised NameError, so every
# `import pytorch_pfn_extras` failed after migration (found by rehearsing a ppe training script).
PPE_AUTOCAST = """\
import contextlib

_cuda_amp_available = False

try:
    import torch.cuda.amp

    _cuda_amp_available = torch.cuda.is_available() and hasattr(
        torch.cuda.amp, "autocast"
    )
except ImportError:
    pass
"""


def test_an_import_of_a_torch_cuda_submodule_keeps_binding_torch():
    result = migrate_source(PPE_AUTOCAST, "_autocast.py", Options())
    assert result.error is None
    assert result.new_text == PPE_AUTOCAST.replace(
        "    import torch.cuda.amp\n", "    import torch, torch_npu.npu.amp\n").replace(
        "torch.cuda.is_available()", "torch.npu.is_available()").replace("torch.cuda.amp,", "torch.npu.amp,")
    again = migrate_source(result.new_text, "_autocast.py", Options())
    assert again.error is None and not again.changed
    # with its own `import torch` the module needs no second binding
    beside = "import torch\n" + PPE_AUTOCAST
    result = migrate_source(beside, "_autocast.py", Options())
    assert "    import torch_npu.npu.amp\n" in result.new_text and "import torch, " not in result.new_text


# The gates' evidence (guards._DeviceGates.evidence) looked at each name of an `import a, b`
# statement as an import of its own, built with the name's trailing comma: libcst refused it
# (CSTValidationError), and the whole file failed ("internal error in the torch pass"). Found
# when the fix above met its own output (`import torch, torch_npu.npu.amp`); any script that
# imports torch beside another module on one line and tests CUDA had it.
def test_a_file_importing_torch_beside_another_module_on_one_line_migrates():
    text = "import torch, os\n\nif torch.cuda.is_available():\n    x = torch.zeros(1).cuda()\n"
    result = migrate_source(text, "train.py", Options())
    assert result.error is None
    assert result.new_text == "import torch, os\nimport torch_npu  # noqa: F401\n\n" \
        "if torch.npu.is_available():\n    x = torch.zeros(1).npu()\n"


# cleanrl 1.2.0 dqn.py:150-250 (every cleanrl script): the whole script is under
# `if __name__ == "__main__":`. --distributed took the module as the model's scope and the whole
# block as the statement that moves it, so `q_network = distributed_model(q_network)` went after
# the block, at module level: DDP wrapped the model only once training was over (each rank
# trained alone), while unwrap_model/is_main_process were put inside. The wrap now goes into the block.
CLEANRL_MAIN = """\
import torch
import torch.nn as nn
import torch.optim as optim

if __name__ == "__main__":
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    q_network = nn.Linear(4, 2).to(device)
    optimizer = optim.Adam(q_network.parameters(), lr=1e-3)
    for step in range(10):
        loss = q_network(torch.randn(8, 4, device=device)).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    torch.save(q_network.state_dict(), "q.pt")
"""


CLEANRL_MAIN_DISTRIBUTED = """\
import torch
import torch.nn as nn
import torch.optim as optim
import torch_npu  # noqa: F401

from npu_migrate_distributed import (  # npu-migrate: distributed
    distributed_cleanup,
    distributed_model,
    distributed_setup,
    is_main_process,
    unwrap_model,
)

if __name__ == "__main__":
    distributed_setup()
    device = torch.device("npu" if torch.npu.is_available() else "cpu")
    q_network = nn.Linear(4, 2).to(device)
    q_network = distributed_model(q_network)
    optimizer = optim.Adam(q_network.parameters(), lr=1e-3)
    for step in range(10):
        loss = q_network(torch.randn(8, 4, device=device)).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    if is_main_process():
        torch.save(unwrap_model(q_network).state_dict(), "q.pt")
    distributed_cleanup()
"""


def test_distributed_wraps_the_model_inside_a_main_block_that_holds_the_script():
    result = migrate_source(CLEANRL_MAIN, "dqn.py", Options(distributed=True))
    assert result.error is None
    assert result.new_text == CLEANRL_MAIN_DISTRIBUTED
# torchreid 0.2.5 reid/utils/torchtools.py:81-92 (load_checkpoint, which its model zoo's
# load_pretrained_weights calls): map_location is None only where CUDA is. As
# `torch.npu.is_available()` the NPU machine got None and a CUDA-saved checkpoint raised
# "Attempting to deserialize object on a CUDA device"; kept, it loads to the CPU there as written.
TORCHREID_LOAD = """\
import pickle
from functools import partial

import torch


def load_checkpoint(fpath):
    map_location = None if torch.cuda.is_available() else 'cpu'
    try:
        checkpoint = torch.load(fpath, map_location=map_location)
    except UnicodeDecodeError:
        pickle.load = partial(pickle.load, encoding="latin1")
        checkpoint = torch.load(
            fpath, pickle_module=pickle, map_location=map_location
        )
    return checkpoint


def open_all_layers(model):
    model.cuda()
"""


def test_a_checkpoint_location_none_only_on_cuda_stays_and_says_why():
    result = migrate_source(TORCHREID_LOAD, "torchreid/reid/utils/torchtools.py", Options())
    assert result.new_text == with_torch_npu(TORCHREID_LOAD).replace("model.cuda()", "model.npu()")
    assert [(f.code, f.severity, f.span.line, f.span.col) for f in result.findings] == [("NPU318", "info", 8, 28)]
    # the same answer when libcst parses only the statements that matter (partial.py)
    assert_partial_as_whole(TORCHREID_LOAD, "torchtools.py")
    # a variable not read as map_location moves as before
    as_device = TORCHREID_LOAD.replace("map_location=map_location", "map_location='cpu'")
    moved = migrate_source(as_device, "torchtools.py", Options())
    assert "None if torch.npu.is_available() else 'cpu'" in moved.new_text
    assert [f.code for f in moved.findings] == []


# avalanche-lib 0.6.0 (training/plugins/generative_replay.py, benchmarks/datasets/cub200/cub200.py):
# a licence banner of comment lines padded with spaces to a closing `#`, the first one after a
# `.`. The prefilter's gap between an attribute chain's parts (`\.<gap>double\b`) let a
# comment end before any of its trailing spaces, so each line split ~40 ways and the search
# backtracked for ever (the word `double` in a docstring asked for NPU306's `.double`): both
# workers spun and the run never ended. A comment now matches only whole: this returns at once.
BANNER = "#" * 80 + "\n" + "".join(
    f"# {line:<76} #\n" for line in (
        "Copyright (c) 2021 Someone.", "Licensed under the MIT License.", "See the LICENSE file.",
        "", "Date: 05-03-2022", "Author: Some One", "Website: example.org")) + "#" * 80 + "\n"
BANNERED = BANNER + (
    '"""Replay plugins: double the replay data."""\nimport torch\n\n\n'
    'def sample(model, device):\n    return model(torch.zeros(2).to(device))\n')


def test_a_banner_of_padded_comment_lines_does_not_hang_the_prefilter():
    result = migrate_source(BANNERED, "generative_replay.py", Options())
    assert result.error is None
    assert (result.new_text, result.edits, result.findings) == (None, [], [])


# lightly 1.6.0 cli/train_cli.py:50-51: Lightning's accelerator chosen by a CUDA test. "gpu" is
# a Lightning accelerator name, never a torch device (Lightning has none called "npu": NPU313).
# The IfExp made `accelerator` a device variable, so the variable-only "gpu" rule moved the arm
# to "npu" while the comparison on the next line stayed "gpu": a value and its reader split.
# Now "gpu" stays in both, as it does in the keyword form `Trainer(accelerator="gpu" if ...)`.
# And the test that picks it stays too (heldout21): moved, it picked "gpu" on the Ascend machine,
# where Lightning finds no GPU and stops; as written it picks "cpu" and trains.
LIGHTNING_ACCELERATOR = """\
import torch
import pytorch_lightning as pl


def train(cfg, model):
    accelerator = "gpu" if torch.cuda.is_available() else "cpu"
    if accelerator == "gpu" and cfg["gpus"] > 1:
        devices, strategy = cfg["gpus"], "ddp"
    else:
        devices, strategy = 1, None
    trainer = pl.Trainer(accelerator=accelerator, devices=devices, strategy=strategy)
    trainer.fit(model)
"""


def test_a_lightning_accelerator_chosen_by_a_cuda_test_keeps_gpu_with_its_reader():
    result = migrate_source(LIGHTNING_ACCELERATOR, "train_cli.py", Options())
    assert result.error is None
    assert (result.new_text, result.edits) == (None, [])


# rl-games 1.6.5 (and IsaacGymEnvs): `train_dir` is the folder a run writes its checkpoints and
# summaries to ("runs"). An entry script's `--train_dir` defaulting to "runs" was taken for a
# data argument ("train" is a data word, "dir" a path suffix): on ModelArts it then pointed into
# the local copy of the input, the checkpoints went to /cache/data, and the rehearsal said
# "FAILED: nothing reached train_url". A folder default named for outputs makes it an output.
TRAIN_DIR_ENTRY = """\
import argparse

parser = argparse.ArgumentParser()
parser.add_argument("--file", default="cartpole.yaml")
parser.add_argument("--train_dir", default="runs")
parser.add_argument("--val_dir", default="data/val")
parser.add_argument("--log_root", default="./logs/")
parser.add_argument("--weights", default="checkpoints/best.pt")
args = parser.parse_args()
"""


def test_a_path_argument_defaulting_to_an_output_folder_is_an_output():
    import ast

    result = migrate_source(TRAIN_DIR_ENTRY, "train.py", Options(modelarts=True))
    assert result.error is None
    calls = [node for node in ast.walk(ast.parse(result.new_text)) if isinstance(node, ast.Call)
             and isinstance(node.func, ast.Name) and node.func.id == "modelarts_setup"]
    assert [{k.arg: ast.literal_eval(k.value) for k in call.keywords} for call in calls] == [
        {"data": ["val_dir"], "outputs": ["train_dir", "log_root"]}]


# gpytorch 1.15.2 test/priors/test_normal_prior.py (and four more prior tests): a test moves a prior
# to the GPU and asserts where its tensors went with unittest's assertEqual. `.cuda()` became
# `.npu()` but the asserted "cuda" stayed: the migrated test failed on the NPU (device.type is
# "npu" there). The assertion's literal now moves as in `x.device.type == "cuda"`; a literal
# compared with something that is not a device (a name, a keyword argument) stays.
PRIOR_TEST = """\
import unittest

import torch
import torch.distributed as dist


class TestNormalPrior(unittest.TestCase):
    def test_normal_prior_to_gpu(self):
        if torch.cuda.is_available():
            prior = NormalPrior(0, 1).cuda()
            self.assertEqual(prior.loc.device.type, "cuda")
            self.assertEqual("cuda", prior.scale.device.type)
            self.assertNotEqual(str(prior.loc.device), "cuda:1")
            self.assertIn("cuda", str(prior.loc.device))
            self.assertEqual(dist.get_backend(), "nccl")
            self.assertEqual(prior.name, "cuda")
            self.assertEqual(first=prior.loc.device.type, second="cuda")
"""


def test_unittest_assertions_on_a_device_move_with_the_device():
    result = migrate_source(PRIOR_TEST, "test/priors/test_normal_prior.py", Options())
    assert result.error is None
    expected = PRIOR_TEST.replace("import torch.distributed as dist\n",
                                  "import torch.distributed as dist\nimport torch_npu  # noqa: F401\n")
    expected = expected.replace("torch.cuda.", "torch.npu.").replace(".cuda()", ".npu()")
    for before, after in (('type, "cuda")', 'type, "npu")'), ('("cuda", prior', '("npu", prior'),
                          ('"cuda:1"', '"npu:1"'), ('assertIn("cuda"', 'assertIn("npu"'), ('"nccl"', '"hccl"')):
        expected = expected.replace(before, after, 1)
    assert result.new_text == expected
    assert 'self.assertEqual(prior.name, "cuda")' in result.new_text
    assert 'second="cuda")' in result.new_text
    assert [(e.code, e.span.line) for e in result.edits] == [
        ("NPU108", 5), ("NPU102", 9), ("NPU101", 10), ("NPU105", 11), ("NPU105", 12), ("NPU105", 13), ("NPU105", 14),
        ("NPU106", 15)]
    assert_partial_as_whole(PRIOR_TEST, "test_normal_prior.py")


# gpytorch 1.15.2 gpytorch/kernels/multi_device_kernel.py: the multi-GPU kernel subclasses
# DataParallel (its notebook Simple_MultiGPU_GP_Regression builds it over every device). NPU305
# reported `DataParallel(model)` calls only, so the class that builds one on every instance went
# unreported. A class base named by a call finding with no argument condition (NPU305, NPU302's
# CUDAExtension) is now reported there; the explicit `DataParallel.__init__` is not a second one.
MULTI_DEVICE_KERNEL = """\
import torch
from torch.nn.parallel import DataParallel

from .kernel import Kernel


class MultiDeviceKernel(DataParallel, Kernel):
    def __init__(self, base_kernel, device_ids, output_device=None):
        DataParallel.__init__(self, module=base_kernel, device_ids=device_ids, output_device=output_device, dim=-2)
        self.output_device = output_device if output_device else device_ids[0]


class Checked(torch.nn.parallel.DistributedDataParallel, metaclass=type):
    pass
"""


def test_a_class_built_on_data_parallel_is_reported_at_its_base():
    result = migrate_source(MULTI_DEVICE_KERNEL, "gpytorch/kernels/multi_device_kernel.py", Options())
    assert result.error is None and result.new_text is None
    assert [(f.code, f.severity, f.span.line, f.span.col) for f in result.findings] == [("NPU305", "error", 7, 25)]
    assert "`torch.nn.parallel.DataParallel` is not supported" in result.findings[0].message
    assert_partial_as_whole(MULTI_DEVICE_KERNEL, "multi_device_kernel.py")


# MindsporeTrainer 0.2.0 MindsporeTrainer/launcher.py: `--device_target` is declared in the same file
# (default "Ascend") and read through a variable, `target = args.device_target`, passed to
# set_context. `set_context(device_target=args.device_target)` was silent (the option's default is
# the file's and moves: NPU142), but the variable drew NPU346 "comes from `target`, which this file
# does not show" -- also inside `if target == "Ascend":`. A variable bound only to such an option
# is now the option; one bound to something the file does not declare still draws NPU346.
TRAINER_LAUNCHER = """\
import argparse

import mindspore as ms


def build_argument_parser():
    parser = argparse.ArgumentParser()
    parser.add_argument('--device_target', type=str, default='GPU', choices=['Ascend', 'GPU', 'CPU'])
    return parser


def set_context(args):
    target = args.device_target
    if target == "CPU":
        args.distribute = False
    ms.context.set_context(mode=ms.context.PYNATIVE_MODE, device_target=target)


def set_other(cfg):
    target = cfg.backend_name
    ms.context.set_context(device_target=target)
"""


def test_a_variable_holding_the_files_device_option_moves_with_its_default():
    result = migrate_source(TRAINER_LAUNCHER, "MindsporeTrainer/launcher.py", Options())
    assert result.error is None
    assert result.new_text == TRAINER_LAUNCHER.replace("default='GPU'", "default='Ascend'")
    assert [(e.code, e.span.line) for e in result.edits] == [("NPU142", 8)]
    assert [(f.code, f.span.line, f.span.col) for f in result.findings] == [("NPU346", 21, 42)]
    assert "`target`" in result.findings[0].message


# fastai 2.8.12 (fastai/torch_core.py, distributed.py, learner.py): `torch` comes from a star import,
# `from .torch_imports import *` (torch_imports.py does `import torch`), beside `from torch.nn.parallel
# import ...`. `torch` resolved to nothing, so `torch.cuda.set_device(gpu)` stayed while the same
# function's `backend='nccl'` became 'hccl' (and `.cuda()` `.npu()`): setup_distrib was half
# migrated, and default_device() and set_seed kept torch.cuda. A star import now brings `torch` as
# it brings `tf` (frameworks.STAR_IMPORTED_ALIASES), and `import torch_npu` goes right after the
# first star import (before any use), also where the file imports nothing of torch itself.
FASTAI_TORCH_CORE = """\
from .imports import *
from .torch_imports import *


def setup_distrib(gpu=None):
    if gpu is None: return gpu
    gpu = int(gpu)
    torch.cuda.set_device(int(gpu))
    if num_distrib() > 0: torch.distributed.init_process_group(backend='nccl', init_method='env://')
    return gpu


def default_device(use=True):
    if use and torch.cuda.is_available(): return torch.device(torch.cuda.current_device())
    return torch.device('cpu')


def load_model(file, model, device=None):
    if isinstance(device, int): device = torch.device('cuda', device)
    return torch.load(file, map_location=device)


from torch.nn.parallel import DistributedDataParallel
"""
FASTAI_TORCH_CORE_MIGRATED = FASTAI_TORCH_CORE.replace(
    "from .imports import *\n", "from .imports import *\nimport torch_npu  # noqa: F401\n").replace(
    "torch.cuda.", "torch.npu.").replace("'nccl'", "'hccl'").replace("'cuda', device", "'npu', device")


def test_torch_from_a_star_import_is_torch():
    result = migrate_source(FASTAI_TORCH_CORE, "fastai/torch_core.py", Options())
    assert result.error is None
    assert result.new_text == FASTAI_TORCH_CORE_MIGRATED
    assert [(e.code, e.span.line) for e in result.edits] == [
        ("NPU108", 2), ("NPU102", 8), ("NPU106", 9), ("NPU102", 14), ("NPU102", 14), ("NPU105", 19)]
    again = migrate_source(result.new_text, "fastai/torch_core.py", Options())
    assert again.error is None and not again.changed and again.edits == []
    assert_partial_as_whole(FASTAI_TORCH_CORE, "torch_core.py")
    # a file that binds `torch` itself, or never uses it, is migrated as before
    own = "from .imports import *\nimport torch\n\ntorch.cuda.synchronize()\n"
    assert migrate_source(own, "m.py", Options()).new_text == \
        "from .imports import *\nimport torch\nimport torch_npu  # noqa: F401\n\ntorch.npu.synchronize()\n"
    unused = "from .imports import *\n\nDEVICE = 'cuda'\n"  # (a config module's device: no torch_npu)
    assert migrate_source(unused, "m.py", Options()).new_text == "from .imports import *\n\nDEVICE = 'npu'\n"


@pytest.mark.slow
def test_the_star_imported_torch_runs_on_the_npu(torch_python, tmp_path):
    from torch_env import standin_env

    package = tmp_path / "fa"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "imports.py").write_text("import os\n\n\ndef num_distrib():\n    return 0\n")
    (package / "torch_imports.py").write_text("import torch\n")
    (package / "torch_core.py").write_text(FASTAI_TORCH_CORE_MIGRATED)
    done = subprocess.run(
        [torch_python, "-c", "from fa.torch_core import *\nprint(setup_distrib(0), default_device(), "
                             "torch.device('npu', 0).type, torch.npu.current_device())"],
        cwd=tmp_path, capture_output=True, text=True, env=standin_env(tmp_path), timeout=300)
    assert (done.returncode, done.stdout) == (0, "0 npu:0 npu 0\n"), done.stderr


# gpytorch 1.15.2: `.to_dense()` is the core method of linear_operator's LinearOperator (a kernel's
# covariance, `model.covar_module(x).to_dense()`), and was NPU304 ("listed as unsupported": torch's
# sparse Tensor.to_dense) at all 232 calls in 41 files, none on a tensor. A method finding's
# `unless` names libraries whose objects have the method: not reported in a file that imports one
# (anywhere in it: a partial parse keeps no `import gpytorch` statement, the file's imports say it).
GP_TEST = """\
import math
import unittest

import torch
from linear_operator.operators import DiagLinearOperator

from gpytorch.kernels import RBFKernel


class TestRBFKernel(unittest.TestCase):
    def test_computes_radial_basis_function(self):
        kernel = RBFKernel().initialize(lengthscale=1.0)
        a = torch.tensor([4, 2, 8], dtype=torch.float).view(3, 1)
        res = kernel(a, a).to_dense()
        diag = DiagLinearOperator(torch.ones(3)).to_dense()
        self.assertLess(torch.norm(res - diag), math.inf)
"""


def test_to_dense_of_a_linear_operator_is_no_sparse_tensor_finding():
    result = migrate_source(GP_TEST, "test/kernels/test_rbf_kernel.py", Options())
    assert result.error is None and result.new_text is None and result.findings == []
    assert_partial_as_whole(GP_TEST, "test_rbf_kernel.py")
    # without those libraries, a sparse tensor's to_dense is still reported
    sparse = GP_TEST.replace("from linear_operator.operators import DiagLinearOperator\n", "").replace(
        "from gpytorch.kernels import RBFKernel\n", "from kernels import RBFKernel\n")
    found = migrate_source(sparse, "test_rbf_kernel.py", Options())
    assert [(f.code, f.span.line) for f in found.findings] == [("NPU304", 13), ("NPU304", 14)]


# mmpretrain 1.2.0 (models/backbones/revvit.py, models/multimodal/ram/gradio_demo.py): a feature test
# of torch.cuda guards the call it tests for. The call moved to torch.npu and the test stayed,
# `if hasattr(torch.cuda, 'mem_get_info'): free = [torch.npu.mem_get_info(gpu) ...]`: it ran (the
# CUDA module has the attribute on every build) but read half migrated. The module tested now moves
# with the name where the name moves (same rule, name in the target); otherwise both stay.
FEATURE_TEST = """\
import torch


def get_free_device(devices):
    if hasattr(torch.cuda, 'mem_get_info'):
        return max(torch.cuda.mem_get_info(gpu)[0] for gpu in devices)
    if (hasattr(torch.cuda, 'default_generators')
            and len(torch.cuda.default_generators) > 0):
        return torch.cuda.default_generators[torch.cuda.current_device()].seed()
    if hasattr(torch.cuda, "ipc_collect"):
        torch.cuda.ipc_collect()
    return getattr(torch.cuda, 'get_arch_list', None)
"""


def test_a_feature_test_of_torch_cuda_moves_with_the_name_it_tests():
    result = migrate_source(FEATURE_TEST, "models/multimodal/ram/gradio_demo.py", Options())
    assert result.error is None
    assert result.new_text == with_torch_npu(FEATURE_TEST).replace("torch.cuda", "torch.npu").replace(
        "getattr(torch.npu, 'get_arch_list'", "getattr(torch.cuda, 'get_arch_list'")
    assert_partial_as_whole(FEATURE_TEST, "gradio_demo.py")
    # torch_npu 2.5 has no torch.npu.ipc_collect: the call and its test both stay
    older = migrate_source(FEATURE_TEST, "gradio_demo.py", Options.of(torch_npu_version="2.5"))
    assert 'if hasattr(torch.cuda, "ipc_collect"):\n        torch.cuda.ipc_collect()' in older.new_text
    assert "if hasattr(torch.npu, 'mem_get_info'):" in older.new_text
    again = migrate_source(result.new_text, "gradio_demo.py", Options())
    assert again.error is None and not again.changed


# nnU-Net (nnunetv2 2.8.1, training/nnUNetTrainer/nnUNetTrainer.py): GradScaler is imported as
# torch.GradScaler, or on torch < 2.3 as torch.cuda.amp.GradScaler (try/except ImportError), and
# built `GradScaler("cuda") if not TORCH_HAS_OLD_GRADSCALER else GradScaler()` when
# `self.device.type == 'cuda'`. The gate became 'npu', the scaler's "cuda" stayed (the import table
# kept the second binding, whose first parameter is init_scale; torch.GradScaler was not among the
# device functions): on the NPU the scaler was built for CUDA, warned and disabled itself -- fp16
# training without loss scaling. A string literal given where another binding of the name takes
# its device is that device; torch.GradScaler is a device function as torch.amp.GradScaler is.
NNUNET_TRAINER = """\
import torch
try:
   from torch import GradScaler           # torch >= 2.3
   TORCH_HAS_OLD_GRADSCALER = False
except ImportError:
   from torch.cuda.amp import GradScaler  # torch < 2.3
   TORCH_HAS_OLD_GRADSCALER = True


class nnUNetTrainer(object):
    def __init__(self, device: torch.device = torch.device('cuda')):
        self.device = device
        self.grad_scaler = (GradScaler("cuda") if not TORCH_HAS_OLD_GRADSCALER else GradScaler()) if self.device.type == 'cuda' else None
        self.fixed = GradScaler(65536.0) if TORCH_HAS_OLD_GRADSCALER else None
"""
NNUNET_TRAINER_MIGRATED = with_torch_npu(NNUNET_TRAINER).replace(
    "from torch.cuda.amp import GradScaler", "from torch_npu.npu.amp import GradScaler").replace(
    "'cuda'", "'npu'").replace('GradScaler("cuda")', 'GradScaler("npu")')


def test_a_grad_scaler_imported_two_ways_gets_the_npu_as_its_device():
    result = migrate_source(NNUNET_TRAINER, "nnunetv2/training/nnUNetTrainer/nnUNetTrainer.py", Options())
    assert result.error is None
    assert result.new_text == NNUNET_TRAINER_MIGRATED
    assert_partial_as_whole(NNUNET_TRAINER, "nnUNetTrainer.py")
    plain = migrate_source("from torch import GradScaler\nscaler = GradScaler('cuda')\n", "m.py", Options())
    assert "scaler = GradScaler('npu')" in plain.new_text


@pytest.mark.slow
def test_the_grad_scaler_of_the_migrated_trainer_is_enabled_on_the_npu(run_on_standin):
    done = run_on_standin(NNUNET_TRAINER + "\nprint(nnUNetTrainer().grad_scaler.is_enabled())\n", migrate=False)
    assert (done.returncode, done.stdout) == (0, "False\n"), done.stderr  # as written: CUDA's, disabled
    done = run_on_standin(NNUNET_TRAINER + "\nprint(nnUNetTrainer().grad_scaler.is_enabled())\n")
    assert (done.returncode, done.stdout) == (0, "True\n"), done.stderr


# mmsegmentation 1.2.2 tests/test_models/test_heads: a test moves the head and its inputs with
# the package's own helper `to_cuda` (utils.py, plain `.cuda()` calls) behind
# `torch.cuda.is_available()`. The helper's name was taken for a compiled extension's
# (`deform_conv_cuda`), so the gate stayed CUDA and was reported as opening CUDA-only code
# (NPU315, 48 times in 23 files) while the run migrated the helper's `.cuda()` calls: on the NPU
# the tests never took the device path. Run as a project, the gate and the helper move together.
HEAD_TEST_UTILS = """\
def to_cuda(module, data):
    module = module.cuda()
    if isinstance(data, list):
        for i in range(len(data)):
            data[i] = data[i].cuda()
    return module, data


def list_to_cuda(data):
    if isinstance(data, list):
        for i in range(len(data)):
            data[i] = list_to_cuda(data[i])
        return data
    else:
        return data.cuda()
"""

HEAD_TEST = """\
import torch

from .utils import list_to_cuda, to_cuda


def test_ann_head(head, inputs):
    if torch.cuda.is_available():
        head, inputs = to_cuda(head, inputs)
    return head(inputs)


def test_list(inputs):
    if torch.cuda.is_available():
        inputs = list_to_cuda(inputs)
    return inputs
"""


def test_a_helper_moving_tensors_to_cuda_is_no_compiled_extension(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from npu_migrate.cli import main

    (tmp_path / "heads").mkdir()
    (tmp_path / "heads" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "heads" / "utils.py").write_text(HEAD_TEST_UTILS, encoding="utf-8")
    (tmp_path / "heads" / "test_ann_head.py").write_text(HEAD_TEST, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["heads", "--write", "--no-cache", "-j", "1"])
    assert result.exit_code == 0, result.output
    assert "NPU315" not in result.output
    assert (tmp_path / "heads" / "utils.py").read_text(encoding="utf-8") == HEAD_TEST_UTILS.replace(".cuda()", ".npu()")
    assert (tmp_path / "heads" / "test_ann_head.py").read_text(encoding="utf-8") == with_torch_npu(HEAD_TEST).replace(
        "torch.cuda.is_available()", "torch.npu.is_available()")
    # a compiled extension's name still keeps its gate
    ext = "import torch\nfrom . import deform_conv_cuda\n\n\ndef f(x):\n    if torch.cuda.is_available():\n        return deform_conv_cuda.forward(x)\n    return x\n"
    kept = migrate_source(ext, "deform.py", Options())
    assert kept.new_text is None and [f.code for f in kept.findings] == ["NPU315"]  # unchanged


# mesh-tensorflow 0.1.21 transformer/utils.py: the TPUEstimator is imported from TF 1.15's
# tensorflow/python/tpu/tpu_estimator.py (which re-exports tensorflow_estimator's). Not known
# by that name, it stayed as it was (trained on the CPU of the NPU machine) while the
# EstimatorSpec its model_fn returns became NPUEstimatorSpec.
MTF_ESTIMATOR = """\
import tensorflow.compat.v1 as tf
from tensorflow.python.tpu import tpu_config  # pylint: disable=g-direct-tensorflow-import
from tensorflow.python.tpu import tpu_estimator  # pylint: disable=g-direct-tensorflow-import


def get_estimator(model_fn, model_dir, batch_size, use_tpu, cluster):
  run_config = tpu_config.RunConfig(
      cluster=cluster,
      model_dir=model_dir,
      tpu_config=tpu_config.TPUConfig(iterations_per_loop=100))
  estimator = tpu_estimator.TPUEstimator(
      model_fn=model_fn,
      config=run_config,
      train_batch_size=batch_size,
      use_tpu=use_tpu,
      export_to_tpu=False,
      params={})
  return estimator
"""


def test_the_tpu_estimator_of_tensorflow_python_tpu_runs_on_the_npu():
    result = migrate_source(MTF_ESTIMATOR, "utils.py", Options())
    assert result.error is None
    assert result.new_text == "from npu_bridge.npu_init import *\n" + MTF_ESTIMATOR.replace(
        "      config=run_config,\n", "      config=npu_run_config_init(run_config=run_config),\n").replace(
        "      use_tpu=use_tpu,\n", "      use_tpu=False,\n").replace(
        "      params={})\n", "      params={},\n      eval_on_tpu=False)\n")
    assert sorted(e.code for e in result.edits) == ["NPU120", "NPU128", "NPU128", "NPU128"]


# torch_geometric 2.8.1: `Data.is_cuda` is pyg's own property (data/data.py, whose `.is_cuda`
# reads stay: methods.declares_attribute), read in another module, loader/utils.py's
# infer_filter_per_worker (NodeLoader/LinkLoader call it by default). Renamed there alone,
# `data.is_npu` raised AttributeError (Data forwards unknown names to its storage): the reads of
# an attribute a class of the run defines stay in every module.
PYG_DATA = """\
import torch
from torch import Tensor


class Data:
    def __init__(self, **tensors):
        self.stores = [tensors]

    @property
    def is_cuda(self) -> bool:
        for store in self.stores:
            for value in store.values():
                if isinstance(value, Tensor) and value.is_cuda:
                    return True
        return False
"""

PYG_LOADER_UTILS = """\
import torch

from .data import Data


def infer_filter_per_worker(data):
    out = True
    if isinstance(data, Data) and data.is_cuda:
        out = False
    return out


def to_device(x):
    return x.cuda()
"""


def test_an_attribute_a_class_of_the_run_defines_keeps_its_readers_in_every_module(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from npu_migrate import project_values
    from npu_migrate.cli import main

    from npu_migrate.rules import default_rules

    assert set(project_values.OWN_ATTRIBUTES) == set(default_rules().attribute)  # the attribute rules' names
    (tmp_path / "pyg").mkdir()
    (tmp_path / "pyg" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "pyg" / "data.py").write_text(PYG_DATA, encoding="utf-8")
    (tmp_path / "pyg" / "utils.py").write_text(PYG_LOADER_UTILS, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["pyg", "--write", "--no-cache", "-j", "1"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "pyg" / "data.py").read_text(encoding="utf-8") == PYG_DATA
    assert (tmp_path / "pyg" / "utils.py").read_text(encoding="utf-8") == with_torch_npu(PYG_LOADER_UTILS).replace(
        "x.cuda()", "x.npu()")
    # alone (no class of the file or run defines it), the module renames the read
    alone = migrate_source(PYG_LOADER_UTILS, "utils.py", Options())
    assert "data.is_npu" in alone.new_text


# torch_geometric 2.8.1 nn/conv/cugraph/base.py: cuGraph's GNN operators (pylibcugraphops, RAPIDS,
# NVIDIA GPUs only), which no rule named: the refusal `if not row.is_cuda: raise` became
# `row.is_npu`, letting NPU tensors into the CUDA-only operator. Now the import is NPU303 (info:
# optional) and the refusal stays, NPU315, as for any CUDA-only library.
PYG_CUGRAPH = """\
from typing import Optional

import torch
from torch import Tensor

try:  # pragma: no cover
    LEGACY_MODE = False
    from pylibcugraphops.pytorch import CSC, HeteroCSC
    HAS_PYLIBCUGRAPHOPS = True
except ImportError:
    HAS_PYLIBCUGRAPHOPS = False


class CuGraphModule(torch.nn.Module):
    def get_cugraph(self, colptr: Tensor, row: Tensor, num_src_nodes: int, max_num_neighbors: Optional[int] = None):
        if not row.is_cuda:
            raise RuntimeError(f"'{self.__class__.__name__}' requires GPU-"
                               f"based processing (got CPU tensor)")
        return CSC(colptr, row, num_src_nodes, dst_max_in_degree=max_num_neighbors)
"""


def test_cugraph_ops_are_rapids_and_their_refusal_stays():
    result = migrate_source(PYG_CUGRAPH, "base.py", Options())
    assert result.error is None and result.new_text is None  # unchanged
    assert [(f.code, f.severity.value, f.span.line, f.api) for f in result.findings] == [
        ("NPU303", "info", 8, "pylibcugraphops"), ("NPU315", "error", 16, "row.is_cuda")]


# colossalai 0.5.0 accelerator/: one class per device, and api.py's registry
# `OrderedDict(cuda=CudaAccelerator, npu=NpuAccelerator, cpu=CpuAccelerator)` takes the first whose
# is_available() is True. Migrated, cuda_accelerator.py became a second NPU accelerator that won on
# the NPU, named "cuda" (every `get_accelerator().name == "cuda"` branch then took CUDA paths).
# The project selects the NPU already: the CUDA member of a family with an NPU member in another
# module of the run stays as it is (NPU328, info); the rest of the project is migrated as before.
COLOSSAL_CUDA = """\
import torch

from .base_accelerator import BaseAccelerator


class CudaAccelerator(BaseAccelerator):
    def __init__(self):
        super().__init__(name="cuda", communication_backend="nccl", is_synchronous=False)

    def get_current_device(self) -> torch.device:
        return torch.device(f"cuda:{torch.cuda.current_device()}")

    def is_available(self):
        return torch.cuda.is_available()

    def manual_seed(self, seed: int) -> None:
        torch.cuda.manual_seed(seed)
"""

COLOSSAL_NPU = """\
import torch

from .base_accelerator import BaseAccelerator

try:
    import torch_npu  # noqa
except ImportError:
    pass


class NpuAccelerator(BaseAccelerator):
    def __init__(self):
        super().__init__(name="npu", communication_backend="hccl", is_synchronous=False)

    def is_available(self):
        return torch.npu.is_available()
"""

COLOSSAL_TRAIN = """\
import torch


def step(model, x):
    return model(x.cuda())
"""


def test_the_cuda_member_of_a_class_family_with_an_npu_member_stays_cuda(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from npu_migrate.cli import main

    acc = tmp_path / "colossalai" / "accelerator"
    acc.mkdir(parents=True)
    (acc / "__init__.py").write_text("", encoding="utf-8")
    (acc / "cuda_accelerator.py").write_text(COLOSSAL_CUDA, encoding="utf-8")
    (acc / "npu_accelerator.py").write_text(COLOSSAL_NPU, encoding="utf-8")
    (tmp_path / "colossalai" / "train.py").write_text(COLOSSAL_TRAIN, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["colossalai", "--write", "--no-cache", "-j", "1"])
    assert result.exit_code == 0, result.output
    assert (acc / "cuda_accelerator.py").read_text(encoding="utf-8") == COLOSSAL_CUDA
    assert (acc / "npu_accelerator.py").read_text(encoding="utf-8") == COLOSSAL_NPU
    assert (tmp_path / "colossalai" / "train.py").read_text(encoding="utf-8") == with_torch_npu(
        COLOSSAL_TRAIN).replace("x.cuda()", "x.npu()")
    assert ("cuda_accelerator.py:6:7: NPU328 [info] `CudaAccelerator` is left on CUDA: the project has its own"
            " NPU class of the same family (`NpuAccelerator`)") in result.output
    # alone (no NPU member in the run), the CUDA class is migrated as before
    alone = migrate_source(COLOSSAL_CUDA, "cuda_accelerator.py", Options())
    assert "torch.npu.current_device()" in alone.new_text and "NPU328" not in {f.code for f in alone.findings}


# vector-quantize-pytorch 1.32.0 finite_scalar_quantization.py / lookup_free_quantization.py: the
# quantizer keeps its arithmetic in float32 with `partial(autocast, 'cuda', enabled = False)`,
# while residual_fsq.py's `with autocast('cuda', enabled = False):` (the same project) moved.
# The partial stayed CUDA: on the NPU it disables CUDA's autocast, not the NPU's, so under an
# NPU autocast region the "float32" quantization ran in bfloat16. The arguments after the
# function are its first positional ones: the device moves as in a direct call.
VQ_FSQ = """\
import functools
from functools import partial
from contextlib import nullcontext

import torch
from torch.amp import autocast


def quantize(z, force_f32=True):
    quantization_context = partial(autocast, 'cuda', enabled = False) if force_f32 else nullcontext
    with quantization_context():
        return z.float() @ z.float()


restore = functools.partial(torch.cuda.set_rng_state, state, 'cuda:0')
shown = partial(print, 'cuda')
"""


def test_a_device_given_through_functools_partial_moves_as_in_a_direct_call():
    result = assert_partial_as_whole(VQ_FSQ, "finite_scalar_quantization.py")
    assert result.error is None
    migrated = with_torch_npu(VQ_FSQ).replace(
        "partial(autocast, 'cuda'", "partial(autocast, 'npu'").replace(
        "functools.partial(torch.cuda.set_rng_state, state, 'cuda:0')",
        "functools.partial(torch.npu.set_rng_state, state, 'npu:0')")
    assert result.new_text == migrated + PARTIAL_PADDING
    assert sorted(e.code for e in result.edits) == ["NPU102", "NPU105", "NPU105", "NPU108"]


@pytest.mark.slow
def test_the_float32_region_of_a_partial_autocast_holds_under_npu_autocast(run_on_standin):
    run = """\
with torch.autocast('cuda', dtype=torch.bfloat16):
    z = torch.ones(2, 2, device='cuda')
    print(quantize(z).dtype)
"""
    source = VQ_FSQ.split("\n\nrestore =")[0] + "\n\n" + run
    done = run_on_standin(source)
    assert "partial(autocast, 'npu'" in done.migrated
    assert (done.returncode, done.stdout) == (0, "torch.float32\n"), done.stderr
    # as it was migrated before: the NPU region is not disabled, the matmul runs in bfloat16
    half = done.migrated.replace("partial(autocast, 'npu'", "partial(autocast, 'cuda'")
    done = run_on_standin(half, migrate=False)
    assert (done.returncode, done.stdout) == (0, "torch.bfloat16\n"), done.stderr


# deepspeed 0.15.4 accelerator/cuda_accelerator.py: the CUDA member of the family whose NPU member
# is accelerator/npu_accelerator.py's NPU_Accelerator.
DEEPSPEED_CUDA = '''\
import sys

from .abstract_accelerator import DeepSpeedAccelerator
# During setup stage torch may not be installed, pass on no torch will
# allow op builder related API to be executed.
try:
    import torch.cuda
except ImportError:
    pass


class CUDA_Accelerator(DeepSpeedAccelerator):

    def __init__(self):
        self._name = 'cuda'
        self._communication_backend_name = 'nccl' if sys.platform != 'win32' else 'gloo'

    def range_push(self, msg):
        if hasattr(torch.cuda.nvtx, 'range_push'):
            return torch.cuda.nvtx.range_push(msg)

    def lazy_call(self, callback):
        return torch.cuda._lazy_call(callback)
'''


def test_a_kept_cuda_twin_class_reports_only_why_and_its_module_import_stays():
    """Kept whole for NPU_Accelerator (NPU328), CUDA_Accelerator still drew NPU301 errors
    (torch.cuda.nvtx, _lazy_call) for code that never runs on the NPU, and its module's `try:
    import torch.cuda` became `import torch_npu` + `import torch.npu`. Now the file is
    unchanged and NPU328 is its one finding; without the NPU member, both are as before."""
    options = Options(npu_families=("_Accelerator",))
    r = migrate_source(DEEPSPEED_CUDA, "accelerator/cuda_accelerator.py", options)
    assert r.error is None and not r.changed
    assert [(f.code, f.span.line, f.span.col, f.api) for f in r.findings] == [("NPU328", 12, 7, "CUDA_Accelerator")]
    alone = migrate_source(DEEPSPEED_CUDA, "accelerator/cuda_accelerator.py", Options())
    assert "    import torch_npu  # noqa: F401\n    import torch.npu\n" in alone.new_text
    assert [f.code for f in alone.findings].count("NPU301") == 3  # torch.cuda.nvtx on two lines, _lazy_call


def test_an_aliased_torch_device_given_an_index_and_lightnings_process_group_backend_move():
    """horovod16's leftovers: `from torch import device as Device; Device(0)` names the
    accelerator, the NPU only with torch_npu loaded (the alias was not followed: no import);
    Lightning's `DDPStrategy(process_group_backend="nccl")` written as a literal was neither moved
    nor reported (its lookup form is NPU326)."""
    source = ("import os\nfrom torch import device as Device\n\n\ndef pick(rank):\n"
              "    os.environ['RANK'] = str(rank)\n    return Device(0)\n")
    r = assert_partial_as_whole(source, "pick.py", Options(add_import=True))
    assert r.new_text.startswith("import os\nimport torch_npu  # noqa: F401\nfrom torch import device as Device\n")
    assert [e.code for e in r.edits] == ["NPU108"]
    named = source.replace("Device(0)", "Device('cpu')")
    assert not migrate_source(named + PARTIAL_PADDING, "pick.py", Options(add_import=True)).changed
    trainer = ("import lightning as L\nfrom lightning.pytorch.strategies import DDPStrategy\n"
               "trainer = L.Trainer(strategy=DDPStrategy(process_group_backend=\"nccl\", find_unused_parameters=True))\n")
    r = assert_partial_as_whole(trainer, "train.py", Options(add_import=True))
    assert r.new_text.startswith(trainer.replace('"nccl"', '"hccl"'))


# fairscale 0.4.13 optim/oss.py (OSS.consolidate_state_dict calls it): a loop over the CUDA
# devices whose body is a capability check kept on CUDA (NPU307). The statement stayed while the
# loop's count became torch.npu.device_count(): on the NPU the loop ran and called
# torch.cuda.get_device_capability("cuda:0"), which raises there; as written the count is 0 on
# the NPU and the loop does not run. The count stays with what it opens (NPU315).
OSS_CAPABILITY = """\
from typing import Optional

import torch

_gpu_is_old: Optional[bool] = None


def _gpu_capabilities_older_than_50() -> bool:
    global _gpu_is_old
    if _gpu_is_old is None:
        for i in range(torch.cuda.device_count()):
            major, minor = torch.cuda.get_device_capability(f"cuda:{i}")
            if major <= 5:
                _gpu_is_old = True
        if _gpu_is_old is None:
            _gpu_is_old = False
    return _gpu_is_old


def consolidate(device):
    torch.cuda.synchronize()
    return _gpu_capabilities_older_than_50()
"""


def test_a_loop_over_cuda_devices_around_a_kept_capability_check_keeps_its_count():
    result = assert_partial_as_whole(OSS_CAPABILITY, "oss.py")
    assert result.error is None
    assert result.new_text == with_torch_npu(OSS_CAPABILITY).replace(
        "    torch.cuda.synchronize()", "    torch.npu.synchronize()") + PARTIAL_PADDING
    assert [(f.code, f.span.line, f.message) for f in result.findings if f.code == "NPU315"] == [(
        "NPU315", 11, "`torch.cuda.device_count()` opens CUDA-only code (the loop it counts runs "
        "`torch.cuda.get_device_capability()`, kept on CUDA (NPU307)); it is left as it is, so on the NPU "
        "it is 0 and the loop does not run")]
    assert sorted(f.code for f in result.findings) == ["NPU307", "NPU315"]
    assert [f.suggestion for f in result.findings if f.code == "NPU315"][0].endswith(
        "then count the NPUs here (torch.npu.device_count()).")


@pytest.mark.slow
def test_the_migrated_capability_loop_does_not_call_cuda_on_the_npu(run_on_standin):
    done = run_on_standin(OSS_CAPABILITY + "\nprint(consolidate('cuda'))\n")
    assert "for i in range(torch.cuda.device_count()):" in done.migrated
    assert (done.returncode, done.stdout) == (0, "False\n"), done.stderr
    # as it was migrated before: the loop counts the NPU and calls CUDA
    half = done.migrated.replace("range(torch.cuda.device_count())", "range(torch.npu.device_count())")
    done = run_on_standin(half, migrate=False)
    assert done.returncode != 0 and "get_device_capability" in done.stderr, (done.stdout, done.stderr)


# TTS 0.22.0 TTS/tts/layers/bark/hubert/tokenizer.py auto_train: resuming loads the tokenizer
# with `HubertTokenizer.load_from_checkpoint(load_model, "cuda")` (a staticmethod whose
# parameter is `map_location`), starting anew moves it with `.to("cuda")`. Only the second moved:
# on the NPU a resumed run asked torch.load for CUDA. A static or class method called on a class
# of the module is the module's own function, and a parameter named as a device keyword
# (`map_location`) takes a device.
HUBERT_TOKENIZER = """\
import os

import torch
from torch import nn


class HubertTokenizer(nn.Module):
    def __init__(self, version=0):
        super().__init__()
        self.fc = nn.Linear(2, 2)
        self.version = version

    @staticmethod
    def load_from_checkpoint(path, map_location=None):
        model = HubertTokenizer()
        model.load_state_dict(torch.load(path, map_location=map_location))
        return model

    @classmethod
    def named(cls, device, name):
        return cls().to(device)

    def save(self, path):
        torch.save(self.state_dict(), path)


def auto_train(load_model=None):
    if load_model and os.path.isfile(load_model):
        model_training = HubertTokenizer.load_from_checkpoint(load_model, "cuda")
    else:
        model_training = HubertTokenizer(version=1).to("cuda")
    return model_training


HubertTokenizer.save(HubertTokenizer(), "cuda.pt")
other = HubertTokenizer.named("cuda", "cuda")
"""


def test_a_static_method_called_on_its_class_gets_the_device_its_parameter_names():
    result = assert_partial_as_whole(HUBERT_TOKENIZER, "tokenizer.py")
    assert result.error is None
    assert result.new_text == with_torch_npu(HUBERT_TOKENIZER).replace(
        'load_from_checkpoint(load_model, "cuda")', 'load_from_checkpoint(load_model, "npu")').replace(
        '.to("cuda")', '.to("npu")').replace('named("cuda", "cuda")', 'named("npu", "cuda")') + PARTIAL_PADDING
    assert sorted(e.code for e in result.edits) == ["NPU105", "NPU105", "NPU105", "NPU108"]


@pytest.mark.slow
def test_the_resumed_tokenizer_loads_on_the_npu(run_on_standin):
    run = "\nHubertTokenizer().save('tok.pt')\nprint(type(auto_train('tok.pt')).__name__)\n"
    source = HUBERT_TOKENIZER.split("\n\nHubertTokenizer.save(")[0] + "\n" + run
    done = run_on_standin(source)
    assert (done.returncode, done.stdout) == (0, "HubertTokenizer\n"), done.stderr
    # as it was migrated before: the resumed load asks for CUDA
    half = done.migrated.replace('load_from_checkpoint(load_model, "npu")', 'load_from_checkpoint(load_model, "cuda")')
    done = run_on_standin(half, migrate=False)
    assert done.returncode != 0 and "CUDA" in done.stderr, (done.stdout, done.stderr)


# mindspore-gs 1.4.1 quantization/ops/kernel/gpu/fake_quant_per_layer_impl.cu (shape of): a
# MindSpore project's GPU-only custom operator (`ops.Custom(..., func_type="aot")` on a .cu).
MINDSPORE_GS_KERNEL = """\
#include "fake_quant_impl.cuh"

__global__ void FakeQuantPerLayer(const float *input, float *output, const int size) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < size; i += blockDim.x * gridDim.x) {
    output[i] = input[i];
  }
}
"""


def test_a_cuda_kernel_of_a_mindspore_project_is_not_told_to_become_torch_operations():
    """The .cu finding is made without knowing the project's framework: its suggestion names
    every framework's operations, not torch's alone (it said "Reimplement it with torch
    operations" in mindspore-gs)."""
    result = migrate_source(MINDSPORE_GS_KERNEL, "ops/kernel/gpu/fake_quant_per_layer_impl.cu", Options())
    assert [(f.code, f.span.line, f.span.col, f.message, f.suggestion) for f in result.findings] == [
        ("NPU302", 3, 1, "custom CUDA code (1 `__global__` kernel: FakeQuantPerLayer) cannot run on the NPU",
         "Reimplement it with your framework's own operations (torch, MindSpore or TensorFlow operations run on the"
         " NPU) or as an Ascend C custom operator.")]


# fairscale 0.4.13 nn/model_parallel/random.py:30,39-62 (Megatron's `_set_cuda_rng_state`, shape of).
SET_CUDA_RNG_STATE = """\
import torch
from torch.cuda import _lazy_call


def _set_cuda_rng_state(new_state, device=-1):
    if device == -1:
        device = torch.device("cuda")

    def cb():
        idx = device.index
        if idx is None:
            idx = torch.cuda.current_device()
        default_generator = torch.cuda.default_generators[idx]
        default_generator.set_state(new_state)

    _lazy_call(cb)
"""


def test_a_lazy_call_of_cuda_is_reported_as_never_running_and_not_to_be_removed():
    """The callback moves to the NPU's generators while `torch.cuda._lazy_call` (no public NPU
    twin) stays: on the NPU it queues the callback for a CUDA start that never comes, so the
    RNG state is never set. The finding says so; its advice must not be "remove" (that drops the
    state) and names only what the torch_npu wheels have (torch.npu.init in the table; the private
    `_lazy_call` of torch_npu.npu, read in the 2.1.0.post8, 2.5.1 and 2.14.0 wheels)."""
    result = migrate_source(SET_CUDA_RNG_STATE, "random.py", Options())
    assert result.error is None
    lazy = [f for f in result.findings if f.api == "torch.cuda._lazy_call"]
    assert [(f.code, f.severity, f.span.line, f.span.col) for f in lazy] == [("NPU301", "error", 2, 24),
                                                                              ("NPU301", "error", 16, 5)]
    assert lazy[0].message == (
        "`torch.cuda._lazy_call` queues a function until CUDA is initialised, which never happens on the NPU: the"
        " function never runs (in Megatron's and fairscale's `_set_cuda_rng_state`, the model-parallel RNG state is"
        " never set)")
    assert lazy[0].suggestion == (
        "Initialise the NPU (`torch.npu.init()`) and call the function directly, or queue it with the private"
        " `_lazy_call` of torch_npu's `npu` module (the same function in the torch_npu 2.1.0.post8, 2.5.1 and 2.14.0"
        " wheels; not in the public API the targets list). Removing the call drops what the function sets.")
    assert "torch.npu.default_generators[idx]" in result.new_text


# baselines 0.1.5 ppo2/run_atari.py (shape of): a TF 1.x entry script whose training, optimizer
# included, is in another module (ppo2.learn).
RUN_ATARI = """\
import multiprocessing
import tensorflow as tf
from baselines.ppo2 import ppo2


def train(env_id, num_timesteps, seed, policy):
    ncpu = multiprocessing.cpu_count()
    config = tf.ConfigProto(allow_soft_placement=True,
                            intra_op_parallelism_threads=ncpu,
                            inter_op_parallelism_threads=ncpu)
    config.gpu_options.allow_growth = True
    tf.Session(config=config).__enter__()
    ppo2.learn(policy=policy, env=env_id, nsteps=128, total_timesteps=int(num_timesteps * 1.1))


def main():
    train('PongNoFrameskip-v4', num_timesteps=10e6, seed=0, policy='cnn')


if __name__ == '__main__':
    main()
"""


def test_a_tf_entry_script_training_through_another_module_says_it_was_not_made_distributed():
    """--distributed made baselines' run_atari.py no change and said nothing: it has no
    tf.train optimizer to wrap (ppo2.learn builds it), so it stays one process per job. Now
    NPU390 says so at the call that starts the training (torch scripts get NPU385)."""
    result = migrate_source(RUN_ATARI, "run_atari.py", Options(distributed=True))
    assert result.error is None and result.extra_files == {}
    assert [(f.code, f.span.line, f.span.col, f.api, f.message) for f in result.findings if f.code == "NPU390"] == [
        ("NPU390", 13, 5, "ppo2.learn",
         "not made distributed: no tf.train optimizer in this script to wrap with NPUDistributedOptimizer: the training"
         " it starts builds its optimizer elsewhere (give --distributed the module that builds it, or the project's"
         " folder) (`ppo2.learn`)")]
    assert "ppo2.learn(policy=policy" in result.new_text  # only the session config moved
    assert result.new_text.count("npu_config_proto") == 1


# e3nn 0.6.0 examples/tetris.py (shape of): main() (what the main block runs) trains `f` on the
# CPU; profile(), which nothing calls, moves its own `f` to "cuda" and builds an optimizer too.
TETRIS = """\
import torch


def main():
    f = torch.nn.Linear(4, 7)
    optim = torch.optim.Adam(f.parameters(), lr=1e-3)
    for step in range(300):
        loss = f(torch.ones(4)).pow(2).sum()
        optim.zero_grad()
        loss.backward()
        optim.step()


if __name__ == "__main__":
    main()


def profile():
    f = torch.nn.Linear(4, 7)
    f.to(device="cuda")
    optim = torch.optim.Adam(f.parameters(), lr=1e-2)
"""


def test_distributed_wraps_no_model_of_a_function_the_script_never_runs():
    """--distributed put `f = distributed_model(f)` into profile() (the only move of a model
    named `f`) and left main(), the training the script runs, one process's on every rank with
    no finding. Now the model to wrap is looked for in what the main block runs: main()'s `f` is
    never put on the NPU, so the script is not made distributed and NPU385 says why."""
    result = migrate_source(TETRIS, "tetris.py", Options(distributed=True))
    assert result.error is None and result.extra_files == {}
    assert "distributed" not in result.new_text
    assert result.new_text == with_torch_npu(TETRIS).replace('device="cuda"', 'device="npu"')
    assert [(f.code, f.span.line, f.span.col, f.message) for f in result.findings] == [
        ("NPU385", 6, 13, "not made distributed: no statement found that puts `f` on the NPU (`f.parameters()`);"
                          " DistributedDataParallel wraps the trained model right after the statement that puts it"
                          " on the NPU")]


# pytorch-ignite 0.5.5 ignite/distributed/auto.py:230-233 (shape of), and the PyTorch tutorial's
# `if torch.cuda.device_count() > 1: model = nn.DataParallel(model)`.
AUTO_MODEL = """\
import torch
from torch import nn


def auto_model(model, world_size, **kwargs):
    if world_size > 1:
        model = torch.nn.parallel.DistributedDataParallel(model, **kwargs)
    # not distributed but multiple GPUs reachable so data parallel model
    elif torch.cuda.device_count() > 1 and torch.cuda.is_available():
        print("Apply torch DataParallel on", torch.cuda.device_count(), "GPUs")
        model = torch.nn.parallel.DataParallel(model, **kwargs)
    return model.to("cuda")
"""


def test_a_device_count_opening_data_parallel_stays_cuda():
    """Moved, `torch.npu.device_count() > 1` opened DataParallel on a machine of several NPUs,
    which Ascend does not support (NPU305): a single-process run failed there. Left as it is,
    the count is 0 on the NPU and the process trains on its NPU, as before the migration; the
    branch stays whole, NPU315 says why and what to do (DDP)."""
    result = assert_partial_as_whole(AUTO_MODEL, "auto.py")
    assert result.error is None
    assert result.new_text == with_torch_npu(AUTO_MODEL).replace(
        "and torch.cuda.is_available()", "and torch.npu.is_available()").replace(
        '.to("cuda")', '.to("npu")') + PARTIAL_PADDING
    assert [(f.code, f.span.line, f.span.col, f.message, f.suggestion) for f in result.findings] == [
        ("NPU315", 9, 10, "`torch.cuda.device_count()` opens `torch.nn.parallel.DataParallel`, which Ascend NPUs do"
                          " not support (NPU305); it is left as it is, so on the NPU it is 0 and the process trains on"
                          " one NPU",
         "To train on several NPUs, use DistributedDataParallel with the hccl backend, one process per NPU"
         " (`npu-migrate --distributed` converts a training script), and drop this branch."),
        ("NPU305", 11, 17, "`torch.nn.parallel.DataParallel` is not supported on Ascend NPUs",
         "Use torch.nn.parallel.DistributedDataParallel with the hccl backend, one process per NPU (launch with"
         " torchrun).")]


# The same gate with the count held in a variable first (`n_gpu = torch.cuda.device_count()`, the
# shape of many training scripts): the count and its one reader, the DataParallel gate, stay
# together; a count another statement reads too (`max(1, n_gpu)` for a batch size: kept, it
# would be 0 there) moves with that reader, as before, and NPU305 reports the DataParallel.
DATA_PARALLEL_COUNT_IN_A_VARIABLE = """\
import torch
import torch.nn as nn

model = nn.Linear(2, 2)
n_gpu = torch.cuda.device_count()
if n_gpu > 1 and not NO_DP:
    model = nn.DataParallel(model, device_ids=list(range(n_gpu)))
model.to("cuda")


def train(model, args):
    n = torch.cuda.device_count()
    if n > 1:
        model = torch.nn.DataParallel(model)
    args.batch = args.per_gpu * max(1, n)
    return model
"""


def test_a_device_count_in_a_variable_opening_data_parallel_stays_cuda_with_it():
    result = assert_partial_as_whole(DATA_PARALLEL_COUNT_IN_A_VARIABLE, "train.py")
    assert result.error is None
    assert result.new_text == DATA_PARALLEL_COUNT_IN_A_VARIABLE.replace(
        "import torch.nn as nn\n", "import torch.nn as nn\nimport torch_npu  # noqa: F401\n").replace(
        '.to("cuda")', '.to("npu")').replace(
        "    n = torch.cuda.device_count()", "    n = torch.npu.device_count()") + PARTIAL_PADDING
    assert [(f.code, f.span.line, f.span.col, f.message) for f in result.findings] == [
        ("NPU315", 5, 9, "`torch.cuda.device_count()` opens `nn.DataParallel`, which Ascend NPUs do"
                         " not support (NPU305); it is left as it is, so on the NPU it is 0 and the process trains on"
                         " one NPU"),
        ("NPU305", 7, 13, "`torch.nn.DataParallel` is not supported on Ascend NPUs"),
        ("NPU305", 14, 17, "`torch.nn.DataParallel` is not supported on Ascend NPUs")]


# torchtune 0.6.1 training/_distributed.py:90 (shape of): `if dist.get_backend() == "nccl": tensor =
# tensor.to(get_device("cuda"))`, get_device imported from torchtune.utils, defined in
# utils/_device.py (re-exported by utils/__init__.py) as `def get_device(device: Optional[str] = None)`.
# The comparison moved to "hccl" and the string given to another module's function stayed: on the NPU
# the branch ran and asked for CUDA, where unmigrated (torchtune is NPU-aware) it was skipped. A
# string given to a project function's parameter named for a device moves as one given to the
# module's own function does (the function's readers of it move by that name in its module).
TORCHTUNE_DEVICE = """\
from typing import Optional

import torch


def get_device(device: Optional[str] = None) -> torch.device:
    if device is None:
        device = "npu" if hasattr(torch, "npu") else "cpu"
    return torch.device(device)
"""

TORCHTUNE_DISTRIBUTED = """\
import torch
import torch.distributed as dist

from tt.utils import get_device


def broadcast_tensor(tensor, src=0):
    if dist.is_available() and dist.is_initialized():
        device = tensor.device
        if dist.get_backend() == "nccl":
            tensor = tensor.to(get_device("cuda"))
        dist.broadcast(tensor, src=src, group=None)
        return tensor.to(device)
    return tensor


def other(load):
    return load("cuda")
"""


def test_a_device_string_given_to_a_project_function_of_another_module_moves(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from npu_migrate.cli import main

    (tmp_path / "tt" / "utils").mkdir(parents=True)
    (tmp_path / "tt" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "tt" / "utils" / "__init__.py").write_text("from ._device import get_device\n", encoding="utf-8")
    (tmp_path / "tt" / "utils" / "_device.py").write_text(TORCHTUNE_DEVICE, encoding="utf-8")
    (tmp_path / "tt" / "training.py").write_text(TORCHTUNE_DISTRIBUTED + PARTIAL_PADDING, encoding="utf-8")
    relative = TORCHTUNE_DISTRIBUTED.replace("from tt.utils import get_device", "from .utils import get_device as gd")
    relative = relative.replace("get_device(", "gd(")
    (tmp_path / "tt" / "relative.py").write_text(relative + PARTIAL_PADDING, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["tt", "--write", "--no-cache", "-j", "1"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "tt" / "training.py").read_text(encoding="utf-8") == TORCHTUNE_DISTRIBUTED.replace(
        "import torch.distributed as dist\n", "import torch.distributed as dist\nimport torch_npu  # noqa: F401\n").replace(
        '"nccl"', '"hccl"').replace('get_device("cuda")', 'get_device("npu")') \
        + PARTIAL_PADDING
    assert (tmp_path / "tt" / "utils" / "_device.py").read_text(encoding="utf-8") == TORCHTUNE_DEVICE
    # ... through a relative import too (the package's own path: tt/utils, re-exported from _device.py)
    assert (tmp_path / "tt" / "relative.py").read_text(encoding="utf-8") == relative.replace(
        "import torch.distributed as dist\n", "import torch.distributed as dist\nimport torch_npu  # noqa: F401\n").replace(
        '"nccl"', '"hccl"').replace('gd("cuda")', 'gd("npu")') + PARTIAL_PADDING
    # the file alone (no project function known): the string stays, as before
    from npu_migrate.dispatch import migrate_source

    alone = migrate_source(TORCHTUNE_DISTRIBUTED, "training.py", Options())
    assert 'get_device("cuda")' in (alone.new_text or "")


# heldout18's report (1) (pytorch-ignite 0.5.5 examples, the shape of a Ray task): the code it runs
# moves to the NPU while Ray is asked for a GPU the Ascend machine does not have.
RAY_TASK = """\
import ray
import torch


@ray.remote(num_gpus=1)
def train(config):
    model = torch.nn.Linear(2, 1).to("cuda")
    return model(torch.ones(2, device="cuda")).item()
"""


def test_a_ray_task_asking_for_a_gpu_around_moved_code_is_reported():
    result = migrate_source(RAY_TASK, "tune.py", Options())
    assert result.new_text == with_torch_npu(RAY_TASK).replace('"cuda"', '"npu"')
    assert [(f.code, f.span.line, f.span.col, f.message) for f in result.findings] == [
        ("NPU329", 5, 2, "`ray.remote` asks Ray for GPUs, which an Ascend machine does not have: Ray waits for them"
                         " and the task, actor or trainer never starts")]
    assert 'resources={"NPU": 1}' in result.findings[0].suggestion


# The same request made elsewhere: pytorch-ignite 0.5.5 examples/cifar10_raytune/main.py:78,96-103
# (shape of: the trial's device moves to "npu" while tune reserves a "gpu" per trial) and a remote
# function started with `.options(num_gpus=...)`.
RAY_TUNE = """\
import ray
import torch
from ray import tune


def train_cifar(config):
    return torch.ones(2, device=config["device"]).sum().item()


@ray.remote
def evaluate(x):
    return torch.ones(2).cuda().sum().item()


def tune_cifar(gpus_per_trial=1, cpus_per_trial=4):
    config = {"device": "cuda" if gpus_per_trial > 0 else "cpu"}
    tuner = tune.Tuner(
        tune.with_resources(
            train_cifar,
            resources={"cpu": cpus_per_trial, "gpu": gpus_per_trial},
        ),
        param_space=config,
    )
    ray.get(evaluate.options(num_gpus=1).remote(1))
    ray.get(evaluate.options(num_cpus=1).remote(1))
    return tuner.fit()
"""


def test_ray_tune_resources_and_options_asking_for_gpus_are_reported():
    result = assert_partial_as_whole(RAY_TUNE, "main.py")
    assert result.new_text == with_torch_npu(RAY_TUNE).replace('"cuda"', '"npu"').replace(".cuda()", ".npu()") \
        + PARTIAL_PADDING
    assert [(f.code, f.span.line, f.span.col, f.message) for f in result.findings] == [
        ("NPU329", 18, 9, "`ray.tune.with_resources` asks Ray for GPUs, which an Ascend machine does not have: Ray"
                          " waits for them and the trial or placement group never starts"),
        ("NPU329", 24, 13, "`.options()` asks Ray for GPUs, which an Ascend machine does not have: Ray waits for"
                           " them and the task or actor never starts")]
    assert '`resources={"cpu": 4, "NPU": 1}`' in result.findings[0].suggestion
    assert '`.options(resources={"NPU": 1})`' in result.findings[1].suggestion


# fairscale 0.4.13 optim/oss.py:38's capability loop (e4cbc44) with its count held in a variable
# first, and a count another statement also reads.
COUNT_IN_A_VARIABLE = """\
import torch


def _gpu_capabilities_older_than_50():
    count = torch.cuda.device_count()
    for i in range(count):
        major, minor = torch.cuda.get_device_capability(f"cuda:{i}")
        if major < 5:
            return True
    return False


def scale(lr):
    n = torch.cuda.device_count()
    for i in range(n):
        major, minor = torch.cuda.get_device_capability(i)
    return lr * n
"""


def test_a_device_count_held_in_a_variable_only_its_loop_reads_stays_with_the_kept_loop():
    """`count = torch.cuda.device_count(); for i in range(count):` around a capability check
    kept on CUDA (NPU307): moved, the loop ran on the NPU and called CUDA there; kept, the count
    is 0 there and the loop does not run (as e4cbc44 does for the count written in `range()`).
    A count another statement reads too (`lr * n`) moves: kept, it would be 0 for that reader."""
    result = assert_partial_as_whole(COUNT_IN_A_VARIABLE, "oss.py")
    assert result.error is None
    assert result.new_text == with_torch_npu(COUNT_IN_A_VARIABLE).replace(
        "n = torch.cuda.device_count()", "n = torch.npu.device_count()") + PARTIAL_PADDING
    assert [(f.code, f.span.line, f.span.col) for f in result.findings] == [
        ("NPU315", 5, 13), ("NPU307", 7, 24), ("NPU307", 16, 24)]
    assert "it is 0 and the loop does not run" in result.findings[0].message


# catalyst 22.4 tests/benchmarks/test_benchmark.py: the parametrize values are a module variable
# that grows under a CUDA test, and the test compares and uses the device parameter.
PARAMETRIZE_VARIABLE = """\
import pytest
import torch

CASES = [(1, "cpu")]
if torch.cuda.is_available():
    CASES.append((2, "cuda"))
MORE = [("cpu", 3), ("cuda:0", 4)]
MORE += [("cuda", 5)]
MORE.extend([("cuda", 6)])
MORE.insert(0, ("cuda", 7))


@pytest.mark.parametrize("n,device", CASES)
def test_zeros(n, device):
    if device == "cuda":
        torch.cuda.empty_cache()
    torch.zeros(n, device=device)


@pytest.mark.parametrize("device,n", MORE)
def test_ones(device, n):
    torch.ones(n, device=device)
"""


def test_parametrize_values_held_in_a_module_variable_move_with_the_test_that_reads_them():
    """The test's `device == "cuda"` and the CUDA test that adds the case moved, the case's
    "cuda" (in BENCHMARKS, not in the decorator) did not: on the NPU the case is now added and
    runs torch.device("cuda"). Values in a list the module passes only to parametrize (and grows
    with append/extend/insert/+=) move as in a list written in the decorator."""
    result = assert_partial_as_whole(PARAMETRIZE_VARIABLE)
    expected = (with_torch_npu(PARAMETRIZE_VARIABLE)
                .replace('torch.cuda', 'torch.npu')
                .replace('(2, "cuda")', '(2, "npu")').replace('"cuda:0", 4', '"npu:0", 4')
                .replace('("cuda", 5)', '("npu", 5)').replace('("cuda", 6)', '("npu", 6)')
                .replace('("cuda", 7)', '("npu", 7)').replace('device == "cuda"', 'device == "npu"'))
    assert result.new_text == expected + PARTIAL_PADDING
    # Left as they are: a list the module reads elsewhere too; one whose parameter is not a
    # device; one passed to two parametrize calls that put the device at other positions.
    for kept in (
        PARAMETRIZE_VARIABLE.replace("\n\n\n@pytest.mark.parametrize(\"n,device\", CASES)",
                                     "\nprint(CASES)\n\n\n@pytest.mark.parametrize(\"n,device\", CASES)"),
        PARAMETRIZE_VARIABLE.replace('"device,n", MORE', '"kind,n", MORE'),
        PARAMETRIZE_VARIABLE.replace('"device,n", MORE', '"device,n", CASES'),
    ):
        text = migrate_source(kept, "m.py", Options()).new_text
        line = "CASES.append((2, \"cuda\"))" if "print(CASES)" in kept or "n\", CASES" in kept else 'MORE += [("cuda", 5)]'
        assert line in text, kept


# accelerate 1.15.0 (a project that supports the NPU already): utils/imports.py's
# `is_cuda_available()` wraps torch.cuda.is_available(), beside its own `is_npu_available()`, and its
# callers choose the device with chains that have an NPU arm (test_utils/testing.py:88
# get_backend, utils/memory.py:60, dataclasses.py:2005). Migrated, the CUDA test became a second NPU
# test that those chains took first: `return "cuda", torch.npu.device_count(), ...` on the NPU
# (half-migrated; unmigrated the chain reached its NPU arm). The CUDA test with an NPU twin keeps
# its body, in every module its branches stay as they are (checkpointing.py's `if
# is_cuda_available():` is dead on the NPU), and so do the arms after an `elif is_npu_available():`
# (utils/random.py's `else: torch.cuda.manual_seed_all(seed)`): the rest migrates as before.
ACC_IMPORTS = '''\
import importlib

import torch

from .environment import patch_environment


def is_cuda_available():
    """
    Checks if `cuda` is available via an `nvml-based` check.
    """
    with patch_environment(PYTORCH_NVML_BASED_CUDA_CHECK="1"):
        available = torch.cuda.is_available()

    return available


def is_bf16_available():
    if is_cuda_available():
        return torch.cuda.is_bf16_supported()
    if is_npu_available():
        return torch.npu.is_bf16_supported()
    return True


def is_npu_available(check_device=False):
    if importlib.util.find_spec("torch_npu") is None:
        return False
    import torch_npu  # noqa: F401

    return hasattr(torch, "npu") and torch.npu.is_available()
'''

ACC_TESTING = '''\
import torch

from ..utils import is_cuda_available, is_mps_available, is_npu_available


def get_backend():
    if is_mps_available():
        return "mps", 1, torch.mps.current_allocated_memory
    elif is_cuda_available():
        return "cuda", torch.cuda.device_count(), torch.cuda.memory_allocated
    elif is_npu_available():
        return "npu", torch.npu.device_count(), torch.npu.memory_allocated
    return "cpu", 1, lambda: 0


def require_cuda(test_case):
    return unittest.skipUnless(is_cuda_available() and not is_mps_available(), "test requires a GPU")(test_case)
'''

ACC_CHECKPOINTING = '''\
import torch

from .utils import is_cuda_available


def save_states(states):
    if is_cuda_available() and torch.cuda.device_count() > 0:
        states["torch_cuda_manual_seed"] = torch.cuda.get_rng_state_all()
    return states
'''

ACC_RANDOM = '''\
import torch

from .imports import is_npu_available, is_xpu_available


def set_seed(seed):
    if is_xpu_available():
        torch.xpu.manual_seed_all(seed)
    elif is_npu_available():
        torch.npu.manual_seed_all(seed)
    elif is_xpu_available(check_device=True):
        torch.xpu.manual_seed_all(seed + 1)
    else:
        torch.cuda.manual_seed_all(seed)
    device = "cuda"
    return torch.zeros(1).cuda(), device
'''


def _accelerate_project(root: Path) -> dict:
    files = {"accelerate/utils/imports.py": ACC_IMPORTS, "accelerate/utils/__init__.py": "",
             "accelerate/utils/random.py": ACC_RANDOM, "accelerate/test_utils/testing.py": ACC_TESTING,
             "accelerate/checkpointing.py": ACC_CHECKPOINTING}
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return files


def test_a_cuda_test_of_the_project_with_an_npu_twin_keeps_its_body_and_its_branches(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from npu_migrate.cli import main

    _accelerate_project(tmp_path)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["accelerate", "--write", "--no-cache", "-j", "1"])
    assert result.exit_code == 0, result.output
    read = {name: (tmp_path / name).read_text(encoding="utf-8") for name in (
        "accelerate/utils/imports.py", "accelerate/test_utils/testing.py", "accelerate/checkpointing.py",
        "accelerate/utils/random.py")}
    assert read["accelerate/utils/imports.py"] == ACC_IMPORTS  # the NPU arm was there already
    # (its NPU arm calls torch.npu: it gets the import that registers it)
    assert read["accelerate/test_utils/testing.py"] == with_torch_npu(ACC_TESTING)
    assert read["accelerate/checkpointing.py"] == ACC_CHECKPOINTING
    # only what runs on the NPU moves: not the arm after `elif is_npu_available():`, nor the else
    assert read["accelerate/utils/random.py"] == with_torch_npu(ACC_RANDOM).replace(
        'device = "cuda"', 'device = "npu"').replace("torch.zeros(1).cuda()", "torch.zeros(1).npu()")


def test_a_cuda_test_keeps_its_branches_in_a_partial_parse_as_in_a_whole_one():
    options = Options(cuda_tests=("is_cuda_available",))
    for text, name in ((ACC_IMPORTS, "imports.py"), (ACC_TESTING, "testing.py"), (ACC_CHECKPOINTING, "checkpointing.py")):
        result = assert_partial_as_whole(text, name, options)
        # (testing.py calls torch.npu in its NPU arm: it gets the import that registers it)
        assert result.error is None and result.new_text in (None, with_torch_npu(text) + PARTIAL_PADDING), name


def test_a_cuda_test_without_an_npu_twin_or_with_more_in_its_body_migrates_as_before(tmp_path, monkeypatch):
    from npu_migrate.project_values import _device_tests, cuda_tests

    alone = migrate_source(ACC_TESTING, "testing.py", Options())
    assert 'return "cuda", torch.npu.device_count(), torch.npu.memory_allocated' in alone.new_text
    assert _device_tests(ACC_IMPORTS.encode()) == ("cuda:is_cuda_available", "npu:is_npu_available")
    assert cuda_tests(["cuda:is_cuda_available"]) == ()  # no NPU twin
    assert cuda_tests(["cuda:is_cuda_available", "npu:is_npu_available"]) == ("is_cuda_available",)
    assert cuda_tests(["cuda:is_torch_CUDA_ok", "npu:is_torch_NPU_ok"]) == ("is_torch_CUDA_ok",)
    # another module defines the name otherwise: which one a caller reads is not known
    assert cuda_tests(["cuda:is_cuda_available", "npu:is_npu_available", "other:is_cuda_available"]) == ()
    for body in ("return torch.cuda.is_available() and torch.cuda.device_count() > 1",
                 "return torch.cuda.is_available() if NEW else num_cuda_devices() > 0",
                 "n = torch.cuda.is_available()\n    n = n or use_cpu\n    return n",
                 "return use_cuda"):
        text = f"import torch\n\n\ndef is_cuda_available():\n    {body}\n\n\ndef is_npu_available():\n    return False\n"
        assert _device_tests(text.encode()) == ("npu:is_npu_available", "other:is_cuda_available"), body
    # lightning 1.9.5's form (an NVML count behind a version test) is something else
    monkeypatch.chdir(tmp_path)
    (tmp_path / "imports.py").write_text(ACC_IMPORTS.replace(
        "        available = torch.cuda.is_available()", "        available = torch.cuda.device_count() > 0"),
        encoding="utf-8")
    from click.testing import CliRunner

    from npu_migrate.cli import main

    result = CliRunner().invoke(main, ["imports.py", "--diff", "--no-cache", "-j", "1"])
    assert "+        available = torch.npu.device_count() > 0" in result.output
    assert "+        return torch.npu.is_bf16_supported()" in result.output


# torchdistill 1.1.5 misc/log.py:281 and LAVIS 1.0.2 common/logger.py:43 (torchvision's reference
# SmoothedValue): a float64 tensor made on the device and all-reduced. NCCL reduces float64; HCCL's
# AllReduce does not on Atlas training, A2 and A3 products (CANN 8.5 HCCL API reference): NPU306 at
# the reduction; the dtype stays the user's choice.
SMOOTHED_VALUE = '''\
import torch
import torch.distributed as dist


class SmoothedValue(object):
    def synchronize_between_processes(self):
        if not is_dist_avail_and_initialized():
            return

        t = torch.tensor([self.count, self.total], dtype=torch.float64, device='cuda')
        dist.barrier()
        dist.all_reduce(t)
        t = t.tolist()
        self.count = int(t[0])
        self.total = t[1]

    def reduce_again(self):
        t = torch.tensor([self.count], dtype=torch.float64, device='cuda')
        t = t.float()
        dist.all_reduce(t)
        return t
'''


def test_a_float64_tensor_all_reduced_on_the_device_is_reported_at_the_reduction():
    r = assert_partial_as_whole(SMOOTHED_VALUE, "torchdistill/misc/log.py")
    assert r.new_text == SMOOTHED_VALUE.replace("import torch.distributed as dist\n", "import torch.distributed as dist\n"
                                                "import torch_npu  # noqa: F401\n").replace(
        "device='cuda'", "device='npu'") + PARTIAL_PADDING
    assert [(f.code, f.severity.value, f.span.line, f.span.col, f.api) for f in r.findings] == [
        ("NPU306", "warning", 12, 9, "torch.distributed.all_reduce")]
    assert "HCCL's AllReduce and ReduceScatter take no float64" in r.findings[0].message


# pytorch-forecasting 1.8.0 tests/test_models/test_temporal_fusion_transformer.py:290: Lightning's
# accelerator picked by a CUDA test. Moved to torch.npu, the test hands Lightning "gpu" on the
# Ascend machine (no CUDA device: it stops), and a "cuda" so picked became "npu", an accelerator
# name Lightning does not have; as written Lightning gets "cpu" and trains. Lightning's device
# arguments (accelerator, gpus, devices) stay as written; NPU313 reports the request.
LIGHTNING_TRAINERS = '''\
import lightning.pytorch as pl
import torch
from lightning import Fabric
from pytorch_lightning import Trainer


def fit(net, loader, strategy):
    trainer = pl.Trainer(
        max_epochs=3,
        strategy=strategy,
        accelerator="gpu" if torch.cuda.is_available() else "cpu",
    )
    trainer.fit(net, loader)
    old = Trainer(gpus=torch.cuda.device_count(), max_epochs=1)
    fabric = Fabric(accelerator="cuda" if torch.cuda.is_available() else "cpu",
                    devices=torch.cuda.device_count() if torch.cuda.is_available() else 1)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return trainer, old, fabric, net.to(device)
'''


def test_lightnings_device_arguments_picked_by_a_cuda_test_stay_as_written():
    r = assert_partial_as_whole(LIGHTNING_TRAINERS, "tests/test_models/test_tft.py")
    kept = LIGHTNING_TRAINERS.replace("import torch\n", "import torch\nimport torch_npu  # noqa: F401\n")
    # only the torch device moves: the Trainer and Fabric arguments are Lightning's
    assert r.new_text == kept.replace(
        'torch.device("cuda" if torch.cuda.is_available() else "cpu")',
        'torch.device("npu" if torch.npu.is_available() else "cpu")') + PARTIAL_PADDING
    assert [(f.code, f.span.line) for f in r.findings] == [("NPU313", 8), ("NPU313", 14), ("NPU313", 15)]
    # a file whose only CUDA words are Lightning's arguments is left as it is
    alone = "import pytorch_lightning as pl\nimport torch\n\nt = pl.Trainer(gpus=1 if torch.cuda.is_available() else 0)\n"
    result = migrate_source(alone, "train.py", Options())
    assert (result.new_text, result.edits) == (None, [])
    assert [f.code for f in result.findings] == ["NPU313"]


# monai 1.6.1 apps/nnunet/nnunetv2_runner.py:597-619: the child's environment is an annotated copy
# of os.environ, read with .get and set by subscript. The annotation hid the copy (only `env =
# os.environ.copy()` was one), so both stayed CUDA_VISIBLE_DEVICES while the same file's
# os.environ["CUDA_VISIBLE_DEVICES"] moved. Now an annotated copy is a copy, and its .get/.pop
# lookups move with its subscripts (a value and its reader together).
CHILD_ENVIRONMENT = '''\
import os
import subprocess

import torch


def train_command(gpu_id):
    env: dict[str, str] = os.environ.copy()
    env_cuda = env.get("CUDA_VISIBLE_DEVICES")
    if env_cuda is not None and gpu_id == "0":
        print("keeping", env_cuda)
    else:
        env["CUDA_VISIBLE_DEVICES"] = gpu_id
    return ["nnUNetv2_train"], env


def clean(extra: dict = {}):
    spare: dict = dict(os.environ)
    spare.pop("CUDA_VISIBLE_DEVICES", None)
    extra["CUDA_VISIBLE_DEVICES"] = "0"
    return spare, extra.get("CUDA_VISIBLE_DEVICES")


def predict(gpu_id):
    if "CUDA_VISIBLE_DEVICES" in os.environ and gpu_id == 0:
        return torch.cuda.device_count()
    os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu_id)
'''


def test_an_annotated_copy_of_the_environment_and_its_lookups_move_with_its_subscripts():
    r = assert_partial_as_whole(CHILD_ENVIRONMENT, "monai/apps/nnunet/nnunetv2_runner.py")
    moved = CHILD_ENVIRONMENT.replace("import torch\n", "import torch\nimport torch_npu  # noqa: F401\n")
    for before in ('env.get("CUDA_VISIBLE_DEVICES")', 'env["CUDA_VISIBLE_DEVICES"]', 'spare.pop("CUDA_VISIBLE_DEVICES"',
                   '"CUDA_VISIBLE_DEVICES" in os.environ', 'os.environ["CUDA_VISIBLE_DEVICES"]'):
        moved = moved.replace(before, before.replace("CUDA_VISIBLE_DEVICES", "ASCEND_RT_VISIBLE_DEVICES"))
    moved = moved.replace("torch.cuda.device_count", "torch.npu.device_count")
    # `extra` is a dict of the caller's, not the environment: its key stays
    assert r.new_text == moved + PARTIAL_PADDING
    assert 'extra["CUDA_VISIBLE_DEVICES"] = "0"' in r.new_text and 'extra.get("CUDA_VISIBLE_DEVICES")' in r.new_text


# The same choice anywhere: a CUDA test choosing between two string literals, one of them "gpu"
# (Lightning's accelerator, catboost's task_type "GPU"), stays; "gpu" is never a torch device. An
# arm that computes something moves with its test (ultralytics 8.3.40 utils/benchmarks.py:566).
GPU_NAME_CHOICES = """\
import torch
from catboost import CatBoostClassifier


def settings(cfg):
    accelerator = "gpu" if torch.cuda.is_available() else "cpu"
    task_type = "CPU" if not torch.cuda.is_available() else "GPU"
    model = CatBoostClassifier(task_type=task_type)
    name = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "GPU"
    device = "cuda" if torch.cuda.is_available() else "cpu"
    return {"accelerator": accelerator}, model, name, torch.zeros(1).to(device)
"""


def test_a_cuda_test_choosing_the_string_gpu_stays():
    r = assert_partial_as_whole(GPU_NAME_CHOICES, "settings.py")
    assert r.new_text == with_torch_npu(GPU_NAME_CHOICES).replace(
        'torch.cuda.get_device_name(0) if torch.cuda.is_available() else "GPU"',
        'torch.npu.get_device_name(0) if torch.npu.is_available() else "GPU"').replace(
        '"cuda" if torch.cuda.is_available() else "cpu"', '"npu" if torch.npu.is_available() else "cpu"') + PARTIAL_PADDING


# torchdrug 0.2.1 core/engine.py: `utils.cuda(batch, device=self.device)` calls the project's own
# `torchdrug.utils.cuda` (a function that moves a nested batch), imported as a module: the method
# rules leave a receiver that is an imported name, as a whole parse did, but the partial text left
# out `from torchdrug import utils` (no framework's import), `utils` looked like a local and the
# call became `utils.npu(...)`, an AttributeError at the first batch.
PROJECT_FUNCTION_NAMED_CUDA = """\
import torch
from torch import nn

from torchdrug import utils
import torchdrug.layers as layers


class Engine:
    def __init__(self, device):
        self.device = torch.device(device)
        self.model = nn.Linear(2, 2).cuda()

    def step(self, batch):
        if self.device.type == "cuda":
            batch = utils.cuda(batch, device=self.device)
        if layers.functional.is_cuda:
            batch["x"] = batch["x"].cuda()
        return batch
"""


def test_a_project_function_named_cuda_called_through_its_imported_module_stays():
    r = assert_partial_as_whole(PROJECT_FUNCTION_NAMED_CUDA, "torchdrug/core/engine.py")
    assert r.new_text == with_torch_npu(PROJECT_FUNCTION_NAMED_CUDA).replace(
        'nn.Linear(2, 2).cuda()', 'nn.Linear(2, 2).npu()').replace(
        'self.device.type == "cuda"', 'self.device.type == "npu"').replace(
        'batch["x"].cuda()', 'batch["x"].npu()') + PARTIAL_PADDING
    assert "utils.cuda(batch, device=self.device)" in r.new_text and "layers.functional.is_cuda" in r.new_text


# torchdrug 0.2.1 utils/torch.py `cuda(obj)`, which moves every batch: its test named the method it
# guards, and kept as "cuda" it was False for a Graph, whose own `def cuda` became `def npu` with its
# callers (data/graph.py): the function raised TypeError for every batch of graphs. The test follows
# the call; a flag of that name on an object the file calls no such method on stays.
MEMBER_TESTED_BEFORE_ITS_CALL = """\
import torch


class Graph:
    def __init__(self, edge_list):
        self.edge_list = edge_list

    def cuda(self, *args, **kwargs):
        return type(self)(self.edge_list.cuda(*args, **kwargs))


def cuda(obj, *args, **kwargs):
    if hasattr(obj, "cuda"):
        return obj.cuda(*args, **kwargs)
    elif isinstance(obj, dict):
        return type(obj)({k: cuda(v, *args, **kwargs) for k, v in obj.items()})
    raise TypeError("Can't transfer object type `%s`" % type(obj))


def build(args, model):
    if hasattr(args, "cuda") and args.cuda:
        model = model.to("cuda")
    return model, hasattr(torch, "cuda")
"""


def test_a_test_for_the_cuda_method_follows_the_call_it_guards():
    r = assert_partial_as_whole(MEMBER_TESTED_BEFORE_ITS_CALL, "torchdrug/utils/torch.py")
    assert r.new_text == with_torch_npu(MEMBER_TESTED_BEFORE_ITS_CALL).replace(
        "def cuda(self", "def npu(self").replace("edge_list.cuda(", "edge_list.npu(").replace(
        'hasattr(obj, "cuda")', 'hasattr(obj, "npu")').replace("obj.cuda(", "obj.npu(").replace(
        'model.to("cuda")', 'model.to("npu")') + PARTIAL_PADDING
    assert 'hasattr(args, "cuda") and args.cuda' in r.new_text and 'hasattr(torch, "cuda")' in r.new_text
    assert [e.message for e in r.edits if e.span.line == 13] == [
        '`hasattr(obj, "cuda")` -> `hasattr(obj, "npu")`: the test follows the method it guards (`.cuda()` -> `.npu()`)']


# yolov5 7.0.14 models/common.py:346-492 (DetectMultiBackend): `cuda = torch.cuda.is_available() and
# device.type != 'cpu'` moves to the NPU test; its readers choose ONNX Runtime's CUDA provider and
# Paddle Inference's GPU mode, which an Ascend machine does not have: reported where the choice is made.
YOLO_BACKENDS = '''\
import torch


def load(w, device, onnx, paddle):
    cuda = torch.cuda.is_available() and device.type != 'cpu'  # use CUDA
    if onnx:  # ONNX Runtime
        check_requirements(('onnx', 'onnxruntime-gpu' if cuda else 'onnxruntime'))
        import onnxruntime
        providers = ['CUDAExecutionProvider', 'CPUExecutionProvider'] if cuda else ['CPUExecutionProvider']
        session = onnxruntime.InferenceSession(w, providers=providers)
        return session
    elif paddle:  # PaddlePaddle
        import paddle.inference as pdi
        config = pdi.Config(str(w), str(w))
        if cuda:
            config.enable_use_gpu(memory_pool_init_size_mb=2048, device_id=0)
        return pdi.create_predictor(config)
'''


def test_a_cuda_tests_readers_choosing_cuda_only_providers_are_reported():
    r = assert_partial_as_whole(YOLO_BACKENDS, "models/common.py")
    assert r.new_text == with_torch_npu(YOLO_BACKENDS).replace(
        "torch.cuda.is_available()", "torch.npu.is_available()") + PARTIAL_PADDING
    assert [(f.code, f.severity.value, f.span.line, f.span.col, f.api) for f in r.findings] == [
        ("NPU303", "warning", 10, 19, "onnxruntime.InferenceSession"),
        ("NPU303", "warning", 16, 13, ".enable_use_gpu()")]


# torchdrug 0.2.1 utils/torch.py load_extension (the JIT build of its sparse kernels): where
# torch.cuda.is_available() it keeps the .cu sources and sets cpp_extension.load's CUDA flags, else
# it drops them. Moved to torch.npu, the NPU machine compiled the .cu files (no nvcc there: the
# build, and every GNN layer, failed); kept, it builds the CPU extension, as written (NPU302).
CUDA_SOURCES_CHOSEN_BY_AVAILABILITY = """\
import torch
from torch.utils import cpp_extension


def load_extension(name, sources, extra_cflags=None, extra_cuda_cflags=None, **kwargs):
    if extra_cflags is None:
        extra_cflags = ["-Ofast"]
    if extra_cuda_cflags is None:
        if torch.cuda.is_available():
            extra_cuda_cflags = ["-O3"]
            extra_cflags.append("-DCUDA_OP")
        else:
            new_sources = []
            for source in sources:
                if not cpp_extension._is_cuda_file(source):
                    new_sources.append(source)
            sources = new_sources
    return cpp_extension.load(name, sources, extra_cflags, extra_cuda_cflags, **kwargs)


def to_device(x):
    return x.cuda() if torch.cuda.is_available() else x
"""


def test_an_availability_test_choosing_the_cuda_compile_flags_of_a_build_stays():
    r = assert_partial_as_whole(CUDA_SOURCES_CHOSEN_BY_AVAILABILITY, "torchdrug/utils/torch.py")
    assert r.new_text == with_torch_npu(CUDA_SOURCES_CHOSEN_BY_AVAILABILITY).replace(
        "x.cuda() if torch.cuda.is_available() else x", "x.npu() if torch.npu.is_available() else x") + PARTIAL_PADDING
    assert [(f.code, f.span.line) for f in r.findings if f.code == "NPU302"] == [("NPU302", 9)]


# edward 1.3.5 edward/util/graphs.py:1-41 (get_session): native Keras is imported only to share the
# session with it, in `try: ... except ImportError: have_keras = False`. An optional import: the code
# runs without Keras, so NPU330 says so at [info], as NPU303 does for an optional CUDA-only library.
EDWARD_SESSION = '''\
from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import numpy as np
import six
import sys
import tensorflow as tf


def get_session():
  """Get the globally defined TensorFlow session."""
  global _ED_SESSION
  if tf.get_default_session() is None:
    _ED_SESSION = tf.InteractiveSession()
  else:
    _ED_SESSION = tf.get_default_session()

  save_stderr = sys.stderr
  try:
    import os
    sys.stderr = open(os.devnull, 'w')  # suppress keras import
    from keras import backend as K
    sys.stderr = save_stderr
    have_keras = True
  except ImportError:
    sys.stderr = save_stderr
    have_keras = False
  if have_keras:
    K.set_session(_ED_SESSION)

  return _ED_SESSION
'''


def test_an_optional_native_keras_import_is_reported_as_info():
    r = migrate_source(EDWARD_SESSION, "edward/util/graphs.py")
    assert [(f.code, f.severity.value, f.span.line, f.span.col, f.api) for f in r.findings] == [
        ("NPU330", "info", 23, 5, "keras")]
    assert r.findings[0].message == (
        "native Keras (`keras`) is not supported by the TF Adapter; only tf.keras is (optional: imported in "
        "`try: … except ImportError` or where a check says it is installed, so the code has a fallback; check "
        "that the fallback is what runs on the NPU)")
    assert "tf.InteractiveSession(config=npu_config_proto())" in r.new_text
    # imported outside the try, it stays an error
    plain = EDWARD_SESSION.replace("    from keras import backend as K\n", "    pass\n").replace(
        "import tensorflow as tf\n", "import tensorflow as tf\nfrom keras import backend as K\n")
    assert [(f.code, f.severity.value) for f in migrate_source(plain, "edward/util/graphs.py").findings] == [
        ("NPU330", "error")]


# peft 0.21.2 tests/test_gpu_examples.py:6761-6770 (`_setup_dist`) and :6786-6826 (a rank's LoRA
# synchronization test, trimmed): "gloo" is the `else` of `if torch.cuda.is_available()`, which moves
# to the NPU's test ("nccl" -> "hccl"): on the Ascend machine that arm does not run, so NPU325 (gloo
# with collectives of NPU tensors) does not apply there. Left unguarded, it does.
PEFT_SETUP_DIST = '''\
import os

import torch
import torch.distributed as dist


def _setup_dist(rank, world_size, port):
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = str(port)
    if torch.cuda.is_available():
        dist.init_process_group(backend="nccl", rank=rank, world_size=world_size)
    else:
        dist.init_process_group(backend="gloo", rank=rank, world_size=world_size)


def _test_lora_weight_synchronization(rank, world_size, port, model):
    torch.cuda.set_device(rank)
    device = torch.device("cuda", rank)
    model.to(device)
    for name, module in model.named_modules():
        weight = module.lora_A["default"].weight.data.contiguous()
        gathered = [torch.zeros_like(weight) for _ in range(world_size)]
        dist.all_gather(gathered, weight)
'''


def test_gloo_in_the_else_of_a_moved_cuda_test_is_not_reported():
    r = assert_partial_as_whole(PEFT_SETUP_DIST, "tests/test_gpu_examples.py")
    assert "torch.npu.is_available()" in r.new_text and 'backend="hccl"' in r.new_text
    assert [f.code for f in r.findings] == []
    unguarded = PEFT_SETUP_DIST.replace(
        '    if torch.cuda.is_available():\n        dist.init_process_group(backend="nccl", rank=rank, world_size=world_size)\n'
        '    else:\n        dist.init_process_group', "    dist.init_process_group")
    assert [(f.code, f.span.line) for f in assert_partial_as_whole(unguarded, "tests/test_gpu_examples.py").findings] == [
        ("NPU325", 10)]


# trl 1.16.0 trl/scripts/dpo.py:137-151 (make_parser and the main block): the arguments are parsed
# by TRL's TrlParser with `fail_with_unknown_args=False`, which lets the platform's --data_url and
# --train_url through. The script gets modelarts_setup() (which reads them itself); NPU216 ("that
# parser must accept --data_url/--train_url") would ask for what it already does.
TRL_DPO_MAIN = '''\
import argparse


def main(script_args, training_args, model_args, dataset_args):
    pass


def make_parser(subparsers: argparse._SubParsersAction | None = None, prog: str | None = None):
    from trl import DatasetMixtureConfig, DPOConfig, ModelConfig, ScriptArguments, TrlParser

    dataclass_types = (ScriptArguments, DPOConfig, ModelConfig, DatasetMixtureConfig)
    if subparsers is not None:
        parser = subparsers.add_parser("dpo", help="Run the DPO training script", dataclass_types=dataclass_types)
    else:
        parser = TrlParser(dataclass_types, prog=prog)
    return parser


if __name__ == "__main__":
    parser = make_parser()
    script_args, training_args, model_args, dataset_args = parser.parse_args_and_config(fail_with_unknown_args=False)
    main(script_args, training_args, model_args, dataset_args)
'''


def test_a_parser_of_another_module_tolerating_unknown_arguments_is_not_reported():
    options = Options(modelarts=True)
    r = migrate_source(TRL_DPO_MAIN, "trl/scripts/dpo.py", options)
    assert "NPU216" not in [f.code for f in r.findings]
    assert "modelarts_setup()" in r.new_text
    strict = TRL_DPO_MAIN.replace("parse_args_and_config(fail_with_unknown_args=False)", "parse_args_and_config()")
    assert [(f.code, f.span.line) for f in migrate_source(strict, "trl/scripts/dpo.py", options).findings
            if f.code == "NPU216"] == [("NPU216", 21)]


# litgpt 0.5.13 litgpt/api.py:214-226 (LLM.load) and 299-310 (LLM.distribute): the accelerator
# Lightning's Fabric gets is chosen by CUDA's availability, as an `if` statement. "cuda" there is
# Lightning's accelerator name, which the pass keeps (`accelerator` is no device variable); moved
# alone, the test picked "cuda" on the Ascend machine and Fabric stopped (no CUDA device there),
# where as written it picks "cpu" and runs (NPU313 says how to run it on the NPU). The device test
# of the same file that chooses a torch device ("cuda" if ... else "cpu", given to `device=`) and
# an arm that also moves a model still move.
LITGPT_ACCELERATOR_CHOICE = '''\
import lightning as L
import torch


def load(distribute="auto", accelerator="auto"):
    if distribute == "auto":
        if torch.cuda.is_available():
            accelerator = "cuda"
        elif torch.backends.mps.is_available():
            accelerator = "mps"
        else:
            accelerator = "cpu"

        fabric = L.Fabric(
            accelerator=accelerator,
            devices=1,
        )
        preprocessor = Preprocessor(tokenizer, device=fabric.device)
    else:
        preprocessor = Preprocessor(tokenizer, device="cuda" if torch.cuda.is_available() else "cpu")
        fabric = None
    allowed_accelerators = {"cpu", "gpu", "cuda", "mps", "auto"}
    if accelerator not in allowed_accelerators:
        raise ValueError(f"Invalid accelerator: {accelerator}. Must be one of {allowed_accelerators}.")
    return fabric, preprocessor


def place(model):
    if torch.cuda.is_available():
        kind = "cuda"
        model = model.cuda()
    return model, kind
'''


def test_a_cuda_test_choosing_a_name_the_pass_keeps_stays_with_it():
    r = assert_partial_as_whole(LITGPT_ACCELERATOR_CHOICE, "litgpt/api.py")
    assert r.new_text == with_torch_npu(LITGPT_ACCELERATOR_CHOICE).replace(
        'device="cuda" if torch.cuda.is_available()', 'device="npu" if torch.npu.is_available()').replace(
        '    if torch.cuda.is_available():\n        kind', '    if torch.npu.is_available():\n        kind').replace(
        "model.cuda()", "model.npu()") + PARTIAL_PADDING
    assert '        if torch.cuda.is_available():\n            accelerator = "cuda"' in r.new_text
    assert [(f.code, f.span.line) for f in r.findings] == [("NPU313", 14)]


# neuralforecast 1.7.5 neuralforecast/common/_base_model.py:174-180 (BaseModel.__init__, the
# dict later given as `pl.Trainer(**self.trainer_kwargs)`): Lightning's accelerator and device
# count chosen by CUDA's availability, through a dict's keys. Both tests moved to torch.npu: on
# the Ascend machine Lightning was asked for "gpu" (no CUDA device there: it stops), and the
# second alone would hand Lightning's CPU accelerator `devices=-1`, which it refuses ("should be
# an int > 0"); as written neither key is set there and it trains on the CPU. Both tests stay,
# NPU313 says so at the "gpu" key; a dict key that is a torch device still moves with its test.
NEURALFORECAST_TRAINER_KWARGS = '''\
import numpy as np
import torch
import torch.nn as nn
import pytorch_lightning as pl


class BaseModel(pl.LightningModule):
    def __init__(self, max_steps, trainer_kwargs):
        super().__init__()
        trainer_kwargs = {**trainer_kwargs, "max_steps": max_steps}

        # Add GPU accelerator if available
        if trainer_kwargs.get("accelerator", None) is None:
            if torch.cuda.is_available():
                trainer_kwargs["accelerator"] = "gpu"
        if trainer_kwargs.get("devices", None) is None:
            if torch.cuda.is_available():
                trainer_kwargs["devices"] = -1

        self.trainer_kwargs = trainer_kwargs

    def place(self, config):
        if torch.cuda.is_available():
            config["device"] = "cuda"
        return torch.zeros(1, device=config["device"])
'''


def test_a_cuda_test_giving_lightning_a_dict_key_stays_with_it():
    r = assert_partial_as_whole(NEURALFORECAST_TRAINER_KWARGS, "neuralforecast/common/_base_model.py")
    assert r.new_text == NEURALFORECAST_TRAINER_KWARGS.replace(
        "import torch.nn as nn\n", "import torch.nn as nn\nimport torch_npu  # noqa: F401\n").replace(
        'torch.cuda.is_available():\n            config["device"] = "cuda"',
        'torch.npu.is_available():\n            config["device"] = "npu"') + PARTIAL_PADDING
    assert [(f.code, f.span.line, f.span.col, f.message) for f in r.findings] == [
        ("NPU313", 15, 17, '`trainer_kwargs["accelerator"] = "gpu"` under a CUDA test asks Lightning for CUDA '
         "devices, which an Ascend machine does not have: the test stays on CUDA, so there the project trains "
         "on the CPU")]
    # Without Lightning in the file, a number given to a "devices" key is no Lightning device count.
    plain = NEURALFORECAST_TRAINER_KWARGS.replace("import pytorch_lightning as pl\n", "").replace(
        "(pl.LightningModule)", "")
    moved = migrate_source(plain, "m.py", Options())
    assert 'torch.npu.is_available():\n                trainer_kwargs["devices"] = -1' in moved.new_text
    assert 'torch.cuda.is_available():\n                trainer_kwargs["accelerator"] = "gpu"' in moved.new_text


# dm-sonnet 1.36 sonnet/examples/mnist_mlp.py:18-28, 69-110 (trimmed; also rnn_shakespeare.py,
# rmc_nth_farthest.py, brnn_ptb.py:570): the training loop's SingularMonitoredSession was left
# without the NPU's session config and nothing was said: TensorFlow built the session's own
# ChiefSessionCreator from its `config` (None), and the graph ran on the host CPU. It gets
# `config=npu_config_proto()` like the other monitored sessions (NPU121).
SONNET_SINGULAR_MONITORED_SESSION = '''\
from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import os
# Dependency imports

import numpy as np
import sonnet as snt
import tensorflow.compat.v1 as tf


def train_and_eval(mlp, train_images, train_labels, num_train_steps, report_every):
  train_logits = mlp(train_images)

  # Training loss and optimizer.
  loss = tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=train_labels, logits=train_logits)
  loss_avg = tf.reduce_mean(loss)
  optimizer = tf.train.GradientDescentOptimizer(0.1)
  optimizer_step = optimizer.minimize(loss_avg)

  with tf.train.SingularMonitoredSession() as sess:

    for step_idx in range(num_train_steps):
      current_loss, _ = sess.run([loss_avg, optimizer_step])
      if step_idx % report_every == 0:
        tf.logging.info("Step: %4d of %d - loss: %.02f.",
                        step_idx + 1, num_train_steps, current_loss)
'''


def test_a_singular_monitored_session_gets_the_npu_session_config():
    r = migrate_source(SONNET_SINGULAR_MONITORED_SESSION, "sonnet/examples/mnist_mlp.py", Options())
    assert r.new_text == SONNET_SINGULAR_MONITORED_SESSION.replace(
        "\nimport os\n", "\nfrom npu_bridge.npu_init import *\nimport os\n").replace(
        "SingularMonitoredSession()", "SingularMonitoredSession(config=npu_config_proto())")
    assert [(e.code, e.span.line) for e in r.edits] == [("NPU120", 5), ("NPU121", 23)]
    assert r.findings == []


# neuralforecast 1.7.5 neuralforecast/common/_base_auto.py:7-16, 223-270 (trimmed): every Auto
# model's `gpus` defaults to the device count, moved to the NPU's; `_tune_model` hands it to Ray
# Tune as the "gpu" resource through a variable, and Ray, which finds no GPU on the Ascend
# machine, keeps every trial pending. NPU329 said so only for a dict written in the call.
NEURALFORECAST_RAY_RESOURCES = '''\
from os import cpu_count

import torch
import pytorch_lightning as pl

from ray import air, tune


class BaseAuto(pl.LightningModule):
    def __init__(self, cls_model, h, loss, valid_loss, config, search_alg=None,
                 num_samples=10, cpus=cpu_count(), gpus=torch.cuda.device_count()):
        super(BaseAuto, self).__init__()
        self.cpus = cpus
        self.gpus = gpus

    def _tune_model(
        self,
        cls_model,
        dataset,
        val_size,
        test_size,
        cpus,
        gpus,
        verbose,
        num_samples,
        search_alg,
        config,
    ):
        train_fn_with_parameters = tune.with_parameters(
            self._train_tune,
            cls_model=cls_model,
            dataset=dataset,
            val_size=val_size,
            test_size=test_size,
        )

        # Device
        if gpus > 0:
            device_dict = {"gpu": gpus}
        else:
            device_dict = {"cpu": cpus}

        tuner = tune.Tuner(
            tune.with_resources(train_fn_with_parameters, device_dict),
            run_config=air.RunConfig(callbacks=self.callbacks, verbose=verbose),
            tune_config=tune.TuneConfig(
                metric="loss",
                mode="min",
                num_samples=num_samples,
                search_alg=search_alg,
            ),
            param_space=config,
        )
        results = tuner.fit()
        return results
'''


def test_a_ray_resources_variable_asking_for_gpus_is_reported():
    r = assert_partial_as_whole(NEURALFORECAST_RAY_RESOURCES, "neuralforecast/common/_base_auto.py")
    assert r.new_text == with_torch_npu(NEURALFORECAST_RAY_RESOURCES).replace(
        "torch.cuda.device_count()", "torch.npu.device_count()") + PARTIAL_PADDING
    assert [(f.code, f.span.line, f.span.col) for f in r.findings] == [("NPU329", 44, 13)]
    assert migrate_source(NEURALFORECAST_RAY_RESOURCES.replace('{"gpu": gpus}', '{"cpu": cpus, "gpu": 0}'),
                          "m.py", Options()).findings == []


# torchrl 0.6.0 torchrl/envs/libs/dm_control.py:5-35 (trimmed; torchrl/__init__.py:18-20 the same
# with MUJOCO_EGL_DEVICE_ID): the CUDA device count spreads MuJoCo's EGL rendering over the GPUs.
# An EGL device is a GPU of NVIDIA's driver: moved, the NPU count chose an EGL index on the Ascend
# machine, past its EGL devices; as written the test is False there and MuJoCo renders on its
# default. The statement stays whole; one that also moves a model moves with it.
TORCHRL_EGL_DEVICE = '''\
from __future__ import annotations

import importlib
import os

import numpy as np
import torch

from torchrl._utils import logger as torchrl_logger, VERBOSE

if torch.cuda.device_count() > 1:
    n = torch.cuda.device_count() - 1
    os.environ["EGL_DEVICE_ID"] = str(1 + (os.getpid() % n))
    if VERBOSE:
        torchrl_logger.info(f"EGL_DEVICE_ID: {os.environ['EGL_DEVICE_ID']}")


def place(model):
    if torch.cuda.is_available():
        os.environ["MUJOCO_EGL_DEVICE_ID"] = "0"
        model = model.cuda()
    return model
'''


def test_a_cuda_count_choosing_an_egl_device_stays():
    r = assert_partial_as_whole(TORCHRL_EGL_DEVICE, "torchrl/envs/libs/dm_control.py")
    assert r.new_text == with_torch_npu(TORCHRL_EGL_DEVICE).replace(
        "    if torch.cuda.is_available():", "    if torch.npu.is_available():").replace(
        "model.cuda()", "model.npu()") + PARTIAL_PADDING
    assert r.findings == []


# pyannote-audio 4.0.7 src/pyannote/audio/__main__.py:59-96 (the CLI's `--device auto`): the test
# picks a member of the module's own Enum, whose value "cuda" stays (the CLI's choice, read as
# torch.device(device.value)). Moved alone, `auto` became torch.device("cuda") on the Ascend
# machine and the pipeline's .to() failed there; as written it picks the CPU and runs. The device
# type test of the same file that reads a torch device still moves.
PYANNOTE_DEVICE_CHOICE = '''\
from enum import Enum

import torch


class Device(str, Enum):
    CPU = "cpu"
    CUDA = "cuda"
    MPS = "mps"
    AUTO = "auto"


def parse_device(device: Device) -> torch.device:
    if device == Device.AUTO:
        if torch.cuda.is_available():
            device = Device.CUDA

        elif torch.backends.mps.is_available():
            device = Device.MPS

        else:
            device = Device.CPU

    return torch.device(device.value)


def report(torch_device):
    if torch_device.type == "cuda":
        props = torch.cuda.get_device_properties(torch_device)
        return props.name
'''


def test_a_cuda_test_choosing_a_member_of_the_modules_enum_stays_with_its_value():
    r = assert_partial_as_whole(PYANNOTE_DEVICE_CHOICE, "pyannote/audio/__main__.py")
    assert r.new_text == with_torch_npu(PYANNOTE_DEVICE_CHOICE).replace(
        'torch_device.type == "cuda"', 'torch_device.type == "npu"').replace(
        "torch.cuda.get_device_properties", "torch.npu.get_device_properties") + PARTIAL_PADDING


# classy-vision 0.7.0 classy_vision/generic/distributed_util.py:22-46 (the excerpt as shipped, its
# docstrings left out): a test of where a tensor is, choosing the module's own label "gpu". It was
# kept on CUDA as if it chose Lightning's accelerator (guards.keep_test_choosing_gpu), while the
# module's other `is_cuda` moved: on the NPU `orig_device` was "cpu" for every tensor, and
# convert_to_normal_tensor, moved, sent each reduced NPU tensor to the CPU.
CLASSY_DISTRIBUTED_TENSOR = """\
import torch


def convert_to_distributed_tensor(tensor: torch.Tensor) -> Tuple[torch.Tensor, str]:
    orig_device = "cpu" if not tensor.is_cuda else "gpu"
    if (
        torch.distributed.is_available()
        and torch.distributed.get_backend() == torch.distributed.Backend.NCCL
        and not tensor.is_cuda
    ):
        tensor = tensor.cuda()
    return (tensor, orig_device)


def convert_to_normal_tensor(tensor: torch.Tensor, orig_device: str) -> torch.Tensor:
    if tensor.is_cuda and orig_device == "cpu":
        tensor = tensor.cpu()
    return tensor
"""


def test_a_label_chosen_by_where_a_tensor_is_moves_with_the_modules_other_placement_tests():
    result = migrate_source(CLASSY_DISTRIBUTED_TENSOR, "classy_vision/generic/distributed_util.py", Options())
    assert result.error is None
    assert result.new_text == with_torch_npu(CLASSY_DISTRIBUTED_TENSOR).replace(
        ".is_cuda", ".is_npu").replace("Backend.NCCL", "Backend.HCCL").replace(".cuda()", ".npu()")
    assert [(e.code, e.span.line) for e in result.edits] == [
        ("NPU108", 2), ("NPU104", 5), ("NPU106", 8), ("NPU104", 9), ("NPU101", 11), ("NPU104", 16)]
    again = migrate_source(result.new_text, "classy_vision/generic/distributed_util.py", Options())
    assert again.error is None and not again.changed
    # A test of the machine choosing "gpu" still stays (lightly's accelerator: LIGHTNING_ACCELERATOR).
    machine = 'import torch\naccelerator = "gpu" if torch.cuda.is_available() else "cpu"\n'
    assert migrate_source(machine, "train_cli.py", Options()).new_text is None


# classy-vision 0.7.0 test/hooks_exponential_moving_average_model_hook_test.py:35-37, 99-101,
# 123-131 (shortened): the test's label "gpu" goes to the project's own hook, whose __init__ asserts
# `device in ["cpu", "gpu"]`. `Hook(device=device)` made `device` a device variable, so the
# variable-only rule moved "gpu" to "npu" in the assignment and in `_map_device_string`'s
# comparison (the hook's assert then failed), not in `self._test_..._hook("cpu", "gpu")`; and the
# kept `torch.cuda.is_available()` of the assignment moved only in a second run (not idempotent).
CLASSY_EMA_TEST = """\
import unittest

import torch
from classy_vision.hooks import ExponentialMovingAverageModelHook


class TestExponentialMovingAverageModelHook(HookTestBase):
    def _map_device_string(self, device):
        return "cuda" if device == "gpu" else "cpu"

    def test_get_model_state_iterator(self):
        device = "gpu" if torch.cuda.is_available() else "cpu"
        model = TestModel().to(device=self._map_device_string(device))
        hook = ExponentialMovingAverageModelHook(decay=0.5, device=device)

    def test_exponential_moving_average_hook(self):
        device = "gpu" if torch.cuda.is_available() else "cpu"
        self._test_exponential_moving_average_hook(device, device)

    @unittest.skipUnless(torch.cuda.is_available(), "This test needs a gpu to run")
    def test_mixed_devices(self):
        self._test_exponential_moving_average_hook("cpu", "gpu")
        self._test_exponential_moving_average_hook("gpu", "cpu")
"""


def test_a_gpu_label_given_to_the_projects_own_device_keyword_stays():
    result = migrate_source(CLASSY_EMA_TEST, "test/hooks_exponential_moving_average_model_hook_test.py", Options())
    assert result.error is None
    assert result.new_text == with_torch_npu(CLASSY_EMA_TEST).replace(
        'return "cuda" if device == "gpu"', 'return "npu" if device == "gpu"').replace(
        "@unittest.skipUnless(torch.cuda", "@unittest.skipUnless(torch.npu")
    again = migrate_source(result.new_text, "test/hooks_exponential_moving_average_model_hook_test.py", Options())
    assert again.error is None and not again.changed
    # Given to torch itself, the module's "gpu:0" is a device string still (the seed's).
    seed = "import torch\nCALCULATE_DEVICE = 'gpu:0'\nloss = Loss(device=CALCULATE_DEVICE)\nx = x.to(CALCULATE_DEVICE)\n"
    assert migrate_source(seed, "seed.py", Options()).new_text == with_torch_npu(seed).replace("'gpu:0'", "'npu:0'")
