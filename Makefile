# kemu: `make serve` and `make test` each set up .venv on a fresh machine, then run.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PORT ?= 9092
BROKERS ?= 3
ARGS ?=

.PHONY: install serve test test-unit test-integration test-java lint bench java clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test,dev]'
	touch $(STAMP)

install: $(STAMP)

serve: $(STAMP)
	$(BIN)/kemu serve --brokers $(BROKERS) --port $(PORT) $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check kemu tests
	$(BIN)/mypy

java: 
	cd tests/java && mvn -q -B -DskipTests package dependency:copy-dependencies -DoutputDirectory=target/lib

test: $(STAMP) java
	$(MAKE) lint
	$(BIN)/pytest -q -p no:cacheprovider tests

test-unit: $(STAMP)
	$(BIN)/pytest -q tests/unit

test-integration: $(STAMP)
	$(BIN)/pytest -q tests/integration

bench: $(STAMP)
	$(BIN)/python -m bench.run $(ARGS)

clean:
	rm -rf $(VENV) tests/java/target .pytest_cache .mypy_cache
