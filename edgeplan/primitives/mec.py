"""The MEC family: memory-efficient convolution (Cho & Brand 2017; mulder2020 §3.1 'mec').

MEC lowers the padded input only along the width: the lowered matrix ``L`` has one row per output column ``w``,
holding the ``f`` input columns that output column reads, over the whole padded height (``f`` times less data than
im2col's patch matrix). The inputs of output row ``h`` are then the contiguous column window
``L[:, h s f c : (h s + f) f c]`` of ``L``, a strided view that feeds a GEMM without a copy.

* ``mec-row-partition`` (hwc -> hwc): ``L`` ordered ``(w, h, kw, c)``; one GEMM per output row
  (``(out, f f c) x (f f c, k)``, written straight into that row of the output) — MEC's solution A.
* ``mec-col`` (hcw -> hwc): ``L`` ordered ``(w, h, c, kw)`` from the ``hcw`` input; all output rows at once as one
  batched GEMM over the overlapping strided views of ``L`` — MEC's solution B.
"""

from __future__ import annotations

import torch

from edgeplan.primitives._ops import pad_hcw, pad_hwc
from edgeplan.primitives.base import Prepared, Primitive, PrimitiveInfo
from edgeplan.primitives.spec import ConvSpec, Layout, Rule

__all__ = ["MecCol", "MecRowPartition", "variants"]

FAMILY = "mec"


class MecRowPartition(Primitive):
    """``mec-row-partition``: lowered matrix ``(out, h f c)`` from hwc input, one GEMM per output row."""

    def _prepare(self, weight: torch.Tensor, spec: ConvSpec) -> tuple[torch.Tensor, torch.Tensor | None]:
        return weight.permute(2, 3, 1, 0).reshape(spec.f * spec.f * spec.c, spec.k).contiguous(), None

    def _execute(self, x: torch.Tensor, prepared: Prepared) -> torch.Tensor:
        sp, w = prepared.spec, prepared.weight
        xp = pad_hwc(x, sp.pad)
        low = xp.unfold(1, sp.f, sp.s).permute(1, 0, 3, 2).reshape(sp.out, -1)  # (out, h, kw, c)
        row = sp.f * sp.c  # one input row of the window
        out = x.new_empty(sp.out, sp.out, sp.k)
        for h in range(sp.out):
            start = h * sp.s * row
            torch.mm(low[:, start:start + sp.f * row], w, out=out[h])
        return out


class MecCol(Primitive):
    """``mec-col``: lowered matrix ``(out, h c f)`` from hcw input, all output rows in one batched GEMM."""

    def _prepare(self, weight: torch.Tensor, spec: ConvSpec) -> tuple[torch.Tensor, torch.Tensor | None]:
        return weight.permute(2, 1, 3, 0).reshape(spec.f * spec.c * spec.f, spec.k).contiguous(), None

    def _execute(self, x: torch.Tensor, prepared: Prepared) -> torch.Tensor:
        sp, w = prepared.spec, prepared.weight
        xp = pad_hcw(x, sp.pad)
        low = xp.unfold(2, sp.f, sp.s).permute(2, 0, 1, 3).contiguous()  # (out, h, c, kw)
        row = sp.c * sp.f
        windows = low.as_strided((sp.out, sp.out, sp.f * row), (sp.s * row, sp.padded * row, 1))
        return torch.matmul(windows, w)


def variants() -> tuple[Primitive, ...]:
    """The MEC primitives (2)."""
    rule = Rule()
    return (
        MecRowPartition(PrimitiveInfo(
            "mec-row-partition", FAMILY, Layout.HWC, Layout.HWC, rule,
            "width-lowered matrix (out, h f c); one GEMM per output row on a strided window of it",
            "weights reordered to (f f c, k)")),
        MecCol(PrimitiveInfo(
            "mec-col", FAMILY, Layout.HCW, Layout.HWC, rule,
            "width-lowered matrix (out, h c f) from hcw; one batched GEMM over all output rows' windows",
            "weights reordered to (f c f, k)")),
    )
