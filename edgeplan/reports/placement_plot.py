"""Drawing of a partition plan on its cluster: the nodes, the router, and the pipeline's chain of links."""

from __future__ import annotations

import math
from pathlib import Path

from edgeplan.decisions.partition import PartitionResult
from edgeplan.errors import InvalidInputError

__all__ = ["BOTTLENECK", "LINK", "STAGE", "placement_colours", "plan_lines", "plot_placement"]

#: Colours of the drawing: the parts that set the period, the other links, the other stages.
BOTTLENECK, LINK, STAGE = "tab:red", "tab:blue", "tab:orange"


def _mib(x: float) -> str:
    return f"{x / 2**20:.1f} MiB"


def _optimality(r: PartitionResult) -> str:
    """What the solver proved, scoped: never more than optimal over what it searched."""
    if r.solver == "own":
        total = r.candidates_total
        if not r.search_complete:
            return (f" (best found within the time budget: search stopped after {r.candidates_tried} of {total} "
                    "candidate partitionings)")
        if r.proven_optimal:
            return f" (optimal over its {total} candidate partitionings)"
        return " (best found within the time budget: a placement was left unproven)"
    if r.solver == "exact":
        if r.proven_optimal:
            return " (optimal placement of these partitions)"
        return " (best placement found within the time budget, not proven optimal)"
    return ""


def _bottleneck_line(r: PartitionResult) -> str:
    parts = []
    for kind, i in r.bottleneck_parts():
        if kind == "link":
            parts.append(f"the link from stage {i} to {i + 1} (node {r.nodes[i]} to {r.nodes[i + 1]}, "
                         f"{r.link_ms[i]:.1f} ms)")
        else:
            assert r.stage_compute_ms is not None
            parts.append(f"stage {i}'s compute on node {r.nodes[i]} ({r.stage_compute_ms[i]:.1f} ms)")
    return "  slowest: " + ", ".join(parts) if parts else "  slowest: nothing (one stage, compute not measured)"


def plan_lines(result: PartitionResult) -> list[str]:
    """A text drawing of the plan: one line per stage, then the chain of nodes with each link's transfer."""
    r = result
    n_stages = len(r.runs)
    lines = [f"{r.model} on {r.cluster.nodes} nodes ({r.cluster.source})",
             f"solver {r.solver}: {n_stages} stage{'s' if n_stages != 1 else ''} over {len(r.points)} candidate "
             f"points; bottleneck {r.bottleneck_ms:.1f} ms"
             + (f" ({1000 / r.bottleneck_ms:.2f} inferences/s)" if r.bottleneck_ms > 0 else "")
             + ("" if r.bottleneck_with_compute_ms is None or r.solver == "own"
                else f", {r.bottleneck_with_compute_ms:.1f} ms with compute")
             + f"; planned in {r.planning_ms:.0f} ms" + _optimality(r)]
    header = (f"  {'stage':>5} {'node':>5}  {'points':<44} {'memory':>10} {'compute':>9} {'sends':>10} "
              f"{'link':>11} {'transfer':>10}")
    lines.append(header)
    for i, (a, b) in enumerate(r.runs):
        span = r.points[a] if a == b else f"{r.points[a]} .. {r.points[b]}"
        if len(span) > 44:
            span = span[:20] + "…" + span[-23:]
        compute = "" if r.stage_compute_ms is None else f"{r.stage_compute_ms[i]:.1f} ms"
        if i < len(r.transfers_bytes):
            sends = f"{r.transfers_bytes[i] / 1e6:.2f} MB"
            link = f"{r.link_mbps[i]:.1f} Mbit/s"
            transfer = f"{r.link_ms[i]:.1f} ms"
        else:
            sends = link = transfer = ""
        lines.append(f"  {i:>5} {r.nodes[i]:>5}  {span:<44} {_mib(r.stage_memory_bytes[i]):>10} {compute:>9} "
                     f"{sends:>10} {link:>11} {transfer:>10}")
    chain = f"[{r.nodes[0]}]"
    for i, ms in enumerate(r.link_ms):
        chain += f" --{ms:.0f} ms--> [{r.nodes[i + 1]}]"
    lines.append("  pipeline: " + chain)
    lines.append(_bottleneck_line(r))
    lines.append(f"  lower bounds for these transfers: Theorem 1 {r.theorem1_bound_ms:.1f} ms, matching "
                 f"{r.matching_bound_ms:.1f} ms")
    if r.compression is not None:
        used = [r.compression[b] for _, b in r.runs[:-1]]
        if used:
            lines.append(f"  ZFP x LZ4 ratios at the cuts: {', '.join(f'{x:.2f}' for x in used)}")
    lines.extend(f"  note: {note}" for note in r.notes)
    return lines


def placement_colours(result: PartitionResult) -> tuple[list[str], list[str]]:
    """Colour of each link and each stage in :func:`plot_placement`: :data:`BOTTLENECK` for the parts that take
    the pipeline's period (a link, or a stage when its compute is the slowest), :data:`LINK` / :data:`STAGE` for
    the rest."""
    slow = set(result.bottleneck_parts())
    links = [BOTTLENECK if ("link", i) in slow else LINK for i in range(len(result.link_ms))]
    stages = [BOTTLENECK if ("stage", i) in slow else STAGE for i in range(len(result.nodes))]
    return links, stages


def plot_placement(result: PartitionResult, path: Path) -> Path:
    """Save a picture of the cluster with the pipeline drawn on it (PNG, SVG or PDF by the file's suffix)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = result.cluster.nodes
    if result.cluster.positions_m is not None:
        xy = list(result.cluster.positions_m)
        router = True
    else:
        xy = [(math.cos(2 * math.pi * k / n), math.sin(2 * math.pi * k / n)) for k in range(n)]
        router = False
    fig, ax = plt.subplots(figsize=(7, 7))
    ax.scatter([p[0] for p in xy], [p[1] for p in xy], s=18, c="0.7", zorder=1, label="idle node")
    if router:
        ax.scatter([0], [0], marker="^", s=90, c="k", zorder=2, label="router")
    chosen = result.nodes
    link_colours, stage_colours = placement_colours(result)
    for i, ms in enumerate(result.link_ms):
        (x0, y0), (x1, y1) = xy[chosen[i]], xy[chosen[i + 1]]
        colour = link_colours[i]
        ax.annotate("", xy=(x1, y1), xytext=(x0, y0),
                    arrowprops={"arrowstyle": "->", "color": colour, "lw": 2}, zorder=3)
        ax.text((x0 + x1) / 2, (y0 + y1) / 2, f"{ms:.0f} ms", fontsize=8, color=colour, zorder=4)
    for colour, label in ((STAGE, "stage"), (BOTTLENECK, "bottleneck stage (compute)")):
        at = [v for v, c in zip(chosen, stage_colours, strict=True) if c == colour]
        if at:
            ax.scatter([xy[v][0] for v in at], [xy[v][1] for v in at], s=80, c=colour, zorder=5, label=label)
    for i, v in enumerate(chosen):
        compute = "" if result.stage_compute_ms is None else f" ({result.stage_compute_ms[i]:.0f} ms)"
        ax.text(xy[v][0], xy[v][1], f" {i}{compute}", fontsize=10, weight="bold", color=stage_colours[i], zorder=6)
    ax.set_aspect("equal")
    ax.set_title(f"{result.model}: {len(chosen)} stages, bottleneck {result.period_ms:.0f} ms "
                 f"({result.solver}; red: the slowest link or stage)", fontsize=10)
    if router:
        ax.set_xlabel("m")
    ax.legend(loc="upper right", fontsize=8)
    try:
        fig.savefig(path, dpi=120, bbox_inches="tight")
    except (OSError, ValueError) as e:
        raise InvalidInputError(f"cannot write the figure to {path}: {e}; pick a writable path ending in .png, "
                                ".svg or .pdf") from e
    finally:
        plt.close(fig)
    return path
