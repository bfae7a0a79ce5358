"""Loading and checking an ONNX model, and the ONNX constants and node helpers every stage of the frontend shares."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from edgeplan.errors import InvalidInputError
from edgeplan.ir import DType

if TYPE_CHECKING:
    import onnx


__all__ = ["PathOrModel"]

PathOrModel = Union[str, "os.PathLike[str]", "onnx.ModelProto"]

#: ONNX ``TensorProto.DataType`` codes (fixed by the ONNX protobuf schema) of the element types the IR models.
_DTYPES: dict[int, DType] = {
    1: DType.FLOAT32,
    2: DType.UINT8,
    3: DType.INT8,
    6: DType.INT32,
    7: DType.INT64,
    9: DType.BOOL,
    10: DType.FLOAT16,
    11: DType.FLOAT64,
    16: DType.BFLOAT16,
}
_DEFAULT_DOMAINS = ("", "ai.onnx")


def _load(path_or_model: PathOrModel) -> tuple[onnx.ModelProto, str]:
    """Load and check the model; InvalidInputError for a missing, unreadable or corrupt file."""
    import onnx
    from google.protobuf.message import DecodeError

    if isinstance(path_or_model, onnx.ModelProto):
        _check_model(path_or_model, "the given ONNX model")
        return path_or_model, path_or_model.graph.name or "onnx_model"
    if not isinstance(path_or_model, (str, os.PathLike)):
        raise InvalidInputError(
            f"expected the path of an .onnx file or an onnx.ModelProto, got {type(path_or_model).__name__}"
        )
    path = Path(path_or_model)
    if not path.is_file():
        raise InvalidInputError(f"ONNX file {str(path)!r} does not exist (or is not a file); check the path")
    hint = "; re-export the model (edgeplan.frontends.onnx_export.export_onnx) or check the download"
    try:
        model = onnx.load(str(path))
    except DecodeError as e:
        raise InvalidInputError(f"{str(path)!r} is not a valid ONNX model (protobuf decoding failed: {e}){hint}") from e
    except onnx.checker.ValidationError as e:
        raise InvalidInputError(f"{str(path)!r}: cannot load its external data ({e}){hint}") from e
    except OSError as e:
        raise InvalidInputError(f"{str(path)!r} cannot be read: {e}") from e
    _check_model(model, repr(str(path)), hint, path)
    return model, path.name


def _check_model(model: onnx.ModelProto, what: str, hint: str = "", path: Path | None = None) -> None:
    """Run the ONNX checker (on the file when there is one: faster, and fine beyond protobuf's 2 GB)."""
    import onnx

    try:
        onnx.checker.check_model(str(path) if path is not None else model)
    except onnx.checker.ValidationError as e:
        raise InvalidInputError(f"{what} is not a valid ONNX model: {e}{hint}") from e
    except ValueError as e:  # a ModelProto over 2 GB cannot be checked in memory
        raise InvalidInputError(f"{what} cannot be checked in memory ({e}); pass the path of the file") from e
    if not model.graph.output:
        raise InvalidInputError(f"{what} is not a valid ONNX model: its graph has no outputs{hint}")


def _label(node: onnx.NodeProto) -> str:
    """The ONNX node's name, or its first output's name when the node has none."""
    return node.name or (node.output[0] if node.output else node.op_type)


def _attrs(node: onnx.NodeProto) -> dict[str, Any]:
    from onnx import helper

    out: dict[str, Any] = {}
    for a in node.attribute:
        value = helper.get_attribute_value(a)
        out[a.name] = value.decode() if isinstance(value, bytes) else value
    return out


def _ints(values: Any) -> list[int]:
    return [int(v) for v in values]
