"""Folded work: operators eager PyTorch runs at every call that the IR folds away, priced or named, never 0 ms."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F
from repo_data import data_file
from torch import nn

from edgeplan.cli.predict_cmd import _grouped
from edgeplan.costmodels.opwise.graph_ops import graph_ops, predict_graph
from edgeplan.costmodels.opwise.ops import network_footprint
from edgeplan.costmodels.opwise.profiles import load_device_model
from edgeplan.errors import InvalidGraphError
from edgeplan.frontends.torch_frontend import graph_from_torch
from edgeplan.ir.serialize import graph_to_dict
from edgeplan.measure.op_timing import ProfileCalls


class StandardizedConv(nn.Module):
    """NFNets' convolution: the weight standardized at every call (a batch norm over each filter), then an
    identity scaling of the activation (``x * 1``); and EdgeNeXt's positional encoding, a convolution of constants."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(8, 4, 3, 3))
        self.gain = nn.Parameter(torch.ones(8, 1, 1, 1))
        self.pos = nn.Parameter(torch.randn(1, 2, 6, 6))
        self.proj = nn.Parameter(torch.randn(8, 2, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = F.batch_norm(self.weight.reshape(1, 8, -1), None, None, weight=(self.gain * 0.5).view(-1),
                         training=True, momentum=0.0, eps=1e-5).reshape_as(self.weight)
        return F.conv2d(x, w, padding=1) * 1.0 + F.conv2d(self.pos, self.proj)


@pytest.fixture(scope="module")
def graph() -> object:
    return graph_from_torch(StandardizedConv().eval(), (torch.randn(1, 4, 6, 6),), name="stdconv")


def test_the_frontend_records_the_shapes_of_every_folded_operator(graph: object) -> None:
    g = graph
    assert g.folded_ops == ("reshape", "mul", "view", "batch_norm", "reshape_as", "mul", "conv2d")
    assert len(g.folded_shapes) == len(g.folded_ops)
    assert g.folded_shapes[3] == (((1, 8, 36), (8,)), ((1, 8, 36),))  # the weight's statistics, its gain
    assert g.folded_shapes[5] == (((1, 8, 6, 6),), ((1, 8, 6, 6),))  # the identity scales the activation
    assert graph_to_dict(g)["folded_shapes"][3] == {"inputs": [[1, 8, 36], [8]], "outputs": [[1, 8, 36]]}
    with pytest.raises(InvalidGraphError, match="7 folded operators but shapes for 1"):
        dataclasses.replace(g, folded_shapes=g.folded_shapes[:1]).validate()


def test_eager_pytorch_prices_folded_work_and_names_what_it_cannot(graph: object) -> None:
    ops, skipped = graph_ops(graph, "torch-eager")
    folded = {o.name: o for o in ops if "@folded#" in o.name}
    # the reshapes and the view move no data; the two multiplications, the weight standardization and the
    # convolution of constants are ops
    assert sorted(folded) == ["aten::batch_norm@folded#3", "aten::conv2d@folded#6", "aten::mul@folded#1",
                              "aten::mul@folded#5"]
    scale = folded["aten::mul@folded#5"]
    assert scale.key == "aten::mul|elementwise" and scale.category == "elementwise"
    assert dict(zip(("in_h", "in_w", "in_c", "input_size", "inputs", "output_size"), scale.x, strict=True)) == {
        "in_h": 6, "in_w": 6, "in_c": 8, "input_size": 288, "inputs": 1, "output_size": 288}
    # the weight standardization is its own category of work, not a batch norm of activations: 8 filters of 36
    # values (the gain passed beside the weight is not counted)
    std = folded["aten::batch_norm@folded#3"]
    assert std.key == "aten::batch_norm|weight_norm" and std.category == "weight_norm"
    assert dict(zip(("filters", "fan_in", "input_size"), std.x, strict=True)) == {
        "filters": 8, "fan_in": 36, "input_size": 288}
    # a convolution of constants is the convolution node it would have been, its weight among its inputs
    conv = next(o for o in ops if o.name == "aten::conv2d@folded#6")
    assert conv.key == "aten::conv2d|conv" and conv.category == "conv" and not skipped
    assert conv.lead["attrs"] == {"in_channels": 2, "out_channels": 8, "kernel": [1, 1], "stride": [1, 1],
                                  "dilation": [1, 1], "groups": 1, "bias": False}
    assert conv.lead["macs"] == 8 * 36 * 2
    # a graph runtime that folds constants runs none of it
    ops_folding, skipped_folding = graph_ops(graph, "torch-eager", "fold-constants")
    assert not [o for o in ops_folding if "@folded#" in o.name] and not skipped_folding
    # the network's footprint is its kernels', for the folded operators too (their own sizes left out)
    kernels = [o for o in ops if "@folded#" not in o.name]
    assert kernels and {o.context[2] for o in ops} == {network_footprint(kernels)}


def test_folded_operators_without_shapes_are_named_not_priced(graph: object) -> None:
    ops, skipped = graph_ops(dataclasses.replace(graph, folded_shapes=()), "torch-eager")
    assert not [o for o in ops if "@folded#" in o.name]
    assert [s.split(" ")[0] for s in skipped] == ["aten::mul@folded#1", "aten::batch_norm@folded#3",
                                                  "aten::mul@folded#5", "aten::conv2d@folded#6"]


def test_the_shipped_eager_profile_adds_the_folded_work_to_the_latency(graph: object) -> None:
    model = load_device_model("torch-fp32-2t", "gbdt")
    with_work = predict_graph(graph, model, "torch-eager")
    without = predict_graph(dataclasses.replace(graph, folded_ops=(), folded_shapes=()), model, "torch-eager")
    priced = [o for o in with_work.ops if "@folded#" in o.name and o.ms is not None]
    assert len(priced) == 4 and all(o.ms > 0 for o in priced)
    assert next(o for o in priced if o.name == "aten::conv2d@folded#6").predicted_by == "aten::conv2d|conv"
    assert next(o for o in priced if o.name == "aten::batch_norm@folded#3").predicted_by == (
        "aten::batch_norm|weight_norm")  # the profile's third extension (normalization-free networks)
    assert not with_work.unpredicted
    assert with_work.latency_ms == pytest.approx(without.latency_ms + sum(o.ms for o in priced))
    # a profile that learnt no weight standardization names it as unpredicted, never prices it by the batch norms of
    # activations (the element-wise category's)
    cnn = predict_graph(graph, model.without_extensions(keep=2), "torch-eager")
    assert [u.split(" ")[0] for u in cnn.unpredicted] == ["aten::batch_norm@folded#3"]


@pytest.mark.parametrize(("op", "ins", "out", "expected"), [
    # Swin V2's position-bias MLP over its 2401 constant coordinates: a linear layer over rows
    ("linear", [[2401, 2], [384, 2], [384]], [2401, 384],
     {"op": "linear", "attrs": {"in_features": 2, "out_features": 384, "bias": True}, "macs": 2401 * 384 * 2,
      "params": 384 * 3}),
    ("linear", [[7, 5], [3, 5]], [7, 3], {"attrs": {"in_features": 5, "out_features": 3, "bias": False}}),
    ("matmul", [[2, 4, 6], [2, 6, 3]], [2, 4, 3], {"op": "matmul", "attrs": {"contraction": 6, "equation": ""},
                                                   "macs": 2 * 4 * 3 * 6, "params": 0}),
    # a strided, padded 3x3 convolution (14 -> 7) and a depthwise one: stride and groups from the shapes
    ("conv2d", [[1, 8, 14, 14], [16, 8, 3, 3], [16]], [1, 16, 7, 7],
     {"attrs": {"in_channels": 8, "out_channels": 16, "kernel": [3, 3], "stride": [2, 2], "dilation": [1, 1],
                "groups": 1, "bias": True}, "macs": 16 * 49 * 8 * 9}),
    ("conv2d", [[1, 8, 9, 9], [8, 1, 3, 3]], [1, 8, 9, 9], {"attrs": {
        "in_channels": 8, "out_channels": 8, "kernel": [3, 3], "stride": [1, 1], "dilation": [1, 1], "groups": 8,
        "bias": False}}),
])
def test_a_folded_product_is_the_node_its_shapes_determine(op: str, ins: list[list[int]], out: list[int],
                                                           expected: dict[str, object]) -> None:
    from edgeplan.costmodels.opwise.ops import folded_product_node

    node = folded_product_node(op, ins, [out])
    assert node is not None and node["output_shapes"] == [out]
    assert {k: node[k] for k in expected} == expected


@pytest.mark.parametrize(("op", "ins", "out"), [
    ("linear", [[7, 5], [3, 4]], [7, 3]),  # the weight does not take the input's features
    ("matmul", [[4, 6], [5, 3]], [4, 3]),  # the contraction does not match
    ("conv2d", [[1, 8, 14, 14], [16, 3, 3, 3]], [1, 16, 7, 7]),  # 8 channels are no multiple of 3 per group
    ("conv2d", [[1, 8, 14, 14], [16, 8, 3, 3]], [1, 16, 20, 20]),  # no stride and padding grow 14 to 20
    ("conv_transpose2d", [[1, 8, 7, 7], [8, 16, 2, 2]], [1, 16, 14, 14]),  # not a product it knows
])
def test_a_folded_product_its_shapes_do_not_determine_is_refused(op: str, ins: list[list[int]],
                                                                  out: list[int]) -> None:
    from edgeplan.costmodels.opwise.ops import folded_product_node

    assert folded_product_node(op, ins, [out]) is None


def test_a_folded_product_the_shapes_do_not_determine_is_named_not_priced(graph: object) -> None:
    bad = list(graph.folded_shapes)
    bad[6] = (((1, 2, 6, 6), (8, 3, 1, 1)), ((1, 8, 6, 6),))  # 2 channels, 3 per group
    ops, skipped = graph_ops(dataclasses.replace(graph, folded_shapes=tuple(bad)), "torch-eager")
    assert not [o for o in ops if o.name == "aten::conv2d@folded#6"]
    assert skipped == ["aten::conv2d@folded#6 (aten::conv2d, folded: shapes do not determine the product)"]


def test_eager_profiling_times_each_folded_operator_that_moves_data(graph: object) -> None:
    from edgeplan.ir.kernels import deduce_kernels
    from edgeplan.measure.torch_op_profile import profile_torch_ops

    m = StandardizedConv().eval()
    runs = profile_torch_ops(m, (torch.randn(1, 4, 6, 6),), deduce_kernels(graph, "torch-eager"), graph, threads=1,
                             calls=ProfileCalls(runs=3))
    # the reshapes and the view are views; the rest, in the graph's order, each timed in every run
    assert [(j, t.kind, t.kernel) for j, t in runs.folded_ops] == [
        (1, "aten::mul", "aten::mul@folded#1"), (3, "aten::batch_norm", "aten::batch_norm@folded#3"),
        (5, "aten::mul", "aten::mul@folded#5"), (6, "aten::conv2d", "aten::conv2d@folded#6")]
    assert all(t.median_ms > 0 and t.min_ms <= t.median_ms and not t.nodes for _, t in runs.folded_ops)
    assert sum(t.min_ms for _, t in runs.folded_ops) <= max(runs.folded_ms)


def test_folded_events_are_told_apart_by_their_first_input_shape() -> None:
    from edgeplan.measure.torch_op_profile import _assign_folded

    keys = [("aten::batch_norm", (1, 8, 36)), ("aten::batch_norm", (1, 16, 72)), ("aten::mul", (8, 1, 1, 1))]
    # the larger weight's standardization ran first; a mul whose shape the profiler did not record takes the
    # first free mul; an event of no folded operator's name is no folded operator's
    dropped = [("aten::batch_norm", (1, 16, 72), 0.5), ("aten::mul", None, 0.1), ("aten::batch_norm", (1, 8, 36), 0.2),
               ("aten::add", (1,), 0.3)]
    assert _assign_folded(dropped, keys) == [(1, 0.5), (2, 0.1), (0, 0.2)]


def test_a_records_timed_folded_operators_are_ops_a_model_learns(graph: object) -> None:
    from edgeplan.costmodels.opwise.estimator import OpLatencyEstimator
    from edgeplan.costmodels.opwise.ops import record_ops
    from edgeplan.measure.op_campaign import _normalised
    from experiments.li2023 import predict_with_folded_work

    def std(j: int, filters: int, fan_in: int, ms: float) -> dict[str, object]:
        return {"kernel": f"aten::batch_norm@folded#{j}", "kind": "aten::batch_norm", "nodes": [], "ms": ms,
                "min_ms": ms * 0.9, "iqr_rel": 0.0, "ratio": ms / 2, "min_ratio": ms * 0.9 / 2, "folded": j,
                "op": "batch_norm", "input_shapes": [[1, filters, fan_in]], "output_shapes": [[1, filters, fan_in]]}

    row = {"model": "m", "latency_ms": 4.0, "latency_min_ms": 3.8, "iqr_rel": 0.1, "ops": [], "nodes": {},
           "op_sum_ms": 0.0, "raw_folded_work_ms": 0.6, "folded_ops": [std(1, 64, 576, 0.4), std(4, 64, 576, 0.2)]}
    # beside a reference, a folded op's time is its ratio at the scenario's reference latency, as any op's
    paired = _normalised(row, {"ratio": 2.0, "min_ratio": 1.9, "iqr_rel": 0.05}, 2.2, 2.0)
    assert [o["ms"] for o in paired["folded_ops"]] == pytest.approx([0.44, 0.22])
    assert [o["raw_ms"] for o in paired["folded_ops"]] == [0.4, 0.2]
    ops = record_ops(paired)
    assert [(o.name, o.key, o.measured_ms) for o in ops] == [
        ("aten::batch_norm@folded#1", "aten::batch_norm|weight_norm", pytest.approx(0.44)),
        ("aten::batch_norm@folded#4", "aten::batch_norm|weight_norm", pytest.approx(0.22))]
    assert [o.context[:2] for o in ops] == [(0.0, 0.0), (1.0, 1.0)]  # the same standardization ran before
    assert {o.context[2] for o in ops} == {network_footprint([])}  # the network's value is its kernels' (none here)
    assert record_ops(paired, "min")[0].measured_ms == pytest.approx(0.36)  # its fastest ratio at the fastest reference
    # a model fitted on such records prices them by their own predictor, from the record alone (no graph rebuilt)
    est = OpLatencyEstimator(method="lasso", scenario="torch-fp32-2t", context=False, min_samples=5)
    model = est.fit([paired] * 12).model_
    assert "aten::batch_norm|weight_norm" in model.predictors
    pred = predict_with_folded_work(model, paired)
    assert not pred.unpredicted and [o.name for o in pred.ops] == [o.name for o in ops]
    # and a graph's weight standardization (NFNets', with their gain beside the weight) by the same predictor
    std = next(o for o in model.predict_ops(graph_ops(graph, "torch-eager")[0]).ops if "batch_norm@folded" in o.name)
    assert std.predicted_by == "aten::batch_norm|weight_norm" and std.ms is not None and std.ms > 0


def test_the_table_counts_unpredicted_ops_of_one_kind_and_reason() -> None:
    names = [f"aten::batch_norm@folded#{i} (aten::batch_norm, folded: no predictor)" for i in (3, 9, 14)]
    lone = "aten::conv2d@folded#6 (aten::conv2d, folded: shapes do not determine the product)"
    assert _grouped([names[0], lone, *names[1:]]) == ["3 x aten::batch_norm, folded: no predictor", lone]
    assert _grouped(names[:1]) == names[:1]


@pytest.mark.slow
def test_li2023_evaluation_counts_a_records_folded_work_as_predict_does() -> None:
    from edgeplan.measure.op_dataset import load_dataset
    from experiments.li2023 import _evaluate, predict_with_folded_work

    path = data_file("latency", "keep-memory", "torch-fp32-2t.jsonl.xz")
    wanted = {"timm:mobileone_s0", "timm:nf_resnet50", "synthetic:900"}
    records = {str(r["model"]): r for r in load_dataset(path).records if r["model"] in wanted}
    model = load_device_model("torch-fp32-2t", "gbdt")
    plain = model.predict_record(records["synthetic:900"])  # no folded work: its own ops only
    assert predict_with_folded_work(model, records["synthetic:900"]) == plain
    mobileone = predict_with_folded_work(model, records["timm:mobileone_s0"])  # 29 identity additions, priced
    added = [o for o in mobileone.ops if "@folded#" in o.name]
    assert len(added) == 29 and all(o.ms is not None and o.ms > 0 for o in added)
    assert mobileone.latency_ms == pytest.approx(model.predict_record(records["timm:mobileone_s0"]).latency_ms
                                                 + sum(o.ms or 0.0 for o in added))
    # its weight standardizations: priced by the profile's weight-standardization predictor (its third extension)
    nf = predict_with_folded_work(model, records["timm:nf_resnet50"])
    standardized = [o for o in nf.ops if "aten::batch_norm@folded#" in o.name]
    assert not nf.unpredicted and len(standardized) == 53
    assert all(o.predicted_by == "aten::batch_norm|weight_norm" for o in standardized)
    # named by a profile without it, and the report names each kind once
    cnn = model.without_extensions(keep=2)
    nf = predict_with_folded_work(cnn, records["timm:nf_resnet50"])
    assert len(nf.unpredicted) == 53 and all("aten::batch_norm@folded#" in u for u in nf.unpredicted)
    assert _evaluate(cnn, [records["timm:nf_resnet50"]])["unpredicted"] == ["aten::batch_norm (aten::batch_norm)"]


def test_a_records_folded_work_that_cannot_be_rebuilt_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    import edgeplan.frontends.zoo as zoo
    from edgeplan.errors import InvalidInputError
    from experiments import li2023

    def refuse(spec: str, **_: object) -> object:
        raise InvalidInputError(f"unknown model {spec!r}")

    monkeypatch.setattr(zoo, "load_graph", refuse)
    li2023._folded_work.cache_clear()
    model = load_device_model("torch-fp32-2t", "gbdt")
    record = {"model": "timm:not_a_model", "latency_ms": 5.0, "raw_folded_work_ms": 1.0, "ops": [], "nodes": {}}
    pred = li2023.predict_with_folded_work(model, record)
    li2023._folded_work.cache_clear()
    assert pred.unpredicted == ["folded work@timm:not_a_model (its graph did not import here: unknown model "
                                "'timm:not_a_model')"]
