"""Multi-output performance models of convolution primitives (mulder2020 §3.3, Table 3): Lin, NN1 and NN2.

Each model maps layer shapes (rows of ``c, k, im, f, s``; or ``c, im`` for the layout transformations) to the time
of every primitive at once, in one batched pass. They follow the scikit-learn contract: ``__init__`` only stores
its keyword arguments, ``fit`` validates and returns ``self``, learned state ends in ``_``, ``predict`` refuses an
unfitted model (:class:`~edgeplan.errors.NotFittedError`), ``get_params``/``set_params`` expose the settings.

Preprocessing, the same for all three (mulder2020 §3.3): inputs standardized; targets ``z = log(t_ns)``
standardized per output over its defined cells. Undefined cells (NaN) are masked out of the loss and of its
gradient. Two edgeplan options, off in the estimators' defaults (which are the paper's Table 3) and on in the
``edgeplan`` recipe of :mod:`edgeplan.costmodels.performance_model`: ``log_inputs`` (log before standardizing) and
``pow2_features`` (the power-of-two factors of ``c, k, im`` as three more inputs). NN1 and NN2 also take
``n_members`` (an ensemble of that many networks from different seeds, averaged in log space; the ``edgeplan``
recipe uses 4 for NN2), ``target_scale`` (``shared``: one pooled deviation instead of one per output) and
``ema_decay`` (a moving average of the weights is what is kept); the ``edgeplan`` recipe sets both for NN2.

- :class:`LinearModel` (Lin): least squares of each standardized log-time on the standardized inputs, per output,
  over its defined rows.
- :class:`NN1Model`: one ``5 x 16 x 64 x 64 x 16 x 1`` ReLU network per output, each trained on its defined rows
  (Adam, lr 0.003, no weight decay, batch 1024, early stopping).
- :class:`NN2Model`: one ``5 x 128 x 512 x 512 x 128 x n`` network for all outputs, masked MSE (Adam, lr 0.001,
  weight decay 1e-5, batch 1024, early stopping).

**Early stopping: epochs, not the paper's iterations.** Table 3 stops "when the validation performance did not
improve for 250 iterations". edgeplan's ``patience=250`` counts *epochs* (full passes over the training rows). If
the paper's iterations are mini-batch steps, edgeplan waits longer: with about 3 700 Intel training layers and
batches of 1024 an epoch is 4 steps, so 250 epochs are about 1 000 steps. ``max_epochs=3000`` is an edgeplan bound
on the run time, not in the paper. A net with no defined validation cell early-stops on its training loss (see
:func:`edgeplan.costmodels._mlp.train_masked`).

**Applicability.** ``predict`` returns NaN where an output does not apply. Which outputs apply is learnt from the
training data's pattern of defined cells, keyed by the features named in ``applicability_by`` (default ``("f",
"s")``): an output applies to a layer when some training row with the same ``(f, s)`` had it defined. That is the
rule of the mulder2021 data (Winograd-3 only for ``f = 3, s = 1``, conv-1x1 only for ``f = 1``, kn2 and some im2
only for ``s = 1``), learnt rather than typed in. A layer whose ``(f, s)`` never occurred in training gets NaN for
every output: the model does not extrapolate applicability. With ``applicability_by=()`` an output applies
everywhere once it had any defined training value (used for the layout transformations). The few Intel Winograd
vec-8 columns that are defined on only part of the ``f = 3`` or ``f = 5`` layers (no shape rule explains which)
are predicted for all of them.

Modules: :mod:`.base` (the shared estimator contract), :mod:`.linear` (Lin) and :mod:`.neural` (NN1, NN2).
"""

from __future__ import annotations

from typing import Any

from edgeplan.costmodels.primitive_models.base import (
    POW2_FEATURES,
    TARGET_SCALES,
    PrimitiveEstimator,
    ProgressCallback,
    pow2_valuation,
)
from edgeplan.costmodels.primitive_models.linear import LinearModel
from edgeplan.costmodels.primitive_models.neural import NN1Model, NN2Model
from edgeplan.errors import InvalidInputError

__all__ = ["ESTIMATORS", "POW2_FEATURES", "TARGET_SCALES", "LinearModel", "NN1Model", "NN2Model", "PrimitiveEstimator",
           "ProgressCallback", "make_estimator", "pow2_valuation"]


ESTIMATORS: dict[str, type[PrimitiveEstimator]] = {"lin": LinearModel, "nn1": NN1Model, "nn2": NN2Model}


def make_estimator(kind: str, **params: Any) -> PrimitiveEstimator:
    """A new unfitted estimator of ``kind`` (``lin``, ``nn1`` or ``nn2``) with ``params`` set.

    Parameters
    ----------
    kind
        The model family.
    **params
        Constructor keyword arguments; those the family does not take are ignored only if None.
    """
    try:
        cls = ESTIMATORS[kind]
    except KeyError:
        raise InvalidInputError(f"unknown model kind {kind!r}; use one of {', '.join(ESTIMATORS)}") from None
    given = {k: v for k, v in params.items() if v is not None}
    unknown = sorted(set(given) - set(cls._param_names))
    if unknown:
        raise InvalidInputError(f"{cls.__name__} takes no parameter(s) {', '.join(unknown)}")
    return cls(**given)
