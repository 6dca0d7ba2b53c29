"""The targets of one run: torch_npu (targets.py), CANN (targets_cann.py) and MindSpore
(targets_mindspore.py), as cli.py resolves them and the reports name them.

It stands where a torch_npu `Target` stood before (`settings.target`, `RunReport.target`):
`label()`, `reason`, `spec` and `to_dict()` are the torch_npu target's; `targets_dict()` and
`summary_lines()` name all three.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List

from .targets import Target
from .targets_cann import CannTarget
from .targets_mindspore import MsTarget


@dataclass(frozen=True)
class RunTargets:
    torch: Target = field(default_factory=Target)
    cann: CannTarget = field(default_factory=CannTarget)
    mindspore: MsTarget = field(default_factory=MsTarget)

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

    def summary_lines(self) -> List[str]:
        """The torch_npu target always; CANN and MindSpore when the option, the configuration
        or the project chose them (the newest is the default and goes without saying)."""
        lines = [f"Target: {self.torch.label()} ({self.torch.reason or 'the newest release'})."]
        for target in (self.cann, self.mindspore):
            if target.spec:
                lines.append(f"Target: {target.label()} ({target.reason}).")
        return lines
