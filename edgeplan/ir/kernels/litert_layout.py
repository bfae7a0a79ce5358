"""LiteRT's layouts: which IR nodes litert-torch runs in NHWC, by its minimum cut between NHWC and NCHW operators
(:mod:`edgeplan.ir.kernels.litert`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from edgeplan.ir.graph import Graph, Node, Ref
from edgeplan.ir.kernels.litert_passes import _keys
from edgeplan.ir.kernels.litert_pool import COMPOSITE, avg_pool_form
from edgeplan.ir.kernels.rules import KernelRules, label_keys
from edgeplan.ir.ops import (
    EltwiseAttrs,
    OpKind,
)

__all__ = ["nhwc_nodes"]

Shape = tuple[int, ...]


def _layout_class(node: Node, layout: Mapping[str, Any]) -> str:
    """``must``, ``can`` or ``cannot`` for ``node``, by its ATen source where the rules name it, else its label."""
    for prefix, cls in layout.get("sources", {}).items():
        if node.source.startswith(prefix):
            return str(cls)
    keys = _keys(node)
    for cls in ("must", "can", "cannot"):
        if any(k in layout[cls] for k in keys):
            return cls
    return "cannot"


def _is_4d(shape: Sequence[int] | None) -> bool:
    return shape is not None and len(shape) == 4


def _const_operand_4d(node: Node) -> bool:
    """Whether a constant operand of an element-wise node is 4-D or a Python scalar (no tensor in the graph)."""
    a = node.attrs
    if isinstance(a, EltwiseAttrs) and a.const_shape is not None:
        return len(a.const_shape) in (0, 4)
    return True


def nhwc_nodes(graph: Graph, kept: Sequence[Node], rules: KernelRules, alias: Mapping[Ref, Ref]) -> set[str]:
    """The IR nodes litert-torch runs in NHWC: its minimum cut between NHWC and NCHW operators.

    Operators that must be NHWC (a convolution, a pooling, a resize of 4-D tensors) are tied to the sink, those that
    cannot (graph inputs and outputs, views, permutes, operators without a 4-D result) to the source; every other
    edge between two operators costs one transpose (a tensor with several users is cut once, through a dummy node)
    and the nodes left on the sink's side of a minimum cut are NHWC. The flow is scipy's Dinic, as litert-torch's.

    Returns
    -------
    set[str]
        Names of the NHWC nodes.
    """
    import numpy as np
    from scipy.cluster.hierarchy import DisjointSet
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import maximum_flow

    layout = rules.data["layout"]
    inf = 1 << 28
    kept_names = {n.name for n in kept}
    nodes = {n.name: n for n in graph.nodes}
    users: dict[str, list[str]] = {}
    for n in kept:
        for r in n.inputs:
            src = alias.get(r, r).node
            if src in nodes and nodes[src].kind is not OpKind.CONSTANT:
                users.setdefault(src, [])
                if n.name not in users[src]:
                    users[src].append(n.name)
    for r in graph.outputs:
        users.setdefault(alias.get(r, r).node, []).append("<output>")

    ids: dict[object, int] = {}
    edges: dict[tuple[int, int], int] = {}

    def nid(obj: object) -> int:
        if obj not in ids:
            ids[obj] = len(ids) + 2
        return ids[obj]

    def edge(a: int, b: int, cost: int) -> None:
        edges[(a, b)] = cost

    order = [n for n in graph.nodes if n.kind is OpKind.INPUT or n.name in kept_names] + ["<output>"]
    for item in order:
        name = item if isinstance(item, str) else item.name
        i = nid(name)
        cls = "cannot"
        if isinstance(item, str) or item.kind is OpKind.INPUT:
            edge(0, i, inf)
        else:
            cls = _nhwcable(item, nodes, alias, layout)
            if cls == "cannot":
                edge(0, i, inf)
            elif cls == "must":
                edge(i, 1, inf)
        cost = layout["cut_cost"]
        if not isinstance(item, str) and any(k in layout["mean_kinds"] for k in label_keys(item)):
            cost = layout["cut_cost_after_mean"]
        outs = users.get(name, [])
        if not isinstance(item, str) and any(k in layout["getitem_after"] for k in _keys(item)):
            get = nid(("getitem", name))  # the result of an ATen op with several (batch norm's mean and rstd)
            if cls == "cannot":
                edge(0, get, inf)
            elif cls == "must":
                edge(get, 1, inf)
            edge(i, get, cost)
            edge(get, i, cost)
            i = get
        if not isinstance(item, str) and any(k in layout["view_after"] for k in _keys(item)):
            view = nid(("view", name))  # the reshape that ends the node (stack: cat, then a view) cannot be NHWC
            edge(0, view, inf)
            edge(i, view, cost)
            edge(view, i, cost)
            i = view
        if len(outs) > 1:
            dummy = nid(("dummy", name))
            edge(i, dummy, cost)
            edge(dummy, i, cost)
            i = dummy
        for u in outs:
            j = nid(u)
            edge(i, j, cost)
            edge(j, i, cost)

    count = len(ids) + 2
    pairs = list(edges.items())
    rows = np.array([a for (a, _), _ in pairs], dtype=np.int32)
    cols = np.array([b for (_, b), _ in pairs], dtype=np.int32)
    caps = np.array([min(c, inf) for _, c in pairs], dtype=np.int32)
    flow = maximum_flow(csr_matrix((caps, (rows, cols)), shape=(count, count)), 0, 1, method="dinic").flow
    ds = DisjointSet(range(count))
    for (a, b), c in pairs:
        if abs(flow[a, b]) < c:
            ds.merge(a, b)
    reach = ds.subset(0)
    cuts = {(a, b) for (a, b), _ in pairs if a in reach and b not in reach}
    ds = DisjointSet(range(count))
    for (a, b), _ in pairs:
        if (a, b) not in cuts and (b, a) not in cuts:
            ds.merge(a, b)
    return {obj for obj, i in ids.items() if isinstance(obj, str) and obj in kept_names
            and not ds.connected(i, 0)}


def _nhwcable(node: Node, nodes: Mapping[str, Node], alias: Mapping[Ref, Ref], layout: Mapping[str, Any]) -> str:
    """``must``, ``can`` or ``cannot`` for one node: its class, and only with a 4-D result and 4-D inputs."""
    cls = _layout_class(node, layout)
    if cls == "cannot" or avg_pool_form(node) == COMPOSITE:  # an unconverted composite runs as ATen's, NCHW
        return "cannot"
    inputs = [alias.get(r, r) for r in node.inputs]
    if cls == "must" or node.kind is OpKind.BATCH_NORM:
        inputs = inputs[:1]
    shapes = [nodes[r.node].output_shapes[r.index] for r in inputs if r.node in nodes]
    head_4d = any(k in layout["view_after"] for k in _keys(node)) and bool(shapes)  # 4-D before its view
    ok = (head_4d or _is_4d(node.output_shapes[0] if node.output_shapes else None)) and all(_is_4d(s) for s in shapes)
    return cls if ok and _const_operand_4d(node) else "cannot"


