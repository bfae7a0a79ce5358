"""The inputs of the offloading planner: range latencies, the network and power models, and the problem.

A network is a chain of ``n`` layers. ``mobile_ms[i, j]`` (``i <= j``) is the latency of running layers ``i..j`` in
one go on the mobile, ``cloud_ms[i, j]`` the same on the cloud server; ranges are not additive (Eshratifar et al.
2018, §2: ``T[i, k] != T[i, j] + T[j + 1, k]`` in general). Boundary ``b`` (``0..n``) sits before layer ``b``;
``boundary_bytes[b]`` cross the link when execution switches sides there (``b = 0``: the model inputs, ``b = n``:
the outputs). The inputs start on the mobile and the outputs end there.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from edgeplan.errors import InvalidInputError

__all__ = ["OBJECTIVES", "MobilePowerModel", "NetworkModel", "OffloadCosts", "OffloadProblem"]

OBJECTIVES = ("latency", "energy")
"""The objectives :class:`OffloadProblem` accepts: end-to-end latency or mobile energy."""


def _positive(owner: str, name: str, value: float, *, allow_zero: bool = False) -> None:
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
    ok = ok and (value >= 0 if allow_zero else value > 0)
    if not ok:
        need = "a finite number >= 0" if allow_zero else "a finite number > 0"
        raise InvalidInputError(f"{owner}: {name} is {value!r}; it must be {need}")


@dataclass(frozen=True)
class NetworkModel:
    """A mobile link: average speeds and the linear power model of paper Table 2.

    Parameters
    ----------
    name
        Short name for reports (``"Wi-Fi"``).
    up_mbps, down_mbps
        Uplink and downlink throughput in Mbit/s (1 Mbit = 1e6 bit).
    alpha_up_mw_per_mbps, alpha_down_mw_per_mbps, beta_mw
        Radio power while sending / receiving: ``P_up = alpha_up * up_mbps + beta``, same for down.
    source
        Where the numbers come from.
    """

    name: str
    up_mbps: float
    down_mbps: float
    alpha_up_mw_per_mbps: float
    alpha_down_mw_per_mbps: float
    beta_mw: float
    source: str = ""

    def __post_init__(self) -> None:
        owner = f"network {self.name!r}"
        _positive(owner, "up_mbps", self.up_mbps)
        _positive(owner, "down_mbps", self.down_mbps)
        _positive(owner, "alpha_up_mw_per_mbps", self.alpha_up_mw_per_mbps, allow_zero=True)
        _positive(owner, "alpha_down_mw_per_mbps", self.alpha_down_mw_per_mbps, allow_zero=True)
        _positive(owner, "beta_mw", self.beta_mw, allow_zero=True)

    def upload_ms(self, size_bytes: float) -> float:
        """Time to send ``size_bytes`` from the mobile to the cloud, in ms."""
        return float(size_bytes) * 8.0 / (self.up_mbps * 1e6) * 1e3

    def download_ms(self, size_bytes: float) -> float:
        """Time to receive ``size_bytes`` on the mobile, in ms."""
        return float(size_bytes) * 8.0 / (self.down_mbps * 1e6) * 1e3

    @property
    def upload_power_mw(self) -> float:
        """Radio power while sending: ``alpha_up * up_mbps + beta``."""
        return self.alpha_up_mw_per_mbps * self.up_mbps + self.beta_mw

    @property
    def download_power_mw(self) -> float:
        """Radio power while receiving: ``alpha_down * down_mbps + beta``."""
        return self.alpha_down_mw_per_mbps * self.down_mbps + self.beta_mw

    def upload_mj(self, size_bytes: float) -> float:
        """Mobile energy to send ``size_bytes``, in mJ."""
        return self.upload_power_mw * self.upload_ms(size_bytes) / 1000.0

    def download_mj(self, size_bytes: float) -> float:
        """Mobile energy to receive ``size_bytes``, in mJ."""
        return self.download_power_mw * self.download_ms(size_bytes) / 1000.0


@dataclass(frozen=True)
class MobilePowerModel:
    """Mobile power while computing and while waiting for the cloud.

    Parameters
    ----------
    compute_mw
        Power drawn while the mobile runs layers.
    idle_mw
        Power drawn while the cloud runs layers (the radio's transfer power is in :class:`NetworkModel`).
    source
        Where the numbers come from.
    """

    compute_mw: float
    idle_mw: float = 0.0
    source: str = ""

    def __post_init__(self) -> None:
        _positive("mobile power model", "compute_mw", self.compute_mw, allow_zero=True)
        _positive("mobile power model", "idle_mw", self.idle_mw, allow_zero=True)


def _range_matrix(name: str, value: Any, n: int) -> np.ndarray:
    try:
        arr = np.array(value, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise InvalidInputError(f"{name} must be an (n, n) array of numbers: {e}") from e
    if arr.shape != (n, n):
        raise InvalidInputError(f"{name} has shape {arr.shape}; expected ({n}, {n}) for {n} layers")
    rows, cols = np.triu_indices(n)
    upper = arr[rows, cols]
    bad = np.flatnonzero(~np.isfinite(upper) | (upper < 0))
    if bad.size:
        k = int(bad[0])
        raise InvalidInputError(
            f"{name}[{rows[k]}, {cols[k]}] is {float(upper[k])!r}; latencies on and above the diagonal must be finite "
            "and >= 0"
        )
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True, eq=False)
class OffloadCosts:
    """Range latencies of a layer chain on the mobile and on the cloud, and the bytes at each boundary.

    Parameters
    ----------
    layers
        The ``n >= 1`` layer (group) names, in execution order.
    mobile_ms, cloud_ms
        ``(n, n)`` arrays; ``[i, j]`` for ``i <= j`` is the latency of running layers ``i..j`` in one go.
        Entries below the diagonal are ignored (NaN allowed). Stored read-only.
    boundary_bytes
        ``n + 1`` sizes: ``[b]`` is what crosses the link when execution switches sides before layer ``b``
        (``[0]``: the model inputs, ``[n]``: the model outputs).
    mobile_label, cloud_label
        Where the latencies come from (device, cost model), for reports.

    Notes
    -----
    Compared by identity (the arrays make ``==`` ambiguous).
    """

    layers: tuple[str, ...]
    mobile_ms: np.ndarray
    cloud_ms: np.ndarray
    boundary_bytes: tuple[int, ...]
    mobile_label: str = ""
    cloud_label: str = ""

    def __post_init__(self) -> None:
        if isinstance(self.layers, str) or not isinstance(self.layers, Iterable):
            raise InvalidInputError(f"layers must be a sequence of layer names, got {self.layers!r}")
        layers = tuple(self.layers)
        if not layers:
            raise InvalidInputError("OffloadCosts needs at least one layer; layers is empty")
        for k, name in enumerate(layers):
            if not isinstance(name, str):
                raise InvalidInputError(f"layers[{k}] is {name!r}; layer names must be strings")
        repeated = sorted({name for name in layers if layers.count(name) > 1})
        if repeated:
            raise InvalidInputError(f"layer name(s) {', '.join(map(repr, repeated))} appear more than once; a plan "
                                    "names the layers it places, so each name must be unique")
        n = len(layers)
        object.__setattr__(self, "layers", layers)
        object.__setattr__(self, "mobile_ms", _range_matrix("mobile_ms", self.mobile_ms, n))
        object.__setattr__(self, "cloud_ms", _range_matrix("cloud_ms", self.cloud_ms, n))
        if not isinstance(self.boundary_bytes, Iterable):
            raise InvalidInputError(f"boundary_bytes must be a sequence of n + 1 = {n + 1} sizes, got "
                                    f"{self.boundary_bytes!r}")
        sizes = tuple(self.boundary_bytes)
        if len(sizes) != n + 1:
            raise InvalidInputError(f"boundary_bytes has {len(sizes)} entries; expected n + 1 = {n + 1}")
        for b, size in enumerate(sizes):
            if isinstance(size, bool) or not isinstance(size, int | np.integer) or size < 0:
                raise InvalidInputError(f"boundary_bytes[{b}] is {size!r}; sizes must be integers >= 0")
        object.__setattr__(self, "boundary_bytes", tuple(int(s) for s in sizes))

    @property
    def n(self) -> int:
        """Number of layers."""
        return len(self.layers)

    def with_cloud_speedup(self, factor: float, label: str = "") -> OffloadCosts:
        """Costs whose cloud latencies are the mobile ones divided by ``factor``.

        Parameters
        ----------
        factor
            Cloud speed-up over the mobile (the paper's server has 11.25x the mobile's compute, §4.1).
        label
            New ``cloud_label``; default ``"mobile_ms / <factor>"``.

        Returns
        -------
        OffloadCosts
            A copy with ``cloud_ms = mobile_ms / factor``.
        """
        _positive("with_cloud_speedup", "factor", factor)
        cloud = np.asarray(self.mobile_ms, dtype=np.float64) / float(factor)
        return replace(self, cloud_ms=cloud, cloud_label=label or f"mobile_ms / {factor:g}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form: lists of lists with ``None`` below the diagonal."""

        def upper(arr: np.ndarray) -> list[list[float | None]]:
            return [[float(arr[i, j]) if j >= i else None for j in range(self.n)] for i in range(self.n)]

        return {
            "layers": list(self.layers),
            "mobile_ms": upper(self.mobile_ms),
            "cloud_ms": upper(self.cloud_ms),
            "boundary_bytes": list(self.boundary_bytes),
            "mobile_label": self.mobile_label,
            "cloud_label": self.cloud_label,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> OffloadCosts:
        """Inverse of :meth:`to_dict`; ``None`` entries become NaN.

        Raises
        ------
        InvalidInputError
            A key is missing or a value is malformed.
        """
        missing = [k for k in ("layers", "mobile_ms", "cloud_ms", "boundary_bytes") if k not in data]
        if missing:
            raise InvalidInputError(f"offload costs: missing key(s) {', '.join(missing)}")

        def matrix(key: str) -> np.ndarray:
            rows = data[key]
            if not isinstance(rows, list) or not all(isinstance(r, list) for r in rows):
                raise InvalidInputError(f"offload costs: {key} must be a list of lists")
            return np.array([[math.nan if v is None else v for v in r] for r in rows], dtype=np.float64)

        return cls(
            layers=tuple(data["layers"]),
            mobile_ms=matrix("mobile_ms"),
            cloud_ms=matrix("cloud_ms"),
            boundary_bytes=tuple(data["boundary_bytes"]),
            mobile_label=str(data.get("mobile_label", "")),
            cloud_label=str(data.get("cloud_label", "")),
        )


@dataclass(frozen=True)
class OffloadProblem:
    """One offloading problem: costs, link, mobile power, objective and the optional limits.

    Parameters
    ----------
    costs
        Range latencies and boundary sizes.
    network
        The link (speeds and radio power model).
    power
        The mobile's compute and idle power.
    objective
        ``"latency"`` (paper eqs. 2-4) or ``"energy"`` (mobile energy, eqs. 9-11).
    battery_mj
        Battery budget: mobile energy must not exceed it (eq. 13). ``None``: no budget.
    cloud_ms
        Cloud-time limit: total cloud compute time must not exceed it (eq. 14). ``None``: no limit; ``0``: the
        cloud may not compute at all.
    same_side_splits
        Whether a schedule may run two consecutive segments on the same side (``T[i, j] + T[j+1, k]`` instead of
        ``T[i, k]``), as the paper's ILP allows. Where ranges are measured by running them in one go, such a
        split executes exactly the same operations as the merged range and its apparent gain is measurement
        noise, so :mod:`edgeplan.decisions.offload` turns it off; the default keeps the paper's model.
    """

    costs: OffloadCosts
    network: NetworkModel
    power: MobilePowerModel
    objective: str = "latency"
    battery_mj: float | None = None
    cloud_ms: float | None = field(default=None)
    same_side_splits: bool = True

    def __post_init__(self) -> None:
        for name, value, kind in (
            ("costs", self.costs, OffloadCosts),
            ("network", self.network, NetworkModel),
            ("power", self.power, MobilePowerModel),
        ):
            if not isinstance(value, kind):
                raise InvalidInputError(
                    f"offload problem: {name} must be a {kind.__name__}, got {type(value).__name__}"
                )
        if self.objective not in OBJECTIVES:
            raise InvalidInputError(
                f"offload problem: objective {self.objective!r} is unknown; choose one of {', '.join(OBJECTIVES)}"
            )
        if self.battery_mj is not None:
            _positive("offload problem", "battery_mj (--battery-mj)", self.battery_mj)
        if self.cloud_ms is not None:
            _positive("offload problem", "cloud_ms (--cloud-ms)", self.cloud_ms, allow_zero=True)

    @property
    def limits(self) -> dict[str, float]:
        """The limits keyed by the quantity they bound: ``{"energy": battery_mj, "cloud": cloud_ms}``, where set."""
        limits = {}
        if self.battery_mj is not None:
            limits["energy"] = float(self.battery_mj)
        if self.cloud_ms is not None:
            limits["cloud"] = float(self.cloud_ms)
        return limits
