"""From how many training networks does a network feature help? (issue 3 diagnostic, no target)

Fits GBDT (median, keyed by implementation, context features, linear overhead) on the first N of li2023's synthetic
networks of a file, and on the first 30 of each of edgeplan's synthetic spaces in it, with and without a network
feature (``--feature``, default ``peak``: :data:`edgeplan.costmodels.opwise.features.NETWORK_CHOICES`), and prints the MAPE of
synthetic:900-999 and of the zoo CNNs as ``edgeplan reproduce li2023`` scores them. A network feature has one value
per training network; with few networks the trees can use it to tell them apart. This is the measurement behind
``--network-context auto``'s count (:data:`edgeplan.costmodels.opwise.model.NETWORK_AUTO`).

2026-12-01, Zen 5 keep-memory 2-thread file, ``peak`` (log ``campaigns/diag_network_sizes_s42.log``; the same
figures as the ad hoc run that set the count): with / without, synthetic / zoo, first 30 of the 900 5.03 / 10.94
against 4.96 / 10.38 %; 100 7.29 / 10.15 against 6.24 / 10.31 %; 300 4.64 / 12.70 against 4.38 / 12.21 %; the zoo
from the first 30 of a space: aligned 13.28 / 13.58 %, heads 14.13 / 15.18 %, stages 8.31 / 8.35 %, modern
9.46 / 9.76 %, mixed 7.84 / 6.74 %, nf 9.85 / 9.14 %. The 900 itself is ``make bench-li2023-2t-zen5-keep`` (2.45 /
11.17 % with it) against the same without ``--network-context auto`` (2.75 / 10.64 %).

    python benchmarks/diag_li2023_network_sizes.py [--data FILE] [--feature peak] [--sizes 30 100 300] [--spaces]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

DATA = Path("edgeplan/data/latency/epyc-zen5-keep/torch-fp32-2t.jsonl.xz")


def run(args: argparse.Namespace) -> None:
    """Fit and score as the module docstring says."""
    from _machine import machine

    from edgeplan.costmodels.opwise.model import LatencyModel
    from edgeplan.costmodels.opwise.model_files import scenario_threads
    from edgeplan.measure.op_dataset import load_dataset
    from experiments.li2023 import _evaluate, _spaces, _split

    data = load_dataset(args.data)
    train, test, zoo = _split(data)
    threads = scenario_threads(data.scenario)
    print(f"{machine(threads)}\n{args.data}: gbdt, with and without --network-context {args.feature}", flush=True)
    sets: list[tuple[str, list[Any]]] = [(f"first {n} of the 900", train[:n]) for n in args.sizes]
    if args.spaces:
        sets += [(f"first 30 of {family}", rs[:30]) for family, rs in _spaces(data).items()]
    for label, records in sets:
        scores = []
        for network in (args.feature, False):
            model = LatencyModel.fit(records, "gbdt", data.scenario, statistic="median", threads=threads,
                                     context=True, overhead="linear", network=network)
            scores.append(f"{_evaluate(model, test)['mape']:.2f} / {_evaluate(model, zoo)['mape']:.2f} %")
        print(f"  {label} ({len(records)} networks): synthetic:900-999 / zoo MAPE with {args.feature} {scores[0]}, "
              f"without {scores[1]}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--feature", choices=("distinct", "total", "peak"), default="peak")
    parser.add_argument("--sizes", type=int, nargs="*", default=[30, 100, 300],
                        help="fit on the first N of li2023's synthetic networks, for each N")
    parser.add_argument("--spaces", action="store_true", help="also fit on the first 30 of each synthetic space")
    args = parser.parse_args(argv)
    if not args.data.is_file():
        print(f"skipped: {args.data} is not here", file=sys.stderr)
        return 0
    run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
