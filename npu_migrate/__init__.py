"""npu-migrate: migrate GPU (CUDA) deep-learning training code to Huawei Ascend NPUs."""

__version__ = "0.1.0"

from .engine import migrate_source  # noqa: E402,F401
from .model import Edit, FileResult, Finding, Options, Severity, Span  # noqa: E402,F401
