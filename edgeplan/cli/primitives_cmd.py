"""``edgeplan primitives ...``: the convolution primitives and their performance model (mulder2020), which
``edgeplan select --costs predicted`` prices layers with; and ``edgeplan profile primitives``, the campaign that
times them on this machine.

``fit``, ``evaluate`` and ``transfer`` live in :mod:`edgeplan.cli.costmodel_cmd`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from edgeplan.cli.common import Context, check_positive, emit_json, refuse_failures

if TYPE_CHECKING:
    from edgeplan.measure.primitive_campaign import ProfileReport

__all__ = ["primitives", "profile_primitives_cmd"]


def _context(ctx: click.Context) -> Context:
    found = ctx.find_object(Context)
    return found if found is not None else Context()


@click.group("primitives")
def primitives() -> None:
    """Convolution primitives and their performance model: what `select --costs predicted` prices layers with."""


@primitives.command("list")
@click.option("--family", default=None, help="Only this family (direct-sum2d, im2, kn2, wino3, ...).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def list_cmd(family: str | None, as_json: bool) -> None:
    """List every primitive: name, family, input and output layout, where it applies.

    \b
    Example:
      edgeplan primitives list --family wino3
    """
    from edgeplan.errors import InvalidInputError
    from edgeplan.primitives.registry import FAMILIES, all_primitives

    if family is not None and family not in FAMILIES:
        raise InvalidInputError(f"unknown primitive family {family!r}; use one of {', '.join(FAMILIES)}")
    rows = [{"name": p.name, "family": p.family, "input_layout": p.input_layout.value,
             "output_layout": p.output_layout.value, "rule": p.rule.text, "summary": p.info.summary}
            for p in all_primitives() if family is None or p.family == family]
    if as_json:
        emit_json(rows)
        return
    from rich.console import Console
    from rich.table import Table

    table = Table()
    table.add_column("name", no_wrap=True)
    table.add_column("family", no_wrap=True)
    table.add_column("in")
    table.add_column("out")
    table.add_column("applies to", overflow="fold")
    for row in rows:
        table.add_row(row["name"], row["family"], row["input_layout"], row["output_layout"], row["rule"])
    Console().print(table)
    click.echo(f"{len(rows)} primitives")


def _parse_configs(_ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]) -> tuple[Any, ...]:
    from edgeplan.primitives.spec import ConvSpec

    specs = []
    for text in values:
        parts = text.split(",")
        if len(parts) != 5 or not all(p.strip().isdigit() for p in parts):
            raise click.BadParameter(f"{text!r} is not C,K,IM,F,S (five positive integers, e.g. 64,64,56,3,1)")
        specs.append(ConvSpec(*(int(p) for p in parts)))
    return tuple(specs)


@click.command("primitives")
@click.option("--budget-s", type=float, default=None,
              help="Stop after this many seconds (run the command again to resume).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the measurement order and the sample.")
@click.option("--max-configs", type=click.IntRange(min=1), default=None,
              help="Measure a seeded random sample of this many configurations of the zoo space (40, about 1 % of it, "
                   "is enough to move a model to this machine with `primitives transfer`).")
@click.option("--config", "configs", multiple=True, callback=_parse_configs, metavar="C,K,IM,F,S",
              help="Measure these configurations instead of the zoo space (repeatable).")
@click.option("--network", "networks", multiple=True, metavar="MODEL",
              help="Measure the conv layers of this zoo model (repeatable; square layers a primitive can run; "
                   "the format has no padding column: 'same' padding is measured).")
@click.option("--threads", type=click.IntRange(min=1), default=1, show_default=True,
              help="Intra-op threads of every measurement (part of the campaign's name; `select --threads` runs it).")
@click.option("--primitive", "names", multiple=True, help="Only these primitives (repeatable; default all).")
@click.option("--torch-device", "device_name", default="cpu", show_default=True, metavar="cpu|cuda|cuda:N",
              help="Where the primitives run (part of the campaign's name). On CUDA oneDNN's two primitives are "
                   "left out and every timed run ends with a synchronisation.")
@click.option("--dry-run", is_flag=True, help="Show the configuration space and the campaign; measure nothing.")
@click.option("--export", "export_path", type=click.Path(dir_okay=False), default=None,
              help="Then write the campaign's completely measured configurations as a timing table (mulder2021 CSV, "
                   "ns; empty = not applicable) with OUT.provenance.json beside it: the --data of `primitives fit` "
                   "and `primitives transfer`.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def profile_primitives_cmd(ctx: click.Context, budget_s: float | None, seed: int, max_configs: int | None,
                           configs: tuple[Any, ...], networks: tuple[str, ...], threads: int, names: tuple[str, ...],
                           device_name: str, dry_run: bool, export_path: str | None, as_json: bool) -> None:
    """Time every applicable convolution primitive on the configuration space of mulder2020 §3.2.1, into the Store.

    Configurations whose work is above the campaign's cap are not measured. --config and --network measure given
    layers instead (a campaign of their own). Resumable: running the same command again measures what is missing.

    \b
    Example:
      edgeplan profile primitives --max-configs 40 --export here.csv
      edgeplan primitives transfer --data here.csv --name my-machine
      edgeplan select torchvision:resnet18 --costs predicted --device my-machine
    """
    from edgeplan.measure.profile_jobs import PrimitiveJob, profile_primitive_campaign

    check_positive("--budget-s", budget_s, "a positive number of seconds (leave it out for no budget)")
    job = PrimitiveJob(configs=configs or None, networks=networks, seed=seed, max_configs=max_configs,
                       primitives=names or None, threads=threads, torch_device=device_name)
    result = profile_primitive_campaign(job, budget_s=budget_s, dry_run=dry_run, export=export_path,
                                        progress=not as_json, command=_context(ctx).command, home=_context(ctx).home)
    report, plan = result.report, result.plan
    if as_json:
        emit_json(result.to_dict())
    elif report is None:
        click.echo(f"campaign {plan.name}\n  {plan.space_size} configurations in the space, "
                   f"{len(plan.configs)} selected, {len(plan.primitives)} primitives; store {result.store}")
    else:
        _echo_report(report)
        if result.export:
            click.echo(f"wrote {result.export.rows} configurations to {result.export.csv_path}")
    if report is not None:
        refuse_failures(len(report.failed), "primitive call(s)", as_json)


def _echo_report(report: ProfileReport) -> None:
    click.echo(f"campaign {report.campaign}")
    click.echo(f"  {report.configs_done_now} configurations measured now ({report.rows_now} rows), "
               f"{report.configs_done_before} before, {report.remaining} left, in {report.elapsed_s:.0f} s")
    if report.configs_not_exportable:
        click.echo(f"  measured but not exportable: {report.configs_not_exportable} configurations (a cell over the "
                   f"per-call cap; --export leaves them out); exportable: {report.configs_exportable}")
    left_s = report.estimated_remaining_s
    if report.configs_per_hour is not None and left_s is not None:
        rest = f"; the {report.remaining} left take about {left_s / 3600.0:.1f} h at this rate" if left_s else ""
        click.echo(f"  rate {report.configs_per_hour:.0f} configurations/hour{rest}")
    if report.over_cap:
        click.echo(f"  {len(report.over_cap)} primitive calls over the per-call cap (recorded, not repeated): "
                   + ", ".join(report.over_cap[:5]) + (" ..." if len(report.over_cap) > 5 else ""))
    for failed in report.failed:
        click.echo(f"  failed (retried on the next run): {failed.key}: {failed.reason}")
