"""``edgeplan measure MODEL``: end-to-end latency on this machine, stored with its provenance."""

from __future__ import annotations

import click

from edgeplan.cli.common import KEEP_MEMORY_HELP, Context, check_positive, emit_json, keep_memory

__all__ = ["measure"]


@click.command()
@click.argument("model")
@click.option("--threads", type=int, default=1, show_default=True, help="Intra-op threads (set and recorded).")
@click.option("--runtime", type=click.Choice(["torch", "onnxruntime", "litert"]), default="torch", show_default=True,
              help="torch: eager PyTorch; onnxruntime: the model exported to ONNX (cached), on the CPU provider; "
                   "litert: the model converted to .tflite (cached), run by LiteRT with XNNPACK as on a phone.")
@click.option("--dtype", type=click.Choice(["float32", "int8"]), default="float32", show_default=True,
              help="int8 (litert): the model quantized after training, int8 weights and activations.")
@click.option("--repeats", type=int, default=None,
              help="Exactly this many timed runs (default: adaptive, until the median's 95% CI is within +-2%).")
@click.option("--max-time", "max_time_s", type=float, default=10.0, show_default=True, help="Time cap in seconds.")
@click.option("--input-shape", default=None, help="Override the default input shape, e.g. 1x3x160x160.")
@click.option("--keep-memory", "keep", is_flag=True, help=KEEP_MEMORY_HELP)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_obj
def measure(ctx: Context, model: str, threads: int, runtime: str, dtype: str, repeats: int | None,
            max_time_s: float, input_shape: str | None, keep: bool, as_json: bool) -> None:
    """Measure the end-to-end latency of MODEL on this machine and store it (median of repeated runs).

    \b
    Example:
      edgeplan measure torchvision:resnet18 --runtime torch --threads 2 --json
      edgeplan measure model.tflite --runtime litert
    """
    if keep:  # first: what this process would print before, its replacement prints again
        keep_memory(ctx)
    from edgeplan.decisions.measure import measure_latency, timing_config
    from edgeplan.frontends.zoo import parse_shape
    from edgeplan.measure import check_thread_count

    check_thread_count(threads)
    check_positive("--max-time", max_time_s, "a positive number of seconds")
    if repeats is not None and repeats < 1:
        raise click.BadParameter(f"must be a positive integer, got {repeats}", param_hint="--repeats")
    shape = parse_shape(input_shape) if input_shape else None
    from rich.console import Console

    with Console(stderr=True).status(f"measuring {model} ({runtime}, {threads} thread(s))", spinner="dots"):
        result = measure_latency(model, runtime=runtime, threads=threads, dtype=dtype,
                                 timing=timing_config(repeats, max_time_s), input_shape=shape, home=ctx.home,
                                 command=ctx.command)
    for warning in result.warnings:  # measured anyway, but never silent
        click.echo(f"warning: {warning}", err=True)
    t = result.timing
    if as_json:
        emit_json({
            "model": model, "runtime": runtime, "dtype": dtype, "threads": threads, "latency_ms": t.median_ms,
            "p25_ms": t.p25_ms, "p75_ms": t.p75_ms, "min_ms": t.min_ms, "max_ms": t.max_ms, "std_ms": t.std_ms,
            "iqr_rel": t.iqr_rel, "ci_rel": t.ci_rel, "repeats": t.repeats, "stopped_by": t.stopped_by,
            "device": result.device.to_dict(), "store": str(result.store_path), "id": result.record_id,
        })
        return
    click.echo(
        f"{model}: {t.median_ms:.3f} ms median  (IQR {t.p25_ms:.3f}-{t.p75_ms:.3f} ms, +-{100 * t.ci_rel:.1f}% CI, "
        f"n={t.repeats}, stopped by {t.stopped_by})\n"
        f"  {runtime} {result.device.runtime_version}, {dtype}, {threads} thread(s), {result.device.cpu_model}\n"
        f"  stored as #{result.record_id} in {result.store_path}"
    )
