"""Findings that no rewrite depends on: imports of CUDA-only libraries, calls of APIs (with
particular arguments), and method calls.

Runs after the framework passes, for every framework, and visits `ctx.module` -- the ORIGINAL
tree -- so positions are the file's own. The rules are `[[finding]]` entries of kind `import`,
`call`, `call-kwarg` and `method` (see rules.py); kind `api` is reported by the torch pass,
which knows which `torch.cuda` names it rewrites, and kind `file` by the front end for the
file's suffix (frontends/cuda_sources.py).
"""

from __future__ import annotations

import re
from typing import Dict, Iterator, Set

import libcst as cst

from ..context import Context
from ..engine import register_codemod
from ..imports import dotted_name
from ..model import Severity
from ..rules import Rule, RuleSet

# Exceptions whose handler makes an import optional: `try: import cupy except ImportError: …`.
_IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}
_OPTIONAL_IMPORT_NOTE = (
    " (optional: imported in `try: … except ImportError`, so the code has a fallback; check that"
    " the fallback is what runs on the NPU)"
)

# Rule-set fingerprint -> regex of the words one of which a file needs for any rule here.
_WORDS: Dict[str, "re.Pattern[str]"] = {}


def _words(rules: RuleSet) -> "re.Pattern[str]":
    pattern = _WORDS.get(rules.fingerprint)
    if pattern is None:
        words: Set[str] = {name.split(".", 1)[0] for name in rules.finding_import}
        words |= {name.rsplit(".", 1)[-1] for name in rules.finding_call}
        words |= set(rules.finding_method)
        alternatives = "|".join(map(re.escape, sorted(words, key=lambda w: (-len(w), w))))
        pattern = re.compile(r"\b(?:%s)\b" % alternatives) if words else re.compile(r"(?!)")
        _WORDS[rules.fingerprint] = pattern
    return pattern


@register_codemod(300)
def report_findings(module: cst.Module, ctx: Context) -> cst.Module:
    """Record the findings; the tree itself is returned unchanged."""
    if _words(ctx.rules).search(ctx.text) is not None:
        ctx.module.visit(FindingVisitor(ctx))
    return module


def uses_device(ctx: Context) -> bool:
    """Whether the file itself puts work on the accelerator: the torch pass migrated something
    to the NPU (or found NPU code already), or the file imports torch_npu."""
    return ctx.needs_torch_npu or ctx.imports.imports_module("torch_npu")


class FindingVisitor(cst.CSTVisitor):
    def __init__(self, ctx: Context) -> None:
        super().__init__()
        self.ctx = ctx
        self.rules = ctx.rules
        self._in_context = {
            "any": True,
            "torch": "torch" in ctx.frameworks or ctx.imports.imports_module("torch"),
            "device": uses_device(ctx),
        }
        self._optional_blocks: Set[int] = set()  # ids of `try:` bodies guarded by except ImportError
        self._optional_depth = 0

    def applies(self, rule: Rule) -> bool:
        return self._in_context.get(rule.context, False)

    # -- optional imports ------------------------------------------------------------------

    def visit_Try(self, node: cst.Try) -> None:
        if any(_catches_import_error(h) for h in node.handlers):
            self._optional_blocks.add(id(node.body))

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        if id(node) in self._optional_blocks:
            self._optional_depth += 1

    def leave_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        if id(node) in self._optional_blocks:
            self._optional_depth -= 1

    def visit_SimpleStatementSuite(self, node: cst.SimpleStatementSuite) -> None:
        self.visit_IndentedBlock(node)  # type: ignore[arg-type]  # `try: import x` on one line

    def leave_SimpleStatementSuite(self, node: cst.SimpleStatementSuite) -> None:
        self.leave_IndentedBlock(node)  # type: ignore[arg-type]

    # -- imports ---------------------------------------------------------------------------

    def _report_import(self, rule: Rule, module: str, node: cst.CSTNode) -> None:
        if not self.applies(rule):
            return
        if self._optional_depth:
            self.ctx.finding(
                rule,
                node,
                api=module,
                message=rule.render_message(api=module) + _OPTIONAL_IMPORT_NOTE,
                severity=Severity.INFO,
            )
        else:
            self.ctx.finding(rule, node, api=module)

    def visit_Import(self, node: cst.Import) -> bool:
        for alias in node.names:
            module = dotted_name(alias.name)
            rule = self.rules.import_finding(module) if module else None
            if rule is not None:
                self._report_import(rule, module, alias)
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        if node.relative or node.module is None:
            return False
        module = dotted_name(node.module)
        if module is None:
            return False
        rule = self.rules.import_finding(module)
        if rule is not None:
            self._report_import(rule, module, node)
            return False
        if isinstance(node.names, cst.ImportStar):
            return False
        for alias in node.names:  # `from numba import cuda`: the submodule is what is flagged
            name = dotted_name(alias.name)
            sub = f"{module}.{name}"
            rule = self.rules.import_finding(sub) if name else None
            if rule is not None:
                self._report_import(rule, sub, alias)
        return False

    # -- calls -----------------------------------------------------------------------------

    def visit_Call(self, node: cst.Call) -> None:
        qual = self.ctx.imports.resolve(node.func)
        if qual is not None:
            for rule in self.rules.finding_call.get(qual, ()):
                if self.applies(rule) and arguments_match(rule, node):
                    self.ctx.finding(rule, node, api=qual)
        elif isinstance(node.func, cst.Attribute):
            name = node.func.attr.value
            for rule in self.rules.finding_method.get(name, ()):
                if self.applies(rule):
                    self.ctx.finding(rule, node, api=f".{name}()")


def _catches_import_error(handler: cst.ExceptHandler) -> bool:
    if handler.type is None:  # bare `except:`
        return True
    types = handler.type.elements if isinstance(handler.type, cst.Tuple) else [handler.type]
    for t in types:
        expr = t.value if isinstance(t, cst.Element) else t
        name = dotted_name(expr)
        if name is not None and name.rsplit(".", 1)[-1] in _IMPORT_ERRORS:
            return True
    return False


# ----------------------------------------------------------------------------- arguments


def arguments_match(rule: Rule, call: cst.Call) -> bool:
    """Whether a call rule's argument condition holds for `call`.

    No `keywords`/`positions`: every call matches. Otherwise one of those arguments must be
    given and not an empty literal (None, False, "", [], ...); with `suffixes` it must also
    contain a string literal that ends with one of them (`sources=["k.cu"]`).
    Arguments passed through `*args`/`**kwargs` are unknown, so they never match.
    """
    if not rule.keywords and not rule.positions:
        return True
    for value in _selected_arguments(rule, call):
        if rule.suffixes:
            if any(s.endswith(rule.suffixes) for s in _string_literals(value)):
                return True
        elif not _is_empty_literal(value):
            return True
    return False


def _selected_arguments(rule: Rule, call: cst.Call) -> Iterator[cst.BaseExpression]:
    positional = []
    for arg in call.args:
        if arg.star:
            break  # positions after a *args are unknown
        if arg.keyword is None:
            positional.append(arg.value)
    for index in rule.positions:
        if index < len(positional):
            yield positional[index]
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value in rule.keywords:
            yield arg.value


def _string_literals(node: cst.CSTNode) -> Iterator[str]:
    """The text of every string literal in an expression (the literal parts of f-strings)."""
    if isinstance(node, cst.SimpleString):
        try:
            value = node.evaluated_value
        except Exception:  # an escape libcst cannot evaluate
            return
        if isinstance(value, str):
            yield value
        return
    if isinstance(node, cst.FormattedString):
        last = node.parts[-1] if node.parts else None
        if isinstance(last, cst.FormattedStringText):
            yield last.value
        return
    if isinstance(node, cst.ConcatenatedString):
        yield "".join(_string_literals(node.left)) + "".join(_string_literals(node.right))
        return
    for child in node.children:
        yield from _string_literals(child)


def _is_empty_literal(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.Name):
        return node.value in ("None", "False")
    if isinstance(node, (cst.List, cst.Tuple, cst.Set)):
        return not node.elements
    if isinstance(node, cst.Dict):
        return not node.elements
    if isinstance(node, cst.SimpleString):
        try:
            return node.evaluated_value in ("", b"")
        except Exception:
            return False
    if isinstance(node, cst.Integer):
        return node.value == "0"
    return False
