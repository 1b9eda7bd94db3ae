# Every target installs what it needs into .venv first, so a fresh clone needs only Python 3.11+.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
HEADLESS ?=
SCENARIO ?= burst
PROVIDER ?= kwok
# Test files run side by side. On 2 cores the suite now waits more than it computes (stacks
# starting, timers, processes; docs/development.md, "What make test costs"): on a clean clone of
# the same code 4 workers took 6m26s (1.5 cores busy), 6 took 5m13s, and 8 took 6m06s with a
# loop test stalled (the time-skipping server's, since moved to the dev server).
TEST_WORKERS ?= 6
# Python's byte-code cache stays on whatever the shell says: with PYTHONDONTWRITEBYTECODE set
# (some CI images set it), every process recompiled growth's modules from source and each pytest
# worker re-ran the assertion rewriting of all 217 test files. Measured on 2 cores: collecting the
# suite took 18.9 CPU-s without the cache and 5.8 with it, and the suite starts four pytest
# workers and ~150 Python processes (workers, sims, CLI calls).
export PYTHONDONTWRITEBYTECODE :=

.PHONY: demo test lint bench bench-e2e bench-billing bench-consolidation bench-hetzner chaos bench-components install clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,otel]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(PY) -m starters.demo --scenario $(SCENARIO) --provider $(PROVIDER) $(if $(HEADLESS),--headless,)

test: $(STAMP)
	$(PY) -m compileall -q -j 0 scaling workflows activities sim starters bench worker.py
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

bench: $(STAMP)
	$(PY) -m bench.plan_scale_up

# The real stack (dev server, simulated cluster, worker) for 1,000/5,000/10,000-pod bursts; slow.
bench-e2e: $(STAMP)
	$(PY) -m bench.e2e

# A bursty day through the planners, with and without billing-aware scale-down (seconds).
bench-billing: $(STAMP)
	$(PY) -m bench.billing_day

# A day of churn over four workload families, then consolidation, on the real stack (about 3
# minutes on 2 cores); BENCH_ARGS=--planner-only runs it through the planners only (seconds).
bench-consolidation: $(STAMP)
	$(PY) -m bench.consolidation_stack $(BENCH_ARGS)

# A 500-node burst through the fake Hetzner API, 3,600/h, another tool spending 1,000/h (~30 s).
bench-hetzner: $(STAMP)
	$(PY) -m bench.hetzner_budget $(BENCH_ARGS)

# 200 TidbClusterAutoScalers on one worker, the real stack with the sim's TiDB world (~5 min).
bench-components: $(STAMP)
	$(PY) -m bench.components_scale $(BENCH_ARGS)

# Faults on the real stack (two workers): kills, restarts, a hang, 5xx/429 storms; invariants and
# recovery per fault, one JSON line per scenario, JSON over all last; exits 1 naming the scenarios
# that violated an invariant. ~20 minutes; BENCH_ARGS="--scenarios 'rep-*'" runs some of them.
chaos: $(STAMP)
	$(PY) -m bench.chaos $(BENCH_ARGS)

# The fleet loop at fleet size: registered clusters, a burst of instance creations (minutes).
bench-fleet: $(STAMP)
	$(PY) -m bench.fleet_scale $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .growth
