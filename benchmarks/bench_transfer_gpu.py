"""Transfer of the primitive performance model from this CPU (1 thread) to a CUDA GPU (mulder2020 §4.4, §5.3).

The source is the shipped NN2 (``edgeplan/data/primitives/nn2_cpu_1t``: the reference machine's CPU, one thread).
The target is the same primitives measured on a GPU by ``benchmarks/gpu_primitives.sh``
(``edgeplan profile primitives --torch-device cuda``): by default the tables in the repository's ``data/primitives``
(``reference_cuda.csv``: 2,703 configurations of the zoo space, 63 primitives, oneDNN's two CPU-only ones absent;
``networks_cuda.csv``: the 73 conv layers of the six mulder2020 networks, another campaign; an NVIDIA H200's, as
their provenance says). No GPU is needed to run this benchmark: it fits and scores models from the measured tables.
Other pairs name their files (``--source``, ``--target``, ``--again``, ``--table``).

For every fraction of the target's training part (seed-0 80/10/10 split; default 1 % and 10 %) and every repeat
(default 5; the repeat number seeds the draw), each method is fitted as ``bench_transfer.py`` fits it (``default``:
the shipped :func:`~edgeplan.costmodels.transfer`; the others alone on one round of single timings of the same
number) and scored by

- the MdRAE on the target's test part (median over primitives), beside the target's noise floor (the same
  configurations measured again in an independent run, ``reference_cuda_remeasure100.csv``), and
- the selection increase: each network's selection made with the transferred model, priced with the measured
  network table, over the measured optimum, mean over the six networks (GoogLeNet's beside it).

Methods: ``direct`` (the CPU model as is, once), ``default`` (the shipped transfer: two rounds of single timings,
pooled factor, fine-tuning refitted, blended), ``factor`` (per-primitive scale), ``factor-finetune`` (pooled factor,
then fine-tuning) and ``finetune`` (learning rate x0.1 from the CPU model); training from scratch left the library
(this file's git history has it). ``--shared-correction``: as in ``bench_transfer.py``, the source corrected by one
boosted model of log(target / source prediction) shared by all primitives, and its geometric mean with the
fine-tuned model (MdRAE only). With ``--native DIR`` (fitted with ``edgeplan primitives fit --data TARGET --out
DIR``; default ``out/costmodels/GPU-nn2`` for a target ``reference_GPU.csv``) the model trained on all of the
target's training part is scored beside. Pin it to one core and use ``--threads 1`` on a shared machine: it measures
accuracy, not time.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path
from typing import Any

from _data import DATA, need
from _machine import machine
from bench_calibrate_primitives import score as table_score
from bench_transfer import fitted_run, fmt, grouped, print_run, quartiles, shared_correction

ROOT = Path(__file__).resolve().parents[1]
METHODS = ("default", "factor", "factor-finetune", "finetune")


def score(model: Any, target: Any, split_seed: int, table: Any, nets: dict[str, Any],
          formats: dict[str, tuple[str, str]]) -> dict[str, Any]:
    """MdRAE on the target's test part, and on ``table`` with the selection increase per network priced with it."""
    from edgeplan.costmodels import evaluate_performance_model

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = evaluate_performance_model(model, target, "test", split_seed)
    on_table = table_score(model, table, nets, formats)
    return {"mdrae_pct": 100 * result.median_primitive_mdrae, "transform_pct": 100 * result.median_transform_mdrae,
            "table_mdrae_pct": on_table["mdrae_pct"], "increases": on_table["increases"],
            "increase_pct": on_table["mean_increase_pct"], "googlenet_pct": on_table["increases"].get("googlenet")}


def stats(values: list[float]) -> str:
    """``median [q1, q3]`` over the repeats."""
    return fmt(quartiles(values))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=ROOT / "edgeplan" / "data" / "primitives" / "nn2_cpu_1t",
                        help="The source model folder.")
    parser.add_argument("--target", type=Path, default=DATA / "primitives" / "reference_cuda.csv",
                        help="The GPU's table.")
    parser.add_argument("--again", type=Path, default=DATA / "primitives" / "reference_cuda_remeasure100.csv",
                        help="The target's configurations measured again (its noise floor).")
    parser.add_argument("--table", type=Path, default=DATA / "primitives" / "networks_cuda.csv",
                        help="The six networks' layers measured on the GPU (prices the selections).")
    parser.add_argument("--native", type=Path, default=None,
                        help="A model fitted on all of the target's training part, scored beside if present (default: "
                             "out/costmodels/GPU-nn2 for a target reference_GPU.csv).")
    parser.add_argument("--fractions", type=float, nargs="+", default=[0.01, 0.1])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--split-seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--shared-correction", action="store_true",
                        help="Beside fine-tuning, the source corrected by one boosted model shared by all primitives "
                             "(as bench_transfer.py --shared-correction; MdRAE only).")
    parser.add_argument("--json", type=Path, default=None, help="Write every run's figures to this file.")
    args = parser.parse_args()

    from edgeplan.costmodels import draw_samples, load_performance_model, load_primitive_csv
    from edgeplan.decisions.selection_costs import own_formats
    from edgeplan.measure.primitive_export import noise_floor
    from experiments.mulder2020 import structures

    need(args.target, args.table)
    print(machine(args.threads))
    source = load_performance_model(args.source)
    target, table = load_primitive_csv(args.target), load_primitive_csv(args.table)
    provenance_file = args.target.with_suffix(".provenance.json")
    gpu = args.target.stem  # described by its provenance when there is one
    if provenance_file.is_file():
        gpu = json.loads(provenance_file.read_text()).get("accelerator", gpu)
    print(f"source {args.source} ({source.kind}); target {args.target.name} ({len(target)} configurations, "
          f"{len(target.primitives)} primitives, {gpu}); selections priced with {args.table.name} "
          f"({len(table)} layers)")
    floor = None
    if args.again.is_file():
        floor = noise_floor(target, load_primitive_csv(args.again))
        print(f"the target's noise floor ({args.again.name}, {floor.shared_configs} configurations measured "
              f"again): MdRAE {100 * floor.median_primitive_mdrae:.2f} % over primitives, "
              f"{100 * floor.median_transform_mdrae:.2f} % over transformations")
    nets, formats = structures(table), own_formats()

    def scored(model: Any) -> dict[str, Any]:
        return score(model, target, args.split_seed, table, nets, formats)

    runs: list[dict[str, Any]] = []

    def one(fraction: float, seed: int, method: str) -> None:
        model, row = fitted_run(source, target, fraction, seed, method, args, scored)
        runs.append(row)
        print_run(row)
        if args.shared_correction and method == "finetune":
            drawn = draw_samples(target, fraction, seed, args.split_seed).rows
            row["shared_correction_mdrae_pct"], row["with_finetune_mdrae_pct"] = shared_correction(
                source, target, model, drawn, args)
            print(f"  {'shared corr.':<15} {100 * fraction:6.2f} % seed {seed:>2}: MdRAE "
                  f"{row['shared_correction_mdrae_pct']:7.2f} %, geometric mean with finetune "
                  f"{row['with_finetune_mdrae_pct']:7.2f} %", flush=True)

    one(args.fractions[0], 0, "direct")
    for fraction in args.fractions:
        for seed in range(args.repeats):
            for method in args.methods:
                one(fraction, seed, method)
    native = None
    if args.native is None:
        args.native = Path("out/costmodels") / f"{args.target.stem.removeprefix('reference_')}-nn2"
    if (args.native / "model.json").is_file():
        native = scored(load_performance_model(args.native))

    print(f"\n{args.source.name} -> {gpu}: target test part (split seed {args.split_seed}); {args.repeats} repeat(s) "
          "per fraction; median [q1, q3] over repeats")
    print(f"{'fraction':>9} {'method':<15} {'n':>3} {'MdRAE %':>24} {'increase % (6 nets)':>24} "
          f"{'GoogLeNet incr. %':>24} {'MdRAE on nets %':>24}")
    for (fraction, method), rs in grouped(runs).items():
        label = "-" if method == "direct" else f"{100 * fraction:g} %"
        print(f"{label:>9} {method:<15} {len(rs):>3} {stats([r['mdrae_pct'] for r in rs]):>24} "
              f"{stats([r['increase_pct'] for r in rs]):>24} {stats([r['googlenet_pct'] for r in rs]):>24} "
              f"{stats([r['table_mdrae_pct'] for r in rs]):>24}")
    shared = {k: rs for k, rs in grouped(runs).items() if any("shared_correction_mdrae_pct" in r for r in rs)}
    for (fraction, _), rs in shared.items():
        print(f"{100 * fraction:>7g} % {'shared corr.':<15} {len(rs):>3} "
              f"{stats([r['shared_correction_mdrae_pct'] for r in rs]):>24}   geometric mean with finetune "
              f"{stats([r['with_finetune_mdrae_pct'] for r in rs])}")
    if native is not None:
        print(f"{'100 %':>9} {'native NN2':<15} {1:>3} {native['mdrae_pct']:7.2f}{'':>17} "
              f"{native['increase_pct']:7.2f}{'':>17} {native['googlenet_pct']:7.2f}{'':>17} "
              f"{native['table_mdrae_pct']:7.2f}   ({args.native}, fitted on all of the target's training part)")
    if floor is not None:
        print(f"noise floor of the target: {100 * floor.median_primitive_mdrae:.2f} % (MdRAE between two runs)")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"source": str(args.source), "target": str(args.target), "gpu": gpu,
                                         "runs": runs, "native": native,
                                         "noise_floor": floor.to_dict() if floor else None}, indent=1, default=float))
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
