"""The op-wise latency model as a scikit-learn estimator: settings in the constructor, ``fit(records)``, ``predict``.

:class:`OpLatencyEstimator` follows the scikit-learn contract: ``__init__`` only stores its keyword arguments,
``fit`` checks them and the records and returns ``self``, the fitted :class:`~edgeplan.costmodels.opwise.model.
LatencyModel` is its ``model_`` (the artifact that predicts a graph's or a record's operations, is extended and is
saved), ``predict`` refuses an unfitted estimator (:class:`~edgeplan.errors.NotFittedError`), and
``get_params``/``set_params`` expose the settings, so that :func:`sklearn.base.clone` gives an unfitted copy.

Usage::

    from edgeplan.costmodels.opwise.estimator import OpLatencyEstimator
    from edgeplan.measure.op_dataset import load_dataset

    data = load_dataset("ops.jsonl.gz")
    est = OpLatencyEstimator(method="gbdt", scenario=data.scenario).fit(data.records[:900])
    latency_ms = est.predict(data.records[900:])
    est.model_.save("devices/mine")
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from edgeplan.costmodels.opwise.model import MIN_SAMPLES, FitSettings, LatencyModel, _fit_model
from edgeplan.costmodels.opwise.ops import Prediction, record_ops
from edgeplan.costmodels.params import EstimatorParams
from edgeplan.errors import InvalidInputError, NotFittedError

__all__ = ["OpLatencyEstimator"]


class OpLatencyEstimator(EstimatorParams):
    """li2023's operation-wise latency model of one scenario, fitted on measured dataset records.

    A model's latency is the sum of its operations' predicted times, one predictor per operation key (with
    category fallbacks), plus a learnt overhead (:mod:`edgeplan.costmodels.opwise.model`).

    Parameters
    ----------
    method
        The predictors' method, one of :data:`~edgeplan.costmodels.opwise.predictors.METHODS` (``gbdt`` by
        default, as ``edgeplan ops fit``).
    scenario
        The name of the scenario (device profile) the records were measured in, recorded with the model;
        required at :meth:`fit`.
    statistic
        Learn the fastest runs (``min``, default) or the medians (``median``).
    threads
        Key the predictors by the implementation the runtime selects at this many intra-op threads
        (:meth:`~edgeplan.costmodels.opwise.model.LatencyModel.key_of`;
        :func:`~edgeplan.costmodels.opwise.model_files.scenario_threads` gives a scenario's); None keys by kernel
        kind alone.
    context
        Give the predictors the op's place in its network too
        (:data:`~edgeplan.costmodels.opwise.features.CONTEXT_FEATURES`); False fits on the op's own features alone,
        as li2023 does.
    overhead
        How the overhead is learnt (:data:`~edgeplan.costmodels.opwise.overhead.OVERHEAD_FORMS`,
        :func:`~edgeplan.costmodels.opwise.overhead.fit_overhead`): ``linear`` in the op count, the measured ops'
        sum and the parameters they read (default); ``stacked``, the same over the ops' sum as the fitted
        predictors give it for each training network, so that it also absorbs their bias there (predictors fitted
        on a log target price an op at the geometric mean of its times, below their mean); or ``mean``, li2023's
        mean difference.
    network
        Give the predictors the op's network's footprint too
        (:func:`~edgeplan.costmodels.opwise.ops.network_footprint`): ``True`` or ``"distinct"``, its distinct
        output sizes; ``"total"``, those and its kernels' parameters; ``"peak"``, its largest output
        (:func:`~edgeplan.costmodels.opwise.ops.network_peak`)
        (:data:`~edgeplan.costmodels.opwise.features.NETWORK_CHOICES`); ``"auto"``,
        :data:`~edgeplan.costmodels.opwise.features.NETWORK_AUTO`'s feature when the records hold at least its
        count of networks, else none (:func:`~edgeplan.costmodels.opwise.features.network_choice`; the choice is
        noted in the model's ``info["network"]``); off (False) by default.
    cv
        How each predictor's 5-fold hyperparameter search draws its folds
        (:data:`~edgeplan.costmodels.opwise.model.CV_FOLDS`): ``ops``, the operations one by one, as li2023 does
        (default); ``networks``, whole training networks, so that the hyperparameters are chosen for the
        operations of networks the fit has not seen.
    min_samples
        Fewest training operations a key (or category) needs for a predictor of its own; a grouped
        convolution's at least :data:`~edgeplan.costmodels.opwise.model.MIN_FAMILY_SAMPLES`.
    seed
        Seed of the CV folds, of the subsampling of a large key and of the random methods.

    Attributes
    ----------
    model_
        The fitted :class:`~edgeplan.costmodels.opwise.model.LatencyModel`.
    """

    _param_names: ClassVar[tuple[str, ...]] = ("method", "scenario", "statistic", "threads", "context", "overhead",
                                               "network", "cv", "min_samples", "seed")

    def __init__(self, *, method: str = "gbdt", scenario: str | None = None, statistic: str = "min",
                 threads: int | None = None, context: bool = True, overhead: str = "linear",
                 network: bool | str = False, cv: str = "ops", min_samples: int = MIN_SAMPLES, seed: int = 0) -> None:
        self.method = method
        self.scenario = scenario
        self.statistic = statistic
        self.threads = threads
        self.context = context
        self.overhead = overhead
        self.network = network
        self.cv = cv
        self.min_samples = min_samples
        self.seed = seed

    def fit(self, records: Sequence[Mapping[str, Any]], *, info: Mapping[str, Any] | None = None,
            progress: bool = False) -> OpLatencyEstimator:
        """Fit every operation key's predictor and the overhead on ``records``.

        Parameters
        ----------
        records
            Dataset records (:func:`edgeplan.measure.op_dataset.load_dataset`): each a model's measured operations
            and end-to-end latency.
        info
            Extra provenance kept in the model's ``info``.
        progress
            Show a progress bar over the keys.

        Returns
        -------
        OpLatencyEstimator
            ``self``, with the fitted model as :attr:`model_`.

        Raises
        ------
        InvalidInputError
            For a setting it does not know (a method, statistic, overhead form, CV folds or network feature), no
            scenario name, no records, or a record whose operations cannot be featurized.
        """
        settings = FitSettings(**self.get_params())
        self.model_ = _fit_model(records, settings, info, progress)
        return self

    def _fitted(self) -> LatencyModel:
        model = getattr(self, "model_", None)
        if model is None:
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; call fit(records) first, or load a "
                                 "saved model with LatencyModel.load")
        return model

    def predict_records(self, records: Sequence[Mapping[str, Any]]) -> list[Prediction]:
        """Each record's predicted latency with its breakdown (per operation, the overhead, the unpredicted ops).

        A record's operations are those it timed (its ``folded_ops`` included), featurized with the model's
        statistic (:func:`~edgeplan.costmodels.opwise.ops.record_ops`), as
        :meth:`~edgeplan.costmodels.opwise.model.LatencyModel.predict_record` prices them; all records' operations
        go to each predictor in one batch.

        Parameters
        ----------
        records
            Dataset records.

        Returns
        -------
        list of Prediction
            One per record, in order.

        Raises
        ------
        NotFittedError
            Before :meth:`fit`.
        """
        model = self._fitted()
        return model.predict_batch([record_ops(r, model.statistic) for r in records])

    def predict(self, records: Sequence[Mapping[str, Any]]) -> npt.NDArray[np.float64]:
        """The predicted end-to-end latency (ms) of each record's model (:meth:`predict_records`).

        Parameters
        ----------
        records
            Dataset records.

        Returns
        -------
        numpy.ndarray
            ``(len(records),)`` predicted latencies in ms.

        Raises
        ------
        NotFittedError
            Before :meth:`fit`.
        InvalidInputError
            When a record has operations that no predictor covers: the message names them (a latency without them
            would be a lower bound counted as a prediction). :meth:`predict_records` gives those records'
            predictions with the operations listed as unpredicted; extending the model
            (:meth:`~edgeplan.costmodels.opwise.model.LatencyModel.extended`) covers them.
        """
        predictions = self.predict_records(records)
        missing = {str(r.get("model", i)): p.unpredicted for i, (r, p) in enumerate(zip(records, predictions,
                                                                                           strict=True))
                   if p.unpredicted}
        if missing:
            shown = "; ".join(f"{m}: {', '.join(ops[:3])}" + (f" and {len(ops) - 3} more" if len(ops) > 3 else "")
                              for m, ops in list(missing.items())[:3])
            raise InvalidInputError(f"{len(missing)} record(s) have operations this {self.model_.method} model has no "
                                    f"predictor for ({shown}); predict_records gives their predictions with those "
                                    "operations listed, or extend the model with data that holds them")
        return np.array([p.latency_ms for p in predictions], dtype=np.float64)

    def get_feature_names_out(self) -> dict[str, tuple[str, ...]]:
        """The features the fitted predictors take, by name, per operation category.

        Returns
        -------
        dict
            Category (``conv``, ``dwconv``, ``fc``, ...) -> its feature names, in the order its predictors take them:
            the op's own (:data:`~edgeplan.costmodels.opwise.features.CATEGORY_FEATURES`), then its context's and
            its network's where fitted with them.

        Raises
        ------
        NotFittedError
            Before :meth:`fit` (``network="auto"`` chooses its feature from the records).
        """
        return {c: tuple(n) for c, n in self._fitted().feature_names.items()}

    model_: LatencyModel
