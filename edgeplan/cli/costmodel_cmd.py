"""``edgeplan primitives fit`` and ``edgeplan primitives evaluate``: the primitive performance model (mulder2020).

``fit`` trains Lin, NN1 or NN2 (and the matching layout-transformation model) on the training part of a timing
table in the mulder2021 CSV format, early-stopping on the validation part, and saves it to a folder.
``evaluate`` prints the MdRAE per primitive and per transformation on a part of a table, which may come from
another platform (only shared columns are scored).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import click

from edgeplan.cli.common import Context, emit_json

__all__ = ["evaluate", "fit"]


@contextmanager
def _epoch_bar(enabled: bool) -> Iterator[Callable[[str, Any], None]]:
    """A rich progress bar over training epochs (one task per stage), or a no-op."""
    if not enabled:
        yield lambda stage, info: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("epochs"),
               TextColumn("val {task.fields[val]}"), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True)) as bar:
        tasks: dict[str, Any] = {}

        def update(stage: str, info: Any) -> None:
            if stage not in tasks:
                for tid in tasks.values():  # the previous stage stopped early: show it as done
                    bar.update(tid, total=bar.tasks[tid].completed)
                tasks[stage] = bar.add_task(stage, total=info.max_epochs, val="-")
            bar.update(tasks[stage], completed=info.epoch, val=f"{info.best_val_loss:.4g}")

        yield update
        for tid in tasks.values():
            bar.update(tid, total=bar.tasks[tid].completed)


@click.command("fit")
@click.option("--data", "data_path", required=True, type=click.Path(dir_okay=False),
              help="Timing table in the mulder2021 CSV format (c,k,im,f,s, X-to-Y columns, one per primitive; ns).")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Folder to write the fitted model to (JSON + .npz, no pickle).")
@click.option("--model", "kind", type=click.Choice(["nn2", "nn1", "lin"]), default="nn2", show_default=True,
              help="NN2: one network for all primitives; NN1: one per primitive; lin: linear regression.")
@click.option("--split-seed", type=int, default=0, show_default=True, help="Seed of the 80/10/10 split.")
@click.option("--threads", type=int, default=2, show_default=True, help="Torch intra-op threads for training.")
@click.option("--recipe", type=click.Choice(["edgeplan", "paper"]), default="edgeplan", show_default=True,
              help="paper: mulder2020 Table 3 as published; edgeplan: log inputs, power-of-two features and a "
                   "learning-rate schedule (see edgeplan.costmodels.performance_model.RECIPES; it lowers the "
                   "validation loss on the Intel table; its test MdRAE is not measured yet).")
@click.option("--max-epochs", type=click.IntRange(min=1), default=None,
              help="Upper bound on training epochs (default: the model's).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_obj
def fit(ctx: Context, data_path: str, out_dir: str, kind: str, split_seed: int, threads: int, recipe: str,
        max_epochs: int | None, as_json: bool) -> None:
    """Fit a primitive performance model on the training part of a timing table and save it."""
    from edgeplan.costmodels import fit_performance_model, load_primitive_csv, save_performance_model
    from edgeplan.measure import check_thread_count

    check_thread_count(threads)
    data = load_primitive_csv(data_path)
    params: dict[str, Any] = {} if kind == "lin" else {"threads": threads, "max_epochs": max_epochs}
    with _epoch_bar(not as_json) as progress:
        model = fit_performance_model(data, kind, split_seed=split_seed, recipe=recipe, params=params,
                                      callback=progress)
    folder = save_performance_model(model, out_dir)
    summary = {"model": str(folder), "kind": kind, "primitives": len(model.primitive_names),
               "transforms": len(model.transform_names), "dropped_columns": list(data.dropped), **model.info}
    if as_json:
        emit_json(summary)
        return
    click.echo(f"fitted {kind} on {model.info['train_rows']} of {model.info['rows']} layers of {data_path} "
               f"(validation {model.info['val_rows']}, test {model.info['test_rows']}, split seed {split_seed}, "
               f"recipe {recipe}): "
               f"{len(model.primitive_names)} primitives, {len(model.transform_names)} transformations, "
               f"{model.info['fit_primitives_s'] + model.info['fit_transforms_s']:.1f} s")
    if data.dropped:
        click.echo(f"left out {len(data.dropped)} column(s) empty in every row: {', '.join(data.dropped)}")
    click.echo(f"saved to {folder}; score it with: edgeplan primitives evaluate --model {folder} --data {data_path}")


def _pct(v: float) -> str:
    return "-" if v != v else f"{100 * v:.2f} %"


@click.command("evaluate")
@click.option("--model", "model_dir", required=True, type=click.Path(file_okay=False),
              help="Folder of a model written by `fit`.")
@click.option("--data", "data_path", required=True, type=click.Path(dir_okay=False),
              help="Timing table to score on (this platform's or another's: shared columns are scored).")
@click.option("--split", "part", type=click.Choice(["test", "all"]), default="test", show_default=True,
              help="Score on the test part of the split, or on every row.")
@click.option("--split-seed", type=int, default=0, show_default=True,
              help="Seed of the 80/10/10 split (use the one the model was fitted with).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_obj
def evaluate(ctx: Context, model_dir: str, data_path: str, part: str, split_seed: int, as_json: bool) -> None:
    """Print the MdRAE of a fitted model per primitive and per layout transformation, and their medians."""
    from edgeplan.costmodels import evaluate_performance_model, load_performance_model, load_primitive_csv

    model = load_performance_model(model_dir)
    data = load_primitive_csv(data_path)
    result = evaluate_performance_model(model, data, part, split_seed)
    if as_json:
        emit_json({"model": model_dir, "kind": model.kind, "data": data_path, "split_seed": split_seed,
                   **result.to_dict()})
        return
    from rich.table import Table

    from edgeplan.reports.tables import print_table

    table = Table(title=f"{model.kind} model {model_dir} on {data_path} ({part} part: {result.rows} layers, "
                        f"{result.transform_tensors} tensors; split seed {split_seed})")
    table.add_column("column")
    table.add_column("MdRAE", justify="right")
    for name, v in result.primitive_mdrae.items():
        table.add_row(name, _pct(v))
    table.add_section()
    for name, v in result.transform_mdrae.items():
        table.add_row(name, _pct(v))
    table.add_section()
    table.add_row("median over primitives", _pct(result.median_primitive_mdrae))
    table.add_row("median over transformations (X-to-X left out)", _pct(result.median_transform_mdrae))
    print_table(table)
    if result.only_in_model or result.only_in_data:
        click.echo(f"not scored: {len(result.only_in_model)} column(s) only in the model "
                   f"{list(result.only_in_model)[:6]}, {len(result.only_in_data)} only in the data "
                   f"{list(result.only_in_data)[:6]}")
