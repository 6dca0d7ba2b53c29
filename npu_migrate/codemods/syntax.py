"""Readings and makings of libcst nodes that several passes share: call arguments (by position
or keyword, adding one, a new call), a node's source, the options an argparse `add_argument`
call adds, and the `if __name__ == "__main__":` guard."""

from __future__ import annotations

import os

from typing import TYPE_CHECKING, Callable, List, Optional, Sequence, Tuple, Union, cast

import libcst as cst

from ..imports import dotted_name
from .strings import string_value

if TYPE_CHECKING:
    from typing_extensions import TypeGuard


def option_names(call: cst.Call) -> List[str]:
    """The option strings of an argparse `add_argument` call, normalised (`--dist-backend` ->
    `dist_backend`), plus its `dest=`."""
    names = []
    for arg in call.args:
        if arg.keyword is None and arg.star == "":
            value = string_value(arg.value)
            if value is not None:
                names.append(value.lstrip("-").replace("-", "_"))
        elif arg.keyword is not None and arg.keyword.value == "dest":
            value = string_value(arg.value)
            if value is not None:
                names.append(value)
    return names


def is_main_guard(node: cst.CSTNode) -> TypeGuard[cst.If]:
    """`if __name__ == "__main__":` (either operand order, any quotes)."""
    if not isinstance(node, cst.If) or not isinstance(node.test, cst.Comparison):
        return False
    test = node.test
    if len(test.comparisons) != 1 or not isinstance(test.comparisons[0].operator, cst.Equal):
        return False
    operands = [test.left, test.comparisons[0].comparator]
    names = [o for o in operands if isinstance(o, cst.Name) and o.value == "__name__"]
    return len(names) == 1 and any(string_value(o) == "__main__" for o in operands)


def positional(call: cst.Call) -> List[Tuple[int, cst.Arg]]:
    """(index in call.args, arg) of the plain positional arguments."""
    return [(i, a) for i, a in enumerate(call.args) if a.keyword is None and a.star == ""]


def has_star(call: cst.Call) -> bool:
    return any(a.star for a in call.args)


def find_argument(call: cst.Call, keyword: str, position: Optional[int]) -> Optional[int]:
    """The index in call.args of the argument `keyword` (given by name or at `position`)."""
    for i, a in enumerate(call.args):
        if a.keyword is not None and a.keyword.value == keyword:
            return i
    if position is not None:
        plain = positional(call)
        if len(plain) > position and not any(a.star == "*" for _, a in plain[:position]):
            return plain[position][0]
    return None


def keyword_arg(call: cst.Call, name: str) -> Optional[cst.Arg]:
    """The argument given as `name=...`."""
    return next((a for a in call.args if a.keyword is not None and a.keyword.value == name), None)


def leading_lines(stmt: cst.BaseStatement) -> Sequence[cst.EmptyLine]:
    """The comments and blank lines above a statement (every statement has them; libcst's
    `BaseStatement` type does not say so)."""
    return cast(Union[cst.SimpleStatementLine, cst.BaseCompoundStatement], stmt).leading_lines


def comment_texts(lines: Sequence[cst.EmptyLine]) -> List[str]:
    """The comments of a node's leading lines, stripped."""
    return [line.comment.value.strip() for line in lines if line.comment is not None]


def marked_block(body: Sequence[cst.BaseStatement], begin: str, end: str) -> Optional[Tuple[int, int]]:
    """(first, end) indexes of the statements a generated block spans: from the statement whose
    leading comments hold `begin` to the one whose leading comments hold `end` (or the end of
    the body); None without one."""
    for i, stmt in enumerate(body):
        if begin in comment_texts(leading_lines(stmt)):
            last = next((j for j in range(i + 1, len(body)) if end in comment_texts(leading_lines(body[j]))), len(body))
            return i, last
    return None


def _is_import_line(stmt: cst.CSTNode) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and all(
        isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body)


def header_end(body: Sequence[cst.BaseStatement],
               boundary: Optional[Callable[[int, cst.BaseStatement], Optional[int]]] = None) -> int:
    """Index of the first statement after the module docstring and the leading imports (import
    lines, `try: import ...`): where generated code goes. `boundary(i, statement)` may end the
    header at a statement, returning the index to use instead."""
    i = 0
    if body and isinstance(body[0], cst.SimpleStatementLine) and isinstance(body[0].body[0], cst.Expr) \
            and isinstance(body[0].body[0].value, (cst.SimpleString, cst.ConcatenatedString)):
        i = 1
    while i < len(body):
        stmt = body[i]
        if boundary is not None:
            at = boundary(i, stmt)
            if at is not None:
                return at
        if _is_import_line(stmt) or (isinstance(stmt, cst.Try) and all(_is_import_line(s) for s in stmt.body.body)):
            i += 1
            continue
        break
    return i


def sole_call(stmt: cst.CSTNode) -> Optional[cst.Call]:
    """The call a `call(...)` statement line consists of, else None."""
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr) \
            and isinstance(stmt.body[0].value, cst.Call):
        return stmt.body[0].value
    return None


def is_none(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def self_attribute(node: cst.CSTNode) -> Optional[str]:
    """`name` when `node` is `self.name`; None for anything else."""
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self":
        return node.attr.value
    return None


def is_true(arg: Optional[cst.Arg]) -> bool:
    """An argument whose value is the literal `True`."""
    return arg is not None and isinstance(arg.value, cst.Name) and arg.value.value == "True"


def node_code(node: cst.CSTNode) -> str:
    """The source of a node, in libcst's default layout (not the file's newline)."""
    return cst.Module(body=[]).code_for_node(node)


def _keyword_equal(call: cst.Call) -> cst.AssignEqual:
    """The `=` style of the call's own keyword arguments (`a=1` or `a = 1`)."""
    for a in call.args:
        if a.keyword is not None and isinstance(a.equal, cst.AssignEqual):
            return a.equal
    return cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))


def add_keyword_argument(call: cst.Call, keyword: str, value: cst.BaseExpression) -> cst.Call:
    """`call` with `keyword=value` appended, in the call's own layout: one line stays one line,
    one argument per line (with or without a trailing comma) stays so."""
    new_arg = cst.Arg(value=value, keyword=cst.Name(keyword), equal=_keyword_equal(call))
    args = list(call.args)
    if not args:
        return call.with_changes(args=[new_arg])
    last = args[-1]
    separators = [a.comma for a in args[:-1]]
    one_per_line = bool(separators) and all(
        isinstance(c, cst.Comma) and isinstance(c.whitespace_after, cst.ParenthesizedWhitespace) for c in separators
    )
    if one_per_line:
        separator = separators[-1]
    elif not separators and isinstance(last.comma, cst.Comma) and isinstance(last.comma.whitespace_after, cst.ParenthesizedWhitespace):
        # f(\n    a,\n): the one argument sits on its own line after the parenthesis.
        separator = cst.Comma(whitespace_after=call.whitespace_before_args)
    else:
        separator = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    # The new argument takes the old last one's place before `)`: its trailing comma, and the
    # line break before the parenthesis.
    args[-1] = last.with_changes(comma=separator, whitespace_after_arg=cst.SimpleWhitespace(""))
    args.append(new_arg.with_changes(comma=last.comma, whitespace_after_arg=last.whitespace_after_arg))
    return call.with_changes(args=args)


def new_call(func: str, values: Sequence[cst.BaseExpression], keywords: Sequence[Tuple[str, cst.BaseExpression]] = ()) -> cst.Call:
    args = [cst.Arg(value=v) for v in values]
    args += [
        cst.Arg(
            value=v,
            keyword=cst.Name(k),
            equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
        )
        for k, v in keywords
    ]
    for i in range(len(args) - 1):
        args[i] = args[i].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    return cst.Call(func=cst.parse_expression(func), args=args)


def own_package(module: cst.Module, path: str) -> Optional[str]:
    """The dotted name the script's folder is imported by, when the script is a module of that
    package and imports the package absolutely at module level (basicsr/train.py, beside an
    __init__.py, runs `from basicsr.data import ...`): a module beside it is then imported as
    `basicsr.<module>` whether the script runs as a script or is imported by its package
    (basicsr/__init__.py imports it): a bare `import <module>` finds it only in the first case,
    when the script's folder is on sys.path. The same when the script imports the top package of
    the packages its folder is in (espnet2/bin/asr_train.py runs `from espnet2.tasks.asr import
    ...` and is run as `python -m espnet2.bin.asr_train`: `espnet2.bin`), or a package beside
    that top package (fairseq_cli/train.py runs `from fairseq import ...`, found only with the
    folder above on sys.path, where `fairseq_cli` is found too; it is also imported as
    `fairseq_cli.train`, by the `fairseq-train` console script). None otherwise, and None for a
    script that imports a module beside it by its bare name (mindarmour's
    examples/privacy/diff_privacy/lenet5_dp.py: `from lenet5_config import ...`): it runs only
    with its own folder on sys.path, where a bare import of the generated module works too."""
    imported = _module_level_imports(module)
    folder = os.path.dirname(os.path.abspath(path))
    if path and any(_beside(folder, name.split(".")[0]) for name in imported):
        return None
    return script_package(module, path, imported)


def script_package(module: cst.Module, path: str, imported: Optional[List[str]] = None) -> Optional[str]:
    """The dotted name of the package the script's folder is, when the script imports that
    package, its top package or a package beside the top one absolutely (own_package): the
    folder holding the top package must then be on sys.path for the script to run (the ModelArts
    boot file starts it there). None otherwise."""
    if imported is None:
        imported = _module_level_imports(module)
    folder = os.path.dirname(os.path.abspath(path))
    if not path or not os.path.isfile(os.path.join(folder, "__init__.py")):
        return None
    folders = folder.split(os.sep)
    # The packages the script's folder is in, innermost first (espnet2/bin, espnet2).
    chain = [folder]
    while os.path.isfile(os.path.join(os.path.dirname(chain[-1]), "__init__.py")):
        chain.append(os.path.dirname(chain[-1]))
    top, root = os.path.basename(chain[-1]), os.path.dirname(chain[-1])
    found = False
    for name in imported:
        parts = name.split(".")
        for k in range(min(len(parts), len(folders) - 1), 0, -1):
            if parts[:k] == folders[-k:]:
                return ".".join(parts[:k])
        found = found or parts[0] == top or os.path.isfile(os.path.join(root, parts[0], "__init__.py"))
    dotted = [os.path.basename(f) for f in reversed(chain)]
    if found and all(n.isidentifier() for n in dotted):
        return ".".join(dotted)
    return None


def _module_level_imports(module: cst.Module) -> List[str]:
    """The modules the module imports absolutely at module level, in order."""
    imported: List[str] = []
    for stmt in module.body:
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            if isinstance(small, cst.Import):
                imported += filter(None, (dotted_name(alias.name) for alias in small.names))
            elif isinstance(small, cst.ImportFrom) and not small.relative and small.module is not None:
                imported += filter(None, [dotted_name(small.module)])
    return imported


def _beside(folder: str, name: str) -> bool:
    """Whether `name` is a module or package in `folder` (what a bare import of it finds there)."""
    return os.path.isfile(os.path.join(folder, name + ".py")) or \
        os.path.isfile(os.path.join(folder, name, "__init__.py"))


def module_beside(name: str, module: str) -> bool:
    """Whether an import of `name` imports the generated `module` beside the script: as it is
    (`npu_migrate_distributed`, relatively too) or through the script's package (own_package)."""
    return name == module or name.endswith("." + module)


def imports_beside(stmt: cst.CSTNode, module: str) -> bool:
    """Whether a statement imports the generated `module` beside the script (module_beside):
    an import line, or the `try: from pkg.<module> import ... except ImportError: from <module>
    import ...` a package's script gets (import_beside)."""
    if isinstance(stmt, cst.Try) and stmt.body.body:
        stmt = stmt.body.body[0]
    return isinstance(stmt, cst.SimpleStatementLine) and any(
        isinstance(x, cst.ImportFrom) and x.module is not None and module_beside(dotted_name(x.module) or "", module)
        for x in stmt.body)


def import_beside(prefix: str, comment: str, import_of: Callable[[str], str]) -> str:
    """The import of a module generated beside a script (`import_of(prefix)`: its code, with
    `prefix` before the module's name; beside_prefix). Through the package ("<package>."), for
    the console script, `python -m pkg.train` and `import pkg`, with the bare import as the
    fallback: a script run from a checkout whose package is installed from elsewhere (without the
    generated module) finds it beside itself, on sys.path[0] (fairseq_cli/train.py). `comment`
    marks the statement."""
    if prefix in ("", "."):
        return import_of(prefix).replace("\n", f"  {comment}\n", 1)

    def indented(code: str) -> str:
        return "".join("    " + line if line.strip() else line for line in code.splitlines(True))

    return (f"try:  {comment}\n{indented(import_of(prefix))}"
            f"except ImportError:  # run from its folder, its package installed without it\n{indented(import_of(''))}")


def beside_prefix(relative: bool, module: cst.Module, path: str) -> str:
    """What a script puts before the name of a generated module beside it: "." in a module of a
    package that imports relatively (`relative`), "<package>." in one that imports its own
    package absolutely (own_package), else nothing (the script's folder is on sys.path)."""
    if relative:
        return "."
    package = own_package(module, path)
    return package + "." if package else ""
