"""The composition forms of benchmarks/diag_li2023_context.py: each recovers the overhead it can express; its
context split; bench_li2023_zoo_bias.py's list of the worst-predicted models; and diag_li2023_overhead_forms.py's
power fit and per-key scales."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from benchmark_loader import load_benchmark as _benchmark


def _diag() -> ModuleType:
    return _benchmark("diag_li2023_context")


def _rows(c: float, b: float, k: float, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    s = rng.uniform(2.0, 300.0, 200)
    n = rng.integers(30, 700, 200).astype(float)
    return np.column_stack([c + b * s + k * n, s, n])


def test_the_linear_form_recovers_a_gap_that_grows_with_the_ops_and_the_constant_one_cannot() -> None:
    diag = _diag()
    rows = _rows(0.3, 1.04, 0.008)
    predict, params = diag.fit_form(rows, scale=True, per_op=True)
    assert params == pytest.approx([0.3, 1.04, 0.008], rel=1e-6, abs=1e-9)
    assert np.allclose(predict(rows), rows[:, 0])
    constant, p0 = diag.fit_form(rows, scale=False, per_op=False)
    assert p0[0] == pytest.approx(float(np.mean(rows[:, 0] - rows[:, 1])))  # li2023: the mean gap
    assert p0[1] == 1.0 and p0[2] == 0.0
    # the constant misprices both ends: small networks over, large ones under
    err = constant(rows) / rows[:, 0]
    assert err[np.argmin(rows[:, 1])] > 1.0 and err[np.argmax(rows[:, 1])] < 1.0


def test_each_restricted_form_keeps_its_fixed_terms() -> None:
    diag = _diag()
    rows = _rows(0.5, 1.0, 0.012, seed=1)
    _, per_op = diag.fit_form(rows, scale=False, per_op=True)
    assert per_op[1] == 1.0 and per_op[2] == pytest.approx(0.012, rel=1e-6)
    _, scale = diag.fit_form(_rows(0.2, 1.05, 0.0, seed=2), scale=True, per_op=False)
    assert scale[2] == 0.0 and scale[1] == pytest.approx(1.05, rel=1e-6)


def test_predictions_keep_the_floor_of_half_the_op_sum() -> None:
    diag = _diag()
    train = np.array([[1.0, 10.0, 5.0], [2.0, 20.0, 5.0], [3.0, 30.0, 5.0]])  # e2e far below the ops: gap < 0
    predict, params = diag.fit_form(train, scale=False, per_op=False)
    assert params[0] < 0
    tiny = np.array([[0.2, 0.4, 2.0]])
    assert predict(tiny)[0] == pytest.approx(0.2)  # max(c + 0.4, 0.5 * 0.4)


def _conv(c: int, name: str) -> dict[str, object]:
    return {"name": name, "op": "conv2d", "attrs": {"kernel": [3, 3], "stride": [1], "groups": 1},
            "input_shapes": [[1, c, 28, 28]], "output_shapes": [[1, c, 28, 28]], "params": c * c * 9,
            "flops": 2 * c * c * 9 * 784}


def _network(i: int, c: int, repeats: int) -> dict[str, object]:
    """``1 + repeats`` convolutions of one shape; each after the first takes 0.8x the first's time."""
    nodes = {f"c{j}": _conv(c, f"c{j}") for j in range(1 + repeats)}
    ops = [{"kernel": f"c{j}", "kind": "aten::conv2d", "nodes": [f"c{j}"], "ms": (1.0 if j == 0 else 0.8) * c / 10,
            "iqr_rel": 0} for j in range(1 + repeats)]
    return {"model": f"m{i}", "nodes": nodes, "ops": ops, "latency_ms": sum(float(o["ms"]) for o in ops)}


def test_the_context_diagnostic_splits_ops_by_how_often_the_same_op_ran_before(
        capsys: pytest.CaptureFixture[str]) -> None:
    from edgeplan.costmodels.opwise.ops import record_ops

    diag = _diag()
    train = [_network(i, 8 + i % 4, repeats=i % 2) for i in range(40)]  # half the networks repeat their conv once
    zoo = [_network(100 + i, 8 + i % 4, repeats=5) for i in range(4)]
    ops = {r["model"]: record_ops(r, "median") for r in [*train, *zoo]}
    diag._context(train, {"zoo CNNs": zoo}, ops)
    out = capsys.readouterr().out
    assert "zoo CNNs: 83.3% of its 24 ops have the same op before them" in out
    assert "training (in sample): 33.3% of its 60 ops" in out
    zoo_part = out.split("training (in sample)")[0]
    first = next(line for line in zoo_part.splitlines() if "repeat: first of its kind" in line)
    again = next(line for line in zoo_part.splitlines() if "repeat: 2+ same ops before" in line)
    # the training median of a shape mixes first runs (1.0) and repeats (0.8): a zoo repeat sits below it
    assert float(first.split("x (")[0].split()[-1]) > float(again.split("x (")[0].split()[-1])


def test_worst_ranks_by_distance_from_one_on_a_log_scale_both_ways() -> None:
    # per model: ops, predicted op sum, measured op sum, measured end to end, predicted end to end
    rows = np.array([[10, 9.0, 10.0, 10.0, 9.0],     # 0.9x
                     [20, 20.0, 10.0, 10.0, 20.0],   # 2x: as far as 0.5x
                     [30, 5.0, 10.0, 10.0, 5.0],     # 0.5x
                     [40, 10.0, 10.0, 20.0, 21.0]])  # 1.05x, op sum right: work outside the ops
    group = {"rows": rows, "models": ["a", "b", "c", "d"]}
    lines = _benchmark("bench_li2023_zoo_bias").worst(group, 3)
    assert [line.split()[0] for line in lines] == ["b", "c", "a"]
    assert "predicted 2.000x, op sum 2.000x, 20 ops" in lines[0]
    assert "20.00 ms  predicted 1.050x, op sum 1.000x" in _benchmark("bench_li2023_zoo_bias").worst(group, 4)[3]


def test_zoo_rows_count_folded_work_as_reproduce_li2023_does(monkeypatch: pytest.MonkeyPatch) -> None:
    import dataclasses

    from edgeplan.costmodels.opwise.model import LatencyModel
    from edgeplan.costmodels.opwise.ops import record_ops
    from experiments import li2023

    train = [_network(i, 8 + i % 4, repeats=i % 2) for i in range(40)]
    model = LatencyModel.fit(train, "lasso", "torch-fp32-2t", statistic="median")
    zoo = {**_network(100, 9, repeats=1), "raw_folded_work_ms": 0.5}
    own = record_ops(zoo, "median")
    priced = dataclasses.replace(own[0], name="aten::conv2d@folded#0")  # a folded op the model prices
    named = "aten::batch_norm@folded#1 (aten::batch_norm, folded: no predictor)"
    monkeypatch.setattr(li2023, "_folded_work", lambda spec, profile: ([priced], [named]))
    group = _benchmark("bench_li2023_zoo_bias")._group_rows(model, [zoo])
    pred = model.predict_ops(own).ops
    ops, pred_sum, true_sum, _, e2e = group["rows"][0]
    assert ops == 3 and true_sum == pytest.approx(sum(o.measured_ms or 0.0 for o in own) + 0.5)
    assert pred_sum == pytest.approx(sum(p.ms or 0.0 for p in pred) + (pred[0].ms or 0.0))
    assert e2e == pytest.approx(li2023.predict_with_folded_work(model, zoo).latency_ms)
    assert group["pred_cat"]["folded work"] == pytest.approx(pred[0].ms or 0.0)
    assert group["true_cat"]["folded work"] == 0.5 and group["true_cat"]["conv"] == pytest.approx(0.9 + 0.72)


def test_predicted_rows_keep_the_measured_time_and_count_and_take_the_models_op_sum() -> None:
    from edgeplan.costmodels.opwise.model import LatencyModel
    from edgeplan.costmodels.opwise.ops import record_latency, record_ops

    diag = _diag()
    train = [_network(i, 8 + i % 4, repeats=i % 2) for i in range(40)]
    model = LatencyModel.fit(train, "lasso", "torch-fp32-2t", statistic="median")
    ops = {r["model"]: record_ops(r, "median") for r in train[:5]}
    rows = diag.predicted_rows(model, train[:5], ops)
    assert rows.shape == (5, 3)
    assert list(rows[:, 0]) == [record_latency(r, "median") for r in train[:5]]
    assert list(rows[:, 2]) == [len(ops[r["model"]]) for r in train[:5]]
    for r, row in zip(train[:5], rows, strict=True):
        pred = model.predict_ops(ops[r["model"]])
        assert row[1] == pytest.approx(pred.latency_ms - pred.overhead_ms)  # whatever the overhead's form


def test_the_bias_bench_evaluates_a_device_profile_on_the_networks_it_was_not_trained_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``--device NAME --data FILE``: the profile is loaded, not fitted; the networks it was trained on are left out
    of both groups, the synthetic ones it was not are its synthetic test, and ``--repeat-data`` puts each group's
    noise floor beside its error."""
    import gzip
    import json

    from edgeplan.costmodels.opwise.model import LatencyModel
    from edgeplan.measure.op_dataset import DATASET_FORMAT

    nets = [{**_network(i, 8 + i % 4, repeats=i % 2), "model": f"synthetic:{i}"} for i in range(50)]
    zoo = [{**_network(100 + i, 9, repeats=3), "model": f"torchvision:z{i}"} for i in range(4)]
    model = LatencyModel.fit(nets[:30], "lasso", "torch-fp32-2t", statistic="median",
                             info={"train_models": [r["model"] for r in nets[:30]]})
    home = tmp_path / "home"
    model.save(home / "devices" / "dev" / "lasso.json")
    monkeypatch.setenv("EDGEPLAN_HOME", str(home))

    def write(path: Path, records: list[dict[str, object]]) -> Path:
        with gzip.open(path, "wt") as f:
            header = {"format": DATASET_FORMAT, "scenario": "torch-fp32-2t", "device": {"threads": 2}}
            f.write(json.dumps(header) + "\n")
            for r in records:
                f.write(json.dumps(r) + "\n")
        return path

    data = write(tmp_path / "d.jsonl.gz", [*nets, *zoo])
    again = write(tmp_path / "r.jsonl.gz", [{**r, "latency_ms": 1.1 * float(r["latency_ms"])}  # type: ignore[arg-type]
                                            for r in [nets[45], zoo[0]]])
    bench = _benchmark("bench_li2023_zoo_bias")
    assert bench.main(["--device", "dev", "--data", str(data), "--repeat-data", str(again), "--method", "lasso"]) == 0
    out = capsys.readouterr().out
    assert "device profile dev (30 training networks)" in out
    assert "synthetic test (20): end-to-end MAPE" in out and "zoo CNNs (4): end-to-end MAPE" in out
    assert out.count("(noise floor 10.00% over 1 models)") == 2
    with pytest.raises(SystemExit):
        bench.main(["--device", "dev", "--method", "lasso"])  # a profile is evaluated on a --data file


def test_the_overhead_forms_power_fit_recovers_its_exponent_and_the_per_key_scales_undo_a_predictors_bias() -> None:
    diag = _benchmark("diag_li2023_overhead_forms")
    rng = np.random.default_rng(1)
    sums, counts = rng.uniform(2.0, 300.0, 200), rng.integers(30, 700, 200).astype(float)
    latency = 0.2 + 0.003 * counts + 0.9 * sums ** 1.05
    assert diag._power(latency, sums, counts) == pytest.approx([0.2, 0.003, 0.9, 1.05], rel=1e-3, abs=1e-4)

    from edgeplan.costmodels.opwise.ops import OpInput, OpPrediction, Prediction

    bias = {"k|conv": 0.8, "k|add": 1.25}

    class Biased:  # prices conv ops at 0.8x and add ops at 1.25x their measured times
        def predict_batch(self, models: list[list[OpInput]]) -> list[Prediction]:
            out = []
            for ops in models:
                preds = tuple(OpPrediction(o.name, o.kind, o.key, (o.measured_ms or 0.0) * bias[o.key], False,
                                           o.key) for o in ops)
                out.append(Prediction(sum(p.ms or 0.0 for p in preds), 0.0, preds))
            return out

    nets = [[OpInput(f"op{i}", "k", key, key.split("|")[1], [1.0], float(rng.uniform(0.1, 2.0)))
             for i, key in enumerate(["k|conv", "k|add", "k|conv"])] for _ in range(5)]
    scales = diag._key_scales(Biased(), nets)
    assert scales == pytest.approx({"k|conv": 1.25, "k|add": 0.8})
    fixed = diag._sums(Biased(), nets, lambda key: scales[key])
    assert fixed == pytest.approx([sum(o.measured_ms or 0.0 for o in ops) for ops in nets])


def test_the_capacity_diagnostic_sets_the_tree_knobs_refuses_bad_ones_and_skips_without_its_data(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from edgeplan.costmodels.opwise import predictors

    monkeypatch.setattr(predictors, "GBDT_DEPTH", predictors.GBDT_DEPTH)  # restored after the test
    monkeypatch.setattr(predictors, "RF_TREES", predictors.RF_TREES)
    diag = _benchmark("diag_li2023_capacity")
    for bad in (["--rf-trees", "ten"], ["--depth", "0"], ["--cv", "layers"]):
        with pytest.raises(SystemExit):
            diag.main(bad)
    assert diag.main(["--data", str(tmp_path / "absent.jsonl.xz"), "--depth", "5", "--rf-trees", "30,10"]) == 0
    assert "is not here" in capsys.readouterr().err
    assert predictors.GBDT_DEPTH == 5 and predictors.RF_TREES == (10, 30)


def test_the_network_context_diagnostic_bins_the_error_by_footprint() -> None:
    diag = _benchmark("diag_li2023_network_context")
    logs = np.log(np.array([1.0, 0.5, 0.8, 1.25]))  # predicted / measured
    mib = np.log2(np.array([4.0, 20.0, 40.0, 200.0]))
    assert diag.footprint_bins(logs, mib) == ("<8 MiB 1.000 (1), 16-32 MiB 2.000 (1), 32-64 MiB 1.250 (1), "
                                               ">=128 MiB 0.800 (1)")
