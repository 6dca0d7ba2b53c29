"""`[[module]]`: an import-path rewrite: `from torch.cuda.amp import X`, `import torch.cuda`.

    [[module]]
    code = "NPU102"
    from = "torch.cuda.amp"
    to = "torch_npu.npu.amp"
    message = "..."
"""

from __future__ import annotations

from ..words import components
from .base import new_dict, register, Kind, by_from, from_is_a_dotted_name, schema


KIND = register(Kind(
    name="module",
    schema=schema(("from", "to"), ()),
    summary="an imported module path becomes another",
    requirements=lambda rule: [components(rule.from_)],
    new_index=new_dict,
    index=by_from,
    check=from_is_a_dotted_name,
))
