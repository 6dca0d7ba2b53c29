"""What many test files share: the smallest GPU script and its migration, the settings of the
property tests, and the command line run in this process."""

from __future__ import annotations

import os
from pathlib import Path

from click.testing import CliRunner
from hypothesis import HealthCheck, settings

GPU = b"import torch\n\nmodel = model.cuda()\n"
NPU = b"import torch\nimport torch_npu  # noqa: F401\n\nmodel = model.npu()\n"

# Property tests: NPU_MIGRATE_PROPERTY_EXAMPLES=1000 for a long local run.
FEW = settings(max_examples=int(os.environ.get("NPU_MIGRATE_PROPERTY_EXAMPLES", "60")), deadline=None,
               suppress_health_check=list(HealthCheck))


def invoke(args, cache_dir, env=None):
    """The command line in this process, one worker, no colour: a click Result."""
    from npu_migrate.cli import main

    full_env = {"NPU_MIGRATE_CACHE_DIR": str(cache_dir), "NO_COLOR": "1", **(env or {})}
    return CliRunner().invoke(main, [*args, "--color", "never", "-j", "1"], env=full_env)


def tree_state(folder: Path) -> dict:
    """Every file under `folder`, relative path -> bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
