"""Offloading planner: the three solvers agree on 1000 seeded random instances, and how fast they are.

1000 instances, n uniform in 1..12, a quarter each with no limit, a battery budget, a cloud-time limit and both
(limits drawn by :func:`edgeplan.planners.offload.synthetic.random_problem`). Every instance is solved by the DP,
the ILP (HiGHS) and brute force through :func:`edgeplan.planners.offload.solve`, which runs the independent
checker on every plan. Agreement: objective values within 1e-6 relative, or infeasible for all three with the
same least feasible budget. Then the DP and ILP wall times at n = 36 (20 instances per limit kind).
Run twice: with the paper's model (same-side splits allowed) and edgeplan's default (none). Exits 1 on any
disagreement.
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
import time

import numpy as np
from _machine import machine

from edgeplan.planners.offload import OffloadInfeasibleError, OffloadProblem, solve
from edgeplan.planners.offload.synthetic import LIMIT_KINDS, random_problem

SOLVERS = ("dp", "ilp", "brute")
SEED = 20180401


def _outcome(problem: OffloadProblem, solver: str) -> tuple[str, float, float]:
    """("ok", objective) or ("infeasible", least feasible budget), and the wall time in ms."""
    start = time.perf_counter()
    try:
        plan = solve(problem, solver)
    except OffloadInfeasibleError as e:
        return "infeasible", e.smallest_feasible, (time.perf_counter() - start) * 1e3
    value = plan.latency_ms if problem.objective == "latency" else plan.energy_mj
    return "ok", value, (time.perf_counter() - start) * 1e3


def agreement(count: int, same_side_splits: bool) -> int:
    rng = np.random.default_rng(SEED)
    times: dict[str, list[float]] = {s: [] for s in SOLVERS}
    tally = {kind: {"instances": 0, "feasible": 0, "infeasible": 0, "disagree": 0} for kind in LIMIT_KINDS}
    start = time.perf_counter()
    for i in range(count):
        kind = LIMIT_KINDS[i % len(LIMIT_KINDS)]
        problem = random_problem(rng, int(rng.integers(1, 13)), limits=kind)
        problem = dataclasses.replace(problem, same_side_splits=same_side_splits)
        outcomes = {}
        for solver in SOLVERS:
            status, value, ms = _outcome(problem, solver)
            outcomes[solver] = (status, value)
            times[solver].append(ms)
        statuses = {status for status, _ in outcomes.values()}
        values = [value for _, value in outcomes.values()]
        same = len(statuses) == 1 and all(np.isclose(v, values[0], rtol=1e-6, atol=0.0) for v in values)
        row = tally[kind]
        row["instances"] += 1
        if same:
            row["infeasible" if statuses == {"infeasible"} else "feasible"] += 1
        else:
            row["disagree"] += 1
            print(f"  DISAGREE instance {i} (n = {problem.costs.n}, {kind}, {problem.objective}): {outcomes}")
    total_s = time.perf_counter() - start
    model = "the paper's model (same-side splits allowed)" if same_side_splits else "edgeplan's default (no splits)"
    print(f"agreement, {model}: {count} random instances, n uniform in 1..12, seed {SEED}, {total_s:.1f} s in all")
    for kind, row in tally.items():
        print(
            f"  {kind:8s} {row['instances']:4d} instances: {row['feasible']:4d} agree on the optimum, "
            f"{row['infeasible']:3d} agree it is infeasible, {row['disagree']} disagree"
        )
    for solver in SOLVERS:
        ts = times[solver]
        print(
            f"  {solver:5s} total {sum(ts) / 1e3:6.2f} s, median {statistics.median(ts):7.2f} ms, "
            f"max {max(ts):8.2f} ms per instance"
        )
    return sum(row["disagree"] for row in tally.values())


def timing_n36(per_kind: int) -> None:
    rng = np.random.default_rng(SEED + 36)
    print(f"n = 36: wall time of solve() per instance ({per_kind} random instances per limit kind), median / max")
    for kind in LIMIT_KINDS:
        times: dict[str, list[float]] = {"dp": [], "ilp": []}
        infeasible = 0
        for _ in range(per_kind):
            problem = random_problem(rng, 36, limits=kind)
            results = {}
            for solver in times:
                status, value, ms = _outcome(problem, solver)
                times[solver].append(ms)
                results[solver] = (status, value)
            infeasible += results["dp"][0] == "infeasible"
            if results["dp"][0] != results["ilp"][0] or not np.isclose(results["dp"][1], results["ilp"][1], rtol=1e-6):
                print(f"  DISAGREE at n = 36 ({kind}): {results}")
        print(
            f"  {kind:8s} dp {statistics.median(times['dp']):7.2f} / {max(times['dp']):7.2f} ms   "
            f"ilp {statistics.median(times['ilp']):8.1f} / {max(times['ilp']):8.1f} ms   ({infeasible} infeasible)"
        )


def main() -> int:
    print(f"machine: {machine(1)}")
    disagreements = agreement(1000, same_side_splits=True) + agreement(1000, same_side_splits=False)
    timing_n36(20)
    return 1 if disagreements else 0


if __name__ == "__main__":
    sys.exit(main())
