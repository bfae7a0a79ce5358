"""Seeded random PBQP instances for verifying the solvers (tests and benchmarks).

Four graph shapes: ``chain`` (a plain CNN), ``cnn`` (chains with residual skips and inception-style
branch-and-join blocks, series-parallel like the networks of mulder2020), ``cnn+chords`` (the same with a few
random long-range edges, so that RN or the search is needed) and ``random`` (Erdos-Renyi with a given mean
degree, the hard case). Two cost styles: ``dense`` (every matrix entry independent) and ``layout`` (each option
has an input and output layout among three, and an edge costs the transformation between the producer's output
layout and the consumer's input layout, as in primitive selection). A fraction of options is forbidden (``inf``).
"""

from __future__ import annotations

import numpy as np

from edgeplan.errors import InvalidInputError
from edgeplan.planners.pbqp.problem import FloatArray, PBQPProblem

__all__ = ["SHAPES", "random_instance"]

SHAPES = ("chain", "cnn", "cnn+chords", "random")


def _edges_of(shape: str, n: int, rng: np.random.Generator, mean_degree: float) -> list[tuple[int, int]]:
    if shape == "chain":
        return [(u, u + 1) for u in range(n - 1)]
    if shape == "random":
        p = min(1.0, mean_degree / max(1, n - 1))
        pairs = [(u, v) for u in range(n) for v in range(u + 1, n) if rng.random() < p]
        return pairs
    edges: list[tuple[int, int]] = []
    u = 0
    while u < n - 1:
        block = int(rng.integers(0, 3))
        if block == 0 or n - u < 4:  # plain link
            edges.append((u, u + 1))
            u += 1
        elif block == 1:  # residual block: u -> a -> b, skip u -> b
            a, b = u + 1, min(u + 2, n - 1)
            edges += [(u, a), (a, b), (u, b)] if b != a else [(u, a)]
            u = b
        else:  # inception: u fans out to 2-3 branches that join at j
            width = int(rng.integers(2, 4))
            j = min(u + width + 1, n - 1)
            branches = list(range(u + 1, j))
            edges += [(u, w) for w in branches] + [(w, j) for w in branches]
            u = j
    if shape == "cnn+chords":
        for _ in range(max(1, n // 20)):
            a, b = sorted(int(x) for x in rng.choice(n, size=2, replace=False))
            if b - a > 1:
                edges.append((a, b))
    return edges


def random_instance(seed: int, n_nodes: int, *, shape: str = "cnn", style: str = "layout",
                    options: tuple[int, int] = (2, 8), forbidden: float = 0.15,
                    mean_degree: float = 3.0) -> PBQPProblem:
    """A seeded random instance.

    Parameters
    ----------
    seed
        Seed of everything random in it.
    n_nodes
        Number of nodes.
    shape
        One of :data:`SHAPES`.
    style
        ``"layout"`` or ``"dense"`` edge costs (see the module docstring).
    options
        Smallest and largest number of options per node (inclusive).
    forbidden
        Probability that an option is forbidden (``inf``); every node keeps at least one finite option.
    mean_degree
        Mean degree of the ``random`` shape.

    Returns
    -------
    PBQPProblem
    """
    if shape not in SHAPES:
        raise InvalidInputError(f"unknown instance shape {shape!r}; choose one of {', '.join(SHAPES)}")
    if style not in ("layout", "dense"):
        raise InvalidInputError(f"unknown cost style {style!r}; choose 'layout' or 'dense'")
    rng = np.random.default_rng(seed)
    sizes = rng.integers(options[0], options[1] + 1, size=n_nodes)
    costs: list[FloatArray] = []
    layouts: list[tuple[np.ndarray, np.ndarray]] = []
    for m in sizes:
        c = rng.lognormal(mean=0.0, sigma=1.0, size=int(m))
        c[rng.random(int(m)) < forbidden] = np.inf
        if not np.isfinite(c).any():
            c[int(rng.integers(0, m))] = rng.lognormal()
        costs.append(c)
        layouts.append((rng.integers(0, 3, size=int(m)), rng.integers(0, 3, size=int(m))))
    edges: dict[tuple[int, int], FloatArray] = {}
    for u, v in _edges_of(shape, n_nodes, rng, mean_degree):
        if style == "dense":
            matrix = rng.lognormal(mean=-1.0, sigma=1.0, size=(int(sizes[u]), int(sizes[v])))
        else:
            transform = rng.lognormal(mean=-1.0, sigma=0.5, size=(3, 3))
            np.fill_diagonal(transform, 0.0)
            matrix = transform[layouts[u][1][:, None], layouts[v][0][None, :]]
        edges[(u, v)] = edges[(u, v)] + matrix if (u, v) in edges else matrix
    return PBQPProblem.build(costs, edges)
