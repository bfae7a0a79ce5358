"""Intel -> AMD transfer: variants of fine-tuning tried and not adopted (issue 5 diagnostic, no target).

Each variant is scored beside the plain method (``--method``, default ``factor-finetune``) on the same drawn rows:

``weighted``  the fine-tuning loss weighs a cell 1 when its primitive is within ``--tau`` x its layer's fastest
              measured primitive, ``--beta`` otherwise (early stopping too): the selection needs the competitive
              primitives right, not the slow ones.
``l2sp``      a penalty ``--alpha`` x the squared distance of the weights from the source's (L2-SP) added to the
              fine-tuning loss, instead of relying on early stopping alone to stay near the source.
``relative``  the fine-tuning loss (early stopping too) splits each layer's errors into their mean over the layer's
              primitives and the deviations from it, and weighs the mean ``--lam`` x (1: the plain squared error): the
              factor has set the level, and the selection needs the order of a layer's primitives. 2026-11-29, 1 %,
              kmeans samples, factor then fine-tuning, seeds 0-11, medians (``--variant relative --design kmeans
              --repeats 12 --lam 0.1``, log ``campaigns/diag_relative_s30.log``; ``--lam 0.3``, log
              ``campaigns/diag_relative03_s30.log``): lam 0.1
              9.08 % / 3.79 %, lam 0.3 9.06 % / 4.11 %, against 8.87 % / 4.23 % plain: the
              increase moves within the draws' spread (lower in 7 of 12 at lam 0.1), the MdRAE rises a little.
``risk``      the plain fine-tuned model, priced for the selection pessimistically: the ensemble's mean log prediction
              plus ``--kappa`` x the members' spread, so that layers the members disagree on go to safer primitives
              (the MdRAE is of those pessimistic costs too).
``part``      only part of each network fine-tuned, the rest frozen (``--part head``: the output layer, a linear map
              of the source's last hidden features; ``--part body``: the hidden layers, the outputs' weights kept;
              ``first``, ``ends`` and ``bias``: the input layer, the input and output layers, the biases alone):
              fewer free weights for 37 layers to pin down. 2026-11-29, 1 %, kmeans samples, factor then
              fine-tuning, 25 seeds, medians (``--variant part --part body --design kmeans --repeats 25``, log
              ``campaigns/diag_part_body25_s31.log``): the body alone 8.83 % / **3.02 %** [2.65, 4.25] against
              8.74 % / 3.76 %, the increase lower in 17 of 25 draws (median paired difference -0.54 points), the
              MdRAE about the same (lower in 12); the head alone, seeds 0-11 (``--part head --repeats 12``, log
              ``campaigns/diag_part_head_s31.log``): 11.84 % / 3.75 % against 8.87 % / 4.23 %; the body alone in
              a bag of 5, seeds 0-7 (``--part body --repeats 8 --bag 5``, log
              ``campaigns/diag_part_body_bag5_s31.log``): 9.16 % / 2.82 % (mean 3.03 %) against a plain bag of 5,
              9.01 % / 4.15 % (the body alone unbagged on those seeds: median 2.81 %, mean 3.32 %). Keeping the
              source's output weights keeps how it tells the primitives apart, which the selection needs. Fewer
              free weights still cost the MdRAE (2026-11-29, same settings, stopped early): the input layer alone
              (``--part first``, seeds 0-8, log ``campaigns/diag_part_first_s32.log``) 12.74 % / 4.59 % against
              9.43 % / 4.60 %; the biases alone (``--part bias``, BitFit, seeds 0-5, log
              ``campaigns/diag_part_bias_s32.log``) 11.09 % / 4.38 % against 9.13 % / 4.18 %; the MdRAE higher in
              every draw. The body alone is a library option: ``transfer(..., train="body")``.
``decompose`` where the selection increase comes from: the plain model's selection with the measured AMD primitive
              times in place of its primitive predictions (its transformation model kept). 2026-11-29, 1 %, kmeans
              samples, seeds 0-4 (``--variant decompose --design kmeans --repeats 5``, log
              ``campaigns/diag_decompose_1_kmeans_s31.log``): median 4.60 % -> 0.18 %: the primitive predictions
              carry the increase, the transformations almost none of it.
``level``     how much of the MdRAE is level and how much shape: the plain model with each primitive rescaled by its
              median measured / predicted ratio on AMD's **test** part (an oracle: the best per-primitive scale,
              which no transfer can know). 2026-11-29, 1 %, kmeans samples, factor then fine-tuning, seeds 0-11
              (``--variant level --design kmeans --repeats 12``, log ``campaigns/diag_level_s32.log``): median
              MdRAE 8.87 % -> 7.92 % (6.62-8.82 % per seed; under 7 % in 2 of 12), increase 4.23 % -> 4.29 %. So
              even perfect levels leave the 1 % MdRAE above 7 %: what is left is the layer-dependent shape of each
              primitive, which 37 rows pin down only this far.

Scores as ``bench_transfer.py``: MdRAE on AMD's test part / mean selection increase over the six networks. Reads
../shared/data/mulder2021 and the Intel NN2 of ``make bench-costmodels`` (out/costmodels/intel-nn2). Pin it to one
core: it measures accuracy, not time.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import statistics
import sys
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from diag_transfer_probe import load_setup, transfer_arguments

from edgeplan.costmodels import _mlp, transfer, transfer_learning

VARIANTS = ("weighted", "relative", "l2sp", "risk", "part", "decompose", "level")
PARTS = ("head", "body", "first", "ends", "bias")


@contextlib.contextmanager
def weighted_loss(source: Any, tau: float, beta: float) -> Iterator[None]:
    """Fine-tuning with cell weights: 1 within ``tau`` x the row's fastest measured primitive, ``beta`` beyond."""
    tensors, sse, has_cells = _mlp._tensors, _mlp.masked_sse_per_net, _mlp._has_cells
    finetune = transfer_learning._finetune
    tuned: list[Any] = [source.primitives]  # the estimator being fine-tuned: its scaling undoes the targets'

    def capturing(est: Any, *args: Any, **kwargs: Any) -> Any:
        tuned[0] = est  # after factor-finetune's factors, its output scaling differs from the source's
        return finetune(est, *args, **kwargs)

    def weighted_tensors(x: npt.NDArray[np.float64], y: npt.NDArray[np.float64]
                         ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        xt, yt, _ = tensors(x, y)
        log_ns = y * tuned[0].y_std_ + tuned[0].y_mean_  # the measured times (every net covers all outputs)
        fastest = np.nanmin(np.where(np.isnan(log_ns), np.inf, log_ns), axis=1, keepdims=True)
        w = np.where(np.isnan(y), 0.0, np.where(log_ns - fastest <= math.log(tau), 1.0, beta))
        return xt, yt, torch.as_tensor(w, dtype=torch.float32)

    def weighted_sse(pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor, n_nets: int
                     ) -> tuple[torch.Tensor, torch.Tensor]:
        w = mask.to(pred.dtype)  # the weights weighted_tensors put in the mask's place
        on = w > 0
        diff = torch.where(on, pred - torch.where(on, target, torch.zeros_like(target)), torch.zeros_like(pred))
        per = pred.shape[1] // n_nets
        return ((diff * diff * w).reshape(pred.shape[0], n_nets, per).sum(dim=(0, 2)),
                w.reshape(pred.shape[0], n_nets, per).sum(dim=(0, 2)))

    est = source.primitives
    if not all(len(cols) == len(est.output_names_) for cols in est.groups_):
        raise SystemExit("weighted: every net of the source must cover all its outputs (an NN2 does)")
    _mlp._tensors, _mlp.masked_sse_per_net = weighted_tensors, weighted_sse
    transfer_learning._finetune = capturing

    def weighted_has_cells(mask: torch.Tensor, n_nets: int) -> torch.Tensor:
        return has_cells(mask > 0, n_nets)

    _mlp._has_cells = weighted_has_cells
    try:
        yield
    finally:
        _mlp._tensors, _mlp.masked_sse_per_net, _mlp._has_cells = tensors, sse, has_cells
        transfer_learning._finetune = finetune


@contextlib.contextmanager
def relative_loss(lam: float) -> Iterator[None]:
    """Fine-tuning with each row's squared errors split into the deviations from their mean over the row's defined
    outputs and that mean, weighted ``lam`` (``lam = 1`` is the plain masked squared error)."""
    sse = _mlp.masked_sse_per_net

    def split_sse(pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor, n_nets: int
                  ) -> tuple[torch.Tensor, torch.Tensor]:
        per = pred.shape[1] // n_nets
        diff = torch.where(mask, pred - torch.where(mask, target, torch.zeros_like(target)), torch.zeros_like(pred))
        d = diff.reshape(pred.shape[0], n_nets, per)
        m = mask.reshape(pred.shape[0], n_nets, per).to(pred.dtype)
        n = m.sum(dim=2, keepdim=True)
        mean = d.sum(dim=2, keepdim=True) / n.clamp(min=1.0)
        within = (((d - mean) * m) ** 2).sum(dim=(0, 2))
        return within + lam * (n * mean ** 2).sum(dim=(0, 2)), m.sum(dim=(0, 2))

    _mlp.masked_sse_per_net = split_sse
    try:
        yield
    finally:
        _mlp.masked_sse_per_net = sse


@contextlib.contextmanager
def anchored(alpha: float) -> Iterator[None]:
    """Fine-tuning with ``alpha`` x the squared distance from the starting (source) weights added to the loss."""
    train, sse = _mlp.train_masked, _mlp.masked_sse_per_net
    start: list[torch.Tensor] = []

    def train_masked(net: Any, *args: Any, **kwargs: Any) -> Any:
        start[:] = [p.detach().clone() for p in net.parameters()]

        def with_anchor(pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor, n_nets: int
                        ) -> tuple[torch.Tensor, torch.Tensor]:
            sq, count = sse(pred, target, mask, n_nets)
            if not torch.is_grad_enabled():
                return sq, count
            # per net: loss = sq / count, so the penalty enters as alpha * distance * count
            distance = sum(((p - p0) ** 2).sum() for p, p0 in zip(net.parameters(), start, strict=True))
            return sq + alpha * distance * count.clamp(min=1.0) / n_nets, count

        _mlp.masked_sse_per_net = with_anchor
        try:
            return train(net, *args, **kwargs)
        finally:
            _mlp.masked_sse_per_net = sse

    _mlp.train_masked = train_masked
    try:
        yield
    finally:
        _mlp.train_masked = train


@contextlib.contextmanager
def trained_part(part: str) -> Iterator[None]:
    """Fine-tuning that trains only some layers: the output layer (``part="head"``), the hidden layers (``"body"``),
    the input layer (``"first"``: the first linear map, from the layer's features to the first hidden units), the
    input and output layers (``"ends"``) or every layer's biases alone (``"bias"``, BitFit).

    The other layers' parameters are frozen (no gradient, so Adam neither steps nor decays them) for the duration
    of each ``train_masked`` call, and unfrozen after it."""
    if part not in PARTS:
        raise ValueError(f"part {part!r}: use one of {', '.join(PARTS)}")
    train = _mlp.train_masked

    def trained(i: int, last: int, bias: bool) -> bool:
        return {"head": i == last, "body": i != last, "first": i == 0, "ends": i in (0, last), "bias": bias}[part]

    def train_masked(net: Any, *args: Any, **kwargs: Any) -> Any:
        last = len(net.weights) - 1
        frozen = [p for i, pair in enumerate(zip(net.weights, net.biases, strict=True))
                  for p, bias in zip(pair, (False, True), strict=True) if not trained(i, last, bias)]
        for p in frozen:
            p.requires_grad_(False)
        try:
            return train(net, *args, **kwargs)
        finally:
            for p in frozen:
                p.requires_grad_(True)

    _mlp.train_masked = train_masked
    try:
        yield
    finally:
        _mlp.train_masked = train


class Pessimistic:
    """A fine-tuned NN2 whose primitive costs are the members' mean log prediction plus ``kappa`` x their spread."""

    def __init__(self, model: Any, kappa: float) -> None:
        self.model, self.kappa = model, kappa
        self.primitive_names, self.transform_names = model.primitive_names, model.transform_names
        self.info, self.kind, self.transforms_paper = model.info, "pessimistic", model.transforms_paper

    def predict_primitives(self, x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        est = self.model.primitives
        with _mlp.torch_threads(1):
            members = np.stack([_mlp.predict_numpy(net, est._scale_x(np.asarray(x, dtype=np.float64)))
                                for net in est.nets_])
        normal = members.mean(axis=0) + self.kappa * members.std(axis=0)
        plain = self.model.predict_primitives(x)  # NaN where the primitive does not apply
        return np.where(np.isnan(plain), np.nan, np.exp(normal * est.y_std_ + est.y_mean_))

    def predict_transforms(self, x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        return np.asarray(self.model.predict_transforms(x))


class MeasuredPrimitives(Pessimistic):
    """The model with AMD's measured primitive times for the layers of the table (its transformations kept)."""

    def __init__(self, model: Any, table: Any) -> None:
        super().__init__(model, 0.0)
        self.kind = "measured primitives"
        self.rows = {tuple(r): v for r, v in zip(table.features.tolist(), table.primitive_ns, strict=True)}
        self.columns = [table.primitives.index(n) if n in table.primitives else -1 for n in model.primitive_names]

    def predict_primitives(self, x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        times = np.array([self.rows[tuple(r)] for r in np.asarray(x).tolist()])
        return np.column_stack([times[:, c] if c >= 0 else np.full(len(times), np.nan) for c in self.columns])


class OracleLevel(Pessimistic):
    """The model with each primitive rescaled by its median measured / predicted ratio on AMD's **test** part: the
    best per-primitive level (an oracle no transfer has), so what error is left is the layer-dependent shape."""

    def __init__(self, model: Any, table: Any) -> None:
        from edgeplan.costmodels import split_indices

        super().__init__(model, 0.0)
        self.kind = "oracle level"
        test = table.subset(split_indices(table.features, 0).test)
        pred = model.predict_primitives(test.features)
        self.scales = np.ones(len(model.primitive_names))
        for j, name in enumerate(model.primitive_names):
            if name in table.primitives:
                ratio = test.primitive_ns[:, table.primitives.index(name)] / pred[:, j]
                if np.isfinite(ratio).any():
                    self.scales[j] = float(np.nanmedian(ratio))

    def predict_primitives(self, x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        return np.asarray(self.model.predict_primitives(x)) * self.scales


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", choices=VARIANTS, required=True)
    transfer_arguments(parser)
    parser.add_argument("--method", choices=("finetune", "factor-finetune"), default="factor-finetune")
    parser.add_argument("--tau", type=float, default=2.0)
    parser.add_argument("--beta", type=float, default=0.2)
    parser.add_argument("--alpha", type=float, default=1e-3)
    parser.add_argument("--kappa", type=float, default=1.0)
    parser.add_argument("--lam", type=float, default=0.1, help="relative: weight of a layer's mean error")
    parser.add_argument("--part", choices=PARTS, default="head", help="part: the layers fine-tuned")
    parser.add_argument("--train", choices=("all", "body"), default="all",
                        help="what the plain fine-tuning trains (transfer(..., train=...)); level: the model leveled")
    parser.add_argument("--bag", type=int, default=1, help="fine-tunings per transfer, kept as one ensemble "
                        "(transfer(..., bag=N)), for the plain method and the variant alike")
    parser.add_argument("--design", choices=("uniform", "kmeans"), default="uniform",
                        help="how the target rows are chosen (edgeplan.costmodels.draw_samples)")
    args = parser.parse_args()
    loaded = load_setup(args.source)
    if loaded is None:
        return 0
    source, amd, score = loaded
    setting = {"weighted": f"tau {args.tau:g}, beta {args.beta:g}", "l2sp": f"alpha {args.alpha:g}",
               "relative": f"lam {args.lam:g}", "risk": f"kappa {args.kappa:g}", "part": f"the {args.part} only",
               "decompose": "measured primitive times", "level": "each primitive at its test-part level"}[args.variant]
    print(f"Intel -> AMD, {100 * args.fraction:g} % of AMD's training part, {args.method} and {args.variant} "
          f"({setting}), samples {args.design}{f', bag of {args.bag}' if args.bag > 1 else ''}"
          f"{', the hidden layers only' if args.train == 'body' else ''}; "
          f"MdRAE % / mean selection increase %")

    def fitted() -> Any:
        return transfer(source, amd, fraction=args.fraction, seed=seed, method=args.method, split_seed=0, threads=1,
                        design=args.design, bag=args.bag, train=args.train)

    scores: dict[str, list[tuple[float, float]]] = {"plain": [], args.variant: []}
    for seed in range(args.repeats):
        started = time.monotonic()
        plain = fitted()
        if args.variant == "weighted":
            with weighted_loss(source, args.tau, args.beta):
                variant = fitted()
        elif args.variant == "relative":
            with relative_loss(args.lam):
                variant = fitted()
        elif args.variant == "l2sp":
            with anchored(args.alpha):
                variant = fitted()
        elif args.variant == "part":
            with trained_part(args.part):
                variant = fitted()
        elif args.variant == "risk":
            variant = Pessimistic(plain, args.kappa)
        elif args.variant == "level":
            variant = OracleLevel(plain, amd)
        else:
            variant = MeasuredPrimitives(plain, amd)
        line = []
        for name, model in (("plain", plain), (args.variant, variant)):
            s = score(model)
            scores[name].append((s["mdrae_pct"], s["increase_pct"]))
            line.append(f"{name} {s['mdrae_pct']:.2f} / {s['increase_pct']:.2f}")
        print(f"seed {seed}: {', '.join(line)} ({time.monotonic() - started:.0f} s)", flush=True)
    for name, values in scores.items():
        mdrae, increase = zip(*values, strict=True)
        print(f"{name:>10}: median MdRAE {statistics.median(mdrae):.2f} %, median increase "
              f"{statistics.median(increase):.2f} % (mean {statistics.fmean(increase):.2f} %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
