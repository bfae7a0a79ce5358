"""The layer-chain pass: which nodes form a layer, and which tensors cross each boundary."""

from __future__ import annotations

import itertools

import pytest

from edgeplan.errors import InvalidGraphError
from edgeplan.ir import Graph, Node, OpKind, Ref
from edgeplan.ir.layer_chain import layer_chain
from edgeplan.ir.ops import InputAttrs
from tests.test_ir import small_graph


def test_small_graph_layers_and_live_sets() -> None:
    chain = layer_chain(small_graph().validate())
    # c1 (+ bn folded), relu, dw, add
    assert [layer.nodes for layer in chain.layers] == [("c1", "bn"), ("relu",), ("dw",), ("add",)]
    assert [layer.kind for layer in chain.layers] == [OpKind.CONV2D, OpKind.ACTIVATION, OpKind.CONV2D,
                                                     OpKind.ELTWISE]
    # the relu output is read by dw and by add: it crosses boundaries 2 and 3 (a skip connection)
    assert chain.live == ((Ref("x"),), (Ref("bn"),), (Ref("relu"),), (Ref("relu"), Ref("dw")), (Ref("add"),))
    act = 16 * 8 * 8 * 4
    assert chain.boundary_bytes == (3 * 8 * 8 * 4, act, act, 2 * act, act)
    assert chain.nodes_of(1, 2) == ("relu", "dw")
    with pytest.raises(IndexError):
        chain.nodes_of(2, 9)


def _brute_live(graph: Graph, layer_of: dict[str, int], n: int, b: int) -> set[Ref]:
    """Definition: produced before boundary b and read by a layer >= b (or a graph output)."""
    live = set()
    for node in graph.nodes:
        made = 0 if node.kind is OpKind.INPUT else layer_of[node.name] + 1
        for i in range(len(node.output_shapes)):
            ref = Ref(node.name, i)
            readers = [layer_of[c.name] for c in graph.nodes if ref in c.inputs and c.kind is not OpKind.INPUT]
            if made <= b and (any(r >= b for r in readers) or ref in graph.outputs):
                live.add(ref)
    return live


@pytest.mark.parametrize("spec", ["paper:alexnet", "paper:chair", "paper:pix2pix", "torchvision:resnet18",
                                  "torchvision:googlenet"])
def test_live_sets_match_definition_on_zoo_models(spec: str) -> None:
    from edgeplan.frontends.zoo import load_graph

    graph = load_graph(spec)
    chain = layer_chain(graph)
    layer_of = {name: layer.index for layer in chain.layers for name in layer.nodes}
    assert sorted(itertools.chain.from_iterable(layer.nodes for layer in chain.layers)) == sorted(
        n.name for n in graph.nodes if n.kind is not OpKind.INPUT)
    for b in range(len(chain) + 1):
        assert set(chain.live[b]) == _brute_live(graph, layer_of, len(chain), b), (spec, b)
    assert set(chain.live[-1]) == set(graph.outputs)


def test_paper_model_layer_counts() -> None:
    from edgeplan.frontends.zoo import load_graph

    counts = {m: len(layer_chain(load_graph(f"paper:{m}"))) for m in ("alexnet", "vgg16", "pix2pix")}
    assert counts == {"alexnet": 20, "vgg16": 36, "pix2pix": 32}


def test_graph_without_operators_is_rejected() -> None:
    x = Node("x", OpKind.INPUT, InputAttrs(0), (), (), ((1, 3),))
    with pytest.raises(InvalidGraphError, match="no operators"):
        layer_chain(Graph("empty", (x,), (Ref("x"),)))
