"""Folded work: operators eager PyTorch runs at every call that the IR folds away, priced or named, never 0 ms."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from edgeplan.cli.predict_cmd import _grouped
from edgeplan.errors import InvalidGraphError
from edgeplan.frontends.torch_frontend import graph_from_torch
from edgeplan.ir.serialize import graph_to_dict
from edgeplan.latency.predict import graph_ops, load_device_model, predict_graph

SHIPPED = Path(__file__).resolve().parents[1] / "edgeplan" / "data" / "latency"


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
    # the reshapes and the view move no data; the two multiplications are priced
    assert sorted(folded) == ["aten::mul@folded#1", "aten::mul@folded#5"]
    scale = folded["aten::mul@folded#5"]
    assert scale.key == "aten::mul|elementwise" and scale.category == "elementwise"
    assert dict(zip(("in_h", "in_w", "in_c", "input_size", "inputs", "output_size"), scale.x, strict=True)) == {
        "in_h": 6, "in_w": 6, "in_c": 8, "input_size": 288, "inputs": 1, "output_size": 288}
    # the weight standardization has no predictor of its kind of work, and a convolution of constants no recorded
    # attributes: both named as unpredicted, not priced at 0
    assert skipped == ["aten::batch_norm@folded#3 (aten::batch_norm, folded: no predictor)",
                       "aten::conv2d@folded#6 (aten::conv2d, folded: attributes not recorded)"]
    # a graph runtime that folds constants runs none of it
    ops_folding, skipped_folding = graph_ops(graph, "torch-eager", "fold-constants")
    assert not [o for o in ops_folding if "@folded#" in o.name] and not skipped_folding


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
    assert len(priced) == 2 and all(o.ms > 0 for o in priced)
    assert [u.split(" ")[0] for u in with_work.unpredicted] == ["aten::batch_norm@folded#3", "aten::conv2d@folded#6"]
    assert with_work.latency_ms == pytest.approx(without.latency_ms + sum(o.ms for o in priced))


def test_the_table_counts_unpredicted_ops_of_one_kind_and_reason() -> None:
    names = [f"aten::batch_norm@folded#{i} (aten::batch_norm, folded: no predictor)" for i in (3, 9, 14)]
    lone = "aten::conv2d@folded#6 (aten::conv2d, folded: attributes not recorded)"
    assert _grouped([names[0], lone, *names[1:]]) == ["3 x aten::batch_norm, folded: no predictor", lone]
    assert _grouped(names[:1]) == names[:1]


def test_li2023_evaluation_counts_a_records_folded_work_as_predict_does() -> None:
    from edgeplan.experiments.li2023 import _evaluate, predict_with_folded_work
    from edgeplan.latency.campaign import load_dataset

    path = SHIPPED / "xeon" / "torch-fp32-2t.all-spaces.jsonl.xz"
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
    nf = predict_with_folded_work(model, records["timm:nf_resnet50"])  # its weight standardizations, by name
    assert len(nf.unpredicted) == 53 and all("aten::batch_norm@folded#" in u for u in nf.unpredicted)
    # the report names each kind once, with why
    assert _evaluate(model, [records["timm:nf_resnet50"]])["unpredicted"] == [
        "aten::batch_norm (aten::batch_norm, folded: no predictor)"]


def test_a_records_folded_work_that_cannot_be_rebuilt_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    import edgeplan.frontends.zoo as zoo
    from edgeplan.errors import InvalidInputError
    from edgeplan.experiments import li2023

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
