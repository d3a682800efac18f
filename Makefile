# Two commands do all set-up on a fresh machine (Python 3.11 and Java 17 present):
#   make test   creates .venv, installs tablesvc with its test extras, runs the tests
#   make demo   same set-up, then runs the demo on a generated/embedded sample
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
BENCH_STAMP := $(VENV)/.bench-installed-stamp
PYTEST_ARGS ?=
# make test runs the suite in this many pytest-xdist workers, each test file whole in one worker
# (its module fixtures and its order kept); 0 runs it in one process
TEST_WORKERS ?= 2

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

# Azurite (Azure's blob emulator, pinned) for the az:// tests (tests/azure_server.py), installed once with
# npm into .cache/azurite.  Without npm, one line and the Azure tests skip; a failed install fails them.
AZURITE_VERSION := 3.35.0
AZURITE_STAMP   := .cache/azurite/.installed-$(AZURITE_VERSION)

$(AZURITE_STAMP):
	@if ! command -v npm >/dev/null; then echo "make test: npm not found: Azurite is not installed, the Azure (az://) tests skip"; \
	elif mkdir -p .cache/azurite && npm install --prefix .cache/azurite --no-audit --no-fund --loglevel=error \
	       azurite@$(AZURITE_VERSION) >.cache/azurite/npm.log 2>&1; then touch $@; \
	else echo "make test: npm install azurite@$(AZURITE_VERSION) failed (.cache/azurite/npm.log): the Azure (az://) tests will fail"; fi

# ruff first (ruff.toml: a small rule set), then the tests
test: $(STAMP) $(AZURITE_STAMP)
	$(PY) -m ruff check tablesvc timeline tests
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

demo: $(STAMP)
	$(PY) -m tablesvc.demo

# The benchmark baselines (deltalake) come with the "bench" extra, installed once on top of the
# test set-up; `make test` never installs them.
$(BENCH_STAMP): $(STAMP) setup.py
	@$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test,bench]'
	@touch $(BENCH_STAMP)

# The cases with Java Hudi as their baseline need the Java set-up: `make bench-java` runs them.
bench: $(BENCH_STAMP)
	$(PY) -m pytest -m "benchmark and not java_baseline" tests/benchmarks $(PYTEST_ARGS)

bench-io: $(BENCH_STAMP)
	$(PY) tests/benchmarks/bench_write_read.py

# The soak run (issue #7): a writer and two runners on one table for a few minutes with crashes,
# stalls and takeovers, then the invariants (tests/soak.py; TABLESVC_SOAK_MINUTES, TABLESVC_SOAK_SEED).
soak: $(STAMP)
	$(PY) -m pytest -m slow tests/crash_model/test_soak.py $(PYTEST_ARGS)

# Every slow test: the soak and the long model-based run (20 seeds x both table versions x 400
# steps; TABLESVC_MODEL_SEEDS, TABLESVC_MODEL_STEPS).
slow: $(STAMP)
	$(PY) -m pytest -m slow tests $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info

# ---- The Java tier (issue #26): Apache Hudi itself beside tablesvc; docs/interop.md -------------------
# `make interop` sets up, once, an environment of Apache Hudi's own (never a dependency of tablesvc;
# `make test` needs none of it): the newest Hudi Spark bundle that Maven Central resolves, copied into
# $(HUDI_CACHE), and $(HUDI_VENV) with the pyspark that bundle is built against.  $(HUDI_ENV) records
# what resolved (delete it to resolve again); then it runs tests/interop_java (marker interop_java).
HUDI_CACHE      ?= .cache/hudi
HUDI_VENV       ?= .venv-hudi
HUDI_ENV        := $(HUDI_CACHE)/bundle.env
HUDI_VENV_STAMP := $(HUDI_VENV)/.installed-stamp
# Newest first: bundle artifact : Hudi release : the pyspark of the Spark release that Hudi builds it against.
HUDI_BUNDLES := hudi-spark4.1-bundle_2.13:1.2.0:pyspark==4.1.1 \
                hudi-spark4.0-bundle_2.13:1.1.1:pyspark==4.0.1 \
                hudi-spark4.0-bundle_2.13:1.1.0:pyspark==4.0.1 \
                hudi-spark3.5-bundle_2.12:1.2.0:pyspark==3.5.5 \
                hudi-spark3.5-bundle_2.12:1.0.2:pyspark==3.5.5
# Table version 6 as Hudi 0.x writes it natively; used only when it runs on the chosen bundle's Spark.
HUDI_V6_BUNDLE := hudi-spark3.5-bundle_2.12:0.15.0
HUDI_MVN_COPY = mvn -B -q org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy -DoutputDirectory=$(HUDI_CACHE)

.PHONY: interop interop-clean bench-java

$(HUDI_ENV):
	@command -v mvn >/dev/null || { echo "make interop: Maven (mvn) is needed to fetch Apache Hudi's Spark bundle"; exit 1; }
	@mkdir -p $(HUDI_CACHE)
	@found=; for b in $(HUDI_BUNDLES); do \
	  artifact=$${b%%:*}; rest=$${b#*:}; version=$${rest%%:*}; pyspark=$${rest#*:}; \
	  if $(HUDI_MVN_COPY) -Dartifact=org.apache.hudi:$$artifact:$$version >>$(HUDI_CACHE)/mvn.log 2>&1; then found=1; break; fi; \
	  echo "interop: org.apache.hudi:$$artifact:$$version does not resolve, trying the next bundle"; \
	done; \
	if [ -z "$$found" ]; then echo "interop: no Apache Hudi Spark bundle resolved (see $(HUDI_CACHE)/mvn.log)"; exit 1; fi; \
	v6=$(HUDI_V6_BUNDLE); v6_artifact=$${v6%%:*}; v6_version=$${v6#*:}; v6_jar=; \
	if [ "$$v6_artifact" = "$$artifact" ]; then \
	  if $(HUDI_MVN_COPY) -Dartifact=org.apache.hudi:$(HUDI_V6_BUNDLE) >>$(HUDI_CACHE)/mvn.log 2>&1; then \
	    v6_jar=$(HUDI_CACHE)/$$v6_artifact-$$v6_version.jar; \
	  else echo "interop: org.apache.hudi:$(HUDI_V6_BUNDLE) does not resolve; table version 6 is written by $$version"; fi; \
	fi; \
	{ echo "# make interop: the Apache Hudi bundles Maven resolved (delete this file to resolve again)"; \
	  echo "TABLESVC_HUDI_JAR=$(HUDI_CACHE)/$$artifact-$$version.jar"; \
	  echo "TABLESVC_HUDI_VERSION=$$version"; \
	  echo "TABLESVC_HUDI_PYSPARK=$$pyspark"; \
	  echo "TABLESVC_HUDI_V6_JAR=$$v6_jar"; \
	  echo "TABLESVC_HUDI_V6_VERSION=$${v6_jar:+$$v6_version}"; } >$@.tmp && mv $@.tmp $@
	@echo "interop: Apache Hudi bundles:"; grep '^TABLESVC' $@

# The venv is remade when the bundle (and so the pyspark it needs) changes.
$(HUDI_VENV_STAMP): $(HUDI_ENV)
	@. ./$(HUDI_ENV); test -x $(HUDI_VENV)/bin/python || $(PYTHON) -m venv $(HUDI_VENV); \
	$(HUDI_VENV)/bin/python -m pip install --quiet --disable-pip-version-check "$$TABLESVC_HUDI_PYSPARK"
	@touch $@

# Java Hudi on S3 (issue #28): Hadoop's S3A connector for the Hadoop inside $(HUDI_VENV)'s pyspark, with its
# AWS SDK (tests/interop_java/s3a-jars.pom.xml), copied once into $(HUDI_CACHE)/s3a; $(HUDI_S3A_ENV) lists the
# jars (delete it to resolve again).  A failure is one line and leaves the file absent: the rest of the tier
# runs, and the S3 scenarios fail naming what is missing.
HUDI_S3A_ENV := $(HUDI_CACHE)/s3a.env

$(HUDI_S3A_ENV): $(HUDI_VENV_STAMP)
	@api=$$(ls $(HUDI_VENV)/lib/python*/site-packages/pyspark/jars/hadoop-client-api-*.jar 2>/dev/null | head -1); \
	hadoop=$${api##*/hadoop-client-api-}; hadoop=$${hadoop%.jar}; \
	if [ -z "$$api" ]; then echo "interop: no hadoop-client-api jar in $(HUDI_VENV)'s pyspark: Java Hudi gets no S3A connector"; exit 0; fi; \
	rm -rf $(HUDI_CACHE)/s3a; \
	if mvn -B -q -f tests/interop_java/s3a-jars.pom.xml org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies \
	     -Dhadoop.version=$$hadoop -DincludeScope=runtime -DoutputDirectory=$(CURDIR)/$(HUDI_CACHE)/s3a >>$(HUDI_CACHE)/mvn.log 2>&1; then \
	  { echo "# make interop: Hadoop's S3A connector for Java Hudi and its AWS SDK (delete this file to resolve again)"; \
	    echo "TABLESVC_HUDI_S3A_JARS=$$(ls $(HUDI_CACHE)/s3a/*.jar | paste -sd, -)"; } >$@.tmp && mv $@.tmp $@; \
	  echo "interop: S3A jars for Hadoop $$hadoop: $$(cd $(HUDI_CACHE)/s3a && ls *.jar | paste -sd' ' -)"; \
	else echo "interop: org.apache.hadoop:hadoop-aws:$$hadoop with its AWS SDK did not resolve (see $(HUDI_CACHE)/mvn.log): the S3 scenarios will fail"; fi

# Tests run with the project's .venv; the Java side runs in its own processes with $(HUDI_VENV)'s python.
interop: $(STAMP) $(HUDI_VENV_STAMP) $(HUDI_S3A_ENV)
	@set -a; . ./$(HUDI_ENV); if [ -f $(HUDI_S3A_ENV) ]; then . ./$(HUDI_S3A_ENV); fi; set +a; \
	TABLESVC_HUDI_PYTHON=$(CURDIR)/$(HUDI_VENV)/bin/python $(PY) -m pytest -m interop_java tests/interop_java $(PYTEST_ARGS)

interop-clean:
	rm -rf $(HUDI_VENV) $(HUDI_CACHE)

# The performance anchor (issue #26; docs/performance.md): the benchmark cases whose baseline is Java
# Hudi (marker java_baseline), set up as `make interop` sets up; their report goes to bench-out/java
# (TABLESVC_BENCH_OUT moves it).  10M rows: TABLESVC_BENCH_SCALE=5 make bench-java.
bench-java: $(BENCH_STAMP) $(HUDI_VENV_STAMP)
	@set -a; . ./$(HUDI_ENV); set +a; \
	TABLESVC_BENCH_OUT=$${TABLESVC_BENCH_OUT:-$(CURDIR)/bench-out/java} \
	TABLESVC_HUDI_PYTHON=$(CURDIR)/$(HUDI_VENV)/bin/python $(PY) -m pytest -m "benchmark and java_baseline" tests/benchmarks $(PYTEST_ARGS)
