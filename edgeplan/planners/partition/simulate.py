"""Random edge clusters as in parthasarathy2022 §IV: nodes around a Wi-Fi router, Shannon-capacity links.

Nodes are drawn uniformly in a disk of ``radius_m`` (150 m, the router's range) around the router. Each node's
capacity follows Shannon's ``C = W log2(1 + SNR)`` with an SNR that falls with the inverse square of the node's
distance from the router (at least 1 m, as the paper excludes closer devices), calibrated so that ``C`` is
5.5 Mbit/s at 80 m (the paper's low-power edge network). The paper does not give the channel width ``W``; we
take 20 MHz (one Wi-Fi channel). Nor does it say how two nodes' capacities make a link; ``link`` chooses:

* ``"min"`` (default): the slower of the two nodes bounds the link, ``min(C_u, C_v)``;
* ``"relay"``: both hops go through the router and share its airtime, ``1 / (1/C_u + 1/C_v)``;
* ``"pairwise"``: the SNR follows the distance between the two nodes instead (a mesh without the router).
"""

from __future__ import annotations

import math

import numpy as np

from edgeplan.errors import InvalidInputError

__all__ = ["LINK_MODELS", "cluster_positions", "random_cluster", "shannon_mbps"]

LINK_MODELS = ("min", "relay", "pairwise")


def shannon_mbps(distance_m: np.ndarray, channel_mhz: float = 20.0, mbps_at_80m: float = 5.5) -> np.ndarray:
    """Link capacity at ``distance_m`` (clipped below at 1 m), calibrated to ``mbps_at_80m`` at 80 m."""
    snr_80 = 2.0 ** (mbps_at_80m / channel_mhz) - 1.0
    d = np.maximum(np.asarray(distance_m, dtype=np.float64), 1.0)
    return channel_mhz * np.log2(1.0 + snr_80 * (80.0 / d) ** 2)


def _positions(nodes: int, seed: int, radius_m: float) -> np.ndarray:
    rng = np.random.default_rng(seed)
    r = radius_m * np.sqrt(rng.uniform(0.0, 1.0, nodes))  # uniform in the disk
    theta = rng.uniform(0.0, 2 * math.pi, nodes)
    return np.stack([r * np.cos(theta), r * np.sin(theta)], axis=1)


def cluster_positions(nodes: int, seed: int, radius_m: float = 150.0) -> tuple[tuple[float, float], ...]:
    """Positions (m, router at the origin) of the nodes of :func:`random_cluster` with the same seed."""
    if nodes < 1 or not radius_m > 0:
        raise InvalidInputError(f"need at least one node and a positive radius, got {nodes} and {radius_m}")
    return tuple((float(x), float(y)) for x, y in _positions(nodes, seed, radius_m))


def random_cluster(nodes: int, seed: int, radius_m: float = 150.0, channel_mhz: float = 20.0,
                   mbps_at_80m: float = 5.5, link: str = "min") -> tuple[tuple[float, ...], ...]:
    """A symmetric bandwidth matrix (Mbit/s) of ``nodes`` devices placed uniformly within ``radius_m``.

    Parameters
    ----------
    nodes
        Number of devices.
    seed
        Seed of the positions.
    radius_m
        Range of the router.
    channel_mhz, mbps_at_80m
        Channel width and the calibration point of the capacity.
    link
        How a link's bandwidth follows from the two nodes (see the module docstring): one of
        :data:`LINK_MODELS`.
    """
    if nodes < 1 or not radius_m > 0:
        raise InvalidInputError(f"need at least one node and a positive radius, got {nodes} and {radius_m}")
    if link not in LINK_MODELS:
        raise InvalidInputError(f"link model {link!r} is not one of {', '.join(LINK_MODELS)}")
    xy = _positions(nodes, seed, radius_m)
    if link == "pairwise":
        bw = shannon_mbps(np.linalg.norm(xy[:, None, :] - xy[None, :, :], axis=2), channel_mhz, mbps_at_80m)
    else:
        cap = shannon_mbps(np.linalg.norm(xy, axis=1), channel_mhz, mbps_at_80m)
        if link == "min":
            bw = np.minimum(cap[:, None], cap[None, :])
        else:
            bw = 1.0 / (1.0 / cap[:, None] + 1.0 / cap[None, :])
    np.fill_diagonal(bw, 0.0)
    return tuple(tuple(float(x) for x in row) for row in bw)
