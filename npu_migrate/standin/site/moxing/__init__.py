"""npu-migrate's stand-in for Huawei MoXing (`import moxing as mox`): NOT Huawei's MoXing, and
not the unrelated PyPI package named moxing.

`mox.file` works on a local folder: `obs://bucket/key` (and `s3://`) is
`$NPU_MIGRATE_REHEARSAL_OBS/bucket/key`. Every call is appended to `$NPU_MIGRATE_REHEARSAL_LOG`,
one JSON object a line, which `npu-migrate rehearse` reads for its report.
"""

from . import file  # noqa: F401

__version__ = "0+npu_migrate_standin"
STANDIN = True


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    raise AttributeError("module 'moxing' has no attribute %r in npu-migrate's stand-in (it has mox.file)" % name)
