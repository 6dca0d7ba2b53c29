"""`[[edit]]`: a rewrite that a pass makes from its own analysis of the file, not by matching a
name -- the ModelArts adaptation (`--data_url`/`--train_url` added, `parse_known_args()`, the
setup call, the ModelArts block). The module that makes it (registered with
`@codes.emits`, which `explain` shows) looks the rule up by its code (RuleSet.edits); the message of each edit it makes says what it did there.

Its examples are `flagged` (migrating it credits an edit to the code) and `not_flagged`, run
with the options they name (`modelarts = true`).

    [[edit]]
    code = "NPU202"
    message = "`parse_args()` -> `parse_known_args()[0]`"
    examples = [{ modelarts = true, flagged = "import argparse\\n..." }]
"""

from __future__ import annotations

from typing import Dict

from .base import Kind, Rule, new_dict, register, schema


def _index(index: Dict[str, Rule], rule: Rule) -> None:
    index[rule.code] = rule  # the pass looks its rule up by its code


KIND = register(Kind(
    name="edit",
    schema=schema((), ()),
    summary="a rewrite a pass makes from its own analysis (ModelArts)",
    requirements=lambda rule: [],  # never a reason to parse a file: the pass runs anyway
    new_index=new_dict,
    index=_index,
    reports=True,
))
