"""A stand-in for Huawei MoXing (preinstalled on ModelArts, not on PyPI) for the tests.

`obs://bucket/key` and `s3://bucket/key` are the folder `$FAKE_OBS_ROOT/bucket/key`. Every call
is appended to `$FAKE_OBS_LOG` as one line `<pid> <function> <args...>`, so a test can count
copies; `$FAKE_OBS_DELAY` (seconds) slows each copy down, so processes overlap.
"""

from . import file  # noqa: F401
