"""`mox.file` over a local folder, every call recorded (see the package docstring)."""

import glob as _glob
import json
import os
import shutil
import time

_SCHEMES = ("obs://", "s3://")
__all__ = [
    "copy_parallel", "copy", "exists", "is_directory", "make_dirs", "mk_dir", "list_directory", "remove",
    "glob", "get_size", "rename", "walk", "read", "write", "append", "File", "stat", "scan_dir",
]


def _is_obs(url):
    return isinstance(url, str) and url.lower().startswith(_SCHEMES)


def _local(url):
    url = os.fspath(url)
    if not _is_obs(url):
        return url
    root = os.environ.get("NPU_MIGRATE_REHEARSAL_OBS")
    if not root:
        raise OSError("moxing stand-in: NPU_MIGRATE_REHEARSAL_OBS is not set, so %s leads nowhere" % url)
    rest = url.split("://", 1)[1].strip("/")
    path = os.path.normpath(os.path.join(root, rest))
    if os.path.commonpath([os.path.abspath(root), os.path.abspath(path)]) != os.path.abspath(root):
        raise OSError("moxing stand-in: %s leaves the bucket folder" % url)
    return path


def _record(function, *args, **fields):
    path = os.environ.get("NPU_MIGRATE_REHEARSAL_LOG")
    if not path:
        return
    entry = {"pid": os.getpid(), "rank": os.environ.get("RANK", os.environ.get("RANK_ID", "")),
             "time": time.time(), "call": function, "args": [str(a) for a in args]}
    entry.update(fields)
    line = json.dumps(entry) + "\n"
    # One write of one short line in append mode: lines of several processes do not mix.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode("utf-8"))
    finally:
        os.close(fd)


def _merge(src, dst):
    copied = 0
    for folder, _, files in os.walk(src):
        target = os.path.join(dst, os.path.relpath(folder, src))
        os.makedirs(target, exist_ok=True)
        for name in files:
            shutil.copy2(os.path.join(folder, name), os.path.join(target, name))
            copied += 1
    return copied


def copy_parallel(src_url, dst_url, file_list=None, threads=16, is_processing=True, use_queue=True, **_ignored):
    src, dst = _local(src_url), _local(dst_url)
    if not os.path.isdir(src):
        _record("copy_parallel", src_url, dst_url, error="not a folder")
        raise OSError("copy_parallel copies a folder; not a folder: %s" % src_url)
    if file_list is not None:
        count = 0
        for name in file_list:
            os.makedirs(os.path.dirname(os.path.join(dst, name)) or dst, exist_ok=True)
            shutil.copy2(os.path.join(src, name), os.path.join(dst, name))
            count += 1
    else:
        count = _merge(src, dst)
    _record("copy_parallel", src_url, dst_url, files=count)


def copy(src_url, dst_url, client_id=None, **_ignored):
    src, dst = _local(src_url), _local(dst_url)
    if os.path.isdir(src):
        _record("copy", src_url, dst_url, error="a folder")
        raise OSError("copy copies a file; %s is a folder (use copy_parallel)" % src_url)
    os.makedirs(os.path.dirname(dst) or ".", exist_ok=True)
    shutil.copy2(src, dst)
    _record("copy", src_url, dst_url, files=1)


def exists(url):
    _record("exists", url)
    return os.path.exists(_local(url))


def is_directory(url):
    _record("is_directory", url)
    return os.path.isdir(_local(url))


def make_dirs(url):
    _record("make_dirs", url)
    os.makedirs(_local(url), exist_ok=True)


def mk_dir(url):
    _record("mk_dir", url)
    os.mkdir(_local(url))


def list_directory(url, recursive=False):
    _record("list_directory", url)
    top = _local(url)
    if not recursive:
        return sorted(os.listdir(top))
    return sorted(
        os.path.relpath(os.path.join(folder, name), top) for folder, dirs, files in os.walk(top) for name in dirs + files
    )


def remove(url, recursive=False):
    _record("remove", url)
    path = _local(url)
    if os.path.isdir(path):
        if not recursive:
            raise OSError("remove: %s is a folder (pass recursive=True)" % url)
        shutil.rmtree(path)
    else:
        os.remove(path)


def glob(pattern):
    _record("glob", pattern)
    if not _is_obs(pattern):
        return sorted(_glob.glob(pattern))
    scheme_and_bucket = pattern.split("://", 1)[0] + "://"
    root = _local(scheme_and_bucket + pattern.split("://", 1)[1].split("/", 1)[0])
    prefix = scheme_and_bucket + pattern.split("://", 1)[1].split("/", 1)[0]
    return sorted(prefix + found[len(root):] for found in _glob.glob(_local(pattern)))


def get_size(url, recursive=False):
    _record("get_size", url)
    path = _local(url)
    if os.path.isdir(path) and recursive:
        return sum(os.path.getsize(os.path.join(f, n)) for f, _, names in os.walk(path) for n in names)
    return os.path.getsize(path)


class _Stat:
    """What MoXing's stat returns: `length`, `mtime_nsec`, `is_directory` (TensorFlow's gfile.Stat
    fields), and os.stat's fields for scripts that use it like os.stat."""

    def __init__(self, path):
        self._stat = os.stat(path)
        self.length = self._stat.st_size
        self.mtime_nsec = self._stat.st_mtime_ns
        self.is_directory = os.path.isdir(path)

    def __getattr__(self, name):
        return getattr(self._stat, name)


def stat(url):
    _record("stat", url)
    return _Stat(_local(url))


def scan_dir(url):
    _record("scan_dir", url)
    return os.scandir(_local(url))


def rename(src_url, dst_url):
    _record("rename", src_url, dst_url)
    os.replace(_local(src_url), _local(dst_url))


def walk(url, topdown=True):
    _record("walk", url)
    top = _local(url)
    for folder, dirs, files in os.walk(top, topdown=topdown):
        relative = os.path.relpath(folder, top).replace(os.sep, "/")
        yield (url if relative == "." else url.rstrip("/") + "/" + relative), dirs, files


def read(url, binary=False):
    _record("read", url)
    with open(_local(url), "rb" if binary else "r") as f:
        return f.read()


def write(url, content, binary=False):
    _record("write", url)
    path = _local(url)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "wb" if binary else "w") as f:
        f.write(content)


def append(url, content, binary=False):
    _record("append", url)
    with open(_local(url), "ab" if binary else "a") as f:
        f.write(content)


def File(url, mode="r", *args, **kwargs):
    _record("File", url, mode)
    path = _local(url)
    if any(m in mode for m in "wa"):
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    return open(path, mode, *args, **kwargs)


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    raise AttributeError("module 'moxing.file' has no attribute %r in npu-migrate's stand-in" % name)
