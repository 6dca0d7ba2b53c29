"""`--distributed`: golden outputs per framework (fixtures/distributed/<framework>/: NAME.py,
NAME.expected.py and the files generated beside it under generated/NAME/), idempotence, what is
left alone and reported, the generated files themselves."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from npu_migrate import migrate_source
from npu_migrate.options import Options

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "distributed"
CASES = sorted(p for p in FIXTURES.glob("*/*.py") if not p.name.endswith(".expected.py")
               and (p.parent / (p.stem + ".expected.py")).exists())
DIST = Options(distributed=True)


def _migrate(text, path="train.py", options=DIST):
    result = migrate_source(text, path, options)
    assert result.error is None
    return result


def test_every_framework_has_fixtures():
    assert {p.parent.name for p in CASES} >= {"pytorch", "mindspore", "tensorflow"}


@pytest.mark.parametrize("source", CASES, ids=[f"{p.parent.name}/{p.stem}" for p in CASES])
def test_golden(source):
    result = _migrate(source.read_text(encoding="utf-8"), str(source))
    expected = source.with_name(source.stem + ".expected.py").read_text(encoding="utf-8")
    assert result.new_text == expected
    generated = source.parent / "generated" / source.stem
    want = {p.name: p.read_text(encoding="utf-8") for p in sorted(generated.glob("*"))}
    got = {Path(path).name: text for path, text in result.extra_files.items()}
    assert got == want


@pytest.mark.parametrize("source", CASES, ids=[f"{p.parent.name}/{p.stem}" for p in CASES])
def test_second_run_changes_nothing(source):
    expected = source.with_name(source.stem + ".expected.py").read_text(encoding="utf-8")
    again = _migrate(expected, str(source))
    assert not again.changed and again.edits == []
    first = _migrate(source.read_text(encoding="utf-8"), str(source))
    assert again.extra_files == first.extra_files  # the generated files stay as they are


@pytest.mark.parametrize("source", CASES, ids=[f"{p.parent.name}/{p.stem}" for p in CASES])
def test_generated_shell_scripts_pass_bash_n(source, tmp_path):
    result = _migrate(source.read_text(encoding="utf-8"), str(source))
    scripts = [text for path, text in result.extra_files.items() if path.endswith(".sh")]
    assert scripts
    for i, text in enumerate(scripts):
        path = tmp_path / f"s{i}.sh"
        path.write_text(text, encoding="utf-8")
        check = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
        assert check.returncode == 0, check.stderr


def test_without_the_option_nothing_distributed_happens():
    source = FIXTURES / "pytorch" / "mnist_train.py"
    result = _migrate(source.read_text(encoding="utf-8"), str(source), Options())
    assert "distributed_setup" not in (result.new_text or "") and not result.extra_files


# ----------------------------------------------------------------------------- left alone, reported

ALREADY = [
    ("fixtures/pytorch/imagenet_ddp_main.py", "torch.distributed"),
    ("fixtures/mindspore/lenet_ms2.py", "mindspore.communication.init"),
    ("fixtures/mindspore/resnet50_train.py", "mindspore.dataset.Cifar10Dataset(num_shards="),
    ("fixtures/tensorflow/resnet50_horovod.py", "horovod"),
]


@pytest.mark.parametrize("path,api", ALREADY, ids=[Path(p).stem for p, _ in ALREADY])
def test_already_distributed_scripts_get_only_the_device_migration(path, api):
    text = (ROOT / path).read_text(encoding="utf-8")
    plain = _migrate(text, path, Options())
    dist = _migrate(text, path)
    assert dist.new_text == plain.new_text and not dist.extra_files
    found = [f for f in dist.findings if f.code == "NPU380"]
    assert len(found) == 1 and found[0].api.startswith(api)


TORCH = """import torch
from torch.utils.data import DataLoader

def main():
    model = Net().cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
{loader}
    for epoch in range(3):
        for x, y in train_loader:
            pass

if __name__ == "__main__":
    main()
"""
UNSAFE = [
    ("    train_loader = DataLoader(data, batch_size=8, sampler=WeightedSampler(data))", "NPU381"),
    ("    train_loader = DataLoader(data, batch_size=8, batch_sampler=buckets)", "NPU381"),
    ("    train_loader = DataLoader(data, 8, True)", "NPU381"),
    ("    data = Stream()\n    train_loader = DataLoader(data, batch_size=8)\n"
     "class Stream(torch.utils.data.IterableDataset):\n    pass\ndef unused():", "NPU382"),
]


@pytest.mark.parametrize("loader,code", UNSAFE)
def test_what_cannot_be_converted_safely_is_reported_and_nothing_changes(loader, code):
    text = TORCH.format(loader=loader)
    plain = _migrate(text, "train.py", Options())
    dist = _migrate(text)
    assert dist.new_text == plain.new_text and not dist.extra_files
    assert code in {f.code for f in dist.findings}


def test_manual_all_reduce_is_reported():
    text = TORCH.format(loader="    train_loader = DataLoader(data, batch_size=8)") + (
        "def sync(model):\n    for p in model.parameters():\n        torch.distributed.all_reduce(p.grad)\n")
    dist = _migrate(text)
    assert [f.code for f in dist.findings if f.code.startswith("NPU38")] == ["NPU383"]
    assert "distributed_setup" not in (dist.new_text or "")


def test_evaluation_loaders_keep_every_sample_and_eval_datasets_are_not_sharded():
    text = TORCH.format(loader="    train_loader = DataLoader(data, batch_size=8, shuffle=True)\n"
                               "    val_loader = DataLoader(val_data, batch_size=8)")
    out = _migrate(text).new_text
    assert "train_loader = DataLoader(data, batch_size=8, sampler=distributed_sampler(data, shuffle=True))" in out
    assert "    val_loader = DataLoader(val_data, batch_size=8)\n" in out
    tf = (FIXTURES / "tensorflow" / "resnet_estimator.expected.py").read_text(encoding="utf-8")
    assert 'dataset = tf.data.TFRecordDataset(tf.gfile.Glob(FLAGS.data_dir + "/validation-*"))\n' in tf


def test_a_dataset_built_inside_the_loader_call_gets_a_name_first():
    text = TORCH.format(loader="    train_loader = DataLoader(\n        datasets.MNIST('data', train=True),\n"
                               "        batch_size=8, shuffle=True)")
    out = _migrate(text).new_text
    assert ("    train_dataset = datasets.MNIST('data', train=True)\n    train_loader = DataLoader(\n"
            "        train_dataset,\n        batch_size=8, sampler=distributed_sampler(train_dataset, shuffle=True))\n") in out


@pytest.mark.parametrize("framework, form", [("torch", ""), ("tensorflow", ""), ("mindspore", ""),
                                             ("mindspore", "device")])
def test_the_generated_helper_modules_read_as_hand_written_code(framework, form):
    """One module per framework, black-formatted, Python 3.7 (ModelArts images), versioned; the
    TF 1.15 and MindSpore ones import the standard library and their framework only, at the top
    (npu_bridge's collective operations only where several processes need them)."""
    import ast
    import re

    from npu_migrate.distributed import render_helpers
    from npu_migrate.modelarts import black_format

    text = render_helpers(framework, form)
    assert black_format(text) == text
    tree = ast.parse(text, feature_version=(3, 7))
    assert text.startswith("# npu-migrate: distributed helpers (generated, checksum ")
    assert re.search(r"^VERSION = \d+\b", text, re.MULTILINE)
    top = {alias.name.split(".")[0] for node in tree.body if isinstance(node, ast.Import) for alias in node.names}
    top |= {node.module.split(".")[0] for node in tree.body if isinstance(node, ast.ImportFrom) and node.module}
    assert top <= {"os", "datetime", framework, "torch_npu"}, top
    assert "builtins" not in text  # no process-wide patching


@pytest.mark.parametrize("framework, name, module", [("tensorflow", "mlp_session", "npu_migrate_distributed_tf"),
                                                     ("mindspore", "lenet_train", "npu_migrate_distributed_ms")])
def test_the_tf_and_mindspore_helper_blocks_of_earlier_versions_become_the_module(framework, name, module):
    """Earlier versions pasted the TF 1.15 and MindSpore helpers into the script as a marked block:
    a later run replaces it by the import of the generated module, as a fresh conversion writes it."""
    source = FIXTURES / framework / f"{name}.py"
    earlier = (FIXTURES / framework / "earlier" / f"{name}.block_v1.py").read_text(encoding="utf-8")
    assert "# >>> npu-migrate: distributed >>>" in earlier and "def rank_size():" in earlier
    result = _migrate(earlier, str(source))
    assert result.new_text == source.with_name(f"{name}.expected.py").read_text(encoding="utf-8")
    assert [(e.code, e.message.split(":")[0]) for e in result.edits] == [("NPU164", f"8-NPU setup moved to {module}.py")]
    assert result.extra_files == _migrate(source.read_text(encoding="utf-8"), str(source)).extra_files


def test_mindspore_custom_training_loop_is_reported():
    text = ("import mindspore as ms\nimport mindspore.dataset as ds\n\ndef train(net, opt):\n"
            "    data = ds.MnistDataset('mnist')\n    grad_fn = ms.value_and_grad(net, None, opt.parameters)\n")
    dist = _migrate(text)
    assert "NPU390" in {f.code for f in dist.findings} and not dist.changed


def test_a_mindspore_dataset_module_is_sharded_with_the_helpers_only():
    text = "import mindspore.dataset as ds\n\n\ndef create_dataset(path):\n    return ds.Cifar10Dataset(path)\n"
    out = _migrate(text, "dataset.py")
    assert "return ds.Cifar10Dataset(path, num_shards=rank_size(), shard_id=rank_id())" in out.new_text
    assert "from npu_migrate_distributed_ms import rank_id, rank_size  # npu-migrate: distributed\n" in out.new_text
    assert list(out.extra_files) == ["npu_migrate_distributed_ms.py"]  # the module; no launcher: not an entry
    assert not _migrate(out.new_text, "dataset.py").changed


def test_a_mindspore_program_whose_training_is_not_recognised_keeps_its_data_whole():
    """mindarmour 2.0.0's examples/privacy/diff_privacy/lenet5_dp.py trains with DPModel: sharding
    its data set without the process group would train each NPU alone on a part of the data."""
    text = ("import mindspore.dataset as ds\nfrom mindarmour.privacy.diff_privacy import DPModel\n\n\n"
            "def generate(path):\n    return ds.MnistDataset(path)\n\n\n"
            "if __name__ == '__main__':\n    DPModel(network=net, loss_fn=loss, optimizer=opt).train(1, generate('m'))\n")
    out = _migrate(text)
    assert not out.changed and not out.extra_files
    assert [(f.code, f.span.line) for f in out.findings if f.code.startswith("NPU3")] == [("NPU390", 6)]
    assert "a program whose training is not recognised" in out.findings[0].message


def test_mindspore_setup_follows_the_set_context_that_sets_the_device_target():
    """mindarmour 2.0.0's examples/privacy/membership_inference/train.py sets device_id first and
    the device target next: init() must come after the target, not between the two."""
    text = ("from mindspore import context, nn\nfrom mindspore.train import Model\n\n"
            "if __name__ == '__main__':\n"
            "    context.set_context(device_id=1)\n"
            "    context.set_context(mode=context.GRAPH_MODE, device_target='Ascend')\n"
            "    model = Model(net, nn.SoftmaxCrossEntropyWithLogits(), opt)\n")
    out = _migrate(text)
    assert ("    context.set_context(device_id=1)\n"
            "    context.set_context(mode=context.GRAPH_MODE, device_target='Ascend')\n"
            "    distributed_setup()\n    model = Model(") in out.new_text
    assert [e.span.line for e in out.edits if e.code == "NPU164"] == [6]
    assert not _migrate(out.new_text).changed


# ----------------------------------------------------------------------------- with --modelarts


@pytest.mark.parametrize("source", ["pytorch/mnist_train.py", "mindspore/lenet_train.py", "tensorflow/mlp_session.py"])
def test_distributed_combines_with_modelarts(source):
    path = FIXTURES / source
    both = Options(distributed=True, modelarts=True)
    result = _migrate(path.read_text(encoding="utf-8"), str(path), both)
    text = result.new_text
    modelarts = "from npu_migrate_modelarts import modelarts_setup  # npu-migrate: ModelArts\n"
    assert text.count(modelarts) == 1  # the ModelArts runtime is a module beside the script
    # the helpers are a module too: imported, then ModelArts'
    module = {"pytorch": "npu_migrate_distributed", "tensorflow": "npu_migrate_distributed_tf",
              "mindspore": "npu_migrate_distributed_ms"}[source.split("/")[0]]
    assert text.count(f"from {module} import (  # npu-migrate: distributed\n") == 1
    assert text.index("# npu-migrate: distributed\n") < text.index(modelarts)
    assert ">>> npu-migrate: distributed" not in text and module + ".py" in {Path(p).name for p in result.extra_files}
    assert ("--data_url" in text or "    modelarts_setup()\n" in text) and "NPU160" in {e.code for e in result.edits} | {"NPU160"}
    again = _migrate(text, str(path), both)
    assert not again.changed, again.edits
    assert again.extra_files == result.extra_files


# ----------------------------------------------------------------------------- generated files


def test_rank_table_is_json_of_the_documented_shape():
    from npu_migrate.distributed import render_rank_table

    table = json.loads(render_rank_table())
    assert table["version"] == "1.0" and table["status"] == "completed" and table["server_count"] == "1"
    (server,) = table["server_list"]
    assert server["server_id"].startswith("<")
    assert [d["device_id"] for d in server["device"]] == [str(i) for i in range(8)]
    assert [d["rank_id"] for d in server["device"]] == [str(i) for i in range(8)]
    assert all(d["device_ip"].startswith("<") and set(d) == {"device_id", "device_ip", "rank_id"}
               for d in server["device"])
    assert all(isinstance(v, str) for v in (table["version"], table["server_count"]))
    assert "hccn_tool" in table["_comment"] and "@generated" in table["_comment"]


@pytest.mark.slow
def test_run_8p_starts_one_process_per_npu_and_refuses_placeholders(tmp_path):
    from npu_migrate.distributed import render_rank_table, render_run_8p

    (tmp_path / "run_8p.sh").write_text(render_run_8p("train.py"), encoding="utf-8")
    (tmp_path / "train.py").write_text(
        "import os\nprint(os.environ['DEVICE_ID'], os.environ['RANK_ID'], os.environ['RANK_SIZE'],"
        " os.path.basename(os.environ['RANK_TABLE_FILE']))\n", encoding="utf-8")
    table = tmp_path / "hccl_8p.json"
    table.write_text(render_rank_table(), encoding="utf-8")
    refused = subprocess.run(["bash", "run_8p.sh"], cwd=tmp_path, capture_output=True, text=True)
    assert refused.returncode == 1 and "placeholders" in refused.stderr
    table.write_text(render_rank_table().replace("<", "").replace(">", ""), encoding="utf-8")
    env = dict(os.environ, RANK_SIZE="3", PATH=os.environ["PATH"])
    env.pop("RANK_TABLE_FILE", None)
    ran = subprocess.run(["bash", "run_8p.sh", "--lr", "1"], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert ran.returncode == 0, ran.stderr
    logs = sorted((tmp_path / f"train_{i}.log").read_text().split() for i in range(3))
    assert logs == [[str(i), str(i), "3", "hccl_8p.json"] for i in range(3)]


def test_generated_files_are_updated_in_place_but_never_over_hand_edits(tmp_path, run_cli):
    script = tmp_path / "mnist_train.py"
    script.write_text((FIXTURES / "pytorch" / "mnist_train.py").read_text(encoding="utf-8"), encoding="utf-8")
    launcher = tmp_path / "run_distributed_mnist_train.sh"
    r = run_cli("mnist_train.py", "--distributed", "--write", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert os.access(launcher, os.X_OK)
    generated = launcher.read_text(encoding="utf-8")
    # an older version of the file (its checksum matches): updated in place
    launcher.write_text(generated.replace("#   LAUNCHER", "#   (old) LAUNCHER").replace(
        generated.split("\n")[1], "# @generated by `npu-migrate --distributed` from mnist_train.py "
        "(checksum 000000000000): a later run updates this file unless you edit it."), encoding="utf-8")
    from npu_migrate.extra_files import stamp

    launcher.write_text(stamp(launcher.read_text(encoding="utf-8")), encoding="utf-8")
    r = run_cli("mnist_train.py", "--distributed", "--write", cwd=tmp_path)
    assert launcher.read_text(encoding="utf-8") == generated and "updated" in r.stderr.decode()
    # edited by hand: kept, with a warning
    edited = generated.replace('"$@"', '--epochs 90 "$@"')
    launcher.write_text(edited, encoding="utf-8")
    r = run_cli("mnist_train.py", "--distributed", "--check", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert launcher.read_text(encoding="utf-8") == edited
    assert "it was edited after npu-migrate generated it" in r.stderr.decode()


def test_two_scripts_wanting_different_run_8p_files_get_none(tmp_path, run_cli):
    for name in ("mlp_session.py", "resnet_estimator.py"):
        (tmp_path / name).write_text((FIXTURES / "tensorflow" / name).read_text(encoding="utf-8"), encoding="utf-8")
    r = run_cli(".", "--distributed", "--write", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / "run_8p.sh").exists() and (tmp_path / "hccl_8p.json").exists()
    assert "run_8p.sh: not written" in r.stderr.decode()


@pytest.mark.parametrize("source", ["pytorch/mnist_train.py", "mindspore/lenet_train.py", "tensorflow/mlp_session.py"])
def test_distributed_after_an_earlier_modelarts_run(source):
    path = FIXTURES / source
    first = _migrate(path.read_text(encoding="utf-8"), str(path), Options(modelarts=True)).new_text
    both = Options(distributed=True, modelarts=True)
    text = _migrate(first, str(path), both).new_text
    assert text == _migrate(path.read_text(encoding="utf-8"), str(path), both).new_text


def test_every_model_an_optimizer_trains_is_wrapped():
    text = """import torch
import torch.optim as optim

netD = Discriminator().to(device)
netG = Generator().to(device)
if opt.netG != '':
    netG.load_state_dict(torch.load(opt.netG))
optimizerD = optim.Adam(netD.parameters(), lr=opt.lr)
optimizerG = optim.Adam(netG.parameters(), lr=opt.lr)
dataloader = torch.utils.data.DataLoader(dataset, batch_size=opt.batchSize, shuffle=True)
for epoch in range(opt.niter):
    for i, data in enumerate(dataloader, 0):
        for step in range(opt.steps_per_epoch):
            pass
    torch.save(netG.state_dict(), '%s/netG_epoch_%d.pth' % (opt.outf, epoch))
"""
    out = _migrate(text).new_text
    assert "netD = Discriminator().to(device)\nnetD = distributed_model(netD)\n" in out
    # netG: after the checkpoint it may load (DDP copies rank 0's parameters once, when it wraps)
    assert "    unwrap_model(netG).load_state_dict(torch.load(opt.netG))\nnetG = distributed_model(netG)\n" in out
    assert out.count("set_sampler_epoch(") == 1  # one call, in the epoch loop
    assert "for epoch in range(opt.niter):\n    set_sampler_epoch(dataloader, epoch)\n" in out
    assert "    if is_main_process():\n        torch.save(unwrap_model(netG).state_dict()" in out


def test_a_model_method_called_after_the_wrap_in_the_main_block_goes_through_unwrap_model():
    # A script that trains in its main block (CleanRL's): the wrap goes in there, after the move, and every
    # `agent.method(...)` below it there is the wrapper's, which lacks the method (left as they were, the
    # ranks of cleanrl's ddpg/td3 would die of an AttributeError on `actor.action_scale`); one above the wrap
    # is the model's.
    text = """import torch
import torch.optim as optim

if __name__ == "__main__":
    agent = Agent(envs)
    agent.reset_noise()
    agent = agent.to(device)
    optimizer = optim.Adam(agent.parameters(), lr=2.5e-4)
    for update in range(1, num_updates + 1):
        with torch.no_grad():
            next_value = agent.get_value(next_obs)
        loss = agent(next_obs).mean()
        loss.backward()
"""
    dist = _migrate(text)
    out = dist.new_text
    assert "    agent = agent.to(device)\n    agent = distributed_model(agent)\n" in out
    assert "    agent.reset_noise()\n" in out
    assert "            next_value = unwrap_model(agent).get_value(next_obs)\n" in out
    assert "        loss = agent(next_obs).mean()\n" in out
    assert [f.code for f in dist.findings if f.code == "NPU387"] == ["NPU387"]


def test_a_model_used_only_through_its_methods_is_not_wrapped_but_reported():
    # cleanrl 1.2.0's ppo.py: `agent` is never called, its loss comes from `agent.get_action_and_value(...)`.
    # Wrapped, no forward pass would go through DistributedDataParallel and no gradient would be averaged
    # (rehearsed with two processes, both ranks trained alone): the script is left as it is, and reported.
    text = """import torch
import torch.optim as optim

if __name__ == "__main__":
    agent = Agent(envs).to(device)
    optimizer = optim.Adam(agent.parameters(), lr=2.5e-4)
    for update in range(1, num_updates + 1):
        _, newlogprob, entropy, newvalue = agent.get_action_and_value(b_obs)
        loss = newlogprob.mean() - entropy.mean()
        loss.backward()
"""
    dist = _migrate(text)
    assert dist.new_text == text or dist.new_text is None
    assert [(f.code, f.message.split(" (`")[0]) for f in dist.findings if f.code.startswith("NPU38")] == [
        ("NPU385", "not made distributed: `agent` is never called, only its methods are: DistributedDataParallel "
                   "averages the gradients of its own forward passes only, so wrapping it would average none")]


def test_a_training_script_without_an_optimizer_is_reported():
    text = ("import torch\nmodel = Net().cuda()\nfor x, y in data:\n    loss = model(x).sum()\n    loss.backward()\n"
            "    for p in model.parameters():\n        p.data.add_(p.grad, alpha=-lr)\n")
    dist = _migrate(text)
    assert "NPU385" in {f.code for f in dist.findings} and "distributed_setup" not in (dist.new_text or "")


SILENT = ("npu-migrate: warning: --distributed made nothing distributed in the 1 file scanned: no training "
          "script it can convert was found (a torch.optim optimizer, a MindSpore Model or TrainOneStepCell, "
          "or a tf.train optimizer, built where the script runs); a training loop in a module not given, or an "
          "optimizer built by a library, is converted by hand\n")


def test_distributed_that_changes_nothing_says_so(run_cli, tmp_path):
    # The entry script of a project whose optimizer is built in a module not given (bert-pytorch's shape).
    entry = "import torch\nfrom trainer import Trainer\n\nif __name__ == '__main__':\n    Trainer(torch.nn.Linear(2, 1).cuda()).train()\n"
    (tmp_path / "main.py").write_text(entry)
    run = run_cli("main.py", "--distributed", "--write", cwd=tmp_path)
    assert run.returncode == 0
    assert run.stderr.decode() == SILENT
    assert "torch_npu" in (tmp_path / "main.py").read_text()  # the device rewrite still happened
    assert run_cli("main.py", "--distributed", "-q", cwd=tmp_path).stderr.decode() == SILENT


def test_distributed_on_a_notebook_says_notebooks_are_not_converted(run_cli, tmp_path):
    # A notebook that builds an optimizer was told "no training script it can convert was found
    # (a torch.optim optimizer, ...)", which it has.
    cell = {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
            "source": ["import torch\n", "model = torch.nn.Linear(2, 1).cuda()\n",
                       "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"]}
    (tmp_path / "train.ipynb").write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    run = run_cli("train.ipynb", "--distributed", cwd=tmp_path)
    assert run.returncode == 0
    assert run.stderr.decode() == SILENT[:-1] + ("; notebooks (1 scanned) are not converted: export one to a script "
                                                 "(`jupyter nbconvert --to script`) and run --distributed on that\n")


def test_a_second_distributed_run_on_a_converted_script_is_not_called_silent(run_cli, tmp_path):
    # The second run changes and reports nothing (the script imports the helpers), which is
    # what an idempotent tool does: it must not warn that --distributed found no training script.
    (tmp_path / "train.py").write_text(
        "import torch\nmodel = torch.nn.Linear(2, 1).cuda()\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n")
    assert run_cli("train.py", "--distributed", "--write", cwd=tmp_path).returncode == 0
    converted = (tmp_path / "train.py").read_bytes()
    assert b"from npu_migrate_distributed import" in converted
    again = run_cli("train.py", "--distributed", "--write", cwd=tmp_path)
    assert again.returncode == 0
    assert again.stderr.decode() == ""  # was SILENT
    assert (tmp_path / "train.py").read_bytes() == converted


def test_a_second_run_over_the_folder_says_nothing_of_the_generated_helpers(run_cli, tmp_path):
    """Run over the folder, a second --distributed run reported NPU380 ("already distributed") on
    the npu_migrate_distributed.py it had generated, every time: the helper modules are the tool's
    own, not scripts to convert. A module of that name the user wrote is still looked at."""
    (tmp_path / "train.py").write_text(
        "import torch\nmodel = torch.nn.Linear(2, 1).cuda()\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n")
    assert run_cli(".", "--distributed", "--write", cwd=tmp_path).returncode == 0
    assert (tmp_path / "npu_migrate_distributed.py").exists()
    again = run_cli(".", "--distributed", "--check", cwd=tmp_path)
    assert again.returncode == 0
    assert b"NPU380" not in again.stdout + again.stderr, again.stdout
    (tmp_path / "npu_migrate_distributed.py").write_text(
        "import torch\nimport torch.distributed as dist\ndist.init_process_group('nccl')\n"
        "model = torch.nn.Linear(2, 1)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "if __name__ == '__main__':\n    pass\n")
    mine = run_cli("npu_migrate_distributed.py", "--distributed", cwd=tmp_path)
    assert b"NPU380" in mine.stdout, mine.stdout


@pytest.mark.parametrize("text", [
    "import torch\nmodel = torch.nn.Linear(2, 1).cuda()\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n",  # converted
    "import torch\nmodel = torch.nn.Linear(2, 1)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n",  # NPU385
])
def test_distributed_that_converts_or_reports_is_not_called_silent(run_cli, tmp_path, text):
    (tmp_path / "train.py").write_text(text)
    run = run_cli("train.py", "--distributed", cwd=tmp_path)
    assert "made nothing distributed" not in run.stderr.decode()
    assert run.returncode == 0


def test_a_script_with_the_helper_block_of_an_earlier_version_gets_the_module_instead():
    """Version 1 pasted the helpers into the script as a marked block: a later run replaces the
    block by the import of npu_migrate_distributed.py, as if the script were converted afresh."""
    source = FIXTURES / "pytorch" / "mnist_train.py"
    earlier = (FIXTURES / "pytorch" / "earlier" / "mnist_train.block_v1.py").read_text(encoding="utf-8")
    assert "def distributed_setup():" in earlier and "builtins.print = print_on_rank0" in earlier
    result = _migrate(earlier, str(source))
    assert result.new_text == source.with_name("mnist_train.expected.py").read_text(encoding="utf-8")
    assert [e.code for e in result.edits] == ["NPU160"]
    assert sorted(Path(p).name for p in result.extra_files) == ["npu_migrate_distributed.py",
                                                               "run_distributed_mnist_train.sh"]


def test_the_helpers_module_is_small_modern_and_patches_nothing():
    """One module for every converted script of a folder: no `builtins.print` replaced (Python's
    print has no `force=`), nothing assigned to another module's attributes."""
    import ast

    from npu_migrate.distributed import HELPERS, render_helpers

    text = render_helpers()
    tree = ast.parse(text)
    defined = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
    assert sorted(defined) == sorted(HELPERS)
    assert "builtins" not in text and "force=" not in text
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.Assign)
                and any(isinstance(t, ast.Attribute) for t in n.targets)]
    assert len(text.splitlines()) < 100
    ast.parse(text, feature_version=(3, 7))  # ModelArts images run Python 3.7


def test_two_entry_scripts_in_one_folder_share_one_module(tmp_path, run_cli):
    text = (FIXTURES / "pytorch" / "mnist_train.py").read_text(encoding="utf-8")
    for name in ("train_a.py", "train_b.py"):
        (tmp_path / name).write_text(text, encoding="utf-8")
    r = run_cli(".", "--distributed", "--write", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == [
        "npu_migrate_distributed.py", "run_distributed_train_a.sh", "run_distributed_train_b.sh", "train_a.py",
        "train_b.py"]
    for name in ("train_a.py", "train_b.py"):
        assert "def " + "distributed_setup" not in (tmp_path / name).read_text(encoding="utf-8")


@pytest.mark.parametrize("imports, used, already", [
    ("import torch.distributed as dist\n", "", False),
    ("import torch.distributed\n", "", False),
    ("from torch.utils.data.distributed import DistributedSampler\n", "", False),
    ("import torch.distributed as dist\n", "print(dist.is_available())\n", True),
    ("import torch.distributed\n", "print(torch.distributed.is_available())\n", True),
    ("from torch.nn.parallel import DistributedDataParallel as DDP\n", "model = DDP(model)\n", True),
])
def test_an_unused_distributed_import_is_not_a_use(imports, used, already):
    text = ("import torch\n" + imports + "model = torch.nn.Linear(2, 1).cuda()\n" + used
            + "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n")
    result = _migrate(text)
    codes = {f.code for f in result.findings}
    assert ("NPU380" in codes) is already
    assert ("model = distributed_model(model)\n" in result.new_text) is not already


def test_a_one_device_pin_kept_in_a_distributed_script_is_reported_where_it_is():
    text = ("import os\nimport torch\nos.environ[\"CUDA_VISIBLE_DEVICES\"] = \"0\"\n"
            "model = torch.nn.Linear(2, 1).cuda()\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n")
    result = _migrate(text)
    (pin,) = [f for f in result.findings if f.code == "NPU386"]
    assert (pin.span.line, pin.span.col) == (3, 1)
    assert pin.message == ("a fixed device (`os.environ[\"CUDA_VISIBLE_DEVICES\"] = \"0\"`): every process would "
                           "use the same NPU")
    # the torch pass still migrates the variable (NPU1xx), the distributed pass leaves the value to the user
    assert 'os.environ["ASCEND_RT_VISIBLE_DEVICES"] = "0"\n' in result.new_text


# ----------------------------------------------------------------------------- rehearse's distributed checks


def _checked(tmp_path, records, written=(), uploaded=()):
    """rehearse's distributed checks on records as the stand-in writes them (no process runs)."""
    from npu_migrate.rehearse import RehearsalOptions, RehearsalResult, _distributed_checks

    code = tmp_path / "code" / "project"
    code.mkdir(parents=True, exist_ok=True)
    result = RehearsalResult(options=RehearsalOptions(script="train.py", nproc=len(records)), job_dir=tmp_path,
                             command=[], ranks=[], copies_in=[], uploaded=list(uploaded), not_uploaded=[], seconds=0,
                             timed_out=False, calls=0)
    for record in records:
        record["writes"] = [str(code / name) for name in record.get("writes", [])]
        for path in record["writes"]:
            Path(path).write_text("output")  # an output file is one the job left (a temporary file is gone)
    problems = _distributed_checks(result, code, {r["rank"]: r for r in records}, list(written))
    return result.checks, problems


def _record(rank, params=("a",), samples=(), writes=(), distributed=True):
    return {"rank": rank, "pid": 100 + rank, "distributed": distributed, "params": list(params),
            "samples": [list(s) for s in samples], "writes": list(writes)}


def test_the_checks_of_a_job_whose_ranks_agree(tmp_path):
    # 5 samples on 2 ranks: the sampler pads to 6, so one index is read twice; that is not overlap.
    records = [_record(0, samples=[[5, [0, 2, 4]]], writes=["model.pt", "log.txt"]),
               _record(1, samples=[[5, [1, 3, 0]]])]
    checks, problems = _checked(tmp_path, records)
    assert problems == []
    assert checks == ["the 2 ranks hold the same parameters at exit (1 model in DistributedDataParallel)",
                      "the ranks' DistributedSamplers drew disjoint parts of the data",
                      "each of the 2 output files had one writer"]


def test_the_checks_say_what_is_wrong(tmp_path):
    records = [_record(0, params=["1" * 64], samples=[[4, [0, 1]]], writes=["losses.txt"]),
               _record(1, params=["2" * 64], samples=[[4, [0, 1]]], writes=["losses.txt"])]
    _, problems = _checked(tmp_path, records)
    assert problems == [
        "the ranks hold different parameters at exit (rank 0: 111111111111, rank 1: 222222222222): they trained "
        "different models",
        "the ranks read the same samples (sampler 1, epoch 1)",
        "files written by more than one rank: `losses.txt` (ranks 0, 1)"]


def test_the_parts_rank_shard_kept_are_checked_like_a_samplers(tmp_path):
    halves = [_record(0), _record(1)]
    halves[0]["shards"], halves[1]["shards"] = [[20, 0, 10]], [[20, 10, 20]]
    checks, problems = _checked(tmp_path, halves)
    assert problems == [] and "the ranks kept disjoint parts of the data rank_shard cut" in checks
    same = [_record(0), _record(1)]
    same[0]["shards"], same[1]["shards"] = [[20, 0, 10]], [[20, 0, 10]]
    _, problems = _checked(tmp_path, same)
    assert problems == ["the ranks kept overlapping parts of the data rank_shard cut (cut 1: rank 0 [0, 10), "
                        "rank 1 [0, 10))"]
    # cuts that do not pair up (different lengths): no claim either way
    unpaired = [_record(0), _record(1)]
    unpaired[0]["shards"], unpaired[1]["shards"] = [[20, 0, 10]], [[8, 0, 4]]
    checks, problems = _checked(tmp_path, unpaired)
    assert problems == [] and not any("rank_shard" in c for c in checks)


def test_no_claim_where_the_checks_do_not_apply(tmp_path):
    # N copies of a one-process script (no process group): nothing checked, nothing failed
    plain = [_record(r, params=[], writes=["metrics.json"], distributed=False) for r in range(2)]
    assert _checked(tmp_path, plain) == ([], [])
    # ... of a PyTorch script (whose record would show joining a group): said, not failed
    for record in plain:
        record["torch"] = True
    assert _checked(tmp_path, plain) == (["none of the 2 processes joined a process group: each ran the whole job "
                                          "alone, on all of its data"], [])
    # a sampler only rank 0 made (its evaluation): the samplers do not pair up, no claim either way
    records = [_record(0, samples=[[8, [0, 2, 4, 6]], [3, [0, 1, 2]]]), _record(1, samples=[[8, [1, 3, 5, 7]]])]
    checks, problems = _checked(tmp_path, records)
    assert problems == [] and not any("Sampler" in c for c in checks)


def test_files_the_ranks_share_on_purpose_are_not_outputs_with_two_writers(tmp_path):
    """A lock file every process takes in turn, a file gone by the end (a rendezvous file, a
    temporary file) and one outside the job folder (never uploaded) are no output: two writers
    there are no fault (a false failure is the worst result)."""
    from npu_migrate.rehearse import RehearsalOptions, RehearsalResult, _distributed_checks

    code = tmp_path / "code" / "project"
    code.mkdir(parents=True)
    for name in ("data.lock", "model.pt"):
        (code / name).write_text("x")
    elsewhere = tmp_path / "tmp" / "torchinductor" / "kernel.so"  # a compiler's cache: never uploaded
    elsewhere.parent.mkdir(parents=True)
    elsewhere.write_text("x")
    shared = [str(code / "data.lock"), str(code / "store"), str(elsewhere)]  # `store` is gone by the end
    records = {0: _record(0, writes=shared + [str(code / "model.pt")]), 1: _record(1, writes=shared)}
    result = RehearsalResult(options=RehearsalOptions(script="train.py", nproc=2), job_dir=tmp_path, command=[],
                             ranks=[], copies_in=[], uploaded=[], not_uploaded=[], seconds=0, timed_out=False, calls=0)
    assert _distributed_checks(result, code, records, []) == []
    assert "the output file had one writer" in result.checks


def test_an_upload_smaller_than_the_jobs_final_file_or_a_broken_archive_is_truncated(tmp_path):
    import zipfile

    out = tmp_path / "obs" / "rehearsal" / "out"
    out.mkdir(parents=True)
    with zipfile.ZipFile(out / "best.pt", "w") as z:
        z.writestr("archive/data.pkl", b"x" * 1000)
    whole = (out / "best.pt").read_bytes()
    (out / "broken.pt").write_bytes(whole[:len(whole) // 2])
    (out / "model.pt").write_bytes(b"")
    (out / "log.txt").write_bytes(b"abc")
    records = [_record(0, writes=["model.pt"]), _record(1)]
    uploaded = [("best.pt", len(whole)), ("broken.pt", len(whole) // 2), ("model.pt", 0), ("log.txt", 3)]
    written = [("model.pt", 15000), ("log.txt", 3), ("a/log.txt", 9)]  # two log.txt: not compared
    _, problems = _checked(tmp_path, records, written=written, uploaded=uploaded)
    assert problems == ["uploaded truncated: `broken.pt` (not a whole archive), `model.pt` (0 of 15,000 bytes)"]


def test_a_file_a_preemption_cut_short_uploaded_as_incomplete_is_named_so_not_truncated(tmp_path):
    """The generated runtime uploads a file a process was writing when the job ended as
    NAME.incomplete, by design (train_url keeps nothing under a name but whole files): the
    rehearsal failed such a job as "uploaded truncated", a false failure."""
    import zipfile

    out = tmp_path / "obs" / "rehearsal" / "out"
    out.mkdir(parents=True)
    with zipfile.ZipFile(out / "best.pt", "w") as z:
        z.writestr("archive/data.pkl", b"x" * 1000)
    whole = (out / "best.pt").read_bytes()
    (out / "best.pt.incomplete").write_bytes(whole[:len(whole) // 2])
    records = [_record(0, writes=["best.pt"]), _record(1)]
    uploaded = [("best.pt", len(whole)), ("best.pt.incomplete", len(whole) // 2)]
    checks, problems = _checked(tmp_path, records, written=[("best.pt", len(whole))], uploaded=uploaded)
    assert problems == []
    assert checks[-1] == ("no file uploaded under its own name is truncated (best.pt.incomplete was cut short and "
                          "is named so)")
    # ... while a truncated archive under its own name still fails the job
    (out / "best.pt").write_bytes(whole[:len(whole) // 2])
    _, problems = _checked(tmp_path, records, uploaded=[("best.pt", len(whole) // 2)])
    assert problems == ["uploaded truncated: `best.pt` (not a whole archive)"]


def test_ranks_stopped_by_a_preemption_are_not_held_to_equal_parameters(tmp_path):
    """SIGTERM stops each rank wherever it is (one past its optimizer step, one before): different
    parameters then are no fault of the conversion, and a false failure is the worst result."""
    from npu_migrate.rehearse import RankResult, RehearsalOptions, RehearsalResult, _distributed_checks

    records = [_record(0, params=["1" * 64]), _record(1, params=["2" * 64])]
    result = RehearsalResult(options=RehearsalOptions(script="train.py", nproc=2), job_dir=tmp_path, command=[],
                             ranks=[RankResult(rank=r, pid=r, sigterm=True) for r in range(2)], copies_in=[],
                             uploaded=[], not_uploaded=[], seconds=0, timed_out=False, calls=0)
    assert _distributed_checks(result, tmp_path, {r["rank"]: r for r in records}, []) == [] and result.checks == []


PPE_MNIST = '''import torch
import pytorch_pfn_extras as ppe
import pytorch_pfn_extras.training.extensions as extensions

model = torch.nn.Linear(4, 2).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = torch.utils.data.DataLoader(list(range(8)), batch_size=2)
my_extensions = [
    extensions.LogReport(),
    ppe.training.extensions.snapshot(saver_rank=0),
    extensions.PrintReport(["epoch"]),
]
manager = ppe.training.ExtensionsManager(model, optimizer, 2, extensions=my_extensions, iters_per_epoch=4)
'''


def test_a_library_writer_made_on_every_rank_is_reported():
    """ppe's LogReport writes result/log from inside the library, on every rank after
    --distributed (a 2-process rehearsal of ppe's MNIST example: "files written by more than one
    rank: result/log"); the rewrite only puts the script's own writes on rank 0. Reported
    (NPU395); a snapshot given saver_rank and PrintReport (it writes nothing) are not."""
    r = migrate_source(PPE_MNIST, "train.py", DIST)
    assert [(f.code, f.span.line, f.span.col, f.api) for f in r.findings if f.code == "NPU395"] == [
        ("NPU395", 9, 5, "LogReport")]


# CleanRL 1.2.0 cleanrl/ddpg_continuous_action.py:10-15, 120, 131, 144-148, 155, 162, 168-169, 201
# (the model called itself, so --distributed converts it): its SummaryWriter is made on every rank.
CLEANRL_DDPG_WRITER = '''import torch
import torch.nn as nn
import torch.optim as optim
from torch.utils.tensorboard import SummaryWriter

if __name__ == "__main__":
    run_name = "Hopper-v4__ddpg__1"
    writer = SummaryWriter(f"runs/{run_name}")
    writer.add_text(
        "hyperparameters",
        "|param|value|",
    )
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    actor = nn.Linear(3, 1).to(device)
    actor_optimizer = optim.Adam(list(actor.parameters()), lr=3e-4)
    for global_step in range(10):
        actor_loss = actor(torch.zeros(2, 3, device=device)).mean()
        actor_optimizer.zero_grad()
        actor_loss.backward()
        actor_optimizer.step()
        writer.add_scalar("losses/actor_loss", actor_loss.item(), global_step)
'''


def test_a_summary_writer_made_on_every_rank_is_reported():
    """TensorBoard's SummaryWriter writes an events file of its own on every process: after
    --distributed each rank wrote the same scalars into the run's folder (N runs in TensorBoard).
    Reported as a library writer (NPU395); the writer and its calls are left as they are."""
    r = migrate_source(CLEANRL_DDPG_WRITER, "ddpg_continuous_action.py", DIST)
    assert [(f.code, f.span.line, f.span.col, f.api) for f in r.findings if f.code == "NPU395"] == [
        ("NPU395", 8, 14, "SummaryWriter")]
    assert 'writer = SummaryWriter(f"runs/{run_name}")\n' in r.new_text
    assert "actor = distributed_model(actor)" in r.new_text

OPACUS_CHAR_LSTM = '''import torch
from opacus import PrivacyEngine


def main(args):
    model = CharNNClassifier().to(args.device)
    train_loader = torch.utils.data.DataLoader(train_ds, batch_size=args.batch_size, collate_fn=padded_collate)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.learning_rate)
    if not args.disable_dp:
        privacy_engine = PrivacyEngine(secure_mode=args.secure_rng)
        model, optimizer, train_loader = privacy_engine.make_private(
            module=model,
            optimizer=optimizer,
            data_loader=train_loader,
            noise_multiplier=args.sigma,
            max_grad_norm=args.max_per_sample_grad_norm,
        )
    for epoch in range(args.epochs):
        train(model, optimizer, train_loader)


if __name__ == "__main__":
    main(parser.parse_args())
'''


def test_opacus_poisson_sampling_on_several_ranks_is_reported():
    """Opacus' make_private samples each rank's batches once the model is in DistributedDataParallel
    and skips an empty draw (the char-lstm rehearsal's hang, tests/test_rehearse_corpus.py): reported
    at the call with --distributed (NPU396), and neither on one process nor with poisson_sampling=False."""
    r = migrate_source(OPACUS_CHAR_LSTM, "train.py", DIST)
    assert "    model = distributed_model(model)\n" in r.new_text
    assert [(f.code, f.span.line, f.span.col, f.api) for f in r.findings if f.code == "NPU396"] == [
        ("NPU396", 11, 42, "privacy_engine.make_private")]
    assert not [f for f in migrate_source(OPACUS_CHAR_LSTM, "train.py", Options()).findings if f.code == "NPU396"]
    kept = OPACUS_CHAR_LSTM.replace("max_grad_norm=args.max_per_sample_grad_norm,\n",
                                    "max_grad_norm=args.max_per_sample_grad_norm,\n            poisson_sampling=False,\n")
    assert kept != OPACUS_CHAR_LSTM
    assert not [f for f in migrate_source(kept, "train.py", DIST).findings if f.code == "NPU396"]
