"""The device, backend and environment-variable kinds (kinds/device.py, kinds/backend.py,
kinds/env.py) in the PyTorch pass: string literals rewritten where they certainly are a device
(`"cuda:0"` -> `"npu:0"`), a distributed backend (`"nccl"` -> `"hccl"`) or an environment
variable name -- arguments, comparisons, assignments to device/backend variables, argparse
defaults -- never elsewhere.
"""

from __future__ import annotations

import os
import re
from typing import Callable, Collection, Dict, Iterator, List, Optional, Sequence, Set, Tuple

import libcst as cst
from libcst.helpers import get_full_name_for_node

from ...kinds.device import Positions
from ...frameworks import BACKEND_FUNCS, BACKEND_GETTERS, DEVICE_KEYWORDS_OF, DEVICE_NAME_RE, ENV_FUNCS
from ...rules import Rule
from ...fast_visitor import subtree, walk
from .. import device_context as dc
from ..strings import LiteralRewriter, string_value
from ...words import words_of
from ..syntax import option_names, self_attribute
from ...codes import applies, emits
from .state import TorchKind, TorchState

BACKEND_NAME_RE = re.compile(r"(?i)backend")
ARGPARSE_ADDERS = {"add_argument"}
# configargparse's aliases of add_argument (OpenNMT-py declares every option with `group.add`):
# taken only with an option string (`"--gpu_backend"`), which a set's `add` never has.
CONFIGARGPARSE_ADDERS = {"add", "add_arg"}
# Calls that declare a class attribute with its default (`default=`): dataclasses, attrs, pydantic.
FIELD_MAKERS = {"field", "Field", "ib", "attrib", "dataclasses.field", "attr.ib", "attr.attrib", "attrs.field",
                "pydantic.Field"}
# Other command-line libraries: click options take argparse's keywords (`type=click.Choice`);
# absl flags are (name, default, [enum_values,] help).
CLICK_OPTIONS = {"click.option", "click.argument"}
# unittest's assertions that compare their first two arguments (`==`, `!=`, `in`, `not in`).
UNITTEST_COMPARISONS = {"assertEqual", "assertEquals", "assertNotEqual", "assertIn", "assertNotIn"}
ABSL_FLAGS = {
    "absl.flags.DEFINE_string": False, "absl.flags.DEFINE_enum": True, "absl.flags.DEFINE_list": False,
}


def _declares_option(call: cst.Call) -> bool:
    """`parser.add_argument(...)`, or configargparse's `group.add("--name", ...)`."""
    if not isinstance(call.func, cst.Attribute):
        return False
    method = call.func.attr.value
    if method in ARGPARSE_ADDERS:
        return True
    if method not in CONFIGARGPARSE_ADDERS or not call.args or call.args[0].keyword is not None:
        return False
    first = string_value(call.args[0].value)
    return first is not None and first.startswith("-")


def _literal_strings(node: cst.BaseExpression):
    """The string literals a type lists as `Literal[...]` values, also inside `Optional[...]`,
    `Union[...]` and `X | None` (a type parsed from a string annotation: names by their text)."""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.BitOr):
        yield from _literal_strings(node.left)
        yield from _literal_strings(node.right)
    elif isinstance(node, cst.Subscript):
        kind = (last_identifier(node.value) or "").rsplit(".", 1)[-1]
        for element in node.slice:
            if isinstance(element.slice, cst.Index):
                if kind == "Literal" and isinstance(element.slice.value, cst.SimpleString):
                    yield element.slice.value
                elif kind in ("Optional", "Union"):
                    yield from _literal_strings(element.slice.value)


# A value looked up with a default: `cfg.get("device", "cuda:0")`, `kwargs.pop("device", "cuda")`,
# `os.environ.get("DEVICE", "cuda")`, `os.getenv("DEVICE", "cuda")`, `getattr(args, "device", "cuda")`.
# Where the tool would move the default written in the lookup's place (an argument that is a
# device, an assignment to a device variable, an argparse default, a comparison with a device),
# it moves the lookup's default; a key named for a device makes the lookup one to compare with
# (`cfg.get("device") == "cuda"`, as `cfg["device"] == "cuda"`).
LOOKUP_METHODS = frozenset({"get", "pop", "setdefault", "getenv"})


def lookup_parts(node: cst.BaseExpression) -> Optional[Tuple[cst.BaseExpression, Optional[cst.Arg]]]:
    """(the key, the default's argument or None) of a lookup (LOOKUP_METHODS, `getattr(o, k, d)`,
    `getenv(k, d)`), None for any other expression. `devices.get(...)`, a method of a collection
    named for devices, is no lookup: its key is an element (COLLECTION_METHODS)."""
    if type(node) is not cst.Call or not node.args:  # (a libcst node class is final)
        return None
    func, args = node.func, node.args
    if any(a.star for a in args):
        return None
    if isinstance(func, cst.Name):
        if func.value == "getattr" and len(args) in (2, 3) and all(a.keyword is None for a in args):
            return args[1].value, (args[2] if len(args) == 3 else None)
        if func.value != "getenv":
            return None
    elif not isinstance(func, cst.Attribute) or func.attr.value not in LOOKUP_METHODS \
            or (func.attr.value != "getenv" and _named_for_devices(func.value)):
        return None
    if len(args) > 2 or args[0].keyword is not None:
        return None
    if len(args) == 2 and args[1].keyword is not None and args[1].keyword.value != "default":
        return None
    return args[0].value, (args[1] if len(args) == 2 else None)


def lookup_key(node: cst.BaseExpression) -> Optional[str]:
    """The string key of a lookup (`cfg.get("device", ...)` -> "device"), None otherwise."""
    parts = lookup_parts(node)
    return string_value(parts[0]) if parts is not None else None


# Calls that keep a device string what it is: `str(cfg.get("device", "cuda"))`, `.strip()`, `.lower()`.
_SAME_TEXT_METHODS = frozenset({"strip", "lower"})


def same_text_of(node: cst.Call) -> Optional[cst.BaseExpression]:
    """X of `str(X)`, `X.strip()`, `X.lower()`; None for any other call."""
    func, args = node.func, node.args
    if isinstance(func, cst.Name) and func.value == "str" and len(args) == 1 and args[0].keyword is None \
            and not args[0].star:
        return args[0].value
    if isinstance(func, cst.Attribute) and func.attr.value in _SAME_TEXT_METHODS and not args:
        return func.value
    return None


def carried_lookups(node: cst.BaseExpression) -> List[cst.Call]:
    """The lookups whose default is the value of `node` where it is not found: `node` itself,
    the arms of a conditional or `or` expression, a lookup in a default, `str(...)` of one."""
    found: List[cst.Call] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.IfExp):
            stack += [n.body, n.orelse]
        elif isinstance(n, cst.BooleanOperation):
            stack += [n.left, n.right]
        elif isinstance(n, (cst.List, cst.Tuple, cst.Set)):  # [cfg.get("device", "cuda")]
            stack += [e.value for e in n.elements]
        elif isinstance(n, cst.Dict):
            stack += [e.value for e in n.elements if isinstance(e, cst.DictElement)]
        elif isinstance(n, cst.Call):
            parts = lookup_parts(n)
            if parts is not None:
                found.append(n)
                if parts[1] is not None:
                    stack.append(parts[1].value)
            else:
                inner = same_text_of(n)
                if inner is not None:
                    stack.append(inner)
    return found


class LookupRewriter(LiteralRewriter):
    """A LiteralRewriter that also rewrites the default of a lookup (`cfg.get("device", "cuda")`):
    in a device position the default is a device as a literal there is."""

    def rewrite_call(self, node: cst.Call) -> Optional[cst.BaseExpression]:
        parts = lookup_parts(node)
        if parts is not None:
            default = parts[1]
            if default is None:
                return None
            new = self.rewrite(default.value)
            if new is None:
                return None
            return node.with_changes(args=[a.with_changes(value=new) if a is default else a for a in node.args])
        inner = same_text_of(node)
        if inner is not None and carried_lookups(inner):
            new = self.rewrite(inner)
            if new is None:
                return None
            if isinstance(node.func, cst.Attribute):  # cfg.get("device", "cuda").lower()
                return node.with_changes(func=node.func.with_changes(value=new))
            return node.with_changes(args=[node.args[0].with_changes(value=new)])  # str(...)
        return super().rewrite_call(node)


class BackendRewriter(LookupRewriter):
    """The backend rewriter: a backend name ("nccl"), and torch's per-device form
    ("cuda:nccl,cpu:gloo": torchtune 0.6.1's distributed recipes; "cpu:gloo,cuda:nccl", torch's
    docs' order), whose CUDA pair becomes the NPU's ("npu:hccl,cpu:gloo"), wherever it stands:
    the other pairs stay, and so do the string's spaces and case (torch lowers the string and
    splits it at "," and ":" without stripping: " cuda:nccl" names a device " cuda" on CUDA too,
    and " npu:hccl" the same on the NPU). The prefilter and partial parsing find the pair by
    words.cuda_pair when it is not the string's first word."""

    _PAIRS = re.compile(r"[^,:]*:[^,:]*(?:,[^,:]*:[^,:]*)*")
    _PAIR = re.compile(r"(\s*)(\w+)(\s*:\s*)(\w+)(\s*)")

    def _replace_word(self, text: str) -> Optional[str]:
        new = super()._replace_word(text)
        if new is not None or ":" not in text or not self._PAIRS.fullmatch(text):
            return new
        pairs = []
        for pair in text.split(","):
            match = self._PAIR.fullmatch(pair)
            if match is None:
                return None  # not "device:backend" (torch's error, as before)
            before, device, colon, backend, after = match.groups()
            if device.lower() == "cuda":
                backend = super()._replace_word(backend) or ""
                if not backend:
                    return None  # "cuda:gloo": no NPU backend of that name
                device = "NPU" if device.isupper() else "npu"
            pairs.append(f"{before}{device}{colon}{backend}{after}")
        moved = ",".join(pairs)
        return moved if moved != text else None


def last_identifier(node: cst.BaseExpression) -> Optional[str]:
    if isinstance(node, cst.Name):
        return node.value
    if type(node) is cst.Call:
        return lookup_key(node)  # cfg.get("device", ...), getattr(args, "device", ...)
    if isinstance(node, cst.Attribute):
        return node.attr.value
    if isinstance(node, cst.Subscript):
        # args["device"] / cfg['dist_backend']
        if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
            index = node.slice[0].slice.value
            if isinstance(index, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
                return string_value(index)
            # devices[0], backends[i]: an element of a collection named for what it holds
            return last_identifier(node.value)
    return None


# Methods of a collection of device names whose argument is an element (for extend/update:
# elements, a dict's keys): {method: its position}. What a collection is given moves with the
# tests of what it holds (`"cuda" in devices`, `devices[0] == "cuda"`), or neither does.
COLLECTION_METHODS = {"append": 0, "add": 0, "remove": 0, "discard": 0, "index": 0, "count": 0, "insert": 1,
                      "extend": 0, "update": 0, "setdefault": 0, "get": 0, "pop": 0}

# How a list of pytest.mark.parametrize's values grows: the method -> the position of the value.
GROW_METHODS = {"append": 0, "extend": 0, "insert": 1}

class DeviceVariables(cst.CSTVisitor):
    """Names of variables that the module passes where a device is expected
    (`.to(DEV)`, `torch.device(DEV)`, `device=DEV`, `set_device(DEV)`) or a backend is.
    Their literal assignments are then device strings (the seed's `CALCULATE_DEVICE = "gpu:0"`)."""

    def __init__(self, transformer: "LiteralRewrites") -> None:
        super().__init__()
        self.t = transformer
        self.device_names: Set[str] = set()
        self.backend_names: Set[str] = set()
        # Names assigned a tensor's device type (`input_type = x.device.type`): what they are
        # compared with is a device type (monai's `... if input_type == "cuda" else ...`).
        self.type_names: Set[str] = set()
        self.environ_names: Set[str] = set()  # `env = os.environ.copy()`, `dict(os.environ)`
        # Names the module uses as an environment variable's name: `os.environ[NAME]`, `NAME in
        # os.environ`, `os.getenv(NAME)` (sample-factory 2.1.1's `CUDA_ENVVAR =
        # "CUDA_VISIBLE_DEVICES"`): the name's env-var literal moves with them (_assigned_value).
        self.env_key_names: Set[str] = set()
        # Names bound only to the device an object is on (`kind = x.device.type`; object_device_read),
        # and the names bound otherwise too (a parameter, a loop, another value): the first less
        # the second are LiteralRewrites._reads_object_device's names.
        self._object_device: Set[str] = set()
        self._bound_otherwise: Set[str] = set()
        # Names that take the elements of a collection named for devices (`for d in DEVICES`,
        # `[d for d in devices]`): what they are compared with is what the collection holds.
        self.element_names: Set[str] = set()
        # `device` / `self.device` -> how often the module passes it to a library with device
        # names of its own (`ctranslate2.Translator(path, device=self.device)`): only in modules
        # that import such a library (LiteralRewrites.foreign_libraries)
        self.foreign_reads: Dict[str, int] = {}
        # Dicts whose entries a library with device names of its own is given: the names passed
        # as `**kwargs` to such a library (`ctranslate2.Translator(path, **ct2_translator_args)`),
        # the names a dict's entries go into (`for name, value in D.items(): f(ct2_args, name,
        # value)`, `ct2_args.update(D)`), and how often the module reads a dict so
        # (LiteralRewrites._entries_for_foreign_library; only in modules importing such a library)
        self.foreign_kwargs: Set[str] = set()
        self.entries_into: Dict[str, Set[str]] = {}
        self.entry_reads: Dict[str, int] = {}
        # Names the module assigns a literal only the variable-only device rules move (the
        # seed's `CALCULATE_DEVICE = "gpu:0"`): only their comparisons move such a literal.
        self.variable_literal_names: Set[str] = set()
        # The device names passed to torch itself (a torch function, `.to(DEV)`), not only to a
        # callee whose `device=` may take names of its own: the variable-only rules ("gpu",
        # no torch device) move a literal only in these (LiteralRewrites.is_torch_device_variable).
        self.torch_device_names: Set[str] = set()
        # `CASES` passed as the values of `pytest.mark.parametrize("n,device", CASES)` -> (the
        # device-named parameters' positions, the number of parameters, how often so passed);
        # None when two such uses disagree (LiteralRewrites._parametrize_variable).
        self.parametrize_names: Dict[str, Optional[Tuple[Tuple[int, ...], int, int]]] = {}
        # Names looked up with what may be a device's type (`D[x.device.type]`, `D.get(kind, d)`,
        # `x.device.type in D`) -> the keys (spikingjelly 2.0.0's `_EVENT_BLOCK_SIZE[times.device.type]`):
        # LiteralRewrites._typed_table decides which keys are device types.
        self.typed_lookups: Dict[str, List[cst.BaseExpression]] = {}

    def _typed(self, table: cst.BaseExpression, key: cst.BaseExpression) -> None:
        if type(table) is cst.Name and (type(key) is cst.Name or (type(key) is cst.Attribute and key.attr.value == "type")):
            self.typed_lookups.setdefault(table.value, []).append(key)

    @property
    def object_device_names(self) -> Set[str]:
        return self._object_device - self._bound_otherwise

    def _bound(self, target: cst.CSTNode, value: Optional[cst.BaseExpression]) -> None:
        if type(target) is cst.Name:
            (self._object_device if value is not None and object_device_read(value)
             else self._bound_otherwise).add(target.value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._bound(element.value, None)

    def visit_Param(self, node: cst.Param) -> None:
        self._bound_otherwise.add(node.name.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._bound(node.target, None)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._bound(node.target, node.value)

    def visit_AsName(self, node: cst.AsName) -> None:
        self._bound(node.name, None)  # `with ... as name`, `except ... as name`, `import ... as name`

    def visit_Global(self, node: cst.Global) -> None:
        self._bound_otherwise.update(n.name.value for n in node.names)  # (assigned in other functions too)

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
            key = node.slice[0].slice.value
            if type(key) is cst.Name and self.t.is_environ(node.value):
                self.env_key_names.add(key.value)
            self._typed(node.value, key)

    def visit_Comparison(self, node: cst.Comparison) -> None:
        left = node.left
        for target in node.comparisons:
            if isinstance(target.operator, (cst.In, cst.NotIn)):
                if type(left) is cst.Name and self.t.is_environ(target.comparator):
                    self.env_key_names.add(left.value)
                self._typed(target.comparator, left)
            left = target.comparator

    def visit_Call(self, node: cst.Call) -> None:
        if type(node.func) is cst.Attribute and node.func.attr.value == "get" and node.args \
                and node.args[0].keyword is None and not node.args[0].star:
            self._typed(node.func.value, node.args[0].value)  # `D.get(x.device.type, 16)`
        at = ENV_FUNCS.get(self.t.resolve(node.func) or "")
        if at is not None and len(node.args) > at and node.args[at].keyword is None \
                and type(node.args[at].value) is cst.Name:
            self.env_key_names.add(node.args[at].value.value)  # type: ignore[attr-defined]
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "parametrize" \
                and self.t.resolve(node.func) in dc.PARAMETRIZE:
            found = dc.parametrized_devices(node)
            values = [a for a in node.args if a.star == ""]
            if found is not None and isinstance(values[found[0]].value, cst.Name):
                name = values[found[0]].value.value  # type: ignore[attr-defined]
                positions, count = tuple(found[1]), found[2]
                seen = self.parametrize_names.get(name, (positions, count, 0))
                agree = seen is not None and seen[:2] == (positions, count)
                self.parametrize_names[name] = (positions, count, seen[2] + 1) if agree and seen else None
        if self.t.foreign_libraries and dc.is_foreign_callee(self.t.resolve(node.func)):
            for arg in node.args:
                key = _read_key(arg.value)
                if key is not None:
                    self.foreign_reads[key] = self.foreign_reads.get(key, 0) + 1
                    if arg.star == "**" and isinstance(arg.value, cst.Name):
                        self.foreign_kwargs.add(key)
                        self._entries(key, {key})
        if self.t.foreign_libraries and isinstance(node.func, cst.Attribute) and node.func.attr.value == "update" \
                and isinstance(node.func.value, cst.Name) and len(node.args) == 1 and not node.args[0].star \
                and isinstance(node.args[0].value, cst.Name):
            self._entries(node.args[0].value.value, {node.func.value.value})  # `ct2_args.update(D)`
        torch_callee: Optional[bool] = None
        for arg, kind in self.t.special_args(node):
            if isinstance(arg.value, cst.Name):
                (self.device_names if kind == "device" else self.backend_names).add(arg.value.value)
                if kind == "device":
                    if torch_callee is None:
                        torch_callee = self.t.torch_takes_devices(node)
                    if torch_callee:
                        self.torch_device_names.add(arg.value.value)
        func = node.func
        positional = [a for a in node.args if a.keyword is None and a.star == ""]
        if (isinstance(func, cst.Attribute) and func.attr.value in COLLECTION_METHODS
                and len(positional) > COLLECTION_METHODS[func.attr.value]
                and isinstance(positional[COLLECTION_METHODS[func.attr.value]].value, cst.Name)
                and _named_for_devices(func.value)):
            # DEVICES.append(name): `name = "cuda"` moves with the tests of DEVICES
            self.device_names.add(positional[COLLECTION_METHODS[func.attr.value]].value.value)  # type: ignore[attr-defined]

    def visit_For(self, node: cst.For) -> None:
        self._bound(node.target, None)
        self._elements(node.target, node.iter)
        iterated = node.iter
        if self.t.foreign_libraries and isinstance(iterated, cst.Call) and not iterated.args \
                and isinstance(iterated.func, cst.Attribute) and iterated.func.attr.value == "items" \
                and isinstance(iterated.func.value, cst.Name):
            # `for name, value in D.items(): setdefault_if_exists_must_match(ct2_args, name, value)`
            self._entries(iterated.func.value.value, {n.value for n in subtree(node.body) if isinstance(n, cst.Name)})

    def _entries(self, name: str, into: Set[str]) -> None:
        self.entries_into.setdefault(name, set()).update(into)
        self.entry_reads[name] = self.entry_reads.get(name, 0) + 1

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self._bound(node.target, None)
        self._elements(node.target, node.iter)

    def _elements(self, target: cst.BaseExpression, iterated: cst.BaseExpression) -> None:
        if isinstance(target, cst.Name) and _named_for_devices(iterated):
            self.element_names.add(target.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._bound(node.target, node.value)
        if node.value is not None and isinstance(node.target, cst.Name) and self.t.is_variable_only_literal(node.value):
            self.variable_literal_names.add(node.target.value)
        if node.value is not None and isinstance(node.target, cst.Name) and self._environ_copy(node.value):
            # `env: dict[str, str] = os.environ.copy()` (monai 1.6.1's nnunetv2_runner): an
            # annotation changes nothing of what the name holds
            self.environ_names.add(node.target.value)

    def _environ_copy(self, value: cst.BaseExpression) -> bool:
        """`os.environ.copy()`, `dict(os.environ)`: a copy of the environment (a child's)."""
        return isinstance(value, cst.Call) and (
            self.t.resolve(value.func) == "os.environ.copy"
            or (isinstance(value.func, cst.Name) and value.func.value == "dict" and len(value.args) == 1
                and self.t.is_environ(value.args[0].value)))

    def visit_Assign(self, node: cst.Assign) -> None:
        value = node.value
        for t in node.targets:
            self._bound(t.target, value)
        arms = (value.body, value.orelse) if isinstance(value, cst.IfExp) else (value,)
        variable_only = any(self.t.is_variable_only_literal(arm) for arm in arms)
        if variable_only:
            self.variable_literal_names.update(t.target.value for t in node.targets if isinstance(t.target, cst.Name))
        if self._environ_copy(value):
            self.environ_names.update(t.target.value for t in node.targets if isinstance(t.target, cst.Name))
        if isinstance(value, cst.Attribute) and value.attr.value == "type" and (
                (isinstance(value.value, cst.Attribute) and value.value.attr.value == "device")
                or (isinstance(value.value, cst.Call) and self.t.resolve(value.value.func) == "torch.device")):
            # `kind = torch.device(DEVICE).type` too: DEVICE moves, so `kind == "cuda"` must.
            self.type_names.update(t.target.value for t in node.targets if isinstance(t.target, cst.Name))
        if (isinstance(value, cst.IfExp) and not variable_only and dc.is_device_test(value.test, self.t.resolve)
                and (dc.names_a_device(value.orelse, self.t.resolve) or dc.names_a_device(value.body, self.t.resolve))):
            # `name = "cuda" if torch.cuda.is_available() else "cpu"` moves whatever the name
            # (leave_IfExp): `enabled=name == "cuda"` moves with it, or AMP is silently off.
            # Not `"gpu" if torch.cuda.is_available() else "cpu"`: "gpu" is no torch device but a
            # framework's accelerator name (lightly 1.6.0's `accelerator`, given to Lightning's
            # Trainer): its arm moved to "npu" while `accelerator == "gpu"` stayed.
            self.device_names.update(t.target.value for t in node.targets if isinstance(t.target, cst.Name))


def object_device_read(node: cst.BaseExpression) -> bool:
    """`x.device.type`, `x[0].device.type`, `next(m.parameters()).device.type`, and an IfExp whose
    arms are such reads: the type of the device an object is on (LiteralRewrites._reads_object_device).
    Not `torch.device(name).type` (a device made from a name), nor `args.device` (a setting)."""
    if type(node) is cst.IfExp:
        return object_device_read(node.body) and object_device_read(node.orelse)
    return type(node) is cst.Attribute and node.attr.value == "type" and type(node.value) is cst.Attribute \
        and node.value.attr.value == "device" and get_full_name_for_node(node.value) != "torch.device"


def _read_key(node: cst.BaseExpression) -> Optional[str]:
    """`name` for a variable, `self.name` for an attribute of `self`; None for anything else."""
    if isinstance(node, cst.Name):
        return node.value
    attribute = self_attribute(node)
    return None if attribute is None else "self." + attribute


# `**name` in a call (the names LiteralRewrites._entries_for_foreign_library asks for)
_KWARGS_RE = re.compile(r"\*\*\s*([A-Za-z_]\w*)")


def _reads_in_text(text: str, key: str) -> int:
    """How often the module's text may read `key` (over-counted, never under: comments, strings
    naming it and every `<anything>.name` count; assignments `name = ...` do not)."""
    name = key.rsplit(".", 1)[-1]
    lead = r"\.\s*" if key.startswith("self.") else r"(?<![\w.])"
    reads = len(re.findall(lead + re.escape(name) + r"\b(?!\s*=(?!=))", text))
    return reads + len(re.findall(r"[\"']" + re.escape(name) + r"[\"']", text))  # getattr(self, "name")


def _may_be_local(func: cst.BaseExpression) -> bool:
    """`train(...)`, `self.fit(...)`, `cls.make(...)`, `Tokenizer.load(...)`: a call that may be
    of the module's own function, class or method (LiteralRewrites._local_parameters)."""
    return isinstance(func, cst.Name) or (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name))



def _project_parameters(entries: Sequence[str], qual: str) -> Dict[int, str]:
    """The device parameters (position -> name) of the project's function `qual` names, from
    Options.device_functions ("<module path>::<name>::<position>::<parameter>"): the module whose
    path ends as `qual` does (the run may start below the package's root), or a module of the
    package `qual` names the function through (`torchtune.utils.get_device`, re-exported by
    torchtune/utils/__init__.py from _device.py). {} when none, or when the modules that may be it
    disagree."""
    # (a place a relative import names, "/<path>/<name>", is matched exactly: _relative_place)
    exact = qual.startswith("/")
    place = qual if exact else "/" + qual.replace(".", "/")
    name = place.rsplit("/", 1)[-1]
    found: Dict[str, Dict[int, str]] = {}
    for entry in entries:
        module, function, position, parameter = entry.split("::")
        if function != name:
            continue
        module = module.replace("\\", "/")
        paths = (module + "/" + function, module.rsplit("/", 1)[0] + "/" + function)
        if any(p == place if exact else p.endswith(place) for p in paths):
            found.setdefault(module, {})[int(position)] = parameter
    candidates = list(found.values())
    return candidates[0] if candidates and all(c == candidates[0] for c in candidates) else {}


def _compared_in_text(text: str, value: Optional[str]) -> bool:
    """Whether the module compares something with the string `value` (`x == "nccl"`, `"cuda" !=
    x`, `x in ("nccl", "gloo")`): there the string is a label its readers test, and moving it
    alone would send them down another branch."""
    if not value:
        return False
    quoted = rf"""(?:'{re.escape(value)}'|"{re.escape(value)}")"""
    return re.search(rf"(?:==|!=)\s*{quoted}|{quoted}\s*(?:==|!=)|\bin\s*[(\[{{][^\n]*{quoted}", text) is not None


def _module_functions(module: cst.Module) -> Dict[str, Optional[List[str]]]:
    """name -> positional parameter names of the module's top-level functions and classes (the
    parameters of `__init__` after `self`), and ".name" -> those of the methods of its top-level
    classes (after `self`/`cls`); None for a name defined twice with other parameters. Reads the
    module's statements and the classes' bodies, not the whole tree."""
    found: Dict[str, Optional[List[str]]] = {}

    def add(key: str, params: List[str]) -> None:
        if key in found and found[key] != params:
            found[key] = None
        else:
            found[key] = params

    def positional(func: cst.FunctionDef, method: bool) -> List[str]:
        """Positional parameters in order, then the keyword-only ones (`*` ends what a position
        can reach: _local_parameter_args stops there)."""
        params = [p.name.value for p in (*func.params.posonly_params, *func.params.params)]
        static = any(isinstance(d.decorator, cst.Name) and d.decorator.value == "staticmethod" for d in func.decorators)
        params = params[1:] if method and not static and params else params
        if func.params.kwonly_params:
            params += ["*", *(p.name.value for p in func.params.kwonly_params)]
        return params

    for statement in module.body:
        if isinstance(statement, cst.FunctionDef):
            add(statement.name.value, positional(statement, False))
        elif isinstance(statement, cst.ClassDef) and isinstance(statement.body, cst.IndentedBlock):
            for member in statement.body.body:
                if isinstance(member, cst.FunctionDef):
                    add("." + member.name.value, positional(member, True))
                    if member.name.value == "__init__":
                        add(statement.name.value, positional(member, True))
                    if any(isinstance(d.decorator, cst.Name) and d.decorator.value in ("staticmethod", "classmethod")
                           for d in member.decorators):
                        # `Tokenizer.load_from_checkpoint(path, "cuda")`: called on the class
                        add(f"{statement.name.value}.{member.name.value}", positional(member, True))
    return found


def _names_twice(before: cst.BaseExpression, after: cst.BaseExpression) -> bool:
    """Whether rewriting a list, tuple or set display would give it an element it holds already
    (`choices=["nccl", "gloo", "hccl"]`, transformers' `ddp_backend` choices): it lists the NPU's
    value already, and stays as it is (guards.keep_cuda_beside_npu does so for device names)."""
    if not isinstance(before, (cst.Tuple, cst.List, cst.Set)) or not isinstance(after, type(before)):
        return False
    held = {string_value(e.value) for e in before.elements if isinstance(e, cst.Element)}
    return any(isinstance(a, cst.Element) and isinstance(b, cst.Element)
               and string_value(a.value) != string_value(b.value) and string_value(a.value) in held
               for b, a in zip(before.elements, after.elements))


def _named_for_devices(node: cst.BaseExpression) -> bool:
    """`DEVICES`, `self.devices`, `cfg["devices"]`: named for devices (by its name alone); also
    `(device_from, device_to)`, a display of such names (`for d in (device_from, device_to)`)."""
    elements = _display_elements(node)
    if elements is not None:
        return all(_named_for_devices(e) for e in elements)
    name = last_identifier(node)
    return bool(name and DEVICE_NAME_RE.search(name))


def _display_elements(node: cst.BaseExpression) -> Optional[List[cst.BaseExpression]]:
    """The elements of a tuple, list or set display written out (`(a, b)`), None for anything
    else, for an empty display and for one with a starred element (`(*devices, x)`)."""
    if not isinstance(node, (cst.Tuple, cst.List, cst.Set)) or not node.elements:
        return None
    if not all(isinstance(e, cst.Element) for e in node.elements):
        return None
    return [e.value for e in node.elements]


UNMOVED_DEFAULT = "NPU326"  # a device-named lookup's CUDA default left: its readers are not known
TYPED_TABLE = "NPU327"  # a table looked up with a device type left with its "cuda" entry


@applies("device", "backend", "env", "api")
@emits(UNMOVED_DEFAULT, TYPED_TABLE)
class LiteralRewrites(TorchKind):
    """The applier of the device, backend and env kinds: the walk (codemods/torch/__init__.py)
    calls its `_parametrized_devices` and `_literal_arguments` from leave_Call, its visit_If
    and its own hooks below."""

    def __init__(self, state: TorchState) -> None:
        super().__init__(state)
        rs = self.ctx.rules
        self.devices = LookupRewriter({r.from_: r.to for r in rs.device.values()}, index=True)
        # Device rules with no positions of their own ("gpu") apply only to variables the
        # module passes as a device (the guide's `CALCULATE_DEVICE = "gpu:0"`): elsewhere "gpu"
        # is some other library's device name (DALI's `device="gpu"`).
        self.positional_devices = LookupRewriter(
            {r.from_: r.to for r in rs.device.values() if r.spec_of(Positions).any}, index=True
        )
        self.backends = BackendRewriter(
            {r.from_: r.to for r in rs.backend.values()}, index=False, ignore_case=True
        )
        self.envs = LiteralRewriter({r.from_: r.to for r in rs.env.values()}, index=False)
        self.device_rule = {r.from_: r for r in rs.device.values()}
        self.backend_rule = {r.from_.lower(): r for r in rs.backend.values()}
        self.env_rule = dict(rs.env)
        self.device_keywords: Set[str] = set()
        self.device_functions: Dict[str, int] = {}
        self.device_methods: Set[str] = set()
        for r in rs.device.values():
            where = r.spec_of(Positions)
            self.device_keywords.update(where.keywords)
            self.device_methods.update(where.methods)
            for f in where.functions:
                self.device_functions[f] = 0
            for f in where.second_functions:
                self.device_functions[f] = 1
        # the words the variable-only device rules move otherwise than the others ("gpu")
        self._variable_only_words = [word for word, to in self.devices.mapping.items()
                                     if self.positional_devices.mapping.get(word) != to]
        self.backend_keywords: Set[str] = {"backend"}
        for r in rs.backend.values():
            self.backend_keywords.update(r.spec_of(Positions).keywords)
        self._variables: Optional[DeviceVariables] = None
        # The module's own functions, classes and methods -> their parameters (_local_parameters).
        self._local_functions: Optional[Dict[str, Optional[List[str]]]] = None
        # A function of another module of the project -> its parameters named for a device
        # (position -> name; Options.device_functions): _project_parameter_args.
        self._project_functions: Dict[str, Dict[int, str]] = {}
        self._project_names: Optional[Set[str]] = None
        # The functions around the node being visited, and whether each returns devices.
        self._functions: List[cst.FunctionDef] = []
        self._returns_devices: Dict[int, bool] = {}
        # Bodies of `if torch.cuda.is_available():` / `if x.is_cuda:` (ids), and how deep in them.
        self._device_bodies: Set[int] = set()
        self._in_device_body = 0
        # Whether the module imports a library with device names of its own (CTranslate2, cupy,
        # DALI...): only then may a device variable be that library's (_read_only_by_foreign_libraries)
        self.foreign_libraries = any(dc.is_foreign_callee(q) for q in self.ctx.imports.names.values())
        self._dict_owner: Dict[int, str] = {}  # (note_dict: an element of `D = {...}` -> "D")
        # Lookups with a device-named key and a CUDA default (`cfg.get("device", "cuda:0")`) not
        # moved (yet): id -> the node. What is left at the end of the walk is reported
        # (UNMOVED_DEFAULT): its value reaches no place known to be a torch device.
        self._unmoved_lookups: Dict[int, cst.Call] = {}

    def is_device_variable(self, name: str) -> bool:
        return name in self._usage(name).device_names

    def is_backend_variable(self, name: str) -> bool:
        return name in self._usage(name).backend_names

    def _usage(self, name: str) -> DeviceVariables:
        # A whole pass over the tree: done only when a literal is found where such a
        # variable decides (most files never get there).
        if self.ctx.partial is not None and self.ctx.partial.elided_word(name):
            # Used in a statement not parsed: the answer below may be wrong, and the engine
            # migrates the file again with those statements (all such names at once).
            self.ctx.partial_misses.add(name)
        return self._walked()

    def _walked(self) -> DeviceVariables:
        if self._variables is None:
            self._variables = DeviceVariables(self)
            walk(self.ctx.module, self._variables)
            del self._variables.t  # the walk is over: no reference cycle holding the tree
        return self._variables

    def _foreign_reads(self, key: str) -> int:
        """How often the module passes `key` to a library with device names of its own
        (DeviceVariables.foreign_reads): _usage for that count alone. Such a read is an
        argument of a call whose callee starts at a name an import binds to the library, so
        a statement left out can hold one only where its lines hold the name and that binding
        or the library's own name (an import of it left out): only then is the file migrated
        again with the statements that use `key` (transformers' t5/gpt2 `self.first_device =
        "cuda:0"` in modules that import TensorFlow in a function: asked for nothing more)."""
        name = key.rsplit(".", 1)[-1]
        partial = self.ctx.partial
        if partial is not None and partial.elided_word(name):
            foreign = {local for local, qualified in self.ctx.imports.names.items() if dc.is_foreign_callee(qualified)}
            if partial.elided_with(name, foreign | dc.NON_TORCH_LIBRARIES):
                self.ctx.partial_misses.add(name)
        return self._walked().foreign_reads.get(key, 0)

    def _record_literal(self, rule: Rule, original: cst.CSTNode, new: cst.CSTNode, what: str) -> None:
        before = self.ctx.code_for(original)
        after = self.ctx.code_for(new)
        self.ctx.edit(rule, original, rule.render_message(before=before, after=after, what=what), before, after)

    def _rule_for_literal(self, table: Dict[str, Rule], before: cst.CSTNode) -> Optional[Rule]:
        text = self.ctx.code_for(before).lower()
        for word, rule in table.items():
            if word.lower() in text:
                return rule
        return next(iter(table.values()), None)

    def _rewrite_literal(
        self,
        rewriter: LiteralRewriter,
        table: Dict[str, Rule],
        original: cst.BaseExpression,
        updated: cst.BaseExpression,
        what: str,
        require: bool = True,
    ) -> cst.BaseExpression:
        """Rewrite a device/backend/env literal expression; record the edit on `original`.
        `require`: the rewritten code needs torch_npu loaded (not a comparison with the device an
        object is on: _reads_object_device)."""
        if not table:
            return updated
        new = rewriter.rewrite(updated)
        if new is None or _names_twice(updated, new):
            return updated
        rule = self._rule_for_literal(table, updated)
        if rule is None or self.ctx.suppressed(original, rule.code):
            return updated
        self._record_literal(rule, original, new, what)
        if rewriter is not self.envs:
            if require:
                self.ctx.require_import("torch_npu")
            else:  # (the file still handles NPU tensors: its device-only findings apply, uses_device)
                self.ctx.moved_device_code = True
        if self._unmoved_lookups:
            self._settled(original)
        return new

    def _settled(self, node: cst.BaseExpression) -> None:
        """The lookups `node` carries are decided (moved, or a foreign library's): not reported."""
        for lookup in carried_lookups(node):
            self._unmoved_lookups.pop(id(lookup), None)

    def _note_lookup(self, original: cst.Call, updated: cst.Call) -> None:
        """A lookup with a device-named key and a CUDA device default (`kwargs.pop("device",
        "cuda:0")`), outside a display and another library's call: reported at the end of the
        walk unless a rewrite moves it first (_settled). (Its default as it is now: `"cuda" if
        torch.cuda.is_available() else "cpu"` moved already.)"""
        if self.state.shown or self.state.foreign:
            return
        parts, now = lookup_parts(original), lookup_parts(updated)
        if parts is None or now is None or now[1] is None:
            return
        key = string_value(parts[0])
        if key is None:
            return
        if DEVICE_NAME_RE.search(key) and self.positional_devices.rewrite(now[1].value) is not None:
            self._unmoved_lookups[id(original)] = original
        elif BACKEND_NAME_RE.search(key) and self.backends.rewrite(now[1].value) is not None:
            # the same for a backend (`cfg.get("dist_backend", "nccl")` handed to another
            # module's class): the default and the code that reads it would disagree
            self._unmoved_lookups[id(original)] = original

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        rule = self.ctx.rules.analysis.get(UNMOVED_DEFAULT) if self._unmoved_lookups else None
        if rule is None:
            return updated
        device_rule = next(iter(self.device_rule.values()), None)
        backend_rule = next(iter(self.backend_rule.values()), None)
        for lookup in self._unmoved_lookups.values():
            key = string_value(lookup_parts(lookup)[0])  # type: ignore[index]  # (noted only with parts)
            backend = not DEVICE_NAME_RE.search(key or "")
            moving = backend_rule if backend else device_rule
            if moving is not None and self.ctx.suppressed(lookup, moving.code):
                continue  # kept on purpose (a guard, an ignore comment for the rewrite)
            api = self.ctx.code_for(lookup)
            what = (dict(fallback="NCCL", place="a torch.distributed backend", npu='HCCL ("hccl")') if backend
                    else dict(fallback="CUDA", place="a torch device", npu='the NPU ("npu", "npu:0")'))
            self.ctx.finding(rule, lookup, api=api, message=rule.render_message(api=api, **what),
                             suggestion=rule.render_suggestion(api=api, **what))
        return updated

    def device_literal(self, original, updated, what="device string", variable: bool = False, require: bool = True):
        """`variable`: the literal is assigned to or compared with a variable the module passes
        as a device (then variable-only rules such as "gpu" apply too). `require`: _rewrite_literal's."""
        rewriter = self.devices if variable else self.positional_devices
        return self._rewrite_literal(rewriter, self.device_rule, original, updated, what, require)

    def _reads_object_device(self, node: cst.BaseExpression) -> bool:
        """Whether `node` is the type of the device an object is on (`x.device.type`, an IfExp of
        such reads, or a name the module binds only to one: mindone 0.5.0's `gen_device_type = generator.device.type if ... else
        generator[0].device.type`). A literal compared with it needs no torch_npu: the object is
        on the NPU only in a process that loaded torch_npu already, and without it the test is
        False as it was (a MindSpore test's PyTorch reference on the CPU gets no `import torch_npu`
        for `gen_device_type == "npu"`). Not a setting (`args.device`, a parameter), which may
        name the NPU before anything is on it."""
        if type(node) is cst.Name:
            # (asked only where the text assigns the name a `.device.type` on one line: the walk
            # for the module's names, and in a partial text another attempt, are for those files)
            if ".device.type" not in self.ctx.text or re.search(
                    rf"\b{re.escape(node.value)}[ \t]*(?::[^=\n]*)?=[^=\n]*\.device\.type\b", self.ctx.text) is None:
                return False
            return node.value in self._usage(node.value).object_device_names
        return object_device_read(node)

    def _variable_decides(self, literal: cst.BaseExpression) -> bool:
        """Whether device_literal's `variable` can change what `literal` becomes: where the
        variable-only rules ("gpu") rewrite it otherwise than the others. Asked before whether
        a variable is passed as a device (_usage: a walk of the module, and with partial parsing
        another attempt where the name is used in lines left out: transformers' conversion
        scripts' `device = "cuda"`)."""
        if type(literal) is cst.SimpleString:  # (the common case, without rewriting it twice: a
            # string's words are its source's, escapes aside, which no rewriter takes: string_value)
            return any(word in literal.value for word in self._variable_only_words)
        by_variable, by_position = self.devices.rewrite(literal), self.positional_devices.rewrite(literal)
        if by_variable is None or by_position is None:
            return by_variable is not by_position
        return not by_variable.deep_equals(by_position)

    def is_torch_device_variable(self, node: cst.BaseExpression) -> bool:
        """A name the module passes where torch itself takes a device (`torch.cuda.set_device(DEV)`,
        `x.to(DEV)`): only there is a "gpu" of the module's a device string (the seed's
        `CALCULATE_DEVICE = "gpu:0"`). A `device=` of the project's own class or of a callee not
        known takes the module's own label (classy-vision 0.7.0's EMA hook test: `device = "gpu"
        if torch.cuda.is_available() else "cpu"` given to `ExponentialMovingAverageModelHook(
        device=device)`, which asserts `device in ["cpu", "gpu"]`; moved, the label became "npu"
        there while `self._test_exponential_moving_average_hook("cpu", "gpu")` kept it)."""
        return isinstance(node, cst.Name) and node.value in self._usage(node.value).torch_device_names

    def torch_takes_devices(self, call: cst.Call) -> bool:
        """Whether `call` is torch's: a function of torch or torch_npu, or a method torch's device
        rules name (`.to`, `.cuda`) on something not resolved."""
        qual = self.resolve(call.func)
        if qual is not None:
            return qual.split(".", 1)[0] in ("torch", "torch_npu")
        return isinstance(call.func, cst.Attribute) and call.func.attr.value in self.device_methods

    def is_variable_only_literal(self, node: cst.BaseExpression) -> bool:
        """A literal only the variable-only device rules move ("gpu", "gpu:0")."""
        return (isinstance(node, cst.SimpleString) and self.devices.rewrite(node) is not None
                and self.positional_devices.rewrite(node) is None)

    def _compared_variable(self, node: cst.BaseExpression) -> bool:
        """Whether a literal compared with `node` moves by the variable-only rules too: where
        the module assigns such a literal to it. Elsewhere "gpu" is an alias its callers may
        pass (pykeen's resolve_device: `if device == "gpu": device = "cuda"`): it stays, and
        "cuda" moves by its own rule."""
        return (self.is_torch_device_variable(node) and isinstance(node, cst.Name)
                and node.value in self._usage(node.value).variable_literal_names)

    def backend_literal(self, original, updated, what="distributed backend"):
        if isinstance(updated, cst.Dict) and isinstance(original, cst.Dict):
            # {"cuda": "nccl", "cpu": "gloo"}: a device -> backend table; its keys are looked up
            # with device types, which become "npu" too.
            elements = []
            for o_el, u_el in zip(original.elements, updated.elements):
                if isinstance(u_el, cst.DictElement) and isinstance(o_el, cst.DictElement):
                    u_el = u_el.with_changes(key=self.device_literal(o_el.key, u_el.key))
                elements.append(u_el)
            updated = updated.with_changes(elements=elements)
        return self._rewrite_literal(self.backends, self.backend_rule, original, updated, what)

    def env_literal(self, original, updated, what="environment variable"):
        return self._rewrite_literal(self.envs, self.env_rule, original, updated, what)

    def is_device_expr(self, node: cst.BaseExpression) -> bool:
        """`x.device.type`, `device`, `args.device`, `str(device)`, `cfg["device"]`; and a display of
        them, `(device_from, device_to)`: what it is tested for (`"cuda" in (device_from,
        device_to)`) is what they hold, and moves with their values (skorch's parametrized
        tests), or the test would ask for a device its values no longer name."""
        if isinstance(node, cst.Attribute) and node.attr.value == "type":
            return True
        elements = _display_elements(node)
        if elements is not None:
            return all(self.is_device_expr(e) for e in elements)
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "str":
            return len(node.args) == 1 and self.is_device_expr(node.args[0].value)
        if (isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index)
                and isinstance(node.slice[0].slice.value, cst.Integer) and node.slice[0].slice.value.value == "0"
                and isinstance(node.value, cst.Call) and isinstance(node.value.func, cst.Attribute)
                and node.value.func.attr.value in ("split", "rsplit", "partition")):
            # `DEVICE.split(":")[0]`, `str(device).partition(":")[0]`: the device's type.
            return self.is_device_expr(node.value.func.value)
        name = last_identifier(node)
        return bool(name and DEVICE_NAME_RE.search(name)) or (
            isinstance(node, cst.Name) and (self.is_device_variable(node.value)
                                            or node.value in self._usage(node.value).type_names
                                            or node.value in self._usage(node.value).element_names)
        )

    def is_backend_expr(self, node: cst.BaseExpression) -> bool:
        if isinstance(node, cst.Call) and self.resolve(node.func) in BACKEND_GETTERS:
            return True
        name = last_identifier(node)
        return bool(name and BACKEND_NAME_RE.search(name)) or (
            isinstance(node, cst.Name) and self.is_backend_variable(node.value)
        )

    def is_environ(self, node: cst.BaseExpression) -> bool:
        return self.resolve(node) == "os.environ"

    def _is_environ_copy(self, node: cst.Subscript) -> bool:
        """`env["CUDA_VISIBLE_DEVICES"]` where `env` is assigned a copy of os.environ
        (`os.environ.copy()`, `dict(os.environ)`): the environment of a child process (monai's
        auto3dseg). Looked up only for a subscript whose key is an env-var name to rewrite."""
        if not isinstance(node.value, cst.Name) or len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
            return False
        key = node.slice[0].slice.value
        return self.envs.rewrite(key) is not None and node.value.value in self._usage(node.value.value).environ_names

    def _is_environ_copy_lookup(self, call: cst.Call) -> bool:
        """`env.get("CUDA_VISIBLE_DEVICES")` (also pop, setdefault) where `env` is assigned a copy
        of os.environ (_is_environ_copy's names): looked up only for an env-var name to rewrite."""
        func = call.func
        if not (isinstance(func, cst.Attribute) and func.attr.value in ("get", "pop", "setdefault")
                and isinstance(func.value, cst.Name) and call.args and call.args[0].keyword is None):
            return False
        return (self.envs.rewrite(call.args[0].value) is not None
                and func.value.value in self._usage(func.value.value).environ_names)

    def special_args(self, call: cst.Call) -> List[Tuple[cst.Arg, str]]:
        """The arguments of `call` that are devices or backends: [(arg, "device"|"backend")]."""
        out: List[Tuple[cst.Arg, str]] = []
        func = call.func
        qual = self.resolve(func)
        if dc.is_foreign_callee(qual):
            return out  # DALI's fn.resize(..., device="gpu"): that library's own device names
        positional = [a for a in call.args if a.keyword is None and a.star == ""]
        if qual is not None and len(positional) > self.device_functions.get(qual, len(positional)):
            out.append((positional[self.device_functions[qual]], "device"))
        elif (qual is not None and isinstance(func, cst.Name) and positional
              and self._other_binding_takes_a_device(func.value, qual, positional)):
            # `GradScaler("cuda")` where GradScaler is torch.GradScaler, or on an older torch
            # torch.cuda.amp.GradScaler (try/except ImportError): a device string is only ever
            # the device of the binding that takes one
            out.append((positional[0], "device"))
        elif (
            qual is None
            and isinstance(func, cst.Attribute)
            and func.attr.value in self.device_methods
            and positional
        ):
            out.append((positional[0], "device"))
        elif (
            qual is None
            and isinstance(func, cst.Attribute)
            and func.attr.value in COLLECTION_METHODS
            and len(positional) > COLLECTION_METHODS[func.attr.value]
            and self._is_rewritable_literal(positional[COLLECTION_METHODS[func.attr.value]].value)
            and self.is_device_expr(func.value)
        ):
            # devices.append("cuda") beside `"cuda" in devices`: the collection's elements move
            # with the membership tests that read them (a half-migration otherwise)
            out.append((positional[COLLECTION_METHODS[func.attr.value]], "device"))
        elif qual == "functools.partial" and positional:
            # `partial(autocast, "cuda", enabled=False)` (vector-quantize-pytorch 1.32.0's FSQ and
            # LFQ): the arguments after the function are its first positional ones
            index = self.device_functions.get(self.resolve(positional[0].value) or "")
            if index is not None and len(positional) > index + 1:
                out.append((positional[index + 1], "device"))
        if qual is not None and qual in BACKEND_FUNCS and BACKEND_FUNCS[qual] is not None and positional:
            out.append((positional[BACKEND_FUNCS[qual]], "backend"))  # type: ignore[index]
        own_keywords = DEVICE_KEYWORDS_OF.get(qual or "", set())
        for arg in call.args:
            if arg.keyword is None:
                continue
            if arg.keyword.value in self.device_keywords or arg.keyword.value in own_keywords:
                out.append((arg, "device"))
            elif arg.keyword.value in self.backend_keywords:
                out.append((arg, "backend"))
        if qual is None and _may_be_local(func) and any(self._is_rewritable_literal(a.value) for a in call.args):
            out.extend(self._local_parameter_args(call, {id(a) for a, _ in out}))
            relative = self._relative_place(func.value) if isinstance(func, cst.Name) and not out \
                and self.ctx.options.device_functions else None
            if relative is not None:  # `from .utils import get_device`: the project's own module, by its path
                out.extend(self._project_parameter_args(call, relative, set()))
            if isinstance(func, cst.Name) and self.ctx.partial is not None and self.ctx.options.device_functions \
                    and (any(e.split("::", 2)[1] == func.value for e in self.ctx.options.device_functions)
                         or re.search(rf"\bas\s+{re.escape(func.value)}\b", self.ctx.text)) \
                    and self.ctx.partial.elided_word(func.value):
                self.ctx.partial_misses.add(func.value)  # imported in a line left out: parse it too
        elif qual is not None and self.ctx.options.device_functions and call.args:
            out.extend(self._project_parameter_args(call, qual, {id(a) for a, _ in out}))
        return out

    def _relative_place(self, local: str) -> Optional[str]:
        """The absolute place ("/<path of the module>/<name>", "/" separators) of the function a
        relative import of the module binds to `local` (`from .utils import get_device` in
        pkg/train.py: "/.../pkg/utils/get_device"), None when no relative import binds it. A key of
        _project_parameter_args starting with "/" is such a place, matched exactly."""
        here = os.path.dirname(os.path.abspath(self.ctx.path)).replace(os.sep, "/")
        for stmt in self.ctx.imports.import_nodes:
            if not isinstance(stmt, cst.ImportFrom) or not stmt.relative or isinstance(stmt.names, cst.ImportStar):
                continue
            for alias in stmt.names:
                name = alias.name.value if isinstance(alias.name, cst.Name) else None
                bound = alias.asname.name.value if alias.asname is not None and isinstance(alias.asname.name, cst.Name) \
                    else name
                if name is None or bound != local:
                    continue
                base = here
                for _ in range(len(stmt.relative) - 1):
                    base = base.rsplit("/", 1)[0]
                module = get_full_name_for_node(stmt.module) if stmt.module is not None else ""
                return f"{base}/{module.replace('.', '/')}/{name}" if module else f"{base}/{name}"
        return None

    def _project_parameter_args(self, call: cst.Call, qual: str, taken: Set[int]) -> List[Tuple[cst.Arg, str]]:
        """The literal arguments of a call of another module's function of the project given to a
        parameter named for a device (torchtune 0.6.1 training/_distributed.py:90
        `tensor.to(get_device("cuda"))`, get_device imported from torchtune.utils, defined in
        torchtune/utils/_device.py as `def get_device(device: Optional[str] = None)`): the
        function's readers of it move by its name in their module, as for the module's own
        functions (_local_parameter_args), so what another module gives it moves with them."""
        params = self._project_functions.get(qual)
        if params is None:
            if self._project_names is None:  # the functions' names, once: most calls name none of them
                self._project_names = {e.split("::", 2)[1] for e in self.ctx.options.device_functions}
            params = self._project_functions[qual] = _project_parameters(
                self.ctx.options.device_functions, qual) if qual.rsplit("/", 1)[-1].rsplit(".", 1)[-1] in self._project_names else {}
        if not params:
            return []
        return [(arg, "device") for arg, _ in self._literals_by_parameter(call, params.get, params.values(), taken)]

    def _other_binding_takes_a_device(self, local: str, qual: str, positional: List[cst.Arg]) -> bool:
        """Whether `local` is also imported as a function whose first positional argument is a
        device (the position the call gives a string literal a device rule moves)."""
        return any(other != qual and self.device_functions.get(other) == 0
                   for other in self.ctx.imports.from_bindings.get(local, ())) \
            and self._is_rewritable_literal(positional[0].value)

    def _literals_by_parameter(self, call: cst.Call, parameter_at: Callable[[int], Optional[str]],
                              keywords: Collection[str], taken: Set[int]) -> Iterator[Tuple[cst.Arg, str]]:
        """The call's rewritable literal arguments not already `taken`, each with the name of the
        parameter it is given: by position (`parameter_at`, None for a parameter that does not
        count) up to a starred argument, or by a keyword among `keywords`."""
        position = 0
        for arg in call.args:
            if arg.star:
                break  # `f(*args, "cuda")`: positions unknown from here
            if arg.keyword is None:
                name = parameter_at(position)
                position += 1
            else:
                name = arg.keyword.value if arg.keyword.value in keywords else None
            if name is not None and id(arg) not in taken and self._is_rewritable_literal(arg.value):
                yield arg, name

    def _local_parameter_args(self, call: cst.Call, taken: Set[int]) -> List[Tuple[cst.Arg, str]]:
        """The literal arguments of a call of the module's own function, class or method (`self.`)
        given to a parameter named for a device or a backend (`def train(model, device):` called
        `train(model, "cuda")`, `target_device="cuda"`): the function's readers of it move by its
        name (`device == "cuda"`), so what it is given moves with them."""
        params = self._local_parameters(call.func)
        if not params:
            return []
        out: List[Tuple[cst.Arg, str]] = []
        positional = [None if name == "*" else name for name in params]  # ("*": keyword-only from there)
        for arg, name in self._literals_by_parameter(
                call, lambda position: positional[position] if position < len(positional) else None, params, taken):
            if DEVICE_NAME_RE.search(name) or name in self.device_keywords:
                out.append((arg, "device"))  # (a parameter named as a device keyword: `map_location`)
            elif BACKEND_NAME_RE.search(name):
                out.append((arg, "backend"))
        return out

    def _local_parameters(self, func: cst.BaseExpression) -> Optional[List[str]]:
        """The parameter names (positional order, `self` left out) of the module's own top-level
        function or class (its `__init__`) `func` names, or of the method `self.name` of its
        classes; None when unknown or defined twice with other parameters."""
        if isinstance(func, cst.Name):
            key = func.value
        elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value in ("self", "cls"):
            key = "." + func.attr.value
        elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) \
                and re.search(rf"^class[ \t]+{re.escape(func.value.value)}\b", self.ctx.text, re.MULTILINE):
            # `Tokenizer.load_from_checkpoint(path, "cuda")`: a static or class method of a
            # top-level class of the module, called on the class
            key = f"{func.value.value}.{func.attr.value}"
            if self._local_functions is None:
                self._local_functions = _module_functions(self.ctx.module)
            found = self._local_functions.get(key)
            if found is None and key not in self._local_functions and self.ctx.partial is not None:
                for word in (func.value.value, func.attr.value):
                    if self.ctx.partial.elided_word(word):
                        self.ctx.partial_misses.add(word)  # the class or its method left out: parse it too
            return found
        else:
            return None
        if self._local_functions is None:
            self._local_functions = _module_functions(self.ctx.module)
        found = self._local_functions.get(key)
        name = key.lstrip(".")
        if found is None and key not in self._local_functions and self.ctx.partial is not None \
                and self.ctx.partial.elided_word(name) \
                and re.search(rf"^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+{name}\b", self.ctx.text, re.MULTILINE):
            self.ctx.partial_misses.add(name)  # defined in a line left out: parse it too
        return found

    def _literal_arguments(self, original: cst.Call, updated: cst.Call, qual: Optional[str]) -> cst.Call:
        """Device and backend arguments, environment variable names, `device.startswith(...)`,
        argparse defaults of device/backend options."""
        func = original.func
        if (type(func) is cst.Attribute and func.attr.value in LOOKUP_METHODS) \
                or (type(func) is cst.Name and func.value in ("getattr", "getenv")):
            self._note_lookup(original, updated)
        special = {id(arg): kind for arg, kind in self.special_args(original)}
        if special:
            new_args = []
            for o_arg, u_arg in zip(original.args, updated.args):
                kind = special.get(id(o_arg))
                if kind == "device" and isinstance(o_arg.value, cst.Dict) and o_arg.keyword is not None \
                        and o_arg.keyword.value == "map_location":
                    u_arg = u_arg.with_changes(value=self._map_location_values(o_arg.value, u_arg.value))  # type: ignore[arg-type]
                elif kind == "device":
                    u_arg = u_arg.with_changes(value=self.device_literal(o_arg.value, u_arg.value))
                elif kind == "backend":
                    u_arg = u_arg.with_changes(value=self.backend_literal(o_arg.value, u_arg.value))
                new_args.append(u_arg)
            updated = updated.with_changes(args=new_args)
        # Environment variables: os.getenv("CUDA_VISIBLE_DEVICES"), os.environ.get(...), and
        # env.get(...) of `env = os.environ.copy()` (what the child's env[...] = sets moves too)
        if (qual in ENV_FUNCS or self._is_environ_copy_lookup(original)) and updated.args:
            first = updated.args[0]
            updated = updated.with_changes(
                args=[first.with_changes(value=self.env_literal(original.args[0].value, first.value))]
                + list(updated.args[1:])
            )
        # device.startswith("cuda") / device.type.startswith("cuda:")
        # (the argument first: is_device_expr may walk the tree, and in a partial parse ask for
        # another attempt, for every `key.startswith("model.")`)
        if (
            qual is None
            and isinstance(original.func, cst.Attribute)
            and original.func.attr.value in ("startswith", "endswith")
            and updated.args
            and original.args[0].keyword is None
            and self.positional_devices.rewrite(updated.args[0].value) is not None
            and self.is_device_expr(original.func.value)
        ):
            first = updated.args[0]
            updated = updated.with_changes(
                args=[first.with_changes(value=self.device_literal(original.args[0].value, first.value))]
                + list(updated.args[1:])
            )
        # self.assertEqual(x.device.type, "cuda"): unittest's comparison, as `==` (leave_Comparison)
        if qual is None and isinstance(original.func, cst.Attribute) \
                and original.func.attr.value in UNITTEST_COMPARISONS and len(original.args) >= 2:
            updated = self._asserted_devices(original, updated)
        # argparse: parser.add_argument("--device", default="cuda", choices=[...]); click options.
        if _declares_option(original) or qual in CLICK_OPTIONS:
            updated = self._argparse_defaults(original, updated)
        # absl: flags.DEFINE_string("base_device", "cuda", ...), DEFINE_string("backend", "nccl", ...)
        if qual in ABSL_FLAGS:
            updated = self._absl_flag(original, updated, enum=ABSL_FLAGS[qual])
        return updated

    def _asserted_devices(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        """`self.assertEqual(prior.loc.device.type, "cuda")` (gpytorch's tests), `assertNotEqual`,
        `assertIn("cuda", str(x.device))`: the literal compared with a device (or a backend) moves
        as in `x.device.type == "cuda"`, or the migrated test asserts the device it no longer uses."""
        first, second = original.args[0], original.args[1]
        if first.keyword is not None or second.keyword is not None or first.star or second.star:
            return updated
        args = list(updated.args)
        for index, other in ((0, second.value), (1, first.value)):
            lit_o, lit_u = original.args[index].value, args[index].value
            if not self._is_rewritable_literal(lit_u):
                continue
            if self.is_device_expr(other):
                new = self.device_literal(lit_o, lit_u, variable=self._variable_decides(lit_u)
                                         and self._compared_variable(other))
            elif self.is_backend_expr(other):
                new = self.backend_literal(lit_o, lit_u)
            else:
                continue
            if new is not lit_u:
                args[index] = args[index].with_changes(value=new)
                return updated.with_changes(args=args)
        return updated

    def _map_location_values(self, original: cst.Dict, updated: cst.Dict) -> cst.Dict:
        """`map_location={"cuda:1": "cuda:0"}`: a key is the device a tensor was saved on (the
        checkpoint keeps saying so); only the values, where tensors go, are devices to migrate."""
        elements = []
        for o_el, u_el in zip(original.elements, updated.elements):
            if isinstance(o_el, cst.DictElement) and isinstance(u_el, cst.DictElement):
                u_el = u_el.with_changes(value=self.device_literal(o_el.value, u_el.value))
            elements.append(u_el)
        return updated.with_changes(elements=elements)

    def _argparse_defaults(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        names = option_names(original)
        is_device = any(DEVICE_NAME_RE.search(n) for n in names)
        is_backend = any(BACKEND_NAME_RE.search(n) for n in names)
        if not (is_device or is_backend):
            return updated
        new_args = []
        for o_arg, u_arg in zip(original.args, updated.args):
            if o_arg.keyword is not None and o_arg.keyword.value in ("default", "choices", "const", "type"):
                o_value, u_value = o_arg.value, u_arg.value
                if o_arg.keyword.value == "type":  # type=click.Choice(["cpu", "cuda"])
                    if not (isinstance(o_value, cst.Call) and isinstance(u_value, cst.Call)
                            and self.resolve(o_value.func) == "click.Choice" and o_value.args):
                        new_args.append(u_arg)
                        continue
                    new_first = self._option_value(o_value.args[0].value, u_value.args[0].value, is_device)
                    u_value = u_value.with_changes(args=[u_value.args[0].with_changes(value=new_first),
                                                         *u_value.args[1:]])
                else:
                    u_value = self._option_value(o_value, u_value, is_device)
                u_arg = u_arg.with_changes(value=u_value)
            new_args.append(u_arg)
        return updated.with_changes(args=new_args)

    def _option_value(self, original, updated, is_device: bool):
        return self.device_literal(original, updated) if is_device else self.backend_literal(original, updated)

    def _absl_flag(self, original: cst.Call, updated: cst.Call, enum: bool) -> cst.Call:
        """`flags.DEFINE_string("base_device", "cuda", "...")`: the default (and for DEFINE_enum
        the allowed values) of a device or backend flag."""
        positional = [i for i, a in enumerate(original.args) if a.keyword is None and a.star == ""]
        by_keyword = {a.keyword.value: i for i, a in enumerate(original.args) if a.keyword is not None}
        where = {}
        for key, pos in (("name", 0), ("default", 1), ("enum_values", 2)):
            if key in by_keyword:
                where[key] = by_keyword[key]
            elif pos < len(positional):
                where[key] = positional[pos]
        name = string_value(original.args[where["name"]].value) if "name" in where else None
        if name is None:
            return updated
        is_device = bool(DEVICE_NAME_RE.search(name))
        if not is_device and not BACKEND_NAME_RE.search(name):
            return updated
        args = list(updated.args)
        for key in ("default", "enum_values") if enum else ("default",):
            if key in where:
                i = where[key]
                args[i] = args[i].with_changes(value=self._option_value(original.args[i].value, args[i].value, is_device))
        return updated.with_changes(args=args)

    def leave_Subscript(self, original: cst.Subscript, updated: cst.Subscript) -> cst.Subscript:
        # os.environ["CUDA_VISIBLE_DEVICES"]; env["CUDA_VISIBLE_DEVICES"] of `env = os.environ.copy()`
        if len(updated.slice) != 1 or not isinstance(updated.slice[0].slice, cst.Index) \
                or not isinstance(original.slice[0].slice, cst.Index):
            return updated
        el, index = updated.slice[0], updated.slice[0].slice
        o_value = original.slice[0].slice.value
        if self.is_environ(original.value) or self._is_environ_copy(original):
            new_value = self.env_literal(o_value, index.value)
        elif self._is_rewritable_literal(index.value) and _named_for_devices(original.value):
            # DEVICE_IDS["cuda"] = 0, read as `DEVICE_IDS["cuda"]` (also in a print: a key that
            # moved must be looked up as it is now) or tested `"cuda" in DEVICE_IDS`
            new_value = self.device_literal(o_value, index.value)
        else:
            return updated
        if new_value is index.value:
            return updated
        return updated.with_changes(slice=[el.with_changes(slice=index.with_changes(value=new_value))])

    def leave_Comparison(self, original: cst.Comparison, updated: cst.Comparison) -> cst.Comparison:
        # x.device.type == "cuda"; backend != "nccl"; "CUDA_VISIBLE_DEVICES" in os.environ
        left_o, left_u = original.left, updated.left
        targets = list(updated.comparisons)
        changed = False
        operands_o = [left_o] + [t.comparator for t in original.comparisons]
        operands_u = [left_u] + [t.comparator for t in targets]
        for i, target in enumerate(original.comparisons):
            if not isinstance(
                target.operator, (cst.Equal, cst.NotEqual, cst.In, cst.NotIn, cst.Is, cst.IsNot)
            ):
                continue
            a_o, b_o = operands_o[i], operands_o[i + 1]
            for lit_index, other in ((i, b_o), (i + 1, a_o)):
                lit_o, lit_u = operands_o[lit_index], operands_u[lit_index]
                if not (self._is_rewritable_literal(lit_u) or self.envs.rewrite(lit_u) is not None
                        or self._is_type_call(other)):
                    continue
                new = lit_u
                if self._is_type_call(other):
                    new = self._type_string_literal(lit_o, lit_u)
                elif isinstance(target.operator, (cst.In, cst.NotIn)) and lit_index == i and self.is_environ(other):
                    new = self.env_literal(lit_o, lit_u)
                elif self.is_device_expr(other):
                    new = self.device_literal(lit_o, lit_u, variable=self._variable_decides(lit_u)
                                         and self._compared_variable(other), require=not self._reads_object_device(other))
                elif self.is_backend_expr(other):
                    new = self.backend_literal(lit_o, lit_u)
                elif type(lit_o) is cst.Call and self.is_device_expr(lit_o):
                    # `cfg.get("device", "cuda") == "cuda"`: the literal moves by the key, and so
                    # does the default it is compared in place of
                    new = self.device_literal(lit_o, lit_u)
                elif type(lit_o) is cst.Call and self.is_backend_expr(lit_o):
                    new = self.backend_literal(lit_o, lit_u)
                if new is not lit_u:
                    operands_u[lit_index] = new
                    changed = True
        if not changed:
            return updated
        new_targets = [t.with_changes(comparator=operands_u[j + 1]) for j, t in enumerate(targets)]
        return updated.with_changes(left=operands_u[0], comparisons=new_targets)

    def _is_type_call(self, node: cst.BaseExpression) -> bool:
        """`x.type()` (no arguments): a tensor's type name, `torch.cuda.HalfTensor` on CUDA."""
        return (isinstance(node, cst.Call) and not node.args and isinstance(node.func, cst.Attribute)
                and node.func.attr.value == "type" and self.resolve(node.func) is None)

    def _type_string_literal(self, original: cst.BaseExpression, updated: cst.BaseExpression) -> cst.BaseExpression:
        """`'torch.cuda.HalfTensor'` (or a tuple/list of them) compared with `x.type()`."""
        if isinstance(original, (cst.Tuple, cst.List, cst.Set)) and isinstance(updated, type(original)):
            elements = [u.with_changes(value=self._type_string_literal(o.value, u.value))
                        if isinstance(o, cst.Element) and isinstance(u, cst.Element) else u
                        for o, u in zip(original.elements, updated.elements)]
            return updated.with_changes(elements=elements)
        value = string_value(original) if isinstance(original, cst.SimpleString) else None
        if value is None or not value.startswith("torch.") or not isinstance(updated, cst.SimpleString):
            return updated
        hit = self.ctx.rules.rewrite_api(value)
        if hit is None:
            return updated
        prefix, to, rule = hit
        if self.ctx.suppressed(original, rule.code):
            return updated
        new_value = to + value[len(prefix):]
        self.ctx.edit(rule, original, rule.render_message(before=value, after=new_value), value, new_value)
        self.ctx.require_import("torch_npu")
        return updated.with_changes(value=f"{updated.prefix}{updated.quote}{new_value}{updated.quote}")

    def _is_rewritable_literal(self, node: cst.BaseExpression) -> bool:
        """Whether a device or backend rewriter would change `node` (cheap: looks at literals only)."""
        return self.devices.rewrite(node) is not None or self.backends.rewrite(node) is not None

    def _read_only_by_foreign_libraries(self, targets: Sequence[cst.BaseExpression],
                                        value: Optional[cst.BaseExpression] = None) -> bool:
        """`self.device = "cuda"` whose every read in the module is an argument of a library with
        device names of its own (OpenNMT-py's CTranslate2 engine: `ctranslate2.Translator(path,
        device=self.device)`): the string is that library's device name, and "npu" would be
        refused there. Any other read in the module (`torch.zeros(1, device=self.device)`,
        `engine.device`, `getattr(self, "device")`) leaves the value to move as a device. Reads
        in other modules are not seen: such an attribute is the engine's own, set in its class.
        The key of the `value` assigned (`device = cfg.get("device", "cuda")`) is no read of it."""
        if not self.foreign_libraries:
            return False
        keys = [_read_key(t) for t in targets]
        if not keys or None in keys:
            return False
        own = self.ctx.code_for(value) if value is not None and carried_lookups(value) else ""
        for key in keys:
            assert key is not None
            given = self._foreign_reads(key)
            if not given or _reads_in_text(self.ctx.text, key) - _reads_in_text(own, key) > given:
                return False
        return True

    def _assigned_value(self, targets: Sequence[cst.BaseExpression], original_value, updated_value):
        if isinstance(original_value, (cst.ListComp, cst.SetComp, cst.GeneratorExp)) \
                and isinstance(updated_value, type(original_value)):
            # `devices = [f"cuda:{i}" for i in range(torch.cuda.device_count())]` (poutyne's
            # Model.to("all")): each element is what a display's would be.
            new_element = self._assigned_value(targets, original_value.elt, updated_value.elt)
            return updated_value if new_element is updated_value.elt else updated_value.with_changes(elt=new_element)
        if type(original_value) is cst.SimpleString and len(targets) == 1 and type(targets[0]) is cst.Name \
                and self.envs.rewrite(updated_value) is not None \
                and targets[0].value in self._usage(targets[0].value).env_key_names:
            # `CUDA_ENVVAR = "CUDA_VISIBLE_DEVICES"` read as `os.environ[CUDA_ENVVAR]`: the name of
            # the variable its readers set and read, moved as `os.environ["CUDA_VISIBLE_DEVICES"]`
            return self.env_literal(original_value, updated_value)
        if not self._is_rewritable_literal(updated_value):
            return updated_value
        device = any(self.is_device_expr(t) for t in targets)
        if device and self._read_only_by_foreign_libraries(targets, original_value):
            self._settled(original_value)  # another library's device (NPU303 at its import)
            return updated_value
        if device:
            variable = self._variable_decides(updated_value) and any(self.is_torch_device_variable(t) for t in targets)
            return self.device_literal(original_value, updated_value, variable=variable)
        if any(self.is_backend_expr(t) for t in targets):
            return self.backend_literal(original_value, updated_value)
        require = self._typed_table(targets, original_value, updated_value)
        if require is not None:
            return self.device_literal(original_value, updated_value, require=require)
        return updated_value

    def _typed_table(self, targets: Sequence[cst.BaseExpression], original: cst.BaseExpression,
                     updated: cst.BaseExpression) -> Optional[bool]:
        """A table of device types (`_EVENT_BLOCK_SIZE = {"cpu": 128, "cuda": 512}`, `SUPPORTED =
        ("cpu", "cuda")`) that the module looks up with the type of a device
        (`_EVENT_BLOCK_SIZE[times.device.type]`, `.get(kind, d)`, `x.device.type in SUPPORTED`):
        on the NPU that type is "npu", so its "cuda" entry moves with those readers
        (spikingjelly 2.0.0's timing_based/functional.py: a KeyError 'npu' once the device check
        beside it moved). Whether the move needs torch_npu loaded (_rewrite_literal's `require`:
        not where every key is the device an object is on), or None where the table stays: it
        is not one, names the NPU already, or is not looked up with a device type; and, said as
        NPU327, where its readers would not move with it: the module reads it otherwise too
        (`D["cuda"]`, `for k in D`, an annotation, its name in a string), it is a public name of
        the module (another module may read it), or its CUDA entry holds code not known to run
        on the NPU (a function of the project's: `{"cpu": ref, "cuda": triton_kernel}`)."""
        if len(targets) != 1 or type(targets[0]) is not cst.Name \
                or type(original) not in (cst.Dict, cst.Tuple, cst.List, cst.Set) or ".type" not in self.ctx.text:
            return None
        moved = self._device_type_entries(original)
        if not moved:
            return None
        name = targets[0].value
        reads = _reads_in_text(self.ctx.text, name)
        if not reads:
            return None
        usage = self._usage(name)
        kinds = [self._device_type_key(k, usage) for k in usage.typed_lookups.get(name, ())]
        typed = [kind for kind in kinds if kind is not None]
        if not typed:
            return None
        reason = None
        if reads > len(typed):
            reason = "the module reads it otherwise too"
        elif not self._functions and not name.startswith("_"):
            reason = "it is a public name of the module, which other modules may read"
        else:
            updated_entries = self._device_type_entries(updated) if type(updated) is type(original) else []
            values = dict(zip([id(k) for k, _ in moved], [v for _, v in updated_entries])) \
                if len(updated_entries) == len(moved) else {}
            for key, value in moved:
                if value is not None and not self._portable(value, values.get(id(key))):
                    reason = f"its {self.ctx.code_for(key)} entry, `{self.ctx.code_for(value)}`, is not known to run on the NPU"
                    break
        if reason is None:
            return not all(typed)
        rule = self.ctx.rules.analysis.get(TYPED_TABLE)
        if rule is not None and not self.ctx.suppressed(targets[0], rule.code):
            read = next(k for k, kind in zip(usage.typed_lookups[name], kinds) if kind is not None)
            fields = dict(name=name, read=self.ctx.code_for(read), reason=reason)
            self.ctx.finding(rule, targets[0], api=name, message=rule.render_message(**fields),
                             suggestion=rule.render_suggestion(**fields))
        return None

    def _device_type_entries(self, table: cst.BaseExpression) -> List[Tuple[cst.BaseExpression, Optional[cst.BaseExpression]]]:
        """The (key, value) of a dict display's entries keyed by a device type the device rules
        move ("cuda"), the (element, None) of a tuple, list or set display's such elements;
        nothing where the display names "npu" already (it selects the NPU itself)."""
        found: List[Tuple[cst.BaseExpression, Optional[cst.BaseExpression]]] = []
        pairs: List[Tuple[cst.BaseExpression, Optional[cst.BaseExpression]]]
        if isinstance(table, cst.Dict):
            pairs = [(e.key, e.value) for e in table.elements if isinstance(e, cst.DictElement)]
        elif isinstance(table, (cst.Tuple, cst.List, cst.Set)):
            pairs = [(e.value, None) for e in table.elements if isinstance(e, cst.Element)]
        else:
            return found
        for key, value in pairs:
            word = string_value(key)
            if word is None:
                continue
            if word.lower() == "npu":
                return []
            if ":" not in word and self.positional_devices.rewrite(key) is not None:
                found.append((key, value))
        return found

    def _device_type_key(self, key: cst.BaseExpression, usage: DeviceVariables) -> Optional[bool]:
        """Whether a table's key is the type of a device: True for the device an object is on
        (`times.device.type`, a name bound only to one: no torch_npu needed, _reads_object_device),
        False for another (`torch.device(d).type`, `device.type`, a name assigned one), None for
        anything else (`node.type`, a parameter)."""
        if type(key) is cst.Name:
            usage = self._usage(key.value)  # (its binding may be in a statement left out)
            if key.value in usage.object_device_names:
                return True
            return False if key.value in usage.type_names else None
        if object_device_read(key):
            return True
        inner = key.value  # type: ignore[attr-defined]  # (an Attribute `X.type`: DeviceVariables._typed)
        if (type(inner) is cst.Call and self.resolve(inner.func) == "torch.device") or _named_for_devices(inner):
            return False
        return None

    def _portable(self, original: cst.BaseExpression, updated: Optional[cst.BaseExpression]) -> bool:
        """Whether a table's value for CUDA works on the NPU as it is (a number, a string, a
        constant, a dtype or other torch name) or once migrated (a torch.cuda name the walk
        moved already: `{"cuda": torch.cuda.manual_seed}`)."""
        kind = type(original)
        if kind in (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.ConcatenatedString):
            return True
        if kind is cst.Name:
            return original.value in ("True", "False", "None")  # type: ignore[attr-defined]
        if kind is cst.UnaryOperation:
            return self._portable(original.expression, None)  # type: ignore[attr-defined]
        if kind in (cst.Tuple, cst.List, cst.Set):
            return all(type(e) is cst.Element and self._portable(e.value, None)
                       for e in original.elements)  # type: ignore[attr-defined]
        if kind is cst.Attribute:
            qual = self.resolve(original) or ""
            if qual.split(".", 1)[0] not in ("torch", "torch_npu"):
                return False
            return "cuda" not in qual.split(".") or (updated is not None and not updated.deep_equals(original))
        return False

    def assigned_literal_moves(self, node: cst.Assign) -> bool:
        """Whether leave_Assign would take `node`'s string to the NPU (_assigned_value: a rewritable
        literal given to a device or backend variable); guards.keep_test_choosing_kept_name asks it
        for a CUDA test's arm before the walk reaches the arm."""
        if not self._is_rewritable_literal(node.value):
            return False
        targets = [t.target for t in node.targets]
        return any(self.is_device_expr(t) or self.is_backend_expr(t) for t in targets)

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign) -> cst.Assign:
        targets = [t.target for t in original.targets]
        if len(targets) == 1 and isinstance(original.value, (cst.List, cst.Tuple)):
            found = self._parametrize_variable(targets[0], original.value)
            if found is not None:  # `CASES = [(1, "cpu"), (2, "cuda")]` (pytest.mark.parametrize's values)
                new = self._parametrize_values(original.value, updated.value, found[0], found[1], single=False)
                return updated.with_changes(value=new) if new is not updated.value else updated
        new_value = self._assigned_value(targets, original.value, updated.value)
        if new_value is updated.value and len(targets) == 1 and isinstance(original.value, cst.Call) \
                and isinstance(updated.value, cst.Call):
            new_value = self._field_default(targets[0], original.value, updated.value)  # `backend = attr.ib(default="nccl")`
        return updated.with_changes(value=new_value) if new_value is not updated.value else updated

    def leave_AugAssign(self, original: cst.AugAssign, updated: cst.AugAssign) -> cst.AugAssign:
        # DEVICES += ["cuda"]: the collection's new elements, like DEVICES.extend(["cuda"])
        if isinstance(original.operator, cst.AddAssign) and isinstance(original.value, (cst.List, cst.Tuple)):
            found = self._parametrize_variable(original.target, original.value)
            if found is not None:  # CASES += [(2, "cuda")]
                new = self._parametrize_values(original.value, updated.value, found[0], found[1], single=False)
                return updated.with_changes(value=new) if new is not updated.value else updated
        new_value = self._assigned_value([original.target], original.value, updated.value)
        return updated.with_changes(value=new_value) if new_value is not updated.value else updated

    def leave_AnnAssign(self, original: cst.AnnAssign, updated: cst.AnnAssign) -> cst.AnnAssign:
        # `backend: Literal["nccl", "gloo"] = "nccl"`, `device: str = field(default="cuda")`
        changes: Dict[str, cst.CSTNode] = {}
        if original.value is not None and updated.value is not None:
            new_value = self._assigned_value([original.target], original.value, updated.value)
            if new_value is updated.value and isinstance(original.value, cst.Call):
                new_value = self._field_default(original.target, original.value, updated.value)
            if new_value is not updated.value:
                changes["value"] = new_value
        new_annotation = self._annotated_choices(original.target, original.annotation, updated.annotation)
        if new_annotation is not updated.annotation:
            changes["annotation"] = new_annotation
        return updated.with_changes(**changes) if changes else updated

    def leave_Param(self, original: cst.Param, updated: cst.Param) -> cst.Param:
        # def train(device="cuda", backend="nccl"), def run(backend: Literal["nccl", "gloo"])
        changes: Dict[str, cst.CSTNode] = {}
        if original.default is not None and updated.default is not None:
            new_default = self._assigned_value([original.name], original.default, updated.default)
            if new_default is not updated.default:
                changes["default"] = new_default
        if original.annotation is not None and updated.annotation is not None:
            new_annotation = self._annotated_choices(original.name, original.annotation, updated.annotation)
            if new_annotation is not updated.annotation:
                changes["annotation"] = new_annotation
        return updated.with_changes(**changes) if changes else updated

    def _field_default(self, target: cst.BaseExpression, original: cst.Call, updated: cst.Call) -> cst.Call:
        """`device: str = field(default="cuda", metadata={"choices": [...]})`: the field's default
        (and the choices HfArgumentParser reads from its metadata) is the value of the attribute,
        whose readers (`opts.device == "cuda"`) move by its name. The field makers by their name
        (dataclasses/attrs `field`, pydantic `Field`, attrs `ib`/`attrib`): partial parsing keeps
        only the imports of the packages a rule names, so `field` is not resolved."""
        if (self.resolve(original.func) or last_identifier(original.func)) not in FIELD_MAKERS:
            return updated
        args = list(updated.args)
        for i, (o_arg, u_arg) in enumerate(zip(original.args, updated.args)):
            if o_arg.keyword is None:
                continue
            if o_arg.keyword.value == "default":
                new = self._assigned_value([target], o_arg.value, u_arg.value)
            elif o_arg.keyword.value == "metadata" and isinstance(o_arg.value, cst.Dict) \
                    and isinstance(u_arg.value, cst.Dict):
                new = self._metadata_choices(target, o_arg.value, u_arg.value)
            else:
                continue
            if new is not u_arg.value:
                args[i] = u_arg.with_changes(value=new)
        return updated.with_changes(args=args) if args != list(updated.args) else updated

    def _metadata_choices(self, target: cst.BaseExpression, original: cst.Dict, updated: cst.Dict) -> cst.Dict:
        elements = list(updated.elements)
        for i, (o_el, u_el) in enumerate(zip(original.elements, updated.elements)):
            if isinstance(o_el, cst.DictElement) and isinstance(u_el, cst.DictElement) \
                    and string_value(o_el.key) == "choices":
                new = self._assigned_value([target], o_el.value, u_el.value)
                if new is not u_el.value:
                    elements[i] = u_el.with_changes(value=new)
        return updated.with_changes(elements=elements) if elements != list(updated.elements) else updated

    def _annotated_choices(self, target: cst.BaseExpression, original: cst.Annotation,
                           updated: cst.Annotation) -> cst.Annotation:
        """`distributed_backend: Literal["nccl", "gloo", "mpi"] = "nccl"` (speechbrain 1.1.2's
        RunOptions): the type lists the values the attribute takes, so its values move with the
        default and the readers (`== "nccl"`), like argparse's `choices`; also inside
        `Optional[...]`, `Union[...]` and `X | None`. A Literal that names the NPU's value already
        stays (it would name it twice)."""
        if isinstance(original.annotation, cst.SimpleString) and isinstance(updated.annotation, cst.SimpleString):
            new = self._string_annotation(target, original.annotation, updated.annotation)
        else:
            new = self._literal_values(target, original.annotation, updated.annotation)
        return updated.with_changes(annotation=new) if new is not updated.annotation else updated

    def _string_annotation(self, target, original: cst.SimpleString, updated: cst.SimpleString) -> cst.SimpleString:
        """`device: "Literal['cuda', 'cpu']" = "cuda"` (a forward reference, or a module written
        for PEP 563): the values the Literal in the string lists move as in an annotation
        written out (_literal_values), read from the string's text; one edit for the string."""
        text = string_value(original)
        if text is None or "Literal" not in text:
            return updated  # (asked first: is_device_expr may walk the module, and in a partial
            # text ask for the statements that use the name: `model: "PreTrainedModel"`)
        device, backend = self.is_device_expr(target), self.is_backend_expr(target)
        if not (device or backend):
            return updated
        try:
            expr = cst.parse_expression(text)
        except (cst.ParserSyntaxError, RecursionError, ValueError):
            return updated
        strings = list(_literal_strings(expr))
        rewriter = (self.devices if self.is_torch_device_variable(target) else self.positional_devices) if device \
            else self.backends
        new = {id(s): rewriter.rewrite(s) for s in strings}
        values = {string_value(s) for s in strings}
        if not any(new.values()) or any(n is not None and string_value(n) in values for n in new.values()):
            return updated  # nothing to move, or `Literal['cuda', 'npu']`: selects the NPU already
        table = self.device_rule if device else self.backend_rule
        rule = self._rule_for_literal(table, original) if table else None
        if rule is None or self.ctx.suppressed(original, rule.code):
            return updated

        class Swap(cst.CSTTransformer):
            def leave_SimpleString(self, o: cst.SimpleString, u: cst.SimpleString) -> cst.BaseExpression:
                return new.get(id(o)) or u

        swapped = expr.visit(Swap())
        if not isinstance(swapped, cst.BaseExpression):
            return updated
        code = cst.Module(body=[]).code_for_node(swapped)
        if original.quote in code or "\\" in code:
            return updated  # (the string's own quotes or escapes inside: not written back)
        result = updated.with_changes(value=f"{original.prefix}{original.quote}{code}{original.quote}")
        self._record_literal(rule, original, result, "device string" if device else "distributed backend")
        self.ctx.require_import("torch_npu")
        return result

    def _literal_values(self, target, original: cst.BaseExpression, updated: cst.BaseExpression):
        if isinstance(original, cst.BinaryOperation) and isinstance(updated, cst.BinaryOperation) \
                and isinstance(original.operator, cst.BitOr):
            left = self._literal_values(target, original.left, updated.left)
            right = self._literal_values(target, original.right, updated.right)
            if left is updated.left and right is updated.right:
                return updated
            return updated.with_changes(left=left, right=right)
        if not isinstance(original, cst.Subscript) or not isinstance(updated, cst.Subscript) \
                or len(original.slice) != len(updated.slice):
            return updated
        kind = self.resolve(original.value) or last_identifier(original.value) or ""
        literal = kind.rsplit(".", 1)[-1] == "Literal"
        if not literal and kind.rsplit(".", 1)[-1] not in ("Optional", "Union"):
            return updated
        pairs = [(o.slice.value, u) for o, u in zip(original.slice, updated.slice)
                 if isinstance(o.slice, cst.Index) and isinstance(u.slice, cst.Index)]
        if len(pairs) != len(original.slice):
            return updated
        if literal:
            if not any(self._is_rewritable_literal(u.slice.value) for _, u in pairs):  # type: ignore[attr-defined]
                return updated
            values = {string_value(o) for o, _ in pairs}
            rewritten = {self.devices.rewrite(o) or self.backends.rewrite(o) for o, _ in pairs}
            if any(isinstance(r, cst.SimpleString) and string_value(r) in values for r in rewritten):
                return updated  # Literal["cuda", "npu"]: selects the NPU already
        elements = []
        for o_value, u_el in pairs:
            u_value = u_el.slice.value  # type: ignore[attr-defined]
            if literal:
                new = self._assigned_value([target], o_value, u_value)
            else:
                new = self._literal_values(target, o_value, u_value)
            elements.append(u_el.with_changes(slice=u_el.slice.with_changes(value=new))
                            if new is not u_value else u_el)
        if all(e is u for e, (_, u) in zip(elements, pairs)):
            return updated
        return updated.with_changes(slice=elements)

    def _parametrized_devices(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        """`@pytest.mark.parametrize("device", ["cpu", "cuda"])`, also `("dtype,device", [(..,
        "cuda"), pytest.param(.., "cuda")])`: the values of device-named parameters."""
        qual = self.resolve(original.func)
        if qual == "pytest.param":
            return self._gated_param(original, updated)
        if isinstance(original.func, cst.Attribute) and original.func.attr.value in GROW_METHODS:
            return self._parametrize_variable_grows(original, updated)
        if qual not in dc.PARAMETRIZE:
            return updated
        found = dc.parametrized_devices(original)
        if found is None:
            return updated
        index, positions, count = found
        args = list(updated.args)
        args[index] = args[index].with_changes(value=self._parametrize_values(
            original.args[index].value, updated.args[index].value, positions, count, single=False))
        return updated.with_changes(args=args)

    def _parametrize_variable(self, target: cst.BaseExpression, value: cst.BaseExpression):
        """(positions, count) when `target` is a module variable that the module passes only as
        the values of `pytest.mark.parametrize` with device-named parameters, and otherwise only
        grows (`CASES.append(...)`, `CASES += [...]`): catalyst 22.4's tests/benchmarks
        `BENCHMARKS = [(R, 4, "cpu", ...)]; if torch.cuda.is_available(): BENCHMARKS.append((R, 4,
        "cuda", ...))`. Its device values are what the test's `device == "cuda"` compares and what
        it passes to torch, so they move with them, as in a list written in the decorator itself.
        None otherwise (a list read anywhere else keeps its values)."""
        if not isinstance(target, cst.Name) or "parametrize" not in self.ctx.text \
                or not self._holds_rewritable_literal(value):
            return None
        name = target.value
        found = self._usage(name).parametrize_names.get(name)
        if found is None:
            return None
        positions, count, uses = found
        text = self.ctx.text
        grows = len(re.findall(r"(?<![\w.])" + re.escape(name) + r"\s*(?:\.\s*(?:"
                               + "|".join(GROW_METHODS) + r")\s*\(|\+=)", text))
        if _reads_in_text(text, name) > uses + grows:
            return None
        return list(positions), count

    def _holds_rewritable_literal(self, value: cst.BaseExpression) -> bool:
        """Whether a device rewriter would change a string in `value`, a display of parameter
        values: the strings themselves, in tuples, or in pytest.param(...) (cheap: no walk)."""
        stack = [value]
        while stack:
            n = stack.pop()
            if isinstance(n, (cst.List, cst.Tuple)):
                stack += [e.value for e in n.elements if isinstance(e, cst.Element)]
            elif isinstance(n, cst.Call):
                stack += [a.value for a in n.args if a.keyword is None and a.star == ""]
            elif self.devices.rewrite(n) is not None:
                return True
        return False

    def _parametrize_values(self, original: cst.BaseExpression, updated: cst.BaseExpression,
                            positions: List[int], count: int, single: bool) -> cst.BaseExpression:
        """The device values of one case (`single`) or of a display of cases."""
        if single:
            return self._parameter_values(original, updated, positions, count)
        if not isinstance(original, (cst.List, cst.Tuple)) or not isinstance(updated, type(original)):
            return updated
        elements = []
        for o_el, u_el in zip(original.elements, updated.elements):
            if isinstance(o_el, cst.Element) and isinstance(u_el, cst.Element):
                u_el = u_el.with_changes(value=self._parameter_values(o_el.value, u_el.value, positions, count))
            elements.append(u_el)
        return updated.with_changes(elements=elements)

    def _parametrize_variable_grows(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        """`CASES.append((2, "cuda"))`, `CASES.extend([...])`, `CASES.insert(0, ...)` of a
        variable _parametrize_variable accepts."""
        method = original.func.attr.value  # type: ignore[attr-defined]
        index = GROW_METHODS[method]
        positional = [a for a in original.args if a.keyword is None and a.star == ""]
        if len(positional) <= index or len(positional) != len(original.args):
            return updated
        found = self._parametrize_variable(original.func.value, positional[index].value)  # type: ignore[attr-defined]
        if found is None:
            return updated
        args = list(updated.args)
        new = self._parametrize_values(positional[index].value, args[index].value, found[0], found[1],
                                       single=method != "extend")
        if new is args[index].value:
            return updated
        args[index] = args[index].with_changes(value=new)
        return updated.with_changes(args=args)

    def _gated_param(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        """`pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), ...))`
        wherever it stands (a fixture's `params` list: pytorch-ignite 0.5.5 tests/ignite/
        conftest.py; `pytest.param("nccl", ...)` in its launcher tests): its mark asks for CUDA,
        so its values are the device (or the backend) the test then runs on, and move with the
        mark's test, which the rewrite of torch.cuda moves."""
        marks = next((a.value for a in original.args if a.keyword is not None and a.keyword.value == "marks"), None)
        items = ([e.value for e in marks.elements if isinstance(e, cst.Element)]
                 if isinstance(marks, (cst.List, cst.Tuple)) else [marks])
        if not any(isinstance(m, cst.Call) and self.resolve(m.func) == "pytest.mark.skipif" and m.args
                   and m.args[0].keyword is None and dc.is_device_test(m.args[0].value, self.resolve)
                   for m in items):
            return updated
        new_args = list(updated.args)
        for i, (o, u) in enumerate(zip(original.args, updated.args)):
            if o.keyword is None and o.star == "" and isinstance(o.value, (cst.SimpleString, cst.FormattedString)):
                if isinstance(o.value, cst.SimpleString) and _compared_in_text(self.ctx.text, string_value(o.value)):
                    continue  # a label the module tests (`if request.param == "nccl":`), not the value
                value = self.device_literal(o.value, u.value)
                if value is u.value:  # `pytest.param("nccl", marks=...)`: the backend CUDA runs
                    value = self.backend_literal(o.value, u.value)
                new_args[i] = u.with_changes(value=value)
        return updated.with_changes(args=new_args)

    def _parameter_values(self, original, updated, positions: List[int], count: int):
        if count == 1:
            if (isinstance(original, cst.Call) and isinstance(updated, cst.Call)
                    and self.resolve(original.func) == "pytest.param"):
                # `pytest.param("cuda", marks=skipif(not torch.cuda.is_available()))`: the
                # value moves with the test its mark asks (pytorch-ignite 0.5.5's metrics tests)
                values_o = [a for a in original.args if a.keyword is None and a.star == ""]
                values_u = [a for a in updated.args if a.keyword is None and a.star == ""]
                if not values_o or len(values_o) != len(values_u):
                    return updated
                new_args = list(updated.args)
                i = new_args.index(values_u[0])
                new_args[i] = values_u[0].with_changes(value=self.device_literal(values_o[0].value, values_u[0].value))
                return updated.with_changes(args=new_args)
            return self.device_literal(original, updated)
        holder_o, holder_u = original, updated
        if isinstance(original, cst.Call) and isinstance(updated, cst.Call):  # pytest.param(a, b, marks=...)
            values_o = [a for a in original.args if a.keyword is None]
            values_u = [a for a in updated.args if a.keyword is None]
            new_args = list(updated.args)
            for pos in positions:
                if pos < len(values_o):
                    i = list(updated.args).index(values_u[pos])
                    new_args[i] = values_u[pos].with_changes(value=self.device_literal(values_o[pos].value, values_u[pos].value))
            return updated.with_changes(args=new_args)
        if isinstance(holder_o, cst.Tuple) and isinstance(holder_u, cst.Tuple):
            elements = list(holder_u.elements)
            for pos in positions:
                if pos < len(elements) and isinstance(elements[pos], cst.Element):
                    o_el = holder_o.elements[pos]
                    elements[pos] = elements[pos].with_changes(value=self.device_literal(o_el.value, elements[pos].value))
            return updated.with_changes(elements=elements)
        return updated

    def leave_For(self, original: cst.For, updated: cst.For):
        # for device in ["cpu", "cuda"]:
        if isinstance(original.iter, (cst.List, cst.Tuple, cst.Set)) and self._is_device_target(original.target):
            new_iter = self.device_literal(original.iter, updated.iter)
            if new_iter is not updated.iter:
                return updated.with_changes(iter=new_iter)
        return updated

    def _is_device_target(self, target: cst.BaseExpression) -> bool:
        if isinstance(target, cst.Tuple):
            return any(isinstance(e, cst.Element) and self._is_device_target(e.value) for e in target.elements)
        return self.is_device_expr(target)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._functions.append(node)  # does it return devices? (_function_returns_devices)

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef):
        if self._functions and self._functions[-1] is original:
            self._functions.pop()
        return updated

    def visit_If(self, node: cst.If) -> None:
        self._device_bodies |= dc.device_bodies(node, self.resolve)

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        if id(node) in self._device_bodies:
            self._in_device_body += 1

    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock):
        if id(original) in self._device_bodies:
            self._in_device_body -= 1
        return updated

    def leave_Return(self, original: cst.Return, updated: cst.Return):
        """`return "cuda"` where it is a device: in a function that returns devices (`get_device`,
        another `return "cpu"`), or under `if torch.cuda.is_available():` / `if x.is_cuda:`."""
        if original.value is None or updated.value is None or not self._is_rewritable_literal(updated.value):
            return updated
        if not (self._in_device_body or self._function_returns_devices()):
            return updated
        new = self.device_literal(original.value, updated.value)
        return updated.with_changes(value=new) if new is not updated.value else updated

    def _function_returns_devices(self) -> bool:
        if not self._functions:
            return False
        func = self._functions[-1]
        if id(func) not in self._returns_devices:
            found = self._returns_devices[id(func)] = dc.returns_devices(func, self.resolve, DEVICE_NAME_RE)
            if not found and self.ctx.partial is not None:
                # a `return "cpu"` in lines partial parsing left out: parsed in another attempt
                self.ctx.partial_lines.update(self.ctx.partial.elided_in(func.body, "return"))
        return self._returns_devices[id(func)]

    def leave_IfExp(self, original: cst.IfExp, updated: cst.IfExp) -> cst.BaseExpression:
        """`"cuda" if torch.cuda.is_available() else "cpu"`: a device, whatever receives it."""
        if self.state.shown or self.state.foreign or not self._is_rewritable_literal(updated):
            return updated
        if not (dc.is_device_test(original.test, self.resolve)
                and (dc.names_a_device(original.orelse, self.resolve) or dc.names_a_device(original.body, self.resolve))):
            return updated
        return self.device_literal(original, updated)

    def leave_Element(self, original: cst.Element, updated: cst.Element) -> cst.Element:
        """`("cuda:0",) + args`, `["cuda:0", "cuda:1"]`: with an index, a device by its form."""
        if self.state.shown or self.state.foreign or not dc.is_indexed_device(original.value):
            return updated
        new = self.device_literal(original.value, updated.value)
        return updated.with_changes(value=new) if new is not updated.value else updated

    def leave_List(self, original: cst.List, updated: cst.List) -> cst.List:
        return self._config_pairs(original, updated)

    def leave_Tuple(self, original: cst.Tuple, updated: cst.Tuple) -> cst.Tuple:
        return self._config_pairs(original, updated)

    def _config_pairs(self, original, updated):
        """yacs/detectron2 overrides: `cfg.merge_from_list(["MODEL.DEVICE", "cuda", ...])`, `opts +
        ["MODEL.DEVICE", "cuda"]`: the value after a dotted config key naming a device."""
        if self.state.shown or self.state.foreign or len(original.elements) < 2:
            return updated
        elements = list(updated.elements)
        changed = False
        for i, element in enumerate(original.elements[:-1]):
            key = string_value(element.value)
            if key is None or "." not in key or not DEVICE_NAME_RE.search(key.rsplit(".", 1)[-1]):
                continue
            value = original.elements[i + 1].value
            if elements[i + 1].value is not value:
                continue  # rewritten already (leave_Element: "cuda:0")
            new = self.device_literal(value, elements[i + 1].value, variable=False)
            if new is not elements[i + 1].value:
                elements[i + 1] = elements[i + 1].with_changes(value=new)
                changed = True
        return updated.with_changes(elements=elements) if changed else updated

    def note_dict(self, node: cst.Assign) -> None:
        """`D = {...}` in a module importing a library with device names of its own: its
        elements' owner, for leave_DictElement (_entries_for_foreign_library)."""
        names = [t.target.value for t in node.targets if isinstance(t.target, cst.Name)]
        if len(names) == 1 and isinstance(node.value, cst.Dict):
            for element in node.value.elements:
                self._dict_owner[id(element)] = names[0]

    def _entries_for_foreign_library(self, name: str) -> bool:
        """Whether every read of the dict `name` hands its entries to a library with device
        names of its own (OpenNMT-py 3.5.1's translation_server.py: `onmt_for_translator =
        {"device": "cuda" if opt.cuda else "cpu", ...}`, its items set into `ct2_translator_args`,
        given as `ctranslate2.Translator(model_path, **ct2_translator_args)`): "npu" would be
        refused there (CTranslate2 knows "cpu", "cuda", "auto"; NPU303 at its import)."""
        partial = self.ctx.partial
        if partial is not None and partial.elided_word(name):
            # its reads left out, and the `**kwargs` of lines left out that name the library
            # (`ctranslate2.Translator(model_path, **ct2_translator_args)`): migrated again with
            # them, in one more attempt
            self.ctx.partial_misses.add(name)
            foreign = {local.encode() for local, qualified in self.ctx.imports.names.items() if dc.is_foreign_callee(qualified)}
            foreign.update(n.encode() for n in dc.NON_TORCH_LIBRARIES)
            for start, end, _indent in partial.runs:
                text = partial.text_of((start, end))
                if "**" in text and not foreign.isdisjoint(words_of(text)):
                    self.ctx.partial_misses.update(_KWARGS_RE.findall(text))
        walked = self._walked()
        into = walked.entries_into.get(name)
        if not into or not into & walked.foreign_kwargs:
            return False
        return _reads_in_text(self.ctx.text, name) <= walked.entry_reads.get(name, 0)

    def leave_DictElement(self, original: cst.DictElement, updated: cst.DictElement) -> cst.DictElement:
        # {"device": "cuda"} / {"dist_backend": "nccl"}
        key = string_value(original.key)
        if key is None:
            return updated
        if DEVICE_NAME_RE.search(key):
            owner = self._dict_owner.get(id(original)) if self._dict_owner else None
            if owner is not None and self._is_rewritable_literal(updated.value) \
                    and self._entries_for_foreign_library(owner):
                self._settled(original.value)  # another library's device (NPU303 at its import)
                return updated
            new = self.device_literal(original.value, updated.value)
        elif BACKEND_NAME_RE.search(key):
            new = self.backend_literal(original.value, updated.value)
        else:
            return updated
        return updated.with_changes(value=new) if new is not updated.value else updated
