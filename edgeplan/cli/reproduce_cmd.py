"""``edgeplan reproduce PAPER``: a paper's results next to edgeplan's, computed from stored measurements."""

from __future__ import annotations

import click

from edgeplan.cli.common import Context, emit_json

__all__ = ["reproduce"]


@click.group()
def reproduce() -> None:
    """Print a paper's figures and edgeplan's side by side."""


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
    from edgeplan.experiments.eshratifar2018 import calibrated_slowdown, format_report
    from edgeplan.experiments.eshratifar2018 import reproduce as run

    speedup = cloud_speedup if cloud == "derived" else None
    if paper_regime and speedup is None:
        raise click.UsageError("--paper-regime needs the derived cloud (--cloud derived)")
    slowdown = calibrated_slowdown(cloud_speedup, costs_source) if paper_regime else None
    result = run(speedup, costs_source, slowdown)
    if as_json:
        emit_json(result)
        return
    for line in format_report(result):
        click.echo(line)
