"""The process's services, each behind a typed key: ``runtime.services.get(SHARE_PERSISTER)``.

A module that owns a service declares it once, ``NAME = Service("name", build)``, typed by what
``build`` returns; ``Services.get`` builds it on first use, so a service costs nothing until a
request needs it (the start-up path loads no coordinator). A lower layer that needs something
of a higher one declares a port: a ``Service`` typed by a ``typing.Protocol``, without ``build``,
that the higher layer ``provide``s when it creates its implementation (the group coordinator's
``SHARE_LEADERS``, provided by the broker's share-partition manager). ``built`` answers a service
only if it exists, for whoever must not create one (a timer closing, a metric, a reload).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

if TYPE_CHECKING:
    from kemu.cluster.context import Runtime

T = TypeVar("T")


class Service(Generic[T]):
    """A process-wide service or port: its name (for messages) and how it is built, if it is."""

    __slots__ = ("build", "name")

    def __init__(self, name: str, build: Callable[[Runtime], T] | None = None) -> None:
        self.name = name
        self.build = build

    def __repr__(self) -> str:
        return f"Service({self.name!r})"


class Services:
    """The services of one ``Runtime``, by their ``Service`` key."""

    __slots__ = ("_made", "_runtime")

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._made: dict[Service[Any], Any] = {}

    def get(self, service: Service[T]) -> T:
        """The service, built on first use; a port nobody provided raises LookupError."""
        if service in self._made:
            return cast(T, self._made[service])
        if service.build is None:
            raise LookupError(f"nothing provides {service.name}")
        made = self._made[service] = service.build(self._runtime)
        return made

    def built(self, service: Service[T]) -> T | None:
        """The service if it was built or provided, else None (nothing is built)."""
        return cast("T | None", self._made.get(service))

    def provide(self, service: Service[T], value: T) -> None:
        """Install ``value`` as the service (a port's implementation, a stand-in in tests)."""
        self._made[service] = value

    def discard(self, service: Service[Any]) -> None:
        """Forget the service; the next ``get`` builds it again."""
        self._made.pop(service, None)
