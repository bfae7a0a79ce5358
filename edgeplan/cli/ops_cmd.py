"""``edgeplan ops``: per-op latency campaigns in a scenario (li2023's training data), and their export."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from edgeplan.cli.common import (
    KEEP_MEMORY_HELP,
    NETWORK_CONTEXT_OPTION,
    OVERHEAD_OPTION,
    Context,
    check_positive,
    emit_json,
    keep_memory,
    model_specs,
    refuse_failures,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    from edgeplan.costmodels.opwise.model import LatencyModel
    from edgeplan.measure.op_campaign import OpDataset

__all__ = ["ops"]

_SCENARIOS = ["torch-fp32-1t", "torch-fp32-2t", "ort-fp32-1t", "ort-fp32-2t", "ort-int8-1t", "ort-int8-2t"]


@click.group()
def ops() -> None:
    """Per-op latency campaigns: every op's latency from the runtime's profiler, and end-to-end latency."""


@ops.command("profile")
@click.argument("models", nargs=-1)
@click.option("--scenario", "scenario_names", type=click.Choice(_SCENARIOS), multiple=True, required=True,
              help="Runtime, dtype and threads (repeat for several; each is its own campaign).")
@click.option("--models-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="More models, one zoo string per line.")
@click.option("--runs", type=int, default=10, show_default=True, help="Profiled runs per model (per-op median).")
@click.option("--plain-per-run", type=int, default=3, show_default=True,
              help="Unprofiled runs timed before each profiled one; their median is the end-to-end latency.")
@click.option("--max-time", "max_time_s", type=float, default=10.0, show_default=True,
              help="With --plain-per-run 0: time cap of the separate end-to-end measurement, in seconds.")
@click.option("--budget", "budget_s", type=float, default=None, help="Stop after this many seconds (resumable).")
@click.option("--repeat", default="", help="Tag of an independent re-measurement (its own campaign): noise floors.")
@click.option("--reference", default=None, metavar="MODEL",
              help="Zoo model timed before every call; times are kept as ratios to it, which cancels most of a "
                   "shared machine's drift (the shipped campaigns use synthetic:0).")
@click.option("--keep-memory", "keep", is_flag=True, help=KEEP_MEMORY_HELP)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable report.")
@click.pass_obj
def profile_cmd(ctx: Context, models: tuple[str, ...], scenario_names: tuple[str, ...], models_file: Path | None,
                runs: int, plain_per_run: int, max_time_s: float, budget_s: float | None, repeat: str,
                reference: str | None, keep: bool, as_json: bool) -> None:
    """Measure MODELS per op and end to end in each scenario, into the Store; resumable.

    MODELS are zoo strings; ``synthetic:0-999`` (or ``synthetic-wide:0-299``, ``synthetic-aligned:0-299``,
    ``synthetic-heads:0-299``, ``synthetic-stages:0-299``, ``synthetic-modern:0-299``, ``synthetic-mixed:0-299``,
    ``synthetic-nf:0-299``) is a range and ``set:NAME`` a model set (synthetic, synthetic-wide, synthetic-aligned,
    synthetic-heads, synthetic-stages, synthetic-modern, synthetic-mixed, synthetic-nf, torchvision-cnns, timm-cnns,
    timm-transformers, nb201-sample). Running the same command again measures only what is missing.
    """
    if keep:  # first: what this process would print before, its replacement prints again
        keep_memory(ctx)
    from edgeplan.errors import InvalidInputError
    from edgeplan.measure import Store, TimingConfig, default_store_path
    from edgeplan.measure.op_campaign import run_op_campaign
    from edgeplan.measure.scenarios import get_scenario

    names = model_specs(models, models_file)
    if plain_per_run < 0:
        raise InvalidInputError(f"--plain-per-run must be 0 or more, got {plain_per_run}")
    if budget_s is not None and budget_s <= 0:
        raise InvalidInputError(f"--budget must be positive, got {budget_s}")
    check_positive("--max-time", max_time_s, "a positive number of seconds")
    config = TimingConfig(max_time_s=max_time_s)
    reports = []
    with Store.open(default_store_path(ctx.home)) as store:
        for s in scenario_names:
            report = run_op_campaign(store, get_scenario(s), names, runs=runs, config=config, budget_s=budget_s,
                                     progress=not as_json, command=ctx.command, home=ctx.home,
                                     plain_per_run=plain_per_run, repeat=repeat, reference=reference)
            reports.append(report)
    if as_json:
        emit_json([r.to_dict() for r in reports])
    else:
        for r in reports:
            click.echo(f"{r.campaign}: {r.done_before + r.done_now}/{r.total} models measured ({r.done_now} now, "
                       f"{r.elapsed_s:.0f} s){'; stopped by the budget' if r.stopped_by_budget else ''}")
            for f in r.failed:
                click.echo(f"  not measured: {f.key}: {f.reason}")
    failed = sum(len(r.failed) for r in reports)
    refuse_failures(failed, "model(s)", as_json)


@ops.command("export")
@click.option("--scenario", "scenario_name", type=click.Choice(_SCENARIOS), required=True)
@click.option("--repeat", default="", help="Export this re-measurement instead of the main campaign.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Dataset file to write (JSON lines, provenance first; xz for a .xz name, as the shipped "
                   ".jsonl.xz files, gzip otherwise).")
@click.option("--merge", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Keep the models of this earlier dataset file of the scenario (it may be --out itself) that the "
                   "Store does not hold; a model in both is written as the Store measured it.")
@click.option("--match-on", "match_on", multiple=True,
              help="With --merge of a campaign measured beside a reference into a file measured without one: match "
                   "the two scales on these models only (zoo strings, ranges such as synthetic:900-959, sets; "
                   "repeat for several; they keep the file's rows); default every model both hold. With "
                   "--scale-from a file whose reference was timed otherwise (before 2026-11-27): match the scales "
                   "on these models, measured in both.")
@click.option("--scale-from", "scale_from", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the times at this dataset file's reference latency (a file of the scenario measured beside "
                   "the same reference), so that a new file of other models shares its scale.")
@click.option("--only", "only", multiple=True,
              help="Write only these models (zoo strings, ranges, sets; repeat for several); default all. With "
                   "--merge, only these join the earlier file, which keeps its own rows of the others.")
def export_cmd(scenario_name: str, repeat: str, out: Path, merge: Path | None, match_on: tuple[str, ...],
               scale_from: Path | None, only: tuple[str, ...]) -> None:
    """Write a scenario's measured models to a dataset file.

    Times measured beside a reference model are written at the scenario's reference latency, the main campaign's
    for a repeat too; a repeat exported without its main campaign in the Store uses its own, with a warning. With
    --merge, an earlier file's models join the Store's (its provenance is kept in the header).
    """
    import warnings

    from edgeplan.measure import Store, default_store_path
    from edgeplan.measure.model_sets import expand_models
    from edgeplan.measure.op_campaign import export_dataset
    from edgeplan.measure.scenarios import get_scenario

    ctx = click.get_current_context().find_object(Context)
    home = ctx.home if ctx else None
    with Store.open(default_store_path(home)) as store, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        n = export_dataset(store, get_scenario(scenario_name), out, command=ctx.command if ctx else "",
                           repeat=repeat, merge=merge, match_on=expand_models(match_on) if match_on else None,
                           scale_from=scale_from, only=expand_models(only) if only else None)
    for w in caught:
        click.echo(f"warning: {w.message}", err=True)
    click.echo(f"{n} models of {scenario_name} written to {out}" + (f" (merged with {merge})" if merge else ""))


@ops.command("retrace")
@click.option("--data", "data_path", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="An ONNX Runtime op-latency dataset (from `ops export`).")
@click.option("--model", "models", multiple=True,
              help="Retrace only this model (repeat; ranges and set:NAME too); default: every model of the file.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Where to write the result [default: --data itself, replaced once the whole file is written].")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable report.")
@click.pass_obj
def retrace_cmd(ctx: Context, data_path: Path, models: tuple[str, ...], out: Path | None, as_json: bool) -> None:
    """Trace an ONNX Runtime dataset's kernels to IR nodes again with this edgeplan (its times stay; nothing runs).

    For a dataset measured before the tracing improved: each op's IR nodes, which its features come from, are
    recomputed from ORT's optimized graph. A model whose kernels ORT no longer runs the same way is kept as it
    was, and named.
    """
    from edgeplan.measure.op_campaign import retrace_dataset

    chosen = model_specs(models, None) if models else None
    report = retrace_dataset(data_path, out or data_path, chosen, command=ctx.command, home=ctx.home,
                             progress=not as_json)
    if as_json:
        emit_json({"models": report.models, "ops_changed": report.ops_changed,
                   "skipped": [{"model": m, "reason": r} for m, r in report.skipped]})
    else:
        click.echo(f"{report.models} models retraced into {out or data_path}: {report.ops_changed} ops traced to "
                   "other IR nodes")
        for m, r in report.skipped:
            click.echo(f"  kept as it was: {m}: {r}")


@ops.command("compact")
@click.argument("src", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Dataset file to write: xz for a .xz name (the shipped .jsonl.xz files), gzip otherwise.")
@click.option("--remove-src", is_flag=True, help="Delete SRC once OUT is written and reads back the same.")
@click.pass_obj
def compact_cmd(ctx: Context, src: Path, out: Path, remove_src: bool) -> None:
    """Rewrite the dataset SRC as OUT with its real numbers to 6 significant digits (nothing is re-measured).

    A millionth of a time is far below the runs' spread; the xz file is about a third of the gzip'd one with every
    digit. Noise floors are unchanged, fitted GBDT figures move by tenths of a point (their own fit noise). The
    header records the rewrite (``compacted``).
    """
    from edgeplan.measure.op_campaign import compact_dataset, load_dataset

    if out.resolve() == src.resolve():
        raise click.UsageError("--out must differ from SRC (write a .jsonl.xz beside the .jsonl.gz)")
    n = compact_dataset(src, out, command=ctx.command)
    if remove_src:
        before, after = load_dataset(src).records, load_dataset(out).records
        if [r["model"] for r in before] != [r["model"] for r in after]:
            raise click.ClickException(f"{out} does not read back the models of {src}; {src} is kept")
        src.unlink()
    click.echo(f"{n} models of {src} written to {out}" + (f" ({src} removed)" if remove_src else ""))


@ops.command("fit")
@click.option("--data", "data_path", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Dataset file from `edgeplan ops export`.")
@click.option("--method", "methods", type=click.Choice(["gbdt", "lasso", "rf", "mlp"]), multiple=True,
              default=("gbdt",), show_default=True, help="Repeat for several.")
@click.option("--train", "train_specs", multiple=True,
              help="Train only on these models (zoo strings, ranges such as synthetic:0-899, sets); default all.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Folder for {method}.json (a device profile folder).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--min-samples", type=click.IntRange(min=2), default=8, show_default=True,
              help="Fewest training ops an op kind needs for its own predictor.")
@click.option("--statistic", type=click.Choice(["min", "median"]), default=None,
              help="Learn the fastest runs (reproducible on a shared machine) or the medians.  [default: min; with "
                   "--extend, the extended model's]")
@click.option("--extend", "extend", default=None, metavar="DEVICE",
              help="Add to this device profile's fitted models (shipped, or fitted into the edgeplan home's "
                   "devices/) predictors for the op kinds they lack, fitted on --data; their own predictors and "
                   "overhead are kept.")
# default: edgeplan.costmodels.opwise.model.MIN_EXTENSION_MODELS, written out so that the CLI imports no model code to
# start
@click.option("--min-models", type=click.IntRange(min=1), default=3, show_default=True,
              help="With --extend: fewest models a new op kind must come from (at more than one shape) for a "
                   "predictor of its own; rarer kinds are left to their category's.")
@click.option("--implementations", is_flag=True,
              help="Separate predictors per implementation the runtime selects by shape (eager PyTorch's oneDNN or "
                   "native convolution, deduced for the scenario's threads; kernel_rules/torch.json).")
@click.option("--no-context", is_flag=True,
              help="Fit on each op's own features alone, as li2023 does; by default the predictors also see its place "
                   "in the network (how often the same op and the same kind ran before it in the same run).")
@NETWORK_CONTEXT_OPTION
@OVERHEAD_OPTION
@click.option("--json", "as_json", is_flag=True)
def fit_cmd(data_path: Path, methods: tuple[str, ...], train_specs: tuple[str, ...], out: Path, seed: int,
            min_samples: int, statistic: str | None, extend: str | None, min_models: int, implementations: bool,
            no_context: bool, network_context: str | None, overhead: str, as_json: bool) -> None:
    """Fit operation-wise predictors (li2023 §4.2) on a dataset; write one model per method.

    With --extend DEVICE, the device's models gain predictors for the operation kinds of --data they have none for
    (a vision transformer's attention, layer norms and linear layers over tokens, added to a profile fitted on
    CNNs): the data must be of the device's scenario and, for a profile measured beside a reference model, on its
    scale (`edgeplan ops export --scale-from`).

    With --implementations, a kernel kind the runtime runs with one of several implementations chosen by shape gets
    a predictor per implementation (`aten::conv2d:native|conv`, `aten::conv2d:onednn|conv`); the model records the
    threads the choice was deduced for.

    By default every predictor also takes the op's place in its network: how many ops before it in the same run
    are the same op (kind and features) and how many are of its kind. An op runs faster when the same kernel at
    the same shapes ran earlier in the pass, and real CNNs repeat their blocks far more than synthetic networks do;
    --no-context fits on the op's own features alone, as li2023 does.

    With --network-context every predictor also takes its network's footprint: on the Zen 5 two-thread data the
    operations of synthetic networks with large activations ran slower together, which it learns
    (`edgeplan.costmodels.opwise.features.NETWORK_FEATURES`). --network-context auto takes the network's largest output
    (peak) when fitting on 900 networks or more, and none from fewer, where it cost the held-out networks.
    """
    from edgeplan.costmodels.opwise.model import LatencyModel
    from edgeplan.errors import InvalidInputError
    from edgeplan.measure.model_sets import expand_models
    from edgeplan.measure.op_campaign import load_dataset
    from edgeplan.measure.scenarios import get_scenario

    data = load_dataset(data_path)
    records = data.records
    if train_specs:
        keep = set(expand_models(train_specs))
        records = [r for r in records if r["model"] in keep]
        if not records:
            raise InvalidInputError(f"none of the --train models is in {data_path}")
    if extend is not None and (implementations or no_context or network_context):
        flag = "--implementations" if implementations else "--no-context" if no_context else "--network-context"
        raise InvalidInputError(f"{flag} fits a new model; an extension keeps the keys and features of the model it "
                                f"extends: drop one of --extend and {flag}")
    if extend is not None:
        bases = {m: _extendable(extend, m, data, statistic) for m in methods}
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)  # a folder that cannot be made is named now, not after the fitting
    scenario = get_scenario(data.scenario)
    info = {"kernel_profile": scenario.kernel_profile, "dataset": data_path.name, "source_scenario": scenario.name,
            "device": data.provenance.get("device", {}), "train_models": [r["model"] for r in records]}
    if data.provenance.get("reference"):  # the times are ratios to this model at the scenario's typical speed
        info["reference"] = data.provenance["reference"]
    ctx = click.get_current_context().find_object(Context)
    if ctx is not None:  # provenance: the command line that fitted it
        info["command"] = ctx.command
    extension = {"dataset": data_path.name, "device": info["device"], "extended": extend,
                 "reference": data.provenance.get("reference"), "command": ctx.command if ctx else ""}
    models = []
    try:
        for m in methods:
            if extend is not None:
                models.append(bases[m].extended(records, seed=seed, min_samples=min_samples, min_models=min_models,
                                                info=extension))
            else:
                models.append(LatencyModel.fit(records, m, scenario.name, seed=seed, progress=not as_json, info=info,
                                               min_samples=min_samples, statistic=statistic or "min",
                                               threads=scenario.threads if implementations else None,
                                               context=not no_context, overhead=overhead,
                                               network=network_context or False))
    except InvalidInputError:
        if created and not any(out.iterdir()):  # refused: no empty device folder left behind
            out.rmdir()
        raise
    written: list[dict[str, Any]] = []
    for m, model in zip(methods, models, strict=True):
        entry = {"method": m, "path": str(model.save(out)), "models": len(records),
                 "predictors": len(model.predictors), "overhead_ms": model.overhead_ms,
                 "overhead_per_op_ms": model.overhead_per_op_ms, "overhead_share": model.overhead_share}
        if extend is not None:
            entry["added"] = sorted(model.info["extensions"][-1]["added_ops_per_key"])
        written.append(entry)
    if as_json:
        emit_json(written)
        return
    for w in written:
        if "added" in w:
            click.echo(f"{w['method']}: {extend}'s model extended with {len(w['added'])} predictors from "
                       f"{w['models']} models ({', '.join(w['added'])}) -> {w['path']}")
            continue
        click.echo(f"{w['method']}: {w['predictors']} predictors from {w['models']} models, overhead "
                   f"{_overhead_text(w)} -> {w['path']}")


def _overhead_text(entry: Mapping[str, Any]) -> str:
    """A fitted model's overhead in words: the constant, and the parts that grow with the model if any."""
    text = f"{entry['overhead_ms']:.3f} ms"
    if entry["overhead_per_op_ms"] or entry["overhead_share"]:
        text += (f" + {1000 * entry['overhead_per_op_ms']:.2f} us per op + {100 * entry['overhead_share']:.2f} % "
                 "of the ops' sum")
    return text


def _extendable(device: str, method: str, data: OpDataset, statistic: str | None) -> LatencyModel:
    """The ``method`` model of ``device`` that ``ops fit --extend`` adds to, checked against the data."""
    from edgeplan.costmodels.opwise.model import LatencyModel
    from edgeplan.costmodels.opwise.profiles import load_device_model
    from edgeplan.errors import InvalidInputError

    ctx = click.get_current_context().find_object(Context)
    model = load_device_model(device, method, ctx.home if ctx else None)
    if not isinstance(model, LatencyModel):
        raise InvalidInputError(f"--extend {device}: it is a calibrated device (a correction of another device's "
                                "predictions), not a fitted model; extend the device it was calibrated from")
    if model.scenario != data.scenario:
        raise InvalidInputError(f"--extend {device}: its model is of scenario {model.scenario!r}, --data of "
                                f"{data.scenario!r}; extend it with data of its own scenario")
    if statistic is not None and statistic != model.statistic:
        raise InvalidInputError(f"--statistic {statistic}: {device}'s {method} model learnt the {model.statistic}; "
                                "an extension learns what it learnt (drop --statistic)")
    ours, theirs = model.info.get("reference"), data.provenance.get("reference")
    # a campaign matched onto a file's scale (its reference timed otherwise) shares that file's scale
    shared = float(theirs.get("scale_from", {}).get("file_reference_ms", theirs["ms"])) if theirs else math.nan
    same = (ours is None and theirs is None) or (
        ours is not None and theirs is not None and ours.get("model") == theirs.get("model")
        and abs(float(ours["ms"]) - shared) <= 1e-9 * float(ours["ms"]))
    if not same:
        def scale(ref: dict[str, Any] | None) -> str:
            return f"{ref['model']} at {float(ref['ms']):.4g} ms" if ref else "no reference model"

        if ours is None:
            todo = "extend it with data measured without a reference, or refit it on paired data"
        elif theirs is None or theirs.get("model") != ours.get("model"):
            todo = (f"measure the models beside {ours['model']} (`ops profile --reference {ours['model']}`), then "
                    "export them with `--scale-from` the dataset the model was fitted on")
        else:
            todo = "export the data with `edgeplan ops export --scale-from` the dataset the model was fitted on"
        raise InvalidInputError(f"--extend {device}: its model's times are ratios to {scale(ours)}, --data's to "
                                f"{scale(theirs)}; {todo}")
    return model
