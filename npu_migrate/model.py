"""The data every part of npu-migrate exchanges: edits/findings/results out (the options in are
options.Options, which holds the run's resolved targets).

Everything here is plain, picklable data so results can cross process boundaries (the
runner's pool) and be cached as JSON.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional


class Severity(str, enum.Enum):
    """How much a finding matters. Ordered: ERROR > WARNING > INFO."""

    INFO = "info"
    WARNING = "warning"
    ERROR = "error"

    @property
    def rank(self) -> int:
        return {"info": 0, "warning": 1, "error": 2}[self.value]


# Exit codes (like black and ruff): 0 nothing to do or everything done; 1 something would change
# (--diff, --check) or a finding at/above --fail-on (--check); 2 a usage, configuration or file
# error; 130 / 143 interrupted by Ctrl-C / SIGTERM. report.RunReport.return_code decides.
EXIT_OK, EXIT_CHANGES, EXIT_ERROR, EXIT_SIGINT, EXIT_SIGTERM = 0, 1, 2, 130, 143


class WriteBack(str, enum.Enum):
    """What happens to migrated files (black's WriteBack): settings.Settings.mode picks one from
    --write/--diff/--check/--output-dir/stdin; pipeline.py writes back as it says, the report and
    the exit code read it. A str: it equals (and prints as) its value."""

    REPORT = "report"  # print what would change; write nothing
    DIFF = "diff"
    CHECK = "check"
    WRITE = "write"  # in place
    OUTPUT_DIR = "output-dir"  # a migrated copy of the tree
    STDIN = "stdin"  # the migrated text of stdin goes to stdout

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    @property
    def writes(self) -> bool:
        """Whether files are written (what is written is always what this run computed)."""
        return self in (WriteBack.WRITE, WriteBack.OUTPUT_DIR)


# The ModelArts folders the job copies its input to and its outputs from: the defaults of the
# options and of the generated runtime module (modelarts/runtime_template.py), so the adapted
# script passes a folder only when it is another one.
MODELARTS_DATA_DIR = "/cache/data"
MODELARTS_OUTPUT_DIR = "/cache/output"


@dataclass(frozen=True)
class Span:
    """A source range. Lines are 1-based, columns are 1-based (as editors show them)."""

    line: int
    col: int
    end_line: int
    end_col: int


@dataclass
class Edit:
    """One rewrite made (or that would be made) in a file."""

    code: str
    span: Span
    message: str
    before: str = ""
    after: str = ""
    cell: Optional[int] = None  # notebook cell number (1-based), None for plain files

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Edit":
        d = dict(d)
        d["span"] = Span(**d["span"])
        return cls(**d)


@dataclass
class Finding:
    """Something that cannot be migrated automatically (or advice), at a location."""

    code: str
    severity: Severity
    span: Span
    api: str
    message: str
    suggestion: str = ""
    cell: Optional[int] = None

    def to_dict(self) -> Dict[str, Any]:
        d = asdict(self)
        d["severity"] = self.severity.value
        return d

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Finding":
        d = dict(d)
        d["span"] = Span(**d["span"])
        d["severity"] = Severity(d["severity"])
        return cls(**d)


# Findings reported once per run, at the first file (in the run's order) that has them
# (pipeline.once_per_run): advice about the whole project, not about each file.
ONCE_PER_RUN_CODES = frozenset({"NPU356"})  # TensorFlow 2 code: how it runs on Ascend


@dataclass
class FileResult:
    """The outcome for one file. `new_text` is None when nothing changes."""

    path: str
    edits: List[Edit] = field(default_factory=list)
    findings: List[Finding] = field(default_factory=list)
    new_text: Optional[str] = None
    error: Optional[str] = None  # one line, e.g. "cannot parse: line 3: invalid syntax"
    skipped: Optional[str] = None  # why the file was not examined (e.g. "generated")
    # `# npu-migrate: ignore` comments that silenced nothing, as NPU001 findings; reported
    # (moved into `findings`) only with --report-unused-ignores.
    unused_ignores: List[Finding] = field(default_factory=list)
    # Files generated next to this one (path -> text), e.g. the ModelArts boot file. The CLI
    # writes them (never over a file it did not generate) and shows them in --diff.
    extra_files: Dict[str, str] = field(default_factory=dict)
    # What --verbose says about how the file was handled ("TensorFlow 1.15 rules not applied: ...").
    notes: List[str] = field(default_factory=list)
    # How many expensive steps migrating it took (work.py): not part of the result (a cached
    # result took none), so neither compared nor stored.
    work: Dict[str, int] = field(default_factory=dict, compare=False, repr=False)
    # The frameworks the Python code uses (torch, tensorflow, mindspore: from its imports) when
    # something was rewritten or reported in it: whose targets applied (the text summary names
    # only those). Empty for a file with nothing to do, whether the prefilter skipped it or not.
    frameworks: List[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.new_text is not None

    def to_dict(self) -> Dict[str, Any]:
        return {
            "path": self.path,
            "edits": [e.to_dict() for e in self.edits],
            "findings": [f.to_dict() for f in self.findings],
            "new_text": self.new_text,
            "error": self.error,
            "skipped": self.skipped,
            "unused_ignores": [f.to_dict() for f in self.unused_ignores],
            "extra_files": dict(self.extra_files),
            "notes": list(self.notes),
            "frameworks": list(self.frameworks),
        }

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "FileResult":
        return cls(
            path=d["path"],
            edits=[Edit.from_dict(e) for e in d["edits"]],
            findings=[Finding.from_dict(f) for f in d["findings"]],
            new_text=d["new_text"],
            error=d["error"],
            skipped=d["skipped"],
            unused_ignores=[Finding.from_dict(f) for f in d.get("unused_ignores", ())],
            extra_files=dict(d.get("extra_files", {})),
            notes=list(d.get("notes", ())),
            frameworks=list(d.get("frameworks", ())),
        )
