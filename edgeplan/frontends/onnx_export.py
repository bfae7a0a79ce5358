"""Export a torch ``nn.Module`` to a single self-contained ``.onnx`` file with static shapes.

The exporter is ``torch.onnx.export(..., dynamo=True)`` (``torch.export`` capture, onnxscript translation and
optimization): in torch 2.14 it exports every CNN the zoo builds, gives clean graphs (no ``Shape -> Gather``
chains, no ``If`` nodes) and captures the model the same way as :mod:`edgeplan.frontends.torch_frontend`. The
legacy TorchScript exporter (``dynamo=False``, deprecated but still shipped) is the fallback when the dynamo
exporter fails (data-dependent control flow that ``torch.export`` refuses, a downgrade to an old opset) or writes a
file onnxruntime cannot load.

``nn.LocalResponseNorm`` has no ATen operator (``F.local_response_norm`` is Python), so both exporters would
decompose it into a 5-D average pooling and a dozen element-wise ops; with the dynamo exporter it is exported as
the one ONNX ``LRN`` operator it is, so that the ONNX frontend sees the same ``lrn`` node as the torch frontend.
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

from edgeplan.errors import InvalidInputError, UnsupportedOperatorError

if TYPE_CHECKING:

    import torch

__all__ = ["cache_export", "export_onnx", "onnx_cache_path"]

log = logging.getLogger(__name__)

#: Models whose parameters exceed this many bytes need ONNX external data (protobuf's 2 GB limit, with margin).
_INLINE_LIMIT_BYTES = 1_800_000_000
_MESSAGE_CHARS = 600


def export_onnx(
    module: torch.nn.Module,
    example_inputs: tuple[Any, ...],
    path: str | os.PathLike[str],
    opset: int | None = None,
) -> Path:
    """Export ``module`` in eval mode to an ONNX file that onnxruntime can run.

    Parameters
    ----------
    module
        The model. It is put in eval mode for the export; its previous mode is restored afterwards.
    example_inputs
        The inputs of one forward call (a lone tensor is accepted too). Their shapes become the model's static
        input shapes (use batch 1 for latency work).
    path
        Where to write the ``.onnx`` file (parent folders are created).
    opset
        ONNX opset version; the exporter's default (20 in torch 2.14) when None.

    Returns
    -------
    Path
        ``path``. The file is self-contained unless the parameters exceed ~1.8 GB, in which case ONNX external
        data is written next to it (``<name>.onnx.data``).

    Raises
    ------
    InvalidInputError
        ``module`` is not an ``nn.Module``, it fails on ``example_inputs``, ``opset`` is out of range, or both
        exporters fail for another reason.
    UnsupportedOperatorError
        The module uses an operator neither exporter can translate to ONNX.
    """
    inputs = _check_arguments(module, example_inputs, opset)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    was_training = module.training
    module.eval()
    try:
        _check_forward(module, inputs)
        _export_with_fallback(module, inputs, out, opset)
    finally:
        module.train(was_training)
    _inline_external_data(out)
    return out


def _check_arguments(module: Any, example_inputs: Any, opset: int | None) -> tuple[Any, ...]:
    import onnx
    import torch

    if not isinstance(module, torch.nn.Module):
        raise InvalidInputError(f"export_onnx needs a torch.nn.Module, got {type(module).__name__}")
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    if not isinstance(example_inputs, (tuple, list)) or not example_inputs:
        raise InvalidInputError(
            f"example_inputs must be a non-empty tuple of tensors, got {type(example_inputs).__name__}"
        )
    latest = onnx.defs.onnx_opset_version()
    if opset is not None and not 7 <= opset <= latest:
        raise InvalidInputError(f"opset={opset} is out of range; this onnx supports opsets 7..{latest}")
    return tuple(example_inputs)


def _check_forward(module: torch.nn.Module, inputs: tuple[Any, ...]) -> None:
    """Run the module once so that a wrong input shape is reported as such, not as an exporter failure."""
    import torch

    try:
        with torch.no_grad():
            module(*inputs)
    except Exception as e:
        raise InvalidInputError(
            f"{type(module).__name__} fails on example inputs of shapes {_shapes(inputs)}: "
            f"{type(e).__name__}: {_short(e)}; check the input shapes"
        ) from e


def _export_with_fallback(module: torch.nn.Module, inputs: tuple[Any, ...], out: Path, opset: int | None) -> None:
    errors: dict[str, Exception] = {}
    for exporter in (_export_dynamo, _export_torchscript):
        try:
            exporter(module, inputs, out, opset)
            _check_loadable(out)
        except Exception as e:  # noqa: BLE001 - exporter failures are diverse; all are collected and reported
            errors[exporter.__name__.removeprefix("_export_")] = e
            continue
        if errors:
            why = "; ".join(f"{name}: {type(e).__name__}: {_short(e)}" for name, e in errors.items())
            log.info("exported %s with the TorchScript exporter after %s", type(module).__name__, why)
        return
    raise _export_error(module, errors)


def _export_dynamo(module: torch.nn.Module, inputs: tuple[Any, ...], out: Path, opset: int | None) -> None:
    import torch

    external = _parameter_bytes(module) > _INLINE_LIMIT_BYTES
    with _quiet(), _lrn_as_onnx_op(module):
        torch.onnx.export(
            module, inputs, str(out), dynamo=True, external_data=external, opset_version=opset, verbose=False
        )


def _export_torchscript(module: torch.nn.Module, inputs: tuple[Any, ...], out: Path, opset: int | None) -> None:
    import torch

    with _quiet():
        torch.onnx.export(module, inputs, str(out), dynamo=False, opset_version=opset)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Silence the exporters' deprecation and tracer warnings (failures still raise)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


@contextlib.contextmanager
def _lrn_as_onnx_op(module: torch.nn.Module) -> Iterator[None]:
    """While exporting, make every ``nn.LocalResponseNorm`` emit the ONNX ``LRN`` operator."""
    import torch

    symbolic = getattr(getattr(torch.onnx, "ops", None), "symbolic", None)
    lrns = [m for m in module.modules() if isinstance(m, torch.nn.LocalResponseNorm)]
    if symbolic is None or not lrns:
        yield
        return
    saved = [m.__dict__.get("forward") for m in lrns]
    for m in lrns:
        m.forward = _lrn_forward(m, symbolic)  # type: ignore[method-assign]
    try:
        yield
    finally:
        for m, previous in zip(lrns, saved, strict=True):
            del m.forward
            if previous is not None:
                m.forward = previous  # type: ignore[method-assign]


def _lrn_forward(m: torch.nn.LocalResponseNorm, symbolic: Any) -> Any:
    attrs = {"size": int(m.size), "alpha": float(m.alpha), "beta": float(m.beta), "bias": float(m.k)}

    def forward(x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 4:  # ONNX LRN is defined on NCHW tensors; other ranks keep the decomposition
            return type(m).forward(m, x)
        return symbolic("LRN", (x,), attrs, dtype=x.dtype, shape=x.shape, version=1)

    return forward


def _parameter_bytes(module: torch.nn.Module) -> int:
    tensors = [*module.parameters(), *module.buffers()]
    return sum(t.numel() * t.element_size() for t in tensors)


def _check_loadable(out: Path) -> None:
    """The file exists and onnxruntime (when installed) can build a session from it."""
    if not out.is_file():
        raise InvalidInputError(f"the exporter wrote no file at {str(out)!r}")
    try:
        import onnxruntime
    except ImportError:
        return
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3  # errors only: shape-merge warnings are not failures
    onnxruntime.InferenceSession(str(out), options, providers=["CPUExecutionProvider"])


def _inline_external_data(out: Path) -> None:
    """Fold external data files back into the model when it fits in one protobuf (< ~1.8 GB)."""
    import onnx
    from onnx.external_data_helper import uses_external_data

    skeleton = onnx.load(str(out), load_external_data=False)
    external = [t for t in skeleton.graph.initializer if uses_external_data(t)]
    if not external:
        return
    locations = {e.value for t in external for e in t.external_data if e.key == "location"}
    model = onnx.load(str(out))
    if model.ByteSize() > _INLINE_LIMIT_BYTES:
        return
    onnx.save_model(model, str(out), save_as_external_data=False)
    for location in locations:
        data = out.parent / location
        if data.is_file() and data != out:
            data.unlink()


_DYNAMO_OP = re.compile(r"No ONNX function found for <OpOverload\(op='([^']+)'")
_DYNAMO_NODE = re.compile(r"Error when translating node %(\S+)")
_TORCHSCRIPT_OP = re.compile(r"Exporting the operator '([^']+)' to ONNX")


def _export_error(module: torch.nn.Module, errors: dict[str, Exception]) -> Exception:
    """UnsupportedOperatorError when an exporter names a missing operator, else InvalidInputError with both causes."""
    texts = {name: _chain_text(e) for name, e in errors.items()}
    where = type(module).__name__
    for name, text in texts.items():
        op = _DYNAMO_OP.search(text) or _TORCHSCRIPT_OP.search(text)
        if op:
            node = _DYNAMO_NODE.search(text)
            detail = f"the {name} exporter has no ONNX translation for it (exporters tried: {', '.join(errors)})"
            error: Exception = UnsupportedOperatorError(op.group(1), node.group(1) if node else where, detail)
            error.__cause__ = errors[name]
            return error
    summary = "; ".join(f"{name}: {type(e).__name__}: {_short(e)}" for name, e in errors.items())
    error = InvalidInputError(f"cannot export {where} to ONNX ({summary})")
    error.__cause__ = next(iter(errors.values()))
    return error


def _chain_text(error: BaseException) -> str:
    parts: list[str] = []
    seen: BaseException | None = error
    while seen is not None and len(parts) < 8:
        parts.append(str(seen))
        seen = seen.__cause__ or seen.__context__
    return "\n".join(parts)


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _short(error: BaseException) -> str:
    text = " ".join(_ANSI.sub("", str(error)).split())
    return text if len(text) <= _MESSAGE_CHARS else text[: _MESSAGE_CHARS - 3] + "..."


def _shapes(inputs: tuple[Any, ...]) -> list[Any]:
    return [tuple(x.shape) if hasattr(x, "shape") else type(x).__name__ for x in inputs]


def onnx_cache_path(spec: str, input_shape: tuple[int, ...] | None, home: Path) -> Path:
    """Where the ONNX export of a zoo model is cached under the edgeplan home."""
    digest = hashlib.sha1(f"{spec}|{input_shape}".encode()).hexdigest()[:10]
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", spec)[:60]
    return home / "onnx" / f"{safe}-{digest}.onnx"


def cache_export(module: Any, example_inputs: tuple[Any, ...], path: Path) -> None:
    """Export ``module`` to the ONNX cache file ``path`` so that an interrupted export leaves no half file there.

    It is exported in a scratch folder beside ``path`` under its final name (an external-data file keeps the name
    the model refers to), then moved in, the model file last.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{path.name}-", dir=path.parent) as scratch:
        staged = Path(scratch) / path.name
        export_onnx(module, example_inputs, staged)
        for extra in Path(scratch).iterdir():
            if extra != staged:
                os.replace(extra, path.parent / extra.name)
        os.replace(staged, path)
