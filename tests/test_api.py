"""The public API: one function per job from ``import edgeplan``, each result frozen with a JSON-ready
``to_dict()``; importing the package stays cheap; the API page stays short."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import edgeplan
from edgeplan.measure import TimingConfig

DOCS = Path(__file__).resolve().parents[1] / "docs" / "api.md"


def _json_ready(result: Any) -> dict[str, Any]:
    assert dataclasses.is_dataclass(result) and type(result).__dataclass_params__.frozen  # type: ignore[attr-defined]
    data = result.to_dict()
    json.dumps(data, allow_nan=False)  # JSON as it is, no NaN
    return data


def test_import_is_cheap_and_names_every_job() -> None:
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", "import edgeplan"], capture_output=True,
                         text=True, check=True).stderr
    heavy = [line for line in out.splitlines() if any(f" {m}" in line for m in ("torch", "onnx", "sklearn"))]
    assert heavy == []
    for name in ("load_graph", "measure_latency", "predict", "calibrate", "select", "plan_offload", "plan_partition"):
        assert name in edgeplan.__all__ and callable(getattr(edgeplan, name))
    assert edgeplan.__version__
    with pytest.raises(AttributeError):
        edgeplan.no_such_thing  # noqa: B018


def test_load_graph_measure_and_predict(tmp_path: Path) -> None:
    graph = edgeplan.load_graph("synthetic:0")
    assert _json_ready(graph)["totals"]["macs"] > 0
    m = edgeplan.measure_latency("synthetic:0", timing=TimingConfig(min_repeats=3, max_repeats=3, max_time_s=2.0),
                                home=tmp_path)
    data = _json_ready(m)
    assert data["repeats"] == 3 and data["latency_ms"] > 0 and data["device"]["fingerprint"]
    assert m.warnings == () and data["warnings"] == []  # 1 thread: never more than the cores
    p = edgeplan.predict("synthetic:0")
    assert _json_ready(p)["latency_ms"] > 0 and p.device == "torch-fp32-1t"
    many = edgeplan.predict(["synthetic:0", "synthetic:1"])
    assert [x.model for x in many] == ["synthetic:0", "synthetic:1"]


def test_calibrate_then_predict_on_the_new_device(tmp_path: Path) -> None:
    source = edgeplan.predict(["synthetic:1", "synthetic:2", "synthetic:3"], method="lasso")
    rows = [(p.model, 2.0 * p.prediction.latency_ms) for p in source]  # a device twice as slow
    c = edgeplan.calibrate(rows, "twice", home=tmp_path)
    data = _json_ready(c)
    assert data["device"] == "twice" and data["samples"] == 3 and Path(data["path"]).is_file()
    assert data["coef"]["total"] == pytest.approx(2.0, rel=1e-6)
    slow = edgeplan.predict("synthetic:1", device="twice", home=tmp_path)
    assert slow.prediction.latency_ms == pytest.approx(rows[0][1], rel=1e-6)
    with pytest.raises(edgeplan.errors.InvalidInputError, match="already has"):
        edgeplan.calibrate(rows, "twice", home=tmp_path)


def test_calibrate_measures_models_here_and_keeps_what_it_measured(tmp_path: Path) -> None:
    here = edgeplan.MeasureHere(("synthetic:1-3",), runs=1, plain_per_run=1)
    c = edgeplan.calibrate(here, "here", source="torch-fp32-1t", method="lasso", home=tmp_path)
    assert c.samples == 3 and c.path is not None and isinstance(c.notes, tuple)
    rows = (c.path.parent / "measurements.csv").read_text().splitlines()
    assert rows[0] == "model,latency_ms" and [r.split(",")[0] for r in rows[1:]] == ["synthetic:1", "synthetic:2",
                                                                                     "synthetic:3"]
    assert all(float(r.split(",")[1]) > 0 for r in rows[1:])
    with pytest.raises(edgeplan.errors.InvalidInputError, match="is a shipped profile's"):
        edgeplan.calibrate(here, "torch-fp32-1t", home=tmp_path)


def test_select_reports_whose_costs_it_used() -> None:
    s = edgeplan.select("torchvision:squeezenet1_0")
    data = _json_ready(s)
    assert data["predicted_ms"] > 0 and data["layers"] and data["costs_from"]["source"] == "shipped"
    assert data["costs_match_this_device"] is s.costs_match_this_device
    assert bool(s.warnings) is not s.costs_match_this_device


def test_plan_offload_and_plan_partition() -> None:
    o = edgeplan.plan_offload(edgeplan.OffloadSetup("paper:alexnet", cloud_speedup=11.25, costs="shipped"), "4g",
                              edgeplan.OffloadOptions("energy"))
    data = _json_ready(o)
    assert data["plan"]["objective"] == "energy" and "costs_match_this_device" in data
    r = edgeplan.plan_partition("synthetic:0", edgeplan.Cluster.simulated(4, seed=0, memory_mb=12),
                                edgeplan.PartitionOptions(compute=False))
    data = _json_ready(r)
    assert len(data["stages"]) > 1 and data["bottleneck_ms"] > 0


def test_api_page_is_short() -> None:
    lines = DOCS.read_text().splitlines()
    assert len(lines) <= 40 and max(len(line) for line in lines) <= 120
    code = "\n".join(lines[lines.index("```python") + 1 : lines.index("```", lines.index("```python"))])
    assert len(code.splitlines()) <= 30
    compile(code, str(DOCS), "exec")  # it parses; test_api's other tests run the same calls on tiny inputs
