"""One test per rewrite and per thing that must not be rewritten: exact output."""

import pytest

from npu_migrate import Options, migrate_source
from helpers import PARTIAL_PADDING, assert_partial_as_whole


def migrate(src, **opts):
    result = migrate_source(src, "t.py", Options(**{"add_import": False, **opts}))
    assert result.error is None, result.error
    return result.new_text if result.changed else src


REWRITES = [
    # .cuda() and friends
    ("x = t.cuda()\n", "x = t.npu()\n"),
    ("x = t.cuda(0)\n", "x = t.npu(0)\n"),
    ("x = t.cuda(non_blocking=True)\n", "x = t.npu(non_blocking=True)\n"),
    ("x = t.cuda(device=d)\n", "x = t.npu(device=d)\n"),
    ("m = nn.DataParallel(m).cuda()\n", "m = nn.DataParallel(m).npu()\n"),
    ("ok = t.is_cuda\n", "ok = t.is_npu\n"),
    # torch.cuda.* through every import style
    ("import torch\ntorch.cuda.synchronize()\n", "import torch\ntorch.npu.synchronize()\n"),
    ("import torch as th\nth.cuda.empty_cache()\n", "import torch as th\nth.npu.empty_cache()\n"),
    ("from torch import cuda\nn = cuda.device_count()\n", "from torch import npu\nn = npu.device_count()\n"),
    ("from torch import cuda as c\nc.set_device(1)\n", "from torch import npu as c\nc.set_device(1)\n"),
    ("from torch.cuda import amp\ns = amp.GradScaler()\n", "from torch.npu import amp\ns = amp.GradScaler()\n"),
    ("from torch.cuda.amp import GradScaler, autocast\n", "from torch_npu.npu.amp import GradScaler, autocast\n"),
    ("import torch\nwith torch.cuda.amp.autocast():\n    pass\n", "import torch\nwith torch.npu.amp.autocast():\n    pass\n"),
    ("import torch\nstate = torch.cuda.get_rng_state()\n", "import torch\nstate = torch.npu.get_rng_state()\n"),
    # the device argument of the renamed call moves with it: the second of set_rng_state, whose first is the state
    ("import torch\ns = torch.cuda.get_rng_state('cuda')\ntorch.cuda.set_rng_state(s, 'cuda:0')\n",
     "import torch\ns = torch.npu.get_rng_state('npu')\ntorch.npu.set_rng_state(s, 'npu:0')\n"),
    ("import torch\ntorch.cuda.set_rng_state('cuda')\n", "import torch\ntorch.npu.set_rng_state('cuda')\n"),
    ("from torch.cuda import set_rng_state\nset_rng_state(s, f'cuda:{rank}')\n",
     "from torch.npu import set_rng_state\nset_rng_state(s, f'npu:{rank}')\n"),
    ("import torch\ntorch.cuda.manual_seed(0)\n", "import torch\ntorch.npu.manual_seed(0)\n"),
    ("import torch\ns = torch.cuda.Stream()\n", "import torch\ns = torch.npu.Stream()\n"),
    ("import torch\nm = torch.cuda.memory_allocated(0)\n", "import torch\nm = torch.npu.memory_allocated(0)\n"),
    ("import torch\nt = torch.cuda.FloatTensor(2)\n", "import torch\nt = torch.npu.FloatTensor(2)\n"),
    ("import torch\ng = torch.cuda.CUDAGraph()\n", "import torch\ng = torch.npu.NPUGraph()\n"),
    ("import torch\nwith torch.cuda.device(1):\n    pass\n", "import torch\nwith torch.npu.device(1):\n    pass\n"),
    # device strings where they are device strings
    ("y = x.to('cuda')\n", "y = x.to('npu')\n"),
    ("y = x.to('cuda:1')\n", "y = x.to('npu:1')\n"),
    ("y = x.to(f'cuda:{rank}')\n", "y = x.to(f'npu:{rank}')\n"),
    ('y = x.to("cuda:" + str(rank))\n', 'y = x.to("npu:" + str(rank))\n'),
    ('y = x.to("cuda:%d" % rank)\n', 'y = x.to("npu:%d" % rank)\n'),
    ("import torch\nd = torch.device('cuda', i)\n", "import torch\nd = torch.device('npu', i)\n"),
    ("import torch\nd = torch.device('cuda:0')\n", "import torch\nd = torch.device('npu:0')\n"),
    ("import torch\nd = torch.device(type='cuda', index=0)\n", "import torch\nd = torch.device(type='npu', index=0)\n"),
    ("import torch\ntorch.set_default_tensor_type('torch.cuda.FloatTensor')\n",
     "import torch\ntorch.set_default_tensor_type('torch.npu.FloatTensor')\n"),
    ("import torch\nt = t.type(torch.cuda.HalfTensor)\n", "import torch\nt = t.type(torch.npu.HalfTensor)\n"),
    ("if 'cuda' in str(device):\n    pass\n", "if 'npu' in str(device):\n    pass\n"),
    ("import torch\nt = torch.ones(2, device='cuda')\n", "import torch\nt = torch.ones(2, device='npu')\n"),
    ("import torch\nsd = torch.load(p, map_location='cuda:0')\n", "import torch\nsd = torch.load(p, map_location='npu:0')\n"),
    ("import torch\nwith torch.autocast('cuda'):\n    pass\n", "import torch\nwith torch.autocast('npu'):\n    pass\n"),
    ("import torch\nwith torch.autocast(device_type='cuda'):\n    pass\n", "import torch\nwith torch.autocast(device_type='npu'):\n    pass\n"),
    ("import torch\ns = torch.amp.GradScaler('cuda')\n", "import torch\ns = torch.amp.GradScaler('npu')\n"),
    ("if x.device.type == 'cuda':\n    pass\n", "if x.device.type == 'npu':\n    pass\n"),
    ("if 'cuda' != device.type:\n    pass\n", "if 'npu' != device.type:\n    pass\n"),
    ("device = 'cuda'\n", "device = 'npu'\n"),
    ("self.device = \"cuda:0\"\n", "self.device = \"npu:0\"\n"),
    ("device = 'cuda' if ok else 'cpu'\n", "device = 'npu' if ok else 'cpu'\n"),
    ("def f(device='cuda'):\n    pass\n", "def f(device='npu'):\n    pass\n"),
    ("p.add_argument('--device', default='cuda', choices=['cuda', 'cpu'])\n",
     "p.add_argument('--device', default='npu', choices=['npu', 'cpu'])\n"),
    ("cfg = {'device': 'cuda'}\n", "cfg = {'device': 'npu'}\n"),
    ("cfg = dict(device='cuda')\n", "cfg = dict(device='npu')\n"),
    ("m = AutoModel.from_pretrained(name, device_map='cuda')\n", "m = AutoModel.from_pretrained(name, device_map='npu')\n"),
    ("D = 'cuda:0'\nm.to(D)\n", "D = 'npu:0'\nm.to(D)\n"),
    # a value and its tests move together: a name given a conditional device, a device's type
    ("import torch\nname = 'cuda' if torch.cuda.is_available() else 'cpu'\ns = torch.cuda.amp.GradScaler(enabled=name == 'cuda')\n",
     "import torch\nname = 'npu' if torch.npu.is_available() else 'cpu'\ns = torch.npu.amp.GradScaler(enabled=name == 'npu')\n"),
    ("import torch\nD = 'cuda:0'\nkind = torch.device(D).type\namp = kind == 'cuda'\n",
     "import torch\nD = 'npu:0'\nkind = torch.device(D).type\namp = kind == 'npu'\n"),
    ("DEVICE = 'cuda:0'\nm.to(DEVICE)\nif DEVICE.split(':')[0] == 'cuda':\n    pass\n",
     "DEVICE = 'npu:0'\nm.to(DEVICE)\nif DEVICE.split(':')[0] == 'npu':\n    pass\n"),
    ("if str(device).partition(':')[0] != 'cuda':\n    pass\n", "if str(device).partition(':')[0] != 'npu':\n    pass\n"),
    ("if name.split(':')[0] == 'cuda':\n    pass\n", "if name.split(':')[0] == 'cuda':\n    pass\n"),
    ("import torch\nmode = 'big' if torch.cuda.is_available() else 'small'\nok = mode == 'cuda'\n",
     "import torch\nmode = 'big' if torch.npu.is_available() else 'small'\nok = mode == 'cuda'\n"),
    ("CALCULATE_DEVICE = 'gpu:0'\nm.to(CALCULATE_DEVICE)\n", "CALCULATE_DEVICE = 'npu:0'\nm.to(CALCULATE_DEVICE)\n"),
    ("loader = DataLoader(ds, pin_memory_device='cuda')\n", "loader = DataLoader(ds, pin_memory_device='npu')\n"),
    ("import torch\nsd = torch.load(p, map_location={'cuda:1': 'cuda:0'})\n",
     "import torch\nsd = torch.load(p, map_location={'cuda:1': 'npu:0'})\n"),
    ("if device.startswith('cuda:'):\n    pass\n", "if device.startswith('npu:'):\n    pass\n"),
    ("ok = args.device.startswith('cuda')\n", "ok = args.device.startswith('npu')\n"),
    # distributed backend
    ("backend_for = {'cuda': 'nccl', 'cpu': 'gloo'}\n", "backend_for = {'npu': 'hccl', 'cpu': 'gloo'}\n"),
    ("import torch.distributed as dist\ndist.init_process_group(backend='nccl')\n",
     "import torch.distributed as dist\ndist.init_process_group(backend='hccl')\n"),
    ("import torch.distributed as dist\ndist.init_process_group('nccl')\n",
     "import torch.distributed as dist\ndist.init_process_group('hccl')\n"),
    ("from torch.distributed import init_process_group\ninit_process_group(backend='nccl', rank=0)\n",
     "from torch.distributed import init_process_group\ninit_process_group(backend='hccl', rank=0)\n"),
    ("p.add_argument('--dist_backend', default='nccl')\n", "p.add_argument('--dist_backend', default='hccl')\n"),
    ("p.add_argument('--backend', type=str, default='nccl', choices=['nccl', 'gloo'])\n",
     "p.add_argument('--backend', type=str, default='hccl', choices=['hccl', 'gloo'])\n"),
    ("assert args.backend in ['nccl', 'gloo']\n", "assert args.backend in ['hccl', 'gloo']\n"),
    ("if backend == 'NCCL':\n    pass\n", "if backend == 'HCCL':\n    pass\n"),
    ("import torch.distributed as dist\nok = dist.is_nccl_available()\n", "import torch.distributed as dist\nok = dist.is_hccl_available()\n"),
    # environment variables
    ("import os\nos.environ['CUDA_VISIBLE_DEVICES'] = '0'\n", "import os\nos.environ['ASCEND_RT_VISIBLE_DEVICES'] = '0'\n"),
    ("import os\nv = os.environ['CUDA_VISIBLE_DEVICES']\n", "import os\nv = os.environ['ASCEND_RT_VISIBLE_DEVICES']\n"),
    ("import os\nv = os.environ.get('CUDA_VISIBLE_DEVICES')\n", "import os\nv = os.environ.get('ASCEND_RT_VISIBLE_DEVICES')\n"),
    ("import os\nv = os.getenv('CUDA_VISIBLE_DEVICES')\n", "import os\nv = os.getenv('ASCEND_RT_VISIBLE_DEVICES')\n"),
    ("import os\nos.environ.setdefault('CUDA_VISIBLE_DEVICES', '0')\n", "import os\nos.environ.setdefault('ASCEND_RT_VISIBLE_DEVICES', '0')\n"),
    ("from os import environ\nenviron['CUDA_VISIBLE_DEVICES'] = '1'\n", "from os import environ\nenviron['ASCEND_RT_VISIBLE_DEVICES'] = '1'\n"),
]


@pytest.mark.parametrize("before,after", REWRITES, ids=[b.strip().splitlines()[-1][:60] for b, _ in REWRITES])
def test_rewrite(before, after):
    assert migrate(before) == after
    assert migrate(after) == after  # idempotent


UNTOUCHED = [
    "# call .cuda() and torch.cuda.synchronize() here\nx = 1\n",
    '"""Use torch.cuda.is_available() and .cuda()."""\n',
    "torch.save(m, 'model_cuda.pt')\n",
    "print('training on cuda')\nlog.info('cuda:0 is busy')\n",
    "use_cuda = True\nif args.cuda and use_cuda:\n    pass\n",
    "x = x.to(device)\ny = y.to(args.device, non_blocking=True)\n",
    "name = 'cuda'\nprint(name)\n",  # a string that is not (known to be) a device
    "kernels = {'cuda': f, 'cpu': g}\n",
    "msg = f'cuda:{rank} is ready'\n",
    "ok = name.startswith('cuda')\n",
    # a PyTorch module whose weight converter imports TensorFlow in a function is not a TF file
    "import torch\n\n\ndef load_tf(p):\n    import tensorflow as tf\n    with tf.Session() as s:\n        return s\n",
    "url = 'tcp://nccl-host:23456'\n",
    "import os\nprint('CUDA_VISIBLE_DEVICES must be set')\n",
    "torch.cuda.synchronize()\n",  # `torch` not imported here: not resolvable, not guessed
    "import numba\nfrom numba import cuda\n@cuda.jit\ndef k(a):\n    pass\n",
    "import cupy\ncupy.cuda.Device(0).use()\n",
    "def cuda(self):\n    return self\n",
    "x = obj.cuda\n",  # attribute, not a call
    "import torch\nimport torch_npu\nx = torch.zeros(2).npu()\n",
]


@pytest.mark.parametrize("src", UNTOUCHED, ids=[s.strip().splitlines()[0][:50] for s in UNTOUCHED])
def test_untouched(src):
    result = migrate_source(src, "t.py", Options())
    assert result.error is None
    assert not result.changed, result.new_text
    assert result.edits == []


def test_edits_carry_code_and_position():
    src = "import torch\n\nx = torch.zeros(2).cuda()\ny = x.to('cuda:0')\n"
    result = migrate_source(src, "t.py", Options(add_import=False))
    got = [(e.code, e.span.line, e.span.col, e.before, e.after) for e in result.edits]
    assert got == [
        ("NPU101", 3, 20, "cuda", "npu"),
        ("NPU105", 4, 10, "'cuda:0'", "'npu:0'"),
    ]


def test_import_torch_npu_added_once_after_import_torch():
    src = "import os\nimport torch\nimport torch.nn as nn\n\nm = nn.Linear(2, 2).cuda()\nn = nn.Linear(2, 2).cuda()\n"
    out = migrate_source(src, "t.py").new_text
    assert out == (
        "import os\nimport torch\nimport torch.nn as nn\nimport torch_npu  # noqa: F401\n\n"
        "m = nn.Linear(2, 2).npu()\nn = nn.Linear(2, 2).npu()\n"
    )
    assert not migrate_source(out, "t.py").changed


@pytest.mark.parametrize("imports, expected", [
    # isort's place: after the `import torch...` lines, before `from torch ...` and torchvision.
    ("import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\nfrom torch.utils.data import DataLoader\n"
     "import torchvision\n",
     "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\nimport torch_npu  # noqa: F401\n"
     "from torch.utils.data import DataLoader\nimport torchvision\n"),
    # A blank line ends the group; `import torch.npu` needs torch_npu before it.
    ("import torch\n\nimport torch.nn as nn\n", "import torch\nimport torch_npu  # noqa: F401\n\nimport torch.nn as nn\n"),
    ("import torch\nimport torch.nn as nn\nimport torch.npu\n",
     "import torch\nimport torch.nn as nn\nimport torch_npu  # noqa: F401\nimport torch.npu\n"),
    # `from torch import device` first: torch_npu before 2.5 replaces torch.device at its import
    # (an int is an NPU after it); bound before, `device(0)` stays torch's cuda:0. Both orders are isort's.
    ("from torch import device\nimport torch\n", "import torch_npu  # noqa: F401\nfrom torch import device\nimport torch\n"),
    ("# models\nfrom torch import Tensor, device as Device\n",
     "# models\nimport torch_npu  # noqa: F401\nfrom torch import Tensor, device as Device\n"),
    ("from torch import nn\nfrom torch import device\n", "from torch import nn\nimport torch_npu  # noqa: F401\nfrom torch import device\n"),
])
def test_import_torch_npu_goes_where_isort_puts_it(imports, expected):
    use = "m = nn.Linear(2, 2).cuda()\n"
    out = migrate_source(imports + use, "t.py").new_text
    assert out == expected + use.replace("cuda", "npu")
    assert not migrate_source(out, "t.py").changed


@pytest.mark.parametrize("source", [
    "from torch import device\n\nDEVICE = device(0)\n",
    "import torch\nfrom torch import device\n\n\ndef place(m):\n    return m.to(device(1))\n",
    "import torch\n\nDEVICE = torch.device( 0 )\n",
])
def test_a_device_given_an_index_alone_gets_torch_npu_before_its_import(source):
    """`device(0)` names the accelerator: the NPU only where torch_npu is loaded (before 2.5 it
    patches torch.device at import, so a `from torch import device` bound before it keeps
    CUDA's class: cuda:0). A file doing nothing else on the device got no import and no
    finding (fifteenth session's defaults note); now it gets the import, before the name."""
    out = migrate_source(source, "t.py")
    if source.startswith("from torch import device"):
        assert out.new_text == "import torch_npu  # noqa: F401\n" + source
    else:
        assert out.new_text == source.replace("import torch\n", "import torch\nimport torch_npu  # noqa: F401\n", 1)
    assert [e.code for e in out.edits] == ["NPU108"] and out.findings == []
    assert not migrate_source(out.new_text, "t.py").changed


@pytest.mark.parametrize("source", [
    "from torch import device\nd = device(rank)\n",  # (an index or a name: not told)
    "import torch\nd = torch.device('cpu')\n",
    "import torch\nd = torch.device(0)  # npu-migrate: ignore\n",
    "from jax import device\nd = device(0)\n",
])
def test_a_device_not_given_an_index_alone_gets_nothing(source):
    assert not migrate_source(source, "t.py").changed


def test_import_torch_npu_in_try_block_and_function():
    src = "try:\n    import torch\nexcept ImportError:\n    torch = None\n\nx = t.cuda()\n"
    assert migrate_source(src, "t.py").new_text == (
        "try:\n    import torch\n    import torch_npu  # noqa: F401\nexcept ImportError:\n    torch = None\n\nx = t.npu()\n"
    )
    src = "def f(t):\n    import torch\n    return t.cuda()\n"
    assert migrate_source(src, "t.py").new_text == (
        "def f(t):\n    import torch\n    import torch_npu  # noqa: F401\n    return t.npu()\n"
    )


def test_no_import_added_without_torch_or_without_npu_use():
    assert migrate_source("x = t.cuda()\n", "t.py").new_text == "x = t.npu()\n"
    assert not migrate_source("import torch\nx = torch.zeros(1)\n", "t.py").changed


def test_half_migrated_code_is_completed():
    src = "import torch\nimport torch_npu\nx = torch.zeros(2).npu()\ny = x.cuda()\ntorch.cuda.synchronize()\n"
    assert migrate_source(src, "t.py").new_text == (
        "import torch\nimport torch_npu\nx = torch.zeros(2).npu()\ny = x.npu()\ntorch.npu.synchronize()\n"
    )


def test_suppression_comment_keeps_line():
    src = "import torch\nx = t.cuda()  # npu-migrate: ignore\ny = t.cuda()\nz = t.cuda()  # npu-migrate: ignore[NPU999]\n"
    out = migrate_source(src, "t.py", Options(add_import=False)).new_text
    assert out == "import torch\nx = t.cuda()  # npu-migrate: ignore\ny = t.npu()\nz = t.npu()  # npu-migrate: ignore[NPU999]\n"


def test_formatting_is_kept():
    src = "x = (\n    t  # the tensor\n    .cuda( non_blocking = True )\n)\n"
    assert migrate(src) == "x = (\n    t  # the tensor\n    .npu( non_blocking = True )\n)\n"


TORCH_NPU_OWN = 'import torch\nif "cuda" not in _NAMES:\n    torch.cuda.synchronize = torch.npu.synchronize\nx = torch.cuda.is_available()\n'


@pytest.mark.parametrize("path", ["torch_npu.py", "torch_npu/__init__.py", "site/torch_npu/_patch.py",
                                  "src/torch_npu/contrib/transfer_to_npu.py"])
def test_a_module_of_the_torch_npu_package_is_left_as_it_is(path):
    """torch_npu's own code names CUDA on purpose (it maps torch.cuda onto the NPU): no rewrite,
    no finding, and no `import torch_npu` of the package into itself."""
    result = migrate_source(TORCH_NPU_OWN, path, Options())
    assert (result.new_text, result.edits, result.findings, result.error) == (None, [], [], None)


@pytest.mark.parametrize("path", ["torch_npu_utils.py", "my_torch_npu/train.py", "torch_npux/train.py"])
def test_a_module_only_named_like_torch_npu_is_migrated(path):
    result = migrate_source(TORCH_NPU_OWN, path, Options())
    assert result.new_text == ('import torch\nimport torch_npu  # noqa: F401\nif "cuda" not in _NAMES:\n'
                               '    torch.cuda.synchronize = torch.npu.synchronize\nx = torch.npu.is_available()\n')


def test_the_stand_ins_own_torch_npu_is_left_as_it_is():
    """The newcomer's case: `npu-migrate .` on this project rewrote the stand-in's
    `if "cuda" not in _DEVICE_NAMES: _DEVICE_NAMES.append("cuda")` and gave it `import torch_npu`."""
    from pathlib import Path
    path = Path(__file__).resolve().parent.parent / "npu_migrate/standin/site/torch_npu/_patch.py"
    result = migrate_source(path.read_text(), str(path), Options())
    assert (result.new_text, result.edits, result.findings) == (None, [], [])


# What a collection is given and the tests of what it holds (`{c}`: the collection).
COLLECTION_ADDS = ['{c}.append("cuda")', '{c}.add("cuda")', '{c}.insert(0, "cuda")', '{c}.extend(["cuda"])',
                   '{c}.update({{"cuda": 1}})', '{c}.setdefault("cuda", 1)', '{c} += ["cuda"]', '{c} |= {{"cuda"}}',
                   '{c} = {c} + ["cuda"]', '{c}["cuda"] = 1', 'name = "cuda"\n    {c}.append(name)',
                   '{c} = ["cpu", "cuda"]', '{c} = {{"cuda": 0}}']
COLLECTION_READS = ['if "cuda" not in {c}: pass', 'x = "cuda" in {c}', 'n = {c}.count("cuda")', 'i = {c}.index("cuda")',
                    '{c}.remove("cuda")', 'ok = {c}[0] == "cuda"', 'ok = {c}[-1] != "cuda"', 'v = {c}["cuda"]',
                    'v = {c}.get("cuda")', 'v = {c}.pop("cuda")', 'print({c}["cuda"])',
                    'for d in {c}:\n        ok = d == "cuda"', 'ok = [d for d in {c} if d == "cuda"]']


@pytest.mark.parametrize("collection", ["DEVICES", "devices", "self.devices", "cfg.device_list", "names", "self.seen"])
@pytest.mark.parametrize("add", COLLECTION_ADDS)
def test_what_a_collection_is_given_moves_with_the_tests_of_what_it_holds(collection, add):
    """#1 of the seventh session: `if "cuda" not in DEVICES: DEVICES.append("cuda")` -- the
    elements given to a collection and the tests that read them move together (a collection
    named for devices), or neither does (any other): never one without the other."""
    named = collection.split(".")[-1].lower() in ("devices", "device_list")
    for read in COLLECTION_READS:
        src = ("class A:\n  def f(self, cfg):\n    " + add.format(c=collection) + "\n    "
               + read.format(c=collection) + "\n")
        expected = src.replace('"cuda"', '"npu"') if named else src
        assert migrate(src) == expected, src


@pytest.mark.parametrize("src", [
    'f(device={"from": "cuda"})\n', 'x = {"device": [{"a": "cuda"}]}\n', 'x = {"device": {"a": "cuda"}}\n',
    'f(device=[["cuda"]])\n', 'DEVICES = [("cuda", 0)]\n', 'f(device={**base, "from": "cuda:0"})\n',
    'x = {"device": ["cpu", {"cuda": "x"}]}\n',
])
def test_a_container_inside_a_device_position_holds_no_device(src):
    """#2: a device position's value is a device, or a container of devices one level deep
    (`["cpu", "cuda"]`, `{"cuda:1": "cuda:0"}`); a container in a container, or a dict whose
    keys are not devices, is something else and stays (in a file importing nothing, too)."""
    assert migrate(src) == src


@pytest.mark.parametrize("src,expected", [
    ('f(device=["cpu", "cuda"])\n', 'f(device=["cpu", "npu"])\n'),
    ('DEVICES = {"cuda": "cuda:0", "cpu": "cpu"}\n', 'DEVICES = {"npu": "npu:0", "cpu": "cpu"}\n'),
    # transformers 4.46.3 testing_utils: a dispatch table keyed by device names, with a fallback
    ('BACKEND_SEED = {"cuda": f, "cpu": g, "default": h}\n', 'BACKEND_SEED = {"npu": f, "cpu": g, "default": h}\n'),
    ('BACKENDS = {"cuda": "nccl", "default": "gloo"}\n', 'BACKENDS = {"npu": "hccl", "default": "gloo"}\n'),
    ('f(device={**base, "cuda": "cuda:0"})\n', 'f(device={**base, "npu": "npu:0"})\n'),
    ('BACKEND = {"name": "nccl", "timeout": 30}\n', 'BACKEND = {"name": "hccl", "timeout": 30}\n'),
    ('x = {"device": ("cuda", "cpu")}\n', 'x = {"device": ("npu", "cpu")}\n'),
    ('devices = base + ["cuda"] + more\n', 'devices = base + ["npu"] + more\n'),
    ('f(device="cuda" if ok else "cpu")\n', 'f(device="npu" if ok else "cpu")\n'),
])
def test_a_container_of_devices_one_level_deep_moves(src, expected):
    assert migrate(src) == expected


@pytest.mark.parametrize("value,kept", [
    ("torch_npu.npu.amp", True), ("npu.amp", True), ("torch.npu.is_available", True),
    ("lambda: 'npu'", True), ("lambda: False", False), ("my_sync", False),
])
def test_an_assignment_that_points_a_cuda_name_at_the_npu_keeps_its_target(value, kept):
    """#3: `torch.cuda.amp = npu.amp` maps the CUDA name onto the NPU (as transfer_to_npu does for
    code the run does not migrate); as `torch.npu.amp = npu.amp` it would assign the NPU its own
    value. Any other value assigned to a torch.cuda name moves with the project's readers."""
    src = f"import torch\nimport torch_npu as npu\ntorch.cuda.amp = {value}\ny = torch.cuda.amp.autocast()\n"
    line = f"torch.cuda.amp = {value}\n" if kept else f"torch.npu.amp = {value}\n"
    assert migrate(src) == f"import torch\nimport torch_npu as npu\n{line}y = torch.npu.amp.autocast()\n"


SKORCH_DEVICE_PAIRS = '''import pytest
import torch

@pytest.mark.parametrize('device_from, device_to', [
    ('cpu', 'cpu'),
    ('cpu', 'cuda'),
    ('cuda', 'cuda'),
])
def test_to_device(x, device_from, device_to):
    if 'cuda' in (device_from, device_to) and not torch.cuda.is_available():
        pytest.skip()
    for device in [device_from, device_to]:
        if device == 'cuda':
            x = x.half()
    ok = any(d == 'cuda' for d in (device_from, device_to))
    both = (device_from, device_to) == ('cuda', 'cuda')
'''


def test_a_display_of_device_names_is_tested_for_what_they_hold():
    """skorch 1.4.0 tests/test_utils.py:253-261: the parametrized values of `device_from,
    device_to` become "npu" (NPU105), so the tests of what they hold -- `'cuda' in (device_from,
    device_to)`, a loop or a generator over the pair, a tuple compared with them -- move too;
    left as 'cuda', the skip never fires and the test runs without an NPU."""
    expected = SKORCH_DEVICE_PAIRS.replace("'cuda'", "'npu'").replace("torch.cuda.", "torch.npu.")
    assert migrate(SKORCH_DEVICE_PAIRS) == expected


@pytest.mark.parametrize("src", [
    "ok = 'cuda' in (device, backend)\n",   # not every element is a device
    "ok = 'cuda' in (a, b)\n",
    "ok = 'cuda' in (*devices, extra)\n",
    "for d in (device, name):\n    ok = d == 'cuda'\n",
])
def test_a_display_with_something_else_than_devices_is_not_a_device(src):
    assert migrate(src) == src


@pytest.mark.parametrize("src,expected", [
    # speechbrain 1.1.2 utils/run_opts.py:160: the default became "hccl", the Literal kept "nccl"
    ('from typing import Literal\nclass RunOptions:\n    distributed_backend: Literal["nccl", "gloo", "mpi"] = "nccl"\n',
     'from typing import Literal\nclass RunOptions:\n    distributed_backend: Literal["hccl", "gloo", "mpi"] = "hccl"\n'),
    ('import typing\ndef run(backend: typing.Literal["nccl", "gloo"] = "nccl"):\n    pass\n',
     'import typing\ndef run(backend: typing.Literal["hccl", "gloo"] = "hccl"):\n    pass\n'),
    ('from typing import Literal, Optional\nclass O:\n    device: Optional[Literal["cpu", "cuda"]] = None\n',
     'from typing import Literal, Optional\nclass O:\n    device: Optional[Literal["cpu", "npu"]] = None\n'),
    ('from typing import Literal\ndef go(device: Literal["cpu", "cuda"] | None = None):\n    pass\n',
     'from typing import Literal\ndef go(device: Literal["cpu", "npu"] | None = None):\n    pass\n'),
    # a dataclass field's default is the attribute's value: `opts.device == "cuda"` moves by name
    ('from dataclasses import dataclass, field\n@dataclass\nclass O:\n'
     '    device: str = field(default="cuda")\n    backend: str = field(default="nccl", metadata={"choices": ["nccl", "gloo"]})\n'
     'def f(o):\n    return o.device == "cuda" and o.backend == "nccl"\n',
     'from dataclasses import dataclass, field\n@dataclass\nclass O:\n'
     '    device: str = field(default="npu")\n    backend: str = field(default="hccl", metadata={"choices": ["hccl", "gloo"]})\n'
     'def f(o):\n    return o.device == "npu" and o.backend == "hccl"\n'),
    ('import attr\n@attr.s\nclass O:\n    device = attr.ib(default="cuda")\n',
     'import attr\n@attr.s\nclass O:\n    device = attr.ib(default="npu")\n'),
])
def test_the_values_a_type_or_a_field_lists_move_with_the_default(src, expected):
    assert migrate(src) == expected


@pytest.mark.parametrize("src", [
    'from typing import Literal\nclass O:\n    kind: Literal["cuda", "cpu"] = "cpu"\n',     # not named for devices
    'from typing import Literal\nclass O:\n    dev: Literal["cuda", "npu"] = "npu"\n',     # names the NPU already
    'from dataclasses import field\nclass O:\n    name: str = field(default="cuda")\n',
    'class O:\n    device: str = make(default="cuda", other=1)\n',                           # not a field maker
])
def test_a_type_or_a_field_that_is_not_a_device_stays(src):
    assert migrate(src) == src


LIGER_SM_COUNT = '''import torch

def num_sms(device=0):
    return torch.cuda.get_device_properties(device).multi_processor_count

def grid(X):
    if X.device.type == "cuda":
        sm_count = torch.cuda.get_device_properties(X.device).multi_processor_count
    elif X.device.type == "npu":
        sm_count = get_npu_core_count()
    print(torch.cuda.get_device_properties(0).warp_size)
    return torch.cuda.get_device_properties(0).total_memory
'''


def test_device_properties_the_npu_has_no_value_for_stay_and_are_reported():
    """liger-kernel 0.8.5 ops/_nvidia_shared.py:69: `.multi_processor_count` of the migrated
    `torch.npu.get_device_properties()` is None (torch_npu 2.8's _NPUDeviceProperties never sets
    it), so the grid sizes computed from it fail far away; the statement stays and is reported
    (NPU307), like `.major`. In the CUDA branch of a chain that has an NPU branch it is neither
    kept by this nor reported (the NPU never runs it; the chain keeps that branch); printed, or
    a property the NPU has (`total_memory`), it migrates."""
    result = migrate_source(LIGER_SM_COUNT, "t.py", Options(add_import=False))
    expected = LIGER_SM_COUNT.replace("print(torch.cuda.", "print(torch.npu.").replace(
        "return torch.cuda.get_device_properties(0)", "return torch.npu.get_device_properties(0)")
    assert result.new_text == expected
    assert [(f.code, f.span.line, f.span.col, f.api) for f in result.findings] == [
        ("NPU307", 4, 12, "torch.cuda.get_device_properties")]
    assert result.findings[0].message.startswith(
        "`torch.cuda.get_device_properties(...).multi_processor_count` is the number of CUDA streaming multiprocessors;")


LOCAL_DEVICE_PARAMETERS = '''import torch


def train(model, device="cpu"):
    if device == "cuda":
        torch.backends.cudnn.benchmark = True
    return model.to(device)


class Runner:
    def __init__(self, model, device, dist_backend="gloo"):
        self.device = device

    def fit(self, x, target_device=None):
        return x.to(target_device)

    def go(self):
        return self.fit(1, "cuda"), self.fit(2, target_device="cuda:1")


def only_named(x, *, to_device=None):
    return x.to(to_device)


def main(model, name):
    only_named(1, to_device="cuda")
    only_named(1, "cuda")
    train(model, "cuda")
    Runner(model, "cuda", "nccl")
    print(name, "cuda")
    train(model, *rest, "cuda")
'''


def test_what_a_function_of_the_module_is_given_for_a_device_parameter_moves():
    """`def train(model, device): if device == "cuda": ...` called `train(model, "cuda")`: the
    function's readers of `device` move by its name, so a positional (or keyword) argument given to
    a parameter named for a device or a backend moves with them -- of a function, a class (its
    `__init__`) or a method (`self.fit`) of the module; not past a `*args`, not for other calls."""
    expected = LOCAL_DEVICE_PARAMETERS.replace('device == "cuda"', 'device == "npu"').replace(
        'train(model, "cuda")', 'train(model, "npu")').replace('Runner(model, "cuda", "nccl")', 'Runner(model, "npu", "hccl")').replace(
        'self.fit(1, "cuda"), self.fit(2, target_device="cuda:1")', 'self.fit(1, "npu"), self.fit(2, target_device="npu:1")').replace(
        'to_device="cuda"', 'to_device="npu"')
    assert migrate(LOCAL_DEVICE_PARAMETERS) == expected


def test_a_function_defined_in_lines_partial_parsing_left_out_is_read_too():
    """The def of `train` holds no device word, so partial parsing leaves it out: the call's
    argument is decided after the engine parses those lines too (the same as a whole parse)."""
    src = ("import torch\n\n\ndef train(model, device):\n    return run(model, device)\n\n\n"
           "train(model, 'cuda')\nx = torch.zeros(1).cuda()\n")
    assert migrate(src) == src.replace("'cuda'", "'npu'").replace(".cuda()", ".npu()")


@pytest.mark.parametrize("src", [
    'import torch\nparser.add_argument("--backend", default="nccl", choices=["nccl", "gloo", "hccl"])\n',
    'from dataclasses import field\nclass A:\n    ddp_backend: str = field(default=None, metadata={"choices": ["nccl", "hccl", "mpi"]})\n',
])
def test_a_list_that_names_the_npu_value_already_stays(src):
    """transformers 4.46.3 training_args.py:1111 `ddp_backend` choices ["nccl", "gloo", "mpi",
    "ccl", "hccl", ...]: rewritten, the list would name "hccl" twice; it allows the NPU's
    backend already and stays (the default, when it is "nccl", still moves)."""
    expected = src.replace('default="nccl"', 'default="hccl"')
    assert migrate(src) == expected


# pyro-ppl 1.9.2 pyro/contrib/mue/models.py:53-58, 207-232 (held out): the model's public
# `is_cuda` flag, set from its `cuda=` keyword.
PYRO_OWN_FLAG = '''\
import torch


class ProfileHMM(torch.nn.Module):
    def __init__(self, latent_seq_length, cuda=False):
        super().__init__()
        self.is_cuda = cuda

    def fit_svi(self, dataset):
        if self.is_cuda:
            device = torch.device("cuda")
        else:
            device = torch.device("cpu")
        for seq_data in dataset:
            if self.is_cuda:
                seq_data = seq_data.cuda()
        return device
'''


def test_an_is_cuda_attribute_the_file_assigns_is_the_users_and_keeps_its_name():
    """pyro's `self.is_cuda = cuda` became `self.is_npu = cuda`: consistent inside pyro, but
    `model.is_cuda`, the documented attribute, raised AttributeError in the user's code. A
    tensor's is_cuda is read-only, so an attribute the file assigns (or defines, or types as a
    field) is the user's: it and its readers keep the name; the device code under it moves."""
    result = migrate_source(PYRO_OWN_FLAG, "pyro/contrib/mue/models.py", Options())
    assert result.new_text == PYRO_OWN_FLAG.replace("import torch\n", "import torch\nimport torch_npu  # noqa: F401\n", 1).replace(
        'torch.device("cuda")', 'torch.device("npu")').replace("seq_data.cuda()", "seq_data.npu()")
    field = ("from dataclasses import dataclass\n\n\n@dataclass\nclass Options:\n    is_cuda: bool = False\n\n\n"
             "def pick(opts, x):\n    return x.cuda() if opts.is_cuda else x\n")
    assert migrate_source(field, "opts.py", Options()).new_text == field.replace("x.cuda()", "x.npu()")
    # a parameter of a signature split over lines is no field: a tensor's is_cuda still moves
    param = "def f(\n    x,\n    is_cuda: bool = False,\n):\n    return x.is_cuda or is_cuda\n"
    assert "x.is_npu or is_cuda" in migrate_source(param, "f.py", Options()).new_text


STRING_ANNOTATIONS = '''\
from __future__ import annotations

import torch


class Runner:
    def __init__(self, device: "Literal['cuda', 'cpu']" = "cuda", backend: "Optional[Literal['nccl', 'gloo']]" = "nccl"):
        self.device = device
        self.backend = backend

    def run(self, x):
        if self.device == "cuda":
            return x.to(self.device)
        return x


def f(device: "Literal['cuda', 'npu']" = "cuda", other: "Literal['cuda']" = "cuda"):
    return device, other
'''


def test_the_values_a_string_annotation_lists_move_with_the_default():
    """`device: "Literal['cuda', 'cpu']" = "cuda"` (a type in a string): the default and the
    readers moved, the type still listed 'cuda' (a type checker then refused every caller
    passing "npu"). It moves as the annotation written out does (e327bd4); one that names the
    NPU already, and a parameter not named for a device, stay. Idempotent."""
    result = migrate_source(STRING_ANNOTATIONS, "runner.py", Options())
    assert result.new_text == STRING_ANNOTATIONS.replace("import torch\n", "import torch\nimport torch_npu  # noqa: F401\n", 1).replace(
        "device: \"Literal['cuda', 'cpu']\" = \"cuda\", backend: \"Optional[Literal['nccl', 'gloo']]\" = \"nccl\"",
        "device: \"Literal['npu', 'cpu']\" = \"npu\", backend: \"Optional[Literal['hccl', 'gloo']]\" = \"hccl\"").replace(
        'if self.device == "cuda"', 'if self.device == "npu"').replace(
        "device: \"Literal['cuda', 'npu']\" = \"cuda\"", "device: \"Literal['cuda', 'npu']\" = \"npu\"")
    assert [(e.code, e.span.line, e.before, e.after) for e in result.edits if e.before.startswith('"')][:2] == [
        ("NPU105", 7, "\"Literal['cuda', 'cpu']\"", "\"Literal['npu', 'cpu']\""), ("NPU105", 7, '"cuda"', '"npu"')]
    assert not migrate_source(result.new_text, "runner.py", Options()).changed


# A device setting looked up with a CUDA default (rl-games 1.6.5's `self.ppo_device =
# config.get('device', 'cuda:0')`, left on CUDA and unreported before): the default moves where a
# literal in its place would, and is reported (NPU326) where its value goes elsewhere.
LOOKUP_DEFAULTS = [
    ("self.ppo_device = config.get('device', 'cuda:0')\n", "self.ppo_device = config.get('device', 'npu:0')\n"),
    ("self.device = kwargs.pop('device', 'cuda:0')\n", "self.device = kwargs.pop('device', 'npu:0')\n"),
    ("device = getattr(args, 'device', 'cuda')\n", "device = getattr(args, 'device', 'npu')\n"),
    ("import os\nDEVICE = os.environ.get('DEVICE', 'cuda')\n", "import os\nDEVICE = os.environ.get('DEVICE', 'npu')\n"),
    ("import os\nDEVICE = os.getenv('DEVICE', default='cuda:1')\n", "import os\nDEVICE = os.getenv('DEVICE', default='npu:1')\n"),
    ("from os import getenv\ndevice = getenv('DEV', f'cuda:{rank}')\n", "from os import getenv\ndevice = getenv('DEV', f'npu:{rank}')\n"),
    # a variable passed as a device, whatever its name; a device argument, a parameter's default
    ("d = cfg.setdefault('dev', 'cuda')\ny = x.to(d)\n", "d = cfg.setdefault('dev', 'npu')\ny = x.to(d)\n"),
    ("import torch\nd = torch.device(cfg.get('device', 'cuda:0'))\n", "import torch\nd = torch.device(cfg.get('device', 'npu:0'))\n"),
    ("y = torch.zeros(1, device=kwargs.get('device', 'cuda'))\n", "y = torch.zeros(1, device=kwargs.get('device', 'npu'))\n"),
    ("def f(device=os.environ.get('DEVICE', 'cuda')):\n    pass\n", "def f(device=os.environ.get('DEVICE', 'npu')):\n    pass\n"),
    # Lightning's DDPStrategy hands process_group_backend to init_process_group (was NPU326, 127305c)
    ("from lightning.pytorch.strategies import DDPStrategy\n"
     "s = DDPStrategy(process_group_backend=cfg.opt.get('dist_backend', 'nccl'))\n",
     "from lightning.pytorch.strategies import DDPStrategy\n"
     "s = DDPStrategy(process_group_backend=cfg.opt.get('dist_backend', 'hccl'))\n"),
    # nested lookups, `str(...)`, `.strip()`, `or`, a conditional default, a list of them
    ("device = str(a.get('device', b.get('device', 'cuda'))).strip() or 'cuda'\n",
     "device = str(a.get('device', b.get('device', 'npu'))).strip() or 'npu'\n"),
    ("import torch\ndevice = cfg.get('device', 'cuda' if torch.cuda.is_available() else 'cpu')\n",
     "import torch\ndevice = cfg.get('device', 'npu' if torch.npu.is_available() else 'cpu')\n"),
    ("device_ids = [r.get('device', 'cuda')]\n", "device_ids = [r.get('device', 'npu')]\n"),
    # compared: the key names a device, as `cfg['device'] == 'cuda'`; the default moves with the literal
    ("amp = cfg.get('device', 'cuda') == 'cuda'\n", "amp = cfg.get('device', 'npu') == 'npu'\n"),
    ("ok = getattr(args, 'device', 'cpu') != 'cuda'\n", "ok = getattr(args, 'device', 'cpu') != 'npu'\n"),
    ("if opts.get('device') == 'cuda':\n    pass\n", "if opts.get('device') == 'npu':\n    pass\n"),
    # a backend the same way
    ("import torch.distributed as dist\ndist.init_process_group(backend=os.getenv('BACKEND', 'nccl'))\n",
     "import torch.distributed as dist\ndist.init_process_group(backend=os.getenv('BACKEND', 'hccl'))\n"),
    ("backend = cfg.get('dist_backend', 'nccl')\n", "backend = cfg.get('dist_backend', 'hccl')\n"),
]


@pytest.mark.parametrize("before,after", LOOKUP_DEFAULTS)
def test_a_lookups_cuda_default_moves_where_a_literal_would(before, after):
    result = migrate_source(before, "t.py", Options(add_import=False))
    assert result.new_text == after
    assert [f.code for f in result.findings if f.code == "NPU326"] == []
    assert not migrate_source(after, "t.py", Options(add_import=False)).changed  # idempotent


LOOKUPS_LEFT = [
    # read under a name that says no device: its comparison would not move with it (reported)
    ("accel = cfg.get('device', 'cuda')\nif accel == 'cuda':\n    pass\n", ["1:9"]),
    ("requested = getattr(args, 'device', 'cuda')\nif requested.startswith('cuda'):\n    pass\n", ["1:13"]),
    # given to a function that is not known to take a device there
    ("env = make_env(kwargs.pop('device', 'cuda:0'))\nd = pick(preferred=cfg.get('device_name', 'cuda'))\n",
     ["1:16", "2:20"]),
    ("import os\nos.environ.setdefault('DEVICE', 'cuda')\n", ["2:1"]),
    # not reported: another library's device (NPU303 there), a display, a key that names no
    # device, a default that is no CUDA device, an ignore comment for the rewrite
    ("import ctranslate2\ndevice = cfg.get('device', 'cuda')\nt = ctranslate2.Translator(p, device=device)\n", []),
    ("import ctranslate2\nt = ctranslate2.Translator(p, device=cfg.get('device', 'cuda'))\n", []),
    ("print(cfg.get('device', 'cuda'))\nlog(f\"{cfg.get('device', 'cuda')}\")\n", []),
    ("name = cfg.get('name', 'cuda')\nd = cfg.get('device', 'cpu')\n", []),
    ("d = cfg.get('device', 'cuda')  # npu-migrate: ignore[NPU105]\n", []),
    # the same for a backend whose NCCL default nothing moves (public code: a `Dist(...)` class of
    # another module given `cfg.get("pipeline", {}).get("dist_backend", "nccl")`; Lightning's
    # `DDPStrategy(process_group_backend=...)` is a backend keyword since b6ad646: LOOKUP_DEFAULTS)
    ("d = Dist(cfg.get('pipeline', {}).get('dist_backend', 'nccl'))\n", ["1:10"]),
    # ... and not a key that names no backend, nor under an ignore comment for the rewrite (where
    # it moves: LOOKUP_DEFAULTS)
    ("name = cfg.get('name', 'nccl')\nb = cfg.get('backend', 'gloo')\n", []),
    ("d = Dist(cfg.get('dist_backend', 'nccl'))  # npu-migrate: ignore[NPU106]\n", []),
]


def test_a_backend_lookups_nccl_default_that_cannot_move_says_nccl():
    src = "d = Dist(cfg.get('pipeline', {}).get('dist_backend', 'nccl'))\n"
    (finding,) = migrate_source(src, "t.py", Options(add_import=False)).findings
    assert (finding.code, finding.message, finding.suggestion) == (
        "NPU326", "`cfg.get('pipeline', {}).get('dist_backend', 'nccl')` falls back to NCCL and is left as it is: its"
        " value reaches no place known to be a torch.distributed backend, and what reads it would not move with it",
        "Set the default to HCCL (\"hccl\") together with the code that reads and compares the value, or give the"
        " setting explicitly.")


@pytest.mark.parametrize("src,where", LOOKUPS_LEFT)
def test_a_lookups_cuda_default_that_cannot_move_stays_and_is_reported(src, where):
    result = migrate_source(src, "t.py", Options(add_import=False))
    assert not result.changed or result.new_text == src
    found = [f"{f.span.line}:{f.span.col}" for f in result.findings if f.code == "NPU326"]
    assert found == where


# sample-factory 2.1.1 (wheel) sample_factory/utils/gpu_utils.py:1-28, the imports trimmed.
SAMPLE_FACTORY_GPU_UTILS = '''\
import os
from typing import List, Optional

import torch

CUDA_ENVVAR = "CUDA_VISIBLE_DEVICES"


def set_global_cuda_envvars(cfg):
    if CUDA_ENVVAR not in os.environ:
        if cfg.device == "cpu":
            available_gpus = ""
        else:
            available_gpus = get_gpus_without_triggering_pytorch_cuda_initialization(os.environ)
        os.environ[CUDA_ENVVAR] = available_gpus
    log.info(f"Environment var {CUDA_ENVVAR} is {os.environ[CUDA_ENVVAR]}")


def get_available_gpus() -> List[int]:
    """
    Returns indices of GPUs specified by CUDA_VISIBLE_DEVICES.
    """
    orig_visible_devices = os.environ[f"{CUDA_ENVVAR}"]
    available_gpus = [int(g.strip()) for g in orig_visible_devices.split(",") if g and not g.isspace()]
    return available_gpus
'''


def test_a_constant_naming_the_visible_devices_variable_moves_with_its_environ_readers():
    """sample-factory 2.1.1 gpu_utils.py: `CUDA_ENVVAR = "CUDA_VISIBLE_DEVICES"`, read as
    `os.environ[CUDA_ENVVAR]` and `CUDA_ENVVAR not in os.environ` to set each process's device
    mask: on Ascend the mask is ASCEND_RT_VISIBLE_DEVICES, so the constant moves (NPU107) as the
    literal written in its readers' place does. A constant no environment lookup reads stays."""
    r = assert_partial_as_whole(SAMPLE_FACTORY_GPU_UTILS, "sample_factory/utils/gpu_utils.py")
    assert r.new_text == (SAMPLE_FACTORY_GPU_UTILS + PARTIAL_PADDING).replace(
        'CUDA_ENVVAR = "CUDA_VISIBLE_DEVICES"', 'CUDA_ENVVAR = "ASCEND_RT_VISIBLE_DEVICES"')
    assert [(e.code, e.span.line, e.before, e.after) for e in r.edits] == [
        ("NPU107", 6, '"CUDA_VISIBLE_DEVICES"', '"ASCEND_RT_VISIBLE_DEVICES"')]
    for reader in ("os.getenv(NAME)", "os.environ.get(NAME, '')", "os.environ[NAME]"):
        r = migrate_source(f"import os\nNAME = 'CUDA_VISIBLE_DEVICES'\nmask = {reader}\n", "m.py")
        assert r.new_text == f"import os\nNAME = 'ASCEND_RT_VISIBLE_DEVICES'\nmask = {reader}\n"
    label = "import os\nNAME = 'CUDA_VISIBLE_DEVICES'\nprint(NAME)\n"
    assert migrate_source(label, "m.py").new_text is None


# mindone 0.5.0 (sdist) tests/diffusers_tests/pipelines/pipeline_test_utils.py:1-11 and 67-120.
MINDONE_RANDN_TENSOR = '''\
import importlib
import inspect
import logging
import random
import sys
from typing import Callable, List, Optional, Tuple, Union

import torch

import mindspore as ms
from mindspore import mint, nn, ops


def randn_tensor(
    shape: Union[Tuple, List],
    generator: Optional[Union[List["torch.Generator"], "torch.Generator"]] = None,
    device: Optional["torch.device"] = None,
    dtype: Optional["torch.dtype"] = None,
    layout: Optional["torch.layout"] = None,
):
    """A helper function to create random tensors on the desired `device` with the desired `dtype`. When
    passing a list of generators, you can seed each batch size individually. If CPU generators are passed, the tensor
    is always created on the CPU.
    """
    # device on which tensor is created defaults to device
    rand_device = device
    batch_size = shape[0]
    ms_dtype = dtype
    if dtype == ms.float32:
        dtype = torch.float32
    elif dtype == ms.bfloat16:
        dtype = torch.bfloat16
    elif dtype == ms.float16:
        dtype = torch.float16

    layout = layout or torch.strided
    device = device or torch.device("cpu")

    if generator is not None:
        gen_device_type = generator.device.type if not isinstance(generator, list) else generator[0].device.type
        if gen_device_type != device.type and gen_device_type == "cpu":
            rand_device = "cpu"
            if device != "mps":
                print(
                    f"The passed generator was created on 'cpu' even though a tensor on {device} was expected."
                    f" Tensors will be created on 'cpu' and then moved to {device}. Note that one can probably"
                    f" slighly speed up this function by passing a generator that was created on the {device} device."
                )
        elif gen_device_type != device.type and gen_device_type == "cuda":
            raise ValueError(f"Cannot generate a {device} tensor from a generator of type {gen_device_type}.")

    # make sure generator list of length 1 is treated like a non-list
    if isinstance(generator, list) and len(generator) == 1:
        generator = generator[0]

    if isinstance(generator, list):
        shape = (1,) + shape[1:]
        latents = [
            torch.randn(shape, generator=generator[i], device=rand_device, dtype=dtype, layout=layout)
            for i in range(batch_size)
        ]
        latents = torch.cat(latents, dim=0).to(device)
    else:
        latents = torch.randn(shape, generator=generator, device=rand_device, dtype=dtype, layout=layout).to(device)

    return ms.Tensor(latents.float().numpy(), dtype=ms_dtype)
'''


def test_a_comparison_with_the_device_an_object_is_on_needs_no_torch_npu():
    """mindone 0.5.0's MindSpore test helper (its PyTorch a CPU reference): `gen_device_type ==
    "cuda"`, where `gen_device_type` is only ever a generator's `.device.type`, moves, but asks for
    no `import torch_npu`: a generator is on the NPU only in a process that loaded torch_npu, and
    without it the test is False as before (the MindSpore test environment has no torch_npu to
    import). A comparison with a setting (a parameter, which may name the NPU before anything is on
    it) still asks for the import."""
    r = assert_partial_as_whole(MINDONE_RANDN_TENSOR, "tests/diffusers_tests/pipelines/pipeline_test_utils.py")
    assert r.new_text == (MINDONE_RANDN_TENSOR + PARTIAL_PADDING).replace(
        'gen_device_type == "cuda"', 'gen_device_type == "npu"')
    assert [(e.code, e.span.line) for e in r.edits] == [("NPU105", 49)]
    setting = "import torch\ndef f(x, device_type):\n    if device_type == 'cuda':\n        x = x.to(device_type)\n    return x\n"
    assert migrate_source(setting, "m.py").new_text == setting.replace(
        "import torch\n", "import torch\nimport torch_npu  # noqa: F401\n").replace("'cuda'", "'npu'")
    read = "import torch\ndef f(x):\n    kind = x.device.type\n    return kind == 'cuda'\n"
    assert migrate_source(read, "m.py").new_text == read.replace("'cuda'", "'npu'")
    rebound = read.replace("    return", "    kind = kind or 'cpu'\n    return")
    assert migrate_source(rebound, "m.py").new_text == rebound.replace(
        "import torch\n", "import torch\nimport torch_npu  # noqa: F401\n").replace("== 'cuda'", "== 'npu'")


# spikingjelly 2.0.0 spikingjelly/timing_based/functional.py (lines 36-43 and 778-785), abridged: a
# library module whose only device code is a check of the device its tensors are on.
SPIKINGJELLY_VALIDATE_EVENTS = """\
import torch


class _Tempotron(torch.autograd.Function):
    @staticmethod
    def forward(ctx, times, indices, offsets, weight, duration, tau, tau_s, threshold):
        slow, fast, delta = _parameters(duration, tau, tau_s, threshold)
        ctx.set_materialize_grads(False)
        times64, weight64 = times.double(), weight.double()
        peak_delay = times64.new_tensor(delta * slow).log1p() / delta


def _validate_events(
    spike_times, input_indices, batch_offsets, weight, in_features=None
):
    tensors = (spike_times, input_indices, batch_offsets, weight)
    if any(
        t.device != spike_times.device for t in tensors
    ) or spike_times.device.type not in ("cpu", "cuda"):
        raise ValueError("All tensors must be on the same CPU or CUDA device.")
"""


def test_a_file_whose_only_move_is_a_comparison_with_an_objects_device_keeps_its_device_findings():
    """spikingjelly 2.0.0's timing_based/functional.py: the comparison with the device its tensors
    are on moves and asks for no `import torch_npu` (above), but the file still handles NPU tensors,
    so what is reported only in a file that uses the device (NPU306's `.double()`) is still reported:
    the ten float64 warnings its whole file gets."""
    r = migrate_source(SPIKINGJELLY_VALIDATE_EVENTS, "spikingjelly/timing_based/functional.py")
    assert r.new_text == SPIKINGJELLY_VALIDATE_EVENTS.replace('("cpu", "cuda")', '("cpu", "npu")')
    assert [(e.code, e.span.line) for e in r.edits] == [("NPU105", 19)]
    assert [(f.code, f.span.line, f.span.col) for f in r.findings] == [("NPU306", 9, 29), ("NPU306", 9, 45)]
