"""The pre-commit hooks, run for real: a fresh git repository whose .pre-commit-config.yaml
names a snapshot of this checkout (the `checkout` fixture: the working tree as it is on disk,
committed), the hook failing on GPU code, then passing once the rewrite is there.

pre-commit builds a virtualenv and pip-installs the hooks' repository once per repo and rev
(~8 CPU-s), which is what makes this test slow: its runs share one environment. To keep it fast,
the dependency wheels are downloaded once into a wheelhouse outside the repository (keyed by the
dependency list and the Python version) and pip inside pre-commit installs from there without
asking the index. The snapshot holds the working tree, so this tests the code under test, in a
fresh CI clone as well as in a developer's checkout.
"""

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GPU = "import torch\n\nmodel = model.cuda()\n"
NPU = "import torch\nimport torch_npu  # noqa: F401\n\nmodel = model.npu()\n"

pytestmark = pytest.mark.slow


def _pre_commit() -> list:
    exe = shutil.which("pre-commit", path=os.path.dirname(sys.executable)) or shutil.which("pre-commit")
    if exe is None:
        pytest.fail("pre-commit is not installed: it is a test dependency (pip install -e '.[test]')")
    return [exe]


def _build_requirements() -> list:
    text = (ROOT / "pyproject.toml").read_text()
    return re.findall(r'"([^"]+)"', text.split("requires", 1)[1].split("]", 1)[0])


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory) -> Path:
    """Wheels of every dependency (and of the build backend), downloaded once per dependency set."""
    pyproject = (ROOT / "pyproject.toml").read_text()
    key = hashlib.sha256(f"{sys.version_info[:2]}{pyproject}".encode()).hexdigest()[:16]
    base = os.environ.get("NPU_MIGRATE_TEST_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "npu-migrate-tests")
    house = Path(base) / f"wheelhouse-{key}"
    if not (house / ".complete").exists():
        tmp = Path(str(house) + f".tmp{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        # `pip wheel .` fetches (or builds) a wheel of every runtime dependency; the build backend
        # is added on its own because build isolation installs it from the wheelhouse too.
        for args in ([str(ROOT)], _build_requirements()):
            done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--wheel-dir", str(tmp), *args],
                                  capture_output=True, text=True)
            if done.returncode != 0:
                shutil.rmtree(tmp, ignore_errors=True)
                last = (done.stderr.strip().splitlines() or ["no output"])[-1]
                pytest.skip(f"cannot download the dependency wheels (no network or no index?): {last}")
        for own in tmp.glob("npu_migrate-*.whl"):
            own.unlink()  # the package itself is always built from the checkout under test
        (tmp / ".complete").write_text("")
        try:
            tmp.rename(house)
        except OSError:  # another run won the race
            shutil.rmtree(tmp, ignore_errors=True)
    return house


@pytest.fixture(scope="session")
def checkout(tmp_path_factory) -> Path:
    """A committed snapshot of the working tree under test (tracked files as they are on disk, and
    new files not yet added). try-repo on the checkout itself would leave untracked files out, and
    other work in progress in a shared checkout could then break the installed package."""
    snap = tmp_path_factory.mktemp("checkout")
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        src = ROOT / name
        if src.is_file():
            (snap / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, snap / name)
    git(snap, "init", "-q")
    git(snap, "add", "-A")
    git(snap, "commit", "-q", "-m", "snapshot")
    return snap


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.email=t@example.com", "-c", "user.name=t", "-c", "commit.gpgsign=false",
                    *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def git_repo(tmp_path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    return repo


def pre_commit(args, repo: Path, wheelhouse: Path, home: Path):
    env = dict(os.environ)
    env.update(
        PRE_COMMIT_HOME=str(home),
        PIP_NO_INDEX="1",
        PIP_FIND_LINKS=str(wheelhouse),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        NO_COLOR="1",
    )
    for name in ("PIP_EXTRA_INDEX_URL", "PIP_INDEX_URL", "PIP_CONSTRAINT", "PIP_REQUIRE_VIRTUALENV"):
        env.pop(name, None)
    r = subprocess.run([*_pre_commit(), *args, "--color", "never"], cwd=repo, env=env, capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def test_hooks_fail_on_gpu_code_then_pass_after_the_rewrite(git_repo, checkout, wheelhouse, memory_tmp_path):
    (git_repo / "train.py").write_text(GPU)
    (git_repo / "notes.txt").write_text("model.cuda()\n")  # not a type the hooks take
    git(git_repo, "add", ".")

    # 1. Configured as users set it up (args passed through); one environment for all runs below
    #    (pre-commit builds one per repo and rev: a virtualenv and a pip install of the checkout,
    #    ~8 CPU-s; `try-repo` would build another in a store of its own from the same manifest).
    rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=checkout, capture_output=True, text=True).stdout.strip()
    (git_repo / ".pre-commit-config.yaml").write_text(
        "repos:\n"
        f"  - repo: {checkout}\n"
        f"    rev: {rev}\n"
        "    hooks:\n"
        "      - id: npu-migrate\n"
        "      - id: npu-migrate-check\n"
        "        args: [--extend-exclude, legacy/]\n"
    )
    git(git_repo, "add", ".")
    home = memory_tmp_path / "home"  # pre-commit's store: a clone, a virtualenv, an install (thousands of files)

    # 2. The rewriting hook on GPU code: it rewrites and fails the commit; a plain-text file it
    #    is passed is skipped (--known-files-only).
    code, out = pre_commit(["run", "npu-migrate", "--files", "train.py", "notes.txt"], git_repo, wheelhouse, home)
    assert code == 1, out
    assert re.search(r"^npu-migrate\.+Failed$", out, re.M), out
    assert "- files were modified by this hook" in out
    assert "1 file scanned, 1 migrated, 0 unchanged, 0 failed." in out
    assert (git_repo / "train.py").read_text() == NPU
    assert (git_repo / "notes.txt").read_text() == "model.cuda()\n"
    git(git_repo, "add", ".")
    code, out = pre_commit(["run", "--files", "train.py"], git_repo, wheelhouse, home)
    assert code == 0, out  # after the rewrite, both pass
    assert re.search(r"^npu-migrate\.+Passed$", out, re.M), out
    assert re.search(r"^npu-migrate \(check\)\.+Passed$", out, re.M), out

    # 3. The check hook fails on GPU code and changes nothing; legacy/ is excluded by its args
    #    although pre-commit names the file (--force-exclude is in the hook's entry).
    (git_repo / "legacy").mkdir()
    (git_repo / "legacy/old.py").write_text(GPU)
    (git_repo / "eval.py").write_text(GPU)
    git(git_repo, "add", ".")
    code, out = pre_commit(["run", "npu-migrate-check", "--files", "eval.py", "legacy/old.py", "train.py"],
                           git_repo, wheelhouse, home)
    assert code == 1, out
    assert re.search(r"^npu-migrate \(check\)\.+Failed$", out, re.M), out
    assert "2 files scanned, 1 would be migrated, 1 unchanged, 0 failed." in out
    assert "files were modified" not in out
    assert (git_repo / "eval.py").read_text() == GPU
    assert "npu-migrate: check failed: 1 file would be migrated (2 rewrites pending" in out  # why it fails
    code, out = pre_commit(["run", "npu-migrate-check", "--files", "legacy/old.py"], git_repo, wheelhouse, home)
    assert code == 0, out
    assert (git_repo / "legacy/old.py").read_text() == GPU

    # 4. The README's second snippet (a pinned clone), its two placeholders filled in as it says:
    #    a clone and a commit of it (the same repo and rev as above, so pre-commit reuses the
    #    environment it built). Dependency lists are checked too (a CUDA build of torch, at its
    #    --fail-on warning); README and other plain-text files the hooks receive are skipped.
    snippet = _readme_precommit_snippets()[1]
    config = re.sub(r"rev: \S+", f"rev: {rev}", snippet.replace("/path/to/npu-migrate", str(checkout)))
    assert config.count(str(checkout)) == 1 and rev in config
    (git_repo / ".pre-commit-config.yaml").write_text(config)
    (git_repo / "requirements.txt").write_text("torch==2.1.0+cu118\n")
    (git_repo / "README").write_text("Train with model.cuda() on the GPU.\n")
    git(git_repo, "add", ".")
    code, out = pre_commit(["run", "npu-migrate-check", "--files", "requirements.txt", "README", "train.py"],
                           git_repo, wheelhouse, home)
    assert code == 1, out
    assert "requirements.txt:1:1: NPU372 [warning]" in out
    assert "2 files scanned, 0 would be migrated, 2 unchanged, 0 failed." in out, out  # README skipped
    assert "README:" not in out, out
    assert "npu-migrate: check failed: 2 findings at or above warning:" in out

    # 5. With that snippet the rewriting hook rewrites GPU code and fails the commit.
    (git_repo / "serve.py").write_text(GPU)
    git(git_repo, "add", ".")
    code, out = pre_commit(["run", "--files", "serve.py"], git_repo, wheelhouse, home)
    assert code == 1, out
    assert re.search(r"^npu-migrate\.+Failed$", out, re.M), out
    assert (git_repo / "serve.py").read_text() == NPU


def _readme_precommit_snippets() -> list:
    """The yaml blocks of the README's pre-commit section, as a user copies them."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("### pre-commit\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```yaml\n(.*?)```", section, re.S)


def test_the_readmes_local_snippet_works_as_written(git_repo, tmp_path):
    """the README's snippet named a tag that did not exist and a placeholder repo.
    The first one is copied as it is (no placeholder), with npu-migrate installed where the
    commit runs (here: this interpreter's environment)."""
    snippet = _readme_precommit_snippets()[0]
    assert "<" not in snippet and "/path/to" not in snippet
    (git_repo / ".pre-commit-config.yaml").write_text(snippet)
    (git_repo / "train.py").write_text(GPU)
    git(git_repo, "add", ".")
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "home"), "NO_COLOR": "1",
           "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
           "NPU_MIGRATE_CACHE_DIR": str(tmp_path / "cache")}

    def run(*args):
        r = subprocess.run([*_pre_commit(), "run", *args, "--color", "never"], cwd=git_repo, env=env,
                           capture_output=True, text=True)
        return r.returncode, r.stdout + r.stderr

    code, out = run("npu-migrate", "--files", "train.py")
    assert code == 1, out
    assert re.search(r"^npu-migrate\.+Failed$", out, re.M) and "- files were modified by this hook" in out, out
    assert (git_repo / "train.py").read_text() == NPU
    git(git_repo, "add", ".")
    code, out = run("--files", "train.py")
    assert code == 0, out
    assert re.search(r"^npu-migrate \(check\)\.+Passed$", out, re.M), out
    (git_repo / "eval.py").write_text(GPU)
    git(git_repo, "add", ".")
    code, out = run("npu-migrate-check", "--files", "eval.py")
    assert code == 1 and "npu-migrate: check failed: 1 file would be migrated" in out, out
    assert (git_repo / "eval.py").read_text() == GPU
