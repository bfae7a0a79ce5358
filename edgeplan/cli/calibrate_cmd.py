"""``edgeplan calibrate``: a device profile from a few models measured on the device (few-shot adaptation)."""

from __future__ import annotations

from pathlib import Path

import click

from edgeplan.cli.common import Context, emit_json

__all__ = ["calibrate"]


@click.command()
@click.option("--measurements", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="CSV with columns model,latency_ms (zoo strings, e.g. nb201:|...|, measured on the device).")
@click.option("--name", required=True, help="Name of the new device profile (use it as `predict --device NAME`).")
@click.option("--from", "source", default="torch-fp32-1t", show_default=True,
              help="Device profile whose per-op predictions are corrected.")
@click.option("--method", type=click.Choice(["gbdt", "lasso", "rf", "mlp"]), default="lasso", show_default=True,
              help="The source's predictor method.")
@click.option("--replace", is_flag=True, help="Overwrite an existing device of that name.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_obj
def calibrate(ctx: Context, measurements: Path, name: str, source: str, method: str, replace: bool,
              as_json: bool) -> None:
    """Create device profile NAME from latencies measured on it: a learnt correction of a source's predictions.

    Every row is checked before anything is written: a missing column, an unknown model or a non-positive
    latency is refused with its line, and no profile is stored.
    """
    from edgeplan.errors import EdgeplanError, InvalidInputError
    from edgeplan.latency.calibrate import calibrate as fit
    from edgeplan.latency.calibrate import read_measurements, source_terms
    from edgeplan.latency.model import LatencyModel
    from edgeplan.latency.predict import home_root, kernel_profile_of, load_device_model, spec_ops

    if not name or "/" in name or name.startswith("."):
        raise InvalidInputError(f"--name {name!r}: use a plain name such as my-phone")
    rows = read_measurements(measurements)
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
    profile = kernel_profile_of(model)
    terms = []
    for line, (spec, _) in enumerate(rows, start=2):
        try:
            ops, skipped = spec_ops(spec, profile, ctx.home)
            if skipped:
                raise InvalidInputError(f"kernels {', '.join(skipped)} have no IR nodes to predict from")
            terms.append(source_terms(model.predict_ops(ops), ops))
        except EdgeplanError as e:
            raise InvalidInputError(f"{measurements}, line {line}: model {spec}: {e}") from e
    device = fit(name, terms, [v for _, v in rows], model, source, [m for m, _ in rows])
    path = device.save(home_root(ctx.home))
    if as_json:
        emit_json({"device": name, "path": str(path), "source": source, "method": method, "form": device.form,
                   "coef": device.coef, "loo_mape": device.loo_mape, "samples": len(rows)})
        return
    click.echo(f"device {name}: {len(rows)} measured models, correction {device.form} of {source} ({method}); "
               f"leave-one-out MAPE {device.loo_mape.get(device.form, float('nan')):.2f}%")
    click.echo("  " + ", ".join(f"{k} {v:.4g}" for k, v in device.coef.items() if v))
    click.echo(f"  saved to {path}; use it with `edgeplan predict MODEL --device {name} --method {method}`")
