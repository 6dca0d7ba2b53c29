"""`migrate_source(text, path, options) -> FileResult`: one file, whatever its kind.

The top of the engine: it picks the front end that claims the path (frontends/: notebooks,
shell scripts, dependency lists, CUDA sources) and sends everything else to the Python engine
(engine.py). Both sit below this module, so neither needs to know the other's dispatch.

The engine and the front ends apply the rules they are given: the rules as the run's targets
see them (targets/rule_view.py). A run (pipeline.py) derives that view once and passes it
here; a caller that passes the rules as loaded (the library API, the tests) gets the view
derived here, once per set of targets (it is cached).
"""

from __future__ import annotations

from typing import Optional

from . import work
from .engine import migrate_python
from .frontends import frontend_for
from .model import FileResult
from .options import Options
from .rules import RuleSet, default_rules


def migrate_source(text: str, path: str = "<string>", options: Optional[Options] = None,
                   rules: Optional[RuleSet] = None, partial: bool = True) -> FileResult:
    """Migrate one file's text. Never raises for bad input: errors land in `result.error`.
    `partial=False` makes libcst parse every file whole (see partial.py; same results)."""
    options = options or Options()
    rules = rules or default_rules()
    if rules.targets != options.target_specs:  # not the view of a run: derive it (cached)
        from .targets.rule_view import rules_for_targets

        rules = rules_for_targets(rules, options.targets)
    with work.counting() as counts:
        frontend = frontend_for(path, text)
        if frontend is not None:
            result = frontend(text, path, options, rules)
        else:
            result = migrate_python(text, path, options, rules, partial=partial)
    result.work = dict(counts)
    return result
