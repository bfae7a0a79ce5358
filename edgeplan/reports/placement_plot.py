"""Drawing of a partition plan on its cluster: the nodes, the router, and the pipeline's chain of links."""

from __future__ import annotations

import math
from pathlib import Path

from edgeplan.errors import InvalidInputError
from edgeplan.partition import PartitionResult

__all__ = ["plan_lines", "plot_placement"]


def _mib(x: float) -> str:
    return f"{x / 2**20:.1f} MiB"


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
             + f"; planned in {r.planning_ms:.0f} ms" + (" (proven optimal)" if r.proven_optimal else "")]
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
    lines.append(f"  lower bounds for these transfers: Theorem 1 {r.theorem1_bound_ms:.1f} ms, matching "
                 f"{r.matching_bound_ms:.1f} ms")
    if r.compression is not None:
        used = [r.compression[b] for _, b in r.runs[:-1]]
        if used:
            lines.append(f"  ZFP x LZ4 ratios at the cuts: {', '.join(f'{x:.2f}' for x in used)}")
    lines.extend(f"  note: {note}" for note in r.notes)
    return lines


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
    worst = max(result.link_ms, default=0.0)
    for i, ms in enumerate(result.link_ms):
        (x0, y0), (x1, y1) = xy[chosen[i]], xy[chosen[i + 1]]
        colour = "tab:red" if ms == worst else "tab:blue"
        ax.annotate("", xy=(x1, y1), xytext=(x0, y0),
                    arrowprops={"arrowstyle": "->", "color": colour, "lw": 2}, zorder=3)
        ax.text((x0 + x1) / 2, (y0 + y1) / 2, f"{ms:.0f} ms", fontsize=8, color=colour, zorder=4)
    ax.scatter([xy[v][0] for v in chosen], [xy[v][1] for v in chosen], s=80, c="tab:orange", zorder=5,
               label="stage")
    for i, v in enumerate(chosen):
        ax.text(xy[v][0], xy[v][1], f" {i}", fontsize=10, weight="bold", zorder=6)
    ax.set_aspect("equal")
    ax.set_title(f"{result.model}: {len(chosen)} stages, bottleneck {result.bottleneck_ms:.0f} ms "
                 f"({result.solver})", fontsize=10)
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
