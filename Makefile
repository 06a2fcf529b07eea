# Two commands do all the set-up on a fresh machine: `make test` and `make app`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test test-fast lint app notebooks bench bench-peers install clean chromium screenshot

# The first `make app` (or `make test`) installs for a few minutes: each step says what it is doing first.
$(BIN)/python:
	@echo "vxmem: creating the virtual environment $(VENV) with $(PY)..."
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# What pip installs from: pyproject.toml's [project] table (name, dependencies, extras), as a hash in
# $(DEPS), rewritten only when it changes. An edit of the tools' settings (pytest, ruff, mypy) in the
# same file then leaves the install as it is instead of re-running pip (about 25 s that change nothing).
DEPS := $(VENV)/.project-hash
$(DEPS): pyproject.toml $(BIN)/python
	@$(BIN)/python -c "import hashlib, json, pathlib, tomllib; \
	new = hashlib.sha256(json.dumps(tomllib.load(open('pyproject.toml', 'rb'))['project'], sort_keys=True).encode()).hexdigest(); \
	p = pathlib.Path('$(DEPS)'); p.exists() and p.read_text() == new or p.write_text(new)"

$(STAMP): $(DEPS)
	@echo "vxmem: installing vxmem and its extras into $(VENV) (the dashboard, models, notebooks, tests);"
	@echo "vxmem: the first time takes a few minutes (pip lists what it fetches); later runs skip this..."
	$(BIN)/pip install -e ".[workbench,app,dev,notebooks,semantic,langchain,llm,server,compare,postgres]"
	touch $(STAMP)
	@echo "vxmem: installed."

install: $(STAMP)

# Lint and types: a suite that passes on code ruff or mypy refuses is not green (`make test` runs this
# beside the suite).
lint: $(STAMP)
	$(BIN)/ruff check vxmem tests benchmarks app.py app_pages docs/screenshot.py
	$(BIN)/mypy
	$(BIN)/python tests/house.py

# The whole suite on two workers. --dist worksteal: a worker that runs dry takes tests from the other,
# so neither idles behind one long file (measured: 275 s of pytest against 336 s with --dist loadfile,
# which keeps a file's module fixtures on one worker but ends on one busy worker). CI runs this target.
# PYTHONDONTWRITEBYTECODE emptied: bytecode caches are written during the run even where the environment
# says not to (container images often do). Otherwise each worker rewrites every test module's asserts
# again (its collection takes 11.7 s of CPU, 4.9 s with the caches) and each of the suite's child
# interpreters compiles the vxmem modules it imports (a third of a second for a server's).
# Lint runs beside the suite, not before it: mypy, most of lint, holds one core for some 13 s (cold),
# which the suite's workers then share instead of waiting. Its output is printed when the suite ends,
# and `make test` fails if either fails.
PYTEST_WORKERS ?= 2
LINT_LOG := $(VENV)/lint.log
test: $(STAMP) chromium
	@$(MAKE) --no-print-directory -f $(firstword $(MAKEFILE_LIST)) lint > $(LINT_LOG) 2>&1 & lint=$$!; \
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist worksteal --durations=15; \
	tests=$$?; wait $$lint; linted=$$?; echo "---- make lint:"; cat $(LINT_LOG); \
	if [ $$linted -ne 0 ]; then echo "make test: lint failed (above)"; fi; \
	test $$tests -eq 0 && test $$linted -eq 0

# The quick local loop: every test but the slow ones (crash trials, browser, notebooks, CLI examples).
# Not a substitute for `make test`, which runs them all. `-m "not model and not subprocess"` narrows further.
test-fast: $(STAMP)
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist worksteal -m "not slow"

# Serves the dashboard headless (.streamlit/config.toml) and says where: open the URL in a browser.
APP_PORT ?= 8501
app: $(STAMP)
	@echo "vxmem workbench: open http://localhost:$(APP_PORT) in a browser (Ctrl-C stops it)"
	$(BIN)/streamlit run app.py --server.port $(APP_PORT)

# JupyterLab on the project's venv (the notebooks extra installs it), opened on notebooks/. --allow-root: CI
# and containers run as root, where JupyterLab refuses to start without it (it changes nothing for other users).
NOTEBOOKS_PORT ?= 8888
notebooks: $(STAMP)
	$(BIN)/jupyter lab --notebook-dir=notebooks --ServerApp.open_browser=False --ServerApp.port=$(NOTEBOOKS_PORT) \
		--allow-root

# The browser test drives Debian's Chromium through Playwright (never a browser download).
# Where it cannot be installed (not root, no apt) the test skips and says why; in CI it fails.
chromium:
	@command -v chromium >/dev/null || (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium) \
		|| echo "chromium could not be installed: tests/test_browser.py will skip"

screenshot: $(STAMP) chromium
	$(BIN)/python docs/screenshot.py

bench: $(STAMP)
	$(BIN)/python -m benchmarks.bench_memory

# vxmem against its peers. The peers live in a venv of their own, never in .venv and never
# in `make test`: `make bench-peers`, or `make bench-peers PEERS_ARGS="--sizes 1000,10000 --queries 100"`.
PEERS_VENV := .venv-peers
PEERS_STAMP := $(PEERS_VENV)/.installed
PEERS := vectrixdb==2.2.0 chromadb==1.5.9 lancedb==0.40.0 langchain-classic==1.0.8 langchain-community==0.4.2 \
	faiss-cpu==1.15.1 usearch==2.26.6
PEERS_ARGS ?= --sizes 1000,10000,100000

$(PEERS_STAMP): pyproject.toml
	$(PY) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/pip install --quiet --upgrade pip
	$(PEERS_VENV)/bin/pip install --quiet -e . $(PEERS)
	touch $(PEERS_STAMP)

bench-peers: $(PEERS_STAMP)
	$(PEERS_VENV)/bin/python -m benchmarks.bench_peers $(PEERS_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
