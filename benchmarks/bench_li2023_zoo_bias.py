"""Where a scenario's shipped predictors err on the zoo CNNs: the ratio of predicted to measured end-to-end times,
the same for the sum of the ops alone, and the zoo MAPE with the learnt constant overhead against an overhead per
op learnt on the training networks (the gap between end-to-end and op times, linear in the op count).

Computed from the shipped dataset and models alone (no timing).

Usage, from the repository root::

    python benchmarks/bench_li2023_zoo_bias.py [--scenario torch-fp32-2t] [--method gbdt --method lasso]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np


def main(argv: list[str] | None = None) -> int:
    """Print the bias figures of each method's shipped model."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scenario", default="torch-fp32-2t")
    parser.add_argument("--method", action="append", dest="methods")
    args = parser.parse_args(argv)
    from edgeplan.experiments.li2023 import REAL_WORLD, dataset_path
    from edgeplan.latency.campaign import load_dataset
    from edgeplan.latency.model import LatencyModel, mape, record_latency, record_ops
    from edgeplan.latency.predict import load_device_model

    data = load_dataset(dataset_path(args.scenario))
    for method in args.methods or ["gbdt", "lasso"]:
        model = load_device_model(args.scenario, method)
        if not isinstance(model, LatencyModel):
            raise SystemExit(f"{args.scenario} is a calibrated device, not a scenario with shipped data")
        trained = set(model.info.get("train_models") or [])
        rows: dict[str, list[tuple[int, float, float, float, float]]] = {"train": [], "zoo": []}
        for r in data.records:
            group = ("zoo" if r["model"].split(":", 1)[0] in REAL_WORLD
                     else "train" if r["model"] in trained else None)
            if group is None:
                continue
            ops = record_ops(r, model.statistic)
            p = model.predict_ops(ops)
            rows[group].append((len(ops), sum(q.ms or 0.0 for q in p.ops), sum(o.measured_ms or 0.0 for o in ops),
                                record_latency(r, model.statistic), p.latency_ms))
        if not rows["zoo"]:
            print(f"{args.scenario} {method}: no zoo CNNs in the dataset")
            continue
        zoo, train = np.array(rows["zoo"]), np.array(rows["train"])
        e2e = zoo[:, 4] / zoo[:, 3]
        q1, q3 = np.percentile(e2e, [25, 75])
        print(f"{args.scenario} {method} ({model.statistic}; {len(zoo)} zoo CNNs): predicted / measured end to end "
              f"median {np.median(e2e):.3f}x (quartiles {q1:.3f}-{q3:.3f}x); op sums "
              f"{np.median(zoo[:, 1] / zoo[:, 2]):.3f}x")
        if len(train) < 2:
            print("  (the model records no training networks of this dataset: no per-op overhead fit)")
            continue
        gap = train[:, 3] - train[:, 2]  # end to end minus the measured ops, on the training networks
        slope, intercept = np.polyfit(train[:, 0], gap, 1)
        constant = np.full(len(zoo), float(np.mean(gap)))
        for name, overhead in (("constant", constant), ("per op", intercept + slope * zoo[:, 0])):
            total = np.maximum(zoo[:, 1] + overhead, 0.5 * zoo[:, 1])
            print(f"  overhead {name:<8} zoo MAPE {mape(list(total), list(zoo[:, 3])):.2f}%"
                  + (f"  ({intercept:.2f} ms + {1000 * slope:.1f} us per op, from {len(train)} training networks)"
                     if name == "per op" else f"  ({np.mean(gap):.2f} ms)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
