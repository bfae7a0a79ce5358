"""Per-operation latencies of ONNX Runtime from the session's own profiling, and the ONNX files it runs.

:func:`profile_onnxruntime_ops` enables ORT's profiling: one ``*_kernel_time`` event per node of the *optimized*
graph per run. Each kernel keeps ORT's node name and op type (``com.microsoft.FusedConv``,
``com.microsoft.nchwc.Conv``, ``com.microsoft.QLinearConv``, ``ReorderInput``, ...), its shapes, and the IR nodes of
the float ONNX model it computes, traced through ORT's names
(:func:`edgeplan.measure.kernel_check.onnxruntime_kernel_origins`), so ORT's data trains predictors too.
:func:`ort_files` exports a zoo model (or names a user's file) and quantizes it for the int8 scenarios
(:func:`quantize_onnx`).
"""

from __future__ import annotations

import json
import tempfile
from collections import defaultdict
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from edgeplan.errors import InvalidInputError, MeasurementError
from edgeplan.ir.graph import Graph
from edgeplan.measure.harness import check_thread_count
from edgeplan.measure.op_timing import (
    OpRuns,
    OpTiming,
    ProfileCalls,
    median_iqr,
    timed_ms,
    with_ratios,
)

__all__ = [
    "OrtFiles",
    "onnx_file_digest",
    "onnx_input_names",
    "onnxruntime_kernel_ops",
    "ort_files",
    "ort_session_options",
    "profile_onnxruntime_ops",
    "quantize_onnx",
    "random_feed",
    "zoo_model",
]


def profile_onnxruntime_ops(
    onnx_path: str | Path,
    feed: Mapping[str, Any],
    threads: int,
    *,
    calls: ProfileCalls | None = None,
    origin: tuple[str | Path, Collection[str]] | None = None,
    reference: Callable[[], object] | None = None,
) -> OpRuns:
    """Per-kernel latencies of ONNX Runtime's CPU provider from its own profiler.

    The session is the one :func:`edgeplan.measure.measure_onnxruntime` times (default optimizations, sequential,
    ``threads`` intra-op threads), with profiling on. A second, unprofiled session runs ``calls.plain_per_run`` timed
    calls before each profiled call (see :func:`profile_torch_ops` for why they are interleaved, and for the
    ``reference`` calls before every call).

    Parameters
    ----------
    onnx_path
        The model.
    feed
        Input arrays by name.
    threads
        Intra-op threads.
    calls
        Profiled runs kept, runs before them whose events are dropped, and unprofiled, timed calls before each
        profiled one; default :class:`~edgeplan.measure.op_timing.ProfileCalls` (10, 3, 0).
    origin
        The float model ``onnx_path`` was made from (itself, or the model before int8 quantization) and the names of
        its IR nodes: each kernel's ``nodes`` are then those IR nodes
        (:func:`edgeplan.measure.kernel_check.onnxruntime_kernel_origins`). Without it, the original ONNX nodes
        between a kernel's inputs and outputs when the tensor names show them.
    reference
        A call of the reference model (its own session, same threads).

    Returns
    -------
    OpRuns
        One timing per node of ORT's optimized graph that ran, in execution order, its ``kind`` the optimized
        node's op type qualified by a non-default domain (``com.microsoft.nchwc.Conv``, ``com.microsoft.QLinearConv``);
        the plain calls' times (ms); the reference's times.

    Raises
    ------
    MeasurementError
        If ORT cannot load or run the model, or a node ran a different number of times than the session.
    """
    import onnxruntime as ort

    from edgeplan.measure.kernel_check import (
        onnx_graph,
        onnxruntime_kernel_origins,
        onnxruntime_kernels,
        onnxruntime_kind,
    )

    check_thread_count(threads)
    calls = calls or ProfileCalls()
    runs, warmup, plain_per_run = calls.runs, calls.warmup, calls.plain_per_run
    if runs < 1 or warmup < 0 or plain_per_run < 0:
        raise InvalidInputError(f"profile_onnxruntime_ops: runs must be >= 1, warmup and plain_per_run >= 0, got "
                                f"{runs}, {warmup}, {plain_per_run}")

    plain_ms: list[float] = []
    ref_ms: list[float] = []
    ref_profiled_ms: list[float] = []

    def timed(call: Callable[[], object], into: list[float] | None) -> None:
        ms = timed_ms(call)
        if into is not None:
            into.append(ms)

    with tempfile.TemporaryDirectory() as folder:
        profiled_options = ort_session_options(threads, str(Path(folder) / "ort"))
        profiled_options.optimized_model_filepath = str(Path(folder) / "optimized.onnx")
        feed = dict(feed)
        try:
            session = ort.InferenceSession(str(onnx_path), profiled_options, providers=["CPUExecutionProvider"])
            plain = (ort.InferenceSession(str(onnx_path), ort_session_options(threads),
                                          providers=["CPUExecutionProvider"]) if plain_per_run else None)
            for i in range(warmup + runs):
                kept = i >= warmup
                for _ in range(plain_per_run if plain is not None else 0):
                    if reference is not None:
                        reference()  # untimed first, as :func:`timed_reference_ms`
                        timed(reference, ref_ms if kept else None)
                    timed(lambda: plain.run(None, feed), plain_ms if kept else None)  # type: ignore[union-attr]
                if reference is not None:
                    reference()
                    timed(reference, ref_profiled_ms if kept else None)
                session.run(None, feed)
            trace = json.loads(Path(session.end_profiling()).read_text())
        except Exception as e:  # ORT raises its own exception types
            raise MeasurementError(f"profiling {onnx_path} with onnxruntime failed: {e}") from e
        try:  # the graph ORT ran, for matching its kernels to the original's nodes
            optimized = onnx_graph(profiled_options.optimized_model_filepath)
        except Exception as e:  # onnx raises its own exception types
            raise MeasurementError(f"onnxruntime ran {onnx_path}, but its optimized graph cannot be read: {e}") from e
        unnamed = _name_unnamed_nodes(optimized)
        kinds = {n.name: onnxruntime_kind(n) for n in optimized.graph.node}
        if origin is None:
            covered = {k.name: k.nodes for k in onnxruntime_kernels(onnx_graph(onnx_path), optimized)}
        else:
            covered = onnxruntime_kernel_origins(optimized, origin[0], origin[1])
    ops = _ort_timings(trace, covered, runs, warmup, str(onnx_path), kinds, ref_profiled_ms, unnamed)
    return OpRuns(ops, plain_ms, ref_ms, ref_profiled_ms)


def _name_unnamed_nodes(model: Any) -> dict[str, list[str]]:
    """Name the optimized graph's nodes that ORT left without one (``<op_type>#<k>``, k counting per op type in
    graph order) and return those names by op type. ORT writes a node it made from a function without a name (a
    ``HardSwish`` on a 2-D tensor decomposed into ``HardSigmoid`` and ``Mul``: EfficientViT's classifier head) and
    its profiler calls it after its internal index (``HardSigmoid_216``), which the saved graph does not keep."""
    out: dict[str, list[str]] = defaultdict(list)
    for n in model.graph.node:
        if not n.name:
            n.name = f"{n.op_type}#{len(out[n.op_type])}"
            out[n.op_type].append(n.name)
    return dict(out)


def ort_session_options(threads: int, profile_prefix: str | None = None) -> Any:
    """The session options edgeplan measures ORT with: ``threads`` intra-op threads, sequential, quiet."""
    import onnxruntime as ort

    o = ort.SessionOptions()
    o.intra_op_num_threads = threads
    o.inter_op_num_threads = 1
    o.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    o.log_severity_level = 3
    if profile_prefix:
        o.enable_profiling = True
        o.profile_file_prefix = profile_prefix
    return o


def _ort_timings(trace: Sequence[Mapping[str, Any]], covered: Mapping[str, tuple[str, ...]], runs: int,
                 warmup: int, what: str, kinds: Mapping[str, str] | None = None,
                 reference_ms: Sequence[float] = (), unnamed: Mapping[str, Sequence[str]] | None = None,
                 ) -> list[OpTiming]:
    suffix = "_kernel_time"
    order: list[str] = []
    durations: dict[str, list[float]] = defaultdict(list)
    info: dict[str, Mapping[str, Any]] = {}
    for e in trace:
        if e.get("cat") != "Node" or not str(e.get("name", "")).endswith(suffix):
            continue
        name = str(e["name"])[: -len(suffix)]
        if name not in info:
            order.append(name)
            info[name] = e.get("args", {})
        durations[name].append(float(e["dur"]) / 1000.0)
    # Kernels of nodes the saved graph has without a name (see _name_unnamed_nodes), in execution order, are its
    # unnamed nodes of their op type in graph order; matched only when the counts agree.
    saved_as: dict[str, str] = {}
    strangers: dict[str, list[str]] = defaultdict(list)
    for name in order:
        if name not in covered and name not in (kinds or {}):
            strangers[str(info[name].get("op_name", ""))].append(name)
    for op, names in strangers.items():
        if len((unnamed or {}).get(op, ())) == len(names):
            saved_as.update(zip(names, (unnamed or {})[op], strict=True))
    out = []
    for name in order:
        d = durations[name]
        if len(d) != warmup + runs:
            raise MeasurementError(
                f"{what}: ORT node {name!r} ran {len(d)} times in {warmup + runs} runs; cannot attribute its times"
            )
        med, iqr = median_iqr(d[warmup:])
        fastest = min(d[warmup:])
        args = info[name]
        shapes = {k: args[k] for k in ("input_type_shape", "output_type_shape") if k in args}
        key = saved_as.get(name, name)
        kind = (kinds or {}).get(key) or str(args.get("op_name", ""))
        out.append(with_ratios(OpTiming(name, kind, tuple(covered.get(key, ())), med, iqr, fastest, shapes=shapes),
                                d[warmup:], reference_ms))
    return out


def quantize_onnx(src: str | Path, dst: str | Path, input_shapes: Mapping[str, Sequence[int]], seed: int = 0,
                  calibration_batches: int = 4) -> Path:
    """Quantize ``src`` to int8 the way ONNX Runtime deploys it on CPUs; write ``dst``.

    Static quantization in the QDQ format: uint8 activations with ranges calibrated (min-max) on
    ``calibration_batches`` seeded random inputs, int8 weights per output channel; ORT fuses the QDQ pairs into
    ``QLinearConv`` & co. at load time. The model goes through ORT's pre-processing (shape inference and
    optimization) first, as ORT's documentation recommends. Random calibration data gives other scales than real
    images but the same kernels and shapes, which is what latency depends on.

    Parameters
    ----------
    src, dst
        Float model and where to write the quantized one.
    input_shapes
        Shape of every model input, by name.
    seed
        Seed of the calibration inputs.
    calibration_batches
        Number of calibration inputs.

    Returns
    -------
    Path
        ``dst``.
    """
    import numpy as np
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    rng = np.random.default_rng(seed)
    batches = [{n: rng.standard_normal(tuple(s)).astype(np.float32) for n, s in input_shapes.items()}
               for _ in range(calibration_batches)]

    class _Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self._it = iter(batches)

        def get_next(self) -> dict[str, Any] | None:
            return next(self._it, None)

    dst = Path(dst)
    with tempfile.TemporaryDirectory() as folder:
        pre = Path(folder) / "pre.onnx"
        try:
            quant_pre_process(str(src), str(pre), skip_symbolic_shape=True)
            quantize_static(str(pre), str(dst), _Reader(), quant_format=QuantFormat.QDQ,
                            activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, per_channel=True)
        except Exception as e:  # the quantizer raises many exception types
            raise MeasurementError(f"quantizing {src} to int8 failed: {e}") from e
    return dst


class OrtFiles(NamedTuple):
    path: Path  # what ORT runs
    float_path: Path  # the float file it was made from
    graph: Graph  # the float file's IR
    input_shapes: tuple[tuple[int, ...], ...]  # of the graph inputs, in order


def zoo_model(spec: str, runtime: str) -> Any:
    """The zoo model of ``spec``, or None for an ONNX file of the user's, which only ONNX Runtime runs."""
    from edgeplan.frontends.zoo import build_model, is_onnx_path

    if not is_onnx_path(spec):
        return build_model(spec)
    if runtime == "torch":
        raise InvalidInputError(f"{spec} is an ONNX file: eager PyTorch cannot run it; profile it in an ONNX "
                                "Runtime scenario (ort-fp32-1t, ort-int8-1t, ...)")
    return None


def ort_files(spec: str, model: Any, dtype: str, home: str | Path | None, opaque: bool = False) -> OrtFiles:
    """The ONNX file ORT runs for ``spec`` in ``dtype``, the float file it was made from, the latter's IR (unknown
    operators as opaque nodes with ``opaque``) and its input shapes. ``model`` is the zoo model, or None for an ONNX
    file of the user's (:func:`_named_copy`)."""
    from edgeplan.frontends.onnx_frontend import graph_from_onnx

    float_path = _exported(spec, model, home) if model is not None else _named_copy(spec, home)
    graph = graph_from_onnx(float_path, opaque=opaque)
    shapes = tuple(model.input_shapes) if model is not None else tuple(n.output_shapes[0] for n in graph.inputs)
    path = float_path if dtype == "float32" else _quantized(float_path, shapes)
    return OrtFiles(path, float_path, graph, shapes)


#: Largest user ONNX model (bytes, weights included) traced for ONNX Runtime devices: its named copy is one
#: protobuf file, which cannot exceed 2 GB (weights kept beside it would not follow the copy ORT's tools make).
_INLINE_LIMIT = 1_500_000_000


def onnx_file_digest(spec: str) -> str:
    """A short digest of an ONNX file's bytes: what names its traced copy, and what tells an edited file from
    the one a campaign measured.

    Parameters
    ----------
    spec
        The file's path.

    Returns
    -------
    str
        12 hexadecimal digits of its SHA-1.

    Raises
    ------
    InvalidInputError
        When there is no such file.
    """
    import hashlib

    source = Path(spec)
    if not source.is_file():
        raise InvalidInputError(f"{spec}: no such ONNX file")
    return hashlib.sha1(source.read_bytes()).hexdigest()[:12]


def _named_copy(spec: str, home: str | Path | None) -> Path:
    """A user's ONNX file as ORT's kernels are traced from it: a copy in the edgeplan home (by content) whose
    unnamed nodes, and nodes named like another, get names of their own (``Conv_12``), so that ORT's optimized
    graph and the IR agree on every node. Named after their first output, as the IR would name them, int8
    kernels were traced to their neighbours too: ResNet-18's convolutions predicted 15% slower than from the
    same file with names."""
    import onnx

    from edgeplan.frontends.onnx_frontend.loading import _load as _load_onnx
    from edgeplan.measure.paths import edgeplan_home

    source = Path(spec)
    path = edgeplan_home(home) / "onnx" / f"file-{source.stem[:40]}-{onnx_file_digest(spec)}.onnx"
    if path.is_file():
        return path
    model, _ = _load_onnx(str(source))  # a clear error for a file that is not ONNX or misses its external data
    taken = {n.name for n in model.graph.node} | {t for n in model.graph.node for t in (*n.input, *n.output)}
    seen: set[str] = set()
    for i, node in enumerate(model.graph.node):
        # A name of its own for a node without one (one shared with a tensor confuses the tracing of fused
        # kernels) or with another node's (ORT refuses the model).
        if not node.name or node.name in seen:
            node.name = next(name for k in range(len(taken) + 1)
                             if (name := f"{node.op_type}_{i}" + (f"_{k}" if k else "")) not in taken)
            taken.add(node.name)
        seen.add(node.name)
    size = model.ByteSize()
    if size > _INLINE_LIMIT:
        raise InvalidInputError(f"{spec}: {size / 1e9:.1f} GB with its weights; ONNX Runtime devices take ONNX files "
                                f"up to {_INLINE_LIMIT / 1e9:g} GB (the traced copy is one protobuf file)")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.onnx")
    onnx.save(model, str(tmp))
    tmp.replace(path)
    return path


def _quantized(float_path: Path, shapes: Sequence[Sequence[int]]) -> Path:
    """The int8 (static QDQ) version of ``float_path`` beside it, made once (:func:`quantize_onnx`)."""
    qpath = float_path.with_name(float_path.stem + ".int8.onnx")
    if not qpath.is_file():
        names = onnx_input_names(float_path)
        tmp = qpath.with_suffix(".tmp.onnx")
        quantize_onnx(float_path, tmp, dict(zip(names, shapes, strict=True)))
        tmp.replace(qpath)
    return qpath


def onnx_input_names(path: Path) -> list[str]:
    from edgeplan.measure.kernel_check import onnx_graph

    model = onnx_graph(path)
    inits = {t.name for t in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in inits]


def random_feed(names: Sequence[str], shapes: Sequence[Sequence[int]]) -> dict[str, Any]:
    import numpy as np

    rng = np.random.default_rng(0)
    return {n: rng.standard_normal(tuple(s)).astype(np.float32) for n, s in zip(names, shapes, strict=True)}


def onnxruntime_kernel_ops(
    spec: str, dtype: str, home: str | Path | None = None, opaque: bool = False
) -> tuple[Graph, list[tuple[str, str, tuple[str, ...]]]]:
    """The kernels ONNX Runtime's CPU provider runs for a zoo model or an ONNX file, each traced to IR nodes;
    nothing is timed.

    The model is exported to ONNX (and quantized for ``int8``), both cached under the edgeplan home, and given
    to ORT's graph optimizer at the default level, exactly as :func:`profile_model` runs it; its kernels are
    traced to the nodes of the float ONNX file's IR (:func:`edgeplan.measure.kernel_check.onnxruntime_kernel_origins`).

    Parameters
    ----------
    spec
        A zoo string, or the path of an ONNX file (traced from a named copy, :func:`_named_copy`).
    dtype
        ``float32`` or ``int8``.
    home
        The edgeplan home.
    opaque
        Import the float file with operators edgeplan does not know as opaque nodes instead of raising.

    Returns
    -------
    tuple[Graph, list[tuple[str, str, tuple[str, ...]]]]
        The IR of the float ONNX file, and (ORT node name, kind, IR nodes) per kernel in ORT's order (a node ORT
        saved without a name is called ``<op_type>#<k>``, see :func:`_name_unnamed_nodes`).
    """
    from edgeplan.measure.kernel_check import onnxruntime_kernel_origins, onnxruntime_kind, onnxruntime_optimized_model

    path, float_path, graph, _ = ort_files(spec, zoo_model(spec, "onnxruntime"), dtype, home, opaque)
    optimized = onnxruntime_optimized_model(path)
    _name_unnamed_nodes(optimized)
    origins = onnxruntime_kernel_origins(optimized, float_path, {n.name for n in graph.nodes})
    return graph, [(n.name, onnxruntime_kind(n), origins[n.name]) for n in optimized.graph.node]


def _exported(spec: str, model: Any, home: str | Path | None) -> Path:
    """The zoo model's fp32 ONNX export, cached under the edgeplan home."""
    from edgeplan.frontends.onnx_export import cache_export, onnx_cache_path
    from edgeplan.measure.paths import edgeplan_home

    path = onnx_cache_path(spec, None, edgeplan_home(home))
    if not path.is_file():
        cache_export(model.module, model.example_inputs(), path)
    return path
