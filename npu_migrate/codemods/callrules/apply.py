"""The framework rules' second pass (callrules/planner.py): `Applier` carries out the plans the
`Planner` made on the unchanged tree -- the call rewrites, string literals, removed imports,
entry-script setup -- and records the edits (the framework's import is added by
codemods/add_imports.py where a rewrite needs it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Set, Tuple, cast

import libcst as cst

from ...context import Context
from ...kinds.add_keyword import AddKeywordSpec
from ...kinds.call_config import CallConfigSpec
from ...kinds.call_rename import CallRenameSpec
from ...kinds.call_replace import CallReplaceSpec
from ...kinds.entry_setup import EntrySetupSpec
from ...rules import Rule
from .index import FRAMEWORK_KIND_KEYS
from ..bindings import MODULE_SCOPE
from ..strings import with_body
from ..syntax import add_keyword_argument, is_main_guard, is_none, leading_lines, new_call, node_code
from ...codes import applies


# ---------------------------------------------------------------------------- plans


@dataclass
class CallPlan:
    rename: Optional[Rule] = None
    replace: Optional[Rule] = None
    replace_args: Tuple[int, ...] = ()  # indexes into call.args, in `args` order
    config: Optional[Rule] = None
    config_arg: Optional[int] = None  # index of the argument to wrap (None: add the keyword)
    add_keywords: List[Rule] = field(default_factory=list)
    set_keywords: List[Tuple[Rule, int]] = field(default_factory=list)  # (rule, index of the argument to replace)


@dataclass
class Plans:
    calls: Dict[int, CallPlan] = field(default_factory=dict)
    literals: Dict[int, Tuple[Rule, str]] = field(default_factory=dict)  # SimpleString -> (rule, new body)
    statements: Dict[int, Rule] = field(default_factory=dict)  # Expr -> call_replace rule with assign_to
    cleanups: Dict[int, List[Tuple[Rule, cst.CSTNode]]] = field(default_factory=dict)  # block -> rules
    removed_imports: Dict[int, Tuple[Rule, Set[int]]] = field(default_factory=dict)  # Import -> alias indexes
    entry_setups: List[Tuple[Rule, cst.If]] = field(default_factory=list)
    # SimpleStatementLine -> (rule, statements to add after it): the atexit registrations of a
    # start-up call whose block does not last as long as the program.
    after_lines: Dict[int, Tuple[Rule, List[str]]] = field(default_factory=dict)
    needs_import: bool = False
    needs_atexit: Optional[Rule] = None
    hot: Set[int] = field(default_factory=set)  # statements with something planned inside


@applies(*FRAMEWORK_KIND_KEYS)
class Applier(cst.CSTTransformer):
    def __init__(self, ctx: Context, tree: cst.Module, plans: Plans) -> None:
        super().__init__()
        self.ctx = ctx
        self.tree = tree
        self.plans = plans
        self._module = None if tree is ctx.module else tree
        self._drop: Set[int] = set()  # ids of updated statement lines to drop
        self._after: Dict[int, Tuple[Rule, List[str]]] = {}  # updated statement line -> lines to add

    def on_visit(self, node: cst.CSTNode) -> bool:
        # Most statements need nothing: not visiting them keeps the pass cheap.
        if isinstance(node, cst.BaseStatement) and id(node) not in self.plans.hot:
            return False
        return super().on_visit(node)

    def edit(self, rule: Rule, node: cst.CSTNode, before: str, after: str, message: str = "") -> None:
        message = message or rule.render_message(before=before, after=after)
        self.ctx.edit(rule, node, message, before, after, module=self._module)

    def code(self, node: cst.CSTNode) -> str:
        return self.tree.code_for_node(node)

    # -- calls -------------------------------------------------------------------------------------

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        plan = self.plans.calls.get(id(original_node))
        if plan is None:
            return updated_node
        new = updated_node
        if plan.replace is not None:
            replacing = plan.replace.spec_of(CallReplaceSpec)
            values = [new.args[i].value for i in plan.replace_args]
            values += [cst.parse_expression(e) for e in replacing.extra_args]
            replaced = new_call(replacing.to, values)
            replaced = replaced.with_changes(lpar=new.lpar, rpar=new.rpar)
            after = node_code(replaced)
            if replacing.assign_to:
                after = f"{replacing.assign_to} = {after}"
            self.edit(plan.replace, original_node, self.code(original_node), after)
            new = replaced
        if plan.rename is not None:
            to = plan.rename.spec_of(CallRenameSpec).to
            func = cst.parse_expression(to)
            self.edit(plan.rename, original_node.func, self.code(original_node.func), to)
            new = new.with_changes(func=func)
        if plan.config is not None:
            new = self._configure(original_node, new, plan)
        for rule, index in plan.set_keywords:
            spec = rule.spec_of(AddKeywordSpec)
            args = list(new.args)
            args[index] = args[index].with_changes(value=cst.parse_expression(spec.value))
            new = new.with_changes(args=args)
            arg = original_node.args[index]
            prefix = f"{spec.keyword}=" if arg.keyword is not None else ""
            self.edit(rule, arg.value, prefix + self.code(arg.value), prefix + spec.value)
        for rule in plan.add_keywords:
            spec = rule.spec_of(AddKeywordSpec)
            new = add_keyword_argument(new, spec.keyword, cst.parse_expression(spec.value))
            self.edit(rule, original_node, self.code(original_node.func) + "(...)",
                      f"{self.code(original_node.func)}(..., {spec.keyword}={spec.value})")
        return new

    def _configure(self, original: cst.Call, call: cst.Call, plan: CallPlan) -> cst.Call:
        rule = plan.config
        assert rule is not None  # _configure runs for a plan with a config rule
        spec = rule.spec_of(CallConfigSpec)
        index = plan.config_arg
        if index is None:
            added = new_call(spec.to, [])
            self.edit(rule, original, f"{self.code(original.func)}(...)",
                      f"{self.code(original.func)}(..., {spec.keyword}={node_code(added)})")
            return add_keyword_argument(call, spec.keyword, added)
        arg = call.args[index]
        before = self.code(original.args[index].value)
        if is_none(arg.value):
            wrapped = new_call(spec.to, [])
            after = f"{spec.to}()"
        else:
            wrapped = new_call(spec.to, [], [(spec.wrap_keyword, arg.value)])
            after = f"{spec.to}({spec.wrap_keyword}={before})"
        self.edit(rule, original.args[index].value, before, after)
        args = list(call.args)
        args[index] = arg.with_changes(value=wrapped)
        return call.with_changes(args=args)

    def leave_SimpleString(self, original_node: cst.SimpleString, updated_node: cst.SimpleString) -> cst.SimpleString:
        planned = self.plans.literals.get(id(original_node))
        if planned is None:
            return updated_node
        rule, body = planned
        new = with_body(updated_node, body)
        self.edit(rule, original_node, self.code(original_node), node_code(new))
        return new

    # -- statements --------------------------------------------------------------------------------

    def leave_Expr(self, original_node: cst.Expr, updated_node: cst.Expr) -> cst.BaseSmallStatement:
        rule = self.plans.statements.get(id(original_node))
        if rule is None:
            return updated_node
        target = cast(cst.BaseAssignTargetExpression, cst.parse_expression(rule.spec_of(CallReplaceSpec).assign_to))
        return cst.Assign(
            targets=[cst.AssignTarget(target=target)],
            value=updated_node.value,
            semicolon=updated_node.semicolon,
        )

    def leave_Import(self, original_node: cst.Import, updated_node: cst.Import) -> cst.Import:
        planned = self.plans.removed_imports.get(id(original_node))
        if planned is None:
            return updated_node
        rule, aliases = planned
        for i in sorted(aliases):
            alias = original_node.names[i]
            self.edit(rule, alias, f"import {self.code(alias.with_changes(comma=cst.MaybeSentinel.DEFAULT))}", "")
        kept = [a for i, a in enumerate(updated_node.names) if i not in aliases]
        if not kept:
            return updated_node  # the whole statement goes: leave_SimpleStatementLine
        kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return updated_node.with_changes(names=kept)

    def leave_ImportFrom(self, original_node: cst.ImportFrom, updated_node: cst.ImportFrom) -> cst.ImportFrom:
        planned = self.plans.removed_imports.get(id(original_node))
        if planned is not None:
            self.edit(planned[0], original_node, self.code(original_node.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)), "")
        return updated_node

    def _removed(self, statement: cst.BaseSmallStatement) -> bool:
        """Whether a whole import statement of the original tree goes."""
        planned = self.plans.removed_imports.get(id(statement))
        if planned is None:
            return False
        if isinstance(statement, cst.Import):
            return len(planned[1]) == len(statement.names)
        return True

    def leave_SimpleStatementLine(self, original_node: cst.SimpleStatementLine,
                                  updated_node: cst.SimpleStatementLine) -> cst.SimpleStatementLine:
        after = self.plans.after_lines.get(id(original_node))
        if after is not None:
            self._after[id(updated_node)] = after
            self.edit(after[0], original_node, "", "; ".join(after[1]),
                      f"added `{'; '.join(after[1])}` after it: the NPU is shut down when the program exits,"
                      " not when this block ends")
        if not self.plans.removed_imports:
            return updated_node
        body = [u for o, u in zip(original_node.body, updated_node.body) if not self._removed(o)]
        if len(body) == len(updated_node.body):
            return updated_node
        if not body:
            self._drop.add(id(updated_node))
            return updated_node
        body[-1] = body[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
        return updated_node.with_changes(body=body)

    # -- blocks ------------------------------------------------------------------------------------

    def _finish_block(self, key: int, body: Sequence[cst.BaseStatement]) -> Tuple[List[cst.BaseStatement], List]:
        """The block's statements without the dropped lines (their comments move to the next
        statement), with planned cleanups at its end (before a final `return`)."""
        out: List[cst.BaseStatement] = []
        pending_lines: List[cst.EmptyLine] = []
        for stmt in body:
            if id(stmt) in self._drop:
                pending_lines.extend(leading_lines(stmt))
                continue
            if pending_lines:
                stmt = stmt.with_changes(leading_lines=[*pending_lines, *leading_lines(stmt)])
                pending_lines = []
            out.append(stmt)
            if id(stmt) in self._after:
                out.extend(cst.parse_statement(line) for line in self._after[id(stmt)][1])
        for rule, anchor in self.plans.cleanups.get(key, ()):
            spec = rule.spec_of(CallReplaceSpec)
            new_lines = [cst.parse_statement(s) for s in spec.cleanup]
            insert_at = len(out)
            if out and isinstance(out[-1], cst.SimpleStatementLine) and isinstance(out[-1].body[0], cst.Return):
                insert_at -= 1
            out[insert_at:insert_at] = new_lines
            after = "; ".join(spec.cleanup)
            self.edit(rule, anchor, "", after,
                      f"added `{after}` at the end of the block: it releases what `{spec.to}()` set up")
        return out, pending_lines

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock) -> cst.IndentedBlock:
        if not self._drop and not self._after and id(original_node) not in self.plans.cleanups:
            return updated_node
        body, pending = self._finish_block(id(original_node), updated_node.body)
        if not body:
            body = [cst.SimpleStatementLine(body=[cst.Pass()], leading_lines=pending)]
            pending = []
        return updated_node.with_changes(body=body, footer=[*pending, *updated_node.footer])

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        body, pending = self._finish_block(MODULE_SCOPE, updated_node.body)
        new = updated_node.with_changes(body=body, footer=[*pending, *updated_node.footer])
        for rule, guard in self.plans.entry_setups:
            new = self._entry_setup(new, rule, guard)
        return new

    def _entry_setup(self, module: cst.Module, rule: Rule, original_guard: cst.If) -> cst.Module:
        spec = rule.spec_of(EntrySetupSpec)
        body = list(module.body)
        for i, stmt in enumerate(body):
            if is_main_guard(stmt) and isinstance(stmt.body, cst.IndentedBlock):
                block = stmt.body
                lines = list(block.body)
                lines.insert(0, cst.parse_statement(spec.setup))
                lines.append(cst.parse_statement(spec.teardown))
                body[i] = stmt.with_changes(body=block.with_changes(body=lines))
                self.edit(rule, original_guard.test, "", f"{spec.setup} ... {spec.teardown}")
                return module.with_changes(body=body)
        return module


def atexit_registration(statement: str) -> str:
    """`f(a, b)` -> `atexit.register(f, a, b)`."""
    call = cst.parse_expression(statement)
    assert isinstance(call, cst.Call)
    parts = [node_code(call.func)] + [node_code(a.value) for a in call.args]
    return f"atexit.register({', '.join(parts)})"


def returns_early(function: cst.FunctionDef) -> bool:
    """A `return` anywhere but as the last statement of the function's own body."""
    found: List[cst.Return] = []

    class Returns(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is function

        def visit_Lambda(self, node: cst.Lambda) -> bool:
            return False

        def visit_ClassDef(self, node: cst.ClassDef) -> bool:
            return False

        def visit_Return(self, node: cst.Return) -> None:
            found.append(node)

    function.visit(Returns())
    body = function.body.body if isinstance(function.body, cst.IndentedBlock) else ()
    last = body[-1] if body else None
    final = (last.body[0] if isinstance(last, cst.SimpleStatementLine) and isinstance(last.body[0], cst.Return)
             else None)
    return any(r is not final for r in found)
