# The front door. A fresh machine needs Python >= 3.11 and make; everything else is installed here.
# uv is used from PATH when present, otherwise installed into .venv (it never downloads a Python).

PYTHON ?= python3
UV_VERSION := 0.13.8
VENV := .venv
BIN := $(VENV)/bin
UV := $(shell command -v uv 2>/dev/null || echo $(BIN)/uv)

export UV_PYTHON_DOWNLOADS := never
export UV_PROJECT_ENVIRONMENT := $(CURDIR)/$(VENV)

HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: install serve test lint format clean bench

install: $(VENV)/.installed

$(BIN)/uv:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check "uv==$(UV_VERSION)"

$(VENV)/.installed: pyproject.toml uv.lock server/pyproject.toml client/pyproject.toml | $(UV)
	$(UV) sync --locked --python "$$($(PYTHON) -c 'import sys; print(sys.executable)')"
	@touch $@

serve: install
	$(BIN)/commerce-api serve --demo --host $(HOST) --port $(PORT)

# After pytest, the TypeScript client (client-ts/) when Node.js is installed: npm ci + npm test
# (a build with its type checks, unit tests, and end-to-end tests against a real server).
test: install
	$(BIN)/pytest $(PYTEST_ARGS)
	@if command -v node >/dev/null 2>&1; then \
		cd client-ts && npm ci --no-audit --no-fund && npm test; \
	else \
		echo "Skipped the TypeScript client tests (client-ts/): Node.js is not installed (no node on PATH)."; \
	fi

lint: install
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy server/src client/src server/tests client/tests client/examples bench

format: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

# Load test against a ceiling app; needs wrk (Debian/Ubuntu: sudo apt-get install wrk).
bench: install
	$(BIN)/python bench/run.py $(BENCH_ARGS)
