"""Random edge clusters as in parthasarathy2022 §IV: nodes around a Wi-Fi router, Shannon-capacity links.

Nodes are drawn uniformly in a disk of ``radius_m`` (150 m, the router's range) around the router. The link
between two nodes follows Shannon's capacity ``C = W log2(1 + SNR)`` with an SNR that falls with the inverse
square of the distance, calibrated so that ``C`` is 5.5 Mbit/s at 80 m (the paper's low-power edge network).
The paper gives neither the channel width ``W`` nor which distance enters the SNR; we take ``W`` = 20 MHz (one
Wi-Fi channel) and the distance between the two nodes, at least 1 m (the paper excludes distances under 1 m).
"""

from __future__ import annotations

import math

import numpy as np

from edgeplan.errors import InvalidInputError

__all__ = ["random_cluster", "shannon_mbps"]


def shannon_mbps(distance_m: np.ndarray, channel_mhz: float = 20.0, mbps_at_80m: float = 5.5) -> np.ndarray:
    """Link capacity at ``distance_m`` (clipped below at 1 m), calibrated to ``mbps_at_80m`` at 80 m."""
    snr_80 = 2.0 ** (mbps_at_80m / channel_mhz) - 1.0
    d = np.maximum(np.asarray(distance_m, dtype=np.float64), 1.0)
    return channel_mhz * np.log2(1.0 + snr_80 * (80.0 / d) ** 2)


def random_cluster(nodes: int, seed: int, radius_m: float = 150.0, channel_mhz: float = 20.0,
                   mbps_at_80m: float = 5.5) -> tuple[tuple[float, ...], ...]:
    """A symmetric bandwidth matrix (Mbit/s) of ``nodes`` devices placed uniformly within ``radius_m``."""
    if nodes < 1 or not radius_m > 0:
        raise InvalidInputError(f"need at least one node and a positive radius, got {nodes} and {radius_m}")
    rng = np.random.default_rng(seed)
    r = radius_m * np.sqrt(rng.uniform(0.0, 1.0, nodes))  # uniform in the disk
    theta = rng.uniform(0.0, 2 * math.pi, nodes)
    xy = np.stack([r * np.cos(theta), r * np.sin(theta)], axis=1)
    dist = np.linalg.norm(xy[:, None, :] - xy[None, :, :], axis=2)
    bw = shannon_mbps(dist, channel_mhz, mbps_at_80m)
    np.fill_diagonal(bw, 0.0)
    return tuple(tuple(float(x) for x in row) for row in bw)
