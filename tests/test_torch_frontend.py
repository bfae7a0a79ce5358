"""Torch frontend: published MACs, exact parameter counts, operator coverage and unknown operators."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from edgeplan.errors import UnsupportedOperatorError
from edgeplan.frontends.torch_frontend import graph_from_torch
from edgeplan.frontends.zoo import build_model, load_graph
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
    from edgeplan.measure.graph_exec import GraphExecutor

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


class OneD(nn.Module):
    """The 1-D operators the IR writes as 2-D ones: ECA's convolution, NextViT's pooling, and the others of the kind."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(8, 16, 5, stride=2, padding=2, groups=2)
        self.same = nn.Conv1d(16, 16, 4, padding="same", dilation=2, bias=False)  # asymmetric: 3 left, 3 right
        self.avg = nn.AvgPool1d(3, 2, 1, count_include_pad=False)
        self.max = nn.MaxPool1d(2)
        self.adaptive = nn.AdaptiveAvgPool1d(3)
        self.globalmax = nn.AdaptiveMaxPool1d(1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = self.max(self.avg(self.same(self.conv(x))))
        return self.adaptive(y), self.globalmax(y)


def test_one_d_operators_are_the_two_d_ones_between_reshapes_and_run_as_the_module() -> None:
    from edgeplan.ir import Ref
    from edgeplan.ir.kernels import deduce_kernels
    from edgeplan.measure.graph_exec import GraphExecutor

    m, x = OneD().eval(), torch.randn(1, 8, 64)
    g = graph_from_torch(m, (x,))
    conv = g.node("conv")
    assert conv.kind is OpKind.CONV2D and conv.input_shapes == ((1, 8, 1, 64),)
    assert conv.output_shapes == ((1, 16, 1, 32),)
    assert conv.attrs.kernel == (1, 5) and conv.attrs.stride == (1, 2) and conv.attrs.padding == (0, 2, 0, 2)
    assert conv.attrs.groups == 2 and g.node("same").attrs.padding == (0, 3, 0, 3)
    assert g.node("conv/unsqueeze").kind is OpKind.RESHAPE and g.node("conv/squeeze").output_shapes == ((1, 16, 32),)
    assert g.node("avg").kind is OpKind.POOL2D and g.node("adaptive").kind is OpKind.ADAPTIVE_POOL2D
    assert g.node("globalmax").kind is OpKind.GLOBAL_POOL
    assert [c for c, _ in g.fused_calls] == ["aten.conv1d", "aten.conv1d", "aten.avg_pool1d", "aten.max_pool1d",
                                              "aten.adaptive_avg_pool1d", "aten.adaptive_max_pool1d"]
    assert g.totals().params == sum(p.numel() for p in m.parameters())
    got = GraphExecutor(g, module=m).run({Ref("x"): x})  # the module's weights, taken as 2-D kernels of height 1
    with torch.inference_mode():
        for a, b in zip(got, m(x), strict=True):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    kernels = deduce_kernels(g, "torch-eager").kernels
    assert [(k.kind, len(k.nodes)) for k in kernels][:3] == [("aten::conv1d", 3), ("aten::conv1d", 3),
                                                              ("aten::avg_pool1d", 3)]


def test_one_d_kernels_are_led_by_their_work_not_their_reshapes() -> None:
    from edgeplan.costmodels.opwise.features import category, lead_node
    from edgeplan.ir.serialize import node_to_dict

    g = graph_from_torch(OneD().eval(), (torch.randn(1, 8, 64),))
    nodes = {n.name: node_to_dict(n) for n in g.nodes}
    for kind, name, expected in (("aten::conv1d", "conv", "gconv"), ("aten::conv1d", "same", "conv"),
                                 ("aten::avg_pool1d", "avg", "pool"),
                                 ("aten::max_pool1d", "max", "pool")):
        chain = [nodes[f"{name}/unsqueeze"], nodes[name], nodes[f"{name}/squeeze"]]
        lead = lead_node(chain, kind)
        assert lead["name"] == name and category(lead, kind) == expected


class Repeats(nn.Module):  # GC ViT repeats its global query per window; one repeat (its last stage) is the input
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x.repeat_interleave(3, dim=1)) * x.repeat_interleave(1, dim=0).repeat(1, 3, 1)


def test_repeats_copy_each_slice_or_the_tensor_in_a_row_and_one_repeat_is_folded() -> None:
    from edgeplan.ir import Ref
    from edgeplan.measure.graph_exec import GraphExecutor

    m, x = Repeats(), torch.randn(2, 4, 5)
    g = graph_from_torch(m, (x,))
    assert "repeat_interleave" in g.folded_ops
    calls = dict(g.fused_calls)
    interleave, tile = calls["aten.repeat_interleave"], calls["aten.repeat"]
    assert [g.node(n).kind for n in interleave] == [OpKind.RESHAPE, OpKind.EXPAND, OpKind.RESHAPE]
    assert g.node(interleave[1]).output_shapes == ((2, 4, 3, 5),)
    assert g.node(interleave[2]).output_shapes == ((2, 12, 5),)
    assert g.node(tile[1]).output_shapes == ((1, 2, 3, 4, 1, 5),) and g.node(tile[2]).output_shapes == ((2, 12, 5),)
    got = GraphExecutor(g).run({Ref("x"): x})
    torch.testing.assert_close(got[0], m(x))

    class PerElement(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.repeat_interleave(torch.tensor([1, 2, 1, 2]), dim=1, output_size=6)

    with pytest.raises(UnsupportedOperatorError, match="whole number of repeats"):
        graph_from_torch(PerElement(), (x,))


def test_an_in_place_identity_is_folded_under_its_in_place_name() -> None:
    class Branches(nn.Module):  # MobileOne: out = scale branch; out += conv branch; out += identity (0)
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = nn.Conv2d(3, 4, 1), nn.Conv2d(3, 4, 3, padding=1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out = self.a(x)
            out += self.b(x)
            out += 0
            return out

    g = graph_from_torch(Branches().eval(), (torch.randn(1, 3, 8, 8),))
    assert g.folded_ops == ("add_",)
    assert [n.source.split(".")[1] for n in g.nodes if n.kind is OpKind.ELTWISE] == ["add_"]


def test_a_nested_graph_without_autocast_is_inlined_and_with_autocast_refused() -> None:
    from edgeplan.ir import Ref
    from edgeplan.measure.graph_exec import GraphExecutor

    class Float32Attention(nn.Module):  # EfficientViT's LiteMLA computes its attention in float32 this way
        def __init__(self, enabled: bool) -> None:
            super().__init__()
            self.enabled = enabled
            self.proj = nn.Linear(8, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            with torch.autocast("cpu", enabled=self.enabled):
                y = torch.relu(x @ x.transpose(1, 2)) @ x
            return self.proj(y)

    m, x = Float32Attention(False).eval(), torch.randn(1, 5, 8)
    g = graph_from_torch(m, (x,))
    assert [n.kind for n in g.nodes] == [OpKind.INPUT, OpKind.PERMUTE, OpKind.MATMUL, OpKind.ACTIVATION,
                                         OpKind.MATMUL, OpKind.LINEAR]
    got = GraphExecutor(g, module=m).run({Ref("x"): x})
    with torch.inference_mode():
        torch.testing.assert_close(got[0], m(x), rtol=1e-5, atol=1e-6)
    with pytest.raises(UnsupportedOperatorError, match="autocast to"):
        graph_from_torch(Float32Attention(True).eval(), (x,))


def test_a_pooling_with_unused_indices_imports() -> None:
    g = graph_from_torch(nn.Sequential(nn.AdaptiveMaxPool2d(3)).eval(), (torch.randn(1, 4, 7, 7),))
    assert [n.kind for n in g.nodes] == [OpKind.INPUT, OpKind.ADAPTIVE_POOL2D]


class NormsAndBounds(nn.Module):
    """Gemma 4 / DeepSeek's RMS norm, CAFormer's square, Gemma 4's clamps to buffers, and timm's rotary attention
    that concatenates an empty prefix (no prefix tokens) with the rest."""

    def __init__(self) -> None:
        super().__init__()
        self.norm, self.fc = nn.RMSNorm(8), nn.Linear(8, 8)
        self.register_buffer("low", torch.tensor(-0.5))
        self.register_buffer("high", torch.tensor(float("inf")))
        self.register_buffer("open", torch.tensor(float("-inf")))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.clamp(self.fc(self.norm(x)), self.low, self.high)
        y = torch.clamp(y, self.open, self.high)  # infinite both ways: the input
        y = torch.clamp_min(y, self.open)  # the input too
        y = torch.cat([y[:, :0], torch.square(y[:, 0:])], dim=1)
        return y


def test_rms_norm_square_buffer_bounds_and_an_empty_prefix_run_as_the_module() -> None:
    from edgeplan.ir import Ref
    from edgeplan.measure.graph_exec import GraphExecutor

    m, x = NormsAndBounds().eval(), torch.randn(1, 5, 8)
    g = graph_from_torch(m, (x,))
    norm = g.node("norm")
    assert norm.kind is OpKind.LAYER_NORM and norm.attrs.rms and norm.params == 8
    assert g.totals().params == sum(p.numel() for p in m.parameters())
    clip = next(n for n in g.nodes if n.kind is OpKind.ACTIVATION and n.attrs.fn is Activation.CLIP)
    assert (clip.attrs.low, clip.attrs.high) == (-0.5, None)
    assert [n.kind for n in g.nodes] == [OpKind.INPUT, OpKind.LAYER_NORM, OpKind.LINEAR, OpKind.ACTIVATION,
                                         OpKind.ACTIVATION]  # no slice, no concatenation: the empty prefix is gone
    assert g.nodes[-1].attrs.fn is Activation.POW and g.nodes[-1].attrs.alpha == 2.0
    assert "clamp" in g.folded_ops and "clamp_min" in g.folded_ops and "slice" in g.folded_ops
    got = GraphExecutor(g, module=m).run({Ref("x"): x})
    with torch.inference_mode():
        torch.testing.assert_close(got[0], m(x), rtol=1e-5, atol=1e-6)

    class Computed(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.clamp(x, x.mean())

    with pytest.raises(UnsupportedOperatorError, match="min bound is a computed tensor"):
        graph_from_torch(Computed(), (x,))


def test_a_handler_that_meets_arguments_it_does_not_expect_names_the_operator(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from edgeplan.frontends import aten_handlers

    def confused(call: object) -> object:
        return float("a tensor where a number was expected")

    monkeypatch.setitem(aten_handlers.HANDLERS, "relu", confused)
    with pytest.raises(UnsupportedOperatorError, match=r"relu.*ValueError") as err:
        graph_from_torch(nn.Sequential(nn.ReLU()), (torch.randn(1, 4),))
    assert err.value.operator.startswith("aten.relu")
