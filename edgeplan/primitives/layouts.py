"""The nine data-layout transformations between ``chw``, ``hcw`` and ``hwc`` (identity included).

Each transformation takes a 3-D tensor stored contiguously in its source layout and returns one stored
contiguously in its target layout (a real copy, whose cost the profiling campaign measures). The three identities
return their argument unchanged: mulder2020 §3.2.2 counts them with cost zero.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from edgeplan.errors import InvalidInputError
from edgeplan.primitives.spec import Layout

__all__ = [
    "TRANSFORMS",
    "chw_to_chw",
    "chw_to_hcw",
    "chw_to_hwc",
    "from_chw",
    "hcw_to_chw",
    "hcw_to_hcw",
    "hcw_to_hwc",
    "hwc_to_chw",
    "hwc_to_hcw",
    "hwc_to_hwc",
    "to_chw",
    "transform",
    "transform_name",
]

Transform = Callable[[torch.Tensor], torch.Tensor]


def _check(x: torch.Tensor, name: str) -> None:
    if x.dim() != 3:
        raise InvalidInputError(f"{name}: expected a 3-D activation (batch 1, no batch axis), got shape "
                                f"{tuple(x.shape)}")


def _permuted(x: torch.Tensor, dims: tuple[int, int, int], name: str) -> torch.Tensor:
    _check(x, name)
    return x.permute(dims).contiguous()


def chw_to_chw(x: torch.Tensor) -> torch.Tensor:
    """Identity on ``chw``: returns ``x`` itself (cost zero)."""
    _check(x, "chw-to-chw")
    return x


def chw_to_hcw(x: torch.Tensor) -> torch.Tensor:
    """``(c, h, w)`` -> ``(h, c, w)``, contiguous."""
    return _permuted(x, (1, 0, 2), "chw-to-hcw")


def chw_to_hwc(x: torch.Tensor) -> torch.Tensor:
    """``(c, h, w)`` -> ``(h, w, c)``, contiguous."""
    return _permuted(x, (1, 2, 0), "chw-to-hwc")


def hcw_to_chw(x: torch.Tensor) -> torch.Tensor:
    """``(h, c, w)`` -> ``(c, h, w)``, contiguous."""
    return _permuted(x, (1, 0, 2), "hcw-to-chw")


def hcw_to_hcw(x: torch.Tensor) -> torch.Tensor:
    """Identity on ``hcw``: returns ``x`` itself (cost zero)."""
    _check(x, "hcw-to-hcw")
    return x


def hcw_to_hwc(x: torch.Tensor) -> torch.Tensor:
    """``(h, c, w)`` -> ``(h, w, c)``, contiguous."""
    return _permuted(x, (0, 2, 1), "hcw-to-hwc")


def hwc_to_chw(x: torch.Tensor) -> torch.Tensor:
    """``(h, w, c)`` -> ``(c, h, w)``, contiguous."""
    return _permuted(x, (2, 0, 1), "hwc-to-chw")


def hwc_to_hcw(x: torch.Tensor) -> torch.Tensor:
    """``(h, w, c)`` -> ``(h, c, w)``, contiguous."""
    return _permuted(x, (0, 2, 1), "hwc-to-hcw")


def hwc_to_hwc(x: torch.Tensor) -> torch.Tensor:
    """Identity on ``hwc``: returns ``x`` itself (cost zero)."""
    _check(x, "hwc-to-hwc")
    return x


#: The nine transformations, keyed by (source, target) layout.
TRANSFORMS: dict[tuple[Layout, Layout], Transform] = {
    (Layout.CHW, Layout.CHW): chw_to_chw,
    (Layout.CHW, Layout.HCW): chw_to_hcw,
    (Layout.CHW, Layout.HWC): chw_to_hwc,
    (Layout.HCW, Layout.CHW): hcw_to_chw,
    (Layout.HCW, Layout.HCW): hcw_to_hcw,
    (Layout.HCW, Layout.HWC): hcw_to_hwc,
    (Layout.HWC, Layout.CHW): hwc_to_chw,
    (Layout.HWC, Layout.HCW): hwc_to_hcw,
    (Layout.HWC, Layout.HWC): hwc_to_hwc,
}


def transform_name(src: Layout | str, dst: Layout | str) -> str:
    """The mulder2021 column name of a transformation, e.g. ``chw-to-hwc``.

    Parameters
    ----------
    src, dst
        Source and target layouts (a :class:`Layout` or its name).

    Returns
    -------
    str
        ``"{src}-to-{dst}"``.

    Raises
    ------
    InvalidInputError
        If a layout name is unknown.
    """
    return f"{Layout.parse(src).value}-to-{Layout.parse(dst).value}"


def transform(x: torch.Tensor, src: Layout | str, dst: Layout | str) -> torch.Tensor:
    """Convert ``x`` from layout ``src`` to layout ``dst``.

    Parameters
    ----------
    x
        A 3-D activation stored in ``src``.
    src, dst
        Source and target layouts (a :class:`Layout` or its name).

    Returns
    -------
    torch.Tensor
        ``x`` in ``dst``, contiguous; ``x`` itself when ``src == dst``.

    Raises
    ------
    InvalidInputError
        If a layout name is unknown or ``x`` is not 3-D.
    """
    return TRANSFORMS[(Layout.parse(src), Layout.parse(dst))](x)


def from_chw(x: torch.Tensor, layout: Layout | str) -> torch.Tensor:
    """A ``chw`` activation in ``layout`` (shorthand for ``transform(x, "chw", layout)``).

    Parameters
    ----------
    x
        A 3-D activation stored in ``chw``.
    layout
        The target layout.

    Returns
    -------
    torch.Tensor
        ``x`` in ``layout``, contiguous; ``x`` itself when ``layout`` is ``chw``.
    """
    return transform(x, Layout.CHW, layout)


def to_chw(x: torch.Tensor, layout: Layout | str) -> torch.Tensor:
    """An activation stored in ``layout`` as ``chw`` (shorthand for ``transform(x, layout, "chw")``).

    Parameters
    ----------
    x
        A 3-D activation stored in ``layout``.
    layout
        Its layout.

    Returns
    -------
    torch.Tensor
        ``x`` in ``chw``, contiguous; ``x`` itself when ``layout`` is ``chw``.
    """
    return transform(x, layout, Layout.CHW)
