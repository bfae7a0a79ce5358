"""Kernel deduction: which kernels a runtime really executes for a :class:`~edgeplan.ir.Graph`.

A runtime does not run the IR node by node: an exporter or converter folds batch norm into the convolution before
it and drops dropout, the runtime fuses an activation (or a residual add) into the convolution, and picks one of
several kernels for a convolution (li2023 §3.2, §4.1). This pass deduces that list of kernels from the IR alone,
by rules kept as data per runtime family in ``edgeplan/data/kernel_rules/*.json``:

=========================  ==================================================================================
profile                    what it models
=========================  ==================================================================================
``torch-eager``            eager PyTorch in eval mode: one aten operator per node, no fusion, batch norm not
                           folded; views (flatten, reshape, permute, ...) and eval dropout run but move no data
``onnxruntime``            edgeplan's ONNX export + ONNX Runtime CPU graph optimizations without NCHWc (ARM64,
                           x86-64 without AVX2, or ``ORT_ENABLE_EXTENDED``): Conv+BatchNorm folding,
                           Conv+activation -> ``FusedConv``, Gemm+activation -> ``FusedGemm``, SiLU -> ``QuickGelu``
``onnxruntime-nchwc8/16``  the default level (``ORT_ENABLE_ALL``) on x86-64 with AVX2 / AVX-512F: as above, then
                           ORT's NCHWc layout transform (Conv+Add+activation in one ``nchwc.Conv``, batch norm as
                           a 1x1 depthwise NCHWc conv, ``ReorderInput``/``ReorderOutput`` kernels at the borders)
``tflite-gpu-VENDOR``      the TFLite GPU delegate (li2023 Alg. 3.1 fusion, then Alg. 3.2 kernel selection among
                           Conv2D, Winograd, GroupedConv2D) for ``adreno`` (6xx), ``adreno5xx``, ``mali``,
                           ``powervr``, ``amd``
=========================  ==================================================================================

Every IR node other than the graph inputs ends in exactly one :class:`Kernel` or in
:attr:`KernelDeduction.eliminated` with the reason; :func:`deduce_kernels` checks this before it returns. Kernels
a runtime inserts that no IR node stands for (ORT's reorders) have no nodes.

:func:`compare_kernels` compares a deduction with what a runtime reports, and :func:`check_onnxruntime` does the
whole comparison against ONNX Runtime's optimized graph of an ONNX file (onnx and onnxruntime imported lazily).
Loads without torch or onnx.
"""

from __future__ import annotations

import json
import math
import tempfile
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from edgeplan.errors import InvalidInputError, UnsupportedOperatorError
from edgeplan.ir.graph import Graph, Node, Ref
from edgeplan.ir.ops import ActivationAttrs, ConvAttrs, EltwiseAttrs, OpKind

__all__ = [
    "Kernel",
    "KernelDeduction",
    "KernelMismatch",
    "KernelRules",
    "check_onnxruntime",
    "compare_kernels",
    "deduce_kernels",
    "load_rules",
    "node_label",
    "onnxruntime_kernels",
    "profiles",
    "select_tflite_conv_kernel",
]

#: Rule files, one per runtime family, under ``edgeplan/data/kernel_rules``.
_RULE_FILES = ("torch.json", "onnxruntime.json", "tflite_gpu.json")


@dataclass(frozen=True)
class Kernel:
    """One kernel the runtime executes.

    Parameters
    ----------
    name
        The IR ops it runs, joined by ``+`` (e.g. ``conv2d+batch_norm+relu``; see :func:`node_label`), or the
        runtime's own name for a kernel no IR node stands for (``ReorderOutput``).
    kind
        The runtime's kernel kind: an aten operator (``aten::conv2d``), an ONNX Runtime op type with its domain
        (``com.microsoft.FusedConv``), a TFLite GPU kernel (``Winograd``).
    nodes
        The IR nodes it covers, in execution order; empty for a kernel the runtime inserts (a layout reorder).
    noop
        True when the runtime dispatches the operator but no data is computed or moved (a view, eval dropout).
    """

    name: str
    kind: str
    nodes: tuple[str, ...]
    noop: bool = False


@dataclass(frozen=True)
class KernelDeduction:
    """The kernels a runtime profile executes for a graph, and the IR nodes it does not execute at all.

    Parameters
    ----------
    graph
        Name of the graph.
    profile
        The runtime profile (see :func:`profiles`).
    kernels
        Kernels in execution order.
    eliminated
        ``(node, reason)`` for every IR node that no kernel runs (dropout removed by an exporter, a constant).
    """

    graph: str
    profile: str
    kernels: tuple[Kernel, ...]
    eliminated: tuple[tuple[str, str], ...] = ()

    def kernel_of(self, node: str) -> Kernel | None:
        """The kernel that runs IR node ``node``; None when it was eliminated or is a graph input."""
        return self._by_node.get(node)

    def counts(self) -> dict[str, int]:
        """Number of kernels per kind."""
        return dict(Counter(k.kind for k in self.kernels))

    @property
    def _by_node(self) -> dict[str, Kernel]:
        return {n: k for k in self.kernels for n in k.nodes}


@dataclass(frozen=True)
class KernelMismatch:
    """One disagreement between deduced and observed kernels; ``message`` says it in words."""

    what: str
    kind: str
    deduced: int | tuple[str, ...]
    observed: int | tuple[str, ...]
    message: str


# ---------------------------------------------------------------------------------------------------------------
# Rules
# ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Fusion:
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
        The profile name and its family (``torch``, ``onnxruntime``, ``tflite-gpu``).
    data
        The family's whole rule file (read-only use).
    settings
        The profile's own entry of the rule file.
    """

    profile: str
    family: str
    data: Mapping[str, Any]
    settings: Mapping[str, Any]

    def fusions(self, key: str) -> tuple[_Fusion, ...]:
        """The fusion rules under ``key`` (``fusions``, ``converter_folds``)."""
        return tuple(
            _Fusion(
                f["name"], frozenset(f["lead"]), frozenset(f["last"]), frozenset(f["next"]), f.get("kind"),
                bool(f.get("same_input", False)),
            )
            for f in self.data.get(key, ())
        )

    def lookup(self, table: str, node: Node) -> str:
        """The entry of ``table`` for ``node``: by its full label, its kind and sub-kind, then its kind alone."""
        entries: Mapping[str, str] = self.data[table]
        for key in _label_keys(node):
            if key in entries:
                return entries[key]
        raise InvalidInputError(
            f"kernel rules {self.family!r} have no {table!r} entry for node {node.name!r} ({node_label(node)}); "
            f"add one of {list(_label_keys(node))} to edgeplan/data/kernel_rules"
        )


@cache
def _rule_files() -> dict[str, dict[str, Any]]:
    folder = resources.files("edgeplan.data") / "kernel_rules"
    return {name: json.loads((folder / name).read_text(encoding="utf-8")) for name in _RULE_FILES}


def _profiles() -> dict[str, str]:
    return {p: name for name, data in _rule_files().items() for p in data["profiles"]}


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
    data = _rule_files()[files[profile]]
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
    return None


def _label_keys(node: Node) -> tuple[str, ...]:
    sub = _sub_kind(node)
    return (f"{node.kind.value}:{sub}", node.kind.value) if sub else (node.kind.value,)


def node_label(node: Node) -> str:
    """The op a node runs, as kernel names spell it: the activation or element-wise op, else the kind."""
    if isinstance(node.attrs, (ActivationAttrs, EltwiseAttrs)):
        return _label_keys(node)[0].split(":", 1)[1]
    return node.kind.value


def _matches(node: Node, labels: frozenset[str]) -> bool:
    return any(k in labels for k in _label_keys(node))


# ---------------------------------------------------------------------------------------------------------------
# Groups of IR nodes (kernels under construction)
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class _Group:
    """Mutable kernel under construction: IR nodes in order, runtime kind, and NCHWc state."""

    nodes: list[Node]
    kind: str
    activation: bool = False
    summed: bool = False
    runtime_name: str = ""
    noop: bool = False

    @property
    def lead(self) -> Node:
        return self.nodes[0]

    @property
    def last(self) -> Node:
        return self.nodes[-1]

    @property
    def outputs(self) -> tuple[Ref, ...]:
        return tuple(Ref(self.last.name, i) for i in range(len(self.last.output_shapes)))

    def inputs(self) -> list[Ref]:
        inside = {n.name for n in self.nodes}
        return [r for n in self.nodes for r in n.inputs if r.node not in inside]

    def to_kernel(self) -> Kernel:
        name = self.runtime_name or "+".join(node_label(n) for n in self.nodes)
        return Kernel(name, self.kind, tuple(n.name for n in self.nodes), self.noop)


def _split_eliminated(graph: Graph, rules: KernelRules) -> tuple[list[Node], list[tuple[str, str]]]:
    """Graph nodes that run (inputs excluded) and ``(node, reason)`` for those the rules eliminate."""
    reasons: Mapping[str, str] = rules.data.get("eliminated", {})
    kept, gone = [], []
    for n in graph.nodes:
        if n.kind is OpKind.INPUT:
            continue
        if n.kind.value in reasons:
            gone.append((n.name, reasons[n.kind.value]))
        else:
            kept.append(n)
    return kept, gone


def _bypass(graph: Graph, gone: Iterable[str]) -> dict[Ref, Ref]:
    """For an eliminated identity node, the tensor that replaces its output (followed through chains)."""
    gone_set = set(gone)
    alias: dict[Ref, Ref] = {}
    for n in graph.nodes:
        if n.name in gone_set and n.inputs:
            src = n.inputs[0]
            alias[Ref(n.name, 0)] = alias.get(src, src)
    return alias


def _fuse(groups: list[_Group], rules: Sequence[_Fusion], graph: Graph, alias: Mapping[Ref, Ref]) -> list[_Group]:
    """Apply producer-consumer fusion rules: absorb a single-use consumer into the kernel that produces its input.

    A rule fires when the kernel's lead and last ops match, its output has exactly one use (not a graph output),
    and that user is a kernel of one node that matches ``next``. Rules are applied in order, each to a fixed point.
    """
    uses = _resolved_uses(graph, alias)
    for rule in rules:
        owner = {n.name: g for g in groups for n in g.nodes}
        merged: set[int] = set()
        for g in groups:
            if id(g) in merged:
                continue
            while _matches(g.lead, rule.lead) and _matches(g.last, rule.last) and len(g.last.output_shapes) == 1:
                users = uses.get(Ref(g.last.name, 0), [])
                if len(users) != 1 or users[0][0] not in owner:
                    break
                nxt = owner[users[0][0]]
                if nxt is g or len(nxt.nodes) != 1 or not _matches(nxt.lead, rule.next):
                    break
                if rule.same_input and not _shares_input(g, nxt.lead, alias):
                    break
                g.nodes.append(nxt.lead)
                g.kind = rule.kind or g.kind
                owner[nxt.lead.name] = g
                merged.add(id(nxt))
        groups = [g for g in groups if id(g) not in merged]
    return groups


def _shares_input(g: _Group, nxt: Node, alias: Mapping[Ref, Ref]) -> bool:
    """True when ``nxt`` uses the last output of ``g`` and, as its other operand, ``g``'s first input."""
    mine = {alias.get(r, r) for r in g.lead.inputs[:1]}
    others = {alias.get(r, r) for r in nxt.inputs} - {Ref(g.last.name, 0)}
    return len(nxt.inputs) == 2 and others == mine


def _resolved_uses(graph: Graph, alias: Mapping[Ref, Ref]) -> dict[Ref, list[tuple[str, int]]]:
    """Uses of each tensor after eliminated identity nodes are bypassed (their users use the source)."""
    uses: dict[Ref, list[tuple[str, int]]] = {}
    gone = {r.node for r in alias}
    for n in graph.nodes:
        if n.name in gone:
            continue
        for i, r in enumerate(n.inputs):
            uses.setdefault(alias.get(r, r), []).append((n.name, i))
    for r in graph.outputs:
        uses.setdefault(alias.get(r, r), []).append(("<graph output>", 0))
    return uses


# ---------------------------------------------------------------------------------------------------------------
# Profiles
# ---------------------------------------------------------------------------------------------------------------


def deduce_kernels(graph: Graph, profile: str | KernelRules) -> KernelDeduction:
    """Deduce the kernels that runtime ``profile`` executes for ``graph``.

    Parameters
    ----------
    graph
        A validated graph (any frontend).
    profile
        A profile name (see the module docstring; :func:`profiles` lists them) or rules from :func:`load_rules`.

    Returns
    -------
    KernelDeduction
        Kernels in execution order, and the eliminated nodes with their reasons. Every node but the graph
        inputs is in exactly one of them.

    Raises
    ------
    InvalidInputError
        Unknown profile, or a rule file without an entry for a node's kind.
    UnsupportedOperatorError
        An op the runtime cannot run (e.g. channel shuffle on the TFLite GPU delegate).
    """
    rules = load_rules(profile) if isinstance(profile, str) else profile
    kept, gone = _split_eliminated(graph, rules)
    alias = _bypass(graph, (name for name, _ in gone))
    if rules.family == "torch":
        groups = _torch_groups(kept, rules)
    elif rules.family == "onnxruntime":
        groups = _onnxruntime_groups(graph, kept, rules, alias)
    elif rules.family == "tflite-gpu":
        groups = _tflite_groups(graph, kept, rules, alias)
    else:
        raise InvalidInputError(f"kernel rules of profile {rules.profile!r} name an unknown family {rules.family!r}")
    result = KernelDeduction(graph.name, rules.profile, tuple(g.to_kernel() for g in groups), tuple(gone))
    _check_partition(graph, result)
    return result


def _check_partition(graph: Graph, result: KernelDeduction) -> None:
    """Post-condition: every non-input node is in exactly one kernel or eliminated."""
    seen = Counter([n for k in result.kernels for n in k.nodes] + [n for n, _ in result.eliminated])
    for n in graph.nodes:
        if n.kind is not OpKind.INPUT and seen[n.name] != 1:
            raise InvalidInputError(
                f"kernel rules of profile {result.profile!r} put node {n.name!r} of graph {graph.name!r} in "
                f"{seen[n.name]} kernels instead of one; fix edgeplan/data/kernel_rules"
            )


def _torch_groups(kept: Sequence[Node], rules: KernelRules) -> list[_Group]:
    noop: Mapping[str, str] = rules.data["noop"]
    from_source = bool(rules.settings.get("kind_from_aten_source"))
    groups = []
    for n in kept:
        if from_source and n.source.startswith("aten."):
            kind = "aten::" + n.source.split(".")[1]
        else:
            kind = _fill(rules.lookup("kinds", n), n)
        groups.append(_Group([n], kind, noop=n.kind.value in noop))
    return groups


def _fill(template: str, node: Node) -> str:
    """Fill ``{fn}``, ``{op}``, ``{mode}``, ``{operator}`` of a kind template from the node's attributes."""
    values = {k: getattr(node.attrs, k, "") for k in ("fn", "op", "mode", "operator")}
    return template.format(**{k: getattr(v, "value", v) for k, v in values.items()})


def _onnxruntime_groups(
    graph: Graph, kept: Sequence[Node], rules: KernelRules, alias: Mapping[Ref, Ref]
) -> list[_Group]:
    groups = [_Group([n], _fill(rules.lookup("kinds", n), n)) for n in kept]
    groups = _fuse(groups, rules.fusions("fusions"), graph, alias)
    for g in groups:
        g.activation = g.kind == "com.microsoft.FusedConv"
    block = rules.settings.get("nchwc_block_size")
    if block:
        groups = _Nchwc(graph, rules.data["nchwc"], int(block), alias).run(groups)
    return groups


# ---------------------------------------------------------------------------------------------------------------
# ONNX Runtime NCHWc layout transform (level 3)
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class _NchwcArg:
    """An NCHWc tensor: its producing kernel, its uses when created, uses not yet converted, logical channels."""

    group: _Group
    starting_uses: int
    remaining_uses: int
    channels: int
    shape: tuple[int, ...]


class _Nchwc:
    """Simulates ORT's NchwcTransformer over the kernels of the level-1/2 fusions (see ``nchwc`` in the rules)."""

    def __init__(self, graph: Graph, rules: Mapping[str, Any], block: int, alias: Mapping[Ref, Ref]) -> None:
        self.rules = rules
        self.block = block
        self.alias = alias
        self.graph = graph
        self.uses: Counter[Ref] = Counter()
        self.args: dict[Ref, _NchwcArg] = {}
        self.reordered: dict[Ref, _Group] = {}
        self.out: list[_Group] = []

    def run(self, groups: list[_Group]) -> list[_Group]:
        for g in groups:  # uses per kernel: x * sigmoid(x) as one QuickGelu uses x once
            self.uses.update(list(dict.fromkeys(self._ref(r) for r in g.inputs())))
        self.uses.update(self._ref(r) for r in self.graph.outputs)
        for g in groups:
            self._transform(g)
            if g.nodes:
                self.out.append(g)
        for ref, arg in self.args.items():
            if arg.remaining_uses > 0:
                self.out.append(_Group([], self.rules["reorder_output"], runtime_name=f"ReorderOutput({ref})"))
        return self.out

    def _ref(self, ref: Ref) -> Ref:
        return self.alias.get(ref, ref)

    def _new_arg(self, g: _Group, channels: int, shape: tuple[int, ...]) -> None:
        out = g.outputs[0]
        n_uses = self.uses[out]
        self.args[out] = _NchwcArg(g, n_uses, n_uses, channels, shape)

    def _use_input(self, g: _Group, ref: Ref) -> None:
        """Consume ``ref`` in NCHWc layout: directly when it is NCHWc, else through one shared ReorderInput."""
        arg = self.args.get(ref)
        if arg is not None:
            arg.remaining_uses -= 1
        elif ref not in self.reordered:
            reorder = _Group([], self.rules["reorder_input"], runtime_name=f"ReorderInput({ref})")
            self.reordered[ref] = reorder
            self.out.append(reorder)

    def _transform(self, g: _Group) -> None:
        r = self.rules
        if g.kind in r["conv_kinds"]:
            self._conv(g)
        elif g.kind in r["pool_kinds"]:
            self._pool(g)
        else:
            refs = list(dict.fromkeys(self._ref(x) for x in g.inputs()))
            if refs and all(x in self.args for x in refs):
                self._on_nchwc_inputs(g, refs)

    def _conv(self, g: _Group) -> None:
        a = g.lead.attrs
        if not isinstance(a, ConvAttrs):  # a conv kind always comes from a conv2d node
            return
        if a.groups > 1 and not a.depthwise and (
            (a.in_channels // a.groups) % self.block or (a.out_channels // a.groups) % self.block
        ):
            return
        x = self._ref(g.lead.inputs[0])
        if not (a.groups == 1 and a.in_channels < self.block):
            self._use_input(g, x)
        g.kind = self.rules["conv"]
        self._new_arg(g, a.out_channels, g.last.output_shapes[0])

    def _pool(self, g: _Group) -> None:
        shape = g.lead.input_shapes[0]
        if len(shape) != 4 or shape[1] % self.block:
            return
        self._use_input(g, self._ref(g.lead.inputs[0]))
        g.kind = self.rules["pool_prefix"] + g.kind
        self._new_arg(g, shape[1], g.last.output_shapes[0])

    def _on_nchwc_inputs(self, g: _Group, refs: list[Ref]) -> None:
        r = self.rules
        args = [self.args[x] for x in refs]
        if g.kind in r["sum_kinds"] or g.kind in r["elementwise_kinds"]:
            if len(args) != 2 or any(x.channels != args[0].channels or x.shape != args[0].shape for x in args):
                return
            for x in args:
                x.remaining_uses -= 1
            if g.kind in r["sum_kinds"] and len(args) == 2 and self._fuse_sum(g, args):
                return
            self._new_arg(g, args[0].channels, args[0].shape)
        elif g.kind in r["activation_kinds"]:
            args[0].remaining_uses -= 1
            conv = args[0].group
            if conv.kind == r["conv"] and args[0].starting_uses == 1 and not conv.activation:
                self._absorb(conv, g, activation=True)
            else:
                self._new_arg(g, args[0].channels, args[0].shape)
        elif g.kind in r["unary_kinds"]:
            args[0].remaining_uses -= 1
            self._new_arg(g, args[0].channels, args[0].shape)
        elif g.kind in r["batch_norm_kinds"]:
            args[0].remaining_uses -= 1
            g.kind = r["conv"]
            self._new_arg(g, args[0].channels, args[0].shape)
        elif g.kind in r["concat_kinds"]:
            if getattr(g.lead.attrs, "axis", None) not in (1, -3) or any(x.channels % self.block for x in args):
                return
            for x in args:
                x.remaining_uses -= 1
            self._new_arg(g, sum(x.channels for x in args), g.last.output_shapes[0])

    def _fuse_sum(self, g: _Group, args: list[_NchwcArg]) -> bool:
        for x in args:
            conv = x.group
            if conv.kind == self.rules["conv"] and not conv.summed and x.starting_uses == 1 and not conv.activation:
                self._absorb(conv, g, summed=True)
                return True
        return False

    def _absorb(self, conv: _Group, g: _Group, activation: bool = False, summed: bool = False) -> None:
        """Fuse kernel ``g`` into NCHWc conv ``conv``; the conv's NCHWc output now stands for ``g``'s output."""
        old = self.args[conv.outputs[0]]
        conv.nodes.extend(g.nodes)
        conv.activation |= activation
        conv.summed |= summed
        g.nodes = []
        n_uses = self.uses[conv.outputs[0]]
        self.args[conv.outputs[0]] = _NchwcArg(conv, n_uses, n_uses, old.channels, old.shape)


# ---------------------------------------------------------------------------------------------------------------
# TFLite GPU delegate (li2023 Algorithms 3.1 and 3.2)
# ---------------------------------------------------------------------------------------------------------------


def _tflite_groups(graph: Graph, kept: Sequence[Node], rules: KernelRules, alias: Mapping[Ref, Ref]) -> list[_Group]:
    groups = []
    for n in kept:
        op_type = rules.lookup("types", n)
        if op_type == "UNSUPPORTED":
            raise UnsupportedOperatorError(
                node_label(n), n.name, f"the TFLite GPU delegate has no kernel for it (profile {rules.profile})"
            )
        groups.append(_Group([n], op_type))
    groups = _fuse(groups, rules.fusions("converter_folds"), graph, alias)
    groups = _merge_nodes(graph, groups, frozenset(rules.data["linkable"]), alias)
    vendor = rules.data["vendors"][rules.settings["vendor"]]
    for g in groups:
        g.kind = _tflite_kernel(g, rules.data, vendor)
    return groups


def _merge_nodes(
    graph: Graph, groups: list[_Group], linkable: frozenset[str], alias: Mapping[Ref, Ref]
) -> list[_Group]:
    """li2023 Algorithm 3.1 (TFLite ``MergeNodes``): fuse a linkable op into the op that produces its first input.

    ``cur`` (one output tensor) and the next op are merged when the next op is the only user of that tensor and
    uses it once, as its first input, is linkable (element-wise, one output), and all of its inputs are ready at
    ``cur``'s position. The merged op stays at ``cur``'s position and is tried again, so chains fuse. TFLite's
    ``IsReady`` checks every input of the next op (the paper's listing shows the first only, which is always
    ready); merging an op whose other input is produced later would run it before that input exists.
    """
    nodes = list(groups)
    ready = {Ref(n.name, 0) for n in graph.nodes if n.kind in (OpKind.INPUT, OpKind.CONSTANT)}
    i = 0
    while i < len(nodes):
        cur = nodes[i]
        ready.update(cur.outputs)
        if len(cur.outputs) != 1:
            i += 1
            continue
        out = cur.outputs[0]
        uses = [
            (j, k)
            for j in range(i + 1, len(nodes))
            for k, r in enumerate(nodes[j].inputs())
            if alias.get(r, r) == out
        ]
        if len(uses) != 1 or uses[0][1] != 0:
            i += 1
            continue
        nxt = nodes[uses[0][0]]
        if nxt.kind in linkable and len(nxt.outputs) == 1 and all(alias.get(r, r) in ready for r in nxt.inputs()):
            cur.nodes.extend(nxt.nodes)
            del nodes[uses[0][0]]
            continue  # try the merged node again (TFLite: i -= 1)
        i += 1
    return nodes


def select_tflite_conv_kernel(attrs: ConvAttrs, output_hw: tuple[int, int], vendor: str) -> str:
    """li2023 Algorithm 3.2: the TFLite GPU kernel of a convolution on a GPU of ``vendor``.

    Parameters
    ----------
    attrs
        The convolution.
    output_hw
        Output height and width.
    vendor
        A vendor of ``tflite_gpu.json`` (``adreno``, ``adreno5xx``, ``mali``, ``powervr``, ``amd``).

    Returns
    -------
    str
        ``DepthwiseConv2D``, ``GroupedConv2D``, ``Winograd`` or ``Conv2D``.
    """
    data = _rule_files()["tflite_gpu.json"]
    if vendor not in data["vendors"]:
        raise InvalidInputError(f"unknown GPU vendor {vendor!r}; known: {', '.join(data['vendors'])}")
    return _select_conv(attrs, output_hw, data, data["vendors"][vendor])


def _select_conv(a: ConvAttrs, output_hw: tuple[int, int], data: Mapping[str, Any], vendor: Mapping[str, int]) -> str:
    sel = data["conv_selection"]
    if a.depthwise:
        return str(data["kernels"]["depthwise"])
    mult = sel["group_channel_multiple"]
    # CheckGroupedConv2D: TFLite's weights hold the input channels of one group (OHWI, I = in / groups).
    if a.groups != 1 and (a.in_channels // a.groups) % mult == 0 and (a.out_channels // a.groups) % mult == 0:
        return "GroupedConv2D"
    if (
        a.groups != 1
        or list(a.kernel) != sel["winograd_kernel"]
        or list(a.stride) != sel["winograd_stride"]
        or list(a.dilation) != sel["winograd_dilation"]
    ):
        return "Conv2D"
    div, tile = sel["depth_divisor"], sel["tile"]
    src_depth, dst_depth = math.ceil(a.in_channels / div), math.ceil(a.out_channels / div)
    if src_depth < vendor["min_src_depth"] or dst_depth < vendor["min_dst_depth"]:
        return "Conv2D"
    total_tiles = math.ceil(output_hw[0] / tile) * math.ceil(output_hw[1] / tile)
    return "Winograd" if total_tiles >= vendor["min_total_tiles"] else "Conv2D"


def _tflite_kernel(g: _Group, data: Mapping[str, Any], vendor: Mapping[str, int]) -> str:
    lead = g.lead
    if isinstance(lead.attrs, ConvAttrs):
        out = lead.output_shapes[0]
        return _select_conv(lead.attrs, (out[2], out[3]), data, vendor)
    return str(data["kernels"].get(g.kind, g.kind))


# ---------------------------------------------------------------------------------------------------------------
# Checking against a runtime
# ---------------------------------------------------------------------------------------------------------------


def compare_kernels(
    deduced: KernelDeduction, observed: Sequence[Kernel], by_nodes: bool = True
) -> list[KernelMismatch]:
    """Compare deduced kernels with the kernels a runtime reports.

    Parameters
    ----------
    deduced
        From :func:`deduce_kernels`.
    observed
        The runtime's kernels (e.g. from :func:`onnxruntime_kernels`); their ``nodes`` name IR nodes when
        ``by_nodes``.
    by_nodes
        Also compare which IR nodes each kernel covers (needs IR node names shared with the runtime's graph, as
        for a graph imported from the same ONNX file). Kernels with no nodes are compared by count only.

    Returns
    -------
    list[KernelMismatch]
        Empty when they agree: per kind, the count differs; per kernel, a deduced group of IR nodes that the
        runtime does not run as one kernel (or runs as another kind), and the reverse.
    """
    found: list[KernelMismatch] = []
    mine, theirs = Counter(k.kind for k in deduced.kernels), Counter(k.kind for k in observed)
    for kind in sorted(set(mine) | set(theirs)):
        if mine[kind] != theirs[kind]:
            found.append(KernelMismatch(
                "count", kind, mine[kind], theirs[kind],
                f"{kind}: {mine[kind]} kernels deduced, {theirs[kind]} observed",
            ))
    if not by_nodes:
        return found
    seen = {frozenset(k.nodes): k for k in observed if k.nodes}
    for k in deduced.kernels:
        twin = seen.pop(frozenset(k.nodes), None) if k.nodes else None
        if k.nodes and twin is None:
            found.append(KernelMismatch(
                "grouping", k.kind, k.nodes, (), f"deduced {k.kind} over {list(k.nodes)} is not one observed kernel"
            ))
        elif twin is not None and twin.kind != k.kind:
            found.append(KernelMismatch(
                "kind", k.kind, k.nodes, twin.nodes, f"{list(k.nodes)}: deduced {k.kind}, observed {twin.kind}"
            ))
    for nodes, k in seen.items():
        found.append(KernelMismatch(
            "grouping", k.kind, (), tuple(sorted(nodes)), f"observed {k.kind} over {sorted(nodes)} was not deduced"
        ))
    return found


def onnxruntime_kernels(original: Any, optimized: Any) -> list[Kernel]:
    """The kernels of ONNX Runtime's optimized model, each with the original ONNX nodes it runs.

    Parameters
    ----------
    original, optimized
        The model given to ONNX Runtime and the one it wrote to ``SessionOptions.optimized_model_filepath``
        (paths or ``onnx.ModelProto``).

    Returns
    -------
    list[Kernel]
        One kernel per optimized node: ``kind`` is the op type prefixed by a non-default domain, ``nodes`` the
        original nodes between the kernel's inputs and outputs (found by following tensor names back; empty when
        ORT renamed the outputs, as in the NCHWc layout), ``name`` the optimized node's name.
    """
    import onnx

    orig = original if isinstance(original, onnx.ModelProto) else onnx.load(str(original))
    opt = optimized if isinstance(optimized, onnx.ModelProto) else onnx.load(str(optimized))
    producer = {t: n for n in orig.graph.node for t in n.output}
    kernels = []
    for n in opt.graph.node:
        kind = f"{n.domain}.{n.op_type}" if n.domain not in ("", "ai.onnx") else n.op_type
        if kind == "com.microsoft.nchwc.Conv" and len(n.input) > 3 and n.input[3]:
            kind += "+Sum"
        if any(a.name == "activation" for a in n.attribute) and kind.startswith("com.microsoft.nchwc.Conv"):
            kind += "+" + next(a.s.decode() for a in n.attribute if a.name == "activation")
        kernels.append(Kernel(n.name, kind, _covered(n, producer)))
    return kernels


def _covered(node: Any, producer: Mapping[str, Any]) -> tuple[str, ...]:
    stop = set(node.input)
    covered: list[str] = []
    stack = [t for t in node.output if t]
    while stack:
        p = producer.get(stack.pop())
        if p is None or p.name in covered:
            continue
        covered.append(p.name)
        stack.extend(t for t in p.input if t and t not in stop)
    return tuple(reversed(covered))


def _nchwc_signature(deduced: KernelDeduction) -> list[Kernel]:
    """The deduced kernels with ``+Sum`` and ``+Activation`` appended to NCHWc convolutions, as ORT reports them.

    ORT names an NCHWc convolution ``Conv`` whatever it absorbed; :func:`onnxruntime_kernels` appends the ``Sum``
    input and the ``activation`` attribute so that counts per kind also compare what each one fused.
    """
    return [replace(k, kind=_nchwc_kind(k)) for k in deduced.kernels]


def _nchwc_kind(k: Kernel) -> str:
    if k.kind != "com.microsoft.nchwc.Conv":
        return k.kind
    ops = k.name.split("+")
    kind = k.kind + ("+Sum" if "add" in ops else "")
    acts = {"relu": "Relu", "relu6": "Clip", "clip": "Clip", "sigmoid": "Sigmoid", "tanh": "Tanh",
            "leaky_relu": "LeakyRelu", "hardsigmoid": "HardSigmoid"}
    act = next((acts[o] for o in reversed(ops) if o in acts), None)
    return kind + (f"+{act}" if act else "")


def check_onnxruntime(
    graph: Graph, onnx_path: str | Path, profile: str = "onnxruntime", by_nodes: bool | None = None
) -> list[KernelMismatch]:
    """Run ONNX Runtime's graph optimizations on ``onnx_path`` and compare its kernels with the deduced ones.

    Parameters
    ----------
    graph
        The IR of the model in ``onnx_path`` (from the ONNX frontend for node-level comparison, or from the torch
        frontend for counts only).
    onnx_path
        The exported model, as given to ONNX Runtime.
    profile
        ``onnxruntime`` (compared with ORT at ``ORT_ENABLE_EXTENDED``, which is the default level's result on
        CPUs without NCHWc kernels) or ``onnxruntime-nchwc8``/``-nchwc16`` (compared at the default level,
        ``ORT_ENABLE_ALL``: right only on a CPU with that NCHWc block size).
    by_nodes
        Compare covered IR nodes too; by default when ``graph``'s node names are those of the ONNX file and the
        profile keeps ORT's tensor names (not NCHWc).

    Returns
    -------
    list[KernelMismatch]
        Empty when the deduction matches ONNX Runtime.
    """
    import onnx
    import onnxruntime as ort

    rules = load_rules(profile)
    if rules.family != "onnxruntime":
        raise InvalidInputError(f"check_onnxruntime needs an onnxruntime profile, got {profile!r}")
    nchwc = bool(rules.settings.get("nchwc_block_size"))
    original = onnx.load(str(onnx_path))
    if by_nodes is None:
        names = {n.name for n in original.graph.node}
        by_nodes = not nchwc and all(n.name in names for n in graph.nodes if n.kind is not OpKind.INPUT)
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "optimized.onnx"
        options = ort.SessionOptions()
        options.log_severity_level = 3
        options.optimized_model_filepath = str(out)
        options.graph_optimization_level = (
            ort.GraphOptimizationLevel.ORT_ENABLE_ALL if nchwc else ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        )
        ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
        observed = onnxruntime_kernels(original, out)
    deduced = deduce_kernels(graph, rules)
    if nchwc:
        deduced = KernelDeduction(deduced.graph, deduced.profile, tuple(_nchwc_signature(deduced)), deduced.eliminated)
    return compare_kernels(deduced, observed, by_nodes=by_nodes)
