"""Candidate partition points (parthasarathy2022 §III-A): dominators agree with the definition checked directly."""

from __future__ import annotations

import pytest

from edgeplan.ir import Activation, EltwiseOp, Graph, Node, OpKind, Ref
from edgeplan.ir.cut_points import cut_points, cut_points_brute
from edgeplan.ir.ops import ActivationAttrs, EltwiseAttrs, InputAttrs

S = (1, 4)


def _act(name: str, src: str) -> Node:
    return Node(name, OpKind.ACTIVATION, ActivationAttrs(Activation.RELU), (Ref(src),), (S,), (S,))


def _add(name: str, a: str, b: str) -> Node:
    return Node(name, OpKind.ELTWISE, EltwiseAttrs(EltwiseOp.ADD), (Ref(a), Ref(b)), (S, S), (S,))


def _input(name: str, index: int = 0) -> Node:
    return Node(name, OpKind.INPUT, InputAttrs(index), (), (), (S,))


def test_chain_diamond_and_skip() -> None:
    # x -> a -> (b, c) -> d -> e, plus a skip a -> e: only x, a and e are on every path
    g = Graph("g", (_input("x"), _act("a", "x"), _act("b", "a"), _act("c", "a"), _add("d", "b", "c"),
                    _add("e", "d", "a")), (Ref("e"),)).validate()
    cuts = cut_points(g)
    assert cuts.points == ("x", "a", "e") == cut_points_brute(g)
    assert cuts.inner == ("a",) and cuts.partitionable
    assert cuts.depth["e"] == 5 and cuts.depth["a"] == 2  # the virtual source has depth 0


def test_two_inputs_and_a_dead_branch() -> None:
    # two inputs joined by add; "dead" reaches no output and is ignored
    g = Graph("g", (_input("x"), _input("y", 1), _add("s", "x", "y"), _act("dead", "x"), _act("out", "s")),
              (Ref("out"),)).validate()
    assert cut_points(g).points == ("s", "out") == cut_points_brute(g)


def test_nothing_to_cut() -> None:
    # two independent streams to two outputs (like NASNet's cells at a smaller scale): no single point
    g = Graph("g", (_input("x"), _act("a", "x"), _act("b", "x")), (Ref("a"), Ref("b"))).validate()
    cuts = cut_points(g)
    assert cuts.points == ("x",) == cut_points_brute(g)
    assert not cuts.partitionable


@pytest.mark.parametrize("spec", ["paper:pix2pix", "paper:chair", "torchvision:resnet18", "torchvision:googlenet",
                                  "torchvision:inception_v3", "torchvision:densenet121"])
def test_zoo_models_agree_with_the_definition(spec: str) -> None:
    from edgeplan.frontends.zoo import load_graph

    graph = load_graph(spec)
    cuts = cut_points(graph)
    assert cuts.points == cut_points_brute(graph)
    assert cuts.partitionable
    depths = [cuts.depth[p] for p in cuts.points]
    assert depths == sorted(depths) and len(set(depths)) == len(depths)  # distinct topological depths
