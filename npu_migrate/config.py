"""Configuration from `[tool.npu-migrate]` in pyproject.toml, merged under the command line.

Found like ruff finds its own: starting from the common folder of the paths given (the folder of
`--stdin-filename`, or the current folder, for stdin), the nearest `pyproject.toml` that has a
`[tool.npu-migrate]` table wins; there is no merging of several files. `--config FILE` names the
file instead (a pyproject.toml, or a TOML file whose top level holds the same keys);
`--isolated` ignores configuration altogether.

Every option of the `migrate` command can be set, under its long name without the dashes
(`fail-on = "warning"`, `exclude = ["legacy/"]`, `no-import = true`). The key list is derived from
the click command itself, so a new option is configurable the moment it exists. The command line
wins over the file, except for `extend-*` lists, which add up. The mode keys (`write`, `diff`,
`check`, `output-dir`) are refused: what a run does is said on the command line; so is
`output-file` (a report file named in a shared pyproject.toml could replace any file). Paths in the file
are relative to the file's folder. Unknown keys and values of the wrong type are errors naming the
key and the file. A configuration file is read only when it is a regular file of at most
MAX_CONFIG_BYTES (a FIFO or /dev/zero never hangs a run); a pyproject.toml on the way up that does
not mention npu-migrate is not parsed at all (a project's file that is not UTF-8 or not valid
TOML is none of our business).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Sequence, cast

import click

from .project_files import common_folder, toml_data

TABLE = "npu-migrate"
# Options that only make sense on the command line (by key).
COMMAND_LINE_ONLY = frozenset({"config", "isolated", "stdin-filename", "help", "version"})
# What a run does is chosen on the command line: a `write = true` in a shared pyproject.toml would
# turn every plain `npu-migrate src` into a rewrite, and clash with a `--check` nobody could see.
MODE_KEYS = ("write", "diff", "check", "output-dir")
# Which file a run writes is said on the command line too: `output-file = "keep.py"` (or
# "../../x.json") in a shared pyproject.toml made every plain `npu-migrate src`, documented as
# writing nothing, replace a source file or write outside the project (issue 30.2).
COMMAND_LINE_PATHS = ("output-file",)
MAX_CONFIG_BYTES = 4 * 2**20


class ConfigError(Exception):
    """A configuration file that cannot be used; the message names the file (and the key)."""


@dataclass
class Config:
    path: Optional[str] = None  # the file the values came from; None when there is none
    values: Dict[str, Any] = field(default_factory=dict)  # click parameter name -> converted value
    where: str = ""  # how its errors name it: "PATH: [tool.npu-migrate]" (or PATH for a file of ours)

    def error(self, key: str, message: str) -> str:
        """An error about the value of `key` found after the file was read (a format, a target
        version), said as validate() says its own."""
        return f"{self.where}: {key}: {message}"

    @property
    def folder(self) -> Optional[str]:
        return os.path.dirname(self.path) if self.path else None


def option_key(param: click.Parameter) -> Optional[str]:
    """`--fail-on` -> "fail-on": the key an option has in the configuration file."""
    longs = [o for o in getattr(param, "opts", ()) if o.startswith("--")]
    return longs[0][2:] if longs else None


def configurable_options(command: click.Command) -> Dict[str, click.Option]:
    keys: Dict[str, click.Option] = {}
    for param in command.params:
        key = option_key(param) if isinstance(param, click.Option) else None
        if key and key not in COMMAND_LINE_ONLY and key not in MODE_KEYS and key not in COMMAND_LINE_PATHS:
            keys[key] = cast(click.Option, param)
    return keys


def _read_bytes(path: str) -> bytes:
    from .source import SourceError, read_regular

    try:
        return read_regular(path, MAX_CONFIG_BYTES)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except SourceError as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None


def _read_toml(path: str, data: Optional[bytes] = None) -> Dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python < 3.11
        import tomli as tomllib
    if data is None:
        data = _read_bytes(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigError(f"{path}: not UTF-8 (line {line}), as TOML must be") from None
    try:
        return toml_data(text)  # (shared with the pins: the same pyproject.toml, parsed once)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None


def _table_of(data: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    tool = data.get("tool")
    if isinstance(tool, dict) and TABLE in tool:
        return tool[TABLE]
    return None


def find_pyproject(start: str) -> Optional[tuple]:
    """(path, table) of the nearest pyproject.toml at or above `start` with a [tool.npu-migrate] table."""
    folder = os.path.abspath(start)
    while True:
        candidate = os.path.join(folder, "pyproject.toml")
        if os.path.isfile(candidate):
            data = _read_bytes(candidate)
            if TABLE.encode() in data:  # else it is not ours to parse, valid or not
                table = _table_of(_read_toml(candidate, data))
                if table is not None:
                    return candidate, table
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def load_config(command: click.Command, ctx: click.Context, paths: Sequence[str],
                config_file: Optional[str] = None, isolated: bool = False,
                stdin_filename: Optional[str] = None) -> Config:
    """Find, read and validate the configuration that applies to this run."""
    if isolated:
        return Config()
    if config_file:
        path = os.path.abspath(config_file)
        data = _read_toml(path)
        table = _table_of(data)
        where = f"{path}: [tool.{TABLE}]"
        if table is None:
            # A pyproject.toml without our table configures nothing; any other file is ours entirely.
            table = {} if os.path.basename(path) == "pyproject.toml" else data
            where = path
    else:
        found = find_pyproject(common_folder(paths, stdin_filename))
        if found is None:
            return Config()
        path, table = found
        where = f"{path}: [tool.{TABLE}]"
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: expected a table of options, got {_toml_type(table)}")
    return Config(path, validate(table, command, ctx, where, os.path.dirname(path)), where)


def validate(table: Dict[str, Any], command: click.Command, ctx: click.Context, where: str,
             folder: str) -> Dict[str, Any]:
    """TOML values -> the values click would have produced from the command line."""
    options = configurable_options(command)
    values: Dict[str, Any] = {}
    for key, raw in table.items():
        if key in MODE_KEYS:
            raise ConfigError(f"{where}: {key}: the mode (--{', --'.join(MODE_KEYS)}) is chosen on the command "
                              "line, not in configuration; remove this key")
        if key in COMMAND_LINE_PATHS:
            raise ConfigError(f"{where}: {key}: the report file is named on the command line (-o FILE), not in "
                              "configuration, so that a plain run never writes a file; remove this key")
        param = options.get(key)
        if param is None:
            import difflib  # (only for an unknown key: a run does not load it)

            hint = difflib.get_close_matches(key.replace("_", "-"), list(options), n=1)
            extra = f" (did you mean {hint[0]!r}?)" if hint else ""
            raise ConfigError(f"{where}: unknown option {key!r}{extra}; known options: {', '.join(sorted(options))}")
        items = raw if param.multiple else [raw]
        if param.multiple and not isinstance(raw, list):
            raise ConfigError(f"{where}: {key}: expected a list, got {_toml_type(raw)}")
        converted = [_convert(item, param, ctx, where, key, folder) for item in items]
        values[param.name] = tuple(converted) if param.multiple else converted[0]
    return values


def _convert(value: Any, param: click.Option, ctx: click.Context, where: str, key: str, folder: str) -> Any:
    expected = _expected_type(param)
    if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
        names = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
        raise ConfigError(f"{where}: {key}: expected {names[expected]}, got {_toml_type(value)} {value!r}")
    if isinstance(param.type, click.Path) and isinstance(value, str) and not os.path.isabs(value):
        value = os.path.normpath(os.path.join(folder, value))
    try:
        return param.type.convert(value, param, ctx)
    except click.BadParameter as exc:
        raise ConfigError(f"{where}: {key}: {exc.message}") from None


def _expected_type(param: click.Option) -> type:
    if param.is_flag and param.is_bool_flag:
        return bool
    if isinstance(param.type, (click.types.IntParamType, click.IntRange)):
        return int
    if isinstance(param.type, (click.types.FloatParamType, click.FloatRange)):
        return float
    if isinstance(param.type, click.types.BoolParamType):
        return bool
    return str


def _toml_type(value: Any) -> str:
    for t, name in ((bool, "a boolean"), (int, "an integer"), (float, "a number"), (str, "a string"),
                    (list, "a list"), (dict, "a table")):
        if isinstance(value, t):
            return name
    return type(value).__name__


def apply(config: Config, ctx: click.Context, params: Dict[str, Any]) -> Dict[str, Any]:
    """`params` with every option not given on the command line taken from the configuration."""
    from click.core import ParameterSource

    merged = dict(params)
    for name, value in config.values.items():
        source = ctx.get_parameter_source(name)
        given = source not in (None, ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP)
        if not given:
            merged[name] = value
        elif name.startswith("extend_") and isinstance(value, tuple):
            merged[name] = value + tuple(params[name])
    return merged
