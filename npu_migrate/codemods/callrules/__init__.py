"""The framework rules (kinds/calls.py and its kinds) applied to a file: the call-level rewrites
and the findings that the TensorFlow and MindSpore codemods share.

`apply_framework_rules(module, ctx, framework, canonical)` runs two passes over the tree:

1. `Planner` (planner.py, a `bindings.Bindings`) records what every variable is assigned (per
   function scope), so a value passed by name (`config=run_config`, `dataset.batch(...)`) can
   be traced to the call that built it; at the end of the module it decides, on the unchanged tree, what happens to
   each call, string literal, import and statement, and records the findings (so their
   positions are the file's own);
2. `Applier` (apply.py) carries the plans out (visiting only the statements that have one)
   and records the edits.

Deciding before changing anything keeps each decision a function of the original code: whether
`tf.estimator.Estimator(config=cfg)` may become `NPUEstimator` depends on the call that built
`cfg`, wherever it is in the file, and whether `import horovod.tensorflow as hvd` can go depends
on every use of `hvd` having been rewritten.

The rules are indexed in index.py; the Planner's decisions for each group of kinds are in
calls.py (call_rename, call_replace, call_config), arguments.py (argument, add_keyword) and
program.py (the main block and lifetimes, remove_import, entry_setup).
"""

from __future__ import annotations

from typing import Optional, Set

import libcst as cst

from ...context import Context
from ...fast_visitor import transform, walk
from ..add_imports import add_plain_import, add_rule_import, imported
from .apply import Applier, Plans
from .index import FRAMEWORK_KIND_KEYS, Canonical, FrameworkRules
from .planner import Planner
from ...codes import applies

__all__ = ["Canonical", "FrameworkRules", "apply_framework_rules"]


def _plan(ctx: Context, tree: cst.Module, rules: FrameworkRules, canonical: Canonical, report: bool,
          keep: Optional[Set[int]] = None) -> Plans:
    planner = Planner(ctx, tree, rules, canonical, report)
    planner.keep = keep or set()
    walk(tree, planner)  # = tree.visit(planner), without copying the tree
    return planner.plans


@applies(*FRAMEWORK_KIND_KEYS)
def apply_framework_rules(module: cst.Module, ctx: Context, framework: str, canonical: Canonical,
                          keep: Optional[Set[int]] = None) -> cst.Module:
    """Apply `framework`'s rules to `module` (the tree as the earlier codemods left it).
    `keep`: ids of statements (of `module`) whose calls' arguments are left as they are."""
    if not ctx.framework_rules_may_apply(framework):
        return module  # no rule can match: spare the planner's walks
    rules = FrameworkRules(ctx.rules, framework)
    if module is not ctx.module:
        # An earlier pass (torch, in a file that uses both) changed the tree, maybe its line
        # numbers: the findings come from the original tree, the plans from this one.
        _plan(ctx, ctx.module, rules, canonical, report=True, keep=keep)
    plans = _plan(ctx, module, rules, canonical, report=module is ctx.module, keep=keep)
    if not (plans.calls or plans.literals or plans.statements or plans.removed_imports or plans.entry_setups
            or plans.after_lines):
        return module
    new_module = transform(module, Applier(ctx, module, plans))
    add_import = rules.add_import
    if (
        plans.needs_import
        and add_import is not None
        and ctx.options.add_import
        and not imported(ctx, add_import.to)
    ):
        new_module = add_rule_import(new_module, ctx, add_import)
    if plans.needs_atexit is not None and ctx.options.add_import and not imported(ctx, "atexit"):
        new_module = add_plain_import(new_module, ctx, plans.needs_atexit, "atexit")
    return new_module
