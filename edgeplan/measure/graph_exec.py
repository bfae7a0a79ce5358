"""Execute an IR graph with PyTorch, node by node: whole, by layer range, or timed per layer.

Plans cut a model at layer boundaries and run ranges of layers on different machines. To run exactly what a
plan reasons about, the executor builds one PyTorch callable per IR node from the node's typed attributes (with
seeded random weights, or the weights of the module the graph came from when its names match) and keeps the
tensors in an environment keyed by :class:`~edgeplan.ir.Ref`. Two processes that build the same graph with the
same seed hold the same weights, so a split execution computes the same outputs as a local one.

Kinds without a PyTorch equivalent here (``opaque``, a quantized file's ``convert``) raise
:class:`~edgeplan.errors.UnsupportedOperatorError` naming the node when the executor is built, never at run time.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence

import torch
import torch.nn.functional as F

from edgeplan.errors import InvalidInputError, UnsupportedOperatorError
from edgeplan.ir import Graph, Node, OpKind, Ref
from edgeplan.ir import ops as o
from edgeplan.ir.layer_chain import LayerChain

__all__ = ["Env", "GraphExecutor"]

Env = dict[Ref, torch.Tensor]
Fn = Callable[[Sequence[torch.Tensor]], tuple[torch.Tensor, ...]]

_DTYPES = {o.DType.FLOAT32: torch.float32, o.DType.FLOAT16: torch.float16, o.DType.BFLOAT16: torch.bfloat16,
           o.DType.FLOAT64: torch.float64}


class GraphExecutor:
    """Runs an IR graph (or ranges of its layers) with PyTorch on one device.

    Parameters
    ----------
    graph
        The graph; every node must be of a kind the executor supports.
    seed
        Seed of the random weights (and of :meth:`example_inputs`).
    module
        Optional source module: a node whose name is a submodule path with parameters of the right shapes
        takes that submodule's weights (so outputs can be compared with the module's).
    device
        Torch device string.

    Raises
    ------
    UnsupportedOperatorError
        Naming the first node the executor cannot run.
    """

    def __init__(self, graph: Graph, seed: int = 0, module: torch.nn.Module | None = None,
                 device: str = "cpu") -> None:
        self.graph = graph
        self.device = torch.device(device)
        self._seed = seed
        gen = torch.Generator().manual_seed(seed)
        self._fns: dict[str, Fn] = {}
        for node in graph.nodes:
            if node.kind is OpKind.INPUT:
                continue
            weights = _module_weights(module, node) if module is not None else None
            self._fns[node.name] = _build(node, gen, weights, self.device)
        self._dead_after = _dead_after(graph)

    def example_inputs(self, seed: int | None = None) -> Env:
        """Seeded random tensors for the graph inputs, keyed by their :class:`Ref`."""
        gen = torch.Generator().manual_seed(self._seed if seed is None else seed)
        return {Ref(n.name): torch.randn(n.output_shapes[0], generator=gen).to(self.device)
                for n in self.graph.inputs}

    def run_nodes(self, names: Iterable[str], env: Env) -> None:
        """Run the named nodes in order, reading their inputs from ``env`` and adding their outputs to it.

        A tensor is dropped from ``env`` right after the last node of the graph that reads it (graph outputs are
        kept), as a runtime frees it: holding every activation would make long ranges pay for fresh memory.
        """
        for name in names:
            node = self.graph.node(name)
            try:
                args = [env[r] for r in node.inputs]
            except KeyError as e:
                raise InvalidInputError(
                    f"node {name!r} of {self.graph.name!r} needs tensor {e.args[0]} that is not available; run the "
                    "layers before it first or send it with the live set"
                ) from None
            for i, out in enumerate(self._fns[name](args)):
                env[Ref(name, i)] = out
            del args
            for ref in self._dead_after.get(name, ()):
                env.pop(ref, None)

    @torch.inference_mode()
    def run(self, inputs: Env | None = None) -> tuple[torch.Tensor, ...]:
        """Run the whole graph and return its outputs (in the order of ``graph.outputs``)."""
        env: Env = dict(self.example_inputs() if inputs is None else inputs)
        self.run_nodes((n.name for n in self.graph.nodes if n.kind is not OpKind.INPUT), env)
        return tuple(env[r] for r in self.graph.outputs)

    @torch.inference_mode()
    def run_layers(self, chain: LayerChain, first: int, last: int, env: Mapping[Ref, torch.Tensor]) -> Env:
        """Run layers ``first..last`` of ``chain`` from the tensors live at boundary ``first``.

        Returns the tensors live at boundary ``last + 1`` (what a switch of sides there would send).
        """
        work: Env = dict(env)
        self.run_nodes(chain.nodes_of(first, last), work)
        return {r: work[r] for r in chain.live[last + 1]}

    @torch.inference_mode()
    def live_at(self, chain: LayerChain, boundary: int, inputs: Env | None = None) -> Env:
        """The real tensors live at ``boundary``, computed by running the layers before it."""
        env: Env = dict(self.example_inputs() if inputs is None else inputs)
        if boundary == 0:
            return {r: env[r] for r in chain.live[0]}
        return self.run_layers(chain, 0, boundary - 1, env)

    @torch.inference_mode()
    def sweep_ms(self, chain: LayerChain, start: int, env: Mapping[Ref, torch.Tensor]) -> list[float]:
        """Run layers ``start..n-1`` once and return the elapsed time after each one.

        Element ``k`` is the wall-clock time in milliseconds from the start of layer ``start`` to the end of
        layer ``start + k``: one sample of the latency of the range ``start..start+k`` run in one go (the clock
        read between layers costs well under a microsecond). Synchronises CUDA after each layer on a GPU.
        """
        work: Env = dict(env)
        cuda = self.device.type == "cuda"
        marks: list[float] = []
        t0 = time.perf_counter_ns()
        for layer in chain.layers[start:]:
            self.run_nodes(layer.nodes, work)
            if cuda:
                torch.cuda.synchronize(self.device)
            marks.append((time.perf_counter_ns() - t0) / 1e6)
        return marks


def _dead_after(graph: Graph) -> dict[str, tuple[Ref, ...]]:
    """For each node, the tensors it is the last reader of (never a graph output)."""
    last: dict[Ref, str] = {}
    for node in graph.nodes:
        for ref in node.inputs:
            last[ref] = node.name
    outputs = set(graph.outputs)
    dead: dict[str, list[Ref]] = {}
    for ref, name in last.items():
        if ref not in outputs:
            dead.setdefault(name, []).append(ref)
    return {k: tuple(v) for k, v in dead.items()}


def _module_weights(module: torch.nn.Module, node: Node) -> dict[str, torch.Tensor] | None:
    try:
        sub = module.get_submodule(node.name)
    except AttributeError:
        return None
    params = {k: v.detach() for k, v in sub.named_parameters(recurse=False)}
    buffers = {k: v.detach() for k, v in sub.named_buffers(recurse=False) if v.is_floating_point()}
    return {**params, **buffers} or None


def _param(weights: Mapping[str, torch.Tensor] | None, key: str, shape: Sequence[int], gen: torch.Generator,
           fan_in: int, device: torch.device, fill: float | None = None) -> torch.Tensor:
    """The source module's tensor when it has the right shape (a 1-D convolution's kernel taken as the 2-D kernel of
    height 1 the IR writes it as), else a seeded random one (std 1/sqrt(fan_in))."""
    if weights is not None and key in weights and tuple(weights[key].shape) == tuple(shape):
        return weights[key].to(device)
    if (weights is not None and key in weights and len(shape) == 4 and shape[2] == 1
            and tuple(weights[key].shape) == (shape[0], shape[1], shape[3])):  # a 1-D convolution's, in 2-D
        return weights[key].unsqueeze(2).to(device)
    if fill is not None:
        return torch.full(tuple(shape), fill, device=device)
    return (torch.randn(tuple(shape), generator=gen) / math.sqrt(max(fan_in, 1))).to(device)


def _sym_pad(padding: tuple[int, int, int, int]) -> tuple[int, int] | None:
    top, left, bottom, right = padding
    return (top, left) if (top, left) == (bottom, right) else None


def _pad_fn(padding: tuple[int, int, int, int], value: float) -> Callable[[torch.Tensor], torch.Tensor]:
    top, left, bottom, right = padding
    return lambda x: F.pad(x, (left, right, top, bottom), value=value)


def _one(fn: Callable[..., torch.Tensor]) -> Fn:
    return lambda args: (fn(*args),)


def _build(node: Node, gen: torch.Generator, w: Mapping[str, torch.Tensor] | None, dev: torch.device) -> Fn:
    builder = _BUILDERS.get(node.kind)
    if builder is None:
        detail = getattr(node.attrs, "operator", node.kind.value)
        raise UnsupportedOperatorError(detail, node.name, "the graph executor cannot run this kind; plans that "
                                       "execute the model need every node to be a modelled kind")
    return builder(node, gen, w, dev)


def _conv(node: Node, gen: torch.Generator, w: Mapping[str, torch.Tensor] | None, dev: torch.device) -> Fn:
    a = node.attrs
    assert isinstance(a, o.ConvAttrs)
    fan_in = a.in_channels // a.groups * a.kernel[0] * a.kernel[1]
    weight = _param(w, "weight", (a.out_channels, a.in_channels // a.groups, *a.kernel), gen, fan_in, dev)
    bias = _param(w, "bias", (a.out_channels,), gen, fan_in, dev) if a.bias else None
    sym = _sym_pad(a.padding)
    if sym is not None:
        return _one(lambda x: F.conv2d(x, weight, bias, a.stride, sym, a.dilation, a.groups))
    pad = _pad_fn(a.padding, 0.0)
    return _one(lambda x: F.conv2d(pad(x), weight, bias, a.stride, 0, a.dilation, a.groups))


def _conv_t(node: Node, gen: torch.Generator, w: Mapping[str, torch.Tensor] | None, dev: torch.device) -> Fn:
    a = node.attrs
    assert isinstance(a, o.ConvTransposeAttrs)
    fan_in = a.in_channels // a.groups * a.kernel[0] * a.kernel[1]
    weight = _param(w, "weight", (a.in_channels, a.out_channels // a.groups, *a.kernel), gen, fan_in, dev)
    bias = _param(w, "bias", (a.out_channels,), gen, fan_in, dev) if a.bias else None
    pad = (a.padding[0], a.padding[1])
    return _one(lambda x: F.conv_transpose2d(x, weight, bias, a.stride, pad, a.output_padding, a.groups,
                                             a.dilation))


def _linear(node: Node, gen: torch.Generator, w: Mapping[str, torch.Tensor] | None, dev: torch.device) -> Fn:
    a = node.attrs
    assert isinstance(a, o.LinearAttrs)
    weight = _param(w, "weight", (a.out_features, a.in_features), gen, a.in_features, dev)
    bias = _param(w, "bias", (a.out_features,), gen, a.in_features, dev) if a.bias else None
    return _one(lambda x: F.linear(x, weight, bias))


def _matmul(node: Node, gen: torch.Generator, w: Mapping[str, torch.Tensor] | None, dev: torch.device) -> Fn:
    a = node.attrs
    assert isinstance(a, o.MatMulAttrs)
    if a.equation:
        return _one(lambda x, y: torch.einsum(a.equation, x, y))
    return _one(torch.matmul)


def _norm(node: Node, gen: torch.Generator, w: Mapping[str, torch.Tensor] | None, dev: torch.device) -> Fn:
    a = node.attrs
    assert isinstance(a, o.NormAttrs)
    c = a.channels
    scale = _param(w, "weight", (c,), gen, 1, dev, fill=1.0) if a.affine else None
    shift = _param(w, "bias", (c,), gen, 1, dev, fill=0.0) if a.affine else None
    if node.kind is OpKind.BATCH_NORM:
        mean = _param(w, "running_mean", (c,), gen, 1, dev, fill=0.0)
        var = _param(w, "running_var", (c,), gen, 1, dev, fill=1.0)
        return _one(lambda x: F.batch_norm(x, mean, var, scale, shift, False, 0.0, a.eps))
    if node.kind is OpKind.GROUP_NORM:
        return _one(lambda x: F.group_norm(x, a.groups, scale, shift, a.eps))
    shape = node.input_shapes[0]
    if a.axis == 1 and len(shape) == 4:  # channels-first LayerNorm2d
        return _one(lambda x: F.layer_norm(x.permute(0, 2, 3, 1), (c,), scale, shift, a.eps).permute(0, 3, 1, 2))
    axis = a.axis % len(shape)
    normalized = tuple(shape[axis:])
    s = scale.reshape(normalized) if scale is not None and math.prod(normalized) == c else scale
    if a.rms:
        return _one(lambda x: F.rms_norm(x, normalized, s, a.eps))
    b = shift.reshape(normalized) if shift is not None and math.prod(normalized) == c else shift
    return _one(lambda x: F.layer_norm(x, normalized, s, b, a.eps))


_SIMPLE_ACTS: dict[o.Activation, Callable[[torch.Tensor], torch.Tensor]] = {
    o.Activation.RELU: F.relu, o.Activation.RELU6: F.relu6, o.Activation.HARDSWISH: F.hardswish,
    o.Activation.HARDSIGMOID: F.hardsigmoid, o.Activation.SIGMOID: torch.sigmoid, o.Activation.SILU: F.silu,
    o.Activation.GELU: F.gelu, o.Activation.TANH: torch.tanh, o.Activation.MISH: F.mish,
    o.Activation.SOFTPLUS: F.softplus, o.Activation.EXP: torch.exp, o.Activation.LOG: torch.log,
    o.Activation.SQRT: torch.sqrt, o.Activation.RSQRT: torch.rsqrt, o.Activation.ABS: torch.abs,
    o.Activation.NEG: torch.neg, o.Activation.RECIPROCAL: torch.reciprocal, o.Activation.ERF: torch.erf,
}


def _activation(node: Node, gen: torch.Generator, w: Mapping[str, torch.Tensor] | None, dev: torch.device) -> Fn:
    a = node.attrs
    assert isinstance(a, o.ActivationAttrs)
    if a.fn in _SIMPLE_ACTS:
        return _one(_SIMPLE_ACTS[a.fn])
    if a.fn is o.Activation.LEAKY_RELU:
        return _one(lambda x: F.leaky_relu(x, a.alpha))
    if a.fn is o.Activation.ELU:
        return _one(lambda x: F.elu(x, a.alpha or 1.0))
    if a.fn is o.Activation.POW:
        return _one(lambda x: torch.pow(x, a.alpha))
    return _one(lambda x: torch.clamp(x, a.low, a.high))  # CLIP


def _pool(node: Node, gen: torch.Generator, w: Mapping[str, torch.Tensor] | None, dev: torch.device) -> Fn:
    a = node.attrs
    assert isinstance(a, o.PoolAttrs)
    sym = _sym_pad(a.padding)
    if sym is not None and all(2 * p <= k for p, k in zip(sym, a.kernel, strict=True)):
        pad, native = (lambda x: x), sym
    else:
        pad, native = _pad_fn(a.padding, -math.inf if a.mode is o.PoolMode.MAX else 0.0), (0, 0)
    if a.mode is o.PoolMode.MAX:
        return _one(lambda x: F.max_pool2d(pad(x), a.kernel, a.stride, native, a.dilation, a.ceil_mode))
    if a.mode is o.PoolMode.SUM:  # the window's sum: an average that divides by 1, zeros of the padding included
        return _one(lambda x: F.avg_pool2d(pad(x), a.kernel, a.stride, native, a.ceil_mode, True, 1))
    return _one(lambda x: F.avg_pool2d(pad(x), a.kernel, a.stride, native, a.ceil_mode, a.count_include_pad))


def _adaptive_pool(node: Node, gen: torch.Generator, w: Mapping[str, torch.Tensor] | None,
                   dev: torch.device) -> Fn:
    a = node.attrs
    assert isinstance(a, o.AdaptivePoolAttrs)
    fn = F.adaptive_max_pool2d if a.mode is o.PoolMode.MAX else F.adaptive_avg_pool2d
    return _one(lambda x: fn(x, a.output_size))


def _global_pool(node: Node, gen: torch.Generator, w: Mapping[str, torch.Tensor] | None, dev: torch.device) -> Fn:
    a = node.attrs
    assert isinstance(a, o.GlobalPoolAttrs)
    if a.mode is o.PoolMode.MAX:
        return _one(lambda x: torch.amax(x, dim=(-2, -1), keepdim=a.keepdim))
    return _one(lambda x: torch.mean(x, dim=(-2, -1), keepdim=a.keepdim))


_ELTWISE: dict[o.EltwiseOp, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    o.EltwiseOp.ADD: torch.add, o.EltwiseOp.SUB: torch.sub, o.EltwiseOp.MUL: torch.mul, o.EltwiseOp.DIV: torch.div,
}


def _eltwise(node: Node, gen: torch.Generator, w: Mapping[str, torch.Tensor] | None, dev: torch.device) -> Fn:
    a = node.attrs
    assert isinstance(a, o.EltwiseAttrs)
    fn = _ELTWISE[a.op]
    if len(node.inputs) == 2:
        return _one(fn)
    const_shape = a.const_shape or ()
    const = torch.rand(const_shape, generator=gen).to(dev) + 0.5  # positive: safe for div
    return _one(lambda x: fn(x, const))


def _reshape_like(node: Node) -> Fn:
    shape = node.output_shapes[0]
    return _one(lambda x: x.reshape(shape))


def _shape_op(node: Node, gen: torch.Generator, w: Mapping[str, torch.Tensor] | None, dev: torch.device) -> Fn:
    a = node.attrs
    kind = node.kind
    if kind in (OpKind.FLATTEN, OpKind.RESHAPE):
        return _reshape_like(node)
    if kind is OpKind.DROPOUT:
        return lambda args: (args[0],)
    if kind is OpKind.CONCAT:
        assert isinstance(a, o.AxisAttrs)
        return lambda args: (torch.cat(list(args), dim=a.axis),)
    if kind is OpKind.STACK:
        assert isinstance(a, o.AxisAttrs)
        return lambda args: (torch.stack(list(args), dim=a.axis),)
    if kind is OpKind.SPLIT:
        assert isinstance(a, o.SplitAttrs)
        if a.squeeze:
            return lambda args: tuple(torch.unbind(args[0], dim=a.axis))
        return lambda args: tuple(torch.split(args[0], list(a.sizes), dim=a.axis))
    if kind is OpKind.EXPAND:
        shape = node.output_shapes[0]
        return _one(lambda x: x.expand(shape).contiguous())
    if kind is OpKind.SLICE:
        assert isinstance(a, o.SliceAttrs)
        if a.squeeze:
            return _one(lambda x: x.select(a.axis, a.start))
        return _one(lambda x: x.narrow(a.axis, a.start, a.end - a.start)[
            (slice(None),) * (a.axis % x.dim()) + (slice(None, None, a.step),)])
    if kind is OpKind.CHANNEL_SHUFFLE:
        assert isinstance(a, o.ChannelShuffleAttrs)
        return _one(lambda x: F.channel_shuffle(x, a.groups))
    if kind is OpKind.PERMUTE:
        assert isinstance(a, o.PermuteAttrs)
        return _one(lambda x: x.permute(a.dims).contiguous())
    if kind is OpKind.ROLL:
        assert isinstance(a, o.RollAttrs)
        return _one(lambda x: torch.roll(x, a.shifts, a.axes))
    if kind is OpKind.UNFOLD:
        assert isinstance(a, o.UnfoldAttrs)
        if a.mode == "unfold":
            return _one(lambda x: x.unfold(a.axis, a.size, a.step))
        if a.mode == "im2col":
            return _one(lambda x: F.unfold(x, a.kernel, a.dilation, a.padding, a.stride))
        return _one(lambda x: F.fold(x, a.output_size, a.kernel, a.dilation, a.padding, a.stride))
    assert isinstance(a, o.PadAttrs)  # PAD
    flat = tuple(p for before_after in reversed(a.pads) for p in before_after)
    return _one(lambda x: F.pad(x, flat, mode=a.mode, value=a.value if a.mode == "constant" else None))


def _reduce(node: Node, gen: torch.Generator, w: Mapping[str, torch.Tensor] | None, dev: torch.device) -> Fn:
    a = node.attrs
    if isinstance(a, o.MeanAttrs):
        return _one(lambda x: torch.mean(x, dim=a.axes, keepdim=a.keepdim))
    assert isinstance(a, o.ReduceAttrs)
    if a.op == "sum":
        return _one(lambda x: torch.sum(x, dim=a.axes, keepdim=a.keepdim))
    if a.op == "max":
        return _one(lambda x: torch.amax(x, dim=a.axes, keepdim=a.keepdim))
    if a.op == "min":
        return _one(lambda x: torch.amin(x, dim=a.axes, keepdim=a.keepdim))
    if a.op == "prod":
        return _one(lambda x: torch.prod(x, dim=a.axes[0], keepdim=a.keepdim))
    return _one(lambda x: torch.linalg.vector_norm(x, dim=a.axes, keepdim=a.keepdim))


def _misc(node: Node, gen: torch.Generator, w: Mapping[str, torch.Tensor] | None, dev: torch.device) -> Fn:
    a = node.attrs
    if node.kind is OpKind.SOFTMAX:
        assert isinstance(a, o.AxisAttrs)
        return _one(lambda x: torch.softmax(x, dim=a.axis))
    if node.kind is OpKind.LRN:
        assert isinstance(a, o.LRNAttrs)
        return _one(lambda x: F.local_response_norm(x, a.size, a.alpha, a.beta, a.k))
    if node.kind is OpKind.UPSAMPLE:
        assert isinstance(a, o.UpsampleAttrs)
        size = node.output_shapes[0][2:]
        align = a.align_corners if a.mode != "nearest" else None
        return _one(lambda x: F.interpolate(x, size=size, mode=a.mode, align_corners=align))
    if node.kind is OpKind.ATTENTION:
        assert isinstance(a, o.AttentionAttrs)
        return lambda args: (F.scaled_dot_product_attention(args[0], args[1], args[2],
                                                            attn_mask=args[3] if len(args) > 3 else None,
                                                            is_causal=a.causal),)
    shape = node.output_shapes[0]  # CONSTANT
    value = torch.randn(shape, generator=gen).to(device=dev, dtype=_DTYPES.get(node.dtype, torch.float32))
    return lambda args: (value,)


_BUILDERS: dict[OpKind, Callable[[Node, torch.Generator, Mapping[str, torch.Tensor] | None, torch.device], Fn]] = {
    OpKind.CONV2D: _conv,
    OpKind.CONV_TRANSPOSE2D: _conv_t,
    OpKind.LINEAR: _linear,
    OpKind.MATMUL: _matmul,
    OpKind.BATCH_NORM: _norm,
    OpKind.LAYER_NORM: _norm,
    OpKind.GROUP_NORM: _norm,
    OpKind.ACTIVATION: _activation,
    OpKind.POOL2D: _pool,
    OpKind.ADAPTIVE_POOL2D: _adaptive_pool,
    OpKind.GLOBAL_POOL: _global_pool,
    OpKind.ELTWISE: _eltwise,
    **{k: _shape_op for k in (OpKind.FLATTEN, OpKind.RESHAPE, OpKind.DROPOUT, OpKind.CONCAT, OpKind.STACK,
                              OpKind.SPLIT, OpKind.EXPAND, OpKind.SLICE, OpKind.CHANNEL_SHUFFLE, OpKind.PERMUTE,
                              OpKind.ROLL, OpKind.UNFOLD, OpKind.PAD)},
    OpKind.MEAN: _reduce,
    OpKind.REDUCE: _reduce,
    **{k: _misc for k in (OpKind.SOFTMAX, OpKind.LRN, OpKind.UPSAMPLE, OpKind.ATTENTION, OpKind.CONSTANT)},
}
