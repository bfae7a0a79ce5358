"""Accuracy figures of the primitive performance models, like mulder2020 Figs. 4-6.

One PNG per platform: MdRAE bars per primitive (top) and per layout transformation (bottom), one bar colour per
model (Lin, NN1, NN2), on a log axis since Lin is an order of magnitude worse. An infinite MdRAE (the model gave
no prediction for most measured cells) cannot be a bar: it is drawn as an ``x`` at the top of the axis. The
transformation bars are the held-out-tensor protocol (tensors never seen in training); the paper's protocol (test
layer rows, whose tensors occur in training rows) is drawn over them as a black dash per model where it was scored.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from edgeplan.costmodels.evaluation import Evaluation

__all__ = ["mdrae_rows", "plot_mdrae_bars"]

_COLOURS = {"lin": "#7f7f7f", "nn1": "#1f77b4", "nn2": "#d62728"}


def mdrae_rows(results: Mapping[str, Evaluation]) -> list[tuple[str, dict[str, float]]]:
    """Per primitive, then per non-identity transformation: ``(column, {model: MdRAE})`` in the models' order.

    Parameters
    ----------
    results
        Evaluations keyed by model name (``lin``, ``nn1``, ``nn2``), on the same data and part.
    """
    from edgeplan.measure.primitive_data import is_identity_transform

    rows: list[tuple[str, dict[str, float]]] = []
    first = next(iter(results.values()))
    for name in first.primitive_mdrae:
        rows.append((name, {m: r.primitive_mdrae.get(name, math.nan) for m, r in results.items()}))
    for name in first.transform_mdrae:
        if not is_identity_transform(name):
            rows.append((name, {m: r.transform_mdrae.get(name, math.nan) for m, r in results.items()}))
    return rows


def plot_mdrae_bars(results: Mapping[str, Evaluation], path: str | Path, title: str = "") -> Path:
    """Save grouped MdRAE bars per primitive and per transformation for each model (mulder2020 Figs. 4-6).

    Parameters
    ----------
    results
        Evaluations keyed by model name, on the same data and part (e.g. ``{"lin": ..., "nn1": ..., "nn2": ...}``).
    path
        The PNG to write.
    title
        Figure title (e.g. the platform and the split).

    Returns
    -------
    pathlib.Path
        ``path``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.transforms import blended_transform_factory

    if not results:
        raise ValueError("no evaluation to plot")
    first = next(iter(results.values()))
    prims = list(first.primitive_mdrae)
    trans = [name for name, _ in mdrae_rows(results) if name in first.transform_mdrae]
    models = list(results)
    width = 0.8 / len(models)
    fig, (ax_p, ax_t) = plt.subplots(2, 1, figsize=(max(10.0, 0.22 * len(prims) + 2), 8.5),
                                     gridspec_kw={"height_ratios": [2, 1]})
    for axis, names, attr in ((ax_p, prims, "primitive_mdrae"), (ax_t, trans, "transform_mdrae")):
        for i, m in enumerate(models):
            values = [100 * getattr(results[m], attr).get(n, math.nan) for n in names]
            xs = [k + (i - (len(models) - 1) / 2) * width for k in range(len(names))]
            axis.bar(xs, [v if math.isfinite(v) else math.nan for v in values], width=width,
                     color=_COLOURS.get(m, None), label=m.upper())
            if axis is ax_t:
                paper = [100 * results[m].paper_transform_mdrae.get(n, math.nan) for n in names]
                axis.scatter(xs, [v if math.isfinite(v) and v > 0 else math.nan for v in paper], marker="_",
                             color="black", s=60, zorder=3)
            unpredicted = [x for x, v in zip(xs, values, strict=True) if v == math.inf]
            if unpredicted:
                axis.scatter(unpredicted, [0.97] * len(unpredicted), marker="x", color=_COLOURS.get(m, "black"),
                             transform=blended_transform_factory(axis.transData, axis.transAxes))
        axis.set_xticks(range(len(names)))
        axis.set_xticklabels(names, rotation=90, fontsize=6 if axis is ax_p else 8)
        axis.set_yscale("log")
        axis.set_ylabel("MdRAE (%)")
        axis.axhline(2.0 if axis is ax_p else 1.0, color="black", linestyle=":", linewidth=1)
        axis.grid(axis="y", which="both", alpha=0.3)
        axis.set_xlim(-0.6, len(names) - 0.4)
    ax_p.legend(fontsize=8, ncol=len(models), loc="upper left")
    ax_p.set_title(f"{title}: primitives (dotted: 2 % target; x: no prediction)" if title
                  else "primitives (dotted: 2 %; x: no prediction)", fontsize=9)
    ax_t.set_title("layout transformations, bars: held-out tensors; black dashes: the paper's protocol "
                   "(dotted: 1 % target)", fontsize=9)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
