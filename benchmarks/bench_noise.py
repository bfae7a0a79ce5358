"""The noise floor of this machine: resnet18 end-to-end latency in two independent campaigns.

Each campaign measures torchvision:resnet18 (PyTorch eager, 1 and 2 threads) with the harness's adaptive stop,
in its own subprocess (fresh allocator and caches), into a throw-away Store. Prints, per thread count, the two
medians, their relative difference and each campaign's spread (IQR / median). No predictor can be judged below
this floor.
"""

from __future__ import annotations

import json
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


def main() -> int:
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
