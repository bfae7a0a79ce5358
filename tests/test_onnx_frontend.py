"""ONNX export and import: the graph of an exported torch model has the torch model's compute nodes and MACs.

The reference count is independent of both frontends: forward hooks on ``nn.Conv2d``/``ConvTranspose2d``/
``Linear`` (and a tiny ``MatMul`` module) compute MACs by the convention of :mod:`edgeplan.ir.metrics`.
Exports are slow (seconds each), so each model is exported once per module (``exported`` fixture).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
torchvision = pytest.importorskip("torchvision")
timm = pytest.importorskip("timm")

import numpy as np  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from torch import nn  # noqa: E402

from edgeplan.errors import InvalidInputError, UnsupportedOperatorError  # noqa: E402
from edgeplan.frontends.onnx_export import export_onnx  # noqa: E402
from edgeplan.frontends.onnx_frontend import SUPPORTED_OPS, graph_from_onnx  # noqa: E402
from edgeplan.ir import Activation, OpKind, Ref  # noqa: E402

# ---------------------------------------------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------------------------------------------


class MatMul(nn.Module):
    """``a @ b`` as a module, so that a forward hook can count its MACs."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a @ b


class Decoder(nn.Module):
    """Transposed, grouped and dilated convolutions, both upsamplings, chunk/cat, padding, pooling variants."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, stride=2, padding=1)
        self.dilated = nn.Conv2d(16, 16, 3, padding=2, dilation=2, groups=4, bias=False)
        self.up = nn.ConvTranspose2d(16, 8, 3, stride=2, padding=1, output_padding=1)
        self.up_grouped = nn.ConvTranspose2d(8, 8, 4, stride=2, padding=1, groups=2, bias=False)
        self.nearest = nn.Upsample(scale_factor=2, mode="nearest")
        self.bilinear = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
        self.pad = nn.ReflectionPad2d((1, 2, 0, 1))
        self.head = nn.Conv2d(8, 4, 3)
        self.pool = nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)
        self.maxpool = nn.MaxPool2d(2, ceil_mode=True)
        # on 16x17, the last ceil-mode window along W starts in the padding and is dropped (ONNX spec, torch,
        # onnxruntime), which ONNX shape inference does not do; the frontend corrects it
        self.coarse = nn.MaxPool2d(3, stride=3, padding=1, ceil_mode=True)
        self.depthwise = nn.Conv2d(4, 4, 3, padding=1, groups=4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.stem(x))
        x = x + self.dilated(x)
        x = torch.relu(self.up(x))
        a, b = x.chunk(2, dim=1)
        x = torch.cat([self.nearest(a), self.bilinear(b)], dim=1)
        x = self.up_grouped(nn.functional.max_pool2d(x, 2))
        x = self.head(self.pad(x))
        x = self.coarse(self.maxpool(self.pool(x)))
        return torch.sigmoid(self.depthwise(x))


class AlexNetLike(nn.Module):
    """LRN, dropout, ReLU6/hardtanh, flatten and linear layers (AlexNet era), and MobileNetV3's hard functions."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 12, 5, stride=2, padding=2)
        self.lrn = nn.LocalResponseNorm(5, alpha=2e-4, beta=0.7, k=2.0)
        self.conv2 = nn.Conv2d(12, 16, 3, padding=1)
        self.drop = nn.Dropout(0.3)
        self.fc1 = nn.Linear(16 * 4 * 4, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = nn.functional.max_pool2d(self.lrn(torch.relu(self.conv1(x))), 2)
        x = nn.functional.relu6(self.conv2(x))
        x = nn.functional.hardswish(x) * nn.functional.hardsigmoid(x)
        x = nn.functional.adaptive_avg_pool2d(x, 4).flatten(1)
        x = nn.functional.hardtanh(self.fc1(self.drop(x)), -1.0, 2.0)
        return torch.log_softmax(self.fc2(x), dim=1)


class TinyAttention(nn.Module):
    """Token linear layers on 3-D tensors (MatMul + Add in ONNX), activation matmuls, softmax, layer norm, GELU."""

    def __init__(self, dim: int = 16) -> None:
        super().__init__()
        self.patch = nn.Conv2d(3, dim, 8, stride=8)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.scores, self.mix = MatMul(), MatMul()
        self.norm = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim, bias=False))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = self.patch(x).flatten(2).transpose(1, 2)
        q, k, v = self.qkv(t).chunk(3, dim=-1)
        attn = torch.softmax(self.scores(q, k.transpose(1, 2)) * 0.25, dim=-1)
        t = self.norm(t + self.mix(attn, v))
        return t + self.mlp(t)


#: Exports of over 8 s on 2 cores: `make test-all` checks them (resnet18 and squeezenet1_0 stay in `make test`).
_SLOW_EXPORTS = ("mobilenet_v2", "googlenet", "shufflenet_v2_x0_5", "efficientnet_b0")

MODELS: dict[str, tuple[Callable[[], nn.Module], tuple[int, ...]]] = {
    "resnet18": (lambda: torchvision.models.resnet18(), (1, 3, 64, 64)),
    "mobilenet_v2": (lambda: torchvision.models.mobilenet_v2(), (1, 3, 64, 64)),
    "googlenet": (lambda: torchvision.models.googlenet(aux_logits=False, init_weights=False), (1, 3, 64, 64)),
    "shufflenet_v2_x0_5": (lambda: torchvision.models.shufflenet_v2_x0_5(), (1, 3, 64, 64)),
    "squeezenet1_0": (lambda: torchvision.models.squeezenet1_0(), (1, 3, 64, 64)),
    "efficientnet_b0": (lambda: timm.create_model("efficientnet_b0", pretrained=False), (1, 3, 64, 64)),
    "decoder": (Decoder, (1, 3, 32, 32)),
    "alexnet_like": (AlexNetLike, (1, 3, 32, 32)),
    "tiny_attention": (TinyAttention, (1, 3, 32, 32)),
}


def hook_counts(module: nn.Module, inputs: tuple[torch.Tensor, ...]) -> tuple[int, int]:
    """(compute calls, MACs) of one forward pass, counted by forward hooks."""
    calls: list[int] = []

    def hook(m: nn.Module, args: tuple[torch.Tensor, ...], out: torch.Tensor) -> None:
        if isinstance(m, nn.Conv2d):
            kh, kw = m.kernel_size
            calls.append(out.numel() * (m.in_channels // m.groups) * kh * kw)
        elif isinstance(m, nn.ConvTranspose2d):
            kh, kw = m.kernel_size
            calls.append(args[0].numel() * (m.out_channels // m.groups) * kh * kw)
        elif isinstance(m, nn.Linear):
            calls.append(out.numel() * m.in_features)
        elif isinstance(m, MatMul):
            calls.append(out.numel() * args[0].shape[-1])

    counted = (nn.Conv2d, nn.ConvTranspose2d, nn.Linear, MatMul)
    handles = [m.register_forward_hook(hook) for m in module.modules() if isinstance(m, counted)]
    try:
        with torch.no_grad():
            module(*inputs)
    finally:
        for h in handles:
            h.remove()
    return len(calls), sum(calls)


class Exported:
    """One export per model and module: the model, its inputs, the .onnx path and the hook counts."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.cache: dict[str, tuple[nn.Module, tuple[torch.Tensor, ...], Path, tuple[int, int]]] = {}

    def __call__(self, name: str) -> tuple[nn.Module, tuple[torch.Tensor, ...], Path, tuple[int, int]]:
        if name not in self.cache:
            torch.manual_seed(0)
            build, shape = MODELS[name]
            module = build().eval()
            inputs = (torch.randn(shape),)
            path = export_onnx(module, inputs, self.folder / f"{name}.onnx")
            self.cache[name] = (module, inputs, path, hook_counts(module, inputs))
        return self.cache[name]


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Exported:
    return Exported(tmp_path_factory.mktemp("onnx"))


# ---------------------------------------------------------------------------------------------------------------
# Exported models: compute nodes and MACs agree with the torch model
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in _SLOW_EXPORTS else n for n in MODELS])
def test_exported_model_matches_torch_counts(exported: Exported, name: str) -> None:
    _, _, path, (calls, macs) = exported(name)
    graph = graph_from_onnx(path)
    assert graph.validate() is graph
    assert graph.name == f"{name}.onnx"
    assert len(graph.compute_nodes) == calls
    assert graph.totals().macs == macs
    assert not graph.opaque_nodes
    assert all(n.source for n in graph.nodes)
    assert len({n.name for n in graph.nodes}) == len(graph.nodes)


def test_export_is_single_file_that_onnxruntime_runs(exported: Exported) -> None:
    module, inputs, path, _ = exported("decoder")
    assert sorted(p.name for p in path.parent.iterdir() if p.name.startswith("decoder")) == ["decoder.onnx"]
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (out,) = session.run(None, {session.get_inputs()[0].name: inputs[0].numpy()})
    with torch.no_grad():
        np.testing.assert_allclose(out, module(*inputs).numpy(), rtol=1e-4, atol=1e-5)
    assert module.training is False


def test_decoder_attributes(exported: Exported) -> None:
    graph = graph_from_onnx(exported("decoder")[2])
    kinds = {n.kind for n in graph.nodes}
    assert {OpKind.CONV_TRANSPOSE2D, OpKind.UPSAMPLE, OpKind.SPLIT, OpKind.CONCAT, OpKind.PAD} <= kinds
    modes = sorted((n.attrs.mode, n.attrs.align_corners) for n in graph.nodes if n.kind is OpKind.UPSAMPLE)
    assert modes == [("bilinear", True), ("nearest", False)]
    (pad,) = [n for n in graph.nodes if n.kind is OpKind.PAD]
    assert pad.attrs.mode == "reflect" and pad.attrs.pads == ((0, 0), (0, 0), (0, 1), (1, 2))
    (dilated,) = [n.attrs for n in graph.nodes if n.kind is OpKind.CONV2D and n.attrs.dilation == (2, 2)]
    assert (dilated.groups, dilated.padding, dilated.bias) == (4, (2, 2, 2, 2), False)
    assert [n.attrs.depthwise for n in graph.nodes if n.kind is OpKind.CONV2D].count(True) == 1
    transposed = [n.attrs for n in graph.nodes if n.kind is OpKind.CONV_TRANSPOSE2D]
    assert [(t.groups, t.output_padding, t.bias) for t in transposed] == [(1, (1, 1), True), (2, (0, 0), False)]
    avg = [n.attrs for n in graph.nodes if n.kind is OpKind.POOL2D and n.attrs.mode.value == "avg"]
    assert [(a.ceil_mode, a.count_include_pad) for a in avg] == [(True, False)]


def test_alexnet_like_lrn_clip_dropout(exported: Exported) -> None:
    graph = graph_from_onnx(exported("alexnet_like")[2])
    (lrn,) = [n for n in graph.nodes if n.kind is OpKind.LRN]
    assert (lrn.attrs.size, lrn.attrs.beta, lrn.attrs.k) == (5, pytest.approx(0.7), pytest.approx(2.0))
    fns = [n.attrs.fn for n in graph.nodes if n.kind is OpKind.ACTIVATION]
    assert {Activation.RELU6, Activation.HARDSWISH, Activation.HARDSIGMOID} <= set(fns)
    (clip,) = [n.attrs for n in graph.nodes if n.kind is OpKind.ACTIVATION and n.attrs.fn is Activation.CLIP]
    assert (clip.low, clip.high) == (-1.0, 2.0)
    assert [n.attrs.axis for n in graph.nodes if n.kind is OpKind.SOFTMAX] == [1]


def test_tiny_attention_fuses_bias_into_linear(exported: Exported) -> None:
    graph = graph_from_onnx(exported("tiny_attention")[2])
    linears = [n.attrs for n in graph.nodes if n.kind is OpKind.LINEAR]
    expected = [(16, 48, True), (16, 32, True), (32, 16, False)]
    assert [(a.in_features, a.out_features, a.bias) for a in linears] == expected
    assert len([n for n in graph.nodes if n.kind is OpKind.MATMUL]) == 2
    assert {OpKind.LAYER_NORM, OpKind.SOFTMAX, OpKind.PERMUTE} <= {n.kind for n in graph.nodes}


@pytest.mark.parametrize("name", ["shufflenet_v2_x0_5", "decoder"])
def test_legacy_torchscript_export_folds_shape_chains(tmp_path: Path, name: str) -> None:
    """Files from the TorchScript exporter carry Shape/Gather chains and If nodes; they fold to constants."""
    build, shape = MODELS[name]
    module, inputs = build().eval(), (torch.randn(shape),)
    path = tmp_path / "legacy.onnx"
    with warnings.catch_warnings():  # the TorchScript exporter is deprecated
        warnings.simplefilter("ignore")
        torch.onnx.export(module, inputs, str(path), dynamo=False, opset_version=17)
    calls, macs = hook_counts(module, inputs)
    graph = graph_from_onnx(path)
    assert (len(graph.compute_nodes), graph.totals().macs) == (calls, macs)
    assert {"Shape", "Gather"} & {n.op_type for n in onnx.load(str(path)).graph.node}


def test_legacy_lrn_decomposition_becomes_opaque_not_dropped(tmp_path: Path) -> None:
    module = nn.Sequential(nn.Conv2d(3, 8, 3), nn.LocalResponseNorm(3), nn.ReLU(), nn.Conv2d(8, 4, 3)).eval()
    inputs = (torch.randn(1, 3, 16, 16),)
    path = tmp_path / "legacy_lrn.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, inputs, str(path), dynamo=False)
    with pytest.raises(UnsupportedOperatorError):
        graph_from_onnx(path)
    graph = graph_from_onnx(path, opaque=True)
    assert [n.attrs.operator for n in graph.opaque_nodes] == ["AveragePool"]  # 5-D pooling; the rest is modelled
    assert "If" in {n.op_type for n in onnx.load(str(path)).graph.node}  # its branch, chosen by a constant, inlined
    assert (len(graph.compute_nodes), graph.totals().macs) == hook_counts(module, inputs)


# ---------------------------------------------------------------------------------------------------------------
# Export errors
# ---------------------------------------------------------------------------------------------------------------


def test_export_rejects_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="nn.Module"):
        export_onnx("resnet", (torch.randn(1, 3, 8, 8),), tmp_path / "x.onnx")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="fails on example inputs"):
        export_onnx(nn.Conv2d(3, 4, 3), (torch.randn(1, 5, 8, 8),), tmp_path / "x.onnx")
    with pytest.raises(InvalidInputError, match="opset"):
        export_onnx(nn.Conv2d(3, 4, 3), (torch.randn(1, 3, 8, 8),), tmp_path / "x.onnx", opset=3)


def test_export_unsupported_operator(tmp_path: Path) -> None:
    class Bessel(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.special.bessel_j0(x)

    with pytest.raises(UnsupportedOperatorError, match="bessel_j0") as info:
        export_onnx(Bessel(), (torch.randn(1, 4),), tmp_path / "b.onnx")
    assert "bessel_j0" in info.value.operator


def test_export_accepts_a_lone_tensor_and_an_opset(tmp_path: Path) -> None:
    path = export_onnx(nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU()), torch.randn(1, 3, 8, 8), tmp_path / "a/c.onnx", 18)
    model = onnx.load(str(path))
    assert {o.version for o in model.opset_import if o.domain == ""} == {18}
    assert graph_from_onnx(path).totals().macs == 4 * 6 * 6 * 3 * 9


# ---------------------------------------------------------------------------------------------------------------
# Bad files
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("content", ["half", "random", "empty", "text"])
def test_corrupt_files_are_invalid_input(exported: Exported, tmp_path: Path, content: str) -> None:
    data = exported("squeezenet1_0")[2].read_bytes()
    payload = {
        "half": data[: len(data) // 2],
        "random": np.random.default_rng(0).bytes(4096),
        "empty": b"",
        "text": b"ir_version: 8\nthis is not an onnx file\n",
    }[content]
    path = tmp_path / "bad.onnx"
    path.write_bytes(payload)
    with pytest.raises(InvalidInputError, match="not a valid ONNX model.*re-export"):
        graph_from_onnx(path)


def test_missing_file_and_directory_are_invalid_input(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="does not exist"):
        graph_from_onnx(tmp_path / "nope.onnx")
    with pytest.raises(InvalidInputError, match="does not exist"):
        graph_from_onnx(tmp_path)
    with pytest.raises(InvalidInputError, match="path of an .onnx file"):
        graph_from_onnx(42)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------------------------
# Hand-built ONNX models: operators and options in isolation
# ---------------------------------------------------------------------------------------------------------------


def _model(
    nodes: list[onnx.NodeProto],
    inputs: list[tuple[str, list[int | str]]],
    outputs: list[tuple[str, list[int | str]]],
    inits: dict[str, np.ndarray] | None = None,
    opset: int = 18,
) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "hand",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
        [numpy_helper.from_array(v, k) for k, v in (inits or {}).items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def _w(*shape: int) -> np.ndarray:
    return np.ones(shape, dtype=np.float32)


@pytest.mark.parametrize("op", ["Einsum", "GridSample"])
def test_unsupported_operator_raises_or_becomes_opaque(op: str) -> None:
    attrs = {"equation": "bij,bjk->bik"} if op == "Einsum" else {}
    shapes: list[tuple[str, list[int | str]]] = [("a", [1, 4, 5]), ("b", [1, 5, 3])]
    out: list[int | str] = [1, 4, 3]
    if op == "GridSample":
        shapes, out = [("a", [1, 2, 8, 8]), ("b", [1, 4, 4, 2])], [1, 2, 4, 4]
    nodes = [helper.make_node(op, ["a", "b"], ["y"], name="mystery", **attrs), helper.make_node("Relu", ["y"], ["z"])]
    model = _model(nodes, shapes, [("z", out)])
    with pytest.raises(UnsupportedOperatorError) as info:
        graph_from_onnx(model)
    assert (info.value.operator, info.value.node) == (op, "mystery")
    graph = graph_from_onnx(model, opaque=True)
    (node,) = graph.opaque_nodes
    assert (node.name, node.attrs.operator, node.source, len(node.inputs)) == ("mystery", op, op, 2)
    assert graph.nodes[-1].kind is OpKind.ACTIVATION and op not in SUPPORTED_OPS


def test_conv_auto_pad_same_upper_and_lower() -> None:
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["y"], auto_pad="SAME_UPPER", strides=[2, 2]),
        helper.make_node("Conv", ["y", "w2"], ["z"], auto_pad="SAME_LOWER", kernel_shape=[2, 2]),
    ]
    model = _model(nodes, [("x", [1, 3, 9, 9])], [("z", [1, 8, 5, 5])], {"w": _w(8, 3, 4, 4), "w2": _w(8, 8, 2, 2)})
    first, second = graph_from_onnx(model).compute_nodes
    assert first.attrs.padding == (1, 1, 2, 2) and first.output_shapes == ((1, 8, 5, 5),) and not first.attrs.bias
    assert second.attrs.padding == (1, 1, 0, 0) and second.output_shapes == ((1, 8, 5, 5),)


def test_one_d_windows_are_the_two_d_ones_between_reshapes_and_expand_runs_as_onnxruntime() -> None:
    from edgeplan.measure.graph_exec import GraphExecutor

    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], auto_pad="SAME_UPPER", group=2, name="conv"),  # ECA's conv1d
        helper.make_node("AveragePool", ["c"], ["p"], kernel_shape=[3], strides=[2], pads=[1, 1], name="avg"),
        helper.make_node("MaxPool", ["p"], ["m"], kernel_shape=[2], strides=[2], name="max"),
        helper.make_node("Unsqueeze", ["m", "axis"], ["u"]),  # repeat_interleave as torch.onnx writes it
        helper.make_node("Expand", ["u", "shape"], ["e"], name="expand"),
        helper.make_node("Reshape", ["e", "merged"], ["y"]),
    ]
    inits = {"w": _w(8, 2, 4), "axis": np.array([2], dtype=np.int64),
             "shape": np.array([1, 8, 3, 4], dtype=np.int64), "merged": np.array([1, 24, 4], dtype=np.int64)}
    model = _model(nodes, [("x", [1, 4, 16])], [("y", [1, 24, 4])], inits)
    g = graph_from_onnx(model)
    conv = g.node("conv")
    assert conv.kind is OpKind.CONV2D and conv.attrs.kernel == (1, 4) and conv.attrs.padding == (0, 1, 0, 2)
    assert conv.attrs.groups == 2 and conv.input_shapes == ((1, 4, 1, 16),) and conv.output_shapes == ((1, 8, 1, 16),)
    assert [g.node(f"{n}/unsqueeze").kind for n in ("conv", "avg", "max")] == [OpKind.RESHAPE] * 3
    assert g.node("avg").attrs.padding == (0, 1, 0, 1) and g.node("max/squeeze").output_shapes == ((1, 8, 4),)
    assert g.node("expand").kind is OpKind.EXPAND and g.node("expand").output_shapes == ((1, 8, 3, 4),)
    pools = _model(nodes[1:], [("c", [1, 8, 16])], [("y", [1, 24, 4])], inits)  # no weights: values comparable
    x = np.random.default_rng(0).standard_normal((1, 8, 16)).astype(np.float32)
    session = ort.InferenceSession(pools.SerializeToString(), providers=["CPUExecutionProvider"])
    (want,) = session.run(None, {"c": x})
    (got,) = GraphExecutor(graph_from_onnx(pools)).run({Ref("c"): torch.from_numpy(x)})
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-6)


def test_dynamic_batch_defaults_to_one_and_input_shapes_override() -> None:
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1], name="conv")]
    model = _model(nodes, [("x", ["N", 3, "H", "W"])], [("y", ["N", 4, "H", "W"])], {"w": _w(4, 3, 3, 3), "b": _w(4)})
    with pytest.raises(InvalidInputError, match="'nope'.*not graph inputs"):
        graph_from_onnx(model, input_shapes={"nope": (1, 3, 8, 8)})
    with pytest.raises(InvalidInputError, match="rank 3"):
        graph_from_onnx(model, input_shapes={"x": (3, 8, 8)})
    small = graph_from_onnx(model)  # every dynamic dim (N, H, W) becomes 1
    assert small.inputs[0].output_shapes == ((1, 3, 1, 1),)
    big = graph_from_onnx(model, input_shapes={"x": (2, 3, 8, 8)})
    assert big.node("conv").output_shapes == ((2, 4, 8, 8),) and big.totals().macs == 2 * 4 * 64 * 27


def test_uninferable_shapes_name_the_value() -> None:
    conv = _model([helper.make_node("Conv", ["x", "w"], ["y"], name="c")], [("x", [1, 3, 8, 8])],
                  [("y", [1, 4, 6, 6])], {"w": _w(4, 3, 3, 3)})
    with pytest.raises(InvalidInputError, match="'c' .*does not fit its weight.*input_shapes"):
        graph_from_onnx(conv, input_shapes={"x": (1, 5, 8, 8)})  # 5 channels for a 3-channel weight
    add = _model([helper.make_node("Add", ["x", "c"], ["y"])], [("x", ["N", 3])], [("y", ["N", 3])], {"c": _w(1, 3)})
    with pytest.raises(InvalidInputError, match="'y' cannot be inferred.*input_shapes.*strict shape inference"):
        graph_from_onnx(add, input_shapes={"x": (1, 5)})
    nodes = [helper.make_node("Foo", ["x"], ["y"], domain="com.example"), helper.make_node("Relu", ["y"], ["z"])]
    model = _model(nodes, [("x", [1, 4])], [("z", ["?", "?"])])
    model.opset_import.append(helper.make_opsetid("com.example", 1))
    with pytest.raises(InvalidInputError, match="'y' cannot be inferred"):
        graph_from_onnx(model, opaque=True)


def test_clip_constants_slice_chain_and_eltwise_constant() -> None:
    nodes = [
        helper.make_node("Constant", [], ["lo"], value=numpy_helper.from_array(np.array(-1.0, np.float32))),
        helper.make_node("Clip", ["x", "lo", ""], ["c"]),
        helper.make_node("Slice", ["c", "starts", "ends", "axes"], ["s"], name="sl"),
        helper.make_node("Mul", ["scale", "s"], ["m"]),
        helper.make_node("Add", ["m", "m"], ["y"]),
    ]
    inits = {
        "starts": np.array([1, 0], np.int64),
        "ends": np.array([2**62, -1], np.int64),
        "axes": np.array([1, 3], np.int64),
        "scale": _w(1, 1, 1, 9),
    }
    graph = graph_from_onnx(_model(nodes, [("x", [1, 4, 6, 10])], [("y", [1, 3, 6, 9])], inits))
    clip = next(n for n in graph.nodes if n.kind is OpKind.ACTIVATION).attrs
    assert (clip.fn, clip.low, clip.high) == (Activation.CLIP, -1.0, None)
    slices = [(n.name, n.attrs.axis, n.attrs.start, n.attrs.end) for n in graph.nodes if n.kind is OpKind.SLICE]
    assert slices == [("sl/axis1", 1, 1, 4), ("sl", 3, 0, 9)]
    mul, add = graph.nodes[-2:]
    assert mul.attrs.const_shape == (1, 1, 1, 9) and len(mul.inputs) == 1 and mul.params == 9
    assert add.inputs == (Ref(mul.name), Ref(mul.name)) and add.output_shapes == ((1, 3, 6, 9),)


def test_gemm_matmul_add_and_unique_names() -> None:
    nodes = [
        helper.make_node("Identity", ["x2"], ["y2"]),
        helper.make_node("Gemm", ["x", "w", "b"], ["g"], transB=1, name="fc"),
        helper.make_node("MatMul", ["g", "w2"], ["mm"], name="fc"),
        helper.make_node("Add", ["mm", "b2"], ["y"], name=""),
        helper.make_node("MatMul", ["y", "y2"], ["z"], name=""),
    ]
    inits = {"w": _w(6, 8), "b": _w(6), "w2": _w(6, 5), "b2": _w(5)}
    graph = graph_from_onnx(_model(nodes, [("x", [1, 8]), ("x2", [5, 7])], [("z", [1, 7])], inits))
    assert [n.name for n in graph.nodes] == ["x", "x2", "fc", "fc_1", "z"]
    assert [(n.kind, n.source) for n in graph.nodes[2:]] == [
        (OpKind.LINEAR, "Gemm"), (OpKind.LINEAR, "MatMul+Add"), (OpKind.MATMUL, "MatMul")
    ]
    assert graph.node("fc_1").attrs.bias and graph.totals().macs == 8 * 6 + 6 * 5 + 5 * 7


def test_model_proto_input_and_graph_output_of_elided_cast() -> None:
    nodes = [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT)]
    model = _model(nodes, [("x", [1, 3])], [("y", [1, 3])])
    graph = graph_from_onnx(model, name="cast")
    assert graph.name == "cast" and [n.kind for n in graph.nodes] == [OpKind.INPUT] and graph.outputs[0].node == "x"


def test_importing_frontends_does_not_import_onnx_or_torch() -> None:
    import subprocess
    import sys

    code = (
        "import sys, edgeplan.frontends.onnx_frontend, edgeplan.frontends.onnx_export; "
        "print(any(m in sys.modules for m in ('onnx', 'torch')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1], env={**os.environ, "PYTHONPATH": "."})
    assert out.stdout.strip() == "False"


# ---------------------------------------------------------------------------------------------------------------
# Property: windowed operators agree with onnxruntime (shapes) and validate (attributes consistent with shapes)
# ---------------------------------------------------------------------------------------------------------------


@st.composite
def window_ops(draw: st.DrawFn) -> tuple[onnx.ModelProto, str]:
    op = draw(st.sampled_from(["Conv", "ConvTranspose", "MaxPool", "AveragePool"]))
    k, stride = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    auto = draw(st.sampled_from(["NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"]))
    if op == "ConvTranspose" or (op.endswith("Pool") and k < stride):
        auto = draw(st.sampled_from(["NOTSET", "VALID"]))  # where onnxruntime departs from the ONNX spec
    dilation = 1 if op == "AveragePool" or auto.startswith("SAME") else draw(st.integers(1, 2))
    pads = draw(st.lists(st.integers(0, k - 1), min_size=4, max_size=4))
    attrs: dict[str, object] = {"strides": [stride, stride], "auto_pad": auto}
    if auto == "NOTSET":
        attrs["pads"] = pads
    if op != "AveragePool":
        attrs["dilations"] = [dilation, dilation]
    inits: dict[str, np.ndarray] = {}
    inputs = ["x"]
    if op in ("MaxPool", "AveragePool"):
        attrs.update(kernel_shape=[k, k], ceil_mode=int(draw(st.booleans())))
    else:
        groups = draw(st.sampled_from([1, 2]))
        attrs["group"] = groups
        inits["w"] = _w(4, 4 // groups, k, k) if op == "Conv" else _w(4, 6 // groups, k, k)
        inputs.append("w")
        if op == "ConvTranspose" and stride > 1:
            attrs["output_padding"] = [draw(st.integers(0, stride - 1))] * 2
    size = draw(st.integers(dilation * (k - 1) + 1, 12))
    node = helper.make_node(op, inputs, ["y"], name="op", **attrs)
    return _model([node], [("x", [1, 4, size, size + 1])], [("y", ["?", "?", "?", "?"])], inits), op


@settings(max_examples=30, deadline=None)
@given(case=window_ops())
def test_window_ops_agree_with_onnxruntime(case: tuple[onnx.ModelProto, str]) -> None:
    model, op = case
    shape = tuple(d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (y,) = session.run(None, {"x": x})
    node = graph_from_onnx(model).node("op")  # validate() checks the attributes against the shapes
    assert node.output_shapes == (y.shape,) and node.source == op


# ---------------------------------------------------------------------------------------------------------------
# One operator at a time: kind and attributes, with output shapes cross-checked against onnxruntime
# ---------------------------------------------------------------------------------------------------------------

_F = np.float32
_I = np.int64
#: name: (node, input shape, initializers, opset, expected kind, check of the attributes of the node named "op")
OPS: dict[str, tuple[onnx.NodeProto, list[int], dict[str, np.ndarray], int, OpKind, Callable[[object], bool]]] = {
    "gather_scalar": (helper.make_node("Gather", ["x", "i"], ["y"], axis=1, name="op"), [1, 4, 5],
                      {"i": np.array(2, _I)}, 18, OpKind.SLICE, lambda a: (a.start, a.end, a.squeeze) == (2, 3, True)),
    "gather_range": (helper.make_node("Gather", ["x", "i"], ["y"], axis=2, name="op"), [1, 4, 6],
                     {"i": np.array([1, 3, 5], _I)}, 18, OpKind.SLICE, lambda a: (a.start, a.end, a.step) == (1, 6, 2)),
    "concat_constant": (helper.make_node("Concat", ["c", "x"], ["y"], axis=1, name="op"), [1, 4, 6],
                        {"c": np.ones((1, 1, 6), _F)}, 18, OpKind.CONCAT, lambda a: a.axis == 1),
    "matmul_constant_first": (helper.make_node("MatMul", ["c", "x"], ["y"], name="op"), [1, 4, 6],
                              {"c": np.ones((3, 4), _F)}, 18, OpKind.MATMUL, lambda a: a.contraction == 4),
    "reduce_sum": (helper.make_node("ReduceSum", ["x", "ax"], ["y"], keepdims=0, name="op"), [1, 4, 6],
                   {"ax": np.array([-1], _I)}, 18, OpKind.REDUCE,
                   lambda a: (a.op, a.axes, a.keepdim) == ("sum", (2,), False)),
    "reduce_max_opset11": (helper.make_node("ReduceMax", ["x"], ["y"], axes=[1], name="op"), [1, 4, 6], {}, 11,
                           OpKind.REDUCE, lambda a: (a.op, a.axes, a.keepdim) == ("max", (1,), True)),
    "pow": (helper.make_node("Pow", ["x", "e"], ["y"], name="op"), [1, 4], {"e": np.array(2.0, _F)}, 18,
            OpKind.ACTIVATION, lambda a: (a.fn, a.alpha) == (Activation.POW, 2.0)),
    "erf": (helper.make_node("Erf", ["x"], ["y"], name="op"), [1, 4], {}, 18, OpKind.ACTIVATION,
            lambda a: a.fn is Activation.ERF),
    "hardsigmoid": (helper.make_node("HardSigmoid", ["x"], ["y"], alpha=1 / 6, name="op"), [1, 4], {}, 18,
                    OpKind.ACTIVATION, lambda a: a.alpha == pytest.approx(1 / 6)),
    "clip_attrs_opset6": (helper.make_node("Clip", ["x"], ["y"], min=0.0, max=6.0, name="op"), [1, 4], {}, 6,
                          OpKind.ACTIVATION, lambda a: a.fn is Activation.RELU6),
    "conv_transpose_output_shape": (
        helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], output_shape=[10, 9], name="op"),
        [1, 2, 5, 5], {"w": np.ones((2, 3, 3, 3), _F)}, 18, OpKind.CONV_TRANSPOSE2D,
        lambda a: (a.out_channels, a.padding, a.output_padding) == (3, (1, 1, 0, 1), (0, 0))),
    "conv_transpose_same_upper": (
        helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], auto_pad="SAME_UPPER", name="op"),
        [1, 2, 5, 5], {"w": np.ones((2, 3, 4, 4), _F)}, 18, OpKind.CONV_TRANSPOSE2D,
        lambda a: a.padding == (1, 1, 1, 1)),
    "split_attribute_opset11": (helper.make_node("Split", ["x"], ["y", "z"], axis=1, split=[1, 3], name="op"),
                                [1, 4, 2], {}, 11, OpKind.SPLIT, lambda a: a.sizes == (1, 3)),
    "split_num_outputs": (helper.make_node("Split", ["x"], ["y", "z"], axis=-1, num_outputs=2, name="op"),
                          [1, 4, 5], {}, 18, OpKind.SPLIT, lambda a: (a.axis, a.sizes) == (2, (3, 2))),
    "pad_attribute_opset10": (helper.make_node("Pad", ["x"], ["y"], pads=[0, 1, 0, 2], mode="edge", name="op"),
                              [2, 3], {}, 10, OpKind.PAD,
                              lambda a: (a.pads, a.mode) == (((0, 0), (1, 2)), "replicate")),
    "pad_axes_opset18": (helper.make_node("Pad", ["x", "p", "", "ax"], ["y"], name="op"), [1, 2, 3, 3],
                         {"p": np.array([1, 2], _I), "ax": np.array([3], _I)}, 18, OpKind.PAD,
                         lambda a: a.pads == ((0, 0), (0, 0), (0, 0), (1, 2))),
    "softmax_opset11": (helper.make_node("Softmax", ["x"], ["y"], name="op"), [2, 5], {}, 11, OpKind.SOFTMAX,
                        lambda a: a.axis == 1),
    "lrn": (helper.make_node("LRN", ["x"], ["y"], size=3, bias=2.0, name="op"), [1, 4, 3, 3], {}, 18, OpKind.LRN,
            lambda a: (a.size, a.k) == (3, 2.0)),
    "global_max_pool": (helper.make_node("GlobalMaxPool", ["x"], ["y"], name="op"), [1, 4, 3, 3], {}, 18,
                        OpKind.GLOBAL_POOL, lambda a: a.mode.value == "max"),
    "instance_norm": (helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"], name="op"), [1, 4, 3, 3],
                      {"s": np.ones(4, _F), "b": np.zeros(4, _F)}, 18, OpKind.GROUP_NORM, lambda a: a.groups == 4),
    "group_norm_opset21": (helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2, name="op"),
                           [1, 4, 3, 3], {"s": np.ones(4, _F), "b": np.zeros(4, _F)}, 21, OpKind.GROUP_NORM,
                           lambda a: (a.channels, a.groups) == (4, 2)),
    "layer_norm_two_axes": (helper.make_node("LayerNormalization", ["x", "s"], ["y"], axis=-2, name="op"), [1, 4, 3],
                            {"s": np.ones((4, 3), _F)}, 18, OpKind.LAYER_NORM,
                            lambda a: (a.channels, a.axis) == (12, -2)),
    "resize_cubic": (helper.make_node("Resize", ["x", "", "sc"], ["y"], mode="cubic", name="op"), [1, 2, 4, 4],
                     {"sc": np.array([1, 1, 2, 2], _F)}, 18, OpKind.UPSAMPLE, lambda a: a.mode == "bicubic"),
    "flatten_axis2": (helper.make_node("Flatten", ["x"], ["y"], axis=2, name="op"), [1, 2, 3, 4], {}, 18,
                      OpKind.RESHAPE, lambda a: a.shape == (2, 12)),
    "dropout_ratio": (helper.make_node("Dropout", ["x", "r"], ["y"], name="op"), [1, 4], {"r": np.array(0.2, _F)},
                      18, OpKind.DROPOUT, lambda a: a.p == pytest.approx(0.2)),
    "transpose_default": (helper.make_node("Transpose", ["x"], ["y"], name="op"), [1, 2, 3], {}, 18, OpKind.PERMUTE,
                          lambda a: a.dims == (2, 1, 0)),
}


@pytest.mark.parametrize("case", list(OPS))
def test_single_operator(case: str) -> None:
    node, shape, inits, opset, kind, check = OPS[case]
    outputs: list[tuple[str, list[int | str]]] = [(v, ["?"] * len(shape)) for v in node.output]
    model = _model([node], [("x", shape)], outputs, inits, opset)
    graph = graph_from_onnx(model)
    op = graph.node("op")
    assert op.kind is kind and check(op.attrs), op.attrs
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    results = session.run(None, {"x": np.random.default_rng(0).standard_normal(shape).astype(_F)})
    assert [graph.node(r.node).output_shapes[r.index] for r in graph.outputs] == [r.shape for r in results]


def test_export_falls_back_to_torchscript_on_data_dependent_control_flow(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    class Branchy(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = nn.Conv2d(3, 4, 3), nn.Conv2d(3, 4, 5, padding=1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.a(x) if x.mean() > 0 else self.b(x)  # torch.export refuses; tracing takes one branch

    with caplog.at_level("INFO", logger="edgeplan.frontends.onnx_export"):
        path = export_onnx(Branchy(), (torch.ones(1, 3, 8, 8),), tmp_path / "branchy.onnx")
    assert "TorchScript exporter" in caplog.text
    (conv,) = graph_from_onnx(path).compute_nodes
    assert conv.attrs.kernel == (3, 3)
