"""Handlers of the ONNX operators with weights or windows: convolutions, linear layers, matmuls, norms,
activations and pools.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from edgeplan.errors import InvalidInputError
from edgeplan.frontends.onnx_frontend.converter import (
    Handler,
    _const_float,
    _Converter,
    _NotModelled,
    _pair,
    _spatial,
    _window_pads,
)
from edgeplan.frontends.onnx_frontend.loading import _DEFAULT_DOMAINS, _attrs, _ints, _label
from edgeplan.frontends.onnx_frontend.tensor_handlers import _eltwise_emit
from edgeplan.ir import OpKind, Ref, Shape
from edgeplan.ir.ops import (
    Activation,
    ActivationAttrs,
    Attrs,
    ConvAttrs,
    ConvTransposeAttrs,
    EltwiseOp,
    GlobalPoolAttrs,
    LinearAttrs,
    MatMulAttrs,
    NormAttrs,
    PoolAttrs,
    PoolMode,
    ReshapeAttrs,
)

if TYPE_CHECKING:
    import onnx


def _weight_shape(cv: _Converter, node: onnx.NodeProto) -> Shape:
    if not cv.is_const(node.input[1]):
        raise _NotModelled("its weight is computed at run time; the IR models constant weights only")
    return cv.const_shape(node.input[1])


def _check_channels(node: onnx.NodeProto, have: int, expect: int, x: Shape, w: Shape) -> None:
    """InvalidInputError when an input does not fit its weight (e.g. wrong ``input_shapes``)."""
    if have != expect:
        raise InvalidInputError(
            f"ONNX node {_label(node)!r} ({node.op_type}): input of shape {x} does not fit its weight of shape {w} "
            f"({have} features where {expect} are expected); check input_shapes"
        )


def _has_input(node: onnx.NodeProto, index: int) -> bool:
    return len(node.input) > index and bool(node.input[index])


def _conv(cv: _Converter, node: onnx.NodeProto) -> None:
    if len(cv.shape(node.input[0])) == 3:
        _one_d(cv, node, OpKind.CONV2D, lambda x, a: _conv_attrs(cv, node, x, _one_d_weight(cv, node), a))
        return
    x = _spatial(cv, node, node.input[0], "convolution")
    cv.emit(node, OpKind.CONV2D, _conv_attrs(cv, node, x, _weight_shape(cv, node), _attrs(node)),
            [cv.ref(node.input[0])])


def _conv_attrs(cv: _Converter, node: onnx.NodeProto, x: Shape, w: Shape, a: dict[str, Any]) -> ConvAttrs:
    groups = int(a.get("group", 1))
    _check_channels(node, x[1], w[1] * groups, x, w)
    kernel = (w[2], w[3])
    stride, dilation = _pair(a.get("strides"), 1), _pair(a.get("dilations"), 1)
    return ConvAttrs(
        in_channels=x[1],
        out_channels=w[0],
        kernel=kernel,
        stride=stride,
        padding=_window_pads(a, x[2:], kernel, stride, dilation),
        dilation=dilation,
        groups=groups,
        bias=_has_input(node, 2),
    )


def _one_d_weight(cv: _Converter, node: onnx.NodeProto) -> Shape:
    w = _weight_shape(cv, node)
    if len(w) != 3:
        raise _NotModelled(f"a weight of shape {w} on a 3-D input")
    return (w[0], w[1], 1, w[2])


def _one_d(cv: _Converter, node: onnx.NodeProto, kind: OpKind,
           attrs_of: Callable[[Shape, dict[str, Any]], Attrs]) -> None:
    """A 1-D convolution or pooling on (N, C, L) as the 2-D one on (N, C, 1, L) between an unsqueeze and a squeeze
    (as the torch frontend writes it); ``attrs_of`` gets the 2-D input shape and the attributes made 2-D (a window
    of height 1, no padding on it). The 2-D node takes the ONNX node's name, which ONNX Runtime's kernels trace to."""
    x, out = cv.shape(node.input[0]), cv.shape(node.output[0])
    x2, out2 = (x[0], x[1], 1, x[2]), (out[0], out[1], 1, out[2])
    a = {k: ([1, *v] if k in ("kernel_shape", "strides", "dilations") else v) for k, v in _attrs(node).items()}
    if "pads" in a:
        a["pads"] = [0, a["pads"][0], 0, a["pads"][1]]
    attrs = attrs_of(x2, a)
    label, dtype = _label(node), cv.dtype(node.output[0])
    for value in node.output[1:]:
        if value:
            cv.unmodelled[value] = (node.op_type, label)
    up = cv.add(f"{label}/unsqueeze", OpKind.RESHAPE, ReshapeAttrs(x2), [cv.ref(node.input[0])], [], "Unsqueeze",
                [x2], dtype)
    mid = cv.add(label, kind, attrs, [Ref(up, 0)], [], node.op_type, [out2], dtype)
    cv.add(f"{label}/squeeze", OpKind.RESHAPE, ReshapeAttrs(out), [Ref(mid, 0)], [node.output[0]], "Squeeze")


def _conv_transpose(cv: _Converter, node: onnx.NodeProto) -> None:
    x = _spatial(cv, node, node.input[0], "transposed convolution")
    w = _weight_shape(cv, node)
    a = _attrs(node)
    groups = int(a.get("group", 1))
    _check_channels(node, x[1], w[0], x, w)
    kernel = (w[2], w[3])
    stride, dilation = _pair(a.get("strides"), 1), _pair(a.get("dilations"), 1)
    out_pad = _pair(a.get("output_padding"), 0)
    y = cv.shape(node.output[0])
    if "output_shape" in a or a.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        padding, out_pad = _transpose_pads(a, x[2:], y[2:], kernel, stride, dilation, out_pad)
    elif a.get("auto_pad") == "VALID":
        padding = (0, 0, 0, 0)
    else:
        pads = _ints(a.get("pads", [0, 0, 0, 0]))
        padding = (pads[0], pads[1], pads[2], pads[3])
    attrs = ConvTransposeAttrs(
        in_channels=x[1],
        out_channels=w[1] * groups,
        kernel=kernel,
        stride=stride,
        padding=padding,
        output_padding=out_pad,
        dilation=dilation,
        groups=groups,
        bias=_has_input(node, 2),
    )
    cv.emit(node, OpKind.CONV_TRANSPOSE2D, attrs, [cv.ref(node.input[0])])


def _transpose_pads(a: dict[str, Any], size: Shape, out: Shape, kernel: tuple[int, int], stride: tuple[int, int],
                    dilation: tuple[int, int], out_pad: tuple[int, int]
                    ) -> tuple[tuple[int, int, int, int], tuple[int, int]]:
    """Padding that yields the inferred output size (``output_shape`` or SAME auto_pad), as ONNX defines it."""
    begin, end, extra = [], [], []
    for axis in (0, 1):
        full = stride[axis] * (size[axis] - 1) + out_pad[axis] + (kernel[axis] - 1) * dilation[axis] + 1
        total = full - out[axis]
        extra.append(out_pad[axis] + max(-total, 0))
        total = max(total, 0)
        if a.get("auto_pad") == "SAME_UPPER":
            begin.append(total // 2)
            end.append(total - total // 2)
        else:
            begin.append(total - total // 2)
            end.append(total // 2)
    return (begin[0], begin[1], end[0], end[1]), (extra[0], extra[1])


def _gemm(cv: _Converter, node: onnx.NodeProto) -> None:
    a = _attrs(node)
    if int(a.get("transA", 0)):
        raise _NotModelled("transA=1 (a transposed activation operand) is not modelled")
    x, y = node.input[0], node.output[0]
    if cv.is_const(node.input[1]):
        w = cv.const_shape(node.input[1])
        _check_channels(node, cv.shape(x)[-1], w[1] if int(a.get("transB", 0)) else w[0], cv.shape(x), w)
        linear = LinearAttrs(in_features=cv.shape(x)[-1], out_features=cv.shape(y)[-1], bias=_has_input(node, 2))
        cv.emit(node, OpKind.LINEAR, linear, [cv.ref(x)])
        return
    inputs = [cv.operand(x), cv.ref(node.input[1])]
    product = MatMulAttrs(contraction=cv.shape(x)[-1])
    if not _has_input(node, 2):
        cv.emit(node, OpKind.MATMUL, product, inputs)
        return
    name = cv.add(f"{_label(node)}/matmul", OpKind.MATMUL, product, inputs, [], "Gemm", [cv.shape(y)], cv.dtype(y))
    _eltwise_emit(cv, node, EltwiseOp.ADD, Ref(name), node.input[2])


def _matmul(cv: _Converter, node: onnx.NodeProto) -> None:
    a, b = node.input[0], node.input[1]
    if cv.is_const(a) or not cv.is_const(b) or len(cv.const_shape(b)) != 2:
        # two activations; a constant that is not a 2-D weight stays a graph tensor (a ``constant`` node)
        product = MatMulAttrs(contraction=cv.shape(a)[-1])
        cv.emit(node, OpKind.MATMUL, product, [cv.operand(a), cv.operand(b)])
        return
    k, n = cv.const_shape(b)
    _check_channels(node, cv.shape(a)[-1], k, cv.shape(a), (k, n))
    bias_add = _bias_add(cv, node, n)
    if bias_add is None:
        cv.emit(node, OpKind.LINEAR, LinearAttrs(in_features=k, out_features=n, bias=False), [cv.ref(a)])
        return
    index, add = bias_add
    cv.skip.add(index)
    linear = LinearAttrs(in_features=k, out_features=n, bias=True)
    cv.emit(node, OpKind.LINEAR, linear, [cv.ref(a)], outputs=[add.output[0]], source="MatMul+Add")


def _bias_add(cv: _Converter, node: onnx.NodeProto, features: int) -> tuple[int, onnx.NodeProto] | None:
    """The Add of a constant bias that alone consumes a MatMul's output, to fuse into a linear node."""
    out = node.output[0]
    users = cv.consumer_nodes(out)
    if len(users) != 1 or cv.is_graph_output(out):
        return None
    index, add = users[0]
    if add.op_type != "Add" or add.domain not in _DEFAULT_DOMAINS or len(add.input) != 2:
        return None
    other = add.input[1] if add.input[0] == out else add.input[0]
    if other == out or not cv.is_const(other):
        return None
    bias = cv.const_shape(other)
    if math.prod(bias) != features or (bias and bias[-1] != features):
        return None
    if cv.shape(add.output[0]) != cv.shape(out):
        return None
    return index, add


def _norm(kind: OpKind) -> Handler:
    def handler(cv: _Converter, node: onnx.NodeProto) -> None:
        x = cv.shape(node.input[0])
        a = _attrs(node)
        eps = float(a.get("epsilon", 1e-5))
        if kind is OpKind.LAYER_NORM:
            axis = int(a.get("axis", -1))
            attrs = NormAttrs(channels=math.prod(x[axis % len(x):]), eps=eps, axis=axis)
        elif node.op_type == "InstanceNormalization":
            attrs = NormAttrs(channels=x[1], eps=eps, groups=x[1])
        elif node.op_type == "GroupNormalization":
            attrs = NormAttrs(channels=x[1], eps=eps, groups=int(a["num_groups"]))
        else:
            attrs = NormAttrs(channels=x[1], eps=eps)
        cv.emit(node, kind, attrs, [cv.ref(node.input[0])])

    return handler


#: Plain activations: (function, attribute holding alpha, default alpha).
_ACTIVATIONS: dict[str, tuple[Activation, str, float]] = {
    "Relu": (Activation.RELU, "", 0.0),
    "Sigmoid": (Activation.SIGMOID, "", 0.0),
    "Tanh": (Activation.TANH, "", 0.0),
    "HardSwish": (Activation.HARDSWISH, "", 0.0),
    "HardSigmoid": (Activation.HARDSIGMOID, "alpha", 0.2),
    "LeakyRelu": (Activation.LEAKY_RELU, "alpha", 0.01),
    "Elu": (Activation.ELU, "alpha", 1.0),
    "Gelu": (Activation.GELU, "", 0.0),
    "Softplus": (Activation.SOFTPLUS, "", 0.0),
    "Mish": (Activation.MISH, "", 0.0),
    "Swish": (Activation.SILU, "", 0.0),
    "Exp": (Activation.EXP, "", 0.0),
    "Log": (Activation.LOG, "", 0.0),
    "Sqrt": (Activation.SQRT, "", 0.0),
    "Abs": (Activation.ABS, "", 0.0),
    "Neg": (Activation.NEG, "", 0.0),
    "Reciprocal": (Activation.RECIPROCAL, "", 0.0),
    "Erf": (Activation.ERF, "", 0.0),
}


def _activation(cv: _Converter, node: onnx.NodeProto) -> None:
    fn, alpha_attr, default = _ACTIVATIONS[node.op_type]
    alpha = float(_attrs(node).get(alpha_attr, default)) if alpha_attr else 0.0
    cv.emit(node, OpKind.ACTIVATION, ActivationAttrs(fn=fn, alpha=alpha), [cv.ref(node.input[0])])


def _clip(cv: _Converter, node: onnx.NodeProto) -> None:
    a = _attrs(node)
    low = _const_float(cv, node, 1, "minimum")
    high = _const_float(cv, node, 2, "maximum")
    low = float(a["min"]) if low is None and "min" in a else low
    high = float(a["max"]) if high is None and "max" in a else high
    if low == 0.0 and high == 6.0:
        attrs = ActivationAttrs(fn=Activation.RELU6, low=0.0, high=6.0)
    else:
        attrs = ActivationAttrs(fn=Activation.CLIP, low=low, high=high)
    cv.emit(node, OpKind.ACTIVATION, attrs, [cv.ref(node.input[0])])


def _pow(cv: _Converter, node: onnx.NodeProto) -> None:
    exponent = _const_float(cv, node, 1, "exponent")
    if exponent is None:
        raise _NotModelled("a missing exponent")
    attrs = ActivationAttrs(fn=Activation.POW, alpha=exponent)
    cv.emit(node, OpKind.ACTIVATION, attrs, [cv.ref(node.input[0])])


def _pool(mode: PoolMode) -> Handler:
    def attrs_of(x: Shape, a: dict[str, Any]) -> PoolAttrs:
        kernel = _pair(a.get("kernel_shape"), 1)
        stride, dilation = _pair(a.get("strides"), 1), _pair(a.get("dilations"), 1)
        return PoolAttrs(
            mode=mode,
            kernel=kernel,
            stride=stride,
            padding=_window_pads(a, x[2:], kernel, stride, dilation),
            dilation=dilation,
            ceil_mode=bool(a.get("ceil_mode", 0)),
            count_include_pad=bool(a.get("count_include_pad", 0)) if mode is PoolMode.AVG else True,
        )

    def handler(cv: _Converter, node: onnx.NodeProto) -> None:
        if len(cv.shape(node.input[0])) == 3:
            _one_d(cv, node, OpKind.POOL2D, attrs_of)
            return
        x = _spatial(cv, node, node.input[0], "pooling")
        cv.emit(node, OpKind.POOL2D, attrs_of(x, _attrs(node)), [cv.ref(node.input[0])])

    return handler


def _global_pool(mode: PoolMode) -> Handler:
    def handler(cv: _Converter, node: onnx.NodeProto) -> None:
        cv.emit(node, OpKind.GLOBAL_POOL, GlobalPoolAttrs(mode=mode, keepdim=True), [cv.ref(node.input[0])])

    return handler
