"""A calibration kit for a phone or board edgeplan cannot reach, and the parser of what it brings back.

:func:`write_kit` writes the calibration models as ``.tflite`` files (converted with litert-torch, fp32 or int8),
``manifest.tsv`` (model, file, threads per line) and ``run_kit.sh``, which runs LiteRT's ``benchmark_model`` on
each model with op profiling on — on an Android phone over ``adb``, on a Linux board over ``ssh``, or here
(``local``) — and appends every run's output, after a ``### edgeplan model: MODEL`` line, to one file,
``results.txt``. ``edgeplan calibrate --measurements results.txt`` reads it (:func:`read_kit_results`).

:func:`parse_benchmark_output` reads ``benchmark_model``'s documented output: the end-to-end statistics line
(``count=50 first=... curr=... min=... max=... avg=... std=...``, with ``median=`` in recent versions) or the
``Inference timings in us: ... Inference (avg): ...`` summary, and the ``Run Order`` table of the op profile in both
of its formats, the padded text table (``[node type] [start] [first] [avg ms] ...``, older versions without
``[start]``) and the CSV of ``--profiling_output_csv_file`` (``node type, start, first, avg_ms, %, ...``).

Run as ``python -m edgeplan.measure.litert_kit --graph=MODEL.tflite --num_threads=N ...``, this module stands in
for ``benchmark_model`` with the local LiteRT interpreter and XNNPACK: the same arguments, the same output format
(its per-op rows are the operators timed alone, :func:`~edgeplan.measure.litert_op_profile.profile_litert_ops`).
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from edgeplan.errors import InvalidInputError

__all__ = ["BenchmarkRun", "KIT_MARK", "OpRow", "parse_benchmark_output", "read_kit_results", "write_kit"]

#: The line before each model's output in ``results.txt``.
KIT_MARK = "### edgeplan model: "

_SCRIPT = r"""#!/bin/sh
# edgeplan calibration kit: runs LiteRT's benchmark_model on every model of manifest.tsv with op profiling on, and
# appends each run's output to results.txt, which `edgeplan calibrate --measurements results.txt --name NAME` reads.
#
#   ./run_kit.sh adb [SERIAL]     an Android phone: benchmark_model pushed to /data/local/tmp (BENCHMARK_MODEL)
#   ./run_kit.sh ssh USER@HOST    a Linux board with benchmark_model on its PATH (or BENCHMARK_MODEL)
#   ./run_kit.sh local            this machine: BENCHMARK_MODEL, e.g. "python -m edgeplan.measure.litert_kit"
#
# RUNS (default 50) and WARMUP (default 10) set benchmark_model's --num_runs and --warmup_runs.
set -eu
MODE=${1:-adb}
TARGET=${2:-}
KIT=$(cd "$(dirname "$0")" && pwd)
RUNS=${RUNS:-50}
WARMUP=${WARMUP:-10}
OUT="$KIT/results.txt"
case "$MODE" in
  adb) BENCH=${BENCHMARK_MODEL:-/data/local/tmp/benchmark_model}; REMOTE=/data/local/tmp/edgeplan
       ADB="adb${TARGET:+ -s $TARGET}"; $ADB shell mkdir -p "$REMOTE" ;;
  ssh) BENCH=${BENCHMARK_MODEL:-benchmark_model}; REMOTE=/tmp/edgeplan; ssh "$TARGET" mkdir -p "$REMOTE" ;;
  local) BENCH=${BENCHMARK_MODEL:-benchmark_model}; REMOTE="$KIT/models" ;;
  *) echo "usage: $0 adb [SERIAL] | ssh USER@HOST | local" >&2; exit 2 ;;
esac
: > "$OUT"
while IFS='	' read -r model file threads; do
  case "$model" in '#'*|'') continue ;; esac
  ARGS="--graph=$REMOTE/$file --num_threads=$threads --num_runs=$RUNS --warmup_runs=$WARMUP --enable_op_profiling=true"
  echo "$KIT_MARK$model" >> "$OUT"
  case "$MODE" in
    adb) $ADB push "$KIT/models/$file" "$REMOTE/$file" > /dev/null; $ADB shell "$BENCH $ARGS" >> "$OUT" 2>&1 || true ;;
    ssh) scp -q "$KIT/models/$file" "$TARGET:$REMOTE/$file"; ssh "$TARGET" "$BENCH $ARGS" >> "$OUT" 2>&1 || true ;;
    local) sh -c "$BENCH $ARGS" >> "$OUT" 2>&1 || true ;;
  esac
  echo "$model done" >&2
done < "$KIT/manifest.tsv"
echo "results in $OUT" >&2
"""


def write_kit(models: Sequence[str], out: str | Path, *, threads: int = 1, dtype: str = "float32",
              home: str | Path | None = None) -> Path:
    """Write a calibration kit to ``out``: ``models/*.tflite``, ``manifest.tsv`` and ``run_kit.sh``.

    Parameters
    ----------
    models
        Zoo strings; each is converted with litert-torch (cached in the edgeplan home).
    out
        The kit's folder (created; an existing kit there is refused).
    threads
        Threads ``benchmark_model`` runs each model with.
    dtype
        ``"float32"`` or ``"int8"`` (static post-training quantization).
    home
        The edgeplan home.

    Returns
    -------
    Path
        The kit's folder.

    Raises
    ------
    InvalidInputError
        On an empty model list, an existing kit in ``out``, or a model edgeplan cannot build.
    """
    import shutil

    from edgeplan.frontends.litert_export import cache_tflite
    from edgeplan.measure.harness import check_thread_count
    from edgeplan.measure.paths import edgeplan_home

    check_thread_count(threads)
    if not models:
        raise InvalidInputError("a calibration kit needs models: give at least one")
    folder = Path(out)
    if (folder / "manifest.tsv").exists():
        raise InvalidInputError(f"{folder} already holds a kit; give an empty folder")
    (folder / "models").mkdir(parents=True, exist_ok=True)
    lines = ["# model\tfile\tthreads"]
    for k, spec in enumerate(models):
        source = cache_tflite(spec, None, dtype, edgeplan_home(home))
        name = f"{k:03d}-{re.sub(r'[^A-Za-z0-9_.-]+', '_', spec)[:60]}.tflite"
        shutil.copyfile(source, folder / "models" / name)
        lines.append(f"{spec}\t{name}\t{threads}")
    (folder / "manifest.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    script = folder / "run_kit.sh"
    script.write_text(_SCRIPT.replace("$KIT_MARK", KIT_MARK), encoding="utf-8")
    script.chmod(0o755)
    return folder


@dataclass(frozen=True)
class OpRow:
    """One row of the op profile's ``Run Order``: the node type (``CONV_2D``, or a delegate's kernel), its name
    (``[output tensors]:index`` for a LiteRT operator) and its average time."""

    node_type: str
    name: str
    avg_ms: float


@dataclass(frozen=True)
class BenchmarkRun:
    """What one ``benchmark_model`` run reports: the end-to-end latency (the median where printed, else the mean)
    and the op profile's rows (empty without op profiling)."""

    latency_ms: float
    ops: tuple[OpRow, ...] = ()


_STATS = re.compile(r"count=(\d+)\s.*?\bavg=([\d.eE+-]+)(?:.*?\bmedian=([\d.eE+-]+))?")
_SUMMARY = re.compile(r"Inference \(avg\):\s*([\d.eE+-]+)")


def parse_benchmark_output(text: str) -> BenchmarkRun:
    """Read the end-to-end latency and the op profile from ``benchmark_model``'s output (see the module's docstring).

    Raises
    ------
    InvalidInputError
        When the text holds no inference timing (the run failed: the message quotes its first error line).
    """
    latency_us = None
    for line in text.splitlines():
        summary = _SUMMARY.search(line)
        if summary and latency_us is None:
            latency_us = float(summary.group(1))
    stats = [m for m in (_STATS.search(line) for line in text.splitlines()
                         if "Timings (microseconds)" not in line and "Memory" not in line) if m]
    if stats:  # the last statistics line before the op profile is the timed runs'
        best = max(stats, key=lambda m: int(m.group(1)))
        latency_us = float(best.group(3) or best.group(2))
    if latency_us is None or latency_us <= 0:
        errors = [ln.strip() for ln in text.splitlines() if "ERROR" in ln or "Failed" in ln or "error" in ln]
        raise InvalidInputError("benchmark_model output holds no inference timing"
                                + (f"; it says: {errors[0][:200]}" if errors else ""))
    return BenchmarkRun(latency_us / 1000.0, tuple(_run_order(text)))


def _run_order(text: str) -> list[OpRow]:
    """The rows of the first ``Run Order`` table after ``Operator-wise Profiling Info for Regular Benchmark Runs``."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if "Profiling Info for Regular Benchmark Runs" in ln), None)
    if start is None:
        return []
    rows: list[OpRow] = []
    header: list[str] | None = None
    for line in lines[start + 1:]:
        stripped = line.strip()
        if "Run Order" in stripped:
            continue
        if header is None:
            if "node type" in stripped:
                header = _header(stripped)
            continue
        if not stripped or stripped.startswith("="):
            break
        row = _row(stripped, header)
        if row is not None:
            rows.append(row)
    return rows


def _header(line: str) -> list[str]:
    if "[" in line:
        return [c.strip("[] ").lower() for c in re.split(r"\t+|\s{2,}", line.strip()) if c.strip()]
    return [c.strip().lower() for c in line.split(",")]


def _row(line: str, header: list[str]) -> OpRow | None:
    if "\t" in line or "," not in line:
        cells = [c.strip() for c in re.split(r"\t+", line) if c.strip()]
        if len(cells) < len(header):  # padded with spaces only
            cells = re.split(r"\s{2,}", line.strip())
    else:
        cells = [c.strip() for c in line.split(",", len(header) - 1)]
    if len(cells) < len(header):
        return None
    named = dict(zip(header, cells, strict=False))
    avg = named.get("avg ms", named.get("avg_ms"))
    try:
        return OpRow(named["node type"], named.get("name", ""), float(str(avg)))
    except (KeyError, ValueError):
        return None


def read_kit_results(path: str | Path) -> list[tuple[str, BenchmarkRun]]:
    """The runs of a kit's ``results.txt``, by model, in order.

    Raises
    ------
    InvalidInputError
        On a missing file, a file without any ``### edgeplan model:`` section, or a model whose run printed no
        timing (named, with the run's error).
    """
    file = Path(path)
    if not file.is_file():
        raise InvalidInputError(f"kit results {file} do not exist; run the kit's run_kit.sh first")
    sections = re.split(rf"^{re.escape(KIT_MARK)}(.*)$", file.read_text(encoding="utf-8", errors="replace"),
                        flags=re.MULTILINE)
    if len(sections) < 3:
        raise InvalidInputError(f"{file} holds no '{KIT_MARK.strip()}' section: is it a kit's results.txt?")
    runs = []
    for model, body in zip(sections[1::2], sections[2::2], strict=True):
        try:
            runs.append((model.strip(), parse_benchmark_output(body)))
        except InvalidInputError as e:
            raise InvalidInputError(f"{file}: model {model.strip()}: {e}") from e
    return runs


def is_kit_results(path: str | Path) -> bool:
    """True when ``path`` is a file whose first line marks a kit's model section."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.readline().startswith(KIT_MARK)
    except OSError:
        return False


def _stand_in(argv: Sequence[str]) -> int:
    """``benchmark_model`` with the local LiteRT interpreter (same arguments and output format)."""
    import time

    from edgeplan.measure.litert_op_profile import profile_litert_ops
    from edgeplan.measure.op_timing import ProfileCalls
    from edgeplan.measure.runners import litert_interpreter

    parser = argparse.ArgumentParser(prog="benchmark_model (edgeplan stand-in)")
    parser.add_argument("--graph", required=True)
    parser.add_argument("--num_threads", type=int, default=1)
    parser.add_argument("--num_runs", type=int, default=50)
    parser.add_argument("--warmup_runs", type=int, default=1)
    parser.add_argument("--enable_op_profiling", default="false")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    interpreter = litert_interpreter(args.graph, args.num_threads)
    init_us = (time.perf_counter() - start) * 1e6
    times = []
    for _ in range(args.warmup_runs + args.num_runs):
        t = time.perf_counter()
        interpreter.invoke()
        times.append((time.perf_counter() - t) * 1e6)
    warm, timed = times[:args.warmup_runs], times[args.warmup_runs:]
    print(f"INFO: Num threads: [{args.num_threads}]")
    print(f"INFO: Inference timings in us: Init: {init_us:.0f}, First inference: {times[0]:.0f}, "
          f"Warmup (avg): {statistics.mean(warm or times[:1]):.1f}, Inference (avg): {statistics.mean(timed):.1f}")
    print(f"INFO: count={len(timed)} first={timed[0]:.0f} curr={timed[-1]:.0f} min={min(timed):.0f} "
          f"max={max(timed):.0f} avg={statistics.mean(timed):.1f} std={statistics.pstdev(timed):.0f} "
          f"median={statistics.median(timed):.1f}")
    if args.enable_op_profiling.lower() in ("true", "1"):
        profile = profile_litert_ops(args.graph, args.num_threads, ProfileCalls(runs=max(args.num_runs // 5, 3),
                                                                                 warmup=1, plain_per_run=1))
        total = profile.op_sum_ms or 1.0
        print("INFO: Operator-wise Profiling Info for Regular Benchmark Runs:")
        print("============================== Run Order ==============================")
        print("\t             [node type]\t          [start]\t  [first]\t [avg ms]\t     [%]\t  [cdf%]\t"
              "  [mem KB]\t[times called]\t[Name]")
        clock = cdf = 0.0
        for op in profile.runs.ops:
            share = 100 * op.median_ms / total
            cdf += share
            print(f"\t{op.kind.split('.', 1)[1]:>24}\t{clock:17.3f}\t{op.median_ms:9.3f}\t{op.median_ms:9.3f}\t"
                  f"{share:7.3f}%\t{cdf:7.3f}%\t{0:10.3f}\t{1:9d}\t[{op.kernel}]:{op.kernel.split('_')[-1]}")
            clock += op.median_ms
        print()
    return 0


if __name__ == "__main__":
    sys.exit(_stand_in(sys.argv[1:]))
