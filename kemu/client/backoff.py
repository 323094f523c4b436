"""How long a client waits after a failure, as Kafka's clients do: exponential backoff with
jitter (KIP-144 for connections, KIP-580 for retries and metadata).

- ``reconnect_backoff_ms`` → ``reconnect_backoff_max_ms``: per broker address, a connection is
  not attempted again until the backoff since the last attempt (or since it broke) has passed;
  each failed attempt doubles it, an established connection (ApiVersions answered) resets it
  (Java's ``ClusterConnectionStates``).
- ``retry_backoff_ms`` → ``retry_backoff_max_ms``: between the attempts of a retried request,
  and between metadata requests: after a refresh the next waits ``retry_backoff_ms``, after a
  failed one twice as long per failure since the last success (Java's ``Metadata``).

Each wait is the base times 2 per failure, capped at the maximum, times a random factor in
[0.8, 1.2) that never takes it past the maximum. The random factor comes from the client's own
``random.Random``: an injected one, or one seeded from ``uuid.uuid4()`` (so a simulation that
seeds ``uuid4`` replays the same waits).
"""

from __future__ import annotations

import math
import random
import uuid
from dataclasses import dataclass

JITTER = 0.2  # CommonClientConfigs.RETRY_BACKOFF_JITTER, ClusterConnectionStates' too


@dataclass(frozen=True, slots=True)
class Backoff:
    """The settings of Kafka's clients of the same names, with their defaults (milliseconds)."""

    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 1000
    reconnect_backoff_ms: int = 50
    reconnect_backoff_max_ms: int = 1000

    def __post_init__(self) -> None:
        for name in self.__slots__:
            if getattr(self, name) < 0:
                raise ValueError(f"{name} cannot be negative")


def client_rng(rng: random.Random | None) -> random.Random:
    """``rng``, or a new one seeded from ``uuid.uuid4()`` (random, unless a simulation seeds it)."""
    return rng if rng is not None else random.Random(uuid.uuid4().int)


class ExponentialBackoff:
    """``initial * 2 ** failures`` seconds, at most ``maximum``, jittered by +/- ``JITTER``."""

    def __init__(self, initial_ms: int, maximum_ms: int, rng: random.Random) -> None:
        self.initial_ms = min(initial_ms, maximum_ms)
        self.maximum_ms = maximum_ms
        self.rng = rng
        # past this exponent the wait is the maximum anyway
        self._top = (
            math.log2(maximum_ms / max(self.initial_ms, 1)) if maximum_ms > self.initial_ms else 0
        )

    def seconds(self, failures: int) -> float:
        if self._top == 0:
            return self.initial_ms / 1000
        term = self.initial_ms * 2 ** min(failures, self._top)
        factor = self.rng.uniform(1 - JITTER, 1 + JITTER)
        return min(int(term * factor), self.maximum_ms) / 1000


@dataclass
class _Address:
    failures: int = 0  # failed attempts (or breaks) since the last established connection
    blocked_until: float = 0.0  # loop time before which no attempt is made


class ReconnectBackoff:
    """Per broker address: when a connection may be attempted again."""

    def __init__(self, backoff: ExponentialBackoff) -> None:
        self.backoff = backoff
        self._addresses: dict[tuple[str, int], _Address] = {}

    def delay(self, address: tuple[str, int], now: float) -> float:
        """Seconds to wait before connecting to ``address`` (0: now)."""
        state = self._addresses.get(address)
        return 0.0 if state is None else max(0.0, state.blocked_until - now)

    def failed(self, address: tuple[str, int], now: float) -> None:
        """An attempt failed, or an established connection broke."""
        state = self._addresses.setdefault(address, _Address())
        state.blocked_until = now + self.backoff.seconds(state.failures)
        state.failures += 1

    def connected(self, address: tuple[str, int]) -> None:
        self._addresses.pop(address, None)


class MetadataBackoff:
    """When the next metadata request may go (Java's ``Metadata.timeToAllowUpdate``)."""

    def __init__(self, backoff: ExponentialBackoff) -> None:
        self.backoff = backoff
        self.failures = 0  # failed refreshes since the last that succeeded
        self._allowed_at = 0.0

    def delay(self, now: float, *, new_topics: bool) -> float:
        """Seconds to wait before asking. Asking for topics not known yet waits only after a
        failure (Java's ``requestUpdateForNewTopics``)."""
        if new_topics and self.failures == 0:
            return 0.0
        return max(0.0, self._allowed_at - now)

    def succeeded(self, now: float) -> None:
        self.failures = 0
        self._allowed_at = now + self.backoff.seconds(0)

    def failed(self, now: float) -> None:
        self._allowed_at = now + self.backoff.seconds(self.failures)
        self.failures += 1
