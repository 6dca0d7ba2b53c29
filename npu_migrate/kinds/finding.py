"""`[[finding]]`: something that cannot be migrated (or advice), reported with a severity.

`kind` says how a finding matches (`api`/`apis` name what it matches):

    api          any reference to the qualified name(s), resolved through imports
                 (codemods/torch/references.py, which knows which names it rewrites)
    import       an import of the module(s) or of one of their submodules (codemods/findings.py)
    method       a call `.name(...)` on any receiver that is not an imported module; `unless`:
                 not in a file that imports one of these modules (a library whose objects have
                 a method of that name: linear_operator's LinearOperator.to_dense); with
                 `keywords`, only when one of them is given and not None/False/empty/0 (Ray's
                 `.options(num_gpus=1)` on a remote function or actor)
    call         a call of the qualified name(s); with `keywords`/`positions`, only when one of
                 those arguments is given and not None/False/empty (with `suffixes`: only when
                 it holds a string literal ending in one of them, written there or in the values
                 the file assigns a variable given there; `suffix_words = true`: suffixes that
                 are words, `CUDAExecutionProvider`, one of which a file must contain for the
                 findings walk, and whose statements partial parsing keeps (the variable's
                 `providers = [...]`); with `commands`: only when it
                 runs one of those programs: a list's first element, or a command line's
                 program, also after `|`, `;`, `&&`, `$(`, read through a variable the file
                 assigns only string literals; with `keys`: only when it is a dict literal, or a
                 list or tuple of them, holding one of those string keys with a value that is not
                 None/False/empty/0: Ray Tune's `resources={"cpu": 4, "gpu": 1}`)
    call-kwarg   `call` with `keywords` (the older name)
    file         a whole file whose name ends with one of `suffixes` (frontends/cuda_sources.py)
    env          a shell variable set (names, `NCCL_*` globs)          (frontends/shell.py)
    command      a shell command: its name and leading words          (frontends/shell.py)
    heredoc      a word, `NAME` or `PREFIX*`, in a shell heredoc body  (frontends/shell.py)
    requirement  a dependency name, `cupy-cuda*` globs; `unless`: not when one of these is
                 listed too                                           (frontends/requirements.py)
    requirement-build  a CUDA build: local version label `cu*`, or a wheel index URL glob
    config-key   a `key: value` line of a YAML config, written `device_target=GPU` (the value's
                 quotes do not matter)                                (frontends/yaml_config.py)
    install-path a shell script's path into an Ascend install, `ascend-toolkit/20.*`: a
                 product/version glob                                 (frontends/shell.py)
    target       a `torch.cuda` reference whose NPU twin the target torch_npu release lacks
                 (targets/torch_npu.py)                 (codemods/torch/references.py)
    guard        device code the torch pass leaves as it is because the rewrite would break it;
                 `api` names which guard (GUARD_TRIGGERS)             (codemods/guards.py)
    string       a string literal holding one of `apis` that the code matches text against (a
                 comparison operand, `re.search(...)`, `.startswith(...)`): an error message of
                 CUDA's                                               (codemods/findings.py)
    codemod      (framework rules only) raised by the framework pass's own analysis, as the
                 `unknown_finding` of another rule                    (codemods/callrules/)
    analysis     raised by the analysis of the module registered for the code (`@codes.emits`) (the ModelArts adaptation, the
                 notebook front end, unused suppressions), which looks the rule up by its code
                 (RuleSet.analysis); no `api`. Its examples run with the options they name
                 (`modelarts = true`).

`context` narrows a Python finding to files that import torch (`"torch"`) or that use the
device (`"device"`). With `framework`, a finding (kinds api, import, call, codemod) belongs to
that framework's pass; `once_per_file = true` reports each listed name of an `api` finding once
per file, and `unless_named = ["aclnn"]` leaves out a call whose first argument is a string
literal starting with one of them (an Ascend-native ACLNN operator in `ops.Custom("aclnn...")`); `words` (kind `codemod`) say what a codemod's own scan looks for (the prefilter's:
words.codemod_words),
and (kind `guard`) the library names that mark an identifier as asking for a CUDA-only library
(`_TRITON_AVAILABLE`); `gates` (kind `guard`) the codes whose import and call findings mark code
as CUDA-only (codemods/guards.py's `_DeviceGates`);
`resolves` (kind `codemod`) the qualified names it matches only where the import table resolves a
reference to them (`tensorflow.nn.dropout`): each one a requirement as an `api` rule's, so a file
that merely mentions `dropout` (`mtf.dropout`, a docstring) does not need the framework's pass.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Dict, FrozenSet, List, Tuple

from ..codes import kind_key
from ..model import Severity
from ..words import (CODEMOD_WORD_RE, Requirement, Word, attribute, codemod_words, components, framework_name,
                     framework_path, imported, quoted)
from .base import (COMMAND_RE, ENV_PATTERN_RE, IDENT_RE, QUALNAME_RE, REQUIREMENT_PATTERN_RE, Kind, Rule, RuleError,
                   register, schema)

if TYPE_CHECKING:  # pragma: no cover
    from ..rules import RuleSet

FINDING_CONTEXTS = ("any", "torch", "device")
# Finding kinds for files that are not Python (shell scripts, dependency lists).
NON_PYTHON_FINDING_KINDS = {"env", "command", "requirement", "requirement-build", "heredoc", "config-key",
                            "install-path"}
# Kind `guard`: device code the torch pass leaves as it is because the rewrite would break it
# (codemods/guards.py); `api` names which guard, and the words a file must contain for it.
GUARD_TRIGGERS = {
    "kernel-guard": "is_cuda",  # `x.is_cuda` deciding whether a compiled CUDA extension runs
    "cuda-only-guard": "is_cuda",  # `assert x.is_cuda, "CUDA only"`
    "build-gate": "CUDA_HOME",  # `if torch.cuda.is_available() and CUDA_HOME is not None:`
    "capability": "get_device_capability",  # `torch.cuda.get_device_capability()[0]`
    "device-properties": "get_device_properties",  # `torch.cuda.get_device_properties(d).multi_processor_count`
    # `map_location = None if torch.cuda.is_available() else "cpu"`: both words (a file with
    # `map_location=` alone needs no work for it); the first is in the statement reported
    "map-location-none": "is_available map_location",
    # `x.device.type == "cuda"` / `in ("cuda", "xpu")` / `!= "cuda": raise` kept as it is because
    # what it opens (or refuses to let through) is CUDA-only code: `words` name the libraries in
    # identifiers (`_TRITON_AVAILABLE`), `gates` the codes whose imports and calls are CUDA-only
    "cuda-library-gate": "cuda",
    "cuda-library-refusal": "cuda",
    # a function that hands torch's CUDA streams/memory to a CUDA library working on raw handles
    # (cupy's allocator callbacks): kept whole; `words` name those libraries' modules (and what a
    # file must contain: _requirements)
    "cuda-interop": "cuda",
    # `num_gpus = 0.5 if device == "cuda" else 0`: a device test choosing the GPUs Ray reserves
    "ray-gpu-count": "num_gpus",
    # `MergeOptions(cuda=torch.cuda.is_available())`: another library's GPU flag given CUDA's
    # availability, kept (guards.keep_library_gpu_flag, from the torch pass's torch.cuda.is_available(),
    # whose own rule admits the file: the quoted word adds nothing the device rules do not ask already)
    "library-gpu-flag": "cuda",
    # `CuEquivarianceConfig(conv_fusion=(device == "cuda"))`: a device test given to a callable named
    # for a CUDA library, kept (guards.keep_cuda_library_flags; the comparison's quoted "cuda" admits the file)
    "cuda-library-flag": "cuda",
    "data-parallel-count": "DataParallel",
    # `init_process_group("gloo")` (or `--backend` default "gloo") with collectives of NPU tensors
    "gloo-device-collectives": "gloo",
    # `dist.all_reduce(t)` of `t = torch.tensor(..., dtype=torch.float64, device=...)`: HCCL has no float64 reduction
    "float64-reduction": "float64",
}
# Guards reported only in a file the torch pass moves to the NPU (guards.report_float64_reductions
# looks at the rewrites): like NPU306's `.double()`, their words count only beside another
# requirement met (words.Requirement.with_device); "float64" alone admitted diffusers' 47 files
# that move nothing (490 files: 147 -> 194 parsed, +25 % CPU).
DEVICE_ONLY_GUARDS = frozenset({"float64-reduction"})
# Kind `target`: a rewrite left undone because the target torch_npu release lacks the name it
# would write (targets/torch_npu.py); raised by the torch pass, `api` names the namespace it watches.
FINDING_KINDS = ({"api", "import", "method", "call-kwarg", "file", "call", "codemod", "analysis", "guard", "string",
                  "target"} | NON_PYTHON_FINDING_KINDS)
_FRAMEWORK_FINDING_KINDS = {"api", "import", "call", "codemod"}

@dataclass(frozen=True)
class FindingSpec:
    """A finding's keys: what it matches (`kind`: api | import | method | call | call-kwarg |
    file | …, and its names, `patterns` or `apis`) and those only some match kinds take (see the
    module docstring)."""

    match_kind: str = ""  # the entry's `kind`
    patterns: Tuple[str, ...] = ()  # `patterns` or `apis` (else the rule's `from`: names_of)
    keywords: Tuple[str, ...] = ()  # call findings: arguments to inspect; command findings: options
    positions: Tuple[int, ...] = ()  # call findings: positional argument indexes to inspect
    suffixes: Tuple[str, ...] = ()  # call findings: string literals ending so; file findings: file names
    commands: Tuple[str, ...] = ()  # call findings: the programs a command argument runs (`nvidia-smi`)
    keys: Tuple[str, ...] = ()  # call findings: the dict keys an argument must hold (`{"gpu": 1}`)
    suffix_words: bool = False  # call findings: `suffixes` are words, asked for (walk, partial parsing)
    unless: Tuple[str, ...] = ()  # requirement findings: not when one of these is listed too; method: imported
    context: str = "any"  # any | torch (the file imports torch) | device (it uses the device)
    skip_logged: bool = False  # api findings: not where the value is only printed, logged or formatted
    skip_type_tests: bool = False  # api findings: not where a class is only named by isinstance/issubclass
    once_per_file: bool = False  # framework api findings: report each listed name once per file
    unless_named: Tuple[str, ...] = ()  # framework api findings: not a call whose first argument is a string starting so
    words: Tuple[str, ...] = ()  # codemod findings a codemod raises by its own scan: prefilter words (words.codemod_words)
    resolves: Tuple[str, ...] = ()  # ... and the qualified names that scan resolves through the imports
    gates: Tuple[str, ...] = ()  # guard findings: codes whose import/call findings mark CUDA-only code

    @classmethod
    def of(cls, rule: Rule) -> "FindingSpec":
        return rule.spec_of(cls)


def match_kind_of(rule: Rule) -> str:
    """What a finding matches (api, import, call, codemod, …); "" for a rule of another kind."""
    return rule.spec.match_kind if isinstance(rule.spec, FindingSpec) else ""


def _also_required(entry: Dict[str, Any]) -> FrozenSet[str]:
    if entry.get("kind") == "analysis":
        return frozenset()
    return frozenset({"apis"} if "apis" in entry else {"api"})


def _fields(entry: Dict[str, Any], label: str) -> Dict[str, Any]:
    try:
        severity = Severity(entry["severity"])
    except ValueError:
        raise RuleError(f"{label}: 'severity' must be error, warning or info, got {entry['severity']!r}") from None
    match_kind = entry["kind"]
    if match_kind not in FINDING_KINDS:
        raise RuleError(f"{label}: 'kind' must be one of {', '.join(sorted(FINDING_KINDS))}, got {match_kind!r}")
    return {"severity": severity}  # (what it matches is in its spec: FindingSpec.match_kind)


def _check(entry: Dict[str, Any], label: str, from_: str) -> None:
    match_kind = entry["kind"]
    names = entry.get("apis", [from_])
    if match_kind in ("api", "import", "call", "call-kwarg"):
        for n in names:
            if not QUALNAME_RE.match(n):
                raise RuleError(f"{label}: {n!r} is not a dotted Python name")
    if match_kind in NON_PYTHON_FINDING_KINDS:
        _check_non_python_patterns(match_kind, names + entry.get("unless", []), label)
    elif match_kind == "method" and "unless" in entry:
        if not isinstance(entry["unless"], list) or not all(isinstance(m, str) and QUALNAME_RE.match(m)
                                                            for m in entry["unless"]):
            raise RuleError(f"{label}: a \"method\" finding's 'unless' must be a list of module names")
    elif "unless" in entry:
        raise RuleError(f"{label}: 'unless' is only for kind = \"requirement\" or \"method\" findings")
    for flag in ("skip_logged", "skip_type_tests"):
        if flag in entry and (match_kind != "api" or not isinstance(entry[flag], bool)):
            raise RuleError(f"{label}: '{flag}' must be true or false, and only for kind = \"api\" findings")
    if match_kind == "guard" and from_ not in GUARD_TRIGGERS:
        raise RuleError(f"{label}: a \"guard\" finding's 'api' must be one of {', '.join(sorted(GUARD_TRIGGERS))}")
    _check_python_finding(match_kind, entry, from_, label)


def _check_python_finding(match_kind: str, entry: Dict[str, Any], from_: str, label: str) -> None:
    """The keys that only some finding kinds take, and what they must hold."""
    context = entry.get("context", "any")
    if context not in FINDING_CONTEXTS:
        raise RuleError(f"{label}: 'context' must be one of {', '.join(FINDING_CONTEXTS)}, got {context!r}")
    if match_kind == "method":
        for n in entry.get("apis", [from_]):
            if not IDENT_RE.match(n):
                raise RuleError(f"{label}: {n!r} is not a method name")
    if match_kind in NON_PYTHON_FINDING_KINDS:  # shell/requirements kinds have keys of their own
        return
    arguments = ("keywords", "positions")
    if match_kind not in ("call", "call-kwarg"):
        for key in arguments:
            if key in entry and not (key == "keywords" and match_kind == "method"):
                kinds = "\"call\" or \"method\"" if key == "keywords" else "\"call\""
                raise RuleError(f"{label}: '{key}' is only for kind = {kinds} findings")
    if match_kind == "call-kwarg" and not entry.get("keywords"):
        raise RuleError(f"{label}: a \"call-kwarg\" finding needs 'keywords'")
    if match_kind == "file":
        if not entry.get("suffixes"):
            raise RuleError(f"{label}: a \"file\" finding needs 'suffixes' (file name endings such as \".cu\")")
    elif "suffixes" in entry:
        if match_kind not in ("call", "call-kwarg"):
            raise RuleError(f"{label}: 'suffixes' is only for kind = \"call\" or \"file\" findings")
        if not any(entry.get(key) for key in arguments):
            raise RuleError(f"{label}: 'suffixes' needs 'keywords' or 'positions' (the arguments to look in)")
    if "suffix_words" in entry and (match_kind not in ("call", "call-kwarg") or entry["suffix_words"] is not True
                                    or not all(IDENT_RE.match(s) for s in entry.get("suffixes", ()))
                                    or not entry.get("suffixes")):
        raise RuleError(f"{label}: 'suffix_words' is only `true`, for kind = \"call\" findings whose 'suffixes' are words")
    if "keys" in entry:
        if match_kind not in ("call", "call-kwarg") or "suffixes" in entry or "commands" in entry:
            raise RuleError(f"{label}: 'keys' is only for kind = \"call\" findings, without 'suffixes' or 'commands'")
        if not any(entry.get(key) for key in arguments):
            raise RuleError(f"{label}: 'keys' needs 'keywords' or 'positions' (the arguments to look in)")
        if not isinstance(entry["keys"], list) or not all(isinstance(k, str) and k for k in entry["keys"]):
            raise RuleError(f"{label}: 'keys' must be a list of dict keys (\"gpu\")")
    if "commands" in entry:
        if match_kind not in ("call", "call-kwarg") or "suffixes" in entry:
            raise RuleError(f"{label}: 'commands' is only for kind = \"call\" findings, without 'suffixes'")
        if not any(entry.get(key) for key in arguments):
            raise RuleError(f"{label}: 'commands' needs 'keywords' or 'positions' (the arguments to look in)")
        if not isinstance(entry["commands"], list) or not all(
                isinstance(c, str) and re.fullmatch(r"[A-Za-z0-9_.+-]+", c) for c in entry["commands"]):
            raise RuleError(f"{label}: 'commands' must be a list of program names (\"nvidia-smi\")")


def _check_non_python_patterns(match_kind: str, names: List[str], label: str) -> None:
    if match_kind == "env":
        pattern, what = ENV_PATTERN_RE, "an environment variable name (optionally ending in *)"
    elif match_kind == "command":
        pattern, what = COMMAND_RE, "a command and its leading arguments separated by single spaces"
    elif match_kind == "requirement":
        pattern, what = REQUIREMENT_PATTERN_RE, "a package name (globs with * allowed)"
    elif match_kind == "heredoc":
        pattern, what = re.compile(r"^[A-Za-z0-9_.-]+\*?$"), "a word, optionally ending in *"
    elif match_kind == "install-path":
        pattern, what = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*/[0-9*][0-9A-Za-z.*_-]*$"), "product/version glob"
    elif match_kind == "config-key":
        pattern, what = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*=[^\s=]+$"), "key=value"
    else:  # requirement-build: a local version label glob ("cu*") or an index URL glob
        pattern, what = re.compile(r"^\S+$"), "a version label or URL glob without spaces"
    for n in names:
        if not isinstance(n, str) or not pattern.match(n):
            raise RuleError(f"{label}: {n!r} is not {what}")


def _check_framework_finding(entry: Dict[str, Any], label: str, framework: str) -> FindingSpec:
    """(After rules.py checked the value of `framework`.)"""
    match_kind = entry["kind"]
    if match_kind == "codemod" and not framework:
        raise RuleError(f"{label}: a \"codemod\" finding needs 'framework' (the codemod that raises it)")
    if framework:
        if match_kind not in _FRAMEWORK_FINDING_KINDS:
            raise RuleError(
                f"{label}: a finding with 'framework' must be of kind {', '.join(sorted(_FRAMEWORK_FINDING_KINDS))}"
                f", got {match_kind!r}"
            )
        for key in ("context", "positions", "suffixes", "suffix_words", "commands", "keys", "unless"):
            if key in entry:
                raise RuleError(f"{label}: '{key}' is not used by findings with 'framework'")
    word_re = CODEMOD_WORD_RE if match_kind == "codemod" else QUALNAME_RE  # (a guard's: `numba.cuda`)
    if "words" in entry and (match_kind not in ("codemod", "guard") or not isinstance(entry["words"], list)
                             or not all(isinstance(w, str) and word_re.match(w) for w in entry["words"])):
        raise RuleError(f"{label}: 'words' must be a list of words, for kind = \"codemod\" or \"guard\" findings "
                        f"(for \"codemod\": `word`, `.attribute`, `@decorator`, joined by ` & ` when all must be written)")
    if "gates" in entry and (match_kind != "guard" or not isinstance(entry["gates"], list)
                             or not all(isinstance(c, str) and re.fullmatch(r"NPU\d{3}", c) for c in entry["gates"])):
        raise RuleError(f"{label}: 'gates' must be a list of codes (\"NPU303\"), for kind = \"guard\" findings")
    if "resolves" in entry and (match_kind != "codemod" or not isinstance(entry["resolves"], list)
                                or not all(isinstance(n, str) and QUALNAME_RE.match(n) and "." in n
                                           for n in entry["resolves"])):
        raise RuleError(f"{label}: 'resolves' must be a list of dotted names, for kind = \"codemod\" findings")
    if "once_per_file" in entry and (not isinstance(entry["once_per_file"], bool) or not framework
                                     or match_kind != "api"):
        raise RuleError(f"{label}: 'once_per_file' must be true or false, for kind = \"api\" findings with 'framework'")
    if "unless_named" in entry and (not framework or match_kind != "api" or not isinstance(entry["unless_named"], list)
                                    or not all(isinstance(p, str) and p for p in entry["unless_named"])):
        raise RuleError(f"{label}: 'unless_named' must be a list of name prefixes, for kind = \"api\" findings with 'framework'")
    return FindingSpec(
        match_kind=entry["kind"],
        patterns=tuple(entry.get("patterns", entry.get("apis", ()))),
        keywords=tuple(entry.get("keywords", ())),
        positions=tuple(entry.get("positions", ())),
        suffixes=tuple(entry.get("suffixes", ())),
        commands=tuple(entry.get("commands", ())),
        keys=tuple(entry.get("keys", ())),
        suffix_words=bool(entry.get("suffix_words", False)),
        unless=tuple(entry.get("unless", ())),
        context=entry.get("context", "any"),
        skip_logged=entry.get("skip_logged", False),
        skip_type_tests=entry.get("skip_type_tests", False),
        once_per_file=bool(entry.get("once_per_file", False)),
        unless_named=tuple(entry.get("unless_named", ())),
        words=tuple(entry.get("words", ())),
        resolves=tuple(entry.get("resolves", ())),
        gates=tuple(entry.get("gates", ())),
    )


def names_of(rule: Rule) -> Tuple[str, ...]:
    """The names a finding matches: its `patterns` (or `apis`), else its `from`."""
    return FindingSpec.of(rule).patterns or (rule.from_,)


def cuda_only_libraries(findings: Dict[str, List[Rule]]) -> Tuple[str, ...]:
    """The modules that are CUDA-only code (numba.cuda, triton, cupy...): those an import finding
    of the guard rule's `gates` codes reports (rules/findings_kernels.toml's
    cuda-library-gate). `findings`: a rule set's findings by kind. One home for the guards'
    analysis of a file (codemods/guards.py) and the project scan (project_values.py)."""
    gate = next((r for r in findings.get("guard", ()) if r.from_ == "cuda-library-gate"), None)
    if gate is None:
        return ()
    codes = set(FindingSpec.of(gate).gates)
    return tuple(n for r in findings.get("import", ()) if r.code in codes and not r.framework for n in names_of(r))


@dataclass
class FindingIndex:
    """The findings of one framework ("" for the PyTorch and front-end ones), by what they match."""

    by_match: Dict[str, List[Rule]] = field(default_factory=dict)  # match kind -> rules
    api: Dict[str, Rule] = field(default_factory=dict)  # qualified name -> rule (the first)
    import_: Dict[str, Rule] = field(default_factory=dict)  # module -> rule (the first)
    call: Dict[str, List[Rule]] = field(default_factory=dict)  # called qualified name -> rules
    method: Dict[str, List[Rule]] = field(default_factory=dict)  # method name -> rules
    analysis: Dict[str, Rule] = field(default_factory=dict)  # code -> finding of kind "analysis"
    codemod: Dict[str, Rule] = field(default_factory=dict)  # code -> finding of kind "codemod" (the last)


def _index(index: FindingIndex, rule: Rule) -> None:
    match = FindingSpec.of(rule).match_kind
    index.by_match.setdefault(match, []).append(rule)
    names = names_of(rule)
    if match == "api":
        for n in names:
            index.api.setdefault(n, rule)
    elif match in ("call", "call-kwarg"):
        for n in names:
            index.call.setdefault(n, []).append(rule)
    elif match == "method":
        for n in names:
            index.method.setdefault(n, []).append(rule)
    elif match == "import":
        for n in names:
            index.import_.setdefault(n, rule)
    elif match == "analysis":
        index.analysis[rule.code] = rule
    elif match == "codemod":
        index.codemod[rule.code] = rule


def _requirements(rule: Rule) -> List[Requirement]:
    found = _match_requirements(rule)
    spec = FindingSpec.of(rule)
    if (spec.context == "device" or spec.match_kind == "guard" and rule.from_ in DEVICE_ONLY_GUARDS) \
            and not rule.framework:
        # reported only where the file uses the device (codemods/findings.py uses_device), which
        # another rule's requirement or an import of torch_npu says (words.Requirement.with_device)
        return [replace(req, with_device=True) for req in found]
    return found


def _match_requirements(rule: Rule) -> List[Requirement]:
    match = FindingSpec.of(rule).match_kind
    names = names_of(rule)
    if rule.framework:
        if match == "codemod":
            # Raised as another rule's `unknown_finding` (whose words count), or by a codemod's
            # own scan for what its `words` say (words.codemod_words: a word in any case,
            # '/device:GPU:%d'; `.shard`; `@function`) and for references to the names it
            # `resolves` through the import table (as an api rule's).
            spec = FindingSpec.of(rule)
            return codemod_words(spec.words) + [framework_name(name, rule.framework) for name in spec.resolves]
        if match == "import":
            return [imported(name) for name in names]
        if FindingSpec.of(rule).once_per_file:  # Huawei's support list: tensorflow.contrib.keras needs `contrib` too
            return [framework_path(name, rule.framework) for name in names]
        return [framework_name(name, rule.framework) for name in names]
    if match in ("file", "analysis", "target") or match in NON_PYTHON_FINDING_KINDS:
        return []  # `target`: raised only where an api rewrite (which has words of its own) is held back
    if match == "import":
        return [imported(n) for n in names]
    if match in ("api", "call", "call-kwarg"):
        # A call rule that matches only a keyword argument (`out_dtype=` of torch.mm) needs one
        # of its keywords written too: as the keyword, or as the string key of the dict that
        # `**kwargs` passes (codemods/findings.py `_mapping_entries`: literal keys only, no
        # escapes), so written as one (a ("keyword", k) ref: `k=` or `'k'`; the word alone in a
        # docstring, lightly 1.6.0's "gpus: (int) Number of gpus", is neither). Only the
        # prefilter reads this; the statement filter keeps the leaf word.
        extras = _keyword_words([rule]) if match != "api" else [frozenset()]
        commands = FindingSpec.of(rule).commands
        if commands:
            # A command's words are in a string (`"nvidia-smi -L"`), perhaps assigned to a
            # variable the call is given (`cmd = "nvidia-smi -L | wc -l"`): the statement that
            # holds them is the one partial parsing keeps (codemods/findings.py asks for the
            # call that runs a variable); a file without them calls no such command.
            return [Requirement(req.words | {Word(k) for k in extra}, leaf=Word(max(extra - req.words, key=len)),
                                name=req.name, in_strings=True)
                    for req in map(components, names) for extra in extras]
        literals = _literal_requirements(FindingSpec.of(rule)) if match != "api" else [Requirement(frozenset())]
        found = [Requirement(req.words | {Word(k) for k in extra} | literal.words,
                             req.refs | literal.refs | {("keyword", k) for k in extra}, leaf=req.leaf, name=req.name)
                 for req in map(components, names) for extra in extras for literal in literals]
        spec = FindingSpec.of(rule)
        if spec.suffix_words:
            # The same, with a suffix word, for partial.py: the statements that write one
            # (`providers = ['CUDAExecutionProvider', ...]`, the variable the call is given) are
            # kept too (with the literal's ref only: that statement need not name the call).
            found += [Requirement(req.words | {Word(suffix)}, frozenset(r for r in req.refs if r == ("quoted_end", suffix)),
                                  leaf=Word(suffix), in_strings=True)
                      for req in found for suffix in spec.suffixes if ("quoted_end", suffix) in req.refs]
        return found
    if match == "string":  # every word of the text, inside a string literal
        return [Requirement(frozenset(Word(w) for w in re.findall(r"[A-Za-z0-9_]+", n)), in_strings=True,
                            leaf=Word(max(re.findall(r"[A-Za-z0-9_]+", n), key=len)))
                for n in names if re.search(r"[A-Za-z0-9_]", n)]
    if match == "guard" and rule.from_ == "cuda-interop":
        # one of the libraries (`cupy`; `numba` of numba.cuda), and "cuda" (torch's): partial.py
        # keeps the statements naming the library
        return [_guard_words([w.split(".")[0], "cuda"]) for w in FindingSpec.of(rule).words]
    if match == "guard":
        # "cuda" (a device test's string, `device.type == "cuda"`) counts inside strings only: a
        # comment saying cuda asks for nothing; so does "gloo" (in any case, as backends are compared)
        return [quoted(GUARD_TRIGGERS[n], ignore_case=n == "gloo-device-collectives")
                if GUARD_TRIGGERS[n] in ("cuda", "gloo") else _guard_words(GUARD_TRIGGERS[n].split())
                for n in names if n in GUARD_TRIGGERS]
    # method: `unless` its modules are imported (codemods/findings.py: such a file's calls are
    # the library's, linear_operator's to_dense); with `keywords`, one of them written too
    # (`.options(num_gpus=1)`: a file with `.options` alone has nothing to find)
    unless = frozenset(FindingSpec.of(rule).unless)
    return [Requirement(req.words | {Word(k) for k in extra}, req.refs | {("keyword", k) for k in extra}, leaf=Word(name),
                        unless=unless)
            for name in names for req in [attribute(name)] for extra in _keyword_words([rule])]


def _literal_requirements(spec: FindingSpec) -> List[Requirement]:
    """What a call rule's argument condition needs written besides the call, one of which a
    file must meet (codemods/findings.arguments_match reads only the file's own literals: the
    argument, the values a variable is assigned, an option's default): with `suffixes`, a string
    literal ending in one of them (`accelerator="gpu"`; `accelerator="auto"` alone has nothing
    to find: pytorch-forecasting's 7 files with Lightning Trainers); with `keys`, one of them
    quoted (a dict key, a plain literal: `{"gpu": 1}`). Nothing more for a suffix a version may
    follow (`libcudart.so.11.0`) or one not written as itself, nor for a key that is not a word."""
    if spec.suffixes and all(re.fullmatch(r"[\w.+-]*\w", s) and not s.endswith(".so") for s in spec.suffixes):
        return [Requirement(frozenset(), frozenset({("quoted_end", s)})) for s in spec.suffixes]
    if spec.keys and all(re.fullmatch(r"[A-Za-z_]\w*", k) for k in spec.keys):
        return [quoted(k) for k in spec.keys]
    return [Requirement(frozenset())]


def _guard_words(words: List[str]) -> Requirement:
    """Every word of a guard's trigger; partial.py keeps the statements holding the first."""
    return Requirement(frozenset(Word(w) for w in words), leaf=Word(words[0]) if len(words) > 1 else None)


_CALL_WORDS: Dict[Tuple[str, bool], List[FrozenSet[Any]]] = {}  # (rule-set fingerprint, encoded) -> see call_words


def call_words(rules: "RuleSet", encoded: bool = False) -> List[FrozenSet[Any]]:
    """For each call/method finding's name, the words a file must contain for a reference to
    it: every part of `torch.utils.cpp_extension.load` (an import or the reference spells each
    one out), the name of a method. codemods/findings.py walks the tree only when a file has
    all the words of one of them. `encoded`: as bytes (to look up in words.words_of's)."""
    needed = _CALL_WORDS.get((rules.fingerprint, encoded))
    if needed is None:
        if encoded:
            needed = [frozenset(w.encode() for w in n) for n in call_words(rules)]
        else:
            # (a call rule that matches only a keyword argument needs that keyword written too:
            # an `out_dtype=` rule of torch.mm has nothing to find in a file that says torch and mm)
            needed = [frozenset(name.split(".")) | extra for name, named in rules.finding_call.items()
                      for extra in _keyword_words(named, suffixes=True)]
            needed += [frozenset((name,)) | extra for name, named in rules.finding_method.items()
                       for extra in _keyword_words(named)]
            needed += [frozenset(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))
                       for rule in rules.findings.get("string", ()) for text in names_of(rule)]
        _CALL_WORDS[(rules.fingerprint, encoded)] = needed
    return needed


def _keyword_words(rules: List[Rule], suffixes: bool = False) -> List[FrozenSet[str]]:
    """The words besides its name a call of these rules must have: one keyword of each rule that
    matches only keyword arguments, and the words of one of its `commands` (`nvidia`, `smi`: a
    file that calls subprocess.run without them runs no nvidia-smi), else nothing more; with
    `suffixes` (call_words), one of its `suffixes` too with `suffix_words` (`CUDAExecutionProvider`)."""
    extras: List[FrozenSet[str]] = []
    for rule in rules:
        spec = FindingSpec.of(rule)
        found = ([frozenset({k}) for k in spec.keywords] if spec.keywords and not spec.positions
                 else [frozenset()])
        if spec.commands:
            found = [f | frozenset(re.findall(r"[A-Za-z0-9_]+", c)) for f in found for c in spec.commands]
        if suffixes and spec.suffix_words:  # (`CUDAExecutionProvider`: a file without one has nothing to find)
            found = [f | {s} for f in found for s in spec.suffixes]
        extras += [e for e in found if e not in extras]
    return extras


KIND = register(Kind(
    name="finding",
    schema=schema(("kind", "severity"), ("api", "apis", "keywords", "patterns", "unless", "positions",
                                         "suffixes", "suffix_words", "commands", "keys", "context", "framework", "once_per_file", "words",
                                         "resolves", "unless_named",
                                         "skip_logged", "skip_type_tests", "gates")),
    summary="something to report (no rewrite): a reference, import, call, method, file, …",
    requirements=_requirements,
    new_index=FindingIndex,
    index=_index,
    check=_check,
    spec=_check_framework_finding,
    also_required=_also_required,
    fields=_fields,
    reports=True,
    key=lambda rule: kind_key("finding", rule.framework, FindingSpec.of(rule).match_kind),
))
