# Two commands for a newcomer: `make demo` (set up, then run the router on the bundled examples)
# and `make test` (set up, then run the whole test suite).
VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3

.PHONY: setup demo test lint bench clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml examples/package.json examples/package-lock.json \
		tests/conformance/package.json tests/conformance/package-lock.json
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	cd examples && npm ci --no-audit --no-fund --loglevel=error
	cd tests/conformance && npm ci --no-audit --no-fund --loglevel=error
	@# The console's browser test drives the system's Chromium (Debian's package), installed where possible.
	@command -v chromium >/dev/null || { command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ] && \
		apt-get update -qq && apt-get install -y -qq chromium >/dev/null; } || \
		echo "note: install Chromium (Debian: apt-get install chromium) for tests/e2e/test_console.py"
	touch $@

demo: setup
	$(VENV)/bin/mcp-router demo

test: setup
	$(VENV)/bin/pytest

lint: setup
	$(VENV)/bin/ruff check router actors deployments cli servers tests benchmarks examples
	$(VENV)/bin/mypy

bench: setup
	$(PY) benchmarks/routing_accuracy.py ../shared/benchmarks/livemcpbench

clean:
	rm -rf $(VENV) examples/node_modules tests/conformance/node_modules examples/.state .state
