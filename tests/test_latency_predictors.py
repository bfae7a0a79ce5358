"""li2023 operation features, the four predictor methods, the end-to-end model and its JSON persistence."""

from __future__ import annotations

import dataclasses
import gzip
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from repo_data import data_file

from edgeplan.costmodels.opwise.estimator import OpLatencyEstimator
from edgeplan.costmodels.opwise.features import (
    CATEGORY_FEATURES,
    CONTEXT_CAPS,
    CONTEXT_FEATURES,
    LEGACY_FEATURES,
    NETWORK_AUTO,
    NETWORK_FEATURES,
    category,
    computes_product,
    features,
    lead_node,
    network_choice,
    predictor_key,
)
from edgeplan.costmodels.opwise.model import LatencyModel
from edgeplan.costmodels.opwise.ops import network_footprint, network_peak, network_values, record_ops, with_context
from edgeplan.costmodels.opwise.overhead import fit_overhead
from edgeplan.costmodels.opwise.predictors import METHODS, OpPredictor, fit_predictor
from edgeplan.errors import InvalidInputError
from edgeplan.measure.allocator import KEEP_MEMORY, allocator_settings
from edgeplan.measure.metrics import mape
from experiments.li2023 import main as li2023_main


def conv(c: int, k: int, size: int, groups: int = 1, kernel: int = 3, stride: int = 1) -> dict[str, Any]:
    out = size // stride
    macs = out * out * k * (c // groups) * kernel * kernel
    return {"name": "c", "op": "conv2d", "input_shapes": [[1, c, size, size]], "output_shapes": [[1, k, out, out]],
            "attrs": {"in_channels": c, "out_channels": k, "kernel": [kernel, kernel], "stride": [stride, stride],
                      "groups": groups}, "flops": 2 * macs, "params": k * (c // groups) * kernel * kernel}


def test_categories_and_feature_vectors() -> None:
    assert category(conv(8, 8, 16)) == "conv"
    assert category(conv(8, 8, 16, groups=8)) == "dwconv"
    assert category(conv(8, 16, 16, groups=4)) == "gconv"
    cat, x = features([conv(8, 16, 32, groups=4, kernel=5, stride=2)])
    named = dict(zip(CATEGORY_FEATURES[cat], x, strict=True))
    assert named == {"in_h": 32, "in_w": 32, "in_c": 8, "out_h": 16, "out_w": 16, "stride": 2, "k_h": 5, "k_w": 5,
                     "filters": 16, "input_size": 8 * 32 * 32, "output_size": 16 * 16 * 16,
                     "kernel_size": 16 * 2 * 25, "flops": named["flops"], "groups": 4,
                     "in_c_by8": 1, "in_c_by16": 0, "filters_by8": 1, "filters_by16": 1,
                     "in_per_group": 2, "out_per_group": 4, "per_group_by8": 0, "per_group_by16": 0,
                     "per_group_by4": 0, "out_per_group_by4": 1}
    # A saved model without its own feature names reads the features of before the alignment ones.
    assert LEGACY_FEATURES["gconv"] == (*CATEGORY_FEATURES["conv"][:13], "groups")
    _, x48 = features([conv(48, 96, 16, groups=3)])
    named48 = dict(zip(CATEGORY_FEATURES["gconv"], x48, strict=True))
    assert (named48["in_c_by16"], named48["in_per_group"], named48["per_group_by8"],
            named48["per_group_by16"]) == (1, 16, 1, 1)
    # oneDNN's blocked grouped kernel needs both a group's input and output channels in multiples of 4
    _, x_gemm = features([conv(32, 48, 16, groups=8)])  # 4 -> 6 channels a group: im2col + GEMM
    named_gemm = dict(zip(CATEGORY_FEATURES["gconv"], x_gemm, strict=True))
    assert (named_gemm["per_group_by4"], named_gemm["out_per_group_by4"]) == (1, 0)
    cat_node = {"op": "concat", "input_shapes": [[1, 3, 4, 4], [1, 5, 4, 4]], "output_shapes": [[1, 8, 4, 4]]}
    cat, x = features([cat_node])
    assert cat == "concat" and dict(zip(CATEGORY_FEATURES[cat], x, strict=True))["in_c"] == 8
    fc = {"op": "linear", "input_shapes": [[1, 512]], "output_shapes": [[1, 10]], "params": 5130, "flops": 10240,
          "attrs": {"in_features": 512, "out_features": 10}}
    assert features([fc]) == ("fc", [512.0, 10.0, 5130.0, 10240.0])
    # A linear layer over channels-last tokens (ConvNeXt) is a 1x1 convolution over them.
    tokens = {"op": "linear", "input_shapes": [[1, 56, 56, 96]], "output_shapes": [[1, 56, 56, 384]],
              "params": 96 * 384 + 384, "flops": 2 * 56 * 56 * 96 * 384}
    cat, x = features([tokens])
    named = dict(zip(CATEGORY_FEATURES[cat], x, strict=True))
    assert cat == "conv" and predictor_key("aten::linear", tokens) == "aten::linear|conv"
    assert (named["in_h"], named["in_w"], named["in_c"], named["filters"], named["k_h"], named["stride"]) == (
        56, 56, 96, 384, 1, 1)
    gp = {"op": "global_pool", "input_shapes": [[1, 64, 7, 7]], "output_shapes": [[1, 64, 1, 1]], "flops": 3136}
    cat, x = features([gp])
    assert cat == "mean" and x[3:5] == [7.0, 7.0]
    assert predictor_key("aten::conv2d", conv(8, 8, 16, groups=8)) == "aten::conv2d|dwconv"
    # Work is summed over a fused kernel's nodes.
    relu = {"op": "activation", "input_shapes": [[1, 16, 16, 16]], "output_shapes": [[1, 16, 16, 16]], "flops": 99}
    fused = dict(zip(CATEGORY_FEATURES["conv"], features([conv(8, 16, 16), relu])[1], strict=True))
    assert fused["flops"] == conv(8, 16, 16)["flops"] + 99


def test_a_kernel_that_does_not_compute_its_convolution_is_elementwise() -> None:
    """ONNX Runtime's int8 graph runs quantize, layout and normalization kernels traced to a convolution or linear
    layer: they are elementwise operations over its tensors, not convolutions with its FLOPs."""
    for kind in ("aten::conv2d", "aten::linear", "aten::addmm", "aten::mm", "com.microsoft.QLinearConv", "Conv",
                 "com.microsoft.nchwc.Conv", "com.microsoft.FusedConv", "com.microsoft.QGemm", "Gemm", "MatMul",
                 "MatMulInteger", "com.microsoft.DynamicQuantizeMatMul"):
        assert computes_product(kind), kind
    for kind in ("QuantizeLinear", "DequantizeLinear", "com.microsoft.QuantizeLinear", "Transpose",
                 "LayerNormalization", "BatchNormalization", "ReduceMean", "com.microsoft.nchwc.ReorderInput",
                 "aten::batch_norm", "Reshape"):
        assert not computes_product(kind), kind
    dw = conv(96, 96, 56, groups=96, kernel=7)
    assert category(dw) == category(dw, "com.microsoft.QLinearConv") == "dwconv"
    assert category(dw, "LayerNormalization") == "elementwise"
    assert predictor_key("LayerNormalization", dw) == "LayerNormalization|elementwise"
    cat, x = features([dw], "DequantizeLinear")
    named = dict(zip(CATEGORY_FEATURES[cat], x, strict=True))
    assert cat == "elementwise" and named == {"in_h": 56, "in_w": 56, "in_c": 96, "input_size": 96 * 56 * 56,
                                              "inputs": 1, "output_size": 96 * 56 * 56}
    fc = {"op": "linear", "input_shapes": [[1, 512]], "output_shapes": [[1, 10]], "params": 5130, "flops": 10240}
    assert features([fc], "DequantizeLinear") == ("elementwise", [1.0, 1.0, 512.0, 512.0, 1.0, 10.0])
    # Other categories keep the node's: a quantize after a global pool has its own key and the pool's features.
    gp = {"op": "global_pool", "input_shapes": [[1, 64, 7, 7]], "output_shapes": [[1, 64, 1, 1]], "flops": 3136}
    assert predictor_key("QuantizeLinear", gp) == "QuantizeLinear|mean"


def test_products_of_transformers_get_their_own_features() -> None:
    """``nn.MultiheadAttention`` projects a (sequence, batch, channels) tensor: its rows are the sequence, whatever
    the axis; a product of two activations and an attention are categories of their own (no CNN has them), never
    the batch-1 vector predictor or the element-wise one."""
    seq_first = {"op": "linear", "input_shapes": [[197, 1, 768]], "output_shapes": [[197, 1, 2304]],
                 "params": 768 * 2304 + 2304, "flops": 2 * 197 * 768 * 2304}
    cat, x = features([seq_first])
    named = dict(zip(CATEGORY_FEATURES[cat], x, strict=True))
    assert cat == "conv" and (named["in_h"], named["in_w"], named["in_c"], named["filters"]) == (197, 1, 768, 2304)
    batch_first = dict(seq_first, input_shapes=[[1, 197, 768]], output_shapes=[[1, 197, 2304]])
    assert features([batch_first]) == (cat, x)
    scores = {"op": "matmul", "input_shapes": [[1, 12, 197, 64], [1, 12, 64, 197]],
              "output_shapes": [[1, 12, 197, 197]], "attrs": {"contraction": 64}, "flops": 2 * 12 * 197 * 197 * 64}
    cat, x = features([scores], "aten::matmul")
    assert cat == "matmul" and predictor_key("aten::matmul", scores) == "aten::matmul|matmul"
    named = dict(zip(CATEGORY_FEATURES[cat], x, strict=True))
    assert (named["batch"], named["rows"], named["in_c"], named["filters"]) == (12, 197, 64, 197)
    attention = {"op": "attention", "input_shapes": [[1, 12, 197, 64], [1, 12, 50, 64], [1, 12, 50, 32]],
                 "output_shapes": [[1, 12, 197, 32]], "flops": 12345}
    kind = "aten::scaled_dot_product_attention"
    assert computes_product(kind) and predictor_key(kind, attention) == f"{kind}|attention"
    named = dict(zip(CATEGORY_FEATURES["attention"], features([attention], kind)[1], strict=True))
    assert named == {"batch": 12, "q_len": 197, "kv_len": 50, "in_c": 64, "filters": 32, "flops": 12345}
    # ONNX Runtime's FusedMatMul runs the key's transpose, then the product: the product leads it.
    transpose = {"op": "permute", "input_shapes": [[1, 12, 197, 64]], "output_shapes": [[1, 12, 64, 197]]}
    kind = "com.microsoft.FusedMatMul"
    assert lead_node([transpose, scores], kind) is scores and lead_node([transpose, scores]) is transpose
    assert features([transpose, scores], kind)[0] == "matmul"
    assert predictor_key(kind, lead_node([transpose, scores], kind)) == f"{kind}|matmul"
    # Eager PyTorch's fused multi-head attention is led by its attention, not its input projection (a convolution's
    # predictor would price it); an attention kernel with no attention node (ONNX Runtime's) by its product.
    fused = "aten::_native_multi_head_attention"
    assert lead_node([transpose, seq_first, attention, seq_first], fused) is attention
    assert lead_node([transpose, seq_first], "com.microsoft.Attention") is seq_first


def _linear_data(n: int = 120, seed: int = 0) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(1, 100, size=(n, 3))
    y = 0.02 * x[:, 0] + 0.005 * x[:, 1] + 0.3  # feature 2 is irrelevant
    return x, y


@pytest.mark.parametrize("method", [pytest.param(m, marks=pytest.mark.slow) if m == "mlp" else m for m in METHODS])
def test_every_method_learns_and_round_trips_through_json(method: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("edgeplan.costmodels.opwise.predictors._MLP_SETTINGS", 1)  # one drawn setting is enough
    x, y = _linear_data()
    p = fit_predictor(x[:100], y[:100], method, seed=1)
    err = mape(p.predict(x[100:]), y[100:])
    assert err < {"lasso": 2.0, "rf": 15.0, "gbdt": 10.0, "mlp": 15.0}[method]
    again = OpPredictor.from_dict(json.loads(json.dumps(p.to_dict())))
    np.testing.assert_allclose(again.predict(x[100:]), p.predict(x[100:]))
    from edgeplan.costmodels.opwise.predictors import _predict

    z = (x[100:] - np.asarray(p.mean)) / np.asarray(p.std)  # the stacked forests equal tree-by-tree evaluation
    np.testing.assert_allclose(p.predict(x[100:]), _predict(method, p.params, z), rtol=1e-12)
    assert p.n_train == 100 and p.hyper


@pytest.mark.parametrize("method", ["rf", "gbdt"])
def test_forests_extrapolate_through_their_linear_baseline(method: str) -> None:
    x, y = _linear_data()
    p = fit_predictor(x, y, method, seed=1)
    big = np.array([[1000.0, 500.0, 50.0]])  # ten times the largest training op
    truth = 0.02 * 1000 + 0.005 * 500 + 0.3
    assert p.params["base"] is not None and abs(p.predict(big)[0] / truth - 1) < 0.2  # a plain forest: ~2.3 ms
    again = OpPredictor.from_dict(json.loads(json.dumps(p.to_dict())))
    np.testing.assert_allclose(again.predict(big), p.predict(big))
    old = {**p.to_dict(), "params": {**p.params, "base": None}}  # saved before baselines: still loads
    assert OpPredictor.from_dict(old).predict(big)[0] < truth / 2


@pytest.mark.slow
def test_the_mlp_extrapolates_through_its_linear_baseline_and_never_overflows(monkeypatch: pytest.MonkeyPatch) -> None:
    """A log-target MLP's output is linear in the features far from them, so alone it priced an op many times larger
    than any in training exponentially (an infinite latency for some zoo networks trained on li2023's space). It
    learns the ratio to the forests' linear baseline, clipped to the training range."""
    monkeypatch.setattr("edgeplan.costmodels.opwise.predictors._MLP_SETTINGS", 1)
    x, y = _linear_data()
    p = fit_predictor(x, y, "mlp", seed=1)
    big = np.array([[1000.0, 500.0, 50.0]])  # ten times the largest training op
    truth = 0.02 * 1000 + 0.005 * 500 + 0.3
    assert p.params["base"] is not None and abs(p.predict(big)[0] / truth - 1) < 0.2
    lo, hi = p.params["log_range"]
    huge = np.array([[1e12, 1e12, 1e12]])
    ratio = p.predict(huge)[0] / _base_of(p, huge)
    assert np.isfinite(p.predict(huge)[0]) and np.exp(lo) * (1 - 1e-9) <= ratio <= np.exp(hi) * (1 + 1e-9)
    again = OpPredictor.from_dict(json.loads(json.dumps(p.to_dict())))
    np.testing.assert_allclose(again.predict(big), p.predict(big))
    # saved before (no baseline, no range): predicts as it did, the plain log-target network
    old = OpPredictor.from_dict({**p.to_dict(), "params": {**p.params, "base": None, "log_range": None}})
    assert old.predict(big)[0] != pytest.approx(p.predict(big)[0])


def _base_of(p: OpPredictor, x: np.ndarray[Any, Any]) -> float:
    from edgeplan.costmodels.opwise.predictors import _base

    return float(_base(p.params["base"], (x - np.asarray(p.mean)) / np.asarray(p.std))[0])


@pytest.mark.parametrize("method", ["lasso", "gbdt"])
def test_tied_features_put_their_weight_on_the_preferred_ones(method: str) -> None:
    """Classifier heads that all have 1000 outputs make ``in_c``, ``param_size`` and ``flops`` one column once
    standardized. Preferred, the work features carry the weight, so a 4096-output layer is priced above a
    1000-output one of the same inputs (memory-bound, as its weights are); left alone, the first column (``in_c``)
    carries it and the two are priced alike."""
    rng = np.random.default_rng(0)
    in_c = rng.uniform(1200, 2048, 300)
    x = np.c_[in_c, np.full(300, 1000.0), in_c * 1000 + 1000, 2 * in_c * 1000]
    y = 4 * x[:, 2] / 22e6 * rng.lognormal(0, 0.05, 300)  # weight bytes at 22 GB/s
    probe = np.array([[4096.0, 4096.0, 16781312.0, 33554432.0], [4096.0, 1000.0, 4097000.0, 8192000.0]])
    p = fit_predictor(x, y, method, seed=0, prefer=[False, False, True, True])
    wide, narrow = p.predict(probe)
    assert wide > 3 * narrow and abs(wide / (4 * 16781312 / 22e6) - 1) < 0.2
    w = np.asarray(p.params["w"] if method == "lasso" else p.params["base"]["w"])
    assert w[0] == 0 and w[2] == pytest.approx(w[3]) and w[2] > 0
    plain = fit_predictor(x, y, method, seed=0)
    wide, narrow = plain.predict(probe)
    assert wide == pytest.approx(narrow, rel=0.05)


@pytest.mark.parametrize("method", ["lasso", "gbdt"])
def test_features_kept_from_the_linear_parts_get_no_linear_weight(method: str) -> None:
    """A feature marked not ``linear`` (a context feature) gets no weight in Lasso or in the forests' baseline,
    even where it explains the data linearly; the trees may still split on it."""
    rng = np.random.default_rng(1)
    size = rng.uniform(1.0, 10.0, 200)
    repeats = rng.integers(0, 4, 200).astype(float)
    x = np.c_[size, repeats]
    y = (0.5 * size + 2.0 * repeats + 0.1) * rng.lognormal(0, 0.01, 200)
    free = fit_predictor(x, y, method, seed=0)
    kept = fit_predictor(x, y, method, seed=0, linear=[True, False])
    w_free = np.asarray(free.params["w"] if method == "lasso" else free.params["base"]["w"])
    w_kept = np.asarray(kept.params["w"] if method == "lasso" else kept.params["base"]["w"])
    assert w_free[1] > 0 and w_kept[1] == 0 and w_kept[0] > 0
    if method == "gbdt":  # the trees learn what the baseline may not
        probe = np.array([[5.0, 0.0], [5.0, 3.0]])
        low, high = kept.predict(probe)
        assert high > 2 * low
    with pytest.raises(InvalidInputError, match="linear marks 1 features"):
        fit_predictor(x, y, method, linear=[True])


def test_lasso_weights_are_non_negative_and_sparse() -> None:
    x, y = _linear_data()
    x = np.c_[x, -x[:, 0]]  # negatively correlated with latency: its weight must stay 0
    p = fit_predictor(x, y, "lasso")
    w = np.asarray(p.params["w"])
    assert (w >= 0).all() and w[3] == 0 and p.params["b"] >= 0


def test_bad_training_data_is_refused() -> None:
    x, y = _linear_data(10)
    with pytest.raises(InvalidInputError, match="unknown method"):
        fit_predictor(x, y, "svm")
    with pytest.raises(InvalidInputError, match="positive"):
        fit_predictor(x, -y, "lasso")
    with pytest.raises(InvalidInputError, match="feature matrix"):
        fit_predictor(x[:5], y, "lasso")


def _record(i: int, rng: np.random.Generator) -> dict[str, Any]:
    c = int(rng.integers(8, 64))
    nodes = {"c1": {**conv(c, c, 28), "name": "c1"},
             "c2": {**conv(c, c, 28, groups=c), "name": "c2"},
             "r": {"name": "r", "op": "activation", "input_shapes": [[1, c, 28, 28]],
                   "output_shapes": [[1, c, 28, 28]], "flops": c * 784}}
    ms = {"c1": 1e-6 * nodes["c1"]["flops"] + 0.05, "c2": 2e-6 * nodes["c2"]["flops"] + 0.02, "r": 1e-5 * c + 0.01}
    ops = [{"kernel": n, "kind": "aten::conv2d" if n != "r" else "aten::relu", "nodes": [n], "ms": 1.2 * v,
            "min_ms": v, "iqr_rel": 0} for n, v in ms.items()]
    return {"model": f"m{i}", "latency_ms": 1.2 * sum(ms.values()) + 0.5, "latency_min_ms": sum(ms.values()) + 0.4,
            "op_sum_ms": 1.2 * sum(ms.values()), "ops": ops, "nodes": nodes}


def test_end_to_end_model_fits_predicts_and_saves(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    records = [_record(i, rng) for i in range(40)]
    model = OpLatencyEstimator(method="lasso", scenario="test-scenario").fit(records[:30]).model_
    assert model.overhead_ms == pytest.approx(0.4) and model.statistic == "min"
    medians = OpLatencyEstimator(method="lasso", scenario="test-scenario", statistic="median").fit(records[:30]).model_
    assert medians.overhead_ms == pytest.approx(0.5)
    assert medians.predict_record(records[33]).latency_ms == pytest.approx(records[33]["latency_ms"], rel=0.03)
    with pytest.raises(InvalidInputError, match="has no minima"):
        OpLatencyEstimator(method="lasso", scenario="s").fit([{k: v for k, v in r.items() if k != "latency_min_ms"}
                                                              for r in records[:5]])
    with pytest.raises(InvalidInputError, match="unknown statistic"):
        OpLatencyEstimator(method="lasso", scenario="s", statistic="mean").fit(records[:5])
    assert {"aten::conv2d|conv", "aten::conv2d|dwconv", "aten::relu|elementwise", "*|conv"} <= set(model.predictors)
    preds = [model.predict_record(r) for r in records[30:]]
    assert mape([p.latency_ms for p in preds], [r["latency_min_ms"] for r in records[30:]]) < 2.0
    assert not preds[0].unpredicted and len(preds[0].ops) == 3
    path = model.save(tmp_path)
    loaded = LatencyModel.load(path)
    assert loaded.predict_record(records[35]).latency_ms == pytest.approx(preds[5].latency_ms)
    # An op kind never trained is predicted by its category, or named as unpredicted: never counted as 0.
    odd = dict(records[31])
    odd["ops"] = [*odd["ops"], {"kernel": "sig", "kind": "aten::sigmoid", "nodes": ["r"], "ms": 1.0, "iqr_rel": 0},
                  {"kernel": "x", "kind": "aten::cat", "nodes": ["x"], "ms": 1.0, "iqr_rel": 0}]
    odd["nodes"] = {**odd["nodes"], "x": {"op": "concat", "input_shapes": [[1, 2, 2, 2]],
                                          "output_shapes": [[1, 2, 2, 2]]}}
    p = model.predict_ops(record_ops(odd))
    assert p.unpredicted == ["x@x (aten::cat)"]
    sig = next(o for o in p.ops if o.kind == "aten::sigmoid")
    assert sig.by_category and sig.ms is not None and sig.ms > 0
    # and `predict` lists it as priced by a stand-in, grouped by kernel (the unpredicted op is not among them)
    from edgeplan.decisions.predict import ModelPrediction

    shown = ModelPrediction("odd", "test-scenario", "lasso", p)
    assert shown.stand_ins() == [{"kernel": "aten::sigmoid", "predictor": "category elementwise", "count": 1,
                                  "ms": sig.ms}]
    assert shown.to_dict()["stand_in_ops"] == shown.stand_ins()
    assert ModelPrediction("r", "s", "lasso", preds[0]).stand_ins() == []
    # A grouped convolution, a category never trained, is predicted by the dense convolution predictor from the
    # features they share (its FLOPs count the groups); an op of a category without a family stays unpredicted.
    grouped = dict(records[31])
    grouped["nodes"] = {**grouped["nodes"], "g": {**conv(32, 32, 28, groups=4), "name": "g"}}
    grouped["ops"] = [*grouped["ops"], {"kernel": "g", "kind": "aten::conv2d", "nodes": ["g"], "ms": 1.0,
                                        "iqr_rel": 0}]
    (g,) = [o for o in model.predict_ops(record_ops(grouped)).ops if o.name == "g@g"]
    assert g.key == "aten::conv2d|gconv" and g.by_category
    dense = {**conv(32, 32, 28), "name": "d"}
    (as_dense,) = model.predict_ops(record_ops({"model": "d", "nodes": {"d": dense}, "ops": [
        {"kernel": "d", "kind": "aten::conv2d", "nodes": ["d"], "ms": 1.0, "iqr_rel": 0}]})).ops
    assert g.ms is not None and as_dense.ms is not None and 0 < g.ms < as_dense.ms  # a quarter of the FLOPs
    assert model.predict_ops(record_ops(odd)).unpredicted == ["x@x (aten::cat)"]
    # A negative overhead (the profiler inflating every op) never takes a small model's total below half its ops.
    negative = LatencyModel(model.scenario, model.method, model.predictors, -100.0, statistic="min")
    tiny = negative.predict_record(records[33])
    ops_ms = sum(o.ms for o in tiny.ops if o.ms is not None)
    assert tiny.latency_ms == pytest.approx(0.5 * ops_ms) and ops_ms > 0
    assert negative.predict_batch([record_ops(records[33])])[0].latency_ms == pytest.approx(tiny.latency_ms)
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    with pytest.raises(InvalidInputError, match="not an edgeplan latency model"):
        LatencyModel.load(bad)
    with pytest.raises(InvalidInputError, match="not matched to IR nodes"):
        record_ops({"model": "m", "nodes": {}, "ops": [{"kernel": "k", "kind": "Conv", "nodes": [], "ms": 1}]})


def test_a_model_saved_xz_compressed_loads_and_is_found_as_a_device(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Shipped profiles are xz-compressed JSON (``{method}.json.xz``): saving to such a name compresses, loading and
    the device lookup read it back to the same predictions, and a corrupt file is named, not a traceback."""
    import lzma

    from edgeplan.costmodels.opwise import profiles as predict_mod

    rng = np.random.default_rng(0)
    records = [_record(i, rng) for i in range(36)]
    model = OpLatencyEstimator(method="lasso", scenario="test-scenario", statistic="median").fit(records[:30]).model_
    shipped = tmp_path / "shipped"
    path = model.save(shipped / "dev" / "lasso.json.xz")
    assert path.name == "lasso.json.xz"
    assert json.loads(lzma.decompress(path.read_bytes()))["format"] == model.to_dict()["format"]
    loaded = LatencyModel.load(path)
    want = model.predict_record(records[33]).latency_ms
    assert loaded.predict_record(records[33]).latency_ms == pytest.approx(want)
    monkeypatch.setattr(predict_mod, "_shipped_root", lambda: shipped)
    home = tmp_path / "home"
    assert predict_mod.available_devices(home) == {"dev": ["lasso"]}
    found = predict_mod.load_device_model("dev", "lasso", home)
    assert isinstance(found, LatencyModel) and found.predict_record(records[33]).latency_ms == pytest.approx(want)
    with pytest.raises(InvalidInputError, match="has no 'gbdt' predictors"):
        predict_mod.load_device_model("dev", "gbdt", home)
    # A calibration corrects Lasso where the device has it, else its default (a GBDT-only profile's gbdt).
    dataclasses.replace(model, method="gbdt").save(shipped / "gbdt-only" / "gbdt.json.xz")
    assert predict_mod.source_method("dev", None, home) == "lasso"
    assert predict_mod.source_method("gbdt-only", None, home) == "gbdt"
    assert predict_mod.source_method("gbdt-only", "rf", home) == "rf"
    path.write_bytes(b"not xz")
    with pytest.raises(InvalidInputError, match=r"lasso\.json\.xz is not a latency model"):
        predict_mod.load_device_model("dev", "lasso", home)


def test_the_linear_overhead_recovers_a_cost_per_op_a_share_and_the_weights_and_shrugs_off_busy_runs() -> None:
    """``fit_overhead``'s linear form finds ``a + b * ops + (1 + s) * sum + w * mparams`` by least relative error: a
    few models measured while the machine was busy (3x their time) do not move it, where they pull li2023's mean."""
    rng = np.random.default_rng(1)
    sums = rng.uniform(2.0, 40.0, 200)
    counts = rng.integers(20, 300, 200)
    mparams = rng.uniform(0.5, 30.0, 200)
    latency = 0.1 + 0.004 * counts + 1.03 * sums + 0.07 * mparams
    busy = latency.copy()
    busy[:8] *= 3.0
    a, b, s, w = fit_overhead(busy, sums, counts, mparams=mparams)
    assert (a, b, s, w) == pytest.approx((0.1, 0.004, 0.03, 0.07), rel=1e-3, abs=1e-6)
    mean, b0, s0, w0 = fit_overhead(busy, sums, counts, "mean", mparams)
    assert (b0, s0, w0) == (0.0, 0.0, 0.0) and mean == pytest.approx(float(np.mean(busy - sums)))
    assert mean > 2 * (a + 0.004 * counts.mean() + 0.03 * sums.mean())  # the busy runs pull the mean up
    # Without parameters the weight term is 0; every model with as many ops: the cost per op is the constant's;
    # too few models: li2023's mean.
    same = 0.1 + 0.004 * 50 + 1.03 * sums
    assert fit_overhead(same, sums, np.full(200, 50)) == pytest.approx((0.1 + 0.2, 0.0, 0.03, 0.0), abs=1e-6)
    assert fit_overhead(latency[:5], sums[:5], counts[:5])[1:] == (0.0, 0.0, 0.0)


def test_a_model_with_a_linear_overhead_predicts_saves_and_old_files_read_as_constant(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    model = OpLatencyEstimator(method="lasso", scenario="test-scenario").fit(
        [_record(i, rng) for i in range(30)]).model_
    grown = dataclasses.replace(model, overhead_per_op_ms=0.01, overhead_share=0.05, overhead_per_mparam_ms=0.07)
    record = _record(99, rng)
    ops = record_ops(record)
    base, more = model.predict_ops(ops), grown.predict_ops(ops)
    ops_ms = sum(o.ms or 0.0 for o in base.ops)
    mparams = sum(n.get("params", 0) for n in record["nodes"].values()) / 1e6  # each op's lead node's
    assert mparams > 0
    assert [o.params for o in more.ops] == [record["nodes"][n].get("params", 0) for n in record["nodes"]]
    assert more.latency_ms == pytest.approx(base.latency_ms + 0.01 * len(ops) + 0.05 * ops_ms + 0.07 * mparams)
    assert more.overhead_ms == pytest.approx(more.latency_ms - ops_ms) and not more.overhead_clamped
    loaded = LatencyModel.load(grown.save(tmp_path / "grown.json"))
    assert (loaded.overhead_per_op_ms, loaded.overhead_share, loaded.overhead_per_mparam_ms) == (0.01, 0.05, 0.07)
    assert loaded.predict_ops(ops).latency_ms == pytest.approx(more.latency_ms)
    old = grown.to_dict()
    del old["overhead_per_op_ms"], old["overhead_share"], old["overhead_per_mparam_ms"]  # saved before them
    assert LatencyModel.from_dict(old).predict_ops(ops).latency_ms == pytest.approx(base.latency_ms)
    # Stacked: the same linear form over the op sums the fitted predictors give the training networks.
    train = [_record(i, rng) for i in range(30)]
    stacked = OpLatencyEstimator(method="lasso", scenario="test-scenario", overhead="stacked").fit(train).model_
    sums = [sum(o.ms or 0.0 for o in stacked.predict_record(r).ops) for r in train]
    want = fit_overhead([r["latency_min_ms"] for r in train], sums, [len(r["ops"]) for r in train],
                        mparams=[sum(n.get("params", 0) for n in r["nodes"].values()) / 1e6 for r in train])
    assert (stacked.overhead_ms, stacked.overhead_per_op_ms, stacked.overhead_share,
            stacked.overhead_per_mparam_ms) == pytest.approx(want)
    with pytest.raises(InvalidInputError, match="unknown overhead form"):
        OpLatencyEstimator(method="lasso", scenario="s", overhead="median").fit([_record(i, rng) for i in range(10)])


@pytest.mark.slow
def test_a_key_with_more_ops_than_the_cap_trains_on_a_seeded_subsample(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past :data:`MAX_FIT_OPS` operations a predictor trains on that many, drawn with the fit's seed: the same
    seed gives the same model, and keys under the cap train on all of theirs."""
    import edgeplan.costmodels.opwise.model as latency_model

    rng = np.random.default_rng(0)
    records = [_record(i, rng) for i in range(30)]  # 30 ops per key: conv, dwconv and relu
    monkeypatch.setattr(latency_model, "MAX_FIT_OPS", 20)
    a = OpLatencyEstimator(method="gbdt", scenario="s", seed=1).fit(records).model_
    b = OpLatencyEstimator(method="gbdt", scenario="s", seed=1).fit(records).model_
    assert a.predictors["aten::conv2d|conv"].n_train == 20 and a.predictors["*|conv"].n_train == 20
    assert a.info["ops_per_key"]["aten::conv2d|conv"] == 30  # what the data held, not what was drawn
    assert a.to_dict() == {**b.to_dict(), "info": {**b.to_dict()["info"], "fitted_utc": a.info["fitted_utc"]}}
    monkeypatch.setattr(latency_model, "MAX_FIT_OPS", 30)
    again = OpLatencyEstimator(method="gbdt", scenario="s", seed=1).fit(records).model_
    assert again.predictors["aten::conv2d|conv"].n_train == 30


def _token_record(i: int, rng: np.random.Generator) -> dict[str, Any]:
    """A CNN record of :func:`_record` with a layer norm over tokens, a kind its models never had."""
    r = _record(1000 + i, rng)
    t, c = int(rng.integers(16, 200)), int(rng.integers(16, 128))
    ms = 4e-5 * t * c + 0.03
    r["nodes"] = {**r["nodes"], "ln": {"name": "ln", "op": "layer_norm", "input_shapes": [[1, t, c]],
                                       "output_shapes": [[1, t, c]], "flops": 5 * t * c}}
    r["ops"] = [*r["ops"], {"kernel": "ln", "kind": "aten::layer_norm", "nodes": ["ln"], "ms": 1.2 * ms, "min_ms": ms,
                            "iqr_rel": 0}]
    r["latency_ms"] += 1.2 * ms
    r["latency_min_ms"] += ms
    r["op_sum_ms"] += 1.2 * ms
    return r


def test_an_extended_model_adds_the_kinds_it_lacked_and_keeps_its_own(tmp_path: Path) -> None:
    """Extending a CNN-trained model with transformer-like records fits predictors for their new kinds only: the
    layer norm, priced by the element-wise category before, gets its own predictor; every other prediction, the
    overhead and the provenance of the original fit stay."""
    rng = np.random.default_rng(3)
    cnns, tokens = [_record(i, rng) for i in range(30)], [_token_record(i, rng) for i in range(40)]
    base = OpLatencyEstimator(method="lasso", scenario="test-scenario").fit(cnns).model_
    ln = "aten::layer_norm|elementwise"
    held = tokens[30:]

    def layer_norms(model: LatencyModel) -> list[Any]:
        return [next(o for o in model.predict_record(r).ops if o.kind == "aten::layer_norm") for r in held]

    truth = [next(o["min_ms"] for o in r["ops"] if o["kind"] == "aten::layer_norm") for r in held]
    before = layer_norms(base)
    assert all(o.by_category and o.predicted_by == "*|elementwise" for o in before)
    extended = base.extended(tokens[:30], info={"dataset": "tokens"})
    after = layer_norms(extended)
    assert all(not o.by_category and o.predicted_by == ln for o in after)
    assert mape([o.ms for o in after], truth) < 3.0 < mape([o.ms for o in before], truth)
    assert set(extended.predictors) - set(base.predictors) == {ln}  # *|elementwise was there already
    assert all(extended.predictors[k] is p for k, p in base.predictors.items())
    assert extended.overhead_ms == base.overhead_ms and extended.statistic == base.statistic
    assert [extended.predict_record(r).latency_ms for r in cnns[:5]] == [base.predict_record(r).latency_ms
                                                                          for r in cnns[:5]]
    (ext,) = extended.info["extensions"]
    assert ext["added_ops_per_key"] == {ln: 30} and ext["dataset"] == "tokens" and len(ext["models"]) == 30
    assert extended.without_extensions().predictors == base.predictors
    # a second extension (softmax over tokens) can be dropped alone, keeping the first
    soft = [dict(r) for r in tokens[:30]]
    for k, r in enumerate(soft):
        r["ops"] = [*r["ops"], {"kernel": "sm", "kind": "aten::softmax", "nodes": ["ln"], "ms": 1.0 + 0.01 * k,
                                "min_ms": 1.0 + 0.01 * k, "iqr_rel": 0}]
    twice = extended.extended(soft, info={"dataset": "softmax"})
    assert set(twice.predictors) - set(extended.predictors) == {"aten::softmax|elementwise"}
    first = twice.without_extensions(keep=1)
    assert first.predictors == extended.predictors and first.info["extensions"] == extended.info["extensions"]
    assert twice.without_extensions().predictors == base.predictors and "extensions" not in base.info
    with pytest.raises(InvalidInputError, match="keep -1"):
        twice.without_extensions(keep=-1)
    # A kind seen in fewer than three models, or at one shape only, would be a constant: it is left out, and why.
    rare = [dict(r) for r in tokens[:30]]
    for r in rare[:2]:
        r["ops"] = [*r["ops"], {"kernel": "sm", "kind": "aten::softmax", "nodes": ["ln"], "ms": 1.0, "min_ms": 1.0,
                                "iqr_rel": 0}]
    (rare_ext,) = base.extended(rare).info["extensions"]
    assert "aten::softmax|elementwise" not in rare_ext["added_ops_per_key"]
    assert rare_ext["skipped"]["aten::softmax|elementwise"] == "2 ops of 2 model(s), 2 feature vector(s)"
    assert "extensions" not in base.info and extended.info["ops_per_key"] == base.info["ops_per_key"]
    loaded = LatencyModel.load(extended.save(tmp_path))
    assert loaded.predict_record(held[0]).latency_ms == pytest.approx(extended.predict_record(held[0]).latency_ms)
    assert loaded.info["extensions"] == extended.info["extensions"]
    with pytest.raises(InvalidInputError, match=r"nothing to add \(it was extended already: tokens"):
        extended.extended(tokens[:30])
    with pytest.raises(InvalidInputError, match="no models"):
        base.extended([])
    # A category whose predictors take an older edgeplan's features gets new ones on the same features, when this
    # edgeplan still computes them all (the shipped torch profiles' convolutions predate the alignment features) ...
    old = LatencyModel(base.scenario, base.method, base.predictors, base.overhead_ms, dict(base.info), base.statistic,
                       {**base.feature_names, "elementwise": ("in_c", "output_size")})
    on_old = old.extended(tokens[:30])
    assert on_old.feature_names["elementwise"] == ("in_c", "output_size")
    assert len(on_old.predictors[ln].mean) == 2 and on_old.predictors[ln].predict(np.array([[64.0, 6400.0]]))[0] > 0
    # ... and is refused where it took a feature this edgeplan no longer computes
    gone = LatencyModel(base.scenario, base.method, base.predictors, base.overhead_ms, dict(base.info),
                        base.statistic, {**base.feature_names, "elementwise": ("in_c", "retired_feature")})
    with pytest.raises(InvalidInputError, match="no longer computes"):
        gone.extended(tokens[:30])
    # A model saved before a category existed records no features for it: its new predictors record theirs.
    unlisted = LatencyModel(base.scenario, base.method, base.predictors, base.overhead_ms, dict(base.info),
                            base.statistic, {c: n for c, n in base.feature_names.items() if c != "elementwise"})
    assert unlisted.extended(tokens[:30]).feature_names["elementwise"] == (*CATEGORY_FEATURES["elementwise"],
                                                                            *CONTEXT_FEATURES)
    # A model fitted without context features extends with none either.
    plain = OpLatencyEstimator(method="lasso", scenario="test-scenario", context=False).fit(cnns).model_
    assert plain.extended(tokens[:30]).feature_names["elementwise"] == CATEGORY_FEATURES["elementwise"]


def _repeating_record(i: int, rng: np.random.Generator, repeats: int) -> dict[str, Any]:
    """A made-up network of one convolution shape run ``1 + repeats`` times, a ReLU after each: every run of a
    shape after its first takes 0.8x the time (an op runs faster when the same kernel at the same shapes ran
    earlier in the pass)."""
    c = int(rng.integers(8, 64))
    nodes, ops = {}, []
    for j in range(1 + repeats):
        nodes[f"c{j}"] = {**conv(c, c, 28), "name": f"c{j}"}
        nodes[f"r{j}"] = {"name": f"r{j}", "op": "activation", "input_shapes": [[1, c, 28, 28]],
                          "output_shapes": [[1, c, 28, 28]], "flops": c * 784}
        slow = 1.0 if j == 0 else 0.8
        for n, ms, kind in ((f"c{j}", slow * (1e-6 * nodes[f"c{j}"]["flops"] + 0.05), "aten::conv2d"),
                            (f"r{j}", slow * (1e-5 * c + 0.01), "aten::relu")):
            ops.append({"kernel": n, "kind": kind, "nodes": [n], "ms": ms, "min_ms": ms, "iqr_rel": 0})
    total = sum(o["ms"] for o in ops)
    return {"model": f"m{i}", "latency_ms": total + 0.2, "latency_min_ms": total + 0.2, "op_sum_ms": total,
            "ops": ops, "nodes": nodes}


def test_context_features_count_the_same_op_and_kind_before_it() -> None:
    """Each op of a record carries how many ops before it in the run have its key and features, and how many have
    its key, capped; ops built without them get them from ``with_context``, in the order given."""
    rec = _repeating_record(0, np.random.default_rng(0), repeats=10)
    ops = record_ops(rec, "min")
    convs = [o.context for o in ops if o.kind == "aten::conv2d"]
    cap_op, cap_kind = CONTEXT_CAPS["same_op_before"], CONTEXT_CAPS["same_kind_before"]
    assert [c[:2] for c in convs] == [(float(min(j, cap_op)), float(min(j, cap_kind))) for j in range(11)]
    assert all(len(o.vector) == len(CATEGORY_FEATURES[o.category]) + len(CONTEXT_FEATURES) + len(NETWORK_FEATURES)
               for o in ops)
    # A convolution of another shape is a first occurrence of its features, not of its kind.
    other = {**conv(3, 8, 14), "name": "o"}
    mixed = record_ops({"model": "x", "nodes": {**rec["nodes"], "o": other},
                        "ops": [*rec["ops"][:2], {"kernel": "o", "kind": "aten::conv2d", "nodes": ["o"], "ms": 1.0,
                                                  "iqr_rel": 0}]}, "min")
    assert mixed[-1].context[:2] == (0.0, 1.0)
    bare = [dataclasses.replace(o, context=()) for o in ops]
    assert not bare[0].context and [o.context for o in with_context(bare)] == [o.context for o in ops]


@pytest.mark.slow
def test_the_context_features_price_repeated_ops() -> None:
    """Trained on networks in which a repeated op runs faster, a model with context features predicts a network
    of many repeats well and one without them over-predicts it; the model records which features it takes and
    refuses ops that lack them."""
    rng = np.random.default_rng(5)
    train = [_repeating_record(i, rng, repeats=int(rng.integers(0, 3))) for i in range(60)]
    many = [_repeating_record(100 + i, rng, repeats=6) for i in range(5)]
    truth = [r["latency_min_ms"] for r in many]
    with_ctx = OpLatencyEstimator(method="gbdt", scenario="test-scenario").fit(train).model_
    without = OpLatencyEstimator(method="gbdt", scenario="test-scenario", context=False).fit(train).model_
    assert with_ctx.uses_context and not without.uses_context
    assert without.feature_names["conv"] == CATEGORY_FEATURES["conv"]
    assert mape([with_ctx.predict_record(r).latency_ms for r in many], truth) < 4.0
    assert mape([without.predict_record(r).latency_ms for r in many], truth) > 8.0
    loaded = LatencyModel.from_dict(json.loads(json.dumps(with_ctx.to_dict())))
    assert loaded.uses_context and loaded.predict_record(many[0]).latency_ms == pytest.approx(
        with_ctx.predict_record(many[0]).latency_ms)
    ops = record_ops(many[0], "min")
    bare = [dataclasses.replace(o, context=()) for o in ops]
    with pytest.raises(ValueError, match="without context features"):
        with_ctx.predict_ops(bare)
    assert without.predict_ops(bare).latency_ms == pytest.approx(without.predict_ops(ops).latency_ms)


def _footprint_record(i: int, rng: np.random.Generator, big: bool) -> dict[str, Any]:
    """A made-up network of a few convolutions and ReLUs; in a ``big`` one, a wide convolution at 112x112 adds a
    large output and every op runs 1.3x slower (as the ops of synthetic networks with large footprints did)."""
    nodes: dict[str, Any] = {}
    ops = []
    slow = 1.3 if big else 1.0
    shapes = [(int(rng.integers(8, 64)), 28) for _ in range(3)] + ([(96, 112)] if big else [(4, 14)])
    for j, (c, size) in enumerate(shapes):
        node = {**conv(c, c, size), "name": f"c{j}", "activation_bytes": 4 * c * size * size}
        nodes[f"c{j}"] = node
        nodes[f"r{j}"] = {"name": f"r{j}", "op": "activation", "input_shapes": [[1, c, size, size]],
                          "output_shapes": [[1, c, size, size]], "flops": c * size * size,
                          "activation_bytes": 4 * c * size * size}
        for n, ms, kind in ((f"c{j}", slow * (1e-6 * node["flops"] + 0.05), "aten::conv2d"),
                            (f"r{j}", slow * (1e-5 * c * size * size / 784 + 0.01), "aten::relu")):
            ops.append({"kernel": n, "kind": kind, "nodes": [n], "ms": ms, "min_ms": ms, "iqr_rel": 0})
    total = sum(o["ms"] for o in ops)
    return {"model": f"n{i}", "latency_ms": total + 0.2, "latency_min_ms": total + 0.2, "op_sum_ms": total,
            "ops": ops, "nodes": nodes}


@pytest.mark.slow
def test_the_network_feature_is_the_footprint_of_its_distinct_output_sizes_and_prices_it() -> None:
    """``network_footprint`` sums a network's distinct output sizes (each once); every op of a network carries it
    (or the value given); a model fitted with ``network=True`` learns that a network's ops run slower with a large
    one, where a model without it, which ignores the value, cannot."""
    mib = 2**20
    leads = [{"activation_bytes": b} for b in (2 * mib, 2 * mib, 4 * mib)]
    ops = [dataclasses.replace(record_ops(_record(0, np.random.default_rng(0)), "min")[0], lead=lead)
           for lead in leads]
    assert network_footprint(ops) == pytest.approx(math.log2(6.0))  # the two 2 MiB outputs count once
    assert network_footprint([]) == -10.0  # at least 1 KiB
    assert [o.context[2] for o in with_context(ops)] == pytest.approx([math.log2(6.0)] * 3)
    assert {o.context[2:] for o in with_context(ops, (1.5, 2.5, 3.5))} == {(1.5, 2.5, 3.5)}
    with pytest.raises(InvalidInputError, match="network values"):
        with_context(ops, (1.5,))
    # the total footprint adds the kernels' parameters (each kernel's, not counted once per size)
    weighted = [dataclasses.replace(o, lead={**(o.lead or {}), "param_bytes": mib}) for o in ops]
    assert network_footprint(weighted, with_params=True) == pytest.approx(math.log2(9.0))
    assert network_values(weighted) == pytest.approx((math.log2(6.0), math.log2(9.0), 2.0))
    assert [o.context[3] for o in with_context(weighted)] == pytest.approx([math.log2(9.0)] * 3)
    # the peak is the largest output (4 MiB), whatever the others and the parameters
    assert network_peak(ops) == network_peak(weighted) == pytest.approx(2.0)
    assert network_peak([]) == -10.0
    assert [o.context[4] for o in with_context(weighted)] == pytest.approx([2.0] * 3)
    rng = np.random.default_rng(3)
    train = [_footprint_record(i, rng, big=i % 2 == 0) for i in range(60)]
    test = [_footprint_record(100 + i, rng, big=i % 2 == 0) for i in range(10)]
    truth = [r["latency_min_ms"] for r in test]
    network = OpLatencyEstimator(method="gbdt", scenario="test-scenario", network=True).fit(train).model_
    plain = OpLatencyEstimator(method="gbdt", scenario="test-scenario").fit(train).model_
    assert network.uses_network and network.uses_context and not plain.uses_network
    assert network.feature_names["conv"] == (*CATEGORY_FEATURES["conv"], *CONTEXT_FEATURES, "network_distinct_mib")
    # the shared small convolutions: the plain model prices them alike in both kinds of network
    small = [o for o in record_ops(test[0], "min") if o.name.startswith("c0")]
    assert plain.predict_ops(with_context(small, (0.0, 0.0, 0.0))).latency_ms == pytest.approx(
        plain.predict_ops(with_context(small, (9.0, 9.0, 9.0))).latency_ms)
    assert mape([network.predict_record(r).latency_ms for r in test], truth) < 0.5 * mape(
        [plain.predict_record(r).latency_ms for r in test], truth)
    loaded = LatencyModel.from_dict(json.loads(json.dumps(network.to_dict())))
    assert loaded.uses_network and loaded.predict_record(test[0]).latency_ms == pytest.approx(
        network.predict_record(test[0]).latency_ms)
    assert network.network_feature == "distinct" and plain.network_feature is None
    # the total footprint (parameters too) is the other choice; a model takes one of them
    total = OpLatencyEstimator(method="gbdt", scenario="test-scenario", network="total").fit(train).model_
    assert total.network_feature == "total" and total.uses_network
    assert total.feature_names["conv"] == (*CATEGORY_FEATURES["conv"], *CONTEXT_FEATURES, "network_total_mib")
    assert mape([total.predict_record(r).latency_ms for r in test], truth) < mape(
        [plain.predict_record(r).latency_ms for r in test], truth)
    again = LatencyModel.from_dict(json.loads(json.dumps(total.to_dict())))
    assert again.network_feature == "total" and again.predict_record(test[0]).latency_ms == pytest.approx(
        total.predict_record(test[0]).latency_ms)
    with pytest.raises(InvalidInputError, match="unknown network feature"):
        OpLatencyEstimator(method="gbdt", scenario="test-scenario", network="params").fit(train)


@pytest.mark.slow
def test_the_peak_network_feature_and_auto_which_takes_it_from_enough_networks(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``network="peak"`` gives the predictors log2 of the network's largest output and learns the slowdown of the
    networks with a large one; ``"auto"`` takes it only from :data:`NETWORK_AUTO`'s count of networks on, and says
    what it chose."""
    rng = np.random.default_rng(5)
    train = [_footprint_record(i, rng, big=i % 2 == 0) for i in range(60)]
    test = [_footprint_record(100 + i, rng, big=i % 2 == 0) for i in range(10)]
    truth = [r["latency_min_ms"] for r in test]
    peak = OpLatencyEstimator(method="gbdt", scenario="test-scenario", network="peak").fit(train).model_
    plain = OpLatencyEstimator(method="gbdt", scenario="test-scenario").fit(train).model_
    assert peak.network_feature == "peak"
    assert peak.feature_names["conv"] == (*CATEGORY_FEATURES["conv"], *CONTEXT_FEATURES, "network_peak_mib")
    assert mape([peak.predict_record(r).latency_ms for r in test], truth) < 0.5 * mape(
        [plain.predict_record(r).latency_ms for r in test], truth)
    again = LatencyModel.from_dict(json.loads(json.dumps(peak.to_dict())))
    assert again.network_feature == "peak" and again.predict_record(test[0]).latency_ms == pytest.approx(
        peak.predict_record(test[0]).latency_ms)
    feature, fewest = NETWORK_AUTO
    assert feature == "peak" and fewest > len(train)
    assert network_choice("auto", fewest - 1) is None and network_choice("auto", fewest) == "peak"
    few = OpLatencyEstimator(method="gbdt", scenario="test-scenario", network="auto").fit(train).model_
    assert few.network_feature is None and few.info["network"].startswith("auto: none (60 networks")
    assert few.predict_record(test[0]).latency_ms == pytest.approx(plain.predict_record(test[0]).latency_ms)
    monkeypatch.setattr("edgeplan.costmodels.opwise.features.NETWORK_AUTO", ("peak", 60))
    enough = OpLatencyEstimator(method="gbdt", scenario="test-scenario", network="auto").fit(train).model_
    assert enough.network_feature == "peak" and enough.info["network"].startswith("auto: peak (60 networks")
    assert enough.predict_record(test[0]).latency_ms == pytest.approx(peak.predict_record(test[0]).latency_ms)


def _write_dataset(path: Path, records: list[dict[str, Any]], scenario: str = "torch-fp32-1t") -> Path:
    from edgeplan.measure.op_dataset import DATASET_FORMAT

    with gzip.open(path, "wt") as f:
        f.write(json.dumps({"format": DATASET_FORMAT, "scenario": scenario, "device": {"threads": 1}}) + "\n")
        for r in records:
            f.write(json.dumps(r) + "\n")
    return path


def test_a_saved_model_predicts_from_its_own_feature_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A model records the features its predictors take, by name, and predicts with those: one saved by an edgeplan
    whose feature lists differ (fewer, or in another order) keeps working; one without the record uses the lists
    of the edgeplan that introduced it."""
    rng = np.random.default_rng(1)
    records = [_record(i, rng) for i in range(30)]
    model = OpLatencyEstimator(method="lasso", scenario="test-scenario").fit(records).model_
    saved = json.loads(model.save(tmp_path).read_text())
    assert saved["features"]["conv"] == [*CATEGORY_FEATURES["conv"], *CONTEXT_FEATURES]
    # Saved before models recorded their features, a model took the op's own (no context, no alignment).
    with monkeypatch.context() as patch:
        patch.setattr("edgeplan.costmodels.opwise.model._feature_names",
                      lambda context, network=False: dict(LEGACY_FEATURES))
        plain = OpLatencyEstimator(method="lasso", scenario="test-scenario", context=False).fit(records).model_
    legacy = {k: v for k, v in plain.to_dict().items() if k != "features"}
    assert LatencyModel.from_dict(legacy).predict_record(records[3]).latency_ms == pytest.approx(
        plain.predict_record(records[3]).latency_ms)
    # A conv predictor of FLOPs alone, then of (filters, flops): each gets its own columns from a full vector.
    ops = [o for r in records for o in record_ops(r, "min") if o.key == "aten::conv2d|conv"]
    names = CATEGORY_FEATURES["conv"]
    for chosen in (("flops",), ("filters", "flops")):
        x = np.array([[o.x[names.index(n)] for n in chosen] for o in ops])
        y = np.array([o.measured_ms for o in ops], dtype=float)
        narrow = LatencyModel("s", "lasso", {"aten::conv2d|conv": fit_predictor(x, y, "lasso")}, 0.0,
                              feature_names={**CATEGORY_FEATURES, "conv": chosen}, statistic="min")
        again = LatencyModel.from_dict(json.loads(json.dumps(narrow.to_dict())))
        pred = again.predict_ops(ops[:5])
        assert [p.ms for p in pred.ops] == pytest.approx([o.measured_ms for o in ops[:5]], rel=0.02)


def _li2023_records(n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` made-up measured models: 35 to train on (synthetic:0-34), 7 synthetic test ones, the rest zoo CNNs."""
    rng = np.random.default_rng(seed)
    records = [_record(i, rng) for i in range(n)]
    for i, r in enumerate(records):
        r["model"] = f"synthetic:{i}" if i < 35 else (f"synthetic:{900 + i}" if i < 42 else f"timm:m{i}")
    return records


@pytest.mark.slow
def test_li2023_report_from_a_dataset(tmp_path: Path) -> None:
    from experiments.li2023 import format_report, reproduce

    records = _li2023_records(45, seed=3)
    data = _write_dataset(tmp_path / "d.jsonl.gz", records)
    again = [{**r, "latency_min_ms": r["latency_min_ms"] * 1.1} for r in records[35:40]]
    rep = _write_dataset(tmp_path / "r.jsonl.gz", again)
    result = reproduce(methods=("lasso",), data_file=data, repeat_file=rep)
    assert (result["train"], result["test"], result["zoo"]) == (35, 7, 3)
    assert result["noise_floor"] == {"models": 5, "mape": pytest.approx(10.0)}
    assert result["5.1"]["lasso"]["mape"] < 2.0 and "conv" in result["5.1"]["lasso"]["per_category"]
    assert set(result["5.5"]) == {"lasso@30", "lasso@35"} and result["5.3"]["lasso"]["models"] == 3
    assert set(result["5.6"]) == {"nnmeter@30", "nnmeter@35"}
    text = "\n".join(format_report(result))
    assert "§5.1" in text and "noise floor" in text and "10.00% over 5 models" in text
    with pytest.raises(InvalidInputError, match="synthetic:900-999 for testing"):
        reproduce(methods=("lasso",), data_file=_write_dataset(tmp_path / "x.jsonl.gz", records[:30]))


@pytest.mark.slow
def test_li2023_report_keys_convolutions_by_implementation_unless_asked_not_to(tmp_path: Path) -> None:
    """``reproduce`` fits every model with the scenario's threads, so that eager PyTorch's native and oneDNN
    convolutions get predictors of their own; ``implementations=False`` (``--kind-keys``) keys by kind, as li2023."""
    from experiments.li2023 import format_report, reproduce

    data = _write_dataset(tmp_path / "d.jsonl.gz", _li2023_records(45, seed=3), scenario="torch-fp32-2t")
    seen: list[LatencyModel] = []
    fit = OpLatencyEstimator.fit

    def spy(est: OpLatencyEstimator, *args: Any, **kwargs: Any) -> OpLatencyEstimator:
        fitted = fit(est, *args, **kwargs)
        seen.append(fitted.model_)
        return fitted

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(OpLatencyEstimator, "fit", spy)
        by_impl = reproduce(methods=("lasso",), data_file=data)
        assert seen and {m.threads for m in seen} == {2}
        seen.clear()
        by_kind = reproduce(methods=("lasso",), data_file=data, implementations=False)
        assert seen and {m.threads for m in seen} == {None}
        # Context features by default; --no-context fits on the op's own, as li2023.
        seen.clear()
        plain = reproduce(methods=("lasso",), data_file=data, context=False)
        assert seen and {m.uses_context for m in seen} == {False}
        # --network-context: every model fitted also takes the network's footprint
        seen.clear()
        net = reproduce(methods=("lasso",), data_file=data, network=True)
        assert seen and {m.uses_network for m in seen} == {True} and not by_impl["network"]
        # auto: the peak for the models fitted on enough networks (here 31 on: the 35 training networks, not 30)
        seen.clear()
        mp.setattr("edgeplan.costmodels.opwise.features.NETWORK_AUTO", ("peak", 31))
        auto = reproduce(methods=("lasso",), data_file=data, network="auto")
        chosen = {m.info["models"]: m.network_feature for m in seen}
        assert chosen == {30: None, 35: "peak"}
    assert net["network"] and "network's footprint (--network-context distinct)" in format_report(net)[0]
    assert "--network-context auto: peak for the models fitted on 900 networks or more" in format_report(auto)[0]
    assert "--network-context" not in format_report(by_impl)[0]
    assert (by_impl["keys"], by_kind["keys"]) == ("implementation", "kind")
    assert "implementation the runtime selects" in format_report(by_impl)[0]
    assert "kernel kind (li2023)" in format_report(by_kind)[0]
    assert (by_impl["context"], plain["context"]) == (True, False)
    assert "its place in the network" in format_report(by_impl)[0]
    assert "features: the op's own (li2023)" in format_report(plain)[0]


def test_noise_floor_compares_paired_and_raw_times(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:

    rng = np.random.default_rng(4)
    records = [{**_record(i, rng), "model": f"synthetic:{900 + i}"} for i in range(4)]
    for r in records:
        r["raw_latency_ms"], r["raw_latency_min_ms"] = 2 * r["latency_ms"], 2 * r["latency_min_ms"]
    # The re-measurement's raw times moved 50%, its paired (converted) times 10%.
    again = [{**r, "latency_ms": 1.1 * r["latency_ms"], "raw_latency_ms": 1.5 * r["raw_latency_ms"]} for r in records]
    a = _write_dataset(tmp_path / "a.jsonl.gz", records)
    b = _write_dataset(tmp_path / "b.jsonl.gz", again)
    assert li2023_main(["--floor", "--data", str(a), "--repeat-data", str(b), "--json"]) == 0
    floors = json.loads(capsys.readouterr().out)["noise_floor"]
    assert floors["median"]["mape"] == pytest.approx(100 * 0.1 / 1.0) and floors["median"]["models"] == 4
    assert floors["median"]["raw_mape"] == pytest.approx(100 * 0.5)
    assert floors["min"]["mape"] == pytest.approx(0.0) and floors["min"]["raw_mape"] == pytest.approx(0.0)
    assert li2023_main(["--floor", "--data", str(a), "--repeat-data", str(b)]) == 0
    assert "before the reference pairing: 50.00%" in capsys.readouterr().out
    assert li2023_main(["--floor", "--data", str(a), "--repeat-data", str(tmp_path / "no")]) != 0
    assert "no repeat" in capsys.readouterr().err
    assert li2023_main(["--floor", "--insight", "threads"]) != 0
    assert "separate runs" in capsys.readouterr().err


@pytest.mark.slow
def test_shipped_dataset_and_models_predict_the_held_out_networks() -> None:
    from edgeplan.costmodels.opwise.ops import record_latency
    from edgeplan.costmodels.opwise.profiles import available_devices, load_device_model
    from edgeplan.measure.op_dataset import load_dataset

    data = load_dataset(data_file("latency", "torch-fp32-1t.jsonl.xz"))
    seeds = {int(r["model"].split(":")[1]) for r in data.records if r["model"].startswith("synthetic:")}
    assert seeds == set(range(1000))
    assert data.provenance["device"]["threads"] == 1 and data.provenance["versions"]["torch"]
    assert {"lasso", "gbdt"} <= set(available_devices()["torch-fp32-1t"])
    model = load_device_model("torch-fp32-1t", "lasso")
    # Measured beside a reference model: times at the scenario's typical speed, and the model learnt median ratios.
    assert data.provenance["reference"]["model"] == "synthetic:0" and model.info["reference"]["model"] == "synthetic:0"
    assert isinstance(model, LatencyModel) and model.statistic == "median"
    held_out = {f"synthetic:{i}" for i in range(900, 1000)}
    assert not held_out & set(model.info["train_models"])
    test = [r for r in data.records if r["model"] in held_out]
    err = mape([model.predict_record(r).latency_ms for r in test], [record_latency(r, "median") for r in test])
    assert err < 30.0  # a broken model is off by far more; the measured figure is in the README


@pytest.mark.parametrize(("threads", "trained_on", "held_out"), [
    (2, 2700, {"synthetic", "torchvision", "timm"}), (1, 1200, {"synthetic", "timm"})])
@pytest.mark.slow
def test_the_shipped_keep_memory_profiles_are_of_their_files_and_price_nfnets_weight_standardizations(
        threads: int, trained_on: int, held_out: set[str]) -> None:
    """``torch-fp32-{2t,1t}-keep-memory`` (``make bench-li2023``): fitted on the Zen 5 keep-memory file's synthetic
    networks but synthetic:900-999, keyed by implementation for their thread count; each predicts the held-out ones
    and the zoo CNNs it never saw, and an NFNet's folded weight standardizations get the ``weight_norm`` predictor,
    not a listing."""
    from edgeplan.costmodels.opwise.ops import record_latency
    from edgeplan.costmodels.opwise.profiles import available_devices, load_device_model
    from edgeplan.decisions.predict import predict_models
    from edgeplan.measure.op_dataset import load_dataset
    from experiments.li2023 import predict_with_folded_work

    name = f"torch-fp32-{threads}t"
    assert available_devices()[f"{name}-keep-memory"] == ["gbdt"]
    model = load_device_model(f"{name}-keep-memory", "gbdt")
    assert isinstance(model, LatencyModel) and model.threads == threads and model.scenario == name
    assert model.info["dataset"] == f"{name}.jsonl.xz" and "--implementations" in model.info["command"]
    assert "aten::batch_norm|weight_norm" in model.predictors
    data = load_dataset(data_file("latency", "keep-memory", f"{name}.jsonl.xz"))
    trained = set(model.info["train_models"])
    assert len(trained) == trained_on and {f"synthetic-nf:{i}" for i in range(300)} <= trained
    test = [r for r in data.records if r["model"] not in trained]
    assert {r["model"].split(":", 1)[0] for r in test} == held_out
    err = mape([predict_with_folded_work(model, r).latency_ms for r in test],
               [record_latency(r, "median") for r in test])
    assert err < 15.0  # a broken model is off by far more; the measured figures are in the README
    (nf,) = predict_models(["timm:nf_resnet50"], device=f"{name}-keep-memory")
    assert nf.prediction.unpredicted == []
    norms = [o for o in nf.prediction.ops if o.key == "aten::batch_norm|weight_norm"]
    convs = [o for o in nf.prediction.ops if o.kind == "aten::conv2d"]
    assert len(norms) == len(convs) == 53 and all(o.ms is not None and o.ms > 0 for o in norms)  # one per conv
    # extended with the machine's transformers: attention, and the pads the CNNs lacked
    (ext,) = model.info["extensions"]
    assert ext["dataset"] == f"{name}.transformers.jsonl.xz" and len(ext["models"]) == 32
    assert {"aten::scaled_dot_product_attention|attention", "aten::pad|pad"} <= set(ext["added_ops_per_key"])
    (vit,) = predict_models(["timm:vit_tiny_patch16_224"], device=f"{name}-keep-memory")
    assert vit.prediction.unpredicted == [] and vit.prediction.latency_ms > 0


@pytest.mark.parametrize(("folder", "name", "warm", "spaces", "zoo_cnns", "repeated"), [
    ("keep-memory", "torch-fp32-2t", True, ("synthetic-aligned", "synthetic-heads", "synthetic-stages",
                                               "synthetic-modern", "synthetic-mixed", "synthetic-nf"), 128, 88),
    ("keep-memory", "torch-fp32-1t", True, ("synthetic-nf",), 2, 20)])
@pytest.mark.slow
def test_another_machines_li2023_dataset_is_whole_and_paired_with_its_repeat(
        folder: str, name: str, warm: bool, spaces: tuple[str, ...], zoo_cnns: int, repeated: int) -> None:
    """``data/latency/keep-memory`` (``make bench-li2023``; measured on a Zen 5 EPYC, as its provenance says):
    li2023's training and test networks, edgeplan's synthetic spaces
    and the zoo CNNs, measured on another machine than the shipped profile's, every model beside the reference
    (timed after a call of its own) and at one scale with its repeat, so that ``reproduce li2023`` prints its noise
    floor. The Zen 5 EPYC reports the same CPU name as the shipped profile's EPYC; it runs the reference more than
    twice as fast. The ``-keep`` files were measured, repeat included, with glibc's allocator keeping freed memory
    (``--keep-memory``), and their device says so. The Zen 5's 1-thread file
    holds li2023's 1000 networks (§5.1 in the second fp32 scenario), the nf space's 300 and the zoo's two NFNets (what
    the shipped ``torch-fp32-1t-keep-memory`` profile learns and is checked on), its repeat 20 of the test networks."""
    from edgeplan.costmodels.opwise.ops import record_latency
    from edgeplan.measure.op_dataset import load_dataset
    from experiments.li2023 import _same_scale, _spaces, _split, noise_floor

    path = data_file("latency", folder)
    data = load_dataset(path / f"{name}.jsonl.xz")
    repeat = load_dataset(path / f"{name}.repeat.jsonl.xz")
    assert bool(data.provenance["reference"].get("warm")) is bool(repeat.provenance["reference"].get("warm")) is warm
    threads = int(name.split("-")[2][0])
    shipped = load_dataset(data_file("latency", f"torch-fp32-{threads}t.jsonl.xz")).provenance
    assert data.scenario == repeat.scenario == f"torch-fp32-{threads}t"
    assert data.provenance["device"]["threads"] == threads
    allocator = allocator_settings(KEEP_MEMORY) if folder == "keep-memory" else None
    assert data.provenance["device"].get("allocator") == repeat.provenance["device"].get("allocator") == allocator
    other_cpu = data.provenance["device"]["cpu_model"] != shipped["device"]["cpu_model"]
    assert other_cpu or data.provenance["reference"]["ms"] < 0.5 * shipped["reference"]["ms"]
    train, test, zoo = _split(data)
    assert [r["model"] for r in train] == [f"synthetic:{i}" for i in range(900)] and len(test) == 100
    assert {k: len(v) for k, v in _spaces(data).items()} == dict.fromkeys(spaces, 300)
    assert len(zoo) == zoo_cnns and all(record_latency(r) > 0 for r in data.records)
    assert _same_scale(data, repeat) and {r["model"] for r in repeat.records} <= {r["model"] for r in data.records}
    floor = noise_floor(data, repeat, "median")
    assert floor is not None and floor["models"] == len(repeat.records) == repeated
    provenance = json.loads((path / "provenance.json").read_text())
    assert provenance["files"][f"{name}.jsonl.xz"]["models"] == len(data.records)


@pytest.mark.parametrize("name", ["torch-fp32-2t", "torch-fp32-1t"])
@pytest.mark.slow
def test_the_nf_networks_of_the_keep_memory_file_time_each_weight_standardization(name: str) -> None:
    """The Zen 5 keep-memory files' ``synthetic-nf`` networks carry each of their weight standardizations' times
    (``folded_ops``): one per standardized convolution of the graph, together their folded work (less the views'),
    and learnt as the ``weight_norm`` ops of :func:`~edgeplan.costmodels.opwise.ops.record_ops`."""
    from edgeplan.costmodels.opwise.ops import record_ops
    from edgeplan.frontends.direct import synthetic_graph
    from edgeplan.measure.op_dataset import load_dataset

    path = data_file("latency", "keep-memory", f"{name}.jsonl.xz")
    records = [r for r in load_dataset(path).records if r["model"].startswith("synthetic-nf:")]
    assert len(records) == 300
    with_std = 0
    for r in records:
        graph = synthetic_graph(int(r["model"].split(":")[1]), "nf")
        norms = [i for i, op in enumerate(graph.folded_ops) if op == "batch_norm"]
        if not norms:
            assert "folded_ops" not in r and "raw_folded_work_ms" not in r
            continue
        with_std += 1
        assert [o["folded"] for o in r["folded_ops"]] == norms
        assert all(o["kind"] == "aten::batch_norm" and o["ms"] > 0 for o in r["folded_ops"])
        assert 0.7 < sum(o["raw_ms"] for o in r["folded_ops"]) / r["raw_folded_work_ms"] < 1.1, r["model"]
        std = [o for o in record_ops(r) if o.category == "weight_norm"]
        assert len(std) == len(norms) and all(o.key == "aten::batch_norm|weight_norm" for o in std)
    assert with_std > 250


def test_speedup_insight_per_category(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from edgeplan.measure.op_dataset import load_dataset
    from experiments.li2023 import format_insight, speedup_insight

    rng = np.random.default_rng(3)
    base = [_record(i, rng) for i in range(6)]
    # The other scenario: dense conv twice as fast, depthwise the same, the activation 20% slower, and an inserted
    # kernel without IR nodes (a reorder); one model only in the base.
    factor = {"c1": 0.5, "c2": 1.0, "r": 1.2}
    other = []
    for r in base[:5]:
        ops = [{**o, "ms": o["ms"] * factor[o["nodes"][0]], "min_ms": o["min_ms"] * factor[o["nodes"][0]]}
               for o in r["ops"]]
        ops.append({"kernel": "ReorderInput_token_1", "kind": "com.microsoft.nchwc.ReorderInput", "nodes": ["c1"],
                    "ms": 0.01, "min_ms": 0.01})
        lat = r["latency_min_ms"] * 0.8
        other.append({**r, "ops": ops, "latency_min_ms": lat, "latency_ms": lat})
    a = _write_dataset(tmp_path / "a.jsonl.gz", base, "torch-fp32-1t")
    b = _write_dataset(tmp_path / "b.jsonl.gz", other, "torch-fp32-2t")
    result = speedup_insight(load_dataset(a), load_dataset(b))
    cats = result["categories"]
    assert result["models"] == 5 and result["end_to_end"][1] == pytest.approx(1.25)
    assert cats["conv"]["speedup"] == pytest.approx(2.0) and cats["dwconv"]["speedup"] == pytest.approx(1.0)
    assert cats["elementwise"]["speedup"] == pytest.approx(1 / 1.2)
    reorder = cats["[com.microsoft.nchwc.ReorderInput]"]  # inserted by the runtime: its own category
    assert reorder["speedup"] is None and reorder["models"] == 0 and reorder["other_share"] > 0 == reorder["share"]
    assert sum(c["share"] for c in cats.values()) == pytest.approx(1.0)
    text = "\n".join(format_insight("threads", result))
    assert "Insight 1" in text and "2.00x" in text and "only in torch-fp32-2t" in text
    assert li2023_main(["--insight", "threads", "--data", str(a), "--versus-data", str(b),
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["categories"]["conv"]["speedup"] == pytest.approx(2.0)
    alone = _write_dataset(tmp_path / "c.jsonl.gz", [{**base[0], "model": "synthetic:99"}], "torch-fp32-2t")
    assert li2023_main(["--insight", "threads", "--data", str(a), "--versus-data", str(alone)]) != 0
    assert "share no model" in capsys.readouterr().err
    assert li2023_main(["--insight", "int8", "--scenario", "ort-int8-1t"]) != 0
    assert "fixed pair of scenarios" in capsys.readouterr().err


def test_the_noise_floor_is_given_per_group_when_the_repeat_holds_zoo_cnns(tmp_path: Path) -> None:
    """A repeat of synthetic networks and zoo CNNs gives each group's floor, and §5.3 prints the zoo's."""
    from experiments.li2023 import format_report, group_floor, noise_floor, reproduce

    records = _li2023_records(46, seed=5)
    data = _write_dataset(tmp_path / "d.jsonl.gz", records)
    again = [{**r, "latency_min_ms": r["latency_min_ms"] * (1.1 if r["model"].startswith("synthetic") else 1.3)}
             for r in records[38:]]
    rep = _write_dataset(tmp_path / "r.jsonl.gz", again)
    from edgeplan.measure.op_dataset import load_dataset

    floor = noise_floor(load_dataset(data), load_dataset(rep), "min")
    assert floor is not None and floor["models"] == 8
    assert floor["groups"]["synthetic"] == {"models": 4, "mape": pytest.approx(10.0)}
    assert floor["groups"]["zoo"] == {"models": 4, "mape": pytest.approx(30.0)}
    assert group_floor(floor, "zoo") == floor["groups"]["zoo"]
    only_synthetic = noise_floor(load_dataset(data), load_dataset(_write_dataset(tmp_path / "s.jsonl.gz", again[:4])))
    assert only_synthetic is not None and "groups" not in only_synthetic
    assert group_floor(only_synthetic, "synthetic") is only_synthetic and group_floor(only_synthetic, "zoo") is None
    only_zoo = noise_floor(load_dataset(data), load_dataset(_write_dataset(tmp_path / "z.jsonl.gz", again[4:])))
    assert only_zoo is not None and group_floor(only_zoo, "zoo") == {"models": 4, "mape": pytest.approx(30.0)}
    assert group_floor(only_zoo, "synthetic") is None
    text = "\n".join(format_report(reproduce(methods=("lasso",), data_file=data, repeat_file=rep)))
    assert "synthetic 10.00% over 4 models; zoo 30.00% over 4 models" in text
    assert "noise floor of the zoo CNNs: 30.00% over 4 models" in text


@pytest.mark.slow
@pytest.mark.parametrize("scenario", ["torch-fp32-1t", "torch-fp32-2t"])
def test_the_shipped_torch_profiles_are_extended_with_their_transformer_datasets(scenario: str) -> None:
    """The shipped torch-fp32 models predict the shipped transformers whole; without their extension (the
    synthetic-CNN predictors alone) attention is unpredicted, and every synthetic network is predicted the same."""
    from edgeplan.costmodels.opwise.profiles import load_device_model
    from edgeplan.measure.op_dataset import load_dataset

    cnns = load_dataset(data_file("latency", f"{scenario}.jsonl.xz"))
    transformers = load_dataset(data_file("latency", f"{scenario}.transformers.jsonl.xz"))
    reference = transformers.provenance["reference"]
    assert transformers.scenario == scenario and reference["ms"] == cnns.provenance["reference"]["ms"]
    assert reference["scale_from"]["file"].endswith(f"{scenario}.jsonl.gz")
    assert len(transformers.records) == 30 and not any(m.startswith("synthetic:") for m in transformers.models())
    synthetic = [r for r in cnns.records if r["model"].startswith("synthetic:")][:20]
    for method in ("lasso", "gbdt"):
        model = load_device_model(scenario, method)
        assert isinstance(model, LatencyModel)
        assert all(tuple(model.feature_names[c]) == CATEGORY_FEATURES[c] for c in ("matmul", "attention"))
        ext, *later = model.info["extensions"]  # then extended with upsampling and normalization-free networks
        assert ext["models"] == transformers.models() and ext["extended"] == scenario
        assert [e["dataset"] for e in later] == [f"{scenario}.upsample.jsonl.xz", f"{scenario}.nf.jsonl.xz"]
        added = {k for e in model.info["extensions"] for k in e["added_ops_per_key"]}
        assert "aten::scaled_dot_product_attention|attention" in added and "aten::layer_norm|elementwise" in added
        base = model.without_extensions()
        assert set(base.predictors) == set(model.predictors) - added and "extensions" not in base.info
        assert not any(k in added for k in model.info["ops_per_key"])  # it added only kinds its fit never had
        vit = next(r for r in transformers.records if r["model"] == "timm:vit_tiny_patch16_224")
        assert not model.predict_record(vit).unpredicted
        assert any("scaled_dot_product_attention" in u for u in base.predict_record(vit).unpredicted)
        assert [model.predict_record(r).latency_ms for r in synthetic] == [base.predict_record(r).latency_ms
                                                                            for r in synthetic]


@pytest.mark.parametrize("scenario", ["torch-fp32-1t", "torch-fp32-2t"])
def test_the_shipped_torch_profiles_price_nearest_upsampling_with_its_own_predictor(scenario: str) -> None:
    """The torch profiles' second extension: HRNet and GhostNetV2 measured beside the reference on a later day (its
    reference warmed first), put on the CNN file's scale by matching 20 synthetic networks measured in both, give
    the nearest upsampling (and hard sigmoid) predictors of their own; without it they are priced as generic
    element-wise ops, far too low."""
    from edgeplan.costmodels.opwise.profiles import load_device_model
    from edgeplan.measure.op_dataset import load_dataset

    cnns = load_dataset(data_file("latency", f"{scenario}.jsonl.xz"))
    data = load_dataset(data_file("latency", f"{scenario}.upsample.jsonl.xz"))
    reference = data.provenance["reference"]
    matched = reference["scale_from"]
    assert matched["file_reference_ms"] == cnns.provenance["reference"]["ms"] and reference["warm"] is True
    assert matched["matched"]["models"] == 20 and matched["matched"]["iqr_rel"] < 0.1  # the bridge agrees
    assert {m.split("_")[0] for m in data.models()} == {"timm:hrnet", "timm:ghostnetv2"}
    ghost = next(r for r in data.records if r["model"] == "timm:ghostnetv2_100")
    for method in ("lasso", "gbdt"):
        model = load_device_model(scenario, method)
        assert isinstance(model, LatencyModel)
        ext = model.info["extensions"][1]
        assert ext["models"] == data.models() and set(ext["added_ops_per_key"]) == {
            "aten::upsample_nearest2d|elementwise", "aten::hardsigmoid|elementwise"}
        before = model.without_extensions(keep=1)

        def upsampled(m: LatencyModel) -> tuple[list[Any], float]:
            ops = [o for o in m.predict_record(ghost).ops if o.kind == "aten::upsample_nearest2d"]
            return ops, sum(o.ms or 0.0 for o in ops)

        (own, own_ms), (stand_in, stand_in_ms) = upsampled(model), upsampled(before)
        measured = sum(o["ms"] for o in ghost["ops"] if o["kind"] == "aten::upsample_nearest2d")
        assert len(own) == 14 and not any(o.by_category for o in own) and all(o.by_category for o in stand_in)
        assert abs(own_ms / measured - 1) < abs(stand_in_ms / measured - 1)  # closer to its own measured sum


@pytest.mark.slow
@pytest.mark.parametrize("scenario", ["torch-fp32-1t", "torch-fp32-2t"])
def test_the_shipped_torch_profiles_price_weight_standardization(scenario: str) -> None:
    """The torch profiles' third extension: 20 ``synthetic-nf`` networks and 8 timm normalization-free models measured
    on another machine beside the reference, put on the CNN file's scale by matching 20 synthetic networks measured in
    both, give the weight standardization of NF-ResNets and NFNets (a training-mode batch norm over each conv's
    weight, which eager PyTorch runs at every call) a predictor of its own; before it, it was unpredicted."""
    from edgeplan.costmodels.opwise.profiles import load_device_model
    from edgeplan.measure.op_dataset import load_dataset

    cnns = load_dataset(data_file("latency", f"{scenario}.jsonl.xz"))
    data = load_dataset(data_file("latency", f"{scenario}.nf.jsonl.xz"))
    matched = data.provenance["reference"]["scale_from"]
    assert matched["file_reference_ms"] == cnns.provenance["reference"]["ms"]
    assert matched["matched"]["models"] == 20 and matched["matched"]["iqr_rel"] < 0.15  # the bridge agrees
    assert len([m for m in data.models() if m.startswith("synthetic-nf:")]) == 20
    assert not any(m.startswith("synthetic:") for m in data.models())  # the bridge networks are not in the file
    regnet = next(r for r in data.records if r["model"] == "timm:nf_regnet_b0")
    measured = sum(o["ms"] for o in regnet["folded_ops"] if o["kind"] == "aten::batch_norm")
    for method in ("lasso", "gbdt"):
        model = load_device_model(scenario, method)
        assert isinstance(model, LatencyModel)
        *_, ext = model.info["extensions"]
        assert ext["models"] == data.models() and set(ext["added_ops_per_key"]) == {
            "aten::batch_norm|weight_norm", "*|weight_norm"}
        before = model.without_extensions(keep=2)
        assert len(before.predict_record(regnet).unpredicted) == 54  # each conv's standardization, by name
        after = model.predict_record(regnet)
        own = [o for o in after.ops if o.predicted_by == "aten::batch_norm|weight_norm"]
        assert not after.unpredicted and len(own) == 54 and not any(o.by_category for o in own)
        assert 0.5 < sum(o.ms or 0.0 for o in own) / measured < 2.0


@pytest.mark.slow
def test_predict_measures_a_keep_memory_profile_under_the_allocator_its_data_were_measured_with(tmp_path: Path) -> None:
    """``predict --device torch-fp32-1t-keep-memory --measure N``: the profile is named after no scenario but is
    timed in its model's (torch-fp32-1t), and since its data were measured keeping freed memory, the command runs
    again under those tunables first (a new process: run here as one)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "edgeplan", "--home", str(tmp_path), "predict", "synthetic:1",
                           "--device", "torch-fp32-1t-keep-memory", "--measure", "1", "--json"],
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    assert "measuring under the same allocator settings" in done.stderr
    (row,) = json.loads(done.stdout)
    assert row["device"] == "torch-fp32-1t-keep-memory" and row["measured_ms"] > 0
    assert row["measured_reference"] == "synthetic:0"


def test_network_grouped_cv_folds_hold_out_whole_networks() -> None:
    """With groups, each validation fold holds whole groups and the folds' validation parts partition the rows;
    without, the folds are the rows drawn one by one, as before."""
    from edgeplan.costmodels.opwise.predictors import _folds

    groups = np.repeat(np.arange(23), np.arange(23) % 4 + 1)  # 23 networks of 1-4 ops
    folds = _folds(len(groups), 5, 3, groups)
    held = np.concatenate([b for _, b in folds])
    assert sorted(held.tolist()) == list(range(len(groups)))
    for a, b in folds:
        assert not set(groups[a]) & set(groups[b]) and len(a) + len(b) == len(groups)
    plain = _folds(len(groups), 5, 3)
    order = np.random.default_rng(3).permutation(len(groups))
    assert np.array_equal(np.concatenate([b for _, b in plain]), order)


def test_fit_predictor_checks_its_groups_and_falls_back_to_rows_with_few_groups() -> None:
    x, y = _linear_data()
    with pytest.raises(InvalidInputError, match="groups has 3 entries for 120 rows"):
        fit_predictor(x, y, "lasso", groups=[0, 1, 2])
    grouped = fit_predictor(x, y, "gbdt", seed=1, groups=np.arange(len(y)) // 6)
    assert mape(grouped.predict(x), y) < 10.0
    few = fit_predictor(x, y, "lasso", seed=1, groups=np.arange(len(y)) % 2)  # 2 groups: folds by rows
    assert few.hyper == fit_predictor(x, y, "lasso", seed=1).hyper


def test_a_latency_model_can_draw_its_cv_folds_by_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """``cv="networks"`` hands every predictor its ops' network indices (subsampled with the ops), records the
    choice, and predicts; an unknown choice is refused by name."""
    import edgeplan.costmodels.opwise.model as model_module

    seen: list[list[int] | None] = []
    real = model_module.fit_predictor

    def spy(x: Any, y: Any, method: str, **kw: Any) -> OpPredictor:
        seen.append(None if kw.get("groups") is None else list(kw["groups"]))
        assert kw.get("groups") is None or len(kw["groups"]) == len(y)
        return real(x, y, method, **kw)

    monkeypatch.setattr(model_module, "fit_predictor", spy)
    monkeypatch.setattr(model_module, "MAX_FIT_OPS", 25)
    rng = np.random.default_rng(0)
    records = [_record(i, rng) for i in range(40)]
    grouped = OpLatencyEstimator(method="lasso", scenario="s", cv="networks").fit(records[:30]).model_
    assert grouped.info["cv"] == "networks" and seen and all(g is not None for g in seen)
    cut = [g for g in seen if len(g) == 25]  # a key's 30 ops subsampled to 25, each keeping its network's index
    assert cut and all(len(set(g)) == 25 and set(g) <= set(range(30)) and g == sorted(g) for g in cut)
    assert grouped.predict_record(records[33]).latency_ms > 0
    seen.clear()
    plain = OpLatencyEstimator(method="lasso", scenario="s").fit(records[:30]).model_
    assert "cv" not in plain.info and seen and all(g is None for g in seen)
    with pytest.raises(InvalidInputError, match="unknown cv folds 'layers'"):
        OpLatencyEstimator(method="lasso", scenario="s", cv="layers").fit(records[:30])
