"""Paired comparisons by draw in benchmarks/bench_transfer.py (each method against the shipped default), its Table 5
levels and agreement, and its targets."""

from __future__ import annotations

import argparse
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
    variant = [_run("default", s, m, i) for s, m, i in [(2, 8.0, 6.0), (0, 9.5, 3.5), (1, 12.5, 2.0),
                                                        (3, 1.0, 1.0)]]
    p = bench.paired(base, variant)
    assert p["mdrae_pct"] == (3, 2, pytest.approx(-0.5))  # diffs -0.5, +0.5, -1.0
    assert p["increase_pct"] == (3, 1, pytest.approx(0.5))  # diffs +0.5, -2.0, +1.0
    assert p["googlenet_pct"][:2] == (3, 1)
    empty = bench.paired(base, [_run("default", 9, 1.0, 1.0)])
    assert empty["mdrae_pct"][:2] == (0, 0) and math.isnan(empty["mdrae_pct"][2])


def test_each_method_pairs_with_the_default_when_it_ran(capsys: pytest.CaptureFixture[str]) -> None:
    bench = _bench()
    groups = {(0.01, "default"): [_run("default", 0, 10.0, 3.0), _run("default", 1, 9.0, 4.0)],
              (0.01, "finetune"): [_run("finetune", 0, 9.0, 4.0), _run("finetune", 1, 8.0, 5.0)],
              (0.01, "factor-finetune"): [_run("factor-finetune", 0, 10.5, 2.0), _run("factor-finetune", 1, 9.5, 3.0)],
              (0.1, "finetune"): [_run("finetune", 0, 8.0, 4.0)]}
    bench.print_paired(groups)
    out = capsys.readouterr().out
    assert "finetune               vs default" in out and " 2 of  2 lower,  -1.00" in out
    assert "factor-finetune        vs default" in out and " 0 of  2 lower,  +0.50" in out
    assert "      10% finetune" not in out  # the default did not run at 10 %
    bench.print_paired({(0.01, "finetune"): [_run("finetune", 0, 10.0, 3.0)]})
    assert capsys.readouterr().out == ""


def test_the_methods_are_the_default_and_those_the_library_keeps() -> None:
    from edgeplan.costmodels.transfer_learning import METHODS

    bench = _bench()
    assert bench.METHODS[0] == "default" and set(bench.METHODS[1:]) <= set(METHODS)


def test_table5_own_levels_put_each_family_at_its_median_ratio_on_the_drawn_rows() -> None:
    """``--table5-level own``: one factor per family, so that the median ratio of the target's times to the
    leveled model's over that family's drawn cells is 1, and the source model itself is left as it was."""
    import numpy as np

    from edgeplan.costmodels import TRANSFORM_COLUMNS, PrimitiveDataset, fit_performance_model

    bench = _bench()
    rng = np.random.default_rng(0)
    x = np.unique(np.column_stack([rng.choice([8, 16, 32, 64], 300), rng.choice([16, 32, 64], 300),
                                   rng.choice([7, 14, 28], 300), np.full(300, 3), np.ones(300)]), axis=0)
    macs = x[:, 0] * x[:, 1] * x[:, 2] ** 2 * 9
    names = ("direct-sum2d", "im2col-scan-ab-ik-kj", "winograd-2x2-3x3")
    prims = np.column_stack([3 * macs + 1e4, macs ** 0.9 + 5e3, 2 * macs])
    trans = np.column_stack([(1.0 + j % 3) * x[:, 0] * x[:, 2] ** 2 + 50 for j in range(9)])
    source = fit_performance_model(PrimitiveDataset(x, names, prims, TRANSFORM_COLUMNS, trans, "s.csv"), "lin")
    target = PrimitiveDataset(x, names, prims * np.array([2.0, 3.0, 5.0]) * rng.lognormal(0, 0.1, prims.shape),
                              TRANSFORM_COLUMNS, trans, "t.csv")
    rows = np.arange(0, len(x), 4)
    before = source.primitives.predict(x)
    leveled = bench.own_levels(source, target, rows)
    ratio = target.primitive_ns[rows] / leveled.primitives.predict(x[rows])
    assert np.allclose(np.median(np.log(ratio), axis=0), 0.0, atol=1e-9)
    assert np.array_equal(source.primitives.predict(x), before)
    assert [bench.family(n) for n in names] == ["direct", "im2", "wino3"]


def test_table5_agreement_is_one_for_the_paper_itself_and_falls_for_a_reversed_table() -> None:
    bench = _bench()
    fams = bench.FAMILIES
    paper = {t: {f: float(v) for f, v in zip(fams, bench.PAPER_TABLE5[t], strict=True)} for t in fams}
    assert bench.table5_agreement(paper) == pytest.approx({"entries": 1.0, "rows": 1.0, "columns": 1.0})
    reversed_ = {t: {f: (1.0 if f == t else 1.0 / v) for f, v in row.items()} for t, row in paper.items()}
    agreement = bench.table5_agreement(reversed_)
    assert agreement["entries"] == pytest.approx(-1.0)
    assert agreement["rows"] < 0 and agreement["columns"] < 0


def test_the_targets_are_checked_for_every_fine_tuning_method(capsys: pytest.CaptureFixture[str]) -> None:
    bench = _bench()
    args = argparse.Namespace(split_seed=0, repeats=3)
    runs = [_run("default", 0, 8.0, 2.0), _run("default", 1, 6.0, 3.0),
            _run("default", 2, 7.0, 2.5), _run("finetune", 0, 6.5, 4.0), _run("finetune", 1, 7.5, 4.0),
            _run("finetune", 2, 7.0, 4.5), _run("factor", 0, 16.0, 4.0)]
    bench.report(args, runs, None)
    out = capsys.readouterr().out
    assert "1 % default: MdRAE 7.00 % (target <= 7.0 %), increase 2.50 % (target <= 3.0 %): PASS" in out
    assert "1 % finetune: MdRAE 7.00 % (target <= 7.0 %), increase 4.00 % (target <= 3.0 %): FAIL" in out
    assert "1 % factor:" not in out  # the factor alone fine-tunes nothing
    assert "10 %: not run" in out


def test_merge_reports_the_parts_of_a_sweep_as_one(tmp_path: Any, capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import json
    import sys

    bench = _bench()
    direct = {**_run("direct", 0, 65.0, 6.0)}
    first = [direct, _run("default", 0, 7.0, 4.0), _run("default", 1, 6.0, 3.0)]
    second = [direct, _run("default", 2, 8.0, 5.0), _run("default", 1, 6.0, 3.0)]
    paths = []
    for k, runs in enumerate((first, second)):
        paths.append(tmp_path / f"part{k}.json")
        paths[-1].write_text(json.dumps({"runs": runs}))
    monkeypatch.setattr(sys, "argv", ["bench_transfer.py", "--merge", *map(str, paths)])
    assert bench.main() == 0
    out = capsys.readouterr().out
    assert "3 repeat(s) per fraction" in out  # seeds 0-2, the repeated seed 1 counted once
    line = next(x for x in out.splitlines() if " default " in x and "[" in x)
    assert line.split()[3:5] == ["3", "7.00"]  # n, median MdRAE
    direct_line = next(x for x in out.splitlines() if " direct " in x)
    assert direct_line.split()[2] == "1"


def test_merge_refuses_files_that_are_not_its_runs(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    bench = _bench()
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    for args in ([str(tmp_path / "absent.json")], [str(bad)]):
        monkeypatch.setattr(sys, "argv", ["bench_transfer.py", "--merge", *args])
        with pytest.raises(SystemExit, match="is not a --json file of this benchmark"):
            bench.main()
    empty = tmp_path / "empty.json"
    empty.write_text('{"runs": []}')
    monkeypatch.setattr(sys, "argv", ["bench_transfer.py", "--merge", str(empty)])
    with pytest.raises(SystemExit, match="hold no runs"):
        bench.main()
