"""The registry of every primitive variant, by name and family.

The families, in the order they are listed (mulder2020 Table 6, then FFT and PyTorch's own backends):
``direct-sum2d``, ``im2``, ``kn2``, ``wino3``, ``wino5``, ``conv-1x1``, ``mec``, ``fft``, ``runtime``.
"""

from __future__ import annotations

import difflib
import functools

from edgeplan.errors import InvalidInputError
from edgeplan.primitives import conv1x1, direct, fft, im2, kn2, mec, runtime, winograd
from edgeplan.primitives.base import Primitive
from edgeplan.primitives.spec import ConvSpec

__all__ = ["FAMILIES", "all_primitives", "applicable", "get_primitive", "primitive_names"]

#: Family names in listing order.
FAMILIES: tuple[str, ...] = (
    "direct-sum2d", "im2", "kn2", "wino3", "wino5", "conv-1x1", "mec", "fft", "runtime")


@functools.cache
def all_primitives() -> tuple[Primitive, ...]:
    """Every primitive variant, grouped by family in :data:`FAMILIES` order (built once).

    Raises
    ------
    InvalidInputError
        If two variants share a name or a variant declares an unknown family (a bug in a family module).
    """
    found = (*direct.variants(), *im2.variants(), *kn2.variants(), *winograd.variants(), *conv1x1.variants(),
             *mec.variants(), *fft.variants(), *runtime.variants())
    names = [p.name for p in found]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise InvalidInputError(f"primitive names declared twice: {', '.join(duplicates)}")
    unknown = sorted({p.family for p in found} - set(FAMILIES))
    if unknown:
        raise InvalidInputError(f"primitive families not in FAMILIES: {', '.join(unknown)}")
    return tuple(sorted(found, key=lambda p: FAMILIES.index(p.family)))


def primitive_names() -> tuple[str, ...]:
    """Names of every primitive, in registry order."""
    return tuple(p.name for p in all_primitives())


def get_primitive(name: str) -> Primitive:
    """The primitive called ``name``.

    Raises
    ------
    InvalidInputError
        If no primitive has that name (the message suggests close names).
    """
    for prim in all_primitives():
        if prim.name == name:
            return prim
    close = difflib.get_close_matches(name, primitive_names(), n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else "; see `edgeplan primitives list`"
    raise InvalidInputError(f"unknown primitive {name!r}{hint}")


def applicable(spec: ConvSpec, family: str | None = None) -> tuple[Primitive, ...]:
    """The primitives (of ``family``, or all) whose rule admits the layer ``spec``.

    Parameters
    ----------
    spec
        The layer.
    family
        One of :data:`FAMILIES`, or ``None`` for every family.

    Returns
    -------
    tuple of Primitive
        In registry order.

    Raises
    ------
    InvalidInputError
        If ``family`` is not one of :data:`FAMILIES`.
    """
    if family is not None and family not in FAMILIES:
        raise InvalidInputError(f"unknown primitive family {family!r}; use one of {', '.join(FAMILIES)}")
    return tuple(p for p in all_primitives() if (family is None or p.family == family) and p.applies(spec))
