"""TensorFlow 1.15 -> NPU (codemods/tensorflow.py, rules/tensorflow.toml): golden fixtures,
framework detection, the decisions the rewrites depend on, findings at their exact positions,
and the validation of the framework rule schema (kinds/calls.py and the kind modules)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from npu_migrate.dispatch import migrate_source
from npu_migrate.options import Options
from npu_migrate.rules import RuleError, build_ruleset

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "tensorflow"
CASES = sorted(p for p in FIXTURES.glob("*.py") if not p.name.endswith(".expected.py"))


def migrate(text: str, **options):
    result = migrate_source(text, "train.py", Options(**options))
    assert result.error is None
    return result


def after(text: str, **options) -> str:
    result = migrate(text, **options)
    return result.new_text if result.changed else text


def findings(text: str, code: str = ""):
    return [(f.code, f.span.line, f.span.col) for f in migrate(text).findings if not code or f.code == code]


# ---------------------------------------------------------------------------- golden fixtures


def test_fixtures_exist():
    assert {p.stem for p in CASES} == {"biggan_train", "keras_mnist", "resnet50_horovod", "bert_run_classifier",
                                       "horovod_helper", "queue_pipeline"}


@pytest.mark.parametrize("source", CASES, ids=[p.stem for p in CASES])
def test_golden(source):
    expected = source.with_name(source.stem + ".expected.py").read_text(encoding="utf-8")
    result = migrate_source(source.read_text(encoding="utf-8"), str(source))
    assert result.error is None
    assert result.new_text == expected


@pytest.mark.parametrize("source", CASES, ids=[p.stem for p in CASES])
def test_second_run_is_a_no_op(source):
    expected = source.with_name(source.stem + ".expected.py").read_text(encoding="utf-8")
    again = migrate_source(expected, str(source))
    assert again.error is None
    assert not again.changed and again.edits == []


GOLDEN_FINDINGS = {
    # tf.layers.conv2d_transpose is "analysing", tf.nn.leaky_relu "unsupported" in Huawei's list.
    "biggan_train": [("NPU333", 49, 29), ("NPU344", 58, 17), ("NPU342", 67, 17), ("NPU333", 139, 12)],
    "keras_mnist": [],
    "resnet50_horovod": [],
    # log_softmax unsupported, CrossShardOptimizer/TPUClusterResolver deprecated (Huawei's list);
    # map_and_batch(drop_remainder=drop_remainder) is the user's choice.
    "bert_run_classifier": [("NPU342", 68, 15), ("NPU343", 96, 21), ("NPU338", 156, 28), ("NPU343", 172, 28)],
    "horovod_helper": [],
    # Queues, FixedLengthRecordReader and start_queue_runners are supported (no error); the
    # producer and shuffle_batch are deprecated (warnings); conv2d/max_pool per Huawei's list.
    "queue_pipeline": [("NPU332", 38, 20), ("NPU332", 46, 25), ("NPU342", 55, 38), ("NPU342", 57, 10)],
}
GOLDEN_EDITS = {
    "biggan_train": {"NPU120": 1, "NPU121": 1, "NPU122": 3, "NPU126": 1, "NPU127": 1},
    "keras_mnist": {"NPU120": 1, "NPU124": 2, "NPU126": 2},
    "resnet50_horovod": {"NPU120": 1, "NPU122": 4, "NPU125": 13, "NPU126": 1},
    "bert_run_classifier": {"NPU120": 1, "NPU128": 4},
    "horovod_helper": {"NPU120": 1, "NPU121": 1, "NPU125": 9, "NPU126": 1},
    "queue_pipeline": {"NPU120": 1, "NPU121": 1},
}


@pytest.mark.parametrize("source", CASES, ids=[p.stem for p in CASES])
def test_golden_findings_and_edit_codes(source):
    result = migrate_source(source.read_text(encoding="utf-8"), str(source))
    tf_findings = [(f.code, f.span.line, f.span.col) for f in result.findings if f.code.startswith(("NPU33", "NPU34"))]
    assert tf_findings == GOLDEN_FINDINGS[source.stem]
    counts = {}
    for e in result.edits:
        counts[e.code] = counts.get(e.code, 0) + 1
    assert counts == GOLDEN_EDITS[source.stem]


def test_golden_edits_point_at_the_original_lines():
    source = FIXTURES / "biggan_train.py"
    result = migrate_source(source.read_text(encoding="utf-8"), str(source))
    lines = source.read_text(encoding="utf-8").splitlines()
    by_code = {(e.code, e.span.line) for e in result.edits}
    assert ("NPU127", 91) in by_code and "tf.device('/gpu:0')" in lines[90]
    assert ("NPU121", 101) in by_code and "tf.Session(config=config)" in lines[100]
    assert ("NPU122", 133) in by_code and "tf.estimator.Estimator(" in lines[132]


def test_modelarts_adaptation_composes_with_the_tensorflow_rewrites():
    source = FIXTURES / "biggan_train.py"
    result = migrate_source(source.read_text(encoding="utf-8"), str(source), Options(modelarts=True))
    assert result.error is None
    text = result.new_text
    ast.parse(text)
    assert text.count("from npu_bridge.npu_init import *") == 1
    assert "tf.Session(config=npu_config_proto(config_proto=config))" in text
    assert "--data_url" in text and "--train_url" in text
    assert {"NPU120", "NPU121", "NPU122"} <= {e.code for e in result.edits}
    again = migrate_source(text, str(source), Options(modelarts=True))
    assert again.error is None and not again.changed


# ---------------------------------------------------------------------------- framework detection


def test_torch_rules_do_not_touch_a_tensorflow_file():
    text = "import tensorflow as tf\nx = t.cuda()\ndevice = 'cuda'\nif x.is_cuda:\n    pass\n"
    result = migrate(text)
    assert not result.changed and result.edits == []
    # The same lines in a file of no framework get the torch rules: the test above can fail.
    assert after(text.replace("import tensorflow as tf\n", "")) == "x = t.npu()\ndevice = 'npu'\nif x.is_npu:\n    pass\n"


def test_forcing_tensorflow_keeps_torch_rules_away_from_a_file_without_imports():
    assert not migrate("x = t.cuda()\n", framework="tensorflow").changed


def test_forcing_a_framework_applies_only_that_frameworks_rules():
    text = "import tensorflow as tf\nsess = tf.Session()\n"
    assert not migrate(text, framework="torch").changed
    assert not migrate(text, framework="mindspore").changed
    assert after(text, framework="tensorflow", add_import=False) == (
        "import tensorflow as tf\nsess = tf.Session(config=npu_config_proto())\n"
    )


@pytest.mark.parametrize("imports", ["import keras\n", "import horovod.tensorflow as hvd\n",
                                     "import horovod.keras as hvd\n", "from tensorflow.compat import v1 as tf\n"])
def test_keras_and_horovod_files_are_tensorflow_files(imports):
    text = imports + "x = t.cuda()\n"
    assert not migrate(text).changed


def test_a_file_using_torch_and_tensorflow_gets_both():
    text = "import torch\nimport tensorflow as tf\nx = t.cuda()\nsess = tf.Session()\n"
    assert after(text, add_import=False) == (
        "import torch\nimport tensorflow as tf\nx = t.npu()\nsess = tf.Session(config=npu_config_proto())\n"
    )


# ---------------------------------------------------------------------------- the import


def test_the_import_goes_before_the_first_import_after_docstring_and_future():
    text = '#!/usr/bin/env python\n"""Doc."""\nfrom __future__ import print_function\n\n# our imports\nimport os\nimport tensorflow as tf\nsess = tf.Session()\n'
    assert after(text) == (
        '#!/usr/bin/env python\n"""Doc."""\nfrom __future__ import print_function\n\n# our imports\n'
        "from npu_bridge.npu_init import *\nimport os\nimport tensorflow as tf\nsess = tf.Session(config=npu_config_proto())\n"
    )


def test_the_import_goes_before_a_guarded_import_block():
    text = "try:\n    import tensorflow.compat.v1 as tf\nexcept ImportError:\n    import tensorflow as tf\nsess = tf.Session()\n"
    assert after(text).startswith("from npu_bridge.npu_init import *\ntry:\n")


def test_no_import_option_leaves_the_import_out():
    assert after("import tensorflow as tf\nsess = tf.Session()\n", add_import=False) == (
        "import tensorflow as tf\nsess = tf.Session(config=npu_config_proto())\n"
    )


# ---------------------------------------------------------------------------- sessions and estimators


def test_user_aliases_and_formatting_are_kept():
    text = "import tensorflow.compat.v1 as tfv1\nwith tfv1.Session( graph = g ) as s:\n    pass\n"
    assert after(text, add_import=False) == (
        "import tensorflow.compat.v1 as tfv1\nwith tfv1.Session( graph = g, config = npu_config_proto() ) as s:\n    pass\n"
    )


def test_a_session_with_unpacked_arguments_is_reported_not_guessed():
    text = "import tensorflow as tf\nsess = tf.Session(**kwargs)\n"
    assert not migrate(text).changed
    assert findings(text, "NPU337") == [("NPU337", 2, 8)]


def test_estimator_keeps_its_class_when_its_config_is_not_certainly_an_npu_run_config():
    text = (
        "import tensorflow as tf\n"
        "cfg = tf.estimator.RunConfig(model_dir=d, device_fn=f)\n"
        "est = tf.estimator.Estimator(model_fn, config=cfg)\n"
    )
    assert after(text, add_import=False) == (
        "import tensorflow as tf\n"
        "cfg = tf.estimator.RunConfig(model_dir=d, device_fn=f)\n"
        "est = tf.estimator.Estimator(model_fn, config=npu_run_config_init(run_config=cfg))\n"
    )
    assert findings(text, "NPU337") == [("NPU337", 2, 7)]


def test_estimator_config_assigned_twice_must_be_npu_both_times():
    text = (
        "import tensorflow as tf\n"
        "cfg = tf.estimator.RunConfig(model_dir=d)\n"
        "if resume:\n"
        "    cfg = load_config()\n"
        "est = tf.estimator.Estimator(model_fn, config=cfg)\n"
    )
    assert "est = tf.estimator.Estimator(model_fn, config=npu_run_config_init(run_config=cfg))" in after(text)


def test_estimator_config_from_another_function_scope_is_not_confused():
    text = (
        "import tensorflow as tf\n"
        "def a():\n"
        "    cfg = tf.estimator.RunConfig(model_dir=d)\n"
        "def b(cfg):\n"
        "    return tf.estimator.Estimator(model_fn, config=cfg)\n"
    )
    out = after(text, add_import=False)
    assert "    cfg = NPURunConfig(model_dir=d)\n" in out
    assert "    return tf.estimator.Estimator(model_fn, config=npu_run_config_init(run_config=cfg))\n" in out


def test_a_suppression_comment_keeps_the_line():
    text = "import tensorflow as tf\nsess = tf.Session()  # npu-migrate: ignore[NPU121]\nother = tf.Session()\n"
    assert after(text, add_import=False) == (
        "import tensorflow as tf\nsess = tf.Session()  # npu-migrate: ignore[NPU121]\nother = tf.Session(config=npu_config_proto())\n"
    )


# ---------------------------------------------------------------------------- datasets


def test_batch_on_a_parameter_is_reported_at_its_position():
    text = "import tensorflow as tf\n\ndef batched(ds, n):\n    return ds.map(f).batch(n)\n"
    assert not migrate(text).changed
    assert findings(text, "NPU338") == [("NPU338", 4, 12)]


def test_a_variable_that_is_once_something_else_is_not_a_dataset():
    text = (
        "import tensorflow as tf\n"
        "data = tf.data.Dataset.range(10)\n"
        "if small:\n"
        "    data = MyLoader()\n"
        "data = data.batch(4)\n"
    )
    assert not migrate(text).changed
    assert findings(text, "NPU338") == [("NPU338", 5, 8)]


def test_an_explicit_drop_remainder_false_is_kept_and_reported():
    text = "import tensorflow as tf\nds = tf.data.Dataset.range(10).batch(4, drop_remainder=False)\n"
    assert not migrate(text).changed
    assert findings(text, "NPU338") == [("NPU338", 2, 56)]


def test_tf_train_batch_is_a_queue_api_not_a_dataset():
    text = "import tensorflow as tf\nimages = tf.train.batch([image], 32)\n"
    assert not migrate(text).changed
    assert findings(text) == [("NPU332", 2, 10)]


# ---------------------------------------------------------------------------- Horovod and Keras


def test_horovod_stays_whole_while_an_unmapped_call_uses_it():
    """Horovod moves whole or not at all: `hvd.rank()` -> `get_npu_rank_id()` beside a kept
    `hvd.allreduce(t)` would read the NPU's rank while Horovod, which the allreduce needs, was
    never set up on the NPU."""
    text = "import horovod.tensorflow as hvd\nr = hvd.rank()\nv = hvd.allreduce(t)\n"
    result = migrate(text)
    assert not result.changed
    assert [(f.code, f.span.line, f.span.col, f.message) for f in result.findings] == [
        ("NPU357", 2, 5, "`horovod.tensorflow.rank(...)` was not rewritten to `get_npu_rank_id`: `horovod.tensorflow`"
                         " moves to the NPU whole or not at all in a file, and `hvd.allreduce` at line 3 is kept."),
        ("NPU335", 3, 5, "`horovod.tensorflow.allreduce` has no NPU counterpart in the TF Adapter's helpers"),
    ]


def test_deepxde_horovod_setup_stays_whole_while_the_module_tests_its_hvd():
    """deepxde 1.15.0's config.py (real code, trimmed): `hvd` is set to None and tested; its
    init/size/rank were rewritten while `hvd` stayed Horovod for the code that tests it."""
    text = (
        "import os\n\nhvd = None\nworld_size = 1\nrank = 0\n"
        "if \"OMPI_COMM_WORLD_SIZE\" in os.environ:\n"
        "    import horovod.tensorflow as hvd\n\n"
        "    hvd.init()\n    world_size = hvd.size()\n"
        "    if world_size > 1:\n        rank = hvd.rank()\n    else:\n        hvd = None\n"
    )
    result = migrate(text)
    assert not result.changed
    assert [(f.code, f.span.line) for f in result.findings] == [
        ("NPU335", 3), ("NPU357", 9), ("NPU357", 10), ("NPU357", 12), ("NPU335", 14)]
    assert {f.message.split(": ", 1)[1] for f in result.findings if f.code == "NPU357"} == {
        "`horovod.tensorflow` moves to the NPU whole or not at all in a file, and `hvd` at line 3 is kept."}


def test_hvd_init_inside_an_expression_is_reported():
    text = "import horovod.tensorflow as hvd\nok = hvd.init() or True\n"
    assert not migrate(text).changed
    assert findings(text) == [("NPU337", 2, 6)]


def test_keras_training_without_a_main_block_is_reported_at_the_fit_call():
    text = "import tensorflow as tf\nmodel = tf.keras.Sequential()\nmodel.compile('sgd', 'mse')\nmodel.fit(x, y)\n"
    assert not migrate(text).changed
    assert findings(text) == [("NPU339", 4, 1)]


def test_keras_training_is_reported_only_where_the_receiver_is_certainly_a_keras_model():
    # deepchem 2.8.0 deepchem/utils/test/test_generator_evaluator.py:5-44 and
    # deepchem/models/progressive_multitask.py:6-9,254: deepchem's own KerasModel.fit/.fit_generator
    # (a TF 2 eager trainer), not Keras' fit: no NPU339
    deepchem = (
        "import tensorflow as tf\n"
        "from tensorflow.keras import layers\n"
        "import deepchem as dc\n"
        "from deepchem.models import KerasModel\n"
        "keras_model = tf.keras.Sequential([layers.Dense(2)])\n"
        "model = dc.models.KerasModel(keras_model, dc.models.losses.SoftmaxCrossEntropy())\n"
        "model.fit(dataset, nb_epoch=1000)\n"
        "class ProgressiveMultitaskRegressor(KerasModel):\n"
        "    def fit(self, generator):\n"
        "        self.fit_generator(generator)\n"
        "def train(m, x):\n"
        "    m.fit(x)\n"
    )
    assert findings(deepchem) == []
    # ... and where it is: through a variable, an attribute, `self` of a tf.keras.Model subclass
    keras = (
        "import tensorflow as tf\n"
        "model = tf.keras.Sequential()\n"
        "other = model\n"
        "if big:\n"
        "    other = Big()\n"
        "other.fit(x)\n"
        "class Trainer:\n"
        "    def __init__(self):\n"
        "        self.net = tf.keras.models.load_model(path)\n"
        "    def train(self):\n"
        "        self.net.train_on_batch(x, y)\n"
        "model.fit(x, y)\n"
    )
    assert findings(keras) == [("NPU339", 11, 9)]


def test_keras_layers_in_a_session_script_need_no_keras_session():
    text = (
        "import tensorflow as tf\n"
        "y = tf.keras.layers.Dense(3)(x)\n"
        "if __name__ == '__main__':\n"
        "    with tf.Session() as sess:\n"
        "        sess.run(y)\n"
    )
    assert after(text, add_import=False) == text.replace("tf.Session()", "tf.Session(config=npu_config_proto())")


# ---------------------------------------------------------------------------- findings


def test_native_keras_is_reported_where_it_is_imported():
    text = "import tensorflow as tf\nfrom keras.layers import Dense\n"
    assert findings(text) == [("NPU330", 2, 1)]


def test_float64_is_reported_through_the_users_alias():
    text = "import tensorflow.compat.v1 as tf1\nx = tf1.zeros([2], dtype=tf1.float64)\n"
    assert findings(text) == [("NPU331", 2, 26)]


def test_a_computed_gpu_device_is_reported_and_a_variable_device_is_not():
    text = (
        "import tensorflow as tf\n"
        "for i in range(n):\n"
        "    with tf.device('/gpu:{}'.format(i)):\n"
        "        pass\n"
        "with tf.device(dev):\n"
        "    pass\n"
    )
    assert not migrate(text).changed
    assert findings(text) == [("NPU340", 3, 20)]


def test_comments_docstrings_and_unrelated_strings_are_untouched():
    text = '"""Uses tf.Session() and /gpu:0."""\nimport tensorflow as tf\n# tf.Session()\nlabel = "/gpu:0"\n'
    result = migrate(text)
    assert not result.changed and result.findings == []


# ---------------------------------------------------------------------------- the rule schema


def _rule_file(**entry):
    base = {"framework": "tensorflow", "code": "NPU199", "message": "m",
            "examples": [{"before": "x\n", "after": "x\n"}]}
    base.update(entry)
    return base


@pytest.mark.parametrize(
    "kind, entry, error",
    [
        ("call_rename", {"apis": ["tensorflow.X"], "to": "Y", "framework": "torch"},
         "t.toml: [[call_rename]] #1 (NPU199): 'framework' must be one of tensorflow, mindspore, got 'torch'"),
        ("call_rename", {"to": "Y"}, "t.toml: [[call_rename]] #1 (NPU199): missing key 'apis'"),
        ("call_rename", {"apis": ["tensorflow.X"], "to": "Y", "max_positional": -1},
         "t.toml: [[call_rename]] #1 (NPU199): 'max_positional' must be an argument index (0, 1, …), got -1"),
        ("call_rename", {"apis": ["tensorflow.X"], "to": "Y", "npu_argument_position": 2},
         "t.toml: [[call_rename]] #1 (NPU199): 'npu_argument_position' needs 'npu_argument'"),
        ("call_rename", {"apis": ["tensor flow"], "to": "Y"},
         "t.toml: [[call_rename]] #1 (NPU199): 'apis': 'tensor flow' is not a dotted Python name"),
        ("call_replace", {"apis": ["h.init"], "to": "f", "cleanup": ["g()"]},
         "t.toml: [[call_replace]] #1 (NPU199): 'cleanup' needs 'assign_to' (the call must be a statement)"),
        ("call_replace", {"apis": ["h.init"], "to": "f", "extra_args": ["g("]},
         "t.toml: [[call_replace]] #1 (NPU199): 'extra_args' must be a Python expression, got 'g('"),
        ("argument", {"apis": ["m.f"], "keyword": "k", "to": "b"},
         "t.toml: [[argument]] #1 (NPU199): an [[argument]] rule needs exactly one of 'from' (a literal) or 'pattern' (a regex)"),
        ("argument", {"apis": ["m.f"], "keyword": "k", "to": "b", "pattern": "(("},
         "t.toml: [[argument]] #1 (NPU199): 'pattern' is not a regular expression: missing ), unterminated subpattern at position 1"),
        ("argument", {"apis": ["m.f"], "keyword": "k", "to": "b", "from": "a", "unknown_finding": "NPU398"},
         "t.toml: [[argument]] #1 (NPU199): 'unknown_finding' NPU398 is not a [[finding]] of kind \"codemod\" for framework 'tensorflow'"),
        ("add_keyword", {"keyword": "k", "value": "True", "methods": ["batch"]},
         "t.toml: [[add_keyword]] #1 (NPU199): 'methods' needs 'receivers' (the calls that build what they are called on)"),
        ("add_keyword", {"keyword": "k", "value": "True"},
         "t.toml: [[add_keyword]] #1 (NPU199): an [[add_keyword]] rule needs 'apis' or 'methods'"),
        ("entry_setup", {"uses": ["tensorflow.keras"], "methods": ["fit"], "setup": "x = (", "teardown": "y()"},
         "t.toml: [[entry_setup]] #1 (NPU199): 'setup' must be a Python statement, got 'x = ('"),
        ("remove_import", {"modules": []}, "t.toml: [[remove_import]] #1 (NPU199): 'modules' must name at least one module"),
        ("finding", {"kind": "codemod", "severity": "info", "api": "x", "framework": None,
                     "examples": [{"flagged": "x\n"}]},
         "t.toml: [[finding]] #1 (NPU199): a \"codemod\" finding needs 'framework' (the codemod that raises it)"),
        ("finding", {"kind": "method", "severity": "info", "api": "x", "examples": [{"flagged": "x\n"}]},
         "t.toml: [[finding]] #1 (NPU199): a finding with 'framework' must be of kind api, call, codemod, import, got 'method'"),
    ],
)
def test_framework_rules_are_validated(kind, entry, error):
    rule = _rule_file(**entry)
    rule = {k: v for k, v in rule.items() if v is not None}
    with pytest.raises(RuleError) as exc:
        build_ruleset([("t.toml", {kind: [rule]})])
    assert str(exc.value) == error


def test_framework_rules_stay_out_of_the_torch_indexes():
    rules = build_ruleset([("t.toml", {"finding": [_rule_file(
        kind="api", severity="error", api="tensorflow.float64", examples=[{"flagged": "x\n"}])]})])
    assert rules.finding_api == {} and [r.code for r in rules.framework_rules["tensorflow"]] == ["NPU199"]


# ---------------------------------------------------------------------------- `tf` from a star import


BIGGAN_MAIN = (
    "from BigGAN_128 import BigGAN_128\n"
    "import argparse\n"
    "from utils import *\n"
    "\n"
    "def main():\n"
    "    with tf.Session(config=tf.ConfigProto(allow_soft_placement=True)) as sess:\n"
    "        BigGAN_128(sess, args).train()\n"
)


def test_tf_from_a_star_import_is_tensorflow():
    # BigGAN-Tensorflow's main.py (seed 000): `tf` comes from `from utils import *`.
    assert after(BIGGAN_MAIN) == (
        "from npu_bridge.npu_init import *\n"
        + BIGGAN_MAIN.replace(
            "tf.Session(config=tf.ConfigProto(allow_soft_placement=True))",
            "tf.Session(config=npu_config_proto(config_proto=tf.ConfigProto(allow_soft_placement=True)))",
        )
    )


@pytest.mark.parametrize("text", [
    BIGGAN_MAIN.replace("from utils import *\n", "from utils import helpers\n"),  # no star import
    BIGGAN_MAIN.replace("import argparse\n", "import argparse\ntf = load_plugin()\n"),  # `tf` is the file's own
    "import torch\n" + BIGGAN_MAIN,  # a torch file
])
def test_tf_is_not_guessed_otherwise(text):
    assert "npu_config_proto" not in after(text)


def test_findings_in_a_torch_and_tensorflow_file_keep_their_original_lines():
    # The torch pass adds `import torch_npu` (a line) before the TensorFlow pass runs.
    text = "import torch\nimport tensorflow as tf\nx = t.cuda()\ny = tf.cast(x, tf.float64)\n"
    result = migrate(text)
    assert "import torch_npu" in result.new_text
    assert [(f.code, f.span.line, f.span.col) for f in result.findings] == [("NPU331", 4, 16)]


def test_cupy_is_reported_in_tensorflow_files():
    # CuPy's finding (NPU303, rules/findings_libraries.toml) applies to every framework.
    assert findings("import tensorflow as tf\nimport cupy as cp\n") == [("NPU303", 2, 8)]


def test_a_queue_pipeline_has_no_error_to_fail_check_on():
    source = FIXTURES / "queue_pipeline.py"
    result = migrate_source(source.read_text(encoding="utf-8"), str(source))
    assert [f for f in result.findings if f.severity.value == "error"] == []


def test_horovod_started_in_a_helper_is_shut_down_at_exit_not_at_the_end_of_its_block():
    text = (FIXTURES / "horovod_helper.expected.py").read_text(encoding="utf-8")
    helper = text[text.index("def setup_distributed"):text.index("def dataset")]
    assert helper.splitlines()[3:6] == [
        "        npu_sess, npu_shutdown = init_resource()",
        "        atexit.register(close_session, npu_sess)",
        "        atexit.register(shutdown_resource, npu_sess, npu_shutdown)",
    ]
    assert "shutdown_resource(npu_sess, npu_shutdown)\n" not in text  # no shut-down at a block's end
    assert text.index("from npu_bridge.npu_init import *\nimport atexit\n") > 0


@pytest.mark.parametrize("runner", ["main()", "tf.app.run()", "tf.app.run(main)", "absl.app.run(main)"])
def test_horovod_in_the_function_the_main_block_runs_is_shut_down_at_its_end(runner):
    text = (
        "import absl.app\nimport tensorflow as tf\nimport horovod.tensorflow as hvd\n\n\n"
        "def main(argv=None):\n    hvd.init()\n    train(hvd.size())\n\n\n"
        f"if __name__ == '__main__':\n    {runner}\n"
    )
    new = after(text)
    assert "    npu_sess, npu_shutdown = init_resource()\n    train(get_npu_rank_size())\n" \
           "    shutdown_resource(npu_sess, npu_shutdown)\n    close_session(npu_sess)\n" in new
    assert "atexit" not in new


def test_horovod_in_a_function_with_an_early_return_is_shut_down_at_exit():
    text = (
        "import tensorflow as tf\nimport horovod.tensorflow as hvd\n\n\n"
        "def main():\n    hvd.init()\n    if hvd.rank() > 7:\n        return\n    train()\n\n\n"
        "if __name__ == '__main__':\n    main()\n"
    )
    new = after(text)
    assert "    npu_sess, npu_shutdown = init_resource()\n    atexit.register(close_session, npu_sess)\n" in new
    assert "import atexit\n" in new


def test_horovod_init_in_a_loop_is_reported_and_left():
    text = "import horovod.tensorflow as hvd\nfor attempt in range(3):\n    hvd.init()\n"
    result = migrate(text)
    assert not result.changed
    (finding,) = [f for f in result.findings if f.code == "NPU337"]
    assert (finding.span.line, "runs in a loop") == (3, "runs in a loop") and "runs in a loop" in finding.message


def test_a_tpu_estimator_that_cannot_be_rewritten_is_an_error_never_silent():
    text = "import tensorflow as tf\nest = tf.contrib.tpu.TPUEstimator(model_fn=f, **estimator_kwargs)\n"
    result = migrate(text)
    assert not result.changed
    assert [(f.code, f.severity.value, f.span.line) for f in result.findings if f.code == "NPU350"] == [
        ("NPU350", "error", 2)]


def test_the_bert_tpu_estimator_trains_on_the_npu_and_keeps_its_tpu_run_config():
    text = (FIXTURES / "bert_run_classifier.expected.py").read_text(encoding="utf-8")
    assert ("  estimator = tf.contrib.tpu.TPUEstimator(\n      use_tpu=False,\n      model_fn=model_fn,\n"
            "      config=npu_run_config_init(run_config=run_config),\n") in text
    assert "      eval_on_tpu=False,\n      export_to_tpu=False)\n" in text
    assert "run_config = tf.contrib.tpu.RunConfig(" in text  # TPUEstimator requires its own RunConfig


# ---------------------------------------------------------------------------- --npu-ops


def test_npu_operators_are_offered_as_info_and_replaced_with_npu_ops():
    source = FIXTURES / "bert_run_classifier.py"
    text = source.read_text(encoding="utf-8")
    offered = migrate(text)
    assert [(f.code, f.severity.value, f.span.line) for f in offered.findings if f.code == "NPU351"] == [
        ("NPU351", "info", 39), ("NPU351", "info", 65)]
    result = migrate(text, npu_ops=True)
    new = result.new_text
    assert [(e.code, e.span.line) for e in result.edits if e.code == "NPU129"] == [("NPU129", 39), ("NPU129", 65)]
    assert '    `x` with the GELU activation applied.\n  """\n  return npu_unary_ops.gelu(x)\n\n\n' in new
    assert "    pooled = npu_ops.dropout(pooled, keep_prob=0.9)\n" in new
    assert not [f for f in result.findings if f.code == "NPU351"]
    again = migrate(new, npu_ops=True)
    assert not again.changed and not [f for f in again.findings if f.code in ("NPU351", "NPU129")]


@pytest.mark.parametrize("call,expected", [
    ("tf.layers.max_pooling2d(x, 2, 2)", 'tf.nn.max_pool_with_argmax(x, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID")[0]'),
    ("tf.layers.max_pooling2d(inputs=x, pool_size=(3, 3), strides=2, padding='same', name='pool1')",
     'tf.nn.max_pool_with_argmax(x, ksize=[1, 3, 3, 1], strides=[1, 2, 2, 1], padding="SAME", name=\'pool1\')[0]'),
    ("tf.nn.dropout(h, 0.5)", "npu_ops.dropout(h, 0.5)"),
    # Left alone: `rate=` (npu_ops.dropout takes keep_prob), sizes that are not literals, NCHW.
    ("tf.nn.dropout(h, rate=0.1)", None),
    ("tf.layers.max_pooling2d(x, k, k)", None),
    ("tf.layers.max_pooling2d(x, 2, 2, data_format='channels_first')", None),
])
def test_npu_operator_replacements(call, expected):
    text = f"import tensorflow as tf\ny = {call}\n"
    new = after(text, npu_ops=True, add_import=False)
    assert new == (text if expected is None else f"import tensorflow as tf\ny = {expected}\n")


def test_npu_ops_is_an_option_of_the_command_line_and_of_pyproject(run_cli, tmp_path):
    (tmp_path / "model.py").write_text("import tensorflow as tf\nh = tf.nn.dropout(h, 0.9)\n")
    r = run_cli("model.py", "--diff", "--npu-ops", cwd=tmp_path)
    assert r.returncode == 1 and b"+h = npu_ops.dropout(h, 0.9)" in r.stdout
    (tmp_path / "pyproject.toml").write_text("[tool.npu-migrate]\nnpu-ops = true\n")
    r = run_cli("model.py", "--diff", cwd=tmp_path)
    assert r.returncode == 1 and b"+h = npu_ops.dropout(h, 0.9)" in r.stdout


# ---------------------------------------------------------------------------- TensorFlow 2 code

TF2_MODEL = '''import tensorflow as tf


class Block(tf.keras.layers.Layer):
    def call(self, x, training=False):
        x = tf.nn.dropout(x, 0.9)
        with tf.device("/gpu:0"):
            return tf.contrib_free_name(x)
'''


def test_tensorflow2_code_gets_no_tensorflow115_rule():
    """A Keras Layer subclass (transformers' modeling_tf_*.py) is TF 2 code: none of the 1.15
    rewrites (tf.device('/gpu:0'), the NPU operator offer) nor the 1.15 support list, only NPU356
    at its TensorFlow import, and a note --verbose prints."""
    result = migrate(TF2_MODEL)
    assert not result.changed and result.edits == []
    assert [(f.code, f.span.line, f.span.col, f.severity.value) for f in result.findings] == [("NPU356", 1, 1, "info")]
    assert result.notes == ["TensorFlow 1.15 rules not applied: TensorFlow 2 code (Keras subclassing; "
                            "no TensorFlow 1.x API)"]
    # The same code with a TF 1.x API in it is TF 1.x code: the 1.15 rules apply.
    tf1 = migrate(TF2_MODEL + "\nsess = tf.Session()\n")
    assert "NPU356" not in {f.code for f in tf1.findings} and tf1.changed and tf1.notes == []
    assert "tf.device('/cpu:0')" in tf1.new_text or 'tf.device("/cpu:0")' in tf1.new_text


@pytest.mark.parametrize("text, reason", [
    ("import tensorflow as tf\nwith tf.GradientTape() as tape:\n    y = f(x)\n", "GradientTape"),
    ("import tensorflow as tf\n\n\n@tf.function\ndef step(x):\n    return x\n", "@tf.function"),
])
def test_tensorflow2_markers(text, reason):
    assert migrate(text).notes == [f"TensorFlow 1.15 rules not applied: TensorFlow 2 code ({reason}; no TensorFlow 1.x API)"]


@pytest.mark.parametrize("text", [
    "import tensorflow.compat.v1 as tf\n\n\nclass Net(tf.keras.Model):\n    pass\n",
    "import tensorflow as tf\nx = tf.placeholder(tf.float32)\nwith tf.GradientTape() as tape:\n    y = x\n",
    "import tensorflow as tf\nfrom tensorflow import keras\nmodel = keras.Sequential()\nmodel.fit(x)\n",  # tf.keras on 1.15
])
def test_tensorflow1_code_keeps_the_115_rules(text):
    assert migrate(text).notes == []


def test_tensorflow2_finding_once_per_run(run_cli, tmp_path):
    for name in ("a_model.py", "b_model.py"):
        (tmp_path / name).write_text(TF2_MODEL, encoding="utf-8")
    done = run_cli(".", "--format", "json", "-v", "--no-cache", cwd=tmp_path)
    import json

    report = json.loads(done.stdout)
    found = [(f["path"], x["code"]) for f in report["files"] for x in f.get("findings", [])]
    assert found == [("a_model.py", "NPU356")], found
    stderr = done.stderr.decode()
    for name in ("a_model.py", "b_model.py"):
        assert (f"{name}: TensorFlow 1.15 rules not applied: TensorFlow 2 code (Keras subclassing; "
                "no TensorFlow 1.x API)") in stderr.splitlines()



_LAYER = "\n\nclass Block(tf.keras.layers.Layer):\n    pass\n"


@pytest.mark.parametrize("text, fast", [
    ("import tensorflow as tf" + _LAYER, True),
    ("import os; import tensorflow as tf  # the model" + _LAYER, True),
    ("import os\nfrom tensorflow.keras import (\n    layers,\n    Model,\n)\nimport tensorflow as tf" + _LAYER, True),
    ("import tensorflow \\\n    as tf" + _LAYER, True),
    ("import numpy, keras.layers as L, tensorflow as tf" + _LAYER, True),
    ("try:\n    import numpy\nexcept ImportError:\n    numpy = None\nelse:\n    import keras\nimport tensorflow as tf"
     + _LAYER, True),
    ("if A:\n    pass\nelif B:\n    import keras\nelse:\n    import tensorflow\nimport tensorflow as tf" + _LAYER, True),
    ("def load():\n    import keras\n\n\nimport tensorflow as tf" + _LAYER, True),
    # a match statement's cases are not looked into (nor by the libcst pass)
    ("match X:\n    case 1:\n        import keras\nimport tensorflow as tf" + _LAYER, True),
    ("from . import tensorflow\nimport tensorflow as tf" + _LAYER, True),
    # columns: Python counts bytes, libcst characters
    ("x = 'é'; import tensorflow as tf" + _LAYER, False),
    ("import tensorflow as tf  # é" + _LAYER, True),
    # what the tree alone cannot answer the usual way does
    ("import tensorflow as tf  # npu-migrate: ignore" + _LAYER, False),
    ("import tensorflow as tf\r\n\r\n\r\nclass Block(tf.keras.layers.Layer):\r\n    pass\r\n", False),
    ("import tensorflow as tf" + _LAYER + "device = 'cuda'\n", False),
    ("import numpy as np\nimport mindspore\nimport tensorflow as tf" + _LAYER, False),
    ("import horovod.tensorflow as hvd\nfrom tensorflow import keras\n\n\nclass Block(keras.layers.Layer):\n    pass\n",
     True),
])
def test_tensorflow2_file_told_from_pythons_tree(monkeypatch, text, fast):
    """A TF 2 file where nothing but NPU356 can be reported (transformers' 71 modeling_tf_*.py)
    gets its finding and note from Python's tree (engine._tensorflow2_only), no libcst parse:
    the same result as the pass over libcst's tree, spans included."""
    from npu_migrate import engine

    quick = migrate_source(text, "model.py")
    assert (quick.work == {"ast": 1}) == fast, quick.work
    monkeypatch.setattr(engine, "_tensorflow2_only", lambda *args: None)
    slow = migrate_source(text, "model.py")
    assert quick.to_dict() == slow.to_dict()
    assert [f.code for f in slow.findings] == (["NPU356"] if "ignore" not in text else [])


TF1_GRAPH = '''import tensorflow as tf


def build():
    x = tf.compat.v1.placeholder(tf.float32, [None, 4])
    return tf.compat.v1.Session(config=tf.compat.v1.ConfigProto(allow_soft_placement=True)), x
'''


@pytest.mark.parametrize("name, text, reason", [
    ("setup.py", 'from setuptools import setup\nsetup(name="x", install_requires=["numpy", "tensorflow>=2.2"])\n',
     "tensorflow>=2.2 in setup.py"),
    ("requirements.txt", "numpy\ntensorflow-gpu==2.4.1\n", "tensorflow-gpu==2.4.1 in requirements.txt"),
    ("pyproject.toml", '[project]\nname = "x"\ndependencies = ["tensorflow ~= 2.13"]\n',
     "tensorflow ~= 2.13 in pyproject.toml"),
    # another file's requirement allowing any TensorFlow does not make it 1.x
    ("requirements.txt", "tensorflow\ntf-nightly>=2.16\n", "tf-nightly>=2.16 in requirements.txt"),
    # a requirement allowing only TF 1.x: the files may be alternatives, the files decide
    ("requirements.txt", "tensorflow>=2.2\ntensorflow-gpu<2\n", None),
    ("requirements.txt", "tensorflow>=1.15\n", None),
    ("requirements.txt", "tensorflow==1.15.5\n", None),
    ("requirements.txt", "torch>=2.1\n", None),
])
def test_a_project_requiring_tensorflow2_gets_no_tensorflow115_rule(run_cli, tmp_path, name, text, reason):
    """dopamine-rl 4.1.2 (install_requires tensorflow>=2.2): its tf.compat.v1 graph agent got
    `from npu_bridge.npu_init import *` and npu_config_proto, the TF Adapter for 1.15, which a
    TensorFlow 2 install does not have: the migrated module failed at its import. A project
    whose requirements allow no TF 1.15 is TF 2 code in every file: NPU356 only, and --verbose
    says why; a project that may be on 1.15 keeps the 1.15 rules (its file's own markers decide)."""
    (tmp_path / name).write_text(text, encoding="utf-8")
    (tmp_path / "agent.py").write_text(TF1_GRAPH, encoding="utf-8")
    done = run_cli(".", "--diff", "-v", "--no-cache", cwd=tmp_path)
    stdout, stderr = done.stdout.decode(), done.stderr.decode()
    if reason is None:
        assert "from npu_bridge.npu_init import *" in stdout and "NPU356" not in stderr
        assert "TensorFlow 1.15 rules not applied" not in stderr
        return
    assert done.returncode == 0 and stdout == ""  # (--diff: no change)
    assert "agent.py:1:1: NPU356 [info] TensorFlow 2 code" in stderr
    assert (f"agent.py: TensorFlow 1.15 rules not applied: the project requires TensorFlow 2 ({reason})"
            in stderr.splitlines())
    assert (tmp_path / "agent.py").read_text(encoding="utf-8") == TF1_GRAPH


def test_tensorflow2_required_keys_the_cache(run_cli, tmp_path):
    """The requirement decides what the run writes, so it is part of the cache key: a warm run
    after the requirement changes is what a fresh run says."""
    (tmp_path / "agent.py").write_text(TF1_GRAPH, encoding="utf-8")
    (tmp_path / "requirements.txt").write_text("tensorflow>=2.2\n", encoding="utf-8")
    env = {"NPU_MIGRATE_CACHE_DIR": str(tmp_path / ".cache")}
    first = run_cli(".", "--diff", cwd=tmp_path, env=env)
    assert first.stdout == b"" and "NPU356" in first.stderr.decode()
    (tmp_path / "requirements.txt").write_text("tensorflow==1.15.5\n", encoding="utf-8")
    second = run_cli(".", "--diff", cwd=tmp_path, env=env)
    assert "from npu_bridge.npu_init import *" in second.stdout.decode() and "NPU356" not in second.stderr.decode()


DEEPXDE_CONFIG = "import horovod.tensorflow as hvd\n\nhvd.init()\nworld_size = hvd.size()\nrank = hvd.rank()\n"
DEEPXDE_OPTIMIZERS = (
    "import tensorflow as tf\n\nfrom ..config import hvd\n\n\n"
    "def get(optim):\n"
    "    return hvd.DistributedOptimizer(optim, compression=hvd.Compression.none, backward_passes_per_step=1)\n"
)
DEEPXDE_MODEL = "import tensorflow as tf\n\nfrom . import config\n\n\ndef sync():\n    return config.hvd.broadcast_global_variables(0)\n"


@pytest.mark.parametrize("reader", ["optimizers/compat.py", "model.py"])
def test_horovod_names_another_module_imports_keep_their_module_on_horovod(tmp_path, run_cli, reader):
    """deepxde 1.15.0's layout (trimmed): config.py sets Horovod up and binds `hvd` at module
    level; optimizers/.../optimizers.py does `from ...config import hvd` and wraps the optimizer
    with Horovod's own options, model.py calls `config.hvd.broadcast_global_variables(0)`. Those
    calls stay Horovod's, so config.py's `hvd.init()` must too (rewritten, Horovod was never
    initialised for them; and the import went, so `from ..config import hvd` failed). Given
    alone (the pre-commit hook), config.py looks for its readers in the project too."""
    (tmp_path / "pkg/optimizers").mkdir(parents=True)
    (tmp_path / "pkg/__init__.py").write_text("")
    (tmp_path / "pkg/optimizers/__init__.py").write_text("")
    (tmp_path / "pkg/config.py").write_text(DEEPXDE_CONFIG)
    text = DEEPXDE_OPTIMIZERS if reader.startswith("optimizers") else DEEPXDE_MODEL
    (tmp_path / "pkg" / reader).write_text(text)
    for given in ("pkg", "pkg/config.py"):
        r = run_cli("--write", "--no-cache", given, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert (tmp_path / "pkg/config.py").read_text() == DEEPXDE_CONFIG
        assert (tmp_path / "pkg" / reader).read_text() == text
        lines = [line for line in r.stdout.decode().splitlines() if ": NPU357 [" in line]
        assert [line.split(" [")[0] for line in lines] == [
            "pkg/config.py:3:1: NPU357", "pkg/config.py:4:14: NPU357", "pkg/config.py:5:8: NPU357"]
        assert f"`horovod.tensorflow` moves to the NPU whole or not at all in a file, and {reader} (from this" \
               " file's folder) imports its `hvd` and uses it there." in lines[0]
    # Without the reader, config.py moves whole: the import goes.
    (tmp_path / "pkg" / reader).unlink()
    r = run_cli("--write", "--no-cache", "pkg", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "pkg/config.py").read_text() == (
        "\nfrom npu_bridge.npu_init import *\nnpu_sess, npu_shutdown = init_resource()\n"
        "world_size = get_npu_rank_size()\nrank = get_npu_rank_id()\n"
        "shutdown_resource(npu_sess, npu_shutdown)\nclose_session(npu_sess)\n")
    r = run_cli("--check", "--no-cache", "pkg", cwd=tmp_path)
    assert r.returncode == 0, r.stdout  # a second run changes nothing


def test_the_project_scan_looks_for_the_modules_that_move_whole():
    """project_values.WHOLE_MODULES (whose module-level names another module may import) are the
    modules of the `[[remove_import]]` rules, whose rewrites go whole or not at all."""
    from npu_migrate.kinds.remove_import import RemoveImportSpec
    from npu_migrate.project_values import WHOLE_MODULES
    from npu_migrate.rules import load_rules

    rules = load_rules()
    modules = {m for r in rules.rules if r.kind == "remove_import" for m in r.spec_of(RemoveImportSpec).modules}
    assert set(WHOLE_MODULES) == modules


# deepxde 1.15.0's readers (trimmed): optimizers/tensorflow_compat_v1/optimizers.py and
# data/pde.py read config.py's `hvd` and import no TensorFlow themselves (`from ...backend import tf`).
DEEPXDE_READER = (
    "from ...backend import tf\nfrom ...config import hvd\n\n\n"
    "def get(optim, loss):\n"
    "    if hvd is not None:\n"
    "        optim = hvd.DistributedOptimizer(optim)\n"
    "    if hvd.rank() == 0:\n"
    "        print(loss)\n"
    "    return optim.minimize(loss)\n"
)
DEEPXDE_ATTRIBUTE_READER = (
    "import numpy as np\n\nfrom .. import config\n\n\n"
    "def bcast(x):\n"
    "    if config.hvd is not None and config.hvd.size() > 1:\n"
    "        config.comm.Bcast(x, root=0)\n"
)


def test_a_module_reading_anothers_horovod_name_keeps_its_uses_and_says_why(tmp_path, run_cli):
    """deepxde 1.15.0: config.py binds `hvd` (Horovod's TF bindings) and stays on Horovod while
    other modules read it (test above); those readers import no TensorFlow, so no pass read them:
    their `hvd.DistributedOptimizer(optim)`, `hvd.rank()` and `config.hvd.size()` got no finding, and
    were they rewritten, they would leave config.py's Horovod (the value and its reader move
    together, across modules too). Now each reader's uses are Horovod's: kept, each reported
    where it is (NPU357 naming the module that keeps it, NPU335 for a test of the name)."""
    (tmp_path / "pkg/optimizers/compat").mkdir(parents=True)
    (tmp_path / "pkg/data").mkdir()
    for folder in ("pkg", "pkg/optimizers", "pkg/optimizers/compat", "pkg/data"):
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "pkg/config.py").write_text(DEEPXDE_CONFIG)
    (tmp_path / "pkg/optimizers/compat/optimizers.py").write_text(DEEPXDE_READER)
    (tmp_path / "pkg/data/pde.py").write_text(DEEPXDE_ATTRIBUTE_READER)
    r = run_cli("--write", "--no-cache", "pkg", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "pkg/config.py").read_text() == DEEPXDE_CONFIG
    assert (tmp_path / "pkg/optimizers/compat/optimizers.py").read_text() == DEEPXDE_READER
    assert (tmp_path / "pkg/data/pde.py").read_text() == DEEPXDE_ATTRIBUTE_READER
    lines = [line for line in r.stdout.decode().splitlines() if "/pde.py:" in line or "/optimizers.py:" in line]
    assert [line.split(" [")[0] for line in lines] == [
        "pkg/data/pde.py:7:8: NPU335", "pkg/data/pde.py:7:35: NPU357",
        "pkg/optimizers/compat/optimizers.py:6:8: NPU335", "pkg/optimizers/compat/optimizers.py:7:17: NPU357",
        "pkg/optimizers/compat/optimizers.py:8:8: NPU357"]
    assert ("`horovod.tensorflow.size(...)` was not rewritten to `get_npu_rank_size`: `horovod.tensorflow` moves to"
            " the NPU whole or not at all in a file, and `config.hvd` is ../config.py's (from this file's folder),"
            " which keeps it on Horovod while this file uses it.") in lines[1]
    assert ("`horovod.tensorflow.rank(...)` was not rewritten to `get_npu_rank_id`: `horovod.tensorflow` moves to"
            " the NPU whole or not at all in a file, and `hvd` is ../../config.py's (from this file's folder),"
            " which keeps it on Horovod while this file uses it.") in lines[4]
    # Given alone, a reader reads as before: what it imports is not among the run's files.
    r = run_cli("--check", "--no-cache", "pkg/optimizers/compat/optimizers.py", cwd=tmp_path)
    assert r.returncode == 0 and "NPU3" not in r.stdout.decode(), r.stdout


def test_the_prefilter_check_judges_a_skip_for_known_frameworks_by_the_engine(monkeypatch):
    """conftest's prefilter_never_skips_work: a "no work" for the frameworks a file is known to
    use is no skip by itself (engine._needs_nothing_as_pytorch asks whether PyTorch's rules alone
    can match, then looks at the other frameworks), so a PyTorch and TF 2 file migrates here
    (the check took that first answer for a skip and failed on its NPU356); a skip that rests on
    such an answer is checked, with the run's options and rules."""
    from npu_migrate import engine

    both = "import torch\nimport tensorflow as tf\n\n\nclass Block(tf.keras.layers.Layer):\n    pass\n"
    assert [f.code for f in migrate_source(both, "m.py").findings] == ["NPU356"]
    tf1 = "import torch\nif x:\n    import tensorflow as tf\n\nsess = tf.Session()\n"
    assert [e.code for e in migrate_source(tf1, "m.py").edits] == ["NPU120", "NPU121"]
    monkeypatch.setattr(engine, "_outside_definitions_frameworks", lambda text: frozenset({"torch"}))  # (wrong)
    with pytest.raises(AssertionError, match="the prefilter skipped a text that needs work"):
        migrate_source(tf1, "m2.py")
