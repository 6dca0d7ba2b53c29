"""`[[add_import]]`: an import to add where NPU APIs are used.

Without `framework`: `import <module>` (torch_npu) goes right after the file's first import of
`after` (torch) when the PyTorch pass rewrote something to the NPU or found NPU code already.
With `framework`: the TensorFlow/MindSpore pass adds `import <module>` -- or, with `names`,
`from <module> import <names>` (`["*"]`: a star import) -- before the file's first import
when one of its rewrites uses those names.

    [[add_import]]
    code = "NPU108"
    module = "torch_npu"
    after = "torch"
    message = "..."
"""

from __future__ import annotations

from ..words import Requirement, Word
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from .base import IDENT_RE, QUALNAME_RE, Kind, Rule, RuleError, register, schema


@dataclass(frozen=True)
class AddImportSpec:
    """A framework's import (`framework = ...`): `from <module> import <names>` when `names`."""

    names: Tuple[str, ...] = ()


class AddImports(Dict[str, Rule]):
    """`after` -> its rule (a later rule with the same `after` wins); `last`: the last rule
    filed (a framework pass adds that one)."""

    last: Optional[Rule] = None


def _index(index: AddImports, rule: Rule) -> None:
    index[rule.from_] = rule
    index.last = rule


def _requirements(rule: Rule) -> List[Requirement]:
    if rule.framework:
        return []  # added only where another rule of the framework rewrote something
    # `import torch_npu` is added where NPU APIs are used: the rewrites of the other kinds, or
    # code that already uses them (`.npu()`, `torch.npu.*`, `torch.npu_*`), in a file
    # importing `after`.
    # And where `torch.device` is given an index alone (`device(0)`): the accelerator, which is
    # the NPU only with torch_npu loaded (codemods/torch/__init__.py).
    root = rule.from_.split(".", 1)[0]
    return [Requirement(frozenset({Word(root), Word("npu", prefix=True)}), leaf=Word("npu", prefix=True)),
            Requirement(frozenset({Word(root), Word("device")}),
                        frozenset({("link", f"{root}.device"), ("index_call", "device")}), leaf=Word("device"),
                        name=f"{root}.device"),
            # ... under another name (`from torch import device as Device`; `Device(0)`): partial
            # parsing keeps the alias's statements (partial.StatementFilter's alias words)
            Requirement(frozenset({Word(root), Word("device")}), frozenset({("import_as", "device")}),
                        leaf=Word("device"), name=f"{root}.device")]


def _spec(entry: Dict[str, Any], label: str, framework: str) -> Optional[AddImportSpec]:
    names = entry.get("names", [])
    if "names" in entry and not framework:
        raise RuleError(f"{label}: 'names' is only for [[add_import]] with 'framework'")
    if not isinstance(names, list) or not all(isinstance(n, str) and (n == "*" or IDENT_RE.match(n)) for n in names):
        raise RuleError(f"{label}: 'names' must be a list of identifiers, or [\"*\"]")
    if not QUALNAME_RE.match(entry["module"]):
        raise RuleError(f"{label}: {entry['module']!r} is not a dotted Python name")
    return AddImportSpec(names=tuple(names)) if framework else None


KIND = register(Kind(
    name="add_import",
    schema=schema(("module", "after"), ("framework", "names")),
    summary="an import added where the migrated code needs it",
    requirements=_requirements,
    new_index=AddImports,
    index=_index,
    spec=_spec,
))
