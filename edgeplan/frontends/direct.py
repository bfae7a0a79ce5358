"""IR graphs of generated architecture families built directly, without running or tracing torch.

Tracing a network through the torch frontend takes about a second; a NAS loop, li2023's 1000 synthetic networks or
the 15,625 architectures of NAS-Bench-201 need the graph in milliseconds. :func:`nb201_graph` and
:func:`synthetic_graph` write the graph the torch frontend produces for
:func:`edgeplan.frontends.nb201.build_nb201` and :func:`edgeplan.frontends.synthetic.build_synthetic` node for node
(names, kinds, ATen sources, attributes, shapes and order; ``tests/test_direct_graphs.py`` checks equality on
sampled architectures) from the architecture alone, without importing torch.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, replace
from functools import lru_cache

from edgeplan.frontends.nb201 import _CELLS_PER_STAGE, _INPUT_SHAPE, _NUM_NODES, _STEM_CHANNELS, parse_cell
from edgeplan.frontends.synthetic import DENSE_BOTTLENECK, SyntheticArch, SyntheticBlock, pool_padding, sample_synthetic
from edgeplan.frontends.synthetic import INPUT_SIZE as SYN_INPUT
from edgeplan.ir.graph import Graph, Node, Ref
from edgeplan.ir.ops import (
    Activation,
    ActivationAttrs,
    AxisAttrs,
    ConvAttrs,
    EltwiseAttrs,
    EltwiseOp,
    FlattenAttrs,
    GlobalPoolAttrs,
    InputAttrs,
    LinearAttrs,
    NormAttrs,
    OpKind,
    PermuteAttrs,
    PoolAttrs,
    PoolMode,
    SplitAttrs,
)

__all__ = ["nb201_graph", "synthetic_graph"]

Shape = tuple[int, ...]


@dataclass(frozen=True)
class _ConvShape:
    """A square convolution's output channels, kernel, stride, groups and padding.

    Attributes
    ----------
    c_out
        Output channels.
    kernel, stride
        Kernel size and stride, the same along both axes.
    groups
        Channel groups (the input channels for a depthwise convolution).
    padding
        Padding on every side; ``None``: ``kernel // 2``.
    """

    c_out: int
    kernel: int
    stride: int = 1
    groups: int = 1
    padding: int | None = None


class _Builder:
    """Appends nodes with the torch frontend's naming: module paths, and ``scope/op_N`` for functions."""

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.shapes: dict[str, Shape] = {}
        self._counts: Counter[str] = Counter()
        self.folded_ops: list[str] = []
        self.folded_shapes: list[tuple[tuple[Shape, ...], tuple[Shape, ...]]] = []

    def add(self, name: str, kind: OpKind, attrs: object, inputs: list[str], out: Shape, source: str) -> str:
        self.nodes.append(Node(name, kind, attrs, tuple(Ref(i) for i in inputs),  # type: ignore[arg-type]
                               tuple(self.shapes[i] for i in inputs), (out,), source=source))
        self.shapes[name] = out
        return name

    def function(self, scope: str, op: str) -> str:
        """Name of the next call of ATen function ``op`` in module ``scope`` (counted over the whole graph)."""
        n = self._counts[op]
        self._counts[op] += 1
        return f"{scope}/{op}" + (f"_{n}" if n else "")

    def conv(self, name: str, x: str, shape: _ConvShape, bias: bool = False, functional: bool = False) -> str:
        """A convolution named ``name`` (a module's), or called as a function in module ``name`` (``functional``).
        The tracer numbers every ``conv2d`` call, a module's too, so each one counts."""
        name = self.function(name, "conv2d") if functional else name
        if not functional:
            self._counts["conv2d"] += 1
        n, c, h, w = self.shapes[x]
        kernel, stride = shape.kernel, shape.stride
        pad = kernel // 2 if shape.padding is None else shape.padding
        oh, ow = (h + 2 * pad - kernel) // stride + 1, (w + 2 * pad - kernel) // stride + 1
        attrs = ConvAttrs(c, shape.c_out, (kernel, kernel), (stride, stride), (pad, pad, pad, pad),
                          groups=shape.groups, bias=bias)
        return self.add(name, OpKind.CONV2D, attrs, [x], (n, shape.c_out, oh, ow), "aten.conv2d.default")

    def activation(self, name: str, x: str, fn: Activation, source: str, low: float | None = None,
                   high: float | None = None) -> str:
        return self.add(name, OpKind.ACTIVATION, ActivationAttrs(fn, low=low, high=high), [x], self.shapes[x],
                        source)

    def max_pool(self, name: str, x: str, kernel: int, stride: int, pad: int) -> str:
        n, c, h, w = self.shapes[x]
        out = (n, c, (h + 2 * pad - kernel) // stride + 1, (w + 2 * pad - kernel) // stride + 1)
        attrs = PoolAttrs(PoolMode.MAX, (kernel, kernel), (stride, stride), (pad, pad, pad, pad))
        return self.add(name, OpKind.POOL2D, attrs, [x], out, "aten.max_pool2d.default")

    def global_pool(self, name: str, x: str) -> str:
        n, c = self.shapes[x][:2]
        return self.add(name, OpKind.GLOBAL_POOL, GlobalPoolAttrs(PoolMode.AVG), [x], (n, c, 1, 1),
                        "aten.adaptive_avg_pool2d.default")

    def binary(self, scope: str, op: EltwiseOp, a: str, b: str) -> str:
        fn = op.value
        return self.add(self.function(scope, fn), OpKind.ELTWISE, EltwiseAttrs(op), [a, b], self.shapes[a],
                        f"aten.{fn}.Tensor")

    def head(self, x: str, classes: int) -> str:
        """Global average pooling, flatten and the linear classifier."""
        n, c = self.shapes[x][:2]
        x = self.global_pool("global_pool", x)
        x = self.add("flatten", OpKind.FLATTEN, FlattenAttrs(1, -1), [x], (n, c), "aten.flatten.using_ints")
        return self.add("classifier", OpKind.LINEAR, LinearAttrs(c, classes), [x], (n, classes),
                        "aten.linear.default")

    def bn(self, name: str, x: str) -> str:
        c = self.shapes[x][1]
        return self.add(name, OpKind.BATCH_NORM, NormAttrs(c, axis=1), [x], self.shapes[x], "aten.batch_norm.default")

    def relu(self, name: str, x: str, inplace: bool = False) -> str:
        source = "aten.relu_.default" if inplace else "aten.relu.default"
        return self.add(name, OpKind.ACTIVATION, ActivationAttrs(Activation.RELU), [x], self.shapes[x], source)

    def relu_conv_bn(self, prefix: str, x: str, c_out: int, kernel: int, stride: int) -> str:
        r = self.relu(f"{prefix}.0", x)
        c = self.conv(f"{prefix}.1", r, _ConvShape(c_out, kernel, stride))
        return self.bn(f"{prefix}.2", c)

    def avg_pool(self, name: str, x: str, kernel: int, stride: int, pad: int, include_pad: bool) -> str:
        n, c, h, w = self.shapes[x]
        out = (n, c, (h + 2 * pad - kernel) // stride + 1, (w + 2 * pad - kernel) // stride + 1)
        attrs = PoolAttrs(PoolMode.AVG, (kernel, kernel), (stride, stride), (pad, pad, pad, pad),
                          count_include_pad=include_pad)
        return self.add(name, OpKind.POOL2D, attrs, [x], out, "aten.avg_pool2d.default")

    def add_tensors(self, scope: str, a: str, b: str) -> str:
        return self.binary(scope, EltwiseOp.ADD, a, b)

    def times_zero(self, scope: str, x: str) -> str:
        return self.add(self.function(scope, "mul"), OpKind.ELTWISE,
                        EltwiseAttrs(EltwiseOp.MUL, const_shape=(), const_value=0.0), [x], self.shapes[x],
                        "aten.mul.Tensor")


@lru_cache(maxsize=256)
def nb201_graph(cell: str, num_classes: int = 10, official: bool = False) -> Graph:
    """The IR of the NAS-Bench-201 network of ``cell`` (the graph ``load_graph("nb201:" + cell)`` returns).

    Parameters
    ----------
    cell
        A cell string, with or without the ``nb201:`` (or ``nb201-official:``) prefix.
    num_classes
        Classes of the linear classifier.
    official
        Build the official module's cell (``load_graph("nb201-official:" + cell)``): every ``none`` edge is
        ``x * 0`` summed into its node, as in :func:`edgeplan.frontends.nb201.build_nb201` with ``official=True``.

    Returns
    -------
    Graph
        A validated graph named ``nb201:{cell}``.

    Raises
    ------
    InvalidInputError
        For a malformed cell string.
    """
    official = official or cell.startswith("nb201-official:")
    text = cell.split(":", 1)[1] if cell.startswith(("nb201:", "nb201-official:")) else cell
    parsed = parse_cell(text)
    live = [(op, src, dst) for op, src, dst in parsed.edges if official or op != "none"]
    b = _Builder()
    b.shapes["input"] = _INPUT_SHAPE
    b.nodes.append(Node("input", OpKind.INPUT, InputAttrs(0), (), (), (_INPUT_SHAPE,), source="placeholder"))
    c = _STEM_CHANNELS
    x = b.conv("stem_conv", "input", _ConvShape(c, 3, 1))
    x = b.bn("stem_bn", x)
    for stage in range(1, 4):
        if stage > 1:
            scope = f"reduction{stage}"
            down = b.avg_pool(f"{scope}.downsample.0", x, 2, 2, 0, include_pad=True)
            down = b.conv(f"{scope}.downsample.1", down, _ConvShape(2 * c, 1, 1))
            a = b.relu_conv_bn(f"{scope}.conv_a", x, 2 * c, 3, 2)
            a = b.relu_conv_bn(f"{scope}.conv_b", a, 2 * c, 3, 1)
            x = b.add_tensors(scope, down, a)
            c *= 2
        for index in range(_CELLS_PER_STAGE):
            scope = f"stage{stage}_cell{index}"
            nodes = [x]
            for dst in range(1, _NUM_NODES):
                terms = []
                for k, (op, src, d) in enumerate(live):
                    if d != dst:
                        continue
                    edge = f"{scope}.edges.{k}"
                    if op == "none":
                        terms.append(b.times_zero(edge, nodes[src]))
                    elif op == "skip_connect":
                        terms.append(nodes[src])
                    elif op == "avg_pool_3x3":
                        terms.append(b.avg_pool(edge, nodes[src], 3, 1, 1, include_pad=False))
                    else:
                        terms.append(b.relu_conv_bn(edge, nodes[src], c, 1 if op == "nor_conv_1x1" else 3, 1))
                if not terms:
                    nodes.append(b.times_zero(scope, x))
                    continue
                total = terms[0]
                for term in terms[1:]:
                    total = b.add_tensors(scope, total, term)
                nodes.append(total)
            x = nodes[-1]
    x = b.bn("last_bn", x)
    x = b.relu("last_relu", x, inplace=True)
    x = b.head(x, num_classes)
    family = "nb201-official" if official else "nb201"
    return Graph(name=f"{family}:{text}", nodes=tuple(b.nodes), outputs=(Ref(x),)).validate()


#: The synthetic spaces' activations (:data:`edgeplan.frontends.synthetic.ACTIVATIONS`) as the torch frontend
#: records their modules (in place but GELU): function, ATen source, and ReLU6's clamp.
_ACTIVATIONS: dict[str, tuple[Activation, str, float | None, float | None]] = {
    "relu6": (Activation.RELU6, "aten.hardtanh_.default", 0.0, 6.0),
    "relu": (Activation.RELU, "aten.relu_.default", None, None),
    "silu": (Activation.SILU, "aten.silu_.default", None, None),
    "hardswish": (Activation.HARDSWISH, "aten.hardswish_.default", None, None),
    "gelu": (Activation.GELU, "aten.gelu.default", None, None),
}


def _conv_bn(b: _Builder, prefix: str, x: str, shape: _ConvShape, act: str | None = "relu6",
             std: bool = False) -> str:
    """The synthetic space's ``conv_bn``: conv (no bias), batch norm, the activation (ReLU6, ``hardtanh_``, but in
    the modern space); with ``std``, the nf space's weight-standardized conv and the activation, the weight's
    reshape, batch norm and reshape back folded (computations on a constant)."""
    if not std:
        x = b.conv(f"{prefix}.0", x, shape)
        x = b.bn(f"{prefix}.1", x)
        return _act(b, f"{prefix}.2", x, act) if act else x
    weight = (shape.c_out, b.shapes[x][1] // shape.groups, shape.kernel, shape.kernel)
    rows = (1, shape.c_out, math.prod(weight[1:]))
    b.folded_ops += ["reshape", "batch_norm", "reshape_as"]
    b.folded_shapes += [((weight,), (rows,)), ((rows,), (rows,)), ((rows, weight), (weight,))]
    x = b.conv(f"{prefix}.0", x, shape, functional=True)
    return _act(b, f"{prefix}.1", x, act) if act else x


def _permute(b: _Builder, scope: str, x: str, dims: tuple[int, ...]) -> str:
    shape = b.shapes[x]
    return b.add(b.function(scope, "permute"), OpKind.PERMUTE, PermuteAttrs(dims), [x],
                 tuple(shape[d] for d in dims), "aten.permute.default")


def _convnext_block(b: _Builder, name: str, block: SyntheticBlock, x: str) -> str:
    """torchvision's ConvNeXt block as the modern space builds it (a downsampling conv first where needed)."""
    c, hidden = block.out_channels, block.out_channels * (block.expansion or 4)
    if block.stride != 1 or block.in_channels != c:
        x = _conv_bn(b, f"{name}.down", x, _ConvShape(c, block.stride, block.stride, padding=0), act=None,
                     std=block.std)
    y = b.conv(f"{name}.block.0", x, _ConvShape(c, block.kernel or 7, 1, c), bias=True)
    y = _permute(b, f"{name}.block.1", y, (0, 2, 3, 1))
    n, h, w, _ = b.shapes[y]
    y = b.add(f"{name}.block.2", OpKind.LAYER_NORM, NormAttrs(c, eps=1e-6, axis=-1), [y], (n, h, w, c),
              "aten.layer_norm.default")
    y = b.add(f"{name}.block.3", OpKind.LINEAR, LinearAttrs(c, hidden), [y], (n, h, w, hidden), "aten.linear.default")
    y = b.activation(f"{name}.block.4", y, Activation.GELU, "aten.gelu.default")
    y = b.add(f"{name}.block.5", OpKind.LINEAR, LinearAttrs(hidden, c), [y], (n, h, w, c), "aten.linear.default")
    y = _permute(b, f"{name}.block.6", y, (0, 3, 1, 2))
    y = b.add(b.function(name, "mul"), OpKind.ELTWISE, EltwiseAttrs(EltwiseOp.MUL, const_shape=(c, 1, 1)), [y],
              b.shapes[y], "aten.mul.Tensor")
    return b.add(b.function(name, "add_"), OpKind.ELTWISE, EltwiseAttrs(EltwiseOp.ADD), [y, x], b.shapes[y],
                 "aten.add_.Tensor")


def _squeeze_excite(b: _Builder, scope: str, y: str) -> str:
    """The synthetic spaces' squeeze-and-excite on ``y``: global average, 1x1 conv to a quarter (at least 8), ReLU,
    1x1 conv back, sigmoid, product."""
    channels = b.shapes[y][1]
    g = b.global_pool(f"{scope}.gate.0", y)
    g = b.conv(f"{scope}.gate.1", g, _ConvShape(max(8, channels // 4), 1, 1), bias=True)
    g = b.activation(f"{scope}.gate.2", g, Activation.RELU, "aten.relu_.default")
    g = b.conv(f"{scope}.gate.3", g, _ConvShape(channels, 1, 1), bias=True)
    g = b.activation(f"{scope}.gate.4", g, Activation.SIGMOID, "aten.sigmoid.default")
    return b.binary(scope, EltwiseOp.MUL, y, g)


def _act(b: _Builder, name: str, x: str, act: str) -> str:
    fn, source, low, high = _ACTIVATIONS[act]
    return b.activation(name, x, fn, source, low, high)


def _resnet_block(b: _Builder, name: str, block: SyntheticBlock, x: str, act: str) -> str:
    """The mixed space's ResNet / ResNeXt / RegNet bottleneck (``ResNetBlock`` of the synthetic module)."""
    w = block.width or block.out_channels
    y = _conv_bn(b, f"{name}.body.0", x, _ConvShape(w, 1, 1), act=act, std=block.std)
    y = _conv_bn(b, f"{name}.body.1", y, _ConvShape(w, 3, block.stride, block.groups or 1), act, std=block.std)
    i = 2
    if block.se:
        y = _squeeze_excite(b, f"{name}.body.{i}", y)
        i += 1
    y = _conv_bn(b, f"{name}.body.{i}", y, _ConvShape(block.out_channels, 1, 1), act=None, std=block.std)
    shortcut = x
    if block.stride != 1 or block.in_channels != block.out_channels:
        shortcut = _conv_bn(b, f"{name}.shortcut", x, _ConvShape(block.out_channels, 1, block.stride), act=None,
                            std=block.std)
    y = b.add(b.function(name, "add_"), OpKind.ELTWISE, EltwiseAttrs(EltwiseOp.ADD), [y, shortcut], b.shapes[y],
              "aten.add_.Tensor")
    return _act(b, f"{name}.act", y, act)


def _concat(b: _Builder, scope: str, parts: list[str]) -> str:
    n, _, h, w = b.shapes[parts[0]]
    c = sum(b.shapes[p][1] for p in parts)
    return b.add(b.function(scope, "cat"), OpKind.CONCAT, AxisAttrs(1), parts, (n, c, h, w), "aten.cat.default")


def _dense_block(b: _Builder, name: str, block: SyntheticBlock, x: str, act: str) -> str:
    """The mixed space's DenseNet block and transition (``DenseBlock`` of the synthetic module)."""
    growth = block.growth or 32
    features = [x]
    for i in range(block.layers or 0):
        scope = f"{name}.layers.{i}"
        y = features[0] if len(features) == 1 else _concat(b, scope, features)
        y = b.bn(f"{scope}.body.0", y)
        y = _act(b, f"{scope}.body.1", y, act)
        y = b.conv(f"{scope}.body.2", y, _ConvShape(DENSE_BOTTLENECK * growth, 1, 1))
        y = b.bn(f"{scope}.body.3", y)
        y = _act(b, f"{scope}.body.4", y, act)
        features.append(b.conv(f"{scope}.body.5", y, _ConvShape(growth, 3, 1)))
    y = b.bn(f"{name}.transition.0", _concat(b, name, features))
    y = _act(b, f"{name}.transition.1", y, act)
    y = b.conv(f"{name}.transition.2", y, _ConvShape(block.out_channels, 1, 1))
    if block.stride == 2:
        y = b.avg_pool(f"{name}.transition.3", y, 2, 2, 0, include_pad=True)
    return y


def _synthetic_block(b: _Builder, name: str, block: SyntheticBlock, x: str, act: str = "relu6") -> str:
    if block.residual:  # a copy in the stages or modern space: x + body(x)
        y = _synthetic_block(b, f"{name}.body", replace(block, residual=False), x, act)
        return b.binary(name, EltwiseOp.ADD, x, y)
    if block.kind == "conv":
        return _conv_bn(b, name, x, _ConvShape(block.out_channels, block.kernel or 3, block.stride, block.groups or 1),
                        act, std=block.std)
    if block.kind == "dwsep":
        depthwise = _ConvShape(block.in_channels, block.kernel or 3, block.stride, block.in_channels)
        x = _conv_bn(b, f"{name}.0", x, depthwise, act, std=block.std)
        return _conv_bn(b, f"{name}.1", x, _ConvShape(block.out_channels, 1, 1), act=act, std=block.std)
    if block.kind == "convnext":
        return _convnext_block(b, name, block, x)
    if block.kind == "bottleneck":
        hidden = block.in_channels * (block.expansion or 1)
        y, i = x, 0
        if block.expansion != 1:
            y = _conv_bn(b, f"{name}.body.{i}", y, _ConvShape(hidden, 1, 1), act=act, std=block.std)
            i += 1
        y = _conv_bn(b, f"{name}.body.{i}", y, _ConvShape(hidden, block.kernel or 3, block.stride, hidden), act,
                     std=block.std)
        i += 1
        if block.se:
            y = _squeeze_excite(b, f"{name}.body.{i}", y)
            i += 1
        y = _conv_bn(b, f"{name}.body.{i}", y, _ConvShape(block.out_channels, 1, 1), act=None, std=block.std)
        if block.stride == 1 and block.in_channels == block.out_channels:
            return b.binary(name, EltwiseOp.ADD, x, y)
        return y
    if block.kind == "resnet":
        return _resnet_block(b, name, block, x, act)
    if block.kind == "dense":
        return _dense_block(b, name, block, x, act)
    if block.kind == "pool":
        k = block.kernel or 1
        pad = pool_padding(k)
        if block.pool == "avg":
            return b.avg_pool(name, x, k, block.stride, pad, include_pad=False)
        return b.max_pool(name, x, k, block.stride, pad)
    # split: optional subsampling, split, an element-wise op per part, concatenation
    if block.stride == 2:
        x = b.max_pool(f"{name}.subsample", x, 1, 2, 0)
    n, c, h, w = b.shapes[x]
    splits, ops = block.splits or 1, block.elementwise or ()
    base, extra = divmod(c, splits)
    sizes = tuple(base + (1 if i < extra else 0) for i in range(splits))
    sp = b.function(name, "split_with_sizes")
    b.nodes.append(Node(sp, OpKind.SPLIT, SplitAttrs(1, sizes), (Ref(x),), ((n, c, h, w),),
                        tuple((n, s, h, w) for s in sizes), source="aten.split_with_sizes.default"))
    parts = []
    for i, (op, size) in enumerate(zip(ops, sizes, strict=True)):
        ref, shape = Ref(sp, i), (n, size, h, w)
        if op == "relu":
            out = b.function(name, "relu")
            node = Node(out, OpKind.ACTIVATION, ActivationAttrs(Activation.RELU), (ref,), (shape,), (shape,),
                        source="aten.relu.default")
        else:
            fn = EltwiseOp.ADD if op == "add" else EltwiseOp.MUL
            out = b.function(name, fn.value)
            node = Node(out, OpKind.ELTWISE, EltwiseAttrs(fn), (ref, ref), (shape, shape), (shape,),
                        source=f"aten.{fn.value}.Tensor")
        b.nodes.append(node)
        b.shapes[out] = shape
        parts.append(out)
    return b.add(b.function(name, "cat"), OpKind.CONCAT, AxisAttrs(1), parts, (n, c, h, w), "aten.cat.default")


def _synthetic_classifier(b: _Builder, arch: SyntheticArch, x: str) -> str:
    """A synthetic network's classifier: global pooling unless it flattens the map (the heads space), then the
    hidden linear layers with their ReLUs (the heads space's) and the output layer."""
    n = b.shapes[x][0]
    if not arch.flatten:
        x = b.global_pool("global_pool", x)
    features = arch.classifier_inputs
    x = b.add("flatten", OpKind.FLATTEN, FlattenAttrs(1, -1), [x], (n, features), "aten.flatten.using_ints")
    for index, width in enumerate(arch.hidden, start=1):
        x = b.add(f"fc{index}", OpKind.LINEAR, LinearAttrs(features, width), [x], (n, width), "aten.linear.default")
        x = b.relu(f"fc{index}_relu", x, inplace=True)
        features = width
    return b.add("classifier", OpKind.LINEAR, LinearAttrs(features, arch.classes), [x], (n, arch.classes),
                 "aten.linear.default")


def synthetic_graph(seed: int, space: str = "li2023") -> Graph:
    """The IR of synthetic network ``seed`` of ``space`` (the graph ``load_graph(arch.name)`` returns; cached, so
    that ``synthetic_graph(3)`` and ``synthetic_graph(3, "li2023")`` are the same object).

    Raises
    ------
    InvalidInputError
        For a seed that is not a non-negative integer, or an unknown space.
    """
    return _synthetic_graph(seed, space)


@lru_cache(maxsize=256)
def _synthetic_graph(seed: int, space: str) -> Graph:
    arch = sample_synthetic(seed, space)
    b = _Builder()
    shape = (1, 3, SYN_INPUT, SYN_INPUT)
    b.shapes["input"] = shape
    b.nodes.append(Node("input", OpKind.INPUT, InputAttrs(0), (), (), (shape,), source="placeholder"))
    x = _conv_bn(b, "stem", "input", _ConvShape(arch.stem_channels, 3, 2), act=arch.activation)
    for index, block in enumerate(arch.blocks, start=1):
        x = _synthetic_block(b, f"block{index}_{block.kind}", block, x, arch.activation)
    x = _conv_bn(b, "head_conv", x, _ConvShape(arch.head_channels, 1, 1), act=arch.activation)
    x = _synthetic_classifier(b, arch, x)
    return Graph(name=arch.name, nodes=tuple(b.nodes), outputs=(Ref(x),), folded_ops=tuple(b.folded_ops),
                 folded_shapes=tuple(b.folded_shapes)).validate()
