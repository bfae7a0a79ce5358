"""``edgeplan zoo``: the model families and examples."""

from __future__ import annotations

import click

from edgeplan.cli.common import emit_json
from edgeplan.frontends.zoo import FAMILIES, LISTED_FAMILIES

__all__ = ["zoo"]


@click.command()
@click.option("--family", type=click.Choice(LISTED_FAMILIES), default=None,
              help="List every model of one family of named models instead of the overview (the other families "
                   "name a model by a seed, a cell string or a path: see their examples).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def zoo(family: str | None, as_json: bool) -> None:
    """Model families, their default input shapes, and example model strings.

    \b
    Example:
      edgeplan zoo
      edgeplan zoo --family timm --json
    """
    if family is not None:
        from edgeplan.frontends.zoo import family_models

        names = family_models(family)
        if as_json:
            emit_json({"family": family, "models": names})
        else:
            click.echo("\n".join(names))
        return
    if as_json:
        emit_json([{"family": f.prefix, "description": f.description, "default_input": f.default_input,
                    "examples": list(f.examples)} for f in FAMILIES])
        return
    from rich.table import Table

    from edgeplan.reports.tables import print_table

    table = Table(title="edgeplan model zoo", header_style="bold")
    for col in ("family", "what", "default input", "examples"):
        table.add_column(col, overflow="fold")
    for f in FAMILIES:
        table.add_row(f.prefix, f.description, f.default_input, "\n".join(f.examples))
    print_table(table)
