"""A MindSpore script's device target, migrated as one value (rules/mindspore.toml,
`[[device_dispatch]]`): the argparse option that holds it (default and choices), the comparisons
that read it (`if args.device_target == "GPU":`) and the branch they select move together, or
nothing moves and the file is reported.

For each key (`device_target`, `platform`, ...: an attribute or variable of that name compared
with "GPU"/"Ascend"/"CPU", or an argparse option of that name with such a default or choices):

* the option is defined in this file, read here, and "Ascend" appears nowhere (not in its
  choices, not in a comparison): the GPU branch becomes the Ascend branch -- "GPU" becomes
  "Ascend" in the default, the choices and every comparison; the rewrites inside that branch
  (device_target="GPU", init("nccl")) are then done by the [[argument]] rules as usual;
* the option is defined here and "Ascend" is already known: only the default moves to
  "Ascend" (and "Ascend" joins choices that lack it); a branch selected by "GPU" stays the GPU
  branch, so nothing inside it is rewritten;
* the option is defined here with a "GPU" default and its value is passed to a function of
  another project module (`create_dataset(..., device_target=args.device_target)`): when that
  module is migrated in the same run and its function compares the parameter with "GPU" only,
  both sides move together (`crossing_moves`, decided once per run and handed to both files in
  Options.mindspore_device_moves: the option as above, the function's comparisons and its
  parameter's default); otherwise nothing moves and the call is reported (moving the default
  alone sent "Ascend" to a module that accepts only "GPU");
* the value comes from elsewhere (a config module, a YAML file) or the option is defined here
  but read elsewhere: nothing of it is rewritten, the GPU-selected branches are kept as they
  are, and the file is reported (`unknown_finding`) when no Ascend branch exists.

`analyse()` returns the literal rewrites and the statements to keep; `apply_device_dispatch()`
makes the rewrites and returns the ids of the statements the framework rules must leave alone.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from typing import Dict, FrozenSet, Iterable, List, Optional, Sequence, Set, Tuple

import libcst as cst

from ..context import Context
from ..fast_visitor import transform, walk
from ..imports import dotted_name
from ..kinds.device_dispatch import DeviceDispatchSpec
from ..project_values import quoted
from ..rules import Rule
from .strings import string_value, with_body
from .syntax import option_names
from ..codes import applies

TARGETS = ("GPU", "Ascend", "CPU")


@dataclass
class Option:
    call: cst.Call
    path: Tuple[int, ...]
    statement: Optional[cst.SimpleStatementLine]
    defaults: List[cst.SimpleString] = field(default_factory=list)
    choices: Optional[cst.BaseExpression] = None  # the List/Tuple/Set of the choices
    choice_literals: List[cst.SimpleString] = field(default_factory=list)


@dataclass
class Comparison:
    node: cst.Comparison
    path: Tuple[int, ...]
    literals: List[cst.SimpleString]
    negated: bool  # != / not in


@dataclass
class Key:
    options: List[Option] = field(default_factory=list)
    comparisons: List[Comparison] = field(default_factory=list)
    readers: int = 0  # references other than in the comparisons
    # Calls that pass the value to a function of another project module (`create_dataset(...,
    # device_target=args.device_target)` with `from src.dataset import create_dataset`):
    # (call, callee as written, its module).
    crossing: List[Tuple[cst.Call, str, str]] = field(default_factory=list)
    gpu_bodies: List[cst.CSTNode] = field(default_factory=list)  # branches that run for "GPU"
    # `def create_dataset(path, device_target="GPU")`: the parameter's default, and the functions
    # taking the value as a parameter (name -> its position), for a value that crosses modules.
    param_defaults: List[Tuple[cst.SimpleString, Tuple[int, ...]]] = field(default_factory=list)
    functions: Dict[str, int] = field(default_factory=dict)


def _key_of(node: cst.BaseExpression, keys: Tuple[str, ...], aliases: Optional[Dict[str, str]] = None
            ) -> Optional[str]:
    if isinstance(node, cst.Attribute) and node.attr.value in keys:
        return node.attr.value
    if isinstance(node, cst.Name):
        if node.value in keys:
            return node.value
        if aliases and node.value in aliases:
            return aliases[node.value]
    return None


class _Aliases(cst.CSTVisitor):
    """`dev = config.device_target`: `dev` is the device target too (assigned nothing else)."""

    def __init__(self, keys: Tuple[str, ...]) -> None:
        super().__init__()
        self.keys = keys
        self.assigned: Dict[str, List[Optional[str]]] = {}

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            if isinstance(target.target, cst.Name):
                self.assigned.setdefault(target.target.value, []).append(_key_of(node.value, self.keys))

    def aliases(self) -> Dict[str, str]:
        found = {}
        for name, keys in self.assigned.items():
            if name not in self.keys and len(set(keys)) == 1 and keys[0] is not None:
                found[name] = keys[0]
        return found


def _target_literals(node: cst.BaseExpression) -> Optional[List[cst.SimpleString]]:
    """The device-target literals of "GPU" or ("GPU", "CPU"); None for anything else."""
    if isinstance(node, cst.SimpleString):
        return [node] if string_value(node) in TARGETS else None
    if isinstance(node, (cst.Tuple, cst.List, cst.Set)):
        found = [e.value for e in node.elements if isinstance(e.value, cst.SimpleString)]
        if found and len(found) == len(node.elements) and all(string_value(s) in TARGETS for s in found):
            return found
    return None


# Modules that are not the project's: a device value passed to them is not followed.
_LIBRARIES = ("mindspore", "numpy", "os", "sys", "argparse", "logging", "time", "math", "random", "moxing",
              "ast", "json", "yaml", "easydict", "collections", "functools", "typing", "pathlib")


def _is_library(module: str) -> bool:
    return not module.startswith(".") and module.split(".", 1)[0] in _LIBRARIES


class _Analysis(cst.CSTVisitor):
    def __init__(self, keys: Tuple[str, ...], aliases: Optional[Dict[str, str]] = None) -> None:
        super().__init__()
        self.keys_names = keys
        self.aliases = aliases or {}
        self.keys: Dict[str, Key] = {}
        self._in_comparison: Set[int] = set()
        self._not_readers: Set[int] = set()  # keyword names, attribute names, parameters
        self._line: Optional[cst.SimpleStatementLine] = None
        self._stack: List[int] = []  # ids of the nodes the visit is in
        self._project: Dict[str, str] = {}  # local name -> the project module it comes from
        # Every call of a function imported from a project module: (call, callee as written, module).
        self.project_calls: List[Tuple[cst.Call, str, str]] = []
        self._functions: Dict[int, str] = {}  # id of a FunctionDef -> its name

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        module = "." * len(node.relative) + (dotted_name(node.module) or "" if node.module is not None else "")
        if _is_library(module) or isinstance(node.names, cst.ImportStar):
            return
        for alias in node.names:
            name = alias.asname.name if alias.asname is not None else alias.name
            if isinstance(name, cst.Name):
                self._project[name.value] = module

    def _crossing(self, node: cst.Call) -> None:
        root = node.func
        while isinstance(root, cst.Attribute):
            root = root.value
        if not isinstance(root, cst.Name) or root.value not in self._project:
            return
        module, callee = self._project[root.value], dotted_name(node.func) or root.value
        self.project_calls.append((node, callee, module))
        for arg in node.args:
            value = arg.value
            name = value.attr.value if isinstance(value, cst.Attribute) else (
                value.value if isinstance(value, cst.Name) else None)
            name = self.aliases.get(name, name) if name is not None else None
            if name in self.keys_names:
                self.key(name).crossing.append((node, callee, module))

    def on_visit(self, node: cst.CSTNode) -> bool:
        self._stack.append(id(node))
        return super().on_visit(node)

    def on_leave(self, original_node: cst.CSTNode) -> None:
        super().on_leave(original_node)
        self._stack.pop()

    def key(self, name: str) -> Key:
        return self.keys.setdefault(name, Key())

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self._line = node

    def leave_SimpleStatementLine(self, original_node: cst.SimpleStatementLine) -> None:
        self._line = None

    def visit_Call(self, node: cst.Call) -> None:
        if self._project:
            self._crossing(node)
        # (an option is an `add_argument` call: project_values._may_cross looks for these bytes
        # before a run looks for values crossing modules)
        if not (isinstance(node.func, cst.Attribute) and node.func.attr.value == "add_argument"):
            return
        names = [n for n in option_names(node) if n in self.keys_names]
        if not names:
            return
        option = Option(node, tuple(self._stack), self._line)
        for arg in node.args:
            if arg.keyword is None:
                continue
            if arg.keyword.value == "default":
                option.defaults = _target_literals(arg.value) or [] if isinstance(arg.value, cst.SimpleString) else []
            elif arg.keyword.value == "choices":
                literals = _target_literals(arg.value)
                if literals is not None and not isinstance(arg.value, cst.SimpleString):
                    option.choices, option.choice_literals = arg.value, literals
        if option.defaults or option.choice_literals:
            self.key(names[0]).options.append(option)

    def visit_Comparison(self, node: cst.Comparison) -> None:
        if len(node.comparisons) != 1:
            return
        target = node.comparisons[0]
        operator = target.operator
        left, right = node.left, target.comparator
        key = _key_of(left, self.keys_names, self.aliases)
        literals = _target_literals(right)
        if key is None and isinstance(operator, (cst.Equal, cst.NotEqual)):
            key, literals = _key_of(right, self.keys_names, self.aliases), _target_literals(left)
        if key is None or literals is None:
            return
        if not isinstance(operator, (cst.Equal, cst.NotEqual, cst.In, cst.NotIn)):
            return
        negated = isinstance(operator, (cst.NotEqual, cst.NotIn))
        self.key(key).comparisons.append(Comparison(node, tuple(self._stack), literals, negated))
        self._in_comparison.add(id(left))
        self._in_comparison.add(id(right))

    def visit_If(self, node: cst.If) -> None:
        """Record the branches that run for "GPU": the body of `== "GPU"`, the `else` of
        `!= "GPU"`, and what runs when the target is not "Ascend" (the `else`/`elif`s of
        `== "Ascend"`, the body of `!= "Ascend"`)."""
        for comparison, key in self._gates(node.test):
            values = {string_value(s) for s in comparison.literals}
            orelse = node.orelse.body if isinstance(node.orelse, cst.Else) else node.orelse
            if "GPU" in values:
                branch = orelse if comparison.negated else node.body
            elif "Ascend" in values:
                branch = node.body if comparison.negated else orelse
            else:
                continue
            if branch is not None:
                self.key(key).gpu_bodies.append(branch)

    def _gates(self, test: cst.BaseExpression) -> List[Tuple[Comparison, str]]:
        """The comparisons that decide `test`: itself, or the operands of `and`/`or`."""
        if isinstance(test, cst.BooleanOperation):
            return self._gates(test.left) + self._gates(test.right)
        if isinstance(test, cst.Comparison):
            probe = _Analysis(self.keys_names, self.aliases)
            test.visit(probe)
            return [(c, k) for k, key in probe.keys.items() for c in key.comparisons if c.node is test]
        return []

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self._not_readers.add(id(node.keyword))

    def visit_Param(self, node: cst.Param) -> None:
        self._not_readers.add(id(node.name))

    def visit_Parameters(self, node: cst.Parameters) -> None:
        function = self._stack[-2] if len(self._stack) > 1 else None
        for index, param in enumerate([*node.posonly_params, *node.params, *node.kwonly_params]):
            if param.name.value not in self.keys_names or function not in self._functions:
                continue
            key = self.key(param.name.value)
            key.functions[self._functions[function]] = index if param in node.params or param in node.posonly_params \
                else 1 << 20  # keyword-only: no call passes it by position
            if isinstance(param.default, cst.SimpleString) and _target_literals(param.default):
                key.param_defaults.append((param.default, (*self._stack, id(param))))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._functions[id(node)] = node.name.value

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._not_readers.add(id(node.attr))

    def leave_Attribute(self, original_node: cst.Attribute) -> None:
        if original_node.attr.value in self.keys_names and id(original_node) not in self._in_comparison:
            self.key(original_node.attr.value).readers += 1

    def leave_Name(self, original_node: cst.Name) -> None:
        if (original_node.value in self.keys_names and id(original_node) not in self._in_comparison
                and id(original_node) not in self._not_readers):
            self.key(original_node.value).readers += 1


@dataclass
class Decision:
    literals: Dict[int, Tuple[cst.SimpleString, str]] = field(default_factory=dict)  # id -> (node, new value)
    add_choice: Dict[int, cst.BaseExpression] = field(default_factory=dict)  # choices container -> itself
    keep: Set[int] = field(default_factory=set)  # statements the framework rules leave alone
    hot: Set[int] = field(default_factory=set)  # ids of the nodes on the way to a rewrite
    roots: Set[int] = field(default_factory=set)  # the calls and comparisons rewritten (visited whole)
    reports: List[Tuple[cst.CSTNode, str, str]] = field(default_factory=list)  # (node, api, message)


_DEVICE_SETUP_CALLS = frozenset({"set_context", "init", "set_auto_parallel_context"})


class _DeviceSetup(cst.CSTVisitor):
    def __init__(self) -> None:
        self.found = False

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if string_value(node) in ("GPU", "nccl"):
            self.found = True

    def visit_Call(self, node: cst.Call) -> None:
        name = dotted_name(node.func) or ""
        if name.rsplit(".", 1)[-1] in _DEVICE_SETUP_CALLS:
            self.found = True


def _sets_up_device(body: cst.CSTNode) -> bool:
    """Whether a branch selected by "GPU" sets the device up (`set_context(device_target="GPU")`,
    `init("nccl")`, a "GPU" string): the branch an Ascend run must take too."""
    probe = _DeviceSetup()
    body.visit(probe)
    return probe.found


def _statements(suite: cst.CSTNode) -> List[cst.CSTNode]:
    if isinstance(suite, cst.IndentedBlock):
        return list(suite.body)
    return [suite]  # a one-line suite, or an `elif` (its If statement)


def _analysis(module: cst.Module, keys: Tuple[str, ...]) -> _Analysis:
    aliases = _Aliases(keys)
    walk(module, aliases)
    found = _Analysis(keys, aliases.aliases())
    walk(module, found)
    return found


def analyse(module: cst.Module, rule: Rule, crossing: FrozenSet[str] = frozenset()) -> Decision:
    """`crossing`: the keys whose value crosses into (or comes from) another module of the run
    that moves with this one (crossing_moves)."""
    spec = rule.spec_of(DeviceDispatchSpec)
    frm, to = spec.literal, spec.to
    found = _analysis(module, spec.options)
    decision = Decision()

    def rewrite(literals: List[cst.SimpleString], path: Tuple[int, ...]) -> None:
        for s in literals:
            if string_value(s) == frm:
                decision.literals[id(s)] = (s, to)
                decision.hot.update(path)
                decision.roots.add(path[-1])

    for name, key in found.keys.items():
        gpu_options = [o for o in key.options if any(string_value(s) == frm for s in o.defaults)]
        if key.crossing and gpu_options and name not in crossing:
            # The value crosses into another module of the project, whose code this file cannot
            # see: moving the default alone would send "Ascend" where only "GPU" may be accepted.
            call, callee, where = key.crossing[0]
            for option in gpu_options:
                if option.statement is not None:
                    decision.keep.add(id(option.statement))
            for body in key.gpu_bodies:
                decision.keep.update(id(s) for s in _statements(body))
            decision.reports.append((
                call, f"--{name}",
                f"`--{name}` (default \"{frm}\") is passed to `{callee}` of the project module `{where}`: the"
                f" value and the code there that reads it must become \"{to}\" together, so both were left as they are"
                " (migrate that module with it, then change the default).",
            ))
            continue
        gpu_compared = [c for c in key.comparisons if any(string_value(s) == frm for s in c.literals)]
        known = any(string_value(s) == to for c in key.comparisons for s in c.literals) or any(
            string_value(s) == to for o in key.options for s in o.choice_literals
        )
        read_here = bool(key.comparisons) or key.readers > 0
        # A config module: the option is defined here and read elsewhere. Its default can move
        # alone only when its choices say the readers know "Ascend".
        offered = any(string_value(s) == to for o in key.options for s in o.choice_literals)
        if key.options and (read_here or offered):
            if not known:  # the GPU branch becomes the Ascend branch
                for option in key.options:
                    rewrite(option.defaults + option.choice_literals, option.path)
                for comparison in key.comparisons:
                    rewrite(comparison.literals, comparison.path)
                continue
            # Ascend has a branch already: only the default moves.
            for option in key.options:
                rewrite(option.defaults, option.path)
                if option.choices is not None and not offered and any(
                        string_value(s) == frm for s in option.defaults):
                    decision.add_choice[id(option.choices)] = option.choices
                    decision.hot.update(option.path)
                    decision.roots.add(option.path[-1])
        if name in crossing and not key.options:
            # The value comes from the option of a module migrated with this one, which moves to
            # "Ascend" with these comparisons and the parameter's default (crossing_moves).
            for literal, path in key.param_defaults:
                rewrite([literal], path)
            for comparison in key.comparisons:
                rewrite(comparison.literals, comparison.path)
            continue
        # The branches that run for "GPU" stay the GPU branches.
        for body in key.gpu_bodies:
            decision.keep.update(id(s) for s in _statements(body))
        if key.options and (read_here or offered):
            continue
        # Not migratable here: keep everything about this value as it is.
        gpu_options = [o for o in key.options if any(string_value(s) == frm for s in o.defaults)]
        for option in gpu_options:
            if option.statement is not None:
                decision.keep.add(id(option.statement))
        if gpu_options:
            decision.reports.append((
                gpu_options[0].call, f"--{name}",
                f"`--{name}` defaults to \"{frm}\" and does not offer \"{to}\", and nothing in this file reads it:"
                f" the code that does (in another file) must move to \"{to}\" with it, so it was left as it is.",
            ))
        elif gpu_compared and not known and any(_sets_up_device(body) for body in key.gpu_bodies):
            # (A "GPU" branch that only picks a GPU variant, with the Ascend path in its `else`
            # -- the model zoos' `AdamWeightDecayForBert` on GPU, tinyms' bert_optimizer -- runs
            # on Ascend as written: making it the Ascend branch would be wrong advice.)
            decision.reports.append((
                gpu_compared[0].node, name,
                f"`{name}` selects the \"{frm}\" branch here, and its value comes from outside this file (a config"
                f" module or YAML file): the branch and the value must become \"{to}\" together, so both were"
                " left as they are.",
            ))
    return decision


class _Apply(cst.CSTTransformer):
    """Visits only the way to the rewrites (through `hot`, then all of a call or comparison
    there), so every other statement keeps its identity: the framework rules' `keep` ids stay
    valid in the tree this returns."""

    def __init__(self, decision: Decision) -> None:
        super().__init__()
        self.decision = decision
        self._inside = 0  # depth inside a root

    def on_visit(self, node: cst.CSTNode) -> bool:
        if id(node) in self.decision.roots:
            self._inside += 1
        elif not self._inside and id(node) not in self.decision.hot:
            return False
        return super().on_visit(node)

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode):
        if id(original_node) in self.decision.roots:
            self._inside -= 1
        return super().on_leave(original_node, updated_node)

    def leave_SimpleString(self, original_node: cst.SimpleString, updated_node: cst.SimpleString) -> cst.SimpleString:
        planned = self.decision.literals.get(id(original_node))
        return with_body(updated_node, planned[1]) if planned is not None else updated_node

    def _add(self, original: cst.BaseExpression, updated: cst.BaseExpression) -> cst.BaseExpression:
        if id(original) not in self.decision.add_choice:
            return updated
        elements = list(updated.elements)  # type: ignore[attr-defined]
        first = elements[0].value
        quote = first.quote if isinstance(first, cst.SimpleString) else '"'
        new = cst.Element(value=cst.SimpleString(f"{quote}Ascend{quote}"),
                          comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        return updated.with_changes(elements=[new, *elements])

    def leave_List(self, original_node: cst.List, updated_node: cst.List) -> cst.BaseExpression:
        return self._add(original_node, updated_node)

    def leave_Tuple(self, original_node: cst.Tuple, updated_node: cst.Tuple) -> cst.BaseExpression:
        return self._add(original_node, updated_node)

    def leave_Set(self, original_node: cst.Set, updated_node: cst.Set) -> cst.BaseExpression:
        return self._add(original_node, updated_node)


@applies("device_dispatch@mindspore", "device_dispatch@tensorflow", "finding:codemod@mindspore")
def apply_device_dispatch(module: cst.Module, ctx: Context, rule: Rule, finding: Optional[Rule]) -> Tuple[cst.Module, Set[int]]:
    here = os.path.abspath(ctx.path)
    crossing = frozenset(key for path, _, key in (m.rpartition("::") for m in ctx.options.mindspore_device_moves)
                         if path == here)
    decision = analyse(module, rule, crossing)
    tree = None if module is ctx.module else module
    for node, api, message in decision.reports:
        if finding is not None and not ctx.suppressed(node, finding.code):
            ctx.finding(finding, node, api=api, message=message, module=tree)
    planned = {k: v for k, v in decision.literals.items() if not ctx.suppressed(v[0], rule.code)}
    decision.literals = planned
    if not planned and not decision.add_choice:
        return module, decision.keep
    for node, new in planned.values():
        ctx.edit(rule, node, rule.render_message(before=module.code_for_node(node), after=with_body(node, new).value),
                 module.code_for_node(node), with_body(node, new).value, module=tree)
    for container in decision.add_choice.values():
        before = module.code_for_node(container)
        first = container.elements[0].value  # type: ignore[attr-defined]
        quote = first.quote if isinstance(first, cst.SimpleString) else '"'
        after = f"{before[0]}{quote}Ascend{quote}, {before[1:]}"
        ctx.edit(rule, container, f"`{before}` -> `{after}`: the default is \"Ascend\" now", before, after,
                 module=tree)
    return transform(module, _Apply(decision)), decision.keep


# ----------------------------------------------------------------------------- across modules


def crossing_moves(files: Sequence[str], rule: Rule, facts: Optional[Dict[str, List[object]]] = None
                   ) -> Tuple[str, ...]:
    """The values that move across modules of the run (`path::key`, absolute paths), found once
    per run (pipeline.with_project_values) so that the file holding the option and the file
    comparing the value decide the same: `train.py` passes `--device_target` (default "GPU",
    no "Ascend" branch) to `create_dataset` of `src/dataset.py`, whose comparisons of the
    parameter know "GPU" only. Both move -- the option's default and choices, the comparisons on
    both sides, the parameter's default -- when every call of the project's functions that take
    the value passes it from such an option or leaves it to its default, and the callee passes
    it no further; otherwise neither moves and both are reported (NPU348), as before.

    `facts`: filled with absolute path -> [sha256 of the bytes read, whether it holds a caller
    whose value may move] for each file read whole that mentions mindspore; with no caller
    nothing moves (pipeline.with_project_values keeps them for warm runs: no libcst then)."""
    spec = rule.spec_of(DeviceDispatchSpec)
    frm, to = spec.literal, spec.to
    # Every file is looked at as bytes; only the texts of files that can take part are kept (a
    # run over transformers held all 44 MB of it in the main process, before the workers fork).
    paths = list(dict.fromkeys(os.path.abspath(p) for p in files if p.endswith(".py")))
    texts: Dict[str, Optional[str]] = {}

    def text_of(path: str, data: Optional[bytes] = None) -> Optional[str]:
        if path not in texts:
            try:
                if data is None:
                    with open(path, "rb") as f:
                        data = f.read(1 << 21)
                texts[path] = data.decode("utf-8")
            except (OSError, UnicodeDecodeError):
                texts[path] = None
        return texts[path]

    found: Dict[str, _Analysis] = {}

    def analyse_file(path: str) -> None:
        try:
            found[path] = _analysis(cst.parse_module(texts[path] or ""), spec.options)
        except (cst.ParserSyntaxError, RecursionError):
            pass

    digests: Dict[str, str] = {}
    value = quoted(frm)
    options = [k.encode("utf-8") for k in spec.options]
    for path in paths:
        try:
            with open(path, "rb") as f:
                data = f.read(1 << 21)
        except OSError:
            continue
        # (a UTF-8 text contains a string exactly when its bytes contain the string's bytes). A
        # caller's default and a callee's comparison are the literal itself (caller_ok, callee_ok);
        # a file that only calls a callee is read below, by the callee's function names.
        if (b"mindspore" in data and any(k in data for k in options) and value.search(data)
                and text_of(path, data) is not None):
            analyse_file(path)
        if facts is not None and b"mindspore" in data and len(data) < 1 << 21:
            digests[path] = hashlib.sha256(data).hexdigest()

    def says(key: Key, value: str) -> bool:
        return any(string_value(s) == value for c in key.comparisons for s in c.literals) or any(
            string_value(s) == value for o in key.options for s in o.choice_literals)

    def caller_ok(path: str, name: str) -> bool:  # the option is here, "GPU" by default, no "Ascend"
        key = found[path].keys[name]
        return any(string_value(s) == frm for o in key.options for s in o.defaults) and not says(key, to)

    def callee_ok(path: str, name: str) -> bool:  # compares the parameter with "GPU" only
        key = found[path].keys.get(name)
        return (key is not None and bool(key.functions) and not key.options and not key.crossing
                and says(key, frm) and not says(key, to) and key.readers == 0)

    # (caller, key) -> the callees its value crosses into; start from every crossing, then drop
    # what cannot move until nothing changes (a caller whose other crossing stays, stays).
    moving: Dict[Tuple[str, str], Set[str]] = {}
    for path, analysis in found.items():
        for name, key in analysis.keys.items():
            if key.crossing and caller_ok(path, name):
                moving[(path, name)] = {_module_file(where, path, found) or "" for _, _, where in key.crossing}
    callers = {path for path, _ in moving}
    for path, digest in digests.items():
        assert facts is not None  # (digests are kept only for facts)
        had = facts.get(path)
        # (read twice with other bytes, by two rules: not a fact of either)
        facts[path] = [digest, path in callers or (had is not None and (had[0] != digest or bool(had[1])))]
    # Every other file that names a callee's function may call it (`create_dataset(p, "GPU")`).
    names = {f for (_, name), cs in moving.items() for c in cs if c in found and name in found[c].keys
             for f in found[c].keys[name].functions}
    for path in paths if names else ():
        text = None if path in found else text_of(path)
        if text is not None and any(n in text for n in names):
            analyse_file(path)
    changed = True
    while changed:
        changed = False
        for (path, name), cs in list(moving.items()):
            if any(not c or not callee_ok(c, name) or not _calls_fit(c, name, found, moving) for c in cs):
                del moving[(path, name)]
                changed = True
    out = {f"{path}::{name}" for (path, name) in moving}
    out |= {f"{c}::{name}" for (_, name), cs in moving.items() for c in cs}
    return tuple(sorted(out))


def _calls_fit(callee: str, name: str, found: Dict[str, _Analysis], moving: Dict[Tuple[str, str], Set[str]]) -> bool:
    """Whether every call of `callee`'s functions that take `name` passes the value of a moving
    caller's option, or leaves the parameter to its default."""
    functions = found[callee].keys[name].functions
    for path, analysis in found.items():
        passing = {id(call) for call, _, _ in analysis.keys[name].crossing} if name in analysis.keys else set()
        for call, written, where in analysis.project_calls:
            function = written.rsplit(".", 1)[-1]
            if function not in functions or _module_file(where, path, found) != callee:
                continue
            if id(call) in passing and (path, name) in moving:
                continue
            positional = sum(1 for a in call.args if a.keyword is None and not a.star)
            if any(a.keyword is not None and a.keyword.value == name for a in call.args) or any(
                    a.star for a in call.args) or positional > functions[function]:
                return False
    return True


def _module_file(module: str, caller: str, found: Dict[str, _Analysis]) -> Optional[str]:
    """The file among `found` that `from <module> import ...` in `caller` imports: relative to the
    caller's folder, or the one file whose path ends with the module's (none when two do)."""
    if module.startswith("."):
        base = os.path.dirname(caller)
        for _ in range(len(module) - len(module.lstrip(".")) - 1):
            base = os.path.dirname(base)
        parts = [p for p in module.lstrip(".").split(".") if p]
        stem = os.path.join(base, *parts)
        hits: Iterable[str] = [p for p in (stem + ".py", os.path.join(stem, "__init__.py")) if p in found]
    else:
        tail = os.path.join(*module.split("."))
        hits = [p for p in found if p.endswith(os.sep + tail + ".py") or p.endswith(os.sep + os.path.join(tail, "__init__.py"))]
    hits = list(hits)
    return hits[0] if len(hits) == 1 else None
