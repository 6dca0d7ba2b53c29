"""The rule kinds: one module per TOML array of tables (`[[device]]` -> kinds/device.py).

Each module declares its `KIND` (kinds/base.py): the keys its tables take, the checks of their
values, the index the passes look its rules up in, the words a file must contain for one of its
rules to apply (the prefilter's and partial parsing's input), and where the code that applies
its rules lives (`npu-migrate explain CODE` prints it). rules.py loads the TOML and does the
checks every kind shares; everything particular to a kind is in its module.

PyTorch kinds (the torch pass, codemods/torch/, applies them):
    api, module, method, attribute, device, backend, env, add_import
Shell scripts: command (and env).                 Every front end: finding.
What a pass does from its own analysis (ModelArts): edit, and findings of kind `analysis`.
Framework rules (TensorFlow, MindSpore; codemods/callrules/, shared checks in kinds/calls.py):
    call_rename, call_replace, call_config, argument, add_keyword, entry_setup, remove_import,
    device_dispatch
(also add_import and finding with `framework = "..."`).
"""

from __future__ import annotations

from typing import Dict

from . import (add_import, add_keyword, api, argument, attribute, backend, call_config, call_rename, call_replace,
               command, device, device_dispatch, edit, entry_setup, env, finding, method, module, remove_import)
from .base import Kind

KINDS: Dict[str, Kind] = {
    k.KIND.name: k.KIND
    for k in (api, module, method, attribute, device, backend, env, add_import, command, finding, edit,
              call_rename, call_replace, call_config, argument, add_keyword, entry_setup, remove_import,
              device_dispatch)
}
# The framework a rule may name (`framework = "..."`): its pass applies it.
FRAMEWORKS = ("tensorflow", "mindspore")
