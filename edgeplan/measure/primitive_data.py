"""Profiled convolution-primitive timings in the CSV format of mulder2021, and their deterministic split.

The format (one row per conv layer):

- ``c, k, im, f, s``: input channels, kernels (output channels), square input size, square kernel size, stride;
- nine ``X-to-Y`` columns, X and Y in ``chw``, ``hcw``, ``hwc``: the data-layout transformation time of a
  ``(c, im)`` tensor (it depends on ``c`` and ``im`` only);
- every other column: one primitive's execution time on that layer;
- times in nanoseconds; an empty cell means *undefined* (the primitive does not apply to that layer).

The loader accepts a file without some transformation or primitive columns, and drops a column that is empty in
every row (it is listed in :attr:`PrimitiveDataset.dropped`). It refuses a file without the five shape columns, a
non-numeric cell or a time that is not positive, naming the row and column.

The split is 80/10/10 (train/validation/test), drawn by a seed over the layer shapes sorted by ``(c, k, im, f, s)``:
it does not depend on the order of the rows in the file, so the Intel and AMD files, which profile the same layers,
split alike and a model fitted on one platform's training part can be tested on the other's test part.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from edgeplan.errors import InvalidInputError

__all__ = [
    "LAYER_FEATURES",
    "LAYOUTS",
    "SPLIT_FRACTIONS",
    "TRANSFORM_COLUMNS",
    "TRANSFORM_FEATURES",
    "PrimitiveDataset",
    "Split",
    "TransformDataset",
    "is_identity_transform",
    "load_primitive_csv",
    "split_indices",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

LAYER_FEATURES: tuple[str, ...] = ("c", "k", "im", "f", "s")
"""The shape of a conv layer, in the order every model takes it."""

TRANSFORM_FEATURES: tuple[str, ...] = ("c", "im")
"""What a data-layout transformation's time depends on."""

LAYOUTS: tuple[str, ...] = ("chw", "hcw", "hwc")
TRANSFORM_COLUMNS: tuple[str, ...] = tuple(f"{a}-to-{b}" for a in LAYOUTS for b in LAYOUTS)

SPLIT_FRACTIONS: tuple[float, float, float] = (0.8, 0.1, 0.1)


def is_identity_transform(name: str) -> bool:
    """True for ``X-to-X`` (a transformation that a runtime skips; mulder2020 Fig. 6 leaves it out)."""
    a, _, b = name.partition("-to-")
    return a == b


@dataclass(frozen=True)
class TransformDataset:
    """Data-layout transformation times, one row per distinct ``(c, im)``.

    Attributes
    ----------
    features
        ``(m, 2)`` array of ``c, im``.
    names
        The transformation columns present, in :data:`TRANSFORM_COLUMNS` order.
    times_ns
        ``(m, len(names))``; NaN where undefined. Where a file repeats a ``(c, im)`` with different times, the
        median of the repeats.
    """

    features: FloatArray
    names: tuple[str, ...]
    times_ns: FloatArray

    def __len__(self) -> int:
        return int(self.features.shape[0])

    def subset(self, rows: IntArray) -> TransformDataset:
        """The rows ``rows`` (in that order)."""
        return TransformDataset(self.features[rows], self.names, self.times_ns[rows])

    def rows_of(self, tensors: FloatArray) -> IntArray:
        """The row of each ``(c, im)`` of ``tensors`` (``(m, 2)``) in this table; every one must be in it.

        Raises
        ------
        InvalidInputError
            A tensor is not in the table (the message names it).
        """
        index = {(float(c), float(im)): i for i, (c, im) in enumerate(self.features)}
        try:
            return np.asarray([index[(float(c), float(im))] for c, im in tensors], dtype=np.int64)
        except KeyError as e:
            raise InvalidInputError(f"tensor (c, im) = {e.args[0]} is not in the transformation table") from None


@dataclass(frozen=True)
class PrimitiveDataset:
    """A profiled table of conv layers and the times of primitives and layout transformations on them.

    Attributes
    ----------
    features
        ``(n, 5)`` array of ``c, k, im, f, s`` (:data:`LAYER_FEATURES`).
    primitives
        Primitive column names, in file order.
    primitive_ns
        ``(n, len(primitives))`` times in ns; NaN where the primitive does not apply.
    transforms
        Transformation column names present, in :data:`TRANSFORM_COLUMNS` order.
    transform_ns
        ``(n, len(transforms))`` times in ns (NaN where undefined).
    source
        Where the table came from (a path), for reports.
    dropped
        Columns that were empty in every row and so left out.
    """

    features: FloatArray
    primitives: tuple[str, ...]
    primitive_ns: FloatArray
    transforms: tuple[str, ...]
    transform_ns: FloatArray
    source: str = ""
    dropped: tuple[str, ...] = field(default=())

    def __len__(self) -> int:
        return int(self.features.shape[0])

    def subset(self, rows: IntArray) -> PrimitiveDataset:
        """The rows ``rows`` (in that order), same columns."""
        return PrimitiveDataset(self.features[rows], self.primitives, self.primitive_ns[rows], self.transforms,
                                self.transform_ns[rows], self.source, self.dropped)

    def transform_table(self) -> TransformDataset:
        """The transformation times with one row per distinct ``(c, im)``, sorted by ``(c, im)``."""
        ci = self.features[:, [0, 2]]
        keys, inverse = np.unique(ci, axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        times = np.full((len(keys), len(self.transforms)), np.nan)
        for j in range(len(keys)):
            block = self.transform_ns[inverse == j]
            defined = ~np.isnan(block)
            for t in range(block.shape[1]):
                if defined[:, t].any():
                    times[j, t] = float(np.median(block[defined[:, t], t]))
        return TransformDataset(keys.astype(np.float64), self.transforms, times)


@dataclass(frozen=True)
class Split:
    """Row indices of the training, validation and test parts."""

    train: IntArray
    val: IntArray
    test: IntArray

    def part(self, name: str) -> IntArray:
        """``"train"``, ``"val"``, ``"test"`` or ``"all"`` (every row, sorted)."""
        if name == "all":
            return np.sort(np.concatenate([self.train, self.val, self.test]))
        if name not in ("train", "val", "test"):
            raise InvalidInputError(f"unknown split part {name!r}; use train, val, test or all")
        rows: IntArray = getattr(self, name)
        return rows


def split_indices(features: FloatArray, seed: int = 0,
                  fractions: tuple[float, float, float] = SPLIT_FRACTIONS) -> Split:
    """Split rows 80/10/10 (by default) into training, validation and test parts, deterministically by ``seed``.

    Parameters
    ----------
    features
        ``(n, d)`` array; rows are ordered by their values (lexicographically) before the seeded shuffle, so the
        split of a layer does not depend on where the file lists it.
    seed
        The split seed (``--split-seed``), a non-negative integer.
    fractions
        Training and validation fractions (the test part takes the rest); sizes are rounded down, and the test
        part gets what is left.

    Returns
    -------
    Split
        Disjoint index arrays covering every row; each part sorted.

    Raises
    ------
    InvalidInputError
        ``seed`` is not a non-negative integer, or ``fractions`` do not sum to 1.
    """
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise InvalidInputError(f"split seed {seed!r}: use a non-negative integer (0, 1, 2, ...)")
    n = int(features.shape[0])
    if not math.isclose(sum(fractions), 1.0) or min(fractions) < 0:
        raise InvalidInputError(f"split fractions {fractions} must be non-negative and sum to 1")
    order = np.lexsort(features.T[::-1]) if n else np.zeros(0, dtype=np.int64)
    shuffled = order[np.random.default_rng(seed).permutation(n)]
    n_train = math.floor(fractions[0] * n)
    n_val = math.floor(fractions[1] * n)
    return Split(np.sort(shuffled[:n_train]).astype(np.int64), np.sort(shuffled[n_train:n_train + n_val]).astype(
        np.int64), np.sort(shuffled[n_train + n_val:]).astype(np.int64))


def _parse(cell: str, row: int, column: str, path: Path) -> float:
    text = cell.strip()
    if not text:
        return math.nan
    try:
        value = float(text)
    except ValueError:
        raise InvalidInputError(f"{path}: row {row}, column {column!r}: {text!r} is not a number; "
                                f"leave the cell empty where the value is undefined") from None
    if not math.isfinite(value):
        raise InvalidInputError(f"{path}: row {row}, column {column!r}: {text!r} is not a finite number")
    return value


def _read_rows(path: Path) -> tuple[list[str], list[list[str]]]:
    if not path.is_file():
        raise InvalidInputError(f"{path}: no such file; give the path of a CSV in the mulder2021 format "
                                f"(columns c,k,im,f,s, X-to-Y transformations, one column per primitive)")
    try:
        with path.open(newline="", encoding="utf-8-sig") as fh:  # -sig: a spreadsheet's byte-order mark
            reader = csv.reader(fh)
            header = next(reader, None)
            rows = [r for r in reader if any(cell.strip() for cell in r)]
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise InvalidInputError(f"{path}: cannot read it as CSV ({e})") from e
    if header is None:
        raise InvalidInputError(f"{path}: the file is empty; it needs a header with columns c,k,im,f,s")
    return [h.strip() for h in header], rows


def load_primitive_csv(path: str | Path) -> PrimitiveDataset:
    """Read a table of primitive timings in the mulder2021 CSV format.

    Parameters
    ----------
    path
        The CSV file.

    Returns
    -------
    PrimitiveDataset
        Shapes, primitive and transformation times (NaN where a cell is empty); columns empty in every row are
        dropped and named in ``dropped``.

    Raises
    ------
    InvalidInputError
        The file is missing or unreadable, lacks one of ``c, k, im, f, s``, repeats a column, has a row of the
        wrong length, a non-numeric cell, a missing or non-positive shape value, or a non-positive time.
    """
    p = Path(path)
    header, rows = _read_rows(p)
    missing = [f for f in LAYER_FEATURES if f not in header]
    if missing:
        raise InvalidInputError(f"{p}: no column(s) {', '.join(missing)}; a primitive timing table needs the "
                                f"layer shape columns {', '.join(LAYER_FEATURES)}")
    duplicated = sorted({h for h in header if header.count(h) > 1})
    if duplicated:
        raise InvalidInputError(f"{p}: column(s) {', '.join(duplicated)} appear more than once")
    if not rows:
        raise InvalidInputError(f"{p}: no data rows below the header")
    values = np.empty((len(rows), len(header)))
    for i, row in enumerate(rows, start=2):
        if len(row) != len(header):
            raise InvalidInputError(f"{p}: row {i} has {len(row)} cells, the header {len(header)}")
        values[i - 2] = [_parse(cell, i, col, p) for cell, col in zip(row, header, strict=True)]
    col = {h: j for j, h in enumerate(header)}
    features = values[:, [col[f] for f in LAYER_FEATURES]]
    bad = np.argwhere(~(features > 0))
    if len(bad):
        r, f = bad[0]
        raise InvalidInputError(f"{p}: row {r + 2}, column {LAYER_FEATURES[f]!r}: a layer shape value must be a "
                                f"positive number")
    fractional = np.argwhere(features != np.round(features))
    if len(fractional):
        r, f = fractional[0]
        raise InvalidInputError(f"{p}: row {r + 2}, column {LAYER_FEATURES[f]!r}: {features[r, f]:g} is not a "
                                "whole number (channels, sizes, kernel and stride count)")
    time_columns = [h for h in header if h not in LAYER_FEATURES]
    dropped = tuple(h for h in time_columns if np.isnan(values[:, col[h]]).all())
    kept = [h for h in time_columns if h not in dropped]
    for h in kept:
        v = values[:, col[h]]
        nonpos = np.flatnonzero(v <= 0)
        if len(nonpos):
            raise InvalidInputError(f"{p}: row {nonpos[0] + 2}, column {h!r}: time {v[nonpos[0]]:g} ns is not "
                                    f"positive; leave the cell empty where the value is undefined")
    transforms = tuple(t for t in TRANSFORM_COLUMNS if t in kept)
    primitives = tuple(h for h in kept if h not in TRANSFORM_COLUMNS)
    return PrimitiveDataset(
        features=features,
        primitives=primitives,
        primitive_ns=values[:, [col[h] for h in primitives]].reshape(len(rows), len(primitives)),
        transforms=transforms,
        transform_ns=values[:, [col[h] for h in transforms]].reshape(len(rows), len(transforms)),
        source=str(p),
        dropped=dropped,
    )
