"""What ``edgeplan calibrate`` learns from: latencies measured on a device, read from a measurements CSV or from a
per-op dataset (``edgeplan profile ops --export``), and the source's predictions of the same models."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from edgeplan.costmodels.opwise.calibrate import read_measurements, source_terms
from edgeplan.costmodels.opwise.model import LatencyModel
from edgeplan.costmodels.opwise.ops import record_latency
from edgeplan.errors import InvalidInputError
from edgeplan.measure.op_dataset import load_dataset

__all__ = ["measured_records", "measured_terms"]


def measured_terms(models: Sequence[str], source: LatencyModel, deductions: Sequence[str] = ("as-source",),
                   progress: bool = False, home: str | Path | None = None,
                   ) -> tuple[dict[str, list[dict[str, float]]], list[str], dict[str, str]]:
    """:func:`~edgeplan.costmodels.opwise.calibrate.source_terms` of zoo models (or ONNX files) under each deduction:
    what ``edgeplan calibrate`` corrects. An ONNX Runtime source runs what ORT's optimizer keeps (``as-source`` only);
    ``home`` caches its exports.

    Returns
    -------
    tuple
        The terms by deduction (one per kept model), the kept models, and ``{model: reason}`` for the models left
        out (an operator the frontend refuses, an op the source has no predictor for): named, never scored.
    """
    from edgeplan.costmodels.opwise.graph_ops import ORT_OBSERVED, graph_ops, spec_ops
    from edgeplan.costmodels.opwise.profiles import kernel_profile_of
    from edgeplan.errors import EdgeplanError
    from edgeplan.frontends.zoo import load_graph
    from edgeplan.measure.progress import counting_bar

    profile = kernel_profile_of(source)
    if profile in ORT_OBSERVED:
        deductions = [d for d in deductions if d == "as-source"]  # ORT runs what its optimizer keeps
    out: dict[str, list[dict[str, float]]] = {d: [] for d in deductions}
    kept: list[str] = []
    left: dict[str, str] = {}
    with counting_bar(progress, "source predictions", total=len(models)) as advance:
        for spec in models:
            try:
                graph = None if profile in ORT_OBSERVED else load_graph(spec)
                row = {}
                for deduction in deductions:
                    ops, skipped = spec_ops(spec, profile, home) if graph is None else \
                        graph_ops(graph, profile, deduction)
                    if skipped:
                        raise InvalidInputError(f"kernels {', '.join(skipped)} have no IR nodes to predict from")
                    row[deduction] = source_terms(source.predict_ops(ops), ops)
            except EdgeplanError as e:
                left[spec] = str(e)
            else:
                kept.append(spec)
                for deduction, t in row.items():
                    out[deduction].append(t)
            advance(1)
    return out, kept, left


def measured_records(path: str | Path, statistic: str = "median",
                     ) -> tuple[list[tuple[str, float]], dict[str, dict[str, Any]] | None]:
    """``(model, latency_ms)`` of a measurements CSV (``model,latency_ms``, checked as ``calibrate`` checks it) or of
    a per-op dataset (``.jsonl.gz`` or ``.jsonl.xz``: each model's end-to-end ``statistic`` over runs, paired with the
    reference model when the campaign had one); and for a dataset its records by model (the operations measured too,
    which the ``per-op`` correction learns from), None for a CSV."""
    if str(path).endswith((".gz", ".xz")):
        records = load_dataset(path).records
        return ([(r["model"], float(record_latency(r, statistic))) for r in records],
                {r["model"]: r for r in records})
    return read_measurements(path), None
