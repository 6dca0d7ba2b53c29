"""`--modelarts-entry`: the generated ModelArts boot file, through the command line and executed.

The boot file runs the adapted training script in a subprocess; `python -m pip` resolves to a fake
pip written into tmp_path (it records its arguments), MoXing to tests/fake_moxing.
"""

from __future__ import annotations

import ast
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from npu_migrate.dispatch import migrate_source
from npu_migrate.options import Options
from npu_migrate.modelarts import BOOT_MARKER, black_format, render_boot
from helpers import CEILING, read_until
from test_modelarts_run import NEVER

ROOT = Path(__file__).resolve().parent.parent
BEFORE = ROOT / "fixtures" / "modelarts" / "before"
FAKE_MOXING = Path(__file__).resolve().parent / "fake_moxing"
LAUNCHER_VARS = ("RANK", "RANK_ID", "OMPI_COMM_WORLD_RANK", "WORLD_SIZE", "RANK_SIZE", "LOCAL_RANK", "DEVICE_ID",
                 "VC_TASK_INDEX", "MA_VJ_NAME", "TORCHELASTIC_RUN_ID", "PYTHONPATH")


def adapt_as_entry(tmp_path, script, text):
    """`text` adapted as `--modelarts-entry --entry script` does (in-process), written with its
    generated files; returns the result."""
    options = Options(modelarts=True, modelarts_boot=True, modelarts_entry_files=(str(script),),
                      modelarts_data_dir=str(tmp_path / "cache/data"))
    result = migrate_source(text, str(script), options)
    script.write_text(result.new_text)
    for path, generated in result.extra_files.items():
        Path(path).write_text(generated)
    return result


@pytest.fixture
def code(tmp_path):
    """A code folder with the module-level fixture as train.py, adapted as --modelarts-entry does
    (in-process: the command line's part is tested below)."""
    folder = tmp_path / "code"
    folder.mkdir()
    result = adapt_as_entry(tmp_path, folder / "train.py", (BEFORE / "train_module_level.py").read_text())
    assert sorted(result.extra_files) == [str(folder / "modelarts_entry_train.py"), str(folder / "npu_migrate_modelarts.py")]
    return folder


def boot(tmp_path, folder, *args, wait=True):
    fake_pip = tmp_path / "fakepip" / "pip"
    fake_pip.mkdir(parents=True, exist_ok=True)
    (fake_pip / "__init__.py").write_text("")
    (fake_pip / "__main__.py").write_text(
        "import os, sys\n"
        "with open(os.environ['FAKE_PIP_LOG'], 'a') as log:\n"
        "    log.write(' '.join(sys.argv[1:]) + '\\n')\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS}
    env.update(PYTHONPATH=os.pathsep.join([str(fake_pip.parent), str(FAKE_MOXING)]),
               FAKE_OBS_ROOT=str(tmp_path / "obs"), FAKE_PIP_LOG=str(tmp_path / "pip.log"), RANK_SIZE="1")
    command = [sys.executable, str(folder / "modelarts_entry_train.py"), *args]
    # ModelArts starts the boot file from another folder.
    if not wait:
        return subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
    return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=CEILING)


def put(tmp_path, url, files):
    for name, text in files.items():
        path = tmp_path / "obs" / url[len("obs://"):] / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def listing(tmp_path, url):
    folder = tmp_path / "obs" / url[len("obs://"):]
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


@pytest.mark.slow
def test_boot_file_runs_the_script_with_every_argument(tmp_path, code):
    (code / "requirements.txt").write_text("easydict\n")
    put(tmp_path, "obs://bucket/corpus", {"a.txt": "a b c"})
    done = boot(tmp_path, code, "--data_url=obs://bucket/corpus", "--train_url=obs://bucket/out",
                "--epochs=2", "--platform_flag=1")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "pip.log").read_text() == f"install -r {code / 'requirements.txt'}\n"
    assert f"read 3 words from {tmp_path / 'cache/data'}\n" in done.stdout
    assert "[modelarts-entry] RANK_SIZE=1\n" in done.stdout
    assert "[modelarts-entry] train.py ended with status 0\n" in done.stdout
    assert listing(tmp_path, "obs://bucket/out") == ["epoch0.ckpt", "epoch1.ckpt"]
    # The script ran in the code folder (its relative paths are relative to it).
    assert (code / "checkpoints" / "epoch1.ckpt").exists()


@pytest.mark.slow
def test_no_requirements_file_no_pip(tmp_path, code):
    put(tmp_path, "obs://bucket/corpus", {"a.txt": "a"})
    done = boot(tmp_path, code, "--data_url=obs://bucket/corpus")
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "pip.log").exists()


@pytest.mark.slow
def test_the_scripts_exit_status_is_the_boot_files(tmp_path, code):
    put(tmp_path, "obs://bucket/corpus", {"a.txt": "a"})
    done = boot(tmp_path, code, "--data_url=obs://bucket/corpus", "--train_url=obs://bucket/out", "--crash")
    assert done.returncode == 1
    assert "RuntimeError: diverged" in done.stderr
    assert listing(tmp_path, "obs://bucket/out") == ["epoch0.ckpt"]  # copied by the script


@pytest.mark.slow
def test_sigterm_reaches_the_script_which_copies_its_outputs(tmp_path, code):
    put(tmp_path, "obs://bucket/corpus", {"a.txt": "a"})
    proc = boot(tmp_path, code, "--data_url=obs://bucket/corpus", "--train_url=obs://bucket/out", f"--hold={NEVER}",
                wait=False)
    read_until(proc, "checkpoint saved\n")
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=CEILING)
    assert proc.returncode == 128 + signal.SIGTERM
    assert listing(tmp_path, "obs://bucket/out") == ["epoch0.ckpt"]
    assert stderr.count("[modelarts] copying") == 2  # the data in, the outputs out: by the script
    assert "[modelarts-entry] copying" not in stdout


@pytest.mark.slow
def test_outputs_of_a_script_that_dies_hard_are_copied_by_the_boot_file(tmp_path, code):
    script = code / "train.py"
    script.write_text(script.read_text().replace('raise RuntimeError("diverged")', "os.kill(os.getpid(), 9)"))
    put(tmp_path, "obs://bucket/corpus", {"a.txt": "a"})
    done = boot(tmp_path, code, "--data_url=obs://bucket/corpus", "--train_url=obs://bucket/out", "--crash")
    assert done.returncode == 128 + 9
    assert "[modelarts-entry] copying the outputs of train.py\n" in done.stdout
    assert listing(tmp_path, "obs://bucket/out") == ["epoch0.ckpt"]


def test_diff_shows_the_new_boot_file_and_the_patch_applies(tmp_path, run_cli):
    folder = tmp_path / "repo"
    folder.mkdir()
    (folder / "train.py").write_text((BEFORE / "train_helper.py").read_text())
    subprocess.run(["git", "init", "-q"], cwd=folder, check=True)
    done = run_cli("train.py", "--modelarts-entry", "--entry", "train.py", "--diff", cwd=folder)
    assert done.returncode == 1
    patch = done.stdout.decode()
    assert "--- /dev/null\n+++ b/modelarts_entry_train.py\n@@ -0,0 +1," in patch
    assert done.stderr.decode().endswith("modelarts_entry_train.py: would be created\n"
                                         "npu_migrate_modelarts.py: would be created\n")
    assert "--- /dev/null\n+++ b/npu_migrate_modelarts.py\n@@ -0,0 +1," in patch
    assert not (folder / "modelarts_entry_train.py").exists()
    subprocess.run(["git", "apply"], input=patch.encode(), cwd=folder, check=True)
    assert (folder / "modelarts_entry_train.py").read_text() == render_boot("train.py")
    # Applied: a second run has nothing left to do.
    again = run_cli("train.py", "--modelarts-entry", "--entry", "train.py", "--check", cwd=folder)
    assert (again.returncode, again.stdout) == (0, b"1 file scanned, 0 would be migrated, 1 unchanged, 0 failed.\n")


def test_a_boot_file_of_the_users_is_never_overwritten(tmp_path, run_cli):
    folder = tmp_path / "code"
    folder.mkdir()
    (folder / "train.py").write_text((BEFORE / "train_helper.py").read_text())
    mine = "# my own launcher\nimport os\nos.execv('/bin/true', ['true'])\n"
    (folder / "modelarts_entry_train.py").write_text(mine)
    done = run_cli("train.py", "--modelarts-entry", "--entry", "train.py", "--write", cwd=folder)
    assert done.returncode == 0
    assert ("npu-migrate: warning: modelarts_entry_train.py: not written: a file of that name exists and "
            "npu-migrate did not generate it\n") in done.stderr.decode()
    assert (folder / "modelarts_entry_train.py").read_text() == mine


def test_an_outdated_generated_boot_file_is_updated(tmp_path, run_cli):
    folder = tmp_path / "code"
    folder.mkdir()
    (folder / "train.py").write_text((BEFORE / "train_helper.py").read_text())
    (folder / "modelarts_entry_train.py").write_text(render_boot("train.py").replace("RANK_TABLE_FILE", "OLD"))
    done = run_cli("train.py", "--modelarts-entry", "--entry", "train.py", "--write", "-q", cwd=folder)
    assert (done.returncode, done.stderr) == (0, b"")
    assert (folder / "modelarts_entry_train.py").read_text() == render_boot("train.py")


def test_output_dir_gets_the_boot_file_and_the_input_stays_as_it_was(tmp_path, run_cli):
    (tmp_path / "src").mkdir()
    original = (BEFORE / "train_helper.py").read_text()
    (tmp_path / "src" / "train.py").write_text(original)
    done = run_cli("src", "--output-dir", "out", "--modelarts-entry", "--entry", "src/train.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr.decode().endswith(f"{os.path.join('out', 'modelarts_entry_train.py')}: created\n"
                                         f"{os.path.join('out', 'npu_migrate_modelarts.py')}: created\n")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "modelarts_entry_train.py", "npu_migrate_modelarts.py", "train.py"]
    assert (tmp_path / "out" / "modelarts_entry_train.py").read_text() == render_boot("train.py")
    assert [p.name for p in (tmp_path / "src").iterdir()] == ["train.py"]
    assert (tmp_path / "src" / "train.py").read_text() == original


def test_modelarts_entry_needs_entry(tmp_path, run_cli):
    (tmp_path / "train.py").write_text("print(1)\n")
    done = run_cli("train.py", "--modelarts-entry", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.decode() == ("npu-migrate: error: --modelarts-entry needs --entry FILE: the boot file runs that "
                                    "script\nTry 'npu-migrate --help' for help.\n")


def test_boot_file_is_black_python_3_7_standard_library_and_shell_free():
    text = render_boot("train.py")
    assert text.startswith(BOOT_MARKER + "\n")
    assert black_format(text) == text
    tree = ast.parse(text, feature_version=(3, 7))
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert imported - set(sys.stdlib_module_names) == {"npu_migrate_modelarts"}  # generated beside it
    assert "shell=" not in text and "os.system" not in text and "os.popen" not in text
    assert 'TRAINING_SCRIPT = "train.py"' in text and "{script}" not in text
    assert re.search(r"for train\.py, generated by", text)


@pytest.mark.slow
def test_a_script_of_a_package_runs_from_the_folder_holding_the_package(tmp_path):
    """basicsr/train.py runs `from basicsr.data import ...` and is run by hand as
    `PYTHONPATH=. python basicsr/train.py -opt options/x.yml` from the project's top: its boot
    file starts it there (its relative arguments resolve, requirements.txt is the top's), with
    the top on PYTHONPATH (before: ModuleNotFoundError: No module named 'proj')."""
    top = tmp_path / "code"
    package = top / "proj"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "data.py").write_text("def read(path):\n    with open(path) as f:\n        return f.read().split()\n")
    (top / "options").mkdir()
    (top / "options" / "x.yml").write_text("epochs: 2\n")
    (top / "requirements.txt").write_text("pyyaml\n")
    script = package / "train.py"
    script.write_text(
        "import argparse\n"
        "import os\n\n"
        "from proj.data import read\n\n\n"
        "def main():\n"
        "    parser = argparse.ArgumentParser()\n"
        "    parser.add_argument('-opt', required=True)\n"
        "    parser.add_argument('--data_dir', default='datasets')\n"
        "    args = parser.parse_args()\n"
        "    print('options', read(args.opt), flush=True)\n"
        "    os.makedirs('experiments', exist_ok=True)\n"
        "    with open('experiments/model.pth', 'w') as f:\n"
        "        f.write(str(len(os.listdir(args.data_dir))))\n\n\n"
        "if __name__ == '__main__':\n"
        "    main()\n")
    result = adapt_as_entry(tmp_path, script, script.read_text())
    boot_text = result.extra_files[str(package / "modelarts_entry_train.py")]
    assert 'IMPORT_ROOT = ".."\n' in boot_text and "RUNS_IN_IMPORT_ROOT = True\n" in boot_text
    put(tmp_path, "obs://bucket/corpus", {"a.txt": "a"})
    env_folder = package  # boot() runs folder/modelarts_entry_train.py
    done = boot(tmp_path, env_folder, "--data_url=obs://bucket/corpus", "--train_url=obs://bucket/out",
                "-opt=options/x.yml")
    assert done.returncode == 0, done.stderr
    assert "options ['epochs:', '2']\n" in done.stdout
    assert (tmp_path / "pip.log").read_text() == f"install -r {top / 'requirements.txt'}\n"
    assert (top / "experiments" / "model.pth").read_text() == "1"
    assert listing(tmp_path, "obs://bucket/out") == ["experiments/model.pth"]


def test_a_script_beside_no_package_runs_in_its_own_folder(code):
    assert 'IMPORT_ROOT = ""\n' in (code / "modelarts_entry_train.py").read_text()


@pytest.mark.slow
def test_a_package_script_that_imports_a_module_beside_it_barely_runs_in_its_own_folder(tmp_path):
    """mindarmour's examples/privacy/diff_privacy/lenet5_dp.py imports `examples.common...` and
    `lenet5_config` (beside it, by its bare name): it runs with its own folder on sys.path, so the
    runtime is imported bare like its config, and the boot file runs it in its folder with the
    folder holding `examples` on PYTHONPATH."""
    top = tmp_path / "code"
    here = top / "examples" / "dp"
    here.mkdir(parents=True)
    for folder in (top / "examples", here):
        (folder / "__init__.py").write_text("")
    (top / "examples" / "common.py").write_text("NAME = 'lenet'\n")
    (here / "dp_config.py").write_text("DATA = 'local.txt'\n")
    (here / "local.txt").write_text("read beside the script\n")
    script = here / "train.py"
    script.write_text(
        "import argparse\n\n"
        "from examples.common import NAME\n"
        "from dp_config import DATA\n\n"
        "if __name__ == '__main__':\n"
        "    parser = argparse.ArgumentParser()\n"
        "    parser.add_argument('--data_dir', default='datasets')\n"
        "    args = parser.parse_args()\n"
        "    print(NAME, open(DATA).read(), end='', flush=True)\n")
    result = adapt_as_entry(tmp_path, script, script.read_text())
    assert "from npu_migrate_modelarts import modelarts_setup  # npu-migrate: ModelArts\n" in result.new_text
    boot_text = result.extra_files[str(here / "modelarts_entry_train.py")]
    assert 'IMPORT_ROOT = "../.."\n' in boot_text and "RUNS_IN_IMPORT_ROOT = False\n" in boot_text
    put(tmp_path, "obs://bucket/corpus", {"a.txt": "a"})
    done = boot(tmp_path, here, "--data_url=obs://bucket/corpus")
    assert done.returncode == 0, done.stderr
    assert "lenet read beside the script\n" in done.stdout
