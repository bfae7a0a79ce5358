"""Where a decision's costs were measured, and whether that is the machine the decision runs on.

A latency table measured on one CPU is no estimate for another, even when both call themselves "AMD EPYC, 2
cores": a decision that takes costs from a file or a Store records their :class:`CostsOrigin`, and says so
(:meth:`CostsOrigin.warning`) whenever they are another device's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from edgeplan.measure.device import DeviceDescriptor, device_differences, same_device

__all__ = ["CostsOrigin", "WithCostsOrigin"]


@dataclass(frozen=True)
class CostsOrigin:
    """The provenance of a decision's costs.

    Attributes
    ----------
    source
        Where they were read: ``"store"``, ``"shipped"``, ``"measured here"``, ``"table"``, ``"model"``, ...
    label
        A line a person reads (a file or Store path and what it holds).
    device
        The machine they were measured on; None where the file does not record it.
    here
        The machine the decision runs on (None where it runs nowhere, e.g. a plan for another device).
    remedy
        What to do to use costs measured here (ends the warning).
    """

    source: str
    label: str
    device: DeviceDescriptor | None
    here: DeviceDescriptor | None
    remedy: str = ""

    @property
    def matches_here(self) -> bool:
        """Whether the costs were measured on this machine (:func:`~edgeplan.measure.device.same_device`)."""
        return self.device is not None and self.here is not None and same_device(self.device, self.here)

    def warning(self) -> str | None:
        """The sentence a user must read when the costs are another device's (or of an unrecorded one), else None."""
        if self.matches_here or self.here is None:
            return None
        if self.device is None:
            why = "a device that is not recorded"
        else:
            shown = "; ".join(device_differences(self.device, self.here)[:4])
            why = f"{self.device.summary()} [{shown}]"
        return (f"the costs are another device's ({self.label}, measured on {why}); this machine is "
                f"{self.here.summary()}, and its latencies may be far from them. {self.remedy}").rstrip()

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: ``source``, ``label``, ``device`` (descriptor and fingerprint, or null), ``this_device``
        (fingerprint), ``match``."""
        return {"source": self.source, "label": self.label,
                "device": None if self.device is None else {**self.device.to_dict(),
                                                             "fingerprint": self.device.fingerprint},
                "this_device": None if self.here is None else self.here.fingerprint,
                "match": self.matches_here}


class WithCostsOrigin:
    """What a decision's result says of where its costs come from (mixed into the frozen result dataclasses, which
    define the ``costs_from`` field)."""

    costs_from: CostsOrigin | None

    @property
    def costs_match_this_device(self) -> bool:
        """Whether the costs were measured on the machine the plan is made for."""
        return self.costs_from is not None and self.costs_from.matches_here

    @property
    def warnings(self) -> tuple[str, ...]:
        """What a user must read before trusting the plan: costs of another device."""
        warning = None if self.costs_from is None else self.costs_from.warning()
        return () if warning is None else (warning,)
