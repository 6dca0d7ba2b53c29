"""A lexer for the bash grammar a launch script uses (quotes, `$(…)`, backquotes, `${…}`,
`$((…))`, heredocs, `[[ … ]]`, `case`, arrays, functions), not a full parser: it finds words, the
simple commands they form, parameter expansions, heredoc bodies and comments, with their offsets
(frontends/shell.py migrates from them). `bashlex` was not used: it is GPLv3 (this project is
Apache-2.0) and it rejects constructs common in launch scripts (`for ((…))`, `arr=(…)`,
`[[ … ]]`, `case`, `$((…))`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
ASSIGNMENT_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?:\[[^\]]*\])?\+?=")
# A word that is plain text: no quotes, expansions, escapes or globs.
LITERAL_RE = re.compile(r"[A-Za-z0-9_./:=,+%@^-]+")
_OPERATORS = (";;&", ";;", ";&", "&&", "||", "|&", "|", ";", "&")
_REDIRECT_RE = re.compile(r"[0-9]*(?:<<<|<<-|<<|<>|<&|>&|>>|>\||&>>|&>|<|>)")
_COMMAND_START_KEYWORDS = {"if", "then", "else", "elif", "do", "while", "until", "{", "!", "time"}
_COMMAND_END_KEYWORDS = {"fi", "done", "esac", "}"}


@dataclass
class Word:
    start: int
    end: int
    text: str

    @property
    def literal(self) -> Optional[str]:
        """The word's value when it is plain text (no quoting or expansion), else None."""
        return self.text if LITERAL_RE.fullmatch(self.text) else None


@dataclass
class Command:
    words: List[Word] = field(default_factory=list)  # redirections left out
    redirects: List[Tuple[int, int]] = field(default_factory=list)
    captured: bool = False  # inside $(…), `…` or <(…): its output is read by the script
    piped: bool = False  # its output goes into a pipe
    structural: bool = False  # the words of `for x in …`, `case … in`: not a command


@dataclass
class ShellScan:
    commands: List[Command] = field(default_factory=list)
    references: List[Tuple[str, int]] = field(default_factory=list)  # ($NAME's NAME, offset)
    heredocs: List[Tuple[int, int]] = field(default_factory=list)  # body spans
    comments: List[Tuple[int, int]] = field(default_factory=list)


class _Lexer:
    def __init__(self, text: str) -> None:
        self.text = text
        self.n = len(text)
        self.pos = 0
        self.scan = ShellScan()
        self.pending_heredocs: List[Tuple[str, bool]] = []
        self.case_depth = 0
        self.expect_pattern = False

    # -- command lists ----------------------------------------------------------------------

    def parse_list(self, stop: Optional[str], captured: bool) -> None:
        """Commands up to `stop` (")" or None for the end of the text), which is consumed."""
        text = self.text
        cmd = Command(captured=captured)
        at_command_start = True

        def finish(piped: bool = False) -> Command:
            nonlocal at_command_start
            if cmd.words or cmd.redirects:
                cmd.piped = piped
                self.scan.commands.append(cmd)
            at_command_start = True
            return Command(captured=captured)

        while self.pos < self.n:
            c = text[self.pos]
            if c in " \t\r":
                self.pos += 1
                continue
            if text.startswith("\\\n", self.pos):
                self.pos += 2
                continue
            if c == "#":
                end = text.find("\n", self.pos)
                end = self.n if end < 0 else end
                self.scan.comments.append((self.pos, end))
                self.pos = end
                continue
            if c == "\n":
                cmd = finish()
                self.pos += 1
                self.read_heredocs()
                continue
            if self.expect_pattern:
                if text.startswith("esac", self.pos) and self._word_ends(self.pos + 4):
                    self.expect_pattern = False
                    self.case_depth -= 1
                    self.pos += 4
                    continue
                self.read_case_pattern()
                continue
            if stop is not None and c == stop:
                cmd = finish()
                self.pos += 1
                return
            if c in "<>" and text.startswith("(", self.pos + 1):
                self.pos += 2  # process substitution <(…) / >(…): an argument whose commands run
                self.parse_list(")", captured=True)
                continue
            redirect = _REDIRECT_RE.match(text, self.pos)
            if redirect:  # `2>&1`, `> log`, `<<EOF`; `&>` too (a lone `&` is an operator)
                self.read_redirect(cmd, redirect)
                at_command_start = False
                continue
            op = next((o for o in _OPERATORS if text.startswith(o, self.pos)), None)
            if op is not None:
                self.pos += len(op)
                cmd = finish(piped=op in ("|", "|&"))
                if op in (";;", ";&", ";;&") and self.case_depth:
                    self.expect_pattern = True
                continue
            if c == "(":
                if at_command_start and not cmd.words and text.startswith("((", self.pos):
                    self.pos += 2
                    self.scan_arithmetic()
                    continue
                parens = re.match(r"\(\s*\)", text[self.pos:]) if len(cmd.words) == 1 else None
                if parens:
                    # `name() { … }`: a function definition, not a command
                    self.pos += parens.end()
                    cmd = Command(captured=captured)
                    at_command_start = True
                    continue
                self.pos += 1
                self.parse_list(")", captured=captured)
                continue
            if c == ")":  # unbalanced: tolerate
                self.pos += 1
                cmd = finish()
                continue
            word = self.read_word()
            if word is None:
                self.pos += 1
                continue
            if at_command_start and not cmd.words:
                if word.text == "esac" and self.case_depth:
                    self.case_depth -= 1
                    continue
                if word.text in _COMMAND_START_KEYWORDS or word.text in _COMMAND_END_KEYWORDS:
                    continue
                if word.text == "[[":
                    self.read_test_expression(cmd)
                    cmd = finish()
                    continue
                if word.text in ("for", "select"):
                    cmd.structural = True
                    if text.startswith("((", self._skip_blanks(self.pos)):
                        self.pos = self._skip_blanks(self.pos) + 2
                        self.scan_arithmetic()
                        cmd = finish()
                    continue
                if word.text == "case":
                    cmd.structural = True
                    self.case_depth += 1
                    self.read_case_header(cmd)
                    cmd = finish()
                    self.expect_pattern = True
                    continue
                if word.text == "function":
                    name = self.read_word_after_blanks()
                    parens = re.match(r"\s*\(\s*\)", text[self.pos:]) if name is not None else None
                    if parens:
                        self.pos += parens.end()
                    continue
            cmd.words.append(word)
            at_command_start = False
        finish()

    def _word_ends(self, i: int) -> bool:
        return i >= self.n or self.text[i] in " \t\r\n;&|()<>"

    def _skip_blanks(self, i: int) -> int:
        while i < self.n and self.text[i] in " \t":
            i += 1
        return i

    def read_word_after_blanks(self) -> Optional[Word]:
        self.pos = self._skip_blanks(self.pos)
        return self.read_word()

    def read_redirect(self, cmd: Command, m: "re.Match[str]") -> None:
        start = self.pos
        op = m.group().lstrip("0123456789")
        self.pos = m.end()
        target = self.read_word_after_blanks()
        cmd.redirects.append((start, self.pos))
        if op in ("<<", "<<-") and target is not None:
            delimiter = re.sub(r"[\"'\\]", "", target.text)
            self.pending_heredocs.append((delimiter, op == "<<-"))

    def read_heredocs(self) -> None:
        text = self.text
        for delimiter, strip_tabs in self.pending_heredocs:
            body_start = self.pos
            while self.pos < self.n:
                end = text.find("\n", self.pos)
                line_end = self.n if end < 0 else end
                line = text[self.pos:line_end].rstrip("\r")
                if (line.lstrip("\t") if strip_tabs else line) == delimiter:
                    self.scan.heredocs.append((body_start, self.pos))
                    self.pos = line_end + 1 if end >= 0 else self.n
                    break
                self.pos = line_end + 1 if end >= 0 else self.n
            else:
                self.scan.heredocs.append((body_start, self.n))
        self.pending_heredocs = []

    def read_test_expression(self, cmd: Command) -> None:
        """`[[ … ]]`: its words only matter for their expansions; `<`, `&&`, `(` are operators."""
        while self.pos < self.n:
            self.pos = self._skip_blanks(self.pos)
            if self.pos >= self.n or self.text[self.pos] == "\n":
                return
            if self.text.startswith("]]", self.pos) and self._word_ends(self.pos + 2):
                self.pos += 2
                return
            if self.text[self.pos] in "<>()&|!":
                self.pos += 1
                continue
            if self.read_word() is None:
                self.pos += 1

    def read_case_header(self, cmd: Command) -> None:
        """`case WORD in`: the subject word (its expansions count) and `in`."""
        self.read_word_after_blanks()
        self.pos = self._skip_blanks(self.pos)
        while self.pos < self.n and self.text[self.pos] in " \t\r\n":
            self.pos += 1
        if self.text.startswith("in", self.pos) and self._word_ends(self.pos + 2):
            self.pos += 2

    def read_case_pattern(self) -> None:
        """A case item's pattern up to its `)`; the commands of the item follow."""
        text = self.text
        if text[self.pos] == "(":
            self.pos += 1
        while self.pos < self.n:
            c = text[self.pos]
            if c == ")":
                self.pos += 1
                break
            if c in " \t\r\n|":
                self.pos += 1
                continue
            if self.read_word() is None:
                self.pos += 1
        self.expect_pattern = False

    # -- words ------------------------------------------------------------------------------

    def read_word(self) -> Optional[Word]:
        text = self.text
        start = self.pos
        while self.pos < self.n:
            c = text[self.pos]
            if c in " \t\r\n;&|<>()":
                if c == "(" and ASSIGNMENT_RE.fullmatch(text[start:self.pos]):
                    self.pos += 1  # array assignment `a=(x y z)`
                    self.read_array_elements()
                    continue
                if c == "(" and self.pos > start and text[self.pos - 1] in "@!+*?":
                    self.skip_balanced_parens()  # extglob `@(a|b)`
                    continue
                break
            if not self.skip_quoted_or_expanded(c):
                self.pos += 1
        self.pos = min(self.pos, self.n)
        if self.pos == start:
            return None
        return Word(start, self.pos, text[start:self.pos])

    def read_array_elements(self) -> None:
        while self.pos < self.n:
            c = self.text[self.pos]
            if c == ")":
                self.pos += 1
                return
            if c in " \t\r\n":
                self.pos += 1
            elif c == "#" and self.text[self.pos - 1] in " \t\n":
                end = self.text.find("\n", self.pos)
                self.pos = self.n if end < 0 else end
            elif self.read_word() is None:
                self.pos += 1

    def skip_balanced_parens(self) -> None:
        depth = 0
        while self.pos < self.n:
            c = self.text[self.pos]
            if c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
                if depth == 0:
                    self.pos += 1
                    return
            elif c == "\\":
                self.pos += 1
            self.pos += 1

    def scan_double_quoted(self) -> None:
        text = self.text
        self.pos += 1
        while self.pos < self.n:
            c = text[self.pos]
            if c == "\\":
                self.pos += 2
            elif c == '"':
                self.pos += 1
                return
            elif c == "$":
                self.scan_dollar()
            elif c == "`":
                self.scan_backquoted()
            else:
                self.pos += 1

    def skip_quoted_or_expanded(self, c: str) -> bool:
        """At a backslash, a quote, a backquote or `$` (the character `c` at self.pos): move past
        what it starts, collecting the references in it; False for any other character."""
        if c == "\\":
            self.pos += 2
        elif c == "'":
            end = self.text.find("'", self.pos + 1)
            self.pos = self.n if end < 0 else end + 1
        elif c == '"':
            self.scan_double_quoted()
        elif c == "`":
            self.scan_backquoted()
        elif c == "$":
            self.scan_dollar()
        else:
            return False
        return True

    def scan_backquoted(self) -> None:
        """`…`: the commands inside, whose output the script reads."""
        text = self.text
        i = self.pos + 1
        while i < self.n and text[i] != "`":
            i += 2 if text[i] == "\\" else 1
        end = min(i, self.n)
        outer_n, self.n = self.n, end
        self.pos += 1
        saved = (self.case_depth, self.expect_pattern)
        self.case_depth, self.expect_pattern = 0, False
        self.parse_list(None, captured=True)
        self.case_depth, self.expect_pattern = saved
        self.n = outer_n
        self.pos = min(end + 1, self.n)

    def scan_dollar(self) -> None:
        text = self.text
        nxt = text[self.pos + 1] if self.pos + 1 < self.n else ""
        if nxt == "'":  # $'…' with backslash escapes
            i = self.pos + 2
            while i < self.n and text[i] != "'":
                i += 2 if text[i] == "\\" else 1
            self.pos = min(i + 1, self.n)
        elif nxt == '"':
            self.pos += 1
            self.scan_double_quoted()
        elif text.startswith("((", self.pos + 1):
            self.pos += 3
            self.scan_arithmetic()
        elif nxt == "(":
            self.pos += 2
            saved = (self.case_depth, self.expect_pattern)
            self.case_depth, self.expect_pattern = 0, False
            self.parse_list(")", captured=True)
            self.case_depth, self.expect_pattern = saved
        elif nxt == "{":
            self.scan_braced_parameter()
        else:
            m = NAME_RE.match(text, self.pos + 1)
            if m:
                self.scan.references.append((m.group(), m.start()))
                self.pos = m.end()
            else:
                self.pos += 2 if nxt else 1

    def scan_braced_parameter(self) -> None:
        """${NAME…}: the NAME (after an optional `#` or `!`) is a reference; the rest may hold
        quotes and expansions of its own."""
        text = self.text
        i = self.pos + 2
        if i < self.n and text[i] in "#!" and NAME_RE.match(text, i + 1):
            i += 1
        m = NAME_RE.match(text, i)
        if m:
            self.scan.references.append((m.group(), m.start()))
            i = m.end()
        self.pos = i
        while self.pos < self.n:
            c = text[self.pos]
            if c == "}":
                self.pos += 1
                return
            if not self.skip_quoted_or_expanded(c):
                self.pos += 1

    def scan_arithmetic(self) -> None:
        """After `((` / `$((`: up to the matching `))`, collecting `$NAME` references."""
        depth = 0
        text = self.text
        while self.pos < self.n:
            c = text[self.pos]
            if c == "(":
                depth += 1
                self.pos += 1
            elif c == ")":
                if depth == 0:
                    self.pos += 2 if text.startswith("))", self.pos) else 1
                    return
                depth -= 1
                self.pos += 1
            elif c == "$":
                self.scan_dollar()
            elif c in "'\"":
                self.read_word()
            else:
                self.pos += 1


def scan_shell(text: str) -> ShellScan:
    lexer = _Lexer(text)
    while lexer.pos < lexer.n:
        lexer.parse_list(None, captured=False)
        if lexer.pos < lexer.n:  # a stray `)` at top level
            lexer.pos += 1
    return lexer.scan
