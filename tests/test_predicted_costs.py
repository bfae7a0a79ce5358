"""Planning on predicted costs: ``offload --mobile-device`` and ``partition --device`` price layers with a device
profile (:mod:`edgeplan.decisions.predicted_costs`)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from edgeplan.cli.main import main
from edgeplan.decisions import predicted_costs as pc
from edgeplan.decisions.offload import OffloadSetup, offload_inputs
from edgeplan.decisions.partition import PartitionOptions, plan_partition, simulated_cluster
from edgeplan.decisions.predict import predict
from edgeplan.errors import InvalidInputError
from edgeplan.frontends.zoo import load_graph
from edgeplan.ir.layer_chain import layer_chain
from edgeplan.measure.segment_profile import segments

MODEL, DEVICE = "synthetic:3", "torch-fp32-1t"


def test_node_costs_add_up_to_the_devices_prediction() -> None:
    graph = load_graph(MODEL)
    costs = pc.predicted_costs(graph, DEVICE)
    whole = predict(MODEL, DEVICE)
    assert costs.range_ms(n.name for n in graph.nodes) == pytest.approx(whole.prediction.latency_ms, rel=1e-9)
    assert sum(costs.op_ms) == pytest.approx(sum(o.ms or 0.0 for o in whole.prediction.ops), rel=1e-9)
    assert all(ms > 0 for ms in costs.node_ms.values()) and "input" not in costs.node_ms
    # a part of the model is priced as a model of its own kernels: its overhead learnt for that many, that long
    first = [n.name for n in graph.nodes[:5]]
    part = [i for i, n in enumerate(costs.op_nodes) if n in first]
    assert costs.range_ms(first) == pytest.approx(costs.total_of(part)) and 0 < len(part) < len(costs.op_ms)


def test_a_kernels_name_points_at_its_node() -> None:
    names = {"conv", "stem.0"}
    assert pc._node_of("conv2d+relu@conv", names) == "conv"
    assert pc._node_of("TRANSPOSE:stem.0", names) == "stem.0"
    assert pc._node_of("aten::add@folded#3", names) is None
    graph = load_graph(MODEL)
    first = next(n.name for n in graph.nodes if n.kind.value != "input")
    assert pc._op_nodes(graph, ["TRANSPOSE:input", f"conv@{first}"]) == (first, first)  # to the next kernel's node


def test_an_operation_the_device_cannot_price_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    import edgeplan.costmodels.opwise.graph_ops as graph_ops

    real = graph_ops.graph_ops
    monkeypatch.setattr(graph_ops, "graph_ops", lambda *a, **k: (real(*a, **k)[0], ["mystery@x (tflite.CUSTOM)"]))
    with pytest.raises(InvalidInputError, match=r"cannot price 1 operation\(s\).*mystery@x"):
        pc.predicted_costs(load_graph(MODEL), DEVICE)


def test_offload_prices_a_predicted_mobile_per_range() -> None:
    setup = OffloadSetup(MODEL, cloud_speedup=10.0, mobile_device=DEVICE)
    costs, chain, origin = offload_inputs(setup)
    predicted = pc.predicted_costs(chain.graph, DEVICE)
    n = len(chain.layers)
    mobile = np.asarray(costs.mobile_ms)
    assert mobile[0, n - 1] == pytest.approx(predicted.range_ms(predicted.node_ms))
    layers = layer_chain(load_graph(MODEL)).layers
    assert mobile[0, 0] == pytest.approx(predicted.range_ms(layers[0].nodes))
    assert mobile[1, 2] == pytest.approx(predicted.range_ms([*layers[1].nodes, *layers[2].nodes]))
    assert np.allclose(np.asarray(costs.cloud_ms), mobile / 10.0)
    assert "predicted" in costs.mobile_label and origin.here is None


@pytest.mark.parametrize(("args", "message"), [
    (("--mobile-threads", "2"), "--mobile-threads has no effect"),
    (("--run",), "drop --run or --mobile-device"),
    (("--mobile-device", "no-such-phone"), "unknown device 'no-such-phone'"),
])
def test_offload_refuses_what_a_predicted_mobile_cannot_do(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                           args: tuple[str, ...], message: str) -> None:
    device = () if "--mobile-device" in args else ("--mobile-device", DEVICE)
    code = main(["--home", str(tmp_path), "offload", MODEL, "--cloud-speedup", "4", *device, *args])
    err = capsys.readouterr().err
    assert code != 0 and message in err and "Traceback" not in err


def test_partition_stages_cost_their_predicted_nodes(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    cluster = simulated_cluster(4, 0, 64.0)
    result = plan_partition(MODEL, cluster, PartitionOptions(device=DEVICE))
    predicted = pc.predicted_costs(load_graph(MODEL), DEVICE)
    assert result.stage_compute_ms is not None
    parts = segments(load_graph(MODEL), result.points)
    assert list(result.stage_compute_ms) == pytest.approx(
        [predicted.range_ms([n for part in parts[a:b + 1] for n in part]) for a, b in result.runs])
    assert any("predicted" in note for note in result.notes)
    code = main(["--home", str(tmp_path), "partition", MODEL, "--simulate", "0", "--nodes", "4", "--memory-mb", "64",
                 "--device", DEVICE, "--json"])
    assert code == 0 and json.loads(capsys.readouterr().out)["stages"]
    code = main(["--home", str(tmp_path), "partition", MODEL, "--simulate", "0", "--nodes", "4", "--memory-mb", "64",
                 "--device", DEVICE, "--no-compute"])
    assert code != 0 and "--device" in capsys.readouterr().err
    with pytest.raises(InvalidInputError, match="compute=True"):
        PartitionOptions(compute=False, device=DEVICE)
