"""Torch frontend: published MACs, exact parameter counts, operator coverage and unknown operators."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from edgeplan.api import load_graph
from edgeplan.errors import UnsupportedOperatorError
from edgeplan.frontends.torch_frontend import graph_from_torch
from edgeplan.frontends.zoo import build_model
from edgeplan.ir import Activation, OpKind

# Published multiply-accumulate counts ("GFLOPS" in torchvision's model tables, which count MACs) at 224x224:
# resnet50 4.09 G, mobilenet_v2 0.30 G, vgg16 15.47 G, efficientnet_b0 0.39 G.
PUBLISHED_GMACS = {
    "torchvision:resnet50": 4.1,
    "torchvision:mobilenet_v2": 0.30,
    "torchvision:vgg16": 15.5,
    "torchvision:efficientnet_b0": 0.39,
}


@pytest.mark.parametrize("spec", sorted(PUBLISHED_GMACS))
def test_macs_match_published_figures(spec: str) -> None:
    macs = load_graph(spec).totals().macs
    assert abs(macs / 1e9 - PUBLISHED_GMACS[spec]) / PUBLISHED_GMACS[spec] <= 0.02


# A sample of the zoo that CI imports (the full coverage is `make bench-coverage`).
SAMPLE = [
    "torchvision:resnet18", "torchvision:squeezenet1_1", "torchvision:shufflenet_v2_x0_5",
    "torchvision:mobilenet_v3_small", "torchvision:googlenet", "torchvision:regnet_x_400mf",
    "torchvision:convnext_tiny", "timm:mixnet_s", "timm:ghostnet_100", "timm:dla34", "timm:lcnet_050",
    "timm:rexnet_100",
]


@pytest.mark.parametrize("spec", SAMPLE)
def test_zoo_sample_imports_with_exact_parameter_count(spec: str) -> None:
    model = build_model(spec)
    g = graph_from_torch(model.module, model.example_inputs(), name=spec)
    assert g.totals().params == sum(p.numel() for p in model.module.parameters())
    assert g.totals().macs > 0 and not g.opaque_nodes
    assert len(g.outputs) == 1 and g.node(g.outputs[0].node).output_shapes[0] == (1, 1000)


class Mixed(nn.Module):
    """Exercises transposed conv, LRN, chunk/cat, channel shuffle, upsample, constant operands and pads."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, stride=2, padding=1, dilation=1, groups=1)
        self.dw = nn.Conv2d(8, 8, 3, padding=2, dilation=2, groups=8, bias=False)
        self.lrn = nn.LocalResponseNorm(5, alpha=2e-4, beta=0.75, k=2.0)
        self.up = nn.ConvTranspose2d(8, 4, 4, stride=2, padding=1)
        self.shuffle = nn.ChannelShuffle(2)
        self.scale = nn.Parameter(torch.ones(1, 8, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.conv(x))
        y = self.lrn(self.dw(y)) * self.scale
        a, b = torch.chunk(y, 2, dim=1)
        y = self.shuffle(torch.cat([b, a * 0.5], dim=1))
        y = nn.functional.pad(y, (1, 1, 1, 1))
        y = nn.functional.interpolate(y, scale_factor=2.0, mode="nearest")
        return nn.functional.leaky_relu(self.up(y), 0.2)


def test_operator_coverage_of_a_mixed_module() -> None:
    m = Mixed().eval()
    g = graph_from_torch(m, (torch.randn(1, 3, 16, 16),))
    kinds = [n.kind for n in g.nodes]
    for kind in (OpKind.CONV2D, OpKind.LRN, OpKind.CONV_TRANSPOSE2D, OpKind.SPLIT, OpKind.CONCAT,
                 OpKind.CHANNEL_SHUFFLE, OpKind.PAD, OpKind.UPSAMPLE, OpKind.ELTWISE):
        assert kind in kinds, kind
    lrn = next(n for n in g.nodes if n.kind is OpKind.LRN)
    assert (lrn.attrs.size, lrn.attrs.beta, lrn.attrs.k) == (5, 0.75, 2.0)
    assert lrn.attrs.alpha == pytest.approx(2e-4)
    leaky = [n for n in g.nodes if n.kind is OpKind.ACTIVATION and n.attrs.fn is Activation.LEAKY_RELU]
    assert leaky and leaky[0].attrs.alpha == pytest.approx(0.2)
    dw = g.node("dw")
    assert dw.attrs.depthwise and dw.attrs.dilation == (2, 2) and dw.attrs.padding == (2, 2, 2, 2)
    assert g.totals().params == sum(p.numel() for p in m.parameters())
    out = g.node(g.outputs[0].node).output_shapes[0]
    assert out == tuple(m(torch.randn(1, 3, 16, 16)).shape)


class Unknown(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x, dim=1) + 1.0


def test_unknown_operator_is_named_or_kept_opaque() -> None:
    with pytest.raises(UnsupportedOperatorError, match="cumsum") as err:
        graph_from_torch(Unknown(), (torch.randn(1, 4),))
    assert err.value.operator.startswith("aten.cumsum") and err.value.node
    g = graph_from_torch(Unknown(), (torch.randn(1, 4),), opaque=True)
    assert [n.attrs.operator for n in g.opaque_nodes] == ["aten.cumsum.default"]
    assert any("cumsum" in o for o in g.totals().opaque)


def test_multiple_inputs_and_names_follow_modules() -> None:
    g = load_graph("torchvision:resnet18")
    assert "layer1.0.conv1" in {n.name for n in g.nodes}
    assert len(g.inputs) == 1 and g.inputs[0].output_shapes[0] == (1, 3, 224, 224)
    small = load_graph("torchvision:resnet18", input_shape=(1, 3, 64, 64))
    assert small.totals().macs < g.totals().macs / 10


class PackedAttention(nn.Module):
    """timm's attention block: one qkv projection unbound into query, key and value, then ``reshape_as``."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(16, 48)
        self.proj = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        qkv = self.qkv(x).reshape(x.shape[0], x.shape[1], 3, 2, 8).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        y = nn.functional.scaled_dot_product_attention(q, k, v)
        return self.proj(y.transpose(1, 2).reshape_as(x))


def test_unbind_is_a_split_that_drops_its_axis_and_runs_as_the_module() -> None:
    from edgeplan.ir import Ref
    from edgeplan.runtimes.graph_exec import GraphExecutor

    m, x = PackedAttention().eval(), torch.randn(1, 5, 16)
    g = graph_from_torch(m, (x,))
    unbind = g.node("unbind")
    assert unbind.kind is OpKind.SPLIT and unbind.attrs.squeeze and unbind.attrs.sizes == (1, 1, 1)
    assert unbind.output_shapes == ((1, 2, 5, 8),) * 3 and unbind.source.startswith("aten.unbind")
    assert g.node("reshape_as").kind is OpKind.RESHAPE
    got = GraphExecutor(g, module=m).run({Ref("x"): x})
    with torch.inference_mode():
        torch.testing.assert_close(got[0], m(x), rtol=1e-5, atol=1e-6)


def test_a_timm_vision_transformer_imports_with_exact_parameter_count() -> None:
    model = build_model("timm:deit_tiny_patch16_224")
    g = graph_from_torch(model.module, model.example_inputs(), name="deit")
    assert g.totals().params == sum(p.numel() for p in model.module.parameters()) and not g.opaque_nodes
    assert sum(n.kind is OpKind.ATTENTION for n in g.nodes) == 12
    assert sum(n.kind is OpKind.SPLIT and n.attrs.squeeze for n in g.nodes) == 12


class Identities(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (0 - x) + (x * 1) + (0 + x) + (x - 0)


def test_identities_are_their_input_and_a_reversed_subtraction_is_not() -> None:
    g = graph_from_torch(Identities(), (torch.randn(1, 4),))
    subs = [n for n in g.nodes if n.kind is OpKind.ELTWISE and n.source.startswith("aten.rsub")]
    assert len(subs) == 1  # 0 - x is -x, kept; x * 1, 0 + x and x - 0 are x, recorded as folded away
    assert g.folded_ops == ("mul", "add", "sub")
    assert sum(n.kind is OpKind.ELTWISE for n in g.nodes) == 4  # the rsub and the three adds of the sum
