"""ONNX Runtime's kernels for the ``onnxruntime`` and ``onnxruntime-nchwc8/16`` profiles (``onnxruntime.json``).

Levels 1 and 2 of ORT's CPU graph optimizations are fusion rules (Conv+BatchNorm folding, Conv+activation ->
``FusedConv``, Gemm+activation -> ``FusedGemm``, SiLU -> ``QuickGelu``); level 3 on x86-64 with AVX2 or AVX-512F
is the NCHWc layout transform, simulated by :class:`_Nchwc`. Pure: runs no runtime and loads without torch, onnx
or onnxruntime (running ORT to check a deduction is :mod:`edgeplan.measure.kernel_check`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from edgeplan.ir.graph import Graph, Node, Ref
from edgeplan.ir.kernels.groups import Group, fill, fuse
from edgeplan.ir.kernels.rules import KernelRules
from edgeplan.ir.ops import ConvAttrs

__all__ = ["onnxruntime_groups"]


def onnxruntime_groups(
    graph: Graph, kept: Sequence[Node], rules: KernelRules, alias: Mapping[Ref, Ref]
) -> list[Group]:
    """The kernels of an ``onnxruntime`` profile for the nodes ``kept``, in execution order.

    Parameters
    ----------
    graph
        The whole graph (for uses and graph outputs).
    kept
        Its nodes that run, from :func:`~edgeplan.ir.kernels.groups.split_eliminated`.
    rules
        Rules of an ``onnxruntime`` profile; an ``nchwc_block_size`` setting turns on the NCHWc transform.
    alias
        Eliminated identity nodes, from :func:`~edgeplan.ir.kernels.groups.bypass`.
    """
    groups = [Group([n], fill(rules.lookup("kinds", n), n)) for n in kept]
    groups = fuse(groups, rules.fusions("fusions"), graph, alias)
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

    group: Group
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
        self.reordered: dict[Ref, Group] = {}
        self.out: list[Group] = []

    def run(self, groups: list[Group]) -> list[Group]:
        for g in groups:  # uses per kernel: x * sigmoid(x) as one QuickGelu uses x once
            self.uses.update(list(dict.fromkeys(self._ref(r) for r in g.inputs())))
        self.uses.update(self._ref(r) for r in self.graph.outputs)
        for g in groups:
            self._transform(g)
            if g.nodes:
                self.out.append(g)
        for ref, arg in self.args.items():
            if arg.remaining_uses > 0:
                self.out.append(Group([], self.rules["reorder_output"], runtime_name=f"ReorderOutput({ref})"))
        return self.out

    def _ref(self, ref: Ref) -> Ref:
        return self.alias.get(ref, ref)

    def _new_arg(self, g: Group, channels: int, shape: tuple[int, ...]) -> None:
        out = g.outputs[0]
        n_uses = self.uses[out]
        self.args[out] = _NchwcArg(g, n_uses, n_uses, channels, shape)

    def _use_input(self, g: Group, ref: Ref) -> None:
        """Consume ``ref`` in NCHWc layout: directly when it is NCHWc, else through one shared ReorderInput."""
        arg = self.args.get(ref)
        if arg is not None:
            arg.remaining_uses -= 1
        elif ref not in self.reordered:
            reorder = Group([], self.rules["reorder_input"], runtime_name=f"ReorderInput({ref})")
            self.reordered[ref] = reorder
            self.out.append(reorder)

    def _transform(self, g: Group) -> None:
        r = self.rules
        if g.kind in r["conv_kinds"]:
            self._conv(g)
        elif g.kind in r["pool_kinds"]:
            self._pool(g)
        else:
            refs = list(dict.fromkeys(self._ref(x) for x in g.inputs()))
            if refs and all(x in self.args for x in refs):
                self._on_nchwc_inputs(g, refs)

    def _conv(self, g: Group) -> None:
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

    def _pool(self, g: Group) -> None:
        shape = g.lead.input_shapes[0]
        if len(shape) != 4 or shape[1] % self.block:
            return
        self._use_input(g, self._ref(g.lead.inputs[0]))
        g.kind = self.rules["pool_prefix"] + g.kind
        self._new_arg(g, shape[1], g.last.output_shapes[0])

    def _on_nchwc_inputs(self, g: Group, refs: list[Ref]) -> None:
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

    def _fuse_sum(self, g: Group, args: list[_NchwcArg]) -> bool:
        for x in args:
            conv = x.group
            if conv.kind == self.rules["conv"] and not conv.summed and x.starting_uses == 1 and not conv.activation:
                self._absorb(conv, g, summed=True)
                return True
        return False

    def _absorb(self, conv: Group, g: Group, activation: bool = False, summed: bool = False) -> None:
        """Fuse kernel ``g`` into NCHWc conv ``conv``; the conv's NCHWc output now stands for ``g``'s output."""
        old = self.args[conv.outputs[0]]
        conv.nodes.extend(g.nodes)
        conv.activation |= activation
        conv.summed |= summed
        g.nodes = []
        n_uses = self.uses[conv.outputs[0]]
        self.args[conv.outputs[0]] = _NchwcArg(conv, n_uses, n_uses, old.channels, old.shape)
