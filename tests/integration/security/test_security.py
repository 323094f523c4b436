"""Listeners, TLS and SASL against a kemu (in the test's process; started as a user starts it where
it must survive a restart).

One kemu with four listeners (PLAINTEXT, SASL_PLAINTEXT, SASL_SSL, SSL; 2 brokers, a port block
each), ``--tls-self-signed`` and ``kemu.sasl.users``: confluent-kafka produces and consumes over
each protocol and SASL mechanism (PLAIN from ``kemu.sasl.users`` and from a listener's JAAS
config, SCRAM-SHA-256/512, OAUTHBEARER with an unsecured token), every listener advertises its
own endpoints, and bad input — a wrong password, an unknown mechanism, a request before
authentication, a plaintext client on a TLS port, a missing client certificate — is refused with
Kafka's error or a closed connection and a log line, while other clients carry on. SCRAM
credentials altered through the Admin API survive a restart; KIP-368 re-authentication keeps a
connection alive past its session lifetime, and a connection that does not re-authenticate is
closed. The Java kafka-clients 4.4 side is ``test_java_security``.
"""

from __future__ import annotations

import base64
import json
import socket
import ssl
import struct
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from kemu.protocol import wire
from kemu.protocol.errors import ErrorCode
from kemu.testing.inprocess import InProcessKemu
from kemu.testing.plugin import KemuProcess

pytestmark = pytest.mark.integration

LISTENERS = "listeners=PLAINTEXT://:0,SASL_PLAINTEXT://:0,SASL_SSL://:0,SSL://:0"
JAAS_CAROL = (
    "listener.name.sasl_plaintext.plain.sasl.jaas.config="
    'org.apache.kafka.common.security.plain.PlainLoginModule required user_carol="carol-secret";'
)
SECURE_OVERRIDES = [
    LISTENERS,
    "kemu.sasl.users=alice:alice-secret,bob:bob-secret",
    "ssl.client.auth=required",
    "listener.name.sasl_ssl.ssl.client.auth=none",
    JAAS_CAROL,
]
TIMEOUT = 15.0
# An in-process kemu serves every test but the two whose credentials and ACLs must survive a
# SIGKILL and a restart on the same data dir: those start kemu as a process.
Kemu = InProcessKemu | KemuProcess


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessKemu]:
    base = tmp_path_factory.mktemp("security")
    process = InProcessKemu(
        brokers=2,
        data_dir=base / "data",
        log_path=base / "kemu.log",
        overrides=SECURE_OVERRIDES,
        tls_self_signed=True,
        json_logs=True,
    ).start()
    yield process
    process.stop()


def log_events(process: Kemu, event: str) -> list[dict[str, Any]]:
    assert process.log_path is not None
    found = []
    for line in process.log_path.read_text().splitlines():
        if line.startswith("{"):
            entry = json.loads(line)
            if entry.get("event") == event:
                found.append(entry)
    return found


def wait_for_log(
    process: Kemu,
    event: str,
    after: int = 0,
    where: Callable[[dict[str, Any]], bool] = lambda entry: True,
    **match: Any,
) -> dict[str, Any]:
    """The first ``event`` entry past the first ``after`` ones that matches ``match`` and
    ``where``, waiting for it up to TIMEOUT."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        for entry in log_events(process, event)[after:]:
            if all(entry.get(k) == v for k, v in match.items()) and where(entry):
                return entry
        time.sleep(0.1)
    raise AssertionError(f"no {event} {match} in the log")


def client_config(process: Kemu, listener: str, **settings: str) -> dict[str, Any]:
    config: dict[str, Any] = {
        "bootstrap.servers": process.listeners[listener],
        "security.protocol": listener,
    }
    if listener in ("SSL", "SASL_SSL"):
        config["ssl.ca.location"] = process.tls["ca"]
    if listener == "SSL":
        config["ssl.certificate.location"] = process.tls["client_cert"]
        config["ssl.key.location"] = process.tls["client_key"]
    config.update(settings)
    return config


def sasl(mechanism: str, user: str, password: str) -> dict[str, str]:
    return {"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}


def round_trip(config: dict[str, Any], count: int = 3) -> list[bytes]:
    topic = f"sec-{uuid.uuid4().hex[:10]}"
    producer = Producer({**config, "message.timeout.ms": 20000})
    for i in range(count):
        producer.produce(topic, f"v{i}".encode())
    assert producer.flush(TIMEOUT + 10) == 0
    consumer = Consumer({**config, "group.id": f"g-{topic}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT
    while len(values) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
    consumer.close()
    return values


def auth_errors(
    config: dict[str, Any], until: tuple[int, ...] = (KafkaError._AUTHENTICATION,)
) -> list[KafkaError]:
    """The errors a producer with ``config`` reports while it tries to connect."""
    errors: list[KafkaError] = []
    producer = Producer({**config, "error_cb": errors.append})
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline and not any(e.code() in until for e in errors):
        producer.poll(0.2)
    return errors


# --- a raw client, for what real clients never send --------------------------------------------


def address(bootstrap: str) -> tuple[str, int]:
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    return host, int(port)


def connect(bootstrap: str) -> socket.socket:
    sock = socket.create_connection(address(bootstrap), timeout=TIMEOUT)
    sock.settimeout(TIMEOUT)
    return sock


def read_exactly(sock: socket.socket, count: int) -> bytes:
    chunks = []
    while count:
        chunk = sock.recv(count)
        if not chunk:
            raise ConnectionError("closed by kemu")
        chunks.append(chunk)
        count -= len(chunk)
    return b"".join(chunks)


def read_frame(sock: socket.socket) -> bytes:
    (size,) = wire.SIZE.unpack(read_exactly(sock, 4))
    return read_exactly(sock, size)


def call(sock: socket.socket, api_key: int, version: int, **fields: Any) -> Any:
    body = wire.build(wire.request_schema(api_key, version), **fields)
    sock.sendall(wire.encode_request_frame(body, 7, "security-test"))
    _, response = wire.decode_response(api_key, version, read_frame(sock))
    return response


def closed(sock: socket.socket) -> bool:
    """Whether kemu closed the connection (what it sent before that is skipped)."""
    try:
        while sock.recv(65536):
            pass
    except (ConnectionResetError, TimeoutError):
        return not isinstance(sys.exc_info()[1], TimeoutError)
    return True


def metadata(sock: socket.socket) -> Any:
    return call(sock, 3, 12, topics=None, allow_auto_topic_creation=False)


def plain_token(user: str, password: str) -> bytes:
    return f"\x00{user}\x00{password}".encode()


def authenticate_plain(sock: socket.socket, user: str, password: str) -> Any:
    handshake = call(sock, 17, 1, mechanism="PLAIN")
    assert handshake.error_code == ErrorCode.none
    return call(sock, 36, 2, auth_bytes=plain_token(user, password))


def nested_user(name: str) -> Any:
    module = sys.modules[wire.request_schema(50, 0).__module__]
    return wire.build(module.UserName, name=name)


def list_offsets_topic(topic: str) -> Any:
    module = sys.modules[wire.request_schema(2, 7).__module__]
    partition = wire.build(module.ListOffsetsPartition, partition_index=0, timestamp=-1)
    return wire.build(module.ListOffsetsTopic, name=topic, partitions=(partition,))


def unsecured_jws(claims: dict[str, Any], alg: str = "none") -> str:
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    return f"{part({'alg': alg})}.{part(claims)}."


def oauth_token(jws: str) -> bytes:
    return f"n,,\x01auth=Bearer {jws}\x01\x01".encode()


# --- listeners ----------------------------------------------------------------------------------


def test_every_listener_advertises_its_own_endpoints(secure: InProcessKemu) -> None:
    assert list(secure.listeners) == ["PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL", "SSL"]
    assert secure.bootstrap == secure.listeners["PLAINTEXT"]
    settings = {
        "PLAINTEXT": {},
        "SASL_PLAINTEXT": sasl("PLAIN", "alice", "alice-secret"),
        "SASL_SSL": sasl("SCRAM-SHA-256", "bob", "bob-secret"),
        "SSL": {},
    }
    for listener, extra in settings.items():
        admin = AdminClient(client_config(secure, listener, **extra))
        brokers = admin.list_topics(timeout=TIMEOUT).brokers
        advertised = {f"{b.host}:{b.port}" for b in brokers.values()}
        assert advertised == set(secure.listeners[listener].split(",")), listener
        described = admin.describe_cluster().result(TIMEOUT)
        assert {f"{n.host}:{n.port}" for n in described.nodes} == advertised


@pytest.mark.parametrize(
    ("listener", "settings"),
    [
        ("SASL_PLAINTEXT", sasl("PLAIN", "alice", "alice-secret")),
        ("SASL_PLAINTEXT", sasl("PLAIN", "carol", "carol-secret")),  # the listener's JAAS users
        ("SASL_PLAINTEXT", sasl("SCRAM-SHA-256", "alice", "alice-secret")),
        ("SASL_PLAINTEXT", sasl("SCRAM-SHA-512", "bob", "bob-secret")),
        ("SASL_SSL", sasl("SCRAM-SHA-512", "alice", "alice-secret")),
        ("SASL_SSL", sasl("PLAIN", "bob", "bob-secret")),
        ("SSL", {}),  # with the client certificate ssl.client.auth=required asks for
    ],
    ids=lambda value: value if isinstance(value, str) else value.get("sasl.mechanism", "cert"),
)
def test_confluent_kafka_produces_and_consumes(
    secure: InProcessKemu, listener: str, settings: dict[str, str]
) -> None:
    assert round_trip(client_config(secure, listener, **settings)) == [b"v0", b"v1", b"v2"]


def test_oauthbearer_unsecured_token(secure: InProcessKemu) -> None:
    config = client_config(
        secure,
        "SASL_PLAINTEXT",
        **{
            "sasl.mechanism": "OAUTHBEARER",
            "enable.sasl.oauthbearer.unsecure.jwt": "true",
            "sasl.oauthbearer.config": "principal=dora",
        },
    )
    assert round_trip(config, 2) == [b"v0", b"v1"]
    wait_for_log(secure, "sasl_authenticated", mechanism="OAUTHBEARER", principal="User:dora")


# --- refusals -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mechanism", "message"),
    [
        ("PLAIN", "Authentication failed: Invalid username or password"),
        (
            "SCRAM-SHA-512",
            "Authentication failed during authentication due to invalid credentials with SASL "
            "mechanism SCRAM-SHA-512",
        ),
    ],
)
def test_wrong_password_is_refused_and_others_carry_on(
    secure: InProcessKemu, mechanism: str, message: str
) -> None:
    errors = auth_errors(
        client_config(secure, "SASL_PLAINTEXT", **sasl(mechanism, "alice", "wrong"))
    )
    failures = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
    assert failures, errors
    assert message in failures[0].str()
    logged = wait_for_log(secure, "sasl_authentication_failed", mechanism=mechanism)
    assert logged["user"] == "alice"
    good = client_config(secure, "SASL_PLAINTEXT", **sasl(mechanism, "alice", "alice-secret"))
    assert round_trip(good, 1) == [b"v0"]


def test_ssl_client_without_certificate_is_refused(secure: InProcessKemu) -> None:
    # Only this test's handshakes count, and not every one of them: a client closed while
    # one of its connections is still mid-handshake (an earlier test's, or this producer's
    # second connection when it returns) is logged as a connection reset.
    earlier = len(log_events(secure, "tls_handshake_failed"))
    config = client_config(secure, "SSL")
    del config["ssl.certificate.location"], config["ssl.key.location"]
    refused = (KafkaError._SSL, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN)
    errors = auth_errors(config, until=refused)
    assert any(e.code() in refused for e in errors), errors
    wait_for_log(
        secure,
        "tls_handshake_failed",
        after=earlier,
        where=lambda entry: "CERTIFICATE" in entry["reason"].upper(),
        listener="SSL",
    )


def tls_alert(bootstrap: str, ca: str, version: ssl.TLSVersion) -> str:
    """What a client without a certificate reads from an SSL port that requires one: the TLS
    alert's reason, or "no alert" when the connection just ends."""
    context = ssl.create_default_context(cafile=ca)
    context.maximum_version = version
    with socket.create_connection(address(bootstrap), timeout=TIMEOUT) as raw:
        try:
            with context.wrap_socket(raw, server_hostname="localhost") as sock:
                # TLS 1.3: the client's handshake is over before the server checks its
                # certificate; the alert comes in answer to its first bytes
                sock.sendall(b"\0\0\0\1\0")
                return "no alert" if sock.recv(16) == b"" else "data"
        except ssl.SSLEOFError:
            return "no alert"
        except ssl.SSLError as error:
            return str(error.reason)


ALERTS = {
    ssl.TLSVersion.TLSv1_3: "TLSV13_ALERT_CERTIFICATE_REQUIRED",
    ssl.TLSVersion.TLSv1_2: "SSLV3_ALERT_HANDSHAKE_FAILURE",
}


@pytest.mark.parametrize("version", list(ALERTS), ids=["tls1.3", "tls1.2"])
def test_a_client_without_certificate_reads_the_tls_alert(
    secure: InProcessKemu, version: ssl.TLSVersion
) -> None:
    """As an SSLEngine sends it (a Java client gets SslAuthenticationException at once): not
    sent by asyncio's TLS on its own (CPython gh-98078)."""
    assert tls_alert(secure.listeners["SSL"], secure.tls["ca"], version) == ALERTS[version]


@pytest.mark.process  # kemu serve runs on uvloop, whose TLS drops the alert as asyncio's does
def test_kemu_serve_sends_the_tls_alert(kemu_factory: type[KemuProcess]) -> None:
    process = kemu_factory(
        brokers=1,
        overrides=["listeners=SSL://:0", "ssl.client.auth=required"],
        extra_args=["--tls-self-signed"],
    ).start()
    for version, reason in ALERTS.items():
        assert tls_alert(process.listeners["SSL"], process.tls["ca"], version) == reason
    assert round_trip(client_config(process, "SSL"), 1) == [b"v0"]


def test_plaintext_client_on_a_tls_port_is_closed(secure: InProcessKemu) -> None:
    sock = connect(secure.listeners["SASL_SSL"])
    sock.sendall(
        wire.encode_request_frame(
            wire.build(wire.request_schema(18, 3), client_software_name="x"), 1
        )
    )
    assert closed(sock)
    peer = "{}:{}".format(*sock.getsockname()[:2])
    sock.close()
    wait_for_log(secure, "tls_handshake_failed", peer=peer, listener="SASL_SSL")
    assert round_trip(client_config(secure, "SASL_SSL", **sasl("PLAIN", "bob", "bob-secret")), 1)


def test_request_before_authentication_closes_the_connection(secure: InProcessKemu) -> None:
    sock = connect(secure.listeners["SASL_PLAINTEXT"])
    versions = call(sock, 18, 3, client_software_name="t", client_software_version="1")
    served = {entry.api_key: entry.max_version for entry in versions.api_keys}
    assert served[17] == 1 and served[36] == 2 and served[50] == 0 and served[51] == 0
    sock.sendall(wire.encode_request_frame(wire.build(wire.request_schema(3, 12)), 2))
    assert closed(sock)
    entry = wait_for_log(secure, "sasl_request_refused", listener="SASL_PLAINTEXT")
    assert entry["reason"].startswith("Unexpected Kafka request of type")


def test_unknown_mechanism_gets_kafkas_error_then_closes(secure: InProcessKemu) -> None:
    sock = connect(secure.listeners["SASL_PLAINTEXT"])
    answer = call(sock, 17, 1, mechanism="GSSAPI")
    assert answer.error_code == ErrorCode.unsupported_sasl_mechanism
    assert set(answer.mechanisms) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"}
    assert closed(sock)


def test_malformed_tokens_are_refused(secure: InProcessKemu) -> None:
    sock = connect(secure.listeners["SASL_PLAINTEXT"])
    assert call(sock, 17, 1, mechanism="SCRAM-SHA-256").error_code == ErrorCode.none
    answer = call(sock, 36, 2, auth_bytes=b"\xff\x00not scram")
    assert answer.error_code == ErrorCode.sasl_authentication_failed
    assert closed(sock)
    sock = connect(secure.listeners["SASL_PLAINTEXT"])
    assert call(sock, 17, 1, mechanism="PLAIN").error_code == ErrorCode.none
    answer = call(sock, 36, 2, auth_bytes=b"alice-without-separators")
    assert answer.error_code == ErrorCode.sasl_authentication_failed
    assert answer.error_message == "Invalid SASL/PLAIN response: expected 3 tokens, got 1"
    assert closed(sock)


@pytest.mark.parametrize(
    "jws",
    [
        unsecured_jws({"sub": "eve", "exp": time.time() + 3600}, alg="HS256"),
        unsecured_jws({"sub": "eve", "exp": time.time() - 60}),  # expired
        unsecured_jws({"exp": time.time() + 3600}),  # no subject
    ],
    ids=["signed", "expired", "no-sub"],
)
def test_bad_oauthbearer_tokens_are_refused(secure: InProcessKemu, jws: str) -> None:
    sock = connect(secure.listeners["SASL_PLAINTEXT"])
    assert call(sock, 17, 1, mechanism="OAUTHBEARER").error_code == ErrorCode.none
    challenge = call(sock, 36, 2, auth_bytes=oauth_token(jws))
    assert challenge.error_code == ErrorCode.none
    assert json.loads(challenge.auth_bytes) == {"status": "invalid_token"}
    answer = call(sock, 36, 2, auth_bytes=b"\x01")
    assert answer.error_code == ErrorCode.sasl_authentication_failed
    assert answer.error_message == '{"status":"invalid_token"}'
    assert closed(sock)


def test_handshake_v0_takes_raw_tokens(secure: InProcessKemu) -> None:
    sock = connect(secure.listeners["SASL_PLAINTEXT"])
    assert call(sock, 17, 0, mechanism="PLAIN").error_code == ErrorCode.none
    token = plain_token("alice", "alice-secret")
    sock.sendall(struct.pack(">i", len(token)) + token)
    assert read_frame(sock) == b""  # PLAIN's empty server token, bare
    assert len(metadata(sock).brokers) == 2
    sock.close()
    sock = connect(secure.listeners["SASL_PLAINTEXT"])
    assert call(sock, 17, 0, mechanism="PLAIN").error_code == ErrorCode.none
    token = plain_token("alice", "nope")
    sock.sendall(struct.pack(">i", len(token)) + token)
    assert closed(sock)


# --- SCRAM credentials through the Admin API, durable -------------------------------------------


@pytest.mark.process  # SIGKILL and a restart on the same data dir
def test_scram_credentials_altered_by_admin_survive_a_restart(
    kemu_factory: type[KemuProcess], tmp_path: Path
) -> None:
    process = kemu_factory(
        brokers=1,
        data_dir=tmp_path / "data",
        overrides=["listeners=SASL_PLAINTEXT://:0", "kemu.sasl.users=admin:admin-secret"],
    ).start()
    admin = AdminClient(
        client_config(process, "SASL_PLAINTEXT", **sasl("PLAIN", "admin", "admin-secret"))
    )
    upsert = UserScramCredentialUpsertion(
        "frank", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"frank-secret"
    )
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(TIMEOUT)
    described = admin.describe_user_scram_credentials(["frank"])["frank"].result(TIMEOUT)
    infos = described.scram_credential_infos
    assert [(i.mechanism, i.iterations) for i in infos] == [(ScramMechanism.SCRAM_SHA_512, 8192)]
    process.kill()
    process.start()
    frank = client_config(
        process, "SASL_PLAINTEXT", **sasl("SCRAM-SHA-512", "frank", "frank-secret")
    )
    assert round_trip(frank, 1) == [b"v0"]
    # Only the SHA-512 credential was made.
    errors = auth_errors(
        client_config(process, "SASL_PLAINTEXT", **sasl("SCRAM-SHA-256", "frank", "frank-secret"))
    )
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors


# --- KIP-368 re-authentication ------------------------------------------------------------------


REAUTH_MS = 3000


@pytest.fixture
def reauth(kemu_inprocess_factory: type[InProcessKemu]) -> InProcessKemu:
    return kemu_inprocess_factory(
        brokers=1,
        overrides=[
            "listeners=SASL_PLAINTEXT://:0",
            "kemu.sasl.users=alice:alice-secret",
            f"connections.max.reauth.ms={REAUTH_MS}",
        ],
        json_logs=True,
    ).start()


def test_session_lifetime_and_expiry(reauth: InProcessKemu) -> None:
    bootstrap = reauth.listeners["SASL_PLAINTEXT"]
    lapsing, renewing = connect(bootstrap), connect(bootstrap)
    for sock in (lapsing, renewing):
        answer = authenticate_plain(sock, "alice", "alice-secret")
        assert answer.error_code == ErrorCode.none
        assert answer.session_lifetime.total_seconds() * 1000 == REAUTH_MS
    time.sleep(REAUTH_MS * 0.6 / 1000)
    again = authenticate_plain(renewing, "alice", "alice-secret")  # KIP-368, same connection
    assert again.error_code == ErrorCode.none
    time.sleep(REAUTH_MS * 0.6 / 1000)
    assert len(metadata(renewing).brokers) == 1  # alive: its new session has not expired
    lapsing.sendall(wire.encode_request_frame(wire.build(wire.request_schema(3, 12)), 9))
    assert closed(lapsing)
    entry = wait_for_log(reauth, "sasl_request_refused")
    assert "expired" in entry["reason"]
    wait_for_log(reauth, "sasl_reauthenticated", principal="User:alice")


def test_librdkafka_reauthenticates(reauth: InProcessKemu) -> None:
    config = client_config(
        reauth, "SASL_PLAINTEXT", **sasl("SCRAM-SHA-512", "alice", "alice-secret")
    )
    topic = f"reauth-{uuid.uuid4().hex[:8]}"
    producer = Producer({**config, "message.timeout.ms": 20000})
    producer.produce(topic, b"before")
    assert producer.flush(TIMEOUT) == 0
    time.sleep(REAUTH_MS * 1.5 / 1000)
    producer.produce(topic, b"after")
    assert producer.flush(TIMEOUT) == 0
    wait_for_log(reauth, "sasl_reauthenticated", mechanism="SCRAM-SHA-512")


# --- ACLs through the Admin API (enforcement in handlers is not there yet) ----------------------


@pytest.mark.process  # SIGKILL and a restart on the same data dir
def test_acls_created_described_deleted_and_kept(
    kemu_factory: type[KemuProcess], tmp_path: Path
) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    process = kemu_factory(
        brokers=1,
        data_dir=tmp_path / "data",
        overrides=[
            "listeners=SASL_PLAINTEXT://:0",
            "kemu.sasl.users=admin:admin-secret,alice:alice-secret",
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users=User:admin",
        ],
    ).start()

    def admin_as(user: str) -> AdminClient:
        return AdminClient(
            client_config(process, "SASL_PLAINTEXT", **sasl("PLAIN", user, f"{user}-secret"))
        )

    admin = admin_as("admin")
    bindings = [
        AclBinding(
            ResourceType.TOPIC,
            "orders",
            ResourcePatternType.LITERAL,
            "User:alice",
            "*",
            AclOperation.WRITE,
            AclPermissionType.ALLOW,
        ),
        AclBinding(
            ResourceType.GROUP,
            "app-",
            ResourcePatternType.PREFIXED,
            "User:alice",
            "*",
            AclOperation.READ,
            AclPermissionType.ALLOW,
        ),
    ]
    for future in admin.create_acls(bindings).values():
        assert future.result(TIMEOUT) is None
    everything = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    assert sorted(map(str, admin.describe_acls(everything).result(TIMEOUT))) == sorted(
        map(str, bindings)
    )
    # alice is no super user and has no ALTER on the cluster.
    alice = admin_as("alice")  # kept: a destroyed client fails its futures with _DESTROY
    with pytest.raises(KafkaException) as refused:
        for future in alice.create_acls(bindings[:1]).values():
            future.result(TIMEOUT)
    assert refused.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    process.kill()
    process.start()
    admin = admin_as("admin")
    assert len(admin.describe_acls(everything).result(TIMEOUT)) == 2
    groups = AclBindingFilter(
        ResourceType.GROUP,
        "app-1",
        ResourcePatternType.MATCH,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    (deleted,) = admin.delete_acls([groups]).values()
    assert [str(b) for b in deleted.result(TIMEOUT)] == [str(bindings[1])]
    assert [str(b) for b in admin.describe_acls(everything).result(TIMEOUT)] == [str(bindings[0])]


def test_acls_are_enforced_on_produce_consume_and_transactions(
    kemu_inprocess_factory: type[InProcessKemu],
) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        NewTopic,
        ResourcePatternType,
        ResourceType,
    )

    process = kemu_inprocess_factory(
        brokers=2,
        overrides=[
            "listeners=SASL_PLAINTEXT://:0",
            "kemu.sasl.users=admin:admin-secret,alice:alice-secret",
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users=User:admin",
        ],
        json_logs=True,
    ).start()
    admin_config = client_config(
        process, "SASL_PLAINTEXT", **sasl("PLAIN", "admin", "admin-secret")
    )
    alice = client_config(process, "SASL_PLAINTEXT", **sasl("PLAIN", "alice", "alice-secret"))
    admin = AdminClient(admin_config)
    for future in admin.create_topics([NewTopic("guarded", 1, 1)]).values():
        future.result(TIMEOUT)

    def allow(resource: ResourceType, name: str, operation: AclOperation) -> None:
        binding = AclBinding(
            resource,
            name,
            ResourcePatternType.LITERAL,
            "User:alice",
            "*",
            operation,
            AclPermissionType.ALLOW,
        )
        for future in admin.create_acls([binding]).values():
            future.result(TIMEOUT)

    def produce(config: dict[str, Any]) -> KafkaError | None:
        outcome: list[KafkaError | None] = []
        producer = Producer({**config, "message.timeout.ms": 10000})
        producer.produce("guarded", b"x", on_delivery=lambda err, _msg: outcome.append(err))
        producer.flush(TIMEOUT)
        return outcome[0] if outcome else KafkaError(KafkaError._TIMED_OUT)

    refused = produce(alice)
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # librdkafka learns it from Metadata: no WRITE (which implies DESCRIBE) on the topic
    wait_for_log(process, "authorization_denied", principal="User:alice", resource="TOPIC:guarded")
    allow(ResourceType.TOPIC, "guarded", AclOperation.WRITE)
    assert produce(alice) is None
    assert produce(admin_config) is None  # a super user needs no ACL

    allow(ResourceType.TOPIC, "guarded", AclOperation.READ)
    errors: list[KafkaError] = []
    consumer = Consumer(
        {
            **alice,
            "group.id": "alice-app",
            "auto.offset.reset": "earliest",
            "error_cb": errors.append,
        }
    )
    consumer.subscribe(["guarded"])
    deadline = time.monotonic() + TIMEOUT
    group_refused = False
    while time.monotonic() < deadline and not group_refused:
        message = consumer.poll(0.5)
        if message is not None and message.error() is not None:
            group_refused = message.error().code() == KafkaError.GROUP_AUTHORIZATION_FAILED
        group_refused = group_refused or any(
            e.code() == KafkaError.GROUP_AUTHORIZATION_FAILED for e in errors
        )
    consumer.close()
    assert group_refused
    allow(ResourceType.GROUP, "alice-app", AclOperation.READ)
    consumer = Consumer({**alice, "group.id": "alice-app", "auto.offset.reset": "earliest"})
    consumer.subscribe(["guarded"])
    values = []
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline and len(values) < 2:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
    consumer.close()
    assert values == [b"x", b"x"]

    transactional = Producer({**alice, "transactional.id": "alice-txn"})
    with pytest.raises(KafkaException) as txn_refused:
        transactional.init_transactions(TIMEOUT)
    assert txn_refused.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_acls_are_enforced_on_admin_apis(
    kemu_inprocess_factory: type[InProcessKemu],
) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        NewTopic,
        ResourcePatternType,
        ResourceType,
    )

    process = kemu_inprocess_factory(
        brokers=1,
        overrides=[
            "listeners=SASL_PLAINTEXT://:0",
            "kemu.sasl.users=admin:admin-secret,alice:alice-secret",
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users=User:admin",
        ],
    ).start()
    admin = AdminClient(
        client_config(process, "SASL_PLAINTEXT", **sasl("PLAIN", "admin", "admin-secret"))
    )
    alice = AdminClient(
        client_config(process, "SASL_PLAINTEXT", **sasl("PLAIN", "alice", "alice-secret"))
    )

    def code_of(future: Any) -> int | None:
        try:
            future.result(TIMEOUT)
        except KafkaException as error:
            return int(error.args[0].code())
        return None

    (created,) = alice.create_topics([NewTopic("alice-1", 1, 1)]).values()
    assert code_of(created) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    prefix = AclBinding(
        ResourceType.TOPIC,
        "alice-",
        ResourcePatternType.PREFIXED,
        "User:alice",
        "*",
        AclOperation.CREATE,
        AclPermissionType.ALLOW,
    )
    for future in admin.create_acls([prefix]).values():
        future.result(TIMEOUT)
    (created,) = alice.create_topics([NewTopic("alice-1", 1, 1)]).values()
    assert code_of(created) is None
    (deleted,) = alice.delete_topics(["alice-1"]).values()
    assert code_of(deleted) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # Raw, as librdkafka 2.16 aborts on this (Kafka-shaped) error answer: DESCRIBE on the cluster.
    sock = connect(process.listeners["SASL_PLAINTEXT"])
    assert authenticate_plain(sock, "alice", "alice-secret").error_code == ErrorCode.none
    answer = call(sock, 50, 0, users=(nested_user("alice"),))
    assert answer.error_code == ErrorCode.cluster_authorization_failed
    assert [r.error_code for r in answer.results] == [ErrorCode.cluster_authorization_failed]
    offsets = call(
        sock,
        2,
        7,
        replica_id=-1,
        topics=(list_offsets_topic("alice-1"),),
    )
    assert offsets.topics[0].partitions[0].error_code == ErrorCode.topic_authorization_failed
    sock.close()
    (deleted,) = admin.delete_topics(["alice-1"]).values()
    assert code_of(deleted) is None
