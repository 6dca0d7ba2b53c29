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
import errno
import hashlib
import io
import os
import signal
import stat
import tokenize
from dataclasses import dataclass
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
    why = unusable_source_encoding(encoding)
    if why:
        raise SourceError(f"bad encoding declaration: {why}")
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise SourceError(_undecodable(encoding, data, exc)) from None
    except Exception as exc:  # a codec that fails otherwise (UnicodeError, ValueError, ...)
        raise SourceError(f"bad encoding declaration: {encoding!r} cannot decode this file ({_one_line(exc)})") from None
    if not _gives_back(text, encoding, data):
        raise SourceError(f"bad encoding declaration: {encoding!r} does not give the file's bytes back; "
                          "the file is left as it is")
    return text, encoding


# Every printable ASCII character and the whitespace Python source uses: PEP 263 asks for an
# encoding in which these are themselves (ASCII-compatible), as the cookie itself is read as ASCII.
# Escape-like sequences too: a codec that reads `\\u00e9` as one character does not map ASCII to itself.
_ASCII = "".join(map(chr, range(32, 127))) + "\t\n\r\x0c" + "\\u00e9\\x41\\101\\N{BULLET}+AGEA-"


def unusable_source_encoding(encoding: str) -> Optional[str]:
    """Why Python would not take `encoding` as a source encoding we can write back, or None.

    Python's rules (the tokenizer, PEP 263): the codec must exist, be a text encoding (not
    `hex`, `base64`, `rot13`, `zlib`, ...: codecs.lookup(...)._is_text_encoding is False) and be
    ASCII-compatible (`utf-16`, EBCDIC are not). Codecs that read escapes or reorder text
    (`unicode_escape`, `raw_unicode_escape`, `utf-7`, `idna`, `punycode`) do not map ASCII to
    itself either, and `undefined` maps nothing: all refused, with the reason.
    """
    try:
        info = codecs.lookup(encoding)
    except LookupError:
        return f"unknown encoding {encoding!r}"
    if not getattr(info, "_is_text_encoding", True):
        return f"{encoding!r} is not a text encoding"
    if info.name == "utf-8-sig":
        return None  # UTF-8 after its BOM
    try:
        ok = info.encode(_ASCII)[0] == _ASCII.encode("ascii") and info.decode(_ASCII.encode("ascii"))[0] == _ASCII
    except Exception:
        ok = False
    if not ok:
        return f"{encoding!r} is not ASCII-compatible, as Python source encodings must be"
    return None


def _gives_back(text: str, encoding: str, data: bytes) -> bool:
    """Whether encoding `text` again yields exactly `data` (so unchanged parts stay unchanged)."""
    try:
        return text.encode(encoding) == data
    except Exception:
        return False


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _undecodable(encoding: str, data: bytes, exc: UnicodeDecodeError) -> str:
    line = data.count(b"\n", 0, exc.start) + 1
    return (
        f"cannot decode as {encoding} (line {line}, byte {data[exc.start:exc.start + 1]!r}); "
        "declare the file's encoding with a coding cookie such as `# -*- coding: gbk -*-`"
    )


# Bigger files are not read at all (the engine refuses to parse much smaller ones, see
# safe_parse.MAX_PARSE_CHARS; this bounds the memory a stray data file can take).
MAX_READ_BYTES = 64 * 1024 * 1024


def read_regular(path: str, limit: int, follow_symlinks: bool = True) -> bytes:
    """The bytes of `path`, which must be a regular file of at most `limit` bytes: a FIFO would
    block forever, `/dev/zero` never ends. Opened without blocking, checked on the open file
    (no race between the check and the read). Raises SourceError (one line) or OSError."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SourceError("is a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file")
        if st.st_size > limit:
            raise SourceError(f"too large to read ({size_text(st.st_size)}; the limit is {size_text(limit)})")
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:  # it grew while being read
                raise SourceError(f"too large to read (over the limit of {size_text(limit)})")
        return b"".join(chunks)
    finally:
        os.close(fd)


def first_line(path: str, limit: int = 256) -> bytes:
    """The first line (at most `limit` bytes) of `path`, which must be a regular file: a FIFO
    named on the command line would block the open and the read forever (issue 30.5). For the
    shebang looks that decide which front end takes a file. Raises OSError."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        head = os.read(fd, limit)
    finally:
        os.close(fd)
    return head.split(b"\n", 1)[0] + (b"\n" if b"\n" in head else b"")


def size_text(n: int) -> str:
    """A size as people read it, in binary units with their names: "4.1 MiB", "4 MiB", "512 KiB"
    (one decimal unless exact; a rule file of 4.1 MiB was refused with "4 MB; the limit is 4 MB")."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n // scale} {unit}" if n % scale == 0 else f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def read_source(path: str, decode=decode_python) -> Source:
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            # A FIFO would block the read forever, a device could never end.
            raise SourceError("is a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file")
        if st.st_size > MAX_READ_BYTES:
            raise SourceError(f"too large to read ({size_text(st.st_size)}; the limit is {size_text(MAX_READ_BYTES)})")
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
    """`text` in `encoding`, checked: decoding the bytes must give `text` back."""
    try:
        data = text.encode(encoding)
    except UnicodeEncodeError as exc:
        raise SourceError(f"the migrated text cannot be encoded as {encoding}: {exc.reason}") from None
    except Exception as exc:  # pragma: no cover - decode_python refuses such codecs first
        raise SourceError(f"the migrated text cannot be encoded as {encoding}: {_one_line(exc)}") from None
    try:
        same = data.decode(encoding) == text
    except Exception:
        same = False
    if not same:
        raise SourceError(f"the migrated text does not survive encoding as {encoding}; file left unchanged")
    return data


def write_source(source: Source, new_text: str, target: Optional[str] = None) -> None:
    """Replace `source.path` (or write `target`) with `new_text`, atomically.

    In place: refused when the file is read-only (by its mode bits: as root, os.access says
    yes to everything) or has changed since it was read; the file keeps its mode, owner, extended
    attributes and POSIX ACL (copy_attributes).
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
    import tempfile  # (here: a run that writes nothing, a warm one, never imports it)

    folder = os.path.dirname(os.path.abspath(dest))
    with signals_deferred():
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=temp_prefix(dest), suffix=TEMP_SUFFIX)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                if durable:
                    f.flush()
                    os.fsync(f.fileno())
            # chown first: it clears the setuid/setgid bits, which chmod then sets again.
            if owner is not None and hasattr(os, "chown"):
                try:
                    os.chown(tmp, *owner)  # root migrating a user's file: it stays the user's
                except PermissionError:
                    pass  # not root: the file was ours to begin with, or we cannot help it
            os.chmod(tmp, mode)
            if durable:
                copy_attributes(dest, tmp)
            os.replace(tmp, dest)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise


ACL_ACCESS = "system.posix_acl_access"


def copy_attributes(src: str, dest: str) -> None:
    """Give `dest` the extended attributes of `src` (when it exists), its POSIX ACL included, as
    `cp -a` does: `--write` replaces a file by a new one, which must keep who may read and write it.
    With an ACL the group bits of the mode are the ACL's mask: the mode alone would give the
    owning group the mask's access (issue 30.3). An ACL that cannot be copied fails the write
    (OSError), never widening access; other attributes the file system or our rights refuse
    (`security.*`, `trusted.*`) are left, as cp does. `dest` loses an ACL inherited from the
    folder that `src` did not have."""
    if not hasattr(os, "listxattr"):  # pragma: no cover - not on Linux
        return
    try:
        names = os.listxattr(src)
    except FileNotFoundError:
        return  # a new file: nothing to keep
    except OSError as exc:
        if exc.errno in (errno.ENOTSUP, errno.EOPNOTSUPP):
            return  # no attributes on this file system, so no ACL either
        raise
    for name in names:
        try:
            os.setxattr(dest, name, os.getxattr(src, name))
        except OSError as exc:
            if name == ACL_ACCESS:
                raise OSError(exc.errno, f"cannot keep the file's ACL: {exc.strerror or exc}") from None
    if ACL_ACCESS not in names:
        try:
            os.removexattr(dest, ACL_ACCESS)
        except OSError:
            pass  # none inherited (ENODATA), or no ACLs here


def atomic_copy(src: str, dest: str) -> None:
    """Copy `src` (its bytes, mode and times) to `dest` the way atomic_write writes: into a
    temporary file next to `dest`, renamed over it when whole. Ctrl-C, SIGTERM or a full disk
    leave a whole copy or none, never a truncated one nor the temporary file. The copy itself is
    not shielded from signals (a big file must not make Ctrl-C wait): an interruption removes
    the temporary file; only the rename is."""
    import shutil
    import tempfile

    folder = os.path.dirname(os.path.abspath(dest))
    tmp = None
    try:
        with signals_deferred():  # a signal is delivered after `tmp` is set, never between
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=temp_prefix(dest), suffix=TEMP_SUFFIX)
        with os.fdopen(fd, "wb") as out, open(src, "rb") as inp:
            shutil.copyfileobj(inp, out, 1 << 20)
        shutil.copystat(src, tmp)
        with signals_deferred():
            os.replace(tmp, dest)
    except BaseException:
        if tmp is not None:
            with signals_deferred():
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
        raise


# A file name may be up to 255 bytes; `.<name>.` + 8 random characters + TEMP_SUFFIX must fit too.
_MAX_NAME_BYTES = 255
_TEMP_NAME_BUDGET = _MAX_NAME_BYTES - 2 - 8 - len(TEMP_SUFFIX) - 8  # 8 bytes of slack


def temp_prefix(dest: str) -> str:
    """`.<name>.` for the temporary file next to `dest`, the name shortened (by whole characters)
    when the whole would be too long: a 250-byte file name is migrated like any other."""
    name = os.path.basename(dest)
    if len(os.fsencode(name)) > _TEMP_NAME_BUDGET:
        kept, size = [], 0
        for c in name:
            size += len(os.fsencode(c))
            if size > _TEMP_NAME_BUDGET:
                break
            kept.append(c)
        name = "".join(kept)
    return f".{name}."


def is_temp_file(name: str) -> bool:
    """A temporary file of an atomic write (left behind only by a run killed with -9)."""
    return name.startswith(".") and name.endswith(TEMP_SUFFIX)


STALE_TEMP_SECONDS = 60  # a live write's temporary file lasts milliseconds


def stray_temp_files(paths, remove: bool) -> list:
    """Temporary files of atomic writes found by a walk are only left by a run killed with -9
    (or a crash of the machine): with `remove` (--write), those older than a minute are
    removed (a concurrent run's own are younger). Returns the lines that tell the user."""
    import time

    lines = []
    for path in paths:
        try:
            stale = time.time() - os.lstat(path).st_mtime > STALE_TEMP_SECONDS
        except OSError:
            continue  # gone already
        if remove and stale:
            try:
                os.unlink(path)
            except OSError as exc:
                lines.append(f"npu-migrate: warning: {path}: left by an interrupted npu-migrate run; cannot remove "
                             f"it: {exc.strerror or exc}")
                continue
            lines.append(f"npu-migrate: {path}: removed (left by an interrupted npu-migrate run)")
        elif remove:
            lines.append(f"npu-migrate: warning: {path}: a temporary file of npu-migrate less than a minute old "
                         "(of a run still going?); left alone")
        else:
            lines.append(f"npu-migrate: warning: {path}: left by an interrupted npu-migrate run; "
                         "`npu-migrate --write` removes it, or delete it")
    return lines


def write_text_file(path: str, text: str) -> None:
    """A file npu-migrate generates (a report, a boot file), as UTF-8: atomically, keeping the
    mode of the file it replaces (0644 for a new one, as editors make). What is not a regular
    file (`-o /dev/stderr`, a pipe) is written to directly."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    # (surrogateescape: a file name that is not UTF-8, named in a report, is written as its bytes)
    if st is not None and not stat.S_ISREG(st.st_mode):
        with open(path, "w", encoding="utf-8", errors="surrogateescape", newline="") as f:
            f.write(text)
        return
    atomic_write(path, text.encode("utf-8", "surrogateescape"), stat.S_IMODE(st.st_mode) if st is not None else 0o644)


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
