"""Pieces shared by the CLI commands."""

from __future__ import annotations

import json
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

__all__ = ["KEEP_MEMORY_HELP", "Context", "check_positive", "emit_json", "keep_memory", "model_specs",
           "refuse_failures"]

#: Help of the ``--keep-memory`` option of the commands that measure.
KEEP_MEMORY_HELP = ("Measure under glibc malloc tunables that keep freed memory in the process (as a caching "
                    "allocator does), so that no operation pays page faults for buffers over 32 MiB that the "
                    "allocator handed back: re-runs the command with them set. Recorded with the measurements; a "
                    "campaign is measured all with it or all without.")

@dataclass
class Context:
    """Options shared by every command (``--home``, ``--debug``)."""

    home: str | None = None
    debug: bool = False
    argv: tuple[str, ...] = ()

    @property
    def command(self) -> str:
        """The command line, as recorded with every measurement."""
        return " ".join(("edgeplan", *self.argv))


def keep_memory(ctx: Context) -> None:
    """Make sure this process runs under :data:`edgeplan.measure.allocator.KEEP_MEMORY`: return if it does, else
    run the same command again in its place with the tunables set (glibc reads them when a process starts only).

    Parameters
    ----------
    ctx
        The command's context: its :attr:`Context.argv` is run as ``python -m edgeplan ARGV``.
    """
    from edgeplan.measure.allocator import keeps_memory, with_keep_memory

    if keeps_memory():
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, "-m", "edgeplan", *ctx.argv], with_keep_memory())


def emit_json(data: Any) -> None:
    """Print ``data`` as indented JSON on standard output; NaN and infinities (say the spread of one run) are null,
    since JSON has no such numbers."""
    click.echo(json.dumps(_finite(data), indent=2, default=str, allow_nan=False))


def check_positive(option: str, value: float | None, what: str) -> None:
    """Refuse an option's value that is given but not a finite positive number (click's ``float`` lets nan and
    inf through); ``what`` says what to give, e.g. ``"a positive number of seconds"``.

    Raises
    ------
    InvalidInputError
        ``"{option} must be {what}, got {value}"``.
    """
    from edgeplan.errors import InvalidInputError

    if value is not None and not (math.isfinite(value) and value > 0):
        raise InvalidInputError(f"{option} must be {what}, got {value}")


def refuse_failures(failed: int, what: str, as_json: bool) -> None:
    """End a campaign command that could not measure ``failed`` of its ``what`` (e.g. ``"model(s)"``) with a
    non-zero exit, after its report named each one and why: a script sees the shortfall.

    Parameters
    ----------
    failed
        How many tasks the campaign could not measure.
    what
        What they are, plural form, for the message.
    as_json
        Whether the report went out as JSON (the message then points there).

    Raises
    ------
    MeasurementError
        When ``failed`` is positive (exit code 1; bad arguments exit with 2).
    """
    from edgeplan.errors import MeasurementError

    if failed:
        where = "in the JSON report" if as_json else "above"
        raise MeasurementError(f"{failed} {what} could not be measured (named {where}); the others are stored, "
                                "and running the command again retries only those")


def _finite(data: Any) -> Any:
    """``data`` with every non-finite float replaced by None (dicts, lists and tuples walked)."""
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {k: _finite(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [_finite(v) for v in data]
    return data


def model_specs(models: tuple[str, ...], models_file: Path | None) -> list[str]:
    """The models of a command: its arguments then ``--models-file`` lines, with ranges and sets expanded.

    Raises
    ------
    InvalidInputError
        For a missing models file, or when no model is given at all.
    """
    from edgeplan.errors import InvalidInputError
    from edgeplan.measure.model_sets import expand_models, read_models_file

    specs = list(models)
    if models_file is not None:
        if not models_file.is_file():
            raise InvalidInputError(f"--models-file {models_file} does not exist")
        specs += read_models_file(models_file)
    names = expand_models(specs)
    if not names:
        raise InvalidInputError("no models given: name zoo strings (torchvision:resnet50), a range (synthetic:0-99) "
                                "or a set (set:timm-cnns)")
    return names
