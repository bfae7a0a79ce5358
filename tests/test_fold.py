"""The zero-folding deduction (edgeplan.ir.fold) and the official NAS-Bench-201 module it is for."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from edgeplan.costmodels.opwise.graph_ops import graph_ops
from edgeplan.frontends.direct import nb201_graph
from edgeplan.frontends.nb201 import build_nb201
from edgeplan.frontends.torch_frontend import graph_from_torch
from edgeplan.frontends.zoo import load_graph
from edgeplan.ir.fold import executed_nodes
from edgeplan.ir.ops import EltwiseAttrs, EltwiseOp, OpKind

ALL_NONE = "|none~0|+|none~0|none~1|+|none~0|none~1|none~2|"
IDENTITY_WITH_DEAD_POOL = "|skip_connect~0|+|skip_connect~0|avg_pool_3x3~1|+|none~0|skip_connect~1|none~2|"
CONV_OF_ZERO = "|none~0|+|none~0|none~1|+|skip_connect~0|none~1|nor_conv_3x3~2|"
DENSE = "|nor_conv_3x3~0|+|nor_conv_1x1~0|avg_pool_3x3~1|+|skip_connect~0|nor_conv_3x3~1|avg_pool_3x3~2|"


def _cell_nodes(names: frozenset[str], cell: str = "stage2_cell3") -> set[str]:
    return {n for n in names if n.startswith(cell + ".") or n.startswith(cell + "/")}


@pytest.mark.parametrize("cell", [ALL_NONE, CONV_OF_ZERO, DENSE])
def test_official_graph_equals_the_traced_official_module(cell: str) -> None:
    module, shapes = build_nb201(cell, official=True)
    traced = graph_from_torch(module, [torch.randn(*shapes[0])], name=f"nb201-official:{cell}")
    direct = nb201_graph(cell, official=True)
    assert direct.nodes == traced.nodes and direct.name == traced.name
    assert load_graph(f"nb201-official:{cell}") is direct
    assert nb201_graph(f"nb201-official:{cell}").nodes == direct.nodes  # the prefix alone asks for it
    zeros = [n for n in direct if n.kind is OpKind.ELTWISE and n.attrs.op is EltwiseOp.MUL]
    assert len(zeros) == 15 * cell.count("none")  # one x * 0 per none edge, in each of the 15 cells
    assert all(isinstance(n.attrs, EltwiseAttrs) and n.attrs.const_value == 0.0 for n in zeros)
    # Same parameters as the lean module: none edges have none.
    assert direct.totals().params == nb201_graph(cell).totals().params


def test_fold_zeros_rules_on_nb201_cells() -> None:
    # Rule 4: the output no longer depends on the input, the network folds into a constant.
    assert executed_nodes(nb201_graph(ALL_NONE, official=True)) == frozenset()
    assert executed_nodes(nb201_graph(ALL_NONE)) == frozenset()  # the lean module's x * 0 folds the same way
    # Rules 1-3: the cell is its input; the pool only feeds a none edge and is dead; x + 0 adds run nothing.
    identity = nb201_graph(IDENTITY_WITH_DEAD_POOL, official=True)
    run = executed_nodes(identity)
    assert run and not _cell_nodes(run)
    assert "stem_conv" in run and "classifier" in run and "reduction2.conv_a.1" in run
    # A convolution of a zero node still runs (no folding of weighted operators), the x * 0 terms do not.
    conv_of_zero = executed_nodes(nb201_graph(CONV_OF_ZERO, official=True))
    cell = _cell_nodes(conv_of_zero)
    assert {"stage2_cell3.edges.5.0", "stage2_cell3.edges.5.1", "stage2_cell3.edges.5.2"} <= cell
    assert not any("/mul" in n for n in conv_of_zero) and len([n for n in cell if "/add" in n]) == 1
    # Nothing to simplify: every node of the dense cell runs except the input.
    dense = nb201_graph(DENSE, official=True)
    assert executed_nodes(dense) == frozenset(n.name for n in dense if n.kind is not OpKind.INPUT)


def test_traced_scalar_multiplies_record_their_value() -> None:
    class Net(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(x).mul(0.0) + x * 2.0

    graph = graph_from_torch(Net(), [torch.randn(1, 4, 8, 8)], name="scalar")
    values = sorted(n.attrs.const_value for n in graph if isinstance(n.attrs, EltwiseAttrs)
                    and n.attrs.const_value is not None)
    assert values == [0.0, 2.0]
    run = executed_nodes(graph)
    # relu only feeds x * 0: dead; (x * 0) + x * 2 is x * 2, so the add runs nothing either.
    assert {graph.node(n).kind for n in run} == {OpKind.ELTWISE} and len(run) == 1


def test_fold_rules_on_element_wise_corner_cases() -> None:
    class Net(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            z = torch.relu(x).mul(0.0)
            three = z + 3.0  # zero plus another constant: input-independent, not zero
            scaled = torch.sigmoid(x) * three  # so this is 3 * sigmoid(x), not zero
            diff = z - torch.tanh(x)  # 0 - t is -t: a kernel, not t passed on
            gone = torch.exp(x) * z  # a product with zero is zero: exp(x) is dead
            return scaled + gone, diff

    graph = graph_from_torch(Net(), [torch.randn(1, 4, 8, 8)], name="corner")
    kinds = {n.name: n for n in graph}
    run = {kinds[n].source for n in executed_nodes(graph)}
    assert "aten.exp.default" not in run and "aten.relu.default" not in run
    assert {"aten.sigmoid.default", "aten.tanh.default", "aten.sub.Tensor", "aten.add.Tensor"} <= run
    assert len([n for n in executed_nodes(graph) if kinds[n].source == "aten.mul.Tensor"]) == 1  # sigmoid * three


def test_graph_ops_under_fold_zeros() -> None:
    graph = nb201_graph(IDENTITY_WITH_DEAD_POOL, official=True)
    full, _ = graph_ops(graph, "torch-eager")
    folded, _ = graph_ops(graph, "torch-eager", "fold-zeros")
    assert 0 < len(folded) < len(full)
    assert graph_ops(nb201_graph(ALL_NONE, official=True), "torch-eager", "fold-zeros") == ([], [])
    with pytest.raises(Exception, match="unknown kernel deduction"):
        graph_ops(graph, "torch-eager", "fold-everything")


def test_fold_zeros_explains_helps_sub_millisecond_pixel3_networks() -> None:
    """HELP's Pixel 3 column: every network it times far below a millisecond is one the rules fold to a constant."""
    from experiments.li2023 import HELP_DATA, read_help

    if not HELP_DATA.is_file():
        pytest.skip(f"{HELP_DATA} not present")
    cells, devices = read_help(HELP_DATA)
    pixel3 = devices["pixel3"]
    tiny = [i for i, v in enumerate(pixel3) if v < 0.5]
    assert len(tiny) == 273
    assert all(executed_nodes(nb201_graph(cells[i], official=True)) == frozenset() for i in tiny)
    # The other devices run those networks: none of them times one below a millisecond.
    others = [v for name, lat in devices.items() if name != "pixel3" for v in lat[tiny]]
    assert min(others) > 1.0


def test_onnx_scalar_constants_record_their_value(tmp_path: Path) -> None:
    from edgeplan.frontends.onnx_frontend import graph_from_onnx

    module, shapes = build_nb201(ALL_NONE, official=True)
    path = tmp_path / "all_none.onnx"
    torch.onnx.export(module, (torch.randn(*shapes[0]),), str(path), dynamo=False)
    graph = graph_from_onnx(path)
    assert any(isinstance(n.attrs, EltwiseAttrs) and n.attrs.const_value == 0.0 for n in graph)
    assert executed_nodes(graph) == frozenset()  # exported, the all-none network folds as the traced one does
