"""Models whose kernels a CNN-trained device profile lacks: what its predictors miss, and what extending them recovers.

The shipped latency models of a scenario are fitted on synthetic CNNs (li2023's space). A vision transformer's
attention has no predictor there (reported unpredicted, by name), and its layer norms, GELUs, softmaxes and
linear layers over tokens are priced by the predictor of their category (element-wise, convolution), trained on
other kernels; so are the nearest upsamplings of HRNet and GhostNetV2 (element-wise). ``LatencyModel.extended``
adds predictors for the operation kinds a model lacks, fitted on measured models, and keeps every predictor it
had.

On the non-synthetic models of a dataset (default ``data/latency/torch-fp32-1t.transformers.jsonl.xz``), grouped
k-fold over the models (``--folds``; every model held out once), or one model family held out at a time
(``--by-family``: the family is the model's name up to its first ``_``, so that no variant of a held-out network is
trained on), for each method. Models given to ``--always-train`` (``synthetic-nf:0-19``, say: the
normalization-free synthetic networks, when the real NFNets are the ones held out) are in every fold's training
models and never held out:

- **base**: the scenario's model without its extensions (the synthetic-CNN predictors alone), or with its first
  ``--keep-extensions`` (the transformers' kept, when the upsampling networks are the next one): the models it
  predicts whole, and, over all of them, the error of its summed predictions for the ops it does cover against
  those ops' measured times;
- **extended**: the base extended with the other folds' models: end-to-end MAPE over the held-out models (the
  end-to-end time includes any work eager PyTorch runs that the IR folds away, which no op predicts).

Also, where the scenario's model has more extensions than the base, the side effect of the later ones on the
real-world CNNs of the scenario's dataset in ``data/latency`` (which they were not fitted on): their MAPE with and
without them.

Prints the figures per model and the means. It fits only the added kinds' predictors per fold (a few
seconds each with Lasso, a minute or so with GBDT on one thread).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np
from _data import DATA, need
from _machine import machine


def covered_error(model: Any, record: dict[str, Any]) -> tuple[float, float, int, Any]:
    """(predicted sum, measured sum) over the ops ``model`` predicts in ``record``, how many it does not, and the
    prediction itself."""
    from edgeplan.costmodels.opwise.ops import record_ops

    ops = record_ops(record, model.statistic)
    prediction = model.predict_ops(ops)
    done = [(q.ms, o.measured_ms or 0.0) for o, q in zip(ops, prediction.ops, strict=True) if q.ms is not None]
    return sum(p for p, _ in done), sum(m for _, m in done), len(ops) - len(done), prediction


def family(model: str) -> str:
    """A zoo model's family: its name up to the first ``_`` (``timm:hrnet_w18_small`` -> ``timm:hrnet``)."""
    return model.split("_", 1)[0]


def held_out_folds(models: list[str], order: np.ndarray, k: int, *, by_family: bool) -> list[np.ndarray]:
    """The indices of ``models`` each fold holds out: ``k`` folds along ``order`` (a permutation), or one per
    family (in the order the families first appear in ``models``)."""
    if not by_family:
        return [order[i::k] for i in range(k)]
    families = [family(m) for m in models]
    return [np.array([i for i in order if families[i] == f]) for f in dict.fromkeys(families)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA / "latency" / "torch-fp32-1t.transformers.jsonl.xz")
    parser.add_argument("--device", default=None, help="The scenario's model (default: the dataset's scenario).")
    parser.add_argument("--methods", nargs="+", default=["lasso", "gbdt"])
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cnn-data", type=Path, default=None,
                        help="The dataset whose real-world CNNs show the extension's side effect (default: the "
                             "scenario's shipped one; give the profile's own machine's, e.g. the Zen 5 file)")
    parser.add_argument("--keep-extensions", type=int, default=0,
                        help="The base keeps the shipped model's first N extensions (default 0: none)")
    parser.add_argument("--by-family", action="store_true",
                        help="Hold out one model family at a time (the name up to its first '_') instead of k-fold")
    parser.add_argument("--always-train", nargs="+", default=[], metavar="MODEL",
                        help="Models (ranges such as synthetic-nf:0-19 allowed) in every fold's training models, "
                             "never held out")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from edgeplan.costmodels.opwise.ops import record_latency, record_ops
    from edgeplan.costmodels.opwise.profiles import load_device_model
    from edgeplan.measure.metrics import mape
    from edgeplan.measure.model_sets import expand_models
    from edgeplan.measure.op_dataset import load_dataset

    print(machine(args.threads))
    need(args.data)
    data = load_dataset(args.data)
    cnn = set(expand_models(["synthetic:0-1099"]))
    always = set(expand_models(args.always_train)) if args.always_train else set()
    missing = sorted(always - {r["model"] for r in data.records})
    if missing:
        print(f"error: --always-train: {len(missing)} model(s) not in {args.data}: {', '.join(missing[:5])}; give "
              "models the dataset holds", file=sys.stderr)
        return 2
    fixed = [r for r in data.records if r["model"] in always]
    records = [r for r in data.records if r["model"] not in cnn and r["model"] not in always]
    device = args.device or data.scenario
    kept = f"with its first {args.keep_extensions} extension(s)" if args.keep_extensions else "without its extensions"
    split = "one family held out at a time" if args.by_family else f"{args.folds}-fold over the models"
    print(f"{args.data.name}: {len(records)} models of {data.scenario} beside the synthetic CNNs (of "
          f"{len(data.records)} models); base: the shipped {device} models {kept}; {split}"
          + (f"; {len(fixed)} more in every fold's training models" if fixed else ""))
    from experiments.li2023 import REAL_WORLD, dataset_path

    zoo_file = args.cnn_data or dataset_path(data.scenario)
    cnn_zoo = ([r for r in load_dataset(zoo_file).records if r["model"].split(":", 1)[0] in REAL_WORLD]
               if zoo_file.is_file() else [])
    order = np.random.default_rng(args.seed).permutation(len(records))
    folds = held_out_folds([r["model"] for r in records], order, args.folds, by_family=args.by_family)
    for method in args.methods:
        shipped = load_device_model(device, method)
        base = shipped.without_extensions(keep=args.keep_extensions) if shipped.info.get("extensions") else shipped
        rows: dict[str, dict[str, Any]] = {}
        kinds: dict[str, list[Any]] = {}  # kind -> measured, base and extended sums over held-out ops, their count
        for k, held in enumerate(folds):
            out = set(held)
            train = [records[i] for i in order if i not in out] + fixed
            extended = base.extended(train, seed=args.seed)
            added = {key.rsplit("|", 1)[0] for key in set(extended.predictors) - set(base.predictors)}
            for i in held:
                r = records[i]
                true = record_latency(r, base.statistic)
                pred, meas, missing, prediction = covered_error(base, r)
                ext = extended.predict_record(r)
                rows[r["model"]] = {"true": true, "base_cover": (pred, meas), "base_missing": missing,
                                    "base_whole": prediction.latency_ms if missing == 0 else None,
                                    "extended": ext.latency_ms, "ext_missing": len(ext.unpredicted)}
                for o, b, e in zip(record_ops(r, base.statistic), prediction.ops, ext.ops, strict=True):
                    if o.kind in added:  # the held-out ops of a kind this fold's extension priced on its own
                        sums = kinds.setdefault(o.kind, [0.0, 0.0, 0.0, 0])
                        sums[0] += o.measured_ms or 0.0
                        sums[1] += b.ms or 0.0
                        sums[2] += e.ms or 0.0
                        sums[3] += 1
            print(f"  {method} fold {k + 1}/{len(folds)}: {len(train)} training models, "
                  f"{len(extended.predictors) - len(base.predictors)} kinds added", flush=True)
        print(f"\n{method}: end-to-end {base.statistic} latency, ms")
        print(f"{'model':<44} {'measured':>9} {'base: covered ops':>22} {'missing':>8} {'extended':>9} {'error':>8}")
        for name, row in rows.items():
            p, m = row["base_cover"]
            err = 100 * (row["extended"] - row["true"]) / row["true"]
            print(f"{name:<44} {row['true']:9.2f} {p:10.2f} of {m:8.2f} {row['base_missing']:>8} "
                  f"{row['extended']:9.2f} {err:+7.1f}%")
        truth = [r["true"] for r in rows.values()]
        cover = mape([r["base_cover"][0] for r in rows.values()], [r["base_cover"][1] for r in rows.values()])
        whole = [(r["base_whole"], r["true"]) for r in rows.values() if r["base_whole"] is not None]
        print(f"{method}: base predicts {len(whole)} of {len(rows)} models whole"
              + (f" (MAPE {mape(*zip(*whole, strict=True)):.2f}%)" if whole else "")
              + f"; its covered ops' sums are off by a MAPE of {cover:.2f}% (median ratio predicted/measured "
              f"{np.median([r['base_cover'][0] / r['base_cover'][1] for r in rows.values()]):.3f})")
        for kind, (meas, was, now, n) in sorted(kinds.items(), key=lambda kv: -kv[1][0]):
            print(f"{method}: {kind}, {n} held-out ops: predicted / measured sum {was / meas:.3f} by the base "
                  f"(a stand-in or none), {now / meas:.3f} by its own predictor fitted on the other folds")
        unpredicted = sum(r["ext_missing"] for r in rows.values())
        print(f"{method}: extended, end-to-end MAPE {mape([r['extended'] for r in rows.values()], truth):.2f}% over "
              f"{len(rows)} held-out models (median ratio predicted/measured "
              f"{np.median([r['extended'] / r['true'] for r in rows.values()]):.3f}; ops still unpredicted: "
              f"{unpredicted})")
        if len(shipped.predictors) > len(base.predictors) and cnn_zoo:  # the later extensions' side effect on the
            # CNNs they were not fitted on
            truth = [record_latency(r, base.statistic) for r in cnn_zoo]
            before = [base.predict_record(r).latency_ms for r in cnn_zoo]
            after = [shipped.predict_record(r).latency_ms for r in cnn_zoo]
            changed = sum(abs(a - b) > 1e-9 * b for a, b in zip(after, before, strict=True))
            print(f"{method}: the shipped {device} model (extended with all {len(records) + len(fixed)}) on the "
                  f"{len(cnn_zoo)} real-world CNNs of {zoo_file.name}: MAPE {mape(before, truth):.2f}% as the base, "
                  f"{mape(after, truth):.2f}% as shipped ({changed} predictions changed)")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
