"""The method and attribute kinds (kinds/method.py, kinds/attribute.py) in the PyTorch pass:
`x.cuda(...)` -> `x.npu(...)` and `x.is_cuda` -> `x.is_npu` on any receiver that is not an
imported module, and a class's own `def cuda(self)` with its callers.
"""

from __future__ import annotations

import re
from typing import Dict, FrozenSet, Optional, Set

import libcst as cst

from ...codes import applies
from ...imports import dotted_name
from ..strings import string_value, with_body
from .state import TorchKind, TorchState

# What torch's own methods that method rules rename accept (Tensor.cuda / Module.cuda): at most
# that many positional arguments, only these keywords. A call that does not fit is some other
# object's method (hqq's `quantizer.cuda(qtensor, meta=meta)`) and stays as it is.
METHOD_SIGNATURES = {"cuda": (2, {"device", "non_blocking", "memory_format"})}
# Decorators that make a `def` something other than a method called as `x.name(...)`.
NOT_A_PLAIN_METHOD = {"property", "cached_property", "setter", "getter", "deleter", "abstractproperty"}


def command_line_flag_receivers(text: str, attribute: str) -> FrozenSet[str]:
    """The names a script binds its parsed command line to (`args = parser.parse_args()`), when
    it declares an option of that attribute's name (`parser.add_argument("--is_cuda", ...)`,
    `dest="is_cuda"`): `args.is_cuda` is then the user's own flag, not a tensor's `is_cuda`,
    and renamed it would be an AttributeError. Empty when it declares no such option."""
    if attribute not in text:
        return frozenset()
    spelled = re.escape(attribute).replace("_", "[-_]")
    option = (rf"""add_argument\((?:\s*(?:'[^']*'|"[^"]*")\s*,)*\s*['"]--{spelled}['"]"""
              rf"""|\bdest\s*=\s*['"]{re.escape(attribute)}['"]""")
    if not re.search(option, text):
        return frozenset()
    bound = re.finditer(r"^[ \t]*(\w+)\s*(?:,\s*\w+\s*)?=\s*[\w.()]*\bparse_(?:known_)?args\(", text, re.MULTILINE)
    return frozenset(m.group(1) for m in bound)


def declares_attribute(text: str, attribute: str) -> bool:
    """Whether the file makes `attribute` its own: assigns it on some object (`self.is_cuda =
    cuda`: a tensor's is_cuda is read-only, so that object is not a tensor), defines it (`def
    is_cuda(self)`, a property) or declares it as a typed field on a line of its own (`is_cuda: bool = False`, a dataclass;
    not a parameter of a signature split over lines, which ends in a comma).
    Its readers there (`if self.is_cuda:`, `model.is_cuda` in the caller's code) are then the
    user's attribute, not certainly a tensor's: renamed, the attribute and its readers elsewhere
    (pyro's public `MuE.is_cuda`) would part."""
    if attribute not in text:
        return False
    name = re.escape(attribute)
    return re.search(rf"\.\s*{name}\s*=(?!=)|\bdef\s+{name}\s*\(|^[ \t]*{name}[ \t]*:[ \t]*bool[ \t]*(?:=[^,\n]*)?$",
                     text, re.MULTILINE) is not None


def fits_signature(call: cst.Call, method: str) -> bool:
    if method not in METHOD_SIGNATURES:
        return True
    max_positional, keywords = METHOD_SIGNATURES[method]
    positional = [a for a in call.args if a.keyword is None and a.star == ""]
    named = {a.keyword.value for a in call.args if a.keyword is not None}
    return len(positional) <= max_positional and named <= keywords


@applies("method", "attribute")
class MethodRewrites(TorchKind):
    """The applier of the method and attribute kinds: the walk (codemods/torch/__init__.py)
    calls its `_rename_method` from leave_Call, its `_rename_attribute` from leave_Attribute
    (a name not imported) and its leave_ClassDef. Its own state: the names the script binds its
    parsed command line to, per attribute, when it declares a flag of that name (made once)."""

    def __init__(self, state: TorchState) -> None:
        super().__init__(state)
        self._flag_receivers: Dict[str, FrozenSet[str]] = {}
        self._declared: Dict[str, bool] = {}  # attribute -> declares_attribute(text, attribute)

    def _declared_here(self, attribute: str) -> bool:
        """The file makes the attribute its own (declares_attribute), or a class of the run's
        files defines it (Options.own_attributes: pyg's `Data.is_cuda`, read as `data.is_cuda`
        in loader/utils.py): its readers here are not certainly a tensor's."""
        if attribute not in self._declared:
            self._declared[attribute] = (attribute in self.ctx.options.own_attributes
                                         or declares_attribute(self.ctx.text, attribute))
        return self._declared[attribute]

    def _rename_method(self, original: cst.Call, updated: cst.Call, qual: Optional[str]) -> cst.Call:
        """`.cuda(...)` on any receiver that is not an imported module (`qual` is None)."""
        rs = self.ctx.rules
        func = updated.func
        if isinstance(func, cst.Attribute) and qual is None:
            rule = rs.method.get(func.attr.value)
            if rule is not None and not fits_signature(original, func.attr.value):
                rule = None
            if rule is not None and not self.ctx.suppressed(original, rule.code):
                self.ctx.edit(
                    rule,
                    original.func.attr,  # type: ignore[attr-defined]
                    rule.render_message(before=f".{func.attr.value}()", after=f".{rule.to}()"),
                    func.attr.value,
                    rule.to,
                )
                self.ctx.require_import("torch_npu")
                updated = updated.with_changes(func=func.with_changes(attr=cst.Name(rule.to)))
            elif func.attr.value in {r.to for r in rs.method.values()}:
                self.ctx.require_import("torch_npu")  # half-migrated code: `.npu()` already there
        return updated

    def _member_test(self, original: cst.Call, updated: cst.Call, qual: Optional[str]) -> cst.Call:
        """`hasattr(obj, "cuda")` where the file calls `obj.cuda(...)`: the name tested follows the
        method it guards (torchdrug 0.2.1 utils/torch.py: `if hasattr(obj, "cuda"): return
        obj.cuda(*args, **kwargs)`, the function that moves every batch; its Graph class's own
        `def cuda` became `def npu` with its callers, so the test kept as "cuda" was False for a
        graph and the function raised TypeError). Only for a receiver that is not an imported
        name (as `_rename_method`), and only where the file calls that method on it: the
        attribute of an object that has no such call (`hasattr(args, "cuda")`, a flag) stays."""
        if qual is not None or not isinstance(original.func, cst.Name) or original.func.value != "hasattr":
            return updated
        if len(original.args) != 2 or any(a.keyword is not None or a.star for a in original.args):
            return updated
        name = string_value(original.args[1].value)
        rule = self.ctx.rules.method.get(name) if name else None
        receiver = dotted_name(original.args[0].value)
        if rule is None or receiver is None or self.resolve(original.args[0].value) is not None:
            return updated
        chain = r"[ \t]*\.[ \t]*".join(re.escape(part) for part in receiver.split("."))
        if not re.search(rf"(?<![\w.]){chain}[ \t]*\.[ \t]*{re.escape(rule.from_)}[ \t]*\(", self.ctx.text):
            return updated
        literal = updated.args[1].value
        if not isinstance(literal, cst.SimpleString) or self.ctx.suppressed(original, rule.code):
            return updated
        self.ctx.edit(rule, original.args[1].value,
                      f'`hasattr({receiver}, "{rule.from_}")` -> `hasattr({receiver}, "{rule.to}")`: the test '
                      f"follows the method it guards (`.{rule.from_}()` -> `.{rule.to}()`)", rule.from_, rule.to)
        self.ctx.require_import("torch_npu")
        return updated.with_changes(args=[updated.args[0], updated.args[1].with_changes(value=with_body(literal, rule.to))])

    def _rename_attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        """Not an imported name: attribute renames on any receiver (`x.is_cuda`), but for a
        command-line flag of the script's own of that name (`args.is_cuda`)."""
        rule = self.ctx.rules.attribute.get(original.attr.value)
        if rule is not None and self._declared_here(rule.from_):
            return updated  # the file's own attribute (declares_attribute)
        if rule is not None and isinstance(original.value, cst.Name):
            flags = self._flag_receivers
            if rule.from_ not in flags:
                flags[rule.from_] = command_line_flag_receivers(self.ctx.text, rule.from_)
            if original.value.value in flags[rule.from_]:
                return updated
        if rule is not None and not self.ctx.suppressed(original, rule.code):
            new = updated.with_changes(attr=cst.Name(rule.to))
            self.ctx.edit(
                rule,
                original.attr,
                rule.render_message(before=original.attr.value, after=rule.to),
                original.attr.value,
                rule.to,
            )
            self.ctx.require_import("torch_npu")
            return new
        return updated

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        """A class's own `def cuda(self)` follows its callers: every `.cuda()` call becomes
        `.npu()`, so the method must be `npu` too, or `Rigid.npu()` would call a `Rotation.npu`
        that does not exist (transformers' openfold utils). Properties are accessed, not
        called, so they keep their names, and so does a class that has both methods."""
        if not isinstance(updated.body, cst.IndentedBlock):
            return updated
        rs = self.ctx.rules
        defined = {s.name.value for s in updated.body.body if isinstance(s, cst.FunctionDef)}
        body = list(updated.body.body)
        changed = False
        for i, (o_stmt, stmt) in enumerate(zip(original.body.body, body)):
            if not isinstance(stmt, cst.FunctionDef) or not isinstance(o_stmt, cst.FunctionDef):
                continue
            rule = rs.method.get(stmt.name.value)
            if rule is None or rule.to in defined or self._decorated_as_attribute(stmt):
                continue
            if self.ctx.suppressed(o_stmt.name, rule.code):
                continue
            before, after = f"def {stmt.name.value}", f"def {rule.to}"
            self.ctx.edit(rule, o_stmt.name, f"`{before}` -> `{after}`: the class's own method follows "
                          f"its callers (`.{stmt.name.value}()` -> `.{rule.to}()`)", stmt.name.value, rule.to)
            body[i] = stmt.with_changes(name=cst.Name(rule.to))
            changed = True
        for i, (o_stmt, stmt) in enumerate(zip(original.body.body, body)):
            renamed = self._class_attribute(o_stmt, stmt, defined)
            if renamed is not None:
                body[i] = renamed
                changed = True
        return updated.with_changes(body=updated.body.with_changes(body=body)) if changed else updated

    def _class_attribute(self, o_stmt: cst.CSTNode, stmt: cst.CSTNode,
                         defined: Set[str]) -> Optional[cst.BaseStatement]:
        """A class's own `is_cuda = False` follows the attribute renames (`self.is_cuda = True` ->
        `self.is_npu = True`, `if self.is_cuda:` -> `if self.is_npu:`): kept, an instance read
        before the first write (`.npu()` not called yet) raised AttributeError. Plain
        assignments only: an annotated one is a field (dataclass, NamedTuple), named by keyword
        where the instances are made."""
        if not isinstance(stmt, cst.SimpleStatementLine) or not isinstance(o_stmt, cst.SimpleStatementLine):
            return None
        small, o_small = stmt.body[0], o_stmt.body[0]
        if len(stmt.body) != 1 or not isinstance(small, cst.Assign) or not isinstance(o_small, cst.Assign):
            return None
        targets = [t.target for t in small.targets]
        if len(targets) != 1 or not isinstance(targets[0], cst.Name):
            return None
        rule = self.ctx.rules.attribute.get(targets[0].value)
        o_target = o_small.targets[0].target
        if rule is None or rule.to in defined or self.ctx.suppressed(o_target, rule.code) or self._declared_here(rule.from_):
            return None
        before, after = targets[0].value, rule.to
        self.ctx.edit(rule, o_target, f"`{before} = ...` -> `{after} = ...`: the class's own attribute follows "
                      f"its readers (`.{before}` -> `.{after}`)", before, after)
        self.ctx.require_import("torch_npu")
        target = small.targets[0].with_changes(target=targets[0].with_changes(value=after))
        return stmt.with_changes(body=[small.with_changes(targets=[target])])

    @staticmethod
    def _decorated_as_attribute(func: cst.FunctionDef) -> bool:
        for d in func.decorators:
            node = d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator
            name = node.attr.value if isinstance(node, cst.Attribute) else getattr(node, "value", None)
            if name in NOT_A_PLAIN_METHOD:
                return True
        return False
