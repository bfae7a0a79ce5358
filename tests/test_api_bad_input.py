"""Bad input to the Python API found by an audit: a clear InvalidInputError, nothing silently wrong, nothing lost."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from repo_data import data_file
from torch import nn

from edgeplan.costmodels.opwise.graph_ops import predict_graph
from edgeplan.costmodels.opwise.profiles import kernel_profile_of, load_device_model
from edgeplan.decisions.predict import predict
from edgeplan.decisions.select import SHIPPED, SHIPPED_TABLES
from edgeplan.decisions.selection_costs import merged_tables
from edgeplan.errors import InvalidInputError
from edgeplan.frontends.onnx_export import cache_export
from edgeplan.frontends.torch_frontend import graph_from_torch
from edgeplan.frontends.zoo import build_model, load_graph
from edgeplan.measure import Store, check_thread_count
from edgeplan.measure.harness import MAX_THREADS


def test_export_refuses_the_stores_own_file(tmp_path: Path) -> None:
    path = tmp_path / "measurements.csv"  # a Store whose file name looks like an export
    with Store.open(path) as store:
        with pytest.raises(InvalidInputError, match="this Store's own database file"):
            store.export(path)
    assert path.read_bytes().startswith(b"SQLite format 3")  # the export would have written CSV over it
    with Store.open(path) as store:  # still a Store
        assert store.measurements() == []


class _GridSample(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.grid_sample(self.conv(x), torch.zeros(1, 4, 4, 2), align_corners=False)


def test_an_opaque_operator_is_unpredicted_not_costed() -> None:
    graph = graph_from_torch(_GridSample(), (torch.randn(1, 3, 16, 16),), opaque=True)
    model = load_device_model("torch-fp32-1t", "gbdt")
    pred = predict_graph(graph, model, kernel_profile_of(model))
    assert len(pred.unpredicted) == 1 and "grid_sampler" in pred.unpredicted[0] and "opaque" in pred.unpredicted[0]
    assert [op.ms for op in pred.ops if "grid_sampler" in op.name] == [None]


def test_predict_latency_keeps_an_unknown_operator_opaque_when_asked(tmp_path: Path) -> None:
    from edgeplan.errors import UnsupportedOperatorError

    path = tmp_path / "sampler.onnx"
    cache_export(_GridSample().eval(), (torch.randn(1, 3, 16, 16),), path)
    with pytest.raises(UnsupportedOperatorError, match="GridSample"):
        predict(str(path))
    pred = predict(str(path), opaque=True).prediction
    assert len(pred.unpredicted) == 1 and "opaque" in pred.unpredicted[0] and pred.latency_ms > 0


class _Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(32, 96)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = (t.reshape(1, 16, 2, 16).transpose(1, 2) for t in self.qkv(x).chunk(3, dim=-1))
        return F.scaled_dot_product_attention(q, k, v)


def test_attention_without_a_predictor_of_its_own_is_unpredicted() -> None:
    """Predictors fitted on CNNs alone once priced an attention by the element-wise predictor at about 0.05 ms
    (ViT-B/16's twelve, each some 0.1 GFLOPs) and reported it as predicted. Without its transformer extension the
    shipped profile lists it as unpredicted; with it (as shipped) attention has a predictor of its own."""
    from edgeplan.costmodels.opwise.model import LatencyModel

    graph = graph_from_torch(_Attention(), torch.randn(1, 16, 32))
    model = load_device_model("torch-fp32-1t", "gbdt")
    assert isinstance(model, LatencyModel)
    cnns = model.without_extensions()
    pred = predict_graph(graph, cnns, kernel_profile_of(model))
    assert len(pred.unpredicted) == 1 and "scaled_dot_product_attention" in pred.unpredicted[0]
    projection = next(op for op in pred.ops if "linear" in op.kind)
    assert projection.ms is not None and projection.ms > 0 and "conv" in projection.predictor
    shipped = predict_graph(graph, model, kernel_profile_of(model))
    (attention,) = [op for op in shipped.ops if "scaled_dot_product_attention" in op.kind]
    assert not shipped.unpredicted and attention.ms is not None and attention.ms > 0
    assert attention.predicted_by == "aten::scaled_dot_product_attention|attention"


def test_a_lone_example_tensor_keeps_its_batch() -> None:
    graph = graph_from_torch(nn.Sequential(nn.Linear(16, 4), nn.ReLU()), torch.randn(1, 16))
    assert [n.output_shapes for n in graph.inputs] == [((1, 16),)]
    with pytest.raises(InvalidInputError, match="nn.Module instance"):
        graph_from_torch(nn.Linear, torch.randn(1, 16))  # type: ignore[arg-type]


@pytest.mark.parametrize("device", ["torch-fp32-1t/../torch-fp32-2t", "/tmp", "", None])
def test_a_device_is_a_name_not_a_path(device: Any) -> None:
    with pytest.raises(InvalidInputError, match="give a device name"):
        load_device_model(device, "gbdt")


@pytest.mark.parametrize("spec", [None, 123, ["torchvision:resnet18"]])
def test_a_model_spec_must_be_a_string_or_path(spec: Any) -> None:
    with pytest.raises(InvalidInputError, match="give a zoo string"):
        load_graph(spec)
    with pytest.raises(InvalidInputError, match="give a zoo string"):
        predict([spec])  # a list of models, one of them not a model


def test_an_onnx_path_object_and_an_atomic_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = build_model("synthetic:3")
    path = tmp_path / "cache" / "synthetic_3.onnx"
    cache_export(model.module, model.example_inputs(), path)
    assert path.is_file() and sorted(p.name for p in path.parent.iterdir()) == [path.name]
    assert load_graph(path).name == str(path)
    assert predict(path).model == str(path)
    with pytest.raises(InvalidInputError, match="a list of them"):
        predict(None)  # type: ignore[arg-type]

    def half_then_fail(module: Any, inputs: Any, out: Path, opset: Any = None) -> Path:
        Path(out).write_bytes(b"half an export")
        raise RuntimeError("killed mid-export")

    monkeypatch.setattr("edgeplan.frontends.onnx_export.export_onnx", half_then_fail)
    other = tmp_path / "cache" / "other.onnx"
    with pytest.raises(RuntimeError, match="killed"):
        cache_export(model.module, model.example_inputs(), other)
    assert not other.exists() and sorted(p.name for p in other.parent.iterdir()) == [path.name]


def test_thread_counts_and_input_shapes_are_bounded() -> None:
    assert check_thread_count(MAX_THREADS) == MAX_THREADS
    with pytest.raises(InvalidInputError, match="more than"):
        check_thread_count(2**31)
    for shape in [(1, 3, -5, 5), (1, 3, 2.5, 4), "1x3x224x224"]:
        with pytest.raises(InvalidInputError, match="positive integers"):
            build_model("torchvision:resnet18", shape)  # type: ignore[arg-type]


def test_one_table_path_is_one_table() -> None:
    table = SHIPPED / SHIPPED_TABLES[0]
    assert merged_tables(str(table)).features.shape == merged_tables([table]).features.shape  # type: ignore[arg-type]


def test_measure_model_wants_a_timing_config() -> None:
    from edgeplan.measure.model_latency import measure_model

    with pytest.raises(InvalidInputError, match="must be a TimingConfig"):
        measure_model("paper:alexnet", config={"max_time_s": 1})  # type: ignore[arg-type]


def test_calibrate_primitives_wants_loaded_inputs_and_a_thread_count(tmp_path: Path) -> None:
    from edgeplan.costmodels import load_performance_model, load_primitive_csv
    from edgeplan.costmodels.primitive_calibration import calibrate_primitives
    from edgeplan.decisions.select import SHIPPED_MODEL

    source = load_performance_model(SHIPPED / SHIPPED_MODEL)
    table = data_file("primitives", "networks_cpu_2t.csv")
    with pytest.raises(InvalidInputError, match="PrimitiveDataset"):
        calibrate_primitives(source, str(table))  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="thread count"):
        calibrate_primitives(source, load_primitive_csv(table), method="finetune", threads=0)


def test_primitive_tables_want_whole_layer_shapes(tmp_path: Path) -> None:
    from edgeplan.costmodels import load_primitive_csv

    head = "c,k,im,f,s,direct-sum2d\n"
    fractional = tmp_path / "fractional.csv"
    fractional.write_text(head + "3.5,8,16,3,1,100\n")
    with pytest.raises(InvalidInputError, match="row 2, column 'c': 3.5 is not a whole number"):
        load_primitive_csv(fractional)


def test_offload_inputs_are_checked_when_given() -> None:
    from edgeplan.decisions.offload import OffloadOptions, OffloadSetup, plan_offload
    from edgeplan.planners.offload import OffloadCosts

    for bad in ({"cloud_speedup": float("inf")}, {"cloud_speedup": "2"}, {"mobile_threads": 0}, {"model": None}):
        with pytest.raises(InvalidInputError):
            OffloadSetup(**{"model": "paper:alexnet", **bad})  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="a zoo string or an OffloadSetup"):
        plan_offload(3)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="True or False"):
        OffloadOptions(same_side_splits="no")  # type: ignore[arg-type]
    m = [[1.0, 2.0, 3.0], [0.0, 1.0, 2.0], [0.0, 0.0, 1.0]]
    with pytest.raises(InvalidInputError, match="sequence of layer names"):
        OffloadCosts("abc", m, m, (1, 1, 1, 1))  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="more than once"):
        OffloadCosts(("a", "a", "b"), m, m, (1, 1, 1, 1))
    with pytest.raises(InvalidInputError, match="boundary_bytes must be a sequence"):
        OffloadCosts(("a", "b", "c"), m, m, None)  # type: ignore[arg-type]


def test_store_open_checks_its_arguments_before_creating_a_file(tmp_path: Path) -> None:
    for timeout in (math.nan, math.inf, -1, "5"):
        with pytest.raises(InvalidInputError, match="busy_timeout_s"):
            Store.open(tmp_path / "s.sqlite", busy_timeout_s=timeout)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="Store path"):
        Store.open(None)  # type: ignore[arg-type]
    assert not (tmp_path / "s.sqlite").exists()


def test_select_model_refuses_options_its_costs_do_not_use() -> None:
    from edgeplan.decisions.select import select

    with pytest.raises(InvalidInputError, match="tables are measured costs"):
        select("paper:alexnet", costs="predicted", tables=[SHIPPED / SHIPPED_TABLES[0]])
    with pytest.raises(InvalidInputError, match="model_dir is a performance model"):
        select("paper:alexnet", costs="measured", model_dir=SHIPPED)
