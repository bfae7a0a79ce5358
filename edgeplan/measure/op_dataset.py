"""Per-op latency dataset files: JSON lines, the first line the provenance (machine, versions, scenario, command,
dates), then one line per model; xz-compressed for a ``.xz`` file name (the shipped datasets), gzip'd otherwise.

Times and other real numbers are written to :data:`SIGNIFICANT_DIGITS` significant digits (:func:`compact_dataset`
rewrites an older file so). :func:`retrace_dataset` traces an ONNX Runtime dataset's kernels to IR nodes again
without re-measuring. :mod:`edgeplan.measure.op_campaign` measures the models and writes these files.
"""

from __future__ import annotations

import gzip
import json
import lzma
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from edgeplan.errors import EdgeplanError, InvalidInputError

__all__ = [
    "DATASET_FORMAT",
    "OpDataset",
    "RetraceReport",
    "SIGNIFICANT_DIGITS",
    "compact_dataset",
    "load_dataset",
    "open_dataset_file",
    "retrace_dataset",
]


#: Version tag in the first line of a dataset file.
DATASET_FORMAT = "edgeplan-op-latency/1"


@dataclass(frozen=True)
class OpDataset:
    """A loaded dataset file: its provenance and one record per model.

    Each record has ``model``, ``latency_ms`` (end-to-end median), ``latency_min_ms`` (fastest run), ``iqr_rel``,
    ``repeats``, ``op_sum_ms``, ``op_sum_min_ms``, ``ops`` (list of op dicts: ``kernel``, ``kind``, ``nodes``,
    ``ms`` (median), ``min_ms``, ``iqr_rel``) and ``nodes`` (IR node descriptions by name). In a dataset measured
    beside a reference model (its provenance has ``reference``), times are the ratios to the reference at the
    scenario's reference latency and ``iqr_rel`` is the spread of the end-to-end ratios; the times and spread as
    measured are kept as ``raw_latency_ms``, ``raw_latency_min_ms``, ``raw_iqr_rel`` (a record's, absent from
    exports before it was kept) and ``raw_ms``, ``raw_min_ms`` (an op's). A model for which eager PyTorch runs
    operators the IR folds away has ``folded_work_ms`` (their median time per run, of no op's), or
    ``raw_folded_work_ms`` beside a reference (kept as measured: it has no ratio of its own). In records measured
    since edgeplan keeps them, those of its folded operators that move data are also timed one by one in
    ``folded_ops``: op dicts as ``ops`` (paired with the reference as they are), without nodes, with ``folded``,
    ``op``, ``input_shapes`` and ``output_shapes`` (:attr:`~edgeplan.measure.op_profile.ModelProfile.folded_ops`).

    ``path`` is the file it was loaded from (None when built in memory).
    """

    provenance: dict[str, Any]
    records: list[dict[str, Any]]
    path: Path | None = None

    @property
    def scenario(self) -> str:
        """The scenario the data was measured in."""
        return str(self.provenance["scenario"])

    def models(self) -> list[str]:
        """Model strings in file order."""
        return [r["model"] for r in self.records]


#: Significant digits of the real numbers a dataset file keeps: a millionth of a time, far below the runs' spread
#: (a few percent); the xz files are a third of the gzip'd ones with every digit. Noise floors and sums are
#: unchanged, but fitted figures are not reproduced to the last digit: GBDT's CV and early stopping flip on far
#: smaller perturbations (the EPYC 2t GBDT from 100 networks: zoo 12.99% from every digit, 13.49% from six).
SIGNIFICANT_DIGITS = 6


def open_dataset_file(path: str | Path, mode: str = "rt", named: str | Path | None = None) -> IO[str]:
    """A dataset file opened as text: xz when its name (or ``named``, the file it will become) ends in ``.xz``,
    gzip otherwise."""
    if str(named or path).endswith(".xz"):
        return lzma.open(path, mode, encoding="utf-8")  # type: ignore[return-value]
    return gzip.open(path, mode, encoding="utf-8")  # type: ignore[return-value]


def _rounded(value: Any) -> Any:
    """``value`` with every float to :data:`SIGNIFICANT_DIGITS` significant digits (in lists and dicts too)."""
    if isinstance(value, float):
        return float(f"{value:.{SIGNIFICANT_DIGITS}g}") if math.isfinite(value) else value
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    return value


def _write_dataset(out: str | Path, header: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> None:
    """Write a dataset file (provenance line, then one record per line, real numbers rounded to
    :data:`SIGNIFICANT_DIGITS`), whole or not at all."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    with open_dataset_file(tmp, "wt", named=out) as f:
        f.write(json.dumps(header) + "\n")
        for row in rows:
            f.write(json.dumps(_rounded(row), separators=(",", ":")) + "\n")
    tmp.replace(out)


def compact_dataset(src: str | Path, out: str | Path, command: str = "") -> int:
    """Rewrite the dataset ``src`` as ``out`` (xz for a ``.xz`` name) with its real numbers to
    :data:`SIGNIFICANT_DIGITS` significant digits; the header records when and how (``compacted``).

    Parameters
    ----------
    src, out
        The dataset file and the file to write (may be the same path only with the same suffix).
    command
        The command that did it, for the provenance.

    Returns
    -------
    int
        The records written.
    """
    data = load_dataset(src)
    header = {**data.provenance, "compacted": {"from": Path(src).name, "significant_digits": SIGNIFICANT_DIGITS,
                                               "utc": datetime.now(UTC).isoformat(timespec="seconds"),
                                               "command": command}}
    _write_dataset(out, header, data.records)
    return len(data.records)


def load_dataset(path: str | Path) -> OpDataset:
    """Read a dataset file written by :func:`export_dataset`.

    Raises
    ------
    InvalidInputError
        For a missing file, or one that is not an edgeplan op-latency dataset.
    """
    path = Path(path)
    if not path.is_file():
        raise InvalidInputError(f"dataset {path} does not exist")
    try:
        with open_dataset_file(path) as f:
            header = json.loads(f.readline())
            records = [json.loads(line) for line in f if line.strip()]
    except (OSError, EOFError, lzma.LZMAError, json.JSONDecodeError) as e:
        kind = "an xz" if path.name.endswith(".xz") else "a gzip'd"
        raise InvalidInputError(f"{path} is not {kind} JSON-lines op dataset ({e})") from e
    if not isinstance(header, dict) or header.get("format") != DATASET_FORMAT:
        raise InvalidInputError(f"{path} is not an edgeplan op-latency dataset (format {DATASET_FORMAT})")
    return OpDataset(header, records, path)


@dataclass(frozen=True)
class RetraceReport:
    """What :func:`retrace_dataset` changed: models retraced, ops whose IR nodes changed, and models left as they
    were, each with the reason (``skipped``)."""

    models: int
    ops_changed: int
    skipped: tuple[tuple[str, str], ...]


def retrace_dataset(path: str | Path, out: str | Path, models: Collection[str] | None = None,
                    command: str = "", home: str | Path | None = None, progress: bool = False) -> RetraceReport:
    """Trace an ONNX Runtime dataset's kernels to IR nodes again, with this edgeplan's tracing; nothing is timed.

    The times stay; each op's ``nodes`` (what its features come from) are recomputed from ORT's optimized graph,
    as :func:`edgeplan.measure.ort_op_profile.onnxruntime_kernel_ops` does for a prediction. A model whose kernels
    are no longer ORT's (another ORT version or export: names or order differ), or whose new nodes the record does
    not describe, is kept as it was and reported. The header records the retrace (``retraced``: when, the
    command, the counts, the earlier retraces kept).

    Parameters
    ----------
    path
        An ONNX Runtime op-latency dataset (:func:`load_dataset`).
    out
        Where to write the result (it may be ``path``; written to a temporary file, then moved in).
    models
        Retrace only these models (all when None).
    command
        The command line, for the provenance.
    home
        The edgeplan home (ONNX exports and int8 models are cached there).
    progress
        Show a progress bar.

    Returns
    -------
    RetraceReport

    Raises
    ------
    InvalidInputError
        For a dataset that is not of an ONNX Runtime scenario, or models it does not hold.
    """
    from edgeplan.measure.ort_op_profile import onnxruntime_kernel_ops
    from edgeplan.measure.progress import counting_bar

    data = load_dataset(path)
    header = dict(data.provenance)
    if header.get("runtime") != "onnxruntime":
        raise InvalidInputError(f"{path}: a dataset of {header.get('runtime')}; only ONNX Runtime datasets are traced "
                                "from a runtime's graph (eager PyTorch kernels are deduced by rules)")
    chosen = set(data.models()) if models is None else set(models)
    unknown = sorted(chosen - set(data.models()))
    if unknown:
        raise InvalidInputError(f"{path} holds no {', '.join(unknown[:5])}; `edgeplan profile ops --export` writes "
                                "a model's measurements first")
    dtype = str(header.get("dtype", "float32"))
    changed, done, skipped = 0, 0, []
    records = []
    with counting_bar(progress, "retracing", total=len(chosen)) as advance:
        for record in data.records:
            if record["model"] not in chosen:
                records.append(record)
                continue
            advance(1)
            try:
                graph, kernels = onnxruntime_kernel_ops(record["model"], dtype, home)
            except EdgeplanError as e:
                skipped.append((record["model"], str(e)))
                records.append(record)
                continue
            reason = _retrace_mismatch(record, graph, kernels)
            if reason:
                skipped.append((record["model"], reason))
                records.append(record)
                continue
            ops = [dict(op, nodes=list(nodes)) for op, (_, _, nodes) in zip(record["ops"], kernels, strict=True)]
            changed += sum(op["nodes"] != before["nodes"] for op, before in zip(ops, record["ops"], strict=True))
            used = {n for op in ops for n in op["nodes"]}
            records.append(dict(record, ops=ops, nodes={k: v for k, v in record["nodes"].items() if k in used}))
            done += 1
    if not done:
        raise InvalidInputError(f"{path}: no model could be retraced, the file is left as it was: "
                                + "; ".join(f"{m}: {r}" for m, r in skipped[:3]))
    header["retraced"] = {"utc": datetime.now(UTC).isoformat(timespec="seconds"), "command": command,
                          "models": done, "ops_changed": changed, "skipped": [m for m, _ in skipped],
                          "earlier": data.provenance.get("retraced")}
    _write_dataset(out, header, records)
    return RetraceReport(done, changed, tuple(skipped))


def _retrace_mismatch(record: Mapping[str, Any], graph: Any, kernels: Sequence[tuple[str, str, Sequence[str]]]
                      ) -> str:
    """Why ``kernels`` (ORT's now, traced to ``graph``'s nodes) cannot replace the origins of ``record``'s ops;
    empty when they can. The record's node descriptions must be those of the same IR nodes (kind and shapes)."""
    from edgeplan.ir.serialize import node_to_dict

    stored = [(op["kernel"], op["kind"]) for op in record["ops"]]
    if stored != [(name, kind) for name, kind, _ in kernels]:
        return (f"ORT now runs other kernels ({len(kernels)} against {len(stored)} stored, or other names or order): "
                "re-measure it")
    missing = sorted({n for _, _, nodes in kernels for n in nodes} - set(record["nodes"]))
    if missing:
        return f"the record does not describe IR nodes {', '.join(missing[:3])}: re-measure it"
    untraced = [name for name, _, nodes in kernels if not nodes]
    if untraced:
        return f"kernels {', '.join(untraced[:3])} are no longer traced to IR nodes"
    fields = ("op", "input_shapes", "output_shapes")
    for name in sorted({n for _, _, nodes in kernels for n in nodes}):
        now, stored = node_to_dict(graph.node(name)), record["nodes"][name]
        if any(now.get(f) != stored.get(f) for f in fields):
            return f"IR node {name} is not the node the record describes (its kind or shapes differ): re-measure it"
    return ""
