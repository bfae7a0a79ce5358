"""``edgeplan primitives fit``, ``evaluate`` and ``transfer``: the primitive performance model (mulder2020).

``fit`` trains Lin, NN1 or NN2 (and the matching layout-transformation model) on the training part of a timing
table in the mulder2021 CSV format, early-stopping on the validation part, and saves it to a folder.
``evaluate`` prints the MdRAE per primitive and per transformation on a part of a table, split with the seed the
model was fitted with; the table may come from another platform (only
shared columns are scored). The layout transformations are scored under two protocols, both printed (see
:mod:`edgeplan.costmodels.performance_model`): on held-out ``(c, im)`` tensors never seen in training (strict), and
under the paper's protocol, over the test layer rows of the row split, whose tensors also occur in training rows.
``transfer`` moves a fitted model to another platform: from a fraction of that platform's table, scored on its test
part (:mod:`~edgeplan.costmodels.transfer_learning`), or from every layer measured on a user's machine, saved as a
device for ``select --device`` (:mod:`~edgeplan.costmodels.primitive_calibration`).

Each command calls one function of the library (:mod:`edgeplan.decisions.primitive_models`,
:mod:`edgeplan.decisions.transfer`) and prints its result.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

from edgeplan.cli.common import Context, emit_json

if TYPE_CHECKING:
    from edgeplan.costmodels.evaluation import Evaluation
    from edgeplan.decisions.transfer import CalibratedTransfer, ScoredTransfer

__all__ = ["evaluate", "fit", "transfer"]


@contextmanager
def _lazy_progress(*columns: Any) -> Iterator[Callable[[], Any]]:
    """A rich progress bar on stderr that appears at its first use (an input refused before any work prints its
    one-line error alone); the callable returns it, started."""
    import threading

    from rich.console import Console
    from rich.progress import Progress

    bar = Progress(*columns, console=Console(stderr=True))
    lock = threading.Lock()
    started: list[bool] = []

    def get() -> Progress:
        with lock:
            if not started:
                bar.start()
                started.append(True)
        return bar

    try:
        yield get
    finally:
        if started:
            bar.stop()


@contextmanager
def _epoch_bar(enabled: bool) -> Iterator[Callable[[str, Any], None]]:
    """A rich progress bar over training epochs (one task per stage), or a no-op."""
    if not enabled:
        yield lambda stage, info: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("epochs"),
               TextColumn("val {task.fields[val]}"), TimeElapsedColumn())
    with _lazy_progress(*columns) as progress:
        tasks: dict[str, Any] = {}

        def update(stage: str, info: Any) -> None:
            bar = progress()
            if stage not in tasks:  # stages may run side by side (ensemble members): each keeps its own bar,
                # and one that stopped early shows as done only when the whole fit ends
                tasks[stage] = bar.add_task(stage, total=info.max_epochs, val="-")
            bar.update(tasks[stage], completed=info.epoch, val=f"{info.best_val_loss:.4g}")

        yield update
        for tid in tasks.values():  # a stage that stopped early: show it as done
            progress().update(tid, total=progress().tasks[tid].completed)


@click.command("fit")
@click.option("--data", "data_paths", required=True, multiple=True, type=click.Path(dir_okay=False),
              help="Timing table in the mulder2021 CSV format (c,k,im,f,s, X-to-Y columns, one per primitive; ns). "
                   "Repeatable: tables of one platform are merged (rows appended, columns united) before the split.")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Folder to write the fitted model to (JSON + .npz, no pickle).")
@click.option("--model", "kind", type=click.Choice(["nn2", "nn1", "lin"]), default="nn2", show_default=True,
              help="NN2: one network for all primitives; NN1: one per primitive; lin: linear regression.")
@click.option("--split-seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Seed of the 80/10/10 split (recorded in the model; evaluate uses it by default).")
@click.option("--threads", type=int, default=2, show_default=True,
              help="Torch threads for training (an ensemble's members share them out, trained side by side).")
@click.option("--max-epochs", type=click.IntRange(min=1), default=None,
              help="Upper bound on training epochs (default: the model's).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_obj
def fit(ctx: Context, data_paths: tuple[str, ...], out_dir: str, kind: str, split_seed: int, threads: int,
        max_epochs: int | None, as_json: bool) -> None:
    """Fit a primitive performance model on the training part of a timing table and save it.

    The inputs are logged and given their power-of-two factors; nn1/nn2 halve the learning rate when the
    validation loss stalls, and nn2 is an ensemble of four networks trained on log-times with a moving average of
    their weights; the layout transformations get a kernel model of (c, im)
    (edgeplan.costmodels.performance_model.RECIPES).

    \b
    Example:
      edgeplan profile primitives --export here.csv
      edgeplan primitives fit --data here.csv --out here-nn2
      edgeplan select torchvision:resnet18 --costs predicted --model here-nn2
    """
    from edgeplan.decisions.primitive_models import fit_primitive_model

    with _epoch_bar(not as_json) as progress:
        fitted = fit_primitive_model(data_paths, out_dir, kind, split_seed=split_seed, threads=threads,
                                     max_epochs=max_epochs, progress=progress)
    if as_json:
        emit_json(fitted.to_dict())
        return
    model, folder, dropped = fitted.model, fitted.path, fitted.dropped_columns
    fit_s = model.info["fit_primitives_s"] + model.info["fit_transforms_s"] + model.info["fit_transforms_paper_s"]
    click.echo(f"fitted {kind} on {model.info['train_rows']} of {model.info['rows']} layers of {' '.join(data_paths)} "
               f"(validation {model.info['val_rows']}, test {model.info['test_rows']}, split seed {split_seed}, "
               f"recipe {model.info.get('recipe')}): "
               f"{len(model.primitive_names)} primitives, {len(model.transform_names)} transformations "
               f"({model.transform_kind or 'none'}, fitted under both protocols), "
               f"{fit_s:.1f} s")
    if dropped:
        click.echo(f"left out {len(dropped)} column(s) empty in every row: {', '.join(dropped)}")
    data_args = " ".join(f"--data {p}" for p in data_paths)
    click.echo(f"saved to {folder}; score it with: edgeplan primitives evaluate --model {folder} {data_args}")


def _pct(v: float) -> str:
    if v != v:
        return "-"
    return "no prediction" if v == float("inf") else f"{100 * v:.2f} %"


def _print_table(result: Evaluation, title: str) -> None:
    """MdRAE, scored cells and cells without a prediction, per column, then the medians."""
    from rich.table import Table

    from edgeplan.reports.tables import print_table

    table = Table(title=title)
    table.add_column("column")
    table.add_column("MdRAE", justify="right")
    table.add_column(f"{result.part} cells", justify="right")
    table.add_column("unpredicted", justify="right")
    sections = (("", result.primitive_mdrae, result.primitive_cells, result.primitive_unpredicted),
                ("", result.transform_mdrae, result.transform_cells, result.transform_unpredicted),
                (" (paper's protocol)", result.paper_transform_mdrae, result.paper_transform_cells,
                 result.paper_transform_unpredicted))
    for suffix, scores, cells, missing in sections:
        for name, v in scores.items():
            table.add_row(name + suffix, _pct(v), str(cells.get(name, "-")), str(missing.get(name, "-")))
        table.add_section()
    table.add_row("median over primitives", _pct(result.median_primitive_mdrae), "", "")
    table.add_row(f"median over transformations, held-out tensors ({result.transform_tensors} tensors never seen "
                  f"in training; X-to-X left out)", _pct(result.median_transform_mdrae), "", "")
    table.add_row(f"median over transformations, the paper's protocol ({result.part} layer rows; "
                  f"{result.paper_transform_unseen_rows} of {result.rows} with a tensor not in a training row)",
                  _pct(result.median_paper_transform_mdrae), "", "")
    print_table(table)


@click.command("evaluate")
@click.option("--model", "model_dir", required=True, type=click.Path(file_okay=False),
              help="Folder of a model written by `fit`.")
@click.option("--data", "data_paths", required=True, multiple=True, type=click.Path(dir_okay=False),
              help="Timing table to score on (this platform's or another's: shared columns are scored). Repeatable: "
                   "merged as `fit` merges them, so the same files give the same split.")
@click.option("--split", "part", type=click.Choice(["test", "all"]), default="test", show_default=True,
              help="Score on the test part of the split, or on every row.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_obj
def evaluate(ctx: Context, model_dir: str, data_paths: tuple[str, ...], part: str, as_json: bool) -> None:
    """Print the MdRAE of a fitted model per primitive and per layout transformation, and their medians.

    \b
    Example:
      edgeplan primitives evaluate --model here-nn2 --data here.csv
      edgeplan primitives evaluate --model here-nn2 --data other-machine.csv --split all
    """
    from edgeplan.decisions.primitive_models import evaluate_primitive_model

    scored = evaluate_primitive_model(model_dir, data_paths, part)
    for warning in scored.warnings:
        click.echo(f"warning: {warning}", err=True)
    if as_json:
        emit_json(scored.to_dict())
        return
    result = scored.evaluation
    _print_table(result, f"{scored.model.kind} model {model_dir} on {' '.join(data_paths)} ({part} part: "
                         f"{result.rows} layers, {result.transform_tensors} tensors; split seed {result.split_seed})")
    if result.only_in_model or result.only_in_data:
        click.echo(f"not scored: {len(result.only_in_model)} column(s) only in the model "
                   f"{list(result.only_in_model)[:6]}, {len(result.only_in_data)} only in the data "
                   f"{list(result.only_in_data)[:6]}")


@click.command("transfer")
@click.option("--model", "model_dir", default=None,
              help="The source platform's model: a folder written by `fit`, or a device made by `transfer --name` "
                   "[default: the shipped NN2 of the reference machine, 1 thread].")
@click.option("--data", "data_path", required=True, type=click.Path(dir_okay=False),
              help="The target platform's timing table (mulder2021 CSV format, e.g. from `edgeplan profile "
                   "primitives --export`).")
@click.option("--fraction", type=float, default=None,
              help="Share of the target's training part to use, in (0, 1] (e.g. 0.01: 1 %): the transfer is scored "
                   "on the target's test part. Without it, every layer of --data is used and the method chosen by "
                   "cross-validation (a machine's calibration; give --name).")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Seed of the samples drawn, the folds and the training.")
@click.option("--threads", type=int, default=None, help="Torch intra-op threads for training (default: the source's).")
@click.option("--out", "out_dir", default=None, type=click.Path(file_okay=False),
              help="Folder to write the transferred model to (JSON + .npz, no pickle).")
@click.option("--name", default=None,
              help="Save it instead as the primitive performance model of this device of the edgeplan home "
                   "($EDGEPLAN_HOME/devices/NAME/), read by `select --costs predicted --device NAME` (its latency "
                   "profile, for `predict --device NAME`, comes from `edgeplan calibrate --name NAME`).")
@click.option("--replace", is_flag=True, help="With --name: overwrite an existing device of that name.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_obj
def transfer(ctx: Context, model_dir: str | None, data_path: str, fraction: float | None, seed: int,
             threads: int | None, out_dir: str | None, name: str | None, replace: bool, as_json: bool) -> None:
    """Move a fitted primitive performance model to another platform, from a few of its timings.

    With --fraction, that share of the target table's training part is drawn in two rounds of single timings
    (three quarters spread evenly over the primitives, then the rest on layers' close contenders as a transfer from
    the first round predicts them), and the source is factor-corrected, fine-tuned (cross-fitted, then refitted on
    every sample) and blended with a shared boosted correction of the source; the target test MdRAE is printed.
    Without --fraction (calibrating a machine), every layer of --data is used, and the source is kept, scaled,
    fine-tuned or both, whichever predicts the layers best under 5-fold cross-validation.

    \b
    Example:
      edgeplan primitives transfer --model intel-nn2 --data amd.csv --fraction 0.01 --seed 0 --out amd-nn2
      edgeplan profile primitives --max-configs 40 --export here.csv
      edgeplan primitives transfer --data here.csv --name my-machine
    """
    from edgeplan.decisions.transfer import CalibratedTransfer, TransferOptions, TransferTarget, transfer_primitives

    target = TransferTarget(out=out_dir, name=name, replace=replace)
    options = TransferOptions(fraction=fraction, seed=seed, threads=threads)
    with _fit_bar(not as_json and fraction is None) as progress:
        result = transfer_primitives(data_path, target, options, source=model_dir, home=ctx.home, progress=progress)
    if as_json:
        emit_json(result.to_dict())
    elif isinstance(result, CalibratedTransfer):
        _print_calibration(result)
    else:
        _print_transfer(result)


def _print_transfer(result: ScoredTransfer) -> None:
    """What ``transfer --fraction`` prints: the samples drawn, the stopping, the target's test scores."""
    info, o, test = result.transfer, result.options, result.test
    first, contenders = info["adaptive_rounds"]
    click.echo(f"{result.source_kind} model {result.source} -> {result.data}: {info['drawn_cells']} single timings "
               f"({first} spread over the primitives, {contenders} on close contenders) on {info['drawn_rows']} of "
               f"{info['target_train_rows']} training layers (fraction {o.fraction:g}, seed {o.seed}, split seed "
               f"{o.split_seed}; {_stopping(info)}"
               f"{'; blended with a shared correction of the source' if info.get('blend') else ''}), "
               f"{info['seconds']:.1f} s")
    if info["ignored_columns"]:
        click.echo(f"ignored {len(info['ignored_columns'])} target column(s) the source does not predict: "
                   f"{', '.join(info['ignored_columns'][:6])}")
    click.echo(f"target test MdRAE (median over {len(test.primitive_mdrae)} primitives, {test.rows} layers): "
               f"{_pct(test.median_primitive_mdrae)}; transformations (held-out tensors): "
               f"{_pct(test.median_transform_mdrae)}")
    click.echo(f"saved to {result.path}; per-primitive scores: edgeplan primitives evaluate --model {result.path} "
               f"--data {result.data}")


def _print_calibration(result: CalibratedTransfer) -> None:
    """What ``transfer`` without ``--fraction`` prints: the method chosen, its cross-validated scores, the device."""
    for note in result.notes:
        click.echo(f"note: {note}", err=True)
    click.echo(f"{result.device or result.path}: {result.layers} layers, primitive model of {result.source} moved by "
               f"{result.method}")
    if result.folds:
        click.echo(f"  {result.folds}-fold cross-validated MdRAE (median over primitives | transformations, whose "
                   "tensors may recur across folds):")
        for m, v in result.scores.items():
            t = result.transform_scores.get(m, float("nan"))
            mark = "  <- chosen" if m == result.method else ""
            click.echo(f"    {m:<15} {100 * v:7.2f} % | {100 * t:7.2f} %{mark}")
    else:
        click.echo("  one layer: nothing to cross-validate, so the factor correction is kept")
    if result.device is not None:
        hint = f" --threads {result.threads}" if result.threads else ""
        click.echo(f"  saved to {result.path}; use it with `edgeplan select MODEL --costs predicted --device "
                   f"{result.device}{hint}`")
    else:
        click.echo(f"  saved to {result.path}")


@contextmanager
def _fit_bar(enabled: bool) -> Iterator[Callable[[int, int], None]]:
    """A bar over the calibration's fits (cross-validation folds, then the final fit), or a no-op."""
    if not enabled:
        yield lambda done, total: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn

    columns = (TextColumn("calibrating"), BarColumn(), MofNCompleteColumn(), TextColumn("fits"), TimeElapsedColumn())
    with _lazy_progress(*columns) as progress:
        tasks: list[Any] = []

        def update(done: int, total: int) -> None:
            bar = progress()
            if not tasks:
                tasks.append(bar.add_task("calibrating", total=total))
            bar.update(tasks[0], completed=done, total=total)

        yield update


def _stopping(info: Mapping[str, Any]) -> str:
    """How a transfer early-stopped, for its one-line report."""
    folds = info.get("cross_fit_folds")
    if folds and info.get("refit_epochs"):
        return (f"cross-fitted: {len(folds)} folds of {min(folds)}-{max(folds)} chose {info['refit_epochs']} epochs "
                f"together, then every ensemble member trained on all of them for that long")
    if folds:
        return (f"cross-fitted: each of {len(folds)} ensemble members early-stops on its own fold of "
                f"{min(folds)}-{max(folds)} and trains on the rest")
    return f"{info['stop_rows']} of them held out for early stopping"
