"""``edgeplan offload MODEL``: which layers run on the mobile and which in the cloud (eshratifar2018)."""

from __future__ import annotations

import click

from edgeplan.cli.common import Context, check_positive, emit_json

__all__ = ["offload"]


@click.command()
@click.argument("model")
@click.option("--network", default="wifi", show_default=True, help="Network preset: 3g, 4g or wifi (paper Tables 2-3).")
@click.option("--up-mbps", type=float, default=None, help="Custom upload speed (keeps the preset's power model).")
@click.option("--down-mbps", type=float, default=None, help="Custom download speed.")
@click.option("--objective", type=click.Choice(["latency", "energy"]), default="latency", show_default=True,
              help="Minimise the end-to-end latency, or the phone's energy (compute plus radio).")
@click.option("--battery-mj", type=float, default=None, help="Battery budget of the mobile (eq. 13), mJ.")
@click.option("--cloud-ms", type=float, default=None, help="Cloud-time limit (eq. 14), ms.")
@click.option("--mobile-threads", type=int, default=1, show_default=True, help="Threads of the mobile (measured).")
@click.option("--mobile-device", default=None,
              help="Predict the mobile on this device profile instead of measuring it here: a phone's LiteRT "
                   "(litert-fp32-1t, litert-fp32-2t, litert-int8-1t) or a device you calibrated.")
@click.option("--cloud-threads", type=int, default=2, show_default=True, help="Threads of the cloud (measured).")
@click.option("--cloud-speedup", type=float, default=None,
              help="Derive the cloud from the mobile instead: ranges / FACTOR (the paper's cloud: 11.25).")
@click.option("--mobile-power-w", type=float, default=None, help="Mobile compute power, W (default 7.5, stated).")
@click.option("--costs", "costs_source", type=click.Choice(["auto", "store", "shipped", "measure"]), default="auto",
              show_default=True, help="Where range latencies come from (auto: this machine's Store, else the shipped "
              "ranges if measured on this very device, else measure here; shipped: the reference machine's, with a "
              "warning).")
@click.option("--input-shape", default=None, help="Override the default input shape, e.g. 1x3x160x160.")
@click.option("--run", "do_run", is_flag=True,
              help="Execute the plan across two processes and measure it (median of 5 inferences).")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None,
              help="Save the schedule over the per-layer data sizes (Fig. 3c) to this image.")
@click.option("--lookup-grid", default=None,
              help="Also solve over a grid of link speeds (Mbps, e.g. 1,2,5,10,20,50; every up x down pair) and "
                   "print the lookup table a phone would store (end of §3.2).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output, with every cost input.")
@click.pass_obj
def offload(ctx: Context, model: str, network: str, up_mbps: float | None, down_mbps: float | None, objective: str,
            battery_mj: float | None, cloud_ms: float | None, mobile_threads: int, mobile_device: str | None,
            cloud_threads: int,
            cloud_speedup: float | None, mobile_power_w: float | None, costs_source: str, input_shape: str | None,
            do_run: bool, plot_path: str | None, lookup_grid: str | None, as_json: bool) -> None:
    """Plan which layers of MODEL run on the mobile and which in the cloud, for latency or mobile energy.

    The plan is optimal for its costs: dynamic programming over the layer ranges' latencies and the link's
    transfer times.

    \b
    Example:
      edgeplan offload paper:chair --network wifi --json
      edgeplan offload torchvision:resnet18 --up-mbps 5 --down-mbps 20 --objective energy --run
      edgeplan offload torchvision:mobilenet_v2 --mobile-device litert-fp32-1t --network 4g
    """
    from pathlib import Path

    from edgeplan.decisions.offload import (
        OffloadOptions,
        OffloadSetup,
        mobile_power,
        offload_lookup,
        offload_network,
        plan_offload,
        run_offload,
    )
    from edgeplan.frontends.zoo import parse_shape
    from edgeplan.measure import check_thread_count

    check_thread_count(mobile_threads)
    check_thread_count(cloud_threads)
    if (up_mbps is None) != (down_mbps is None):
        raise click.UsageError("give both --up-mbps and --down-mbps, or neither")
    click_ctx = click.get_current_context()
    if cloud_speedup is not None and click_ctx.get_parameter_source("cloud_threads") is not \
            click.core.ParameterSource.DEFAULT:
        raise click.UsageError("--cloud-speedup derives the cloud from the mobile's ranges, so --cloud-threads has "
                               "no effect with it: give one of the two")
    if mobile_device is not None and click_ctx.get_parameter_source("mobile_threads") is not \
            click.core.ParameterSource.DEFAULT:
        raise click.UsageError("--mobile-device predicts the mobile on its profile, so --mobile-threads has no "
                               "effect with it: give one of the two")
    if mobile_device is not None and do_run:
        raise click.UsageError("--run executes the plan on this machine, which is not the predicted mobile "
                               f"({mobile_device}): drop --run or --mobile-device")
    check_positive("--mobile-power-w", mobile_power_w, "the mobile's power draw in watts, a positive number")
    grid = None
    if lookup_grid:
        try:
            grid = [float(v) for v in lookup_grid.split(",") if v.strip()]
        except ValueError:
            raise click.BadParameter(f"expected comma-separated numbers, got {lookup_grid!r}",
                                     param_hint="--lookup-grid") from None
    net = offload_network(network, up_mbps, down_mbps)
    power = mobile_power(mobile_power_w, "given with --mobile-power-w")
    setup = OffloadSetup(model, mobile_threads, cloud_threads, cloud_speedup, costs_source,
                         parse_shape(input_shape) if input_shape else None, mobile_device=mobile_device)
    result = plan_offload(setup, net, OffloadOptions(objective, battery_mj, cloud_ms, "dp", power),
                          home=ctx.home, progress=not as_json, command=ctx.command)
    for warning in result.warnings:  # another device's costs: never silent
        click.echo(f"warning: {warning}", err=True)
    run = run_offload(result, repeats=5) if do_run else None
    lookup = offload_lookup(result, grid, like=network) if grid is not None else None
    if plot_path:
        from edgeplan.errors import InvalidInputError
        from edgeplan.reports.offload_report import plot_schedule

        try:
            plot_schedule(result, Path(plot_path))
        except OSError as e:
            raise InvalidInputError(f"cannot write the figure to {plot_path}: {e.strerror}; "
                                    "pick a writable path") from e
    if as_json:
        data = result.to_dict()
        if run is not None:
            data["run"] = run.to_dict()
        if lookup is not None:
            data["lookup"] = [entry.to_dict() for entry in lookup]
        emit_json(data)
        return
    from edgeplan.reports.offload_report import plan_summary_lines

    for line in plan_summary_lines(result):
        click.echo(line)
    if run is not None:
        split = run.split
        click.echo(f"  real split run: {split.latency_ms:.2f} ms median of {len(split.samples_ms)} (IQR "
                   f"{split.iqr_ms:.2f} ms), predicted {run.predicted_latency_ms:.2f} ms "
                   f"({100 * run.error_rel:+.1f}%); outputs match a local run to {split.max_abs_error:.1e}")
    if plot_path:
        click.echo(f"  figure: {plot_path}")
    if lookup is not None:
        ups = sorted({e.up_mbps for e in lookup})
        downs = sorted({e.down_mbps for e in lookup})
        cell = {(e.up_mbps, e.down_mbps): e for e in lookup}
        click.echo(f"  lookup table ({objective}-optimal pattern; rows: upload Mbps, columns: download Mbps):")
        click.echo("  " + f"{'up/down':>9}" + "".join(f"{d:>10g}" for d in downs))
        for u in ups:
            click.echo("  " + f"{u:>9g}" + "".join(f"{cell[(u, d)].pattern or 'infeas.':>10}" for d in downs))
