"""Handlers of the ATen operators that combine, cut, move, reshape, pad or resample tensors, and the element-wise
binary operators.
"""

from __future__ import annotations

import math
from typing import Any

from edgeplan.errors import UnsupportedOperatorError
from edgeplan.frontends.aten_handlers.registry import Handler, _register
from edgeplan.frontends.aten_values import Act, Call, Chain, Const, Emit
from edgeplan.ir import EltwiseOp, OpKind
from edgeplan.ir.ops import (
    NO_ATTRS,
    AxisAttrs,
    ChannelShuffleAttrs,
    DropoutAttrs,
    EltwiseAttrs,
    FlattenAttrs,
    MatMulAttrs,
    MeanAttrs,
    PadAttrs,
    PermuteAttrs,
    ReshapeAttrs,
    SliceAttrs,
    SplitAttrs,
    UpsampleAttrs,
)


def _binary(op: EltwiseOp, reverse: bool = False) -> Handler:
    def handler(call: Call) -> Any:
        a, b = call.args[0], call.args[1]
        acts = tuple(v for v in (a, b) if isinstance(v, Act))
        if len(acts) == 2:
            return Emit(OpKind.ELTWISE, EltwiseAttrs(op), (b, a) if reverse else (a, b))
        other = b if isinstance(a, Act) else a
        # x + 0, 0 + x, x * 1, x - 0, x / 1 are x; 0 - x (rsub) and 1 / x are not.
        operand_first = isinstance(a, Act) and not reverse
        if (_is_identity(op, other) and acts[0].shape == call.out
                and (op in (EltwiseOp.ADD, EltwiseOp.MUL) or operand_first)):
            return acts[0]
        const_shape = other.shape if isinstance(other, Const) else ()
        value = float(other) if isinstance(other, (int, float)) and not isinstance(other, bool) else None
        return Emit(OpKind.ELTWISE, EltwiseAttrs(op, const_shape=const_shape, const_value=value), acts)

    return handler


def _is_identity(op: EltwiseOp, other: Any) -> bool:
    if not isinstance(other, (int, float)) or isinstance(other, bool):
        return False
    if op in (EltwiseOp.ADD, EltwiseOp.SUB):
        return other == 0
    return other == 1


for _name, _op in [("add", EltwiseOp.ADD), ("sub", EltwiseOp.SUB), ("mul", EltwiseOp.MUL), ("div", EltwiseOp.DIV)]:
    _register(_name)(_binary(_op))
_register("rsub")(_binary(EltwiseOp.SUB, reverse=True))


@_register("einsum")
def _einsum(call: Call) -> Emit:
    equation = str(call.args[0]).replace(" ", "")
    operands = list(call.args[1])
    lhs, _, out = equation.partition("->")
    terms = lhs.split(",")
    if len(operands) != 2 or "." in equation or not out:
        raise UnsupportedOperatorError(call.op, call.node_name, f"einsum {equation!r}: only explicit 2-operand forms")
    sizes: dict[str, int] = {}
    for term, operand in zip(terms, operands, strict=True):
        sizes.update(zip(term, operand.shape, strict=True))
    contraction = math.prod(size for index, size in sizes.items() if index not in out)
    return Emit(OpKind.MATMUL, MatMulAttrs(contraction=contraction, equation=equation), tuple(operands))


@_register("select")
def _select(call: Call) -> Emit:
    x = call.x
    axis = int(call.arg(1, "dim")) % len(x.shape)
    index = int(call.arg(2, "index"))
    index = index + x.shape[axis] if index < 0 else index
    return Emit(OpKind.SLICE, SliceAttrs(axis, index, index + 1, 1, squeeze=True), (x,))


@_register("cat", "concat", "concatenate")
def _cat(call: Call) -> Any:
    # an empty tensor adds nothing (timm's rotary attention: the prefix tokens q[:, :, :0] of a model without any)
    tensors = [t for t in call.args[0] if not (isinstance(t, Const) and 0 in t.shape)]
    if len(tensors) == 1:
        return tensors[0]
    axis = int(call.arg(1, "dim", 0))
    return Emit(OpKind.CONCAT, AxisAttrs(axis % len(call.out)), tuple(tensors))


@_register("stack")
def _stack(call: Call) -> Emit:
    axis = int(call.arg(1, "dim", 0)) % len(call.out)
    return Emit(OpKind.STACK, AxisAttrs(axis), tuple(call.args[0]))


@_register("expand", "expand_as", "broadcast_to")
def _expand(call: Call) -> Any:
    return call.x if call.out == call.x.shape else Emit(OpKind.EXPAND, NO_ATTRS, (call.x,))


@_register("repeat_interleave")
def _repeat_interleave(call: Call) -> Any:
    x, repeats, dim = call.x, call.arg(1, "repeats"), call.arg(2, "dim")
    if not isinstance(repeats, int) or dim is None:
        raise UnsupportedOperatorError(call.op, call.node_name, "only a whole number of repeats along one axis is "
                                       "modelled (not per-element repeats, nor the flattened form without dim)")
    if repeats == 1:
        return x
    axis = int(dim) % len(x.shape)
    one = (*x.shape[:axis + 1], 1, *x.shape[axis + 1:])
    many = (*x.shape[:axis + 1], repeats, *x.shape[axis + 1:])
    # each slice copied ``repeats`` times in a row: unsqueeze, expand, merge
    return Chain("aten.repeat_interleave", (
        Emit(OpKind.RESHAPE, ReshapeAttrs(one), (x,)),
        Emit(OpKind.EXPAND, NO_ATTRS, ()),
        Emit(OpKind.RESHAPE, ReshapeAttrs(call.out), ()),
    ), (one, many), ("unsqueeze", "", "merge"))


@_register("repeat")
def _repeat(call: Call) -> Any:
    x, repeats = call.x, tuple(int(r) for r in call.arg(1, "repeats"))
    if all(r == 1 for r in repeats) and len(repeats) == len(x.shape):
        return x
    shape = (1,) * (len(repeats) - len(x.shape)) + x.shape  # repeats may add leading axes
    one = tuple(d for s in shape for d in (1, s))
    many = tuple(d for r, s in zip(repeats, shape, strict=True) for d in (r, s))
    return Chain("aten.repeat", (  # the tensor tiled: an axis of 1 before each, expanded to its repeats, merged
        Emit(OpKind.RESHAPE, ReshapeAttrs(one), (x,)),
        Emit(OpKind.EXPAND, NO_ATTRS, ()),
        Emit(OpKind.RESHAPE, ReshapeAttrs(call.out), ()),
    ), (one, many), ("unsqueeze", "", "merge"))


@_register("new_zeros", "new_ones", "new_full", "new_empty", "zeros_like", "ones_like", "full_like", "empty_like")
def _fresh_constant(call: Call) -> Const:
    return Const(call.out)  # its values do not depend on the activation it was made from


@_register("split", "split_with_sizes", "chunk", "unsafe_split", "tensor_split", "split_copy")
def _split(call: Call) -> Any:
    axis = int(call.arg(2, "dim", 0)) % len(call.x.shape)
    sizes = tuple(s[axis] for s in call.out_shapes)
    if len(sizes) == 1:
        return [call.x]
    return Emit(OpKind.SPLIT, SplitAttrs(axis, sizes), (call.x,))


@_register("unbind", "unbind_copy")
def _unbind(call: Call) -> Any:
    axis = int(call.arg(1, "dim", 0)) % len(call.x.shape)
    return Emit(OpKind.SPLIT, SplitAttrs(axis, (1,) * call.x.shape[axis], squeeze=True), (call.x,))


@_register("slice")
def _slice(call: Call) -> Any:
    x = call.x
    if call.out == x.shape:
        return x
    if 0 in call.out:  # an empty slice: no data, whatever the activation (a concatenation drops it)
        return Const(call.out)
    axis = int(call.arg(1, "dim", 0)) % len(x.shape)
    size = x.shape[axis]
    start = call.arg(2, "start") or 0
    end = call.arg(3, "end")
    step = int(call.arg(4, "step", 1) or 1)
    start = max(0, start + size if start < 0 else start)
    end = size if end is None else min(size, end + size if end < 0 else end)
    return Emit(OpKind.SLICE, SliceAttrs(axis, int(start), int(end), step), (x,))


@_register("channel_shuffle", "native_channel_shuffle")
def _channel_shuffle(call: Call) -> Emit:
    return Emit(OpKind.CHANNEL_SHUFFLE, ChannelShuffleAttrs(int(call.arg(1, "groups"))), (call.x,))


@_register("flatten")
def _flatten(call: Call) -> Any:
    if call.out == call.x.shape:
        return call.x
    return Emit(OpKind.FLATTEN, FlattenAttrs(int(call.arg(1, "start_dim", 0)), int(call.arg(2, "end_dim", -1))),
                (call.x,))


@_register("view", "reshape", "_unsafe_view", "view_copy", "squeeze", "unsqueeze", "squeeze_copy", "unflatten",
           "reshape_as", "view_as")
def _reshape(call: Call) -> Any:
    if call.out == call.x.shape:
        return call.x
    return Emit(OpKind.RESHAPE, ReshapeAttrs(call.out), (call.x,))


@_register("permute", "permute_copy")
def _permute(call: Call) -> Any:
    rank = len(call.x.shape)
    dims = tuple(int(d) % rank for d in call.arg(1, "dims"))
    return call.x if dims == tuple(range(rank)) else Emit(OpKind.PERMUTE, PermuteAttrs(dims), (call.x,))


@_register("transpose", "t", "swapaxes")
def _transpose(call: Call) -> Any:
    rank = len(call.x.shape)
    if rank < 2:
        return call.x
    d0 = int(call.arg(1, "dim0", 0)) % rank
    d1 = int(call.arg(2, "dim1", 1)) % rank
    dims = list(range(rank))
    dims[d0], dims[d1] = dims[d1], dims[d0]
    return call.x if d0 == d1 else Emit(OpKind.PERMUTE, PermuteAttrs(tuple(dims)), (call.x,))


@_register("contiguous", "clone", "alias", "detach", "lift_fresh_copy", "_to_copy", "to", "type_as",
           "_unsafe_index_put")
def _alias(call: Call) -> Any:
    if call.out != call.x.shape:
        raise UnsupportedOperatorError(call.op, call.node_name, f"changes the shape {call.x.shape} -> {call.out}")
    return call.x


@_register("dropout", "feature_dropout", "alpha_dropout", "native_dropout", "feature_alpha_dropout")
def _dropout(call: Call) -> Emit:
    call.out_shapes = call.out_shapes[:1]
    return Emit(OpKind.DROPOUT, DropoutAttrs(float(call.arg(1, "p", 0.5))), (call.x,))


def _pad(call: Call, mode: str) -> Emit:
    flat = [int(p) for p in call.arg(1, "pad" if mode == "constant" else "padding")]
    rank = len(call.x.shape)
    per_axis = [(0, 0)] * rank
    for i in range(len(flat) // 2):
        per_axis[rank - 1 - i] = (flat[2 * i], flat[2 * i + 1])
    value_index = 3 if call.op == "pad" else 2
    value = float(call.arg(value_index, "value", 0.0) or 0.0) if mode == "constant" else 0.0
    return Emit(OpKind.PAD, PadAttrs(tuple(per_axis), mode, value), (call.x,))


@_register("constant_pad_nd")
def _constant_pad(call: Call) -> Emit:
    return _pad(call, "constant")


@_register("pad")
def _generic_pad(call: Call) -> Emit:
    return _pad(call, str(call.arg(2, "mode", "constant")))


@_register("reflection_pad2d")
def _reflect_pad(call: Call) -> Emit:
    return _pad(call, "reflect")


@_register("replication_pad2d")
def _replicate_pad(call: Call) -> Emit:
    return _pad(call, "replicate")


@_register("mean")
def _mean(call: Call) -> Emit:
    rank = len(call.x.shape)
    dims = call.arg(1, "dim")
    axes = tuple(range(rank)) if dims is None else tuple(sorted(int(d) % rank for d in dims))
    keepdim = bool(call.arg(2, "keepdim", False))
    return Emit(OpKind.MEAN, MeanAttrs(axes, keepdim), (call.x,))


@_register("softmax", "_softmax", "log_softmax", "_log_softmax")
def _softmax(call: Call) -> Emit:
    return Emit(OpKind.SOFTMAX, AxisAttrs(int(call.arg(1, "dim", -1)) % len(call.x.shape)), (call.x,))


def _upsample(mode: str) -> Handler:
    def handler(call: Call) -> Emit:
        align = bool(call.arg(2, "align_corners", False)) if mode != "nearest" else False
        return Emit(OpKind.UPSAMPLE, UpsampleAttrs(mode, align), (call.x,))

    return handler


_register("upsample_nearest2d", "_upsample_nearest_exact2d")(_upsample("nearest"))
_register("upsample_bilinear2d", "_upsample_bilinear2d_aa")(_upsample("bilinear"))
_register("upsample_bicubic2d")(_upsample("bicubic"))
