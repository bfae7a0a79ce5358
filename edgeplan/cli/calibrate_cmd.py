"""``edgeplan calibrate``: a device profile from a few models measured on the device (few-shot adaptation of the
op-wise latency predictors, :mod:`edgeplan.costmodels.opwise.calibrate`)."""

from __future__ import annotations

from pathlib import Path

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
@click.option("--kit", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Instead of calibrating: write a kit for a phone or board edgeplan cannot reach, the --measure "
                   "models as .tflite (threads and dtype of a litert --from) with run_kit.sh, which runs LiteRT's "
                   "benchmark_model there over adb or ssh; its results.txt is then --measurements.")
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
def calibrate(ctx: Context, measurements: Path | None, measure: tuple[str, ...], kit: Path | None, name: str,
              source: str | None, method: str | None, replace: bool, as_json: bool) -> None:
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
      edgeplan calibrate --kit kit/ --measure set:nb201-sample --from litert-fp32-1t --name pixel
      edgeplan calibrate --measurements kit/results.txt --from litert-fp32-1t --name pixel
    """
    from edgeplan.costmodels.opwise.calibrate import PER_OP
    from edgeplan.decisions.calibrate import DEFAULT_SOURCE, MeasureHere
    from edgeplan.decisions.calibrate import calibrate as calibrate_device
    from edgeplan.errors import InvalidInputError

    if kit is not None:
        _write_kit(kit, measure, source, as_json, ctx)
        return
    if measurements is not None and measure:
        raise InvalidInputError("--measurements gives latencies measured elsewhere and --measure measures models "
                                "here: give one of them")
    if measurements is None and not measure:
        raise InvalidInputError("--measurements FILE.csv is required (columns model,latency_ms), or --measure MODEL "
                                "to time models here (the primitive performance model is calibrated by `edgeplan "
                                "primitives transfer --name`)")
    given = measurements if measurements is not None else MeasureHere(measure, command=ctx.command)
    result = calibrate_device(given, name, source=source or DEFAULT_SOURCE, method=method, home=ctx.home,
                              replace=replace, progress=not as_json)
    for note in result.notes:
        click.echo(f"note: {note}", err=True)
    if as_json:
        emit_json(result.to_dict())
        return
    device, path = result.calibrated, result.path
    click.echo(f"device {name}: {result.samples} measured models, correction {device.form} of {result.source} "
               f"({result.method}), kernels {device.deduction}; leave-one-out MAPE "
               f"{device.loo_mape.get(device.form, float('nan')):.2f}%")
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
    click.echo(f"  saved to {path}; use it with `edgeplan predict MODEL --device {name} --method {result.method}`")


def _write_kit(kit: Path, measure: tuple[str, ...], source: str | None, as_json: bool, ctx: Context) -> None:
    """``calibrate --kit``: the --measure models converted for LiteRT in --from's threads and dtype."""
    import re

    from edgeplan.errors import InvalidInputError
    from edgeplan.measure.litert_kit import write_kit
    from edgeplan.measure.model_sets import expand_models

    match = re.fullmatch(r"litert-(fp32|int8)-(\d+)t", source or "")
    if match is None:
        raise InvalidInputError("--kit writes LiteRT models: give --from litert-fp32-1t, litert-fp32-2t or "
                                "litert-int8-1t (their threads and dtype)")
    if not measure:
        raise InvalidInputError("--kit needs the models to calibrate with: give --measure MODEL (repeatable, set:NAME)")
    models = expand_models(measure)
    dtype = "float32" if match.group(1) == "fp32" else "int8"
    from rich.console import Console

    with Console(stderr=True).status(f"converting {len(models)} model(s) to LiteRT", spinner="dots"):
        folder = write_kit(models, kit, threads=int(match.group(2)), dtype=dtype, home=ctx.home)
    if as_json:
        emit_json({"kit": str(folder), "models": list(models), "threads": int(match.group(2)), "dtype": dtype})
        return
    click.echo(f"kit written to {folder}: {len(models)} model(s), {dtype}, {match.group(2)} thread(s)\n"
               f"  run it: {folder}/run_kit.sh adb [SERIAL]  (or: ssh USER@HOST, or: local)\n"
               f"  then:   edgeplan calibrate --measurements {folder}/results.txt --from {source} --name NAME")
