"""Intel -> AMD transfer: two methods tried and not adopted (issue 5 diagnostic, no target).

``probe``: a closed-form correction of the source NN2's last layer. ``log(AMD / source prediction)`` is modelled as a
per-primitive offset (ridge towards a common one, penalty ``kappa``) plus one linear function of the NN2's last hidden
layer shared by every primitive (ridge, penalty ``lam``), both penalties chosen by 5-fold CV on the drawn rows
(median relative error). Added to the last layer's weights and biases it is an exact edit, so the result is an
ordinary NN2. ``probe+finetune`` fine-tunes that (lr x0.1, as ``finetune``).

``--ensembles``: also the geometric means of ``finetune``, ``factor-finetune`` and ``probe+finetune`` (pairs and all
three) on the same drawn rows.

Scores as ``bench_transfer.py``: MdRAE on AMD's test part / mean selection increase over the six networks. Reads
../shared/data/mulder2021 and the Intel NN2 of ``make bench-costmodels`` (out/costmodels/intel-nn2). Pin it to one
core and use one thread: it measures accuracy, not time.
"""

from __future__ import annotations

import argparse
import copy
import itertools
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from bench_transfer import DATA, Scorer, load_source

from edgeplan.costmodels import draw_samples, load_primitive_csv, transfer
from edgeplan.decisions.select import load_formats

GRID = [(lam, kappa) for lam in (0.01, 0.1, 1, 10, 100) for kappa in (0.1, 1, 10, 100)]


class Probe:
    """The source NN2's last hidden layer as features, and the correction fitted on target rows."""

    def __init__(self, source: Any, target: Any) -> None:
        self.source, self.target = source, target
        est = source.primitives
        self.columns = [target.primitives.index(n) if n in target.primitives else -1 for n in est.output_names_]

    def features(self, x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """Each ensemble member's last hidden layer, divided by the member count (the ensemble averages outputs)."""
        est = self.source.primitives
        xs = torch.as_tensor(est._scale_x(x), dtype=torch.float32).unsqueeze(0)
        out = []
        with torch.no_grad():
            for net in est.nets_:
                h = xs
                for w, b in list(zip(net.weights, net.biases, strict=True))[:-1]:
                    h = torch.relu(torch.baddbmm(b, h, w))
                out.append(h[0].numpy().astype(np.float64) / len(est.nets_))
        return np.hstack(out)

    def times(self, rows: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        """The target's times of ``rows`` in the source's output order (NaN where the target has no column)."""
        return np.stack([self.target.primitive_ns[rows, c] if c >= 0 else np.full(len(rows), np.nan)
                         for c in self.columns], axis=1)

    def fit(self, rows: npt.NDArray[np.int64], lam: float, kappa: float
            ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """Per-primitive offsets and the shared hidden-layer weights, by ridge regression on the defined cells."""
        x = self.target.features[rows]
        r = np.log(self.times(rows)) - np.log(self.source.predict_primitives(x))
        i, j = np.nonzero(np.isfinite(r))
        h = self.features(x)
        n_out, n_hidden = r.shape[1], h.shape[1]
        design = np.zeros((len(i), 1 + n_out + n_hidden))
        design[:, 0] = 1
        design[np.arange(len(i)), 1 + j] = 1
        design[:, 1 + n_out:] = h[i]
        penalty = np.diag(np.r_[0.0, np.full(n_out, kappa), np.full(n_hidden, lam)]) + 1e-9 * np.eye(design.shape[1])
        coef = np.linalg.solve(design.T @ design + penalty, design.T @ r[i, j])
        return coef[0] + coef[1:1 + n_out], coef[1 + n_out:]

    def choose(self, rows: npt.NDArray[np.int64], folds: int = 5, seed: int = 0) -> tuple[float, float]:
        """The (lam, kappa) of :data:`GRID` with the lowest CV median relative error."""
        perm = np.random.default_rng(seed).permutation(len(rows))
        best: tuple[float, float, float] | None = None
        for lam, kappa in GRID:
            errors = []
            for part in np.array_split(perm, folds):
                a, u = self.fit(rows[np.setdiff1d(perm, part)], lam, kappa)
                held = rows[part]
                x = self.target.features[held]
                z = np.log(self.source.predict_primitives(x)) + a[None, :] + (self.features(x) @ u)[:, None]
                e = np.abs(np.exp(z) / self.times(held) - 1)
                errors.append(e[np.isfinite(e)])
            score = float(np.median(np.concatenate(errors)))
            if best is None or score < best[0]:
                best = (score, lam, kappa)
        assert best is not None
        return best[1], best[2]

    def model(self, a: npt.NDArray[np.float64], u: npt.NDArray[np.float64]) -> Any:
        """A copy of the source with the correction folded into every member's last layer."""
        moved = copy.deepcopy(self.source)
        est = moved.primitives
        width = u.size // len(est.nets_)
        for k, (cols, net) in enumerate(zip(est.groups_, est.nets_, strict=True)):
            scale = torch.as_tensor(est.y_std_[cols], dtype=torch.float32)
            shared = torch.as_tensor(u[k * width:(k + 1) * width], dtype=torch.float32)
            with torch.no_grad():
                net.weights[-1][0] += shared[:, None] / scale
                net.biases[-1][0, 0] += torch.as_tensor(a[cols], dtype=torch.float32) / scale
        return moved


class GeometricMean:
    """Several models' predictions combined by their geometric mean (enough of a model for the scorer)."""

    def __init__(self, models: list[Any]) -> None:
        self.models = models
        first = models[0]
        self.primitive_names, self.transform_names = first.primitive_names, first.transform_names
        self.info, self.kind, self.transforms_paper = first.info, "geometric mean", first.transforms_paper

    def predict_primitives(self, x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        return np.exp(np.mean([np.log(m.predict_primitives(x)) for m in self.models], axis=0))

    def predict_transforms(self, x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        return np.exp(np.mean([np.log(m.predict_transforms(x)) for m in self.models], axis=0))


def score_into(score: Scorer, models: dict[str, Any], results: dict[str, list[tuple[float, float]]]) -> str:
    """Score each model, append its (MdRAE %, increase %) to ``results[name]``; the line part printing them."""
    parts = []
    for name, model in models.items():
        s = score(model)
        results.setdefault(name, []).append((s["mdrae_pct"], s["increase_pct"]))
        parts.append(f"{name} {s['mdrae_pct']:.2f} / {s['increase_pct']:.2f}")
    return ", ".join(parts)


def print_medians(results: dict[str, list[tuple[float, float]]]) -> None:
    """Per model, the median MdRAE and selection increase over the seeds."""
    for name, values in results.items():
        print(f"{name}: median MdRAE {statistics.median(v[0] for v in values):.2f} %, "
              f"increase {statistics.median(v[1] for v in values):.2f} %")


def transfer_arguments(parser: argparse.ArgumentParser, repeats: int = 5) -> None:
    """The options every Intel -> AMD diagnostic takes: ``--fraction``, ``--repeats`` and ``--source``."""
    parser.add_argument("--fraction", type=float, default=0.01)
    parser.add_argument("--repeats", type=int, default=repeats, help="seeds 0 .. repeats-1")
    parser.add_argument("--source", type=Path, default=Path("out/costmodels/intel-nn2"))


def load_setup(source_dir: Path) -> tuple[Any, Any, Scorer] | None:
    """The Intel NN2 in ``source_dir``, AMD's table and its scorer, with torch on one thread; None (after saying
    so) when ../shared/data/mulder2021 is absent."""
    if not (DATA / "amd.csv").is_file():
        print(f"skipped: {DATA} is absent")
        return None
    torch.set_num_threads(1)
    amd = load_primitive_csv(DATA / "amd.csv")
    return load_source(source_dir), amd, Scorer(amd, load_formats(DATA / "formats.csv"), 0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    transfer_arguments(parser)
    parser.add_argument("--ensembles", action="store_true")
    args = parser.parse_args()
    loaded = load_setup(args.source)
    if loaded is None:
        return 0
    source, amd, score = loaded
    probe = Probe(source, amd)
    print(f"Intel -> AMD, {100 * args.fraction:g} % of AMD's training part; MdRAE % / mean selection increase %")
    for seed in range(args.repeats):
        started = time.monotonic()
        rows = np.asarray(draw_samples(amd, args.fraction, seed, 0).rows)
        lam, kappa = probe.choose(rows)
        corrected = probe.model(*probe.fit(rows, lam, kappa))
        models = {"probe": corrected,
                  "probe+finetune": transfer(corrected, amd, fraction=args.fraction, seed=seed, method="finetune",
                                             split_seed=0, threads=1)}
        if args.ensembles:
            for method in ("finetune", "factor-finetune"):
                models[method] = transfer(source, amd, fraction=args.fraction, seed=seed, method=method, split_seed=0,
                                          threads=1)
            members = ("finetune", "factor-finetune", "probe+finetune")
            for k in (2, 3):
                for combo in itertools.combinations(members, k):
                    models[" x ".join(combo)] = GeometricMean([models[c] for c in combo])
        scored = score_into(score, models, {})
        print(f"seed {seed} ({len(rows)} rows, lam {lam:g}, kappa {kappa:g}): {scored} "
              f"({time.monotonic() - started:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
