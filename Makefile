# Two commands do all set-up on a fresh machine (Python 3.11 and Java 17 present):
#   make test   creates .venv, installs tablesvc with its test extras, runs the tests
#   make demo   same set-up, then runs the demo on a generated/embedded sample
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
BENCH_STAMP := $(VENV)/.bench-installed-stamp
PYTEST_ARGS ?=

.PHONY: test demo bench bench-io soak slow check-java clean

$(STAMP): setup.py
	@$(MAKE) --no-print-directory check-java
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	@$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	@touch $(STAMP)

check-java:
	@v=$$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1); \
	if [ -z "$$v" ] || [ "$$v" -lt 17 ]; then echo "tablesvc needs Java 17 or newer on PATH (found: $${v:-none})"; exit 1; fi

# ruff first (ruff.toml: a small rule set), then the tests
test: $(STAMP)
	$(PY) -m ruff check tablesvc timeline tests
	$(PY) -m pytest $(PYTEST_ARGS)

demo: $(STAMP)
	$(PY) -m tablesvc.demo

# The benchmark baselines (deltalake) come with the "bench" extra, installed once on top of the
# test set-up; `make test` never installs them.
$(BENCH_STAMP): $(STAMP) setup.py
	@$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test,bench]'
	@touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(PY) -m pytest -m benchmark tests/benchmarks $(PYTEST_ARGS)

bench-io: $(BENCH_STAMP)
	$(PY) tests/benchmarks/bench_write_read.py

# The soak run (issue #7): a writer and two runners on one table for a few minutes with crashes,
# stalls and takeovers, then the invariants (tests/soak.py; TABLESVC_SOAK_MINUTES, TABLESVC_SOAK_SEED).
soak: $(STAMP)
	$(PY) -m pytest -m slow tests/test_soak.py $(PYTEST_ARGS)

# Every slow test: the soak and the long model-based run (20 seeds x both table versions x 400
# steps; TABLESVC_MODEL_SEEDS, TABLESVC_MODEL_STEPS).
slow: $(STAMP)
	$(PY) -m pytest -m slow tests $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
