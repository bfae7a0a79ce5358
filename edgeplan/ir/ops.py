"""Operator kinds of the IR and their typed attributes: the one place where the op set is documented.

Every node of a :class:`~edgeplan.ir.Graph` has an :class:`OpKind` and an attribute object of the class that
:data:`ATTRS_BY_KIND` assigns to that kind. Tensors are NCHW for 4-D activations (batch first), as in PyTorch
and ONNX.

=====================  ==========================================================================================
kind                   meaning (inputs -> outputs)
=====================  ==========================================================================================
``input``              a graph input (no inputs, one output)
``constant``           a learnt tensor used as an activation (e.g. a class token), counted as parameters
``conv2d``             2-D convolution with stride, padding, dilation and groups (depthwise: groups == in == out ch)
``conv_transpose2d``   2-D transposed convolution
``linear``             fully connected layer on the last axis (``y = x W^T + b``)
``matmul``             product of two activation tensors (matmul, bmm, two-operand einsum)
``batch_norm``         inference batch normalization (per-channel scale and shift)
``layer_norm``         layer normalization over the trailing axes (or channels, ``axis=1``); RMS norm (``rms``)
``group_norm``         group normalization
``activation``         element-wise nonlinearity, :class:`Activation` says which
``pool2d``             max or average pooling with a window
``adaptive_pool2d``    adaptive max or average pooling to a fixed output size
``global_pool``        max or average over the spatial axes to 1x1
``eltwise``            binary element-wise add/sub/mul/div with broadcasting (second operand may be a constant)
``concat``             concatenation along an axis
``stack``              stack along a new axis
``split``              split into several outputs along an axis (``chunk`` too)
``expand``             broadcast copy to a larger shape
``slice``              strided slice along one axis (``squeeze``: an index that drops the axis)
``channel_shuffle``    ShuffleNet channel shuffle
``flatten``            flatten a range of axes
``reshape``            reshape (view)
``permute``            axis permutation (transpose)
``pad``                constant/reflect/replicate padding
``mean``               mean reduction over axes
``reduce``             sum/max/min/L2-norm reduction over axes
``attention``          scaled dot-product attention (query, key, value [, mask])
``roll``               cyclic shift along axes (shifted windows)
``unfold``             sliding windows: of one axis (``Tensor.unfold``, a view), of the spatial axes as columns
                       (``im2col``, ``F.unfold``), or columns summed back into an image (``col2im``, ``F.fold``)
``softmax``            softmax along an axis
``upsample``           nearest or (bi)linear resize
``dropout``            dropout; a no-op at inference, kept so the graph mirrors the model
``lrn``                local response normalization (AlexNet-era)
``convert``            element type conversion: a quantized file's ``QUANTIZE`` (float to int8, or int8 to int8 at
                       another scale) and ``DEQUANTIZE`` (int8 to float), from ``from_dtype`` to the node's dtype
``opaque``             an operator edgeplan does not model; kept explicitly so that every report can list it
=====================  ==========================================================================================
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Union

__all__ = [
    "ATTRS_BY_KIND",
    "COMPUTE_KINDS",
    "NO_ATTRS",
    "Activation",
    "ActivationAttrs",
    "AdaptivePoolAttrs",
    "AttentionAttrs",
    "Attrs",
    "AxisAttrs",
    "ChannelShuffleAttrs",
    "ConstantAttrs",
    "ConvAttrs",
    "ConvTransposeAttrs",
    "ConvertAttrs",
    "DType",
    "DropoutAttrs",
    "EltwiseAttrs",
    "EltwiseOp",
    "FlattenAttrs",
    "GlobalPoolAttrs",
    "InputAttrs",
    "LRNAttrs",
    "LinearAttrs",
    "MatMulAttrs",
    "MeanAttrs",
    "NoAttrs",
    "NormAttrs",
    "OpKind",
    "OpaqueAttrs",
    "PadAttrs",
    "PermuteAttrs",
    "PoolAttrs",
    "PoolMode",
    "ReduceAttrs",
    "ReshapeAttrs",
    "RollAttrs",
    "SliceAttrs",
    "SplitAttrs",
    "UnfoldAttrs",
    "UpsampleAttrs",
]


class OpKind(str, enum.Enum):
    """The closed set of operator kinds (see the module docstring for each one's meaning)."""

    INPUT = "input"
    CONSTANT = "constant"
    CONV2D = "conv2d"
    CONV_TRANSPOSE2D = "conv_transpose2d"
    LINEAR = "linear"
    MATMUL = "matmul"
    BATCH_NORM = "batch_norm"
    LAYER_NORM = "layer_norm"
    GROUP_NORM = "group_norm"
    ACTIVATION = "activation"
    POOL2D = "pool2d"
    ADAPTIVE_POOL2D = "adaptive_pool2d"
    GLOBAL_POOL = "global_pool"
    ELTWISE = "eltwise"
    CONCAT = "concat"
    STACK = "stack"
    SPLIT = "split"
    EXPAND = "expand"
    SLICE = "slice"
    CHANNEL_SHUFFLE = "channel_shuffle"
    FLATTEN = "flatten"
    RESHAPE = "reshape"
    PERMUTE = "permute"
    PAD = "pad"
    MEAN = "mean"
    REDUCE = "reduce"
    ATTENTION = "attention"
    ROLL = "roll"
    UNFOLD = "unfold"
    SOFTMAX = "softmax"
    UPSAMPLE = "upsample"
    DROPOUT = "dropout"
    LRN = "lrn"
    CONVERT = "convert"
    OPAQUE = "opaque"


#: Kinds that do multiply-accumulate work; the "compute ops" that frontends are compared on.
COMPUTE_KINDS: frozenset[OpKind] = frozenset(
    {OpKind.CONV2D, OpKind.CONV_TRANSPOSE2D, OpKind.LINEAR, OpKind.MATMUL, OpKind.ATTENTION}
)


class Activation(str, enum.Enum):
    """Unary element-wise functions of :attr:`OpKind.ACTIVATION` (``pow`` takes its exponent in ``alpha``)."""

    RELU = "relu"
    RELU6 = "relu6"
    HARDSWISH = "hardswish"
    HARDSIGMOID = "hardsigmoid"
    SIGMOID = "sigmoid"
    SILU = "silu"
    GELU = "gelu"
    TANH = "tanh"
    LEAKY_RELU = "leaky_relu"
    ELU = "elu"
    MISH = "mish"
    SOFTPLUS = "softplus"
    CLIP = "clip"
    EXP = "exp"
    LOG = "log"
    SQRT = "sqrt"
    RSQRT = "rsqrt"
    ABS = "abs"
    NEG = "neg"
    RECIPROCAL = "reciprocal"
    POW = "pow"
    ERF = "erf"


class EltwiseOp(str, enum.Enum):
    """Binary element-wise operations of :attr:`OpKind.ELTWISE`."""

    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    DIV = "div"


class PoolMode(str, enum.Enum):
    """Reduction of a pooling window: its maximum, its mean, or its sum (zeros in the padding count; a StableHLO
    ``reduce_window`` with ``add``, as a ``.tflite`` file writes an average pooling that does not count the padding:
    the window's sum divided by the sum of a window over ones)."""

    MAX = "max"
    AVG = "avg"
    SUM = "sum"


class DType(str, enum.Enum):
    """Element types, with their size in bytes as :attr:`size_bytes`."""

    FLOAT32 = "float32"
    FLOAT16 = "float16"
    BFLOAT16 = "bfloat16"
    FLOAT64 = "float64"
    INT8 = "int8"
    UINT8 = "uint8"
    INT32 = "int32"
    INT64 = "int64"
    BOOL = "bool"

    @property
    def size_bytes(self) -> int:
        """Bytes per element."""
        return _DTYPE_SIZES[self]


_DTYPE_SIZES = {
    DType.FLOAT32: 4,
    DType.FLOAT16: 2,
    DType.BFLOAT16: 2,
    DType.FLOAT64: 8,
    DType.INT8: 1,
    DType.UINT8: 1,
    DType.INT32: 4,
    DType.INT64: 8,
    DType.BOOL: 1,
}


@dataclass(frozen=True)
class NoAttrs:
    """Attributes of kinds that have none (matmul, channel-less ops)."""


NO_ATTRS = NoAttrs()


@dataclass(frozen=True)
class InputAttrs:
    """A graph input; ``index`` is its position among the model's inputs."""

    index: int = 0


@dataclass(frozen=True)
class ConstantAttrs:
    """A constant tensor (its values are parameters; the shape is the node's output shape)."""


@dataclass(frozen=True)
class ConvAttrs:
    """2-D convolution. ``groups == in_channels == out_channels`` is a depthwise convolution."""

    in_channels: int
    out_channels: int
    kernel: tuple[int, int]
    stride: tuple[int, int] = (1, 1)
    padding: tuple[int, int, int, int] = (0, 0, 0, 0)  # top, left, bottom, right
    dilation: tuple[int, int] = (1, 1)
    groups: int = 1
    bias: bool = True

    @property
    def depthwise(self) -> bool:
        """True when every channel is convolved on its own (groups == in == out channels, > 1)."""
        return self.groups > 1 and self.groups == self.in_channels == self.out_channels


@dataclass(frozen=True)
class ConvTransposeAttrs:
    """2-D transposed convolution (``padding`` is the convolution padding it undoes, as in PyTorch)."""

    in_channels: int
    out_channels: int
    kernel: tuple[int, int]
    stride: tuple[int, int] = (1, 1)
    padding: tuple[int, int, int, int] = (0, 0, 0, 0)
    output_padding: tuple[int, int] = (0, 0)
    dilation: tuple[int, int] = (1, 1)
    groups: int = 1
    bias: bool = True


@dataclass(frozen=True)
class LinearAttrs:
    """Fully connected layer on the last axis."""

    in_features: int
    out_features: int
    bias: bool = True


@dataclass(frozen=True)
class MatMulAttrs:
    """Product of two activation tensors: each output element sums ``contraction`` products.

    ``equation`` is the einsum equation when the op came from one (``""`` for a plain matmul).
    """

    contraction: int
    equation: str = ""


@dataclass(frozen=True)
class NormAttrs:
    """Batch, layer or group normalization.

    ``channels`` is the number of normalized features (per-channel for batch norm; the size of the normalized
    trailing axes for layer norm), ``groups`` is used by group norm, ``affine`` says whether a learnt scale and
    shift exist, ``axis`` is the first normalized axis for layer norm (1 for channels-first LayerNorm2d). ``rms``:
    RMS normalization (a layer norm that divides by the root mean square without subtracting the mean, and has a
    learnt scale but no shift).
    """

    channels: int
    eps: float = 1e-5
    affine: bool = True
    groups: int = 1
    axis: int = -1
    rms: bool = False


@dataclass(frozen=True)
class ActivationAttrs:
    """An element-wise nonlinearity; ``alpha`` is the negative slope (leaky relu, elu), ``low``/``high`` clip."""

    fn: Activation
    alpha: float = 0.0
    low: float | None = None
    high: float | None = None


@dataclass(frozen=True)
class PoolAttrs:
    """Max or average pooling with a window."""

    mode: PoolMode
    kernel: tuple[int, int]
    stride: tuple[int, int]
    padding: tuple[int, int, int, int] = (0, 0, 0, 0)
    dilation: tuple[int, int] = (1, 1)
    ceil_mode: bool = False
    count_include_pad: bool = True


@dataclass(frozen=True)
class AdaptivePoolAttrs:
    """Adaptive pooling to ``output_size`` (H, W)."""

    mode: PoolMode
    output_size: tuple[int, int]


@dataclass(frozen=True)
class GlobalPoolAttrs:
    """Pooling over all spatial positions to 1x1 (``keepdim`` keeps the 1x1 axes)."""

    mode: PoolMode
    keepdim: bool = True


@dataclass(frozen=True)
class EltwiseAttrs:
    """Binary element-wise op. With one graph input, the other operand is a constant of ``const_shape``.

    ``const_value`` is that constant's value when the model gives it as a number (``x.mul(0.)``), else None; graph
    runtimes simplify on it (:mod:`edgeplan.ir.fold`).
    """

    op: EltwiseOp
    const_shape: tuple[int, ...] | None = None
    const_value: float | None = None


@dataclass(frozen=True)
class AxisAttrs:
    """An op along one axis (concat, softmax)."""

    axis: int


@dataclass(frozen=True)
class SplitAttrs:
    """Split along ``axis`` into pieces of ``sizes``; ``squeeze``: pieces of 1 that drop the axis (``unbind``)."""

    axis: int
    sizes: tuple[int, ...]
    squeeze: bool = False


@dataclass(frozen=True)
class SliceAttrs:
    """``x[start:end:step]`` along ``axis`` (``end`` already clamped to the axis size)."""

    axis: int
    start: int
    end: int
    step: int = 1
    squeeze: bool = False


@dataclass(frozen=True)
class ChannelShuffleAttrs:
    """ShuffleNet channel shuffle with ``groups`` groups."""

    groups: int


@dataclass(frozen=True)
class FlattenAttrs:
    """Flatten axes ``start..end`` (inclusive, negative allowed)."""

    start: int = 1
    end: int = -1


@dataclass(frozen=True)
class ReshapeAttrs:
    """Reshape to ``shape`` (fully resolved, no -1)."""

    shape: tuple[int, ...]


@dataclass(frozen=True)
class PermuteAttrs:
    """Axis permutation."""

    dims: tuple[int, ...]


@dataclass(frozen=True)
class PadAttrs:
    """Padding; ``pads`` has (before, after) per axis, outermost axis first, for every axis of the input."""

    pads: tuple[tuple[int, int], ...]
    mode: str = "constant"
    value: float = 0.0


@dataclass(frozen=True)
class MeanAttrs:
    """Mean over ``axes``."""

    axes: tuple[int, ...]
    keepdim: bool = False


@dataclass(frozen=True)
class ReduceAttrs:
    """Reduction ``op`` (sum, max, min, norm2, prod) over ``axes``."""

    op: str
    axes: tuple[int, ...]
    keepdim: bool = False


@dataclass(frozen=True)
class AttentionAttrs:
    """Scaled dot-product attention; ``causal`` masks the future."""

    causal: bool = False


@dataclass(frozen=True)
class RollAttrs:
    """Cyclic shifts along axes."""

    shifts: tuple[int, ...]
    axes: tuple[int, ...]


@dataclass(frozen=True)
class UnfoldAttrs:
    """Sliding windows, by ``mode``: ``unfold`` takes windows of ``size`` every ``step`` along ``axis`` into a new
    last axis (``Tensor.unfold``); ``im2col`` lays every ``kernel`` window of the two spatial axes out as a column,
    ``(N, C, H, W) -> (N, C * k_h * k_w, blocks)`` (``F.unfold``); ``col2im`` sums such columns back into an
    ``output_size`` image (``F.fold``). ``dilation``, ``padding`` and ``stride`` are per spatial axis.

    ``Tensor.unfold`` is a view in eager PyTorch, but the reshape that follows it in a model (HaloNet's blocks)
    copies the overlapping windows out, and the IR writes that reshape as a view: a latency model prices the unfold
    as that copy, by the size of its output."""

    mode: str
    axis: int = 0
    size: int = 0
    step: int = 1
    kernel: tuple[int, int] = (1, 1)
    dilation: tuple[int, int] = (1, 1)
    padding: tuple[int, int] = (0, 0)
    stride: tuple[int, int] = (1, 1)
    output_size: tuple[int, int] = (0, 0)


@dataclass(frozen=True)
class UpsampleAttrs:
    """Resize to the output shape with ``mode`` (nearest, bilinear, bicubic)."""

    mode: str = "nearest"
    align_corners: bool = False


@dataclass(frozen=True)
class DropoutAttrs:
    """Dropout with probability ``p`` (identity at inference)."""

    p: float = 0.5


@dataclass(frozen=True)
class LRNAttrs:
    """Local response normalization across ``size`` channels."""

    size: int
    alpha: float = 1e-4
    beta: float = 0.75
    k: float = 1.0


@dataclass(frozen=True)
class ConvertAttrs:
    """An element type conversion from ``from_dtype`` to the node's dtype: the same values in another representation
    (a dequantization, a quantization) or at another scale (an int8 requantization)."""

    from_dtype: DType


@dataclass(frozen=True)
class OpaqueAttrs:
    """An operator edgeplan does not model: ``operator`` is the source framework's name for it."""

    operator: str


Attrs = Union[  # noqa: UP007 - a runtime alias usable on Python 3.10
    NoAttrs,
    InputAttrs,
    ConstantAttrs,
    ConvAttrs,
    ConvTransposeAttrs,
    LinearAttrs,
    MatMulAttrs,
    NormAttrs,
    ActivationAttrs,
    PoolAttrs,
    AdaptivePoolAttrs,
    GlobalPoolAttrs,
    EltwiseAttrs,
    AxisAttrs,
    SplitAttrs,
    SliceAttrs,
    ChannelShuffleAttrs,
    FlattenAttrs,
    ReshapeAttrs,
    PermuteAttrs,
    PadAttrs,
    MeanAttrs,
    UpsampleAttrs,
    ReduceAttrs,
    AttentionAttrs,
    RollAttrs,
    UnfoldAttrs,
    DropoutAttrs,
    LRNAttrs,
    ConvertAttrs,
    OpaqueAttrs,
]

#: The attribute class each kind must carry; :meth:`Graph.validate` checks it.
ATTRS_BY_KIND: dict[OpKind, type] = {
    OpKind.INPUT: InputAttrs,
    OpKind.CONSTANT: ConstantAttrs,
    OpKind.CONV2D: ConvAttrs,
    OpKind.CONV_TRANSPOSE2D: ConvTransposeAttrs,
    OpKind.LINEAR: LinearAttrs,
    OpKind.MATMUL: MatMulAttrs,
    OpKind.BATCH_NORM: NormAttrs,
    OpKind.LAYER_NORM: NormAttrs,
    OpKind.GROUP_NORM: NormAttrs,
    OpKind.ACTIVATION: ActivationAttrs,
    OpKind.POOL2D: PoolAttrs,
    OpKind.ADAPTIVE_POOL2D: AdaptivePoolAttrs,
    OpKind.GLOBAL_POOL: GlobalPoolAttrs,
    OpKind.ELTWISE: EltwiseAttrs,
    OpKind.CONCAT: AxisAttrs,
    OpKind.STACK: AxisAttrs,
    OpKind.SPLIT: SplitAttrs,
    OpKind.EXPAND: NoAttrs,
    OpKind.SLICE: SliceAttrs,
    OpKind.CHANNEL_SHUFFLE: ChannelShuffleAttrs,
    OpKind.FLATTEN: FlattenAttrs,
    OpKind.RESHAPE: ReshapeAttrs,
    OpKind.PERMUTE: PermuteAttrs,
    OpKind.PAD: PadAttrs,
    OpKind.MEAN: MeanAttrs,
    OpKind.REDUCE: ReduceAttrs,
    OpKind.ATTENTION: AttentionAttrs,
    OpKind.ROLL: RollAttrs,
    OpKind.UNFOLD: UnfoldAttrs,
    OpKind.SOFTMAX: AxisAttrs,
    OpKind.UPSAMPLE: UpsampleAttrs,
    OpKind.DROPOUT: DropoutAttrs,
    OpKind.LRN: LRNAttrs,
    OpKind.CONVERT: ConvertAttrs,
    OpKind.OPAQUE: OpaqueAttrs,
}
