"""What one run of `npu-migrate` is asked to do: the command line merged over the configuration
file (config.py), typed. cli.py makes a Settings from click's options; pipeline.py runs it."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

from .model import WriteBack
from .options import Options
from .targets import RunTargets


@dataclass(frozen=True)
class Settings:
    """One field per option of the `migrate` command, under its click parameter name. A field
    that is also a field of options.Options (SAME_OPTIONS) takes its default from there: the
    defaults of what a run does live in one place."""

    paths: Tuple[str, ...] = ()
    write: bool = False
    show_diff: bool = False  # --diff
    check: bool = False
    output_dir: Optional[str] = None  # --output-dir: a migrated copy of the input tree
    fail_on: str = "error"
    report_unused_ignores: bool = False
    fmt: str = "text"  # --format
    output_file: Optional[str] = None  # -o: where the report goes
    rule_files: Tuple[str, ...] = ()  # --rules
    framework: str = Options.framework
    no_import: bool = False
    npu_ops: bool = Options.npu_ops
    distributed: bool = Options.distributed
    torch_npu_version: str = ""  # --torch-npu-version, as given
    cann_version: str = ""  # --cann-version, as given
    mindspore_version: str = ""  # --mindspore-version, as given
    modelarts: bool = False
    entries: Tuple[str, ...] = ()  # --entry
    modelarts_entry: bool = False
    modelarts_resume: bool = Options.modelarts_resume
    modelarts_data_dir: str = Options.modelarts_data_dir
    modelarts_output_dir: str = Options.modelarts_output_dir
    data_args: Tuple[str, ...] = Options.data_args  # --data-arg
    output_args: Tuple[str, ...] = Options.output_args  # --output-arg
    modelarts_sync_every: float = Options.modelarts_sync_every
    exclude: Tuple[str, ...] = ()
    extend_exclude: Tuple[str, ...] = ()
    force_exclude: bool = False
    known_files_only: bool = False  # explicit files a folder walk would not take are skipped (pre-commit)
    respect_gitignore: bool = True
    jobs: int = 0
    no_cache: bool = False
    stdin_filename: Optional[str] = None
    config_file: Optional[str] = None  # --config
    isolated: bool = False
    color: str = "auto"
    fail_on_empty: bool = False  # a folder given with nothing to migrate is an error, not a warning
    quiet: bool = False
    verbose: bool = False
    stats: bool = False  # --stats: the run's work counts (work.py)
    # Not an option: the targets (targets.RunTargets: torch_npu, CANN, MindSpore) resolved
    # from the options, the configuration or the project (cli.py sets it), which the reports name.
    targets: Optional[RunTargets] = None

    @classmethod
    def from_params(cls, params: Dict[str, Any]) -> "Settings":
        """From click's parameters (a new option of the command needs a field here)."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(params) - names)
        if unknown:
            raise TypeError(f"settings.Settings has no field for the option(s) {', '.join(unknown)}")
        return cls(**params)

    @property
    def stdin(self) -> bool:
        return self.paths == ("-",)

    @property
    def mode(self) -> WriteBack:
        """What happens to migrated files (stdin: the migrated text goes to stdout unless
        --diff or --check)."""
        if self.stdin:
            return WriteBack.DIFF if self.show_diff else WriteBack.CHECK if self.check else WriteBack.STDIN
        if self.write:
            return WriteBack.WRITE
        if self.show_diff:
            return WriteBack.DIFF
        if self.check:
            return WriteBack.CHECK
        if self.output_dir:
            return WriteBack.OUTPUT_DIR
        return WriteBack.REPORT

    @property
    def keeps_original_text(self) -> bool:
        """Whether the original text of changed files is needed (for diffs)."""
        return self.show_diff or self.fmt != "text"

    def options(self) -> Options:
        """What the engine does to each file: the Options fields of the same name as a field
        here as they are (SAME_OPTIONS), the others derived (DERIVED_OPTIONS); the project's
        (PROJECT_OPTIONS) are added by pipeline.py."""
        same: Dict[str, Any] = {name: tuple(value) if isinstance(value, list) else value
                for name in SAME_OPTIONS for value in [getattr(self, name)]}
        return Options(
            **same,
            modelarts=self.modelarts or self.modelarts_entry,
            modelarts_boot=self.modelarts_entry,
            modelarts_entry_files=tuple(os.path.abspath(e) for e in self.entries),
            add_import=not self.no_import,
            # the resolved targets (the options as given until cli.py resolves them)
            targets=self.targets if self.targets is not None else RunTargets.of(
                self.torch_npu_version, self.cann_version, self.mindspore_version),
        )


# How each options.Options field gets its value (tests/test_cli_core.py holds that every field is
# in exactly one of these, and that a field here and there has one default):
# derived from other settings in Settings.options()
DERIVED_OPTIONS = frozenset({"modelarts", "modelarts_boot", "modelarts_entry_files", "add_import", "targets"})
# found in the project by pipeline.py (migrate_files: local modules, device settings, ModelArts scan)
PROJECT_OPTIONS = frozenset({"local_modules", "device_config_keys", "mindspore_device_moves", "cuda_only_code",
                             "exported_names", "whole_readers", "own_attributes", "npu_families", "device_functions",
                             "cuda_tests",
                             "tensorflow2_project",
                             "modelarts_moxing_files",
                             "modelarts_utility_files"})
# the rest: a Settings field of the same name, as it is
SAME_OPTIONS = tuple(f.name for f in dataclasses.fields(Options)
                     if f.name not in DERIVED_OPTIONS | PROJECT_OPTIONS
                     and f.name in {s.name for s in dataclasses.fields(Settings)})
