# jetcron: `make up` runs everything on this machine; `make test` runs the whole suite.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
LAUNCHER := $(BIN)/jetcron-launch

.PHONY: up test test-bench test-fuzz test-fast test-deploy chaos lint typecheck schemas bench bench-scale bench-longlife bench-peers peers-tools screenshots browser tools clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# Two source roots make setuptools install the editable package through an import finder, which warns at every
# install that a folder named like the package could shadow it; none can (the packages live under libs/ and
# services/), so its build runs with warnings off.
PIP_INSTALL := PYTHONWARNINGS=ignore $(BIN)/pip install -q

# The commit-msg hook (.githooks/) holds each commit's subject to 72 characters; a clone without git is left alone.
$(STAMP): pyproject.toml | $(BIN)/python
	$(PIP_INSTALL) -e '.[dev]'
	-git config core.hooksPath .githooks 2>/dev/null
	touch $(STAMP)

# The agent's launcher (services/jetcron_services/agent/host/jetcron_launch.c): static, so that no dynamic loader reads a job's
# environment while it runs as root; its exit codes and bounds are its Python twin's (--c-defines). Where it cannot
# be built (no C compiler or static libc), agents start runs through that twin instead, which costs an
# interpreter's start more CPU per run (docs/decisions-job-view.md).
LAUNCH_SOURCES := services/jetcron_services/agent/host/jetcron_launch.c services/jetcron_services/agent/host/jetcron_launch.py
$(LAUNCHER): $(LAUNCH_SOURCES) | $(BIN)/python
	$(CC) -O2 -Wall -Wextra -static $$($(BIN)/python $(word 2,$^) --c-defines) -o $@ $< || { rm -f $@; \
	  echo "jetcron-launch not built: agents start runs through its Python twin instead"; }

up: $(STAMP) $(LAUNCHER)
	$(BIN)/jetcron up

# Debian's chromium for the dashboard's browser tests and screenshots (Playwright cannot download its own here), and
# promtool (Debian's prometheus) for the alert rules' unit tests: installed when missing and this is a Debian
# machine we may install on; otherwise those tests are skipped, and in CI they fail (tests/host_needs.py; .ci/run
# installs both itself).
tools:
	@missing=""; command -v chromium >/dev/null 2>&1 || missing="chromium"; \
	  command -v promtool >/dev/null 2>&1 || missing="$$missing prometheus"; \
	  [ -z "$$missing" ] || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=600 \
	  $$missing >/dev/null; } || \
	  echo "not installed:$$missing: the tests that need them will be skipped (and fail in CI)"
browser: tools

# In parallel (pytest-xdist): most tests wait on processes and leases, so six workers keep two cores busy;
# worksteal rebalances the long tests. TEST_WORKERS=0 runs them in this process, one at a time.
TEST_WORKERS ?= 6
test: $(STAMP) $(LAUNCHER) tools
	$(BIN)/python -m pytest -q -m "not slow and not chaos and not deploy and not bench and not fuzz" \
	  -p no:cacheprovider -n $(TEST_WORKERS) --dist worksteal

# Every verb and every REST operation driven by requests generated from their schemas (hypothesis, schemathesis):
# a few long, CPU-bound tests of their own (docs/decisions-testing.md).
# The REST contract test draws a fresh seed each run, printed here; JETCRON_FUZZ_SEED=<seed> replays one.
test-fuzz: $(STAMP)
	seed=$${JETCRON_FUZZ_SEED:-$$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}; \
	echo "REST contract fuzz seed: $$seed (replay: JETCRON_FUZZ_SEED=$$seed make test-fuzz)"; \
	JETCRON_FUZZ_SEED=$$seed $(BIN)/python -m pytest -q -m fuzz -p no:cacheprovider -n 3 --dist worksteal

# Every benchmark script at smoke size (tests/integration/test_bench_smoke.py): the harness does not rot.
test-bench: $(STAMP) $(LAUNCHER) peers-tools
	$(BIN)/python -m pytest -q -m bench -p no:cacheprovider -n 4 --dist worksteal

# The image and the compose stack in real containers (podman; installed here when missing): docs/deploy.md.
test-deploy: $(STAMP)
	$(PIP_INSTALL) -e '.[dev,deploy,containers]'
	tests/deploy/prepare.sh
	$(BIN)/python -m pytest -q tests/deploy -m deploy -p no:cacheprovider

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q tests/unit -p no:cacheprovider

# The fault catalogue (a job's view on jetcron up among it), the bad-input table and the fuzzed verbs; their
# outcomes and figures regenerate docs/guarantees.md.
CHAOS_TESTS = tests/chaos tests/integration/test_api_bad_input.py tests/integration/test_api_fuzz.py \
	tests/integration/test_admission.py tests/integration/test_graceful_stop.py tests/e2e/test_up_job_view.py
chaos: $(STAMP) $(LAUNCHER)
	JETCRON_TEST_PRELOAD=0 JETCRON_GUARANTEES_REPORT=docs/chaos-report.json $(BIN)/python -m pytest -q $(CHAOS_TESTS) \
	  -p no:cacheprovider; \
	status=$$?; $(BIN)/python tests/chaos/guarantees.py docs/chaos-report.json docs/guarantees.md; exit $$status

lint: $(STAMP)
	$(BIN)/ruff check libs services tests bench

# Both source roots are on mypy's path (pyproject.toml [tool.mypy] mypy_path): a module's path is its name.
typecheck: $(STAMP)
	$(BIN)/mypy -p jetcron -p jetcron_services

# A screenshot of every dashboard page, on a small live system, into docs/images/ (docs/dashboard.md).
screenshots: $(STAMP) $(LAUNCHER) browser
	$(BIN)/python -m bench.screenshots docs/images

schemas: $(STAMP)
	$(BIN)/python -m jetcron.wire.schema schemas

bench: $(STAMP) $(LAUNCHER) peers-tools
	$(BIN)/python bench/run.py

# jetcron beside its peers in one window (bench/peers.py, docs/benchmarks.md "Beside the peers"): Celery on Redis
# and a bare JetStream pipeline of the same hops. Debian's redis-server is installed when missing.
bench-peers: $(STAMP) $(LAUNCHER) peers-tools
	$(BIN)/python bench/run.py --only bench.peers

peers-tools: $(STAMP)
	$(PIP_INSTALL) -e '.[dev,peers]'
	command -v redis-server >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	  apt-get install -y -qq -o DPkg::Lock::Timeout=600 redis-server >/dev/null; }

# About 1.5 h: the design's scale scenarios on a virtual fleet (dead hosts, steady day, midnight; bench/scale.py) at
# the largest sizes this machine carries, results in bench/results/ and docs/benchmarks.md; then their plots.
bench-scale: $(STAMP) $(LAUNCHER)
	$(PIP_INSTALL) -e '.[dev,bench]'
	$(BIN)/python bench/run.py --only bench.scale
	$(BIN)/python -m bench.scale_plot

# Hours: 3,000,000 runs through a system whose history ages out in minutes, a ledger of every occurrence, disk and
# memory every minute (bench/longlife.py); then docs/images/longlife.png. LONGLIFE_ARGS="--runs 20000" for less.
bench-longlife: $(STAMP) $(LAUNCHER)
	$(PIP_INSTALL) -e '.[dev,bench]'
	$(BIN)/python -m bench.longlife $(LONGLIFE_ARGS)
	$(BIN)/python -m bench.longlife_plot

clean:
	rm -rf $(VENV) .jetcron .pytest_cache .mypy_cache .ruff_cache build
