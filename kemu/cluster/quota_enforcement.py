"""Client quota enforcement: Kafka's rates, precedence and throttle times, sans IO.

What Kafka 4.4's ClientQuotaManager (and ClientRequestQuotaManager) computes, with time as an
argument so that the virtual clock works:

- one rate per *sensor*, measured as Kafka's ``Rate`` over a ``WindowedSum``: ``quota.window.num``
  samples of ``quota.window.size.seconds`` each (one extra kept), a sample restarted once it has
  seen no event for ``samples * window``, and a measuring window that counts missing prior
  samples as empty ones (so a first burst is spread over ``samples - 1`` windows);
- which stored quota applies to a (user, client id), and which sensor it is measured on (its
  metric tags), with Kafka's precedence, decided per quota key (``producer_byte_rate``,
  ``consumer_byte_rate``, ``request_percentage``): user+client-id, user+default client-id, user,
  default user+client-id, default user+default client-id, default user, client-id, default
  client-id. A quota of a default entity gives every user/client its own sensor; a quota of a
  named user is shared by all that user's client ids;
- a value is recorded first, then checked: over the bound, the throttle time is
  ``(observed - bound) / bound * window`` (``QuotaUtils.throttleTime``), rounded; request quotas
  cap it at one ``quota.window.size.seconds``.

``controller_mutation_rate`` is Kafka's ControllerMutationQuotaManager: the same sensors and
precedence, but each sensor is a ``TokenBucket`` (refilled at the quota per second, holding at
most ``controller.quota.window.num * controller.quota.window.size.seconds * quota``) charged with
the partitions a CreateTopics, CreatePartitions or DeleteTopics creates or deletes. A
``MutationQuota`` is one request's view of it: *strict* (request versions that know
THROTTLING_QUOTA_EXCEEDED) refuses a topic once the bucket is below zero and otherwise takes any
number of partitions; *permissive* (older versions) takes everything and only throttles. The
throttle time is the time the bucket needs to refill to zero.

A sensor (a rate or a bucket) on which nothing was recorded for an hour is dropped, as Kafka's
``Metrics`` expires quota sensors (``inactiveSensorExpirationTimeSeconds`` 3600, checked every
30 s by its ExpireSensorTask): ``SensorExpiry`` sweeps when a record comes at least 30 s after
the last sweep, on the time it is given, so the memory of clients gone quiet is freed. A sensor
made again starts empty, which is what an hour of silence leaves of the old one anyway.

The broker side (what is recorded when, the muted connection) is ``kemu/broker/throttling.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, TypeVar

from kemu.cluster.client_quotas import CLIENT_ID, USER, ClientQuotas, Entity
from kemu.cluster.services import Service

if TYPE_CHECKING:
    from kemu.cluster.context import Runtime

PRODUCE, FETCH, REQUEST = "producer_byte_rate", "consumer_byte_rate", "request_percentage"
MUTATION = "controller_mutation_rate"
UNLIMITED = float(2**63 - 1)  # the bound Kafka gives a sensor without a quota (Long.MAX_VALUE)
NANOS_TO_PERCENTAGE = 100.0 / 1_000_000_000  # a thread busy for one second is 100 %
SENSOR_EXPIRY_MS = 3_600_000  # ClientQuotaManager's InactiveSensorExpirationTimeSeconds
EXPIRY_SWEEP_MS = 30_000  # how often Kafka's Metrics runs its ExpireSensorTask

# Which kinds of entity carry a quota of one key (ClientQuotaManager's quotaTypesEnabled bits).
CLIENT_LEVEL, USER_LEVEL, USER_CLIENT_LEVEL = 1, 2, 4

Tags = tuple[str, str]  # (user tag, client-id tag); "" where the sensor is shared


def _java_div(numerator: int, denominator: int) -> int:
    """Java's long division (truncates towards zero)."""
    quotient = abs(numerator) // abs(denominator)
    return quotient if (numerator >= 0) == (denominator > 0) else -quotient


def _java_round(value: float) -> int:
    """Java's Math.round: the closest integer, halves rounded up."""
    return math.floor(value + 0.5)


@dataclass(slots=True)
class _Sample:
    start_ms: int
    last_event_ms: int
    value: float = 0.0
    events: int = 0

    def reset(self, now_ms: int) -> None:
        self.start_ms = now_ms
        self.last_event_ms = now_ms
        self.value = 0.0
        self.events = 0


@dataclass(slots=True)
class WindowedRate:
    """Kafka's ``Rate`` (per second) over a ``WindowedSum`` of ``samples`` windows."""

    samples: int
    window_ms: int
    last_record_ms: int = 0  # the sensor's lastRecordTime: it expires an hour after it
    _ring: list[_Sample] = field(default_factory=list)
    _current: int = 0

    def record(self, value: float, now_ms: int) -> None:
        self.last_record_ms = now_ms
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self.window_ms:
            sample = self._advance(now_ms)
        sample.value += value
        sample.events += 1
        sample.last_event_ms = now_ms

    def measure(self, now_ms: int) -> float:
        self._purge(now_ms)
        total = sum(sample.value for sample in self._ring)
        return total / (self.window_size_ms(now_ms) / 1000.0)

    def window_size_ms(self, now_ms: int) -> int:
        """The span the rate is measured over: since the oldest live sample, and at least
        ``samples - 1`` whole windows (missing ones count as empty)."""
        self._purge(now_ms)
        elapsed = now_ms - self._oldest(now_ms).start_ms
        full_windows = _java_div(elapsed, self.window_ms)
        least = self.samples - 1
        if full_windows < least:
            elapsed += (least - full_windows) * self.window_ms
        return max(elapsed, 1)

    def _current_sample(self, now_ms: int) -> _Sample:
        if not self._ring:
            self._ring.append(_Sample(now_ms, now_ms))
        return self._ring[self._current]

    def _advance(self, now_ms: int) -> _Sample:
        # One sample more than configured is kept, so the oldest can end inside the window.
        self._current = (self._current + 1) % (self.samples + 1)
        if self._current >= len(self._ring):
            sample = _Sample(now_ms, now_ms)
            self._ring.append(sample)
            return sample
        sample = self._ring[self._current]
        sample.reset(now_ms)
        return sample

    def _oldest(self, now_ms: int) -> _Sample:
        if not self._ring:
            self._ring.append(_Sample(now_ms, now_ms))
        oldest = self._ring[0]
        for sample in self._ring[1:]:
            if sample.start_ms < oldest.start_ms:
                oldest = sample
        return oldest

    def _purge(self, now_ms: int) -> None:
        expire_after = self.samples * self.window_ms
        for sample in self._ring:
            if now_ms - sample.last_event_ms >= expire_after:
                sample.reset(now_ms)


class _Expiring(Protocol):
    last_record_ms: int


SensorT = TypeVar("SensorT", bound=_Expiring)
KeyT = TypeVar("KeyT")


@dataclass(slots=True)
class SensorExpiry:
    """Drops the sensors of a map that saw no record for ``expire_ms`` (Kafka's
    ``Sensor.hasExpired``: strictly more), looking at most every ``sweep_ms``."""

    expire_ms: int = SENSOR_EXPIRY_MS
    sweep_ms: int = EXPIRY_SWEEP_MS
    _next_sweep_ms: int | None = None

    def sweep(self, sensors: dict[KeyT, SensorT], now_ms: int) -> None:
        if self._next_sweep_ms is not None and now_ms < self._next_sweep_ms:
            return
        self._next_sweep_ms = now_ms + self.sweep_ms
        expired = [
            tags for tags, s in sensors.items() if now_ms - s.last_record_ms > self.expire_ms
        ]
        for tags in expired:
            del sensors[tags]


def throttle_time_ms(
    rate: WindowedRate, bound: float, now_ms: int, max_throttle_ms: int | None = None
) -> int:
    """Once a value is recorded on ``rate``: 0 within ``bound``, else Kafka's throttle time
    (QuotaUtils.throttleTime, or boundedThrottleTime with ``max_throttle_ms``)."""
    observed = rate.measure(now_ms)
    if observed <= bound:
        return 0
    throttle = _java_round((observed - bound) / bound * rate.window_size_ms(now_ms))
    if max_throttle_ms is not None:
        throttle = min(throttle, max_throttle_ms)
    return int(throttle)


# Quota entities as ClientQuotas keys them: sorted (type, name) pairs, None for <default>.
def _entity(user: str | bool | None, client: str | bool | None) -> Entity:
    """False leaves a type out; None is its default entity."""
    pairs: list[tuple[str, str | None]] = []
    if client is not False:
        pairs.append((CLIENT_ID, client if isinstance(client, str) else None))
    if user is not False:
        pairs.append((USER, user if isinstance(user, str) else None))
    return tuple(sorted(pairs))


class QuotaLimits:
    """The quotas of one key, indexed for Kafka's lookups."""

    def __init__(self, key: str, quotas: dict[Entity, dict[str, float]]) -> None:
        self.bounds: dict[Entity, float] = {
            entity: values[key] for entity, values in quotas.items() if key in values
        }
        levels = 0
        for entity in self.bounds:
            kinds = {kind for kind, _ in entity}
            if kinds == {USER, CLIENT_ID}:
                levels |= USER_CLIENT_LEVEL
            elif kinds == {USER}:
                levels |= USER_LEVEL
            elif kinds == {CLIENT_ID}:
                levels |= CLIENT_LEVEL
        self.levels = levels

    @property
    def enabled(self) -> bool:
        return self.levels != 0

    def metric_tags(self, user: str, client_id: str) -> Tags:
        """The sensor a (user, client id) is measured on, as Kafka's DefaultQuotaCallback."""
        levels = self.levels
        if levels in (0, CLIENT_LEVEL):
            return ("", client_id)
        if levels == USER_LEVEL:
            return (user, "")
        if levels == USER_CLIENT_LEVEL:
            return (user, client_id)
        has = self.bounds.__contains__
        if has(_entity(user, client_id)) or has(_entity(user, None)):
            return (user, client_id)
        if has(_entity(user, False)):
            return (user, "")
        if has(_entity(None, client_id)) or has(_entity(None, None)):
            return (user, client_id)
        if has(_entity(None, False)):
            return (user, "")
        return ("", client_id)

    def bound(self, tags: Tags) -> float | None:
        """The quota of a sensor (None: unlimited), most specific entity first."""
        user, client_id = tags
        if user and client_id:
            candidates = [
                _entity(user, client_id),
                _entity(user, None),
                _entity(None, client_id),
                _entity(None, None),
            ]
        elif user:
            candidates = [_entity(user, False), _entity(None, False)]
        elif client_id:
            candidates = [_entity(False, client_id), _entity(False, None)]
        else:
            return None
        for candidate in candidates:
            found = self.bounds.get(candidate)
            if found is not None:
                return found
        return None


class QuotaManager:
    """One quota key: a rate per sensor, recorded and checked as ClientQuotaManager does."""

    def __init__(
        self,
        key: str,
        store: ClientQuotas,
        samples: int,
        window_ms: int,
        *,
        max_throttle_ms: int | None = None,
    ) -> None:
        self.key = key
        self.store = store
        self.samples = samples
        self.window_ms = window_ms
        self.max_throttle_ms = max_throttle_ms  # request quotas: one window at most
        self.rates: dict[Tags, WindowedRate] = {}
        self.expiry = SensorExpiry()
        self._limits: QuotaLimits | None = None
        self._version = -1

    @property
    def limits(self) -> QuotaLimits:
        if self._limits is None or self._version != self.store.version:
            self._limits = QuotaLimits(self.key, self.store.quotas)
            self._version = self.store.version
        return self._limits

    @property
    def enabled(self) -> bool:
        return self.limits.enabled

    def record(self, user: str, client_id: str, value: float, now_ms: int) -> int:
        """Record ``value`` at ``now_ms``; the throttle time in ms (0 within the quota)."""
        limits = self.limits
        if not limits.enabled:
            return 0
        tags = limits.metric_tags(user, client_id)
        rate = self._rate(tags, now_ms)
        rate.record(value, now_ms)
        bound = limits.bound(tags)
        if bound is None:
            return 0
        return throttle_time_ms(rate, bound, now_ms, self.max_throttle_ms)

    def record_no_throttle(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        limits = self.limits
        if limits.enabled:
            self._rate(limits.metric_tags(user, client_id), now_ms).record(value, now_ms)

    def unrecord(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        """Take back a recorded value (a throttled Fetch answers empty)."""
        self.record_no_throttle(user, client_id, -value, now_ms)

    def max_value_in_window(self, user: str, client_id: str) -> float | None:
        """The most that can be recorded at once without certain throttling (None: no limit)."""
        limits = self.limits
        if not limits.enabled:
            return None
        bound = limits.bound(limits.metric_tags(user, client_id))
        if bound is None:
            return None
        return bound * (self.samples - 1) * self.window_ms / 1000

    def _rate(self, tags: Tags, now_ms: int) -> WindowedRate:
        self.expiry.sweep(self.rates, now_ms)
        rate = self.rates.get(tags)
        if rate is None:
            rate = self.rates[tags] = WindowedRate(self.samples, self.window_ms, now_ms)
        return rate


@dataclass(slots=True)
class TokenBucket:
    """Kafka's ``TokenBucket`` stat: credits refilled at ``bound`` per second up to the burst
    ``samples * window * bound``; it starts empty at time 0, as Kafka's does."""

    tokens: float = 0.0
    last_update_ms: int = 0
    last_record_ms: int = 0  # the sensor's lastRecordTime: it expires an hour after it

    def measure(self, bound: float, burst: float, now_ms: int) -> float:
        self._refill(bound, burst, now_ms)
        return self.tokens

    def record(self, value: float, bound: float, burst: float, now_ms: int) -> None:
        self.last_record_ms = now_ms
        self._refill(bound, burst, now_ms)
        self.tokens = min(burst, self.tokens - value)

    def _refill(self, bound: float, burst: float, now_ms: int) -> None:
        self.tokens = min(burst, self.tokens + bound * ((now_ms - self.last_update_ms) / 1000.0))
        self.last_update_ms = now_ms


class MutationQuota:
    """One request's controller mutation quota (Kafka's Strict-/PermissiveControllerMutationQuota).

    ``record`` is called once per topic with the partitions it creates or deletes, after every
    other check; False means the topic is refused with THROTTLING_QUOTA_EXCEEDED (strict only).
    ``throttle_time`` is the answer's throttle: the last violation's, less the time since.
    """

    __slots__ = ("_bound", "_bucket", "_burst", "_last_throttle_ms", "_recorded_ms", "strict")

    def __init__(
        self, bucket: TokenBucket | None, bound: float, burst: float, *, strict: bool
    ) -> None:
        self._bucket = bucket  # None: no controller_mutation_rate quota at all
        self._bound = bound
        self._burst = burst
        self.strict = strict
        self._last_throttle_ms = 0
        self._recorded_ms = 0

    def record(self, permits: int, now_ms: int) -> bool:
        bucket = self._bucket
        if bucket is None:
            return True
        if self.strict:
            tokens = bucket.measure(self._bound, self._burst, now_ms)
            if tokens < 0:  # exhausted: refused, nothing recorded
                self._violated(tokens, now_ms)
                return False
            bucket.record(permits, self._bound, self._burst, now_ms)
            return True
        bucket.record(permits, self._bound, self._burst, now_ms)
        tokens = bucket.measure(self._bound, self._burst, now_ms)
        if tokens < 0:
            self._violated(tokens, now_ms)
        return True

    def throttle_time(self, now_ms: int) -> int:
        if self._last_throttle_ms == 0:
            return 0
        return max(0, self._last_throttle_ms - (now_ms - self._recorded_ms))

    def _violated(self, tokens: float, now_ms: int) -> None:
        # ControllerMutationQuotaManager.throttleTimeMs: the time to refill to zero.
        self._last_throttle_ms = _java_round(-tokens / self._bound * 1000)
        self._recorded_ms = now_ms


UNBOUNDED_MUTATIONS = MutationQuota(None, UNLIMITED, UNLIMITED, strict=False)


class MutationQuotaManager:
    """``controller_mutation_rate``: a token bucket per sensor, with ClientQuotaManager's
    precedence and sensors (ControllerMutationQuotaManager)."""

    def __init__(self, store: ClientQuotas, samples: int, window_ms: int) -> None:
        self.store = store
        self.samples = samples
        self.window_ms = window_ms
        self.buckets: dict[Tags, TokenBucket] = {}
        self.expiry = SensorExpiry()
        self._limits: QuotaLimits | None = None
        self._version = -1

    @property
    def limits(self) -> QuotaLimits:
        if self._limits is None or self._version != self.store.version:
            self._limits = QuotaLimits(MUTATION, self.store.quotas)
            self._version = self.store.version
        return self._limits

    def quota_for(self, user: str, client_id: str, *, strict: bool, now_ms: int) -> MutationQuota:
        """One request's quota; unbounded while no ``controller_mutation_rate`` is stored."""
        limits = self.limits
        if not limits.enabled:
            return UNBOUNDED_MUTATIONS
        tags = limits.metric_tags(user, client_id)
        self.expiry.sweep(self.buckets, now_ms)
        bucket = self.buckets.get(tags)
        if bucket is None:
            bucket = self.buckets[tags] = TokenBucket(last_record_ms=now_ms)
        bound = limits.bound(tags)
        if bound is None:
            bound = UNLIMITED
        burst = self.samples * (self.window_ms / 1000.0) * bound
        return MutationQuota(bucket, bound, burst, strict=strict)


class ClientThrottles:
    """The produce, fetch, request and controller mutation quota managers of one process."""

    def __init__(
        self,
        store: ClientQuotas,
        samples: int = 11,
        window_seconds: int = 1,
        *,
        mutation_samples: int = 11,
        mutation_window_seconds: int = 1,
    ) -> None:
        window_ms = window_seconds * 1000
        self.store = store
        self.produce = QuotaManager(PRODUCE, store, samples, window_ms)
        self.fetch = QuotaManager(FETCH, store, samples, window_ms)
        self.request = QuotaManager(REQUEST, store, samples, window_ms, max_throttle_ms=window_ms)
        self.mutation = MutationQuotaManager(
            store, mutation_samples, mutation_window_seconds * 1000
        )

    @property
    def active(self) -> bool:
        """Whether any client quota is stored at all (nothing is measured otherwise)."""
        return bool(self.store.quotas)


def _client_throttles(runtime: Runtime) -> ClientThrottles:
    from kemu.cluster.client_quotas import client_quotas

    def setting(name: str) -> int:
        return max(runtime.cluster.config.get_int(name), 1)  # Kafka's validators: at least 1

    return ClientThrottles(
        client_quotas(runtime),
        setting("quota.window.num"),
        setting("quota.window.size.seconds"),
        mutation_samples=setting("controller.quota.window.num"),
        mutation_window_seconds=setting("controller.quota.window.size.seconds"),
    )


CLIENT_THROTTLES = Service("client_throttles", _client_throttles)


def client_throttles(runtime: Runtime) -> ClientThrottles:
    return runtime.services.get(CLIENT_THROTTLES)
