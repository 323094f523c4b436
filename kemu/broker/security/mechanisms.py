"""SASL server mechanisms as Kafka's brokers run them: PLAIN (PlainSaslServer), SCRAM-SHA-256/512
(ScramSaslServer, RFC 5802/7677 over hashlib's PBKDF2 and hmac) and OAUTHBEARER with unsecured
JWS tokens (OAuthBearerSaslServer with the default OAuthBearerUnsecuredValidatorCallbackHandler).

Each is sans IO: ``evaluate(token, now_ms)`` returns the server's challenge (b"" when there is
none) and sets ``complete``; a refusal raises ``AuthenticationFailed`` carrying the message
Kafka sends the client and the reason kemu logs. Kafka hides why a SCRAM or malformed
OAUTHBEARER exchange failed behind one message ("Authentication failed during authentication
due to invalid credentials with SASL mechanism ..."); PLAIN and the OAUTHBEARER error status
reach the client as Kafka words them.

Omissions: SCRAM delegation-token authentication (``tokenauth``), OAUTHBEARER's
``unsecuredValidator*`` options other than the defaults (principal claim ``sub``, no required
scope, no clock skew), JWKS-validated (secured) OAUTHBEARER tokens, GSSAPI.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import math
import secrets
from collections.abc import Callable
from typing import Protocol

from kemu.broker.security.credentials import MIN_ITERATIONS, SCRAM_HASHES, Credentials


class AuthenticationFailed(Exception):
    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.message = message  # what the client reads
        self.reason = reason or message  # what the log says


class Mechanism(Protocol):
    name: str
    complete: bool
    user: str
    expiry_ms: int | None  # when the credential stops being valid (an OAUTHBEARER token)

    def evaluate(self, token: bytes, now_ms: int) -> bytes: ...


def invalid_credentials(mechanism: str, reason: str) -> AuthenticationFailed:
    # SaslServerAuthenticator: a SaslException's text may reveal whether a user exists.
    return AuthenticationFailed(
        "Authentication failed during authentication due to invalid credentials with SASL "
        f"mechanism {mechanism}",
        reason,
    )


class PlainServer:
    name = "PLAIN"

    def __init__(self, credentials: Credentials, listener: str) -> None:
        self.credentials = credentials
        self.listener = listener
        self.complete = False
        self.user = ""
        self.expiry_ms: int | None = None

    def evaluate(self, token: bytes, now_ms: int) -> bytes:
        parts = token.decode("utf-8", "replace").split("\x00")
        if len(parts) != 3:
            raise AuthenticationFailed(
                f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}"
            )
        authorization_id, user, password = parts
        if not user:
            raise AuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise AuthenticationFailed("Authentication failed: password not specified")
        self.user = user
        if not self.credentials.check_plain(self.listener, user, password):
            raise AuthenticationFailed(
                "Authentication failed: Invalid username or password",
                f"invalid username or password for user {user}",
            )
        if authorization_id and authorization_id != user:
            raise AuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is different "
                "from username"
            )
        self.complete = True
        return b""


def _attributes(text: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise ValueError(f"bad SCRAM attribute {part!r}")
        values[key] = value
    return values


class ScramServer:
    def __init__(
        self,
        mechanism: str,
        credentials: Credentials,
        server_nonce: Callable[[], str] = lambda: secrets.token_urlsafe(24),
    ) -> None:
        self.server_nonce = server_nonce  # a test may fix it (RFC 7677's example)
        self.name = mechanism
        self.digest = SCRAM_HASHES[mechanism]
        self.credentials = credentials
        self.complete = False
        self.user = ""
        self.expiry_ms: int | None = None
        self._step = 0
        self._client_first_bare = ""
        self._server_first = ""
        self._gs2_header = ""
        self._nonce = ""

    def evaluate(self, token: bytes, now_ms: int) -> bytes:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise invalid_credentials(self.name, "SCRAM message is not UTF-8") from None
        if self._step == 0:
            return self._first(text)
        if self._step == 1:
            return self._final(text)
        raise invalid_credentials(self.name, "SCRAM exchange already complete")

    def _first(self, text: str) -> bytes:
        # gs2-header "n,," or "n,a=<authzid>,", then "n=<user>,r=<nonce>[,extensions]"
        try:
            flag, authorization, bare = text.split(",", 2)
            if flag != "n":
                raise ValueError("channel binding is not supported")
            attributes = _attributes(bare)
            user = attributes["n"].replace("=2C", ",").replace("=3D", "=")
            client_nonce = attributes["r"]
        except (ValueError, KeyError) as error:
            raise invalid_credentials(self.name, f"invalid client-first message: {error}") from None
        extensions = set(attributes) - {"n", "r"}
        if "tokenauth" in {part.partition("=")[0] for part in bare.split(",")}:
            raise invalid_credentials(self.name, "delegation tokens are not supported")
        self.user = user
        authorization_id = authorization[2:] if authorization.startswith("a=") else ""
        credential = self.credentials.scram_credential(user, self.name)
        if credential is None:
            raise invalid_credentials(self.name, f"no {self.name} credential for user {user}")
        if authorization_id and authorization_id != user:
            raise AuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is different "
                "from username"
            )
        if credential.iterations < MIN_ITERATIONS:
            raise invalid_credentials(
                self.name,
                f"Iterations {credential.iterations} is less than the minimum {MIN_ITERATIONS} "
                f"for {self.name}",
            )
        del extensions
        self._credential = credential
        self._gs2_header = f"{flag},{authorization},"
        self._client_first_bare = bare
        self._nonce = client_nonce + self.server_nonce()
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={credential.iterations}"
        self._step = 1
        return self._server_first.encode()

    def _final(self, text: str) -> bytes:
        try:
            without_proof, _, proof_text = text.rpartition(",p=")
            attributes = _attributes(without_proof)
            proof = base64.b64decode(proof_text, validate=True)
            binding = base64.b64decode(attributes["c"], validate=True).decode()
        except (ValueError, KeyError, binascii.Error) as error:
            raise invalid_credentials(self.name, f"invalid client-final message: {error}") from None
        if attributes.get("r") != self._nonce:
            raise invalid_credentials(
                self.name, "Invalid client nonce in the final client message."
            )
        if binding != self._gs2_header:
            raise invalid_credentials(self.name, "channel binding does not match the gs2 header")
        credential = self._credential
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = hmac.digest(credential.stored_key, auth_message, self.digest)
        if len(proof) != len(signature):
            raise invalid_credentials(self.name, f"invalid client proof for user {self.user}")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(
            hashlib.new(self.digest, client_key).digest(), credential.stored_key
        ):
            raise invalid_credentials(self.name, f"invalid client proof for user {self.user}")
        server_signature = hmac.digest(credential.server_key, auth_message, self.digest)
        self._step = 2
        self.complete = True
        return b"v=" + base64.b64encode(server_signature)


def _not_json(constant: str) -> float:
    raise ValueError(f"{constant} is not a JSON number")


def _b64url_json(part: str) -> dict[str, object]:
    padded = part + "=" * (-len(part) % 4)
    try:
        # NaN and Infinity are not JSON (Kafka's Jackson refuses them too)
        value = json.loads(base64.urlsafe_b64decode(padded.encode()), parse_constant=_not_json)
    except RecursionError:
        # nested deeper than the interpreter's stack (Jackson stops at its nesting limit)
        raise ValueError("JSON nested too deeply") from None
    if not isinstance(value, dict):
        raise ValueError("not a JSON object")
    return value


LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


def _claim_ms(value: object) -> int | None:
    """A time claim (seconds) in ms as Kafka computes it, ``Math.round(seconds * 1000)`` on a
    double (saturating at Java's long bounds: a huge or 1e400 ``exp`` never expires); None
    when the claim is not a number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float):
        if math.isnan(value):
            return None
        if math.isinf(value):
            return LONG_MAX if value > 0 else LONG_MIN
        value = round(value * 1000)
    else:
        value *= 1000
    return max(LONG_MIN, min(LONG_MAX, value))


class OAuthBearerServer:
    """Unsecured JWS tokens: header ``{"alg":"none"}``, a string ``sub``, a numeric ``exp``
    (seconds) in the future, ``iat`` (if present) a number; an empty signature."""

    name = "OAUTHBEARER"
    principal_claim = "sub"

    def __init__(self) -> None:
        self.complete = False
        self.user = ""
        self.expiry_ms: int | None = None
        self._error: str | None = None
        self._reason = ""

    def evaluate(self, token: bytes, now_ms: int) -> bytes:
        if token == b"\x01" and self._error is not None:
            # The client's acknowledgement of our error challenge.
            raise AuthenticationFailed(self._error, f"invalid token: {self._reason}")
        self._error = None
        try:
            text = token.decode("utf-8")
            header, _, rest = text.partition(",")  # "n,," or "n,a=<authzid>,"
            authorization, _, pairs = rest.partition(",")
            if header != "n" or not pairs.startswith("\x01") or not pairs.endswith("\x01\x01"):
                raise ValueError("Invalid OAUTHBEARER client first message")
            values = dict(
                item.partition("=")[::2] for item in pairs.strip("\x01").split("\x01") if item
            )
            scheme, _, jws = values["auth"].partition(" ")
            if scheme.lower() != "bearer" or not jws:
                raise ValueError("Invalid OAUTHBEARER client first message")
        except (ValueError, KeyError, UnicodeDecodeError) as error:
            raise invalid_credentials(self.name, f"malformed client message: {error}") from None
        authorization_id = authorization[2:] if authorization.startswith("a=") else ""
        problem = self._validate(jws.strip(), now_ms)
        if problem is not None:
            self._reason = problem
            self._error = '{"status":"invalid_token"}'
            return self._error.encode()
        if authorization_id and authorization_id != self.user:
            raise AuthenticationFailed(
                "Authentication failed: Client requested an authorization id "
                f"({authorization_id}) that is different from the token's principal name "
                f"({self.user})"
            )
        self.complete = True
        return b""

    def _validate(self, jws: str, now_ms: int) -> str | None:
        parts = jws.split(".")
        if len(parts) != 3 or parts[2]:
            return "not an unsecured JWS (header.claims. with an empty signature)"
        try:
            header, claims = _b64url_json(parts[0]), _b64url_json(parts[1])
        except (ValueError, binascii.Error) as error:
            return f"cannot decode the token: {error}"
        if header.get("alg") != "none":
            return f"unsecured JWS must have alg none, got {header.get('alg')!r}"
        subject = claims.get(self.principal_claim)
        if not isinstance(subject, str) or not subject.strip():
            return f"no principal claim '{self.principal_claim}'"
        expiry_ms = _claim_ms(claims.get("exp"))
        if expiry_ms is None:
            return "no numeric 'exp' claim"
        issued_ms = _claim_ms(claims["iat"]) if "iat" in claims else None
        if "iat" in claims and issued_ms is None:
            return "'iat' claim is not a number"
        if expiry_ms <= now_ms:
            return f"the token expired at {expiry_ms} (now {now_ms})"
        if issued_ms is not None and issued_ms > expiry_ms:
            return "the token's 'iat' is after its 'exp'"
        self.user = subject
        self.expiry_ms = expiry_ms
        return None


def server_for(mechanism: str, credentials: Credentials, listener: str) -> Mechanism:
    if mechanism == "PLAIN":
        return PlainServer(credentials, listener)
    if mechanism in SCRAM_HASHES:
        return ScramServer(mechanism, credentials)
    return OAuthBearerServer()
