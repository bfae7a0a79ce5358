"""LiteRT: conversion (litert-torch, cached), the .tflite reader and IR mapping, delegate partitions, measurement."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from torch import nn

from edgeplan.costmodels.opwise.graph_ops import graph_ops
from edgeplan.costmodels.opwise.profiles import load_device_model
from edgeplan.errors import InvalidInputError, UnsupportedOperatorError
from edgeplan.frontends.litert_export import export_tflite
from edgeplan.frontends.tflite_frontend import graph_from_tflite, read_tflite
from edgeplan.frontends.torch_frontend import graph_from_torch
from edgeplan.ir.kernels import deduce_kernels
from edgeplan.ir.ops import ConvertAttrs, DType, OpKind
from edgeplan.measure import TimingConfig
from edgeplan.measure.litert_delegate import check_litert, delegated_ops
from edgeplan.measure.runners import measure_litert


class Small(nn.Module):
    """Conv+BN+ReLU (stride 2, explicit padding), 1x1 max pool with stride (not taken by XNNPACK), a residual
    add, a depthwise conv, global average pooling and a linear layer."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.BatchNorm2d(8), nn.ReLU())
        self.pool = nn.MaxPool2d(1, 2)
        self.dw = nn.Conv2d(8, 8, 3, 1, 1, groups=8)
        self.fc = nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.pool(self.stem(x))
        y = torch.relu(y + self.dw(y))
        return self.fc(y.mean((2, 3)))


@pytest.fixture(scope="module")
def small_tflite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("litert") / "small.tflite"
    return export_tflite(Small().eval(), (torch.randn(1, 3, 32, 32),), path)


def test_the_converted_model_reads_back_with_the_operators_the_converter_emits(small_tflite: Path) -> None:
    model = read_tflite(small_tflite)
    types = model.op_types()
    assert types.count("CONV_2D") == 1 and types.count("DEPTHWISE_CONV_2D") == 1
    assert "MAX_POOL_2D" in types and "FULLY_CONNECTED" in types and "ADD" in types
    assert "RELU" not in types  # fused into the convolution and the addition
    conv = next(o for o in model.ops if o.type == "CONV_2D")
    assert conv.options["fusedActivationFunction"] == 1  # RELU, batch norm folded into the weights


def test_the_ir_of_a_tflite_model_has_the_torch_models_work(small_tflite: Path) -> None:
    graph = graph_from_tflite(small_tflite)
    torch_graph = graph_from_torch(Small().eval(), (torch.randn(1, 3, 32, 32),))
    assert graph.totals().macs == torch_graph.totals().macs
    conv = next(n for n in graph.nodes if n.kind is OpKind.CONV2D and not n.attrs.depthwise)  # type: ignore[union-attr]
    assert conv.input_shapes[0] == (1, 3, 32, 32) and conv.output_shapes[0] == (1, 8, 16, 16)  # NHWC as NCHW
    torch_conv = next(n for n in torch_graph.nodes if n.kind is OpKind.CONV2D)
    assert conv.attrs == torch_conv.attrs  # the zero PAD before it is its padding again, as in PyTorch
    assert not any(n.kind is OpKind.PAD for n in graph.nodes)
    assert any(n.name.endswith(".act") for n in graph.nodes)  # the fused ReLU is its own node again


def test_xnnpack_leaves_a_strided_one_by_one_max_pool_to_the_default_kernels(small_tflite: Path) -> None:
    model = read_tflite(small_tflite)
    owner = delegated_ops(small_tflite)
    pool = next(o.index for o in model.ops if o.type == "MAX_POOL_2D")
    assert pool not in owner
    assert all(o.index in owner for o in model.ops if o.type in ("CONV_2D", "FULLY_CONNECTED"))
    assert len(set(owner.values())) == 2  # the pool cuts the model into two delegate partitions


def test_litert_measures_a_tflite_file(small_tflite: Path) -> None:
    timing = measure_litert(small_tflite, 1, TimingConfig(warmup=1, min_repeats=3, max_repeats=3))
    assert timing.repeats == 3 and timing.median_ms > 0


def test_a_file_that_is_not_tflite_is_refused_by_name(tmp_path: Path) -> None:
    bad = tmp_path / "x.tflite"
    bad.write_bytes(b"not a flatbuffer at all")
    with pytest.raises(InvalidInputError, match="not a LiteRT"):
        read_tflite(bad)
    with pytest.raises(InvalidInputError, match="does not exist"):
        read_tflite(tmp_path / "missing.tflite")


def test_an_unknown_tflite_operator_is_named_or_kept_opaque(tmp_path: Path) -> None:
    class Cumsum(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.cumsum(x, 1)

    path = export_tflite(Cumsum().eval(), (torch.randn(1, 8),), tmp_path / "cumsum.tflite")
    with pytest.raises(UnsupportedOperatorError, match="CUMSUM"):
        graph_from_tflite(path)
    graph = graph_from_tflite(path, opaque=True)
    assert [n.attrs.operator for n in graph.opaque_nodes] == ["CUMSUM"]  # type: ignore[union-attr]


def test_measure_cli_times_a_tflite_file_and_refuses_mismatched_runtimes(
        small_tflite: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from edgeplan.cli.main import main

    home = ["--home", str(tmp_path)]
    assert main([*home, "measure", str(small_tflite), "--runtime", "litert", "--repeats", "3", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["runtime"] == "litert" and data["latency_ms"] > 0
    assert data["device"]["runtime_version"].startswith("ai-edge-litert")
    for args, message in (([str(small_tflite)], "--runtime litert"),
                          (["synthetic:0", "--dtype", "int8"], "litert runtime"),
                          ([str(small_tflite), "--runtime", "litert", "--dtype", "int8"], "drop --dtype")):
        assert main([*home, "measure", *args]) != 0
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, err


def test_int8_conversion_quantizes_weights_and_activations(small_tflite: Path, tmp_path: Path) -> None:
    path = export_tflite(Small().eval(), (torch.randn(1, 3, 32, 32),), tmp_path / "small-int8.tflite", "int8")
    model = read_tflite(path)
    conv = next(o for o in model.ops if o.type == "CONV_2D")
    assert model.tensors[conv.inputs[0]].dtype == "INT8" and model.tensors[conv.inputs[1]].dtype == "INT8"
    assert graph_from_tflite(path).totals().macs == graph_from_tflite(small_tflite).totals().macs
    with pytest.raises(InvalidInputError, match="unknown dtype"):
        export_tflite(Small(), (torch.randn(1, 3, 32, 32),), tmp_path / "x.tflite", "int4")


def test_each_operator_runs_alone_with_its_weights_and_fused_activation(small_tflite: Path, tmp_path: Path) -> None:
    from edgeplan.measure.litert_op_profile import operator_models

    model = read_tflite(small_tflite)
    pieces = operator_models(small_tflite)
    assert len(pieces) == len(model.ops)
    conv = next(o for o in model.ops if o.type == "CONV_2D")
    alone = tmp_path / "conv.tflite"
    alone.write_bytes(pieces[conv.index])
    single = read_tflite(alone)
    assert single.op_types() == ["CONV_2D"] and single.ops[0].options == conv.options
    assert [single.tensors[t].shape for t in single.inputs] == [model.tensors[conv.inputs[0]].shape]
    assert single.tensors[single.ops[0].inputs[1]].constant  # the weights came along
    assert measure_litert(alone, 1, TimingConfig(warmup=1, min_repeats=2, max_repeats=2)).median_ms > 0


def test_an_operator_that_calls_a_subgraph_runs_alone_with_it(tmp_path: Path) -> None:
    from edgeplan.measure.litert_op_profile import profile_litert_ops
    from edgeplan.measure.op_timing import ProfileCalls

    path = export_tflite(nn.AvgPool2d(3, 2, 1, count_include_pad=False).eval(), (torch.randn(1, 4, 8, 8),),
                         tmp_path / "pool.tflite")
    assert "STABLEHLO_REDUCE_WINDOW" in read_tflite(path).op_types()  # its body, an ADD, is another subgraph
    profile = profile_litert_ops(path, 1, ProfileCalls(runs=2, warmup=1, plain_per_run=1))
    windows = [o for o in profile.runs.ops if o.kind == "tflite.STABLEHLO_REDUCE_WINDOW"]
    assert len(windows) == 2 and all(o.median_ms > 0 for o in windows)


def test_int8_keeps_a_reduce_window_float_between_dequantize_and_quantize(tmp_path: Path) -> None:
    # the quantizer calibrates only the main subgraph: the window's body (an ADD) has no ranges and stays float
    module = nn.Sequential(nn.Conv2d(3, 8, 3), nn.AvgPool2d(3, 2, 1, count_include_pad=False), nn.Conv2d(8, 8, 1))
    path = export_tflite(module.eval(), (torch.randn(1, 3, 16, 16),), tmp_path / "pool-int8.tflite", "int8")
    model = read_tflite(path)
    windows = [o for o in model.ops if o.type == "STABLEHLO_REDUCE_WINDOW"]
    convs = [o for o in model.ops if o.type == "CONV_2D"]
    assert windows and all(model.tensors[w.inputs[0]].dtype == "FLOAT32" for w in windows)
    assert all(model.tensors[c.inputs[1]].dtype == "INT8" for c in convs)
    assert {"DEQUANTIZE", "QUANTIZE"} <= set(model.op_types())
    assert measure_litert(path, 1, TimingConfig(warmup=1, min_repeats=2, max_repeats=2)).median_ms > 0
    # read as the IR, the conversions are convert nodes from the input's type to the output's, priced per element
    graph = graph_from_tflite(path)
    converts = [n for n in graph.nodes if n.kind is OpKind.CONVERT]
    assert {(n.source, n.attrs, n.dtype) for n in converts} >= {
        ("DEQUANTIZE", ConvertAttrs(DType.INT8), DType.FLOAT32), ("QUANTIZE", ConvertAttrs(DType.FLOAT32), DType.INT8)}
    assert all(n.flops == math.prod(n.output_shapes[0]) for n in converts)
    kinds = {k.kind for k in deduce_kernels(graph, "litert-xnnpack").kernels}
    assert {"xnnpack.DEQUANTIZE", "xnnpack.QUANTIZE"} <= kinds
    # the int8 rules deduce the same operators from the torch graph, the int8 DIV on the default kernels
    torch_graph = graph_from_torch(module, (torch.randn(1, 3, 16, 16),))
    assert check_litert(torch_graph, path, profile="litert-xnnpack-int8") == []
    assert "tflite.DIV" in {k.kind for k in deduce_kernels(torch_graph, "litert-xnnpack-int8").kernels}
    assert check_litert(torch_graph, path)  # the float rules do not
    ops, skipped = graph_ops(graph, "litert-xnnpack-int8")
    from_torch, skipped_torch = graph_ops(torch_graph, "litert-xnnpack-int8")  # featurized as the file's IR has them
    assert not skipped and not skipped_torch
    assert [(o.key, o.category, o.vector) for o in from_torch] == [(o.key, o.category, o.vector) for o in ops]
    priced = load_device_model("litert-int8-1t", "gbdt").predict_ops(ops).ops
    assert all(o.ms is not None and o.ms > 0 for o in priced if "QUANTIZE" in o.kind)


def test_a_zero_pad_runs_with_the_convolution_xnnpack_fuses_it_into(small_tflite: Path) -> None:
    from edgeplan.measure.litert_op_profile import profile_litert_ops, xnnpack_groups
    from edgeplan.measure.op_timing import ProfileCalls

    model = read_tflite(small_tflite)
    groups = xnnpack_groups(model, delegated_ops(small_tflite))
    pad = next(o.index for o in model.ops if o.type == "PAD")
    assert [pad, pad + 1] in groups and model.ops[pad + 1].type == "CONV_2D"
    assert sorted(i for g in groups for i in g) == [o.index for o in model.ops]
    profile = profile_litert_ops(small_tflite, 1, ProfileCalls(runs=3, warmup=1, plain_per_run=1))
    kernels = {o.kernel: o for o in profile.runs.ops}
    conv = kernels[f"pad_{pad}+conv_2d_{pad + 1}"]
    assert conv.kind == "xnnpack.CONV_2D" and conv.nodes == (f"conv_2d_{pad + 1}", f"conv_2d_{pad + 1}.act")
    assert next(o for o in profile.runs.ops if "max_pool" in o.kernel).kind == "tflite.MAX_POOL_2D"
    assert len(profile.runs.plain_ms) == 3 and profile.op_sum_ms > 0 and profile.end_to_end_ms > 0


def test_each_operator_is_timed_on_its_second_run_back_to_back(small_tflite: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # as benchmark_model times a kernel: its inputs, weights and the delegate's state warm from the run before
    import edgeplan.measure.runners as runners
    from edgeplan.measure.litert_op_profile import profile_litert_ops
    from edgeplan.measure.op_timing import ProfileCalls

    log: list[tuple[int, str]] = []
    made = runners.litert_interpreter

    class Logged:
        def __init__(self, model: object, threads: int) -> None:
            self.inner, self.id = made(model, threads), len(created)
            created.append(self)

        def invoke(self) -> None:
            log.append((self.id, "invoke"))
            self.inner.invoke()

        def __getattr__(self, name: str) -> object:
            return getattr(self.inner, name)

    created: list[Logged] = []
    monkeypatch.setattr(runners, "litert_interpreter", Logged)
    real_counter = __import__("time").perf_counter_ns

    def clock() -> int:
        log.append((-1, "clock"))
        return real_counter()

    monkeypatch.setattr("edgeplan.measure.litert_op_profile.time.perf_counter_ns", clock)
    profile = profile_litert_ops(small_tflite, 1, ProfileCalls(runs=2, warmup=1, plain_per_run=1))
    ops = range(len(created) - len(profile.runs.ops), len(created))  # made last, after the whole model
    calls = [i for i, what in log if what == "invoke"]
    assert all(calls.count(k) == 1 + 2 * 3 for k in ops)  # the check at load, then two runs in each of 3 rounds
    for k in ops:  # in the timed rounds, the clock starts after the first of each pair and stops after the second
        runs = [j for j, (i, _) in enumerate(log) if i == k][3:]  # after the check at load and the warmup round
        for first, second in zip(runs[::2], runs[1::2], strict=True):
            assert log[first + 1] == (-1, "clock") and second == first + 2 and log[second + 1] == (-1, "clock")


def test_a_litert_scenario_profiles_a_model_per_operator_with_its_ir_nodes(small_tflite: Path) -> None:
    from edgeplan.measure.op_profile import profile_model
    from edgeplan.measure.scenarios import SCENARIOS

    profile = profile_model(str(small_tflite), SCENARIOS["litert-fp32-1t"], runs=3, plain_per_run=1)
    assert profile.kernel_profile == "litert-xnnpack" and profile.end_to_end.repeats == 3
    assert {o.kind.split(".")[0] for o in profile.ops} == {"xnnpack", "tflite"}
    assert all(n in profile.nodes for o in profile.ops for n in o.nodes)  # features come from these
    assert profile.nodes["conv_2d_2"]["attrs"]["padding"] == [1, 1, 1, 1]


def test_litert_kernels_run_a_zero_pad_inside_its_convolution_and_give_inserted_operators_nodes() -> None:
    from edgeplan.costmodels.opwise.litert_ops import litert_kernels
    from edgeplan.ir.kernels import Kernel, KernelDeduction

    graph = graph_from_torch(Small().eval(), (torch.randn(1, 3, 32, 32),))
    conv = next(n for n in graph.nodes if n.kind is OpKind.CONV2D)
    pool = next(n for n in graph.nodes if n.kind is OpKind.POOL2D)
    x = graph.inputs[0].name
    deduction = KernelDeduction(graph.name, "litert-xnnpack", (
        Kernel(f"TRANSPOSE:{x}", "xnnpack.TRANSPOSE", ()),
        Kernel(f"PAD:{conv.name}", "xnnpack.PAD", ()),
        Kernel("conv2d", "xnnpack.CONV_2D", (conv.name,)),
        Kernel(f"PADV2:{pool.name}", "tflite.PADV2", ()),
        Kernel("pool2d", "tflite.MAX_POOL_2D", (pool.name,)),
    ))
    kernels = litert_kernels(graph, deduction)
    assert [k[1] for k in kernels] == ["xnnpack.TRANSPOSE", "xnnpack.CONV_2D", "tflite.PADV2", "tflite.MAX_POOL_2D"]
    written = {k[0]: k[3] for k in kernels}
    assert written[f"TRANSPOSE:{x}"][0]["input_shapes"] == [[1, 3, 32, 32]]
    assert written[f"PADV2:{pool.name}"][0]["op"] == "pad"
    assert written["pool2d"][0]["attrs"]["padding"] == [0, 0, 0, 0]


class Branchy(nn.Module):
    """Conv+BN+ReLU, a padded max pool (PADV2 in the file), a channel split whose pieces are added back together,
    a padded average pool (PAD in the file) and a linear layer."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU())
        self.max = nn.MaxPool2d(3, 2, 1)
        self.avg = nn.AvgPool2d(3, 1, 1)
        self.fc = nn.Linear(4, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = torch.split(self.max(self.stem(x)), 4, dim=1)
        return self.fc(self.avg(torch.relu(a) + b).mean((2, 3)))


def test_deduced_kernels_are_featurized_as_the_files_ir_has_them(tmp_path: Path) -> None:
    from edgeplan.costmodels.opwise.graph_ops import graph_ops

    module, x = Branchy().eval(), torch.randn(1, 3, 32, 32)
    path = tmp_path / "branchy.tflite"
    export_tflite(module, (x,), path)
    on_torch, skipped_torch = graph_ops(graph_from_torch(module, (x,)), "litert-xnnpack")
    on_file, skipped_file = graph_ops(graph_from_tflite(path), "litert-xnnpack")
    assert not skipped_torch and not skipped_file
    assert [(o.key, o.category, o.vector) for o in on_torch] == [(o.key, o.category, o.vector) for o in on_file]


@pytest.mark.parametrize("device", ["litert-fp32-1t", "litert-fp32-2t", "litert-int8-1t"])
def test_every_litert_scenario_ships_a_profile_that_prices_every_operator(device: str) -> None:
    import edgeplan
    from edgeplan.costmodels.opwise.profiles import shipped_devices

    assert device in shipped_devices()
    p = edgeplan.predict("synthetic:3", device).prediction
    assert p.latency_ms > 0 and not p.unpredicted
    assert p.ops and all(o.ms is not None and o.ms > 0 for o in p.ops)


class Rescaled(nn.Module):
    """A convolution scaled by its own channel means, which the converter writes as a (1, C) vector broadcast
    against the NHWC convolution."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        return y * y.mean((2, 3), keepdim=True).sigmoid()


def test_an_operand_that_broadcasts_against_an_nhwc_tensor_reads_as_its_nchw_broadcast(tmp_path: Path) -> None:
    module, x = Rescaled().eval(), torch.randn(1, 3, 8, 8)
    path = export_tflite(module, (x,), tmp_path / "rescaled.tflite")
    graph = graph_from_tflite(path)  # validates: the (1, 8) operand broadcasts as (1, 8, 1, 1)
    views = [n for n in graph.nodes if n.source.endswith(":broadcast")]
    assert [v.output_shapes[0] for v in views] == [(1, 8, 1, 1)]
    assert check_litert(graph, path) == [] and check_litert(graph_from_torch(module, (x,)), path) == []
    mul = next(k for k in deduce_kernels(graph, "litert-xnnpack").kernels if views[0].name in k.nodes)
    assert mul.kind == "xnnpack.MUL" and graph.node(mul.nodes[0]).kind is OpKind.ELTWISE  # the product leads


class Normed(nn.Module):
    """A linear layer then a LayerNorm, whose variance the converter writes as a ``SQUARED_DIFFERENCE``."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.norm = nn.LayerNorm(16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.fc(x))


def test_a_layer_norms_squared_difference_reads_as_a_subtraction_and_its_square(tmp_path: Path) -> None:
    module, x = Normed().eval(), torch.randn(1, 4, 16)
    path = export_tflite(module, (x,), tmp_path / "normed.tflite")
    assert "SQUARED_DIFFERENCE" in read_tflite(path).op_types()
    graph = graph_from_tflite(path)
    squares = [n for n in graph.nodes if n.source == "SQUARED_DIFFERENCE:fused"]
    assert len(squares) == 1 and squares[0].attrs.fn.value == "pow" and squares[0].attrs.alpha == 2.0
    sub = graph.node(squares[0].inputs[0].node)
    assert sub.kind is OpKind.ELTWISE and sub.source == "SQUARED_DIFFERENCE"
    assert check_litert(graph, path) == []  # one operator, the square joined to it
    kernel = next(k for k in deduce_kernels(graph, "litert-xnnpack").kernels if sub.name in k.nodes)
    assert kernel.kind == "xnnpack.SQUARED_DIFFERENCE" and squares[0].name in kernel.nodes
    import edgeplan

    p = edgeplan.predict(str(path), "litert-fp32-1t").prediction  # no operator left unpriced
    assert not p.unpredicted and all(o.ms is not None and o.ms > 0 for o in p.ops)


class PositionBias(nn.Module):
    """Swin V2's continuous position bias: an MLP over a constant table of coordinates, added to the input. The
    converter folds the first layer's product but not its bias: an ADD of two constants."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("coords", torch.randn(1, 15, 15, 2))
        self.mlp = nn.Sequential(nn.Linear(2, 64), nn.ReLU(), nn.Linear(64, 3, bias=False))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + 16 * torch.sigmoid(self.mlp(self.coords).view(-1, 3)[:64].T.reshape(3, 8, 8))


def test_an_operator_of_two_constants_reads_the_first_as_a_constant_node(tmp_path: Path) -> None:
    from edgeplan.frontends.litert_export import generic_weights

    path = export_tflite(generic_weights(PositionBias().eval()), (torch.randn(2, 3, 8, 8),), tmp_path / "bias.tflite")
    model = read_tflite(path)
    assert all(model.tensors[t].constant for t in model.ops[0].inputs)  # the bias of the folded product
    graph = graph_from_tflite(path)
    add = graph.node("add_0")
    assert graph.node(add.inputs[0].node).kind is OpKind.CONSTANT and add.attrs.const_shape is not None
    assert check_litert(graph, path) == []
