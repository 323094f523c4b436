"""DescribeConfigs over a plain socket, shared by the tests that compare kemu's broker, topic and
group config catalogues with a real Kafka 4.4.0's (the session's plain Kafka, ``kafka`` of
kemu/testing/kafka.py)."""

from __future__ import annotations

from typing import Any

from kemu.protocol import wire
from kemu.testing.wire_client import send_once

DESCRIBE_CONFIGS = 32


def call(address: str, api_key: int, version: int, body: Any, timeout: float = 30) -> Any:
    """One request on a fresh connection; the decoded answer's body."""
    return send_once(address, body, timeout, client_id="catalogue")


def describe_configs(
    address: str, resource_type: int, name: str, *, check_error: bool = True
) -> dict[str, Any]:
    """Every config of one resource (DescribeConfigs v4, synonyms and documentation), by name."""
    module = wire.request_module(DESCRIBE_CONFIGS, 4)
    resource = wire.build(
        module.DescribeConfigsResource,
        resource_type=resource_type,
        resource_name=name,
        configuration_keys=None,
    )
    body = wire.build(
        wire.request_schema(DESCRIBE_CONFIGS, 4),
        resources=(resource,),
        include_synonyms=True,
        include_documentation=True,
    )
    result = call(address, DESCRIBE_CONFIGS, 4, body, timeout=15).results[0]
    if check_error:
        assert result.error_code == 0, result.error_message
    return {entry.name: entry for entry in result.configs}


def summary(entry: Any) -> tuple[Any, ...]:
    synonyms = tuple((s.name, s.value, s.source) for s in entry.synonyms)
    return (entry.value, entry.config_type, entry.config_source, entry.read_only, synonyms)
