"""A check shared by the synthetic spaces' tests: a network built as torch modules, run, and traced equals the graph
the direct builder makes for it node for node, and ``load_graph`` returns the direct one."""

from __future__ import annotations

from edgeplan.frontends.synthetic import build_synthetic, family_of, sample_synthetic
from edgeplan.ir.graph import Graph


def direct_graph_checked(seed: int, space: str) -> Graph:
    """The direct graph of ``seed`` in ``space``, after asserting that it equals the traced module's and that the
    module's output has the architecture's class count."""
    import torch

    from edgeplan.frontends.direct import synthetic_graph
    from edgeplan.frontends.torch_frontend import graph_from_torch
    from edgeplan.frontends.zoo import load_graph

    arch = sample_synthetic(seed, space)
    module, shapes = build_synthetic(seed, space)
    with torch.no_grad():
        assert module(torch.randn(*shapes[0])).shape == (1, arch.classes)
    traced = graph_from_torch(module, [torch.randn(*shapes[0])], name=arch.name)
    direct = synthetic_graph(seed, space)
    assert direct.nodes == traced.nodes and direct.outputs == traced.outputs
    assert direct.folded_ops == traced.folded_ops and direct.folded_shapes == traced.folded_shapes
    assert load_graph(f"{family_of(space)}:{seed}") is direct
    return direct
