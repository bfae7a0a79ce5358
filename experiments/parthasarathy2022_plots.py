"""Figures 7-10 of the parthasarathy2022 simulation, from
:func:`~experiments.parthasarathy2022.run_simulation`.

* Fig. 7: heat maps of the k-path bottleneck by nodes and classes, one panel per model at its smallest memory
  with a feasible multi-stage partitioning;
* Fig. 8: mean bottleneck of the k-path and random algorithms per model at the largest cluster (log scale);
* Fig. 9: how far the k-path algorithm is below the greedy one, by cluster size, per model and on average;
* Fig. 10: k-path over Theorem 1's bound and over the true optimum per model, with the paper's 1.092.

matplotlib (Agg) is imported lazily.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgeplan.errors import InvalidInputError
from experiments.parthasarathy2022 import PAPER, fig8_rows, fig9_rows

if TYPE_CHECKING:
    from experiments.parthasarathy2022 import CellResult, SimulationResult

__all__ = ["figure_folder", "plot_partition_figures"]


def _short(model: str) -> str:
    return model.split(":")[-1]


def _fig7_panels(result: SimulationResult) -> list[tuple[str, int, list[CellResult]]]:
    panels = []
    for model in result.config.models:
        for mb in sorted(result.config.memories_mb):
            cells = [c for c in result.cells if c.model == model and c.memory_mb == mb]
            if any(c.status == "ok" for c in cells):
                panels.append((model, mb, cells))
                break
    return panels


def _fig7(plt: Any, result: SimulationResult, path: Path) -> Path:
    import numpy as np

    panels = _fig7_panels(result)
    nodes, classes = result.config.nodes, result.config.classes
    cols = min(4, max(len(panels), 1))
    rows = max(1, math.ceil(len(panels) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 3.0 * rows), squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.axis("off")
    if not panels:
        axes[0][0].text(0.5, 0.5, "no feasible multi-stage configuration", ha="center", va="center")
    for ax, (model, mb, cells) in zip(axes.flat, panels, strict=False):
        grid = np.full((len(nodes), len(classes)), np.nan)
        for c in cells:
            for s in c.kpath:
                if s.mean_ms is not None:
                    grid[nodes.index(c.nodes), classes.index(s.classes)] = s.mean_ms
        image = ax.imshow(grid, aspect="auto", cmap="viridis_r", origin="lower")
        for (i, j), v in np.ndenumerate(grid):
            if not np.isnan(v):  # dark text on the light (low) end of the colour map
                dark = image.norm(v) < 0.5
                ax.text(j, i, f"{v:.0f}", ha="center", va="center", fontsize=6, color="black" if dark else "white")
        ax.set_xticks(range(len(classes)), [str(k) for k in classes], fontsize=7)
        ax.set_yticks(range(len(nodes)), [str(n) for n in nodes], fontsize=7)
        ax.set_xlabel("bandwidth classes", fontsize=8)
        ax.set_ylabel("nodes", fontsize=8)
        stages = next((c.stages for c in cells if c.status == "ok"), 0)
        ax.set_title(f"{_short(model)}, {mb} MB ({stages} stages)", fontsize=8)
        fig.colorbar(image, ax=ax, label="bottleneck ms").ax.tick_params(labelsize=7)
    fig.suptitle("Fig. 7: k-path bottleneck latency (blank: infeasible)", fontsize=10)
    return _save(plt, fig, path)


def _fig8(plt: Any, result: SimulationResult, path: Path) -> Path:
    rows = [r for r in fig8_rows(result) if r.kpath_ms is not None]
    fig, ax = plt.subplots(figsize=(max(5.0, 1.0 * len(rows) + 2), 3.8))
    x = range(len(rows))
    ax.bar([i - 0.2 for i in x], [r.random_ms or 0.0 for r in rows], width=0.4, label="random", color="#d62728")
    ax.bar([i + 0.2 for i in x], [r.kpath_ms or 0.0 for r in rows], width=0.4, label="k-path", color="#1f77b4")
    for i, r in enumerate(rows):
        if r.random_over_kpath is not None:
            ax.annotate(f"{r.random_over_kpath:.1f}x", (i, max(r.random_ms or 0.0, r.kpath_ms or 0.0)),
                        ha="center", va="bottom", fontsize=7)
    ax.set_xticks(list(x), [_short(r.model) for r in rows], rotation=30, ha="right", fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("mean bottleneck (ms)")
    nodes = rows[0].nodes if rows else max(result.config.nodes)
    ax.set_title(f"Fig. 8: k-path vs random at {nodes} nodes (paper: {PAPER['random_over_kpath']:g}x)", fontsize=9)
    ax.legend(fontsize=8)
    return _save(plt, fig, path)


def _fig9(plt: Any, result: SimulationResult, path: Path) -> Path:
    rows = fig9_rows(result)
    fig, ax = plt.subplots(figsize=(6.0, 3.8))
    for model in result.config.models:
        pts = [(r.nodes, 100 * r.by_model[model]) for r in rows if model in r.by_model]
        if pts:
            ax.plot(*zip(*pts, strict=True), marker="o", linewidth=1, alpha=0.6, label=_short(model))
    mean = [(r.nodes, 100 * r.below_greedy) for r in rows if r.below_greedy is not None]
    if mean:
        ax.plot(*zip(*mean, strict=True), marker="s", color="black", linewidth=2.5, label="mean")
    ax.scatter([50], [100 * PAPER["below_greedy_at_50_nodes"]], marker="*", s=160, color="red", zorder=5,
               label="paper (50 nodes)")
    ax.axhline(0, color="grey", linewidth=0.8)
    ax.set_xlabel("nodes")
    ax.set_ylabel("% below greedy (1 - kpath/greedy)")
    ax.set_title("Fig. 9: k-path vs joint greedy", fontsize=9)
    ax.legend(fontsize=7, ncol=2)
    return _save(plt, fig, path)


def _fig10(plt: Any, result: SimulationResult, path: Path) -> Path:
    rows = [r for r in result.fig10 if r.ratio_theorem1 is not None]
    fig, ax = plt.subplots(figsize=(max(5.0, 1.0 * len(rows) + 2), 3.8))
    x = range(len(rows))
    ax.bar([i - 0.2 for i in x], [r.ratio_theorem1 or 0.0 for r in rows], width=0.4, label="k-path / Theorem 1",
           color="#9467bd")
    ax.bar([i + 0.2 for i in x], [r.ratio_opt or 0.0 for r in rows], width=0.4, label="k-path / optimum",
           color="#2ca02c")
    ax.axhline(PAPER["fig10_ratio_theorem1"], color="red", linestyle="--", linewidth=1,
               label=f"paper mean {PAPER['fig10_ratio_theorem1']}")
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_xticks(list(x), [_short(r.model) for r in rows], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("mean ratio")
    cfg = result.config
    ax.set_title(f"Fig. 10: {cfg.fig10_nodes} nodes, {cfg.fig10_memory_mb} MB, {cfg.fig10_trials} trials", fontsize=9)
    ax.legend(fontsize=8)
    return _save(plt, fig, path)


def _save(plt: Any, fig: Any, path: Path) -> Path:
    try:
        fig.tight_layout()
        fig.savefig(path, dpi=120)
    except OSError as e:
        raise InvalidInputError(f"cannot write the figure {path}: {e.strerror or e}; give a writable folder") from e
    finally:
        plt.close(fig)
    return path


def figure_folder(out_dir: str | Path) -> Path:
    """Create ``out_dir`` (and its parents) if missing and check that figures can be written there.

    Call it before a long simulation, so that a bad folder is named at once rather than after the run.

    Raises
    ------
    InvalidInputError
        When the folder cannot be created (a parent is a file, no permission) or is not writable.
    """
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as e:
        raise InvalidInputError(f"cannot write figures into the folder {out}: {e.strerror or e}; give a folder that "
                                "can be created and written") from e
    return out


def plot_partition_figures(result: SimulationResult, out_dir: str | Path) -> list[Path]:
    """Save Figs. 7-10 of the simulation as PNG files in ``out_dir`` (created if missing).

    Parameters
    ----------
    result
        What :func:`experiments.parthasarathy2022.run_simulation` returned.
    out_dir
        Folder for ``fig7_heatmaps.png``, ``fig8_random.png``, ``fig9_greedy.png`` and ``fig10_bound.png``.

    Returns
    -------
    list of Path
        The files written, in figure order.

    Raises
    ------
    InvalidInputError
        When ``out_dir`` cannot be created or a figure cannot be written there.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = figure_folder(out_dir)
    return [_fig7(plt, result, out / "fig7_heatmaps.png"), _fig8(plt, result, out / "fig8_random.png"),
            _fig9(plt, result, out / "fig9_greedy.png"), _fig10(plt, result, out / "fig10_bound.png")]
