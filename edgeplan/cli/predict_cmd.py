"""``edgeplan predict MODEL...``: latency from the graph alone, on a device profile (li2023)."""

from __future__ import annotations

from pathlib import Path

import click

from edgeplan.cli.common import Context, emit_json, model_specs

__all__ = ["predict"]


@click.command()
@click.argument("models", nargs=-1)
@click.option("--models-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="More models, one zoo string per line.")
@click.option("--device", default="torch-fp32-2t", show_default=True,
              help="Device profile: a measured scenario, or a device made by `edgeplan calibrate`.")
@click.option("--method", type=click.Choice(["gbdt", "lasso", "rf", "mlp"]), default="gbdt", show_default=True)
@click.option("--breakdown", is_flag=True, help="Per-op predictions and the runtime kernel each op became.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_obj
def predict(ctx: Context, models: tuple[str, ...], models_file: Path | None, device: str, method: str,
            breakdown: bool, as_json: bool) -> None:
    """Predict the latency of MODELS on a device without running them (sum of per-op predictions + overhead).

    MODELS are zoo strings (``synthetic:0-99`` ranges and ``set:NAME`` sets too) or ONNX paths. Ops without a
    predictor are listed as unpredicted, never counted as 0 ms.
    """
    from edgeplan.latency.predict import predict_models

    names = model_specs(models, models_file)
    results = predict_models(names, device=device, method=method, home=ctx.home, progress=not as_json)
    if as_json:
        emit_json([r.to_dict(breakdown) for r in results])
        return
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(title=f"predicted latency on {device} ({method})")
    for col in ("model", "latency ms", "overhead ms", "unpredicted ops"):
        table.add_column(col, justify="right" if "ms" in col else "left")
    for r in results:
        p = r.prediction
        table.add_row(r.model, f"{p.latency_ms:.3f}", f"{p.overhead_ms:.3f}", ", ".join(p.unpredicted) or "-")
    console.print(table)
    if breakdown:
        for r in results:
            t = Table(title=f"{r.model}: per-op predictions")
            for col in ("op", "runtime kernel", "predictor", "ms"):
                t.add_column(col, justify="right" if col == "ms" else "left")
            for o in r.prediction.ops:
                key = ("category " + o.key.split("|")[-1]) if o.by_category else o.key
                t.add_row(o.name, o.kind, key or "-", "unpredicted" if o.ms is None else f"{o.ms:.4f}")
            console.print(t)
