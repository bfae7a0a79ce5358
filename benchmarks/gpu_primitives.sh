#!/usr/bin/env bash
# The primitive campaigns on a CUDA GPU (issue 5: transfer of the performance model to a GPU).
#
# Run from the repository root on a machine with CUDA and PyTorch (edgeplan need not be installed: the checkout is
# put on PYTHONPATH). Writes into $OUT (default out/gpu): the Store, the three exported datasets with provenance,
# the GPU's description and the CUDA tests' summary. Budgets in seconds: MAIN_S (zoo space, seeded random order),
# NET_S (the conv layers of the six mulder2020 networks), RE_S (an independent re-measurement of 100 zoo
# configurations: the noise floor). Each campaign resumes from the Store if run again.
set -u
OUT=${OUT:-out/gpu}
PY=${PY:-python3}
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
S=$OUT/gpu.sqlite
EP=("$PY" -m edgeplan --debug primitives)
COMMON=(--device cuda --store "$S" --target-ms "${TARGET_MS:-5}")
NETS=(--network torchvision:alexnet --network torchvision:vgg11 --network torchvision:vgg19
      --network torchvision:googlenet --network torchvision:resnet18 --network torchvision:resnet34)

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
"$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())" \
  | tee -a "$OUT/gpu.txt"
"$PY" -m pytest -q -p no:cacheprovider tests/test_primitives.py tests/test_primitives_campaign.py -k cuda 2>&1 \
  | tail -n 15 | tee "$OUT/tests.txt"
"${EP[@]}" profile "${COMMON[@]}" --budget-s "${MAIN_S:-280}" --json > "$OUT/main.json"
"${EP[@]}" profile "${COMMON[@]}" --seed 1 "${NETS[@]}" --budget-s "${NET_S:-60}" --json > "$OUT/networks.json"
"${EP[@]}" profile "${COMMON[@]}" --remeasure-subset 100 --budget-s "${RE_S:-40}" --json > "$OUT/remeasure.json"
main=$("$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))['campaign'])" "$OUT/main.json")
nets=$("$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))['campaign'])" "$OUT/networks.json")
again=$("$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))['campaign'])" "$OUT/remeasure.json")
"${EP[@]}" export --store "$S" --campaign "$main" --out "$OUT/reference_gpu.csv"
"${EP[@]}" export --store "$S" --campaign "$nets" --include-incomplete --out "$OUT/networks_gpu.csv"
"${EP[@]}" export --store "$S" --campaign "$again" --out "$OUT/reference_gpu_remeasure100.csv"
ls -l "$OUT"
