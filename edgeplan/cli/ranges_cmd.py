"""``edgeplan profile ranges MODEL...``: measure every contiguous layer range (the offloading cost input)."""

from __future__ import annotations

from pathlib import Path

import click

from edgeplan.cli.common import Context, check_positive, emit_json, refuse_failures

__all__ = ["profile_ranges_cmd"]


@click.command("ranges")
@click.argument("models", nargs=-1, required=True)
@click.option("--threads", "threads_list", type=int, multiple=True, default=(1,), show_default=True,
              help="Intra-op threads; repeat the option to profile several counts (e.g. --threads 1 --threads 2).")
@click.option("--repeats", type=click.IntRange(min=1), default=9, show_default=True,
              help="Timed sweeps per start layer.")
@click.option("--budget-s", type=float, default=None,
              help="Stop after this many seconds in all, every model and thread count together (resume by running "
                   "again).")
@click.option("--export", "export_path", type=click.Path(dir_okay=False), default=None,
              help="Afterwards, write the models' ranges with provenance to this JSON file.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_obj
def profile_ranges_cmd(ctx: Context, models: tuple[str, ...], threads_list: tuple[int, ...], repeats: int,
                       budget_s: float | None, export_path: str | None, as_json: bool) -> None:
    """Measure the latency of every layer range i..j of each MODEL (n(n+1)/2 values) into the Store; resumable.

    These are the costs `edgeplan offload` plans with (its --costs store reads them).

    \b
    Example:
      edgeplan profile ranges paper:chair --threads 1 --export ranges.json
      edgeplan offload paper:chair --network wifi --costs store
    """
    from edgeplan.measure.profile_jobs import profile_range_tables
    from edgeplan.measure.range_profile import SweepConfig

    check_positive("--budget-s", budget_s, "a positive number of seconds (leave it out for no budget)")
    result = profile_range_tables(models, threads_list, config=SweepConfig(repeats=repeats), budget_s=budget_s,
                                  export=Path(export_path) if export_path else None, progress=not as_json,
                                  command=ctx.command, home=ctx.home)
    if as_json:
        emit_json(result.to_dict())
    else:
        for sweep in result.sweeps:
            report = sweep.report
            click.echo(f"{sweep.model} at {sweep.threads} thread(s): {report.done_now} ranges measured, "
                       f"{report.done_before} already stored, {report.remaining} left ({report.elapsed_s:.1f} s)")
            for f in report.failed:
                click.echo(f"  not measured: {f.key}: {f.reason}")
        for model, threads in result.not_started:
            click.echo(f"{model} at {threads} thread(s): not started; stopped by the budget")
        if result.exported_tables is not None:
            click.echo(f"wrote {result.exported_tables} tables to {export_path}")
    refuse_failures(result.failed, "range(s)", as_json)
