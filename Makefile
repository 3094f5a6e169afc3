# seatlease: the two commands of the README are `make run` and `make test`.
# Both create .venv and install what they need; the test suite starts its own
# redis-server, Redis Cluster, PostgreSQL database and Pub/Sub emulator.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install run test lint format bench clean lock

$(STAMP): pyproject.toml shared/client/pyproject.toml requirements-terraform.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e shared/client -e '.[dev,charts,demo]' -r requirements-terraform.txt
	touch $(STAMP)

install: $(STAMP)

run: install
	$(VENV)/bin/seatlease local

lint: install
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
# The vendor client promises Python 3.9: any newer syntax or stdlib API fails here.
	$(VENV)/bin/vermin --no-tips --violations -t=3.9- shared/client/seatlease_client
# The runtime's layers (.importlinter): domain code never imports the HTTP boundary, SQL
# stays in the store, the runtime never imports the CLI or the vendor client.
	$(VENV)/bin/lint-imports

# One run. (The local stack's outage test once ran in a process of its own, having lost
# events after the rest of the suite: the Pub/Sub emulator's backoff loses pushes under
# CPU load. The local stack no longer gives the emulator a retry policy: see
# seatlease_cli.localstack.AuditDelivery and docs/operations.md.)
test: lint
	$(PY) -m pytest -q

format: install
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .

# requirements-functions.txt: the functions' dependencies (pyproject.toml
# [project].dependencies, extras not locked) pinned with hashes; it becomes each archive's
# requirements.txt, and tools/build_function_source.py refuses a missing or stale lock.
# Resolved from PyPI alone: local pip config (find-links, extra indexes, constraints)
# must not leak into the lock. pip-compile evaluates markers for this venv's Python; the
# archive tests check every pin has a wheel for the runtime (python312, terraform).
lock: install
	env -u PIP_FIND_LINKS -u PIP_EXTRA_INDEX_URL -u PIP_INDEX_URL -u PIP_CONSTRAINT \
	  PIP_CONFIG_FILE=/dev/null CUSTOM_COMPILE_COMMAND="make lock" \
	  $(VENV)/bin/pip-compile --quiet --strip-extras --generate-hashes --allow-unsafe \
	  --index-url https://pypi.org/simple --no-emit-index-url --no-emit-find-links \
	  --output-file requirements-functions.txt pyproject.toml
	$(PY) tools/build_function_source.py --stamp-lock

bench: install
	$(PY) bench/redis_cost.py
	$(PY) bench/http_acquire.py
	$(PY) bench/rate_limit_cost.py
	$(PY) bench/redis_memory.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .seatlease
