"""Sliding windows in the IR: ``Tensor.unfold`` (HaloNet's blocks), ``F.unfold`` / im2col (TNT, VOLO) and
``F.fold`` / col2im (VOLO's outlook attention)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from edgeplan.costmodels.opwise.graph_ops import graph_ops, predict_graph
from edgeplan.costmodels.opwise.profiles import load_device_model
from edgeplan.frontends.torch_frontend import graph_from_torch
from edgeplan.ir import OpKind, Ref
from edgeplan.ir.checks import check_node, unfold_output_shape
from edgeplan.ir.kernels import deduce_kernels
from edgeplan.ir.ops import UnfoldAttrs
from edgeplan.measure.graph_exec import GraphExecutor


class Windows(nn.Module):
    """HaloNet's blocks of an axis, TNT's patches as columns, VOLO's columns folded back (summed)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        blocks = x.unfold(2, 4, 2).unfold(3, 4, 2)  # (1, 4, 3, 3, 4, 4)
        cols = F.unfold(x, 3, padding=1, stride=2)  # (1, 36, 16)
        folded = F.fold(F.unfold(x, 3, padding=1), (8, 8), 3, padding=1)  # (1, 4, 8, 8)
        return blocks.sum() + cols.sum() + folded


@pytest.fixture(scope="module")
def module_and_graph() -> tuple[nn.Module, object]:
    m = Windows().eval()
    return m, graph_from_torch(m, (torch.randn(1, 4, 8, 8),), name="windows")


def test_the_torch_frontend_imports_every_window_operator(module_and_graph: tuple[nn.Module, object]) -> None:
    _, g = module_and_graph
    nodes = [n for n in g.nodes if n.kind is OpKind.UNFOLD]
    assert [(n.attrs.mode, n.input_shapes[0], n.output_shapes[0]) for n in nodes] == [
        ("unfold", (1, 4, 8, 8), (1, 4, 3, 8, 4)), ("unfold", (1, 4, 3, 8, 4), (1, 4, 3, 3, 4, 4)),
        ("im2col", (1, 4, 8, 8), (1, 36, 16)), ("im2col", (1, 4, 8, 8), (1, 36, 64)),
        ("col2im", (1, 36, 64), (1, 4, 8, 8))]
    assert nodes[2].attrs == UnfoldAttrs("im2col", kernel=(3, 3), padding=(1, 1), stride=(2, 2))
    assert nodes[4].attrs.output_size == (8, 8) and nodes[4].flops == 36 * 64  # the overlaps are summed
    assert all(not check_node(n) for n in nodes)


def test_the_graph_runs_as_the_module(module_and_graph: tuple[nn.Module, object]) -> None:
    m, g = module_and_graph
    x = torch.randn(1, 4, 8, 8)
    with torch.inference_mode():
        expected = m(x)
    got = GraphExecutor(g, module=m).run({Ref(g.inputs[0].name): x})
    torch.testing.assert_close(got[0], expected, rtol=1e-4, atol=1e-4)


def test_eager_pytorch_runs_im2col_and_col2im_and_views_the_axis_windows(
        module_and_graph: tuple[nn.Module, object]) -> None:
    _, g = module_and_graph
    kernels = {k.kind: k for k in deduce_kernels(g, "torch-eager").kernels if "unfold" in k.nodes[0]
               or "im2col" in k.kind or "col2im" in k.kind}
    assert {"aten::im2col", "aten::col2im", "aten::unfold"} <= set(kernels)
    # Tensor.unfold is a view, but the reshape after it copies the windows out: its kernel stands for that copy
    assert not any(k.noop for k in kernels.values())
    # a latency model prices them (by their category's predictor when it has none of their own), never at 0 ms
    pred = predict_graph(g, load_device_model("torch-fp32-1t", "gbdt"), "torch-eager")
    windows = [o for o in pred.ops if o.kind in ("aten::im2col", "aten::col2im", "aten::unfold")]
    assert len(windows) == 5 and all(o.ms is not None and o.ms > 0 for o in windows) and not pred.unpredicted
    assert {o.category for o in graph_ops(g, "torch-eager")[0] if o.kind == "aten::unfold"} == {"elementwise"}


@pytest.mark.parametrize(("attrs", "shape", "expected"), [
    (UnfoldAttrs("unfold", axis=1, size=3, step=2), (2, 7, 5), (2, 3, 5, 3)),
    (UnfoldAttrs("unfold", axis=1, size=8, step=1), (2, 7, 5), None),  # a window longer than the axis
    (UnfoldAttrs("im2col", kernel=(2, 2), stride=(2, 2)), (1, 3, 6, 4), (1, 12, 6)),
    (UnfoldAttrs("im2col", kernel=(3, 3)), (1, 3, 6), None),  # not 4-D
    (UnfoldAttrs("col2im", kernel=(2, 2), stride=(2, 2), output_size=(6, 4)), (1, 12, 6), (1, 3, 6, 4)),
    (UnfoldAttrs("col2im", kernel=(2, 2), stride=(2, 2), output_size=(6, 4)), (1, 12, 5), None),  # 5 blocks, not 6
])
def test_the_output_shape_follows_from_the_attributes(attrs: UnfoldAttrs, shape: tuple[int, ...],
                                                      expected: tuple[int, ...] | None) -> None:
    assert unfold_output_shape(attrs, shape) == expected


class Extremes(nn.Module):
    """VOLO's token-labelling head: the maximum over tokens (values; the indices dropped); and the overall minimum."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.max(1)[0] + x.min()


class ArgMax(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.max(1)[1].float()


class Maximum(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.max(x, x * 2)


def test_max_and_min_are_reductions_and_their_indices_are_refused() -> None:
    from edgeplan.errors import UnsupportedOperatorError

    x = torch.randn(1, 5, 3)
    g = graph_from_torch(Extremes().eval(), (x,), name="extremes")
    reductions = [(n.attrs.op, n.attrs.axes, n.output_shapes[0]) for n in g.nodes if n.kind is OpKind.REDUCE]
    assert reductions == [("max", (1,), (1, 3)), ("min", (0, 1, 2), ())]
    got = GraphExecutor(g).run({Ref(g.inputs[0].name): x})
    torch.testing.assert_close(got[0], Extremes()(x))
    assert {k.kind for k in deduce_kernels(g, "torch-eager").kernels} >= {"aten::max", "aten::min"}
    with pytest.raises(UnsupportedOperatorError, match="only the first result"):
        graph_from_torch(ArgMax().eval(), (x,), name="argmax")
    with pytest.raises(UnsupportedOperatorError, match="maximum of two tensors"):
        graph_from_torch(Maximum().eval(), (x,), name="maximum")
