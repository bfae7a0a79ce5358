"""NN1 and NN2 (mulder2020 Table 3): torch MLPs on the standardized inputs, trained with a masked loss."""

from __future__ import annotations

import itertools
import time
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from edgeplan.costmodels.primitive_models.base import FloatArray, PrimitiveEstimator, ProgressCallback
from edgeplan.errors import InvalidInputError

__all__ = ["NN1Model", "NN2Model"]

class _TorchModel(PrimitiveEstimator):
    """Shared settings and training of NN1 and NN2 (torch is imported only in fit and predict)."""

    _param_names: ClassVar[tuple[str, ...]] = (
        "hidden", "lr", "weight_decay", "batch_size", "max_epochs", "patience", "lr_schedule", "min_lr",
        "log_inputs", "pow2_features", "validation_fraction", "threads", "random_state", "time_limit_s",
        "applicability_by", "n_members", "target_scale", "ema_decay")

    def __init__(self, *, hidden: tuple[int, ...], lr: float, weight_decay: float, batch_size: int = 1024,
                 max_epochs: int = 3000, patience: int = 250, lr_schedule: str = "constant", min_lr: float = 1e-5,
                 log_inputs: bool = False, pow2_features: bool = False, validation_fraction: float = 0.1,
                 threads: int = 2, random_state: int = 0, time_limit_s: float | None = None,
                 applicability_by: tuple[str, ...] = ("f", "s"), n_members: int = 1,
                 target_scale: str = "per-output", ema_decay: float = 0.0) -> None:
        self.hidden = hidden
        self.lr = lr
        self.weight_decay = weight_decay
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.patience = patience
        self.lr_schedule = lr_schedule
        self.min_lr = min_lr
        self.log_inputs = log_inputs
        self.pow2_features = pow2_features
        self.validation_fraction = validation_fraction
        self.threads = threads
        self.random_state = random_state
        self.time_limit_s = time_limit_s
        self.applicability_by = applicability_by
        self.n_members = n_members
        self.target_scale = target_scale
        self.ema_decay = ema_decay

    def _config(self, member: int = 0) -> Any:
        from edgeplan.costmodels._mlp import TrainConfig

        if self.lr_schedule not in ("constant", "plateau", "cosine"):
            raise InvalidInputError(f"lr_schedule {self.lr_schedule!r}: use constant, plateau or cosine")
        if min(self.threads, self.batch_size, self.max_epochs, self.patience, self.n_members) < 1:
            raise InvalidInputError("threads, batch_size, max_epochs, patience and n_members must be at least 1")
        if not 0.0 <= float(self.ema_decay) < 1.0:
            raise InvalidInputError(f"ema_decay {self.ema_decay}: use a value in [0, 1) (0 turns the weight "
                                    f"average off)")
        return TrainConfig(lr=self.lr, weight_decay=self.weight_decay, batch_size=self.batch_size,
                           max_epochs=self.max_epochs, patience=self.patience, lr_schedule=self.lr_schedule,
                           min_lr=self.min_lr, seed=self.random_state + member, time_limit_s=self.time_limit_s,
                           ema_decay=float(self.ema_decay))

    def _groups(self, y: FloatArray) -> list[list[int]]:
        raise NotImplementedError

    def _out_per_net(self) -> bool:
        """True when each net of a group has one output (NN1), False for one net with all outputs (NN2)."""
        raise NotImplementedError

    def _fit_normalized(self, x: FloatArray, y: FloatArray, xv: FloatArray, yv: FloatArray,
                        callback: ProgressCallback | None) -> None:
        import threading
        from concurrent.futures import CancelledError, ThreadPoolExecutor

        import torch

        from edgeplan.costmodels._mlp import StackedMLP, TrainLog, torch_threads, train_masked

        configs = [self._config(m) for m in range(max(self.n_members, 1))]  # _config checks n_members >= 1
        groups = self._groups(y)
        one_each = self._out_per_net()

        workers = max(1, min(int(self.threads), int(self.n_members)))
        per_job = max(1, int(self.threads) // workers)

        def train(member: int, gi: int) -> tuple[list[int], Any, TrainLog | None]:
            torch.set_num_threads(per_job)  # OpenMP's thread count is per thread: a worker thread sets its own
            cols = groups[gi]
            n_nets = len(cols) if one_each else 1
            widths = (x.shape[1], *self.hidden, 1 if one_each else len(cols))
            net = StackedMLP(n_nets, widths, seed=self.random_state + gi + member)
            rows = ~np.isnan(y[:, cols]).all(axis=1)
            stage = f"{self.kind} {gi + 1}/{len(groups)}" if len(groups) > 1 else self.kind
            if self.n_members > 1:
                stage += f" member {member + 1}/{self.n_members}"

            def report(info: Any) -> None:
                if callback is not None:
                    callback(stage, info)

            if not rows.any():  # an output with no defined training row keeps its initial net and never applies
                return cols, net, None
            return cols, net, train_masked(net, x[rows], y[rows][:, cols], xv, yv[:, cols], configs[member], report)

        jobs = list(itertools.product(range(self.n_members), range(len(groups))))
        # Ensemble members are independent: with several threads they train side by side, one thread each (two
        # one-thread matrix products run faster on two cores than one two-thread product), in Python threads
        # (torch releases the GIL inside its kernels). Each member's arithmetic is then single-threaded and its
        # result does not depend on the scheduling.
        started = time.monotonic()
        with torch_threads(per_job):
            if workers > 1:
                stop = threading.Event()  # set by the first failure: a worker starts no further member

                def guarded(job: tuple[int, int]) -> tuple[list[int], Any, TrainLog | None]:
                    if stop.is_set():
                        raise CancelledError("another ensemble member failed")
                    try:
                        return train(*job)
                    except BaseException:
                        stop.set()
                        raise

                pool = ThreadPoolExecutor(max_workers=workers)
                try:
                    done = list(pool.map(guarded, jobs))
                except BaseException:  # a member failed or the fit was interrupted: start no queued member
                    stop.set()
                    pool.shutdown(wait=True, cancel_futures=True)
                    raise
                pool.shutdown(wait=True)
            else:
                done = [train(*job) for job in jobs]
        net_groups = [cols for cols, _, _ in done]
        nets = [net for _, net, _ in done]
        logs = [log for _, _, log in done if log is not None]
        self.groups_ = net_groups
        self.nets_ = nets
        self.n_epochs_ = tuple(log.epochs for log in logs)
        self.best_epochs_ = tuple(e for log in logs for e in log.best_epochs)
        self.stopped_by_ = tuple(log.stopped_by for log in logs)
        self.on_validation_ = tuple(v for log in logs for v in log.on_validation)
        self.fit_time_s_ = time.monotonic() - started  # wall time: members may have trained side by side

    def _predict_normalized(self, x: FloatArray) -> FloatArray:
        from edgeplan.costmodels._mlp import predict_numpy, torch_threads

        total = np.zeros((x.shape[0], len(self.output_names_)))
        count = np.zeros(len(self.output_names_))
        with torch_threads(self.threads):
            for cols, net in zip(self.groups_, self.nets_, strict=True):
                total[:, cols] += predict_numpy(net, x)
                count[cols] += 1
        return np.asarray(total / np.maximum(count, 1), dtype=np.float64)

    def _model_state(self) -> tuple[dict[str, Any], dict[str, npt.NDArray[Any]]]:
        arrays: dict[str, npt.NDArray[Any]] = {}
        nets = []
        for gi, (cols, net) in enumerate(zip(self.groups_, self.nets_, strict=True)):
            for name, a in net.to_arrays().items():
                arrays[f"net{gi}.{name}"] = a
            nets.append({"outputs": cols, "n_nets": net.n_nets, "widths": list(net.widths)})
        meta = {"nets": nets, "n_epochs": list(self.n_epochs_), "best_epochs": list(self.best_epochs_),
                "stopped_by": list(self.stopped_by_), "on_validation": list(self.on_validation_),
                "fit_time_s": self.fit_time_s_}
        return meta, arrays

    def _load_model_state(self, meta: dict[str, Any], arrays: dict[str, npt.NDArray[Any]]) -> None:
        from edgeplan.costmodels._mlp import StackedMLP

        self.groups_ = [list(map(int, n["outputs"])) for n in meta["nets"]]
        self.nets_ = []
        for gi, n in enumerate(meta["nets"]):
            prefix = f"net{gi}."
            own = {k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)}
            self.nets_.append(StackedMLP.from_arrays(int(n["n_nets"]), tuple(int(w) for w in n["widths"]), own))
        self.n_epochs_ = tuple(meta.get("n_epochs", ()))
        self.best_epochs_ = tuple(meta.get("best_epochs", ()))
        self.stopped_by_ = tuple(meta.get("stopped_by", ()))
        self.on_validation_ = tuple(bool(v) for v in meta.get("on_validation", ()))
        self.fit_time_s_ = float(meta.get("fit_time_s", 0.0))

    groups_: list[list[int]]
    nets_: list[Any]
    n_epochs_: tuple[int, ...]
    best_epochs_: tuple[int, ...]
    stopped_by_: tuple[str, ...]
    on_validation_: tuple[bool, ...]
    fit_time_s_: float


class NN1Model(_TorchModel):
    """NN1: one ``d x 16 x 64 x 64 x 16 x 1`` ReLU network per output, each on its own defined rows.

    Outputs defined on exactly the same training rows are trained side by side as one stacked network, each with
    its own early stopping and best weights. With ``lr_schedule="constant"`` (the paper's) that is the same
    procedure as training them one by one; with ``"plateau"`` (the ``edgeplan`` recipe) it is not: the nets of a
    group share one learning rate, halved when their summed validation loss stalls (see
    :mod:`edgeplan.costmodels._mlp`).

    Parameters
    ----------
    hidden
        Hidden widths (mulder2020 Table 3: 16, 64, 64, 16).
    lr, weight_decay, batch_size
        Adam settings (Table 3: 0.003, 0, 1024).
    max_epochs, patience
        Upper bound on epochs (3000; an edgeplan bound, not in the paper); early stopping after ``patience``
        **epochs** without a better validation loss (250; Table 3 says 250 iterations, see the module docstring).
    lr_schedule, min_lr
        ``"constant"`` (the paper), ``"plateau"`` or ``"cosine"`` (see :class:`edgeplan.costmodels._mlp.TrainConfig`).
    log_inputs
        Log the inputs before standardizing them (edgeplan option).
    pow2_features
        Add the power-of-two factors of ``c, k, im`` as inputs (edgeplan option; see :func:`pow2_valuation`).
    validation_fraction
        Held out of the training rows when ``fit`` gets no validation part.
    threads
        Torch threads for fit and predict; in fit, shared out among ensemble members trained side by side (see
        ``n_members``).
    random_state
        Seed of initialisation, shuffling and the hold-out.
    time_limit_s
        Stop training after this many seconds per network group and member (None: no limit).
    applicability_by
        Features whose training pattern decides where an output applies.
    n_members, target_scale, ema_decay
        As for :class:`NN2Model` (edgeplan options; the paper's are 1, ``"per-output"`` and 0); every network group
        is trained ``n_members`` times.
    """

    kind: ClassVar[str] = "nn1"

    def __init__(self, *, hidden: tuple[int, ...] = (16, 64, 64, 16), lr: float = 3e-3, weight_decay: float = 0.0,
                 batch_size: int = 1024, max_epochs: int = 3000, patience: int = 250,
                 lr_schedule: str = "constant", min_lr: float = 1e-5, log_inputs: bool = False,
                 pow2_features: bool = False, validation_fraction: float = 0.1, threads: int = 2,
                 random_state: int = 0,
                 time_limit_s: float | None = None, applicability_by: tuple[str, ...] = ("f", "s"),
                 n_members: int = 1, target_scale: str = "per-output", ema_decay: float = 0.0) -> None:
        super().__init__(hidden=hidden, lr=lr, weight_decay=weight_decay, batch_size=batch_size,
                         max_epochs=max_epochs, patience=patience, lr_schedule=lr_schedule, min_lr=min_lr,
                         log_inputs=log_inputs, pow2_features=pow2_features,
                         validation_fraction=validation_fraction, threads=threads,
                         random_state=random_state, time_limit_s=time_limit_s, applicability_by=applicability_by,
                         n_members=n_members, target_scale=target_scale, ema_decay=ema_decay)

    def _out_per_net(self) -> bool:
        return True

    def _groups(self, y: FloatArray) -> list[list[int]]:
        by_pattern: dict[bytes, list[int]] = {}
        for j in range(y.shape[1]):
            by_pattern.setdefault((~np.isnan(y[:, j])).tobytes(), []).append(j)
        return [cols for cols in by_pattern.values() if not np.isnan(y[:, cols[0]]).all()] + [
            cols for cols in by_pattern.values() if np.isnan(y[:, cols[0]]).all()]


class NN2Model(_TorchModel):
    """NN2: one ``d x 128 x 512 x 512 x 128 x n`` ReLU network for all outputs, masked MSE.

    Parameters
    ----------
    hidden
        Hidden widths (mulder2020 Table 3: 128, 512, 512, 128).
    lr, weight_decay, batch_size
        Adam settings (Table 3: 0.001, 1e-5, 1024).
    max_epochs, patience
        Upper bound on epochs (3000; an edgeplan bound, not in the paper); early stopping after ``patience``
        **epochs** without a better validation loss (250; Table 3 says 250 iterations, see the module docstring).
    lr_schedule, min_lr
        ``"constant"`` (the paper), ``"plateau"`` or ``"cosine"``.
    log_inputs
        Log the inputs before standardizing them (edgeplan option).
    pow2_features
        Add the power-of-two factors of ``c, k, im`` as inputs (edgeplan option; see :func:`pow2_valuation`).
    validation_fraction
        Held out of the training rows when ``fit`` gets no validation part.
    threads
        Torch threads for fit and predict; in fit, shared out among ensemble members trained side by side (see
        ``n_members``).
    random_state
        Seed of initialisation, shuffling and the hold-out.
    time_limit_s
        Stop training a member after this many seconds (None: no limit); members training side by side each have
        their own.
    applicability_by
        Features whose training pattern decides where an output applies.
    n_members
        Ensemble size (edgeplan option; the paper's is 1): that many networks are trained the same way but from
        other seeds (member ``m`` of network group ``g`` starts from seed ``random_state + g + m`` and shuffles with
        seed ``random_state + m``), each early-stopping on its own; the prediction is the mean of their
        standardized log-times (a geometric mean of times). Up to ``threads`` members train side by side, each on
        ``threads // min(threads, n_members)`` torch threads; the rest wait their turn. Prediction time grows
        ``n_members``-fold, fit time about ``ceil(n_members / min(threads, n_members))``-fold.
    target_scale
        ``"per-output"`` (the paper: each output's log-times standardized by their own deviation) or
        ``"shared"`` (centred per output, divided by one deviation pooled over all outputs; edgeplan option). The
        loss is then the squared error of log-times, the same weight for a relative error on every output; per
        output it would weigh an output with widely spread times less.
    ema_decay
        0 (the paper) or the decay of an exponential moving average of the weights, updated after every step; the
        average is what is early-stopped on and kept (edgeplan option; see
        :class:`edgeplan.costmodels._mlp.TrainConfig`). Fine-tuning (:mod:`edgeplan.costmodels.transfer_learning`)
        trains the raw weights without it: its few samples make an epoch one step.
    """

    kind: ClassVar[str] = "nn2"

    def __init__(self, *, hidden: tuple[int, ...] = (128, 512, 512, 128), lr: float = 1e-3,
                 weight_decay: float = 1e-5, batch_size: int = 1024, max_epochs: int = 3000, patience: int = 250,
                 lr_schedule: str = "constant", min_lr: float = 1e-5, log_inputs: bool = False,
                 pow2_features: bool = False, validation_fraction: float = 0.1, threads: int = 2,
                 random_state: int = 0,
                 time_limit_s: float | None = None, applicability_by: tuple[str, ...] = ("f", "s"),
                 n_members: int = 1, target_scale: str = "per-output", ema_decay: float = 0.0) -> None:
        super().__init__(hidden=hidden, lr=lr, weight_decay=weight_decay, batch_size=batch_size,
                         max_epochs=max_epochs, patience=patience, lr_schedule=lr_schedule, min_lr=min_lr,
                         log_inputs=log_inputs, pow2_features=pow2_features,
                         validation_fraction=validation_fraction, threads=threads,
                         random_state=random_state, time_limit_s=time_limit_s, applicability_by=applicability_by,
                         n_members=n_members, target_scale=target_scale, ema_decay=ema_decay)

    def _out_per_net(self) -> bool:
        return False

    def _groups(self, y: FloatArray) -> list[list[int]]:
        return [list(range(y.shape[1]))]
