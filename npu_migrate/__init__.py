"""npu-migrate: migrate GPU (CUDA) deep-learning training code to Huawei Ascend NPUs."""

__version__ = "0.2.0"

__all__ = ["migrate_source", "Edit", "FileResult", "Finding", "Options", "Severity", "Span"]


def __getattr__(name: str):
    # The engine pulls in libcst (~0.2 s): loaded on first use, so `npu-migrate --version`,
    # `--help`, `rules` and configuration errors answer at once. The model too: the program's
    # entry point (__main__.entry) imports this package before it can catch a Ctrl-C.
    if name == "migrate_source":
        from .dispatch import migrate_source

        return migrate_source
    if name == "Options":  # what a run does to each file (options.py: it holds the run's targets)
        from .options import Options

        return Options
    if name in __all__:
        from . import model

        return getattr(model, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
