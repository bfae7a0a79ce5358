"""The torch side of the primitive performance models: stacked MLPs, the masked loss and the training loop.

Only the estimators in :mod:`edgeplan.costmodels.primitive_models` import this module, inside ``fit`` and
``predict``, so ``edgeplan.costmodels`` loads without torch.

A :class:`StackedMLP` holds ``G`` independent fully-connected ReLU networks of the same widths and runs them in one
batched matrix product per layer. NN2 is ``G = 1`` with ``n`` outputs; NN1 is ``G`` one-output networks (one per
primitive), trained together. Adam updates each parameter element-wise from its own gradient, and net ``g``'s
gradient comes from its own loss term only, so **with the constant learning rate** (the paper's; the cosine
schedule too, as it depends on the epoch only) each net follows the same procedure as if it were trained alone:
same initialisation rule, same mini-batch order, its own early stopping and best weights. Nets that stopped keep
training until the last net of the group stops, but their saved best weights are what they return, so that does
not change them. It is the same procedure, not bit-for-bit the same numbers (a stacked group draws its
initial weights from one generator, and batched products round differently).

That equivalence does **not** hold with the ``plateau`` schedule (the ``edgeplan`` recipe's): the group shares
one learning rate, halved when the *sum* of the group's stopping losses stops improving, so a net's learning-rate
halvings depend on the other nets of its group. Nor with ``time_limit_s``, which cuts the whole group at once.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch
from torch import nn

__all__ = ["EpochInfo", "StackedMLP", "TrainConfig", "TrainLog", "flushed_subnormals", "masked_mse_per_net",
           "masked_sse_per_net", "predict_numpy", "torch_threads", "train_masked"]

FloatArray = npt.NDArray[np.float64]


@contextlib.contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """Run the block with ``n`` intra-op torch threads, then restore the previous count."""
    previous = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


_FLUSHING = threading.local()  # per thread: how many flushed_subnormals blocks are open


@contextlib.contextmanager
def flushed_subnormals() -> Iterator[None]:
    """Run the block with subnormal floats read and written as zero in the calling thread, then turn that off.

    Late in training, some gradients and activations fall below float32's normal range (about 1.2e-38), and x86
    CPUs compute on such subnormal numbers many times slower, enough to make a whole NN2 fit several times slower.
    Values that small carry nothing the fit needs. The setting (x86 FTZ/DAZ) is per thread, so each training thread sets
    its own; torch has no getter, so when the outermost block of a thread exits it is switched off, torch's default
    (nested blocks leave it on). A no-op where the CPU does not support it.
    """
    depth = getattr(_FLUSHING, "depth", 0)
    supported = torch.set_flush_denormal(True) if depth == 0 else True
    _FLUSHING.depth = depth + 1
    try:
        yield
    finally:
        _FLUSHING.depth = depth
        if depth == 0 and supported:
            torch.set_flush_denormal(False)


class StackedMLP(nn.Module):
    """``n_nets`` ReLU MLPs with the same ``widths`` (input first, output last), evaluated together.

    Parameters
    ----------
    n_nets
        Number of independent networks ``G``.
    widths
        Layer widths, e.g. ``(5, 128, 512, 512, 128, n)``.
    seed
        Seed of the initialisation (PyTorch's ``nn.Linear`` rule: uniform in ``±1/sqrt(fan_in)``).
    """

    def __init__(self, n_nets: int, widths: tuple[int, ...], seed: int = 0) -> None:
        super().__init__()
        self.n_nets = n_nets
        self.widths = tuple(widths)
        gen = torch.Generator().manual_seed(seed)
        weights, biases = [], []
        for fan_in, fan_out in itertools.pairwise(widths):
            bound = 1.0 / math.sqrt(fan_in)
            w = (torch.rand(n_nets, fan_in, fan_out, generator=gen) * 2 - 1) * bound
            b = (torch.rand(n_nets, 1, fan_out, generator=gen) * 2 - 1) * bound
            weights.append(nn.Parameter(w))
            biases.append(nn.Parameter(b))
        self.weights = nn.ParameterList(weights)
        self.biases = nn.ParameterList(biases)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Map ``(B, widths[0])`` inputs to ``(B, n_nets * widths[-1])`` outputs (net-major columns)."""
        h = x.unsqueeze(0).expand(self.n_nets, -1, -1)
        last = len(self.weights) - 1
        for i, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            h = torch.baddbmm(b, h, w)
            if i < last:
                h = torch.relu(h)
        return h.permute(1, 0, 2).reshape(x.shape[0], -1)

    def to_arrays(self) -> dict[str, npt.NDArray[np.float32]]:
        """The parameters as float32 arrays named ``w0, b0, w1, ...`` (for saving without pickle)."""
        out: dict[str, npt.NDArray[np.float32]] = {}
        for i, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            out[f"w{i}"] = w.detach().cpu().numpy().astype(np.float32)
            out[f"b{i}"] = b.detach().cpu().numpy().astype(np.float32)
        return out

    @classmethod
    def from_arrays(cls, n_nets: int, widths: tuple[int, ...], arrays: dict[str, npt.NDArray[np.float32]]
                    ) -> StackedMLP:
        """Rebuild a network saved by :meth:`to_arrays` (shapes are checked)."""
        net = cls(n_nets, widths)
        with torch.no_grad():
            for i, (w, b) in enumerate(zip(net.weights, net.biases, strict=True)):
                for name, p in ((f"w{i}", w), (f"b{i}", b)):
                    a = arrays[name]
                    if tuple(a.shape) != tuple(p.shape):
                        raise ValueError(f"saved array {name} has shape {a.shape}, expected {tuple(p.shape)}")
                    p.copy_(torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32)))
        return net


def masked_mse_per_net(pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor, n_nets: int) -> torch.Tensor:
    """Mean squared error of each net over its defined outputs; undefined outputs add nothing, not even gradient.

    Parameters
    ----------
    pred
        ``(B, n_nets * m)`` predictions.
    target
        Same shape; any value (NaN included) where ``mask`` is False.
    mask
        Same shape, True where the target is defined.
    n_nets
        ``G``: columns are grouped net-major, ``m`` per net.

    Returns
    -------
    torch.Tensor
        ``(n_nets,)`` losses; NaN for a net with no defined output (it has no loss, not a loss of 0). Sum it with
        :func:`torch.nansum` or use :func:`masked_sse_per_net` for a training objective.
    """
    sq, count = masked_sse_per_net(pred, target, mask, n_nets)
    return torch.where(count > 0, sq / count.clamp(min=1.0), torch.full_like(sq, math.nan))


def masked_sse_per_net(pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor, n_nets: int
                       ) -> tuple[torch.Tensor, torch.Tensor]:
    """Sum of squared errors of each net over its defined outputs, and how many outputs were defined.

    Same arguments as :func:`masked_mse_per_net`. Returns two ``(n_nets,)`` tensors: the sums (0, with zero
    gradient, for a net with no defined output) and the counts (as floats).
    """
    diff = torch.where(mask, pred - torch.where(mask, target, torch.zeros_like(target)), torch.zeros_like(pred))
    per_net = pred.shape[1] // n_nets
    sq = (diff * diff).reshape(pred.shape[0], n_nets, per_net).sum(dim=(0, 2))
    count = mask.reshape(pred.shape[0], n_nets, per_net).sum(dim=(0, 2)).to(pred.dtype)
    return sq, count


@dataclass(frozen=True)
class TrainConfig:
    """How to train (mulder2020 Table 3 plus what edgeplan adds; see the estimators for the defaults).

    ``lr_schedule``: ``"constant"`` (the paper), ``"plateau"`` (halve the rate when the sum of the nets' stopping
    losses has not improved for ``plateau_patience`` epochs, down to ``min_lr``) or ``"cosine"`` (from ``lr`` to
    ``min_lr`` over ``max_epochs``).

    Early stopping ends training when no net's stopping loss (its validation loss; see :func:`train_masked` for a
    net without validation cells) improved for ``patience`` **epochs**; every net keeps the weights of its best
    epoch. This counts epochs, where mulder2020 Table 3 says "did not improve for 250 *iterations*": if an
    iteration there means a mini-batch step, 250 epochs is a longer wait (on the Intel table, about 3 700
    training layers in batches of 1024, an epoch is 4 steps, so about 4x longer). edgeplan keeps epochs and says
    so. ``max_epochs`` is an edgeplan bound on the run time; the paper has none.

    ``ema_decay`` (edgeplan; 0, the paper's, turns it off): keep an exponential moving average of the weights,
    updated after every optimiser step as ``avg = decay * avg + (1 - decay) * w``. The averaged weights are the
    ones scored for early stopping and returned; the optimiser keeps training the raw ones. Averaging the last few
    hundred steps smooths the noise of small-batch Adam steps (Polyak averaging).
    """

    lr: float = 1e-3
    weight_decay: float = 0.0
    batch_size: int = 1024
    max_epochs: int = 3000
    patience: int = 250
    lr_schedule: str = "constant"
    plateau_patience: int = 60
    min_lr: float = 1e-5
    seed: int = 0
    time_limit_s: float | None = None
    ema_decay: float = 0.0


@dataclass(frozen=True)
class EpochInfo:
    """What a progress callback sees after each epoch.

    ``val_loss`` and ``best_val_loss`` are sums over the nets of their stopping losses (the training loss for a
    net without validation cells; see :func:`train_masked`).
    """

    epoch: int
    max_epochs: int
    train_loss: float
    val_loss: float
    best_val_loss: float
    lr: float


@dataclass(frozen=True)
class TrainLog:
    """How training went.

    Attributes
    ----------
    epochs
        Epochs run.
    best_epochs
        Per net, the epoch whose weights it kept (0: it never had a finite stopping loss and kept its initial
        weights; only a net without any defined training cell).
    best_val_losses
        Per net, its best stopping loss: the validation loss, or the training loss where ``on_validation`` is False.
    on_validation
        Per net, True when it early-stopped on validation cells, False when it had none and stopped on its
        training loss.
    stopped_by
        ``early_stopping``, ``max_epochs`` or ``time_limit``.
    elapsed_s
        Wall time.
    """

    epochs: int
    best_epochs: tuple[int, ...]
    best_val_losses: tuple[float, ...]
    stopped_by: str
    elapsed_s: float
    on_validation: tuple[bool, ...] = ()


def _tensors(x: FloatArray, y: FloatArray) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    xt = torch.as_tensor(x, dtype=torch.float32)
    mask = torch.as_tensor(~np.isnan(y))
    yt = torch.as_tensor(np.nan_to_num(y, nan=0.0), dtype=torch.float32)
    return xt, yt, mask


def _lr_at(config: TrainConfig, epoch: int, current: float) -> float:
    if config.lr_schedule == "cosine":
        t = min(epoch / max(config.max_epochs, 1), 1.0)
        return config.min_lr + 0.5 * (config.lr - config.min_lr) * (1 + math.cos(math.pi * t))
    return current


def _has_cells(mask: torch.Tensor, n_nets: int) -> torch.Tensor:
    """``(n_nets,)``: True for a net with at least one defined cell in ``mask``."""
    return mask.reshape(mask.shape[0], n_nets, mask.shape[1] // n_nets).any(dim=2).any(dim=0)


class _HeldOutputs:
    """The output-layer weights and biases of the outputs without any training cell, put back after every step.

    Such an output has no loss and so no data gradient, but Adam's weight decay still moves its weights: the decay
    term is the whole gradient, and Adam divides it by its own magnitude, so every step moves each weight by about
    the learning rate towards zero whatever the decay's size. Fine-tuned on one primitive family's columns, the
    other families' outputs then sank to their mean within a few hundred steps (mulder2020 Table 5). Held, such an
    output changes only as the shared hidden layers do.
    """

    def __init__(self, net: StackedMLP, mask: torch.Tensor) -> None:
        g = net.n_nets
        m = mask.shape[1] // g
        held = ~mask.reshape(mask.shape[0], g, m).any(dim=0)  # (G, m): True for an output with no training cell
        self.held = held if bool(held.any()) else None
        if self.held is not None:
            self.w, self.b = net.weights[-1], net.biases[-1]
            self.w0, self.b0 = self.w.detach().clone(), self.b.detach().clone()

    def restore(self) -> None:
        """Put the held outputs' weights back (a no-op when every output has a training cell)."""
        if self.held is None:
            return
        with torch.no_grad():
            cols = self.held.unsqueeze(1)  # (G, 1, m), broadcast over the fan-in and the bias's unit axis
            self.w.copy_(torch.where(cols, self.w0, self.w))
            self.b.copy_(torch.where(cols, self.b0, self.b))


def _train_epoch(net: StackedMLP, data: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
                 opt: torch.optim.Optimizer, batch_size: int, gen: torch.Generator,
                 average: list[torch.Tensor] | None = None, decay: float = 0.0,
                 held: _HeldOutputs | None = None) -> float:
    """One pass over the shuffled training rows; returns the mean over mini-batches of the summed per-net MSE.

    With ``average`` (one tensor per parameter), it is moved towards the weights after every step by ``decay``;
    ``held`` puts the outputs without training cells back after every step.
    """
    xt, yt, mt = data
    net.train()
    perm = torch.randperm(xt.shape[0], generator=gen)
    total, batches = 0.0, 0
    for start in range(0, xt.shape[0], batch_size):
        idx = perm[start:start + batch_size]
        sq, count = masked_sse_per_net(net(xt[idx]), yt[idx], mt[idx], net.n_nets)
        loss = (sq / count.clamp(min=1.0)).sum()  # a net with no cell in this batch adds 0 and no gradient
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if held is not None:
            held.restore()
        if average is not None:
            with torch.no_grad():
                for avg, p in zip(average, net.parameters(), strict=True):
                    avg.mul_(decay).add_(p.detach(), alpha=1.0 - decay)
        total += float(loss.detach())
        batches += 1
    return total / max(batches, 1)


def train_masked(net: StackedMLP, x: FloatArray, y: FloatArray, x_val: FloatArray, y_val: FloatArray,
                 config: TrainConfig, callback: Callable[[EpochInfo], None] | None = None) -> TrainLog:
    """Train ``net`` with Adam on the masked MSE, early-stopping each net on its own stopping loss.

    A net's stopping loss after an epoch is its masked MSE on the validation part. A net with **no defined
    validation cell** (say an NN1 primitive whose few layers all fell in the training part) has no validation
    loss; it is not given one of 0. It early-stops on its masked MSE over the whole training part, computed after
    the epoch in evaluation mode, and keeps the weights of its epoch with the lowest training loss
    (``TrainLog.on_validation`` marks it). Training ends when no net's stopping loss improved for
    ``config.patience`` epochs (epochs, not mini-batch steps: see :class:`TrainConfig`), or at ``max_epochs``
    or ``time_limit_s``.

    An output without any defined training cell keeps its output-layer weights and bias (:class:`_HeldOutputs`):
    it moves only as the hidden layers it shares with the trained outputs do, not towards zero under Adam's
    weight decay.

    Parameters
    ----------
    net
        The networks (modified in place; on return each holds the weights of its best epoch).
    x, y
        Standardized training inputs ``(n, d)`` and targets ``(n, G * m)``, NaN where undefined.
    x_val, y_val
        The validation part, same layout.
    config
        Optimiser, batch, schedule and stopping settings.
    callback
        Called after every epoch with an :class:`EpochInfo`.

    Subnormal floats are flushed to zero while it trains (:func:`flushed_subnormals`).
    """
    with flushed_subnormals():
        return _train_masked(net, x, y, x_val, y_val, config, callback)


def _train_masked(net: StackedMLP, x: FloatArray, y: FloatArray, x_val: FloatArray, y_val: FloatArray,
                  config: TrainConfig, callback: Callable[[EpochInfo], None] | None) -> TrainLog:
    started = time.monotonic()
    g = net.n_nets
    xt, yt, mt = _tensors(x, y)
    xv, yv, mv = _tensors(x_val, y_val)
    on_val = _has_cells(mv, g)
    held = _HeldOutputs(net, mt)
    opt = torch.optim.Adam(net.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    gen = torch.Generator().manual_seed(config.seed)
    best = torch.full((g,), math.inf)
    best_epoch = torch.zeros(g, dtype=torch.long)
    best_state = [p.detach().clone() for p in net.parameters()]
    lr, since_improved_total, best_total = config.lr, 0, math.inf
    if not 0.0 <= config.ema_decay < 1.0:
        raise ValueError(f"ema_decay {config.ema_decay}: use a value in [0, 1) (0 turns the average off)")
    average = [p.detach().clone() for p in net.parameters()] if config.ema_decay > 0 else None
    stopped_by, epoch = "max_epochs", 0
    for epoch in range(1, config.max_epochs + 1):
        lr = _lr_at(config, epoch - 1, lr)
        for group in opt.param_groups:
            group["lr"] = lr
        train_loss = _train_epoch(net, (xt, yt, mt), opt, config.batch_size, gen, average, config.ema_decay, held)
        raw = None
        if average is not None:  # score (and keep) the averaged weights; train on from the raw ones
            with torch.no_grad():
                raw = [p.detach().clone() for p in net.parameters()]
                for p, avg in zip(net.parameters(), average, strict=True):
                    p.copy_(avg)
        net.eval()
        with torch.no_grad():
            stop = masked_mse_per_net(net(xv), yv, mv, g)
            if not bool(on_val.all()):
                stop = torch.where(on_val, stop, masked_mse_per_net(net(xt), yt, mt, g))
        improved = stop < best  # False for NaN: a net without any cell never improves
        if bool(improved.any()):
            best = torch.where(improved, stop, best)
            best_epoch[improved] = epoch
            with torch.no_grad():
                for keep, p in zip(best_state, net.parameters(), strict=True):
                    keep[improved] = p.detach()[improved]
        if raw is not None:
            with torch.no_grad():
                for p, r in zip(net.parameters(), raw, strict=True):
                    p.copy_(r)
        stop_total = float(torch.nansum(stop))
        if stop_total < best_total:
            best_total, since_improved_total = stop_total, 0
        else:
            since_improved_total += 1
        if config.lr_schedule == "plateau" and since_improved_total >= config.plateau_patience:
            lr, since_improved_total = max(lr * 0.5, config.min_lr), 0
        if callback is not None:
            best_sum = float(best[torch.isfinite(best)].sum())
            callback(EpochInfo(epoch, config.max_epochs, train_loss, stop_total, best_sum, lr))
        if int((epoch - best_epoch).min()) >= config.patience:
            stopped_by = "early_stopping"
            break
        if config.time_limit_s is not None and time.monotonic() - started > config.time_limit_s:
            stopped_by = "time_limit"
            break
    with torch.no_grad():
        for keep, p in zip(best_state, net.parameters(), strict=True):
            p.copy_(keep)
    net.eval()
    return TrainLog(epoch, tuple(int(e) for e in best_epoch), tuple(float(v) for v in best),
                    stopped_by, time.monotonic() - started, tuple(bool(v) for v in on_val))


def predict_numpy(net: StackedMLP, x: FloatArray) -> FloatArray:
    """Run ``net`` on standardized inputs in one forward pass and return float64 outputs."""
    with torch.inference_mode():
        out = net(torch.as_tensor(x, dtype=torch.float32))
    return out.numpy().astype(np.float64)
