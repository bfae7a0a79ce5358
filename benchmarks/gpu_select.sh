#!/usr/bin/env bash
# Primitive selection on a CUDA GPU, run for real (issue 5): the six mulder2020 networks selected and timed on the
# GPU against PyTorch's default (cuDNN) and the best single primitive, with costs
#   measured:   the shipped H200 tables (edgeplan/data/primitives/{networks,reference}_h200.csv);
#   predicted:  an NN2 fitted on the GPU's table (MODEL, default out/costmodels/h200-nn2, from
#               `edgeplan primitives fit --data edgeplan/data/primitives/reference_h200.csv --out ...`);
#   calibrated: the shipped CPU NN2 moved to the GPU by `edgeplan calibrate --primitives --torch-device cuda` from
#               SAMPLES layers measured there.
# Run from the repository root on a machine with CUDA and PyTorch (the checkout is put on PYTHONPATH). Writes into
# $OUT (default out/gpu-select): the GPU's description, the CUDA tests' summary (TESTS=0: not run), one JSON file per
# cost source ({network: select --json}; SOURCES picks them, default all three), the calibration's JSON and the
# layers it measured.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-out/gpu-select}
PY=${PY:-python3}
MODEL=${MODEL:-out/costmodels/h200-nn2}
ROUNDS=${ROUNDS:-30}
mkdir -p "$OUT/tmp"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
DATA=edgeplan/data/primitives
HOME_DIR=$OUT/tmp/home
EP=("$PY" -m edgeplan --home "$HOME_DIR")
RUN=(--torch-device cuda --run --rounds "$ROUNDS" --threads 1 --json)
NETS=(alexnet vgg11 vgg19 googlenet resnet18 resnet34)

"$PY" -c "import sys, torch; sys.exit(not torch.cuda.is_available())" \
  || { echo "no CUDA GPU here: this script measures on one"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
"$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())" \
  | tee -a "$OUT/gpu.txt"
echo "edgeplan $(git rev-parse HEAD 2>/dev/null || echo 'commit unknown')$(git diff --quiet HEAD 2>/dev/null || echo ' (+ changes)')" \
  | tee -a "$OUT/gpu.txt"
STARTED=$(date -u +%FT%TZ)
if [ "${TESTS:-1}" = 1 ]; then
  "$PY" -m pytest -q -p no:cacheprovider tests/test_selected_network.py tests/test_costmodels_transfer.py -k cuda 2>&1 \
    | tail -n 15 | tee "$OUT/tests.txt"
fi

collect() {  # $1: the cost source; its per-network JSON files become one file, with a summary line per network
  "$PY" - "$OUT" "$1" "${NETS[@]}" <<'EOF'
import json, pathlib, sys
out, source, nets = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
found = {n: out / "tmp" / f"{source}_{n}.json" for n in nets}
runs = {n: json.loads(p.read_text()) for n, p in found.items() if p.is_file() and p.stat().st_size}
if runs:
    (out / f"{source}.json").write_text(json.dumps(runs, indent=1))
for n, r in runs.items():
    lat = r["run"]["latency_ms"]
    print(source, n, "selected", round(lat["selected"]["median"], 3), "pytorch", round(lat["pytorch"]["median"], 3),
          "speed-up", round(r["run"]["speedup_vs_pytorch"], 3), "match", r["run"]["outputs_match"])
EOF
}

for source in ${SOURCES:-measured predicted calibrated}; do
  case $source in
    measured) costs=(--costs measured --data "$DATA/networks_h200.csv" --data "$DATA/reference_h200.csv") ;;
    predicted) [ -f "$MODEL/model.json" ] || { echo "no model in $MODEL: predicted skipped"; continue; }
               costs=(--costs predicted --model "$MODEL") ;;
    calibrated)
      "${EP[@]}" calibrate --primitives --name gpu --torch-device cuda --samples "${SAMPLES:-40}" --replace --json \
        > "$OUT/calibrate.json" || { echo "calibration failed: calibrated skipped"; continue; }
      cp "$HOME_DIR/devices/gpu/primitives/measured.csv" "$OUT/calibrated_measured.csv"
      cp "$HOME_DIR/devices/gpu/primitives/measured.provenance.json" "$OUT/calibrated_measured.provenance.json" \
        2>/dev/null
      costs=(--costs predicted --device gpu) ;;
    *) echo "unknown cost source $source"; exit 2 ;;
  esac
  rm -f "$OUT/$source.json"
  for net in "${NETS[@]}"; do
    "${EP[@]}" select "torchvision:$net" "${costs[@]}" "${RUN[@]}" > "$OUT/tmp/${source}_$net.json"
  done
  collect "$source"
done
rm -rf "$OUT/tmp"
# the provenance benchmarks/bench_select_gpu.py reads (edit "files" when shipping)
"$PY" - "$OUT" "$STARTED" <<'EOF'
import json, pathlib, platform, sys
out, started = pathlib.Path(sys.argv[1]), sys.argv[2]
gpu = (out / "gpu.txt").read_text().splitlines()
made = sorted(p.name for p in out.iterdir() if p.suffix == ".json" and p.name != "provenance.json")
json.dump({"machine": f"{gpu[1] if len(gpu) > 1 else 'unknown GPU'}; {gpu[2] if len(gpu) > 2 else ''}; host "
                      f"{platform.node()}", "date": f"{started} to the end of the run",
           "command": "benchmarks/gpu_select.sh (see the script; environment: SOURCES, TESTS, MODEL, ROUNDS, SAMPLES)",
           "code": gpu[3] if len(gpu) > 3 else "unknown",
           "files": {name: "{network: select --json}" if name.split(".")[0] in ("measured", "predicted", "calibrated")
                     else "see benchmarks/gpu_select.sh" for name in made}},
          (out / "provenance.json").open("w"), indent=1)
EOF
ls -l "$OUT"
