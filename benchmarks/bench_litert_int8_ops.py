"""What int8 quantization does to each operator, and whether the ``litert-xnnpack-int8`` rules deduce it.

One small model per operator (a convolution, the operator, and an int8 operator reading both, so that the operator
is neither fused nor the model's output) is converted with litert-torch and quantized as edgeplan quantizes
(:func:`edgeplan.frontends.litert_export.export_tflite` with ``int8``). For each, the file's operators with their
output type and whether the XNNPACK delegate takes them, then the deduced kernels of the torch graph and of the
file's IR against the file (:func:`edgeplan.measure.litert_delegate.check_litert`). The ``quantized.float_ops`` and
``delegate.unsupported_int8`` lists of ``edgeplan/data/kernel_rules/litert.json`` are read off this output.

Usage: ``python benchmarks/bench_litert_int8_ops.py [--out DIR] [OPERATOR ...]`` (default: every operator below).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _machine import machine


def operators() -> dict[str, Callable[..., Any]]:
    """The operators probed, by name: each a function of the convolution's output."""
    import torch
    import torch.nn.functional as F

    def pooled(pool: Callable[..., Any]) -> Callable[..., Any]:
        return lambda y: F.interpolate(pool(y), scale_factor=2)  # back to the input's size for the reader

    return {
        "relu": F.relu, "relu6": F.relu6, "hardswish": F.hardswish, "sigmoid": torch.sigmoid, "tanh": torch.tanh,
        "gelu": F.gelu, "silu": F.silu, "leaky_relu": lambda y: F.leaky_relu(y, 0.1), "abs": torch.abs,
        "exp": torch.exp, "sqrt": lambda y: torch.sqrt(y.abs()), "rsqrt": lambda y: torch.rsqrt(y.abs() + 1),
        "div": lambda y: y / (y.abs() + 1), "softmax": lambda y: torch.softmax(y, -1),
        "mean": lambda y: y.mean((2, 3), keepdim=True) * y, "transpose": lambda y: y.transpose(2, 3),
        "avg_pool_not_counting_padding": pooled(lambda y: F.avg_pool2d(y, 3, 2, 1, count_include_pad=False)),
        "avg_pool_not_counting_same_padding": pooled(  # the composite: SAME padding (1, 1) of 15 x 15
            lambda y: F.avg_pool2d(y[:, :, :15, :15], 3, 2, 1, count_include_pad=False)),
        "avg_pool": pooled(lambda y: F.avg_pool2d(y, 3, 2, 1)), "max_pool": pooled(lambda y: F.max_pool2d(y, 3, 2, 1)),
        "upsample_bilinear": lambda y: F.interpolate(F.avg_pool2d(y, 2), scale_factor=2, mode="bilinear"),
        "pad_reflect": lambda y: F.pad(y, (1, 1, 1, 1), mode="reflect")[:, :, 1:-1, 1:-1],
    }


def probe(name: str, fn: Callable[..., Any], out: Path) -> tuple[str, list[bool]]:
    """One operator's lines: the file's operators (type, output type, ``*`` where XNNPACK takes it) and the checks
    on the torch IR and the file's IR, with whether each matched."""
    import torch
    from torch import nn

    from edgeplan.errors import EdgeplanError
    from edgeplan.frontends.litert_export import export_tflite
    from edgeplan.frontends.tflite_frontend import graph_from_tflite, read_tflite
    from edgeplan.frontends.torch_frontend import graph_from_torch
    from edgeplan.measure.litert_delegate import check_litert, delegated_ops

    class Probe(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(8, 8, 3, padding=1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.conv(x)
            return fn(y) + 0.5 * y

    module, x = Probe().eval(), torch.randn(1, 8, 16, 16)
    try:
        path = export_tflite(module, (x,), out / f"{name}-int8.tflite", "int8")
    except EdgeplanError as e:
        return f"{name}: not converted: {e}", [False, False]
    model, taken = read_tflite(path), delegated_ops(path)
    written = " ".join(f"{op.type}:{model.tensors[op.outputs[0]].dtype.lower()}{'*' if op.index in taken else ''}"
                       for op in model.ops)
    checks, matched = [], []
    for label, make_graph in (("torch IR", lambda: graph_from_torch(module, (x,))),
                              ("file IR", lambda: graph_from_tflite(path, opaque=True))):
        try:
            found = check_litert(make_graph(), path, "litert-xnnpack-int8")
            checks.append(f"{label} {'matches' if not found else found[0].message}")
            matched.append(not found)
        except EdgeplanError as e:
            checks.append(f"{label} not deduced: {e}"[:160])
            matched.append(False)
    return f"{name}: {written}\n    " + "; ".join(checks), matched


def main() -> int:
    probes = operators()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help=f"operators to probe (default: all of {', '.join(probes)})")
    parser.add_argument("--out", type=Path, help="keep the converted models here (default: a temporary folder)")
    args = parser.parse_args()
    unknown = [n for n in args.names if n not in probes]
    if unknown:
        parser.error(f"unknown operator {unknown[0]!r}; choose from {', '.join(probes)}")
    print(machine(1), flush=True)
    print("operator: the file's operators as TYPE:output type, * where XNNPACK takes it; then the deduction\n")
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        tally = [0, 0]
        names = args.names or list(probes)
        for name in names:
            text, matched = probe(name, probes[name], out)
            print(text, flush=True)
            tally = [t + m for t, m in zip(tally, matched, strict=True)]
    print(f"\n{tally[0]} of {len(names)} operators match on the torch IR, {tally[1]} on the file's IR")
    return 0 if tally == [len(names)] * 2 else 1


if __name__ == "__main__":
    sys.exit(main())
