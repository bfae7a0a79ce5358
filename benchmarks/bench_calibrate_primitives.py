"""``edgeplan primitives transfer --name NAME`` on this machine: the shipped 1-thread NN2 moved to another thread count.

The shipped performance model (``edgeplan/data/primitives/nn2_cpu_1t``, the reference machine at 1 thread) is
calibrated to ``--threads`` (default 2) from ``--samples`` layers (default 40, about 1 % of the reference dataset)
measured here with every applicable primitive, as ``edgeplan --home H profile primitives --max-configs 40 --threads 2
--export here.csv`` then ``edgeplan --home H primitives transfer --data here.csv --name NAME`` do (the measurements
go to the Store under ``--home``, so a second run reuses them). Each transfer method (the source as is, the
per-primitive factor, fine-tuning, the factor then fine-tuning) is fitted on those layers as ``primitives transfer``
fits it and scored on an *independent* table: the 73 conv layers of the six mulder2020 networks measured at 2
threads in another campaign (the repository's ``data/primitives/networks_cpu_2t.csv``):

- MdRAE per primitive on that table, median over primitives (and over the non-identity transformations);
- selection increase: each network's selection made with the model, priced with the measured table, over the
  measured optimum (mulder2020 Fig. 7/8b), per network and mean over the six;
- beside them, the table's own noise floor when ``TABLE_remeasure.csv`` lies next to it (the same layers measured
  again in an independent run; :func:`edgeplan.measure.primitive_export.noise_floor`).

Beside them: the 5-fold cross-validated scores on the measured layers that ``calibrate`` chooses by, and which
method it chose. Run it on an otherwise idle machine: two-thread timings are wrecked by a busy core.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import warnings
from pathlib import Path
from typing import Any

from _data import DATA, need
from _machine import machine

TABLE = DATA / "primitives" / "networks_cpu_2t.csv"


def score(model: Any, table: Any, structures: dict[str, Any], formats: dict[str, tuple[str, str]]) -> dict[str, Any]:
    """MdRAE on every row of ``table`` and the selection increase on each network, priced with ``table``."""
    from edgeplan.costmodels import evaluate_performance_model
    from edgeplan.errors import InvalidInputError
    from experiments.mulder2020 import network_result

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = evaluate_performance_model(model, table, "all", 0)
    increases: dict[str, float] = {}
    for name, structure in structures.items():
        try:
            increases[name] = network_result("own", name, structure, table, model, formats, repeats=1).increase_pct
        except InvalidInputError:
            increases[name] = float("inf")
    return {"mdrae_pct": 100 * result.median_primitive_mdrae, "transform_pct": 100 * result.median_transform_mdrae,
            "increases": increases, "mean_increase_pct": statistics.fmean(increases.values())}


def measure_layers(home: Path, samples: int, threads: int, seed: int, budget_s: float | None) -> tuple[Any, Any]:
    """``samples`` configurations of the zoo space measured here at ``threads`` into the Store under ``home`` (the
    campaign of ``edgeplan --home HOME profile primitives --max-configs SAMPLES --threads THREADS --seed SEED``;
    resumable): (the completely measured layers as a table, or None when the budget stopped it; the report)."""
    from edgeplan.measure.device import describe_device
    from edgeplan.measure.paths import default_store_path
    from edgeplan.measure.primitive_campaign import ConfigSelection, primitive_campaign, profile_primitives
    from edgeplan.measure.primitive_export import campaign_dataset, find_campaign
    from edgeplan.measure.store import Store

    device = describe_device("torch", threads, torch_device="cpu")
    plan = primitive_campaign(device.key, threads=threads, device="cpu",
                              selection=ConfigSelection(seed=seed, max_configs=samples))
    with Store.open(default_store_path(str(home))) as store:
        report = profile_primitives(store, plan, device, budget_s=budget_s, progress=True,
                                    command="bench_calibrate_primitives.py")
        if report.stopped_by_budget:
            return None, report
        if report.failed:
            print(f"warning: {len(report.failed)} primitive run(s) failed; calibrating from the "
                  f"{report.configs_exportable} completely measured layers", file=sys.stderr)
        return campaign_dataset(store, find_campaign(store, plan.name)), report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, default=Path("out/calibrate"), help="edgeplan home of the Store.")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--samples", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budget-s", type=float, default=None,
                        help="Stop measuring after this many seconds (run again to resume from the Store).")
    parser.add_argument("--table", type=Path, default=TABLE, help="Independent table at --threads to score on.")
    parser.add_argument("--json", type=Path, default=None, help="Also write the figures to this file.")
    args = parser.parse_args()

    from edgeplan.costmodels import load_performance_model, load_primitive_csv
    from edgeplan.costmodels.primitive_calibration import calibrate_primitives
    from edgeplan.costmodels.transfer_learning import FitOptions, hold_out, transfer_on
    from edgeplan.decisions.select import SHIPPED, SHIPPED_MODEL
    from edgeplan.decisions.selection_costs import own_formats
    from experiments.mulder2020 import structures

    print(machine(args.threads))
    source = load_performance_model(SHIPPED / SHIPPED_MODEL)
    data, report = measure_layers(args.home, args.samples, args.threads, args.seed, args.budget_s)
    if data is None:
        print(f"stopped by --budget-s after {report.elapsed_s:.0f} s ({report.remaining} configurations left); run "
              "again to resume")
        return 0
    print(f"measured {len(data)} layers at {args.threads} threads (campaign {report.campaign}, "
          f"{report.elapsed_s:.0f} s this run)")
    calib = calibrate_primitives(source, data, seed=args.seed, threads=args.threads)
    need(args.table)
    table = load_primitive_csv(args.table)
    again_path = args.table.with_name(args.table.stem + "_remeasure.csv")
    floor = None
    if again_path.is_file():
        from edgeplan.measure.primitive_export import noise_floor

        floor = noise_floor(table, load_primitive_csv(again_path))
    nets = structures(table)
    formats = own_formats()
    rows: dict[str, dict[str, Any]] = {}
    for method in calib.scores:  # each fitted on every layer as calibrate_primitives fits its choice
        options = FitOptions(args.seed, method=method, refit=False, blend=False, threads=args.threads)
        model = transfer_on(source, data, hold_out(range(len(data)), args.seed), options)
        rows[method] = {**score(model, table, nets, formats), "cv_pct": 100 * calib.scores[method]}
    print(f"\nsource {SHIPPED / SHIPPED_MODEL} (1 thread) -> {args.threads} threads from {len(data)} layers; scored on "
          f"{args.table.name} ({len(table)} layers, measured in another campaign)")
    if floor is not None:
        print(f"the table's noise floor (MdRAE between it and {again_path.name}, measured again in an independent "
              f"run): {100 * floor.median_primitive_mdrae:.2f} % over primitives, "
              f"{100 * floor.median_transform_mdrae:.2f} % over transformations")
    names = list(nets)
    print(f"{'method':<15} {'CV MdRAE %':>10} {'MdRAE %':>8} {'transf. %':>9} {'mean incr. %':>12}   "
          + " ".join(f"{n[:9]:>9}" for n in names))
    for method, r in rows.items():
        mark = " <- calibrate's choice" if method == calib.method else ""
        print(f"{method:<15} {r['cv_pct']:10.2f} {r['mdrae_pct']:8.2f} {r['transform_pct']:9.2f} "
              f"{r['mean_increase_pct']:12.2f}   " + " ".join(f"{r['increases'][n]:9.2f}" for n in names) + mark)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"threads": args.threads, "layers": len(data), "chosen": calib.method,
                                         "methods": rows, "noise_floor": floor.to_dict() if floor else None},
                                        indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
