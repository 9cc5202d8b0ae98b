# make lab   — prepare .venv from pyproject.toml and start the lab
# make test  — prepare .venv and run the whole suite, then make schedules and the seed gate side by
#              side; `make test TEST_WORKERS=3` runs the suite on 3 pytest-xdist workers
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

# TEST_WORKERS: pytest-xdist workers for the suite, 0 for none (the suite in pytest's own process).
# With workers, --dist loadgroup keeps an xdist_group's tests on one worker (tests/conftest.py: all of
# tests/pipeline, a module-scoped fixture's tests), and a test keeps its scheduling seed. Not the
# default: tests on real time fail beside other workers' CPU work (three of the sped-up real-socket
# runs of tests/lab/test_request_fault_scenarios.py, run beside tests/real on 3 workers); they need a
# phase of their own, with nothing beside them, before workers can be the default.
# schedules and seeds run simulated labs only, nothing on real time: side by side, each one's output
# printed whole when it ends.
TEST_WORKERS ?= 0
test: bytecode
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup
	$(MAKE) --no-print-directory -j2 --output-sync=target schedules seeds

SCHEDULES ?= 1 2 3 4 5
schedules: bytecode
	@for seed in $(SCHEDULES); do echo "simulated tests, NSLAB_TEST_SEED=$$seed"; \
	  NSLAB_TEST_SEED=$$seed $(BIN)/python -m pytest -m simulated || exit 1; done

seeds: bytecode
	$(BIN)/nslab seeds --seeds 1-20

bench: bytecode
	$(BIN)/python benchmarks/run_all.py

app-scenarios: bytecode
	NSLAB_APP_LIBRARY=1 $(BIN)/python -m pytest tests/real/test_app_scenarios.py -k library

clean:
	rm -rf $(VENV) build *.egg-info
