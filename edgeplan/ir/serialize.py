"""Plain-data (JSON-ready) views of graphs and nodes."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

from edgeplan.ir.graph import Graph, Node

__all__ = ["graph_to_dict", "node_to_dict"]


def _plain(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value


def node_to_dict(node: Node) -> dict[str, Any]:
    """A JSON-ready description of ``node`` with its shapes, attributes and derived work."""
    return {
        "name": node.name,
        "op": node.kind.value,
        "source": node.source,
        "inputs": [str(r) for r in node.inputs],
        "input_shapes": _plain(node.input_shapes),
        "output_shapes": _plain(node.output_shapes),
        "dtype": node.dtype.value,
        "attrs": {f.name: _plain(getattr(node.attrs, f.name)) for f in dataclasses.fields(node.attrs)},
        "macs": node.macs,
        "flops": node.flops,
        "params": node.params,
        "param_bytes": node.param_bytes,
        "activation_bytes": node.activation_bytes,
    }


def graph_to_dict(graph: Graph) -> dict[str, Any]:
    """A JSON-ready description of ``graph``: ``nodes``, ``outputs``, ``folded_ops``, ``folded_shapes`` (``inputs``,
    ``outputs``), ``fused_calls`` (``module``: the module class or aten operator, ``nodes``) and ``totals`` (macs,
    flops, params, bytes, opaque)."""
    totals = dataclasses.asdict(graph.totals())
    totals["opaque"] = list(totals["opaque"])
    return {
        "model": graph.name,
        "nodes": [node_to_dict(n) for n in graph.nodes],
        "outputs": [str(r) for r in graph.outputs],
        "folded_ops": list(graph.folded_ops),
        "folded_shapes": [{"inputs": _plain(ins), "outputs": _plain(outs)} for ins, outs in graph.folded_shapes],
        "fused_calls": [{"module": cls, "nodes": list(names)} for cls, names in graph.fused_calls],
        "totals": totals,
    }
