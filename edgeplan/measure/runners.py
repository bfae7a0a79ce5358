"""End-to-end latency of a real model: a torch ``nn.Module``, an ONNX file run by onnxruntime, or a ``.tflite``
file run by LiteRT with its XNNPACK CPU delegate.

Each runner times one inference call with :func:`~edgeplan.measure.harness.time_callable`, with the thread
count set explicitly. torch, numpy, onnxruntime and LiteRT are imported inside the functions.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from edgeplan.errors import InvalidInputError, MeasurementError
from edgeplan.measure.harness import Timing, TimingConfig, check_thread_count, time_callable, use_threads

if TYPE_CHECKING:
    import numpy as np
    import torch

__all__ = ["OnnxInput", "litert_interpreter", "measure_litert", "measure_onnxruntime", "measure_torch", "torch_device"]

#: One ONNX model input: an array, or a shape for which a seeded random array of the input's type is made.
OnnxInput = Union["np.ndarray[Any, Any]", Sequence[int]]

_ORT_DTYPES = {
    "tensor(float)": "float32",
    "tensor(float16)": "float16",
    "tensor(double)": "float64",
    "tensor(int64)": "int64",
    "tensor(int32)": "int32",
    "tensor(int8)": "int8",
    "tensor(uint8)": "uint8",
    "tensor(bool)": "bool",
}


@contextmanager
def _failures_as_measurement_error(what: str, hint: str) -> Iterator[None]:
    """Turn any failure of the model being run into a MeasurementError that names it."""
    try:
        yield
    except (MeasurementError, InvalidInputError):
        raise
    except Exception as e:  # the model's own errors are of any type; report them with the model's name
        raise MeasurementError(f"{what} failed: {type(e).__name__}: {e}; {hint}") from e


def measure_torch(
    module: torch.nn.Module,
    example_inputs: tuple[Any, ...],
    threads: int,
    config: TimingConfig,
    device: str = "cpu",
    *,
    name: str | None = None,
) -> Timing:
    """End-to-end latency of ``module(*example_inputs)`` in eval mode under ``torch.inference_mode``.

    The module is moved to ``device`` (and stays there); its train/eval mode and torch's thread count are
    restored afterwards. On CUDA every run is followed by ``torch.cuda.synchronize``.

    Parameters
    ----------
    module
        The model.
    example_inputs
        Positional arguments of its ``forward``; tensors are moved to ``device``.
    threads
        Intra-op thread count (at least 1).
    config
        Harness settings.
    device
        ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.
    name
        How messages name the model; default: its class name.

    Returns
    -------
    Timing

    Raises
    ------
    InvalidInputError
        On a bad thread count or device, or a ``module`` that is not an ``nn.Module``.
    MeasurementError
        If CUDA is asked for but absent, or running the model fails.
    """
    import torch

    check_thread_count(threads)
    if not isinstance(module, torch.nn.Module):
        raise InvalidInputError(f"measure_torch needs a torch.nn.Module, got {type(module).__name__}")
    label = name or type(module).__name__
    target = torch_device(device)
    sync = torch.cuda.synchronize if target.type == "cuda" else None
    was_training = module.training
    hint = "check that example_inputs match its forward() and fit in memory"
    with use_threads(threads), _failures_as_measurement_error(f"running model {label!r} on {device}", hint):
        try:
            module.to(target).eval()
            inputs = tuple(x.to(target) if isinstance(x, torch.Tensor) else x for x in example_inputs)
            with torch.inference_mode():
                return time_callable(lambda: module(*inputs), config, sync=sync)
        finally:
            module.train(was_training)


def torch_device(device: str, *, available: bool = True) -> torch.device:
    """``device`` as a torch device, checked: ``"cpu"``, ``"cuda"`` or ``"cuda:N"``, CUDA only where available.

    Parameters
    ----------
    device
        The device's name.
    available
        Also check that this machine has it (False: the name only, e.g. to plan a campaign for another machine).

    Returns
    -------
    torch.device

    Raises
    ------
    InvalidInputError
        Not a CPU or CUDA device name, or a CUDA index this machine does not have.
    MeasurementError
        CUDA asked for on a machine without it.
    """
    import torch

    try:
        target = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise InvalidInputError(f"unknown device {device!r}; use 'cpu', 'cuda' or 'cuda:N'") from e
    if target.type not in ("cpu", "cuda"):
        raise InvalidInputError(f"unsupported device {device!r}; use 'cpu', 'cuda' or 'cuda:N'")
    if not available or target.type == "cpu":
        return target
    if not torch.cuda.is_available():
        raise MeasurementError(f"device {device!r} asked for, but CUDA is not available here; run on the CPU "
                               "('cpu') or on a machine with a CUDA GPU")
    if target.index is not None and target.index >= torch.cuda.device_count():
        raise InvalidInputError(f"device {device!r}: this machine has {torch.cuda.device_count()} CUDA device(s); "
                                "pick one of them")
    return target


def measure_onnxruntime(
    onnx_path: str | os.PathLike[str],
    example_inputs: Mapping[str, OnnxInput] | Sequence[OnnxInput],
    threads: int,
    config: TimingConfig,
) -> Timing:
    """End-to-end latency of an ONNX model run by onnxruntime on the CPU.

    The session uses ``CPUExecutionProvider`` with ``intra_op_num_threads=threads``, ``inter_op_num_threads=1``
    and sequential execution; graph optimisations are onnxruntime's default (all).

    Parameters
    ----------
    onnx_path
        The ``.onnx`` file.
    example_inputs
        One entry per model input, by name (mapping) or in the model's input order (sequence). Each entry is an
        array, or a shape for which a seeded random array (zeros for integer and bool inputs) of the input's
        element type is made.
    threads
        Intra-op thread count (at least 1).
    config
        Harness settings.

    Returns
    -------
    Timing

    Raises
    ------
    InvalidInputError
        On a missing file, a bad thread count, or inputs that do not match the model's.
    MeasurementError
        If onnxruntime cannot load or run the model.
    """
    check_thread_count(threads)
    path = Path(onnx_path)
    if not path.is_file():
        raise InvalidInputError(f"ONNX file {path} does not exist; check the path")
    session = _ort_session(path, threads)
    feed = _ort_feed(path, session, example_inputs)
    hint = "check the input shapes and dtypes against the model's inputs"
    with _failures_as_measurement_error(f"running ONNX model {path} with onnxruntime", hint):
        return time_callable(_ort_runner(session, feed), config)


def _ort_session(path: Path, threads: int) -> Any:
    try:
        import onnxruntime as ort
    except ImportError as e:
        raise MeasurementError(
            "measuring ONNX models needs onnxruntime; install it with `pip install onnxruntime`"
        ) from e
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    hint = "check it with onnx.checker.check_model or re-export it"
    with _failures_as_measurement_error(f"loading ONNX model {path} into onnxruntime", hint):
        return ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])


def _ort_runner(session: Any, feed: dict[str, Any]) -> Callable[[], object]:
    def run() -> object:
        return session.run(None, feed)

    return run


def _ort_feed(
    path: Path, session: Any, example_inputs: Mapping[str, OnnxInput] | Sequence[OnnxInput]
) -> dict[str, Any]:
    model_inputs = session.get_inputs()
    names = [i.name for i in model_inputs]
    if isinstance(example_inputs, Mapping):
        if set(example_inputs) != set(names):
            raise InvalidInputError(
                f"ONNX model {path} has inputs {names}, but example_inputs name {sorted(example_inputs)}; "
                "give one entry per model input"
            )
        given = [example_inputs[n] for n in names]
    else:
        if len(example_inputs) != len(names):
            raise InvalidInputError(
                f"ONNX model {path} has {len(names)} inputs {names}, but {len(example_inputs)} example inputs were "
                "given; give one per model input, in order"
            )
        given = list(example_inputs)
    pairs = enumerate(zip(model_inputs, given, strict=True))
    return {i.name: _ort_array(path, i, value, seed) for seed, (i, value) in pairs}


def _ort_array(path: Path, model_input: Any, value: OnnxInput, seed: int) -> np.ndarray[Any, Any]:
    import numpy as np

    if isinstance(value, np.ndarray):
        return np.ascontiguousarray(value)
    dtype = _ORT_DTYPES.get(model_input.type)
    if dtype is None:
        raise InvalidInputError(
            f"ONNX model {path}: input {model_input.name!r} has type {model_input.type}, for which no random input "
            "can be made; pass an array for it"
        )
    shape = tuple(value)
    if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise InvalidInputError(
            f"ONNX model {path}: example input for {model_input.name!r} must be an array or a shape of "
            f"non-negative integers, got {value!r}"
        )
    if dtype.startswith("float"):
        return np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    return np.zeros(shape, dtype=dtype)


def litert_interpreter(model: str | os.PathLike[str] | bytes, threads: int) -> Any:
    """A LiteRT interpreter of ``model`` (a ``.tflite`` path, or the model's bytes) with ``threads`` threads and the
    XNNPACK delegate (LiteRT's default CPU delegate, as on a phone), tensors allocated and every input filled with
    seeded random values.

    Raises
    ------
    InvalidInputError
        On a missing file or a bad thread count.
    MeasurementError
        If LiteRT cannot load the model.
    """
    check_thread_count(threads)
    source = {"model_content": model} if isinstance(model, bytes) else {"model_path": str(model)}
    what = "a LiteRT model given as bytes" if isinstance(model, bytes) else f"LiteRT model {model}"
    if not isinstance(model, bytes) and not Path(model).is_file():
        raise InvalidInputError(f"LiteRT model {model} does not exist; check the path")
    import numpy as np
    from ai_edge_litert.interpreter import Interpreter

    from edgeplan.frontends.litert_export import quiet

    hint = "check that it is a .tflite flatbuffer (LiteRT's own tools load it)"
    with _failures_as_measurement_error(f"loading {what}", hint):
        with quiet():  # the delegate's "Created ... XNNPACK delegate" line
            interpreter = Interpreter(**source, num_threads=threads)
        interpreter.allocate_tensors()
        rng = np.random.default_rng(0)
        for detail in interpreter.get_input_details():
            dtype = np.dtype(detail["dtype"])
            shape = tuple(int(d) for d in detail["shape"])
            value = (rng.standard_normal(shape).astype(dtype) if dtype.kind == "f"
                     else rng.integers(-8, 8, shape).astype(dtype))
            interpreter.set_tensor(detail["index"], value)
    return interpreter


def measure_litert(tflite_path: str | os.PathLike[str], threads: int, config: TimingConfig) -> Timing:
    """End-to-end latency of a ``.tflite`` model run by LiteRT on the CPU with the XNNPACK delegate.

    Parameters
    ----------
    tflite_path
        The ``.tflite`` file (float32 or quantized).
    threads
        Threads of the interpreter and its delegate (at least 1).
    config
        Harness settings.

    Returns
    -------
    Timing

    Raises
    ------
    InvalidInputError
        On a missing file or a bad thread count.
    MeasurementError
        If LiteRT cannot load or run the model.
    """
    interpreter = litert_interpreter(tflite_path, threads)
    with _failures_as_measurement_error(f"running LiteRT model {tflite_path}", "check the model's inputs"):
        return time_callable(interpreter.invoke, config)
