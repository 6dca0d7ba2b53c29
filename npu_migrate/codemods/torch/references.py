"""The api and module kinds (kinds/api.py, kinds/module.py) in the PyTorch pass: qualified
names rewritten through imports (`torch.cuda.X` -> `torch.npu.X`, also as `th.cuda`, `from torch
import cuda`, `from torch.cuda.amp import GradScaler`), import statements of rewritten modules,
tensor type strings (`"torch.cuda.FloatTensor"`), and the findings of kind `api` (references to
APIs with no NPU twin).
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence, Set, Tuple

import libcst as cst

from ...frameworks import TYPE_STRING_FUNCS
from ...imports import dotted_name
from ...kinds.finding import FindingSpec
from ...kinds.api import members as api_members
from ...rules import Rule
from ...targets.torch_npu import CHECKED_NAMESPACES, Missing, canonical, describe
from ...fast_visitor import walk
from ..strings import string_value
from ...codes import applies, emits
from .state import TorchKind, TorchState

def _submodule_of_listed_package(name: str) -> bool:
    """`torch.npu.amp.grad_scaler`: a lower-case name directly in a package whose exports the
    target table lists (`CHECKED_NAMESPACES` below torch_npu.npu: their `__all__`), which the
    table says nothing about as a module."""
    parent, _, last = canonical(name).rpartition(".")
    return parent in CHECKED_NAMESPACES and parent.count(".") == 2 and last.islower()


HELD_BY_IMPORT = "NPU323"  # a name left on CUDA because the import it comes through stays


class _AliasAttributes(cst.CSTVisitor):
    """`name.attr` pairs of a module: the members used through each local name."""

    def __init__(self) -> None:
        super().__init__()
        self.attrs: Dict[str, Set[str]] = {}

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if isinstance(node.value, cst.Name):
            self.attrs.setdefault(node.value.value, set()).add(node.attr.value)


@applies("api", "module", "finding:api", "finding:target")
@emits(HELD_BY_IMPORT)
class ReferenceRewrites(TorchKind):
    """The applier of the api and module kinds (and of `api`/`target` findings): the walk
    (codemods/torch/__init__.py) calls its `_rewrite_reference` from leave_Attribute (an
    imported name), its `_type_string_argument` from leave_Call and its own hooks below."""

    def __init__(self, state: TorchState) -> None:
        super().__init__(state)
        # Names to skip when resolving bare names: attribute names, keywords, parameters.
        self._not_references: Set[int] = set()
        self._local_renames: Dict[str, Tuple[str, Rule]] = {}
        # The torch_npu release(s) the output must run on: a rewrite into a name they lack is
        # not made (targets/torch_npu.py), and the reference is reported (`target` findings) instead.
        self.target = self.ctx.options.targets.torch
        self._blocked: Dict[str, Missing] = {}
        # Attributes inside a reference the target blocks (`torch.cuda.streams` of
        # `torch.cuda.streams.Stream` when the target lacks torch.npu.streams.Stream): left as
        # they are, so the diff keeps what the NPU320 finding on the whole reference says.
        self._held: Set[int] = set()
        self._target_rule = next(iter(self.ctx.rules.findings.get("target", ())), None)
        self._alias_attrs: Optional[Dict[str, Set[str]]] = None  # local name -> attributes read on it
        # Local names bound by an import kept as it is because one name it brings cannot move
        # (`import torch.cuda as tc` + `tc.get_arch_list()`): local -> (what it names, that
        # name). Their other uses stay on CUDA with it, and each is reported (HELD_BY_IMPORT).
        self._kept_imports: Dict[str, Tuple[str, str]] = {}
        self._attribute_bases: Set[int] = set()  # the `tc` of `tc.X`
        self._plan_import_renames()
        self._plan_kept_imports()

    def _rewrite_api(self, qualname: str) -> Optional[Tuple[str, str, Rule]]:
        """`RuleSet.rewrite_api`, unless the name it would write is missing in the target."""
        hit = self.ctx.rules.rewrite_api(qualname)
        if hit is None:
            return None
        prefix, to, _rule = hit
        missing = self.target.missing(to + qualname[len(prefix):])
        if missing is not None:
            self._blocked[qualname] = missing
            return None
        return hit

    def _stays(self, qualname: str) -> bool:
        """Whether an [[api]] rule keeps `qualname` as it is (`to` == `from`: a torch.cuda name
        that is no device code, torch.cuda.amp.grad_scaler.OptState): its attributes are held
        whole, nothing is written or reported for it."""
        hit = self.ctx.rules.rewrite_api(qualname)
        return hit is not None and hit[0] == hit[1]

    def _alias_members_ok(self, local: str, qual: str) -> bool:
        """Whether every `local.X` in the file can follow when the import that binds `local` to
        `qual` is rewritten (`import torch.cuda as tc` -> `import torch.npu as tc`): each
        `qual.X` has a rewrite into a name the target has. Otherwise the import stays as it is,
        so `tc.get_arch_list()` keeps meaning what it meant (and is reported) instead of
        becoming a `torch.npu` name that does not exist."""
        return self._alias_blocker(local, qual) is None

    def _alias_blocker(self, local: str, qual: str) -> Optional[str]:
        """The first `qual.X` used as `local.X` that cannot follow (see _alias_members_ok)."""
        if not local:
            return None
        if self.ctx.partial is not None and self.ctx.partial.elided_word(local):
            self.ctx.partial_misses.add(local)  # used in a statement not parsed: migrated again
        if self._alias_attrs is None:
            collector = _AliasAttributes()
            walk(self.ctx.module, collector)
            self._alias_attrs = collector.attrs
        rs = self.ctx.rules
        for member in sorted(self._alias_attrs.get(local, ())):
            full = f"{qual}.{member}"
            if self._rewrite_api(full) is None and rs.module.get(full) is None:
                return full
        return None

    def _moves(self, qual: str) -> bool:
        """Whether a reference to `qual` has a rewrite into a name the target has."""
        module = self.ctx.rules.module.get(qual)
        return self._rewrite_api(qual) is not None or (module is not None and self.target.missing(module.to) is None)

    def _plan_kept_imports(self) -> None:
        """Fill `_kept_imports`: the names an import brings that would move on their own but
        stay with the import, which one name it brings keeps as it is."""
        rs = self.ctx.rules
        for node in self.state.imports.import_nodes:
            if isinstance(node, cst.Import):
                for alias in node.names:
                    full = dotted_name(alias.name)
                    rule = rs.module.get(full) if full else None
                    if alias.asname is None or rule is None or self.target.missing(rule.to) is not None:
                        continue  # no alias (`torch.cuda.X` moves by itself), or nothing would move
                    local = dotted_name(alias.asname.name) or ""
                    blocker = self._alias_blocker(local, full)  # type: ignore[arg-type]
                    if blocker is not None:
                        self._kept_imports[local] = (full, blocker)  # type: ignore[assignment]
            elif not node.relative and node.module is not None and not isinstance(node.names, cst.ImportStar):
                module = dotted_name(node.module)
                if module is None or self._plan_from_import(module, node.names) is not None:
                    continue
                bound = []
                for alias in node.names:
                    name = dotted_name(alias.name)
                    if name is None:
                        break
                    local = (dotted_name(alias.asname.name) if alias.asname is not None else None) or name
                    bound.append((local, f"{module}.{name}"))
                moving = [(local, qual) for local, qual in bound if self._moves(qual)]
                # A name with no NPU twin keeps the import only when it comes from a module that
                # moves (`from torch.cuda import a, b`); `nn` of `from torch import nn, cuda`
                # needs no twin: what keeps that import is a member of `cuda` (found below).
                blockers = [qual for local, qual in bound
                            if not self._moves(qual) and rs.module.get(module) is not None]
                blockers += [b for local, qual in moving for b in [self._alias_blocker(local, qual)] if b]
                for local, qual in moving if blockers else ():
                    self._kept_imports[local] = (qual, blockers[0])

    def _report_kept(self, local: str, qual: str, node: cst.CSTNode) -> None:
        """HELD_BY_IMPORT on a use of `qual` through `local`, which stays on CUDA with its import."""
        blocker = self._kept_imports[local][1]
        rule = self.ctx.rules.analysis.get(HELD_BY_IMPORT)
        if rule is None or not self._moves(qual):
            return
        self.ctx.finding(rule, node, api=qual,
                         message=rule.render_message(api=qual, local=self.ctx.code_for(node), blocker=blocker),
                         suggestion=rule.render_suggestion(api=qual, blocker=blocker))

    def _report_target(self, qual: str, node: cst.CSTNode) -> bool:
        """Report a reference left as it is because the target lacks its NPU twin."""
        missing = self._blocked.get(qual)
        rule = self._target_rule
        if missing is None or rule is None:
            return False
        if missing.minors:
            where = f"torch_npu {missing.minors[0]}" + (" or newer" if len(missing.minors) > 1 else "")
            instead = (f"On {where}, `{qual}` becomes `{missing.name}`: raise the target (--torch-npu-version), "
                       "or pin torch-npu to a release that has it")
        else:
            instead = ("No torch_npu release has it on every build: replace the call by hand, or pin torch-npu to a "
                       "release that has it")
        why = describe(missing)
        if not missing.minors and _submodule_of_listed_package(missing.name):
            # (`torch.npu.amp.grad_scaler`: the table knows what torch_npu.npu.amp exports, its
            # `__all__`, not the submodules it is made of: that it lacks one is not known)
            package = missing.name.rsplit(".", 1)[0]
            why = f"the target table does not list `{missing.name}` (it lists what `{package}` exports)"
            instead = (f"Use what `{package}` exports where it has the name (`from {package} import ...`), else "
                       f"check the submodule in your torch_npu release and rewrite by hand")
        self.ctx.finding(
            rule, node, api=qual,
            message=rule.render_message(api=qual, after=missing.name, why=why),
            suggestion=rule.render_suggestion(api=qual, after=missing.name, instead=instead),
        )
        return True

    def _plan_import_renames(self) -> None:
        """`from torch import cuda` becomes `from torch import npu`: uses of the local name
        `cuda` must follow. Work out those local renames before the pass starts."""
        for node in self.state.imports.import_nodes:
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
                    hit = self._rewrite_api(qual)
                    own = hit[2] if hit and api_members(hit[2]) is None else None
                    rule = own or self._rule_for_from_import(module, name, new_module)
                    if rule is not None:
                        self._local_renames[name] = (renames[name], rule)

    def _rule_for_from_import(self, module: str, name: str, new_module: Optional[Tuple[str, Rule]]) -> Optional[Rule]:
        if new_module:
            return new_module[1]
        qual = f"{module}.{name}"
        sub = self.ctx.rules.module.get(qual)
        hit = self._rewrite_api(qual)
        return sub or (hit[2] if hit else None)

    def _plan_from_import(
        self, module: str, aliases: Sequence[cst.ImportAlias]
    ) -> Optional[Tuple[Optional[Tuple[str, Rule]], Dict[str, str]]]:
        """How to rewrite `from module import names`: (new module + rule or None, name renames).
        None when nothing changes or when a name has no NPU twin (then the statement stays as
        it is and the names are reported where they are used)."""
        plan = self._plan_from_import_names(module, aliases)
        if plan is None:
            return None
        # Only a statement that would change needs every use of its names checked (a walk of
        # the whole module, and in a partial parse another attempt where a name is used in a
        # line left out): the checks can only keep the statement as it is.
        for alias in aliases:
            name = dotted_name(alias.name)
            local = dotted_name(alias.asname.name) if alias.asname is not None else name
            if not self._alias_members_ok(local, f"{module}.{name}"):  # type: ignore[arg-type]
                return None  # `from torch import cuda` + `cuda.get_arch_list()`: see _alias_members_ok
        return plan

    def _plan_from_import_names(
        self, module: str, aliases: Sequence[cst.ImportAlias]
    ) -> Optional[Tuple[Optional[Tuple[str, Rule]], Dict[str, str]]]:
        """_plan_from_import before the uses of the imported names are checked."""
        rs = self.ctx.rules
        module_rule = rs.module.get(module)
        renames: Dict[str, str] = {}
        # (`from torch.cuda.amp.grad_scaler import GradScaler`: every name's twin is in one other
        # module, torch.npu.amp, and the module itself has no rule: the statement moves there)
        elsewhere: Optional[Tuple[str, Rule]] = None
        moved = 0
        for alias in aliases:
            name = dotted_name(alias.name)
            if name is None:
                return None
            qual = f"{module}.{name}"
            sub_rule = rs.module.get(qual)
            if sub_rule is not None and sub_rule.to.rsplit(".", 1)[0] == (module_rule.to if module_rule else module):
                renames[name] = sub_rule.to.rsplit(".", 1)[1]
                continue
            hit = self._rewrite_api(qual)
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
                    if elsewhere is not None and elsewhere[0] != new_parent:
                        return None
                    elsewhere = (new_parent, _rule)
                    moved += 1
                    if new_name != name:
                        renames[name] = new_name
                continue
            if module_rule is not None:
                # A name of a rewritten module with no NPU twin: keep the import as it is.
                return None
        if elsewhere is not None:
            # (all of them, or the statement would have to be split: it stays)
            return (elsewhere, renames) if moved == len(aliases) else None
        if module_rule is None and not renames:
            return None
        return ((module_rule.to, module_rule) if module_rule else None), renames

    def visit_Import(self, node: cst.Import) -> bool:
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return False

    def _binds_torch_elsewhere(self, original: cst.Import) -> bool:
        """Whether an import other than the rewritten aliases of `original` binds the name
        `torch` (`import torch`, `import torch.nn`, or a `torch.X` import that stays torch's)."""
        rs = self.ctx.rules
        for node in self.state.imports.import_nodes:
            if not isinstance(node, cst.Import):
                continue
            for alias in node.names:
                full = dotted_name(alias.name) or ""
                if alias.asname is not None or not (full == "torch" or full.startswith("torch.")):
                    continue
                rule = rs.module.get(full)
                if rule is None or rule.to.split(".", 1)[0] == "torch" or self.target.missing(rule.to) is not None:
                    return True
        return False

    def leave_Import(self, original: cst.Import, updated: cst.Import) -> cst.Import:
        rs = self.ctx.rules
        names = []
        changed = False
        bound_torch = False  # an alias rewritten here bound `torch`, which the new one does not
        for alias in updated.names:
            full = dotted_name(alias.name)
            rule = rs.module.get(full) if full else None
            if rule is not None and self.target.missing(rule.to) is not None:
                rule = None
            if rule is not None and alias.asname is not None:
                if not self._alias_members_ok(dotted_name(alias.asname.name) or "", full):  # type: ignore[arg-type]
                    rule = None
            if rule is not None and not self.ctx.suppressed(original, rule.code):
                new_alias = alias.with_changes(name=cst.parse_expression(rule.to))
                if alias.asname is None and (full or "").split(".", 1)[0] == "torch" and rule.to.split(".", 1)[0] != "torch":
                    bound_torch = True
                self.ctx.edit(
                    rule,
                    alias,
                    rule.render_message(before=f"import {full}", after=f"import {rule.to}"),
                    f"import {full}",
                    f"import {rule.to}",
                )
                names.append(new_alias)
                changed = True
                self.ctx.require_import("torch_npu")
            else:
                names.append(alias)
        if bound_torch and not self._binds_torch_elsewhere(original):
            # `import torch.cuda.amp` bound `torch` too (pytorch-pfn-extras' runtime/_autocast.py
            # has no other torch import): `import torch_npu.npu.amp` alone leaves `torch.npu...`
            # a NameError, so the statement keeps `torch` first.
            names.insert(0, cst.ImportAlias(name=cst.Name("torch"), comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))))
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
        self.ctx.require_import("torch_npu")
        return new

    def _report_untwinned_imports(self, module: str, node: cst.ImportFrom) -> None:
        if isinstance(node.names, cst.ImportStar):
            return
        for alias in node.names:
            name = dotted_name(alias.name)
            if name is None:
                continue
            qual = f"{module}.{name}"
            if self._report_reference(qual, alias, module, rewritten=self._rewrite_api(qual) is not None):
                continue
            # `from torch.cuda.nccl import all_reduce`: a name of a module with no NPU twin is
            # reported by the finding of the nearest module above it (torch.cuda.nccl, torch.cuda).
            if self._rewrite_api(qual) is None:
                fallback = self._enclosing_finding(module)
                if fallback is not None:
                    self.ctx.finding(fallback, alias, api=qual)

    def _enclosing_finding(self, module: str) -> Optional[Rule]:
        """The `api` finding of `module` or the nearest module above it."""
        parts = module.split(".")
        for end in range(len(parts), 0, -1):
            rule = self.ctx.rules.finding_api.get(".".join(parts[:end]))
            if rule is not None:
                return rule
        return None

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._not_references.add(id(node.attr))
        if isinstance(node.value, cst.Name):
            self._attribute_bases.add(id(node.value))
        # Top-down, before the inner attributes are rewritten: a reference whose NPU twin the
        # target lacks holds the attributes it is made of.
        if isinstance(node.value, cst.Attribute):
            if id(node) in self._held:
                self._held.add(id(node.value))
                return
            qual = self.resolve(node)
            if qual is not None and (self._stays(qual) or self._rewrite_api(qual) is None and qual in self._blocked):
                self._held.add(id(node.value))
            elif qual is not None and self._rewrite_api(qual) is not None:
                # `torch.cuda.amp.grad_scaler.GradScaler` -> `torch.npu.amp.GradScaler` as a whole:
                # the module it goes through, whose twin the target lacks, is not reported
                inner = self.resolve(node.value)
                if inner is not None and self._rewrite_api(inner) is None and inner in self._blocked:
                    self._held.add(id(node.value))

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self._not_references.add(id(node.keyword))

    def visit_Param(self, node: cst.Param) -> None:
        self._not_references.add(id(node.name))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._not_references.add(id(node.name))

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._not_references.add(id(node.name))

    def _is_member_module(self, qual: str) -> bool:
        """Whether `qual` is a module whose members are rewritten one by one (`torch.cuda`)."""
        return any(api_members(r) is not None for r in self.ctx.rules.api.get(qual, ()))

    def _report_reference(self, qual: str, node: cst.CSTNode, parent: Optional[str], rewritten: bool) -> bool:
        """Report `qual` if a finding names it exactly (also when it is rewritten: the NPU twin
        may behave differently), or -- for a member of a module whose members are rewritten one
        by one -- if that member has no NPU twin (the module's own finding is the fallback).
        Whether a finding covers it (one shown in a log call, or a class an isinstance test names,
        is covered, not reported)."""
        rs = self.ctx.rules
        if not rewritten and self._report_target(qual, node):
            return True
        rule = rs.finding_api.get(qual)
        if rule is not None and not self._is_member_module(qual):
            spec = FindingSpec.of(rule)
            if not (spec.skip_logged and self.state.shown) and not (spec.skip_type_tests
                                                                  and id(node) in self.state.type_tests):
                self.ctx.finding(rule, node, api=qual)
            return True
        if not rewritten and parent is not None and self._is_member_module(parent):
            fallback = rs.finding_api.get(parent)
            if fallback is not None:
                meant = self._misspelt(qual, parent)
                self.ctx.finding(fallback, node, api=qual, suggestion=None if meant is None else (
                    f"A typo for `{meant}`? It is the name {parent} has; correct it and run npu-migrate again."))
                return True
        return False

    def _misspelt(self, qual: str, parent: str) -> Optional[str]:
        """The name `qual` (a member of `parent` with no twin and no finding of its own) most
        likely misspells: one of the module's members with a twin or a finding, one or two
        letters away (`torch.cuda.is_avaliable`). A newcomer was told to remove the call, as for
        a CUDA-only API. None when no name is that close."""
        import difflib  # only here: a member with no twin is rare

        rs = self.ctx.rules
        prefix = parent + "."
        known = {m for r in rs.api.get(parent, ()) for m in api_members(r) or ()}
        known |= {k[len(prefix):] for k in rs.finding_api if k.startswith(prefix) and "." not in k[len(prefix):]}
        name = qual[len(prefix):]
        for close in difflib.get_close_matches(name, sorted(known), n=3, cutoff=0.85):
            changed = difflib.SequenceMatcher(None, name, close, autojunk=False).get_opcodes()
            if sum(max(i2 - i1, j2 - j1) for op, i1, i2, j1, j2 in changed if op != "equal") <= 2:
                return prefix + close
        return None

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
            self.ctx.require_import("torch_npu")
        kept = self._kept_imports.get(original.value)
        if kept is not None and kept[0] == qual and id(original) not in self._attribute_bases:
            # `set_device` of a kept `from` import; `f(tc)`. (`tc.set_device` is reported whole.)
            self._report_kept(original.value, qual, original)
        parent = qual.rsplit(".", 1)[0] if "." in qual else None
        # `synchronize` after `from torch.cuda import synchronize`: the import was rewritten,
        # so the name has its NPU twin.
        self._report_reference(qual, original, parent, rewritten=self._rewrite_api(qual) is not None)
        return updated

    def _rewrite_reference(self, original: cst.Attribute, updated: cst.Attribute, qual: str) -> cst.BaseExpression:
        """`torch.cuda.X` (resolved through imports) -> its NPU twin, and its `api` finding."""
        if id(original) in self._held or self._stays(qual):
            return updated  # part of a reference the target blocks (reported as a whole), or one that stays
        if isinstance(original.value, cst.Name) and original.value.value in self._kept_imports:
            self._report_kept(original.value.value, qual, original)  # `tc.set_device` of a kept `tc`
        if qual.startswith("torch.npu") or qual.startswith("torch_npu"):
            self.ctx.require_import("torch_npu")
        parent = self.resolve(original.value)
        hit = self._rewrite_api(qual)
        self._report_reference(qual, original, parent, rewritten=hit is not None)
        if hit is not None:
            prefix, to, rule = hit
            listed = api_members(rule)
            if listed is None and prefix == qual:
                return self._replace_reference(original, updated, updated, qual, to, rule)
            if listed is not None and prefix == parent:
                new_value = self._replace_prefix(original.value, updated.value, parent, to, rule, qual)
                if new_value is not updated.value:
                    return updated.with_changes(value=new_value)
        return updated

    def _replace_prefix(self, original_value: cst.BaseExpression, updated_value: cst.BaseExpression, old: str, new: str,
                        rule: Rule, qual: str) -> cst.BaseExpression:
        """Replace the expression that names module `old` by one naming `new`, keeping the
        user's alias: `th.cuda` -> `th.npu`; an imported alias (`tc`) stays as it is because
        its import statement is rewritten instead."""
        if self.ctx.suppressed(original_value, rule.code):
            return updated_value
        old_parent, old_last = old.rsplit(".", 1) if "." in old else ("", old)
        new_parent, new_last = new.rsplit(".", 1) if "." in new else ("", new)
        replaced: cst.BaseExpression
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
        self.ctx.require_import("torch_npu")
        return replaced

    def _replace_reference(self, original: cst.Attribute, updated: cst.Attribute, value: cst.BaseExpression, old: str,
                           new: str, rule: Rule) -> cst.Attribute:
        """Exact renames (`torch.cuda.CUDAGraph` -> `torch.npu.NPUGraph`), keeping the user's
        spelling of the base (`th.cuda.CUDAGraph` -> `th.npu.NPUGraph`)."""
        if self.ctx.suppressed(original, rule.code):
            return updated
        old_parent = old.rsplit(".", 1)[0]
        new_parent, new_last = new.rsplit(".", 1)
        base: cst.BaseExpression = updated.value
        if old_parent != new_parent:
            if isinstance(base, cst.Attribute) and old_parent.rsplit(".", 1)[0] == new_parent.rsplit(".", 1)[0]:
                base = base.with_changes(attr=cst.Name(new_parent.rsplit(".", 1)[-1]))
            elif not isinstance(base, cst.Name):  # an imported alias's own import is rewritten
                base = cst.parse_expression(new_parent)
        replaced = updated.with_changes(value=base, attr=cst.Name(new_last))
        before = self.ctx.code_for(original)
        after = self.ctx.code_for(replaced)
        self.ctx.edit(rule, original, rule.render_message(before=before, after=after), before, after)
        self.ctx.require_import("torch_npu")
        return replaced

    def _type_string_argument(self, original: cst.Call, updated: cst.Call, qual: Optional[str]) -> cst.Call:
        """x.type("torch.cuda.FloatTensor"), torch.set_default_tensor_type("torch.cuda.FloatTensor");
        hasattr(torch.cuda, "mem_get_info") (_feature_test)"""
        if qual is None and isinstance(original.func, cst.Name) and original.func.value in ("hasattr", "getattr"):
            return self._feature_test(original, updated)
        if len(updated.args) == 1 and (
            qual in TYPE_STRING_FUNCS
            or (qual is None and isinstance(original.func, cst.Attribute) and original.func.attr.value == "type")
        ):
            return self._tensor_type_string(original, updated)
        return updated

    def _feature_test(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        """`hasattr(torch.cuda, "mem_get_info")` (mmpretrain's RAM demo, guarding a call that became
        `torch.npu.mem_get_info`): the module tested moves with the name where that name moves
        (the same rule, the name in the target), so the test and the code it guards name one
        module. `getattr(torch.cuda, "X", default)` likewise."""
        if len(original.args) < 2 or len(updated.args) != len(original.args):
            return updated
        module, name_arg = original.args[0], original.args[1]
        if module.keyword is not None or name_arg.keyword is not None or module.star or name_arg.star:
            return updated
        name = string_value(name_arg.value)
        if (not name or not name.isidentifier() or not isinstance(module.value, cst.Attribute)
                or module.value.attr.value != "cuda" or self.resolve(module.value) != "torch.cuda"):
            return updated
        qualname = f"torch.cuda.{name}"
        hit = self.ctx.rules.rewrite_api(qualname)
        if hit is None:
            return updated
        prefix, to, rule = hit
        new_qualname = to + qualname[len(prefix):]
        if (new_qualname != f"torch.npu.{name}" or self.target.missing(new_qualname) is not None
                or self.ctx.suppressed(module.value, rule.code)):
            return updated
        first = updated.args[0]
        if not isinstance(first.value, cst.Attribute):
            return updated
        self.ctx.edit(rule, module.value, rule.render_message(before=qualname, after=new_qualname),
                      "torch.cuda", "torch.npu")
        self.ctx.require_import("torch_npu")
        new_first = first.with_changes(value=first.value.with_changes(attr=cst.Name("npu")))
        return updated.with_changes(args=[new_first, *updated.args[1:]])

    def _tensor_type_string(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        arg = updated.args[0]
        value = string_value(arg.value)
        if value is None or arg.keyword is not None:
            return updated
        hit = self._rewrite_api(value)
        if hit is None or not value.startswith("torch."):
            return updated
        prefix, to, rule = hit
        if self.ctx.suppressed(original, rule.code):
            return updated
        new_value = to + value[len(prefix) :]
        new_node = arg.value.with_changes(value=f"{arg.value.prefix}{arg.value.quote}{new_value}{arg.value.quote}")  # type: ignore[attr-defined]
        self.ctx.edit(rule, original.args[0].value, rule.render_message(before=value, after=new_value), value, new_value)
        self.ctx.require_import("torch_npu")
        return updated.with_changes(args=[arg.with_changes(value=new_node)])
