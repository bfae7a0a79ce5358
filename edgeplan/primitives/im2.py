"""The im2 family: lower the input to a patch matrix, then one GEMM (mulder2020 §3.1, Table 6 'im2').

``im2col`` builds the patch matrix ``P`` with one *column* per output pixel, shape ``(c f f, pixels)``;
``im2row`` builds it with one *row* per output pixel, shape ``(pixels, c f f)``. The variant name then says

* how the patches are copied (tensor-op analogues of the strategies in the mulder2021 names):

  - ``scan``: one gather through a precomputed index table (element by element);
  - ``copy-short``: one strided copy of a windowed view (``Tensor.unfold``), whose contiguous runs are short;
  - ``copy-long``: ``f x f`` slab copies, one per kernel offset, each a whole shifted image plane;
  - ``copy-self``: like ``copy-long``, but a plane whose kernel column is ``kw >= s`` is copied from the plane
    of column ``kw - s`` shifted by one output column (the patch matrix copies from itself), plus its last column
    from the image;

* the GEMM ``A B`` and its operands' transpositions (``ab``, ``abt``, ``atb``, ``atbt``; a ``t`` means the stored
  operand is used transposed, which BLAS does without a copy), and
* the output order: ``ki`` computes ``(k, pixels)`` (output ``chw``), ``ik`` computes ``(pixels, k)``
  (output ``hwc``).

Whether the image or the kernel is ``A`` follows from ``ki``/``ik``; the stored form of the kernel matrix,
``(k, c f f)`` or ``(c f f, k)``, follows from its transposition flag. Names and layouts are those of the mulder2021
dataset (formats.csv).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from edgeplan.errors import InvalidInputError
from edgeplan.primitives._ops import pad_chw, pad_hwc, window
from edgeplan.primitives.base import Prepared, Primitive, PrimitiveInfo
from edgeplan.primitives.spec import ConvSpec, Layout, Rule

__all__ = ["GemmOrder", "Im2", "variants"]

FAMILY = "im2"

COL_BUILDERS = ("scan", "copy-short", "copy-long", "copy-self")
ROW_BUILDERS = ("scan", "copy-short")
COL_ORDERS = ("ab-ki", "atb-ik", "atb-ki", "atbt-ik")
ROW_ORDERS = ("ab-ik", "abt-ik", "abt-ki", "atbt-ki")


@dataclass(frozen=True)
class GemmOrder:
    """A GEMM variant such as ``atb-ik``: operand transpositions and output order.

    Parameters
    ----------
    name
        ``{ab,abt,atb,atbt}-{ik,ki}``.
    ta, tb
        Whether the stored ``A`` / ``B`` is used transposed.
    kernels_first
        ``ki``: ``A`` is the kernel matrix and the product is ``(k, pixels)``; ``ik``: ``A`` is the image.
    """

    name: str
    ta: bool
    tb: bool
    kernels_first: bool

    @classmethod
    def parse(cls, name: str) -> GemmOrder:
        """Parse ``ab-ki``, ``atbt-ik``, ...

        Raises
        ------
        InvalidInputError
            If ``name`` is not of that form.
        """
        ops, _, order = name.partition("-")
        forms = {"ab": (False, False), "abt": (False, True), "atb": (True, False), "atbt": (True, True)}
        if ops not in forms or order not in ("ik", "ki"):
            raise InvalidInputError(f"unknown GEMM variant {name!r}; expected {{ab,abt,atb,atbt}}-{{ik,ki}}")
        ta, tb = forms[ops]
        return cls(name, ta, tb, order == "ki")

    def image_transposed(self) -> bool:
        """Whether the image operand is used transposed."""
        return self.tb if self.kernels_first else self.ta

    def kernel_stored_k_first(self) -> bool:
        """Whether the kernel matrix is stored ``(k, c f f)`` (else ``(c f f, k)``)."""
        return not self.ta if self.kernels_first else self.tb


def _scan_index(spec: ConvSpec, rows: bool, device: torch.device) -> torch.Tensor:
    """Flat indices into the padded ``(c, hp, wp)`` input: ``(c f f, pixels)``, or ``(pixels, c f f)`` for rows."""
    hp = wp = spec.padded
    c = torch.arange(spec.c, device=device).view(-1, 1, 1, 1, 1) * (hp * wp)
    kh = torch.arange(spec.f, device=device).view(1, -1, 1, 1, 1) * wp
    kw = torch.arange(spec.f, device=device).view(1, 1, -1, 1, 1)
    oy = torch.arange(spec.out, device=device).view(1, 1, 1, -1, 1) * (spec.s * wp)
    ox = torch.arange(spec.out, device=device).view(1, 1, 1, 1, -1) * spec.s
    idx = c + kh + kw + oy + ox  # (c, f, f, oh, ow)
    cff, n = spec.c * spec.f * spec.f, spec.out * spec.out
    if rows:
        return idx.permute(3, 4, 0, 1, 2).reshape(n, cff).contiguous()
    return idx.reshape(cff, n)


def _index(aux: torch.Tensor | None) -> torch.Tensor:
    if aux is None:
        raise InvalidInputError("a scan primitive needs its gather-index table; call prepare first")
    return aux


def _col_scan(x: torch.Tensor, sp: ConvSpec, aux: torch.Tensor | None) -> torch.Tensor:
    return torch.take(pad_chw(x, sp.pad), _index(aux))


def _col_copy_short(x: torch.Tensor, sp: ConvSpec, aux: torch.Tensor | None) -> torch.Tensor:
    xp = pad_chw(x, sp.pad)
    view = xp.unfold(1, sp.f, sp.s).unfold(2, sp.f, sp.s)  # (c, oh, ow, f, f)
    return view.permute(0, 3, 4, 1, 2).reshape(sp.c * sp.f * sp.f, sp.out * sp.out)


def _col_copy_long(x: torch.Tensor, sp: ConvSpec, aux: torch.Tensor | None) -> torch.Tensor:
    xp = pad_chw(x, sp.pad)
    p = x.new_empty(sp.c, sp.f, sp.f, sp.out, sp.out)
    for kh in range(sp.f):
        rows = window(kh, sp.out, sp.s)
        for kw in range(sp.f):
            p[:, kh, kw].copy_(xp[:, rows, window(kw, sp.out, sp.s)])
    return p.view(sp.c * sp.f * sp.f, sp.out * sp.out)


def _col_copy_self(x: torch.Tensor, sp: ConvSpec, aux: torch.Tensor | None) -> torch.Tensor:
    xp = pad_chw(x, sp.pad)
    o, s = sp.out, sp.s
    p = x.new_empty(sp.c, sp.f, sp.f, o, o)
    for kh in range(sp.f):
        rows = window(kh, o, s)
        for kw in range(sp.f):
            if kw < s or o == 1:
                p[:, kh, kw].copy_(xp[:, rows, window(kw, o, s)])
            else:  # column ox of offset kw is column ox + 1 of offset kw - s
                p[:, kh, kw, :, : o - 1].copy_(p[:, kh, kw - s, :, 1:])
                p[:, kh, kw, :, o - 1].copy_(xp[:, rows, (o - 1) * s + kw])
    return p.view(sp.c * sp.f * sp.f, o * o)


def _row_scan(x: torch.Tensor, sp: ConvSpec, aux: torch.Tensor | None) -> torch.Tensor:
    return torch.take(pad_chw(x, sp.pad), _index(aux))


def _row_copy_short(x: torch.Tensor, sp: ConvSpec, aux: torch.Tensor | None) -> torch.Tensor:
    xp = pad_hwc(x, sp.pad)
    view = xp.unfold(0, sp.f, sp.s).unfold(1, sp.f, sp.s)  # (oh, ow, c, f, f)
    return view.permute(0, 1, 3, 4, 2).reshape(sp.out * sp.out, sp.f * sp.f * sp.c)


Builder = Callable[[torch.Tensor, ConvSpec, torch.Tensor | None], torch.Tensor]

_BUILDERS: dict[tuple[str, str], Builder] = {
    ("col", "scan"): _col_scan,
    ("col", "copy-short"): _col_copy_short,
    ("col", "copy-long"): _col_copy_long,
    ("col", "copy-self"): _col_copy_self,
    ("row", "scan"): _row_scan,
    ("row", "copy-short"): _row_copy_short,
}


class Im2(Primitive):
    """An im2col or im2row primitive: one patch-building strategy and one GEMM variant.

    Parameters
    ----------
    info
        The declaration.
    orientation
        ``"col"`` (patches ``(c f f, pixels)``, chw input) or ``"row"`` (patches ``(pixels, c f f)``).
    builder
        Patch-building strategy (see the module docstring).
    order
        GEMM variant.
    """

    def __init__(self, info: PrimitiveInfo, orientation: str, builder: str, order: GemmOrder) -> None:
        super().__init__(info)
        if (orientation, builder) not in _BUILDERS:
            raise InvalidInputError(f"{info.name}: no {builder!r} builder for im2{orientation}")
        if order.image_transposed() != (orientation == "col") ^ order.kernels_first:
            raise InvalidInputError(f"{info.name}: GEMM variant {order.name} does not fit im2{orientation} patches")
        self.orientation = orientation
        self.builder = builder
        self.order = order
        self._build = _BUILDERS[(orientation, builder)]
        #: Order of the reduction axis of the patches: (c, kh, kw) from chw, (kh, kw, c) from hwc.
        self._channels_last = self.input_layout is Layout.HWC

    def _prepare(self, weight: torch.Tensor, spec: ConvSpec) -> tuple[torch.Tensor, torch.Tensor | None]:
        w = weight.permute(0, 2, 3, 1) if self._channels_last else weight
        km = w.reshape(spec.k, -1)  # (k, c f f) in the patches' reduction order
        stored = km.contiguous() if self.order.kernel_stored_k_first() else km.t().contiguous()
        aux = None
        if self.builder == "scan":
            aux = _scan_index(spec, rows=self.orientation == "row", device=weight.device)
        return stored, aux

    def _execute(self, x: torch.Tensor, prepared: Prepared) -> torch.Tensor:
        sp = prepared.spec
        patches = self._build(x, sp, prepared.aux)
        if self.order.kernels_first:
            a, b = prepared.weight, patches
        else:
            a, b = patches, prepared.weight
        out = torch.mm(a.t() if self.order.ta else a, b.t() if self.order.tb else b)
        return out.view(self.output_layout.shape(sp.k, sp.out, sp.out))


def _make(orientation: str, builder: str, order_name: str) -> Im2:
    order = GemmOrder.parse(order_name)
    in_layout = Layout.HWC if (orientation, builder) == ("row", "copy-short") else Layout.CHW
    out_layout = Layout.CHW if order.kernels_first else Layout.HWC
    kernel = "(k, c f f)" if order.kernel_stored_k_first() else "(c f f, k)"
    shape = "(c f f, pixels)" if orientation == "col" else "(pixels, c f f)"
    info = PrimitiveInfo(
        name=f"im2{orientation}-{builder}-{order_name}",
        family=FAMILY,
        input_layout=in_layout,
        output_layout=out_layout,
        rule=Rule(),
        summary=f"{builder} patch matrix {shape}, then one GEMM {order_name}",
        prepared=f"kernel matrix stored {kernel}" + ("; gather-index table" if builder == "scan" else ""),
    )
    return Im2(info, orientation, builder, order)


def variants() -> tuple[Primitive, ...]:
    """The im2col and im2row primitives (24)."""
    cols = [_make("col", b, o) for b in COL_BUILDERS for o in COL_ORDERS]
    rows = [_make("row", b, o) for b in ROW_BUILDERS for o in ROW_ORDERS]
    return (*cols, *rows)
