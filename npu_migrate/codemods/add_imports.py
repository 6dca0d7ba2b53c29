"""Adding an import that a pass's rewrites need: the one home for it (passes never insert import
statements by hand).

* `ctx.require_import(name)` says a rewrite needs `name` imported, `ctx.import_required(name)`
  whether one did; the PyTorch pass asks for `torch_npu` that way wherever it migrates
  something (NPU108), and adds it once after its walk (codemods/torch/torch_npu_import.py puts
  it next to the file's first import of torch);
* `imported(ctx, name)`: whether the original file imports `name` already;
  `imported_from(module, name)`: whether a tree has a `from name import ...`;
* `add_rule_import(module, ctx, rule)`: the import an `[[add_import]]` rule names
  (`from npu_bridge.npu_init import *`), before the first top-level import, so that names the
  file imports itself win over a star import's;
* `add_plain_import(module, ctx, rule, name)`: `import <name>` after the first import line
  (`import atexit`, which the framework passes need for a shut-down registered at exit).

Each records its edit (credited to `rule`) on the new tree.
"""

from __future__ import annotations

from typing import Sequence, Tuple

import libcst as cst

from ..context import Context
from ..kinds.add_import import AddImportSpec
from ..imports import ImportTable, dotted_name
from ..rules import Rule
from ..codes import applies


def imports_something(stmt: cst.BaseStatement) -> bool:
    """A top-level statement that imports (not `from __future__`), directly or in a try/if."""
    if isinstance(stmt, cst.SimpleStatementLine):
        for s in stmt.body:
            if isinstance(s, cst.Import):
                return True
            if isinstance(s, cst.ImportFrom) and not (s.module is not None and dotted_name(s.module) == "__future__"):
                return True
        return False
    if isinstance(stmt, (cst.Try, cst.If)) and isinstance(stmt.body, cst.IndentedBlock):
        return any(imports_something(s) for s in stmt.body.body)
    return False


def _is_docstring_or_future(stmt: cst.BaseStatement) -> bool:
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return False
    s = stmt.body[0]
    if isinstance(s, cst.Expr) and isinstance(s.value, (cst.SimpleString, cst.ConcatenatedString)):
        return True
    return isinstance(s, cst.ImportFrom) and s.module is not None and dotted_name(s.module) == "__future__"


def _first_import(body: Sequence[cst.BaseStatement]) -> Tuple[int, bool]:
    """(index of the first top-level import, True), or (the index after the docstring and the
    `from __future__` imports, False) in a file that imports nothing else."""
    index = next((i for i, s in enumerate(body) if imports_something(s)), None)
    if index is not None:
        return index, True
    index = 0
    while index < len(body) and _is_docstring_or_future(body[index]):
        index += 1
    return index, False


def _imports(nodes, name: str) -> bool:
    for node in nodes:
        if isinstance(node, cst.ImportFrom) and node.module is not None and dotted_name(node.module) == name:
            return True
        if isinstance(node, cst.Import) and any(dotted_name(a.name) == name for a in node.names):
            return True
    return False


def imported(ctx: Context, name: str) -> bool:
    """Whether the original file imports module `name` (`import name`, `from name import ...`)."""
    return _imports(ctx.imports.import_nodes, name)


def imported_from(module: cst.Module, name: str) -> bool:
    """Whether a tree (as an earlier pass left it) has a `from name import ...`."""
    return any(isinstance(node, cst.ImportFrom) and node.module is not None and dotted_name(node.module) == name
               for node in ImportTable.of(module).import_nodes)


@applies("add_import@tensorflow", "add_import@mindspore")
def add_rule_import(module: cst.Module, ctx: Context, rule: Rule) -> cst.Module:
    """Insert the rule's import before the first top-level import (after the docstring and the
    `from __future__` imports), so that names the file imports itself win over a star import's."""
    names = rule.spec_of(AddImportSpec).names if rule.spec is not None else ()
    statement = f"from {rule.to} import {', '.join(names)}" if names else f"import {rule.to}"
    new_line = cst.parse_statement(statement)
    body = list(module.body)
    index, _ = _first_import(body)
    if index < len(body):
        anchor = body[index]
        new_line = new_line.with_changes(leading_lines=anchor.leading_lines)
        body[index] = anchor.with_changes(leading_lines=())
    body.insert(index, new_line)
    new_module = module.with_changes(body=body)
    ctx.edit(rule, new_module.body[index], rule.render_message(), "", statement, module=new_module)
    return new_module


def add_plain_import(module: cst.Module, ctx: Context, rule: Rule, name: str) -> cst.Module:
    """`import <name>` after the leading `from npu_bridge...`/first import of the module."""
    statement = f"import {name}"
    body = list(module.body)
    index, found = _first_import(body)
    if found and isinstance(body[index], cst.SimpleStatementLine):
        index += 1  # after the first import line (the TF Adapter's, when it was just added)
    body.insert(index, cst.parse_statement(statement))
    new_module = module.with_changes(body=body)
    ctx.edit(rule, new_module.body[index], f"added `{statement}`: it registers the NPU shut-down at exit", "",
             statement, module=new_module)
    return new_module
