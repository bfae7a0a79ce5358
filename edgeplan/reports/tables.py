"""Readable tables for the terminal (rich is imported lazily)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from edgeplan.ir import Graph

__all__ = ["graph_table", "human", "print_table"]


def human(value: float, unit: str = "") -> str:
    """``4089184256`` -> ``4.09 G``: a number with an SI prefix."""
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.2f} {prefix}{unit}"
    return f"{value:g} {unit}".rstrip()


def _shape(shapes: tuple[tuple[int, ...], ...]) -> str:
    return ", ".join("x".join(str(d) for d in s) for s in shapes)


def graph_table(graph: Graph) -> Any:
    """A rich table with one row per node (op, shapes, MACs, FLOPs, params, activation bytes) and the totals."""
    from rich.table import Table

    table = Table(title=f"{graph.name}", show_footer=True, header_style="bold")
    totals = graph.totals()
    table.add_column("#", justify="right", footer="")
    table.add_column("node", footer="total", overflow="fold")
    table.add_column("op")
    table.add_column("input", overflow="fold")
    table.add_column("output", overflow="fold")
    table.add_column("MACs", justify="right", footer=human(totals.macs))
    table.add_column("FLOPs", justify="right", footer=human(totals.flops))
    table.add_column("params", justify="right", footer=human(totals.params))
    table.add_column("act. bytes", justify="right", footer=human(totals.activation_bytes, "B"))
    for i, node in enumerate(graph.nodes):
        op = node.kind.value
        fn = getattr(node.attrs, "fn", None) or getattr(node.attrs, "op", None) or getattr(node.attrs, "mode", None)
        if fn is not None and hasattr(fn, "value"):
            op = f"{op}:{fn.value}"
        if node.kind.value == "opaque":
            op = f"[red]opaque:{getattr(node.attrs, 'operator', '?')}[/red]"
        table.add_row(
            str(i), node.name, op, _shape(node.input_shapes), _shape(node.output_shapes),
            human(node.macs) if node.macs else "", human(node.flops) if node.flops else "",
            human(node.params) if node.params else "", human(node.activation_bytes, "B"),
        )
    return table


def print_table(table: Any) -> None:
    """Print a rich renderable to standard output."""
    import sys

    from rich.console import Console

    # a pipe or a log file gets a wide table rather than rich's 80-column default
    Console(width=None if sys.stdout.isatty() else 160).print(table)
