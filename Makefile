# Two commands do all the set-up on a fresh machine: `make test` and `make app`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test app bench install clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet -e ".[app,dev,notebooks]"
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest -q

app: $(STAMP)
	$(BIN)/streamlit run app.py

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_memory.py

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
