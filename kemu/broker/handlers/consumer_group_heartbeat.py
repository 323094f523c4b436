"""ConsumerGroupHeartbeat (key 68), v0-v1.

KIP-848 consumer groups (``kemu.coordinator.group.consumer.group``): epoch 0 joins (v1: with
the member's own UUID as id; v0: the coordinator picks one), -1 leaves, -2 is a static member's
leave; otherwise the member's epoch, or the one before if the answer with the new one was lost
(else FENCED_MEMBER_EPOCH). The server-side assignor is "uniform" (default) or "range" (else
UNSUPPORTED_ASSIGNOR); subscriptions are topic names or (v1) a regular expression in Kafka's
RE2/J syntax, matched against whole topic names (``consumer.topic_regex``, with RE2: a pattern
RE2/J refuses gets INVALID_REGULAR_EXPRESSION when a member brings it first, with RE2/J's
words). Partitions a member must give up
are withheld first and handed to their new owner only once the heartbeats show them released.
The assignment is answered on a join, a full request, and whenever it changed. Sessions expire
after ``consumer.session.timeout.ms`` (group config, else ``group.consumer.session.timeout.ms``);
the interval answered is ``consumer.heartbeat.interval.ms``. Errors: INVALID_REQUEST,
UNKNOWN_MEMBER_ID, GROUP_ID_NOT_FOUND (no such group for a heartbeat or a leave, a join creates
it; a group of another type, but an empty classic one a join takes over), GROUP_MAX_SIZE_REACHED
(``group.consumer.max.size``: any heartbeat but a leave from a member id the group does not
know, unless it names an instance id a member holds), INVALID_REGULAR_EXPRESSION.

Groups are written to ``__consumer_offsets`` as Kafka's records (types 3, 5-8) and read back at
start, so members carry on across a restart with their ids, epochs and assignments.

Every broker answers (one group coordinator per process). As KafkaApis checks, the group needs
READ (GROUP_AUTHORIZATION_FAILED) and every subscribed topic name DESCRIBE
(TOPIC_AUTHORIZATION_FAILED for the request). Omissions: regex subscriptions are not filtered by
the member's ACLs; classic members cannot join a consumer group (no online migration);
rack-aware assignment is not done; KIP-1101's metadata hash is not written (Kafka recomputes
it).
"""

from __future__ import annotations

import datetime
from typing import Any

from kemu.broker.authorization import group_read, refused, undescribable_subscription
from kemu.broker.handlers import handler
from kemu.broker.handlers._groups import assignment, heartbeat_error_fields, heartbeat_fields
from kemu.cluster.context import RequestContext
from kemu.coordinator.group import config_resource  # noqa: F401 - registers the GROUP resource
from kemu.coordinator.group.consumer.group import ConsumerHeartbeat
from kemu.coordinator.group.errors import GroupError
from kemu.coordinator.group.service import group_coordinator
from kemu.protocol.topic_ids import wire_topic_id
from kemu.protocol.views.consumer_group_heartbeat import ConsumerGroupHeartbeatRequestView

API_KEY = 68


@handler(API_KEY, 0, 1)
def handle(ctx: RequestContext, request: ConsumerGroupHeartbeatRequestView) -> Any:
    denied = refused(ctx, request, group_read(request.group_id))
    if denied is None:
        denied = undescribable_subscription(ctx, request)
    if denied is not None:
        return denied
    owned = None
    if request.topic_partitions is not None:
        owned = frozenset(
            (wire_topic_id(tp.topic_id), index)
            for tp in request.topic_partitions
            for index in tp.partitions
        )
    rebalance = request.rebalance_timeout // datetime.timedelta(milliseconds=1)
    heartbeat = ConsumerHeartbeat(
        group_id=request.group_id,
        member_id=request.member_id,
        member_epoch=request.member_epoch,
        rebalance_timeout_ms=rebalance,
        subscribed_topic_names=(
            tuple(request.subscribed_topic_names)
            if request.subscribed_topic_names is not None
            else None
        ),
        subscribed_topic_regex=getattr(request, "subscribed_topic_regex", None),
        server_assignor=request.server_assignor,
        owned=owned,
        instance_id=request.instance_id,
        rack_id=request.rack_id,
        client_id=ctx.header.client_id or "",
        client_host=f"/{ctx.client_host}",
        generate_member_id=ctx.version == 0,
    )
    try:
        result = group_coordinator(ctx.runtime).consumer_heartbeat(heartbeat)
    except GroupError as error:
        return ctx.respond(
            throttle_time=datetime.timedelta(0),
            **heartbeat_error_fields(error, member_id=None),
            assignment=None,
        )
    return ctx.respond(
        throttle_time=datetime.timedelta(0),
        **heartbeat_fields(result),
        assignment=(assignment(ctx, result.assignment) if result.assignment is not None else None),
    )
