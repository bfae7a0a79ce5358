"""``python -m experiments.reproduce PAPER``: a paper's results next to edgeplan's, computed from stored
measurements."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from edgeplan.cli.common import NETWORK_CONTEXT_OPTION, OVERHEAD_OPTION, Context, emit_json
from edgeplan.errors import InvalidInputError

if TYPE_CHECKING:
    from edgeplan.costmodels.opwise.model import LatencyModel

__all__ = ["main", "reproduce"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--home", type=click.Path(file_okay=False), default=None, envvar="EDGEPLAN_HOME",
              help="Folder of the measurement Store and device profiles (default: $EDGEPLAN_HOME or the user cache).")
@click.option("--debug", is_flag=True, help="Show full tracebacks on errors.")
@click.pass_context
def reproduce(ctx: click.Context, home: str | None, debug: bool) -> None:
    """Print a paper's figures and edgeplan's side by side."""
    argv = ctx.obj.argv if isinstance(ctx.obj, Context) else ()
    ctx.obj = Context(home=home, debug=debug, argv=argv)


@reproduce.command("eshratifar2018")
@click.option("--cloud", type=click.Choice(["derived", "measured"]), default="derived", show_default=True,
              help="derived: the mobile's ranges / --cloud-speedup (the paper's setting); measured: 2 threads.")
@click.option("--cloud-speedup", type=float, default=11.25, show_default=True)
@click.option("--paper-regime", is_flag=True,
              help="Also slow the mobile down so that AlexNet's cloud-only Wi-Fi time is 81% transfer, as in the "
                   "paper (one fitted factor; the devices are labelled derived).")
@click.option("--costs", "costs_source", type=click.Choice(["auto", "store", "shipped", "measure"]), default="auto",
              show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_obj
def eshratifar2018(ctx: Context, cloud: str, cloud_speedup: float, paper_regime: bool, costs_source: str,
                   as_json: bool) -> None:
    """Offloading (Fig. 3-5): six models x 3G/4G/Wi-Fi, speed-up, energy reduction and patterns."""
    from experiments.eshratifar2018 import calibrated_slowdown, format_report
    from experiments.eshratifar2018 import reproduce as run

    speedup = cloud_speedup if cloud == "derived" else None
    if speedup is None and click.get_current_context().get_parameter_source("cloud_speedup") is not \
            click.core.ParameterSource.DEFAULT:
        raise click.UsageError("--cloud-speedup sets the derived cloud; with --cloud measured it has no effect")
    if paper_regime and speedup is None:
        raise click.UsageError("--paper-regime needs the derived cloud (--cloud derived)")
    slowdown = calibrated_slowdown(cloud_speedup, costs_source) if paper_regime else None
    result = run(speedup, costs_source, slowdown)
    if as_json:
        emit_json(result)
        return
    for line in format_report(result):
        click.echo(line)


def _ints(text: str, name: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a comma-separated list of integers", param_hint=name) from None
    if not values or min(values) < 1:
        raise click.BadParameter(f"{text!r}: give one or more positive integers, e.g. 5,10,50", param_hint=name)
    return values


@reproduce.command("parthasarathy2022")
@click.option("--models", default=None, help="Comma-separated zoo names (default: the paper's 8 models).")
@click.option("--memories", default="64,128,256,512", show_default=True, help="Node memories (MB).")
@click.option("--nodes", default="5,10,15,20,50", show_default=True, help="Cluster sizes.")
@click.option("--classes", default="2,5,8,11,14,17,20", show_default=True, help="Numbers of bandwidth classes.")
@click.option("--runs", type=click.IntRange(min=1), default=50, show_default=True,
              help="Random clusters per configuration.")
@click.option("--fig10-trials", type=click.IntRange(min=1), default=1000, show_default=True,
              help="Random clusters of Fig. 10 (the most nodes, the least memory, the most classes).")
@click.option("--link-model", type=click.Choice(["min", "relay", "pairwise"]), default="min", show_default=True,
              help="How a pair of nodes' bandwidth follows from their distances to the router.")
@click.option("--plots", "plots_dir", type=click.Path(file_okay=False), default=None,
              help="Write Figs. 7-10 as PNG files into this folder (created, and checked, before simulating).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def parthasarathy2022(models: str | None, memories: str, nodes: str, classes: str, runs: int, fig10_trials: int,
                      link_model: str, plots_dir: str | None, as_json: bool) -> None:
    """Edge-cluster pipelines (Figs. 7-10): k-path vs exact, greedy, random and edgeplan's own planner.

    The full grid takes about ten minutes; shrink it with --models, --nodes, --runs and --fig10-trials.
    """
    from experiments.parthasarathy2022 import DEFAULT_MODELS, SimulationConfig, format_report, run_simulation

    names = tuple(m.strip() for m in models.split(",") if m.strip()) if models is not None else DEFAULT_MODELS
    if not names:
        raise click.BadParameter("give at least one model", param_hint="--models")
    sizes, mbs, ks = _ints(nodes, "--nodes"), _ints(memories, "--memories"), _ints(classes, "--classes")
    config = SimulationConfig(models=names, memories_mb=mbs, nodes=sizes, classes=ks, runs=runs,
                              fig10_trials=fig10_trials, fig10_nodes=max(sizes), fig10_memory_mb=min(mbs),
                              fig10_classes=max(ks), link=link_model)
    if plots_dir is not None:  # a folder that cannot be written is named now, not after the simulation
        from edgeplan.reports.partition_report import figure_folder, plot_partition_figures

        figure_folder(plots_dir)
    result = run_simulation(config, progress=not as_json)
    if plots_dir is not None:
        written = plot_partition_figures(result, plots_dir)
    if as_json:
        emit_json(result.to_dict())
    else:
        click.echo(format_report(result))
        if plots_dir is not None:
            click.echo("\nfigures: " + ", ".join(str(p) for p in written))
    from edgeplan.errors import InvalidInputError
    from experiments.parthasarathy2022 import UNAVAILABLE

    failed = sorted({f"{c.model} ({c.reason})" for c in result.cells if c.status == UNAVAILABLE})
    if failed:
        raise InvalidInputError(f"{len(failed)} model(s) could not be loaded and are missing from the results: "
                                f"{'; '.join(failed)}; fix or drop them in --models")


@reproduce.command("mulder2020")
@click.option("--data-dir", type=click.Path(file_okay=False, exists=True), default="../shared/data/mulder2021",
              show_default=True, help="Folder with intel.csv, amd.csv and formats.csv (mulder2021's tables).")
@click.option("--platforms", default="intel,amd", show_default=True, help="Comma-separated tables to use.")
@click.option("--models-dir", type=click.Path(file_okay=False), default="out/mulder2020", show_default=True,
              help="NN2 models PLATFORM-nn2 are read from here, or fitted (train part of split seed 0) and saved.")
@click.option("--repeats", type=click.IntRange(min=1), default=20, show_default=True,
              help="Warm repeats of the timed optimisation.")
@click.option("--own", is_flag=True,
              help="This machine instead: edgeplan's primitives, its measured tables and NN2, real executions.")
@click.option("--own-data", type=click.Path(dir_okay=False, exists=True), multiple=True,
              help="With --own: measured tables (default: the shipped ones).")
@click.option("--own-model", type=click.Path(file_okay=False, exists=True), default=None,
              help="With --own: the NN2 model of this machine (required until one is shipped).")
@click.option("--threads", type=click.IntRange(min=1), default=1, show_default=True,
              help="With --own: threads of the real executions (the tables' thread count).")
@click.option("--rounds", type=click.IntRange(min=3), default=15, show_default=True,
              help="With --own: interleaved timed runs of each network.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def mulder2020(data_dir: str, platforms: str, models_dir: str, repeats: int, own: bool, own_data: tuple[str, ...],
               own_model: str | None, threads: int, rounds: int, as_json: bool) -> None:
    """Primitive selection with NN2 vs profiling (Table 4 and Fig. 7) on the six networks."""

    from edgeplan.costmodels import fit_performance_model, load_performance_model, save_performance_model
    from edgeplan.measure.primitive_data import load_primitive_csv
    from experiments.mulder2020 import NETWORKS, format_own, format_report, own_result, run

    if own:
        from edgeplan.decisions.select import SHIPPED, SHIPPED_MODEL, SHIPPED_TABLES, merged_tables

        data = merged_tables(list(own_data) or [SHIPPED / t for t in SHIPPED_TABLES])
        folder = Path(own_model) if own_model else SHIPPED / SHIPPED_MODEL
        if not (folder / "model.json").exists():
            raise click.UsageError(f"no performance model in {folder}; fit one on this machine's tables "
                                   "(`edgeplan primitives fit --data TABLE.csv --out DIR`) and pass --own-model DIR")
        model = load_performance_model(folder)
        own_results = [own_result(n, data, model, threads=threads, rounds=rounds, repeats=repeats) for n in NETWORKS]
        if as_json:
            emit_json({"own": [r.to_dict() for r in own_results]})
            return
        for line in format_own(own_results):
            click.echo(line)
        return

    tables = {}
    chosen = [p.strip() for p in platforms.split(",") if p.strip()]
    if not chosen:
        raise click.BadParameter("name at least one table, e.g. intel,amd", param_hint="--platforms")
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
    results = run(tables, Path(data_dir) / "formats.csv", repeats=repeats)
    if as_json:
        emit_json({"results": [r.to_dict() for r in results]})
        return
    for line in format_report(results):
        click.echo(line)


@reproduce.command("li2023")
@click.option("--scenario", default="torch-fp32-1t", show_default=True, help="Whose shipped per-op dataset to use.")
@click.option("--method", "methods", type=click.Choice(["lasso", "rf", "gbdt", "mlp"]), multiple=True,
              default=("lasso", "rf", "gbdt", "mlp"), show_default=True, help="Repeat for several.")
@click.option("--data", "data_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Another dataset file (from `edgeplan ops export`).")
@click.option("--repeat-data", "repeat_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Its independent re-measurement, for the noise floor (with --fewshot: the same models measured "
                   "again, a CSV or a dataset).")
@click.option("--statistic", type=click.Choice(["min", "median"]), default="median", show_default=True,
              help="Learn and evaluate the medians over runs (what the shipped PyTorch models learn; the ORT ones "
                   "learn the fastest) or the fastest runs; --insight compares this statistic too.")
@click.option("--nb201", is_flag=True,
              help="Instead: few-shot calibration of every HELP NAS-Bench-201 device from 10 architectures.")
@click.option("--insight", type=click.Choice(["threads", "int8"]), default=None,
              help="Instead: li2023 §3.1.1 (threads: torch-fp32-1t vs -2t) or §3.1.2 (int8: ort-fp32-1t vs "
                   "ort-int8-1t) speed-up per op category, from the shipped datasets (or --data and --versus-data).")
@click.option("--fewshot", "fewshot_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Instead: few-shot calibration scored on your measurements, a CSV model,latency_ms (what "
                   "`calibrate --measurements` reads) or an `ops export` dataset (--statistic of its end-to-end "
                   "and op times; the samples' measured ops then make the per-op correction a candidate, also "
                   "scored on its own): --source calibrated from --samples of its models, the others predicted, "
                   "over --seeds draws; with --repeat-data (the same models measured again) the noise floor "
                   "beside.")
@click.option("--floor", "floor_only", is_flag=True,
              help="Instead: only the noise floor of the scenario's dataset against its repeat, for both statistics.")
@click.option("--versus-data", "versus_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="--insight: the second scenario's dataset file.")
@click.option("--help-data", type=click.Path(dir_okay=False, path_type=Path),
              default=Path("../shared/data/help-nasbench201/latency_ms.csv"), show_default=True)
@click.option("--source", default="torch-fp32-1t", show_default=True,
              help="--nb201, --fewshot: the source device profile.")
@click.option("--source-method", type=click.Choice(["lasso", "rf", "gbdt", "mlp"]), default=None,
              help="--nb201, --fewshot: the source's predictor method [default: lasso, or the source's default "
                   "(gbdt) where it has no Lasso].")
@click.option("--seeds", type=click.IntRange(min=1), default=5, show_default=True,
              help="--nb201, --fewshot: random draws of --samples models (per device).")
@click.option("--samples", type=click.IntRange(min=1), default=10, show_default=True,
              help="--nb201, --fewshot: measured models a calibration is given.")
@click.option("--nb201-module", type=click.Choice(["official", "lean"]), default="official", show_default=True,
              help="--nb201: the networks HELP measured (official: none edges are x * 0) or edgeplan's nb201: "
                   "(none edges dropped), for the ablation.")
@click.option("--no-fold-zeros", is_flag=True,
              help="--nb201: calibrate under the source's kernels only, without trying the fold-zeros deduction.")
@click.option("--kind-keys", is_flag=True,
              help="Key predictors by kernel kind alone, as li2023 does, instead of also by the implementation the "
                   "runtime selects by shape (eager PyTorch's oneDNN or native convolution).")
@click.option("--no-context", is_flag=True,
              help="Fit the op predictors on each op's own features alone, as li2023 does, without its place in the "
                   "network (how often the same op and the same kind ran before it in the same run).")
@NETWORK_CONTEXT_OPTION
@OVERHEAD_OPTION
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_obj
def li2023(ctx: Context, scenario: str, methods: tuple[str, ...], data_file: Path | None, repeat_file: Path | None,
           statistic: str, nb201: bool, insight: str | None, floor_only: bool, versus_file: Path | None,
           help_data: Path, source: str, source_method: str | None, seeds: int, samples: int, nb201_module: str,
           no_fold_zeros: bool, fewshot_file: Path | None, kind_keys: bool, no_context: bool,
           network_context: str | None, overhead: str, as_json: bool) -> None:
    """Latency prediction (§5.1, §5.3, §5.5, §5.6) on this machine's per-op datasets, --nb201 few-shot, --fewshot
    on your own measurements, or an --insight of §3.1."""
    from experiments.li2023 import format_nb201, format_report, nb201_fewshot
    from experiments.li2023 import reproduce as run

    if versus_file is not None and not insight:
        raise InvalidInputError("--versus-data goes with --insight threads|int8")
    given = click.get_current_context().get_parameter_source("scenario") == click.core.ParameterSource.COMMANDLINE
    if sum(map(bool, (floor_only, insight, nb201, fewshot_file))) > 1:
        raise InvalidInputError("--floor, --insight, --nb201 and --fewshot are separate runs: give one of them")
    if given and (insight or nb201 or fewshot_file):
        raise InvalidInputError(
            "--scenario picks the dataset of §5; --insight compares a fixed pair of scenarios (give other datasets "
            "with --data and --versus-data) and --nb201 and --fewshot start from --source"
        )
    if floor_only:
        from edgeplan.measure.op_dataset import load_dataset
        from experiments.li2023 import dataset_path, format_floor, noise_floor

        data = load_dataset(data_file or dataset_path(scenario))
        rpath = repeat_file or dataset_path(data.scenario, repeat=True)
        if not rpath.is_file():
            raise InvalidInputError(f"no repeat {rpath}: measure one with `edgeplan ops profile ... --repeat TAG`, "
                                    "export it and give it with --repeat-data")
        again = load_dataset(rpath)
        floors = {st: noise_floor(data, again, st) for st in ("min", "median")}
        if as_json:
            emit_json({"scenario": data.scenario, "noise_floor": floors})
            return
        click.echo(f"noise floor of {data.scenario} (end-to-end MAPE between two independent measurements)")
        for st, f in floors.items():
            click.echo(f"  {st:<7} {format_floor(f)}")
        return
    if insight:
        from edgeplan.measure.op_dataset import load_dataset
        from experiments.li2023 import INSIGHT_SCENARIOS, dataset_path, format_insight, speedup_insight

        a, b = INSIGHT_SCENARIOS[insight]
        result = speedup_insight(load_dataset(data_file or dataset_path(a)),
                                 load_dataset(versus_file or dataset_path(b)), statistic)
        _emit(result, format_insight(insight, result), as_json)
        return

    if fewshot_file:
        from experiments.li2023 import fewshot_measured, format_fewshot_measured, measured_latencies, measured_records

        rows, records = measured_records(fewshot_file, statistic)  # records: an ops export's (the per-op form)
        repeat_rows = measured_latencies(repeat_file, statistic) if repeat_file else None
        result = fewshot_measured(_source_model(source, source_method, ctx.home), source, rows, repeat_rows,
                                  samples=samples, seeds=seeds, progress=not as_json, records=records,
                                  statistic=statistic)
        _emit(result, format_fewshot_measured(result), as_json)
        return
    if nb201:
        deductions = ("as-source",) if no_fold_zeros else ("as-source", "fold-zeros")
        few = nb201_fewshot(_source_model(source, source_method, ctx.home), source, help_data, seeds=seeds,
                            samples=samples, progress=not as_json, official=nb201_module == "official",
                            deductions=deductions)
        _emit(few, format_nb201(few), as_json)
        return
    result = run(scenario, methods, data_file, repeat_file, progress=not as_json, statistic=statistic,
                 implementations=not kind_keys, context=not no_context, overhead=overhead,
                 network=network_context or False)
    _emit(result, format_report(result), as_json)


def _emit(result: Any, lines: list[str], as_json: bool) -> None:
    """``result`` as JSON, or its formatted ``lines``."""
    if as_json:
        emit_json(result)
        return
    for line in lines:
        click.echo(line)


def _source_model(source: str, method: str | None, home: str | None) -> LatencyModel:
    """The latency model of device ``source`` for ``method`` (None:
    :func:`~edgeplan.costmodels.opwise.profiles.source_method`); a calibrated device's own source scenario's."""
    from edgeplan.costmodels.opwise.model import LatencyModel
    from edgeplan.costmodels.opwise.profiles import load_device_model, source_method

    model = load_device_model(source, source_method(source, method, home), home)
    return model if isinstance(model, LatencyModel) else model.source


def main(argv: list[str] | None = None) -> int:
    """Run the reproduction command line; errors on one line, a non-zero exit code."""
    from edgeplan.cli.main import run_group

    return run_group(reproduce, "python -m experiments.reproduce", sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())
