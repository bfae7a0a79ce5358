"""Operation-wise latency prediction (li2023): a model's latency as the sum of its operations' predicted times.

- :mod:`~edgeplan.costmodels.opwise.features`: the named features of an operation and its predictor key;
- :mod:`~edgeplan.costmodels.opwise.ops` and :mod:`~edgeplan.costmodels.opwise.graph_ops`: the operations of a
  measured record or of a graph, featurized alike;
- :mod:`~edgeplan.costmodels.opwise.predictors`: the per-key predictors (Lasso, random forest, GBDT, MLP);
- :mod:`~edgeplan.costmodels.opwise.model`: the end-to-end latency model of one scenario (the fitted artifact: it
  predicts and is saved);
- :mod:`~edgeplan.costmodels.opwise.estimator`: the scikit-learn estimator that fits it;
- :mod:`~edgeplan.costmodels.opwise.profiles`: the shipped and calibrated device profiles, found by name;
- :mod:`~edgeplan.costmodels.opwise.calibrate` and :mod:`~edgeplan.costmodels.opwise.op_correction`: a new device
  from a handful of models measured on it.

The measurements they learn from come from :mod:`edgeplan.measure.op_campaign`, in a scenario of
:mod:`edgeplan.measure.scenarios`.
"""
