"""Selected networks on this machine (issue 5): PBQP over edgeplan's primitives, run for real, batch 1.

For AlexNet, VGG-11, VGG-19, GoogLeNet, ResNet-18 and ResNet-34: select every conv layer's primitive from
measured tables, build the network, check its outputs against PyTorch's and time PyTorch's default, the selected
network and the best single primitive, interleaved (``--rounds`` runs each, medians). Prints per network the
speed-up over PyTorch and over the single primitive, and the geometric mean.

The costs: ``--measure DIR`` measures the networks' conv layers here first, with every primitive that runs on
``--torch-device`` (``edgeplan --home DIR profile primitives --network ...`` into ``DIR/store.sqlite``, resumable; a few
minutes), since costs measured on one machine do not carry the selections to another; or the tables given to
``--data`` (default the repository's ``data/primitives/networks_cpu_2t.csv``, measured on the reference machine);
or a performance model (``--model``). ``--torch-device cuda`` selects among the primitives that run on the GPU and
runs there (1 thread, 30 rounds unless given); without a CUDA device it says so and exits 0.

Target (issue 5, on the CPU): faster than PyTorch on at least 4 of the 6, geometric-mean speed-up >= 1.15x, at 2
threads.
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
from pathlib import Path

from _data import DATA, need
from _machine import machine

from edgeplan.decisions.select import OUTPUT_TOLERANCE, SelectOptions, run_selected, select

NETWORKS = ("alexnet", "vgg11", "vgg19", "googlenet", "resnet18", "resnet34")


def measure_tables(folder: Path, networks: list[str], threads: int, torch_device: str) -> Path:
    """The networks' conv layers measured here with every primitive that runs on ``torch_device`` (``edgeplan --home
    FOLDER profile primitives --network ...``, resumable from ``folder/store.sqlite``), exported with the cells it
    could not measure (:func:`~edgeplan.measure.primitive_export.export_dataset` with ``include_incomplete``, which
    ``profile primitives --export`` leaves out)."""
    import json

    from edgeplan.measure.primitive_export import export_dataset, find_campaign
    from edgeplan.measure.store import Store

    folder.mkdir(parents=True, exist_ok=True)
    out = folder / f"networks_{torch_device.split(':')[0]}_{threads}t.csv"
    nets = [arg for name in networks for arg in ("--network", f"torchvision:{name}")]
    done = subprocess.run([sys.executable, "-m", "edgeplan", "--home", str(folder), "profile", "primitives",
                           "--threads", str(threads), "--seed", "1", *nets, "--torch-device", torch_device,
                           "--budget-s", "3000", "--json"], check=True, capture_output=True, text=True)
    campaign = json.loads(done.stdout)["campaign"]
    with Store.open(folder / "store.sqlite") as store:
        export_dataset(store, find_campaign(store, campaign), out, command="bench_selection.py --measure",
                       include_incomplete=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", nargs="+", default=[str(DATA / "primitives" / "networks_cpu_2t.csv")],
                        help="measured tables (mulder2021 format; default: the repository's 2-thread network tables)")
    parser.add_argument("--measure", type=Path, default=None, metavar="DIR",
                        help="measure the networks' tables here first (Store and export in DIR), instead of --data")
    parser.add_argument("--model", default=None, help="performance model folder (used instead of --data)")
    parser.add_argument("--torch-device", default="cpu", help="cpu, cuda or cuda:N: where the networks run")
    parser.add_argument("--threads", type=int, default=None, help="default 2 on the CPU, 1 on a GPU")
    parser.add_argument("--rounds", type=int, default=None, help="default 15 on the CPU, 30 on a GPU")
    parser.add_argument("--networks", nargs="+", default=list(NETWORKS))
    parser.add_argument("--no-flow-costs", action="store_true",
                        help="leave pooling, batch norm and ReLU out of the costs (mulder2020's cost graph)")
    args = parser.parse_args()
    gpu = args.torch_device != "cpu"
    args.threads = args.threads or (1 if gpu else 2)
    args.rounds = args.rounds or (30 if gpu else 15)
    print(machine(args.threads))
    if gpu:
        import torch

        if not torch.cuda.is_available():
            print(f"skipped: no CUDA device here (--torch-device {args.torch_device})")
            return 0
        print(f"GPU: {torch.cuda.get_device_name(0)}; CUDA {torch.version.cuda}")
    if args.model:
        args.data = None
    elif args.measure is not None:
        args.data = [str(measure_tables(args.measure, args.networks, args.threads, args.torch_device))]
    else:
        need(*map(Path, args.data))
    costs = "measured" if args.data else "predicted"
    flow = "without" if args.no_flow_costs else "with"
    print(f"costs: {costs} ({' '.join(args.data) if args.data else args.model or 'shipped NN2'}), {flow} the "
          "layout-transparent layers measured per layout; "
          f"{args.threads} threads; {args.rounds} interleaved runs per variant")
    print(f"{'network':<10} {'layers':>6} {'fixed':>5} {'pytorch ms':>11} {'selected ms':>12} {'single ms':>10} "
          f"{'single primitive':<26} {'x pytorch':>9} {'x single':>8} {'max err':>8}")
    speedups = []
    ok = True
    for name in args.networks:
        spec = f"torchvision:{name}"
        flow_threads = None if args.no_flow_costs else args.threads
        sel = select(spec, costs=costs, model_dir=args.model if costs == "predicted" else None, tables=args.data,
                           torch_device=args.torch_device, options=SelectOptions(flow_threads=flow_threads))
        result = run_selected(sel, threads=args.threads, rounds=args.rounds)
        run = result.run
        lat = run.latency
        single_ms = lat["single"].median_ms if "single" in lat else math.nan
        err = max(run.output_error.values())
        ok &= result.outputs_match
        speedups.append(run.speedup)
        layers, fixed = len(sel.plan.choices()), len(sel.structure.fixed)
        print(f"{name:<10} {layers:>6} {fixed:>5} {lat['pytorch'].median_ms:>11.2f} "
              f"{lat['selected'].median_ms:>12.2f} {single_ms:>10.2f} {run.single_primitive:<26} "
              f"{run.speedup:>8.3f}x {single_ms / lat['selected'].median_ms:>7.3f}x {err:>8.1e}")
    geomean = math.exp(sum(math.log(s) for s in speedups) / len(speedups))
    faster = sum(s > 1.0 for s in speedups)
    targets = ("", "") if gpu else (" (target >= 4 of 6)", " (target >= 1.15x)")
    print(f"\n{args.torch_device}: faster than PyTorch on {faster}/{len(speedups)}{targets[0]}; geometric-mean "
          f"speed-up {geomean:.3f}x{targets[1]}; outputs {'match' if ok else 'DO NOT match'} (tolerance "
          f"{OUTPUT_TOLERANCE:g})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
