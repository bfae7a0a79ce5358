"""LiteRT's kernels for a latency model: the deduced operators as XNNPACK runs them, each with IR nodes to featurize.

The ``litert-xnnpack`` rules (:mod:`edgeplan.ir.kernels`) list one kernel per operator the converter writes. The
per-op datasets (:mod:`edgeplan.measure.litert_op_profile`) featurize each measured operator from the ``.tflite``
file's IR (:func:`edgeplan.frontends.tflite_frontend.graph_from_tflite`), so a kernel deduced from a PyTorch graph
is featurized from the nodes that IR would have for it:

- a zero ``PAD`` the converter inserts before a convolution runs inside that convolution (XNNPACK fuses them; the
  convolution node carries the padding, as the file's IR writes it);
- a convolution or fully connected layer with a batch norm folded into it is one node with a bias;
- a pool after an inserted ``PAD`` or ``PADV2`` reads the padded tensor with no padding of its own;
- each ``SLICE`` of a split is a slice node of its piece;
- the ``DIV`` that ends an average pool written as reduce windows is an element-wise division by the counts;
- every other operator the converter inserts (the input's layout ``TRANSPOSE``, a max pool's ``PADV2``, an average
  pool's ``STABLEHLO_REDUCE_WINDOW`` sums and, in int8, the ``DEQUANTIZE`` and ``QUANTIZE`` around them, ...) gets
  the node the file's IR has for it, built from the shapes of the IR node it serves (its kernel's name ``OP:node``):
  a copy of a fully connected layer is that layer, an operator of a folded mask (``OP.mask:node``) a view of the
  mask's size.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from edgeplan.ir.graph import Graph, Node
from edgeplan.ir.kernels import KernelDeduction
from edgeplan.ir.kernels.litert import is_file_op, runs_in_int8
from edgeplan.ir.kernels.litert_folded import MASK_ROLE
from edgeplan.ir.kernels.litert_pool import window_padding
from edgeplan.ir.kernels.rules import load_rules
from edgeplan.ir.ops import (
    ConvAttrs,
    ConvertAttrs,
    DType,
    EltwiseAttrs,
    EltwiseOp,
    LinearAttrs,
    OpKind,
    PadAttrs,
    PermuteAttrs,
    PoolAttrs,
    PoolMode,
    ReshapeAttrs,
    SliceAttrs,
    SplitAttrs,
)
from edgeplan.ir.serialize import node_to_dict

__all__ = ["LiteRTKernel", "litert_kernels"]

#: A kernel as ``(name, kind, IR nodes, node dicts as the file's IR writes them or None for the IR nodes')``.
LiteRTKernel = tuple[str, str, tuple[str, ...], list[dict[str, Any]] | None]

_PADDED = ("xnnpack.CONV_2D", "xnnpack.DEPTHWISE_CONV_2D")
_PADS = ("PAD", "PADV2")


def litert_kernels(graph: Graph, deduction: KernelDeduction) -> list[LiteRTKernel]:
    """The kernels of a ``litert-xnnpack`` deduction, each with the node dicts the ``.tflite`` file's IR has for it
    where they differ from the graph's nodes (see the module's docstring); in an int8 profile
    (``litert-xnnpack-int8``) every node is int8 but those of the operators that run in float."""
    rules = load_rules(deduction.profile)
    written = _as_in_file(graph, deduction)
    file_graph = all(n.kind is OpKind.INPUT or is_file_op(n) for n in graph.nodes)
    if rules.settings.get("dtype") != "int8" or file_graph:  # a file's IR has its own dtypes
        return [(name, kind, nodes, None if ns is None else [node_to_dict(n) for n in ns])
                for name, kind, nodes, ns in written]
    return [(name, kind, nodes, [node_to_dict(_int8(n, runs_in_int8(rules, kind.split(".", 1)[-1])))
                                 for n in ns or map(graph.node, nodes)])
            for name, kind, nodes, ns in written]


def _int8(node: Node, int8: bool) -> Node:
    """``node`` of an operator as an int8 file's IR has it: int8 where the operator runs in ``int8``, unless it
    converts (its dtype is its output's)."""
    return replace(node, dtype=DType.INT8) if int8 and node.kind is not OpKind.CONVERT else node


def _as_in_file(graph: Graph, deduction: KernelDeduction
                ) -> list[tuple[str, str, tuple[str, ...], list[Node] | None]]:
    """Each kernel with the nodes the file's IR has for it, or None where they are the graph's."""
    kernels = deduction.kernels
    out: list[tuple[str, str, tuple[str, ...], list[Node] | None]] = []
    pieces: dict[str, int] = {}  # split node -> SLICE kernels seen
    padded_pools: set[str] = set()  # pools whose padding an inserted PAD or PADV2 writes
    for i, k in enumerate(kernels):
        op, _, target = k.name.partition(":")
        nodes = tuple(k.nodes)
        split = _split_of(graph, k.kind, nodes, target)
        if split is not None:
            piece = pieces.get(split.name, 0)
            pieces[split.name] = piece + 1
            out.append((k.name, k.kind, nodes, [_piece(split, piece, k.name)]))
            continue
        if not nodes:
            nxt = kernels[i + 1] if i + 1 < len(kernels) else None
            if k.kind == "xnnpack.PAD" and nxt is not None and nxt.kind in _PADDED and target in nxt.nodes:
                continue  # runs inside the convolution, whose node has the padding
            node = _stand_in(graph, op, target, k.name)
            if op in _PADS and node is not None and node.kind is OpKind.PAD:
                padded_pools.add(target)
            out.append((k.name, k.kind, nodes, [node] if node is not None else None))
            continue
        if k.kind.endswith(".DIV") and len(nodes) >= 1 and isinstance(graph.node(nodes[0]).attrs, PoolAttrs):
            out.append((k.name, k.kind, nodes, [_division(graph.node(nodes[0]))]))
            continue
        out.append((k.name, k.kind, nodes, _as_written(graph, nodes, padded_pools)))
    return out


def _split_of(graph: Graph, kind: str, nodes: tuple[str, ...], target: str) -> Node | None:
    """The split node a ``SLICE`` kernel cuts a piece of, or None."""
    if not kind.endswith(".SLICE"):
        return None
    name = nodes[0] if len(nodes) == 1 else target if not nodes else ""
    node = _node(graph, name)
    return node if node is not None and isinstance(node.attrs, SplitAttrs) else None


def _piece(split: Node, piece: int, name: str) -> Node:
    """The slice node of a split's ``piece``-th output."""
    attrs = split.attrs
    assert isinstance(attrs, SplitAttrs)
    piece = min(piece, len(attrs.sizes) - 1)
    start = sum(attrs.sizes[:piece])
    shape = split.input_shapes[0]
    out = list(shape)
    out[attrs.axis] = attrs.sizes[piece]
    return Node(name, OpKind.SLICE, SliceAttrs(attrs.axis, start, start + attrs.sizes[piece]), (), (shape,),
                (tuple(out),), split.dtype, "SLICE")


def _as_written(graph: Graph, nodes: tuple[str, ...], padded_pools: set[str]) -> list[Node] | None:
    """A kernel's ``nodes`` as the file's IR has them, or None where they are the graph's."""
    found = [graph.node(n) for n in nodes]
    norms = [n for n in found if n.kind is OpKind.BATCH_NORM]
    lead = found[0]
    if norms and isinstance(lead.attrs, ConvAttrs | LinearAttrs):
        rest = [n for n in found[1:] if n.kind is not OpKind.BATCH_NORM]
        return [replace(lead, attrs=replace(lead.attrs, bias=True)), *rest]
    if lead.name in padded_pools and isinstance(lead.attrs, PoolAttrs) and len(lead.input_shapes[0]) == 4:
        top, left, bottom, right = lead.attrs.padding
        n, c, h, w = lead.input_shapes[0]
        pool = replace(lead, attrs=replace(lead.attrs, padding=(0, 0, 0, 0)),
                       input_shapes=((n, c, h + top + bottom, w + left + right),))
        return [pool, *found[1:]]
    return None


def _division(pool: Node) -> Node:
    """The ``DIV`` of an average pool written as reduce windows: its windows' sums by their counts (1, 1, H, W)."""
    out = pool.output_shapes[0]
    counts = (1, 1, *out[2:])
    return replace(pool, kind=OpKind.ELTWISE, attrs=EltwiseAttrs(EltwiseOp.DIV), input_shapes=(out, counts))


def _node(graph: Graph, name: str) -> Node | None:
    """``graph``'s node ``name``, or None."""
    try:
        return graph.node(name) if name else None
    except (KeyError, ValueError, LookupError):
        return None


def _stand_in(graph: Graph, op: str, target: str, name: str) -> Node | None:
    """The node the ``.tflite`` file's IR has for an operator inserted for ``target``, or None when ``target`` is
    not a node of ``graph``."""
    served = _node(graph, target)
    if served is None:
        return None
    if served.kind is OpKind.INPUT:  # the input's layout transpose: NCHW in and (read as NCHW) out
        shape = served.output_shapes[0]
        return Node(name, OpKind.PERMUTE, PermuteAttrs((0, 2, 3, 1)), (), (shape,), (shape,), served.dtype, op)
    shape = served.input_shapes[0] if served.input_shapes else served.output_shapes[0]
    if op in _PADS and isinstance(served.attrs, ConvAttrs | PoolAttrs) and len(shape) == 4:
        top, left, bottom, right = served.attrs.padding
        padded = (shape[0], shape[1], shape[2] + top + bottom, shape[3] + left + right)
        pads = ((0, 0), (0, 0), (top, bottom), (left, right))
        value = float("-inf") if op == "PADV2" else 0.0
        return Node(name, OpKind.PAD, PadAttrs(pads, "constant", value), (), (shape,), (padded,), served.dtype, op)
    if op.startswith("STABLEHLO_REDUCE_WINDOW") and isinstance(served.attrs, PoolAttrs) and len(shape) == 4:
        # an average pool's sum of the input's windows, or (.counts) of a constant of ones: a sum pooling
        window = replace(served.attrs, mode=PoolMode.SUM, padding=window_padding(served), ceil_mode=False)
        out = served.output_shapes[0]
        if op.endswith(".counts"):
            shape, out = (1, 1, *shape[2:]), (1, 1, *out[2:])
        return Node(name, OpKind.POOL2D, window, (), (shape,), (out,), served.dtype, op)
    if op == "DEQUANTIZE":  # an int8 model's conversion into an operator it keeps in float (its first input)
        return Node(name, OpKind.CONVERT, ConvertAttrs(DType.INT8), (), (shape,), (shape,), DType.FLOAT32, op)
    if op.startswith("QUANTIZE") and served.output_shapes:  # and out of it (.counts: an average pool's counts)
        out = served.output_shapes[0]
        if op.endswith(".counts") and len(out) == 4:
            out = (1, 1, *out[2:])
        return Node(name, OpKind.CONVERT, ConvertAttrs(DType.FLOAT32), (), (out,), (out,), DType.INT8, op)
    if op == "TRANSPOSE":
        return Node(name, OpKind.PERMUTE, PermuteAttrs(tuple(range(len(shape)))), (), (shape,), (shape,),
                    served.dtype, op)
    if op == "FULLY_CONNECTED" and served.kind is OpKind.LINEAR:  # a copy of the layer for one of its readers
        return replace(served, name=name, source=op)
    const_shape = getattr(served.attrs, "const_shape", None)
    if op.endswith(MASK_ROLE) and const_shape:  # an operator of the mask the node reads: of the mask's size
        shape = tuple(const_shape)
    return Node(name, OpKind.RESHAPE, ReshapeAttrs(shape), (), (shape,), (shape,), served.dtype, op)
