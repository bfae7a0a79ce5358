"""``edgeplan profile ranges MODEL...``: measure every contiguous layer range (the offloading cost input)."""

from __future__ import annotations

from pathlib import Path

import click

from edgeplan.cli.common import Context, check_positive, emit_json, refuse_failures

__all__ = ["profile_ranges"]


@click.command("ranges")
@click.argument("models", nargs=-1, required=True)
@click.option("--threads", "threads_list", type=int, multiple=True, default=(1,), show_default=True,
              help="Intra-op threads; repeat the option to profile several counts (e.g. --threads 1 --threads 2).")
@click.option("--repeats", type=click.IntRange(min=1), default=9, show_default=True,
              help="Timed sweeps per start layer.")
@click.option("--budget-s", type=float, default=None, help="Stop after this many seconds (resume by running again).")
@click.option("--export", "export_path", type=click.Path(dir_okay=False), default=None,
              help="Afterwards, write the models' ranges with provenance to this JSON file.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_obj
def profile_ranges(ctx: Context, models: tuple[str, ...], threads_list: tuple[int, ...], repeats: int,
                   budget_s: float | None, export_path: str | None, as_json: bool) -> None:
    """Measure the latency of every layer range i..j of each MODEL (n(n+1)/2 values) into the Store; resumable.

    These are the costs `edgeplan offload` plans with (its --costs store reads them).

    \b
    Example:
      edgeplan profile ranges paper:chair --threads 1 --export ranges.json
      edgeplan offload paper:chair --network wifi --costs store
    """
    import time

    from edgeplan.errors import InvalidInputError
    from edgeplan.measure import check_thread_count
    from edgeplan.measure.paths import default_store_path
    from edgeplan.measure.range_files import export_range_tables
    from edgeplan.measure.range_profile import SweepConfig, profile_ranges
    from edgeplan.measure.store import Store

    for t in threads_list:
        check_thread_count(t)
    check_positive("--budget-s", budget_s, "a positive number of seconds (leave it out for no budget)")
    config = SweepConfig(repeats=repeats)
    started = time.monotonic()
    reports = []
    failed = 0
    with Store.open(default_store_path(ctx.home)) as store:
        for model in models:
            for threads in threads_list:
                left = None if budget_s is None else budget_s - (time.monotonic() - started)
                if left is not None and left <= 0:
                    break
                report = profile_ranges(store, model, threads=threads, config=config, budget_s=left,
                                        progress=not as_json, command=ctx.command)
                reports.append(report.to_dict())
                failed += len(report.failed)
                if not as_json:
                    click.echo(f"{model} at {threads} thread(s): {report.done_now} ranges measured, "
                               f"{report.done_before} already stored, {report.remaining} left "
                               f"({report.elapsed_s:.1f} s)")
                    for f in report.failed:
                        click.echo(f"  not measured: {f.key}: {f.reason}")
        exported = None
        if export_path:
            try:
                exported = export_range_tables(store, list(models), Path(export_path), ctx.command)
            except OSError as e:
                raise InvalidInputError(f"cannot write {export_path}: {e.strerror}; the measurements are safe in "
                                        f"{store.path}, export again to a writable path") from e
            if not as_json:
                click.echo(f"wrote {exported} tables to {export_path}")
        if as_json:
            emit_json({"store": str(store.path), "campaigns": reports, "exported_tables": exported})
    refuse_failures(failed, "range(s)", as_json)
