"""ModelArts adaptation of entry scripts (`--modelarts`), after the framework codemods.

What an adapted entry script gets (codes documented in rules/codes.toml):

* NPU201 `--data_url`/`--train_url` added to the script's own argparse parser, wherever it is
  built (module level, `main()`, a `get_args()` helper), unless the script has them already;
* NPU202 `parser.parse_args()` -> `parser.parse_known_args()[0]`, so the arguments the platform
  adds do not stop the script;
* NPU203 `modelarts_setup(...)` around the parse call (or, with no parser, a call that reads the
  two URLs itself at the top of the `if __name__ == "__main__":` block);
* NPU204 one delimited block after the imports, generated from npu_migrate/modelarts/
  block_template.py, that defines `modelarts_setup` (copy the input in once per node, copy the
  outputs out from global rank 0 at exit, on an exception or SIGTERM). Running again replaces
  the block, so a second run changes nothing.

Why one block in the script rather than a helper module next to it: the engine turns one file
into one file, the script keeps working when copied or launched from another folder (`python -m`,
ModelArts' own boot command) and there is no second file to keep in step with it.

Scripts that already talk to OBS themselves (they import moxing) are left alone (NPU210);
scripts whose arguments are parsed by absl/tf.flags, click or fire are reported (NPU213).
The decisions are made on the original tree (findings carry original line numbers); the same
analysis of the tree being transformed locates the nodes to change.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Set, Tuple

import libcst as cst

from ..context import Context
from ..imports import ImportTable, dotted_name
from ..modelarts import (
    BEGIN_MARKER,
    END_MARKER,
    SETUP_FUNCTION,
    BlockSettings,
    black_format,
    boot_file_name,
    render_block,
    render_boot,
)
from .strings import string_value
from .syntax import is_main_guard

# The script's own data-path argument: these names (argparse dests), specific ones first. The
# generic ones also name datasets ("--dataset cifar10"), so they count only when the argument
# looks like a path (a path-like default, or "dir"/"path"/"folder" in its help or metavar).
DATA_ARGS = ("data_dir", "data_path", "data_root", "dataset_dir", "dataset_path", "dataset_root",
             "local_data_path", "train_data_dir")
GENERIC_DATA_ARGS = ("data", "dataset", "root")
OUTPUT_ARGS = ("output_dir", "save_dir", "checkpoint_dir", "ckpt_dir", "out_dir", "output_path", "save_path")
GENERIC_OUTPUT_ARGS = ("out", "output")
PATH_WORDS_RE = re.compile(r"(?i)\b(dir|directory|folder|path|root|location)\b|目录|路径|文件夹")
URL_ARGS = ("data_url", "train_url")
HELP = {
    "data_url": "ModelArts input: OBS URL or local path",
    "train_url": "ModelArts output: OBS URL or local path",
}

ARGUMENT_PARSER = "argparse.ArgumentParser"
PARSE_METHODS = ("parse_args", "parse_known_args")
GROUP_METHODS = ("add_argument_group", "add_mutually_exclusive_group")
# Other ways of reading the command line: not adapted automatically (NPU213).
OTHER_CLI_MODULES = {
    "absl.flags": "absl flags",
    "absl.app": "absl flags",
    "tensorflow.app.flags": "tf.app.flags",
    "tensorflow.compat.v1.flags": "tf.flags",
    "tensorflow.compat.v1.app.flags": "tf.app.flags",
    "tensorflow.flags": "tf.flags",
    "click": "click",
    "fire": "fire",
    "typer": "typer",
    "hydra": "hydra",
}


# The codes this pass reports (rules/modelarts.toml gives their severity, message and
# suggestion: ctx.rules.reported(code)).
ALREADY_ADAPTED, NO_DATA_ARG, REQUIRED_DATA_ARG, OTHER_CLI = "NPU210", "NPU211", "NPU212", "NPU213"
NO_OUTPUT_ARG, UNKNOWN_CONFIGURED_ARG, PARSED_ELSEWHERE = "NPU214", "NPU215", "NPU216"
EDIT_ARGS, EDIT_TOLERANT, EDIT_SETUP, EDIT_BLOCK = "NPU201", "NPU202", "NPU203", "NPU204"


# ----------------------------------------------------------------------------- analysis


@dataclass
class Argument:
    dest: str
    call: cst.Call
    positional: bool
    required: bool
    path_like: bool  # default/help/metavar say it holds a path
    plain_value: bool  # a single string value: no choices, action, numeric type or nargs list


@dataclass
class Parser:
    name: str  # the variable it is assigned to where it is built
    statement: cst.SimpleStatementLine  # `parser = argparse.ArgumentParser(...)`
    body_owner: cst.CSTNode  # the Module or IndentedBlock whose body holds `statement`
    depth: int  # how many blocks deep `statement` is (for the line length of added code)
    arguments: List[Argument] = field(default_factory=list)
    anchor: Optional[cst.SimpleStatementLine] = None  # last `parser.add_argument(...)` line next to it
    parse_calls: List["ParseCall"] = field(default_factory=list)
    quote: Optional[str] = None  # the quotes its add_argument calls use


@dataclass
class ParseCall:
    call: cst.Call
    parser: Parser
    method: str
    explicit_argv: bool  # parse_args(["--lr", "1"]): the code chose what is parsed
    indexed: Optional[cst.Subscript] = None  # `parser.parse_known_args()[0]`
    wrapped: bool = False  # already inside modelarts_setup(...)


def _statement_of(node: cst.CSTNode) -> Optional[cst.Call]:
    """The call a `call(...)` expression statement consists of."""
    if isinstance(node, cst.SimpleStatementLine) and len(node.body) == 1 and isinstance(node.body[0], cst.Expr):
        value = node.body[0].value
        return value if isinstance(value, cst.Call) else None
    return None


def _method_call(call: cst.Call) -> Tuple[Optional[cst.BaseExpression], str]:
    if isinstance(call.func, cst.Attribute):
        return call.func.value, call.func.attr.value
    return None, ""


def _keyword(call: cst.Call, name: str) -> Optional[cst.Arg]:
    return next((a for a in call.args if a.keyword is not None and a.keyword.value == name), None)


def _is_true(node: Optional[cst.Arg]) -> bool:
    return node is not None and isinstance(node.value, cst.Name) and node.value.value == "True"


def describe_argument(call: cst.Call) -> Optional[Argument]:
    """What an `add_argument(...)` call defines, when its option strings are literals."""
    flags = []
    for arg in call.args:
        if arg.keyword is not None or arg.star:
            continue
        value = string_value(arg.value)
        if value is None:
            return None
        flags.append(value)
    if not flags:
        return None
    positional = not flags[0].startswith("-")
    dest_arg = _keyword(call, "dest")
    dest = string_value(dest_arg.value) if dest_arg is not None else None
    if dest is None:
        longs = [f for f in flags if f.startswith("--")]
        dest = (longs[0] if longs else flags[0]).lstrip("-").replace("-", "_")
    nargs = _keyword(call, "nargs")
    required = positional and not (nargs is not None and string_value(nargs.value) in ("?", "*"))
    required = required or _is_true(_keyword(call, "required"))
    type_arg = _keyword(call, "type")
    numeric = type_arg is not None and isinstance(type_arg.value, cst.Name) and type_arg.value.value in ("int", "float", "bool")
    list_nargs = nargs is not None and string_value(nargs.value) != "?"
    plain = not (numeric or list_nargs or _keyword(call, "choices") or _keyword(call, "action"))
    texts = []
    for name in ("help", "metavar"):
        kw = _keyword(call, name)
        if kw is not None and string_value(kw.value):
            texts.append(string_value(kw.value))
    default = _keyword(call, "default")
    default_text = string_value(default.value) if default is not None else None
    path_like = bool(default_text and (default_text.startswith((".", "~", "/")) or "/" in default_text or "\\" in default_text))
    path_like = path_like or any(PATH_WORDS_RE.search(t) for t in texts)
    return Argument(dest, call, positional, required, path_like, plain)


class _Scope:
    def __init__(self, node: cst.CSTNode, parent: Optional["_Scope"]) -> None:
        self.node = node
        self.parent = parent
        self.parsers: Dict[str, Parser] = {}  # built here
        self.aliases: Dict[str, Parser] = {}  # `parser = get_parser()`, argument groups

    def lookup(self, name: str) -> Optional[Parser]:
        scope: Optional[_Scope] = self
        while scope is not None:
            found = scope.parsers.get(name) or scope.aliases.get(name)
            if found is not None:
                return found
            scope = scope.parent
        return None


class _Visitor(cst.CSTVisitor):
    """Two passes: the first finds where parsers are built and which functions return one; the
    second their arguments, aliases and parse calls."""

    def __init__(self, analysis: "ScriptAnalysis", second_pass: bool) -> None:
        super().__init__()
        self.a = analysis
        self.second = second_pass
        self.scope = _Scope(analysis.module, None)
        self.scopes: Dict[int, _Scope] = analysis._scopes
        self.bodies: List[cst.CSTNode] = [analysis.module]
        self.statement: Optional[cst.SimpleStatementLine] = None
        self.function_names: List[str] = []
        if second_pass:
            self.scope = self.scopes[id(analysis.module)]
        else:
            self.scopes[id(analysis.module)] = self.scope

    # The generated block is not the script's code: skipped (libcst calls on_leave anyway).
    def on_visit(self, node: cst.CSTNode) -> bool:
        if id(node) in self.a.block_ids:
            return False
        return super().on_visit(node)

    def on_leave(self, original_node: cst.CSTNode) -> None:
        if id(original_node) not in self.a.block_ids:
            super().on_leave(original_node)

    # -- structure ----------------------------------------------------------------------

    def _enter_scope(self, node: cst.CSTNode) -> None:
        if self.second:
            self.scope = self.scopes[id(node)]
        else:
            self.scope = _Scope(node, self.scope)
            self.scopes[id(node)] = self.scope

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._enter_scope(node)
        self.function_names.append(node.name.value)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.scope = self.scope.parent
        self.function_names.pop()

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._enter_scope(node)

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        self.scope = self.scope.parent

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self.bodies.append(node)

    def leave_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self.bodies.pop()

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self.statement = node

    # -- parsers ------------------------------------------------------------------------

    def _parser_of(self, node: cst.BaseExpression) -> Optional[Parser]:
        if isinstance(node, cst.Name):
            return self.scope.lookup(node.value)
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and not node.args:
            return self.a.parser_functions.get(node.func.value)  # get_parser().parse_args()
        return None

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) != 1 or not isinstance(node.targets[0].target, cst.Name):
            return
        name = node.targets[0].target.value
        value = node.value
        if not isinstance(value, cst.Call):
            return
        if not self.second:
            if self.a.imports.resolve(value.func) == ARGUMENT_PARSER and self.statement is not None:
                depth = sum(1 for b in self.bodies if isinstance(b, cst.IndentedBlock))
                parser = Parser(name, self.statement, self.bodies[-1], depth)
                self.scope.parsers[name] = parser
                self.a.parsers.append(parser)
            return
        receiver, method = _method_call(value)
        if method in GROUP_METHODS and receiver is not None:
            parser = self._parser_of(receiver)
            if parser is not None:
                self.scope.aliases[name] = parser
        elif isinstance(value.func, cst.Name) and value.func.value in self.a.parser_functions and not value.args:
            self.scope.aliases[name] = self.a.parser_functions[value.func.value]

    def visit_Return(self, node: cst.Return) -> None:
        if self.second or len(self.function_names) != 1 or not isinstance(node.value, cst.Name):
            return
        parser = self.scope.parsers.get(node.value.value)
        if parser is not None:
            self.a.parser_functions[self.function_names[0]] = parser

    def visit_Subscript(self, node: cst.Subscript) -> None:
        # `parser.parse_known_args()[0]`
        if self.second and isinstance(node.value, cst.Call) and len(node.slice) == 1:
            index = node.slice[0].slice
            if isinstance(index, cst.Index) and isinstance(index.value, cst.Integer) and index.value.value == "0":
                self.a._indexed[id(node.value)] = node

    def visit_Call(self, node: cst.Call) -> None:
        if not self.second:
            return
        a = self.a
        if isinstance(node.func, cst.Name) and node.func.value == SETUP_FUNCTION:
            a.setup_calls.append(node)
            if node.args:
                inner = node.args[0].value
                if isinstance(inner, cst.Subscript):
                    inner = inner.value
                a._wrapped.add(id(inner))
            return
        receiver, method = _method_call(node)
        if method.startswith("DEFINE_") and receiver is not None:
            a.flag_definitions.append(node)
        if receiver is None:
            return
        if method == "add_argument":
            argument = describe_argument(node)
            if argument is None:
                return
            a.dests.add(argument.dest)
            parser = self._parser_of(receiver)
            if parser is None:
                return
            parser.arguments.append(argument)
            if parser.quote is None and isinstance(node.args[0].value, cst.SimpleString):
                parser.quote = node.args[0].value.quote  # added arguments are written alike
            stmt = self.statement
            if stmt is not None and _statement_of(stmt) is node and self.bodies[-1] is parser.body_owner:
                parser.anchor = stmt
        elif method in PARSE_METHODS:
            parser = self._parser_of(receiver)
            if parser is None:
                if not (isinstance(receiver, cst.Call) and a.imports.resolve(receiver.func) == ARGUMENT_PARSER):
                    a.foreign_parse_calls.append(node)  # argparse.ArgumentParser().parse_args() has no arguments
                return
            argv = node.args[0] if node.args and node.args[0].keyword is None else _keyword(node, "args")
            explicit = argv is not None and isinstance(argv.value, (cst.List, cst.Tuple))
            parse = ParseCall(node, parser, method, explicit, a._indexed.get(id(node)), id(node) in a._wrapped)
            parser.parse_calls.append(parse)
            a.parse_calls.append(parse)


def _comments(lines: Sequence[cst.EmptyLine]) -> List[str]:
    return [line.comment.value.strip() for line in lines if line.comment is not None]


class ScriptAnalysis:
    """What the ModelArts adaptation needs to know about one module."""

    def __init__(self, module: cst.Module) -> None:
        self.module = module
        body = list(module.body)
        # The generated block: from the statement after the begin marker to the statement
        # whose leading comments hold the end marker (or the end of the module).
        self.block: Optional[Tuple[int, int]] = None
        for i, stmt in enumerate(body):
            if BEGIN_MARKER in _comments(stmt.leading_lines):
                end = next((j for j in range(i + 1, len(body)) if END_MARKER in _comments(body[j].leading_lines)),
                           len(body))
                self.block = (i, end)
                break
        block_stmts = body[self.block[0]:self.block[1]] if self.block else []
        self.block_ids: Set[int] = {id(s) for s in block_stmts}
        user_body = [s for s in body if id(s) not in self.block_ids]
        self.imports = ImportTable.of(module.with_changes(body=user_body))
        self.main_guard: Optional[cst.If] = next((s for s in user_body if is_main_guard(s)), None)
        self.parsers: List[Parser] = []
        self.parser_functions: Dict[str, Parser] = {}
        self.dests: Set[str] = set()
        self.parse_calls: List[ParseCall] = []
        self.foreign_parse_calls: List[cst.Call] = []
        self.setup_calls: List[cst.Call] = []
        self.flag_definitions: List[cst.Call] = []
        self._scopes: Dict[int, _Scope] = {}
        self._indexed: Dict[int, cst.Subscript] = {}
        self._wrapped: Set[int] = set()
        module.visit(_Visitor(self, second_pass=False))
        module.visit(_Visitor(self, second_pass=True))
        self.header_end = self._header_end(body)

    @property
    def module_level_parser(self) -> bool:
        return any(p.body_owner is self.module for p in self.parsers)

    @property
    def main_parser(self) -> Optional[Parser]:
        """The parser the script's arguments go to: the one with the most of them."""
        if not self.parsers:
            return None
        return max(self.parsers, key=lambda p: (len(p.arguments), -self.parsers.index(p)))

    def moxing_import(self) -> Optional[cst.CSTNode]:
        for node in self.imports.import_nodes:
            names = ([dotted_name(a.name) or "" for a in node.names] if isinstance(node, cst.Import)
                     else [dotted_name(node.module) or ""] if node.module is not None else [])
            if any(n == "moxing" or n.startswith("moxing.") for n in names):
                return node
        return None

    def other_cli(self) -> Optional[Tuple[str, cst.CSTNode]]:
        for node in self.imports.import_nodes:
            if isinstance(node, cst.Import):
                names = [dotted_name(a.name) or "" for a in node.names]
            elif node.module is not None and not node.relative:
                base = dotted_name(node.module) or ""
                names = [base] + ([f"{base}.{dotted_name(a.name)}" for a in node.names]
                                  if not isinstance(node.names, cst.ImportStar) else [])
            else:
                continue
            for name in names:
                for module, label in OTHER_CLI_MODULES.items():
                    if name == module or name.startswith(module + "."):
                        return label, node
        if self.flag_definitions:  # tf.app.flags.DEFINE_string(...) through `import tensorflow as tf`
            return "tf.app.flags", self.flag_definitions[0]
        return None

    def _header_end(self, body: List[cst.BaseStatement]) -> int:
        """Index of the first statement after the module docstring and the leading imports."""
        i = 0
        if body and _statement_of(body[0]) is None and isinstance(body[0], cst.SimpleStatementLine) \
                and isinstance(body[0].body[0], cst.Expr) and isinstance(body[0].body[0].value, (cst.SimpleString, cst.ConcatenatedString)):
            i = 1
        while i < len(body):
            stmt = body[i]
            if id(stmt) in self.block_ids:
                break
            if isinstance(stmt, cst.SimpleStatementLine) and all(isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body):
                i += 1
                continue
            if isinstance(stmt, cst.Try) and all(
                isinstance(s, cst.SimpleStatementLine) and all(isinstance(x, (cst.Import, cst.ImportFrom)) for x in s.body)
                for s in stmt.body.body
            ):
                i += 1  # try: import x / except ImportError: ...
                continue
            break
        return i


# ----------------------------------------------------------------------------- decisions


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
    or `x = ...ArgumentParser(...)`. ScriptAnalysis then decides with resolved imports."""
    for stmt in module.body:
        if is_main_guard(stmt):
            return True
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Assign) and isinstance(small.value, cst.Call) \
                        and (dotted_name(small.value.func) or "").endswith("ArgumentParser"):
                    return True
    return False


@dataclass
class Plan:
    """What to do to one entry script, decided on the original tree."""

    settings: BlockSettings
    add_urls: Tuple[str, ...] = ()  # URL arguments to add to the main parser
    minimal_setup: bool = False  # no parser of its own: call modelarts_setup() in the main block


def _pick(arguments: Sequence[Argument], names: Sequence[str], generic: Sequence[str]) -> Optional[Argument]:
    by_dest = {a.dest: a for a in arguments}
    for name in names:
        arg = by_dest.get(name)
        if arg is not None and arg.plain_value:
            return arg
    for name in generic:
        arg = by_dest.get(name)
        if arg is not None and arg.plain_value and arg.path_like:
            return arg
    return None


def _normalise_dest(name: str) -> str:
    return name.strip().lstrip("-").replace("-", "_")


def plan_adaptation(ctx: Context, analysis: ScriptAnalysis) -> Optional[Plan]:
    """Decide (and report findings on the original tree); None leaves the script alone."""
    options = ctx.options
    moxing = analysis.moxing_import()
    if moxing is not None:
        ctx.finding(ctx.rules.reported(ALREADY_ADAPTED), moxing, "moxing")
        return None
    parser = analysis.main_parser
    if parser is None:
        other = analysis.other_cli()
        if other is not None:
            ctx.finding(ctx.rules.reported(OTHER_CLI), other[1], other[0])
            return None
    anchor_node: cst.CSTNode = parser.statement if parser is not None else (
        analysis.main_guard or (analysis.module.body[0] if analysis.module.body else analysis.module))
    arguments = parser.arguments if parser is not None else []
    by_dest = {a.dest: a for a in arguments}
    user_urls = {name for name in URL_ARGS if name in analysis.dests and not _generated_argument(by_dest.get(name))}

    # Data: the configured argument, else a known name, else the script's own --data_url.
    data_args: List[str] = []
    values = {"data_dir": options.modelarts_data_dir, "output_dir": options.modelarts_output_dir}
    if options.data_arg:
        name = _normalise_dest(options.data_arg)
        data_args.append(name)
        if name not in by_dest:
            api = f"--data-arg {options.data_arg}"
            ctx.finding(ctx.rules.reported(UNKNOWN_CONFIGURED_ARG), anchor_node, api)
    else:
        found = _pick(arguments, DATA_ARGS, GENERIC_DATA_ARGS)
        if found is not None:
            data_args.append(found.dest)
            if found.required:
                ctx.finding(ctx.rules.reported(REQUIRED_DATA_ARG), found.call, found.dest)
    if "data_url" in user_urls:
        data_args.append("data_url")  # the script reads its --data_url itself
    if not data_args:
        rule = ctx.rules.reported(NO_DATA_ARG)
        ctx.finding(rule, anchor_node, "data", message=rule.render_message(**values),
                    suggestion=rule.render_suggestion(**values))

    # Outputs: the configured argument, else a known name, else the script's own --train_url.
    output_arg = ""
    if options.output_arg:
        output_arg = _normalise_dest(options.output_arg)
        if output_arg not in by_dest:
            api = f"--output-arg {options.output_arg}"
            ctx.finding(ctx.rules.reported(UNKNOWN_CONFIGURED_ARG), anchor_node, api)
    else:
        found = _pick(arguments, OUTPUT_ARGS, GENERIC_OUTPUT_ARGS)
        if found is not None:
            output_arg = found.dest
        elif "train_url" in user_urls:
            output_arg = "train_url"  # the script writes to its --train_url itself
    if not output_arg:
        rule = ctx.rules.reported(NO_OUTPUT_ARG)
        ctx.finding(rule, anchor_node, "output", message=rule.render_message(**values),
                    suggestion=rule.render_suggestion(**values))

    settings = BlockSettings(options.modelarts_data_dir, tuple(data_args), output_arg, options.modelarts_output_dir,
                             options.modelarts_resume)
    plan = Plan(settings)
    if parser is None or not parser.parse_calls:
        plan.minimal_setup = True
        if analysis.foreign_parse_calls:
            call = analysis.foreign_parse_calls[0]
            api = cst.Module(body=[]).code_for_node(call)
            ctx.finding(ctx.rules.reported(PARSED_ELSEWHERE), call, api)
    if parser is not None:
        plan.add_urls = tuple(name for name in URL_ARGS if name not in analysis.dests)
    return plan


def _generated_argument(argument: Optional[Argument]) -> bool:
    """Whether an existing --data_url/--train_url argument is the one this tool adds."""
    if argument is None:
        return False
    help_arg = _keyword(argument.call, "help")
    return help_arg is not None and string_value(help_arg.value) == HELP.get(argument.dest)


# ----------------------------------------------------------------------------- the rewrite


def _parse_statement(code: str, newline: str) -> cst.BaseStatement:
    return cst.parse_module(code.replace("\n", newline)).body[0]


def _setup_call(inner: cst.BaseExpression) -> cst.Call:
    return cst.Call(func=cst.Name(SETUP_FUNCTION), args=[cst.Arg(inner)])


class _Rewriter(cst.CSTTransformer):
    """Applies a plan to the tree being transformed (its analysis locates the nodes)."""

    def __init__(self, ctx: Context, analysis: ScriptAnalysis, plan: Plan, added: List[cst.BaseStatement]) -> None:
        super().__init__()
        self.ctx = ctx
        self.analysis = analysis
        self.plan = plan
        self.main = analysis.main_parser
        self.parse_calls = {id(p.call): p for p in analysis.parse_calls}
        self.indexed = {id(p.indexed): p for p in analysis.parse_calls if p.indexed is not None}
        self.argument_lines = added  # inserted after the main parser's anchor
        self.tolerant: List[ParseCall] = []  # parse calls made tolerant (for the report)
        self.hooked: List[ParseCall] = []
        self.setup_statement: Optional[cst.SimpleStatementLine] = None

    def _hook(self, parse: ParseCall) -> bool:
        return parse.parser is self.main and not parse.wrapped and not parse.explicit_argv

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
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
            result = _setup_call(result)
            self.hooked.append(parse)
        return result

    def leave_Subscript(self, original: cst.Subscript, updated: cst.Subscript) -> cst.BaseExpression:
        parse = self.indexed.get(id(original))
        if parse is not None and self._hook(parse):
            self.hooked.append(parse)
            return _setup_call(updated)
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

    def new_setup_statement(self) -> cst.SimpleStatementLine:
        """`modelarts_setup()`, for a script with no parser of its own."""
        self.setup_statement = cst.SimpleStatementLine(body=[cst.Expr(cst.Call(func=cst.Name(SETUP_FUNCTION)))])
        return self.setup_statement

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        new_body = self._insert_arguments(original.body, updated.body)
        return updated.with_changes(body=new_body) if new_body is not None else updated


def _argument_lines(parser: Parser, names: Sequence[str], module: cst.Module) -> List[cst.BaseStatement]:
    indent = parser.depth * len(module.default_indent.expandtabs(4))
    lines = []
    for name in names:
        q = parser.quote if parser.quote == "'" else '"'
        code = f"{parser.name}.add_argument({q}--{name}{q}, help={q}{HELP[name]}{q})\n"
        code = black_format(code, line_length=max(40, 88 - indent), normalize_strings=False)
        lines.append(_parse_statement(code, module.default_newline))
    return lines


def _block_statements(settings: BlockSettings, module: cst.Module) -> List[cst.BaseStatement]:
    """The block's statements; the comments above the first one (the begin marker among them)
    are its leading lines."""
    parsed = cst.parse_module(render_block(settings).replace("\n", module.default_newline))
    stmts = list(parsed.body)
    stmts[0] = stmts[0].with_changes(leading_lines=[*parsed.header, *stmts[0].leading_lines])
    return stmts


def _code_of(module: cst.Module, stmts: Sequence[cst.BaseStatement]) -> str:
    """Statements as they are written in `module` (its indentation and newlines)."""
    return module.with_changes(body=stmts, header=[], footer=[]).code


def _install_block(module: cst.Module, analysis: ScriptAnalysis, settings: BlockSettings,
                   extra: Sequence[cst.BaseStatement]) -> Tuple[cst.Module, Optional[str]]:
    """Insert the block after the imports, or replace the one there; returns the new module and
    "inserted"/"updated" (None when the block there is already up to date)."""
    stmts = _block_statements(settings, module)
    body = list(module.body)
    blank = cst.EmptyLine()
    if analysis.block is not None:
        start, end = analysis.block
        old = body[start:end]
        lines = list(old[0].leading_lines)
        before = lines[:next(i for i, line in enumerate(lines) if line.comment and line.comment.value.strip() == BEGIN_MARKER)]
        old_code = _code_of(module, [old[0].with_changes(leading_lines=lines[len(before):]), *old[1:]])
        if old_code == _code_of(module, stmts):
            return module, None
        stmts[0] = stmts[0].with_changes(leading_lines=before + list(stmts[0].leading_lines))
        body[start:end] = stmts
        return module.with_changes(body=body), "updated"
    # The end marker is a comment above the first statement after the block: `extra`, or the
    # script's own code (whose blank lines stay as they were).
    at = analysis.header_end
    if at > 0:
        stmts[0] = stmts[0].with_changes(leading_lines=[blank, *stmts[0].leading_lines])
    end_marker = [blank, blank, cst.EmptyLine(comment=cst.Comment(END_MARKER))]
    tail = list(extra) + body[at:]
    if tail:
        lead = list(tail[0].leading_lines)
        if not lead or lead[0].comment is not None:
            lead.insert(0, blank)
        tail[0] = tail[0].with_changes(leading_lines=end_marker + lead)
        return module.with_changes(body=body[:at] + stmts + tail), "inserted"
    return module.with_changes(body=body + stmts, footer=end_marker + list(module.footer)), "inserted"


def adapt_for_modelarts(module: cst.Module, ctx: Context) -> cst.Module:
    if not ctx.options.modelarts or ctx.entry_script is False:
        return module
    if ctx.options.modelarts_boot and named_with_entry(ctx):
        folder = os.path.dirname(ctx.path)
        ctx.extra_files[os.path.join(folder, boot_file_name(ctx.path))] = render_boot(os.path.basename(ctx.path))
    chosen = entry_script_by_choice(ctx)
    if chosen is False or (chosen is None and not may_be_entry_script(ctx.module)):
        return module
    original = ScriptAnalysis(ctx.module)
    if chosen is None and original.main_guard is None and not original.module_level_parser:
        return module
    plan = plan_adaptation(ctx, original)
    if plan is None:
        return module
    current = original if module is ctx.module else ScriptAnalysis(module)

    added = _argument_lines(current.main_parser, plan.add_urls, module) if plan.add_urls else []
    rewriter = _Rewriter(ctx, current, plan, added)
    new_module = module.visit(rewriter)

    # A script with no main block and no parser: call modelarts_setup() right after the block.
    extra: List[cst.BaseStatement] = []
    if plan.minimal_setup and current.main_guard is None and not current.setup_calls:
        extra.append(rewriter.new_setup_statement())
    # The rewrite inserted statements only below the block and the imports: `current` still
    # says where they are.
    new_module, block_change = _install_block(new_module, current, plan.settings, extra)

    # Report each change where it is in the original file, as findings are: the parse call,
    # the line the arguments follow, the main block, the statement the block goes above.
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
    body = original.module.body
    following = body[original.header_end] if original.header_end < len(body) else (body[-1] if body else original.module)
    if rewriter.setup_statement is not None:
        ctx.edit(EDIT_SETUP, original.main_guard or following, f"{SETUP_FUNCTION}() added: it reads "
                 "--data_url/--train_url itself (the script has no argument parser of its own)",
                 "", f"{SETUP_FUNCTION}()")
    if added:
        main = original.main_parser
        names = " and ".join(f"--{name}" for name in plan.add_urls)
        ctx.edit(EDIT_ARGS, main.anchor or main.statement, f"{names} added to the argument parser, after this line",
                 "", names)
    if block_change is not None:
        node = body[original.block[0]] if original.block else following
        where = "here" if original.block else "above this line"
        ctx.edit(EDIT_BLOCK, node, f"ModelArts block {block_change} {where}: it copies --data_url in and the "
                 "outputs to --train_url", "", "ModelArts block")
    return new_module
