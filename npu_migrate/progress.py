"""A progress bar on stderr for long runs on a terminal, and nothing otherwise.

rich is imported only when the bar is shown: a one-file run (a pre-commit hook, an editor) must
not pay for it.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Optional

# Below this many files a run is over before a bar would be worth looking at.
MIN_FILES = 40


def wanted(total: int, quiet: bool, stream: Any = None) -> bool:
    stream = stream if stream is not None else sys.stderr
    if quiet or total < MIN_FILES or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class ProgressBar:
    """Context manager; `advance()` once per finished file. Does nothing when not `enabled`."""

    def __init__(self, total: int, enabled: bool, description: str = "migrating") -> None:
        self.total = total
        self.enabled = enabled
        self.description = description
        self._progress: Optional[Any] = None
        self._task: Any = None

    def __enter__(self) -> "ProgressBar":
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("files"),
                TimeRemainingColumn(),
                console=Console(stderr=True),
                transient=True,  # the bar disappears; the report that follows stays readable
            )
            self._progress.__enter__()
            self._task = self._progress.add_task(self.description, total=self.total)
        return self

    def advance(self, _outcome: Any = None) -> None:
        if self._progress is not None:
            self._progress.advance(self._task)

    def __exit__(self, *exc: Any) -> None:
        if self._progress is not None:
            self._progress.__exit__(*exc)
            self._progress = None
