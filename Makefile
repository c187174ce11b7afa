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

.PHONY: help install serve test test-latest lint format clean bench bench-overview bench-catalogue cluster dist

install: $(VENV)/.installed ## Create .venv and install both packages from uv.lock (the default target)

$(BIN)/uv:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check "uv==$(UV_VERSION)"

# Bytecode compiled at install, ours too: a machine (or CI) with PYTHONDONTWRITEBYTECODE set
# never writes it, and would compile every module again at each start of every command.
$(VENV)/.installed: pyproject.toml uv.lock server/pyproject.toml client/pyproject.toml | $(UV)
	$(UV) sync --locked --compile-bytecode --python "$$($(PYTHON) -c 'import sys; print(sys.executable)')"
	$(BIN)/python -m compileall -q server/src client/src
	@touch $@

serve: install ## Start the service with a demo catalogue on localhost:8000 (HOST=, PORT= change it)
	$(BIN)/commerce-api serve --demo --host $(HOST) --port $(PORT)

# pytest on PYTEST_WORKERS processes (pytest-xdist; each worker has databases, files and ports
# of its own: server/tests/conftest.py). PYTEST_ARGS come after, so `PYTEST_ARGS="-n 0 …"` runs
# in one process. After pytest, the TypeScript client (client-ts/) when Node.js is installed:
# npm ci + npm test (a build with its type checks, unit tests, and end-to-end tests against a
# real server).
PYTEST_WORKERS ?= 3
PYTEST_PARALLEL = -n $(PYTEST_WORKERS) --dist loadgroup
test: install ## Run the whole test suite, then the TypeScript client's when Node.js is installed
	$(BIN)/pytest $(PYTEST_PARALLEL) $(PYTEST_ARGS)
	@if command -v node >/dev/null 2>&1; then \
		cd client-ts && npm ci --no-audit --no-fund && npm test; \
	else \
		echo "Skipped the TypeScript client tests (client-ts/): Node.js is not installed (no node on PATH)."; \
	fi

# The suite on the newest releases the dependency ranges admit, so that an upgrade breaks here
# before it breaks a user's `pip install -U`: a throw-away copy of the tree whose lock is
# upgraded (uv lock --upgrade prints each version it moved) and synced into a venv of its own
# (.git comes along: the project tests ask git which files are tracked).
# This tree's uv.lock and .venv are left as they are.
test-latest: install ## The test suite on the newest releases the dependency ranges admit
	@set -e; copy="$$(mktemp -d)"; trap 'rm -rf "$$copy"' EXIT; \
	tar --exclude=./.venv --exclude=./client-ts/node_modules \
		--exclude=.pytest_cache --exclude=.mypy_cache --exclude=.ruff_cache --exclude=__pycache__ \
		-cf - . | tar -xf - -C "$$copy"; \
	cd "$$copy"; \
	export UV_PROJECT_ENVIRONMENT="$$copy/.venv"; \
	$(abspath $(UV)) lock --upgrade; \
	$(abspath $(UV)) sync --locked --quiet --compile-bytecode --python "$$($(PYTHON) -c 'import sys; print(sys.executable)')"; \
	"$$copy/.venv/bin/pytest" $(PYTEST_PARALLEL) $(PYTEST_ARGS)

lint: install ## Check formatting (ruff), lint (ruff) and types (mypy --strict)
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy server/src client/src server/tests client/tests client/examples bench

format: install ## Format the code and apply ruff's fixes
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# What another project installs, in $(DIST) (git-ignored): the wheel and sdist of the server
# (commerce-api) and of the Python client (commerce-client), each built by uv from its own
# pyproject.toml, and, when Node.js is installed, the TypeScript client's tarball
# (commerce-client-<version>.tgz: `npm pack` compiles it first, its prepack script).
# The client READMEs say how to install them.
DIST ?= dist
NPM_CI ?= npm ci --no-audit --no-fund
dist: install ## Build the wheels, sdists and the TypeScript tarball into dist/
	$(UV) build --quiet --out-dir "$(abspath $(DIST))" server
	$(UV) build --quiet --out-dir "$(abspath $(DIST))" client
	@if command -v npm >/dev/null 2>&1; then \
		cd client-ts && $(NPM_CI) && npm pack --silent --pack-destination "$(abspath $(DIST))" >/dev/null; \
	else \
		echo "Skipped the TypeScript client's tarball (client-ts/): Node.js is not installed (no npm on PATH)."; \
	fi
	@ls -1 "$(abspath $(DIST))"

clean: ## Remove .venv and the tools' caches
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

# Load test against a ceiling app; needs wrk (Debian/Ubuntu: sudo apt-get install wrk).
bench: install ## Load test against a ceiling app (needs wrk); docs/performance.md
	$(BIN)/python bench/run.py $(BENCH_ARGS)

# The service over simulated hosts (issue 32): network namespaces on this machine (a database
# host with its own PostgreSQL and Redis, two API hosts, a worker host), a round trip of 0, 0.5
# and 2 ms added between the app hosts and the database by a user-space delay line (TUN
# devices); reads and orders, round trips per order, SQL checks; bench/results/cluster.md.
# Needs root, wrk, redis-server and PostgreSQL's binaries (initdb, pg_ctl). CLUSTER_ARGS: e.g.
# --smoke, --rtts 0,1, --duration 3. Then faults under load with SQL checks after each and a
# fault table (bench/cluster_faults.py): --faults a,b,c,d,e (the default; none), --faults-only
# (see bench/cluster.py --help).
cluster: install ## The service over simulated hosts, then faults under load (root, wrk)
	$(BIN)/python bench/cluster.py $(CLUSTER_ARGS)

# The console overview of 1,000,000 orders (bench/overview.py): SQLite, and PostgreSQL with
# BENCH_OVERVIEW_ARGS="--postgres-url postgresql://postgres@127.0.0.1:5432/postgres".
bench-overview: install ## The console overview over 1,000,000 orders
	$(BIN)/python bench/overview.py $(BENCH_OVERVIEW_ARGS)

# A large catalogue that changes while it is read (issue 42; bench/catalogue.py): import, start,
# memory, a mix of pages, searches, the mix while 10 price PATCHes a second go through (and how
# soon each shows), event-loop holds; beside another checkout with BENCH_CATALOGUE_ARGS, e.g.
# "--baseline ../wt-baseline --products 20000 --duration 3 --backends sqlite". Needs wrk.
bench-catalogue: install ## A large catalogue that changes while it is read (needs wrk)
	$(BIN)/python bench/catalogue.py $(BENCH_CATALOGUE_ARGS)

# `make help`: every target above with the `##` line that says what it does.
help: ## List the targets, one line each
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-20s %s\n", $$1, $$2}' $(MAKEFILE_LIST)
