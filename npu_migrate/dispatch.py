"""`migrate_source(text, path, options) -> FileResult`: one file, whatever its kind.

The top of the engine: it picks the front end that claims the path (frontends/: notebooks,
shell scripts, dependency lists, CUDA sources) and sends everything else to the Python engine
(engine.py). Both sit below this module, so neither needs to know the other's dispatch.
"""

from __future__ import annotations

from typing import Optional

from .engine import migrate_python
from .frontends import frontend_for
from .model import FileResult, Options
from .rules import RuleSet, default_rules


def migrate_source(text: str, path: str = "<string>", options: Optional[Options] = None,
                   rules: Optional[RuleSet] = None, partial: bool = True) -> FileResult:
    """Migrate one file's text. Never raises for bad input: errors land in `result.error`.
    `partial=False` makes libcst parse every file whole (see partial.py; same results)."""
    options = options or Options()
    rules = rules or default_rules()
    frontend = frontend_for(path, text)
    if frontend is not None:
        return frontend(text, path, options, rules)
    return migrate_python(text, path, options, rules, partial=partial)
