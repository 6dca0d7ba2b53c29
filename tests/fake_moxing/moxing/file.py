"""The part of `moxing.file` the generated ModelArts code uses, over a local folder."""

import os
import shutil
import time

_SCHEMES = ("obs://", "s3://")


def _local(url):
    for scheme in _SCHEMES:
        if url.startswith(scheme):
            root = os.environ["FAKE_OBS_ROOT"]
            return os.path.join(root, url[len(scheme):].strip("/"))
    return url


def _log(*words):
    path = os.environ.get("FAKE_OBS_LOG")
    if path:
        with open(path, "a") as log:  # one short write per line: safe from several processes
            log.write(" ".join([str(os.getpid())] + [str(w) for w in words]) + "\n")


def _merge(src, dst):
    for folder, _, files in os.walk(src):
        target = os.path.join(dst, os.path.relpath(folder, src))
        os.makedirs(target, exist_ok=True)
        for name in files:
            # FAKE_OBS_NEW_TIMES: a download's files are new (their time is the copy's), not OBS's
            copy = shutil.copyfile if os.environ.get("FAKE_OBS_NEW_TIMES") else shutil.copy2
            copy(os.path.join(folder, name), os.path.join(target, name))


def copy_parallel(src_url, dst_url, **_ignored):
    _log("copy_parallel", src_url, dst_url)
    src = _local(src_url)
    if not os.path.isdir(src):
        raise OSError("copy_parallel copies folders; not a folder: %s" % src_url)
    time.sleep(float(os.environ.get("FAKE_OBS_DELAY", "0")))
    hold = os.environ.get("FAKE_OBS_HOLD")  # a copy that lasts until the test creates this file
    while hold and not os.path.exists(hold):
        time.sleep(0.01)
    _merge(src, _local(dst_url))


def copy(src_url, dst_url, **_ignored):
    _log("copy", src_url, dst_url)
    dst = _local(dst_url)
    os.makedirs(os.path.dirname(dst) or ".", exist_ok=True)
    download = src_url.startswith(_SCHEMES) and not dst_url.startswith(_SCHEMES)
    # (FAKE_OBS_NEW_TIMES: as _merge)
    copy = shutil.copyfile if download and os.environ.get("FAKE_OBS_NEW_TIMES") else shutil.copy2
    copy(_local(src_url), dst)


def exists(url):
    _log("exists", url)
    return os.path.exists(_local(url))


def is_directory(url):
    _log("is_directory", url)
    return os.path.isdir(_local(url))


def make_dirs(url):
    _log("make_dirs", url)
    os.makedirs(_local(url), exist_ok=True)


def list_directory(url, recursive=False):
    _log("list_directory", url)
    top = _local(url)
    if not recursive:
        return sorted(os.listdir(top))
    return sorted(
        os.path.relpath(os.path.join(folder, name), top)
        for folder, dirs, files in os.walk(top)
        for name in dirs + files
    )


def get_size(url, recursive=False):
    _log("get_size", url)
    top = _local(url)
    if os.path.isfile(top):
        return os.path.getsize(top)
    return sum(os.path.getsize(os.path.join(f, n)) for f, _, names in os.walk(top) for n in names)


class _Stat:
    """What MoXing's stat returns (like TensorFlow's gfile.Stat)."""

    def __init__(self, path):
        st = os.stat(path)
        self.length = st.st_size
        self.mtime_nsec = st.st_mtime_ns
        self.is_directory = os.path.isdir(path)


def stat(url):
    _log("stat", url)
    if os.environ.get("FAKE_OBS_NO_STAT"):  # as MoXing on a folder that is only a key prefix
        raise OSError("MoxFileNotExistsException: " + url)
    return _Stat(_local(url))
