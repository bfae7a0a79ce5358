"""The torch side of the primitive performance models: stacked MLPs, the masked loss and the training loop.

Only the estimators in :mod:`edgeplan.costmodels.primitive_models` import this module, inside ``fit`` and
``predict``, so ``edgeplan.costmodels`` loads without torch.

A :class:`StackedMLP` holds ``G`` independent fully-connected ReLU networks of the same widths and runs them in one
batched matrix product per layer. NN2 is ``G = 1`` with ``n`` outputs; NN1 is ``G`` one-output networks (one per
primitive), trained together: Adam updates each parameter from its own gradient, and net ``g``'s gradient comes
from its own loss term only, so training them stacked is training them one by one (with weight decay 0, as Table 3
has for NN1), only faster.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch
from torch import nn

__all__ = ["EpochInfo", "StackedMLP", "TrainConfig", "TrainLog", "masked_mse_per_net", "predict_numpy",
           "torch_threads", "train_masked"]

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
        ``(n_nets,)`` losses; a net with no defined output in the batch gets 0.
    """
    diff = torch.where(mask, pred - torch.where(mask, target, torch.zeros_like(target)), torch.zeros_like(pred))
    sq = (diff * diff).reshape(pred.shape[0], n_nets, -1).sum(dim=(0, 2))
    count = mask.reshape(pred.shape[0], n_nets, -1).sum(dim=(0, 2)).to(pred.dtype)
    return sq / count.clamp(min=1.0)


@dataclass(frozen=True)
class TrainConfig:
    """How to train (mulder2020 Table 3 plus what edgeplan adds; see the estimators for the defaults).

    ``lr_schedule``: ``"constant"`` (the paper), ``"plateau"`` (halve the rate when the validation loss has not
    improved for ``plateau_patience`` epochs, down to ``min_lr``) or ``"cosine"`` (from ``lr`` to ``min_lr`` over
    ``max_epochs``). Early stopping ends training when no net's validation loss improved for ``patience`` epochs;
    every net keeps its best-validation weights.
    """

    lr: float = 1e-3
    weight_decay: float = 0.0
    batch_size: int = 1024
    max_epochs: int = 2000
    patience: int = 250
    lr_schedule: str = "constant"
    plateau_patience: int = 60
    min_lr: float = 1e-5
    seed: int = 0
    time_limit_s: float | None = None


@dataclass(frozen=True)
class EpochInfo:
    """What a progress callback sees after each epoch."""

    epoch: int
    max_epochs: int
    train_loss: float
    val_loss: float
    best_val_loss: float
    lr: float


@dataclass(frozen=True)
class TrainLog:
    """How training went: epochs run, each net's best epoch and validation loss, wall time."""

    epochs: int
    best_epochs: tuple[int, ...]
    best_val_losses: tuple[float, ...]
    stopped_by: str
    elapsed_s: float


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


def train_masked(net: StackedMLP, x: FloatArray, y: FloatArray, x_val: FloatArray, y_val: FloatArray,
                 config: TrainConfig, callback: Callable[[EpochInfo], None] | None = None) -> TrainLog:
    """Train ``net`` with Adam on the masked MSE, early-stopping each net on its validation loss.

    Parameters
    ----------
    net
        The networks (modified in place; on return each holds its best-validation weights).
    x, y
        Standardized training inputs ``(n, d)`` and targets ``(n, G * m)``, NaN where undefined.
    x_val, y_val
        The validation part, same layout.
    config
        Optimiser, batch, schedule and stopping settings.
    callback
        Called after every epoch with an :class:`EpochInfo`.
    """
    started = time.monotonic()
    g = net.n_nets
    xt, yt, mt = _tensors(x, y)
    xv, yv, mv = _tensors(x_val, y_val)
    opt = torch.optim.Adam(net.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    gen = torch.Generator().manual_seed(config.seed)
    best = torch.full((g,), math.inf)
    best_epoch = torch.zeros(g, dtype=torch.long)
    best_state = [p.detach().clone() for p in net.parameters()]
    lr, since_improved_total, best_total = config.lr, 0, math.inf
    stopped_by, epoch = "max_epochs", 0
    n = xt.shape[0]
    for epoch in range(1, config.max_epochs + 1):
        lr = _lr_at(config, epoch - 1, lr)
        for group in opt.param_groups:
            group["lr"] = lr
        net.train()
        perm = torch.randperm(n, generator=gen)
        total, batches = 0.0, 0
        for start in range(0, n, config.batch_size):
            idx = perm[start:start + config.batch_size]
            loss = masked_mse_per_net(net(xt[idx]), yt[idx], mt[idx], g).sum()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += float(loss.detach())
            batches += 1
        net.eval()
        with torch.no_grad():
            val = masked_mse_per_net(net(xv), yv, mv, g)
        improved = val < best
        if bool(improved.any()):
            best = torch.where(improved, val, best)
            best_epoch[improved] = epoch
            with torch.no_grad():
                for keep, p in zip(best_state, net.parameters(), strict=True):
                    keep[improved] = p.detach()[improved]
        val_total = float(val.sum())
        if val_total < best_total:
            best_total, since_improved_total = val_total, 0
        else:
            since_improved_total += 1
        if config.lr_schedule == "plateau" and since_improved_total >= config.plateau_patience:
            lr, since_improved_total = max(lr * 0.5, config.min_lr), 0
        if callback is not None:
            callback(EpochInfo(epoch, config.max_epochs, total / max(batches, 1), val_total, float(best.sum()), lr))
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
                    stopped_by, time.monotonic() - started)


def predict_numpy(net: StackedMLP, x: FloatArray) -> FloatArray:
    """Run ``net`` on standardized inputs in one forward pass and return float64 outputs."""
    with torch.inference_mode():
        out = net(torch.as_tensor(x, dtype=torch.float32))
    return out.numpy().astype(np.float64)
