"""What a process of the command line does once, at its start (`__main__.entry`), and what the
run builds before it migrates files.

What lives as long as the run (the command line's modules, the settings, the targets, the rule
set and its view, the cache's index) is built with the garbage collector off (`long_lived`), and,
in a run of the command (`run_scope`: cli.py), then frozen out of its reach: it would only go
through those objects again and again while they are built (~25 young collections of a warm
run, 5-8 % of its CPU), and they never become garbage during the run. runner.collecting_rarely
does the same for the files' migration. The run scope gives back to the collector, when the run
ends however it ends, what it froze: a program (or a test) that runs npu-migrate in its own
process keeps no frozen garbage of it.

The dataclasses' generated methods, compiled once. `@dataclass` writes the source of each class's
`__init__`, `__repr__`, `__eq__`, `__hash__`, `__setattr__` ... and compiles it with `exec`, on
every import: libcst's ~200 node classes are ~620 such methods, ours ~220, and compiling them was
half of importing libcst and the command line (0.21 -> 0.10 CPU-s). Python keeps the bytecode of
modules in `__pycache__`; this keeps the bytecode of those texts beside it, keyed by the exact
text: `exec` of a text that was compiled before runs its code object, any other text is compiled
as `exec` would compile it. So what runs is always the compilation of the text the dataclass wrote
now; a stale or broken file costs a compile, never a difference (a missing, unreadable, foreign or
corrupt file is ignored and, if it can be, replaced).

The file lives where Python puts this package's bytecode (`importlib.util.cache_from_source`:
the package's `__pycache__`, or `PYTHONPYCACHEPREFIX`), and is written, as the `.pyc` files are, unless
`PYTHONDONTWRITEBYTECODE`/`-B` says not to, and only into a folder the user owns that no one else may
write (never a shared install's); it is read only when the user owns it and no one else may write it.
It holds the texts one run used plus those it had, and is rewritten only by a run that compiled
something. Only `__main__.entry` installs it: importing npu_migrate as a library changes nothing.
"""

from __future__ import annotations

import dataclasses
import gc
import marshal
import os
import sys
from contextlib import contextmanager
from importlib.util import MAGIC_NUMBER, cache_from_source
from types import CodeType
from typing import Any, Dict, Iterator, List, Optional, Set


def package_modules(folder: str) -> List[str]:
    """The names of the modules and packages in a package's folder, in pkgutil.iter_modules'
    order and by its rules (sorted file names; `inspect.getmodulename`; a folder is a package when
    it holds an `__init__`), without its importers: 1.3 ms a call, and pkgutil's import. The
    kinds and the torch pass's kinds register by being imported (tests/test_startup.py compares)."""
    from inspect import getmodulename  # (dataclasses imported it)

    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    found: List[str] = []
    for name in names:
        module = getmodulename(name)
        if module == "__init__" or module in found:
            continue
        if not module and "." not in name and os.path.isdir(os.path.join(folder, name)):
            try:
                inside = os.listdir(os.path.join(folder, name))
            except OSError:
                inside = []
            if not any(getmodulename(entry) == "__init__" for entry in inside):
                continue
            module = name
        if module and "." not in module:
            found.append(module)
    return found


_RUNS = [0]  # run scopes open (run_scope); long_lived freezes only inside one


@contextmanager
def run_scope() -> Iterator[None]:
    """One run of the command: what long_lived builds in it is frozen, and given back to the
    collector at its end (unless the process had frozen objects before it: `__main__.entry`
    froze the command line's modules, which live as long as the process; gc cannot tell them
    apart from the run's, and the process ends with the run)."""
    frozen_before = gc.get_freeze_count()
    _RUNS[0] += 1
    try:
        yield
    finally:
        _RUNS[0] -= 1
        if not _RUNS[0] and not frozen_before:
            gc.unfreeze()


@contextmanager
def long_lived() -> Iterator[None]:
    """What is built inside lives as long as the run: no collection while it is built, then, in
    a run scope, it is frozen out of the collector's reach (outside one, a library call, the
    collector gets it back as usual). The collector's state is kept (a library caller or an
    enclosing block may have it off: it stays off)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if _RUNS[0]:
            gc.freeze()
        if enabled:
            gc.enable()


# A file beyond this many texts (libcst and Python upgrades leave old ones) keeps only those used.
MAX_TEXTS = 4000
MAX_BYTES = 16 << 20


def code_path() -> Optional[str]:
    """Where the compiled texts are kept: this package's bytecode folder, one file per interpreter."""
    try:
        pyc = cache_from_source(os.path.join(os.path.dirname(os.path.abspath(__file__)), "dataclass_code.py"))
    except (NotImplementedError, ValueError):  # no cache_tag (sys.implementation says bytecode is not cached)
        return None
    return pyc[: -len(".pyc")] + ".marshal"


class CompiledTexts:
    """`dataclasses`' `exec`, with the code of each text compiled once across processes."""

    def __init__(self, path: Optional[str]) -> None:
        self.path = path
        self.known: Dict[str, CodeType] = self._read() if path else {}
        self.new: Dict[str, CodeType] = {}  # compiled here
        self.used: Set[int] = set()  # the texts' hashes (a file grown past MAX_TEXTS keeps these; ~0.45 MB less than the texts)
        self.compiled = 0  # texts this process compiled (a second run compiles none)
        self.pid = os.getpid()  # (a forked worker's texts are its own: only this process saves)

    def _read(self) -> Dict[str, CodeType]:
        assert self.path is not None
        try:
            with open(self.path, "rb") as stream:
                status = os.fstat(stream.fileno())
                if not _ours(status) or status.st_size > MAX_BYTES:
                    return {}
                data = stream.read()  # (its size: read(MAX_BYTES) would allocate all of MAX_BYTES first)
        except OSError:
            return {}
        if len(data) > MAX_BYTES or data[: len(MAGIC_NUMBER)] != MAGIC_NUMBER:
            return {}  # another interpreter's bytecode, or not ours
        try:
            # trusted as Python trusts the .pyc files beside it: a file of the user's own that no one else may write (_ours)
            texts = marshal.loads(data[len(MAGIC_NUMBER):])  # nosec B302
        except (EOFError, ValueError, TypeError):
            return {}
        if type(texts) is not dict:
            return {}
        return {text: code for text, code in texts.items() if type(text) is str and type(code) is CodeType}

    def exec(self, source: Any, *args: Any, **kwargs: Any) -> Any:
        if type(source) is str:
            code = self.known.get(source) or self.new.get(source)
            if code is None:
                # as `exec` compiles a text, without the future flags of this module (the caller)
                code = self.new[source] = compile(source, "<string>", "exec", dont_inherit=True)
                self.compiled += 1
            self.used.add(hash(source))
            source = code
        return exec(source, *args, **kwargs)  # noqa: S102  # nosec B102 (dataclasses' own exec: its text or its code)

    def install(self) -> None:
        """dataclasses looks `exec` up in its module first: that name is this, for the process."""
        dataclasses.exec = self.exec  # type: ignore[attr-defined]

    def save(self) -> None:
        """Keep the texts this run compiled, if any (atomically; one run's file or another's)."""
        if not self.compiled or self.path is None or sys.dont_write_bytecode or os.getpid() != self.pid:
            return
        texts = {**self.known, **self.new}
        if len(texts) > MAX_TEXTS:
            texts = {text: code for text, code in texts.items() if hash(text) in self.used}
        temporary = f"{self.path}.{os.getpid()}.tmp"
        folder = os.path.dirname(self.path)
        try:
            os.makedirs(folder, exist_ok=True)
            if not _ours(os.stat(folder)):
                return  # a shared install (another user's __pycache__): Python's .pyc only
            with open(temporary, "wb") as stream:
                stream.write(MAGIC_NUMBER + marshal.dumps(texts))
            os.replace(temporary, self.path)
        except (OSError, ValueError):  # a read-only install: the next run compiles again, as before
            try:
                os.unlink(temporary)
            except OSError:
                pass
            return
        self.known, self.new = texts, {}


def _ours(stat: os.stat_result) -> bool:
    """A file or folder this user owns that no one else may write (code is run from it)."""
    if not hasattr(os, "geteuid"):  # Windows: its ACLs decide, as for the .pyc files beside it
        return True
    return stat.st_uid == os.geteuid() and not stat.st_mode & 0o022


COMPILED: Optional[CompiledTexts] = None


def compile_dataclasses_once() -> CompiledTexts:
    """Install the process's CompiledTexts (once); `__main__.entry` saves it when the run ends."""
    global COMPILED
    if COMPILED is None:
        COMPILED = CompiledTexts(code_path())
        COMPILED.install()
    return COMPILED
