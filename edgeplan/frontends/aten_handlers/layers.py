"""Handlers of the ATen operators with weights or windows: convolutions, linear layers, matmuls, norms,
activations, reductions and pools.
"""

from __future__ import annotations

import math
from typing import Any

from edgeplan.errors import UnsupportedOperatorError
from edgeplan.frontends.aten_handlers.registry import Handler, _register
from edgeplan.frontends.aten_values import Act, Call, Chain, Const, Emit
from edgeplan.ir import Activation, OpKind, PoolMode, Shape
from edgeplan.ir.ops import (
    ActivationAttrs,
    AdaptivePoolAttrs,
    AttentionAttrs,
    ConvAttrs,
    ConvTransposeAttrs,
    GlobalPoolAttrs,
    LinearAttrs,
    MatMulAttrs,
    NormAttrs,
    PoolAttrs,
    ReduceAttrs,
    ReshapeAttrs,
    RollAttrs,
    UnfoldAttrs,
)


def _pair(v: Any, default: int = 1) -> tuple[int, int]:
    if v is None or (isinstance(v, (list, tuple)) and len(v) == 0):
        return (default, default)
    if isinstance(v, (list, tuple)):
        return (int(v[0]), int(v[-1]))
    return (int(v), int(v))


def _pads(padding: Any, x: Shape, out: Shape, kernel: tuple[int, int], stride: tuple[int, int],
          dilation: tuple[int, int]) -> tuple[int, int, int, int]:
    """(top, left, bottom, right) from an ATen padding argument ('same', 'valid', int or pair)."""
    if isinstance(padding, str):
        if padding == "valid":
            return (0, 0, 0, 0)
        totals = [max(0, (out[2 + i] - 1) * stride[i] + dilation[i] * (kernel[i] - 1) + 1 - x[2 + i])
                  for i in (0, 1)]
        return (totals[0] // 2, totals[1] // 2, totals[0] - totals[0] // 2, totals[1] - totals[1] // 2)
    p = _pair(padding, 0)
    return (p[0], p[1], p[0], p[1])


def _weight(call: Call, index: int, name: str) -> Const:
    w = call.arg(index, name)
    if not isinstance(w, Const):
        raise UnsupportedOperatorError(call.op, call.node_name, f"{name} is an activation, not a parameter")
    return w


def _conv(call: Call, weight_i: int, transposed: bool, args: dict[str, int]) -> Emit:
    x, w = call.x, _weight(call, weight_i, "weight")
    bias = call.arg(weight_i + 1, "bias") is not None
    stride = _pair(call.arg(args["stride"], "stride"))
    dilation = _pair(call.arg(args["dilation"], "dilation"))
    groups = int(call.arg(args["groups"], "groups", 1))
    kernel = (w.shape[2], w.shape[3])
    if len(x.shape) != 4:
        raise UnsupportedOperatorError(call.op, call.node_name, f"only 2-D convolution is supported, got {x.shape}")
    if transposed:
        padding = _pads(call.arg(args["padding"], "padding"), x.shape, call.out, kernel, stride, dilation)
        out_pad = _pair(call.arg(args["output_padding"], "output_padding"), 0)
        attrs_t = ConvTransposeAttrs(x.shape[1], w.shape[1] * groups, kernel, stride, padding, out_pad, dilation,
                                     groups, bias)
        return Emit(OpKind.CONV_TRANSPOSE2D, attrs_t, (x,))
    padding = _pads(call.arg(args["padding"], "padding"), x.shape, call.out, kernel, stride, dilation)
    attrs = ConvAttrs(x.shape[1], w.shape[0], kernel, stride, padding, dilation, groups, bias)
    return Emit(OpKind.CONV2D, attrs, (x,))


def _single(v: Any, default: int = 1) -> int:
    if v is None or (isinstance(v, (list, tuple)) and len(v) == 0):
        return default
    return int(v[0]) if isinstance(v, (list, tuple)) else int(v)


def _as_2d(call: Call, op: Emit) -> Chain:
    """A 1-D operator on (N, C, L) as the 2-D one on (N, C, 1, L): unsqueeze, the 2-D operator, squeeze. The IR, its
    cost models and its runners know 2-D convolutions and poolings; a 1-D one computes exactly the 2-D one with a
    kernel of height 1, and eager PyTorch runs it as one call (recorded as a fused call of the aten operator). ``op``
    is the 2-D operator (its inputs are ignored)."""
    x = call.x
    if len(x.shape) != 3 or len(call.out) != 3:
        raise UnsupportedOperatorError(call.op, call.node_name,
                                       f"only batched (N, C, L) inputs are supported, got {x.shape}")
    n, c, length = x.shape
    out2d = (call.out[0], call.out[1], 1, call.out[2])
    return Chain(f"aten.{call.op.rstrip('_')}", (
        Emit(OpKind.RESHAPE, ReshapeAttrs((n, c, 1, length)), (x,)),
        op,
        Emit(OpKind.RESHAPE, ReshapeAttrs(call.out), ()),
    ), ((n, c, 1, length), out2d), ("unsqueeze", "", "squeeze"))


def _conv1d(call: Call, weight_i: int, args: dict[str, int]) -> Chain:
    w = _weight(call, weight_i, "weight")
    bias = call.arg(weight_i + 1, "bias") is not None
    stride = _single(call.arg(args["stride"], "stride"))
    dilation = _single(call.arg(args["dilation"], "dilation"))
    groups = int(call.arg(args["groups"], "groups", 1))
    kernel = int(w.shape[2])
    padding = call.arg(args["padding"], "padding")
    if isinstance(padding, str):  # 'same' / 'valid': as the 2-D rule computes it on a height of 1
        (n, c, length), out = call.x.shape, call.out
        pads = _pads(padding, (n, c, 1, length), (out[0], out[1], 1, out[2]), (1, kernel), (1, stride),
                     (1, dilation))
    else:
        pads = (0, _single(padding, 0), 0, _single(padding, 0))
    attrs = ConvAttrs(call.x.shape[1], w.shape[0], (1, kernel), (1, stride), pads, (1, dilation), groups, bias)
    return _as_2d(call, Emit(OpKind.CONV2D, attrs, ()))


@_register("conv1d")
def _conv1d_call(call: Call) -> Chain:
    return _conv1d(call, 1, {"stride": 3, "padding": 4, "dilation": 5, "groups": 6})


@_register("conv2d")
def _conv2d(call: Call) -> Emit:
    return _conv(call, 1, False, {"stride": 3, "padding": 4, "dilation": 5, "groups": 6})


@_register("conv_transpose2d")
def _conv_transpose2d(call: Call) -> Emit:
    return _conv(call, 1, True, {"stride": 3, "padding": 4, "output_padding": 5, "groups": 6, "dilation": 7})


@_register("convolution", "_convolution")
def _convolution(call: Call) -> Emit | Chain:
    transposed = bool(call.arg(6, "transposed", False))
    args = {"stride": 3, "padding": 4, "dilation": 5, "output_padding": 7, "groups": 8}
    if len(call.x.shape) == 3 and not transposed:
        return _conv1d(call, 1, args)
    return _conv(call, 1, transposed, args)


@_register("linear")
def _linear(call: Call) -> Emit:
    w = _weight(call, 1, "weight")
    bias = call.arg(2, "bias") is not None
    return Emit(OpKind.LINEAR, LinearAttrs(w.shape[1], w.shape[0], bias), (call.x,))


@_register("addmm")
def _addmm(call: Call) -> Emit:
    x, w = call.args[1], call.args[2]
    if isinstance(x, Act) and isinstance(w, Const):
        return Emit(OpKind.LINEAR, LinearAttrs(w.shape[0], w.shape[1], True), (x,))
    raise UnsupportedOperatorError(call.op, call.node_name, "addmm of two activations")


@_register("mm", "matmul", "bmm")
def _matmul(call: Call) -> Emit:
    a, b = call.args[0], call.args[1]
    if isinstance(a, Act) and isinstance(b, Const) and len(b.shape) == 2:
        return Emit(OpKind.LINEAR, LinearAttrs(b.shape[0], b.shape[1], False), (a,))
    if isinstance(a, Act) and isinstance(b, Act):
        return Emit(OpKind.MATMUL, MatMulAttrs(contraction=a.shape[-1]), (a, b))
    raise UnsupportedOperatorError(call.op, call.node_name, "matrix product with a constant left operand")


@_register("batch_norm", "_native_batch_norm_legit_no_training", "native_batch_norm", "_native_batch_norm_legit")
def _batch_norm(call: Call) -> Any:
    eps_index = 7 if call.op in ("batch_norm", "native_batch_norm") else 6
    attrs = NormAttrs(channels=call.x.shape[1], eps=float(call.arg(eps_index, "eps", 1e-5)),
                      affine=call.arg(1, "weight") is not None, axis=1)
    return _output_only(call, Emit(OpKind.BATCH_NORM, attrs, (call.x,)))


def _output_only(call: Call, emit: Emit) -> Emit:
    """Native norms return (out, mean, rstd): keep only the output, the only result used at inference."""
    call.out_shapes = call.out_shapes[:1]
    return emit


@_register("layer_norm", "native_layer_norm")
def _layer_norm(call: Call) -> Any:
    normalized = call.arg(1, "normalized_shape")
    attrs = NormAttrs(channels=math.prod(normalized), eps=float(call.arg(4, "eps", 1e-5)),
                      affine=call.arg(2, "weight") is not None, axis=-len(normalized))
    return _output_only(call, Emit(OpKind.LAYER_NORM, attrs, (call.x,)))


@_register("rms_norm")
def _rms_norm(call: Call) -> Emit:
    normalized = call.arg(1, "normalized_shape")
    eps = call.arg(3, "eps")  # None: torch takes the dtype's machine epsilon
    attrs = NormAttrs(channels=math.prod(normalized), eps=float(eps) if eps is not None else 1.1920928955078125e-07,
                      affine=call.arg(2, "weight") is not None, axis=-len(normalized), rms=True)
    return Emit(OpKind.LAYER_NORM, attrs, (call.x,))


@_register("group_norm")
def _group_norm(call: Call) -> Emit:
    attrs = NormAttrs(channels=call.x.shape[1], eps=float(call.arg(4, "eps", 1e-5)),
                      affine=call.arg(2, "weight") is not None, groups=int(call.arg(1, "num_groups")), axis=1)
    return Emit(OpKind.GROUP_NORM, attrs, (call.x,))


def _act(fn: Activation, alpha: float = 0.0, low: float | None = None, high: float | None = None) -> Handler:
    def handler(call: Call) -> Emit:
        return Emit(OpKind.ACTIVATION, ActivationAttrs(fn, alpha, low, high), (call.x,))

    return handler


for _name, _fn in [
    ("relu", Activation.RELU), ("relu6", Activation.RELU6), ("hardswish", Activation.HARDSWISH),
    ("hardsigmoid", Activation.HARDSIGMOID), ("sigmoid", Activation.SIGMOID), ("silu", Activation.SILU),
    ("gelu", Activation.GELU), ("tanh", Activation.TANH), ("mish", Activation.MISH),
    ("softplus", Activation.SOFTPLUS), ("exp", Activation.EXP), ("log", Activation.LOG), ("sqrt", Activation.SQRT),
    ("rsqrt", Activation.RSQRT), ("abs", Activation.ABS), ("neg", Activation.NEG),
    ("reciprocal", Activation.RECIPROCAL), ("erf", Activation.ERF),
]:
    _register(_name)(_act(_fn))


@_register("pow")
def _pow(call: Call) -> Any:
    exponent = call.args[1]
    if not isinstance(exponent, (int, float)):
        raise UnsupportedOperatorError(call.op, call.node_name, "only a constant exponent is supported")
    return Emit(OpKind.ACTIVATION, ActivationAttrs(Activation.POW, alpha=float(exponent)), (call.x,))


@_register("square")
def _square(call: Call) -> Emit:
    return Emit(OpKind.ACTIVATION, ActivationAttrs(Activation.POW, alpha=2.0), (call.x,))


@_register("scaled_dot_product_attention")
def _attention(call: Call) -> Emit:
    q, k, v = call.args[0], call.args[1], call.args[2]
    mask = call.arg(3, "attn_mask")
    inputs = (q, k, v) if mask is None else (q, k, v, mask)
    return Emit(OpKind.ATTENTION, AttentionAttrs(causal=bool(call.arg(5, "is_causal", False))), inputs)


def _reduce(op: str) -> Handler:
    def handler(call: Call) -> Emit:
        rank = len(call.x.shape)
        dims = call.arg(2 if op == "norm2" else 1, "dim")
        if isinstance(dims, int):
            dims = [dims]
        axes = tuple(range(rank)) if not dims else tuple(sorted(int(d) % rank for d in dims))
        keepdim = bool(call.arg(3 if op == "norm2" else 2, "keepdim", False))
        return Emit(OpKind.REDUCE, ReduceAttrs(op, axes, keepdim), (call.x,))

    return handler


_register("sum")(_reduce("sum"))
_register("amax")(_reduce("max"))
_register("amin")(_reduce("min"))
_register("linalg_vector_norm")(_reduce("norm2"))


def _extreme(op: str) -> Handler:
    """``torch.max`` / ``torch.min`` over all values, or along ``dim`` (values and indices: the indices are dropped,
    as a max pooling's, and using them is refused by name); of two tensors (``max.other``) they are not modelled."""
    def handler(call: Call) -> Emit:
        dim = call.arg(1, "dim")
        if dim is not None and not isinstance(dim, int):
            raise UnsupportedOperatorError(call.op, call.node_name, f"the element-wise {op}imum of two tensors is "
                                           "not modelled")
        rank = len(call.x.shape)
        axes = tuple(range(rank)) if dim is None else (int(dim) % rank,)
        call.out_shapes = call.out_shapes[:1]
        return Emit(OpKind.REDUCE, ReduceAttrs(op, axes, bool(call.arg(2, "keepdim", False))), (call.x,))

    return handler


_register("max")(_extreme("max"))
_register("min")(_extreme("min"))


@_register("roll")
def _roll(call: Call) -> Emit:
    shifts, dims = call.arg(1, "shifts"), call.arg(2, "dims", ())
    shifts = tuple(int(s) for s in (shifts if isinstance(shifts, (list, tuple)) else [shifts]))
    axes = tuple(int(d) for d in (dims if isinstance(dims, (list, tuple)) else [dims]))
    return Emit(OpKind.ROLL, RollAttrs(shifts, axes), (call.x,))


@_register("unfold")
def _unfold(call: Call) -> Emit:
    """``Tensor.unfold(dimension, size, step)``: windows along one axis, a view in eager PyTorch."""
    axis = int(call.arg(1, "dimension")) % len(call.x.shape)
    return Emit(OpKind.UNFOLD, UnfoldAttrs("unfold", axis=axis, size=int(call.arg(2, "size")),
                                           step=int(call.arg(3, "step"))), (call.x,))


@_register("im2col")
def _im2col(call: Call) -> Emit:
    """``F.unfold``: every kernel window of the spatial axes as a column."""
    return Emit(OpKind.UNFOLD, UnfoldAttrs("im2col", kernel=_pair(call.arg(1, "kernel_size")),
                                           dilation=_pair(call.arg(2, "dilation")),
                                           padding=_pair(call.arg(3, "padding"), 0),
                                           stride=_pair(call.arg(4, "stride"))), (call.x,))


@_register("col2im")
def _col2im(call: Call) -> Emit:
    """``F.fold``: columns summed back into an image."""
    return Emit(OpKind.UNFOLD, UnfoldAttrs("col2im", output_size=_pair(call.arg(1, "output_size")),
                                           kernel=_pair(call.arg(2, "kernel_size")),
                                           dilation=_pair(call.arg(3, "dilation")),
                                           padding=_pair(call.arg(4, "padding"), 0),
                                           stride=_pair(call.arg(5, "stride"))), (call.x,))


@_register("leaky_relu")
def _leaky_relu(call: Call) -> Emit:
    slope = float(call.arg(1, "negative_slope", 0.01))
    return Emit(OpKind.ACTIVATION, ActivationAttrs(Activation.LEAKY_RELU, alpha=slope), (call.x,))


@_register("elu")
def _elu(call: Call) -> Emit:
    return Emit(OpKind.ACTIVATION, ActivationAttrs(Activation.ELU, alpha=float(call.arg(1, "alpha", 1.0))), (call.x,))


def _clip(call: Call, low: float | None, high: float | None) -> Any:
    if low is None and high is None:  # to infinite bounds (Gemma 4's clamps before a checkpoint sets them)
        return call.x
    if low == 0.0 and high == 6.0:
        return Emit(OpKind.ACTIVATION, ActivationAttrs(Activation.RELU6, low=0.0, high=6.0), (call.x,))
    if low == 0.0 and high is None:
        return Emit(OpKind.ACTIVATION, ActivationAttrs(Activation.RELU), (call.x,))
    return Emit(OpKind.ACTIVATION, ActivationAttrs(Activation.CLIP, low=low, high=high), (call.x,))


def _bound(call: Call, index: int, name: str, default: float | None = None) -> float | None:
    """A clip bound: a number, a one-element parameter or buffer (Gemma 4's clamps), or None (also for an infinite
    bound); any other tensor is refused by name."""
    v = call.arg(index, name, default)
    if isinstance(v, Const) and v.value is not None:
        v = v.value
    if isinstance(v, (Act, Const)):
        raise UnsupportedOperatorError(call.op, call.node_name, f"its {name} bound is a computed tensor, whose "
                                       "values the IR does not keep; numbers and one-element buffers are modelled")
    return None if v is None or math.isinf(float(v)) else float(v)


@_register("hardtanh")
def _hardtanh(call: Call) -> Any:
    return _clip(call, _bound(call, 1, "min_val", -1.0), _bound(call, 2, "max_val", 1.0))


@_register("clamp", "clip")
def _clamp(call: Call) -> Any:
    return _clip(call, _bound(call, 1, "min"), _bound(call, 2, "max"))


@_register("clamp_min")
def _clamp_min(call: Call) -> Any:
    return _clip(call, _bound(call, 1, "min"), None)


@_register("clamp_max")
def _clamp_max(call: Call) -> Any:
    return _clip(call, None, _bound(call, 1, "max"))


def _pool(call: Call, mode: PoolMode) -> Emit | Chain:
    """A 2-D pooling, or a 1-D one as the 2-D one with a window of height 1 (see :func:`_as_2d`)."""
    one_d = len(call.x.shape) == 3

    def window(v: Any, default: int, height: int) -> tuple[int, int]:
        return (height, _single(v, default)) if one_d else _pair(v, default)

    kernel = window(call.arg(1, "kernel_size"), 1, 1)
    stride = window(call.arg(2, "stride"), 0, 1)
    if stride[1] == 0:
        stride = kernel
    pad = window(call.arg(3, "padding"), 0, 0)
    if mode is PoolMode.MAX:
        dilation, ceil = window(call.arg(4, "dilation"), 1, 1), bool(call.arg(5, "ceil_mode", False))
        include = True
    else:
        dilation, ceil = (1, 1), bool(call.arg(4, "ceil_mode", False))
        include = bool(call.arg(5, "count_include_pad", True))
    attrs = PoolAttrs(mode, kernel, stride, (pad[0], pad[1], pad[0], pad[1]), dilation, ceil, include)
    call.out_shapes = call.out_shapes[:1]  # max_pool2d_with_indices: indices are unused at inference
    if one_d:
        return _as_2d(call, Emit(OpKind.POOL2D, attrs, ()))
    return Emit(OpKind.POOL2D, attrs, (call.x,))


@_register("max_pool2d", "max_pool2d_with_indices", "max_pool1d", "max_pool1d_with_indices")
def _max_pool(call: Call) -> Emit | Chain:
    return _pool(call, PoolMode.MAX)


@_register("avg_pool2d", "avg_pool1d")
def _avg_pool(call: Call) -> Emit | Chain:
    return _pool(call, PoolMode.AVG)


def _adaptive(call: Call, mode: PoolMode) -> Emit | Chain:
    call.out_shapes = call.out_shapes[:1]
    one_d = len(call.x.shape) == 3
    size = (1, call.out[2]) if one_d else (call.out[2], call.out[3])
    inputs = () if one_d else (call.x,)
    if size == (1, 1):
        op = Emit(OpKind.GLOBAL_POOL, GlobalPoolAttrs(mode, keepdim=True), inputs)
    else:
        op = Emit(OpKind.ADAPTIVE_POOL2D, AdaptivePoolAttrs(mode, size), inputs)
    return _as_2d(call, op) if one_d else op


@_register("adaptive_avg_pool2d", "_adaptive_avg_pool2d", "adaptive_avg_pool1d")
def _adaptive_avg(call: Call) -> Emit | Chain:
    return _adaptive(call, PoolMode.AVG)


@_register("adaptive_max_pool2d", "adaptive_max_pool1d")
def _adaptive_max(call: Call) -> Emit | Chain:
    return _adaptive(call, PoolMode.MAX)
