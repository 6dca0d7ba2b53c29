"""The cache of results, like black's: a file whose content was already migrated with the same
tool, rules and options is not parsed again.

What a result depends on: the file's bytes, its path (front ends go by suffix, `--entry` names
files), the options, the rule set, and the tool's own code. The engine does no I/O, so nothing
else. Hence:

* one folder per *settings* -- tool version, a fingerprint of the package's own files (so a
  source checkout that is being edited never reads stale entries), the libcst and Python
  versions, the content of every file of the built-in `rules/` folder (`data_fingerprint`:
  the rule files and the torch_npu, TF Adapter and MindSpore target tables, which in a
  checkout lie outside the package), the rules' fingerprint (their content, `--rules` files
  included) and the options (the run's resolved targets included) -- under
  `$NPU_MIGRATE_CACHE_DIR`, or the user cache folder (`~/.cache/npu-migrate` on Linux);
* in it one small JSON file per source file with something to write (named after the hash of
  its absolute path), holding the sha256 of the bytes the result belongs to and the whole
  `FileResult`, the migrated text included: a warm `--check`, `--diff` or report prints the same
  edits, findings and diffs without parsing anything. A file that changed has another hash: a
  miss, and its entry is replaced. The results that write nothing are in the index (below).

What a hit can do is bounded, because whoever can write the folder would otherwise decide
what `--write` writes:

* the cache folder must be the user's own and private (created 0700). The tool never changes
  the mode of a folder (issue 30.4: `NPU_MIGRATE_CACHE_DIR=/tmp` was chmodded to 0700): in an
  existing folder that others may read, or write when it has the sticky bit (/tmp), the cache is
  a private subfolder `npu-migrate-<uid>`; a folder others may write without the sticky bit (they
  could swap that subfolder), one owned by someone else, or a subfolder that is not private, is
  not used, with a warning saying why;
* an entry is read only when it is a regular file (no FIFO, device or symlink) of bounded size,
  and only when it names the same settings, absolute path and content digest as the lookup;
* files generated next to a file (`extra_files`) must lie in that file's folder;
* runs that write (`--write`, `--output-dir`) take from the cache only a result that is "nothing
  to do" (no new text, no edits, no generated files); any other is a miss and the file is
  migrated again, so nothing read from the cache decides what is written (issue 30.1: an entry
  saying "unchanged" but carrying generated files made `--write` create or update them).

A warm run over a big tree would open one entry per file (1,825 for transformers: ~0.4 s), and
a cold one would create and rename one file per file (~0.2-0.4 ms of system time each). So the
settings folder also holds one *index* (`INDEX_NAME`), written at the end of a run by the main
process (runner.run; also when the run is interrupted): for each file whose result writes
nothing (`nothing_to_do`, findings allowed -- most files), its absolute path, content digest and
result, under the same settings name; such a result gets no entry of its own (an index too big
to write leaves them their entries, as before). A lookup asks the index first and takes its
result only under the same conditions as an entry's (same settings, path and digest;
plausible; never more than "nothing to do"), else reads the file's own entry. An index that is
damaged, truncated, too big or names other settings is ignored as a whole (a run then
migrates those files again, and writes a new index). It is written like an entry (temporary
file, rename): concurrent runs each leave a whole index, the last one wins, and a result it
lacks is only a miss.

Each run touches its settings folder and removes those that no run used for 30 days (each
edit of a checkout or change of rules or options makes a new one). Entries are written to a
temporary file and renamed into place, so concurrent runs (two
pre-commit hooks, CI jobs sharing a folder) never see half an entry and need no lock; a
damaged or unreadable entry is a miss. Results with an error are not kept (a crash or a
read error may not happen again). Nothing here raises: a cache that cannot be used is a slow
run, never a failed one.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterable, Optional, Tuple

from . import __version__
from .source import atomic_write
from .model import FileResult
from .options import Options

ENV_VAR = "NPU_MIGRATE_CACHE_DIR"
FORMAT = 1  # bump when the entry layout changes
INDEX_NAME = "index"  # the settings folder's index of "nothing to do" results (not `*.json`: not an entry)
INDEX_LIMIT = 256 * 2**20  # a bigger index is not read (nor written)
PRUNE_AFTER_DAYS = 30  # settings folders no run used for this long are removed
TAG_NAME = "CACHEDIR.TAG"  # https://bford.info/cachedir/
TAG = "Signature: 8a477f597d28d172789f06886806bc55\n# A cache of npu-migrate results; see npu_migrate/cache.py.\n"


def cache_root() -> Path:
    override = os.environ.get(ENV_VAR)
    if override:
        return Path(override)
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("npu-migrate", appauthor=False))


def code_fingerprint() -> str:
    """The version plus the name, size and mtime of every file of the package (code, templates,
    built-in rules when installed): an edited checkout, or a reinstall, gets a fresh cache."""
    package = Path(__file__).resolve().parent
    # The parser and the interpreter matter too (what libcst accepts, what `ast` verifies).
    digest = hashlib.sha256(f"{__version__}/{FORMAT}/{_libcst_version()}/{sys.version_info[:2]}".encode())
    for folder, dirs, files in os.walk(package):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            full = os.path.join(folder, name)
            st = os.stat(full)
            digest.update(f"{os.path.relpath(full, package)}:{st.st_size}:{st.st_mtime_ns};".encode())
    # Every data file decides results too: the rules and the target tables (rules/targets/),
    # which in a source checkout lie outside the package; by content, not by time stamp.
    digest.update(data_fingerprint().encode())
    return digest.hexdigest()[:16]


def run_key(options: Options, rules_fingerprint: str, code: Optional[str] = None) -> str:
    """The settings folder's name: what a result depends on besides the file itself -- the
    tool's code and every data file (code_fingerprint), the rules (their fingerprint: the
    built-in files and `--rules` files by content) and every field of what the run does to a
    file (options.Options.cache_key, the resolved targets included). tests/test_cache.py changes
    each field of Options and each data file in turn and expects another key. `code`: the
    code_fingerprint the run computed already (pipeline.py), else computed here."""
    return hashlib.sha256(f"{code or code_fingerprint()}\0{rules_fingerprint}\0{options.cache_key()}".encode()).hexdigest()[:20]


def data_fingerprint() -> str:
    """A digest of every file under the built-in `rules/` folder (the rule files and the
    torch_npu, TF Adapter and MindSpore target tables), by name and content."""
    digest = hashlib.sha256()
    try:
        from .rules import builtin_rules_dir

        root = builtin_rules_dir()
    except Exception:  # no rules folder: the run fails elsewhere, with a clear message
        return ""
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            full = os.path.join(folder, name)
            try:
                with open(full, "rb") as fh:
                    content = fh.read()
            except OSError:
                content = b"(unreadable)"
            digest.update(f"{os.path.relpath(full, root)}:{len(content)}:".encode())
            digest.update(hashlib.sha256(content).digest())
    return digest.hexdigest()


def _libcst_version() -> str:
    """Which libcst: the text of its `_version.py`, found without importing libcst (a warm run
    never needs it: ~0.12 s)."""
    import importlib.util

    spec = importlib.util.find_spec("libcst")
    if spec is not None and spec.origin:
        try:
            return Path(spec.origin).with_name("_version.py").read_text(encoding="utf-8").strip()
        except OSError:
            pass
    from importlib.metadata import version as dist_version  # pragma: no cover - unusual layouts

    return dist_version("libcst")


# An entry holds the migrated text (about the size of the file), edits and findings.
ENTRY_LIMIT_FIXED = 4 * 2**20
ENTRY_LIMIT_PER_BYTE = 8


class Cache:
    """Results by (absolute path, content digest) for one set of settings.

    `reuse_changed=False` (runs that write): only a stored result with nothing to write is used
    (`nothing_to_do`); for any other the file is migrated again.
    """

    def __init__(self, rules_fingerprint: str, options: Options, root: Optional[Path] = None,
                 reuse_changed: bool = True, code: Optional[str] = None) -> None:
        settings = run_key(options, rules_fingerprint, code)  # (`code`: run_key's)
        self.settings = settings
        # the folder it lives in, and why it cannot be used (None when it can)
        self.root, self.problem = private_root(root or cache_root())
        self.folder = self.root / f"v{__version__}" / settings
        self.reuse_changed = reuse_changed
        self.hits = 0
        self.misses = 0
        self.entries_read = 0  # per-file entries opened (the index exists to keep this small)
        self.index_reads = 0
        self._index: Optional[Dict[str, Any]] = None  # path -> [digest, result], once read
        self._served: Dict[str, str] = {}  # path -> digest, of the results the index gave (save_index keeps them)
        # Set by runner.run, which saves the index when it ends: a result that writes nothing then
        # goes into the index only, not into an entry of its own as well (`put`).
        self.index_later = False
        self._tagged = False
        if self.problem is None:
            self._mark_used_and_prune()

    def _mark_used_and_prune(self) -> None:
        """Touch this settings folder, and remove those no run has used for PRUNE_AFTER_DAYS
        (every edit of the tool, rule change or option set makes a new one; a folder in use
        by a concurrent run was touched when that run started)."""
        now = time.time()
        try:
            os.utime(self.folder, (now, now))
        except OSError:
            pass  # not created yet: the first entry makes it
        cutoff = now - PRUNE_AFTER_DAYS * 86400
        try:
            versions = list(os.scandir(self.root))
        except OSError:
            return
        for version in versions:
            if not (version.name.startswith("v") and version.is_dir(follow_symlinks=False)):
                continue
            try:
                settings = list(os.scandir(version.path))
            except OSError:
                continue
            for entry in settings:
                try:
                    stale = entry.is_dir(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_mtime < cutoff
                except OSError:
                    continue
                if stale and entry.path != str(self.folder) and _is_ours(entry.path):
                    import shutil

                    shutil.rmtree(entry.path, ignore_errors=True)

    def _tag(self) -> None:
        """Mark the settings folder as this tool's cache (CACHEDIR.TAG: backup tools skip it,
        and pruning never removes a folder without it)."""
        if self._tagged:
            return
        self._tagged = True
        try:
            with open(self.folder / TAG_NAME, "x", encoding="ascii") as f:
                f.write(TAG)
        except OSError:
            pass  # there already, or no cache at all

    def _entry(self, path: str) -> Path:
        key = hashlib.sha256(_key_path(path).encode("utf-8", "surrogatepass")).hexdigest()
        return self.folder / key[:2] / f"{key[2:]}.json"

    def get(self, path: str, digest: str, size: int = 0) -> Optional[FileResult]:
        """The result stored for this file with exactly these bytes (`size` of them), or None."""
        result = None if self.problem else self._load(path, digest, size)
        if result is None:
            self.misses += 1
            return None
        self.hits += 1
        return result

    def indexed(self, path: str, digest: str) -> Optional[FileResult]:
        """The index's result for this file with exactly these bytes (a hit), or None without
        counting a miss: the caller then reads the file and asks `get` (runner.run, whose
        project scan already read and hashed the file)."""
        result = None if self.problem else self._from_index(path, digest)
        if result is not None:
            self.hits += 1
        return result

    def index(self) -> Dict[str, Any]:
        """The settings folder's index (path -> [digest, result]), read once; {} when there is
        none or it cannot be trusted as a whole. The runner reads it before forking workers,
        so they share one copy."""
        if self._index is None:
            self._index = {} if self.problem else self._read_index()
        return self._index

    def _read_index(self) -> Dict[str, Any]:
        from .source import SourceError, read_regular

        try:
            self.index_reads += 1
            data = json.loads(read_regular(str(self.folder / INDEX_NAME), INDEX_LIMIT,
                                           follow_symlinks=False).decode("utf-8", "surrogatepass"))
        except (OSError, ValueError, SourceError):
            return {}
        if not (isinstance(data, dict) and data.get("format") == FORMAT and data.get("settings") == self.settings
                and isinstance(data.get("entries"), dict)):
            return {}
        return data["entries"]

    def _from_index(self, path: str, digest: str) -> Optional[FileResult]:
        """The indexed result of this path with exactly these bytes, when it writes nothing."""
        key = _key_path(path)
        try:
            stored_digest, stored = self.index()[key]
            if stored_digest != digest:
                return None
            result = FileResult.from_dict({**stored, "path": path})
        except (KeyError, ValueError, TypeError, AttributeError):
            return None
        if not (_plausible(result, path) and nothing_to_do(result)):
            return None
        self._served[key] = digest
        return result

    def _load(self, path: str, digest: str, size: int) -> Optional[FileResult]:
        from .source import SourceError, read_regular

        indexed = self._from_index(path, digest)
        if indexed is not None:
            return indexed
        limit = ENTRY_LIMIT_FIXED + ENTRY_LIMIT_PER_BYTE * size
        try:
            self.entries_read += 1
            entry = json.loads(read_regular(str(self._entry(path)), limit, follow_symlinks=False).decode("utf-8"))
            if not (isinstance(entry, dict) and entry.get("digest") == digest
                    and entry.get("settings") == self.settings and entry.get("path") == _key_path(path)):
                return None
            result = FileResult.from_dict({**entry["result"], "path": path})
        except (OSError, ValueError, KeyError, TypeError, AttributeError, SourceError):
            return None
        if not _plausible(result, path):
            return None
        if not (self.reuse_changed or nothing_to_do(result)):
            return None
        return result

    def save_index(self, results: Iterable[Tuple[FileResult, Optional[str]]]) -> None:
        """After a run (main process): index the results that write nothing, with the digest of
        the bytes each belongs to (None: a file not read), on top of what the index held for
        other files. Written only when it changes (a warm run writes nothing)."""
        if self.problem:
            return
        entries = dict(self.index())
        changed = False
        held = []  # (results `put` left to the index: each gets its entry if no index is written)
        for result, digest in results:
            key = _key_path(result.path)
            if digest is not None and self._served.get(key) == digest:
                continue  # the index gave this result for these bytes: its entry stands as it is
            if digest is None or not _indexable(result, result.path):
                changed = entries.pop(key, None) is not None or changed
                continue
            data = result.to_dict()
            data.pop("path", None)
            held.append((result, digest))
            if entries.get(key) != [digest, data]:
                entries[key] = [digest, data]
                changed = True
        if not changed:
            return
        written = False
        try:
            _make_private(self.folder)
            self._tag()
            text = json.dumps({"format": FORMAT, "settings": self.settings, "entries": entries},
                              ensure_ascii=False, separators=(",", ":"))
            data_bytes = text.encode("utf-8", "surrogatepass")
            if len(data_bytes) <= INDEX_LIMIT:
                atomic_write(str(self.folder / INDEX_NAME), data_bytes, 0o600, durable=False)
                written = True
        except (OSError, ValueError, TypeError):
            pass
        if not written:
            if self.index_later:  # (too big an index, ~200,000 files: their entries, as before)
                self.index_later = False
                for result, digest in held:
                    self.put(result.path, digest, result)
            return
        self._index = entries

    def put(self, path: str, digest: str, result: FileResult) -> None:
        if result.error is not None or self.problem:
            return
        target = self._entry(path)
        if self.index_later and _indexable(result, path):
            # The index the run saves at its end holds it (save_index). Creating and renaming a
            # file per entry was most of what a cold run spent on the cache (transformers: 1,711
            # of 1,825 files write nothing; ~0.2-0.4 ms of system time each). An entry this file
            # had (other bytes, a result that changed it) goes: the folder keeps no stale text.
            try:
                os.unlink(target)
            except OSError:
                pass
            return
        data = result.to_dict()
        data.pop("path", None)  # the path is the key; a copy of the tree elsewhere is a miss
        try:
            _make_private(target.parent)  # (a new folder is "used now")
            self._tag()
            text = json.dumps(_entry_dict(digest, data, self.settings, path), ensure_ascii=False, separators=(",", ":"))
            # atomic: readers see the old or the new entry
            atomic_write(str(target), text.encode("utf-8", "surrogatepass"), 0o600, durable=False)
        except OSError:
            pass  # a read-only or full disk: just no cache


class ScanFacts:
    """What the project scan found in each file (project_values.scan `known`/`found`: absolute
    path -> [sha256, may pass a MindSpore option on, device keys]), kept between runs in
    `<cache>/v<version>/scan-facts/<facts_key>-<project>` (not `*.json`: not an entry; one file
    per folder the run's paths share, so that runs over other projects neither grow nor
    replace it): a warm run then hashes each file instead
    of searching its bytes (~0.05 s on transformers). Its own file, not the index: the scan
    decides the options, so it runs before the settings folder is known.

    A fact is used only for a file with exactly those bytes (its digest) and by this very code
    (`facts_key`: a hash of project_values.py and the Python version); a file that cannot be read
    whole, is too big, damaged or names another key is ignored as a whole. Runs that write never
    read it (pipeline.py): the facts decide options, so they would decide what is written."""

    LIMIT = 64 * 2**20

    def __init__(self, key: str, project: str, root: Optional[Path] = None) -> None:
        self.key = key
        folder, problem = private_root(root or cache_root())
        self.folder = None if problem else folder / f"v{__version__}" / "scan-facts"
        where = hashlib.sha256(os.path.abspath(project).encode("utf-8", "surrogatepass")).hexdigest()[:16]
        self.name = f"{key}-{where}"
        self.loaded: Dict[str, Any] = {}

    def load(self) -> Dict[str, Any]:
        from .source import SourceError, read_regular

        if self.folder is None:
            return {}
        try:
            data = json.loads(read_regular(str(self.folder / self.name), self.LIMIT,
                                           follow_symlinks=False).decode("utf-8", "surrogatepass"))
        except (OSError, ValueError, SourceError):
            return {}
        if isinstance(data, dict) and data.get("key") == self.key and isinstance(data.get("files"), dict):
            self.loaded = data["files"]
        return self.loaded

    def save(self, found: Dict[str, Any]) -> None:
        """Keep `found` over what was loaded (other files' facts stay); written only when it changes."""
        if self.folder is None or all(self.loaded.get(path) == facts for path, facts in found.items()):
            return
        files = {**self.loaded, **found}
        try:
            data = json.dumps({"key": self.key, "files": files}, ensure_ascii=False,
                              separators=(",", ":")).encode("utf-8", "surrogatepass")
            if len(data) > self.LIMIT:
                return
            _make_private(self.folder)
            atomic_write(str(self.folder / self.name), data, 0o600, durable=False)
            self._prune()
        except (OSError, ValueError, TypeError):
            return

    def _prune(self) -> None:
        """Remove the facts of projects no run has written for PRUNE_AFTER_DAYS (a pre-commit
        hook's staged files share many folders over time); a warm run writes none, so age is
        measured from the last run that found something new there."""
        if self.folder is None:
            return
        cutoff = time.time() - PRUNE_AFTER_DAYS * 86400
        with os.scandir(self.folder) as entries:
            for entry in entries:
                try:
                    if entry.is_file(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_mtime < cutoff:
                        os.unlink(entry.path)
                except OSError:
                    continue


def index_somewhere(root: Optional[Path] = None) -> bool:
    """Whether a settings folder of this version holds an index. The pipeline keeps what the
    project scan read (the files' digests, for the index) only then: with none, this run's own
    index cannot exist yet, and a cold run does not hash every file twice."""
    folder, problem = private_root(root or cache_root())
    if problem is not None:
        return False
    try:
        with os.scandir(folder / f"v{__version__}") as settings:
            return any(os.path.isfile(os.path.join(entry.path, INDEX_NAME)) for entry in settings)
    except OSError:
        return False


def _is_ours(folder: str) -> bool:
    from .source import SourceError, read_regular

    try:
        return read_regular(os.path.join(folder, TAG_NAME), len(TAG), follow_symlinks=False) == TAG.encode()
    except (OSError, SourceError):
        return False


def _key_path(path: str) -> str:
    # surrogates (a non-UTF-8 file name) survive JSON as escapes
    return os.path.abspath(path)


def _entry_dict(digest: str, result: Dict[str, Any], settings: str, path: str) -> Dict[str, Any]:
    return {"digest": digest, "settings": settings, "path": _key_path(path), "result": result}


def _indexable(result: FileResult, path: str) -> bool:
    """A result the index keeps (save_index): one that writes nothing, stored."""
    return result.error is None and nothing_to_do(result) and _plausible(result, path)


def nothing_to_do(result: FileResult) -> bool:
    """A result that writes nothing: the only kind a run that writes may take from the cache."""
    return result.new_text is None and not result.edits and not result.extra_files


def _plausible(result: FileResult, path: str) -> bool:
    """What no fresh run produces is refused: a generated file outside the file's own folder (or
    not a plain `.py` name), text that is not text."""
    if result.new_text is not None and not isinstance(result.new_text, str):
        return False
    if result.error is not None:
        return False  # never stored
    if not result.extra_files:
        return True
    folder = os.path.dirname(os.path.abspath(path))
    for name, text in result.extra_files.items():
        if not (isinstance(name, str) and isinstance(text, str)):
            return False
        full = os.path.abspath(name)
        if os.path.dirname(full) != folder or not name.endswith(".py") or os.path.basename(full).startswith("."):
            return False
    return True


def private_root(root: Path) -> Tuple[Path, Optional[str]]:
    """(the folder the cache lives in, None) when `root` is, or was just made, a folder of the
    current user that nobody else can read or write, or when a private subfolder of it can be
    used; else (root, why the cache is not used). Never changes the mode of a folder."""
    try:
        if not os.path.lexists(root):
            _make_private(root)  # ours from now on, 0700
        st = os.lstat(root)
    except OSError as exc:
        return root, f"cannot create the cache folder {root}: {exc.strerror or exc}"
    if not stat.S_ISDIR(st.st_mode):
        return root, f"the cache folder {root} is not a folder (a symlink?)"
    uid = os.geteuid() if hasattr(os, "geteuid") else st.st_uid
    ours = st.st_uid == uid
    if ours and not st.st_mode & 0o077:
        return root, None
    if not (st.st_mode & stat.S_ISVTX or (ours and not st.st_mode & 0o022)):
        if not ours:
            return root, f"the cache folder {root} belongs to another user (uid {st.st_uid})"
        return root, (f"the cache folder {root} is writable by other users (mode {stat.S_IMODE(st.st_mode):04o}) "
                      "and npu-migrate does not change the mode of a folder: make it private "
                      f"(chmod 700 {root}) or set {ENV_VAR} to another folder")
    # A shared folder (/tmp, or one others may read): our own private subfolder in it.
    sub = root / f"npu-migrate-{uid}"
    try:
        if not os.path.lexists(sub):
            try:
                os.mkdir(sub, 0o700)
            except FileExistsError:
                pass  # a concurrent run made it: checked below like any other
        st = os.lstat(sub)
    except OSError as exc:
        return root, f"cannot create the cache folder {sub}: {exc.strerror or exc}"
    if not stat.S_ISDIR(st.st_mode):
        return sub, f"the cache folder {sub} is not a folder (a symlink?)"
    if st.st_uid != uid:
        return sub, f"the cache folder {sub} belongs to another user (uid {st.st_uid})"
    if st.st_mode & 0o077:
        return sub, (f"the cache folder {sub} is open to other users (mode {stat.S_IMODE(st.st_mode):04o}) and "
                     f"npu-migrate does not change the mode of a folder: make it private (chmod 700 {sub})")
    return sub, None


def _make_private(folder: Path) -> None:
    """mkdir -p with mode 0700 for what it creates."""
    if os.path.isdir(folder):
        return
    _make_private(folder.parent)
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
