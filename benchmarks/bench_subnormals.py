"""NN2 training speed with and without flushing subnormal floats to zero (no target; why training flushes them).

Fits one NN2 member (the ``edgeplan`` recipe, one thread) on the mulder2021 Intel table for ``--epochs`` epochs
(early stopping off), once as edgeplan trains (:func:`edgeplan.costmodels._mlp.flushed_subnormals`) and once with
the flushing switched off, and prints the seconds per epoch of each and their ratio. Late in training, some gradients
and activations fall below float32's normal range, and x86 CPUs compute on such numbers many times slower. Reads
../shared/data/mulder2021 (skips when absent). Pin it to one core.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

from _machine import machine

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "mulder2021"


@contextlib.contextmanager
def _not_flushed() -> Iterator[None]:
    yield


def seconds_per_epoch(epochs: int, flush: bool) -> float:
    from edgeplan.costmodels import _mlp, fit_performance_model, load_primitive_csv

    data = load_primitive_csv(DATA / "intel.csv")
    kept = _mlp.flushed_subnormals
    if not flush:
        _mlp.flushed_subnormals = _not_flushed
    try:
        model = fit_performance_model(data, "nn2", split_seed=0, params={"threads": 1, "n_members": 1,
                                                                         "max_epochs": epochs, "patience": epochs})
    finally:
        _mlp.flushed_subnormals = kept
    return float(model.primitives.fit_time_s_) / epochs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=300)
    args = parser.parse_args()
    print(machine(1))
    if not (DATA / "intel.csv").is_file():
        print(f"skipped: {DATA} is absent")
        return 0
    flushed = seconds_per_epoch(args.epochs, True)
    plain = seconds_per_epoch(args.epochs, False)
    print(f"NN2, one member, one thread, {args.epochs} epochs on the Intel table: {flushed:.3f} s per epoch flushing "
          f"subnormals (as edgeplan trains), {plain:.3f} s without: {plain / flushed:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
