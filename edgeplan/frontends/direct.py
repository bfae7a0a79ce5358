"""IR graphs of generated architecture families built directly, without running or tracing torch.

Tracing a NAS-Bench-201 network through the torch frontend takes about two seconds; a NAS loop or the 15,625
architectures of the benchmark need the graph in milliseconds. :func:`nb201_graph` writes the graph the torch
frontend produces for :func:`edgeplan.frontends.nb201.build_nb201` node for node (names, kinds, ATen sources,
attributes, shapes and order; ``tests/test_direct_graphs.py`` checks equality on sampled cells), from the cell
string alone. It imports neither torch nor numpy.
"""

from __future__ import annotations

from collections import Counter
from functools import lru_cache

from edgeplan.frontends.nb201 import _CELLS_PER_STAGE, _INPUT_SHAPE, _NUM_NODES, _STEM_CHANNELS, parse_cell
from edgeplan.ir.graph import Graph, Node, Ref
from edgeplan.ir.ops import (
    Activation,
    ActivationAttrs,
    ConvAttrs,
    EltwiseAttrs,
    EltwiseOp,
    FlattenAttrs,
    GlobalPoolAttrs,
    InputAttrs,
    LinearAttrs,
    NormAttrs,
    OpKind,
    PoolAttrs,
    PoolMode,
)

__all__ = ["nb201_graph"]

Shape = tuple[int, ...]


class _Builder:
    """Appends nodes with the torch frontend's naming: module paths, and ``scope/op_N`` for functions."""

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.shapes: dict[str, Shape] = {}
        self._counts: Counter[str] = Counter()

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

    def conv(self, name: str, x: str, c_out: int, kernel: int, stride: int) -> str:
        n, c, h, w = self.shapes[x]
        pad = kernel // 2
        oh, ow = (h + 2 * pad - kernel) // stride + 1, (w + 2 * pad - kernel) // stride + 1
        attrs = ConvAttrs(c, c_out, (kernel, kernel), (stride, stride), (pad, pad, pad, pad), bias=False)
        return self.add(name, OpKind.CONV2D, attrs, [x], (n, c_out, oh, ow), "aten.conv2d.default")

    def bn(self, name: str, x: str) -> str:
        c = self.shapes[x][1]
        return self.add(name, OpKind.BATCH_NORM, NormAttrs(c, axis=1), [x], self.shapes[x], "aten.batch_norm.default")

    def relu(self, name: str, x: str, inplace: bool = False) -> str:
        source = "aten.relu_.default" if inplace else "aten.relu.default"
        return self.add(name, OpKind.ACTIVATION, ActivationAttrs(Activation.RELU), [x], self.shapes[x], source)

    def relu_conv_bn(self, prefix: str, x: str, c_out: int, kernel: int, stride: int) -> str:
        r = self.relu(f"{prefix}.0", x)
        c = self.conv(f"{prefix}.1", r, c_out, kernel, stride)
        return self.bn(f"{prefix}.2", c)

    def avg_pool(self, name: str, x: str, kernel: int, stride: int, pad: int, include_pad: bool) -> str:
        n, c, h, w = self.shapes[x]
        out = (n, c, (h + 2 * pad - kernel) // stride + 1, (w + 2 * pad - kernel) // stride + 1)
        attrs = PoolAttrs(PoolMode.AVG, (kernel, kernel), (stride, stride), (pad, pad, pad, pad),
                          count_include_pad=include_pad)
        return self.add(name, OpKind.POOL2D, attrs, [x], out, "aten.avg_pool2d.default")

    def add_tensors(self, scope: str, a: str, b: str) -> str:
        return self.add(self.function(scope, "add"), OpKind.ELTWISE, EltwiseAttrs(EltwiseOp.ADD), [a, b],
                        self.shapes[a], "aten.add.Tensor")

    def times_zero(self, scope: str, x: str) -> str:
        return self.add(self.function(scope, "mul"), OpKind.ELTWISE, EltwiseAttrs(EltwiseOp.MUL, const_shape=()),
                        [x], self.shapes[x], "aten.mul.Tensor")


@lru_cache(maxsize=256)
def nb201_graph(cell: str, num_classes: int = 10) -> Graph:
    """The IR of the NAS-Bench-201 network of ``cell`` (the graph ``load_graph("nb201:" + cell)`` returns).

    Parameters
    ----------
    cell
        A cell string, with or without the ``nb201:`` prefix.
    num_classes
        Classes of the linear classifier.

    Returns
    -------
    Graph
        A validated graph named ``nb201:{cell}``.

    Raises
    ------
    InvalidInputError
        For a malformed cell string.
    """
    text = cell[len("nb201:"):] if cell.startswith("nb201:") else cell
    parsed = parse_cell(text)
    live = [(op, src, dst) for op, src, dst in parsed.edges if op != "none"]
    b = _Builder()
    b.shapes["input"] = _INPUT_SHAPE
    b.nodes.append(Node("input", OpKind.INPUT, InputAttrs(0), (), (), (_INPUT_SHAPE,), source="placeholder"))
    c = _STEM_CHANNELS
    x = b.conv("stem_conv", "input", c, 3, 1)
    x = b.bn("stem_bn", x)
    for stage in range(1, 4):
        if stage > 1:
            scope = f"reduction{stage}"
            down = b.avg_pool(f"{scope}.downsample.0", x, 2, 2, 0, include_pad=True)
            down = b.conv(f"{scope}.downsample.1", down, 2 * c, 1, 1)
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
                    if op == "skip_connect":
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
    n = b.shapes[x][0]
    x = b.add("global_pool", OpKind.GLOBAL_POOL, GlobalPoolAttrs(PoolMode.AVG), [x], (n, c, 1, 1),
              "aten.adaptive_avg_pool2d.default")
    x = b.add("flatten", OpKind.FLATTEN, FlattenAttrs(1, -1), [x], (n, c), "aten.flatten.using_ints")
    x = b.add("classifier", OpKind.LINEAR, LinearAttrs(c, num_classes), [x], (n, num_classes), "aten.linear.default")
    return Graph(name=f"nb201:{text}", nodes=tuple(b.nodes), outputs=(Ref(x),)).validate()
