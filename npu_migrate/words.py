"""The words a file must contain for a rule to apply: what the prefilter (prefilter.py) and
partial parsing (partial.py) are made of. Each rule kind (kinds/) says which requirements its
rules give, with the constructors below.

Why words suffice: every rule matches a *name* that has to be written in the file. A qualified
name (`torch.cuda.amp`) is only resolved through imports and attribute chains, so every one of
its components appears in the text as a whole word (`import torch.cuda.amp as a`, `from
torch.cuda import amp`, `torch.cuda.amp.autocast`); a method, an attribute, a device string, a
backend or an environment variable is written as itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import FrozenSet, Iterator, List, Optional, Set, Tuple

from .frameworks import FRAMEWORK_IMPORTS, STAR_IMPORTED_ALIASES


@dataclass(frozen=True)
class Word:
    """A word the file must contain: as a whole word (`cuda`), or starting a word (`npu`,
    which also matches `npu_format_cast`), optionally in any case (`NCCL` for `nccl`)."""

    text: str
    ignore_case: bool = False
    prefix: bool = False


@dataclass(frozen=True)
class Requirement:
    """A file meets it when it contains every word, and every `ref` is written as it says:

    ("link", "parent.name")  `name` right after `parent`: as an attribute (`nn.Transformer`,
                             whitespace and comments allowed in between), in `from ...parent
                             import ..., name`, or with `parent` imported under an alias and
                             `.name` written (`import torch.nn as tnn` ... `tnn.Transformer`)
                             -- the only ways a reference to `...parent.name` can resolve
                             through imports (prefilter.ref_alternatives);
    ("attr", n)              `.n`; ("call_or_def", n): `.n(` (a method call, not an attribute read:
                             `args.cuda`), or `def n`;
    ("quoted", n)            a string literal starting with `n` (`'n`, `"n`; "quoted_any_case": in any case);
    ("keyword", n)           `n` written as a keyword argument (`n=`) or as a quoted dict key (`'n'`);
    ("quoted_end", n)        a string literal whose value ends with `n` (`'x.cu'`, `"gpu"`; also split by an
                             implicit concatenation or spelled with an escape: prefilter.ref_regexes);
    ("cuda_pair", n)         `cuda:n` in any case, spaces allowed around the colon (torch's per-device
                             backend string "cpu:gloo,cuda:nccl", whose CUDA pair need not come first);
    ("attr_or_import", n)    `.n`, or `n` imported (`from x import ..., n`);
    ("import", m)            an import of module `m` (`import m`, `import a, m.sub`, `from m...`);
    ("star_import", "")      `import *`;   ("attr_of", a)  `a.`;
    ("decorator", n)         `@n` (a decorator that is the name itself, called or not);
    ("index_call", n)        `n(0)`: called with an integer literal alone;
    ("import_as", n)         `n` imported under another name (`from torch import device as Device`).
    """

    words: FrozenSet[Word]
    refs: FrozenSet[Tuple[str, str]] = frozenset()
    # For partial.py, which looks at one top-level statement at a time: the word the matched
    # code itself contains (the last part of a qualified name, `import` for an import; None
    # when the requirement has one word, which is then it), and the qualified name a
    # requirement of `components` stands for (reached through aliases: `tc.synchronize()`).
    leaf: Optional[Word] = None
    name: str = ""
    # Whether the words may be written only inside a string literal (an argparse option, a
    # device string); the others are identifiers of the code (see prefilter.code_words).
    in_strings: bool = False
    # Modules whose import anywhere in the file (or of a submodule) means the rule cannot match
    # there: a method finding's `unless` (codemods/findings.py _imports_any). Only the
    # prefilter's second look, with Python's tree (engine.py), reads it.
    unless: FrozenSet[str] = frozenset()
    # Of a finding reported only in a file that uses the device (`context = "device"`, NPU306's
    # `.double()`: codemods/findings.py uses_device, the torch pass required torch_npu or the file
    # imports it): it counts only beside another requirement met, or the word `torch_npu`
    # (prefilter.Prefilter._meets_own).
    with_device: bool = False

    @property
    def leaf_word(self) -> Optional[Word]:
        if self.leaf is not None:
            return self.leaf
        return next(iter(self.words)) if len(self.words) == 1 else None


# ----------------------------------------------------------------------------- constructors


def components(qualname: str) -> Requirement:
    """A reference to a qualified name: each of its parts, the last two linked."""
    parts = [p for p in qualname.split(".") if p]
    refs = frozenset({("link", ".".join(parts[-2:]))}) if len(parts) > 1 else frozenset()
    return Requirement(frozenset(Word(p) for p in parts), refs, leaf=Word(parts[-1]) if parts else None,
                       name=".".join(parts))


def attribute(name: str) -> Requirement:
    """`.name` (an attribute or a method call on any receiver)."""
    return Requirement(frozenset({Word(name)}), frozenset({("attr", name)}))


def method_or_def(name: str) -> Requirement:
    """`.name(` (called: the method kind renames calls; `args.cuda` stays), or `def name` (a
    class's own method, renamed with its callers)."""
    return Requirement(frozenset({Word(name)}), frozenset({("call_or_def", name)}))


def quoted(word: str, ignore_case: bool = False) -> Requirement:
    """A string literal that starts with `word`: "cuda", 'cuda:0', f"cuda:{i}", "NCCL"."""
    return Requirement(frozenset({Word(word, ignore_case)}),
                       frozenset({("quoted_any_case" if ignore_case else "quoted", word)}), in_strings=True)


def cuda_pair(backend: str) -> Requirement:
    """torch's per-device backend string with the CUDA pair anywhere ("cpu:gloo,cuda:nccl"):
    the backend word, and `cuda:backend` written (the string may start with another pair, so
    `quoted` cannot find it)."""
    return Requirement(frozenset({Word(backend, True)}), frozenset({("cuda_pair", backend)}), in_strings=True)


def plain_words(*names: str, ignore_case: bool = False) -> List[Requirement]:
    """One requirement per word, written anywhere (strings included)."""
    return [Requirement(frozenset({Word(n, ignore_case)}), in_strings=True) for n in names if n]


def options_with_literal(names, literal: str) -> List[Requirement]:
    """One requirement per option name, each with `literal` written as a string literal (its
    first word quoted: `"GPU"`): what an argparse default or a comparison of that option with
    the literal needs (kinds/argument.py, kinds/device_dispatch.py: their rewrites and reports
    take only a plain string literal equal to `literal`, codemods/strings.string_value, which
    refuses escapes). An option name written without the literal can match nothing (mindformers
    2.1.0 writes `device`/`target` in 79 of its 98 MindSpore files, "GPU" in 3)."""
    if not literal or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", literal):
        return plain_words(*names)  # (not one word: the option names alone, as before)
    ref = frozenset({("quoted", literal)})
    return [Requirement(frozenset({Word(n), Word(literal)} if n else {Word(literal)}), ref, in_strings=True)
            for n in names]


def codemod_words(entries, ignore_case: bool = True) -> List[Requirement]:
    """The requirements of what a framework codemod's own scan looks for (a `[[finding]]` of
    kind `codemod`: its `words`), one of which a file must meet for the scan to find anything.
    Each entry says how the scan's match is written; `a & b` needs both:

        gpu          the word, in any case, anywhere (strings included: '/device:GPU:%d')
        .shard       an attribute or method `.shard` (the call `ds.shard(...)`)
        @function    `@function` (a decorator: `@function`, `@function(...)`); with `.function`,
                     what a decorator's last name is
    """
    out: List[Requirement] = []
    for entry in entries:
        parts = [_codemod_word(word, ignore_case) for word in entry.split(" & ")]
        if len(parts) == 1:
            out.append(parts[0])
            continue
        # (partial.py keeps the statements that hold the first part's word: the scan's match)
        out.append(Requirement(frozenset().union(*(r.words for r in parts)), frozenset().union(*(r.refs for r in parts)),
                               leaf=parts[0].leaf_word, in_strings=any(r.in_strings for r in parts)))
    return out


def _codemod_word(word: str, ignore_case: bool) -> Requirement:
    if word.startswith("."):
        return attribute(word[1:])
    if word.startswith("@"):
        return Requirement(frozenset({Word(word[1:])}), frozenset({("decorator", word[1:])}))
    return Requirement(frozenset({Word(word, ignore_case)}), in_strings=True)


# An entry of a codemod's words (codemod_words): items joined by ` & `, each `.name`, `@name` or a word.
CODEMOD_WORD_RE = re.compile(r"^[.@]?[A-Za-z_][A-Za-z0-9_]*(?: & [.@]?[A-Za-z_][A-Za-z0-9_]*)*$")


def imported(module: str) -> Requirement:
    """An import of `module` or of a submodule: its first part starts an import path."""
    root = module.split(".", 1)[0]
    req = components(module)
    return Requirement(req.words, req.refs | {("import", root)}, leaf=Word("import"), name=req.name)


def framework_name(name: str, framework: str) -> Requirement:
    """A reference to a canonical framework name (`tensorflow.train.batch`): its last part is
    written as an attribute or imported. Only the framework's own name can be missing from
    the text (`tf.` through a star import; `horovod.keras` is canonicalised to
    `horovod.tensorflow`, which keeps `horovod`). `name` is kept: the framework's pass resolves
    it through the import table, which prefilter.framework_rules_may_apply checks."""
    parts = name.split(".")
    if len(parts) == 1:
        return Requirement(frozenset({Word(name)}))
    root = {Word(parts[0])} if parts[0] != framework else set()
    return Requirement(frozenset({Word(parts[-1])} | root), refs=frozenset({("attr_or_import", parts[-1])}),
                       leaf=Word(parts[-1]), name=name)


def framework_path(name: str, framework: str) -> Requirement:
    """Like framework_name, for the names of Huawei's support list (`tensorflow.contrib.keras`):
    every part between the framework and the last is written too, in the import path or the
    attribute chain that reaches the name (the canonical spellings keep them: `tf.compat.v1.nn.X`
    is `tensorflow.nn.X`, `tensorflow.python.keras.X` is `tensorflow.keras.X`)."""
    req = framework_name(name, framework)
    parts = name.split(".")
    middle = {Word(p) for p in parts[1:-1]} if parts[0] == framework else set()
    return Requirement(req.words | frozenset(middle), req.refs, leaf=Word(parts[-1]), name=name)


def framework_imports(framework: str) -> List[Requirement]:
    """What makes a file use `framework`: an import of one of its modules
    (frameworks.FRAMEWORK_IMPORTS), or a star import and the name the framework always goes by
    (frameworks.STAR_IMPORTED_ALIASES: `from utils import *` then `tf.Session()`)."""
    found = [imported(module) for module, name in FRAMEWORK_IMPORTS if name == framework]
    found += [
        Requirement(frozenset({Word("import"), Word(alias)}), refs=frozenset({("star_import", ""), ("attr_of", alias)}))
        for alias, _module, name in STAR_IMPORTED_ALIASES
        if name == framework
    ]
    return found


# ----------------------------------------------------------------------------- a text's words

# Every byte that cannot be part of an identifier becomes a separator. Bytes of non-ASCII
# characters are separators too: a word then also "appears" in `ñcuda`, which only lets
# more files through, never fewer.
_SEPARATORS = bytes(b for b in range(256) if not (chr(b).isascii() and (chr(b).isalnum() or chr(b) == "_")))
_TO_SPACE = bytes.maketrans(_SEPARATORS, b" " * len(_SEPARATORS))


def words_of(text: str) -> Set[bytes]:
    """The words (identifier-like runs) of a text. A translate and a split run at C speed:
    about 4x faster than one regex over the anchors, whatever the number of rules."""
    return set(text.encode("utf-8", "replace").translate(_TO_SPACE).split())


def matches_at_word_start(pattern: "re.Pattern[str]", text: str) -> Iterator["re.Match[str]"]:
    """The matches of `pattern` in `text` that start a word (no letter, digit or `_` just before),
    in order, without overlapping. The pattern starts with a letter instead of `\\b`: a leading
    `\\b` makes the regex engine try every position (30x slower on a long file)."""
    at = 0
    while True:
        match = pattern.search(text, at)
        if match is None:
            return
        start = match.start()
        if start == 0 or not (text[start - 1].isalnum() or text[start - 1] == "_"):
            yield match
            at = max(match.end(), start + 1)
        else:  # inside a word: look again from its next character (`auto_class` then `def f`)
            at = start + 1
