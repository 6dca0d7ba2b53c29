"""MindSpore in a rehearsal: `device_target="Ascend"` runs on the CPU (loaded by sitecustomize
right after `import mindspore`, when MindSpore is installed)."""

import functools


def _cpu_target(kwargs):
    target = kwargs.get("device_target")
    if isinstance(target, str) and target.lower() in ("ascend", "davinci", "npu"):
        kwargs["device_target"] = "CPU"
    return kwargs


def _wrap(owner, name):
    original = getattr(owner, name, None)
    if original is None or getattr(original, "_npu_migrate_standin", False):
        return

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        return original(*args, **_cpu_target(kwargs))

    wrapper._npu_migrate_standin = True
    setattr(owner, name, wrapper)


def install():
    import mindspore

    _wrap(mindspore, "set_context")
    _wrap(mindspore, "set_device")
    try:
        from mindspore import context
    except ImportError:
        return
    _wrap(context, "set_context")
