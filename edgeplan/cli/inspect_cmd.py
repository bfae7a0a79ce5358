"""``edgeplan inspect MODEL``: the per-layer table of a model (op, shapes, MACs, FLOPs, params, bytes)."""

from __future__ import annotations

import click

from edgeplan.cli.common import emit_json

__all__ = ["inspect"]


@click.command()
@click.argument("model")
@click.option("--input-shape", default=None, help="Override the default input shape, e.g. 1x3x160x160.")
@click.option("--allow-opaque", is_flag=True,
              help="Keep unknown operators as opaque nodes (listed) instead of failing.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output: {nodes: [...], totals: {...}}.")
def inspect(model: str, input_shape: str | None, allow_opaque: bool, as_json: bool) -> None:
    """Per-layer table of MODEL (a zoo string such as torchvision:resnet18, or a path to an .onnx file).

    \b
    Example:
      edgeplan inspect torchvision:resnet18
      edgeplan inspect model.onnx --json --allow-opaque
    """
    from edgeplan.frontends.zoo import load_graph, parse_shape
    from edgeplan.ir import graph_to_dict

    shape = parse_shape(input_shape) if input_shape else None
    graph = load_graph(model, input_shape=shape, opaque=allow_opaque)
    if as_json:
        emit_json(graph_to_dict(graph))
        return
    from edgeplan.reports.tables import graph_table, print_table

    print_table(graph_table(graph))
    opaque = graph.totals().opaque
    if opaque:
        click.echo(f"opaque operators (not modelled, listed here and in every report): {', '.join(opaque)}")
