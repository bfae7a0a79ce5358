"""Kernel deduction (edgeplan.ir.kernels): hand-built cases of li2023 Alg. 3.1/3.2 and Table 2, and real runtimes.

ONNX Runtime (edgeplan.measure.kernel_check): torchvision models exported with edgeplan's exporter, deduced kernels
compared with ORT's optimized graph (node by node for the IR of the ONNX file, counts per kind for the IR of the
torch module, which still has its batch norms); more models in benchmarks/bench_kernels.py. PyTorch eager: deduced
aten operators compared with torch.profiler's top-level operators.
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from edgeplan.errors import InvalidInputError, UnsupportedOperatorError
from edgeplan.ir import Activation, EltwiseOp, Graph, Node, OpKind, Ref
from edgeplan.ir.checks import conv_output_size
from edgeplan.ir.kernels import (
    Kernel,
    KernelDeduction,
    compare_kernels,
    deduce_kernels,
    load_rules,
    profiles,
    select_tflite_conv_kernel,
)
from edgeplan.ir.ops import (
    ActivationAttrs,
    ChannelShuffleAttrs,
    ConvAttrs,
    DropoutAttrs,
    EltwiseAttrs,
    InputAttrs,
    NormAttrs,
    PoolAttrs,
    PoolMode,
    SplitAttrs,
)
from edgeplan.measure.kernel_check import check_onnxruntime, onnxruntime_nchwc_block_size

VENDORS = ("adreno", "mali", "powervr")

# ---------------------------------------------------------------------------------------------------------------
# Hand-built graphs
# ---------------------------------------------------------------------------------------------------------------


class _Builder:
    """Appends NCHW nodes to a graph, each consuming earlier nodes by name."""

    def __init__(self, shape: tuple[int, ...] = (1, 16, 8, 8)) -> None:
        self.nodes: list[Node] = [Node("x", OpKind.INPUT, InputAttrs(0), (), (), (shape,))]
        self.shapes: dict[str, tuple[tuple[int, ...], ...]] = {"x": (shape,)}

    def add(self, name: str, kind: OpKind, attrs: object, inputs: tuple[str, ...],
            out: tuple[tuple[int, ...], ...] | None = None) -> str:
        refs = tuple(Ref(*i.split(":")[:1], int(i.split(":")[1])) if ":" in i else Ref(i) for i in inputs)
        in_shapes = tuple(self.shapes[r.node][r.index] for r in refs)
        outs = out or (in_shapes[0],)
        self.nodes.append(Node(name, kind, attrs, refs, in_shapes, outs))  # type: ignore[arg-type]
        self.shapes[name] = outs
        return name

    def conv(self, name: str, src: str, cout: int, k: int = 3, s: int = 1, g: int = 1) -> str:
        n, cin, h, w = self.shapes[src][0]
        p = k // 2
        oh, ow = conv_output_size(h, k, s, 2 * p, 1), conv_output_size(w, k, s, 2 * p, 1)
        attrs = ConvAttrs(cin, cout, (k, k), (s, s), (p, p, p, p), (1, 1), g)
        return self.add(name, OpKind.CONV2D, attrs, (src,), ((n, cout, oh, ow),))

    def act(self, name: str, src: str, fn: Activation = Activation.RELU) -> str:
        return self.add(name, OpKind.ACTIVATION, ActivationAttrs(fn), (src,))

    def bn(self, name: str, src: str) -> str:
        return self.add(name, OpKind.BATCH_NORM, NormAttrs(self.shapes[src][0][1]), (src,))

    def eltwise(self, name: str, a: str, b: str, op: EltwiseOp = EltwiseOp.ADD) -> str:
        return self.add(name, OpKind.ELTWISE, EltwiseAttrs(op), (a, b))

    def pool(self, name: str, src: str) -> str:
        n, c, h, w = self.shapes[src][0]
        return self.add(name, OpKind.POOL2D, PoolAttrs(PoolMode.MAX, (2, 2), (2, 2)), (src,), ((n, c, h // 2, w // 2),))

    def graph(self, *outputs: str) -> Graph:
        return Graph("hand", tuple(self.nodes), tuple(Ref(o) for o in outputs)).validate()


def _groups(d: KernelDeduction) -> list[tuple[str, ...]]:
    return [k.nodes for k in d.kernels]


def _single_conv(cin: int, cout: int, hw: int, k: int = 3, s: int = 1, g: int = 1) -> Graph:
    b = _Builder((1, cin, hw, hw))
    b.conv("conv", "x", cout, k, s, g)
    return b.graph("conv")


# ---------------------------------------------------------------------------------------------------------------
# li2023 Table 2 and Algorithm 3.2
# ---------------------------------------------------------------------------------------------------------------

# The three 3x3 stride-1 convolutions of ResNet16 in li2023 Table 2: (channels, output size, Adreno, Mali).
TABLE2 = [(64, 56, "Conv2D", "Winograd"), (128, 28, "Conv2D", "Winograd"), (256, 14, "Conv2D", "Conv2D")]


@pytest.mark.parametrize(("channels", "size", "adreno", "mali"), TABLE2)
def test_table2_winograd_selection(channels: int, size: int, adreno: str, mali: str) -> None:
    graph = _single_conv(channels, channels, size)
    expected = {"adreno": adreno, "mali": mali, "powervr": mali}  # PowerVR takes Mali's branch (Alg. 3.2 line 21)
    for vendor in VENDORS:
        (kernel,) = deduce_kernels(graph, f"tflite-gpu-{vendor}").kernels
        assert kernel.kind == expected[vendor], vendor
        assert select_tflite_conv_kernel(graph.node("conv").attrs, (size, size), vendor) == expected[vendor]  # type: ignore[arg-type]


def test_table2_conditions_per_line() -> None:
    # (1) fails Adreno's depth test (src_depth 16 < 32); (2) passes it but 7x7 = 49 tiles < 128 (Adreno 6xx) while
    # an older Adreno needs 64 and Mali 32; (3) has 4x4 = 16 tiles < 32 everywhere.
    conv = ConvAttrs(128, 128, (3, 3), (1, 1), (1, 1, 1, 1))
    assert select_tflite_conv_kernel(conv, (28, 28), "adreno5xx") == "Conv2D"  # 49 < 64
    assert select_tflite_conv_kernel(conv, (32, 32), "adreno5xx") == "Winograd"  # 64 tiles, depth 32
    assert select_tflite_conv_kernel(conv, (44, 44), "adreno") == "Conv2D"  # 121 < 128
    assert select_tflite_conv_kernel(conv, (45, 45), "adreno") == "Winograd"  # 12 x 12 = 144
    # AMD: dst_depth may be as small as 8 (line 19), src_depth still 16.
    narrow = ConvAttrs(64, 32, (3, 3), (1, 1), (1, 1, 1, 1))
    assert select_tflite_conv_kernel(narrow, (56, 56), "amd") == "Winograd"
    assert select_tflite_conv_kernel(narrow, (56, 56), "mali") == "Conv2D"


@pytest.mark.parametrize(
    ("cin", "cout", "k", "s", "g", "expected"),
    [
        (64, 64, 3, 2, 1, "Conv2D"),  # stride 2: no Winograd
        (64, 64, 5, 1, 1, "Conv2D"),  # 5x5: no Winograd
        (64, 64, 1, 1, 1, "Conv2D"),  # 1x1
        (64, 64, 3, 1, 4, "GroupedConv2D"),  # 16 channels per group, multiples of 4
        (24, 24, 3, 1, 4, "Conv2D"),  # 6 per group: not a multiple of 4, and grouped convs never take Winograd
        (64, 64, 3, 1, 64, "DepthwiseConv2D"),  # depthwise is its own TFLite op
    ],
)
def test_conv_kernel_selection(cin: int, cout: int, k: int, s: int, g: int, expected: str) -> None:
    graph = _single_conv(cin, cout, 56, k, s, g)
    for vendor in VENDORS:
        assert deduce_kernels(graph, f"tflite-gpu-{vendor}").kernels[0].kind == expected


# ---------------------------------------------------------------------------------------------------------------
# li2023 Algorithm 3.1 (fusion) and the TFLite converter
# ---------------------------------------------------------------------------------------------------------------


def test_fusion_chain_conv_bn_relu_mul() -> None:
    b = _Builder()
    c = b.conv("conv", "x", 16)
    r = b.act("relu", b.bn("bn", c))
    b.eltwise("mul", r, "x", EltwiseOp.MUL)
    d = deduce_kernels(b.graph("mul"), "tflite-gpu-mali")
    assert _groups(d) == [("conv", "bn", "relu", "mul")]  # BN folded by the converter, then relu and mul linked
    assert d.kernels[0].name == "conv2d+batch_norm+relu+mul" and d.kernels[0].kind == "Conv2D"


def test_no_fusion_when_the_tensor_has_two_consumers() -> None:
    b = _Builder()
    c = b.conv("conv", "x", 16)
    b.eltwise("add", b.act("relu", c), c)
    assert _groups(deduce_kernels(b.graph("add"), "tflite-gpu-adreno")) == [("conv",), ("relu", "add")]


def test_fusion_only_through_the_first_input() -> None:
    first, second = _Builder(), _Builder()
    for b, args in ((first, ("conv", "x")), (second, ("x", "conv"))):
        b.conv("conv", "x", 16)
        b.eltwise("add", *args)
    assert _groups(deduce_kernels(first.graph("add"), "tflite-gpu-mali")) == [("conv", "add")]
    assert _groups(deduce_kernels(second.graph("add"), "tflite-gpu-mali")) == [("conv",), ("add",)]


def test_no_fusion_into_a_non_linkable_op() -> None:
    b = _Builder()
    b.pool("pool", b.conv("conv", "x", 16))
    assert _groups(deduce_kernels(b.graph("pool"), "tflite-gpu-mali")) == [("conv",), ("pool",)]


def test_no_fusion_when_the_consumer_uses_the_tensor_twice() -> None:
    b = _Builder()
    c = b.conv("conv", "x", 16)
    b.eltwise("square", c, c, EltwiseOp.MUL)
    assert _groups(deduce_kernels(b.graph("square"), "tflite-gpu-mali")) == [("conv",), ("square",)]


def test_no_fusion_before_the_other_input_is_ready() -> None:
    # add(a, b) with b computed after a: merging add into a would run it before b exists.
    b = _Builder()
    a = b.conv("a", "x", 16)
    late = b.conv("b", "x", 16)
    b.eltwise("add", a, late)
    assert _groups(deduce_kernels(b.graph("add"), "tflite-gpu-mali")) == [("a",), ("b",), ("add",)]


def test_no_fusion_after_a_multi_output_op() -> None:
    b = _Builder()
    b.add("split", OpKind.SPLIT, SplitAttrs(1, (8, 8)), ("x",), ((1, 8, 8, 8), (1, 8, 8, 8)))
    b.act("relu", "split:0")
    b.act("relu2", "split:1")
    d = deduce_kernels(b.graph("relu", "relu2"), "tflite-gpu-mali")
    assert _groups(d) == [("split",), ("relu",), ("relu2",)]


def test_dropout_is_eliminated_and_bypassed() -> None:
    b = _Builder()
    drop = b.add("drop", OpKind.DROPOUT, DropoutAttrs(0.2), (b.conv("conv", "x", 16),))
    b.act("relu", drop)
    for profile in ("tflite-gpu-mali", "onnxruntime"):
        d = deduce_kernels(b.graph("relu"), profile)
        assert _groups(d) == [("conv", "relu")] and [n for n, _ in d.eliminated] == ["drop"]


def test_unsupported_op_on_the_gpu_is_reported_by_name() -> None:
    b = _Builder()
    b.add("shuffle", OpKind.CHANNEL_SHUFFLE, ChannelShuffleAttrs(2), ("x",))
    with pytest.raises(UnsupportedOperatorError, match="shuffle"):
        deduce_kernels(b.graph("shuffle"), "tflite-gpu-mali")


# ---------------------------------------------------------------------------------------------------------------
# Profiles, rules, comparison
# ---------------------------------------------------------------------------------------------------------------


def test_profiles_and_rule_tables_cover_every_kind() -> None:
    assert {"torch-eager", "onnxruntime", "onnxruntime-nchwc16", *(f"tflite-gpu-{v}" for v in VENDORS)} <= set(
        profiles()
    )
    for profile, table in (("torch-eager", "kinds"), ("onnxruntime", "kinds"), ("tflite-gpu-mali", "types")):
        rules = load_rules(profile)
        keys = {k.split(":")[0] for k in rules.data[table]} | set(rules.data["eliminated"])
        assert {k.value for k in OpKind} - {"input"} <= keys, profile
    with pytest.raises(InvalidInputError, match="known profiles"):
        load_rules("tflite-gpu-nvidia")


def test_torch_eager_does_not_fold_or_fuse() -> None:
    b = _Builder()
    r = b.act("relu", b.bn("bn", b.conv("conv", "x", 16)))
    b.add("drop", OpKind.DROPOUT, DropoutAttrs(0.5), (r,))
    d = deduce_kernels(b.graph("drop"), "torch-eager")
    assert [(k.nodes, k.kind, k.noop) for k in d.kernels] == [
        (("conv",), "aten::conv2d", False),
        (("bn",), "aten::batch_norm", False),
        (("relu",), "aten::relu", False),
        (("drop",), "aten::dropout", True),
    ]
    assert d.kernel_of("bn") == d.kernels[1] and d.kernel_of("x") is None and not d.eliminated


def test_onnxruntime_fusions_on_a_hand_built_graph() -> None:
    b = _Builder()
    c = b.act("relu6", b.bn("bn", b.conv("conv", "x", 16)), Activation.RELU6)
    s = b.act("sig", b.conv("conv2", c, 16), Activation.SIGMOID)
    b.eltwise("silu", s, "conv2", EltwiseOp.MUL)  # conv2 feeds two ops: no FusedConv; sigmoid * x is QuickGelu
    d = deduce_kernels(b.graph("silu"), "onnxruntime")
    assert [(k.nodes, k.kind) for k in d.kernels] == [
        (("conv", "bn", "relu6"), "com.microsoft.FusedConv"),
        (("conv2",), "Conv"),
        (("sig", "silu"), "com.microsoft.QuickGelu"),
    ]


def test_nchwc_sum_then_activation_and_reorders() -> None:
    # resnet block on an NCHWc tensor: conv -> add(skip) -> relu becomes one NCHWc conv with a Sum input and a
    # Relu activation; the graph input is reordered in once, the output out once.
    b = _Builder((1, 32, 8, 8))
    skip = b.conv("conv0", "x", 32)
    b.act("relu", b.eltwise("add", b.conv("conv1", skip, 32), skip))
    d = deduce_kernels(b.graph("relu"), "onnxruntime-nchwc16")
    kinds = [k.kind.removeprefix("com.microsoft.nchwc.") for k in d.kernels]
    assert kinds == ["ReorderInput", "Conv", "Conv", "ReorderOutput"]
    assert _groups(d) == [(), ("conv0",), ("conv1", "add", "relu"), ()]
    # A skip that is not NCHWc (the graph input itself) keeps the add out of the conv, in NCHW.
    b = _Builder((1, 32, 8, 8))
    b.act("relu", b.eltwise("add", b.conv("conv", "x", 32), "x"))
    d = deduce_kernels(b.graph("relu"), "onnxruntime-nchwc16")
    assert [k.kind.removeprefix("com.microsoft.nchwc.") for k in d.kernels] == [
        "ReorderInput", "Conv", "Add", "Relu", "ReorderOutput"
    ]


def test_compare_kernels_reports_what_differs() -> None:
    deduced = KernelDeduction("g", "p", (Kernel("conv2d+relu", "FusedConv", ("c", "r")), Kernel("add", "Add", ("a",))))
    same = [Kernel("n1", "FusedConv", ("r", "c")), Kernel("n2", "Add", ("a",))]
    assert compare_kernels(deduced, same) == []
    other = [Kernel("n1", "Conv", ("c",)), Kernel("n2", "Relu", ("r",)), Kernel("n3", "Mul", ("a",))]
    whats = Counter(m.what for m in compare_kernels(deduced, other))
    assert whats == {"count": 5, "grouping": 3, "kind": 1}
    assert [m.what for m in compare_kernels(deduced, other, by_nodes=False)] == ["count"] * 5


def test_the_pass_loads_without_torch_or_onnx() -> None:
    import subprocess
    import sys

    code = (
        "import sys, edgeplan.ir.kernels as k; k.deduce_kernels; "
        "assert not {'torch', 'onnx', 'onnxruntime'} & set(sys.modules), sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# ---------------------------------------------------------------------------------------------------------------
# Real runtimes: ONNX Runtime's optimized graph, torch.profiler
# ---------------------------------------------------------------------------------------------------------------

# resnet18 and squeezenet1_0 take ~25 s together (the dynamo export dominates); benchmarks/bench_kernels.py checks
# eight models, mobilenet_v2 and googlenet among them.
ORT_MODELS = ["resnet18", "squeezenet1_0"]
SIZE = 32


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], tuple[Graph, Path]]:
    """Export a torchvision model (cached per module): its torch IR and the ONNX file."""
    pytest.importorskip("onnxruntime")
    from edgeplan.frontends.onnx_export import export_onnx
    from edgeplan.frontends.torch_frontend import graph_from_torch
    from edgeplan.frontends.zoo import build_model

    folder = tmp_path_factory.mktemp("kernels")
    cache: dict[str, tuple[Graph, Path]] = {}

    def get(name: str) -> tuple[Graph, Path]:
        if name not in cache:
            model = build_model(f"torchvision:{name}", (1, 3, SIZE, SIZE))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                path = export_onnx(model.module, model.example_inputs(), folder / f"{name}.onnx")
            cache[name] = (graph_from_torch(model.module, model.example_inputs(), name=name), path)
        return cache[name]

    return get


@pytest.mark.parametrize("name", ORT_MODELS)
def test_onnxruntime_matches_the_optimized_graph(exported: Callable[[str], tuple[Graph, Path]], name: str) -> None:
    from edgeplan.frontends.onnx_frontend import graph_from_onnx

    torch_graph, path = exported(name)
    onnx_graph = graph_from_onnx(path)
    # Node by node on the IR of the ONNX file (same node names as ORT's graph), counts per kind on the torch IR.
    assert check_onnxruntime(onnx_graph, path, "onnxruntime") == []
    assert check_onnxruntime(torch_graph, path, "onnxruntime", by_nodes=False) == []
    deduced = deduce_kernels(torch_graph, "onnxruntime")
    for node in torch_graph.nodes:  # every batch norm is folded into the convolution that feeds it
        if node.kind is OpKind.BATCH_NORM:
            kernel = deduced.kernel_of(node.name)
            assert kernel is not None and kernel.name.startswith("conv2d+batch_norm"), node.name
    block = onnxruntime_nchwc_block_size()
    if block is not None:
        assert check_onnxruntime(onnx_graph, path, f"onnxruntime-nchwc{block}") == []
        assert check_onnxruntime(torch_graph, path, f"onnxruntime-nchwc{block}") == []


def test_resnet18_kernels_in_numbers(exported: Callable[[str], tuple[Graph, Path]]) -> None:
    graph, _ = exported("resnet18")
    counts = deduce_kernels(graph, "onnxruntime").counts()
    # 20 convs: 9 feed a relu alone (FusedConv); 8 feed the residual add and 3 the downsample path stay Conv.
    assert counts == {"com.microsoft.FusedConv": 9, "Conv": 11, "Add": 8, "Relu": 8, "MaxPool": 1,
                      "ReduceMean": 1, "Reshape": 1, "Gemm": 1}
    nchwc = deduce_kernels(graph, "onnxruntime-nchwc16")
    assert sum(k.name == "conv2d+batch_norm+add+relu" for k in nchwc.kernels) == 8  # Sum and Relu in the conv


def test_torch_eager_matches_the_profiler(exported: Callable[[str], tuple[Graph, Path]]) -> None:
    import torch

    from edgeplan.frontends.zoo import build_model

    graph, _ = exported("resnet18")
    model = build_model("torchvision:resnet18", (1, 3, SIZE, SIZE))
    (x,) = model.example_inputs()
    with torch.no_grad(), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        model.module(x)
    top_level = Counter(e.name for e in prof.events() if e.cpu_parent is None)
    assert dict(top_level) == deduce_kernels(graph, "torch-eager").counts()
