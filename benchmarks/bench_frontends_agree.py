"""Torch and ONNX frontends on the same models: compute-op node count and total MACs must agree within 1%.

Each zoo model is imported with the torch frontend, exported to ONNX, and imported again with the ONNX
frontend. Usage: python benchmarks/bench_frontends_agree.py [MODEL ...]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from _machine import machine

MODELS = [
    "torchvision:resnet18", "torchvision:mobilenet_v2", "torchvision:squeezenet1_1", "torchvision:googlenet",
    "torchvision:shufflenet_v2_x0_5", "torchvision:densenet121", "torchvision:mnasnet0_5",
    "torchvision:regnet_y_400mf", "timm:efficientnet_b0", "timm:mobilenetv3_small_100", "timm:ghostnet_100",
    "paper:alexnet", "paper:pix2pix", "paper:nin", "synthetic:3",
]


def compare(spec: str, folder: Path) -> tuple[bool, str]:
    from edgeplan.frontends.onnx_export import export_onnx
    from edgeplan.frontends.onnx_frontend import graph_from_onnx
    from edgeplan.frontends.torch_frontend import graph_from_torch
    from edgeplan.frontends.zoo import build_model

    model = build_model(spec)
    inputs = model.example_inputs()
    g_torch = graph_from_torch(model.module, inputs, name=spec)
    path = export_onnx(model.module, inputs, folder / (spec.replace(":", "_") + ".onnx"))
    g_onnx = graph_from_onnx(path, name=spec)
    nt, no = len(g_torch.compute_nodes), len(g_onnx.compute_nodes)
    mt, mo = g_torch.totals().macs, g_onnx.totals().macs
    rel = abs(mt - mo) / mt
    ok = nt == no and rel <= 0.01
    return ok, f"compute nodes torch {nt} / onnx {no}, MACs {mt / 1e9:.4f} G / {mo / 1e9:.4f} G ({100 * rel:.2f}%)"


def main() -> int:
    import torch

    torch.set_num_threads(2)
    specs = sys.argv[1:] or MODELS
    agree = 0
    with tempfile.TemporaryDirectory() as tmp:
        for spec in specs:
            start = time.perf_counter()
            try:
                ok, text = compare(spec, Path(tmp))
            except Exception as e:  # noqa: BLE001 - every failure is printed by name
                ok, text = False, f"FAILED {type(e).__name__}: {str(e)[:200]}"
            agree += ok
            print(f"{'agree ' if ok else 'DIFFER'} {spec:34s} {text}  [{time.perf_counter() - start:.1f}s]", flush=True)
    print(f"{agree}/{len(specs)} models agree (compute-op count equal, MACs within 1%)")
    print(f"machine: {machine()}")
    return 0 if agree == len(specs) else 1


if __name__ == "__main__":
    sys.exit(main())
