"""``edgeplan zoo``: the model families and examples."""

from __future__ import annotations

import click

from edgeplan.cli.common import emit_json
from edgeplan.frontends.zoo import FAMILIES

__all__ = ["zoo"]


@click.command()
@click.option("--family", type=click.Choice([f.prefix for f in FAMILIES]), default=None,
              help="List every model of one family (torchvision, timm, paper) instead of the overview.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def zoo(family: str | None, as_json: bool) -> None:
    """Model families, their default input shapes, and example model strings.

    \b
    Example:
      edgeplan zoo
      edgeplan zoo --family timm --json
    """
    if family is not None:
        names = _family_names(family)
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


def _family_names(family: str) -> list[str]:
    if family == "torchvision":
        from edgeplan.frontends.zoo import torchvision_names

        return [f"torchvision:{n}" for n in torchvision_names()]
    if family == "timm":
        import timm

        return [f"timm:{n}" for n in timm.list_models()]
    if family == "paper":
        from edgeplan.frontends.paper_models import PAPER_MODELS

        return [f"paper:{n}" for n in PAPER_MODELS]
    raise click.UsageError(f"--family {family} has no finite list; see the examples in `edgeplan zoo`")
