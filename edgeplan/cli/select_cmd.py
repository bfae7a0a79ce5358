"""``edgeplan select MODEL``: choose every conv layer's primitive with PBQP, optionally run the result for real."""

from __future__ import annotations

import click

from edgeplan.cli.common import Context, emit_json

__all__ = ["select"]


@click.command()
@click.argument("model")
@click.option("--costs", "source", type=click.Choice(["predicted", "measured"]), default="measured",
              show_default=True,
              help="measured: profiled tables (default: the shipped 1-thread tables of the reference machine); "
                   "predicted: a performance model (--model DIR).")
@click.option("--model", "model_dir", type=click.Path(file_okay=False, exists=True), default=None,
              help="Performance model folder of --costs predicted (e.g. from `edgeplan primitives fit`).")
@click.option("--device", "device", default=None,
              help="A device of the edgeplan home ($EDGEPLAN_HOME/devices/NAME/): select with its primitive "
                   "performance model, made by `edgeplan primitives transfer --name NAME` (with --costs predicted; "
                   "its latency profile, from `edgeplan calibrate --name NAME`, is what `predict --device` reads).")
@click.option("--data", "tables", type=click.Path(dir_okay=False, exists=True), multiple=True,
              help="Measured tables in the mulder2021 format (repeatable; default: the shipped ones).")
@click.option("--run", "do_run", is_flag=True,
              help="Build the network, check its outputs and time it against PyTorch and the best single primitive "
                   "(15 interleaved rounds).")
@click.option("--threads", type=int, default=1, show_default=True,
              help="Intra-op threads of --run and of the measured layer costs; match the tables' thread count "
                   "(the shipped default tables: 1; the repository's data/primitives/networks_cpu_2t.csv: 2).")
@click.option("--torch-device", "torch_device", default=None, metavar="cpu|cuda|cuda:N",
              help="Where the network runs: only the primitives that run there are options, the layout-transparent "
                   "layers are measured there, and --run times it there. A GPU needs its own costs: --data (e.g. the "
                   "shipped H200 tables), --model or --device. [default: where --device was calibrated, else cpu]")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_obj
def select(ctx: Context, model: str, source: str, model_dir: str | None, device: str | None, tables: tuple[str, ...],
           do_run: bool, threads: int, torch_device: str | None, as_json: bool) -> None:
    """Select the primitive (and layouts) of every conv layer of MODEL to minimise its predicted time.

    The selection is exact (PBQP); pooling, batch norm and ReLU are measured in each layout on this machine
    (--threads) and counted, when the network's device is here (planning for a GPU from elsewhere leaves them out).

    \b
    Example:
      edgeplan select torchvision:resnet18 --run --json
      edgeplan select torchvision:resnet18 --costs predicted --device my-machine --threads 2
    """
    from edgeplan.decisions.select import SelectOptions, run_selected
    from edgeplan.decisions.select import select as select_primitives
    from edgeplan.measure.harness import check_thread_count

    check_thread_count(threads)
    if model_dir is not None and source != "predicted":
        raise click.UsageError("--model is the performance model of --costs predicted; add --costs predicted")
    if tables and source != "measured":
        raise click.UsageError("--data gives the tables of --costs measured; drop it or use --costs measured")
    sel = select_primitives(model, costs=source, model_dir=model_dir, tables=list(tables) or None, device=device,
                            torch_device=torch_device, options=SelectOptions("exact", flow_threads=threads),
                            home=ctx.home)
    if do_run:  # where --device was calibrated, unless --torch-device said
        _check_cuda(sel.torch_device, "--run times the network on it")
    for note in sel.notes:
        click.echo(f"note: {note}", err=True)
    result = sel.to_dict()
    for warning in sel.warnings:  # another device's costs: never silent
        click.echo(f"warning: {warning}", err=True)
    run = run_selected(sel, threads=threads, rounds=15) if do_run else None
    if run is not None:
        result["run"] = run.to_dict()
    if as_json:
        emit_json(result)
    else:
        _print(sel, run)
    if run is not None and not run.outputs_match:
        raise click.ClickException(f"the selected network's outputs differ from PyTorch's by more than "
                                   f"{run.tolerance:g} (relative): {run.run.output_error}")


def _check_cuda(torch_device: str, why: str) -> None:
    """Refuse a CUDA device on a machine without CUDA, saying how to plan for it from here."""
    from edgeplan.decisions.select import runs_here

    if not runs_here(torch_device):
        from edgeplan.errors import MeasurementError

        raise MeasurementError(f"--torch-device {torch_device}: CUDA is not available here, and {why}; to plan for "
                               "that GPU from here, leave out --run")


def fixed_summary(reasons: tuple[str, ...], model: str) -> list[str]:
    """Lines saying why conv layers were left to PyTorch, counted by reason, with what to do where something can
    be done (a layer missing from the measured tables can be priced by the model or measured)."""
    from collections import Counter

    from edgeplan.decisions.select import NOT_IN_TABLES

    if not reasons:
        return []
    counts = Counter(reasons)
    lines = ["left to PyTorch: " + ", ".join(f"{n} {why}" for why, n in counts.most_common())]
    if NOT_IN_TABLES in counts:
        lines.append(f"  to select the {counts[NOT_IN_TABLES]} not in the measured tables: price them with the "
                     f"performance model (--costs predicted), or measure them (`edgeplan profile primitives "
                     f"--network {model}`) and pass the exported table with --data")
    return lines


def _print(sel: object, result: object) -> None:
    from rich.console import Console
    from rich.table import Table

    from edgeplan.decisions.select import ModelSelection, SelectionRunResult

    assert isinstance(sel, ModelSelection)
    plan = sel.plan
    table = Table(title=f"{sel.spec}: primitive selection ({plan.source})")
    with_flow = "layout-transparent" in plan.source
    ms_column = "ms (+ layers fed)" if with_flow else "ms"
    for column in ("layer", "c k im f s", "primitive", "layouts", ms_column):
        table.add_column(column, justify="right" if column == ms_column else "left")
    for node, snode in zip(plan.nodes, sel.structure.nodes, strict=True):
        shape = " ".join(str(v) for v in snode.conv[:5]) if snode.conv else "join"
        table.add_row(node.name, shape, node.primitive or "-", f"{node.input_layout}->{node.output_layout}",
                      f"{node.latency_ms:.3f}")
    console = Console()
    console.print(table)
    for t in plan.transforms:
        console.print(f"  transform {t.src}->{t.dst} of {t.tensor} before {t.at}: {t.latency_ms:.3f} ms")
    console.print(f"predicted {plan.total_ms:.3f} ms (primitives {plan.primitives_ms:.3f} + transforms "
                  f"{plan.transforms_ms:.3f}); {len(plan.choices())} layers selected, {len(sel.structure.fixed)} "
                  f"left to PyTorch; optimisation {1000 * (sel.estimate_s + plan.optimisation_s):.1f} ms "
                  f"(costs {1000 * sel.estimate_s:.1f} + PBQP {1000 * plan.optimisation_s:.1f}; "
                  f"{plan.solution.solver}, {'optimal' if plan.solution.optimal else 'not proven optimal'})")
    for line in fixed_summary(sel.structure.fixed_reasons, sel.spec):
        console.print(line)
    if isinstance(result, SelectionRunResult):
        run = result.run
        for label, lat in run.latency.items():
            name = f"single ({run.single_primitive})" if label == "single" else label
            err = run.output_error.get(label)
            verdict = "ok" if result.matches(label) else "MISMATCH"
            check = "" if err is None else f"  output error {err:.1e} ({verdict})"
            console.print(f"  {name:<32} median {lat.median_ms:9.3f} ms [q1 {lat.q1_ms:.3f}, q3 {lat.q3_ms:.3f}]"
                          f"{check}")
        runs = run.latency["selected"].runs
        console.print(f"  speed-up over PyTorch: {run.speedup:.3f}x ({run.torch_device}, {run.threads} threads, {runs} "
                      "interleaved runs)")
