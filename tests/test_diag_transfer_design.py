"""The sample designs benchmarks/diag_transfer_design.py compares with the library's (stratified shapes, maximin)."""

from __future__ import annotations

from typing import Any

import numpy as np
from benchmark_loader import load_benchmark


def _diag() -> Any:
    return load_benchmark("diag_transfer_design")


def _grid() -> np.ndarray:
    rng = np.random.default_rng(1)
    sizes = np.unique(np.column_stack([rng.choice([3, 16, 64, 256], 80), rng.choice([16, 64, 256], 80),
                                       rng.choice([7, 28, 112], 80)]), axis=0)
    return np.array([[*b, f, s] for b in sizes for f, s in [(1, 1), (3, 1), (3, 2)]], dtype=float)


def test_stratified_shapes_take_turns() -> None:
    x = _grid()
    rows = _diag()._shapes(x, np.arange(len(x)), 10, seed=0)
    assert len(rows) == 10 == len(np.unique(rows))
    counts = np.unique(x[rows][:, 3:], axis=0, return_counts=True)[1]
    assert sorted(counts.tolist()) == [3, 3, 4]


def test_maximin_takes_distinct_extreme_sizes_with_balanced_shapes() -> None:
    x = _grid()
    rows = _diag()._maximin(x, np.arange(len(x)), 6, seed=0)
    assert len(np.unique(x[rows][:, :3], axis=0)) == 6
    assert np.unique(x[rows][:, 3:], axis=0, return_counts=True)[1].tolist() == [2, 2, 2]
    logs = np.log(x[rows][:, :3])
    assert (logs.max(axis=0) - logs.min(axis=0) >= 0.9 * (np.log(x[:, :3]).max(axis=0)
                                                          - np.log(x[:, :3]).min(axis=0))).any()
