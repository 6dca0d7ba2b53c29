"""File selection: default excludes, .gitignore (nested, git's precedence), --exclude /
--extend-exclude / --force-exclude, symlinks, non-Python files given by name."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import NPU

from npu_migrate.discovery import DEFAULT_EXCLUDES, FileFilter, discover

GPU = b"import torch\n\nmodel = model.cuda()\n"


def make(root: Path, *names: str, data: bytes = GPU) -> None:
    for name in names:
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)


def found(root: Path, *paths: str, force_exclude=False, **filter_args):
    """discover() from inside `root`, as the CLI does: paths relative, root = current folder."""
    old = os.getcwd()
    os.chdir(root)
    try:
        sel = discover(list(paths) or ["."], FileFilter(".", **filter_args), force_exclude=force_exclude)
    finally:
        os.chdir(old)
    return [os.path.normpath(f) for f in sel.files], sel


def test_default_excludes(tmp_path):
    skipped = [
        ".git/hooks/x.py", ".venv/lib/x.py", "venv/x.py", "build/x.py", "dist/x.py", "node_modules/x.py",
        "nb/.ipynb_checkpoints/x.py", "lib/site-packages/torch/x.py", "pkg/__pycache__/x.py", ".tox/x.py",
        "pkg.egg-info/x.py",
    ]
    make(tmp_path, "train.py", "pkg/model.py", *skipped)
    files, _ = found(tmp_path)
    assert files == [os.path.join("pkg", "model.py"), "train.py"]


def test_exclude_replaces_defaults_and_extend_exclude_keeps_them(tmp_path):
    make(tmp_path, "train.py", "build/gen.py", "legacy/old.py", "sub/legacy/old.py", "x_pb2.py")
    files, _ = found(tmp_path, exclude=["legacy/"])
    assert files == [os.path.join("build", "gen.py"), "train.py", "x_pb2.py"]
    files, _ = found(tmp_path, extend_exclude=["legacy/", "*_pb2.py"])
    assert files == ["train.py"]
    # anchored: only the top-level legacy/ folder
    files, _ = found(tmp_path, extend_exclude=["/legacy"])
    assert files == [os.path.join("sub", "legacy", "old.py"), "train.py", "x_pb2.py"]


def test_gitignore_nested_with_gits_precedence(tmp_path):
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / ".gitignore").write_text("*_gen.py\nout/\n/top_only.py\n")
    make(tmp_path, "a_gen.py", "out/x.py", "top_only.py", "keep.py",
         "sub/top_only.py", "sub/b_gen.py", "sub/keep_gen.py", "sub/local.py", "sub/deeper/c.py")
    # the deeper file decides: it re-includes keep_gen.py and ignores local.py and deeper/
    (tmp_path / "sub/.gitignore").write_text("!keep_gen.py\nlocal.py\ndeeper/\n")
    # .git/info/exclude counts too
    (tmp_path / ".git/info").mkdir(parents=True, exist_ok=True)
    (tmp_path / ".git/info/exclude").write_text("private.py\n")
    make(tmp_path, "private.py")
    files, _ = found(tmp_path)
    assert files == ["keep.py", os.path.join("sub", "keep_gen.py"), os.path.join("sub", "top_only.py")]
    # git agrees
    listed = subprocess.run(["git", "ls-files", "--others", "--exclude-standard"], cwd=tmp_path,
                            capture_output=True, text=True, check=True).stdout.split()
    assert sorted(f for f in listed if f.endswith(".py")) == ["keep.py", "sub/keep_gen.py", "sub/top_only.py"]


def test_nothing_comes_back_below_an_ignored_folder(tmp_path):
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / ".gitignore").write_text("data/\n!data/keep.py\n")
    make(tmp_path, "data/keep.py", "train.py")
    files, _ = found(tmp_path)
    assert files == ["train.py"]


def test_gitignore_of_the_repository_applies_to_a_subfolder_run(tmp_path):
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / ".gitignore").write_text("generated/\n")
    make(tmp_path, "src/generated/x.py", "src/train.py")
    files, _ = found(tmp_path / "src")
    assert files == ["train.py"]


def test_no_respect_gitignore(tmp_path):
    (tmp_path / ".gitignore").write_text("ignored.py\n")
    make(tmp_path, "ignored.py", "train.py")
    assert found(tmp_path)[0] == ["train.py"]
    assert found(tmp_path, respect_gitignore=False)[0] == ["ignored.py", "train.py"]


def test_explicit_files_are_taken_unless_force_exclude(tmp_path):
    (tmp_path / ".gitignore").write_text("ignored.py\n")
    make(tmp_path, "ignored.py", "build/gen.py", "legacy/old.py", "train.py")
    paths = ("ignored.py", "build/gen.py", "legacy/old.py", "train.py")
    files, sel = found(tmp_path, *paths, extend_exclude=["legacy/"])
    assert files == [os.path.normpath(p) for p in paths]
    files, sel = found(tmp_path, *paths, force_exclude=True, extend_exclude=["legacy/"])
    assert files == ["train.py"]
    assert sel.skipped == [("ignored.py", "ignored by .gitignore"), ("build/gen.py", "excluded"),
                           ("legacy/old.py", "excluded")]


def test_a_folder_given_by_name_is_walked_even_if_excluded(tmp_path):
    make(tmp_path, "build/gen.py", "build/sub/more.py", "build/__pycache__/x.py")
    files, _ = found(tmp_path, "build")
    assert files == [os.path.join("build", "gen.py"), os.path.join("build", "sub", "more.py")]
    files, sel = found(tmp_path, "build", force_exclude=True)
    assert files == [] and sel.skipped == [("build", "excluded")]


def test_symlinks_are_never_followed_out_of_the_tree(tmp_path):
    outside = tmp_path / "outside"
    make(outside, "secret.py", "pkg/lib.py")
    tree = tmp_path / "tree"
    make(tree, "train.py")
    (tree / "link_file.py").symlink_to(outside / "secret.py")
    (tree / "link_dir").symlink_to(outside / "pkg", target_is_directory=True)
    (tree / "inner_link.py").symlink_to(tree / "train.py")
    (tree / "dangling.py").symlink_to(tmp_path / "missing.py")
    files, sel = found(tree)
    assert files == ["train.py"] and not sel.errors


def test_symlink_loops_and_fifos_do_not_hang(tmp_path, fifo):
    make(tmp_path, "a/train.py")
    (tmp_path / "a/loop").symlink_to(tmp_path / "a", target_is_directory=True)
    (tmp_path / "a/self.py").symlink_to(tmp_path / "a/self.py")
    (tmp_path / "a/ping").symlink_to(tmp_path / "a/pong")
    (tmp_path / "a/pong").symlink_to(tmp_path / "a/ping")
    fifo(tmp_path / "a/pipe.py")  # reading it would block for ever (the fixture fails the test then)
    files, _ = found(tmp_path)
    assert files == [os.path.join("a", "train.py")]


def test_each_file_once_even_through_different_spellings(tmp_path):
    make(tmp_path, "pkg/train.py")
    files, _ = found(tmp_path, "pkg/train.py", "./pkg/train.py", "pkg", ".")
    assert files == [os.path.join("pkg", "train.py")]


def test_missing_path_is_an_error_and_the_rest_still_runs(tmp_path, run_cli):
    make(tmp_path, "train.py")
    r = run_cli("missing.py", "train.py", "--write", cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.decode().splitlines()[0] == "npu-migrate: error: missing.py: no such file or directory"
    assert b"1 file scanned, 1 migrated" in r.stdout


def test_script_in_another_language_given_by_name_is_skipped(tmp_path, run_cli):
    """pre-commit selects files by shebang too; a script no front end takes is not Python."""
    script = b"#!/usr/bin/env perl\nmy $dev = 'cuda:0';\n"
    make(tmp_path, "convert", data=script)
    make(tmp_path, "tool", data=b"#!/usr/bin/env python3\nimport torch\nx = torch.zeros(1).cuda()\n")
    r = run_cli("convert", "tool", "-v", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (tmp_path / "convert").read_bytes() == script
    assert b"1 file scanned, 1 would be migrated" in r.stdout
    assert b"tool:3:20: NPU101" in r.stdout
    assert "convert: skipped: not a Python file (#!perl)" in r.stderr.decode().splitlines()


def test_excluded_and_ignored_files_are_untouched_by_write(tmp_path, run_cli):
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / ".gitignore").write_text("scratch/\n")
    make(tmp_path, "train.py", "scratch/t.py", "venv/lib.py", "legacy/old.py")
    r = run_cli(".", "--write", "--extend-exclude", "legacy/", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert b"1 file scanned, 1 migrated" in r.stdout
    for untouched in ("scratch/t.py", "venv/lib.py", "legacy/old.py"):
        assert (tmp_path / untouched).read_bytes() == GPU
    # pre-commit style: names given explicitly, excludes still apply with --force-exclude
    r = run_cli("legacy/old.py", "scratch/t.py", "--write", "--force-exclude", "--extend-exclude", "legacy/",
                "-v", cwd=tmp_path)
    assert r.returncode == 0
    assert (tmp_path / "legacy/old.py").read_bytes() == GPU
    assert (tmp_path / "scratch/t.py").read_bytes() == GPU
    assert r.stderr.decode().splitlines() == [
        "legacy/old.py: skipped: excluded",
        "scratch/t.py: skipped: ignored by .gitignore",
        # -v ends with the run's work counts: nothing was parsed, both files were left out
        "npu-migrate: work: 0 of 0 files parsed; 0 Python parses, 0 whole libcst parses, 0 partial libcst "
        "parses, 0 tree walks, 0 tree transforms, 0 code generations, 0 parses of migrated text",
    ]


def test_generated_files_are_reported_as_skipped(tmp_path, run_cli):
    gen = b"# @generated by protoc\nimport torch\nx = torch.zeros(1).cuda()\n"
    make(tmp_path, "model_gen.py", data=gen)
    make(tmp_path, "train.py")
    r = run_cli(".", "--write", cwd=tmp_path)
    assert (tmp_path / "model_gen.py").read_bytes() == gen
    assert b"2 files scanned, 1 migrated, 0 unchanged, 1 skipped, 0 failed." in r.stdout
    r = run_cli(".", "-v", cwd=tmp_path)
    assert "model_gen.py: skipped: generated" in r.stderr.decode().splitlines()


def test_folder_walk_takes_what_the_front_ends_claim(tmp_path):
    make(tmp_path, "train.py", "nb.ipynb", "run.sh", "requirements.txt", "README.md", "setup.cfg", "LICENSE")
    make(tmp_path, "launch", data=b"#!/usr/bin/env bash\npython train.py\n")
    make(tmp_path, "notes", data=b"#!/usr/bin/env perl\n")
    files, _ = found(tmp_path)
    assert files == ["launch", "nb.ipynb", "requirements.txt", "run.sh", "train.py"]


def test_an_empty_or_mistyped_folder_is_said_and_can_fail(tmp_path, run_cli):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("x\n")
    r = run_cli("empty", "--check", cwd=tmp_path)
    assert r.returncode == 0
    assert r.stderr.decode() == "npu-migrate: warning: no files to migrate under empty\n"
    r = run_cli("empty", "--check", "--fail-on-empty", cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.decode() == "npu-migrate: error: no files to migrate under empty\n"
    (tmp_path / "pyproject.toml").write_text("[tool.npu-migrate]\nfail-on-empty = true\n")
    assert run_cli("empty", "--check", cwd=tmp_path).returncode == 2


def test_the_hooks_pass_dependency_lists_and_skip_other_text_files(tmp_path, run_cli):
    """What pre-commit hands the hooks (.pre-commit-hooks.yaml: python, jupyter, shell,
    pyproject, plain-text): requirements files and pyproject.toml are checked, README and
    notes are skipped, not parsed as Python (tests/test_precommit.py runs pre-commit itself)."""
    hooks = (Path(__file__).resolve().parent.parent / ".pre-commit-hooks.yaml").read_text()
    assert hooks.count("types_or: [python, jupyter, shell, pyproject, plain-text]") == 2
    assert hooks.count("--force-exclude --known-files-only\n") == 2
    (tmp_path / "requirements-gpu.txt").write_text("torch==2.1.0+cu118\n")
    (tmp_path / "README").write_text("Train with model.cuda() on the GPU.\n")
    (tmp_path / "notes.txt").write_text("model.cuda()\n")
    (tmp_path / "train.py").write_bytes(NPU)
    r = run_cli("--check", "--force-exclude", "--known-files-only", "--fail-on", "warning", "-v",
                "requirements-gpu.txt", "README", "notes.txt", "train.py", cwd=tmp_path)
    assert r.returncode == 1, r.stderr.decode()
    out, err = r.stdout.decode(), r.stderr.decode()
    assert "requirements-gpu.txt:1:1: NPU372 [warning] `torch==2.1.0+cu118` selects a CUDA build" in out, out
    assert "2 files scanned, 0 would be migrated, 2 unchanged, 0 failed." in out.splitlines(), out
    assert "README: skipped: not a kind of file npu-migrate migrates" in err.splitlines(), err
    assert "notes.txt: skipped: not a kind of file npu-migrate migrates" in err.splitlines(), err


@pytest.fixture
def opened(monkeypatch):
    """The absolute paths this process opens while the test runs (builtins/io.open, os.open);
    clear it after writing the test's own files."""
    import builtins
    import io

    paths: list = []
    real_open, real_os_open = builtins.open, os.open

    def spy_open(file, *args, **kwargs):
        paths.append(os.path.abspath(os.fspath(file)) if isinstance(file, (str, bytes, os.PathLike)) else file)
        return real_open(file, *args, **kwargs)

    def spy_os_open(path, *args, **kwargs):
        paths.append(os.path.abspath(os.fspath(path)))
        return real_os_open(path, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", spy_open)
    monkeypatch.setattr(io, "open", spy_open)
    monkeypatch.setattr(os, "open", spy_os_open)
    return paths


def test_no_walk_of_the_project_reads_a_file_under_an_excluded_folder(tmp_path, opened):
    """#27.7: one Project per run (discovery.project_of): the targets' look at the project's
    scripts and the ModelArts scan around an entry script walk it as discovery does, so a file
    under a folder --extend-exclude names is never opened; without the option it is read (the
    CANN target comes from it), so the spy sees what the walks read."""
    from helpers import cli_in_process

    (tmp_path / "train.py").write_text("import tensorflow as tf\nsess = tf.Session()\nsess.run(tf.no_op())\n")
    old = tmp_path / "old"
    old.mkdir()
    (old / "run.sh").write_text("source /usr/local/Ascend/ascend-toolkit/20.1/set_env.sh\npython ../train.py\n")
    (old / "obs_copy.py").write_text("import moxing as mox\nmox.file.copy_parallel('obs://a', '/cache/a')\n")

    def under_old():
        return sorted({os.path.relpath(p, tmp_path) for p in opened if isinstance(p, str)
                       and p.startswith(str(old) + os.sep)})

    opened.clear()  # the files the test wrote are not the run's reads
    r = cli_in_process("train.py", "--no-cache", "--modelarts", "--extend-exclude", "old/", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert under_old() == []
    assert "CANN 20.1" not in (r.stdout + r.stderr).decode()
    opened.clear()
    r = cli_in_process("train.py", "--no-cache", "--modelarts", cwd=tmp_path)  # the walks do look there
    assert "Target: CANN 20.1 (the CANN install path 20.1 in old/run.sh)." in (r.stdout + r.stderr).decode()
    assert {"old/obs_copy.py", "old/run.sh"} <= set(under_old())


def test_the_modelarts_scan_never_opens_a_sibling_that_exclude_names(tmp_path, opened):
    """A file --extend-exclude names beside the given script is never opened, also by the
    ModelArts scan's look for a training script beside a utility (modelarts/project.py): its
    note then says nothing of the excluded trainer; without the option the trainer is read and
    the utility is noted as one."""
    from helpers import cli_in_process

    (tmp_path / "prepare.py").write_text("import torch\n\nif __name__ == '__main__':\n    print(torch.zeros(1).cuda())\n")
    (tmp_path / "trainer.py").write_text(
        "import torch\n\nif __name__ == '__main__':\n    loss = torch.ones(1, requires_grad=True).sum()\n"
        "    loss.backward()\n")
    trainer = str(tmp_path / "trainer.py")
    note = "prepare.py is not adapted for ModelArts"

    opened.clear()  # the files the test wrote are not the run's reads
    r = cli_in_process("prepare.py", "--no-cache", "--modelarts", "--extend-exclude", "trainer.py", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert trainer not in opened
    assert note not in r.stderr.decode()
    opened.clear()
    r = cli_in_process("prepare.py", "--no-cache", "--modelarts", cwd=tmp_path)  # the scan does read it
    assert r.returncode == 0, r.stderr
    assert trainer in opened
    assert note in r.stderr.decode()


def test_a_line_of_a_gitignore_that_is_no_pattern_is_skipped_as_git_skips_it(tmp_path):
    # 'a\' (a trailing backslash) and '!' alone are no patterns: pathspec raises on them, git
    # skips the line; the walk crashed on the whole folder before.
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / ".gitignore").write_text("gen\\\n!\n*_gen.py\n")
    make(tmp_path, "a_gen.py", "keep.py", "gen\\")
    files, _ = found(tmp_path)
    assert files == ["keep.py"]
    listed = subprocess.run(["git", "ls-files", "--others", "--exclude-standard"], cwd=tmp_path,
                            capture_output=True, text=True, check=True).stdout.split()
    assert sorted(f for f in listed if f.endswith(".py")) == ["keep.py"]


def test_an_exclude_option_that_is_no_pattern_is_a_usage_error(tmp_path, run_cli):
    make(tmp_path, "train.py")
    for config, args, pattern in (("", ["--extend-exclude", "a\\"], "'a\\\\'"),
                                  ("[tool.npu-migrate]\nexclude = ['!']\n", [], "'!'")):
        (tmp_path / "pyproject.toml").write_text(config)
        r = run_cli(".", *args, cwd=tmp_path)
        assert r.returncode == 2
        assert r.stderr.decode().splitlines()[0] == (
            f"npu-migrate: error: invalid exclude pattern {pattern}: not a gitignore pattern "
            "(a trailing backslash, or '!' alone)")
        assert r.stdout == b""
    assert (tmp_path / "train.py").read_bytes() == GPU


# -- gitignore specs matched as pathspec matches them (discovery.SimpleSpec, GlobSpec) ----------

SIMPLE_PATTERNS = list(DEFAULT_EXCLUDES) + [
    "build", "/build", "/build/", "*.pyc", "*_pb2.py", "bench/.cache/", "a/b", "/a/b/", "x.y/", ".hidden",
    "*.egg-info", "node_modules", "# a comment", "", "c++/", "my-pkg_1.0/",
]
NOT_SIMPLE = ["!keep.py", "a*b.py", "**/build", "build/**", "dir/*.py", "[ab].py", "x?.py", "trailing ", "a\\ b",
              "\\#hash", ".", "..", "../x", "*", "*/", "/", "a//b", "*.", "build/ # no comment"]
PATHS = [
    "build", "build/", "a/build", "a/build/", "a/build/x.py", "build/x.py", "abuild/", "build2/", "x/abuild",
    "bench/.cache/", "bench/.cache", "bench/.cache/f.py", "x/bench/.cache/", "bench/.cachex/", "bench/",
    "foo.egg-info/", "foo.egg-info", "a/foo.egg-info/b.py", ".egg-info/", "egg-info/",
    "x.pyc", "d/x.pyc", "x.pyc/", "x.pyc/y.py", "pyc", ".pyc",
    "m_pb2.py", "sub/m_pb2.py", "_pb2.py", "m_pb2.pyi", "m_pb2.py/",
    "a/b", "a/b/", "a/b/c", "x/a/b", "a/bc", "ab/",
    ".git/", "a/.git/", "a/.git/x", ".gitignore", ".github/", ".venv", ".venv/", "x.y/", "x.y", "xy/",
    ".hidden", "a/.hidden/", "c++/", "c++/x.py", "my-pkg_1.0/", "node_modules", "node_modules/z.js",
    "src/__pycache__/", "src/__pycache__/m.cpython-311.pyc", "site-packages/", "lib/site-packages/t/x.py",
    "Build/", "a/Build/x.py", "B.PYC", "A/b",  # (case matters, as in git)
]


def _pathspec_verdicts(lines):
    import pathspec

    spec = pathspec.GitIgnoreSpec.from_lines(lines)
    return [(spec.match_file(p), spec.check_file(p).include) for p in PATHS]


def test_simple_gitignore_specs_match_as_pathspec_does():
    """Every simple pattern alone, and all together (with and without the default excludes),
    against every path: the same answer as pathspec's GitIgnoreSpec (match_file, and the
    check_file verdict the .gitignore chain reads)."""
    from npu_migrate.discovery import SimpleSpec

    for lines in [[p] for p in SIMPLE_PATTERNS] + [SIMPLE_PATTERNS, SIMPLE_PATTERNS[len(DEFAULT_EXCLUDES):]]:
        simple = SimpleSpec.of(lines)
        assert simple is not None, lines
        assert [(simple.match_file(p), simple.check_file(p).include) for p in PATHS] == _pathspec_verdicts(lines), lines
    for line in NOT_SIMPLE:
        assert SimpleSpec.of(["build/", line]) is None, line


# Lines of real .gitignore files (kornia's, git's own documentation) and every construct of a
# line: `**` before, inside and after; `!`; ranges (negated, with `]` first, unclosed, reversed);
# escapes; trailing and escaped spaces; `/` alone; `*/`; `**/`.
GLOB_PATTERNS = SIMPLE_PATTERNS + NOT_SIMPLE + [
    "*/**/__pycache__", "*/**/*.pyc", "*/**/*~", "*~", "*.sw[op]", ".eggs/*", ".coverage*", "*bak",
    "*ipynb_checkpoints*", "docs/source/_static/*jpg", "!docs/source/_static/img/models/*.jpg", "/PR.md",
    ".venv-py*/", "**/foo", "**/foo/bar", "abc/**", "a/**/b", "a/**/**/b", "**", "**/", "*/**", "!/", "!b/",
    "!*.py", "!a/b", "!", "a\\", "[!a]*.py", "[^a].py", "[]a].py", "[a-c]/", "x[", "a\\*", "a\\ ", "\\!x", "x ",
    "a/*/b/", "?", "??/", "a?c", "doc/frotz/", "frotz/", "/*.c", "foo/**/", "**/bar/**", "b/*",
]
GLOB_PATHS = PATHS + [
    "a", "b", "b/", "ab", "a/c/b", "a/c/d/b/", "a/x/y/b", "foo", "foo/", "x/foo", "x/foo/bar", "foo/bar/",
    "abc/", "abc/x", "abc/x/y/", "docs/source/_static/a.jpg", "docs/source/_static/img/models/m.jpg",
    "docs/source/_static/img/m.jpg", "k/__pycache__/", "k/l/__pycache__/", "__pycache__/", "k/x.pyc", "x.pyc",
    ".coverage", ".coverage.1", "t.bak", "x.swp", "x.swo", "x.swx", "x~", "d/x~", ".venv-py3/", "PR.md", "d/PR.md",
    "aa.py", "ba.py", "].py", "c/", "a*", "a ", "!x", "x", "x/", "a/y/b/", "a/y/b/z", "q", "qq/", "acc", "abc",
    "doc/frotz/", "a/doc/frotz/", "frotz/x", "x.c", "d/x.c", "bar/", "x/bar/y", "./b/", "/b/x.py",
]


def test_glob_specs_match_as_pathspec_does():
    """Every line alone, and all together, against every path: the same verdicts as pathspec's
    GitIgnoreSpec (match_file, and the check_file verdict the .gitignore chain reads), and the
    same lines refused (ValueError: a trailing backslash, `!` alone)."""
    from npu_migrate.discovery import GlobSpec

    def verdicts(spec):
        return [(spec.match_file(p), spec.check_file(p).include) for p in GLOB_PATHS]

    import pathspec

    valid = []
    for lines in [[p] for p in GLOB_PATTERNS]:
        try:
            expected = verdicts(pathspec.GitIgnoreSpec.from_lines(lines))
        except ValueError:
            with pytest.raises(ValueError):
                GlobSpec.of(lines)
            continue
        valid += lines
        assert verdicts(GlobSpec.of(lines)) == expected, lines
    assert len(valid) == len(GLOB_PATTERNS) - 2  # ('!' and 'a\\'; 'a\\ b' is valid: the space is escaped)
    for lines in (valid, valid[::-1], valid[len(DEFAULT_EXCLUDES):]):
        assert verdicts(GlobSpec.of(lines)) == verdicts(pathspec.GitIgnoreSpec.from_lines(lines))


def test_generated_glob_specs_match_as_pathspec_does():
    """Specs of 1-4 lines made of gitignore's pieces at random (seeded: the same ones every run),
    each against 20 paths of names that may match them: pathspec's verdicts, and pathspec's
    refusals. A range that is no regular expression (`[z-a]`: pathspec raises re.error, which
    crashed the walk) is a line that is no pattern here."""
    import random
    import re
    import warnings

    import pathspec

    from npu_migrate.discovery import GlobSpec

    rng = random.Random(24)
    pieces = ["a", "b", "ab", ".", "*", "**", "?", "/", "!", "[ab]", "[!a]", "[^b]", "[]a]", "[a-c]", "[b-a]",
              "\\", "\\*", " ", "#", "x.py", "-", "[", "]"]
    names = ["a", "b", "ab", "ba", "x.py", "c", ".a", "*", "a b", "a*", "abc", "[ab]", "!", "#x", "b.py"]
    compared = refused = 0
    for _ in range(800):
        lines = ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 5))) for _ in range(rng.randint(1, 4))]
        paths = ["/".join(rng.choice(names) for _ in range(rng.randint(1, 4))) + rng.choice(["", "/"])
                 for _ in range(20)]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                expected = pathspec.GitIgnoreSpec.from_lines(lines)
        except (ValueError, re.error):
            with pytest.raises(ValueError):
                GlobSpec.of(lines)
            refused += 1
            continue
        ours = GlobSpec.of(lines)
        for p in paths:
            assert (ours.match_file(p), ours.check_file(p).include) == (
                expected.match_file(p), expected.check_file(p).include), (lines, p)
            compared += 1
    assert compared > 10000 and refused > 20


@pytest.mark.slow
def test_a_run_never_imports_pathspec(tmp_path):
    import json as _json

    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text("__pycache__/\n*.pyc\n/out/\n# generated\ngen/x/\n", encoding="utf-8")
    for rel in ("train.py", "out/a.py", "gen/x/b.py", "gen/y/c.py", "pkg/__pycache__/d.py", "build/e.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("import torch\nx = torch.ones(1).cuda()\n", encoding="utf-8")
    code = ("import json, sys\nfrom npu_migrate.cli import main\ntry:\n    main(['.', '--check', '--no-cache', "
            "'--format', 'json'] + sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            "print(json.dumps('pathspec' in sys.modules), file=sys.stderr)\n")
    runs = {}
    for extra in ([], ["--extend-exclude", "gen/y/**"]):  # `**`: a GlobSpec's, no SimpleSpec's
        done = subprocess.run([sys.executable, "-c", code, *extra], cwd=tmp_path, capture_output=True, text=True)
        files = sorted(r["path"] for r in _json.loads(done.stdout)["files"])
        runs[bool(extra)] = (files, _json.loads(done.stderr.splitlines()[-1]))
    assert runs[False] == (["gen/y/c.py", "train.py"], False)
    assert runs[True] == (["train.py"], False)
