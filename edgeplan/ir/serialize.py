"""Plain-data (JSON-ready) views of graphs and nodes: :meth:`Graph.to_dict` and :meth:`Node.to_dict`."""

from __future__ import annotations

from typing import Any

from edgeplan.ir.graph import Graph, Node

__all__ = ["graph_to_dict", "node_to_dict"]


def node_to_dict(node: Node) -> dict[str, Any]:
    """A JSON-ready description of ``node`` with its shapes, attributes and derived work (:meth:`Node.to_dict`)."""
    return node.to_dict()


def graph_to_dict(graph: Graph) -> dict[str, Any]:
    """A JSON-ready description of ``graph`` (:meth:`Graph.to_dict`): ``nodes``, ``outputs``, ``folded_ops``,
    ``folded_shapes``, ``folded_at``, ``fused_calls`` and ``totals``."""
    return graph.to_dict()
