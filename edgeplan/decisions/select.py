"""Primitive selection for a network, end to end (mulder2020 Fig. 2): costs from a profiled table or a performance
model (:mod:`edgeplan.decisions.selection_costs`), then the PBQP planner; where the costs came from, and the selected
network's real run.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgeplan.costmodels.primitive_devices import SHIPPED_MODEL, SHIPPED_PRIMITIVES
from edgeplan.decisions.selection_costs import (
    merged_tables,
    model_costs,
    own_formats,
    single_primitive_choice,
    table_costs,
    with_flow_costs,
)
from edgeplan.errors import InvalidInputError
from edgeplan.measure.cost_origin import CostsOrigin, WithCostsOrigin
from edgeplan.measure.device import same_device
from edgeplan.planners.pbqp.costgraph import (
    SelectionCosts,
    SelectionPlan,
    select_primitives,
)
from edgeplan.planners.pbqp.network import SelectionStructure

if TYPE_CHECKING:
    from edgeplan.measure.device import DeviceDescriptor
    from edgeplan.runtimes.selected import SelectionRun

__all__ = ["NOT_IN_TABLES", "OUTPUT_TOLERANCE", "SHIPPED", "SHIPPED_MODEL", "SHIPPED_TABLES", "ModelSelection",
           "SelectOptions", "SelectionRunResult", "check_selection_costs", "run_selected", "runnable", "runs_here",
           "select", "selection_costs_origin"]


SHIPPED = SHIPPED_PRIMITIVES
"""The folder of the shipped tables and performance model (the reference machine's)."""
SHIPPED_TABLES = ("reference_cpu_1t.csv", "reference_cpu_1t_abovecap.csv")
"""The reference machine's measured tables (main campaign and the layers above its work cap)."""


def runnable(shape: tuple[int, int, int, int, int, int], torch_device: str = "cpu") -> bool:
    """Whether at least one of edgeplan's primitives that run on ``torch_device`` applies to a conv shape
    ``(c, k, im, f, s, padding)``."""
    from edgeplan.primitives import all_primitives
    from edgeplan.primitives.spec import ConvSpec

    c, k, im, f, s, p = shape
    spec = ConvSpec(c, k, im, f, s, padding=p)
    return any(prim.applies(spec) and prim.supports_device(torch_device) for prim in all_primitives())


#: Why a conv layer is left to PyTorch under measured costs when its shape is missing from the tables.
NOT_IN_TABLES = "not in the measured tables"


def unrunnable(shape: tuple[int, int, int, int, int, int], torch_device: str = "cpu") -> str | None:
    """``None`` when a primitive that runs on ``torch_device`` applies to a conv shape ``(c, k, im, f, s, padding)``
    (:func:`runnable`), else why the layer is left to PyTorch."""
    return None if runnable(shape, torch_device) else f"no primitive applies on {torch_device}"


def check_selection_costs(costs: str, torch_device: str = "cpu", *, tables: Sequence[str | Path] | None = None,
                          model_dir: str | Path | None = None) -> None:
    """Refuse a cost source :func:`select` cannot use, before anything is loaded or measured.

    Parameters
    ----------
    costs
        ``predicted`` or ``measured``.
    torch_device
        Torch device selected for: ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.
    tables
        The measured tables given (``None``: the shipped ones).
    model_dir
        The performance model given (``None``: the shipped one).

    Raises
    ------
    InvalidInputError
        An unknown ``costs`` or ``torch_device``; a GPU without its own tables or model (the shipped ones are the
        reference CPU's).
    """
    from edgeplan.measure.runners import torch_device as resolve

    device = torch_device
    if costs not in ("predicted", "measured"):
        raise InvalidInputError(f"costs must be 'predicted' or 'measured', got {costs!r}")
    resolve(device, available=False)
    if device != "cpu" and costs == "measured" and not tables:
        raise InvalidInputError(f"the shipped tables are the reference CPU's; select for {device} with tables measured "
                                "on that GPU (--data; `edgeplan profile primitives --torch-device cuda` makes them, "
                                "and the repository's data/primitives/networks_cuda.csv and reference_cuda.csv are an "
                                "NVIDIA H200's)")
    if device != "cpu" and costs == "predicted" and not model_dir:
        raise InvalidInputError(f"the shipped performance model is the reference CPU's; select for {device} with a "
                                "model of that GPU: one moved there (`edgeplan primitives transfer --data TABLE.csv "
                                "--name NAME` on a table of `profile primitives --torch-device cuda`, then --device "
                                "NAME) or one fitted on its tables (`edgeplan primitives fit --data TABLE.csv --out "
                                "DIR`, then --model DIR)")


@dataclass(frozen=True)
class ModelSelection(WithCostsOrigin):
    """A zoo model's structure, costs and plan (``edgeplan select``), and where the costs were measured.

    :attr:`costs_match_this_device` is False when the costs are another device's (the shipped tables and model are
    the reference machine's): :attr:`warnings` then says so, and the CLI prints it.

    Attributes
    ----------
    torch_device
        The torch device it selects for (``cpu``, ``cuda``, ``cuda:N``).
    device_warnings
        What the calibration of the device whose model priced it says of this selection (another thread count).
    notes
        What was left out of the predicted time, and why (the layout-transparent layers of a device not here).
    """

    spec: str
    structure: SelectionStructure
    costs: SelectionCosts
    plan: SelectionPlan
    estimate_s: float
    costs_from: CostsOrigin | None = None
    torch_device: str = "cpu"
    device_warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def warnings(self) -> tuple[str, ...]:
        """What a user must read before trusting the plan: the device's calibration, then costs of another
        device."""
        return self.device_warnings + super().warnings

    def to_dict(self) -> dict[str, Any]:
        """JSON-able, as ``edgeplan select --json`` prints it (without ``run``): ``model``, ``costs``, ``solver``,
        ``optimal``, the predicted times, the timings of the optimisation, the layers left to PyTorch and why, every
        layer's choice, the transformations, and ``costs_from``, ``costs_match_this_device``, ``torch_device``,
        ``warnings`` and ``notes``."""
        plan, structure = self.plan, self.structure
        return {
            "model": self.spec, "costs": plan.source, "solver": plan.solution.solver, "optimal": plan.solution.optimal,
            "predicted_ms": plan.total_ms, "primitives_ms": plan.primitives_ms, "transforms_ms": plan.transforms_ms,
            "optimisation_s": self.estimate_s + plan.optimisation_s, "estimate_s": self.estimate_s,
            "solve_s": plan.optimisation_s, "fixed_layers": list(structure.fixed),
            "fixed_reasons": dict(zip(structure.fixed, structure.fixed_reasons, strict=True)),
            "layers": [{"name": n.name, "kind": n.kind, "primitive": n.primitive, "input_layout": n.input_layout,
                        "output_layout": n.output_layout, "predicted_ms": n.latency_ms,
                        "shape": dict(zip(("c", "k", "im", "f", "s", "padding"), s.conv or (), strict=False))}
                       for n, s in zip(plan.nodes, structure.nodes, strict=True)],
            "transforms": [{"at": t.at, "tensor": list(t.tensor), "from": t.src, "to": t.dst,
                            "predicted_ms": t.latency_ms} for t in plan.transforms],
            "costs_from": None if self.costs_from is None else self.costs_from.to_dict(),
            "costs_match_this_device": self.costs_match_this_device,
            "torch_device": self.torch_device,
            "warnings": list(self.warnings),
            "notes": list(self.notes),
        }


_REMEDY = ("Measure this machine's primitives (`edgeplan profile primitives --export TABLE.csv`, then `edgeplan "
           "primitives transfer --data TABLE.csv --name NAME` and select with --device NAME) or give tables measured "
           "here.")


def _provenance_device(csv_path: Path) -> DeviceDescriptor | None:
    """The device recorded beside a table (``NAME.provenance.json``, as ``profile primitives --export`` writes it), or
    None."""
    import json

    from edgeplan.measure.device import DeviceDescriptor

    path = csv_path.with_name(csv_path.stem + ".provenance.json")
    try:
        devices = json.loads(path.read_text()).get("devices") or []
        descriptor = devices[0].get("descriptor") if devices else None
        return None if descriptor is None else DeviceDescriptor.from_dict(descriptor)
    except (OSError, ValueError, AttributeError, TypeError, InvalidInputError):
        return None


def selection_costs_origin(costs: str, tables: Sequence[str | Path] | None, model_dir: str | Path | None,
                           threads: int, torch_device: str = "cpu") -> CostsOrigin:
    """Where :func:`select`'s costs were measured, and the machine it selects for when that is this one.

    A table's device is read from the provenance file beside it; a performance model's from the measured layers a
    calibration saved beside it (``measured.csv``), or, for the shipped model, from the shipped tables it was
    fitted on. Where nothing records it, the device is None (never taken as this one).
    """
    from edgeplan.errors import EdgeplanError
    from edgeplan.measure.device import describe_device

    try:
        here: DeviceDescriptor | None = describe_device("torch", threads, torch_device=torch_device)
    except EdgeplanError:  # selecting for a GPU this machine lacks: the plan runs elsewhere
        here = None
    if costs == "measured":
        paths = [Path(t) for t in tables] if tables else [SHIPPED / t for t in SHIPPED_TABLES]
        devices = [_provenance_device(p) for p in paths]
        device = next((d for d in devices if d is None or here is None or not same_device(d, here)), devices[0])
        label = "the shipped tables" if not tables else "the tables " + ", ".join(str(p) for p in paths)
        return CostsOrigin("shipped" if not tables else "table", label, device, here, _REMEDY)
    folder = Path(model_dir) if model_dir is not None else SHIPPED / SHIPPED_MODEL
    if model_dir is None:
        device = _provenance_device(SHIPPED / SHIPPED_TABLES[0])
    else:
        device = _provenance_device(folder / "measured.csv")
    label = "the shipped performance model" if model_dir is None else f"the performance model {folder}"
    return CostsOrigin("shipped" if model_dir is None else "model", label, device, here, _REMEDY)


@dataclass(frozen=True)
class SelectOptions:
    """How :func:`select` solves, and whether it measures the layout-transparent layers here.

    Attributes
    ----------
    solver
        The PBQP solver: ``exact``, ``heuristic`` or ``ilp``.
    flow_threads
        Also measure the layout-transparent layers (pooling, batch norm, ReLU) in each layout on this machine with
        this many threads and add them to the costs (:func:`with_flow_costs`); ``None``: leave them out, as
        mulder2020 does. Where the network's torch device is not on this machine, they are left out and the
        selection's ``notes`` say so.
    """

    solver: str = "exact"
    flow_threads: int | None = None


def _kind(torch_device: str) -> str:
    """``cpu`` or ``cuda``: the kind of processor a torch device name designates (``cuda:1`` is a ``cuda``)."""
    return torch_device.partition(":")[0]


def runs_here(torch_device: str) -> bool:
    """Whether ``torch_device`` is on this machine (the CPU always is; CUDA imports torch to ask)."""
    if torch_device == "cpu":
        return True
    import torch

    return bool(torch.cuda.is_available())


def _device_model(device: str, home: str | Path | None, torch_device: str | None,
                  flow_threads: int | None) -> tuple[Path, str, tuple[str, ...]]:
    """The performance model folder of ``device``, the torch device it selects for (where it was calibrated unless
    ``torch_device`` says otherwise) and the warnings of its calibration."""
    from edgeplan.costmodels.primitive_devices import device_calibration, primitive_model_folder

    folder = primitive_model_folder(home, device)
    if not (folder / "model.json").is_file():
        raise InvalidInputError(f"device {device!r} has no primitive performance model ({folder}); create it with "
                                f"`edgeplan primitives transfer --data TABLE.csv --name {device}`")
    calibration = device_calibration(folder)
    measured_at = None if calibration is None else calibration.threads
    warnings: tuple[str, ...] = ()
    if measured_at is not None and flow_threads is not None and measured_at != flow_threads:
        warnings = (f"device {device!r} was calibrated at {measured_at} thread(s); --threads {flow_threads} runs "
                    "and prices flow layers at another setting",)
    measured_on = None if calibration is None else calibration.processor
    if measured_on is not None and torch_device is not None and _kind(measured_on) != _kind(torch_device):
        raise InvalidInputError(f"device {device!r} was calibrated on {measured_on}, and --torch-device "
                                f"{torch_device} is another kind of processor: its costs do not price it; drop "
                                "--torch-device or calibrate a device there")
    return folder, torch_device or measured_on or "cpu", warnings


def select(model: str, *, costs: str = "measured", model_dir: str | Path | None = None,
           tables: Sequence[str | Path] | None = None, device: str | None = None, torch_device: str | None = None,
           options: SelectOptions | None = None, home: str | Path | None = None) -> ModelSelection:
    """Select the primitive of every conv layer of a model with edgeplan's own primitives (PBQP over predicted or
    measured costs).

    Parameters
    ----------
    model
        A zoo string (e.g. ``torchvision:resnet18``) or an ONNX path.
    costs
        ``measured`` (profiled tables) or ``predicted`` (a performance model).
    model_dir
        The performance model (default: the shipped NN2 of the reference machine).
    tables
        Measured tables in the mulder2021 format (default: the shipped ones). With ``measured``, conv layers
        they have no row for stay in PyTorch (layout-fixed).
    device
        A device of the edgeplan home whose primitive performance model prices the layers (made by ``edgeplan
        primitives transfer --name NAME``; with ``predicted``, instead of ``model_dir``). It selects for the torch
        device it was calibrated on, and the result warns when ``options.flow_threads`` differs from the threads
        it was calibrated at.
    torch_device
        Torch device the network is selected for: ``"cpu"``, ``"cuda"`` or ``"cuda:N"`` (default: where
        ``device`` was calibrated, else ``"cpu"``). Only the primitives that run there are options, and the
        layout-transparent layers are measured there. The shipped tables and model are the reference CPU's, so a
        GPU needs its own (``tables``, ``model_dir`` or ``device``).
    options
        The solver and the threads of the layout-transparent layers (:class:`SelectOptions`).
    home
        The edgeplan home (its devices).

    Returns
    -------
    ModelSelection
        With ``costs_from`` and ``costs_match_this_device``: the shipped tables and model are another device's
        unless this is the machine that measured them, and ``warnings`` says so.

    Raises
    ------
    InvalidInputError
        An unknown ``costs`` or ``torch_device``; a GPU without its own tables or model; a ``device`` without a
        primitive performance model, given with ``measured`` or ``model_dir``, or calibrated on another kind of
        processor than ``torch_device``.
    """
    from edgeplan.frontends.zoo import load_graph
    from edgeplan.planners.pbqp.network import selection_structure

    options = options or SelectOptions()
    flow_threads = options.flow_threads
    device_warnings: tuple[str, ...] = ()
    if device is not None:
        if costs != "predicted" or model_dir is not None:
            raise InvalidInputError("--device names a calibrated performance model: use it with --costs predicted "
                                    "and without --model")
        model_dir, torch_device, device_warnings = _device_model(device, home, torch_device, flow_threads)
    target = torch_device or "cpu"
    check_selection_costs(costs, target, tables=tables, model_dir=model_dir)
    if costs == "predicted" and tables:
        raise InvalidInputError("tables are measured costs; with costs='predicted' give model_dir, or use "
                                "costs='measured'")
    if costs == "measured" and model_dir is not None:
        raise InvalidInputError("model_dir is a performance model; with costs='measured' give tables, or use "
                                "costs='predicted'")
    notes: tuple[str, ...] = ()
    if flow_threads is not None and not runs_here(target):
        notes = (f"{target} is not available here, so pooling, batch norm and ReLU, measured where the network runs, "
                 "are left out of the predicted time",)
        flow_threads = None
    graph = load_graph(model)
    formats = own_formats(target)
    start = time.perf_counter()
    if costs == "measured":
        data = merged_tables(tables or [SHIPPED / t for t in SHIPPED_TABLES])
        keys = {tuple(int(v) for v in row) for row in data.features}
        structure = selection_structure(graph, why_not=lambda s: unrunnable(s, target) or (
            None if s[:5] in keys else NOT_IN_TABLES))
        start = time.perf_counter()
        found = table_costs(structure, data, formats)
    else:
        from edgeplan.costmodels import load_performance_model

        folder = Path(model_dir) if model_dir is not None else SHIPPED / SHIPPED_MODEL
        if not (folder / "model.json").exists():
            raise InvalidInputError(f"no performance model in {folder}; fit one with `edgeplan primitives fit "
                                    "--data TABLE.csv --out DIR` and pass --model DIR")
        performance = load_performance_model(folder)
        structure = selection_structure(graph, why_not=lambda s: unrunnable(s, target))
        start = time.perf_counter()
        found = model_costs(structure, performance, formats)
    estimated = time.perf_counter() - start
    if flow_threads is not None:
        from edgeplan.runtimes.selected import measure_flow_costs

        found = with_flow_costs(structure, found, measure_flow_costs(structure.flow, threads=flow_threads,
                                                                     torch_device=target))
    plan = select_primitives(structure, found, solver=options.solver)
    origin = selection_costs_origin(costs, tables, model_dir, flow_threads or 1, target)
    return ModelSelection(model, structure, found, plan, estimated, origin, target, device_warnings, notes)


#: The largest relative output error (``max |y - y_ref| / max |y_ref|``) at which a selected network computes what
#: PyTorch computes: the primitives' stated tolerances go up to 1e-4 (Winograd F(4,3)), and errors compound over a
#: network's layers.
OUTPUT_TOLERANCE = 1e-3


@dataclass(frozen=True)
class SelectionRunResult:
    """A selection run for real (:func:`run_selected`), and whether its outputs match PyTorch's.

    Attributes
    ----------
    run
        The latency of every variant (``pytorch``, ``selected`` and, when one applies everywhere, ``single``) and
        their output errors against PyTorch.
    tolerance
        The largest relative output error that matches (:data:`OUTPUT_TOLERANCE`).
    """

    run: SelectionRun
    tolerance: float = OUTPUT_TOLERANCE

    def matches(self, label: str) -> bool | None:
        """Whether variant ``label``'s outputs match PyTorch's within :attr:`tolerance` (None: not compared)."""
        error = self.run.output_error.get(label)
        return None if error is None else error <= self.tolerance

    @property
    def outputs_match(self) -> bool:
        """Whether every variant's outputs match PyTorch's within :attr:`tolerance`."""
        return all(e <= self.tolerance for e in self.run.output_error.values())

    def to_dict(self) -> dict[str, Any]:
        """JSON-able, as ``edgeplan select --run --json`` prints it under ``run``: ``device``, ``threads``,
        ``single_primitive``, ``output_error``, ``outputs_match``, ``latency_ms`` (median, quartiles and runs of
        each variant) and ``speedup_vs_pytorch``."""
        run = self.run
        return {
            "device": run.torch_device, "threads": run.threads, "single_primitive": run.single_primitive,
            "output_error": run.output_error, "outputs_match": self.outputs_match,
            "latency_ms": {k: {"median": v.median_ms, "q1": v.q1_ms, "q3": v.q3_ms, "runs": v.runs}
                           for k, v in run.latency.items()},
            "speedup_vs_pytorch": run.speedup,
        }


def run_selected(selection: ModelSelection, *, threads: int = 1, rounds: int = 15) -> SelectionRunResult:
    """Run a selection for real: build the selected network, compare its outputs with PyTorch's, and time it against
    PyTorch and the best single primitive (:func:`single_primitive_choice`), interleaved round by round.

    Parameters
    ----------
    selection
        The plan of :func:`select`; the network runs on its ``torch_device``.
    threads
        Intra-op threads of every run.
    rounds
        Timed runs of each variant.

    Returns
    -------
    SelectionRunResult
        ``outputs_match`` is False when a variant's outputs differ from PyTorch's by more than
        :data:`OUTPUT_TOLERANCE` (relative).

    Raises
    ------
    InvalidInputError
        The model is an ONNX file (no PyTorch modules to swap) or its input is not a batch of one.
    MeasurementError
        The selection's torch device is CUDA and this machine has none.
    """
    from edgeplan.runtimes.selected import run_selection

    single = single_primitive_choice(selection.structure, selection.costs)
    run = run_selection(selection.spec, selection.plan.choices(), selection.structure.conv_inputs(),
                        single[0] if single else None, threads=threads, rounds=rounds,
                        torch_device=selection.torch_device)
    return SelectionRunResult(run)
