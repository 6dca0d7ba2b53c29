"""Started by Python itself in a rehearsal (this folder is first on PYTHONPATH).

In a rehearsal (NPU_MIGRATE_REHEARSAL_RECORD set) the process's writes and programs are recorded
(_npu_migrate_record). torch_npu registers an autoload entry point, so on an NPU machine a plain `import torch` also
loads it; here the stand-in does the same (unless TORCH_DEVICE_BACKEND_AUTOLOAD=0). When
MindSpore is imported, `device_target="Ascend"` is made to run on the CPU; when the generated
npu_migrate_distributed is, what its rank_shard keeps is recorded. Then the
sitecustomize this one hides, if any, runs as it would have.
"""

import importlib.abc
import importlib.machinery
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


class _ThenRun(importlib.abc.Loader):
    def __init__(self, real, after):
        self.real, self.after = real, after

    def create_module(self, spec):
        return self.real.create_module(spec)

    def exec_module(self, module):
        self.real.exec_module(module)
        self.after()


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs a function right after a top-level module has been imported (`hooks`, once), or a
    module of a given last name, at any depth (`everywhere`, each time: the module)."""

    def __init__(self, hooks, everywhere):
        self.hooks = hooks
        self.everywhere = everywhere

    def find_spec(self, name, path=None, target=None):
        last = name.rpartition(".")[2]
        if name not in self.hooks and last not in self.everywhere:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        if name in self.hooks:
            spec.loader = _ThenRun(spec.loader, self.hooks.pop(name))
        else:
            spec.loader = _ThenRun(spec.loader, lambda: self.everywhere[last](sys.modules[name]))
        return spec


def _load_torch_npu():
    import torch_npu  # noqa: F401


def _mindspore_on_cpu():
    import _npu_migrate_mindspore

    _npu_migrate_mindspore.install()


def _record_shards(module):
    from torch_npu import _record

    _record.wrap_rank_shard(module)


def _chain():
    """Run the next sitecustomize on sys.path (the one this file shadows)."""
    here = sys.modules.pop("sitecustomize", None)
    saved = list(sys.path)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    try:
        import sitecustomize  # noqa: F401
    except ImportError:
        pass
    finally:
        sys.path[:] = saved
        if here is not None:
            sys.modules["sitecustomize"] = here


_hooks = {"mindspore": _mindspore_on_cpu}
if os.environ.get("TORCH_DEVICE_BACKEND_AUTOLOAD", "1") != "0":
    _hooks["torch"] = _load_torch_npu
_everywhere = {}
if os.environ.get("NPU_MIGRATE_REHEARSAL_RECORD"):
    import _npu_migrate_record

    _npu_migrate_record.install()
    _everywhere["npu_migrate_distributed"] = _record_shards
sys.meta_path.insert(0, _AfterImport(_hooks, _everywhere))
_chain()
