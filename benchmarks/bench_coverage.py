"""Coverage of `inspect`: every torchvision classification model, and the timm models of the sets `timm-cnns` and
`timm-transformers`; with `--only timm-families`, one model of each of timm's model modules instead (the long tail:
every architecture family the pinned timm ships, its smallest-named variant, so ~100 models).

Prints, per model, whether it imports to a validated IR graph (and its MACs, nodes, import time) or why not,
then the totals. Usage:
python benchmarks/bench_coverage.py [--json OUT] [--only torchvision|timm|timm-transformers|timm-families] [--limit N]
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from collections import Counter
from pathlib import Path

from _machine import machine


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


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", default=None)
    parser.add_argument("--only", choices=["torchvision", "timm", "timm-transformers", "timm-families"], default=None)
    parser.add_argument("--limit", type=int, default=None)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(2)
    from edgeplan.api import load_graph
    from edgeplan.frontends.zoo import torchvision_names

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
            row = {"model": spec, "ok": False, "error": f"{type(e).__name__}: {str(e)[:300]}"}
        row["seconds"] = round(time.perf_counter() - start, 2)
        rows.append(row)
        status = f"ok  {row['macs'] / 1e9:8.3f} GMACs {row['nodes']:5d} nodes" if row["ok"] else "FAIL " + row["error"]
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
    print(f"machine: {machine()}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
