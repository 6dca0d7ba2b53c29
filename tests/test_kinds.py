"""The rule kind is the unit of code: one module of npu_migrate/kinds/ per TOML array of tables,
owning its keys, checks, index and words, and naming the code that applies its rules."""

from __future__ import annotations

from pathlib import Path

import pytest

import npu_migrate
from npu_migrate.explain import explain
from npu_migrate.kinds import KINDS
from npu_migrate.prefilter import rule_requirements
from npu_migrate.rules import RuleError, build_ruleset, default_rules

ROOT = Path(npu_migrate.__file__).parent.parent
RULES = default_rules()


def test_each_kind_is_one_module_of_its_own_name():
    for name, kind in KINDS.items():
        assert kind.name == name
        assert (ROOT / "npu_migrate" / "kinds" / f"{name}.py").is_file()


def test_the_prefilter_knows_every_kind_through_its_module():
    for rule in RULES.rules:
        assert rule_requirements(rule) is not None, rule.source


@pytest.mark.parametrize("code, module, applied_by", [
    ("NPU105", "npu_migrate/kinds/device.py", "npu_migrate.codemods.torch.literals:LiteralRewrites:"),
    ("NPU101", "npu_migrate/kinds/method.py", "npu_migrate.codemods.torch.methods:MethodRewrites:"),
    ("NPU305", "npu_migrate/kinds/finding.py", "npu_migrate.codemods.findings:FindingVisitor:"),
])
def test_explain_names_the_kind_and_the_code_that_applies_it(code, module, applied_by):
    text = explain(RULES, code)
    assert f"kind: [[{module.rsplit('/', 1)[1][:-3]}]], {module}\n" in text
    emitted = text.split("Emitted by:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert [line for line in emitted if line.startswith(f"  {applied_by}")], emitted


def test_a_kind_checks_its_own_keys():
    with pytest.raises(RuleError, match=r"'from' and 'to' must be identifiers"):
        build_ruleset([("x.toml", {"method": [{"code": "NPU999", "message": "m", "from": "a.b", "to": "c",
                                               "examples": [{"before": "x.a()", "after": "x.c()"}]}]})])
    with pytest.raises(RuleError, match=r"unknown key 'members'"):
        build_ruleset([("x.toml", {"device": [{"code": "NPU999", "message": "m", "from": "cuda", "to": "npu",
                                               "members": ["a"], "examples": [{"before": "", "after": ""}]}]})])
    # a finding's `methods` was never read: an unknown key, not a silent no-op
    with pytest.raises(RuleError, match=r"unknown key 'methods'"):
        build_ruleset([("x.toml", {"finding": [{"code": "NPU999", "message": "m", "kind": "call", "severity": "info",
                                                "api": "a.b", "methods": ["c"],
                                                "examples": [{"flagged": "a.b()"}]}]})])
    # `unless_named` is read only by framework api findings (callrules' planner)
    with pytest.raises(RuleError, match=r"'unless_named' must be a list of name prefixes"):
        build_ruleset([("x.toml", {"finding": [{"code": "NPU999", "message": "m", "kind": "call", "severity": "info",
                                                "api": "a.b", "unless_named": ["aclnn"],
                                                "examples": [{"flagged": "a.b()"}]}]})])
    # [[backend]] applies `keywords` only: a `functions` key would be silently ignored
    with pytest.raises(RuleError, match=r"unknown key 'functions'"):
        build_ruleset([("x.toml", {"backend": [{"code": "NPU999", "message": "m", "from": "nccl", "to": "hccl",
                                                "functions": ["f"], "examples": [{"before": "", "after": ""}]}]})])


def test_each_call_kind_has_a_spec_of_its_own_holding_exactly_its_keys():
    """#27.2: the framework (call-level) kinds no longer share one union spec: each rule's spec is
    its kind's own CallSpec subclass, declared in the kind's module, whose fields are the keys
    the kind takes (`literal` for `from`; CallSpec's `apis` and `unknown_finding` where taken),
    so a reader of a field names the kind it belongs to (mypy checks it)."""
    import dataclasses

    from npu_migrate.kinds.base import CallSpec

    shared = {f.name for f in dataclasses.fields(CallSpec)}
    seen = {}
    for rule in RULES.rules:
        if isinstance(rule.spec, CallSpec):
            seen[rule.kind] = type(rule.spec)
    assert sorted(seen) == ["add_keyword", "argument", "call_config", "call_rename", "call_replace",
                            "device_dispatch", "entry_setup", "remove_import"]
    for kind, spec_type in seen.items():
        assert spec_type is not CallSpec and spec_type.__module__ == KINDS[kind].module, kind
        schema = KINDS[kind].schema
        keys = {"literal" if k == "from" else k for k in schema.required | schema.optional} - {
            "framework", "examples", "suggestion"}
        fields = {f.name for f in dataclasses.fields(spec_type)}
        assert fields - shared == keys - shared, kind  # its own fields are its keys, and only those
        assert keys <= fields, kind


_OUTSIDE = ("ascend-facts", "peer-tools", "shared/", "seeds/", "§")


def test_no_user_facing_text_cites_a_document_outside_the_repository():
    """Messages, suggestions and code docs say the fact itself or cite a public source."""
    texts = [(r.source, t) for r in RULES.rules for t in (r.message, r.suggestion)]
    texts += [(d.code, t) for d in RULES.docs.values() for t in (d.title, d.why, d.fix)]
    for path in (ROOT / "rules").glob("*.toml"):  # comments too: they ship in the wheel
        texts.append((path.name, path.read_text(encoding="utf-8")))
    for path in (ROOT / "npu_migrate").rglob("*.py"):
        texts.append((str(path), path.read_text(encoding="utf-8")))
    cited = [(where, word) for where, text in texts for word in _OUTSIDE if word in text]
    assert cited == []


def test_codes_reported_by_a_pass_are_data_with_examples():
    """ModelArts, notebook and NPU001 codes: a rule (severity, message, examples), not only a doc."""
    from npu_migrate.explain import code_kind

    for code in ["NPU001", "NPU201", "NPU204", "NPU210", "NPU216", "NPU375", "NPU376"]:
        assert code_kind(RULES, code) != "-", code
        assert all(r.examples for r in RULES.by_code(code))
    assert code_kind(RULES, "NPU204") == "rewrite"
    assert code_kind(RULES, "NPU211") == "warning"
    assert "Reported as: rewrite\n" in explain(RULES, "NPU204")


# ----------------------------------------------------------------------------- adding a kind

# A rule kind of its own, as a contributor would add one: this module, its TOML (with its
# examples) and nothing else. It rewrites a device label in calls of listed functions.
NEW_KIND_MODULE = '''
"""`[[device_label]]`: in calls of `calls`, the string literal `from` becomes `to`."""

from dataclasses import dataclass
from typing import Dict, List, Tuple

import libcst as cst

from npu_migrate.codes import applies
from npu_migrate.kinds.base import Kind, Rule, RuleError, register, schema
from npu_migrate.words import quoted


@dataclass(frozen=True)
class LabelSpec:  # the kind's own typed parameters
    calls: Tuple[str, ...]


LabelIndex = Dict[str, List[Rule]]  # called name -> its rules


def _spec(entry, label, framework):
    calls = entry["calls"]
    if not isinstance(calls, list) or not calls or not all(isinstance(c, str) for c in calls):
        raise RuleError(f"{label}: 'calls' must be a non-empty list of function names")
    return LabelSpec(tuple(calls))


def _new_index() -> LabelIndex:
    return {}


def _index(index: LabelIndex, rule: Rule) -> None:
    for name in rule.spec_of(LabelSpec).calls:
        index.setdefault(name, []).append(rule)


@applies("device_label")
class LabelRewrite(cst.CSTTransformer):
    def __init__(self, ctx, index: LabelIndex) -> None:
        super().__init__()
        self.ctx, self.index = ctx, index

    def leave_Call(self, original, updated):
        name = original.func.value if isinstance(original.func, cst.Name) else None
        args = list(updated.args)
        for rule in self.index.get(name, ()):
            for i, arg in enumerate(original.args):
                value = arg.value
                if isinstance(value, cst.SimpleString) and value.evaluated_value == rule.from_:
                    new = value.value[0] + rule.to + value.value[-1]
                    self.ctx.edit(rule, value, rule.render_message(), value.value, new)
                    args[i] = args[i].with_changes(value=cst.SimpleString(new))
        return updated.with_changes(args=args)


def _apply(module, ctx):
    return module.visit(LabelRewrite(ctx, ctx.rules.index_of(KIND)))


KIND = register(Kind(
    name="device_label",
    schema=schema(("from", "to", "calls"), ()),
    summary="a device label passed to listed functions",
    requirements=lambda rule: [quoted(rule.from_)],
    new_index=_new_index,
    index=_index,
    spec=_spec,
    apply=_apply,
))
'''

NEW_KIND_TOML = '''
[[code]]
code = "NPU990"
title = "A device label in a listed call"

[[device_label]]
code = "NPU990"
from = "nvidia"
to = "ascend"
calls = ["set_label"]
message = "device label `{from}` -> `{to}`"
examples = [
    { before = "set_label('nvidia')\\n", after = "set_label('ascend')\\n" },
    { before = "import torch\\nx = torch.zeros(1).cuda()\\nset_label(\\"nvidia\\", 'nvidia')\\n", after = "import torch\\nx = torch.zeros(1).npu()\\nset_label(\\"ascend\\", 'ascend')\\n" },
    { before = "other('nvidia')\\nset_label('gpu')\\n", after = "other('nvidia')\\nset_label('gpu')\\n" },
]
'''


@pytest.fixture
def new_kind(tmp_path, monkeypatch):
    """The kind above, as a module of its own (imported: it registers itself) and its TOML."""
    import importlib
    import sys

    from npu_migrate.kinds.base import unregister

    (tmp_path / "device_label_kind.py").write_text(NEW_KIND_MODULE, encoding="utf-8")
    (tmp_path / "device_label.toml").write_text(NEW_KIND_TOML, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("device_label_kind")
    yield module, tmp_path / "device_label.toml"
    unregister("device_label")
    sys.modules.pop("device_label_kind", None)


def test_a_kind_added_in_one_module_and_its_toml_loads_indexes_applies_is_explained_and_runs_its_examples(new_kind):
    """#27.2: adding a rule kind touches its module, its TOML and its examples, nothing else."""
    from npu_migrate.dispatch import migrate_source
    from npu_migrate.options import Options
    from npu_migrate.rules import load_rules
    from test_rule_examples import check_example

    module, toml = new_kind
    assert KINDS["device_label"] is module.KIND and module.KIND.module == "device_label_kind"
    rules = load_rules([toml])  # the built-in rules and the new file
    (rule,) = [r for r in rules.rules if r.kind == "device_label"]
    # its own spec type and its own index
    assert rule.spec_of(module.LabelSpec) == module.LabelSpec(("set_label",))
    assert rules.index_of(module.KIND) == {"set_label": [rule]}
    assert rules.index_of(KINDS["device"])["cuda"].code == "NPU105"  # the built-in kinds are still there
    # the prefilter knows it through its module; the engine applies it
    assert rule_requirements(rule) is not None
    result = migrate_source("import os\nset_label('nvidia')  # main\n", "train.py", Options(), rules)
    assert result.new_text == "import os\nset_label('ascend')  # main\n"
    assert [(e.code, e.before, e.after, e.span.line) for e in result.edits] == [("NPU990", "'nvidia'", "'ascend'", 2)]
    # explained: its kind's module and its applier, from the objects
    text = explain(rules, "NPU990")
    assert "    kind: [[device_label]], device_label_kind.py\n" in text
    assert "Emitted by:\n  device_label_kind:LabelRewrite:" in text
    # its examples run as every rule's do
    assert len(rule.examples) == 3
    for example in rule.examples:
        check_example(rules, rule, example)
    # without the module, the TOML is an unknown kind
    from npu_migrate.kinds.base import unregister

    unregister("device_label")
    with pytest.raises(RuleError, match=r"unknown rule kind \[\[device_label\]\]"):
        load_rules([toml])


# A kind of the PyTorch pass (codemods/torch/): its module registers the kind (keys, index,
# words) and its applier, a TorchKind the pass's one walk builds per file with the file's
# TorchState and calls with no line of the walk changed.
NEW_TORCH_KIND_MODULE = '''
"""`[[cuda_label]]`: a string literal `from` in a PyTorch file becomes `to`."""

from typing import Dict

import libcst as cst

from npu_migrate.codes import applies
from npu_migrate.codemods.torch.state import TorchKind, TorchState
from npu_migrate.kinds.base import Kind, Rule, register, schema
from npu_migrate.words import quoted


def _index(index: Dict[str, Rule], rule: Rule) -> None:
    index[rule.from_] = rule


KIND = register(Kind(
    name="cuda_label",
    schema=schema(("from", "to"), ()),
    summary="a string literal of a PyTorch file",
    requirements=lambda rule: [quoted(rule.from_)],
    new_index=dict,
    index=_index,
))


@applies("cuda_label")
class LabelKind(TorchKind):
    def __init__(self, state: TorchState) -> None:
        super().__init__(state)
        self.index: Dict[str, Rule] = self.ctx.rules.index_of(KIND)

    def leave_SimpleString(self, original, updated):
        rule = self.index.get(original.evaluated_value)
        if rule is None or self.state.shown:  # not in print(...): the walk's typed state
            return updated
        new = original.value[0] + rule.to + original.value[-1]
        self.ctx.edit(rule, original, rule.render_message(), original.value, new)
        return updated.with_changes(value=new)
'''

NEW_TORCH_KIND_TOML = '''
[[code]]
code = "NPU991"
title = "A CUDA label"

[[cuda_label]]
code = "NPU991"
from = "cuda-label"
to = "npu-label"
message = "label `{from}` -> `{to}`"
examples = [
    { before = "import torch\\nx = torch.zeros(1).cuda()\\ny = 'cuda-label'\\n", after = "import torch\\nx = torch.zeros(1).npu()\\ny = 'npu-label'\\n" },
    { before = "import torch\\nprint('cuda-label')\\n", after = "import torch\\nprint('cuda-label')\\n" },
]
'''


@pytest.fixture
def new_torch_kind(tmp_path, monkeypatch):
    import importlib
    import sys

    from npu_migrate.codemods.torch.state import TORCH_KINDS
    from npu_migrate.kinds.base import unregister

    (tmp_path / "cuda_label_kind.py").write_text(NEW_TORCH_KIND_MODULE, encoding="utf-8")
    (tmp_path / "cuda_label.toml").write_text(NEW_TORCH_KIND_TOML, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    before = list(TORCH_KINDS)
    module = importlib.import_module("cuda_label_kind")
    yield module, tmp_path / "cuda_label.toml"
    TORCH_KINDS[:] = before
    unregister("cuda_label")
    sys.modules.pop("cuda_label_kind", None)


def test_a_kind_of_the_torch_pass_added_in_one_module_is_handed_the_walks_state_and_called(new_torch_kind):
    """#27.2: the torch pass's kinds are objects handed a typed state by the one walk, registered
    (not listed): a new one is its module and its TOML, and runs beside the built-in kinds."""
    from npu_migrate.codemods.torch import walk_class
    from npu_migrate.dispatch import migrate_source
    from npu_migrate.options import Options
    from npu_migrate.rules import load_rules
    from test_rule_examples import check_example

    module, toml = new_torch_kind
    assert walk_class().KINDS[-1] is module.LabelKind
    rules = load_rules([toml])
    (rule,) = [r for r in rules.rules if r.kind == "cuda_label"]
    source = "import torch\nx = torch.zeros(1).cuda()\ny = 'cuda-label'\nprint('cuda-label')\n"
    result = migrate_source(source, "train.py", Options(), rules)
    assert [(e.code, e.before, e.after, e.span.line) for e in result.edits] == [
        ("NPU108", "", "import torch_npu", 2), ("NPU101", "cuda", "npu", 2),
        ("NPU991", "'cuda-label'", "'npu-label'", 3)]
    assert result.new_text == ("import torch\nimport torch_npu  # noqa: F401\nx = torch.zeros(1).npu()\n"
                               "y = 'npu-label'\nprint('cuda-label')\n")
    text = explain(rules, "NPU991")
    assert "    kind: [[cuda_label]], cuda_label_kind.py\n" in text
    assert "Emitted by:\n  cuda_label_kind:LabelKind:" in text
    for example in rule.examples:
        check_example(rules, rule, example)


def test_two_torch_kinds_hooking_one_node_must_be_ordered_by_the_walk(new_torch_kind):
    """A second kind on the same node: which runs first changes the output, so the walk must
    say it (TorchTransformer defines the hook); building a walk that does not is an error."""
    from npu_migrate.codemods.torch import walk_class
    from npu_migrate.codemods.torch.state import TorchKind

    class Clash(TorchKind):
        def leave_SimpleString(self, original, updated):
            return updated

    with pytest.raises(TypeError, match="LabelKind and Clash both define leave_SimpleString: "
                                        "TorchTransformer must define it and call them in order"):
        walk_class()
