# edgeplan: `make demo` and `make test` create .venv when missing and install into it (once: a stamp file
# records the install and is refreshed only when pyproject.toml or constraints.txt change).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.edgeplan-installed
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: install demo test lint bench bench-coverage bench-noise bench-import bench-help bench-agree bench-nb201 bench-synthetic bench-offload-random bench-offload-solvers bench-offload-paper bench-offload-split bench-cut-points bench-partition-sim bench-partition-pipeline bench-costmodels bench-pbqp bench-kernels bench-selection bench-selection-zen5 bench-selection-here bench-transfer bench-transfer-1pct bench-transfer-table5 bench-transfer-gpu bench-transfer-h100 bench-select-gpu bench-calibrate-primitives bench-li2023 bench-li2023-2t bench-li2023-2t-xeon bench-li2023-2t-xeon-warm bench-li2023-2t-xeon-spaces bench-li2023-2t-zen5 bench-li2023-2t-zen5-keep bench-li2023-2t-zen5-keep-stacked bench-li2023-2t-zen5-keep-net bench-li2023-1t-zen5-keep bench-li2023-1t-zen5-keep-stacked bench-li2023-1t-zen5-keep-net bench-li2023-threads bench-li2023-int8 bench-li2023-nb201 bench-li2023-zoo-bias bench-profile-zen5 bench-predict bench-transformers bench-upsample bench-nf bench-calibrate-here bench-calibrate-here-ort bench-calibrate-here-2t clean

install: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]' 2>&1 | grep -v "is ignored: it is neither a file nor a directory" || true
	@$(BIN)/python -c "import edgeplan, torch, torchvision, timm, onnx, onnxruntime" || { echo "install failed"; exit 1; }
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m edgeplan.demo

test: $(STAMP)
	$(BIN)/python -m pytest -q tests

lint: $(STAMP)
	$(BIN)/ruff check edgeplan tests benchmarks
	$(BIN)/mypy edgeplan

# One command per target; each prints its figure and the machine.
bench: bench-help bench-import bench-noise bench-coverage bench-agree bench-nb201 bench-synthetic \
       bench-offload-random bench-offload-solvers bench-offload-paper bench-offload-split bench-cut-points \
       bench-partition-sim bench-partition-pipeline bench-costmodels bench-pbqp bench-kernels bench-selection bench-selection-zen5 bench-transfer \
       bench-transfer-1pct bench-transfer-table5 bench-transfer-gpu bench-transfer-h100 bench-select-gpu bench-calibrate-primitives bench-li2023 bench-li2023-2t bench-li2023-2t-xeon bench-li2023-2t-xeon-warm bench-li2023-2t-xeon-spaces bench-li2023-2t-zen5 bench-li2023-2t-zen5-keep bench-li2023-2t-zen5-keep-stacked bench-li2023-2t-zen5-keep-net bench-li2023-1t-zen5-keep bench-li2023-1t-zen5-keep-stacked bench-li2023-1t-zen5-keep-net bench-li2023-threads bench-li2023-int8 bench-li2023-nb201 bench-li2023-zoo-bias bench-profile-zen5 bench-predict bench-transformers bench-upsample bench-nf bench-calibrate-here bench-calibrate-here-ort bench-calibrate-here-2t

bench-help: $(STAMP)
	$(BIN)/python benchmarks/bench_cli_help.py

bench-import: $(STAMP)
	$(BIN)/python benchmarks/bench_import.py

bench-noise: $(STAMP)
	$(BIN)/python benchmarks/bench_noise.py

bench-coverage: $(STAMP)
	$(BIN)/python benchmarks/bench_coverage.py
	$(BIN)/python benchmarks/bench_coverage.py --only timm-families
	$(BIN)/python benchmarks/bench_coverage.py --only timm-families --predict torch-fp32-1t

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

bench-agree: $(STAMP)
	$(BIN)/python benchmarks/bench_frontends_agree.py

bench-nb201: $(STAMP)
	$(BIN)/python benchmarks/bench_nb201_build.py

bench-synthetic: $(STAMP)
	$(BIN)/python benchmarks/bench_synthetic_build.py

bench-offload-random: $(STAMP)
	$(BIN)/python benchmarks/bench_offload_random.py

bench-offload-solvers: $(STAMP)
	$(BIN)/python benchmarks/bench_offload_solvers.py

bench-offload-paper: $(STAMP)
	$(BIN)/python benchmarks/bench_offload_paper.py

bench-offload-split: $(STAMP)
	$(BIN)/python benchmarks/bench_offload_split.py

bench-cut-points: $(STAMP)
	$(BIN)/python benchmarks/bench_cut_points.py

bench-partition-sim: $(STAMP)
	$(BIN)/python benchmarks/bench_partition_sim.py

bench-partition-pipeline: $(STAMP)
	$(BIN)/python benchmarks/bench_partition_pipeline.py

bench-costmodels: $(STAMP)
	$(BIN)/python benchmarks/bench_costmodels.py

bench-pbqp: $(STAMP)
	$(BIN)/python benchmarks/bench_pbqp.py

bench-kernels: $(STAMP)
	$(BIN)/python benchmarks/bench_kernels.py

bench-selection: $(STAMP)
	$(BIN)/python benchmarks/bench_selection.py --data edgeplan/data/primitives/networks_cpu_2t.csv

# the same from the tables measured on the Zen 5 VM (AMD EPYC, CPU family 26) on 2026-11-30
bench-selection-zen5: $(STAMP)
	$(BIN)/python benchmarks/bench_selection.py --data edgeplan/data/primitives/networks_cpu_2t_zen5.csv

# the same on whatever machine this is: its own tables first (the six networks' 73 layers, ~2-3 min, resumable)
bench-selection-here: $(STAMP)
	$(BIN)/edgeplan primitives profile --store out/selection-here.sqlite --threads 2 --seed 1 \
	  --network torchvision:alexnet --network torchvision:vgg11 --network torchvision:vgg19 \
	  --network torchvision:googlenet --network torchvision:resnet18 --network torchvision:resnet34 --budget-s 3000
	$(BIN)/edgeplan primitives export --store out/selection-here.sqlite --include-incomplete \
	  --out out/networks_here_2t.csv
	$(BIN)/python benchmarks/bench_selection.py --data out/networks_here_2t.csv

# needs the Intel and AMD NN2 that `make bench-costmodels` writes to out/costmodels (it says so)
bench-transfer: $(STAMP)
	$(BIN)/python benchmarks/bench_transfer.py

# issue 5's 1% targets with one design: two rounds of single timings, blended (25 seeds, ~40 min on one core);
# needs the Intel NN2 that `make bench-costmodels` writes to out/costmodels (it says so)
bench-transfer-1pct: $(STAMP)
	$(BIN)/python benchmarks/bench_transfer.py --fractions 0.01 --repeats 25 --threads 1 \
	  --methods factor-finetune-refit-blend --design cells-adaptive

# mulder2020 Table 5: the Intel NN2 fine-tuned on one family's columns of 10% of AMD's training part (same model)
bench-transfer-table5: $(STAMP)
	$(BIN)/python benchmarks/bench_transfer.py --table5-only --threads 1 --table5-repeats 3

bench-transfer-gpu: $(STAMP)
	$(BIN)/python benchmarks/bench_transfer_gpu.py --fractions 0.01 0.025 0.05 0.1 0.25 --repeats 5 --threads 1

# GPU to GPU: the H200's NN2 moved to the H100's tables (both NN2 are fitted first when missing, ~4 min each)
bench-transfer-h100: $(STAMP)
	test -f out/costmodels/h200-nn2/model.json || $(BIN)/edgeplan primitives fit --threads 1 \
	  --data edgeplan/data/primitives/reference_h200.csv --out out/costmodels/h200-nn2
	test -f out/costmodels/h100-nn2/model.json || $(BIN)/edgeplan primitives fit --threads 1 \
	  --data edgeplan/data/primitives/reference_h100.csv --out out/costmodels/h100-nn2
	$(BIN)/python benchmarks/bench_transfer_gpu.py --source out/costmodels/h200-nn2 \
	  --target edgeplan/data/primitives/reference_h100.csv --again edgeplan/data/primitives/reference_h100_remeasure100.csv \
	  --table edgeplan/data/primitives/networks_h100.csv --fractions 0.01 0.1 --repeats 5 --threads 1
	$(BIN)/python benchmarks/diag_gpu_drift.py

# the report of the stored H200 runs (select_h200/ and select_h200_run2/; benchmarks/gpu_select.sh makes them on a GPU)
bench-select-gpu: $(STAMP)
	$(BIN)/python benchmarks/bench_select_gpu.py

# measures 40 layers at 2 threads into out/calibrate/store.sqlite (reused by later runs); run it on an idle machine
bench-calibrate-primitives: $(STAMP)
	$(BIN)/python benchmarks/bench_calibrate_primitives.py

bench-li2023: $(STAMP)
	$(BIN)/edgeplan reproduce li2023 --method lasso --method gbdt --method rf --statistic median

bench-li2023-2t: $(STAMP)
	$(BIN)/edgeplan reproduce li2023 --scenario torch-fp32-2t --method lasso --method gbdt --method rf --statistic median

# the same on a second machine's shipped data (an Intel Xeon VM, 2 cores), measured whole with the reference warmed
# (warm-all; GBDT only, ~25 min on one core), then where its predictors err on the zoo CNNs with edgeplan's spaces in
# training (~6 min)
# Datasets taken out of the tree (it must stay under the 64 MiB a GPU machine's run carries) are read from the commit
# that last held them, into out/history (needs the git checkout): 5b0cd9a, or the one named by HISTORY_{its path}
HISTORY := 5b0cd9a
HISTORY_xeon/torch-fp32-2t.all-spaces := 420d404
HISTORY_xeon/torch-fp32-2t.all-spaces.repeat := 420d404
out/history/%.jsonl.xz:
	@mkdir -p $(dir $@)
	git show $(or $(HISTORY_$*),$(HISTORY)):edgeplan/data/latency/$*.jsonl.xz > $@.tmp && mv $@.tmp $@

XEON_WARM := out/history/xeon/torch-fp32-2t.warm-all
XEON_WARM_FILES := $(XEON_WARM).jsonl.xz $(XEON_WARM).repeat.jsonl.xz
bench-li2023-2t-xeon: $(STAMP) $(XEON_WARM_FILES)
	$(BIN)/edgeplan reproduce li2023 --data $(XEON_WARM).jsonl.xz --repeat-data $(XEON_WARM).repeat.jsonl.xz \
		--method gbdt --statistic median
	$(BIN)/python benchmarks/bench_li2023_zoo_bias.py --data $(XEON_WARM).jsonl.xz --method gbdt --with-spaces \
		--implementations

# warm-all's noise floor, then GBDT trained on li2023's synthetic networks alone and with edgeplan's spaces, each
# keyed by kernel kind and by the implementation PyTorch selects (~5 min each, one core)
bench-li2023-2t-xeon-warm: $(STAMP) $(XEON_WARM_FILES)
	$(BIN)/edgeplan reproduce li2023 --floor --data $(XEON_WARM).jsonl.xz --repeat-data $(XEON_WARM).repeat.jsonl.xz \
		--statistic median
	$(BIN)/python benchmarks/bench_li2023_zoo_bias.py --data $(XEON_WARM).jsonl.xz --method gbdt
	$(BIN)/python benchmarks/bench_li2023_zoo_bias.py --data $(XEON_WARM).jsonl.xz --method gbdt --implementations
	$(BIN)/python benchmarks/bench_li2023_zoo_bias.py --data $(XEON_WARM).jsonl.xz --method gbdt --with-spaces
	$(BIN)/python benchmarks/bench_li2023_zoo_bias.py --data $(XEON_WARM).jsonl.xz --method gbdt --with-spaces \
		--implementations

# the same on a third measurement of the Xeon kind, on a faster VM, with edgeplan's heads space too (all four
# synthetic spaces, 2028 models; GBDT only, ~45 min on one core), then where GBDT errs on the zoo CNNs with the
# spaces in training (~8 min)
XEON_ALL := out/history/xeon/torch-fp32-2t.all-spaces
bench-li2023-2t-xeon-spaces: $(STAMP) $(XEON_ALL).jsonl.xz $(XEON_ALL).repeat.jsonl.xz
	$(BIN)/edgeplan reproduce li2023 --data $(XEON_ALL).jsonl.xz --repeat-data $(XEON_ALL).repeat.jsonl.xz \
		--method gbdt --statistic median
	$(BIN)/python benchmarks/bench_li2023_zoo_bias.py --data $(XEON_ALL).jsonl.xz --method gbdt --with-spaces \
		--implementations

# the same on a third machine, a Zen 5 AMD EPYC VM (2 cores; li2023's 1000, the aligned and heads spaces and the zoo,
# 1728 models; GBDT only, ~30 min on one core), then what limits the zoo once no op predictor errs: the overhead's
# form and the same operations' time inside the zoo CNNs and inside the synthetic networks (~1 min)
ZEN5 := out/history/epyc-zen5/torch-fp32-2t
bench-li2023-2t-zen5: $(STAMP) $(ZEN5).jsonl.xz $(ZEN5).repeat.jsonl.xz
	$(BIN)/edgeplan reproduce li2023 --data $(ZEN5).jsonl.xz --repeat-data $(ZEN5).repeat.jsonl.xz \
		--method gbdt --statistic median
	$(BIN)/python benchmarks/diag_li2023_context.py --data $(ZEN5).jsonl.xz --space synthetic-aligned

# the same machine measured again whole with glibc's allocator keeping freed memory (ops profile --keep-memory): no
# operation pays page faults for buffers over 32 MiB that the allocator handed back (~30 min on one core)
# li2023 on the Zen 5 keep-memory files of one thread count (2t, 1t): $(call ZEN5KEEP,2t); the default targets give
# the predictors the network's largest output when fitted on li2023's 900 networks or more (--network-context auto)
ZEN5KEEP = $(BIN)/edgeplan reproduce li2023 --data edgeplan/data/latency/epyc-zen5-keep/torch-fp32-$(1).jsonl.xz \
	--repeat-data edgeplan/data/latency/epyc-zen5-keep/torch-fp32-$(1).repeat.jsonl.xz --method gbdt --statistic median

bench-li2023-2t-zen5-keep: $(STAMP)
	$(call ZEN5KEEP,2t) --network-context auto

bench-li2023-2t-zen5-keep-stacked: $(STAMP)
	$(call ZEN5KEEP,2t) --overhead stacked

# the same with every op predictor also given its network's footprint (ops fit --network-context)
bench-li2023-2t-zen5-keep-net: $(STAMP)
	$(call ZEN5KEEP,2t) --network-context

bench-li2023-1t-zen5-keep: $(STAMP)
	$(call ZEN5KEEP,1t) --network-context auto

bench-li2023-1t-zen5-keep-net: $(STAMP)
	$(call ZEN5KEEP,1t) --network-context

bench-li2023-1t-zen5-keep-stacked: $(STAMP)
	$(call ZEN5KEEP,1t) --overhead stacked

bench-li2023-threads: $(STAMP)
	$(BIN)/edgeplan reproduce li2023 --insight threads --statistic median

bench-li2023-zoo-bias: $(STAMP)
	$(BIN)/python benchmarks/bench_li2023_zoo_bias.py --scenario torch-fp32-2t
	$(BIN)/python benchmarks/bench_li2023_zoo_bias.py --scenario ort-int8-1t

# the shipped Zen 5 profiles on the networks they were not trained on (synthetic:900-999, the zoo CNNs: the 1-thread
# file holds the two NFNets only), fitting nothing; the zoo also from its graphs, as `edgeplan predict` prices it;
# then their transformer extensions, held out
ZEN5DATA := edgeplan/data/latency/epyc-zen5-keep
bench-profile-zen5: $(STAMP)
	$(BIN)/python benchmarks/bench_li2023_zoo_bias.py --device zen5-torch-fp32-2t --data $(ZEN5DATA)/torch-fp32-2t.jsonl.xz \
		--repeat-data $(ZEN5DATA)/torch-fp32-2t.repeat.jsonl.xz --graph --worst 12 --method gbdt
	$(BIN)/python benchmarks/bench_li2023_zoo_bias.py --device zen5-torch-fp32-1t --data $(ZEN5DATA)/torch-fp32-1t.jsonl.xz \
		--repeat-data $(ZEN5DATA)/torch-fp32-1t.repeat.jsonl.xz --graph --worst 2 --method gbdt
	$(BIN)/python benchmarks/bench_transformers.py --device zen5-torch-fp32-2t --methods gbdt --threads 2 \
		--data $(ZEN5DATA)/torch-fp32-2t.transformers.jsonl.xz --cnn-data $(ZEN5DATA)/torch-fp32-2t.jsonl.xz
	$(BIN)/python benchmarks/bench_transformers.py --device zen5-torch-fp32-1t --methods gbdt --threads 1 \
		--data $(ZEN5DATA)/torch-fp32-1t.transformers.jsonl.xz --cnn-data $(ZEN5DATA)/torch-fp32-1t.jsonl.xz

bench-li2023-int8: $(STAMP)
	$(BIN)/edgeplan reproduce li2023 --insight int8 --statistic min

bench-li2023-nb201: $(STAMP)
	$(BIN)/edgeplan reproduce li2023 --nb201

bench-predict: $(STAMP)
	$(BIN)/python benchmarks/bench_predict.py

# the shipped torch-fp32-1t profile (an AMD EPYC's) calibrated from 10 models of an Intel Xeon's shipped
# measurements (40-65 min on one core); measure this machine instead: taskset -c 0 $(BIN)/python
# benchmarks/bench_calibrate_here.py (~2 h: both campaigns, ~55 min, then the scores)
bench-calibrate-here: $(STAMP)
	$(BIN)/python benchmarks/bench_calibrate_here.py --measured edgeplan/data/latency/fewshot/xeon-torch-fp32-1t

# the same for ONNX Runtime: the shipped ort-fp32-1t profile (an AMD EPYC's, synthetic networks only) calibrated from
# 10 models of an Intel Xeon's shipped ORT measurements (~1 h on one core)
bench-calibrate-here-ort: $(STAMP)
	$(BIN)/python benchmarks/bench_calibrate_here.py --source ort-fp32-1t --measured edgeplan/data/latency/fewshot/xeon-ort-fp32-1t

# the same for two threads: the shipped torch-fp32-2t profile calibrated from 10 models of the Xeon's 2-thread data
# (~35 min on one core)
bench-calibrate-here-2t: $(STAMP)
	$(BIN)/python benchmarks/bench_calibrate_here.py --source torch-fp32-2t --measured edgeplan/data/latency/fewshot/xeon-torch-fp32-2t

# vision transformers held out of the torch profiles' extensions (5-fold), 1 and 2 threads (~9 min each, one core)
bench-transformers: $(STAMP)
	$(BIN)/python benchmarks/bench_transformers.py
	$(BIN)/python benchmarks/bench_transformers.py --data edgeplan/data/latency/torch-fp32-2t.transformers.jsonl.xz

# nearest upsampling (HRNet, GhostNetV2) in the torch-fp32 profiles: one family held out at a time, the base keeping
# the transformers' extension (~3 min each, one core)
bench-upsample: $(STAMP)
	$(BIN)/python benchmarks/bench_transformers.py --data edgeplan/data/latency/torch-fp32-1t.upsample.jsonl.xz \
		--keep-extensions 1 --by-family --methods gbdt lasso
	$(BIN)/python benchmarks/bench_transformers.py --data edgeplan/data/latency/torch-fp32-2t.upsample.jsonl.xz \
		--keep-extensions 1 --by-family --methods gbdt lasso

# weight standardization (NF-ResNets, NFNets) in the torch-fp32 profiles: the 8 timm normalization-free models held
# out one family at a time, the 20 synthetic-nf networks always trained on, the base keeping the transformers' and the
# upsampling extensions (~3 min each, one core)
bench-nf: $(STAMP)
	$(BIN)/python benchmarks/bench_transformers.py --data edgeplan/data/latency/torch-fp32-1t.nf.jsonl.xz \
		--keep-extensions 2 --by-family --always-train synthetic-nf:0-19 --methods gbdt lasso
	$(BIN)/python benchmarks/bench_transformers.py --data edgeplan/data/latency/torch-fp32-2t.nf.jsonl.xz \
		--keep-extensions 2 --by-family --always-train synthetic-nf:0-19 --methods gbdt lasso

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
