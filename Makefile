# Quick start: `make demo` and `make test` each work alone on a fresh machine.
# Each installs what it needs into .venv: the demo only the [demo] extra, the tests the rest.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DEMO_STAMP := $(VENV)/.installed-demo
TEST_STAMP := $(VENV)/.installed-test

.PHONY: demo test test-slow test-all test-opencv5 lint doctest bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(DEMO_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[demo]'
	touch $@

$(TEST_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[test,dev,demo,plot,ray,gpu,view,parquet]'
	touch $@ $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(BIN)/hyperframes demo

# lint, types and the docstring examples first (seconds), then the suite, in a network
# namespace of its own with loopback only (tests/loopback.py): the local Ray clusters bind
# 127.0.0.1 there, and no test can reach any other address. HF_REQUIRE_RAY makes the Ray
# tests fail instead of skipping when they cannot run.
# The default run's tests go to a process a core (4 at most: tests/conftest.py), each
# taking the next test as it finishes one; the long trials below run one at a time, as
# some of them time what they run.
SUITE := HF_REQUIRE_RAY=1 $(BIN)/python tests/loopback.py $(BIN)/python -m pytest -q
SIDE_BY_SIDE := -n auto --dist worksteal

test: $(TEST_STAMP) lint doctest
	$(SUITE) $(SIDE_BY_SIDE) -m "not slow" tests

# The long trials (every signal at random moments, a full disk, a two-hour input, the
# viewer's latency): about 6 minutes more; CI runs them after `make test`.
test-slow: $(TEST_STAMP)
	$(SUITE) -m slow tests

test-all: test test-slow

# The other OpenCV major: the project depends on 4.x (the classic detectors); 5.x goes in
# a folder of its own, first on PYTHONPATH, the environment otherwise the same. A short
# job: the tests of the paths of ours that call OpenCV (CI runs it after `make test`).
OPENCV5 := .opencv5
OPENCV_TESTS := tests/unit tests/integration/test_video_io.py \
	tests/integration/test_yuv_layout.py tests/integration/test_store_planes.py \
	tests/integration/test_image_io.py tests/integration/test_video_colour.py \
	tests/integration/test_store_access.py tests/integration/test_analyze.py

$(OPENCV5)/.installed: | $(TEST_STAMP)
	$(BIN)/pip install --quiet --no-deps --target $(OPENCV5) 'opencv-python-headless>=5,<6'
	touch $@

test-opencv5: $(TEST_STAMP) $(OPENCV5)/.installed
	HF_EXPECT_OPENCV=5 PYTHONPATH=$(OPENCV5) $(SUITE) $(SIDE_BY_SIDE) -m "not slow" $(OPENCV_TESTS)

lint: $(TEST_STAMP)
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy

doctest: $(TEST_STAMP)
	$(BIN)/python -m pytest -q --doctest-modules src/hyperframes

bench: $(TEST_STAMP)
	$(BIN)/python benchmarks/engine.py

clean:
	rm -rf $(VENV) $(OPENCV5) build dist src/*.egg-info
