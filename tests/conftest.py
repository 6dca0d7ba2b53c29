import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def run_cli():
    """Run the installed command line as a user would: a subprocess, cwd chosen by the test."""

    def run(*args, cwd=None, input=None, env=None):
        full_env = dict(os.environ)
        full_env.pop("NO_COLOR", None)
        full_env["NPU_MIGRATE_CACHE_DIR"] = str(Path(cwd or ".").resolve() / ".npu-migrate-test-cache")
        if env:
            full_env.update(env)
        return subprocess.run(
            [sys.executable, "-m", "npu_migrate", *args],
            cwd=cwd,
            input=input,
            capture_output=True,
            env=full_env,
        )

    return run
