"""Dataset files: gzip or xz by name, real numbers to six significant digits, and `ops compact`."""

from __future__ import annotations

import gzip
import json
import lzma
from pathlib import Path

import pytest

from edgeplan.errors import InvalidInputError
from edgeplan.measure.op_dataset import DATASET_FORMAT, SIGNIFICANT_DIGITS, compact_dataset, load_dataset

RECORDS = [{"model": f"synthetic:{i}", "latency_ms": 9.718607272584393 + i, "repeats": 24,
            "ops": [{"kernel": "conv2d", "ms": 0.511213849503326, "raw_ms": 0.39943799999999996, "nodes": ["a"]}],
            "nodes": {"a": {"op": "conv2d", "input_shapes": [[1, 3, 8, 8]], "flops": 1234567}}} for i in range(3)]


def _gz(path: Path) -> Path:
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write(json.dumps({"format": DATASET_FORMAT, "scenario": "torch-fp32-2t"}) + "\n")
        for r in RECORDS:
            f.write(json.dumps(r) + "\n")
    return path


def test_compact_rewrites_as_xz_with_six_significant_digits(tmp_path: Path) -> None:
    src = _gz(tmp_path / "d.jsonl.gz")
    out = tmp_path / "d.jsonl.xz"
    assert compact_dataset(src, out, command="edgeplan ops compact") == 3
    with lzma.open(out, "rt", encoding="utf-8") as f:  # really xz
        header = json.loads(f.readline())
    assert header["compacted"]["significant_digits"] == SIGNIFICANT_DIGITS == 6
    assert header["compacted"]["from"] == "d.jsonl.gz" and header["scenario"] == "torch-fp32-2t"
    before, after = load_dataset(src).records, load_dataset(out).records
    assert [r["model"] for r in after] == [r["model"] for r in before]
    assert after[0]["latency_ms"] == 9.71861 and after[0]["ops"][0]["raw_ms"] == 0.399438
    assert after[0]["nodes"] == before[0]["nodes"] and after[0]["repeats"] == 24  # integers exact
    for a, b in zip(after, before, strict=True):
        assert a["latency_ms"] == pytest.approx(b["latency_ms"], rel=1e-6)
    # a gzip name still writes gzip
    compact_dataset(src, tmp_path / "again.jsonl.gz")
    with gzip.open(tmp_path / "again.jsonl.gz", "rt") as f:
        assert json.loads(f.readline())["compacted"]["from"] == "d.jsonl.gz"


def test_a_damaged_xz_dataset_is_refused_by_name(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl.xz"
    bad.write_bytes(b"not xz at all")
    with pytest.raises(InvalidInputError, match="bad.jsonl.xz is not an xz JSON-lines op dataset"):
        load_dataset(bad)
