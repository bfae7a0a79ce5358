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
NETS="torchvision:alexnet torchvision:vgg11 torchvision:vgg19 torchvision:googlenet torchvision:resnet18 torchvision:resnet34"

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
"$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())" \
  | tee -a "$OUT/gpu.txt"
"$PY" -m pytest -q -p no:cacheprovider tests/test_primitives.py tests/test_primitives_campaign.py -k cuda 2>&1 \
  | tail -n 15 | tee "$OUT/tests.txt"
# The three campaigns through the library (as `edgeplan --home $OUT profile primitives --torch-device cuda` measures
# the first two; the per-call target time, the re-measured subset and the export of incomplete rows are not options
# of the CLI): the zoo space, the six networks' layers (seed 1), 100 complete zoo configurations measured again.
"$PY" - "$OUT" "${TARGET_MS:-5}" "${MAIN_S:-280}" "${NET_S:-60}" "${RE_S:-40}" $NETS <<'PYEOF'
import json, sys
from pathlib import Path

from edgeplan.cli.primitives_cmd import _network_configs
from edgeplan.measure.device import describe_device
from edgeplan.measure.primitive_campaign import (ConfigSelection, primitive_campaign, profile_primitives,
                                                 remeasure_campaign)
from edgeplan.measure.primitive_export import export_dataset, find_campaign
from edgeplan.measure.primitive_space import TimingPlan
from edgeplan.measure.store import Store

out, target_ms, nets = Path(sys.argv[1]), float(sys.argv[2]), sys.argv[6:]
main_s, net_s, re_s = map(float, sys.argv[3:6])
device = describe_device("torch", 1, torch_device="cuda")
timing = TimingPlan(target_ms=target_ms)
with Store.open(out / "gpu.sqlite") as store:
    main = primitive_campaign(device.key, timing=timing, device="cuda")
    networks = primitive_campaign(device.key, selection=ConfigSelection(configs=_network_configs(tuple(nets)), seed=1),
                                  timing=timing, device="cuda")
    for plan, budget, name in ((main, main_s, "main"), (networks, net_s, "networks")):
        report = profile_primitives(store, plan, device, budget_s=budget, command="gpu_primitives.sh")
        (out / f"{name}.json").write_text(json.dumps(report.to_dict(), indent=1))
    again = remeasure_campaign(store, main, 100, 1)
    report = profile_primitives(store, again, device, budget_s=re_s, command="gpu_primitives.sh")
    (out / "remeasure.json").write_text(json.dumps(report.to_dict(), indent=1))
    for plan, file, incomplete in ((main, "reference_gpu.csv", False), (networks, "networks_gpu.csv", True),
                                   (again, "reference_gpu_remeasure100.csv", False)):
        export_dataset(store, find_campaign(store, plan.name), out / file, command="gpu_primitives.sh",
                       include_incomplete=incomplete)
PYEOF
ls -l "$OUT"
