"""``edgeplan calibrate``: a device profile from a few models measured on the device (few-shot adaptation of the
op-wise latency predictors, :mod:`edgeplan.costmodels.opwise.calibrate`)."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import click

from edgeplan.cli.common import Context, emit_json

__all__ = ["calibrate"]


@click.command()
@click.option("--measurements", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="CSV with columns model,latency_ms (zoo strings, e.g. nb201:|...|, measured on the device), or "
                   "a dataset of `edgeplan profile ops` runs there (its --export, .jsonl.gz or .xz: median end-to-end "
                   "times, and the operations' times for the per-op correction).")
@click.option("--measure", "measure", multiple=True, metavar="MODEL",
              help="Instead of --measurements: time this model here (repeatable; ranges and set:NAME too), in "
                   "--from's scenario beside the reference model synthetic:0, and calibrate to this machine (their "
                   "operations are timed too, which adds the per-op correction to the candidates); the "
                   "latencies are saved beside the profile as measurements.csv.")
@click.option("--name", required=True,
              help="The device of the edgeplan home ($EDGEPLAN_HOME/devices/NAME/) to give this latency profile, "
                   "read by `predict --device NAME` (its primitive performance model, for `select --device NAME`, "
                   "comes from `edgeplan primitives transfer --name NAME`).")
@click.option("--from", "source", default=None,
              help="Device profile whose per-op predictions are corrected [default: torch-fp32-1t].")
@click.option("--method", type=click.Choice(["gbdt", "lasso", "rf", "mlp"]), default=None,
              help="The source's predictor method [default: lasso, or the source's default (gbdt) where it has no "
                   "Lasso].")
@click.option("--replace", is_flag=True, help="Overwrite an existing device of that name.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_obj
def calibrate(ctx: Context, measurements: Path | None, measure: tuple[str, ...], name: str, source: str | None,
              method: str | None, replace: bool, as_json: bool) -> None:
    """Create device profile NAME from latencies measured on it: a learnt correction of a source's predictions.

    Every row is checked before anything is written: a missing column, an unknown model or a non-positive
    latency is refused with its line, and no profile is stored. With --measure the models are timed here instead
    (this machine becomes the device).

    The convolution-primitive performance model of `edgeplan select` is moved to a machine by `edgeplan primitives
    transfer --name NAME` instead.

    \b
    Example:
      edgeplan calibrate --measurements phone.csv --name my-phone
      edgeplan calibrate --measure set:nb201-sample --name here
      edgeplan predict torchvision:resnet18 --device my-phone
    """
    from edgeplan.errors import InvalidInputError

    if not name or "/" in name or name.startswith("."):
        raise InvalidInputError(f"--name {name!r}: use a plain name such as my-phone")
    if len(name.encode()) > 100:
        raise InvalidInputError(f"--name is {len(name.encode())} bytes long; use a short plain name such as my-phone")
    from edgeplan.costmodels.opwise.profiles import shipped_devices

    if name in shipped_devices():  # a calibrated device is looked up first: it would hide the scenario's profile
        raise InvalidInputError(f"--name {name!r} is the name of a measurement scenario, whose latency profile "
                                f"`predict --device {name}` uses; choose another name such as {name}-calibrated")
    if measurements is not None and measure:
        raise InvalidInputError("--measurements gives latencies measured elsewhere and --measure measures models "
                                "here: give one of them")
    if measurements is None and not measure:
        raise InvalidInputError("--measurements FILE.csv is required (columns model,latency_ms), or --measure MODEL "
                                "to time models here (the primitive performance model is calibrated by `edgeplan "
                                "primitives transfer --name`)")
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
    from edgeplan.decisions.calibrate import model_terms
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
    if measurements is not None:  # records (the operations timed too) when it is a `profile ops --export` dataset
        rows, records = measured_records(measurements)
        if records is not None:
            _note_other_scenario(measurements, source, model)
    else:
        rows, records = _measure_here(ctx, measure, model.source_scenario, name, as_json)
    terms, _, left = model_terms([m for m, _ in rows], model, DEDUCTIONS, home=ctx.home)
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
    """Say so when a ``profile ops --export`` dataset was measured in another scenario than the source's: its
    end-to-end latencies are calibrated as given, but its operations are another runtime's kernels, which the source
    predicts by their category at best."""
    import json

    from edgeplan.measure.op_dataset import open_dataset_file
    from edgeplan.measure.scenarios import SCENARIOS

    with open_dataset_file(dataset) as f:
        measured = json.loads(f.readline()).get("scenario")
    expected = source if source in SCENARIOS else model.info.get("source_scenario")
    if measured and expected and measured != expected:
        of = source if source == expected else f"{source} ({expected})"
        click.echo(f"note: {dataset} was measured in {measured}, not in the scenario of the source {of}: its "
                   f"latencies are calibrated as given, its operations predicted by category at best; to predict "
                   f"{measured}'s own kernels, use --from {measured}", err=True)
