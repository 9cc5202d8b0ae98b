# make lab   — prepare .venv from pyproject.toml and start the lab
# make test  — prepare .venv and run the whole suite
# make bench — run the benchmarks and print their figures
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: lab test bench bytecode clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[test]'
	touch $(STAMP)

# With PYTHONDONTWRITEBYTECODE set, Python never caches the project's own modules and every
# `nslab` compiles them again (~0.15 s a start). compileall writes the caches regardless and,
# checking timestamps, recompiles only what changed since; __pycache__ is in .gitignore.
bytecode: $(STAMP)
	$(BIN)/python -m compileall -q lab nameserver chaos

lab: bytecode
	$(BIN)/nslab up

test: bytecode
	$(BIN)/python -m pytest

bench: bytecode
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) build *.egg-info
