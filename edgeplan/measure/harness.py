"""The timing harness: warm-up, repeated timed runs, robust statistics and an adaptive stop.

A latency is the median of repeated runs after warm-up. :func:`time_callable` keeps timing until the 95%
confidence interval of the median is narrow enough (relative to the median), a repeat limit is reached, or the
time cap of the whole call runs out, and it says which of the three stopped it.

The confidence interval of the median is distribution-free: with ``n`` sorted samples ``x(1) <= ... <= x(n)``,
the number of samples below the true median follows ``Binomial(n, 1/2)`` whatever the latency distribution, so
``[x(l), x(n - l + 1)]`` covers the median with probability ``1 - 2 P(B <= l - 1)``. The harness takes the largest
``l`` whose coverage is still at least 95%. This needs no normality assumption (latencies are skewed and often
multi-modal); it needs at least 6 samples, since ``1 - 2 / 2**6`` is the first coverage above 95%. The ranks are
exact (integer arithmetic) up to :data:`EXACT_RANKS_MAX_N` samples and use the normal approximation of the
binomial beyond, where it is accurate to within one rank.

Checking the interval after every run (optional stopping) makes the stop a heuristic rather than a test at an
exact 95% level; the stored ``ci_rel`` is still the honest width of the interval on the samples kept.

Torch is imported only inside :func:`set_threads` and :func:`use_threads`.
"""

from __future__ import annotations

import bisect
import functools
import math
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

from edgeplan.errors import InvalidInputError

__all__ = [
    "EXACT_RANKS_MAX_N",
    "StopReason",
    "Timing",
    "TimingConfig",
    "check_thread_count",
    "median_ci_ranks",
    "median_confidence_interval",
    "set_threads",
    "time_callable",
    "use_threads",
]

StopReason = Literal["confidence", "time_cap", "max_repeats"]

#: Largest sample count for which :func:`median_ci_ranks` computes the binomial ranks exactly.
EXACT_RANKS_MAX_N = 2000

_CI_ALPHA_NUM, _CI_ALPHA_DEN = 1, 20  # 1 - 0.95, as an exact fraction
_Z_975 = 1.959963984540054  # standard normal quantile at 0.975


@dataclass(frozen=True)
class TimingConfig:
    """How long and how often :func:`time_callable` runs a callable.

    Parameters
    ----------
    warmup
        Untimed runs before the first timed one (caches, allocators, lazy initialisation). ``0`` is allowed and
        measures a cold start; negative values are refused.
    min_repeats
        Timed runs always made before the confidence stop is considered (the time cap can still stop earlier).
    max_repeats
        Timed runs never exceeded.
    target_rel_ci
        Stop once the relative half-width of the 95% confidence interval of the median (``Timing.ci_rel``) is
        at most this value, e.g. ``0.02`` for +-2%.
    max_time_s
        Time cap of the whole call (warm-up included), in seconds.

    Raises
    ------
    InvalidInputError
        If a value is not of the right type, is not positive (``warmup``: negative), or
        ``min_repeats > max_repeats``.
    """

    warmup: int = 5
    min_repeats: int = 10
    max_repeats: int = 200
    target_rel_ci: float = 0.02
    max_time_s: float = 10.0

    def __post_init__(self) -> None:
        _check_int("warmup", self.warmup, minimum=0)
        _check_int("min_repeats", self.min_repeats, minimum=1)
        _check_int("max_repeats", self.max_repeats, minimum=1)
        _check_positive_float("target_rel_ci", self.target_rel_ci)
        _check_positive_float("max_time_s", self.max_time_s)
        if self.min_repeats > self.max_repeats:
            raise InvalidInputError(
                f"TimingConfig: min_repeats ({self.min_repeats}) is larger than max_repeats ({self.max_repeats}); "
                "lower min_repeats or raise max_repeats"
            )


def _check_int(name: str, value: object, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInputError(f"TimingConfig: {name} must be an integer, got {value!r}")
    if value < minimum:
        bound = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise InvalidInputError(f"TimingConfig: {name} must be {bound}, got {value}")


def _check_positive_float(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInputError(f"TimingConfig: {name} must be a number, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise InvalidInputError(f"TimingConfig: {name} must be a positive finite number, got {value}")


@dataclass(frozen=True)
class Timing:
    """The result of timing a callable; all durations in milliseconds.

    Attributes
    ----------
    median_ms, p25_ms, p75_ms, min_ms, max_ms, mean_ms
        Median, quartiles (linear interpolation between order statistics), extremes and mean of the samples.
    std_ms
        Sample standard deviation (``ddof=1``); ``0.0`` with a single sample.
    iqr_rel
        Interquartile range relative to the median, ``(p75_ms - p25_ms) / median_ms``.
    ci_rel
        Relative **half-width** of the distribution-free 95% confidence interval of the median,
        ``(hi - lo) / (2 * median_ms)``; ``inf`` when fewer than 6 samples make the interval undefined.
    repeats
        Number of timed runs (``len(samples_ms)``).
    stopped_by
        ``"confidence"`` (``ci_rel <= target_rel_ci`` after ``min_repeats``), ``"max_repeats"`` or ``"time_cap"``.
    samples_ms
        Every timed run, in the order they were made.
    """

    median_ms: float
    p25_ms: float
    p75_ms: float
    min_ms: float
    max_ms: float
    mean_ms: float
    std_ms: float
    iqr_rel: float
    ci_rel: float
    repeats: int
    stopped_by: StopReason
    samples_ms: tuple[float, ...]

    @classmethod
    def from_samples(cls, samples_ms: Sequence[float], stopped_by: StopReason) -> Timing:
        """Summarise raw samples.

        Parameters
        ----------
        samples_ms
            At least one duration in milliseconds.
        stopped_by
            Why the sampling stopped.

        Returns
        -------
        Timing
        """
        if not samples_ms:
            raise InvalidInputError("Timing.from_samples: no samples; time at least one run")
        ordered = sorted(samples_ms)
        median_ms = statistics.median(ordered)
        p25_ms, p75_ms = _quantile(ordered, 0.25), _quantile(ordered, 0.75)
        return cls(
            median_ms=median_ms,
            p25_ms=p25_ms,
            p75_ms=p75_ms,
            min_ms=ordered[0],
            max_ms=ordered[-1],
            mean_ms=statistics.fmean(ordered),
            std_ms=statistics.stdev(ordered) if len(ordered) > 1 else 0.0,
            iqr_rel=_relative(p75_ms - p25_ms, median_ms),
            ci_rel=_ci_rel(ordered, median_ms),
            repeats=len(ordered),
            stopped_by=stopped_by,
            samples_ms=tuple(samples_ms),
        )


def _quantile(ordered: Sequence[float], q: float) -> float:
    """Quantile with linear interpolation between order statistics (numpy's default ``linear`` method)."""
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _relative(width: float, median: float) -> float:
    if median > 0:
        return width / median
    return 0.0 if width == 0 else math.inf


def _ci_rel(ordered: Sequence[float], median_ms: float) -> float:
    interval = median_confidence_interval(ordered)
    if interval is None:
        return math.inf
    low, high = interval
    return _relative((high - low) / 2.0, median_ms)


@functools.lru_cache(maxsize=4096)
def median_ci_ranks(n: int) -> tuple[int, int] | None:
    """1-based ranks ``(l, n - l + 1)`` of the distribution-free 95% confidence interval of the median.

    Parameters
    ----------
    n
        Number of samples.

    Returns
    -------
    tuple of int or None
        The largest ``l`` with ``1 - 2 P(Binomial(n, 1/2) <= l - 1) >= 0.95`` and its mirror rank, or ``None`` when
        ``n < 6`` (no pair of order statistics reaches 95% coverage).
    """
    if n > EXACT_RANKS_MAX_N:
        # Normal approximation with continuity correction: P(B <= l - 1) ~ Phi((l - 1/2 - n/2) / (sqrt(n)/2)).
        low = math.floor((n - _Z_975 * math.sqrt(n)) / 2.0 + 0.5)
        return (low, n - low + 1) if low >= 1 else None
    # Coverage >= 0.95  <=>  2 * sum_{k < l} C(n, k) <= 0.05 * 2**n  <=>  40 * sum <= 2**n (exact integers).
    total, term, tail, low = 1 << n, 1, 0, 0
    for k in range(n // 2 + 1):
        tail += term  # term == C(n, k)
        if 2 * _CI_ALPHA_DEN * tail > _CI_ALPHA_NUM * total:
            break
        low = k + 1
        term = term * (n - k) // (k + 1)
    return (low, n - low + 1) if low >= 1 else None


def median_confidence_interval(samples_ms: Sequence[float]) -> tuple[float, float] | None:
    """Distribution-free 95% confidence interval of the median of ``samples_ms``.

    Parameters
    ----------
    samples_ms
        Samples in any order.

    Returns
    -------
    tuple of float or None
        ``(lo, hi)``, two order statistics chosen by :func:`median_ci_ranks`, or ``None`` with fewer than 6
        samples.
    """
    ordered = sorted(samples_ms)
    ranks = median_ci_ranks(len(ordered))
    if ranks is None:
        return None
    low, high = ranks
    return ordered[low - 1], ordered[high - 1]


def time_callable(
    fn: Callable[[], object],
    config: TimingConfig,
    sync: Callable[[], None] | None = None,
    *,
    clock_ns: Callable[[], int] = time.perf_counter_ns,
) -> Timing:
    """Time ``fn`` after warm-up until the median is known precisely enough, or a limit is hit.

    Each timed run is ``fn()`` followed by ``sync()`` (e.g. ``torch.cuda.synchronize`` so that asynchronous
    device work is counted), between two ``clock_ns()`` readings. After each run the stop rules are checked in
    this order: ``"confidence"`` (at least ``min_repeats`` runs and ``ci_rel <= target_rel_ci``),
    ``"max_repeats"``, ``"time_cap"`` (``max_time_s`` elapsed since the call began, warm-up included). The
    time cap also cuts the warm-up short; at least one timed run is always made, so a single run longer than the
    cap yields ``repeats == 1`` and ``ci_rel == inf``.

    Parameters
    ----------
    fn
        The work to time; its return value is ignored.
    config
        Warm-up, repeat limits, precision target and time cap.
    sync
        Called after every run of ``fn`` (warm-up and timed) and inside the timed region.
    clock_ns
        Monotonic clock in nanoseconds; tests and simulators pass a fake one.

    Returns
    -------
    Timing
        Statistics of the timed runs and why the sampling stopped.
    """
    start_ns = clock_ns()
    cap_ns = config.max_time_s * 1e9

    def run_once() -> None:
        fn()
        if sync is not None:
            sync()

    for _ in range(config.warmup):
        if clock_ns() - start_ns >= cap_ns:
            break
        run_once()
    samples_ms: list[float] = []
    ordered_ms: list[float] = []
    while True:
        t0 = clock_ns()
        run_once()
        duration_ms = (clock_ns() - t0) / 1e6
        samples_ms.append(duration_ms)
        bisect.insort(ordered_ms, duration_ms)
        reason = _stop_reason(ordered_ms, config, elapsed_ns=clock_ns() - start_ns)
        if reason is not None:
            return Timing.from_samples(samples_ms, reason)


def _stop_reason(ordered_ms: Sequence[float], config: TimingConfig, elapsed_ns: int) -> StopReason | None:
    n = len(ordered_ms)
    if n >= config.min_repeats and _ci_rel(ordered_ms, statistics.median(ordered_ms)) <= config.target_rel_ci:
        return "confidence"
    if n >= config.max_repeats:
        return "max_repeats"
    if elapsed_ns >= config.max_time_s * 1e9:
        return "time_cap"
    return None


#: The most intra-op threads a thread count may ask for (runtimes overflow or hang far above any machine's cores).
MAX_THREADS = 1024


def check_thread_count(n: object) -> int:
    """Return ``n`` if it is a valid thread count (an integer >= 1).

    Raises
    ------
    InvalidInputError
        Otherwise, e.g. ``"thread count must be a positive integer, got 0"``, or above :data:`MAX_THREADS`.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InvalidInputError(f"thread count must be a positive integer, got {n!r}")
    if n > MAX_THREADS:
        raise InvalidInputError(f"thread count {n} is more than {MAX_THREADS}; give the number of threads the "
                                "runtime should use, at most the machine's cores")
    return n


def set_threads(n: int) -> None:
    """Set torch's intra-op thread count.

    Parameters
    ----------
    n
        Number of threads, at least 1.

    Raises
    ------
    InvalidInputError
        If ``n`` is not a positive integer.
    """
    check_thread_count(n)
    import torch

    torch.set_num_threads(n)


@contextmanager
def use_threads(n: int) -> Iterator[None]:
    """Run a block with torch's intra-op thread count set to ``n``, then restore the previous count.

    Parameters
    ----------
    n
        Number of threads, at least 1.

    Raises
    ------
    InvalidInputError
        If ``n`` is not a positive integer (checked before anything changes).
    """
    check_thread_count(n)
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
