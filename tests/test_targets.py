"""The torch_npu target: the version table, where the target comes from, and that
the tool never writes a `torch.npu.`/`torch_npu.` name the target release lacks."""

from __future__ import annotations

import functools
import importlib.util
import json
import re
import subprocess
from pathlib import Path

import libcst as cst
import pytest

from npu_migrate.dispatch import migrate_source
from npu_migrate.imports import ImportTable, dotted_name
from npu_migrate.kinds.api import members as api_members
from npu_migrate.options import Options
from npu_migrate.rules import default_rules
from npu_migrate.targets import TargetError, resolve
from npu_migrate.targets.torch_npu import Target, load_table, releases_for

ROOT = Path(__file__).resolve().parent.parent
TABLE = load_table()
RULES = default_rules()


# ----------------------------------------------------------------------------- the table


def test_table_facts_from_the_wheels():
    """What the issue names, as read from the wheels (rules/targets/torch_npu.toml)."""
    assert set(TABLE.minors) == {"2.1", "2.3", "2.4", "2.5", "2.6", "2.7", "2.8", "2.9", "2.10", "2.11", "2.12",
                                 "2.13", "2.14"}
    npu = lambda r: {n for n, rs in TABLE.names.items() if r in rs and n.count(".") == 2 and n.startswith("torch_npu.npu.")}
    # the oldest 2.1 build lacks the CUDA-graph API and has the sdp switches 2.14 dropped
    assert {"torch_npu.npu.NPUGraph", "torch_npu.npu.graph", "torch_npu.npu.make_graphed_callables",
            "torch_npu.npu.MemPool", "torch_npu.npu.ipc_collect", "torch_npu.npu.StreamContext"} <= npu("2.14.0") - npu("2.1.0.post8")
    assert {"torch_npu.npu.sdp_kernel", "torch_npu.npu.enable_flash_sdp"} <= npu("2.1.0.post8") - npu("2.14.0")
    for release in TABLE.releases:
        assert "torch.distributed.Backend.HCCL" in TABLE.names and release in TABLE.names["torch.distributed.Backend.HCCL"]
        assert release in TABLE.names["torch.distributed.is_hccl_available"]
        assert release in TABLE.names["torch_npu.npu.amp.GradScaler"]


def test_target_semantics():
    assert releases_for("2.1", TABLE)[0] == "2.1.0.post8"
    assert releases_for("2.1.0.post17", TABLE) == ("2.1.0.post17",)
    assert releases_for("2.9.0.*", TABLE) == tuple(r for r in TABLE.minors["2.9"] if r != "2.9.1")
    assert releases_for("2.9.0", TABLE) == ("2.9.0",) and releases_for("2.1.*", TABLE) == TABLE.minors["2.1"]
    missing = Target("2.1").missing("torch.npu.NPUGraph")
    assert missing.lacking == ("2.1.0.post8", "2.1.0.post10") and missing.added_in == "2.1.0.post12"
    assert Target("2.1.0.post12").missing("torch.npu.NPUGraph") is None
    assert Target("").missing("torch.npu.NPUGraph") is None  # the default: the newest
    assert Target("2.14").missing("torch.npu.sdp_kernel") is not None
    assert Target("2.1").missing("torch.npu.synchronize") is None
    assert Target("2.1").missing("torch.npu.Stream.synchronize") is None  # members of members: not tracked
    with pytest.raises(TargetError, match=r"torch_npu 2\.2 is not a release .*\(known: 2\.1, 2\.3, "):
        releases_for("2.2", TABLE)


def _load_tool():
    spec = importlib.util.spec_from_file_location("target_tables", ROOT / "scripts" / "target_tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Downloaded if missing (once, into the wheel cache): the oldest and newest 2.1 builds and 2.14.
SAMPLE = ("2.1.0.post8", "2.1.0.post17", "2.14.0")


@pytest.mark.slow
def test_committed_table_matches_the_wheels():
    """Regenerating from the cached wheels gives the committed table: byte for byte when every
    release is cached, else release by release for those that are (SAMPLE is downloaded)."""
    tool = _load_tool()
    cache = tool.cache_dir()
    for version in SAMPLE:
        try:
            tool.download(version, cache)
        except (subprocess.CalledProcessError, SystemExit) as exc:
            pytest.skip(f"cannot download torch-npu {version} (offline?): {exc}")
    releases = tool.committed_releases()
    cached = [r for r in releases if tool.cached_wheel(r, cache) is not None]
    text = tool.TABLE.read_text(encoding="utf-8")
    if cached == releases:
        assert tool.compute(releases, cache, fetch=False) == text, "run python scripts/target_tables.py"
        return
    for release in cached:
        surface = tool.surface(tool.cached_wheel(release, cache))
        assert surface == {n for n, rs in TABLE.names.items() if release in rs}, release


# ----------------------------------------------------------------------------- the target of a run


@pytest.mark.parametrize("name,text,expected", [
    ("requirements.txt", "numpy\ntorch==2.1.0\n", ("2.1", "torch==2.1.0 in requirements.txt")),
    ("requirements-train.txt", "torch~=2.1\n", ("2.1", "torch~=2.1 in requirements-train.txt")),
    ("requirements.txt", "torch>=2.1,<2.2\n", ("2.1", "torch>=2.1,<2.2 in requirements.txt")),
    ("requirements.txt", "torch==2.1.0+cpu\n", ("2.1", "torch==2.1.0 in requirements.txt")),
    ("requirements.txt", "torch==2.9.0\n", ("2.9.0.*", "torch==2.9.0 in requirements.txt")),
    ("requirements.txt", "torch>=2.1\n", ("", "the newest release: no torch or torch-npu pin found; a lower bound alone is none")),
    ("requirements.txt", "torch==2.1.0\ntorch-npu==2.1.0.post17\n", ("2.1.0.post17", "torch-npu==2.1.0.post17 in requirements.txt")),
    ("pyproject.toml", '[project]\nname = "x"\ndependencies = ["torch==2.4.0"]\n', ("2.4", "torch==2.4.0 in pyproject.toml")),
    ("setup.py", "from setuptools import setup\nREQS = ['torch==2.3.1', 'numpy']\nsetup(name='x', install_requires=REQS)\n",
     ("2.3", "torch==2.3.1 in setup.py")),
    ("setup.cfg", "[options]\ninstall_requires =\n    torch==2.5.1\n", ("2.5", "torch==2.5.1 in setup.cfg")),
    ("environment.yml", "dependencies:\n  - python=3.10\n  - pytorch=2.1\n", ("2.1", "pytorch==2.1.* in environment.yml")),
    ("environment.yml", "dependencies:\n  - pip:\n    - torch==2.6.0\n", ("2.6", "torch==2.6.0 in environment.yml")),
    # demucs 4.1.0's pyproject.toml: the upper bound is for Intel Macs only (no torch wheels for
    # them after 2.2), a platform no Ascend NPU is in: no pin (it made the target torch_npu 2.1).
    ("pyproject.toml", '[project]\nname = "demucs"\ndependencies = [\n'
     '    "torch>=2.1; sys_platform != \'darwin\' or platform_machine != \'x86_64\'",\n'
     '    # torch dropped Intel macOS wheels after 2.2 (and torch <2.3 predates numpy 2).\n'
     '    "torch>=2.1,<2.3; sys_platform == \'darwin\' and platform_machine == \'x86_64\'",\n]\n',
     ("", "the newest release: no torch or torch-npu pin found; a lower bound alone is none")),
    ("requirements.txt", "torch==2.4.0; sys_platform == 'linux' and python_version >= '3.9'\ntorch==2.2.2; platform_machine == 'arm64'\n",
     ("2.4", "torch==2.4.0 in requirements.txt")),
])
def test_target_read_from_the_project(tmp_path, name, text, expected):
    (tmp_path / ".git").mkdir()
    (tmp_path / name).write_text(text)
    (tmp_path / "src").mkdir()
    target = resolve("torch_npu", "", "", [str(tmp_path / "src")])
    assert (target.spec, target.reason) == expected


def test_setup_py_is_read_not_run(tmp_path):
    marker = tmp_path / "ran"
    (tmp_path / "setup.py").write_text(
        f"open({str(marker)!r}, 'w').close()\nfrom setuptools import setup\nsetup(install_requires=['torch==2.1.0'])\n")
    assert resolve("torch_npu", "", "", [str(tmp_path)]).spec == "2.1"
    assert not marker.exists()


def test_a_project_pinning_torch_2_1_is_migrated_for_2_1(tmp_path, run_cli):
    """No option: requirements.txt says torch==2.1.0, so CUDAGraph stays (2.1.0.post8 has no
    NPUGraph) and is reported; the summary, JSON and SARIF say why."""
    (tmp_path / "requirements.txt").write_text("torch==2.1.0\n")
    src = "import torch\ng = torch.cuda.CUDAGraph()\ntorch.cuda.synchronize()\n"
    (tmp_path / "train.py").write_text(src)
    r = run_cli("train.py", "--diff", cwd=tmp_path)
    assert r.stdout.decode().splitlines()[-2:] == ["-torch.cuda.synchronize()", "+torch.npu.synchronize()"]
    err = r.stderr.decode()
    assert "train.py:2:5: NPU320 [error] `torch.cuda.CUDAGraph` is not rewritten: torch_npu 2.1 (2.1.0.post8 and " \
           "2.1.0.post10) lacks `torch.npu.NPUGraph`; it came with torch_npu 2.1.0.post12" in err
    assert "Target: torch_npu 2.1 (torch==2.1.0 in requirements.txt)." in err
    doc = json.loads(run_cli("train.py", "--format", "json", cwd=tmp_path).stdout)
    assert doc["target"] == {"torch_npu": "2.1", "releases": list(TABLE.minors["2.1"]),
                             "reason": "torch==2.1.0 in requirements.txt"}
    sarif = json.loads(run_cli("train.py", "--format", "sarif", cwd=tmp_path).stdout)
    assert sarif["runs"][0]["invocations"][0]["properties"]["target"]["reason"] == "torch==2.1.0 in requirements.txt"
    # the option wins over the project, and the configuration names itself
    r = run_cli("train.py", "--diff", "--torch-npu-version", "2.14", cwd=tmp_path)
    assert "+g = torch.npu.NPUGraph()" in r.stdout.decode()
    assert "Target: torch_npu 2.14 (--torch-npu-version)." in r.stderr.decode()
    (tmp_path / "pyproject.toml").write_text('[tool.npu-migrate]\ntorch-npu-version = "2.5"\n')
    r = run_cli("train.py", "--diff", cwd=tmp_path)
    assert "+g = torch.npu.NPUGraph()" in r.stdout.decode()
    assert "Target: torch_npu 2.5 (torch-npu-version in [tool.npu-migrate] of " in r.stderr.decode()
    r = run_cli("train.py", "--torch-npu-version", "2.2", cwd=tmp_path)
    assert r.returncode == 2 and b"torch_npu 2.2 is not a release" in r.stderr


# ----------------------------------------------------------------------------- what is written


@functools.lru_cache(maxsize=None)
def _written_npu_names(text: str) -> frozenset:
    """Every qualified name under torch.npu / torch_npu a migrated file references, resolved
    through its imports (`import torch.npu as tc; tc.X`, `from torch.npu import X`). A function
    of the text alone, so kept per text: each target class asked it again of the same sources
    and of outputs that most targets share (a third of each target's CPU)."""
    module = cst.parse_module(text)
    table = ImportTable.of(module)
    names = set()

    class Refs(cst.CSTVisitor):
        def visit_Attribute(self, node):
            q = table.resolve(node)
            if q:
                names.add(q)

        def visit_Name(self, node):
            q = table.resolve(node)
            if q:
                names.add(q)

        def visit_ImportFrom(self, node):
            module_name = dotted_name(node.module) if node.module is not None and not node.relative else None
            if module_name and not isinstance(node.names, cst.ImportStar):
                for alias in node.names:
                    names.add(f"{module_name}.{dotted_name(alias.name)}")

        def visit_Import(self, node):
            for alias in node.names:
                names.add(dotted_name(alias.name))

    module.visit(Refs())
    return frozenset(n for n in names if n and (n.startswith(("torch.npu.", "torch_npu.")) or n in ("torch.distributed.is_hccl_available", "torch.distributed.Backend.HCCL")))


def _corpus():
    """The fixtures and every rule example that uses torch (only those can get NPU names)."""
    for path in sorted((ROOT / "fixtures").rglob("*.py")):
        if not path.name.endswith(".expected.py"):
            yield str(path.relative_to(ROOT)), path.read_text(encoding="utf-8")
    for rule in RULES.rules:
        for i, ex in enumerate(rule.examples):
            for source in (ex.before, ex.flagged, ex.not_flagged):
                if source and ex.path.endswith(".py") and "torch" in source:
                    yield f"{rule.source}#{i}", source


CORPUS = list(_corpus())


def _target_classes():
    """Minor versions grouped by what they provide: targets that have the same names give the
    same results (every decision asks the table about a name), so one of each group runs."""
    groups = {}
    for minor in sorted(TABLE.minors, key=lambda m: tuple(map(int, m.split(".")))):
        key = frozenset(n for n, rs in TABLE.names.items() if all(r in rs for r in TABLE.minors[minor]))
        groups.setdefault(key, []).append(minor)
    return list(groups.values())


@pytest.mark.parametrize("minors", _target_classes(), ids=lambda ms: "+".join(ms))
@pytest.mark.slow
def test_every_written_name_exists_in_the_target(minors):
    """For every target, run the fixtures and every rule example; each torch.npu/torch_npu name
    in the output exists in every release of the target (rules/targets/torch_npu.toml)."""
    minor = minors[0]
    target = Target(minor)
    wrong = []
    for where, source in CORPUS:
        result = migrate_source(source, "example.py", Options.of(torch_npu_version=minor), RULES)
        if not result.changed:
            continue
        before = _written_npu_names(source) if "npu" in source else set()
        for name in sorted(_written_npu_names(result.new_text) - before):
            if target.missing(name) is not None:
                wrong.append(f"{where}: {name}")
    assert not wrong, "\n".join(wrong)
    assert len(CORPUS) > 150


def test_default_target_rewrites_every_member_as_before():
    """The default (newest) target keeps every torch.cuda member and both renames."""
    from npu_migrate.targets.torch_npu import supported_rewrites

    rows = supported_rewrites(RULES, Target(""))
    assert not [r for r in rows if r[2] is not None]
    assert len([r for r in rows if r[0].startswith("torch.cuda.") and r[1].startswith("torch.npu.")]) >= 94


def test_the_rewrites_a_target_supports_are_listed_in_one_order_whatever_the_set_order(monkeypatch):
    """`rules --torch-npu-version 2.1` listed torch.cuda.stream and torch.cuda.Stream in the order
    their set iterated (it changed with PYTHONHASHSEED): names equal but for case are ordered too."""
    from npu_migrate.targets import torch_npu

    rule = next(r for r in RULES.rules if r.kind == "api" and {"stream", "Stream"} <= set(api_members(r) or ()))
    orders = []
    for members in (["stream", "Stream"], ["Stream", "stream"]):
        monkeypatch.setattr(torch_npu, "api_members", lambda r, members=members: members if r is rule else api_members(r))
        orders.append([row[0] for row in torch_npu.supported_rewrites(RULES, Target("2.1"))])
    assert orders[0] == orders[1]
    assert orders[0].index(f"{rule.from_}.Stream") < orders[0].index(f"{rule.from_}.stream")


def test_rules_lists_what_a_target_supports(run_cli, tmp_path):
    r = run_cli("rules", "--torch-npu-version", "2.1", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode().splitlines()
    assert out[0] == ("torch_npu 2.1: torch-npu 2.1.0.post8, 2.1.0.post10, 2.1.0.post12, 2.1.0.post13, 2.1.0.post17 "
                      "(--torch-npu-version)")
    assert "  torch.cuda.synchronize -> torch.npu.synchronize" in out
    assert "  torch.cuda.CUDAGraph -> torch.npu.NPUGraph  (came with torch_npu 2.1.0.post12; lacking in " \
           "2.1.0.post8, 2.1.0.post10)" in out
    newest = run_cli("rules", "--torch-npu-version", "2.14", cwd=tmp_path).stdout.decode()
    assert "are not" not in newest and "  torch.cuda.CUDAGraph -> torch.npu.NPUGraph" in newest.splitlines()
    bad = run_cli("rules", "--torch-npu-version", "3.0", cwd=tmp_path)
    assert bad.returncode == 2 and b"torch_npu 3.0 is not a release" in bad.stderr


def test_a_target_is_data_it_imports_no_front_end_pass_engine_or_edge():
    """targets/ reads tables and the project's files; what it needs of a dependency list lives in
    the ground module project_files.py (a target once reused the requirements front end, which
    closed a run-time cycle through the notebook front end and the engine)."""
    from test_layers import import_graph  # (the graph test_layers built in this process)

    graph = import_graph()
    reached, todo = set(), [m for m in graph if m == "npu_migrate.targets" or m.startswith("npu_migrate.targets.")]
    while todo:
        module = todo.pop()
        if module not in reached:
            reached.add(module)
            todo += graph[module]
    forbidden = ("npu_migrate.frontends", "npu_migrate.codemods", "npu_migrate.engine", "npu_migrate.passes",
                 "npu_migrate.dispatch", "npu_migrate.pipeline", "npu_migrate.config", "npu_migrate.cli")
    assert sorted(m for m in reached if m.startswith(forbidden)) == []
    # and the engine applies the rules it is given: the pipeline derives the targets' view
    assert not any(m.startswith("npu_migrate.targets") for m in graph["npu_migrate.engine"])


# ----------------------------------------------------------------------------- diff, findings and target agree

# torch.cuda's public submodules (torch 2.x: torch/cuda/*.py and packages), with a member of each
# that has no NPU twin of that name; those whose twin torch_npu.npu.<name> the table lists are
# walked member by member from the table.
CUDA_SUBMODULES = {"amp": "autocast", "comm": "broadcast", "gds": "GdsFile", "graphs": "graph",
                   "jiterator": "_create_jit_fn", "memory": "memory_allocated", "nccl": "all_reduce",
                   "nvtx": "range_push", "profiler": "start", "random": "manual_seed", "sparse": "sum",
                   "streams": "Stream", "tunable": "enable"}
_NPU_NAME = re.compile(r"\b(?:torch\.npu|torch_npu)(?:\.\w+)+")


# CUDA names of twin submodules that no torch_npu release has under that name.
CUDA_ONLY = {"memory": "_record_memory_history", "graphs": "CUDAGraph", "streams": "_EventBase"}


def _submodule_members(table):
    """(submodule, member): every name the table lists under torch_npu.npu.<submodule> (and one
    it lacks), and the member above for submodules without an NPU twin."""
    out = []
    for sub, example in sorted(CUDA_SUBMODULES.items()):
        prefix = f"torch_npu.npu.{sub}."
        members = sorted({n[len(prefix):] for n in table.names if n.startswith(prefix) and "." not in n[len(prefix):]})
        out += [(sub, m) for m in (members + [CUDA_ONLY.get(sub, example)] if members else [example])]
    return out


def _forms(sub, member):
    """The ways code names torch.cuda.<sub>.<member>: (text, line of the use)."""
    return [(f"import torch\nx = torch.cuda.{sub}.{member}\n", 2),
            (f"import torch.cuda.{sub} as m\nx = m.{member}\n", 2),
            (f"from torch.cuda.{sub} import {member}\nx = {member}\n", 1),
            (f"from torch.cuda import {sub}\nx = {sub}.{member}\n", 2)]


@pytest.mark.slow
def test_every_torch_cuda_submodule_member_is_migrated_or_reported_as_the_target_says():
    """#30.14/#30.15: under every target (one of each group with the same names), each use of a torch.cuda submodule's member is either
    rewritten into names the target has (and not reported as left), or left and reported; never
    rewritten while NPU320 says it is not, never silent."""
    table = load_table()
    problems = []
    for minor in [minors[0] for minors in _target_classes()]:  # one target of each group (see there)
        target = Target(minor)
        for sub, member in _submodule_members(table):
            for text, line in _forms(sub, member):
                result = migrate_source(text, "m.py", Options.of(torch_npu_version=minor), RULES)
                written = result.new_text or text
                held = [f for f in result.findings if f.code == "NPU320"]
                lacking = [n for n in _NPU_NAME.findall(written) if target.missing(n) is not None]
                if result.changed and (held or lacking):
                    problems.append((minor, text, "rewritten but", [f.message for f in held] or lacking))
                elif not result.changed and not result.findings:
                    problems.append((minor, text, "silent"))
                elif result.changed and f"torch.cuda.{sub}" in written.splitlines()[line - 1] and not result.findings:
                    problems.append((minor, text, "half rewritten, not reported"))
                elif not result.changed and target.missing(f"torch_npu.npu.{sub}.{member}") is None \
                        and f"torch_npu.npu.{sub}.{member}" in table.names:
                    problems.append((minor, text, "the target has its twin, yet it is left"))
    assert problems == []


def test_the_nvtx_suggestion_offers_only_the_mstx_calls_the_target_has():
    """#30.14: torch_npu 2.1 has torch_npu.npu.mstx but not its range_push/range_pop (2.7.1.post8)."""
    text = "import torch\ntorch.cuda.nvtx.range_push('fwd')\n"
    old = migrate_source(text, "t.py", Options.of(torch_npu_version="2.1"), RULES).findings
    new = migrate_source(text, "t.py", Options.of(torch_npu_version="2.14"), RULES).findings
    assert [f.code for f in old] == [f.code for f in new] == ["NPU301"]
    assert new[0].suggestion == ("Use torch_npu.npu.mstx (mark, range_push, range_pop, range_start, range_end) "
                                 "for ranges the Ascend profiler shows.")
    assert old[0].suggestion.startswith("Use torch_npu.npu.mstx (mark, range_start, range_end) for ranges the "
                                        "Ascend profiler shows. Not for this target: torch_npu 2.1 ")
    assert "lacks `torch_npu.npu.mstx.range_push`; it came with torch_npu 2.7.1.post8" in old[0].suggestion


def test_the_summary_names_the_targets_that_applied(tmp_path, run_cli):
    """#25.13: a TensorFlow-only run names the CANN target, a MindSpore-only run the MindSpore
    target, neither names torch_npu; a run over all three names the three."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "tf1.py").write_text("import tensorflow as tf\nsess = tf.Session(config=tf.ConfigProto())\n")
    (tmp_path / "ms1.py").write_text('from mindspore import context\ncontext.set_context(device_target="GPU")\n')
    (tmp_path / "pt1.py").write_text("import torch\ntorch.cuda.synchronize()\n")

    def targets(*args):
        r = run_cli(*args, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        return [line for line in r.stdout.decode().splitlines() if line.startswith("Target:")]

    torch_npu = "Target: torch_npu 2.14 (the newest release: no torch or torch-npu pin found; a lower bound alone is none)."
    cann = "Target: CANN 9.0 (the newest dated release (9.0): no CANN version found in the project)."
    assert targets("tf1.py") == [cann]
    assert targets("ms1.py", "--mindspore-version", "2.7") == ["Target: MindSpore 2.7 (--mindspore-version)."]
    assert targets("pt1.py", "--cann-version", "5.0") == [torch_npu]
    assert targets(".", "--mindspore-version", "2.7") == [
        torch_npu, cann, "Target: MindSpore 2.7 (--mindspore-version)."]


def _kept_import_forms(module, members, blocker):
    """Files that use `members` of `module` and `blocker` through one import, each use on a line
    of its own: (text, {line: member})."""
    short = module.rsplit(".", 1)[-1]
    forms = []
    for head, spell in ((f"import {module} as m", "m.{}"),
                        (f"from {module.rsplit('.', 1)[0]} import {short}", short + ".{}"),
                        (f"from {module} import {', '.join(members + [blocker])}", "{}")):
        lines = [head] + [f"x{i} = {spell.format(name)}" for i, name in enumerate(members + [blocker])]
        forms.append(("\n".join(lines) + "\n", {i + 2: name for i, name in enumerate(members)}))
    return forms


@pytest.mark.parametrize("minor", ["2.1", "2.14"])
@pytest.mark.parametrize("module,blocker", [("torch.cuda", "get_arch_list"), ("torch.cuda", "jiterator"),
                                            ("torch.cuda.memory", "_record_memory_history"),
                                            ("torch.cuda", "CUDAGraph")])
def test_an_import_kept_for_one_name_keeps_no_other_name_on_cuda_unreported(minor, module, blocker):
    """#25 (left over from #30.14): `import torch.cuda as m` (`from torch import cuda`, `from
    torch.cuda import a, b`) used for several names, one of which cannot move (no NPU twin, or
    none in the target), stays as it is; every other name used through it then stays on CUDA,
    and each such use is reported at its line (NPU323) -- or rewritten, never silent."""
    table = load_table()
    target = Target(minor)
    prefix = "torch_npu.npu.memory." if module.endswith(".memory") else "torch_npu.npu."
    twins = sorted(n[len(prefix):] for n in table.names
                   if n.startswith(prefix) and "." not in n[len(prefix):] and target.missing(n) is None)
    rule = RULES.api.get(module)
    members = [m for m in twins if not m.startswith("_") and m != blocker
               and (module != "torch.cuda" or m in (api_members(rule[0]) or ()))][:40]
    assert len(members) >= 10
    for text, uses in _kept_import_forms(module, members, blocker):
        result = migrate_source(text, "m.py", Options.of(torch_npu_version=minor), RULES)
        written = (result.new_text or text).splitlines()
        reported = {f.span.line for f in result.findings}
        silent = [name for line, name in uses.items() if written[line - 1] == text.splitlines()[line - 1]
                  and line not in reported]
        assert silent == [], (text.splitlines()[0], silent)
        kept = {f.span.line for f in result.findings if f.code == "NPU323"}
        # CUDAGraph has its twin (NPUGraph) from 2.1.0.post12 on: there the import moves whole.
        if blocker == "CUDAGraph" and minor == "2.14":
            assert result.new_text is not None and "torch.cuda" not in result.new_text and not kept, text
        else:
            assert written[0] == text.splitlines()[0] and kept == set(uses), text.splitlines()[0]


@pytest.mark.parametrize("names", ["nn, cuda", "cuda, nn", "nn, optim, cuda", "cuda, nn as N"])
def test_a_kept_import_names_the_member_that_keeps_it_not_a_name_that_needs_no_twin(names):
    """`from torch import nn, cuda` stays as it is because `cuda.get_arch_list` cannot move:
    NPU323 names that member, not `torch.nn` (which is no CUDA name and moves nowhere)."""
    text = f"import torch\nfrom torch import {names}\nx = cuda.is_available()\ny = cuda.get_arch_list()\n"
    result = migrate_source(text, "m.py", Options(), RULES)
    assert result.new_text is None
    assert [(f.code, f.span.line, f.message) for f in result.findings if f.code == "NPU323"] == [
        ("NPU323", 3, "`cuda.is_available` stays `torch.cuda.is_available` (CUDA): its import is kept as it is "
                      "because `torch.cuda.get_arch_list`, which the same import brings, cannot move to the NPU")]


def test_the_tables_releases_are_ordered_as_packaging_orders_them_without_importing_it():
    """torch_npu._order's key for plain releases (`2.1`, `2.7.1.post11`) orders and equates them
    as packaging's Version does: every release and minor of the table, and edge cases (trailing
    zeros, post 0, two-digit parts); any other text is ordered by Version itself."""
    import itertools

    from packaging.version import Version

    from npu_migrate.targets import torch_npu

    table = torch_npu.load_table()
    texts = list(table.releases) + list(table.minors) + [
        "2.1", "2.1.0", "2.1.0.0", "2.10", "2.9.1", "2.1.0.post10", "2.1.0.post9", "2.1.0.post0", "1.0", "0",
        "0.0", "10.0.0.post0", "2.01", "3"]
    assert torch_npu._order(texts) is torch_npu._plain_key
    key = torch_npu._plain_key
    for a, b in itertools.product(texts, repeat=2):
        assert ((key(a) < key(b)), (key(a) == key(b))) == ((Version(a) < Version(b)), (Version(a) == Version(b))), (a, b)
    assert list(table.releases) == sorted(table.releases, key=Version)
    assert table.newest_minor() == max(table.minors, key=Version)
    for other in ("2.1rc1", "2.1.0.dev1", "2.1+local", "v2.1", "2.1.post", "2.1.0-post1"):
        assert torch_npu._order(["2.1", other]) is torch_npu._version, other
