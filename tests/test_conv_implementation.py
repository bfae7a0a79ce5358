"""Eager PyTorch's choice of convolution implementation (oneDNN or its own), deduced from the rules in
``kernel_rules/torch.json``, checked against the profiler, and used to key the latency predictors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from edgeplan.costmodels.opwise.estimator import OpLatencyEstimator
from edgeplan.costmodels.opwise.model import LatencyModel
from edgeplan.costmodels.opwise.model_files import scenario_threads
from edgeplan.costmodels.opwise.ops import record_ops
from edgeplan.errors import InvalidInputError
from edgeplan.ir.kernels.selection import implementation, implementation_entries, implementation_kinds, node_facts


def conv(c: int, k: int, size: int, kernel: int = 3, stride: int = 1, groups: int = 1, batch: int = 1,
         dilation: int = 1, name: str = "c") -> dict[str, Any]:
    out = size // stride
    macs = out * out * k * (c // groups) * kernel * kernel
    return {"name": name, "op": "conv2d", "input_shapes": [[batch, c, size, size]],
            "output_shapes": [[batch, k, out, out]],
            "attrs": {"in_channels": c, "out_channels": k, "kernel": [kernel, kernel], "stride": [stride, stride],
                      "dilation": [dilation, dilation], "groups": groups, "padding": [kernel // 2] * 4},
            "flops": 2 * macs * batch, "params": k * (c // groups) * kernel * kernel}


#: (node, threads, implementation): ATen's use_mkldnn, case by case.
CASES = [
    (conv(400, 400, 7), 2, "native"),  # 19,600 input values: a small dense 3x3 stays native
    (conv(512, 512, 7), 2, "onednn"),  # 25,088
    (conv(80, 80, 14), 2, "native"),
    (conv(128, 128, 14), 2, "onednn"),
    (conv(64, 64, 56, kernel=1), 2, "onednn"),
    (conv(64, 64, 56, kernel=1), 1, "native"),  # an unstrided 1x1 on one thread: native whatever its size
    (conv(64, 64, 56, kernel=1, stride=2), 1, "onednn"),
    (conv(256, 256, 7, kernel=5), 2, "onednn"),  # kernels over 3x3 go to oneDNN
    (conv(96, 96, 7, groups=96), 2, "onednn"),  # grouped and depthwise too
    (conv(8, 8, 7, batch=2), 2, "onednn"),  # so does a batch
    (conv(16, 16, 7, stride=2), 2, "native"),
    (conv(16, 16, 7, dilation=2), 1, "native"),
]


@pytest.mark.parametrize(("node", "threads", "expected"), CASES)
def test_the_rules_deduce_atens_choice(node: dict[str, Any], threads: int, expected: str) -> None:
    assert implementation("aten::conv2d", node, threads) == expected


def test_only_kinds_with_rules_get_an_implementation() -> None:
    assert implementation_kinds() == ("aten::conv2d",)
    assert implementation("aten::relu", conv(8, 8, 7), 2) is None
    assert implementation("aten::conv2d", {"op": "linear", "input_shapes": [[1, 8]]}, 2) is None
    assert node_facts(conv(8, 16, 14, kernel=5, stride=2), 2) == {
        "batch": 1, "kernel_min": 5, "kernel_max": 5, "stride": 2, "dilation": 1, "groups": 1,
        "input_numel": 8 * 14 * 14, "threads": 2}
    assert {e["implementation"] for e in implementation_entries("aten::conv2d")} == {"onednn", "native"}
    with pytest.raises(InvalidInputError, match="select no implementation"):
        implementation_entries("aten::relu")


def test_the_profiler_shows_the_deduced_implementation() -> None:
    torch = pytest.importorskip("torch")
    if not torch.backends.mkldnn.is_available():
        pytest.skip("this torch build has no oneDNN")
    from edgeplan.frontends.torch_frontend import graph_from_torch
    from edgeplan.measure.kernel_check import check_torch_implementations

    class Convs(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = torch.nn.Conv2d(400, 400, 3, padding=1)
            self.b = torch.nn.Conv2d(400, 512, 1)
            self.c = torch.nn.Conv2d(512, 512, 3, padding=1)
            self.d = torch.nn.Conv2d(512, 512, 3, padding=1, groups=512)
            self.e = torch.nn.Conv2d(512, 64, 5, padding=2)

        def forward(self, x: Any) -> Any:
            return self.e(self.d(self.c(self.b(self.a(x)))))

    graph = graph_from_torch(Convs(), torch.randn(1, 400, 7, 7), name="convs")
    before = torch.get_num_threads()
    for threads, native in ((1, {"a", "b"}), (2, {"a", "b"})):
        checks = check_torch_implementations(graph, threads)
        assert len(checks) == 5 and torch.get_num_threads() == before
        assert [c for c in checks if not c.agrees] == []
        assert {c.node for c in checks if c.deduced == "native"} == native, threads
    # 1x1 at 56x56: native on one thread, oneDNN on two; the run agrees both times.
    graph = graph_from_torch(torch.nn.Conv2d(64, 64, 1), torch.randn(1, 64, 56, 56), name="pointwise")
    assert [(c.deduced, c.agrees) for c in check_torch_implementations(graph, 1)] == [("native", True)]
    assert [(c.deduced, c.agrees) for c in check_torch_implementations(graph, 2)] == [("onednn", True)]


def _record(i: int, rng: np.random.Generator) -> dict[str, Any]:
    """A model of a small (native at 2 threads) and a large (oneDNN) dense convolution, the native one slower per
    FLOP, and a ReLU."""
    small, large = int(rng.integers(8, 24)), int(rng.integers(32, 96))
    nodes = {"s": conv(small, small, 28, name="s"), "l": conv(large, large, 28, name="l"),
             "r": {"name": "r", "op": "activation", "input_shapes": [[1, large, 28, 28]],
                   "output_shapes": [[1, large, 28, 28]], "flops": large * 784}}
    ms = {"s": 3e-6 * nodes["s"]["flops"] + 0.05, "l": 1e-6 * nodes["l"]["flops"] + 0.05, "r": 1e-5 * large + 0.01}
    ops = [{"kernel": n, "kind": "aten::relu" if n == "r" else "aten::conv2d", "nodes": [n], "ms": v, "min_ms": v,
            "iqr_rel": 0} for n, v in ms.items()]
    return {"model": f"m{i}", "latency_ms": sum(ms.values()) + 0.3, "latency_min_ms": sum(ms.values()) + 0.3,
            "ops": ops, "nodes": nodes}


def test_a_model_fitted_with_threads_keys_convolutions_by_implementation(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    records = [_record(i, rng) for i in range(40)]
    assert scenario_threads("torch-fp32-2t") == 2 and scenario_threads("my-board") is None
    est = OpLatencyEstimator(method="gbdt", scenario="torch-fp32-2t", statistic="median", threads=2)
    model = est.fit(records[:30]).model_
    assert model.threads == 2
    assert {"aten::conv2d:native|conv", "aten::conv2d:onednn|conv"} <= set(model.predictors)
    assert "aten::conv2d|conv" not in model.predictors
    ops = record_ops(records[35])
    assert [model.key_of(o) for o in ops] == ["aten::conv2d:native|conv", "aten::conv2d:onednn|conv",
                                              "aten::relu|elementwise"]
    pred = model.predict_record(records[35])
    assert [o.key for o in pred.ops] == [model.key_of(o) for o in ops] and not any(o.by_category for o in pred.ops)
    assert pred.ops[0].predictor == "aten::conv2d:native|conv"
    # Saved and loaded, the model keeps its threads and predicts the same.
    loaded = LatencyModel.load(model.save(tmp_path))
    assert loaded.threads == 2 and loaded.predict_record(records[35]).latency_ms == pytest.approx(pred.latency_ms)
    # A grouped convolution without a predictor of its own falls back on its implementation's dense one.
    grouped = {**records[35], "nodes": {**records[35]["nodes"], "g": conv(64, 64, 28, groups=4, name="g")},
               "ops": [*records[35]["ops"], {"kernel": "g", "kind": "aten::conv2d", "nodes": ["g"], "ms": 1.0}]}
    g = model.predict_record(grouped).ops[-1]
    assert g.key == "aten::conv2d:onednn|gconv" and g.predicted_by == "aten::conv2d:onednn|conv"
    # Fitted without threads, or saved by an older edgeplan (no threads), a model keys by kernel kind alone.
    plain = OpLatencyEstimator(method="lasso", scenario="torch-fp32-2t").fit(records[:30]).model_
    assert plain.threads is None and "aten::conv2d|conv" in plain.predictors
    old = model.to_dict()
    del old["threads"]
    assert LatencyModel.from_dict(old).key_of(ops[0]) == "aten::conv2d|conv"
