"""What the three `--distributed` passes share (distributed_torch.py, distributed_mindspore.py,
distributed_tf.py): their messages (rules/distributed.toml), the import of the generated helper
module after the imports (and the marked helper block of earlier versions it replaces), the main
block, and a visitor that knows each node's ancestors.
"""

from __future__ import annotations

import os
import re
from typing import Dict, List, Optional, Sequence, Set, Tuple

import libcst as cst

from ..context import Context
from ..imports import ImportTable
from ..distributed import (BEGIN_MARKER, END_MARKER, IMPORT_COMMENT, MODULES, OFFERS, RANK_TABLE, RUN_8P, helpers_import,
                           render_helpers, render_rank_table, render_run_8p)
from ..imports import dotted_name
from ..modelarts import BEGIN_MARKER as MODELARTS_BEGIN, END_MARKER as MODELARTS_END, RUNTIME_MODULE
from ..rules import Rule
from .syntax import beside_prefix, comment_texts, import_beside, imports_beside, is_main_guard, leading_lines, marked_block, module_beside
from .syntax import header_end as syntax_header_end
from ..codes import emits


EVAL_WORDS = ("test", "val", "eval", "valid", "dev")


def is_eval_name(text: str) -> bool:
    """`val_loader`, `test_dataset`, `evaluate()`: a name of evaluation, not training."""
    return any(w.startswith(EVAL_WORDS) for w in re.split(r"[^a-z0-9]+", text.lower()) if w)


# The first line of every helper module the pass generates (distributed/*_helpers.py).
HELPERS_HEADER = "# npu-migrate: distributed helpers (generated"


def wanted(ctx: Context, framework: str) -> bool:
    """Whether the --distributed pass of `framework` looks at this file (not notebooks: a
    notebook cell cannot be started once per NPU; not the helper modules it generated, the
    tool's own code: a second run over the folder reported them NPU380, already distributed)."""
    return (ctx.options.distributed and framework in ctx.frameworks and ctx.entry_script is not False
            and not ctx.path.endswith(".ipynb")
            and not (os.path.basename(ctx.path)[:-3] in MODULES.values() and ctx.text.startswith(HELPERS_HEADER)))


def rule(ctx: Context, code: str) -> Rule:
    """The [[edit]] or analysis [[finding]] of rules/distributed.toml with that code."""
    return ctx.rules.edits.get(code) or ctx.rules.analysis[code]


def report(ctx: Context, code: str, node: cst.CSTNode, api: str, module: Optional[cst.Module] = None,
           **values: str) -> None:
    r = rule(ctx, code)
    ctx.finding(r, node, api, message=r.render_message(api=api, **values),
                suggestion=r.render_suggestion(api=api, **values), module=module)


def edit(ctx: Context, code: str, node: cst.CSTNode, before: str, after: str,
         module: Optional[cst.Module] = None, **values: str) -> None:
    r = rule(ctx, code)
    ctx.edit(r, node, r.render_message(before=before, after=after, **values), before, after, module=module)


def find_block(module: cst.Module) -> Optional[Tuple[int, int]]:
    """(first, end) statement indexes of the distributed block, or None."""
    return marked_block(module.body, BEGIN_MARKER, END_MARKER)


def main_guard(module: cst.Module) -> Optional[cst.If]:
    return next((s for s in module.body if is_main_guard(s)), None)


def run_scopes(module: cst.Module, guard: cst.If) -> List[cst.CSTNode]:
    """The scopes the main block `guard` runs: the module, and the module's functions it calls
    by name (`main()`, `app.run(main)`, `tf.app.run()`: main), and those they call, transitively."""
    from ..fast_visitor import subtree

    functions = {s.name.value: s for s in module.body if isinstance(s, cst.FunctionDef)}
    run: List[cst.CSTNode] = [module]
    todo = _called_names(guard, subtree)
    seen: Set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen or name not in functions:
            continue
        seen.add(name)
        run.append(functions[name])
        todo |= _called_names(functions[name], subtree)
    return run


def _called_names(node: cst.CSTNode, subtree) -> Set[str]:
    """The plain names called in `node` (`main()`, `train(model)`), passed as a call's first
    argument (`app.run(main)`, `mp.spawn(worker, ...)`), and `main` for `tf.app.run()`."""
    names = set()
    for n in subtree(node):
        if isinstance(n, cst.Call):
            if isinstance(n.func, cst.Name):
                names.add(n.func.value)
            elif not n.args and (dotted_name(n.func) or "").endswith("app.run"):
                names.add("main")
            if n.args and isinstance(n.args[0].value, cst.Name):
                names.add(n.args[0].value.value)
    return names


def header_end(module: cst.Module) -> int:
    """Where the block goes: after the docstring, the leading imports (also `try: import`) and
    the ModelArts block."""
    body = list(module.body)

    def boundary(i: int, stmt: cst.BaseStatement) -> Optional[int]:
        comments = comment_texts(leading_lines(stmt))
        if BEGIN_MARKER in comments:
            return i
        if MODELARTS_BEGIN in comments:
            # The ModelArts block (which starts with imports) ends at the statement carrying
            # its end marker: this block goes there.
            return next((j for j in range(i + 1, len(body)) if MODELARTS_END in comment_texts(body[j].leading_lines)),
                        len(body))
        return None

    return syntax_header_end(body, boundary)


def helpers_called(module: cst.Module, framework: str) -> List[str]:
    """The helpers of `framework`'s module the script calls, sorted (as isort sorts the names of an import)."""
    called: Set[str] = set()
    offers = OFFERS[framework]

    class Finder(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> None:
            if isinstance(call.func, cst.Name) and call.func.value in offers:
                called.add(call.func.value)

    module.visit(Finder())
    return sorted(called)


def helpers_import_of(imports: ImportTable, framework: str) -> Optional[cst.ImportFrom]:
    """The script's `from npu_migrate_distributed... import ...` of `framework` (a script converted already)."""
    return next((n for n in imports.import_nodes if isinstance(n, cst.ImportFrom)
                 and module_beside(dotted_name(n.module) or "", MODULES[framework])), None)


def install_helpers_import(module: cst.Module, framework: str, prefix: str,
                           extra: Sequence[cst.BaseStatement] = ()) -> cst.Module:
    """`from <framework's helper module> import <the helpers the script calls>` after the
    imports (where isort puts a first-party import: after the third-party ones), `extra`
    statements (a blank line above them) right after it."""
    names = helpers_called(module.with_changes(body=[*extra, *module.body]), framework)
    if not names:
        return module
    line = statement(import_beside(prefix, IMPORT_COMMENT, lambda p: helpers_import(names, p, MODULES[framework])), module)
    body = list(module.body)
    at = header_end(module)
    while at > 0 and imports_beside(body[at - 1], RUNTIME_MODULE):
        at -= 1  # above the ModelArts import, where a run with both options puts it
    if at > 0 and _is_import(body[at - 1]):
        # A module beside the script is first-party to isort: a section of its own, after a blank line.
        line = line.with_changes(leading_lines=[cst.EmptyLine()])
    tail = list(extra)
    if tail:
        tail[0] = tail[0].with_changes(leading_lines=[cst.EmptyLine()])
    return module.with_changes(body=body[:at] + [line] + tail + body[at:])


def _is_import(stmt: cst.BaseStatement) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and all(isinstance(s, (cst.Import, cst.ImportFrom))
                                                             for s in stmt.body)




def replace_block(module: cst.Module, block: Tuple[int, int], framework: str, prefix: str) -> cst.Module:
    """The helper block of an earlier version removed (its markers too) and `framework`'s helper
    module imported instead."""
    start, end = block
    body = list(module.body)
    lines = list(body[start].leading_lines)
    before = lines[:next(i for i, line in enumerate(lines) if line.comment and line.comment.value.strip() == BEGIN_MARKER)]
    while before and before[-1].comment is None:
        before.pop()  # the blank lines the block put above itself
    tail = body[end:]
    footer = list(module.footer)
    if tail:
        lead = list(tail[0].leading_lines)
        at_end = next((i for i, line in enumerate(lead) if line.comment and line.comment.value.strip() == END_MARKER), -1)
        tail[0] = tail[0].with_changes(leading_lines=[*before, cst.EmptyLine(), *lead[at_end + 1:]]
                                       if before else lead[at_end + 1:])
    else:
        footer = [line for line in footer if not (line.comment and line.comment.value.strip() == END_MARKER)]
    return install_helpers_import(module.with_changes(body=body[:start] + tail, footer=footer), framework, prefix)


def statement(code: str, module: cst.Module) -> cst.BaseStatement:
    return cst.parse_statement(code, config=module.config_for_parsing)


def first_after_header(module: cst.Module) -> cst.CSTNode:
    """The statement the block goes above (the last one when the script is all header): where
    its edit is reported."""
    at = header_end(module)
    return module.body[at] if at < len(module.body) else module.body[-1]


def import_prefix(imports: ImportTable, module: cst.Module, path: str) -> str:
    """What the helper import puts before the module's name (syntax.beside_prefix): relative in
    a module that imports relatively, through the package in one that imports its package."""
    relative = any(isinstance(n, cst.ImportFrom) and n.relative for n in imports.import_nodes)
    return beside_prefix(relative, module, path)


def add_helper_files(ctx: Context, framework: str, entry: bool, form: str = "") -> None:
    """The helper module of `framework` beside the script; for an entry script of TF 1.15 or
    MindSpore also run_8p.sh and the rank table it reads."""
    add_extra(ctx, MODULES[framework] + ".py", render_helpers(framework, form))
    if entry:
        add_rank_table_launcher(ctx, script_name(ctx))


@emits("NPU380")
def report_distributed_already(ctx: Context, found: List[Tuple[cst.CSTNode, str]]) -> bool:
    """NPU380 on the first sign that a script is distributed already (then it is left alone)."""
    if not found:
        return False
    node, api = found[0]
    report(ctx, "NPU380", node, api)
    return True


def add_rank_table_launcher(ctx: Context, script: str) -> None:
    """run_8p.sh (one process per NPU) and the rank table it reads (TF 1.15, MindSpore)."""
    add_extra(ctx, RUN_8P, render_run_8p(script))
    add_extra(ctx, RANK_TABLE, render_rank_table())


class StatementInserter(cst.CSTTransformer):
    """Puts statements before and after original statements, in whatever body they are (the
    module, a function, a loop): `insert_before`/`insert_after` map the id of an original
    statement to the statements to put there (filled before or during the transform)."""

    def __init__(self) -> None:
        super().__init__()
        self.insert_before: Dict[int, List[cst.BaseStatement]] = {}
        self.insert_after: Dict[int, List[cst.BaseStatement]] = {}

    def _body(self, original_body, updated_body) -> Optional[List[cst.BaseStatement]]:
        if not any(id(s) in self.insert_after or id(s) in self.insert_before for s in original_body):
            return None
        body: List[cst.BaseStatement] = []
        for old, new in zip(original_body, updated_body):
            before = list(self.insert_before.get(id(old), ()))
            if before:  # the blank lines and comments above the statement go above what comes first
                before[0] = before[0].with_changes(leading_lines=new.leading_lines)
                new = new.with_changes(leading_lines=[])
            body.extend(before)
            body.append(new)
            body.extend(self.insert_after.get(id(old), ()))
        return body

    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock) -> cst.IndentedBlock:
        body = self._body(original.body, updated.body)
        return updated.with_changes(body=body) if body is not None else updated

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        body = self._body(original.body, updated.body)
        return updated.with_changes(body=body) if body is not None else updated


class Ancestry(cst.CSTVisitor):
    """A visitor that knows the ancestors of the node it is at (`self.stack`)."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: List[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        from ..fast_visitor import own_visit

        self.stack.append(node)
        return own_visit(self, node)

    def on_leave(self, original_node: cst.CSTNode) -> None:
        from ..fast_visitor import own_leave

        own_leave(self, original_node)
        self.stack.pop()

    def scope(self) -> cst.CSTNode:
        """The innermost function (or the module) around the current node."""
        return next((n for n in reversed(self.stack) if isinstance(n, (cst.FunctionDef, cst.Module))), self.stack[0])

    def statement(self) -> Tuple[Optional[cst.BaseStatement], Optional[cst.CSTNode]]:
        """The innermost statement around the current node that sits in a block, with the
        block (an IndentedBlock or the Module)."""
        for i in range(len(self.stack) - 1, 0, -1):
            parent = self.stack[i - 1]
            if isinstance(parent, (cst.IndentedBlock, cst.Module)) and isinstance(self.stack[i], cst.BaseStatement):
                return self.stack[i], parent  # type: ignore[return-value]
        return None, None

    def top_statement(self, scope: cst.CSTNode) -> Optional[cst.BaseStatement]:
        """The statement of `scope`'s own body around the current node."""
        body_owner = scope if isinstance(scope, cst.Module) else scope.body  # type: ignore[attr-defined]
        for i in range(len(self.stack) - 1):
            if self.stack[i] is body_owner and isinstance(self.stack[i + 1], cst.BaseStatement):
                return self.stack[i + 1]  # type: ignore[return-value]
        return None


def script_name(ctx: Context) -> str:
    return os.path.basename(ctx.path) if ctx.path and not ctx.path.startswith("<") else "train.py"


def generated_path(ctx: Context, name: str) -> str:
    return os.path.join(os.path.dirname(ctx.path), name)


def add_extra(ctx: Context, name: str, text: str) -> None:
    if ctx.path and not ctx.path.startswith("<"):
        ctx.extra_files[generated_path(ctx, name)] = text


def ids(nodes) -> Dict[int, cst.CSTNode]:
    return {id(n): n for n in nodes}


def calls_outside_block(module: cst.Module, name: str) -> bool:
    """Whether code outside the distributed block calls `name()`."""
    found = find_block(module)
    body = list(module.body)
    outside = [s for i, s in enumerate(body) if found is None or not (found[0] <= i < found[1])]
    hits = []

    class Finder(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> None:
            if isinstance(call.func, cst.Name) and call.func.value == name:
                hits.append(call)

    module.with_changes(body=outside).visit(Finder())
    return bool(hits)


class ModuleAnalysis(Ancestry):
    """What every distributed pass first knows about a module: its imports, its generated
    block (`find_block`) and the ids of the statements in that block."""

    def __init__(self, module: cst.Module) -> None:
        super().__init__()
        self.module = module
        self.imports = ImportTable.of(module)
        self.block = find_block(module)
        body = list(module.body)
        self.block_ids: Set[int] = {id(s) for s in body[self.block[0]:self.block[1]]} if self.block else set()
        # What every pass collects: signs the script is distributed already (node, api), and
        # the statements that save (run on one process only).
        self.distributed: List[Tuple[cst.CSTNode, str]] = []
        self.saves: List[cst.BaseStatement] = []

    def user_code(self) -> cst.Module:
        """The module without the generated block: the code the pass analyses."""
        return self.module.with_changes(body=[s for s in self.module.body if id(s) not in self.block_ids])
