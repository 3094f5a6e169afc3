# seatlease: the two commands of the README are `make run` and `make test`.
# Both create .venv and install what they need; the test suite starts its own
# redis-server, Redis Cluster, PostgreSQL database and Pub/Sub emulator.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install run test lint format bench clean

$(STAMP): pyproject.toml requirements-terraform.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]' -r requirements-terraform.txt
	touch $(STAMP)

install: $(STAMP)

run: install
	$(VENV)/bin/seatlease local

lint: install
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

test: lint
	$(PY) -m pytest -q

format: install
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .

bench: install
	$(PY) bench/redis_cost.py
	$(PY) bench/http_acquire.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .seatlease
