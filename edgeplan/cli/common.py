"""Pieces shared by the CLI commands."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import click

__all__ = ["Context", "emit_json"]


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


def emit_json(data: Any) -> None:
    """Print ``data`` as indented JSON on standard output."""
    click.echo(json.dumps(data, indent=2, default=str))
