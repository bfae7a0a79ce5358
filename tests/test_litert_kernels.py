"""Kernel deduction for LiteRT with the XNNPACK delegate (profile ``litert-xnnpack``, edgeplan.ir.kernels.litert).

One small module, converted once by litert-torch, exercises most rules at once (folds, fusions, explicit pads, the
layout's transposes, lowerings into several operators, XNNPACK's refusals): its deduced kernels must be the file's
operators in order, with the delegate's choices, from the torch IR and from the IR read back from the file. Pure
tests check the rules on hand-built graphs; benchmarks/bench_litert_kernels.py checks the zoo.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from edgeplan.ir import Activation, EltwiseOp, Graph, Node, OpKind, Ref
from edgeplan.ir.checks import conv_output_size
from edgeplan.ir.kernels import Kernel, deduce_kernels, load_rules
from edgeplan.ir.kernels.litert import same_padding
from edgeplan.ir.ops import (
    ActivationAttrs,
    AxisAttrs,
    ConvAttrs,
    EltwiseAttrs,
    FlattenAttrs,
    GlobalPoolAttrs,
    InputAttrs,
    LinearAttrs,
    NormAttrs,
    PoolAttrs,
    PoolMode,
)
from edgeplan.measure.litert_delegate import sequence_mismatches

PROFILE = "litert-xnnpack"

# ---------------------------------------------------------------------------------------------------------------
# Hand-built graphs
# ---------------------------------------------------------------------------------------------------------------


class _Builder:
    """Appends NCHW nodes to a graph, each consuming earlier nodes by name."""

    def __init__(self, shape: tuple[int, ...] = (1, 16, 8, 8)) -> None:
        self.nodes: list[Node] = [Node("x", OpKind.INPUT, InputAttrs(0), (), (), (shape,))]
        self.shapes: dict[str, tuple[int, ...]] = {"x": shape}

    def add(self, name: str, kind: OpKind, attrs: object, inputs: tuple[str, ...],
            out: tuple[int, ...] | None = None, source: str = "") -> str:
        shapes = tuple(self.shapes[i] for i in inputs)
        self.nodes.append(Node(name, kind, attrs, tuple(Ref(i) for i in inputs), shapes,  # type: ignore[arg-type]
                               (out or shapes[0],), source=source))
        self.shapes[name] = out or shapes[0]
        return name

    def conv(self, name: str, src: str, cout: int, k: int = 3, s: int = 1, p: int = 1, g: int = 1) -> str:
        n, cin, h, w = self.shapes[src]
        oh, ow = conv_output_size(h, k, s, 2 * p, 1), conv_output_size(w, k, s, 2 * p, 1)
        return self.add(name, OpKind.CONV2D, ConvAttrs(cin, cout, (k, k), (s, s), (p, p, p, p), (1, 1), g), (src,),
                        (n, cout, oh, ow))

    def pool(self, name: str, src: str, k: int, s: int, p: int = 0, mode: PoolMode = PoolMode.MAX) -> str:
        n, c, h, w = self.shapes[src]
        oh, ow = conv_output_size(h, k, s, 2 * p, 1), conv_output_size(w, k, s, 2 * p, 1)
        return self.add(name, OpKind.POOL2D, PoolAttrs(mode, (k, k), (s, s), (p, p, p, p)), (src,), (n, c, oh, ow))

    def act(self, name: str, src: str, fn: Activation = Activation.RELU) -> str:
        return self.add(name, OpKind.ACTIVATION, ActivationAttrs(fn), (src,))

    def bn(self, name: str, src: str) -> str:
        return self.add(name, OpKind.BATCH_NORM, NormAttrs(self.shapes[src][1]), (src,))

    def graph(self, *outputs: str) -> Graph:
        return Graph("hand", tuple(self.nodes), tuple(Ref(o) for o in outputs)).validate()


def _kinds(graph: Graph) -> list[str]:
    return [k.kind for k in deduce_kernels(graph, PROFILE).kernels]


def test_batch_norm_and_activation_fold_into_the_convolution_before_them() -> None:
    b = _Builder()
    b.act("relu", b.bn("bn", b.conv("conv", "x", 16)))
    d = deduce_kernels(b.graph("relu"), PROFILE)
    assert [(k.kind, k.nodes) for k in d.kernels] == [
        ("xnnpack.TRANSPOSE", ()), ("xnnpack.CONV_2D", ("conv", "bn", "relu")), ("xnnpack.TRANSPOSE", ())
    ]
    assert [k.name for k in d.kernels if not k.nodes] == ["TRANSPOSE:conv", "TRANSPOSE:relu"]


def test_a_batch_norm_after_an_op_used_twice_is_four_operators() -> None:
    b = _Builder()
    c = b.conv("conv", "x", 16)
    bn = b.bn("bn", c)
    b.add("add", OpKind.ELTWISE, EltwiseAttrs(EltwiseOp.ADD), (bn, c))
    kinds = _kinds(b.graph("add"))
    assert kinds[2:6] == ["xnnpack.SUB", "xnnpack.MUL", "xnnpack.MUL", "xnnpack.ADD"]


@pytest.mark.parametrize(("size", "k", "s", "p", "pad"), [
    (8, 3, 1, 1, False),  # SAME: total 2, top 1
    (8, 3, 2, 1, True),  # SAME would pad (0, 1), torch pads (1, 1)
    (7, 3, 2, 1, False),  # odd input: SAME pads (1, 1)
    (8, 1, 2, 0, False),  # VALID
    (8, 7, 2, 3, True),
])
def test_a_convolution_gets_an_explicit_pad_unless_its_padding_is_same(size: int, k: int, s: int, p: int,
                                                                      pad: bool) -> None:
    b = _Builder((1, 8, size, size))
    b.conv("conv", "x", 8, k, s, p)
    d = deduce_kernels(b.graph("conv"), PROFILE)
    assert [k.name for k in d.kernels if k.name.startswith("PAD:")] == (["PAD:conv"] if pad else [])
    assert pad == (p > 0 and same_padding((size, size), (k, k), (s, s), (1, 1)) != (p, p, p, p))


def test_max_pool_padding_is_padv2_with_minus_inf_and_stays_on_the_default_kernels() -> None:
    b = _Builder()
    b.pool("unit", b.pool("pool", "x", 3, 2, 1), 1, 2)
    d = deduce_kernels(b.graph("unit"), PROFILE)
    assert [(k.name, k.kind) for k in d.kernels[1:4]] == [
        ("PADV2:pool", "tflite.PADV2"), ("pool2d", "xnnpack.MAX_POOL_2D"), ("pool2d", "tflite.MAX_POOL_2D")
    ]


def test_xnnpack_concatenates_at_most_five_tensors() -> None:
    for count, kind in ((5, "xnnpack.CONCATENATION"), (6, "tflite.CONCATENATION")):
        b = _Builder()
        parts = tuple(b.conv(f"c{i}", "x", 4, 1, 1, 0) for i in range(count))
        b.add("cat", OpKind.CONCAT, AxisAttrs(1), parts, (1, 4 * count, 8, 8))
        d = deduce_kernels(b.graph("cat"), PROFILE)
        assert d.kernel_of("cat") is not None and d.kernel_of("cat").kind == kind  # type: ignore[union-attr]


def test_the_layout_transposes_a_flattened_map_but_not_a_pooled_one() -> None:
    b = _Builder()
    f = b.add("flatten", OpKind.FLATTEN, FlattenAttrs(1), (b.conv("conv", "x", 4),), (1, 256))
    b.add("fc", OpKind.LINEAR, LinearAttrs(256, 10), (f,), (1, 10))
    assert _kinds(b.graph("fc")) == ["xnnpack.TRANSPOSE", "xnnpack.CONV_2D", "xnnpack.TRANSPOSE", "xnnpack.RESHAPE",
                                     "xnnpack.FULLY_CONNECTED"]
    b = _Builder()
    pooled = b.add("pool", OpKind.GLOBAL_POOL, GlobalPoolAttrs(PoolMode.AVG), (b.conv("conv", "x", 4),), (1, 4, 1, 1))
    b.add("fc", OpKind.LINEAR, LinearAttrs(4, 10), (b.add("flatten", OpKind.FLATTEN, FlattenAttrs(1), (pooled,),
                                                          (1, 4)),), (1, 10))
    d = deduce_kernels(b.graph("fc"), PROFILE)
    assert [(k.kind, k.nodes) for k in d.kernels][1:] == [
        ("xnnpack.CONV_2D", ("conv",)), ("xnnpack.MEAN", ("pool", "flatten")), ("xnnpack.FULLY_CONNECTED", ("fc",))
    ]


def test_a_graph_read_from_a_file_is_one_kernel_per_operator() -> None:
    b = _Builder((1, 8, 8, 8))
    c = b.add("conv_2d_0", OpKind.CONV2D, ConvAttrs(8, 8, (3, 3), padding=(1, 1, 1, 1)), ("x",), source="CONV_2D")
    r = b.add("conv_2d_0.act", OpKind.ACTIVATION, ActivationAttrs(Activation.RELU), (c,), source="CONV_2D:fused")
    b.add("max_pool_2d_1", OpKind.POOL2D, PoolAttrs(PoolMode.MAX, (1, 1), (2, 2)), (r,), (1, 8, 4, 4),
          source="MAX_POOL_2D")
    d = deduce_kernels(b.graph("max_pool_2d_1"), PROFILE)
    assert [(k.kind, k.nodes) for k in d.kernels] == [
        ("xnnpack.CONV_2D", ("conv_2d_0", "conv_2d_0.act")), ("tflite.MAX_POOL_2D", ("max_pool_2d_1",))
    ]


def test_an_average_pool_whose_ceil_mode_adds_no_padding_is_a_plain_pooling() -> None:
    # ResNeSt's downsampling AvgPool2d(2, 2, ceil_mode=True, count_include_pad=False) on even maps
    b = _Builder((1, 8, 8, 8))
    b.add("pool", OpKind.POOL2D, PoolAttrs(PoolMode.AVG, (2, 2), (2, 2), ceil_mode=True, count_include_pad=False),
          ("x",), (1, 8, 4, 4))
    assert _kinds(b.graph("pool")) == ["xnnpack.TRANSPOSE", "xnnpack.AVERAGE_POOL_2D", "xnnpack.TRANSPOSE"]
    b = _Builder((1, 8, 8, 8))  # padding that is not SAME, and not counted: reduce windows
    b.add("pool", OpKind.POOL2D, PoolAttrs(PoolMode.AVG, (3, 3), (2, 2), (1, 1, 1, 1), ceil_mode=True,
                                           count_include_pad=False), ("x",), (1, 8, 5, 5))
    assert "tflite.STABLEHLO_REDUCE_WINDOW" in _kinds(b.graph("pool"))


def test_int8_runs_what_the_quantizer_keeps_float_between_conversions_and_refuses_float_only_kernels() -> None:
    b = _Builder((1, 8, 8, 8))
    c = b.conv("conv", "x", 8)
    excluding = PoolAttrs(PoolMode.AVG, (3, 3), (2, 2), (1, 1, 1, 1), ceil_mode=True, count_include_pad=False)
    b.add("pool_a", OpKind.POOL2D, excluding, (c,), (1, 8, 5, 5))
    b.add("pool_b", OpKind.POOL2D, excluding, (b.act("relu", c),), (1, 8, 5, 5))  # the same windows: one count
    b.add("sum", OpKind.ELTWISE, EltwiseAttrs(EltwiseOp.ADD), ("pool_a", "pool_b"))
    six = b.act("six", c, Activation.RELU6)  # kept float by the quantizer
    b.add("out", OpKind.ELTWISE, EltwiseAttrs(EltwiseOp.MUL), (six, c))
    graph = b.graph("sum", "out")
    kernels = deduce_kernels(graph, "litert-xnnpack-int8").kernels
    assert [(k.nodes[0] if k.nodes else k.name, k.kind) for k in kernels] == [
        ("TRANSPOSE:conv", "xnnpack.TRANSPOSE"), ("conv", "xnnpack.CONV_2D"),
        ("DEQUANTIZE:pool_a", "xnnpack.DEQUANTIZE"),  # one per tensor: RELU6 reads it too
        ("STABLEHLO_REDUCE_WINDOW:pool_a", "tflite.STABLEHLO_REDUCE_WINDOW"),
        ("STABLEHLO_REDUCE_WINDOW.counts:pool_a", "tflite.STABLEHLO_REDUCE_WINDOW"),
        ("QUANTIZE:pool_a", "xnnpack.QUANTIZE"), ("QUANTIZE.counts:pool_a", "xnnpack.QUANTIZE"),
        ("pool_a", "tflite.DIV"),  # no int8 DIV in XNNPACK
        ("relu", "tflite.RELU"), ("DEQUANTIZE:pool_b", "xnnpack.DEQUANTIZE"),
        ("STABLEHLO_REDUCE_WINDOW:pool_b", "tflite.STABLEHLO_REDUCE_WINDOW"),
        ("QUANTIZE:pool_b", "xnnpack.QUANTIZE"), ("pool_b", "tflite.DIV"),  # the counts and their QUANTIZE shared
        ("sum", "xnnpack.ADD"), ("six", "xnnpack.RELU6"), ("QUANTIZE:six", "xnnpack.QUANTIZE"),
        ("out", "xnnpack.MUL"), ("TRANSPOSE:sum", "xnnpack.TRANSPOSE"), ("TRANSPOSE:out", "xnnpack.TRANSPOSE")]
    assert not any("QUANTIZE" in k for k in _kinds(graph)) and "xnnpack.RELU" in _kinds(graph)  # float: none
    from edgeplan.costmodels.opwise.graph_ops import graph_ops

    ops, skipped = graph_ops(graph, "litert-xnnpack-int8")
    converts = [o for o in ops if o.kind.endswith("QUANTIZE")]
    assert not skipped and len(converts) == 6 and {o.lead["op"] for o in converts} == {"convert"}
    assert {o.lead["dtype"] for o in ops if o.kind.endswith(("CONV_2D", ".DIV", ".RELU"))} == {"int8"}
    assert {o.lead["dtype"] for o in ops if o.kind.endswith(("REDUCE_WINDOW", "RELU6"))} == {"float32"}
    # each graph input read by a float operator has its own DEQUANTIZE
    two = _Builder((1, 8, 8, 8))
    two.nodes.append(Node("y", OpKind.INPUT, InputAttrs(1), (), (), ((1, 8, 8, 8),)))
    two.shapes["y"] = (1, 8, 8, 8)
    two.add("sum", OpKind.ELTWISE, EltwiseAttrs(EltwiseOp.ADD), (two.act("a", "x", Activation.ABS),
                                                                 two.act("e", "y", Activation.EXP)))
    kinds = [k.name for k in deduce_kernels(two.graph("sum"), "litert-xnnpack-int8").kernels]
    assert kinds.count("DEQUANTIZE:a") == 1 and kinds.count("DEQUANTIZE:e") == 1
    # a kernel some of whose nodes a zero-folding runtime skips keeps the int8 type of the nodes that run
    from edgeplan.costmodels.opwise.graph_ops import _retyped

    written = [{"op": "conv2d", "dtype": "int8"}, {"op": "activation", "dtype": "int8"}]
    assert [d["dtype"] for d in _retyped(graph, ("conv",), written) or []] == ["int8"]
    assert _retyped(graph, ("conv",), None) is None


def test_a_global_average_pool_of_a_unit_map_is_a_sum() -> None:
    b = _Builder((1, 8, 1, 1))
    b.add("gap", OpKind.GLOBAL_POOL, GlobalPoolAttrs(PoolMode.AVG), ("x",), (1, 8, 1, 1))
    assert "xnnpack.SUM" in _kinds(b.graph("gap"))
    b = _Builder((1, 8, 4, 4))
    b.add("gap", OpKind.GLOBAL_POOL, GlobalPoolAttrs(PoolMode.AVG), ("x",), (1, 8, 1, 1))
    assert "xnnpack.MEAN" in _kinds(b.graph("gap"))


def test_a_nearest_resize_stays_on_the_default_kernels_and_a_bilinear_one_goes_to_xnnpack() -> None:
    from edgeplan.ir.ops import UpsampleAttrs

    for mode, kind in (("nearest", "tflite.RESIZE_NEAREST_NEIGHBOR"), ("bilinear", "xnnpack.RESIZE_BILINEAR")):
        b = _Builder((1, 8, 4, 4))
        b.add("up", OpKind.UPSAMPLE, UpsampleAttrs(mode), ("x",), (1, 8, 8, 8))
        assert kind in _kinds(b.graph("up")), mode


def test_the_rules_name_a_lowering_for_every_kind() -> None:
    rules = load_rules(PROFILE)
    keys = {k.split(":")[0] for k in rules.data["lowering"]} | set(rules.data["eliminated"])
    assert {k.value for k in OpKind} - {"input"} <= keys


def test_sequence_mismatches_say_where_the_lists_differ() -> None:
    deduced = [Kernel("PAD:conv", "xnnpack.PAD", ()), Kernel("conv2d", "xnnpack.CONV_2D", ("conv",))]
    observed = [Kernel("CONV_2D_0", "xnnpack.CONV_2D", ())]
    (m,) = sequence_mismatches(deduced, observed)
    assert m.what == "sequence" and "deduced xnnpack.PAD (PAD:conv), not in the file" in m.message
    assert sequence_mismatches(deduced, deduced) == []


# ---------------------------------------------------------------------------------------------------------------
# A module converted by litert-torch
# ---------------------------------------------------------------------------------------------------------------

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional


class Many(nn.Module):
    """Most rules in one model; the comments say what the converter writes."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.BatchNorm2d(16), nn.ReLU())
        self.pool = nn.MaxPool2d(3, 2, 1)
        self.skip = nn.MaxPool2d(1, 2)
        self.dw = nn.Sequential(nn.Conv2d(16, 16, 3, 1, 1, groups=16), nn.BatchNorm2d(16), nn.ReLU6())
        self.pw = nn.Conv2d(16, 16, 1)
        self.se1, self.se2 = nn.Conv2d(16, 4, 1), nn.Conv2d(4, 16, 1)
        self.bn = nn.BatchNorm2d(32)
        self.branches = nn.ModuleList(nn.Conv2d(32, 8, 1) for _ in range(6))
        self.avg = nn.AvgPool2d(3, 1, 1)
        self.fc = nn.Linear(48, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.pool(self.stem(x))  # TRANSPOSE, PAD, CONV_2D+relu, PADV2(-inf), MAX_POOL_2D
        y = torch.relu(y + self.dw(y))  # DEPTHWISE_CONV_2D+relu6, ADD+relu
        s = F.hardsigmoid(self.se2(torch.relu(self.se1(y.mean((2, 3), keepdim=True)))))  # MEAN, CONV_2D x2, MUL
        y = F.hardswish(self.pw(y * s))  # MUL, CONV_2D, HARD_SWISH
        a, b = torch.chunk(y, 2, 1)  # SLICE, SLICE
        y = self.bn(torch.cat([y, F.silu(a), b], 1))  # LOGISTIC, MUL, CONCATENATION, SUB, MUL, MUL, ADD
        y = torch.cat([branch(y) for branch in self.branches], 1)  # 6 CONV_2D, CONCATENATION of 6
        y = self.avg(self.skip(y))  # MAX_POOL_2D 1x1 stride 2, PAD, AVERAGE_POOL_2D
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(y, 1), 1))  # MEAN, FULLY_CONNECTED


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Graph, Path]:
    from edgeplan.frontends.litert_export import export_tflite, generic_weights
    from edgeplan.frontends.torch_frontend import graph_from_torch

    module = generic_weights(Many().eval())
    x = torch.randn(1, 3, 32, 32)
    path = export_tflite(module, (x,), tmp_path_factory.mktemp("litert") / "many.tflite")
    return graph_from_torch(module, (x,), name="many"), path


def test_the_deduced_kernels_are_the_files_operators(converted: tuple[Graph, Path]) -> None:
    from edgeplan.measure.litert_delegate import check_litert, file_kernels

    graph, path = converted
    assert _kinds(graph) == [k.kind for k in file_kernels(path)]
    assert check_litert(graph, path) == []


def test_the_ir_read_back_from_the_file_deduces_to_its_operators(converted: tuple[Graph, Path]) -> None:
    from edgeplan.frontends.tflite_frontend import graph_from_tflite
    from edgeplan.measure.litert_delegate import check_litert

    _, path = converted
    graph = graph_from_tflite(path)
    assert check_litert(graph, path) == []
    d = deduce_kernels(graph, PROFILE)
    fused = [k for k in d.kernels if any(n.endswith(".act") for n in k.nodes)]
    assert fused and all(k.kind.endswith(("CONV_2D", "ADD")) for k in fused)


def test_what_the_converter_folds_and_xnnpack_refuses(converted: tuple[Graph, Path]) -> None:
    graph, _ = converted
    d = deduce_kernels(graph, PROFILE)
    by_name = {k.nodes[-1] if k.nodes else k.name: k for k in d.kernels}
    assert d.kernel_of("stem.1") is d.kernel_of("stem.0") is d.kernel_of("stem.2")  # batch norm folded, ReLU fused
    assert by_name["PADV2:pool"].kind == "tflite.PADV2" and by_name["skip"].kind == "tflite.MAX_POOL_2D"
    assert by_name["cat_1"].kind == "tflite.CONCATENATION"  # six inputs
    assert [k.kind for k in d.kernels if k.name.endswith(":bn")] == ["xnnpack.SUB", "xnnpack.MUL", "xnnpack.MUL"]
    assert d.kernels[0].name == "TRANSPOSE:stem.0"  # NCHW input to NHWC


def test_selects_and_comparisons_read_from_a_file_stay_on_the_default_kernels(tmp_path: Path) -> None:
    # a masked fill, as a shifted window's attention mask is built: XNNPACK has no SELECT, EQUAL or NOT_EQUAL
    from edgeplan.frontends.litert_export import export_tflite
    from edgeplan.frontends.tflite_frontend import graph_from_tflite, read_tflite
    from edgeplan.measure.litert_delegate import check_litert

    class Masked(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = torch.relu(x)
            return torch.where(x == 0, y, torch.where(y != 0, y, torch.full_like(y, -1.0)))

    path = export_tflite(Masked().eval(), (torch.randn(1, 4, 8, 8),), tmp_path / "masked.tflite")
    types = set(read_tflite(path).op_types())
    assert types & {"SELECT", "SELECT_V2"} and types & {"EQUAL", "NOT_EQUAL"}
    graph = graph_from_tflite(path, opaque=True)
    assert check_litert(graph, path) == []
    kinds = {k.kind for k in deduce_kernels(graph, PROFILE).kernels}
    assert {f"tflite.{t}" for t in types & {"SELECT", "SELECT_V2", "EQUAL", "NOT_EQUAL"}} <= kinds


def test_generic_weights_redraw_single_valued_tensors_only() -> None:
    from edgeplan.frontends.litert_export import generic_weights

    bn = nn.BatchNorm2d(4)
    nn.init.zeros_(bn.weight)
    conv = nn.Conv2d(4, 4, 1)
    before = conv.weight.detach().clone()
    generic_weights(nn.Sequential(conv, bn))
    assert torch.equal(conv.weight, before)  # varied values: untouched
    for t in (bn.weight, bn.bias, bn.running_mean, bn.running_var):
        assert len(set(t.tolist())) == 4 and min(t.tolist()) > 0


# ---------------------------------------------------------------------------------------------------------------
# Average poolings: what litert-torch and the TFLite converter write for each variant
# ---------------------------------------------------------------------------------------------------------------


class Pools(nn.Module):
    """Average poolings of an 8x8 map, then 4x4; the comments say what the converter writes."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 1)
        self.excluding = nn.AvgPool2d(3, 2, 1, count_include_pad=False)  # torch pads (1, 1), SAME (0, 1)
        self.same = nn.AvgPool2d(3, 1, 1, count_include_pad=False)  # SAME padding: AVERAGE_POOL_2D SAME
        self.ceil = nn.AvgPool2d(3, 2, 1, ceil_mode=True)  # PAD, AVERAGE_POOL_2D, MUL by the edge windows' divisors

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        # reduce windows of y and of the ones, DIV; reduce window of relu(y), DIV (the counts are shared)
        pooled = self.excluding(y) + self.excluding(torch.relu(y))
        return self.ceil(self.same(pooled))  # 4x4 to 3x3: ceil mode pads one more row and column


@pytest.fixture(scope="module")
def pools(tmp_path_factory: pytest.TempPathFactory) -> tuple[Graph, Path]:
    from edgeplan.frontends.litert_export import export_tflite
    from edgeplan.frontends.torch_frontend import graph_from_torch

    module = Pools().eval()
    x = torch.randn(1, 4, 8, 8)
    path = export_tflite(module, (x,), tmp_path_factory.mktemp("litert") / "pools.tflite")
    return graph_from_torch(module, (x,), name="pools"), path


def test_average_poolings_are_deduced_as_the_converter_writes_them(pools: tuple[Graph, Path]) -> None:
    from edgeplan.frontends.tflite_frontend import read_tflite
    from edgeplan.measure.litert_delegate import check_litert, file_kernels

    graph, path = pools
    assert read_tflite(path).op_types().count("STABLEHLO_REDUCE_WINDOW") == 3
    assert _kinds(graph) == [k.kind for k in file_kernels(path)]
    assert check_litert(graph, path) == []
    d = deduce_kernels(graph, PROFILE)
    assert [k.kind for k in d.kernels if k.name.endswith(":excluding")][:2] == [
        "tflite.STABLEHLO_REDUCE_WINDOW", "tflite.STABLEHLO_REDUCE_WINDOW"]
    assert d.kernel_of("excluding").kind == "xnnpack.DIV"  # type: ignore[union-attr]
    assert d.kernel_of("same").kind == "xnnpack.AVERAGE_POOL_2D"  # type: ignore[union-attr]
    assert d.kernel_of("ceil").kind == "xnnpack.MUL"  # type: ignore[union-attr]


def test_a_latency_model_gets_sum_poolings_for_the_reduce_windows(pools: tuple[Graph, Path]) -> None:
    from edgeplan.costmodels.opwise.litert_ops import litert_kernels

    graph, _ = pools
    written = {name: dicts for name, _, _, dicts in litert_kernels(graph, deduce_kernels(graph, PROFILE))}
    (total,), (counts,) = written["STABLEHLO_REDUCE_WINDOW:excluding"], written[
        "STABLEHLO_REDUCE_WINDOW.counts:excluding"]
    assert total["attrs"]["mode"] == counts["attrs"]["mode"] == "sum"
    assert (total["input_shapes"], counts["input_shapes"]) == ([[1, 4, 8, 8]], [[1, 1, 8, 8]])


def test_the_reduce_windows_read_back_as_sum_poolings(pools: tuple[Graph, Path]) -> None:
    from edgeplan.frontends.tflite_frontend import graph_from_tflite
    from edgeplan.measure.litert_delegate import check_litert

    _, path = pools
    graph = graph_from_tflite(path)
    assert check_litert(graph, path) == []
    sums = [n for n in graph.nodes if isinstance(n.attrs, PoolAttrs) and n.attrs.mode is PoolMode.SUM]
    assert len(sums) == 3
    assert {(n.attrs.kernel, n.attrs.stride, n.attrs.padding) for n in sums} == {  # type: ignore[attr-defined]
        ((3, 3), (2, 2), (1, 1, 1, 1))}
    counts = [n for n in sums if graph.node(n.inputs[0].node).kind is OpKind.CONSTANT]
    assert [(n.input_shapes[0], n.output_shapes[0]) for n in counts] == [((1, 1, 8, 8), (1, 1, 4, 4))]  # once
    divs = [n for n in graph.nodes if n.kind is OpKind.ELTWISE and n.source.startswith("DIV")]
    assert len(divs) == 2 and all(n.inputs[1].node == counts[0].name for n in divs)


def test_a_transpose_of_equal_sized_axes_is_no_reshape() -> None:
    b = _Builder((1, 8, 8, 8))
    b.conv("conv", "x", 8)
    assert _kinds(b.graph("conv")) == ["xnnpack.TRANSPOSE", "xnnpack.CONV_2D", "xnnpack.TRANSPOSE"]


class SplitBlocks(nn.Module):
    """Channel-split blocks, as the synthetic space's: split, an element-wise op per part, concatenate."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 6, 1)
        self.head = nn.Conv2d(6, 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = torch.split(self.conv(x), [3, 3], 1)
        y = torch.cat([a + a, b * b], 1)
        a, b = torch.split(y, [3, 3], 1)  # the concatenation's inputs: no slice, no concatenation
        y = torch.cat([torch.relu(a), b + b], 1)
        a, b, c = torch.split(y, [2, 2, 2], 1)  # [0:2] slices relu(a), [4:6] b + b, [2:4] the concatenation
        return self.head(torch.cat([a * a, b + b, torch.relu(c)], 1))


def test_slices_of_a_concatenation_read_its_inputs() -> None:
    from edgeplan.frontends.litert_export import export_tflite
    from edgeplan.frontends.torch_frontend import graph_from_torch
    from edgeplan.measure.litert_delegate import check_litert, file_kernels

    module = SplitBlocks().eval()
    x = torch.randn(1, 4, 8, 8)
    with tempfile.TemporaryDirectory() as tmp:
        path = export_tflite(module, (x,), Path(tmp) / "split.tflite")
        graph = graph_from_torch(module, (x,), name="split")
        observed = [k.kind for k in file_kernels(path)]
        assert check_litert(graph, path) == []
    assert _kinds(graph) == observed
    assert observed.count("xnnpack.CONCATENATION") == 2 and observed.count("xnnpack.SLICE") == 5


class UnitMaxPools(nn.Module):
    """1x1 max poolings with a stride of 1: after an average pooling it runs on the NCHW tensor between two
    transposes; after a convolution in NHWC."""

    def __init__(self) -> None:
        super().__init__()
        self.conv, self.mid = nn.Conv2d(4, 8, 1), nn.Conv2d(8, 8, 1)
        self.avg, self.unit, self.again = nn.AvgPool2d(3, 1, 1), nn.MaxPool2d(1, 1), nn.MaxPool2d(1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.again(self.mid(self.unit(self.avg(self.conv(x)))))


def test_a_unit_max_pool_after_an_average_pool_keeps_its_transposes() -> None:
    from edgeplan.frontends.litert_export import export_tflite
    from edgeplan.frontends.torch_frontend import graph_from_torch
    from edgeplan.measure.litert_delegate import file_kernels

    module = UnitMaxPools().eval()
    x = torch.randn(1, 4, 8, 8)
    with tempfile.TemporaryDirectory() as tmp:
        observed = [k.kind for k in file_kernels(export_tflite(module, (x,), Path(tmp) / "unit.tflite"))]
    graph = graph_from_torch(module, (x,), name="unit")
    assert _kinds(graph) == observed == [
        "xnnpack.TRANSPOSE", "xnnpack.CONV_2D", "xnnpack.PAD", "xnnpack.AVERAGE_POOL_2D", "xnnpack.TRANSPOSE",
        "xnnpack.MAX_POOL_2D", "xnnpack.TRANSPOSE", "xnnpack.CONV_2D", "xnnpack.MAX_POOL_2D", "xnnpack.TRANSPOSE"]
    assert deduce_kernels(graph, PROFILE).kernel_of("unit").kind == "xnnpack.MAX_POOL_2D"  # type: ignore[union-attr]
