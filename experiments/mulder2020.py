"""mulder2020 Table 4 and Fig. 7 on the mulder2021 Intel and AMD tables: selecting primitives with the NN2 model
instead of profiling.

For each of the paper's six networks (torchvision's AlexNet, VGG-11, VGG-19, GoogLeNet, ResNet-18, ResNet-34):

* **Fig. 7**: the network's time (primitives + layout transformations, priced with the *measured* table) of the
  selection made with NN2's predictions, relative to the optimum selected with the measured costs. Both selections
  choose among the same primitives: those the table defines for the layer.
* **Table 4**: optimisation time with the model (one batched prediction for all conv layers, one for all tensors,
  then the PBQP solve; median of warm repeats) against the time profiling would take: one run of every defined
  primitive on every layer plus every transformation on every tensor, summed from the table (a lower bound: the
  paper's harness repeats each run).

Layers the table has no row for (ResNet's 1x1 stride-2 shortcuts) are left to PyTorch in ``chw`` (layout-fixed,
see :mod:`edgeplan.planners.pbqp.network`); tensors it has no transformation times for (the inputs of GoogLeNet's
concatenations, AlexNet's classifier input) get times interpolated from the table's other tensors. Both are
counted in the output.
"""

from __future__ import annotations

import math
import statistics
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import numpy as np

from edgeplan.decisions.selection_costs import TimedSelection, load_formats, select_network, table_costs
from edgeplan.planners.pbqp.costgraph import SelectionCosts, SelectionPlan, plan_cost, select_primitives
from edgeplan.planners.pbqp.network import SelectionStructure, selection_structure

if TYPE_CHECKING:
    from edgeplan.costmodels import PerformanceModel
    from edgeplan.measure.primitive_data import PrimitiveDataset

__all__ = ["NETWORKS", "PAPER_FIG7", "PAPER_TABLE4", "NetworkResult", "format_report", "main", "measured_choice",
           "network_result", "structures"]

NETWORKS = ("alexnet", "vgg11", "vgg19", "googlenet", "resnet18", "resnet34")

PAPER_TABLE4: dict[str, tuple[float, float, float]] = {
    # network: (perf. model inference ms, profiling Intel s, profiling AMD s), mulder2020 Table 4
    "alexnet": (43.6, 66.0, 189.0), "vgg11": (327.0, 0.20 * 3600, 0.67 * 3600),
    "vgg19": (673.0, 0.57 * 3600, 1.79 * 3600), "googlenet": (177.0, 182.0, 445.0),
    "resnet18": (119.0, 242.0, 736.0), "resnet34": (194.0, 494.0, 0.41 * 3600),
}
PAPER_FIG7 = "Intel: every network < 0.7%; all platforms < 1.1% (mulder2020 §5.2, Fig. 7)"


@dataclass(frozen=True)
class NetworkResult:
    """One network on one platform table."""

    platform: str
    network: str
    selected_layers: int
    fixed_layers: int
    interpolated_tensors: int
    optimum_ms: float
    predicted_selection_ms: float
    increase_pct: float
    same_primitives: int
    model_ms_median: float
    model_ms_spread: tuple[float, float]
    solve_ms_median: float
    profiling_s: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields."""
        return asdict(self)


def structures(data: PrimitiveDataset, networks: Sequence[str] = NETWORKS) -> dict[str, SelectionStructure]:
    """The six networks' selection structures, selecting the conv layers ``data`` has a row for."""
    from edgeplan.frontends.zoo import load_graph

    keys = {tuple(int(v) for v in row) for row in data.features}
    return {n: selection_structure(load_graph(f"torchvision:{n}"), selectable=lambda s: s[:5] in keys)
            for n in networks}


def _profiling_s(structure: SelectionStructure, data: PrimitiveDataset) -> float:
    index = {tuple(int(v) for v in row): r for r, row in enumerate(data.features)}
    total = 0.0
    for node in structure.nodes:
        if node.kind == "conv" and node.conv is not None:
            total += float(np.nansum(data.primitive_ns[index[node.conv[:5]]]))
    table = data.transform_table()
    tensors = {(int(c), int(im)): r for r, (c, im) in enumerate(table.features)}
    for edge in structure.edges:
        r = tensors.get(edge.tensor)
        if r is not None:
            total += float(np.nansum(table.times_ns[r]))
    return total / 1e9


@dataclass(frozen=True)
class _Comparison:
    """The selection made with measured costs and the one made with the model, priced with the measured costs."""

    measured: SelectionCosts
    best: SelectionPlan
    predicted: TimedSelection
    priced_ms: float

    @property
    def same(self) -> int:
        """Conv layers where both selections chose the same primitive."""
        pairs = zip(self.best.choices().values(), self.predicted.plan.choices().values(), strict=True)
        return sum(a == b for a, b in pairs)

    @property
    def increase_pct(self) -> float:
        """The model's selection's excess over the measured optimum, priced with the measured costs."""
        return 100.0 * (self.priced_ms / self.best.total_ms - 1.0)


def measured_choice(measured: SelectionCosts, plan: SelectionPlan) -> list[int]:
    """A plan made on other costs of the same structure (a model's, say) as indices into ``measured``'s options: each
    conv layer's primitive looked up by name, each join's layout as it is.

    Parameters
    ----------
    measured
        The costs to index into (e.g. :func:`~edgeplan.decisions.select.table_costs`).
    plan
        A selection of the same structure.

    Returns
    -------
    list of int
        A choice for :func:`~edgeplan.planners.pbqp.costgraph.plan_cost` with ``measured``.
    """
    names = [[o.name for o in opts] for opts in measured.options]
    return [names[i].index(n.primitive) if n.kind == "conv" else plan.choice[i] for i, n in enumerate(plan.nodes)]


def _compare(structure: SelectionStructure, data: PrimitiveDataset, model: PerformanceModel,
             formats: Mapping[str, tuple[str, str]]) -> _Comparison:
    measured = table_costs(structure, data, formats)
    best = select_primitives(structure, measured)
    predicted = select_network(structure, model, formats, restrict_to=measured)
    prims, trans, _ = plan_cost(structure, measured, measured_choice(measured, predicted.plan))
    return _Comparison(measured, best, predicted, prims + trans)


def network_result(platform: str, network: str, structure: SelectionStructure, data: PrimitiveDataset,
                   model: PerformanceModel, formats: dict[str, tuple[str, str]], repeats: int = 20) -> NetworkResult:
    """Fig. 7 and Table 4 figures of one network on one platform table.

    Parameters
    ----------
    platform
        Label of the table (``intel``, ``amd``).
    network
        Network name.
    structure
        Its selection structure (see :func:`structures`).
    data
        The measured table.
    model
        The performance model fitted on that platform.
    formats
        The primitives' layouts.
    repeats
        Warm repeats of the timed model-based optimisation.

    Returns
    -------
    NetworkResult
    """
    cmp = _compare(structure, data, model, formats)
    model_ms, solve_ms = [], []
    for _ in range(repeats):
        again = select_network(structure, model, formats, restrict_to=cmp.measured)
        model_ms.append(1000 * again.total_s)
        solve_ms.append(1000 * again.solve_s)
    quartiles = statistics.quantiles(model_ms, n=4) if len(model_ms) > 1 else [model_ms[0]] * 3
    return NetworkResult(
        platform, network, len(structure.convs), len(structure.fixed), cmp.measured.interpolated, cmp.best.total_ms,
        cmp.priced_ms, cmp.increase_pct, cmp.same, statistics.median(model_ms),
        (quartiles[0], quartiles[2]), statistics.median(solve_ms), _profiling_s(structure, data))


def run(tables: dict[str, tuple[PrimitiveDataset, PerformanceModel]], formats_csv: str | Path,
        networks: Sequence[str] = NETWORKS, repeats: int = 20) -> list[NetworkResult]:
    """Every network on every platform table.

    Parameters
    ----------
    tables
        ``platform -> (measured table, performance model fitted on it)``.
    formats_csv
        mulder2021's formats file.
    networks
        Networks (torchvision names).
    repeats
        Warm repeats of the timed optimisation.

    Returns
    -------
    list of NetworkResult
    """
    formats = load_formats(formats_csv)
    results = []
    for platform, (data, model) in tables.items():
        for network, structure in structures(data, networks).items():
            results.append(network_result(platform, network, structure, data, model, formats, repeats))
    return results


def format_report(results: Sequence[NetworkResult]) -> list[str]:
    """Table 4 and Fig. 7, paper beside edgeplan."""
    lines = ["mulder2020 Fig. 7: inference-time increase when selecting with NN2 instead of measured costs "
             "(priced with the measured table)", f"  paper: {PAPER_FIG7}",
             f"  {'platform':<8} {'network':<10} {'layers':>6} {'fixed':>5} {'interp':>6} {'optimum ms':>11} "
             f"{'NN2 sel. ms':>11} {'increase':>9} {'same prim':>9}"]
    for r in results:
        lines.append(f"  {r.platform:<8} {r.network:<10} {r.selected_layers:>6} {r.fixed_layers:>5} "
                     f"{r.interpolated_tensors:>6} {r.optimum_ms:>11.3f} {r.predicted_selection_ms:>11.3f} "
                     f"{r.increase_pct:>8.3f}% {r.same_primitives:>4}/{r.selected_layers:<4}")
    for platform in dict.fromkeys(r.platform for r in results):
        inc = [r.increase_pct for r in results if r.platform == platform]
        lines.append(f"  {platform}: mean increase {statistics.fmean(inc):.3f}% (target <= 0.3%), worst "
                     f"{max(inc):.3f}% (target <= 1.0%); paper: mean 0.39%, worst 1.1%")
    lines += ["", "mulder2020 Table 4: optimisation time, performance model (batched NN2 + PBQP, median of warm "
              "repeats [quartiles]) vs profiling",
              f"  {'platform':<8} {'network':<10} {'model ms':>9} {'[q1, q3]':>15} {'PBQP ms':>8} "
              f"{'paper ms':>9} {'profiling s*':>12} {'paper s':>8} {'speed-up':>9}"]
    for r in results:
        paper = PAPER_TABLE4.get(r.network)
        paper_prof = (paper[1] if r.platform == "intel" else paper[2]) if paper else math.nan
        lines.append(f"  {r.platform:<8} {r.network:<10} {r.model_ms_median:>9.2f} "
                     f"[{r.model_ms_spread[0]:>6.2f}, {r.model_ms_spread[1]:>6.2f}] {r.solve_ms_median:>8.2f} "
                     f"{paper[0] if paper else math.nan:>9.1f} {r.profiling_s:>12.1f} {paper_prof:>8.0f} "
                     f"{r.profiling_s / (r.model_ms_median / 1000):>8.0f}x")
    lines.append("  * one run of every defined primitive on every conv layer and of every transformation on every "
                 "edge, summed from the table (repeated layers counted each time; the paper's harness repeats runs)")
    for name in ("vgg19", "googlenet"):
        worst = max((r.model_ms_median for r in results if r.network == name), default=math.nan)
        lines.append(f"  {name}: optimisation {worst:.2f} ms (target <= 50 ms; paper {PAPER_TABLE4[name][0]} ms)")
    return lines



@dataclass(frozen=True)
class OwnResult:
    """One network on this machine: selection with NN2 vs with measured costs, both run for real."""

    network: str
    threads: int
    selected_layers: int
    fixed_layers: int
    same_primitives: int
    measured_selection_ms: float
    predicted_selection_priced_ms: float
    priced_increase_pct: float
    run_measured_ms: float
    run_predicted_ms: float
    run_increase_pct: float
    pytorch_ms: float
    model_ms_median: float
    profiling_s: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields."""
        return asdict(self)


def own_result(network: str, data: PrimitiveDataset, model: PerformanceModel, *, threads: int, rounds: int = 15,
               repeats: int = 20) -> OwnResult:
    """Fig. 7 and Table 4 on this machine for one network, with edgeplan's primitives and real executions.

    The measured selection uses ``data`` (this machine's tables); the predicted one uses ``model`` restricted to
    the same primitives. Both networks are built and timed interleaved with PyTorch's default.
    """
    from edgeplan.decisions.select import runnable
    from edgeplan.decisions.selection_costs import own_formats
    from edgeplan.frontends.zoo import load_graph
    from edgeplan.runtimes.selected import run_selection

    formats = own_formats()
    keys = {tuple(int(v) for v in row) for row in data.features}
    structure = selection_structure(load_graph(f"torchvision:{network}"),
                                    selectable=lambda s: s[:5] in keys and runnable(s))
    cmp = _compare(structure, data, model, formats)
    model_ms = [1000 * select_network(structure, model, formats, restrict_to=cmp.measured).total_s
                for _ in range(repeats)]
    inputs = structure.conv_inputs()
    run = run_selection(f"torchvision:{network}", cmp.best.choices(), inputs, None, threads=threads, rounds=rounds,
                        extra={"predicted": cmp.predicted.plan.choices()})
    lat = run.latency
    return OwnResult(network, threads, len(structure.convs), len(structure.fixed), cmp.same, cmp.best.total_ms,
                     cmp.priced_ms, cmp.increase_pct, lat["selected"].median_ms,
                     lat["predicted"].median_ms, 100.0 * (lat["predicted"].median_ms / lat["selected"].median_ms - 1),
                     lat["pytorch"].median_ms, statistics.median(model_ms), _profiling_s(structure, data))


def format_own(results: Sequence[OwnResult]) -> list[str]:
    """Fig. 7 and Table 4 on this machine."""
    lines = ["mulder2020 Fig. 7 / Table 4 on this machine (edgeplan's primitives; measured = this machine's tables; "
             "both selections run for real, interleaved)",
             f"  {'network':<10} {'layers':>6} {'same':>5} {'priced incr.':>12} {'run meas. ms':>12} "
             f"{'run NN2 ms':>11} {'run incr.':>9} {'pytorch ms':>10} {'model ms':>9} {'profiling s*':>12}"]
    for r in results:
        lines.append(f"  {r.network:<10} {r.selected_layers:>6} {r.same_primitives:>5} {r.priced_increase_pct:>11.2f}% "
                     f"{r.run_measured_ms:>12.2f} {r.run_predicted_ms:>11.2f} {r.run_increase_pct:>8.2f}% "
                     f"{r.pytorch_ms:>10.2f} {r.model_ms_median:>9.2f} {r.profiling_s:>12.1f}")
    if results:
        lines.append(f"  mean priced increase {statistics.fmean(r.priced_increase_pct for r in results):.2f}%, "
                     f"mean run increase {statistics.fmean(r.run_increase_pct for r in results):.2f}% "
                     f"({results[0].threads} threads)")
    lines.append("  * one run of every applicable primitive on every conv layer and of every transformation on every "
                 "edge, summed from the table (repeated layers counted each time)")
    return lines


# ---------------------------------------------------------------------------------------------------- command line

DATA_DIR = "../shared/data/mulder2021"


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--data-dir", type=click.Path(file_okay=False), default=DATA_DIR, show_default=True,
              help="Folder with intel.csv, amd.csv and formats.csv (mulder2021's tables); skipped when the default "
                   "folder is absent.")
@click.option("--platforms", default="intel,amd", show_default=True, help="Comma-separated tables to use.")
@click.option("--models-dir", type=click.Path(file_okay=False), default="out/mulder2020", show_default=True,
              help="NN2 models PLATFORM-nn2 are read from here, or fitted (train part of split seed 0; minutes) and "
                   "saved here.")
@click.option("--own", is_flag=True,
              help="This machine instead: edgeplan's primitives, its measured tables and NN2, both selections run "
                   "for real beside PyTorch.")
@click.option("--own-data", type=click.Path(dir_okay=False, exists=True), multiple=True,
              help="With --own: measured tables (default: the shipped ones).")
@click.option("--own-model", type=click.Path(file_okay=False, exists=True), default=None,
              help="With --own: the NN2 model of this machine (default: the shipped one).")
@click.option("--threads", type=click.IntRange(min=1), default=1, show_default=True,
              help="With --own: threads of the real executions (the tables' thread count).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def cli(data_dir: str, platforms: str, models_dir: str, own: bool, own_data: tuple[str, ...], own_model: str | None,
        threads: int, as_json: bool) -> None:
    """Primitive selection with NN2 vs profiling (mulder2020 Table 4 and Fig. 7) on the paper's six networks.

    Example: python -m experiments.mulder2020 --platforms intel --json
    """
    from edgeplan.costmodels import fit_performance_model, load_performance_model, save_performance_model
    from edgeplan.measure.primitive_data import load_primitive_csv
    from experiments._cli import emit, skip

    if own:
        from edgeplan.decisions.select import SHIPPED, SHIPPED_MODEL, SHIPPED_TABLES
        from edgeplan.decisions.selection_costs import merged_tables

        data = merged_tables(list(own_data) or [SHIPPED / t for t in SHIPPED_TABLES])
        folder = Path(own_model) if own_model else SHIPPED / SHIPPED_MODEL
        if not (folder / "model.json").exists():
            raise click.UsageError(f"no performance model in {folder}; fit one on this machine's tables "
                                   "(`edgeplan primitives fit --data TABLE.csv --out DIR`) and pass --own-model DIR")
        model = load_performance_model(folder)
        own_results = [own_result(n, data, model, threads=threads) for n in NETWORKS]
        emit({"experiment": "mulder2020-own", "own": [r.to_dict() for r in own_results]}, format_own(own_results),
             as_json)
        return

    folder_given = click.get_current_context().get_parameter_source("data_dir") is not \
        click.core.ParameterSource.DEFAULT
    if not Path(data_dir).is_dir():
        if folder_given:
            raise click.BadParameter(f"no folder {data_dir}", param_hint="--data-dir")
        skip(f"{data_dir} is absent (mulder2021's tables; see ../shared/data)", as_json)
        return
    chosen = [p.strip() for p in platforms.split(",") if p.strip()]
    if not chosen:
        raise click.BadParameter("name at least one table, e.g. intel,amd", param_hint="--platforms")
    tables = {}
    for platform in chosen:
        data = load_primitive_csv(Path(data_dir) / f"{platform}.csv")
        folder = Path(models_dir) / f"{platform}-nn2"
        if (folder / "model.json").exists():
            model = load_performance_model(folder)
        else:
            click.echo(f"fitting NN2 on {platform}.csv (train part of split seed 0; minutes) -> {folder}", err=True)
            model = fit_performance_model(data, "nn2")
            save_performance_model(model, folder)
        tables[platform] = (data, model)
    results = run(tables, Path(data_dir) / "formats.csv")
    summary = {p: {"mean_increase_pct": statistics.fmean(r.increase_pct for r in results if r.platform == p),
                   "worst_increase_pct": max(r.increase_pct for r in results if r.platform == p),
                   "worst_network": max((r for r in results if r.platform == p), key=lambda r: r.increase_pct).network}
               for p in tables}
    emit({"experiment": "mulder2020", "paper": {"fig7": PAPER_FIG7, "fig7_mean_increase_pct": 0.39,
                                                "fig7_worst_increase_pct": 1.1,
                                                "table4_model_ms": {n: v[0] for n, v in PAPER_TABLE4.items()}},
          "summary": summary, "results": [r.to_dict() for r in results]}, format_report(results), as_json)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; errors on one line and a non-zero exit code."""
    from experiments._cli import run_command

    return run_command(cli, "experiments.mulder2020", argv)


if __name__ == "__main__":
    sys.exit(main())
