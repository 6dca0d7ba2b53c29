"""The code generated for ModelArts: the block put into entry scripts and the optional boot file.

Both are templates kept as Python files next to this one (`block_template.py`,
`boot_template.py`), so they can be read, linted and checked for Python 3.7 like any code; the
functions here fill in their settings and lay them out with black (imported here only, and only
when code is generated: it is slow to import).
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Tuple

BEGIN_MARKER = "# >>> npu-migrate: ModelArts >>>"
END_MARKER = "# <<< npu-migrate: ModelArts <<<"
SETUP_FUNCTION = "modelarts_setup"  # what the script calls where it parses its arguments
BOOT_MARKER = "# npu-migrate: ModelArts boot file"  # first comment line of a generated boot file

_HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class BlockSettings:
    """The values the block's MODELARTS_* settings take for one script."""

    data_dir: str = "/cache/data"
    data_args: Tuple[str, ...] = ()
    output_arg: str = ""
    output_dir: str = "/cache/output"
    resume: bool = False

    def values(self) -> dict:
        return {
            "MODELARTS_DATA_DIR": self.data_dir,
            "MODELARTS_DATA_ARGS": tuple(self.data_args),
            "MODELARTS_OUTPUT_ARG": self.output_arg,
            "MODELARTS_OUTPUT_DIR": self.output_dir,
            "MODELARTS_RESUME": bool(self.resume),
        }


def _template(name: str) -> str:
    return (_HERE / name).read_text(encoding="utf-8")


def _set_constants(text: str, values: dict) -> str:
    """Replace the `NAME = <value>` lines of the template's settings."""
    for name, value in values.items():
        pattern = re.compile(rf"^{name} = .*$", re.MULTILINE)
        text, count = pattern.subn(lambda m: f"{name} = {value!r}", text)
        if count != 1:  # a template and this function out of step: a bug, not user input
            raise AssertionError(f"template setting {name} found {count} times")
    return text


def black_format(code: str, line_length: int = 88, normalize_strings: bool = True) -> str:
    import black  # lazily: importing black costs more than migrating a file

    mode = black.Mode(
        target_versions={black.TargetVersion.PY37},
        line_length=line_length,
        string_normalization=normalize_strings,
    )
    return black.format_str(code, mode=mode)


@functools.lru_cache(maxsize=1)
def _block_parts() -> Tuple[str, str, str]:
    """The block template laid out once, cut around its settings (their comments included):
    only the settings differ from script to script, and black is slow on 250 lines."""
    text = _template("block_template.py")
    text = black_format(text[text.index(BEGIN_MARKER):text.index(END_MARKER) + len(END_MARKER)] + "\n")
    lines = text.splitlines(keepends=True)
    first = next(i for i, line in enumerate(lines) if line.startswith("MODELARTS_DATA_DIR = "))
    while lines[first - 1].startswith("# "):
        first -= 1
    last = next(i for i, line in enumerate(lines) if line.startswith("MODELARTS_RESUME = "))
    return "".join(lines[:first]), "".join(lines[first:last + 1]), "".join(lines[last + 1:])


@functools.lru_cache(maxsize=32)
def render_block(settings: BlockSettings) -> str:
    """The block for one entry script, from its begin marker line to its end marker line."""
    head, template_settings, tail = _block_parts()
    return head + black_format(_set_constants(template_settings, settings.values())) + tail


def boot_file_name(script: str) -> str:
    """`train.py` -> `modelarts_entry_train.py` (the CANN ModelZoo's naming)."""
    return "modelarts_entry_" + os.path.basename(script)


@functools.lru_cache(maxsize=32)
def render_boot(script: str) -> str:
    """A ModelArts boot file that runs `script` (a file name in the boot file's folder)."""
    text = _set_constants(_template("boot_template.py"), {"TRAINING_SCRIPT": script})
    # The name also goes into the docstring: escaped, so a file named `x"""; os.system(...)`
    # cannot end the docstring and become code.
    in_docstring = script.replace("\\", "\\\\").replace('"', '\\"')
    return black_format(text.replace("{script}", in_docstring))
