"""kemu's SASL servers and listener configs, without a socket: SCRAM against RFC 7677's worked
example, PLAIN and OAUTHBEARER refusals with Kafka's messages, the SCRAM store across a
restart, JAAS users, listener parsing and port blocks, and the session's gate (what may come
before authentication, KIP-368 lifetimes)."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import pytest

from kemu.broker.security.credentials import Credentials, ScramCredential, jaas_users
from kemu.broker.security.mechanisms import (
    AuthenticationFailed,
    OAuthBearerServer,
    PlainServer,
    ScramServer,
)
from kemu.broker.security.session import SecuritySession
from kemu.cluster.listeners import configured_listeners, is_security_config
from kemu.config.definitions import BrokerConfig, InvalidConfig
from kemu.protocol.errors import ErrorCode

NOW_MS = 1_800_000_000_000


def store(tmp_path: Path | None = None, **config: str) -> Credentials:
    return Credentials(BrokerConfig(config), tmp_path)


def test_scram_sha_256_matches_rfc_7677() -> None:
    credentials = store()
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    salted = hashlib.pbkdf2_hmac("sha256", b"pencil", salt, 4096)
    credentials.alter(
        [
            (
                "user",
                "SCRAM-SHA-256",
                ScramCredential.from_salted_password("SCRAM-SHA-256", salted, salt, 4096),
            )
        ]
    )
    server = ScramServer(
        "SCRAM-SHA-256", credentials, server_nonce=lambda: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    )
    first = server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO", NOW_MS)
    assert first == (
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    final = server.evaluate(
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
        NOW_MS,
    )
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.user == "user"


def test_scram_wrong_proof_and_unknown_user_get_one_message() -> None:
    credentials = store(**{"kemu.sasl.users": "alice:secret"})
    message = (
        "Authentication failed during authentication due to invalid credentials with SASL "
        "mechanism SCRAM-SHA-512"
    )
    unknown = ScramServer("SCRAM-SHA-512", credentials)
    with pytest.raises(AuthenticationFailed) as refused:
        unknown.evaluate(b"n,,n=mallory,r=abc", NOW_MS)
    assert refused.value.message == message and "mallory" in refused.value.reason
    server = ScramServer("SCRAM-SHA-512", credentials)
    first = server.evaluate(b"n,,n=alice,r=abc", NOW_MS).decode()
    nonce = first.split(",")[0][2:]
    proof = base64.b64encode(b"\0" * 64).decode()
    with pytest.raises(AuthenticationFailed) as refused:
        server.evaluate(f"c=biws,r={nonce},p={proof}".encode(), NOW_MS)
    assert refused.value.message == message


def test_plain_messages_are_kafkas() -> None:
    credentials = store(**{"kemu.sasl.users": "alice:secret"})
    cases = {
        b"\0alice\0wrong": "Authentication failed: Invalid username or password",
        b"\0\0secret": "Authentication failed: username not specified",
        b"\0alice\0": "Authentication failed: password not specified",
        b"alice": "Invalid SASL/PLAIN response: expected 3 tokens, got 1",
        b"bob\0alice\0secret": "Authentication failed: Client requested an authorization id "
        "that is different from username",
    }
    for token, message in cases.items():
        with pytest.raises(AuthenticationFailed) as refused:
            PlainServer(credentials, "SASL_PLAINTEXT").evaluate(token, NOW_MS)
        assert refused.value.message == message
    server = PlainServer(credentials, "SASL_PLAINTEXT")
    assert server.evaluate(b"\0alice\0secret", NOW_MS) == b"" and server.complete


def test_jaas_users_per_listener() -> None:
    jaas = (
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_carol="c\\"q";'
    )
    assert jaas_users(jaas) == {"admin": "admin-secret", "carol": 'c"q'}
    credentials = store(**{"listener.name.sasl_ssl.plain.sasl.jaas.config": jaas})
    assert credentials.check_plain("SASL_SSL", "carol", 'c"q')
    assert not credentials.check_plain("SASL_PLAINTEXT", "carol", 'c"q')


def test_altered_scram_credentials_survive_a_restart(tmp_path: Path) -> None:
    first = store(tmp_path)
    credential = ScramCredential.from_password("SCRAM-SHA-512", "pw", 8192)
    first.alter([("dave", "SCRAM-SHA-512", credential)])
    assert store(tmp_path).scram_credential("dave", "SCRAM-SHA-512") == credential
    first.alter([("dave", "SCRAM-SHA-512", None)])
    assert store(tmp_path).scram_credential("dave", "SCRAM-SHA-512") is None
    assert store(tmp_path).users() == []


def jws(claims: dict[str, object], alg: str = "none") -> bytes:
    def part(value: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    return f"n,,\x01auth=Bearer {part({'alg': alg})}.{part(claims)}.\x01\x01".encode()


def test_oauthbearer_unsecured_tokens() -> None:
    server = OAuthBearerServer()
    assert server.evaluate(jws({"sub": "olga", "exp": NOW_MS / 1000 + 60}), NOW_MS) == b""
    assert server.complete and server.user == "olga" and server.expiry_ms == NOW_MS + 60_000
    for bad in (
        jws({"sub": "olga", "exp": NOW_MS / 1000 - 1}),
        jws({"sub": "olga", "exp": NOW_MS / 1000 + 60}, alg="RS256"),
        jws({"exp": NOW_MS / 1000 + 60}),
        jws({"sub": "olga"}),
    ):
        server = OAuthBearerServer()
        assert json.loads(server.evaluate(bad, NOW_MS)) == {"status": "invalid_token"}
        with pytest.raises(AuthenticationFailed) as refused:
            server.evaluate(b"\x01", NOW_MS)
        assert refused.value.message == '{"status":"invalid_token"}'
    with pytest.raises(AuthenticationFailed):
        OAuthBearerServer().evaluate(b"not a client first message", NOW_MS)


def test_listeners_take_port_blocks_and_advertise() -> None:
    config = BrokerConfig(
        {
            "listeners": "INTERNAL://:0,EXTERNAL://0.0.0.0:19092,SSL://:0",
            "advertised.listeners": "EXTERNAL://kafka.example:29092",
            "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL,SSL:SSL",
        }
    )
    internal, external, ssl = configured_listeners(config, "127.0.0.1", 9092, 3)
    assert (internal.protocol, internal.host, internal.port) == ("PLAINTEXT", "127.0.0.1", 9092)
    assert (external.protocol, external.host, external.port) == ("SASL_SSL", "0.0.0.0", 19092)
    assert (external.advertised_host, external.advertised_port) == ("kafka.example", 29092)
    assert (ssl.port, ssl.advertised_host) == (9092 + 2 * 3, "127.0.0.1")
    default = configured_listeners(BrokerConfig(), "127.0.0.1", 9092, 3)
    assert [(d.name, d.protocol, d.port) for d in default] == [("PLAINTEXT", "PLAINTEXT", 9092)]
    with pytest.raises(InvalidConfig, match="No security protocol defined for listener FOO"):
        configured_listeners(BrokerConfig({"listeners": "FOO://:0"}), "127.0.0.1", 9092, 1)
    with pytest.raises(InvalidConfig, match="Each listener must have a different name"):
        configured_listeners(BrokerConfig({"listeners": "SSL://:1,SSL://:2"}), "127.0.0.1", 9092, 1)
    assert is_security_config("listener.name.external.scram-sha-512.sasl.jaas.config")
    assert is_security_config("listener.name.external.ssl.client.auth")
    assert not is_security_config("listener.name.external.num.partitions")


def session(**config: str) -> SecuritySession:
    settings = {"listeners": "SASL_PLAINTEXT://:0", "kemu.sasl.users": "alice:secret", **config}
    broker = BrokerConfig(settings)
    (listener,) = configured_listeners(broker, "127.0.0.1", 9092, 1)
    return SecuritySession(listener, broker, Credentials(broker, None), "127.0.0.1:1")


def test_the_gate_before_authentication() -> None:
    fresh = session()
    assert fresh.refusal(18, "api_versions", NOW_MS) is None
    assert fresh.refusal(3, "metadata", NOW_MS) == (
        "Unexpected Kafka request of type METADATA during SASL handshake."
    )
    assert fresh.handshake("PLAIN", 1)[0] == ErrorCode.none
    assert fresh.refusal(18, "api_versions", NOW_MS) == (
        "Unexpected Kafka request of type API_VERSIONS during SASL authentication."
    )
    error, message, _, lifetime = fresh.authenticate(b"\0alice\0secret", NOW_MS)
    assert (error, message, lifetime) == (ErrorCode.none, None, 0)
    assert fresh.principal == "User:alice" and not fresh.intercepts
    limited = session(**{"sasl.enabled.mechanisms": "SCRAM-SHA-512"})
    error, mechanisms = limited.handshake("PLAIN", 1)
    assert (error, mechanisms) == (ErrorCode.unsupported_sasl_mechanism, ["SCRAM-SHA-512"])
    assert limited.close_requested


def test_session_lifetime_and_reauthentication() -> None:
    reauth = session(**{"connections.max.reauth.ms": "1000"})
    reauth.handshake("PLAIN", 1)
    assert reauth.authenticate(b"\0alice\0secret", NOW_MS)[3] == 1000
    assert reauth.refusal(3, "metadata", NOW_MS + 1000) is None
    assert "expired" in (reauth.refusal(3, "metadata", NOW_MS + 1001) or "")
    assert reauth.handshake("PLAIN", 1)[0] == ErrorCode.none  # re-authentication
    assert reauth.authenticate(b"\0alice\0secret", NOW_MS + 900)[3] == 1000
    assert reauth.refusal(3, "metadata", NOW_MS + 1500) is None
    assert reauth.handshake("SCRAM-SHA-256", 1)[0] == ErrorCode.illegal_sasl_state
