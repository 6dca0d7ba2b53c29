"""What the ModelArts adaptation needs to know about the project around an entry script, found
once per run by a text search (nothing is imported) and passed to the codemod in Options (so the
cache key holds it):

* Options.modelarts_moxing_files: an entry script that imports a module of its project which
  copies from and to OBS with moxing (a `moxing_adapter.py`, a `utils/obs.py`) is adapted
  already: adding the generated copier would download the data twice;
* Options.modelarts_utility_files: scripts run by hand beside the entry (a split or download
  helper with its own argparse and main block) are not entry scripts. One is a utility when it
  shows no training (no backward/step/fit/train call, no train_op, no Trainer), imports no module
  of its own folder, and a script beside it with a main block does train.
"""

from __future__ import annotations

import os
import re
from typing import Dict, Iterable, Sequence, Tuple

from ..project_files import Project
from . import RUNTIME_MARKER

MOXING_IMPORT = re.compile(rb"^[ \t]*(import[ \t]+moxing\b|from[ \t]+moxing\b)", re.MULTILINE)
MAX_FILES = 5000  # per folder walked around an explicitly named script


def _python_files_around(project: Project) -> Iterable[str]:
    """The .py files of the folders of explicitly named files (their helpers are not named),
    as the run's project walks them (what it excludes is never read)."""
    for path in project.paths:
        if not os.path.isfile(path):
            continue
        count = 0
        for found in project.files(os.path.dirname(os.path.abspath(path))):
            if found.endswith(".py"):
                count += 1
                yield found
                if count > MAX_FILES:
                    break


def scan_project(files: Sequence[str], project: Project) -> Tuple[Tuple[str, ...], Tuple[str, ...]]:
    """(the files importing moxing, the utility scripts beside an entry) among the .py files given
    and those around explicitly named scripts: absolute paths, each file read once."""
    texts: Dict[str, bytes] = {}
    for path in list(files) + list(_python_files_around(project)):
        path = os.path.abspath(path)
        if path.endswith(".py") and path not in texts:
            texts[path] = _read(path)
    return files_importing_moxing(texts), utility_scripts(texts)


def files_importing_moxing(texts: Dict[str, bytes]) -> Tuple[str, ...]:
    """The files among `texts` that import moxing (not the generated module: it does too)."""
    return tuple(sorted(path for path, text in texts.items() if b"moxing" in text and MOXING_IMPORT.search(text)
                        and not text.startswith(RUNTIME_MARKER.encode())))


MAIN_BLOCK = re.compile(rb"^if[ \t]+__name__[ \t]*==[ \t]*['\"]__main__['\"][ \t]*:", re.MULTILINE)
# A training loop or a call that trains: loss.backward(), optimizer.step(), model.fit(...),
# model.train(...), train(args), train_one_epoch(...), sess.run(train_op), Trainer(...), and
# an engine's run (pytorch-ignite's `trainer = create_supervised_trainer(...)`, `trainer.run(loader)`).
TRAINING = re.compile(rb"\.backward\(|\.step\(|\bfit\(|\btrain(?:_one)?(?:_epoch)?\(|\btrain_op\b|Trainer\(|"
                      rb"\.minimize\(|(?:trainer|engine)\.run\(")
IMPORTED = re.compile(rb"^[ \t]*(?:from[ \t]+(\.|[A-Za-z_]\w*)|import[ \t]+([A-Za-z_]\w*))", re.MULTILINE)


def _main_block(text: bytes) -> bool:
    return b"__main__" in text and MAIN_BLOCK.search(text) is not None  # the plain test first: fast


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(1 << 20)
    except OSError:
        return b""


def utility_scripts(texts: Dict[str, bytes]) -> Tuple[str, ...]:
    """The scripts among `texts` that are utilities beside an entry script (the module's docstring)."""
    by_folder: Dict[str, Dict[str, bytes]] = {}
    for path, text in texts.items():
        by_folder.setdefault(os.path.dirname(path), {})[path] = text
    found = set()
    for folder, here in by_folder.items():
        idle = [p for p, text in here.items() if _main_block(text) and not TRAINING.search(text)]
        if not idle:  # most folders: nothing else is read
            continue
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        local = {n[:-3] for n in names if n.endswith(".py")} | {"."}
        local |= {n for n in names if os.path.isfile(os.path.join(folder, n, "__init__.py"))}
        idle = [p for p in idle if not {(m[0] or m[1]).decode() for m in IMPORTED.findall(here[p])} & local]
        # Only the siblings the run's project walk read: a file --exclude names is never opened.
        if idle and any(_main_block(text) and TRAINING.search(text)
                        for path, text in here.items() if path not in idle):
            found.update(idle)
    return tuple(sorted(found))
