"""Work and size of one IR node: MACs, FLOPs, parameters and activation bytes.

Conventions (the same for every frontend, so figures compare across them):

- **MACs** count multiply-accumulates of the ops in :data:`~edgeplan.ir.ops.COMPUTE_KINDS` only (attention:
  ``2 * B * H * L * S * E`` for the two products; softmax and scaling are FLOPs): convolution
  ``N * C_out * H_out * W_out * (C_in / groups) * k_h * k_w``, transposed convolution
  ``N * C_in * H_in * W_in * (C_out / groups) * k_h * k_w``, linear ``rows * in * out``, matmul
  ``prod(out) * contraction`` (K for a plain matmul; the product of the summed indices for an einsum).
  Bias additions are not counted. These are the "FLOPs" that torchvision and most papers
  publish (resnet50: 4.1 G).
- **FLOPs** are ``2 * MACs`` for those ops plus a documented per-element count for the others: 1 per output element
  for activations, binary element-wise ops and type conversions, 2 for batch norm (scale and shift), 5 for
  layer/group norm, the window size per output element for pooling, 1 per input element for global/adaptive pooling
  and means, 3 per element for softmax, ``size + 3`` per element for LRN, 4 per output element for (bi)linear
  upsampling. Data movement (concat, split, slice, reshape, permute, pad, shuffle, flatten, dropout, nearest
  upsampling) is 0.
- **Parameters** are learnt values: convolution and linear weights and biases, the scale and shift of affine
  normalization, and constant tensors of more than one element used by element-wise ops (e.g. layer scale).
  Batch-norm running statistics are buffers and are not counted (as ``sum(p.numel() for p in
  model.parameters())``). ``param_bytes`` is parameters times the node's element size.
- **Activation bytes** of a node are the bytes of its outputs; ``input_bytes`` those of its inputs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

from edgeplan.ir.ops import (
    Attrs,
    ConvAttrs,
    ConvTransposeAttrs,
    EltwiseAttrs,
    LinearAttrs,
    LRNAttrs,
    MatMulAttrs,
    NormAttrs,
    OpKind,
    PoolAttrs,
    UnfoldAttrs,
    UpsampleAttrs,
)

__all__ = ["NodeLike", "node_flops", "node_macs", "node_params", "numel"]


class NodeLike(Protocol):
    """What the work and consistency rules read of a node (:class:`edgeplan.ir.graph.Node` has it)."""

    @property
    def name(self) -> str: ...
    @property
    def kind(self) -> OpKind: ...
    @property
    def attrs(self) -> Attrs: ...
    @property
    def inputs(self) -> Sequence[object]: ...
    @property
    def input_shapes(self) -> tuple[tuple[int, ...], ...]: ...
    @property
    def output_shapes(self) -> tuple[tuple[int, ...], ...]: ...

_NORM_FLOPS_PER_ELEMENT = {OpKind.BATCH_NORM: 2, OpKind.LAYER_NORM: 5, OpKind.GROUP_NORM: 5}


def numel(shape: tuple[int, ...]) -> int:
    """Number of elements of a tensor of ``shape`` (1 for a scalar)."""
    return math.prod(shape)


def node_macs(node: NodeLike) -> int:
    """Multiply-accumulates of ``node`` (0 outside the compute kinds)."""
    a = node.attrs
    if isinstance(a, ConvAttrs):
        k_h, k_w = a.kernel
        return numel(node.output_shapes[0]) * (a.in_channels // a.groups) * k_h * k_w
    if isinstance(a, ConvTransposeAttrs):
        k_h, k_w = a.kernel
        return numel(node.input_shapes[0]) * (a.out_channels // a.groups) * k_h * k_w
    if isinstance(a, LinearAttrs):
        return numel(node.output_shapes[0]) * a.in_features
    if isinstance(a, MatMulAttrs):
        return numel(node.output_shapes[0]) * a.contraction
    return 0


def node_flops(node: NodeLike) -> int:
    """Floating-point operations of ``node`` under the module's conventions."""
    kind = node.kind
    if kind in (OpKind.CONV2D, OpKind.CONV_TRANSPOSE2D, OpKind.LINEAR, OpKind.MATMUL, OpKind.ATTENTION):
        return 2 * node_macs(node)
    out = numel(node.output_shapes[0]) if node.output_shapes else 0
    inp = numel(node.input_shapes[0]) if node.input_shapes else 0
    if kind in (OpKind.ACTIVATION, OpKind.ELTWISE, OpKind.CONVERT):
        return out
    if kind in _NORM_FLOPS_PER_ELEMENT:
        return _NORM_FLOPS_PER_ELEMENT[kind] * out
    if isinstance(node.attrs, PoolAttrs):
        return out * node.attrs.kernel[0] * node.attrs.kernel[1]
    if kind in (OpKind.ADAPTIVE_POOL2D, OpKind.GLOBAL_POOL, OpKind.MEAN, OpKind.REDUCE):
        return inp
    if kind is OpKind.SOFTMAX:
        return 3 * out
    if isinstance(node.attrs, LRNAttrs):
        return (node.attrs.size + 3) * out
    if isinstance(node.attrs, UpsampleAttrs) and node.attrs.mode != "nearest":
        return 4 * out
    if isinstance(node.attrs, UnfoldAttrs) and node.attrs.mode == "col2im":  # overlapping windows are summed
        return inp
    return 0


def node_params(node: NodeLike) -> int:
    """Learnt parameters of ``node`` under the module's conventions."""
    a = node.attrs
    if isinstance(a, ConvAttrs):
        k_h, k_w = a.kernel
        return a.out_channels * (a.in_channels // a.groups) * k_h * k_w + (a.out_channels if a.bias else 0)
    if isinstance(a, ConvTransposeAttrs):
        k_h, k_w = a.kernel
        return a.in_channels * (a.out_channels // a.groups) * k_h * k_w + (a.out_channels if a.bias else 0)
    if isinstance(a, LinearAttrs):
        return a.in_features * a.out_features + (a.out_features if a.bias else 0)
    if isinstance(a, NormAttrs):
        return (1 if a.rms else 2) * a.channels if a.affine else 0
    if isinstance(a, EltwiseAttrs) and a.const_shape is not None:
        size = numel(a.const_shape)
        return size if size > 1 else 0
    if node.kind is OpKind.CONSTANT:
        return numel(node.output_shapes[0])
    return 0
