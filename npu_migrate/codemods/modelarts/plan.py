"""Which scripts are entry scripts, and what to do to one (decided on the original tree, where
the findings of this pass are reported: rules/modelarts.toml)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import libcst as cst

from ...context import Context
from ...imports import dotted_name
from ...model import MODELARTS_DATA_DIR, MODELARTS_OUTPUT_DIR
from ..syntax import is_main_guard, node_code
from .arguments import URL_ARGS, generated_argument, is_data_argument, is_output_argument, output_rank
from .script import ScriptAnalysis
from ...codes import emits

# Scripts named like this are not entry scripts unless named with --entry (model-zoo layout, and
# the data preparation run by hand before a job: split, download, prepare, extract).
HELPER_SCRIPT_WORDS = {"eval", "evaluate", "evaluation", "export", "infer", "inference", "predict", "preprocess",
                       "postprocess", "convert", "demo", "benchmark", "onnx", "om", "split", "download", "prepare",
                       "prep", "fetch", "extract", "unzip", "untar"}


# The codes this pass reports (rules/modelarts.toml gives their severity, message and
# suggestion: ctx.rules.reported(code)).
ALREADY_ADAPTED, NO_DATA_ARG, REQUIRED_DATA_ARG, OTHER_CLI = "NPU210", "NPU211", "NPU212", "NPU213"
NO_OUTPUT_ARG, UNKNOWN_CONFIGURED_ARG, PARSED_ELSEWHERE = "NPU214", "NPU215", "NPU216"
FIXED_DOWNLOAD, POSITIONAL_ARG, HANDED_OVER = "NPU217", "NPU218", "NPU219"



def _report(ctx: Context, code: str, node: cst.CSTNode, api: str, extra: str = "", **values) -> None:
    """A finding of this pass, its texts from rules/modelarts.toml filled in with `values`."""
    rule = ctx.rules.reported(code)
    values = {"data_dir": ctx.options.modelarts_data_dir, "output_dir": ctx.options.modelarts_output_dir,
              "api": api, **values}
    ctx.finding(rule, node, api, message=rule.render_message(**values) + extra,
                suggestion=rule.render_suggestion(**values))


def named_with_entry(ctx: Context) -> bool:
    """Whether --entry names this file."""
    here = {os.path.abspath(ctx.path), os.path.realpath(ctx.path)}
    return any(os.path.abspath(p) in here or os.path.realpath(p) in here for p in ctx.options.modelarts_entry_files)


def entry_script_by_choice(ctx: Context) -> Optional[bool]:
    """True/False when the caller or --entry decides; None: decided by the code."""
    if ctx.entry_script is not None:
        return ctx.entry_script
    if ctx.options.modelarts_entry_files:
        return named_with_entry(ctx)
    return None


def may_be_entry_script(module: cst.Module) -> bool:
    """A cheap look at the top level (most files of a tree are not entry scripts): a main block,
    or `x = ...ArgumentParser(...)`. ScriptAnalysis then decides with resolved imports. A main
    block that runs a test runner is a test module's, never a job's (`_runs_tests`)."""
    for stmt in module.body:
        if is_main_guard(stmt):
            return not _runs_tests(stmt, module)
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Assign) and isinstance(small.value, cst.Call) \
                        and (dotted_name(small.value.func) or "").endswith("ArgumentParser"):
                    return True
    return False


# Test runners: `unittest.main()`, absltest/googletest, `pytest.main([...])`, TensorFlow's
# `tf.test.main()` (tf.compat.v1.test too), also as `sys.exit(...)`'s argument; a bare
# `test.main()` only where `test` is TensorFlow's (`from tensorflow.python.platform import test`):
# a project's own test.py may have a main() that a launcher runs after training.
_TEST_RUNNER = re.compile(r"^(?:(?:[\w.]+\.)?(?:unittest|absltest|googletest|pytest)|(?:tf|tensorflow)(?:\.\w+)*\.test)"
                          r"\.main$")


def _tensorflow_test_module(module: cst.Module) -> bool:
    """Whether the module imports TensorFlow's `test` module under that name at its top level."""
    for stmt in module.body:
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            if isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar) \
                    and (dotted_name(small.module) or "").split(".")[0] == "tensorflow" \
                    and any(a.asname is None and dotted_name(a.name) == "test" for a in small.names):
                return True
    return False


def _runs_tests(guard: cst.If, module: cst.Module) -> bool:
    """Whether the main block runs a test runner at its top level: running the file runs its
    tests (tensor2tensor 1.15.7's 43 `*_test.py` files end in `tf.test.main()`; adapted, each got
    the generated module, an import, `modelarts_setup()` and NPU211/NPU214/NPU219 warnings)."""
    body = guard.body
    smalls = list(body.body) if isinstance(body, cst.SimpleStatementSuite) else [
        small for stmt in body.body if isinstance(stmt, cst.SimpleStatementLine) for small in stmt.body]
    for small in smalls:
        value = small.value if isinstance(small, cst.Expr) else None
        if isinstance(value, cst.Call) and (dotted_name(value.func) or "") in ("sys.exit", "exit") and value.args:
            value = value.args[0].value  # sys.exit(pytest.main([__file__]))
        name = dotted_name(value.func) or "" if isinstance(value, cst.Call) else ""
        if _TEST_RUNNER.match(name) or (name == "test.main" and _tensorflow_test_module(module)):
            return True
    return False


def helper_script(ctx: Context) -> bool:
    """eval.py, export.py, infer_onnx.py, split_data.py, ...: not entry scripts of a training job;
    nor a utility run by hand beside one (modelarts/project.py finds those once per run)."""
    stem = os.path.splitext(os.path.basename(ctx.path))[0].lower()
    words = set(re.split(r"[_\-.]", stem))
    if words & HELPER_SCRIPT_WORDS and not words & {"train", "training", "finetune", "pretrain"}:
        return True
    return os.path.abspath(ctx.path) in ctx.options.modelarts_utility_files


@dataclass
class Plan:
    """What to do to one entry script, decided on the original tree."""

    keywords: Tuple[Tuple[str, object], ...] = ()  # modelarts_setup(..., name=value)
    add_urls: Tuple[str, ...] = ()  # URL arguments to add to the main parser
    minimal_setup: bool = False  # no parser of its own: call modelarts_setup() in the main block
    positionals: Tuple[str, ...] = ()  # for the boot file
    distributed: bool = False  # started by torchrun


def _normalise_dest(name: str) -> str:
    return name.strip().lstrip("-").replace("-", "_")


def _looked_for(options) -> str:
    return "arguments named save, out, outf, output, output_dir, save_dir, checkpoint_dir, model_dir, log_dir, " \
           "sample_dir, result_dir, ... or whose help says they are saved to"


# What a parse call of another parser is given to let arguments it does not know through: TRL's
# TrlParser.parse_args_and_config(fail_with_unknown_args=False) (trl 1.16.0's scripts). Not
# `return_remaining_strings=True` (HfArgumentParser): the caller may refuse the rest (llamafactory
# 0.9.5 v1/config/arg_parser.py raises ValueError on unknown arguments), which is not followed.
_TOLERANT_KEYWORDS = (("fail_with_unknown_args", "False"),)


def _tolerates_unknown_arguments(call: cst.Call) -> bool:
    """Whether a parse call of a parser built elsewhere is told to let unknown arguments through
    and drop them (not `parse_known_args()`: what the caller does with the rest is not followed)."""
    return any(arg.keyword is not None and (arg.keyword.value, node_code(arg.value)) in _TOLERANT_KEYWORDS
               for arg in call.args)


@emits("NPU210", "NPU211", "NPU212", "NPU213", "NPU214", "NPU215", "NPU216", "NPU217", "NPU218", "NPU219")
def plan_adaptation(ctx: Context, analysis: ScriptAnalysis) -> Optional[Plan]:
    """Decide (and report findings on the original tree); None leaves the script alone."""
    options = ctx.options
    moxing = analysis.moxing_import(options.modelarts_moxing_files, ctx.path)
    if moxing is not None:
        node, module = moxing
        api = module or "moxing"
        left = ""
        if analysis.main_parser is None and analysis.foreign_parse_calls:
            call = analysis.foreign_parse_calls[0]
            left = f"; its arguments are parsed by `{node_code(call)}`: it must accept " \
                   "--data_url/--train_url and the platform's other arguments (parse_known_args)"
        elif analysis.main_parser is None:
            configs = [m for _, m, _ in analysis.imported_modules()
                       if set(re.split(r"[._]", m.lower())) & {"config", "configs", "cfg", "options", "opts", "args"}]
            where = f"in `{configs[0]}`" if configs else "elsewhere"
            left = f"; its arguments are parsed {where}: that parser must accept --data_url/--train_url and the " \
                   "platform's other arguments (parse_known_args)"
        _report(ctx, ALREADY_ADAPTED, node, api, extra=left)
        return None
    parser = analysis.main_parser
    if parser is None:
        other = analysis.other_cli()
        if other is not None:
            _report(ctx, OTHER_CLI, other[1], other[0])
            return None
    anchor_node: cst.CSTNode = parser.statement if parser is not None else (
        analysis.main_guard or (analysis.module.body[0] if analysis.module.body else analysis.module))
    arguments = parser.arguments if parser is not None else []
    by_dest = {a.dest: a for a in arguments}
    user_urls = {name for name in URL_ARGS if name in analysis.dests and not generated_argument(by_dest.get(name))}

    def configured(names: Sequence[str], option: str) -> List[str]:
        chosen = []
        for given in names:
            name = _normalise_dest(given)
            chosen.append(name)
            if name not in by_dest:
                api = f"{option} {given}"
                _report(ctx, UNKNOWN_CONFIGURED_ARG, anchor_node, api)
        return chosen

    # Data: the configured arguments, else every data-like one, else the script's own --data_url.
    if options.data_args:
        data_args = configured(options.data_args, "--data-arg")
    else:
        data_args = [a.dest for a in arguments if is_data_argument(a)]
        for arg in arguments:
            if arg.dest in data_args and arg.required and not arg.positional:
                _report(ctx, REQUIRED_DATA_ARG, arg.call, arg.dest)
    if "data_url" in user_urls:
        data_args.append("data_url")  # the script reads its --data_url itself
    for call, folder in analysis.downloads:
        api = node_code(call.func)
        _report(ctx, FIXED_DOWNLOAD, call, api, folder=folder)
    if not data_args and not analysis.downloads:
        _report(ctx, NO_DATA_ARG, anchor_node, "data")

    # Outputs: the configured arguments, else every output-like one, else the script's own --train_url.
    if options.output_args:
        output_args = configured(options.output_args, "--output-arg")
    else:
        found = sorted((a for a in arguments if is_output_argument(a)), key=output_rank)
        output_args = [a.dest for a in found]
        if not output_args and "train_url" in user_urls:
            output_args = ["train_url"]  # the script writes to its --train_url itself
    if not output_args:
        unseen = [call for call, paths in analysis.saves if not paths or any(os.path.isabs(p) for p in paths)]
        if unseen or not analysis.saves:
            where = (f"`{node_code(unseen[0].func)}(...)` saves to a path it cannot follow" if unseen
                     else "no save call was found")
            _report(ctx, NO_OUTPUT_ARG, anchor_node, "output", looked_for=_looked_for(options), where=where)

    keywords: List[Tuple[str, object]] = []
    if data_args:
        keywords.append(("data", tuple(data_args)))
    if output_args:
        keywords.append(("outputs", tuple(output_args)))
    ignored = tuple(sorted({folder for _, folder in analysis.downloads}))
    if ignored:
        keywords.append(("ignore", ignored))
    if options.modelarts_data_dir != MODELARTS_DATA_DIR:
        keywords.append(("data_dir", options.modelarts_data_dir))
    if options.modelarts_output_dir != MODELARTS_OUTPUT_DIR:
        keywords.append(("output_dir", options.modelarts_output_dir))
    if options.modelarts_resume:
        keywords.append(("resume", True))
    if options.modelarts_sync_every:
        keywords.append(("sync_every", options.modelarts_sync_every))
    plan = Plan(tuple(keywords))
    plan.positionals = tuple(a.dest for a in arguments if a.positional)
    plan.distributed = analysis.reads_launcher_env
    required_positionals = [a for a in arguments if a.positional and a.required]
    if required_positionals and not options.modelarts_boot:
        names = ", ".join(a.dest for a in required_positionals)
        _report(ctx, POSITIONAL_ARG, required_positionals[0].call, names)
    if parser is None or not parser.parse_calls:
        plan.minimal_setup = True
        if analysis.foreign_parse_calls:
            strict = [c for c in analysis.foreign_parse_calls if not _tolerates_unknown_arguments(c)]
            if strict:  # (one that tolerates them lets --data_url/--train_url through: modelarts_setup reads them)
                _report(ctx, PARSED_ELSEWHERE, strict[0], node_code(strict[0]))
        else:
            handover = analysis.handover_call()
            if handover is not None:
                _report(ctx, HANDED_OVER, handover, node_code(handover.func) + "()")
    if parser is not None:
        plan.add_urls = tuple(name for name in URL_ARGS if name not in analysis.dests)
    return plan
