"""Cost models: how long an operation takes on a platform, predicted instead of measured.

This package holds the convolution-primitive performance models of mulder2020/mulder2021: from a conv layer's shape
``(c, k, im, f, s)`` they predict the time of every primitive (im2col, Winograd, ...) and of the data-layout
transformations between them, in one batched pass, for primitive selection.

Modules:

- :mod:`~edgeplan.measure.primitive_data`: the timing-table CSV format, its loader and the seeded 80/10/10 split;
- :mod:`~edgeplan.costmodels.primitive_models`: the estimators Lin, NN1 and NN2 (scikit-learn contract);
- :mod:`~edgeplan.costmodels.transform_models`: the kernel model of the layout transformations (``krr``);
- :mod:`~edgeplan.costmodels.performance_model`: a platform's primitive + transformation model, fit, save, load
  (JSON and ``.npz``, no pickle);
- :mod:`~edgeplan.costmodels.transfer_learning`: a model moved to another platform from a few of its samples
  (mulder2020 §4.4; the steps in :mod:`~edgeplan.costmodels.transfer_steps`);
- :mod:`~edgeplan.costmodels.primitive_calibration`: a model moved to a user's machine from every layer measured
  there, the method chosen by cross-validation;
- :mod:`~edgeplan.costmodels.primitive_devices`: such a model kept as a device of the edgeplan home, for
  ``select --device NAME``;
- :mod:`~edgeplan.costmodels.evaluation` and :mod:`~edgeplan.measure.metrics`: MdRAE per column.

Importing the package does not import torch; the neural estimators import it in ``fit`` and ``predict``.

Usage::

    from edgeplan.costmodels import load_primitive_csv, fit_performance_model, evaluate_performance_model, transfer
    data = load_primitive_csv("intel.csv")
    model = fit_performance_model(data, "nn2", split_seed=0, params={"threads": 2})
    result = evaluate_performance_model(model, data, "test")  # split as in fitting
    print(result.median_primitive_mdrae, result.median_transform_mdrae, result.median_paper_transform_mdrae)
    times_ns = model.predict_primitives([[64, 64, 56, 3, 1], [128, 256, 28, 1, 1]])
    amd = transfer(model, load_primitive_csv("amd.csv"), fraction=0.01, seed=0)  # from 1/100 of AMD's timings
"""

from __future__ import annotations

from edgeplan.costmodels.evaluation import Evaluation, SplitSeedWarning, evaluate_performance_model
from edgeplan.costmodels.performance_model import (
    PerformanceModel,
    fit_performance_model,
    load_performance_model,
    save_performance_model,
)
from edgeplan.costmodels.primitive_models import LinearModel, NN1Model, NN2Model, PrimitiveEstimator, make_estimator
from edgeplan.costmodels.transfer_learning import TransferSample, draw_samples, transfer
from edgeplan.costmodels.transform_models import KernelTransformModel, make_transform_estimator
from edgeplan.measure.metrics import mdrae, mdrae_per_column, relative_abs_error
from edgeplan.measure.primitive_data import (
    LAYER_FEATURES,
    TRANSFORM_COLUMNS,
    TRANSFORM_FEATURES,
    PrimitiveDataset,
    Split,
    TransformDataset,
    load_primitive_csv,
    split_indices,
)
from edgeplan.measure.sampling import design_rows

__all__ = [
    "LAYER_FEATURES",
    "TRANSFORM_COLUMNS",
    "TRANSFORM_FEATURES",
    "Evaluation",
    "KernelTransformModel",
    "LinearModel",
    "NN1Model",
    "NN2Model",
    "PerformanceModel",
    "PrimitiveDataset",
    "PrimitiveEstimator",
    "Split",
    "SplitSeedWarning",
    "TransferSample",
    "TransformDataset",
    "design_rows",
    "draw_samples",
    "evaluate_performance_model",
    "fit_performance_model",
    "load_performance_model",
    "load_primitive_csv",
    "make_estimator",
    "make_transform_estimator",
    "mdrae",
    "mdrae_per_column",
    "relative_abs_error",
    "save_performance_model",
    "split_indices",
    "transfer",
]
