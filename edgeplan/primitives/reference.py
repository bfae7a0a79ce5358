"""The exact reference convolution and the error measure the primitives' tolerances are stated in.

A primitive's output ``y`` is compared with the convolution ``y_ref`` of the same (float32-rounded) input and
weights computed by :func:`torch.nn.functional.conv2d` in float64. The error is

    ``max_i |y_i - y_ref_i| / max(max_i |y_ref_i|, max_i sqrt(sum_j (w_j x_j)^2 + b^2))``

i.e. relative to the largest output, except when cancellation makes every output small: the second term is the
magnitude of the products summed into an output (the root of their sum of squares), which is what float32
rounding errors scale with, and is never small by cancellation. On any layer with more than a few outputs the
first term dominates and the measure is the plain ``max |y - y_ref| / max |y_ref|``.
:attr:`~edgeplan.primitives.base.PrimitiveInfo.rel_tolerance` bounds this measure.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from edgeplan.errors import InvalidInputError
from edgeplan.primitives.spec import ConvSpec

__all__ = ["reference_conv2d", "relative_error"]


def _check(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, spec: ConvSpec) -> None:
    if tuple(x.shape) != (spec.c, spec.im, spec.im):
        raise InvalidInputError(f"reference for layer {spec.describe()}: expected a chw input of shape "
                                f"{(spec.c, spec.im, spec.im)}, got {tuple(x.shape)}")
    if tuple(weight.shape) != spec.weight_shape:
        raise InvalidInputError(f"reference for layer {spec.describe()}: expected weight shape {spec.weight_shape}, "
                                f"got {tuple(weight.shape)}")
    if bias is not None and tuple(bias.shape) != (spec.k,):
        raise InvalidInputError(f"reference for layer {spec.describe()}: expected bias shape {(spec.k,)}, "
                                f"got {tuple(bias.shape)}")


def _conv64(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, spec: ConvSpec) -> torch.Tensor:
    b = None if bias is None else bias.double()
    return F.conv2d(x.double()[None], weight.double(), b, stride=spec.s, padding=spec.pad)[0]


def reference_conv2d(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                     spec: ConvSpec) -> torch.Tensor:
    """The exact output of layer ``spec``: :func:`torch.nn.functional.conv2d` in float64.

    Parameters
    ----------
    x
        The ``chw`` input, shape ``(c, im, im)`` (any floating dtype; converted to float64 exactly).
    weight, bias
        ``(k, c, f, f)`` kernel and ``(k,)`` bias or ``None``.
    spec
        The layer (its stride and padding are used).

    Returns
    -------
    torch.Tensor
        The float64 ``chw`` output, shape ``(k, out, out)``.

    Raises
    ------
    InvalidInputError
        If a tensor's shape does not match ``spec``.
    """
    _check(x, weight, bias, spec)
    with torch.no_grad():
        return _conv64(x, weight, bias, spec)


def relative_error(y: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                   spec: ConvSpec) -> float:
    """The error of a ``chw`` output ``y`` of layer ``spec`` against the exact convolution (module docstring).

    Parameters
    ----------
    y
        The output to check, in ``chw`` (use :func:`~edgeplan.primitives.layouts.to_chw` first).
    x, weight, bias
        The ``chw`` input, kernel and bias ``y`` was computed from.
    spec
        The layer.

    Returns
    -------
    float
        ``max |y - y_ref| / scale``; ``inf`` when ``y`` has the wrong shape or a non-finite value.

    Raises
    ------
    InvalidInputError
        If ``x``, ``weight`` or ``bias`` does not match ``spec``.
    """
    _check(x, weight, bias, spec)
    if tuple(y.shape) != (spec.k, spec.out, spec.out):
        return float("inf")
    with torch.no_grad():
        ref = _conv64(x, weight, bias, spec)
        squares = _conv64(x.double() ** 2, weight.double() ** 2, None if bias is None else bias.double() ** 2, spec)
        scale = max(ref.abs().max().item(), squares.max().sqrt().item())
        diff = (y.double() - ref).abs().max().item()
    if not math.isfinite(diff):  # NaN or inf in y
        return float("inf")
    if scale == 0.0:
        return 0.0 if diff == 0.0 else float("inf")
    return diff / scale
