"""A machine's primitive performance model, kept as a device in the edgeplan home: ``edgeplan primitives transfer
--name NAME`` writes it (:mod:`edgeplan.costmodels.primitive_calibration` without ``--fraction``), ``edgeplan select
--costs predicted --device NAME`` reads it."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from edgeplan.cli.common import Context, emit_json

__all__ = ["calibrate_primitives_cmd", "primitive_model_folder", "resolve_primitive_model", "save_device"]


def primitive_model_folder(home: str | None, name: str) -> Path:
    """Where ``primitives transfer --name NAME`` keeps the device's performance model."""
    from edgeplan.costmodels.opwise.profiles import home_root

    return home_root(home) / name / "primitives"


def resolve_primitive_model(home: str | None, source: str | None) -> Path:
    """The performance model folder named by ``source``: a folder, a device made by ``primitives transfer --name``,
    or None for the shipped one.

    Raises
    ------
    InvalidInputError
        When ``source`` is neither a folder with a model nor such a device.
    """
    from edgeplan.decisions.select import SHIPPED, SHIPPED_MODEL
    from edgeplan.errors import InvalidInputError

    if source is None:
        return SHIPPED / SHIPPED_MODEL
    for folder in (Path(source), primitive_model_folder(home, source)):
        if (folder / "model.json").is_file():
            return folder
    raise InvalidInputError(f"{source!r} is neither a performance model folder (with model.json, from `edgeplan "
                            f"primitives fit`) nor a device made by `edgeplan primitives transfer --name`")


def _measured_on(data_path: Path) -> tuple[int | None, str | None]:
    """The threads and torch device a table was measured at, from the provenance file `profile primitives --export`
    writes beside it (None, None without one)."""
    prov = data_path.with_name(data_path.stem + ".provenance.json")
    if not prov.is_file():
        return None, None
    params = json.loads(prov.read_text()).get("campaign", {}).get("params", {})
    threads = params.get("threads")
    return (int(threads) if threads is not None else None), params.get("device")


def _device_folder(ctx: Context, name: str, replace: bool) -> Path:
    """The folder of device ``name``, refused when it exists without ``replace``."""
    from edgeplan.errors import InvalidInputError

    if not name or "/" in name or name.startswith(".") or len(name.encode()) > 100:
        raise InvalidInputError(f"--name {name!r}: use a short plain name such as my-phone")
    folder = primitive_model_folder(ctx.home, name)
    if (folder / "model.json").exists() and not replace:
        raise InvalidInputError(f"device {name!r} already has a primitive performance model ({folder}); choose "
                                "another --name or pass --replace")
    return folder


def save_device(ctx: Context, model: Any, name: str, source_dir: Path, replace: bool, data_path: str) -> Path:
    """Save a transferred ``model`` as device ``name``, with where its data was measured."""
    folder = _device_folder(ctx, name, replace)
    threads, torch_device = _measured_on(Path(data_path))
    model.info["calibration"] = {"device": name, "source": str(source_dir), "threads": threads,
                                 "torch_device": torch_device, "data": str(data_path)}
    return _save_device(model, folder)


def calibrate_primitives_cmd(ctx: Context, data_path: Path, model: str | None,
                             target: tuple[str | None, str | None, bool], seed: int, threads: int | None,
                             as_json: bool) -> None:
    """``primitives transfer`` without ``--fraction``: move the model with every layer of ``data_path``, the method
    chosen by cross-validation; ``target`` is ``(name, out, replace)``."""
    from edgeplan.costmodels import load_performance_model, load_primitive_csv, save_performance_model
    from edgeplan.costmodels.primitive_calibration import calibrate_primitives
    from edgeplan.errors import InvalidInputError

    name, out, replace = target
    folder = _device_folder(ctx, name, replace) if name is not None else None
    source_dir = resolve_primitive_model(ctx.home, model)
    if folder is not None and source_dir.resolve() == folder.resolve():
        raise InvalidInputError(f"--model {model} is the device being replaced; transfer from its source "
                                "(a model folder, or the shipped model without --model)")
    source = load_performance_model(source_dir)
    data = load_primitive_csv(data_path)
    shared = [p for p in source.primitive_names if p in data.primitives]
    if 0 < len(shared) < len(source.primitive_names):
        click.echo(f"note: the measurements cover {len(shared)} of the source's {len(source.primitive_names)} "
                   "primitives; the others are moved by what the measured ones teach (with the factor: their median "
                   "scale)", err=True)
    with _fit_bar(not as_json) as progress:
        result = calibrate_primitives(source, data, seed=seed, threads=threads, progress=progress)
    measured_threads, torch_device = _measured_on(data_path)
    result.model.info["calibration"] = {"device": name, "source": str(source_dir), "threads": measured_threads,
                                        "torch_device": torch_device, "data": str(data_path)}
    path = _save_device(result.model, folder) if folder is not None else save_performance_model(result.model, str(out))
    scored = result.model.info["transfer"]["calibration"]  # the scores, NaN written as null
    summary = {"device": name, "complete": True, "path": str(path), "source": str(source_dir),
               "method": result.method, "layers": result.rows, "folds": result.folds,
               "measured_primitives": len(shared),
               "cv_mdrae": scored["scores"], "cv_transform_mdrae": scored["transform_scores"],
               "threads": measured_threads, "torch_device": torch_device}
    if as_json:
        emit_json(summary)
        return
    click.echo(f"{name or path}: {result.rows} layers, primitive model of {source_dir} moved by {result.method}")
    if result.folds:
        click.echo(f"  {result.folds}-fold cross-validated MdRAE (median over primitives | transformations, whose "
                   "tensors may recur across folds):")
        for m, v in result.scores.items():
            t = result.transform_scores.get(m, float("nan"))
            mark = "  <- chosen" if m == result.method else ""
            click.echo(f"    {m:<15} {100 * v:7.2f} % | {100 * t:7.2f} %{mark}")
    else:
        click.echo("  one layer: nothing to cross-validate, so the factor correction is kept")
    if name is not None:
        hint = f" --threads {measured_threads}" if measured_threads else ""
        click.echo(f"  saved to {path}; use it with `edgeplan select MODEL --costs predicted --device {name}{hint}`")
    else:
        click.echo(f"  saved to {path}")


def _save_device(model: Any, folder: Path) -> Path:
    """Write the model to a fresh folder, then put it in place of ``folder`` at once."""
    import shutil
    import tempfile

    from edgeplan.costmodels import save_performance_model

    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        save_performance_model(model, staging)
        old = folder.with_name(f".{folder.name}-old")
        if folder.exists():
            shutil.rmtree(old, ignore_errors=True)
            folder.rename(old)
        staging.rename(folder)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return folder


@contextmanager
def _fit_bar(enabled: bool) -> Iterator[Callable[[int, int], None]]:
    """A bar over the calibration's fits (cross-validation folds, then the final fit), or a no-op."""
    if not enabled:
        yield lambda done, total: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("calibrating"), BarColumn(), MofNCompleteColumn(), TextColumn("fits"), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True)) as bar:
        task = bar.add_task("calibrating", total=None)
        yield lambda done, total: bar.update(task, completed=done, total=total)
