# seatlease: the two commands of the README are `make run` and `make test`.
# Both create .venv and install what they need; the test suite starts its own
# redis-server, Redis Cluster, PostgreSQL database and Pub/Sub emulator.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
RUN_STAMP := $(VENV)/.installed-run

.PHONY: install run test lint format bench clean lock browser

# What `make run` needs: the runtime, the CLI, the vendor client (seatlease demo) and the
# charts (report usage --chart): about half the full .venv (358 MB, not 669 MB).
$(RUN_STAMP): pyproject.toml shared/client/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e shared/client -e '.[charts,demo]'
	touch $(RUN_STAMP)

# Everything else: the tests' and linters' tools (dev) and the Terraform checks.
$(STAMP): pyproject.toml shared/client/pyproject.toml requirements-terraform.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e shared/client -e '.[dev,charts,demo]' -r requirements-terraform.txt
	touch $(STAMP) $(RUN_STAMP)

install: $(STAMP)

# `make run PORT=8091` when 8080 is taken (the printed URLs, curl and portal link follow).
run: $(RUN_STAMP)
	$(VENV)/bin/seatlease local$(if $(PORT), --port $(PORT))

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
test: lint browser
	$(PY) -m pytest -q --durations=25

# The portal's page is tested in a real browser (tests/test_portal_browser.py): Debian's
# chromium and chromium-driver, installed here when missing (apt-get, as root). Where they
# cannot be installed (not root, no package mirror) this says so and the browser test
# skips with the same message outside CI (with CI set it fails: CI must run it).
browser:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "installing chromium and chromium-driver for the portal's browser test"; \
	  { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
	      -o DPkg::Lock::Timeout=600 chromium chromium-driver >/dev/null; } || \
	  echo "could not install chromium/chromium-driver: the portal's browser test will skip"; \
	else \
	  echo "chromium/chromium-driver missing (install them: apt-get install chromium chromium-driver);" \
	       "the portal's browser test will skip"; \
	fi

format: install
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .

# requirements-functions.txt: the functions' dependencies (pyproject.toml
# [project].dependencies, extras not locked) pinned with hashes; it becomes the reaper's
# requirements.txt. requirements-functions-nopubsub.txt: the same without
# google-cloud-pubsub (which brings the OpenTelemetry SDK, and redis-py imports that SDK
# whenever it is installed), pinned at the first lock's versions (-c); every function that
# does not publish gets it. tools/build_function_source.py chooses the lock per function,
# writes the second lock's input (--lock-input) and refuses a missing or stale lock.
# Resolved from the public index alone: local pip config (find-links, extra indexes,
# constraints) must not leak into the lock, and with it cleared pip's own default index
# is the public one, so no index host is named here either. pip-compile evaluates
# markers for this venv's Python; the archive tests check every pin has a wheel for the
# runtime (python312, terraform).
PIP_COMPILE := env -u PIP_FIND_LINKS -u PIP_EXTRA_INDEX_URL -u PIP_INDEX_URL -u PIP_CONSTRAINT \
	  PIP_CONFIG_FILE=/dev/null CUSTOM_COMPILE_COMMAND="make lock" \
	  $(VENV)/bin/pip-compile --quiet --strip-extras --generate-hashes --allow-unsafe \
	  --no-emit-index-url --no-emit-find-links
lock: install
	$(PIP_COMPILE) --output-file requirements-functions.txt pyproject.toml
	$(PY) tools/build_function_source.py --lock-input requirements-functions-nopubsub.txt | \
	  $(PIP_COMPILE) -c requirements-functions.txt \
	  --output-file requirements-functions-nopubsub.txt -
	$(PY) tools/build_function_source.py --stamp-lock

bench: install
	$(PY) bench/redis_cost.py
	$(PY) bench/http_acquire.py
	$(PY) bench/cold_import.py
	$(PY) bench/rate_limit_cost.py
	$(PY) bench/redis_memory.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .seatlease

# The clients (shared/clients/{node,go,c,java}): `make test` builds and tests each against
# the functions the test suite serves (tests/test_client_{node,go,c,java}.py, and
# tests/test_client_holds.py for every client's ./hold), `make lint` type-checks and vets
# them and builds the C library and the Java client with warnings as errors. Their tools
# are installed here when missing, from Debian with apt-get, as root (CI): Go (golang-go,
# 1.19+), Node.js (nodejs, npm), the C toolchain and libraries (cmake, a C/C++ compiler,
# pkg-config, libcurl4-openssl-dev, libsodium-dev, libcjson-dev, valgrind), and Java
# (openjdk-17-jdk-headless, libgoogle-gson-java, and for `mvn -o package` Maven with the
# plugins and JUnit 5 of Debian's /usr/share/maven-repo: maven, junit5,
# libmaven-{compiler,jar,resources,install}-plugin-java, libsurefire-java); the Node package's dev dependencies
# (typescript, @types/node) by `npm ci` from its package-lock.json. Go needs no modules;
# the C and Java clients need nothing beyond these packages.
NODE_CLIENT := shared/clients/node
GO_CLIENT := shared/clients/go
C_CLIENT := shared/clients/c
JAVA_CLIENT := shared/clients/java
.PHONY: clients clients-tools clients-lint client-vectors
test: clients
lint: clients-lint

clients-tools:
	@missing=""; command -v go >/dev/null || missing="golang-go"; \
	command -v node >/dev/null && command -v npm >/dev/null || missing="$$missing nodejs npm"; \
	command -v cmake >/dev/null || missing="$$missing cmake"; \
	command -v cc >/dev/null && command -v c++ >/dev/null || missing="$$missing gcc g++"; \
	command -v pkg-config >/dev/null || missing="$$missing pkg-config"; \
	command -v valgrind >/dev/null || missing="$$missing valgrind"; \
	for pair in libcurl:libcurl4-openssl-dev libsodium:libsodium-dev libcjson:libcjson-dev; do \
	  pkg-config --exists "$${pair%%:*}" 2>/dev/null || missing="$$missing $${pair#*:}"; \
	done; \
	command -v javac >/dev/null || missing="$$missing openjdk-17-jdk-headless"; \
	[ -f /usr/share/java/gson.jar ] || missing="$$missing libgoogle-gson-java"; \
	command -v mvn >/dev/null || missing="$$missing maven"; \
	for pair in org/junit/jupiter/junit-jupiter-engine:junit5 \
	    org/apache/maven/plugins/maven-compiler-plugin/3.10.1:libmaven-compiler-plugin-java \
	    org/apache/maven/plugins/maven-surefire-plugin/2.22.3:libsurefire-java \
	    org/apache/maven/plugins/maven-jar-plugin/3.3.0:libmaven-jar-plugin-java \
	    org/apache/maven/plugins/maven-resources-plugin/3.3.0:libmaven-resources-plugin-java \
	    org/apache/maven/plugins/maven-install-plugin/3.1.0:libmaven-install-plugin-java; do \
	  [ -d "/usr/share/maven-repo/$${pair%%:*}" ] || missing="$$missing $${pair#*:}"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" != 0 ]; then echo "install$$missing (apt-get, as root): the clients' tests need them" >&2; exit 1; fi; \
	  echo "apt-get install$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    -o DPkg::Lock::Timeout=600 $$missing >/dev/null; \
	fi

$(NODE_CLIENT)/node_modules/.package-lock.json: $(NODE_CLIENT)/package-lock.json | clients-tools
	cd $(NODE_CLIENT) && npm ci --no-audit --no-fund

clients: clients-tools $(NODE_CLIENT)/node_modules/.package-lock.json

clients-lint: clients
	cd $(NODE_CLIENT) && npx --no-install tsc -p tsconfig.json --noEmit
	cd $(GO_CLIENT) && GOFLAGS=-mod=mod GOPROXY=off go vet ./...
	@unformatted="$$(cd $(GO_CLIENT) && gofmt -l .)"; \
	if [ -n "$$unformatted" ]; then echo "gofmt -l: $$unformatted" >&2; exit 1; fi
# libseatlease, its tests and examples with -Wall -Wextra -Werror (C11, C++17); the Java
# client, tests and example with javac -Xlint:all -Werror.
	cmake -S $(C_CLIENT) -B $(C_CLIENT)/build-lint -DSEATLEASE_WERROR=ON >/dev/null
	cmake --build $(C_CLIENT)/build-lint -j2 >/dev/null
	$(JAVA_CLIENT)/build.sh >/dev/null

# The token test vectors every client runs (shared/clients/testdata/vectors.json), written
# from the server's signing code.
client-vectors: install
	$(PY) tools/make_client_vectors.py
	# a copy of the Java folder alone builds and tests offline (mvn -o package)
	cp shared/clients/testdata/vectors.json $(JAVA_CLIENT)/src/test/resources/vectors.json
