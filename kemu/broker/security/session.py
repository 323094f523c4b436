"""One connection's authentication, as Kafka's SaslServerAuthenticator runs it.

On a SASL listener a new connection may send ApiVersions and SaslHandshake; any other request
closes it ("Unexpected Kafka request of type X during SASL handshake."). SaslHandshake v1 names a
mechanism and SaslAuthenticate requests carry its tokens; after SaslHandshake v0 the tokens come
as bare size-prefixed frames (``raw``). Failed authentication answers
SASL_AUTHENTICATION_FAILED (or nothing, under v0 framing) and closes the connection; an
unsupported mechanism answers UNSUPPORTED_SASL_MECHANISM and closes it.

KIP-368: with ``connections.max.reauth.ms`` (or ``listener.name.<l>.<mechanism>.
connections.max.reauth.ms``) set, or an OAUTHBEARER token that expires, SaslAuthenticate v1+
reports the session lifetime; a request arriving after it without re-authentication closes the
connection. Re-authentication is a new SaslHandshake + SaslAuthenticate on the same connection,
with the same mechanism and principal.

PLAINTEXT and SSL connections are authenticated from the start (principal ``User:ANONYMOUS``,
or the client certificate's subject on SSL).
"""

from __future__ import annotations

import asyncio
import struct

import structlog

from kemu.broker.security.credentials import Credentials
from kemu.broker.security.mechanisms import AuthenticationFailed, Mechanism, server_for
from kemu.cluster.context import Runtime
from kemu.cluster.listeners import Listener, enabled_mechanisms, listener_value
from kemu.config.definitions import BrokerConfig
from kemu.protocol.errors import ErrorCode

log = structlog.get_logger("kemu.sasl")

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
ALWAYS_ALLOWED = frozenset({API_VERSIONS, SASL_HANDSHAKE})
SIZE = struct.Struct(">i")
# A token valid for ever (Kafka: up to Long.MAX_VALUE ms) is told ~31,700 years: the answer's
# SessionLifetimeMs is a timedelta here, and kio reads one only up to 2**63 microseconds.
MAX_SESSION_LIFETIME_MS = 10**15


class SecuritySession:
    def __init__(
        self,
        listener: Listener,
        config: BrokerConfig,
        credentials: Credentials | None,
        peer: str,
        principal: str = "User:ANONYMOUS",
    ) -> None:
        self.listener = listener
        self.config = config
        self.credentials = credentials
        self.peer = peer
        self.principal = principal
        self.sasl = listener.uses_sasl
        self.authenticated = not self.sasl
        self.mechanism_name: str | None = None
        self._mechanism: Mechanism | None = None
        self.raw = False  # SaslHandshake v0: the next frames are bare SASL tokens
        self.expires_at_ms: int | None = None
        self.close_requested = False
        self.reauthenticating = False

    @property
    def intercepts(self) -> bool:
        """Whether the connection must consult this session before each request."""
        return self.sasl and (not self.authenticated or self.raw or self.expires_at_ms is not None)

    # --- gate ------------------------------------------------------------------------------------

    def refusal(self, api_key: int, api_name: str, now_ms: int) -> str | None:
        """Why this request must close the connection, or None to serve it."""
        if not self.authenticated:
            kafka_name = api_name.upper()  # Kafka prints its ApiKeys enum: METADATA
            if self._mechanism is not None:  # after SaslHandshake v1: SaslAuthenticate only
                if api_key == SASL_AUTHENTICATE:
                    return None
                return f"Unexpected Kafka request of type {kafka_name} during SASL authentication."
            if api_key in ALWAYS_ALLOWED:
                return None
            return f"Unexpected Kafka request of type {kafka_name} during SASL handshake."
        if self.reauthenticating and api_key in (SASL_HANDSHAKE, SASL_AUTHENTICATE):
            return None
        if self.expires_at_ms is not None and now_ms > self.expires_at_ms:
            if api_key == SASL_HANDSHAKE:
                return None  # the re-authentication, late but before any other request
            return "SASL session expired without re-authentication (connections.max.reauth.ms)"
        return None

    # --- SaslHandshake ---------------------------------------------------------------------------

    def handshake(self, mechanism: str, version: int) -> tuple[ErrorCode, list[str]]:
        enabled = enabled_mechanisms(self.config, self.listener.name)
        if not self.sasl or (self.authenticated and version == 0):
            return ErrorCode.illegal_sasl_state, enabled
        if self.authenticated:  # KIP-368 re-authentication
            if mechanism != self.mechanism_name:
                self._fail(
                    f"SaslHandshakeRequest during re-authentication must use the same mechanism "
                    f"({self.mechanism_name}), got {mechanism}"
                )
                return ErrorCode.illegal_sasl_state, enabled
            self.reauthenticating = True
        elif self._mechanism is not None:
            self._fail("a second SaslHandshake before authentication")
            return ErrorCode.illegal_sasl_state, enabled
        if mechanism not in enabled:
            self._fail(f"Unsupported SASL mechanism {mechanism}")
            return ErrorCode.unsupported_sasl_mechanism, enabled
        assert self.credentials is not None
        self.mechanism_name = mechanism
        self._mechanism = server_for(mechanism, self.credentials, self.listener.name)
        self.raw = version == 0
        return ErrorCode.none, enabled

    # --- SaslAuthenticate and raw tokens ---------------------------------------------------------

    def authenticate(self, token: bytes, now_ms: int) -> tuple[ErrorCode, str | None, bytes, int]:
        """(error, message, server token, session lifetime ms) for one SaslAuthenticate."""
        mechanism = self._mechanism
        if mechanism is None or (self.authenticated and not self.reauthenticating):
            if not self.authenticated:
                self._fail("SaslAuthenticate before SaslHandshake")
            return (
                ErrorCode.illegal_sasl_state,
                "SaslAuthenticate request received after successful authentication",
                b"",
                0,
            )
        try:
            challenge = mechanism.evaluate(token, now_ms)
        except AuthenticationFailed as failure:
            self._fail(failure.reason, user=mechanism.user)
            return ErrorCode.sasl_authentication_failed, failure.message, b"", 0
        if not mechanism.complete:
            return ErrorCode.none, None, challenge, 0
        principal = f"User:{mechanism.user}"
        if self.reauthenticating and principal != self.principal:
            message = (
                "Cannot change principals during re-authentication from "
                f"{self.principal.replace(':', '.', 1)}: {principal.replace(':', '.', 1)}"
            )
            self._fail(message, user=mechanism.user)
            return ErrorCode.sasl_authentication_failed, message, b"", 0
        lifetime = self._lifetime(mechanism, now_ms)
        log.info(
            "sasl_reauthenticated" if self.reauthenticating else "sasl_authenticated",
            peer=self.peer,
            listener=self.listener.name,
            mechanism=mechanism.name,
            principal=principal,
            session_lifetime_ms=lifetime or None,
        )
        self.principal = principal
        self.authenticated = True
        self.reauthenticating = False
        self._mechanism = None
        self.expires_at_ms = now_ms + lifetime if lifetime else None
        return ErrorCode.none, None, challenge, lifetime

    def raw_token(self, token: bytes, now_ms: int) -> bytes | None:
        """The size-prefixed answer to a bare token (SaslHandshake v0), None to close."""
        error, _message, challenge, _lifetime = self.authenticate(token, now_ms)
        if error != ErrorCode.none:
            self.close_requested = True
            return None
        if self.authenticated:
            self.raw = False
        return SIZE.pack(len(challenge)) + challenge

    def _lifetime(self, mechanism: Mechanism, now_ms: int) -> int:
        name = mechanism.name.lower()
        text = listener_value(
            self.config, self.listener.name, f"{name}.connections.max.reauth.ms"
        ) or listener_value(self.config, self.listener.name, "connections.max.reauth.ms")
        max_reauth = int(text) if text else 0
        expiry = mechanism.expiry_ms
        if expiry is None and max_reauth <= 0:
            return 0
        if expiry is None:
            return min(max_reauth, MAX_SESSION_LIFETIME_MS)
        remaining = max(0, expiry - now_ms)
        lifetime = remaining if max_reauth <= 0 else min(remaining, max_reauth)
        return min(lifetime, MAX_SESSION_LIFETIME_MS)

    def _fail(self, reason: str, user: str | None = None) -> None:
        log.warning(
            "sasl_authentication_failed",
            peer=self.peer,
            listener=self.listener.name,
            mechanism=self.mechanism_name,
            user=user or None,
            reason=reason,
        )
        self.close_requested = True


def open_session(
    listener: Listener, runtime: Runtime, transport: asyncio.BaseTransport, peer: str
) -> SecuritySession:
    """The session of a connection just accepted on ``listener`` (its TLS handshake done)."""
    principal = "User:ANONYMOUS"
    if listener.uses_tls and not listener.uses_sasl:
        from kemu.broker.security.tls import peer_principal

        principal = peer_principal(transport.get_extra_info("peercert"))
    store = None
    if listener.uses_sasl:
        from kemu.broker.security.credentials import credentials

        store = credentials(runtime)
    return SecuritySession(listener, runtime.cluster.config, store, peer, principal)
