# Two commands for a fresh machine: `make run` and `make test`. Both create and fill .venv when needed.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup run test lint mutation clean

setup: $(STAMP)

# Five distributions, each a folder with its own pyproject.toml, installed in dependency order: the torch-free
# device SDK (sdk/, pategail-sdk), the coordinator (server/), torch -> ONNX (export/), the research tooling
# (research/) and the command line (cli/, the top-level pyproject.toml, pategail). All editable, path-based
# (compat), so that the namespace package pategail spans the five folders.
# The SDK's own dependencies are also kept as wheels in $(WHEELS): a test installs the SDK alone from them,
# offline, into a fresh virtual environment.
WHEELS := $(VENV)/sdk-wheels
$(STAMP): pyproject.toml sdk/pyproject.toml server/pyproject.toml export/pyproject.toml research/pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --config-settings editable_mode=compat \
		-e ./sdk -e ./server -e ./export -e ./research -e '.[test,ray]'
	$(PY) -m pip download --quiet --disable-pip-version-check -d $(WHEELS) ./sdk setuptools wheel
	touch $(STAMP)

# The main job on the embedded default data (data/default): prepare it, keeping 2 of its 10 users out of training
# (the non-members of the membership attacks and the users recommended to), then federated PateGail over the other
# 8 (one emulated device each, default configuration), which prints the table ours / markov / epr / floor; the
# report adds the downstream tasks and attacks.
RUN := runs/default
run: setup
	$(PY) -m pategail data prepare --format pategail --allow-pickle --input data/default --out $(RUN)/data \
		--holdout-users 0.2
	rm -rf $(RUN)/train
	$(PY) -m pategail train --data $(RUN)/data --out $(RUN)/train --no-privacy

# ruff's pyflakes and pycodestyle error classes over the whole tree, then mypy's type check (strict for the device
# SDK, the privacy and the secure-aggregation packages); both configured in pyproject.toml, see docs/lint.md. CI
# runs it before the tests.
lint: setup
	$(PY) -m ruff check .
	$(PY) -m mypy

# pytest-xdist, a test file to a worker so that its module fixtures are built once; three workers on two cores,
# because many tests wait on child processes (served runs, JVMs). While editing:
# `.venv/bin/python -m pytest -q -m "not slow" tests/secagg` (docs/testing.md).
TEST_WORKERS ?= 3
test: setup
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile

# Mutation testing of the privacy-, security- and learning-critical modules (a benchmark, not part of `make test`;
# see BENCHMARKS.md "Mutation testing"). MUTATION_ARGS="--sample 40" runs a seeded sample of each module;
# "--module ppo" one module. Hours on 2 cores for the full set. On a loaded machine add "--direct --jobs 2":
# no whole-selection pass, each mutant runs its module's own test files, resumable (docs/testing.md).
MUTATION_ARGS ?=
mutation: setup
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test,mutation]'
	$(PY) benchmarks/mutation.py $(MUTATION_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info */build */*.egg-info cli/*.egg-info .pytest_cache .mypy_cache
