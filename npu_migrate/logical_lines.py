"""A file's logical lines told from its text, as Python's tokenizer finds them, without Python's parse.

One scan serves the checks that read a file's text before deciding whether Python must parse it
(engine._outside_definitions_frameworks: the frameworks a file imports outside its definitions;
engine._text_imports: the modules its unindented import statements name; prefilter._docstring_spans:
where its strings stand alone as statements). The scan is the tokenizing they share; what each
does with the lines is its own decision. Where the text cannot be read so, the scan says so
(Unreadable) and each check answers "Python's parse tells".
"""

from __future__ import annotations

import re
from typing import Iterator, List, Tuple

# What Python's tokenizer sees as it looks for where each logical line starts: a line break, a
# bracket, a comment, a string (triple-quoted or not; a backslash escapes the next character, in
# raw strings too), a backslash that continues the line; a quote or backslash left alone ends the scan.
# (Each alternative starts with a character, not a set of them: the regex engine then skips to the
# next of those characters instead of trying every alternative at every one; it halves the scan.)
LOGICAL_RE = re.compile(
    r"""\n|\(|\[|\{|\)|\]|\}|#[^\n]*"""
    r"""|'''[^'\\]*(?:(?:\\[\s\S]|'(?!''))[^'\\]*)*'''"""
    r'''|"""[^"\\]*(?:(?:\\[\s\S]|"(?!""))[^"\\]*)*"""'''
    r"""|'[^'\\\n]*(?:\\[\s\S][^'\\\n]*)*'"""
    r'''|"[^"\\\n]*(?:\\[\s\S][^"\\\n]*)*"'''
    r"""|\\\n|'|"|\\"""
)
_INDENTATION_RE = re.compile(r"[ \t\f]*")
_REST_OF_LINE_RE = re.compile(r"[ \t\f]*(?:#[^\n]*)?(?:\n|\Z)")
_PREFIX_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


class Unreadable(ValueError):
    """The text's logical lines cannot be told from its text (logical_lines). `line`: where the
    logical line being read when the scan stopped starts (the lines before it were told)."""

    def __init__(self, line: int) -> None:
        super().__init__(line)
        self.line = line


def logical_lines(text: str) -> Iterator[Tuple[int, int, int, int]]:
    """(start, end, string_start, string_end) of each logical line of `text` in order, as Python's
    tokenizer finds where they start (strings, comments, brackets, backslash continuations:
    LOGICAL_RE): a line break outside brackets, strings and comments ends one. `end` is where the
    next starts (after the line break), or the text's end. A blank line or a comment alone is one
    too. `string_start`, `string_end`: where the string literal standing alone on the line starts
    (its prefix included) and ends when the line is a str statement (a string at its start,
    outside brackets, followed by nothing but a comment on its last line; no `b` or `f` prefix),
    else -1, -1.

    Raises Unreadable after the lines told where the text cannot be read so: a quote left open,
    a closing bracket without its opening one or brackets left open at the end, a backslash that
    continues no line, an f-string whose replacement fields fstring_read does not read."""
    depth = 0
    line = 0  # where the logical line starts
    string_start = string_end = -1
    for match in LOGICAL_RE.finditer(text):
        at = match.start()
        first = text[at]
        if first == "\n":
            if depth == 0:
                yield line, at + 1, string_start, string_end
                line = at + 1
                string_start = string_end = -1
        elif first in "([{":
            depth += 1
        elif first in ")]}":
            depth -= 1
            if depth < 0:
                raise Unreadable(line)
        elif first in "'\"":
            end = match.end()
            if end - at == 1:
                raise Unreadable(line)  # (a quote left open)
            begin = at
            while begin > line and at - begin < 3 and text[begin - 1] in _PREFIX_LETTERS:
                begin -= 1
            if begin == at:
                prefix = ""
            else:
                prefix = text[begin:at].lower()
                if "f" in prefix:
                    if not fstring_read(match.group()):
                        raise Unreadable(line)
                    continue
            if (depth == 0 and prefix in ("", "r", "u") and _INDENTATION_RE.fullmatch(text, line, begin)
                    and _REST_OF_LINE_RE.match(text, end)):
                string_start, string_end = begin, end
        elif first == "\\" and match.end() - at == 1:
            raise Unreadable(line)  # (a backslash that continues no line)
    if depth:
        raise Unreadable(line)
    yield line, len(text), string_start, string_end


def fstring_read(literal: str) -> bool:
    """Whether an f-string as LOGICAL_RE found it (`literal`: from its opening quote to its
    closing one) is the string every Python reads there: its scan ends outside its replacement
    fields, it has no `}` alone outside them, and each quote in a field's expression starts a
    string that ends in it. From Python 3.12 a string inside a field may use the f-string's own
    quote (PEP 701), where the scan ends the f-string early (`f"{d["k"]}"`: read as `f"{d["`, a
    field left open; up to 3.11 no Python, and the text is parsed to say so). Not read either: a
    quote in a format spec (after a `:` outside the expression's brackets: a fill character,
    `f"{x:'^9}"`, is no string; a field nested in a spec is an expression again:
    `f"{x:<{w['id']}}"`) and a `#` in an expression (from 3.12 a comment, which may hide the
    quote that ends a string)."""
    quote = literal[0]
    skip = 3 if literal.startswith(quote * 3) else 1
    # the fields open at this point, innermost last: the brackets open in its expression, or -1
    # once its format spec has started
    fields: List[int] = []
    i, n = skip, len(literal) - skip
    while i < n:
        c = literal[i]
        if not fields:
            if c in "{}":
                if literal.startswith(c, i + 1):
                    i += 2  # (`{{`, `}}`: the braces themselves)
                    continue
                if c == "}":
                    return False
                fields.append(0)
        elif fields[-1] < 0:  # (in a format spec)
            if c == "{":
                fields.append(0)
            elif c == "}":
                fields.pop()
            elif c in "'\"":
                return False
        elif c in "([{":
            fields[-1] += 1
        elif c in ")]}":
            if fields[-1]:
                fields[-1] -= 1
            elif c == "}":
                fields.pop()
            else:
                return False
        elif c == ":" and not fields[-1]:
            fields[-1] = -1
        elif c in "'\"":
            close = c * 3 if literal.startswith(c * 3, i) else c
            i += len(close)
            while i < n and not literal.startswith(close, i):
                i += 2 if literal[i] == "\\" else 1
            if i >= n:
                return False
            i += len(close)
            continue
        elif c == "#":
            return False
        i += 1
    return not fields
