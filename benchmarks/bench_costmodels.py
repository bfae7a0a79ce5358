"""Primitive performance models (mulder2020 Figs. 4-6) on the mulder2021 Intel and AMD timing tables.

Per platform, on the test part of the seed-0 80/10/10 split: the MdRAE of Lin, NN1 and NN2 per primitive and per
layout transformation, and the targets of issue 4:

- NN2 median MdRAE over primitives <= 2.0 % (paper: "around 2 %");
- share of primitives where NN2 beats both NN1 and Lin >= 80 % (paper: NN2 better than NN1 on all primitives);
- layout-transformation MdRAE (the recipe's transformation model: ``krr`` for ``edgeplan``, NN2 for ``paper``;
  median over the six non-identity transformations) <= 1 % (paper: "around 1 %") on the test split as the issue and
  the paper score it (test layer rows of the row split; their tensors all occur in training rows; see
  edgeplan.costmodels.performance_model); printed beside it, with no target, the stricter protocol of edgeplan's
  own: held-out tensors ``(c, im)`` never seen in training;
- NN2 fit time on Intel <= 10 minutes with 2 threads (wall and process CPU seconds are both printed: on a loaded
  machine the wall time is inflated by the other processes, the CPU time is not);
- batched prediction of every primitive and transformation for all 16 conv layers of VGG-19 (shapes from the IR)
  <= 5 ms (median over repeats; paper: 673 ms for VGG-19 including its PBQP solve).

Also the Intel NN2 model scored on AMD's shared primitives (no transfer: mulder2020 Fig. 8a's "Intel" bars), and
the validation-part median of every model (what settings were chosen on; the test part is only reported).
Writes one PNG per platform (Figs. 4-6 style) under --out. The data are read from ../shared/data/mulder2021; the
benchmark skips when they are absent.

``--transforms-only``: fits only transformation models (Lin, NN1, NN2 under both recipes, and ``krr``) under both
protocols and prints their MdRAE; seconds, not minutes.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from _machine import machine

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "mulder2021"
KINDS = ("lin", "nn1", "nn2")


def pct(v: float) -> str:
    return "     -" if math.isnan(v) else f"{100 * v:6.2f}"


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def vgg19_layers() -> list[tuple[int, int, int, int, int]]:
    """``(c, k, im, f, s)`` of VGG-19's conv layers, read from the IR (square inputs and kernels)."""
    from edgeplan.frontends.zoo import load_graph
    from edgeplan.ir.ops import ConvAttrs, OpKind

    rows = []
    for node in load_graph("torchvision:vgg19").nodes:
        if node.kind is OpKind.CONV2D:
            a = node.attrs
            assert isinstance(a, ConvAttrs)
            rows.append((a.in_channels, a.out_channels, node.input_shapes[0][2], a.kernel[0], a.stride[0]))
    return rows


def transform_target(platform: str, label: str, result: Any) -> bool:
    """Print the transformation target (the test layer rows, as issue 4 and the paper score them) and the stricter
    held-out-tensor figure beside it (no target); return whether the target is met."""
    value = result.median_paper_transform_mdrae
    hit = value <= 0.01
    print(f"TARGET {platform} layout-transformation MdRAE ({label}; the test layer rows of the split, as issue 4 "
          f"and the paper score them): {100 * value:.2f} % (<= 1 %) {verdict(hit)}")
    print(f"  stricter, edgeplan's own protocol (tensors never seen in training; no target): "
          f"{100 * result.median_transform_mdrae:.2f} %")
    return hit


def print_platform_table(platform: str, args: argparse.Namespace, results: dict, val_med: dict,
                         tkinds: dict) -> None:
    """MdRAE per column and model on the test part; transformations under both protocols; the medians."""
    kinds = list(results)
    first = results[kinds[0]]
    print(f"\n{platform} test part ({first.rows} layers, {first.transform_tensors} held-out tensors), "
          f"recipe {args.recipe}, transformation models {[tkinds[k] for k in kinds]}: MdRAE %")
    print(f"{'column':<34}" + "".join(f"{k.upper():>8}" for k in kinds))
    for name in first.primitive_mdrae:
        print(f"{name:<34}" + "".join(f"  {pct(results[k].primitive_mdrae[name])}" for k in kinds))
    for name in first.transform_mdrae:
        print(f"{name:<34}" + "".join(f"  {pct(results[k].transform_mdrae[name])}" for k in kinds))
    for name in first.paper_transform_mdrae:
        print(f"{name + ' (paper prot.)':<34}" + "".join(f"  {pct(results[k].paper_transform_mdrae[name])}"
                                                        for k in kinds))
    rows = (("median over primitives", lambda r: r.median_primitive_mdrae),
            ("median transforms, held-out", lambda r: r.median_transform_mdrae),
            ("median transforms, paper prot.", lambda r: r.median_paper_transform_mdrae))
    for label, get in rows:
        print(f"{label:<34}" + "".join(f"  {pct(get(results[k]))}" for k in kinds))
    print(f"{'val part: median over primitives':<34}" + "".join(f"  {pct(val_med[k])}" for k in kinds))
    print(f"paper protocol: {first.paper_transform_unseen_rows} of {first.rows} test rows have a (c, im) that no "
          f"training row has")


TRANSFORM_CANDIDATES = (("lin", "paper"), ("nn1", "paper"), ("nn2", "paper"), ("lin", "edgeplan"),
                        ("nn1", "edgeplan"), ("nn2", "edgeplan"), ("krr", "edgeplan"))


def transforms_only(args: argparse.Namespace) -> int:
    """Fit every transformation candidate under both protocols; print validation and test MdRAE per platform."""
    from edgeplan.costmodels import evaluate_performance_model, fit_performance_model, load_primitive_csv

    ok = True
    for platform in args.platforms:
        data = load_primitive_csv(DATA / f"{platform}.csv")
        print(f"\n{platform}: layout-transformation models, median MdRAE % over the six non-identity "
              f"transformations (split seed {args.split_seed})")
        print(f"{'model':<18}{'val held-out':>14}{'test held-out':>15}{'test paper prot.':>18}{'fit s':>8}  "
              f"per transformation, test held-out")
        for tkind, recipe in TRANSFORM_CANDIDATES:
            t0 = time.process_time()
            model = fit_performance_model(data, "lin", split_seed=args.split_seed, recipe=recipe,
                                          transform_model=tkind, transform_params=None if tkind in ("krr", "lin")
                                          else {"threads": args.threads})
            spent = time.process_time() - t0
            test = evaluate_performance_model(model, data, "test", args.split_seed)
            val = evaluate_performance_model(model, data, "val", args.split_seed)
            per = " ".join(f"{n}={100 * v:.1f}" for n, v in test.transform_mdrae.items() if n[:3] != n[-3:])
            print(f"{tkind + ' (' + recipe + ')':<18}{pct(val.median_transform_mdrae):>14}"
                  f"{pct(test.median_transform_mdrae):>15}{pct(test.median_paper_transform_mdrae):>18}"
                  f"{spent:>8.1f}  {per}", flush=True)
            if (tkind, recipe) == ("krr", "edgeplan"):
                best = test
        ok &= transform_target(platform, "krr, the edgeplan default", best)
        print(f"paper protocol: {best.paper_transform_unseen_rows} of {best.rows} test rows have a (c, im) that no "
              f"training row has")
    print(f"\noverall: {'all targets met' if ok else 'some targets missed'}")
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--platforms", nargs="+", default=["intel", "amd"])
    parser.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--recipe", default="edgeplan", choices=["edgeplan", "paper"])
    parser.add_argument("--split-seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=200, help="VGG-19 prediction repeats")
    parser.add_argument("--out", type=Path, default=Path("out/costmodels"))
    parser.add_argument("--transforms-only", action="store_true",
                        help="Compare transformation models only (both protocols); no primitive model is trained.")
    args = parser.parse_args()
    print(machine(args.threads))
    if not (DATA / "intel.csv").is_file():
        print(f"skipped: {DATA} not present")
        return 0
    if args.transforms_only:
        return transforms_only(args)
    import numpy as np

    from edgeplan.costmodels import (
        evaluate_performance_model,
        fit_performance_model,
        load_primitive_csv,
        save_performance_model,
    )
    from edgeplan.reports.costmodel_report import plot_mdrae_bars

    args.out.mkdir(parents=True, exist_ok=True)
    ok = True
    nn2_models = {}
    vgg = np.asarray(vgg19_layers(), dtype=float)
    for platform in args.platforms:
        data = load_primitive_csv(DATA / f"{platform}.csv")
        results, fit_s, cpu_s, val_med, tkinds = {}, {}, {}, {}, {}
        for kind in args.kinds:
            t0, c0 = time.perf_counter(), time.process_time()
            model = fit_performance_model(data, kind, split_seed=args.split_seed, recipe=args.recipe,
                                          params={} if kind == "lin" else {"threads": args.threads})
            fit_s[kind], cpu_s[kind] = time.perf_counter() - t0, time.process_time() - c0
            results[kind] = evaluate_performance_model(model, data, "test", args.split_seed)
            val_med[kind] = evaluate_performance_model(model, data, "val", args.split_seed).median_primitive_mdrae
            tkinds[kind] = model.transform_kind
            if kind == "nn2":
                nn2_models[platform] = model
                save_performance_model(model, args.out / f"{platform}-nn2")
            print(f"{platform}: fitted {kind} in {fit_s[kind]:.1f} s wall, {cpu_s[kind]:.1f} s process CPU "
                  f"(primitives {model.info['fit_primitives_s']:.1f} s, transforms {model.info['fit_transforms_s']:.1f}"
                  f" s + paper protocol {model.info['fit_transforms_paper_s']:.1f} s, model {model.transform_kind})",
                  flush=True)
        print_platform_table(platform, args, results, val_med, tkinds)
        png = plot_mdrae_bars(results, args.out / f"costmodels_{platform}.png",
                              f"{platform} test part, seed {args.split_seed}, recipe {args.recipe}")
        print(f"figure: {png}")
        if "nn2" not in results:
            continue
        nn2 = results["nn2"]
        med = nn2.median_primitive_mdrae
        hit = med <= 0.02
        ok &= hit
        print(f"TARGET {platform} NN2 median MdRAE over primitives: {100 * med:.2f} % (<= 2.0 %) {verdict(hit)}")
        if set(KINDS) <= set(results):
            names = list(nn2.primitive_mdrae)
            wins = sum(nn2.primitive_mdrae[n] < min(results["nn1"].primitive_mdrae[n],
                                                     results["lin"].primitive_mdrae[n]) for n in names)
            share = wins / len(names)
            hit = share >= 0.8
            ok &= hit
            print(f"TARGET {platform} share of primitives where NN2 beats NN1 and Lin: {wins}/{len(names)} = "
                  f"{100 * share:.0f} % (>= 80 %) {verdict(hit)}")
        ok &= transform_target(platform, f"{tkinds['nn2']} model of the NN2 fit", nn2)
        if platform == "intel":
            hit = fit_s["nn2"] <= 600
            ok &= hit
            print(f"TARGET intel NN2 fit time with {args.threads} thread(s): {fit_s['nn2']:.0f} s wall "
                  f"({cpu_s['nn2']:.0f} s process CPU) (<= 600 s wall with 2 threads) {verdict(hit)}")
            model = nn2_models[platform]
            model.predict_layers(vgg)  # warm-up
            times = []
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                prims, trans = model.predict_layers(vgg)
                times.append((time.perf_counter() - t0) * 1e3)
            q = statistics.quantiles(times, n=4)
            med_ms = statistics.median(times)
            hit = med_ms <= 5.0
            ok &= hit
            print(f"TARGET VGG-19 batched prediction ({len(vgg)} conv layers x {prims.shape[1]} primitives + "
                  f"{trans.shape[1]} transforms, one pass each): median {med_ms:.2f} ms (IQR {q[0]:.2f}-{q[2]:.2f})"
                  f" (<= 5 ms) {verdict(hit)}")
    if "intel" in nn2_models and "amd" in args.platforms:
        amd = load_primitive_csv(DATA / "amd.csv")
        cross = evaluate_performance_model(nn2_models["intel"], amd, "test", args.split_seed)
        print(f"\nIntel NN2 on AMD test part, {len(cross.primitive_mdrae)} shared primitives (no transfer): median "
              f"MdRAE {pct(cross.median_primitive_mdrae).strip()} % (paper Fig. 8a: far above the native model)")
    print(f"\noverall: {'all targets met' if ok else 'some targets missed'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
