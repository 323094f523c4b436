"""DescribeConfigs (key 32), v1-v4.

For each resource, the configs of its type as registered in ``kemu.cluster.config_resources``
(TOPIC and BROKER here; GROUP can be registered there): Kafka's names, effective values,
``config_source``, read-only and sensitive flags, synonyms (v1+, with ``include_synonyms``),
config types and documentation (v3+, with ``include_documentation``). ``configuration_keys``
narrows the answer (unknown names are left out); null or empty means every config. An unknown
topic is UNKNOWN_TOPIC_OR_PARTITION, a bad topic name INVALID_TOPIC_EXCEPTION; BROKER with an
empty name describes the cluster-wide dynamic defaults, with an id it must be the receiving
broker (INVALID_REQUEST otherwise, as Kafka says "Unexpected broker id ..."); an unknown
resource type is INVALID_REQUEST.

DESCRIBE_CONFIGS is checked as Kafka's ConfigHelper does (on the cluster for broker resources,
else on the topic or group); refused resources come last, with the error's message.
Omissions: BROKER_LOGGER and CLIENT_METRICS resources are not served.
"""

from __future__ import annotations

from typing import Any

from kemu.broker.authorization import AclOperation, config_refusal
from kemu.broker.handlers import handler
from kemu.cluster import (
    client_metrics,  # noqa: F401 - registers the CLIENT_METRICS resource
    config_resources,
)
from kemu.cluster.config_resources import ConfigEntry, ConfigResourceError
from kemu.cluster.context import RequestContext
from kemu.coordinator.group import config_resource  # noqa: F401 - registers the GROUP resource
from kemu.protocol.errors import ErrorCode, default_message
from kemu.protocol.views.describe_configs import DescribeConfigsRequestView

API_KEY = 32


@handler(API_KEY, 1, 4)
def handle(ctx: RequestContext, request: DescribeConfigsRequestView) -> Any:
    include_synonyms = bool(getattr(request, "include_synonyms", False))
    include_documentation = bool(getattr(request, "include_documentation", False))
    results = []
    refusals = []
    for resource in request.resources:
        denied = config_refusal(
            ctx, AclOperation.DESCRIBE_CONFIGS, resource.resource_type, resource.resource_name
        )
        if denied is not None:
            refusals.append(
                ctx.make(
                    "DescribeConfigsResult",
                    error_code=denied,
                    error_message=default_message(denied),
                    resource_type=resource.resource_type,
                    resource_name=resource.resource_name,
                    configs=(),
                )
            )
            continue
        code, message, configs = ErrorCode.none, None, ()
        try:
            entries = config_resources.describe(
                ctx,
                resource.resource_type,
                resource.resource_name,
                resource.configuration_keys,
                include_synonyms=include_synonyms,
                include_documentation=include_documentation,
            )
            configs = tuple(_entry(ctx, entry) for entry in entries)
        except ConfigResourceError as error:
            code, message = error.code, error.message
        results.append(
            ctx.make(
                "DescribeConfigsResult",
                error_code=code,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                configs=configs,
            )
        )
    return ctx.respond(results=tuple(results) + tuple(refusals))


def _entry(ctx: RequestContext, entry: ConfigEntry) -> Any:
    return ctx.make(
        "DescribeConfigsResourceResult",
        name=entry.name,
        value=entry.value,
        read_only=entry.read_only,
        config_source=int(entry.source),
        is_sensitive=entry.is_sensitive,
        synonyms=tuple(
            ctx.make("DescribeConfigsSynonym", name=s.name, value=s.value, source=int(s.source))
            for s in entry.synonyms
        ),
        config_type=int(entry.config_type),
        documentation=entry.documentation,
    )
