"""How much §5.3's few-network figure depends on which networks are drawn: zoo MAPE of GBDT trained on N networks of
one of edgeplan's synthetic spaces, over disjoint windows of N seeds (0..N-1, N..2N-1, ...).

``edgeplan reproduce li2023`` reports the first N networks of each space (the issue's "only 30 synthetic training
networks" target); this prints the same fit for every other window of the space's seeds the file holds, so that the
spread of the figure over draws from the same space can be read beside it. Predictors keyed by implementation, as
``reproduce li2023``; folded work priced as there.

Usage, from the repository root::

    python benchmarks/bench_li2023_few.py --data FILE [--space synthetic-aligned] [--networks 30] [--windows 10]
        [--no-context]
"""

from __future__ import annotations

import argparse
import platform
import sys
from pathlib import Path

import numpy as np


def main(argv: list[str] | None = None) -> int:
    """Print the zoo MAPE of each window and their median and spread."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, required=True, help="a per-op dataset file (`edgeplan ops export`)")
    parser.add_argument("--space", action="append", dest="spaces", metavar="FAMILY",
                        help="synthetic space family (repeat for several; default every one the file holds)")
    parser.add_argument("--networks", type=int, default=30, help="training networks per window")
    parser.add_argument("--windows", type=int, default=10, help="most windows per space")
    parser.add_argument("--method", default="gbdt", choices=("gbdt", "lasso", "rf", "mlp"))
    parser.add_argument("--statistic", default="median", choices=("median", "min"))
    parser.add_argument("--no-context", action="store_true",
                        help="fit on each op's own features alone, as li2023 (before 2026-11-28, the only way)")
    args = parser.parse_args(argv)
    from edgeplan.costmodels.opwise.model import LatencyModel
    from edgeplan.costmodels.opwise.model_files import scenario_threads
    from edgeplan.measure.op_dataset import load_dataset
    from experiments.li2023 import _evaluate, _spaces, _split

    if args.networks < 1 or args.windows < 1:
        parser.error("--networks and --windows must be positive")
    data = load_dataset(args.data)
    _, _, zoo = _split(data)
    spaces = _spaces(data)
    unknown = sorted(set(args.spaces or ()) - set(spaces))
    if unknown or not spaces or not zoo:
        parser.error(f"{args.data} needs zoo CNNs and networks of the spaces asked for; it holds {len(zoo)} zoo "
                     f"CNNs and the spaces {', '.join(spaces) or 'none'}")
    threads = scenario_threads(data.scenario)
    print(f"{args.data} on {data.provenance.get('device', {}).get('cpu_model', '?')} (run on {platform.node()}): "
          f"{args.method} ({args.statistic}{', own features' if args.no_context else ', with context features'}) "
          f"trained on {args.networks} networks of one space, zoo MAPE over "
          f"{len(zoo)} CNNs")
    for family, records in spaces.items():
        if args.spaces and family not in args.spaces:
            continue
        figures = []
        for w in range(min(args.windows, len(records) // args.networks)):
            window = records[w * args.networks:(w + 1) * args.networks]
            model = LatencyModel.fit(window, args.method, data.scenario, statistic=args.statistic, threads=threads,
                                     context=not args.no_context)
            figures.append(_evaluate(model, zoo)["mape"])
            seeds = f"{window[0]['model'].split(':')[1]}-{window[-1]['model'].split(':')[1]}"
            print(f"  {family:<18} seeds {seeds:<9} zoo MAPE {figures[-1]:6.2f}%", flush=True)
        if figures:
            q = np.percentile(figures, [25, 50, 75])
            print(f"  {family:<18} {len(figures)} windows: median {q[1]:.2f}% (quartiles {q[0]:.2f}-{q[2]:.2f}%, "
                  f"range {min(figures):.2f}-{max(figures):.2f}%); at most 7%: {sum(f <= 7 for f in figures)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
