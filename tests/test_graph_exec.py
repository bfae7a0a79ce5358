"""The graph executor runs exactly what the IR says: outputs equal the source module's, ranges compose."""

from __future__ import annotations

import itertools

import pytest
import torch

from edgeplan.errors import UnsupportedOperatorError
from edgeplan.frontends.zoo import build_model, load_graph
from edgeplan.ir import Graph, Node, OpKind, Ref
from edgeplan.ir.layer_chain import layer_chain
from edgeplan.ir.ops import InputAttrs, OpaqueAttrs
from edgeplan.measure.graph_exec import GraphExecutor


@pytest.mark.parametrize("spec", ["paper:alexnet", "paper:chair", "paper:pix2pix", "torchvision:resnet18",
                                  "torchvision:googlenet", "torchvision:mobilenet_v3_small",
                                  "torchvision:shufflenet_v2_x0_5"])
def test_outputs_equal_the_module_with_its_weights(spec: str) -> None:
    zoo = build_model(spec)
    module = zoo.module.eval()
    graph = load_graph(spec)
    executor = GraphExecutor(graph, module=module)
    xs = zoo.example_inputs()
    with torch.inference_mode():
        expected = module(*xs)
    expected = expected if isinstance(expected, tuple | list) else (expected,)
    got = executor.run({Ref(n.name): x for n, x in zip(graph.inputs, xs, strict=True)})
    assert len(got) == len(expected)
    for a, b in zip(got, expected, strict=True):
        assert a.shape == b.shape
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_layer_ranges_compose_to_the_whole_run_and_sweeps_are_cumulative() -> None:
    graph = load_graph("paper:nin")
    chain = layer_chain(graph)
    executor = GraphExecutor(graph, seed=3)
    whole = executor.run()
    env = executor.live_at(chain, 0)
    for first, last in [(0, 4), (5, 5), (6, 20), (21, len(chain) - 1)]:
        env = executor.run_layers(chain, first, last, env)
        assert set(env) == set(chain.live[last + 1])
    torch.testing.assert_close(env[graph.outputs[0]], whole[0], rtol=0, atol=0)
    marks = executor.sweep_ms(chain, 10, executor.live_at(chain, 10))
    assert len(marks) == len(chain) - 10
    assert all(b >= a for a, b in itertools.pairwise(marks)) and marks[0] > 0


def test_same_seed_same_weights_different_seed_different_outputs() -> None:
    graph = load_graph("paper:alexnet")
    a, b, c = GraphExecutor(graph, seed=1), GraphExecutor(graph, seed=1), GraphExecutor(graph, seed=2)
    inputs = a.example_inputs()
    assert torch.equal(a.run(inputs)[0], b.run(inputs)[0])
    assert not torch.equal(a.run(inputs)[0], c.run(inputs)[0])


def test_opaque_node_is_named_when_the_executor_is_built() -> None:
    x = Node("x", OpKind.INPUT, InputAttrs(0), (), (), ((1, 4),))
    weird = Node("grid", OpKind.OPAQUE, OpaqueAttrs("aten.grid_sampler_2d.default"), (Ref("x"),), ((1, 4),),
                 ((1, 4),))
    with pytest.raises(UnsupportedOperatorError, match="grid"):
        GraphExecutor(Graph("g", (x, weird), (Ref("grid"),)))
