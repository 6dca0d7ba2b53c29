"""PyTorch GPU -> Ascend NPU rewrites, driven by the rules in `rules/`.

One pass over the tree does every torch rewrite and the reference-based findings:

* qualified-name rewrites (``torch.cuda.X`` -> ``torch.npu.X``), resolved through imports so
  ``th.cuda``, ``from torch import cuda`` and ``from torch.cuda.amp import GradScaler`` work;
* import statements of rewritten modules;
* method and attribute renames (``.cuda()``, ``.is_cuda``);
* device strings, backend names and env-var names in the positions where they are certainly
  what they look like (arguments, comparisons, assignments to device/backend variables,
  argparse defaults) -- never elsewhere;
* findings for references to APIs with no NPU equivalent (kind `api`; imports, calls and
  methods are reported by codemods/findings.py).

`import torch_npu` is added afterwards (see `add_torch_npu_import`).
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Sequence, Set, Tuple, Union

import libcst as cst

from ..context import Context
from ..imports import dotted_name
from ..rules import Rule
from ..walk import walk
from . import device_context as dc
from .guards import is_display_call, plan_kept_code
from .strings import LiteralRewriter, string_value

DEVICE_NAME_RE = re.compile(r"(?i)(?:^|_)(?:device|devices|device_type|dev_type)(?:$|_)|^dev$")
BACKEND_NAME_RE = re.compile(r"(?i)backend")
ENV_FUNCS = {
    "os.getenv": 0,
    "os.putenv": 0,
    "os.unsetenv": 0,
    "os.environ.get": 0,
    "os.environ.setdefault": 0,
    "os.environ.pop": 0,
    "os.environ.__getitem__": 0,
}
BACKEND_FUNCS = {"torch.distributed.init_process_group": 0, "torch.distributed.new_group": None}
BACKEND_GETTERS = {"torch.distributed.get_backend"}
ARGPARSE_ADDERS = {"add_argument"}
# Functions whose single argument may name a tensor type as a string ("torch.cuda.FloatTensor").
TYPE_STRING_FUNCS = {"torch.set_default_tensor_type"}
# Keyword arguments that are devices for one function only: torch.device(type="cuda", index=0).
DEVICE_KEYWORDS_OF = {"torch.device": {"type"}}
# Packages this pass resolves names of besides those the rules name: partial.py keeps
# every import of them (`import os` makes `os.environ["CUDA_VISIBLE_DEVICES"]` an env var).
RESOLVED_PACKAGES = {"os", "re"} | {  # re: codemods/findings.py matches re.search(...) texts
    name.split(".", 1)[0]
    for name in [*ENV_FUNCS, *BACKEND_FUNCS, *BACKEND_GETTERS, *TYPE_STRING_FUNCS, *DEVICE_KEYWORDS_OF]
}
# What torch's own methods that method rules rename accept (Tensor.cuda / Module.cuda): at most
# that many positional arguments, only these keywords. A call that does not fit is some other
# object's method (hqq's `quantizer.cuda(qtensor, meta=meta)`) and stays as it is.
METHOD_SIGNATURES = {"cuda": (2, {"device", "non_blocking", "memory_format"})}
# Decorators that make a `def` something other than a method called as `x.name(...)`.
NOT_A_PLAIN_METHOD = {"property", "cached_property", "setter", "getter", "deleter", "abstractproperty"}


def fits_signature(call: cst.Call, method: str) -> bool:
    if method not in METHOD_SIGNATURES:
        return True
    max_positional, keywords = METHOD_SIGNATURES[method]
    positional = [a for a in call.args if a.keyword is None and a.star == ""]
    named = {a.keyword.value for a in call.args if a.keyword is not None}
    return len(positional) <= max_positional and named <= keywords


def last_identifier(node: cst.BaseExpression) -> Optional[str]:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return node.attr.value
    if isinstance(node, cst.Subscript):
        # args["device"] / cfg['dist_backend']
        if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
            return string_value(node.slice[0].slice.value)
    return None


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


class DeviceVariables(cst.CSTVisitor):
    """Names of variables that the module passes where a device is expected
    (`.to(DEV)`, `torch.device(DEV)`, `device=DEV`, `set_device(DEV)`) or a backend is.
    Their literal assignments are then device strings (the seed's `CALCULATE_DEVICE = "gpu:0"`)."""

    def __init__(self, transformer: "TorchTransformer") -> None:
        super().__init__()
        self.t = transformer
        self.device_names: Set[str] = set()
        self.backend_names: Set[str] = set()

    def visit_Call(self, node: cst.Call) -> None:
        for arg, kind in self.t.special_args(node):
            if isinstance(arg.value, cst.Name):
                (self.device_names if kind == "device" else self.backend_names).add(arg.value.value)


class TorchTransformer(cst.CSTTransformer):
    def __init__(self, ctx: Context) -> None:
        super().__init__()
        self.ctx = ctx
        rs = ctx.rules
        self.imports = ctx.imports
        self.devices = LiteralRewriter({r.from_: r.to for r in rs.device.values()}, index=True)
        # Device rules with no positions of their own ("gpu") apply only to variables the
        # module passes as a device (the guide's `CALCULATE_DEVICE = "gpu:0"`): elsewhere "gpu"
        # is some other library's device name (DALI's `device="gpu"`).
        self.positional_devices = LiteralRewriter(
            {r.from_: r.to for r in rs.device.values() if r.keywords or r.functions or r.methods}, index=True
        )
        self.backends = LiteralRewriter(
            {r.from_: r.to for r in rs.backend.values()}, index=False, ignore_case=True
        )
        self.envs = LiteralRewriter({r.from_: r.to for r in rs.env.values()}, index=False)
        self.device_rule = {r.from_: r for r in rs.device.values()}
        self.backend_rule = {r.from_.lower(): r for r in rs.backend.values()}
        self.env_rule = dict(rs.env)
        self.device_keywords: Set[str] = set()
        self.device_functions: Dict[str, int] = {}
        self.device_methods: Set[str] = set()
        for r in rs.device.values():
            self.device_keywords.update(r.keywords)
            self.device_methods.update(r.methods)
            for f in r.functions:
                self.device_functions[f] = 0
        self.backend_keywords: Set[str] = {"backend"}
        for r in rs.backend.values():
            self.backend_keywords.update(r.keywords)
        # Names to skip when resolving bare names: attribute names, keywords, parameters.
        self._not_references: Set[int] = set()
        self._local_renames: Dict[str, Tuple[str, Rule]] = {}
        self._plan_import_renames()
        self._variables: Optional[DeviceVariables] = None
        plan_kept_code(ctx)
        # > 0 inside a call that only shows its arguments (print, logging, str.format, f-strings).
        self._shown = 0
        # > 0 inside a call of a library with device names of its own (device_context.py).
        self._foreign = 0
        # The functions around the node being visited, and whether each returns devices.
        self._functions: List[cst.FunctionDef] = []
        self._returns_devices: Dict[int, bool] = {}
        # Bodies of `if torch.cuda.is_available():` / `if x.is_cuda:` (ids), and how deep in them.
        self._device_bodies: Set[int] = set()
        self._in_device_body = 0

    def is_device_variable(self, name: str) -> bool:
        return name in self._usage(name).device_names

    def is_backend_variable(self, name: str) -> bool:
        return name in self._usage(name).backend_names

    def _usage(self, name: str) -> DeviceVariables:
        # A whole pass over the tree: done only when a literal is found where such a
        # variable decides (most files never get there).
        if self.ctx.partial is not None and self.ctx.partial.elided_word(name):
            # Used in a statement not parsed: the answer below may be wrong, and the engine
            # migrates the file again with those statements (all such names at once).
            self.ctx.partial_misses.add(name)
        if self._variables is None:
            self._variables = DeviceVariables(self)
            walk(self.ctx.module, self._variables)
        return self._variables

    # ------------------------------------------------------------------ helpers

    def resolve(self, node: cst.BaseExpression) -> Optional[str]:
        return self.imports.resolve(node)

    def _record_literal(self, rule: Rule, original: cst.CSTNode, new: cst.CSTNode, what: str) -> None:
        before = self.ctx.code_for(original)
        after = self.ctx.code_for(new)
        self.ctx.edit(rule, original, rule.render_message(before=before, after=after, what=what), before, after)

    def _rule_for_literal(self, table: Dict[str, Rule], before: cst.CSTNode) -> Optional[Rule]:
        text = self.ctx.code_for(before).lower()
        for word, rule in table.items():
            if word.lower() in text:
                return rule
        return next(iter(table.values()), None)

    def _rewrite_literal(
        self,
        rewriter: LiteralRewriter,
        table: Dict[str, Rule],
        original: cst.BaseExpression,
        updated: cst.BaseExpression,
        what: str,
    ) -> cst.BaseExpression:
        """Rewrite a device/backend/env literal expression; record the edit on `original`."""
        if not table:
            return updated
        new = rewriter.rewrite(updated)
        if new is None:
            return updated
        rule = self._rule_for_literal(table, updated)
        if rule is None or self.ctx.suppressed(original, rule.code):
            return updated
        self._record_literal(rule, original, new, what)
        if rewriter is not self.envs:
            self.ctx.needs_torch_npu = True
        return new

    def device_literal(self, original, updated, what="device string", variable: bool = False):
        """`variable`: the literal is assigned to or compared with a variable the module passes
        as a device (then variable-only rules such as "gpu" apply too)."""
        rewriter = self.devices if variable else self.positional_devices
        return self._rewrite_literal(rewriter, self.device_rule, original, updated, what)

    def is_passed_device(self, node: cst.BaseExpression) -> bool:
        return isinstance(node, cst.Name) and self.is_device_variable(node.value)

    def backend_literal(self, original, updated, what="distributed backend"):
        if isinstance(updated, cst.Dict) and isinstance(original, cst.Dict):
            # {"cuda": "nccl", "cpu": "gloo"}: a device -> backend table; its keys are looked up
            # with device types, which become "npu" too.
            elements = []
            for o_el, u_el in zip(original.elements, updated.elements):
                if isinstance(u_el, cst.DictElement) and isinstance(o_el, cst.DictElement):
                    u_el = u_el.with_changes(key=self.device_literal(o_el.key, u_el.key))
                elements.append(u_el)
            updated = updated.with_changes(elements=elements)
        return self._rewrite_literal(self.backends, self.backend_rule, original, updated, what)

    def env_literal(self, original, updated, what="environment variable"):
        return self._rewrite_literal(self.envs, self.env_rule, original, updated, what)

    def is_device_expr(self, node: cst.BaseExpression) -> bool:
        """`x.device.type`, `device`, `args.device`, `str(device)`, `cfg["device"]`."""
        if isinstance(node, cst.Attribute) and node.attr.value == "type":
            return True
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "str":
            return len(node.args) == 1 and self.is_device_expr(node.args[0].value)
        name = last_identifier(node)
        return bool(name and DEVICE_NAME_RE.search(name)) or (
            isinstance(node, cst.Name) and self.is_device_variable(node.value)
        )

    def is_backend_expr(self, node: cst.BaseExpression) -> bool:
        if isinstance(node, cst.Call) and self.resolve(node.func) in BACKEND_GETTERS:
            return True
        name = last_identifier(node)
        return bool(name and BACKEND_NAME_RE.search(name)) or (
            isinstance(node, cst.Name) and self.is_backend_variable(node.value)
        )

    def is_environ(self, node: cst.BaseExpression) -> bool:
        return self.resolve(node) == "os.environ"

    def special_args(self, call: cst.Call) -> List[Tuple[cst.Arg, str]]:
        """The arguments of `call` that are devices or backends: [(arg, "device"|"backend")]."""
        out: List[Tuple[cst.Arg, str]] = []
        func = call.func
        qual = self.resolve(func)
        if dc.is_foreign_callee(qual):
            return out  # DALI's fn.resize(..., device="gpu"): that library's own device names
        positional = [a for a in call.args if a.keyword is None and a.star == ""]
        if qual is not None and qual in self.device_functions and positional:
            out.append((positional[0], "device"))
        elif (
            qual is None
            and isinstance(func, cst.Attribute)
            and func.attr.value in self.device_methods
            and positional
        ):
            out.append((positional[0], "device"))
        if qual is not None and qual in BACKEND_FUNCS and BACKEND_FUNCS[qual] is not None and positional:
            out.append((positional[BACKEND_FUNCS[qual]], "backend"))
        own_keywords = DEVICE_KEYWORDS_OF.get(qual or "", set())
        for arg in call.args:
            if arg.keyword is None:
                continue
            if arg.keyword.value in self.device_keywords or arg.keyword.value in own_keywords:
                out.append((arg, "device"))
            elif arg.keyword.value in self.backend_keywords:
                out.append((arg, "backend"))
        return out

    # ------------------------------------------------------------------ imports

    def _plan_import_renames(self) -> None:
        """`from torch import cuda` becomes `from torch import npu`: uses of the local name
        `cuda` must follow. Work out those local renames before the pass starts."""
        for node in self.imports.import_nodes:
            if not isinstance(node, cst.ImportFrom) or node.relative or isinstance(node.names, cst.ImportStar):
                continue
            module = dotted_name(node.module)
            if module is None:
                continue
            plan = self._plan_from_import(module, node.names)
            if plan is None:
                continue
            new_module, renames = plan
            for alias in node.names:
                name = dotted_name(alias.name)
                if alias.asname is None and name in renames:
                    # Uses are credited to the rule that renames the name itself, if any.
                    qual = f"{module}.{name}"
                    hit = self.ctx.rules.rewrite_api(qual)
                    own = hit[2] if hit and hit[2].members is None else None
                    rule = own or self._rule_for_from_import(module, name, new_module)
                    if rule is not None:
                        self._local_renames[name] = (renames[name], rule)

    def _rule_for_from_import(self, module: str, name: str, new_module) -> Optional[Rule]:
        if new_module:
            return new_module[1]
        qual = f"{module}.{name}"
        sub = self.ctx.rules.module.get(qual)
        hit = self.ctx.rules.rewrite_api(qual)
        return sub or (hit[2] if hit else None)

    def _plan_from_import(
        self, module: str, aliases: Sequence[cst.ImportAlias]
    ) -> Optional[Tuple[Optional[Tuple[str, Rule]], Dict[str, str]]]:
        """How to rewrite `from module import names`: (new module + rule or None, name renames).
        None when nothing changes or when a name has no NPU twin (then the statement stays as
        it is and the names are reported where they are used)."""
        rs = self.ctx.rules
        module_rule = rs.module.get(module)
        renames: Dict[str, str] = {}
        for alias in aliases:
            name = dotted_name(alias.name)
            if name is None:
                return None
            qual = f"{module}.{name}"
            sub_rule = rs.module.get(qual)
            if sub_rule is not None and sub_rule.to.rsplit(".", 1)[0] == (module_rule.to if module_rule else module):
                renames[name] = sub_rule.to.rsplit(".", 1)[1]
                continue
            hit = rs.rewrite_api(qual)
            if hit is not None:
                prefix, to, _rule = hit
                new_qual = to + qual[len(prefix) :]
                new_parent, new_name = new_qual.rsplit(".", 1)
                target_parent = module_rule.to if module_rule else None
                if new_parent == (target_parent or module):
                    if new_name != name:
                        renames[name] = new_name
                    continue
                if target_parent is None and new_parent != module:
                    return None
                continue
            if module_rule is not None:
                # A name of a rewritten module with no NPU twin: keep the import as it is.
                return None
        if module_rule is None and not renames:
            return None
        return ((module_rule.to, module_rule) if module_rule else None), renames

    def visit_Import(self, node: cst.Import) -> bool:
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return False

    def leave_Import(self, original: cst.Import, updated: cst.Import) -> cst.Import:
        rs = self.ctx.rules
        names = []
        changed = False
        for alias in updated.names:
            full = dotted_name(alias.name)
            rule = rs.module.get(full) if full else None
            if rule is not None and not self.ctx.suppressed(original, rule.code):
                new_alias = alias.with_changes(name=cst.parse_expression(rule.to))
                self.ctx.edit(
                    rule,
                    alias,
                    rule.render_message(before=f"import {full}", after=f"import {rule.to}"),
                    f"import {full}",
                    f"import {rule.to}",
                )
                names.append(new_alias)
                changed = True
                self.ctx.needs_torch_npu = True
            else:
                names.append(alias)
        return updated.with_changes(names=names) if changed else updated

    def leave_ImportFrom(self, original: cst.ImportFrom, updated: cst.ImportFrom) -> cst.ImportFrom:
        if updated.relative or updated.module is None:
            return updated
        module = dotted_name(updated.module)
        if module is None:
            return updated
        if isinstance(updated.names, cst.ImportStar):
            return updated
        plan = self._plan_from_import(module, updated.names)
        if plan is None:
            self._report_untwinned_imports(module, original)
            return updated
        new_module, renames = plan
        rule = self._rule_for_from_import(module, next(iter(renames), ""), new_module)
        if rule is None or self.ctx.suppressed(original, rule.code):
            return updated
        new_names = []
        for alias in updated.names:
            name = dotted_name(alias.name)
            if name in renames:
                alias = alias.with_changes(name=cst.Name(renames[name]))
            new_names.append(alias)
        new = updated.with_changes(names=new_names)
        if new_module:
            new = new.with_changes(module=cst.parse_expression(new_module[0]))
        before = self.ctx.code_for(updated.with_changes(semicolon=cst.MaybeSentinel.DEFAULT))
        after = self.ctx.code_for(new.with_changes(semicolon=cst.MaybeSentinel.DEFAULT))
        self.ctx.edit(rule, original, rule.render_message(before=before, after=after), before, after)
        self.ctx.needs_torch_npu = True
        return new

    def _report_untwinned_imports(self, module: str, node: cst.ImportFrom) -> None:
        if isinstance(node.names, cst.ImportStar):
            return
        for alias in node.names:
            name = dotted_name(alias.name)
            if name is None:
                continue
            qual = f"{module}.{name}"
            self._report_reference(qual, alias, module, rewritten=self.ctx.rules.rewrite_api(qual) is not None)

    # ------------------------------------------------------------------ references

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._not_references.add(id(node.attr))

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self._not_references.add(id(node.keyword))

    def visit_Param(self, node: cst.Param) -> None:
        self._not_references.add(id(node.name))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._not_references.add(id(node.name))
        self._functions.append(node)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._not_references.add(id(node.name))

    def _is_member_module(self, qual: str) -> bool:
        """Whether `qual` is a module whose members are rewritten one by one (`torch.cuda`)."""
        return any(r.members is not None for r in self.ctx.rules.api.get(qual, ()))

    def _report_reference(self, qual: str, node: cst.CSTNode, parent: Optional[str], rewritten: bool) -> None:
        """Report `qual` if a finding names it exactly (also when it is rewritten: the NPU twin
        may behave differently), or -- for a member of a module whose members are rewritten one
        by one -- if that member has no NPU twin (the module's own finding is the fallback)."""
        rs = self.ctx.rules
        rule = rs.finding_api.get(qual)
        if rule is not None and not self._is_member_module(qual):
            if not (rule.skip_logged and self._shown):
                self.ctx.finding(rule, node, api=qual)
            return
        if not rewritten and parent is not None and self._is_member_module(parent):
            fallback = rs.finding_api.get(parent)
            if fallback is not None:
                self.ctx.finding(fallback, node, api=qual)

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.Name:
        if id(original) in self._not_references:
            return updated
        qual = self.resolve(original)
        if qual is None:
            return updated
        if original.value in self._local_renames:
            new_name, rule = self._local_renames[original.value]
            if self.ctx.suppressed(original, rule.code):
                return updated
            self.ctx.edit(
                rule, original, rule.render_message(before=original.value, after=new_name), original.value, new_name
            )
            return updated.with_changes(value=new_name)
        if qual.startswith("torch.npu") or qual.startswith("torch_npu"):
            self.ctx.needs_torch_npu = True
        parent = qual.rsplit(".", 1)[0] if "." in qual else None
        # `synchronize` after `from torch.cuda import synchronize`: the import was rewritten,
        # so the name has its NPU twin.
        self._report_reference(qual, original, parent, rewritten=self.ctx.rules.rewrite_api(qual) is not None)
        return updated

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        rs = self.ctx.rules
        qual = self.resolve(original)
        if qual is None:
            # Not an imported name: attribute renames on any receiver (`x.is_cuda`).
            rule = rs.attribute.get(original.attr.value)
            if rule is not None and not self.ctx.suppressed(original, rule.code):
                new = updated.with_changes(attr=cst.Name(rule.to))
                self.ctx.edit(
                    rule,
                    original.attr,
                    rule.render_message(before=original.attr.value, after=rule.to),
                    original.attr.value,
                    rule.to,
                )
                self.ctx.needs_torch_npu = True
                return new
            return updated
        if qual.startswith("torch.npu") or qual.startswith("torch_npu"):
            self.ctx.needs_torch_npu = True
        parent = self.resolve(original.value)
        hit = rs.rewrite_api(qual)
        self._report_reference(qual, original, parent, rewritten=hit is not None)
        if hit is not None:
            prefix, to, rule = hit
            if rule.members is None and prefix == qual:
                return self._replace_reference(original, updated, updated, qual, to, rule)
            if rule.members is not None and prefix == parent:
                new_value = self._replace_prefix(original.value, updated.value, parent, to, rule, qual)
                if new_value is not updated.value:
                    return updated.with_changes(value=new_value)
        return updated

    def _replace_prefix(self, original_value, updated_value, old: str, new: str, rule: Rule, qual: str):
        """Replace the expression that names module `old` by one naming `new`, keeping the
        user's alias: `th.cuda` -> `th.npu`; an imported alias (`tc`) stays as it is because
        its import statement is rewritten instead."""
        if self.ctx.suppressed(original_value, rule.code):
            return updated_value
        old_parent, old_last = old.rsplit(".", 1) if "." in old else ("", old)
        new_parent, new_last = new.rsplit(".", 1) if "." in new else ("", new)
        if isinstance(updated_value, cst.Attribute) and old_parent == new_parent:
            replaced = updated_value.with_changes(attr=cst.Name(new_last))
        elif isinstance(updated_value, cst.Attribute):
            replaced = cst.parse_expression(new)
        else:
            return updated_value  # a Name: its import is rewritten (or renamed locally)
        member = qual[len(old) + 1 :]
        before = f"{self.ctx.code_for(original_value)}.{member}"
        after = f"{self.ctx.code_for(replaced)}.{member}"
        self.ctx.edit(rule, original_value, rule.render_message(before=before, after=after), before, after)
        self.ctx.needs_torch_npu = True
        return replaced

    def _replace_reference(self, original, updated, value, old: str, new: str, rule: Rule):
        """Exact renames (`torch.cuda.CUDAGraph` -> `torch.npu.NPUGraph`), keeping the user's
        spelling of the base (`th.cuda.CUDAGraph` -> `th.npu.NPUGraph`)."""
        if self.ctx.suppressed(original, rule.code):
            return updated
        old_parent = old.rsplit(".", 1)[0]
        new_parent, new_last = new.rsplit(".", 1)
        base = updated.value
        if old_parent != new_parent:
            if isinstance(base, cst.Attribute) and old_parent.rsplit(".", 1)[0] == new_parent.rsplit(".", 1)[0]:
                base = base.with_changes(attr=cst.Name(new_parent.rsplit(".", 1)[-1]))
            elif not isinstance(base, cst.Name):  # an imported alias's own import is rewritten
                base = cst.parse_expression(new_parent)
        replaced = updated.with_changes(value=base, attr=cst.Name(new_last))
        before = self.ctx.code_for(original)
        after = self.ctx.code_for(replaced)
        self.ctx.edit(rule, original, rule.render_message(before=before, after=after), before, after)
        self.ctx.needs_torch_npu = True
        return replaced

    def _local_root(self, node: cst.BaseExpression) -> Optional[str]:
        while isinstance(node, cst.Attribute):
            node = node.value
        return node.value if isinstance(node, cst.Name) else None

    # ------------------------------------------------------------------ calls

    def visit_Call(self, node: cst.Call) -> None:
        if is_display_call(node):
            self._shown += 1
        if dc.is_foreign_callee(self.resolve(node.func)):
            self._foreign += 1

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        self._shown += 1

    def leave_FormattedString(self, original: cst.FormattedString, updated: cst.FormattedString):
        self._shown -= 1
        return updated

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if is_display_call(original):
            self._shown -= 1
        if dc.is_foreign_callee(self.resolve(original.func)):
            self._foreign -= 1
        updated = self._parametrized_devices(original, updated)
        rs = self.ctx.rules
        # `.cuda(...)` on any receiver that is not an imported module.
        func = updated.func
        if isinstance(func, cst.Attribute) and self.resolve(original.func) is None:
            rule = rs.method.get(func.attr.value)
            if rule is not None and not fits_signature(original, func.attr.value):
                rule = None
            if rule is not None and not self.ctx.suppressed(original, rule.code):
                self.ctx.edit(
                    rule,
                    original.func.attr,
                    rule.render_message(before=f".{func.attr.value}()", after=f".{rule.to}()"),
                    func.attr.value,
                    rule.to,
                )
                self.ctx.needs_torch_npu = True
                updated = updated.with_changes(func=func.with_changes(attr=cst.Name(rule.to)))
            elif func.attr.value in {r.to for r in rs.method.values()}:
                self.ctx.needs_torch_npu = True  # half-migrated code: `.npu()` already there
        # Device and backend arguments.
        special = {id(arg): kind for arg, kind in self.special_args(original)}
        if special:
            new_args = []
            for o_arg, u_arg in zip(original.args, updated.args):
                kind = special.get(id(o_arg))
                if kind == "device" and isinstance(o_arg.value, cst.Dict) and o_arg.keyword is not None \
                        and o_arg.keyword.value == "map_location":
                    u_arg = u_arg.with_changes(value=self._map_location_values(o_arg.value, u_arg.value))
                elif kind == "device":
                    u_arg = u_arg.with_changes(value=self.device_literal(o_arg.value, u_arg.value))
                elif kind == "backend":
                    u_arg = u_arg.with_changes(value=self.backend_literal(o_arg.value, u_arg.value))
                new_args.append(u_arg)
            updated = updated.with_changes(args=new_args)
        qual = self.resolve(original.func)
        # Environment variables: os.getenv("CUDA_VISIBLE_DEVICES"), os.environ.get(...).
        if qual in ENV_FUNCS and updated.args:
            first = updated.args[0]
            updated = updated.with_changes(
                args=[first.with_changes(value=self.env_literal(original.args[0].value, first.value))]
                + list(updated.args[1:])
            )
        # device.startswith("cuda") / device.type.startswith("cuda:")
        if (
            qual is None
            and isinstance(original.func, cst.Attribute)
            and original.func.attr.value in ("startswith", "endswith")
            and self.is_device_expr(original.func.value)
            and updated.args
            and original.args[0].keyword is None
        ):
            first = updated.args[0]
            updated = updated.with_changes(
                args=[first.with_changes(value=self.device_literal(original.args[0].value, first.value))]
                + list(updated.args[1:])
            )
        # argparse: parser.add_argument("--device", default="cuda", choices=[...]).
        if isinstance(original.func, cst.Attribute) and original.func.attr.value in ARGPARSE_ADDERS:
            updated = self._argparse_defaults(original, updated)
        # x.type("torch.cuda.FloatTensor"), torch.set_default_tensor_type("torch.cuda.FloatTensor")
        if len(updated.args) == 1 and (
            qual in TYPE_STRING_FUNCS
            or (qual is None and isinstance(original.func, cst.Attribute) and original.func.attr.value == "type")
        ):
            updated = self._tensor_type_string(original, updated)
        return updated

    def _map_location_values(self, original: cst.Dict, updated: cst.Dict) -> cst.Dict:
        """`map_location={"cuda:1": "cuda:0"}`: a key is the device a tensor was saved on (the
        checkpoint keeps saying so); only the values, where tensors go, are devices to migrate."""
        elements = []
        for o_el, u_el in zip(original.elements, updated.elements):
            if isinstance(o_el, cst.DictElement) and isinstance(u_el, cst.DictElement):
                u_el = u_el.with_changes(value=self.device_literal(o_el.value, u_el.value))
            elements.append(u_el)
        return updated.with_changes(elements=elements)

    def _argparse_defaults(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        names = option_names(original)
        is_device = any(DEVICE_NAME_RE.search(n) for n in names)
        is_backend = any(BACKEND_NAME_RE.search(n) for n in names)
        if not (is_device or is_backend):
            return updated
        new_args = []
        for o_arg, u_arg in zip(original.args, updated.args):
            if o_arg.keyword is not None and o_arg.keyword.value in ("default", "choices", "const"):
                if is_device:
                    u_arg = u_arg.with_changes(value=self.device_literal(o_arg.value, u_arg.value))
                else:
                    u_arg = u_arg.with_changes(value=self.backend_literal(o_arg.value, u_arg.value))
            new_args.append(u_arg)
        return updated.with_changes(args=new_args)

    def _tensor_type_string(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        arg = updated.args[0]
        value = string_value(arg.value)
        if value is None or arg.keyword is not None:
            return updated
        hit = self.ctx.rules.rewrite_api(value)
        if hit is None or not value.startswith("torch."):
            return updated
        prefix, to, rule = hit
        if self.ctx.suppressed(original, rule.code):
            return updated
        new_value = to + value[len(prefix) :]
        new_node = arg.value.with_changes(value=f"{arg.value.prefix}{arg.value.quote}{new_value}{arg.value.quote}")
        self.ctx.edit(rule, original.args[0].value, rule.render_message(before=value, after=new_value), value, new_value)
        self.ctx.needs_torch_npu = True
        return updated.with_changes(args=[arg.with_changes(value=new_node)])

    # ------------------------------------------------------------------ other positions

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
        return updated.with_changes(body=updated.body.with_changes(body=body)) if changed else updated

    @staticmethod
    def _decorated_as_attribute(func: cst.FunctionDef) -> bool:
        for d in func.decorators:
            node = d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator
            name = node.attr.value if isinstance(node, cst.Attribute) else getattr(node, "value", None)
            if name in NOT_A_PLAIN_METHOD:
                return True
        return False

    def leave_Subscript(self, original: cst.Subscript, updated: cst.Subscript) -> cst.Subscript:
        # os.environ["CUDA_VISIBLE_DEVICES"]
        if self.is_environ(original.value) and len(updated.slice) == 1:
            el = updated.slice[0]
            if isinstance(el.slice, cst.Index):
                o_index = original.slice[0].slice
                new_value = self.env_literal(o_index.value, el.slice.value)
                if new_value is not el.slice.value:
                    return updated.with_changes(
                        slice=[el.with_changes(slice=el.slice.with_changes(value=new_value))]
                    )
        return updated

    def leave_Comparison(self, original: cst.Comparison, updated: cst.Comparison) -> cst.Comparison:
        # x.device.type == "cuda"; backend != "nccl"; "CUDA_VISIBLE_DEVICES" in os.environ
        left_o, left_u = original.left, updated.left
        targets = list(updated.comparisons)
        changed = False
        operands_o = [left_o] + [t.comparator for t in original.comparisons]
        operands_u = [left_u] + [t.comparator for t in targets]
        for i, target in enumerate(original.comparisons):
            if not isinstance(
                target.operator, (cst.Equal, cst.NotEqual, cst.In, cst.NotIn, cst.Is, cst.IsNot)
            ):
                continue
            a_o, b_o = operands_o[i], operands_o[i + 1]
            for lit_index, other in ((i, b_o), (i + 1, a_o)):
                lit_o, lit_u = operands_o[lit_index], operands_u[lit_index]
                if not (self._is_rewritable_literal(lit_u) or self.envs.rewrite(lit_u) is not None):
                    continue
                new = lit_u
                if isinstance(target.operator, (cst.In, cst.NotIn)) and lit_index == i and self.is_environ(other):
                    new = self.env_literal(lit_o, lit_u)
                elif self.is_device_expr(other):
                    new = self.device_literal(lit_o, lit_u, variable=self.is_passed_device(other))
                elif self.is_backend_expr(other):
                    new = self.backend_literal(lit_o, lit_u)
                if new is not lit_u:
                    operands_u[lit_index] = new
                    changed = True
        if not changed:
            return updated
        new_targets = [t.with_changes(comparator=operands_u[j + 1]) for j, t in enumerate(targets)]
        return updated.with_changes(left=operands_u[0], comparisons=new_targets)

    def _is_rewritable_literal(self, node: cst.BaseExpression) -> bool:
        """Whether a device or backend rewriter would change `node` (cheap: looks at literals only)."""
        return self.devices.rewrite(node) is not None or self.backends.rewrite(node) is not None

    def _assigned_value(self, targets: Sequence[cst.BaseExpression], original_value, updated_value):
        if not self._is_rewritable_literal(updated_value):
            return updated_value
        device = any(self.is_device_expr(t) for t in targets)
        backend = any(self.is_backend_expr(t) for t in targets)
        if device:
            variable = any(self.is_passed_device(t) for t in targets)
            return self.device_literal(original_value, updated_value, variable=variable)
        if backend:
            return self.backend_literal(original_value, updated_value)
        return updated_value

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign) -> cst.Assign:
        targets = [t.target for t in original.targets]
        new_value = self._assigned_value(targets, original.value, updated.value)
        return updated.with_changes(value=new_value) if new_value is not updated.value else updated

    def leave_AnnAssign(self, original: cst.AnnAssign, updated: cst.AnnAssign) -> cst.AnnAssign:
        if original.value is None:
            return updated
        new_value = self._assigned_value([original.target], original.value, updated.value)
        return updated.with_changes(value=new_value) if new_value is not updated.value else updated

    def leave_Param(self, original: cst.Param, updated: cst.Param) -> cst.Param:
        # def train(device="cuda", backend="nccl")
        if original.default is None:
            return updated
        new_default = self._assigned_value([original.name], original.default, updated.default)
        return updated.with_changes(default=new_default) if new_default is not updated.default else updated

    # -- devices in containers, returns and conditional expressions (device_context.py) ------

    def _parametrized_devices(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        """`@pytest.mark.parametrize("device", ["cpu", "cuda"])`, also `("dtype,device", [(..,
        "cuda"), pytest.param(.., "cuda")])`: the values of device-named parameters."""
        if self.resolve(original.func) not in dc.PARAMETRIZE:
            return updated
        found = dc.parametrized_devices(original)
        if found is None:
            return updated
        index, positions, count = found
        o_values, u_values = original.args[index].value, updated.args[index].value
        if not isinstance(o_values, (cst.List, cst.Tuple)) or not isinstance(u_values, (cst.List, cst.Tuple)):
            return updated
        elements = []
        for o_el, u_el in zip(o_values.elements, u_values.elements):
            if isinstance(o_el, cst.Element) and isinstance(u_el, cst.Element):
                u_el = u_el.with_changes(value=self._parameter_values(o_el.value, u_el.value, positions, count))
            elements.append(u_el)
        args = list(updated.args)
        args[index] = args[index].with_changes(value=u_values.with_changes(elements=elements))
        return updated.with_changes(args=args)

    def _parameter_values(self, original, updated, positions: List[int], count: int):
        if count == 1:
            return self.device_literal(original, updated)
        holder_o, holder_u = original, updated
        if isinstance(original, cst.Call) and isinstance(updated, cst.Call):  # pytest.param(a, b, marks=...)
            values_o = [a for a in original.args if a.keyword is None]
            values_u = [a for a in updated.args if a.keyword is None]
            new_args = list(updated.args)
            for pos in positions:
                if pos < len(values_o):
                    i = list(updated.args).index(values_u[pos])
                    new_args[i] = values_u[pos].with_changes(value=self.device_literal(values_o[pos].value, values_u[pos].value))
            return updated.with_changes(args=new_args)
        if isinstance(holder_o, cst.Tuple) and isinstance(holder_u, cst.Tuple):
            elements = list(holder_u.elements)
            for pos in positions:
                if pos < len(elements) and isinstance(elements[pos], cst.Element):
                    o_el = holder_o.elements[pos]
                    elements[pos] = elements[pos].with_changes(value=self.device_literal(o_el.value, elements[pos].value))
            return updated.with_changes(elements=elements)
        return updated

    def leave_For(self, original: cst.For, updated: cst.For):
        # for device in ["cpu", "cuda"]:
        if isinstance(original.iter, (cst.List, cst.Tuple, cst.Set)) and self._is_device_target(original.target):
            new_iter = self.device_literal(original.iter, updated.iter)
            if new_iter is not updated.iter:
                return updated.with_changes(iter=new_iter)
        return updated

    def _is_device_target(self, target: cst.BaseExpression) -> bool:
        if isinstance(target, cst.Tuple):
            return any(isinstance(e, cst.Element) and self._is_device_target(e.value) for e in target.elements)
        return self.is_device_expr(target)

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef):
        if self._functions and self._functions[-1] is original:
            self._functions.pop()
        return updated

    def visit_If(self, node: cst.If) -> None:
        self._device_bodies |= dc.device_bodies(node, self.resolve)

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        if id(node) in self._device_bodies:
            self._in_device_body += 1

    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock):
        if id(original) in self._device_bodies:
            self._in_device_body -= 1
        return updated

    def leave_Return(self, original: cst.Return, updated: cst.Return):
        """`return "cuda"` where it is a device: in a function that returns devices (`get_device`,
        another `return "cpu"`), or under `if torch.cuda.is_available():` / `if x.is_cuda:`."""
        if original.value is None or updated.value is None or not self._is_rewritable_literal(updated.value):
            return updated
        if not (self._in_device_body or self._function_returns_devices()):
            return updated
        new = self.device_literal(original.value, updated.value)
        return updated.with_changes(value=new) if new is not updated.value else updated

    def _function_returns_devices(self) -> bool:
        if not self._functions:
            return False
        func = self._functions[-1]
        if id(func) not in self._returns_devices:
            self._returns_devices[id(func)] = dc.returns_devices(func, self.resolve, DEVICE_NAME_RE)
        return self._returns_devices[id(func)]

    def leave_IfExp(self, original: cst.IfExp, updated: cst.IfExp) -> cst.BaseExpression:
        """`"cuda" if torch.cuda.is_available() else "cpu"`: a device, whatever receives it."""
        if self._shown or self._foreign or not self._is_rewritable_literal(updated):
            return updated
        if not (dc.is_device_test(original.test, self.resolve)
                and (dc.names_a_device(original.orelse, self.resolve) or dc.names_a_device(original.body, self.resolve))):
            return updated
        return self.device_literal(original, updated)

    def leave_Element(self, original: cst.Element, updated: cst.Element) -> cst.Element:
        """`("cuda:0",) + args`, `["cuda:0", "cuda:1"]`: with an index, a device by its form."""
        if self._shown or self._foreign or not dc.is_indexed_device(original.value):
            return updated
        new = self.device_literal(original.value, updated.value)
        return updated.with_changes(value=new) if new is not updated.value else updated

    def leave_DictElement(self, original: cst.DictElement, updated: cst.DictElement) -> cst.DictElement:
        # {"device": "cuda"} / {"dist_backend": "nccl"}
        key = string_value(original.key)
        if key is None:
            return updated
        if DEVICE_NAME_RE.search(key):
            new = self.device_literal(original.value, updated.value)
        elif BACKEND_NAME_RE.search(key):
            new = self.backend_literal(original.value, updated.value)
        else:
            return updated
        return updated.with_changes(value=new) if new is not updated.value else updated


# ---------------------------------------------------------------------------- import torch_npu


def _imports_torch(stmt: cst.CSTNode) -> Optional[Union[cst.Import, cst.ImportFrom]]:
    if not isinstance(stmt, cst.SimpleStatementLine):
        return None
    for s in stmt.body:
        if isinstance(s, cst.Import):
            for alias in s.names:
                name = dotted_name(alias.name) or ""
                if name == "torch" or name.startswith("torch."):
                    return s
        elif isinstance(s, cst.ImportFrom) and not s.relative and s.module is not None:
            name = dotted_name(s.module) or ""
            if name == "torch" or name.startswith("torch."):
                return s
    return None


def _imports_torch_npu(ctx: Context) -> bool:
    return ctx.imports.imports_module("torch_npu")


def _needs_torch_npu_before(stmt: Union[cst.Import, cst.ImportFrom]) -> bool:
    """`import torch.npu` / `from torch.npu import x` only work once torch_npu is imported."""
    if isinstance(stmt, cst.Import):
        names = [dotted_name(a.name) or "" for a in stmt.names]
    else:
        names = [dotted_name(stmt.module) or ""]
    return any(n == "torch.npu" or n.startswith("torch.npu.") for n in names)


class _InsertTorchNpu(cst.CSTTransformer):
    """Insert `import torch_npu` next to the first statement that imports torch, in the block
    that statement is in (module level, a `try:` body, a function)."""

    def __init__(self, statement: cst.SimpleStatementLine) -> None:
        super().__init__()
        self.statement = statement
        self.done = False
        self.inserted: Optional[cst.SimpleStatementLine] = None

    def _insert(self, body: Sequence[cst.BaseStatement]) -> Optional[List[cst.BaseStatement]]:
        for i, stmt in enumerate(body):
            hit = _imports_torch(stmt)
            if hit is None:
                continue
            new = cst.SimpleStatementLine(
                body=[cst.Import(names=[cst.ImportAlias(name=cst.Name("torch_npu"))])],
                trailing_whitespace=cst.TrailingWhitespace(
                    whitespace=cst.SimpleWhitespace("  "), comment=cst.Comment("# noqa: F401")
                ),
            )
            self.inserted = new
            self.done = True
            out = list(body)
            if _needs_torch_npu_before(hit):
                moved = stmt.with_changes(leading_lines=())
                new = new.with_changes(leading_lines=stmt.leading_lines)
                out[i : i + 1] = [new, moved]
            else:
                out.insert(i + 1, new)
            self.inserted = new
            return out
        return None

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        if self.done:
            return updated
        body = self._insert(updated.body)
        return updated.with_changes(body=body) if body is not None else updated

    def on_leave(self, original, updated):
        if self.done or not isinstance(updated, cst.IndentedBlock):
            return super().on_leave(original, updated)
        body = self._insert(updated.body)
        return updated.with_changes(body=body) if body is not None else updated

    def on_visit(self, node: cst.CSTNode) -> bool:
        # Expressions hold no statements.
        return not self.done and not isinstance(node, cst.BaseExpression)


def add_torch_npu_import(module: cst.Module, ctx: Context, rule: Optional[Rule]) -> cst.Module:
    if rule is None or not ctx.options.add_import or not ctx.needs_torch_npu:
        return module
    if not ctx.imports.imports_module("torch") or _imports_torch_npu(ctx):
        return module
    # Prefer a module-level import of torch; fall back to the first one anywhere.
    inserter = _InsertTorchNpu(cst.SimpleStatementLine(body=[]))
    body = inserter._insert(module.body)
    if body is not None:
        new_module = module.with_changes(body=body)
    else:
        inserter = _InsertTorchNpu(cst.SimpleStatementLine(body=[]))
        new_module = module.visit(inserter)
    inserted = inserter.inserted
    if new_module is module:
        return module
    # The statement the inserter made is in the new tree as it is (libcst does not copy it).
    node = inserted.body[0] if inserted is not None else None
    if node is not None:
        ctx.edit(rule, node, rule.render_message(), "", "import torch_npu", module=new_module)
    return new_module

