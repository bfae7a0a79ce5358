"""``edgeplan partition MODEL``: cut a model into a pipeline over an edge cluster and place it (parthasarathy2022)."""

from __future__ import annotations

import click

from edgeplan.cli.common import Context, emit_json

__all__ = ["partition"]


@click.command()
@click.argument("model")
@click.option("--nodes", type=click.IntRange(min=1), default=None,
              help="Number of nodes (required with --simulate; checked against --bandwidth).")
@click.option("--memory-mb", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Memory of every node, MiB (a --bandwidth JSON file may give it instead; both: they must agree).")
@click.option("--bandwidth", "bandwidth_file", type=click.Path(dir_okay=False), default=None,
              help='Cluster file: CSV bandwidth matrix (Mbit/s) or JSON {"bandwidth_mbps", "memory_mb", "speed"}.')
@click.option("--simulate", "simulate_seed", type=int, default=None,
              help="Simulate the paper's cluster with this seed (nodes within 150 m of a router).")
@click.option("--compress", is_flag=True, help="Divide transfers by the ZFP x LZ4 ratio measured on the model.")
@click.option("--no-compute", is_flag=True, help="Do not measure compute times (the paper's model).")
@click.option("--threads", type=int, default=1, show_default=True, help="Threads of each stage (compute, --run).")
@click.option("--device", default=None,
              help="Predict each stage's compute on this device profile instead of measuring it here (nodes that "
                   "run LiteRT: litert-fp32-1t; or a device you calibrated).")
@click.option("--run", "do_run", is_flag=True,
              help="Deploy the plan as a pipeline of Ray actors with the links emulated and measure throughput "
                   "(10 inputs streamed).")
@click.option("--ray-address", default=None, help="Ray cluster for --run (default: a local Ray).")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None,
              help="Save a drawing of the placement on the cluster to this image.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output with every input to re-check it.")
@click.pass_obj
def partition(ctx: Context, model: str, nodes: int | None, memory_mb: float | None, bandwidth_file: str | None,
              simulate_seed: int | None, compress: bool, no_compute: bool, threads: int, device: str | None,
              do_run: bool,
              ray_address: str | None, plot_path: str | None, as_json: bool) -> None:
    """Cut MODEL at its candidate points into partitions that fit the nodes and place them to maximise throughput.

    edgeplan's planner counts every stage's measured compute time and each link's transfer time, and searches for
    0.8 s at most.

    \b
    Example:
      edgeplan partition torchvision:resnet18 --simulate 0 --nodes 6 --memory-mb 64 --json
      edgeplan partition torchvision:resnet18 --bandwidth cluster.json --run
      edgeplan partition torchvision:mobilenet_v2 --simulate 0 --nodes 4 --memory-mb 8 --device litert-fp32-1t
    """
    import math
    from pathlib import Path

    from edgeplan.decisions.partition import (
        PartitionOptions,
        load_cluster,
        plan_partition,
        run_partition,
        simulated_cluster,
    )
    from edgeplan.measure.harness import check_thread_count
    from edgeplan.reports.placement_plot import plan_lines, plot_placement

    check_thread_count(threads)
    threads_given = click.get_current_context().get_parameter_source("threads") is not \
        click.core.ParameterSource.DEFAULT
    if device is not None and (no_compute or do_run or threads_given):
        raise click.UsageError("--device predicts the stages' compute on a device this machine does not run: it "
                               "goes with none of --no-compute, --run and --threads")
    if plot_path and not Path(plot_path).parent.is_dir():  # before planning (and --run), not after
        raise click.BadParameter(f"{Path(plot_path).parent} is not an existing folder; create it or pick another path",
                                 param_hint="--plot")
    if (bandwidth_file is None) == (simulate_seed is None):
        raise click.UsageError("give exactly one of --bandwidth FILE or --simulate SEED")
    if memory_mb is not None and not math.isfinite(memory_mb):  # FloatRange lets nan and inf through
        raise click.BadParameter(f"must be a finite number of MiB, got {memory_mb}", param_hint="--memory-mb")
    if simulate_seed is not None:
        if nodes is None or memory_mb is None:
            raise click.UsageError("--simulate needs --nodes and --memory-mb")
        cluster = simulated_cluster(nodes, simulate_seed, memory_mb, "min")
    else:
        assert bandwidth_file is not None
        cluster = load_cluster(bandwidth_file, nodes, memory_mb)  # names a missing or disagreeing memory
    result = plan_partition(model, cluster, PartitionOptions("own", compress, not no_compute, threads, device),
                            home=ctx.home)
    run = None
    if do_run:
        partition_run = run_partition(result, address=ray_address)
        if partition_run.skipped:
            click.echo(f"{partition_run.skipped}; --run skipped", err=True)
        run = partition_run.pipeline
    if plot_path:
        plot_placement(result, Path(plot_path))
    if as_json:
        data = result.to_dict()
        if run is not None:
            data["run"] = run.to_dict()
        if plot_path:
            data["figure"] = plot_path
        emit_json(data)
        return
    for line in plan_lines(result):
        click.echo(line)
    if run is not None:
        click.echo(f"  Ray pipeline ({run.inputs} inputs after {run.warmup} warm-up, Ray {run.ray_version}): period "
                   f"{run.period_mean_ms:.1f} ms mean, {run.period_median_ms:.1f} ms median; predicted "
                   f"{run.predicted_ms:.1f} ms ({run.bottleneck}): ratio {run.period_ratio:.3f}; throughput "
                   f"{run.throughput_per_s:.2f}/s; outputs match a local run ({run.max_abs_error:.1e})")
    if plot_path:
        click.echo(f"  figure: {plot_path}")
