"""Rewriting string literals that are device strings, backend names or env-var names,
keeping the user's quotes and prefixes. Only whole literals (or the leading text of an
f-string / format template) are touched, never substrings of other text."""

from __future__ import annotations

import re
from typing import Callable, Optional

import libcst as cst

# What may follow the device type in a device string: nothing, ":0", a placeholder that a
# format operation fills with an index ("cuda:%d", "cuda:{}", "cuda:{rank}"), or a bare ":"
# (the prefix in `device.startswith("cuda:")`).
_INDEX = r"(?::(?:\d+|%d|%s|%i|\{\}|\{[A-Za-z_][A-Za-z0-9_.]*\}|\{\d+\})?)?"


def string_value(node: cst.BaseExpression) -> Optional[str]:
    """The value of a plain (non-byte, non-f) string literal whose source has no escapes."""
    if not isinstance(node, cst.SimpleString):
        return None
    prefix = node.prefix.lower()
    if "b" in prefix:
        return None
    body = node.value[len(node.prefix) + len(node.quote) : -len(node.quote)]
    if "\\" in body:
        return None
    return body


def with_body(node: cst.SimpleString, body: str) -> cst.SimpleString:
    return node.with_changes(value=f"{node.prefix}{node.quote}{body}{node.quote}")


class LiteralRewriter:
    """Rewrites the first word of a literal using `mapping` (e.g. {"cuda": "npu"}).

    `index=True` allows a device index after the word ("cuda:0"); `ignore_case` maps
    "NCCL" to "HCCL" too (keeping the case style).
    """

    def __init__(self, mapping: dict, index: bool, ignore_case: bool = False) -> None:
        self.mapping = mapping
        words = "|".join(re.escape(w) for w in sorted(mapping, key=len, reverse=True))
        flags = re.IGNORECASE if ignore_case else 0
        self._exact = re.compile(rf"^({words}){_INDEX if index else ''}$", flags)
        self._fstring_head = re.compile(rf"^({words}):$", flags) if index else None
        # Device strings (the rewriters with an index): a dict holds them only when keyed by
        # devices. A backend-named dict holds backends whatever its keys (`{"name": "nccl"}`).
        self._dict_keyed_by_device = index

    def _replace_word(self, text: str) -> Optional[str]:
        m = self._exact.match(text)
        if not m:
            return None
        word = m.group(1)
        new = self.mapping.get(word) or self.mapping.get(word.lower())
        if new is None:
            return None
        if word.isupper():
            new = new.upper()
        return new + text[len(word) :]

    def _rewrite_children(self, node: cst.BaseExpression, element: bool, *fields: str) -> Optional[cst.BaseExpression]:
        """`node` with the literals in its `fields` rewritten; None when none changed."""
        new = {name: self.rewrite(getattr(node, name), element) for name in fields}
        if all(value is None for value in new.values()):
            return None
        return node.with_changes(**{name: value or getattr(node, name) for name, value in new.items()})

    def rewrite(self, node: cst.BaseExpression, element: bool = False) -> Optional[cst.BaseExpression]:
        """A rewritten copy of a device-position expression, or None when nothing applies.

        A container holds devices one level deep: the elements of a list/tuple/set, the keys
        and values of a dict (for devices: keyed by devices, `{"cuda:1": "cuda:0"}`); `element`:
        `node` is such an element, and a container there is something else (`device={"from":
        "cuda"}`, `{"device": [{"a": "cuda"}]}` hold no device)."""
        if type(node) not in _REWRITTEN_TYPES:
            return None  # (most expressions asked about: names, attributes, numbers)
        if element and isinstance(node, (cst.Dict, cst.List, cst.Tuple, cst.Set)):
            return None
        if isinstance(node, cst.SimpleString):
            body = string_value(node)
            if body is None:
                return None
            new = self._replace_word(body)
            return with_body(node, new) if new is not None else None
        if isinstance(node, cst.FormattedString) and self._fstring_head is not None:
            # f"cuda:{rank}" -- the text before the first placeholder is the device type.
            parts = list(node.parts)
            if len(parts) >= 2 and isinstance(parts[0], cst.FormattedStringText) and isinstance(
                parts[1], cst.FormattedStringExpression
            ):
                head = parts[0].value
                if self._fstring_head.match(head) and all(
                    not isinstance(p, cst.FormattedStringText) for p in parts[2:]
                ):
                    new = self._replace_word(head[:-1])
                    if new is not None:
                        parts[0] = parts[0].with_changes(value=new + ":")
                        return node.with_changes(parts=parts)
            return None
        if isinstance(node, cst.IfExp):
            return self._rewrite_children(node, element, "body", "orelse")
        if isinstance(node, cst.BooleanOperation):
            return self._rewrite_children(node, element, "left", "right")
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.Add, cst.Modulo)):
            # "cuda:" + str(rank)   /   "cuda:%d" % rank
            left = node.left
            if isinstance(left, cst.SimpleString):
                body = string_value(left)
                if body is not None and isinstance(node.operator, cst.Add) and body.endswith(":"):
                    new = self._replace_word(body[:-1])
                    if new is not None:
                        return node.with_changes(left=with_body(left, new + ":"))
                if isinstance(node.operator, cst.Modulo):
                    new_left = self.rewrite(left)
                    if new_left is not None:
                        return node.with_changes(left=new_left)
            if not element and _joins_collections(node):
                # DEVICES + ["cuda"]: a collection of devices, joined (its literal parts)
                return self._rewrite_children(node, False, "left", "right")
            return None
        if type(node) is cst.Call:
            return self.rewrite_call(node)
        if isinstance(node, cst.Dict):
            # map_location={"cuda:1": "cuda:0"}, {"cuda": f, "cpu": g, "default": h}: keyed by
            # devices (a key that names one), not `{"from": "cuda"}`
            if self._dict_keyed_by_device and not any(
                    isinstance(el, cst.DictElement) and _names_device(el.key) for el in node.elements):
                return None
            changed = False
            elements = []
            for el in node.elements:
                if isinstance(el, cst.DictElement):
                    k = self.rewrite(el.key, element=True)
                    v = self.rewrite(el.value, element=True)
                    if k is not None or v is not None:
                        changed = True
                        el = el.with_changes(key=k or el.key, value=v or el.value)
                elements.append(el)
            return node.with_changes(elements=elements) if changed else None
        if isinstance(node, (cst.List, cst.Tuple, cst.Set)):
            changed = False
            items = []
            for item in node.elements:
                if isinstance(item, cst.Element):
                    v = self.rewrite(item.value, element=True)
                    if v is not None:
                        changed = True
                        item = item.with_changes(value=v)
                items.append(item)
            return node.with_changes(elements=items) if changed else None
        return None


    def rewrite_call(self, node: cst.Call) -> Optional[cst.BaseExpression]:
        """`rewrite` of a call: `"cuda:{}".format(rank)` (a subclass adds more: the torch pass's
        lookups with a default, codemods/torch/literals.py)."""
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "format" \
                and isinstance(node.func.value, cst.SimpleString):
            new_value = self.rewrite(node.func.value)
            if new_value is not None:
                return node.with_changes(func=node.func.with_changes(value=new_value))
        return None


# The expressions `LiteralRewriter.rewrite` can rewrite, told by identity: libcst's node classes
# are final, and an isinstance() on one goes through ABCMeta (a Python call; ten of them for
# each device position that holds none of these, 230,000 on transformers' models).
_REWRITTEN_TYPES = frozenset({cst.SimpleString, cst.FormattedString, cst.IfExp, cst.BooleanOperation,
                              cst.BinaryOperation, cst.Call, cst.Dict, cst.List, cst.Tuple, cst.Set})

# The device types a dict's key may name for its values to be devices (`{"cuda:1": "cuda:0"}`).
_DEVICE_TYPES = frozenset({"cuda", "gpu", "cpu", "mps", "xla", "meta", "npu", "xpu", "hpu", "ipu"})


def _joins_collections(node: cst.BaseExpression) -> bool:
    """`a + ["cuda"] + b`: a `+` chain with a list or tuple literal in it."""
    if isinstance(node, (cst.List, cst.Tuple)):
        return True
    return (isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add)
            and (_joins_collections(node.left) or _joins_collections(node.right)))


def _names_device(key: Optional[cst.BaseExpression]) -> bool:
    value = string_value(key) if key is not None else None
    return value is not None and value.split(":", 1)[0].lower() in _DEVICE_TYPES


def rewrite_in_place(
    original: cst.BaseExpression,
    updated: cst.BaseExpression,
    rewriter: LiteralRewriter,
    record: Callable[[cst.BaseExpression, cst.BaseExpression, cst.BaseExpression], None],
) -> cst.BaseExpression:
    """Apply `rewriter` to `updated`; on change, `record(original, updated, new)` and return new."""
    new = rewriter.rewrite(updated)
    if new is None:
        return updated
    record(original, updated, new)
    return new
