"""IncrementalAlterConfigs (key 44), v0-v1.

Per config: SET (0), DELETE (1), APPEND (2) and SUBTRACT (3) to a LIST config (starting from
its default when it has no explicit value; INVALID_CONFIG "Can't APPEND to key ... because its
type is not LIST." otherwise), through the resource types registered in
``kemu.cluster.config_resources`` (TOPIC and BROKER; GROUP can be registered there). Kafka's
checks and messages as for AlterConfigs: duplicate resources or keys and null values for
anything but DELETE are INVALID_REQUEST, bad topic values INVALID_CONFIG, unknown topics
UNKNOWN_TOPIC_OR_PARTITION, non-dynamic broker configs INVALID_REQUEST. Changes apply at once
and are persisted; ``validate_only`` checks and changes nothing.

ALTER_CONFIGS is checked as Kafka's controller does (on the cluster for broker resources,
else on the topic or group; refusals first). Omissions: no alter-config policy;
BROKER_LOGGER and CLIENT_METRICS resources are not served.
"""

from __future__ import annotations

from typing import Any

from kemu.broker.authorization import AclOperation, config_refusal
from kemu.broker.handlers import handler
from kemu.cluster import client_metrics  # noqa: F401 - registers the CLIENT_METRICS resource
from kemu.cluster.config_resources import ConfigChange, alter_response
from kemu.cluster.context import RequestContext
from kemu.coordinator.group import config_resource  # noqa: F401 - registers the GROUP resource
from kemu.protocol.views.incremental_alter_configs import IncrementalAlterConfigsRequestView

API_KEY = 44


@handler(API_KEY, 0, 1)
def handle(ctx: RequestContext, request: IncrementalAlterConfigsRequestView) -> Any:
    resources = [
        (
            r.resource_type,
            r.resource_name,
            [ConfigChange(c.name, c.config_operation, c.value) for c in r.configs],
        )
        for r in request.resources
    ]
    return alter_response(
        ctx,
        resources,
        incremental=True,
        validate_only=request.validate_only,
        denied=lambda kind, name: config_refusal(ctx, AclOperation.ALTER_CONFIGS, kind, name),
    )
