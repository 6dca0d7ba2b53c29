"""Applying a plan to the tree being transformed: the parse calls made tolerant and wrapped in
`modelarts_setup(...)`, --data_url/--train_url added to the main parser, the import of the
generated module after the imports (in place of the block earlier versions inserted)."""

from __future__ import annotations

from typing import Iterable, List, Optional, Sequence, Tuple, cast

import libcst as cst

from ...context import Context
from ...modelarts import BEGIN_MARKER, END_MARKER, RUNTIME_MODULE, SETUP_FUNCTION, black_format
from ..syntax import beside_prefix, import_beside, node_code
from .arguments import HELP
from .plan import Plan
from .script import ParseCall, Parser, ScriptAnalysis

def _parse_statement(code: str, newline: str) -> cst.BaseStatement:
    return cst.parse_module(code.replace("\n", newline)).body[0]


def _literal(value: object, quote: str) -> cst.BaseExpression:
    if isinstance(value, bool):
        return cst.Name("True" if value else "False")
    if isinstance(value, (int, float)):
        return cst.parse_expression(repr(value))
    if isinstance(value, str):
        text = repr(value)
        if quote == '"' and '"' not in value and "\\" not in text:
            text = '"' + text[1:-1] + '"'
        return cst.parse_expression(text)
    items = [cst.Element(_literal(v, quote)) for v in cast(Iterable[object], value)]
    return cst.List(items)


def _setup_args(inner: Optional[cst.Arg], plan: Plan, quote: str) -> List[cst.Arg]:
    args = [inner] if inner is not None else []
    for name, value in plan.keywords:
        args.append(cst.Arg(keyword=cst.Name(name), value=_literal(value, quote),
                            equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                                  whitespace_after=cst.SimpleWhitespace(""))))
    return [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in args]


class Rewriter(cst.CSTTransformer):
    """Applies a plan to the tree being transformed (its analysis locates the nodes)."""

    def __init__(self, ctx: Context, analysis: ScriptAnalysis, plan: Plan, added: List[cst.BaseStatement]) -> None:
        super().__init__()
        self.ctx = ctx
        self.analysis = analysis
        self.plan = plan
        self.main = analysis.main_parser
        self.quote = (self.main.quote if self.main is not None else None) or '"'
        self.parse_calls = {id(p.call): p for p in analysis.parse_calls}
        self.indexed = {id(p.indexed): p for p in analysis.parse_calls if p.indexed is not None}
        self.setup_ids = {id(c) for c in analysis.setup_calls}
        self.argument_lines = added  # inserted after the main parser's anchor
        self.tolerant: List[ParseCall] = []  # parse calls made tolerant (for the report)
        self.hooked: List[ParseCall] = []
        self.updated_setup: List[cst.Call] = []  # existing modelarts_setup(...) calls given new settings
        self.setup_statement: Optional[cst.SimpleStatementLine] = None

    def _hook(self, parse: ParseCall) -> bool:
        return parse.parser is self.main and not parse.wrapped and not parse.explicit_argv

    def _setup_call(self, inner: cst.BaseExpression) -> cst.Call:
        return cst.Call(func=cst.Name(SETUP_FUNCTION), args=_setup_args(cst.Arg(inner), self.plan, self.quote))

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if id(original) in self.setup_ids:
            inner = next((a for a in updated.args if a.keyword is None), None)
            new = updated.with_changes(args=_setup_args(inner, self.plan, self.quote))
            if not new.deep_equals(updated) and node_code(new) != node_code(updated):
                self.updated_setup.append(original)
                return new
            return updated
        parse = self.parse_calls.get(id(original))
        if parse is None:
            return updated
        result: cst.BaseExpression = updated
        if parse.method == "parse_args" and not parse.explicit_argv:
            result = cst.Subscript(
                value=updated.with_changes(func=updated.func.with_changes(attr=cst.Name("parse_known_args"))),
                slice=[cst.SubscriptElement(cst.Index(cst.Integer("0")))],
            )
            self.tolerant.append(parse)
        if self._hook(parse) and parse.indexed is None:
            result = self._setup_call(result)
            self.hooked.append(parse)
        return result

    def leave_Subscript(self, original: cst.Subscript, updated: cst.Subscript) -> cst.BaseExpression:
        parse = self.indexed.get(id(original))
        if parse is not None and self._hook(parse):
            self.hooked.append(parse)
            return self._setup_call(updated)
        return updated

    def _insert_arguments(self, original_body: Sequence[cst.BaseStatement],
                          body: Sequence[cst.BaseStatement]) -> Optional[List[cst.BaseStatement]]:
        main = self.main
        if main is None or not self.argument_lines:
            return None
        anchor = main.anchor or main.statement
        for i, stmt in enumerate(original_body):
            if stmt is anchor:
                out = list(body)
                out[i + 1:i + 1] = self.argument_lines
                return out
        return None

    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock) -> cst.IndentedBlock:
        new_body = self._insert_arguments(original.body, updated.body)
        if self.plan.minimal_setup and original is getattr(self.analysis.main_guard, "body", None) \
                and not self.analysis.setup_calls:
            new_body = [self.new_setup_statement(), *(new_body if new_body is not None else updated.body)]
        return updated.with_changes(body=new_body) if new_body is not None else updated

    def leave_SimpleStatementSuite(self, original: cst.SimpleStatementSuite,
                                   updated: cst.SimpleStatementSuite) -> cst.SimpleStatementSuite:
        # `if __name__ == "__main__": main()` on one line: the call goes first on that line.
        if self.plan.minimal_setup and original is getattr(self.analysis.main_guard, "body", None) \
                and not self.analysis.setup_calls:
            call = self.new_setup_statement().body[0]
            return updated.with_changes(body=[call.with_changes(semicolon=cst.Semicolon(
                whitespace_after=cst.SimpleWhitespace(" "))), *updated.body])
        return updated

    def new_setup_statement(self) -> cst.SimpleStatementLine:
        """`modelarts_setup(...)`, for a script with no parser of its own."""
        call = cst.Call(func=cst.Name(SETUP_FUNCTION), args=_setup_args(None, self.plan, self.quote))
        self.setup_statement = cst.SimpleStatementLine(body=[cst.Expr(call)])
        return self.setup_statement

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        new_body = self._insert_arguments(original.body, updated.body)
        return updated.with_changes(body=new_body) if new_body is not None else updated


def argument_lines(parser: Parser, names: Sequence[str], module: cst.Module) -> List[cst.BaseStatement]:
    indent = parser.depth * len(module.default_indent.expandtabs(4))
    lines = []
    for name in names:
        q = parser.quote if parser.quote == "'" else '"'
        code = f"{parser.name}.add_argument({q}--{name}{q}, help={q}{HELP[name]}{q})\n"
        code = black_format(code, line_length=max(40, 88 - indent), normalize_strings=False)
        lines.append(_parse_statement(code, module.default_newline))
    return lines




def install_import(module: cst.Module, analysis: ScriptAnalysis, extra: Sequence[cst.BaseStatement],
                   path: str) -> Tuple[cst.Module, Optional[str]]:
    """`from npu_migrate_modelarts import modelarts_setup` after the imports (in place of the
    block earlier versions inserted); returns the new module and "inserted"/"replaced" (None
    when it is there already). `path`: the script's, for how it imports a module beside it
    (syntax.beside_prefix)."""
    body = list(module.body)
    if analysis.runtime_import is not None and analysis.block is None:
        if extra:
            at = body.index(analysis.runtime_import) + 1
            return module.with_changes(body=body[:at] + list(extra) + body[at:]), "inserted"
        return module, None
    # A module of a package imports the module beside it as it imports its siblings: relatively
    # (bert_pytorch/__main__.py) or through the package (basicsr/train.py): its folder is not on sys.path.
    prefix = beside_prefix(analysis.relative_imports, analysis.module, path)
    line = import_beside(prefix, "# npu-migrate: ModelArts", lambda p: f"from {p}{RUNTIME_MODULE} import {SETUP_FUNCTION}\n")
    statement = _parse_statement(line, module.default_newline)
    if analysis.block is not None:
        start, end = analysis.block
        lines = list(body[start].leading_lines)
        before = lines[:next(i for i, line in enumerate(lines) if line.comment and line.comment.value.strip() == BEGIN_MARKER)]
        while before and before[-1].comment is None:
            before.pop()  # the blank lines the block put above itself
        tail = body[end:]
        if tail:
            lead = list(tail[0].leading_lines)
            at_end = next((i for i, line in enumerate(lead) if line.comment and line.comment.value.strip() == END_MARKER), -1)
            tail[0] = tail[0].with_changes(leading_lines=lead[at_end + 1:])
            footer = list(module.footer)
        else:
            footer = [line for line in module.footer if not (line.comment and line.comment.value.strip() == END_MARKER)]
        statement = statement.with_changes(leading_lines=before)
        new_body = body[:start] + [statement] + list(extra) + tail
        return module.with_changes(body=new_body, footer=footer), "replaced"
    at = analysis.header_end
    return module.with_changes(body=body[:at] + [statement] + list(extra) + body[at:]), "inserted"
