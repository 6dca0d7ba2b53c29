"""MindSpore GPU -> Ascend (codemods/mindspore.py, rules/mindspore.toml): golden fixtures,
what counts as the device setting, findings at their exact positions, ModelArts on top."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from npu_migrate.dispatch import migrate_source
from npu_migrate.options import Options

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "mindspore"
CASES = sorted(p for p in FIXTURES.glob("*.py") if not p.name.endswith(".expected.py"))


def migrate(text: str, **options):
    result = migrate_source(text, "train.py", Options(**options))
    assert result.error is None
    return result


def after(text: str, **options) -> str:
    result = migrate(text, **options)
    return result.new_text if result.changed else text


def findings(text: str):
    return [(f.code, f.span.line, f.span.col) for f in migrate(text).findings]


def test_fixtures_exist():
    assert {p.stem for p in CASES} == {"resnet50_train", "lenet_ms2", "mlp_dispatch", "modelzoo_train"}


@pytest.mark.parametrize("source", CASES, ids=[p.stem for p in CASES])
def test_golden(source):
    expected = source.with_name(source.stem + ".expected.py").read_text(encoding="utf-8")
    text = source.read_text(encoding="utf-8")
    result = migrate_source(text, str(source))
    assert result.error is None
    assert (result.new_text if result.changed else text) == expected  # unchanged: byte for byte


@pytest.mark.parametrize("source", CASES, ids=[p.stem for p in CASES])
def test_second_run_is_a_no_op(source):
    expected = source.with_name(source.stem + ".expected.py").read_text(encoding="utf-8")
    again = migrate_source(expected, str(source))
    assert again.error is None
    assert not again.changed and again.edits == []


def test_golden_edits_and_findings():
    source = FIXTURES / "resnet50_train.py"
    result = migrate_source(source.read_text(encoding="utf-8"), str(source))
    assert [(e.code, e.span.line, e.span.col, e.before, e.after) for e in result.edits] == [
        ("NPU141", 45, 14, '"nccl"', '"hccl"'),
        ("NPU142", 69, 62, '"GPU"', '"Ascend"'),
    ]
    source = FIXTURES / "lenet_ms2.py"
    result = migrate_source(source.read_text(encoding="utf-8"), str(source))
    assert [(f.code, f.span.line, f.span.col, f.api) for f in result.findings] == [
        ("NPU346", 27, 54, "config.device_target"),
    ]


def test_an_argparse_dispatch_without_an_ascend_branch_moves_as_one():
    """default, choices, the comparison and the branch it selects: "GPU" -> "Ascend" together."""
    source = FIXTURES / "mlp_dispatch.py"
    result = migrate_source(source.read_text(encoding="utf-8"), str(source))
    assert [(e.code, e.span.line, e.before, e.after) for e in result.edits] == [
        ("NPU142", 21, '"GPU"', '"Ascend"'),
        ("NPU142", 21, '"GPU"', '"Ascend"'),
        ("NPU142", 33, '"GPU"', '"Ascend"'),
        ("NPU140", 34, '"GPU"', '"Ascend"'),
        ("NPU141", 36, '"nccl"', '"hccl"'),
    ]
    assert result.findings == []
    new = result.new_text
    assert 'default="Ascend", choices=("Ascend", "CPU")' in new and 'if args.device_target == "Ascend":' in new
    assert 'raise ValueError("Unsupported device_target.")' in new  # the dispatch's guard is kept


def test_a_model_zoo_script_with_its_settings_in_a_config_module_is_left_and_reported():
    """config.* comes from src/model_utils/config.py and default_config.yaml: the GPU branches
    (the `else` of `target == "Ascend"`, `if config.platform == "GPU":`) keep nccl and "GPU"."""
    source = FIXTURES / "modelzoo_train.py"
    text = source.read_text(encoding="utf-8")
    result = migrate_source(text, str(source))
    assert not result.changed and result.edits == []
    assert [(f.code, f.span.line, f.span.col, f.api) for f in result.findings] == [
        ("NPU346", 34, 68, "target"),
        ("NPU346", 36, 71, "target"),
        ("NPU348", 54, 8, "platform"),
    ]


def test_a_branch_kept_for_the_gpu_keeps_its_backend_and_device():
    text = (
        "import argparse\nimport mindspore as ms\nfrom mindspore.communication import init\n"
        "parser = argparse.ArgumentParser()\n"
        "parser.add_argument('--device_target', default='GPU', choices=['Ascend', 'GPU'])\n"
        "args = parser.parse_args()\n"
        "if args.device_target == 'Ascend':\n"
        "    ms.set_context(device_target='Ascend')\n"
        "    init('hccl')\n"
        "else:\n"
        "    ms.set_context(device_target='GPU')\n"
        "    init('nccl')\n"
    )
    assert after(text) == text.replace("default='GPU'", "default='Ascend'")


def test_an_alias_of_the_device_target_is_the_device_target():
    text = (
        "import argparse\nimport mindspore as ms\n"
        "parser = argparse.ArgumentParser()\n"
        "parser.add_argument('--device_target', default='GPU')\n"
        "args = parser.parse_args()\n"
        "dev = args.device_target\n"
        "if dev == 'GPU':\n"
        "    ms.set_context(device_target='GPU')\n"
        "else:\n"
        "    raise ValueError(dev)\n"
    )
    assert after(text) == text.replace("'GPU'", "'Ascend'")


def test_modelarts_adaptation_composes_with_the_mindspore_rewrites():
    source = FIXTURES / "resnet50_train.py"
    result = migrate_source(source.read_text(encoding="utf-8"), str(source), Options(modelarts=True))
    assert result.error is None
    text = result.new_text
    ast.parse(text)
    assert 'init("hccl")' in text and 'default="Ascend"' in text
    assert "--data_url" in text and "--train_url" in text
    again = migrate_source(text, str(source), Options(modelarts=True))
    assert again.error is None and not again.changed


def test_torch_rules_do_not_touch_a_mindspore_file():
    text = "import mindspore as ms\ndevice = 'cuda'\nx = t.cuda()\nbackend = 'nccl'\n"
    assert not migrate(text).changed


def test_device_comparisons_are_left_alone():
    text = (
        "from mindspore import context\n"
        "if args.device_target == 'GPU':\n"
        "    context.set_context(enable_graph_kernel=True)\n"
        "target = 'GPU'\n"
    )
    assert not migrate(text).changed


def test_a_variable_assigned_other_values_is_rewritten_only_where_it_says_gpu():
    text = (
        "import mindspore as ms\n"
        "target = 'GPU'\n"
        "if cpu_only:\n"
        "    target = 'CPU'\n"
        "ms.set_context(device_target=target)\n"
    )
    assert after(text) == text.replace("target = 'GPU'", "target = 'Ascend'")


def test_a_device_target_from_a_function_argument_is_reported():
    text = "import mindspore as ms\n\ndef setup(target):\n    ms.set_context(device_target=target)\n"
    assert not migrate(text).changed
    assert findings(text) == [("NPU346", 4, 34)]


def test_a_platform_option_that_feeds_the_device_target_moves_with_it():
    text = (
        "import argparse\nimport mindspore as ms\n"
        "parser = argparse.ArgumentParser()\n"
        "parser.add_argument('--platform', default='GPU')\n"
        "args = parser.parse_args()\n"
        "ms.set_context(device_target=args.platform)\n"
    )
    assert after(text) == text.replace("default='GPU'", "default='Ascend'")
    assert findings(text) == []


def test_an_option_that_holds_no_device_target_is_not_touched():
    text = (
        "import argparse\nimport mindspore as ms\n"
        "parser = argparse.ArgumentParser()\n"
        "parser.add_argument('--platform', default='linux')\n"
        "args = parser.parse_args()\n"
        "if args.platform == 'linux':\n"
        "    ms.set_context(device_target='GPU')\n"
    )
    assert after(text) == text.replace("device_target='GPU'", "device_target='Ascend'")


def test_forcing_mindspore_rewrites_a_config_module_without_mindspore_imports():
    text = (
        "import argparse\nparser = argparse.ArgumentParser()\n"
        "parser.add_argument('--device_target', default='GPU', choices=['Ascend', 'GPU', 'CPU'])\n"
    )
    assert not migrate(text).changed
    assert after(text, framework="mindspore") == text.replace("default='GPU'", "default='Ascend'")


def test_a_config_module_whose_option_does_not_offer_ascend_is_reported_not_half_migrated():
    # Nothing here reads --device_target: the code that compares it lives in another file.
    text = "import argparse\nparser = argparse.ArgumentParser()\nparser.add_argument('--device_target', default='GPU')\n"
    result = migrate(text, framework="mindspore")
    assert not result.changed
    assert [(f.code, f.span.line, f.api) for f in result.findings] == [("NPU348", 3, "--device_target")]


def test_backend_init_spellings():
    text = (
        "import mindspore.communication.management as D\n"
        "from mindspore.communication import init as comm_init\n"
        "D.init('nccl')\n"
        "comm_init(backend_name='nccl')\n"
    )
    assert after(text) == text.replace("'nccl'", "'hccl'")


def test_gpu_only_operators_are_reported_where_used():
    text = "from mindspore import nn\n\nclass Net(nn.Cell):\n    def __init__(self):\n        self.inv = nn.MatInverse()\n"
    assert findings(text) == [("NPU345", 5, 20)]


def test_a_suppression_comment_keeps_the_device():
    text = "import mindspore as ms\nms.set_device('GPU')  # npu-migrate: ignore[NPU140]\n"
    assert not migrate(text).changed


def test_the_framework_option_on_the_command_line(run_cli, tmp_path):
    config = tmp_path / "config.py"
    config.write_text("import argparse\nparser = argparse.ArgumentParser()\n"
                      "parser.add_argument('--device_target', default='GPU', choices=['Ascend', 'GPU'])\n")
    r = run_cli("config.py", "--diff", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (0, b"")
    r = run_cli("config.py", "--diff", "--framework", "mindspore", cwd=tmp_path)
    assert r.returncode == 1
    assert ("-parser.add_argument('--device_target', default='GPU', choices=['Ascend', 'GPU'])\n"
            "+parser.add_argument('--device_target', default='Ascend', choices=['Ascend', 'GPU'])\n") in r.stdout.decode()


def test_a_yaml_config_that_selects_the_gpu_is_reported_not_edited(run_cli, tmp_path):
    config = (FIXTURES / "default_config.yaml").read_bytes()
    (tmp_path / "default_config.yaml").write_bytes(config)
    result = migrate_source(config.decode(), "default_config.yaml")
    assert not result.changed
    assert [(f.code, f.span.line, f.span.col, f.api) for f in result.findings] == [
        ("NPU349", 8, 16, 'device_target: "GPU"'),
        ("NPU349", 9, 11, "platform: GPU"),
    ]
    r = run_cli(".", "--write", cwd=tmp_path)
    assert r.returncode == 0 and b"NPU349" in r.stderr + r.stdout
    assert (tmp_path / "default_config.yaml").read_bytes() == config


TRAIN_CROSSING = (
    "import argparse\nfrom mindspore import context\nfrom src.dataset import create_dataset\n\n"
    "parser = argparse.ArgumentParser()\n"
    "parser.add_argument('--device_target', type=str, default='GPU', choices=['GPU', 'CPU'])\n"
    "args = parser.parse_args()\n"
    "context.set_context(mode=context.GRAPH_MODE, device_target=args.device_target)\n"
    "ds = create_dataset('/data', batch_size=32, device_target=args.device_target)\n"
)
DATASET_CROSSING = (
    "import mindspore.dataset as de\n\n\ndef create_dataset(path, batch_size=32, device_target='GPU'):\n"
    "    if device_target == 'GPU':\n        data = de.ImageFolderDataset(path, shuffle=True)\n"
    "    else:\n        raise ValueError('Unsupported device_target.')\n    return data.batch(batch_size)\n"
)


def _crossing_project(root, train=TRAIN_CROSSING, dataset=DATASET_CROSSING, **more):
    (root / "src").mkdir()
    (root / "train.py").write_text(train, encoding="utf-8")
    (root / "src" / "dataset.py").write_text(dataset, encoding="utf-8")
    for name, text in more.items():
        (root / name).write_text(text, encoding="utf-8")


def _migrate(*args):
    from click.testing import CliRunner

    from npu_migrate.cli import main

    r = CliRunner().invoke(main, [*map(str, args), "--write", "--no-cache", "-j", "1", "--color", "never"])
    assert r.exit_code == 0, r.output
    return r.output


def test_a_device_target_passed_into_another_project_module_moves_with_it(tmp_path):
    """Issue 25.9: train.py passed "Ascend" to create_dataset(), whose module accepts only "GPU"
    (ValueError at start). Migrated together, both move: the option's default and choices, and
    the callee's comparison and parameter default (one decision for both files, made once per
    run: device_dispatch.crossing_moves)."""
    _crossing_project(tmp_path)
    out = _migrate(tmp_path)
    assert "NPU348" not in out
    assert (tmp_path / "train.py").read_text(encoding="utf-8") == TRAIN_CROSSING.replace(
        "default='GPU', choices=['GPU', 'CPU']", "default='Ascend', choices=['Ascend', 'CPU']")
    assert (tmp_path / "src" / "dataset.py").read_text(encoding="utf-8") == DATASET_CROSSING.replace(
        "'GPU'", "'Ascend'")
    before = {p: p.read_bytes() for p in tmp_path.rglob("*.py")}
    _migrate(tmp_path)  # idempotent
    assert {p: p.read_bytes() for p in tmp_path.rglob("*.py")} == before


def test_a_crossing_is_looked_for_only_in_files_holding_the_literal_quoted(tmp_path):
    """A MindSpore module naming "GPU" and a device word only in a comment or docstring can be
    neither side of a crossing (an option's default, a comparison: quoted literals), so it is not
    parsed for one: mindone 0.5.0 had 104 such modules parsed whole in the main process (-j 2:
    before any worker starts; 104 MB), 2 hold "GPU" quoted."""
    from npu_migrate import work
    from npu_migrate.codemods.device_dispatch import crossing_moves
    from npu_migrate.rules import default_rules

    notes = '"""Runs on GPU or Ascend: see device_target."""\nimport mindspore\n# GPU kernels, target device\n'
    rule = next(r for r in default_rules().framework_rules["mindspore"] if r.kind == "device_dispatch")
    walks = []
    for name, more in (("pair", {}), ("pair and notes", {"notes.py": notes})):
        (tmp_path / name).mkdir()
        _crossing_project(tmp_path / name, **more)
        with work.counting() as counts:
            moves = crossing_moves([str(p) for p in sorted((tmp_path / name).rglob("*.py"))], rule)
        where = tmp_path / name
        assert moves == (f"{where / 'src' / 'dataset.py'}::device_target", f"{where / 'train.py'}::device_target")
        walks.append(counts["walk"])
    assert walks[0] > 0 and walks[1] == walks[0], walks  # (main: notes.py parsed and walked too)


@pytest.mark.parametrize("case", ["train.py alone", "another caller passes GPU", "the callee knows Ascend",
                                  "the callee reads the value", "the callee passes it on"])
def test_a_device_target_crossing_modules_moves_not_at_all_when_one_side_cannot(tmp_path, case):
    """...or not at all: one side not among the files, another call that passes "GPU" itself, a
    callee that has an Ascend branch, reads the value or passes it further. Both stay, and the
    option's file says why (NPU348)."""
    dataset = DATASET_CROSSING
    more = {}
    if case == "another caller passes GPU":
        more["eval.py"] = "from src.dataset import create_dataset\nds = create_dataset('/d', device_target='GPU')\n"
    elif case == "the callee knows Ascend":
        dataset = dataset.replace("    else:\n", "    elif device_target == 'Ascend':\n        data = None\n    else:\n")
    elif case == "the callee reads the value":
        dataset = dataset.replace("    return", "    print(device_target)\n    return")
    elif case == "the callee passes it on":
        dataset = "from src.transforms import augment\n" + dataset.replace(
            "    return", "    data = augment(data, device_target=device_target)\n    return")
    _crossing_project(tmp_path, dataset=dataset, **more)
    out = _migrate(tmp_path / "train.py" if case == "train.py alone" else tmp_path)
    assert (tmp_path / "train.py").read_text(encoding="utf-8") == TRAIN_CROSSING
    assert (tmp_path / "src" / "dataset.py").read_text(encoding="utf-8") == dataset
    lines = [line for line in out.splitlines() if "NPU348 [" in line]
    assert any(line.startswith(f"{tmp_path / 'train.py'}:9:6: NPU348 [warning] `--device_target` (default \"GPU\")"
                               " is passed to `create_dataset` of the project module `src.dataset`") for line in lines), out