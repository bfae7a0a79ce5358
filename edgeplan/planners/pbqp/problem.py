"""A Partitioned Boolean Quadratic Problem: node cost vectors, edge cost matrices, and the independent checker.

Every node ``u`` picks exactly one of its ``m_u`` options; the cost of an assignment ``a`` is::

    sum_u  costs[u][a_u]  +  sum_{(u, v) in edges}  edges[u, v][a_u, a_v]

In primitive selection (mulder2020, after Anderson & Gregg) a node is a conv layer, an option a
(primitive, layout) pair, the vector its execution times and an edge matrix the data-layout transformation
times between producer and consumer. ``inf`` marks a forbidden option or pair (a primitive that does not apply);
``nan`` and ``-inf`` are refused.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from edgeplan.errors import InvalidInputError

__all__ = ["FloatArray", "PBQPProblem", "evaluate_assignment"]

FloatArray = npt.NDArray[np.float64]


def _as_costs(values: npt.ArrayLike, what: str, ndim: int) -> FloatArray:
    arr = np.array(values, dtype=np.float64)
    if arr.ndim != ndim:
        raise InvalidInputError(f"{what}: expected a {ndim}-D array of costs, got shape {arr.shape}")
    if arr.size == 0:
        raise InvalidInputError(f"{what}: has no option; every node needs at least one")
    if np.isnan(arr).any() or np.isneginf(arr).any():
        raise InvalidInputError(f"{what}: contains NaN or -inf; use +inf for a forbidden option")
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True, eq=False)
class PBQPProblem:
    """A PBQP instance. Build it with :meth:`build`, which validates and normalises the edges.

    Parameters
    ----------
    costs
        One read-only cost vector per node (``costs[u][a]``: cost of option ``a`` of node ``u``).
    edges
        Edge matrices keyed by ``(u, v)`` with ``u < v``, shape ``(m_u, m_v)``, read-only; at most one per pair.
    names
        A name per node (used in messages and reports).
    """

    costs: tuple[FloatArray, ...]
    edges: Mapping[tuple[int, int], FloatArray]
    names: tuple[str, ...] = field(default=())

    @classmethod
    def build(cls, costs: Sequence[npt.ArrayLike], edges: Mapping[tuple[int, int], npt.ArrayLike] | None = None,
              names: Sequence[str] | None = None) -> PBQPProblem:
        """Validate and assemble an instance.

        Parameters
        ----------
        costs
            A cost vector per node.
        edges
            Edge matrices keyed by node pairs in either order (``(v, u)`` is transposed); two matrices given for
            the same pair are added.
        names
            Node names; defaults to ``"0"``, ``"1"``, ...

        Returns
        -------
        PBQPProblem

        Raises
        ------
        InvalidInputError
            A shape does not match, a pair is a self-loop or names an unknown node, or a cost is NaN or -inf.
        """
        node_names = tuple(str(u) for u in range(len(costs))) if names is None else tuple(names)
        if len(node_names) != len(costs):
            raise InvalidInputError(f"{len(node_names)} names for {len(costs)} nodes")
        vecs = tuple(_as_costs(c, f"node {node_names[u]!r}", 1) for u, c in enumerate(costs))
        merged: dict[tuple[int, int], FloatArray] = {}
        for (u, v), matrix in (edges or {}).items():
            if not (0 <= u < len(vecs) and 0 <= v < len(vecs)):
                raise InvalidInputError(f"edge ({u}, {v}) names a node that does not exist ({len(vecs)} nodes)")
            if u == v:
                raise InvalidInputError(f"edge ({u}, {v}) is a self-loop; put that cost in the node's vector")
            arr = _as_costs(matrix, f"edge ({node_names[u]!r}, {node_names[v]!r})", 2)
            if arr.shape != (vecs[u].size, vecs[v].size):
                raise InvalidInputError(
                    f"edge ({node_names[u]!r}, {node_names[v]!r}) has shape {arr.shape}, expected "
                    f"{(vecs[u].size, vecs[v].size)} (options of the two nodes)")
            key, arr = ((u, v), arr) if u < v else ((v, u), arr.T)
            merged[key] = merged[key] + arr if key in merged else arr
        for arr in merged.values():
            arr.setflags(write=False)
        return cls(costs=vecs, edges=merged, names=node_names)

    @property
    def n_nodes(self) -> int:
        """Number of nodes."""
        return len(self.costs)

    @property
    def n_options(self) -> tuple[int, ...]:
        """Number of options of each node."""
        return tuple(c.size for c in self.costs)

    def neighbours(self) -> list[set[int]]:
        """Adjacency sets, one per node."""
        adj: list[set[int]] = [set() for _ in self.costs]
        for u, v in self.edges:
            adj[u].add(v)
            adj[v].add(u)
        return adj


def evaluate_assignment(problem: PBQPProblem, assignment: Sequence[int]) -> float:
    """Recompute the cost of an assignment from the instance alone (the checker of every solver).

    Parameters
    ----------
    problem
        The instance.
    assignment
        One option index per node.

    Returns
    -------
    float
        The total cost (``inf`` when a forbidden option or pair is used).

    Raises
    ------
    InvalidInputError
        The assignment has the wrong length or an option index out of range.
    """
    if len(assignment) != problem.n_nodes:
        raise InvalidInputError(f"assignment has {len(assignment)} entries for {problem.n_nodes} nodes")
    for u, a in enumerate(assignment):
        if not 0 <= int(a) < problem.costs[u].size:
            raise InvalidInputError(f"node {problem.names[u]!r}: option {a} out of range "
                                    f"(it has {problem.costs[u].size})")
    total = math.fsum(float(problem.costs[u][a]) for u, a in enumerate(assignment))
    total += math.fsum(float(m[assignment[u], assignment[v]]) for (u, v), m in problem.edges.items())
    return total
