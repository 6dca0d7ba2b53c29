"""The rule kinds: one module per TOML array of tables (`[[device]]` -> kinds/device.py).

Each module declares and registers its `KIND` (kinds/base.py: `KIND = register(Kind(...))`):
the keys its tables take, the checks of their values, its own index (RuleSet.index_of), the
words a file must contain for one of its rules to apply (the prefilter's and partial parsing's
input) and, for a kind no built-in pass applies, its applier. rules.py loads the TOML and does
the checks every kind shares; everything particular to a kind is in its module. Importing this
package imports every module in it, so a new kind is one new module here (no list to extend);
a kind declared outside the package registers when its module is imported.

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

import importlib
from typing import Any, Dict

from ..startup import package_modules
from .base import REGISTRY, Kind

for _name in package_modules(__path__[0]):
    importlib.import_module(f"{__name__}.{_name}")  # each kind module registers its KIND

# name -> kind, every registered kind (the registry itself: a kind registered later is in it).
KINDS: Dict[str, Kind[Any]] = REGISTRY
# The framework a rule may name (`framework = "..."`): its pass applies it.
FRAMEWORKS = ("tensorflow", "mindspore")
