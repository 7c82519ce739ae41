# Two entry points a fresh clone needs: `make demo` (the main job) and `make test`. Both set up .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
MINUTES ?= 10

.PHONY: demo test lint setup

$(STAMP): pyproject.toml constraints-cpu.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints-cpu.txt -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/aiayn demo --minutes $(MINUTES)

lint: $(STAMP)
	$(BIN)/ruff check src tests
	$(BIN)/lint-imports

test: lint
	$(BIN)/pytest
