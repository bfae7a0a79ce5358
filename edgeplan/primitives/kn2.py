"""The kn2 family: the convolution as a sum of ``f x f`` shifted ``1x1`` convolutions (GEMMs), no patch matrix.

After Anderson et al. ("Low-memory GEMM-based convolution algorithms", 2017) and the mulder2021 names:

* ``kn2row`` (hwc -> chw): one GEMM of all ``f f k`` kernel rows with the image, ``(f f k, c) x (c, pixels)``,
  then the ``f f`` partial results are shift-added into the output.
* ``kn2col`` (hwc -> chw): the same with the image first, ``(pixels, c) x (c, f f k)``, shift-added into a
  channels-last accumulator that is transposed to ``chw`` at the end.
* ``kn2row-as`` / ``kn2col-as`` ("accumulate shifted"): one small GEMM per kernel offset, each shift-added into
  the output at once, so the buffer holds one partial result instead of ``f f``.
* ``kn2row-aa-{ab,abt,atb,atbt}`` ("accumulate in the GEMM"): the input is zero-padded and flattened; for each
  kernel offset the GEMM reads the flattened input at that offset (a strided view, no copy) and accumulates
  straight into a row-padded output (``beta = 1``); the columns that wrap around the row end are discarded at the
  end. ``t`` marks a transposed operand: the kernel stored ``(c, k)`` instead of ``(k, c)``, the input ``hwc``
  (``(pixels, c)``) instead of ``chw``.

All apply at stride 1 only (as in the mulder2021 dataset); any kernel size and padding.
"""

from __future__ import annotations

import torch

from edgeplan.primitives._ops import pad_chw, pad_hwc, shifted_range
from edgeplan.primitives.base import Prepared, Primitive, PrimitiveInfo
from edgeplan.primitives.im2 import GemmOrder
from edgeplan.primitives.spec import ConvSpec, Layout, Rule

__all__ = ["Kn2Accumulate", "Kn2Col", "Kn2Row", "variants"]

FAMILY = "kn2"
RULE = Rule(strides=frozenset({1}))


def _offsets(sp: ConvSpec) -> list[tuple[int, int, slice, slice, slice, slice]]:
    """Per kernel offset ``(kh, kw)``: the output rows/cols and the input rows/cols it adds, clipped to the image."""
    result = []
    for kh in range(sp.f):
        y0, y1 = shifted_range(sp.out, sp.im, kh - sp.pad)
        for kw in range(sp.f):
            x0, x1 = shifted_range(sp.out, sp.im, kw - sp.pad)
            if y0 < y1 and x0 < x1:
                dy, dx = kh - sp.pad, kw - sp.pad
                result.append((kh, kw, slice(y0, y1), slice(x0, x1), slice(y0 + dy, y1 + dy),
                               slice(x0 + dx, x1 + dx)))
    return result


class Kn2Row(Primitive):
    """``kn2row`` (one GEMM, all offsets) or ``kn2row-as`` (one GEMM per offset); kernels first.

    Parameters
    ----------
    info
        The declaration; the input layout says whether the image is read ``chw`` or ``hwc``.
    per_offset
        ``True`` for ``kn2row-as``.
    """

    def __init__(self, info: PrimitiveInfo, per_offset: bool) -> None:
        super().__init__(info)
        self.per_offset = per_offset

    def _prepare(self, weight: torch.Tensor, spec: ConvSpec) -> tuple[torch.Tensor, torch.Tensor | None]:
        w = weight.permute(2, 3, 0, 1).contiguous()  # (f, f, k, c)
        return (w if self.per_offset else w.view(-1, spec.c)), None

    def _image(self, x: torch.Tensor, sp: ConvSpec) -> torch.Tensor:
        """The image as a ``(c, pixels)`` matrix (a transposed view for hwc input)."""
        if self.input_layout is Layout.HWC:
            return x.reshape(sp.im * sp.im, sp.c).t()
        return x.reshape(sp.c, sp.im * sp.im)

    def _execute(self, x: torch.Tensor, prepared: Prepared) -> torch.Tensor:
        sp, w = prepared.spec, prepared.weight
        img = self._image(x, sp)
        out = x.new_zeros(sp.k, sp.out, sp.out)
        if self.per_offset:
            for kh, kw, oy, ox, iy, ix in _offsets(sp):
                part = torch.mm(w[kh, kw], img).view(sp.k, sp.im, sp.im)
                out[:, oy, ox] += part[:, iy, ix]
        else:
            parts = torch.mm(w, img).view(sp.f, sp.f, sp.k, sp.im, sp.im)
            for kh, kw, oy, ox, iy, ix in _offsets(sp):
                out[:, oy, ox] += parts[kh, kw, :, iy, ix]
        return out


class Kn2Col(Primitive):
    """``kn2col`` (one GEMM, all offsets) or ``kn2col-as`` (one GEMM per offset); image first, hwc input.

    Parameters
    ----------
    info
        The declaration.
    per_offset
        ``True`` for ``kn2col-as``.
    """

    def __init__(self, info: PrimitiveInfo, per_offset: bool) -> None:
        super().__init__(info)
        self.per_offset = per_offset

    def _prepare(self, weight: torch.Tensor, spec: ConvSpec) -> tuple[torch.Tensor, torch.Tensor | None]:
        if self.per_offset:
            return weight.permute(2, 3, 1, 0).contiguous(), None  # (f, f, c, k)
        return weight.permute(1, 2, 3, 0).reshape(spec.c, -1).contiguous(), None  # (c, f f k)

    def _execute(self, x: torch.Tensor, prepared: Prepared) -> torch.Tensor:
        sp, w = prepared.spec, prepared.weight
        img = x.reshape(sp.im * sp.im, sp.c)
        acc = x.new_zeros(sp.out, sp.out, sp.k)
        if self.per_offset:
            for kh, kw, oy, ox, iy, ix in _offsets(sp):
                part = torch.mm(img, w[kh, kw]).view(sp.im, sp.im, sp.k)
                acc[oy, ox] += part[iy, ix]
        else:
            parts = torch.mm(img, w).view(sp.im, sp.im, sp.f, sp.f, sp.k)
            for kh, kw, oy, ox, iy, ix in _offsets(sp):
                acc[oy, ox] += parts[iy, ix, kh, kw]
        return acc.permute(2, 0, 1).contiguous()


class Kn2Accumulate(Primitive):
    """``kn2row-aa-*``: per kernel offset, a GEMM on the flattened padded input accumulating into the output.

    Parameters
    ----------
    info
        The declaration (``chw`` input for ``ab``/``atb``, ``hwc`` for ``abt``/``atbt``).
    order
        The GEMM variant (``ki`` order: kernel first).
    """

    def __init__(self, info: PrimitiveInfo, order: GemmOrder) -> None:
        super().__init__(info)
        self.order = order

    def _prepare(self, weight: torch.Tensor, spec: ConvSpec) -> tuple[torch.Tensor, torch.Tensor | None]:
        dims = (2, 3, 1, 0) if self.order.ta else (2, 3, 0, 1)  # (f, f, c, k) or (f, f, k, c)
        return weight.permute(dims).contiguous(), None

    def _execute(self, x: torch.Tensor, prepared: Prepared) -> torch.Tensor:
        sp, w = prepared.spec, prepared.weight
        wp = sp.padded
        if self.order.tb:  # hwc input, flattened to (pixels, c)
            flat = pad_hwc(x, sp.pad).reshape(wp * wp, sp.c)
        else:  # chw input, flattened to (c, pixels)
            flat = pad_chw(x, sp.pad).reshape(sp.c, wp * wp)
        n = sp.out * wp - sp.f + 1  # row-padded output positions that are written
        out = x.new_zeros(sp.k, sp.out * wp)
        head = out[:, :n]
        for kh in range(sp.f):
            for kw in range(sp.f):
                off = kh * wp + kw
                a = w[kh, kw].t() if self.order.ta else w[kh, kw]
                b = flat[off:off + n].t() if self.order.tb else flat[:, off:off + n]
                head.addmm_(a, b)
        return out.view(sp.k, sp.out, wp)[:, :, : sp.out].contiguous()


def variants() -> tuple[Primitive, ...]:
    """The kn2row and kn2col primitives (8)."""
    chw, hwc = Layout.CHW, Layout.HWC
    result: list[Primitive] = [
        Kn2Row(PrimitiveInfo(
            "kn2row", FAMILY, hwc, chw, RULE,
            "one GEMM (f f k, c) x (c, pixels) for all kernel offsets, then shift-add of the f f partial results",
            "weights reordered to (f f k, c)"), per_offset=False),
        Kn2Row(PrimitiveInfo(
            "kn2row-as", FAMILY, chw, chw, RULE,
            "per kernel offset a GEMM (k, c) x (c, pixels), shift-added into the output",
            "weights reordered to (f, f, k, c)"), per_offset=True),
        Kn2Col(PrimitiveInfo(
            "kn2col", FAMILY, hwc, chw, RULE,
            "one GEMM (pixels, c) x (c, f f k) for all kernel offsets, shift-add, transpose to chw",
            "weights reordered to (c, f f k)"), per_offset=False),
        Kn2Col(PrimitiveInfo(
            "kn2col-as", FAMILY, hwc, chw, RULE,
            "per kernel offset a GEMM (pixels, c) x (c, k), shift-added into an hwc accumulator, transposed to chw",
            "weights reordered to (f, f, c, k)"), per_offset=True),
    ]
    for ops in ("ab", "abt", "atb", "atbt"):
        order = GemmOrder.parse(f"{ops}-ki")
        kernel = "(f, f, c, k)" if order.ta else "(f, f, k, c)"
        result.append(Kn2Accumulate(PrimitiveInfo(
            f"kn2row-aa-{ops}", FAMILY, hwc if order.tb else chw, chw, RULE,
            f"per kernel offset a GEMM {ops} on the flattened padded input at that offset, accumulated in place "
            "into a row-padded output",
            f"weights reordered to {kernel}"), order))
    return tuple(result)
