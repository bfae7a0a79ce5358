"""The typed model IR: :class:`Graph` of frozen :class:`Node` objects with an :class:`OpKind` each.

Loads without torch or onnx.
"""

from __future__ import annotations

from edgeplan.ir.graph import Graph, GraphTotals, Node, Ref, Shape
from edgeplan.ir.ops import (
    ATTRS_BY_KIND,
    COMPUTE_KINDS,
    Activation,
    DType,
    EltwiseOp,
    OpKind,
    PoolMode,
)
from edgeplan.ir.serialize import graph_to_dict, node_to_dict

__all__ = [
    "ATTRS_BY_KIND",
    "COMPUTE_KINDS",
    "Activation",
    "DType",
    "EltwiseOp",
    "Graph",
    "GraphTotals",
    "Node",
    "OpKind",
    "PoolMode",
    "Ref",
    "Shape",
    "graph_to_dict",
    "node_to_dict",
]
