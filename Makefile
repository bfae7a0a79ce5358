# edgeplan: `make demo` and `make test` create .venv when missing and install into it (once: a stamp file
# records the install and is refreshed only when pyproject.toml or constraints.txt change).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.edgeplan-installed
export PIP_DISABLE_PIP_VERSION_CHECK := 1

BENCH := bench-cli bench-predict bench-noise bench-coverage bench-li2023 bench-transformers bench-selection bench-pbqp \
         bench-costmodels bench-transfer bench-calibrate bench-offload bench-partition bench-litert-kernels
.PHONY: install demo test test-all lint clean bench $(BENCH)

install: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]' 2>&1 | grep -v "is ignored: it is neither a file nor a directory" || true
	@$(BIN)/python -c "import edgeplan, torch, torchvision, timm, onnx, onnxruntime, ai_edge_litert, litert_torch" || { echo "install failed"; exit 1; }
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m edgeplan.demo

# the suite without its slow end-to-end checks (marked slow: over 8 s each on 2 cores); test-all runs every test
test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 -m "not slow" tests

test-all: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 tests

lint: $(STAMP)
	$(BIN)/ruff check edgeplan tests experiments benchmarks
	$(BIN)/mypy edgeplan

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

# Benchmarks: each target prints its figures and the machine that ran it; a benchmark is run by whatever machine runs
# it. They read the repository's data/ (datasets with provenance) and ../shared/data (published measurements; the
# benchmarks that need it skip where it is absent), and write under out/.
MACHINE := $(BIN)/python benchmarks/_machine.py
bench: $(BENCH)

# `edgeplan --help` wall time (target <= 1 s), then resnet50's graph import + annotation (target <= 2 s)
bench-cli: $(STAMP)
	$(BIN)/python benchmarks/bench_cli_help.py
	$(BIN)/python benchmarks/bench_import.py

# `edgeplan predict` speed: resnet50 after its graph is imported (<= 30 ms; <= 1 s on a LiteRT profile, whose kernels
# are deduced by the converter's rules), 1000 synthetic models in one call (<= 10 s)
bench-predict: $(STAMP)
	$(BIN)/python benchmarks/bench_predict.py
	$(BIN)/python benchmarks/bench_predict.py --device litert-fp32-1t --target-ms 1000 --count 100

# the noise floor of this machine (resnet18 in two independent campaigns, 1 and 2 threads), then that of the shipped
# primitive table (reference_cpu_1t.csv against its re-measurement in data/primitives)
bench-noise: $(STAMP)
	$(BIN)/python benchmarks/bench_noise.py
	$(BIN)/python benchmarks/bench_noise.py --tables edgeplan/data/primitives/reference_cpu_1t.csv \
	  data/primitives/reference_cpu_1t_remeasure200.csv

# the zoo and the model spaces: `inspect` coverage of torchvision and timm (one model per timm module; priced by the
# shipped torch-fp32-1t profile), torch and ONNX frontends agreeing, deduced kernels against ONNX Runtime's, every
# NAS-Bench-201 cell and 1000 synthetic networks built
bench-coverage: $(STAMP)
	$(BIN)/python benchmarks/bench_coverage.py
	$(BIN)/python benchmarks/bench_coverage.py --only timm-families
	$(BIN)/python benchmarks/bench_coverage.py --only timm-families --predict torch-fp32-1t
	$(BIN)/python benchmarks/bench_frontends_agree.py
	$(BIN)/python benchmarks/bench_kernels.py
	$(BIN)/python benchmarks/bench_nb201_build.py
	$(BIN)/python benchmarks/bench_synthetic_build.py

# LiteRT + XNNPACK kernels (profile litert-xnnpack) deduced from the torch IR against the operators litert-torch
# writes and the delegate's partitions, for every torchvision classification model and the timm-cnns set; conversions
# are cached under the edgeplan home (LITERT_HOME=DIR for another; missing ones take minutes each on 2 cores)
LITERT_HOME ?=
bench-litert-kernels: $(STAMP)
	$(BIN)/python benchmarks/bench_litert_kernels.py $(if $(LITERT_HOME),--home $(LITERT_HOME))

# li2023 §5.1 / §5.3 latency prediction with the best measured settings: GBDT on medians, the network's largest output
# as a feature from 900 training networks on (--network-context auto), noise floor from each file's repeat. Default:
# the keep-memory datasets of data/latency (2 and 1 threads; ~55 and ~25 min on one core); this machine's own
# `edgeplan profile ops --export` instead: make bench-li2023 LI2023_DATA=out/mine.jsonl.xz (its repeat beside it, if
# any, as out/mine.repeat.jsonl.xz). Then the shipped profiles fitted on the default files
# (torch-fp32-{2t,1t}-keep-memory) on the networks they were not trained on, fitting nothing.
LI2023_DATA ?= data/latency/keep-memory/torch-fp32-2t.jsonl.xz data/latency/keep-memory/torch-fp32-1t.jsonl.xz
KEEP := data/latency/keep-memory
bench-li2023: $(STAMP)
	@$(MACHINE)
	for f in $(LI2023_DATA); do r=$${f%.jsonl.xz}.repeat.jsonl.xz; \
	  $(BIN)/python -m experiments.li2023 --data $$f $$(test -f $$r && echo --repeat-data $$r) --method gbdt \
	    --statistic median --network-context auto || exit 1; done
	$(BIN)/python benchmarks/bench_li2023_zoo_bias.py --device torch-fp32-2t-keep-memory --data $(KEEP)/torch-fp32-2t.jsonl.xz \
	  --repeat-data $(KEEP)/torch-fp32-2t.repeat.jsonl.xz --graph --worst 12 --method gbdt
	$(BIN)/python benchmarks/bench_li2023_zoo_bias.py --device torch-fp32-1t-keep-memory --data $(KEEP)/torch-fp32-1t.jsonl.xz \
	  --repeat-data $(KEEP)/torch-fp32-1t.repeat.jsonl.xz --graph --worst 2 --method gbdt

# the shipped profiles' extensions, each held out: vision transformers (5-fold), nearest upsampling (HRNet,
# GhostNetV2) and weight standardization (NF-ResNets, NFNets) one family at a time, at 1 and 2 threads; then the
# keep-memory profiles' transformers (~1 h in all on one core)
bench-transformers: $(STAMP)
	for t in 1t 2t; do d=data/latency/torch-fp32-$$t; \
	  $(BIN)/python benchmarks/bench_transformers.py --data $$d.transformers.jsonl.xz && \
	  $(BIN)/python benchmarks/bench_transformers.py --data $$d.upsample.jsonl.xz --keep-extensions 1 --by-family \
	    --methods gbdt lasso && \
	  $(BIN)/python benchmarks/bench_transformers.py --data $$d.nf.jsonl.xz --keep-extensions 2 --by-family \
	    --always-train synthetic-nf:0-19 --methods gbdt lasso || exit 1; done
	for t in 1 2; do $(BIN)/python benchmarks/bench_transformers.py --device torch-fp32-$${t}t-keep-memory --methods gbdt \
	  --threads $$t --data $(KEEP)/torch-fp32-$${t}t.transformers.jsonl.xz \
	  --cnn-data $(KEEP)/torch-fp32-$${t}t.jsonl.xz || exit 1; done

# primitive selection (issue 5): the six mulder2020 networks' conv layers measured here with every primitive at 2
# threads (a few minutes on an idle machine; resumable, out/selection), selected by PBQP, built and timed against
# PyTorch and the best single primitive (target: faster on >= 4 of 6, geometric mean >= 1.15x); then the same on a
# CUDA GPU where there is one (skipped where not). SELECTION_DATA=FILE.csv selects from stored tables instead.
bench-selection: $(STAMP)
	$(BIN)/python benchmarks/bench_selection.py $(if $(SELECTION_DATA),--data $(SELECTION_DATA),--measure out/selection)
	$(BIN)/python benchmarks/bench_selection.py --torch-device cuda --measure out/selection-cuda

# the PBQP solvers on 1000 seeded instances against brute force and the ILP
bench-pbqp: $(STAMP)
	$(BIN)/python benchmarks/bench_pbqp.py

# the primitive performance models (Lin, NN1, NN2) on the mulder2021 Intel and AMD tables (mulder2020 Figs. 4-6);
# writes the NN2 models to out/costmodels
bench-costmodels: $(STAMP)
	$(BIN)/python benchmarks/bench_costmodels.py

out/costmodels/intel-nn2/model.json:
	$(BIN)/python benchmarks/bench_costmodels.py --platforms intel --kinds nn2 --threads 1

# transfer of the performance model (issue 5): Intel -> AMD with the shipped transfer (two rounds of single timings,
# refitted, blended; ~40 min on one core) at 1 % and 10 %, beside fine-tuning alone on one round at 10 %, then the
# shipped CPU NN2 moved to a GPU's tables (data/primitives/*_cuda.csv; no GPU needed)
bench-transfer: $(STAMP) out/costmodels/intel-nn2/model.json
	$(BIN)/python benchmarks/bench_transfer.py --fractions 0.01 --repeats 25 --threads 1 --methods default
	$(BIN)/python benchmarks/bench_transfer.py --fractions 0.1 --repeats 25 --threads 1 --methods default finetune
	$(BIN)/python benchmarks/bench_transfer_gpu.py --fractions 0.01 0.025 0.05 0.1 0.25 --repeats 5 --threads 1

# few-shot calibration: each shipped latency profile calibrated from 10 models of a second CPU (data/latency/fewshot,
# an Intel Xeon's) and scored on the rest (~40-65 min each on one core; `python benchmarks/bench_calibrate_latency.py`
# without --measured measures this machine instead, ~2 h); then the shipped 1-thread NN2 calibrated to 2 threads from
# 40 layers measured here (out/calibrate, reused by later runs)
bench-calibrate: $(STAMP)
	for s in torch-fp32-1t torch-fp32-2t ort-fp32-1t; do \
	  $(BIN)/python benchmarks/bench_calibrate_latency.py --source $$s --measured data/latency/fewshot/$$s || exit 1; done
	$(BIN)/python benchmarks/bench_calibrate_primitives.py

# offloading (eshratifar2018): the solvers agree on 1000 random instances, their speed on VGG16, the paper's table,
# and real split runs against their plans
bench-offload: $(STAMP)
	$(BIN)/python benchmarks/bench_offload_random.py
	$(BIN)/python benchmarks/bench_offload_solvers.py
	$(BIN)/python benchmarks/bench_offload_paper.py
	$(BIN)/python benchmarks/bench_offload_split.py

# partition and placement (parthasarathy2022): candidate cut points over the zoo, the paper's simulation grid, and a
# real Ray pipeline against its predicted bottleneck
bench-partition: $(STAMP)
	$(BIN)/python benchmarks/bench_cut_points.py
	$(BIN)/python benchmarks/bench_partition_sim.py
	$(BIN)/python benchmarks/bench_partition_pipeline.py

# --- paper reproductions -----------------------------------------------------------------------------------------
# `make reproduce` runs every paper's script in experiments/, each writing out/results/NAME.json, then writes
# docs/results.md and the README's results table from those files. The scripts' defaults are the papers' settings;
# two are reduced here to keep the whole under 30 minutes on 2 cores (parthasarathy2022: 10 clusters per
# configuration and 200 for Fig. 10, not 50 and 1000; li2023: Lasso and GBDT, not also RF and MLP). mulder2020 fits
# two NN2 models on its first run (kept in out/mulder2020); the scripts that read ../shared/data skip without it.
.PHONY: reproduce

RESULTS := out/results
REPRODUCE = @mkdir -p $(RESULTS) && echo "reproduce $(1)" && \
	$(BIN)/python -m experiments.$(2) --json > $(RESULTS)/$(1).json.part && mv $(RESULTS)/$(1).json.part $(RESULTS)/$(1).json

reproduce: $(STAMP)
	$(call REPRODUCE,eshratifar2018,eshratifar2018)
	$(call REPRODUCE,eshratifar2018-paper-regime,eshratifar2018 --paper-regime)
	$(call REPRODUCE,parthasarathy2022,parthasarathy2022 --runs 10 --fig10-trials 200)
	$(call REPRODUCE,li2023,li2023 --method lasso --method gbdt)
	$(call REPRODUCE,li2023-nb201,li2023 --nb201)
	$(call REPRODUCE,mulder2020,mulder2020)
	$(BIN)/python -m experiments.results --results $(RESULTS) --out docs/results.md
