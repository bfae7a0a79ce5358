"""Deployment planners: pure functions from costs and constraints to a frozen plan.

Each planner lives in its own subpackage (:mod:`edgeplan.planners.offload`: mobile/cloud computation offloading
after Eshratifar & Pedram 2018). Planners load without torch or onnx; solvers do no profiling or I/O.
"""

from __future__ import annotations

__all__: list[str] = []
