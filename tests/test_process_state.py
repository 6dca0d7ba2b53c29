"""What one run leaves behind in the process that ran it (#27.7): a program that calls
npu-migrate in its own process keeps its signal handlers, and the rule set is built once per
process for the same rule files (and again when a file changes)."""

from __future__ import annotations

import signal

from helpers import GPU, invoke

from npu_migrate.rules import load_rules


def test_an_in_process_run_gives_back_the_callers_sigterm_handler(tmp_path):
    (tmp_path / "train.py").write_bytes(GPU)

    def callers_handler(signum, frame):  # pragma: no cover - never called
        pass

    before = signal.signal(signal.SIGTERM, callers_handler)
    try:
        result = invoke([str(tmp_path / "train.py"), "--write"], tmp_path / "cache")
        assert result.exit_code == 0, result.output
        assert signal.getsignal(signal.SIGTERM) is callers_handler
    finally:
        signal.signal(signal.SIGTERM, before)


def test_the_rule_set_is_built_once_per_process_for_the_same_files(tmp_path):
    extra = tmp_path / "mine.toml"
    extra.write_text('[[code]]\ncode = "NPU499"\ntitle = "mine"\n')
    first = load_rules([extra])
    assert load_rules([extra]) is first
    assert load_rules() is load_rules()
    assert load_rules() is not first

    extra.write_text(extra.read_text().replace("mine", "yours"))
    changed = load_rules([extra])
    assert changed is not first
    assert (first.docs["NPU499"].title, changed.docs["NPU499"].title) == ("mine", "yours")
