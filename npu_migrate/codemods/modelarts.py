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
reported (NPU213); eval/export/infer/pre-/postprocess scripts are not entry scripts unless named
with --entry. The decisions are made on the original tree (findings carry original line
numbers); the same analysis of the tree being transformed locates the nodes to change.
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
    RUNTIME_MODULE,
    SETUP_FUNCTION,
    black_format,
    boot_file_name,
    render_boot,
    render_runtime,
    runtime_file_name,
)
from .strings import string_value
from .syntax import is_main_guard

# How data and output arguments are recognised (argparse dests split at "_"): see
# data_arguments() and output_arguments().
DATA_WORDS = {"data", "dataset", "datasets", "dataroot", "datadir", "datapath", "corpus", "root", "image", "images",
              "img", "imgs", "attr", "attrs", "annotation", "annotations", "ann", "anno", "label", "labels",
              "train", "val", "valid", "test", "input", "inputs", "mindrecord", "tfrecord", "lmdb", "wav", "audio",
              "text", "txt", "csv", "json", "list"}
GENERIC_DATA_NAMES = {"data", "dataset", "dataroot", "datadir", "root", "corpus", "input", "data_root"}
NOT_DATA_WORDS = {"resume", "pretrain", "pretrained", "load", "checkpoint", "ckpt", "weight", "weights", "model",
                  "config", "cfg", "log", "logs", "save", "out", "outf", "output", "outputs", "result", "results",
                  "sample", "samples", "cache", "tmp", "url", "name", "type", "format", "mode", "backend", "vocab",
                  "tokenizer", "size", "num", "workers", "split", "ratio", "snapshot", "export", "dist"}
OUTPUT_WORDS = {"save", "saved", "saving", "out", "outf", "output", "outputs", "outdir", "ckpt", "ckpts", "checkpoint",
                "checkpoints", "log", "logs", "logdir", "logging", "sample", "samples", "result", "results", "snapshot",
                "snapshots", "tensorboard", "tb", "summary", "summaries", "exp", "experiment", "work", "workdir",
                "savedir", "model"}
SINGLE_OUTPUT_NAMES = {"save", "out", "outf", "output", "outputs", "outdir", "results", "logs", "logdir",
                       "checkpoints", "snapshot", "savedir", "workdir", "save_to"}
INPUT_WORDS = {"resume", "load", "pretrained", "pretrain", "restore", "init", "initial", "finetune", "teacher", "from"}
PATH_SUFFIXES = ("dir", "path", "folder", "root", "file", "prefix", "location")
NOT_OUTPUT_RE = re.compile(r"(?i)\b(load|loading|resume|resuming|pretrain\w*|restore|init\w*|continue training|"
                           r"read from|evaluate|finetune from)\b")
OUTPUT_HELP_RE = re.compile(r"(?i)\b(save[sd]?|saving|output|outputs|write|written|store[sd]?|checkpoints?|logs?|"
                            r"results?|samples?)\b")
DATA_HELP_RE = re.compile(r"(?i)\b(data|dataset|datasets|corpus|images?|annotations?|labels?)\b|数据")
PATH_TYPES = {"str", "Path", "pathlib.Path", "os.path.abspath", "os.path.expanduser", "os.path.realpath"}
PATH_WORDS_RE = re.compile(r"(?i)\b(dir|directory|folder|path|root|location)\b|目录|路径|文件夹")
# Scripts named like this are not entry scripts unless named with --entry (model-zoo layout).
HELPER_SCRIPT_WORDS = {"eval", "evaluate", "evaluation", "export", "infer", "inference", "predict", "preprocess",
                       "postprocess", "convert", "demo", "benchmark", "onnx", "om"}
# What a script started by torchrun (torch.distributed.run) reads from its environment.
LAUNCHER_VARIABLES = ("LOCAL_RANK", "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID", "GROUP_RANK")
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
FIXED_DOWNLOAD, POSITIONAL_ARG = "NPU217", "NPU218"
EDIT_ARGS, EDIT_TOLERANT, EDIT_SETUP, EDIT_IMPORT = "NPU201", "NPU202", "NPU203", "NPU204"


def _report(ctx: Context, code: str, node: cst.CSTNode, api: str, extra: str = "", **values) -> None:
    """A finding of this pass, its texts from rules/modelarts.toml filled in with `values`."""
    rule = ctx.rules.reported(code)
    values = {"data_dir": ctx.options.modelarts_data_dir, "output_dir": ctx.options.modelarts_output_dir,
              "api": api, **values}
    ctx.finding(rule, node, api, message=rule.render_message(**values) + extra,
                suggestion=rule.render_suggestion(**values))


# ----------------------------------------------------------------------------- analysis


@dataclass
class Argument:
    dest: str
    call: cst.Call
    positional: bool
    required: bool
    path_like: bool  # default/help/metavar say it holds a path
    plain_value: bool  # a single string value: no choices, action, numeric type or nargs list
    help: str = ""  # the literal text of help= (pieces of an expression joined)
    default: Optional[str] = None  # a string default
    enumerates: bool = False  # its help lists names ("cifar10 | lsun | mnist")


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



def _literal_text(node: Optional[cst.BaseExpression]) -> str:
    """The string literals in an expression, joined (`'arch: ' + ' | '.join(names)`)."""
    if node is None:
        return ""
    if isinstance(node, cst.SimpleString):
        try:
            value = node.evaluated_value
        except Exception:  # noqa: BLE001 - odd escapes: no text
            return ""
        return value if isinstance(value, str) else ""
    return " ".join(_literal_text(child) for child in node.children if isinstance(child, cst.BaseExpression))


ENUMERATION_RE = re.compile(r"\w\s*\|\s*\w|\bone of\b|\bchoose from\b|\bname of\b|\bwhich dataset\b|\{\w+,", re.IGNORECASE)


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
    numeric = type_arg is not None and (dotted_name(type_arg.value) or "") not in PATH_TYPES
    list_nargs = nargs is not None and string_value(nargs.value) != "?"
    default = _keyword(call, "default")
    default_text = string_value(default.value) if default is not None else None
    other_default = default is not None and default_text is None and not (
        isinstance(default.value, cst.Name) and default.value.value == "None")
    plain = not (numeric or list_nargs or other_default or _keyword(call, "choices") or _keyword(call, "action"))
    help_text = _literal_text(_keyword(call, "help").value) if _keyword(call, "help") is not None else ""
    texts = [help_text]
    metavar = _keyword(call, "metavar")
    if metavar is not None and string_value(metavar.value):
        texts.append(string_value(metavar.value))
    path_like = bool(default_text and (default_text.startswith((".", "~", "/")) or "/" in default_text or "\\" in default_text))
    path_like = path_like or any(PATH_WORDS_RE.search(t) for t in texts)
    enumerates = bool(ENUMERATION_RE.search(help_text))
    return Argument(dest, call, positional, required, path_like, plain, help_text, default_text, enumerates)


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
        self.defaults: List[Dict[str, str]] = []
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
        self.a.functions.add(node.name.value)
        self._enter_scope(node)
        self.function_names.append(node.name.value)
        # save_checkpoint(state, filename='checkpoint.pth.tar'): where torch.save(state, filename) saves
        self.defaults.append({p.name.value: string_value(p.default) for p in node.params.params
                              if p.default is not None and string_value(p.default)})

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.scope = self.scope.parent
        self.function_names.pop()
        self.defaults.pop()

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

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if self.second and string_value(node) in LAUNCHER_VARIABLES:
            self.a.reads_launcher_env = True

    def _note_io(self, node: cst.Call) -> None:
        """Downloads into a fixed folder, and where the script saves."""
        download = _keyword(node, "download")
        if download is not None and _is_true(download):
            root = _keyword(node, "root")
            first = next((arg for arg in node.args if arg.keyword is None and not arg.star), None)
            folder = string_value((root or first).value) if (root or first) is not None else None
            if folder:
                self.a.downloads.append((node, folder))
        name = (dotted_name(node.func) or "").rsplit(".", 1)[-1].lower()
        mode = _keyword(node, "mode") or (node.args[1] if len(node.args) > 1 and node.args[1].keyword is None else None)
        writes = name == "open" and mode is not None and set(string_value(mode.value) or "r") & set("wax")
        func = node.func
        local = (isinstance(func, cst.Name) and func.value in self.a.functions) or (
            isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self")
        if ("save" in name or name == "savefig" or writes) and not local:  # local ones: their body counts
            if writes:
                node = node.with_changes(args=node.args[:1])
            defaults = self.defaults[-1] if self.defaults else {}
            paths = [string_value(arg.value) if isinstance(arg.value, cst.SimpleString)
                     else defaults.get(arg.value.value) if isinstance(arg.value, cst.Name) else None
                     for arg in node.args]
            self.a.saves.append((node, [p for p in paths if p]))

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
        self._note_io(node)
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
        self.downloads: List[Tuple[cst.Call, str]] = []  # (call, the fixed folder it downloads into)
        self.saves: List[Tuple[cst.Call, List[str]]] = []  # (a call saving something, its literal paths)
        self.reads_launcher_env = False
        self.functions: Set[str] = set()  # names of the functions defined in the script  # reads LOCAL_RANK etc.: started by torchrun
        self._scopes: Dict[int, _Scope] = {}
        self._indexed: Dict[int, cst.Subscript] = {}
        self._wrapped: Set[int] = set()
        module.visit(_Visitor(self, second_pass=False))
        module.visit(_Visitor(self, second_pass=True))
        self.header_end = self._header_end(body)
        self.relative_imports = any(isinstance(node, cst.ImportFrom) and node.relative
                                    for node in self.imports.import_nodes)
        self.runtime_import = next((stmt for stmt in user_body if isinstance(stmt, cst.SimpleStatementLine)
                                    and any(isinstance(x, cst.ImportFrom) and x.module is not None
                                            and dotted_name(x.module) == RUNTIME_MODULE for x in stmt.body)), None)

    @property
    def module_level_parser(self) -> bool:
        return any(p.body_owner is self.module for p in self.parsers)

    @property
    def main_parser(self) -> Optional[Parser]:
        """The parser the script's arguments go to: the one with the most of them."""
        if not self.parsers:
            return None
        return max(self.parsers, key=lambda p: (len(p.arguments), -self.parsers.index(p)))

    def imported_modules(self) -> List[Tuple[cst.CSTNode, str, int]]:
        """(import node, dotted module, relative level) of every module the script imports,
        `from a import b` counted as a.b as well (b may be a module)."""
        found = []
        for node in self.imports.import_nodes:
            if isinstance(node, cst.Import):
                found += [(node, dotted_name(a.name) or "", 0) for a in node.names]
                continue
            base = dotted_name(node.module) or "" if node.module is not None else ""
            level = len(node.relative)
            found.append((node, base, level))
            if not isinstance(node.names, cst.ImportStar):
                found += [(node, ".".join(filter(None, [base, dotted_name(a.name) or ""])), level) for a in node.names]
        return found

    def moxing_import(self, project_files: Sequence[str] = (), here: str = "") -> Optional[Tuple[cst.CSTNode, str]]:
        """An import of moxing, of a helper named after it (moxing_adapter, moxing_wrapper,
        help_modelarts) or of a module of the project that imports moxing: (node, its name)."""
        for node, module, level in self.imported_modules():
            if module.split(".")[0] == RUNTIME_MODULE:
                continue  # the module this adaptation generates
            words = set(re.split(r"[._]", module.lower()))
            if "moxing" in words or "help_modelarts" in module.lower() or any("moxing" in w for w in words):
                return node, module
            if project_files and module:
                parts = module.split(".")
                folder = os.path.dirname(os.path.abspath(here))
                for _ in range(max(level - 1, 0)):
                    folder = os.path.dirname(folder)
                for candidate in (os.path.join(folder, *parts) + ".py", os.path.join(folder, *parts, "__init__.py")):
                    if candidate in project_files:
                        return node, module
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


def helper_script(path: str) -> bool:
    """eval.py, export.py, infer_onnx.py, preprocess.py, ...: not entry scripts of a training job."""
    stem = os.path.splitext(os.path.basename(path))[0].lower()
    words = set(re.split(r"[_\-.]", stem))
    return bool(words & HELPER_SCRIPT_WORDS) and not words & {"train", "training", "finetune", "pretrain"}


def _words(dest: str) -> List[str]:
    return [w for w in dest.lower().split("_") if w]


def is_output_argument(arg: Argument) -> bool:
    """--save model.pt, --outf, --output_dir, --model_save_dir, --log_dir, --sample_dir, ..."""
    if not arg.plain_value or arg.enumerates or arg.dest in URL_ARGS or NOT_OUTPUT_RE.search(arg.help):
        return False
    words = _words(arg.dest)
    if set(words) & INPUT_WORDS:
        return False  # --resume, --pretrained_path, --load_dir: read, not written
    if arg.dest in SINGLE_OUTPUT_NAMES or (len(words) == 1 and words[0] in OUTPUT_WORDS - {"model", "log"}):
        return True
    if not set(words) & OUTPUT_WORDS:
        return bool(OUTPUT_HELP_RE.search(arg.help) and arg.path_like and not DATA_HELP_RE.search(arg.help))
    if "model" in words and not ({"dir", "save", "saved", "folder", "output"} & set(words)):
        return False  # --model_path is usually what is loaded
    return words[-1] in PATH_SUFFIXES or words[-1].endswith(PATH_SUFFIXES) or arg.path_like


def is_data_argument(arg: Argument) -> bool:
    """--data, --dataroot ("path to dataset"), --data_dir, --celeba_image_dir, --attr_path, ...;
    never a dataset *name* (choices, or a help text listing names)."""
    if not arg.plain_value or arg.enumerates or arg.dest in URL_ARGS or is_output_argument(arg):
        return False
    words = _words(arg.dest)
    if set(words) & NOT_DATA_WORDS:
        return False
    if set(words) & DATA_WORDS and len(words) > 1 and words[-1] in PATH_SUFFIXES:
        return True  # data_dir, celeba_image_dir, attr_path, train_root
    if arg.dest in GENERIC_DATA_NAMES or "".join(words) in GENERIC_DATA_NAMES:
        return arg.path_like or bool(arg.default is None and DATA_HELP_RE.search(arg.help))
    if set(words) & DATA_WORDS:
        return arg.path_like
    return bool(DATA_HELP_RE.search(arg.help) and PATH_WORDS_RE.search(arg.help))


def _output_rank(arg: Argument) -> int:
    """Output folders first (their files go to the top of train_url), then the others."""
    words = set(_words(arg.dest))
    if words & {"output", "outputs", "out", "outf", "outdir", "save", "savedir", "ckpt", "checkpoint", "checkpoints",
                "model", "work", "workdir", "exp", "experiment"}:
        return 0
    return 1


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
            left = f"; its arguments are parsed by `{cst.Module(body=[]).code_for_node(call)}`: it must accept " \
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
    user_urls = {name for name in URL_ARGS if name in analysis.dests and not _generated_argument(by_dest.get(name))}

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
        api = cst.Module(body=[]).code_for_node(call.func)
        _report(ctx, FIXED_DOWNLOAD, call, api, folder=folder)
    if not data_args and not analysis.downloads:
        _report(ctx, NO_DATA_ARG, anchor_node, "data")

    # Outputs: the configured arguments, else every output-like one, else the script's own --train_url.
    if options.output_args:
        output_args = configured(options.output_args, "--output-arg")
    else:
        found = sorted((a for a in arguments if is_output_argument(a)), key=_output_rank)
        output_args = [a.dest for a in found]
        if not output_args and "train_url" in user_urls:
            output_args = ["train_url"]  # the script writes to its --train_url itself
    if not output_args:
        unseen = [call for call, paths in analysis.saves if not paths or any(os.path.isabs(p) for p in paths)]
        if unseen or not analysis.saves:
            where = (f"`{_code(unseen[0].func)}(...)` saves to a path it cannot follow" if unseen
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
    if options.modelarts_data_dir != "/cache/data":
        keywords.append(("data_dir", options.modelarts_data_dir))
    if options.modelarts_output_dir != "/cache/output":
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
            call = analysis.foreign_parse_calls[0]
            api = cst.Module(body=[]).code_for_node(call)
            _report(ctx, PARSED_ELSEWHERE, call, api)
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
    items = [cst.Element(_literal(v, quote)) for v in value]
    return cst.List(items)


def _setup_args(inner: Optional[cst.Arg], plan: Plan, quote: str) -> List[cst.Arg]:
    args = [inner] if inner is not None else []
    for name, value in plan.keywords:
        args.append(cst.Arg(keyword=cst.Name(name), value=_literal(value, quote),
                            equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                                  whitespace_after=cst.SimpleWhitespace(""))))
    return [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in args]


class _Rewriter(cst.CSTTransformer):
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
            if not new.deep_equals(updated) and _code(new) != _code(updated):
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

    def new_setup_statement(self) -> cst.SimpleStatementLine:
        """`modelarts_setup(...)`, for a script with no parser of its own."""
        call = cst.Call(func=cst.Name(SETUP_FUNCTION), args=_setup_args(None, self.plan, self.quote))
        self.setup_statement = cst.SimpleStatementLine(body=[cst.Expr(call)])
        return self.setup_statement

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        new_body = self._insert_arguments(original.body, updated.body)
        return updated.with_changes(body=new_body) if new_body is not None else updated


def _code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


def _argument_lines(parser: Parser, names: Sequence[str], module: cst.Module) -> List[cst.BaseStatement]:
    indent = parser.depth * len(module.default_indent.expandtabs(4))
    lines = []
    for name in names:
        q = parser.quote if parser.quote == "'" else '"'
        code = f"{parser.name}.add_argument({q}--{name}{q}, help={q}{HELP[name]}{q})\n"
        code = black_format(code, line_length=max(40, 88 - indent), normalize_strings=False)
        lines.append(_parse_statement(code, module.default_newline))
    return lines


IMPORT_LINE = f"from {RUNTIME_MODULE} import {SETUP_FUNCTION}  # npu-migrate: ModelArts\n"


def _install_import(module: cst.Module, analysis: ScriptAnalysis,
                    extra: Sequence[cst.BaseStatement]) -> Tuple[cst.Module, Optional[str]]:
    """`from npu_migrate_modelarts import modelarts_setup` after the imports (in place of the
    block earlier versions inserted); returns the new module and "inserted"/"replaced" (None
    when it is there already)."""
    body = list(module.body)
    if analysis.runtime_import is not None and analysis.block is None:
        if extra:
            at = body.index(analysis.runtime_import) + 1
            return module.with_changes(body=body[:at] + list(extra) + body[at:]), "inserted"
        return module, None
    # A module of a package (it imports its siblings relatively, as bert_pytorch/__main__.py does)
    # imports the module beside it relatively too: its folder is not on sys.path.
    line = IMPORT_LINE.replace("from ", "from .", 1) if analysis.relative_imports else IMPORT_LINE
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


def adapt_for_modelarts(module: cst.Module, ctx: Context) -> cst.Module:
    if not ctx.options.modelarts or ctx.entry_script is False:
        return module
    chosen = entry_script_by_choice(ctx)
    if chosen is False or (chosen is None and (helper_script(ctx.path) or not may_be_entry_script(ctx.module))):
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
        ctx.extra_files[os.path.join(folder, boot_file_name(ctx.path))] = render_boot(
            os.path.basename(ctx.path), plan.positionals, plan.distributed)

    added = _argument_lines(current.main_parser, plan.add_urls, module) if plan.add_urls else []
    rewriter = _Rewriter(ctx, current, plan, added)
    new_module = module.visit(rewriter)

    # A script with no main block and no parser: call modelarts_setup() right after the import.
    extra: List[cst.BaseStatement] = []
    if plan.minimal_setup and current.main_guard is None and not current.setup_calls:
        extra.append(rewriter.new_setup_statement())
    # The rewrite inserted statements only below the imports: `current` still says where they are.
    new_module, import_change = _install_import(new_module, current, extra)

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
        ctx.edit(EDIT_ARGS, main.anchor or main.statement, f"{names} added to the argument parser, after this line",
                 "", names)
    if import_change is not None:
        if original.block is not None:
            node, message = body[original.block[0]], "the ModelArts block of an earlier version replaced by"
        else:
            node, message = following, "added above this line:"
        ctx.edit(EDIT_IMPORT, node, f"{message} an import of {RUNTIME_MODULE}.py, generated beside the script "
                 "(it copies --data_url in and the outputs to --train_url)", "", f"import {RUNTIME_MODULE}")
    return new_module
