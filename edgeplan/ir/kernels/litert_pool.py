"""How litert-torch and the TFLite converter write an average pooling (:mod:`edgeplan.ir.kernels.litert`).

litert-torch wraps ``aten.avg_pool2d`` in a StableHLO composite that the TFLite converter turns into
``AVERAGE_POOL_2D``, except where the composite cannot express it (its ``build_aten_composite_pass``): a pooling
that does not count the padding in ceil mode, or with a padding that is neither none nor the symmetric SAME padding.
Those are lowered by their decomposition: a ``reduce_window`` sum of the input (the padding made explicit, ceil mode
adding padding at the end), divided by a ``reduce_window`` sum of ones of shape (1, H, W, 1) with the same window,
the count of the input's positions in each window. The converter's ``LegalizeAvgPool`` turns that division back into
one ``AVERAGE_POOL_2D`` when the padding is TFLite's SAME padding or none (a ceil mode that adds no padding);
otherwise the file has the two ``STABLEHLO_REDUCE_WINDOW`` operators and the ``DIV``, and the division's counts are
shared by the poolings with the same window over inputs of the same size (common subexpression elimination). A
composite of a pooling that does not count a SAME padding with a stride over 1 is not converted: it stays a
``STABLEHLO_COMPOSITE`` that runs in NCHW.
"""

from __future__ import annotations

from edgeplan.ir.graph import Node
from edgeplan.ir.kernels.litert_passes import same_padding
from edgeplan.ir.ops import ConvAttrs, PoolAttrs, PoolMode

__all__ = ["POOL", "REDUCE_WINDOW", "COMPOSITE", "avg_pool_form", "window_padding"]

#: One ``AVERAGE_POOL_2D`` (after a ``PAD`` where it counts a padding that is not SAME).
POOL = "pool"
#: A ``STABLEHLO_REDUCE_WINDOW`` of the input, one of ones (the counts) and the ``DIV`` of the two.
REDUCE_WINDOW = "reduce_window"
#: An unconverted ``STABLEHLO_COMPOSITE``, in NCHW.
COMPOSITE = "composite"


def window_padding(node: Node) -> tuple[int, int, int, int]:
    """A pooling's or a convolution's padding (top, left, bottom, right), with ceil mode's extra padding at the end
    (the window's last positions read past the padded input), as the decomposition's ``reduce_window`` pads."""
    a = node.attrs
    assert isinstance(a, (PoolAttrs, ConvAttrs))
    h, w = node.input_shapes[0][2], node.input_shapes[0][3]
    oh, ow = node.output_shapes[0][2], node.output_shapes[0][3]
    top, left, bottom, right = a.padding
    bottom = max(bottom, (oh - 1) * a.stride[0] + (a.kernel[0] - 1) * a.dilation[0] + 1 - h - top)
    right = max(right, (ow - 1) * a.stride[1] + (a.kernel[1] - 1) * a.dilation[1] + 1 - w - left)
    return top, left, bottom, right


def avg_pool_form(node: Node) -> str:
    """How the converter writes the pooling ``node``: :data:`POOL`, :data:`REDUCE_WINDOW` or :data:`COMPOSITE`
    (see the module's docstring); :data:`POOL` for any node that is not a 2-D average pooling."""
    a = node.attrs
    if (not isinstance(a, PoolAttrs) or a.mode is not PoolMode.AVG or a.count_include_pad or not node.input_shapes
            or len(node.input_shapes[0]) != 4):
        return POOL
    size = (node.input_shapes[0][2], node.input_shapes[0][3])
    same = same_padding(size, a.kernel, a.stride, a.dilation)
    symmetric_same = same == a.padding and same[:2] == same[2:]  # litert-torch's is_same_padding
    if not a.ceil_mode and (not any(a.padding) or symmetric_same):  # the composite
        return POOL if not any(a.padding) or a.stride == (1, 1) else COMPOSITE
    pads = window_padding(node)  # ceil mode that adds no padding leaves a plain pooling
    legal = all(pads[i::2] in ((0, 0), same[i::2]) for i in (0, 1))  # per axis: none or SAME
    return POOL if legal else REDUCE_WINDOW
