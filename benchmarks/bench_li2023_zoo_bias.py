"""Where a scenario's predictors err on the zoo CNNs: the ratio of predicted to measured end-to-end times, the same
for the sum of the ops alone and per op category, the measured op sums over the measured end-to-end times, and the
MAPE with each overhead form (:data:`~edgeplan.costmodels.opwise.model.OVERHEAD_FORMS`) learnt on the training
networks, on the same op predictions.

By default the scenario's shipped models and its dataset in ``data/latency`` (no timing, no fitting). With ``--data
FILE`` (``edgeplan profile ops --export`` of your own campaign, e.g. another machine's) the methods are fitted on its
training networks first: li2023's synthetic:0-899, with ``--with-spaces`` also edgeplan's synthetic spaces the file
holds (``--space FAMILY``, repeatable: only those, e.g. ``synthetic-heads``). The synthetic test networks
(synthetic:900-999) are then reported beside the zoo, and for both groups the MAPE of the
measured op sum plus the learnt overhead ("ops as measured"): what a predictor without op error would score, so that
the op predictors' share of the error and the overhead's can be told apart. Last, per op kind, the zoo's operations
whose features occur exactly in the training networks: the median ratio of the zoo's time to the training networks'
median time for the same features, which no predictor stands between. For a file measured beside a reference model,
the reference's typical time beside the synthetic networks and beside the zoo CNNs (each model's raw latency over
its converted one, times the file's reference latency): a reference slowed by the model timed before it shows here.
``--device NAME`` evaluates a fitted device profile (shipped, e.g. ``torch-fp32-2t-keep-memory``, or calibrated) on
``--data`` instead, fitting nothing: the networks it was trained on are left out, and the synthetic networks it was
not are reported beside the zoo; ``--graph`` adds the zoo CNNs predicted as ``edgeplan predict`` predicts them, from
their graphs (the runtime's kernels deduced from the IR) rather than from the operations the profiler recorded;
``--repeat-data FILE`` (the same models measured again) prints the noise floor of each group beside its error.
``--same-models-as OTHER`` keeps only the models OTHER also holds (to compare two measurements of the same models).
``--implementations`` fits predictors per implementation the runtime selects (eager PyTorch's oneDNN or native
convolution, :mod:`edgeplan.ir.kernels.selection`), deduced for the scenario's threads. ``--worst N`` lists the N
zoo CNNs predicted furthest from their measured time, with the same ratio for their op sums (a model whose op sum is
right and whose end to end is not runs work outside its profiled ops).

Usage, from the repository root::

    python benchmarks/bench_li2023_zoo_bias.py [--scenario torch-fp32-2t] [--method gbdt --method lasso]
    python benchmarks/bench_li2023_zoo_bias.py --data FILE [--with-spaces [--space FAMILY]] [--same-models-as OTHER]
        [--implementations] [--no-context] [--method gbdt] [--worst 15]
    python benchmarks/bench_li2023_zoo_bias.py --device NAME --data FILE [--repeat-data FILE] [--graph] [--worst 15]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from _data import need
from _machine import machine


def _group_rows(model: Any, records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per model: op count, predicted op sum, measured op sum, measured end to end, predicted end to end, millions
    of parameters its ops read; and the predicted and measured time of each op category summed over the models (ops
    with a prediction only).

    A record with folded work that it does not time op by op (a zoo CNN measured before ``folded_ops`` were kept:
    NFNets' weight standardizations, MobileOne's identities) is predicted as experiments.li2023 predicts it
    (:func:`~experiments.li2023.predict_with_folded_work`: its graph's folded operators added); its
    measured folded work counts in its measured op sum, and the two in the category ``folded work``."""
    from edgeplan.costmodels.opwise.ops import record_latency, record_ops
    from experiments.li2023 import predict_with_folded_work

    rows = []
    pred_cat: dict[str, float] = defaultdict(float)
    true_cat: dict[str, float] = defaultdict(float)
    for r in records:
        ops = record_ops(r, model.statistic)
        p = predict_with_folded_work(model, r)
        for o, q in zip(ops, p.ops[:len(ops)], strict=True):
            if q.ms is not None and o.measured_ms:
                pred_cat[o.category] += q.ms
                true_cat[o.category] += o.measured_ms
        folded = 0.0 if "folded_ops" in r else float(r.get("raw_folded_work_ms", r.get("folded_work_ms", 0.0)))
        if folded:
            pred_cat["folded work"] += sum(q.ms or 0.0 for q in p.ops[len(ops):])
            true_cat["folded work"] += folded
        counted = sum(1 for q in p.ops if q.key)  # the ops the overhead counts, not those named as unfeaturized
        rows.append((counted, sum(q.ms or 0.0 for q in p.ops), sum(o.measured_ms or 0.0 for o in ops) + folded,
                     record_latency(r, model.statistic), p.latency_ms, sum(q.params for q in p.ops) / 1e6))
    return {"rows": np.array(rows), "pred_cat": dict(pred_cat), "true_cat": dict(true_cat),
            "models": [r["model"] for r in records]}


def worst(group: Mapping[str, Any], n: int) -> list[str]:
    """Lines for the ``n`` models of a :func:`_group_rows` group predicted furthest from their measured end-to-end
    time (by the ratio's distance from 1), worst first: measured time, predicted / measured end to end, predicted /
    measured op sum, op count."""
    a = group["rows"]
    e2e, ops = a[:, 4] / a[:, 3], a[:, 1] / a[:, 2]
    order = np.argsort(-np.abs(np.log(e2e)), kind="stable")[:n]
    return [f"    {group['models'][i]:<36} {a[i, 3]:8.2f} ms  predicted {e2e[i]:.3f}x, op sum {ops[i]:.3f}x, "
            f"{int(a[i, 0])} ops" for i in order]


def _overhead(params: Sequence[float], rows: np.ndarray, sums: int = 2) -> np.ndarray:
    """The overhead ``(constant, per op, share, per million parameters)`` of
    :func:`~edgeplan.costmodels.opwise.overhead.fit_overhead` for :func:`_group_rows` rows, on their measured op sums
    (column ``sums`` 2; 1 for the predicted ones)."""
    return params[0] + params[1] * rows[:, 0] + params[2] * rows[:, sums] + params[3] * rows[:, 5]


def _report(label: str, group: Mapping[str, Any], overhead: Sequence[float],
            floor: Mapping[str, Any] | None = None) -> None:
    from edgeplan.measure.metrics import mape

    a = group["rows"]
    e2e = a[:, 4] / a[:, 3]
    q1, q3 = np.percentile(e2e, [25, 75])
    oracle = mape(list(np.maximum(a[:, 2] + _overhead(overhead, a), 0.5 * a[:, 2])), list(a[:, 3]))
    beside = f" (noise floor {floor['mape']:.2f}% over {floor['models']} models)" if floor else ""
    print(f"  {label} ({len(a)}): end-to-end MAPE {mape(list(a[:, 4]), list(a[:, 3])):.2f}%{beside}, with the ops "
          f"as measured {oracle:.2f}%; predicted / measured end to end median {np.median(e2e):.3f}x (quartiles "
          f"{q1:.3f}-{q3:.3f}x); op sums {np.median(a[:, 1] / a[:, 2]):.3f}x")
    m1, mm, m3 = np.percentile(a[:, 2] / a[:, 3], [25, 50, 75])
    print(f"    measured op sum / measured end to end: median {mm:.3f}x (quartiles {m1:.3f}-{m3:.3f}x)")
    total = sum(group["true_cat"].values())
    cats = sorted(group["true_cat"], key=lambda c: -group["true_cat"][c])
    print("    per category, summed predicted / measured (share of the measured op time): " + ", ".join(
        f"{c} {group['pred_cat'][c] / group['true_cat'][c]:.2f}x ({100 * group['true_cat'][c] / total:.0f}%)"
        for c in cats if group["true_cat"][c] > 0))


def _same_features(trained: Sequence[Mapping[str, Any]], zoo: Sequence[Mapping[str, Any]], statistic: str) -> None:
    """Print, per op key, how the zoo's ops compare with the training networks' ops of identical features."""
    from edgeplan.costmodels.opwise.ops import record_ops

    seen: dict[tuple[str, tuple[float, ...]], list[float]] = defaultdict(list)
    for r in trained:
        for o in record_ops(r, statistic):
            if o.measured_ms:
                seen[(o.key, tuple(o.x))].append(o.measured_ms)
    ratios: dict[str, list[float]] = defaultdict(list)
    for r in zoo:
        for o in record_ops(r, statistic):
            k = (o.key, tuple(o.x))
            if o.measured_ms and k in seen:
                ratios[o.key].append(o.measured_ms / float(np.median(seen[k])))
    if not ratios:
        print("  no zoo op has the features of a training network's op")
        return
    print("  zoo ops with a training op's exact features, zoo time / training time (median, quartiles):")
    for key in sorted(ratios, key=lambda k: -len(ratios[k]))[:10]:
        q1, q2, q3 = np.percentile(ratios[key], [25, 50, 75])
        print(f"    {key:<36} {len(ratios[key]):>5} ops  {q2:.3f}x ({q1:.3f}-{q3:.3f}x)")


def _reference_beside(ref: Mapping[str, Any] | None, synthetic: Sequence[Mapping[str, Any]],
                      zoo: Sequence[Mapping[str, Any]]) -> None:
    """Print the reference's median time beside the synthetic networks and beside the zoo CNNs, by size."""
    if not ref or not synthetic or not zoo or "raw_latency_ms" not in zoo[0]:
        return

    def beside(rs: Sequence[Mapping[str, Any]]) -> str:
        return f"{np.median([r['raw_latency_ms'] * float(ref['ms']) / r['latency_ms'] for r in rs]):.2f} ms"

    big = [r for r in zoo if r["raw_latency_ms"] > 200]
    print(f"reference {ref['model']} beside the synthetic networks {beside(synthetic)}, beside the zoo CNNs "
          f"{beside(zoo)}" + (f" ({beside(big)} beside the {len(big)} over 200 ms)" if big else ""))


def _fitted_profile(device: str, method: str, records: Sequence[Mapping[str, Any]]) -> tuple[Any, set[str], list[Any]]:
    """``device``'s fitted ``method`` model, the names of its training networks, and those of ``records``."""
    from edgeplan.costmodels.opwise.model import LatencyModel
    from edgeplan.costmodels.opwise.profiles import load_device_model

    model = load_device_model(device, method)
    if not isinstance(model, LatencyModel):
        raise SystemExit(f"{device} is a calibrated device, not a fitted profile")
    names = set(model.info.get("train_models") or [])
    return model, names, [r for r in records if r["model"] in names]


def _graph_report(device: str, method: str, zoo: Sequence[Mapping[str, Any]], statistic: str,
                  floor: Mapping[str, Any] | None, n_worst: int) -> None:
    """Print the zoo CNNs' MAPE as ``edgeplan predict`` gives it: each predicted from its graph on ``device``."""
    from edgeplan.costmodels.opwise.ops import record_latency
    from edgeplan.decisions.predict import predict_models
    from edgeplan.measure.metrics import mape

    preds = predict_models([str(r["model"]) for r in zoo], device=device, method=method, progress=True)
    incomplete = [p.model for p in preds if p.prediction.unpredicted]
    true = [record_latency(r, statistic) for r in zoo]
    pred = [p.prediction.latency_ms for p in preds]
    ratio = np.array(pred) / np.array(true)
    q1, q2, q3 = np.percentile(ratio, [25, 50, 75])
    beside = f" (noise floor {floor['mape']:.2f}% over {floor['models']} models)" if floor else ""
    print(f"  zoo CNNs from their graphs, as `edgeplan predict --device {device}` ({len(zoo)}): end-to-end MAPE "
          f"{mape(pred, true):.2f}%{beside}; predicted / measured median {q2:.3f}x (quartiles {q1:.3f}-{q3:.3f}x); "
          f"{len(incomplete)} with unpredicted ops" + (f" ({', '.join(incomplete)})" if incomplete else ""))
    for i in np.argsort(-np.abs(np.log(ratio)), kind="stable")[:n_worst]:
        print(f"    {zoo[i]['model']:<36} {true[i]:8.2f} ms  predicted {ratio[i]:.3f}x")


def main(argv: list[str] | None = None) -> int:
    """Print the bias figures of each method's model."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scenario", default="torch-fp32-2t")
    parser.add_argument("--method", action="append", dest="methods")
    parser.add_argument("--data", type=Path, help="fit on this dataset file's training networks instead")
    parser.add_argument("--device", help="with --data: evaluate this fitted device profile on it, fitting nothing")
    parser.add_argument("--repeat-data", type=Path, help="the same models measured again: noise floors beside")
    parser.add_argument("--graph", action="store_true",
                        help="with --device: also predict the zoo CNNs from their graphs, as `edgeplan predict`")
    parser.add_argument("--with-spaces", action="store_true",
                        help="with --data: train on edgeplan's synthetic spaces too")
    parser.add_argument("--space", action="append", dest="spaces", metavar="FAMILY",
                        help="with --with-spaces: only this space (e.g. synthetic-heads); repeat for several")
    parser.add_argument("--statistic", default="median", choices=("median", "min"), help="with --data")
    parser.add_argument("--same-models-as", type=Path, help="with --data: only the models this dataset also holds")
    parser.add_argument("--implementations", action="store_true",
                        help="with --data: predictors per implementation the runtime selects (oneDNN or native)")
    parser.add_argument("--worst", type=int, default=0, metavar="N",
                        help="list the N zoo CNNs predicted furthest from their measured time")
    parser.add_argument("--no-context", action="store_true",
                        help="with --data: fit on each op's own features alone, as li2023 (before 2026-11-28, the "
                             "only way)")
    args = parser.parse_args(argv)
    from edgeplan.costmodels.opwise.estimator import OpLatencyEstimator
    from edgeplan.costmodels.opwise.model_files import scenario_threads
    from edgeplan.costmodels.opwise.overhead import OVERHEAD_FORMS, fit_overhead
    from edgeplan.measure.metrics import mape
    from edgeplan.measure.op_dataset import load_dataset
    from experiments.li2023 import _spaces, _split, dataset_path, group_floor, noise_floor

    if args.with_spaces and args.data is None:
        parser.error("--with-spaces fits on a --data file's networks; give --data")
    if args.spaces and not args.with_spaces:
        parser.error("--space picks among --with-spaces's spaces; give --with-spaces")
    if args.same_models_as is not None and args.data is None:
        parser.error("--same-models-as cuts a --data file; give --data")
    if args.implementations and args.data is None:
        parser.error("--implementations fits on a --data file's networks; give --data")
    if args.device is not None and (args.data is None or args.with_spaces or args.implementations):
        parser.error("--device evaluates a fitted profile on a --data file, without --with-spaces or "
                     "--implementations (it fits nothing)")
    if args.graph and args.device is None:
        parser.error("--graph predicts the zoo CNNs on a --device profile; give --device")
    need(args.data or dataset_path(args.scenario))
    print(machine(), flush=True)
    data = load_dataset(args.data or dataset_path(args.scenario))
    if args.same_models_as is not None:
        kept = set(load_dataset(args.same_models_as).models())
        data = dataclasses.replace(data, records=[r for r in data.records if r["model"] in kept])
    train, test, zoo = _split(data)
    _reference_beside(data.provenance.get("reference"), train + test, zoo)
    floor = noise_floor(data, load_dataset(args.repeat_data), args.statistic) if args.repeat_data else None
    floors = {"synthetic test": group_floor(floor, "synthetic"), "zoo CNNs": group_floor(floor, "zoo")}
    if args.with_spaces:
        spaces = _spaces(data)
        unknown = sorted(set(args.spaces or ()) - set(spaces))
        if unknown:
            parser.error(f"{args.data} holds no network of {', '.join(unknown)}; it holds "
                         f"{', '.join(spaces) or 'none'}")
        train = train + [r for f, rs in spaces.items() if not args.spaces or f in args.spaces for r in rs]
    where = (f"{args.data} ({data.provenance.get('device', {}).get('cpu_model', '?')}), fitted on {len(train)} "
             "training networks" + (" per implementation" if args.implementations else "")
             + (", own features" if args.no_context else ", with context features")
             if args.data else f"{args.scenario}, shipped models")
    for method in args.methods or ["gbdt", "lasso"]:
        if args.device is not None:
            model, names, trained = _fitted_profile(args.device, method, data.records)
            zoo_names = {r["model"] for r in zoo}
            test = [r for r in data.records if r["model"] not in names and r["model"] not in zoo_names]
            zoo = [r for r in zoo if r["model"] not in names]
            where = (f"device profile {args.device} ({len(names)} training networks) on {args.data} "
                     f"({data.provenance.get('device', {}).get('cpu_model', '?')})")
        elif args.data is not None:
            threads = scenario_threads(data.scenario) if args.implementations else None
            est = OpLatencyEstimator(method=method, scenario=data.scenario, statistic=args.statistic,
                                     threads=threads, context=not args.no_context)
            model = est.fit(train, progress=True).model_
            trained = train
        else:
            model, _, trained = _fitted_profile(args.scenario, method, data.records)
        if not zoo and not (args.data is not None and test):
            print(f"{where} {method}: no zoo CNNs and no synthetic test networks in the dataset")
            continue
        learnt = (model.overhead_ms, model.overhead_per_op_ms, model.overhead_share, model.overhead_per_mparam_ms)
        print(f"{where}: {method} ({model.statistic}), overhead {model.overhead_ms:.3f} ms + "
              f"{1000 * model.overhead_per_op_ms:.2f} us per op + {100 * model.overhead_share:.2f}% of the op sum + "
              f"{model.overhead_per_mparam_ms:.4f} ms per million parameters")
        groups = {"zoo CNNs": _group_rows(model, zoo)} if zoo else {}
        if args.data is not None and test:
            groups = {"synthetic test": _group_rows(model, test), **groups}
        for label, group in groups.items():
            _report(label, group, learnt, floors[label])
        if args.worst > 0 and zoo:
            print(f"  the {args.worst} zoo CNNs predicted furthest from their measured time:")
            print("\n".join(worst(groups["zoo CNNs"], args.worst)))
        if args.graph and zoo:
            _graph_report(args.device, method, zoo, model.statistic, floors["zoo CNNs"], args.worst)
        if len(trained) < 2:
            print("  (the model records no training networks of this dataset: no per-op overhead fit)")
            continue
        if zoo:
            _same_features(trained, zoo, model.statistic)
        t = _group_rows(model, trained)["rows"]  # the training networks: op count, sums, end to end
        for form in OVERHEAD_FORMS:  # both overheads on the same op predictions
            params = fit_overhead(t[:, 3], t[:, 1 if form == "stacked" else 2], t[:, 0], form, t[:, 5])
            scores = []
            for label, group in groups.items():
                a = group["rows"]
                total = np.maximum(a[:, 1] + _overhead(params, a, sums=1), 0.5 * a[:, 1])  # on predicted sums
                scores.append(f"{label} MAPE {mape(list(total), list(a[:, 3])):.2f}%")
            print(f"  overhead {form:<6} {', '.join(scores)}  ({params[0]:.3f} ms + {1000 * params[1]:.2f} us per op "
                  f"+ {100 * params[2]:.2f}% of the op sum + {params[3]:.4f} ms per million parameters, from {len(t)} "
                  "training networks)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
