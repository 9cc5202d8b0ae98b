# make lab   — prepare .venv from pyproject.toml and start the lab
# make test  — prepare .venv and run the whole suite in three phases (see TEST_WORKERS below): the
#              tests not on real time on pytest-xdist workers, then the real-time ones alone, then
#              make schedules beside the seed gate on a sample of seeds (SEED_SAMPLE)
# make seeds — every bundled scenario, simulated, on seeds 1-20: each must be valid on every one
# make schedules — the simulated tests again under trio scheduler seeds 1-5 (NSLAB_TEST_SEED): a
#                  verdict that depends on the order trio runs ready tasks in fails here, replayably
# make bench — run the benchmarks and print their figures
# make app-scenarios — the sample app (examples/apps/python_app.py, on the real C++ client) through
#                  every bundled app scenario at full length, and each broken app through its own:
#                  real time, about 25 minutes (make test runs five shortened cases)
# The interpreter .venv is made from: the distribution's python3.11 first, when it can make a venv.
# Debian's and Ubuntu's are built with PGO and LTO and ran a simulated lab 13-20 % faster than a
# plain source build (pyenv's default) here: bench_cluster_sim.py's command, timed on both. Then the
# first python3.11 on PATH, then python3. `make PYTHON=/path/to/python3.11 ...` chooses another;
# an existing .venv stays as it is until `make clean`.
PYTHON ?= $(shell for p in /usr/bin/python3.11 "$$(command -v python3.11)" "$$(command -v python3)"; do \
	[ -n "$$p" ] && "$$p" -c "import ensurepip, venv" 2>/dev/null && { echo "$$p"; break; }; done)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: lab test seeds schedules bench app-scenarios bytecode clean

# wheel first: pyspark ships only as an sdist, which pip would otherwise install by the deprecated
# `setup.py install`.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check wheel
	$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[test,analytics]'
	touch $(STAMP)

# With PYTHONDONTWRITEBYTECODE set, Python never caches the project's own modules and every
# `nslab` compiles them again (~0.15 s a start). compileall writes the caches regardless and,
# checking timestamps, recompiles only what changed since; __pycache__ is in .gitignore.
bytecode: $(STAMP)
	$(BIN)/python -m compileall -q lab nameserver chaos

lab: bytecode
	$(BIN)/nslab up

# make test's phases; each runs even when one before it failed, and make test fails if any did.
# 1. Every test not marked realtime, on TEST_WORKERS pytest-xdist workers (default: one per core,
#    `nproc`, which says at least 1). --dist loadgroup keeps an xdist_group's tests on one worker
#    (tests/conftest.py: tests/pipeline's, on Spark; a module-scoped fixture's), and a test keeps its
#    scheduling seed and its replay command.
# 2. The realtime tests (tests/conftest.py marks them: a verdict that depends on wall-clock time, such
#    as a lab on sockets or paced in real time, the real C++ client, the TUI's pilot, a measured
#    duration), with nothing else beside them: beside phase 1's CPU work they fail now and then.
#    First those also marked realtime_busy, which use CPU in real time or time a real client's sends
#    (tests/conftest.py's REALTIME_BUSY: the real C++ client's timed sends, sped-up runs on sockets,
#    Spark's cluster), in pytest's own process, one after another; then the others, which mostly
#    wait (the app scenarios on the real C++ client, the TUI's pilot, labs at real time), on
#    REALTIME_WORKERS workers: one more than TEST_WORKERS, as their waits overlap and the workers
#    together still leave a core's worth idle.
# 3. make schedules (simulated tests only, nothing on real time) beside the seed gate on the seeds of
#    SEED_SAMPLE, each one's output printed whole when it ends. `make seeds` is the gate on 1-20.
# `make test TEST_WORKERS=0` runs phases 1 and 2 in pytest's own process, no workers.
TEST_WORKERS ?= $(shell nproc)
REALTIME_WORKERS ?= $(if $(filter 0,$(TEST_WORKERS)),0,$(shell expr $(TEST_WORKERS) + 1))
SEED_SAMPLE ?= 1-5
test: bytecode
	@failed=; \
	echo "make test, phase 1: the suite but its realtime tests, on $(TEST_WORKERS) workers, at $$(date +%T)"; \
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup -m "not realtime" || failed="$$failed 1"; \
	echo "make test, phase 2: the realtime tests, nothing else beside them, at $$(date +%T)"; \
	$(BIN)/python -m pytest -n 0 -m "realtime and realtime_busy" || failed="$$failed 2"; \
	echo "make test, phase 2: the realtime tests that mostly wait, on $(REALTIME_WORKERS) workers, at $$(date +%T)"; \
	$(BIN)/python -m pytest -n $(REALTIME_WORKERS) --dist loadgroup -m "realtime and not realtime_busy" || failed="$$failed 2"; \
	echo "make test, phase 3: make schedules beside the seed gate on seeds $(SEED_SAMPLE), at $$(date +%T)"; \
	$(MAKE) --no-print-directory -j2 --output-sync=target schedules seeds SEEDS=$(SEED_SAMPLE) || failed="$$failed 3"; \
	echo "make test: ended at $$(date +%T)"; \
	if [ -n "$$failed" ]; then echo "make test: phase$$failed failed"; exit 1; fi

SCHEDULES ?= 1 2 3 4 5
schedules: bytecode
	@for seed in $(SCHEDULES); do echo "simulated tests, NSLAB_TEST_SEED=$$seed"; \
	  NSLAB_TEST_SEED=$$seed $(BIN)/python -m pytest -m simulated || exit 1; done

SEEDS ?= 1-20
seeds: bytecode
	$(BIN)/nslab seeds --seeds $(SEEDS)

bench: bytecode
	$(BIN)/python benchmarks/run_all.py

app-scenarios: bytecode
	NSLAB_APP_LIBRARY=1 $(BIN)/python -m pytest tests/real/test_app_scenarios.py -k library

clean:
	rm -rf $(VENV) build *.egg-info
