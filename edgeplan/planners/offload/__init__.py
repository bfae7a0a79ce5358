"""Mobile/cloud computation offloading for a chain of layers (Eshratifar & Pedram 2018, §3).

Given the latency of every range of consecutive layers on the mobile and on the cloud, the bytes at each
boundary, a network model and the mobile's power, :func:`solve` returns the schedule minimising latency or
mobile energy, optionally within a battery budget (eq. 13) and a cloud-time limit (eq. 14). Three
interchangeable exact solvers: dynamic programming (default), the paper's ILP (HiGHS via scipy) and brute force.
Every plan is recomputed by the independent :func:`check_plan`. Loads without torch.
"""

from __future__ import annotations

from edgeplan.planners.offload.costs import OBJECTIVES, MobilePowerModel, NetworkModel, OffloadCosts, OffloadProblem
from edgeplan.planners.offload.lookup import LookupEntry, LookupOptions, lookup_table
from edgeplan.planners.offload.plan import (
    SIDES,
    OffloadPlan,
    PlanCheck,
    ScheduleCost,
    Segment,
    Transfer,
    check_plan,
    evaluate_schedule,
    transfers_of,
)
from edgeplan.planners.offload.presets import custom_network, load_network_presets, network_preset
from edgeplan.planners.offload.solve import SOLVERS, OffloadInfeasibleError, solve

__all__ = [
    "OBJECTIVES",
    "SIDES",
    "SOLVERS",
    "LookupEntry",
    "LookupOptions",
    "MobilePowerModel",
    "NetworkModel",
    "OffloadCosts",
    "OffloadInfeasibleError",
    "OffloadPlan",
    "OffloadProblem",
    "PlanCheck",
    "ScheduleCost",
    "Segment",
    "Transfer",
    "check_plan",
    "custom_network",
    "evaluate_schedule",
    "load_network_presets",
    "lookup_table",
    "network_preset",
    "solve",
    "transfers_of",
]
