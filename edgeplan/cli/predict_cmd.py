"""``edgeplan predict MODEL...``: latency from the graph alone, on a device profile (li2023)."""

from __future__ import annotations

from pathlib import Path

import click

from edgeplan.cli.common import Context, emit_json, keep_memory, model_specs

__all__ = ["predict"]


@click.command()
@click.argument("models", nargs=-1)
@click.option("--models-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="More models, one zoo string per line.")
@click.option("--device", default="torch-fp32-1t", show_default=True,
              help="Device profile: a measured scenario (torch-fp32-1t, ...), another shipped machine's, or a "
                   "device of the edgeplan home ($EDGEPLAN_HOME/devices/NAME/) with a latency profile, made by "
                   "`edgeplan calibrate --name NAME` or `edgeplan ops fit` (its primitive performance model, from "
                   "`edgeplan primitives transfer --name NAME`, is what `select --device` reads); an unknown name "
                   "lists them.")
@click.option("--method", type=click.Choice(["gbdt", "lasso", "rf", "mlp"]), default=None,
              help="Predictor method [default: gbdt, or the device's only one: a device calibrated from a Lasso "
                   "source has lasso].")
@click.option("--breakdown", is_flag=True, help="Per-op predictions and the runtime kernel each op became.")
@click.option("--measure", "measure_runs", type=click.IntRange(min=0), default=0,
              help="Also measure each model here, in the device's scenario, with this many profiled runs (per op "
                   "and end to end), and print the measurement beside the prediction (fitted profiles only, not "
                   "calibrated devices; under the allocator settings the profile's data were measured with).")
@click.option("--allow-opaque", is_flag=True,
              help="Predict a model with operators edgeplan does not know: they are kept as opaque nodes and listed "
                   "with the unpredicted ops, and the latency is that of the rest.")
@click.option("--json", "as_json", is_flag=True,
              help="Machine-readable output (with --measure: measured_ms, and measured_reference, the reference "
                   "model the measurement was paired with, or null).")
@click.pass_obj
def predict(ctx: Context, models: tuple[str, ...], models_file: Path | None, device: str, method: str | None,
            breakdown: bool, measure_runs: int, allow_opaque: bool, as_json: bool) -> None:
    """Predict the latency of MODELS on a device without running them (sum of per-op predictions + overhead).

    MODELS are zoo strings (``synthetic:0-99`` ranges and ``set:NAME`` sets too) or ONNX paths. Ops without a
    predictor are listed as unpredicted, never counted as 0 ms: the latency is then that of the other ops.
    A device is a shipped profile (torch-fp32-1t, ...), one made by `edgeplan calibrate --name`, or one fitted by
    `edgeplan ops fit --out $EDGEPLAN_HOME/devices/NAME`.

    \b
    Example:
      edgeplan predict torchvision:resnet18 --device torch-fp32-1t
      edgeplan predict --models-file models.txt --device my-phone --json --allow-opaque
    """
    from edgeplan.costmodels.opwise.profiles import resolve_method
    from edgeplan.decisions.predict import measure_as_profiled, measured_keeping_memory, predict_models
    from edgeplan.measure.allocator import keeps_memory

    names = model_specs(models, models_file)
    method = resolve_method(device, method, ctx.home)
    if measure_runs and not keeps_memory() and measured_keeping_memory(device, method, ctx.home):
        # glibc reads its tunables when a process starts: run this command again under them
        click.echo(f"note: {device}'s data were measured keeping freed memory (profile ops --keep-memory); "
                   "measuring under the same allocator settings", err=True)
        keep_memory(ctx)
    results = predict_models(names, device=device, method=method, home=ctx.home, progress=not as_json,
                             opaque=allow_opaque)
    measured = measure_as_profiled(names, device, measure_runs, method, ctx.home) if measure_runs else {}
    if as_json:
        rows = []
        for r in results:
            row = r.to_dict(breakdown)
            if r.model in measured:
                m = measured[r.model]
                row["measured_ms"] = m.ms
                row["measured_reference"] = m.reference
                for op in row.get("ops", []):
                    op["measured_ms"] = m.per_op.get(op["op"])
            rows.append(row)
        emit_json(rows)
        return
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(title=f"predicted latency on {device} ({method})")
    cols = ["model", "latency ms", *(["measured ms"] if measured else []), "overhead ms", "unpredicted ops"]
    for col in cols:
        table.add_column(col, justify="right" if "ms" in col else "left")
    for r in results:
        p = r.prediction
        cells = [r.model, f"{p.latency_ms:.3f}" + ("†" if not p.ops else "")]
        if measured:
            cells.append(f"{measured[r.model].ms:.3f}")
        table.add_row(*cells, f"{p.overhead_ms:.3f}" + ("*" if p.overhead_clamped else ""),
                      ", ".join(_grouped(p.unpredicted)) or "-")
    console.print(table)
    notes = []
    if any(r.prediction.overhead_clamped for r in results):
        notes.append("* overhead clamped: the learnt (negative) overhead would take the total below half the ops' "
                     "sum, so the total is raised to that; the overhead shown is the total minus the ops' sum")
    if any(r.prediction.unpredicted for r in results):
        notes.append("latency ms with unpredicted ops: the sum over the other ops and the overhead, a lower bound; "
                     "the unpredicted ops are not counted as 0 ms but left out (ops of one kind and reason are "
                     "counted, '53 x'; --json and --breakdown name each)")
    if any(not r.prediction.ops for r in results):
        notes.append(f"† no kernel runs: {device}'s runtime folds the network into a constant (its output does not "
                     "depend on its input once multiplications by zero are simplified; see `edgeplan calibrate`)")
    for r in results:
        if stand_ins := r.stand_ins():
            notes.append(f"{r.model}: {sum(e['count'] for e in stand_ins)} ops priced by a stand-in, their kernel "
                         "having no predictor of its own: " + ", ".join(
                             f"{e['count']} x {e['kernel']} by {e['predictor']} ({e['ms']:.3f} ms)" for e in stand_ins))
    for ref in sorted({m.reference for m in measured.values() if m.reference}):
        unpaired = [name for name, m in measured.items() if m.reference != ref]
        notes.append(f"measured ms: paired with the reference {ref}, timed beside every run, and converted at the "
                     "scenario's typical reference latency, as the model's training data"
                     + (f" (not {', '.join(unpaired)}: times as measured)" if unpaired else ""))
    for note in notes:
        console.print(note, soft_wrap=True, markup=False, highlight=False)
    if breakdown:
        for r in results:
            t = Table(title=f"{r.model}: per-op predictions")
            per_op = measured[r.model].per_op if r.model in measured else {}
            for col in ("op", "runtime kernel", "predictor", "ms", *(["measured ms"] if measured else [])):
                t.add_column(col, justify="right" if "ms" in col else "left")
            for o in r.prediction.ops:
                cells = [o.name, o.kind, o.predictor or "-", "unpredicted" if o.ms is None else f"{o.ms:.4f}"]
                if measured:
                    op_ms = per_op.get(o.name)
                    cells.append("-" if op_ms is None else f"{op_ms:.4f}")
                t.add_row(*cells)
            console.print(t)


def _grouped(unpredicted: list[str]) -> list[str]:
    """Unpredicted ops (``name (kind...)``) for the table: one entry per op when its kind and reason are its own,
    ``{n} x {kind...}`` for several (NFNets' weight standardizations: 53 ``aten::batch_norm``), in order."""
    from collections import Counter

    what = [u.rsplit(" (", 1)[-1].rstrip(")") if " (" in u else u for u in unpredicted]
    counts = Counter(what)
    out: list[str] = []
    for u, w in zip(unpredicted, what, strict=True):
        entry = u if counts[w] == 1 else f"{counts[w]} x {w}"
        if entry not in out:
            out.append(entry)
    return out
