"""The code generated for ModelArts: the runtime module put beside entry scripts and the
optional boot file.

Both are templates kept as Python files next to this one (`runtime_template.py`,
`boot_template.py`), so they can be read, linted and checked for Python 3.7 like any code. The
runtime module is the same for every script (each entry script passes its own settings to
`modelarts_setup`); the boot file gets the script's name and launch settings, laid out with
black (imported here only, and only when code is generated: it is slow to import).
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path
from typing import Tuple

# The block earlier versions put into entry scripts: replaced by the import of the module.
BEGIN_MARKER = "# >>> npu-migrate: ModelArts >>>"
END_MARKER = "# <<< npu-migrate: ModelArts <<<"
SETUP_FUNCTION = "modelarts_setup"  # what the script calls where it parses its arguments
RUNTIME_MODULE = "npu_migrate_modelarts"  # the generated module beside the entry script
RUNTIME_MARKER = "# npu-migrate: ModelArts runtime"  # its first line starts so
BOOT_MARKER = "# npu-migrate: ModelArts boot file"  # first comment line of a generated boot file

_HERE = Path(__file__).resolve().parent


def _template(name: str) -> str:
    return (_HERE / name).read_text(encoding="utf-8")


def _constant_line(line: str, match: "re.Match[str]") -> str:
    return line


def _set_constants(text: str, values: dict) -> str:
    """Replace the `NAME = <value>` lines of the template's settings."""
    for name, value in values.items():
        pattern = re.compile(rf"^{name} = .*$", re.MULTILINE)
        # A function, not a replacement string: the value's backslashes stay as they are.
        text, count = pattern.subn(functools.partial(_constant_line, f"{name} = {value!r}"), text)
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
def render_runtime() -> str:
    """The module `npu_migrate_modelarts.py` (kept black-formatted in the template itself)."""
    return _template("runtime_template.py")


def runtime_file_name(script: str) -> str:
    """Where the runtime module of an entry script goes: beside it."""
    return os.path.join(os.path.dirname(script), RUNTIME_MODULE + ".py")


def boot_file_name(script: str) -> str:
    """`train.py` -> `modelarts_entry_train.py` (the CANN ModelZoo's naming)."""
    return "modelarts_entry_" + os.path.basename(script)


@functools.lru_cache(maxsize=32)
def render_boot(script: str, positionals: Tuple[str, ...] = (), distributed: bool = False,
                import_root: str = "", runs_in_import_root: bool = False) -> str:
    """A ModelArts boot file that runs `script` (a file name in the boot file's folder):
    `positionals` are the script's positional arguments, which the job passes as --name=value;
    `distributed` starts it with torch.distributed.run (it reads LOCAL_RANK); `import_root`, for
    a script that imports its own package, the folder holding that package relative to the
    script's ("..", "../.."), put on PYTHONPATH; `runs_in_import_root`: the script runs there,
    not in its own folder."""
    values = {"TRAINING_SCRIPT": script, "POSITIONAL_ARGUMENTS": tuple(positionals), "TORCHRUN": bool(distributed),
              "IMPORT_ROOT": import_root, "RUNS_IN_IMPORT_ROOT": bool(import_root and runs_in_import_root)}
    text = _set_constants(_template("boot_template.py"), values)
    # The name also goes into the docstring: escaped, so a file named `x"""; os.system(...)`
    # cannot end the docstring and become code.
    in_docstring = script.replace("\\", "\\\\").replace('"', '\\"')
    return black_format(text.replace("{script}", in_docstring))
