# kemu: `make serve` and `make test` each set up .venv on a fresh machine, then run.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# `make serve` needs the runtime dependencies only; `make test` and the rest add the test and dev
# extras (STAMP). Editable: a .pth naming the checkout (pyproject's package-dir), no warnings.
RUNTIME_STAMP := $(VENV)/.installed-runtime
EDITABLE := -e
PORT ?= 9092
BROKERS ?= 3
ARGS ?=

.PHONY: install serve check test test-unit test-client test-process test-parity test-integration \
	test-java test-deep lint bench eos-crash java clean conformance-franz \
	conformance-kafka-tools test-streams conformance-diff bench-faults example-spark example-flink \
	bench-connections soak bench-first-record sim sim-long sim-report bytecode

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q $(EDITABLE) '.[test,dev]'
	touch $(STAMP) $(RUNTIME_STAMP)

$(RUNTIME_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check $(EDITABLE) .
	touch $(RUNTIME_STAMP)

install: $(STAMP)

# The README's quick start runs against this: the control API on its usual port (kemu ctl's
# default) and the KIP-1289 preview on.
CONTROL_PORT ?= 9192
serve: $(RUNTIME_STAMP)
	$(BIN)/kemu serve --brokers $(BROKERS) --port $(PORT) --control-port $(CONTROL_PORT) --kip1289 $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check kemu tests
	$(BIN)/ruff format --check kemu tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports

# The Java probes (tests/java): offline first, since after one online build ~/.m2 has it all;
# target/lib is emptied so that a changed dependency leaves no stale jar on the classpath.
JAVA_BUILD := mvn -q -B -DskipTests package dependency:copy-dependencies -DoutputDirectory=target/lib
java:
	cd tests/java && rm -rf target/lib && ($(JAVA_BUILD) -o >/dev/null 2>&1 || $(JAVA_BUILD))

test-java: $(STAMP) java
	$(PYTEST) -q -m java tests/integration

# The tiers (docs/testing.md). `make check` is the edit loop: lint and the unit tier without its
# slow property tests. `make test` runs every tier on TEST_WORKERS workers (most tests wait on
# clients and timers rather than compute, so more workers than cores pays), by file, since module
# fixtures start a kemu or a Kafka; it prints its skips with reasons and the 25 slowest tests.
PYTEST := $(BIN)/pytest -p no:cacheprovider
TEST_WORKERS ?= 8
# by file, in collection order (tests/conftest.py puts the long modules first; xdist would
# otherwise reorder files by their number of tests)
PARALLEL := -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder
check: $(STAMP)
	$(MAKE) lint
	$(PYTEST) -q -n 2 -m "unit and not slow" tests/unit

# Bytecode of the checkout's own modules before the process tiers: an editable install has none,
# and where PYTHONDONTWRITEBYTECODE is set (some shells and CI images set it) every process a test
# starts (kemu serve, kemu ctl, a page's pytest block) would compile all it imports again.
bytecode: $(STAMP)
	$(BIN)/python -m compileall -q kemu tests bench

test: $(STAMP) java bytecode
	$(MAKE) lint
	$(PYTEST) -q $(PARALLEL) -rs --durations=25 tests

test-unit: $(STAMP)
	$(PYTEST) -q -n 2 -m unit tests

# the unit tier's property tests with many more generated examples (hypothesis's "deep" profile,
# tests/conftest.py): after changing a codec; minutes
test-deep: $(STAMP)
	$(PYTEST) -q -n 2 -m unit --hypothesis-profile=deep tests/unit

test-client: $(STAMP) bytecode
	$(PYTEST) -q $(PARALLEL) -rs -m client tests

test-process: $(STAMP) bytecode
	$(PYTEST) -q $(PARALLEL) -rs -m process tests

test-parity: $(STAMP) java bytecode
	$(BIN)/python -c "from bench.java import ensure_jars; ensure_jars()"
	$(PYTEST) -q $(PARALLEL) -rs -m parity tests

# Kafka Streams 4.4.0 apps with group.protocol=streams (KIP-1071) against kemu; minutes, so not
# part of `make test` (tests/integration/groups/test_streams_java.py; figures in docs/conformance.md).
test-streams: $(STAMP) java
	$(PYTEST) -q --heavy tests/integration/groups/test_streams_java.py \
		tests/integration/groups/test_streams_assignor_kafka.py

test-integration: $(STAMP) bytecode
	$(PYTEST) -q $(PARALLEL) tests/integration

bench: $(STAMP)
	$(BIN)/python -m bench.run $(ARGS)

# Issue 20: how long a test waits for its first record, and for a group to settle after a member
# joins or leaves, with Java and confluent-kafka clients of every group type (and a transactional
# round trip), on Kafka 4.4.0 (code defaults), kemu --timing kafka and kemu --timing fast side by
# side; appends the table to docs/benchmarks.md. E.g. ARGS="--rows share --repeat 5". Also
# `make bench ARGS="--phases first-record"`.
bench-first-record: $(STAMP) java
	$(BIN)/python -m bench.first_record $(ARGS)

# What fault rules (the control API's, docs/control.md) cost the request path: no rules, 1000 on
# another API, 1000 non-matching on the same API.
bench-faults: $(STAMP)
	$(BIN)/python -m bench.fault_rules $(ARGS)

# 1,000 and 10,000 client connections to one kemu (ARGS="--server kafka" for Kafka 4.4.0), and the
# 30-minute soak with SIGKILLs (docs/reliability.md); make test runs the soak's 1-minute mode.
bench-connections: $(STAMP)
	$(BIN)/python -m bench.connections $(ARGS)

soak: $(STAMP)
	$(BIN)/python -m bench.soak $(ARGS)

# The exactly-once crash harness (docs/eos-crash.md): share group -> transform -> transactional
# produce while kemu and the workers are SIGKILLed; e.g. make eos-crash ARGS="--seed 1". Not part
# of `make test`, where the deterministic simulation's EOS seeds stand for it (docs/eos-crash.md).
eos-crash: $(STAMP)
	$(BIN)/python -m bench.eos_crash $(ARGS)

# The deterministic simulation (docs/reliability.md): kemu, its clients and its crashes on virtual
# time in one process; every failure prints the seed that replays it. SEEDS is a count N (seeds
# 1-N, as in `make sim SEEDS=1000 STEPS=10000`) or a range A-B; SEED=N replays that one seed.
# JOBS worker processes run them, their output printed in seed order. ARGS adds opt-in roles:
# --pipelined, --copier, --copier-listener, --churn, --undo-deletions, --clean-stops
# (python -m kemu.testing.sim --help).
sim: SEEDS ?= 1-10
sim: STEPS ?= 300
JOBS ?= 2
SEED ?=
sim_seeds = $(if $(SEED),$(SEED),$(if $(findstring -,$(SEEDS)),$(SEEDS),1-$(SEEDS)))
sim: $(STAMP)
	$(BIN)/python -m kemu.testing.sim --seed $(sim_seeds) --steps $(STEPS) --jobs $(JOBS) $(ARGS)

# The long run (1,000 seeds x 10,000 steps, days of CPU) in slices: each `make sim-long` starts
# no seed after BUDGET minutes, appends a line per finished seed to JOURNAL (with a fingerprint
# of kemu's sources and the options) and skips the seeds the journal already holds under the same
# fingerprint. `make sim-report` sums the journal and says what is left (docs/reliability.md).
sim-long sim-report: SEEDS ?= 1-1000
sim-long sim-report: STEPS ?= 10000
BUDGET ?= 60
JOURNAL ?= sim-journal.jsonl
sim-long: $(STAMP)
	$(BIN)/python -m kemu.testing.sim --seed $(sim_seeds) --steps $(STEPS) --jobs $(JOBS) \
		--journal $(JOURNAL) --budget-minutes $(BUDGET) $(ARGS)

sim-report: $(STAMP)
	$(BIN)/python -m kemu.testing.sim --report $(JOURNAL) --target-seeds $(sim_seeds) \
		--target-steps $(STEPS) --jobs $(JOBS) $(ARGS)

# franz-go's own kgo tests (share groups by default) against a kemu the runner starts and stops.
# Needs Go >= 1.25 and the Go module proxy (the module zip carries the _test.go files); not part
# of `make test`. Results and root causes: docs/conformance.md.
FRANZ_GO_VERSION ?= v1.21.5
FRANZ_RUN ?= TestShareGroup
conformance-franz: $(STAMP)
	$(BIN)/python -m conformance.franz --version $(FRANZ_GO_VERSION) --run '$(FRANZ_RUN)' $(ARGS)

# Kafka 4.4.0's own CLI tools (kafka-topics, kafka-configs, kafka-log-dirs, ...) against kemu and a
# real Kafka 4.4.0 side by side, one check per invocation; needs java and javac, and fetches the
# jars as `make bench` does. Not part of `make test`. Results: docs/conformance.md.
conformance-kafka-tools: $(STAMP)
	$(BIN)/python -m conformance.kafka_tools $(ARGS)

# Wire-level differential run: the same client scenarios through a recording proxy in front of a
# real Kafka 4.4.0 and of kemu, every request/response pair compared after normalisation; a
# per-API table, and each difference with both responses in conformance-diff-report/. Needs java
# and the jars `make bench` fetches (and `make java` for the Java scenarios). Not part of
# `make test`. Results: docs/conformance.md.
conformance-diff: $(STAMP)
	$(BIN)/python -m conformance.diff $(ARGS)

# PySpark Structured Streaming (Kafka source -> transform -> Kafka sink, checkpointed) against kemu,
# the driver SIGKILLed and restarted; pyspark in its own venv. Not in `make test` (examples/README.md).
SPARK_VENV := examples/spark/.venv
$(SPARK_VENV)/.installed: examples/spark/requirements.txt
	test -x $(SPARK_VENV)/bin/python || $(PYTHON) -m venv $(SPARK_VENV)
	$(SPARK_VENV)/bin/pip install -q -r examples/spark/requirements.txt
	touch $@

example-spark: $(STAMP) $(SPARK_VENV)/.installed
	$(BIN)/python examples/spark/run.py $(ARGS)

# A Flink job (MiniCluster: KafkaSource -> map that fails once -> exactly-once KafkaSink) against a
# kemu it starts; builds examples/flink with Maven. Not in `make test` (examples/README.md).
example-flink: $(STAMP)
	$(BIN)/python examples/flink/run.py $(ARGS)

clean:
	rm -rf $(VENV) tests/java/target .pytest_cache .mypy_cache
