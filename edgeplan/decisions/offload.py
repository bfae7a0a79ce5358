"""Mobile–cloud offloading of a zoo model, end to end: cost inputs, plan, and a real split execution.

The planner (:mod:`edgeplan.planners.offload`) is a pure function of its cost inputs; this module assembles them
for a model: the layer chain and the bytes at each boundary from the IR, the latency of every layer range on the
mobile and on the cloud from measurements (this machine's Store, else the ranges shipped with the package when
they were measured on this very device, else measured now: another device's ranges are used only when asked for,
and the result says so), and the network and power models. Each side is a *measured* device (torch on this machine at a
thread count) or, for the cloud, a *derived* one: the mobile's measured ranges divided by a stated speed-up
(eshratifar2018's cloud GPU has 11.25x the compute of its mobile). The mobile can also be a *predicted* one: a
device profile (LiteRT on a phone, ``litert-fp32-1t``, or a calibrated device) prices each layer
(:mod:`edgeplan.decisions.predicted_costs`), and a range is its layers' sum plus one invocation's overhead. Labels
say which.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgeplan.errors import InvalidInputError
from edgeplan.ir.layer_chain import LayerChain, layer_chain
from edgeplan.measure.cost_origin import CostsOrigin, WithCostsOrigin
from edgeplan.planners.offload import (
    LookupEntry,
    LookupOptions,
    MobilePowerModel,
    NetworkModel,
    OffloadCosts,
    OffloadPlan,
    OffloadProblem,
    custom_network,
    lookup_table,
    network_preset,
    solve,
)

if TYPE_CHECKING:
    from edgeplan.runtimes.split import SplitRun

__all__ = ["COST_SOURCES", "DEFAULT_MOBILE_POWER", "OffloadOptions", "OffloadResult", "OffloadRun", "OffloadSetup",
           "mobile_power", "offload_costs", "offload_inputs", "offload_lookup", "offload_network", "plan_offload",
           "run_offload"]

#: Where range latencies may come from: ``auto`` = this machine's Store, else the shipped file if it was measured
#: on this very device, else measure now; ``store``, ``shipped`` and ``measure`` force one.
COST_SOURCES = ("auto", "store", "shipped", "measure")

#: The mobile's compute power when the user gives none: no power is measured on this machine, so we take the
#: paper's mobile platform (Jetson TX2) at its 7.5 W mode.
DEFAULT_MOBILE_POWER = MobilePowerModel(
    7500.0, 0.0, "Jetson TX2 (eshratifar2018 §4.1) in its 7.5 W mode; stated, not measured; idle power 0 as in "
    "the paper's eqs. 9-10")


def offload_network(preset: str = "wifi", up_mbps: float | None = None,
                    down_mbps: float | None = None) -> NetworkModel:
    """The link a plan is made for: a preset, or custom speeds that keep the preset's radio power model.

    Parameters
    ----------
    preset
        ``3g``, ``4g`` or ``wifi`` (eshratifar2018 Tables 2-3).
    up_mbps, down_mbps
        Custom uplink and downlink speeds in Mbit/s, both or neither.

    Raises
    ------
    InvalidInputError
        An unknown preset, a speed that is not positive, or one speed without the other.
    """
    if (up_mbps is None) != (down_mbps is None):
        raise InvalidInputError("give both up_mbps and down_mbps, or neither")
    if up_mbps is None or down_mbps is None:
        return network_preset(preset)
    return custom_network(up_mbps, down_mbps, like=preset)


def mobile_power(compute_w: float | None = None, source: str = "given") -> MobilePowerModel:
    """The mobile's power model: ``compute_w`` watts while computing and 0 while idle, as in eshratifar2018's
    eqs. 9-10; None: :data:`DEFAULT_MOBILE_POWER`.

    Parameters
    ----------
    compute_w
        The mobile's compute power in watts (stored in mW).
    source
        Where the number comes from, recorded in the model.
    """
    if compute_w is None:
        return DEFAULT_MOBILE_POWER
    return MobilePowerModel(compute_w * 1000.0, 0.0, source)


@dataclass(frozen=True)
class OffloadSetup:
    """Which devices play the mobile and the cloud, and where their range latencies come from.

    Attributes
    ----------
    model
        Zoo spec.
    mobile_threads
        torch threads of the mobile (measured device).
    cloud_threads
        torch threads of the cloud (measured device); ignored with ``cloud_speedup``.
    cloud_speedup
        When set, the cloud is *derived*: its range latencies are the mobile's divided by this factor.
    mobile_slowdown
        When set, the mobile is *derived*: this machine's ranges at ``mobile_threads`` times this factor (to study
        a slower phone; applied before ``cloud_speedup``).
    mobile_device
        When set, the mobile is *predicted*: this device profile (``litert-fp32-1t``, a calibrated phone) prices its
        ranges instead of measurements here (``mobile_threads`` and ``mobile_slowdown`` then do not apply).
    costs
        One of :data:`COST_SOURCES`: ``auto`` (default) never takes another device's ranges (it measures them here
        instead); ``shipped`` takes the reference machine's as asked, and the result says whether they are this
        machine's.
    input_shape
        Input shape override.
    """

    model: str
    mobile_threads: int = 1
    cloud_threads: int = 2
    cloud_speedup: float | None = None
    costs: str = "auto"
    input_shape: tuple[int, ...] | None = None
    mobile_slowdown: float | None = None
    mobile_device: str | None = None

    def __post_init__(self) -> None:
        from edgeplan.frontends.zoo import model_spec
        from edgeplan.measure import check_thread_count

        object.__setattr__(self, "model", model_spec(self.model))
        check_thread_count(self.mobile_threads)
        check_thread_count(self.cloud_threads)
        for what, value in (("mobile slow-down", self.mobile_slowdown), ("cloud speed-up", self.cloud_speedup)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Real)
                                      or not (math.isfinite(value) and value > 0)):
                raise InvalidInputError(f"{what} must be a finite positive number, got {value!r}")
        if self.mobile_device is not None and self.mobile_slowdown is not None:
            raise InvalidInputError("a predicted mobile (mobile_device) is priced by its profile; drop the mobile "
                                    "slow-down, or calibrate a device profile for the slower phone")
        if self.costs not in COST_SOURCES:
            raise InvalidInputError(f"cost source {self.costs!r} is not one of {', '.join(COST_SOURCES)}")
        if self.costs == "shipped" and self.input_shape is not None:
            raise InvalidInputError("shipped ranges exist for the default input shapes only; drop --input-shape "
                                    "or use --costs measure")


@dataclass(frozen=True)
class OffloadOptions:
    """What the plan optimises and under which limits.

    Attributes
    ----------
    objective
        ``"latency"`` or ``"energy"`` (the mobile's).
    battery_mj, cloud_ms
        Battery budget (eq. 13) and cloud-time limit (eq. 14), or ``None``.
    solver
        ``"dp"`` (default), ``"ilp"`` or ``"brute"``.
    power
        The mobile's power model; None: :data:`DEFAULT_MOBILE_POWER`.
    same_side_splits
        Allow consecutive segments on one side, as the paper's ILP does. Off by default: our ranges are measured
        in one go, so such a split runs the very same operations and its apparent gain is noise.
    """

    objective: str = "latency"
    battery_mj: float | None = None
    cloud_ms: float | None = None
    solver: str = "dp"
    power: MobilePowerModel | None = None
    same_side_splits: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.same_side_splits, bool):
            raise InvalidInputError(f"same_side_splits must be True or False, got {self.same_side_splits!r}")


@dataclass(frozen=True)
class OffloadResult(WithCostsOrigin):
    """A plan with everything it was computed from.

    ``costs_from`` says where the range latencies were measured; :attr:`costs_match_this_device` is False when
    they are another device's (then :attr:`warnings` says so, and the CLI prints it).
    """

    setup: OffloadSetup
    problem: OffloadProblem
    plan: OffloadPlan
    chain: LayerChain = field(repr=False)
    costs_from: CostsOrigin | None = None


    def to_dict(self) -> dict[str, Any]:
        """JSON-able: the plan and every cost input, so that anyone can re-check it; ``costs_from``,
        ``costs_match_this_device`` and ``warnings`` say whose costs they are."""
        net, power, costs = self.problem.network, self.problem.power, self.problem.costs
        return {
            "model": self.setup.model,
            "plan": self.plan.to_dict(),
            "network": {"name": net.name, "up_mbps": net.up_mbps, "down_mbps": net.down_mbps,
                        "alpha_up_mw_per_mbps": net.alpha_up_mw_per_mbps,
                        "alpha_down_mw_per_mbps": net.alpha_down_mw_per_mbps, "beta_mw": net.beta_mw,
                        "source": net.source},
            "mobile_power": {"compute_mw": power.compute_mw, "idle_mw": power.idle_mw, "source": power.source},
            "devices": {"mobile": costs.mobile_label, "cloud": costs.cloud_label},
            "costs": costs.to_dict(),
            "costs_from": None if self.costs_from is None else self.costs_from.to_dict(),
            "costs_match_this_device": self.costs_match_this_device,
            "warnings": list(self.warnings),
            "layer_nodes": [list(layer.nodes) for layer in self.chain.layers],
        }


_REMEDY = "Plan with costs='measure' (CLI: --costs measure) to measure the ranges on this machine."


def _ranges_from(source: str, model: str, threads: int, chain: LayerChain, home: str | Path | None,
                 input_shape: tuple[int, ...] | None, progress: bool, command: str) -> tuple[Any, str, CostsOrigin]:
    """Range latencies ``(n, n)`` of ``model`` at ``threads`` from one source (``store``, ``shipped`` or
    ``measure``), a label saying where they are from, and their origin; :class:`InvalidInputError` when it has
    none."""
    from edgeplan.measure.device import describe_device
    from edgeplan.measure.paths import default_store_path
    from edgeplan.measure.range_files import shipped_range_table
    from edgeplan.measure.range_profile import profile_ranges, range_campaign, range_table_from_records
    from edgeplan.measure.store import Store

    names = [layer.name for layer in chain.layers]
    here = describe_device("torch", threads)
    store_path = default_store_path(home)
    campaign = range_campaign(model, threads, input_shape, here.key)
    if source == "shipped":
        shipped = shipped_range_table(model, threads) if input_shape is None else None
        if shipped is None or shipped.layers != tuple(names) or not shipped.complete:
            raise InvalidInputError(f"no shipped layer ranges of {model} at {threads} thread(s) (the package ships "
                                    "the paper: models at 1 and 2 threads, default input shapes); measure them on "
                                    "this machine with --costs measure (or auto)")
        origin = CostsOrigin("shipped", f"the shipped layer ranges of {model} at {threads} thread(s)",
                             shipped.device, here, _REMEDY)
        return shipped.median_ms, (f"measured: torch, {threads} thread(s), {shipped.device.cpu_model} "
                                   f"({shipped.source})"), origin
    if source == "measure":
        with Store.open(store_path) as store:  # a campaign the user began is finished with its own settings
            profile_ranges(store, model, threads=threads, input_shape=input_shape, progress=progress,
                           command=command)
    if source in ("store", "measure") and store_path.exists():
        with Store.open(store_path) as store:
            rows = store.measurements(campaign=campaign)
            stored = store.device(rows[0].device_key) if rows else None
        table = range_table_from_records(model, names, rows, here, f"Store {store_path}")
        if table.complete:
            origin = CostsOrigin("store" if source == "store" else "measured here",
                                 f"the layer ranges of {model} at {threads} thread(s) in the Store {store_path}",
                                 stored, here, _REMEDY)
            return table.median_ms, (f"measured: torch, {threads} thread(s), {here.cpu_model} "
                                     f"({table.source})"), origin
    raise InvalidInputError(f"the Store at {store_path} has no complete layer ranges of {model} at {threads} "
                            f"thread(s) on this machine; run `edgeplan profile ranges {model} --threads {threads}`")


def offload_inputs(setup: OffloadSetup, home: str | Path | None = None, progress: bool = False,
                   command: str = "") -> tuple[OffloadCosts, LayerChain, CostsOrigin]:
    """The planner's cost inputs for ``setup.model`` (see the module docstring) and where they were measured.

    With ``costs="auto"`` both sides come from the same source: this machine's Store, else the shipped file when
    it was measured on this very device (:func:`~edgeplan.measure.device.same_device`), else measured now; so that
    a plan never mixes two machines' measurements, nor takes another device's for this one's. An explicit
    ``costs="shipped"`` or ``"store"`` is used as asked; the returned origin says whether it is this machine's.

    Returns
    -------
    tuple
        The :class:`~edgeplan.planners.offload.OffloadCosts`, the model's layer chain and the
        :class:`~edgeplan.measure.cost_origin.CostsOrigin` of the measured ranges.
    """
    from edgeplan.frontends.zoo import load_graph

    chain = layer_chain(load_graph(setup.model, setup.input_shape))
    predicted = _predicted_mobile(setup, chain, home)
    threads = ([] if predicted is not None else [setup.mobile_threads]) + \
        ([] if setup.cloud_speedup is not None else [setup.cloud_threads])
    sources = ("store", "shipped", "measure") if setup.costs == "auto" else (setup.costs,)
    problems: list[str] = []
    measured: list[tuple[Any, str, CostsOrigin]] = []
    for source in sources if threads else ():
        try:
            measured = [_ranges_from(source, setup.model, t, chain, home, setup.input_shape, progress, command)
                        for t in threads]
        except InvalidInputError as e:
            problems.append(str(e))
            continue
        if setup.costs == "auto" and not all(origin.matches_here for _, _, origin in measured):
            problems.append(f"the {source} ranges were measured on another device")
            measured = []
            continue
        break
    if threads and not measured:
        raise InvalidInputError("; ".join(problems))
    if predicted is not None:
        measured.insert(0, predicted)
    mobile_ms, mobile_label, origin = measured[0]  # a predicted mobile's origin: another device's, no warning
    if not all(o.matches_here for _, _, o in measured if o.here is not None):  # a mismatch speaks for all
        origin = next(o for _, _, o in measured if o.here is not None and not o.matches_here)
    if setup.mobile_slowdown is not None:
        mobile_ms = mobile_ms * setup.mobile_slowdown
        mobile_label = f"derived: {mobile_label} x {setup.mobile_slowdown:.3g} (a phone that much slower)"
    if setup.cloud_speedup is not None:
        cloud_ms = mobile_ms / setup.cloud_speedup
        factor = f"{setup.cloud_speedup:g}"
        cloud_label = f"derived: the mobile's ranges / {factor} (a cloud {factor}x faster)"
    else:
        cloud_ms, cloud_label, _ = measured[1]
    costs = OffloadCosts(tuple(layer.name for layer in chain.layers), mobile_ms, cloud_ms, chain.boundary_bytes,
                         mobile_label, cloud_label)
    return costs, chain, origin


def _predicted_mobile(setup: OffloadSetup, chain: LayerChain, home: str | Path | None
                      ) -> tuple[Any, str, CostsOrigin] | None:
    """The mobile's range latencies ``(n, n)`` predicted on ``setup.mobile_device``, its label and origin; None for a
    measured mobile."""
    if setup.mobile_device is None:
        return None
    import numpy as np

    from edgeplan.decisions.predicted_costs import predicted_costs

    costs = predicted_costs(chain.graph, setup.mobile_device, home=home)
    layer_of = {node: k for k, layer in enumerate(chain.layers) for node in layer.nodes}
    per_layer: list[list[int]] = [[] for _ in chain.layers]
    for i, node in enumerate(costs.op_nodes):
        if node in layer_of:
            per_layer[layer_of[node]].append(i)
    n = len(chain.layers)
    ranges = np.zeros((n, n))
    for i in range(n):
        kernels: list[int] = []
        for j in range(i, n):
            kernels += per_layer[j]
            ranges[i, j] = costs.total_of(kernels)
    origin = CostsOrigin("model", f"{costs.label}, {setup.model}", None, None)
    return ranges, costs.label, origin


def offload_costs(setup: OffloadSetup, home: str | Path | None = None, progress: bool = False,
                  command: str = "") -> tuple[OffloadCosts, LayerChain]:
    """The planner's cost inputs for ``setup.model``: :func:`offload_inputs` without the origin."""
    costs, chain, _ = offload_inputs(setup, home, progress, command)
    return costs, chain


def plan_offload(setup: str | OffloadSetup, network: str | NetworkModel = "wifi",
                 options: OffloadOptions | None = None, *, home: str | Path | None = None, progress: bool = False,
                 command: str = "") -> OffloadResult:
    """Plan which layers of a model run on the mobile and which in the cloud.

    Parameters
    ----------
    setup
        A zoo string (the mobile at 1 thread, the cloud at 2, costs ``auto``) or an :class:`OffloadSetup`.
    network
        A preset name (``3g``, ``4g``, ``wifi``) or a :class:`NetworkModel`.
    options
        Objective, limits, solver and power model (default: :class:`OffloadOptions`).
    home, progress, command
        Store location, progress bars while measuring, command recorded with new measurements.

    Returns
    -------
    OffloadResult
        With ``costs_from`` and ``costs_match_this_device``: where the ranges were measured, and whether on this
        machine (``costs="auto"`` measures here rather than take another device's; an explicit ``"shipped"``
        that is another device's is used, and ``warnings`` says so).

    Examples
    --------
    >>> import edgeplan
    >>> r = edgeplan.plan_offload(edgeplan.OffloadSetup("paper:alexnet", costs="shipped"), "wifi")  # doctest: +SKIP
    >>> r.plan.latency_ms, r.costs_match_this_device  # doctest: +SKIP
    """
    if isinstance(setup, str):
        setup = OffloadSetup(setup)
    if not isinstance(setup, OffloadSetup):
        raise InvalidInputError(f"plan_offload needs a zoo string or an OffloadSetup (e.g. "
                                f"OffloadSetup('paper:alexnet')), got {type(setup).__name__}")
    options = options or OffloadOptions()
    if not isinstance(options, OffloadOptions):
        raise InvalidInputError(f"options must be an OffloadOptions, got {type(options).__name__}")
    costs, chain, origin = offload_inputs(setup, home, progress, command)
    net = network_preset(network) if isinstance(network, str) else network
    problem = OffloadProblem(costs, net, options.power or DEFAULT_MOBILE_POWER, options.objective, options.battery_mj,
                             options.cloud_ms, options.same_side_splits)
    return OffloadResult(setup, problem, solve(problem, options.solver), chain, origin)


def run_offload(result: OffloadResult, repeats: int = 5, warmup: int = 1) -> OffloadRun:
    """Execute ``result``'s plan for real across two processes and measure it beside its prediction.

    Raises
    ------
    InvalidInputError
        When the cloud is derived (a speed-up, not a device that can run).
    """
    if result.setup.mobile_device is not None:
        raise InvalidInputError(f"this plan's mobile is predicted on the device profile {result.setup.mobile_device} "
                                "(a device this machine does not run); --run executes plans of measured devices")
    if result.setup.cloud_speedup is not None or result.setup.mobile_slowdown is not None:
        raise InvalidInputError("this plan has a derived device (a speed ratio, not a device that can run); plan "
                                "with measured devices (--mobile-threads, --cloud-threads) to use --run")
    from edgeplan.measure.graph_exec import GraphExecutor
    from edgeplan.runtimes.split import SplitRunOptions, run_split

    setup, net = result.setup, result.problem.network
    executor = GraphExecutor(result.chain.graph)
    segments = [(s.first, s.last, s.side) for s in result.plan.segments]
    options = SplitRunOptions(mobile_threads=setup.mobile_threads, cloud_threads=setup.cloud_threads,
                              repeats=repeats, warmup=warmup, input_shape=setup.input_shape)
    split = run_split(executor, result.chain, segments, model=setup.model, up_mbps=net.up_mbps,
                      down_mbps=net.down_mbps, options=options)
    return OffloadRun(split, result.plan.latency_ms)


@dataclass(frozen=True)
class OffloadRun:
    """A plan executed for real across two processes (:func:`run_offload`), beside its prediction.

    Attributes
    ----------
    split
        The measured run: median latency and samples, bytes up and down, output error against a local run.
    predicted_latency_ms
        The plan's predicted end-to-end latency.
    """

    split: SplitRun
    predicted_latency_ms: float

    @property
    def error_rel(self) -> float:
        """Measured over predicted latency, minus 1."""
        return self.split.latency_ms / self.predicted_latency_ms - 1

    def to_dict(self) -> dict[str, Any]:
        """JSON-able, as ``edgeplan offload --run --json`` prints it under ``run``."""
        run = self.split
        return {"measured_latency_ms": run.latency_ms, "samples_ms": list(run.samples_ms),
                "predicted_latency_ms": self.predicted_latency_ms, "error_rel": self.error_rel,
                "uploaded_bytes": run.uploaded_bytes, "downloaded_bytes": run.downloaded_bytes,
                "max_abs_output_error": run.max_abs_error}


def offload_lookup(result: OffloadResult, up_mbps_grid: Sequence[float], down_mbps_grid: Sequence[float] | None = None,
                   *, like: str = "wifi") -> list[LookupEntry]:
    """The lookup table a phone would store (eshratifar2018, end of §3.2): ``result``'s problem solved again at every
    (uplink, downlink) speed pair of a grid.

    The costs, power model, objective and limits are ``result``'s; at every grid point the radio power model is the
    ``like`` preset's, and consecutive segments on one side are allowed.

    Parameters
    ----------
    result
        A plan of :func:`plan_offload`.
    up_mbps_grid, down_mbps_grid
        The speeds in Mbit/s; ``down_mbps_grid`` None: the uplink's.
    like
        The network preset whose radio power model is used.

    Returns
    -------
    list of LookupEntry
        Row-major, uplink speeds outer; a grid point without a feasible plan has ``pattern == ""``.
    """
    problem = result.problem
    downs = up_mbps_grid if down_mbps_grid is None else down_mbps_grid
    return lookup_table(problem.costs, problem.power, problem.objective, up_mbps_grid, downs, like=like,
                        options=LookupOptions(battery_mj=problem.battery_mj, cloud_ms=problem.cloud_ms, solver="dp"))
