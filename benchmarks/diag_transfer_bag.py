"""Intel -> AMD transfer: bagged fine-tuning, tried and not adopted (issue 5 diagnostic, no target).

For each drawn sample, ``--bag`` fine-tunings of ``--method`` (default ``factor-finetune``) from the same source on
the same drawn rows, each cross-fitted with other folds and shuffled from another seed (the first is the plain
method's own), combined by the geometric mean of their predictions. With the pooled factor the bag's members share
their output scaling, so the bag would be one NN2 with ``bag x 4`` members; here it is only scored.

Outcome (1 %, seeds 0-7, bag of 5, 2026-11-26, medians, MdRAE / mean selection increase): single 10.68 % / 4.87 %,
bag 10.63 % / 3.64 % (log ``campaigns/diag_bag_1.log``): early stopping on a few rows is not what holds the MdRAE
at 1 % above the target; the increase moves, within the spread of eight draws. At 10 % (bag of 3, seeds 0-3):
``factor-finetune`` 3.89 % / 1.52 % single, 3.82 % / 1.46 % bagged (``--fraction 0.1 --repeats 4 --bag 3``, log
``campaigns/diag_bag_10_ff.log``); ``finetune`` (seeds 0-2, stopped there) 4.27 / 2.19 -> 4.09 / 4.11, 4.05 / 1.62 ->
4.03 / 1.40, 3.94 / 1.48 -> 4.06 / 2.03 (``--method finetune``, log ``campaigns/diag_bag_10_ft.log``): no gain on the
10 % increase target either.

Scores as ``bench_transfer.py``. Reads ../shared/data/mulder2021 and the Intel NN2 of ``make bench-costmodels``
(out/costmodels/intel-nn2). Pin it to one core: it measures accuracy, not time.
"""

from __future__ import annotations

import argparse
import sys
import time

from diag_transfer_probe import GeometricMean, load_setup, print_medians, score_into, transfer_arguments

from edgeplan.costmodels import draw_samples
from edgeplan.costmodels.transfer_learning import transfer_on


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    transfer_arguments(parser, repeats=8)
    parser.add_argument("--bag", type=int, default=5)
    parser.add_argument("--method", default="factor-finetune", choices=["finetune", "factor-finetune"])
    args = parser.parse_args()
    loaded = load_setup(args.source)
    if loaded is None:
        return 0
    source, amd, score = loaded
    print(f"Intel -> AMD, {100 * args.fraction:g} % of AMD's training part, {args.method}, bag of {args.bag}; "
          f"MdRAE % / mean selection increase %")
    results: dict[str, list[tuple[float, float]]] = {}
    for seed in range(args.repeats):
        started = time.monotonic()
        sample = draw_samples(amd, args.fraction, seed, 0)
        models = [transfer_on(source, amd, sample, seed=seed * 1000 + k if k else seed, method=args.method,
                              threads=1, settings=(args.fraction, 0)) for k in range(args.bag)]
        scored = score_into(score, {"single": models[0], f"bag of {args.bag}": GeometricMean(models)}, results)
        print(f"seed {seed} ({len(sample)} rows): {scored} ({time.monotonic() - started:.0f} s)", flush=True)
    print_medians(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
