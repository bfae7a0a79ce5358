"""Group a graph's nodes into an ordered chain of layers, with the tensors that cross each boundary.

Offloading (eshratifar2018) and pipelining reason about a model as a sequence of layers: a plan cuts the
sequence at boundaries and runs each contiguous range on one side. This pass fixes what a layer is:

* a new layer starts at every node whose kind does work of its own (:data:`HEAD_KINDS`: convolutions, linear,
  activations, pooling, LRN, softmax, element-wise ops, ...);
* batch norm (folded into the preceding convolution by every inference runtime), dropout (a no-op at
  inference) and the data-movement kinds (flatten, reshape, concat, slice, ...) join the layer before them;
  nodes before the first head join the first layer;
* graph inputs belong to no layer: they are the tensors at boundary 0.

Boundary ``b`` (``0 <= b <= n``) sits before layer ``b``. The tensors *live* at ``b`` are those produced before
it (graph inputs included) and still needed at or after it: consumed by layer ``b`` or later, or a graph output.
For a plain chain that is the output of layer ``b - 1``; for branches and skip connections (U-Net, ResNet) it
is every tensor that crosses the cut. A plan that switches sides at ``b`` sends exactly these tensors.

The node order of the graph (topological) is kept, so the layer count of a model follows from its graph:
AlexNet 20, OverFeat 18, VGG16 36, NiN 28, Pix2Pix 32 layers (eshratifar2018 Table 4 lists 21, 14, 37, 29 and
32; the paper does not say how it counted).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from edgeplan.errors import InvalidGraphError
from edgeplan.ir.graph import Graph, Ref
from edgeplan.ir.metrics import numel
from edgeplan.ir.ops import OpKind

__all__ = ["HEAD_KINDS", "Layer", "LayerChain", "layer_chain"]

#: Kinds that start a layer; every other kind joins the layer before it.
HEAD_KINDS: frozenset[OpKind] = frozenset(
    {
        OpKind.CONV2D,
        OpKind.CONV_TRANSPOSE2D,
        OpKind.LINEAR,
        OpKind.MATMUL,
        OpKind.ATTENTION,
        OpKind.ACTIVATION,
        OpKind.POOL2D,
        OpKind.ADAPTIVE_POOL2D,
        OpKind.GLOBAL_POOL,
        OpKind.LRN,
        OpKind.SOFTMAX,
        OpKind.UPSAMPLE,
        OpKind.LAYER_NORM,
        OpKind.GROUP_NORM,
        OpKind.ELTWISE,
        OpKind.MEAN,
        OpKind.REDUCE,
        OpKind.OPAQUE,
    }
)


@dataclass(frozen=True)
class Layer:
    """One layer of a chain: a head node and the nodes that joined it, in graph order.

    Attributes
    ----------
    index
        Position in the chain (0-based).
    head
        The node that started the layer.
    nodes
        Names of the graph nodes it runs, in graph order.
    kind
        The head node's kind (``conv2d``, ``activation``, ...).
    """

    index: int
    head: str
    nodes: tuple[str, ...]
    kind: OpKind

    @property
    def name(self) -> str:
        """The head node's name."""
        return self.head


@dataclass(frozen=True)
class LayerChain:
    """A graph as an ordered chain of layers with the tensors live at every boundary.

    Attributes
    ----------
    graph
        The graph the chain was built from.
    layers
        The layers in execution order.
    live
        ``live[b]`` for ``b`` in ``0..n``: the tensors live at boundary ``b`` (see the module docstring).
    """

    graph: Graph
    layers: tuple[Layer, ...]
    live: tuple[tuple[Ref, ...], ...]

    def __len__(self) -> int:
        return len(self.layers)

    @cached_property
    def _shapes(self) -> dict[Ref, tuple[tuple[int, ...], int]]:
        out: dict[Ref, tuple[tuple[int, ...], int]] = {}
        for node in self.graph.nodes:
            for i, shape in enumerate(node.output_shapes):
                out[Ref(node.name, i)] = (shape, node.dtype.size_bytes)
        return out

    def tensor_bytes(self, ref: Ref) -> int:
        """Bytes of one tensor of the graph."""
        shape, size = self._shapes[ref]
        return numel(shape) * size

    @cached_property
    def boundary_bytes(self) -> tuple[int, ...]:
        """Bytes live at each boundary ``0..n``: what a switch of sides there sends."""
        return tuple(sum(self.tensor_bytes(r) for r in refs) for refs in self.live)

    def nodes_of(self, first: int, last: int) -> tuple[str, ...]:
        """Names of the nodes of layers ``first..last`` (inclusive), in execution order."""
        if not 0 <= first <= last < len(self.layers):
            raise IndexError(f"layer range {first}..{last} is outside 0..{len(self.layers) - 1}")
        return tuple(name for layer in self.layers[first : last + 1] for name in layer.nodes)


def layer_chain(graph: Graph) -> LayerChain:
    """Group ``graph`` into a :class:`LayerChain` (see the module docstring for the rules).

    Parameters
    ----------
    graph
        A validated graph.

    Returns
    -------
    LayerChain

    Raises
    ------
    InvalidGraphError
        When the graph has no node outside its inputs.
    """
    groups: list[list[str]] = []
    heads: list[str] = []
    pending: list[str] = []  # nodes before the first head
    for node in graph.nodes:
        if node.kind is OpKind.INPUT:
            continue
        if node.kind in HEAD_KINDS:
            groups.append([node.name])
            heads.append(node.name)
        elif groups:
            groups[-1].append(node.name)
        else:
            pending.append(node.name)
    if not groups:
        if not pending:
            raise InvalidGraphError(f"graph {graph.name!r} has no operators besides its inputs; nothing to split")
        groups, heads = [pending], [pending[0]]  # no head kind at all: one layer of everything
    else:
        groups[0] = [*pending, *groups[0]]
    layers = tuple(
        Layer(i, head, tuple(g), graph.node(head).kind) for i, (head, g) in enumerate(zip(heads, groups, strict=True))
    )
    return LayerChain(graph, layers, _live_sets(graph, layers))


def _live_sets(graph: Graph, layers: tuple[Layer, ...]) -> tuple[tuple[Ref, ...], ...]:
    """Tensors live at each boundary: produced before it and used at or after it (graph outputs always)."""
    n = len(layers)
    layer_of = {name: layer.index for layer in layers for name in layer.nodes}
    produced_at: dict[Ref, int] = {}  # boundary after which the tensor exists (0 for inputs)
    for node in graph.nodes:
        where = 0 if node.kind is OpKind.INPUT else layer_of[node.name] + 1
        for i in range(len(node.output_shapes)):
            produced_at[Ref(node.name, i)] = where
    last_use: dict[Ref, int] = {}  # last layer index that reads the tensor (n for graph outputs)
    for node in graph.nodes:
        if node.kind is OpKind.INPUT:
            continue
        for ref in node.inputs:
            last_use[ref] = max(last_use.get(ref, -1), layer_of[node.name])
    for ref in graph.outputs:
        last_use[ref] = n
    ordered = sorted(produced_at, key=lambda r: (produced_at[r], r))
    return tuple(
        tuple(r for r in ordered if r in last_use and produced_at[r] <= b <= last_use[r]) for b in range(n + 1)
    )
