"""Selected networks on a GPU (issue 5), from the stored runs of ``benchmarks/gpu_select.sh``.

The GPU is lent only now and then, so its runs are stored (``edgeplan/data/primitives/select_h200/`` and
``select_h200_run2/``, with provenance) and this report is computed from them: for each cost source (the H200's
measured tables, an NN2 fitted on them, the CPU's NN2 calibrated there from 40 layers) and each of the six
mulder2020 networks, the plan's predicted time, the measured medians of PyTorch's default (cuDNN), the selected
network and the best single primitive (interleaved, each run synchronised), the speed-ups and the outputs' error.
Then per source the geometric-mean speed-up, and the selection made with predicted costs against the one made with
measured costs (each as its ratio to PyTorch in its own run, since the runs were minutes apart).

No target: the CPU's (>= 1.15x over PyTorch) is issue 5's for this machine; this reports what the same method
gives on a GPU.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path
from typing import Any

SHIPPED = Path(__file__).resolve().parent.parent / "edgeplan" / "data" / "primitives"
STORED = (SHIPPED / "select_h200", SHIPPED / "select_h200_run2")
"""The shipped runs: all three sources with the first per-layer call, then two again with the trimmed one."""
SOURCES = ("measured", "predicted", "calibrated")


def geomean(values: list[float]) -> float:
    """Geometric mean."""
    return math.exp(statistics.fmean(math.log(v) for v in values))


def report(folder: Path) -> list[str]:
    """The report's lines."""
    provenance = json.loads((folder / "provenance.json").read_text())
    lines = [f"stored runs: {folder}"] + [f"{label}: {provenance.get(key, 'unknown')}" for label, key in
                                          (("machine", "machine"), ("date", "date"), ("made by", "command"))]
    relative: dict[str, dict[str, float]] = {}
    for source in SOURCES:
        path = folder / f"{source}.json"
        if not path.is_file():
            continue
        runs: dict[str, Any] = json.loads(path.read_text())
        lines += ["", f"costs: {source} ({provenance.get('files', {}).get(f'{source}.json', 'no description')})",
                  f"{'network':<10} {'layers':>6} {'predicted':>9} {'pytorch ms':>10} {'selected ms [q1, q3]':>22} "
                  f"{'single ms':>9} {'single primitive':<22} {'x pytorch':>9} {'x single':>8} {'max err':>8}"]
        speedups, singles, over_single, relative[source] = [], [], [], {}
        for name, r in runs.items():
            run = r["run"]
            lat = run["latency_ms"]
            sel, torch_ms = lat["selected"], lat["pytorch"]["median"]
            single = lat.get("single", {}).get("median", math.nan)
            speedups.append(run["speedup_vs_pytorch"])
            singles.append(torch_ms / single)
            over_single.append(single / sel["median"])
            relative[source][name] = sel["median"] / torch_ms
            selected = sum(1 for layer in r["layers"] if layer["primitive"])
            err = max(run["output_error"].values())
            lines.append(f"{name:<10} {selected:>6} {r['predicted_ms']:>9.3f} {torch_ms:>10.3f} "
                         f"{sel['median']:>8.3f} [{sel['q1']:.3f}, {sel['q3']:.3f}] {single:>9.3f} "
                         f"{run['single_primitive']:<22} {run['speedup_vs_pytorch']:>9.3f} "
                         f"{single / sel['median']:>8.3f} {err:>8.1e}")
        faster = sum(s > 1 for s in speedups)
        lines.append(f"geometric-mean speed-up over PyTorch: selected {geomean(speedups):.3f}x (faster on {faster} of "
                     f"{len(speedups)}), best single primitive {geomean(singles):.3f}x; selected over single, "
                     f"within each run: {geomean(over_single):.3f}x; every output within 1e-3: "
                     f"{all(r['run']['outputs_match'] for r in runs.values())}")
    if "measured" in relative:
        for source in ("predicted", "calibrated"):
            shared = sorted(set(relative.get(source, {})) & set(relative["measured"]))
            if not shared:
                continue
            increase = [100 * (relative[source][n] / relative["measured"][n] - 1) for n in shared]
            lines.append(f"{source} costs against measured costs, time relative to PyTorch in each run (runs minutes "
                         "apart: identical selections differ by a few %): "
                         + ", ".join(f"{n} {v:+.1f}%" for n, v in zip(shared, increase, strict=True))
                         + f"; mean {statistics.fmean(increase):+.1f}%")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stored", type=Path, nargs="+", default=list(STORED),
                        help="folders of gpu_select.sh's outputs, each with a provenance.json (default: the shipped)")
    args = parser.parse_args()
    for i, folder in enumerate(args.stored):
        if not (folder / "provenance.json").is_file():
            print(f"no stored GPU selection runs in {folder} (make them with benchmarks/gpu_select.sh on a GPU)")
            return 1
        print(("\n" if i else "") + "\n".join(report(folder)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
