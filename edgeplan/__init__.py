"""edgeplan: latency prediction and deployment planning for neural networks on edge hardware.

One function per job, each returning a frozen result with ``to_dict()`` (what the CLI prints with ``--json``):

- :func:`load_graph` a model's typed graph (:class:`~edgeplan.ir.graph.Graph`);
- :func:`measure_latency` its latency on this machine, stored with its provenance;
- :func:`predict` its latency on a device profile, without running it;
- :func:`calibrate` a device profile from a few latencies measured on the device;
- :func:`select` the convolution primitive of every layer;
- :func:`plan_offload` which layers run on a mobile and which in the cloud;
- :func:`plan_partition` a pipeline over a cluster of edge devices.

A ``device`` is always a device profile name; a torch device is a ``torch_device``. Importing this package is
cheap: torch, onnx and the heavy libraries load only when a function needs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from edgeplan._version import __version__

if TYPE_CHECKING:
    from edgeplan.decisions.calibrate import Calibration, MeasureHere, calibrate
    from edgeplan.decisions.measure import measure_latency
    from edgeplan.decisions.offload import OffloadOptions, OffloadResult, OffloadSetup, plan_offload
    from edgeplan.decisions.partition import Cluster, PartitionOptions, PartitionResult, plan_partition
    from edgeplan.decisions.predict import ModelPrediction, predict
    from edgeplan.decisions.select import ModelSelection, SelectOptions, select
    from edgeplan.frontends.zoo import load_graph
    from edgeplan.ir.graph import Graph
    from edgeplan.measure.model_latency import ModelMeasurement

__all__ = [
    "Calibration",
    "Cluster",
    "Graph",
    "MeasureHere",
    "ModelMeasurement",
    "ModelPrediction",
    "ModelSelection",
    "OffloadOptions",
    "OffloadResult",
    "OffloadSetup",
    "PartitionOptions",
    "PartitionResult",
    "SelectOptions",
    "__version__",
    "calibrate",
    "load_graph",
    "measure_latency",
    "plan_offload",
    "plan_partition",
    "predict",
    "select",
]

#: Where each public name lives, imported on first use (PEP 562).
_LAZY = {
    "load_graph": "edgeplan.frontends.zoo",
    "Graph": "edgeplan.ir.graph",
    "ModelMeasurement": "edgeplan.measure.model_latency",
    "measure_latency": "edgeplan.decisions.measure",
    "predict": "edgeplan.decisions.predict",
    "ModelPrediction": "edgeplan.decisions.predict",
    "calibrate": "edgeplan.decisions.calibrate",
    "Calibration": "edgeplan.decisions.calibrate",
    "MeasureHere": "edgeplan.decisions.calibrate",
    "select": "edgeplan.decisions.select",
    "ModelSelection": "edgeplan.decisions.select",
    "SelectOptions": "edgeplan.decisions.select",
    "plan_offload": "edgeplan.decisions.offload",
    "OffloadSetup": "edgeplan.decisions.offload",
    "OffloadOptions": "edgeplan.decisions.offload",
    "OffloadResult": "edgeplan.decisions.offload",
    "plan_partition": "edgeplan.decisions.partition",
    "Cluster": "edgeplan.decisions.partition",
    "PartitionOptions": "edgeplan.decisions.partition",
    "PartitionResult": "edgeplan.decisions.partition",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'edgeplan' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
