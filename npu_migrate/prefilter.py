"""The prefilter: a cheap text check that decides, before parsing, whether a file can need anything.

Most files of a large tree need nothing, and parsing is the expensive part (libcst parses about
10k lines/s per core), so a file that cannot match any loaded rule is skipped unparsed.
The check is derived from the rules themselves, so a rule added with `--rules` is never missed.

It must never skip a file that needs work. What makes that hold: every rule of the engine
matches a *name* that has to be written in the file (words.py says why). Each rule therefore
gives one or more *requirements* -- sets of words a file must all contain, and for some of them
how they must be written (`.double` for a method; `nn.Transformer` or `from torch.nn import
Transformer` for a qualified name; see words.Requirement) -- and a file may need work when it
meets one of them. Each kind's module (kinds/) says what its rules require. A rule of a kind
no module describes turns the prefilter off (every file is parsed): slow, never wrong.
"""

from __future__ import annotations

import functools
import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from typing import TYPE_CHECKING, AbstractSet, Any, Callable, Dict, FrozenSet, Iterable, List, Optional, Sequence, Set, Tuple, Union

if TYPE_CHECKING:  # pragma: no cover
    import ast

from .frameworks import FRAMEWORK_IMPORTS, STAR_IMPORTED_ALIASES, TF2_FINDING, Undecided, tensorflow2_reason, tensorflow2_reason_of
from .kinds import KINDS
from .kinds.finding import match_kind_of
from .logical_lines import Unreadable, logical_lines
from .words import Requirement, Word, framework_imports, matches_at_word_start, words_of  # noqa: F401 (Word: for callers)



# id(rule) -> (rule, its kind's requirements): computed once per rule, as the prefilter of a run
# (build_prefilter) and its statement filter (partial.statement_filter) both ask. The rule is
# kept with them, so an id is never taken for another rule's.
_OWN: Dict[int, Tuple[Any, List[Requirement]]] = {}
_OWN_KEPT = 4096  # about ten rule sets' worth (a test process builds many): then start over


def own_requirements(kind, rule) -> List[Requirement]:
    """`kind.requirements(rule)`, computed once per rule (callers never change the list)."""
    found = _OWN.get(id(rule))
    if found is None or found[0] is not rule:
        if len(_OWN) >= _OWN_KEPT:
            _OWN.clear()
        found = _OWN[id(rule)] = (rule, kind.requirements(rule))
    return found[1]


def rule_requirements(rule, forced_framework: str = "auto") -> Optional[List[Requirement]]:
    """The requirements one of which a Python file must meet for `rule` to apply to it, as its
    kind (kinds/) says; None when the prefilter does not know the rule's kind (then it cannot
    skip any file). `forced_framework` is --framework: "auto" means frameworks are detected
    from imports."""
    kind = KINDS.get(rule.kind)
    if kind is None:
        return None
    own = own_requirements(kind, rule)
    if not rule.framework or forced_framework == rule.framework:
        return own
    # TensorFlow/MindSpore rules apply only to files that use the framework: its import,
    # unless --framework says so. (Their names are canonicalised, so not every component is
    # written: the kinds give the words one of which must appear.)
    return [Requirement(t.words | imp.words, t.refs | imp.refs, in_strings=t.in_strings)
            for t in own for imp in framework_imports(rule.framework)]


# A comment, matched only whole (to its line's end or the next `#`): else the spaces that end it
# can be taken by the comment or by a gap's space, each comment splits many ways, and a banner of
# comment lines padded with spaces after a `.` (avalanche-lib 0.6.0's licence header: `# ...
# ContinualAI.<46 spaces>#` x 7) backtracks for ever in a gap that then finds no name.
_COMMENT = r"#[^\r\n#]*(?![^\r\n#])"
# Between the parts of an attribute chain: spaces, line continuations, and inside brackets
# newlines and comments.
_CHAIN_GAP = rf"(?:[ \t\f\r\n\\]|{_COMMENT})*"
# Within one logical line: spaces and line continuations.
_LINE_GAP = r"(?:[ \t\f]|\\\r?\n)"
# The rest of an import statement up to a name: a parenthesised list (comments allowed), or
# the logical line. A comment matches only whole: else `[^)#]` takes the rest of it, and a list
# of 20 commented-out names (mindnlp's mindtorch/distributed/__init__.py) backtracks for ever.
_IMPORT_LIST = rf"(?:\((?:[^)#]|{_COMMENT})*?|(?:[^\r\n\\]|\\(?:\r?\n|.))*?)"


def link_regex(parent: str, name: str, aliased: bool = True) -> str:
    """`parent.name`, `parent import [(]..., name`, or `parent as` (with `aliased`; see
    Requirement: the prefilter also needs `.name` then, `link_alternatives`).

    The pattern starts with the literal `parent` so that the regex engine can jump between
    its occurrences (a leading `\\b` makes it try every position: 30x slower); `link_found`
    checks the word boundary before it."""
    p, n = re.escape(parent), re.escape(name)
    return (
        rf"{p}\b(?:{_CHAIN_GAP}\.{_CHAIN_GAP}{n}\b"
        + (rf"|{_LINE_GAP}+as\b" if aliased else "")
        + rf"|{_LINE_GAP}+import{_LINE_GAP}*{_IMPORT_LIST}\b{n}\b)"
    )


def ref_alternatives(kind: str, name: str) -> Tuple[Tuple[str, ...], ...]:
    """The patterns of a ref: it is found where every pattern of one alternative matches.
    A `link` under an alias (`import torch.nn as tnn`) needs the name written as an attribute
    of that alias too (`tnn.Transformer`: the import table resolves nothing else), anywhere in
    the text (a function may use the alias above the import): link_found, _ALIAS_USES;
    `import torch.nn as nn` and the word Transformer in a docstring (8 of transformers' files)
    meet no `torch.nn.Transformer`, nor `import torch.nn.functional as F` and `torch.pdist`
    (lightly 1.6.0's hypersphere_loss.py) `torch.nn.functional.pdist`."""
    if kind == "link":
        parent, last = name.split(".")
        # (the comment names `last`: links of one parent share the rest of the pattern)
        aliased = rf"{re.escape(parent)}\b{_LINE_GAP}+as{_LINE_GAP}+([A-Za-z_]\w*)\b(?#{last})"
        _ALIAS_USES[aliased] = last
        return ((link_regex(parent, last, aliased=False),), (aliased,))
    return tuple((p,) for p in ref_regexes(kind, name))


def ref_regexes(kind: str, name: str) -> Tuple[str, ...]:
    """The patterns one of which must match for a ref (see Requirement.refs) other than a
    `link` (ref_alternatives). Each starts with a literal (fast to search for); `link_found`
    checks the word boundary before it."""
    n = re.escape(name)
    attribute = rf"\.{_CHAIN_GAP}{n}\b"
    imported = rf"import\b{_LINE_GAP}*{_IMPORT_LIST}\b{n}\b"
    if kind == "attr":
        return (attribute,)
    if kind == "attr_or_import":
        return (attribute, imported)
    if kind == "call_or_def":  # `.n(`: a method called (not a flag read: `args.cuda`), or `def n`
        return (rf"\.{_CHAIN_GAP}{n}{_CHAIN_GAP}\(", rf"def{_LINE_GAP}+{n}\b")
    if kind == "quoted":
        quoted = rf"['\"]{n}\b"
        _LEADS[quoted] = ("'" + name, '"' + name)
        return (quoted,)
    if kind == "quoted_end":
        return _ending_regexes(name)
    if kind == "keyword":  # `name=` (a keyword argument; not `==`), or `'name'` (a dict's string key)
        key = rf"['\"]{n}['\"]"
        _LEADS[key] = ("'" + name, '"' + name)
        return (rf"{n}{_CHAIN_GAP}=(?!=)", key)
    if kind == "quoted_any_case":
        return (rf"(?i)['\"]{n}\b",)
    if kind == "cuda_pair":
        return (rf"(?i)cuda\s*:\s*{n}\b",)
    if kind == "star_import":
        return (rf"import{_LINE_GAP}*\*",)
    if kind == "attr_of":
        return (rf"{n}{_CHAIN_GAP}\.",)
    if kind == "decorator":  # `@name`, `@ (name)(...)`: brackets, spaces and comments between
        return (rf"@(?:[ \t\f\r\n\\(]|{_COMMENT})*{n}\b",)
    if kind == "index_call":  # `device(0)`: called with an integer literal alone
        return (rf"{n}{_CHAIN_GAP}\({_CHAIN_GAP}\d+{_CHAIN_GAP}\)",)
    if kind == "import_as":  # `from torch import device as Device`
        renamed = rf"import{_LINE_GAP}*{_IMPORT_LIST}\b{n}{_LINE_GAP}+as\b"
        _GATES[renamed] = rf"{n}{_LINE_GAP}+as\b"
        return (renamed,)
    if kind == "import":
        item = rf"[\w.]+(?:{_LINE_GAP}+as{_LINE_GAP}+\w+)?"
        return (rf"from{_LINE_GAP}+{n}\b", rf"import{_LINE_GAP}+(?:{item}{_LINE_GAP}*,{_LINE_GAP}*)*{n}\b")
    raise ValueError(f"unknown ref kind {kind!r}")


def _ending_regexes(name: str) -> Tuple[str, ...]:
    """A `quoted_end` ref's patterns: where a string literal's value ends with `name` (what
    codemods/findings.arguments_match's `suffixes` read: a literal's value, the pieces of an
    implicit concatenation joined, an f-string's last text), the text has `name` right before a
    closing quote; or, split between the pieces, a piece (after a quote, or an f-string's last
    `}`) that is a proper tail of it closed right there (`"g" "pu"`); or an escape that spells a
    letter or a character of it (`\\x75`, `\\165`, `\\u0075`, `\\N{...}`), or a line continuation
    inside the string."""
    whole = re.escape(name) + "['\"]"
    _LEADS[whole] = (name,)  # (anywhere: `'xgpu'` ends with gpu too, so no word start)
    found = [whole]
    tails = [name[i:] for i in range(1, len(name))]
    if tails:
        split = "['\"}](?:" + "|".join(re.escape(t) for t in tails) + ")['\"]"
        _LEADS[split] = tuple(opening + t for opening in "'\"}" for t in tails)
        found.append(split)
    found.append(r"\\[xuUN0-7\r\n]")
    return tuple(found)


# pattern -> the regex: every Prefilter's refs (the files' and partial.py's statements' share
# most) and partial.py's alias links, compiled when first searched for. A one-file run searches
# for ~a third of the patterns its candidates name (a match ends an alternative, a miss its
# `all`); compiling each took ~0.3 ms (Python's re parser), ~60 of them at every start.
_COMPILED: Dict[str, "re.Pattern[str]"] = {}


def compiled(pattern: str) -> "re.Pattern[str]":
    """`re.compile(pattern)`, once per process (not through re's own cache: 512 entries, fewer
    than the patterns of the TensorFlow rules a run over many files may search for)."""
    regex = _COMPILED.get(pattern)
    if regex is None:
        regex = _COMPILED[pattern] = re.compile(pattern)
    return regex


# A ref's pattern -> the literals one of which starts each of its matches (a `quoted` ref's
# `['"]cuda\b`: `'cuda` or `"cuda`): found with str.find, the pattern tried only there (led by
# a character class, the regex tried every position of the text; transformers: 0.040 -> 0.012
# CPU-s). Filled by ref_regexes.
_LEADS: Dict[str, Tuple[str, ...]] = {}
# A ref's pattern -> a pattern that matches a part of each of its matches and starts with a
# literal (an `import_as` ref's `import ... \bdevice as\b`: `device as\b`): where that finds
# nothing, neither does the ref's (which otherwise backtracked through every import statement
# of the text looking for the name; transformers: 0.038 -> 0.025 CPU-s). Filled by ref_regexes.
_GATES: Dict[str, str] = {}
# A `link` ref's alias pattern (ref_alternatives: `functional as F`) -> the name it needs written
# as an attribute of one of the aliases it binds (`F.pdist`): link_found.
_ALIAS_USES: Dict[str, str] = {}


def link_found(pattern: "re.Pattern[str]", text: str) -> bool:
    """Whether `pattern` (which starts with a word) matches where a word starts."""
    leads = _LEADS.get(pattern.pattern)
    if leads is not None:
        return any(_matches_from(pattern, text, lead) for lead in leads)
    gate = _GATES.get(pattern.pattern)
    if gate is not None and compiled(gate).search(text) is None:
        return False
    last = _ALIAS_USES.get(pattern.pattern)
    if last is not None:  # `functional as F` and `F.pdist`, in either order
        return any(next(matches_at_word_start(compiled(rf"{re.escape(alias)}{_CHAIN_GAP}\.{_CHAIN_GAP}{re.escape(last)}\b"),
                                              text), None) is not None
                   for alias in {match.group(1) for match in matches_at_word_start(pattern, text)})
    if not pattern.pattern[:1].isalnum():
        return pattern.search(text) is not None
    return next(matches_at_word_start(pattern, text), None) is not None


def _matches_from(pattern: "re.Pattern[str]", text: str, lead: str) -> bool:
    """Whether `pattern` matches at an occurrence of `lead` in `text`."""
    at = text.find(lead)
    while at >= 0:
        if pattern.match(text, at) is not None:
            return True
        at = text.find(lead, at + 1)
    return False


class Prefilter:
    """`may_need_work(text)`: whether a Python file meets one of the rules' requirements.

    The words of the file are collected once (`words_of`); each requirement is indexed by one
    of its words (its *anchor*), so a file only looks at the requirements whose anchor it
    contains. Requirements with refs are checked last, with regexes, at most once per ref.
    """

    def __init__(self, requirements: Optional[Iterable[Requirement]],
                 gated: Sequence[Tuple[str, "Prefilter", Union["Prefilter", Callable[[], "Prefilter"]]]] = ()) -> None:
        """`gated`: (framework, gate, body); a file meets one when it meets the gate and the
        body (and uses the framework, when the caller knows: may_need_work). A framework's
        rules are gated by its imports (build_prefilter): the same answer as each rule's
        requirements joined with each import's, without their product (9,019 requirements to
        build and sort at every start instead of ~2,100)."""
        self.disabled = requirements is None
        # a body may be given as a function that builds it: built when a file first meets its
        # gate (a PyTorch script never builds the 1,762 TensorFlow requirements' body)
        self._gated: List[List[Any]] = [[gate, body, framework] for framework, gate, body in gated]
        # Requirements without refs first: they need no regex. Otherwise in the order given
        # (the answer does not depend on it; sorting 9,000 by their words cost 0.3 s a start).
        unique = dict.fromkeys(requirements or ())
        self.requirements: Tuple[Requirement, ...] = tuple(sorted(unique, key=lambda r: bool(r.refs)))
        self._checks = [_compile(req) for req in self.requirements]
        self._by_word: Dict[bytes, List[int]] = {}  # anchor (exact word) -> requirement indexes
        # anchor (any case, lower-cased, as b" word ": see _meets_own) -> indexes
        self._by_folded: Dict[bytes, List[int]] = {}
        self._always: List[int] = []  # requirements of prefix words only
        for i, (exact, folded, _prefixes) in enumerate(self._checks):
            if exact:
                self._by_word.setdefault(max(exact, key=lambda w: (len(w), w)), []).append(i)
            elif folded:
                self._by_folded.setdefault(b" %s " % max(folded, key=lambda w: (len(w), w)), []).append(i)
            else:
                self._always.append(i)
        # A short any-case anchor (`nccl`) is found as one of its spellings in the set of words:
        # a word is an ASCII run (words_of), so it is `nccl` in any case exactly when it is one
        # of the 2**letters spellings. Longer ones are looked up in the lower-cased words (_meets_own).
        self._by_spelling: Dict[bytes, List[int]] = {}
        for key in [k for k in self._by_folded if len(k) - 2 <= _MAX_SPELLED]:
            for spelling in _spellings(key[1:-1]):
                self._by_spelling.setdefault(spelling, []).extend(self._by_folded[key])
            del self._by_folded[key]
        # every anchor looked up in a set of words (one intersection with each text's words)
        self._anchors = frozenset(self._by_word).union(self._by_spelling)
        # any-case word (lower case) -> its spellings, for the short ones of every requirement
        self._spelled: Dict[bytes, FrozenSet[bytes]] = {
            word: frozenset(_spellings(word)) for _exact, folded, _prefixes in self._checks for word in folded
            if len(word) <= _MAX_SPELLED}
        # whether a requirement does not count in a file importing one of its modules (`unless`)
        self._unless = any(req.unless for req in self.requirements)
        # requirement index -> the word of its string literal (a `quoted` ref): counts only where
        # that word is written outside docstrings, when the caller can tell (may_need_work)
        self._quoted: Dict[int, str] = {i: word for i, req in enumerate(self.requirements)
                                        for kind, word in sorted(req.refs) if kind in _QUOTED}
        # requirements of findings reported only where the file uses the device (words.Requirement
        # .with_device): met alone, they count only in a file with the word torch_npu
        self._with_device: FrozenSet[int] = frozenset(i for i, req in enumerate(self.requirements) if req.with_device)
        # ref -> its alternatives (ref_alternatives), compiled when first needed
        self._refs: Dict[Tuple[str, str], Tuple[Tuple[str, ...], ...]] = {}  # ref -> ref_alternatives
        # (text, words, whether they meet the requirements of no gate: _meets_own, the refs looked up
        # in it): of the last text asked about
        self._last: Tuple[Optional[str], Optional[AbstractSet[bytes]], int, Dict[Tuple[str, str], bool]] = (
            None, None, 0, {})

    def may_need_work(self, text: str, words: Optional[AbstractSet[bytes]] = None,
                      frameworks: Optional[AbstractSet[str]] = None,
                      imports: Optional[Callable[[], AbstractSet[str]]] = None,
                      written: Optional[Callable[[str], bool]] = None) -> bool:
        """`words`: words_of(text), when the caller has it. `frameworks`: those the file uses,
        when the caller knows them (engine.py, from Python's tree): the rules of another
        framework then do not count, whatever its gate says (its pass does not run: passes.py).
        `imports()`: the modules the file imports anywhere, when the caller can tell them
        (engine.py, Python's tree): a requirement whose rule does not match where one of its
        `unless` modules is imported does not count there (gpytorch's `.to_dense()` calls).
        `written(word)`: whether a string literal starting with a word may be written outside
        the file's docstrings (engine.py: LazyCodeWords.quoted_outside_bare_strings): a
        requirement of a string literal (a `quoted` ref: a device string, a backend, an
        environment variable's name) counts only where it may be (a string alone as a statement
        is nobody's argument or value: mmocr's "Must be 'cpu' or 'gpu'" in its metrics'
        docstrings)."""
        if self.disabled:
            return True
        if words is None:
            words = words_of(text)
        last = self._last
        if last[0] is text and last[1] is words:  # (asked again with the frameworks: engine.py)
            own, found = last[2], last[3]
        else:
            found = {}
            own = self._meets_own(text, words, found=found)
            self._last = (text, words, own, found)
        if own == _MET_IF and ((imports is not None and self._unless) or (written is not None and self._quoted)):
            own = self._meets_own(text, words, imports, written, found)
        return bool(own) or any(
            (frameworks is None or pair[2] in frameworks)
            and pair[0]._meets_own(text, words) and self._body(pair)._meets_own(text, words) for pair in self._gated
        )

    @staticmethod
    def _body(pair: List[Any]) -> "Prefilter":
        if not isinstance(pair[1], Prefilter):
            pair[1] = pair[1]()
        return pair[1]

    def _meets_own(self, text: str, words: AbstractSet[bytes],
                   imports: Optional[Callable[[], AbstractSet[str]]] = None,
                   written: Optional[Callable[[str], bool]] = None,
                   found: Optional[Dict[Tuple[str, str], bool]] = None) -> int:
        """Whether the text meets a requirement: _MET (one that counts whatever the file imports and
        wherever its string literals are: no `unless`, no `quoted` ref), _MET_IF (another one), or
        0. `found`: the refs already looked up in this text (filled)."""
        candidates = list(self._always)
        for word in self._anchors.intersection(words):
            candidates.extend(self._by_word.get(word, ()))
            candidates.extend(self._by_spelling.get(word, ()))
        # " word word ... " in lower case: a word is there in any case where b" word " occurs
        # (a few searches in one string: splitting it into a set of words cost more, per chunk
        # of every file partial.py looks at)
        lowered = b""
        if self._by_folded:
            lowered = b" %s " % b" ".join(words).lower()
            for word, found_at in self._by_folded.items():
                if word in lowered:
                    candidates.extend(found_at)
        if not candidates:
            return 0
        joined = b""  # " word word ...": a word starts with p where b" " + p occurs
        if found is None:
            found = {}  # refs already looked up in this text
        imported: Optional[AbstractSet[str]] = None
        later: List[int] = []  # met but for `written` (asked last: it may read Python's tokens)
        for i in sorted(set(candidates)):
            exact, folded, prefixes = self._checks[i]
            if not exact <= words:
                continue
            unless = self.requirements[i].unless
            if unless and imports is not None:
                imported = imports() if imported is None else imported
                if any(m == root or m.startswith(root + ".") for m in imported for root in unless):
                    continue  # (codemods/findings.py _imports_any)
            if folded:
                if any(w in self._spelled and words.isdisjoint(self._spelled[w]) for w in folded):
                    continue  # a short one in none of its spellings
                longer = [w for w in folded if w not in self._spelled]
                if longer:
                    lowered = lowered or b" %s " % b" ".join(words).lower()
                    if not all(b" %s " % w in lowered for w in longer):
                        continue
            if prefixes:
                if len(prefixes) == 1 and len(words) < 64:  # (a chunk's few words: no string of them)
                    if not any(w.startswith(prefixes[0]) for w in words):
                        continue
                else:
                    joined = joined or b" " + b" ".join(words)
                    if not all(b" " + p in joined for p in prefixes):
                        continue
            if i in self._with_device and b"torch_npu" not in words:
                # (a `.double()` is NPU306's only where the torch pass moved something, which
                # another requirement met says, or where torch_npu is imported)
                continue
            if all(self._ref_found(ref, text, found) for ref in self.requirements[i].refs):
                if written is None or i not in self._quoted:
                    return _MET_IF if unless or i in self._quoted else _MET
                later.append(i)
        return _MET_IF if written is not None and any(written(self._quoted[i]) for i in later) else 0

    def _ref_found(self, ref: Tuple[str, str], text: str, found: Dict[Tuple[str, str], bool]) -> bool:
        known = found.get(ref)
        if known is None:
            alternatives = self._refs.get(ref)
            if alternatives is None:
                alternatives = self._refs[ref] = ref_alternatives(*ref)
            known = found[ref] = any(all(link_found(compiled(p), text) for p in alternative)
                                     for alternative in alternatives)
        return known


# What Prefilter._meets_own answers when a requirement is met: one that counts in any file with
# the words (the answer with `imports` and `written` too), or one that may not count there.
_MET, _MET_IF = 2, 1
# The refs of a string literal's word (words.Requirement): no rule matches a string standing alone
# as a statement (a docstring), so such a requirement counts only where its word is written elsewhere.
_QUOTED = ("quoted", "quoted_any_case")
# The longest any-case anchor looked up by its spellings (Prefilter._by_spelling): 2**8 words.
_MAX_SPELLED = 8


def _spellings(word: bytes) -> List[bytes]:
    """Every spelling of an ASCII `word` (lower case) in any case: b"nccl" -> b"nccl", b"Nccl", ..."""
    out = [b""]
    for byte in word:
        letter = bytes([byte])
        out = [head + variant for head in out for variant in dict.fromkeys((letter, letter.upper()))]
    return out


def _compile(req: Requirement) -> Tuple[FrozenSet[bytes], FrozenSet[bytes], Tuple[bytes, ...]]:
    """(whole words, whole words in any case (lower-cased), word prefixes) as bytes."""
    exact = frozenset(w.text.encode() for w in req.words if not w.prefix and not w.ignore_case)
    folded = frozenset(w.text.lower().encode() for w in req.words if not w.prefix and w.ignore_case)
    prefixes = tuple(sorted(w.text.encode() for w in req.words if w.prefix))
    return exact, folded, prefixes


# The parts a framework pass's canonical spelling may put in a resolved name that the code
# did not write (codemods/tensorflow.py: `horovod.keras.X` is `horovod.tensorflow.X`).
_CANONICAL_WORDS = frozenset(part for module, _ in FRAMEWORK_IMPORTS for part in module.split("."))
# The kinds whose rules act only where one of their `apis` is called (callrules/planner.py
# _plan_api_call): a reference that is no call (`isinstance(spec, tf.estimator.EstimatorSpec)`,
# a base class) needs none of them.
_CALL_KINDS = frozenset({"call_rename", "call_replace", "call_config", "argument", "add_keyword"})


def instance_methods_of(rules) -> Set[str]:
    """The names of call_config rules the Planner may match through a variable's value rather than
    the imports (callrules/planner.py `_instance_method`: `sv.managed_session` where `sv` is
    assigned `tf.train.Supervisor(...)`): a method of a class, `tensorflow.train.Supervisor.
    managed_session`. The Planner makes such a name of a call's callee and an attribute, so the
    callee is the name's parent; a parent whose last part is lowercase is a module of the
    framework (`tensorflow` of `tensorflow.Session`, `tensorflow.estimator` of
    `tensorflow.estimator.Estimator`), which no code calls (a module is not callable): those
    names need their last part resolved through the imports like any other (CodeWords.resolved;
    adanet 0.9.0's `tf_compat.v1.Session()`, its own module, made the file whole:
    tests/test_work_budget.py)."""
    from .kinds.call_config import KIND as CALL_CONFIG

    return {api for rule in rules if rule.kind == CALL_CONFIG.name for api in rule.call.apis
            if "." in api and api.rsplit(".", 2)[-2][:1].isupper()}


class RulePrefilter:
    """The prefilter of a rule set: one `Prefilter` per --framework value, built on first use;
    and one per framework of just that framework's rules (`framework_rules_may_apply`)."""

    def __init__(self, rules) -> None:
        self.rules = rules
        self._by_framework: Dict[str, Prefilter] = {}
        # framework (with " rewrites": of its rules that are not findings) -> its checks
        self._of_framework: Dict[str, Optional[List[Tuple[Prefilter, bool, FrozenSet[str], str, str]]]] = {}

    def framework_rules_may_apply(self, code: "CodeWords", framework: str, rewrites_only: bool = False,
                                  written: Optional[Callable[[str], bool]] = None,
                                  tree: Optional[Callable[[str], bool]] = None) -> bool:
        """Whether one of `framework`'s own rules can match in a file that uses the framework,
        judged by the words of its code: a TensorFlow file that was let through by a word in
        a docstring (`model.fit()` in transformers' docs) needs no TensorFlow pass.

        A rule's qualified name (`tensorflow.device`) is matched only where the import table
        resolves a reference to it (codemods/callrules/planner.py `qual`), so its last part must
        be a part of a resolvable name under the same first part (CodeWords.resolved): the
        `device` of `torch.device` or `x.device` is not `tensorflow.device`. Not so for the
        methods of a call_config rule (`Supervisor.managed_session`: the Planner resolves
        `sv.managed_session` through the value of `sv`), nor for a last part that the pass's
        canonical spelling may write (`horovod.keras` -> `horovod.tensorflow`).

        `rewrites_only`: only the rules that are not findings (what follows bindings from
        statement to statement, engine.py: a TensorFlow file whose findings alone can match is
        parsed partially).

        `written(word)`: whether a word is written in the file outside its docstrings
        (LazyCodeWords.written_outside_bare_strings); an [[argument]] rule whose every action
        needs its `unknown_contains` written (_required_word) needs it there (mesh-tensorflow's
        ops.py: `tf.device(...)` calls, "gpu" only in a docstring).

        `tree(fact)`: whether the file's tree may hold what some rewrites need (tree_facts,
        LazyCodeWords.holds); with `rewrites_only`, the requirements of those rewrites count
        only then (_fact_of): a device target's ([[device_dispatch]], an [[argument]] rule's
        argparse `options`) only with an `add_argument` call or an `if` comparing a name with
        "GPU"/"Ascend" (mindformers' callback.py, 193 KB: `get_context("device_target") ==
        "GPU"`); an [[entry_setup]]'s only with a main block, without which it can only report
        (transformers' modeling_tf_utils.py, 166 KB: `def fit` calling `super().fit(...)`)."""
        key = f"{framework} rewrites" if rewrites_only else framework
        checks = self._of_framework.get(key)
        if checks is None:
            checks = self._of_framework[key] = self._framework_checks(framework, rewrites_only)
        if checks is None:
            return True
        identifiers = code.identifiers | code.resolved | code.called | {b"." + a for a in code.attributes}
        with_strings = identifiers | code.strings
        return any(
            roots <= code.imported and prefilter.may_need_work("", with_strings if in_strings else identifiers)
            and (not word or written is None or written(word))
            and (not fact or tree is None or tree(fact))
            for prefilter, in_strings, roots, word, fact in checks
        )

    def _framework_checks(self, framework: str, rewrites_only: bool = False
                          ) -> Optional[List[Tuple[Prefilter, bool, FrozenSet[str], str, str]]]:
        """framework_rules_may_apply's checks: one Prefilter per (whether the words may be in
        strings, the modules a requirement's refs say must be imported), of the requirements'
        words (with `.name` for an `attr` ref: CodeWords.attributes; the other refs look at
        text; and the word a rule needs written outside docstrings: _required_word; and, with
        `rewrites_only`, the fact of the tree its rewrites need: _fact_of); None when a rule's
        kind is unknown."""
        rules = [rule for rule in self.rules.framework_rules.get(framework, ())
                 if rule.code != TF2_FINDING  # TF 2 files are told apart before (engine.py)
                 and not (rewrites_only and rule.kind == "finding")]
        instance_methods = instance_methods_of(rules)
        groups: Dict[Tuple[bool, FrozenSet[str], str, str], List[Requirement]] = {}
        for rule in rules:
            reqs = rule_requirements(rule, forced_framework=framework)
            if reqs is None:
                return None
            required = _required_word(rule)
            fact, of_fact = _fact_of(rule) if rewrites_only else ("", frozenset())
            # (a call kind acts on calls of its names only: callrules/planner.py _plan_api_call)
            called = set(rule.call.apis) if rule.kind in _CALL_KINDS else set()
            for req in reqs:
                roots = frozenset(name for kind, name in req.refs if kind == "import")
                words = req.words
                last = req.name.rsplit(".", 1)[-1]
                if (req.name and req.refs == {("attr_or_import", last)} and req.name not in instance_methods
                        and last not in _CANONICAL_WORDS):
                    # CodeWords.called, else CodeWords.resolved
                    words = words | {Word(f"{req.name.split('.', 1)[0]}.{last}" + ("(" if req.name in called else ""))}
                # a method (`.batch`): a name written as an attribute (CodeWords.attributes), not
                # any name (t2t's `batch` variables)
                words = words | {Word("." + name) for kind, name in req.refs if kind == "attr"}
                groups.setdefault((req.in_strings, roots, required, fact if req in of_fact else ""), []).append(
                    Requirement(words))
        return [(Prefilter(reqs), in_strings, roots, required, fact)
                for (in_strings, roots, required, fact), reqs in groups.items()]

    def may_need_work(self, text: str, framework: str = "auto", words: Optional[AbstractSet[bytes]] = None,
                      frameworks: Optional[AbstractSet[str]] = None,
                      imports: Optional[Callable[[], AbstractSet[str]]] = None,
                      written: Optional[Callable[[str], bool]] = None) -> bool:
        prefilter = self._by_framework.get(framework)
        if prefilter is None:
            prefilter = self._by_framework[framework] = build_prefilter(self.rules, framework)
        return prefilter.may_need_work(text, words, frameworks, imports, written)


_RULE_PREFILTERS: Dict[str, RulePrefilter] = {}  # rule set fingerprint -> its prefilters


def _rule_prefilter(rules) -> RulePrefilter:
    found = _RULE_PREFILTERS.get(rules.fingerprint)
    if found is None or found.rules is not rules:
        found = _RULE_PREFILTERS[rules.fingerprint] = RulePrefilter(rules)
    return found


def may_need_work(rules, text: str, framework: str = "auto", words: Optional[AbstractSet[bytes]] = None,
                  frameworks: Optional[AbstractSet[str]] = None,
                  imports: Optional[Callable[[], AbstractSet[str]]] = None,
                  written: Optional[Callable[[str], bool]] = None) -> bool:
    """Whether a Python file can need anything at all under `rules` (words derived from the
    rules); False means it is skipped without being parsed. `framework`: --framework.
    `words`: words_of(text), when the caller has it. `frameworks`: the frameworks the file
    uses, once Python's tree tells them (engine.py asks again then: a PyTorch file that imports
    TensorFlow only inside a function needs no TensorFlow rule, which its text cannot tell).
    `imports()`: the modules it imports anywhere, from the same tree (a method finding's
    `unless`: linear_operator's `.to_dense()` in gpytorch's modules is no tensor's);
    `written(word)`: whether a string literal starting with a word may be written outside its
    docstrings (the rules of a string literal: device strings, backends)."""
    return _rule_prefilter(rules).may_need_work(text, framework, words, frameworks, imports, written)


def own_rules_may_apply(rules, text: str, words: Optional[AbstractSet[bytes]] = None,
                        imports: Optional[Callable[[], AbstractSet[str]]] = None,
                        written: Optional[Callable[[str], bool]] = None) -> bool:
    """may_need_work with no framework's own rules counted (frameworks=(): the rules of no
    gated framework), as for a file whose framework's pass is known to do one thing
    (engine._tensorflow2_only). False does not say the file needs nothing."""
    return _rule_prefilter(rules).may_need_work(text, "auto", words, frozenset(), imports, written)


def framework_rules_may_apply(rules, code: "CodeWords", framework: str, rewrites_only: bool = False,
                              written: Optional[Callable[[str], bool]] = None,
                              tree: Optional[Callable[[str], bool]] = None) -> bool:
    """Whether one of `framework`'s rules (`rewrites_only`: of those that are not findings) can
    match in a file using it, whose CodeWords are `code` (`written`, `tree`: RulePrefilter's)."""
    return _rule_prefilter(rules).framework_rules_may_apply(code, framework, rewrites_only, written, tree)


def tree_facts(code: "LazyCodeWords", mindspore_device_moves: Sequence[str]) -> Callable[[str], bool]:
    """framework_rules_may_apply's `tree` for a file (engine.py, Context): what its Python tree
    holds (LazyCodeWords.holds); a device target may move without an option or an `if` when a
    value crosses modules in this run (Options.mindspore_device_moves: device_dispatch then
    moves comparisons and a parameter's default)."""
    def tree(fact: str) -> bool:
        return (fact == "device_target" and bool(mindspore_device_moves)) or code.holds(fact)

    return tree


def _fact_of(rule) -> Tuple[str, FrozenSet[Requirement]]:
    """The fact of a file's tree (LazyCodeWords.holds) without which `rule` rewrites nothing,
    and the requirements of `rule` that serve only those rewrites ("", none: no such fact):

    device_target   every requirement of a [[device_dispatch]] rule (codemods/device_dispatch.
                    analyse rewrites, keeps or reports only at an `add_argument` option, an `if`
                    that compares a name or attribute with a target literal, or a value another
                    module of the run moves with: Options.mindspore_device_moves), and those of an
                    [[argument]] rule's argparse `options` (Planner._plan_argparse: an
                    `add_argument` call);
    main_guard      every requirement of an [[entry_setup]] rule: without a main block it only
                    reports (callrules/program.py _plan_entry_setups), from statements the partial
                    text of the framework's findings keeps (partial.statement_filter)."""
    if rule.kind == "device_dispatch":
        return "device_target", frozenset(own_requirements(KINDS[rule.kind], rule))
    if rule.kind == "argument":
        from .kinds.argument import option_requirements

        return "device_target", frozenset(option_requirements(rule))
    if rule.kind == "entry_setup":
        return "main_guard", frozenset(own_requirements(KINDS[rule.kind], rule))
    return "", frozenset()


_LENGTH_BOUND = re.compile(r"\(\?=\[\\s\\S\]\{0,[0-9]+\}\\Z\)\(\?:(.*)\)", re.DOTALL)


def _required_word(rule) -> str:
    """The word an [[argument]] rule with a `pattern` and `unknown_contains` needs written for
    anything it does (codemods/callrules/arguments.py): it rewrites only a plain string literal
    (no escapes) that fullmatches `pattern`, and reports `unknown_finding` only where the
    argument's source contains the word (any case). So the word must be one the pattern cannot
    match without: written in it outside any group, class or alternation, and not quantified.
    "" when that is not so (no requirement)."""
    from .kinds.argument import ArgumentSpec

    if rule.kind != "argument":
        return ""
    spec = rule.spec_of(ArgumentSpec)
    word = spec.unknown_contains
    if not (spec.pattern and word and word.isascii() and word.isalnum()):
        return ""
    core = spec.pattern[4:] if spec.pattern.startswith("(?i)") else spec.pattern
    bounded = _LENGTH_BOUND.fullmatch(core)  # the length bound rules.py puts around a pattern
    if bounded:
        core = bounded.group(1)
    if "|" in core or "\\" in core:
        return ""
    at = core.lower().find(word.lower())
    if at < 0:
        return ""
    before, after = core[:at], core[at + len(word):]
    if before.count("(") != before.count(")") or before.count("[") != before.count("]") or after[:1] in ("?", "*", "+", "{"):
        return ""
    return word


def build_prefilter(rules, forced_framework: str = "auto") -> Prefilter:
    """The prefilter of `rules`: a file may need work when it meets one requirement of
    rule_requirements(rule, forced_framework) of one rule. A framework rule's requirements
    are (its own requirement and one of the framework's imports), so its own requirements are
    gated by the framework's imports instead (the same answer). A gated body is built, and
    its rules' requirements computed, when a file first meets the gate."""
    requirements: List[Requirement] = []
    gated: Dict[str, List[Any]] = {}  # framework -> (kind, rule) of its rules
    for rule in rules.rules:
        kind = KINDS.get(rule.kind)
        if kind is None:
            return Prefilter(None)
        if not rule.framework or forced_framework == rule.framework:
            requirements.extend(own_requirements(kind, rule))
        else:
            gated.setdefault(rule.framework, []).append((kind, rule))
    return Prefilter(requirements, [(framework, Prefilter(framework_imports(framework)), functools.partial(_body, body))
                                    for framework, body in gated.items()])


def _body(kinds_and_rules: List[Any]) -> Prefilter:
    return Prefilter([req for kind, rule in kinds_and_rules for req in own_requirements(kind, rule)])


def unknown_kinds(rules) -> List[str]:
    """The rule kinds the prefilter does not know (each makes it parse every file)."""
    return sorted(
        {f"{r.kind}/{match_kind_of(r)}" if r.kind == "finding" else r.kind for r in rules.rules
         if rule_requirements(r) is None}
    )


@dataclass(frozen=True)
class CodeWords:
    """The words of a parsed file: `identifiers` (names, attributes, parameters, keywords,
    definitions, the parts of imported module names; `import` when it imports anything) and
    the words of its string literals."""

    identifiers: FrozenSet[bytes]
    strings: FrozenSet[bytes]
    imported: FrozenSet[str]  # first parts of the modules it imports (not relative imports)
    # every module it imports, whole (`tensorflow.compat.v1`; `from a import b` gives a and a.b)
    modules: FrozenSet[str] = frozenset()
    # the modules as ImportTable.modules / top_level_modules list them (`from a import b`: a),
    # for engine.migrate_python to know the frameworks before libcst parses anything
    import_modules: FrozenSet[str] = frozenset()
    top_level_modules: FrozenSet[str] = frozenset()
    # the last names of its classes' bases (`keras.layers.Layer` -> Layer) and of its decorators
    # (`@tf.function` -> function): what tells TF 2 code (frameworks.tensorflow2_reason)
    bases: FrozenSet[bytes] = frozenset()
    decorators: FrozenSet[bytes] = frozenset()
    # `root.part` for each part of each qualified name the import table can resolve (ImportTable:
    # imported names, anywhere in the file, and the attribute chains written on them; the root
    # is the qualified name's first part): `tf.nn.dropout` with `import tensorflow as tf` gives
    # tensorflow.tensorflow, tensorflow.nn, tensorflow.dropout (framework_rules_may_apply)
    resolved: FrozenSet[bytes] = frozenset()
    # the names written as attributes (`ds.batch` -> batch): what a method rule's `.batch` needs
    attributes: FrozenSet[bytes] = frozenset()
    # (line, column, end line, end column; columns in UTF-8 bytes, as Python's tree gives them)
    # of each statement that is a string alone (a docstring): no call's argument is in one
    bare_strings: Tuple[Tuple[int, int, int, int], ...] = ()
    # `root.last(` for each call whose callee the import table can resolve (a Name bound by an
    # import, or an attribute chain on one; root and last: the qualified name's first and last
    # parts): `tf.compat.v1.Session(...)` gives tensorflow.Session( -- what a call kind's rule
    # needs (framework_rules_may_apply: `isinstance(x, tf.estimator.EstimatorSpec)` is no call)
    called: FrozenSet[bytes] = frozenset()


class LazyCodeWords:
    """A file's CodeWords, made on first use: the partial attempt and the whole parse that may
    follow it (engine.migrate_python) share them."""

    def __init__(self, tree: "ast.AST", text_words: Optional[AbstractSet[bytes]] = None,
                 text: Optional[str] = None, tensorflow2_project: str = "") -> None:
        self._tree = tree
        # words_of(the file's text), as the prefilter made them (None: not made): what
        # codemods/findings.py looks for before it walks the tree
        self.text_words = text_words
        self._text = text  # the file's text (tensorflow2_reason)
        self._words: Optional[CodeWords] = None
        self._imports: Optional[Tuple[FrozenSet[str], FrozenSet[str]]] = None
        # (the project's requirements decide, when they say TF 2: options.tensorflow2_project)
        self._tensorflow2: Any = tensorflow2_project or _NOT_YET
        self._outside: Dict[str, bool] = {}
        self._facts: Dict[str, bool] = {}  # (holds)
        self._quoted_outside: Dict[str, bool] = {}

    def get(self) -> CodeWords:
        if self._words is None:
            self._words = code_words(self._tree)
        return self._words

    def settle(self) -> None:
        """Make the words now and let go of the tree (engine.migrate_python, before libcst
        parses the file whole: Python's tree of a 250 KB file is 4-7 MB)."""
        self.get()
        del self._tree  # (read only until the words are made)

    def written_outside_bare_strings(self, word: str) -> bool:
        """Whether `word` (any case) is in the file's text outside its statements that are a
        string alone (docstrings): in code, a string literal, a comment. True when that cannot
        be told (no text, a carriage return, a BOM, a word a non-ASCII letter lowers into)."""
        found = self._outside.get(word)
        if found is None:
            found = self._outside[word] = _written_outside(self._text, self.get().bare_strings, word)
        return found

    def quoted_outside_bare_strings(self, word: str) -> bool:
        """Whether a string literal starting with `word` (any case: a quote, then the word) may
        be written outside the file's statements that are a string alone (docstrings): found in
        its text outside them (in a comment too: True, as may be). True when that cannot be told
        (as written_outside_bare_strings). Only the statements are looked at for the docstrings,
        not every node (what `get` walks)."""
        found = self._quoted_outside.get(word)
        if found is None:
            import ast

            tree = getattr(self, "_tree", None)
            spans = (self._words.bare_strings if self._words is not None
                     else _bare_strings(tree.body) if isinstance(tree, ast.Module) else None)
            found = self._quoted_outside[word] = spans is None or _written_outside(self._text, spans, word, quoted=True)
        return found

    def holds(self, fact: str) -> bool:
        """Whether the file's tree may hold what some rewrites need (prefilter._fact_of):
        "device_target", an `add_argument` call on an attribute or an `if`/`elif` whose test (or
        an operand of its `and`/`or`) compares a name or an attribute with a str literal
        "GPU"/"Ascend"/"CPU" (or a tuple, list or set holding one: device_dispatch._gates);
        "main_guard", a statement of the module that is an `if` (or an `elif` of one) whose test
        names `__name__` (syntax.is_main_guard). True when the tree is gone (settle) or the fact
        is not known."""
        found = self._facts.get(fact)
        if found is None:
            tree = getattr(self, "_tree", None)
            test = _TREE_FACTS.get(fact)
            found = self._facts[fact] = tree is None or test is None or test(tree)
        return found

    def tensorflow2_reason(self) -> Optional[str]:
        """frameworks.tensorflow2_reason of the file's CodeWords. From its statements and the
        words of its text when they decide it (_statements_tensorflow2_reason), without the walk
        of every node that `get` takes: a TF 2 file needs no more (transformers: 71 of them,
        where the walk took a quarter of their CPU)."""
        if self._tensorflow2 is _NOT_YET:
            reason: Any = _NOT_YET
            if self._words is None and self.text_words is not None and self._text is not None:
                try:
                    reason = _statements_tensorflow2_reason(getattr(self._tree, "body", ()), self.text_words,
                                                            self._text)
                except Undecided:
                    pass
            self._tensorflow2 = tensorflow2_reason(self.get()) if reason is _NOT_YET else reason
        return self._tensorflow2

    def imports(self) -> Tuple[FrozenSet[str], FrozenSet[str]]:
        """(import_modules, top_level_modules) as CodeWords has them, from the statements alone:
        what tells a file's frameworks, for much less than the walk of every expression that
        `get` takes (a PyTorch file needs no more)."""
        if self._imports is None:
            if self._words is not None:
                self._imports = (self._words.import_modules, self._words.top_level_modules)
            else:
                body = getattr(self._tree, "body", ())
                lines = _import_lines(self._text) if self._text is not None else None
                self._imports = (frozenset(_import_modules(body, lines)), frozenset(_top_level_modules(body, lines)))
        return self._imports


_NOT_YET = object()

_DEVICE_TARGETS = ("GPU", "Ascend", "CPU")  # codemods/device_dispatch.TARGETS


def _holds_device_target(tree: "ast.AST") -> bool:
    """LazyCodeWords.holds("device_target"): a superset of what device_dispatch._Analysis keys
    on (any operands and operators of a comparison; every `if` of the file, `elif`s included)
    and of Planner._plan_argparse's calls."""
    import ast

    def target(node: "ast.AST") -> bool:
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return any(target(e) for e in node.elts)
        return isinstance(node, ast.Constant) and type(node.value) is str and node.value in _DEVICE_TARGETS

    def gate(test: "ast.AST") -> bool:
        if isinstance(test, ast.BoolOp):
            return any(gate(v) for v in test.values)
        if not isinstance(test, ast.Compare):
            return False
        operands = [test.left, *test.comparators]
        return (any(isinstance(o, (ast.Name, ast.Attribute)) for o in operands)
                and any(target(o) for o in operands))

    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
                return True
        elif isinstance(node, ast.If) and gate(node.test):
            return True
    return False


def _holds_main_guard(tree: "ast.AST") -> bool:
    """LazyCodeWords.holds("main_guard"): a superset of what the Planner takes for the main block
    (an `if` statement of the module, or an `elif` of one, comparing `__name__`)."""
    import ast

    for statement in getattr(tree, "body", ()):
        while isinstance(statement, ast.If):
            if any(isinstance(n, ast.Name) and n.id == "__name__" for n in ast.walk(statement.test)):
                return True
            statement = statement.orelse[0] if len(statement.orelse) == 1 else None
    return False


_TREE_FACTS: Dict[str, Callable[["ast.AST"], bool]] = {
    "device_target": _holds_device_target, "main_guard": _holds_main_guard}


def _written_outside(text: Optional[str], spans: Sequence[Tuple[int, int, int, int]], word: str,
                     quoted: bool = False) -> bool:
    """LazyCodeWords.written_outside_bare_strings (`quoted`: quoted_outside_bare_strings, a
    quote right before the word, and no look at the tokens). Python's tree counts lines at \\n
    only when the text has no \\r, and columns in UTF-8 bytes; `str.lower()` and `(?i)` match an
    ASCII letter other than i, k, s only with itself in either case."""
    if (text is None or "\r" in text or text.startswith("\ufeff") or not word or not word.isascii()
            or not word.isalnum() or set(word.lower()) & set("iks")):
        return True
    found = re.compile((b"['\"]" if quoted else b"") + re.escape(word.encode("ascii")), re.IGNORECASE).search
    data = text.encode("utf-8", "surrogatepass")
    if not found(data):
        return False
    starts = [0]
    starts.extend(m.end() for m in re.finditer(b"\n", data))
    at = 0
    for line, col, end_line, end_col in spans:
        if line > len(starts) or end_line > len(starts):
            return True
        start, end = starts[line - 1] + col, starts[end_line - 1] + end_col
        if start < at or end < start:
            return True
        if found(data, at, start):
            return quoted or _written_in_code(text, spans, found)
        at = end
    return found(data, at) is not None and (quoted or _written_in_code(text, spans, found))


def quoted_outside_docstrings(text: str) -> Callable[[str], bool]:
    """may_need_work's `written` before Python's parse (engine.migrate_python): whether a
    string literal starting with a word (any case: a quote, then the word) may be written outside
    the file's docstrings, as its text tells. False only where every such quote is inside a
    string that stands alone on its logical lines (_docstring_spans), which Python's tree shows
    as a statement that is a str literal alone, what LazyCodeWords.quoted_outside_bare_strings
    leaves out too: so False here is False there (transformers 4.46.3: 9 files with "cuda" only
    in docstrings not parsed by Python). True when that cannot be told."""
    spans: List[Optional[Tuple[List[int], List[int]]]] = []

    def written(word: str) -> bool:
        if ("\r" in text or text.startswith("\ufeff") or not word or not word.isascii() or not word.isalnum()
                or set(word.lower()) & set("iks")):
            return True  # (as _written_outside)
        doubles = singles = seen = 0
        for match in re.finditer("['\"]" + re.escape(word), text, re.IGNORECASE):
            # (after an even count of each triple quote, its own quote counted, the quote is most
            # likely in code: say so before the whole text's scan. True is the safe answer (a parse,
            # as without this function), so a count fooled by a triple quote in a comment costs only
            # a parse. The scan cost transformers' 51 files whose quoted word is in code 74 ms)
            doubles += text.count('"""', seen, match.start() + 1)
            singles += text.count("'''", seen, match.start() + 1)
            seen = match.start() + 1
            if doubles % 2 == 0 and singles % 2 == 0:
                return True
        if not spans:
            spans.append(_docstring_spans(text))
        found = spans[0]
        if found is None:
            return True
        starts, ends = found
        for match in re.finditer("['\"]" + re.escape(word), text, re.IGNORECASE):
            i = bisect_right(starts, match.start()) - 1
            if i < 0 or match.end() > ends[i]:
                return True
        return False

    return written


def _docstring_spans(text: str) -> Optional[Tuple[List[int], List[int]]]:
    """(starts, ends): where each string stands alone on its logical lines (a statement that is a
    str literal alone: at a logical line's start, outside brackets, followed by nothing but a
    comment on its last line; no `b` or `f` prefix: logical_lines.logical_lines), in order; None
    when the text cannot be read so (logical_lines.Unreadable)."""
    starts: List[int] = []
    ends: List[int] = []
    try:
        for _, _, string_start, string_end in logical_lines(text):
            if string_start >= 0:
                starts.append(string_start)
                ends.append(string_end)
    except Unreadable:
        return None
    return starts, ends


def _bare_strings(body: Sequence["ast.stmt"]) -> Tuple[Tuple[int, int, int, int], ...]:
    """CodeWords.bare_strings from the statements alone (the bodies of compound statements,
    handlers and match cases included), sorted: (line, column, end line, end column) of each
    statement that is a str literal alone."""
    import ast

    bare: List[Tuple[int, int, int, int]] = []
    stack = list(body)
    while stack:
        node = stack.pop()
        if type(node) is ast.Expr:
            value = node.value
            if (type(value) is ast.Constant and type(value.value) is str and value.end_lineno is not None
                    and value.end_col_offset is not None):
                bare.append((value.lineno, value.col_offset, value.end_lineno, value.end_col_offset))
            continue
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            stack.extend(getattr(node, field, ()))
    return tuple(sorted(bare))


def _written_in_code(text: str, spans: Sequence[Tuple[int, int, int, int]], found: Callable[..., Any]) -> bool:
    """Whether a token that `found` finds in is one an expression's source can hold: not a
    docstring (`spans`), not a comment outside every bracket (an argument's source with a
    comment in it is inside the call's brackets). Python's tokens decide; True when they cannot
    be made."""
    import io
    import tokenize

    lines = text.split("\n")
    depth = 0
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            kind, string = tok.type, tok.string
            if kind == tokenize.OP:
                if string in "([{":
                    depth += 1
                elif string in ")]}":
                    depth -= 1
                continue
            if not found(string.encode("utf-8", "surrogatepass")):
                continue
            if kind == tokenize.COMMENT and depth == 0:
                continue
            if kind == tokenize.STRING:
                (row, col), (end_row, end_col) = tok.start, tok.end
                begin = (row, len(lines[row - 1][:col].encode("utf-8", "surrogatepass")))
                finish = (end_row, len(lines[end_row - 1][:end_col].encode("utf-8", "surrogatepass")))
                if any((line, column) <= begin and finish <= (end_line, end_column)
                       for line, column, end_line, end_column in spans):
                    continue
            return True
    except (tokenize.TokenError, SyntaxError, IndexError):
        return True
    return False


def _last_name(expr) -> str:
    """The last name of a decorator or a base: `tf.function` and `tf.function(...)` -> function."""
    import ast

    expr = expr.func if type(expr) is ast.Call else expr
    return expr.id if type(expr) is ast.Name else expr.attr if type(expr) is ast.Attribute else ""


# The non-ASCII characters whose NFKC form (Python's identifiers are NFKC-normalized) holds none
# of an ASCII identifier's characters: in an identifier, they keep it from being an ASCII word.
_NON_ASCII = re.compile(r"[^\x00-\x7f]")
_IDENTIFIER_CHARACTER = re.compile(r"[A-Za-z0-9_]")


def _ascii_identifiers_are_words(text: str) -> bool:
    """Whether every ASCII identifier of the code (after Python's normalization) is a word of
    `text` (words_of): so when no non-ASCII character of the text normalizes to something
    holding an ASCII letter, digit or underscore (`ｆ` -> `f`, `ﬁ` -> `fi`)."""
    if text.isascii():
        return True
    import unicodedata

    return not any(_IDENTIFIER_CHARACTER.search(unicodedata.normalize("NFKC", c))
                   for c in set(_NON_ASCII.findall(text)))


def _statements_tensorflow2_reason(statements, text_words: AbstractSet[bytes], text: str) -> Optional[str]:
    """frameworks.tensorflow2_reason of a file, from a walk of its statements: its decorators,
    bases and imported modules are all there (CodeWords has them from the same statements); a
    word is an identifier of the code when the statements show it (a definition's name, an
    imported name, a name in a decorator or a base), and is none when the text does not hold it
    (_ascii_identifiers_are_words). Raises Undecided when that does not tell."""
    import ast

    if not _ascii_identifiers_are_words(text):
        raise Undecided("non-ASCII identifiers")
    decorators: Set[str] = set()
    bases: Set[str] = set()
    modules: Set[str] = set()
    shown: Set[str] = set()  # identifiers of the code, all of them in CodeWords.identifiers
    stack = list(statements)
    node: Any  # narrowed by `kind is ...`, which mypy cannot follow (as in code_words)
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is ast.Import:
            for alias in node.names:
                modules.add(alias.name)
                shown.update(alias.name.split("."))
                shown.add(alias.asname or "")
        elif kind is ast.ImportFrom:
            shown.update((node.module or "").split("."))
            if not node.level and node.module:
                modules.add(node.module)
                modules.update(f"{node.module}.{alias.name}" for alias in node.names)
            for alias in node.names:
                shown.update(alias.name.split("."))
                shown.add(alias.asname or "")
        else:
            if kind in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
                shown.add(node.name)
                decorators.update(_last_name(d) for d in node.decorator_list)
                written = list(node.decorator_list)
                if kind is ast.ClassDef:
                    bases.update(_last_name(b) for b in node.bases)
                    written.extend(node.bases)
                for part in (n for expr in written for n in ast.walk(expr)):
                    if type(part) is ast.Name:
                        shown.add(part.id)
                    elif type(part) is ast.Attribute:
                        shown.add(part.attr)
            for name in ("body", "handlers", "orelse", "finalbody", "cases"):
                block = getattr(node, name, None)
                if type(block) is list:
                    stack.extend(block)
    known = {n.encode("utf-8", "replace") for n in shown if n}

    def has(word: bytes) -> Optional[bool]:
        return True if word in known else False if word not in text_words else None

    return tensorflow2_reason_of(has, {n.encode("utf-8", "replace") for n in decorators if n},
                                 {n.encode("utf-8", "replace") for n in bases if n}, modules)


def code_words(tree: "ast.AST") -> CodeWords:
    """CodeWords of a tree from Python's parser (a walk: about a tenth of `ast.parse`)."""
    import ast

    from .safe_parse import child_nodes

    names: Set[str] = set()
    attributes: Set[str] = set()
    strings: List[str] = []
    imported: Set[str] = set()
    node: Any  # narrowed by `kind is ...` (faster than isinstance), which mypy cannot follow
    modules: Set[str] = set()
    import_modules: Set[str] = set()
    bases: Set[str] = set()
    decorators: Set[str] = set()
    bound: Dict[str, Set[str]] = {alias: {module} for alias, module, _ in STAR_IMPORTED_ALIASES}  # local name -> qualnames
    chains: List[Tuple[str, str]] = []  # (the Name an attribute chain starts at, an attribute of it)
    calls: List[Tuple[str, str]] = []  # (the Name a callee's chain starts at, the callee's last attribute)
    called_names: Set[str] = set()  # the Names called
    bare: List[Tuple[int, int, int, int]] = []
    last_name = _last_name

    stack = [tree]  # every node, as ast.walk gives them (in another order: only sets are made)
    while stack:
        node = stack.pop()
        stack.extend(child_nodes(node))
        kind = type(node)
        if kind is ast.Name:
            names.add(node.id)
        elif kind is ast.Attribute:
            names.add(node.attr)
            attributes.add(node.attr)
            base = node.value
            while type(base) is ast.Attribute:
                base = base.value
            if type(base) is ast.Name:
                chains.append((base.id, node.attr))
        elif kind is ast.Constant:
            if type(node.value) is str:
                strings.append(node.value)
        elif kind is ast.Call:
            func = node.func
            if type(func) is ast.Attribute:
                base = func.value
                while type(base) is ast.Attribute:
                    base = base.value
                if type(base) is ast.Name:
                    calls.append((base.id, func.attr))
            elif type(func) is ast.Name:
                called_names.add(func.id)
        elif kind is ast.keyword or kind is ast.arg:
            names.add(node.arg or "")
        elif kind in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
            names.add(node.name)
            decorators.update(last_name(d) for d in node.decorator_list)
            if kind is ast.ClassDef:
                bases.update(last_name(b) for b in node.bases)
        elif kind is ast.alias:
            names.update(node.name.split("."))
            names.add(node.asname or "")
        elif kind is ast.ImportFrom:
            names.update((node.module or "").split("."))
            names.add("import")
            if not node.level and node.module:
                imported.add(node.module.split(".", 1)[0])
                modules.add(node.module)
                import_modules.add(node.module)
                modules.update(f"{node.module}.{alias.name}" for alias in node.names)
                for alias in node.names:
                    if alias.name != "*":
                        bound.setdefault(alias.asname or alias.name, set()).add(f"{node.module}.{alias.name}")
        elif kind is ast.Import:
            names.add("import")
            imported.update(alias.name.split(".", 1)[0] for alias in node.names)
            modules.update(alias.name for alias in node.names)
            import_modules.update(alias.name for alias in node.names)
            for alias in node.names:
                local = alias.asname or alias.name.split(".", 1)[0]
                bound.setdefault(local, set()).add(alias.name if alias.asname else local)
        elif kind in (ast.Global, ast.Nonlocal):
            names.update(node.names)
        elif kind is ast.Expr:
            value = node.value
            if (type(value) is ast.Constant and type(value.value) is str and value.end_lineno is not None
                    and value.end_col_offset is not None):
                bare.append((value.lineno, value.col_offset, value.end_lineno, value.end_col_offset))
        elif hasattr(node, "name") and isinstance(node.name, str):  # except handlers, match
            names.add(node.name)
    roots = _roots(bound)
    return CodeWords(frozenset(n.encode("utf-8", "replace") for n in names if n),
                     frozenset(words_of("\n".join(strings))), frozenset(imported), frozenset(modules), frozenset(import_modules),
                     frozenset(_top_level_modules(getattr(tree, "body", ()))),
                     frozenset(n.encode("utf-8", "replace") for n in bases if n),
                     frozenset(n.encode("utf-8", "replace") for n in decorators if n),
                     frozenset(_resolved(bound, roots, chains)), frozenset(n.encode("utf-8", "replace") for n in attributes),
                     tuple(sorted(bare)), frozenset(_called(bound, roots, calls, called_names)))


def _roots(bound: Dict[str, Set[str]]) -> Dict[str, Set[str]]:
    """Local name -> the first parts of the qualified names any import binds it to (_resolved, _called)."""
    return {local: {qualname.split(".", 1)[0] for qualname in qualnames} for local, qualnames in bound.items()}


def _resolved(bound: Dict[str, Set[str]], roots: Dict[str, Set[str]], chains: List[Tuple[str, str]]) -> Set[bytes]:
    """CodeWords.resolved: a superset of what the import table resolves, whatever the order of
    the imports (every name a local name is bound to by any import of the file; a star import's
    `tf`, which frameworks.star_imported_frameworks may bind, always). `roots`: _roots(bound)."""
    found: Set[str] = set()
    for qualnames in bound.values():
        for qualname in qualnames:
            parts = qualname.split(".")
            found.update(f"{parts[0]}.{part}" for part in parts)
    for local, attr in chains:
        for root in roots.get(local, ()):
            found.add(f"{root}.{attr}")
    return {n.encode("utf-8", "replace") for n in found}


def _called(bound: Dict[str, Set[str]], roots: Dict[str, Set[str]], calls: List[Tuple[str, str]],
            names: Set[str]) -> Set[bytes]:
    """CodeWords.called, as _resolved: `root.last(` for each call of an attribute chain on a name
    any import binds (its root: the first part of each qualified name bound to it), and for each
    call of such a name (the root and last part of each qualified name bound to it)."""
    found: Set[str] = set()
    for local, attr in calls:
        for root in roots.get(local, ()):
            found.add(f"{root}.{attr}(")
    for name in names:
        for qualname in bound.get(name, ()):
            parts = qualname.split(".")
            found.add(f"{parts[0]}.{parts[-1]}(")
    return {n.encode("utf-8", "replace") for n in found}


def _import_modules(statements, import_lines: Optional[List[int]] = None) -> Set[str]:
    """What CodeWords.import_modules holds, from a walk of the statements only (every import
    is a statement, in a body of some statement). `import_lines`: _import_lines of the text."""
    return _imported_modules(statements, into_definitions=True, import_lines=import_lines)


def _top_level_modules(statements, import_lines: Optional[List[int]] = None) -> Set[str]:
    """What ImportTable.top_level_modules holds: modules imported outside function and class
    bodies (module level, and inside module-level `if`/`try`/`with` blocks)."""
    return _imported_modules(statements, into_definitions=False, import_lines=import_lines)


def _import_lines(text: str) -> Optional[List[int]]:
    """The lines (1-based, ascending, as Python's parser numbers them) that hold `import`, in
    code, strings or comments; None for a text with a `\r` (then only `\n` would be counted)."""
    if "\r" in text:
        return None
    lines: List[int] = []
    line, last = 1, 0
    at = text.find("import")
    while at >= 0:
        line += text.count("\n", last, at)
        last = at
        if not lines or lines[-1] != line:
            lines.append(line)
        at = text.find("import", at + 6)
    return lines


def _imported_modules(statements, into_definitions: bool, import_lines: Optional[List[int]] = None) -> Set[str]:
    """The absolute modules `import` and `from ... import` statements name, walking the bodies
    of compound statements (those of functions and classes only with `into_definitions`).

    `import_lines` (_import_lines of the text parsed): a compound statement none of whose lines
    holds the word is not entered -- an import statement inside it would write `import` on one of
    its lines (from its first to its last, `end_lineno`). The walk entered every statement of
    every function: 0.36 -> 0.11 s over transformers' 308 parsed files, the same modules."""
    import ast

    definitions = () if into_definitions else (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    found: Set[str] = set()
    stack = list(statements)
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is ast.Import:
            found.update(alias.name for alias in node.names)
        elif kind is ast.ImportFrom:
            if not node.level and node.module:
                found.add(node.module)
        elif kind not in definitions:
            if import_lines is not None:
                end = getattr(node, "end_lineno", None)  # (a match_case has no position: entered)
                if end is not None:
                    at = bisect_left(import_lines, node.lineno)
                    if at == len(import_lines) or import_lines[at] > end:
                        continue  # (no line of it holds `import`)
            for name in ("body", "handlers", "orelse", "finalbody", "cases"):
                part = getattr(node, name, None)
                if type(part) is list:
                    stack.extend(part)
    return found
