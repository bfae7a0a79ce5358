"""Review fixes of the reference pairing and of the latency breakdown: noise floors only at one reference scale,
the raw end-to-end spread kept on export, grouped convolutions labelled by the predictor that made them, the
effective overhead where the half-of-ops clamp applies, and ``reproduce li2023``'s default statistic."""

from __future__ import annotations

import gzip
import json
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from repo_data import data_file

from edgeplan.cli.main import main
from edgeplan.costmodels.opwise.estimator import OpLatencyEstimator
from edgeplan.costmodels.opwise.model import LatencyModel
from edgeplan.costmodels.opwise.ops import OpInput, record_ops
from edgeplan.decisions.predict import ModelPrediction
from edgeplan.errors import InvalidInputError
from edgeplan.measure import DeviceDescriptor, MeasurementResult, Store, Task, Timing, default_store_path, run_campaign
from edgeplan.measure.op_campaign import OpExportOptions, ReferenceScaleWarning, campaign_name, export_dataset
from edgeplan.measure.op_dataset import DATASET_FORMAT, load_dataset
from edgeplan.measure.scenarios import get_scenario
from experiments.li2023 import main as li2023_main

#: A reference scale as ``ops export`` writes it in a dataset's header.
REF = {"model": "synthetic:0", "ms": 16.0, "min_ms": 12.0, "from_campaign": "ops/torch-fp32-1t", "models": 10}


def conv(c: int, k: int, size: int, groups: int = 1) -> dict[str, Any]:
    macs = size * size * k * (c // groups) * 9
    return {"op": "conv2d", "input_shapes": [[1, c, size, size]], "output_shapes": [[1, k, size, size]],
            "attrs": {"in_channels": c, "out_channels": k, "kernel": [3, 3], "stride": [1, 1], "groups": groups},
            "flops": 2 * macs, "params": k * (c // groups) * 9}


def _record(i: int, rng: np.random.Generator, model: str = "") -> dict[str, Any]:
    """A made-up measured model: a dense conv, a depthwise conv and a ReLU."""
    c = int(rng.integers(8, 64))
    nodes = {"c1": {**conv(c, c, 28), "name": "c1"}, "c2": {**conv(c, c, 28, groups=c), "name": "c2"},
             "r": {"name": "r", "op": "activation", "input_shapes": [[1, c, 28, 28]],
                   "output_shapes": [[1, c, 28, 28]], "flops": c * 784}}
    ms = {"c1": 1e-6 * nodes["c1"]["flops"] + 0.05, "c2": 2e-6 * nodes["c2"]["flops"] + 0.02, "r": 1e-5 * c + 0.01}
    ops = [{"kernel": n, "kind": "aten::conv2d" if n != "r" else "aten::relu", "nodes": [n], "ms": 1.2 * v,
            "min_ms": v, "iqr_rel": 0} for n, v in ms.items()]
    return {"model": model or f"m{i}", "latency_ms": 1.2 * sum(ms.values()) + 0.5,
            "latency_min_ms": sum(ms.values()) + 0.4, "op_sum_ms": 1.2 * sum(ms.values()), "ops": ops,
            "nodes": nodes}


def _dataset(path: Path, records: Sequence[dict[str, Any]], reference: dict[str, Any] | None = None,
             scenario: str = "torch-fp32-1t") -> Path:
    header: dict[str, Any] = {"format": DATASET_FORMAT, "scenario": scenario, "device": {"threads": 1}}
    if reference is not None:
        header["reference"] = reference
    with gzip.open(path, "wt") as f:
        f.write(json.dumps(header) + "\n")
        for r in records:
            f.write(json.dumps(r) + "\n")
    return path


def _model(overhead_ms: float | None = None) -> LatencyModel:
    rng = np.random.default_rng(0)
    model = OpLatencyEstimator(method="lasso", scenario="test-scenario").fit(
        [_record(i, rng) for i in range(30)]).model_
    if overhead_ms is not None:
        model.overhead_ms = overhead_ms
    return model


# --- 1. the noise floor compares times at one reference scale; export says when a repeat is not at it ---------------


def test_noise_floor_refuses_datasets_at_different_reference_scales(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from experiments.li2023 import noise_floor

    rng = np.random.default_rng(1)
    records = [_record(i, rng, f"synthetic:{900 + i}") for i in range(4)]
    a = _dataset(tmp_path / "a.jsonl.gz", records, REF)
    same = _dataset(tmp_path / "same.jsonl.gz", records, dict(REF))
    own = _dataset(tmp_path / "own.jsonl.gz", records,
                   {**REF, "ms": 20.0, "min_ms": 15.0, "from_campaign": "ops/torch-fp32-1t/again"})
    raw = _dataset(tmp_path / "raw.jsonl.gz", records)
    floor = noise_floor(load_dataset(a), load_dataset(same), "median")
    assert floor is not None and floor["mape"] == pytest.approx(0.0)
    with pytest.raises(InvalidInputError) as refused:
        noise_floor(load_dataset(a), load_dataset(own), "median")
    msg = str(refused.value)
    # Both files, both scales, and what to do.
    assert str(a) in msg and str(own) in msg
    assert "16 ms" in msg and "20 ms" in msg and "not comparable" in msg and "edgeplan ops export" in msg
    with pytest.raises(InvalidInputError, match="no reference"):  # paired times against times as measured
        noise_floor(load_dataset(a), load_dataset(raw))
    assert li2023_main(["--floor", "--data", str(a), "--repeat-data", str(own)]) != 0
    err = capsys.readouterr().err
    assert "not comparable" in err and str(own) in err
    assert li2023_main(["--floor", "--data", str(a), "--repeat-data", str(same), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["noise_floor"]["median"]["models"] == 4


def test_li2023_report_skips_a_shipped_repeat_at_another_scale(tmp_path: Path) -> None:
    from experiments.li2023 import reproduce

    # Your own paired dataset of torch-fp32-1t: the repository's repeat (another campaign, another scale) gives no
    # floor, where before it gave a meaningless one; a repeat given explicitly at another scale is refused.
    repeat = data_file("latency", "torch-fp32-1t.repeat.jsonl.xz")
    assert load_dataset(repeat).provenance["reference"]["ms"] != REF["ms"]
    rng = np.random.default_rng(2)
    records = [_record(i, rng, f"synthetic:{i}" if i < 30 else f"synthetic:{870 + i}") for i in range(35)]
    data = _dataset(tmp_path / "d.jsonl.gz", records, REF)
    result = reproduce(methods=("lasso",), data_file=data, statistic="median")
    assert result["noise_floor"] is None and result["5.1"]["lasso"]["models"] == 5
    other = _dataset(tmp_path / "r.jsonl.gz", records[30:], {**REF, "ms": 17.0})
    with pytest.raises(InvalidInputError, match="not comparable"):
        reproduce(methods=("lasso",), data_file=data, repeat_file=other, statistic="median")


def _measurement(ref_ms: float, ratio: float) -> MeasurementResult:
    """A model timed beside the reference ``synthetic:0`` (times and ratios made up)."""
    device = DeviceDescriptor("Test CPU", 2, 1, 1, "torch", "0.0-test", "float32", None, "host", "os", "3.11")
    timing = Timing.from_samples([4.0, 5.0, 6.0, 7.0, 8.0, 9.0], "confidence")
    op = {"kernel": "c", "kind": "aten::conv2d", "nodes": ["c"], "ms": 3.0, "min_ms": 2.5, "iqr_rel": 0.1,
          "ratio": 0.5 * ratio, "min_ratio": 0.5 * ratio}
    extra = {"ops": [op], "nodes": {"c": {**conv(8, 8, 8), "name": "c"}}, "op_sum_ms": 3.0, "op_sum_min_ms": 2.5,
             "reference": {"model": "synthetic:0", "ms": ref_ms, "min_ms": 0.8 * ref_ms, "ratio": ratio,
                           "iqr_rel": 0.01, "min_ratio": ratio}}
    return MeasurementResult(timing, device, extra)


def _campaign(store: Store, repeat: str, ref_ms: float) -> None:
    scenario = get_scenario("torch-fp32-1t")
    tasks = [Task(key=m, model=m, kind="model_ops") for m in ("synthetic:900", "synthetic:901")]
    run_campaign(store, campaign_name(scenario, repeat), tasks, lambda _: _measurement(ref_ms, 0.4),
                 params={"scenario": scenario.name, "reference": "synthetic:0"})


def test_export_warns_when_a_repeat_falls_back_to_its_own_scale(tmp_path: Path) -> None:
    from experiments.li2023 import noise_floor

    scenario = get_scenario("torch-fp32-1t")
    home = tmp_path / "home"
    with Store.open(default_store_path(home)) as store:
        _campaign(store, "again", ref_ms=20.0)
        with pytest.warns(ReferenceScaleWarning, match="its own reference latency"):
            export_dataset(store, scenario, tmp_path / "alone.jsonl.gz", repeat="again")
        _campaign(store, "", ref_ms=10.0)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # with the main campaign there, both convert at its scale, silently
            export_dataset(store, scenario, tmp_path / "d.jsonl.gz")
            export_dataset(store, scenario, tmp_path / "r.jsonl.gz", repeat="again")
    alone, data, again = (load_dataset(tmp_path / f"{n}.jsonl.gz") for n in ("alone", "d", "r"))
    assert alone.provenance["reference"]["ms"] == pytest.approx(20.0)
    assert alone.provenance["reference"]["from_campaign"] == "ops/torch-fp32-1t/again"
    assert again.provenance["reference"] == data.provenance["reference"]
    assert data.provenance["reference"]["ms"] == pytest.approx(10.0)
    assert noise_floor(data, again, "median") == {"models": 2, "mape": pytest.approx(0.0),
                                                  "raw_mape": pytest.approx(0.0)}
    with pytest.raises(InvalidInputError, match="not comparable"):
        noise_floor(data, alone, "median")
    # A repeat measured in another Store, merged into the repeat file, takes that file's scale, silently.
    with Store.open(tmp_path / "later.sqlite") as store:
        _campaign(store, "again", ref_ms=20.0)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            export_dataset(store, scenario, tmp_path / "r.jsonl.gz", repeat="again",
                           options=OpExportOptions(merge=tmp_path / "r.jsonl.gz"))
    merged = load_dataset(tmp_path / "r.jsonl.gz")
    assert merged.provenance["reference"] == data.provenance["reference"]
    assert noise_floor(data, merged, "median") == {"models": 2, "mape": pytest.approx(0.0),
                                                   "raw_mape": pytest.approx(0.0)}
    # The export of `profile ops --export` keeps the warning in its summary (the CLI prints it on stderr), and
    # still writes the file.
    from edgeplan.measure.profile_jobs import export_campaign

    (tmp_path / "cli").mkdir()
    out = tmp_path / "cli.jsonl.gz"
    with Store.open(default_store_path(tmp_path / "cli")) as store:
        _campaign(store, "again", ref_ms=20.0)
        exported = export_campaign(store, scenario, out, command="edgeplan profile ops", repeat="again")
    assert any("its own reference latency" in w for w in exported.warnings) and out.is_file()
    assert exported.models == 2 and exported.to_dict() == {"scenario": "torch-fp32-1t", "path": str(out), "models": 2}


# --- 2. export keeps the measured end-to-end spread beside the ratios' ---------------------------------------------


def test_export_keeps_the_raw_iqr_and_old_datasets_still_load(tmp_path: Path) -> None:
    from experiments.li2023 import noise_floor

    with Store.open(tmp_path / "store.sqlite") as store:
        _campaign(store, "", ref_ms=10.0)
        raw = {r.model: r for r in store.measurements(campaign="ops/torch-fp32-1t")}
        export_dataset(store, get_scenario("torch-fp32-1t"), tmp_path / "d.jsonl.gz")
    data = load_dataset(tmp_path / "d.jsonl.gz")
    for rec in data.records:
        r = raw[rec["model"]]
        assert rec["iqr_rel"] == pytest.approx(0.01)  # the spread of the paired ratios
        # as measured, to the file's six significant digits
        assert rec["raw_iqr_rel"] == pytest.approx((r.p75_ms - r.p25_ms) / r.latency_ms, rel=1e-5)
        assert rec["raw_iqr_rel"] != pytest.approx(rec["iqr_rel"])
    # A paired dataset exported before raw_iqr_rel was kept loads, fits and gives its floor as before.
    rng = np.random.default_rng(3)
    old = [{**_record(i, rng), "raw_latency_ms": 2.0, "raw_latency_min_ms": 1.5} for i in range(10)]
    path = _dataset(tmp_path / "old.jsonl.gz", old, REF)
    loaded = load_dataset(path)
    assert loaded.path == path and all("raw_iqr_rel" not in r for r in loaded.records)
    refit = OpLatencyEstimator(method="lasso", scenario="s", min_samples=4).fit(loaded.records).model_
    assert refit.predict_record(old[0]).latency_ms > 0
    floor = noise_floor(loaded, load_dataset(path), "median")
    assert floor is not None and floor["mape"] == pytest.approx(0.0)


# --- 3. and 4. the breakdown: which predictor made each op, and an overhead that adds up ---------------------------


def _grouped_ops() -> list[OpInput]:
    """A model with a dense, a depthwise and a grouped convolution (the latter's category never trained)."""
    nodes = {"d": {**conv(32, 32, 28), "name": "d"}, "w": {**conv(32, 32, 28, groups=32), "name": "w"},
             "g": {**conv(32, 32, 28, groups=4), "name": "g"}}
    return record_ops({"model": "grouped", "nodes": nodes, "ops": [
        {"kernel": n, "kind": "aten::conv2d", "nodes": [n], "ms": 1.0} for n in nodes]})


def test_grouped_conv_fallback_is_labelled_as_the_dense_conv_predictor() -> None:
    model = _model()
    assert "aten::conv2d|gconv" not in model.predictors and "*|gconv" not in model.predictors
    ops = {o.name: o for o in model.predict_ops(_grouped_ops()).ops}
    dense, grouped = ops["d@d"], ops["g@g"]
    assert dense.predictor == "aten::conv2d|conv" and dense.fallback_for is None and not dense.by_category
    assert ops["w@w"].predictor == "aten::conv2d|dwconv"
    assert grouped.key == "aten::conv2d|gconv" and grouped.by_category and grouped.ms is not None
    assert grouped.predicted_by == "aten::conv2d|conv" and grouped.fallback_for == "gconv"
    assert grouped.predictor == "aten::conv2d|conv (fallback for gconv)"
    # Without a dense predictor of its kind, the category's: still named as the dense convolutions'.
    no_kind = LatencyModel(model.scenario, model.method,
                           {k: v for k, v in model.predictors.items() if k != "aten::conv2d|conv"}, model.overhead_ms)
    (g,) = [o for o in no_kind.predict_ops(_grouped_ops()).ops if o.name == "g@g"]
    assert g.predicted_by == "*|conv" and g.predictor == "category conv (fallback for gconv)"
    # A calibrated device keeps the label on its corrected ops.
    from edgeplan.costmodels.opwise.calibrate import CalibratedDevice

    device = CalibratedDevice("dev", model, "src", "scale", {"total": 2.0}, {})
    (cg,) = [o for o in device.predict_ops(_grouped_ops()).ops if o.name == "g@g"]
    assert cg.predictor == grouped.predictor and cg.ms == pytest.approx(2 * grouped.ms)


def test_breakdown_shows_the_fallback_and_the_clamped_overhead(monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    import edgeplan.decisions.predict as predict_module

    models = {"fits": _model(), "clamped": _model(overhead_ms=-100.0)}

    def fake_predict_models(specs: Sequence[str], device: str, method: str, **_: Any) -> list[ModelPrediction]:
        return [ModelPrediction(s, device, method, models[s].predict_ops(_grouped_ops())) for s in specs]

    monkeypatch.setattr(predict_module, "predict_models", fake_predict_models)
    monkeypatch.setenv("COLUMNS", "240")
    assert main(["predict", "fits", "clamped", "--breakdown", "--json"]) == 0
    rows = {r["model"]: r for r in json.loads(capsys.readouterr().out)}
    for name, row in rows.items():
        ops_ms = sum(o["ms"] for o in row["ops"])
        assert row["latency_ms"] == pytest.approx(row["overhead_ms"] + ops_ms)  # the rows add up
        assert row["overhead_clamped"] is (name == "clamped")
        (g,) = [o for o in row["ops"] if o["op"] == "g@g"]
        assert g["predictor"] == "aten::conv2d|conv (fallback for gconv)" and g["fallback_for"] == "gconv"
        assert g["predicted_by"] == "aten::conv2d|conv" and g["key"] == "aten::conv2d|gconv"
    clamped = rows["clamped"]
    ops_ms = sum(o["ms"] for o in clamped["ops"])
    assert clamped["latency_ms"] == pytest.approx(0.5 * ops_ms)
    assert clamped["overhead_ms"] == pytest.approx(-0.5 * ops_ms) and clamped["overhead_ms"] > -100.0
    assert rows["fits"]["overhead_ms"] == pytest.approx(models["fits"].overhead_ms)
    assert main(["predict", "fits", "clamped", "--breakdown"]) == 0
    text = capsys.readouterr().out
    assert "aten::conv2d|conv (fallback for gconv)" in text and "category gconv" not in text
    assert f"{clamped['overhead_ms']:.3f}*" in text and "overhead clamped" in text
    assert f"{rows['fits']['overhead_ms']:.3f}*" not in text
    assert main(["predict", "fits"]) == 0
    assert "overhead clamped" not in capsys.readouterr().out


def test_prediction_overhead_is_the_effective_one_where_the_clamp_applies() -> None:
    from edgeplan.costmodels.opwise.calibrate import CalibratedDevice

    ops = _grouped_ops()
    plain = _model().predict_ops(ops)
    assert not plain.overhead_clamped and plain.overhead_ms == pytest.approx(_model().overhead_ms)
    negative = _model(overhead_ms=-100.0)
    pred = negative.predict_ops(ops)
    ops_ms = sum(o.ms for o in pred.ops if o.ms is not None)
    assert pred.overhead_clamped and pred.latency_ms == pytest.approx(0.5 * ops_ms)
    assert pred.overhead_ms == pytest.approx(pred.latency_ms - ops_ms)
    (batched,) = negative.predict_batch([ops])
    assert batched == pred
    # A calibrated device scaling a clamped source total: its overhead adds up too, and says the clamp applied.
    device = CalibratedDevice("dev", negative, "src", "scale", {"total": 2.0}, {})
    cal = device.predict_ops(ops)
    assert cal.latency_ms == pytest.approx(2 * pred.latency_ms) and cal.overhead_clamped
    assert cal.latency_ms == pytest.approx(cal.overhead_ms + sum(o.ms for o in cal.ops if o.ms is not None))
    assert not CalibratedDevice("dev", _model(), "src", "scale", {"total": 2.0}, {}).predict_ops(ops).overhead_clamped


# --- 6. reproduce li2023 learns medians by default, as the shipped models -----------------------------------------


def test_reproduce_li2023_defaults_to_the_median(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(5)
    base = [_record(i, rng, f"synthetic:{i}") for i in range(4)]
    a = _dataset(tmp_path / "a.jsonl.gz", base, scenario="torch-fp32-1t")
    b = _dataset(tmp_path / "b.jsonl.gz", base, scenario="torch-fp32-2t")
    assert li2023_main(["--insight", "threads", "--data", str(a), "--versus-data", str(b),
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["statistic"] == "median"
    assert li2023_main(["--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())
    assert "[default: median]" in help_text and "[default: min]" not in help_text


def _with_grouped(i: int, rng: np.random.Generator) -> dict[str, Any]:
    """:func:`_record` with a grouped convolution (4 groups) as well."""
    r = _record(i, rng)
    c = r["nodes"]["c1"]["attrs"]["in_channels"]
    r["nodes"]["g"] = {**conv(c, c, 28, groups=4), "name": "g"}
    ms = 1.5e-6 * r["nodes"]["g"]["flops"] + 0.03
    r["ops"].append({"kernel": "g", "kind": "aten::conv2d", "nodes": ["g"], "ms": 1.2 * ms, "min_ms": ms, "iqr_rel": 0})
    return r


def test_grouped_convolutions_need_min_family_samples_for_a_predictor_of_their_own() -> None:
    from edgeplan.costmodels.opwise.model import MIN_FAMILY_SAMPLES, MIN_SAMPLES

    rng = np.random.default_rng(5)
    few = [_with_grouped(i, rng) for i in range(MIN_FAMILY_SAMPLES - 1)]  # more than MIN_SAMPLES, fewer than 20
    assert MIN_SAMPLES < len(few) < MIN_FAMILY_SAMPLES
    model = OpLatencyEstimator(method="lasso", scenario="torch-fp32-1t").fit(few).model_
    assert not any(k.endswith("|gconv") for k in model.predictors) and "aten::conv2d|dwconv" in model.predictors
    (g,) = [o for o in model.predict_ops(record_ops(few[0])).ops if o.name.startswith("g@")]
    assert g.fallback_for == "gconv" and g.predicted_by == "aten::conv2d|conv"
    assert model.info["min_family_samples"] == MIN_FAMILY_SAMPLES
    enough = [*few, _with_grouped(99, rng)]
    refit = OpLatencyEstimator(method="lasso", scenario="torch-fp32-1t").fit(enough).model_
    assert "aten::conv2d|gconv" in refit.predictors
