"""[tool.npu-migrate] in pyproject.toml: found like ruff finds its own, every option
settable, command line wins, bad keys and values are errors naming the key and the file."""

import json
from pathlib import Path

import click
import pytest
from helpers import invoke, tree_state

from npu_migrate.cli import migrate_command
from npu_migrate.config import (
    COMMAND_LINE_ONLY,
    COMMAND_LINE_PATHS,
    MODE_KEYS,
    ConfigError,
    configurable_options,
    validate,
)

GPU = "import torch\n\nmodel = model.cuda()\n"
DIFF_NO_IMPORT = (
    "--- a/train.py\n+++ b/train.py\n@@ -1,3 +1,3 @@\n import torch\n \n-model = model.cuda()\n+model = model.npu()\n"
)
DIFF_WITH_IMPORT = (
    "--- a/train.py\n+++ b/train.py\n@@ -1,3 +1,4 @@\n import torch\n+import torch_npu  # noqa: F401\n"
    " \n-model = model.cuda()\n+model = model.npu()\n"
)


def project(tmp_path: Path, config: str, where: str = "") -> Path:
    """tmp/pyproject.toml holding `config`, and tmp/a/b/train.py; returns tmp/a/b."""
    (tmp_path / where / "pyproject.toml").parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / where / "pyproject.toml").write_text(config)
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True, exist_ok=True)
    (deep / "train.py").write_text(GPU)
    return deep


def test_config_two_folders_up_is_used(tmp_path, run_cli):
    deep = project(tmp_path, '[tool.npu-migrate]\nno-import = true\n')
    r = run_cli("train.py", "--diff", cwd=deep)
    assert r.returncode == 1, r.stderr
    assert r.stdout.decode() == DIFF_NO_IMPORT
    # found from the paths given, not from the current folder
    r = run_cli(str(deep / "train.py"), "--diff", cwd=tmp_path.parent)
    assert b"import torch_npu" not in r.stdout


def test_command_line_wins(tmp_path, run_cli):
    deep = project(tmp_path, '[tool.npu-migrate]\nformat = "json"\ncolor = "always"\n')
    r = run_cli("train.py", cwd=deep)
    assert json.loads(r.stdout)["summary"]["changed"] == 1
    r = run_cli("train.py", "--format", "text", cwd=deep)
    assert r.stdout.decode().startswith("1 file scanned")


def test_the_command_line_wins_over_quiet_or_verbose_in_the_file(tmp_path, run_cli):
    """`quiet = true` in the file and `-v` for one run stopped with "--quiet and --verbose cannot be
    used together", two options of which the user typed one."""
    deep = project(tmp_path, "[tool.npu-migrate]\nquiet = true\n")
    assert run_cli("train.py", cwd=deep).stdout == b""
    r = run_cli("train.py", "-v", cwd=deep)
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().startswith("train.py:"), r.stdout  # every edit, then the summary
    assert b"1 file scanned" in r.stdout
    (tmp_path / "pyproject.toml").write_text("[tool.npu-migrate]\nverbose = true\n")
    r = run_cli("train.py", "-q", cwd=deep)
    assert (r.returncode, r.stdout) == (0, b"")
    r = run_cli("train.py", "-q", "-v", cwd=deep)
    assert r.returncode == 2 and b"--quiet and --verbose cannot be used together" in r.stderr


def test_pyproject_without_our_table_is_passed_over_and_the_nearest_table_wins(tmp_path, run_cli):
    deep = project(tmp_path, '[tool.npu-migrate]\nno-import = true\n')
    (tmp_path / "a" / "pyproject.toml").write_text('[project]\nname = "x"\n')
    assert run_cli("train.py", "--diff", cwd=deep).stdout.decode() == DIFF_NO_IMPORT
    # a nearer table wins outright; no merging with the outer one
    (tmp_path / "a" / "pyproject.toml").write_text('[tool.npu-migrate]\nfail-on = "error"\n')
    assert run_cli("train.py", "--diff", cwd=deep).stdout.decode() == DIFF_WITH_IMPORT


def test_isolated_ignores_configuration(tmp_path, run_cli):
    deep = project(tmp_path, '[tool.npu-migrate]\nno-import = true\n')
    assert run_cli("train.py", "--diff", "--isolated", cwd=deep).stdout.decode() == DIFF_WITH_IMPORT


def test_config_file_option(tmp_path, run_cli):
    deep = project(tmp_path, '[tool.npu-migrate]\nno-import = true\n')
    # a plain TOML file holds the keys at its top level
    (tmp_path / "npu.toml").write_text('format = "json"\n')
    r = run_cli("train.py", "--config", str(tmp_path / "npu.toml"), cwd=deep)
    assert json.loads(r.stdout)["summary"]["edits"] == 2  # the pyproject.toml (no-import) is not read
    r = run_cli("train.py", "--config", str(tmp_path / "npu.toml"), "--isolated", cwd=deep)
    assert r.returncode == 2
    assert b"--config and --isolated cannot be used together" in r.stderr


def test_paths_in_the_file_are_relative_to_it(tmp_path, run_cli):
    deep = project(tmp_path, '[tool.npu-migrate]\nrules = ["my_rules.toml"]\n')
    (tmp_path / "my_rules.toml").write_text("this is not toml [")
    r = run_cli("train.py", cwd=deep)
    assert r.returncode == 2
    assert str(tmp_path / "my_rules.toml").encode() in r.stderr


def test_excludes_in_the_file_are_relative_to_its_folder(tmp_path, run_cli):
    deep = project(tmp_path, '[tool.npu-migrate]\nextend-exclude = ["/a/b/gen/"]\n')
    (deep / "gen").mkdir()
    (deep / "gen" / "x.py").write_text(GPU)
    r = run_cli(".", cwd=deep)
    assert b"1 file scanned" in r.stdout
    # and the command line's --extend-exclude adds to the file's list instead of replacing it
    r = run_cli(".", "--extend-exclude", "train.py", cwd=deep)
    assert b"0 files scanned" in r.stdout


def test_stdin_uses_the_folder_of_stdin_filename(tmp_path, run_cli):
    deep = project(tmp_path, '[tool.npu-migrate]\nno-import = true\n')
    r = run_cli("-", "--stdin-filename", str(deep / "train.py"), input=GPU.encode(), cwd=tmp_path.parent)
    assert r.stdout.decode() == "import torch\n\nmodel = model.npu()\n"


@pytest.mark.parametrize(
    "config,message",
    [
        ('fail_on = "warning"', "unknown option 'fail_on' (did you mean 'fail-on'?); known options: "),
        ('stdin-filename = "x.py"', "unknown option 'stdin-filename'"),
        ("jobs = \"2\"", "jobs: expected an integer, got a string '2'"),
        ("jobs = true", "jobs: expected an integer, got a boolean True"),
        ("jobs = -1", "jobs: -1 is not in the range x>=0."),
        ('fail-on = "fatal"', "fail-on: 'fatal' is not one of 'error', 'warning', 'info'."),
        ('exclude = "legacy/"', "exclude: expected a list, got a string"),
        ("no-import = 1", "no-import: expected true or false, got an integer 1"),
        ("write = true", "write: the mode (--write, --diff, --check, --output-dir) is chosen on the command line, "
                         "not in configuration; remove this key\n"),
        ("extend-exclude = [1]", "extend-exclude: expected a string, got an integer 1"),
        # Values checked after the file is read (the renderers, the targets' tables) name it too, and
        # never an option the user did not type (was: "Invalid value for --format ... Try --help").
        ('format = "xml"', "format: unknown format 'xml'; choose from csv, github, html, json, markdown, sarif, "
                           "text\n"),
        ('torch-npu-version = "1.5"', "torch-npu-version: torch_npu 1.5 is not a release on PyPI that npu-migrate "
                                      "knows"),
        ('cann-version = "x"', "cann-version: CANN 'x' is not a CANN version (such as 5.0, 5.0.4, 8.0.RC2 or "
                               "20.1)\n"),
        ('mindspore-version = "bogus"', "mindspore-version: MindSpore 'bogus' is not a version (such as 2.2.14, "
                                        "2.7 or 1.10)\n"),
    ],
)
def test_bad_configuration_names_the_key_and_the_file(tmp_path, run_cli, config, message):
    deep = project(tmp_path, f"[tool.npu-migrate]\n{config}\n")
    r = run_cli("train.py", cwd=deep)
    assert r.returncode == 2
    err = r.stderr.decode()
    assert err.startswith(f"npu-migrate: error: {tmp_path / 'pyproject.toml'}: [tool.npu-migrate]: {message}"), err
    assert (deep / "train.py").read_text() == GPU


def test_invalid_toml_is_an_error_naming_the_file(tmp_path, run_cli):
    deep = project(tmp_path, "[tool.npu-migrate\n")
    r = run_cli("train.py", cwd=deep)
    assert r.returncode == 2
    assert r.stderr.decode().startswith(f"npu-migrate: error: {tmp_path / 'pyproject.toml'}: invalid TOML: ")


def _valid_value(param: click.Option):
    """A TOML value of the right type for `param`, as a user would write it."""
    if param.is_flag:
        value = False
    elif isinstance(param.type, click.Choice):
        value = param.type.choices[0]
    elif isinstance(param.type, (click.IntRange, click.types.IntParamType)):
        value = 1
    elif isinstance(param.type, (click.FloatRange, click.types.FloatParamType)):
        value = 1.5
    else:
        value = "x"
    return [value] if param.multiple else value


def test_every_option_of_the_command_is_settable():
    """The key list comes from the click command: a new option is configurable at once, and its
    type must be one the configuration file can express."""
    options = configurable_options(migrate_command)
    long_names = {o[2:] for p in migrate_command.params for o in getattr(p, "opts", ()) if o.startswith("--")}
    assert set(options) == long_names - COMMAND_LINE_ONLY - set(MODE_KEYS) - set(COMMAND_LINE_PATHS)
    assert {"fail-on", "exclude", "extend-exclude", "force-exclude", "no-import", "format"} <= set(options)
    ctx = click.Context(migrate_command)
    table = {key: _valid_value(param) for key, param in options.items()}
    values = validate(table, migrate_command, ctx, "pyproject.toml: [tool.npu-migrate]", ".")
    assert set(values) == {p.name for p in options.values()}
    with pytest.raises(ConfigError, match=r"^pyproject.toml: \[tool.npu-migrate\]: unknown option 'nope'"):
        validate({"nope": 1}, migrate_command, ctx, "pyproject.toml: [tool.npu-migrate]", ".")


@pytest.mark.parametrize("key", ["write", "diff", "check", "output-dir"])
def test_mode_keys_in_the_configuration_are_refused(tmp_path, run_cli, key):
    value = '"out"' if key == "output-dir" else "true"
    (tmp_path / "pyproject.toml").write_text(f"[tool.npu-migrate]\n{key} = {value}\n")
    (tmp_path / "train.py").write_text(GPU)
    for args in (["train.py"], ["train.py", "--check"]):
        r = run_cli(*args, cwd=tmp_path)
        assert r.returncode == 2
        assert r.stderr.decode() == (
            f"npu-migrate: error: {tmp_path / 'pyproject.toml'}: [tool.npu-migrate]: {key}: the mode (--write, "
            "--diff, --check, --output-dir) is chosen on the command line, not in configuration; remove this key\n")
        assert (tmp_path / "train.py").read_text() == GPU


@pytest.mark.parametrize("value", ["keep.py", "../../x.json", "report.json"])
def test_the_report_file_is_named_only_on_the_command_line(tmp_path, value):
    """`output-file` in a shared pyproject.toml made a plain report run replace a source
    file or write outside the project. It is refused; `-o` on the command line still works."""
    project = tmp_path / "a" / "b"
    project.mkdir(parents=True)
    (project / "pyproject.toml").write_text(f'[tool.npu-migrate]\noutput-file = "{value}"\n')
    (project / "keep.py").write_bytes(b"x = 1\n")
    (project / "train.py").write_text(GPU)
    before = tree_state(project)

    r = invoke([str(project / "train.py")], tmp_path / "cache")

    assert r.exit_code == 2
    assert r.output == (f"npu-migrate: error: {project / 'pyproject.toml'}: [tool.npu-migrate]: output-file: the "
                        "report file is named on the command line (-o FILE), not in configuration, so that a plain "
                        "run never writes a file; remove this key\n")
    assert tree_state(project) == before and not (tmp_path / "x.json").exists()
    (project / "pyproject.toml").write_text("[tool.npu-migrate]\nfail-on = \"warning\"\n")
    r = invoke([str(project / "train.py"), "-o", str(project / "report.json"), "--format", "json"], tmp_path / "cache")
    assert r.exit_code == 0, r.output
    assert json.loads((project / "report.json").read_text())
