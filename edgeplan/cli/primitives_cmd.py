"""``edgeplan primitives ...``: list the convolution primitives, profile them (mulder2020 §3.2.1), export the data.

``fit`` and ``evaluate`` (the primitive cost model) join this group from :mod:`edgeplan.cli.costmodel_cmd` when that
module exists; it is imported only when one of them is asked for or listed.
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from edgeplan.cli.common import Context, emit_json

if TYPE_CHECKING:
    from edgeplan.primitives.campaign import ProfileReport

__all__ = ["primitives"]

_COSTMODEL_MODULE = "edgeplan.cli.costmodel_cmd"
_COSTMODEL_COMMANDS = ("fit", "evaluate")


class _PrimitivesGroup(click.Group):
    """A group that also offers the cost-model commands of :data:`_COSTMODEL_MODULE`, loaded on demand."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        names = set(super().list_commands(ctx))
        if importlib.util.find_spec(_COSTMODEL_MODULE) is not None:
            names.update(n for n in _COSTMODEL_COMMANDS if self._costmodel_command(n) is not None)
        return sorted(names)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is None and cmd_name in _COSTMODEL_COMMANDS:
            command = self._costmodel_command(cmd_name)
        return command

    @staticmethod
    def _costmodel_command(name: str) -> click.Command | None:
        if importlib.util.find_spec(_COSTMODEL_MODULE) is None:
            return None
        module = importlib.import_module(_COSTMODEL_MODULE)
        for attr in (name, f"{name}_cmd", f"{name}_command"):
            candidate = getattr(module, attr, None)
            if isinstance(candidate, click.Command):
                return candidate
        found = [v for v in vars(module).values() if isinstance(v, click.Command) and v.name == name]
        return found[0] if found else None


def _context(ctx: click.Context) -> Context:
    found = ctx.find_object(Context)
    return found if found is not None else Context()


@click.group("primitives", cls=_PrimitivesGroup)
def primitives() -> None:
    """Convolution primitives: list them, profile them on this machine (mulder2020 §3.2.1), export the data."""


@primitives.command("list")
@click.option("--family", default=None, help="Only this family (direct-sum2d, im2, kn2, wino3, ...).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def list_cmd(family: str | None, as_json: bool) -> None:
    """List every primitive: name, family, input and output layout, where it applies."""
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


@primitives.command("triplets")
@click.option("--from-zoo", is_flag=True,
              help="Extract them again from the zoo architectures of mulder2020 Table 7 (about a minute).")
@click.option("--out", "out_path", type=click.Path(dir_okay=False), default=None,
              help="With --from-zoo, write them (with provenance) to this JSON file.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def triplets_cmd(ctx: click.Context, from_zoo: bool, out_path: str | None, as_json: bool) -> None:
    """Show the (c, k, im) triplets the campaign's configuration space is built from."""
    from edgeplan.errors import InvalidInputError
    from edgeplan.primitives.campaign import (
        ARCHITECTURES,
        config_space,
        extract_triplets,
        load_triplets,
        write_triplets,
    )

    if out_path and not from_zoo:
        raise InvalidInputError("--out writes freshly extracted triplets; add --from-zoo")
    if from_zoo:
        found = extract_triplets(ARCHITECTURES)
        if out_path:
            write_triplets(out_path, found, _context(ctx).command)
        triplets = tuple(found)
    else:
        triplets = load_triplets()
    space = config_space(triplets)
    if as_json:
        emit_json({"triplets": [list(t) for t in triplets], "space_size": len(space)})
        return
    click.echo(f"{len(triplets)} distinct (c, k, im) triplets from {len(ARCHITECTURES)} architectures; "
               f"crossed with f and s: {len(space)} configurations (f > im dropped)")


def _parse_configs(_ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]) -> tuple[Any, ...]:
    from edgeplan.primitives.spec import ConvSpec

    specs = []
    for text in values:
        parts = text.split(",")
        if len(parts) != 5 or not all(p.strip().isdigit() for p in parts):
            raise click.BadParameter(f"{text!r} is not C,K,IM,F,S (five positive integers, e.g. 64,64,56,3,1)")
        specs.append(ConvSpec(*(int(p) for p in parts)))
    return tuple(specs)


@primitives.command("profile")
@click.option("--store", "store_path", type=click.Path(dir_okay=False), default=None,
              help="Store file (default: the one in --home).")
@click.option("--budget-s", type=float, default=None, help="Stop after this many seconds (resume by running again).")
@click.option("--work-cap", type=float, default=None,
              help="Keep configurations whose work (MACs, see `edgeplan.primitives.campaign`) is at most this "
                   "[default: 3e8].")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the measurement order.")
@click.option("--max-configs", type=click.IntRange(min=1), default=None,
              help="Measure a seeded random sample of this many selected configurations.")
@click.option("--config", "configs", multiple=True, callback=_parse_configs, metavar="C,K,IM,F,S",
              help="Measure these configurations instead of the zoo space (repeatable).")
@click.option("--primitive", "names", multiple=True, help="Only these primitives (repeatable; default all).")
@click.option("--target-ms", type=float, default=20.0, show_default=True,
              help="Aimed-at total time of the timed runs of one primitive call.")
@click.option("--call-cap-ms", type=float, default=2000.0, show_default=True,
              help="A primitive whose first run is longer is recorded as over cap and not repeated.")
@click.option("--remeasure-subset", type=click.IntRange(min=1), default=None, metavar="N",
              help="Re-measure N configurations complete in the main campaign, as a separate campaign.")
@click.option("--subset-seed", type=int, default=1, show_default=True, help="Seed of the re-measured subset.")
@click.option("--dry-run", is_flag=True, help="Show the configuration space and the campaign; measure nothing.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def profile_cmd(ctx: click.Context, store_path: str | None, budget_s: float | None, work_cap: float | None,
                seed: int, max_configs: int | None, configs: tuple[Any, ...], names: tuple[str, ...],
                target_ms: float, call_cap_ms: float, remeasure_subset: int | None, subset_seed: int,
                dry_run: bool, as_json: bool) -> None:
    """Measure every applicable primitive on the configuration space of mulder2020 §3.2.1 (one thread)."""
    from edgeplan.errors import InvalidInputError
    from edgeplan.measure.device import describe_device
    from edgeplan.measure.paths import default_store_path
    from edgeplan.measure.store import Store
    from edgeplan.primitives.campaign import (
        DEFAULT_WORK_CAP,
        TimingPlan,
        primitive_campaign,
        profile_primitives,
        remeasure_campaign,
    )

    if configs and (work_cap is not None or max_configs is not None):
        raise InvalidInputError("--work-cap and --max-configs select from the zoo space; drop them with --config")
    command = _context(ctx).command
    device = describe_device("torch", 1)
    cap = DEFAULT_WORK_CAP if work_cap is None else work_cap
    plan = primitive_campaign(device.key, configs=configs or None, work_cap=cap, seed=seed,
                              max_configs=max_configs, primitives=names or None,
                              timing=TimingPlan(target_ms=target_ms, call_cap_ms=call_cap_ms))
    with Store.open(store_path or default_store_path(_context(ctx).home)) as store:
        if remeasure_subset is not None:
            plan = remeasure_campaign(store, plan, remeasure_subset, subset_seed)
        summary = {"store": str(store.path), "campaign": plan.name, "space_size": plan.space_size,
                   "configs": len(plan.configs), "primitives": len(plan.primitives)}
        if dry_run:
            if as_json:
                emit_json({**summary, "params": dict(plan.params)})
            else:
                click.echo(f"campaign {plan.name}\n  {plan.space_size} configurations in the space, "
                           f"{len(plan.configs)} selected, {len(plan.primitives)} primitives; store {store.path}")
            return
        report = profile_primitives(store, plan, device, budget_s=budget_s, progress=not as_json, command=command)
    if as_json:
        emit_json({**summary, **report.to_dict()})
        return
    _echo_report(report)


def _echo_report(report: ProfileReport) -> None:
    click.echo(f"campaign {report.campaign}")
    click.echo(f"  {report.configs_done_now} configurations measured now ({report.rows_now} rows), "
               f"{report.configs_done_before} before, {report.remaining} left, in {report.elapsed_s:.0f} s")
    left_s = report.estimated_remaining_s
    if report.configs_per_hour is not None and left_s is not None:
        rest = f"; the {report.remaining} left take about {left_s / 3600.0:.1f} h at this rate" if left_s else ""
        click.echo(f"  rate {report.configs_per_hour:.0f} configurations/hour{rest}")
    if report.over_cap:
        click.echo(f"  {len(report.over_cap)} primitive calls over the per-call cap (recorded, not repeated): "
                   + ", ".join(report.over_cap[:5]) + (" ..." if len(report.over_cap) > 5 else ""))
    for failed in report.failed:
        click.echo(f"  failed (retried on the next run): {failed.key}: {failed.reason}")


@primitives.command("export")
@click.option("--out", "out_path", type=click.Path(dir_okay=False), required=True, help="The CSV file to write.")
@click.option("--store", "store_path", type=click.Path(dir_okay=False), default=None,
              help="Store file (default: the one in --home).")
@click.option("--campaign", "campaign_name", default=None,
              help="The campaign to export (default: the only main primitive campaign in the Store).")
@click.option("--include-incomplete", is_flag=True,
              help="Also write configurations with a primitive missing or over cap (those cells empty).")
@click.option("--no-provenance", is_flag=True, help="Do not write OUT.provenance.json beside the CSV.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def export_cmd(ctx: click.Context, out_path: str, store_path: str | None, campaign_name: str | None,
               include_incomplete: bool, no_provenance: bool, as_json: bool) -> None:
    """Write the measurements in the mulder2021 CSV format (ns; empty = not applicable) with provenance."""
    from edgeplan.errors import StoreError
    from edgeplan.measure.paths import default_store_path
    from edgeplan.measure.store import Store
    from edgeplan.primitives.campaign import export_dataset, find_campaign

    path = Path(store_path) if store_path else default_store_path(_context(ctx).home)
    if not path.is_file():
        raise StoreError(f"no Store at {path}; run `edgeplan primitives profile` first or pass --store FILE")
    with Store.open(path) as store:
        campaign = find_campaign(store, campaign_name)
        summary = export_dataset(store, campaign, out_path, command=_context(ctx).command,
                                 include_incomplete=include_incomplete, provenance=not no_provenance)
    if as_json:
        emit_json({"campaign": campaign.name, **summary.to_dict()})
        return
    click.echo(f"wrote {summary.rows} configurations of {campaign.name} to {summary.csv_path}"
               + (f" (+ {summary.provenance_path.name})" if summary.provenance_path else ""))
    if summary.incomplete:
        verb = "written with empty cells" if include_incomplete else "left out (--include-incomplete writes them)"
        click.echo(f"  {summary.incomplete} incomplete configurations {verb}")
