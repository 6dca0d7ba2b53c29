"""The targets: which releases the migrated code must run on, and what they provide.

A run has three, one per stack: torch_npu (torch_npu.py, for PyTorch code), CANN's TF Adapter
(cann.py, for TensorFlow code) and MindSpore (mindspore.py). Each is read from its table in
`rules/targets/` (tables.py) and resolved the same way (`resolve`), first hit wins:

1. the option (`--torch-npu-version`, `--cann-version`, `--mindspore-version`) or its key in
   `[tool.npu-migrate]` (a version the tool does not know is a TargetError, exit 2);
2. the project, read statically (each module's `from_project`: the pins of pins.py, or for
   CANN the install paths its launch scripts name);
3. the newest release of the table.

The pipeline resolves them once per run (`RunTargets`), derives the rules as the targets see
them once (rule_view.py) and hands both down: the passes ask the run's targets
(`options.targets`, options.Options) what a release lacks, the engine receives the derived rules. A target is
data: this package never imports a pass, the engine or a front end.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import ModuleType
from typing import Collection, Dict, List, Optional, Sequence, Tuple

from ..project_files import Project

from . import cann, mindspore, torch_npu
from .cann import CannTarget
from .mindspore import MsTarget
from .tables import TargetError
from .torch_npu import Target

__all__ = ["RunTargets", "Target", "CannTarget", "MsTarget", "TargetError", "resolve", "resolve_targets"]

# The three kinds of target, by the name of their option without `-version` (torch-npu, cann,
# mindspore): each module gives check(spec), from_project(paths) and newest_reason().
KINDS: Dict[str, Tuple[ModuleType, type]] = {
    "torch_npu": (torch_npu, Target),
    "cann": (cann, CannTarget),
    "mindspore": (mindspore, MsTarget),
}


def resolve(kind: str, explicit: str, explicit_source: str, paths: Sequence[str], project: Optional[Project] = None):
    """The `kind` target of a run: `explicit` (from `explicit_source`: "--cann-version", or the
    configuration file) when given, else the project's, else the newest. Raises TargetError for
    an explicit version the tool does not know."""
    module, make = KINDS[kind]
    if explicit:
        module.check(explicit)
        return make(explicit, explicit_source)
    found = module.from_project(paths, project)
    if found is not None:
        return make(*found)
    return make("", module.newest_reason())


@dataclass(frozen=True)
class RunTargets:
    """The three targets of one run (frozen and hashable: part of the run's options and of the
    cache key)."""

    torch: Target = field(default_factory=Target)
    cann: CannTarget = field(default_factory=CannTarget)
    mindspore: MsTarget = field(default_factory=MsTarget)

    @classmethod
    def of(cls, torch: str = "", cann: str = "", mindspore: str = "") -> "RunTargets":
        """The targets with these specs ("" = the newest), as given: no check, no reason."""
        return cls(Target(torch), CannTarget(cann), MsTarget(mindspore))

    @property
    def specs(self) -> Tuple[str, str, str]:
        """(torch_npu, cann, mindspore) as given ("" = the newest): what the rules' view of the
        targets depends on (rule_view.py, RuleSet.targets)."""
        return (self.torch.spec, self.cann.spec, self.mindspore.spec)

    # -- the torch_npu target, as before
    @property
    def spec(self) -> str:
        return self.torch.spec

    @property
    def reason(self) -> str:
        return self.torch.reason

    def label(self) -> str:
        return self.torch.label()

    def to_dict(self) -> Dict[str, object]:
        return self.torch.to_dict()

    # -- all three
    def targets_dict(self) -> Dict[str, object]:
        return {"torch_npu": self.torch.to_dict(), "cann": self.cann.to_dict(), "mindspore": self.mindspore.to_dict()}

    def summary_lines(self, frameworks: Collection[str] = ()) -> List[str]:
        """The targets that applied: of the frameworks the migrated files use, torch_npu for
        PyTorch, CANN for TensorFlow, MindSpore for MindSpore (the torch_npu target when no file
        told: dependency lists, shell scripts)."""
        frameworks = set(frameworks) or {"torch"}
        lines = []
        for framework, target in (("torch", self.torch), ("tensorflow", self.cann), ("mindspore", self.mindspore)):
            if framework in frameworks:
                lines.append(f"Target: {target.label()} ({target.reason or 'the newest release'}).")
        return lines


def resolve_targets(versions: Dict[str, Tuple[str, str]], paths: Sequence[str],
                    project: Optional[Project] = None) -> RunTargets:
    """The run's targets from {kind: (explicit version or "", where it came from)}; `project`:
    the run's (its walks exclude what the run excludes)."""
    def one(kind: str):
        explicit, source = versions.get(kind, ("", ""))
        return resolve(kind, explicit, source, paths, project)

    return RunTargets(torch=one("torch_npu"), cann=one("cann"), mindspore=one("mindspore"))
