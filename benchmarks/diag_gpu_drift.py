"""Where a GPU's primitive-table noise comes from: two GPUs' tables of the same configurations compared.

The shipped H100 and H200 tables (``edgeplan/data/primitives/reference_h{100,200}.csv``, both made by
``benchmarks/gpu_primitives.sh``) hold the same configurations of the zoo space, measured in the campaign's seeded
order. This diagnostic prints, from those files alone:

- per primitive, the median ratio of the second GPU's time to the first's, and the MdRAE of the first GPU's
  measured times taken as the second's (as is, and rescaled by that median ratio);
- per configuration, the median log ratio over its primitives, and its autocorrelation along the order the
  campaign measured the configurations in (the seeded plan of :func:`edgeplan.measure.primitive_campaign.primitive_campaign`):
  a machine whose speed drifts over seconds makes neighbours alike, independent noise does not;
- the second GPU's re-measurement (``--again``): the per-configuration ratio of the second run to the first;
- the network tables (``--nets``): how many primitive cells are over 2.5x the first GPU's value.

No GPU is needed: it reads measured tables.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "edgeplan" / "data" / "primitives"
KEY = ("c", "k", "im", "f", "s")


def table(path: Path) -> dict[tuple[int, ...], dict[str, float]]:
    """``{(c, k, im, f, s): {primitive: ns}}`` of a shipped primitive table (transformation columns left out)."""
    import csv

    rows: dict[tuple[int, ...], dict[str, float]] = {}
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            key = tuple(int(row[k]) for k in KEY)
            rows[key] = {p: float(v) for p, v in row.items() if p not in KEY and "-to-" not in p and v}
    return rows


def config_ratios(first: dict[tuple[int, ...], dict[str, float]], second: dict[tuple[int, ...], dict[str, float]],
                  keys: list[tuple[int, ...]]) -> np.ndarray:
    """Per configuration of ``keys``, the median over its primitives of log(second / first)."""
    return np.array([np.median([np.log(second[k][p] / first[k][p]) for p in second[k] if p in first[k]])
                     for k in keys])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--first", type=Path, default=DATA / "reference_h200.csv")
    parser.add_argument("--second", type=Path, default=DATA / "reference_h100.csv")
    parser.add_argument("--again", type=Path, default=DATA / "reference_h100_remeasure100.csv",
                        help="The second GPU's configurations measured again.")
    parser.add_argument("--nets", type=Path, nargs=2, default=[DATA / "networks_h200.csv", DATA / "networks_h100.csv"],
                        metavar=("FIRST", "SECOND"), help="The two GPUs' network tables.")
    parser.add_argument("--seed", type=int, default=0, help="The campaigns' seed (their plan's order).")
    args = parser.parse_args()

    from edgeplan.measure.primitive_campaign import primitive_campaign

    first, second = table(args.first), table(args.second)
    plan = primitive_campaign("order", seed=args.seed, device="cuda")
    order = [k for k in ((s.c, s.k, s.im, s.f, s.s) for s in plan.configs) if k in first and k in second]
    print(f"{args.first.name} ({len(first)} configurations) and {args.second.name} ({len(second)}): {len(order)} "
          "shared, taken in the campaigns' measuring order")

    primitives = sorted({p for k in order for p in second[k] if p in first[k]})
    ratios, direct, rescaled = [], [], []
    for p in primitives:
        x = np.array([first[k][p] for k in order if p in first[k] and p in second[k]])
        y = np.array([second[k][p] for k in order if p in first[k] and p in second[k]])
        r = float(np.median(y / x))
        ratios.append(r)
        direct.append(float(np.median(np.abs(x - y) / y)))
        rescaled.append(float(np.median(np.abs(r * x - y) / y)))
    print(f"per primitive ({len(primitives)}): median ratio second/first {np.min(ratios):.3f}-{np.max(ratios):.3f} "
          f"(median {np.median(ratios):.3f}); the first's times as the second's: MdRAE {100 * np.median(direct):.2f} %"
          f" as is, {100 * np.median(rescaled):.2f} % rescaled per primitive")

    lr = config_ratios(first, second, order)
    q = np.exp(np.percentile(lr, [10, 25, 50, 75, 90]))
    print("per configuration, ratio second/first (median over its primitives): 10/25/50/75/90th percentiles "
          + " / ".join(f"{v:.3f}" for v in q))
    centred = lr - lr.mean()
    lags = [lag for lag in (1, 2, 5, 20, 100) if lag < len(centred) - 2]
    corr = [float(np.corrcoef(centred[:-lag], centred[lag:])[0, 1]) for lag in lags]
    print("  its autocorrelation along the measuring order: "
          + ", ".join(f"lag {lag} {c:.2f}" for lag, c in zip(lags, corr, strict=True)))

    if args.again.is_file():
        again = table(args.again)
        shared = [k for k in order if k in again]
        r2 = np.exp(config_ratios(second, again, shared))
        print(f"{args.again.name}: {len(shared)} configurations measured again; per configuration, ratio again/first "
              f"run: median {np.median(r2):.3f}, 75th {np.percentile(r2, 75):.3f}, 90th {np.percentile(r2, 90):.3f}, "
              f"over 1.4x: {int((r2 > 1.4).sum())}")

    a, b = table(args.nets[0]), table(args.nets[1])
    cells = np.array([b[k][p] / a[k][p] for k in a if k in b for p in a[k] if p in b[k]])
    print(f"network tables {args.nets[0].name} / {args.nets[1].name}: {len(cells)} primitive cells, "
          f"{int((cells > 2.5).sum())} over 2.5x the first's, the largest {cells.max():.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
