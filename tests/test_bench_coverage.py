"""`benchmarks/bench_coverage.py --predict`: how much of a model a device profile prices with predictors of its own."""

from __future__ import annotations

import pytest

from tests.benchmark_loader import load_benchmark


def test_a_model_is_priced_with_its_unpredicted_ops_and_stand_ins_counted() -> None:
    cov = load_benchmark("bench_coverage")
    row = cov._priced("torchvision:mobilenet_v3_small", "torch-fp32-1t")
    assert row["latency_ms"] > 0 and row["ops"] > 50 and row["unpredicted"] == {}
    # the shipped 1-thread profile has no hard-swish predictor of its own: its element-wise category stands in
    swish = [s for s in row["stand_ins"] if s["kernel"].startswith("aten::hardswish")]
    assert swish and swish[0]["predictor"] == "category elementwise" and swish[0]["count"] > 0
    assert "by stand-ins" in cov._priced_status(row)
    # a model the profile cannot price says why
    failed = cov._priced("torchvision:not_a_model", "torch-fp32-1t")
    assert set(failed) == {"predict_error"} and "not_a_model" in failed["predict_error"]


def test_an_imported_graph_is_priced_as_the_model_is() -> None:
    from edgeplan.frontends.zoo import load_graph

    cov = load_benchmark("bench_coverage")
    spec = "torchvision:mobilenet_v3_small"
    assert cov._priced(spec, "torch-fp32-1t", load_graph(spec)) == cov._priced(spec, "torch-fp32-1t")


def test_the_summary_counts_models_and_kernels(capsys: pytest.CaptureFixture[str]) -> None:
    cov = load_benchmark("bench_coverage")
    stand = {"kernel": "aten::roll", "predictor": "category elementwise", "count": 2, "ms": 1.0}
    rows = [{"model": "a", "latency_ms": 10.0, "unpredicted": {}, "stand_ins": []},
            {"model": "b", "latency_ms": 4.0, "unpredicted": {"aten::lstm": 1}, "stand_ins": [stand]},
            {"model": "c", "predict_error": "InvalidInputError: no"}]
    cov._coverage_summary(rows, "dev")
    out = capsys.readouterr().out
    assert "priced by dev: 2/3 imported models (1 failed to predict)" in out
    assert "every op by a predictor of its own: 1/2" in out and "with unpredicted ops: 1/2" in out
    assert "median 12.5%, max 25.0%, over 10% in 1 models" in out  # the median of 0% and 25%
    assert "1 models     25.0%  aten::roll (stand-in category elementwise)" in out
    assert "aten::lstm (unpredicted)" in out
