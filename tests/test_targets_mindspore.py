"""The MindSpore target (targets/mindspore.py): read from the project's mindspore pin or
--mindspore-version; --distributed writes the set-up that release has (mindspore.set_device
from 2.7 on, which deprecates set_context(device_id=...); context.set_context before), checked
name by name against rules/targets/mindspore.toml (made from the wheels by
scripts/mindspore_table.py) and run on MindSpore for the CPU."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from npu_migrate.dispatch import migrate_source
from npu_migrate.options import Options
from npu_migrate.rules import default_rules
from npu_migrate.targets import TargetError, resolve
from npu_migrate.targets.mindspore import MsTarget, load_ms_table, releases_for

ROOT = Path(__file__).resolve().parent.parent
RULES = default_rules()
TABLE = load_ms_table()
TARGETS = list(TABLE.releases) + ["1.8", "2.2.14", "2.7", ""]

SCRIPT = '''import numpy as np
import mindspore.dataset as ds
import mindspore.nn as nn
from mindspore import Model, context


def main():
    context.set_context(mode=context.PYNATIVE_MODE, device_target="Ascend")
    x = np.arange(64, dtype=np.float32).reshape(16, 4) / 64
    data = ds.NumpySlicesDataset({"x": x, "y": x.sum(axis=1, keepdims=True)}, shuffle=False).batch(4)
    net = nn.Dense(4, 1)
    model = Model(net, nn.MSELoss(), nn.SGD(net.trainable_params(), 0.01))
    model.train(1, data)
    print("trained")


if __name__ == "__main__":
    main()
'''


def test_what_each_target_has():
    assert releases_for("2.7", TABLE) == ("2.7.0", "2.7.1", "2.7.2")
    assert releases_for("2.2.14", TABLE) == ("2.0.0", "2.7.0")  # not on the index: its neighbours decide
    assert releases_for("", TABLE) == ("2.10.0",)
    assert not MsTarget("1.5.2").has("mindspore.set_context") and MsTarget("1.8").has("mindspore.set_context")
    assert not MsTarget("2.2.14").has("mindspore.set_device") and MsTarget("2.7").has("mindspore.set_device")
    assert MsTarget("2.9.0").deprecated("mindspore.context.set_context:device_id deprecated") == "api mindspore.set_device()"
    assert MsTarget("2.0.0").deprecated("mindspore.context.set_context:device_id deprecated") is None
    assert [MsTarget(v).block_form() for v in ("1.0.0", "1.10", "2.2.14", "2.7.0", "")] == [
        "context", "context", "context", "set_device", "set_device"]
    with pytest.raises(TargetError, match="not a version"):
        MsTarget("two").releases()


@pytest.mark.slow
def test_table_is_regenerated_from_the_cached_wheels():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import mindspore_table
    finally:
        sys.path.pop(0)
    missing = [f"{p}=={v}" for p, v, _ in mindspore_table.RELEASES
               if mindspore_table.cached_wheel(p, v, mindspore_table.cache_dir()) is None]
    if missing:
        pytest.skip(f"wheels not cached (python scripts/mindspore_table.py downloads them): {', '.join(missing)}")
    assert mindspore_table.main(["--check", "--offline"]) == 0


# ----------------------------------------------------------------------------- done when


def _qualified(tree: ast.Module):
    """(qualified name, keywords) of each call of a mindspore name in `tree`."""
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("mindspore"):
                    aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("mindspore"):
            for a in node.names:
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            parts = []
            func = node.func
            while isinstance(func, ast.Attribute):
                parts.append(func.attr)
                func = func.value
            if isinstance(func, ast.Name) and func.id in aliases:
                yield ".".join([aliases[func.id]] + parts[::-1]), [k.arg for k in node.keywords if k.arg]


def _block(extra_files) -> str:
    """The generated helper module (the set-up --distributed writes)."""
    return next(text for path, text in extra_files.items() if path.endswith("npu_migrate_distributed_ms.py"))


@pytest.mark.parametrize("target", TARGETS)
def test_every_name_the_distributed_setup_writes_exists_in_the_target(target):
    """Done when: for every MindSpore release on the index (and releases between them), the
    set-up --distributed writes calls only names that release has, with no keyword it reports
    as deprecated."""
    ms = MsTarget(target)
    sources = [SCRIPT, (ROOT / "fixtures/distributed/mindspore/lenet_train.py").read_text(encoding="utf-8")]
    for source in sources:
        result = migrate_source(source, "train.py", Options.of(distributed=True, mindspore_version=target), RULES)
        block = _block(result.extra_files)
        calls = list(_qualified(ast.parse(block)))
        assert calls, block
        for name, keywords in calls:
            assert name in TABLE.names, f"`{name}` is not in rules/targets/mindspore.toml"
            assert ms.has(name), f"MindSpore {target or 'newest'} lacks `{name}`:\n{block}"
            if name.endswith("set_context"):
                for kw in keywords:
                    assert ms.deprecated(f"mindspore.context.set_context:{kw} deprecated") is None, (target, kw)
        form = "mindspore.set_device(" if ms.block_form() == "set_device" else "context.set_context(device_id="
        assert form in block
        # what the script itself calls is its own: only the block is the tool's


def test_a_script_that_calls_set_device_itself_is_reported_not_half_converted():
    source = SCRIPT.replace('context.set_context(mode=context.PYNATIVE_MODE, device_target="Ascend")',
                            'mindspore.set_device("Ascend")').replace("import numpy as np\n",
                                                                        "import numpy as np\nimport mindspore\n")
    result = migrate_source(source, "train.py", Options.of(distributed=True, mindspore_version="2.7"), RULES)
    assert not result.changed and result.extra_files == {}
    assert [(f.code, f.api) for f in result.findings if f.code == "NPU390"] == [("NPU390", "mindspore.set_device")]


# ----------------------------------------------------------------------------- where the target comes from


@pytest.mark.parametrize("file,text,expected", [
    ("requirements.txt", "numpy\nmindspore==2.2.14\n", ("2.2.14", "mindspore==2.2.14 in requirements.txt")),
    ("requirements.txt", "mindspore-ascend==1.8.1\n", ("1.8.1", "mindspore-ascend==1.8.1 in requirements.txt")),
    ("pyproject.toml", '[project]\nname = "x"\ndependencies = ["mindspore>=2.7,<2.9"]\n',
     ("2.7.0", "mindspore>=2.7,<2.9 in pyproject.toml")),
    ("setup.py", "from setuptools import setup\nsetup(name='x', install_requires=['mindspore==2.0.0'])\n",
     ("2.0.0", "mindspore==2.0.0 in setup.py")),
    ("environment.yml", "dependencies:\n  - python=3.9\n  - pip:\n    - mindspore==1.10.1\n",
     ("1.10.1", "mindspore==1.10.1 in environment.yml")),
    ("requirements.txt", "mindspore>=2.0\n", ("", "the newest release (2.10.0): no mindspore pin found")),
])
def test_the_target_comes_from_the_project_pin(tmp_path, file, text, expected):
    (tmp_path / file).write_text(text)
    target = resolve("mindspore", "", "", [str(tmp_path / "train.py")])
    assert (target.spec, target.reason) == expected


def test_a_pinned_project_is_migrated_for_its_release_without_any_option(tmp_path):
    from helpers import cli_in_process

    (tmp_path / "requirements.txt").write_text("mindspore==2.2.14\n")
    (tmp_path / "train.py").write_text(SCRIPT)
    r = cli_in_process("train.py", "--distributed", "--write", "--no-cache", cwd=tmp_path)
    r.stdout, r.stderr = r.stdout.decode(), r.stderr.decode()
    assert r.returncode == 0, r.stderr
    assert "Target: MindSpore 2.2.14 (mindspore==2.2.14 in requirements.txt)." in r.stdout + r.stderr
    block = (tmp_path / "npu_migrate_distributed_ms.py").read_text()
    assert "context.set_context(device_id=device_id())" in block and "set_device" not in block
    r = cli_in_process("train.py", "--mindspore-version", "x.y", cwd=tmp_path)
    r.stdout, r.stderr = r.stdout.decode(), r.stderr.decode()
    assert r.returncode == 2 and "MindSpore 'x.y' is not a version (such as 2.2.14, 2.7 or 1.10)" in r.stderr


# ----------------------------------------------------------------------------- executed


@pytest.mark.slow
@pytest.mark.parametrize("target,deprecated", [("2.2.14", True), ("2.10.0", False)])
def test_both_forms_train_on_mindspore_2_10_and_only_the_old_one_is_deprecated_there(tmp_path, target, deprecated):
    """The migrated script runs on MindSpore 2.10 for the CPU (the rehearse stand-in): the 2.x
    set-up without a warning, the 1.x/2.0 set-up with MindSpore's own deprecation warning for
    set_context(device_id=...) -- what the target decides between."""
    from test_mindspore_run import CACHE, MINDSPORE, _works

    python = CACHE / f"venv-{MINDSPORE.split('==')[1]}" / "bin" / "python"
    if not _works(python):
        pytest.skip(f"{MINDSPORE} is not installed in {python.parent.parent} (tests/test_mindspore_run.py installs it)")
    from npu_migrate.standin import SITE

    result = migrate_source(SCRIPT, "train.py", Options.of(distributed=True, mindspore_version=target), RULES)
    script = tmp_path / "train.py"
    script.write_text(result.new_text)
    for path, text in result.extra_files.items():  # the helper module the script imports
        (tmp_path / os.path.basename(path)).write_text(text)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "RANK", "DEVICE_ID"))}
    env.update(PYTHONPATH=str(SITE), GLOG_v="2")
    r = subprocess.run([str(python), str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip().endswith("trained")
    warned = "the parameter 'device_id' will be deprecated" in r.stdout + r.stderr
    assert warned == deprecated, (r.stdout + r.stderr)[-3000:]
