"""The FFT family: convolution as a pointwise product in the frequency domain (``torch.fft``).

``fft`` (chw -> chw): the zero-padded input is transformed with a real 2-D FFT of its own size, multiplied per
frequency with the prepared kernel spectrum (``(k, c) x (c,)`` products batched over frequencies), transformed
back, and the valid part of the circular convolution is kept (a correlation is a convolution with the flipped
kernel, so the output starts at ``f - 1``). Stride 1 only; the kernel spectrum, ``k c (im + 2p) ((im + 2p)//2 + 1)``
complex numbers, must fit in :data:`SPECTRUM_LIMIT_BYTES`. mulder2020 left FFT out as the slowest family; it is
here for completeness and for the profiling campaign to confirm or refute that.
"""

from __future__ import annotations

import torch

from edgeplan.primitives._ops import pad_chw
from edgeplan.primitives.base import Prepared, Primitive, PrimitiveInfo
from edgeplan.primitives.spec import ConvSpec, Layout, Rule

__all__ = ["SPECTRUM_LIMIT_BYTES", "FftFull", "spectrum_bytes", "variants"]

FAMILY = "fft"

#: Largest kernel spectrum (bytes, complex64) the FFT primitive accepts.
SPECTRUM_LIMIT_BYTES = 1 << 30


def spectrum_bytes(spec: ConvSpec) -> int:
    """Bytes of the complex64 kernel spectrum of ``spec``."""
    return spec.k * spec.c * spec.padded * (spec.padded // 2 + 1) * 8


def _complex(dtype: torch.dtype) -> torch.dtype:
    return torch.complex128 if dtype == torch.float64 else torch.complex64


class FftFull(Primitive):
    """``fft``: whole-image real FFT, per-frequency channel contraction, inverse FFT, crop."""

    def _prepare(self, weight: torch.Tensor, spec: ConvSpec) -> tuple[torch.Tensor, torch.Tensor | None]:
        n = spec.padded
        spectrum = torch.fft.rfft2(weight.double().flip(-2, -1), s=(n, n))  # (k, c, n, n//2 + 1)
        spectrum = spectrum.permute(2, 3, 0, 1).reshape(-1, spec.k, spec.c)  # (frequencies, k, c)
        return spectrum.to(_complex(weight.dtype)).contiguous(), None

    def _execute(self, x: torch.Tensor, prepared: Prepared) -> torch.Tensor:
        sp, wf = prepared.spec, prepared.weight
        n = sp.padded
        xf = torch.fft.rfft2(pad_chw(x, sp.pad))  # (c, n, n//2 + 1)
        yf = torch.bmm(wf, xf.reshape(sp.c, -1).t().unsqueeze(-1))  # (frequencies, k, 1)
        y = torch.fft.irfft2(yf.squeeze(-1).t().reshape(sp.k, n, n // 2 + 1), s=(n, n))
        return y[:, sp.f - 1:, sp.f - 1:].contiguous()


def variants() -> tuple[Primitive, ...]:
    """The FFT primitives (1)."""
    rule = Rule(strides=frozenset({1}), extra=lambda spec: spectrum_bytes(spec) <= SPECTRUM_LIMIT_BYTES,
                extra_text="kernel spectrum k c (im+2p) ((im+2p)//2+1) x 8 B <= 1 GiB")
    return (
        FftFull(PrimitiveInfo(
            "fft", FAMILY, Layout.CHW, Layout.CHW, rule,
            "real 2-D FFT of the padded image, per-frequency (k, c) x (c,) products, inverse FFT, crop",
            "kernel spectrum rfft2(flipped kernel) at the padded image size, (frequencies, k, c), in float64",
            rel_tolerance=1e-5)),  # measured <= 4e-7, im up to 112
    )
