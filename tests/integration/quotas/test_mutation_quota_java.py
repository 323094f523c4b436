"""``controller_mutation_rate`` with the Java Admin (kafka-clients 4.4.0), on kemu and on a real
Kafka 4.4.0 side by side.

A client-id quota of 2 partitions/s (a full bucket: 11 windows x 1 s x 2 = 22 partitions), then
one ``createTopics`` of 10 topics x 3 partitions with ``retryOnQuotaViolation(false)``: the first
8 are created (the 8th still finds one token), the last 2 fail with
ThrottlingQuotaExceededException carrying the throttle time (about 1 s: 2 tokens short at 2 per
second). Created again with the default options, the Admin retries them after the throttle time
until both exist. librdkafka's admin (CreateTopics v4, before THROTTLING_QUOTA_EXCEEDED) gets
the permissive quota: everything created, the answer throttled. Skipped without javac or the
jars ``make bench`` fetches into bench/.cache/lib.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from kemu.testing.kafka import KafkaServer
from kemu.testing.plugin import KemuProcess
from tests import REPO_ROOT
from tests.integration.parity import kafka_timing_overrides

pytestmark = [pytest.mark.integration, pytest.mark.java, pytest.mark.parity]
ROOT = REPO_ROOT
LIB = ROOT / "bench" / ".cache" / "lib"
CLIENTS_JAR = LIB / "kafka-clients-4.4.0.jar"
TOOLS_JAR = LIB / "kafka-tools-4.4.0.jar"

DRIVER = """
import java.util.*;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.common.errors.ThrottlingQuotaExceededException;
import org.apache.kafka.common.quota.*;

public class MutationQuotaScenario {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("client.id", "mutator");
        try (Admin admin = Admin.create(props)) {
            ClientQuotaEntity entity =
                new ClientQuotaEntity(Map.of(ClientQuotaEntity.CLIENT_ID, "mutator"));
            ClientQuotaAlteration.Op rate =
                new ClientQuotaAlteration.Op("controller_mutation_rate", 2.0);
            admin.alterClientQuotas(List.of(new ClientQuotaAlteration(entity, List.of(rate))))
                .all().get();
            while (admin.describeClientQuotas(ClientQuotaFilter.all()).entities().get().isEmpty()) {
                Thread.sleep(100);
            }
            Thread.sleep(2000);  // Kafka's controller applies the quota from its metadata log
            List<NewTopic> burst = new ArrayList<>();
            for (int i = 0; i < 10; i++) burst.add(new NewTopic("burst-" + i, 3, (short) 1));
            CreateTopicsResult strict = admin.createTopics(burst,
                new CreateTopicsOptions().retryOnQuotaViolation(false));
            List<NewTopic> refused = new ArrayList<>();
            for (NewTopic topic : burst) {
                try {
                    strict.values().get(topic.name()).get();
                    System.out.println("strict " + topic.name() + " created");
                } catch (ExecutionException e) {
                    if (e.getCause() instanceof ThrottlingQuotaExceededException t) {
                        long throttle = t.throttleTimeMs();
                        System.out.println("strict " + topic.name() + " throttled " + throttle);
                        refused.add(topic);
                    } else {
                        System.out.println("strict " + topic.name() + " failed " + e.getCause());
                    }
                }
            }
            long started = System.nanoTime();
            admin.createTopics(refused).all().get();
            long tookMs = (System.nanoTime() - started) / 1_000_000;
            System.out.println("retried " + refused.size() + " created");
            System.err.println("retry took " + tookMs + " ms");
            long burstTopics = 0;
            for (int attempt = 0; attempt < 50 && burstTopics < burst.size(); attempt++) {
                if (attempt > 0) Thread.sleep(200);  // a broker's metadata follows its controller
                Set<String> names = admin.listTopics().names().get();
                burstTopics = names.stream().filter(n -> n.startsWith("burst-")).count();
            }
            System.out.println("listed " + burstTopics + " burst topics");
        }
    }
}
"""


def run_scenario(bootstrap: str, workdir: Path) -> tuple[list[str], str]:
    """The driver's stdout lines (and its stderr), compiled once per directory."""
    source = workdir / "MutationQuotaScenario.java"
    source.write_text(DRIVER)
    classpath = f"{LIB}/*"
    if not (workdir / "MutationQuotaScenario.class").exists():
        subprocess.run(
            ["javac", "-cp", classpath, "-d", str(workdir), str(source)],
            check=True,
            capture_output=True,
        )
    log4j = workdir / "log4j2.properties"
    log4j.write_text("rootLogger.level=ERROR\n")
    done = subprocess.run(
        [
            "java",
            "-Xmx256M",
            f"-Dlog4j2.configurationFile={log4j}",
            "-cp",
            f"{workdir}:{classpath}",
            "MutationQuotaScenario",
            bootstrap,
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    (workdir / "mutation.out").write_text(done.stdout + done.stderr)
    print(done.stdout + done.stderr)  # shown with pytest -s: the figures in docs/conformance.md
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines(), done.stderr


def check(lines: list[str]) -> None:
    created = [f"strict burst-{i} created" for i in range(8)]
    assert lines[:8] == created
    for index, line in zip((8, 9), lines[8:10], strict=True):
        prefix = f"strict burst-{index} throttled "
        assert line.startswith(prefix), lines
        assert 0 < int(line[len(prefix) :]) <= 1000  # 2 tokens short at 2 per second
    assert lines[10:] == ["retried 2 created", "listed 10 burst topics"]


def needs_java() -> None:
    if shutil.which("javac") is None or not (CLIENTS_JAR.exists() and TOOLS_JAR.exists()):
        pytest.skip("needs javac and Kafka's jars in bench/.cache/lib (make bench fetches them)")


def test_admin_create_topics_under_a_mutation_quota(tmp_path: Path) -> None:
    needs_java()
    kemu = KemuProcess(
        brokers=1,
        log_path=tmp_path / "kemu.log",
        timing="kafka",  # as the Kafka server its answers are compared with
        overrides=kafka_timing_overrides(),
    ).start()
    try:
        lines, _ = run_scenario(kemu.first_broker, tmp_path)
    finally:
        kemu.stop()
    check(lines)


def run_permissive(bootstrap: str) -> tuple[dict[str, str], list[int]]:
    """librdkafka's admin sends CreateTopics v4, older than THROTTLING_QUOTA_EXCEEDED: under a
    quota of 2 partitions/s, 10 topics x 3 partitions are all created and the answer throttled;
    a validate-only batch of 30 partitions right after is charged too (throttled again)."""
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    subprocess.run(
        [
            "java",
            "-cp",
            f"{LIB}/*",
            "org.apache.kafka.tools.ConfigCommand",
            "--bootstrap-server",
            bootstrap,
            "--alter",
            "--entity-type",
            "clients",
            "--entity-name",
            "rdkafka-admin",
            "--add-config",
            "controller_mutation_rate=2",
        ],
        check=True,
        capture_output=True,
    )
    time.sleep(2)  # Kafka's controller applies the quota from its metadata log
    throttles: list[int] = []
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "client.id": "rdkafka-admin",
        "throttle_cb": lambda event: throttles.append(round(event.throttle_time * 1000)),
    }
    admin = AdminClient(config)
    outcomes: dict[str, str] = {}
    for prefix, validate_only in (("old", False), ("checked", True)):
        topics = [NewTopic(f"{prefix}-{i}", 3, 1) for i in range(10)]
        for name, future in admin.create_topics(topics, validate_only=validate_only).items():
            try:
                future.result(60)
                outcomes[name] = "ok"
            except Exception as error:  # the outcome is what is compared
                outcomes[name] = str(error)
        deadline = time.monotonic() + 10
        while len([t for t in throttles if t > 0]) < (2 if validate_only else 1):
            admin.poll(0.2)
            assert time.monotonic() < deadline, throttles
    print(outcomes, throttles)
    return outcomes, [t for t in throttles if t > 0]


def check_permissive(outcomes: dict[str, str], throttles: list[int]) -> None:
    assert set(outcomes.values()) == {"ok"}
    assert len(outcomes) == 20
    assert 0 < throttles[0] <= 4_000  # 22 - 30 = -8 tokens at 2 per second
    assert throttles[1] > 0


def test_older_create_topics_versions_are_permissive(tmp_path: Path) -> None:
    needs_java()
    kemu = KemuProcess(
        brokers=1,
        log_path=tmp_path / "kemu.log",
        timing="kafka",  # as the Kafka server its answers are compared with
        overrides=kafka_timing_overrides(),
    ).start()
    try:
        check_permissive(*run_permissive(kemu.first_broker))
    finally:
        kemu.stop()


@pytest.fixture(scope="module")
def kafka_bootstrap(
    kafka: KafkaServer, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, Path]:
    needs_java()
    return kafka.bootstrap, tmp_path_factory.mktemp("mutation-kafka")


def test_the_same_scenarios_on_kafka(kafka_bootstrap: tuple[str, Path]) -> None:
    """The expectations above hold on Apache Kafka 4.4.0 itself."""
    bootstrap, workdir = kafka_bootstrap
    check(run_scenario(bootstrap, workdir)[0])
    check_permissive(*run_permissive(bootstrap))
