"""Per-kind consistency rules used by :meth:`Graph.validate`.

Each rule returns a description of the problem, or the empty string when the node is consistent.
"""

from __future__ import annotations

from collections.abc import Callable

from edgeplan.ir.metrics import NodeLike, numel
from edgeplan.ir.ops import (
    AxisAttrs,
    ChannelShuffleAttrs,
    ConvAttrs,
    ConvTransposeAttrs,
    LinearAttrs,
    OpKind,
    PoolAttrs,
    SplitAttrs,
    UnfoldAttrs,
)

__all__ = ["broadcast_shapes", "check_node", "conv_output_size", "unfold_output_shape"]

# (min inputs, max inputs, outputs or -1 for "at least one")
_ARITY: dict[OpKind, tuple[int, int, int]] = {
    OpKind.INPUT: (0, 0, 1),
    OpKind.CONSTANT: (0, 0, 1),
    OpKind.ELTWISE: (1, 2, 1),
    OpKind.MATMUL: (2, 2, 1),
    OpKind.ATTENTION: (3, 4, 1),
    OpKind.CONCAT: (1, 10_000, 1),
    OpKind.STACK: (1, 10_000, 1),
    OpKind.SPLIT: (1, 1, -1),
    OpKind.OPAQUE: (0, 10_000, -1),
}
_DEFAULT_ARITY = (1, 1, 1)


def conv_output_size(size: int, kernel: int, stride: int, pad_total: int, dilation: int, ceil: bool = False) -> int:
    """Output length of a convolution or pooling window along one axis."""
    span = size + pad_total - dilation * (kernel - 1) - 1
    steps = -(-span // stride) if ceil else span // stride
    return steps + 1


def broadcast_shapes(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    """NumPy broadcasting of two shapes, or None when they do not broadcast."""
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x != y and 1 not in (x, y):
            return None
        out.append(max(x, y))
    return tuple(reversed(out))


def _check_arity(node: NodeLike) -> str:
    lo, hi, n_out = _ARITY.get(node.kind, _DEFAULT_ARITY)
    if not lo <= len(node.inputs) <= hi:
        return f"takes {lo}..{hi} inputs, has {len(node.inputs)}"
    if n_out == -1 and not node.output_shapes:
        return "has no outputs"
    if n_out >= 0 and len(node.output_shapes) != n_out:
        return f"must have {n_out} output(s), has {len(node.output_shapes)}"
    return ""


def _check_conv(node: NodeLike) -> str:
    a = node.attrs
    assert isinstance(a, ConvAttrs)
    x, y = node.input_shapes[0], node.output_shapes[0]
    if len(x) != 4 or len(y) != 4:
        return f"expects 4-D NCHW tensors, got {x} -> {y}"
    if a.groups < 1 or a.in_channels % a.groups or a.out_channels % a.groups:
        return f"groups={a.groups} must divide in_channels={a.in_channels} and out_channels={a.out_channels}"
    if x[1] != a.in_channels or y[1] != a.out_channels:
        return f"channels {x[1]}->{y[1]} disagree with attributes {a.in_channels}->{a.out_channels}"
    for axis in (0, 1):
        expect = conv_output_size(
            x[2 + axis], a.kernel[axis], a.stride[axis], a.padding[axis] + a.padding[axis + 2], a.dilation[axis]
        )
        if y[2 + axis] != expect:
            return f"output size {y[2:]} does not follow from input {x[2:]} and kernel/stride/padding/dilation"
    return ""


def _check_conv_transpose(node: NodeLike) -> str:
    a = node.attrs
    assert isinstance(a, ConvTransposeAttrs)
    x, y = node.input_shapes[0], node.output_shapes[0]
    if len(x) != 4 or len(y) != 4:
        return f"expects 4-D NCHW tensors, got {x} -> {y}"
    if x[1] != a.in_channels or y[1] != a.out_channels:
        return f"channels {x[1]}->{y[1]} disagree with attributes {a.in_channels}->{a.out_channels}"
    for axis in (0, 1):
        expect = (
            (x[2 + axis] - 1) * a.stride[axis]
            - a.padding[axis]
            - a.padding[axis + 2]
            + a.dilation[axis] * (a.kernel[axis] - 1)
            + a.output_padding[axis]
            + 1
        )
        if y[2 + axis] != expect:
            return f"output size {y[2:]} does not follow from input {x[2:]} and the attributes"
    return ""


def _check_linear(node: NodeLike) -> str:
    a = node.attrs
    assert isinstance(a, LinearAttrs)
    x, y = node.input_shapes[0], node.output_shapes[0]
    if x[-1] != a.in_features or y[-1] != a.out_features or x[:-1] != y[:-1]:
        return f"shapes {x} -> {y} disagree with in_features={a.in_features}, out_features={a.out_features}"
    return ""


def _check_pool(node: NodeLike) -> str:
    a = node.attrs
    assert isinstance(a, PoolAttrs)
    x, y = node.input_shapes[0], node.output_shapes[0]
    if len(x) != 4 or x[:2] != y[:2]:
        return f"pooling must keep batch and channels of a 4-D tensor, got {x} -> {y}"
    return ""


def _check_eltwise(node: NodeLike) -> str:
    shapes = node.input_shapes
    const = getattr(node.attrs, "const_shape", None)
    if len(shapes) == 1:  # the constant operand broadcasts too (a (1, 1, 1, C) scale of a (1, 1, C) tensor)
        out = shapes[0] if const is None else broadcast_shapes(shapes[0], tuple(const))
    else:
        out = broadcast_shapes(shapes[0], shapes[1])
    if out is None or out != node.output_shapes[0]:
        return f"operands {shapes} do not broadcast to the output {node.output_shapes[0]}"
    return ""


def _check_concat(node: NodeLike) -> str:
    a = node.attrs
    assert isinstance(a, AxisAttrs)
    y = node.output_shapes[0]
    axis = a.axis % len(y)
    total = 0
    for s in node.input_shapes:
        if len(s) != len(y) or any(s[i] != y[i] for i in range(len(y)) if i != axis):
            return f"input {s} does not match output {y} outside axis {a.axis}"
        total += s[axis]
    if total != y[axis]:
        return f"inputs sum to {total} along axis {a.axis}, output has {y[axis]}"
    return ""


def _check_split(node: NodeLike) -> str:
    a = node.attrs
    assert isinstance(a, SplitAttrs)
    x = node.input_shapes[0]
    axis = a.axis % len(x)
    if sum(a.sizes) != x[axis] or len(a.sizes) != len(node.output_shapes):
        return f"sizes {a.sizes} do not split axis {a.axis} of {x} into {len(node.output_shapes)} outputs"
    pieces = [x[:axis] + (size,) * (not a.squeeze) + x[axis + 1:] for size in a.sizes]
    if a.squeeze and any(size != 1 for size in a.sizes):
        return f"squeeze needs pieces of 1, got sizes {a.sizes}"
    if [tuple(s) for s in node.output_shapes] != pieces:
        return f"outputs {list(node.output_shapes)} are not the pieces {pieces} of {x}"
    return ""


def _check_same_numel(node: NodeLike) -> str:
    if numel(node.input_shapes[0]) != numel(node.output_shapes[0]):
        return f"changes the number of elements: {node.input_shapes[0]} -> {node.output_shapes[0]}"
    return ""


def _check_shuffle(node: NodeLike) -> str:
    a = node.attrs
    assert isinstance(a, ChannelShuffleAttrs)
    if node.input_shapes[0][1] % a.groups:
        return f"groups={a.groups} does not divide {node.input_shapes[0][1]} channels"
    return _check_same_numel(node)


def unfold_output_shape(a: UnfoldAttrs, x: tuple[int, ...]) -> tuple[int, ...] | None:
    """The output shape of an :class:`~edgeplan.ir.ops.UnfoldAttrs` node of input shape ``x``, or None when the
    input cannot be unfolded so."""
    if a.mode == "unfold":
        if not x or not 0 <= a.axis < len(x) or a.size < 1 or a.step < 1 or x[a.axis] < a.size:
            return None
        return (*x[:a.axis], (x[a.axis] - a.size) // a.step + 1, *x[a.axis + 1:], a.size)
    if a.mode == "im2col":
        if len(x) != 4:
            return None
        blocks = [conv_output_size(x[2 + i], a.kernel[i], a.stride[i], 2 * a.padding[i], a.dilation[i])
                  for i in (0, 1)]
        return None if min(blocks) < 1 else (x[0], x[1] * a.kernel[0] * a.kernel[1], blocks[0] * blocks[1])
    if a.mode == "col2im":
        window = a.kernel[0] * a.kernel[1]
        blocks = [conv_output_size(a.output_size[i], a.kernel[i], a.stride[i], 2 * a.padding[i], a.dilation[i])
                  for i in (0, 1)]
        if len(x) != 3 or window < 1 or x[1] % window or min(blocks) < 1 or x[2] != blocks[0] * blocks[1]:
            return None
        return (x[0], x[1] // window, *a.output_size)
    return None


def _check_unfold(node: NodeLike) -> str:
    a = node.attrs
    assert isinstance(a, UnfoldAttrs)
    if a.mode not in ("unfold", "im2col", "col2im"):
        return f"unknown unfold mode {a.mode!r} (unfold, im2col or col2im)"
    expect = unfold_output_shape(a, node.input_shapes[0])
    if expect != node.output_shapes[0]:
        return (f"{a.mode} of {node.input_shapes[0]} gives {expect}, not {node.output_shapes[0]}" if expect
                else f"{a.mode} cannot apply to an input of shape {node.input_shapes[0]} with its attributes")
    return ""


_SAME_SHAPE = frozenset(
    {OpKind.BATCH_NORM, OpKind.LAYER_NORM, OpKind.GROUP_NORM, OpKind.ACTIVATION, OpKind.SOFTMAX, OpKind.DROPOUT,
     OpKind.LRN, OpKind.CONVERT}
)

_RULES: dict[OpKind, Callable[[NodeLike], str]] = {
    OpKind.CONV2D: _check_conv,
    OpKind.CONV_TRANSPOSE2D: _check_conv_transpose,
    OpKind.LINEAR: _check_linear,
    OpKind.POOL2D: _check_pool,
    OpKind.ELTWISE: _check_eltwise,
    OpKind.CONCAT: _check_concat,
    OpKind.SPLIT: _check_split,
    OpKind.FLATTEN: _check_same_numel,
    OpKind.RESHAPE: _check_same_numel,
    OpKind.PERMUTE: _check_same_numel,
    OpKind.CHANNEL_SHUFFLE: _check_shuffle,
    OpKind.UNFOLD: _check_unfold,
}


def check_node(node: NodeLike) -> str:
    """Describe the first inconsistency of ``node`` with its kind, or return ``""``."""
    problem = _check_arity(node)
    if problem:
        return problem
    if node.kind in _SAME_SHAPE and node.input_shapes[0] != node.output_shapes[0]:
        return f"must keep its input shape, got {node.input_shapes[0]} -> {node.output_shapes[0]}"
    rule = _RULES.get(node.kind)
    return rule(node) if rule else ""
