"""The noise floor of this machine: resnet18 end-to-end latency in two independent campaigns.

Each campaign measures torchvision:resnet18 (PyTorch eager, 1 and 2 threads) with the harness's adaptive stop,
in its own subprocess (fresh allocator and caches), into a throw-away Store. Prints, per thread count, the two
medians, their relative difference and each campaign's spread (IQR / median). No predictor can be judged below
this floor.

``--tables REFERENCE AGAIN``: instead, the noise floor of a primitive timing table, two exported CSVs of the same
configurations measured in independent runs (:func:`edgeplan.measure.primitive_export.noise_floor`; was ``edgeplan
primitives noise``): per column the MdRAE between the runs, then its median over the primitives and over the
non-identity transformations.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

from _machine import machine

CAMPAIGN = r"""
import json, sys
from edgeplan.measure.model_latency import measure_model
from edgeplan.measure import TimingConfig
out = {}
for threads in (1, 2):
    m = measure_model("torchvision:resnet18", runtime="torch", threads=threads, home=sys.argv[1],
                      config=TimingConfig(warmup=10, min_repeats=30, max_repeats=300, target_rel_ci=0.01,
                                          max_time_s=30),
                      command="benchmarks/bench_noise.py")
    out[threads] = {"median_ms": m.timing.median_ms, "iqr_rel": m.timing.iqr_rel, "n": m.timing.repeats,
                    "ci_rel": m.timing.ci_rel, "id": m.record_id}
print(json.dumps(out))
"""


def tables(reference: Path, again: Path) -> int:
    """Print the noise floor of ``reference`` against ``again`` (two timing tables of independent runs)."""
    from edgeplan.measure.primitive_data import load_primitive_csv
    from edgeplan.measure.primitive_export import noise_floor

    result = noise_floor(load_primitive_csv(reference), load_primitive_csv(again))

    def pct(value: float) -> str:
        return "-" if math.isnan(value) else f"{100 * value:.2f} %"

    print(f"noise floor: {result.again} against {result.reference}")
    print(f"  {result.shared_configs} shared configurations (of {result.reference_configs} and "
          f"{result.again_configs}); transformations on {result.transform_tensors} distinct (c, im)")
    print(f"  {'column':<36} {'cells':>6} {'unpaired':>8} {'MdRAE':>9}")
    for column in (*result.primitives, *result.transforms):
        print(f"  {column.column:<36} {column.cells:>6} {column.unpaired:>8} {pct(column.mdrae):>9}")
    print(f"  median over {len(result.primitives)} primitives: {pct(result.median_primitive_mdrae)}")
    print(f"  median over the non-identity transformations: {pct(result.median_transform_mdrae)}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", nargs=2, type=Path, default=None, metavar=("REFERENCE", "AGAIN"),
                        help="the noise floor of a primitive timing table against its re-measurement instead")
    args = parser.parse_args()
    if args.tables is not None:
        return tables(*args.tables)
    with tempfile.TemporaryDirectory() as home:
        runs = []
        for _ in range(2):
            res = subprocess.run([sys.executable, "-c", CAMPAIGN, home], capture_output=True, text=True, check=True)
            runs.append(json.loads(res.stdout.strip().splitlines()[-1]))
        from edgeplan.measure import Store

        with Store.open(Path(home) / "store.sqlite") as store:
            stored = {r.id: r.latency_ms for r in store.measurements()}
    for threads in ("1", "2"):
        a, b = runs[0][threads], runs[1][threads]
        if stored[a["id"]] != a["median_ms"] or stored[b["id"]] != b["median_ms"]:
            raise SystemExit("the printed medians must be the ones stored in the Store")
        diff = abs(a["median_ms"] - b["median_ms"]) / min(a["median_ms"], b["median_ms"])
        print(f"resnet18 torch {threads} thread(s): medians {a['median_ms']:.2f} ms and {b['median_ms']:.2f} ms, "
              f"relative difference {100 * diff:.1f}%; spread (IQR/median) {100 * a['iqr_rel']:.1f}% and "
              f"{100 * b['iqr_rel']:.1f}% (n={a['n']}, {b['n']})")
    print(f"machine: {machine()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
