"""Convert a torch ``nn.Module`` to a LiteRT (``.tflite``) model, in float32 or int8.

The converter is ``litert-torch`` (``torch.export`` capture, lowering to the TFLite dialect and the LiteRT
converter's passes): the same graph, operators and fusions an Android app ships. int8 is post-training static
quantization with ``ai-edge-quantizer`` (int8 weights and activations, min-max calibration on seeded random
inputs), the LiteRT tooling on PyPI. Conversions of zoo models are cached under the edgeplan home, like the ONNX
exports (:func:`cache_tflite`).

A zoo model's random initialization is not a trained model's: timm zero-initializes the last batch norm of every
residual branch (``zero_init_last``), and batch and layer norms start at scale 1, shift 0, mean 0, variance 1. The
LiteRT converter folds on values (``x * 0`` is 0, ``x * 1`` and ``x + 0`` are ``x``), so it would drop whole
residual branches and the affine steps of every norm that is not folded into a convolution, and time a model that
is not the one the IR describes. :func:`cache_tflite` converts a zoo model after :func:`generic_weights`, which
re-draws every parameter (and norm statistic) that holds a single value throughout.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgeplan.errors import InvalidInputError, MeasurementError

if TYPE_CHECKING:
    import torch

__all__ = ["TFLITE_DTYPES", "cache_tflite", "export_tflite", "generic_weights", "quantize_tflite", "quiet",
           "tflite_cache_path"]

#: The element types a model is converted to: float32, or int8 by static post-training quantization.
TFLITE_DTYPES = ("float32", "int8")

#: Seeded random inputs that calibrate the int8 ranges (latency does not depend on the values' accuracy).
_CALIBRATION_RUNS = 4


def export_tflite(module: torch.nn.Module, example_inputs: tuple[Any, ...], path: str | os.PathLike[str],
                  dtype: str = "float32") -> Path:
    """Convert ``module`` in eval mode to a ``.tflite`` file with static shapes.

    Parameters
    ----------
    module
        The model (random weights are enough for latency).
    example_inputs
        Positional inputs of its ``forward``; their shapes become the model's static input shapes.
    path
        The ``.tflite`` file to write (written whole or not at all).
    dtype
        ``"float32"``, or ``"int8"``: static post-training quantization of the float model (int8 weights and
        activations, ranges from seeded random inputs).

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    InvalidInputError
        On an unknown ``dtype``.
    MeasurementError
        When the converter or the quantizer fails (their message, shortened).
    """
    if dtype not in TFLITE_DTYPES:
        raise InvalidInputError(f"unknown dtype {dtype!r} for a LiteRT model; use one of {', '.join(TFLITE_DTYPES)}")
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        float_path = Path(tmp) / "float.tflite"
        _convert(module, example_inputs, float_path)
        if dtype == "int8":
            float_path = quantize_tflite(float_path, Path(tmp) / "int8.tflite")
        os.replace(float_path, out)
    return out


def _convert(module: torch.nn.Module, example_inputs: tuple[Any, ...], out: Path) -> None:
    import torch

    with quiet():
        import litert_torch

        try:
            with torch.no_grad():
                litert_torch.convert(module.eval(), tuple(example_inputs)).export(str(out))
        except Exception as e:  # the converter raises many types (torch.export, MLIR, converter passes)
            raise MeasurementError(f"litert-torch could not convert {type(module).__name__}: {_short(e)}; "
                                   "LiteRT needs a model torch.export can capture") from e


def quantize_tflite(float_path: str | os.PathLike[str], out: str | os.PathLike[str]) -> Path:
    """Quantize a float ``.tflite`` model to int8 (static post-training quantization with ai-edge-quantizer: int8
    weights and activations, min-max ranges from seeded random inputs of the model's own input shapes).

    The subgraphs an operator calls (a StableHLO reduce window's body) stay float, and so does their operator: the
    quantizer calibrates only the main subgraph, so it has no ranges for them; the operator runs in float between a
    ``DEQUANTIZE`` and a ``QUANTIZE``, as LiteRT runs an operator it has no integer kernel for.

    Raises
    ------
    MeasurementError
        When the quantizer fails (its message, shortened).
    """
    import numpy as np
    from ai_edge_litert.interpreter import Interpreter

    target = Path(out)
    with quiet():
        from ai_edge_quantizer import qtyping, quantizer, recipe

        try:
            runner = Interpreter(model_path=str(float_path)).get_signature_runner("serving_default")
            shapes = {name: tuple(int(d) for d in detail["shape"])
                      for name, detail in runner.get_input_details().items()}
            rng = np.random.default_rng(0)
            samples = [{name: rng.standard_normal(shape).astype(np.float32) for name, shape in shapes.items()}
                       for _ in range(_CALIBRATION_RUNS)]
            q = quantizer.Quantizer(str(float_path), recipe.static_wi8_ai8())
            called = _called_subgraph_tensors(Path(float_path))
            if called:
                names = "|".join(re.escape(n) for n in sorted(called))  # a scope is its outputs' names, each + ";"
                q.update_quantization_recipe(regex=f"^(?:(?:{names});)+$",
                                             operation_name=qtyping.TFLOperationName.ALL_SUPPORTED,
                                             algorithm_key="no_quantize")
            result = q.calibrate({"serving_default": samples}, num_threads=1)
            with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
                written = Path(tmp) / "int8.tflite"
                q.quantize(result, enable_progress_report=False).export_model(str(written))
                os.replace(written, target)
        except Exception as e:  # the quantizer raises many types
            raise MeasurementError(f"ai-edge-quantizer could not quantize the model to int8: {_short(e)}") from e
    return target


def _called_subgraph_tensors(path: Path) -> set[str]:
    """The names of the tensors of every subgraph but the first (the subgraphs operators call)."""
    from ai_edge_litert import schema_py_generated as schema

    model = schema.ModelT.InitFromPackedBuf(path.read_bytes(), 0)
    return {t.name.decode() for sub in model.subgraphs[1:] for t in sub.tensors or [] if t.name}


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Silence the converter's progress lines and absl/torch log spam (on the file descriptors: some is native)."""
    loggers = [logging.getLogger(n) for n in ("torch", "absl", "litert_torch", "ai_edge_quantizer")]
    levels = [lg.level for lg in loggers]
    saved = [os.dup(1), os.dup(2)]
    with open(os.devnull, "w") as null, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for lg in loggers:
            lg.setLevel(logging.ERROR)
        os.dup2(null.fileno(), 1)
        os.dup2(null.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
            for lg, level in zip(loggers, levels, strict=True):
                lg.setLevel(level)


#: Buffers that hold values a converter folds like a parameter's (batch norm statistics).
_STATISTICS = ("running_mean", "running_var")


def generic_weights(module: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """Re-draw, in place, every floating-point parameter and batch-norm statistic of ``module`` that holds one value
    throughout, so that a converter cannot fold on it as it could not on trained weights.

    A tensor of value ``v`` becomes ``v`` times a uniform draw in [0.5, 1.5) per element (the sign kept, so a
    variance stays positive); a tensor of zeros becomes a uniform draw in [0.05, 0.15). Tensors with varied values
    (a random initialization's weights) are left as they are.

    Parameters
    ----------
    module
        The model (a zoo model's random initialization).
    seed
        Seeds the draws, so that a conversion is repeatable.

    Returns
    -------
    torch.nn.Module
        ``module``.
    """
    import torch

    generator = torch.Generator().manual_seed(seed)
    tensors = [*module.parameters(), *(b for name, b in module.named_buffers() if name.endswith(_STATISTICS))]
    with torch.no_grad():
        for t in tensors:
            if not t.is_floating_point() or t.numel() == 0:
                continue
            flat = t.reshape(-1)
            if not bool((flat == flat[0]).all()):
                continue
            value = float(flat[0]) or 0.1
            draw = torch.rand(t.shape, generator=generator, dtype=torch.float32) + 0.5
            t.copy_((draw * value).to(t.dtype))
    return module


def _short(error: BaseException) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return text[:300] + ("..." if len(text) > 300 else "")


#: The weights a cached conversion is made with (part of its cache key): :func:`generic_weights`.
_WEIGHTS = "generic-weights"


def tflite_cache_path(spec: str, input_shape: tuple[int, ...] | None, dtype: str, home: Path) -> Path:
    """Where the LiteRT conversion of a zoo model is cached under the edgeplan home."""
    digest = hashlib.sha1(f"{spec}|{input_shape}|{dtype}|{_WEIGHTS}".encode()).hexdigest()[:10]
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", spec)[:60]
    return home / "litert" / f"{safe}-{dtype}-{digest}.tflite"


def cache_tflite(spec: str, input_shape: tuple[int, ...] | None, dtype: str, home: Path) -> Path:
    """The cached ``.tflite`` of the zoo model ``spec`` (converted on first use, after :func:`generic_weights`).

    Parameters
    ----------
    spec
        A zoo string.
    input_shape
        Overrides the model's default input shape.
    dtype
        ``"float32"`` or ``"int8"``.
    home
        The edgeplan home.

    Returns
    -------
    Path
        The ``.tflite`` file.
    """
    path = tflite_cache_path(spec, input_shape, dtype, home)
    if not path.is_file() and dtype == "int8":  # quantized from the cached float conversion
        path.parent.mkdir(parents=True, exist_ok=True)
        return quantize_tflite(cache_tflite(spec, input_shape, "float32", home), path)
    if not path.is_file():
        from edgeplan.frontends.zoo import build_model

        model = build_model(spec, input_shape)
        generic_weights(model.module)
        export_tflite(model.module, model.example_inputs(), path, dtype)
    return path
