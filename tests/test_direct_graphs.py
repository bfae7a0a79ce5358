"""Directly built IR graphs equal the torch frontend's traced graphs, node for node."""

from __future__ import annotations

import random

import pytest

from edgeplan.errors import InvalidInputError
from edgeplan.frontends.direct import nb201_graph, synthetic_graph
from edgeplan.frontends.nb201 import NB201_OPS, build_nb201
from edgeplan.frontends.zoo import load_graph


def _cells(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    cells = ["|none~0|+|none~0|none~1|+|none~0|none~1|none~2|",  # every node is x * 0
             "|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|nor_conv_3x3~0|nor_conv_3x3~1|nor_conv_3x3~2|"]
    for _ in range(n):
        ops = [rng.choice(NB201_OPS) for _ in range(6)]
        cells.append(f"|{ops[0]}~0|+|{ops[1]}~0|{ops[2]}~1|+|{ops[3]}~0|{ops[4]}~1|{ops[5]}~2|")
    return cells


@pytest.mark.parametrize("cell", _cells(4, seed=7))
def test_nb201_graph_equals_the_traced_graph(cell: str) -> None:
    from edgeplan.frontends.torch_frontend import graph_from_torch

    module, shapes = build_nb201(cell)
    import torch

    traced = graph_from_torch(module, [torch.randn(*shapes[0])], name=f"nb201:{cell}")
    direct = nb201_graph(cell)
    assert direct.nodes == traced.nodes and direct.outputs == traced.outputs and direct.name == traced.name
    assert load_graph(f"nb201:{cell}") is direct  # the zoo uses the direct builder (cached)


def test_nb201_graph_rejects_bad_cells() -> None:
    with pytest.raises(InvalidInputError):
        nb201_graph("|conv~0|+|none~0|none~1|+|none~0|none~1|none~2|")


@pytest.mark.parametrize("seed", [0, 1, 6, 69, 999])  # split, pool, grouped conv, SE + residual bottlenecks
def test_synthetic_graph_equals_the_traced_graph(seed: int) -> None:
    import torch

    from edgeplan.frontends.synthetic import build_synthetic
    from edgeplan.frontends.torch_frontend import graph_from_torch

    module, shapes = build_synthetic(seed)
    traced = graph_from_torch(module, [torch.randn(*shapes[0])], name=f"synthetic:{seed}")
    direct = synthetic_graph(seed)
    assert direct.nodes == traced.nodes and direct.outputs == traced.outputs and direct.name == traced.name
    assert load_graph(f"synthetic:{seed}") is direct


def test_synthetic_graph_rejects_bad_seeds() -> None:
    with pytest.raises(InvalidInputError, match="non-negative integer"):
        load_graph("synthetic:x")
