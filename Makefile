# warmgate developer entry points. `make help` lists them.
# The two README commands: `make run` (the main job on a local single-node cluster) and `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
ASSETS_CMD := hack/provision-envtest.sh
MONITORING_CMD := hack/provision-monitoring.sh

.PHONY: help venv assets monitoring-tools lint typecheck imports unit integration e2e test run bench crd clean

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP) ## Create .venv with warmgate and its dev tools

assets: ## Provision the control plane and the node (.cache/envtest, Debian packages), or use KUBEBUILDER_ASSETS
	@if [ -n "$$KUBEBUILDER_ASSETS" ]; then echo "using KUBEBUILDER_ASSETS=$$KUBEBUILDER_ASSETS"; else bash $(ASSETS_CMD) all; fi

monitoring-tools: ## Build kube-state-metrics and promtool from their Go modules (.cache/monitoring)
	@bash $(MONITORING_CMD) all >/dev/null

lint: venv ## ruff lint + format check, mypy --strict, import contracts
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy --strict warmgate
	$(VENV)/bin/lint-imports

unit: venv ## Unit tests only (pure, fast)
	$(PY) -m pytest tests -m "not integration and not e2e"

integration: venv assets monitoring-tools ## Integration tests against the real apiserver
	$(PY) -m pytest tests -m integration

e2e: venv assets ## End-to-end tests on the local single-node cluster (root, containerd, kubelet)
	$(PY) -m pytest tests -m e2e

test: venv assets monitoring-tools lint ## Everything: install, provision, lint, all test tiers
	$(PY) -m pytest tests

run: venv assets ## The main job on a local single-node cluster (API-only where no node can start)
	$(VENV)/bin/warmgate demo

bench: venv ## Benchmarks (print figures; see docs/benchmarks.md)
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

crd: venv ## Regenerate crds/ and the chart's CRD copy from the pydantic models
	$(VENV)/bin/warmgate crd --write --output crds/warmgate.dev_specdecodedeployments.yaml \
		--output charts/warmgate/files/crds/warmgate.dev_specdecodedeployments.yaml

clean: ## Remove the venv and caches (keeps provisioned assets)
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
