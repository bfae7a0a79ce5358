"""The PBQP reductions R0, RI, RII and RN on a mutable working graph (after Scholz & Eckstein 2002, Hames & Scholz
2006), and the back-propagation that turns the recorded reductions into an assignment.

R0, RI and RII are exact: they remove a node of degree 0, 1 or 2 and fold its optimal choice, as a function of
its neighbours' options, into a neighbour's vector (RI) or into the edge between its two neighbours (RII). RN
removes a node of degree >= 3 by fixing one of its options; it is exact only inside a search that tries every
option (:mod:`edgeplan.planners.pbqp.solve`), and the heuristic of the papers otherwise.

The working graph never mutates an array in place: a reduction replaces vectors and matrices by new ones, so a
shallow :meth:`WorkGraph.copy` is a cheap, independent branch for branch and bound.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from edgeplan.planners.pbqp.problem import FloatArray, PBQPProblem

__all__ = ["Reduction", "ReductionCounts", "WorkGraph", "back_propagate"]

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Reduction:
    """One recorded reduction, enough to recover the removed node's option later.

    Parameters
    ----------
    kind
        ``"R0"``, ``"RI"``, ``"RII"`` or ``"RN"``.
    node
        The removed node.
    depends_on
        The neighbours its choice depends on (none for R0 and RN, one for RI, two for RII).
    choice
        The node's option as a function of the neighbours' options: a 0-d array (R0, RN), 1-d (RI) or 2-d (RII).
    """

    kind: str
    node: int
    depends_on: tuple[int, ...]
    choice: IntArray


@dataclass
class ReductionCounts:
    """How many reductions of each kind a solve applied (RN counts fixed options, also inside the search)."""

    r0: int = 0
    r1: int = 0
    r2: int = 0
    rn: int = 0

    def add(self, other: ReductionCounts) -> None:
        """Add another count into this one."""
        self.r0 += other.r0
        self.r1 += other.r1
        self.r2 += other.r2
        self.rn += other.rn


@dataclass
class WorkGraph:
    """A PBQP instance being reduced: vectors and symmetric adjacency of edge matrices.

    ``adj[u][v]`` has shape ``(m_u, m_v)`` and ``adj[v][u]`` is its transpose. ``constant`` is the cost already
    committed by removed nodes (R0 minima and RN choices).
    """

    vec: dict[int, FloatArray]
    adj: dict[int, dict[int, FloatArray]]
    constant: float = 0.0
    trail: list[Reduction] = field(default_factory=list)
    counts: ReductionCounts = field(default_factory=ReductionCounts)

    @classmethod
    def of(cls, problem: PBQPProblem) -> WorkGraph:
        """The working graph of an instance (edges that are all zeros are dropped)."""
        graph = cls(vec={u: c for u, c in enumerate(problem.costs)}, adj={u: {} for u in range(problem.n_nodes)})
        for (u, v), m in problem.edges.items():
            graph.add_edge(u, v, m)
        return graph

    def copy(self) -> WorkGraph:
        """An independent branch (arrays are shared, never mutated)."""
        return WorkGraph(vec=dict(self.vec), adj={u: dict(n) for u, n in self.adj.items()}, constant=self.constant,
                         trail=list(self.trail), counts=ReductionCounts())

    def add_edge(self, u: int, v: int, matrix: FloatArray) -> None:
        """Add ``matrix`` (shape ``(m_u, m_v)``) to the edge ``(u, v)``, creating it; absorb it if it separates."""
        if v in self.adj[u]:
            matrix = self.adj[u][v] + matrix
        if not _absorb(self, u, v, matrix):
            self.adj[u][v] = matrix
            self.adj[v][u] = matrix.T
        elif v in self.adj[u]:
            del self.adj[u][v]
            del self.adj[v][u]

    def remove(self, u: int) -> None:
        """Drop node ``u`` and its edges (the caller has folded them)."""
        for v in self.adj.pop(u):
            del self.adj[v][u]
        del self.vec[u]

    def reduce(self) -> None:
        """Apply R0, RI and RII until every remaining node has degree >= 3 (or none is left)."""
        stack = [u for u in self.vec if len(self.adj[u]) <= 2]
        while stack:
            u = stack.pop()
            if u not in self.vec:
                continue
            neighbours = list(self.adj[u])
            if len(neighbours) == 0:
                self._r0(u)
            elif len(neighbours) == 1:
                self._r1(u, neighbours[0])
            elif len(neighbours) == 2:
                self._r2(u, neighbours[0], neighbours[1])
            else:
                continue
            # only the removed node's neighbours change degree (RII's new edge joins two of them)
            stack.extend(v for v in neighbours if v in self.vec and len(self.adj[v]) <= 2)

    def fix(self, u: int, option: int) -> None:
        """RN step: commit node ``u`` to ``option`` and fold its edges into its neighbours' vectors."""
        self.constant += float(self.vec[u][option])
        for v, m in self.adj[u].items():
            self.vec[v] = self.vec[v] + m[option, :]
        self.remove(u)
        self.trail.append(Reduction("RN", u, (), np.array(option, dtype=np.int64)))
        self.counts.rn += 1

    def local_costs(self, u: int) -> FloatArray:
        """Each option's own cost plus, per neighbour, the cheapest matching option (the RN heuristic's score)."""
        total = self.vec[u].copy()
        for m in self.adj[u].values():
            total = total + m.min(axis=1)
        return total

    def lower_bound(self) -> float:
        """A lower bound on the remaining problem's optimum plus the committed constant.

        Each edge is split half-and-half between its ends: the optimum is at least
        ``sum_u min_a (c_u[a] + sum_v min_b M_uv[a, b] / 2)``.
        """
        bound = self.constant
        for u, c in self.vec.items():
            total = c.copy()
            for m in self.adj[u].values():
                total = total + 0.5 * m.min(axis=1)
            bound += float(total.min())
        return bound

    def max_degree_node(self) -> int:
        """The node to fix next: highest degree, then fewest options, then lowest index."""
        return min(self.vec, key=lambda u: (-len(self.adj[u]), self.vec[u].size, u))

    def _r0(self, u: int) -> None:
        option = int(np.argmin(self.vec[u]))
        self.constant += float(self.vec[u][option])
        self.trail.append(Reduction("R0", u, (), np.array(option, dtype=np.int64)))
        self.remove(u)
        self.counts.r0 += 1

    def _r1(self, u: int, v: int) -> None:
        total = self.vec[u][:, None] + self.adj[u][v]  # (m_u, m_v)
        choice = np.argmin(total, axis=0)
        self.vec[v] = self.vec[v] + total[choice, np.arange(total.shape[1])]
        self.trail.append(Reduction("RI", u, (v,), choice.astype(np.int64)))
        self.remove(u)
        self.counts.r1 += 1

    def _r2(self, u: int, v: int, w: int) -> None:
        total = self.vec[u][:, None, None] + self.adj[u][v][:, :, None] + self.adj[u][w][:, None, :]
        choice = np.argmin(total, axis=0)  # (m_v, m_w)
        best = np.take_along_axis(total, choice[None], axis=0)[0]
        self.trail.append(Reduction("RII", u, (v, w), choice.astype(np.int64)))
        self.remove(u)
        self.add_edge(v, w, best)
        self.counts.r2 += 1


def _absorb(graph: WorkGraph, u: int, v: int, matrix: FloatArray) -> bool:
    """Fold a separable edge ``M[a, b] = r[a] + s[b]`` into the two vectors; whether it was separable.

    Only finite matrices are tested: an ``inf`` entry couples the two choices.
    """
    if not np.isfinite(matrix).all():
        return False
    rows = matrix[:, :1]
    cols = matrix[:1, :] - matrix[0, 0]
    residual = matrix - rows - cols
    scale = max(1.0, float(np.abs(matrix).max()))
    if float(np.abs(residual).max()) > 1e-12 * scale:
        return False
    graph.vec[u] = graph.vec[u] + rows[:, 0]
    graph.vec[v] = graph.vec[v] + cols[0, :]
    return True


def back_propagate(trail: list[Reduction], n_nodes: int) -> list[int]:
    """Recover every node's option from the reductions, in reverse order.

    Parameters
    ----------
    trail
        The reductions of a complete solve (every node removed once).
    n_nodes
        Number of nodes of the instance.

    Returns
    -------
    list of int
        The assignment.
    """
    assignment = [-1] * n_nodes
    for step in reversed(trail):
        index = tuple(assignment[d] for d in step.depends_on)
        assignment[step.node] = int(step.choice[index])
    missing = [u for u, a in enumerate(assignment) if a < 0]
    if missing:
        raise RuntimeError(f"back-propagation left nodes {missing} unassigned (incomplete reduction trail)")
    return assignment
