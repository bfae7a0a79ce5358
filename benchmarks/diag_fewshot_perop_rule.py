"""Which correction form to keep when the samples' operations were measured (issue 3 diagnostic, no target).

``edgeplan calibrate`` kept the form with the lowest leave-one-out MAPE on its 10 samples. When their operations
were measured too, the ``per-op`` correction learns from hundreds of op timings, while the other forms' leave-one-out
scores rest on 10 end-to-end numbers, and the lowest of a dozen noisy scores is often lowest by chance. This compares,
on the same draws: the lowest leave-one-out MAPE (``loo-min``, the rule until commit 7ee7426), ``per-op`` unless the
best other form beats it by more than one standard error of the paired leave-one-out differences (``rule-1se``, the
rule from then until ``calibrate.PER_OP_EVIDENCE_SE`` became 2), the same with two standard errors (``rule-2se``,
``calibrate()``'s rule now), and ``per-op`` always.

Data: the shipped Intel Xeon measurements (``edgeplan/data/latency/fewshot/xeon-torch-fp32-1t``), the shipped AMD
EPYC ``torch-fp32-1t`` profile as the source; or ``--source ort-fp32-1t --data
edgeplan/data/latency/fewshot/xeon-ort-fp32-1t/main.jsonl.xz`` (models with an operation the source cannot predict
left out, named). Any other per-op export works as ``--data``, e.g. the shipped AMD EPYC ``torch-fp32-2t`` dataset
(``--data edgeplan/data/latency/torch-fp32-2t.jsonl.xz``: the one-thread profile calibrated to two threads); only its
synthetic test networks (``synthetic:900-999``) and real-world models are used, never the source's training networks.
Simplified against ``make bench-calibrate-here``: the models' source terms come from their measured operations (not
their graphs), and only the source's kernels (no ``fold-zeros`` test). Draws of ``--samples`` models from all models
and from the real-world ones; MAPE over every other model. About 6 minutes on one core per 10 draws.

Outcome (GBDT source, ``--seeds 20``; mean MAPE % over the draws from any model | from real-world ones, as
loo-min / rule-1se / rule-2se / per-op; logs in ``campaigns/``):

- EPYC -> Xeon, PyTorch (the defaults; ``diag_perop_rule_torch20.log``): 10.94 / 10.24 / 10.08 / 10.08 |
  10.38 / 9.92 / 9.98 / 9.98
- EPYC -> Xeon, ONNX Runtime (``--source ort-fp32-1t --data .../xeon-ort-fp32-1t/main.jsonl.xz``,
  ``diag_perop_rule_ort.log``): 9.26 / 9.02 / 9.00 / 9.00 | 13.95 / 12.23 / 11.30 / 10.59
- EPYC one thread -> two (``--data edgeplan/data/latency/torch-fp32-2t.jsonl.xz``, ``diag_perop_1t_to_2t.log``):
  9.87 / 9.31 / 9.16 / 9.16 | 15.67 / 11.89 / 9.96 / 9.65
- EPYC two threads -> one (``--source torch-fp32-2t --data edgeplan/data/latency/torch-fp32-1t.jsonl.xz``,
  ``diag_perop_2t_to_1t.log``): 8.18 / 8.18 / 8.18 / 8.18 | 9.55 / 9.13 / 8.76 / 8.76
- EPYC ONNX Runtime fp32 -> int8 (``--source ort-fp32-1t --data edgeplan/data/latency/ort-int8-1t.jsonl.xz``,
  ``diag_perop_ort_to_int8.log``; TResNet-M left out, its ``Pad``): 19.60 / 17.94 / 17.94 / 18.20 |
  18.05 / 17.25 / 17.25 / 17.25

The two-standard-error bar does as well as one or better in 9 of the 10 pools (0.06 points worse in the tenth), and
``calibrate()`` applies it since (``PER_OP_EVIDENCE_SE``). The first two rows suggested it; the other three were run
as a check on data it was not chosen on. Measured after it was adopted:

- EPYC -> Xeon, two threads (``--source torch-fp32-2t --data
  edgeplan/data/latency/fewshot/xeon-torch-fp32-2t/main.jsonl.xz``, ``diag_perop_xeon2t.log``): 10.96 / 9.53 / 9.23 /
  9.23 | 11.32 / 10.44 / 9.65 / 9.65
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from _machine import machine

from edgeplan.costmodels.opwise.calibrate import (
    FORMS,
    PER_OP,
    _fit_form,
    _fit_per_op,
    _keep_per_op,
    _loo_errors,
    _loo_per_op,
    _parameters,
    _per_op_sums,
    _predict_form,
    source_terms,
)
from edgeplan.costmodels.opwise.op_correction import measured_ops
from edgeplan.costmodels.opwise.ops import record_latency
from edgeplan.costmodels.opwise.profiles import load_device_model
from edgeplan.errors import InvalidInputError
from edgeplan.measure.model_sets import expand_models
from edgeplan.measure.op_dataset import load_dataset
from experiments.li2023 import _fewshot_group, _split

DATA = "edgeplan/data/latency/fewshot/xeon-torch-fp32-1t/main.jsonl.xz"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--method", default="gbdt", choices=["gbdt", "lasso"])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--samples", type=int, default=10)
    ap.add_argument("--source", default="torch-fp32-1t", help="the shipped profile calibrated")
    ap.add_argument("--data", default=DATA, help="its scenario measured on another machine (an ops export)")
    args = ap.parse_args()
    source = load_device_model(args.source, args.method)
    records, ops = [], []
    data = load_dataset(args.data)
    _, test, zoo = _split(data)  # li2023's held-out synthetic networks and real-world models
    held_out = {r["model"] for r in (*test, *zoo)}
    for r in data.records:
        if r["model"] not in held_out:
            continue  # a source's training network, or another synthetic space's
        try:
            ops.append(measured_ops(r, source))
        except InvalidInputError as e:  # an operation the source has no predictor for
            print(f"left out: {e}")
            continue
        records.append(r)
    terms = [source_terms(source.predict_ops(list(m.ops)), list(m.ops)) for m in ops]
    y = np.array([record_latency(r) for r in records])
    transformers = frozenset(expand_models(["set:timm-transformers"]))
    groups = np.array([_fewshot_group(r["model"], transformers) for r in records])
    print(f"source {args.source} ({args.method}) -> {args.data}: {len(records)} models, {args.seeds} draws of "
          f"{args.samples}; MAPE % over the models not drawn")
    for pool in ("any", "zoo"):
        candidates = np.arange(len(records)) if pool == "any" else np.flatnonzero(groups != "synthetic")
        scores: dict[str, list[float]] = {"loo-min": [], "rule-1se": [], "rule-2se": [], PER_OP: []}
        for seed in range(args.seeds):
            idx = np.random.default_rng(seed).choice(candidates, args.samples, replace=False)
            test = np.ones(len(records), dtype=bool)
            test[idx] = False
            t, yy, m = [terms[i] for i in idx], y[idx], [ops[i] for i in idx]
            errors = {f: _loo_errors(f, t, yy) for f in FORMS
                      if f != PER_OP and _parameters(f, t) < len(yy)}
            errors[PER_OP] = _loo_per_op(m, yy)
            lowest = min(errors, key=lambda f: (float(errors[f].mean()), FORMS.index(f)))
            rule, loose = PER_OP, PER_OP
            if lowest != PER_OP:
                rule, kept = _keep_per_op(lowest, errors)  # calibrate()'s rule
                loose = lowest if kept["loo_gain"] > kept["standard_error"] else PER_OP
            correction, coef = _fit_per_op(m, yy)
            predicted = {PER_OP: coef["ops"] * _per_op_sums(correction, ops) + coef["const"]}
            for form in {lowest, loose, rule} - {PER_OP}:
                c = _fit_form(form, t, yy)
                predicted[form] = np.array([_predict_form(form, c, x) for x in terms])
            for label, form in (("loo-min", lowest), ("rule-1se", loose), ("rule-2se", rule), (PER_OP, PER_OP)):
                p = predicted[form]
                scores[label].append(float(100 * np.mean(np.abs(p[test] - y[test]) / y[test])))
            print(f"  {pool:<4} seed {seed:>2}: loo-min {lowest:<14} rule {rule:<14} "
                  + "  ".join(f"{k} {v[-1]:.1f}" for k, v in scores.items()), flush=True)
        print(f"{pool:<4} mean over draws: " + "  ".join(f"{k} {np.mean(v):.2f}%" for k, v in scores.items()))
    print(f"machine: {machine()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
