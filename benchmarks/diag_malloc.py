"""Whether glibc's allocator slows some networks' operations down: op times with its default, adaptive settings
against the same with its memory never handed back to the system.

glibc's ``malloc`` serves large blocks with ``mmap`` and trims the top of its heap when enough of it is free (both
thresholds adapt as blocks are freed); memory handed back and taken again is touched anew, and the page faults land
in whichever operation writes the fresh output. Whether a network pays that depends on the sequence of its tensors'
sizes (and those of the reference model timed before it), not on any one operation's features, so it is a context
that no per-op predictor can see. Each model is profiled as ``edgeplan ops profile --reference synthetic:0`` does
(the reference called before each profiled call, the per-op median over the runs) in fresh processes, alternately
with the default settings and with ``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_`` and ``MALLOC_TOP_PAD_`` set
so that nothing is unmapped or trimmed; the report is each model's summed op time under both, and their ratio.

``--env NAME=VALUE ...`` compares the default with other settings of the environment instead, for instance
``OMP_WAIT_POLICY=ACTIVE`` or ``PASSIVE`` (whether OpenMP's threads, spinning or asleep between parallel operations,
slow some networks more than others; on the Zen 5 VM of 2026-11-28 both slowed the zoo CNNs more than the
synthetic networks: ACTIVE 1.098x against 1.044x, PASSIVE 2.294x against 1.601x, medians).

Usage, from the repository root (``--worker`` is the child process)::

    python benchmarks/diag_malloc.py [--models synthetic-aligned:0-11 synthetic:0-7 torchvision:resnet50 ...]
        [--rounds 2] [--runs 8] [--threads 2] [--env NAME=VALUE ...]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from collections import defaultdict

import numpy as np

from edgeplan.measure.allocator import KEEP_MEMORY as NO_RETURN  # what ops profile --keep-memory sets

DEFAULT_MODELS = ("synthetic-aligned:0-11", "synthetic:0-7", "torchvision:resnet50", "torchvision:mobilenet_v2",
                  "torchvision:regnet_x_3_2gf", "torchvision:densenet121", "timm:efficientnet_b0",
                  "timm:mixnet_s", "torchvision:resnet18", "torchvision:shufflenet_v2_x1_0")


def _worker(models: list[str], runs: int, threads: int) -> dict[str, float]:
    """Per model, the summed per-op median time (ms) of ``runs`` profiled calls, each after a reference call."""
    import torch

    from edgeplan.frontends.zoo import build_model

    torch.set_num_threads(threads)
    ref = build_model("synthetic:0").module.eval()
    x0 = torch.randn(1, 3, 224, 224)
    out = {}
    for name in models:
        zm = build_model(name)
        module = zm.module.eval()
        x = torch.randn(*zm.input_shapes[0])
        per: dict[int, list[float]] = defaultdict(list)
        with torch.inference_mode():
            for _ in range(3):
                module(x)
                ref(x0)
            for _ in range(runs):
                ref(x0)
                with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof, \
                        torch.profiler.record_function("RUN"):
                    module(x)
                events = list(prof.events())
                mark = next(e for e in events if e.name == "RUN")
                top = [e for e in events if e.cpu_parent is not None and e.cpu_parent.id == mark.id]
                for i, e in enumerate(top):
                    per[i].append(e.time_range.elapsed_us() / 1000)
        out[name] = float(sum(np.median(v) for v in per.values()))
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the workers alternately under both settings and print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=list(DEFAULT_MODELS))
    parser.add_argument("--rounds", type=int, default=2, help="alternations of the two settings")
    parser.add_argument("--runs", type=int, default=8, help="profiled calls per model")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--env", nargs="+", metavar="NAME=VALUE",
                        help="compare the default with these environment settings instead of the allocator's")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    variant = dict(NO_RETURN)
    if args.env:
        bad = [e for e in args.env if "=" not in e or not e.split("=", 1)[0]]
        if bad:
            parser.error(f"--env takes NAME=VALUE, not {' '.join(bad)}")
        variant = dict(e.split("=", 1) for e in args.env)
    from edgeplan.measure.model_sets import expand_models

    models = expand_models(args.models)
    if args.worker:
        print(json.dumps(_worker(models, args.runs, args.threads)))
        return 0
    if platform.system() != "Linux" and not args.env:
        parser.error("the tunables are glibc's: run this on Linux")
    label = "no-return" if not args.env else "variant"
    env_default = {k: v for k, v in os.environ.items() if k not in variant}
    times: dict[str, dict[str, list[float]]] = {"default": defaultdict(list), label: defaultdict(list)}
    cmd = [sys.executable, __file__, "--worker", "--runs", str(args.runs), "--threads", str(args.threads),
           "--models", *models]
    for r in range(args.rounds):
        for setting, env in (("default", env_default), (label, {**env_default, **variant})):
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
            line = next(x for x in done.stdout.splitlines() if x.startswith("{"))
            for name, ms in json.loads(line).items():
                times[setting][name].append(ms)
            print(f"round {r + 1}/{args.rounds}: {setting} done", file=sys.stderr)
    from edgeplan.measure.device import describe_device

    cpu = describe_device("torch", args.threads).cpu_model
    what = (f"glibc's default allocator settings against no memory handed back ({', '.join(NO_RETURN)})"
            if not args.env else f"the default environment against {' '.join(args.env)}")
    print(f"summed op times (ms, per-op medians of {args.runs} profiled calls, {args.threads} threads) on {cpu}: "
          f"{what}")
    groups: dict[str, list[float]] = defaultdict(list)
    for name in models:
        a, b = times["default"][name], times[label][name]
        ratio = float(np.median(b) / np.median(a))
        groups["synthetic" if name.startswith("synthetic") else "zoo"].append(ratio)
        print(f"  {name:<30} default {' '.join(f'{t:7.2f}' for t in a)}   {label} "
              f"{' '.join(f'{t:7.2f}' for t in b)}   ratio {ratio:.3f}")
    for group, ratios in groups.items():
        q1, q2, q3 = np.percentile(ratios, [25, 50, 75])
        print(f"{group}: {label} / default median {q2:.3f} (quartiles {q1:.3f}-{q3:.3f}, min {min(ratios):.3f}) "
              f"over {len(ratios)} models; {sum(x < 0.9 for x in ratios)} faster by over 10%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
