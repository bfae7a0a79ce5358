"""The common core of kernel deduction: groups of IR nodes (kernels under construction) and their fusion.

Every runtime family starts from one :class:`Group` per IR node that is not eliminated (:func:`split_eliminated`),
sees through eliminated identity nodes (:func:`bypass`) and fuses producer-consumer pairs by rules
(:func:`fuse`). Loads without torch or onnx.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from edgeplan.ir.graph import Graph, Node, Ref
from edgeplan.ir.kernels.result import Kernel
from edgeplan.ir.kernels.rules import Fusion, KernelRules, matches, node_label
from edgeplan.ir.ops import OpKind

__all__ = ["Group", "bypass", "fill", "fuse", "split_eliminated"]


@dataclass
class Group:
    """Mutable kernel under construction: IR nodes in order, runtime kind, and NCHWc state."""

    nodes: list[Node]
    kind: str
    activation: bool = False
    summed: bool = False
    runtime_name: str = ""
    noop: bool = False

    @property
    def lead(self) -> Node:
        """The first IR node."""
        return self.nodes[0]

    @property
    def last(self) -> Node:
        """The last IR node, whose outputs are the kernel's."""
        return self.nodes[-1]

    @property
    def outputs(self) -> tuple[Ref, ...]:
        """The kernel's output tensors."""
        return tuple(Ref(self.last.name, i) for i in range(len(self.last.output_shapes)))

    def inputs(self) -> list[Ref]:
        """Inputs of the kernel's nodes produced outside the kernel, in node order (repeats kept)."""
        inside = {n.name for n in self.nodes}
        return [r for n in self.nodes for r in n.inputs if r.node not in inside]

    def to_kernel(self) -> Kernel:
        """The finished :class:`Kernel`."""
        name = self.runtime_name or "+".join(node_label(n) for n in self.nodes)
        return Kernel(name, self.kind, tuple(n.name for n in self.nodes), self.noop)


def split_eliminated(graph: Graph, rules: KernelRules) -> tuple[list[Node], list[tuple[str, str]]]:
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


def bypass(graph: Graph, gone: Iterable[str]) -> dict[Ref, Ref]:
    """For an eliminated identity node, the tensor that replaces its output (followed through chains)."""
    gone_set = set(gone)
    alias: dict[Ref, Ref] = {}
    for n in graph.nodes:
        if n.name in gone_set and n.inputs:
            src = n.inputs[0]
            alias[Ref(n.name, 0)] = alias.get(src, src)
    return alias


def fill(template: str, node: Node) -> str:
    """Fill ``{fn}``, ``{op}``, ``{mode}``, ``{operator}`` of a kind template from the node's attributes."""
    values = {k: getattr(node.attrs, k, "") for k in ("fn", "op", "mode", "operator")}
    return template.format(**{k: getattr(v, "value", v) for k, v in values.items()})


def fuse(groups: list[Group], rules: Sequence[Fusion], graph: Graph, alias: Mapping[Ref, Ref]) -> list[Group]:
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
            while matches(g.lead, rule.lead) and matches(g.last, rule.last) and len(g.last.output_shapes) == 1:
                users = uses.get(Ref(g.last.name, 0), [])
                if len(users) != 1 or users[0][0] not in owner:
                    break
                nxt = owner[users[0][0]]
                if nxt is g or len(nxt.nodes) != 1 or not matches(nxt.lead, rule.next):
                    break
                if rule.same_input and not _shares_input(g, nxt.lead, alias):
                    break
                g.nodes.append(nxt.lead)
                g.kind = rule.kind or g.kind
                owner[nxt.lead.name] = g
                merged.add(id(nxt))
        groups = [g for g in groups if id(g) not in merged]
    return groups


def _shares_input(g: Group, nxt: Node, alias: Mapping[Ref, Ref]) -> bool:
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
