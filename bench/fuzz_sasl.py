"""``python -m bench.fuzz --sasl N``: N connections to SASL listeners, each an authentication
exchange (and often a KIP-368 re-authentication) with mutated steps.

The server has three listeners: PLAINTEXT, SASL_PLAINTEXT (every mechanism; sessions live
``REAUTH_MS`` ms, so re-authentication and expiry are reached) and SASL_SSL (PLAIN,
SCRAM-SHA-512 and OAUTHBEARER, the security tests' self-signed certificates). Most connections
are in-process ``Connection`` objects on one of the two SASL listeners (the ``SecuritySession``
code is the same behind TLS); ``tls_share`` of them go through real TLS sockets to the SASL_SSL
port, and a few of those send garbage instead of a TLS handshake.

Each connection plays a script: maybe ApiVersions, maybe a request before authentication,
SaslHandshake v0 or v1 with an enabled, unknown or mangled mechanism, then the mechanism's
tokens (PLAIN, SCRAM-SHA-256/512 computed from the server's real challenge, OAUTHBEARER
unsecured JWS) as SaslAuthenticate v0-v2 or, after a v0 handshake, as bare frames; then
requests, stray SaslAuthenticate/SaslHandshake, a wait past the session lifetime, and a
re-authentication with the same or another mechanism and user. Any step may be mutated:

- ``token``: a structural change of the mechanism's message (missing, repeated or unknown
  attributes, bad base64, a wrong nonce or proof, an empty or huge user, JWS claims that are
  not numbers, infinite, NaN, deeply nested, ...);
- ``bytes``: the token flipped, truncated or extended at the byte level;
- ``frame``: the whole request frame mutated as ``bench.fuzz`` mutates frames.

Crashes are counted as ``bench.fuzz`` counts them (an exception out of ``data_received``, a
``handler_failed``/``connection_failed`` log event, a failed task, a hang, a server that no
longer answers); each is printed with the frames of its connection.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import json
import random
import resource
import ssl
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from bench.fuzz import Crash, _CrashLog, _KeepingTransport, mutate
from kemu.broker.connection import Connection
from kemu.broker.endpoints import LISTENER_NODES
from kemu.broker.server import KemuServer
from kemu.cluster.listeners import Listener
from kemu.protocol import wire

USERS = {"alice": "alice-secret", "bob": "bob-secret"}
REAUTH_MS = 30
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
SSL_MECHANISMS = ("PLAIN", "SCRAM-SHA-512", "OAUTHBEARER")
API_VERSIONS, METADATA, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 3, 17, 36
STEP_MUTATIONS = ("none", "none", "none", "token", "token", "bytes", "frame")


def sasl_config(tls_dir: Path) -> dict[str, str]:
    """The broker configs of the SASL fuzzing server (certificates made in ``tls_dir``)."""
    from kemu.broker.security.tls import self_signed, write_keystore

    paths = self_signed(tls_dir)
    return {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "kemu.sasl.users": ",".join(f"{user}:{password}" for user, password in USERS.items()),
        "listener.name.sasl_plaintext.connections.max.reauth.ms": str(REAUTH_MS),
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": ",".join(SSL_MECHANISMS),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(write_keystore(paths)),
    }


def client_tls_context(tls_dir: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(tls_dir / "ca.pem"))
    context.check_hostname = False
    return context


# --- channels: the same script in process or over TLS -----------------------------------------


class InProcessChannel:
    def __init__(self, connection: Connection, transport: _KeepingTransport, timeout: float):
        self.connection = connection
        self.transport = transport
        self.timeout = timeout

    @property
    def peer(self) -> str:
        return f"127.0.0.1:{self.transport.port}"

    async def send(self, frame: bytes) -> None:
        self.connection.data_received(frame)  # an exception here is a crash: the caller notes it

    async def reply(self) -> bytes | None:
        """The next frame written (size prefix included), or None once the connection closed
        (or nothing came within the timeout)."""
        deadline = time.monotonic() + self.timeout
        buffer = self.transport.buffer
        while True:
            if len(buffer) >= 4:
                size = int.from_bytes(buffer[:4], "big")
                if len(buffer) >= 4 + size:
                    frame = bytes(buffer[: 4 + size])
                    del buffer[: 4 + size]
                    return frame
            if self.transport.closed or self.connection._closing:
                return None
            if time.monotonic() > deadline:
                return None
            await asyncio.sleep(0.001)

    async def close(self) -> list[asyncio.Task[Any]]:
        tasks = [slot for slot in self.connection._slots if isinstance(slot, asyncio.Task)]
        self.connection.connection_lost(None)
        return tasks


class SocketChannel:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, timeout: float):
        self.reader = reader
        self.writer = writer
        self.timeout = timeout
        self.closed = False
        host, port = writer.get_extra_info("sockname")[:2]
        self.peer = f"{host}:{port}"  # the server's name for this connection

    async def send(self, frame: bytes) -> None:
        if self.closed:
            return
        try:
            self.writer.write(frame)
            await self.writer.drain()
        except (ConnectionError, OSError):
            self.closed = True

    async def reply(self) -> bytes | None:
        if self.closed:
            return None
        try:
            size = await asyncio.wait_for(self.reader.readexactly(4), self.timeout)
            body = await asyncio.wait_for(
                self.reader.readexactly(int.from_bytes(size, "big")), self.timeout
            )
        except (asyncio.IncompleteReadError, ConnectionError, OSError, TimeoutError):
            self.closed = True
            return None
        return size + body

    async def close(self) -> list[asyncio.Task[Any]]:
        self.writer.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.writer.wait_closed(), 1)
        return []


Channel = InProcessChannel | SocketChannel


# --- the tokens, valid and mutated --------------------------------------------------------------


def unsecured_jws(claims: Any, header: Any = None) -> str:
    def part(value: Any) -> str:
        text = value if isinstance(value, str) else json.dumps(value, allow_nan=True)
        return base64.urlsafe_b64encode(text.encode()).rstrip(b"=").decode()

    return f"{part(header if header is not None else {'alg': 'none'})}.{part(claims)}."


def oauth_message(jws: str, authorization: str = "", scheme: str = "Bearer") -> bytes:
    return f"n,{authorization},\x01auth={scheme} {jws}\x01\x01".encode()


@dataclass
class ScramClient:
    """The client side of RFC 5802, enough to reach the server's every step."""

    mechanism: str
    user: str
    password: str
    nonce: str
    gs2_header: str = "n,,"

    @property
    def digest(self) -> str:
        return "sha256" if self.mechanism == "SCRAM-SHA-256" else "sha512"

    def first(self) -> str:
        name = self.user.replace("=", "=3D").replace(",", "=2C")
        return f"{self.gs2_header}n={name},r={self.nonce}"

    def final(self, server_first: str, salted_cache: dict[tuple[Any, ...], bytes]) -> str:
        attributes = dict(part.split("=", 1) for part in server_first.split(",") if "=" in part)
        salt = base64.b64decode(attributes["s"])
        iterations = int(attributes["i"])
        key = (self.digest, self.password, salt, iterations)
        salted = salted_cache.get(key)
        if salted is None:
            salted = hashlib.pbkdf2_hmac(self.digest, self.password.encode(), salt, iterations)
            salted_cache[key] = salted
        client_key = hmac.digest(salted, b"Client Key", self.digest)
        stored_key = hashlib.new(self.digest, client_key).digest()
        binding = base64.b64encode(self.gs2_header.encode()).decode()
        without_proof = f"c={binding},r={attributes['r']}"
        client_first_bare = self.first()[len(self.gs2_header) :]
        auth_message = f"{client_first_bare},{server_first},{without_proof}".encode()
        signature = hmac.digest(stored_key, auth_message, self.digest)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        return f"{without_proof},p={base64.b64encode(proof).decode()}"


def mangle_text(text: str, rng: random.Random) -> str:
    """A structural change of a comma-separated SASL message."""
    parts = text.split(",")
    roll = rng.randrange(10)
    if roll == 0 and parts:
        del parts[rng.randrange(len(parts))]
    elif roll == 1 and parts:
        parts.insert(rng.randrange(len(parts) + 1), rng.choice(parts))
    elif roll == 2:
        parts.insert(
            rng.randrange(len(parts) + 1),
            rng.choice(("x=1", "=", "", "tokenauth=true", "m=ext", "r=", "zz", "p=", "a=b")),
        )
    elif roll == 3 and parts:
        at = rng.randrange(len(parts))
        parts[at] = parts[at].partition("=")[0] + "=" + rng.choice(("", "=2", "=ZZ", "***", "é"))
    elif roll == 4:
        return text.replace("=", rng.choice(("", "==", ":")), 1)
    elif roll == 5:
        return text + rng.choice(
            ("\x00", ",", "\udcff".encode("utf-8", "surrogatepass").decode("latin-1"))
        )
    elif roll == 6:
        return rng.choice(("", ",", ",,", "n", "y,,", "p=tls-unique,,n=alice,r=x", "n,,n=,r="))
    elif roll == 7 and parts:
        at = rng.randrange(len(parts))
        parts[at] = parts[at] * rng.choice((2, 100, 5000))
    elif roll == 8:
        return text.replace("n,", rng.choice(("y,", "p=x,", "n,a=bob,", "n,a=alice,", "N,")), 1)
    else:
        parts.reverse()
    return ",".join(parts)


def mangle_bytes(token: bytes, rng: random.Random) -> bytes:
    data = bytearray(token)
    roll = rng.randrange(4)
    if roll == 0 and data:
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
    elif roll == 1:
        del data[rng.randrange(len(data) + 1) :]
    elif roll == 2:
        data += rng.randbytes(rng.randint(1, 64))
    else:
        data = bytearray(
            rng.choice((b"", b"\xff\xfe", b"\x00" * 3, b"\x80" * 100, rng.randbytes(300)))
        )
    return bytes(data)


def plain_token(user: str, password: str, rng: random.Random, mutation: str) -> bytes:
    if mutation != "token":
        return f"\x00{user}\x00{password}".encode()
    roll = rng.randrange(8)
    if roll == 0:
        return f"{user}\x00{password}".encode()
    if roll == 1:
        return f"\x00{user}\x00{password}\x00extra".encode()
    if roll == 2:
        return f"other\x00{user}\x00{password}".encode()
    if roll == 3:
        return f"\x00\x00{password}".encode()
    if roll == 4:
        return f"\x00{user}\x00".encode()
    if roll == 5:
        return f"\x00{user}\x00wrong".encode()
    if roll == 6:
        return b"\x00" + b"u" * rng.choice((1000, 70000)) + b"\x00p"
    return f"{user}\x00{user}\x00{password}".encode() + rng.randbytes(2)


def oauth_token(user: str, now_ms: int, rng: random.Random, mutation: str) -> bytes:
    expiry = (now_ms + rng.choice((REAUTH_MS // 2, 10_000, 3_600_000))) / 1000
    if mutation != "token":
        return oauth_message(unsecured_jws({"sub": user, "exp": expiry, "iat": now_ms / 1000}))
    claims: Any = {"sub": user, "exp": expiry}
    header: Any = None
    roll = rng.randrange(16)
    if roll == 0:
        claims["exp"] = rng.choice((float("inf"), float("-inf"), float("nan"), 1e400, -1e400))
    elif roll == 1:
        claims["exp"] = rng.choice(("soon", None, True, [], {}, 10**30, -(10**30), 0, -1))
    elif roll == 2:
        claims["sub"] = rng.choice((None, 7, "", " ", [], {"a": 1}, "x" * 5000))
    elif roll == 3:
        claims["iat"] = rng.choice((float("nan"), float("inf"), "now", True, expiry + 100, 1e400))
    elif roll == 4:
        depth = rng.choice((100, 2000, 200_000))
        claims = "[" * depth + "]" * depth
    elif roll == 5:
        claims = rng.choice(([1, 2], "null", "1", '"s"', "{", '{"sub": "a", "exp": 1e999}'))
    elif roll == 6:
        header = rng.choice(({"alg": "HS256"}, {"alg": None}, [], "null", "{", {}))
    elif roll == 7:
        return oauth_message(rng.choice(("a.b.c", "a.b", "...", "", ".", "x" * 100)))
    elif roll == 8:
        return oauth_message(unsecured_jws(claims) + "sig")
    elif roll == 9:
        return oauth_message(unsecured_jws(claims), scheme=rng.choice(("", "Basic", "bearer")))
    elif roll == 10:
        return oauth_message(unsecured_jws(claims), authorization=rng.choice(("a=bob", "a=", "x")))
    elif roll == 11:
        return rng.choice((b"\x01", b"n,,\x01\x01", b"n,,\x01auth=\x01\x01", b"y,,\x01\x01\x01"))
    elif roll == 12:
        jws = unsecured_jws(claims)
        return oauth_message(jws[: rng.randrange(len(jws))] + rng.choice(("%", "!", "====", "é")))
    elif roll == 13:
        return mangle_text(oauth_message(unsecured_jws(claims)).decode(), rng).encode(
            "utf-8", "surrogatepass"
        )
    elif roll == 14:
        claims = {"sub": user, "exp": expiry, "extra": {"deep": [[[[["x"]]]]]}, "scope": 1}
    else:
        claims["exp"] = (now_ms - 1000) / 1000  # expired
    return oauth_message(unsecured_jws(claims, header))


# --- the fuzzer ---------------------------------------------------------------------------------


@dataclass
class SaslReport:
    connections: int = 0
    frames: int = 0
    per_mechanism: Counter[str] = field(default_factory=Counter)
    per_mutation: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)
    crashes: list[Crash] = field(default_factory=list)
    reauthenticated: int = 0  # successful KIP-368 re-authentications
    seconds: float = 0.0
    max_rss_kib: int = 0


class SaslFuzzer:
    def __init__(
        self,
        server: KemuServer,
        seed: int,
        answer_timeout: float,
        crash_log: _CrashLog,
        tls: ssl.SSLContext | None,
        tls_share: float = 0.05,
    ) -> None:
        self.server = server
        self.rng = random.Random(seed)
        self.answer_timeout = answer_timeout
        self.crash_log = crash_log
        self.tls = tls
        self.tls_share = tls_share
        self.report = SaslReport()
        self.listeners = {
            listener.name: listener for listener in server.listeners if listener.uses_sasl
        }
        self.sessions: dict[str, list[bytes]] = {}  # peer -> the frames it sent
        self.salted: dict[tuple[Any, ...], bytes] = {}
        self.correlation = 0
        self.loop_errors: list[str] = []
        self._ports = 0

    def loop_error(self, _loop: Any, context: dict[str, Any]) -> None:
        error = context.get("exception")
        text = context.get("message", "")
        if error is not None:
            text += "\n" + "".join(traceback.format_exception(error))
        self.loop_errors.append(text)

    async def run(self, connections: int, concurrency: int) -> SaslReport:
        began = time.monotonic()
        rngs = [random.Random(self.rng.getrandbits(64)) for _ in range(connections)]
        for start in range(0, connections, concurrency):
            batch = rngs[start : start + concurrency]
            await asyncio.gather(*(self.connection(rng) for rng in batch))
            self._collect("")
        await self._still_serving()
        self.report.seconds = time.monotonic() - began
        self.report.max_rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return self.report

    # --- one connection ---------------------------------------------------------------------

    async def connection(self, rng: random.Random) -> None:
        report = self.report
        report.connections += 1
        over_tls = self.tls is not None and rng.random() < self.tls_share
        listener = self.listeners[
            "SASL_SSL" if over_tls or rng.random() < 0.3 else "SASL_PLAINTEXT"
        ]
        if over_tls and rng.random() < 0.1:
            await self._tls_garbage(listener, rng)
            return
        channel = await self._open(listener, rng, over_tls)
        if channel is None:
            return
        sent: list[bytes] = []
        self.sessions[channel.peer] = sent
        outcome = "?"
        try:
            outcome = await self._script(channel, listener, rng, sent)
        except _Crashed as crashed:
            self._crash("exception", channel.peer, crashed.detail)
            outcome = "crash"
        finally:
            report.outcomes[outcome] += 1
            tasks = await channel.close()
            if tasks:
                await asyncio.wait(tasks, timeout=5)
                if any(not task.done() for task in tasks):
                    self._crash("hang", channel.peer, "still running 5 s after the close")
            self._collect(channel.peer)
            self.sessions.pop(channel.peer, None)

    async def _open(self, listener: Listener, rng: random.Random, over_tls: bool) -> Channel | None:
        node_id = rng.choice(self.server.cluster.node_ids)
        if over_tls:
            assert self.tls is not None
            try:
                reader, writer = await asyncio.open_connection(
                    listener.host, listener.port + node_id - 1, ssl=self.tls
                )
            except (OSError, ssl.SSLError) as error:
                self._crash("tls", "?", f"TLS connection refused: {error}")
                return None
            return SocketChannel(reader, writer, max(self.answer_timeout, 2.0))
        nodes = self.server.runtime.services.get(LISTENER_NODES)[listener.name]
        connection = Connection(nodes[node_id], self.server.runtime, listener)
        self._ports += 1
        transport = _KeepingTransport(100_000_000 + self._ports)  # peers apart from bench.fuzz's
        connection.connection_made(transport)  # type: ignore[arg-type]
        return InProcessChannel(connection, transport, self.answer_timeout)

    async def _tls_garbage(self, listener: Listener, rng: random.Random) -> None:
        """Bytes that are not a TLS handshake on the TLS port: kemu logs and closes."""
        self.report.outcomes["tls garbage"] += 1
        try:
            reader, writer = await asyncio.open_connection(listener.host, listener.port)
            writer.write(
                rng.choice((rng.randbytes(rng.randint(1, 600)), b"\x16\x03\x01\x00\x05hello"))
            )
            await writer.drain()
            writer.write_eof()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(reader.read(), 2)
            writer.close()
        except OSError:
            pass

    async def _script(
        self, channel: Channel, listener: Listener, rng: random.Random, sent: list[bytes]
    ) -> str:
        enabled = MECHANISMS if listener.name == "SASL_PLAINTEXT" else SSL_MECHANISMS
        if rng.random() < 0.5:
            await self._request(channel, rng, sent, API_VERSIONS, rng.randint(0, 4))
            if await channel.reply() is None:
                return "closed at ApiVersions"
        if rng.random() < 0.04:  # before authentication: closes
            await self._request(channel, rng, sent, METADATA, 12, topics=None)
            if await channel.reply() is None:
                return "closed before authentication"
        mechanism = rng.choice(enabled)
        user = rng.choice(tuple(USERS))
        outcome = await self._authenticate(channel, rng, sent, enabled, mechanism, user, False)
        if outcome != "authenticated":
            return outcome
        for _ in range(rng.randint(0, 3)):
            roll = rng.random()
            if roll < 0.3 and listener.name == "SASL_PLAINTEXT":
                await asyncio.sleep(REAUTH_MS * rng.choice((0.5, 1.5, 2)) / 1000)
            elif roll < 0.45:  # stray SASL requests on an authenticated connection
                if rng.random() < 0.5:
                    await self._request(
                        channel, rng, sent, SASL_AUTHENTICATE, rng.randint(0, 2), auth_bytes=b"x"
                    )
                else:
                    await self._request(channel, rng, sent, SASL_HANDSHAKE, 0, mechanism=mechanism)
                if await channel.reply() is None:
                    return "closed after a stray SASL request"
                continue
            elif roll < 0.8:
                reauth_mechanism = mechanism if rng.random() < 0.85 else rng.choice(enabled)
                reauth_user = user if rng.random() < 0.85 else rng.choice(tuple(USERS))
                outcome = await self._authenticate(
                    channel, rng, sent, enabled, reauth_mechanism, reauth_user, True
                )
                if outcome != "authenticated":
                    return f"re-authentication: {outcome}"
                self.report.reauthenticated += 1
                continue
            await self._request(channel, rng, sent, METADATA, 12, topics=None)
            if await channel.reply() is None:
                return "closed after authentication (expired)"
        return "authenticated"

    async def _authenticate(
        self,
        channel: Channel,
        rng: random.Random,
        sent: list[bytes],
        enabled: tuple[str, ...],
        mechanism: str,
        user: str,
        reauthenticating: bool,
    ) -> str:
        report = self.report
        named = mechanism
        if rng.random() < 0.05:
            named = rng.choice(("GSSAPI", "plain", "", "SCRAM-SHA-1", "X" * 300, "PLAIN\x00"))
        version = 1 if reauthenticating or rng.random() < 0.8 else 0
        if reauthenticating and rng.random() < 0.05:
            version = 0
        report.per_mechanism[named if named in MECHANISMS else "other"] += 1
        await self._request(channel, rng, sent, SASL_HANDSHAKE, version, mechanism=named)
        answer = await channel.reply()
        if answer is None:
            return "closed at the handshake"
        error, _ = self._decode(answer, SASL_HANDSHAKE, version)
        if error != 0:
            return f"handshake error {error}"
        raw = version == 0
        password = USERS[user] if rng.random() < 0.95 else "wrong"
        now_ms = int(time.time() * 1000)
        if mechanism == "PLAIN":
            mutation = self._mutation(rng)
            token = plain_token(user, password, rng, mutation)
            return await self._token(channel, rng, sent, token, mutation, raw, final=True)
        if mechanism == "OAUTHBEARER":
            mutation = self._mutation(rng)
            token = oauth_token(user, now_ms, rng, mutation)
            outcome = await self._token(channel, rng, sent, token, mutation, raw, final=False)
            if outcome == "challenge ":
                return "authenticated"  # a valid token: no challenge
            if outcome.startswith("challenge"):
                # an error challenge (invalid token): the client acknowledges it with 0x01
                return await self._token(channel, rng, sent, b"\x01", "none", raw, final=True)
            return outcome
        client = ScramClient(
            mechanism, user, password, base64.b64encode(rng.randbytes(12)).decode()
        )
        mutation = self._mutation(rng)
        first = client.first()
        if mutation == "token":
            first = mangle_text(first, rng)
        outcome = await self._token(
            channel, rng, sent, first.encode("utf-8", "surrogatepass"), mutation, raw, final=False
        )
        if not outcome.startswith("challenge"):
            return outcome
        server_first = outcome.partition(" ")[2]
        try:
            final = client.final(server_first, self.salted)
        except (ValueError, KeyError, IndexError):
            final = "c=biws,r=x,p=AAAA"
        mutation = self._mutation(rng)
        if mutation == "token":
            final = mangle_text(final, rng)
        return await self._token(
            channel, rng, sent, final.encode("utf-8", "surrogatepass"), mutation, raw, final=True
        )

    def _mutation(self, rng: random.Random) -> str:
        mutation = rng.choice(STEP_MUTATIONS)
        self.report.per_mutation[mutation] += 1
        return mutation

    async def _token(
        self,
        channel: Channel,
        rng: random.Random,
        sent: list[bytes],
        token: bytes,
        mutation: str,
        raw: bool,
        final: bool,
    ) -> str:
        """Send one token; "authenticated", "challenge <text>" or why it ended."""
        if mutation == "bytes":
            token = mangle_bytes(token, rng)
        if raw:
            frame = len(token).to_bytes(4, "big") + token
            if mutation == "frame":
                frame = mutate(frame, rng.choice(("flip", "truncate", "extend", "size")), rng)
            await self._send(channel, sent, frame)
            answer = await channel.reply()
            if answer is None:
                return "closed at a token (v0)"
            body = answer[4:]
            if final or not body:
                return "authenticated" if final else "challenge "
            return "challenge " + body.decode("utf-8", "replace")
        version = rng.randint(0, 2)
        await self._request(
            channel, rng, sent, SASL_AUTHENTICATE, version, mutation == "frame", auth_bytes=token
        )
        answer = await channel.reply()
        if answer is None:
            return "closed at a token"
        error, body = self._decode(answer, SASL_AUTHENTICATE, version)
        if error != 0:
            # Kafka closes after the answer; one more request must find the connection closed
            return f"authentication error {error}"
        auth_bytes = bytes(getattr(body, "auth_bytes", b"") or b"") if body is not None else b""
        if final:
            return "authenticated"
        return "challenge " + auth_bytes.decode("utf-8", "replace")

    async def _request(
        self,
        channel: Channel,
        rng: random.Random,
        sent: list[bytes],
        api_key: int,
        version: int,
        mutated: bool = False,
        **fields: Any,
    ) -> None:
        self.correlation += 1
        body = wire.build(wire.request_schema(api_key, version), **fields)
        frame = wire.encode_request_frame(body, self.correlation, "fuzz-sasl")
        if mutated or rng.random() < 0.03:
            frame = mutate(
                frame,
                rng.choice(("flip", "truncate", "extend", "length", "varint", "header", "size")),
                rng,
            )
        await self._send(channel, sent, frame)

    async def _send(self, channel: Channel, sent: list[bytes], frame: bytes) -> None:
        self.report.frames += 1
        sent.append(frame)
        try:
            await channel.send(frame)
        except Exception:
            raise _Crashed(traceback.format_exc()) from None

    @staticmethod
    def _decode(answer: bytes, api_key: int, version: int) -> tuple[int, Any]:
        try:
            _correlation, body = wire.decode_response(api_key, version, answer[4:])
        except Exception:
            return -999, None  # e.g. the answer to a frame whose header was mutated
        return int(getattr(body, "error_code", 0)), body

    # --- crashes ----------------------------------------------------------------------------

    def _collect(self, peer: str) -> None:
        while self.crash_log.events:
            logged_peer, detail = self.crash_log.events.pop(0)
            self._crash("logged", logged_peer, detail)
        while self.loop_errors:
            self._crash("loop", peer, self.loop_errors.pop(0))

    def _crash(self, kind: str, peer: str, detail: str) -> None:
        frames = self.sessions.get(peer, [])
        self.report.crashes.append(
            Crash(kind, SASL_AUTHENTICATE, 0, "sasl", b"".join(frames), detail)
        )

    async def _still_serving(self) -> None:
        """A PLAIN authentication and a Metadata still work after everything."""
        rng = random.Random(0)
        listener = self.listeners["SASL_PLAINTEXT"]
        channel = await self._open(listener, rng, over_tls=False)
        assert channel is not None
        sent: list[bytes] = []
        await self._request(channel, rng, sent, SASL_HANDSHAKE, 1, mechanism="PLAIN")
        ok = await channel.reply() is not None
        await self._request(
            channel, rng, sent, SASL_AUTHENTICATE, 2, auth_bytes=b"\x00alice\x00alice-secret"
        )
        answer = await channel.reply()
        ok = ok and answer is not None and self._decode(answer, SASL_AUTHENTICATE, 2)[0] == 0
        await self._request(channel, rng, sent, METADATA, 12, topics=None)
        ok = ok and await channel.reply() is not None
        await channel.close()
        if not ok:
            self._crash("not serving", channel.peer, "a valid PLAIN exchange failed after fuzzing")


class _Crashed(Exception):
    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def print_sasl_report(report: SaslReport, out: Any = print) -> None:
    out(
        f"SASL connections: {report.connections}, frames {report.frames}, in {report.seconds:.1f} s"
    )
    out(
        "mechanisms named: "
        + ", ".join(f"{k} {v}" for k, v in sorted(report.per_mechanism.items()))
    )
    out("step mutations: " + ", ".join(f"{k} {v}" for k, v in sorted(report.per_mutation.items())))
    out("outcomes: " + ", ".join(f"{k} {v}" for k, v in report.outcomes.most_common()))
    out(f"re-authentications that succeeded: {report.reauthenticated}")
    out(f"max RSS: {report.max_rss_kib / 1024:.1f} MiB")
    out(f"SASL crashes: {len(report.crashes)}")
    kinds: dict[str, list[Crash]] = {}
    for crash in report.crashes:
        kinds.setdefault(crash.signature, []).append(crash)
    for signature, crashes in kinds.items():
        out(f"--- {len(crashes)} x {signature}")
        out(crashes[0].describe()[:3000])


async def fuzz_sasl(
    connections: int,
    seed: int,
    *,
    data_dir: Path,
    answer_timeout: float = 0.5,
    concurrency: int = 128,
    tls_share: float = 0.05,
) -> SaslReport:
    """Run ``connections`` SASL connections against a fresh in-process kemu on ``data_dir``."""
    from bench.fuzz import CONFIG, fuzzing_server

    tls_dir = data_dir / "tls"
    config = {**CONFIG, **sasl_config(tls_dir)}
    logging_config = structlog.get_config()
    async with fuzzing_server(data_dir / "kemu", config) as server:
        crash_log = _CrashLog()
        structlog.configure(processors=[crash_log], cache_logger_on_first_use=False)
        fuzzer = SaslFuzzer(
            server,
            seed,
            answer_timeout,
            crash_log,
            client_tls_context(tls_dir) if tls_share > 0 else None,
            tls_share,
        )
        asyncio.get_running_loop().set_exception_handler(fuzzer.loop_error)
        try:
            return await fuzzer.run(connections, concurrency)
        finally:
            structlog.configure(**logging_config)
