"""NPU operator replacements from Huawei's TF 1.15 mapping (convert_tf2npu), opt-in with
`--npu-ops` (Options.npu_ops); without it each place is reported as advice (NPU351, info):

* `tf.nn.dropout(x, keep_prob, ...)` -> `npu_ops.dropout(x, keep_prob, ...)` (NPU129). A call with
  `rate=` (TF 2 style) is left alone: npu_ops.dropout takes keep_prob, and Huawei's converter
  silently drops `rate`, which changes the model.
* a hand-written `def gelu(x): ... tanh/erf ...` (BERT's modeling.py) -> its body becomes
  `return npu_unary_ops.gelu(x)` (its docstring stays).
* `tf.layers.max_pooling2d(x, pool, stride[, padding])` with literal sizes ->
  `tf.nn.max_pool_with_argmax(x, ksize=[1, p, p, 1], strides=[1, s, s, 1], padding=...)[0]`,
  whose gradient (MaxPoolGradWithArgmax) is the fast one on the NPU.

`npu_ops` and `npu_unary_ops` come from `from npu_bridge.npu_init import *` (added if missing).
"""

from __future__ import annotations

from typing import Dict, FrozenSet, List, Optional, Tuple

import libcst as cst

from ..context import Context
from ..fast_visitor import transform, walk
from ..partial import NeedsWholeModule
from ..prefilter import LazyCodeWords
from ..rules import Rule
from .strings import string_value
from .syntax import leading_lines
from ..codes import emits

REWRITE_CODE = "NPU129"
OFFER_CODE = "NPU351"
_DROPOUT = "tensorflow.nn.dropout"
_MAX_POOL = "tensorflow.layers.max_pooling2d"
_DROPOUT_KEYWORDS = ("x", "keep_prob", "noise_shape", "seed", "name")
_GELU_NAMES = ("gelu", "gelu_fast", "gelu_new", "gelu_approx")
_GELU_OPS = ("tanh", "erf")


def _int_pair(node: cst.BaseExpression) -> Optional[Tuple[str, str]]:
    """`2` -> ("2", "2"); `(2, 3)` / `[2, 3]` -> ("2", "3"); anything else None."""
    if isinstance(node, cst.Integer):
        return node.value, node.value
    if isinstance(node, (cst.Tuple, cst.List)) and len(node.elements) == 2:
        values = [e.value for e in node.elements]
        if all(isinstance(v, cst.Integer) for v in values):
            return values[0].value, values[1].value  # type: ignore[attr-defined]
    return None


class _Plan(cst.CSTVisitor):
    def __init__(self, ctx: Context, canonical) -> None:
        super().__init__()
        self.ctx = ctx
        self.canonical = canonical
        self.calls: Dict[int, Tuple[str, str]] = {}  # id(call) -> (new code, what)
        self.functions: Dict[int, Tuple[str, int]] = {}  # id(def) -> (parameter, id of its name)
        self.offers: List[Tuple[cst.CSTNode, str, str]] = []  # (node, before, after)

    def qual(self, node: cst.BaseExpression) -> Optional[str]:
        q = self.ctx.imports.resolve(node)
        return self.canonical(q) if q is not None else None

    def code(self, node: cst.CSTNode) -> str:
        return self.ctx.module.code_for_node(node)

    def visit_Call(self, node: cst.Call) -> None:
        qual = self.qual(node.func)
        if qual == _DROPOUT:
            self._dropout(node)
        elif qual == _MAX_POOL:
            self._max_pool(node)

    def _dropout(self, node: cst.Call) -> None:
        if any(a.star for a in node.args) or len(node.args) > len(_DROPOUT_KEYWORDS):
            return
        keywords = [a.keyword.value for a in node.args if a.keyword is not None]
        if any(k not in _DROPOUT_KEYWORDS for k in keywords):
            return  # rate=: npu_ops.dropout has no such parameter
        if len(node.args) < 2 and "keep_prob" not in keywords:
            return
        func = self.code(node.func)
        new = "npu_ops.dropout" + self.code(node)[len(func):]
        self.calls[id(node)] = (new, "npu_ops.dropout")
        self.offers.append((node, f"{func}(...)", "npu_ops.dropout(...)"))

    def _max_pool(self, node: cst.Call) -> None:
        args = node.args
        if any(a.star for a in args):
            return
        positional = [a for a in args if a.keyword is None]
        named = {a.keyword.value: a for a in args if a.keyword is not None}
        order = ["inputs", "pool_size", "strides", "padding", "data_format", "name"]
        given: Dict[str, cst.Arg] = dict(zip(order, positional))
        for k, a in named.items():
            if k not in order or k in given:
                return
            given[k] = a
        if "inputs" not in given or "pool_size" not in given or "strides" not in given:
            return
        pool, stride = _int_pair(given["pool_size"].value), _int_pair(given["strides"].value)
        if pool is None or stride is None:
            return
        padding = "VALID"
        if "padding" in given:
            value = string_value(given["padding"].value)
            if value is None or value.lower() not in ("valid", "same"):
                return
            padding = value.upper()
        if "data_format" in given and string_value(given["data_format"].value) != "channels_last":
            return
        parts = [self.code(given["inputs"].value), f"ksize=[1, {pool[0]}, {pool[1]}, 1]",
                 f"strides=[1, {stride[0]}, {stride[1]}, 1]", f'padding="{padding}"']
        if "name" in given:
            parts.append(f"name={self.code(given['name'].value)}")
        prefix = self.code(node.func).rsplit("layers.max_pooling2d", 1)[0]
        nn = f"{prefix}nn.max_pool_with_argmax" if prefix.endswith(".") else "tf.nn.max_pool_with_argmax"
        if not prefix.endswith("."):
            return  # imported as a bare name: no module prefix to reach tf.nn through
        new = f"{nn}({', '.join(parts)})[0]"
        self.calls[id(node)] = (new, "max_pool_with_argmax")
        self.offers.append((node, f"{self.code(node.func)}(...)", f"{nn}(...)[0]"))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if node.name.value not in _GELU_NAMES:
            return
        params = node.params
        if (len(params.params) != 1 or isinstance(params.star_arg, (cst.Param, cst.ParamStar)) or params.kwonly_params
                or params.star_kwarg is not None or params.posonly_params):
            return
        body = self.code(node.body)
        if "npu_unary_ops" in body or not any(f".{op}(" in body for op in _GELU_OPS):
            return
        param = params.params[0].name.value
        self.functions[id(node)] = (param, id(node.name))
        self.offers.append((node.name, f"def {node.name.value}({param}): ...", f"return npu_unary_ops.gelu({param})"))


class _Apply(cst.CSTTransformer):
    def __init__(self, plan: _Plan) -> None:
        super().__init__()
        self.plan = plan

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        planned = self.plan.calls.get(id(original_node))
        if planned is None:
            return updated_node
        new = cst.parse_expression(planned[0])
        return new.with_changes(lpar=updated_node.lpar, rpar=updated_node.rpar) if isinstance(new, cst.Call) else new

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FunctionDef:
        planned = self.plan.functions.get(id(original_node))
        if planned is None or not isinstance(updated_node.body, cst.IndentedBlock):
            return updated_node
        body = list(updated_node.body.body)
        kept: List[cst.BaseStatement] = []
        first = body[0] if body else None
        if (isinstance(first, cst.SimpleStatementLine) and len(first.body) == 1 and isinstance(first.body[0], cst.Expr)
                and isinstance(first.body[0].value, (cst.SimpleString, cst.ConcatenatedString))):
            kept.append(first)  # the docstring
        new = cst.parse_statement(f"return npu_unary_ops.gelu({planned[0]})")
        replaced = body[len(kept):]
        if replaced:  # the blank lines and comments above the code it replaces stay above it
            new = new.with_changes(leading_lines=leading_lines(replaced[0]))
        kept.append(new)
        return updated_node.with_changes(body=updated_node.body.with_changes(body=kept))


def gelu_lines(code: LazyCodeWords) -> Optional[FrozenSet[Tuple[int, int]]]:
    """The lines _Plan.visit_FunctionDef reads of a file parsed partially, as (start, end)
    ranges of 0-based lines, end excluded: each function that may be a hand-written gelu (one of
    _GELU_NAMES among the identifiers of `code`, the file's words, whose text has `.tanh(` or
    `.erf(`: _gelu_functions), from its `def` line to its last line and the blank and comment
    lines after it (which libcst may count in its body). A partial text that keeps these lines
    (engine._migrate_partially asks for them: partial_text's `ranges`) holds each such function
    as the whole text does, its body and the lines after it, and what follows them starts as in
    the whole text (a kept statement, or a placeholder at that statement's indentation), so its
    offer is the whole parse's (modeling.py of bert-tensorflow, 1,038 lines, and tensor2tensor's
    common_layers.py, 4,098, were parsed whole for it). Empty when no function may be one; None
    when that cannot be told (no tree or text: LazyCodeWords.settle let the tree go; a `\r`)."""
    if code.get().identifiers.isdisjoint(n.encode() for n in _GELU_NAMES):
        return frozenset()
    return _gelu_functions(getattr(code, "_tree", None), getattr(code, "_text", None))


def _gelu_functions(tree, text: Optional[str]) -> Optional[FrozenSet[Tuple[int, int]]]:
    """gelu_lines of Python's `tree` of `text`: the functions named in _GELU_NAMES whose text
    (their `def` line to their last line, and the blank and comment lines after it) has `.tanh(`
    or `.erf(`; None when that cannot be told."""
    import ast

    if tree is None or text is None or "\r" in text:
        return None
    lines = text.split("\n")
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in _GELU_NAMES:
            end = node.end_lineno or len(lines)
            while end < len(lines) and lines[end].strip()[:1] in ("", "#"):
                end += 1
            body = "\n".join(lines[node.lineno - 1:end])
            if any(f".{op}(" in body for op in _GELU_OPS):
                found.add((node.lineno - 1, end))
    return frozenset(found)


@emits("NPU129", "NPU351")
def apply_npu_ops(module: cst.Module, ctx: Context, canonical, offer: Optional[Rule]) -> Tuple[cst.Module, bool]:
    """Rewrite (with --npu-ops) or offer (NPU351) the NPU operators. Returns the tree and
    whether it changed. Runs first on the file's own tree; when an earlier pass changed it
    (a file that also uses torch), the operators are only offered.

    On a partial parse (engine.py: a TF 1.x file whose findings alone can match) a hand-written
    gelu is read whole (its body is the test): its lines (gelu_lines) must be in the partial
    text, else they are asked for; a rewrite adds the import before the file's first import: it
    asks for the whole module."""
    if ctx.partial is not None and ctx.code is not None:
        lines = gelu_lines(ctx.code)
        if lines is None or not ctx.partial.keeps(lines):
            raise NeedsWholeModule("gelu", lines=lines or ())
    plan = _Plan(ctx, canonical)
    walk(ctx.module, plan)
    if not plan.offers:
        return module, False
    if not ctx.options.npu_ops or module is not ctx.module:
        for node, before, after in plan.offers:
            if offer is not None and not ctx.suppressed(node, OFFER_CODE):
                ctx.finding(offer, node, api=before, message=offer.render_message(api=before, to=after))
        return module, False
    if ctx.partial is not None:
        raise NeedsWholeModule("npu_ops")
    plan.offers = [o for o in plan.offers if not ctx.suppressed(o[0], REWRITE_CODE)]
    kept = {id(o[0]) for o in plan.offers}
    plan.calls = {k: v for k, v in plan.calls.items() if k in kept}
    plan.functions = {k: v for k, v in plan.functions.items() if v[1] in kept}
    if not plan.offers:
        return module, False
    for node, before, after in plan.offers:
        ctx.edit(REWRITE_CODE, node, f"`{before}` -> `{after}`: the NPU's own operator (--npu-ops)", before, after)
    return transform(module, _Apply(plan)), True
