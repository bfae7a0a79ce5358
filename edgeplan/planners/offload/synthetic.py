"""Seeded random offloading problems, for tests and benchmarks (no physical meaning)."""

from __future__ import annotations

import numpy as np

from edgeplan.errors import InvalidInputError
from edgeplan.planners.offload.costs import OBJECTIVES, MobilePowerModel, NetworkModel, OffloadCosts, OffloadProblem
from edgeplan.planners.offload.dp import metric_range

__all__ = ["LIMIT_KINDS", "random_costs", "random_problem"]

LIMIT_KINDS = ("none", "battery", "cloud", "both")
"""Which limits :func:`random_problem` sets."""


def random_costs(rng: np.random.Generator, n: int) -> OffloadCosts:
    """Random non-additive range latencies and boundary sizes for ``n`` layers.

    Per-layer mobile costs are log-normal (median 5 ms), cloud costs are those divided by a per-layer speed-up in
    ``[1, 20]``; a range ``i < j`` costs the sum of its layers times a factor in ``[0.7, 1.2]`` (independent for
    each range and side). Boundary sizes are log-uniform in ``[1e2, 1e7]`` bytes.
    """
    if n < 1:
        raise InvalidInputError(f"random_costs: n is {n}; need n >= 1")
    per_mobile = 5.0 * rng.lognormal(0.0, 1.0, size=n)
    per_cloud = per_mobile / rng.uniform(1.0, 20.0, size=n)

    def ranges(per_layer: np.ndarray) -> np.ndarray:
        cum = np.concatenate(([0.0], np.cumsum(per_layer)))
        total = cum[None, 1:] - cum[:-1, None]  # [i, j] = sum of layers i..j
        factor = rng.uniform(0.7, 1.2, size=(n, n))
        np.fill_diagonal(factor, 1.0)
        return np.where(np.triu(np.ones((n, n), dtype=bool)), total * factor, np.nan)

    sizes = np.floor(10.0 ** rng.uniform(2.0, 7.0, size=n + 1)).astype(np.int64)
    return OffloadCosts(
        layers=tuple(f"layer{k}" for k in range(n)),
        mobile_ms=ranges(per_mobile),
        cloud_ms=ranges(per_cloud),
        boundary_bytes=tuple(int(s) for s in sizes),
        mobile_label="synthetic",
        cloud_label="synthetic",
    )


def random_problem(
    rng: np.random.Generator, n: int, *, limits: str = "none", objective: str | None = None
) -> OffloadProblem:
    """A random problem: costs from :func:`random_costs`, random link and power, optional random limits.

    Parameters
    ----------
    rng
        The random generator (seed it for reproducibility).
    n
        Number of layers.
    limits
        ``"none"``, ``"battery"``, ``"cloud"`` or ``"both"``. Each limit is ``least + (greatest - least) * u**2``
        with ``u`` uniform in ``[0, 1]`` and ``least``, ``greatest`` the extremes of its quantity over all schedules
        (squared to favour binding limits): one limit alone is always feasible, both together may not be.
    objective
        ``"latency"`` or ``"energy"``; random when ``None``.

    Returns
    -------
    OffloadProblem
    """
    if limits not in LIMIT_KINDS:
        raise InvalidInputError(f"random_problem: limits {limits!r} is unknown; choose one of {', '.join(LIMIT_KINDS)}")
    up = float(10.0 ** rng.uniform(-0.5, 2.0))
    network = NetworkModel(
        name="random",
        up_mbps=up,
        down_mbps=up * float(rng.uniform(1.0, 5.0)),
        alpha_up_mw_per_mbps=float(rng.uniform(50.0, 900.0)),
        alpha_down_mw_per_mbps=float(rng.uniform(30.0, 150.0)),
        beta_mw=float(rng.uniform(100.0, 1300.0)),
        source="synthetic",
    )
    power = MobilePowerModel(compute_mw=float(rng.uniform(500.0, 5000.0)), idle_mw=float(rng.uniform(0.0, 300.0)))
    chosen = objective if objective is not None else OBJECTIVES[int(rng.integers(len(OBJECTIVES)))]
    problem = OffloadProblem(random_costs(rng, n), network, power, chosen)
    battery = cloud = None
    if limits in ("battery", "both"):
        least, most = metric_range(problem, "energy")
        battery = least + (most - least) * float(rng.uniform()) ** 2
    if limits in ("cloud", "both"):
        least, most = metric_range(problem, "cloud")
        cloud = least + (most - least) * float(rng.uniform()) ** 2
    return OffloadProblem(problem.costs, network, power, chosen, battery, cloud)
