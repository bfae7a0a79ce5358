"""Candidate partition points of a graph (parthasarathy2022 §III-A): the nodes every path passes through.

A pipeline over several devices can only cut a model where one tensor carries everything that comes after: at a
node ``v`` such that every path from the inputs to the outputs passes through ``v``. Then every other node is
an ancestor or a descendant of ``v`` (a node that is neither would lie on a path that avoids ``v``), and no edge
skips over ``v``, so cutting after ``v`` sends exactly ``v``'s outputs. The paper finds these points with
topological depths and a modified DFS; we use the equivalent and faster formulation: with a virtual source
feeding every input (and every constant) and a virtual sink fed by every output, the candidate points are the
*dominators* of the sink, computed by the iterative algorithm of Cooper, Harvey and Kennedy in one pass over the
topological order. :func:`cut_points_brute` checks the definition directly (remove a node, is the sink still
reachable?) and the tests compare both on zoo models.

Nodes from which no graph output can be reached do not take part (they cannot hold up a pipeline).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from edgeplan.ir.graph import Graph

__all__ = ["CutPoints", "cut_points", "cut_points_brute"]

_SOURCE, _SINK = "<source>", "<sink>"


@dataclass(frozen=True)
class CutPoints:
    """The candidate partition points of a graph, in execution order.

    Attributes
    ----------
    graph
        The graph.
    points
        Names of the nodes every input-to-output path passes through, in topological order (graph inputs
        included when there is a single one; the last node when there is a single output).
    depth
        Topological depth (longest path from the virtual source, in edges) of every node that reaches an output.
    """

    graph: Graph
    points: tuple[str, ...]
    depth: dict[str, int]

    @property
    def inner(self) -> tuple[str, ...]:
        """Points that actually split the model: not a graph input and not the last node."""
        last = self.graph.nodes[-1].name
        inputs = {n.name for n in self.graph.inputs}
        return tuple(p for p in self.points if p not in inputs and p != last)

    @property
    def partitionable(self) -> bool:
        """Whether the model can be cut anywhere (at least one inner point)."""
        return bool(self.inner)


def _edges(graph: Graph) -> tuple[list[str], dict[str, list[str]]]:
    """Topological order (virtual source first, sink last) and predecessor lists of the live part of the graph."""
    preds: dict[str, list[str]] = {_SINK: []}
    order = [_SOURCE]
    for node in graph.nodes:
        sources = sorted({r.node for r in node.inputs}) or [_SOURCE]
        preds[node.name] = sources
        order.append(node.name)
    for ref in graph.outputs:
        if ref.node not in preds[_SINK]:
            preds[_SINK].append(ref.node)
    order.append(_SINK)
    # keep only nodes that reach the sink
    alive = {_SINK}
    queue = deque([_SINK])
    while queue:
        v = queue.popleft()
        for p in preds.get(v, []):
            if p not in alive:
                alive.add(p)
                queue.append(p)
    order = [v for v in order if v in alive]
    return order, {v: [p for p in preds.get(v, []) if p in alive] for v in order}


def cut_points(graph: Graph) -> CutPoints:
    """The candidate partition points of ``graph`` (dominators of the virtual sink).

    Parameters
    ----------
    graph
        A validated graph (nodes in topological order).

    Returns
    -------
    CutPoints
    """
    order, preds = _edges(graph)
    index = {v: i for i, v in enumerate(order)}
    idom: dict[str, str] = {_SOURCE: _SOURCE}
    depth: dict[str, int] = {_SOURCE: 0}

    def intersect(a: str, b: str) -> str:
        while a != b:
            while index[a] > index[b]:
                a = idom[a]
            while index[b] > index[a]:
                b = idom[b]
        return a

    for v in order[1:]:  # a DAG in topological order: one pass suffices
        ps = preds[v]
        dom = ps[0]
        for p in ps[1:]:
            dom = intersect(dom, p)
        idom[v] = dom
        depth[v] = 1 + max(depth[p] for p in ps)
    chain = []
    v = idom[_SINK]
    while v != _SOURCE:
        chain.append(v)
        v = idom[v]
    depths = {k: d for k, d in depth.items() if k not in (_SOURCE, _SINK)}
    return CutPoints(graph, tuple(reversed(chain)), depths)


def cut_points_brute(graph: Graph) -> tuple[str, ...]:
    """The paper's definition checked directly: nodes whose removal disconnects the outputs from the inputs.

    O(V * E); for tests and verification.
    """
    order, preds = _edges(graph)
    succs: dict[str, list[str]] = {v: [] for v in order}
    for v in order:
        for p in preds[v]:
            succs[p].append(v)
    points = []
    for v in order[1:-1]:
        seen = {_SOURCE}
        queue = deque([_SOURCE])
        while queue:
            u = queue.popleft()
            for w in succs[u]:
                if w != v and w not in seen:
                    seen.add(w)
                    queue.append(w)
        if _SINK not in seen:
            points.append(v)
    return tuple(points)

