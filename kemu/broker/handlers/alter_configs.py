"""AlterConfigs (key 33), v0-v2: the legacy, replace-everything form.

Each resource's explicit configs become exactly the ones given (those left out are deleted),
through the resource types registered in ``kemu.cluster.config_resources`` (TOPIC and BROKER;
GROUP can be registered there). Kafka's checks: a resource named twice is INVALID_REQUEST
("Each resource must appear at most once."), as are duplicate keys and null values; topic
values Kafka would refuse are INVALID_CONFIG with its message, an unknown topic
UNKNOWN_TOPIC_OR_PARTITION; broker configs that are not dynamic are INVALID_REQUEST ("Cannot
update these configs dynamically: ..."), and BROKER "<id>" must be the receiving broker.
Changes apply at once (produce, fetch and retention read topic configs on every use) and are
persisted with the metadata. ``validate_only`` checks and changes nothing.

ALTER_CONFIGS is checked as Kafka's controller does (on the cluster for broker resources,
else on the topic or group; refusals first). Omissions: no alter-config policy.
"""

from __future__ import annotations

from typing import Any

from kemu.broker.authorization import AclOperation, config_refusal
from kemu.broker.handlers import handler
from kemu.cluster import client_metrics  # noqa: F401 - registers the CLIENT_METRICS resource
from kemu.cluster.config_resources import ConfigChange, OpType, alter_response
from kemu.cluster.context import RequestContext
from kemu.coordinator.group import config_resource  # noqa: F401 - registers the GROUP resource
from kemu.protocol.views.alter_configs import AlterConfigsRequestView

API_KEY = 33


@handler(API_KEY, 0, 2)
def handle(ctx: RequestContext, request: AlterConfigsRequestView) -> Any:
    resources = [
        (
            r.resource_type,
            r.resource_name,
            [ConfigChange(c.name, OpType.SET, c.value) for c in r.configs],
        )
        for r in request.resources
    ]
    return alter_response(
        ctx,
        resources,
        incremental=False,
        validate_only=request.validate_only,
        denied=lambda kind, name: config_refusal(ctx, AclOperation.ALTER_CONFIGS, kind, name),
    )
