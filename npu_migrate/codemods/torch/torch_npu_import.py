"""The add_import kind (kinds/add_import.py) in the PyTorch pass: `import torch_npu` after the
file's first import of torch and the `import torch.xxx` lines right after it (where isort puts
it; before it when that import needs torch_npu loaded first: `import torch.npu`, `from torch
import device`), where the pass migrated something to the NPU or found NPU code (its rewrites ask for it
with `ctx.require_import("torch_npu")`; codemods/add_imports.py).
"""

from __future__ import annotations

import os
import re
from typing import List, Optional, Sequence, Union

import libcst as cst

from ...context import Context
from ...imports import dotted_name
from ...prefilter import compiled
from ...rules import Rule
from ..syntax import leading_lines
from ...codes import applies


NOQA = "# noqa: F401"  # linters would delete an import nothing seems to use


def _with_noqa(trailing: cst.TrailingWhitespace) -> cst.TrailingWhitespace:
    """The end of a line given `import torch_npu`: `# noqa: F401` added, after the user's own
    comment when there is one (flake8 and ruff read it there too; issue 30.11)."""
    comment = trailing.comment.value if trailing.comment is not None else None
    if comment is None:
        return trailing.with_changes(whitespace=cst.SimpleWhitespace("  "), comment=cst.Comment(NOQA))
    if re.search(r"#\s*noqa(?!\s*:)", comment, re.IGNORECASE) or "F401" in comment:
        return trailing  # a bare noqa (no codes) silences every code already; or F401 is named
    codes = compiled(_NOQA_CODES).search(comment)
    if codes:  # flake8 reads the first noqa directive only: F401 joins its codes
        return trailing.with_changes(comment=cst.Comment(f"{comment[:codes.end()]}, F401{comment[codes.end():]}"))
    return trailing.with_changes(comment=cst.Comment(f"{comment}  {NOQA}"))


# (compiled where first used, prefilter.compiled: 1 ms of every start, for a file with a noqa comment)
_NOQA_CODES = r"(?i)#\s*noqa\s*:\s*[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*"


def _imports_torch(stmt: cst.CSTNode) -> Optional[Union[cst.Import, cst.ImportFrom]]:
    if isinstance(stmt, cst.SimpleStatementSuite):  # `if x: import torch; ...` on one line
        return _torch_import_in(stmt.body)
    if not isinstance(stmt, cst.SimpleStatementLine):
        return None
    return _torch_import_in(stmt.body)


def _torch_import_in(body: Sequence[cst.BaseSmallStatement]) -> Optional[Union[cst.Import, cst.ImportFrom]]:
    for s in body:
        if isinstance(s, cst.Import):
            names = [dotted_name(alias.name) or "" for alias in s.names]
            if any(n == "torch_npu" or n.startswith("torch_npu.") for n in names):
                continue  # `import torch, torch_npu.npu.amp` (references.py): torch_npu is there
            for alias in s.names:
                name = dotted_name(alias.name) or ""
                if name == "torch" or name.startswith("torch."):
                    return s
        elif isinstance(s, cst.ImportFrom) and not s.relative and s.module is not None:
            name = dotted_name(s.module) or ""
            if name == "torch" or name.startswith("torch."):
                return s
    return None


def is_torch_npu_itself(path: str) -> bool:
    """A module of the torch_npu package (`torch_npu/__init__.py`, `.../torch_npu/contrib/x.py`)
    or a `torch_npu.py`: NPU code already, whose CUDA names are there on purpose (it maps
    `torch.cuda` onto the NPU); the torch pass leaves it as it is, and `import torch_npu` there
    would import the module into itself. Decided by the path alone (a result the cache keeps
    by path and content must not depend on other files)."""
    parts = os.path.abspath(path).split(os.sep)
    return parts[-1] == "torch_npu.py" or "torch_npu" in parts[:-1]


def _imports_torch_npu(ctx: Context) -> bool:
    return ctx.imports.imports_module("torch_npu")


def _needs_torch_npu_before(stmt: Union[cst.Import, cst.ImportFrom]) -> bool:
    """`import torch.npu` / `from torch.npu import x` only work once torch_npu is imported; and
    `from torch import device` (or `*`) binds the class torch_npu before 2.5 replaces at its
    import (torch_npu/utils/_device.py's apply_device_patch: `torch.device(0)` is npu:0 after it):
    bound before, the name keeps torch's own class, whose `device(0)` is cuda:0 on torch < 2.5
    (an int meant CUDA until pytorch#129119 made it the current accelerator)."""
    if isinstance(stmt, cst.Import):
        names = [dotted_name(a.name) or "" for a in stmt.names]
    else:
        names = [dotted_name(stmt.module) or ""]
        if names == ["torch"] and (isinstance(stmt.names, cst.ImportStar) or any(
                isinstance(a.name, cst.Name) and a.name.value == "device" for a in stmt.names)):
            return True
    return any(n == "torch.npu" or n.startswith("torch.npu.") for n in names)


def _plain_torch_import(stmt: cst.BaseStatement) -> bool:
    """`import torch.nn as nn` alone on its line (not `torch.npu`, which needs torch_npu first)."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return False
    hit = stmt.body[0]
    return isinstance(hit, cst.Import) and _imports_torch(stmt) is hit and not _needs_torch_npu_before(hit) \
        and all((dotted_name(a.name) or "").split(".")[0] == "torch" for a in hit.names)


def _after_plain_torch_imports(body: Sequence[cst.BaseStatement], i: int) -> int:
    """The last of the `import torch...` lines that follow body[i] without a blank line: where isort
    puts `import torch_npu` (after `import torch.nn`, before `from torch...` and `import torchvision`)."""
    if not _plain_torch_import(body[i]):
        return i
    while i + 1 < len(body) and _plain_torch_import(body[i + 1]) and not leading_lines(body[i + 1]):
        i += 1
    return i


class _InsertTorchNpu(cst.CSTTransformer):
    """Insert `import torch_npu` next to the first statement that imports torch, in the block
    that statement is in (module level, a `try:` body, a function)."""

    def __init__(self, statement: cst.SimpleStatementLine) -> None:
        super().__init__()
        self.statement = statement
        self.done = False
        self.inserted: Optional[cst.SimpleStatementLine] = None
        self.inserted_node: Optional[cst.Import] = None  # when put into an existing line

    def _insert(self, body: Sequence[cst.BaseStatement]) -> Optional[List[cst.BaseStatement]]:
        for i, stmt in enumerate(body):
            hit = _imports_torch(stmt)
            if hit is None:
                continue
            new = cst.SimpleStatementLine(
                body=[cst.Import(names=[cst.ImportAlias(name=cst.Name("torch_npu"))])],
                trailing_whitespace=_with_noqa(cst.TrailingWhitespace()),
            )
            self.inserted = new
            self.done = True
            out = list(body)
            if isinstance(stmt, cst.SimpleStatementLine) and stmt.body[-1] is not hit and not _needs_torch_npu_before(hit):
                # `import os; import torch; x = torch.zeros(1).cuda()`: in the same line, right
                # after `import torch`, so that it comes before the first use.
                out[i] = self._insert_in_line(stmt, hit)
                return out
            if _needs_torch_npu_before(hit):
                moved = stmt.with_changes(leading_lines=())
                new = new.with_changes(leading_lines=leading_lines(stmt))
                out[i : i + 1] = [new, moved]
            else:
                out.insert(_after_plain_torch_imports(body, i) + 1, new)
            self.inserted = new
            return out
        return None

    def _insert_at(self, body: Sequence[cst.BaseStatement], index: int) -> List[cst.BaseStatement]:
        new = cst.SimpleStatementLine(
            body=[cst.Import(names=[cst.ImportAlias(name=cst.Name("torch_npu"))])],
            trailing_whitespace=_with_noqa(cst.TrailingWhitespace()),
        )
        self.inserted = new
        self.done = True
        return [*body[:index], new, *body[index:]]

    def _insert_in_line(self, line: cst.SimpleStatementLine, hit: cst.BaseSmallStatement) -> cst.SimpleStatementLine:
        small = list(line.body)
        at = small.index(hit) + 1
        semicolon = hit.semicolon if isinstance(hit.semicolon, cst.Semicolon) else cst.Semicolon(
            whitespace_after=cst.SimpleWhitespace(" "))
        node = cst.Import(names=[cst.ImportAlias(name=cst.Name("torch_npu"))], semicolon=semicolon)
        small.insert(at, node)
        self.inserted_node = node
        new = line.with_changes(body=small, trailing_whitespace=_with_noqa(line.trailing_whitespace))
        self.inserted = new
        return new

    def _insert_in_suite(self, suite: cst.SimpleStatementSuite) -> Optional[cst.SimpleStatementSuite]:
        """`def f(): import torch; return x.cuda()`: the block is one line; `import torch_npu`
        goes into it next to `import torch` (before it for `import torch.npu`)."""
        hit = _imports_torch(suite)
        if hit is None:
            return None
        small = list(suite.body)
        at = small.index(hit) + (0 if _needs_torch_npu_before(hit) else 1)
        node = cst.Import(names=[cst.ImportAlias(name=cst.Name("torch_npu"))])
        if at < len(small):  # not last: it needs its "; " (the last one keeps the line's end as it was)
            node = node.with_changes(semicolon=cst.Semicolon(whitespace_after=cst.SimpleWhitespace(" ")))
        elif isinstance(small[-1].semicolon, cst.MaybeSentinel):
            small[-1] = small[-1].with_changes(semicolon=cst.Semicolon(whitespace_after=cst.SimpleWhitespace(" ")))
        small.insert(at, node)
        self.inserted_node = node
        self.done = True
        return suite.with_changes(body=small, trailing_whitespace=_with_noqa(suite.trailing_whitespace))

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        if self.done:
            return updated
        body = self._insert(updated.body)
        return updated.with_changes(body=body) if body is not None else updated

    def on_leave(self, original, updated):
        if not self.done and isinstance(updated, cst.SimpleStatementSuite):
            suite = self._insert_in_suite(updated)
            return suite if suite is not None else updated
        if self.done or not isinstance(updated, cst.IndentedBlock):
            return super().on_leave(original, updated)
        body = self._insert(updated.body)
        return updated.with_changes(body=body) if body is not None else updated

    def on_visit(self, node: cst.CSTNode) -> bool:
        # Expressions hold no statements.
        return not self.done and not isinstance(node, cst.BaseExpression)


def _after_first_star_import(body: Sequence[cst.BaseStatement]) -> Optional[int]:
    """The index after the first module-level `from x import *` line, or None."""
    for i, stmt in enumerate(body):
        if isinstance(stmt, cst.SimpleStatementLine) and any(
                isinstance(s, cst.ImportFrom) and isinstance(s.names, cst.ImportStar) for s in stmt.body):
            return i + 1
    return None


@applies("add_import")
def add_torch_npu_import(module: cst.Module, ctx: Context, rule: Optional[Rule]) -> cst.Module:
    if rule is None or not ctx.options.add_import or not ctx.import_required("torch_npu"):
        return module
    star = _after_first_star_import(module.body) if "torch" in ctx.imports.star_bound else None
    if (star is None and not ctx.imports.imports_module("torch")) or _imports_torch_npu(ctx):
        return module
    # `torch` from a star import (fastai's `from .torch_imports import *`): right after that
    # import, before any use; else next to a module-level import of torch, or the first anywhere.
    inserter = _InsertTorchNpu(cst.SimpleStatementLine(body=[]))
    body = inserter._insert_at(module.body, star) if star is not None else inserter._insert(module.body)
    if body is not None:
        new_module = module.with_changes(body=body)
    else:
        inserter = _InsertTorchNpu(cst.SimpleStatementLine(body=[]))
        new_module = module.visit(inserter)
    inserted = inserter.inserted
    if new_module is module:
        return module
    # The statement the inserter made is in the new tree as it is (libcst does not copy it).
    node = inserter.inserted_node or (inserted.body[0] if inserted is not None else None)
    if node is not None:
        ctx.edit(rule, node, rule.render_message(), "", "import torch_npu", module=new_module)
    return new_module
