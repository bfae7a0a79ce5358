"""Sample designs: which rows of a table of layer configurations to measure when only a few can be."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from edgeplan.errors import InvalidInputError

IntArray = npt.NDArray[np.int64]

__all__ = ["design_rows"]


def design_rows(features: npt.ArrayLike, candidates: npt.ArrayLike, n: int, seed: int,
                cells: npt.ArrayLike | None = None) -> IntArray:
    """``n`` of the ``candidates`` rows chosen to cover the layer space: the ``kmeans`` sample design.

    mulder2020 draws its target samples uniformly and leaves choosing them to future work (§6). A uniform draw of a
    few dozen layers leaves some filter shapes ``(f, s)`` (and with them the primitives that apply to those only,
    such as Winograd 3x3) one layer or none, and may spend several layers on nearly the same size. Here:

    1. the distinct layer sizes ``(c, k, im)`` of the candidates are clustered on their standardized logarithms
       into ``min(n, sizes)`` clusters (k-means, seeded, each size weighted by how many candidate rows it has), and
       the size nearest each cluster's centre is chosen (a representative spread of sizes, where a farthest-point
       design would spend its few samples on the extremes);
    2. in a seeded order, each chosen size takes, among its candidate rows, the filter shape used least so far
       relative to its weight (ties broken by the seed), which balances the shapes: equally, or with ``cells`` in
       proportion to the mean number of primitives a row of the shape times (a strided shape feeds a dozen
       general primitives, a stride-1 3x3 also the Winograd ones, which no other shape informs);
    3. while fewer than ``n`` rows are chosen (``n`` above the number of sizes), the same is repeated on the rows
       not yet chosen.

    With the shapes weighted by their cells, a model transferred to a new platform from a few dozen rows chosen
    this way predicts it more closely than one transferred from as many uniform draws, mostly on the Winograd
    primitives, which only the stride-1 3x3 rows inform.

    Parameters
    ----------
    features
        ``(rows, 5)`` layer features ``c, k, im, f, s`` (:data:`LAYER_FEATURES`).
    candidates
        Row indices to choose from (e.g. a split's training part); at least one.
    n
        Rows to choose, at least 1; at most ``len(candidates)``.
    seed
        Seed of the k-means initialisation, the order in which sizes claim shapes, and the ties.
    cells
        Optional, per row of ``features``: how many primitives apply to the layer (the cells it gives); weighs the
        shapes. Default: every shape the same weight.

    Returns
    -------
    numpy.ndarray
        ``n`` distinct row indices, sorted.

    Raises
    ------
    InvalidInputError
        No candidates, ``n`` outside ``[1, len(candidates)]``, or a non-positive size.
    """
    from sklearn.cluster import KMeans

    x = np.asarray(features, dtype=np.float64)
    left = np.unique(np.asarray(candidates, dtype=np.int64))
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise InvalidInputError(f"seed {seed!r}: use a non-negative integer (0, 1, 2, ...)")
    if len(left) == 0 or isinstance(n, bool) or not 1 <= int(n) <= len(left):
        raise InvalidInputError(f"cannot choose {n!r} rows out of {len(left)} candidate layer(s); choose between 1 and "
                                f"the number of candidates")
    if (x[left][:, :3] <= 0).any():
        raise InvalidInputError("layer sizes (c, k, im) must be positive to design a sample over their logarithms")
    rng = np.random.default_rng([seed, 7])
    chosen_rows: list[int] = []
    shapes = {tuple(s) for s in x[left][:, 3:]}
    used = dict.fromkeys(shapes, 0)
    tie = {s: rng.random() for s in sorted(shapes)}
    weight = dict.fromkeys(shapes, 1.0)
    if cells is not None:
        per_row = np.asarray(cells, dtype=np.float64)
        for shape in shapes:
            rows_of = left[(x[left][:, 3:] == shape).all(axis=1)]
            weight[shape] = max(float(per_row[rows_of].mean()), 1e-9)
    while len(chosen_rows) < n:
        sizes, inverse = np.unique(x[left][:, :3], axis=0, return_inverse=True)
        inverse = inverse.ravel()
        logs = np.log(sizes)
        spread = logs.std(axis=0)
        z = (logs - logs.mean(axis=0)) / np.where(spread > 0, spread, 1.0)
        k = min(int(n) - len(chosen_rows), len(sizes))
        weights = np.bincount(inverse, minlength=len(sizes)).astype(np.float64)
        km = KMeans(n_clusters=k, n_init=4, random_state=seed).fit(z, sample_weight=weights)
        picked: list[int] = []
        for centre in km.cluster_centers_:
            order = np.argsort(((z - centre) ** 2).sum(axis=1), kind="stable")
            picked.append(int(next(i for i in order if i not in picked)))
        for i in rng.permutation(len(picked)):
            own = left[inverse == picked[i]]
            best = min(own, key=lambda r: ((used[tuple(x[r, 3:])] + 1) / weight[tuple(x[r, 3:])],
                                           tie[tuple(x[r, 3:])]))
            used[tuple(x[best, 3:])] += 1
            chosen_rows.append(int(best))
        left = np.setdiff1d(left, chosen_rows)
    return np.sort(np.asarray(chosen_rows, dtype=np.int64))
