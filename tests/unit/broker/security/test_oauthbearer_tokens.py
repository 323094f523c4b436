"""OAUTHBEARER tokens in the SASL pre-authentication path (regression tests for what ``bench.fuzz
--sasl`` found): tokens whose claims are not JSON numbers Kafka can read, or that Python's JSON
reader cannot hold, are refused with the invalid_token challenge (Kafka's answer to a bad token)
instead of failing the connection, and a token valid for ever is answered with a session lifetime
the response can carry."""

from __future__ import annotations

import base64
import datetime
import json

import pytest

from kemu.broker.security.credentials import Credentials
from kemu.broker.security.mechanisms import LONG_MAX, OAuthBearerServer
from kemu.broker.security.session import MAX_SESSION_LIFETIME_MS, SecuritySession
from kemu.cluster.listeners import configured_listeners
from kemu.config.definitions import BrokerConfig
from kemu.protocol import wire
from kemu.protocol.errors import ErrorCode

NOW_MS = 1_800_000_000_000
INVALID_TOKEN = {"status": "invalid_token"}


def b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def token(claims_json: str) -> bytes:
    jws = f"{b64(json.dumps({'alg': 'none'}))}.{b64(claims_json)}."
    return f"n,,\x01auth=Bearer {jws}\x01\x01".encode()


@pytest.mark.parametrize(
    "claims",
    [
        '{"sub": "olga", "exp": Infinity}',  # was OverflowError: connection_failed
        '{"sub": "olga", "exp": -Infinity}',
        '{"sub": "olga", "exp": NaN}',  # was ValueError
        '{"sub": "olga", "exp": 1900000000, "iat": NaN}',
        "[" * 100_000 + "]" * 100_000,  # was RecursionError: handler_failed
        '{"sub": "olga", "exp": 1900000000, "x": ' + "[" * 50_000 + "]" * 50_000 + "}",
    ],
)
def test_claims_that_are_not_readable_json_numbers_are_an_invalid_token(claims: str) -> None:
    server = OAuthBearerServer()
    assert json.loads(server.evaluate(token(claims), NOW_MS)) == INVALID_TOKEN
    assert not server.complete


@pytest.mark.parametrize("expiry", ["1e400", "1" + "0" * 400, str(10**30)])
def test_a_token_that_never_expires_saturates_as_kafkas_long(expiry: str) -> None:
    server = OAuthBearerServer()
    assert server.evaluate(token('{"sub": "olga", "exp": ' + expiry + "}"), NOW_MS) == b""
    assert server.complete and server.expiry_ms == LONG_MAX


def test_its_session_lifetime_fits_the_answer() -> None:
    broker = BrokerConfig({"listeners": "SASL_PLAINTEXT://:0"})
    (listener,) = configured_listeners(broker, "127.0.0.1", 9092, 1)
    session = SecuritySession(listener, broker, Credentials(broker, None), "127.0.0.1:1")
    assert session.handshake("OAUTHBEARER", 1)[0] == ErrorCode.none
    error, _message, _challenge, lifetime = session.authenticate(
        token('{"sub": "olga", "exp": 1e400}'), NOW_MS
    )
    assert error == ErrorCode.none and lifetime == MAX_SESSION_LIFETIME_MS
    answer = wire.build(
        wire.response_schema(36, 2),
        error_code=error,
        session_lifetime=datetime.timedelta(milliseconds=lifetime),
    )
    frame = wire.encode_response_frame(36, 2, 1, answer)  # was OverflowError in the handler
    decoded = wire.decode_response(36, 2, frame[4:])[1]
    assert decoded.session_lifetime == datetime.timedelta(milliseconds=MAX_SESSION_LIFETIME_MS)
