"""Speed of `edgeplan predict` (targets: resnet50 <= 30 ms after its graph is imported on a torch profile, <= 1 s on
a LiteRT one, whose kernels come from the converter's rules; 1000 `synthetic:` models in one call <= 10 s, import
included). The first prediction (which loads the kernel rules) is printed beside the median, and so is the number of
operations priced 0 ms or not at all (none is the target).

Usage, from the repository root::

    python benchmarks/bench_predict.py [--device torch-fp32-1t] [--method gbdt] [--repeats 20]
    python benchmarks/bench_predict.py --device litert-fp32-1t --target-ms 1000 --count 100
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from _machine import machine


def main(argv: list[str] | None = None) -> int:
    """Time the two targets and print them with the machine."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="torch-fp32-1t")
    parser.add_argument("--method", default="gbdt")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--count", type=int, default=1000, help="synthetic models in the batch call")
    parser.add_argument("--target-ms", type=float, default=30.0, help="target of one prediction after import")
    args = parser.parse_args(argv)
    print(machine(1))
    from edgeplan.costmodels.opwise.graph_ops import predict_graph
    from edgeplan.costmodels.opwise.profiles import kernel_profile_of, load_device_model
    from edgeplan.decisions.predict import predict_models
    from edgeplan.frontends.zoo import load_graph

    model = load_device_model(args.device, args.method)
    profile = kernel_profile_of(model)
    t0 = time.perf_counter()
    graph = load_graph("torchvision:resnet50")
    imported = time.perf_counter() - t0
    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        pred = predict_graph(graph, model, profile)
        times.append(time.perf_counter() - t0)
    med, first = 1000 * statistics.median(times), 1000 * times[0]
    spread = f"min {1000 * min(times):.1f}, max {1000 * max(times):.1f}"
    unpriced = sum(o.ms is None or o.ms <= 0 for o in pred.ops)
    print(f"resnet50 on {args.device} ({args.method}): {pred.latency_ms:.2f} ms predicted, {len(pred.ops)} ops, "
          f"{unpriced} priced 0 ms or not at all; graph import {imported:.2f} s; first predict {first:.1f} ms; "
          f"predict median {med:.1f} ms over {args.repeats} ({spread}); target <= {args.target_ms:g} ms: "
          f"{'met' if max(med, first) <= args.target_ms else 'NOT met'}")
    specs = [f"synthetic:{i}" for i in range(args.count)]
    t0 = time.perf_counter()
    preds = predict_models(specs, device=args.device, method=args.method)
    total = time.perf_counter() - t0
    unpredicted = sum(bool(p.prediction.unpredicted) for p in preds)
    print(f"{len(preds)} synthetic models in one call, graphs built included: {total:.2f} s "
          f"({1000 * total / len(preds):.1f} ms per model; {unpredicted} with unpredicted ops); target <= 10 s: "
          f"{'met' if total <= 10 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
