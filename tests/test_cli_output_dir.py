"""`--output-dir OUT`: a migrated copy of the whole input tree; the input untouched."""

import json
import os
import stat
from pathlib import Path

GPU = b"import torch\n\nmodel = model.cuda()\n"
NPU = b"import torch\nimport torch_npu  # noqa: F401\n\nmodel = model.npu()\n"


def snapshot(root: Path) -> dict:
    """Every entry below root: bytes (or link target) and mode, without following links."""
    state = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = p.lstat()
            if p.is_symlink():
                state[str(p.relative_to(root))] = ("link", os.readlink(p))
            elif p.is_dir():
                state[str(p.relative_to(root))] = ("dir", stat.S_IMODE(st.st_mode))
            else:
                state[str(p.relative_to(root))] = (p.read_bytes(), stat.S_IMODE(st.st_mode), st.st_mtime_ns)
    return state


def make_project(root: Path, outside: Path) -> None:
    files = {
        "train.py": (GPU, 0o755),
        "models/net.py": (GPU.replace(b"\n\n", b"\n# a net\n"), 0o644),
        "models/clean.py": (b"import torch\nx = 1\n", 0o600),
        "configs/run.yaml": (b"device: cuda\n", 0o644),
        "data/weights.bin": (bytes(range(256)), 0o644),
        "README.md": (b"# project\n", 0o644),
        "gen/api_pb2.py": (b"# @generated\nimport torch\nx = t.cuda()\n", 0o644),
        "broken.py": (b"import torch\nprint 'py2'\nx = t.cuda()\n", 0o644),
        ".venv/lib/site.py": (GPU, 0o644),
        "scratch/tmp.py": (GPU, 0o644),
    }
    for name, (data, mode) in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        p.chmod(mode)
    (root / ".gitignore").write_text("scratch/\n")
    outside.mkdir(parents=True, exist_ok=True)
    (outside / "secret.py").write_bytes(GPU)
    (root / "link_out.py").symlink_to(outside / "secret.py")
    (root / "link_in.py").symlink_to("train.py")
    (root / "models_link").symlink_to("models", target_is_directory=True)


def test_output_dir_writes_a_migrated_copy_and_leaves_the_input_alone(tmp_path, run_cli):
    src = tmp_path / "proj"
    make_project(src, tmp_path / "elsewhere")
    before = snapshot(src)
    r = run_cli("proj", "--output-dir", "out", cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr  # broken.py cannot be parsed
    assert snapshot(src) == before, "the input must stay byte for byte as it was"

    out = tmp_path / "out"
    assert (out / "train.py").read_bytes() == NPU
    assert stat.S_IMODE((out / "train.py").stat().st_mode) == 0o755
    assert (out / "models/net.py").read_bytes() == NPU.replace(b"\n\n", b"\n# a net\n")
    for same in ("models/clean.py", "configs/run.yaml", "data/weights.bin", "README.md", "gen/api_pb2.py",
                 "broken.py", ".gitignore"):
        assert (out / same).read_bytes() == (src / same).read_bytes(), same
        assert stat.S_IMODE((out / same).stat().st_mode) == stat.S_IMODE((src / same).stat().st_mode), same
    # excluded and ignored: not copied
    assert not (out / ".venv").exists() and not (out / "scratch").exists()
    # links: inside ones reproduced (pointing into OUT), the one leading out left out
    assert os.readlink(out / "link_in.py") == "train.py"
    assert os.readlink(out / "models_link") == "models"
    assert not os.path.lexists(out / "link_out.py")
    assert "npu-migrate: warning: proj/link_out.py: symlink not copied: it leads out of the input" in r.stderr.decode()

    lines = r.stdout.decode().splitlines()
    assert lines[0].startswith("proj/broken.py: cannot parse: ")
    # configs/run.yaml is read too (MindSpore device settings are reported, YAML is never edited).
    assert "6 files scanned, 2 migrated, 2 unchanged, 1 skipped, 1 failed." in lines


def test_several_paths_keep_their_places_under_their_common_folder(tmp_path, run_cli):
    (tmp_path / "a").mkdir()
    (tmp_path / "a/train.py").write_bytes(GPU)
    (tmp_path / "b").mkdir()
    (tmp_path / "b/eval.py").write_bytes(GPU)
    (tmp_path / "b/other.py").write_bytes(GPU)
    r = run_cli("a", "b/eval.py", "--output-dir", "out", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert sorted(str(p.relative_to(tmp_path / "out")) for p in (tmp_path / "out").rglob("*.py")) == [
        "a/train.py", "b/eval.py"]
    assert (tmp_path / "out/b/eval.py").read_bytes() == NPU


def test_a_file_given_under_two_names_is_migrated_under_both(tmp_path, run_cli):
    # `link.py a.py --output-dir out`: the file is migrated once; out/a.py was the original
    # text beside a migrated out/link.py (a half-migrated copy), whichever name came first.
    (tmp_path / "src").mkdir()
    (tmp_path / "src/a.py").write_bytes(GPU)
    (tmp_path / "src/link.py").symlink_to("a.py")
    for order, out in ((("src/link.py", "src/a.py"), "out1"), (("src/a.py", "src/link.py"), "out2")):
        r = run_cli(*order, "--output-dir", out, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert r.stdout.decode().startswith("1 file scanned, 1 migrated, 0 unchanged, 0 failed.\n")
        assert {p.name: p.read_bytes() for p in (tmp_path / out).iterdir()} == {"a.py": NPU, "link.py": NPU}
    assert (tmp_path / "src/a.py").read_bytes() == GPU


def test_refusals(tmp_path, run_cli):
    src = tmp_path / "proj"
    (src / "sub").mkdir(parents=True)
    (src / "train.py").write_bytes(GPU)
    (tmp_path / "full").mkdir()
    (tmp_path / "full/keep.txt").write_text("mine")
    (tmp_path / "link_to_proj").symlink_to(src, target_is_directory=True)
    cases = [
        (["proj", "--output-dir", "proj/sub/out"], "--output-dir proj/sub/out is inside the input proj; choose a folder outside it"),
        (["proj", "--output-dir", "proj"], "--output-dir proj is inside the input proj; choose a folder outside it"),
        (["proj/sub", "--output-dir", "proj"], "the input proj/sub is inside --output-dir proj; choose another folder"),
        (["proj", "--output-dir", "link_to_proj/out"], "--output-dir link_to_proj/out is inside the input proj; choose a folder outside it"),
        (["proj", "--output-dir", "full"], "--output-dir full is not empty; nothing there is overwritten, choose an empty or new folder"),
        (["proj", "--output-dir", "out", "--write"], "--output-dir cannot be combined with --write, --diff or --check"),
    ]
    for args, message in cases:
        r = run_cli(*args, cwd=tmp_path)
        assert r.returncode == 2, args
        assert message in r.stderr.decode(), (args, r.stderr)
    assert (src / "train.py").read_bytes() == GPU
    assert sorted(os.listdir(src)) == ["sub", "train.py"]
    assert (tmp_path / "full/keep.txt").read_text() == "mine"
    # an empty folder is fine
    (tmp_path / "empty").mkdir()
    assert run_cli("proj", "--output-dir", "empty", cwd=tmp_path).returncode == 0
    assert (tmp_path / "empty/train.py").read_bytes() == NPU


def test_report_files_land_in_the_output_dir(tmp_path, run_cli):
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj/train.py").write_bytes(GPU)
    r = run_cli("proj", "--output-dir", "out", "--format", "json", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout == b""
    report = json.loads((tmp_path / "out/npu-migrate-report.json").read_text())
    assert report["mode"] == "output-dir" and report["summary"]["changed"] == 1
    # -o still decides when given
    r = run_cli("proj", "--output-dir", "out2", "--format", "json", "-o", "r.json", cwd=tmp_path)
    assert json.loads((tmp_path / "r.json").read_text())["summary"]["changed"] == 1
    assert sorted(os.listdir(tmp_path / "out2")) == ["train.py"]


def test_csv_report_files_land_in_the_output_dir(tmp_path, run_cli):
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj/train.py").write_bytes(GPU)
    r = run_cli("proj", "--output-dir", "out", "--format", "csv", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(tmp_path / "out")) == ["change_list.csv", "train.py", "unsupported_api.csv"]
    changes = (tmp_path / "out/change_list.csv").read_text().splitlines()
    assert changes[0] == "File,Start Line,End Line,Operation Type,Message"
    assert len(changes) == 3 and all(line.startswith("proj/train.py,") for line in changes[1:])
    # a report file never replaces a file of the input's copy
    (tmp_path / "proj/change_list.csv").write_text("mine\n")
    r = run_cli("proj", "--output-dir", "out2", "--format", "csv", cwd=tmp_path)
    assert r.returncode == 2
    assert "the report file change_list.csv would replace the input's own change_list.csv in out2" in r.stderr.decode()
    assert (tmp_path / "out2/change_list.csv").read_text() == "mine\n"


def test_csv_needs_a_folder(tmp_path, run_cli):
    (tmp_path / "train.py").write_bytes(GPU)
    r = run_cli("train.py", "--format", "csv", cwd=tmp_path)
    assert r.returncode == 2
    assert "--format csv writes several files: name a folder with -o, or use --output-dir" in r.stderr.decode()
    r = run_cli("train.py", "--format", "csv", "-o", "reports", cwd=tmp_path)
    assert r.returncode == 0 and sorted(os.listdir(tmp_path / "reports")) == ["change_list.csv", "unsupported_api.csv"]
