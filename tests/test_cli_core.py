"""The command line end to end: modes, exit codes, file fidelity."""

import os
import stat
import subprocess

GPU = b"import torch\n\nmodel = model.cuda()\n"
NPU = b"import torch\nimport torch_npu  # noqa: F401\n\nmodel = model.npu()\n"


def write(tmp_path, name, data: bytes, mode=None):
    p = tmp_path / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data)
    if mode is not None:
        p.chmod(mode)
    return p


def test_default_mode_reports_and_writes_nothing(tmp_path, run_cli):
    p = write(tmp_path, "train.py", GPU)
    r = run_cli("train.py", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert p.read_bytes() == GPU
    assert b"1 file scanned, 1 would be migrated, 0 unchanged, 0 failed." in r.stdout
    assert b"2 edits: NPU101 x1, NPU108 x1" in r.stdout


def test_write_rewrites_and_keeps_mode(tmp_path, run_cli):
    p = write(tmp_path, "train.py", GPU, mode=0o754)
    r = run_cli("train.py", "--write", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert p.read_bytes() == NPU
    assert stat.S_IMODE(p.stat().st_mode) == 0o754
    assert b"1 migrated" in r.stdout
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]
    again = run_cli("train.py", "--check", cwd=tmp_path)
    assert again.returncode == 0, again.stdout


def test_check_and_diff_exit_codes(tmp_path, run_cli):
    write(tmp_path, "train.py", GPU)
    write(tmp_path, "clean.py", b"import torch\n")
    assert run_cli("train.py", "--check", cwd=tmp_path).returncode == 1
    assert run_cli("clean.py", "--check", cwd=tmp_path).returncode == 0
    d = run_cli("train.py", "--diff", cwd=tmp_path)
    assert d.returncode == 1
    assert d.stdout.decode() == (
        "--- a/train.py\n+++ b/train.py\n@@ -1,3 +1,4 @@\n import torch\n+import torch_npu  # noqa: F401\n"
        " \n-model = model.cuda()\n+model = model.npu()\n"
    )
    assert run_cli("clean.py", "--diff", cwd=tmp_path).returncode == 0


def test_diff_applies_with_git_apply(tmp_path, run_cli):
    src = tmp_path / "proj"
    write(src, "pkg/train.py", GPU)
    write(src, "pkg/crlf.py", GPU.replace(b"\n", b"\r\n"))
    subprocess.run(["git", "init", "-q"], cwd=src, check=True)
    d = run_cli("pkg", "--diff", "--color", "always", cwd=src)
    # --color always colours a terminal-style diff; for a patch ask for plain output
    plain = run_cli("pkg", "--diff", "--color", "never", cwd=src)
    assert b"\x1b[" in d.stdout and b"\x1b[" not in plain.stdout
    (tmp_path / "p.diff").write_bytes(plain.stdout)
    subprocess.run(["git", "apply", str(tmp_path / "p.diff")], cwd=src, check=True)
    assert (src / "pkg/train.py").read_bytes() == NPU
    assert (src / "pkg/crlf.py").read_bytes() == NPU.replace(b"\n", b"\r\n")


def test_crlf_bom_and_gbk_cookie_are_preserved(tmp_path, run_cli):
    crlf = write(tmp_path, "crlf.py", GPU.replace(b"\n", b"\r\n"))
    bom = write(tmp_path, "bom.py", b"\xef\xbb\xbf" + GPU)
    gbk_src = "# -*- coding: gbk -*-\n# 把模型放到显卡上\nimport torch\nmodel = model.cuda()  # 移到GPU\n"
    gbk = write(tmp_path, "gbk.py", gbk_src.encode("gbk"))
    r = run_cli(".", "--write", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert crlf.read_bytes() == NPU.replace(b"\n", b"\r\n")
    assert bom.read_bytes() == b"\xef\xbb\xbf" + NPU
    assert gbk.read_bytes() == (
        "# -*- coding: gbk -*-\n# 把模型放到显卡上\nimport torch\nimport torch_npu  # noqa: F401\n"
        "model = model.npu()  # 移到GPU\n"
    ).encode("gbk")


def test_python2_file_is_reported_and_untouched_and_others_continue(tmp_path, run_cli):
    py2 = b"import torch\nprint 'hello'\nx = t.cuda()\n"
    bad = write(tmp_path, "a_py2.py", py2)
    good = write(tmp_path, "b_good.py", GPU)
    r = run_cli(".", "--write", cwd=tmp_path)
    assert r.returncode == 2
    assert bad.read_bytes() == py2
    assert good.read_bytes() == NPU
    lines = r.stdout.decode().splitlines()
    assert any(line.startswith("a_py2.py: cannot parse: ") for line in lines), lines
    assert "2 files scanned, 1 migrated, 0 unchanged, 1 failed." in lines


def test_a_non_python_file_named_on_the_command_line_says_it_was_read_as_python(tmp_path, run_cli):
    """A README.md given by hand goes to the Python engine: its parse error says so and names
    --known-files-only, which skips it; the file is untouched and the run exits 2."""
    readme = b"# Train on the GPU\n\n```python\nimport torch\nmodel = model.cuda()\n```\n"
    write(tmp_path, "README.md", readme)
    r = run_cli("README.md", "--write", cwd=tmp_path)
    assert r.returncode == 2
    assert (tmp_path / "README.md").read_bytes() == readme
    assert r.stdout.decode().splitlines()[0] == (
        "README.md: cannot parse: line 3:1: invalid syntax"
        " (a .md file named on the command line is read as Python; --known-files-only skips it)")
    skipped = run_cli("README.md", "--write", "--known-files-only", cwd=tmp_path)
    assert skipped.returncode == 0 and "cannot parse" not in skipped.stdout.decode()


def test_a_mistyped_command_names_the_command(tmp_path, run_cli):
    """`npu-migrate explian NPU301` is no path and close to a command: a usage error naming the
    command (exit 2), instead of "explian: no such file or directory"; a missing file stays that."""
    r = run_cli("explian", "NPU301", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (2, b"")
    assert r.stderr.decode() == ("npu-migrate: error: explian: no such file or directory, nor a command; "
                                 "did you mean `npu-migrate explain`?\nTry 'npu-migrate --help' for help.\n")
    r = run_cli("rehearsal", "train.py", cwd=tmp_path)
    assert "did you mean `npu-migrate rehearse`?" in r.stderr.decode() and r.returncode == 2
    r = run_cli("trian.py", cwd=tmp_path)
    assert (r.returncode, r.stderr.decode()) == (2, "npu-migrate: error: trian.py: no such file or directory\n")


def test_binary_and_bad_encoding_and_empty(tmp_path, run_cli):
    binary = write(tmp_path, "bin.py", b"\x00\x01cuda\x02")
    latin = write(tmp_path, "latin.py", b"x = '\xe9'.cuda()\n")
    empty = write(tmp_path, "empty.py", b"")
    r = run_cli(".", "--write", cwd=tmp_path)
    assert r.returncode == 2
    out = r.stdout.decode()
    assert "bin.py: binary file (contains NUL bytes)" in out
    assert "latin.py: cannot decode as utf-8" in out
    assert binary.read_bytes() == b"\x00\x01cuda\x02"
    assert latin.read_bytes() == b"x = '\xe9'.cuda()\n"
    assert empty.read_bytes() == b""


def test_missing_path_is_an_error(tmp_path, run_cli):
    r = run_cli("nope.py", cwd=tmp_path)
    assert r.returncode == 2
    assert b"nope.py: no such file or directory" in r.stderr


def test_directories_skip_virtualenvs_and_build(tmp_path, run_cli):
    write(tmp_path, "src/train.py", GPU)
    for skipped in (".venv/lib/x.py", "venv/y.py", "build/z.py", "__pycache__/w.py", ".git/v.py"):
        write(tmp_path, skipped, GPU)
    r = run_cli(".", "--write", cwd=tmp_path)
    assert r.returncode == 0
    assert b"1 file scanned" in r.stdout
    assert (tmp_path / "venv/y.py").read_bytes() == GPU


def test_python_m_and_version(run_cli, tmp_path):
    r = run_cli("--version", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.startswith(b"npu-migrate, version ")


def test_usage_errors_never_name_the_hidden_subcommand_and_have_one_style(tmp_path, run_cli):
    r = run_cli("--bogus", cwd=tmp_path)
    err = r.stderr.decode()
    assert r.returncode == 2
    assert "migrate migrate" not in err and "npu-migrate migrate" not in err
    assert err.startswith("npu-migrate: error: No such option '--bogus'"), err
    assert err.endswith("Try 'npu-migrate --help' for help.\n")
    assert "Error:" not in err and "Usage:" not in err
    helped = run_cli("--help", cwd=tmp_path).stdout.decode()
    assert helped.startswith("Usage: npu-migrate [OPTIONS] [PATHS]...\n"), helped[:200]
    r = run_cli("x.py", "--write", "--check", cwd=tmp_path)
    assert r.stderr.decode() == ("npu-migrate: error: --write cannot be combined with --diff or --check\n"
                                 "Try 'npu-migrate --help' for help.\n")
    # A count is "an integer" (click's IntRange called it "a valid integer range").
    r = run_cli("x.py", "-j", "abc", cwd=tmp_path)
    assert r.stderr.decode() == ("npu-migrate: error: Invalid value for '--jobs' / '-j': 'abc' is not a valid "
                                 "integer.\nTry 'npu-migrate --help' for help.\n")
    assert "  -j, --jobs INTEGER " in helped


def test_the_help_names_every_command_and_every_option_says_what_it_does():
    import click

    from npu_migrate.cli import main

    ctx = click.Context(main, info_name="npu-migrate")
    helped = main.commands["migrate"].get_help(click.Context(main.commands["migrate"], parent=ctx))
    for name in main.commands:
        if name != "migrate":  # the hidden default command is the one whose help this is
            assert f"`npu-migrate {name}" in helped, name
    for name, command in main.commands.items():
        for param in command.params:
            if isinstance(param, click.Option) and param.name != "help":
                assert param.help, f"npu-migrate {name} {param.opts[0]} has no help text"


def test_what_happens_to_files_is_one_writeback_value():
    """#27.4: the run's mode is a model.WriteBack (a str enum, so reports print its value), from
    the flags in one place, and the ModelArts folder defaults have one home (model.py) that the
    options, the command line and the ModelArts plan all read."""
    import re
    from pathlib import Path

    from npu_migrate.model import MODELARTS_DATA_DIR, WriteBack
    from npu_migrate.options import Options
    from npu_migrate.settings import Settings

    cases = {(): WriteBack.REPORT, ("write",): WriteBack.WRITE, ("show_diff",): WriteBack.DIFF,
             ("check",): WriteBack.CHECK}
    for flags, mode in cases.items():
        assert Settings(paths=("a.py",), **{f: True for f in flags}).mode is mode
    assert Settings(paths=("a.py",), output_dir="out").mode is WriteBack.OUTPUT_DIR
    assert Settings(paths=("-",)).mode is WriteBack.STDIN and Settings(paths=("-",), check=True).mode is WriteBack.CHECK
    assert [m for m in WriteBack if m.writes] == [WriteBack.WRITE, WriteBack.OUTPUT_DIR]
    assert f"{WriteBack.OUTPUT_DIR}" == str(WriteBack.OUTPUT_DIR) == "output-dir"
    assert Options().modelarts_data_dir == Settings().modelarts_data_dir == MODELARTS_DATA_DIR == "/cache/data"
    package = Path(__file__).resolve().parent.parent / "npu_migrate"
    homes = sorted(str(p.relative_to(package)) for p in package.rglob("*.py")
                   if re.search(r"[\"']/cache/(data|output)[\"']", p.read_text(encoding="utf-8"))
                   and "template" not in p.name)
    assert homes == ["model.py"]
    # ... and the modules that decide by the mode compare WriteBack values, not strings
    compared = sorted(str(p.relative_to(package)) for p in package.rglob("*.py")
                      if re.search(r"\bmode\b\)? *(==|!=|in) *\(?[\"'](report|diff|check|write|output-dir|stdin)[\"']", p.read_text(encoding="utf-8"))
                      and "standin" not in p.parts)
    assert compared == []
    from npu_migrate.report import RunReport
    from npu_migrate.rules import default_rules

    assert RunReport(results=[], rules=default_rules(), mode="check").mode is WriteBack.CHECK


def test_every_option_of_a_file_comes_from_one_place_with_one_default():
    """#27.4: each options.Options field is a Settings field of the same name (copied by name, not
    by a hand mapping), derived from other settings, or found in the project by the pipeline;
    a field of both has the same default; the derived ones follow their settings."""
    import dataclasses

    from npu_migrate.options import Options
    from npu_migrate.settings import DERIVED_OPTIONS, PROJECT_OPTIONS, SAME_OPTIONS, Settings
    from npu_migrate.targets import CannTarget, RunTargets, Target

    option_fields = {f.name: f for f in dataclasses.fields(Options)}
    setting_fields = {f.name: f for f in dataclasses.fields(Settings)}
    groups = [set(SAME_OPTIONS), set(DERIVED_OPTIONS), set(PROJECT_OPTIONS)]
    assert sorted(n for g in groups for n in g) == sorted(option_fields)  # each field in exactly one
    for name in SAME_OPTIONS:
        assert option_fields[name].default == setting_fields[name].default, name
    assert not (PROJECT_OPTIONS & set(setting_fields))  # nothing the project decides is an option
    given = Settings(paths=("a.py",), framework="tensorflow", data_args=["images"], modelarts_sync_every=5.0,
                     modelarts_entry=True, entries=("a.py",), no_import=True, npu_ops=True, cann_version="5.0")
    options = given.options()
    assert (options.framework, options.data_args, options.modelarts_sync_every, options.npu_ops) == (
        "tensorflow", ("images",), 5.0, True)
    assert (options.modelarts, options.modelarts_boot, options.add_import, options.targets) == (
        True, True, False, RunTargets.of(cann="5.0"))
    assert options.modelarts_entry_files == (os.path.abspath("a.py"),)
    assert Settings().options() == Options()
    # once cli.py has resolved the targets, the options carry that object (specs and reasons)
    resolved = RunTargets(torch=Target("2.1", "--torch-npu-version"), cann=CannTarget("5.0", "--cann-version"))
    assert dataclasses.replace(given, targets=resolved).options().targets is resolved



def test_the_runs_targets_have_one_name_from_the_command_line_to_the_report():
    """#27.3: the resolved targets (targets.RunTargets) are `targets` in Settings, Options and
    RunReport, and the report holds the object the command line resolved."""
    import dataclasses

    from npu_migrate.options import Options
    from npu_migrate.report import RunReport
    from npu_migrate.settings import Settings
    from npu_migrate.targets import RunTargets, Target

    for cls in (Settings, Options, RunReport):
        names = {f.name for f in dataclasses.fields(cls)}
        assert "targets" in names and "target" not in names, cls
    resolved = RunTargets(torch=Target("2.1", "--torch-npu-version"))
    settings = Settings(paths=("a.py",), targets=resolved)
    assert settings.options().targets is resolved

def test_every_name_the_package_exports_resolves():
    """The public API (`from npu_migrate import Options, migrate_source, ...`): each name of
    __all__ is the object of its home module (Options moved to options.py in 8e38773 and the
    package still looked for it in model.py)."""
    import npu_migrate
    from npu_migrate import dispatch, model, options

    homes = {"migrate_source": dispatch, "Options": options}
    for name in npu_migrate.__all__:
        assert getattr(npu_migrate, name) is getattr(homes.get(name, model), name), name


def test_the_command_line_and_the_settings_have_one_default_per_option():
    """#27.4: each option of the migrate command defaults to its Settings field's default (the
    string ones are read from Settings), so a default changed in one place changes everywhere."""
    import dataclasses

    from npu_migrate.cli import main
    from npu_migrate.settings import Settings

    defaults = {f.name: f.default for f in dataclasses.fields(Settings)}
    differ = []
    for param in main.params:
        default = param.default
        if default is None and (param.multiple or getattr(param, "is_flag", False)):
            default = () if param.multiple else False
        if isinstance(defaults[param.name], tuple):
            default = tuple(default or ())
        if default != defaults[param.name]:
            differ.append((param.name, default, defaults[param.name]))
    assert differ == []


def test_fail_on_without_check_is_a_usage_error_not_ignored(tmp_path, run_cli):
    """`npu-migrate src --fail-on warning` in a CI job exited 0 whatever it found: --fail-on acts
    only with --check, and was ignored in silence without it."""
    (tmp_path / "train.py").write_bytes(b"import torch\nmodel = torch.nn.DataParallel(model)\n")
    for args in (["--fail-on", "warning"], ["--diff", "--fail-on", "info"], ["-", "--fail-on", "error"],
                 ["--modelarts", "--fail-on", "warning"]):
        r = run_cli(*(["train.py"] if "-" not in args else []), *args, cwd=tmp_path, input=b"")
        assert r.returncode == 2
        assert r.stderr.decode() == ("npu-migrate: error: --fail-on only applies with --check\n"
                                     "Try 'npu-migrate --help' for help.\n")
    r = run_cli("train.py", "--check", "--fail-on", "error", cwd=tmp_path)
    assert r.returncode == 1 and "1 finding at or above error" in r.stderr.decode()
    # In the configuration it waits for a --check run and does not stop the others.
    (tmp_path / "pyproject.toml").write_text('[tool.npu-migrate]\nfail-on = "warning"\n')
    assert run_cli("train.py", cwd=tmp_path).returncode == 0


def test_an_entry_that_is_no_file_is_a_usage_error_not_ignored(tmp_path, run_cli):
    """`--modelarts --entry eval_typo.py` exited 0 and adapted nothing: the user believed the
    evaluation script adapted."""
    (tmp_path / "train.py").write_bytes(b"import torch\nx = torch.zeros(1).cuda()\n")
    for entry in ("eval_typo.py", "sub"):
        (tmp_path / "sub").mkdir(exist_ok=True)
        r = run_cli(".", "--modelarts", "--write", "--entry", "train.py", "--entry", entry, cwd=tmp_path)
        assert r.returncode == 2
        assert r.stderr.decode() == (f"npu-migrate: error: --entry {entry}: no such file\n"
                                     "Try 'npu-migrate --help' for help.\n")
        assert (tmp_path / "train.py").read_bytes() == b"import torch\nx = torch.zeros(1).cuda()\n"
    assert run_cli(".", "--modelarts", "--entry", "train.py", cwd=tmp_path).returncode == 0


def test_an_entry_outside_the_run_is_named(tmp_path, run_cli):
    """`npu-migrate model.py --modelarts-entry --entry train.py` migrated model.py only and wrote no
    boot file, in silence: the entry is not among the files of the run."""
    (tmp_path / "model.py").write_bytes(b"import torch\nx = torch.zeros(1).cuda()\n")
    (tmp_path / "train.py").write_bytes(b"import argparse\nargs = argparse.ArgumentParser().parse_args()\n")
    r = run_cli("model.py", "--modelarts-entry", "--entry", "train.py", "--write", cwd=tmp_path)
    assert r.returncode == 0
    assert r.stderr.decode().splitlines() == [
        "npu-migrate: warning: --entry train.py is not among the files of this run: it is not adapted "
        "(give its folder, or the file itself)"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.py", "train.py"]
    r = run_cli(".", "--modelarts-entry", "--entry", "train.py", "--write", cwd=tmp_path)
    assert "not among the files" not in r.stderr.decode()
    assert (tmp_path / "modelarts_entry_train.py").exists()


def test_a_modelarts_option_without_modelarts_is_a_usage_error_not_ignored(tmp_path, run_cli):
    """`--entry train.py` alone used to be ignored in silence: the user believed the script adapted."""
    (tmp_path / "train.py").write_bytes(b"import torch\nx = torch.zeros(1).cuda()\n")
    for args, message in (
            (["--entry", "train.py"], "--entry only applies with --modelarts (or --modelarts-entry)"),
            (["--data-arg", "images", "--modelarts-resume"],
             "--data-arg, --modelarts-resume only apply with --modelarts (or --modelarts-entry)"),
            (["--stdin-filename", "a.py"], "--stdin-filename only applies when the path is `-` (stdin)"),
            (["--modelarts", "--stdin-filename", "a.py"], "--stdin-filename only applies when the path is `-` (stdin)")):
        r = run_cli("train.py", "--write", *args, cwd=tmp_path)
        assert r.returncode == 2
        assert r.stderr.decode().splitlines()[0] == f"npu-migrate: error: {message}"
        assert (tmp_path / "train.py").read_bytes() == b"import torch\nx = torch.zeros(1).cuda()\n"
    # In the configuration the same settings are kept for ModelArts runs and do not stop a plain one.
    (tmp_path / "pyproject.toml").write_text('[tool.npu-migrate]\ndata-arg = ["images"]\nmodelarts-resume = true\n')
    r = run_cli("train.py", "--write", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "train.py").read_bytes() == (
        b"import torch\nimport torch_npu  # noqa: F401\nx = torch.zeros(1).npu()\n")
    # With --modelarts they are taken.
    assert run_cli("train.py", "--modelarts", "--entry", "train.py", cwd=tmp_path).returncode == 0
