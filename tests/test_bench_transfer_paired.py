"""Paired comparisons by draw in benchmarks/bench_transfer.py (a variant against its method) and
benchmarks/diag_transfer_bag.py (the bag against the single fine-tuning)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from benchmark_loader import load_benchmark


def _bench() -> Any:
    return load_benchmark("bench_transfer")


def _run(method: str, seed: int, mdrae: float, increase: float) -> dict[str, float | int | str]:
    return {"fraction": 0.01, "method": method, "seed": seed, "mdrae_pct": mdrae, "increase_pct": increase,
            "googlenet_pct": increase / 2}


def test_paired_counts_and_median_differences_by_seed() -> None:
    bench = _bench()
    base = [_run("finetune", s, m, i) for s, m, i in [(0, 10.0, 3.0), (1, 12.0, 4.0), (2, 9.0, 5.0)]]
    # seed 3 has no base run: it is left out; seed order differs from the base's
    variant = [_run("finetune-refit", s, m, i) for s, m, i in [(2, 8.0, 6.0), (0, 9.5, 3.5), (1, 12.5, 2.0),
                                                               (3, 1.0, 1.0)]]
    p = bench.paired(base, variant)
    assert p["mdrae_pct"] == (3, 2, pytest.approx(-0.5))  # diffs -0.5, +0.5, -1.0
    assert p["increase_pct"] == (3, 1, pytest.approx(0.5))  # diffs +0.5, -2.0, +1.0
    assert p["googlenet_pct"][:2] == (3, 1)
    empty = bench.paired(base, [_run("finetune-refit", 9, 1.0, 1.0)])
    assert empty["mdrae_pct"][:2] == (0, 0) and math.isnan(empty["mdrae_pct"][2])


def test_print_paired_only_for_variants_whose_method_ran(capsys: pytest.CaptureFixture[str]) -> None:
    bench = _bench()
    groups = {(0.01, "finetune"): [_run("finetune", 0, 10.0, 3.0)],
              (0.01, "finetune-refit"): [_run("finetune-refit", 0, 9.0, 4.0)],
              (0.01, "factor-finetune-refit"): [_run("factor-finetune-refit", 0, 8.0, 4.0)]}
    bench.print_paired(groups)
    out = capsys.readouterr().out
    assert "finetune-refit" in out and " 1 of  1 lower,  -1.00" in out and " 0 of  1 lower,  +1.00" in out
    assert "factor-finetune-refit" not in out  # its method, factor-finetune, did not run
    bench.print_paired({(0.01, "finetune"): [_run("finetune", 0, 10.0, 3.0)]})
    assert capsys.readouterr().out == ""


def test_the_bag_diagnostic_compares_by_draw() -> None:
    bag = load_benchmark("diag_transfer_bag")
    line = bag.compare([(10.0, 3.0), (12.0, 4.0), (9.0, 5.0)], [(9.5, 3.5), (12.5, 2.0), (8.0, 4.0)])
    assert "MdRAE 9.50 % [8.00, 12.50] with the bag, lower in 2 of 3 draws, median paired difference -0.50" in line
    assert "increase 3.50 % [2.00, 4.00] with the bag, lower in 2 of 3 draws, median paired difference -1.00" in line
