# Two commands for a fresh machine: `make run` and `make test`. Both create and fill .venv when needed.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup run test mutation clean

setup: $(STAMP)

$(STAMP): pyproject.toml setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $(STAMP)

# The main job on the embedded default data (data/default): prepare it, then federated PateGail over its
# 10 users (one emulated device each, default configuration), which prints the table ours / markov / epr / floor.
RUN := runs/default
run: setup
	$(PY) -m pategail data prepare --format pategail --allow-pickle --input data/default --out $(RUN)/data
	rm -rf $(RUN)/train
	$(PY) -m pategail train --data $(RUN)/data --out $(RUN)/train --no-privacy

test: setup
	$(PY) -m pytest -q

# Mutation testing of the privacy-, security- and learning-critical modules (a benchmark, not part of `make test`;
# see BENCHMARKS.md "Mutation testing"). MUTATION_ARGS="--sample 40" runs a seeded sample of each module;
# "--module ppo" one module. Hours on 2 cores for the full set.
MUTATION_ARGS ?=
mutation: setup
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test,mutation]'
	$(PY) benchmarks/mutation.py $(MUTATION_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
