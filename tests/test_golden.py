"""Realistic GPU scripts in fixtures/pytorch/ against their reviewed NPU versions, byte for byte."""

from pathlib import Path

import pytest

from npu_migrate import migrate_source

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "pytorch"
CASES = sorted(p for p in FIXTURES.glob("*.py") if not p.name.endswith(".expected.py"))


def test_fixtures_exist():
    names = {p.stem for p in CASES}
    assert {"seed002_train", "imagenet_ddp_main", "amp_train", "alias_script"} <= names


@pytest.mark.parametrize("source", CASES, ids=[p.stem for p in CASES])
def test_golden(source):
    expected = source.with_name(source.stem + ".expected.py").read_text(encoding="utf-8")
    result = migrate_source(source.read_text(encoding="utf-8"), str(source))
    assert result.error is None
    assert result.new_text == expected


@pytest.mark.parametrize("source", CASES, ids=[p.stem for p in CASES])
def test_second_run_is_a_no_op(source):
    expected = source.with_name(source.stem + ".expected.py").read_text(encoding="utf-8")
    again = migrate_source(expected, str(source))
    assert again.error is None
    assert not again.changed and again.edits == []
