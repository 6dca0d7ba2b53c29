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
heredoc bodies and everything else stay byte for byte. The words, commands and expansions come
from the lexer in shell_lexer.py, with their offsets.
"""

from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Set, Tuple

from ..model import Edit, FileResult, Finding, Span
from ..options import Options
from ..rules import Rule, RuleSet
from ..kinds.finding import FindingSpec, names_of
from ..offsets import LineIndex
from ..suppressions import SUPPRESS_RE, covers, suppressed_codes
from .shell_lexer import ASSIGNMENT_RE, NAME_RE, Command, Word, scan_shell
from ..codes import applies, check_rule_emitter

# `NAME=` at the start of a quoted value or after a blank or `;&|(` inside it.
_ASSIGNMENT_IN_VALUE_RE = re.compile(r"""(?:(?<=["'\s;&|(])|(?<==))([A-Za-z_][A-Za-z0-9_]*)=""")
PYTHON_RE = re.compile(r"python(?:[0-9.]*)$")

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


@dataclass
class ShellChange:
    """Edits and findings with offsets into the text; `apply` turns them into the new text."""

    edits: List[Tuple[int, int, str, Edit]] = field(default_factory=list)
    findings: List[Tuple[int, int, Finding]] = field(default_factory=list)


def _glob_specificity(pattern: str) -> Tuple[int, int]:
    return (0 if "*" in pattern else 1, len(pattern))


@applies("env", "command", "finding:env", "finding:command", "finding:heredoc", "finding:install-path")
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
        check_rule_emitter(rule)
        edit = Edit(rule.code, Span(0, 0, 0, 0), message, name, rule.to)
        self.change.edits.append((start, start + len(name), rule.to, edit))
        return True

    def report(self, rule: Rule, start: int, end: int, api: str) -> None:
        check_rule_emitter(rule)
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
            for pattern in names_of(rule):
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
        check_rule_emitter(rule)
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
            for pattern in names_of(rule):
                head, *wanted = pattern.split(" ")
                if head != program or (looked_up and wanted):
                    continue
                if wanted and not _contains(args, wanted):
                    continue
                options = FindingSpec.of(rule).keywords
                if options and not _option_not_one(args, options):
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
                if found not in reported and any(fnmatch.fnmatchcase(found, p) for p in names_of(rule)):
                    reported.add(found)
                    self.report(rule, m.start(), m.end(), found)

    def heredocs(self) -> None:
        """Heredoc bodies are text the script writes out or feeds to a program: never rewritten,
        but a CUDA name in one is reported (once its variable is renamed, `$CUDA_VISIBLE_DEVICES`
        in a generated script expands to nothing)."""
        for rule in self.rules.findings.get("heredoc", ()):
            words = "|".join(
                re.escape(p[:-1]) + r"\w*" if p.endswith("*") else re.escape(p) for p in names_of(rule)
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


def suppressed_lines(text: str, comments: List[Tuple[int, int]], lines: LineIndex) -> Dict[int, Optional[Set[str]]]:
    found: Dict[int, Optional[Set[str]]] = {}
    for start, end in comments:
        m = SUPPRESS_RE.search(text, start, end)
        if m:
            found[lines.line(start)] = suppressed_codes(m)
    return found


def migrate_shell_text(text: str, rules: RuleSet) -> Tuple[Optional[str], List[Edit], List[Finding]]:
    """(new text or None, edits, findings) for a shell script or snippet; spans relative to it."""
    migrator = ShellMigrator(text, rules)
    change = migrator.migrate()
    lines = LineIndex(text)
    suppressions = suppressed_lines(text, migrator.scan.comments, lines)

    def is_suppressed(span: Span, code: str) -> bool:
        return covers(suppressions, span.line, code)

    edits: List[Edit] = []
    pieces: List[str] = []
    last = 0
    for start, end, new, edit in sorted(change.edits, key=lambda e: e[0]):
        edit.span = lines.span(start, end)
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
        finding.span = lines.span(start, end)
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
