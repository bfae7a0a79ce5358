"""Few-shot calibration of a shipped latency profile to *this* machine, measured here (li2023 §5.5 / HELP, own CPU).

The shipped profiles were measured on one machine (their datasets' provenance names its CPU); users run edgeplan on
others. This benchmark measures a pool of models **here** in the source profile's scenario (``--source``, default
``torch-fp32-1t``) with ``edgeplan profile ops`` beside the reference model ``synthetic:0`` (each model's time
kept relative to the reference's, measured alternately with it, so that the machine's drift cancels), and a
subset of them again in an independent campaign (``--repeat-models``) for the noise floor. It then scores what
``edgeplan calibrate`` does for a user (:func:`experiments.li2023.fewshot_measured`, also ``python -m
experiments.li2023 --fewshot FILE``): the source calibrated from ``--samples`` (default 10) measured
models, every other model predicted; ``--seeds`` random draws from the whole pool, from the synthetic networks only
and from the real-world ones only; the calibration's own choice of correction beside the single factor and the
source as is.
The samples' operations were measured too, so the ``per-op`` correction
(:mod:`edgeplan.costmodels.opwise.op_correction`) is a candidate, as for ``edgeplan calibrate --measure``, and is
also scored on its own.

The campaigns live in the Store under ``--home`` (default ``campaigns/calibrate_here``; a run resumes where the last
stopped) and are exported to ``main.jsonl.xz`` / ``again.jsonl.xz`` there. ``--measured DIR`` scores the exported
files of an earlier run (say on another machine) without measuring; the repository's ``data/latency/fewshot`` holds
three, an Intel Xeon's (their provenance says so), one per scenario: ``torch-fp32-1t`` (:data:`SHIPPED`),
``ort-fp32-1t`` (with ``--source ort-fp32-1t``) and ``torch-fp32-2t`` (with ``--source torch-fp32-2t``): the main
campaign's dataset, and the repeat's end-to-end times as ``again.csv``.
Pin it to one core for a 1-thread source and leave the other idle: ``taskset -c 0 python
benchmarks/bench_calibrate_latency.py``. Scoring exports every model to ONNX for an ORT source: RegNetY-128GF takes
some 12 GB of memory there.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _data import DATA, need
from _machine import machine

DEFAULT_POOL = ("synthetic:900-999", "set:torchvision-cnns", "set:timm-cnns", "set:timm-transformers")
DEFAULT_REPEAT = ("synthetic:900-999", "set:torchvision-cnns")
#: An Intel Xeon's measurements of the default pool (the shipped profiles' data are an AMD EPYC's), with provenance.
SHIPPED = DATA / "latency" / "fewshot" / "torch-fp32-1t"


def campaign(home: Path, source: str, models: list[str], repeat: str, budget_s: float) -> None:
    """``edgeplan profile ops`` of ``models`` beside ``synthetic:0`` (resumable), with its export."""
    edgeplan = [sys.executable, "-m", "edgeplan", "--home", str(home)]
    tag = ["--repeat", repeat] if repeat else []
    out = home / f"{repeat or 'main'}.jsonl.xz"
    done = subprocess.run([*edgeplan, "profile", "ops", *models, "--scenario", source, "--reference", "synthetic:0",
                           "--runs", "8", "--budget-s", str(budget_s), *tag, "--export", str(out)])
    if done.returncode:  # the campaign named the models it could not measure; the rest are exported and scored
        print(f"note: the {repeat or 'main'} campaign did not measure every model (above); scoring the others",
              file=sys.stderr)
    if not out.is_file():
        sys.exit(f"{out} was not written (above)")


def main() -> int:
    """Measure (unless ``--measured``), then score the few-shot calibration; print the figures and the machine."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=list(DEFAULT_POOL), help="the pool (zoo strings, ranges, sets)")
    ap.add_argument("--repeat-models", nargs="+", default=list(DEFAULT_REPEAT),
                    help="measured again for the noise floor")
    ap.add_argument("--source", default="torch-fp32-1t", help="the shipped profile calibrated (its scenario is run)")
    ap.add_argument("--methods", nargs="+", default=["lasso", "gbdt"], choices=["lasso", "gbdt", "rf", "mlp"])
    ap.add_argument("--samples", type=int, default=10)
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--budget", type=float, default=5400.0, help="seconds of measuring per campaign (resumable)")
    ap.add_argument("--home", type=Path, default=Path("campaigns/calibrate_here"))
    ap.add_argument("--measured", type=Path, default=None,
                    help="score main.jsonl.xz (and again.jsonl.xz or again.csv) of this folder; measure nothing "
                         f"(shipped: {SHIPPED})")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    from edgeplan.costmodels.opwise.ops import record_latency
    from edgeplan.costmodels.opwise.profiles import load_device_model
    from edgeplan.errors import InvalidInputError
    from edgeplan.measure.op_dataset import load_dataset
    from experiments.li2023 import (
        dataset_path,
        fewshot_measured,
        format_fewshot_measured,
        measured_latencies,
        speedup_insight,
    )

    folder = args.measured or args.home
    if args.measured is not None:
        need(args.measured / "main.jsonl.xz")
    if args.measured is None:
        t0 = time.perf_counter()
        campaign(args.home, args.source, args.models, "", args.budget)
        if args.repeat_models:
            campaign(args.home, args.source, args.repeat_models, "again", args.budget)
        print(f"measured in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    main_file = folder / "main.jsonl.xz"
    again_file = next((f for f in (folder / "again.jsonl.xz", folder / "again.csv") if f.exists()), None)
    data = load_dataset(main_file)  # read once: its provenance, latencies and measured operations
    records = {r["model"]: r for r in data.records}
    first = [(m, float(record_latency(r))) for m, r in records.items()]
    again = measured_latencies(again_file) if again_file is not None else None
    results = []
    for method in args.methods:
        source = load_device_model(args.source, method)
        results.append(fewshot_measured(source, args.source, first, again, samples=args.samples, seeds=args.seeds,
                                        progress=not args.json, records=records))
    need(dataset_path(args.source))
    source_data = load_dataset(dataset_path(args.source))
    shipped, here = source_data.provenance["device"], data.provenance["device"]
    try:  # per op category, over the models both measured
        speedup: dict[str, Any] | None = speedup_insight(source_data, data, "median")
    except InvalidInputError:  # none in common
        speedup = None
    if args.json:
        print(json.dumps({"source_measured_on": shipped, "measured_on": here, "results": results,
                          "speedup_per_category": speedup}, indent=2))
        return 0
    print(f"source {args.source}: measured on {shipped['cpu_model']} ({shipped['runtime']} "
          f"{shipped['runtime_version']}); target: {here['cpu_model']} ({here['runtime']} {here['runtime_version']}), "
          f"{data.provenance.get('measured_from')} .. "
          f"{data.provenance.get('measured_to')}, beside {data.provenance.get('reference', {}).get('model')}")
    for r in results:
        print("\n".join(format_fewshot_measured(r)))
    if speedup is not None:
        q = speedup["end_to_end"]
        print(f"why one factor is not enough: speed-up from the source's machine to this one over the "
              f"{speedup['models']} models both measured, end to end median {q[1]:.2f}x [{q[0]:.2f}, {q[2]:.2f}]; "
              "per op category (summed time, share of the source's op time):")
        for cat, c in speedup["categories"].items():
            if c["speedup"] is not None and c["share"] >= 0.005:
                print(f"  {cat:<16} {c['speedup']:.2f}x  ({100 * c['share']:.1f}% of the time, {c['models']} models)")
    print(f"machine: {machine()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
