"""The layout-flow structure of a network for primitive selection: which conv layers and joins choose, and which
tensors may need a data-layout transformation between them.

Treatment of every IR node (the same for predicted and measured costs):

* **selectable conv**: a ``conv2d`` with one group, no dilation, square kernel, stride and input, and equal
  padding on all sides; a PBQP node whose options are the applicable primitives (each with its input and output
  layout).
* **join**: a node with two or more activation inputs (``eltwise`` add/mul/..., ``concat``); a PBQP node with
  three options, one per layout (``chw``, ``hcw``, ``hwc``), cost 0: all inputs are brought to the join's layout
  and its output is in that layout. The join's own time is taken as independent of the layout.
* **layout-transparent**: element-wise nonlinearities, batch norm, windowed pooling, padding, dropout, LRN and
  single-input element-wise ops with a constant: they run in whatever layout their input is in. mulder2020's cost
  graph leaves them out (their cost taken as independent of the layout); they are recorded as
  :class:`FlowOp` so that measured per-layout times can be added where they matter.
* **layout-collapsing**: global pooling and adaptive pooling to 1x1 produce a ``c x 1 x 1`` tensor, the same bytes
  in every layout; they accept any layout at no cost and end the flow.
* **layout-fixed**: everything else (flatten, reshape, linear, grouped or non-square conv, ...) reads and writes
  ``chw``, PyTorch's own layout, as does the network input. An edge into such a node is priced as a
  transformation to ``chw``.

Edges carry the tensor they transform, ``(c, im)``, as the mulder2021 tables index transformations.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from edgeplan.errors import InvalidInputError
from edgeplan.ir import Graph, Node
from edgeplan.ir.ops import AdaptivePoolAttrs, OpKind
from edgeplan.primitives.spec import conv_refusal, conv_shape

__all__ = ["FlowOp", "LayoutEdge", "SelectionStructure", "SelectNode", "conv_refusal", "conv_shape",
           "selection_structure"]

TRANSPARENT = frozenset({OpKind.ACTIVATION, OpKind.BATCH_NORM, OpKind.POOL2D, OpKind.DROPOUT, OpKind.LRN,
                         OpKind.PAD, OpKind.CONVERT})
"""Kinds that run in their input's layout (an ``eltwise`` with one activation input is transparent too)."""


@dataclass(frozen=True)
class SelectNode:
    """A PBQP node of the network: a selectable conv layer or a join.

    Parameters
    ----------
    name
        The IR node's name.
    kind
        ``"conv"`` or ``"join"``.
    conv
        ``(c, k, im, f, s, padding)`` of a conv layer; ``None`` for a join.
    """

    name: str
    kind: str
    conv: tuple[int, int, int, int, int, int] | None = None


@dataclass(frozen=True)
class LayoutEdge:
    """A tensor that flows from one layout decision to another.

    Parameters
    ----------
    producer
        Index of the producing :class:`SelectNode`, or ``None`` for a ``chw`` source (network input or a
        layout-fixed node).
    consumer
        Index of the consuming :class:`SelectNode`, or ``None`` for a ``chw`` sink (a layout-fixed node or a
        network output).
    tensor
        ``(c, im)`` of the tensor where it is consumed.
    at
        Name of the IR node that consumes it (for reports).
    """

    producer: int | None
    consumer: int | None
    tensor: tuple[int, int]
    at: str


@dataclass(frozen=True)
class FlowOp:
    """A layout-transparent layer: it runs in the layout of the decision ``source`` (``None``: ``chw``).

    Its time may depend on that layout (PyTorch's max pooling can run many times faster on channels-last memory
    than on NCHW); :func:`edgeplan.decisions.select.with_flow_costs` adds measured per-layout times of these layers to
    their source's options.
    """

    name: str
    node: Node
    source: int | None


@dataclass(frozen=True)
class SelectionStructure:
    """The selection nodes of a network, the layout edges between them and the layout-transparent layers."""

    model: str
    nodes: tuple[SelectNode, ...]
    edges: tuple[LayoutEdge, ...]
    fixed: tuple[str, ...]
    flow: tuple[FlowOp, ...] = ()
    fixed_reasons: tuple[str, ...] = ()
    """Why each conv layer of ``fixed`` is left to PyTorch, in the same order (empty for a structure built by hand)."""

    @property
    def convs(self) -> tuple[int, ...]:
        """Indices of the conv nodes."""
        return tuple(i for i, n in enumerate(self.nodes) if n.kind == "conv")

    def conv_inputs(self) -> dict[str, int]:
        """Side of each selected conv layer's square input, by name."""
        return {n.name: n.conv[2] for n in self.nodes if n.kind == "conv" and n.conv is not None}


def _tensor(shape: tuple[int, ...], where: str) -> tuple[int, int]:
    if len(shape) != 4 or shape[2] != shape[3]:
        raise InvalidInputError(f"node {where!r}: the layout flow needs square NCHW tensors, got shape {shape}")
    return int(shape[1]), int(shape[2])


def _collapses(node: Node) -> bool:
    if node.kind is OpKind.GLOBAL_POOL:
        return True
    return isinstance(node.attrs, AdaptivePoolAttrs) and node.attrs.output_size == (1, 1)


def selection_structure(graph: Graph, selectable: Callable[[tuple[int, int, int, int, int, int]], bool] | None = None,
                        why_not: Callable[[tuple[int, int, int, int, int, int]], str | None] | None = None,
                        ) -> SelectionStructure:
    """The selection nodes and layout edges of a network (see the module docstring for each node's treatment).

    Parameters
    ----------
    graph
        The network.
    selectable
        Which runnable conv shapes ``(c, k, im, f, s, padding)`` are selected; the others are layout-fixed (e.g.
        layers a profiled table does not have). Default: all.
    why_not
        Instead of ``selectable``: ``None`` for a shape that is selected, else why it is not (for example ``"not in
        the measured tables"``), kept in :attr:`SelectionStructure.fixed_reasons`.

    Returns
    -------
    SelectionStructure

    Raises
    ------
    InvalidInputError
        The network has no conv layer the primitives can run (or ``selectable`` selects none of them), or a tensor
        on the layout flow is not square NCHW.
    """
    nodes: list[SelectNode] = []
    edges: list[LayoutEdge] = []
    fixed: list[str] = []
    reasons: list[str] = []
    flow_ops: list[FlowOp] = []
    # which decision's layout the output of each IR node is in: a SelectNode index, "chw" (fixed) or "any"
    flow: dict[str, int | str] = {}

    def connect(source: int | str, consumer: int | None, shape: tuple[int, ...], at: str) -> None:
        if source == "any" or (source == "chw" and consumer is None):
            return
        producer = None if source == "chw" else int(source)
        edges.append(LayoutEdge(producer, consumer, _tensor(shape, at), at))

    def refused(conv: tuple[int, int, int, int, int, int]) -> str | None:
        if why_not is not None:
            return why_not(conv)
        return None if selectable is None or selectable(conv) else "not selectable"

    for node in graph.nodes:
        activations = [(ref, shape) for ref, shape in zip(node.inputs, node.input_shapes, strict=True)
                       if graph.node(ref.node).kind is not OpKind.CONSTANT]
        sources = [flow[ref.node] for ref, _ in activations]
        conv = conv_shape(node)
        reason = refused(conv) if conv is not None else conv_refusal(node)
        if node.kind is OpKind.INPUT:
            flow[node.name] = "chw"
        elif conv is not None and reason is None:
            nodes.append(SelectNode(node.name, "conv", conv))
            connect(sources[0], len(nodes) - 1, activations[0][1], node.name)
            flow[node.name] = len(nodes) - 1
        elif len(activations) >= 2 and node.kind in (OpKind.ELTWISE, OpKind.CONCAT) and len(node.output_shapes[0]) == 4:
            nodes.append(SelectNode(node.name, "join"))
            for source, (_, shape) in zip(sources, activations, strict=True):
                connect(source, len(nodes) - 1, shape, node.name)
            flow[node.name] = len(nodes) - 1
        elif len(activations) == 1 and (node.kind in TRANSPARENT or node.kind is OpKind.ELTWISE):
            flow[node.name] = sources[0]
            if sources[0] != "any":
                flow_ops.append(FlowOp(node.name, node, None if sources[0] == "chw" else int(sources[0])))
        elif len(activations) == 1 and _collapses(node):
            flow[node.name] = "any"
        else:
            for source, (_, shape) in zip(sources, activations, strict=True):
                if len(shape) == 4 and source != "any":
                    connect(source, None, shape, node.name)
            if node.kind is OpKind.CONV2D:
                fixed.append(node.name)
                reasons.append(reason or "not selectable")
            flow[node.name] = "chw"
    for ref in graph.outputs:
        out_shape = graph.node(ref.node).output_shapes[ref.index]
        if len(out_shape) == 4:
            connect(flow[ref.node], None, out_shape, f"output {ref}")
    if not any(n.kind == "conv" for n in nodes):
        if (selectable is not None or why_not is not None) and any(conv_shape(n) is not None for n in graph.nodes):
            raise InvalidInputError(f"model {graph.name!r}: none of its conv layers can be selected (the measured "
                                    "tables have none of its layer shapes, or no primitive runs them on this "
                                    "device); with measured costs, price them with the model (--costs predicted), "
                                    f"or measure them (`edgeplan profile primitives --network {graph.name} --export "
                                    "TABLE.csv`) and pass the table with --data")
        raise InvalidInputError(f"model {graph.name!r} has no conv layer the primitives can run "
                                "(square, stride and padding equal on both axes, one group, no dilation)")
    return SelectionStructure(graph.name, tuple(nodes), tuple(edges), tuple(fixed), tuple(flow_ops), tuple(reasons))
