"""Every cost model follows the scikit-learn estimator contract: the op-wise latency estimator and the primitive
performance models (Lin, NN1, NN2 and the kernel model of the layout transformations)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from sklearn.base import clone

from edgeplan.costmodels.opwise.estimator import OpLatencyEstimator
from edgeplan.costmodels.opwise.features import CONTEXT_FEATURES
from edgeplan.costmodels.opwise.ops import record_ops
from edgeplan.costmodels.primitive_models import LinearModel, NN1Model, NN2Model
from edgeplan.costmodels.transform_models import KernelTransformModel
from edgeplan.errors import InvalidInputError, NotFittedError

TINY_NET = {"hidden": (4,), "max_epochs": 3, "patience": 2, "threads": 1}


def _conv(c: int, groups: int = 1) -> dict[str, Any]:
    macs = 28 * 28 * c * (c // groups) * 9
    return {"op": "conv2d", "input_shapes": [[1, c, 28, 28]], "output_shapes": [[1, c, 28, 28]],
            "attrs": {"in_channels": c, "out_channels": c, "kernel": [3, 3], "stride": [1, 1], "groups": groups},
            "flops": 2 * macs, "params": c * (c // groups) * 9}


def _record(i: int, rng: np.random.Generator, head: bool = False) -> dict[str, Any]:
    """A made-up measured model: a dense and a depthwise convolution and a ReLU, times linear in their work; with
    ``head``, a linear layer too (a category the records without it never train)."""
    c = int(rng.integers(8, 64))
    nodes = {"c1": {**_conv(c), "name": "c1"}, "c2": {**_conv(c, groups=c), "name": "c2"},
             "r": {"name": "r", "op": "activation", "input_shapes": [[1, c, 28, 28]],
                   "output_shapes": [[1, c, 28, 28]], "flops": c * 784}}
    ms = {"c1": 1e-6 * nodes["c1"]["flops"] + 0.05, "c2": 2e-6 * nodes["c2"]["flops"] + 0.02, "r": 1e-5 * c + 0.01}
    kinds = {"c1": "aten::conv2d", "c2": "aten::conv2d", "r": "aten::relu"}
    if head:
        nodes["fc"] = {"name": "fc", "op": "linear", "input_shapes": [[1, 512]], "output_shapes": [[1, 10]],
                       "params": 5130, "flops": 10240, "attrs": {"in_features": 512, "out_features": 10}}
        ms["fc"], kinds["fc"] = 0.02, "aten::linear"
    ops = [{"kernel": n, "kind": kinds[n], "nodes": [n], "ms": 1.2 * v, "min_ms": v, "iqr_rel": 0}
           for n, v in ms.items()]
    return {"model": f"m{i}", "latency_ms": 1.2 * sum(ms.values()) + 0.5, "latency_min_ms": sum(ms.values()) + 0.4,
            "op_sum_ms": 1.2 * sum(ms.values()), "ops": ops, "nodes": nodes}


def _records(n: int, seed: int = 0) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    return [_record(i, rng) for i in range(n)]


def _layers(n: int = 40) -> tuple[np.ndarray, np.ndarray]:
    """Layer shapes ``c, k, im, f, s`` and two primitives' times (ns), known closed forms."""
    rng = np.random.default_rng(0)
    x = np.column_stack([rng.choice([16, 32, 64], n), rng.choice([16, 32], n), rng.choice([7, 14, 28], n),
                         rng.choice([1, 3], n), np.ones(n)]).astype(float)
    macs = x[:, 0] * x[:, 1] * x[:, 2] ** 2 * x[:, 3] ** 2
    return x, np.column_stack([10 * macs + 1e4, 3 * macs + 5e3])


def _tensors() -> tuple[np.ndarray, np.ndarray]:
    """Tensors ``c, im`` and two layout transformations' times (ns)."""
    x = np.array([[c, im] for c in (16, 32, 64, 128) for im in (7, 14, 28)], dtype=float)
    n = x[:, 0] * x[:, 1] ** 2
    return x, np.column_stack([0.3 * n, 0.6 * n + 100])


#: Per estimator: a new unfitted one, a fit of it on tiny data, the data ``predict`` takes, and a parameter with
#: another valid value.
CASES: dict[str, tuple[Callable[[], Any], Callable[[Any], Any], Callable[[], Any], tuple[str, Any]]] = {
    "op-latency": (lambda: OpLatencyEstimator(method="lasso", scenario="toy"),
                   lambda est: est.fit(_records(12)), lambda: _records(3, seed=1), ("context", False)),
    "lin": (LinearModel, lambda est: est.fit(*_layers()), lambda: _layers(3)[0], ("log_inputs", True)),
    "nn1": (lambda: NN1Model(**TINY_NET), lambda est: est.fit(*_layers()), lambda: _layers(3)[0], ("lr", 0.01)),
    "nn2": (lambda: NN2Model(**TINY_NET), lambda est: est.fit(*_layers()), lambda: _layers(3)[0],
            ("n_members", 2)),
    "krr": (lambda: KernelTransformModel(lengthscale_grid=((1.0,), (1.0,), (1.0,), (100.0,)), ridge_grid=(1e-2,)),
            lambda est: est.fit(*_tensors()), lambda: _tensors()[0][:3], ("pow2_cap", 8)),
}


@pytest.mark.parametrize("kind", sorted(CASES))
def test_an_estimator_stores_its_keyword_arguments_and_clones(kind: str) -> None:
    """``get_params`` is exactly the constructor's keyword arguments, ``set_params`` sets them (and refuses a name
    the constructor does not take), and :func:`sklearn.base.clone` gives an unfitted copy with equal params."""
    make, _, _, (name, value) = CASES[kind]
    est = make()
    params = est.get_params()
    takes = inspect.signature(type(est).__init__).parameters
    assert set(params) == {p for p in takes if p != "self"}
    assert all(takes[p].kind is inspect.Parameter.KEYWORD_ONLY for p in params)
    copy = clone(est)
    assert type(copy) is type(est) and copy is not est and copy.get_params() == params
    assert est.set_params(**{name: value}) is est and est.get_params()[name] == value
    assert clone(est).get_params()[name] == value
    with pytest.raises(InvalidInputError, match="no parameter 'not_a_setting'"):
        est.set_params(not_a_setting=1)
    assert est.get_params()[name] == value  # a refused call sets nothing


@pytest.mark.parametrize("kind", sorted(CASES))
def test_fit_returns_self_learns_attributes_ending_in_underscore_and_predict_needs_it(kind: str) -> None:
    """``predict`` refuses an unfitted estimator; ``fit`` returns ``self`` and every attribute it sets (other than
    private ones) ends in ``_``; a clone of the fitted estimator is unfitted again."""
    make, fit, inputs, _ = CASES[kind]
    est = make()
    with pytest.raises(NotFittedError, match="not fitted"):
        est.predict(inputs())
    before = set(vars(est))
    assert fit(est) is est
    learnt = set(vars(est)) - before
    assert learnt and all(a.endswith("_") for a in learnt if not a.startswith("_"))
    assert all(a.endswith("_") or a.startswith("_") for a in learnt)
    assert np.isfinite(est.predict(inputs())).all()
    with pytest.raises(NotFittedError):
        clone(est).predict(inputs())


def test_the_op_latency_estimator_predicts_records_as_its_fitted_model() -> None:
    """``predict`` is the fitted :class:`LatencyModel`'s end-to-end prediction of each record's operations, as an
    array; ``predict_records`` keeps the breakdown; features are named per category."""
    train, test = _records(12), _records(4, seed=1)
    est = OpLatencyEstimator(method="lasso", scenario="toy", statistic="median").fit(train, info={"dataset": "d"})
    model = est.model_
    assert (model.scenario, model.method, model.statistic, model.info["dataset"]) == ("toy", "lasso", "median", "d")
    pred = est.predict(test)
    assert pred.shape == (4,) and pred.dtype == np.float64
    assert pred.tolist() == pytest.approx([model.predict_record(r).latency_ms for r in test])
    assert pred.tolist() == [p.latency_ms for p in est.predict_records(test)]
    assert pred.tolist() == pytest.approx([r["latency_ms"] for r in test], rel=0.05)
    names = est.get_feature_names_out()
    assert names == {c: tuple(n) for c, n in model.feature_names.items()}
    assert set(CONTEXT_FEATURES) <= set(names["conv"]) and names["conv"][0] == "in_h"
    own = est.set_params(context=False).fit(train).get_feature_names_out()
    assert not set(CONTEXT_FEATURES) & set(own["conv"])
    with pytest.raises(NotFittedError):
        OpLatencyEstimator(scenario="toy").get_feature_names_out()


def test_the_op_latency_estimator_names_what_it_cannot_predict_and_checks_its_settings_in_fit() -> None:
    """A record with an operation no predictor covers is refused by name (its latency would be a lower bound),
    and ``predict_records`` lists it; settings are checked when fitting, not when stored."""
    est = OpLatencyEstimator(method="lasso", scenario="toy").fit(_records(12))
    with_head = _record(99, np.random.default_rng(5), head=True)
    with pytest.raises(InvalidInputError, match=r"m99: fc@fc \(aten::linear\)"):
        est.predict([with_head])
    (breakdown,) = est.predict_records([with_head])
    assert breakdown.unpredicted == ["fc@fc (aten::linear)"]
    assert len(record_ops(with_head)) == 4
    bad = OpLatencyEstimator(method="svm", scenario="toy")  # stored as given
    with pytest.raises(InvalidInputError, match="unknown method 'svm'"):
        bad.fit(_records(12))
    with pytest.raises(InvalidInputError, match="scenario None"):
        OpLatencyEstimator(method="lasso").fit(_records(12))
    with pytest.raises(InvalidInputError, match="unknown network feature"):
        OpLatencyEstimator(scenario="toy", network="widest").fit(_records(12))
    with pytest.raises(InvalidInputError, match="no training models"):
        OpLatencyEstimator(scenario="toy").fit([])
