"""ModelArts adaptation of entry scripts (`--modelarts`), after the framework codemods.

What an adapted entry script gets (codes documented in rules/codes.toml):

* NPU201 `--data_url`/`--train_url` added to the script's own argparse parser, wherever it is
  built (module level, `main()`, a `get_args()` helper), unless the script has them already;
* NPU202 `parser.parse_args()` -> `parser.parse_known_args()[0]`, so the arguments the platform
  adds do not stop the script;
* NPU203 `modelarts_setup(..., data=[...], outputs=[...])` around the parse call, naming the
  script's data and output arguments (or, with no parser, a call that reads the two URLs itself
  at the top of the `if __name__ == "__main__":` block);
* NPU204 `from npu_migrate_modelarts import modelarts_setup` after the imports, and the module
  itself beside the script (FileResult.extra_files; npu_migrate/modelarts/runtime_template.py):
  one module per folder whatever the number of entry scripts, so the diff of a script stays a
  few lines. Running again updates the call and the module in place, and replaces the block
  earlier versions put into the script.

Scripts that already talk to OBS (moxing, a moxing helper, a project module importing moxing)
are left alone (NPU210); scripts whose arguments are parsed by absl/tf.flags, click or fire are
reported (NPU213); eval/export/infer/pre-/postprocess and split/download/prepare scripts are not
entry scripts unless named with --entry, nor a utility run by hand beside an entry script (a main
block that trains nothing next to one that trains: modelarts/project.py). The decisions are made on the original tree (findings carry original line
numbers); the same analysis of the tree being transformed locates the nodes to change.

The modules, in the order they run: script.py reads a script (its parsers, arguments, parse
calls), arguments.py says what each argument holds (data, outputs), plan.py decides (entry
script or not, the findings) and rewrite.py applies the plan; adapt_for_modelarts() below
ties them together and records the edits where they are in the original file.
"""

from __future__ import annotations

import os
from typing import List, Optional, Tuple

import libcst as cst

from ...context import Context
from ...distributed import HELPERS_MODULE
from ...imports import dotted_name
from ...modelarts import RUNTIME_MODULE, SETUP_FUNCTION, boot_file_name, render_boot, render_runtime, runtime_file_name
from .plan import entry_script_by_choice, helper_script, may_be_entry_script, named_with_entry, plan_adaptation
from .rewrite import Rewriter, argument_lines, install_import
from ..syntax import module_beside, own_package, script_package
from .script import ParseCall, ScriptAnalysis
from ...codes import emits

# The edits this pass makes (rules/modelarts.toml).
EDIT_ARGS, EDIT_TOLERANT, EDIT_SETUP, EDIT_IMPORT = "NPU201", "NPU202", "NPU203", "NPU204"


@emits("NPU201", "NPU202", "NPU203", "NPU204")
def adapt_for_modelarts(module: cst.Module, ctx: Context) -> cst.Module:
    if not ctx.options.modelarts or ctx.entry_script is False:
        return module
    chosen = entry_script_by_choice(ctx)
    if chosen is False or (chosen is None and (helper_script(ctx) or not may_be_entry_script(ctx.module))):
        return module
    original = ScriptAnalysis(ctx.module)
    if chosen is None and original.main_guard is None and not original.module_level_parser:
        return module
    plan = plan_adaptation(ctx, original)
    if plan is None:
        return module
    current = original if module is ctx.module else ScriptAnalysis(module)
    ctx.extra_files[runtime_file_name(ctx.path)] = render_runtime()
    if ctx.options.modelarts_boot and named_with_entry(ctx):
        folder = os.path.dirname(ctx.path)
        # A script --distributed converted (in this run or an earlier one) imports its helpers:
        # started through torchrun, one process per NPU, like one that reads LOCAL_RANK itself.
        distributed = plan.distributed or current.imports.imports_module(HELPERS_MODULE) or any(
            isinstance(n, cst.ImportFrom) and module_beside(dotted_name(n.module) or "", HELPERS_MODULE)
            for n in current.imports.import_nodes)
        # basicsr/train.py runs `from basicsr.data import ...`: it is started from the folder
        # holding basicsr, with it on sys.path (BasicSR's docs: PYTHONPATH=./ python basicsr/train.py);
        # one that also imports a module beside it by its bare name runs in its own folder.
        package = script_package(ctx.module, ctx.path)
        import_root = "/".join([".."] * len(package.split("."))) if package else ""
        ctx.extra_files[os.path.join(folder, boot_file_name(ctx.path))] = render_boot(
            os.path.basename(ctx.path), plan.positionals, distributed, import_root,
            runs_in_import_root=own_package(ctx.module, ctx.path) is not None)

    added = argument_lines(current.main_parser, plan.add_urls, module) if plan.add_urls else []  # type: ignore[arg-type]
    rewriter = Rewriter(ctx, current, plan, added)
    new_module = module.visit(rewriter)

    # A script with no main block and no parser: call modelarts_setup() right after the import.
    extra: List[cst.BaseStatement] = []
    if plan.minimal_setup and current.main_guard is None and not current.setup_calls:
        extra.append(rewriter.new_setup_statement())
    # The rewrite inserted statements only below the imports: `current` still says where they are.
    new_module, import_change = install_import(new_module, current, extra, ctx.path)

    # Report each change where it is in the original file, as findings are: the parse call,
    # the line the arguments follow, the main block, the statement the import goes above.
    same_calls = len(current.parse_calls) == len(original.parse_calls)

    def at_original(parse: ParseCall) -> Tuple[cst.CSTNode, Optional[cst.Module]]:
        if same_calls:
            return original.parse_calls[current.parse_calls.index(parse)].call, None
        return parse.call, module

    for parse in rewriter.tolerant:
        node, tree = at_original(parse)
        ctx.edit(EDIT_TOLERANT, node, "parse_args() -> parse_known_args()[0]: arguments the platform adds "
                 "do not stop the script", "parse_args(...)", "parse_known_args(...)[0]", module=tree)
    for parse in rewriter.hooked:
        node, tree = at_original(parse)
        ctx.edit(EDIT_SETUP, node, f"{SETUP_FUNCTION}(...) around the parsed arguments: copies --data_url in "
                 "and the outputs to --train_url", "", f"{SETUP_FUNCTION}(...)", module=tree)
    for call in rewriter.updated_setup:
        tree = None if current is original else module
        ctx.edit(EDIT_SETUP, call, f"{SETUP_FUNCTION}(...) given the current settings", "",
                 f"{SETUP_FUNCTION}(...)", module=tree)
    body = original.module.body
    following = body[original.header_end] if original.header_end < len(body) else (body[-1] if body else original.module)
    if rewriter.setup_statement is not None:
        ctx.edit(EDIT_SETUP, original.main_guard or following, f"{SETUP_FUNCTION}() added: it reads "
                 "--data_url/--train_url itself (the script has no argument parser of its own)",
                 "", f"{SETUP_FUNCTION}()")
    if added:
        main = original.main_parser
        names = " and ".join(f"--{name}" for name in plan.add_urls)
        ctx.edit(EDIT_ARGS, main.anchor or main.statement, f"{names} added to the argument parser, after this line",  # type: ignore[union-attr]
                 "", names)
    if import_change is not None:
        if original.block is not None:
            node, message = body[original.block[0]], "the ModelArts block of an earlier version replaced by"
        else:
            node, message = following, "added above this line:"
        ctx.edit(EDIT_IMPORT, node, f"{message} an import of {RUNTIME_MODULE}.py, generated beside the script "
                 "(it copies --data_url in and the outputs to --train_url)", "", f"import {RUNTIME_MODULE}")
    return new_module
