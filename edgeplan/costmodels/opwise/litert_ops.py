"""LiteRT's kernels for a latency model: the deduced operators as XNNPACK runs them, each with IR nodes to featurize.

The ``litert-xnnpack`` rules (:mod:`edgeplan.ir.kernels`) list one kernel per operator the converter writes. Two
steps make them what the per-op datasets measure (:mod:`edgeplan.measure.litert_op_profile`, whose IR is the
``.tflite`` file's, :func:`edgeplan.frontends.tflite_frontend.graph_from_tflite`):

- a zero ``PAD`` the converter inserts before a convolution runs inside that convolution (XNNPACK fuses them; the
  convolution node carries the padding, as the file's IR writes it);
- every other operator the converter inserts (the input's layout ``TRANSPOSE``, a max pool's ``PADV2``, ...) has
  no IR node of its own: it gets the node the file's IR has for it, built from the shapes of the IR node it serves
  (its kernel's name ``OP:node``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from edgeplan.ir.graph import Graph, Node
from edgeplan.ir.kernels import Kernel, KernelDeduction
from edgeplan.ir.ops import ConvAttrs, OpKind, PadAttrs, PermuteAttrs, PoolAttrs, ReshapeAttrs

__all__ = ["litert_kernels"]

_PADDED = ("xnnpack.CONV_2D", "xnnpack.DEPTHWISE_CONV_2D")


def litert_kernels(graph: Graph, deduction: KernelDeduction
                   ) -> tuple[list[tuple[str, str, tuple[str, ...]]], dict[str, list[dict[str, Any]]]]:
    """The kernels of a ``litert-xnnpack`` deduction as ``(name, kind, IR nodes)``, and node dicts for the kernels
    the converter inserts (by kernel name), which have no IR node in ``graph``."""
    kernels: Sequence[Kernel] = deduction.kernels
    out: list[tuple[str, str, tuple[str, ...]]] = []
    inserted: dict[str, list[dict[str, Any]]] = {}
    for i, k in enumerate(kernels):
        if not k.nodes:
            op, _, target = k.name.partition(":")
            nxt = kernels[i + 1] if i + 1 < len(kernels) else None
            if k.kind == "xnnpack.PAD" and nxt is not None and nxt.kind in _PADDED and target in nxt.nodes:
                continue  # runs inside the convolution, whose node has the padding
            node = _stand_in(graph, op, target, k.name)
            if node is not None:
                inserted[k.name] = [node.to_dict()]
        out.append((k.name, k.kind, tuple(k.nodes)))
    return out, inserted


def _stand_in(graph: Graph, op: str, target: str, name: str) -> Node | None:
    """The node the ``.tflite`` file's IR has for an operator inserted for ``target``, or None when ``target`` is
    not a node of ``graph``."""
    try:
        served = graph.node(target)
    except (KeyError, ValueError, LookupError):
        return None
    if served.kind is OpKind.INPUT:  # the input's layout transpose: NCHW in and (read as NCHW) out
        shape = served.output_shapes[0]
        return Node(name, OpKind.PERMUTE, PermuteAttrs((0, 2, 3, 1)), (), (shape,), (shape,), served.dtype, op)
    shape = served.input_shapes[0] if served.input_shapes else served.output_shapes[0]
    if op in ("PAD", "PADV2") and isinstance(served.attrs, ConvAttrs | PoolAttrs) and len(shape) == 4:
        top, left, bottom, right = served.attrs.padding
        padded = (shape[0], shape[1], shape[2] + top + bottom, shape[3] + left + right)
        pads = ((0, 0), (0, 0), (top, bottom), (left, right))
        value = float("-inf") if op == "PADV2" else 0.0
        return Node(name, OpKind.PAD, PadAttrs(pads, "constant", value), (), (shape,), (padded,), served.dtype, op)
    if op == "TRANSPOSE":
        return Node(name, OpKind.PERMUTE, PermuteAttrs(tuple(range(len(shape)))), (), (shape,), (shape,),
                    served.dtype, op)
    return Node(name, OpKind.RESHAPE, ReshapeAttrs(shape), (), (shape,), (shape,), served.dtype, op)
