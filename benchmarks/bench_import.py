"""Graph import plus annotation of resnet50 (torch.export capture, conversion, validation, totals).

Model construction (random weights) is timed apart. Prints the first call in the process (which pays for
torch.export's one-time set-up) and the median of the following calls.
"""

from __future__ import annotations

import statistics
import sys
import time

from _machine import machine


def main() -> int:
    import torch

    torch.set_num_threads(2)
    from edgeplan.frontends.torch_frontend import graph_from_torch
    from edgeplan.frontends.zoo import build_model

    start = time.perf_counter()
    model = build_model("torchvision:resnet50")
    build_s = time.perf_counter() - start
    inputs = model.example_inputs()
    times = []
    for _ in range(6):
        start = time.perf_counter()
        graph = graph_from_torch(model.module, inputs, name="torchvision:resnet50")
        totals = graph.totals()
        times.append(time.perf_counter() - start)
    warm = statistics.median(times[1:])
    print(f"resnet50 import + annotation: first {times[0]:.2f} s, then median {warm:.2f} s "
          f"(min {min(times[1:]):.2f}, max {max(times[1:]):.2f}, n={len(times) - 1}); "
          f"model construction {build_s:.2f} s; {totals.nodes} nodes, {totals.macs / 1e9:.3f} GMACs; "
          f"target <= 2 s: {'met' if warm <= 2.0 else 'NOT met'}")
    print(f"machine: {machine()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
