"""Small tensor helpers shared by the primitive families (padding, strided windows, shifted ranges)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["pad_chw", "pad_hcw", "pad_hwc", "shifted_range", "window"]


def pad_chw(x: torch.Tensor, p: int, extra_h: int = 0, extra_w: int = 0) -> torch.Tensor:
    """Zero-pad a ``(c, h, w)`` tensor by ``p`` on every side plus ``extra_*`` at the bottom/right.

    Parameters
    ----------
    x
        The ``chw`` tensor.
    p
        Zeros on every side of the height and width axes.
    extra_h, extra_w
        Further zeros below and to the right.

    Returns
    -------
    torch.Tensor
        The padded tensor; ``x`` itself when nothing is padded.
    """
    if p == 0 and extra_h == 0 and extra_w == 0:
        return x
    return F.pad(x, (p, p + extra_w, p, p + extra_h))


def pad_hwc(x: torch.Tensor, p: int, extra_h: int = 0, extra_w: int = 0) -> torch.Tensor:
    """Zero-pad a ``(h, w, c)`` tensor by ``p`` on every side plus ``extra_*`` at the bottom/right.

    Parameters
    ----------
    x
        The ``hwc`` tensor.
    p
        Zeros on every side of the height and width axes.
    extra_h, extra_w
        Further zeros below and to the right.

    Returns
    -------
    torch.Tensor
        The padded tensor; ``x`` itself when nothing is padded.
    """
    if p == 0 and extra_h == 0 and extra_w == 0:
        return x
    return F.pad(x, (0, 0, p, p + extra_w, p, p + extra_h))


def pad_hcw(x: torch.Tensor, p: int) -> torch.Tensor:
    """Zero-pad a ``(h, c, w)`` tensor by ``p`` on every side of ``h`` and ``w``.

    Parameters
    ----------
    x
        The ``hcw`` tensor.
    p
        Zeros on every side of the height and width axes.

    Returns
    -------
    torch.Tensor
        The padded tensor; ``x`` itself when ``p == 0``.
    """
    if p == 0:
        return x
    return F.pad(x, (p, p, 0, 0, p, p))


def window(start: int, n: int, s: int) -> slice:
    """The slice of ``n`` indices ``start, start + s, ..., start + s (n - 1)``.

    Parameters
    ----------
    start
        First index.
    n
        Number of indices.
    s
        Step (the stride).

    Returns
    -------
    slice
        ``slice(start, start + s (n - 1) + 1, s)``.
    """
    return slice(start, start + s * (n - 1) + 1, s)


def shifted_range(n_out: int, n_in: int, d: int) -> tuple[int, int]:
    """Output indices ``[a, b)`` whose input index ``i + d`` lies in ``[0, n_in)`` (empty when ``a >= b``).

    Parameters
    ----------
    n_out
        Number of output indices ``i`` (``0 <= i < n_out``).
    n_in
        Number of input indices.
    d
        The shift from an output index to the input index it reads.

    Returns
    -------
    tuple of int
        ``(a, b)``.
    """
    return max(0, -d), min(n_out, n_in - d)
