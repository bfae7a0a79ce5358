"""``make demo``: a short tour on models built locally (nothing is downloaded).

Shows the zoo, a summary of several models' work, the per-layer table of one model, real end-to-end latency
measurements on this machine (stored in the Store under ``$EDGEPLAN_HOME``), a LiteRT prediction beside its
measurement, offloading plans and a real split run, a pipeline plan over a simulated edge cluster, a family of
convolution primitives, a primitive selection run for real, a latency prediction with its per-op breakdown beside a
measurement of the same model, and an offloading plan for the mobile's energy.
"""

from __future__ import annotations

import sys

from edgeplan.cli.main import main as cli_main
from edgeplan.decisions.select import SHIPPED

__all__ = ["main"]

SUMMARY_MODELS = (
    "torchvision:resnet50",
    "torchvision:mobilenet_v2",
    "timm:efficientnet_b0",
    "paper:pix2pix",
    "nb201:|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|skip_connect~0|nor_conv_3x3~1|nor_conv_3x3~2|",
    "synthetic:42",
)


def _summary() -> None:
    from rich.progress import track
    from rich.table import Table

    from edgeplan.frontends.zoo import load_graph
    from edgeplan.reports.tables import human, print_table

    table = Table(title="models imported to the edgeplan IR", header_style="bold")
    for col in ("model", "nodes", "conv/linear", "MACs", "FLOPs", "params", "activations"):
        table.add_column(col, justify="left" if col == "model" else "right", overflow="fold")
    for spec in track(SUMMARY_MODELS, description="importing", transient=True):
        t = load_graph(spec).totals()
        table.add_row(spec, str(t.nodes), str(t.compute_nodes), human(t.macs), human(t.flops), human(t.params),
                      human(t.activation_bytes, "B"))
    print_table(table)


def _run(*args: str) -> None:
    print(f"\n$ edgeplan {' '.join(args)}", flush=True)
    code = cli_main(list(args))
    if code:
        raise SystemExit(code)


def main() -> int:
    """Run the tour; return the exit code."""
    _run("zoo")
    print("\n$ (python) edgeplan.frontends.zoo.load_graph(...) for a few models", flush=True)
    _summary()
    _run("inspect", "paper:alexnet")
    _run("measure", "torchvision:resnet18", "--threads", "1")
    _run("measure", "torchvision:resnet18", "--threads", "2")
    _run("measure", "torchvision:resnet18", "--threads", "2", "--runtime", "onnxruntime")
    # the runtime Android apps ship: the model converted by litert-torch, run by LiteRT with XNNPACK, predicted from
    # its graph on the shipped LiteRT profile and measured here beside the prediction
    _run("predict", "torchvision:resnet18", "--device", "litert-fp32-1t", "--measure", "5")
    # offloading (eshratifar2018) on the shipped layer-range measurements: a plan, then a real split execution
    _run("offload", "paper:overfeat", "--network", "wifi", "--cloud-speedup", "11.25", "--costs", "shipped")
    _run("offload", "paper:chair", "--network", "wifi", "--costs", "shipped", "--run")
    # edge-cluster pipelines (parthasarathy2022): ResNet-50 over 50 simulated 64 MB nodes, the paper's
    # transfer-only model (no compute measured), edgeplan's planner
    _run("partition", "torchvision:resnet50", "--nodes", "50", "--memory-mb", "64", "--simulate", "0", "--no-compute")
    # the convolution primitive library (mulder2020): the Winograd 3x3 family
    _run("primitives", "list", "--family", "wino3")
    # primitive selection with PBQP on the shipped measured table, then the optimized network run for real
    _run("select", "torchvision:resnet18", "--costs", "measured", "--data",
         str(SHIPPED / "reference_cpu_1t.csv"), "--run", "--threads", "1")
    # the same selection from the shipped NN2 performance model: no table, no primitive profiling
    _run("select", "torchvision:googlenet", "--costs", "predicted")
    # latency prediction (li2023): a held-out synthetic network predicted from its graph, then measured here
    _run("predict", "synthetic:950", "--device", "torch-fp32-1t", "--method", "gbdt", "--breakdown", "--measure", "5")
    # offloading for the mobile's battery instead of its latency: AlexNet's plan and both baselines' energy (the
    # paper's full table: `python -m experiments.eshratifar2018`, outside the wheel)
    _run("offload", "paper:alexnet", "--network", "wifi", "--costs", "shipped", "--objective", "energy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
