"""The ModelArts adaptation as a rewrite: exact output for the fixtures and for small scripts,
idempotence, which files count as entry scripts, and what the generated code may contain.
(tests/test_modelarts_run.py executes adapted scripts.)"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

from npu_migrate.dispatch import migrate_source
from npu_migrate.options import Options
from npu_migrate.modelarts import BEGIN_MARKER, END_MARKER, RUNTIME_MODULE, black_format, render_runtime

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "modelarts"
MODELARTS = Options(modelarts=True)

# fixture -> (edit codes, finding codes)
EXPECTED = {
    "mindspore_8card.py": ({"NPU201", "NPU203", "NPU204"}, []),
    "pt_dcgan.py": ({"NPU201", "NPU202", "NPU203", "NPU204"}, []),
    "pt_ddp_torchrun.py": ({"NPU102", "NPU106", "NPU108", "NPU201", "NPU202", "NPU203", "NPU204"},
                           ["NPU211", "NPU214", "NPU218"]),
    "pt_imagenet.py": ({"NPU201", "NPU202", "NPU203", "NPU204"}, []),
    "pt_mnist.py": ({"NPU201", "NPU202", "NPU203", "NPU204"}, ["NPU217"]),
    "pt_word_language_model.py": ({"NPU201", "NPU202", "NPU203", "NPU204"}, []),
    "tf115_biggan.py": ({"NPU120", "NPU121", "NPU201", "NPU202", "NPU203", "NPU204"}, ["NPU211"]),
    "tf115_flags.py": (set(), ["NPU213"]),
    "train_already_adapted.py": (set(), ["NPU210"]),
    "train_helper.py": ({"NPU201", "NPU202", "NPU203", "NPU204"}, []),
    "train_in_main.py": ({"NPU102", "NPU105", "NPU108", "NPU201", "NPU202", "NPU203", "NPU204"}, []),
    "train_module_level.py": ({"NPU201", "NPU202", "NPU203", "NPU204"}, []),
    "train_no_data_arg.py": ({"NPU201", "NPU202", "NPU203", "NPU204"}, ["NPU211", "NPU214"]),
    "train_no_parser.py": ({"NPU203", "NPU204"}, ["NPU211", "NPU214"]),
    "train_seed002.py": ({"NPU201", "NPU202", "NPU203", "NPU204"}, ["NPU214"]),
}


def test_every_fixture_has_an_expectation():
    assert sorted(p.name for p in (FIXTURES / "before").glob("*.py")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture(name):
    before = (FIXTURES / "before" / name).read_text()
    after = (FIXTURES / "after" / name).read_text()
    result = migrate_source(before, name, MODELARTS)
    assert result.error is None
    assert (result.new_text if result.changed else before) == after
    edits, findings = EXPECTED[name]
    assert {e.code for e in result.edits} == edits
    assert sorted(f.code for f in result.findings) == findings
    again = migrate_source(after, name, MODELARTS)  # a second --modelarts run changes nothing
    assert again.error is None and not again.changed and again.edits == []
    assert after.count(IMPORT) == (1 if "NPU204" in edits else 0)
    assert list(result.extra_files) == (["npu_migrate_modelarts.py"] if "NPU204" in edits else [])
    assert list(again.extra_files) == list(result.extra_files)  # the module is kept up to date


def adapt(source: str, path: str = "train.py", **options):
    result = migrate_source(source, path, Options(modelarts=True, **options))
    assert result.error is None, result.error
    return result


IMPORT = f"from {RUNTIME_MODULE} import modelarts_setup  # npu-migrate: ModelArts\n"


def without_block(text: str) -> str:
    """The adapted text with the import of the runtime module replaced by `# <import>`."""
    assert text.count(IMPORT) == 1
    return text.replace(IMPORT, "# <import>\n")


def settings_of(text: str) -> dict:
    """The keyword arguments of the modelarts_setup(...) call in `text`."""
    calls = [node for node in ast.walk(ast.parse(text)) if isinstance(node, ast.Call)
             and isinstance(node.func, ast.Name) and node.func.id == "modelarts_setup"]
    assert len(calls) == 1
    return {k.arg: ast.literal_eval(k.value) for k in calls[0].keywords}


def test_arguments_go_after_the_last_add_argument_of_the_parser_in_main():
    result = adapt(
        "import argparse\n"
        "\n"
        "\n"
        "def main():\n"
        "    p = argparse.ArgumentParser()\n"
        "    p.add_argument('--data_dir')\n"
        "    if True:\n"
        "        p.add_argument('--lr', type=float)\n"
        "    p.add_argument('--out_dir', default='out')\n"
        "\n"
        "    args = p.parse_args()\n"
        "    return args\n"
        "\n"
        "\n"
        "if __name__ == '__main__':\n"
        "    main()\n"
    )
    assert without_block(result.new_text) == (
        "import argparse\n"
        "# <import>\n"
        "\n"
        "\n"
        "def main():\n"
        "    p = argparse.ArgumentParser()\n"
        "    p.add_argument('--data_dir')\n"
        "    if True:\n"
        "        p.add_argument('--lr', type=float)\n"
        "    p.add_argument('--out_dir', default='out')\n"
        "    p.add_argument('--data_url', help='ModelArts input: OBS URL or local path')\n"
        "    p.add_argument('--train_url', help='ModelArts output: OBS URL or local path')\n"
        "\n"
        "    args = modelarts_setup(p.parse_known_args()[0], data=['data_dir'], outputs=['out_dir'])\n"
        "    return args\n"
        "\n"
        "\n"
        "if __name__ == '__main__':\n"
        "    main()\n"
    )
    assert [(e.code, e.span.line, e.message) for e in result.edits] == [
        ("NPU204", 4, "added above this line: an import of npu_migrate_modelarts.py, generated beside the script "
                      "(it copies --data_url in and the outputs to --train_url)"),
        ("NPU201", 9, "--data_url and --train_url added to the argument parser, after this line"),
        ("NPU202", 11, "parse_args() -> parse_known_args()[0]: arguments the platform adds do not stop the script"),
        ("NPU203", 11, "modelarts_setup(...) around the parsed arguments: copies --data_url in and the outputs to --train_url"),
    ]


def test_a_parser_built_by_a_helper_and_parsed_by_the_caller():
    result = adapt(
        "from argparse import ArgumentParser\n"
        "\n"
        "def main():\n"
        "    args = build_parser().parse_args()\n"
        "    print(args.root)\n"
        "\n"
        "def build_parser():\n"
        "    parser = ArgumentParser()\n"
        "    parser.add_argument('--root', default='./data', help='dataset root')\n"
        "    return parser\n"
        "\n"
        "if __name__ == '__main__':\n"
        "    main()\n"
    )
    text = without_block(result.new_text)
    assert "    args = modelarts_setup(build_parser().parse_known_args()[0], data=['root'])\n" in text
    assert ("    parser.add_argument('--root', default='./data', help='dataset root')\n"
            "    parser.add_argument('--data_url', help='ModelArts input: OBS URL or local path')\n"
            "    parser.add_argument('--train_url', help='ModelArts output: OBS URL or local path')\n"
            "    return parser\n") in text


def test_existing_url_arguments_are_not_added_again():
    source = (
        "import argparse\n"
        "parser = argparse.ArgumentParser()\n"
        "parser.add_argument('--data_url', default='/home/ma-user/modelarts/inputs/data_url_0')\n"
        "parser.add_argument('--train_url', default='/home/ma-user/modelarts/outputs/train_url_0/')\n"
        "args, _ = parser.parse_known_args()\n"
    )
    result = adapt(source)
    assert without_block(result.new_text) == (
        "import argparse\n"
        "# <import>\n"
        "parser = argparse.ArgumentParser()\n"
        "parser.add_argument('--data_url', default='/home/ma-user/modelarts/inputs/data_url_0')\n"
        "parser.add_argument('--train_url', default='/home/ma-user/modelarts/outputs/train_url_0/')\n"
        "args, _ = modelarts_setup(parser.parse_known_args(), data=['data_url'], outputs=['train_url'])\n"
    )
    # The script uses its own URL arguments as paths: they get the local copy / output folder.
    assert {e.code for e in result.edits} == {"NPU203", "NPU204"}


def test_a_dataset_name_is_not_taken_for_a_data_path():
    result = adapt(
        "import argparse\n"
        "parser = argparse.ArgumentParser()\n"
        "parser.add_argument('--dataset', default='cifar10', choices=['cifar10', 'mnist'])\n"
        "parser.add_argument('--data', default='imagenet', help='dataset name')\n"
        "args = parser.parse_args()\n"
    )
    assert settings_of(result.new_text) == {}
    assert [f.code for f in result.findings] == ["NPU211", "NPU214"]


def test_a_folder_the_help_says_the_run_saves_into_is_an_output_whatever_it_holds():
    """mmpose 1.3.2 tools/train.py's --show-dir ("directory where the visualization images will be
    saved") was taken for data (its help names images): its pictures would have been written into
    the input's copy and never reached train_url. A help text saying the run puts something at the
    path makes it an output; one that describes where data is stays data, and a download folder is
    neither (NPU217 is about those)."""
    result = adapt(
        "import argparse\n"
        "parser = argparse.ArgumentParser()\n"
        "parser.add_argument('config', help='train config file path')\n"
        "parser.add_argument('--show-dir', help='directory where the visualization images will be saved.')\n"
        "parser.add_argument('--pred-dir', help='folder to write the predicted labels to')\n"
        "parser.add_argument('--img-root', help='folder with the images to label')\n"
        "parser.add_argument('--ann-dir', help='directory where the annotations are stored')\n"
        "parser.add_argument('--cache-dir', help='directory where the downloaded images will be saved')\n"
        "args = parser.parse_args()\n"
    )
    assert settings_of(result.new_text) == {"data": ["img_root", "ann_dir"], "outputs": ["show_dir", "pred_dir"]}


def test_a_folder_the_run_uploads_to_is_not_its_data():
    """yolov5 7.0.14 train.py's --s3_upload_dir ("aws s3 folder directory to upload best weight and
    dataset", default None) was taken for the data argument (its help names a dataset and a
    folder): on ModelArts it became /cache/data, so yolov5's `if opt.s3_upload_dir:` upload of
    best.pt to S3 ran in every job that never asked for it. An argument named for an upload is
    where the run sends its results, never its input, whatever its help says; a folder to read
    stays data; --project (runs/train) stays the output."""
    result = adapt(
        "import argparse\n"
        "from pathlib import Path\n"
        "ROOT = Path(__file__).resolve().parents[0]\n"
        "parser = argparse.ArgumentParser()\n"
        "parser.add_argument('--data', type=str, default=ROOT / 'data/coco128.yaml', help='dataset.yaml path')\n"
        "parser.add_argument('--project', default='runs/train', help='save to project/name')\n"
        "parser.add_argument('--s3_upload_dir', type=str, default=None,\n"
        "                    help='aws s3 folder directory to upload best weight and dataset')\n"
        "parser.add_argument('--upload_dataset', action='store_true', help='upload dataset to aws s3')\n"
        "parser.add_argument('--upload-path', help='path of the dataset folder to upload the images to')\n"
        "parser.add_argument('--image-dir', help='folder with the images to train on')\n"
        "args = parser.parse_args()\n"
    )
    assert settings_of(result.new_text) == {"data": ["image_dir"], "outputs": ["project"]}


def test_the_data_of_one_split_is_data():
    """bert-pytorch 0.0.1a4 bert_pytorch/__main__.py:13-16 (`-c/--train_dataset`, "train dataset
    for train bert", required, no default): the data of one split, a file read, was not a data
    argument, so a relative path was not looked up in the copy of data_url. One with a default
    is too (`--eval_file data/dev.txt`). Not an optional one without a default: the runtime gives
    a data argument left None the input's folder, which bert-pytorch (`--test_dataset`, default
    None) and stanza 1.15.0's charlm (stanza/models/charlm.py:71 `--eval_file`, "Input plaintext
    file for the dev/test set") would open as their test file. A split's folder named for nothing
    more (`--eval_dir`) and a split named by its help stay as they were."""
    result = adapt(
        "import argparse\n"
        "parser = argparse.ArgumentParser()\n"
        "parser.add_argument('--train_file', type=str, help=\"Input plaintext file\")\n"
        "parser.add_argument('--eval_file', type=str, help=\"Input plaintext file for the dev/test set\")\n"
        "parser.add_argument('-c', '--train_dataset', required=True, type=str, help='train dataset for train bert')\n"
        "parser.add_argument('-t', '--test_dataset', type=str, default=None, help='test set for evaluate train set')\n"
        "parser.add_argument('-o', '--output_path', required=True, type=str, help='ex)output/bert.model')\n"
        "parser.add_argument('--dev_file', default='data/dev.txt')\n"
        "parser.add_argument('--eval_dir', type=str)\n"
        "parser.add_argument('--val_data', type=str, default='val2017', help='name of the validation split')\n"
        "args = parser.parse_args()\n"
    )
    assert settings_of(result.new_text) == {
        "data": ["train_file", "train_dataset", "dev_file"], "outputs": ["output_path"]}


@pytest.mark.parametrize("main_block", [
    "if __name__ == \"__main__\":\n  tf.test.main()\n",
    "if __name__ == \"__main__\":\n  tf.logging.set_verbosity(tf.logging.INFO)\n  tf.compat.v1.test.main()\n",
    "if __name__ == '__main__':\n    unittest.main(verbosity=2)\n",
    "if __name__ == '__main__': absltest.main()\n",
    "if __name__ == '__main__':\n    sys.exit(pytest.main([__file__]))\n",
    "if __name__ == '__main__':\n  test.main()\n",  # TensorFlow's `test` (imported below)
])
def test_a_test_module_is_not_an_entry_script(main_block):
    """tensor2tensor 1.15.7 bin/t2t_trainer_test.py (and 42 other `*_test.py` files) end in
    `tf.test.main()`: `--modelarts` over the project adapted all 43 as entry scripts (the
    generated module beside each, an import, `modelarts_setup()`, NPU211/NPU214/NPU219), though
    running one runs its tests, never a job. A main block that runs a test runner is a test
    module's; --entry still adapts one on purpose."""
    source = (
        "import argparse\nimport sys\nimport unittest\nimport pytest\nfrom absl.testing import absltest\n"
        "import tensorflow.compat.v1 as tf\nfrom tensorflow.python.platform import test\n"
        "from tensor2tensor.bin import t2t_trainer\n\n"
        "FLAGS = tf.flags.FLAGS\n\n\n"
        "class TrainerTest(tf.test.TestCase):\n\n"
        "  def testTrain(self):\n"
        "    FLAGS.train_steps = 1\n"
        "    FLAGS.data_dir = tf.test.get_temp_dir()\n"
        "    t2t_trainer.main(None)\n\n\n" + main_block)
    result = adapt(source, path="t2t_trainer_test.py")
    assert not result.changed and result.edits == [] and result.findings == []
    chosen = adapt(source, path="t2t_trainer_test.py", modelarts_entry_files=("t2t_trainer_test.py",))
    assert [e.code for e in chosen.edits] == ["NPU204", "NPU203"]


def test_a_launcher_running_the_project_s_own_test_main_is_still_an_entry_script():
    """`test.main()` is a test runner only where `test` is TensorFlow's: a project's own test.py
    whose main() a launcher runs after training leaves the launcher an entry script."""
    result = adapt(
        "import argparse\nimport train\nimport test\n\n\n"
        "def get_args():\n"
        "    parser = argparse.ArgumentParser()\n"
        "    parser.add_argument('--data-dir', help='folder with the images to train on')\n"
        "    return parser.parse_args()\n\n\n"
        "if __name__ == '__main__':\n    args = get_args()\n    train.main(args)\n    test.main(args)\n",
        path="main.py")
    assert settings_of(result.new_text) == {"data": ["data_dir"]}


def test_a_script_whose_main_block_trains_is_still_an_entry_script():
    result = adapt(
        "import argparse\nimport unittest\n"
        "parser = argparse.ArgumentParser()\n"
        "parser.add_argument('--data-dir', help='folder with the images to train on')\n\n"
        "def main(args):\n    model.fit(args.data_dir)\n\n"
        "if __name__ == '__main__':\n    main(parser.parse_args())\n")
    assert settings_of(result.new_text) == {"data": ["data_dir"]}


def test_a_required_data_argument_is_reported():
    result = adapt(
        "import argparse\n"
        "parser = argparse.ArgumentParser()\n"
        "parser.add_argument('data', metavar='DIR', help='path to dataset')\n"
        "parser.add_argument('--output-dir', default='out')\n"
        "args = parser.parse_args()\n"
    )
    assert settings_of(result.new_text) == {"data": ["data"], "outputs": ["output_dir"]}
    assert [(f.code, f.span.line, f.message) for f in result.findings] == [
        ("NPU218", 3, "the positional argument(s) data cannot be given as ModelArts job parameters, which are all "
                      "--name=value"),
    ]


def test_a_launcher_that_hands_the_command_line_to_another_module_is_reported():
    # sockeye's `sockeye-train` as a ModelArts boot file: sockeye.train.main() parses sys.argv with
    # parse_args(), so the job stops at start on --data_url (tests/test_rehearse_corpus.py runs it).
    source = "from sockeye.train import main\n\nif __name__ == \"__main__\":\n    main()\n"
    result = adapt(source)
    assert result.new_text == (
        "from sockeye.train import main\n"
        "from npu_migrate_modelarts import modelarts_setup  # npu-migrate: ModelArts\n\n"
        "if __name__ == \"__main__\":\n    modelarts_setup()\n    main()\n")
    assert [(f.code, f.span.line, f.message) for f in result.findings if f.code == "NPU219"] == [
        ("NPU219", 4, "the script has no parser of its own and hands the run to `main()` of another module: if that "
                      "code parses the command line, it must accept --data_url/--train_url and the arguments the "
                      "platform adds"),
    ]
    for other in (
        "import sys\nimport pkg.cli as cli\n\nif __name__ == '__main__':\n    sys.exit(cli.main(sys.argv[1:]))\n",
        "from . import trainer\n\nif __name__ == '__main__':\n    trainer.run()\n",
    ):
        assert "NPU219" in [f.code for f in adapt(other).findings], other
    # Not a hand-over: the launcher's own main(); an imported function not named like an entry
    # point; a script whose own parser reads the arguments.
    for alone in (
        "import torch\n\n\ndef main():\n    torch.save({}, 'm.pt')\n\n\nif __name__ == '__main__':\n    main()\n",
        "from pkg import fit\n\nif __name__ == '__main__':\n    fit()\n",
        "import argparse\nfrom pkg import main\n\nif __name__ == '__main__':\n"
        "    parser = argparse.ArgumentParser()\n    parser.add_argument('--out', default='o')\n"
        "    main(parser.parse_args())\n",
    ):
        assert "NPU219" not in [f.code for f in adapt(alone).findings], alone


def test_a_script_class_that_inherits_its_entry_method_hands_the_command_line_over():
    # ParlAI's parlai/scripts/train_model.py: `class TrainModel(ParlaiScript)` defines setup_args()
    # and run() but not main(); `TrainModel.main()` runs ParlaiScript.main() (parlai.core.script),
    # which parses sys.argv with an argparse parser, so the job stops at start on --data_url.
    source = (
        "from framework.script import BaseScript\n\n\n"
        "class TrainModel(BaseScript):\n"
        "    def run(self):\n        return 1\n\n\n"
        "if __name__ == '__main__':\n    TrainModel.main()\n"
    )
    result = adapt(source)
    assert result.new_text == source.replace(
        "BaseScript\n", "BaseScript\nfrom npu_migrate_modelarts import modelarts_setup  # npu-migrate: ModelArts\n", 1
    ).replace("    TrainModel.main()", "    modelarts_setup()\n    TrainModel.main()")
    assert [(f.code, f.span.line, f.api) for f in result.findings if f.code == "NPU219"] == [
        ("NPU219", 10, "TrainModel.main()")]
    # A dotted base (`script.BaseScript`) and a launcher function calling the class (ESPnet-style).
    dotted = ("import framework.script as script\n\n\nclass Evaluate(script.BaseScript):\n    pass\n\n\n"
              "def main():\n    Evaluate.run()\n\n\nif __name__ == '__main__':\n    main()\n")
    assert [(f.code, f.api) for f in adapt(dotted).findings if f.code == "NPU219"] == [("NPU219", "Evaluate.run()")]
    # Not a hand-over: the class defines the method itself; its base is the script's own class;
    # the method is not named like an entry point.
    for alone in (
        "from framework.script import BaseScript\n\n\nclass T(BaseScript):\n    @classmethod\n"
        "    def main(cls):\n        return 0\n\n\nif __name__ == '__main__':\n    T.main()\n",
        "import os\n\n\nclass Base:\n    @classmethod\n    def main(cls):\n        return os.getcwd()\n\n\n"
        "class T(Base):\n    pass\n\n\nif __name__ == '__main__':\n    T.main()\n",
        "from framework.script import BaseScript\n\n\nclass T(BaseScript):\n    pass\n\n\n"
        "if __name__ == '__main__':\n    T.fit()\n",
    ):
        assert "NPU219" not in [f.code for f in adapt(alone).findings], alone


def test_configured_argument_names():
    source = (
        "import argparse\n"
        "parser = argparse.ArgumentParser()\n"
        "parser.add_argument('--images', default='img')\n"
        "parser.add_argument('--logs', default='logs')\n"
        "args = parser.parse_args()\n"
    )
    result = adapt(source, data_args=("--images", "labels"), output_args=("logs",))
    assert settings_of(result.new_text) == {"data": ["images", "labels"], "outputs": ["logs"]}
    assert [(f.code, f.message) for f in result.findings] == [
        ("NPU215", "the configured --data-arg labels is not an argument of this script's parser"),
    ]
    result = adapt(source, data_args=("imgs",))
    assert [(f.code, f.message) for f in result.findings] == [
        ("NPU215", "the configured --data-arg imgs is not an argument of this script's parser"),
    ]
    assert settings_of(result.new_text) == {"data": ["imgs"], "outputs": ["logs"]}


def test_explicit_argument_lists_are_not_made_tolerant():
    result = adapt(
        "import argparse\n"
        "parser = argparse.ArgumentParser()\n"
        "parser.add_argument('--lr')\n"
        "debug = parser.parse_args(['--lr', '1'])\n"
        "args = parser.parse_args()\n"
    )
    text = without_block(result.new_text)
    assert "debug = parser.parse_args(['--lr', '1'])\n" in text
    assert "args = modelarts_setup(parser.parse_known_args()[0])\n" in text


def test_only_the_main_parser_gets_the_arguments_and_the_setup_call():
    # timm's train.py: a config parser first, then the real one (the one with the arguments).
    result = adapt(
        "import argparse\n"
        "config_parser = argparse.ArgumentParser(add_help=False)\n"
        "config_parser.add_argument('-c', '--config', default='')\n"
        "parser = argparse.ArgumentParser()\n"
        "parser.add_argument('--data-dir')\n"
        "parser.add_argument('--output')\n"
        "args_config, remaining = config_parser.parse_known_args()\n"
        "args = parser.parse_args(remaining)\n"
    )
    assert without_block(result.new_text).endswith(
        "parser.add_argument('--output')\n"
        "parser.add_argument('--data_url', help='ModelArts input: OBS URL or local path')\n"
        "parser.add_argument('--train_url', help='ModelArts output: OBS URL or local path')\n"
        "args_config, remaining = config_parser.parse_known_args()\n"
        "args = modelarts_setup(parser.parse_known_args(remaining)[0], data=['data_dir'], outputs=['output'])\n"
    )


def test_a_parser_imported_from_another_module_is_reported():
    result = adapt(
        "from options import get_parser\n"
        "\n"
        "if __name__ == '__main__':\n"
        "    args = get_parser().parse_args()\n"
    )
    assert without_block(result.new_text).endswith(
        "if __name__ == '__main__':\n"
        "    modelarts_setup()\n"
        "    args = get_parser().parse_args()\n"
    )
    assert [(f.code, f.span.line) for f in result.findings] == [("NPU211", 3), ("NPU214", 3), ("NPU216", 4)]


def test_a_parser_kept_in_an_attribute_is_reported_and_a_chained_one_is_not():
    result = adapt(
        "import argparse\n"
        "class Options:\n"
        "    def __init__(self):\n"
        "        self.parser = argparse.ArgumentParser()\n"
        "    def parse(self):\n"
        "        return self.parser.parse_args()\n"
        "if __name__ == '__main__':\n"
        "    opt = Options().parse()\n"
    )
    assert [(f.code, f.span.line, f.message) for f in result.findings if f.code == "NPU216"] == [
        ("NPU216", 6, "the arguments are parsed by a parser built elsewhere (`self.parser.parse_args()`): "
                      "it must accept --data_url/--train_url"),
    ]
    chained = adapt("import argparse\nif __name__ == '__main__':\n    argparse.ArgumentParser().parse_args()\n")
    assert "NPU216" not in {f.code for f in chained.findings}


def test_entry_scripts_are_chosen_by_main_block_parser_or_entry_option(tmp_path):
    library = "import torch\n\ndef model():\n    return torch.nn.Linear(2, 2).cuda()\n"
    result = adapt(library, "model.py")
    assert BEGIN_MARKER not in result.new_text and {e.code for e in result.edits} == {"NPU101", "NPU108"}
    script = "print('training')\n"
    assert not adapt(script, "run.py").changed
    chosen = adapt(script, str(tmp_path / "run.py"), modelarts_entry_files=(str(tmp_path / "run.py"),))
    assert without_block(chosen.new_text) == "# <import>\nmodelarts_setup()\nprint('training')\n"
    # With --entry, files with a main block that were not named are left alone.
    guarded = "if __name__ == '__main__':\n    print('hi')\n"
    assert not adapt(guarded, str(tmp_path / "other.py"), modelarts_entry_files=(str(tmp_path / "run.py"),)).changed


def test_notebooks_and_other_callers_that_say_no_are_respected():
    from npu_migrate.engine import migrate_python
    from npu_migrate.rules import default_rules

    source = "import argparse\nparser = argparse.ArgumentParser()\nargs = parser.parse_args()\n"
    result = migrate_python(source, "cell.py", MODELARTS, default_rules(), entry_script=False)
    assert not result.changed


def test_without_modelarts_nothing_happens():
    source = (FIXTURES / "before" / "train_module_level.py").read_text()
    assert not migrate_source(source, "train.py", Options()).changed


def test_changed_options_update_the_setup_call_in_place():
    before = (FIXTURES / "before" / "train_helper.py").read_text()
    first = adapt(before).new_text
    second = adapt(first, modelarts_data_dir="/cache/dataset", modelarts_resume=True, modelarts_sync_every=10)
    assert second.new_text.count(IMPORT) == 1
    assert [(e.code, e.message) for e in second.edits] == [
        ("NPU203", "modelarts_setup(...) given the current settings"),
    ]
    assert settings_of(second.new_text) == {
        "data": ["data_path"], "outputs": ["checkpoint_dir"], "data_dir": "/cache/dataset", "resume": True,
        "sync_every": 10,
    }
    # Only that line changed.
    assert [line for line in second.new_text.splitlines() if line not in first.splitlines()] == [
        "    return modelarts_setup(parser.parse_known_args()[0], data=['data_path'], outputs=['checkpoint_dir'], "
        "data_dir='/cache/dataset', resume=True, sync_every=10)",
    ]
    assert not adapt(second.new_text, modelarts_data_dir="/cache/dataset", modelarts_resume=True, modelarts_sync_every=10).changed


def test_the_block_of_an_earlier_version_is_replaced_by_the_import():
    old = (FIXTURES / "before" / "train_module_level.py").read_text().replace(
        "import time\n",
        "import time\n\n" + BEGIN_MARKER + "\n# Generated by `npu-migrate --modelarts`\nimport os as _os\n\n"
        "def modelarts_setup(parsed=None):\n    return parsed\n\n\n" + END_MARKER + "\n"
    ).replace("args = parser.parse_args()", "args = modelarts_setup(parser.parse_known_args()[0])")
    result = adapt(old)
    assert BEGIN_MARKER not in result.new_text and END_MARKER not in result.new_text
    assert result.new_text == adapt((FIXTURES / "before" / "train_module_level.py").read_text()).new_text
    assert not adapt(result.new_text).changed


def test_crlf_and_tab_indented_scripts_keep_their_style():
    source = ("import argparse\r\n\r\ndef main():\r\n\tparser = argparse.ArgumentParser()\r\n"
              "\tparser.add_argument('--data_dir')\r\n\targs = parser.parse_args()\r\n\r\n"
              "if __name__ == '__main__':\r\n\tmain()\r\n")
    text = adapt(source).new_text
    assert "\n" not in text.replace("\r\n", "")
    assert "\tparser.add_argument('--data_url', help='ModelArts input: OBS URL or local path')\r\n" in text
    assert not adapt(text).changed
    compile(text, "train.py", "exec")


def test_a_suppression_comment_silences_a_finding():
    result = adapt(
        "import argparse\n"
        "parser = argparse.ArgumentParser()  # npu-migrate: ignore[NPU211,NPU214]\n"
        "args = parser.parse_args()\n"
    )
    assert result.changed and result.findings == []


# -- the generated code ----------------------------------------------------------------------


RUNTIME = render_runtime()


def test_runtime_is_laid_out_with_black_is_python_3_7_and_versioned():
    assert black_format(RUNTIME) == RUNTIME
    ast.parse(RUNTIME, feature_version=(3, 7))
    assert RUNTIME.startswith("# npu-migrate: ModelArts runtime")
    assert re.search(r"^VERSION = \d+$", RUNTIME, re.MULTILINE)
    assert "NPU_MIGRATE_MODELARTS_CACHE" in RUNTIME


def test_runtime_imports_only_the_standard_library_and_moxing():
    imported = set()
    for node in ast.walk(ast.parse(RUNTIME)):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module.split(".")[0])
    assert imported - set(sys.stdlib_module_names) == {"moxing"}
    assert not re.search(r"\b(subprocess|os\.system|os\.popen|shell=)", RUNTIME)


@pytest.mark.parametrize("name", ["eval.py", "export.py", "infer_onnx.py", "preprocess.py", "postprocess.py",
                                  "predict.py", "eval_onnx.py", "evaluate.py", "split_data.py", "download_cifar.py",
                                  "prepare_dataset.py"])
def test_helper_scripts_are_not_entry_scripts_unless_named(tmp_path, name):
    source = ("import argparse\nparser = argparse.ArgumentParser()\nparser.add_argument('--ckpt_file')\n"
              "args = parser.parse_args()\nif __name__ == '__main__':\n    print(args.ckpt_file)\n")
    assert not adapt(source, str(tmp_path / name)).changed
    named = adapt(source, str(tmp_path / name), modelarts_entry_files=(str(tmp_path / name),))
    assert named.changed and IMPORT in named.new_text
    for kept in ("train.py", "main.py", "pretrain.py", "train_eval.py"):  # train_eval trains: an entry script
        assert IMPORT in adapt(source, str(tmp_path / kept)).new_text, kept


def test_a_module_of_a_package_imports_the_generated_module_relatively(tmp_path):
    # bert_pytorch/__main__.py: run through a launcher or `python -m`, its folder is not on sys.path.
    source = ("import argparse\n\nfrom .model import BERT\n\n\ndef train():\n"
              "    parser = argparse.ArgumentParser()\n"
              "    parser.add_argument('-o', '--output_path', required=True, type=str, help='ex)output/bert.model')\n"
              "    args = parser.parse_args()\n")
    path = str(tmp_path / "bert_pytorch" / "__main__.py")
    result = adapt(source, path, modelarts_entry_files=(path,))
    assert "from .model import BERT\nfrom .npu_migrate_modelarts import modelarts_setup  # npu-migrate: ModelArts\n" \
        in result.new_text
    assert list(result.extra_files) == [str(tmp_path / "bert_pytorch" / "npu_migrate_modelarts.py")]
    assert not adapt(result.new_text, path, modelarts_entry_files=(path,)).changed
