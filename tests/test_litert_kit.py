"""The calibration kit for a device edgeplan cannot reach: benchmark_model's output formats and the kit end to end
with the local stand-in."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from edgeplan.errors import InvalidInputError
from edgeplan.measure.litert_kit import parse_benchmark_output, read_kit_results

# benchmark_model's text op profile (recent versions: a [start] column, median in the statistics line)
TEXT = """INFO: Num threads: [4]
INFO: Loaded model mobilenet.tflite
INFO: Running benchmark for at least 10 iterations and at least 1 seconds but terminate if exceeding 150 seconds.
INFO: count=10 first=31290 curr=29800 min=29553 max=31290 avg=29905.3 std=512
INFO: Running benchmark for at least 50 iterations and at least 1 seconds but terminate if exceeding 150 seconds.
INFO: count=50 first=29744 curr=29612 min=29201 max=31822 avg=29850.6 std=480 p5=29300 median=29700 p95=30900
INFO: Inference timings in us: Init: 23554, First inference: 31290, Warmup (avg): 29905.3, Inference (avg): 29850.6
INFO: Operator-wise Profiling Info for Regular Benchmark Runs:
============================== Run Order ==============================
\t  [node type]\t  [start]\t  [first]\t [avg ms]\t  [%]\t  [cdf%]\t  [mem KB]\t[times called]\t[Name]
\t  CONV_2D\t  0.066\t  2.754\t  2.957\t  9.906%\t  9.906%\t  0.000\t  1\t[Conv2d_0/Relu6]:0
\t  DEPTHWISE_CONV_2D\t  3.033\t  1.628\t  1.870\t  6.265%\t 16.171%\t  0.000\t  1\t[Conv2d_1_depthwise/Relu6]:1

============================== Top by Computation Time ==============================
\t  [node type]\t  [start]\t  [first]\t [avg ms]\t  [%]\t  [cdf%]\t  [mem KB]\t[times called]\t[Name]
\t  CONV_2D\t  0.066\t  2.754\t  2.957\t  9.906%\t  9.906%\t  0.000\t  1\t[Conv2d_0/Relu6]:0

Timings (microseconds): count=50 first=29601 curr=29500 min=29102 max=31700 avg=29790 std=470
Memory (bytes): count=0
"""

# older versions: no [start] column, no median; a delegate is one row
OLD_TEXT = """count=30 first=11665 curr=11422 min=11380 max=11900 avg=11500 std=90
Inference timings in us: Init: 5000, First inference: 11665, Warmup (avg): 11665, Inference (avg): 11500
Operator-wise Profiling Info for Regular Benchmark Runs:
============================== Run Order ==============================
\t             [node type]\t  [first]\t [avg ms]\t     [%]\t  [cdf%]\t  [mem KB]\t[times called]\t[Name]
\t     TfLiteXNNPackDelegate\t   11.665\t   11.422\t 99.300%\t 99.300%\t     0.000\t        1\t[conv, relu]:71
\t         AVERAGE_POOL_2D\t    0.075\t    0.080\t  0.700%\t100.000%\t     0.000\t        1\t[AvgPool2D/AvgPool]:61
"""

# --profiling_output_csv_file
CSV = """Operator-wise Profiling Info for Regular Benchmark Runs:
============================== Run Order ==============================
node type, start, first, avg_ms, %, cdf%, mem KB, times called, name
CONV_2D, 0.066, 2.754, 2.957, 9.906%, 9.906%, 0, 1, [MobilenetV1/Conv2d_0/Relu6]:0
ADD, 3.033, 0.128, 0.130, 0.435%, 10.341%, 0, 1, [add, with comma]:7

"""


def test_the_text_profile_gives_the_median_and_every_operator() -> None:
    run = parse_benchmark_output(TEXT)
    assert run.latency_ms == pytest.approx(29.7)  # the timed runs' median, not the warm-up's nor the profiler's
    assert [(o.node_type, o.avg_ms) for o in run.ops] == [("CONV_2D", 2.957), ("DEPTHWISE_CONV_2D", 1.870)]
    assert run.ops[0].name == "[Conv2d_0/Relu6]:0"


def test_the_older_text_profile_without_start_column_and_median() -> None:
    run = parse_benchmark_output(OLD_TEXT)
    assert run.latency_ms == pytest.approx(11.5)
    assert [o.node_type for o in run.ops] == ["TfLiteXNNPackDelegate", "AVERAGE_POOL_2D"]
    assert run.ops[1].avg_ms == pytest.approx(0.080)


def test_the_csv_profile_and_the_summary_line_alone() -> None:
    run = parse_benchmark_output("INFO: Inference timings in us: Init: 1, First inference: 2, Warmup (avg): 2, "
                                 "Inference (avg): 2500\n" + CSV)
    assert run.latency_ms == pytest.approx(2.5)
    assert [(o.node_type, o.avg_ms, o.name) for o in run.ops] == [
        ("CONV_2D", 2.957, "[MobilenetV1/Conv2d_0/Relu6]:0"), ("ADD", 0.130, "[add, with comma]:7")]


def test_a_failed_run_is_refused_with_its_error() -> None:
    with pytest.raises(InvalidInputError, match="no inference timing; it says: ERROR: Failed to load"):
        parse_benchmark_output("ERROR: Failed to load model x.tflite\n")


def test_results_without_a_kit_section_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "results.txt"
    path.write_text(TEXT)
    with pytest.raises(InvalidInputError, match="section"):
        read_kit_results(path)
    with pytest.raises(InvalidInputError, match="run_kit.sh"):
        read_kit_results(tmp_path / "absent.txt")


def test_the_kit_runs_end_to_end_with_the_local_stand_in(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from edgeplan.cli.main import main
    from edgeplan.decisions.calibrate import measurement_rows

    kit = tmp_path / "kit"
    home = ["--home", str(tmp_path / "home")]
    assert main([*home, "calibrate", "--kit", str(kit), "--measure", "synthetic:0", "--from", "litert-fp32-1t",
                 "--name", "board"]) == 0
    assert (kit / "run_kit.sh").is_file() and len(list((kit / "models").glob("*.tflite"))) == 1
    env = {**os.environ, "BENCHMARK_MODEL": f"{sys.executable} -m edgeplan.measure.litert_kit", "RUNS": "5",
           "WARMUP": "1"}
    subprocess.run([str(kit / "run_kit.sh"), "local"], check=True, env=env, capture_output=True)
    ((model, run),) = read_kit_results(kit / "results.txt")
    assert model == "synthetic:0" and run.latency_ms > 0
    # benchmark_model prints milliseconds to 3 decimals: an operator under half a microsecond (a warm reshape) reads 0
    assert run.ops and all(o.avg_ms >= 0 for o in run.ops) and sum(o.avg_ms for o in run.ops) > 0
    rows, _ = measurement_rows(kit / "results.txt")
    assert rows == [("synthetic:0", run.latency_ms)]
    assert main([*home, "calibrate", "--measurements", str(kit / "results.txt"), "--from", "litert-fp32-1t",
                 "--name", "board"]) == 0  # the board's profile, from the shipped LiteRT one
    capsys.readouterr()
    assert main([*home, "predict", "synthetic:0", "synthetic:1", "--device", "board", "--json"]) == 0
    predicted = json.loads(capsys.readouterr().out)
    assert [p["model"] for p in predicted] == ["synthetic:0", "synthetic:1"]
    assert all(p["latency_ms"] > 0 and not p["unpredicted_ops"] for p in predicted)
    assert main([*home, "calibrate", "--kit", str(kit), "--measure", "synthetic:0", "--from", "litert-fp32-1t",
                 "--name", "board"]) != 0  # a kit is never overwritten
