"""``edgeplan primitives ...``: list the convolution primitives, profile them (mulder2020 §3.2.1), export the data.

``fit`` and ``evaluate`` (the primitive cost model) join this group from :mod:`edgeplan.cli.costmodel_cmd` when that
module exists; it is imported only when one of them is asked for or listed.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import math
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from edgeplan.cli.common import Context, check_positive, emit_json, refuse_failures

if TYPE_CHECKING:
    from edgeplan.measure.primitive_campaign import CapCoverage, NoiseFloor, ProfileReport
    from edgeplan.measure.store import Store

__all__ = ["primitives"]

_COSTMODEL_MODULE = "edgeplan.cli.costmodel_cmd"
_COSTMODEL_COMMANDS = ("fit", "evaluate", "transfer")


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
    from edgeplan.measure.primitive_campaign import (
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
              help="Keep configurations whose work (MACs, see `edgeplan.measure.primitive_campaign`) is at most this "
                   "[default: 3e8].")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the measurement order.")
@click.option("--max-configs", type=click.IntRange(min=1), default=None,
              help="Measure a seeded random sample of this many selected configurations.")
@click.option("--config", "configs", multiple=True, callback=_parse_configs, metavar="C,K,IM,F,S",
              help="Measure these configurations instead of the zoo space (repeatable).")
@click.option("--network", "networks", multiple=True, metavar="MODEL",
              help="Measure the conv layers of this zoo model (repeatable; square layers a primitive can run; "
                   "the format has no padding column: 'same' padding is measured).")
@click.option("--threads", type=click.IntRange(min=1), default=1, show_default=True,
              help="Intra-op threads of every measurement (part of the campaign's name).")
@click.option("--primitive", "names", multiple=True, help="Only these primitives (repeatable; default all).")
@click.option("--device", "device_name", default="cpu", show_default=True, metavar="cpu|cuda|cuda:N",
              help="Where the primitives run (part of the campaign's name). On CUDA oneDNN's two primitives are "
                   "left out and every timed run ends with a synchronisation.")
@click.option("--target-ms", type=float, default=20.0, show_default=True,
              help="Aimed-at total time of the timed runs of one primitive call.")
@click.option("--call-cap-ms", type=float, default=2000.0, show_default=True,
              help="A primitive whose first run is longer is recorded as over cap and not repeated.")
@click.option("--remeasure-subset", type=click.IntRange(min=1), default=None, metavar="N",
              help="Re-measure N configurations complete in the main campaign, as a separate campaign.")
@click.option("--subset-seed", type=int, default=1, show_default=True, help="Seed of the re-measured subset.")
@click.option("--dry-run", is_flag=True, help="Show the configuration space and the campaign; measure nothing.")
@click.option("--coverage", is_flag=True,
              help="With --dry-run: per (f, s), how many zoo triplets the work cap keeps (the rest is not measured).")
@click.option("--above-cap", type=click.IntRange(min=1), default=None, metavar="N",
              help="A separate campaign (never the main one): N configurations above the work cap, stratified by "
                   "log work, plus the zoo's real layers above it; a 1 s per-call cap and 2-5 repeats unless "
                   "--call-cap-ms / --target-ms are given. Loads the zoo's models (about a minute) when new.")
@click.option("--above-cap-bins", type=click.IntRange(min=1), default=8, show_default=True,
              help="Log-work bins of the --above-cap sample.")
@click.option("--above-cap-max-work", type=float, default=1e10, show_default=True,
              help="Largest work of the --above-cap sample (it bounds the first, unrepeated run of a call).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def profile_cmd(ctx: click.Context, store_path: str | None, budget_s: float | None, work_cap: float | None,
                seed: int, max_configs: int | None, configs: tuple[Any, ...], networks: tuple[str, ...],
                threads: int, names: tuple[str, ...], device_name: str, target_ms: float, call_cap_ms: float,
                remeasure_subset: int | None, subset_seed: int,
                dry_run: bool, coverage: bool, above_cap: int | None, above_cap_bins: int, above_cap_max_work: float,
                as_json: bool) -> None:
    """Measure every applicable primitive on the configuration space of mulder2020 §3.2.1 (one thread).

    Configurations above the work cap are not measured (see --dry-run --coverage). --config and --network measure
    given layers instead (a campaign of their own).
    """
    from edgeplan.errors import InvalidInputError
    from edgeplan.measure.device import describe_device
    from edgeplan.measure.paths import default_store_path
    from edgeplan.measure.primitive_campaign import (
        DEFAULT_WORK_CAP,
        AboveCapOptions,
        TimingPlan,
        above_cap_campaign,
        cap_coverage,
        estimate_duration_s,
        load_triplets,
        primitive_campaign,
        profile_primitives,
        remeasure_campaign,
    )
    from edgeplan.measure.store import Store

    check_positive("--target-ms", target_ms, "a positive number of milliseconds")
    check_positive("--call-cap-ms", call_cap_ms, "a positive number of milliseconds")
    if configs and (work_cap is not None or max_configs is not None or coverage):
        raise InvalidInputError("--work-cap, --max-configs and --coverage are about the zoo space; drop them "
                                "with --config")
    if coverage and not dry_run:
        raise InvalidInputError("--coverage describes the selection without measuring; add --dry-run")
    if above_cap is not None and (configs or max_configs is not None or remeasure_subset is not None):
        raise InvalidInputError("--above-cap is a campaign of its own; drop --config, --max-configs and "
                                "--remeasure-subset")
    if networks:
        if configs or max_configs is not None or coverage or above_cap is not None or work_cap is not None:
            raise InvalidInputError("--network measures a model's layers; drop --config, --work-cap, --max-configs, "
                                    "--coverage and --above-cap")
        configs = _network_configs(networks)
    if above_cap is not None and device_name != "cpu":
        raise InvalidInputError("--above-cap is measured on the CPU; drop --device or --above-cap")
    command = _context(ctx).command
    device = describe_device("torch", threads, torch_device=device_name)
    cap = DEFAULT_WORK_CAP if work_cap is None else work_cap
    plan = primitive_campaign(device.key, configs=configs or None, work_cap=cap, seed=seed,
                              max_configs=max_configs, primitives=names or None,
                              timing=TimingPlan(target_ms=target_ms, call_cap_ms=call_cap_ms), threads=threads,
                              device=device_name)
    real_store = Path(store_path or default_store_path(_context(ctx).home)).expanduser()
    with contextlib.ExitStack() as stack:
        opened = real_store
        if dry_run and (not real_store.is_file() or real_store.stat().st_size == 0):
            # a dry run writes nothing: with no Store there yet it plans against an empty one in a scratch folder
            opened = Path(stack.enter_context(tempfile.TemporaryDirectory())) / "dry-run.sqlite"
        store = stack.enter_context(Store.open(opened))
        if remeasure_subset is not None:
            plan = remeasure_campaign(store, plan, remeasure_subset, subset_seed)
        main = plan
        skipped: list[str] = []
        if above_cap is not None:
            options = AboveCapOptions(above_cap, above_cap_bins, seed, cap, above_cap_max_work, TimingPlan(
                target_ms=target_ms, min_repeats=2, max_repeats=5,
                call_cap_ms=call_cap_ms if _given(ctx, "call_cap_ms") else 1000.0))
            plan = above_cap_campaign(device.key, options, real_layers=_real_layers(skipped), store=store,
                                      primitives=names or None)
        summary = {"store": str(real_store), "campaign": plan.name, "space_size": plan.space_size,
                   "configs": len(plan.configs), "primitives": len(plan.primitives)}
        if dry_run:
            rows = cap_coverage(load_triplets(), cap, with_fft="fft" in plan.primitives) if coverage else ()
            extra: dict[str, Any] = {"coverage": [r.to_dict() for r in rows]} if coverage else {}
            if above_cap is not None:
                source = _rates_source(store, main.name)
                estimate = estimate_duration_s(plan, store.measurements(campaign=source))
                extra.update(estimated_s=estimate, rates_from=source, skipped_layers=skipped)
            if as_json:
                emit_json({**summary, "params": dict(plan.params), **extra})
                return
            click.echo(f"campaign {plan.name}\n  {plan.space_size} configurations in the space, "
                       f"{len(plan.configs)} selected, {len(plan.primitives)} primitives; store {real_store}")
            if above_cap is not None:
                _echo_above_cap(plan.params["above_cap"], extra)
            if coverage:
                _echo_coverage(rows, cap)
            return
        report = profile_primitives(store, plan, device, budget_s=budget_s, progress=not as_json, command=command)
    if as_json:
        emit_json({**summary, **report.to_dict()})
    else:
        _echo_report(report)
    refuse_failures(len(report.failed), "primitive call(s)", as_json)


def _network_configs(networks: tuple[str, ...]) -> tuple[Any, ...]:
    """The distinct ``ConvSpec`` (padding 'same', as the data format) of the runnable conv layers of zoo models."""
    from edgeplan.decisions.select import runnable
    from edgeplan.frontends.zoo import load_graph
    from edgeplan.planners.pbqp.network import conv_shape
    from edgeplan.primitives.spec import ConvSpec

    found: dict[tuple[int, ...], None] = {}
    for spec in networks:
        for node in load_graph(spec).nodes:
            shape = conv_shape(node)
            if shape is not None and runnable(shape):
                found.setdefault(shape[:5])
    return tuple(ConvSpec(*shape) for shape in found)


def _given(ctx: click.Context, name: str) -> bool:
    """Whether the option ``name`` was given (not its default)."""
    return ctx.get_parameter_source(name) not in (None, click.core.ParameterSource.DEFAULT)


def _rates_source(store: Store, main: str) -> str:
    """The campaign whose rates estimate the above-cap campaign's time: ``main``, else the Store's only main one."""
    from edgeplan.errors import InvalidInputError
    from edgeplan.measure.primitive_campaign import find_campaign

    if any(c.name == main for c in store.campaigns()):
        return main
    try:
        return find_campaign(store).name
    except InvalidInputError:
        return main


def _real_layers(skipped: list[str]) -> Callable[[], Iterable[tuple[int, int, int, int, int]]]:
    """The zoo's real square conv layers, loaded when called; the layers that are not square go to ``skipped``."""
    def load() -> Iterable[tuple[int, int, int, int, int]]:
        from edgeplan.measure.primitive_campaign import extract_layers

        layers, odd = extract_layers()
        skipped.extend(odd)
        return layers

    return load


def _echo_above_cap(above: dict[str, Any], extra: dict[str, Any]) -> None:
    click.echo(f"  above-cap campaign: {above['sampled']} configurations sampled in {above['bins']} log-work bins "
               f"over ({above['work_cap']:g}, {above['max_work']:g}] + {len(above['real_layers'])} real layers of "
               "the zoo above the cap")
    if extra["skipped_layers"]:
        click.echo(f"  {len(extra['skipped_layers'])} conv layers with a non-square kernel or stride are no "
                   f"configuration, skipped: {', '.join(extra['skipped_layers'][:3])}"
                   + (" ..." if len(extra["skipped_layers"]) > 3 else ""))
    estimate = extra["estimated_s"]
    click.echo(f"  estimated time about {estimate / 3600:.1f} h (rough: the 90th-percentile rates of "
               f"{extra['rates_from']})" if estimate is not None else
               f"  no time estimate: {extra['rates_from']} has no rate for some primitive; measure it first")


def _echo_coverage(rows: tuple[CapCoverage, ...], cap: float) -> None:
    kept, total = sum(r.kept for r in rows), sum(r.triplets for r in rows)
    click.echo(f"  coverage at work cap {cap:g}: {kept} of {total} configurations kept; the other {total - kept} "
               "are NOT in the dataset (nothing is sampled above the cap: predictions there extrapolate)")
    click.echo(f"  {'f':>3} {'s':>2} {'triplets':>9} {'kept':>6} {'kept %':>7} {'largest work':>13}")
    for r in rows:
        share = f"{100 * r.fraction_kept:.0f} %" if r.triplets else "-"
        click.echo(f"  {r.f:>3} {r.s:>2} {r.triplets:>9} {r.kept:>6} {share:>7} {r.max_work:>13.2g}")


def _echo_report(report: ProfileReport) -> None:
    click.echo(f"campaign {report.campaign}")
    click.echo(f"  {report.configs_done_now} configurations measured now ({report.rows_now} rows), "
               f"{report.configs_done_before} before, {report.remaining} left, in {report.elapsed_s:.0f} s")
    if report.configs_not_exportable:
        click.echo(f"  measured but not exportable: {report.configs_not_exportable} configurations (a cell over the "
                   f"per-call cap; `export` leaves them out, `export --include-incomplete` writes them and lists "
                   f"the cells in OUT.not_measured.csv); exportable: {report.configs_exportable}")
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
              help="Also write configurations with a cell missing or over cap (those cells empty, and listed with "
                   "their reason in OUT.not_measured.csv).")
@click.option("--no-provenance", is_flag=True, help="Do not write OUT.provenance.json beside the CSV.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def export_cmd(ctx: click.Context, out_path: str, store_path: str | None, campaign_name: str | None,
               include_incomplete: bool, no_provenance: bool, as_json: bool) -> None:
    """Write the measurements in the mulder2021 CSV format (ns; empty = not applicable) with provenance."""
    from edgeplan.errors import StoreError
    from edgeplan.measure.paths import default_store_path
    from edgeplan.measure.primitive_campaign import export_dataset, find_campaign
    from edgeplan.measure.store import Store

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
        click.echo(f"  {summary.incomplete} incomplete configurations {verb}, {summary.not_exportable} of them "
                   "measured but not exportable (a cell over the per-call cap)")
    if summary.not_measured_path is not None:
        click.echo(f"  {summary.over_cap_cells} over-cap and {summary.missing_cells} missing cells listed in "
                   f"{summary.not_measured_path.name} (an empty cell not listed there does not apply)")


@primitives.command("noise")
@click.argument("csv_files", nargs=-1, type=click.Path(dir_okay=False))
@click.option("--store", "store_path", type=click.Path(dir_okay=False), default=None,
              help="Compare two campaigns of this Store instead of two CSV files.")
@click.option("--campaign", "campaign_name", default=None,
              help="With --store: the reference campaign (default: the only main primitive campaign).")
@click.option("--against", "against_name", default=None,
              help="With --store: the other campaign (default: the re-measured subset of the reference).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def noise_cmd(csv_files: tuple[str, ...], store_path: str | None, campaign_name: str | None,
              against_name: str | None, as_json: bool) -> None:
    """The dataset's noise floor: how much two runs differ on their shared configurations.

    Give two exported CSVs (REFERENCE AGAIN, e.g. the main export and the --remeasure-subset export), or --store.
    Per column: the MdRAE |b - a| / a between the runs (the cost models' MdRAE), then its median over the
    primitives and over the non-identity transformations.
    """
    from edgeplan.errors import InvalidInputError, StoreError
    from edgeplan.measure.primitive_campaign import campaign_dataset, find_campaign, find_remeasure, noise_floor
    from edgeplan.measure.store import Store

    if store_path is None:
        if len(csv_files) != 2 or campaign_name or against_name:
            raise InvalidInputError("give two exported CSV files (REFERENCE AGAIN), or --store FILE with "
                                    "optional --campaign and --against")
        from edgeplan.measure.primitive_data import load_primitive_csv

        result = noise_floor(load_primitive_csv(csv_files[0]), load_primitive_csv(csv_files[1]))
    else:
        if csv_files:
            raise InvalidInputError("give either two CSV files or --store, not both")
        if not Path(store_path).is_file():
            raise StoreError(f"no Store at {store_path}; pass the Store the campaigns were measured into")
        with Store.open(store_path) as store:
            reference = find_campaign(store, campaign_name)
            against = (find_campaign(store, against_name) if against_name is not None
                       else find_remeasure(store, reference))
            result = noise_floor(campaign_dataset(store, reference), campaign_dataset(store, against))
    if as_json:
        emit_json(result.to_dict())
        return
    _echo_noise(result)


def _percent(value: float) -> str:
    return "-" if math.isnan(value) else f"{100 * value:.2f} %"


def _echo_noise(result: NoiseFloor) -> None:
    click.echo(f"noise floor: {result.again} against {result.reference}")
    click.echo(f"  {result.shared_configs} shared configurations (of {result.reference_configs} and "
               f"{result.again_configs}); transformations on {result.transform_tensors} distinct (c, im)")
    click.echo(f"  {'column':<36} {'cells':>6} {'unpaired':>8} {'MdRAE':>9}")
    for column in (*result.primitives, *result.transforms):
        click.echo(f"  {column.column:<36} {column.cells:>6} {column.unpaired:>8} {_percent(column.mdrae):>9}")
    med_p = result.median_primitive_mdrae
    bound = "" if math.isnan(med_p) else f"; 1.5 x = {_percent(1.5 * med_p)}"
    click.echo(f"  median over {len(result.primitives)} primitives: {_percent(med_p)}{bound}")
    click.echo(f"  median over the non-identity transformations: {_percent(result.median_transform_mdrae)}")
    for side, columns in (("reference", result.only_in_reference), ("other run", result.only_in_again)):
        if columns:
            click.echo(f"  only in the {side} (not compared): {', '.join(columns)}")
