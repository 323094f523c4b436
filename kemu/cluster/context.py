"""What a handler gets besides its request: which broker it runs on and the shared runtime."""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from kemu.cluster.clock import Clock, RealClock, wall_clock_ms
from kemu.cluster.model import BrokerNode, Cluster
from kemu.cluster.services import Services
from kemu.protocol import wire
from kemu.protocol.wire import RequestHeader

__all__ = ["ConnectionHooks", "RequestContext", "Runtime", "wall_clock_ms"]


@dataclass
class Runtime:
    """State shared by every virtual broker in one process.

    Feature services (fetch sessions, producer ids, group and share coordinators, ...) are in
    ``services`` (``kemu/cluster/services.py``), each behind the typed key its module declares,
    so that adding one does not touch this class.

    ``clock`` gives the time and runs every timer (``kemu/cluster/clock.py``); ``clock_ms`` is its
    ``now_ms``. Given only ``clock_ms`` (tests), the clock is a real one reading that function.
    """

    cluster: Cluster
    clock_ms: Callable[[], int] = wall_clock_ms
    max_versions: dict[int, int] | None = None  # --as-version caps, api key -> max version
    clock: Clock = field(default=None)  # type: ignore[assignment]  # set in __post_init__
    services: Services = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.services = Services(self)
        if self.clock is None:
            self.clock = RealClock(self.clock_ms)
        else:
            self.clock_ms = self.clock.now_ms


class ConnectionHooks:
    """What runs when one client connection closes (e.g. a share session it opened ends).

    A hook is registered under a key; registering the same key again replaces it.
    """

    __slots__ = ("_on_close",)

    def __init__(self) -> None:
        self._on_close: dict[Hashable, Callable[[], None]] = {}

    def on_close(self, key: Hashable, callback: Callable[[], None]) -> None:
        self._on_close[key] = callback

    def closed(self) -> None:
        hooks, self._on_close = self._on_close, {}
        for callback in hooks.values():
            callback()


# (api key, version, class name, *values) -> the message RequestContext.make_shared built
_SHARED_MESSAGES: dict[tuple[Hashable, ...], Any] = {}


@dataclass(slots=True)
class RequestContext:
    node: BrokerNode
    runtime: Runtime
    header: RequestHeader
    client_host: str = "127.0.0.1"
    connection: ConnectionHooks | None = None  # None when not called from a client connection
    # The connection's authentication (kemu.broker.security.session.SecuritySession) on a
    # listener configured with ``listeners``; None on the default PLAINTEXT listener.
    session: Any = None
    # CreateTopics/CreatePartitions/DeleteTopics: the request's controller mutation quota
    # (kemu.cluster.quota_enforcement.MutationQuota), whose throttle the answer carries.
    mutation_quota: Any = None

    @property
    def cluster(self) -> Cluster:
        return self.runtime.cluster

    @property
    def version(self) -> int:
        return self.header.api_version

    def now_ms(self) -> int:
        return self.runtime.clock_ms()

    @staticmethod
    def wait_ms() -> int:
        """Monotonic real milliseconds, for a request's own wait (a long poll's MaxWaitMs): the
        client times it in real time whatever the broker's clock (``--clock virtual``)."""
        return time.monotonic_ns() // 1_000_000

    @property
    def response_module(self) -> ModuleType:
        return wire.response_module(self.header.api_key, self.header.api_version)

    def make(self, class_name: str, **values: Any) -> Any:
        """A nested response class of this request's version, built from any-version fields."""
        header = self.header
        return wire.build(
            wire.response_class(header.api_key, header.api_version, class_name), **values
        )

    def make_shared(self, class_name: str, **values: Hashable) -> Any:
        """``make``'s message, built once per API version and values and then shared (kio
        messages are frozen): for a constant part repeated in every partition of an answer, such
        as a Fetch or Produce partition's neutral leader. Only for a few distinct values."""
        header = self.header
        key = (header.api_key, header.api_version, class_name, *values.items())
        found = _SHARED_MESSAGES.get(key)
        if found is None:
            found = _SHARED_MESSAGES[key] = self.make(class_name, **values)
        return found

    def respond(self, **values: Any) -> Any:
        return wire.build(
            wire.response_schema(self.header.api_key, self.header.api_version), **values
        )

    def has(self, class_name: str) -> bool:
        header = self.header
        return wire.response_has_class(header.api_key, header.api_version, class_name)
