"""`npu-migrate - --stdin-filename NAME`: code on stdout, report on stderr."""

GPU = b"import torch\n\nmodel = model.cuda()\n"
NPU = b"import torch\nimport torch_npu  # noqa: F401\n\nmodel = model.npu()\n"
DIFF = (
    b"--- a/train.py\n+++ b/train.py\n@@ -1,3 +1,4 @@\n import torch\n+import torch_npu  # noqa: F401\n"
    b" \n-model = model.cuda()\n+model = model.npu()\n"
)


def test_round_trip(tmp_path, run_cli):
    r = run_cli("-", "--stdin-filename", "train.py", input=GPU, cwd=tmp_path)
    assert r.returncode == 0
    assert r.stdout == NPU
    assert r.stderr.decode().splitlines() == [
        "1 file scanned, 1 migrated, 0 unchanged, 0 failed.",
        "Target: torch_npu 2.14 (the newest release: no torch or torch-npu pin found; a lower bound alone is none).",
        "2 edits: NPU101 x1, NPU108 x1",
    ]
    # what needs nothing comes back as it went in, byte for byte (CRLF, BOM)
    clean = b"\xef\xbb\xbfimport torch\r\nx = 1\r\n"
    r = run_cli("-", "--stdin-filename", "train.py", input=clean, cwd=tmp_path)
    assert (r.returncode, r.stdout) == (0, clean)
    assert not list(tmp_path.iterdir()), "stdin mode writes no file"


def test_crlf_input_keeps_crlf(tmp_path, run_cli):
    r = run_cli("-", "--stdin-filename", "train.py", input=GPU.replace(b"\n", b"\r\n"), cwd=tmp_path)
    assert r.stdout == NPU.replace(b"\n", b"\r\n")


def test_findings_go_to_stderr_with_the_given_name(tmp_path, run_cli):
    r = run_cli("-", "--stdin-filename", "src/train.py", "-v", input=GPU, cwd=tmp_path)
    assert r.stdout == NPU
    assert "src/train.py:3:15: NPU101 `.cuda()` -> `.npu()`: move to the NPU" in r.stderr.decode().splitlines()


def test_diff_and_check(tmp_path, run_cli):
    r = run_cli("-", "--stdin-filename", "train.py", "--diff", input=GPU, cwd=tmp_path)
    assert (r.returncode, r.stdout) == (1, DIFF)
    r = run_cli("-", "--stdin-filename", "train.py", "--diff", input=NPU, cwd=tmp_path)
    assert (r.returncode, r.stdout) == (0, b"")
    r = run_cli("-", "--stdin-filename", "train.py", "--check", input=GPU, cwd=tmp_path)
    assert (r.returncode, r.stdout) == (1, b"")
    assert b"1 would be migrated" in r.stderr
    assert r.stderr.endswith(b"npu-migrate: check failed: 1 file would be migrated (2 rewrites pending; run with "
                             b"--diff to see them)\n")
    r = run_cli("-", "--stdin-filename", "train.py", "--check", input=NPU, cwd=tmp_path)
    assert (r.returncode, r.stdout) == (0, b"")


def test_without_a_name(tmp_path, run_cli):
    r = run_cli("-", input=GPU, cwd=tmp_path)
    assert (r.returncode, r.stdout) == (0, NPU)


def test_force_exclude_applies_to_stdin_filename(tmp_path, run_cli):
    r = run_cli("-", "--stdin-filename", "build/train.py", "--force-exclude", input=GPU, cwd=tmp_path)
    assert (r.returncode, r.stdout, r.stderr) == (0, GPU, b"")
    r = run_cli("-", "--stdin-filename", "legacy/train.py", "--force-exclude", "--extend-exclude", "legacy/",
                "--check", input=GPU, cwd=tmp_path)
    assert (r.returncode, r.stdout) == (0, b"")
    # without --force-exclude the name is only a name
    r = run_cli("-", "--stdin-filename", "build/train.py", input=GPU, cwd=tmp_path)
    assert r.stdout == NPU


def test_generated_input_comes_back_unchanged(tmp_path, run_cli):
    gen = b"# @generated\n" + GPU
    r = run_cli("-", "--stdin-filename", "train.py", input=gen, cwd=tmp_path)
    assert (r.returncode, r.stdout) == (0, gen)
    assert b"1 skipped" in r.stderr


def test_unparsable_input_is_echoed_and_exits_2(tmp_path, run_cli):
    py2 = b"import torch\nprint 'x'\nx = t.cuda()\n"
    r = run_cli("-", "--stdin-filename", "train.py", input=py2, cwd=tmp_path)
    assert r.returncode == 2
    assert r.stdout == py2
    assert r.stderr.decode().startswith("train.py: cannot parse: ")
    undecodable = b"x = '\xe9'\n"
    r = run_cli("-", "--stdin-filename", "train.py", input=undecodable, cwd=tmp_path)
    assert (r.returncode, r.stdout) == (2, undecodable)
    assert r.stderr.decode().startswith("train.py: cannot decode as utf-8")


def test_stdin_cannot_mix_with_paths_or_output_dir(tmp_path, run_cli):
    (tmp_path / "a.py").write_bytes(GPU)
    r = run_cli("-", "a.py", input=GPU, cwd=tmp_path)
    assert r.returncode == 2 and b"`-` (stdin) cannot be mixed with other paths" in r.stderr
    r = run_cli("-", "--output-dir", "out", input=GPU, cwd=tmp_path)
    assert r.returncode == 2 and b"--output-dir needs paths, not stdin" in r.stderr


def test_stdin_goes_through_the_run_pipeline(tmp_path, run_cli):
    # --report-unused-ignores is a step of the one run (pipeline.run): stdin gets it as files do
    text = b"import torch\nx = 1  # npu-migrate: ignore\n"
    r = run_cli("-", "--stdin-filename", "train.py", "--report-unused-ignores", input=text, cwd=tmp_path)
    assert (r.returncode, r.stdout) == (0, text)
    assert ("train.py:2:8: NPU001 [warning] unused `# npu-migrate: ignore`: nothing is reported on this line "
            "-- Remove the comment.") in r.stderr.decode().splitlines()
    # the write back follows the mode: `- --write` prints the code and writes no file, not even
    # the one --stdin-filename names
    (tmp_path / "train.py").write_bytes(GPU)
    r = run_cli("-", "--stdin-filename", "train.py", "--write", input=GPU, cwd=tmp_path)
    assert (r.returncode, r.stdout) == (0, NPU)
    assert (tmp_path / "train.py").read_bytes() == GPU
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.py"]


def test_stdin_summary_says_migrated(tmp_path, run_cli):
    r = run_cli("-", "--stdin-filename", "train.py", input=GPU, cwd=tmp_path)
    assert r.returncode == 0
    assert r.stdout == NPU
    assert "1 file scanned, 1 migrated, 0 unchanged, 0 failed." in r.stderr.decode().splitlines()


def test_files_generated_beside_the_text_are_named_when_stdin_cannot_write_them(tmp_path, run_cli):
    """`npu-migrate - --stdin-filename train.py --modelarts` printed a script importing
    npu_migrate_modelarts, wrote no such module (stdin mode writes no file) and said nothing: the
    job died with ModuleNotFoundError. Each generated file missing or out of date is named."""
    script = (b"import argparse\n\nparser = argparse.ArgumentParser()\nparser.add_argument('--data_dir', default='d')\n"
              b"args = parser.parse_args()\n")
    r = run_cli("-", "--stdin-filename", "train.py", "--modelarts", input=script, cwd=tmp_path)
    assert r.returncode == 0
    assert b"from npu_migrate_modelarts import modelarts_setup" in r.stdout
    assert ("npu-migrate: warning: npu_migrate_modelarts.py (generated beside train.py) is not written from stdin: "
            "run npu-migrate on train.py with these options and --write to create it") in r.stderr.decode().splitlines()
    assert not list(tmp_path.iterdir()), "stdin mode writes no file"
    # Once the module is there as the run would write it, nothing is said.
    (tmp_path / "train.py").write_bytes(script)
    assert run_cli("train.py", "--modelarts", "--write", cwd=tmp_path).returncode == 0
    r = run_cli("-", "--stdin-filename", "train.py", "--modelarts", input=script, cwd=tmp_path)
    assert "not written from stdin" not in r.stderr.decode()
