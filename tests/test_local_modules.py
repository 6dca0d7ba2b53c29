"""A project module named like a CUDA library hides that library's findings only where Python 3
would import the project's module instead (npu_migrate/local_modules.py), on project trees laid
out as real ones are."""

from __future__ import annotations

import json

from click.testing import CliRunner

from npu_migrate.cli import main


def _findings(root, files, monkeypatch):
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    monkeypatch.chdir(root)
    result = CliRunner().invoke(main, [".", "--format", "json", "--no-cache", "-j", "1"])
    report = json.loads(result.output)
    return sorted((e["path"], f["line"], f["api"])
                  for e in report["files"] for f in e["findings"])


WRAPPER = "import tensorrt as trt\n\ndef build(onnx_path):\n    return trt.Builder(trt.Logger())\n"


def test_a_sibling_named_like_a_library_in_a_package_does_not_hide_it(tmp_path, monkeypatch):
    """`pkg/tensorrt.py` is `pkg.tensorrt`; `import tensorrt` next to it is TensorRT."""
    assert _findings(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/tensorrt.py": WRAPPER,
        "pkg/export.py": "import torch\nimport tensorrt\nfrom pkg.tensorrt import build\n",
        "pkg/infer.py": "import torch\nfrom . import tensorrt as trt_utils\nimport tensorrt as trt\n",
    }, monkeypatch) == [("pkg/export.py", 2, "tensorrt"), ("pkg/infer.py", 3, "tensorrt"), ("pkg/tensorrt.py", 1, "tensorrt")]


def test_a_namespace_package_reached_by_absolute_imports_does_not_hide_it(tmp_path, monkeypatch):
    """No `__init__.py`, but the file itself imports `utils.tensorrt`: the folder is a package
    to it, so its plain `import tensorrt` is the library."""
    assert _findings(tmp_path, {
        "utils/tensorrt.py": WRAPPER,
        "utils/export.py": "import torch\nfrom utils.tensorrt import build\nimport tensorrt\n",
        "train.py": "import torch\nimport utils.tensorrt\n",
    }, monkeypatch) == [("utils/export.py", 3, "tensorrt")]


def test_a_module_in_the_scripts_own_folder_hides_the_library(tmp_path, monkeypatch):
    """`python tools/convert.py` puts tools/ first on sys.path: its `import tensorrt` is tools/tensorrt.py."""
    assert _findings(tmp_path, {
        "tools/tensorrt.py": "def build():\n    pass\n",
        "tools/convert.py": "import torch\nimport tensorrt\ntensorrt.build()\n",
    }, monkeypatch) == []


def test_a_top_level_package_hides_the_library_everywhere_below_it(tmp_path, monkeypatch):
    assert _findings(tmp_path, {
        "triton/__init__.py": "",
        "triton/client.py": "import torch\n",
        "serve.py": "import torch\nfrom triton.client import x\nimport cupy\n",
        "app/__init__.py": "",
        "app/kernels.py": "import triton\n",
        "app/triton/__init__.py": "",  # app.triton: hides nothing
    }, monkeypatch) == [("serve.py", 3, "cupy")]
