"""What the share-state RPCs (keys 83-87) have in common, as Kafka's ShareCoordinatorService
handles them.

A request names one group and, per topic id, partitions. An empty group id, no topics, or (except
for Initialize) a topic without partitions gets an empty answer. Every partition is answered on
its own: NOT_COORDINATOR when this broker does not lead the partition of ``__share_group_state``
that the key ``groupId:topicId:partition`` hashes to (the client finds the right broker with
FindCoordinator, key type SHARE, that same key), INVALID_REQUEST for a null topic id, otherwise
the share coordinator's result.
Results are grouped by topic id in request order. CLUSTER_ACTION on the cluster is needed
(CLUSTER_AUTHORIZATION_FAILED), as Kafka checks.

Each key's module is one ``share_state_handler`` call: the persister call it makes per partition
and, for the reads, the fields a successful answer carries.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any, Generic, Protocol, TypeVar

from kemu.broker.authorization import AclOperation, cluster_check, refused
from kemu.broker.handlers import HandlerFunction, handler
from kemu.cluster.context import RequestContext
from kemu.coordinator.share.persister import PersistedState, SharePartitionKey
from kemu.coordinator.share.service import (
    NOT_COORDINATOR_MESSAGE,
    ShareCoordinatorService,
    share_coordinator,
)
from kemu.coordinator.share.shard import ShardResult
from kemu.protocol.errors import ErrorCode
from kemu.protocol.topic_ids import ZERO_UUID, wire_topic_id


class StatePartition(Protocol):
    """What every key's partition data has (``kemu.protocol.views``' PartitionDataView)."""

    @property
    def partition(self) -> int: ...


Data = TypeVar("Data", bound=StatePartition, covariant=True)


class StateTopic(Protocol, Generic[Data]):
    @property
    def topic_id(self) -> uuid.UUID | None: ...
    @property
    def partitions(self) -> Sequence[Data]: ...


class StateRequest(Protocol, Generic[Data]):
    """The request of every share-state key: one group, per topic id its partitions' data."""

    @property
    def group_id(self) -> str: ...
    @property
    def topics(self) -> Sequence[StateTopic[Data]]: ...


D = TypeVar("D", bound=StatePartition)
# The persister call for one partition: (service, key, the request's partition data).
PartitionCall = Callable[[ShareCoordinatorService, SharePartitionKey, D], ShardResult]
# The fields a successful read answers beside partition and error (ctx makes nested structs).
StateFields = Callable[[RequestContext, PersistedState], dict[str, Any]]


def share_state_handler(
    module: str,
    api_key: int,
    min_version: int,
    max_version: int,
    *,
    operation: str,
    result_class: str,
    call: PartitionCall[D],
    state_fields: StateFields | None = None,
    partitions_required: bool = True,
) -> HandlerFunction:
    """Register (for ``module``, so the handler index names it) the handler of one share-state
    key: ``call`` per partition this broker leads; a PartitionResult carrying its error and
    message, plus ``state_fields`` of the state it read when it succeeded."""

    def handle(ctx: RequestContext, request: StateRequest[D]) -> Any:
        denied = refused(ctx, request, cluster_check(AclOperation.CLUSTER_ACTION))
        if denied is not None:
            return denied
        service = share_coordinator(ctx.runtime)

        def answer(key: SharePartitionKey, data: D) -> Any:
            result = call(service, key, data)
            if state_fields is None or result.error is not ErrorCode.none or result.state is None:
                return partition_error(ctx, key.partition, result.error, result.message)
            return ctx.make(
                "PartitionResult",
                partition=key.partition,
                error_code=ErrorCode.none,
                error_message=None,
                **state_fields(ctx, result.state),
            )

        return share_state_response(
            ctx,
            request,
            operation=operation,
            result_class=result_class,
            answer=answer,
            partitions_required=partitions_required,
        )

    handle.__module__ = module
    handle.__qualname__ = "handle"
    return handler(api_key, min_version, max_version)(handle)


PartitionAnswer = Callable[[SharePartitionKey, D], Any]


def share_state_response(
    ctx: RequestContext,
    request: StateRequest[D],
    *,
    operation: str,
    result_class: str,
    answer: PartitionAnswer[D],
    partitions_required: bool = True,
) -> Any:
    """The response: ``answer(key, partition_data)`` for every partition this broker leads."""
    if not request.group_id or not request.topics:
        return ctx.respond(results=())
    if partitions_required and any(not topic.partitions for topic in request.topics):
        return ctx.respond(results=())
    service = share_coordinator(ctx.runtime)
    by_topic: dict[uuid.UUID, dict[int, Any]] = {}
    for topic in request.topics:
        topic_id = wire_topic_id(topic.topic_id)
        results = by_topic.setdefault(topic_id, {})
        for data in topic.partitions:
            if topic_id == ZERO_UUID:
                results[data.partition] = partition_error(
                    ctx, data.partition, ErrorCode.invalid_request, "Invalid topic id."
                )
                continue
            key = SharePartitionKey(request.group_id, topic_id, data.partition)
            if service.is_coordinator(ctx.node.node_id, key):
                results[data.partition] = answer(key, data)
            else:
                results[data.partition] = partition_error(
                    ctx,
                    data.partition,
                    ErrorCode.not_coordinator,
                    f"Unable to {operation}: {NOT_COORDINATOR_MESSAGE}",
                )
    return ctx.respond(
        results=tuple(
            ctx.make(result_class, topic_id=topic_id, partitions=tuple(results.values()))
            for topic_id, results in by_topic.items()
        )
    )


def partition_error(
    ctx: RequestContext, partition: int, error: ErrorCode, message: str | None
) -> Any:
    """A PartitionResult carrying only the error, the rest left at Kafka's defaults."""
    return ctx.make("PartitionResult", partition=partition, error_code=error, error_message=message)
