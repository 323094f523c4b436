"""Who may authenticate: PLAIN passwords and SCRAM credentials.

Sources, weakest first:
- ``kemu.sasl.users=alice:secret,bob:pw``: each user may use PLAIN, and gets SCRAM-SHA-256 and
  SCRAM-SHA-512 credentials (4096 iterations) made at start-up;
- a PLAIN JAAS config, ``listener.name.<l>.plain.sasl.jaas.config=...PlainLoginModule required
  user_alice="secret";`` (``sasl.jaas.config`` too), as Kafka's PlainServerCallbackHandler reads
  it: PLAIN only, for that listener;
- SCRAM credentials altered through AlterUserScramCredentials (key 51), kept in
  ``<data-dir>/kemu-scram-credentials.json`` (rewritten atomically on change) or in memory.

A SCRAM credential is what Kafka stores: salt, StoredKey, ServerKey, iterations (RFC 5802); the
password itself is never kept for SCRAM.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kemu.cluster.context import Runtime
from kemu.cluster.listeners import listener_value
from kemu.cluster.services import Service
from kemu.config.definitions import BrokerConfig, InvalidConfig
from kemu.storage.data_files import read_data_file
from kemu.storage.durable import fsync_directory

SCRAM_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MECHANISM_IDS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}  # ScramMechanism's wire ids
MIN_ITERATIONS = 4096  # both SHA-256 and SHA-512, as Kafka's ScramMechanism
MAX_ITERATIONS = 16384  # AlterUserScramCredentials refuses more
FILE_NAME = "kemu-scram-credentials.json"
REMEDY = (
    "restore it from a backup (removing it would drop every SCRAM credential set by "
    "AlterUserScramCredentials)"
)

_JAAS_USER = re.compile(r'user_([^=\s]+)\s*=\s*"((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def from_salted_password(
        cls, mechanism: str, salted: bytes, salt: bytes, iterations: int
    ) -> ScramCredential:
        digest = SCRAM_HASHES[mechanism]
        client_key = hmac.digest(salted, b"Client Key", digest)
        return cls(
            salt,
            hashlib.new(digest, client_key).digest(),
            hmac.digest(salted, b"Server Key", digest),
            iterations,
        )

    @classmethod
    def from_password(
        cls, mechanism: str, password: str, iterations: int = MIN_ITERATIONS
    ) -> ScramCredential:
        salt = secrets.token_bytes(16)
        salted = hashlib.pbkdf2_hmac(SCRAM_HASHES[mechanism], password.encode(), salt, iterations)
        return cls.from_salted_password(mechanism, salted, salt, iterations)

    def to_json(self) -> dict[str, Any]:
        return {
            "salt": base64.b64encode(self.salt).decode(),
            "stored_key": base64.b64encode(self.stored_key).decode(),
            "server_key": base64.b64encode(self.server_key).decode(),
            "iterations": self.iterations,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ScramCredential:
        return cls(
            base64.b64decode(data["salt"]),
            base64.b64decode(data["stored_key"]),
            base64.b64decode(data["server_key"]),
            int(data["iterations"]),
        )


def jaas_users(text: str | None) -> dict[str, str]:
    """``user_<name>="<password>"`` options of a JAAS config (PlainLoginModule's form)."""
    if not text:
        return {}
    return {name: value.replace('\\"', '"') for name, value in _JAAS_USER.findall(text)}


def config_users(config: BrokerConfig) -> dict[str, str]:
    """``kemu.sasl.users=alice:secret,bob:pw`` as user -> password; InvalidConfig for an entry
    that is not ``user:password`` (checked at start-up: such a user would only fail to log in)."""
    value = config.get("kemu.sasl.users") or ""
    users: dict[str, str] = {}
    for entry in value.split(","):
        if not entry.strip():
            continue
        name, sep, password = entry.strip().partition(":")
        if not sep or not name:
            raise InvalidConfig(
                f"Invalid value {value} for configuration kemu.sasl.users: {entry.strip()!r} "
                "is not user:password (entries are separated by commas)"
            )
        users[name] = password
    return users


class Credentials:
    """The process's credential store (runtime service ``sasl_credentials``)."""

    def __init__(self, config: BrokerConfig, data_dir: Path | None) -> None:
        self.config = config
        self.path = data_dir / FILE_NAME if data_dir is not None else None
        self.config_users = config_users(config)
        # user -> mechanism -> credential
        self.scram: dict[str, dict[str, ScramCredential]] = {
            user: {m: ScramCredential.from_password(m, pw) for m in SCRAM_HASHES}
            for user, pw in self.config_users.items()
        }
        self._altered: dict[str, dict[str, ScramCredential | None]] = {}
        stored = read_data_file(self.path, REMEDY, _decode_credentials) if self.path else None
        for user, mechanism, credential in stored or []:
            self._set(user, mechanism, credential)

    # --- PLAIN ----------------------------------------------------------------------------------

    def plain_password(self, listener: str, user: str) -> str | None:
        for name in ("plain.sasl.jaas.config", "sasl.jaas.config"):
            users = jaas_users(listener_value(self.config, listener, name))
            if user in users:
                return users[user]
        return self.config_users.get(user)

    def check_plain(self, listener: str, user: str, password: str) -> bool:
        expected = self.plain_password(listener, user)
        return expected is not None and hmac.compare_digest(expected.encode(), password.encode())

    # --- SCRAM ----------------------------------------------------------------------------------

    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        return self.scram.get(user, {}).get(mechanism)

    def users(self) -> list[str]:
        return sorted(user for user, mechanisms in self.scram.items() if mechanisms)

    def alter(self, changes: list[tuple[str, str, ScramCredential | None]]) -> None:
        """Apply upsertions (a credential) and deletions (None), then persist them."""
        for user, mechanism, credential in changes:
            self._set(user, mechanism, credential)
        self._save()

    def _set(self, user: str, mechanism: str, credential: ScramCredential | None) -> None:
        self._altered.setdefault(user, {})[mechanism] = credential
        if credential is None:
            self.scram.get(user, {}).pop(mechanism, None)
        else:
            self.scram.setdefault(user, {})[mechanism] = credential

    def _save(self) -> None:
        if self.path is None:
            return
        data = {
            "users": {
                user: {m: (None if c is None else c.to_json()) for m, c in mechanisms.items()}
                for user, mechanisms in self._altered.items()
            }
        }
        temporary = self.path.with_name(FILE_NAME + ".tmp")
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as file:
            json.dump(data, file)
            file.flush()
            os.fsync(file.fileno())
        temporary.replace(self.path)
        # the rename itself is durable only once the directory is synced (a power loss)
        fsync_directory(self.path.parent)


def _decode_credentials(stored: dict[str, Any]) -> list[tuple[str, str, ScramCredential | None]]:
    """(user, mechanism, credential or None for one deleted) of each entry the file keeps."""
    return [
        (user, mechanism, None if data is None else ScramCredential.from_json(data))
        for user, mechanisms in stored.get("users", {}).items()
        for mechanism, data in mechanisms.items()
    ]


CREDENTIALS = Service(
    "sasl_credentials", lambda rt: Credentials(rt.cluster.config, rt.cluster.data_dir)
)


def credentials(runtime: Runtime) -> Credentials:
    return runtime.services.get(CREDENTIALS)
