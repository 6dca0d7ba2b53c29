"""Shell launch scripts (`*.sh`, and files whose shebang names sh or bash).

What changes, driven by the rules (`[[env]]` renames shared with Python, `[[command]]` rewrites,
`[[finding]]` kinds `env` and `command`):

* environment variables: `export CUDA_VISIBLE_DEVICES=0`, `CUDA_VISIBLE_DEVICES=0 python x.py`,
  `env CUDA_VISIBLE_DEVICES=0 …`, `unset`/`declare`/`local`/`readonly`, and the references
  `$CUDA_VISIBLE_DEVICES` / `${CUDA_VISIBLE_DEVICES:-0}` -> `ASCEND_RT_VISIBLE_DEVICES`;
  `NCCL_*` variables with an HCCL equivalent are renamed, the others reported where set;
* commands: `nvidia-smi` alone (a status report) -> `npu-smi info`; when its output is read
  (`$(…)`, a pipe) or it has other options, a finding; launchers (`torchrun`) get advice.

Comments, quoted text (but for `NAME=` assignments held in a variable, `ENV="CUDA_VISIBLE_DEVICES=$g"`),
heredoc bodies and everything else stay byte for byte. The scanner below is
a lexer for the bash grammar a launch script uses (quotes, `$(…)`, backquotes, `${…}`, `$((…))`,
heredocs, `[[ … ]]`, `case`, arrays, functions), not a full parser: it finds words, the simple
commands they form, and parameter expansions, with their offsets. `bashlex` was not used: it is
GPLv3 (this project is Apache-2.0) and it rejects constructs common in launch scripts
(`for ((…))`, `arr=(…)`, `[[ … ]]`, `case`, `$((…))`).
"""

from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Set, Tuple

from ..suppressions import SUPPRESS_RE
from ..model import Edit, FileResult, Finding, Options, Span
from ..rules import Rule, RuleSet

NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# `NAME=` at the start of a quoted value or after a blank or `;&|(` inside it.
_ASSIGNMENT_IN_VALUE_RE = re.compile(r"""(?:(?<=["'\s;&|(])|(?<==))([A-Za-z_][A-Za-z0-9_]*)=""")
ASSIGNMENT_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?:\[[^\]]*\])?\+?=")
# A word that is plain text: no quotes, expansions, escapes or globs.
LITERAL_RE = re.compile(r"[A-Za-z0-9_./:=,+%@^-]+")
PYTHON_RE = re.compile(r"python(?:[0-9.]*)$")
_OPERATORS = (";;&", ";;", ";&", "&&", "||", "|&", "|", ";", "&")
_REDIRECT_RE = re.compile(r"[0-9]*(?:<<<|<<-|<<|<>|<&|>&|>>|>\||&>>|&>|<|>)")
_COMMAND_START_KEYWORDS = {"if", "then", "else", "elif", "do", "while", "until", "{", "!", "time"}
_COMMAND_END_KEYWORDS = {"fi", "done", "esac", "}"}

# Commands that run the command given in their arguments: name -> options that take a value.
WRAPPERS: Dict[str, Set[str]] = {
    "nohup": set(), "exec": set(), "time": set(), "command": set(), "builtin": set(),
    "sudo": {"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U"},
    "nice": {"-n"}, "ionice": {"-c", "-n", "-p"}, "stdbuf": {"-i", "-o", "-e"},
    "watch": {"-n", "-d", "--interval"}, "timeout": {"-s", "-k", "--signal", "--kill-after"},
    "numactl": {"-C", "-m", "-N", "-p", "-i"}, "taskset": set(),
}
# Commands whose positional arguments are variable names (plain or NAME=value).
DECLARERS = {"export", "declare", "typeset", "local", "readonly", "unset"}
# Commands that look a program up instead of running it.
LOOKUPS = {"which", "type", "hash", "whereis"}


# ----------------------------------------------------------------------------- the lexer


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
                if len(cmd.words) == 1 and re.match(r"\(\s*\)", text[self.pos:]):
                    # `name() { … }`: a function definition, not a command
                    self.pos += re.match(r"\(\s*\)", text[self.pos:]).end()
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
                    if name is not None and re.match(r"\s*\(\s*\)", text[self.pos:]):
                        self.pos += re.match(r"\s*\(\s*\)", text[self.pos:]).end()
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
            if c == "\\":
                self.pos += 2
            elif c == "'":
                end = text.find("'", self.pos + 1)
                self.pos = self.n if end < 0 else end + 1
            elif c == '"':
                self.scan_double_quoted()
            elif c == "`":
                self.scan_backquoted()
            elif c == "$":
                self.scan_dollar()
            else:
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
            if c == "\\":
                self.pos += 2
            elif c == "'":
                end = text.find("'", self.pos + 1)
                self.pos = self.n if end < 0 else end + 1
            elif c == '"':
                self.scan_double_quoted()
            elif c == "$":
                self.scan_dollar()
            elif c == "`":
                self.scan_backquoted()
            else:
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


# ----------------------------------------------------------------------------- the migration


@dataclass
class ShellChange:
    """Edits and findings with offsets into the text; `apply` turns them into the new text."""

    edits: List[Tuple[int, int, str, Edit]] = field(default_factory=list)
    findings: List[Tuple[int, int, Finding]] = field(default_factory=list)


def _glob_specificity(pattern: str) -> Tuple[int, int]:
    return (0 if "*" in pattern else 1, len(pattern))


class ShellMigrator:
    def __init__(self, text: str, rules: RuleSet) -> None:
        self.text = text
        self.rules = rules
        self.change = ShellChange()
        self.scan = scan_shell(text)
        self._edited: Set[int] = set()

    # -- recording ----------------------------------------------------------------------------

    def rename(self, name: str, start: int) -> bool:
        rule = self.rules.env.get(name)
        if rule is None or start in self._edited:
            return rule is not None
        self._edited.add(start)
        message = rule.render_message(before=name, after=rule.to, what="environment variable")
        edit = Edit(rule.code, Span(0, 0, 0, 0), message, name, rule.to)
        self.change.edits.append((start, start + len(name), rule.to, edit))
        return True

    def report(self, rule: Rule, start: int, end: int, api: str) -> None:
        finding = Finding(
            code=rule.code,
            severity=rule.severity,
            span=Span(0, 0, 0, 0),
            api=api,
            message=rule.render_message(api=api),
            suggestion=rule.render_suggestion(api=api),
        )
        self.change.findings.append((start, end, finding))

    # -- environment variables --------------------------------------------------------------

    def env_set(self, name: str, start: int) -> None:
        """A variable is set (assigned, exported, passed through `env`)."""
        if self.rename(name, start):
            return
        best: Optional[Tuple[Tuple[int, int], Rule]] = None
        for rule in self.rules.findings.get("env", ()):
            for pattern in rule.patterns or (rule.from_,):
                if fnmatch.fnmatchcase(name, pattern):
                    key = _glob_specificity(pattern)
                    if best is None or key > best[0]:
                        best = (key, rule)
        if best is not None:
            self.report(best[1], start, start + len(name), name)

    def assignment(self, word: Word) -> None:
        m = ASSIGNMENT_RE.match(word.text)
        if m:
            self.env_set(m.group(1), word.start)
            self.assignments_in_value(word, m.end())

    def assignments_in_value(self, word: Word, value_start: int) -> None:
        """`ENV="CUDA_VISIBLE_DEVICES=$gpus"`, `CMD="CUDA_VISIBLE_DEVICES=0 python train.py"`: a
        variable holding an assignment (expanded as a command prefix, or eval'd) is renamed too."""
        for m in _ASSIGNMENT_IN_VALUE_RE.finditer(word.text, value_start):
            if m.group(1) in self.rules.env:
                self.rename(m.group(1), word.start + m.start(1))

    # -- commands -----------------------------------------------------------------------------

    def command(self, cmd: Command) -> None:
        if cmd.structural:
            return
        words = cmd.words
        i = 0
        while i < len(words) and ASSIGNMENT_RE.match(words[i].text):
            self.assignment(words[i])
            i += 1
        self.invocation(words[i:], cmd)

    def invocation(self, words: List[Word], cmd: Command) -> None:
        if not words:
            return
        name = words[0].literal
        if name is None:
            return
        base = os.path.basename(name)
        args = words[1:]
        if base in WRAPPERS:
            rest = self._after_options(args, WRAPPERS[base], positional=1 if base == "timeout" else 0)
            if base == "command" and any(w.text in ("-v", "-V") for w in args[: len(args) - len(rest)]):
                self.lookup(rest, cmd)
                return
            self.invocation(rest, cmd)
            return
        if base == "env":
            self.env_command(args, cmd)
            return
        if base in DECLARERS:
            if base == "unset" and any(w.text in ("-f", "-n") for w in args):
                return
            for w in args:
                m = ASSIGNMENT_RE.match(w.text)
                variable = m.group(1) if m else (w.text if NAME_RE.fullmatch(w.text) else None)
                if variable is None:  # an option (`-x`, `+r`) or a computed word
                    continue
                if base == "unset":
                    self.rename(variable, w.start)
                else:
                    self.env_set(variable, w.start)
                    if m:
                        self.assignments_in_value(w, m.end())
            return
        if base in LOOKUPS:
            self.lookup(args, cmd)
            return
        self.run(words, cmd)

    @staticmethod
    def _after_options(args: List[Word], with_value: Set[str], positional: int = 0) -> List[Word]:
        i = 0
        while i < len(args) and args[i].text.startswith("-") and args[i].text != "-":
            if args[i].text == "--":
                i += 1
                break
            i += 2 if args[i].text in with_value else 1
        return args[i + positional:]

    def env_command(self, args: List[Word], cmd: Command) -> None:
        """`env [-i] [-u NAME] [NAME=value]… [command …]`"""
        i = 0
        while i < len(args):
            t = args[i].text
            if t in ("-u", "--unset") and i + 1 < len(args):
                self.rename(args[i + 1].text, args[i + 1].start)
                i += 2
            elif t.startswith("--unset="):
                self.rename(t[len("--unset="):], args[i].start + len("--unset="))
                i += 1
            elif t.startswith("-"):
                i += 1
            elif ASSIGNMENT_RE.match(t):
                self.assignment(args[i])
                i += 1
            else:
                break
        self.invocation(args[i:], cmd)

    def lookup(self, args: List[Word], cmd: Command) -> None:
        """`which nvidia-smi`, `command -v nvidia-smi`: the program is checked for, not run."""
        for w in args:
            if w.literal is not None and not w.text.startswith("-"):
                self.command_findings([w], cmd, looked_up=True)

    def run(self, words: List[Word], cmd: Command) -> None:
        argv = [w.literal for w in words]
        if not self.command_rewrite(words, argv, cmd):
            self.command_findings(words, cmd)

    def command_rewrite(self, words: List[Word], argv: List[Optional[str]], cmd: Command) -> bool:
        """A `[[command]]` rule whose words are exactly this command's: only where the command
        stands on its own (its output is not read by the script)."""
        if cmd.captured or cmd.piped:
            return False
        rule = self.rules.command.get(" ".join(a or "\0" for a in argv))
        if rule is None:
            return False
        start, end = words[0].start, words[-1].end
        if any(start < r_start < end for r_start, _ in cmd.redirects):
            return False
        if any(s in self._edited for s in range(start, end)):
            return False
        self._edited.add(start)
        before = self.text[start:end]
        message = rule.render_message(before=before, after=rule.to)
        self.change.edits.append((start, end, rule.to, Edit(rule.code, Span(0, 0, 0, 0), message, before, rule.to)))
        return True

    def command_findings(self, words: List[Word], cmd: Command, looked_up: bool = False) -> None:
        name = words[0].literal
        if name is None:
            return
        base = os.path.basename(name)
        program = "python" if PYTHON_RE.match(base) else base
        args = [w.text for w in words[1:]]
        best: Optional[Tuple[int, Rule, str]] = None
        for rule in self.rules.findings.get("command", ()):
            for pattern in rule.patterns or (rule.from_,):
                head, *wanted = pattern.split(" ")
                if head != program or (looked_up and wanted):
                    continue
                if wanted and not _contains(args, wanted):
                    continue
                if rule.keywords and not _option_not_one(args, rule.keywords):
                    continue
                if best is None or len(wanted) + 1 > best[0]:
                    best = (len(wanted) + 1, rule, pattern)
        if best is not None:
            self.report(best[1], words[0].start, words[-1].end, best[2])

    # -- the whole script -------------------------------------------------------------------------

    def migrate(self) -> ShellChange:
        for name, start in self.scan.references:
            self.rename(name, start)
        for cmd in self.scan.commands:
            self.command(cmd)
        self.heredocs()
        self.install_paths()
        return self.change

    _INSTALL_PATH = re.compile(r"(?<![\w.-])([A-Za-z][A-Za-z0-9_-]*)/(\d+\.\d+[0-9A-Za-z._-]*)")

    def install_paths(self) -> None:
        """Paths into a versioned Ascend install (`/usr/local/Ascend/ascend-toolkit/20.0.0.B035/...`):
        the script pins that CANN version, whose TF Adapter may lack what the migrated code calls."""
        rules = self.rules.findings.get("install-path", ())
        if not rules:
            return
        comments = [(a, b) for a, b in self.scan.comments]
        reported = set()
        for m in self._INSTALL_PATH.finditer(self.text):
            if any(a <= m.start() < b for a, b in comments):
                continue
            found = f"{m.group(1)}/{m.group(2)}"
            for rule in rules:
                if found not in reported and any(fnmatch.fnmatchcase(found, p) for p in rule.patterns or (rule.from_,)):
                    reported.add(found)
                    self.report(rule, m.start(), m.end(), found)

    def heredocs(self) -> None:
        """Heredoc bodies are text the script writes out or feeds to a program: never rewritten,
        but a CUDA name in one is reported (once its variable is renamed, `$CUDA_VISIBLE_DEVICES`
        in a generated script expands to nothing)."""
        for rule in self.rules.findings.get("heredoc", ()):
            words = "|".join(
                re.escape(p[:-1]) + r"\w*" if p.endswith("*") else re.escape(p) for p in rule.patterns or (rule.from_,)
            )
            word_re = re.compile(r"(?<![\w-])(?:%s)(?![\w-])" % words)
            for start, end in self.scan.heredocs:
                for m in word_re.finditer(self.text, start, end):
                    self.report(rule, m.start(), m.end(), m.group())


def _contains(args: List[str], wanted: List[str]) -> bool:
    """Whether `wanted` appears in `args` as consecutive words (`--opt=value` matches `--opt`)."""
    def same(arg: str, w: str) -> bool:
        return arg == w or (w.startswith("-") and arg.startswith(w + "="))

    for i in range(len(args) - len(wanted) + 1):
        if all(same(args[i + j], w) for j, w in enumerate(wanted)):
            return True
    return False


def _option_not_one(args: List[str], options: Tuple[str, ...]) -> bool:
    """Whether one of `options` is given a value other than 1 (`--nnodes 2`, `--nnodes=$N`)."""
    for i, arg in enumerate(args):
        for opt in options:
            if arg == opt and i + 1 < len(args):
                value = args[i + 1]
            elif arg.startswith(opt + "="):
                value = arg[len(opt) + 1:]
            else:
                continue
            if value not in ("1", "1:1"):
                return True
    return False


# ----------------------------------------------------------------------------- results


def _line_starts(text: str) -> List[int]:
    starts = [0]
    for m in re.finditer("\n", text):
        starts.append(m.end())
    return starts


def span_of(starts: List[int], start: int, end: int) -> Span:
    import bisect

    def pos(offset: int) -> Tuple[int, int]:
        line = bisect.bisect_right(starts, offset)
        return line, offset - starts[line - 1] + 1

    (l1, c1), (l2, c2) = pos(start), pos(end)
    return Span(l1, c1, l2, c2)


def suppressed_lines(text: str, comments: List[Tuple[int, int]], starts: List[int]) -> Dict[int, Optional[Set[str]]]:
    found: Dict[int, Optional[Set[str]]] = {}
    for start, end in comments:
        m = SUPPRESS_RE.search(text, start, end)
        if m:
            line = span_of(starts, start, start).line
            codes = m.group(1)
            found[line] = None if codes is None else {c.strip().upper() for c in codes.split(",") if c.strip()}
    return found


def migrate_shell_text(text: str, rules: RuleSet) -> Tuple[Optional[str], List[Edit], List[Finding]]:
    """(new text or None, edits, findings) for a shell script or snippet; spans relative to it."""
    migrator = ShellMigrator(text, rules)
    change = migrator.migrate()
    starts = _line_starts(text)
    suppressions = suppressed_lines(text, migrator.scan.comments, starts)

    def is_suppressed(span: Span, code: str) -> bool:
        codes = suppressions.get(span.line, False)
        return codes is None or (codes is not False and code in codes)

    edits: List[Edit] = []
    pieces: List[str] = []
    last = 0
    for start, end, new, edit in sorted(change.edits, key=lambda e: e[0]):
        edit.span = span_of(starts, start, end)
        if start < last or is_suppressed(edit.span, edit.code):
            continue
        pieces.append(text[last:start])
        pieces.append(new)
        last = end
        edits.append(edit)
    pieces.append(text[last:])
    findings: List[Finding] = []
    seen = set()
    for start, end, finding in sorted(change.findings, key=lambda f: f[0]):
        finding.span = span_of(starts, start, end)
        key = (finding.code, finding.span, finding.api)
        if key in seen or is_suppressed(finding.span, finding.code):
            continue
        seen.add(key)
        findings.append(finding)
    new_text = "".join(pieces) if edits else None
    return (new_text if new_text != text else None), edits, findings


def migrate_shell(text: str, path: str, options: Options, rules: RuleSet) -> FileResult:
    result = FileResult(path=path)
    new_text, result.edits, result.findings = migrate_shell_text(text, rules)
    result.new_text = new_text
    return result


migrate = migrate_shell  # the front end (frontends/__init__.py)
