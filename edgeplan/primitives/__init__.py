"""Executable convolution primitives (mulder2020 §3.1) and the data-layout transformations between them.

Every primitive is a :class:`Primitive` with a unique name, a family, an input and an output data layout
(:class:`Layout`: ``chw``, ``hcw`` or ``hwc``) and an applicability :class:`Rule`; it is written in PyTorch tensor
operations (only the ``runtime`` family calls a library convolution) and checked against
:func:`torch.nn.functional.conv2d` by the test suite. A layer is a :class:`ConvSpec` ``(c, k, im, f, s)`` with
'same'-style padding by default (see :mod:`edgeplan.primitives.spec` for the output size).

Usage::

    from edgeplan.primitives import ConvSpec, get_primitive, from_chw
    prim = get_primitive("winograd-2x2-3x3")
    spec = ConvSpec(c=64, k=64, im=56, f=3, s=1)
    prepared = prim.prepare(weight, bias, spec=spec)       # once per layer, not timed
    y = prim.execute(from_chw(x, prim.input_layout), prepared)  # timed; y is in prim.output_layout

Modules: :mod:`~edgeplan.primitives.spec` (layers, layouts, rules; no torch), :mod:`~edgeplan.primitives.layouts`
(the nine transformations), :mod:`~edgeplan.primitives.base` (the interface), one module per family
(``direct``, ``im2``, ``kn2``, ``winograd``, ``conv1x1``, ``mec``, ``fft``, ``runtime``),
:mod:`~edgeplan.primitives.registry` and :mod:`~edgeplan.primitives.reference` (the exact convolution and the
error measure of the stated tolerances). Importing this package does not import torch; the names below that need it
load their module on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from edgeplan.primitives.spec import LAYOUTS, ConvSpec, Layout, Rule

if TYPE_CHECKING:
    from edgeplan.primitives.base import Prepared, Primitive, PrimitiveInfo
    from edgeplan.primitives.layouts import TRANSFORMS, from_chw, to_chw, transform, transform_name
    from edgeplan.primitives.reference import reference_conv2d, relative_error
    from edgeplan.primitives.registry import FAMILIES, all_primitives, applicable, get_primitive, primitive_names

__all__ = [
    "FAMILIES",
    "LAYOUTS",
    "TRANSFORMS",
    "ConvSpec",
    "Layout",
    "Prepared",
    "Primitive",
    "PrimitiveInfo",
    "Rule",
    "all_primitives",
    "applicable",
    "from_chw",
    "get_primitive",
    "primitive_names",
    "reference_conv2d",
    "relative_error",
    "to_chw",
    "transform",
    "transform_name",
]

_LAZY = {
    "Prepared": "base", "Primitive": "base", "PrimitiveInfo": "base",
    "TRANSFORMS": "layouts", "from_chw": "layouts", "to_chw": "layouts", "transform": "layouts",
    "transform_name": "layouts",
    "FAMILIES": "registry", "all_primitives": "registry", "applicable": "registry", "get_primitive": "registry",
    "primitive_names": "registry",
    "reference_conv2d": "reference", "relative_error": "reference",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
