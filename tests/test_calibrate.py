"""Few-shot calibration of a new device, the calibrate CLI (and its refusals), and the NAS-Bench-201 experiment."""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from repo_data import data_file

from edgeplan.cli.main import main
from edgeplan.costmodels.opwise.calibrate import CalibrationSamples, calibrate
from edgeplan.costmodels.opwise.estimator import OpLatencyEstimator
from edgeplan.costmodels.opwise.model import LatencyModel
from edgeplan.decisions.calibrate import read_measurements
from edgeplan.errors import InvalidInputError
from edgeplan.frontends.direct import nb201_graph
from edgeplan.ir.kernels import deduce_kernels
from edgeplan.ir.serialize import node_to_dict
from experiments.li2023 import main as li2023_main

CELLS = [f"|{a}~0|+|{b}~0|{c}~1|+|skip_connect~0|{a}~1|{b}~2|"
         for a in ("nor_conv_3x3", "nor_conv_1x1", "avg_pool_3x3")
         for b in ("nor_conv_3x3", "skip_connect", "none", "nor_conv_1x1")
         for c in ("avg_pool_3x3", "nor_conv_3x3")]


def _record(cell: str) -> dict[str, Any]:
    """A made-up measurement of an NB201 network: each op costs its FLOPs at 1 GFLOP/s plus 10 us."""
    graph = nb201_graph(cell, official=True)
    ops, nodes = [], {}
    for k in deduce_kernels(graph, "torch-eager").kernels:
        ns = [graph.node(n) for n in k.nodes]
        nodes.update({n.name: node_to_dict(n) for n in ns})
        ms = sum(n.flops for n in ns) * 1e-6 + 0.01
        ops.append({"kernel": k.name, "kind": k.kind, "nodes": list(k.nodes), "iqr_rel": 0.0, "ms": ms, "min_ms": ms})
    total = sum(o["ms"] for o in ops)
    return {"model": f"nb201:{cell}", "latency_ms": total + 0.2, "latency_min_ms": total + 0.2, "op_sum_ms": total,
            "ops": ops, "nodes": nodes}


@pytest.fixture(scope="module")
def source() -> LatencyModel:
    est = OpLatencyEstimator(method="lasso", scenario="src", min_samples=3)
    return est.fit([_record(c) for c in CELLS], info={"kernel_profile": "torch-eager"}).model_


def test_calibration_recovers_a_scaled_device(source: LatencyModel) -> None:
    from experiments.li2023 import nb201_terms

    terms = nb201_terms(CELLS, source)
    truth = np.array([3.0 * t["total"] + 0.5 for t in terms])  # a device 3x slower with 0.5 ms of overhead
    dev = calibrate("x", CalibrationSamples(terms[:10], truth[:10], models=CELLS[:10]), source, "src")
    assert dev.form in ("scale+overhead", "scale+kernels", "per-category")
    pred = np.array([dev.predict_terms(t) for t in terms])
    assert np.max(np.abs(pred - truth) / truth) < 0.02
    with pytest.raises(InvalidInputError, match="positive"):
        calibrate("x", CalibrationSamples(terms[:3], [1.0, 0.0, 2.0]), source, "src")
    # A category the samples never contain is scaled like the rest, never counted as zero.
    def made_up(conv: float, pool: float) -> dict[str, float]:
        return {"conv": conv, "pool": pool, "total": conv + pool, "kernels": 10.0, "overhead": 0.0}

    no_pool = [made_up(1.0 + i, 0.0) for i in range(8)]
    dev = calibrate("y", CalibrationSamples(no_pool, [3.0 * t["total"] for t in no_pool]), source, "src",
                    forms=("per-category",))
    assert dev.predict_terms(made_up(2.0, 1.0)) == pytest.approx(9.0, rel=0.01)
    # too few samples for the forms asked for: the single factor, as with the default forms (was a ValueError)
    few = calibrate("z", CalibrationSamples(no_pool[:3], [3.0 * t["total"] for t in no_pool[:3]]), source, "src",
                    forms=("per-category",))
    assert few.form == "scale" and few.coef["total"] == pytest.approx(3.0)


def test_only_strong_evidence_keeps_the_source_kernels_on_constant_networks(source: LatencyModel) -> None:
    """as-source is kept outright only when it beats fold-zeros by more than CONSTANT_EVIDENCE_SE standard errors."""
    from edgeplan.costmodels.opwise.calibrate import CONSTANT_EVIDENCE_SE, CalibratedDevice

    rng = np.random.default_rng(0)
    conv = rng.uniform(1.0, 5.0, 10)
    kept = rng.uniform(0.3, 0.9, 10)  # the share of each network's convolutions a folding runtime would run
    eager = [{"conv": c, "total": c, "kernels": 20.0, "overhead": 0.0} for c in conv]
    folded = [{"conv": c * k, "total": c * k, "kernels": 10.0, "overhead": 0.0}
              for c, k in zip(conv, kept, strict=True)]
    runs_all = calibrate("a", CalibrationSamples(eager, [3.0 * c for c in conv], alternatives={"fold-zeros": folded}),
                         source, "src", forms=("scale",))
    lead = runs_all.info["constant_networks"]["as_source_lead_se"]
    assert lead > CONSTANT_EVIDENCE_SE and runs_all.deduction == "as-source"
    assert not runs_all.info["constant_networks"]["folded"]
    # the same samples with a little noise on the truth: the lead shrinks below the bar
    noisy = [3.0 * c * f for c, f in zip(conv, rng.uniform(0.7, 1.3, 10), strict=True)]
    hedged = calibrate("b", CalibrationSamples(eager, noisy, alternatives={"fold-zeros": folded}), source, "src",
                       forms=("scale",))
    assert hedged.deduction == "fold-constants" and hedged.info["constant_networks"]["folded"]
    assert 1.0 < hedged.info["constant_networks"]["as_source_lead_se"] <= CONSTANT_EVIDENCE_SE  # past 1 SE, not 3
    assert hedged.predict_terms(eager[0]) == pytest.approx(hedged.coef["total"] * eager[0]["total"])
    dead = {"conv": 0.0, "total": 0.0, "kernels": 0.0, "overhead": 0.0}
    assert hedged.predict_terms(dead) == 0.0
    back = CalibratedDevice.from_dict(json.loads(json.dumps(hedged.to_dict())))
    assert back.deduction == "fold-constants"
    # without a fold-zeros alternative (an ONNX Runtime device) nothing changes
    ort = calibrate("c", CalibrationSamples(eager, [3.0 * c for c in conv]), source, "src", forms=("scale",))
    assert ort.deduction == "as-source" and "constant_networks" not in ort.info


def test_nb201_fewshot_on_a_help_like_file(tmp_path: Path, source: LatencyModel) -> None:
    from experiments.li2023 import format_nb201, nb201_fewshot, nb201_terms

    terms = nb201_terms(CELLS, source)
    path = tmp_path / "help.csv"
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["index", "arch", "fast", "slow"])
        for i, (c, t) in enumerate(zip(CELLS, terms, strict=True)):
            w.writerow([i, c, 0.5 * t["total"] + 0.1, 4 * t["total"] + 0.02 * t["kernels"]])
    import experiments.li2023 as li

    old = li.HELP_REFERENCE
    li.HELP_REFERENCE = tuple(range(10))
    try:
        result = nb201_fewshot(source, "src", help_data=path, seeds=2, samples=10)
    finally:
        li.HELP_REFERENCE = old
    assert set(result["devices"]) == {"fast", "slow"} and result["architectures"] == len(CELLS)
    assert result["mean_help"]["spearman"] > 0.99 and result["mean_random"]["mape"] < 2.0
    draws = result["devices"]["slow"]["random"]["draws"]
    # the source's kernels (fold-constants unless as-source leads by 3 SE; CELLS hold no constant network)
    assert len(draws) == 2 and all(d["deduction"] in ("as-source", "fold-constants") and d["form"] for d in draws)
    assert result["devices"]["slow"]["random"]["mape"] == pytest.approx(np.mean([d["mape"] for d in draws]))
    text = "\n".join(format_nb201(result))
    assert "mean" in text and "worst random draw: " in text


def _csv(path: Path, rows: list[list[Any]]) -> Path:
    with path.open("w", newline="") as f:
        csv.writer(f).writerows(rows)
    return path


def test_fewshot_on_measured_models_recovers_a_scaled_device_and_names_what_it_leaves_out(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, source: LatencyModel) -> None:
    """``reproduce li2023 --fewshot``: calibrated from 10 rows of a CSV, the others predicted; a repeat's floor."""
    from edgeplan.decisions.calibrate import model_terms as measured_terms
    from experiments.li2023 import fewshot_measured, format_fewshot_measured

    models = [f"nb201:{c}" for c in CELLS]
    terms, kept, left = measured_terms(models, source)
    assert kept == models and not left
    rows = [(m, 2.5 * t["total"]) for m, t in zip(models, terms["as-source"], strict=True)]
    again = [(m, 1.1 * v) for m, v in rows[:12]]
    result = fewshot_measured(source, "src", [*rows, ("nb201:not-a-cell", 3.0)], again, samples=10, seeds=3)
    assert result["models"] == len(CELLS) and set(result["left_out"]) == {"nb201:not-a-cell"}
    assert result["direct"]["all"]["mape"] == pytest.approx(60.0, rel=1e-6)  # the source 2.5x too fast
    assert list(result["pools"]) == ["any", "zoo"]  # no synthetic network to draw from
    for label in ("calibrated", "scale"):
        assert result["pools"]["any"][label]["all"]["mape"] < 1.0
        assert result["pools"]["any"][label]["all"]["spearman"] > 0.99
    assert sum(result["pools"]["any"]["forms"].values()) == 3
    with pytest.raises(InvalidInputError, match="leaves none to test"):
        fewshot_measured(source, "src", rows[:10], samples=10)
    assert result["floor"]["all"] == pytest.approx(10.0, rel=1e-6) and result["floor_models"] == 12
    text = "\n".join(format_fewshot_measured(result))
    assert "noise floor" in text and "left out: nb201:not-a-cell" in text
    # the CLI, from a CSV, with the repeat for the floor
    home = tmp_path / "home"
    source.save(home / "devices" / "src")
    first = _csv(tmp_path / "first.csv", [["model", "latency_ms"], *map(list, rows)])
    second = _csv(tmp_path / "second.csv", [["model", "latency_ms"], *map(list, again)])
    assert li2023_main(["--home", str(home), "--fewshot", str(first), "--repeat-data", str(second),
                 "--source", "src", "--seeds", "2", "--samples", "6", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["samples"] == 6 and out["seeds"] == 2 and out["pools"]["zoo"]["scale"]["all"]["mape"] < 1.0
    assert li2023_main(["--home", str(home), "--fewshot", str(first), "--nb201"]) != 0
    assert "separate runs" in capsys.readouterr().err


def test_cli_calibrate_then_predict_and_bad_files(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                  source: LatencyModel) -> None:
    home = tmp_path / "home"
    source.save(home / "devices" / "src")
    good = _csv(tmp_path / "m.csv", [["model", "latency_ms"]] + [[f"nb201:{c}", 1.0 + i / 10]
                                                                  for i, c in enumerate(CELLS[:10])])
    bad = {
        "missing": ([["model", "ms"], ["nb201:" + CELLS[0], 1.0]], "missing column"),
        "unknown": ([["model", "latency_ms"], ["torchvision:resnet1000", 1.0]], "line 2: model torchvision:resnet1000"),
        "negative": ([["model", "latency_ms"], ["nb201:" + CELLS[0], -2]], "line 2: latency_ms must be positive"),
        "text": ([["model", "latency_ms"], ["nb201:" + CELLS[0], "fast"]], "is not a number"),
    }
    for name, (rows, message) in bad.items():
        code = main(["--home", str(home), "calibrate", "--measurements", str(_csv(tmp_path / f"{name}.csv", rows)),
                     "--name", "phone", "--from", "src"])
        assert code != 0 and message in capsys.readouterr().err, name
        assert not (home / "devices" / "phone").exists()
    assert main(["--home", str(home), "calibrate", "--measurements", str(good), "--name", "phone", "--from", "src",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["samples"] == 10 and out["form"] in out["loo_mape"]
    again = ["--home", str(home), "calibrate", "--measurements", str(good), "--name", "phone", "--from", "src"]
    assert main(again) != 0
    assert "already has lasso predictors" in capsys.readouterr().err
    assert main(["--home", str(home), "predict", "nb201:" + CELLS[12], "--device", "phone", "--method", "lasso",
                 "--json", "--breakdown"]) == 0
    (pred,) = json.loads(capsys.readouterr().out)
    assert pred["latency_ms"] > 0 and pred["unpredicted_ops"] == []
    assert pred["latency_ms"] == pytest.approx(pred["overhead_ms"] + sum(o["ms"] for o in pred["ops"]))
    from edgeplan.decisions.predict import predict

    one = predict("nb201:" + CELLS[12], device="phone", method="lasso", home=home)
    assert one.prediction.latency_ms == pytest.approx(pred["latency_ms"])
    assert len(predict(["nb201:" + CELLS[12], "nb201:" + CELLS[13]], "phone", method="lasso", home=home)) == 2
    # A calibrated device is another machine: this one cannot measure beside its prediction.
    assert main(["--home", str(home), "predict", "nb201:" + CELLS[12], "--device", "phone", "--measure", "1"]) != 0
    assert "--measure runs the model here" in capsys.readouterr().err
    # Its only method is the default: `predict --device phone` used to ask for the missing gbdt and fail.
    assert predict("nb201:" + CELLS[12], device="phone", home=home).method == "lasso"
    assert main(["--home", str(home), "predict", "nb201:" + CELLS[12], "--device", "phone", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["latency_ms"] == pytest.approx(pred["latency_ms"])
    # From a calibrated device: the new correction is of the same source scenario, and says so.
    assert main(["--home", str(home), "calibrate", "--measurements", str(good), "--name", "phone2", "--from", "phone",
                 "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["source"] == "src" and "calibrating against its source src" in captured.err
    from edgeplan.costmodels.opwise.profiles import available_devices

    assert available_devices(home)["phone2"] == ["lasso"]
    source.save(home / "devices" / "torch-fp32-1t")  # a home device named like a shipped scenario: methods merge
    assert {"lasso", "gbdt"} <= set(available_devices(home)["torch-fp32-1t"])


def test_calibration_chooses_the_fold_zeros_deduction_when_the_samples_say_so(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, source: LatencyModel) -> None:
    from edgeplan.costmodels.opwise.calibrate import CalibratedDevice
    from experiments.li2023 import nb201_terms

    cells = [*CELLS, "|skip_connect~0|+|skip_connect~0|avg_pool_3x3~1|+|none~0|skip_connect~1|none~2|",
             "|nor_conv_3x3~0|+|none~0|nor_conv_1x1~1|+|skip_connect~0|none~1|none~2|"]
    eager = nb201_terms(cells, source)
    folded = nb201_terms(cells, source, deduction="fold-zeros")
    assert all(f["kernels"] <= e["kernels"] for f, e in zip(folded, eager, strict=True))
    truth = [2.0 * t["total"] for t in folded]  # a graph runtime 2x slower that simplifies x * 0
    idx = [0, 3, 5, 8, 11, 14, 17, 20, len(cells) - 2, len(cells) - 1]
    dev = calibrate("g", CalibrationSamples([eager[i] for i in idx], [truth[i] for i in idx],
                                            alternatives={"fold-zeros": [folded[i] for i in idx]}), source, "src")
    assert dev.deduction == "fold-zeros"
    assert set(dev.info["loo_mape_by_deduction"]) == {"as-source", "fold-zeros"}
    assert min(dev.info["loo_mape_by_deduction"]["fold-zeros"].values()) < \
        min(dev.info["loo_mape_by_deduction"]["as-source"].values())
    pred = np.array([dev.predict_terms(t) for t in folded])
    assert np.max(np.abs(pred - truth) / truth) < 0.02
    back = CalibratedDevice.from_dict(json.loads(json.dumps(dev.to_dict())))
    assert back.deduction == "fold-zeros"
    # A device that runs everything keeps the source's kernels (ties go to as-source), but two samples with dead
    # branches are not 3 standard errors of evidence: a network that folds into a constant is predicted 0 ms.
    plain = calibrate("p", CalibrationSamples([eager[i] for i in idx], [2.0 * eager[i]["total"] for i in idx],
                                              alternatives={"fold-zeros": [folded[i] for i in idx]}), source, "src")
    assert plain.deduction == "fold-constants" and plain.info["constant_networks"]["folded"]
    assert plain.loo_mape == plain.info["loo_mape_by_deduction"]["as-source"]
    for i in (1, len(cells) - 1):  # a live network runs the source's kernels, dead branches included
        assert plain.predict_terms(eager[i]) == pytest.approx(2.0 * eager[i]["total"], rel=0.02)
    for bad in ("fold-all", "as-source"):
        with pytest.raises(InvalidInputError, match="unknown alternative kernel deduction"):
            calibrate("p", CalibrationSamples(eager[:5], [1.0] * 5, alternatives={bad: eager[:5]}), source, "src")
    # A sample that folds into a constant fits nothing and is predicted 0 ms (a 100% error where it is not).
    dead = "|none~0|+|nor_conv_3x3~0|none~1|+|none~0|none~1|none~2|"
    (dead_eager,), (dead_folded,) = nb201_terms([dead], source), nb201_terms([dead], source, deduction="fold-zeros")
    assert dead_folded["kernels"] == 0 and dead_eager["kernels"] > 0
    samples = CalibrationSamples([eager[i] for i in idx] + [dead_eager], [truth[i] for i in idx] + [0.01],
                                 alternatives={"fold-zeros": [folded[i] for i in idx] + [dead_folded]})
    with_dead = calibrate("g2", samples, source, "src")
    assert with_dead.deduction == "fold-zeros" and with_dead.predict_terms(dead_folded) == 0.0
    assert with_dead.predict_terms(folded[1]) == pytest.approx(truth[1], rel=0.02)
    # Fewer than 4 samples: no leave-one-out, the source's kernels (no evidence on constants: folded) and one scale.
    few = calibrate("f", CalibrationSamples(eager[:3], truth[:3], alternatives={"fold-zeros": folded[:3]}), source,
                    "src")
    assert few.deduction == "fold-constants" and few.form == "scale"
    saved = json.loads(json.dumps(few.to_dict()))
    assert saved["loo_mape"] == {"scale": None}  # no NaN in the file
    del saved["deduction"]  # a device calibrated before deductions existed ran the source's kernels
    assert CalibratedDevice.from_dict(saved).deduction == "as-source"
    with pytest.raises(InvalidInputError, match="unknown kernel deduction"):
        CalibratedDevice.from_dict({**saved, "deduction": "magic"})

    # From the CLI: the CSV's networks pick the deduction; a network that folds into a constant predicts 0 ms.
    home = tmp_path / "home"
    source.save(home / "devices" / "src")
    rows = [["model", "latency_ms"]] + [[f"nb201-official:{cells[i]}", truth[i]] for i in idx]
    assert main(["--home", str(home), "calibrate", "--measurements", str(_csv(tmp_path / "g.csv", rows)),
                 "--name", "graphrt", "--from", "src", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["deduction"] == "fold-zeros"
    dead = "nb201-official:|none~0|+|nor_conv_3x3~0|none~1|+|none~0|none~1|none~2|"
    assert main(["--home", str(home), "predict", dead, "nb201-official:" + cells[1], "--device", "graphrt",
                 "--method", "lasso", "--json"]) == 0
    zero, live = json.loads(capsys.readouterr().out)
    assert zero["latency_ms"] == 0.0 and zero["unpredicted_ops"] == []
    assert live["latency_ms"] == pytest.approx(truth[1], rel=0.02)


def test_read_measurements_refuses_duplicates(tmp_path: Path) -> None:
    path = _csv(tmp_path / "d.csv", [["model", "latency_ms"], ["a", 1], ["a", 2]])
    with pytest.raises(InvalidInputError, match="appears twice"):
        read_measurements(path)
    with pytest.raises(InvalidInputError, match="no measurements"):
        read_measurements(_csv(tmp_path / "e.csv", [["model", "latency_ms"]]))


@pytest.mark.slow
def test_cli_calibrate_measures_models_here(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                           source: LatencyModel) -> None:
    """``calibrate --measure``: timed here in the source's scenario beside synthetic:0, calibrated, the CSV kept."""
    home = tmp_path / "home"
    base = ["--home", str(home), "calibrate", "--name", "here", "--from", "torch-fp32-1t", "--method", "lasso"]
    assert main([*base, "--measure", "synthetic:1", "--measurements", str(tmp_path / "x.csv")]) != 0
    assert "give one of them" in capsys.readouterr().err
    assert main([*base, "--measure", "synthetic:1-4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["samples"] == 4 and out["source"] == "torch-fp32-1t"
    rows = read_measurements(home / "devices" / "here" / "measurements.csv")
    assert [m for m, _ in rows] == [f"synthetic:{i}" for i in range(1, 5)] and all(v > 0 for _, v in rows)
    saved = json.loads((home / "devices" / "here" / "lasso.json").read_text())
    assert [s["model"] for s in saved["samples"]] == [m for m, _ in rows]
    assert [s["latency_ms"] for s in saved["samples"]] == pytest.approx([v for _, v in rows])
    assert "per-op" in saved["loo_mape"]  # the models' operations were timed too: a candidate form
    assert main(["--home", str(home), "predict", "synthetic:7", "--device", "here", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["latency_ms"] > 0
    # a source fitted by the user has no scenario to time the models in
    source.save(home / "devices" / "mine")
    assert main(["--home", str(home), "calibrate", "--name", "again", "--from", "mine", "--method", "lasso",
                 "--measure", "synthetic:1"]) != 0
    assert "its scenario 'src' is none" in capsys.readouterr().err
    assert not (home / "devices" / "again").exists()
    # a profile named otherwise (torch-fp32-1t-keep-memory, say) times them in its model's scenario; its only method,
    # gbdt here, is the default
    dataclasses.replace(source, scenario="torch-fp32-1t", method="gbdt").save(home / "devices" / "other-1t")
    cells = [f"--measure=nb201:{c}" for c in CELLS[:4]]  # the networks the made-up source knows
    assert main(["--home", str(home), "calibrate", "--name", "again", "--from", "other-1t", *cells, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["samples"] == 4 and out["source"] == "other-1t" and out["method"] == "gbdt"


def _device_record(cell: str) -> dict[str, Any]:
    """A made-up device whose convolutions slow down with their kernel (1 + k_h times the source's times: 4x for
    3x3, 2x for 1x1, mixed differently in each cell) and whose other operations run twice as fast, with 0.4 ms
    between operations: no end-to-end form follows that."""
    from edgeplan.costmodels.opwise.ops import record_ops

    rec = _record(cell)
    for op, o in zip(rec["ops"], record_ops(rec), strict=True):
        factor = 1.0 + o.x[6] if o.category == "conv" else 0.5
        op["ms"] = op["min_ms"] = op["ms"] * factor
    total = sum(op["ms"] for op in rec["ops"])
    return {**rec, "latency_ms": total + 0.4, "latency_min_ms": total + 0.4, "op_sum_ms": total}


@pytest.mark.slow
def test_per_op_correction_learns_each_operation_from_the_measured_ops(source: LatencyModel) -> None:
    """The ``per-op`` form: learnt from the samples' operations timed on the device; chosen by leave-one-out when
    the device differs from the source op by op; saved and loaded without change; refused without operations."""
    from edgeplan.costmodels.opwise.calibrate import PER_OP, CalibratedDevice
    from edgeplan.costmodels.opwise.op_correction import measured_ops
    from edgeplan.costmodels.opwise.ops import record_ops
    from experiments.li2023 import nb201_terms

    records = [_device_record(c) for c in CELLS]
    truth = np.array([r["latency_ms"] for r in records])
    ops = [measured_ops(r, source) for r in records]
    assert all(len(m.ops) == len(m.source_ms) == len(r["ops"]) for m, r in zip(ops, records, strict=True))
    terms = nb201_terms(CELLS, source)
    dev = calibrate("d", CalibrationSamples(terms[:10], truth[:10], models=CELLS[:10], measured_ops=ops[:10]), source,
                    "src")
    assert dev.form == PER_OP and dev.op_correction is not None and "conv" in dev.op_correction.residuals
    assert dev.loo_mape[PER_OP] < min(v for k, v in dev.loo_mape.items() if k != PER_OP)
    held = [record_ops(r) for r in records[10:]]
    pred = np.array([p.latency_ms for p in dev.predict_batch(held)])
    err = np.abs(pred - truth[10:]) / truth[10:]
    end_to_end = calibrate("e", CalibrationSamples(terms[:10], truth[:10]), source, "src", forms=FORMS_WITHOUT_PER_OP)
    other = np.array([end_to_end.predict_terms(t) for t in terms[10:]])
    assert err.mean() < 0.05 and err.mean() < 0.5 * np.mean(np.abs(other - truth[10:]) / truth[10:])
    one = dev.predict_ops(held[0])  # the breakdown adds up to the total
    assert one.latency_ms == pytest.approx(one.overhead_ms + sum(o.ms or 0.0 for o in one.ops))
    again = CalibratedDevice.from_dict(json.loads(json.dumps(dev.to_dict())))
    assert [p.latency_ms for p in again.predict_batch(held)] == pytest.approx(pred.tolist(), rel=1e-9)
    with pytest.raises(InvalidInputError, match="per-op"):
        dev.predict_terms(terms[0])
    with pytest.raises(InvalidInputError, match="operations timed on the device"):
        calibrate("f", CalibrationSamples(terms[:10], truth[:10]), source, "src", forms=(PER_OP,))
    with pytest.raises(InvalidInputError, match="measured operations of 9 models"):
        calibrate("g", CalibrationSamples(terms[:10], truth[:10], measured_ops=ops[:9]), source, "src")
    broken = {k: v for k, v in dev.to_dict().items() if k != "op_correction"}
    with pytest.raises(InvalidInputError, match="no op_correction"):
        CalibratedDevice.from_dict(broken)


def test_per_op_is_kept_unless_another_form_beats_it_by_a_standard_error(source: LatencyModel) -> None:
    """The lowest leave-one-out score replaces ``per-op`` only when its lead exceeds two standard errors of the
    paired differences: a lead within the noise of ten samples keeps ``per-op``, a clear one does not."""
    from edgeplan.costmodels.opwise.calibrate import PER_OP, PER_OP_EVIDENCE_SE, _keep_per_op
    from edgeplan.costmodels.opwise.op_correction import measured_ops
    from experiments.li2023 import nb201_terms

    per_op = np.array([0.10, 0.02, 0.15, 0.05, 0.12, 0.08, 0.03, 0.20, 0.06, 0.09])
    noisy = per_op + np.array([-0.06, 0.05, -0.07, 0.04, -0.05, 0.03, 0.04, -0.08, 0.02, 0.05]) - 0.005
    assert noisy.mean() < per_op.mean()  # the rival has the lowest score ...
    kept, test = _keep_per_op("per-key(0.1)", {PER_OP: per_op, "per-key(0.1)": noisy})
    assert kept == PER_OP and 0 < test["loo_gain"] < test["standard_error"]  # ... by less than its noise
    assert PER_OP_EVIDENCE_SE == 2.0
    between = per_op - 0.017 + 0.6 * (noisy - per_op + 0.005)  # a lead of 1-2 standard errors: per-op still kept
    kept, test = _keep_per_op("scale", {PER_OP: per_op, "scale": between})
    assert kept == PER_OP and test["standard_error"] < test["loo_gain"] < 2 * test["standard_error"]
    assert test["bar_se"] == PER_OP_EVIDENCE_SE
    clear = per_op * 0.5
    kept, test = _keep_per_op("scale", {PER_OP: per_op, "scale": clear})
    assert kept == "scale" and test["loo_gain"] > 2 * test["standard_error"] and test["rival"] == "scale"
    # a device 3x the source end to end whose op timings scatter (log-normal, sigma 0.5): per-op learns the
    # scatter, an end-to-end form is near exact and replaces it, as the device's info says
    rng = np.random.default_rng(0)
    records = []
    for cell in CELLS[:10]:
        rec = _record(cell)
        for op in rec["ops"]:
            op["ms"] = op["min_ms"] = op["ms"] * 3.0 * float(np.exp(rng.normal(0.0, 0.5)))
        records.append({**rec, "latency_ms": 3.0 * rec["latency_ms"]})
    truth = [r["latency_ms"] for r in records]
    samples = CalibrationSamples(nb201_terms(CELLS[:10], source), truth,
                                 measured_ops=[measured_ops(r, source) for r in records])
    dev = calibrate("s", samples, source, "src")
    test = dev.info["per_op_test"]
    assert dev.form != PER_OP and test["kept"] == dev.form == test["rival"]
    assert dev.loo_mape[dev.form] < 0.01 < dev.loo_mape[PER_OP] and test["loo_gain"] > 2 * test["standard_error"]


FORMS_WITHOUT_PER_OP = ("scale", "scale+overhead", "scale+kernels", "per-category", "per-category+kernels",
                        "per-key(1)", "per-key(0.1)", "per-key(0.01)")


@pytest.mark.slow
def test_fewshot_scores_the_per_op_correction_from_a_dataset(source: LatencyModel) -> None:
    """``reproduce li2023 --fewshot DATASET``: the records' operations make per-op a candidate and a row of its own;
    a model without a record is left out by name."""
    from experiments.li2023 import fewshot_measured, format_fewshot_measured

    records = {f"nb201:{c}": _device_record(c) for c in CELLS}
    rows = [(m, r["latency_ms"]) for m, r in records.items()]
    missing = next(iter(records))
    kept = {m: r for m, r in records.items() if m != missing}
    result = fewshot_measured(source, "src", rows, samples=10, seeds=2, records=kept)
    assert result["models"] == len(CELLS) - 1 and missing in result["left_out"]
    any_pool = result["pools"]["any"]
    assert any_pool["per-op"]["all"]["mape"] < 0.5 * any_pool["scale"]["all"]["mape"]
    assert any_pool["calibrated"]["all"]["mape"] < any_pool["scale"]["all"]["mape"]
    assert "per-op" in "\n".join(format_fewshot_measured(result))


def test_op_factors_shrink_rare_kinds_towards_their_category() -> None:
    """A kind seen in few operations keeps part of its category's factor (OP_PRIOR pseudo-operations); a category
    with too few operations gets no residual model; no usable operation is refused."""
    import math

    from edgeplan.costmodels.opwise.op_correction import OP_PRIOR, MeasuredOps, fit_op_correction
    from edgeplan.costmodels.opwise.ops import OpInput

    def op(key: str, ms: float) -> OpInput:
        return OpInput(key, key.split("|")[0], key, key.split("|")[1], [1.0, 2.0], ms)

    common = [op("aten::add|elementwise", 2.0) for _ in range(15)]  # 2x the source
    rare = [op("aten::mul|elementwise", 4.0)]  # 4x, once
    sample = MeasuredOps(tuple(common + rare), tuple([1.0] * 16))
    c = fit_op_correction([sample])
    assert not c.residuals  # 16 operations < MIN_RESIDUAL_OPS
    category = c.categories["elementwise"]
    assert math.log(2.0) < category < math.log(4.0)
    expected = (math.log(4.0) + OP_PRIOR * category) / (1 + OP_PRIOR)
    assert c.keys["aten::mul|elementwise"] == pytest.approx(expected)
    assert c.log_factors([op("aten::sub|elementwise", 1.0)], [1.0])[0] == pytest.approx(category)
    assert c.log_factors([op("aten::conv2d|conv", 1.0)], [1.0])[0] == pytest.approx(c.common)
    with pytest.raises(InvalidInputError, match="no operation"):
        fit_op_correction([MeasuredOps((op("aten::add|elementwise", 0.0),), (1.0,))])
    with pytest.raises(InvalidInputError, match="source predictions"):
        MeasuredOps((op("aten::add|elementwise", 1.0),), ())


@pytest.mark.slow
def test_cli_calibrates_from_an_ops_dataset_with_the_per_op_form(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                                 source: LatencyModel) -> None:
    """``calibrate --measurements DATASET.jsonl.gz``: the operations measured on the device make per-op a
    candidate; the device predicts from the CLI."""
    import gzip

    from edgeplan.measure.op_dataset import DATASET_FORMAT

    home = tmp_path / "home"
    source.save(home / "devices" / "src")
    data = tmp_path / "device.jsonl.gz"
    with gzip.open(data, "wt", encoding="utf-8") as f:
        f.write(json.dumps({"format": DATASET_FORMAT, "scenario": "torch-fp32-1t"}) + "\n")
        for c in CELLS[:10]:
            f.write(json.dumps(_device_record(c)) + "\n")
    assert main(["--home", str(home), "calibrate", "--measurements", str(data), "--from", "src", "--name", "dev",
                 "--method", "lasso", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["form"] == "per-op" and out["samples"] == 10 and "per-op" in out["loo_mape"]
    assert out["per_op_test"] is None  # per-op had the lowest leave-one-out score: nothing to test
    held = _device_record(CELLS[12])
    assert main(["--home", str(home), "predict", held["model"], "--device", "dev", "--method", "lasso",
                 "--json"]) == 0
    got = json.loads(capsys.readouterr().out)[0]["latency_ms"]
    assert got == pytest.approx(held["latency_ms"], rel=0.05)
    # the same operations said to be another scenario's than the source's: calibrated, with a note naming both
    saved = json.loads((home / "devices" / "src" / "lasso.json").read_text())
    saved["info"]["source_scenario"] = "ort-fp32-1t"
    (home / "devices" / "src" / "lasso.json").write_text(json.dumps(saved))
    assert main(["--home", str(home), "calibrate", "--measurements", str(data), "--from", "src", "--name", "dev2",
                 "--method", "lasso", "--json"]) == 0
    err = capsys.readouterr().err
    assert "measured in torch-fp32-1t, not in the scenario of the source src (ort-fp32-1t)" in err


@pytest.mark.slow
def test_cli_says_why_another_form_replaced_per_op(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                  source: LatencyModel) -> None:
    """When another form had the lowest leave-one-out score, ``calibrate`` prints the test against ``per-op`` with
    its bar: a device 3x the source end to end whose op timings scatter (log-normal, sigma 0.5) replaces it."""
    import gzip

    from edgeplan.costmodels.opwise.calibrate import PER_OP_EVIDENCE_SE
    from edgeplan.measure.op_dataset import DATASET_FORMAT

    home = tmp_path / "home"
    source.save(home / "devices" / "src")
    rng = np.random.default_rng(0)
    data = tmp_path / "device.jsonl.gz"
    with gzip.open(data, "wt", encoding="utf-8") as f:
        f.write(json.dumps({"format": DATASET_FORMAT, "scenario": "torch-fp32-1t"}) + "\n")
        for cell in CELLS[:10]:
            rec = _record(cell)
            for op in rec["ops"]:
                op["ms"] = op["min_ms"] = op["ms"] * 3.0 * float(np.exp(rng.normal(0.0, 0.5)))
            f.write(json.dumps({**rec, "latency_ms": 3.0 * rec["latency_ms"],
                                "latency_min_ms": 3.0 * rec["latency_min_ms"]}) + "\n")
    assert main(["--home", str(home), "calibrate", "--measurements", str(data), "--from", "src", "--name", "dev",
                 "--method", "lasso"]) == 0
    out = capsys.readouterr().out
    assert "per-op replaced by" in out and f"more than {PER_OP_EVIDENCE_SE:g} standard errors" in out
    assert main(["--home", str(home), "calibrate", "--measurements", str(data), "--from", "src", "--name", "dev2",
                 "--method", "lasso", "--json"]) == 0
    test = json.loads(capsys.readouterr().out)["per_op_test"]
    assert test["kept"] != "per-op" and test["bar_se"] == PER_OP_EVIDENCE_SE
    assert test["loo_gain"] > PER_OP_EVIDENCE_SE * test["standard_error"]


def test_residual_trees_evaluate_as_scikit_learn_predicts() -> None:
    """The per-op residual models are saved as exported trees: evaluated stacked, they give sklearn's prediction."""
    from sklearn.ensemble import GradientBoostingRegressor

    from edgeplan.costmodels.opwise.op_correction import RESIDUAL_PARAMS
    from edgeplan.costmodels.opwise.predictors import _export_tree, _Forest

    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 5))
    y = np.sin(x[:, 0]) + 0.1 * x[:, 1] ** 2 + 0.1 * rng.normal(size=300)
    model = GradientBoostingRegressor(init="zero", random_state=0, **RESIDUAL_PARAMS).fit(x, y)
    forest = _Forest([_export_tree(t) for t in model.estimators_[:, 0]])
    assert model.learning_rate * forest.values(x).sum(axis=1) == pytest.approx(model.predict(x), abs=1e-9)


@pytest.mark.parametrize(("scenario", "least", "least_again"),
                         [("torch-fp32-1t", 200, 100), ("ort-fp32-1t", 200, 100), ("torch-fp32-2t", 150, 80)])
@pytest.mark.slow
def test_the_shipped_measurements_of_a_second_cpu_are_whole(scenario: str, least: int, least_again: int) -> None:
    """``data/latency/fewshot/{scenario}`` (``make bench-calibrate``; an Intel Xeon's, as its provenance says):
    measured in the shipped profile's scenario on another CPU, beside the reference, with provenance; at least
    ``least`` models, ``least_again`` of them in the repeat, every latency positive, every operation featurized, and
    the records the source predicts (most: the ORT profile lacks a few real CNNs' kinds, e.g. ``Pad``) readable by the
    per-op correction."""
    from edgeplan.costmodels.opwise.op_correction import measured_ops
    from edgeplan.costmodels.opwise.ops import record_latency, record_ops
    from edgeplan.costmodels.opwise.profiles import load_device_model
    from edgeplan.measure.op_dataset import load_dataset

    folder = data_file("latency", "fewshot", scenario)
    data = load_dataset(folder / "main.jsonl.xz")
    source = load_dataset(data_file("latency", f"{scenario}.jsonl.xz"))
    here, there = data.provenance["device"], source.provenance["device"]
    assert data.provenance["scenario"] == scenario and here["runtime"] == there["runtime"]
    assert here["cpu_model"] != there["cpu_model"] and data.provenance["reference"]["model"] == "synthetic:0"
    provenance = json.loads((folder / "provenance.json").read_text())
    assert scenario in provenance["what"] and provenance["main.jsonl.xz"]["measured_from"]
    models = [r["model"] for r in data.records]
    assert len(models) == len(set(models)) >= least and all(record_latency(r) > 0 for r in data.records)
    again = read_measurements(folder / "again.csv")
    assert len(again) >= least_again and {m for m, _ in again} <= set(models)
    assert all(record_ops(r) for r in data.records)  # every measured operation has its features
    model = load_device_model(scenario, "lasso")
    covered = [r for r in data.records[::10] if not model.predict_ops(record_ops(r)).unpredicted]
    assert len(covered) >= 0.7 * len(data.records[::10]) and all(measured_ops(r, model).ops for r in covered)
