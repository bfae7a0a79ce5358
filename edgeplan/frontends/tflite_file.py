"""The operators of a LiteRT (``.tflite``) file as written: tensors, constant buffers and operators in execution
order, each with its builtin options (read with the ``schema_py_generated`` module that ``ai-edge-litert`` ships).

A StableHLO operator keeps its options in ``builtin_options_2`` (``StablehloReduceWindowOptions``: window
dimensions, strides, dilations, padding and the subgraph of its body); they are read into the same options, with
``body``, the operator types of that subgraph (``ADD`` for a sum, ``MAXIMUM`` for a maximum).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgeplan.errors import InvalidInputError

__all__ = ["TfliteModel", "TfliteOp", "TfliteTensor", "buffer_bytes", "read_tflite"]

Shape = tuple[int, ...]


@dataclass(frozen=True)
class TfliteTensor:
    """A tensor of the model's main subgraph: ``constant`` when its buffer holds data (weights, shapes, axes)."""

    name: str
    shape: Shape
    dtype: str
    constant: bool
    value: tuple[float, ...] | None = None  # small constants (<= 64 values): axes, pads, slice bounds, scalars


@dataclass(frozen=True)
class TfliteOp:
    """An operator as written in the file: its type (``CONV_2D``), tensor indices and builtin options."""

    index: int
    type: str
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TfliteModel:
    """The main subgraph of a ``.tflite`` file."""

    path: Path
    tensors: tuple[TfliteTensor, ...]
    ops: tuple[TfliteOp, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]

    def op_types(self) -> list[str]:
        """The operator types in execution order."""
        return [o.type for o in self.ops]


def read_tflite(path: str | os.PathLike[str]) -> TfliteModel:
    """Read the main subgraph of a ``.tflite`` file.

    Raises
    ------
    InvalidInputError
        On a missing file, or one that is not a LiteRT flatbuffer.
    """
    from ai_edge_litert import schema_py_generated as schema

    file = Path(path)
    if not file.is_file():
        raise InvalidInputError(f"LiteRT model {file} does not exist; check the path")
    buf = file.read_bytes()
    if len(buf) < 8 or buf[4:8] != b"TFL3":
        raise InvalidInputError(f"{file} is not a LiteRT (.tflite) flatbuffer: its identifier is not TFL3")
    model = schema.ModelT.InitFromPackedBuf(buf, 0)
    if not model.subgraphs:
        raise InvalidInputError(f"{file} has no subgraph to run")
    names = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
    type_names = {v: k for k, v in vars(schema.TensorType).items() if not k.startswith("_")}
    sub = model.subgraphs[0]
    contents = [buffer_bytes(b, buf) for b in model.buffers]
    tensors = tuple(_tensor(t, contents, type_names) for t in sub.tensors)
    ops = []
    for i, op in enumerate(sub.operators or ()):
        code = model.operatorCodes[op.opcodeIndex]
        builtin = max(code.builtinCode, code.deprecatedBuiltinCode)
        op_type = names.get(builtin, f"BUILTIN_{builtin}")
        if op_type == "CUSTOM":
            op_type = f"CUSTOM:{code.customCode.decode() if isinstance(code.customCode, bytes) else code.customCode}"
        options = {k: _plain(v) for k, v in vars(op.builtinOptions).items()} if op.builtinOptions else {}
        if op.builtinOptions2:  # a StableHLO operator's (StablehloReduceWindowOptions: window, strides, padding)
            options.update({k: _plain(v) for k, v in vars(op.builtinOptions2).items()})
        body = options.get("bodySubgraphIndex")
        if isinstance(body, int) and 0 < body < len(model.subgraphs):  # what its body computes: ADD, MAXIMUM
            body_ops = model.subgraphs[body].operators or ()
            codes = [model.operatorCodes[o.opcodeIndex] for o in body_ops]
            options["body"] = tuple(names.get(max(c.builtinCode, c.deprecatedBuiltinCode), "") for c in codes)
        ops.append(TfliteOp(i, op_type, tuple(int(t) for t in _seq(op.inputs)),
                            tuple(int(t) for t in _seq(op.outputs)), options))
    return TfliteModel(file, tensors, tuple(ops), tuple(int(t) for t in _seq(sub.inputs)),
                       tuple(int(t) for t in _seq(sub.outputs)))


def _seq(values: Any) -> list[Any]:
    return [] if values is None else list(values)


def _plain(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    return value.decode() if isinstance(value, bytes) else value


def buffer_bytes(buffer: Any, file: bytes) -> bytes | None:
    """The data of a flatbuffer ``BufferT``: inline, or stored after the flatbuffer at ``offset`` (as large models
    and the quantizer's output keep their weights); None for an activation's empty buffer."""
    if buffer.data is not None and len(buffer.data) > 0:
        return bytes(buffer.data)
    if getattr(buffer, "offset", 0) > 1 and getattr(buffer, "size", 0) > 0:
        return file[buffer.offset:buffer.offset + buffer.size]
    return None


def _tensor(t: Any, buffers: Sequence[bytes | None], type_names: dict[int, str]) -> TfliteTensor:
    import numpy as np

    shape = tuple(int(d) for d in _seq(t.shape))
    name = t.name.decode() if isinstance(t.name, bytes) else str(t.name)
    data = buffers[t.buffer] if 0 < t.buffer < len(buffers) else None
    constant = data is not None
    dtype = type_names.get(t.type, str(t.type))
    value = None
    if data is not None and 0 < len(data) <= 512 and dtype in ("INT32", "INT64", "FLOAT32"):
        array = np.frombuffer(data, dtype={"INT32": np.int32, "INT64": np.int64, "FLOAT32": np.float32}[dtype])
        if array.size <= 64:
            value = tuple(float(v) for v in array)
    return TfliteTensor(name, shape, dtype, bool(constant), value)
