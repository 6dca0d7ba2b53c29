"""logical_lines.py: a file's logical lines told from its text, the scan the text checks before
Python's parse share (engine._outside_definitions_frameworks, engine._text_imports,
prefilter._docstring_spans; their own tests are in test_work_budget.py and test_prefilter.py)."""

from __future__ import annotations

import ast
import warnings

import pytest

from npu_migrate.logical_lines import Unreadable, fstring_read, logical_lines


def _lines(text):
    return [(text[start:end], text[begin:finish] if begin >= 0 else None)
            for start, end, begin, finish in logical_lines(text)]


def test_each_logical_line_with_the_string_standing_alone_on_it():
    text = ('"""Doc."""\nimport torch\n\nx = (1,\n     2)  # c\n# alone\ny = 1; \\\n  z = 2\n'
            "    r'''a\nb'''  # c\ns = 'x'\nb'no'\nf'no'\n'a' 'b'\n'''last'''")
    assert _lines(text) == [
        ('"""Doc."""\n', '"""Doc."""'), ("import torch\n", None), ("\n", None), ("x = (1,\n     2)  # c\n", None),
        ("# alone\n", None), ("y = 1; \\\n  z = 2\n", None), ("    r'''a\nb'''  # c\n", "r'''a\nb'''"),
        ("s = 'x'\n", None), ("b'no'\n", None), ("f'no'\n", None), ("'a' 'b'\n", None), ("'''last'''", "'''last'''"),
    ]
    assert _lines("") == [("", None)] and _lines("x\n") == [("x\n", None), ("", None)]


@pytest.mark.parametrize("text, line", [
    ("x = 1\ny = 'open\n", 6),  # (a quote left open)
    ("x = 1\ny = (\n", 6),  # (a bracket left open at the end)
    ("x = (\n1))\n", 0),  # (a closing bracket without its opening one)
    ("x = 1\ny = 1 \\ 2\n", 6),  # (a backslash that continues no line)
    ('x = 1\ny = f"{a["b"]}"\n', 6),  # (an f-string not read: fstring_read)
])
def test_a_text_that_cannot_be_read_so_stops_at_the_line_being_read(text, line):
    lines = logical_lines(text)
    told = []
    with pytest.raises(Unreadable) as stopped:
        for start, _, _, _ in lines:
            told.append(start)
    assert stopped.value.line == line and told == ([0] if line else [])


# One rule for f-strings, the same on every Python. Up to 3.11 a replacement field cannot hold the
# f-string's own quote, and the scan reads an f-string exactly as Python's tokenizer does; from 3.12
# a string in a field may use it (PEP 701), where the scan ends the f-string early. Read: the scan
# ends outside every field, no `}` stands alone, and each quote in a field's expression starts a
# string that ends in it. (engine's two scanners asked instead that the braces' counts balance, from Python
# 3.12 prefilter's also that no quote be in a field: the first misreads `f"{'}" """'}"`, the second
# read no `f"{d['k']}"`.)
@pytest.mark.parametrize("literal, read", [
    ('"{x}"', True), ('"{{x}}"', True), ('"{x:{w}}"', True), ('"{ {1: 2}[1] }"', True), ("'{x!r:>{w}}'", True),
    ('"a}}b{{c"', True), ('"{x}}}"', True), ('"\\N{EM DASH}"', True), ('"{x:#x}"', True),
    # a string of the field's own, in another quote, or in the same one within triple quotes
    ("\"{d['k']}\"", True), ("\"{'{'}\"", True), ("\"{'}'}\"", True), ("'{d[\"k\"]:>{w}}'", True),
    ('"""{d["k"]}"""', True), ("\"{f'{x}'}\"", True), ('"""{\'\'\'a\'\'\'}"""', True),
    # Python 3.12's nesting, as the scan cuts it: a field left open
    ('"{d["', False), ('"{x + "', False), ("\"{f'{d[\"", False), ('"""{x + """', False),
    # a `}` alone: no Python reads it
    ('"}"', False), ('"{x}}}{y + "', False),
    # a quote in a field that starts no string ending there: the field may go on (3.12)
    ("\"{'}\"", False), ("\"{'a}\"", False),
    # a quote after a `:` in a field: a format spec's fill character is no string, where a
    # string after it may hide a `}` (`f"{x:'}{'a}" + "'}"` is one f-string in 3.12); a `#` before
    # one: from 3.12 a comment, which may hide the quote that ends a string
    ("\"{x:'^9}\"", False), ("\"{x:'}{'a}\"", False), ('"""{x # }\n}"""', False),
    # ... but a `:` in the expression's brackets starts no format spec
    ("\"{ {1: 'a'}[1] }\"", True), ("\"{d[:4]['text']}\"", True), ("\"{(lambda: 'a')()}\"", True),
    ('"{x:#x}{y!r:>{w}}"', True), ("\"{d['k']:>9}\"", True), ("\"{'ID':<{w['id']}} |\"", True),
])
def test_an_f_string_is_read_where_every_python_reads_it_alike(literal, read):
    assert fstring_read(literal) is read
    if read:  # (where it is read, the f-string is one expression ending at the scan's end, on this Python)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse("f" + literal)
        value = tree.body[0].value  # type: ignore[attr-defined]
        assert isinstance(value, ast.JoinedStr) and value.end_col_offset == len(("f" + literal).split("\n")[-1])
