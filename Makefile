# One command each: `make simulate` sets up a fresh machine and runs the offline simulated calls;
# `make test` runs the test suite. Both create .venv and install the package on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup simulate simulate-loopback test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP)

setup: $(STAMP)

simulate: $(STAMP)
	$(BIN)/pipecat-harness simulate

# The bundled scenarios with the bots' Deepgram, Gemini and ElevenLabs services against the loopback fakes, then
# with OpenAILLMService in Gemini's place; exits non-zero when any call is not as expected.
simulate-loopback: $(STAMP)
	$(BIN)/pipecat-harness simulate --services loopback --timeline none --traces traces/loopback
	$(BIN)/pipecat-harness simulate --services loopback-openai --timeline none --traces traces/loopback-openai

test: $(STAMP)
	$(BIN)/pytest -q

lint: $(STAMP)
	$(BIN)/ruff check pipecat_harness tests scripts bots
	$(BIN)/mypy

bench: $(STAMP)
	for script in scripts/bench_*.py; do $(BIN)/python $$script || exit 1; done

clean:
	rm -rf $(VENV) traces reports .pytest_cache .mypy_cache .ruff_cache
