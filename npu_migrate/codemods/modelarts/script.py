"""What the ModelArts adaptation reads in one script: where argparse parsers are built (module
level, `main()`, a `get_args()` helper), their arguments and parse calls, the generated block of
earlier versions, other command-line libraries, fixed downloads and save calls."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Set, Tuple

import libcst as cst

from ...fast_visitor import subtree
from ...imports import ImportTable, dotted_name, imported_names
from ...modelarts import BEGIN_MARKER, END_MARKER, RUNTIME_MODULE, SETUP_FUNCTION
from ..strings import string_value
from ..bindings import MODULE_SCOPE, ScopeTracker
from ..syntax import header_end, imports_beside, is_main_guard, is_true, keyword_arg, marked_block, module_beside, sole_call
from .arguments import Argument, describe_argument

# What a script started by torchrun (torch.distributed.run) reads from its environment.
LAUNCHER_VARIABLES = ("LOCAL_RANK", "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID", "GROUP_RANK")

ARGUMENT_PARSER = "argparse.ArgumentParser"
PARSE_METHODS = ("parse_args", "parse_known_args")
GROUP_METHODS = ("add_argument_group", "add_mutually_exclusive_group")
# Names of the function a boot file hands the run to (`from pkg.train import main; main()`; NPU219).
ENTRY_FUNCTION_NAMES = {"main", "run", "train", "cli", "launch", "entrypoint", "entry_point"}
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


def _method_call(call: cst.Call) -> Tuple[Optional[cst.BaseExpression], str]:
    if isinstance(call.func, cst.Attribute):
        return call.func.value, call.func.attr.value
    return None, ""


class _Visitor(ScopeTracker):
    """Two passes: the first finds where parsers are built and which functions return one; the
    second their arguments, aliases and parse calls. Parsers and their aliases are kept per
    scope (a function, a class body, the module; ScopeTracker); a name is looked up from the
    scope it is used in outwards, class bodies included."""

    def __init__(self, analysis: "ScriptAnalysis", second_pass: bool) -> None:
        super().__init__()
        self.a = analysis
        self.second = second_pass
        self.parsers = analysis._parsers  # scope -> name -> the parser built there
        self.aliases = analysis._aliases  # scope -> name -> `parser = get_parser()`, argument groups
        self.bodies: List[cst.CSTNode] = [analysis.module]
        self.statement: Optional[cst.SimpleStatementLine] = None
        self.function_names: List[str] = []
        self.defaults: List[Dict[str, str]] = []

    def _lookup(self, name: str) -> Optional[Parser]:
        scope: Optional[int] = self.scope
        while scope is not None:
            found = self.parsers.get(scope, {}).get(name) or self.aliases.get(scope, {}).get(name)
            if found is not None:
                return found
            scope = self.parents.get(scope) if scope != MODULE_SCOPE else None
        return None

    # The generated block is not the script's code: skipped (libcst calls on_leave anyway).
    def on_visit(self, node: cst.CSTNode) -> bool:
        if id(node) in self.a.block_ids:
            return False
        return super().on_visit(node)

    def on_leave(self, original_node: cst.CSTNode) -> None:
        if id(original_node) not in self.a.block_ids:
            super().on_leave(original_node)

    # -- structure ----------------------------------------------------------------------

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.a.functions.add(node.name.value)
        super().visit_FunctionDef(node)
        self.function_names.append(node.name.value)
        # save_checkpoint(state, filename='checkpoint.pth.tar'): where torch.save(state, filename) saves
        self.defaults.append({p.name.value: string_value(p.default) for p in node.params.params  # type: ignore[misc]
                              if p.default is not None and string_value(p.default)})

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        super().leave_FunctionDef(node)
        self.function_names.pop()
        self.defaults.pop()

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self.bodies.append(node)

    def leave_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self.bodies.pop()

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self.statement = node

    # -- parsers ------------------------------------------------------------------------

    def _parser_of(self, node: cst.BaseExpression) -> Optional[Parser]:
        if isinstance(node, cst.Name):
            return self._lookup(node.value)
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
                self.parsers.setdefault(self.scope, {})[name] = parser
                self.a.parsers.append(parser)
            return
        receiver, method = _method_call(value)
        if method in GROUP_METHODS and receiver is not None:
            parser = self._parser_of(receiver)  # type: ignore[assignment]
            if parser is not None:
                self.aliases.setdefault(self.scope, {})[name] = parser
        elif isinstance(value.func, cst.Name) and value.func.value in self.a.parser_functions and not value.args:
            self.aliases.setdefault(self.scope, {})[name] = self.a.parser_functions[value.func.value]

    def visit_Return(self, node: cst.Return) -> None:
        if self.second or len(self.function_names) != 1 or not isinstance(node.value, cst.Name):
            return
        parser = self.parsers.get(self.scope, {}).get(node.value.value)
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
        download = keyword_arg(node, "download")
        if download is not None and is_true(download):
            root = keyword_arg(node, "root")
            first = next((arg for arg in node.args if arg.keyword is None and not arg.star), None)
            folder = string_value((root or first).value) if (root or first) is not None else None  # type: ignore[union-attr]
            if folder:
                self.a.downloads.append((node, folder))
        name = (dotted_name(node.func) or "").rsplit(".", 1)[-1].lower()
        mode = keyword_arg(node, "mode") or (node.args[1] if len(node.args) > 1 and node.args[1].keyword is None else None)
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
            # `args = parse_args(argv)` with parse_args imported from a module of the project
            # (open_clip's main.py): that module's parser reads the job's --data_url/--train_url.
            if isinstance(node.func, cst.Name) and node.func.value.startswith(PARSE_METHODS) \
                    and a.imports.resolve(node.func):
                a.foreign_parse_calls.append(node)
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
            if stmt is not None and sole_call(stmt) is node and self.bodies[-1] is parser.body_owner:
                parser.anchor = stmt
        elif method.startswith(PARSE_METHODS):  # and fairseq's `options.parse_args_and_arch(parser)`
            parser = self._parser_of(receiver)
            if method not in PARSE_METHODS:
                if parser is None:
                    a.foreign_parse_calls.append(node)
                return
            if parser is None:
                if not (isinstance(receiver, cst.Call) and a.imports.resolve(receiver.func) == ARGUMENT_PARSER):
                    a.foreign_parse_calls.append(node)  # argparse.ArgumentParser().parse_args() has no arguments
                return
            argv = node.args[0] if node.args and node.args[0].keyword is None else keyword_arg(node, "args")
            explicit = argv is not None and isinstance(argv.value, (cst.List, cst.Tuple))
            parse = ParseCall(node, parser, method, explicit, a._indexed.get(id(node)), id(node) in a._wrapped)
            parser.parse_calls.append(parse)
            a.parse_calls.append(parse)


class ScriptAnalysis:
    """What the ModelArts adaptation needs to know about one module."""

    def __init__(self, module: cst.Module) -> None:
        self.module = module
        body = list(module.body)
        # The generated block: from the statement after the begin marker to the statement
        # whose leading comments hold the end marker (or the end of the module).
        self.block: Optional[Tuple[int, int]] = marked_block(body, BEGIN_MARKER, END_MARKER)
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
        self._parsers: Dict[int, Dict[str, Parser]] = {}
        self._aliases: Dict[int, Dict[str, Parser]] = {}
        self._indexed: Dict[int, cst.Subscript] = {}
        self._wrapped: Set[int] = set()
        module.visit(_Visitor(self, second_pass=False))
        module.visit(_Visitor(self, second_pass=True))
        self.header_end = header_end(body, lambda i, stmt: i if id(stmt) in self.block_ids else None)
        self.relative_imports = any(isinstance(node, cst.ImportFrom) and node.relative
                                    for node in self.imports.import_nodes)
        self.runtime_import = next((stmt for stmt in user_body if imports_beside(stmt, RUNTIME_MODULE)), None)

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
        found: List[Tuple[cst.CSTNode, str, int]] = []
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

    def handover_call(self) -> Optional[cst.Call]:
        """In a launcher (no parser of its own): the call of another module's entry function
        (`main()` after `from pkg.train import main`, `pkg.cli.main()`), which usually parses
        the command line itself."""
        imported: Set[str] = set()  # the names the imports bind
        for node in self.imports.import_nodes:
            if isinstance(node.names, cst.ImportStar):
                continue
            for alias in node.names:
                if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                    imported.add(alias.asname.name.value)
                else:
                    imported.add((dotted_name(alias.name) or "").split(".")[0])
        if not imported:
            return None
        where = [self.main_guard] if self.main_guard is not None else [
            s for s in self.module.body if id(s) not in self.block_ids]
        found: List[cst.Call] = []
        # `class TrainModel(ParlaiScript): ...` then `TrainModel.main()` (ParlAI's scripts): a class
        # of the script's own that does not define the method called inherits it from an
        # imported base, so that base's module runs (and parses) the command line.
        inherited: Dict[str, Set[str]] = {}  # the script's class -> the methods it defines
        for stmt in self.module.body:
            if isinstance(stmt, cst.ClassDef) and id(stmt) not in self.block_ids and any(
                    (dotted_name(base.value) or "").split(".")[0] in imported for base in stmt.bases
                    if base.keyword is None):
                inherited[stmt.name.value] = {s.name.value for s in stmt.body.body if isinstance(s, cst.FunctionDef)}

        class Calls(cst.CSTVisitor):
            def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
                return False  # a function the launcher defines is not run by being defined

            def visit_ClassDef(self, node: cst.ClassDef) -> bool:
                return False

            def visit_Call(self, node: cst.Call) -> None:
                name = dotted_name(node.func) or ""
                head, _, last = name.rpartition(".")
                if last.lower() not in ENTRY_FUNCTION_NAMES:
                    return
                if (head or last).split(".")[0] in imported and (head or last not in functions):
                    found.append(node)
                elif head in inherited and last not in inherited[head]:
                    found.append(node)

        functions = self.functions  # a function of the launcher's own shadows an imported one
        for stmt in where:
            stmt.visit(Calls())
        if not found and self.main_guard is not None:
            # `if __name__ == "__main__": main()` with `def main(): ASRTask.main(cmd=cmd)` (ESPnet's
            # espnet2/bin/*_train.py): the launcher's own entry function hands the run over.
            called = {n.func.value for n in subtree(self.main_guard)
                      if isinstance(n, cst.Call) and isinstance(n.func, cst.Name)}
            for stmt in self.module.body:
                if isinstance(stmt, cst.FunctionDef) and stmt.name.value in called and id(stmt) not in self.block_ids:
                    for inner in stmt.body.body:
                        inner.visit(Calls())
        return found[0] if found else None

    def moxing_import(self, project_files: Sequence[str] = (), here: str = "") -> Optional[Tuple[cst.CSTNode, str]]:
        """An import of moxing, of a helper named after it (moxing_adapter, moxing_wrapper,
        help_modelarts) or of a module of the project that imports moxing: (node, its name)."""
        for node, module, level in self.imported_modules():
            if module.split(".")[0] == RUNTIME_MODULE or module_beside(module, RUNTIME_MODULE):
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
            for name in imported_names(node):
                for module, label in OTHER_CLI_MODULES.items():
                    if name == module or name.startswith(module + "."):
                        return label, node
        if self.flag_definitions:  # tf.app.flags.DEFINE_string(...) through `import tensorflow as tf`
            return "tf.app.flags", self.flag_definitions[0]
        return None
