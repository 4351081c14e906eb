# hivegate: `make serve` and `make test` are the whole set-up on a fresh machine
# (Python 3.11+, make, node/npm). Everything else is installed by these targets.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

PY_DIRS := $(wildcard src tests examples bench)

.PHONY: install tools serve test lint format check-types pytest conformance bench clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@rm -f $(VENV)/.installed-* && touch $(STAMP)

install: $(STAMP)

tools:
	bash scripts/install-tools.sh

# `make serve PORT=9000 HOST=0.0.0.0`: PORT may also come from the environment; HOST only from the
# command line (zsh sets HOST to the machine's name). Without them: [server] of examples/hivegate.toml.
SERVE_FLAGS = $(if $(filter command line,$(origin HOST)),--host $(HOST)) $(if $(PORT),--port $(PORT))

serve: install
	$(BIN)/hivegate users ensure-demo --config examples/hivegate.toml
	$(BIN)/hivegate serve --config examples/hivegate.toml --dev $(SERVE_FLAGS)

lint: install
	$(BIN)/ruff format --check $(PY_DIRS)
	$(BIN)/ruff check $(PY_DIRS)

format: install
	$(BIN)/ruff format $(PY_DIRS)
	$(BIN)/ruff check --fix $(PY_DIRS)

check-types: install
	$(BIN)/pyright --pythonpath $(BIN)/python

pytest: install tools
	$(BIN)/python -m pytest

test: lint check-types pytest

conformance: install tools
	$(BIN)/python -m pytest tests/e2e/test_conformance.py -v

bench: install
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) .tools .hivegate .pytest_cache .ruff_cache
