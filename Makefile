# hlo-opt: the two commands first.
#   make run    create .venv, install, optimize a bundled sample and print it
#   make test   install the test extras and run the whole suite
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
PIP     = $(VENV)/bin/pip
SAMPLE ?= sample_modules/reduce_sum_xyz.hlo
PIPELINE ?= gpu

.PHONY: run test install install-test bench lint clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(PIP) install -q -e '.[test]'
	touch $@

install: $(VENV)/.installed

install-test: $(VENV)/.installed-test

run: install
	$(VENV)/bin/hlo-opt $(SAMPLE) --pipeline=$(PIPELINE) --summary

test: install-test
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium graphviz >/dev/null; } || echo "make test: chromium/graphviz not installed (as root: apt-get install -y chromium graphviz); their tests will skip"
	$(PY) -m pytest tests

bench: install-test
	for b in benchmarks/*_bench.py; do echo "== $$b"; $(PY) $$b || exit 1; done

$(VENV)/.installed-lint: $(VENV)/.installed-test
	$(PIP) install -q -e '.[test,lint]'
	touch $@

# ruff (configured in pyproject.toml), then the layering tests: the import direction,
# no import cycles, no private IR fields outside hlo_opt/ir
lint: $(VENV)/.installed-lint
	$(PY) -m ruff check hlo_opt passes tests benchmarks scripts
	$(PY) -m pytest -q tests/unit/test_architecture.py

clean:
	rm -rf $(VENV) tests/lit/.lit_out .pytest_cache
