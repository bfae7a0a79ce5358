"""benchmarks/bench_li2023_zoo_bias.py --worst: the models predicted furthest from their measured time."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import numpy as np


def _bench() -> ModuleType:
    path = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_li2023_zoo_bias.py"
    spec = importlib.util.spec_from_file_location("bench_li2023_zoo_bias", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_worst_ranks_by_distance_from_one_on_a_log_scale_both_ways() -> None:
    # per model: ops, predicted op sum, measured op sum, measured end to end, predicted end to end
    rows = np.array([[10, 9.0, 10.0, 10.0, 9.0],     # 0.9x
                     [20, 20.0, 10.0, 10.0, 20.0],   # 2x: as far as 0.5x
                     [30, 5.0, 10.0, 10.0, 5.0],     # 0.5x
                     [40, 10.0, 10.0, 20.0, 21.0]])  # 1.05x, op sum right: work outside the ops
    group = {"rows": rows, "models": ["a", "b", "c", "d"]}
    lines = _bench().worst(group, 3)
    assert [line.split()[0] for line in lines] == ["b", "c", "a"]
    assert "predicted 2.000x, op sum 2.000x, 20 ops" in lines[0]
    assert "20.00 ms  predicted 1.050x, op sum 1.000x" in _bench().worst(group, 4)[3]
