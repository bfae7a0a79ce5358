"""Coverage of `inspect`: every torchvision classification model, and the timm models of the sets `timm-cnns` and
`timm-transformers`; with `--only timm-families`, one model of each of timm's model modules instead (the long tail:
every architecture family the pinned timm ships, its smallest-named variant, so ~100 models).

Prints, per model, whether it imports to a validated IR graph (and its MACs, nodes, import time) or why not,
then the totals. With ``--predict DEVICE``, each imported model is also priced by that device profile (GBDT), and
the report says how much of it the profile prices with predictors of its own: per model the unpredicted ops and the
ops priced by a stand-in (a kernel without a predictor of its own, priced by its category's), then the kernels
that most often lack one, by models and by their share of the predicted time. Usage:
python benchmarks/bench_coverage.py [--json OUT] [--only torchvision|timm|timm-transformers|timm-families] [--limit N]
    [--predict DEVICE]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

from _machine import machine

if TYPE_CHECKING:
    from edgeplan.ir.graph import Graph


def timm_names(name: str) -> list[str]:
    from edgeplan.measure.model_sets import model_set

    return model_set(name)


def timm_families() -> list[str]:
    """One timm model per model module (architecture family): the first of its names by a preference for small
    variants (atto, femto, ..., tiny, small, b0, 50), then by length; ImageNet-22k and CLIP variants left out."""
    from timm.models import _registry

    prefer = ["atto", "femto", "pico", "nano", "xxtiny", "xxs", "tiny", "xs", "small", "s0", "b0", "_18", "_26", "50"]

    def rank(name: str) -> tuple[int, int]:
        return next(((i, len(name)) for i, p in enumerate(prefer) if p in name), (len(prefer), len(name)))

    out = []
    for _, names in sorted(_registry._module_to_models.items()):
        kept = sorted(n for n in names if "in22k" not in n and "clip" not in n)
        if kept:
            out.append(f"timm:{min(kept, key=rank)}")
    return out


def _priced(spec: str, device: str, graph: Graph | None = None) -> dict[str, object]:
    """How ``device`` prices ``spec``: the latency, the unpredicted ops' kernels and the stand-ins (kernel, count,
    predicted ms), or the error that stopped the prediction. ``graph``, the model's graph when already imported,
    is priced as it is on a device whose runtime edgeplan deduces from the graph (not imported again)."""
    from edgeplan.costmodels.opwise.graph_ops import ORT_OBSERVED, predict_graph
    from edgeplan.costmodels.opwise.profiles import kernel_profile_of, load_device_model, resolve_method
    from edgeplan.decisions.predict import ModelPrediction, predict

    try:
        method = resolve_method(device, None)
        model = load_device_model(device, method)
        profile = kernel_profile_of(model)
        if graph is not None and profile not in ORT_OBSERVED:
            p = ModelPrediction(spec, device, method, predict_graph(graph, model, profile))
        else:
            p = predict(spec, device=device, opaque=True)
    except Exception as e:  # noqa: BLE001 - reported by name and reason
        return {"predict_error": f"{type(e).__name__}: {str(e)[:300]}"}
    unpredicted = Counter(o.kind for o in p.prediction.ops if o.ms is None)
    return {"latency_ms": p.prediction.latency_ms, "ops": len(p.prediction.ops),
            "unpredicted": dict(unpredicted), "stand_ins": p.stand_ins()}


def _priced_status(row: dict) -> str:
    if "predict_error" in row:
        return "PREDICT FAIL " + row["predict_error"]
    stand = sum(s["ms"] for s in row["stand_ins"])
    share = stand / row["latency_ms"] if row["latency_ms"] else 0.0
    return (f"{row['latency_ms']:9.2f} ms, {sum(row['unpredicted'].values())} unpredicted, "
            f"{sum(s['count'] for s in row['stand_ins'])} by stand-ins ({100 * share:.1f}% of the time)")


def _coverage_summary(rows: list[dict], device: str) -> None:
    """The models fully priced by predictors of their own, and the kernels that most often lack one."""
    priced = [r for r in rows if "predict_error" not in r]
    print(f"\npriced by {device}: {len(priced)}/{len(rows)} imported models "
          f"({len(rows) - len(priced)} failed to predict)")
    full = [r for r in priced if not r["unpredicted"] and not r["stand_ins"]]
    print(f"  every op by a predictor of its own: {len(full)}/{len(priced)}")
    print(f"  with unpredicted ops: {sum(bool(r['unpredicted']) for r in priced)}/{len(priced)}")
    shares = sorted(sum(s["ms"] for s in r["stand_ins"]) / r["latency_ms"] for r in priced if r["latency_ms"])
    if shares:
        print(f"  share of the predicted time priced by stand-ins: median {100 * statistics.median(shares):.1f}%, "
              f"max {100 * shares[-1]:.1f}%, over 10% in {sum(s > 0.1 for s in shares)} models")
    models: Counter[str] = Counter()
    ms_share: dict[str, float] = defaultdict(float)
    for r in priced:
        for s in r["stand_ins"]:
            kernel = f"{s['kernel']} (stand-in {s['predictor']})"
            models[kernel] += 1
            ms_share[kernel] += s["ms"] / r["latency_ms"] if r["latency_ms"] else 0.0
        for kernel in r["unpredicted"]:
            models[f"{kernel} (unpredicted)"] += 1
    if models:
        print("  kernels without a predictor of their own (models using them; summed share of those models' time):")
        for kernel, n in models.most_common(25):
            print(f"    {n:3d} models  {100 * ms_share[kernel]:7.1f}%  {kernel}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", default=None)
    parser.add_argument("--only", choices=["torchvision", "timm", "timm-transformers", "timm-families"], default=None)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--predict", default=None, metavar="DEVICE",
                        help="also price every imported model with this device profile and report its coverage")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(2)
    from edgeplan.frontends.zoo import load_graph, torchvision_names

    specs: list[str] = []
    if args.only in (None, "torchvision"):
        specs += [f"torchvision:{n}" for n in torchvision_names()]
    if args.only in (None, "timm"):
        specs += timm_names("timm-cnns")
    if args.only in (None, "timm-transformers"):
        specs += timm_names("timm-transformers")
    if args.only == "timm-families":
        specs = timm_families()
    specs = specs[: args.limit] if args.limit else specs
    rows = []
    for i, spec in enumerate(specs, 1):
        start = time.perf_counter()
        try:
            g = load_graph(spec)
            t = g.totals()
            row = {"model": spec, "ok": True, "nodes": t.nodes, "macs": t.macs, "params": t.params}
        except Exception as e:  # noqa: BLE001 - the benchmark reports every failure by name and reason
            g, row = None, {"model": spec, "ok": False, "error": f"{type(e).__name__}: {str(e)[:300]}"}
        row["seconds"] = round(time.perf_counter() - start, 2)  # the import's time, not the prediction's
        if row["ok"] and args.predict:
            row.update(_priced(spec, args.predict, g))
        rows.append(row)
        status = f"ok  {row['macs'] / 1e9:8.3f} GMACs {row['nodes']:5d} nodes" if row["ok"] else "FAIL " + row["error"]
        if row["ok"] and args.predict:
            status += "  " + _priced_status(row)
        print(f"[{i:3d}/{len(specs)}] {spec:45s} {row['seconds']:6.1f}s {status}", flush=True)
        gc.collect()
    transformers = set(timm_names("timm-transformers"))
    groups = [("timm families", rows)] if args.only == "timm-families" else [
        ("torchvision", [r for r in rows if r["model"].startswith("torchvision:")]),
        ("timm CNNs", [r for r in rows if r["model"].startswith("timm:") and r["model"] not in transformers]),
        ("timm transformers", [r for r in rows if r["model"] in transformers])]
    for family, fam in groups:
        if fam:
            ok = sum(r["ok"] for r in fam)
            print(f"{family}: {ok}/{len(fam)} import")
    reasons = Counter(r["error"].split(":")[0] + ": " + r["error"].split("'")[1] if "'" in r["error"] else r["error"]
                      for r in rows if not r["ok"])
    for reason, n in reasons.most_common():
        print(f"  {n:3d} x {reason}")
    if args.predict:
        _coverage_summary([r for r in rows if r["ok"]], args.predict)
    print(f"machine: {machine()}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
