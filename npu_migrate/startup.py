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
something; libcst's texts have a file of their own, read only by a process that makes libcst's
classes (SplitTexts). Only `__main__.entry` installs it: importing npu_migrate as a library changes nothing.
The built-in rule set is kept beside it, as built, under the same conditions (KeptRuleSet).
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
from typing import Any, Callable, Dict, Iterator, List, Optional, Set, Tuple


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


def code_path(stem: str, suffix: str = ".marshal") -> Optional[str]:
    """Where the compiled texts (or the rule set: KeptRuleSet) are kept: this package's bytecode
    folder, one file per interpreter."""
    try:
        pyc = cache_from_source(os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{stem}.py"))
    except (NotImplementedError, ValueError):  # no cache_tag (sys.implementation says bytecode is not cached)
        return None
    return pyc[: -len(".pyc")] + suffix


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
        data = _read_ours(self.path)
        if data is None:
            return {}
        try:
            # trusted as Python trusts the .pyc files beside it: a file of the user's own that no one else may write (_ours)
            texts = marshal.loads(data)  # nosec B302
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
        try:
            data = MAGIC_NUMBER + marshal.dumps(texts)
        except ValueError:
            return
        if _keep(self.path, data):
            self.known, self.new = texts, {}


def _keep(path: str, data: bytes) -> bool:
    """Write `data` to `path` atomically, into a folder of the user's own that no one else may
    write (never a shared install's __pycache__: Python's .pyc only). Whether it was written."""
    temporary = f"{path}.{os.getpid()}.tmp"
    folder = os.path.dirname(path)
    try:
        os.makedirs(folder, exist_ok=True)
        if not _ours(os.stat(folder)):
            return False
        with open(temporary, "wb") as stream:
            stream.write(data)
        os.replace(temporary, path)
    except OSError:  # a read-only install: the next run does the work again, as before
        try:
            os.unlink(temporary)
        except OSError:
            pass
        return False
    return True


def _read_ours(path: str) -> Optional[bytes]:
    """The bytes of `path` when it is a file of the user's own that no one else may write, of at
    most MAX_BYTES, headed by this interpreter's magic number (without it); else None."""
    try:
        with open(path, "rb") as stream:
            status = os.fstat(stream.fileno())
            if not _ours(status) or status.st_size > MAX_BYTES:
                return None
            data = stream.read()  # (its size: read(MAX_BYTES) would allocate all of MAX_BYTES first)
    except OSError:
        return None
    if len(data) > MAX_BYTES or data[: len(MAGIC_NUMBER)] != MAGIC_NUMBER:
        return None  # another interpreter's, or not ours
    return data[len(MAGIC_NUMBER):]


def _ours(stat: os.stat_result) -> bool:
    """A file or folder this user owns that no one else may write (code is run from it)."""
    if not hasattr(os, "geteuid"):  # Windows: its ACLs decide, as for the .pyc files beside it
        return True
    return stat.st_uid == os.geteuid() and not stat.st_mode & 0o022


class SplitTexts:
    """The process's CompiledTexts, one file for libcst's dataclasses and one for the others
    (ours, click's, ...), by the module whose class wrote the text (dataclasses passes that
    module's globals to `exec`). libcst's ~700 texts were most of the one file, ~4 ms to read at
    every start; their file is read only by a process that makes libcst's classes, which a run
    answered from the cache or the prefilter never does."""

    def __init__(self, path: Optional[str], libcst_path: Optional[str]) -> None:
        self.path = path  # (the others' file: what the command line alone compiles)
        self.rest = CompiledTexts(path)
        self.libcst_path = libcst_path
        self.libcst: Optional[CompiledTexts] = None  # (read at libcst's first dataclass)

    def exec(self, source: Any, *args: Any, **kwargs: Any) -> Any:
        module = args[0].get("__name__") if args and type(args[0]) is dict else None
        texts = self.rest
        if type(module) is str and (module == "libcst" or module.startswith("libcst.")):
            if self.libcst is None:
                self.libcst = CompiledTexts(self.libcst_path)
            texts = self.libcst
        return texts.exec(source, *args, **kwargs)

    @property
    def compiled(self) -> int:
        return self.rest.compiled + (self.libcst.compiled if self.libcst is not None else 0)

    def install(self) -> None:
        """dataclasses looks `exec` up in its module first: that name is this, for the process."""
        dataclasses.exec = self.exec  # type: ignore[attr-defined]

    def save(self) -> None:
        self.rest.save()
        if self.libcst is not None:
            self.libcst.save()


COMPILED: Optional[SplitTexts] = None


def compile_dataclasses_once() -> SplitTexts:
    """Install the process's compiled texts (once); `__main__.entry` saves them when the run ends."""
    global COMPILED
    if COMPILED is None:
        COMPILED = SplitTexts(code_path("dataclass_code_rest"), code_path("dataclass_code_libcst"))
        COMPILED.install()
    return COMPILED


class KeptRuleSet:
    """The built-in rule set, built once across processes: rules.load_rules asks `get` before it
    parses and checks the rule files (~0.017 s of every run: the shipped parse's JSON and 377
    rules' checks) and hands a set it built to `put`; `__main__.entry` saves it when the run ends.

    The file, beside the compiled texts (the same folder, the same conditions to be read and
    written), holds the rule set pickled, with what it was built from: load_rules' key (every
    rule file's name and bytes, the kinds registered), the interpreter's version, and the path,
    mtime and size of every module of this package loaded when it was built (as a .pyc names its
    source's; the build reads no other file: tests/test_startup.py). It is used only when all of
    these are the same now, so what it gives is what the build would give (a test compares them
    field by field); anything else is a miss, and the run builds and keeps a new one. Only the
    built-in rules with no `--rules` file are kept.

    The rules as a run's targets see them (targets/rule_view.rules_for_targets, ~5 ms of every
    run) are kept with them, pickled together (a view with nothing changed shares the rules'
    lists and indexes), by rule_view's key (the targets' specs and the bytes of the target
    tables); a view added to a kept set writes it again, naming the modules loaded by then."""

    VIEWS = 8  # views kept with a rule set (targets given on the command line vary); the newest
    def __init__(self, path: Optional[str], package: Optional[str] = None) -> None:
        self.path = path
        # the folder whose modules a kept set names: this package's (a copied package's kept file
        # names the modules it was copied from: a miss)
        self.package = os.path.join(package or os.path.dirname(os.path.abspath(__file__)), "")
        self.pending: Optional[bytes] = None  # the file to write (a set this process built)
        self.pid = os.getpid()
        self.hits = 0  # rule sets given (tests/test_startup.py)
        self.view_hits = 0  # views given
        # (load_rules' key, the rule set read or built, its views by rule_view's key)
        self.kept: Optional[Tuple[bytes, Any, Dict[Any, Any]]] = None

    def get(self, key: bytes) -> Any:
        data = _read_ours(self.path) if self.path is not None else None
        if data is None:
            return None
        try:
            entry = marshal.loads(data)  # nosec B302 (data only; a file of the user's own: _ours)
        except (EOFError, ValueError, TypeError):
            return None
        if type(entry) is not tuple or len(entry) != 4:
            return None
        stored_key, version, modules, body = entry
        if stored_key != key or version != sys.version or type(modules) is not tuple or type(body) is not bytes:
            return None
        for module in modules:
            try:
                path, mtime, size = module
                if not path.startswith(self.package):
                    return None
                status = os.stat(path)
            except (OSError, TypeError, ValueError, AttributeError):
                return None
            if (status.st_mtime_ns, status.st_size) != (mtime, size):
                return None
        import pickle  # nosec B403 (only a file of the user's own no one else may write is unpickled: _ours)

        try:
            # trusted as the .pyc files beside it: a file of the user's own that no one else may write (_ours)
            rules, views = pickle.loads(body)  # nosec B301
        except Exception:  # (a damaged body: anything pickle may raise; another shape)
            return None
        if type(views) is not dict:
            return None
        self.hits += 1
        self.kept = (key, rules, views)
        return rules

    def holds(self, rules: Any) -> bool:
        """Whether `rules` is the set this process read or built (and keeps)."""
        return self.kept is not None and self.kept[1] is rules

    def view(self, rules: Any, key: Any) -> Any:
        """The view of the kept `rules` for rule_view's `key`, kept with them; None if none is."""
        if self.kept is None or self.kept[1] is not rules:
            return None
        view = self.kept[2].get(key)
        self.view_hits += view is not None
        return view

    def put_view(self, rules: Any, key: Any, view: Any) -> None:
        """Keep `view` with the kept `rules` (the set this process read or built; else nothing)."""
        if self.kept is None or self.kept[1] is not rules:
            return
        views = self.kept[2]
        views.pop(key, None)
        views[key] = view
        while len(views) > self.VIEWS:
            del views[next(iter(views))]
        self._prepare()

    def put(self, key: bytes, rules: Any) -> None:
        self.kept = (key, rules, {})
        self._prepare()

    def _prepare(self) -> None:
        """The file to write: the kept set and its views (pickled now, before the run adds to
        them what it computes lazily), with the modules loaded now."""
        if self.path is None or sys.dont_write_bytecode or self.kept is None:
            return
        import pickle  # nosec B403 (only a file of the user's own no one else may write is unpickled: _ours)

        key, rules, views = self.kept
        modules = []
        for module in list(sys.modules.values()):
            path = getattr(module, "__file__", None)
            if isinstance(path, str) and os.path.abspath(path).startswith(self.package):
                try:
                    status = os.stat(path)
                except OSError:
                    return
                modules.append((os.path.abspath(path), status.st_mtime_ns, status.st_size))
        try:
            body = pickle.dumps((rules, views), protocol=pickle.HIGHEST_PROTOCOL)
            self.pending = MAGIC_NUMBER + marshal.dumps((key, sys.version, tuple(sorted(modules)), body))
        except Exception:  # (a rule set that cannot be pickled is built again next time)
            self.pending = None

    def save(self) -> None:
        if self.pending is not None and self.path is not None and os.getpid() == self.pid:
            _keep(self.path, self.pending)
            self.pending = None


KEPT_RULES: Optional[KeptRuleSet] = None


def keep_rule_sets() -> KeptRuleSet:
    """Install the process's KeptRuleSet (once; rules.load_rules asks it); `__main__.entry` saves it."""
    global KEPT_RULES
    if KEPT_RULES is None:
        KEPT_RULES = KeptRuleSet(code_path("rule_set", ".pickle"))
    return KEPT_RULES


class CompiledPatterns:
    """`re`'s compilation of a pattern, kept across processes. `re` parses a pattern in Python
    and hands the result (its flags, code and groups) to `_sre.compile`: the ~160 patterns a
    run compiles (the rules' and the prefilter's, the gitignore patterns, tomllib's, libcst's ...)
    were ~25 ms of every run. This keeps `_sre.compile`'s arguments for each (pattern, flags)
    compiled, so that a later process builds the same pattern object from them without parsing;
    a pattern it does not know is compiled as `re` compiles it. What the arguments depend on
    beyond the pattern and flags is the interpreter (its `re` and `_sre`, its Unicode tables):
    the file is headed by this interpreter's magic number and names `sys.version` and
    `_sre.MAGIC`, and is used only when they are this process's. A pattern whose compilation
    warned (`re` warns of a nested set, a bad escape) is not kept: its warning is given each time.

    The file lives beside the compiled dataclass texts, read and written under the same
    conditions (`_read_ours`, `_keep`); it holds what one run compiled plus what it had, at most
    MAX_PATTERNS (beyond: the oldest go first, those this process used last), and is rewritten only by a run that
    compiled a pattern it did not hold."""

    # A run compiles ~175 patterns (the rules', tomllib's, libcst's ...: 118 KB kept) and a few of
    # its own project (its .gitignore lines); its workers the prefilter's patterns of the files they
    # migrate (transformers 4.46.3: ~300 more, 376 KB in all; with the five held-out projects and the
    # tests 599, 0.5 MB). Past this many the oldest go (save), so that runs over many projects do not
    # make every start read megabytes of others' patterns (1.0 MB: marshal.loads ~2.3 ms).
    MAX_PATTERNS = 1200

    def __init__(self, path: Optional[str]) -> None:
        import _sre  # type: ignore[import-not-found]

        self.path = path
        self.sre: Any = _sre
        self.stamp = (sys.version, _sre.MAGIC)
        self.known: Dict[Tuple[Any, int], tuple] = self._read() if path else {}
        self.new: Dict[Tuple[Any, int], tuple] = {}
        self.used: Set[Tuple[Any, int]] = set()
        self.compiled = 0  # patterns this process compiled and keeps (a second run compiles none)
        self.pid = os.getpid()  # (a forked worker's patterns are its own to save once it says so: forked)
        self.original: Any = None  # re's compiler module's `compile`, once installed
        from _thread import _local

        self.noted: Any = _local()  # (per thread) the arguments of `_sre.compile` of the pattern compiled now

    def _read(self) -> Dict[Tuple[Any, int], tuple]:
        assert self.path is not None
        data = _read_ours(self.path)
        if data is None:
            return {}
        try:
            entry = marshal.loads(data)  # nosec B302 (data only; a file of the user's own: _ours)
        except (EOFError, ValueError, TypeError):
            return {}
        if type(entry) is not tuple or len(entry) != 2 or entry[0] != self.stamp or type(entry[1]) is not dict:
            return {}
        return entry[1]

    def compile(self, p: Any, flags: int = 0) -> Any:
        """re's compiler module's `compile`, answered from the kept arguments when it can."""
        kind = type(p)
        if (kind is not str and kind is not bytes) or type(flags) is not int or flags & 128:  # 128: re.DEBUG prints
            return self.original(p, flags)
        key = (p, flags)
        args = self.known.get(key) or self.new.get(key)
        if args is not None:
            self.used.add(key)
            pattern, final_flags, code, groups, groupindex, indexgroup = args
            return self.sre.compile(pattern, final_flags, _code_list(code), groups, groupindex, indexgroup)
        import warnings

        noted: List[tuple] = []
        self.noted.args = noted
        try:
            with warnings.catch_warnings(record=True) as warned:
                warnings.simplefilter("always")
                pattern = self.original(p, flags)
        finally:
            self.noted.args = None
        if warned or len(noted) != 1:
            return self.original(p, flags)  # (again, its warnings given as the filters say)
        args = self._plain(noted[0])
        if args is not None:
            self.new[key] = args
            self.used.add(key)
            self.compiled += 1
        return pattern

    @staticmethod
    def _plain(args: tuple) -> Optional[tuple]:
        """The arguments as they are kept (plain ints for re's opcodes, which are int subclasses;
        the code as the bytes of 32-bit words, a quarter of the memory of a list), or None when
        they are of another shape than `_sre.compile`'s of Python 3.9-3.13."""
        if len(args) != 6:
            return None
        pattern, flags, code, groups, groupindex, indexgroup = args
        if not (type(pattern) in (str, bytes) and isinstance(flags, int) and type(code) is list
                and all(isinstance(c, int) for c in code) and isinstance(groups, int) and type(groupindex) is dict
                and all(type(k) is str and isinstance(v, int) for k, v in groupindex.items())
                and type(indexgroup) is tuple and all(i is None or type(i) is str for i in indexgroup)):
            return None
        from array import array

        words = array("I")
        if words.itemsize != 4:
            return None
        try:
            words.extend(code)
        except OverflowError:  # (a code word past 32 bits: not this interpreter's _sre)
            return None
        return (pattern, int(flags), words.tobytes(), int(groups), {k: int(v) for k, v in groupindex.items()}, indexgroup)

    def install(self) -> None:
        """re calls its compiler module's `compile` by name: that name is this, for the process,
        and the module's `_sre` a copy of `_sre` whose `compile` also notes its arguments."""
        import re
        import types

        module: Any = getattr(re, "_compiler", None)
        if module is None:  # Python < 3.11
            import sre_compile as module
        sre = self.sre
        if not callable(getattr(module, "compile", None)) or id(getattr(module, "_sre", None)) != id(sre):
            return
        noting: Any = types.ModuleType(sre.__name__)
        noting.__dict__.update(sre.__dict__)
        real, local = sre.compile, self.noted

        def compile_noting(*args: Any) -> Any:
            noted = getattr(local, "args", None)
            if noted is not None:
                noted.append(args)
            return real(*args)

        noting.compile = compile_noting
        self.original = module.compile
        module._sre = noting
        module.compile = self.compile

    def forked(self) -> None:
        """In a process forked from the one that made this (a worker, runner.py; the forked half
        of project_values._in_two): the patterns it compiles from now on are its own to keep
        (save). Without it, what only the workers compile (the prefilter's patterns of the files
        they migrate) was compiled again by every worker of every run: transformers 4.46.3 src,
        -j 2 cold, ~1,600 compiles of ~300 patterns in ~23 workers, ~0.5 CPU-s (~5 % of the run)."""
        self.pid = os.getpid()
        self.compiled = 0

    def save(self) -> None:
        """Keep the patterns this process compiled, if any (atomically; one run's file or another's),
        with those another process (a worker: forked) kept in the file since this one read it. Past
        MAX_PATTERNS the oldest go: the file's order is its age, and what this process used or
        compiled and what others added since go last. (Keeping only what the main process used,
        as before, dropped every pattern only the workers use whenever the file was full: the
        next run's workers compiled them all again.)"""
        if not self.compiled or self.path is None or sys.dont_write_bytecode or os.getpid() != self.pid:
            return
        added = {key: args for key, args in self._read().items() if key not in self.known}
        patterns = {**self.known, **added, **self.new}
        if len(patterns) > self.MAX_PATTERNS:
            recent = {key for key in patterns if key in self.used or key in added or key in self.new}
            order = [key for key in patterns if key not in recent] + [key for key in patterns if key in recent]
            patterns = {key: patterns[key] for key in order[-self.MAX_PATTERNS:]}
        try:
            data = MAGIC_NUMBER + marshal.dumps((self.stamp, patterns))
        except ValueError:
            return
        if _keep(self.path, data):
            self.known, self.new = patterns, {}


def _code_list(words: bytes) -> List[int]:
    from array import array

    code = array("I")
    code.frombytes(words)
    return code.tolist()


PATTERNS: Optional[CompiledPatterns] = None


def patterns_forked() -> Callable[[], None]:
    """In a forked process (runner._worker, project_values._child), at its start: what it calls at
    its end to keep the patterns it compiled (CompiledPatterns.forked)."""
    kept = PATTERNS
    if kept is None:
        return lambda: None
    kept.forked()
    return kept.save


def compile_patterns_once() -> CompiledPatterns:
    """Install the process's kept patterns (once); `__main__.entry` saves them when the run ends."""
    global PATTERNS
    if PATTERNS is None:
        PATTERNS = CompiledPatterns(code_path("regex_code"))
        PATTERNS.install()
    return PATTERNS
