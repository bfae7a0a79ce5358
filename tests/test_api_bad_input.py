"""Bad input to the Python API found by an audit: a clear InvalidInputError, nothing silently wrong, nothing lost."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from edgeplan.api import cache_export, load_graph, predict_latency
from edgeplan.errors import InvalidInputError
from edgeplan.frontends.torch_frontend import graph_from_torch
from edgeplan.frontends.zoo import build_model
from edgeplan.latency.predict import kernel_profile_of, load_device_model, predict_graph
from edgeplan.measure import Store, check_thread_count
from edgeplan.measure.harness import MAX_THREADS
from edgeplan.selection import SHIPPED, SHIPPED_TABLES, merged_tables


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
        predict_latency([spec])  # a list of models, one of them not a model


def test_an_onnx_path_object_and_an_atomic_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = build_model("synthetic:3")
    path = tmp_path / "cache" / "synthetic_3.onnx"
    cache_export(model.module, model.example_inputs(), path)
    assert path.is_file() and sorted(p.name for p in path.parent.iterdir()) == [path.name]
    assert load_graph(path).name == str(path)
    assert predict_latency(path).model == str(path)
    with pytest.raises(InvalidInputError, match="a list of them"):
        predict_latency(None)  # type: ignore[arg-type]

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
