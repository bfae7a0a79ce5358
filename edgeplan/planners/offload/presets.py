"""Mobile network presets (3G, 4G, Wi-Fi) from paper Tables 2 and 3, read from ``networks.toml``."""

from __future__ import annotations

import tomllib
from dataclasses import replace
from importlib import resources
from typing import Any

from edgeplan.errors import InvalidInputError
from edgeplan.planners.offload.costs import NetworkModel

__all__ = ["custom_network", "load_network_presets", "network_preset"]

_ALIASES = {"wi-fi": "wifi", "wi_fi": "wifi"}


def load_network_presets() -> dict[str, NetworkModel]:
    """The network presets shipped with edgeplan.

    Returns
    -------
    dict of str to NetworkModel
        Keyed by lower-case preset name (``"3g"``, ``"4g"``, ``"wifi"``).

    Raises
    ------
    InvalidInputError
        The packaged ``networks.toml`` is malformed.
    """
    text = resources.files("edgeplan.planners.offload").joinpath("networks.toml").read_text(encoding="utf-8")
    try:
        data: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise InvalidInputError(f"networks.toml is not valid TOML: {e}") from e
    source = str(data.pop("source", ""))
    presets: dict[str, NetworkModel] = {}
    for key, entry in data.items():
        if not isinstance(entry, dict):
            raise InvalidInputError(f"networks.toml: {key!r} must be a table")
        try:
            presets[key.lower()] = NetworkModel(source=source, **entry)
        except TypeError as e:
            raise InvalidInputError(f"networks.toml: preset {key!r}: {e}") from e
    return presets


def network_preset(name: str) -> NetworkModel:
    """One network preset by name.

    Parameters
    ----------
    name
        ``"3g"``, ``"4g"`` or ``"wifi"``, case-insensitive; ``"wi-fi"`` is accepted.

    Returns
    -------
    NetworkModel

    Raises
    ------
    InvalidInputError
        The name is not a preset; the message lists them.
    """
    presets = load_network_presets()
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key not in presets:
        raise InvalidInputError(f"unknown network {name!r}; choose one of {', '.join(sorted(presets))}")
    return presets[key]


def custom_network(up_mbps: float, down_mbps: float, like: str = "wifi") -> NetworkModel:
    """A link with custom speeds that keeps a preset's power model (alpha and beta).

    Parameters
    ----------
    up_mbps, down_mbps
        Uplink and downlink throughput in Mbit/s.
    like
        The preset whose power model is kept.

    Returns
    -------
    NetworkModel

    Raises
    ------
    InvalidInputError
        ``like`` is not a preset or a speed is not positive.
    """
    base = network_preset(like)
    model = NetworkModel(
        name="custom",
        up_mbps=up_mbps,
        down_mbps=down_mbps,
        alpha_up_mw_per_mbps=base.alpha_up_mw_per_mbps,
        alpha_down_mw_per_mbps=base.alpha_down_mw_per_mbps,
        beta_mw=base.beta_mw,
        source=f"speeds: custom; power model: {base.name} preset ({base.source})",
    )
    return replace(model, name=f"{base.name} power model, {up_mbps:g} up / {down_mbps:g} down Mbps")
