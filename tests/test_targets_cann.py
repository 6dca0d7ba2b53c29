"""The CANN target (targets/cann.py, targets/rule_view.py): the TF Adapter helpers the TensorFlow
output calls exist in the target's adapter (rules/targets/tf_adapter.toml, from the evidence in
tf_adapter_sources.toml), a helper the target lacks is not written and NPU321 says which
release added it, and the target is read from the option, the configuration or the project's
launch scripts."""

from __future__ import annotations

import ast
import builtins
import json
import re
import sys
from pathlib import Path

import pytest

from npu_migrate.dispatch import migrate_source
from npu_migrate.options import Options
from npu_migrate.rules import default_rules
from npu_migrate.targets import RunTargets, TargetError, resolve
from npu_migrate.targets.cann import CannTarget, cann_key, load_cann_table, project_cann_versions
from npu_migrate.targets.rule_view import missing_in_text, rules_for_targets, written_helpers
from npu_migrate.targets.torch_npu import load_table
from npu_migrate.kinds.finding import FindingSpec

ROOT = Path(__file__).resolve().parent.parent
RULES = default_rules()
TABLE = load_cann_table()
# Every dated release, releases between and around them, and the default (the newest).
TARGETS = ["20.0", "20.1", "3.3.0", "5.0", "5.0.4", "5.1.RC2", "6.3.RC2", "8.0.RC2", "9.0", "9.1", ""]


def test_table_is_generated_from_the_recorded_evidence():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import tf_adapter_table
    finally:
        sys.path.pop(0)
    assert tf_adapter_table.main(["--check"]) == 0
    assert (ROOT / "rules/targets/tf_adapter.toml").read_text(encoding="utf-8") == tf_adapter_table.render(
        tf_adapter_table.load_sources())
    # --read extracts what a star import gives, with function parameters, from the source alone
    text = ("import os\nfrom a.b import C as D, E\nX = 1\n_private = 2\n"
            "def npu_config_proto(config_proto=None):\n    pass\nclass Hook:\n    pass\n")
    assert tf_adapter_table.surface(text) == {"os", "D", "E", "X", "npu_config_proto",
                                              "npu_config_proto:config_proto", "Hook"}


def test_releases_in_the_order_they_came_out():
    order = ["20.0", "20.1", "20.2", "3.1.0", "3.3.0", "5.0.2.alpha005", "5.0.4", "5.1.RC2", "6.0.1", "6.3.RC2",
             "7.0.0", "8.0.RC2", "8.5.0", "9.0"]
    assert sorted(order, key=cann_key) == order
    assert TABLE.releases == ("20.0", "5.0", "9.0")
    with pytest.raises(TargetError, match="not a CANN version"):
        cann_key("latest")


def test_what_each_target_has():
    assert CannTarget("20.0").has("NPUEstimator") and CannTarget("20.0").has("NPURunConfig")
    assert not CannTarget("20.1").has("npu_config_proto")
    assert not CannTarget("3.3.0").has("npu_run_config_init")  # between 20.0 and 5.0: only what both have
    assert CannTarget("5.0.4").has("npu_config_proto:config_proto")
    assert CannTarget("8.0.RC2").has("npu_config_proto adds the NpuOptimizer")
    assert not CannTarget("8.0.RC2").has("get_npu_local_rank_size")  # 5.0 lacks it, 9.0 has it
    assert CannTarget("").has("get_npu_local_rank_size") and CannTarget("9.1").has("get_npu_local_rank_size")
    missing = CannTarget("20.0").missing(["NPUEstimator", "npu_hooks_append"])
    assert (missing.name, missing.added_in, missing.target) == ("npu_hooks_append", "5.0", "CANN 20.0")
    assert missing.describe() == "the TF Adapter of CANN 20.0 has no `npu_hooks_append` (it came with CANN 5.0)"


def test_every_tensorflow_rule_declares_helpers_the_table_knows():
    written = {h for rule in RULES.rules for h in written_helpers(rule)}
    assert {"npu_config_proto", "npu_config_proto:config_proto", "npu_config_proto adds the NpuOptimizer",
            "npu_run_config_init", "NPURunConfig", "NPUEstimator", "NPUEstimatorSpec", "set_keras_session_npu_config",
            "close_session", "npu_clear_session", "init_resource", "shutdown_resource", "get_npu_rank_id",
            "get_npu_local_rank_id", "get_npu_rank_size", "npu_distributed_optimizer_wrapper",
            "NPUBroadcastGlobalVariablesHook", "NPUBroadcastGlobalVariablesCallback"} <= written


# ----------------------------------------------------------------------------- done when


def _tensorflow_inputs():
    """(source, path, options) of everything the TensorFlow passes rewrite: the rule examples,
    the TensorFlow fixtures, the --distributed and --npu-ops ones."""
    for rule in RULES.rules:
        if rule.framework != "tensorflow" and not rule.source.startswith("distributed"):
            continue
        for ex in rule.examples:
            text = ex.before or ex.flagged
            if text and "tensorflow" in text or "horovod" in (text or ""):
                yield text, ex.path, dict(ex.options)
    for path in sorted((ROOT / "fixtures/tensorflow").glob("*.py")):
        if not path.name.endswith(".expected.py"):
            yield path.read_text(encoding="utf-8"), path.name, {}
            yield path.read_text(encoding="utf-8"), path.name, {"npu_ops": True}
    for path in sorted((ROOT / "fixtures/distributed/tensorflow").glob("*.py")):
        if not path.name.endswith(".expected.py"):
            yield path.read_text(encoding="utf-8"), path.name, {"distributed": True}


class _Names(ast.NodeVisitor):
    def __init__(self) -> None:
        self.loaded = set()
        self.bound = set()
        self.calls = []
        self.modules = set()

    def visit_Name(self, node):
        (self.loaded if isinstance(node.ctx, ast.Load) else self.bound).add(node.id)

    def visit_FunctionDef(self, node):
        self.bound.add(node.name)
        for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs:
            self.bound.add(a.arg)
        if node.args.vararg:
            self.bound.add(node.args.vararg.arg)
        if node.args.kwarg:
            self.bound.add(node.args.kwarg.arg)
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):
        self.bound.add(node.name)
        self.generic_visit(node)

    def visit_Lambda(self, node):
        for a in node.args.args:
            self.bound.add(a.arg)
        self.generic_visit(node)

    def visit_Import(self, node):
        for a in node.names:
            self.bound.add(a.asname or a.name.split(".")[0])
            self.modules.add(a.name)

    def visit_ImportFrom(self, node):
        self.modules.add(node.module or "")
        for a in node.names:
            if a.name != "*":
                self.bound.add(a.asname or a.name)
                self.modules.add(f"{node.module}.{a.name}")

    def visit_ExceptHandler(self, node):
        if node.name:
            self.bound.add(node.name)
        self.generic_visit(node)

    def visit_arg(self, node):
        self.bound.add(node.arg)

    def visit_Call(self, node):
        if isinstance(node.func, ast.Name):
            self.calls.append((node.func.id, [k.arg for k in node.keywords if k.arg]))
        self.generic_visit(node)


def _names(text: str) -> _Names:
    names = _Names()
    names.visit(ast.parse(text))
    return names


def _target_classes():
    """TARGETS grouped by what they provide: targets with the same answer for every name and fact
    of the table give the same output (the tool asks the target only that, CannTarget.has and
    .missing), so one of each group runs (11 targets, 3 groups today)."""
    table = load_cann_table()
    groups = {}
    for target in TARGETS:
        has = CannTarget(target).has
        groups.setdefault(frozenset(n for n in (*table.names, *table.facts) if has(n)), []).append(target)
    return list(groups.values())


@pytest.mark.parametrize("targets", _target_classes(), ids=lambda ts: "+".join(t or "newest" for t in ts))
@pytest.mark.slow
def test_every_helper_the_tensorflow_output_calls_exists_in_the_target(targets):
    """Done when: for every supported CANN target, every TF Adapter name the tool writes exists in
    that release's npu_bridge.npu_init (with the keywords it passes, and the behaviour it relies on)."""
    target = targets[0]
    target_ = CannTarget(target)
    checked = 0
    for text, path, extra in _tensorflow_inputs():
        options = Options.of(**{**extra, "cann_version": target})
        result = migrate_source(text, path, options, RULES)
        if not result.changed:
            continue
        before, after = _names(text), _names(result.new_text)
        written = after.loaded - before.loaded - after.bound - set(dir(builtins))
        if "npu_bridge.npu_init" not in after.modules:
            assert not (written & set(TABLE.names)), (path, written)
            continue
        for name in sorted(written):
            assert name in TABLE.names, f"{path}: the tool wrote `{name}`, which no TF Adapter release defines"
            assert target_.has(name), f"{path}: CANN {target or 'newest'} lacks `{name}`:\n{result.new_text}"
            checked += 1
        for func, keywords in after.calls:
            if func in written and any(n.startswith(func + ":") for n in TABLE.names):  # parameters tracked
                for kw in keywords:
                    assert target_.has(f"{func}:{kw}"), (path, func, kw)
                fact = f"{func} adds the NpuOptimizer"
                if fact in TABLE.facts:
                    assert target_.has(fact), (path, fact)
        for module in after.modules - before.modules:
            if module.startswith("npu_bridge.") and module in TABLE.names:
                assert target_.has(module), (path, module)
            elif module.startswith("npu_bridge.") and module != "npu_bridge.npu_init":
                assert any(n.startswith(module + ".") for n in TABLE.names), f"{path}: `{module}` is not in the table"
    if target_.has("npu_config_proto"):
        assert checked > 50  # the check saw the helpers (it is not vacuous)


def test_an_old_target_gets_no_rewrite_into_a_missing_helper_and_a_finding_naming_the_release():
    text = "import tensorflow as tf\nsess = tf.Session()\nest = tf.estimator.Estimator(model_fn=f, config=make())\n"
    old = migrate_source(text, "train.py", Options.of(cann_version="20.1"), RULES)
    assert not old.changed
    assert [(f.code, f.span.line, f.message) for f in old.findings] == [
        ("NPU321", 2, "`tensorflow.Session` was not migrated: the TF Adapter of CANN 20.1 has no `npu_config_proto` "
                      "(it came with CANN 5.0)"),
        ("NPU321", 3, "`tensorflow.estimator.Estimator` was not migrated: the TF Adapter of CANN 20.1 has no "
                      "`npu_run_config_init` (it came with CANN 5.0)"),
    ]
    assert old.findings[0].suggestion.startswith("Build the session's ConfigProto by hand: `custom_op = ")
    new = migrate_source(text, "train.py", Options.of(cann_version="5.0.4"), RULES)
    assert new.new_text == ("from npu_bridge.npu_init import *\nimport tensorflow as tf\n"
                            "sess = tf.Session(config=npu_config_proto())\n"
                            "est = tf.estimator.Estimator(model_fn=f, config=npu_run_config_init(run_config=make()))\n")
    assert not [f for f in new.findings if f.code == "NPU321"]


def test_rules_of_one_change_move_together():
    """TPUEstimator's use_tpu=False without its NPU config would train on the CPU: under a target
    whose adapter lacks npu_run_config_init the whole change is left, and reported once."""
    text = "from tensorflow.contrib import tpu as contrib_tpu\nest = contrib_tpu.TPUEstimator(model_fn, None, cfg, None, True)\n"
    old = migrate_source(text, "train.py", Options.of(cann_version="20.0"), RULES)
    assert not old.changed and [f.code for f in old.findings] == ["NPU321"]
    new = migrate_source(text, "train.py", Options.of(cann_version="5.0"), RULES)
    assert "npu_run_config_init(run_config=cfg), None, False, eval_on_tpu=False, export_to_tpu=False)" in new.new_text


def test_rules_lists_what_a_cann_target_gets(tmp_path):
    r = _cli("rules", "--cann-version", "20.1", cwd=tmp_path)
    assert r.returncode == 0
    lines = r.stdout.splitlines()
    assert lines[0] == "CANN 20.1: the TF Adapter of CANN 20.0 and CANN 5.0 (--cann-version)"
    assert "  NPU122 tensorflow.estimator.Estimator -> NPUEstimator" in lines
    assert "  NPU121 tensorflow.Session, tensorflow.InteractiveSession -> npu_config_proto  (came with CANN 5.0)" in lines
    assert "  NPU121 tensorflow.train.Supervisor.managed_session, tensorflow.train.Supervisor.prepare_or_wait_for_session" \
           " -> npu_config_proto  (came with CANN 5.0)" in lines
    # the newest dated release makes every one of them (however many the rules have)
    newest = _cli("rules", "--cann-version", "9.0", cwd=tmp_path).stdout.splitlines()[1]
    made, total = re.match(r"(\d+) of (\d+) TensorFlow rewrites", newest).groups()
    assert made == total and int(total) >= 18


def test_distributed_tensorflow_is_left_whole_when_the_target_lacks_npu_hooks_append():
    text = ("import tensorflow as tf\nopt = tf.train.AdamOptimizer(0.01)\n"
            "est = tf.estimator.Estimator(model_fn=model_fn, config=tf.estimator.RunConfig())\n"
            "est.train(input_fn, hooks=[h])\n")
    old = migrate_source(text, "train.py", Options.of(distributed=True, cann_version="20.0"), RULES)
    assert old.extra_files == {}
    assert "npu_hooks_append" not in (old.new_text or "") and "NPUDistributedOptimizer" not in (old.new_text or "")
    assert any(f.code == "NPU321" and "`npu_hooks_append`" in f.message for f in old.findings)
    new = migrate_source(text, "train.py", Options.of(distributed=True, cann_version="5.0"), RULES)
    assert "hooks=npu_hooks_append(hooks_list=[h])" in new.new_text


# ----------------------------------------------------------------------------- suggestions


# every torch_npu minor version (with the newest CANN and MindSpore), and three of them with older ones
_TARGET_SETS = sorted({("", "", minor) for minor in load_table().minors}
                      | {(cann, ms, minor) for cann, ms in [("20.0", "1.5.2"), ("3.3.0", "2.2.14"), ("5.0", "2.0.0")]
                         for minor in ("2.1", "2.4", "2.14")})


@pytest.mark.parametrize("cann,mindspore,torch_npu", _TARGET_SETS)
def test_no_suggestion_tells_the_user_to_call_a_name_the_target_lacks(cann, mindspore, torch_npu):
    derived = rules_for_targets(RULES, RunTargets.of(torch_npu, cann, mindspore))
    findings = [r for r in derived.rules if r.kind == "finding" and r.suggestion]
    assert len(findings) > 100
    for rule in findings:
        text = rule.render_suggestion(instead="", why="", api=rule.from_)
        assert missing_in_text(text, CannTarget(cann), torch_npu, mindspore) is None, (rule.source, text)
    # and the texts a suggestion was replaced with say why
    if cann == "20.0":
        replaced = [r for r in derived.rules if r.suggestion.startswith("Not for this target")]
        assert replaced and all("came with" in r.suggestion for r in replaced)


def test_npu354_flags_exactly_the_releases_whose_adapter_lacks_the_helpers():
    """NPU354 (old CANN in a launch script) and the CANN target agree: the releases it flags are
    those whose adapter lacks helpers the TensorFlow output calls."""
    written = sorted({h for rule in RULES.rules for h in written_helpers(rule)})
    rule = next(r for r in RULES.rules if r.code == "NPU354" and r.kind == "finding")
    families = {p.split("/", 1)[1].rstrip("*").rstrip(".") for p in FindingSpec.of(rule).patterns}
    assert families == {"20", "3"}
    for version in ("20.0", "20.2", "3.1.0", "3.3.0"):
        assert CannTarget(version).missing(written) is not None, version
    for version in ("5.0.2", "5.1.RC2", "6.3.RC2", "8.0.RC2"):
        assert CannTarget(version).missing(written) is None, version


# ----------------------------------------------------------------------------- where the target comes from


def test_the_target_comes_from_the_project_launch_scripts(tmp_path):
    (tmp_path / "requirements.txt").write_text("tensorflow==1.15.0\n")
    (tmp_path / "test").mkdir()
    (tmp_path / "test" / "train_8p.sh").write_text(
        "# was /usr/local/Ascend/ascend-toolkit/20.0.0/set_env.sh\n"
        "source /usr/local/Ascend/ascend-toolkit/latest/set_env.sh\n"
        "export PYTHONPATH=/usr/local/Ascend/tfplugin/5.0.4/tfplugin/python/site-packages:$PYTHONPATH\n")
    (tmp_path / "Dockerfile").write_text("ENV LD_LIBRARY_PATH=/usr/local/Ascend/nnae/5.1.RC2/lib64\n")
    assert project_cann_versions(str(tmp_path)) == [("5.1.RC2", "Dockerfile"), ("5.0.4", "test/train_8p.sh")]
    target = resolve("cann", "", "", [str(tmp_path / "train.py")])
    assert (target.spec, target.reason) == ("5.0.4", "the CANN install path 5.0.4 in test/train_8p.sh")
    assert resolve("cann", "8.0.RC2", "--cann-version", [str(tmp_path)]).spec == "8.0.RC2"
    (tmp_path / "test" / "train_8p.sh").unlink()
    (tmp_path / "Dockerfile").unlink()
    none = resolve("cann", "", "", [str(tmp_path)])
    assert (none.spec, none.reason) == ("", "the newest dated release (9.0): no CANN version found in the project")


def _cli(*args, cwd):
    """The command line in this process (tests/helpers.py), its output as text."""
    from helpers import cli_in_process

    r = cli_in_process(*args, cwd=cwd)
    r.stdout, r.stderr = r.stdout.decode(), r.stderr.decode()
    return r


def test_cli_option_configuration_and_reports(tmp_path):
    (tmp_path / "train.py").write_text("import tensorflow as tf\nsess = tf.Session()\n")
    (tmp_path / "run.sh").write_text("source /usr/local/Ascend/ascend-toolkit/20.1/set_env.sh\npython train.py\n")
    r = _cli("train.py", "--no-cache", cwd=tmp_path)
    assert "Target: CANN 20.1 (the CANN install path 20.1 in run.sh)." in r.stdout + r.stderr
    assert "NPU321" in r.stdout
    r = _cli("train.py", "--no-cache", "--cann-version", "5.0", "--format", "json", cwd=tmp_path)
    doc = json.loads(r.stdout)
    assert doc["targets"]["cann"] == {"cann": "5.0", "evidence": ["5.0"], "reason": "--cann-version"}
    assert doc["files"][0]["edits"]
    (tmp_path / "pyproject.toml").write_text('[tool.npu-migrate]\ncann-version = "9.0"\n')
    r = _cli("train.py", "--no-cache", "--format", "sarif", cwd=tmp_path)
    props = json.loads(r.stdout)["runs"][0]["invocations"][0]["properties"]
    assert props["targets"]["cann"]["cann"] == "9.0"
    assert props["targets"]["cann"]["reason"].startswith("cann-version in [tool.npu-migrate] of ")
    r = _cli("train.py", "--cann-version", "latest", cwd=tmp_path)
    assert r.returncode == 2
    assert "CANN 'latest' is not a CANN version (such as 5.0, 5.0.4, 8.0.RC2 or 20.1)" in r.stderr
