"""Rules of a runtime profile, read from ``edgeplan/data/kernel_rules/*.json``, and node labels to look them up.

Each rule file holds one runtime family (``torch``, ``onnxruntime``, ``tflite-gpu``, ``litert``) and its profiles; a
table of the file maps a node's label (``activation:relu``, ``pool2d:max``) or its kind (``conv2d``) to an entry.
Loads without torch or onnx.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from edgeplan.errors import InvalidInputError
from edgeplan.ir.graph import Node
from edgeplan.ir.ops import ActivationAttrs, EltwiseAttrs, OpKind

__all__ = ["Fusion", "KernelRules", "label_keys", "load_rules", "matches", "node_label", "profiles", "rule_files"]

#: Rule files, one per runtime family, under ``edgeplan/data/kernel_rules``.
_RULE_FILES = ("torch.json", "onnxruntime.json", "tflite_gpu.json", "litert.json")


@dataclass(frozen=True)
class Fusion:
    """Absorb ``next`` into a kernel led by one of ``lead`` whose last op is one of ``last``.

    With ``same_input``, ``next``'s other input must be the kernel's own input (``x * sigmoid(x)``).
    """

    name: str
    lead: frozenset[str]
    last: frozenset[str]
    next: frozenset[str]
    kind: str | None
    same_input: bool = False


@dataclass(frozen=True)
class KernelRules:
    """The rules of one runtime profile, read from its family's JSON file by :func:`load_rules`.

    Parameters
    ----------
    profile, family
        The profile name and its family (``torch``, ``onnxruntime``, ``tflite-gpu``, ``litert``).
    data
        The family's whole rule file (read-only use).
    settings
        The profile's own entry of the rule file.
    """

    profile: str
    family: str
    data: Mapping[str, Any]
    settings: Mapping[str, Any]

    def fusions(self, key: str) -> tuple[Fusion, ...]:
        """The fusion rules under ``key`` (``fusions``, ``converter_folds``)."""
        return tuple(
            Fusion(
                f["name"], frozenset(f["lead"]), frozenset(f["last"]), frozenset(f["next"]), f.get("kind"),
                bool(f.get("same_input", False)),
            )
            for f in self.data.get(key, ())
        )

    def lookup(self, table: str, node: Node) -> str:
        """The entry of ``table`` for ``node``: by its full label, its kind and sub-kind, then its kind alone."""
        entries: Mapping[str, str] = self.data[table]
        for key in label_keys(node):
            if key in entries:
                return entries[key]
        raise InvalidInputError(
            f"kernel rules {self.family!r} have no {table!r} entry for node {node.name!r} ({node_label(node)}); "
            f"add one of {list(label_keys(node))} to edgeplan/data/kernel_rules"
        )


@cache
def rule_files() -> dict[str, dict[str, Any]]:
    """Every rule file by file name (``tflite_gpu.json``), read once."""
    folder = resources.files("edgeplan.data") / "kernel_rules"
    return {name: json.loads((folder / name).read_text(encoding="utf-8")) for name in _RULE_FILES}


def _profiles() -> dict[str, str]:
    return {p: name for name, data in rule_files().items() for p in data["profiles"]}


def profiles() -> tuple[str, ...]:
    """Names of every runtime profile with rules (``torch-eager``, ``onnxruntime``, ``tflite-gpu-mali``, ...)."""
    return tuple(sorted(_profiles()))


def load_rules(profile: str) -> KernelRules:
    """The rules of ``profile``, read from ``edgeplan/data/kernel_rules``.

    Raises
    ------
    InvalidInputError
        For an unknown profile (the message lists the known ones).
    """
    files = _profiles()
    if profile not in files:
        raise InvalidInputError(f"unknown runtime profile {profile!r}; known profiles: {', '.join(sorted(files))}")
    data = rule_files()[files[profile]]
    return KernelRules(profile, data["family"], data, data["profiles"][profile])


# ---------------------------------------------------------------------------------------------------------------
# Node labels
# ---------------------------------------------------------------------------------------------------------------


def _sub_kind(node: Node) -> str | None:
    a = node.attrs
    if isinstance(a, ActivationAttrs):
        return a.fn.value
    if isinstance(a, EltwiseAttrs):
        return a.op.value
    mode = getattr(a, "mode", None)
    if node.kind in (OpKind.POOL2D, OpKind.ADAPTIVE_POOL2D, OpKind.GLOBAL_POOL) and mode is not None:
        return str(mode.value)
    if node.kind is OpKind.LINEAR and node.input_shapes and len(node.input_shapes[0]) > 2:
        return "batched"
    if node.kind is OpKind.UNFOLD:
        return str(mode)
    if node.kind is OpKind.CONVERT:
        return node.dtype.value
    return None


def label_keys(node: Node) -> tuple[str, ...]:
    """The keys a rule table may list ``node`` under, most specific first (``activation:relu``, ``activation``)."""
    sub = _sub_kind(node)
    return (f"{node.kind.value}:{sub}", node.kind.value) if sub else (node.kind.value,)


def node_label(node: Node) -> str:
    """The op a node runs, as kernel names spell it: the activation or element-wise op, else the kind."""
    if isinstance(node.attrs, (ActivationAttrs, EltwiseAttrs)):
        return label_keys(node)[0].split(":", 1)[1]
    return node.kind.value


def matches(node: Node, labels: frozenset[str]) -> bool:
    """True when one of ``node``'s keys (see :func:`label_keys`) is in ``labels``."""
    return any(k in labels for k in label_keys(node))
