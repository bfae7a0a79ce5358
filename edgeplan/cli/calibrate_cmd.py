"""``edgeplan calibrate``: a device profile from a few models measured on the device (few-shot adaptation)."""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from edgeplan.cli.common import Context, emit_json

__all__ = ["calibrate"]


@click.command()
@click.option("--measurements", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="CSV with columns model,latency_ms (zoo strings, e.g. nb201:|...|, measured on the device), or "
                   "a dataset of `edgeplan ops profile` runs there (`ops export`, .jsonl.gz or .xz: median end-to-end "
                   "times, and the operations' times for the per-op correction). With --primitives: a timing "
                   "table in the mulder2021 format measured on the device (default: measure "
                   "layers here).")
@click.option("--measure", "measure", multiple=True, metavar="MODEL",
              help="Instead of --measurements: time this model here (repeatable; ranges and set:NAME too), in "
                   "--from's scenario beside the reference model synthetic:0, and calibrate to this machine (their "
                   "operations are timed too, which adds the per-op correction to the candidates); the "
                   "latencies are saved beside the profile as measurements.csv.")
@click.option("--name", required=True, help="Name of the new device profile (use it as `predict --device NAME`, or "
                                            "`select --costs predicted --device NAME` with --primitives).")
@click.option("--from", "source", default=None,
              help="Device profile whose per-op predictions are corrected [default: torch-fp32-1t]. With "
                   "--primitives: a performance model folder or a device calibrated with --primitives [default: the "
                   "shipped NN2 of the reference machine, 1 thread].")
@click.option("--method", type=click.Choice(["gbdt", "lasso", "rf", "mlp"]), default=None,
              help="The source's predictor method [default: lasso, or the source's default (gbdt) where it has no "
                   "Lasso].")
@click.option("--primitives", "primitives", is_flag=True,
              help="Calibrate the convolution-primitive performance model (for `edgeplan select`) instead of the "
                   "latency predictors: measure a few layers here with every primitive and transfer the model.")
@click.option("--network", "networks", multiple=True, metavar="MODEL",
              help="--primitives: measure the conv layers of this zoo model (repeatable) instead of a sample of the "
                   "configuration space.")
@click.option("--samples", type=click.IntRange(min=1), default=40, show_default=True,
              help="--primitives: layer configurations sampled from the configuration space (about 1 % of the "
                   "reference dataset).")
@click.option("--design", type=click.Choice(["uniform", "kmeans"]), default="uniform", show_default=True,
              help="--primitives: how the --samples layers are chosen from the configuration space: uniformly, or "
                   "kmeans: spread over the layer sizes, the filter shapes in proportion to the primitives that apply "
                   "to them.")
@click.option("--threads", type=click.IntRange(min=1), default=1, show_default=True,
              help="--primitives: intra-op threads of the measurements (the setting `select --threads` will run).")
@click.option("--torch-device", "torch_device", default=None, metavar="cpu|cuda|cuda:N",
              help="--primitives: where the layers are measured [default: cpu] (on CUDA oneDNN's two primitives are "
                   "left out), or with --measurements where they were (recorded; unknown if not given). `select "
                   "--device NAME` then selects for that kind of processor.")
@click.option("--transfer", "transfer_method",
              type=click.Choice(["auto", "finetune", "factor", "factor-finetune", "direct"]), default="auto",
              show_default=True,
              help="--primitives: how the model moves (auto: the best by 5-fold cross-validation on the measured "
                   "layers).")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="--primitives: seed of the sampled layers, the folds and fine-tuning.")
@click.option("--budget-s", type=float, default=None,
              help="--primitives: stop measuring after this many seconds (run again to resume; nothing is fitted "
                   "until every layer is measured).")
@click.option("--replace", is_flag=True, help="Overwrite an existing device of that name.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_obj
def calibrate(ctx: Context, measurements: Path | None, measure: tuple[str, ...], name: str, source: str | None,
              method: str | None, primitives: bool, networks: tuple[str, ...], samples: int, design: str,
              threads: int, torch_device: str | None, transfer_method: str, seed: int, budget_s: float | None,
              replace: bool, as_json: bool) -> None:
    """Create device profile NAME from latencies measured on it: a learnt correction of a source's predictions.

    Every row is checked before anything is written: a missing column, an unknown model or a non-positive
    latency is refused with its line, and no profile is stored. With --measure the models are timed here instead
    (this machine becomes the device).

    With --primitives, the convolution-primitive performance model of `edgeplan select` is moved to this machine
    (or to the one that measured --measurements): a sample of layers is measured with every applicable primitive
    (resumable, in the Store), and the source model is fine-tuned, factor-corrected or kept, whichever predicts the
    measured layers best under cross-validation.
    """
    from edgeplan.errors import InvalidInputError

    if not name or "/" in name or name.startswith("."):
        raise InvalidInputError(f"--name {name!r}: use a plain name such as my-phone")
    if len(name.encode()) > 100:
        raise InvalidInputError(f"--name is {len(name.encode())} bytes long; use a short plain name such as my-phone")
    click_ctx = click.get_current_context()

    def given(option: str) -> bool:
        return click_ctx.get_parameter_source(option) is not click.core.ParameterSource.DEFAULT

    if primitives:
        if measure:
            raise InvalidInputError("--measure times whole models for the latency predictors; with --primitives "
                                    "the layers are measured here already (or give --network MODEL)")
        if given("method"):
            raise InvalidInputError("--method picks the latency predictors; with --primitives use --transfer")
        _calibrate_primitives(ctx, measurements, name, source, networks, (samples, design), threads, torch_device,
                              transfer_method, seed, budget_s, replace, as_json)
        return
    extra = [o for o in ("networks", "samples", "design", "threads", "torch_device", "transfer_method", "seed",
                         "budget_s")
             if given(o)]
    if extra:
        raise InvalidInputError(f"--{extra[0].replace('_method', '').replace('_', '-')} is an option of "
                                "--primitives; add --primitives or drop it")
    from edgeplan.costmodels.opwise.profiles import shipped_devices

    if name in shipped_devices():  # a calibrated device is looked up first: it would hide the scenario's profile
        raise InvalidInputError(f"--name {name!r} is the name of a measurement scenario, whose latency profile "
                                f"`predict --device {name}` uses; choose another name such as {name}-calibrated")
    if measurements is not None and measure:
        raise InvalidInputError("--measurements gives latencies measured elsewhere and --measure measures models "
                                "here: give one of them")
    if measurements is None and not measure:
        raise InvalidInputError("--measurements FILE.csv is required (columns model,latency_ms), or --measure MODEL "
                                "to time models here, or pass --primitives to calibrate the primitive performance "
                                "model")
    _calibrate_latency(ctx, measurements, measure, name, source or "torch-fp32-1t", method, replace, as_json)


#: Profiled and unprofiled runs per model of ``calibrate --measure`` (beside the reference model ``synthetic:0``).
MEASURE_RUNS, MEASURE_PLAIN_PER_RUN = 3, 3


def _measure_here(ctx: Context, models: tuple[str, ...], scenario_name: str, name: str,
                  as_json: bool) -> tuple[list[tuple[str, float]], dict[str, dict[str, Any]]]:
    """Time ``models`` on this machine in the scenario ``scenario_name`` beside the reference model; their
    latencies at the campaign's typical reference speed (resumable: the campaign ``calibrate-{name}`` of the Store),
    and their dataset records (the operations' times on the same scale) by model.
    """
    import tempfile
    import warnings

    from edgeplan.decisions.calibrate import measurement_rows as measured_records
    from edgeplan.errors import InvalidInputError
    from edgeplan.measure import Store, default_store_path
    from edgeplan.measure.model_sets import expand_models
    from edgeplan.measure.op_campaign import ReferenceScaleWarning, export_dataset, run_op_campaign
    from edgeplan.measure.scenarios import SCENARIOS

    scenario = SCENARIOS.get(scenario_name)
    if scenario is None:
        raise InvalidInputError(f"--measure times the models in the measurement scenario of --from's model, and "
                                f"its scenario {scenario_name!r} is none; calibrate from a profile of one of "
                                f"{', '.join(SCENARIOS)}, or measure the models yourself and give --measurements")
    names = expand_models(models)
    tag = f"calibrate-{name}"
    with Store.open(default_store_path(ctx.home)) as store:
        report = run_op_campaign(store, scenario, names, runs=MEASURE_RUNS, progress=not as_json,
                                 command=ctx.command, home=ctx.home, plain_per_run=MEASURE_PLAIN_PER_RUN,
                                 repeat=tag, reference="synthetic:0")
        if report.failed:
            first = report.failed[0]
            raise InvalidInputError(f"--measure: {len(report.failed)} model(s) could not be measured here, e.g. "
                                    f"{first.key}: {first.reason}; drop them (nothing was calibrated; the others "
                                    "are kept in the Store for the next run)")
        with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
            # its own scale: the reference's typical time in this campaign, not a main campaign's
            warnings.simplefilter("ignore", ReferenceScaleWarning)
            out = Path(tmp) / "measured.jsonl.gz"
            export_dataset(store, scenario, out, command=ctx.command, repeat=tag)
            rows, records = measured_records(out)
    measured = dict(rows)
    return [(m, measured[m]) for m in names], records or {}


def _calibrate_latency(ctx: Context, measurements: Path | None, measure: tuple[str, ...], name: str, source: str,
                       method: str | None, replace: bool, as_json: bool) -> None:
    """Few-shot adaptation of the per-op latency predictors (li2023; see edgeplan.costmodels.opwise.calibrate)."""
    from edgeplan.costmodels.opwise.calibrate import DEDUCTIONS, PER_OP
    from edgeplan.costmodels.opwise.calibrate import calibrate as fit
    from edgeplan.costmodels.opwise.model import LatencyModel
    from edgeplan.costmodels.opwise.op_correction import measured_ops
    from edgeplan.costmodels.opwise.profiles import home_root, load_device_model, source_method
    from edgeplan.decisions.calibrate import measurement_rows as measured_records
    from edgeplan.decisions.calibrate import model_terms as measured_terms
    from edgeplan.errors import EdgeplanError, InvalidInputError

    method = source_method(source, method, ctx.home)
    target = home_root(ctx.home) / name / f"{method}.json"
    if target.exists() and not replace:
        raise InvalidInputError(f"device {name!r} already has {method} predictors ({target}); choose another --name "
                                "or pass --replace")
    model = load_device_model(source, method, ctx.home)
    if not isinstance(model, LatencyModel):
        # A calibrated device's correction is not stacked: the new one corrects the same source scenario.
        click.echo(f"note: {source} is a calibrated device; calibrating against its source {model.source_device}",
                   err=True)
        source, model = model.source_device, model.source
    if measurements is not None:  # records (the operations timed too) when it is an ops export
        rows, records = measured_records(measurements)
        if records is not None:
            _note_other_scenario(measurements, source, model)
    else:
        rows, records = _measure_here(ctx, measure, model.source_scenario, name, as_json)
    terms, _, left = measured_terms([m for m, _ in rows], model, DEDUCTIONS, home=ctx.home)
    if left:  # the first row refused, by its line
        line, spec = next((i, m) for i, (m, _) in enumerate(rows, start=2) if m in left)
        where = f"{measurements}, line {line}" if measurements is not None else "measured here"
        raise InvalidInputError(f"{where}: model {spec}: {left[spec]}")
    alternatives = {d: t for d, t in terms.items() if d != "as-source"}
    per_op = None
    if records is not None:  # the operations were timed here too: the per-op correction is a candidate
        try:
            per_op = [measured_ops(records[m], model) for m, _ in rows]
        except EdgeplanError as e:
            click.echo(f"note: the per-op correction is not offered: {e}", err=True)
    device = fit(name, terms["as-source"], [v for _, v in rows], model, source, [m for m, _ in rows],
                 alternatives=alternatives, measured_ops=per_op)
    path = device.save(home_root(ctx.home))
    if measurements is None:  # what was measured here, in the format --measurements reads
        with (path.parent / "measurements.csv").open("w", newline="") as f:
            csv.writer(f).writerows([("model", "latency_ms"), *rows])
    if as_json:
        emit_json({"device": name, "path": str(path), "source": source, "method": method, "form": device.form,
                   "deduction": device.deduction, "coef": device.coef, "loo_mape": device.to_dict()["loo_mape"],
                   "per_op_test": device.info.get("per_op_test"), "samples": len(rows)})
        return
    click.echo(f"device {name}: {len(rows)} measured models, correction {device.form} of {source} ({method}), "
               f"kernels {device.deduction}; leave-one-out MAPE {device.loo_mape.get(device.form, float('nan')):.2f}%")
    click.echo("  " + ", ".join(f"{k} {v:.4g}" for k, v in device.coef.items() if v))
    if device.op_correction is not None:
        c = device.op_correction
        click.echo(f"  per-op: factors for {len(c.keys)} op kinds from the measured ops, residual models for "
                   f"{', '.join(sorted(c.residuals)) or 'no category (too few ops)'}")
    test = device.info.get("per_op_test")
    if test is not None:  # another form had the lowest leave-one-out score
        bar = f"{test['bar_se']:g} standard error" + ("" if test["bar_se"] == 1 else "s")
        verdict = (f"kept: within {bar}" if test["kept"] == PER_OP else f"replaced by {test['kept']}: more than {bar}")
        click.echo(f"  per-op {verdict} ({test['rival']} leads it by {test['loo_gain']:.2f} +- "
                   f"{test['standard_error']:.2f} points of leave-one-out MAPE)")
    click.echo(f"  saved to {path}; use it with `edgeplan predict MODEL --device {name} --method {method}`")


def _note_other_scenario(dataset: Path, source: str, model: Any) -> None:
    """Say so when an ``ops export`` was measured in another scenario than the source's: its end-to-end latencies
    are calibrated as given, but its operations are another runtime's kernels, which the source predicts by their
    category at best."""
    import json

    from edgeplan.measure.op_campaign import open_dataset_file
    from edgeplan.measure.scenarios import SCENARIOS

    with open_dataset_file(dataset) as f:
        measured = json.loads(f.readline()).get("scenario")
    expected = source if source in SCENARIOS else model.info.get("source_scenario")
    if measured and expected and measured != expected:
        of = source if source == expected else f"{source} ({expected})"
        click.echo(f"note: {dataset} was measured in {measured}, not in the scenario of the source {of}: its "
                   f"latencies are calibrated as given, its operations predicted by category at best; to predict "
                   f"{measured}'s own kernels, use --from {measured}", err=True)


def primitive_model_folder(home: str | None, name: str) -> Path:
    """Where ``calibrate --primitives --name NAME`` keeps the device's performance model."""
    from edgeplan.costmodels.opwise.profiles import home_root

    return home_root(home) / name / "primitives"


def resolve_primitive_model(home: str | None, source: str | None) -> Path:
    """The performance model folder named by ``source``: a folder, a calibrated device, or None for the shipped one.

    Raises
    ------
    InvalidInputError
        When ``source`` is neither a folder with a model nor a device calibrated with ``--primitives``.
    """
    from edgeplan.decisions.select import SHIPPED, SHIPPED_MODEL
    from edgeplan.errors import InvalidInputError

    if source is None:
        return SHIPPED / SHIPPED_MODEL
    for folder in (Path(source), primitive_model_folder(home, source)):
        if (folder / "model.json").is_file():
            return folder
    raise InvalidInputError(f"{source!r} is neither a performance model folder (with model.json, from `edgeplan "
                            f"primitives fit`) nor a device calibrated with `edgeplan calibrate --primitives`")


def _calibrate_primitives(ctx: Context, measurements: Path | None, name: str, source: str | None,
                          networks: tuple[str, ...], sampling: tuple[int, str], threads: int,
                          torch_device: str | None,
                          method: str, seed: int, budget_s: float | None, replace: bool, as_json: bool) -> None:
    """Measure a few layers here (or read them) and move the primitive performance model to this machine."""
    from edgeplan.costmodels import load_performance_model, load_primitive_csv
    from edgeplan.costmodels.transfer_learning import calibrate_primitives
    from edgeplan.errors import InvalidInputError
    from edgeplan.measure.device import is_cuda_device

    default = click.core.ParameterSource.DEFAULT
    samples, design = sampling
    samples_given = any(click.get_current_context().get_parameter_source(o) is not default
                        for o in ("samples", "design"))
    if measurements is not None and networks:
        raise InvalidInputError("--network measures layers here; --measurements reads them from a file: use one")
    if measurements is not None and (budget_s is not None or samples_given):
        raise InvalidInputError("--samples, --design and --budget-s are about measuring here; drop them with "
                                "--measurements")
    if torch_device is not None and torch_device != "cpu" and not is_cuda_device(torch_device):
        raise InvalidInputError(f"--torch-device {torch_device!r}: use cpu, cuda or cuda:N")
    if measurements is None:
        torch_device = torch_device or "cpu"
    if networks and samples_given:
        raise InvalidInputError("--network measures every conv layer of the model; drop --samples and --design")
    if budget_s is not None and not budget_s > 0:
        raise InvalidInputError(f"--budget-s {budget_s:g}: give a positive number of seconds")
    folder = primitive_model_folder(ctx.home, name)
    if (folder / "model.json").exists() and not replace:
        raise InvalidInputError(f"device {name!r} already has a primitive performance model ({folder}); choose "
                                "another --name or pass --replace")
    source_dir = resolve_primitive_model(ctx.home, source)
    if source_dir.resolve() == folder.resolve():
        raise InvalidInputError(f"--from {source} is the device being replaced; calibrate from its source "
                                "(a model folder, or the shipped model without --from)")
    if not (source_dir / "model.json").is_file():
        raise InvalidInputError(f"no performance model in {source_dir}; fit one with `edgeplan primitives fit "
                                "--data TABLE.csv --out DIR` and pass --from DIR")
    model = load_performance_model(source_dir)
    measured: dict[str, Any] = {}
    if measurements is not None:
        data = load_primitive_csv(measurements)
    else:
        data, measured = _measure_layers(ctx, networks, (samples, design), threads, torch_device or "cpu", seed,
                                         budget_s, as_json)
        if data is None:
            if as_json:
                emit_json({"device": name, "complete": False, "measured": measured["report"]})
                return
            report = measured["report"]
            click.echo(f"measured {report['configs_total'] - report['remaining']} of {report['configs_total']} "
                       f"layers within --budget-s; run the same command again to resume (nothing fitted yet)")
            return
    shared = [p for p in model.primitive_names if p in data.primitives]
    if 0 < len(shared) < len(model.primitive_names):
        click.echo(f"note: the measurements cover {len(shared)} of the source's {len(model.primitive_names)} "
                   "primitives; the others are moved by what the measured ones teach (with the factor: their median "
                   "scale)", err=True)
    with _fit_bar(not as_json) as progress:
        result = calibrate_primitives(model, data, method=method, seed=seed, threads=threads, progress=progress)
    here = measurements is None
    result.model.info["calibration"] = {"device": name, "source": str(source_dir),
                                        "threads": threads if here else None,
                                        "torch_device": torch_device,
                                        "data": str(measurements) if measurements else measured.get("campaign")}
    path = _save_device(result.model, folder, measured if here else None, ctx.command)
    scored = result.model.info["transfer"]["calibration"]  # the scores, NaN written as null
    out = {"device": name, "complete": True, "path": str(path), "source": str(source_dir), "method": result.method,
           "layers": result.rows, "folds": result.folds, "measured_primitives": len(shared),
           "cv_mdrae": scored["scores"], "cv_transform_mdrae": scored["transform_scores"],
           "threads": threads if here else None, "torch_device": torch_device,
           "failed": measured.get("report", {}).get("failed", [])}
    if as_json:
        emit_json(out)
        return
    click.echo(f"device {name}: {result.rows} layers, primitive model of {source_dir} moved by {result.method}")
    if result.folds:
        click.echo(f"  {result.folds}-fold cross-validated MdRAE (median over primitives | transformations, whose "
                   "tensors may recur across folds):")
        for m, v in result.scores.items():
            t = result.transform_scores.get(m, float("nan"))
            mark = "  <- chosen" if m == result.method else ""
            click.echo(f"    {m:<15} {100 * v:7.2f} % | {100 * t:7.2f} %{mark}")
    else:
        kept = ", so auto keeps the factor correction" if method == "auto" else ""
        click.echo(f"  one layer: nothing to cross-validate{kept}")
    hint = f" --threads {threads}" if here else ""
    click.echo(f"  saved to {path}; use it with `edgeplan select MODEL --costs predicted --device {name}{hint}`")


def _save_device(model: Any, folder: Path, measured: dict[str, Any] | None, command: str) -> Path:
    """Write the model (and the measured table) to a fresh folder, then put it in place of ``folder`` at once."""
    import shutil
    import tempfile

    from edgeplan.costmodels import save_performance_model

    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        save_performance_model(model, staging)
        if measured:
            _export_measured(measured, staging / "measured.csv", command)
        old = folder.with_name(f".{folder.name}-old")
        if folder.exists():
            shutil.rmtree(old, ignore_errors=True)
            folder.rename(old)
        staging.rename(folder)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return folder


@contextmanager
def _fit_bar(enabled: bool) -> Iterator[Callable[[int, int], None]]:
    """A bar over the calibration's fits (cross-validation folds, then the final fit), or a no-op."""
    if not enabled:
        yield lambda done, total: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("calibrating"), BarColumn(), MofNCompleteColumn(), TextColumn("fits"), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True)) as bar:
        task = bar.add_task("calibrating", total=None)
        yield lambda done, total: bar.update(task, completed=done, total=total)


def _measure_layers(ctx: Context, networks: tuple[str, ...], sampling: tuple[int, str], threads: int, torch_device: str,
                    seed: int, budget_s: float | None, as_json: bool) -> tuple[Any, dict[str, Any]]:
    """Profile the layers to calibrate from in the Store (resumable): the table of the completely measured layers,
    or None when the budget stopped the measuring (run again to resume)."""
    from edgeplan.cli.primitives_cmd import _network_configs
    from edgeplan.measure.device import describe_device
    from edgeplan.measure.paths import default_store_path
    from edgeplan.measure.primitive_campaign import (
        campaign_dataset,
        find_campaign,
        primitive_campaign,
        profile_primitives,
    )
    from edgeplan.measure.store import Store

    device = describe_device("torch", threads, torch_device=torch_device)
    configs = _network_configs(networks) if networks else None
    samples, design = sampling
    plan = primitive_campaign(device.key, configs=configs, seed=seed, max_configs=None if networks else samples,
                              threads=threads, device=torch_device, design=design)
    with Store.open(default_store_path(ctx.home)) as store:
        report = profile_primitives(store, plan, device, budget_s=budget_s, progress=not as_json,
                                    command=ctx.command)
        info: dict[str, Any] = {"campaign": plan.name, "store": str(store.path), "report": report.to_dict()}
        if report.stopped_by_budget:
            return None, info
        if report.failed:
            # retried on every run, so the campaign may never complete: calibrate from the complete layers
            shown = "; ".join(f"{f.key}: {f.reason}" for f in report.failed[:5])
            click.echo(f"warning: {len(report.failed)} primitive run(s) failed ({shown}); calibrating from the "
                       f"{report.configs_exportable} completely measured layers (run again to retry them)", err=True)
        return campaign_dataset(store, find_campaign(store, plan.name)), info


def _export_measured(measured: dict[str, Any], out: Path, command: str) -> None:
    """Write the measured layers beside the calibrated model (mulder2021 CSV with its provenance)."""
    from edgeplan.measure.primitive_campaign import export_dataset, find_campaign
    from edgeplan.measure.store import Store

    with Store.open(str(measured["store"])) as store:
        export_dataset(store, find_campaign(store, measured["campaign"]), out, command=command)
