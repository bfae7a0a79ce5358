"""The Winograd family: minimal-filtering convolutions ``F(m, r)`` (1-D) and ``F(m x m, r x r)`` (2-D).

``F(m, r)`` computes ``m`` outputs of an ``r``-tap correlation from a tile of ``a = m + r - 1`` inputs with ``a``
multiplications: ``y = A^T [(G g) * (B^T d)]``. The matrices come from Cook-Toom interpolation at the points
``0, 1, -1, 2, -2, 1/2, -1/2, ...`` and infinity (Lavin & Gray 2016; :func:`winograd_matrices`), computed exactly
with fractions.

* 2-D ``winograd-MxM-RxR`` (hwc -> hwc): input tiles ``a x a`` with stride ``m`` (``Tensor.unfold``), input transform
  ``B^T d B`` as two small matrix products, then ``a^2`` batched GEMMs ``(tiles, c) x (c, k)`` against the
  prepared kernels ``U = G g G^T``, then the output transform ``A^T M A`` and the untiling.
* 1-D ``winograd-M-R`` (hwc -> hwc): ``F(m, r)`` along image rows (the width axis) for each of the ``r`` kernel
  rows; the sum over kernel rows is folded into the batched GEMMs (``r`` accumulating ``bmm`` calls on row-shifted
  views of the transformed input, no copy). ``winograd-M-R-col`` does the same along the columns (height axis).

All need ``f = r`` and ``s = 1``; any padding (the input is zero-padded up to whole tiles). Winograd trades
multiplications for numerical error that grows with the tile size: :attr:`PrimitiveInfo.rel_tolerance` states
it per variant. The kernel transforms are computed in float64 in ``prepare``.
"""

from __future__ import annotations

from fractions import Fraction

import torch

from edgeplan.errors import InvalidInputError
from edgeplan.primitives._ops import pad_hwc
from edgeplan.primitives.base import Prepared, Primitive, PrimitiveInfo
from edgeplan.primitives.spec import ConvSpec, Layout, Rule

__all__ = ["INTERPOLATION_POINTS", "Winograd1D", "Winograd2D", "variants", "winograd_matrices"]

#: Finite interpolation points, taken in this order (infinity is always the last point).
INTERPOLATION_POINTS: tuple[Fraction, ...] = tuple(
    Fraction(p) for p in (0, 1, -1, 2, -2, Fraction(1, 2), Fraction(-1, 2), 3, -3, Fraction(1, 3), Fraction(-1, 3)))


def _inverse(matrix: list[list[Fraction]]) -> list[list[Fraction]]:
    """Exact inverse by Gauss-Jordan elimination (the Vandermonde-like matrices here are always invertible)."""
    n = len(matrix)
    aug = [[*row, *(Fraction(int(i == j)) for j in range(n))] for i, row in enumerate(matrix)]
    for col in range(n):
        pivot = next(r for r in range(col, n) if aug[r][col] != 0)
        aug[col], aug[pivot] = aug[pivot], aug[col]
        inv = 1 / aug[col][col]
        aug[col] = [v * inv for v in aug[col]]
        for r in range(n):
            if r != col and aug[r][col] != 0:
                factor = aug[r][col]
                aug[r] = [v - factor * p for v, p in zip(aug[r], aug[col], strict=True)]
    return [row[n:] for row in aug]


def _evaluation(points: tuple[Fraction, ...], degree: int) -> list[list[Fraction]]:
    """Rows ``[p^0, ..., p^(degree-1)]`` per finite point, then ``[0, ..., 0, 1]`` for infinity."""
    rows = [[p**j for j in range(degree)] for p in points]
    rows.append([Fraction(int(j == degree - 1)) for j in range(degree)])
    return rows


def winograd_matrices(m: int, r: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The matrices ``A^T`` (m x a), ``G`` (a x r) and ``B^T`` (a x a) of ``F(m, r)``, in float64.

    With them, ``y = A^T [(G g) * (B^T d)]`` is the correlation ``y_i = sum_j g_j d_(i + j)`` of a tile ``d`` of
    ``a = m + r - 1`` inputs with an ``r``-tap kernel ``g``.

    Parameters
    ----------
    m
        Outputs per tile.
    r
        Kernel taps.

    Returns
    -------
    tuple of torch.Tensor
        ``(AT, G, BT)``.

    Raises
    ------
    InvalidInputError
        If ``m`` or ``r`` is below 1 or the tile needs more points than :data:`INTERPOLATION_POINTS` holds.
    """
    a = m + r - 1
    if m < 1 or r < 1 or a - 1 > len(INTERPOLATION_POINTS):
        raise InvalidInputError(f"F({m}, {r}) is not supported: need m, r >= 1 and m + r - 2 <= "
                                f"{len(INTERPOLATION_POINTS)} finite interpolation points")
    points = INTERPOLATION_POINTS[: a - 1]
    # Linear convolution s = g * h (length a) is interpolated from its values at the points:
    # s = C [(G g) * (A h)] with C = V^-1; the correlation is its transpose: y = A^T [(G g) * (C^T d)].
    c = _inverse(_evaluation(points, a))
    a_mat = _evaluation(points, m)
    g_mat = _evaluation(points, r)
    return _tensor(a_mat).t().contiguous(), _tensor(g_mat), _tensor(c).t().contiguous()


def _tensor(rows: list[list[Fraction]]) -> torch.Tensor:
    return torch.tensor([[float(v) for v in row] for row in rows], dtype=torch.float64)


class _Winograd(Primitive):
    """Shared set-up of the Winograd variants: the ``F(m, r)`` matrices."""

    def __init__(self, info: PrimitiveInfo, m: int, r: int) -> None:
        super().__init__(info)
        self.m, self.r = m, r
        self.alpha = m + r - 1
        self._at64, self._g64, self._bt64 = winograd_matrices(m, r)
        self._cache: dict[tuple[torch.dtype, torch.device], tuple[torch.Tensor, torch.Tensor]] = {}

    def _transforms(self, dtype: torch.dtype, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """``(A^T, B^T)`` in ``dtype`` on ``device``, converted once per (dtype, device) (no copy in the timed
        step)."""
        key = (dtype, device)
        if key not in self._cache:
            self._cache[key] = (self._at64.to(device=device, dtype=dtype),
                                self._bt64.to(device=device, dtype=dtype))
        return self._cache[key]

    def _g(self, device: torch.device) -> torch.Tensor:
        """``G`` in float64 on ``device`` (the kernel transform, done in :meth:`prepare`)."""
        return self._g64.to(device)

    def _tiles(self, out: int) -> int:
        return -(-out // self.m)


class Winograd2D(_Winograd):
    """``winograd-MxM-RxR``: 2-D ``F(m x m, r x r)`` on channels-last input."""

    def _prepare(self, weight: torch.Tensor, spec: ConvSpec) -> tuple[torch.Tensor, torch.Tensor | None]:
        g = self._g(weight.device)
        u = torch.einsum("ai,kcij,bj->abck", g, weight.double(), g)  # G g G^T per (k, c)
        return u.reshape(self.alpha * self.alpha, spec.c, spec.k).to(weight.dtype).contiguous(), None

    def _execute(self, x: torch.Tensor, prepared: Prepared) -> torch.Tensor:
        sp, u = prepared.spec, prepared.weight
        m, a = self.m, self.alpha
        at, bt = self._transforms(x.dtype, x.device)
        t = self._tiles(sp.out)
        extra = t * m + self.r - 1 - sp.padded
        xp = pad_hwc(x, sp.pad, extra, extra)
        tiles = xp.unfold(0, a, m).unfold(1, a, m)  # (t, t, c, a, a)
        d = tiles.permute(3, 4, 0, 1, 2).reshape(a, a * t * t * sp.c)
        v = torch.matmul(bt, torch.mm(bt, d).view(a, a, t * t * sp.c))  # B^T d B, (a, a, tiles c)
        mprod = torch.bmm(v.view(a * a, t * t, sp.c), u)  # (a a, tiles, k)
        y = torch.matmul(at, torch.mm(at, mprod.view(a, -1)).view(m, a, t * t * sp.k))  # A^T M A, (m, m, tiles k)
        y = y.view(m, m, t, t, sp.k).permute(2, 0, 3, 1, 4).reshape(t * m, t * m, sp.k)
        return y[: sp.out, : sp.out].contiguous()


class Winograd1D(_Winograd):
    """``winograd-M-R`` (along rows) or ``winograd-M-R-col`` (along columns): 1-D ``F(m, r)`` per kernel row.

    Parameters
    ----------
    info, m, r
        The declaration and ``F(m, r)``.
    along_columns
        Tile the height axis instead of the width axis.
    """

    def __init__(self, info: PrimitiveInfo, m: int, r: int, along_columns: bool) -> None:
        super().__init__(info, m, r)
        self.along_columns = along_columns

    def _prepare(self, weight: torch.Tensor, spec: ConvSpec) -> tuple[torch.Tensor, torch.Tensor | None]:
        w = weight.double()
        if self.along_columns:
            w = w.transpose(2, 3)
        u = torch.einsum("aj,kchj->hack", self._g(w.device), w)  # per kernel row h: G g_h, (f, a, c, k)
        return u.to(weight.dtype).contiguous(), None

    def _execute(self, x: torch.Tensor, prepared: Prepared) -> torch.Tensor:
        img = x.transpose(0, 1) if self.along_columns else x
        y = self._rows(img, prepared)
        return (y.transpose(0, 1) if self.along_columns else y).contiguous()

    def _rows(self, img: torch.Tensor, prepared: Prepared) -> torch.Tensor:
        """Correlate along the second axis of an ``(h, w, c)`` image; returns an ``(out, out, k)`` view."""
        sp, u = prepared.spec, prepared.weight
        m, a, o = self.m, self.alpha, sp.out
        at, bt = self._transforms(img.dtype, img.device)
        t = self._tiles(o)
        hp = sp.padded
        xp = pad_hwc(img, sp.pad, 0, t * m + self.r - 1 - hp)
        d = xp.unfold(1, a, m).permute(3, 0, 1, 2).reshape(a, hp * t * sp.c)  # tiles (a, rows, t, c)
        v = torch.mm(bt, d).view(a, hp, t * sp.c)
        mprod = torch.bmm(v[:, 0:o].reshape(a, o * t, sp.c), u[0])
        for kh in range(1, sp.f):
            mprod.baddbmm_(v[:, kh:kh + o].reshape(a, o * t, sp.c), u[kh])
        y = torch.mm(at, mprod.view(a, -1)).view(m, o, t, sp.k)
        return y.permute(1, 2, 0, 3).reshape(o, t * m, sp.k)[:, :o]


def _rule(r: int) -> Rule:
    return Rule(kernel_sizes=frozenset({r}), strides=frozenset({1}))


def _tolerance(m: int, r: int) -> float:
    """Float32 error budget, growing with the tile size ``a = m + r - 1``.

    The worst errors measured (:func:`~edgeplan.primitives.reference.relative_error`, 400 random layers with
    ``c, k <= 20``, ``im <= 16``, and layers up to ``c = 256``, ``im = 112``) are about ``4e-7`` (``a = 4``),
    ``2e-6`` (``a = 5``), ``6e-6`` (``a = 6``, 2-D ``F(4x4, 3x3)``), ``7e-6`` (``a = 7``) and ``8e-6``
    (``a = 8``); the budget leaves a margin of at least 7.
    """
    a = m + r - 1
    return {4: 1e-5, 5: 2e-5, 6: 5e-5, 7: 5e-5, 8: 1e-4}[a]


def variants() -> tuple[Primitive, ...]:
    """The Winograd primitives: ``wino3`` (f = 3) and ``wino5`` (f = 5) families."""
    hwc = Layout.HWC
    result: list[Primitive] = []
    one_d = ((2, 3, False), (3, 3, False), (4, 3, False), (2, 3, True), (4, 3, True),
             (2, 5, False), (3, 5, False), (3, 5, True))
    for m, r, cols in one_d:
        axis = "columns (height axis)" if cols else "rows (width axis)"
        result.append(Winograd1D(PrimitiveInfo(
            f"winograd-{m}-{r}" + ("-col" if cols else ""), f"wino{r}", hwc, hwc, _rule(r),
            f"1-D Winograd F({m}, {r}) along image {axis}, summed over the {r} kernel rows inside batched GEMMs",
            f"kernel rows transformed G g, (f, {m + r - 1}, c, k), in float64",
            _tolerance(m, r)), m, r, cols))
    for m, r in ((2, 3), (3, 3), (4, 3), (2, 5), (3, 5), (4, 5)):
        a = m + r - 1
        result.append(Winograd2D(PrimitiveInfo(
            f"winograd-{m}x{m}-{r}x{r}", f"wino{r}", hwc, hwc, _rule(r),
            f"2-D Winograd F({m}x{m}, {r}x{r}): {a}x{a} tiles, B^T d B, {a * a} batched GEMMs, A^T M A",
            f"kernels transformed U = G g G^T, ({a * a}, c, k), in float64",
            _tolerance(m, r)), m, r))
    return tuple(result)
