"""What limits li2023's end-to-end prediction on the zoo CNNs when no op predictor errs: the composition, and context.

Two diagnostics on one ``edgeplan ops export`` dataset, with no op predictor in the way (every op at its measured
time, so the figures say what a perfect op predictor would leave):

1. **Composition.** li2023 §4.2 predicts ``T = T_overhead + sum of the ops`` with ``T_overhead`` the mean gap between
   end-to-end and summed op times on the training networks. Here that constant is set beside three other forms
   fitted on the same training networks by relative least squares: ``c + b * sum`` (``scale``), ``c + sum + k * n``
   with ``n`` the op count (``per-op``), and ``c + b * sum + k * n`` (``linear``). Each is scored with the ops as
   measured on the synthetic test networks (synthetic:900-999) and on the zoo CNNs. With ``--predicted METHOD``
   also with the ops as a predictor of that method predicts them (fitted on the same training networks, keyed by
   implementation, with the context features), the forms still fitted on the measured ops as li2023 fits its
   constant: what each form gives end to end, where the op predictions' own bias may add to or cancel the form's.
2. **Context.** The same operation (same predictor key, identical features) timed inside a zoo CNN and inside the
   training networks: the median of the zoo time over the training networks' median time, per category, by the op's
   position in its network, by the network's weight size, and by how many times the same op (key and features)
   ran before it in the same network (:data:`~edgeplan.costmodels.opwise.features.CONTEXT_FEATURES`); the synthetic test
   networks' ops beside them as the control (about 1 by construction), and the training networks' own ops (in
   sample: each against its group's median) by the same repeat count. No predictor of the op's own features can
   price a difference here; the context features can price the part that follows the repeats.

Training networks: li2023's synthetic:0-899, with ``--space FAMILY`` (repeatable) also that edgeplan space's networks
the file holds.

Usage, from the repository root::

    python benchmarks/diag_li2023_context.py --data edgeplan/data/latency/epyc-zen5-keep/torch-fp32-2t.jsonl.xz \
        [--space synthetic-aligned] [--statistic median] [--predicted gbdt]
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

#: The overhead forms of the composition diagnostic: (uses a scale on the op sum, uses a cost per op).
FORMS: dict[str, tuple[bool, bool]] = {"constant (li2023)": (False, False), "scale": (True, False),
                                       "per-op": (False, True), "linear": (True, True)}


def _rows(records: Sequence[Mapping[str, Any]], ops: Mapping[str, Sequence[Any]], statistic: str) -> np.ndarray:
    from edgeplan.costmodels.opwise.ops import record_latency

    out = []
    for r in records:
        mine = ops[r["model"]]
        out.append((record_latency(r, statistic), sum(o.measured_ms or 0.0 for o in mine), len(mine)))
    return np.array(out, dtype=float)


def predicted_rows(model: Any, records: Sequence[Mapping[str, Any]], ops: Mapping[str, Sequence[Any]]) -> np.ndarray:
    """Rows (end to end as measured, the op sum as ``model`` predicts it, op count) of ``records``; an unpredicted op
    counts 0, as in the model's own total."""
    from edgeplan.costmodels.opwise.ops import record_latency

    return np.array([(record_latency(r, model.statistic),
                      sum(q.ms or 0.0 for q in model.predict_ops(ops[r["model"]]).ops), len(ops[r["model"]]))
                     for r in records], dtype=float)


def fit_form(train: np.ndarray, scale: bool, per_op: bool) -> tuple[Callable[[np.ndarray], np.ndarray], np.ndarray]:
    """The overhead form fitted on ``train`` rows (end to end, op sum, op count) by relative least squares.

    The constant form is li2023's: the mean gap. The others minimise the squared relative error of the end-to-end
    time. The prediction keeps the library's floor of half the op sum (:meth:`LatencyModel.total_ms`).

    Returns
    -------
    predict, params
        A function of rows giving end-to-end times, and ``(c, b, k)``.
    """
    from scipy.optimize import least_squares

    e, s, n = train[:, 0], train[:, 1], train[:, 2]
    if not scale and not per_op:
        params = np.array([float(np.mean(e - s)), 1.0, 0.0])
    else:
        def model(p: np.ndarray, s: np.ndarray, n: np.ndarray) -> np.ndarray:
            return p[0] + (p[1] if scale else 1.0) * s + (p[2] if per_op else 0.0) * n

        fit = least_squares(lambda p: (model(p, s, n) - e) / e, np.array([float(np.mean(e - s)), 1.0, 0.0]))
        params = np.array([fit.x[0], fit.x[1] if scale else 1.0, fit.x[2] if per_op else 0.0])

    def predict(rows: np.ndarray) -> np.ndarray:
        total = params[0] + params[1] * rows[:, 1] + params[2] * rows[:, 2]
        return np.maximum(total, 0.5 * rows[:, 1])

    return predict, params


def _mape(pred: np.ndarray, rows: np.ndarray) -> float:
    return float(100 * np.mean(np.abs(pred - rows[:, 0]) / rows[:, 0]))


def _composition(train: np.ndarray, groups: Mapping[str, np.ndarray], ops_as: str = "at its measured time") -> None:
    print(f"1. composition, every op {ops_as} ({len(train)} training networks; MAPE)")
    print(f"   {'form':<18} {'c ms':>7} {'b':>6} {'k us':>6}  " + "  ".join(f"{g:>16}" for g in groups))
    for name, (scale, per_op) in FORMS.items():
        predict, p = fit_form(train, scale, per_op)
        print(f"   {name:<18} {p[0]:>7.3f} {p[1]:>6.3f} {1000 * p[2]:>6.2f}  "
              + "  ".join(f"{_mape(predict(rows), rows):>15.2f}%" for rows in groups.values()))
    gaps = {g: rows[:, 0] / rows[:, 1] for g, rows in {"training": train, **groups}.items()}
    summed = "measured op sum" if ops_as == "at its measured time" else "op sum (measured in training, else predicted)"
    print(f"   end to end over the {summed}, median (quartiles): " + ", ".join(
        f"{g} {np.median(v):.3f} ({np.percentile(v, 25):.3f}-{np.percentile(v, 75):.3f})" for g, v in gaps.items()))


def _weight_mib(record: Mapping[str, Any]) -> float:
    return sum(float(n.get("param_bytes", 0)) for n in record["nodes"].values()) / 2**20


_POSITION = ((0, 10, "ops 1-10"), (10, 50, "ops 11-50"), (50, 10**9, "ops 51-"))
_REPEAT = ((0, 1, "first of its kind"), (1, 2, "1 same op before"), (2, 10**9, "2+ same ops before"))
_SIZE = ((0, 16, "< 16 MiB"), (16, 64, "16-64 MiB"), (64, 256, "64-256 MiB"), (256, 10**12, ">= 256 MiB"))


def _context(train: Sequence[Mapping[str, Any]], groups: Mapping[str, Sequence[Mapping[str, Any]]],
             ops: Mapping[str, Sequence[Any]]) -> None:
    seen: dict[tuple[str, tuple[float, ...]], list[float]] = defaultdict(list)
    for r in train:
        for o in ops[r["model"]]:
            if o.measured_ms:
                seen[(o.key, tuple(o.x))].append(o.measured_ms)
    print("\n2. context: an op's time over the training networks' median time for the same key and features "
          "(median, quartiles; ops whose features occur at least 3 times in training)")
    for label, records in {**groups, "training (in sample)": train}.items():
        every = [o for r in records for o in ops[r["model"]]]
        share = 100 * sum(o.context[0] > 0 for o in every) / max(len(every), 1)
        print(f"   {label}: {share:.1f}% of its {len(every)} ops have the same op before them in their network")
        by: dict[str, list[float]] = defaultdict(list)
        for r in records:
            size = _weight_mib(r)
            for i, o in enumerate(ops[r["model"]]):
                times = seen.get((o.key, tuple(o.x)))
                if not o.measured_ms or not times or len(times) < 3:
                    continue
                ratio = float(np.log(o.measured_ms / np.median(times)))
                by["all"].append(ratio)
                by["category " + o.category].append(ratio)
                by[next(name for lo, hi, name in _POSITION if lo <= i < hi)].append(ratio)
                by["weights " + next(name for lo, hi, name in _SIZE if lo <= size < hi)].append(ratio)
                by["repeat: " + next(name for lo, hi, name in _REPEAT if lo <= o.context[0] < hi)].append(ratio)
        if not by:
            print("     no op has a training op's features")
            continue
        order = (["all"] + sorted((k for k in by if k.startswith("category")), key=lambda k: -len(by[k]))[:6]
                 + [name for _, _, name in _POSITION] + ["weights " + name for _, _, name in _SIZE]
                 + ["repeat: " + name for _, _, name in _REPEAT])
        for key in order:
            if key in by:
                q1, q2, q3 = np.exp(np.percentile(by[key], [25, 50, 75]))
                print(f"     {key:<28} {len(by[key]):>6} ops  {q2:.3f}x ({q1:.3f}-{q3:.3f}x)")


def main(argv: list[str] | None = None) -> int:
    """Print both diagnostics for one dataset."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="an `edgeplan ops export` dataset file")
    parser.add_argument("--space", action="append", dest="spaces", default=[], metavar="FAMILY",
                        help="train on this edgeplan space's networks too (e.g. synthetic-aligned); repeatable")
    parser.add_argument("--statistic", default="median", choices=("median", "min"))
    parser.add_argument("--predicted", choices=("gbdt", "lasso", "rf", "mlp"),
                        help="also score the forms on the ops as this method predicts them")
    args = parser.parse_args(argv)
    from edgeplan.costmodels.opwise.ops import record_ops
    from edgeplan.measure.op_dataset import load_dataset
    from experiments.li2023 import _spaces, _split

    data = load_dataset(args.data)
    train, test, zoo = _split(data)
    spaces = _spaces(data)
    unknown = sorted(set(args.spaces) - set(spaces))
    if unknown:
        parser.error(f"{args.data} holds no network of {', '.join(unknown)}; it holds {', '.join(spaces) or 'none'}")
    train = train + [r for f in args.spaces for r in spaces[f]]
    if not train or not zoo:
        parser.error(f"{args.data} needs training networks (synthetic:0-899) and zoo CNNs")
    cpu = data.provenance.get("device", {}).get("cpu_model", "?")
    print(f"{args.data} ({cpu}, {data.scenario}, {args.statistic}): {len(train)} training networks"
          + (f" (li2023's and {', '.join(args.spaces)})" if args.spaces else " (li2023's)")
          + f", {len(test)} synthetic test networks, {len(zoo)} zoo CNNs")
    groups = {"synthetic test": test, "zoo CNNs": zoo} if test else {"zoo CNNs": zoo}
    ops = {r["model"]: record_ops(r, args.statistic) for r in [*train, *test, *zoo]}  # featurized once for both
    train_rows = _rows(train, ops, args.statistic)
    _composition(train_rows, {g: _rows(rs, ops, args.statistic) for g, rs in groups.items()})
    if args.predicted:
        from edgeplan.costmodels.opwise.model import LatencyModel
        from edgeplan.costmodels.opwise.model_files import scenario_threads

        model = LatencyModel.fit(train, args.predicted, data.scenario, statistic=args.statistic, progress=True,
                                 threads=scenario_threads(data.scenario))
        predicted = {g: predicted_rows(model, rs, ops) for g, rs in groups.items()}
        _composition(train_rows, predicted, f"as {args.predicted} predicts it")
    _context(train, groups, ops)
    return 0


if __name__ == "__main__":
    sys.exit(main())
