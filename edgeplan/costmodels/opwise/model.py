"""End-to-end latency model of one scenario: operation-wise predictors plus li2023's overhead term.

``T(model) = T_overhead + sum over its operations c of f_key(c)(x_c)`` (li2023 §4.2), with one predictor per
operation key (:func:`edgeplan.costmodels.opwise.features.predictor_key`). li2023 learns ``T_overhead`` as the mean
difference between the measured end-to-end latency and the sum of the measured operation latencies over the training
models (``overhead="mean"``). By default edgeplan learns it as a linear function of the model,
``a + b * (number of ops) + s * (sum of the ops) + w * (millions of parameters)`` (``overhead="linear"``,
:func:`fit_overhead`): eager PyTorch spends a few microseconds dispatching each op, and a model's end-to-end time runs
a few percent over the sum its profiler reports, so a constant is too small for a large model and too large for a
small one; a model reads its weights from memory on every run, where an op timed alone and warm finds them in cache.
See :func:`~edgeplan.costmodels.opwise.overhead.fit_overhead` for the fit.

An operation whose key was never trained is predicted by its category's predictor (fitted on every operation of
the category) and flagged ``by_category``; a grouped convolution without either, by the dense convolution
predictor of its runtime kind or category (:data:`FAMILY`), also flagged, and labelled as that predictor's
(:attr:`OpPrediction.predictor`); one with none is *unpredicted*: reported by name, and missing from the total
(which is then a lower bound), never silently. A saved model is one JSON file (no pickle).

:class:`LatencyModel` is the fitted model: it predicts, is extended and is saved. It is fitted by the scikit-learn
estimator :class:`~edgeplan.costmodels.opwise.estimator.OpLatencyEstimator` (the settings in its constructor,
``fit(records)``, the fitted :class:`LatencyModel` as its ``model_``).

Where the runtime picks one of several implementations for a kernel kind by its shapes (eager PyTorch's
``aten::conv2d``: oneDNN or its own im2col + GEMM, see :mod:`edgeplan.ir.kernels.selection`), a model fitted with
``threads`` keys its predictors by the implementation too (``aten::conv2d:native|conv``), deduced for that thread
count (:attr:`LatencyModel.threads`); a model fitted without, or saved by an older edgeplan, keys by kernel kind
alone, as li2023 does for a CPU.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from edgeplan.costmodels.opwise.features import (
    CATEGORY_FEATURES,
    CONTEXT_FEATURES,
    LEGACY_FEATURES,
    NETWORK_AUTO,
    NETWORK_CHOICES,
    NETWORK_FEATURES,
    PRODUCT_CATEGORIES,
    network_choice,
)
from edgeplan.costmodels.opwise.model_files import (
    MODEL_FORMAT,
    MODEL_SUFFIXES,
    read_json,
    write_json,
)
from edgeplan.costmodels.opwise.ops import (
    OpInput,
    OpPrediction,
    Prediction,
    _check_statistic,
    op_params,
    record_latency,
    record_ops,
)
from edgeplan.costmodels.opwise.overhead import OVERHEAD_FORMS, fit_overhead
from edgeplan.costmodels.opwise.predictors import METHODS, OpPredictor, fit_predictor
from edgeplan.errors import InvalidInputError
from edgeplan.ir.kernels.selection import implementation

__all__ = ["CV_FOLDS", "FAMILY", "MIN_FAMILY_SAMPLES", "MIN_SAMPLES", "FitSettings", "LatencyModel"]


#: Fewest training operations a key needs for its own predictor.
MIN_SAMPLES = 8

#: Fewest training operations a key (or category) with a family (:data:`FAMILY`: grouped convolutions) needs for
#: its own predictor; with fewer, the family's predictor, trained on many more, prices its operations (a few narrow
#: grouped convolutions of synthetic networks priced the zoo's wide ones severalfold off; ``docs/figures.md``). From
#: 20 ops on, a 5-fold CV holds out 4 per fold.
MIN_FAMILY_SAMPLES = 20


def _min_ops(category: str, min_samples: int) -> int:
    """Fewest training ops a key of ``category`` needs for its own predictor (:data:`MIN_FAMILY_SAMPLES`)."""
    return max(min_samples, MIN_FAMILY_SAMPLES) if category in FAMILY else min_samples


#: Smallest op latency a predictor is trained on (ms): the profilers report microseconds, and a relative-error
#: fit on a target below their resolution would weigh a rounding error like a real one.
MIN_TARGET_MS = 1e-3

#: Fewest models an operation kind must come from for :meth:`LatencyModel.extended` to give it a predictor.
MIN_EXTENSION_MODELS = 3

#: Most operations one predictor is fitted on: a key (or category fallback) with more trains on a seeded subsample
#: of this many. The element-wise fallback of li2023's synthetic networks with edgeplan's spaces holds ~48,000 ops
#: (~4,400 distinct feature vectors) and took ~30 min to fit with GBDT on one core; 20,000 of them take ~45 s.
MAX_FIT_OPS = 20_000

#: Features that carry the linear weight of the features they are tied with in a product's training data
#: (:func:`edgeplan.costmodels.opwise.predictors._lasso_train`): a product's time follows its work.
WORK_FEATURES: tuple[str, ...] = ("param_size", "flops")


#: The category whose predictor stands in for a category that has none, from the leading features they share: a
#: grouped convolution is predicted as a dense one from its own shapes and FLOPs (which count the groups), its
#: ``groups`` feature dropped. On the zoo's grouped convolutions (ResNeXt, RegNet, ...) with 30 training networks
#: this is within tens of percent per op, where ``groups`` dense convolutions of one group each are off severalfold.
FAMILY: dict[str, str] = {"gconv": "conv"}


#: How the predictors of a fit (:class:`~edgeplan.costmodels.opwise.estimator.OpLatencyEstimator`'s ``cv``) draw
#: their CV folds: ``ops`` one by one (li2023's), ``networks`` whole training networks at a time.
CV_FOLDS: tuple[str, ...] = ("ops", "networks")


def _fit_ops(ops: Sequence[OpInput], method: str, seed: int, names: Mapping[str, tuple[str, ...]],
             groups: Sequence[int] | None = None) -> OpPredictor:
    """One key's predictor, fitted on its operations' features ``names`` (by category) and measured times (floored
    at :data:`MIN_TARGET_MS`); on a seeded subsample of :data:`MAX_FIT_OPS` of them when there are more. A
    product's predictor puts the weight of features tied in its data on :data:`WORK_FEATURES`; the linear parts
    (Lasso, the forests' baseline) take no context feature
    (:func:`~edgeplan.costmodels.opwise.predictors.fit_predictor`'s ``linear``). ``groups``, one per op (its network's
    index), makes the CV folds hold out whole networks."""
    if len(ops) > MAX_FIT_OPS:
        keep = np.sort(np.random.default_rng(seed).choice(len(ops), MAX_FIT_OPS, replace=False))
        ops = [ops[i] for i in keep]
        groups = None if groups is None else [groups[i] for i in keep]
    cat = ops[0].category
    cols = _column_index(tuple(names[cat]), cat)
    x = np.array([_take(o.vector, cols) for o in ops])
    y = np.array([max(o.measured_ms or 0.0, MIN_TARGET_MS) for o in ops])
    prefer = [n in WORK_FEATURES for n in names[cat]] if cat in PRODUCT_CATEGORIES else None
    linear = [n not in _CONTEXT for n in names[cat]]  # the context reaches the trees and the MLP only
    return fit_predictor(x, y, method, seed=seed, prefer=prefer, linear=linear, groups=groups)


#: Every feature of an operation's place in its network and of the network: the predictors' linear parts take none.
_CONTEXT = (*CONTEXT_FEATURES, *NETWORK_FEATURES)


def _feature_names(context: bool, network: str | None = None) -> dict[str, tuple[str, ...]]:
    """Every category's feature names for a new fit: its own, then :data:`CONTEXT_FEATURES` when ``context``, then
    the :data:`NETWORK_FEATURES` of ``network`` (:data:`NETWORK_CHOICES`) when given."""
    extra = (*(CONTEXT_FEATURES if context else ()), *(NETWORK_CHOICES[network] if network else ()))
    return {c: (*names, *extra) for c, names in CATEGORY_FEATURES.items()}


@functools.lru_cache(maxsize=256)
def _column_index(names: tuple[str, ...], of: str) -> list[int] | slice:
    """Where the features ``names`` are in an op vector (:attr:`OpInput.vector`) of category ``of``
    (:meth:`LatencyModel._columns`)."""
    have = (*CATEGORY_FEATURES[of], *_CONTEXT)
    cols = [have.index(n) for n in names]
    return slice(0, len(cols)) if cols == list(range(len(cols))) else cols


def _take(x: Sequence[float], cols: list[int] | slice) -> Sequence[float]:
    """The entries ``cols`` of a feature vector."""
    return x[cols] if isinstance(cols, slice) else [x[c] for c in cols]


@dataclass
class LatencyModel:
    """Predictors of every operation key of a scenario, and the overhead.

    Attributes
    ----------
    scenario
        The scenario (device profile) trained on.
    method
        The predictor method.
    predictors
        By operation key, plus ``*|{category}`` fallbacks.
    overhead_ms
        li2023's ``T_overhead``: the constant part of the overhead (all of it for a model fitted with
        ``overhead="mean"`` or saved by an older edgeplan).
    statistic
        The measured statistic it learnt (:data:`STATISTICS`).
    info
        Provenance: training models, date, dataset.
    feature_names
        By category, the features its predictors take, by name: the op's own, then its context's
        (:data:`~edgeplan.costmodels.opwise.features.CONTEXT_FEATURES`) for a model fitted with them (a model saved by
        an older edgeplan keeps its own: :data:`~edgeplan.costmodels.opwise.features.LEGACY_FEATURES`).
    threads
        The intra-op threads the runtime's implementation choices are deduced for (:meth:`key_of`); None for a
        model whose keys carry no implementation (fitted without ``threads``, or saved by an older edgeplan).
    overhead_per_op_ms, overhead_share, overhead_per_mparam_ms
        The overhead's parts that grow with the model (:func:`fit_overhead`): ms per operation, the fraction of
        the operations' predicted sum, and ms per million parameters the operations read (their weights, read from
        memory on each run). Zero for a model fitted with ``overhead="mean"`` or saved before them.
    """

    scenario: str
    method: str
    predictors: dict[str, OpPredictor]
    overhead_ms: float
    info: dict[str, Any] = field(default_factory=dict)
    statistic: str = "median"
    feature_names: dict[str, tuple[str, ...]] = field(default_factory=lambda: _feature_names(True))
    threads: int | None = None
    overhead_per_op_ms: float = 0.0
    overhead_share: float = 0.0
    overhead_per_mparam_ms: float = 0.0

    def key_of(self, op: OpInput) -> str:
        """The key of ``op``'s own predictor in this model: its :attr:`OpInput.key`, with the implementation the
        runtime selects for it when this model deduces one (``aten::conv2d|conv`` -> ``aten::conv2d:native|conv``)."""
        if self.threads is None or op.lead is None:
            return op.key
        chosen = implementation(op.kind, op.lead, self.threads)
        if chosen is None:
            return op.key
        kind, cat = op.key.rsplit("|", 1)
        return f"{kind}:{chosen}|{cat}"

    def extended(self, records: Sequence[Mapping[str, Any]], *, seed: int = 0, min_samples: int = MIN_SAMPLES,
                 min_models: int = MIN_EXTENSION_MODELS, info: Mapping[str, Any] | None = None) -> LatencyModel:
        """A copy that also predicts the operations of ``records`` that this model has no predictor for.

        Predictors are fitted on ``records`` (with this model's method and statistic) for the operation keys and
        ``*|{category}`` fallbacks this model lacks: a vision transformer's attention, layer norm and linear layers
        over tokens, say, added to a model trained on CNNs. This model's own predictors and overhead are kept as
        they are, so whatever it predicted before it predicts the same, except the operations that a new key's
        predictor now covers instead of a category's fallback.

        Parameters
        ----------
        records
            Dataset records of the same scenario (measured beside the same reference, if this model's were).
        seed, min_samples
            As in :class:`~edgeplan.costmodels.opwise.estimator.OpLatencyEstimator`.
        min_models
            Fewest models a new key's operations must come from (and they must take more than one feature vector):
            a kind seen in one model, at one shape, would be a constant that prices every later shape alike (ViT-B/16's
            fused attention at 197 tokens for ViT-B/32's 50); such a kind is left to its category's predictor.
        info
            Provenance of the extension, kept in ``info["extensions"]`` with the keys it added and those it left out
            (``skipped``: key -> why).

        Returns
        -------
        LatencyModel

        Raises
        ------
        InvalidInputError
            When ``records`` add nothing, or a new key's category already has predictors of this model that take
            a feature this edgeplan no longer computes (refit it). Where they take an older edgeplan's list that it
            still computes (one without the features added since), the new predictors take that list too.
        """
        if not records:
            raise InvalidInputError("no models to extend the latency model with")
        by_key: dict[str, list[OpInput]] = defaultdict(list)
        models: dict[str, set[str]] = defaultdict(set)
        for r in records:
            for o in record_ops(r, self.statistic):
                for key in (self.key_of(o), "*|" + o.category):
                    by_key[key].append(o)
                    models[key].add(str(r["model"]))
        new, skipped = {}, {}
        for key, ops in sorted(by_key.items()):
            if key in self.predictors:
                continue
            shapes = len({tuple(o.x) for o in ops})
            if len(ops) < _min_ops(ops[0].category, min_samples) or len(models[key]) < min_models or shapes < 2:
                skipped[key] = f"{len(ops)} ops of {len(models[key])} model(s), {shapes} feature vector(s)"
            else:
                new[key] = ops
        if not new:
            earlier = "; ".join(f"{e.get('dataset', '?')} ({e.get('fitted_utc', '?')})"
                                for e in self.info.get("extensions", []))
            raise InvalidInputError(f"the {len(records)} models hold no operation kind this model lacks with at "
                                    f"least {min_samples} operations from {min_models} models at more than one "
                                    "shape: nothing to add" + (f" (it was extended already: {earlier})"
                                                               if earlier else ""))
        feature_names = dict(self.feature_names)
        want = _feature_names(self.uses_context, self.network_feature)
        for cat in sorted({k.rsplit("|", 1)[1] for k in new}):
            if tuple(feature_names.get(cat, want[cat])) == want[cat]:
                feature_names[cat] = want[cat]  # recorded: the new predictors take these
                continue
            if any(k.rsplit("|", 1)[1] == cat for k in self.predictors):
                # the category's predictors take an older edgeplan's list: the new ones take it too, when this
                # edgeplan still computes every feature of it (a list without the features added since)
                try:
                    _column_index(tuple(feature_names[cat]), cat)
                except ValueError:
                    raise InvalidInputError(f"this {self.scenario} {self.method} model's {cat!r} predictors take "
                                            "features this edgeplan no longer computes; refit it (`edgeplan ops "
                                            "fit`) before extending it") from None
                continue
            feature_names[cat] = want[cat]  # no predictor of its own used the old list
        predictors = dict(self.predictors)
        for key, ops in sorted(new.items()):
            predictors[key] = _fit_ops(ops, self.method, seed, feature_names)
        added = {k: len(v) for k, v in sorted(new.items())}
        meta = dict(self.info)
        meta["extensions"] = [*meta.get("extensions", []),
                              {"models": [r["model"] for r in records], "added_ops_per_key": added,
                               "skipped": skipped,
                               "fitted_utc": datetime.now(UTC).isoformat(timespec="seconds"), **dict(info or {})}]
        return replace(self, predictors=predictors, info=meta, feature_names=feature_names)

    def without_extensions(self, keep: int = 0) -> LatencyModel:
        """This model as its own fit left it: the predictors :meth:`extended` added are dropped.

        With ``keep``, the first ``keep`` extensions stay and only the later ones are dropped (the model as it was
        before its last extension, say)."""
        if keep < 0:
            raise InvalidInputError(f"keep {keep}: give how many extensions to keep (0 or more)")
        extensions = list(self.info.get("extensions", []))
        added = {k for ext in extensions[keep:] for k in ext.get("added_ops_per_key", {})}
        info = {k: v for k, v in self.info.items() if k != "extensions"}
        if extensions[:keep]:
            info["extensions"] = extensions[:keep]
        return replace(self, predictors={k: p for k, p in self.predictors.items() if k not in added}, info=info,
                       feature_names=dict(self.feature_names))

    def predict_ops(self, ops: Sequence[OpInput]) -> Prediction:
        """Predict a model from its operations (batched per key)."""
        out: list[OpPrediction | None] = [None] * len(ops)
        groups: dict[str, list[int]] = defaultdict(list)
        keys = [self.key_of(o) for o in ops]
        for i, (o, own) in enumerate(zip(ops, keys, strict=True)):
            if own in self.predictors:
                groups[own].append(i)
            elif "*|" + o.category in self.predictors:
                groups["*|" + o.category].append(i)
            elif (family := self._family_key(own, o.category)) is not None:
                groups[family].append(i)
            else:
                out[i] = OpPrediction(o.name, o.kind, own, None, params=op_params(o))
        needs_context = self.uses_context
        for key, idx in groups.items():
            cat = key.rsplit("|", 1)[1]
            cols = {c: self._columns(cat, c) for c in {ops[i].category for i in idx}}
            if needs_context and any(not ops[i].context for i in idx):
                raise ValueError("ops without context features (edgeplan.costmodels.opwise.ops.with_context) "
                                 "given to a model that takes them")
            ms = self.predictors[key].predict(np.array([_take(ops[i].vector, cols[ops[i].category]) for i in idx]))
            for i, v in zip(idx, ms, strict=True):
                out[i] = OpPrediction(ops[i].name, ops[i].kind, keys[i], max(float(v), 0.0), key != keys[i], key,
                                      op_params(ops[i]))
        return self.prediction(tuple(o for o in out if o is not None))

    def overhead_of(self, ops: Sequence[OpPrediction]) -> float:
        """The learnt overhead of a model of ``ops`` (every op counted, the unpredicted too): the constant, plus
        :attr:`overhead_per_op_ms` per op, :attr:`overhead_share` of the predicted ops' sum and
        :attr:`overhead_per_mparam_ms` per million parameters the ops read."""
        ops_ms = sum(o.ms for o in ops if o.ms is not None)
        mparams = sum(o.params for o in ops) / 1e6
        return (self.overhead_ms + self.overhead_per_op_ms * len(ops) + self.overhead_share * ops_ms
                + self.overhead_per_mparam_ms * mparams)

    def total_ms(self, ops: Sequence[OpPrediction]) -> float:
        """Overhead (:meth:`overhead_of`) plus the op predictions. The overhead is negative where the profiler
        inflates each op more than the runs outside the ops cost (ONNX Runtime int8); the total then stays at least
        half the ops' sum, never near or below zero for a model of a few tiny ops."""
        ops_ms = sum(o.ms for o in ops if o.ms is not None)
        return max(self.overhead_of(ops) + ops_ms, 0.5 * ops_ms)

    def prediction(self, ops: Sequence[OpPrediction]) -> Prediction:
        """A model's prediction from its ops' predictions: :meth:`total_ms`, and the overhead as it counts in it.

        Where the half-of-ops clamp applies, the prediction's overhead is the effective one (the total minus the
        ops' sum, not the learnt :attr:`overhead_ms`) and it is flagged ``overhead_clamped``, so that the breakdown
        always adds up to the total.
        """
        ops_ms = sum(o.ms for o in ops if o.ms is not None)
        learnt = self.overhead_of(ops)
        total = max(learnt + ops_ms, 0.5 * ops_ms)
        clamped = learnt + ops_ms < total
        return Prediction(total, total - ops_ms if clamped else learnt, tuple(ops), clamped)

    def _columns(self, category: str, of: str) -> list[int] | slice:
        """Where the features of this model's ``category`` predictors are in an op vector of category ``of``
        (the same category, or a grouped convolution predicted as a dense one: :data:`FAMILY`); a slice when they
        are its first ones, in order (the usual case, and the fast one)."""
        names = self.feature_names.get(category) or _feature_names(self.uses_context, self.network_feature)[category]
        return _column_index(tuple(names), of)

    @property
    def source_scenario(self) -> str:
        """The measurement scenario of its training data (``info["source_scenario"]``, else :attr:`scenario`): where
        ``--measure`` times models for it, whatever the profile is named (``torch-fp32-2t-keep-memory``:
        torch-fp32-2t)."""
        return str(self.info.get("source_scenario", self.scenario))

    @property
    def uses_context(self) -> bool:
        """Whether its predictors take the op's context (:data:`CONTEXT_FEATURES`) beside its own features."""
        return any(n in CONTEXT_FEATURES for names in self.feature_names.values() for n in names)

    @property
    def uses_network(self) -> bool:
        """Whether its predictors take the op's network's features (:data:`NETWORK_FEATURES`)."""
        return any(n in NETWORK_FEATURES for names in self.feature_names.values() for n in names)

    @property
    def network_feature(self) -> str | None:
        """Which network feature its predictors take (a key of :data:`NETWORK_CHOICES`), or None."""
        taken = {n for names in self.feature_names.values() for n in names}
        return next((c for c, names in NETWORK_CHOICES.items() if set(names) <= taken), None)

    def _family_key(self, own: str, category: str) -> str | None:
        """The predictor of an op's family (:data:`FAMILY`) when its own key ``own`` (:meth:`key_of`) and its
        ``category`` have none."""
        family = FAMILY.get(category)
        if family is None:
            return None
        kind = own.rsplit("|", 1)[0]
        return next((k for k in (f"{kind}|{family}", f"*|{family}") if k in self.predictors), None)

    def predict_batch(self, models: Sequence[Sequence[OpInput]]) -> list[Prediction]:
        """Predict many models at once: one batched call per predictor over all their operations."""
        flat = [o for ops in models for o in ops]
        done = self.predict_ops(flat).ops
        out, start = [], 0
        for ops in models:
            part = done[start:start + len(ops)]
            start += len(ops)
            out.append(self.prediction(part))
        return out

    def predict_record(self, record: Mapping[str, Any]) -> Prediction:
        """Predict a dataset record's model."""
        return self.predict_ops(record_ops(record, self.statistic))

    # --- persistence -----------------------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"format": MODEL_FORMAT, "scenario": self.scenario, "method": self.method,
                "statistic": self.statistic, "overhead_ms": self.overhead_ms,
                **({"overhead_per_op_ms": self.overhead_per_op_ms, "overhead_share": self.overhead_share}
                   if self.overhead_per_op_ms or self.overhead_share else {}),
                **({"overhead_per_mparam_ms": self.overhead_per_mparam_ms} if self.overhead_per_mparam_ms else {}),
                "info": self.info,
                "features": {c: list(n) for c, n in self.feature_names.items()},
                **({"threads": self.threads} if self.threads is not None else {}),
                "predictors": {k: p.to_dict() for k, p in sorted(self.predictors.items())}}

    def save(self, path: str | Path) -> Path:
        """Write the model as one JSON file: ``path`` itself when it names a ``.json`` or ``.json.xz`` file (the
        latter xz-compressed, as the shipped profiles are), else ``{path}/{method}.json``."""
        path = Path(path)
        if not path.name.endswith(MODEL_SUFFIXES):
            path = path / f"{self.method}.json"
        return write_json(path, self.to_dict())

    @classmethod
    def load(cls, path: str | Path) -> LatencyModel:
        """Read a model written by :meth:`save` (plain or xz-compressed JSON).

        Raises
        ------
        InvalidInputError
            For a missing or foreign file.
        """
        path = Path(path)
        if not path.is_file():
            raise InvalidInputError(f"latency model {path} does not exist")
        data = read_json(path, what="a latency model")
        if not isinstance(data, dict) or data.get("format") != MODEL_FORMAT:
            raise InvalidInputError(f"{path} is not an edgeplan latency model (format {MODEL_FORMAT})")
        return cls.from_dict(data)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LatencyModel:
        """Inverse of :meth:`to_dict`."""
        preds = {k: OpPredictor.from_dict(v) for k, v in data["predictors"].items()}
        names = data.get("features")
        feature_names = ({c: tuple(n) for c, n in names.items()} if isinstance(names, dict)
                         else dict(LEGACY_FEATURES))
        threads = data.get("threads")
        return cls(data["scenario"], data["method"], preds, float(data["overhead_ms"]), dict(data["info"]),
                   str(data.get("statistic", "median")), feature_names, int(threads) if threads is not None else None,
                   float(data.get("overhead_per_op_ms", 0.0)), float(data.get("overhead_share", 0.0)),
                   float(data.get("overhead_per_mparam_ms", 0.0)))




@dataclass(frozen=True)
class FitSettings:
    """How a :class:`LatencyModel` is fitted: the parameters of
    :class:`~edgeplan.costmodels.opwise.estimator.OpLatencyEstimator` (which documents them), checked.

    Raises
    ------
    InvalidInputError
        For unknown CV folds, statistic, overhead form, method or network feature, or no scenario name.
    """

    method: str
    scenario: str
    statistic: str
    threads: int | None
    context: bool
    overhead: str
    network: bool | str
    cv: str
    min_samples: int
    seed: int

    def __post_init__(self) -> None:
        if self.cv not in CV_FOLDS:
            raise InvalidInputError(f"unknown cv folds {self.cv!r}; choose one of {', '.join(CV_FOLDS)}")
        _check_statistic(self.statistic)
        if self.overhead not in OVERHEAD_FORMS:
            raise InvalidInputError(f"unknown overhead form {self.overhead!r}; choose one of "
                                    f"{', '.join(OVERHEAD_FORMS)}")
        if self.method not in METHODS:
            raise InvalidInputError(f"unknown method {self.method!r}; choose one of {', '.join(METHODS)}")
        network_choice(self.network)  # a name it does not know is refused before the fitting
        if not isinstance(self.scenario, str) or not self.scenario:
            raise InvalidInputError(f"scenario {self.scenario!r}: give the name of the scenario (device profile) the "
                                    "records were measured in; the fitted model records it")


@dataclass
class _Training:
    """The training records' operations by predictor key (``by_key``) and category fallback (``by_cat``), each
    op's network index by key (``nets``), and per network its measured latency, measured ops' sum, op count,
    millions of parameters its ops read (``mparams``) and operations (``every``)."""

    by_key: dict[str, list[OpInput]] = field(default_factory=lambda: defaultdict(list))
    by_cat: dict[str, list[OpInput]] = field(default_factory=lambda: defaultdict(list))
    nets: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    latencies: list[float] = field(default_factory=list)
    sums: list[float] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)
    mparams: list[float] = field(default_factory=list)
    every: list[list[OpInput]] = field(default_factory=list)


def _training(records: Sequence[Mapping[str, Any]], settings: FitSettings) -> _Training:
    """The operations of ``records`` with ``settings``'s statistic, keyed as a model of its threads keys them."""
    keyed = LatencyModel(settings.scenario, settings.method, {}, 0.0, threads=settings.threads)
    out = _Training()
    for index, r in enumerate(records):
        ops = record_ops(r, settings.statistic)
        out.every.append(ops)
        for o in ops:
            for bucket, key in ((out.by_key, keyed.key_of(o)), (out.by_cat, "*|" + o.category)):
                bucket[key].append(o)
                out.nets[key].append(index)
        out.latencies.append(record_latency(r, settings.statistic))
        out.sums.append(sum(o.measured_ms or 0.0 for o in ops))
        out.counts.append(len(ops))
        out.mparams.append(sum(op_params(o) for o in ops) / 1e6)
    return out


def _fit_model(records: Sequence[Mapping[str, Any]], settings: FitSettings, info: Mapping[str, Any] | None = None,
               progress: bool = False) -> LatencyModel:
    """Every operation key's predictor and the overhead, fitted on ``records`` as ``settings`` say
    (:meth:`edgeplan.costmodels.opwise.estimator.OpLatencyEstimator.fit`, which documents them); ``info`` is kept
    in the model's provenance, ``progress`` shows a bar over the keys."""
    if not records:
        raise InvalidInputError("no training models")
    s = settings
    chosen = network_choice(s.network, len(records))
    names = _feature_names(s.context, chosen)
    data = _training(records, s)
    groups = {k: v for k, v in {**data.by_key, **data.by_cat}.items()
              if len(v) >= _min_ops(v[0].category, s.min_samples)}
    predictors: dict[str, OpPredictor] = {}
    from edgeplan.measure.progress import counting_bar

    with counting_bar(progress, f"fitting {s.method}", total=len(groups)) as advance:
        for key, ops in sorted(groups.items()):
            predictors[key] = _fit_ops(ops, s.method, s.seed, names, data.nets[key] if s.cv == "networks" else None)
            advance(1)
    meta = {"models": len(records), "min_samples": s.min_samples, "min_family_samples": MIN_FAMILY_SAMPLES,
            **({"cv": s.cv} if s.cv != "ops" else {}),
            **({"network": f"auto: {chosen or 'none'} ({len(records)} networks, {NETWORK_AUTO[0]} from "
                           f"{NETWORK_AUTO[1]})"} if s.network == "auto" else {}),
            "fitted_utc": datetime.now(UTC).isoformat(timespec="seconds"),
            "ops_per_key": {k: len(v) for k, v in sorted(data.by_key.items())}, **dict(info or {})}
    fitted = LatencyModel(s.scenario, s.method, predictors, 0.0, meta, s.statistic, names, s.threads)
    sums = data.sums
    if s.overhead == "stacked":  # the linear form over the sums the predictors give the training networks
        sums = [sum(o.ms or 0.0 for o in p.ops) for p in fitted.predict_batch(data.every)]
    const, per_op, share, per_mparam = fit_overhead(data.latencies, sums, data.counts,
                                                    "mean" if s.overhead == "mean" else "linear", data.mparams)
    meta["overhead"] = s.overhead if per_op or share or per_mparam else "mean"
    return replace(fitted, overhead_ms=const, overhead_per_op_ms=per_op, overhead_share=share,
                   overhead_per_mparam_ms=per_mparam)
