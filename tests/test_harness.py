"""Tests of the timing harness: configuration, statistics, the adaptive stop and thread settings."""

from __future__ import annotations

import itertools
import math
import statistics
import time
from collections.abc import Iterable
from fractions import Fraction
from pathlib import Path

import pytest

from edgeplan.errors import InvalidInputError
from edgeplan.measure.harness import (
    Timing,
    TimingConfig,
    median_ci_ranks,
    median_confidence_interval,
    set_threads,
    time_callable,
    use_threads,
)


class FakeClock:
    """A clock that only moves when the timed work says how long it took."""

    def __init__(self, durations_ms: Iterable[float]) -> None:
        self.now_ns = 0
        self.calls = 0
        self._durations = iter(durations_ms)

    def __call__(self) -> int:
        return self.now_ns

    def work(self) -> None:
        self.calls += 1
        self.now_ns += round(next(self._durations) * 1e6)


# ---------------------------------------------------------------- configuration


@pytest.mark.parametrize(
    "kwargs",
    [
        {"warmup": -1},
        {"min_repeats": 0},
        {"max_repeats": 0},
        {"min_repeats": -3},
        {"target_rel_ci": 0.0},
        {"target_rel_ci": -0.1},
        {"target_rel_ci": math.nan},
        {"max_time_s": 0},
        {"max_time_s": -1.0},
        {"max_time_s": math.inf},
        {"min_repeats": 20, "max_repeats": 10},
        {"min_repeats": 2.5},
        {"warmup": True},
        {"max_time_s": "10"},
    ],
)
def test_config_rejects_bad_values(kwargs: dict[str, object]) -> None:
    with pytest.raises(InvalidInputError, match="TimingConfig"):
        TimingConfig(**kwargs)  # type: ignore[arg-type]


def test_config_defaults_and_zero_warmup_are_valid() -> None:
    config = TimingConfig()
    assert (config.warmup, config.min_repeats, config.max_repeats) == (5, 10, 200)
    assert TimingConfig(warmup=0).warmup == 0


# ---------------------------------------------------------------- confidence interval of the median


def _coverage(n: int, low: int) -> Fraction:
    """Exact probability that [x(low), x(n - low + 1)] covers the median."""
    return 1 - Fraction(2 * sum(math.comb(n, k) for k in range(low)), 2**n)


@pytest.mark.parametrize("n", [*range(1, 60), 100, 101, 500, 1999, 2000])
def test_median_ci_ranks_are_the_tightest_with_95_percent_coverage(n: int) -> None:
    ranks = median_ci_ranks(n)
    if n < 6:
        assert ranks is None
        return
    assert ranks is not None
    low, high = ranks
    assert high == n - low + 1
    assert _coverage(n, low) >= Fraction(95, 100)
    assert _coverage(n, low + 1) < Fraction(95, 100)


def test_median_ci_known_values() -> None:
    assert median_ci_ranks(6) == (1, 6)
    assert median_ci_ranks(10) == (2, 9)
    assert median_ci_ranks(20) == (6, 15)
    assert median_ci_ranks(100) == (40, 61)


@pytest.mark.parametrize("n", [2001, 3000])
def test_median_ci_ranks_normal_approximation_is_within_one_rank(n: int) -> None:
    ranks = median_ci_ranks(n)
    assert ranks is not None
    low = ranks[0]
    assert _coverage(n, low - 1) >= Fraction(95, 100)  # the exact rank is at least low - 1 ...
    assert _coverage(n, low + 2) < Fraction(95, 100)  # ... and at most low + 1


def test_median_confidence_interval_picks_order_statistics() -> None:
    samples = [10.0, 1.0, 9.0, 2.0, 8.0, 3.0, 7.0, 4.0, 6.0, 5.0]
    assert median_confidence_interval(samples) == (2.0, 9.0)
    assert median_confidence_interval(samples[:5]) is None


# ---------------------------------------------------------------- statistics


def test_statistics_match_reference_on_controlled_durations() -> None:
    durations_ms = [5.0, 1.0, 4.0, 2.0, 3.0, 9.0, 7.0, 6.0, 10.0, 8.0]
    warmup_ms = [100.0, 100.0]
    clock = FakeClock(itertools.chain(warmup_ms, durations_ms))
    config = TimingConfig(warmup=2, min_repeats=10, max_repeats=10, target_rel_ci=0.01, max_time_s=3600)
    timing = time_callable(clock.work, config, clock_ns=clock)

    assert timing.samples_ms == pytest.approx(tuple(durations_ms))  # warm-up runs are not timed
    assert timing.repeats == 10
    assert timing.stopped_by == "max_repeats"
    assert timing.median_ms == pytest.approx(5.5)
    assert timing.p25_ms == pytest.approx(3.25)  # linear interpolation, as numpy.percentile
    assert timing.p75_ms == pytest.approx(7.75)
    assert (timing.min_ms, timing.max_ms) == pytest.approx((1.0, 10.0))
    assert timing.mean_ms == pytest.approx(5.5)
    assert timing.std_ms == pytest.approx(statistics.stdev(durations_ms))
    assert timing.iqr_rel == pytest.approx((7.75 - 3.25) / 5.5)
    assert timing.ci_rel == pytest.approx((9.0 - 2.0) / 2 / 5.5)  # ranks (2, 9) for n = 10


def test_single_sample_statistics() -> None:
    timing = Timing.from_samples([4.0], "time_cap")
    assert (timing.median_ms, timing.p25_ms, timing.p75_ms, timing.std_ms) == (4.0, 4.0, 4.0, 0.0)
    assert timing.ci_rel == math.inf
    with pytest.raises(InvalidInputError):
        Timing.from_samples([], "time_cap")


def test_sync_is_called_after_every_run() -> None:
    clock = FakeClock(itertools.repeat(1.0))
    synced: list[int] = []
    config = TimingConfig(warmup=3, min_repeats=7, max_repeats=50, target_rel_ci=0.05, max_time_s=3600)
    timing = time_callable(clock.work, config, sync=lambda: synced.append(clock.calls), clock_ns=clock)
    assert synced == list(range(1, clock.calls + 1))
    assert clock.calls == 3 + timing.repeats


# ---------------------------------------------------------------- adaptive stop


def test_constant_durations_stop_on_confidence_at_min_repeats() -> None:
    clock = FakeClock(itertools.repeat(2.0))
    config = TimingConfig(warmup=1, min_repeats=12, max_repeats=200, target_rel_ci=0.02, max_time_s=3600)
    timing = time_callable(clock.work, config, clock_ns=clock)
    assert timing.stopped_by == "confidence"
    assert timing.repeats == 12
    assert timing.ci_rel == 0.0


def test_noisy_durations_continue_until_the_interval_is_narrow() -> None:
    # Durations alternate 9, 10, 11 ms: the interval of the median only narrows to +-5% once ranks fall inside
    # the middle value's block.
    clock = FakeClock(itertools.cycle([9.0, 10.0, 11.0]))
    config = TimingConfig(warmup=0, min_repeats=6, max_repeats=500, target_rel_ci=0.01, max_time_s=3600)
    timing = time_callable(clock.work, config, clock_ns=clock)
    assert timing.stopped_by == "confidence"
    assert timing.repeats > 6
    assert timing.ci_rel <= 0.01
    assert timing.median_ms == pytest.approx(10.0)


def test_time_cap_counts_the_whole_call() -> None:
    clock = FakeClock(itertools.cycle([1000.0, 1500.0]))  # 1 s and 1.5 s: never confident at 1%
    config = TimingConfig(warmup=2, min_repeats=5, max_repeats=100, target_rel_ci=0.01, max_time_s=5.0)
    timing = time_callable(clock.work, config, clock_ns=clock)
    # Warm-up: 1 s + 1.5 s; then timed runs until 5 s have passed: 1 s (3.5 s), 1.5 s (5 s).
    assert timing.stopped_by == "time_cap"
    assert timing.repeats == 2


def test_time_cap_shorter_than_one_run_still_times_once() -> None:
    clock = FakeClock(itertools.repeat(50.0))
    config = TimingConfig(warmup=5, min_repeats=10, max_repeats=100, target_rel_ci=0.02, max_time_s=0.01)
    timing = time_callable(clock.work, config, clock_ns=clock)
    assert timing.stopped_by == "time_cap"
    assert timing.repeats == 1
    assert clock.calls == 2  # one warm-up run used up the cap; the rest of the warm-up is skipped


def test_max_repeats_stops_a_noisy_callable() -> None:
    clock = FakeClock(itertools.cycle([1.0, 2.0, 4.0, 8.0]))
    config = TimingConfig(warmup=0, min_repeats=5, max_repeats=25, target_rel_ci=0.001, max_time_s=3600)
    timing = time_callable(clock.work, config, clock_ns=clock)
    assert timing.stopped_by == "max_repeats"
    assert timing.repeats == 25


def test_real_sleep_stops_on_confidence_with_a_loose_target() -> None:
    config = TimingConfig(warmup=1, min_repeats=8, max_repeats=2000, target_rel_ci=0.5, max_time_s=120)
    timing = time_callable(lambda: time.sleep(0.002), config)
    assert timing.stopped_by == "confidence"
    assert timing.median_ms >= 2.0  # sleep never returns early
    assert timing.min_ms <= timing.p25_ms <= timing.median_ms <= timing.p75_ms <= timing.max_ms


def test_real_sleep_with_tiny_cap_stops_on_time_cap() -> None:
    config = TimingConfig(warmup=3, min_repeats=10, max_repeats=100, target_rel_ci=0.001, max_time_s=0.001)
    timing = time_callable(lambda: time.sleep(0.002), config)
    assert timing.stopped_by == "time_cap"
    assert timing.repeats == 1
    assert timing.samples_ms[0] >= 2.0


# ---------------------------------------------------------------- threads


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "4"])
def test_thread_count_is_validated(bad: object) -> None:
    with pytest.raises(InvalidInputError, match="thread count must be a positive integer"):
        set_threads(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="thread count must be a positive integer"), use_threads(bad):  # type: ignore[arg-type]
        pass


def test_thread_count_message_names_the_value() -> None:
    with pytest.raises(InvalidInputError, match=r"^thread count must be a positive integer, got 0$"):
        set_threads(0)


def test_threads_are_set_and_restored() -> None:
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    try:
        set_threads(1)
        assert torch.get_num_threads() == 1
        with use_threads(2):
            assert torch.get_num_threads() == 2
        assert torch.get_num_threads() == 1
        with pytest.raises(RuntimeError, match="boom"), use_threads(3):
            assert torch.get_num_threads() == 3
            raise RuntimeError("boom")
        assert torch.get_num_threads() == 1
        with pytest.raises(InvalidInputError), use_threads(0):
            pass
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


# ---------------------------------------------------------------- runners (real models, CPU)

QUICK = TimingConfig(warmup=1, min_repeats=5, max_repeats=20, target_rel_ci=0.5, max_time_s=5.0)


def test_measure_torch_times_a_module_and_restores_state() -> None:
    torch = pytest.importorskip("torch")
    from edgeplan.measure import measure_torch

    module = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU()).train()
    before = torch.get_num_threads()
    timing = measure_torch(module, (torch.randn(4, 16),), threads=1, config=QUICK)
    assert timing.repeats >= 1 and timing.median_ms > 0
    assert module.training  # mode restored
    assert torch.get_num_threads() == before  # threads restored


def test_measure_torch_failure_names_the_model() -> None:
    torch = pytest.importorskip("torch")
    from edgeplan.errors import MeasurementError
    from edgeplan.measure import measure_torch

    module = torch.nn.Linear(16, 8)
    with pytest.raises(MeasurementError, match=r"'tiny-linear'.*example_inputs"):
        measure_torch(module, (torch.randn(4, 15),), threads=1, config=QUICK, name="tiny-linear")
    with pytest.raises(InvalidInputError, match="thread count"):
        measure_torch(module, (torch.randn(4, 16),), threads=0, config=QUICK)
    if not torch.cuda.is_available():
        with pytest.raises(MeasurementError, match="CUDA is not available"):
            measure_torch(module, (torch.randn(4, 16),), threads=1, config=QUICK, device="cuda")


def test_measure_torch_on_cuda() -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from edgeplan.measure import describe_device, measure_torch

    timing = measure_torch(torch.nn.Linear(256, 256), (torch.randn(64, 256),), threads=1, config=QUICK, device="cuda")
    assert timing.median_ms > 0
    assert describe_device("torch", threads=1, torch_device="cuda").accelerator


def _matmul_onnx(path: Path) -> Path:
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper

    weight = helper.make_tensor("w", TensorProto.FLOAT, [16, 8], [0.5] * 128)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "matmul",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 8])],
        [weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def test_measure_onnxruntime_with_shapes_and_arrays(tmp_path: Path) -> None:
    np = pytest.importorskip("numpy")
    from edgeplan.measure import measure_onnxruntime

    model = _matmul_onnx(tmp_path / "mm.onnx")
    assert measure_onnxruntime(model, [(4, 16)], threads=1, config=QUICK).median_ms > 0
    assert measure_onnxruntime(model, {"x": np.ones((2, 16), np.float32)}, threads=1, config=QUICK).repeats >= 1


def test_measure_onnxruntime_failures_name_the_file(tmp_path: Path) -> None:
    from edgeplan.errors import MeasurementError
    from edgeplan.measure import measure_onnxruntime

    model = _matmul_onnx(tmp_path / "mm.onnx")
    with pytest.raises(MeasurementError, match=r"mm\.onnx"):
        measure_onnxruntime(model, [(4, 15)], threads=1, config=QUICK)
    with pytest.raises(InvalidInputError, match=r"mm\.onnx has 1 inputs"):
        measure_onnxruntime(model, [(4, 16), (1,)], threads=1, config=QUICK)
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"not a model")
    with pytest.raises(MeasurementError, match=r"garbage\.onnx"):
        measure_onnxruntime(garbage, [(4, 16)], threads=1, config=QUICK)
    with pytest.raises(InvalidInputError, match="does not exist"):
        measure_onnxruntime(tmp_path / "missing.onnx", [(4, 16)], threads=1, config=QUICK)
