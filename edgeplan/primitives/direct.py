"""The direct-sum family: the six-loop convolution with the two kernel-offset loops kept in Python.

Every variant loops over the ``f x f`` kernel offsets (never over pixels) and vectorises the other four loops
(output channel, input channel, output row and column) with tensor operations; they differ in how:

* ``direct-sum2d`` (chw -> chw): broadcast multiply-accumulate and a sum over input channels, no GEMM,
  blocked over output channels so that the temporary stays below :data:`MAC_BLOCK_ELEMENTS` elements.
* ``direct-sum2d-gemm`` (chw -> chw): the channel contraction of each offset as a ``(k, c) x (c, pixels)``
  GEMM accumulated into the output.
* ``direct-sum2d-hwc`` (hwc -> hwc): the same in channels-last order, ``(pixels, c) x (c, k)``.
"""

from __future__ import annotations

import torch

from edgeplan.primitives._ops import pad_chw, pad_hwc, window
from edgeplan.primitives.base import Prepared, Primitive, PrimitiveInfo
from edgeplan.primitives.spec import ConvSpec, Layout, Rule

__all__ = ["MAC_BLOCK_ELEMENTS", "DirectGemm", "DirectGemmHwc", "DirectMac", "variants"]

FAMILY = "direct-sum2d"

#: Largest temporary (elements) of one multiply-accumulate step of ``direct-sum2d``.
MAC_BLOCK_ELEMENTS = 1 << 20


class DirectMac(Primitive):
    """``direct-sum2d``: per kernel offset, ``out[k] += sum_c w[k, c] * x_shifted[c]`` by broadcasting."""

    def _prepare(self, weight: torch.Tensor, spec: ConvSpec) -> tuple[torch.Tensor, torch.Tensor | None]:
        return weight.permute(2, 3, 0, 1).contiguous()[..., None, None], None  # (f, f, k, c, 1, 1)

    def _execute(self, x: torch.Tensor, prepared: Prepared) -> torch.Tensor:
        sp, w = prepared.spec, prepared.weight
        xp = pad_chw(x, sp.pad)
        out = x.new_zeros(sp.k, sp.out, sp.out)
        block = max(1, MAC_BLOCK_ELEMENTS // (sp.c * sp.out * sp.out))
        for kh in range(sp.f):
            rows = window(kh, sp.out, sp.s)
            for kw in range(sp.f):
                xs = xp[:, rows, window(kw, sp.out, sp.s)]
                for k0 in range(0, sp.k, block):
                    out[k0:k0 + block] += (w[kh, kw, k0:k0 + block] * xs).sum(dim=1)
        return out


class DirectGemm(Primitive):
    """``direct-sum2d-gemm``: per kernel offset, ``out (k, pixels) += w_o (k, c) @ x_shifted (c, pixels)``."""

    def _prepare(self, weight: torch.Tensor, spec: ConvSpec) -> tuple[torch.Tensor, torch.Tensor | None]:
        return weight.permute(2, 3, 0, 1).contiguous(), None  # (f, f, k, c)

    def _execute(self, x: torch.Tensor, prepared: Prepared) -> torch.Tensor:
        sp, w = prepared.spec, prepared.weight
        xp = pad_chw(x, sp.pad)
        n = sp.out * sp.out
        out = x.new_zeros(sp.k, n)
        for kh in range(sp.f):
            rows = window(kh, sp.out, sp.s)
            for kw in range(sp.f):
                xs = xp[:, rows, window(kw, sp.out, sp.s)].reshape(sp.c, n)
                out.addmm_(w[kh, kw], xs)
        return out.view(sp.k, sp.out, sp.out)


class DirectGemmHwc(Primitive):
    """``direct-sum2d-hwc``: per kernel offset, ``out (pixels, k) += x_shifted (pixels, c) @ w_o (c, k)``."""

    def _prepare(self, weight: torch.Tensor, spec: ConvSpec) -> tuple[torch.Tensor, torch.Tensor | None]:
        return weight.permute(2, 3, 1, 0).contiguous(), None  # (f, f, c, k)

    def _execute(self, x: torch.Tensor, prepared: Prepared) -> torch.Tensor:
        sp, w = prepared.spec, prepared.weight
        xp = pad_hwc(x, sp.pad)
        n = sp.out * sp.out
        out = x.new_zeros(n, sp.k)
        for kh in range(sp.f):
            rows = window(kh, sp.out, sp.s)
            for kw in range(sp.f):
                xs = xp[rows, window(kw, sp.out, sp.s)].reshape(n, sp.c)
                out.addmm_(xs, w[kh, kw])
        return out.view(sp.out, sp.out, sp.k)


def variants() -> tuple[Primitive, ...]:
    """The direct-sum primitives."""
    rule = Rule()
    chw, hwc = Layout.CHW, Layout.HWC
    return (
        DirectMac(PrimitiveInfo(
            "direct-sum2d", FAMILY, chw, chw, rule,
            "loop over kernel offsets; broadcast multiply-accumulate summed over input channels (no GEMM)",
            "weights reordered to (f, f, k, c)")),
        DirectGemm(PrimitiveInfo(
            "direct-sum2d-gemm", FAMILY, chw, chw, rule,
            "loop over kernel offsets; (k, c) x (c, pixels) GEMM on the shifted input, accumulated",
            "weights reordered to (f, f, k, c)")),
        DirectGemmHwc(PrimitiveInfo(
            "direct-sum2d-hwc", FAMILY, hwc, hwc, rule,
            "loop over kernel offsets; (pixels, c) x (c, k) GEMM on the shifted channels-last input, accumulated",
            "weights reordered to (f, f, c, k)")),
    )
