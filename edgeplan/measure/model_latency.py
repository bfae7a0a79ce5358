"""A model's end-to-end latency on this machine, measured with the harness and stored with its provenance.

>>> from edgeplan.measure.model_latency import measure_model
>>> m = measure_model("torchvision:resnet18", runtime="torch", threads=2)   # doctest: +SKIP
>>> m.timing.median_ms, m.timing.iqr_rel                                # doctest: +SKIP
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from edgeplan.errors import InvalidInputError
from edgeplan.frontends.onnx_export import cache_export, onnx_cache_path
from edgeplan.frontends.zoo import Shape, is_onnx_path, is_tflite_path, load_graph
from edgeplan.measure import (
    DeviceDescriptor,
    Provenance,
    Store,
    Timing,
    TimingConfig,
    check_thread_count,
    default_store_path,
    describe_device,
    edgeplan_home,
)

__all__ = ["RUNTIME_CHOICES", "ModelMeasurement", "measure_model"]

RUNTIME_CHOICES = ("torch", "onnxruntime", "litert")


@dataclass(frozen=True)
class ModelMeasurement:
    """An end-to-end measurement of a model, as stored.

    Attributes
    ----------
    warnings
        What a user must read before trusting the time (more threads than this process may use cores).
    """

    model: str
    timing: Timing
    device: DeviceDescriptor
    store_path: Path
    record_id: int
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-able, as ``edgeplan measure --json`` prints it: the timing's statistics (null where undefined, e.g.
        the spread of one run), ``device`` (this machine's descriptor with its ``fingerprint``), ``store`` and
        ``id`` and ``warnings``."""
        t, d = self.timing, self.device
        stats = {"latency_ms": t.median_ms, "p25_ms": t.p25_ms, "p75_ms": t.p75_ms, "min_ms": t.min_ms,
                 "max_ms": t.max_ms, "std_ms": t.std_ms, "iqr_rel": t.iqr_rel, "ci_rel": t.ci_rel}
        return {"model": self.model, "runtime": d.runtime, "threads": d.threads,
                **{k: (v if math.isfinite(v) else None) for k, v in stats.items()},  # JSON has no NaN (one run)
                "repeats": t.repeats, "stopped_by": t.stopped_by,
                "device": {**d.to_dict(), "fingerprint": d.fingerprint}, "store": str(self.store_path),
                "id": self.record_id, "warnings": list(self.warnings)}


def _onnx_file(spec: str, input_shape: Shape | None, home: Path) -> tuple[Path, tuple[Shape, ...]]:
    from edgeplan.frontends.zoo import build_model

    if is_onnx_path(spec):
        if input_shape is not None:
            raise InvalidInputError(f"{spec}: an ONNX file has its own input shapes; drop --input-shape")
        return Path(spec), ()
    model = build_model(spec, input_shape)
    path = onnx_cache_path(spec, input_shape, home)
    if not path.is_file():
        cache_export(model.module, model.example_inputs(), path)
    return path, model.input_shapes


def measure_model(
    spec: str,
    runtime: str = "torch",
    threads: int = 1,
    config: TimingConfig | None = None,
    *,
    input_shape: Shape | None = None,
    home: str | Path | None = None,
    command: str | None = None,
    dtype: str = "float32",
) -> ModelMeasurement:
    """Measure the end-to-end latency of a zoo model, an ONNX file or a LiteRT file on this machine and store it.

    Parameters
    ----------
    spec
        A zoo string, an ``.onnx`` path (onnxruntime) or a ``.tflite`` path (litert).
    runtime
        ``"torch"`` (eager PyTorch), ``"onnxruntime"`` (the model exported to ONNX, run on the CPU provider) or
        ``"litert"`` (the model converted with litert-torch, run by LiteRT with its XNNPACK delegate).
    dtype
        ``"float32"``, or ``"int8"`` with litert: the zoo model quantized after training (a ``.tflite`` file runs
        as it is).
    threads
        Intra-op threads (set and recorded).
    config
        Harness settings (default: adaptive stop at +-2% CI of the median, 10 s cap).
    input_shape
        Overrides the default input shape.
    home
        The edgeplan home (Store location); default ``$EDGEPLAN_HOME`` or the user cache.
    command
        The command line recorded as provenance (default: this process's argv).
    """
    if runtime not in RUNTIME_CHOICES:
        raise InvalidInputError(f"unknown runtime {runtime!r}; use one of {', '.join(RUNTIME_CHOICES)}")
    check_thread_count(threads)
    _check_dtype(spec, runtime, dtype)
    if config is not None and not isinstance(config, TimingConfig):
        raise InvalidInputError(f"config must be a TimingConfig (e.g. TimingConfig(max_time_s=2.0)), got "
                                f"{type(config).__name__}")
    config = config or TimingConfig()
    home_dir = edgeplan_home(home)
    store = Store.open(default_store_path(home_dir))  # fail early, before minutes of measuring
    try:
        timing = _time(spec, (runtime, dtype), threads, config, input_shape, home_dir)
        device = describe_device(runtime, threads, dtype)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%f")
        record = store.add_measurement(
            timing, device, model=spec, task_key=f"adhoc|{spec}|{runtime}|{threads}|{stamp}",
            extra={"input_shape": list(input_shape) if input_shape else None, **_runtime_extra(runtime)},
            provenance=Provenance(command=command if command is not None else " ".join(sys.argv)),
        )
        return ModelMeasurement(spec, timing, device, store.path, record)
    finally:
        store.close()


def _check_dtype(spec: str, runtime: str, dtype: str) -> None:
    from edgeplan.frontends.litert_export import TFLITE_DTYPES

    if dtype not in TFLITE_DTYPES:
        raise InvalidInputError(f"unknown dtype {dtype!r}; use one of {', '.join(TFLITE_DTYPES)}")
    if dtype != "float32" and runtime != "litert":
        raise InvalidInputError(f"dtype {dtype} is measured with the litert runtime; use --runtime litert")
    if is_tflite_path(spec) and runtime != "litert":
        raise InvalidInputError(f"{spec} is a LiteRT file: measure it with --runtime litert")
    if is_tflite_path(spec) and dtype != "float32":
        raise InvalidInputError(f"{spec} is a LiteRT file and runs as it was converted; drop --dtype")


def _runtime_extra(runtime: str) -> dict[str, Any]:
    """What the Store keeps beside a LiteRT time: the delegate and the converter's version."""
    if runtime != "litert":
        return {}
    import importlib.metadata

    return {"delegate": "xnnpack", "converter": f"litert-torch {importlib.metadata.version('litert-torch')}"}


def _time(spec: str, how: tuple[str, str], threads: int, config: TimingConfig, input_shape: Shape | None,
          home: Path) -> Timing:
    from edgeplan.measure import measure_onnxruntime, measure_torch

    runtime, dtype = how
    if runtime == "litert":
        from edgeplan.frontends.litert_export import cache_tflite
        from edgeplan.measure.runners import measure_litert

        if is_tflite_path(spec):
            if input_shape is not None:
                raise InvalidInputError(f"{spec}: a LiteRT file has its own input shapes; drop --input-shape")
            return measure_litert(spec, threads, config)
        if is_onnx_path(spec):
            raise InvalidInputError(f"{spec} is an ONNX file: measure it with --runtime onnxruntime")
        return measure_litert(cache_tflite(spec, input_shape, dtype, home), threads, config)
    if runtime == "onnxruntime":
        path, shapes = _onnx_file(spec, input_shape, home)
        inputs = list(shapes) if shapes else _onnx_input_shapes(path)
        return measure_onnxruntime(path, inputs, threads, config)
    if is_onnx_path(spec):
        raise InvalidInputError(f"{spec} is an ONNX file: measure it with --runtime onnxruntime")
    from edgeplan.frontends.zoo import build_model

    model = build_model(spec, input_shape)
    return measure_torch(model.module, model.example_inputs(), threads, config, name=spec)


def _onnx_input_shapes(path: Path) -> list[Shape]:
    graph = load_graph(str(path))
    return [n.output_shapes[0] for n in graph.inputs]
