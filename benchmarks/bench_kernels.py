"""Deduced kernels against ONNX Runtime's optimized graph for eight torchvision models (edgeplan.ir.kernels).

For each model: export it with edgeplan's exporter, import the ONNX file (its node names are ORT's) and the torch
module (batch norms still in it), and for the profile ``onnxruntime`` (compared at ``ORT_ENABLE_EXTENDED``) and the
NCHWc profile of this CPU (``ORT_ENABLE_ALL``; none on a CPU without NCHWc kernels) compare the deduced kernels with
ORT's (:func:`edgeplan.measure.kernel_check.check_onnxruntime`): node by node on the ONNX IR where the profile keeps
ORT's tensor names, counts per kind on both IRs. Prints one row per model and profile (kernels deduced, kernels in
ORT's optimized graph, mismatches on the ONNX IR and on the torch IR, seconds of the three ORT runs and the
comparison, export excluded) and the mismatches in words; exits 1 on any mismatch or model that could not be checked.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

from _machine import machine

from edgeplan.errors import EdgeplanError
from edgeplan.ir.kernels import KernelMismatch, deduce_kernels
from edgeplan.measure.kernel_check import check_onnxruntime, onnxruntime_nchwc_block_size, onnxruntime_optimized_kernels

MODELS = ("resnet18", "mobilenet_v2", "squeezenet1_0", "googlenet", "densenet121", "shufflenet_v2_x0_5",
          "mnasnet0_5", "efficientnet_b0")


@dataclass(frozen=True)
class Row:
    """One model and profile: kernels deduced (ONNX IR) and in ORT's graph, mismatches on both IRs, seconds."""

    model: str
    profile: str
    deduced: int
    observed: int
    on_onnx: list[KernelMismatch]
    on_torch: list[KernelMismatch]
    seconds: float

    def messages(self) -> list[str]:
        """The mismatches in words, each with its model, profile and IR."""
        return [f"{self.model} {self.profile} {ir} IR: {m.message}"
                for ir, found in (("ONNX", self.on_onnx), ("torch", self.on_torch)) for m in found]


def check_model(name: str, size: int, folder: Path, profiles: list[str]) -> list[Row]:
    """Export torchvision model ``name`` and compare its deduced kernels with ORT's for every profile."""
    from edgeplan.frontends.onnx_export import export_onnx
    from edgeplan.frontends.onnx_frontend import graph_from_onnx
    from edgeplan.frontends.torch_frontend import graph_from_torch
    from edgeplan.frontends.zoo import build_model

    model = build_model(f"torchvision:{name}", (1, 3, size, size))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path = export_onnx(model.module, model.example_inputs(), folder / f"{name}.onnx")
    torch_graph = graph_from_torch(model.module, model.example_inputs(), name=name)
    onnx_graph = graph_from_onnx(path)
    rows = []
    for profile in profiles:
        start = time.perf_counter()
        deduced = deduce_kernels(onnx_graph, profile)
        observed = onnxruntime_optimized_kernels(path, profile)
        on_onnx = check_onnxruntime(onnx_graph, path, profile)
        on_torch = check_onnxruntime(torch_graph, path, profile, by_nodes=False)
        rows.append(Row(name, profile, len(deduced.kernels), len(observed), on_onnx, on_torch,
                        time.perf_counter() - start))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=224, help="input height and width (default 224)")
    parser.add_argument("--models", nargs="+", default=list(MODELS), help="torchvision model names")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    print(machine(1), flush=True)
    block = onnxruntime_nchwc_block_size()
    profiles = ["onnxruntime"] + ([f"onnxruntime-nchwc{block}"] if block else [])
    print(f"ONNX Runtime NCHWc block size on this CPU: {block or 'none (no NCHWc profile)'}; input 1x3x{args.size}x"
          f"{args.size}\n")
    print(f"{'model':<20} {'profile':<20} {'deduced':>8} {'ORT':>5} {'mismatches ONNX IR':>19} "
          f"{'mismatches torch IR':>20} {'check s':>8}", flush=True)
    failed: list[str] = []
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as folder:
        for name in args.models:
            try:
                results = check_model(name, args.size, Path(folder), profiles)
            except EdgeplanError as e:
                failed.append(f"{name}: {e}")
                print(f"{name:<20} could not be checked: {str(e)[:100]}", flush=True)
                continue
            for r in results:
                print(f"{r.model:<20} {r.profile:<20} {r.deduced:>8} {r.observed:>5} {len(r.on_onnx):>19} "
                      f"{len(r.on_torch):>20} {r.seconds:>8.1f}", flush=True)
            rows += results
    details = [line for r in rows for line in r.messages()]
    bad = sum(bool(r.messages()) for r in rows)
    print(f"\n{len(rows)} model-profile pairs checked, {bad} with mismatches ({len(details)} in all); "
          f"{len(failed)} models could not be checked")
    for line in details[:40] + failed:
        print("  " + line)
    if len(details) > 40:
        print(f"  ... and {len(details) - 40} more mismatches")
    return 1 if details or failed else 0


if __name__ == "__main__":
    sys.exit(main())
