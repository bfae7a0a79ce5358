"""How a :class:`~edgeplan.costmodels.opwise.model.LatencyModel` is kept on disk: one JSON file per predictor method
(plain, or xz-compressed for the shipped profiles), no pickle; and the threads a scenario runs at."""

from __future__ import annotations

import json
import lzma
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from edgeplan.errors import InvalidInputError

__all__ = ["MODEL_FORMAT", "MODEL_SUFFIXES", "model_file", "read_json", "scenario_threads", "write_json"]


#: Format tag of a saved model.
MODEL_FORMAT = "edgeplan-latency-model/1"


#: Names a saved model may end with: plain JSON, or xz-compressed JSON (the shipped profiles).
MODEL_SUFFIXES = (".json", ".json.xz")


def scenario_threads(scenario: str) -> int | None:
    """The intra-op threads of a known scenario (``torch-fp32-2t``: 2), None for any other name."""
    from edgeplan.measure.scenarios import SCENARIOS

    known = SCENARIOS.get(scenario)
    return known.threads if known is not None else None


def write_json(path: Path, data: Mapping[str, Any]) -> Path:
    """Write ``data`` as compact JSON to ``path`` atomically (a temporary file renamed over it); a path ending in
    ``.xz`` is written xz-compressed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    text = json.dumps(data, separators=(",", ":"))
    if path.name.endswith(".xz"):
        tmp.write_bytes(lzma.compress(text.encode(), preset=9))
    else:
        tmp.write_text(text)
    tmp.replace(path)
    return path


def read_json(path: Path, what: str = "JSON") -> Any:
    """The JSON document in ``path``, read through xz when its name ends in ``.xz``.

    Raises
    ------
    InvalidInputError
        When the file is not (xz-compressed) JSON; the message names it and ``what`` it should be.
    """
    try:
        raw = lzma.decompress(path.read_bytes()) if path.name.endswith(".xz") else path.read_bytes()
        return json.loads(raw)
    except (lzma.LZMAError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InvalidInputError(f"{path} is not {what} ({e})") from e


def model_file(folder: Path, method: str) -> Path | None:
    """The file of ``method``'s model in a device folder (``{method}.json``, else ``{method}.json.xz``), or None."""
    for suffix in MODEL_SUFFIXES:
        path = folder / f"{method}{suffix}"
        if path.is_file():
            return path
    return None


