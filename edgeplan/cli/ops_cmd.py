"""``edgeplan ops fit``: the operation-wise latency models of a scenario (li2023), and ``edgeplan profile ops``, the
per-op campaign that measures their training data."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from edgeplan.cli.common import (
    KEEP_MEMORY_HELP,
    Context,
    check_positive,
    emit_json,
    keep_memory,
    model_specs,
    refuse_failures,
)
from edgeplan.measure.scenarios import SCENARIOS

if TYPE_CHECKING:
    from edgeplan.costmodels.opwise.profile_fit import FittedProfile

__all__ = ["ops", "profile_ops_cmd"]

_SCENARIOS = list(SCENARIOS)


@click.group()
def ops() -> None:
    """Operation-wise latency models: what `predict`, `offload` and `partition` price a model's operations with."""


@click.command("ops")
@click.argument("models", nargs=-1)
@click.option("--scenario", "scenario_names", type=click.Choice(_SCENARIOS), multiple=True, required=True,
              help="Runtime, dtype and threads (repeat for several; each is its own campaign).")
@click.option("--models-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="More models, one zoo string per line.")
@click.option("--runs", type=int, default=10, show_default=True, help="Profiled runs per model (per-op median).")
@click.option("--budget-s", "budget_s", type=float, default=None,
              help="Stop after this many seconds in all, every scenario together (run the command again to "
                   "resume).")
@click.option("--repeat", default="", help="Tag of an independent re-measurement (its own campaign): noise floors.")
@click.option("--reference", default=None, metavar="MODEL",
              help="Zoo model timed before every call; times are kept as ratios to it, which cancels most of a "
                   "shared machine's drift (the shipped campaigns use synthetic:0).")
@click.option("--keep-memory", "keep", is_flag=True, help=KEEP_MEMORY_HELP)
@click.option("--export", "export_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Then write MODELS as measured (--repeat: in that re-measurement) to this dataset file, the input "
                   "of `edgeplan ops fit --data` and `edgeplan calibrate --measurements` (JSON lines, provenance "
                   "first; xz for a .xz name, gzip otherwise). One --scenario.")
@click.option("--scale-from", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="With --export and --reference: write the times at this dataset file's reference latency (a file "
                   "of the scenario measured beside the same reference, such as the one a device profile was fitted "
                   "on), so that `ops fit --extend` can add the new models' op kinds to that profile.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable report.")
@click.pass_obj
def profile_ops_cmd(ctx: Context, models: tuple[str, ...], scenario_names: tuple[str, ...], models_file: Path | None,
                    runs: int, budget_s: float | None, repeat: str, reference: str | None, keep: bool,
                    export_path: Path | None, scale_from: Path | None, as_json: bool) -> None:
    """Measure MODELS per op and end to end in each scenario, into the Store; resumable.

    MODELS are zoo strings; ``synthetic:0-999`` (or ``synthetic-wide:0-299``, ``synthetic-aligned:0-299``,
    ``synthetic-heads:0-299``, ``synthetic-stages:0-299``, ``synthetic-modern:0-299``, ``synthetic-mixed:0-299``,
    ``synthetic-nf:0-299``) is a range and ``set:NAME`` a model set (synthetic, synthetic-wide, synthetic-aligned,
    synthetic-heads, synthetic-stages, synthetic-modern, synthetic-mixed, synthetic-nf, torchvision-cnns, timm-cnns,
    timm-transformers, nb201-sample). Running the same command again measures only what is missing. Every op's
    latency comes from the runtime's profiler (the median of --runs profiled runs), the end-to-end latency from the
    median of three unprofiled runs before each profiled one.

    \b
    Example:
      edgeplan profile ops synthetic:0-99 --scenario torch-fp32-1t --export ops.jsonl.gz
      edgeplan ops fit --data ops.jsonl.gz --out "$EDGEPLAN_HOME/devices/mine"
    """
    if keep:  # first: what this process would print before, its replacement prints again
        keep_memory(ctx)
    from edgeplan.errors import InvalidInputError
    from edgeplan.measure.op_campaign import OpCampaignOptions
    from edgeplan.measure.profile_jobs import OpsExport, profile_ops

    names = model_specs(models, models_file)
    check_positive("--budget-s", budget_s, "a positive number of seconds (leave it out for no budget)")
    if scale_from is not None and export_path is None:
        raise InvalidInputError("--scale-from sets the scale of the --export file; add --export FILE")
    options = OpCampaignOptions(runs=runs, repeat=repeat, reference=reference)
    result = profile_ops(scenario_names, names, options=options, budget_s=budget_s,
                         export=OpsExport(export_path, scale_from) if export_path else None, progress=not as_json,
                         command=ctx.command, home=ctx.home)
    exported = result.export
    for warning in exported.warnings if exported else ():
        click.echo(f"warning: {warning}", err=True)
    if as_json:
        emit_json([{**r.to_dict(), **({"export": exported.to_dict()} if exported else {})}
                   for r in result.campaigns])
    else:
        for r in result.campaigns:
            click.echo(f"{r.campaign}: {r.done_before + r.done_now}/{r.total} models measured ({r.done_now} now, "
                       f"{r.elapsed_s:.0f} s){'; stopped by the budget' if r.stopped_by_budget else ''}")
            for f in r.failed:
                click.echo(f"  not measured: {f.key}: {f.reason}")
        for name in result.not_started:
            click.echo(f"{name}: not started; stopped by the budget")
        if exported:
            click.echo(f"{exported.models} models of {exported.scenario} written to {exported.path}")
    refuse_failures(result.failed, "model(s)", as_json)


@ops.command("fit")
@click.option("--data", "data_path", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Dataset file from `edgeplan profile ops --export`.")
@click.option("--method", "methods", type=click.Choice(["gbdt", "lasso", "rf", "mlp"]), multiple=True,
              default=("gbdt",), show_default=True, help="Repeat for several.")
@click.option("--train", "train_specs", multiple=True,
              help="Train only on these models (zoo strings, ranges such as synthetic:0-899, sets); default all.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Folder for {method}.json. One in the edgeplan home's devices/ ($EDGEPLAN_HOME/devices/NAME) is "
                   "the device NAME of `edgeplan predict --device`.")
@click.option("--min-samples", type=click.IntRange(min=2), default=8, show_default=True,
              help="Fewest training ops an op kind needs for a predictor of its own (others are priced by their "
                   "category's); lower it to fit on a few models.")
@click.option("--extend", "extend", default=None, metavar="DEVICE",
              help="Add to this device profile's fitted models (shipped, or fitted into the edgeplan home's "
                   "devices/) predictors for the op kinds they lack, fitted on --data (an op kind from 3 models or "
                   "more); their own predictors and overhead are kept.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def fit_cmd(data_path: Path, methods: tuple[str, ...], train_specs: tuple[str, ...], out: Path, min_samples: int,
            extend: str | None, as_json: bool) -> None:
    """Fit operation-wise latency predictors (li2023 §4.2) on a dataset; write one model per method.

    The models are what `edgeplan predict --device NAME` (and `offload`, `partition`) price a model's operations
    with. Every predictor learns the fastest of an op's runs (reproducible on a shared machine), keyed by the
    implementation the runtime selects for the op's shapes (eager PyTorch's oneDNN or native convolution, deduced
    for the scenario's threads), with the op's place in its network (how often the same op and the same kind ran
    before it in the same run) and, when fitted on 900 networks or more, the network's largest output as features;
    the end-to-end overhead over the ops' sum is a constant plus a cost per op, a share of the sum and a cost per
    million parameters the ops read (their weights, read from memory on every run).

    With --extend DEVICE, the device's models gain predictors for the operation kinds of --data they have none for
    (a vision transformer's attention, layer norms and linear layers over tokens, added to a profile fitted on
    CNNs): the data must be of the device's scenario and, for a profile measured beside a reference model, on its
    scale (`profile ops --reference MODEL --export FILE --scale-from THE_PROFILES_DATA`).

    \b
    Example:
      edgeplan profile ops synthetic:0-99 --scenario torch-fp32-1t --export ops.jsonl.gz
      edgeplan ops fit --data ops.jsonl.gz --out "$EDGEPLAN_HOME/devices/mine"
      edgeplan predict torchvision:resnet18 --device mine
      edgeplan profile ops set:timm-transformers --scenario torch-fp32-2t --reference synthetic:0 \\
          --export more.jsonl.xz --scale-from edgeplan/data/latency/torch-fp32-2t.jsonl.xz
      edgeplan ops fit --data more.jsonl.xz --extend torch-fp32-2t --out "$EDGEPLAN_HOME/devices/more2t"
    """
    from edgeplan.costmodels.opwise.profile_fit import ProfileFitOptions, fit_profile

    ctx = click.get_current_context().find_object(Context)
    options = ProfileFitOptions(methods=methods, train=train_specs, min_samples=min_samples, extend=extend)
    fitted = fit_profile(data_path, out, options, home=ctx.home if ctx else None, command=ctx.command if ctx else "",
                         progress=not as_json)
    if as_json:
        emit_json([f.to_dict() for f in fitted])
        return
    for f in fitted:
        if f.added is not None:
            click.echo(f"{f.method}: {extend}'s model extended with {len(f.added)} predictors from {f.models} models "
                       f"({', '.join(f.added)}) -> {f.path}")
            continue
        click.echo(f"{f.method}: {f.predictors} predictors from {f.models} models, overhead {_overhead_text(f)} -> "
                   f"{f.path}")


def _overhead_text(fitted: FittedProfile) -> str:
    """A fitted model's overhead in words: the constant, and the parts that grow with the model if any."""
    text = f"{fitted.overhead_ms:.3f} ms"
    if fitted.overhead_per_op_ms or fitted.overhead_share:
        text += (f" + {1000 * fitted.overhead_per_op_ms:.2f} us per op + {100 * fitted.overhead_share:.2f} % "
                 "of the ops' sum")
    if fitted.overhead_per_mparam_ms:
        text += f" + {fitted.overhead_per_mparam_ms:.4f} ms per million parameters"
    return text
