"""Per-op latency measurement (li2023 data): scenarios, model sets, profiler matching, campaigns and datasets."""

from __future__ import annotations

import gzip
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from edgeplan.cli.main import main
from edgeplan.errors import InvalidInputError, MeasurementError
from edgeplan.ir.kernels import Kernel, KernelDeduction
from edgeplan.measure import Store, TimingConfig
from edgeplan.measure.model_sets import expand_models, model_set
from edgeplan.measure.scenarios import SCENARIOS, get_scenario

CELL = "nb201:|nor_conv_3x3~0|+|avg_pool_3x3~0|nor_conv_1x1~1|+|skip_connect~0|none~1|nor_conv_3x3~2|"
FAST = TimingConfig(warmup=1, min_repeats=3, max_repeats=3, max_time_s=5.0)


# --- scenarios and model sets -----------------------------------------------------------------------------------


def test_scenarios_cover_runtimes_threads_and_int8() -> None:
    assert set(SCENARIOS) == {"torch-fp32-1t", "torch-fp32-2t", "ort-fp32-1t", "ort-fp32-2t", "ort-int8-1t",
                              "ort-int8-2t"}
    s = get_scenario("ort-int8-2t")
    assert (s.runtime, s.threads, s.dtype) == ("onnxruntime", 2, "int8")
    assert get_scenario("torch-fp32-1t").kernel_profile == "torch-eager"
    with pytest.raises(InvalidInputError, match="unknown scenario 'tflite'.*torch-fp32-1t"):
        get_scenario("tflite")


def test_model_sets_and_ranges() -> None:
    assert expand_models(["synthetic:3-5", "synthetic:4", "torchvision:resnet18"]) == [
        "synthetic:3", "synthetic:4", "synthetic:5", "torchvision:resnet18"]
    assert len(model_set("synthetic")) == 1000
    timm = model_set("timm-cnns")
    assert len(timm) >= 40 and all(m.startswith("timm:") for m in timm)
    tv = model_set("torchvision-cnns")
    assert "torchvision:resnet50" in tv and not any("vit_" in m or "swin" in m for m in tv)
    assert expand_models(["set:timm-cnns"]) == timm
    nb = model_set("nb201-sample")
    assert len(set(nb)) == 200 and nb == model_set("nb201-sample") and all(m.startswith("nb201:|") for m in nb)
    with pytest.raises(InvalidInputError, match="empty range"):
        expand_models(["synthetic:9-3"])
    with pytest.raises(InvalidInputError, match="unknown model set 'cnn'"):
        expand_models(["set:cnn"])


# --- matching profiler events to kernels ------------------------------------------------------------------------


@dataclass
class _Range:
    start: int
    end: int

    def elapsed_us(self) -> int:
        return self.end - self.start


@dataclass
class _Event:
    name: str
    input_shapes: Sequence[Any]
    time_range: _Range


@dataclass
class _Node:
    input_shapes: tuple[tuple[int, ...], ...]


class _Graph:
    name = "g"

    def __init__(self, nodes: dict[str, _Node]) -> None:
        self._nodes = nodes

    def node(self, name: str) -> _Node:
        return self._nodes[name]


def test_events_are_matched_by_kind_and_shape_when_the_order_differs() -> None:
    from edgeplan.runtimes.op_profile import _match_run

    kernels = (Kernel("conv2d", "aten::conv2d", ("a",)), Kernel("conv2d", "aten::conv2d", ("b",)),
               Kernel("relu", "aten::relu", ("c",)))
    graph = _Graph({"a": _Node(((1, 3, 8, 8),)), "b": _Node(((1, 4, 8, 8),)), "c": _Node(((1, 4, 8, 8),))})
    deduction = KernelDeduction("g", "torch-eager", kernels)
    # The runtime ran b's branch first.
    events = [_Event("aten::conv2d", [[1, 4, 8, 8], [4, 4, 3, 3]], _Range(0, 5)),
              _Event("aten::conv2d", [[1, 3, 8, 8], [4, 3, 3, 3]], _Range(5, 7)),
              _Event("aten::relu", [[1, 4, 8, 8]], _Range(7, 8))]
    matched = _match_run(events, deduction, graph)  # type: ignore[arg-type]
    assert [e.time_range.elapsed_us() for e in matched] == [2, 5, 1]
    with pytest.raises(MeasurementError, match="profiled but not deduced: aten::add x1"):
        _match_run([*events, _Event("aten::add", [], _Range(8, 9))], deduction, graph)  # type: ignore[arg-type]


def test_torch_ops_profile_every_deduced_kernel() -> None:
    import torch

    from edgeplan.frontends.torch_frontend import graph_from_torch
    from edgeplan.ir.kernels import deduce_kernels
    from edgeplan.runtimes.op_profile import profile_torch_ops

    class Branchy(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = torch.nn.Conv2d(8, 8, 3, padding=1)
            self.b = torch.nn.Conv2d(8, 8, 1)
            self.bn = torch.nn.BatchNorm2d(8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(self.bn(self.a(x))) + self.b(x)

    module, x = Branchy().eval(), torch.randn(1, 8, 16, 16)
    graph = graph_from_torch(module, (x,))
    deduction = deduce_kernels(graph, "torch-eager")
    ops, plain = profile_torch_ops(module, (x,), deduction, graph, threads=1, runs=4, warmup=1, plain_per_run=2)
    assert [o.kind for o in ops] == [k.kind for k in deduction.kernels]
    assert len(plain) == 8 and all(t > 0 for t in plain)
    assert all(o.median_ms > 0 and o.iqr_rel >= 0 for o in ops)
    conv = next(o for o in ops if o.kind == "aten::conv2d")
    assert conv.nodes and all(n in {nd.name for nd in graph.nodes} for n in conv.nodes)
    other = deduce_kernels(graph_from_torch(torch.nn.Sequential(torch.nn.ReLU()), (x,)), "torch-eager")
    with pytest.raises(MeasurementError, match="do not match"):
        profile_torch_ops(module, (x,), other, graph, threads=1, runs=1, warmup=0)


def test_ort_trace_is_split_into_runs() -> None:
    from edgeplan.runtimes.op_profile import _ort_timings

    def node(name: str, dur: int) -> dict[str, Any]:
        return {"cat": "Node", "name": f"{name}_kernel_time", "dur": dur,
                "args": {"op_name": "Conv", "output_type_shape": [{"float": [1, 4, 8, 8]}]}}

    trace = [node("c", d) for d in (100, 10, 12, 11)] + [{"cat": "Session", "name": "model_run", "dur": 50}]
    (op,) = _ort_timings(trace, {"c": ("conv0",)}, runs=3, warmup=1, what="m")
    assert op.median_ms == pytest.approx(0.011) and op.nodes == ("conv0",) and op.kind == "Conv"
    assert op.shapes["output_type_shape"] == [{"float": [1, 4, 8, 8]}]
    with pytest.raises(MeasurementError, match="ran 4 times in 3 runs"):
        _ort_timings(trace, {}, runs=2, warmup=1, what="m")


# --- whole models, campaigns, datasets --------------------------------------------------------------------------


@pytest.mark.parametrize(("scenario", "plain"), [("torch-fp32-1t", 2), ("torch-fp32-1t", 0), ("ort-fp32-1t", 2),
                                               ("ort-int8-1t", 0)])
def test_profile_model_in_each_runtime(scenario: str, plain: int, tmp_path: Path) -> None:
    from edgeplan.runtimes.op_profile import profile_model

    p = profile_model(CELL, get_scenario(scenario), runs=3, config=FAST, home=tmp_path, plain_per_run=plain)
    assert p.end_to_end.median_ms > 0 and p.ops and all(o.median_ms >= 0 for o in p.ops)
    assert p.end_to_end.repeats == (3 * plain if plain else FAST.max_repeats)
    kinds = {o.kind for o in p.ops}
    if scenario.startswith("torch"):
        assert "aten::conv2d" in kinds and p.nodes and all(n in p.nodes for o in p.ops for n in o.nodes)
    elif "int8" in scenario:
        assert "QLinearConv" in kinds
        assert any(f.name.endswith(".int8.onnx") for f in (tmp_path / "onnx").iterdir())
    else:
        assert kinds & {"Conv", "FusedConv"}
    assert json.loads(json.dumps(p.extra()))["scenario"] == scenario


def test_campaign_resumes_and_exports_a_dataset(tmp_path: Path) -> None:
    from edgeplan.latency.campaign import export_dataset, load_dataset, run_op_campaign

    scenario = get_scenario("torch-fp32-1t")
    other = "nb201:|skip_connect~0|+|nor_conv_1x1~0|none~1|+|none~0|none~1|avg_pool_3x3~2|"
    with Store.open(tmp_path / "store.sqlite") as store:
        with pytest.raises(InvalidInputError, match="no measurements in campaign"):
            export_dataset(store, scenario, tmp_path / "d.jsonl.gz")
        first = run_op_campaign(store, scenario, [CELL], runs=2, config=FAST, home=tmp_path)
        assert (first.done_now, first.remaining) == (1, 0)
        again = run_op_campaign(store, scenario, [CELL, other, "synthetic:x"], runs=2, config=FAST, home=tmp_path)
        assert (again.done_before, again.done_now) == (1, 1)
        assert [f.key for f in again.failed] == ["synthetic:x"] and "seed" in again.failed[0].reason
        with pytest.raises(InvalidInputError):
            run_op_campaign(store, scenario, [CELL], runs=3, config=FAST, home=tmp_path)  # other parameters
        n = export_dataset(store, scenario, tmp_path / "d.jsonl.gz", command="test")
        rep = run_op_campaign(store, scenario, [CELL], runs=2, config=FAST, home=tmp_path, repeat="noise")
        assert rep.campaign == "ops/torch-fp32-1t/noise" and rep.done_now == 1
        assert export_dataset(store, scenario, tmp_path / "r.jsonl.gz", repeat="noise") == 1
        with pytest.raises(InvalidInputError, match="repeat tag"):
            run_op_campaign(store, scenario, [CELL], repeat="a/b")
    data = load_dataset(tmp_path / "d.jsonl.gz")
    assert n == 2 and data.models() == [CELL, other] and data.scenario == "torch-fp32-1t"
    assert data.provenance["device"]["threads"] == 1 and data.provenance["versions"]["torch"]
    rec = data.records[0]
    assert rec["latency_ms"] > 0 and rec["op_sum_ms"] == pytest.approx(sum(o["ms"] for o in rec["ops"]))
    assert all(n in rec["nodes"] for o in rec["ops"] for n in o["nodes"])
    bad = tmp_path / "bad.jsonl.gz"
    with gzip.open(bad, "wt") as f:
        f.write(json.dumps({"format": "other"}) + "\n")
    with pytest.raises(InvalidInputError, match="not an edgeplan op-latency dataset"):
        load_dataset(bad)


def test_cli_ops_profile_and_export(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    home = str(tmp_path)
    assert main(["--home", home, "ops", "profile", "--scenario", "torch-fp32-1t"]) != 0
    assert "no models given" in capsys.readouterr().err
    assert main(["--home", home, "ops", "export", "--scenario", "torch-fp32-1t", "--out", str(tmp_path / "x")]) != 0
    assert "no measurements" in capsys.readouterr().err
    assert main(["--home", home, "ops", "profile", CELL, "--scenario", "torch-fp32-1t", "--plain-per-run", "-1"]) != 0
    assert "--plain-per-run must be 0 or more" in capsys.readouterr().err
    code = main(["--home", home, "ops", "profile", CELL, "--scenario", "torch-fp32-1t", "--runs", "2", "--json"])
    out = capsys.readouterr().out
    assert code == 0 and json.loads(out)[0]["done_now"] == 1
    assert main(["--home", home, "ops", "export", "--scenario", "torch-fp32-1t", "--out",
                 str(tmp_path / "d.jsonl.gz")]) == 0
    assert "1 models" in capsys.readouterr().out


def test_cli_fit_then_predict_with_breakdown(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    home = str(tmp_path)
    cells = [CELL, "nb201:|nor_conv_1x1~0|+|nor_conv_3x3~0|avg_pool_3x3~1|+|skip_connect~0|nor_conv_1x1~1|none~2|",
             "nb201:|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|nor_conv_1x1~0|skip_connect~1|avg_pool_3x3~2|"]
    assert main(["--home", home, "ops", "profile", *cells, "--scenario", "torch-fp32-1t", "--runs", "3",
                 "--plain-per-run", "1", "--json"]) == 0
    data = tmp_path / "d.jsonl.gz"
    assert main(["--home", home, "ops", "export", "--scenario", "torch-fp32-1t", "--out", str(data)]) == 0
    device = tmp_path / "devices" / "mine"
    assert main(["ops", "fit", "--data", str(data), "--method", "lasso", "--out", str(device), "--json",
                 "--min-samples", "3"]) == 0
    capsys.readouterr()
    assert main(["--home", home, "predict", CELL, "--device", "mine", "--method", "lasso", "--json",
                 "--breakdown"]) == 0
    (result,) = json.loads(capsys.readouterr().out)
    assert result["model"] == CELL and result["latency_ms"] > 0 and result["unpredicted_ops"] == []
    assert any(o["kernel"] == "aten::conv2d" and o["ms"] > 0 for o in result["ops"])
    assert result["latency_ms"] == pytest.approx(result["overhead_ms"] + sum(o["ms"] for o in result["ops"]))
    assert main(["--home", home, "predict", CELL, "--device", "mine", "--method", "lasso", "--breakdown"]) == 0
    assert "per-op predictions" in capsys.readouterr().out
    assert main(["--home", home, "predict", CELL, "--device", "mine", "--method", "lasso", "--measure", "2"]) != 0
    assert "--measure runs the model here" in capsys.readouterr().err
    assert main(["ops", "fit", "--data", str(data), "--method", "lasso", "--out",
                 str(tmp_path / "devices" / "torch-fp32-1t"), "--min-samples", "3", "--json"]) == 0
    capsys.readouterr()
    assert main(["--home", home, "predict", CELL, "--device", "torch-fp32-1t", "--method", "lasso", "--measure", "2",
                 "--breakdown", "--json"]) == 0
    (both,) = json.loads(capsys.readouterr().out)
    assert both["measured_ms"] > 0 and all(o["measured_ms"] is not None and o["measured_ms"] >= 0 for o in both["ops"])
    assert main(["--home", home, "predict", CELL, "--device", "nowhere"]) != 0
    assert "unknown device 'nowhere'" in capsys.readouterr().err
    assert main(["--home", home, "predict", CELL, "--device", "mine", "--method", "gbdt"]) != 0
    assert "has no 'gbdt' predictors" in capsys.readouterr().err
