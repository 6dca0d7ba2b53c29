"""Faithful reading and writing of source files.

Text is decoded with the file's own encoding (UTF-8 BOM, PEP 263 coding cookie) and without
newline translation, so CRLF, LF and mixed newlines survive untouched: libcst keeps whatever it
is given. Writes are atomic (temp file in the same folder, fsync, `os.replace`, with Ctrl-C and
SIGTERM held back meanwhile), keep the file's mode and owner, go through symlinks to their
target, and are refused when the file is read-only or changed on disk since it was read. Only
regular files are read (a FIFO would block forever), up to MAX_READ_BYTES.
"""

from __future__ import annotations

import codecs
import contextlib
import hashlib
import io
import os
import signal
import stat
import tempfile
import tokenize
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional, Tuple


TEMP_SUFFIX = ".npu-migrate.tmp"  # temporary files of atomic writes: `.<name>.<random>.npu-migrate.tmp`


class SourceError(Exception):
    """A file that cannot be read or written; the message is one line for the user."""


@dataclass(frozen=True)
class Source:
    path: str
    text: str
    encoding: str  # codec name as Python knows it; "utf-8-sig" when the file has a BOM
    digest: str  # sha256 of the bytes read: the cache key and the "changed on disk?" check
    size: int
    mtime_ns: int
    mode: int


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def decode_python(data: bytes, path: str = "<bytes>") -> tuple:
    """(text, encoding) for Python source bytes, honouring a BOM and a coding cookie."""
    if b"\x00" in data:
        raise SourceError("binary file (contains NUL bytes)")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        # Raised both for a bad cookie and for non-UTF-8 bytes in the first two lines when
        # there is no cookie; say which.
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as dec:
            raise SourceError(_undecodable("utf-8", data, dec)) from None
        raise SourceError(f"bad encoding declaration: {getattr(exc, 'msg', exc)}") from None
    try:
        codecs.lookup(encoding)
    except LookupError:
        raise SourceError(f"unknown encoding {encoding!r}") from None
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise SourceError(_undecodable(encoding, data, exc)) from None
    return text, encoding


def _undecodable(encoding: str, data: bytes, exc: UnicodeDecodeError) -> str:
    line = data.count(b"\n", 0, exc.start) + 1
    return (
        f"cannot decode as {encoding} (line {line}, byte {data[exc.start:exc.start + 1]!r}); "
        "declare the file's encoding with a coding cookie such as `# -*- coding: gbk -*-`"
    )


# Bigger files are not read at all (the engine refuses to parse much smaller ones, see
# safe_parse.MAX_PARSE_CHARS; this bounds the memory a stray data file can take).
MAX_READ_BYTES = 64 * 1024 * 1024


def read_source(path: str, decode=decode_python) -> Source:
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            # A FIFO would block the read forever, a device could never end.
            raise SourceError("is a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file")
        if st.st_size > MAX_READ_BYTES:
            raise SourceError(
                f"too large to read ({st.st_size / 2**20:.0f} MB; the limit is {MAX_READ_BYTES // 2**20} MB)"
            )
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise SourceError("no such file") from None
    except IsADirectoryError:
        raise SourceError("is a directory") from None
    except OSError as exc:
        raise SourceError(f"cannot read: {exc.strerror or exc}") from None
    text, encoding = decode(data, path)
    return Source(path, text, encoding, _digest(data), len(data), st.st_mtime_ns, stat.S_IMODE(st.st_mode))


def encode(text: str, encoding: str) -> bytes:
    try:
        return text.encode(encoding)
    except UnicodeEncodeError as exc:
        raise SourceError(f"the migrated text cannot be encoded as {encoding}: {exc.reason}") from None


def write_source(source: Source, new_text: str, target: Optional[str] = None) -> None:
    """Replace `source.path` (or write `target`) with `new_text`, atomically.

    In place: refused when the file is read-only (by its mode bits: as root, os.access says
    yes to everything) or has changed since it was read; the file keeps its mode and owner.
    Ctrl-C and SIGTERM wait until the file is replaced (or not): never a half-written file
    nor a temporary one left behind.
    """
    data = encode(new_text, source.encoding)
    with signals_deferred():
        try:
            if target is not None:
                atomic_write(target, data, source.mode)
                return
            dest = os.path.realpath(source.path)
            st = os.stat(dest)
            if not st.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH):
                raise SourceError("read-only file, not changed")
            with open(dest, "rb") as f:
                if st.st_size != source.size or _digest(f.read()) != source.digest:
                    raise SourceError("file changed on disk while npu-migrate ran, not overwritten")
            atomic_write(dest, data, stat.S_IMODE(st.st_mode), owner=(st.st_uid, st.st_gid))
        except OSError as exc:  # no space left, folder not writable, ...
            raise SourceError(f"cannot write: {exc.strerror or exc}") from None


def atomic_write(dest: str, data: bytes, mode: int, owner: Optional[Tuple[int, int]] = None,
                 durable: bool = True) -> None:
    """Write `data` to a temporary file next to `dest`, then rename it over `dest`: every write
    of a run goes through here. `durable`: fsync before the rename (the cache does without)."""
    folder = os.path.dirname(os.path.abspath(dest))
    with signals_deferred():
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(dest)}.", suffix=TEMP_SUFFIX)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                if durable:
                    f.flush()
                    os.fsync(f.fileno())
            os.chmod(tmp, mode)
            if owner is not None and hasattr(os, "chown"):
                try:
                    os.chown(tmp, *owner)  # root migrating a user's file: it stays the user's
                except PermissionError:
                    pass  # not root: the file was ours to begin with, or we cannot help it
            os.replace(tmp, dest)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise


def write_text_file(path: str, text: str) -> None:
    """A file npu-migrate generates (a report, a boot file), as UTF-8: atomically, keeping the
    mode of the file it replaces (0644 for a new one, as editors make). What is not a regular
    file (`-o /dev/stderr`, a pipe) is written to directly."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        return
    atomic_write(path, text.encode("utf-8"), stat.S_IMODE(st.st_mode) if st is not None else 0o644)


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM back until the block is done; they are delivered (and raise
    KeyboardInterrupt or the CLI's Interrupted) right after it."""
    if not hasattr(signal, "pthread_sigmask"):  # pragma: no cover - Windows
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def is_generated(text: str) -> bool:
    """Files marked `@generated` (in their first lines) are not ours to rewrite."""
    head = text[:2048]
    return "@generated" in head
