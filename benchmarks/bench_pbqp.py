"""PBQP solvers on 1000 seeded random instances (issue 5: "PBQP returns the exact optimum").

Instances 0-499 have 2 to 8 nodes and are checked against brute force; instances 500-999 have 9 to 200 nodes and
are checked against the ILP (HiGHS, MIP gap 0). Shapes and cost styles rotate over
:data:`edgeplan.planners.pbqp.SHAPES` x (layout, dense); ``random`` graphs (no series-parallel structure, mean
degree 3) are kept to at most 60 nodes, where the exact search proves optimality in seconds. Prints, per group,
how many answers match the reference, and the solve times; the heuristic (RN) is scored beside.
"""

from __future__ import annotations

import argparse
import statistics
import sys

from _machine import machine

from edgeplan.measure.progress import counting_bar
from edgeplan.planners.pbqp import SHAPES, random_instance, solve

STYLES = ("layout", "dense")


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-7 * max(1.0, abs(a), abs(b))


def instance(index: int):  # type: ignore[no-untyped-def]
    """The seeded instance number ``index`` and its reference solver."""
    shape = SHAPES[index % len(SHAPES)]
    style = STYLES[(index // len(SHAPES)) % len(STYLES)]
    if index < 500:
        n, options, reference = 2 + index % 7, (2, 6), "brute"
    else:
        top = 60 if shape == "random" else 200
        n, options, reference = 9 + (index * 7919) % (top - 8), (2, 12), "ilp"
    return random_instance(index, n, shape=shape, style=style, options=options), reference, shape


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=1000, help="instances (first N of the fixed sequence)")
    args = parser.parse_args()
    print(machine(1))
    rows: dict[tuple[str, str], list[tuple[bool, bool, bool, float, float, int]]] = {}
    with counting_bar(sys.stderr.isatty(), "PBQP instances", args.count) as advance:
        for index in range(args.count):
            problem, reference, shape = instance(index)
            ref = solve(problem, reference, time_limit_s=120)
            exact = solve(problem, "exact", time_limit_s=120)
            heuristic = solve(problem, "heuristic")
            rows.setdefault((reference, shape), []).append((
                _close(exact.cost, ref.cost) and exact.optimal and ref.optimal,
                _close(heuristic.cost, ref.cost),
                heuristic.optimal,
                exact.time_s, ref.time_s, problem.n_nodes,
            ))
            advance(1)
    print(f"\n{'reference':<9} {'shape':<11} {'inst':>5} {'nodes':>8} {'exact=ref':>10} {'RN optimal':>11} "
          f"{'RN needed':>10} {'exact ms med/max':>17} {'ref ms med':>11}")
    total = matched = 0
    for (reference, shape), items in sorted(rows.items()):
        ok = sum(r[0] for r in items)
        total += len(items)
        matched += ok
        exact_ms = [1000 * r[3] for r in items]
        print(f"{reference:<9} {shape:<11} {len(items):>5} {min(r[5] for r in items):>3}-{max(r[5] for r in items):<4} "
              f"{ok:>6}/{len(items):<3} {sum(r[1] for r in items):>7}/{len(items):<3} "
              f"{sum(not r[2] for r in items):>10} {statistics.median(exact_ms):>8.1f}/{max(exact_ms):<8.1f} "
              f"{statistics.median(1000 * r[4] for r in items):>11.1f}")
    print(f"\nexact solver = reference (brute force up to 8 nodes, ILP up to 200): {matched}/{total} "
          f"({'PASS' if matched == total else 'FAIL'}: every instance)")
    return 0 if matched == total else 1


if __name__ == "__main__":
    sys.exit(main())
