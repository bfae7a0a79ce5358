"""The executable selected network: layouts in memory, equivalence with the original model, and `edgeplan select`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from repo_data import data_file

from edgeplan.cli.main import main
from edgeplan.decisions.select import SHIPPED, runnable
from edgeplan.errors import InvalidInputError
from edgeplan.frontends.zoo import build_model, load_graph
from edgeplan.planners.pbqp.network import selection_structure
from edgeplan.primitives import all_primitives
from edgeplan.primitives.spec import ConvSpec
from edgeplan.runtimes.selected import build_selected_network, from_memory, output_error, to_memory

SHIPPED_TABLE = SHIPPED / "reference_cpu_1t.csv"


@pytest.mark.parametrize("layout", ["chw", "hcw", "hwc"])
def test_memory_round_trip_and_free_views(layout: str) -> None:
    x = torch.randn(3, 5, 7)
    memory = to_memory(x, layout)
    assert memory.is_contiguous()
    back = from_memory(memory, layout)
    assert torch.equal(back, x)
    assert to_memory(back, layout).data_ptr() == memory.data_ptr()  # already in that order: no copy


def test_random_primitives_reproduce_resnet18_outputs() -> None:
    spec = "torchvision:resnet18"
    structure = selection_structure(load_graph(spec), selectable=runnable)
    rng = np.random.default_rng(0)
    choices, inputs = {}, {}
    for node in structure.nodes:
        if node.kind == "conv" and node.conv is not None:
            c, k, im, f, s, p = node.conv
            options = [prim.name for prim in all_primitives() if prim.applies(ConvSpec(c, k, im, f, s, padding=p))]
            choices[node.name] = options[int(rng.integers(len(options)))]
            inputs[node.name] = im
    assert len(set(choices.values())) > 5
    zoo = build_model(spec)
    (x,) = zoo.example_inputs()
    net = build_selected_network(zoo.module, choices, inputs)
    with torch.inference_mode():
        assert output_error(zoo.module(x), net(x)) < 1e-3
    assert isinstance(zoo.module.get_submodule("conv1"), torch.nn.Conv2d)  # the original is untouched


def test_bad_plans_are_refused() -> None:
    zoo = build_model("torchvision:resnet18")
    with pytest.raises(InvalidInputError, match="not a module"):
        build_selected_network(zoo.module, {"nope": "direct-sum2d"}, {"nope": 224})
    with pytest.raises(InvalidInputError, match="not a Conv2d"):
        build_selected_network(zoo.module, {"bn1": "direct-sum2d"}, {"bn1": 112})
    with pytest.raises(InvalidInputError):  # a 3x3 Winograd on the 7x7 stride-2 stem
        build_selected_network(zoo.module, {"conv1": "winograd-2x2-3x3"}, {"conv1": 224})


@pytest.mark.slow
@pytest.mark.skipif(not SHIPPED_TABLE.exists(), reason="the shipped primitive table is absent")
def test_select_cli_measured_and_predicted_with_run(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    def run(*args: str) -> tuple[int, str]:
        """Exit code and stdout (stderr joins it only on failure, for the message)."""
        code = main(list(args))
        captured = capsys.readouterr()
        return code, captured.out if code == 0 else captured.out + captured.err

    code, text = run("select", "torchvision:squeezenet1_0", "--costs", "measured", "--data", str(SHIPPED_TABLE),
                     "--json")
    assert code == 0, text
    out = json.loads(text)
    assert out["optimal"] and out["predicted_ms"] > 0
    convs = [layer for layer in out["layers"] if layer["kind"] == "conv"]
    assert convs and all(layer["primitive"] for layer in convs)
    assert out["predicted_ms"] == pytest.approx(sum(layer["predicted_ms"] for layer in out["layers"])
                                                + sum(t["predicted_ms"] for t in out["transforms"]))
    code, text = run("primitives", "fit", "--data", str(SHIPPED_TABLE), "--out", str(tmp_path / "m"), "--model", "lin")
    assert code == 0, text
    code, text = run("select", "torchvision:squeezenet1_0", "--costs", "predicted", "--model", str(tmp_path / "m"),
                     "--run", "--threads", "1", "--json")
    assert code == 0, text
    result = json.loads(text)["run"]
    assert result["outputs_match"] and set(result["latency_ms"]) >= {"pytorch", "selected"}
    assert result["speedup_vs_pytorch"] == pytest.approx(result["latency_ms"]["pytorch"]["median"]
                                                         / result["latency_ms"]["selected"]["median"])
    # layers left to PyTorch are counted by reason, with what to do about those the tables lack
    code, text = run("select", "torchvision:mobilenet_v2", "--costs", "measured", "--data", str(SHIPPED_TABLE),
                     "--json")
    assert code == 0, text
    reasons = json.loads(text)["fixed_reasons"]
    assert sorted(set(reasons.values())) == ["depthwise", "not in the measured tables"]
    assert sum(why == "depthwise" for why in reasons.values()) == 17
    code, text = run("select", "torchvision:mobilenet_v2", "--costs", "measured", "--data", str(SHIPPED_TABLE))
    missing = sum(why != "depthwise" for why in reasons.values())
    flat = " ".join(text.split())  # rich wraps long lines at the terminal's width
    assert code == 0 and f"left to PyTorch: {missing} not in the measured tables, 17 depthwise" in flat
    assert "--costs predicted" in flat and "profile primitives --network torchvision:mobilenet_v2" in flat
    code, text = run("select", "torchvision:squeezenet1_0", "--costs", "predicted", "--model", str(tmp_path))
    assert code != 0 and "no performance model" in text
    code, text = run("select", "torchvision:squeezenet1_0", "--model", str(tmp_path))
    assert code != 0 and "--costs predicted" in text


@pytest.mark.skipif(not SHIPPED_TABLE.exists(), reason="the shipped primitive table is absent")
@pytest.mark.slow
def test_own_machine_experiment_runs_both_selections(tmp_path: Path) -> None:
    from edgeplan.costmodels import fit_performance_model
    from edgeplan.decisions.selection_costs import merged_tables
    from experiments.mulder2020 import format_own, own_result

    data = merged_tables([SHIPPED_TABLE])
    model = fit_performance_model(data, "lin")
    r = own_result("squeezenet1_0", data, model, threads=1, rounds=3, repeats=2)
    assert r.selected_layers == 26 and r.predicted_selection_priced_ms >= r.measured_selection_ms - 1e-9
    assert r.run_measured_ms > 0 and r.run_predicted_ms > 0 and r.pytorch_ms > 0
    assert r.run_increase_pct == pytest.approx(100 * (r.run_predicted_ms / r.run_measured_ms - 1))
    assert "squeezenet1_0" in "\n".join(format_own([r]))


def test_flow_costs_are_measured_per_layout() -> None:
    from edgeplan.runtimes.selected import measure_flow_costs

    structure = selection_structure(load_graph("torchvision:resnet18"), selectable=runnable)
    ms = measure_flow_costs(structure.flow[:4], threads=1, runs=3)
    assert ms.shape == (4, 3) and (ms >= 0).all()
    kinds = [op.node.kind.value for op in structure.flow[:4]]
    assert all((ms[i] > 0).all() for i, k in enumerate(kinds) if k in ("batch_norm", "pool2d"))


def test_hwc_outputs_are_channels_last_and_stay_so() -> None:
    from edgeplan.runtimes.selected import batch_view

    y = torch.randn(7, 9, 5)  # (H, W, C) memory
    x = batch_view(y, "hwc")
    assert x.shape == (1, 5, 7, 9) and torch.equal(x[0], from_memory(y, "hwc"))
    assert x.is_contiguous(memory_format=torch.channels_last)
    pooled = torch.nn.functional.max_pool2d(x, 3, 2, 1)
    assert pooled.is_contiguous(memory_format=torch.channels_last)
    assert torch.cat([x, x], dim=1).is_contiguous(memory_format=torch.channels_last)


def test_selection_for_cuda_uses_its_own_costs_and_primitives(capsys: pytest.CaptureFixture[str]) -> None:
    """Selecting for a GPU: the CPU's shipped costs are refused, oneDNN (CPU-only) is never an option."""
    from edgeplan.decisions.selection_costs import own_formats

    assert {n for n in own_formats() if n not in own_formats("cuda")} == {"torch-onednn-chw", "torch-onednn-hwc"}
    assert main(["select", "torchvision:resnet18", "--torch-device", "cuda"]) != 0
    assert "networks_cuda.csv" in capsys.readouterr().err
    assert main(["select", "torchvision:resnet18", "--costs", "predicted", "--torch-device", "cuda:0"]) != 0
    err = capsys.readouterr().err
    assert "a model of that GPU" in err and "--torch-device cuda`, then --device NAME" in err
    gpu_table = str(data_file("primitives", "networks_cuda.csv"))
    assert main(["select", "torchvision:resnet18", "--torch-device", "tpu", "--data", gpu_table]) != 0
    assert "unknown device 'tpu'" in capsys.readouterr().err
    if not torch.cuda.is_available():  # running there does
        assert main(["select", "torchvision:resnet18", "--torch-device", "cuda", "--run", "--data",
                     gpu_table]) != 0
        assert "leave out --run" in capsys.readouterr().err
    # pricing alone needs no GPU: the GPU's tables, every layer selected
    assert main(["select", "torchvision:resnet18", "--torch-device", "cuda", "--json",
                 "--data", gpu_table]) == 0
    plan = json.loads(capsys.readouterr().out)
    convs = [layer for layer in plan["layers"] if layer["kind"] == "conv"]
    assert len(convs) == 20 and not plan["fixed_layers"]
    assert all(layer["primitive"] and not layer["primitive"].startswith("torch-onednn") for layer in convs)


def test_float32_check_puts_every_tf32_setting_back() -> None:
    """The output check turns TF32 off on CUDA and restores the settings exactly (no GPU needed to set them)."""
    from edgeplan.runtimes.selected import _float32_arithmetic

    conv, matmul = torch.backends.cudnn.conv, torch.backends.cuda.matmul
    before = (conv.fp32_precision, matmul.fp32_precision, torch.backends.cudnn.benchmark)
    with _float32_arithmetic(torch.device("cuda")):
        assert (conv.fp32_precision, matmul.fp32_precision) == ("ieee", "ieee")
    assert (conv.fp32_precision, matmul.fp32_precision, torch.backends.cudnn.benchmark) == before
    torch.get_float32_matmul_precision()  # PyTorch refuses this after a mix of its legacy and new TF32 APIs
    with _float32_arithmetic(torch.device("cpu")):
        assert (conv.fp32_precision, matmul.fp32_precision) == before[:2]


@pytest.mark.skipif("__import__('torch').cuda.is_available()")
def test_running_on_cuda_without_it_is_refused() -> None:
    from edgeplan.errors import MeasurementError
    from edgeplan.runtimes.selected import measure_flow_costs, run_selection

    structure = selection_structure(load_graph("torchvision:resnet18"), selectable=runnable)
    with pytest.raises(MeasurementError, match="CUDA is not available"):
        measure_flow_costs(structure.flow[:2], threads=1, torch_device="cuda")
    with pytest.raises(MeasurementError, match="CUDA is not available"):
        run_selection("torchvision:resnet18", {}, {}, None, threads=1, torch_device="cuda")


@pytest.mark.skipif("not __import__('torch').cuda.is_available()")
def test_random_primitives_reproduce_resnet18_outputs_on_cuda() -> None:
    """On a GPU: random primitives that run there compute the network (TF32 off); oneDNN's are refused there."""
    from edgeplan.runtimes.selected import measure_flow_costs, run_selection

    spec = "torchvision:resnet18"
    structure = selection_structure(load_graph(spec), selectable=lambda s: runnable(s, "cuda"))
    rng = np.random.default_rng(0)
    choices, inputs = {}, {}
    for node in structure.nodes:
        if node.kind == "conv" and node.conv is not None:
            c, k, im, f, s, p = node.conv
            options = [prim.name for prim in all_primitives()
                       if prim.supports_device("cuda") and prim.applies(ConvSpec(c, k, im, f, s, padding=p))]
            choices[node.name] = options[int(rng.integers(len(options)))]
            inputs[node.name] = im
    run = run_selection(spec, choices, inputs, "torch-native-chw", threads=1, rounds=3, torch_device="cuda")
    assert run.torch_device == "cuda" and set(run.latency) == {"pytorch", "selected", "single"}
    assert all(e < 1e-3 for e in run.output_error.values()), run.output_error
    zoo = build_model(spec)
    with pytest.raises(InvalidInputError, match="does not run on cuda"):
        build_selected_network(zoo.module.cuda(), {"conv1": "torch-onednn-chw"}, {"conv1": 224})
    ms = measure_flow_costs(structure.flow[:4], threads=1, runs=3, torch_device="cuda")
    assert ms.shape == (4, 3) and (ms >= 0).all()
    with pytest.raises(InvalidInputError, match="CUDA device"):
        run_selection(spec, choices, inputs, None, threads=1, torch_device=f"cuda:{torch.cuda.device_count()}")


def test_selection_run_result_matches_within_the_tolerance() -> None:
    from edgeplan.decisions.select import OUTPUT_TOLERANCE, SelectionRunResult
    from edgeplan.runtimes.selected import LatencySummary, SelectionRun

    latency = {"pytorch": LatencySummary(2.0, 1.9, 2.1, 3), "selected": LatencySummary(1.0, 0.9, 1.1, 3)}
    ok = SelectionRunResult(SelectionRun(1, latency, "", {"selected": OUTPUT_TOLERANCE}))
    assert ok.outputs_match and ok.matches("selected") and ok.matches("single") is None
    data = ok.to_dict()
    assert data["outputs_match"] and data["speedup_vs_pytorch"] == pytest.approx(2.0)
    assert data["latency_ms"]["selected"] == {"median": 1.0, "q1": 0.9, "q3": 1.1, "runs": 3}
    bad = SelectionRunResult(SelectionRun(1, latency, "", {"selected": 2 * OUTPUT_TOLERANCE}))
    assert not bad.outputs_match and not bad.to_dict()["outputs_match"] and bad.matches("selected") is False
