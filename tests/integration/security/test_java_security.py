"""Java kafka-clients 4.4.0 over kemu's SASL and TLS listeners, through ``SecurityProbe``.

One kemu with PLAINTEXT, SASL_PLAINTEXT, SASL_SSL and SSL listeners (``--tls-self-signed``,
``ssl.client.auth=required`` on SSL) and one JVM running every scenario in order: Admin,
KafkaProducer and KafkaConsumer over SASL_PLAINTEXT with PLAIN and SCRAM-SHA-512, over SASL_SSL
with SCRAM-SHA-256 and a PEM truststore, over SSL with a PEM keystore (client certificate);
refusals for a wrong PLAIN and a wrong SCRAM password and for a missing client certificate;
Admin.alterUserScramCredentials then a login with the new credential; OAUTHBEARER with an
unsecured JWS as Kafka's unsecured login handler makes it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kemu.testing.inprocess import InProcessKemu
from tests.integration.clients.test_java_clients import ProbeRun, java_probes, run_probe  # noqa: F401  (fixture)

pytestmark = [pytest.mark.integration, pytest.mark.java]

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTH = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


@pytest.fixture(scope="module")
def secure_kemu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessKemu]:
    base = tmp_path_factory.mktemp("java-security")
    process = InProcessKemu(
        brokers=2,
        data_dir=base / "data",
        log_path=base / "kemu.log",
        overrides=[
            "listeners=PLAINTEXT://:0,SASL_PLAINTEXT://:0,SASL_SSL://:0,SSL://:0",
            "kemu.sasl.users=alice:alice-secret",
            "ssl.client.auth=required",
            "listener.name.sasl_ssl.ssl.client.auth=none",
        ],
        tls_self_signed=True,
    ).start()
    yield process
    process.stop()


def _properties(values: dict[str, str]) -> str:
    def escape(text: str) -> str:
        return text.replace("\\", "\\\\").replace("\n", "\\n")

    return "".join(f"{key}={escape(value)}\n" for key, value in values.items())


def _jaas(module: str, **options: str) -> str:
    return f"{module} required " + " ".join(f'{k}="{v}"' for k, v in options.items()) + ";"


@pytest.fixture(scope="module")
def security_run(
    secure_kemu: InProcessKemu,
    java_probes: Path,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> ProbeRun:
    listeners, tls = secure_kemu.listeners, secure_kemu.tls
    truststore = {"ssl.truststore.type": "PEM", "ssl.truststore.location": tls["ca"]}

    def on(listener: str, **values: str) -> dict[str, str]:
        return {"bootstrap.servers": listeners[listener], "security.protocol": listener, **values}

    def sasl(mechanism: str, module: str, user: str, password: str) -> dict[str, str]:
        return {
            "sasl.mechanism": mechanism,
            "sasl.jaas.config": _jaas(module, username=user, password=password),
        }

    client_cert = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.certificate.chain": Path(tls["client_cert"]).read_text(),
        "ssl.keystore.key": Path(tls["client_key"]).read_text(),
    }
    scenarios: dict[str, dict[str, str]] = {
        "01-plain": {
            **on("SASL_PLAINTEXT", **sasl("PLAIN", PLAIN, "alice", "alice-secret")),
            "probe.topic": "java-sec-plain",
        },
        "02-scram-512": {
            **on("SASL_PLAINTEXT", **sasl("SCRAM-SHA-512", SCRAM, "alice", "alice-secret")),
            "probe.topic": "java-sec-scram",
        },
        "03-sasl-ssl-scram-256": {
            **on("SASL_SSL", **sasl("SCRAM-SHA-256", SCRAM, "alice", "alice-secret")),
            **truststore,
            "probe.topic": "java-sec-sasl-ssl",
        },
        "04-ssl-client-cert": {**on("SSL"), **truststore, **client_cert, "probe.topic": "java-ssl"},
        "05-wrong-plain": {
            **on("SASL_PLAINTEXT", **sasl("PLAIN", PLAIN, "alice", "wrong")),
            "probe.expect": "failure",
        },
        "06-wrong-scram": {
            **on("SASL_PLAINTEXT", **sasl("SCRAM-SHA-512", SCRAM, "alice", "wrong")),
            "probe.expect": "failure",
        },
        "07-ssl-no-cert": {**on("SSL"), **truststore, "probe.expect": "failure"},
        "08-alter-scram": {
            **on("SASL_PLAINTEXT", **sasl("SCRAM-SHA-512", SCRAM, "alice", "alice-secret")),
            "probe.alter.user": "gina",
            "probe.alter.password": "gina-secret",
        },
        "09-new-user": {
            **on("SASL_PLAINTEXT", **sasl("SCRAM-SHA-512", SCRAM, "gina", "gina-secret")),
            "probe.topic": "java-sec-gina",
        },
        "10-oauthbearer": {
            **on("SASL_PLAINTEXT"),
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.jaas.config": _jaas(OAUTH, unsecuredLoginStringClaim_sub="olga"),
            # Kafka's unsecured login handler, minus its run-time need for Jackson
            "sasl.login.callback.handler.class": "kemu.probe.UnsecuredTokenHandler",
            "probe.topic": "java-sec-oauth",
        },
    }
    directory = tmp_path_factory.mktemp("java-security-scenarios")
    for name, values in scenarios.items():
        (directory / f"{name}.properties").write_text(_properties(values))
    return run_probe("SecurityProbe", secure_kemu.bootstrap, "--configs", str(directory))


def _scenario(run: ProbeRun, name: str) -> dict[str, Any]:
    found = [line for line in run.lines if line.get("scenario") == name]
    assert found, f"{name} did not run: {run.stderr[-3000:]}"
    return found[0]


@pytest.mark.parametrize(
    ("scenario", "listener"),
    [
        ("01-plain", "SASL_PLAINTEXT"),
        ("02-scram-512", "SASL_PLAINTEXT"),
        ("03-sasl-ssl-scram-256", "SASL_SSL"),
        ("04-ssl-client-cert", "SSL"),
        ("09-new-user", "SASL_PLAINTEXT"),
        ("10-oauthbearer", "SASL_PLAINTEXT"),
    ],
)
def test_java_produces_and_consumes(
    security_run: ProbeRun, secure_kemu: InProcessKemu, scenario: str, listener: str
) -> None:
    line = _scenario(security_run, scenario)
    assert line["ok"], line
    assert line["values"] == [f"v{i}" for i in range(5)]
    assert line["endpoints"] == sorted(secure_kemu.listeners[listener].split(","))


@pytest.mark.parametrize(
    ("scenario", "exception", "message"),
    [
        (
            "05-wrong-plain",
            "org.apache.kafka.common.errors.SaslAuthenticationException",
            "Authentication failed: Invalid username or password",
        ),
        (
            "06-wrong-scram",
            "org.apache.kafka.common.errors.SaslAuthenticationException",
            "Authentication failed during authentication due to invalid credentials with SASL "
            "mechanism SCRAM-SHA-512",
        ),
    ],
)
def test_java_is_refused(
    security_run: ProbeRun, scenario: str, exception: str, message: str | None
) -> None:
    line = _scenario(security_run, scenario)
    assert line["ok"], line
    assert line["failure"]["type"] == exception
    if message is not None:
        assert line["failure"]["message"] == message


def test_java_without_client_certificate_is_refused(
    security_run: ProbeRun, secure_kemu: InProcessKemu
) -> None:
    line = _scenario(security_run, "07-ssl-no-cert")
    assert line["ok"], line
    # kemu sends the TLS alert OpenSSL leaves when the handshake fails (neither asyncio nor
    # uvloop does), so the Java client fails at once, as against Kafka, not at its timeout
    assert line["failure"]["type"] == "org.apache.kafka.common.errors.SslAuthenticationException"
    assert secure_kemu.log_path is not None
    log = secure_kemu.log_path.read_text()
    assert "tls_handshake_failed" in log and "listener=SSL" in log


def test_java_alters_scram_credentials(security_run: ProbeRun) -> None:
    line = _scenario(security_run, "08-alter-scram")
    assert line["ok"], line
    assert line["credentials"] == ["SCRAM-SHA-512:8192"]
