"""Offloading plans for people: a table of the schedule, and the figure of eshratifar2018 Fig. 3c.

The figure draws the bytes live after every layer (what a switch there would send: the layer's output, plus any
skip tensor still needed) as bars, coloured by
the side that computes the layer, with the transfers marked: where people would rather look than read.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from edgeplan.reports.tables import human

if TYPE_CHECKING:
    from edgeplan.decisions.offload import OffloadResult

__all__ = ["plan_summary_lines", "plot_schedule"]

_COLOURS = {"mobile": "#1f77b4", "cloud": "#ff7f0e"}


def plan_summary_lines(result: OffloadResult) -> list[str]:
    """Readable lines: devices, network, the segments, transfers, totals and the two baselines."""
    plan, problem = result.plan, result.problem
    net, costs = problem.network, problem.costs
    names = costs.layers
    lines = [
        f"{result.setup.model}: {len(names)} layers, objective {plan.objective}, solver {plan.solver} "
        f"({plan.solve_time_ms:.2f} ms)",
        f"  mobile: {costs.mobile_label}",
        f"  cloud:  {costs.cloud_label}",
        f"  network {net.name}: up {net.up_mbps:g} Mbps, down {net.down_mbps:g} Mbps; mobile compute power "
        f"{problem.power.compute_mw / 1000:g} W",
        f"  schedule {plan.pattern}:",
    ]
    for seg in plan.segments:
        lines.append(f"    {seg.side:<6} layers {seg.first:>2}..{seg.last:<2} {names[seg.first]} .. {names[seg.last]}")
    for t in plan.transfers:
        lines.append(f"    {t.direction:<8} at boundary {t.boundary:>2}: {human(t.size_bytes)}B, {t.time_ms:.1f} ms, "
                     f"{t.energy_mj:.1f} mJ")
    lines.append(f"  plan:        {plan.latency_ms:10.2f} ms  {plan.energy_mj:10.1f} mJ  cloud {plan.cloud_ms:.2f} ms")
    for label, base in (("mobile-only", plan.mobile_only), ("cloud-only", plan.cloud_only)):
        lines.append(f"  {label + ':':<12} {base.latency_ms:10.2f} ms  {base.energy_mj:10.1f} mJ")
    best_t = min(plan.mobile_only.latency_ms, plan.cloud_only.latency_ms)
    best_e = min(plan.mobile_only.energy_mj, plan.cloud_only.energy_mj)
    lines.append(f"  vs the better baseline: speed-up {best_t / plan.latency_ms:.2f}x, "
                 f"energy reduction {best_e / plan.energy_mj:.2f}x")
    limits = []
    if plan.battery_budget_mj is not None:
        limits.append(f"battery budget {plan.battery_budget_mj:g} mJ")
    if plan.cloud_limit_ms is not None:
        limits.append(f"cloud-time limit {plan.cloud_limit_ms:g} ms")
    if limits:
        lines.append("  under " + " and ".join(limits))
    return lines


def plot_schedule(result: OffloadResult, path: Path) -> Path:
    """Save the schedule over the per-layer data sizes (like eshratifar2018 Fig. 3c) as an image."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plan, costs = result.plan, result.problem.costs
    n = len(costs.layers)
    side = ["mobile"] * n
    for seg in plan.segments:
        for k in range(seg.first, seg.last + 1):
            side[k] = seg.side
    sizes_kb = [costs.boundary_bytes[k + 1] / 1e3 for k in range(n)]  # what a cut after layer k sends
    fig, ax = plt.subplots(figsize=(max(6.0, 0.28 * n + 2), 3.6))
    ax.bar(range(n), sizes_kb, color=[_COLOURS[s] for s in side])
    ax.axhline(costs.boundary_bytes[0] / 1e3, color="grey", linestyle=":", label="input size")
    for t in plan.transfers:
        ax.axvline(t.boundary - 0.5, color="black", linestyle="--", linewidth=1)
    ax.set_xticks(range(n))
    ax.set_xticklabels([name.split(".")[-1][:14] for name in costs.layers], rotation=90, fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("kB live after the layer")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in _COLOURS.values()]
    ax.legend([*handles, ax.lines[0]], ["mobile", "cloud", "input size"], fontsize=8, loc="upper right")
    ax.set_title(f"{result.setup.model} on {result.problem.network.name}, {plan.objective}-optimal: {plan.pattern} "
                 "(dashed: transfers)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
